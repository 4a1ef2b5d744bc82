// SPDX-License-Identifier: GPL-2.0
/*
 * KUnit tests of the gpu cgroup controller's scheduling core, built into
 * gpu_sched.c (CONFIG_CGROUP_GPU_KUNIT_TEST) so that they see its state.
 *
 * Each test drives the core as a driver does (queues made ready, picked,
 * started and charged) on a device and engines of its own, which no
 * interface file shows (the device is never published), for clients in
 * cgroups made for the test alone (gpucg_kunit_cgroup_new(): a &struct gpucg
 * that belongs to no hierarchy, its css unreferenced, as the root's). The
 * core's clock is the test's (gpucg_now(), a KUnit static stub), and a
 * test's engine is simulated by the test (gst_run()): every figure is
 * exact and the same on every run, on UML as in a VM.
 *
 * The promises of the essay at the top of gpu_sched.c that a test asserts
 * name it. What a test sets up is torn down by the suite's exit, in order:
 * queues, clients, engines, the device; the cgroups go last, with the
 * test's memory.
 */

#include <linux/debug_locks.h>
#include <linux/preempt.h>

#include <kunit/test.h>

#define GST_MAX_ENGINES	4
#define GST_MAX_QUEUES	16

/* A queue of the test's: ready when the test says so. */
struct gst_queue {
	struct gpucg_queue	q;
	struct gpucg_client	*client;
	bool			ready;
};

/* One test's world; torn down by gst_exit(). */
struct gst {
	struct kunit		*test;
	u64			now;
	struct gpucg_device	*dev;
	struct gpucg_engine	*engines[GST_MAX_ENGINES];
	unsigned int		nr_engines;
	struct gst_queue	*queues[GST_MAX_QUEUES];
	unsigned int		nr_queues;
};

static u64 gst_now(void)
{
	struct gst *w = kunit_get_current_test()->priv;

	return w->now;
}

static int gst_init(struct kunit *test)
{
	struct gst *w = kunit_kzalloc(test, sizeof(*w), GFP_KERNEL);

	KUNIT_ASSERT_NOT_NULL(test, w);
	w->test = test;
	w->now = NSEC_PER_SEC;
	test->priv = w;
	/* an unpublished device number of no real device */
	w->dev = gpucg_register_device(MKDEV(0, 0));
	KUNIT_ASSERT_NOT_ERR_OR_NULL(test, w->dev);
	kunit_activate_static_stub(test, gpucg_now, gst_now);
	return 0;
}

static void gst_exit(struct kunit *test)
{
	struct gst *w = test->priv;
	unsigned int i;

	for (i = 0; i < w->nr_queues; i++) {
		gpucg_queue_fini(&w->queues[i]->q);
		gpucg_client_put(w->queues[i]->client);
	}
	for (i = 0; i < w->nr_engines; i++)
		gpucg_engine_destroy(w->engines[i]);
	gpucg_put_device(w->dev);
	w->nr_queues = 0;
	w->nr_engines = 0;
	w->dev = NULL;
}

KUNIT_DEFINE_ACTION_WRAPPER(gst_cgroup_free, gpucg_kunit_cgroup_free,
			    struct gpucg *);

/*
 * A cgroup of the test's, under @parent (NULL: the root). Freed at the
 * test's end, after gst_exit() has released the device.
 */
static struct gpucg *gst_cgroup(struct gst *w, struct gpucg *parent,
				u32 weight, int prio)
{
	struct gpucg *cg = gpucg_kunit_cgroup_new(parent, weight, prio);

	KUNIT_ASSERT_NOT_NULL(w->test, cg);
	KUNIT_ASSERT_EQ(w->test, kunit_add_action_or_reset(w->test, gst_cgroup_free, cg), 0);
	return cg;
}

static struct gpucg_engine *gst_engine(struct gst *w)
{
	struct gpucg_engine *engine = gpucg_engine_create(w->dev, true);

	KUNIT_ASSERT_NOT_ERR_OR_NULL(w->test, engine);
	KUNIT_ASSERT_LT(w->test, w->nr_engines, GST_MAX_ENGINES);
	w->engines[w->nr_engines++] = engine;
	return engine;
}

/* A queue on @engine of a client owned by @cg; NULL: a kernel queue. */
static struct gst_queue *gst_queue(struct gst *w, struct gpucg_engine *engine,
				   struct gpucg *cg)
{
	struct gst_queue *tq = kunit_kzalloc(w->test, sizeof(*tq), GFP_KERNEL);

	KUNIT_ASSERT_NOT_NULL(w->test, tq);
	KUNIT_ASSERT_LT(w->test, w->nr_queues, GST_MAX_QUEUES);
	if (cg) {
		tq->client = gpucg_client_new(w->dev, cg);
		KUNIT_ASSERT_NOT_ERR_OR_NULL(w->test, tq->client);
	}
	KUNIT_ASSERT_EQ(w->test, gpucg_queue_init(&tq->q, engine, tq->client, 0), 0);
	w->queues[w->nr_queues++] = tq;
	return tq;
}

static bool gst_ready(struct gpucg_queue *q)
{
	return container_of(q, struct gst_queue, q)->ready;
}

static void gst_sync(struct gst_queue *tq, bool ready)
{
	tq->ready = ready;
	gpucg_queue_sync(&tq->q, gst_ready);
}

static enum gpucg_take gst_take(struct gpucg_queue *q, void *arg)
{
	return gst_ready(q) ? GPUCG_TAKE : GPUCG_SKIP;
}

/*
 * Runs the one job of the ready @tq, @ns long, as drm_sched does: the
 * queue is empty once the job starts, and the job is charged when it ends.
 */
static void gst_job(struct gst *w, struct gst_queue *tq, u64 ns)
{
	struct gpucg_ticket t;

	gpucg_queue_start(&tq->q, &t);
	gst_sync(tq, false);
	w->now += ns;
	gpucg_charge(tq->q.engine, &t, ns);
}

/*
 * Engine ids are allocated and freed (promise 5): an engine made and
 * destroyed again and again, as nouveau, panthor, imagination and xe do per
 * user queue, takes back a free id rather than counting up to a wrap that
 * would alias a live engine, and a cgroup's state under a freed id is gone.
 */
static void gpucg_test_engine_ids(struct kunit *test)
{
	struct gst *w = test->priv;
	struct gpucg *cg = gst_cgroup(w, NULL, CGROUP_WEIGHT_DFL, 0);
	struct gpucg_engine *live = gst_engine(w), *e;
	struct gpucg_entity *ent;
	unsigned int i;
	u32 id = U32_MAX;

	mutex_lock(&gpucg_mutex);
	ent = gpucg_entity_get(cg, live);
	mutex_unlock(&gpucg_mutex);
	KUNIT_ASSERT_NOT_ERR_OR_NULL(test, ent);
	for (i = 0; i < 1000; i++) {
		e = gpucg_engine_create(w->dev, true);
		KUNIT_ASSERT_NOT_ERR_OR_NULL(test, e);
		KUNIT_EXPECT_NE(test, e->id, live->id);
		/* neither the live engine's entity nor the last one's */
		KUNIT_EXPECT_NULL(test, gpucg_entity_find(cg, e));
		if (i)
			KUNIT_EXPECT_EQ(test, e->id, id);
		id = e->id;
		mutex_lock(&gpucg_mutex);
		KUNIT_EXPECT_NOT_ERR_OR_NULL(test, gpucg_entity_get(cg, e));
		mutex_unlock(&gpucg_mutex);
		gpucg_engine_destroy(e);
	}
	KUNIT_EXPECT_LT(test, id, 2U);
	KUNIT_EXPECT_PTR_EQ(test, gpucg_entity_find(cg, live), ent);
}

/*
 * A device released while an engine of it is still there (a per-queue
 * scheduler outliving its device's release) stays, with its cgroups'
 * state, until that engine is destroyed (promise 5).
 */
