// SPDX-License-Identifier: MIT
/*
 * Selftests of i915 and the gpu cgroup controller: mock ones, which the
 * VM tier runs, and live ones, which need an Intel GPU.
 *
 * The cgroups come from the harness: i915.st_gpucg names a directory,
 * relative to the cgroup2 root (mounted at /sys/fs/cgroup), holding lo,
 * mid and hi (effective gpu.priority -5, 0 and 5), w1 and w3 (priority 0,
 * gpu.weight 100 and 300), cap (gpu.max 30 ms of every 100 ms) and mem,
 * where modprobe runs. Each test prints
 * what it saw ("i915_gpucg: ...") so that the harness can hold it against
 * the interface files. Without the parameter the tests that need cgroups
 * are skipped.
 */

#include <linux/cgroup.h>
#if !IS_ENABLED(CONFIG_CGROUP_GPU_MEMORY)
#include <linux/cgroup_dmem.h>
#endif
#include <linux/delay.h>
#include <linux/dma-buf.h>
#include <linux/file.h>
#include <linux/kdev_t.h>

#include <drm/drm_ioctl.h>
#include <drm/ttm/ttm_placement.h>
#include <drm/ttm/ttm_resource.h>

#include "gem/i915_gem_dmabuf.h"
#include "gem/i915_gem_internal.h"
#include "gem/i915_gem_region.h"
#include "gem/i915_gem_ttm.h"
#include "gem/selftests/mock_context.h"
#include "gt/intel_engine_user.h"
#include "gt/intel_gpu_commands.h"
#include "gt/intel_gt.h"
#include "gt/intel_lrc.h"
#include "gt/intel_lrc_reg.h"

#include "i915_selftest.h"
#include "igt_flush_test.h"
#include "igt_spinner.h"
#include "intel_region_ttm.h"
#include "lib_sw_fence.h"
#include "mock_drm.h"
#include "mock_gem_device.h"
#include "mock_region.h"
#include "mock_request.h"

/* Not a node: DRM minors 64-127 (control nodes) are no longer handed out. */
#define ST_GPUCG_DEVT	MKDEV(DRM_MAJOR, 127)

#define ST_ORDER_REQUESTS	8

static struct gpucg_client *st_client(struct drm_i915_private *i915,
				      const char *name)
{
	struct gpucg_client *client;
	struct cgroup *cgrp;
	char *path;

	path = kasprintf(GFP_KERNEL, "%s/%s", i915_selftest.gpucg, name);
	if (!path)
		return ERR_PTR(-ENOMEM);
	cgrp = cgroup_get_from_path(path);
	if (IS_ERR(cgrp)) {
		pr_err("i915_gpucg: no cgroup %s: %ld\n", path, PTR_ERR(cgrp));
		kfree(path);
		return ERR_CAST(cgrp);
	}
	kfree(path);
	client = gpucg_client_create_in(i915->drm.gpucg, cgrp);
	cgroup_put(cgrp);
	return client ?: ERR_PTR(-ENODEV);
}

/* Makes each engine of @ctx a queue of @client, the context at @prio. */
static int st_bind(struct i915_gem_context *ctx, struct gpucg_client *client,
		   int prio)
{
	struct i915_gem_engines_iter it;
	struct intel_context *ce;
	int err = 0;

	ctx->sched.priority = prio;
	ctx->gpucg = gpucg_client_tryget(client);
	for_each_gem_engine(ce, i915_gem_context_lock_engines(ctx), it) {
		err = i915_gpucg_context_init(ce, ctx);
		if (err)
			break;
	}
	i915_gem_context_unlock_engines(ctx);
	return err;
}

/* A mock context of @client. */
static struct i915_gem_context *st_context(struct drm_i915_private *i915,
					   struct gpucg_client *client,
					   int prio)
{
	struct i915_gem_context *ctx;
	int err;

	ctx = mock_context(i915, "gpucg");
	if (!ctx)
		return ERR_PTR(-ENOMEM);
	err = st_bind(ctx, client, prio);
	if (err) {
		mock_context_close(ctx);
		return ERR_PTR(err);
	}
	return ctx;
}

/* A mock context of a client owned by the harness's cgroup @name. */
static struct i915_gem_context *st_context_of(struct drm_i915_private *i915,
					      const char *name, int prio)
{
	struct gpucg_client *client = st_client(i915, name);
	struct i915_gem_context *ctx;

	if (IS_ERR(client))
		return ERR_CAST(client);
	ctx = st_context(i915, client, prio);
	gpucg_client_put(client);
	return ctx;
}

static struct intel_context *st_rcs0(struct i915_gem_context *ctx)
{
	return i915_gem_context_get_engine(ctx, RCS0);
}

/*
 * A request of @ctx, held back by @fence and waiting for @after (either
 * may be NULL), added and referenced.
 */
static struct i915_request *st_request(struct i915_gem_context *ctx,
				       struct i915_sw_fence *fence,
				       struct i915_request *after)
{
	struct intel_context *ce = st_rcs0(ctx);
	struct i915_request *rq;
	int err = 0;

	if (IS_ERR(ce))
		return ERR_CAST(ce);
	rq = mock_request(ce, 0);
	intel_context_put(ce);
	if (IS_ERR(rq))
		return rq;
	if (fence)
		err = i915_sw_fence_await_sw_fence_gfp(&rq->submit, fence,
						       GFP_KERNEL);
	if (after && err >= 0)
		err = i915_request_await_dma_fence(rq, &after->fence);
	i915_request_get(rq);
	i915_request_add(rq);
	if (err < 0) {
		i915_request_put(rq);
		return ERR_PTR(err);
	}
	return rq;
}

static int igt_gpucg_compose(void *arg)
{
	static const int prios[] = {
		I915_CONTEXT_MIN_USER_PRIORITY, -5, -1, 0, 1, 5,
		I915_CONTEXT_MAX_USER_PRIORITY,
	};
	int i, j, k, l, p, q, want;

	for (i = 0; i < ARRAY_SIZE(prios); i++) {
		for (j = 0; j < ARRAY_SIZE(prios); j++) {
			p = i915_gpucg_priority(prios[i], prios[j]);
			if (!prios[i] && p != prios[j]) {
				pr_err("cgroup priority 0 turns context priority %d into %d\n",
				       prios[j], p);
				return -EINVAL;
			}
			if (p <= I915_PRIORITY_MIN || p >= I915_PRIORITY_MAX) {
				pr_err("(%d, %d) composes to %d, outside (%d, %d)\n",
				       prios[i], prios[j], p, I915_PRIORITY_MIN,
				       I915_PRIORITY_MAX);
				return -EINVAL;
			}
			for (k = 0; k < ARRAY_SIZE(prios); k++) {
				for (l = 0; l < ARRAY_SIZE(prios); l++) {
					q = i915_gpucg_priority(prios[k], prios[l]);
					want = i != k ? i - k : j - l;
					if (p - q > 0 ? want <= 0 :
					    p - q < 0 ? want >= 0 : want) {
						pr_err("(%d, %d) -> %d against (%d, %d) -> %d\n",
						       prios[i], prios[j], p,
						       prios[k], prios[l], q);
						return -EINVAL;
					}
				}
			}
		}
	}
	return 0;
}

