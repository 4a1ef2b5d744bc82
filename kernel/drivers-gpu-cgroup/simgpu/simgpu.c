// SPDX-License-Identifier: GPL-2.0
/*
 * simgpu: a simulated GPU for testing the gpu cgroup controller.
 *
 * An ordinary drm_sched driver, on the model of v3d: each device is a DRM
 * render node with plain shmem GEM buffers, so that the controller's memory
 * accounting in the DRM core covers it like any other driver, and one or
 * more engines, each with its own drm_gpu_scheduler. A job asks an engine
 * to be busy for a given time. Each file has three entities per engine
 * (low, normal and high context priority); jobs may wait for syncobjs and
 * signal one, so a job can depend on another client's.
 *
 * The scheduler hands a job to the engine's "hardware" (run_job) when it
 * has credits for it (module parameter credits: jobs in flight per engine).
 * The hardware runs its jobs one after the other on its own timeline: a job
 * starts when it is handed over or when the previous one ends, whichever
 * is later, and ends its duration later. Its fence is signalled from an
 * hrtimer with that end as its timestamp, so that late timers (as under an
 * emulator) delay the completion interrupts but not the simulated GPU, and
 * the GPU time charged to the cgroup is the job's exact duration
 * (job_gpu_time).
 *
 * Every device but those in the module parameter fifo follows the gpu
 * cgroup controller's policy; those keep drm_sched's own policy (FIFO on
 * 6.12; gpu_sched.sched_policy on 7.3, where the cgroup order extends the
 * fair policy), so that benchmarks can compare both side by side. The
 * files of the devices in kernel_prio run every queue at
 * DRM_SCHED_PRIORITY_KERNEL, as nouveau's channels and imagination's
 * queues do, so that the tests see what the controller does with those.
 *
 * Closing a file waits as drm_sched_entity_flush() would: a process that
 * closes it waits (killably) until its queued jobs were handed to the
 * hardware, one that exits (killed or not) up to a second; then its
 * entities are stopped and the jobs still queued cancelled, each once what
 * it waits for is done. Jobs in flight are not waited for: they hold a
 * reference on the file's state, which holds one on the device and one on
 * the module (rmmod says it is in use until the last job is freed).
 *
 * Each device is a platform device bound to the simgpu platform driver, so
 * that it can be unbound with its files open, as a GPU unbound from its
 * driver or pulled out of the bus: "simgpu.N" written to the driver's
 * unbind file in sysfs. The device is unplugged (drm_dev_unplug(): no new
 * file, and every open or submission that started before has ended), the
 * closes that wait stop waiting, every open file's entities are stopped
 * (their queued jobs cancelled), the jobs on the hardware run to their end
 * (at most credits x 10 s) and are freed, and the schedulers go. The files
 * stay open until their processes close them, every new ioctl failing with
 * ENODEV (a wait that started before ends as its jobs do); the device's
 * memory goes with the last of them and of their jobs. A fence of its jobs
 * held elsewhere (a syncobj of another device's file) outlives it: on
 * 6.12, whose scheduler fences name their timeline from the scheduler,
 * asking such a fence its timeline's name afterwards reads freed memory,
 * as it does for every drm_sched driver there. Written to the bind file,
 * "simgpu.N" brings up a new device; while the old one's files are open,
 * its memory regions (drm/simgpu.N/system, or vram) stay registered under
 * the same names, and a limit written for such a name reaches the old
 * device's region, the first registered, until that goes.
 *
 * fdinfo shows drm-engine-<name> (ns busy) and the memory keys.
 *
 * With the module parameter vram, each device also has a simulated VRAM on
 * TTM, registered with the dmem cgroup controller (simgpu_vram.c).
 *
 * Locking: an engine's lock protects its hardware queue and timeline and
 * is taken with interrupts off (the hrtimer runs in hardirq context); a
 * file's lock protects its list of pending jobs, likewise. A device's
 * files_lock (a mutex) protects its list of the files whose entities live,
 * and is held while they are stopped.
 */

#include <linux/capability.h>
#include <linux/dma-fence.h>
#include <linux/hrtimer.h>
#include <linux/kref.h>
#include <linux/module.h>
#include <linux/platform_device.h>
#include <linux/sched.h>
#include <linux/slab.h>
#include <linux/uaccess.h>
#include <linux/version.h>
#include <linux/wait.h>

#include <drm/drm_drv.h>
#include <drm/drm_file.h>
#include <drm/drm_gem_shmem_helper.h>
#include <drm/drm_ioctl.h>
#include <drm/drm_managed.h>
#include <drm/drm_print.h>
#include <drm/drm_syncobj.h>
#include <drm/gpu_scheduler.h>

