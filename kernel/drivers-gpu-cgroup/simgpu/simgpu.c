// SPDX-License-Identifier: GPL-2.0
/*
 * simgpu: a simulated GPU for testing the gpu cgroup controller.
 *
 * Each device is a DRM render node with plain shmem GEM buffers, so that the
 * controller's memory accounting in the DRM core covers it like any other
 * driver, and one or more engines. A job asks an engine to be busy for a
 * given time; an engine runs one job at a time, for its duration, on an
 * hrtimer, and takes the next one from the gpu controller's scheduling core,
 * which orders the queued jobs of all cgroups by priority and weighted GPU
 * time. Jobs are not preempted once started, like on an engine without
 * preemption.
 *
 * An engine keeps its own timeline: a job queued behind another starts when
 * that one ends, at its start plus its duration, and its timer is set to
 * that absolute time, so that late timers (as under an emulator) delay the
 * completion interrupts but not the simulated GPU.
 *
 * Every file is a gpu controller client whose owner is the task that last
 * submitted on it, following drm_file_update_pid(). fdinfo shows
 * drm-engine-<name> (ns busy) and the drm-total-/drm-resident- memory keys.
 *
 * Locking: an engine's lock protects its running job and pick statistics
 * and nests outside the controller's engine lock; a file's lock protects its
 * list of pending jobs. Both are taken with interrupts off: jobs finish in
 * hrtimer (hardirq) context.
 */

#include <linux/capability.h>
#include <linux/cgroup_gpu.h>
#include <linux/hrtimer.h>
#include <linux/module.h>
#include <linux/platform_device.h>
#include <linux/sched/signal.h>
#include <linux/slab.h>
#include <linux/uaccess.h>
#include <linux/wait.h>

#include <drm/drm_drv.h>
#include <drm/drm_file.h>
#include <drm/drm_gem_shmem_helper.h>
#include <drm/drm_ioctl.h>
#include <drm/drm_print.h>

#include "simgpu_drm.h"

#define SIMGPU_MAX_DEVICES	8
#define SIMGPU_MAX_ENGINES	4
#define SIMGPU_MAX_DURATION	(10 * NSEC_PER_SEC)
#define SIMGPU_PICK_SAMPLES	8192

static unsigned int devices = 1;
module_param(devices, uint, 0444);
MODULE_PARM_DESC(devices, "number of simulated GPUs (1-8, default 1)");

static unsigned int engines = 1;
module_param(engines, uint, 0444);
MODULE_PARM_DESC(engines, "engines per GPU (1-4, default 1)");

static const char *const simgpu_engine_names[SIMGPU_MAX_ENGINES] = {
	"render", "copy", "video", "compute",
};

struct simgpu_job;

struct simgpu_engine {
	struct gpucg_engine	*gpucg;
	unsigned int		idx;
	struct hrtimer		timer;
	spinlock_t		lock;		/* running, picks, pick_ns */
	struct simgpu_job	*running;
	u64			picks;
	u32			pick_ns[SIMGPU_PICK_SAMPLES];
};

struct simgpu_device {
	struct drm_device	drm;
	struct platform_device	*pdev;
	struct simgpu_engine	engine[SIMGPU_MAX_ENGINES];
};

struct simgpu_file {
	struct gpucg_client	*client;
	struct mutex		submit_lock;	/* owner updates, seqno */
	u64			seqno;		/* of the last submitted job */
	spinlock_t		lock;		/* pending, done_*_ns */
	struct list_head	pending;	/* jobs by seqno */
	wait_queue_head_t	wq;
	u64			done_queued_ns;	/* of the job that finished last */
	u64			done_start_ns;
	u64			done_end_ns;
	atomic64_t		busy_ns[SIMGPU_MAX_ENGINES];
};

struct simgpu_job {
	struct gpucg_work	work;
	struct simgpu_file	*file;
	struct list_head	node;		/* on file->pending */
	u64			seqno;
	u64			duration_ns;
	u64			start_ns;
	unsigned int		engine;
};