/* Requests of contexts at priority 7 in lo, mid and hi, as i915 adds them. */
static int igt_gpucg_request_priority(void *arg)
{
	static const char * const names[] = { "lo", "mid", "hi" };
	struct drm_i915_private *i915 = arg;
	struct i915_request *rq[ARRAY_SIZE(names)] = {};
	struct i915_gem_context *ctx;
	struct gpucg_client *client;
	int i, eff, err = 0;

	if (!i915_selftest.gpucg)
		return 0;
	for (i = 0; i < ARRAY_SIZE(names) && !err; i++) {
		client = st_client(i915, names[i]);
		if (IS_ERR(client)) {
			err = PTR_ERR(client);
			break;
		}
		eff = gpucg_client_priority(client);
		ctx = st_context(i915, client, 7);
		gpucg_client_put(client);
		if (IS_ERR(ctx)) {
			err = PTR_ERR(ctx);
			break;
		}
		rq[i] = st_request(ctx, NULL, NULL);
		mock_context_close(ctx);
		if (IS_ERR(rq[i])) {
			err = PTR_ERR(rq[i]);
			rq[i] = NULL;
			break;
		}
		pr_info("i915_gpucg: %s effective %d request %d\n", names[i],
			eff, rq[i]->sched.attr.priority);
		if (rq[i]->sched.attr.priority != i915_gpucg_priority(eff, 7)) {
			pr_err("%s: request priority %d, want %d\n", names[i],
			       rq[i]->sched.attr.priority,
			       i915_gpucg_priority(eff, 7));
			err = -EINVAL;
		}
		if (i && rq[i]->sched.attr.priority <= rq[i - 1]->sched.attr.priority) {
			pr_err("%s does not outrank %s\n", names[i], names[i - 1]);
			err = -EINVAL;
		}
	}
	for (i = 0; i < ARRAY_SIZE(rq); i++)
		if (rq[i])
			i915_request_put(rq[i]);
	mock_device_flush(i915);
	return err;
}

/* A request in hi waits for one in lo: lo's is lifted to hi's priority. */
static int igt_gpucg_inherit(void *arg)
{
	struct drm_i915_private *i915 = arg;
	struct i915_gem_context *ctx_lo = NULL, *ctx_hi = NULL;
	struct i915_request *lo = NULL, *hi = NULL;
	struct gpucg_client *c_lo, *c_hi;
	struct i915_sw_fence fence;
	int err, want;

	if (!i915_selftest.gpucg)
		return 0;
	c_lo = st_client(i915, "lo");
	if (IS_ERR(c_lo))
		return PTR_ERR(c_lo);
	c_hi = st_client(i915, "hi");
	if (IS_ERR(c_hi)) {
		gpucg_client_put(c_lo);
		return PTR_ERR(c_hi);
	}
	want = i915_gpucg_priority(gpucg_client_priority(c_hi), 0);

	onstack_fence_init(&fence);
	ctx_lo = st_context(i915, c_lo, 0);
	ctx_hi = st_context(i915, c_hi, 0);
	if (IS_ERR(ctx_lo) || IS_ERR(ctx_hi)) {
		err = PTR_ERR(IS_ERR(ctx_lo) ? ctx_lo : ctx_hi);
		goto out;
	}
	lo = st_request(ctx_lo, &fence, NULL);
	if (IS_ERR(lo)) {
		err = PTR_ERR(lo);
		lo = NULL;
		goto out;
	}
	hi = st_request(ctx_hi, NULL, lo);
	if (IS_ERR(hi)) {
		err = PTR_ERR(hi);
		hi = NULL;
		goto out;
	}

	pr_info("i915_gpucg: inherit waiter %d signaler %d\n",
		hi->sched.attr.priority, lo->sched.attr.priority);
	if (hi->sched.attr.priority != want || lo->sched.attr.priority != want) {
		pr_err("waiter at %d, signaler at %d, want both at %d\n",
		       hi->sched.attr.priority, lo->sched.attr.priority, want);
		err = -EINVAL;
	}
out:
	onstack_fence_fini(&fence);
	if (hi && i915_request_wait(hi, 0, HZ) < 0 && !err) {
		pr_err("waiter did not complete\n");
		err = -EIO;
	}
	if (hi)
		i915_request_put(hi);
	if (lo)
		i915_request_put(lo);
	if (!IS_ERR_OR_NULL(ctx_hi))
		mock_context_close(ctx_hi);
	if (!IS_ERR_OR_NULL(ctx_lo))
		mock_context_close(ctx_lo);
	gpucg_client_put(c_hi);
	gpucg_client_put(c_lo);
	mock_device_flush(i915);
	return err;
}

/*
 * One priority level holding, in submission order, the requests of a
 * context in w1 and of one in w3, ordered by i915_gpucg_order_level()
 * before each request is taken from its front (as execlists_dequeue()
 * takes them), each charged 1 ms as if it ran: w3 must get about three
 * turns to w1's one, each context's requests must leave in ring order,
 * and w3's last, which waits for w1's next to last, must not leave before
 * it.
 */
