/* SPDX-License-Identifier: GPL-2.0 */
/*
 * simgpu's simulated VRAM: a TTM memory region registered with the dmem
 * cgroup controller, as xe and amdgpu register their VRAM (simgpu_vram.c).
 */
#ifndef _SIMGPU_VRAM_H
#define _SIMGPU_VRAM_H

#include <linux/types.h>

struct drm_device;
struct drm_file;
struct drm_gem_object;
struct simgpu_vram;

#if IS_ENABLED(CONFIG_DRM_TTM) && IS_ENABLED(CONFIG_CGROUP_DMEM)
int simgpu_vram_init(struct drm_device *drm, u64 size,
		     struct simgpu_vram **vram);
int simgpu_vram_gem_create(struct simgpu_vram *vram, struct drm_file *file,
			   u64 size, bool fallback, u32 *handle, u64 *out_size);
u32 simgpu_gem_placement(struct drm_gem_object *obj);
#else
/* a kernel without dmem (6.12): no VRAM, every buffer in system memory */
static inline int simgpu_vram_init(struct drm_device *drm, u64 size,
				   struct simgpu_vram **vram)
{
	*vram = NULL;
	return size ? -EOPNOTSUPP : 0;
}

static inline int simgpu_vram_gem_create(struct simgpu_vram *vram,
					 struct drm_file *file, u64 size,
					 bool fallback, u32 *handle,
					 u64 *out_size)
{
	return -EOPNOTSUPP;
}

static inline u32 simgpu_gem_placement(struct drm_gem_object *obj)
{
	return 1;	/* SIMGPU_PLACEMENT_SYSTEM */
}
#endif

#endif /* _SIMGPU_VRAM_H */