static struct simgpu_device *simgpu_devices[SIMGPU_MAX_DEVICES];

static struct simgpu_device *to_simgpu(struct drm_device *drm)
{
	return container_of(drm, struct simgpu_device, drm);
}

/*
 * Starts the next job, if any, on an idle engine, at @now on its timeline
 * or when the job was queued, whichever is later.
 */
static void simgpu_engine_next(struct simgpu_engine *engine, u64 now)
{
	struct gpucg_work *work;
	struct simgpu_job *job;
	u64 t0;

	lockdep_assert_held(&engine->lock);
	t0 = ktime_get_ns();
	work = gpucg_work_pick(engine->gpucg);
	engine->pick_ns[engine->picks++ % SIMGPU_PICK_SAMPLES] =
		min_t(u64, ktime_get_ns() - t0, U32_MAX);
	if (!work)
		return;

	job = container_of(work, struct simgpu_job, work);
	job->start_ns = max(now, work->queued_ns);
	engine->running = job;
	hrtimer_start(&engine->timer,
		      ns_to_ktime(job->start_ns + job->duration_ns),
		      HRTIMER_MODE_ABS);
}

static void simgpu_engine_kick(struct simgpu_engine *engine)
{
	unsigned long flags;

	spin_lock_irqsave(&engine->lock, flags);
	if (!engine->running)
		simgpu_engine_next(engine, ktime_get_ns());
	spin_unlock_irqrestore(&engine->lock, flags);
}

static void simgpu_job_done(struct simgpu_job *job, u64 now)
{
	struct simgpu_file *sfile = job->file;
	unsigned long flags;

	atomic64_add(job->duration_ns, &sfile->busy_ns[job->engine]);
	spin_lock_irqsave(&sfile->lock, flags);
	list_del(&job->node);
	sfile->done_queued_ns = job->work.queued_ns;
	sfile->done_start_ns = job->start_ns;
	sfile->done_end_ns = now;
	spin_unlock_irqrestore(&sfile->lock, flags);
	wake_up_all(&sfile->wq);
	kfree(job);
}

static enum hrtimer_restart simgpu_engine_timer(struct hrtimer *timer)
{
	struct simgpu_engine *engine =
		container_of(timer, struct simgpu_engine, timer);
	struct simgpu_job *job;
	unsigned long flags;
	u64 end;

	spin_lock_irqsave(&engine->lock, flags);
	job = engine->running;
	engine->running = NULL;
	end = job->start_ns + job->duration_ns;
	gpucg_work_retire(engine->gpucg, &job->work, job->duration_ns);
	simgpu_engine_next(engine, end);
	spin_unlock_irqrestore(&engine->lock, flags);

	simgpu_job_done(job, end);
	return HRTIMER_NORESTART;
}

static int simgpu_open(struct drm_device *drm, struct drm_file *file)
{
	struct simgpu_file *sfile;

	sfile = kzalloc(sizeof(*sfile), GFP_KERNEL);
	if (!sfile)
		return -ENOMEM;
	sfile->client = gpucg_client_create();
	if (IS_ERR(sfile->client)) {
		int ret = PTR_ERR(sfile->client);

		kfree(sfile);
		return ret;
	}
	mutex_init(&sfile->submit_lock);
	spin_lock_init(&sfile->lock);
	INIT_LIST_HEAD(&sfile->pending);
	init_waitqueue_head(&sfile->wq);
	file->driver_priv = sfile;
	return 0;
}

static bool simgpu_idle(struct simgpu_file *sfile)
{
	unsigned long flags;
	bool idle;

	spin_lock_irqsave(&sfile->lock, flags);
	idle = list_empty(&sfile->pending);
	spin_unlock_irqrestore(&sfile->lock, flags);
	return idle;
}