static int igt_gpucg_order(void *arg)
{
	struct drm_i915_private *i915 = arg;
	struct i915_request *rq[2][ST_ORDER_REQUESTS] = {}, *r;
	struct i915_gem_context *ctx[2] = {};
	struct i915_sched_engine *se;
	struct i915_priolist *pl;
	struct i915_sw_fence fence;
	struct list_head *level;
	int i, j, w, seen[2] = {}, w3_first = 0, err = 0;
	u32 last_seqno[2] = {};
	char order[2 * ST_ORDER_REQUESTS + 1] = {};

	if (!i915_selftest.gpucg)
		return 0;
	for (w = 0; w < 2; w++) {
		ctx[w] = st_context_of(i915, w ? "w3" : "w1", 0);
		if (IS_ERR(ctx[w])) {
			err = PTR_ERR(ctx[w]);
			ctx[w] = NULL;
			goto out_ctx;
		}
	}

	se = i915_sched_engine_create(ENGINE_MOCK);
	if (!se) {
		err = -ENOMEM;
		goto out_ctx;
	}

	onstack_fence_init(&fence);
	for (i = 0; i < ST_ORDER_REQUESTS; i++) {
		for (w = 0; w < 2; w++) {
			/* w3's last waits for w1's next to last */
			r = st_request(ctx[w], &fence,
				       w && i == ST_ORDER_REQUESTS - 1 ?
				       rq[0][i - 1] : NULL);
			if (IS_ERR(r)) {
				err = PTR_ERR(r);
				goto out_fence;
			}
			rq[w][i] = r;
		}
	}

	spin_lock_irq(&se->lock);
	level = i915_sched_lookup_priolist(se, I915_PRIORITY_NORMAL);
	for (i = 0; i < ST_ORDER_REQUESTS; i++) {
		for (w = 0; w < 2; w++) {
			list_add_tail(&rq[w][i]->sched.link, level);
			set_bit(I915_FENCE_FLAG_PQUEUE, &rq[w][i]->fence.flags);
		}
	}
	pl = container_of(level, struct i915_priolist, requests);
	for (i = 0; i < 2 * ST_ORDER_REQUESTS; i++) {
		i915_gpucg_order_level(pl);
		r = list_first_entry(level, struct i915_request, sched.link);
		list_del_init(&r->sched.link);
		clear_bit(I915_FENCE_FLAG_PQUEUE, &r->fence.flags);
		w = rcu_access_pointer(r->context->gem_context) == ctx[1];
		order[i] = w ? '3' : '1';
		if (seen[w]++ && r->fence.seqno <= last_seqno[w])
			err = -EINVAL;
		last_seqno[w] = r->fence.seqno;
		if (r == rq[1][ST_ORDER_REQUESTS - 1] && seen[0] < ST_ORDER_REQUESTS - 1)
			err = -EINVAL;
		if (i < ST_ORDER_REQUESTS && w)
			w3_first++;
		i915_gpucg_context_charge(r->context, NSEC_PER_MSEC);
	}
	rb_erase_cached(&pl->node, &se->queue);
	i915_priolist_free(pl);
	spin_unlock_irq(&se->lock);

	pr_info("i915_gpucg: order %s w3 %d of the first %d\n", order,
		w3_first, ST_ORDER_REQUESTS);
	if (err)
		pr_err("order %s breaks a context's ring order or a wait\n", order);
	if (w3_first < ST_ORDER_REQUESTS * 3 / 4 - 1) {
		pr_err("w3 (weight 300) got %d of the first %d turns, want about %d\n",
		       w3_first, ST_ORDER_REQUESTS, ST_ORDER_REQUESTS * 3 / 4);
		err = -EINVAL;
	}

out_fence:
	onstack_fence_fini(&fence);
	for (w = 0; w < 2; w++) {
		for (j = 0; j < ST_ORDER_REQUESTS; j++) {
			if (!rq[w][j])
				continue;
			if (i915_request_wait(rq[w][j], 0, HZ) < 0 && !err)
				err = -EIO;
			i915_request_put(rq[w][j]);
		}
	}
	i915_sched_engine_put(se);
out_ctx:
	for (w = 0; w < 2; w++)
		if (ctx[w])
			mock_context_close(ctx[w]);
	mock_device_flush(i915);
	return err;
}

/*
 * Runtime read at two context switches (1 ms, then 2 ms of CTX_TIMESTAMP)
 * must charge 2 ms, not 3: a context charged 2.5 ms at once in the same
 * cgroup must then come after it. Then the advance a running context pays.
 */
static int igt_gpucg_runtime(void *arg)
{
	struct drm_i915_private *i915 = arg;
	struct i915_gem_context *ctx[2] = {};
	struct intel_context *ce[2] = {};
	struct gpucg_client *client;
	u64 advance;
	u32 *regs;
	int w, err = 0;

	if (!i915_selftest.gpucg)
		return 0;
	regs = kcalloc(PAGE_SIZE / sizeof(u32), sizeof(u32), GFP_KERNEL);
	if (!regs)
		return -ENOMEM;
	client = st_client(i915, "w1");
	if (IS_ERR(client)) {
		kfree(regs);
		return PTR_ERR(client);
	}
	for (w = 0; w < 2 && !err; w++) {
		ctx[w] = st_context(i915, client, 0);
		if (IS_ERR(ctx[w])) {
			err = PTR_ERR(ctx[w]);
			ctx[w] = NULL;
			break;
		}
		ce[w] = st_rcs0(ctx[w]);
		if (IS_ERR(ce[w])) {
			err = PTR_ERR(ce[w]);
			ce[w] = NULL;
		}
	}
	gpucg_client_put(client);
	if (err)
		goto out;

	ce[0]->lrc_reg_state = regs;
	regs[CTX_TIMESTAMP] = NSEC_PER_MSEC;
	lrc_update_runtime(ce[0]);
	regs[CTX_TIMESTAMP] = 2 * NSEC_PER_MSEC;
	lrc_update_runtime(ce[0]);
	ce[0]->lrc_reg_state = NULL;
	i915_gpucg_context_charge(ce[1], 5 * NSEC_PER_MSEC / 2);

	pr_info("i915_gpucg: runtime %llu ns, charged first %d\n",
		ce[0]->stats.runtime.total,
		gpucg_queue_before(&ce[0]->gpucg, &ce[1]->gpucg));
	if (ce[0]->stats.runtime.total != 2 * NSEC_PER_MSEC ||
	    !gpucg_queue_before(&ce[0]->gpucg, &ce[1]->gpucg)) {
		pr_err("2 ms read twice is not charged as 2 ms\n");
		err = -EINVAL;
		goto out;
	}

	/*
	 * Running for 3 ms without a switch: charged in advance (now behind
	 * the 2.5 ms context), and the next 2 ms of runtime pay that off.
	 */
	ce[0]->stats.active = intel_context_clock() - 3 * NSEC_PER_MSEC;
	i915_gpucg_context_running(ce[0]);
	advance = ce[0]->gpucg_advance_ns;
	ce[0]->lrc_reg_state = regs;
	regs[CTX_TIMESTAMP] = 4 * NSEC_PER_MSEC;
	lrc_update_runtime(ce[0]);
	ce[0]->lrc_reg_state = NULL;
	ce[0]->stats.active = 0;
	pr_info("i915_gpucg: advance %llu ns, %llu left after 2 ms of runtime\n",
		advance, ce[0]->gpucg_advance_ns);
	if (advance < 3 * NSEC_PER_MSEC || advance > 3 * NSEC_PER_MSEC + NSEC_PER_SEC ||
	    ce[0]->gpucg_advance_ns != advance - 2 * NSEC_PER_MSEC ||
	    !gpucg_queue_before(&ce[1]->gpucg, &ce[0]->gpucg)) {
		pr_err("a running context is not charged in advance\n");
		err = -EINVAL;
	}
out:
	for (w = 0; w < 2; w++) {
		if (ce[w])
			intel_context_put(ce[w]);
		if (ctx[w])
			mock_context_close(ctx[w]);
	}
	kfree(regs);
	mock_device_flush(i915);
	return err;
}

/*
 * GuC quanta: the scaling and its clamp, then the quanta of a context in
 * w1 and one in w3 while both have work.
 */
