// SPDX-License-Identifier: MIT
/*
 * drm_sched and the gpu cgroup controller.
 *
 * A scheduler whose driver passes its device's &drm_device.gpucg in
 * &drm_sched_init_args is an engine of the gpu cgroup controller
 * (include/linux/cgroup_gpu.h, kernel/cgroup/gpu_sched.c).
 *
 * Under the fair policy (gpu_sched.sched_policy=2) and the FIFO policy (the
 * default) the scheduler follows the controller as CFS group scheduling
 * follows the cpu controller: every cgroup whose clients submit to the
 * scheduler has a run queue of its own, an ordinary &struct drm_sched_rq in
 * which upstream's policy orders that cgroup's entities (sched_rq.c,
 * unchanged: by vruntime, or by the submission time of their next jobs),
 * and the controller orders those run queues, strictly by gpu.priority and
 * then by GPU time over gpu.weight down the hierarchy, with anticipation
 * for clients that keep one job queued and in-flight estimates for
 * schedulers with several slots. A selection asks the controller for the
 * best run queue and upstream's drm_sched_rq_select_entity() for the
 * entity in it, so the entities of one cgroup, and all entities when no
 * cgroup is configured, get exactly what upstream's policy gives the
 * entities of one run queue. Under the fair policy an entity's priority
 * (its vruntime multiplier) weighs it against the other entities of its
 * cgroup; under FIFO, where upstream keeps a run queue per entity
 * priority, the entities of one cgroup share its run queue, ordered by
 * priority and then by submission (sched_rq.c's comparison, which keeps
 * the order of the scheduler's own run queues). What a cgroup gets
 * against the others is gpu.weight's and gpu.priority's alone. Entities
 * without a client (the kernel's own jobs, drm_client_id 0) stay in the
 * scheduler's own run queues, which go first.
 *
 * An entity joins the run queue of its client's cgroup at its first job,
 * and moves to another when its client's owner has moved, at the next job's
 * drm_sched_job_arm() (drm_sched_entity_select_rq()), with its queued jobs
 * if it has any (drm_sched_rq_move_entity(): a client that never idles
 * follows its owner too); it pins the cgroup's run queue while it is
 * there. A run queue is active for the
 * controller while an entity sits in its tree: pushing an entity's first
 * job activates it, and a selection that finds no ready entity in it
 * deactivates it, so a cgroup whose entities all wait on fences stalls no
 * one and banks nothing. The dependency callback, which may run in hard
 * interrupt context, cannot take the controller's engine lock (the
 * selection nests the run queue's lock inside it): it marks the run queue
 * woken, and the next selection activates it again.
 *
 * An entity whose next job waits on a fence of a client's job that is
 * still queued on a scheduler that orders cgroups, in another cgroup or on
 * another scheduler, lends the priority of its cgroup (or what is lent to
 * it in turn) to the entity that holds that job, on that scheduler, which
 * may be another engine or device (drm_sched_entity_gpucg_wait(), priority
 * inheritance in kernel/cgroup/gpu_sched.c): from the pop that finds the
 * dependency until that scheduler's first selection after the job was
 * handed to the hardware, or until the entity pops again or goes away.
 * The entity that holds the job rises alone, and only while it is ready:
 * besides its place in its cgroup's run queue, each entity with a client
 * is a queue of the controller that runs only on loan
 * (gpucg_queue_init_lent()), which a selection in the lent band takes
 * directly, and its cgroup's other entities stay in their band. The
 * entities that can be lent to are found by the context of their fences,
 * in an xarray whose lock makes a loan and the entity's teardown exclude
 * each other. A job pushed to
 * an empty queue is its entity's next job from its push on, and lends from
 * then (drm_sched_entity_gpucg_pushed()) to its first dependency in
 * another cgroup, or else in its own on another scheduler
 * (drm_sched_job_gpucg_lender()): its own scheduler may look at it much
 * later (it is busy, or its run-job work waits for a CPU), and the job it
 * waits for would wait behind lower bands all that time.
 *
 * Under the RR policy the scheduler behaves as upstream's: the
 * engine only charges GPU time, per entity, and gpu.stat says sched=0.
 *
 * Either way a job takes a ticket when run_job() hands it to the hardware
 * and pays it in the free-job work with the GPU time the scheduler measured
 * for the entity's statistics (or the driver's job_gpu_time()), so gpu.stat
 * shows every cgroup's GPU time.
 *
 * Locking: entity->lock, then the controller's engine lock, then a run
 * queue's lock. The engine lock of a drm_sched engine is taken in process
 * context only: job initialization, push, the run-job and free-job work
 * items, entity teardown. The anticipation timer only queues the run-job
 * work. Priority inheritance takes engine locks of other schedulers too,
 * other devices' included: from a push, a pop or a selection, from entity
 * teardown and from a write of gpu.priority, all in process context; its
 * own lock nests outside engine locks, and inside no scheduler lock but an
 * entity's (an idle entity's move to another scheduler, at a job's arm,
 * drops the links of its queue). A loan is made under the lock of the
 * xarray of entities, which nests outside both.
 */

#include <linux/bitops.h>
#include <linux/cgroup_gpu.h>
#include <linux/hrtimer.h>
#include <linux/llist.h>
#include <linux/mutex.h>
#include <linux/rcupdate.h>
#include <linux/slab.h>
#include <linux/workqueue.h>
#include <linux/xarray.h>

#include <drm/drm_file.h>
#include <drm/gpu_scheduler.h>
#include <kunit/visibility.h>

#include "sched_internal.h"