static void simgpu_postclose(struct drm_device *drm, struct drm_file *file)
{
	struct simgpu_file *sfile = file->driver_priv;

	/* jobs are short and cannot be taken back: let them finish */
	wait_event(sfile->wq, simgpu_idle(sfile));
	gpucg_client_destroy(sfile->client);
	mutex_destroy(&sfile->submit_lock);
	kfree(sfile);
}

static int simgpu_gem_create_ioctl(struct drm_device *drm, void *data,
				   struct drm_file *file)
{
	struct drm_simgpu_gem_create *args = data;
	struct drm_gem_shmem_object *shmem;
	int ret;

	if (args->pad || !args->size || args->size > SZ_16G)
		return -EINVAL;

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

static int simgpu_submit_ioctl(struct drm_device *drm, void *data,
			       struct drm_file *file)
{
	struct simgpu_device *sdev = to_simgpu(drm);
	struct simgpu_file *sfile = file->driver_priv;
	struct drm_simgpu_submit *args = data;
	struct simgpu_job *job;
	unsigned long flags;
	int ret;

	if (args->engine >= engines || !args->duration_ns ||
	    args->duration_ns > SIMGPU_MAX_DURATION)
		return -EINVAL;
	if (args->priority < -1023 || args->priority > 1023)
		return -ERANGE;
	if (args->priority > 0 && !capable(CAP_SYS_NICE))
		return -EPERM;

	job = kzalloc(sizeof(*job), GFP_KERNEL);
	if (!job)
		return -ENOMEM;
	job->file = sfile;
	job->duration_ns = args->duration_ns;
	job->engine = args->engine;

	mutex_lock(&sfile->submit_lock);
	gpucg_client_set_owner(sfile->client, current);
	job->seqno = ++sfile->seqno;
	spin_lock_irqsave(&sfile->lock, flags);
	list_add_tail(&job->node, &sfile->pending);
	spin_unlock_irqrestore(&sfile->lock, flags);
	ret = gpucg_work_queue(sdev->engine[job->engine].gpucg, sfile->client,
			       &job->work, args->priority);
	if (ret) {
		spin_lock_irqsave(&sfile->lock, flags);
		list_del(&job->node);
		spin_unlock_irqrestore(&sfile->lock, flags);
		sfile->seqno--;
		mutex_unlock(&sfile->submit_lock);
		kfree(job);
		return ret;
	}
	args->seqno = job->seqno;
	mutex_unlock(&sfile->submit_lock);

	simgpu_engine_kick(&sdev->engine[args->engine]);
	return 0;
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

static int simgpu_pick_stats_ioctl(struct drm_device *drm, void *data,
				   struct drm_file *file)
{
	struct drm_simgpu_pick_stats *args = data;
	struct simgpu_engine *engine;
	unsigned long flags;
	u32 *samples;
	u32 n;
	int ret = 0;

	if (args->engine >= engines)
		return -EINVAL;
	engine = &to_simgpu(drm)->engine[args->engine];
	samples = kvmalloc_array(SIMGPU_PICK_SAMPLES, sizeof(u32), GFP_KERNEL);
	if (!samples)
		return -ENOMEM;

	spin_lock_irqsave(&engine->lock, flags);
	args->picks = engine->picks;
	n = min_t(u64, engine->picks, SIMGPU_PICK_SAMPLES);
	memcpy(samples, engine->pick_ns, n * sizeof(u32));
	spin_unlock_irqrestore(&engine->lock, flags);