static int igt_gpucg_quantum(void *arg)
{
	static const struct {
		u32 share;
		unsigned int sharing;
		u32 timeslice_us, want;
	} table[] = {
		{ 0, 0, 1000, 1000 },		/* not a queue, or idle */
		{ 32768, 2, 1000, 1000 },	/* equal weights */
		{ 49152, 2, 1000, 1500 },	/* 3:1 */
		{ 16384, 2, 1000, 500 },
		{ 65536, 1, 1000, 1000 },	/* alone */
		{ 65536, 64, 1000, 4000 },	/* clamped above */
		{ 1, 2, 1000, 250 },		/* clamped below */
		{ 49152, 2, 0, 0 },		/* timeslicing off */
	};
	struct drm_i915_private *i915 = arg;
	struct i915_request *rq[2] = {};
	struct i915_gem_context *ctx[2] = {};
	struct i915_sw_fence fence;
	u32 quantum[2];
	int i, w, err = 0;

	for (i = 0; i < ARRAY_SIZE(table); i++) {
		u32 q = i915_gpucg_quantum_us(table[i].share, table[i].sharing,
					      table[i].timeslice_us);

		if (q != table[i].want) {
			pr_err("share %u of %u, timeslice %u us: quantum %u us, want %u\n",
			       table[i].share, table[i].sharing,
			       table[i].timeslice_us, q, table[i].want);
			return -EINVAL;
		}
	}
	if (!i915_selftest.gpucg)
		return 0;

	onstack_fence_init(&fence);
	for (w = 0; w < 2; w++) {
		ctx[w] = st_context_of(i915, w ? "w3" : "w1", 0);
		if (IS_ERR(ctx[w])) {
			err = PTR_ERR(ctx[w]);
			ctx[w] = NULL;
			goto out;
		}
		rq[w] = st_request(ctx[w], &fence, NULL);
		if (IS_ERR(rq[w])) {
			err = PTR_ERR(rq[w]);
			rq[w] = NULL;
			goto out;
		}
	}
	/* both busy: the shares of 100 and 300 */
	for (w = 0; w < 2; w++)
		quantum[w] = i915_gpucg_quantum_us(gpucg_queue_share(&rq[w]->context->gpucg),
						   2, 1000);
	pr_info("i915_gpucg: quantum w1 %u w3 %u\n", quantum[0], quantum[1]);
	if (quantum[0] != 500 || quantum[1] != 1500) {
		pr_err("quanta %u and %u us for weights 100 and 300, want 500 and 1500\n",
		       quantum[0], quantum[1]);
		err = -EINVAL;
	}
out:
	onstack_fence_fini(&fence);
	for (w = 0; w < 2; w++) {
		if (rq[w]) {
			if (i915_request_wait(rq[w], 0, HZ) < 0 && !err)
				err = -EIO;
			i915_request_put(rq[w]);
		}
		if (ctx[w])
			mock_context_close(ctx[w]);
	}
	mock_device_flush(i915);
	return err;
}

/*
 * gpu.max, as the execlists dequeue asks it: a context of cap (30 ms of
 * every 100 ms) is not throttled after 10 ms of runtime, is after 35 ms,
 * with a time to ask again within the period, and is released once the
 * period in which its 5 ms over are paid comes: the next one, about 100 ms
 * after its first charge. A cap acts on it throughout (the dequeue gives
 * it one request at a time); the kernel's context is never throttled or
 * capped.
 */
static int igt_gpucg_max(void *arg)
{
	struct drm_i915_private *i915 = arg;
	struct intel_engine_cs *engine;
	struct i915_gem_context *ctx;
	struct intel_context *ce;
	bool early, late, kernel, capped, is_capped;
	u64 retry, first, waited;
	int err = 0;

	if (!i915_selftest.gpucg)
		return 0;
	ctx = st_context_of(i915, "cap", 0);
	if (IS_ERR(ctx))
		return PTR_ERR(ctx);
	ce = st_rcs0(ctx);
	if (IS_ERR(ce)) {
		err = PTR_ERR(ce);
		goto out_ctx;
	}
	engine = intel_engine_lookup_user(i915, I915_ENGINE_CLASS_RENDER, 0);

	first = ktime_get_ns();
	i915_gpucg_context_charge(ce, 10 * NSEC_PER_MSEC);
	early = i915_gpucg_context_throttled(ce, &retry, &is_capped);
	i915_gpucg_context_charge(ce, 25 * NSEC_PER_MSEC);
	late = i915_gpucg_context_throttled(ce, &retry, NULL);
	kernel = i915_gpucg_context_throttled(engine->kernel_context, &waited,
					      &capped) || capped;
	pr_info("i915_gpucg: max throttled after 10 ms %d, after 35 ms %d, retry %llu us, kernel %d\n",
		early, late, div_u64(retry, NSEC_PER_USEC), kernel);
	if (early || !late || !retry || retry > 100 * NSEC_PER_MSEC || kernel ||
	    !is_capped) {
		pr_err("a context of cap is not throttled by its use\n");
		err = -EINVAL;
		goto out_ce;
	}
	/* as the engine's timer does: again when the controller says */
	while (i915_gpucg_context_throttled(ce, &retry, NULL)) {
		if (ktime_get_ns() - first > NSEC_PER_SEC) {
			pr_err("a context of cap is throttled for more than a second\n");
			err = -ETIME;
			goto out_ce;
		}
		usleep_range(div_u64(retry, NSEC_PER_USEC),
			     div_u64(retry, NSEC_PER_USEC) + 1000);
	}
	waited = ktime_get_ns() - first;
	pr_info("i915_gpucg: max released %llu ms after the first charge\n",
		div_u64(waited, NSEC_PER_MSEC));
	if (waited < 100 * NSEC_PER_MSEC) {
		pr_err("a context of cap released before its debt is paid\n");
		err = -EINVAL;
	}
out_ce:
	intel_context_put(ce);
out_ctx:
	mock_context_close(ctx);
	mock_device_flush(i915);
	return err;
}

/*
 * Where the memory test reads its charges: in the cgroup the harness runs
 * modprobe in (<st_gpucg>/mem), the test device's line of gpu.memory.current
 * where the gpu controller has memory, else of dmem.current, for the
 * device's GEM region.
 */
#if IS_ENABLED(CONFIG_CGROUP_GPU_MEMORY)
#define ST_MEMORY_CURRENT	"/sys/fs/cgroup%s/mem/gpu.memory.current"

static char *st_memory_key(struct drm_i915_private *i915)
{
	return kasprintf(GFP_KERNEL, "%u:%u", MAJOR(ST_GPUCG_DEVT),
			 MINOR(ST_GPUCG_DEVT));
}
#else
#define ST_MEMORY_CURRENT	"/sys/fs/cgroup%s/mem/dmem.current"

