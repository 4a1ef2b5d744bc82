/* SPDX-License-Identifier: GPL-2.0 */
/*
 * GPU cgroup controller: the interface between the controller and GPU
 * drivers. See kernel/cgroup/gpu.c for the interface files,
 * kernel/cgroup/gpu_sched.c for the scheduling model, and, on kernels
 * without the dmem controller, kernel/cgroup/gpu_mem.c for buffer memory.
 *
 * The unit of GPU work a driver hands the controller is a *queue*: a
 * drm_sched entity, an i915 context, a firmware queue. A queue belongs to a
 * client (one per DRM file, owned by the DRM core) and runs on an engine
 * (one per hardware scheduler). The controller keeps the policy state and
 * answers "which ready queue runs next" (gpucg_queue_pick()), "does A go
 * before B" (gpucg_queue_before()), "what share has this queue"
 * (gpucg_queue_share()) and "does gpu.max hold it back now"
 * (gpucg_queue_throttled()); the driver reports GPU time with
 * gpucg_queue_start() and gpucg_charge(), or gpucg_queue_charge() alone.
 * A driver that keeps strict priorities in its own queue composes the
 * owner's gpucg_client_priority() into them.
 *
 * Registration, creation and teardown of devices, engines and clients, and
 * gpucg_queue_init(), gpucg_client_set_owner() and gpucg_try_charge_mem()
 * may sleep; the calls on queues, tickets and charges neither sleep nor
 * allocate and may be called from any context, but for the picks of an
 * engine that waits are linked to (see gpucg_boost_link()). Each call's
 * kernel-doc says its context.
 *
 * A queue whose next work waits on a job that has not left its queue, of a
 * client of another cgroup or of its own cgroup on another engine, lends
 * the queue that holds that job its priority (gpucg_boost_link()) until
 * the job goes to the hardware: that queue, and no other of its cgroup,
 * runs in the waiter's band while it is ready. When the engine was holding
 * work for that loan, the call says so, and the driver has the engine pick
 * again.
 */
#ifndef _LINUX_CGROUP_GPU_H
#define _LINUX_CGROUP_GPU_H

#include <linux/err.h>
#include <linux/list.h>
#include <linux/minmax.h>
#include <linux/rbtree.h>
#include <linux/types.h>

struct cgroup;
struct gpucg;
struct gpucg_client;
struct gpucg_device;
struct gpucg_engine;
struct gpucg_entity;
struct gpucg_pool;

/**
 * struct gpucg_queue - a queue of GPU work, embedded in the driver's queue
 *
 * Initialized by gpucg_queue_init() or gpucg_queue_init_lent(); the driver
 * reads none of it. The links of waits into it and out of it
 * (gpucg_boost_link()) are under the core's boost lock, and its mark for
 * a look at the links into it under its engine's lock.
 */
struct gpucg_queue {
	struct rb_node		node;
	struct gpucg_engine	*engine;
	struct gpucg_client	*client;
	struct gpucg_entity	*ent;
	struct gpucg		*cg;
	u64			vtime;
	u64			ready_ns;
	struct rb_root_cached	boosts_in;
	struct rb_root_cached	boosts_local;
	struct rb_root_cached	boosts_seq;
	struct list_head	boosts_out;
	struct list_head	lent_node;
	struct list_head	dirty_node;
	int			ctx_prio;
	int			boost;
	int			boost_hops;
	int			boost_local;
	int			lift;
	bool			active;
	bool			lent_only;
	bool			ready;
	bool			linked;
};

/**
 * struct gpucg_ticket - GPU time in flight, kept by the driver per job
 *
 * Filled in by gpucg_queue_start() (or gpucg_kernel_start()) and consumed
 * by gpucg_charge(); one of a queue pins the cgroup the time goes to, so
 * it may outlive its queue.
 */
struct gpucg_ticket {
	struct gpucg_entity	*ent;
	struct gpucg		*cg;
	u64			est_ns;
};

/**
 * struct gpucg_boost - a queue's wait on work of another client, for
 *			priority inheritance
 *
 * Embedded, zeroed, in the driver's queue (or wherever it keeps the wait
 * of the queue's next work), linked by gpucg_boost_link() and unlinked by
 * gpucg_boost_unlink(); the core also unlinks it once @done says the work
 * it waits for has left its queue, or when either queue goes
 * (gpucg_queue_fini()). The driver reads none of it.
 */