/**
 * struct drm_sched_gpucg_rq - the run queue of one cgroup on a scheduler
 * @rq: upstream's run queue, of the cgroup's entities
 * @q: @rq as a queue of the controller
 * @woken: in &drm_gpu_scheduler.gpucg_woken, while @flags has WOKEN
 * @flags: DRM_SCHED_GPUCG_WOKEN
 * @node: in &drm_gpu_scheduler.gpucg_rqs
 *
 * Created and freed by the controller with the cgroup's state on the
 * engine (&struct gpucg_group_ops).
 */
struct drm_sched_gpucg_rq {
	struct drm_sched_rq	rq;
	struct gpucg_queue	q;
	struct llist_node	woken;
	unsigned long		flags;
	struct list_head	node;
};

#define DRM_SCHED_GPUCG_WOKEN	0

static struct drm_sched_gpucg_rq *to_gpucg_rq(struct gpucg_queue *q)
{
	return container_of(q, struct drm_sched_gpucg_rq, q);
}

static struct gpucg_queue *drm_sched_gpucg_rq_alloc(void *priv)
{
	struct drm_gpu_scheduler *sched = priv;
	struct drm_sched_gpucg_rq *grq;

	grq = kzalloc_obj(*grq, GFP_KERNEL_ACCOUNT);
	if (!grq)
		return NULL;
	drm_sched_rq_init(sched, &grq->rq);
	spin_lock(&sched->gpucg_rqs_lock);
	list_add_tail(&grq->node, &sched->gpucg_rqs);
	spin_unlock(&sched->gpucg_rqs_lock);
	return &grq->q;
}

static void drm_sched_gpucg_rq_free(struct gpucg_queue *q, void *priv)
{
	struct drm_sched_gpucg_rq *grq = to_gpucg_rq(q);
	struct drm_gpu_scheduler *sched = priv;

	spin_lock(&sched->gpucg_rqs_lock);
	list_del(&grq->node);
	spin_unlock(&sched->gpucg_rqs_lock);
	kfree(grq);
}

static const struct gpucg_group_ops drm_sched_gpucg_group_ops = {
	.alloc = drm_sched_gpucg_rq_alloc,
	.free = drm_sched_gpucg_rq_free,
};

/* The cgroup's run queue @rq is, or NULL for one of the scheduler's own. */
static struct drm_sched_gpucg_rq *drm_sched_gpucg_rq_of(struct drm_sched_rq *rq)
{
	struct drm_gpu_scheduler *sched;
	unsigned int i;

	if (!rq)
		return NULL;
	sched = rq->sched;
	if (!drm_sched_gpucg_grouped(sched))
		return NULL;
	for (i = DRM_SCHED_PRIORITY_KERNEL; i < sched->num_rqs; i++)
		if (rq == sched->sched_rq[i])
			return NULL;
	return container_of(rq, struct drm_sched_gpucg_rq, rq);
}

/*
 * Whether an entity sits in a run queue's tree: exact under the run
 * queue's lock, a hint otherwise. Whatever fills or empties the tree of a
 * cgroup's run queue syncs it after (gpucg_queue_sync()), which reads it
 * again under the controller's engine lock.
 */
static bool drm_sched_gpucg_rq_busy(struct drm_sched_rq *rq)
{
	return !RB_EMPTY_ROOT(&rq->rb_tree_root.rb_root);
}

static bool drm_sched_gpucg_rq_ready(struct gpucg_queue *q)
{
	return drm_sched_gpucg_rq_busy(&to_gpucg_rq(q)->rq);
}

static void drm_sched_gpucg_rq_sync(struct drm_sched_rq *rq)
{
	struct drm_sched_gpucg_rq *grq = drm_sched_gpucg_rq_of(rq);

	if (grq)
		gpucg_queue_sync(&grq->q, drm_sched_gpucg_rq_ready);
}

static enum hrtimer_restart drm_sched_gpucg_timer(struct hrtimer *timer)
{
	struct drm_gpu_scheduler *sched =
		container_of(timer, struct drm_gpu_scheduler, gpucg_timer);

	drm_sched_wakeup(sched);
	return HRTIMER_NORESTART;
}

/**
 * drm_sched_gpucg_init - make a scheduler an engine of the gpu cgroup
 * controller
 * @sched: the scheduler being initialized
 * @args: its arguments; &drm_sched_init_args.gpucg NULL leaves it out
 *
 * Context: process context, may sleep.
 * Return: 0 or a negative error code.
 */
int drm_sched_gpucg_init(struct drm_gpu_scheduler *sched,
			 const struct drm_sched_init_args *args)
{
	struct gpucg_engine *engine;

	init_llist_head(&sched->gpucg_woken);
	INIT_LIST_HEAD(&sched->gpucg_rqs);
	spin_lock_init(&sched->gpucg_rqs_lock);
	hrtimer_setup(&sched->gpucg_timer, drm_sched_gpucg_timer,
		      CLOCK_MONOTONIC, HRTIMER_MODE_REL);
	if (drm_sched_policy != DRM_SCHED_POLICY_RR)
		engine = gpucg_engine_create_grouped(args->gpucg,
						     &drm_sched_gpucg_group_ops,
						     sched);
	else
		engine = gpucg_engine_create(args->gpucg, false);
	if (IS_ERR(engine))
		return PTR_ERR(engine);
	/*
	 * It runs only what the pick returns, and picks again when told; a
	 * cap per engine means nothing where an engine is a user's queue.
	 */
	if (drm_sched_policy != DRM_SCHED_POLICY_RR && !args->gpucg_per_queue)
		gpucg_engine_enforce_max(engine);
	sched->gpucg = engine;
	return 0;
}

/* Activates the run queues whose entities' dependencies signalled. */
static void drm_sched_gpucg_wake(struct drm_gpu_scheduler *sched)
{
	struct drm_sched_gpucg_rq *grq, *next;
	struct llist_node *woken;

	woken = llist_del_all(&sched->gpucg_woken);
	llist_for_each_entry_safe(grq, next, woken, woken) {
		/* ordered: a wake-up after this adds the run queue again */
		test_and_clear_bit(DRM_SCHED_GPUCG_WOKEN, &grq->flags);
		gpucg_queue_sync(&grq->q, drm_sched_gpucg_rq_ready);
		gpucg_group_put(&grq->q);
	}
}

