// SPDX-License-Identifier: GPL-2.0
/*
 * simgpu's simulated VRAM: device memory managed by TTM and registered with
 * the dmem cgroup controller, the way xe and amdgpu manage and register
 * their VRAM, so that dmem's limits, TTM's eviction to system memory and
 * dmem.min/dmem.low protection run on upstream's own code in the VM.
 *
 * With the module parameter vram (MiB per device), each device gets a TTM
 * device with a range manager for TTM_PL_VRAM of that size, registered as
 * the dmem region "drm/<device>/vram" with TTM's reclaim callback (writing
 * dmem.max below a cgroup's usage evicts that cgroup's buffers). A buffer
 * created with SIMGPU_GEM_VRAM is a TTM buffer object placed in VRAM; TTM
 * charges it to the creator's dmem cgroup when it allocates the placement,
 * and evicts to system memory when VRAM or the cgroup's limit has no room
 * (first buffers of cgroups outside their dmem.low protection, the
 * allocating cgroup's own included, then of those within it; never within
 * dmem.min). With SIMGPU_GEM_FALLBACK a buffer that does not fit after
 * eviction goes to system memory; without it, creation fails with -ENOMEM
 * (TTM's answer for no space).
 *
 * The simulated VRAM holds no bytes: no one can map a VRAM buffer, so a
 * move has nothing to copy and is a null move; an evicted buffer gets a
 * system-memory TTM object whose pages are allocated only if touched. What
 * this exercises is placement, accounting and eviction, not data movement.
 *
 * Buffers in system memory are not charged, as xe's and amdgpu's are not:
 * a device with a region of its own gets no core "system" region
 * (drm_dev_register() in the series), and its shmem buffers
 * (DRM_IOCTL_SIMGPU_GEM_CREATE without SIMGPU_GEM_VRAM) are not counted.
 *
 * Locking: TTM's own; a buffer's placement is read under its reservation
 * lock (simgpu_gem_placement()).
 *
 * Built where the kernel has TTM and dmem (7.3); elsewhere simgpu_vram.h's
 * stubs refuse the vram parameter.
 */

#include <linux/kconfig.h>

#if IS_ENABLED(CONFIG_DRM_TTM) && IS_ENABLED(CONFIG_CGROUP_DMEM)

#include <linux/cgroup_dmem.h>
#include <linux/dma-resv.h>
#include <linux/err.h>
#include <linux/slab.h>

#include <drm/drm_drv.h>
#include <drm/drm_file.h>
#include <drm/drm_gem.h>
#include <drm/drm_managed.h>
#include <drm/ttm/ttm_bo.h>
#include <drm/ttm/ttm_device.h>
#include <drm/ttm/ttm_placement.h>
#include <drm/ttm/ttm_range_manager.h>
#include <drm/ttm/ttm_resource.h>
#include <drm/ttm/ttm_tt.h>

#include "simgpu_drm.h"
#include "simgpu_vram.h"

struct simgpu_vram {
	struct ttm_device	bdev;
	struct drm_device	*drm;
	u64			size;
};

struct simgpu_bo {
	struct ttm_buffer_object tbo;
};

static const struct ttm_place simgpu_vram_place = {
	.mem_type = TTM_PL_VRAM,
};

/* eviction's destination, and a VRAM buffer's fallback */
static const struct ttm_place simgpu_system_place = {
	.mem_type = TTM_PL_SYSTEM,
	.flags = TTM_PL_FLAG_FALLBACK,
};

static struct ttm_placement simgpu_system_placement = {
	.num_placement = 1,
	.placement = &simgpu_system_place,
};

static struct ttm_tt *simgpu_tt_create(struct ttm_buffer_object *bo,
				       u32 page_flags)
{
	struct ttm_tt *tt;

	tt = kzalloc_obj(*tt);
	if (!tt)
		return NULL;
	if (ttm_tt_init(tt, bo, page_flags, ttm_cached, 0)) {
		kfree(tt);
		return NULL;
	}
	return tt;
}