#include "simgpu_drm.h"
#include "simgpu_vram.h"

/*
 * simgpu builds against both bases of the series, Linux 6.12 and 7.3. What
 * it uses that changed in between: hrtimer_setup() replaced hrtimer_init()
 * (6.13), drm_driver.date went away (6.14), and a timeout handler says
 * DRM_GPU_SCHED_STAT_NO_HANG (6.17) where it said
 * DRM_GPU_SCHED_STAT_NOMINAL for a job that is only late.
 */
#if LINUX_VERSION_CODE >= KERNEL_VERSION(6, 17, 0)
#define SIMGPU_SCHED_STAT_LATE	DRM_GPU_SCHED_STAT_NO_HANG
#else
#define SIMGPU_SCHED_STAT_LATE	DRM_GPU_SCHED_STAT_NOMINAL
#endif

#define SIMGPU_MAX_DEVICES	8
#define SIMGPU_MAX_ENGINES	4
#define SIMGPU_MAX_DURATION	(10 * NSEC_PER_SEC)
#define SIMGPU_MAX_CREDITS	1024	/* ring-sized, as xe's and panthor's */
/* a file can fill the largest ring and keep as much queued */
#define SIMGPU_MAX_PENDING	(2 * SIMGPU_MAX_CREDITS)
#define SIMGPU_NR_PRIOS		3	/* low, normal, high */
#define SIMGPU_MAX_VRAM		4096	/* MiB */

static unsigned int devices = 1;
module_param(devices, uint, 0444);
MODULE_PARM_DESC(devices, "number of simulated GPUs (1-8, default 1)");

static unsigned int engines = 1;
module_param(engines, uint, 0444);
MODULE_PARM_DESC(engines, "engines per GPU (1-4, default 1)");

static unsigned int credits = 1;
module_param(credits, uint, 0444);
MODULE_PARM_DESC(credits, "jobs in flight per engine (1-1024, default 1)");

static unsigned int fifo;
module_param(fifo, uint, 0444);
MODULE_PARM_DESC(fifo, "bitmask of the devices that keep drm_sched's own policy instead of the gpu cgroup's (default 0)");

static unsigned int kernel_prio;
module_param(kernel_prio, uint, 0444);
MODULE_PARM_DESC(kernel_prio, "bitmask of the devices whose files' queues all run at DRM_SCHED_PRIORITY_KERNEL, as nouveau's channels and imagination's queues do (default 0)");

static unsigned int vram;
module_param(vram, uint, 0444);
MODULE_PARM_DESC(vram, "MiB of simulated VRAM per GPU, on TTM and registered with the dmem cgroup controller (0-4096, default 0: none; needs dmem)");

static const char *const simgpu_engine_names[SIMGPU_MAX_ENGINES] = {
	"render", "copy", "video", "compute",
};

static const enum drm_sched_priority simgpu_prios[SIMGPU_NR_PRIOS] = {
	DRM_SCHED_PRIORITY_LOW, DRM_SCHED_PRIORITY_NORMAL,
	DRM_SCHED_PRIORITY_HIGH,
};

struct simgpu_engine {
	struct drm_gpu_scheduler sched;
	char			name[24];	/* "simgpu0.render": traces */
	unsigned int		idx;
	u64			fence_context;
	spinlock_t		lock;		/* hw, busy_until, fence seqnos */
	struct list_head	hw;		/* jobs handed over, by end */
	u64			busy_until;	/* end of the last job handed over */
	u64			seqno;
	struct hrtimer		timer;
	atomic_t		nr_taken;	/* by run_job, not yet freed */
	wait_queue_head_t	idle_wq;	/* woken when nr_taken drops to 0 */
};

struct simgpu_device {
	struct drm_device	drm;
	struct simgpu_engine	engine[SIMGPU_MAX_ENGINES];
	struct simgpu_vram	*vram;		/* NULL: none */
	struct mutex		files_lock;	/* files, their entities' end */
	struct list_head	files;		/* whose entities live */
	bool			gone;		/* unplugged */
	bool			kernel_prio;	/* files' queues at KERNEL */
};