/**
 * drm_sched_gpucg_fini - take a scheduler off the gpu cgroup controller
 * @sched: the scheduler, whose submission has stopped
 *
 * Context: process context, may sleep.
 */
void drm_sched_gpucg_fini(struct drm_gpu_scheduler *sched)
{
	hrtimer_cancel(&sched->gpucg_timer);
	drm_sched_gpucg_wake(sched);
	gpucg_engine_destroy(sched->gpucg);
	sched->gpucg = NULL;
}

/* Offered the best run queue by the controller, under the engine's lock. */
struct drm_sched_gpucg_pick {
	struct drm_gpu_scheduler *sched;
	struct drm_sched_entity *entity;
};

/*
 * Takes the entity of a queue that runs only on loan, if it is ready in a
 * run queue of @pick's scheduler: under that run queue's lock, as
 * drm_sched_rq_select_entity() would find it there (entity teardown
 * removes it from there first).
 */
static enum gpucg_take drm_sched_gpucg_take_lent(struct drm_sched_gpucg_pick *pick,
						 struct drm_sched_entity *entity)
{
	enum gpucg_take ret = GPUCG_SKIP;
	struct drm_sched_rq *rq;
	unsigned int tries;

	/* an entity moving to another cgroup's run queue right now: again */
	for (tries = 0; tries < 3; tries++) {
		rq = READ_ONCE(entity->rq);
		if (!rq || rq->sched != pick->sched)
			return GPUCG_SKIP;
		spin_lock(&rq->lock);
		if (READ_ONCE(entity->rq) != rq) {
			spin_unlock(&rq->lock);
			continue;
		}
		if (!RB_EMPTY_NODE(&entity->rb_tree_node) &&
		    drm_sched_entity_is_ready(entity)) {
			if (drm_sched_can_queue(pick->sched, entity)) {
				reinit_completion(&entity->entity_idle);
				pick->entity = entity;
				ret = GPUCG_TAKE;
			} else {
				ret = GPUCG_HOLD;
			}
		}
		spin_unlock(&rq->lock);
		break;
	}
	return ret;
}

static enum gpucg_take drm_sched_gpucg_take(struct gpucg_queue *q, void *arg)
{
	struct drm_sched_gpucg_pick *pick = arg;
	struct drm_sched_entity *entity;

	if (gpucg_queue_is_lent_only(q))
		return drm_sched_gpucg_take_lent(pick,
				container_of(q, struct drm_sched_entity, gpucg));
	entity = drm_sched_rq_select_entity(pick->sched, &to_gpucg_rq(q)->rq);
	if (IS_ERR(entity))	/* ready, but the credits are not there yet */
		return GPUCG_HOLD;
	if (!entity)		/* empty, or every entity waits on a fence */
		return GPUCG_SKIP;
	pick->entity = entity;
	return GPUCG_TAKE;
}

/**
 * drm_sched_gpucg_select_entity - the entity to run next, by the cgroups'
 * order
 * @sched: a scheduler for which drm_sched_gpucg_grouped() holds
 *
 * The entities without a client, in the scheduler's own run queues, go
 * first; then the cgroups' run queues in the controller's order, and the
 * entities lent a priority (whose jobs others wait for) in the band lent.
 *
 * Context: the run-job work.
 * Return: the entity, or NULL if none is ready or may run now (the
 * anticipation timer asks again).
 */
struct drm_sched_entity *
drm_sched_gpucg_select_entity(struct drm_gpu_scheduler *sched)
{
	struct drm_sched_gpucg_pick pick = { .sched = sched };
	struct drm_sched_entity *entity;
	unsigned int i;
	u64 retry_ns;

	for (i = DRM_SCHED_PRIORITY_KERNEL; i < sched->num_rqs; i++) {
		/*
		 * Mostly empty: not locked then. An entity added after
		 * this look is seen by the run-job work its push queues.
		 */
		if (!drm_sched_gpucg_rq_busy(sched->sched_rq[i]))
			continue;
		entity = drm_sched_rq_select_entity(sched, sched->sched_rq[i]);
		if (entity)
			return IS_ERR(entity) ? NULL : entity;
	}
	drm_sched_gpucg_wake(sched);
	if (!gpucg_queue_pick(sched->gpucg, drm_sched_gpucg_take, &pick,
			      &retry_ns))
		pick.entity = NULL;
	if (retry_ns)
		hrtimer_start(&sched->gpucg_timer, ns_to_ktime(retry_ns),
			      HRTIMER_MODE_REL);
	return pick.entity;
}

/* Serializes the setup of entities: the first job of an entity */
static DEFINE_MUTEX(drm_sched_gpucg_mutex);

/*
 * The entities with a client on schedulers that order cgroups, by their
 * fence context (checked on lookup: an index is an unsigned long), so that
 * a wait on a job's fence finds the entity that holds the job. Its lock
 * is held across a loan's making, and an entity leaves before its queue
 * of the controller goes (drm_sched_entity_gpucg_fini()).
 */
static DEFINE_XARRAY(drm_sched_gpucg_entities);

static bool drm_sched_gpucg_entity_ready(struct gpucg_queue *q)
{
	return drm_sched_entity_is_ready(container_of(q, struct drm_sched_entity,
						      gpucg));
}

/*
 * Tells the controller whether @entity is ready, for its queue that runs
 * only on loan. Process context; under the entity's lock or not.
 */
