// SPDX-License-Identifier: GPL-2.0
/*
 * GPU controller for cgroup v2.
 *
 * A GPU is identified by the device number of its DRM render node
 * ("226:128" for /dev/dri/renderD128); the DRM core registers every render
 * node with gpucg_register_device() and unregisters it when the node goes
 * away. Devices without a render node are not controlled.
 *
 * gpu.weight distributes GPU engine time with the weight model of
 * Documentation/admin-guide/cgroup-v2.rst: a cgroup has a default weight in
 * [1, 10000] (100 when created) and may override it per device, in the
 * format of io.weight:
 *
 *	default 100
 *	226:128 300
 *
 * gpu.priority orders work strictly: runnable work of a higher effective
 * priority runs before lower. The scale is i915's context priority scale,
 * [-1023, 1023], default 0. The effective priority of a cgroup is the minimum
 * of its own and that of its ancestors (the root imposes no clamp), so a
 * delegated subtree can lower its priority but never raise it; it is shown
 * in gpu.priority.effective.
 *
 * GPU time is scheduled by the core below ("GPU time: the scheduling core")
 * and reported in gpu.stat: "MAJ:MIN usage_usec=N wait_usec=N" per device,
 * the time the cgroup's work ran and the time its work items spent queued
 * before they started (summed over the items, like the run delay of
 * schedstats), both hierarchical, kept after the tasks exit.
 *
 * gpu.memory.max limits the GPU buffer memory charged to a cgroup and its
 * descendants on one device (the "limits" model): a buffer is charged, when
 * userspace first gets a handle to it, to the cgroup of the task doing so,
 * and stays charged there until it is freed; the buffer pins its cgroup, so
 * a removed cgroup lingers until its buffers are gone. Kernel threads and the
 * root cgroup are not charged, nor are buffers imported from another device
 * (their exporter pays). An allocation that would take any cgroup on the path
 * over its limit fails with -ENOMEM. It counts in gpu.memory.events.local of
 * the cgroup whose limit was hit and in gpu.memory.events of every cgroup
 * from the allocating one up to that one. Lowering a limit below the usage
 * succeeds and only stops further growth.
 *
 * Every write sets one key. Malformed input and unknown devices fail with
 * -EINVAL, a number out of range with -ERANGE, and a failed write changes
 * nothing.
 *
 * Locking: gpucg_mutex protects the device table and the creation and
 * configuration of per-(cgroup, device) pools; drivers may hold their own
 * locks when they call in (DRM's object_name_lock nests outside it). A pool
 * lives as long as its cgroup and is freed in css_free(), so whoever holds a
 * reference on the cgroup may use its pools without locks. Charges are
 * lockless (page_counter); scalar knobs are written with WRITE_ONCE() and
 * read with READ_ONCE().
 */

#include <linux/cgroup.h>
#include <linux/cgroup_gpu.h>
#include <linux/kdev_t.h>
#include <linux/kernel.h>
#include <linux/kref.h>
#include <linux/ktime.h>
#include <linux/list.h>
#include <linux/mutex.h>
#include <linux/overflow.h>
#include <linux/page_counter.h>
#include <linux/rbtree.h>
#include <linux/rcupdate.h>
#include <linux/sched.h>
#include <linux/seq_file.h>
#include <linux/slab.h>
#include <linux/spinlock.h>
#include <linux/string.h>
#include <linux/xarray.h>

#define GPUCG_PRIO_MIN		(-1023)
#define GPUCG_PRIO_MAX		1023
#define GPUCG_DEFAULT_STR	"default"

struct gpucg_device {
	dev_t			devt;
	u32			id;	/* index in gpucg_devices and gpucg->pools */
	bool			dead;	/* unregistered, under gpucg_mutex */
	struct kref		ref;	/* the driver's, and one per pool */
	unsigned int		nr_engines;		/* under gpucg_mutex */
	struct gpucg_engine	*engines[GPUCG_MAX_ENGINES];
	struct rcu_head		rcu;
};

/*
 * A cgroup's place in one engine's scheduling tree; see "GPU time: the
 * scheduling core" below. All fields but pool and parent are under the
 * engine's lock.
 */
struct gpucg_entity {
	struct rb_node		node;		/* in parent->children, if active */
	struct gpucg_entity	*parent;	/* NULL for an engine's top */
	struct gpucg_pool	*pool;		/* NULL for the top and root */
	struct rb_root_cached	children;	/* active children */
	struct rb_root_cached	works;		/* own queued work */
	u64			vtime;
	u64			min_vtime;	/* of the active children */
	int			prio;		/* effective priority of own work */
	int			key_prio;	/* highest in the subtree */
	bool			active;
};

struct gpucg_engine {
	struct gpucg_device	*dev;
	unsigned int		idx;		/* in dev->engines and pool->ent */
	spinlock_t		lock;		/* everything scheduled on it */
	u64			seq;		/* orders work, under lock */
	struct gpucg_entity	top;		/* the root of the tree */
	struct gpucg_entity	root;		/* work of the root cgroup */
};

