// SPDX-License-Identifier: MIT
/*
 * i915 and the gpu cgroup controller (kernel/cgroup/gpu_sched.c).
 *
 * i915 keeps its own queue of requests (execlists: one list per priority
 * level per engine, drained highest level first, with timeslicing among
 * the requests of one level) or hands contexts to the GuC firmware, which
 * schedules them by a priority band. The controller decides who deserves
 * the GPU; this file is where i915 asks it.
 *
 * Priority. A request's priority composes the effective gpu.priority of
 * its context's cgroup (major) with the context's own priority (minor):
 * i915_gpucg_priority(), applied by i915_gpucg_sched_attr() to every
 * request a context submits (eb_request_add() and i915_request_add()). So
 * a higher cgroup priority runs first and preempts, the contexts of one
 * cgroup keep their relative order, and a cgroup at priority 0 changes
 * nothing. The kernel's own levels (I915_PRIORITY_MIN, _MAX, _HEARTBEAT
 * and _DISPLAY) lie outside every composition. Priority inheritance
 * (i915_schedule()) works on the composed values: a waiter of a higher
 * cgroup lifts the requests it waits for in a lower one, whose GPU time
 * still goes to their own context and so to their own cgroup. The band
 * the GuC gets for a context comes from the same composed priority. The
 * cgroup's priority is read when the request is added: a later change of
 * gpu.priority applies to later requests.
 *
 * Time. Each context of a client is a queue of the controller on its
 * uabi engine class: one controller engine per class, because userspace
 * (and fdinfo's drm-engine-<class>) sees the engines of a class as one. The
 * runtime i915 keeps per context (the CTX_TIMESTAMP of the context image,
 * read at every context switch under execlists and when GuC busyness is
 * sampled, lrc_update_runtime()) is charged as it grows, so a cgroup's
 * gpu.stat is the sum of its clients' fdinfo engine times. A queue is
 * active from the context's first outstanding request to the retirement
 * of its last (intel_context_enter() and intel_context_exit()), so a
 * context that idled gets no credit for it.
 *
 * Weights (execlists). Inside a priority level, the dequeue serves the
 * contexts in the controller's order (gpucg_queue_before()):
 * i915_gpucg_order_level() brings the requests of the first context by
 * that order, then of the second (one per ELSP port), to the front of the
 * level, each context's requests in ring order and never ahead of a
 * request they wait for on the same engine. Expiry of the timeslice
 * (defer_active()) makes the engine choose again, so shares converge at
 * the resolution of one timeslice (1 ms by default). The context image
 * tells a context's runtime only when the context is switched out, and a
 * context that wins the next slice too is not switched out at all (a lite
 * restore): so every dequeue charges the running context the time since
 * it started or was last charged, in advance (i915_gpucg_context_running()),
 * and its runtime, when it comes, first pays off that advance. Gap:
 * requests to a virtual engine are offered to each sibling before its own
 * queue, by priority alone, and are not ordered by cgroup.
 *
 * Caps (execlists). gpu.max holds a throttled cgroup's work back: the
 * dequeue asks i915_gpucg_context_throttled() of each context whose
 * requests it is about to submit, and puts the requests of a throttled
 * one on the engine's hold list, as it does a hung context's while its
 * state is captured (__execlists_hold(): the request and what waits on it
 * on the engine, and every later request of the context), until a timer
 * at the time the controller gives brings them back (at most a period,
 * rounded up to a jiffy). A context a cap acts on gets one request at a
 * time on the hardware (no request merged behind a running one of its
 * own), so that what runs past the budget is that one request, carried
 * as the next periods' debt (GPUCG_CAP_DEBT periods at most): the price
 * is a context switch between its requests. A request the hardware has
 * started (taken back by a timeslice) is never held: it could complete on
 * hold. A request a sibling of a virtual engine could take is left where
 * it is while its context is throttled, and the sibling takes the next
 * virtual engine's; a virtual engine's request may still be merged behind
 * one of its own on the hardware (not one at a time). A class
 * enforces gpu.max only if every engine of the device submits through
 * execlists (I915_ENGINE_HOLDS_THROTTLED): the GuC schedules by itself,
 * and a write of a cap for such a device fails with EOPNOTSUPP.
 *
 * Weights (GuC). The firmware runs the contexts of a priority band round
 * robin, each for up to its execution quantum: a worker in
 * intel_guc_submission.c gives each context a quantum that follows its
 * share, i915_gpucg_quantum_us(), at most once per
 * I915_GPUCG_QUANTUM_PERIOD_MS while contexts submit. Shares then hold
 * between contexts that keep the engine busy, within the clamp of the
 * quantum (16:1), and converge at the period of the worker. The band comes
 * from the composed priority, as for any request.
 *
 * Locking: the controller's engine lock is a leaf, taken inside
 * sched_engine->lock (dequeue), the GuC timestamp lock (sampling) and the
 * timeline mutex (enter and exit). Queue setup may sleep and runs where
 * contexts are bound to their GEM context.
 */