static void gpucg_test_device_outlives_release(struct kunit *test)
{
	struct gst *w = test->priv;
	struct gpucg *cg = gst_cgroup(w, NULL, CGROUP_WEIGHT_DFL, 0);
	struct gpucg_engine *engine = gst_engine(w);
	struct gst_queue *tq = gst_queue(w, engine, cg);
	struct gpucg_queue *q;
	u32 id = w->dev->id;
	u64 retry;

	/* the exit puts no device the test released, and destroys the engine */
	gpucg_put_device(w->dev);
	w->dev = NULL;
	/* the cgroup's state is there for the engine's queue */
	KUNIT_ASSERT_NOT_NULL(test, xa_load(&cg->pools, id));
	gst_sync(tq, true);
	q = gpucg_queue_pick(engine, gst_take, NULL, &retry);
	KUNIT_EXPECT_PTR_EQ(test, q, &tq->q);
	gst_sync(tq, false);
	gst_exit(test);
	/* the last engine took the device's state along */
	KUNIT_EXPECT_NULL(test, xa_load(&cg->pools, id));
}

/*
 * Kernel work never arms anticipation and never moves a cgroup's vtime
 * (DESIGN's kernel-work rule): after a root cgroup's client and a cgroup's
 * client have used the engine, kernel jobs leave the root's and the
 * cgroup's vtimes and the list of entities expected back as they were,
 * and their time shows in the device's total.
 */
static void gpucg_test_kernel_jobs(struct kunit *test)
{
	struct gst *w = test->priv;
	struct gpucg *cg = gst_cgroup(w, NULL, CGROUP_WEIGHT_DFL, 0);
	struct gpucg_engine *engine = gst_engine(w);
	struct gst_queue *user = gst_queue(w, engine, cg);
	struct gst_queue *root = gst_queue(w, engine, &gpucg_root);
	struct gst_queue *kern = gst_queue(w, engine, NULL);
	struct gpucg_entity *ent = gpucg_entity_find(cg, engine);
	u64 vtime, root_vtime, usage;
	struct gpucg_ticket t;
	unsigned int i;

	/* both clients have run, and their cgroups were expected back */
	gst_sync(user, true);
	gst_job(w, user, 2 * NSEC_PER_MSEC);
	gst_sync(root, true);
	gst_job(w, root, 2 * NSEC_PER_MSEC);
	KUNIT_ASSERT_FALSE(test, list_empty(&engine->expected));
	w->now += NSEC_PER_SEC;	/* both are long overdue */
	spin_lock_irq(&engine->lock);
	gpucg_hold(engine, &user->q, w->now);	/* drops the overdue */
	spin_unlock_irq(&engine->lock);
	KUNIT_ASSERT_TRUE(test, list_empty(&engine->expected));
	vtime = ent->vtime;
	root_vtime = engine->root.vtime;
	usage = atomic64_read(&w->dev->root.usage_ns);

	for (i = 0; i < 10; i++) {
		gst_sync(kern, true);
		gst_job(w, kern, 3 * NSEC_PER_MSEC);
		/* and a kernel job that the driver does not queue */
		gpucg_kernel_start(engine, &t);
		w->now += NSEC_PER_MSEC;
		gpucg_charge(engine, &t, NSEC_PER_MSEC);
	}
	KUNIT_EXPECT_TRUE(test, list_empty(&engine->expected));
	KUNIT_EXPECT_EQ(test, engine->nr_expected, 0U);
	KUNIT_EXPECT_EQ(test, ent->vtime, vtime);
	KUNIT_EXPECT_EQ(test, engine->root.vtime, root_vtime);
	KUNIT_EXPECT_EQ(test, engine->tickets, 0U);
	KUNIT_EXPECT_EQ(test, atomic64_read(&w->dev->root.usage_ns) - usage,
			10 * 4 * NSEC_PER_MSEC);
}

/* A client of gst_run(): deep (always ready) or one job at a time. */
struct gst_client {
	struct gst_queue	*tq;
	u64			job_ns;
	u64			think_ns[2];	/* alternately; shallow only */
	bool			deep;
	unsigned int		jobs;
	u64			ready_at;	/* shallow: next job's arrival */
	u64			busy_ns;
};

/* What gst_run() saw of the engine. */
struct gst_figures {
	u64	idle_max_ns;	/* longest idle stretch with work ready */
	u64	idle_ns;	/* all of them */
};

/*
 * Simulates an engine that runs one job at a time for @clients, from the
 * test's now for @ns: it picks whenever it is free, and when the pick holds
 * it for an entity it expects, sleeps until the retry or an arrival.
 */
static void gst_run(struct gst *w, struct gpucg_engine *engine,
		    struct gst_client *clients, unsigned int n, u64 ns,
		    struct gst_figures *f)
{
	u64 until = w->now + ns, end = 0, next, retry, idle_from = 0;
	struct gst_client *run = NULL, *c;
	struct gpucg_ticket t;
	struct gpucg_queue *q;
	unsigned int i;

	memset(f, 0, sizeof(*f));
	for (i = 0; i < n; i++)
		clients[i].ready_at = w->now;
	while (w->now < until) {
		for (i = 0; i < n; i++) {
			c = &clients[i];
			if (c != run && !c->tq->ready && c->ready_at <= w->now)
				gst_sync(c->tq, true);
		}
		retry = 0;
		if (!run) {
			q = gpucg_queue_pick(engine, gst_take, NULL, &retry);
			for (i = 0; q && i < n; i++)
				if (&clients[i].tq->q == q)
					run = &clients[i];
			if (run) {
				if (idle_from) {
					f->idle_ns += w->now - idle_from;
					f->idle_max_ns = max(f->idle_max_ns,
							     w->now - idle_from);
					idle_from = 0;
				}
				gpucg_queue_start(q, &t);
				end = w->now + run->job_ns;
				if (!run->deep)
					gst_sync(run->tq, false);
				continue;
			}
			if (!idle_from) {
				for (i = 0; i < n; i++)
					if (clients[i].tq->ready)
						idle_from = w->now;
			}
		}
		next = until;
		if (run)
			next = min(next, end);
		if (retry)
			next = min(next, w->now + retry);
		for (i = 0; i < n; i++)
			if (&clients[i] != run && !clients[i].tq->ready)
				next = max(w->now, min(next, clients[i].ready_at));
		w->now = next;
		if (run && w->now == end) {
			gpucg_charge(engine, &t, run->job_ns);
			run->busy_ns += run->job_ns;
			if (!run->deep)
				run->ready_at = w->now +
					run->think_ns[run->jobs % 2];
			run->jobs++;
			run = NULL;
		}
	}
	if (idle_from) {	/* idle up to the end: an engine that stopped */
		f->idle_ns += w->now - idle_from;
		f->idle_max_ns = max(f->idle_max_ns, w->now - idle_from);
	}
	if (run)	/* the job in flight ends at once */
		gpucg_charge(engine, &t, run->job_ns);
}

/*
 * Kernel queues take turns with the cgroups by vtime, as one more child of
 * the top at the default weight: not strictly first (a driver's page-table
 * updates that users feed would run ahead of every cgroup), at the share
 * the weights give.
 */
