/* SPDX-License-Identifier: MIT */
/*
 * i915 and the gpu cgroup controller: see i915_gpucg.c.
 */
#ifndef __I915_GPUCG_H__
#define __I915_GPUCG_H__

#include <linux/types.h>

#include "i915_priolist_types.h"

struct drm_i915_private;
struct i915_gem_context;
struct i915_priolist;
struct i915_sched_attr;
struct intel_context;

/**
 * i915_gpucg_priority() - a request's priority
 * @cgroup: the effective gpu.priority of the context's cgroup
 * @context: the context's priority
 *
 * The cgroup's priority is the major key, the context's the minor one: both
 * lie in [I915_CONTEXT_MIN_USER_PRIORITY, I915_CONTEXT_MAX_USER_PRIORITY],
 * so every composition lies strictly between I915_PRIORITY_MIN and
 * I915_PRIORITY_MAX, below the heartbeat and the display boost. A cgroup at
 * priority 0 leaves the context's priority as it is.
 */
static inline int i915_gpucg_priority(int cgroup, int context)
{
	return cgroup * I915_PRIORITY_CGROUP_STRIDE + context;
}

/* How often, at most, GuC quanta follow the shares (i915_gpucg_quantum_us()) */
#define I915_GPUCG_QUANTUM_PERIOD_MS	100

void i915_gpucg_init(struct drm_i915_private *i915);
void i915_gpucg_fini(struct drm_i915_private *i915);

void i915_gpucg_sched_attr(const struct i915_gem_context *ctx,
			   struct i915_sched_attr *attr);

int i915_gpucg_context_init(struct intel_context *ce,
			    const struct i915_gem_context *ctx);
void i915_gpucg_context_fini(struct intel_context *ce);
void i915_gpucg_context_sync(struct intel_context *ce);
void i915_gpucg_context_charge(struct intel_context *ce, u32 dt);
void i915_gpucg_context_running(struct intel_context *ce);
bool i915_gpucg_context_throttled(struct intel_context *ce, u64 *retry_ns,
				  bool *capped);

void i915_gpucg_order_level(struct i915_priolist *pl);
u32 i915_gpucg_quantum_us(u32 share, unsigned int sharing, u32 timeslice_us);

#endif /* __I915_GPUCG_H__ */
