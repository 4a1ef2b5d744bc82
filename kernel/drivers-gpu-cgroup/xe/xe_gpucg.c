// SPDX-License-Identifier: MIT
/*
 * xe and the gpu cgroup controller (kernel/cgroup/gpu_sched.c).
 *
 * xe gives every exec queue a drm_sched scheduler of its own and hands the
 * queues to the GuC firmware, which runs them by a priority band and, among
 * the queues of one band, round robin for up to each queue's execution
 * quantum (timeslice). With one entity per scheduler, drm_sched's entity
 * selection has nothing to choose: the controller acts as the contract's
 * firmware shape says, through the band and the quantum of each queue.
 *
 * Queues. Every exec queue a client creates (xe_exec_queue_create_ioctl():
 * a VM_BIND queue's first tile's, not those of the other tiles; of a 7.3
 * queue group, the primary, whose GuC properties its secondaries take, and
 * which is charged their runtime as its own) is a queue of the controller
 * on its engine class: one controller engine per class,
 * as fdinfo's drm-cycles-<class> and the uapi's engine classes see the
 * engines of a class as one. Kernel queues (migration, page-table updates
 * for the kernel) are not queues of the controller: they run at the
 * kernel's own band.
 *
 * Time. The runtime xe keeps per exec queue (the CTX_TIMESTAMP of its
 * first LRC, times its width: xe_exec_queue_update_run_ticks(), which also
 * feeds fdinfo's drm-cycles-<class>) is charged to the owner's cgroup as it
 * grows, converted to ns by the GT's reference clock, so a cgroup's
 * gpu.stat is the sum of its clients' drm-cycles (but for the queues
 * above that are not the controller's; and 6.12's xe counts a VM_BIND
 * queue's time for no one). xe
 * itself reads it only when fdinfo is read and when a queue goes away, so
 * while queues submit a worker reads it every XE_GPUCG_PERIOD_MS.
 *
 * Weights. The same worker brings every busy queue's timeslice in line
 * with its share (gpucg_queue_share(): its cgroup's share of the class,
 * split among the cgroup's busy queues): the timeslice the queue was
 * created with, scaled by the share against an equal split
 * (xe_gpucg_timeslice_us()), so that equal weights keep it and busy queues
 * of one band share the engines by weight within the clamp (16:1).
 *
 * Priority. GuC has three bands for user queues, which xe's LOW, NORMAL
 * and HIGH map to. The cgroup's effective gpu.priority is the major key,
 * the queue's own priority the minor one, squeezed into those three bands
 * (xe_gpucg_priority()): a cgroup above 0 runs its queues in the HIGH
 * band, one below 0 in the LOW band, and one at 0 leaves each queue at its
 * own. The band is set when the queue is created and followed by the
 * worker, so a change of gpu.priority reaches busy queues within a period.
 * Three bands cannot hold every composition: a cgroup at 0 whose queue
 * asked for HIGH ties with the cgroups above 0, and all cgroups above 0
 * (or all below) share one band. Where a higher priority than a busy
 * queue's is busy on the class, the controller gives the queue no share;
 * its timeslice is then the least, a quarter of its own, so that a higher
 * cgroup in the same GuC band still runs four times as long per turn.
 *
 * The worker is armed by a submission (xe_gpucg_queue_submit()), runs at
 * most once per XE_GPUCG_PERIOD_MS, re-arms itself while any queue it saw
 * was busy, and does nothing once the device is unplugged or runtime
 * suspended. Execlists (xe.force_execlist) have no timeslice or band to
 * set: there the queues are charged only, and gpu.stat says sched=0.
 *
 * Locking: the controller's engine lock is a leaf, taken by the calls of
 * this file from process context (the exec queue ioctls, job pushes, the
 * worker) and from any context run ticks are read in. The worker reads
 * GuC's lookup of exec queues under its submission_state.lock, one queue
 * at a time, and works on each queue with a reference and no lock: that
 * lock is taken in reclaim, and the setters allocate. Queue setup may
 * sleep.
 *
 * Left as upstream has it: two readers of a queue's runtime at once (the
 * worker and an fdinfo read) can count the same ticks twice, in fdinfo and
 * so in gpu.stat; xe reads the timestamp and stores it without a lock.
 */