static void gpucg_test_kernel_share(struct kunit *test)
{
	struct gst *w = test->priv;
	struct gpucg_engine *engine = gst_engine(w);
	struct gpucg *cg = gst_cgroup(w, NULL, CGROUP_WEIGHT_DFL, 0);
	struct gpucg *heavy = gst_cgroup(w, NULL, 300, 0);
	struct gst_client c[3] = {
		{ .tq = gst_queue(w, engine, NULL), .job_ns = 2 * NSEC_PER_MSEC,
		  .deep = true },
		{ .tq = gst_queue(w, engine, cg), .job_ns = 2 * NSEC_PER_MSEC,
		  .deep = true },
		{ .tq = gst_queue(w, engine, heavy), .job_ns = 2 * NSEC_PER_MSEC,
		  .deep = true },
	};
	u64 all = 10 * NSEC_PER_SEC;
	struct gst_figures f;

	gst_run(w, engine, c, 3, all, &f);
	kunit_info(test, "kernel, weight 100, weight 300: %llu%%, %llu%%, %llu%%\n",
		   c[0].busy_ns * 100 / all, c[1].busy_ns * 100 / all,
		   c[2].busy_ns * 100 / all);
	KUNIT_EXPECT_EQ(test, c[0].busy_ns * 100 / all, 20ULL);
	KUNIT_EXPECT_EQ(test, c[1].busy_ns * 100 / all, 20ULL);
	KUNIT_EXPECT_EQ(test, c[2].busy_ns * 100 / all, 60ULL);
	/* kernel work is never expected back */
	KUNIT_EXPECT_TRUE(test, list_empty(&engine->kernel.expect_node));
}

/*
 * gpu.max on an engine that enforces it: a client capped at 30 ms of every
 * 100 ms, alone or beside an uncapped deep client, deep with jobs of 2 ms
 * or of 7 ms (which overrun the budget: the time over is debt), or one job
 * at a time with or without think time, gets min(its demand, 30%) of the
 * engine over 10 s, within a point, and the uncapped one at least 97% of
 * the rest; on an engine whose driver does not enforce it, the cap changes
 * nothing.
 */
struct gst_max_case {
	const char	*name;
	u64		job_ms;
	bool		deep;
	u64		think_ms;	/* after each job, if not deep */
	bool		beside;
	bool		enforced;
	u64		want;		/* its part of the engine, in 1/1000 */
};

static const struct gst_max_case gst_max_cases[] = {
	{ "alone, 2 ms jobs", 2, true, 0, false, true, 300 },
	{ "beside an uncapped client, 2 ms jobs", 2, true, 0, true, true, 300 },
	{ "alone, 7 ms jobs", 7, true, 0, false, true, 300 },
	{ "one job at a time", 2, false, 0, false, true, 300 },
	{ "one job at a time beside an uncapped client", 2, false, 0, true,
	  true, 300 },
	{ "thinking 8 ms after 2 ms jobs: 20% wanted", 2, false, 8, false, true,
	  200 },
	{ "thinking 2 ms after 2 ms jobs: 50% wanted", 2, false, 2, true, true,
	  300 },
	{ "alone, not enforced", 2, true, 0, false, false, 1000 },
};

KUNIT_ARRAY_PARAM_DESC(gst_max, gst_max_cases, name);

static void gpucg_test_max(struct kunit *test)
{
	const struct gst_max_case *p = test->param_value;
	struct gst *w = test->priv;
	struct gpucg_engine *engine = gst_engine(w);
	struct gpucg *capped = gst_cgroup(w, NULL, CGROUP_WEIGHT_DFL, 0);
	struct gpucg *other = gst_cgroup(w, NULL, CGROUP_WEIGHT_DFL, 0);
	struct gst_client c[2] = {
		{ .tq = gst_queue(w, engine, capped),
		  .job_ns = p->job_ms * NSEC_PER_MSEC, .deep = p->deep,
		  .think_ns = { p->think_ms * NSEC_PER_MSEC,
				p->think_ms * NSEC_PER_MSEC } },
		{ .tq = gst_queue(w, engine, other), .job_ns = 2 * NSEC_PER_MSEC,
		  .deep = true },
	};
	u64 all = 10 * NSEC_PER_SEC, got, rest;
	struct gst_figures f;

	if (p->enforced)
		gpucg_engine_enforce_max(engine);
	gpucg_kunit_cgroup_set_max(capped, 30000, 100000);
	gst_run(w, engine, c, p->beside ? 2 : 1, all, &f);
	got = c[0].busy_ns * 1000 / all;
	rest = c[1].busy_ns * 1000 / all;
	kunit_info(test, "%s: capped %llu.%llu%%, uncapped %llu.%llu%%\n", p->name,
		   got / 10, got % 10, rest / 10, rest % 10);
	if (!p->enforced) {
		KUNIT_EXPECT_EQ(test, got, 1000ULL);
		return;
	}
	KUNIT_EXPECT_LE(test, abs_diff(got, p->want), 10ULL);
	if (p->beside)
		KUNIT_EXPECT_GE(test, rest * 100, (1000 - got) * 97);
}

/*
 * gpu.max for a driver that keeps its own queue (i915's execlists): it asks
 * gpucg_queue_throttled() before it starts a context's work, starts the
 * context gpucg_queue_before() puts first among those not throttled, charges
 * each slice when it ends (gpucg_queue_charge()), and, while every context
 * with work is throttled, idles until the time the controller gave, which
 * is never more than a period. A deep context capped at 30 ms of every 100
 * ms, alone or beside an uncapped deep one, in slices of 1 ms or of 7 ms
 * (past the budget: debt), gets 30% of the engine over 10 s within a point,
 * and the uncapped one at least 97% of the rest.
 */
struct gst_own_case {
	const char	*name;
	u64		slice_ms;
	bool		beside;
};

static const struct gst_own_case gst_own_cases[] = {
	{ "alone, 1 ms slices", 1, false },
	{ "beside an uncapped context, 1 ms slices", 1, true },
	{ "alone, 7 ms slices", 7, false },
	{ "beside an uncapped context, 7 ms slices", 7, true },
};

KUNIT_ARRAY_PARAM_DESC(gst_own, gst_own_cases, name);

static void gpucg_test_max_own_queue(struct kunit *test)
{
	const struct gst_own_case *p = test->param_value;
	struct gst *w = test->priv;
	struct gpucg_engine *engine = gst_engine(w);
	struct gpucg *capped = gst_cgroup(w, NULL, CGROUP_WEIGHT_DFL, 0);
	struct gpucg *other = gst_cgroup(w, NULL, CGROUP_WEIGHT_DFL, 0);
	struct gst_queue *tq[2] = { gst_queue(w, engine, capped),
				    gst_queue(w, engine, other) };
	u64 all = 10 * NSEC_PER_SEC, until = w->now + all, slice;
	u64 busy[2] = {}, retry, wait, retry_max = 0;
	unsigned int i, n = p->beside ? 2 : 1;
	bool has_cap, uncapped_seen = false;
	int run;

	gpucg_engine_enforce_max(engine);
	gpucg_kunit_cgroup_set_max(capped, 30000, 100000);
	for (i = 0; i < n; i++)
		gst_sync(tq[i], true);
	while (w->now < until) {
		run = -1;
		wait = U64_MAX;
		for (i = 0; i < n; i++) {
			if (gpucg_queue_throttled(&tq[i]->q, &retry, &has_cap)) {
				retry_max = max(retry_max, retry);
				wait = min(wait, retry);
			} else if (run < 0 ||
				   gpucg_queue_before(&tq[i]->q, &tq[run]->q)) {
				run = i;
			}
			/* the capped context always is, the other never */
			KUNIT_EXPECT_EQ(test, has_cap, i == 0);
			uncapped_seen |= !has_cap;
		}
		if (run < 0) {
			w->now += wait;
			continue;
		}
		slice = min(p->slice_ms * NSEC_PER_MSEC, until - w->now);
		w->now += slice;
		gpucg_queue_charge(&tq[run]->q, slice);
		busy[run] += slice;
	}
	busy[0] = div64_u64(busy[0] * 1000, all);
	busy[1] = div64_u64(busy[1] * 1000, all);
	kunit_info(test, "%s: capped %llu.%llu%%, uncapped %llu.%llu%%, longest retry %llu ms\n",
		   p->name, busy[0] / 10, busy[0] % 10, busy[1] / 10, busy[1] % 10,
		   div64_u64(retry_max, NSEC_PER_MSEC));
	KUNIT_EXPECT_LE(test, abs_diff(busy[0], 300ULL), 10ULL);
	if (p->beside)
		KUNIT_EXPECT_GE(test, busy[1] * 100, (1000 - busy[0]) * 97);
	KUNIT_EXPECT_EQ(test, uncapped_seen, p->beside);
	KUNIT_EXPECT_GT(test, retry_max, 0ULL);
	KUNIT_EXPECT_LE(test, retry_max, 100 * NSEC_PER_MSEC);
	for (i = 0; i < n; i++)
		gst_sync(tq[i], false);
}