static char *st_memory_key(struct drm_i915_private *i915)
{
	return kasprintf(GFP_KERNEL, "drm/%s/system", i915->drm.unique);
}
#endif

/*
 * The value on the line "@key VALUE" (or "@key max=VALUE", as dmem.events
 * says it) of the file @path, -ENOENT, or -errno.
 */
static s64 st_keyed_value(const char *path, const char *key)
{
	char *buf, *line, *next, *val;
	struct file *f;
	loff_t pos = 0;
	ssize_t len;
	s64 ret;
	u64 bytes;

	buf = kzalloc(PAGE_SIZE, GFP_KERNEL);
	if (!buf)
		return -ENOMEM;
	f = filp_open(path, O_RDONLY, 0);
	if (IS_ERR(f)) {
		pr_err("i915_gpucg: %s: %ld\n", path, PTR_ERR(f));
		ret = PTR_ERR(f);
		goto out;
	}
	len = kernel_read(f, buf, PAGE_SIZE - 1, &pos);
	fput(f);
	if (len < 0) {
		ret = len;
		goto out;
	}
	ret = -ENOENT;
	for (line = buf; line; line = next) {
		next = strchr(line, '\n');
		if (next)
			*next++ = '\0';
		val = strchr(line, ' ');
		if (!val)
			continue;
		*val++ = '\0';
		if (str_has_prefix(val, "max="))
			val += strlen("max=");
		if (!strcmp(line, key) && !kstrtou64(val, 10, &bytes))
			ret = bytes;
	}
out:
	kfree(buf);
	return ret;
}

/* The value on the test device's line of ST_MEMORY_CURRENT, or -errno. */
static s64 st_memory_current(struct drm_i915_private *i915)
{
	char *path, *key;
	s64 ret;

	path = kasprintf(GFP_KERNEL, ST_MEMORY_CURRENT, i915_selftest.gpucg);
	key = st_memory_key(i915);
	if (!path || !key) {
		ret = -ENOMEM;
		goto out;
	}
	ret = st_keyed_value(path, key);
	if (ret == -ENOENT)
		pr_err("i915_gpucg: no line %s in %s\n", key, path);
out:
	kfree(key);
	kfree(path);
	return ret;
}

/*
 * Gives the mock device, which has no render node for the DRM core to
 * register, the dmem region the core charges GEM objects to on a device
 * that has one. Nothing to do where the gpu controller has memory.
 * Returns 1 when the kernel counts no GPU memory (no dmem): the test skips.
 */
static int st_memory_region_init(struct drm_i915_private *i915)
{
#if !IS_ENABLED(CONFIG_CGROUP_GPU_MEMORY)
	struct dmem_cgroup_init init = { .size = SZ_1G };
	struct dmem_cgroup_region *region;

	region = dmem_cgroup_register_region(&init, "drm/%s/system",
					     i915->drm.unique);
	if (IS_ERR(region))
		return PTR_ERR(region);
	if (!region) {
		pr_info("i915_gpucg: memory: no dmem cgroup controller, skipped\n");
		return 1;
	}
	i915->drm.gem_region = region;
#endif
	return 0;
}

static void st_memory_region_fini(struct drm_i915_private *i915)
{
#if !IS_ENABLED(CONFIG_CGROUP_GPU_MEMORY)
	dmem_cgroup_unregister_region(i915->drm.gem_region);
	i915->drm.gem_region = NULL;
#endif
}

/*
 * Memory: a shmem object, an internal one and one of a (mock) device-local
 * region, each given two handles and imported back into the device, are
 * each charged once, at the first handle, to the cgroup modprobe runs in
 * (<st_gpucg>/mem), and uncharged when freed: read from that cgroup's
 * gpu.memory.current, or dmem.current where the kernel has dmem.
 */
static int igt_gpucg_memory(void *arg)
{
	static const unsigned long sizes[] = {
		4 * PAGE_SIZE, 8 * PAGE_SIZE, 16 * PAGE_SIZE,
	};
	struct drm_i915_private *i915 = arg;
	struct drm_i915_gem_object *obj[ARRAY_SIZE(sizes)] = {};
	u32 handle[ARRAY_SIZE(sizes)][3];
	int nhandles[ARRAY_SIZE(sizes)] = {};
	struct intel_memory_region *mr;
	struct drm_gem_object *imported;
	struct dma_buf *dmabuf;
	struct file *file;
	s64 before, charged, after;
	u64 total = 0;
	int i, j, err = 0;

	if (!i915_selftest.gpucg)
		return 0;
	gpucg_publish_device(i915->drm.gpucg);
	err = st_memory_region_init(i915);
	if (err)
		return err < 0 ? err : 0;
	file = mock_file(i915);
	if (IS_ERR(file)) {
		err = PTR_ERR(file);
		goto out_memory;
	}
	mr = mock_region_create(i915, 0, SZ_2M, PAGE_SIZE, 0, 0);
	if (IS_ERR(mr)) {
		err = PTR_ERR(mr);
		goto out_file;
	}
	before = st_memory_current(i915);
	if (before < 0) {
		err = before;
		goto out_region;
	}

	obj[0] = i915_gem_object_create_shmem(i915, sizes[0]);
	obj[1] = i915_gem_object_create_internal(i915, sizes[1]);
	obj[2] = i915_gem_object_create_region(mr, sizes[2], 0, 0);
	for (i = 0; i < ARRAY_SIZE(obj); i++) {
		if (IS_ERR(obj[i])) {
			err = PTR_ERR(obj[i]);
			obj[i] = NULL;
		}
	}
	for (i = 0; i < ARRAY_SIZE(obj) && !err; i++) {
		total += sizes[i];
		for (j = 0; j < 2; j++) {
			err = drm_gem_handle_create(to_drm_file(file), &obj[i]->base,
						    &handle[i][nhandles[i]]);
			if (err)
				goto out_objects;
			nhandles[i]++;
		}
		dmabuf = i915_gem_prime_export(&obj[i]->base, O_RDWR);
		if (IS_ERR(dmabuf)) {
			err = PTR_ERR(dmabuf);
			goto out_objects;
		}
		imported = i915_gem_prime_import(&i915->drm, dmabuf);
		__fput_sync(dmabuf->file);
		if (IS_ERR(imported)) {
			err = PTR_ERR(imported);
			goto out_objects;
		}
		if (imported != &obj[i]->base) {
			pr_err("self-import of object %d made a new object\n", i);
			drm_gem_object_put(imported);
			err = -EINVAL;
			goto out_objects;
		}
		err = drm_gem_handle_create(to_drm_file(file), imported,
					    &handle[i][nhandles[i]]);
		drm_gem_object_put(imported);
		if (err)
			goto out_objects;
		nhandles[i]++;
	}
	charged = st_memory_current(i915) - before;

out_objects:
	for (i = 0; i < ARRAY_SIZE(obj); i++) {
		for (j = 0; j < nhandles[i]; j++)
			drm_gem_handle_delete(to_drm_file(file), handle[i][j]);
		if (obj[i])
			i915_gem_object_put(obj[i]);
	}
	i915_gem_drain_freed_objects(i915);
	if (err)
		goto out_region;
	after = st_memory_current(i915);
	pr_info("i915_gpucg: memory charged %lld of %llu, left %lld\n",
		charged, total, after - before);
	if (charged != total || after != before) {
		pr_err("3 objects of %llu bytes, 3 handles each: charged %lld, %lld left after free\n",
		       total, charged, after - before);
		err = -EINVAL;
	}
out_region:
	intel_memory_region_destroy(mr);
out_file:
	__fput_sync(file);
out_memory:
	st_memory_region_fini(i915);
	return err;
}