static void drm_sched_entity_gpucg_lent_sync(struct drm_sched_entity *entity)
{
	if (entity->gpucg_ready && entity->gpucg_client)
		gpucg_queue_sync(&entity->gpucg, drm_sched_gpucg_entity_ready);
}

/*
 * The entity's dependency signalled while it was lent a priority, or the
 * jobs killed with it have left (drm_sched_entity_gpucg_killed()).
 */
static void drm_sched_entity_gpucg_lent_work(struct work_struct *work)
{
	struct drm_sched_entity *entity =
		container_of(work, struct drm_sched_entity, gpucg_lent_work);
	struct drm_sched_rq *rq;

	drm_sched_entity_gpucg_lent_sync(entity);
	/* a run queue the entity just left stays until a grace period */
	rcu_read_lock();
	rq = READ_ONCE(entity->rq);
	if (rq)
		drm_sched_wakeup(rq->sched);
	rcu_read_unlock();
}

/* Binds @entity to @client (NULL: the kernel's), under the mutex. */
static int drm_sched_entity_gpucg_bind_locked(struct drm_sched_entity *entity,
					      struct gpucg_client *client)
{
	struct drm_gpu_scheduler *sched = entity->rq->sched;
	int ret = 0;

	lockdep_assert_held(&drm_sched_gpucg_mutex);
	if (entity->gpucg_ready)
		return 0;
	if (drm_sched_gpucg_grouped(sched)) {
		INIT_WORK(&entity->gpucg_lent_work,
			  drm_sched_entity_gpucg_lent_work);
		entity->gpucg_client = gpucg_client_tryget(client);
		/*
		 * Without memory for either, the entity runs in its cgroup's
		 * run queue all the same: a wait on its job lends it nothing,
		 * as one whose index a later entity took (a fence context
		 * that wrapped an unsigned long).
		 */
		if (entity->gpucg_client &&
		    !gpucg_queue_init_lent(&entity->gpucg, sched->gpucg,
					   entity->gpucg_client))
			xa_store(&drm_sched_gpucg_entities,
				 (unsigned long)entity->fence_context, entity,
				 GFP_KERNEL_ACCOUNT);
	} else {
		ret = gpucg_queue_init(&entity->gpucg, sched->gpucg, client, 0);
	}
	if (!ret) {
		/* publish the binding to drm_sched_entity_gpucg_init() */
		smp_store_release(&entity->gpucg_ready, true);
	}
	return ret;
}

/**
 * drm_sched_entity_gpucg_init - bind an entity to the client of its first job
 * @entity: the entity
 * @client_id: the job's &drm_file.client_id, 0 for a kernel job
 *
 * Context: process context, may sleep.
 * Return: 0 or -ENOMEM.
 */
int drm_sched_entity_gpucg_init(struct drm_sched_entity *entity, u64 client_id)
{
	struct drm_gpu_scheduler *sched = entity->rq ? entity->rq->sched : NULL;
	struct gpucg_client *client;
	unsigned int i;
	int ret = 0;

	if (!sched || !sched->gpucg)
		return 0;
	/* pairs with the release in drm_sched_entity_gpucg_bind_locked() */
	if (!smp_load_acquire(&entity->gpucg_ready)) {
		client = client_id ? drm_file_gpucg_client(client_id) : NULL;
		mutex_lock(&drm_sched_gpucg_mutex);
		ret = drm_sched_entity_gpucg_bind_locked(entity, client);
		mutex_unlock(&drm_sched_gpucg_mutex);
		gpucg_client_put(client);
	}
	/*
	 * The entities of its owner's cgroup on the schedulers it may run on:
	 * one made after the client, one it has not used, or an owner that
	 * moved since (the core makes them on the engines a client used).
	 */
	client = entity->gpucg_client ?: entity->gpucg.client;
	if (!entity->sched_list) {
		gpucg_client_group_prepare(sched->gpucg, client);
		return ret;
	}
	for (i = 0; i < entity->num_sched_list; i++)
		gpucg_client_group_prepare(entity->sched_list[i]->gpucg, client);
	return ret;
}

#if IS_ENABLED(CONFIG_KUNIT)
/**
 * drm_sched_entity_gpucg_bind - bind an entity to a client before its first
 * job
 * @entity: the entity, on an engine of the gpu cgroup controller
 * @client: the client, from gpucg_client_create_in()
 *
 * For the scheduler's KUnit tests, whose jobs come from no DRM file.
 *
 * Context: process context, may sleep.
 * Return: 0 or -ENOMEM.
 */
VISIBLE_IF_KUNIT int drm_sched_entity_gpucg_bind(struct drm_sched_entity *entity,
						 struct gpucg_client *client)
{
	int ret;

	mutex_lock(&drm_sched_gpucg_mutex);
	ret = drm_sched_entity_gpucg_bind_locked(entity, client);
	mutex_unlock(&drm_sched_gpucg_mutex);
	return ret;
}
EXPORT_SYMBOL_IF_KUNIT(drm_sched_entity_gpucg_bind);

/**
 * drm_sched_gpucg_orders - whether a scheduler orders entities by cgroup
 * @sched: the scheduler
 *
 * For the scheduler's KUnit tests: drm_sched_gpucg_grouped().
 *
 * Context: any context.
 */
VISIBLE_IF_KUNIT bool drm_sched_gpucg_orders(struct drm_gpu_scheduler *sched)
{
	return drm_sched_gpucg_grouped(sched);
}
EXPORT_SYMBOL_IF_KUNIT(drm_sched_gpucg_orders);

/**
 * drm_sched_gpucg_fair - whether the fair policy orders a cgroup's entities
 *
 * For the scheduler's KUnit tests: under FIFO a cgroup's entities take
 * turns by job, not by GPU time.
 *
 * Context: any context.
 */