/* State of one cgroup on one device, created when first needed. */
struct gpucg_pool {
	struct gpucg		*cg;
	struct gpucg_device	*dev;
	struct gpucg_pool	*parent;	/* the parent cgroup's, or NULL */
	struct gpucg_entity	*ent[GPUCG_MAX_ENGINES];	/* lazily */
	atomic64_t		usage_ns;	/* GPU time, hierarchical */
	atomic64_t		wait_ns;	/* runnable, not running */
	u32			weight;		/* 0: the cgroup's default */
	u64			mem_max;	/* bytes as written, U64_MAX: max */
	struct page_counter	mem;		/* parent: the parent's pool */
	atomic64_t		events;		/* refusals, hierarchical */
	atomic64_t		events_local;	/* refusals by this limit */
};

struct gpucg {
	struct cgroup_subsys_state	css;
	u32				weight;		/* default weight */
	int				priority;
	struct xarray			pools;		/* device id -> pool */
	struct cgroup_file		events_file;
	struct cgroup_file		events_local_file;
};

static DEFINE_MUTEX(gpucg_mutex);
static DEFINE_XARRAY_ALLOC(gpucg_devices);
static struct gpucg gpucg_root;

static struct gpucg *css_gpucg(struct cgroup_subsys_state *css)
{
	return css ? container_of(css, struct gpucg, css) : NULL;
}

static struct gpucg *gpucg_parent(struct gpucg *cg)
{
	return css_gpucg(cg->css.parent);
}

/* Returns the effective priority of @cg: the minimum along its path. */
static int gpucg_priority_effective(struct gpucg *cg)
{
	int prio = GPUCG_PRIO_MAX;

	for (; cg && cg != &gpucg_root; cg = gpucg_parent(cg))
		prio = min(prio, READ_ONCE(cg->priority));
	return prio;
}

static void gpucg_device_free(struct kref *ref)
{
	struct gpucg_device *dev = container_of(ref, struct gpucg_device, ref);
	unsigned int i;

	xa_erase(&gpucg_devices, dev->id);
	for (i = 0; i < dev->nr_engines; i++)
		kfree(dev->engines[i]);
	kfree_rcu(dev, rcu);
}

/**
 * gpucg_register_device() - put a GPU under the controller
 * @devt: device number of the GPU's render node
 *
 * Context: process context, may sleep.
 * Return: a handle for the calls below, or an ERR_PTR().
 */
struct gpucg_device *gpucg_register_device(dev_t devt)
{
	struct gpucg_device *dev;
	int ret;

	dev = kzalloc(sizeof(*dev), GFP_KERNEL);
	if (!dev)
		return ERR_PTR(-ENOMEM);
	dev->devt = devt;
	kref_init(&dev->ref);

	ret = xa_alloc(&gpucg_devices, &dev->id, dev, xa_limit_31b, GFP_KERNEL);
	if (ret) {
		kfree(dev);
		return ERR_PTR(ret);
	}
	return dev;
}
EXPORT_SYMBOL_GPL(gpucg_register_device);

/**
 * gpucg_unregister_device() - take a GPU from the controller
 * @dev: handle from gpucg_register_device(); NULL is ignored
 *
 * The device disappears from the interface files and takes no new settings.
 * Buffers charged to it stay charged until they are freed: the handle stays
 * valid for gpucg_try_charge_mem() (which then charges nothing) and
 * gpucg_uncharge_mem() until gpucg_put_device().
 *
 * Context: process context, may sleep.
 */
void gpucg_unregister_device(struct gpucg_device *dev)
{
	if (IS_ERR_OR_NULL(dev))
		return;
	mutex_lock(&gpucg_mutex);
	WRITE_ONCE(dev->dead, true);
	mutex_unlock(&gpucg_mutex);
}
EXPORT_SYMBOL_GPL(gpucg_unregister_device);

/**
 * gpucg_put_device() - drop the driver's reference to a device
 * @dev: handle from gpucg_register_device(); NULL is ignored
 *
 * Context: any context.
 */
void gpucg_put_device(struct gpucg_device *dev)
{
	if (!IS_ERR_OR_NULL(dev))
		kref_put(&dev->ref, gpucg_device_free);
}
EXPORT_SYMBOL_GPL(gpucg_put_device);

static struct gpucg_device *gpucg_device_find(dev_t devt)
{
	struct gpucg_device *dev;
	unsigned long id;

	lockdep_assert_held(&gpucg_mutex);
	xa_for_each(&gpucg_devices, id, dev)
		if (dev->devt == devt && !dev->dead)
			return dev;
	return NULL;
}

static struct gpucg_pool *gpucg_pool_create(struct gpucg *cg,
					    struct gpucg_device *dev)
{
	struct gpucg *parent = gpucg_parent(cg);
	struct gpucg_pool *pool, *ppool = NULL;
	int ret;

	if (parent != &gpucg_root)
		ppool = xa_load(&parent->pools, dev->id);

	pool = kzalloc(sizeof(*pool), GFP_KERNEL);
	if (!pool)
		return ERR_PTR(-ENOMEM);
	pool->cg = cg;
	pool->dev = dev;
	pool->parent = ppool;
	pool->mem_max = U64_MAX;
	page_counter_init(&pool->mem, ppool ? &ppool->mem : NULL, false);
	ret = xa_insert(&cg->pools, dev->id, pool, GFP_KERNEL);
	if (ret) {
		kfree(pool);
		return ERR_PTR(ret);
	}
	kref_get(&dev->ref);
	return pool;
}