/*
 * Local memory (7.3): a TTM region of the device, here a mock one, is a
 * dmem region "drm/<device>/<uabi name>" of its size from its creation
 * (listed in the root's dmem.capacity) to its destruction. The mock's
 * objects get their pages from the region's manager directly
 * (intel_region_ttm_resource_alloc()), not through a TTM placement, so
 * they are charged by no region; igt_gpucg_lmem_charge() places i915's
 * TTM objects in such a region.
 */
static int igt_gpucg_lmem_region(void *arg)
{
#if !IS_ENABLED(CONFIG_CGROUP_GPU_MEMORY)
	const char *capacity = "/sys/fs/cgroup/dmem.capacity";
	struct drm_i915_private *i915 = arg;
	struct intel_memory_region *mr;
	unsigned int regions;
	char *key;
	s64 size;
	int err = 0;

	if (!i915_selftest.gpucg)
		return 0;
	regions = i915->drm.dmem_regions;
	mr = mock_region_create(i915, 0, SZ_4M, PAGE_SIZE, 0, 0);
	if (IS_ERR(mr))
		return PTR_ERR(mr);
	if (!mr->dmem) {
		pr_err("region %s is not registered with dmem\n", mr->uabi_name);
		err = -EINVAL;
		goto out_region;
	}
	/* what makes TTM charge its placements to the region */
	if (((struct ttm_resource_manager *)mr->region_private)->cg != mr->dmem) {
		pr_err("region %s: its TTM manager charges no dmem region\n",
		       mr->uabi_name);
		err = -EINVAL;
		goto out_region;
	}
	key = kasprintf(GFP_KERNEL, "drm/%s/%s", i915->drm.unique, mr->uabi_name);
	if (!key) {
		err = -ENOMEM;
		goto out_region;
	}
	size = st_keyed_value(capacity, key);
	if (size != SZ_4M || i915->drm.dmem_regions != regions + 1) {
		pr_err("region %s: capacity %lld, %u driver regions (expected %d, %u)\n",
		       key, size, i915->drm.dmem_regions, SZ_4M, regions + 1);
		err = -EINVAL;
	}
	intel_memory_region_destroy(mr);
	mr = NULL;
	size = st_keyed_value(capacity, key);
	if (!err && (size != -ENOENT || i915->drm.dmem_regions != regions)) {
		pr_err("region %s still listed after its destruction (%lld)\n",
		       key, size);
		err = -EINVAL;
	}
	kfree(key);
out_region:
	if (mr)
		intel_memory_region_destroy(mr);
	return err;
#else
	return 0;	/* 6.12: the gpu controller's own memory, no dmem */
#endif
}

#if !IS_ENABLED(CONFIG_CGROUP_GPU_MEMORY)
/* Writes @buf to the file @path (a cgroup's dmem.max), or returns -errno. */
static int st_write(const char *path, const char *buf)
{
	struct file *f;
	loff_t pos = 0;
	ssize_t len;

	f = filp_open(path, O_WRONLY, 0);
	if (IS_ERR(f))
		return PTR_ERR(f);
	len = kernel_write(f, buf, strlen(buf), &pos);
	fput(f);
	return len < 0 ? len : 0;
}

static int st_ttm_region_release(struct intel_memory_region *mem)
{
	struct drm_i915_private *i915 = mem->i915;
	int instance = mem->instance;
	int ret;

	ret = intel_region_ttm_fini(mem);
	ida_free(&i915->selftest.mock_region_instances, instance);
	return ret;
}

/*
 * A mock region whose objects are i915's TTM objects, as local memory's
 * are: created in a system placement, moved into the region by TTM when
 * their pages are wanted. It has no CPU window (io_size 0), which a move
 * from an empty system placement does not need.
 */
static const struct intel_memory_region_ops st_ttm_region_ops = {
	.init = intel_region_ttm_init,
	.release = st_ttm_region_release,
	.init_object = __i915_gem_ttm_object_init,
};

static struct intel_memory_region *
st_ttm_region_create(struct drm_i915_private *i915, resource_size_t size)
{
	int instance = ida_alloc_max(&i915->selftest.mock_region_instances,
				     TTM_NUM_MEM_TYPES - TTM_PL_PRIV - 1,
				     GFP_KERNEL);

	if (instance < 0)
		return ERR_PTR(instance);
	return intel_memory_region_create(i915, 0, size, PAGE_SIZE, 0, 0,
					  INTEL_MEMORY_MOCK, instance,
					  &st_ttm_region_ops);
}

/*
 * Pins the pages of a new object of @size in @mr: TTM places it in the
 * region (ttm_bo_validate()), charging the region's dmem pool of the
 * cgroup modprobe runs in. Returns the object, or an ERR_PTR.
 */
static struct drm_i915_gem_object *
st_ttm_object_placed(struct intel_memory_region *mr, resource_size_t size)
{
	struct drm_i915_gem_object *obj;
	int err;

	obj = i915_gem_object_create_region(mr, size, 0, 0);
	if (IS_ERR(obj))
		return obj;
	err = i915_gem_object_pin_pages_unlocked(obj);
	if (err) {
		i915_gem_object_put(obj);
		return ERR_PTR(err);
	}
	return obj;
}

static void st_ttm_object_free(struct drm_i915_gem_object *obj)
{
	i915_gem_object_unpin_pages(obj);
	i915_gem_object_put(obj);
}
#endif

/*
 * Local memory's charge (7.3): an i915 TTM object in a region registered
 * with dmem (a mock one with the TTM object ops local memory has) is
 * charged to the region's pool of the allocating task's cgroup
 * (<st_gpucg>/mem) when TTM places it, not when it is created (in a system
 * placement), and uncharged when freed; with dmem.max at what one object
 * takes, a second object's placement is refused while the first is pinned
 * (nothing to evict), charges nothing and is counted in the cgroup's
 * dmem.events.local.
 */