VISIBLE_IF_KUNIT bool drm_sched_gpucg_fair(void)
{
	return drm_sched_policy == DRM_SCHED_POLICY_FAIR;
}
EXPORT_SYMBOL_IF_KUNIT(drm_sched_gpucg_fair);
#endif

/**
 * drm_sched_entity_gpucg_rq - the run queue of an entity on a scheduler
 * @entity: the entity, under its lock
 * @sched: the scheduler it is to run on
 *
 * The run queue of the cgroup of the entity's client, pinned, on a
 * scheduler that follows the cgroups' order; else the scheduler's own.
 * Pass the run queue the entity leaves to drm_sched_gpucg_rq_put().
 *
 * Context: any context.
 */
struct drm_sched_rq *drm_sched_entity_gpucg_rq(struct drm_sched_entity *entity,
					       struct drm_gpu_scheduler *sched)
{
	struct gpucg_queue *q;

	if (!drm_sched_gpucg_grouped(sched) || !entity->gpucg_client)
		return sched->sched_rq[entity->rq_priority];
	q = gpucg_client_group(sched->gpucg, entity->gpucg_client);
	return &to_gpucg_rq(q)->rq;
}

/**
 * drm_sched_entity_gpucg_follow - move an entity to its owner's cgroup
 * @entity: the entity, at a job's arm
 *
 * On a scheduler that orders cgroups, the entity of a client whose owner
 * is now in another cgroup moves to that cgroup's run queue, with the jobs
 * it has queued; one still in the scheduler's own run queue (before its
 * first job) joins its cgroup's.
 *
 * Context: process context, the submitter's (who serializes arms of one
 * entity).
 */
void drm_sched_entity_gpucg_follow(struct drm_sched_entity *entity)
{
	struct drm_gpu_scheduler *sched = entity->rq ? entity->rq->sched : NULL;
	struct drm_sched_rq *rq, *old;

	if (!sched || !drm_sched_gpucg_grouped(sched) || !entity->gpucg_client)
		return;
	spin_lock(&entity->lock);
	rq = drm_sched_entity_gpucg_rq(entity, sched);
	old = entity->rq;
	if (rq == old || entity->stopped) {
		drm_sched_gpucg_rq_put(rq);
	} else {
		drm_sched_rq_move_entity(entity, rq);
		drm_sched_gpucg_rq_sync(old);
		drm_sched_gpucg_rq_sync(rq);
		/* lent, it moves to its new cgroup's entity too */
		drm_sched_entity_gpucg_lent_sync(entity);
		drm_sched_gpucg_rq_put(old);
		/*
		 * A selection between the move and the sync found neither
		 * run queue ready and may have left the scheduler idle with
		 * no job in flight to wake it: the entity's queued jobs
		 * would wait for good.
		 */
		drm_sched_wakeup(sched);
	}
	spin_unlock(&entity->lock);
}

/**
 * drm_sched_gpucg_rq_put - unpin a run queue an entity no longer uses
 * @rq: the run queue, from drm_sched_entity_gpucg_rq()
 *
 * Context: any context.
 */
void drm_sched_gpucg_rq_put(struct drm_sched_rq *rq)
{
	struct drm_sched_gpucg_rq *grq = rq ? drm_sched_gpucg_rq_of(rq) : NULL;

	if (grq)
		gpucg_group_put(&grq->q);
}

/**
 * drm_sched_gpucg_visit_rqs - visit the cgroups' run queues of a scheduler
 * @sched: the scheduler
 * @fn: as drm_sched_visit_rqs()'s, under &drm_gpu_scheduler.gpucg_rqs_lock
 * @data: passed to @fn
 *
 * No lock of the controller is taken: a hang's timeout handler calls this
 * in the fence-signalling path, where the controller's mutex, held across
 * allocations, may not be waited for. An entity that moves to another
 * cgroup's run queue meanwhile (drm_sched_entity_gpucg_follow()) may be
 * missed.
 *
 * Context: any context in which the run queues' locks may be taken.
 * Return: true if @fn stopped the walk.
 */
bool drm_sched_gpucg_visit_rqs(struct drm_gpu_scheduler *sched,
			       bool (*fn)(struct drm_sched_rq *rq, void *data),
			       void *data)
{
	struct drm_sched_gpucg_rq *grq;
	bool stop = false;

	spin_lock(&sched->gpucg_rqs_lock);
	list_for_each_entry(grq, &sched->gpucg_rqs, node) {
		stop = fn(&grq->rq, data);
		if (stop)
			break;
	}
	spin_unlock(&sched->gpucg_rqs_lock);
	return stop;
}

/**
 * drm_sched_entity_gpucg_added - an entity entered its run queue's tree
 * @entity: the entity, under its lock
 *
 * Context: process context.
 */
void drm_sched_entity_gpucg_added(struct drm_sched_entity *entity)
{
	drm_sched_gpucg_rq_sync(entity->rq);
	drm_sched_entity_gpucg_lent_sync(entity);
}

/**
 * drm_sched_entity_gpucg_woken - an entity's dependency signalled
 * @entity: the entity, which may be moving to another run queue right now
 *	    (drm_sched_entity_gpucg_follow(), which then syncs that one)
 *
 * An entity lent a priority tells the controller from a work item on the
 * scheduler's submission workqueue, queued before the scheduler's wake-up.
 *
 * Context: any context (a fence callback).
 */