	n = min(n, args->count);
	if (copy_to_user(u64_to_user_ptr(args->samples), samples,
			 n * sizeof(u32)))
		ret = -EFAULT;
	args->count = n;
	kvfree(samples);
	return ret;
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
	DRM_IOCTL_DEF_DRV(SIMGPU_PICK_STATS, simgpu_pick_stats_ioctl,
			  DRM_RENDER_ALLOW),
};

static const struct file_operations simgpu_fops = {
	.owner		= THIS_MODULE,
	DRM_GEM_FOPS,
	.show_fdinfo	= drm_show_fdinfo,
};

static const struct drm_driver simgpu_driver = {
	.driver_features	= DRIVER_GEM | DRIVER_RENDER,
	.open			= simgpu_open,
	.postclose		= simgpu_postclose,
	.show_fdinfo		= simgpu_show_fdinfo,
	.ioctls			= simgpu_ioctls,
	.num_ioctls		= ARRAY_SIZE(simgpu_ioctls),
	.fops			= &simgpu_fops,
	DRM_GEM_SHMEM_DRIVER_OPS,
	.name			= "simgpu",
	.desc			= "Simulated GPU for the gpu cgroup controller",
	.date			= "20261122",
	.major			= 1,
	.minor			= 0,
};

static void simgpu_destroy(struct simgpu_device *sdev)
{
	struct platform_device *pdev = sdev->pdev;
	unsigned int i;

	drm_dev_unregister(&sdev->drm);
	for (i = 0; i < engines; i++)
		hrtimer_cancel(&sdev->engine[i].timer);
	devres_release_group(&pdev->dev, NULL);
	platform_device_unregister(pdev);
}

static int simgpu_engines_init(struct simgpu_device *sdev)
{
	struct simgpu_engine *engine;
	unsigned int i;

	for (i = 0; i < engines; i++) {
		engine = &sdev->engine[i];
		engine->idx = i;
		spin_lock_init(&engine->lock);
		hrtimer_init(&engine->timer, CLOCK_MONOTONIC, HRTIMER_MODE_ABS);
		engine->timer.function = simgpu_engine_timer;
		engine->gpucg = gpucg_engine_create(sdev->drm.gpucg);
		if (IS_ERR(engine->gpucg))
			return PTR_ERR(engine->gpucg);
	}
	return 0;
}

static struct simgpu_device *simgpu_create(int id)
{
	struct simgpu_device *sdev;
	struct platform_device *pdev;
	int ret;

	pdev = platform_device_register_simple("simgpu", id, NULL, 0);
	if (IS_ERR(pdev))
		return ERR_CAST(pdev);

	if (!devres_open_group(&pdev->dev, NULL, GFP_KERNEL)) {
		ret = -ENOMEM;
		goto err_unregister;
	}
	sdev = devm_drm_dev_alloc(&pdev->dev, &simgpu_driver,
				  struct simgpu_device, drm);
	if (IS_ERR(sdev)) {
		ret = PTR_ERR(sdev);
		goto err_devres;
	}
	sdev->pdev = pdev;

	ret = drm_dev_register(&sdev->drm, 0);
	if (ret)
		goto err_devres;
	ret = simgpu_engines_init(sdev);
	if (ret) {
		drm_dev_unregister(&sdev->drm);
		goto err_devres;
	}
	return sdev;

err_devres:
	devres_release_group(&pdev->dev, NULL);
err_unregister:
	platform_device_unregister(pdev);
	return ERR_PTR(ret);
}

static int __init simgpu_init(void)
{
	struct simgpu_device *sdev;
	unsigned int i;

	if (!devices || devices > SIMGPU_MAX_DEVICES ||
	    !engines || engines > SIMGPU_MAX_ENGINES)
		return -EINVAL;

	for (i = 0; i < devices; i++) {
		sdev = simgpu_create(i);
		if (IS_ERR(sdev)) {
			while (i--)
				simgpu_destroy(simgpu_devices[i]);
			return PTR_ERR(sdev);
		}
		simgpu_devices[i] = sdev;
	}
	return 0;
}

static void __exit simgpu_exit(void)
{
	unsigned int i;

	for (i = 0; i < devices; i++)
		simgpu_destroy(simgpu_devices[i]);
}

module_init(simgpu_init);
module_exit(simgpu_exit);

MODULE_DESCRIPTION("Simulated GPU for testing the gpu cgroup controller");
MODULE_LICENSE("GPL");