struct gpucg_boost {
	struct list_head	in_node;
	struct rb_node		to_node;
	struct rb_node		seq_node;
	struct list_head	out_node;
	struct list_head	qout_node;
	struct gpucg_engine	*engine;
	struct gpucg_entity	*from;
	struct gpucg_queue	*waiter;
	struct gpucg_queue	*to;
	bool			(*done)(struct gpucg_boost *b);
	u32			seq;
	int			prio;
	int			hops;
	bool			local;
};

/**
 * enum gpucg_take - what a driver's pick callback says of a queue
 * @GPUCG_TAKE: the queue runs next
 * @GPUCG_SKIP: the queue cannot run (nothing ready): it is deactivated
 * @GPUCG_HOLD: the queue is ready but must wait (no room on the engine): it
 *	keeps its turn and gpucg_queue_pick() returns NULL
 */
enum gpucg_take {
	GPUCG_TAKE,
	GPUCG_SKIP,
	GPUCG_HOLD,
};

/**
 * struct gpucg_group_ops - the driver's run queues per cgroup
 * @alloc: allocates the driver's run queue of one cgroup on the engine,
 *	   which embeds a &struct gpucg_queue; returns that, or NULL. The
 *	   core sets the queue up. Process context, may sleep.
 * @free: frees it, once no work is queued in it. Process context.
 *
 * For a scheduler that orders its queues inside a cgroup by a policy of its
 * own (drm_sched's fair policy): it keeps a run queue per cgroup and
 * engine, which the core creates and frees with the cgroup's state on the
 * engine, and the core orders those run queues by the cgroups' weights and
 * priorities (gpucg_engine_create_grouped()).
 */
struct gpucg_group_ops {
	struct gpucg_queue *(*alloc)(void *priv);
	void (*free)(struct gpucg_queue *q, void *priv);
};

/**
 * gpucg_queue_is_lent_only() - whether a queue runs only on loan
 * @q: the queue
 *
 * Return: true for a queue set up by gpucg_queue_init_lent().
 */
static inline bool gpucg_queue_is_lent_only(const struct gpucg_queue *q)
{
	return q->lent_only;
}

struct lock_class_key;

#ifdef CONFIG_CGROUP_GPU

struct gpucg_device *gpucg_register_device(dev_t devt);
void gpucg_publish_device(struct gpucg_device *dev);
void gpucg_unregister_device(struct gpucg_device *dev);
void gpucg_put_device(struct gpucg_device *dev);

struct gpucg_client *gpucg_client_create(struct gpucg_device *dev);
struct gpucg_client *gpucg_client_create_in(struct gpucg_device *dev,
					    struct cgroup *cgrp);
int gpucg_client_priority(struct gpucg_client *client);
struct gpucg_client *gpucg_client_tryget(struct gpucg_client *client);
void gpucg_client_put(struct gpucg_client *client);
void gpucg_client_set_owner(struct gpucg_client *client);
bool gpucg_client_same_cgroup(struct gpucg_client *a, struct gpucg_client *b);

struct gpucg_engine *__gpucg_engine_create(struct gpucg_device *dev,
					   bool schedules,
					   const struct gpucg_group_ops *ops,
					   void *priv,
					   struct lock_class_key *key);
void gpucg_engine_destroy(struct gpucg_engine *engine);
void gpucg_engine_enforce_max(struct gpucg_engine *engine);
struct gpucg_queue *gpucg_client_group(struct gpucg_engine *engine,
				       struct gpucg_client *client);
void gpucg_client_group_prepare(struct gpucg_engine *engine,
				struct gpucg_client *client);
bool gpucg_group_tryget(struct gpucg_queue *q);
void gpucg_group_get(struct gpucg_queue *q);
void gpucg_group_put(struct gpucg_queue *q);

int gpucg_queue_init(struct gpucg_queue *q, struct gpucg_engine *engine,
		     struct gpucg_client *client, int ctx_prio);
int gpucg_queue_init_lent(struct gpucg_queue *q, struct gpucg_engine *engine,
			  struct gpucg_client *client);
bool gpucg_queue_lent(const struct gpucg_queue *q);
void gpucg_queue_fini(struct gpucg_queue *q);
void gpucg_queue_move(struct gpucg_queue *q, struct gpucg_engine *engine);
void gpucg_queue_sync(struct gpucg_queue *q,
		      bool (*ready)(struct gpucg_queue *q));
struct gpucg_queue *
gpucg_queue_pick(struct gpucg_engine *engine,
		 enum gpucg_take (*take)(struct gpucg_queue *q, void *arg),
		 void *arg, u64 *retry_ns);