#include <linux/cgroup_gpu.h>
#include <linux/minmax.h>

#include <drm/drm_file.h>
#include <drm/drm_print.h>

#include "gem/i915_gem_context.h"
#include "gt/intel_context.h"
#include "gt/intel_engine_types.h"
#include "gt/intel_gt.h"

#include "i915_drv.h"
#include "i915_gpucg.h"
#include "i915_request.h"
#include "i915_scheduler.h"

/* The ELSP ports a dequeue fills: the contexts worth ordering per level. */
#define I915_GPUCG_ORDERED	2

/* Whether every engine of @i915 holds throttled contexts back (execlists) */
static bool i915_gpucg_holds(struct drm_i915_private *i915)
{
	struct intel_engine_cs *engine;
	enum intel_engine_id id;
	struct intel_gt *gt;
	unsigned int i;
	bool any = false;

	for_each_gt(gt, i915, i) {
		for_each_engine(engine, gt, id) {
			if (!(engine->flags & I915_ENGINE_HOLDS_THROTTLED))
				return false;
			any = true;
		}
	}
	return any;
}

/**
 * i915_gpucg_init() - one controller engine per uabi engine class
 * @i915: the device; its DRM device's gpucg handle may be NULL (no
 *	  render node, or no controller), which makes every call a no-op
 *
 * If an engine cannot be had, the device's contexts are not queues: the
 * controller then neither orders nor accounts them, and says so once. The
 * engines enforce gpu.max if the device's engines hold throttled contexts
 * back (execlists), so call it once the engines are set up.
 *
 * Context: process context, may sleep.
 */
void i915_gpucg_init(struct drm_i915_private *i915)
{
	bool holds = i915_gpucg_holds(i915);
	struct gpucg_engine *engine;
	unsigned int class;

	for (class = 0; class < ARRAY_SIZE(i915->gpucg); class++) {
		engine = gpucg_engine_create(i915->drm.gpucg, true);
		if (IS_ERR(engine)) {
			drm_warn(&i915->drm,
				 "gpu cgroup: no engines (%pe): contexts not scheduled by cgroup\n",
				 engine);
			i915_gpucg_fini(i915);
			return;
		}
		if (holds)
			gpucg_engine_enforce_max(engine);
		i915->gpucg[class] = engine;
	}
}

/**
 * i915_gpucg_fini() - remove the controller engines
 * @i915: the device, once every context has been freed
 *
 * Context: process context, may sleep.
 */
void i915_gpucg_fini(struct drm_i915_private *i915)
{
	unsigned int class;

	for (class = 0; class < ARRAY_SIZE(i915->gpucg); class++) {
		gpucg_engine_destroy(i915->gpucg[class]);
		i915->gpucg[class] = NULL;
	}
}

/**
 * i915_gpucg_sched_attr() - the scheduling attributes of a context's request
 * @ctx: the GEM context submitting it
 * @attr: filled in: the context's, with the composed priority
 *
 * Context: any context.
 */
void i915_gpucg_sched_attr(const struct i915_gem_context *ctx,
			   struct i915_sched_attr *attr)
{
	*attr = ctx->sched;
	attr->priority = i915_gpucg_priority(gpucg_client_priority(ctx->gpucg),
					     ctx->sched.priority);
}