void drm_sched_entity_gpucg_woken(struct drm_sched_entity *entity)
{
	struct drm_sched_gpucg_rq *grq;
	struct drm_sched_rq *rq;

	/* a run queue the entity just left stays until a grace period */
	rcu_read_lock();
	grq = drm_sched_gpucg_rq_of(READ_ONCE(entity->rq));
	if (grq && !test_and_set_bit(DRM_SCHED_GPUCG_WOKEN, &grq->flags)) {
		/* the list's pin: the entity may go before the next selection */
		if (gpucg_group_tryget(&grq->q))
			llist_add(&grq->woken, &grq->rq.sched->gpucg_woken);
		else
			clear_bit(DRM_SCHED_GPUCG_WOKEN, &grq->flags);
	}
	rcu_read_unlock();
	/*
	 * Set up before the entity's first job, whose dependency this was; a
	 * stopped entity is going (drm_sched_entity_gpucg_fini() disables the
	 * work, which a call from here then no longer queues).
	 */
	rq = READ_ONCE(entity->rq);
	if (grq && entity->gpucg_client && !READ_ONCE(entity->stopped) &&
	    gpucg_queue_lent(&entity->gpucg))
		queue_work(rq->sched->submit_wq, &entity->gpucg_lent_work);
}

/**
 * drm_sched_entity_gpucg_removed - an entity left its run queue for good
 * @entity: the entity, stopped, under its lock
 *
 * Context: process context.
 */
void drm_sched_entity_gpucg_removed(struct drm_sched_entity *entity)
{
	drm_sched_gpucg_rq_sync(entity->rq);
	drm_sched_entity_gpucg_lent_sync(entity);
}

/* Every job killed with the entity has left it. Any context. */
static void drm_sched_entity_gpucg_killed_cb(struct dma_fence *f,
					     struct dma_fence_cb *cb)
{
	struct drm_sched_entity *entity =
		container_of(cb, struct drm_sched_entity, gpucg_kill_cb);
	struct drm_sched_fence *s_fence = to_drm_sched_fence(f);
	struct drm_gpu_scheduler *sched;
	struct drm_sched_rq *rq;

	/*
	 * Syncs the entity and wakes its scheduler, which looks at the loans.
	 * A stopped entity's rq may still move, or become NULL, at a job
	 * armed after the kill (its push refuses it); a run queue it just
	 * left stays until a grace period. Without one, the work syncs it
	 * from the workqueue of @f's scheduler and wakes none: its engine
	 * looks at the loans at its next selection.
	 */
	rcu_read_lock();
	rq = READ_ONCE(entity->rq);
	sched = rq ? rq->sched : NULL;
	if (!sched && s_fence)
		sched = s_fence->sched;
	if (sched)
		queue_work(sched->submit_wq, &entity->gpucg_lent_work);
	rcu_read_unlock();
}

/**
 * drm_sched_entity_gpucg_killed - an entity's queued jobs were killed
 * @entity: the entity, stopped
 * @last: the finished fence of the last job killed, or of the last job the
 *	  entity ran if none was queued; NULL if there is none
 *
 * A killed job leaves the entity's queue (its scheduled fence signals)
 * once what it waits for and the jobs before it are done, later than
 * the entity's removal synced it: the entity is synced again once the last
 * has, so that the controller ends the loans to them at its scheduler's
 * next selection, even while the entity stays (a flush that gave up on an
 * exiting process whose file is still open elsewhere).
 *
 * Context: process context: drm_sched_entity_kill().
 */
void drm_sched_entity_gpucg_killed(struct drm_sched_entity *entity,
				   struct dma_fence *last)
{
	/* once: a second kill, at the entity's end, finds no job */
	if (!last || !entity->gpucg_client || entity->gpucg_killed)
		return;
	entity->gpucg_killed = dma_fence_get(last);
	if (dma_fence_add_callback(last, &entity->gpucg_kill_cb,
				   drm_sched_entity_gpucg_killed_cb))
		drm_sched_entity_gpucg_killed_cb(last, &entity->gpucg_kill_cb);
}

/* Whether the job @b waits for has left its queue. Any context. */
static bool drm_sched_gpucg_wait_done(struct gpucg_boost *b)
{
	struct drm_sched_gpucg_wait *w =
		container_of(b, struct drm_sched_gpucg_wait, boost);

	return test_bit(DMA_FENCE_FLAG_SIGNALED_BIT, &w->fence->flags);
}

/* Ends the loan of @w. Process context. */
static void drm_sched_gpucg_unlend(struct drm_sched_gpucg_wait *w)
{
	if (!w->fence)
		return;
	/* after this, the core no longer calls drm_sched_gpucg_wait_done() */
	gpucg_boost_unlink(&w->boost);
	dma_fence_put(w->fence);
	w->fence = NULL;
}

/*
 * A scheduler fence of a client's job not yet handed to the hardware:
 * @fence's, or NULL.
 */
static struct drm_sched_fence *drm_sched_gpucg_lendable(struct dma_fence *fence)
{
	struct drm_sched_fence *s_fence;

	s_fence = fence ? to_drm_sched_fence(fence) : NULL;
	if (!s_fence || !s_fence->drm_client_id ||
	    test_bit(DMA_FENCE_FLAG_SIGNALED_BIT, &s_fence->scheduled.flags))
		return NULL;
	return s_fence;
}

/*
 * Lends @entity's priority through @w to the entity that holds the job of
 * @fence, if it is a client's job still in its queue, and not in @entity's
 * own cgroup on its own scheduler (the core links nothing there); @w then
 * holds the job's scheduled fence, and the job's scheduler picks again:
 * the entity that holds the job may be ready, and lent a band it was
 * holding work for. Process context.
 */
static void drm_sched_gpucg_lend(struct drm_sched_entity *entity,
				 struct drm_sched_gpucg_wait *w,
				 struct dma_fence *fence)
{
	struct drm_sched_fence *s_fence = drm_sched_gpucg_lendable(fence);
	struct drm_sched_entity *holder;
	u64 context;

