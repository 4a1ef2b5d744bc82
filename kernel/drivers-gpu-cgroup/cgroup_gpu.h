/* SPDX-License-Identifier: GPL-2.0 */
/*
 * GPU cgroup controller: the interface between the controller and GPU
 * drivers. See kernel/cgroup/gpu.c for the distribution models.
 */
#ifndef _LINUX_CGROUP_GPU_H
#define _LINUX_CGROUP_GPU_H

#include <linux/err.h>
#include <linux/rbtree.h>
#include <linux/types.h>

struct gpucg;
struct gpucg_client;
struct gpucg_device;
struct gpucg_engine;
struct gpucg_entity;
struct gpucg_pool;
struct task_struct;

#define GPUCG_MAX_ENGINES	8

/**
 * struct gpucg_work - a unit of GPU work, embedded in the driver's job
 *
 * Filled in by gpucg_work_queue(); the driver only reads @prio and
 * @queued_ns if it cares.
 */
struct gpucg_work {
	struct rb_node		node;
	struct gpucg_entity	*ent;
	struct gpucg		*cg;
	u64			seq;
	u64			queued_ns;
	int			ctx_prio;
	int			prio;	/* effective priority of its cgroup */
};

#ifdef CONFIG_CGROUP_GPU

struct gpucg_device *gpucg_register_device(dev_t devt);
void gpucg_unregister_device(struct gpucg_device *dev);
void gpucg_put_device(struct gpucg_device *dev);

int gpucg_try_charge_mem(struct gpucg_device *dev, u64 size,
			 struct gpucg_pool **poolp);
void gpucg_uncharge_mem(struct gpucg_pool *pool, u64 size);

struct gpucg_engine *gpucg_engine_create(struct gpucg_device *dev);

struct gpucg_client *gpucg_client_create(void);
void gpucg_client_destroy(struct gpucg_client *client);
void gpucg_client_set_owner(struct gpucg_client *client,
			    struct task_struct *task);

int gpucg_work_queue(struct gpucg_engine *engine, struct gpucg_client *client,
		     struct gpucg_work *work, int ctx_prio);
struct gpucg_work *gpucg_work_pick(struct gpucg_engine *engine);
void gpucg_work_retire(struct gpucg_engine *engine, struct gpucg_work *work,
		       u64 ns);
bool gpucg_work_preempts(struct gpucg_engine *engine,
			 const struct gpucg_work *running);

#else /* CONFIG_CGROUP_GPU */

static inline struct gpucg_device *gpucg_register_device(dev_t devt)
{
	return NULL;
}

static inline void gpucg_unregister_device(struct gpucg_device *dev)
{
}

static inline void gpucg_put_device(struct gpucg_device *dev)
{
}

static inline int gpucg_try_charge_mem(struct gpucg_device *dev, u64 size,
				       struct gpucg_pool **poolp)
{
	*poolp = NULL;
	return 0;
}

static inline void gpucg_uncharge_mem(struct gpucg_pool *pool, u64 size)
{
}

#endif /* CONFIG_CGROUP_GPU */
#endif /* _LINUX_CGROUP_GPU_H */