static int igt_gpucg_lmem_charge(void *arg)
{
#if !IS_ENABLED(CONFIG_CGROUP_GPU_MEMORY)
	struct drm_i915_private *i915 = arg;
	struct drm_i915_gem_object *obj, *over;
	struct intel_memory_region *mr;
	char *key, *current_path, *max_path, *events_path, *limit;
	s64 before, created, placed, refused, after, hits;
	int err = 0;

	if (!i915_selftest.gpucg)
		return 0;
	mr = st_ttm_region_create(i915, SZ_4M);
	if (IS_ERR(mr))
		return PTR_ERR(mr);
	if (!mr->dmem) {
		pr_info("i915_gpucg: lmem charge: no dmem cgroup controller, skipped\n");
		goto out_region;
	}
	key = kasprintf(GFP_KERNEL, "drm/%s/%s", i915->drm.unique, mr->uabi_name);
	current_path = kasprintf(GFP_KERNEL, "/sys/fs/cgroup%s/mem/dmem.current",
				 i915_selftest.gpucg);
	max_path = kasprintf(GFP_KERNEL, "/sys/fs/cgroup%s/mem/dmem.max",
			     i915_selftest.gpucg);
	events_path = kasprintf(GFP_KERNEL, "/sys/fs/cgroup%s/mem/dmem.events.local",
				i915_selftest.gpucg);
	limit = kasprintf(GFP_KERNEL, "%s %u", key, SZ_1M);
	if (!key || !current_path || !max_path || !events_path || !limit) {
		err = -ENOMEM;
		goto out_strings;
	}

	before = st_keyed_value(current_path, key);
	obj = i915_gem_object_create_region(mr, SZ_1M, 0, 0);
	if (IS_ERR(obj)) {
		err = PTR_ERR(obj);
		goto out_strings;
	}
	created = st_keyed_value(current_path, key);
	i915_gem_object_put(obj);

	obj = st_ttm_object_placed(mr, SZ_1M);
	if (IS_ERR(obj)) {
		err = PTR_ERR(obj);
		goto out_strings;
	}
	placed = st_keyed_value(current_path, key);

	err = st_write(max_path, limit);
	if (err) {
		pr_err("i915_gpucg: writing %s: %d\n", max_path, err);
		st_ttm_object_free(obj);
		goto out_strings;
	}
	hits = st_keyed_value(events_path, key);
	over = st_ttm_object_placed(mr, SZ_1M);
	refused = st_keyed_value(current_path, key);
	hits = hits < 0 ? hits : st_keyed_value(events_path, key) - hits;
	if (!IS_ERR(over))
		st_ttm_object_free(over);

	st_ttm_object_free(obj);
	i915_gem_drain_freed_objects(i915);
	after = st_keyed_value(current_path, key);
	pr_info("i915_gpucg: lmem charge %s: created %lld placed %lld over the limit %ld (%lld, %lld limit hits) freed %lld\n",
		key, created - before, placed - before,
		IS_ERR(over) ? PTR_ERR(over) : 0L, refused - before, hits,
		after - before);
	if (before < 0 || created != before || placed - before != SZ_1M ||
	    !IS_ERR(over) || refused != placed || hits < 1 || after != before) {
		pr_err("i915_gpucg: lmem charge: want 0 at creation, %u placed, a refusal charging nothing and counted over the limit, 0 after the free\n",
		       SZ_1M);
		err = -EINVAL;
	}
out_strings:
	kfree(limit);
	kfree(events_path);
	kfree(max_path);
	kfree(current_path);
	kfree(key);
out_region:
	intel_memory_region_destroy(mr);
	return err;
#else
	return 0;	/* 6.12: the gpu controller's own memory, no dmem */
#endif
}

int i915_gpucg_mock_selftests(void)
{
	static const struct i915_subtest tests[] = {
		SUBTEST(igt_gpucg_compose),
		SUBTEST(igt_gpucg_request_priority),
		SUBTEST(igt_gpucg_inherit),
		SUBTEST(igt_gpucg_order),
		SUBTEST(igt_gpucg_runtime),
		SUBTEST(igt_gpucg_quantum),
		SUBTEST(igt_gpucg_max),
		SUBTEST(igt_gpucg_memory),
		SUBTEST(igt_gpucg_lmem_region),
		SUBTEST(igt_gpucg_lmem_charge),
	};
	struct drm_i915_private *i915;
	struct intel_engine_cs *engine;
	struct gpucg_device *dev;
	intel_wakeref_t wakeref;
	int err;

	dev = gpucg_register_device(ST_GPUCG_DEVT);
	if (IS_ERR(dev))
		return PTR_ERR(dev);
	if (!dev && i915_selftest.gpucg) {
		pr_err("i915_gpucg: the kernel has no gpu cgroup controller\n");
		return -ENODEV;
	}

	i915 = mock_gem_device();
	if (!i915) {
		err = -ENOMEM;
		goto out_dev;
	}
	i915->drm.gpucg = dev;
	i915_gpucg_init(i915);
	if (dev && !i915->gpucg[I915_ENGINE_CLASS_RENDER]) {
		err = -ENOMEM;
		goto out_i915;
	}
	/* the mock engine holds nothing back: igt_gpucg_max asks as execlists do */
	gpucg_engine_enforce_max(i915->gpucg[I915_ENGINE_CLASS_RENDER]);

	/* the mock engine runs FIFO: give it i915's scheduler */
	engine = intel_engine_lookup_user(i915, I915_ENGINE_CLASS_RENDER, 0);
	engine->sched_engine->schedule = i915_schedule;

	with_intel_runtime_pm(&i915->runtime_pm, wakeref)
		err = i915_subtests(tests, i915);

out_i915:
	mock_destroy_device(i915);
out_dev:
	gpucg_unregister_device(dev);
	gpucg_put_device(dev);
	return err;
}

/* A context of @client on a live device. */
static struct i915_gem_context *live_context_of(struct drm_i915_private *i915,
						const char *name, int prio)
{
	struct gpucg_client *client = st_client(i915, name);
	struct i915_gem_context *ctx;
	int err;

	if (IS_ERR(client))
		return ERR_CAST(client);
	ctx = kernel_context(i915, NULL);
	if (!ctx) {
		gpucg_client_put(client);
		return ERR_PTR(-ENOMEM);
	}
	err = st_bind(ctx, client, prio);
	gpucg_client_put(client);
	if (err) {
		kernel_context_close(ctx);
		return ERR_PTR(err);
	}
	return ctx;
}

static struct i915_request *live_spinner(struct igt_spinner *spin,
					 struct i915_gem_context *ctx,
					 struct intel_engine_cs *engine)
{
	struct intel_context *ce;
	struct i915_request *rq;

	ce = i915_gem_context_get_engine(ctx, engine->legacy_idx);
	if (IS_ERR(ce))
		return ERR_CAST(ce);
	rq = igt_spinner_create_request(spin, ce, MI_ARB_CHECK);
	intel_context_put(ce);
	return rq;
}