struct simgpu_file {
	struct kref		ref;		/* the file's, one per job */
	struct drm_device	*drm;		/* a reference, for the jobs */
	struct list_head	node;		/* on files, or empty */
	struct drm_sched_entity	entity[SIMGPU_MAX_ENGINES][SIMGPU_NR_PRIOS];
	struct mutex		submit_lock;	/* seqno, job order */
	u64			seqno;		/* of the last submitted job */
	spinlock_t		lock;		/* pending, done_*_ns */
	struct list_head	pending;	/* jobs by seqno, until finished */
	unsigned int		nr_pending;
	atomic_t		nr_queued;	/* pushed, not taken by run_job */
	wait_queue_head_t	wq;		/* jobs finished or taken, unplug */
	u64			done_queued_ns;	/* of the job that finished last */
	u64			done_start_ns;
	u64			done_end_ns;
	atomic64_t		busy_ns[SIMGPU_MAX_ENGINES];
};

struct simgpu_job {
	struct drm_sched_job	base;
	struct simgpu_file	*file;
	struct simgpu_engine	*engine;
	struct list_head	node;		/* on file->pending */
	struct list_head	hw_node;	/* on engine->hw */
	struct dma_fence_cb	finished_cb;
	struct dma_fence	*hw_fence;	/* outlives the job */
	u64			seqno;
	u64			duration_ns;
	u64			queued_ns;
	u64			start_ns;
	u64			end_ns;
	bool			taken;		/* by run_job */
	bool			ran;		/* hw_fence initialized */
};

static struct platform_device *simgpu_pdevs[SIMGPU_MAX_DEVICES];

static struct simgpu_device *to_simgpu(struct drm_device *drm)
{
	return container_of(drm, struct simgpu_device, drm);
}

static struct simgpu_job *to_simgpu_job(struct drm_sched_job *job)
{
	return container_of(job, struct simgpu_job, base);
}

static const char *simgpu_fence_driver_name(struct dma_fence *fence)
{
	return "simgpu";
}

static const char *simgpu_fence_timeline_name(struct dma_fence *fence)
{
	return "simgpu-engine";
}

static const struct dma_fence_ops simgpu_fence_ops = {
	.get_driver_name = simgpu_fence_driver_name,
	.get_timeline_name = simgpu_fence_timeline_name,
};

static void simgpu_file_free(struct kref *ref)
{
	struct simgpu_file *sfile = container_of(ref, struct simgpu_file, ref);
	struct drm_device *drm = sfile->drm;

	mutex_destroy(&sfile->submit_lock);
	kfree(sfile);
	/* the schedulers' memory: a job cancelled at unplug may be the last */
	drm_dev_put(drm);
	module_put(THIS_MODULE);
}

/* Signals the jobs whose simulated end has passed; rearms for the next. */
static enum hrtimer_restart simgpu_engine_timer(struct hrtimer *timer)
{
	struct simgpu_engine *engine =
		container_of(timer, struct simgpu_engine, timer);
	struct simgpu_job *job, *tmp;
	enum hrtimer_restart ret = HRTIMER_NORESTART;
	struct dma_fence *fence;
	unsigned long flags;
	u64 now = ktime_get_ns();

	spin_lock_irqsave(&engine->lock, flags);
	list_for_each_entry_safe(job, tmp, &engine->hw, hw_node) {
		if (job->end_ns > now) {
			hrtimer_set_expires(timer, ns_to_ktime(job->end_ns));
			ret = HRTIMER_RESTART;
			break;
		}
		list_del(&job->hw_node);
		atomic64_add(job->duration_ns,
			     &job->file->busy_ns[engine->idx]);
		/* the job may be freed once its fence signals */
		fence = job->hw_fence;
		/* the fence's lock is the engine's */
		dma_fence_signal_timestamp_locked(fence,
						  ns_to_ktime(job->end_ns));
		dma_fence_put(fence);
	}
	spin_unlock_irqrestore(&engine->lock, flags);
	return ret;
}

/* The engine's hardware takes the job: it runs after the ones before it. */
static struct dma_fence *simgpu_run_job(struct drm_sched_job *sched_job)
{
	struct simgpu_job *job = to_simgpu_job(sched_job);
	struct simgpu_engine *engine = job->engine;
	struct simgpu_file *sfile = job->file;
	unsigned long flags;
	bool first;
	u64 now;

	/* freed by the scheduler's work, which simgpu_engines_fini() waits for */
	job->taken = true;
	atomic_inc(&engine->nr_taken);
	if (atomic_dec_and_test(&sfile->nr_queued))
		wake_up_all(&sfile->wq);
	if (sched_job->s_fence->finished.error)
		return NULL;	/* cancelled */