#include <linux/cgroup_gpu.h>
#include <linux/math64.h>
#include <linux/mutex.h>
#include <linux/workqueue.h>

#include <kunit/visibility.h>
#include <uapi/drm/xe_drm.h>

#include <drm/drm_drv.h>
#include <drm/drm_file.h>
#include <drm/drm_managed.h>
#include <drm/drm_print.h>

#include "xe_device.h"
#include "xe_device_types.h"
#include "xe_exec_queue.h"
#include "xe_force_wake.h"
#include "xe_gpucg.h"
#include "xe_gt_types.h"
#include "xe_guc_exec_queue_types.h"
#include "xe_guc_types.h"
#include "xe_hw_engine.h"
#include "xe_pm.h"

/*
 * The exec queue whose queue of the controller @q's runtime is charged to:
 * @q itself, but for a secondary queue of a 7.3 queue group, which takes
 * its GuC properties from the group's primary and holds a reference on
 * it: the primary.
 */
static struct xe_exec_queue *xe_gpucg_owner(struct xe_exec_queue *q)
{
#ifdef DRM_XE_MULTI_GROUP_CREATE
	return xe_exec_queue_multi_queue_primary(q);
#else
	return q;
#endif
}

/* More GPU time than one reading of a queue's runtime can hold, in s */
#define XE_GPUCG_MAX_READ_S	(24 * 60 * 60)

/**
 * xe_gpucg_priority() - the GuC band of a queue
 * @cgroup: the effective gpu.priority of the queue's cgroup
 * @own: the queue's own priority
 *
 * The cgroup's priority is the major key, squeezed with the queue's own
 * into the three bands of user queues; kernel queues keep theirs.
 *
 * Context: any context.
 * Return: the priority to give the queue.
 */
enum xe_exec_queue_priority
xe_gpucg_priority(int cgroup, enum xe_exec_queue_priority own)
{
	if (own == XE_EXEC_QUEUE_PRIORITY_KERNEL || !cgroup)
		return own;
	return cgroup > 0 ? XE_EXEC_QUEUE_PRIORITY_HIGH : XE_EXEC_QUEUE_PRIORITY_LOW;
}
EXPORT_SYMBOL_IF_KUNIT(xe_gpucg_priority);

/**
 * xe_gpucg_timeslice_us() - a busy queue's timeslice
 * @share: the queue's share of its engine class, in 1/65536
 *	   (gpucg_queue_share()); 0 if it has none now
 * @sharing: how many queues have a share of the class
 * @timeslice_us: the queue's timeslice without the controller; 0 turns
 *		  timeslicing off
 *
 * gpucg_share_quantum(), within the limits GuC takes.
 *
 * Context: any context.
 * Return: the timeslice in microseconds.
 */
u32 xe_gpucg_timeslice_us(u32 share, unsigned int sharing, u32 timeslice_us)
{
	if (!timeslice_us)
		return 0;
	return clamp_t(u32, gpucg_share_quantum(share, sharing, timeslice_us),
		       XE_HW_ENGINE_TIMESLICE_MIN, XE_HW_ENGINE_TIMESLICE_MAX);
}
EXPORT_SYMBOL_IF_KUNIT(xe_gpucg_timeslice_us);

static void xe_gpucg_fini(struct drm_device *drm, void *arg)
{
	struct xe_device *xe = arg;
	unsigned int class;

	cancel_delayed_work_sync(&xe->gpucg.work);
	for (class = 0; class < ARRAY_SIZE(xe->gpucg.engine); class++) {
		gpucg_engine_destroy(xe->gpucg.engine[class]);
		xe->gpucg.engine[class] = NULL;
	}
}

