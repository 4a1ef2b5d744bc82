/* SPDX-License-Identifier: GPL-2.0 */
/*
 * GPU cgroup controller: the interface between the controller and GPU
 * drivers. See kernel/cgroup/gpu.c for the distribution models.
 */
#ifndef _LINUX_CGROUP_GPU_H
#define _LINUX_CGROUP_GPU_H

#include <linux/err.h>
#include <linux/types.h>

struct gpucg_device;
struct gpucg_pool;

#ifdef CONFIG_CGROUP_GPU

struct gpucg_device *gpucg_register_device(dev_t devt);
void gpucg_unregister_device(struct gpucg_device *dev);
void gpucg_put_device(struct gpucg_device *dev);

int gpucg_try_charge_mem(struct gpucg_device *dev, u64 size,
			 struct gpucg_pool **poolp);
void gpucg_uncharge_mem(struct gpucg_pool *pool, u64 size);

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