	spin_lock_irqsave(&engine->lock, flags);
	now = ktime_get_ns();
	dma_fence_init(job->hw_fence, &simgpu_fence_ops, &engine->lock,
		       engine->fence_context, ++engine->seqno);
	job->ran = true;
	job->start_ns = max(now, engine->busy_until);
	job->end_ns = job->start_ns + job->duration_ns;
	engine->busy_until = job->end_ns;
	first = list_empty(&engine->hw);
	list_add_tail(&job->hw_node, &engine->hw);
	dma_fence_get(job->hw_fence);	/* the hardware's */
	if (first)
		hrtimer_start(&engine->timer, ns_to_ktime(job->end_ns),
			      HRTIMER_MODE_ABS);
	spin_unlock_irqrestore(&engine->lock, flags);
	/* the scheduler takes the creation reference */
	return job->hw_fence;
}

static u64 simgpu_job_gpu_time(struct drm_sched_job *sched_job)
{
	struct simgpu_job *job = to_simgpu_job(sched_job);

	return job->ran ? job->duration_ns : 0;
}

/* A simulated engine never hangs: a job only runs late under emulation. */
static enum drm_gpu_sched_stat simgpu_timedout_job(struct drm_sched_job *job)
{
	return SIMGPU_SCHED_STAT_LATE;
}

static void simgpu_free_job(struct drm_sched_job *sched_job)
{
	struct simgpu_job *job = to_simgpu_job(sched_job);
	struct simgpu_engine *engine = job->engine;
	struct simgpu_file *sfile = job->file;
	bool taken = job->taken;

	if (!job->ran)	/* else its references are the scheduler's */
		kfree(job->hw_fence);
	drm_sched_job_cleanup(sched_job);
	kfree(job);
	/* the file's reference keeps the engine and the file */
	if (taken && atomic_dec_and_test(&engine->nr_taken))
		wake_up_all(&engine->idle_wq);
	else if (!taken && atomic_dec_and_test(&sfile->nr_queued))
		wake_up_all(&sfile->wq);	/* cancelled in its queue */
	kref_put(&sfile->ref, simgpu_file_free);
}

static const struct drm_sched_backend_ops simgpu_sched_ops = {
	.run_job = simgpu_run_job,
	.timedout_job = simgpu_timedout_job,
	.free_job = simgpu_free_job,
	.job_gpu_time = simgpu_job_gpu_time,
};

/* The job finished, ran to its end or was cancelled: it is done for waiters. */
static void simgpu_job_finished(struct dma_fence *fence,
				struct dma_fence_cb *cb)
{
	struct simgpu_job *job = container_of(cb, struct simgpu_job,
					      finished_cb);
	struct simgpu_file *sfile = job->file;
	unsigned long flags;

	spin_lock_irqsave(&sfile->lock, flags);
	list_del(&job->node);
	sfile->nr_pending--;
	sfile->done_queued_ns = job->queued_ns;
	sfile->done_start_ns = job->start_ns;
	sfile->done_end_ns = job->end_ns;
	spin_unlock_irqrestore(&sfile->lock, flags);
	/* the job's reference keeps the file until free_job */
	wake_up_all(&sfile->wq);
}

static int simgpu_open(struct drm_device *drm, struct drm_file *file)
{
	struct simgpu_device *sdev = to_simgpu(drm);
	struct drm_gpu_scheduler *sched;
	struct simgpu_file *sfile;
	unsigned int i, p;
	int ret, idx;

	sfile = kzalloc(sizeof(*sfile), GFP_KERNEL);
	if (!sfile)
		return -ENOMEM;
	kref_init(&sfile->ref);
	__module_get(THIS_MODULE);
	sfile->drm = drm;
	drm_dev_get(drm);
	INIT_LIST_HEAD(&sfile->node);
	mutex_init(&sfile->submit_lock);
	spin_lock_init(&sfile->lock);
	INIT_LIST_HEAD(&sfile->pending);
	init_waitqueue_head(&sfile->wq);

	/* the schedulers live until simgpu_remove() has waited for this */
	if (!drm_dev_enter(drm, &idx)) {
		kref_put(&sfile->ref, simgpu_file_free);
		return -ENODEV;
	}
	for (i = 0; i < engines; i++) {
		sched = &sdev->engine[i].sched;
		for (p = 0; p < SIMGPU_NR_PRIOS; p++) {
			ret = drm_sched_entity_init(&sfile->entity[i][p],
						    sdev->kernel_prio ?
						    DRM_SCHED_PRIORITY_KERNEL :
						    simgpu_prios[p], &sched, 1,
						    NULL);
			if (ret)
				goto err;
		}
	}
	mutex_lock(&sdev->files_lock);
	list_add_tail(&sfile->node, &sdev->files);
	mutex_unlock(&sdev->files_lock);
	drm_dev_exit(idx);
	file->driver_priv = sfile;
	return 0;

err:
	while (p--)
		drm_sched_entity_destroy(&sfile->entity[i][p]);
	while (i--)
		for (p = 0; p < SIMGPU_NR_PRIOS; p++)
			drm_sched_entity_destroy(&sfile->entity[i][p]);
	drm_dev_exit(idx);
	kref_put(&sfile->ref, simgpu_file_free);
	return ret;
}