/*
 * Returns the pool of @cg on @dev. Its page counter hangs from the parent's
 * pool, so missing pools are created top-down from the highest ancestor
 * that lacks one.
 */
static struct gpucg_pool *gpucg_pool_get(struct gpucg *cg,
					 struct gpucg_device *dev)
{
	struct gpucg_pool *pool;
	struct gpucg *top, *parent;

	lockdep_assert_held(&gpucg_mutex);
	pool = xa_load(&cg->pools, dev->id);
	while (!pool) {
		top = cg;
		while ((parent = gpucg_parent(top)) != &gpucg_root &&
		       !xa_load(&parent->pools, dev->id))
			top = parent;
		pool = gpucg_pool_create(top, dev);
		if (IS_ERR(pool) || top == cg)
			return pool;
		pool = NULL;
	}
	return pool;
}

static void gpucg_mem_event(struct gpucg_pool *pool, struct gpucg_pool *limit)
{
	atomic64_inc(&limit->events_local);
	cgroup_file_notify(&limit->cg->events_local_file);
	for (;;) {
		atomic64_inc(&pool->events);
		cgroup_file_notify(&pool->cg->events_file);
		if (pool == limit)
			break;
		pool = xa_load(&gpucg_parent(pool->cg)->pools, pool->dev->id);
	}
}

/**
 * gpucg_try_charge_mem() - charge a buffer to the current task's cgroup
 * @dev: the device the buffer belongs to; NULL charges nothing
 * @size: the buffer's size in bytes
 * @poolp: where to store what gpucg_uncharge_mem() needs, NULL if nothing
 *	   was charged
 *
 * The charge pins the cgroup until it is uncharged.
 *
 * Context: process context, may sleep.
 * Return: 0, or -ENOMEM if a limit on the path does not allow it.
 */
int gpucg_try_charge_mem(struct gpucg_device *dev, u64 size,
			 struct gpucg_pool **poolp)
{
	unsigned long nr_pages = DIV_ROUND_UP_ULL(size, PAGE_SIZE);
	struct cgroup_subsys_state *css;
	struct page_counter *fail;
	struct gpucg_pool *pool;
	struct gpucg *cg;

	*poolp = NULL;
	if (!dev || READ_ONCE(dev->dead) || (current->flags & PF_KTHREAD))
		return 0;

	css = task_get_css(current, gpu_cgrp_id);
	cg = css_gpucg(css);
	if (cg == &gpucg_root) {
		css_put(css);
		return 0;
	}

	pool = xa_load(&cg->pools, dev->id);
	if (!pool) {
		mutex_lock(&gpucg_mutex);
		pool = gpucg_pool_get(cg, dev);
		mutex_unlock(&gpucg_mutex);
		if (IS_ERR(pool)) {
			css_put(css);
			return PTR_ERR(pool);
		}
	}

	if (!page_counter_try_charge(&pool->mem, nr_pages, &fail)) {
		gpucg_mem_event(pool, container_of(fail, struct gpucg_pool, mem));
		css_put(css);
		return -ENOMEM;
	}
	*poolp = pool;
	return 0;
}
EXPORT_SYMBOL_GPL(gpucg_try_charge_mem);

/**
 * gpucg_uncharge_mem() - undo gpucg_try_charge_mem()
 * @pool: what gpucg_try_charge_mem() stored; NULL is ignored
 * @size: the size that was charged
 *
 * Context: any context.
 */
void gpucg_uncharge_mem(struct gpucg_pool *pool, u64 size)
{
	if (!pool)
		return;
	page_counter_uncharge(&pool->mem, DIV_ROUND_UP_ULL(size, PAGE_SIZE));
	css_put(&pool->cg->css);
}
EXPORT_SYMBOL_GPL(gpucg_uncharge_mem);

/*
 * GPU time: the scheduling core.
 *
 * Drivers queue work on engines and ask the core which work runs next; the
 * core decides, the driver runs it and reports the GPU time it took.
 *
 * Every engine keeps a tree of entities that mirrors the cgroup hierarchy
 * and holds only the cgroups that have work queued on it, the active ones:
 * an idle cgroup costs nothing and nothing ever scans the whole hierarchy.
 * An active entity sits in its parent entity's rbtree, ordered by
 *
 *   1. priority, highest first: the highest effective gpu.priority of the
 *	work queued in its subtree, so that work of a higher priority anywhere
 *	runs before work of a lower priority anywhere else;
 *   2. vtime, lowest first: the GPU time consumed in the subtree divided by
 *	the entity's weight, as in CFS and blk-iocost.
 *
 * A pick descends from the engine's top through the leftmost entity of each
 * level to the cgroup whose work runs next; inside a cgroup, work runs by
 * context priority, then in submission order. A pick costs O(depth); a queue
 * or a retire O(depth * log(active siblings)).
 *
 * When work retires, its GPU time t advances the vtime of its cgroup's
 * entity and of every ancestor's by t * 100 / weight, so that siblings share
 * the engine in proportion to their weights at every level: a cgroup gets
 * the product of weight / sum-of-active-sibling-weights down its path. It
 * is work-conserving: only active entities compete. An entity that becomes
 * active starts no lower than the vtime its parent last picked (min_vtime),
 * so idling banks no credit. A weight change counts from the next retire.
 *
 * Work of the root cgroup is a leaf under the top with the default weight
 * and priority 0. GPU time is charged to the cgroup of the client's owner
 * when the work was queued (gpucg_client_set_owner()).
 *
 * Locking: an engine's lock protects its entities' trees, keys and vtimes
 * and is taken with interrupts off, as drivers retire work from interrupt
 * or hrtimer context. Entities are created under gpucg_mutex, published
 * with smp_store_release() and freed with their cgroup's pools; queued work
 * pins its cgroup.
 */