/*
 * Promise 2: a client cannot make an engine idle for others for longer
 * than an absolute bound per job of its own, whatever its own job length
 * and think times: a shallow client at weight 900 against a deep one at
 * weight 100, for 60 s.
 */
struct gst_idle_case {
	const char	*name;
	u64		job_ms;
	u64		think_us[2];	/* in turn */
	u64		deep_ms;	/* the deep client's jobs */
};

static const struct gst_idle_case gst_idle_cases[] = {
	{ "400 ms jobs, thinks 150 and 450 ms", 400, { 150000, 450000 }, 5 },
	{ "400 ms jobs, thinks 5 and 40 ms", 400, { 5000, 40000 }, 5 },
	/* waited for, and late every other job: the wait runs out */
	{ "400 ms jobs, thinks 10 and 50 ms, deep jobs of 50 ms", 400,
	  { 10000, 50000 }, 50 },
	{ "1 s jobs, thinks 10 ms", 1000, { 10000, 10000 }, 5 },
	{ "40 ms jobs, thinks 8 and 12 ms", 40, { 8000, 12000 }, 5 },
	{ "2 ms jobs, thinks 1 and 5 ms", 2, { 1000, 5000 }, 5 },
};

KUNIT_ARRAY_PARAM_DESC(gst_idle, gst_idle_cases, name);

static void gpucg_test_idle_bound(struct kunit *test)
{
	const struct gst_idle_case *p = test->param_value;
	struct gst *w = test->priv;
	struct gpucg_engine *engine = gst_engine(w);
	struct gpucg *big = gst_cgroup(w, NULL, 900, 0);
	struct gpucg *small = gst_cgroup(w, NULL, 100, 0);
	struct gst_client c[2] = {
		{ .tq = gst_queue(w, engine, big),
		  .job_ns = p->job_ms * NSEC_PER_MSEC,
		  .think_ns = { p->think_us[0] * NSEC_PER_USEC,
				p->think_us[1] * NSEC_PER_USEC } },
		{ .tq = gst_queue(w, engine, small),
		  .job_ns = p->deep_ms * NSEC_PER_MSEC, .deep = true },
	};
	u64 bound = gpucg_gap_max() + 16 * gpucg_anticipate_ns;
	struct gst_figures f;

	/* the bound the essay states: 48 windows' lower bound */
	KUNIT_EXPECT_EQ(test, bound, 48 * gpucg_anticipate_ns);
	gst_run(w, engine, c, 2, 60 * NSEC_PER_SEC, &f);
	kunit_info(test, "%s: idle with work ready %llu ms in all, %llu us at most (bound %llu us a job); shares %llu%% and %llu%%\n",
		   p->name, f.idle_ns / NSEC_PER_MSEC,
		   f.idle_max_ns / NSEC_PER_USEC, bound / NSEC_PER_USEC,
		   c[0].busy_ns * 100 / (60 * NSEC_PER_SEC),
		   c[1].busy_ns * 100 / (60 * NSEC_PER_SEC));
	KUNIT_EXPECT_LE(test, f.idle_max_ns, bound);
	KUNIT_EXPECT_LE(test, f.idle_ns, (c[0].jobs + 1) * bound);
}

/*
 * The same load twice, from a fresh world each time, gives the same
 * figures to the nanosecond: the core takes its time from the test alone.
 */
static void gst_same_load(struct kunit *test, u64 *fig)
{
	struct gst *w = test->priv;
	struct gpucg_engine *engine = gst_engine(w);
	struct gpucg *a = gst_cgroup(w, NULL, 300, 0);
	struct gpucg *b = gst_cgroup(w, NULL, 100, 0);
	struct gst_client c[3] = {
		{ .tq = gst_queue(w, engine, a), .job_ns = 3 * NSEC_PER_MSEC,
		  .think_ns = { 1200 * NSEC_PER_USEC, 2500 * NSEC_PER_USEC } },
		{ .tq = gst_queue(w, engine, b), .job_ns = 5 * NSEC_PER_MSEC,
		  .deep = true },
		{ .tq = gst_queue(w, engine, b), .job_ns = 1 * NSEC_PER_MSEC,
		  .deep = true },
	};
	struct gst_figures f;

	gst_run(w, engine, c, 3, 10 * NSEC_PER_SEC, &f);
	fig[0] = c[0].busy_ns;
	fig[1] = c[1].busy_ns;
	fig[2] = c[2].busy_ns;
	fig[3] = f.idle_ns;
}

static void gpucg_test_deterministic(struct kunit *test)
{
	u64 one[4], two[4];

	gst_same_load(test, one);
	gst_exit(test);
	KUNIT_ASSERT_EQ(test, gst_init(test), 0);
	gst_same_load(test, two);
	kunit_info(test, "busy %llu, %llu and %llu us, idle %llu us of 10 s\n",
		   one[0] / NSEC_PER_USEC, one[1] / NSEC_PER_USEC,
		   one[2] / NSEC_PER_USEC, one[3] / NSEC_PER_USEC);
	KUNIT_EXPECT_GT(test, one[0], 0ULL);
	KUNIT_EXPECT_GT(test, one[1], 0ULL);
	KUNIT_EXPECT_GT(test, one[2], 0ULL);
	KUNIT_EXPECT_MEMEQ(test, one, two, sizeof(one));
}

/*
 * Promise 3: the links of many waiters cost no more with interrupts off
 * than the links of a few. N waiters on one job, then the job leaves its
 * queue: the longest section under the boost lock looks at no more links
 * with 10,000 waiters than twice what it looks at with 10.
 */
struct gst_wait {
	struct gpucg_boost	b;
	bool			done;
};

static bool gst_wait_done(struct gpucg_boost *b)
{
	return container_of(b, struct gst_wait, b)->done;
}

/*
 * @n waits of a queue at priority 100 on another engine on the ready job of
 * a signaller at @low on @target, whose entity is *@ent; *@from is the
 * waiter's entity.
 */
static struct gst_wait *gst_waits(struct kunit *test, unsigned int n, int low,
				  struct gpucg_engine **target,
				  struct gst_queue **signaller,
				  struct gpucg_entity **ent,
				  struct gpucg_entity **from)
{
	struct gst *w = test->priv;
	struct gpucg *lcg = gst_cgroup(w, NULL, CGROUP_WEIGHT_DFL, low);
	struct gpucg *hcg = gst_cgroup(w, NULL, CGROUP_WEIGHT_DFL, 100);
	struct gpucg_engine *other;
	struct gst_queue *waiter;
	struct gst_wait *waits;
	unsigned int i;

	*target = gst_engine(w);
	other = gst_engine(w);
	*signaller = gst_queue(w, *target, lcg);
	waiter = gst_queue(w, other, hcg);
	*ent = gpucg_entity_find(lcg, *target);
	*from = gpucg_entity_find(hcg, other);
	waits = kunit_kcalloc(test, n, sizeof(*waits), GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, waits);
	gst_sync(*signaller, true);
	for (i = 0; i < n; i++)
		gpucg_boost_link(&waits[i].b, &waiter->q, &(*signaller)->q, 1,
				 gst_wait_done);
	return waits;
}

/* How many of the @n waits are still linked. */
static unsigned int gst_linked(struct gst_wait *waits, unsigned int n)
{
	unsigned int i, linked = 0;

	for (i = 0; i < n; i++)
		linked += !!waits[i].b.to;
	return linked;
}