static void simgpu_tt_destroy(struct ttm_device *bdev, struct ttm_tt *tt)
{
	ttm_tt_fini(tt);
	kfree(tt);
}

static void simgpu_evict_flags(struct ttm_buffer_object *bo,
			       struct ttm_placement *placement)
{
	*placement = simgpu_system_placement;
}

/* The simulated VRAM holds no bytes: every move is a null move. */
static int simgpu_move(struct ttm_buffer_object *bo, bool evict,
		       struct ttm_operation_ctx *ctx,
		       struct ttm_resource *new_mem, struct ttm_place *hop)
{
	ttm_bo_move_null(bo, new_mem);
	return 0;
}

static const struct ttm_device_funcs simgpu_ttm_funcs = {
	.ttm_tt_create = simgpu_tt_create,
	.ttm_tt_destroy = simgpu_tt_destroy,
	.eviction_valuable = ttm_bo_eviction_valuable,
	.evict_flags = simgpu_evict_flags,
	.move = simgpu_move,
};

static const struct dmem_cgroup_ops simgpu_vram_dmem_ops = {
	.reclaim = ttm_resource_manager_dmem_reclaim,
};

/* drmm action: after the region is gone (registered after this action) */
static void simgpu_vram_fini(struct drm_device *drm, void *arg)
{
	struct simgpu_vram *vram = arg;
	struct ttm_resource_manager *man;

	man = ttm_manager_type(&vram->bdev, TTM_PL_VRAM);
	ttm_resource_manager_set_dmem_region(man, NULL);
	ttm_range_man_fini(&vram->bdev, TTM_PL_VRAM);
	ttm_device_fini(&vram->bdev);
}

/**
 * simgpu_vram_init - give a device a simulated VRAM of @size bytes
 * @drm: the device, not registered yet
 * @size: bytes, 0 for none
 * @vram: out: the VRAM, NULL for none
 *
 * Context: process context, before drm_dev_register() (a region registered
 * after it would miss the buffers the core charged meanwhile). Torn down
 * with @drm (drmm actions).
 *
 * Return: 0 or a negative errno.
 */
int simgpu_vram_init(struct drm_device *drm, u64 size,
		     struct simgpu_vram **vram)
{
	struct dmem_cgroup_region *region;
	struct simgpu_vram *v;
	int ret;

	*vram = NULL;
	if (!size)
		return 0;
	v = drmm_kzalloc(drm, sizeof(*v), GFP_KERNEL);
	if (!v)
		return -ENOMEM;
	v->drm = drm;
	v->size = size;
	ret = ttm_device_init(&v->bdev, &simgpu_ttm_funcs, drm->dev,
			      drm->anon_inode->i_mapping,
			      drm->vma_offset_manager, 0);
	if (ret)
		return ret;
	ret = ttm_range_man_init(&v->bdev, TTM_PL_VRAM, false,
				 size >> PAGE_SHIFT);
	if (ret) {
		ttm_device_fini(&v->bdev);
		return ret;
	}
	/* as xe: the fini action first, so that the region goes before it */
	ret = drmm_add_action_or_reset(drm, simgpu_vram_fini, v);
	if (ret)
		return ret;
	region = drmm_cgroup_register_region(drm, "vram",
					     &(struct dmem_cgroup_init){
						.size = size,
						.ops = &simgpu_vram_dmem_ops,
						.reclaim_priv =
						  ttm_manager_type(&v->bdev,
								   TTM_PL_VRAM),
					     });
	if (IS_ERR(region))
		return PTR_ERR(region);
	ttm_resource_manager_set_dmem_region(ttm_manager_type(&v->bdev,
							      TTM_PL_VRAM),
					     region);
	*vram = v;
	return 0;
}

static void simgpu_bo_gem_free(struct drm_gem_object *obj)
{
	ttm_bo_fini(container_of(obj, struct ttm_buffer_object, base));
}