	drm_sched_gpucg_unlend(w);
	if (!s_fence || !entity->gpucg_client)
		return;
	context = s_fence->scheduled.context;
	w->fence = dma_fence_get(&s_fence->scheduled);
	/* the holder cannot leave the xarray, nor its queue go, meanwhile */
	xa_lock(&drm_sched_gpucg_entities);
	holder = xa_load(&drm_sched_gpucg_entities, (unsigned long)context);
	if (holder && holder->fence_context == context) {
		/* an entity's jobs leave it in the order of their seqnos */
		gpucg_boost_link(&w->boost, &entity->gpucg, &holder->gpucg,
				 lower_32_bits(s_fence->scheduled.seqno),
				 drm_sched_gpucg_wait_done);
		/* the core knows whether it is ready only while it is lent */
		gpucg_queue_sync(&holder->gpucg, drm_sched_gpucg_entity_ready);
		/*
		 * The job's scheduler outlives the holder, which leaves the
		 * xarray only at its teardown: after the unlock the job may
		 * be done, the holder gone and the scheduler torn down (its
		 * device unplugged), so it is woken here.
		 */
		drm_sched_wakeup(s_fence->sched);
	}
	xa_unlock(&drm_sched_gpucg_entities);
}

/**
 * drm_sched_entity_gpucg_wait - lend an entity's priority to the job its next
 * job waits for
 * @entity: the entity
 * @fence: the fence its next job waits on
 *
 * If @fence is a scheduler fence of a client's job that is still in its
 * entity's queue, on a scheduler that orders cgroups, and in another cgroup
 * than @entity's or on another scheduler, that entity runs there, while it
 * is ready, at least at the effective gpu.priority of @entity's cgroup, or
 * at what is lent to @entity in turn, until the job is handed to the
 * hardware or @entity stops waiting (drm_sched_entity_gpucg_unwait()).
 * Entities without a client, which go first, lend nothing. @entity itself
 * is not ready now: if it is lent, the controller learns that here.
 *
 * Context: process context: drm_sched_entity_pop_job().
 */
void drm_sched_entity_gpucg_wait(struct drm_sched_entity *entity,
				 struct dma_fence *fence)
{
	drm_sched_gpucg_lend(entity, &entity->gpucg_wait, fence);
	drm_sched_entity_gpucg_lent_sync(entity);
}

/**
 * drm_sched_entity_gpucg_unwait - an entity's next job no longer waits
 * @entity: the entity
 *
 * Context: process context.
 */
void drm_sched_entity_gpucg_unwait(struct drm_sched_entity *entity)
{
	drm_sched_gpucg_unlend(&entity->gpucg_wait);
}

/*
 * Whether the job of @s_fence is held by an entity that a wait can lend
 * to (on a scheduler that orders cgroups). Looked up rather than read from
 * @s_fence->sched: the job may be done meanwhile, its entity gone and its
 * scheduler, another device's, torn down.
 */
static bool drm_sched_gpucg_held(struct drm_sched_fence *s_fence)
{
	u64 context = s_fence->scheduled.context;
	struct drm_sched_entity *holder;
	bool held;

	xa_lock(&drm_sched_gpucg_entities);
	holder = xa_load(&drm_sched_gpucg_entities, (unsigned long)context);
	held = holder && holder->fence_context == context;
	xa_unlock(&drm_sched_gpucg_entities);
	return held;
}

/**
 * drm_sched_job_gpucg_lender - the fence a job lends to once it is queued
 * @job: an armed job, not yet pushed
 *
 * Looks at the job's dependencies in order, past those that cannot lend
 * (not a client's job still queued on a scheduler that orders cgroups),
 * the fences of its own entity, and those of any client of its own cgroup
 * on its own scheduler, whose run queue is its own. A job of another
 * cgroup is taken at once; one of its own cgroup on another scheduler only
 * if there is none: that lends only what the entity has.
 *
 * Return: a reference to that dependency, or NULL; for
 * drm_sched_entity_gpucg_pushed().
 *
 * Context: process context, the submitter's, before the push: the job and
 * its dependencies are the submitter's still.
 */
struct dma_fence *drm_sched_job_gpucg_lender(struct drm_sched_job *job)
{
	u64 client_id = job->s_fence->drm_client_id;
	struct drm_sched_entity *entity = job->entity;
	struct dma_fence *fence, *own = NULL;
	u64 context = entity->fence_context;
	struct drm_sched_fence *s_fence;
	struct gpucg_client *client;
	unsigned long index;
	bool same;

	if (!drm_sched_gpucg_grouped(job->sched) || !entity->gpucg_client)
		return NULL;
	xa_for_each(&job->dependencies, index, fence) {
		if (fence->context == context || fence->context == context + 1)
			continue;
		s_fence = drm_sched_gpucg_lendable(fence);
		if (!s_fence || !drm_sched_gpucg_held(s_fence))
			continue;
		if (s_fence->drm_client_id == client_id) {
			same = true;
		} else {
			client = drm_file_gpucg_client(s_fence->drm_client_id);
			if (!client)
				continue;
			same = gpucg_client_same_cgroup(client, entity->gpucg_client);
			gpucg_client_put(client);
		}
		if (!same)
			return dma_fence_get(fence);
		if (!own && s_fence->sched != job->sched)
			own = fence;
	}
	return dma_fence_get(own);
}
EXPORT_SYMBOL_IF_KUNIT(drm_sched_job_gpucg_lender);

/**
 * drm_sched_entity_gpucg_pushed - a job was pushed: lend what its wait lends
 * @entity: the entity
 * @fence: drm_sched_job_gpucg_lender() of the job, whose reference this
 *	   drops; NULL: the job waits on nothing that lends
 * @first: the job went to an empty queue that runs: it is the entity's
 *	   next job
 *
 * The first job lends as drm_sched_entity_gpucg_wait() would, from now
 * until the job it waits for is handed to the hardware, the next first
 * job is pushed or @entity goes away. The pop that finds the dependency
 * lends again, through &drm_sched_entity.gpucg_wait: a job behind others
 * in its queue lends from then only. The core drops an earlier first
 * job's loan at the pick after what it waited for left its queue; the
 * fence it holds goes at the next push after that, or at the next first
 * job's push, by which that job has left the queue.
 *
 * Context: process context, the submitter's, after the push, serialized
 * with the entity's other pushes and its teardown by the driver.
 */