static unsigned int gst_waiters(struct kunit *test, unsigned int n)
{
	struct gst *w = test->priv;
	struct gpucg_entity *ent, *from;
	struct gpucg_engine *target;
	struct gst_queue *signaller;
	struct gst_wait *waits;
	struct gpucg_queue *q;
	unsigned int i, steps;
	u64 retry;

	waits = gst_waits(test, n, -100, &target, &signaller, &ent, &from);
	KUNIT_EXPECT_EQ(test, ent->boost, 100);
	KUNIT_EXPECT_EQ(test, target->nr_boosts, n);
	q = gpucg_queue_pick(target, gst_take, NULL, &retry);
	KUNIT_EXPECT_PTR_EQ(test, q, &signaller->q);
	KUNIT_EXPECT_EQ(test, target->nr_boosts, n);
	/* the job goes to the hardware: every wait on it is done */
	gst_job(w, signaller, NSEC_PER_MSEC);
	for (i = 0; i < n; i++)
		waits[i].done = true;
	gpucg_boost_steps_max = 0;
	q = gpucg_queue_pick(target, gst_take, NULL, &retry);
	steps = gpucg_boost_steps_max;
	KUNIT_EXPECT_EQ(test, target->nr_boosts, 0U);
	KUNIT_EXPECT_EQ(test, ent->boost, GPUCG_KEY_NONE);
	for (i = 0; i < n; i++)
		gpucg_boost_unlink(&waits[i].b);
	return steps;
}

static void gpucg_test_many_waiters(struct kunit *test)
{
	unsigned int few = gst_waiters(test, 10);
	unsigned int many;

	gst_exit(test);
	KUNIT_ASSERT_EQ(test, gst_init(test), 0);
	many = gst_waiters(test, 10000);
	kunit_info(test, "links looked at with interrupts off, at most: %u with 10 waiters, %u with 10000\n",
		   few, many);
	KUNIT_EXPECT_GT(test, few, 0U);
	KUNIT_EXPECT_LE(test, many, 2 * few);
}

/*
 * A lowered priority reaches every link of the cgroup's waits, however
 * many (a change used to stop after GPUCG_BOOST_BUDGET links, and the rest
 * lent the old priority until their waits ended), and no more than a batch
 * of them with interrupts off.
 */
static void gpucg_test_priority_change_reaches_every_link(struct kunit *test)
{
	const unsigned int n = 4 * GPUCG_BOOST_BUDGET;
	struct gpucg_entity *ent, *from;
	unsigned int i, stale = 0;
	struct gpucg_engine *target;
	struct gst_queue *signaller;
	struct gst_wait *waits;

	waits = gst_waits(test, n, -500, &target, &signaller, &ent, &from);
	KUNIT_EXPECT_EQ(test, ent->boost, 100);
	/* gpucg_sched_rekey(), for one entity */
	WRITE_ONCE(from->prio, -100);
	gpucg_boost_steps_max = 0;
	gpucg_boost_refresh(from);
	KUNIT_EXPECT_EQ(test, ent->boost, -100);
	for (i = 0; i < n; i++)
		stale += waits[i].b.prio != -100;
	KUNIT_EXPECT_EQ(test, stale, 0U);
	KUNIT_EXPECT_LE(test, gpucg_boost_steps_max, GPUCG_EXPIRE_BATCH);
	for (i = 0; i < n; i++)
		gpucg_boost_unlink(&waits[i].b);
	KUNIT_EXPECT_EQ(test, ent->boost, GPUCG_KEY_NONE);
}

/*
 * An engine's destruction drops the links into it a batch at a time, not
 * all of them with interrupts off.
 */
static void gpucg_test_destroy_many_links(struct kunit *test)
{
	struct gpucg_entity *ent, *from;
	struct gpucg_engine *target;
	struct gst_queue *signaller;
	struct gst_wait *waits;

	waits = gst_waits(test, 10000, -100, &target, &signaller, &ent, &from);
	KUNIT_ASSERT_EQ(test, target->nr_boosts, 10000U);
	gpucg_boost_steps_max = 0;
	gst_exit(test);
	KUNIT_EXPECT_LE(test, gpucg_boost_steps_max, GPUCG_EXPIRE_BATCH);
	KUNIT_EXPECT_EQ(test, gst_linked(waits, 10000), 0U);
}

/* Cgroups at -100, 0 and 100, and two engines: the loans' tests. */
struct gst_bands {
	struct gpucg		*low, *mid, *high;
	struct gpucg_engine	*engine, *other;
};

static struct gst_bands gst_bands(struct gst *w)
{
	struct gst_bands b = {
		.low = gst_cgroup(w, NULL, CGROUP_WEIGHT_DFL, -100),
		.mid = gst_cgroup(w, NULL, CGROUP_WEIGHT_DFL, 0),
		.high = gst_cgroup(w, NULL, CGROUP_WEIGHT_DFL, 100),
		.engine = gst_engine(w),
		.other = gst_engine(w),
	};

	return b;
}

/*
 * Promise 3: a job start costs a pick O(1) under the boost lock, however
 * many links wait on its queue's later work. A signaller's 100th job from
 * now is awaited by 10,000 waiters, and each of its 99 jobs before it by
 * one: a pick after each of those 99 starts drops the link on the job
 * that left and looks at the next (the pick after a start used to look at
 * all 10,099 links, a batch at a time); the jobs of another queue of the
 * engine cost no look and no lock, nor do the picks of the waiters'
 * engine; the 100th job's start drops its 10,000 links a batch at a
 * time. The jobs' places wrap past 2^32 on the way.
 */
struct gst_seq_wait {
	struct gpucg_boost	b;
	const u32		*started;	/* the holder's jobs started */
	u32			seq;		/* the place of the job waited for */
};

static bool gst_seq_done(struct gpucg_boost *b)
{
	struct gst_seq_wait *sw = container_of(b, struct gst_seq_wait, b);

	return (s32)(READ_ONCE(*sw->started) - sw->seq) >= 0;
}

/* Picks @engine, which should take @tq, and runs one job of it, 1 ms. */
static void gst_pick_job(struct gst *w, struct gpucg_engine *engine,
			 struct gst_queue *tq, u32 *started)
{
	struct gpucg_queue *q;
	u64 retry;

	q = gpucg_queue_pick(engine, gst_take, NULL, &retry);
	KUNIT_ASSERT_PTR_EQ(w->test, q, &tq->q);
	if (started)
		(*started)++;
	gst_job(w, tq, NSEC_PER_MSEC);
	gst_sync(tq, true);
}

