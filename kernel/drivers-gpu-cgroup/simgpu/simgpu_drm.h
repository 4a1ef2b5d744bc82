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
#define DRM_SIMGPU_PICK_STATS	0x03

/**
 * struct drm_simgpu_gem_create - create a buffer
 * @size: in: bytes, rounded up to whole pages; out: the size allocated
 * @handle: out: the GEM handle (free it with DRM_IOCTL_GEM_CLOSE)
 * @pad: must be zero
 */
struct drm_simgpu_gem_create {
	__u64 size;
	__u32 handle;
	__u32 pad;
};

/**
 * struct drm_simgpu_submit - queue a job that keeps an engine busy
 * @duration_ns: how long the job runs on the engine, 1 ns to 10 s
 * @engine: the engine's index
 * @priority: context priority in [-1023, 1023]; above 0 needs CAP_SYS_NICE
 * @seqno: out: the job's number on this file, for DRM_IOCTL_SIMGPU_WAIT
 */
struct drm_simgpu_submit {
	__u64 duration_ns;
	__u32 engine;
	__s32 priority;
	__u64 seqno;
};

/**
 * struct drm_simgpu_wait - wait for jobs of this file
 * @seqno: every job up to this one has finished when the call returns 0
 * @timeout_ns: relative; 0 polls (-ETIME if not done yet)
 * @queued_ns: out: CLOCK_MONOTONIC time at which the job that finished last
 *	on this file was queued
 * @start_ns: out: ... at which it started
 * @end_ns: out: ... at which it finished
 */
struct drm_simgpu_wait {
	__u64 seqno;
	__s64 timeout_ns;
	__u64 queued_ns;
	__u64 start_ns;
	__u64 end_ns;
};

/**
 * struct drm_simgpu_pick_stats - the cost of the scheduler's picks
 * @samples: user pointer to an array of @count __u32: the latest picks, ns
 * @count: in: room in @samples; out: samples written (at most 8192)
 * @engine: the engine's index
 * @picks: out: picks made on the engine since it was created
 */
struct drm_simgpu_pick_stats {
	__u64 samples;
	__u32 count;
	__u32 engine;
	__u64 picks;
};

#define DRM_IOCTL_SIMGPU_GEM_CREATE \
	DRM_IOWR(DRM_COMMAND_BASE + DRM_SIMGPU_GEM_CREATE, \
		 struct drm_simgpu_gem_create)
#define DRM_IOCTL_SIMGPU_SUBMIT \
	DRM_IOWR(DRM_COMMAND_BASE + DRM_SIMGPU_SUBMIT, struct drm_simgpu_submit)
#define DRM_IOCTL_SIMGPU_WAIT \
	DRM_IOWR(DRM_COMMAND_BASE + DRM_SIMGPU_WAIT, struct drm_simgpu_wait)
#define DRM_IOCTL_SIMGPU_PICK_STATS \
	DRM_IOWR(DRM_COMMAND_BASE + DRM_SIMGPU_PICK_STATS, \
		 struct drm_simgpu_pick_stats)

#endif /* _UAPI_SIMGPU_DRM_H */