struct gpucg_client {
	struct gpucg __rcu	*cg;	/* the owner's, holding a reference */
};

static u32 gpucg_pool_weight(struct gpucg_pool *pool)
{
	return READ_ONCE(pool->weight) ?: READ_ONCE(pool->cg->weight);
}

static void gpucg_entity_init(struct gpucg_entity *e, struct gpucg_entity *parent,
			      struct gpucg_pool *pool)
{
	e->parent = parent;
	e->pool = pool;
	e->children = RB_ROOT_CACHED;
	e->works = RB_ROOT_CACHED;
	RB_CLEAR_NODE(&e->node);
}

/**
 * gpucg_engine_create() - add an engine, a queue of GPU work, to a device
 * @dev: the device, from gpucg_register_device()
 *
 * The engine lives as long as the device.
 *
 * Context: process context, may sleep.
 * Return: the engine, or an ERR_PTR().
 */
struct gpucg_engine *gpucg_engine_create(struct gpucg_device *dev)
{
	struct gpucg_engine *engine;

	engine = kzalloc(sizeof(*engine), GFP_KERNEL);
	if (!engine)
		return ERR_PTR(-ENOMEM);
	engine->dev = dev;
	spin_lock_init(&engine->lock);
	gpucg_entity_init(&engine->top, NULL, NULL);
	gpucg_entity_init(&engine->root, &engine->top, NULL);

	mutex_lock(&gpucg_mutex);
	if (dev->nr_engines == GPUCG_MAX_ENGINES) {
		mutex_unlock(&gpucg_mutex);
		kfree(engine);
		return ERR_PTR(-ENOSPC);
	}
	engine->idx = dev->nr_engines;
	dev->engines[dev->nr_engines++] = engine;
	mutex_unlock(&gpucg_mutex);
	return engine;
}
EXPORT_SYMBOL_GPL(gpucg_engine_create);

/**
 * gpucg_client_create() - a GPU client (a DRM file), owned by current
 *
 * Context: process context, may sleep.
 * Return: the client, or an ERR_PTR().
 */
struct gpucg_client *gpucg_client_create(void)
{
	struct gpucg_client *client;

	client = kzalloc(sizeof(*client), GFP_KERNEL);
	if (!client)
		return ERR_PTR(-ENOMEM);
	RCU_INIT_POINTER(client->cg,
			 css_gpucg(task_get_css(current, gpu_cgrp_id)));
	return client;
}
EXPORT_SYMBOL_GPL(gpucg_client_create);

/**
 * gpucg_client_destroy() - free a client
 * @client: from gpucg_client_create(); NULL and ERR_PTR()s are ignored
 *
 * Its queued work must be gone (retired or never queued).
 */
void gpucg_client_destroy(struct gpucg_client *client)
{
	if (IS_ERR_OR_NULL(client))
		return;
	css_put(&rcu_dereference_protected(client->cg, true)->css);
	kfree(client);
}
EXPORT_SYMBOL_GPL(gpucg_client_destroy);

/**
 * gpucg_client_set_owner() - charge the client's future work to @task's cgroup
 * @client: the client
 * @task: its new owner, as drm_file_update_pid() defines it
 *
 * Work already queued stays charged where it was queued.
 *
 * Context: process context; calls for one client must be serialized.
 */
void gpucg_client_set_owner(struct gpucg_client *client,
			    struct task_struct *task)
{
	struct gpucg *old = rcu_dereference_protected(client->cg, true);
	struct cgroup_subsys_state *css;

	rcu_read_lock();
	css = task_css(task, gpu_cgrp_id);
	rcu_read_unlock();
	if (css == &old->css)
		return;
	css = task_get_css(task, gpu_cgrp_id);
	rcu_assign_pointer(client->cg, css_gpucg(css));
	css_put(&old->css);
}
EXPORT_SYMBOL_GPL(gpucg_client_set_owner);

/* Returns the entity of @cg on @engine, creating it and its ancestors'. */
static struct gpucg_entity *gpucg_entity_get(struct gpucg *cg,
					     struct gpucg_engine *engine)
{
	unsigned int idx = engine->idx;
	struct gpucg_entity *ent;
	struct gpucg_pool *pool, *p;

	if (cg == &gpucg_root)
		return &engine->root;

	pool = xa_load(&cg->pools, engine->dev->id);
	/* pairs with the release below: the entity is initialized */
	ent = pool ? smp_load_acquire(&pool->ent[idx]) : NULL;
	if (ent)
		return ent;