/*
 * With timeslicing off, a spinner of a context in hi (gpu.priority 5)
 * must start while a spinner of a context in lo (-5), both at context
 * priority 0, keeps spinning: only the cgroup priority can preempt it.
 */
static int live_gpucg_priority(void *arg)
{
	struct drm_i915_private *i915 = arg;
	struct i915_gem_context *ctx_lo, *ctx_hi;
	struct igt_spinner spin_lo, spin_hi;
	struct intel_engine_cs *engine;
	struct i915_request *rq;
	unsigned long timeslice;
	int err = 0;

	ctx_lo = live_context_of(i915, "lo", 0);
	if (IS_ERR(ctx_lo))
		return PTR_ERR(ctx_lo);
	ctx_hi = live_context_of(i915, "hi", 0);
	if (IS_ERR(ctx_hi)) {
		kernel_context_close(ctx_lo);
		return PTR_ERR(ctx_hi);
	}

	for_each_uabi_engine(engine, i915) {
		if (!intel_engine_has_preemption(engine) ||
		    engine->legacy_idx >= I915_NUM_ENGINES)
			continue;
		err = igt_spinner_init(&spin_lo, engine->gt);
		if (err)
			break;
		err = igt_spinner_init(&spin_hi, engine->gt);
		if (err) {
			igt_spinner_fini(&spin_lo);
			break;
		}
		timeslice = xchg(&engine->props.timeslice_duration_ms, 0);

		rq = live_spinner(&spin_lo, ctx_lo, engine);
		if (IS_ERR(rq)) {
			err = PTR_ERR(rq);
			goto end;
		}
		i915_request_add(rq);
		if (!igt_wait_for_spinner(&spin_lo, rq)) {
			pr_err("%s: lo spinner did not start\n", engine->name);
			err = -EIO;
			goto end;
		}
		rq = live_spinner(&spin_hi, ctx_hi, engine);
		if (IS_ERR(rq)) {
			err = PTR_ERR(rq);
			goto end;
		}
		i915_request_add(rq);
		if (!igt_wait_for_spinner(&spin_hi, rq)) {
			pr_err("%s: hi did not preempt lo\n", engine->name);
			err = -EINVAL;
		}
end:
		igt_spinner_end(&spin_hi);
		igt_spinner_end(&spin_lo);
		engine->props.timeslice_duration_ms = timeslice;
		if (igt_flush_test(i915) && !err)
			err = -EIO;
		igt_spinner_fini(&spin_hi);
		igt_spinner_fini(&spin_lo);
		if (err)
			break;
	}
	kernel_context_close(ctx_hi);
	kernel_context_close(ctx_lo);
	return err;
}

/*
 * Spinners of a context in w1 (weight 100) and one in w3 (300) share the
 * first engine that timeslices for a second: w3's must get about three
 * times w1's runtime. Under GuC the quanta must have been sent without
 * error in the same ratio.
 */
static int live_gpucg_weights(void *arg)
{
	struct drm_i915_private *i915 = arg;
	struct i915_gem_context *ctx[2] = {};
	struct igt_spinner spin[2];
	struct intel_context *ce[2] = {};
	struct intel_engine_cs *engine;
	struct i915_request *rq;
	u64 runtime[2];
	int w, err = 0;

	for_each_uabi_engine(engine, i915)
		if (intel_engine_has_timeslices(engine) &&
		    engine->legacy_idx < I915_NUM_ENGINES)
			break;
	if (!engine)
		return 0;

	for (w = 0; w < 2; w++) {
		ctx[w] = live_context_of(i915, w ? "w3" : "w1", 0);
		if (IS_ERR(ctx[w])) {
			err = PTR_ERR(ctx[w]);
			ctx[w] = NULL;
			goto out;
		}
		ce[w] = i915_gem_context_get_engine(ctx[w], engine->legacy_idx);
		if (IS_ERR(ce[w])) {
			err = PTR_ERR(ce[w]);
			ce[w] = NULL;
			goto out;
		}
	}
	for (w = 0; w < 2; w++) {
		if (igt_spinner_init(&spin[w], engine->gt)) {
			err = -ENOMEM;
			while (w--)
				igt_spinner_fini(&spin[w]);
			goto out;
		}
	}
	for (w = 0; w < 2; w++) {
		rq = igt_spinner_create_request(&spin[w], ce[w], MI_ARB_CHECK);
		if (IS_ERR(rq)) {
			err = PTR_ERR(rq);
			goto end;
		}
		i915_request_add(rq);
	}
	runtime[0] = intel_context_get_total_runtime_ns(ce[0]);
	runtime[1] = intel_context_get_total_runtime_ns(ce[1]);
	msleep(1000);
	runtime[0] = intel_context_get_total_runtime_ns(ce[0]) - runtime[0];
	runtime[1] = intel_context_get_total_runtime_ns(ce[1]) - runtime[1];

	pr_info("i915_gpucg: %s runtime w1 %llu ns w3 %llu ns quantum w1 %u us w3 %u us\n",
		engine->name, runtime[0], runtime[1],
		ce[0]->gpucg_quantum_us, ce[1]->gpucg_quantum_us);
	if (runtime[1] < 2 * runtime[0] || runtime[1] > 4 * runtime[0]) {
		pr_err("%s: w3 ran %llu ns to w1's %llu, want about 3:1\n",
		       engine->name, runtime[1], runtime[0]);
		err = -EINVAL;
	}
	if (intel_engine_uses_guc(engine) &&
	    ce[1]->gpucg_quantum_us != 3 * ce[0]->gpucg_quantum_us) {
		pr_err("%s: GuC quanta %u and %u us, want 1:3\n", engine->name,
		       ce[0]->gpucg_quantum_us, ce[1]->gpucg_quantum_us);
		err = -EINVAL;
	}
end:
	for (w = 0; w < 2; w++) {
		igt_spinner_end(&spin[w]);
		igt_spinner_fini(&spin[w]);
	}
	if (igt_flush_test(i915) && !err)
		err = -EIO;
out:
	for (w = 0; w < 2; w++) {
		if (ce[w])
			intel_context_put(ce[w]);
		if (ctx[w])
			kernel_context_close(ctx[w]);
	}
	return err;
}

int i915_gpucg_live_selftests(struct drm_i915_private *i915)
{
	static const struct i915_subtest tests[] = {
		SUBTEST(live_gpucg_priority),
		SUBTEST(live_gpucg_weights),
	};

	if (!i915_selftest.gpucg) {
		pr_info("i915_gpucg: no i915.st_gpucg: skipped\n");
		return 0;
	}
	if (!i915->drm.gpucg) {
		pr_err("i915_gpucg: the device is not under the gpu cgroup controller\n");
		return -ENODEV;
	}
	if (intel_gt_is_wedged(to_gt(i915)))
		return 0;
	return i915_live_subtests(tests, i915);
}