void drm_sched_entity_gpucg_pushed(struct drm_sched_entity *entity,
				   struct dma_fence *fence, bool first)
{
	struct drm_sched_gpucg_wait *w = &entity->gpucg_head;

	if (first)
		drm_sched_gpucg_lend(entity, w, fence);
	else if (w->fence && drm_sched_gpucg_wait_done(&w->boost))
		drm_sched_gpucg_unlend(w);
	dma_fence_put(fence);
}

/**
 * drm_sched_entity_gpucg_fini - unbind an entity
 * @entity: the entity, which no job and no callback references any more
 *
 * Its jobs' tickets stay valid.
 *
 * Context: process context.
 */
void drm_sched_entity_gpucg_fini(struct drm_sched_entity *entity)
{
	drm_sched_gpucg_unlend(&entity->gpucg_wait);
	drm_sched_gpucg_unlend(&entity->gpucg_head);
	if (!entity->gpucg_ready)
		return;
	if (entity->gpucg_killed) {
		/* before the work is disabled: the callback queues it */
		dma_fence_remove_callback(entity->gpucg_killed,
					  &entity->gpucg_kill_cb);
		dma_fence_put(entity->gpucg_killed);
		entity->gpucg_killed = NULL;
	}
	if (entity->gpucg_client) {
		/* no loan finds it after this; the queue's end drops those made */
		xa_cmpxchg(&drm_sched_gpucg_entities,
			   (unsigned long)entity->fence_context, entity, NULL, 0);
		/*
		 * A fence callback of an entity ever lent may still be in
		 * drm_sched_entity_gpucg_woken() (the entity no longer knows
		 * the fence): callbacks run with interrupts off, so a grace
		 * period waits it out. The work, disabled, is not queued again.
		 */
		if (READ_ONCE(entity->gpucg.linked))
			synchronize_rcu();
		disable_work_sync(&entity->gpucg_lent_work);
	}
	gpucg_queue_fini(&entity->gpucg);
	if (entity->rq)
		drm_sched_gpucg_rq_put(entity->rq);
	gpucg_client_put(entity->gpucg_client);
	entity->gpucg_client = NULL;
}

/**
 * drm_sched_job_gpucg_start - a job goes to the hardware
 * @job: the job, popped from @entity
 * @entity: its entity, under its lock: its run queue is the one the job
 *	    was selected from, or the one it moved to since
 *
 * Context: the run-job work, in drm_sched_entity_pop_job().
 */
void drm_sched_job_gpucg_start(struct drm_sched_job *job,
			       struct drm_sched_entity *entity)
{
	struct drm_gpu_scheduler *sched = entity->rq->sched;
	struct drm_sched_gpucg_rq *grq = drm_sched_gpucg_rq_of(entity->rq);

	if (grq) {
		gpucg_queue_start(&grq->q, &job->gpucg);
		/* lent or not, the entity may be empty or blocked now */
		drm_sched_entity_gpucg_lent_sync(entity);
		/*
		 * Inactive once its last entity is empty. Entities leave the
		 * tree only here, in the run-job work, and where they sync
		 * themselves (drm_sched_entity_gpucg_removed(), _follow());
		 * drm_sched_entity_select_rq() moves only idle ones, which
		 * are in no tree: a tree that still holds one needs no sync.
		 */
		if (!drm_sched_gpucg_rq_busy(&grq->rq))
			gpucg_queue_sync(&grq->q, drm_sched_gpucg_rq_ready);
	} else if (drm_sched_gpucg_grouped(sched)) {
		/* the kernel's own jobs: the device's GPU time, no cgroup's */
		gpucg_kernel_start(sched->gpucg, &job->gpucg);
	} else if (entity->gpucg_ready) {
		gpucg_queue_start(&entity->gpucg, &job->gpucg);
	}
}

/**
 * drm_sched_entity_gpucg_moved - an entity moved to another scheduler
 * @entity: the entity, idle, under its lock
 * @sched: its new scheduler
 *
 * Its queue of the controller moves with it: under RR the one that charges
 * its jobs' GPU time, under the fair and FIFO policies the one that runs
 * only on loan (its run queue is already the right one).
 *
 * Context: any context.
 */
void drm_sched_entity_gpucg_moved(struct drm_sched_entity *entity,
				  struct drm_gpu_scheduler *sched)
{
	if (entity->gpucg_ready && sched->gpucg && entity->gpucg.engine)
		gpucg_queue_move(&entity->gpucg, sched->gpucg);
}

/**
 * drm_sched_job_gpucg_charge - charge the GPU time of a job
 * @job: the job; its ticket is cleared, so a second charge does nothing
 * @duration: the GPU time the scheduler measured; the driver's
 *	      &drm_sched_backend_ops.job_gpu_time replaces it
 *
 * Context: the free-job work, or drm_sched_job_cleanup() with 0 for a job
 * whose time was not charged.
 */
void drm_sched_job_gpucg_charge(struct drm_sched_job *job, ktime_t duration)
{
	struct drm_gpu_scheduler *sched = job->sched;
	u64 ns = ktime_to_ns(duration);

	if (!job->gpucg.ent)	/* it never ran, or it is charged */
		return;
	if (ns && sched->ops->job_gpu_time)
		ns = sched->ops->job_gpu_time(job);
	/* a scheduler torn down with jobs pending has no engine: unpins */
	gpucg_charge(sched->gpucg, &job->gpucg, ns);
}