/* A banned or killed queue is not busy, though its last jobs never end. */
static bool xe_gpucg_queue_busy(struct gpucg_queue *gq)
{
	struct xe_exec_queue *q = container_of(gq, struct xe_exec_queue, gpucg);

	return !q->ops->reset_status(q) && !xe_exec_queue_is_idle(q);
}

/*
 * Sends @q the band and timeslice it should have now; the setters send
 * nothing when a value did not change. An idle queue keeps the timeslice it
 * had.
 */
static void xe_gpucg_apply(struct xe_exec_queue *q, const unsigned int *sharing)
{
	const struct xe_hw_engine_class_intf *eclass = q->hwe->eclass;
	int prio = gpucg_client_priority(q->gpucg.client);
	u32 ts;

	q->ops->set_priority(q, xe_gpucg_priority(prio, q->gpucg_priority));
	if (!q->gpucg_share)
		return;
	ts = xe_gpucg_timeslice_us(q->gpucg_share, max(sharing[q->class], 1U),
				   q->gpucg_timeslice_us);
	/* within what the class's sysfs allows */
	if (ts)
		ts = clamp(ts, eclass->sched_props.timeslice_min,
			   eclass->sched_props.timeslice_max);
	q->ops->set_timeslice(q, ts);
}

/*
 * The next exec queue of @gt at or after *@index that is charged to a
 * queue of the controller (xe_gpucg_owner()), with a reference, or NULL.
 * The lookup is read under the lock that guards it (a queue leaves it
 * before it is freed, and a secondary before its primary), and a queue is
 * taken at its first GuC id only (a parallel queue holds one per LRC); the
 * lock is not held while the queue is worked on, as a queue's last put may
 * take it.
 */
static struct xe_exec_queue *xe_gpucg_next(struct xe_gt *gt, unsigned long *index)
{
	struct xe_guc *guc = &gt->uc.guc;
	struct xe_exec_queue *q;

	mutex_lock(&guc->submission_state.lock);
	xa_for_each_start(&guc->submission_state.exec_queue_lookup, *index, q, *index) {
		struct xe_exec_queue *owner = xe_gpucg_owner(q);

		/* pairs with the release in xe_gpucg_queue_init() */
		if (*index == q->guc->id && smp_load_acquire(&owner->gpucg_ready) &&
		    xe_exec_queue_get_unless_zero(q))
			break;
	}
	mutex_unlock(&guc->submission_state.lock);
	return q;
}

enum xe_gpucg_pass { XE_GPUCG_SYNC, XE_GPUCG_SHARE, XE_GPUCG_APPLY };

/*
 * One pass over @gt's exec queues. SYNC reads their runtime (which charges
 * it) and tells the controller which are busy; SHARE takes the shares of
 * all, once all are synced, counting the queues that share each class;
 * APPLY sends the bands and timeslices. Returns whether a queue was busy.
 * A group's secondaries are only read: the controller sees the group as
 * its primary, whose band and timeslice GuC gives the group, busy while
 * the primary is. So a group whose secondaries alone work has no share
 * (it keeps the timeslice it had), and the worker does not come back for
 * it: their runtime is charged when a submission arms the worker, when
 * fdinfo is read and when they end.
 */