void gpucg_queue_start(struct gpucg_queue *q, struct gpucg_ticket *t);
void gpucg_kernel_start(struct gpucg_engine *engine, struct gpucg_ticket *t);
void gpucg_charge(struct gpucg_engine *engine, struct gpucg_ticket *t,
		  u64 ns);
void gpucg_queue_charge(struct gpucg_queue *q, u64 ns);
bool gpucg_queue_before(const struct gpucg_queue *a,
			const struct gpucg_queue *b);
bool gpucg_queue_throttled(struct gpucg_queue *q, u64 *retry_ns, bool *capped);
u32 gpucg_queue_share(struct gpucg_queue *q);
bool gpucg_boost_link(struct gpucg_boost *b, struct gpucg_queue *waiter,
		      struct gpucg_queue *holder, u32 seq,
		      bool (*done)(struct gpucg_boost *b));
void gpucg_boost_unlink(struct gpucg_boost *b);

#if IS_ENABLED(CONFIG_KUNIT)
struct gpucg *gpucg_kunit_cgroup_new(struct gpucg *parent, u32 weight,
				     int prio);
void gpucg_kunit_cgroup_free(struct gpucg *cg);
void gpucg_kunit_cgroup_set(struct gpucg *cg, u32 weight, int prio);
void gpucg_kunit_cgroup_set_max(struct gpucg *cg, u32 max_us, u32 period_us);
struct gpucg_client *gpucg_kunit_client(struct gpucg_device *dev,
					struct gpucg *cg);
void gpucg_kunit_client_move(struct gpucg_client *client, struct gpucg *cg);
#endif

#else /* CONFIG_CGROUP_GPU */

static inline struct gpucg_device *gpucg_register_device(dev_t devt)
{
	return NULL;
}

static inline void gpucg_publish_device(struct gpucg_device *dev)
{
}

static inline void gpucg_unregister_device(struct gpucg_device *dev)
{
}

static inline void gpucg_put_device(struct gpucg_device *dev)
{
}

static inline struct gpucg_client *gpucg_client_create(struct gpucg_device *dev)
{
	return NULL;
}

static inline struct gpucg_client *
gpucg_client_create_in(struct gpucg_device *dev, struct cgroup *cgrp)
{
	return NULL;
}

static inline int gpucg_client_priority(struct gpucg_client *client)
{
	return 0;
}

static inline struct gpucg_client *
gpucg_client_tryget(struct gpucg_client *client)
{
	return NULL;
}

static inline void gpucg_client_put(struct gpucg_client *client)
{
}

static inline void gpucg_client_set_owner(struct gpucg_client *client)
{
}

static inline bool gpucg_client_same_cgroup(struct gpucg_client *a,
					    struct gpucg_client *b)
{
	return false;
}

static inline struct gpucg_engine *
__gpucg_engine_create(struct gpucg_device *dev, bool schedules,
		      const struct gpucg_group_ops *ops, void *priv,
		      struct lock_class_key *key)
{
	return NULL;
}

static inline struct gpucg_queue *
gpucg_client_group(struct gpucg_engine *engine, struct gpucg_client *client)
{
	return NULL;
}

static inline void gpucg_client_group_prepare(struct gpucg_engine *engine,
					      struct gpucg_client *client)
{
}

static inline bool gpucg_group_tryget(struct gpucg_queue *q)
{
	return false;
}

static inline void gpucg_group_get(struct gpucg_queue *q)
{
}

static inline void gpucg_group_put(struct gpucg_queue *q)
{
}

static inline void gpucg_engine_destroy(struct gpucg_engine *engine)
{
}

static inline void gpucg_engine_enforce_max(struct gpucg_engine *engine)
{
}

static inline int gpucg_queue_init(struct gpucg_queue *q,
				   struct gpucg_engine *engine,
				   struct gpucg_client *client, int ctx_prio)
{
	return 0;
}

static inline int gpucg_queue_init_lent(struct gpucg_queue *q,
					struct gpucg_engine *engine,
					struct gpucg_client *client)
{
	return 0;
}

static inline bool gpucg_queue_lent(const struct gpucg_queue *q)
{
	return false;
}

static inline void gpucg_queue_fini(struct gpucg_queue *q)
{
}

static inline void gpucg_queue_move(struct gpucg_queue *q,
				    struct gpucg_engine *engine)
{
}

static inline void gpucg_queue_sync(struct gpucg_queue *q,
				    bool (*ready)(struct gpucg_queue *q))
{
}

