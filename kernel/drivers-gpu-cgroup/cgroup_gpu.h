/* SPDX-License-Identifier: GPL-2.0 */
/*
 * GPU cgroup controller: the interface between the controller and GPU
 * drivers. See kernel/cgroup/gpu.c for the distribution model.
 */
#ifndef _LINUX_CGROUP_GPU_H
#define _LINUX_CGROUP_GPU_H

#include <linux/err.h>
#include <linux/types.h>

struct gpucg_device;

#ifdef CONFIG_CGROUP_GPU

struct gpucg_device *gpucg_register_device(dev_t devt);
void gpucg_unregister_device(struct gpucg_device *gdev);

#else /* CONFIG_CGROUP_GPU */

static inline struct gpucg_device *gpucg_register_device(dev_t devt)
{
	return NULL;
}

static inline void gpucg_unregister_device(struct gpucg_device *gdev)
{
}

#endif /* CONFIG_CGROUP_GPU */
#endif /* _LINUX_CGROUP_GPU_H */
