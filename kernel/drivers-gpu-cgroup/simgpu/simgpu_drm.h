/* SPDX-License-Identifier: GPL-2.0 WITH Linux-syscall-note */
/*
 * simgpu: the userspace interface of the simulated GPU used to test the gpu
 * cgroup controller. pycgpu/simgpu.py declares the same structs.
 */
#ifndef _UAPI_SIMGPU_DRM_H
#define _UAPI_SIMGPU_DRM_H

#include <drm/drm.h>

#define DRM_SIMGPU_GEM_CREATE	0x00
#define DRM_SIMGPU_SUBMIT	0x01
#define DRM_SIMGPU_WAIT		0x02
#define DRM_SIMGPU_GEM_INFO	0x03

/* place the buffer in the device's simulated VRAM (module parameter vram) */
#define SIMGPU_GEM_VRAM		(1 << 0)
/* with SIMGPU_GEM_VRAM: in system memory when VRAM has no room */
#define SIMGPU_GEM_FALLBACK	(1 << 1)

/**
 * struct drm_simgpu_gem_create - create a buffer
 * @size: in: bytes, rounded up to whole pages; out: the size allocated
 * @handle: out: the GEM handle (free it with DRM_IOCTL_GEM_CLOSE)
 * @flags: 0 for a buffer in system memory, or SIMGPU_GEM_VRAM (with
 *	SIMGPU_GEM_FALLBACK or not); SIMGPU_GEM_VRAM on a device without VRAM
 *	fails with -ENODEV, and without SIMGPU_GEM_FALLBACK a buffer that does
 *	not fit in VRAM (or in the cgroup's dmem.max) after eviction fails
 *	with -ENOMEM
 */
struct drm_simgpu_gem_create {
	__u64 size;
	__u32 handle;
	__u32 flags;
};

#define SIMGPU_PLACEMENT_SYSTEM	1
#define SIMGPU_PLACEMENT_VRAM	2

/**
 * struct drm_simgpu_gem_info - where a buffer is
 * @handle: in: a GEM handle of this file
 * @placement: out: SIMGPU_PLACEMENT_VRAM, or SIMGPU_PLACEMENT_SYSTEM (a
 *	system-memory buffer, or a VRAM buffer evicted or placed as fallback)
 */
struct drm_simgpu_gem_info {
	__u32 handle;
	__u32 placement;
};

/**
 * struct drm_simgpu_submit - queue a job that keeps an engine busy
 * @duration_ns: how long the job runs on the engine, 1 ns to 10 s
 * @engine: the engine's index
 * @priority: context priority in [-1023, 1023]: below 0 runs on the file's
 *	low-priority queue, above 0 (needs CAP_SYS_NICE) on its high one
 * @seqno: out: the job's number on this file, for DRM_IOCTL_SIMGPU_WAIT
 * @in_syncobj: a syncobj whose fence the job waits for before it runs, or 0
 * @out_syncobj: a syncobj that gets the job's completion fence, or 0
 *
 * A file may have 2048 jobs queued or running; more fail with -EBUSY.
 */
struct drm_simgpu_submit {
	__u64 duration_ns;
	__u32 engine;
	__s32 priority;
	__u64 seqno;
	__u32 in_syncobj;
	__u32 out_syncobj;
};

/**
 * struct drm_simgpu_wait - wait for jobs of this file
 * @seqno: every job up to this one has finished when the call returns 0
 * @timeout_ns: relative; 0 polls (-ETIME if not done yet)
 * @queued_ns: out: CLOCK_MONOTONIC time at which the job that finished last
 *	on this file was queued
 * @start_ns: out: ... at which it started on the simulated engine
 * @end_ns: out: ... at which it finished on the simulated engine
 */
struct drm_simgpu_wait {
	__u64 seqno;
	__s64 timeout_ns;
	__u64 queued_ns;
	__u64 start_ns;
	__u64 end_ns;
};

#define DRM_IOCTL_SIMGPU_GEM_CREATE \
	DRM_IOWR(DRM_COMMAND_BASE + DRM_SIMGPU_GEM_CREATE, \
		 struct drm_simgpu_gem_create)
#define DRM_IOCTL_SIMGPU_SUBMIT \
	DRM_IOWR(DRM_COMMAND_BASE + DRM_SIMGPU_SUBMIT, struct drm_simgpu_submit)
#define DRM_IOCTL_SIMGPU_WAIT \
	DRM_IOWR(DRM_COMMAND_BASE + DRM_SIMGPU_WAIT, struct drm_simgpu_wait)
#define DRM_IOCTL_SIMGPU_GEM_INFO \
	DRM_IOWR(DRM_COMMAND_BASE + DRM_SIMGPU_GEM_INFO, \
		 struct drm_simgpu_gem_info)

#endif /* _UAPI_SIMGPU_DRM_H */