/**
 * i915_gpucg_context_init() - make a context a queue of its client
 * @ce: the context, not yet in use
 * @ctx: the GEM context it belongs to; without a client (kernel contexts)
 *	 @ce is not a queue
 *
 * Replaces the queue @ce had before.
 *
 * Context: process context, may sleep.
 * Return: 0 or -ENOMEM.
 */
int i915_gpucg_context_init(struct intel_context *ce,
			    const struct i915_gem_context *ctx)
{
	struct drm_i915_private *i915 = ce->engine->i915;
	unsigned int class = ce->engine->uabi_class;

	gpucg_queue_fini(&ce->gpucg);
	if (!ctx->gpucg || class >= ARRAY_SIZE(i915->gpucg))
		return 0;
	/* priorities are kept apart by i915's own levels: none for the core */
	return gpucg_queue_init(&ce->gpucg, i915->gpucg[class], ctx->gpucg, 0);
}

/**
 * i915_gpucg_context_fini() - a context is freed
 * @ce: the context
 *
 * Context: any context.
 */
void i915_gpucg_context_fini(struct intel_context *ce)
{
	gpucg_queue_fini(&ce->gpucg);
}

static bool i915_gpucg_context_busy(struct gpucg_queue *q)
{
	return READ_ONCE(container_of(q, struct intel_context, gpucg)->active_count);
}

/**
 * i915_gpucg_context_sync() - a context got its first request or retired
 *			       its last
 * @ce: the context
 *
 * Context: under the context's timeline mutex.
 */
void i915_gpucg_context_sync(struct intel_context *ce)
{
	gpucg_queue_sync(&ce->gpucg, i915_gpucg_context_busy);
}

/**
 * i915_gpucg_context_charge() - a context's runtime grew
 * @ce: the context
 * @dt: by how much, in the unit of its runtime statistics (CS timestamp
 *	cycles if its ops say COPS_RUNTIME_CYCLES, else ns)
 *
 * Context: any context.
 */
void i915_gpucg_context_charge(struct intel_context *ce, u32 dt)
{
	u64 ns = dt, paid;

	if (ce->ops->flags & COPS_RUNTIME_CYCLES)
		ns *= ce->engine->gt->clock_period_ns;
	paid = min(ns, ce->gpucg_advance_ns);
	ce->gpucg_advance_ns -= paid;
	gpucg_queue_charge(&ce->gpucg, ns - paid);
}

/**
 * i915_gpucg_context_running() - charge the running context in advance
 * @ce: the context the engine runs (the first of the execlists ports)
 *
 * Charges the wall time since @ce started running, or since its last
 * advance, so that its place in the controller's order moves while it
 * runs; i915_gpucg_context_charge() deducts the advance from the runtime
 * read at the next switch. A context can so be charged up to one slice too
 * much or too little until it next runs.
 *
 * Context: in the engine's submission tasklet, under sched_engine->lock
 * (serialized with process_csb(), which charges the runtime).
 */
void i915_gpucg_context_running(struct intel_context *ce)
{
	u64 start = READ_ONCE(ce->stats.active), now;

	if (!ce->gpucg.engine || !start)
		return;
	now = intel_context_clock();
	start = max(start, ce->gpucg_since_ns);
	if (now <= start)
		return;
	ce->gpucg_advance_ns += now - start;
	ce->gpucg_since_ns = now;
	gpucg_queue_charge(&ce->gpucg, now - start);
}

/**
 * i915_gpucg_context_throttled() - whether gpu.max holds a context back
 * @ce: the context
 * @retry_ns: set, if it does, to the time after which to ask again, else
 *	      to 0
 * @capped: if not NULL, set to whether a cap acts on the context at all:
 *	    the dequeue then gives it one request at a time
 *
 * Never for a context that is not a queue (the kernel's), nor on a device
 * whose engines do not enforce caps.
 *
 * Context: any context; under sched_engine->lock in the dequeue.
 * Return: whether the context's cgroup, or one above it, used its cap on
 * the context's engine class for the current period.
 */