/* Stops @sfile's entities: their queued jobs are cancelled. */
static void simgpu_file_stop(struct simgpu_device *sdev,
			     struct simgpu_file *sfile)
{
	unsigned int i, p;

	lockdep_assert_held(&sdev->files_lock);
	list_del_init(&sfile->node);
	for (i = 0; i < engines; i++)
		for (p = 0; p < SIMGPU_NR_PRIOS; p++)
			drm_sched_entity_fini(&sfile->entity[i][p]);
}

/*
 * Marks @sdev gone, so that the closes that wait stop waiting, and stops
 * the entities of every file of it: its schedulers go next.
 */
static void simgpu_files_stop(struct simgpu_device *sdev)
{
	struct simgpu_file *sfile, *tmp;

	mutex_lock(&sdev->files_lock);
	WRITE_ONCE(sdev->gone, true);
	list_for_each_entry_safe(sfile, tmp, &sdev->files, node) {
		wake_up_all(&sfile->wq);
		simgpu_file_stop(sdev, sfile);
	}
	mutex_unlock(&sdev->files_lock);
}

/* Whether @sfile's close need not wait: no job queued, or no device. */
static bool simgpu_flushed(struct simgpu_device *sdev,
			   struct simgpu_file *sfile)
{
	return !atomic_read(&sfile->nr_queued) || READ_ONCE(sdev->gone);
}

static void simgpu_postclose(struct drm_device *drm, struct drm_file *file)
{
	struct simgpu_device *sdev = to_simgpu(drm);
	struct simgpu_file *sfile = file->driver_priv;

	/*
	 * Its queued jobs go to the hardware first, as
	 * drm_sched_entity_flush() lets them, but outside drm_dev_enter(),
	 * whose section every device's unplug waits for: an unplug ends the
	 * wait instead.
	 */
	if (current->flags & PF_EXITING)
		wait_event_timeout(sfile->wq, simgpu_flushed(sdev, sfile),
				   MAX_WAIT_SCHED_ENTITY_Q_EMPTY);
	else
		wait_event_killable(sfile->wq, simgpu_flushed(sdev, sfile));
	/* unless simgpu_remove() stopped them */
	mutex_lock(&sdev->files_lock);
	if (!list_empty(&sfile->node))
		simgpu_file_stop(sdev, sfile);
	mutex_unlock(&sdev->files_lock);
	kref_put(&sfile->ref, simgpu_file_free);
}

static int simgpu_gem_create_ioctl(struct drm_device *drm, void *data,
				   struct drm_file *file)
{
	struct drm_simgpu_gem_create *args = data;
	struct simgpu_device *sdev = to_simgpu(drm);
	struct drm_gem_shmem_object *shmem;
	int ret;

	if ((args->flags & ~(SIMGPU_GEM_VRAM | SIMGPU_GEM_FALLBACK)) ||
	    args->flags == SIMGPU_GEM_FALLBACK ||
	    !args->size || args->size > SZ_16G)
		return -EINVAL;
	if (args->flags & SIMGPU_GEM_VRAM) {
		if (!sdev->vram)
			return -ENODEV;
		return simgpu_vram_gem_create(sdev->vram, file,
					      PAGE_ALIGN(args->size),
					      args->flags & SIMGPU_GEM_FALLBACK,
					      &args->handle, &args->size);
	}

	shmem = drm_gem_shmem_create(drm, PAGE_ALIGN(args->size));
	if (IS_ERR(shmem))
		return PTR_ERR(shmem);

	ret = drm_gem_handle_create(file, &shmem->base, &args->handle);
	if (!ret)
		args->size = shmem->base.size;
	/* the handle holds the reference now, or the buffer goes */
	drm_gem_object_put(&shmem->base);
	return ret;
}

static int simgpu_gem_info_ioctl(struct drm_device *drm, void *data,
				 struct drm_file *file)
{
	struct drm_simgpu_gem_info *args = data;
	struct drm_gem_object *obj;

	obj = drm_gem_object_lookup(file, args->handle);
	if (!obj)
		return -ENOENT;
	args->placement = simgpu_gem_placement(obj);
	drm_gem_object_put(obj);
	return 0;
}