	mutex_lock(&gpucg_mutex);
	pool = gpucg_pool_get(cg, engine->dev);
	while (!IS_ERR(pool) && !pool->ent[idx]) {
		/* top-down: the highest pool without an entity */
		for (p = pool; p->parent && !p->parent->ent[idx]; p = p->parent)
			;
		ent = kzalloc(sizeof(*ent), GFP_KERNEL);
		if (!ent) {
			pool = ERR_PTR(-ENOMEM);
			break;
		}
		gpucg_entity_init(ent, p->parent ? p->parent->ent[idx] :
				  &engine->top, p);
		/* publish the initialized entity to lockless readers */
		smp_store_release(&p->ent[idx], ent);
	}
	mutex_unlock(&gpucg_mutex);
	return IS_ERR(pool) ? ERR_CAST(pool) : pool->ent[idx];
}

static bool gpucg_entity_less(struct rb_node *a, const struct rb_node *b)
{
	const struct gpucg_entity *ea = rb_entry(a, struct gpucg_entity, node);
	const struct gpucg_entity *eb = rb_entry(b, struct gpucg_entity, node);

	if (ea->key_prio != eb->key_prio)
		return ea->key_prio > eb->key_prio;
	return (s64)(ea->vtime - eb->vtime) < 0;
}

static bool gpucg_work_less(struct rb_node *a, const struct rb_node *b)
{
	const struct gpucg_work *wa = rb_entry(a, struct gpucg_work, node);
	const struct gpucg_work *wb = rb_entry(b, struct gpucg_work, node);

	if (wa->ctx_prio != wb->ctx_prio)
		return wa->ctx_prio > wb->ctx_prio;
	return wa->seq < wb->seq;
}

static struct gpucg_entity *gpucg_first_child(struct gpucg_entity *e)
{
	struct rb_node *n = rb_first_cached(&e->children);

	return n ? rb_entry(n, struct gpucg_entity, node) : NULL;
}

/*
 * Re-sorts @e and its ancestors after their work or children changed:
 * activates, re-keys or deactivates each in its parent's tree.
 */
static void gpucg_entity_update(struct gpucg_engine *engine,
				struct gpucg_entity *e)
{
	struct gpucg_entity *child;
	bool own, busy;

	lockdep_assert_held(&engine->lock);
	for (; e->parent; e = e->parent) {
		own = !RB_EMPTY_ROOT(&e->works.rb_root);
		child = gpucg_first_child(e);
		busy = own || child;

		if (e->active)
			rb_erase_cached(&e->node, &e->parent->children);
		if (!busy) {
			e->active = false;
			continue;
		}
		if (!e->active && (s64)(e->vtime - e->parent->min_vtime) < 0)
			e->vtime = e->parent->min_vtime;
		e->active = true;
		e->key_prio = own ? e->prio : GPUCG_PRIO_MIN;
		if (child && child->key_prio > e->key_prio)
			e->key_prio = child->key_prio;
		rb_add_cached(&e->node, &e->parent->children, gpucg_entity_less);
	}
}

/**
 * gpucg_work_queue() - make work runnable on an engine
 * @engine: the engine
 * @client: whose work; it is charged to the client owner's cgroup
 * @work: the work, embedded in the driver's job
 * @ctx_prio: the context priority of the work inside its cgroup
 *
 * Context: process context, may sleep.
 * Return: 0, or -ENOMEM.
 */
int gpucg_work_queue(struct gpucg_engine *engine, struct gpucg_client *client,
		     struct gpucg_work *work, int ctx_prio)
{
	struct gpucg_entity *ent;
	unsigned long flags;
	struct gpucg *cg;

	rcu_read_lock();
	cg = rcu_dereference(client->cg);
	css_get(&cg->css);	/* the client holds a reference */
	rcu_read_unlock();

	ent = gpucg_entity_get(cg, engine);
	if (IS_ERR(ent)) {
		css_put(&cg->css);
		return PTR_ERR(ent);
	}
	work->cg = cg;
	work->ent = ent;
	work->ctx_prio = ctx_prio;
	work->prio = cg == &gpucg_root ? 0 : gpucg_priority_effective(cg);
	work->queued_ns = ktime_get_ns();

	spin_lock_irqsave(&engine->lock, flags);
	work->seq = engine->seq++;
	ent->prio = work->prio;
	rb_add_cached(&work->node, &ent->works, gpucg_work_less);
	gpucg_entity_update(engine, ent);
	spin_unlock_irqrestore(&engine->lock, flags);
	return 0;
}
EXPORT_SYMBOL_GPL(gpucg_work_queue);

/**
 * gpucg_work_pick() - take the work that runs next off an engine's queue
 * @engine: the engine
 *
 * Context: any context.
 * Return: the work, or NULL if nothing is queued.
 */
struct gpucg_work *gpucg_work_pick(struct gpucg_engine *engine)
{
	struct gpucg_entity *e = &engine->top, *child;
	struct gpucg_work *work = NULL;
	struct gpucg_pool *pool;
	unsigned long flags;
	struct rb_node *n;
	u64 now;