bool i915_gpucg_context_throttled(struct intel_context *ce, u64 *retry_ns,
				  bool *capped)
{
	return gpucg_queue_throttled(&ce->gpucg, retry_ns, capped);
}

/* Is @rq one of the requests from the front of the level up to @last? */
static bool i915_gpucg_placed(const struct i915_request *rq,
			      const struct list_head *head,
			      const struct list_head *last)
{
	const struct list_head *pos;

	for (pos = head; pos != last; pos = pos->next)
		if (pos->next == &rq->sched.link)
			return true;
	return false;
}

/*
 * Can @rq go next after @last? Not while a request it waits for on the
 * same engine is still queued behind @last, or on another level: the
 * engine runs what it is given in order, and a waiter on the same engine
 * is submitted after its signaler was submitted, not after it completed.
 */
static bool i915_gpucg_can_place(struct i915_request *rq,
				 const struct list_head *head,
				 const struct list_head *last)
{
	struct i915_dependency *p;
	bool ret = true;

	rcu_read_lock();
	for_each_signaler(p, rq) {
		struct i915_request *s =
			container_of(p->signaler, typeof(*s), sched);

		if (p->flags & I915_DEPENDENCY_WEAK || s->engine != rq->engine ||
		    !i915_request_in_priority_queue(s))
			continue;
		if (!i915_gpucg_placed(s, head, last)) {
			ret = false;
			break;
		}
	}
	rcu_read_unlock();
	return ret;
}

/* Does @a's context go before @b's? Contexts without a queue keep FIFO. */
static bool i915_gpucg_before(const struct i915_request *a,
			      const struct i915_request *b)
{
	return a->context != b->context &&
	       gpucg_queue_before(&a->context->gpucg, &b->context->gpucg);
}

/**
 * i915_gpucg_order_level() - order a priority level for the dequeue
 * @pl: the level about to be drained
 *
 * Brings the placeable requests of the context the controller puts first
 * to the front of @pl, in their order, then those of the second; the rest
 * keep their order behind them. See the top of this file.
 *
 * Context: under the engine's sched_engine->lock.
 */
void i915_gpucg_order_level(struct i915_priolist *pl)
{
	struct list_head *head = &pl->requests, *last = head, *pos, *next;
	struct i915_request *rq, *best;
	struct intel_context *ce;
	int n;

	for (n = 0; n < I915_GPUCG_ORDERED; n++) {
		best = NULL;
		for (pos = last->next; pos != head; pos = pos->next) {
			rq = list_entry(pos, typeof(*rq), sched.link);
			if (best && !i915_gpucg_before(rq, best))
				continue;
			if (i915_gpucg_can_place(rq, head, last))
				best = rq;
		}
		if (!best)
			return;

		ce = best->context;
		list_move(&best->sched.link, last);
		last = &best->sched.link;
		for (pos = last->next; pos != head; pos = next) {
			next = pos->next;
			rq = list_entry(pos, typeof(*rq), sched.link);
			if (rq->context == ce &&
			    i915_gpucg_can_place(rq, head, last)) {
				list_move(pos, last);
				last = pos;
			}
		}
	}
}

/**
 * i915_gpucg_quantum_us() - a GuC context's execution quantum
 * @share: the context's share of its engine class, in 1/65536
 *	   (gpucg_queue_share()); 0 if it has none now
 * @sharing: how many contexts have a share of the class
 * @timeslice_us: the engine's timeslice, the quantum without the
 *		  controller; 0 turns timeslicing off
 *
 * The timeslice scaled by the context's share, within 4x either way
 * (gpucg_share_quantum()).
 *
 * Context: any context.
 * Return: the quantum in microseconds.
 */
u32 i915_gpucg_quantum_us(u32 share, unsigned int sharing, u32 timeslice_us)
{
	return gpucg_share_quantum(share, sharing, timeslice_us);
}

#if IS_ENABLED(CONFIG_DRM_I915_SELFTEST)
#include "selftests/i915_gpucg.c"
#endif