static void gpucg_test_start_cost(struct kunit *test)
{
	const unsigned int deep = 100, many = 10000, n = deep - 1 + many;
	struct gst *w = test->priv;
	struct gst_bands b = gst_bands(w);
	struct gpucg_engine *target = b.engine, *other = b.other;
	struct gst_queue *signaller = gst_queue(w, target, b.low);
	struct gst_queue *bystander = gst_queue(w, target, b.mid);
	struct gst_queue *waiter = gst_queue(w, other, b.high);
	struct gpucg_entity *ent = gpucg_entity_find(b.low, target);
	struct gst_seq_wait *waits;
	unsigned long steps, locks;
	u32 started = U32_MAX - 50;
	unsigned int i, late = 0;

	waits = kunit_kcalloc(test, n, sizeof(*waits), GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, waits);
	gst_sync(signaller, true);
	for (i = 0; i < n; i++) {
		waits[i].started = &started;
		waits[i].seq = started + min(i + 1, deep);
		gpucg_boost_link(&waits[i].b, &waiter->q, &signaller->q,
				 waits[i].seq, gst_seq_done);
	}
	KUNIT_ASSERT_EQ(test, target->nr_boosts, n);
	KUNIT_EXPECT_EQ(test, ent->boost, 100);

	/* the 99 jobs ahead of the one the many wait for */
	steps = gpucg_boost_steps_all;
	for (i = 1; i < deep; i++) {
		gst_pick_job(w, target, signaller, &started);
		/* this pick dropped the link on the job started before it */
		late += target->nr_boosts != n - (i - 1);
	}
	steps = gpucg_boost_steps_all - steps;
	KUNIT_EXPECT_EQ(test, late, 0U);
	/* the next pick drops the 99th job's link */
	gst_sync(signaller, false);
	gpucg_queue_pick(target, gst_take, NULL, &(u64){ 0 });
	KUNIT_EXPECT_EQ(test, target->nr_boosts, many);
	kunit_info(test, "links looked at after %u job starts, with %u links waiting on later jobs: %lu\n",
		   deep - 1, many, steps);
	KUNIT_EXPECT_LE(test, steps, 2UL * (deep - 1));

	/* another queue's jobs, and the waiters' engine, take no lock */
	locks = gpucg_boost_locks;
	gst_sync(bystander, true);
	for (i = 0; i < 10; i++)
		gst_pick_job(w, target, bystander, NULL);
	gst_sync(bystander, false);
	gst_sync(waiter, true);
	gst_pick_job(w, other, waiter, NULL);
	gst_sync(waiter, false);
	KUNIT_EXPECT_EQ(test, gpucg_boost_locks - locks, 0UL);

	/* the job the many wait for starts: its links go, a batch at a time */
	gst_sync(signaller, true);
	gst_pick_job(w, target, signaller, &started);
	gst_sync(signaller, false);
	gpucg_boost_steps_max = 0;
	gpucg_queue_pick(target, gst_take, NULL, &(u64){ 0 });
	KUNIT_EXPECT_LE(test, gpucg_boost_steps_max, GPUCG_EXPIRE_BATCH);
	KUNIT_EXPECT_EQ(test, target->nr_boosts, 0U);
	KUNIT_EXPECT_EQ(test, target->nr_dirty, 0U);
	KUNIT_EXPECT_EQ(test, ent->boost, GPUCG_KEY_NONE);
	for (i = 0; i < n; i++)
		gpucg_boost_unlink(&waits[i].b);
}

/*
 * Nothing is linked for a job that has left its queue already, nor from a
 * kernel queue (kernel work lends nothing).
 */
static void gpucg_test_no_link_for_done_or_kernel(struct kunit *test)
{
	struct gst *w = test->priv;
	struct gst_bands b = gst_bands(w);
	struct gpucg_engine *target = b.engine;
	struct gst_queue *signaller = gst_queue(w, target, b.low);
	struct gst_queue *waiter = gst_queue(w, b.other, b.high);
	struct gst_queue *kern = gst_queue(w, target, NULL);
	struct gpucg_entity *ent = gpucg_entity_find(b.low, target);
	struct gst_wait *w2 = kunit_kcalloc(test, 2, sizeof(*w2), GFP_KERNEL);

	KUNIT_ASSERT_NOT_NULL(test, w2);
	w2[0].done = true;
	gst_sync(signaller, true);
	KUNIT_EXPECT_FALSE(test, gpucg_boost_link(&w2[0].b, &waiter->q,
						  &signaller->q, 1,
						  gst_wait_done));
	KUNIT_EXPECT_NULL(test, w2[0].b.to);
	KUNIT_EXPECT_FALSE(test, gpucg_boost_link(&w2[1].b, &kern->q,
						  &signaller->q, 1,
						  gst_wait_done));
	KUNIT_EXPECT_NULL(test, w2[1].b.to);
	KUNIT_EXPECT_EQ(test, target->nr_boosts, 0U);
	KUNIT_EXPECT_EQ(test, ent->boost, GPUCG_KEY_NONE);
	/* so that a failure leaves nothing linked to the test's memory */
	gpucg_boost_unlink(&w2[0].b);
	gpucg_boost_unlink(&w2[1].b);
}

/*
 * Promise 1: a loan lifts the queue that holds the job waited for, and
 * only while that queue is ready. A cgroup at -100 keeps a deep queue
 * ready and holds, in another queue, the job that a waiter at 100 on
 * another engine waits for; that job waits on something of its own (a
 * long job elsewhere, a fence nobody can lend to), and a cgroup at 0
 * keeps the engine busy. While the job cannot run, the cgroup at 0 gets
 * the whole engine (a loan to the whole cgroup gave it all to the deep
 * queue); once it can, it runs next, and the deep queue stays below 0.
 */
static void gpucg_test_loan_lifts_only_its_holder(struct kunit *test)
{
	struct gst *w = test->priv;
	struct gst_bands b = gst_bands(w);
	struct gpucg_engine *engine = b.engine;
	struct gst_queue *holder = gst_queue(w, engine, b.low);
	struct gst_queue *waiter = gst_queue(w, b.other, b.high);
	struct gst_client c[2] = {
		{ .tq = gst_queue(w, engine, b.low), .job_ns = 2 * NSEC_PER_MSEC,
		  .deep = true },
		{ .tq = gst_queue(w, engine, b.mid), .job_ns = 2 * NSEC_PER_MSEC,
		  .deep = true },
	};
	struct gst_wait *wait = kunit_kzalloc(test, sizeof(*wait), GFP_KERNEL);
	u64 all = NSEC_PER_SEC, retry;
	struct gst_figures f;
	struct gpucg_queue *q;

	KUNIT_ASSERT_NOT_NULL(test, wait);
	gpucg_boost_link(&wait->b, &waiter->q, &holder->q, 1, gst_wait_done);
	KUNIT_EXPECT_EQ(test, holder->q.boost, 100);
	gst_run(w, engine, c, 2, all, &f);
	kunit_info(test, "while the job waited for cannot run: the cgroup at 0 %llu%%, the deep queue at -100 %llu%%\n",
		   c[1].busy_ns * 100 / all, c[0].busy_ns * 100 / all);
	KUNIT_EXPECT_EQ(test, c[1].busy_ns, all);
	KUNIT_EXPECT_EQ(test, c[0].busy_ns, 0ULL);

	/* it can run: it goes first, at 100 */
	gst_sync(holder, true);
	KUNIT_EXPECT_EQ(test, gpucg_entity_find(b.low, engine)->boost, 100);
	q = gpucg_queue_pick(engine, gst_take, NULL, &retry);
	KUNIT_EXPECT_PTR_EQ(test, q, &holder->q);
	gst_job(w, holder, 2 * NSEC_PER_MSEC);
	wait->done = true;
	/* its next job, and the deep queue, are back below 0 */
	gst_sync(holder, true);
	q = gpucg_queue_pick(engine, gst_take, NULL, &retry);
	KUNIT_EXPECT_PTR_EQ(test, q, &c[1].tq->q);
	KUNIT_EXPECT_EQ(test, holder->q.boost, GPUCG_KEY_NONE);
	gpucg_boost_unlink(&wait->b);
}

/*
 * A queue that runs only on loan (a grouped engine's view of one client's
 * queue in its cgroup's run queue) is active while it is lent and ready,
 * and a pick offers it first; unlent, it is never offered, ready or not.
 */