static struct drm_sched_entity *simgpu_entity(struct simgpu_file *sfile,
					      const struct drm_simgpu_submit *args)
{
	unsigned int p = args->priority < 0 ? 0 : args->priority > 0 ? 2 : 1;

	return &sfile->entity[args->engine][p];
}

static int simgpu_submit_ioctl(struct drm_device *drm, void *data,
			       struct drm_file *file)
{
	struct simgpu_device *sdev = to_simgpu(drm);
	struct simgpu_file *sfile = file->driver_priv;
	struct drm_simgpu_submit *args = data;
	struct drm_syncobj *out = NULL;
	struct simgpu_job *job;
	unsigned long flags;
	int ret, idx;

	if (args->engine >= engines || !args->duration_ns ||
	    args->duration_ns > SIMGPU_MAX_DURATION)
		return -EINVAL;
	if (args->priority < -1023 || args->priority > 1023)
		return -ERANGE;
	if (args->priority > 0 && !capable(CAP_SYS_NICE))
		return -EPERM;
	/* the entity and its scheduler live until simgpu_remove() waited */
	if (!drm_dev_enter(drm, &idx))
		return -ENODEV;
	if (args->out_syncobj) {
		out = drm_syncobj_find(file, args->out_syncobj);
		if (!out) {
			ret = -ENOENT;
			goto out_exit;
		}
	}

	job = kzalloc(sizeof(*job), GFP_KERNEL);
	if (!job) {
		ret = -ENOMEM;
		goto out_put;
	}
	job->file = sfile;
	job->engine = &sdev->engine[args->engine];
	job->duration_ns = args->duration_ns;
	/* run_job must not fail: its fence now */
	job->hw_fence = kzalloc(sizeof(*job->hw_fence), GFP_KERNEL);
	if (!job->hw_fence) {
		kfree(job);
		ret = -ENOMEM;
		goto out_put;
	}

	ret = drm_sched_job_init(&job->base, simgpu_entity(sfile, args), 1,
				 sfile, file->client_id);
	if (ret) {
		kfree(job->hw_fence);
		kfree(job);
		goto out_put;
	}
	if (args->in_syncobj) {
		ret = drm_sched_job_add_syncobj_dependency(&job->base, file,
							   args->in_syncobj, 0);
		if (ret)
			goto out_cleanup;
	}

	mutex_lock(&sfile->submit_lock);
	spin_lock_irqsave(&sfile->lock, flags);
	if (sfile->nr_pending >= SIMGPU_MAX_PENDING) {
		spin_unlock_irqrestore(&sfile->lock, flags);
		mutex_unlock(&sfile->submit_lock);
		ret = -EBUSY;
		goto out_cleanup;
	}
	job->seqno = ++sfile->seqno;
	sfile->nr_pending++;
	list_add_tail(&job->node, &sfile->pending);
	spin_unlock_irqrestore(&sfile->lock, flags);

	drm_sched_job_arm(&job->base);
	kref_get(&sfile->ref);	/* dropped by free_job */
	atomic_inc(&sfile->nr_queued);	/* until run_job or free_job */
	job->queued_ns = ktime_get_ns();
	/* cannot fail: the fence is not signalled before it is pushed */
	dma_fence_add_callback(&job->base.s_fence->finished, &job->finished_cb,
			       simgpu_job_finished);
	if (out)
		drm_syncobj_replace_fence(out, &job->base.s_fence->finished);
	args->seqno = job->seqno;
	drm_sched_entity_push_job(&job->base);
	mutex_unlock(&sfile->submit_lock);
	ret = 0;
	goto out_put;

out_cleanup:
	drm_sched_job_cleanup(&job->base);
	kfree(job->hw_fence);
	kfree(job);
out_put:
	if (out)
		drm_syncobj_put(out);
out_exit:
	drm_dev_exit(idx);
	return ret;
}

/* Whether every job up to @seqno has finished. */
static bool simgpu_done(struct simgpu_file *sfile, u64 seqno)
{
	struct simgpu_job *first;
	unsigned long flags;
	bool done;

	spin_lock_irqsave(&sfile->lock, flags);
	first = list_first_entry_or_null(&sfile->pending, struct simgpu_job,
					 node);
	done = !first || first->seqno > seqno;
	spin_unlock_irqrestore(&sfile->lock, flags);
	return done;
}

static int simgpu_wait_ioctl(struct drm_device *drm, void *data,
			     struct drm_file *file)
{
	struct simgpu_file *sfile = file->driver_priv;
	struct drm_simgpu_wait *args = data;
	unsigned long flags;
	long ret;