	spin_lock_irqsave(&engine->lock, flags);
	for (;;) {
		child = gpucg_first_child(e);
		n = rb_first_cached(&e->works);
		if (child && (!n || child->key_prio > e->prio)) {
			if ((s64)(child->vtime - e->min_vtime) > 0)
				e->min_vtime = child->vtime;
			e = child;
			continue;
		}
		if (!n)
			break;
		work = rb_entry(n, struct gpucg_work, node);
		rb_erase_cached(n, &e->works);
		gpucg_entity_update(engine, e);
		break;
	}
	spin_unlock_irqrestore(&engine->lock, flags);

	if (work) {
		now = ktime_get_ns();
		for (pool = work->ent->pool; pool; pool = pool->parent)
			atomic64_add(now - work->queued_ns, &pool->wait_ns);
	}
	return work;
}
EXPORT_SYMBOL_GPL(gpucg_work_pick);

/**
 * gpucg_work_retire() - account the GPU time of picked work that finished
 * @engine: the engine it ran on
 * @work: the work, from gpucg_work_pick()
 * @ns: the GPU time it took
 *
 * Context: any context.
 */
void gpucg_work_retire(struct gpucg_engine *engine, struct gpucg_work *work,
		       u64 ns)
{
	struct gpucg_entity *e;
	struct gpucg_pool *pool;
	unsigned long flags;
	u64 delta;

	spin_lock_irqsave(&engine->lock, flags);
	for (e = work->ent; e->parent; e = e->parent) {
		delta = e->pool ? div_u64(ns * CGROUP_WEIGHT_DFL,
					  gpucg_pool_weight(e->pool)) : ns;
		if (e->active)
			rb_erase_cached(&e->node, &e->parent->children);
		e->vtime += delta;
		if (e->active)
			rb_add_cached(&e->node, &e->parent->children,
				      gpucg_entity_less);
	}
	spin_unlock_irqrestore(&engine->lock, flags);

	for (pool = work->ent->pool; pool; pool = pool->parent)
		atomic64_add(ns, &pool->usage_ns);
	css_put(&work->cg->css);
}
EXPORT_SYMBOL_GPL(gpucg_work_retire);

/**
 * gpucg_work_preempts() - should queued work preempt running work?
 * @engine: the engine
 * @running: the work running on it
 *
 * Context: any context.
 * Return: true if work of a higher effective priority is queued.
 */
bool gpucg_work_preempts(struct gpucg_engine *engine,
			 const struct gpucg_work *running)
{
	struct gpucg_entity *first;
	unsigned long flags;
	bool ret;

	spin_lock_irqsave(&engine->lock, flags);
	first = gpucg_first_child(&engine->top);
	ret = first && first->key_prio > running->prio;
	spin_unlock_irqrestore(&engine->lock, flags);
	return ret;
}
EXPORT_SYMBOL_GPL(gpucg_work_preempts);

static struct cgroup_subsys_state *
gpucg_css_alloc(struct cgroup_subsys_state *parent_css)
{
	struct gpucg *cg;

	if (!parent_css) {
		cg = &gpucg_root;
	} else {
		cg = kzalloc(sizeof(*cg), GFP_KERNEL);
		if (!cg)
			return ERR_PTR(-ENOMEM);
	}
	cg->weight = CGROUP_WEIGHT_DFL;
	xa_init(&cg->pools);
	return &cg->css;
}

static void gpucg_css_free(struct cgroup_subsys_state *css)
{
	struct gpucg *cg = css_gpucg(css);
	struct gpucg_pool *pool;
	unsigned long id;
	unsigned int i;

	/*
	 * No charge and no queued work is left: each would hold a reference
	 * on @css. The children's entities are gone: they pinned @css too.
	 */
	xa_for_each(&cg->pools, id, pool) {
		for (i = 0; i < GPUCG_MAX_ENGINES; i++)
			kfree(pool->ent[i]);
		gpucg_put_device(pool->dev);
		kfree(pool);
	}
	xa_destroy(&cg->pools);
	if (cg != &gpucg_root)
		kfree(cg);
}

/*
 * Parsing, shared by every file: a weight, a priority and a device key.
 * kstrto*() fail with -EINVAL on malformed input and -ERANGE on overflow.
 */
static int gpucg_parse_weight(const char *s, u32 *weight)
{
	s64 v;
	int ret;

	ret = kstrtos64(s, 10, &v);
	if (ret)
		return ret;
	if (v < CGROUP_WEIGHT_MIN || v > CGROUP_WEIGHT_MAX)
		return -ERANGE;
	*weight = v;
	return 0;
}

static int gpucg_parse_devt(char *s, dev_t *devt)
{
	char *min = strchr(s, ':');
	unsigned int maj, mnr;

	if (!min)
		return -EINVAL;
	*min++ = '\0';
	if (kstrtouint(s, 10, &maj) || kstrtouint(min, 10, &mnr))
		return -EINVAL;
	if (maj != MAJOR(MKDEV(maj, 0)) || mnr != MINOR(MKDEV(0, mnr)))
		return -EINVAL;
	*devt = MKDEV(maj, mnr);
	return 0;
}

/* Splits @buf into at most @max whitespace-separated words. */
static int gpucg_split(char *buf, char **words, int max)
{
	char *w;
	int n = 0;

	while ((w = strsep(&buf, " \t\n"))) {
		if (!*w)
			continue;
		if (n == max)
			return -EINVAL;
		words[n++] = w;
	}
	return n;
}