static void gpucg_test_lent_queue(struct kunit *test)
{
	struct gst *w = test->priv;
	struct gst_bands b = gst_bands(w);
	struct gpucg_engine *engine = b.engine;
	struct gst_queue *group = gst_queue(w, engine, b.low);
	struct gst_queue *busy = gst_queue(w, engine, b.mid);
	struct gst_queue *waiter = gst_queue(w, b.other, b.high);
	struct gst_queue *lent = gst_queue(w, engine, NULL);
	struct gst_wait *wait = kunit_kzalloc(test, sizeof(*wait), GFP_KERNEL);
	struct gpucg_queue *q;
	u64 retry;

	KUNIT_ASSERT_NOT_NULL(test, wait);
	/* the test's kernel queue made again as a lent one of @low's client */
	gpucg_queue_fini(&lent->q);
	lent->client = gpucg_client_new(w->dev, b.low);
	KUNIT_ASSERT_NOT_ERR_OR_NULL(test, lent->client);
	KUNIT_ASSERT_EQ(test, gpucg_queue_init_lent(&lent->q, engine,
						    lent->client), 0);
	gst_sync(group, true);
	gst_sync(busy, true);
	gst_sync(lent, true);
	KUNIT_EXPECT_FALSE(test, lent->q.active);
	q = gpucg_queue_pick(engine, gst_take, NULL, &retry);
	KUNIT_EXPECT_PTR_EQ(test, q, &busy->q);
	gpucg_boost_link(&wait->b, &waiter->q, &lent->q, 1, gst_wait_done);
	KUNIT_EXPECT_TRUE(test, lent->q.active);
	q = gpucg_queue_pick(engine, gst_take, NULL, &retry);
	KUNIT_EXPECT_PTR_EQ(test, q, &lent->q);
	/* not ready: the pick skips it, and the cgroup is back at -100 */
	lent->ready = false;
	q = gpucg_queue_pick(engine, gst_take, NULL, &retry);
	KUNIT_EXPECT_PTR_EQ(test, q, &busy->q);
	KUNIT_EXPECT_FALSE(test, lent->q.active);
	gst_sync(lent, true);
	KUNIT_EXPECT_TRUE(test, lent->q.active);
	gpucg_boost_unlink(&wait->b);
	KUNIT_EXPECT_FALSE(test, lent->q.active);
	q = gpucg_queue_pick(engine, gst_take, NULL, &retry);
	KUNIT_EXPECT_PTR_EQ(test, q, &busy->q);
}

/*
 * A loan no higher than the holder's own band reorders nothing: a job of a
 * cgroup's client on another engine waiting on one of the same cgroup (a
 * bin job's render job) leaves the order of its queues to the driver
 * (context priority here), and a queue that runs only on loan stays off.
 */
static void gpucg_test_loan_of_own_band_reorders_nothing(struct kunit *test)
{
	struct gst *w = test->priv;
	struct gpucg *cg = gst_cgroup(w, NULL, CGROUP_WEIGHT_DFL, 0);
	struct gpucg_engine *engine = gst_engine(w), *other = gst_engine(w);
	struct gst_queue *first = gst_queue(w, engine, cg);
	struct gst_queue *holder = gst_queue(w, engine, cg);
	struct gst_queue *waiter = gst_queue(w, other, cg);
	struct gst_wait *wait = kunit_kzalloc(test, sizeof(*wait), GFP_KERNEL);
	struct gpucg_queue *q;
	u64 retry;

	KUNIT_ASSERT_NOT_NULL(test, wait);
	first->q.ctx_prio = 1;	/* before the holder among the cgroup's */
	gst_sync(first, true);
	gst_sync(holder, true);
	gpucg_boost_link(&wait->b, &waiter->q, &holder->q, 1, gst_wait_done);
	KUNIT_EXPECT_EQ(test, holder->q.boost, 0);
	q = gpucg_queue_pick(engine, gst_take, NULL, &retry);
	KUNIT_EXPECT_PTR_EQ(test, q, &first->q);
	KUNIT_EXPECT_EQ(test, gpucg_entity_find(cg, engine)->boost, GPUCG_KEY_NONE);
	gpucg_boost_unlink(&wait->b);
}

/*
 * A loan that did not lift its queue (the holder's cgroup was above it)
 * lifts it once that cgroup's priority drops below the loan, with no job
 * of the queue in between (one that runs only on loan starts none without
 * it): the queue comes up, and a pick takes it before a cgroup at 0.
 */
static void gpucg_test_priority_change_relifts(struct kunit *test)
{
	struct gst *w = test->priv;
	struct gst_bands b = gst_bands(w);
	struct gpucg *top = gst_cgroup(w, NULL, CGROUP_WEIGHT_DFL, 200);
	struct gst_queue *busy = gst_queue(w, b.engine, b.mid);
	struct gst_queue *waiter = gst_queue(w, b.other, b.high);
	struct gst_queue *lent = gst_queue(w, b.engine, NULL);
	struct gst_wait *wait = kunit_kzalloc(test, sizeof(*wait), GFP_KERNEL);
	struct gpucg_entity *ent;
	struct gpucg_queue *q;
	u64 retry;

	KUNIT_ASSERT_NOT_NULL(test, wait);
	gpucg_queue_fini(&lent->q);
	lent->client = gpucg_client_new(w->dev, top);
	KUNIT_ASSERT_NOT_ERR_OR_NULL(test, lent->client);
	KUNIT_ASSERT_EQ(test, gpucg_queue_init_lent(&lent->q, b.engine,
						    lent->client), 0);
	gst_sync(busy, true);
	gst_sync(lent, true);
	gpucg_boost_link(&wait->b, &waiter->q, &lent->q, 1, gst_wait_done);
	KUNIT_EXPECT_FALSE(test, lent->q.active);
	/* lent, if not lifted: its driver keeps saying whether it is ready */
	KUNIT_EXPECT_TRUE(test, gpucg_queue_lent(&lent->q));
	/* as gpu_priority_write() of -100 */
	WRITE_ONCE(top->priority, -100);
	gpucg_sched_rekey(top);
	ent = gpucg_entity_find(top, b.engine);
	KUNIT_EXPECT_EQ(test, ent->prio, -100);
	KUNIT_EXPECT_TRUE(test, lent->q.active);
	q = gpucg_queue_pick(b.engine, gst_take, NULL, &retry);
	KUNIT_EXPECT_PTR_EQ(test, q, &lent->q);
	gpucg_boost_unlink(&wait->b);
	KUNIT_EXPECT_FALSE(test, lent->q.active);
	KUNIT_EXPECT_EQ(test, ent->nr_lent, 0U);
}

/*
 * An unset priority inherits the parent's effective one, so a priority
 * given to a container's cgroup reaches the cgroups it makes; a set one
 * takes effect up to the parent's, and a top-level cgroup's unset one is
 * 0. Entities made under an unset cgroup get the inherited band.
 */
static void gpucg_test_priority_inherits(struct kunit *test)
{
	struct gst *w = test->priv;
	struct gpucg *top = gst_cgroup(w, NULL, CGROUP_WEIGHT_DFL, 500);
	struct gpucg *mid = gst_cgroup(w, top, CGROUP_WEIGHT_DFL,
				       GPUCG_PRIO_UNSET);
	struct gpucg *leaf = gst_cgroup(w, mid, CGROUP_WEIGHT_DFL,
					GPUCG_PRIO_UNSET);
	struct gpucg *unset = gst_cgroup(w, NULL, CGROUP_WEIGHT_DFL,
					 GPUCG_PRIO_UNSET);
	struct gpucg *under = gst_cgroup(w, unset, CGROUP_WEIGHT_DFL, 800);
	struct gpucg_engine *engine = gst_engine(w);
	struct gst_queue *q = gst_queue(w, engine, leaf);

	KUNIT_EXPECT_EQ(test, gpucg_priority_effective(mid), 500);
	KUNIT_EXPECT_EQ(test, gpucg_priority_effective(leaf), 500);
	KUNIT_EXPECT_EQ(test, q->q.ent->prio, 500);
	/* a delegatee raises nothing, lowers all below it */
	WRITE_ONCE(mid->priority, 800);
	KUNIT_EXPECT_EQ(test, gpucg_priority_effective(leaf), 500);
	WRITE_ONCE(mid->priority, -5);
	KUNIT_EXPECT_EQ(test, gpucg_priority_effective(leaf), -5);
	WRITE_ONCE(mid->priority, GPUCG_PRIO_UNSET);
	WRITE_ONCE(top->priority, GPUCG_PRIO_UNSET);
	KUNIT_EXPECT_EQ(test, gpucg_priority_effective(leaf), GPUCG_PRIO_DFL);
	/* the root imposes no clamp, an unset top-level cgroup does */
	KUNIT_EXPECT_EQ(test, gpucg_priority_effective(top), GPUCG_PRIO_DFL);
	KUNIT_EXPECT_EQ(test, gpucg_priority_effective(under), GPUCG_PRIO_DFL);
	WRITE_ONCE(unset->priority, 1000);
	KUNIT_EXPECT_EQ(test, gpucg_priority_effective(under), 800);
}