static bool xe_gpucg_pass(struct xe_gt *gt, enum xe_gpucg_pass pass,
			  unsigned int *sharing)
{
	struct xe_exec_queue *q;
	unsigned long index;
	bool busy = false;
	u32 share;

	for (index = 0; (q = xe_gpucg_next(gt, &index)); index++) {
		if (xe_gpucg_owner(q) != q && pass != XE_GPUCG_SYNC) {
			xe_exec_queue_put(q);
			continue;
		}
		switch (pass) {
		case XE_GPUCG_SYNC:
			xe_exec_queue_update_run_ticks(q);
			if (xe_gpucg_owner(q) == q)
				gpucg_queue_sync(&q->gpucg, xe_gpucg_queue_busy);
			break;
		case XE_GPUCG_SHARE:
			share = gpucg_queue_share(&q->gpucg);
			if (share)
				sharing[q->class]++;
			/* busy below a busy higher priority: the least */
			q->gpucg_share = xe_gpucg_queue_busy(&q->gpucg) ? max(share, 1U) : 0;
			busy |= q->gpucg_share != 0;
			break;
		case XE_GPUCG_APPLY:
			xe_gpucg_apply(q, sharing);
			break;
		}
		xe_exec_queue_put(q);
	}
	return busy;
}

/*
 * One pass over @gt. SYNC reads runtimes, and 7.3's xe reads the runtime
 * of a context that is running from its engine, which must be awake.
 * 6.12's xe reads the context image only (so a context that runs on
 * without being switched out is charged when it is), and has no scoped
 * force wake (xe_with_force_wake()) either.
 */
static bool xe_gpucg_pass_gt(struct xe_gt *gt, enum xe_gpucg_pass pass,
			     unsigned int *sharing)
{
	bool busy = false;

	if (pass != XE_GPUCG_SYNC)
		return xe_gpucg_pass(gt, pass, sharing);
#ifdef xe_with_force_wake
	xe_with_force_wake(fw_ref, gt_to_fw(gt), XE_FORCEWAKE_ALL)
		busy = xe_gpucg_pass(gt, pass, sharing);
#else
	busy = xe_gpucg_pass(gt, pass, sharing);
#endif
	return busy;
}

static void xe_gpucg_work(struct work_struct *work)
{
	struct xe_device *xe = container_of(work, typeof(*xe), gpucg.work.work);
	unsigned int sharing[XE_ENGINE_CLASS_MAX] = {};
	enum xe_gpucg_pass pass;
	bool busy = false;
	struct xe_gt *gt;
	int idx;
	u8 id;

	if (!drm_dev_enter(&xe->drm, &idx))
		return;
	if (!xe_pm_runtime_get_if_active(xe))
		goto out_dev;

	for (pass = XE_GPUCG_SYNC; pass <= XE_GPUCG_APPLY; pass++) {
		for_each_gt(gt, xe, id) {
			if (!gt->uc.guc.submission_state.initialized)
				continue;
			busy |= xe_gpucg_pass_gt(gt, pass, sharing);
		}
	}
	if (busy)
		queue_delayed_work(system_freezable_wq, &xe->gpucg.work,
				   msecs_to_jiffies(XE_GPUCG_PERIOD_MS));

	xe_pm_runtime_put(xe);
out_dev:
	drm_dev_exit(idx);
}

/**
 * xe_gpucg_init() - one controller engine per engine class
 * @xe: the device; its DRM device's gpucg handle may be NULL (no render
 *	node, or no controller), which makes every call a no-op
 *
 * Call before the GuC is set up: the engines are removed when the DRM
 * device is released, after GuC has seen every exec queue go. If an engine
 * cannot be had, the device's queues are not queues of the controller:
 * the controller then neither orders nor accounts them, and says so once.
 *
 * Context: process context, may sleep.
 * Return: 0, or an error from registering the release action.
 */
int xe_gpucg_init(struct xe_device *xe)
{
	struct gpucg_engine *engine;
	unsigned int class;

	INIT_DELAYED_WORK(&xe->gpucg.work, xe_gpucg_work);
	for (class = 0; class < ARRAY_SIZE(xe->gpucg.engine); class++) {
		/* under execlists nothing follows the shares: sched=0 */
		engine = gpucg_engine_create(xe->drm.gpucg, xe_device_uc_enabled(xe));
		if (IS_ERR(engine)) {
			drm_warn(&xe->drm,
				 "gpu cgroup: no engines (%pe): exec queues not scheduled by cgroup\n",
				 engine);
			xe_gpucg_fini(&xe->drm, xe);
			break;
		}
		xe->gpucg.engine[class] = engine;
	}
	return drmm_add_action_or_reset(&xe->drm, xe_gpucg_fini, xe);
}