	if (!args->seqno || args->seqno > READ_ONCE(sfile->seqno) ||
	    args->timeout_ns < 0)
		return -EINVAL;

	ret = wait_event_interruptible_timeout(sfile->wq,
					       simgpu_done(sfile, args->seqno),
					       nsecs_to_jiffies(args->timeout_ns));
	if (ret < 0)
		return ret;
	if (!ret && !simgpu_done(sfile, args->seqno))
		return -ETIME;

	spin_lock_irqsave(&sfile->lock, flags);
	args->queued_ns = sfile->done_queued_ns;
	args->start_ns = sfile->done_start_ns;
	args->end_ns = sfile->done_end_ns;
	spin_unlock_irqrestore(&sfile->lock, flags);
	return 0;
}

static void simgpu_show_fdinfo(struct drm_printer *p, struct drm_file *file)
{
	struct simgpu_file *sfile = file->driver_priv;
	unsigned int i;

	for (i = 0; i < engines; i++)
		drm_printf(p, "drm-engine-%s:\t%llu ns\n",
			   simgpu_engine_names[i],
			   atomic64_read(&sfile->busy_ns[i]));
	drm_show_memory_stats(p, file);
}

static const struct drm_ioctl_desc simgpu_ioctls[] = {
	DRM_IOCTL_DEF_DRV(SIMGPU_GEM_CREATE, simgpu_gem_create_ioctl,
			  DRM_RENDER_ALLOW),
	DRM_IOCTL_DEF_DRV(SIMGPU_SUBMIT, simgpu_submit_ioctl, DRM_RENDER_ALLOW),
	DRM_IOCTL_DEF_DRV(SIMGPU_WAIT, simgpu_wait_ioctl, DRM_RENDER_ALLOW),
	DRM_IOCTL_DEF_DRV(SIMGPU_GEM_INFO, simgpu_gem_info_ioctl,
			  DRM_RENDER_ALLOW),
};

static const struct file_operations simgpu_fops = {
	.owner		= THIS_MODULE,
	DRM_GEM_FOPS,
	.show_fdinfo	= drm_show_fdinfo,
};

static const struct drm_driver simgpu_driver = {
	.driver_features	= DRIVER_GEM | DRIVER_RENDER | DRIVER_SYNCOBJ,
	.open			= simgpu_open,
	.postclose		= simgpu_postclose,
	.show_fdinfo		= simgpu_show_fdinfo,
	.ioctls			= simgpu_ioctls,
	.num_ioctls		= ARRAY_SIZE(simgpu_ioctls),
	.fops			= &simgpu_fops,
	DRM_GEM_SHMEM_DRIVER_OPS,
	.name			= "simgpu",
	.desc			= "Simulated GPU for the gpu cgroup controller",
#if LINUX_VERSION_CODE < KERNEL_VERSION(6, 14, 0)
	.date			= "20261123",
#endif
	.major			= 2,
	.minor			= 1,	/* 2.1: VRAM, GEM_INFO */
};

/*
 * Lets the jobs the schedulers took finish and be freed, then stops the
 * schedulers (which free no job they still hold on 6.12, and only through
 * a cancel_job callback on 7.3).
 */
static void simgpu_engines_fini(struct simgpu_device *sdev, unsigned int n)
{
	struct simgpu_engine *engine;
	unsigned int i;

	for (i = 0; i < n; i++) {
		engine = &sdev->engine[i];
		wait_event(engine->idle_wq, !atomic_read(&engine->nr_taken));
		/* waits for the callback that emptied the list to return */
		hrtimer_cancel(&engine->timer);
		drm_sched_fini(&engine->sched);
	}
}

static int simgpu_engines_init(struct simgpu_device *sdev, unsigned int id)
{
	struct drm_sched_init_args args = {
		.ops = &simgpu_sched_ops,
		.num_rqs = DRM_SCHED_PRIORITY_COUNT,
		.credit_limit = credits,
		.timeout = MAX_SCHEDULE_TIMEOUT,
		.dev = sdev->drm.dev,
		.gpucg = fifo & BIT(id) ? NULL : sdev->drm.gpucg,
	};
	struct simgpu_engine *engine;
	unsigned int i;
	int ret;

	sdev->kernel_prio = kernel_prio & BIT(id);
	for (i = 0; i < engines; i++) {
		engine = &sdev->engine[i];
		engine->idx = i;
		engine->fence_context = dma_fence_context_alloc(1);
		spin_lock_init(&engine->lock);
		INIT_LIST_HEAD(&engine->hw);
		init_waitqueue_head(&engine->idle_wq);
#if LINUX_VERSION_CODE >= KERNEL_VERSION(6, 13, 0)
		hrtimer_setup(&engine->timer, simgpu_engine_timer,
			      CLOCK_MONOTONIC, HRTIMER_MODE_ABS);
#else
		hrtimer_init(&engine->timer, CLOCK_MONOTONIC, HRTIMER_MODE_ABS);
		engine->timer.function = simgpu_engine_timer;
#endif
		snprintf(engine->name, sizeof(engine->name), "simgpu%u.%s", id,
			 simgpu_engine_names[i]);
		args.name = engine->name;
		ret = drm_sched_init(&engine->sched, &args);
		if (ret) {
			simgpu_engines_fini(sdev, i);
			return ret;
		}
	}
	return 0;
}