static const struct drm_gem_object_funcs simgpu_bo_gem_funcs = {
	.free = simgpu_bo_gem_free,
};

/* TTM's destructor, also on a failed ttm_bo_init_validate() */
static void simgpu_bo_destroy(struct ttm_buffer_object *tbo)
{
	struct simgpu_bo *bo = container_of(tbo, struct simgpu_bo, tbo);

	drm_gem_object_release(&tbo->base);
	kfree(bo);
}

/**
 * simgpu_vram_gem_create - a buffer in the simulated VRAM, and its handle
 * @vram: the device's VRAM
 * @file: the client; its handle charges nothing more (TTM charged the
 *	placement to the creating task's dmem cgroup)
 * @size: bytes, a multiple of the page size
 * @fallback: place the buffer in system memory when VRAM has no room
 * @handle: out: the GEM handle
 * @out_size: out: the buffer's size
 *
 * Context: process context; may sleep (eviction).
 *
 * Return: 0, -ENOMEM when VRAM (or the cgroup's dmem.max) has no room after
 * eviction, or the buffer is larger than VRAM, and @fallback is not set
 * (with it, such a buffer is placed in system memory), or another negative
 * errno.
 */
int simgpu_vram_gem_create(struct simgpu_vram *vram, struct drm_file *file,
			   u64 size, bool fallback, u32 *handle, u64 *out_size)
{
	const struct ttm_place places[] = { simgpu_vram_place,
					    simgpu_system_place };
	struct ttm_placement placement = {
		.num_placement = fallback ? 2 : 1,
		.placement = places,
	};
	struct simgpu_bo *bo;
	int ret;

	/* larger than VRAM: TTM would evict every buffer it can, then fail */
	if (size > vram->size) {
		if (!fallback)
			return -ENOMEM;
		placement.num_placement = 1;
		placement.placement = &simgpu_system_place;
	}
	bo = kzalloc_obj(*bo);
	if (!bo)
		return -ENOMEM;
	bo->tbo.base.funcs = &simgpu_bo_gem_funcs;
	drm_gem_private_object_init(vram->drm, &bo->tbo.base, size);
	/* on failure TTM calls simgpu_bo_destroy(), which frees @bo */
	/* a kernel buffer to TTM: no one maps it, so it needs no mmap offset */
	ret = ttm_bo_init_validate(&vram->bdev, &bo->tbo, ttm_bo_type_kernel,
				   &placement, 0, true, NULL, NULL,
				   simgpu_bo_destroy);
	if (ret)
		return ret;
	ret = drm_gem_handle_create(file, &bo->tbo.base, handle);
	if (!ret)
		*out_size = bo->tbo.base.size;
	/* the handle holds the reference now, or the buffer goes */
	drm_gem_object_put(&bo->tbo.base);
	return ret;
}

/**
 * simgpu_gem_placement - where a buffer is now
 * @obj: a buffer of a simgpu device
 *
 * Context: process context; takes the buffer's reservation lock.
 *
 * Return: SIMGPU_PLACEMENT_VRAM or SIMGPU_PLACEMENT_SYSTEM.
 */
u32 simgpu_gem_placement(struct drm_gem_object *obj)
{
	struct ttm_buffer_object *tbo;
	u32 placement = SIMGPU_PLACEMENT_SYSTEM;

	if (obj->funcs != &simgpu_bo_gem_funcs)
		return placement;	/* a shmem buffer */
	tbo = container_of(obj, struct ttm_buffer_object, base);
	dma_resv_lock(obj->resv, NULL);
	if (tbo->resource && tbo->resource->mem_type == TTM_PL_VRAM)
		placement = SIMGPU_PLACEMENT_VRAM;
	dma_resv_unlock(obj->resv);
	return placement;
}

#endif /* CONFIG_DRM_TTM && CONFIG_CGROUP_DMEM */