/* The entities of cgroups on @engine */
static unsigned int gst_nr_entities(struct gpucg_engine *engine)
{
	struct gpucg_entity *ent;
	unsigned int n = 0;

	mutex_lock(&gpucg_mutex);
	list_for_each_entry(ent, &engine->ents, engine_node)
		n++;
	mutex_unlock(&gpucg_mutex);
	return n;
}

#define GST_MOVES	1000
#define GST_OTHERS	100

/*
 * Promise 4: a client whose owner moves through many cgroups makes the new
 * cgroups' entities only on the engines its queues used, whatever else the
 * device has (other clients' per-queue engines): 1,000 moves beside 100
 * engines of others make 1,000 entities on its engine and none on theirs
 * (each move made one on every engine before: 100,000 on theirs).
 */
static void gpucg_test_move_makes_entities_where_used(struct kunit *test)
{
	struct gst *w = test->priv;
	struct gpucg *first = gst_cgroup(w, NULL, CGROUP_WEIGHT_DFL, 0);
	struct gpucg_engine *mine = gst_engine(w);
	struct gst_queue *q = gst_queue(w, mine, first);
	unsigned int i, theirs = 0;
	struct gpucg_engine **others;

	others = kunit_kcalloc(test, GST_OTHERS, sizeof(*others), GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, others);
	for (i = 0; i < GST_OTHERS; i++)
		others[i] = gpucg_engine_create(w->dev, true);
	for (i = 0; i < GST_MOVES; i++)
		gpucg_kunit_client_move(q->client, gst_cgroup(w, NULL, CGROUP_WEIGHT_DFL, 0));
	for (i = 0; i < GST_OTHERS; i++) {
		if (IS_ERR_OR_NULL(others[i]))
			continue;
		theirs += gst_nr_entities(others[i]);
		gpucg_engine_destroy(others[i]);
	}
	KUNIT_EXPECT_EQ(test, gst_nr_entities(mine), GST_MOVES + 1);
	KUNIT_EXPECT_EQ(test, theirs, 0U);
}

/* The last reference on a client, dropped from an RCU callback */
struct gst_late_put {
	struct rcu_head		rcu;
	struct gpucg_client	*client;
	bool			in_softirq;	/* where the callback ran */
};

static void gst_put_late(struct rcu_head *rcu)
{
	struct gst_late_put *put = container_of(rcu, struct gst_late_put, rcu);

	put->in_softirq = in_serving_softirq();
	gpucg_client_put(put->client);
}

/*
 * A client's last reference may go in any context (a request retired in
 * a softirq, a fence callback, an RCU callback): what it frees takes no
 * lock that process context takes with interrupts on. Lockdep says so
 * (debug_locks goes off at its first report): the record of the engines
 * a client used was once an xarray locked with interrupts on and
 * destroyed at the last put, from an RCU callback in a softirq.
 */
static void gpucg_test_client_put_in_softirq(struct kunit *test)
{
	struct gst *w = test->priv;
	struct gpucg_engine *engine = gst_engine(w);
	struct gst_late_put *put;
	struct gpucg_queue *q;

	if (!IS_ENABLED(CONFIG_PROVE_LOCKING) || !debug_locks)
		kunit_skip(test, "lockdep is not on");
	put = kunit_kzalloc(test, sizeof(*put), GFP_KERNEL);
	q = kunit_kzalloc(test, sizeof(*q), GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, put);
	KUNIT_ASSERT_NOT_NULL(test, q);
	put->client = gpucg_client_new(w->dev, gst_cgroup(w, NULL, CGROUP_WEIGHT_DFL, 0));
	KUNIT_ASSERT_NOT_ERR_OR_NULL(test, put->client);
	/* the queue records its engine in the client, in process context */
	if (gpucg_queue_init(q, engine, put->client, 0)) {
		gpucg_client_put(put->client);
		KUNIT_FAIL(test, "no memory for a queue");
		return;
	}
	gpucg_queue_fini(q);
	call_rcu(&put->rcu, gst_put_late);
	rcu_barrier();
	/* RCU callbacks offloaded to a kthread (rcu_nocbs=) test nothing here */
	if (!put->in_softirq)
		kunit_skip(test, "RCU callbacks do not run in a softirq");
	KUNIT_EXPECT_TRUE(test, debug_locks);
}

/*
 * A queue that goes drops the links into it and out of it: nothing of the
 * loan is left on the engine, and nothing points at the queue.
 */
static void gpucg_test_queue_fini_drops_links(struct kunit *test)
{
	struct gpucg_entity *ent, *from;
	struct gpucg_engine *target;
	struct gst_queue *signaller;
	struct gst_wait *waits;

	waits = gst_waits(test, 100, -100, &target, &signaller, &ent, &from);
	KUNIT_EXPECT_EQ(test, ent->boost, 100);
	gpucg_boost_steps_max = 0;
	gpucg_queue_fini(&signaller->q);
	KUNIT_EXPECT_LE(test, gpucg_boost_steps_max, GPUCG_EXPIRE_BATCH);
	KUNIT_EXPECT_EQ(test, gst_linked(waits, 100), 0U);
	KUNIT_EXPECT_EQ(test, target->nr_boosts, 0U);
	KUNIT_EXPECT_EQ(test, from->nr_boosts_out, 0U);
	KUNIT_EXPECT_EQ(test, ent->boost, GPUCG_KEY_NONE);
}

static struct kunit_case gpucg_sched_cases[] = {
	KUNIT_CASE(gpucg_test_engine_ids),
	KUNIT_CASE(gpucg_test_device_outlives_release),
	KUNIT_CASE(gpucg_test_kernel_jobs),
	KUNIT_CASE(gpucg_test_kernel_share),
	KUNIT_CASE_PARAM(gpucg_test_max, gst_max_gen_params),
	KUNIT_CASE_PARAM(gpucg_test_max_own_queue, gst_own_gen_params),
	KUNIT_CASE_PARAM(gpucg_test_idle_bound, gst_idle_gen_params),
	KUNIT_CASE(gpucg_test_many_waiters),
	KUNIT_CASE(gpucg_test_priority_change_reaches_every_link),
	KUNIT_CASE(gpucg_test_destroy_many_links),
	KUNIT_CASE(gpucg_test_start_cost),
	KUNIT_CASE(gpucg_test_no_link_for_done_or_kernel),
	KUNIT_CASE(gpucg_test_loan_lifts_only_its_holder),
	KUNIT_CASE(gpucg_test_lent_queue),
	KUNIT_CASE(gpucg_test_loan_of_own_band_reorders_nothing),
	KUNIT_CASE(gpucg_test_priority_change_relifts),
	KUNIT_CASE(gpucg_test_priority_inherits),
	KUNIT_CASE(gpucg_test_move_makes_entities_where_used),
	KUNIT_CASE(gpucg_test_queue_fini_drops_links),
	KUNIT_CASE(gpucg_test_client_put_in_softirq),
	KUNIT_CASE(gpucg_test_deterministic),
	{}
};

static struct kunit_suite gpucg_sched_suite = {
	.name = "gpu_cgroup_sched",
	.init = gst_init,
	.exit = gst_exit,
	.test_cases = gpucg_sched_cases,
};

kunit_test_suite(gpucg_sched_suite);