/**
 * xe_gpucg_queue_init() - make a client's exec queue a queue of the
 *			   controller
 * @q: the exec queue, created and not yet submitted to
 * @xef: the file that created it
 *
 * Takes the queue's own priority and timeslice (after the creation's
 * extensions) as the minor key and the base quantum, and gives the queue
 * its band before GuC first sees it.
 *
 * Context: process context, may sleep.
 * Return: 0 or -ENOMEM.
 */
int xe_gpucg_queue_init(struct xe_exec_queue *q, struct xe_file *xef)
{
	struct xe_device *xe = gt_to_xe(q->gt);
	int err;

	if (q->class >= ARRAY_SIZE(xe->gpucg.engine))
		return 0;
	err = gpucg_queue_init(&q->gpucg, xe->gpucg.engine[q->class],
			       xef->drm->gpucg, 0);
	if (err || !q->gpucg.engine)
		return err;
	q->gpucg_priority = q->sched_props.priority;
	q->gpucg_timeslice_us = q->sched_props.timeslice_us;
	q->sched_props.priority =
		xe_gpucg_priority(gpucg_client_priority(q->gpucg.client),
				  q->gpucg_priority);
	/*
	 * GuC's lookup holds the queue already: the worker takes it from here
	 * (pairs with the acquire in xe_gpucg_next())
	 */
	smp_store_release(&q->gpucg_ready, true);
	return 0;
}

/**
 * xe_gpucg_queue_fini() - an exec queue is freed
 * @q: the exec queue, its last runtime read
 *
 * Context: any context.
 */
void xe_gpucg_queue_fini(struct xe_exec_queue *q)
{
	gpucg_queue_fini(&q->gpucg);
}

/**
 * xe_gpucg_queue_submit() - a job was pushed to an exec queue
 * @q: the exec queue, a queue group's secondary included
 *
 * The queue is busy from now; the worker follows it from here (a
 * secondary: its primary, and reads the secondary's runtime once).
 *
 * Context: process context.
 */
void xe_gpucg_queue_submit(struct xe_exec_queue *q)
{
	struct xe_device *xe = gt_to_xe(q->gt);

	q = xe_gpucg_owner(q);
	/* under execlists no worker follows the queue: it is charged only */
	if (!q->gpucg.engine || !xe_device_uc_enabled(xe))
		return;
	gpucg_queue_sync(&q->gpucg, xe_gpucg_queue_busy);
	queue_delayed_work(system_freezable_wq, &xe->gpucg.work,
			   msecs_to_jiffies(XE_GPUCG_PERIOD_MS));
}

/**
 * xe_gpucg_queue_charge() - an exec queue's runtime grew
 * @q: the exec queue, a queue group's secondary included (charged to its
 *     primary)
 * @ticks: by how much, in ticks of its GT's reference clock
 *
 * Context: any context.
 */
void xe_gpucg_queue_charge(struct xe_exec_queue *q, u64 ticks)
{
	u32 hz = q->gt->info.reference_clock;

	q = xe_gpucg_owner(q);
	/*
	 * More than a day of GPU time in one reading is, on 7.3, a 32-bit
	 * timestamp (before Xe2) read as it wrapped (6.12 subtracts in 32
	 * bits): not charged, and never converted (the quotient would not
	 * fit in 64 bits).
	 */
	if (q->gpucg.engine && hz && ticks <= (u64)hz * XE_GPUCG_MAX_READ_S)
		gpucg_queue_charge(&q->gpucg, mul_u64_u32_div(ticks, NSEC_PER_SEC, hz));
}