static int gpu_weight_show(struct seq_file *sf, void *v)
{
	struct gpucg *cg = css_gpucg(seq_css(sf));
	struct gpucg_pool *pool;
	unsigned long id;

	seq_printf(sf, "%s %u\n", GPUCG_DEFAULT_STR, READ_ONCE(cg->weight));
	mutex_lock(&gpucg_mutex);
	xa_for_each(&cg->pools, id, pool)
		if (pool->weight && !pool->dev->dead)
			seq_printf(sf, "%u:%u %u\n", MAJOR(pool->dev->devt),
				   MINOR(pool->dev->devt), pool->weight);
	mutex_unlock(&gpucg_mutex);
	return 0;
}

/* "W", "default W", "MAJ:MIN W" or "MAJ:MIN default" */
static ssize_t gpu_weight_write(struct kernfs_open_file *of, char *buf,
				size_t nbytes, loff_t off)
{
	struct gpucg *cg = css_gpucg(of_css(of));
	struct gpucg_device *dev;
	struct gpucg_pool *pool;
	char *words[2], *key, *val;
	u32 weight = 0;
	dev_t devt;
	int n, ret;

	n = gpucg_split(buf, words, 2);
	if (n <= 0)
		return -EINVAL;
	key = n == 2 ? words[0] : GPUCG_DEFAULT_STR;
	val = words[n - 1];

	if (!strcmp(key, GPUCG_DEFAULT_STR)) {
		ret = gpucg_parse_weight(val, &weight);
		if (ret)
			return ret;
		WRITE_ONCE(cg->weight, weight);
		return nbytes;
	}

	ret = gpucg_parse_devt(key, &devt);
	if (ret)
		return ret;
	if (strcmp(val, GPUCG_DEFAULT_STR)) {
		ret = gpucg_parse_weight(val, &weight);
		if (ret)
			return ret;
	}

	mutex_lock(&gpucg_mutex);
	dev = gpucg_device_find(devt);
	if (!dev) {
		ret = -EINVAL;
	} else if (!weight) {
		pool = xa_load(&cg->pools, dev->id);
		if (pool)
			WRITE_ONCE(pool->weight, 0);
	} else {
		pool = gpucg_pool_get(cg, dev);
		if (IS_ERR(pool))
			ret = PTR_ERR(pool);
		else
			WRITE_ONCE(pool->weight, weight);
	}
	mutex_unlock(&gpucg_mutex);
	return ret ?: nbytes;
}

static int gpu_priority_show(struct seq_file *sf, void *v)
{
	seq_printf(sf, "%d\n", READ_ONCE(css_gpucg(seq_css(sf))->priority));
	return 0;
}

static ssize_t gpu_priority_write(struct kernfs_open_file *of, char *buf,
				  size_t nbytes, loff_t off)
{
	struct gpucg *cg = css_gpucg(of_css(of));
	int prio, ret;

	ret = kstrtoint(strstrip(buf), 10, &prio);
	if (ret)
		return ret;
	if (prio < GPUCG_PRIO_MIN || prio > GPUCG_PRIO_MAX)
		return -ERANGE;
	WRITE_ONCE(cg->priority, prio);
	return nbytes;
}

static int gpu_priority_effective_show(struct seq_file *sf, void *v)
{
	seq_printf(sf, "%d\n", gpucg_priority_effective(css_gpucg(seq_css(sf))));
	return 0;
}

/* "4096", "512K", "2G" or "max" (U64_MAX) */
static int gpucg_parse_bytes(char *s, u64 *bytes)
{
	size_t len = strlen(s);
	unsigned int shift = 0;
	u64 v;
	int ret;

	if (!strcmp(s, "max")) {
		*bytes = U64_MAX;
		return 0;
	}
	if (len) {
		switch (s[len - 1]) {
		case 'K': case 'k':
			shift = 10;
			break;
		case 'M': case 'm':
			shift = 20;
			break;
		case 'G': case 'g':
			shift = 30;
			break;
		case 'T': case 't':
			shift = 40;
			break;
		}
		if (shift)
			s[len - 1] = '\0';
	}
	ret = kstrtou64(s, 10, &v);
	if (ret)
		return ret;
	if (check_shl_overflow(v, shift, &v) || v == U64_MAX)
		return -ERANGE;
	*bytes = v;
	return 0;
}

enum gpucg_device_file {
	GPUCG_STAT,
	GPUCG_MEM_MAX,
	GPUCG_MEM_CURRENT,
	GPUCG_MEM_PEAK,
	GPUCG_MEM_EVENTS,
	GPUCG_MEM_EVENTS_LOCAL,
};