/*
 * Binds a simgpu device: its VRAM and schedulers, then its render node.
 * Everything but the schedulers is managed (devres, drmm); the schedulers
 * go in simgpu_remove(), or here on failure.
 */
static int simgpu_probe(struct platform_device *pdev)
{
	struct simgpu_device *sdev;
	int ret;

	sdev = devm_drm_dev_alloc(&pdev->dev, &simgpu_driver,
				  struct simgpu_device, drm);
	if (IS_ERR(sdev))
		return PTR_ERR(sdev);
	ret = drmm_mutex_init(&sdev->drm, &sdev->files_lock);
	if (ret)
		return ret;
	INIT_LIST_HEAD(&sdev->files);

	/* the region before the device goes public: the core registers none then */
	ret = simgpu_vram_init(&sdev->drm, (u64)vram << 20, &sdev->vram);
	if (ret)
		return ret;
	/* as v3d does: the schedulers before the device goes public */
	ret = simgpu_engines_init(sdev, pdev->id);
	if (ret)
		return ret;
	ret = drm_dev_register(&sdev->drm, 0);
	if (ret) {
		/* a file may have been opened meanwhile */
		simgpu_files_stop(sdev);
		simgpu_engines_fini(sdev, engines);
		return ret;
	}
	platform_set_drvdata(pdev, sdev);
	return 0;
}

/*
 * Unbinds a simgpu device, with its files open or not (see the top of this
 * file): once drm_dev_unplug() returns, no file opens and no job is
 * submitted; closes stop waiting, every entity is stopped, and the
 * schedulers go once the jobs they took are freed.
 */
static void simgpu_remove(struct platform_device *pdev)
{
	struct simgpu_device *sdev = platform_get_drvdata(pdev);

	drm_dev_unplug(&sdev->drm);
	simgpu_files_stop(sdev);
	simgpu_engines_fini(sdev, engines);
}

static struct platform_driver simgpu_platform_driver = {
	.probe	= simgpu_probe,
	.remove	= simgpu_remove,
	.driver	= {
		.name		= "simgpu",
		/* simgpu_init() sees whether each device was bound */
		.probe_type	= PROBE_FORCE_SYNCHRONOUS,
	},
};

static void simgpu_unregister(unsigned int n)
{
	while (n--)
		platform_device_unregister(simgpu_pdevs[n]);
	platform_driver_unregister(&simgpu_platform_driver);
}

static int __init simgpu_init(void)
{
	struct platform_device *pdev;
	unsigned int i;
	int ret;

	if (!devices || devices > SIMGPU_MAX_DEVICES ||
	    !engines || engines > SIMGPU_MAX_ENGINES ||
	    !credits || credits > SIMGPU_MAX_CREDITS || vram > SIMGPU_MAX_VRAM)
		return -EINVAL;

	ret = platform_driver_register(&simgpu_platform_driver);
	if (ret)
		return ret;
	for (i = 0; i < devices; i++) {
		/* probed as it is added: a device that failed has no data */
		pdev = platform_device_register_simple("simgpu", i, NULL, 0);
		if (IS_ERR(pdev) || !platform_get_drvdata(pdev)) {
			if (!IS_ERR(pdev))
				platform_device_unregister(pdev);
			simgpu_unregister(i);
			return IS_ERR(pdev) ? PTR_ERR(pdev) : -ENODEV;
		}
		simgpu_pdevs[i] = pdev;
	}
	return 0;
}

static void __exit simgpu_exit(void)
{
	simgpu_unregister(devices);
}

module_init(simgpu_init);
module_exit(simgpu_exit);

MODULE_DESCRIPTION("Simulated GPU for testing the gpu cgroup controller");
MODULE_LICENSE("GPL");