static inline struct gpucg_queue *
gpucg_queue_pick(struct gpucg_engine *engine,
		 enum gpucg_take (*take)(struct gpucg_queue *q, void *arg),
		 void *arg, u64 *retry_ns)
{
	*retry_ns = 0;
	return NULL;
}

static inline void gpucg_queue_start(struct gpucg_queue *q,
				     struct gpucg_ticket *t)
{
}

static inline void gpucg_kernel_start(struct gpucg_engine *engine,
				      struct gpucg_ticket *t)
{
}

static inline void gpucg_charge(struct gpucg_engine *engine,
				struct gpucg_ticket *t, u64 ns)
{
}

static inline void gpucg_queue_charge(struct gpucg_queue *q, u64 ns)
{
}

static inline bool gpucg_queue_before(const struct gpucg_queue *a,
				      const struct gpucg_queue *b)
{
	return false;
}

static inline bool gpucg_queue_throttled(struct gpucg_queue *q,
					 u64 *retry_ns, bool *capped)
{
	*retry_ns = 0;
	if (capped)
		*capped = false;
	return false;
}

static inline u32 gpucg_queue_share(struct gpucg_queue *q)
{
	return 0;
}

static inline bool gpucg_boost_link(struct gpucg_boost *b,
				    struct gpucg_queue *waiter,
				    struct gpucg_queue *holder, u32 seq,
				    bool (*done)(struct gpucg_boost *b))
{
	return false;
}

static inline void gpucg_boost_unlink(struct gpucg_boost *b)
{
}

#endif /* CONFIG_CGROUP_GPU */

/**
 * gpucg_engine_create() - add an engine of queues to a device
 * @dev: the device; NULL gives a NULL engine
 * @schedules: whether its scheduler orders its queues by the controller
 *
 * See __gpucg_engine_create(); each call site has its own lock class.
 */
#define gpucg_engine_create(dev, schedules)				\
({									\
	static struct lock_class_key __gpucg_key;			\
									\
	__gpucg_engine_create(dev, schedules, NULL, NULL, &__gpucg_key); \
})

/**
 * gpucg_engine_create_grouped() - add an engine of run queues per cgroup
 * @dev: the device; NULL gives a NULL engine
 * @ops: the driver's run queues
 * @priv: passed to @ops
 *
 * See __gpucg_engine_create(); each call site has its own lock class.
 */
#define gpucg_engine_create_grouped(dev, ops, priv)			\
({									\
	static struct lock_class_key __gpucg_key;			\
									\
	__gpucg_engine_create(dev, true, ops, priv, &__gpucg_key);	\
})

/**
 * gpucg_share_quantum() - a firmware queue's time quantum for its share
 * @share: the queue's share of its engine, in 1/65536
 *	   (gpucg_queue_share()); 0 if it has none now
 * @sharing: how many queues have a share of the engine
 * @base: the quantum without the controller, in any unit; 0 turns time
 *	  slicing off
 *
 * For firmware that runs the queues of a priority band round robin, each
 * for up to its quantum: @base scaled by the queue's share against an
 * equal split (rounded), so that equal weights keep @base and a queue with
 * three times the share gets three times the quantum; clamped to [@base / 4,
 * 4 * @base], which bounds the ratio the firmware can realize to 16:1 and
 * the latency a heavy queue adds to 4 quanta.
 *
 * Context: any context.
 * Return: the quantum, in the unit of @base.
 */
static inline u32 gpucg_share_quantum(u32 share, unsigned int sharing, u32 base)
{
	u64 quantum;

	if (!base || !share || !sharing)
		return base;
	quantum = ((u64)base * share * sharing + (1 << 15)) >> 16;
	return clamp_t(u64, quantum, max(base / 4, 1U), 4ULL * base);
}

#ifdef CONFIG_CGROUP_GPU_MEMORY
int gpucg_try_charge_mem(struct gpucg_device *dev, u64 size,
			 struct gpucg_pool **poolp);
void gpucg_uncharge_mem(struct gpucg_pool *pool, u64 size);
#else
static inline int gpucg_try_charge_mem(struct gpucg_device *dev, u64 size,
				       struct gpucg_pool **poolp)
{
	*poolp = NULL;
	return 0;
}

static inline void gpucg_uncharge_mem(struct gpucg_pool *pool, u64 size)
{
}
#endif /* CONFIG_CGROUP_GPU_MEMORY */

#endif /* _LINUX_CGROUP_GPU_H */