/* One line per registered device, whether or not @cg has used it. */
static int gpu_device_show(struct seq_file *sf, void *v)
{
	struct gpucg *cg = css_gpucg(seq_css(sf));
	enum gpucg_device_file file = seq_cft(sf)->private;
	struct gpucg_device *dev;
	struct gpucg_pool *pool;
	unsigned long id;
	u64 val;

	mutex_lock(&gpucg_mutex);
	xa_for_each(&gpucg_devices, id, dev) {
		if (dev->dead)
			continue;
		pool = xa_load(&cg->pools, id);
		seq_printf(sf, "%u:%u ", MAJOR(dev->devt), MINOR(dev->devt));
		switch (file) {
		case GPUCG_STAT:
			val = pool ? atomic64_read(&pool->usage_ns) : 0;
			seq_printf(sf, "usage_usec=%llu ",
				   div_u64(val, NSEC_PER_USEC));
			val = pool ? atomic64_read(&pool->wait_ns) : 0;
			seq_printf(sf, "wait_usec=%llu\n",
				   div_u64(val, NSEC_PER_USEC));
			break;
		case GPUCG_MEM_MAX:
			val = pool ? pool->mem_max : U64_MAX;
			if (val == U64_MAX)
				seq_puts(sf, "max\n");
			else
				seq_printf(sf, "%llu\n", val);
			break;
		case GPUCG_MEM_CURRENT:
			val = pool ? page_counter_read(&pool->mem) : 0;
			seq_printf(sf, "%llu\n", val * PAGE_SIZE);
			break;
		case GPUCG_MEM_PEAK:
			val = pool ? READ_ONCE(pool->mem.watermark) : 0;
			seq_printf(sf, "%llu\n", val * PAGE_SIZE);
			break;
		case GPUCG_MEM_EVENTS:
			val = pool ? atomic64_read(&pool->events) : 0;
			seq_printf(sf, "max=%llu\n", val);
			break;
		case GPUCG_MEM_EVENTS_LOCAL:
			val = pool ? atomic64_read(&pool->events_local) : 0;
			seq_printf(sf, "max=%llu\n", val);
			break;
		}
	}
	mutex_unlock(&gpucg_mutex);
	return 0;
}

/* "MAJ:MIN BYTES" or "MAJ:MIN max" */
static ssize_t gpu_memory_max_write(struct kernfs_open_file *of, char *buf,
				    size_t nbytes, loff_t off)
{
	struct gpucg *cg = css_gpucg(of_css(of));
	struct gpucg_device *dev;
	struct gpucg_pool *pool;
	unsigned long pages;
	char *words[2];
	dev_t devt;
	u64 bytes;
	int ret;

	if (gpucg_split(buf, words, 2) != 2)
		return -EINVAL;
	ret = gpucg_parse_devt(words[0], &devt);
	if (ret)
		return ret;
	ret = gpucg_parse_bytes(words[1], &bytes);
	if (ret)
		return ret;
	pages = min_t(u64, bytes >> PAGE_SHIFT, PAGE_COUNTER_MAX);

	mutex_lock(&gpucg_mutex);
	dev = gpucg_device_find(devt);
	pool = dev ? gpucg_pool_get(cg, dev) : ERR_PTR(-EINVAL);
	if (IS_ERR(pool)) {
		ret = PTR_ERR(pool);
	} else {
		pool->mem_max = bytes;
		/*
		 * Not page_counter_set_max(): a limit below the usage is
		 * taken and stops further charges.
		 */
		WRITE_ONCE(pool->mem.max, pages);
	}
	mutex_unlock(&gpucg_mutex);
	return ret ?: nbytes;
}

static struct cftype gpucg_files[] = {
	{
		.name = "weight",
		.flags = CFTYPE_NOT_ON_ROOT,
		.seq_show = gpu_weight_show,
		.write = gpu_weight_write,
	},
	{
		.name = "priority",
		.flags = CFTYPE_NOT_ON_ROOT,
		.seq_show = gpu_priority_show,
		.write = gpu_priority_write,
	},
	{
		.name = "priority.effective",
		.flags = CFTYPE_NOT_ON_ROOT,
		.seq_show = gpu_priority_effective_show,
	},
	{
		.name = "stat",
		.flags = CFTYPE_NOT_ON_ROOT,
		.seq_show = gpu_device_show,
		.private = GPUCG_STAT,
	},
	{
		.name = "memory.max",
		.flags = CFTYPE_NOT_ON_ROOT,
		.seq_show = gpu_device_show,
		.write = gpu_memory_max_write,
		.private = GPUCG_MEM_MAX,
	},
	{
		.name = "memory.current",
		.flags = CFTYPE_NOT_ON_ROOT,
		.seq_show = gpu_device_show,
		.private = GPUCG_MEM_CURRENT,
	},
	{
		.name = "memory.peak",
		.flags = CFTYPE_NOT_ON_ROOT,
		.seq_show = gpu_device_show,
		.private = GPUCG_MEM_PEAK,
	},
	{
		.name = "memory.events",
		.flags = CFTYPE_NOT_ON_ROOT,
		.seq_show = gpu_device_show,
		.file_offset = offsetof(struct gpucg, events_file),
		.private = GPUCG_MEM_EVENTS,
	},
	{
		.name = "memory.events.local",
		.flags = CFTYPE_NOT_ON_ROOT,
		.seq_show = gpu_device_show,
		.file_offset = offsetof(struct gpucg, events_local_file),
		.private = GPUCG_MEM_EVENTS_LOCAL,
	},
	{ }	/* terminate */
};

struct cgroup_subsys gpu_cgrp_subsys = {
	.css_alloc = gpucg_css_alloc,
	.css_free = gpucg_css_free,
	.dfl_cftypes = gpucg_files,
};
