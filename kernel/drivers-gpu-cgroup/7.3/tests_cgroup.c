// SPDX-License-Identifier: GPL-2.0
/*
 * The gpu cgroup controller's order on the mock scheduler.
 *
 * Upstream's scenario clients (tests_scheduler.c: heavy, interactive,
 * oversubscribed) placed in cgroups, on a mock scheduler that is an engine
 * of the gpu cgroup controller under the fair or the FIFO policy, with the
 * shares of GPU time asserted with margins; the walks over a scheduler's
 * entities (drm_sched_visit_rqs(), a hang's karma), which must find them in
 * their cgroups' run queues; the dependency a job lends its priority to
 * from its push on, and how long a lent job waits for its loan.
 *
 * The clients' cgroups are w100, e100, w400 and w900, of those gpu.weight
 * defaults, and p100, q100, r100, s100, p0, m50 (at -50) and m100 (at
 * -100), of those gpu.priority values, under a parent at priority 100 (so
 * that the cgroups at 100 are not clamped). Whoever loads the module
 * may name a directory of the cgroup2 hierarchy that has them
 * (drm_sched_tests.gpucg_root, the project's VM harness does); without it,
 * as on UML, each test makes cgroups of its own that belong to no
 * hierarchy (gpucg_kunit_cgroup_new()). Each test registers a device of its
 * own with the controller, unpublished, so no interface file shows it.
 *
 * A client runs in a kthread worker and keeps a number of jobs queued
 * (deep) or submits one job, waits for it and sleeps (interactive, or a
 * shallow client that thinks between its jobs). Its GPU time is the sum of
 * the durations of its jobs that finished inside the measurement window,
 * which starts after a warm-up (and after the ring a deep client filled at
 * the start has drained): the mock hardware runs jobs back to back, so the
 * shares are those of the engine's time.
 *
 * What a test sets up (device, schedulers, clients, entities, workers, a
 * stopped submission queue) is undone by deferred actions, so a test that
 * fails before its first job is queued leaves nothing behind. From then on
 * it asserts nothing and tears down itself, in order: the mock's jobs are
 * the test's memory, which is freed before the setup's deferred actions
 * run. (cg_run()'s clients make their jobs as they go, and the mock
 * asserts its allocations: there, a failed allocation is not cleaned up.)
 */

#include <linux/cgroup.h>
#include <linux/cgroup_gpu.h>
#include <linux/delay.h>
#include <linux/dma-fence.h>
#include <linux/kthread.h>
#include <linux/module.h>
#include <linux/prandom.h>
#include <linux/sort.h>

#include <kunit/static_stub.h>

#include <drm/drm_file.h>

#include "sched_tests.h"
#include "../sched_internal.h"

MODULE_IMPORT_NS("EXPORTED_FOR_KUNIT_TESTING");

static char *gpucg_root;
module_param(gpucg_root, charp, 0400);
MODULE_PARM_DESC(gpucg_root, "cgroup2 path of the loader's cgroups for the gpu cgroup tests (w100, e100, w400, w900, p100, q100, r100, s100, p0, m50, m100); without it the tests make their own");

/* The cgroups a test makes without gpucg_root, by name (cg_init()) */
static const struct {
	const char *name;
	u32 weight;
	int prio;
} cg_names[] = {
	{ "w100", 100, 0 }, { "e100", 100, 0 }, { "w400", 400, 0 },
	{ "w900", 900, 0 }, { "p100", 100, 100 }, { "p0", 100, 0 },
	{ "m100", 100, -100 }, { "m50", 100, -50 }, { "q100", 100, 100 },
	{ "r100", 100, 100 }, { "s100", 100, 100 },
};

static struct gpucg *cg_made[ARRAY_SIZE(cg_names)];

#define CG_WARMUP_MS	200
#define CG_WINDOW_MS	1200
#define CG_MAX_CLIENTS	64
#define CG_BUCKET_MS	100

struct cg_client_params {
	const char *cgroup;	/* its name, as in cg_names */
	unsigned int depth;	/* jobs kept queued; 0: interactive */
	unsigned int job_us;
	unsigned int wait_us;	/* interactive: sleep between jobs */
	unsigned int start_ms;	/* starts that long after the others */
	bool high;		/* DRM_SCHED_PRIORITY_HIGH, else NORMAL */
	bool kernel;		/* the kernel's: no client, no cgroup */
	unsigned int jitter_us;	/* interactive: up to that much more sleep */
	unsigned int pause_at_ms;	/* with pause_ms: from its start */
	unsigned int pause_ms;	/* idle that long once, its jobs all done */
};

/* A shallow client: one job queued at a time, thinking @think_us between */
#define CG_SHALLOW(cg, job_us, think_us)	{ cg, 0, job_us, think_us }

/*
 * The clients a test's jobs may lend between: their jobs carry ids no DRM
 * file has, CG_LENDER_ID(i) for the i-th, which cg_lender_file_client()
 * maps to the clients in test->priv (an array of CG_LENDER_CLIENTS).
 */
#define CG_LENDER_CLIENTS	6
#define CG_LENDER_ID(i)		(U64_MAX - (i))

/*
 * drm_file_gpucg_client() for a lending test's thread, or a client's
 * worker that pushes as the test (cg_client_push()): the clients in
 * test->priv, by CG_LENDER_ID().
 */
static struct gpucg_client *cg_lender_file_client(u64 client_id)
{
	struct gpucg_client **clients = kunit_get_current_test()->priv;
	u64 i = U64_MAX - client_id;

	return i < CG_LENDER_CLIENTS ? gpucg_client_tryget(clients[i]) : NULL;
}

/* A job a client ran, for the property tests */
struct cg_job_rec {
	ktime_t submit;		/* pushed */
	ktime_t handoff;	/* handed to the mock hardware */
	ktime_t start, end;	/* ran */
	u64 seqno;		/* the engine's order of handoffs */
	unsigned int client;	/* its cg_client.index */
	u64 fseq;		/* its finished fence's, its entity's order */
	u64 dep_fseq;		/* the signaller's job it waited on; 0: none */
	/* filled in by cg_prop_loans() */
	ktime_t ready;		/* its push, or that job's handoff if later */
	ktime_t head;		/* first in its queue: the job before it left */
	ktime_t lent_at;	/* with level above its own: lent from then */
	int dep;		/* that job's record, until the records are sorted */
	unsigned int level;	/* the band it may run in, a waiter's if higher */
};

struct cg_client {
	struct kunit *test;
	struct gpucg *group;	/* its cgroup, if not one of cg_names */
	struct drm_mock_sched_entity *entity;
	struct gpucg_client *gpucg;
	struct kthread_worker *worker;
	struct kthread_work work;
	struct drm_mock_sched_job **ring;	/* depth jobs, the last queued */
	struct cg_client_params params;
	ktime_t window_start;
	ktime_t window_end;
	u64 busy_us;		/* GPU time of jobs finished in the window */
	unsigned int cycles;	/* jobs finished in the window */
	u64 wait_us;		/* their time from push to start, summed */
	u32 seed;		/* of the sleeps' jitter */
	s64 *waits;		/* with max_waits: each one's, in order */
	unsigned int nr_waits, max_waits;
	u64 *buckets;		/* with nr_buckets: GPU time per CG_BUCKET_MS */
	unsigned int nr_buckets;	/* from the window's start on */
	struct cg_job_rec *log;	/* with max_log: each job, as it retires */
	unsigned int nr_log, max_log;
	unsigned int index;	/* its number in the log's records */
	ktime_t resumed;	/* with params.pause_ms: when it came back */
	struct cg_client *signaller;	/* each job waits on its last one */
	u64 *dep_fseqs;		/* with signaller: per ring slot, what it waits on */
	u64 *fseqs;		/* waited: per ring slot, its finished fence's seqno */
	bool waited;		/* a signaller: its last job published */
	bool ids;		/* its jobs carry CG_LENDER_ID(index) */
	spinlock_t lock;	/* guards last */
	struct dma_fence *last;	/* a signaller's last job's finished fence */
	bool stop;
};

/* The part of [@start, @end) in each of @client's buckets. */
static void cg_client_bucket(struct cg_client *client, ktime_t start,
			     ktime_t end)
{
	const s64 width = CG_BUCKET_MS * USEC_PER_MSEC;
	s64 from = ktime_us_delta(start, client->window_start);
	s64 to = ktime_us_delta(end, client->window_start);
	s64 b;

	for (b = max_t(s64, from, 0) / width;
	     b < client->nr_buckets && b * width < to; b++)
		client->buckets[b] += min(to, (b + 1) * width) -
				      max(from, b * width);
}

/* The GPU time of @job if it finished inside the client's window. */
static void cg_client_count(struct cg_client *client,
			    struct drm_mock_sched_job *job)
{
	ktime_t start = ktime_sub_us(job->finish_at, job->duration_us);
	s64 wait = max_t(s64, ktime_us_delta(start, job->base.submit_ts), 0);

	if (client->nr_buckets)
		cg_client_bucket(client, start, job->finish_at);
	if (ktime_after(job->finish_at, client->window_start) &&
	    !ktime_after(job->finish_at, client->window_end)) {
		client->busy_us += job->duration_us;
		client->cycles++;
		client->wait_us += wait;
		if (client->nr_waits < client->max_waits)
			client->waits[client->nr_waits++] = wait;
	}
}

/* Up to params.jitter_us, the same sequence on every run (xorshift32) */
static unsigned int cg_jitter(struct cg_client *client)
{
	u32 x = client->seed ?: 38;

	if (!client->params.jitter_us)
		return 0;
	x ^= x << 13;
	x ^= x >> 17;
	x ^= x << 5;
	client->seed = x;
	return x % client->params.jitter_us;
}

/*
 * The job in @client's ring slot @slot has finished: counted, and with a
 * log recorded; the slot is free.
 */
static void cg_client_retire(struct cg_client *client, unsigned int slot)
{
	struct drm_mock_sched_job *job = client->ring[slot];
	struct cg_job_rec *rec;

	cg_client_count(client, job);
	client->ring[slot] = NULL;
	if (client->nr_log >= client->max_log)
		return;
	rec = &client->log[client->nr_log++];
	rec->submit = job->base.submit_ts;
	rec->handoff = job->run_at;
	rec->start = ktime_sub_us(job->finish_at, job->duration_us);
	rec->end = job->finish_at;
	rec->seqno = job->hw_fence.seqno;
	rec->client = client->index;
	rec->fseq = client->fseqs ? client->fseqs[slot] : 0;
	rec->dep_fseq = client->dep_fseqs ? client->dep_fseqs[slot] : 0;
}

/*
 * With a signaller, @job waits on the signaller's last job if that has not
 * finished: its seqno, or 0.
 */
static u64 cg_client_wait_on(struct cg_client *client,
			     struct drm_mock_sched_job *job)
{
	struct cg_client *signaller = client->signaller;
	struct dma_fence *fence;
	u64 seqno;

	if (!signaller)
		return 0;
	spin_lock(&signaller->lock);
	fence = dma_fence_get(signaller->last);
	spin_unlock(&signaller->lock);
	if (!fence || dma_fence_is_signaled(fence)) {
		dma_fence_put(fence);
		return 0;
	}
	seqno = fence->seqno;
	/* the reference goes with the dependency, or on failure */
	return drm_sched_job_add_dependency(&job->base, fence) ? 0 : seqno;
}

/*
 * Pushes @job of @client's. With ids and a signaller, the worker pushes as
 * the test: the lender's lookup of the signaller's client at the push
 * (drm_file_gpucg_client()) is stubbed for the test's thread alone, and
 * nothing in the push asserts. A signaller publishes its job, and
 * its finished fence's seqno goes to ring slot @slot (the job's fences go
 * with it: they are not read at its retirement).
 */
static void cg_client_push(struct cg_client *client,
			   struct drm_mock_sched_job *job, unsigned int slot)
{
	struct dma_fence *fence, *old;
	struct kunit *was = NULL;

	if (client->ids)
		job->base.s_fence->drm_client_id = CG_LENDER_ID(client->index);
	if (client->ids && client->signaller) {
		was = current->kunit_test;
		current->kunit_test = client->test;
	}
	if (client->waited) {
		fence = drm_mock_sched_job_submit_get_finished(job);
		client->fseqs[slot] = fence->seqno;
		spin_lock(&client->lock);
		old = client->last;
		client->last = fence;
		spin_unlock(&client->lock);
		dma_fence_put(old);
	} else {
		drm_mock_sched_job_submit(job);
	}
	if (client->ids && client->signaller)
		current->kunit_test = was;
}

/*
 * Waits for @client's queued jobs, oldest first (the next one to queue is
 * its @next-th), and retires them in that order.
 */
static void cg_client_drain(struct cg_client *client, unsigned int next,
			    long timeout)
{
	unsigned int k, slot, depth = max(client->params.depth, 1U);

	for (k = 0; k < depth; k++) {
		slot = (next + k) % depth;
		if (client->ring[slot] &&
		    drm_mock_sched_job_wait_finished(client->ring[slot], timeout))
			cg_client_retire(client, slot);
	}
}

static void cg_client_work(struct kthread_work *work)
{
	struct cg_client *client = container_of(work, typeof(*client), work);
	struct drm_mock_sched_job **ring = client->ring;
	const long timeout = 10 * HZ;
	struct drm_mock_sched_job *job;
	unsigned int i = 0, slot, depth = max(client->params.depth, 1U);
	bool paused = !client->params.pause_ms;
	ktime_t begun;

	msleep(client->params.start_ms);
	begun = ktime_get();
	while (!READ_ONCE(client->stop)) {
		if (!paused && ktime_ms_delta(ktime_get(), begun) >= client->params.pause_at_ms) {
			cg_client_drain(client, i, timeout);
			msleep(client->params.pause_ms);
			client->resumed = ktime_get();
			paused = true;
		}
		slot = i % depth;
		if (ring[slot]) {
			if (!drm_mock_sched_job_wait_finished(ring[slot], timeout))
				break;	/* that job is the oldest still: drained first */
			cg_client_retire(client, slot);
		}
		i++;
		job = drm_mock_sched_job_new(client->test, client->entity);
		drm_mock_sched_job_set_duration_us(job, client->params.job_us);
		if (client->dep_fseqs)
			client->dep_fseqs[slot] = cg_client_wait_on(client, job);
		cg_client_push(client, job, slot);
		ring[slot] = job;
		if (!client->params.depth) {
			if (!drm_mock_sched_job_wait_finished(job, timeout))
				break;
			cg_client_retire(client, slot);
			fsleep(client->params.wait_us + cg_jitter(client));
		}
	}
	cg_client_drain(client, i, timeout);
}

static void cg_device_release(void *dev)
{
	gpucg_unregister_device(dev);
	gpucg_put_device(dev);
}

KUNIT_DEFINE_ACTION_WRAPPER(cg_sched_fini, drm_mock_sched_fini,
			    struct drm_mock_scheduler *);
KUNIT_DEFINE_ACTION_WRAPPER(cg_client_put, gpucg_client_put,
			    struct gpucg_client *);
KUNIT_DEFINE_ACTION_WRAPPER(cg_entity_free, drm_mock_sched_entity_free,
			    struct drm_mock_sched_entity *);
KUNIT_DEFINE_ACTION_WRAPPER(cg_wqueue_start, drm_sched_wqueue_start,
			    struct drm_gpu_scheduler *);
KUNIT_DEFINE_ACTION_WRAPPER(cg_worker_destroy, kthread_destroy_worker,
			    struct kthread_worker *);

/*
 * A device of the test's own with @n mock schedulers of @credits slots as
 * its engines, in *@scheds; skips the test where they do not order cgroups.
 * cg_teardown() undoes it.
 */
static struct gpucg_device *cg_setup(struct kunit *test,
				     struct drm_mock_scheduler **scheds,
				     unsigned int n, unsigned int credits)
{
	struct gpucg_device *dev;
	unsigned int i;

	dev = gpucg_register_device(MKDEV(0, 0));
	KUNIT_ASSERT_FALSE(test, IS_ERR(dev));
	KUNIT_ASSERT_EQ(test, kunit_add_action_or_reset(test, cg_device_release, dev), 0);
	for (i = 0; i < n; i++) {
		scheds[i] = drm_mock_sched_new_gpucg(test, MAX_SCHEDULE_TIMEOUT,
						     credits, dev);
		KUNIT_ASSERT_EQ(test, kunit_add_action_or_reset(test, cg_sched_fini,
								scheds[i]), 0);
	}
	if (!drm_sched_gpucg_orders(&scheds[0]->base))
		kunit_skip(test, "no cgroup order under the RR policy (sched_policy=0)");
	return dev;
}

/*
 * A mock scheduler of @credits slots that is no device's engine: upstream's
 * policy alone orders its entities, by their own priorities. cg_teardown()
 * destroys it.
 */
static struct drm_mock_scheduler *cg_sched_plain(struct kunit *test,
						 unsigned int credits)
{
	struct drm_mock_scheduler *sched;

	sched = drm_mock_sched_new_gpucg(test, MAX_SCHEDULE_TIMEOUT, credits, NULL);
	KUNIT_ASSERT_EQ(test, kunit_add_action_or_reset(test, cg_sched_fini, sched), 0);
	return sched;
}

/*
 * Destroys @entities, then @scheds (and with the last of them the device),
 * at the end of a test that has run jobs on them.
 */
static void cg_teardown(struct kunit *test,
			struct drm_mock_sched_entity **entities, unsigned int n,
			struct drm_mock_scheduler **scheds, unsigned int m)
{
	unsigned int i;

	for (i = 0; i < n; i++)
		kunit_release_action(test, cg_entity_free, entities[i]);
	for (i = 0; i < m; i++)
		kunit_release_action(test, cg_sched_fini, scheds[i]);
}

/* Stops @sched's submission until cg_start(): jobs stay in their queues. */
static void cg_stop(struct kunit *test, struct drm_mock_scheduler *sched)
{
	drm_sched_wqueue_stop(&sched->base);
	KUNIT_ASSERT_EQ(test, kunit_add_action_or_reset(test, cg_wqueue_start,
							&sched->base), 0);
}

static void cg_start(struct kunit *test, struct drm_mock_scheduler *sched)
{
	kunit_release_action(test, cg_wqueue_start, &sched->base);
}

/* A client owned by @cg, a test's own cgroup, put at the end. */
static struct gpucg_client *cg_client_in(struct kunit *test,
					 struct gpucg_device *dev,
					 struct gpucg *cg)
{
	struct gpucg_client *client = gpucg_kunit_client(dev, cg);

	KUNIT_ASSERT_FALSE(test, IS_ERR_OR_NULL(client));
	KUNIT_ASSERT_EQ(test, kunit_add_action_or_reset(test, cg_client_put, client), 0);
	return client;
}

/* A client owned by the cgroup @name, put at the end. */
static struct gpucg_client *cg_client_new(struct kunit *test,
					  struct gpucg_device *dev,
					  const char *name)
{
	struct gpucg_client *client;
	struct cgroup *cgrp;
	unsigned int i;
	char *path;

	if (!gpucg_root) {
		for (i = 0; i < ARRAY_SIZE(cg_names); i++)
			if (!strcmp(cg_names[i].name, name))
				break;
		KUNIT_ASSERT_LT_MSG(test, i, ARRAY_SIZE(cg_names), "no cgroup %s", name);
		return cg_client_in(test, dev, cg_made[i]);
	}
	path = kasprintf(GFP_KERNEL, "%s/%s", gpucg_root, name);
	KUNIT_ASSERT_NOT_NULL(test, path);
	cgrp = cgroup_get_from_path(path);
	kfree(path);
	KUNIT_ASSERT_FALSE_MSG(test, IS_ERR(cgrp), "no cgroup %s under %s", name,
			       gpucg_root);
	client = gpucg_client_create_in(dev, cgrp);
	cgroup_put(cgrp);
	KUNIT_ASSERT_FALSE(test, IS_ERR_OR_NULL(client));
	KUNIT_ASSERT_EQ(test, kunit_add_action_or_reset(test, cg_client_put, client), 0);
	return client;
}

/* An entity of @client's on @sched, for cg_teardown() to destroy. */
static struct drm_mock_sched_entity *cg_entity_new(struct kunit *test,
						   struct drm_mock_scheduler *sched,
						   struct gpucg_client *client,
						   bool high)
{
	struct drm_mock_sched_entity *entity;

	entity = drm_mock_sched_entity_new(test, high ? DRM_SCHED_PRIORITY_HIGH :
					   DRM_SCHED_PRIORITY_NORMAL, sched);
	KUNIT_ASSERT_EQ(test, kunit_add_action_or_reset(test, cg_entity_free, entity), 0);
	KUNIT_ASSERT_EQ(test, drm_sched_entity_gpucg_bind(&entity->base, client), 0);
	return entity;
}

/*
 * @client's cgroup client, entity on @sched, ring and worker (the @i-th),
 * for its work to be queued on the worker; the worker goes with
 * kunit_release_action(), the rest with cg_teardown(). Without @dev (a
 * scheduler of no device) the entity has no client.
 */
static void cg_client_setup(struct kunit *test, struct cg_client *client,
			    struct gpucg_device *dev,
			    struct drm_mock_scheduler *sched, unsigned int i)
{
	client->test = test;
	if (client->params.kernel || !dev) {
		client->entity = drm_mock_sched_entity_new(test, client->params.high ?
							   DRM_SCHED_PRIORITY_HIGH :
							   DRM_SCHED_PRIORITY_NORMAL,
							   sched);
		KUNIT_ASSERT_EQ(test, kunit_add_action_or_reset(test, cg_entity_free,
								client->entity), 0);
		/* the mock's jobs carry a client id: bound to none, explicitly */
		if (dev)
			KUNIT_ASSERT_EQ(test, drm_sched_entity_gpucg_bind(&client->entity->base,
									  NULL), 0);
	} else {
		client->gpucg = client->group ? cg_client_in(test, dev, client->group) :
			cg_client_new(test, dev, client->params.cgroup);
		client->entity = cg_entity_new(test, sched, client->gpucg,
					       client->params.high);
	}
	client->ring = kunit_kcalloc(test, max(client->params.depth, 1U),
				     sizeof(*client->ring), GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, client->ring);
	if (client->signaller) {
		client->dep_fseqs = kunit_kcalloc(test, max(client->params.depth, 1U),
						  sizeof(*client->dep_fseqs), GFP_KERNEL);
		KUNIT_ASSERT_NOT_NULL(test, client->dep_fseqs);
	}
	spin_lock_init(&client->lock);
	if (client->max_log) {
		client->log = kunit_kcalloc(test, client->max_log,
					    sizeof(*client->log), GFP_KERNEL);
		KUNIT_ASSERT_NOT_NULL(test, client->log);
		client->index = i;
	}
	client->worker = kthread_create_worker(0, "drm-sched-cg-%u", i);
	KUNIT_ASSERT_FALSE(test, IS_ERR(client->worker));
	KUNIT_ASSERT_EQ(test, kunit_add_action_or_reset(test, cg_worker_destroy,
							client->worker), 0);
	kthread_init_work(&client->work, cg_client_work);
}

/*
 * Stops @n clients running on their workers: each finishes what it has
 * queued (counted in its window), and its worker goes.
 */
static void cg_clients_stop(struct kunit *test, struct cg_client *clients,
			    unsigned int n)
{
	unsigned int i;

	for (i = 0; i < n; i++)
		WRITE_ONCE(clients[i].stop, true);
	for (i = 0; i < n; i++) {
		kthread_flush_work(&clients[i].work);
		kunit_release_action(test, cg_worker_destroy, clients[i].worker);
	}
}

/*
 * Where a client of @n waits on another's jobs (cg_client.signaller), the
 * jobs of all carry ids and their lender's lookup finds them: on until
 * cg_loans_off(). Whether it is on.
 */
static bool cg_loans_on(struct kunit *test, struct cg_client *clients,
			unsigned int n)
{
	struct gpucg_client **ids;
	unsigned int i;
	bool lends = false;

	for (i = 0; i < n; i++)
		lends |= !!clients[i].signaller;
	if (!lends)
		return false;
	KUNIT_ASSERT_LE(test, n, CG_LENDER_CLIENTS);
	ids = kunit_kcalloc(test, CG_LENDER_CLIENTS, sizeof(*ids), GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, ids);
	for (i = 0; i < n; i++) {
		clients[i].ids = true;
		clients[i].index = i;
		ids[i] = clients[i].gpucg;
		if (clients[i].signaller)
			clients[i].signaller->waited = true;
	}
	for (i = 0; i < n; i++) {
		if (!clients[i].waited)
			continue;
		clients[i].fseqs = kunit_kcalloc(test, max(clients[i].params.depth, 1U),
						 sizeof(*clients[i].fseqs), GFP_KERNEL);
		KUNIT_ASSERT_NOT_NULL(test, clients[i].fseqs);
	}
	test->priv = ids;
	kunit_activate_static_stub(test, drm_file_gpucg_client, cg_lender_file_client);
	return true;
}

/* Undoes cg_loans_on(), once @n clients have stopped */
static void cg_loans_off(struct kunit *test, struct cg_client *clients,
			 unsigned int n)
{
	unsigned int i;

	kunit_deactivate_static_stub(test, drm_file_gpucg_client);
	for (i = 0; i < n; i++) {
		dma_fence_put(clients[i].last);
		clients[i].last = NULL;
	}
}

/*
 * Runs @n clients on a mock scheduler of @credits slots that follows the
 * cgroups' order, or with @upstream on one of no device, where upstream's
 * policy alone orders their entities (by their own priorities); each
 * client's busy_us and cycles are filled in, over a window of @window_ms
 * that starts after the warm-up and the time the ring takes to drain.
 * Clients may wait on others' jobs (with the cgroups' order: lend).
 */
static void cg_run_for(struct kunit *test, struct cg_client *clients,
		       unsigned int n, unsigned int credits, bool upstream,
		       unsigned int window_ms)
{
	struct drm_mock_scheduler *sched;
	unsigned int i, warmup = CG_WARMUP_MS;
	struct gpucg_device *dev = NULL;
	struct drm_mock_sched_entity **entities;
	ktime_t start;
	bool loans;

	KUNIT_ASSERT_LE(test, n, CG_MAX_CLIENTS);
	entities = kunit_kcalloc(test, n, sizeof(*entities), GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, entities);
	if (upstream)
		sched = cg_sched_plain(test, credits);
	else
		dev = cg_setup(test, &sched, 1, credits);

	for (i = 0; i < n; i++) {
		cg_client_setup(test, &clients[i], dev, sched, i);
		entities[i] = clients[i].entity;
		warmup = max(warmup, CG_WARMUP_MS +
			     credits * clients[i].params.job_us / USEC_PER_MSEC);
	}
	loans = cg_loans_on(test, clients, n);
	start = ktime_get();
	for (i = 0; i < n; i++) {
		clients[i].window_start = ktime_add_ms(start, warmup);
		clients[i].window_end = ktime_add_ms(start, warmup + window_ms);
		kthread_queue_work(clients[i].worker, &clients[i].work);
	}
	msleep(warmup + window_ms);
	cg_clients_stop(test, clients, n);
	if (loans)
		cg_loans_off(test, clients, n);
	cg_teardown(test, entities, n, &sched, 1);
}

static void cg_run_on(struct kunit *test, struct cg_client *clients,
		      unsigned int n, unsigned int credits, bool upstream)
{
	cg_run_for(test, clients, n, credits, upstream, CG_WINDOW_MS);
}

static void cg_run(struct kunit *test, struct cg_client *clients,
		   unsigned int n, unsigned int credits)
{
	cg_run_on(test, clients, n, credits, false);
}

/* Percent of the GPU time of @clients[@from..@to) over all @n. */
static unsigned int cg_share(struct cg_client *clients, unsigned int n,
			     unsigned int from, unsigned int to)
{
	u64 part = 0, all = 0;
	unsigned int i;

	for (i = 0; i < n; i++) {
		all += clients[i].busy_us;
		if (i >= from && i < to)
			part += clients[i].busy_us;
	}
	return all ? div64_u64(100 * part, all) : 0;
}

/* @clients[@i]'s share of the GPU time all @n used in bucket @b, percent */
static unsigned int cg_bucket_share(struct cg_client *clients, unsigned int n,
				    unsigned int i, unsigned int b)
{
	u64 sum = 0;
	unsigned int j;

	for (j = 0; j < n; j++)
		sum += clients[j].buckets[b];
	return sum ? div64_u64(100 * clients[i].buckets[b], sum) : 0;
}

/*
 * @clients[@i]'s share of the GPU time used by all @n in each of its
 * buckets, percent, comma-separated into @buf of @size.
 */
static void cg_series(struct cg_client *clients, unsigned int n, unsigned int i,
		      char *buf, size_t size)
{
	unsigned int b, len = 0;

	buf[0] = '\0';
	for (b = 0; b < clients[i].nr_buckets; b++)
		len += scnprintf(buf + len, size - len, "%s%u", b ? "," : "",
				 cg_bucket_share(clients, n, i, b));
}

/* Buckets of CG_BUCKET_MS for @n clients, over @ms from their window's start */
static void cg_buckets(struct kunit *test, struct cg_client *clients,
		       unsigned int n, unsigned int ms)
{
	unsigned int i;

	for (i = 0; i < n; i++) {
		clients[i].nr_buckets = ms / CG_BUCKET_MS;
		clients[i].buckets = kunit_kcalloc(test, clients[i].nr_buckets,
						   sizeof(u64), GFP_KERNEL);
		KUNIT_ASSERT_NOT_NULL(test, clients[i].buckets);
	}
}

#define CG_SERIES_LEN	256

struct cg_weight_case {
	const char *description;
	const char *heavy;	/* cgroup of the second client */
	unsigned int want;	/* its share, percent */
	unsigned int credits;
};

static const struct cg_weight_case cg_weight_cases[] = {
	{ "weights 1:1, one credit", "w100", 50, 1 },
	{ "weights 1:4, one credit", "w400", 80, 1 },
	{ "weights 1:9, one credit", "w900", 90, 1 },
	{ "weights 1:4, two credits", "w400", 80, 2 },
	{ "weights 1:9, two credits", "w900", 90, 2 },
	{ "weights 1:9, four credits", "w900", 90, 4 },
	{ "weights 1:9, a ring of 256", "w900", 90, 256 },
};

static void cg_weight_desc(const struct cg_weight_case *c, char *desc)
{
	strscpy(desc, c->description, KUNIT_PARAM_DESC_SIZE);
}

KUNIT_ARRAY_PARAM(cg_weight, cg_weight_cases, cg_weight_desc);

/*
 * Two deep clients, each keeping the ring full: each cgroup gets its
 * weight's share, within 5 points. Beside it, what the scheduler's policy
 * gives the same load with no cgroup (upstream's: an even split).
 */
static void drm_sched_cgroup_weights(struct kunit *test)
{
	const struct cg_weight_case *c = test->param_value;
	struct cg_client clients[2] = {
		{ .params = { "w100", c->credits + 4, 2000, 0 } },
		{ .params = { c->heavy, c->credits + 4, 2000, 0 } },
	};
	struct cg_client plain[2] = {
		{ .params = { NULL, c->credits + 4, 2000, 0 } },
		{ .params = { NULL, c->credits + 4, 2000, 0 } },
	};
	unsigned int share, upstream;
	char *series = kunit_kzalloc(test, CG_SERIES_LEN, GFP_KERNEL);

	KUNIT_ASSERT_NOT_NULL(test, series);
	cg_buckets(test, clients, 2, CG_WINDOW_MS);
	cg_buckets(test, plain, 2, CG_WINDOW_MS);
	cg_run(test, clients, 2, c->credits);
	share = cg_share(clients, 2, 1, 2);
	cg_run_on(test, plain, 2, c->credits, true);
	upstream = cg_share(plain, 2, 1, 2);
	kunit_info(test, "%s: %u%% (want %u%%)\n", c->description, share, c->want);
	kunit_info(test, "%s, no cgroup: %u%% (want %u%%)\n", c->description,
		   upstream, c->want);
	cg_series(clients, 2, 1, series, CG_SERIES_LEN);
	kunit_info(test, "%s: series %u ms: %s\n", c->description, CG_BUCKET_MS, series);
	cg_series(plain, 2, 1, series, CG_SERIES_LEN);
	kunit_info(test, "%s, no cgroup: series %u ms: %s\n", c->description,
		   CG_BUCKET_MS, series);
	KUNIT_EXPECT_GE(test, share + 5, c->want);
	KUNIT_EXPECT_LE(test, share, c->want + 5);
}

/*
 * Oversubscribed: one deep client in one cgroup against nine in another of
 * the same weight; the cgroups share 50:50, not 10:90 as the entities would.
 */
static void drm_sched_cgroup_oversubscribed(struct kunit *test)
{
	const unsigned int n = 10;
	struct cg_client *clients;
	unsigned int i, share;

	/* not on the stack: ten of them outgrow a kernel function's frame */
	clients = kunit_kcalloc(test, n, sizeof(*clients), GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, clients);
	clients[0].params = (struct cg_client_params){ "w100", 2, 2000, 0 };
	for (i = 1; i < n; i++)
		clients[i].params = (struct cg_client_params){ "e100", 2, 2000, 0 };
	cg_run(test, clients, n, 1);
	share = cg_share(clients, n, 0, 1);
	kunit_info(test, "one client against nine at equal weights: %u%% (want 50%%)\n",
		   share);
	KUNIT_EXPECT_GE(test, share, 45U);
	KUNIT_EXPECT_LE(test, share, 55U);
}

/*
 * Heavy rendering and an interactive client (tests_scheduler.c's case): the
 * interactive client, in a cgroup of weight 900, asks for about a tenth of
 * the engine, well below its share, and gets it as it asks: on average its
 * jobs wait for the heavy job on the hardware (up to 2.5 ms) and the
 * scheduler's own latency (about a millisecond in an emulated VM), never
 * for the heavy client's queue (three jobs, 7.5 ms), and the heavy client
 * has the rest of the engine.
 */
static void drm_sched_cgroup_interactive(struct kunit *test)
{
	struct cg_client clients[2] = {
		{ .params = { "w100", 3, 2500, 0 } },
		{ .params = { "w900", 0, 1000, 9000 } },
	};
	unsigned int wait_us, share;

	cg_run(test, clients, 2, 1);
	share = cg_share(clients, 2, 1, 2);
	KUNIT_ASSERT_GT(test, clients[1].cycles, 0U);
	wait_us = div_u64(clients[1].wait_us, clients[1].cycles);
	kunit_info(test, "interactive at weight 900: %u%% of the engine, %u jobs, %u us average wait\n",
		   share, clients[1].cycles, wait_us);
	KUNIT_EXPECT_LE(test, wait_us, 5000U);
	KUNIT_EXPECT_GE(test, share, 5U);
	KUNIT_EXPECT_LE(test, share, 20U);
}

/* Percent of the engine's time (the window) the jobs of @client took. */
static unsigned int cg_busy_pct(const struct cg_client *client)
{
	return div_u64(client->busy_us * 100, CG_WINDOW_MS * USEC_PER_MSEC);
}

struct cg_shape_case {
	const char *description;
	const char *shallow;	/* cgroup of the shallow client */
	unsigned int think_pct;	/* its think time, percent of its job */
	unsigned int credits;
	unsigned int share;	/* its share by weight against w100, percent */
	unsigned int deep_job_us;	/* the deep client's jobs; 0: as long */
};

static const struct cg_shape_case cg_shape_cases[] = {
	{ "no think, two slots, weights 9:1", "w900", 0, 2, 90 },
	{ "no think, four slots, weights 9:1", "w900", 0, 4, 90 },
	{ "no think, a ring of 256, weights 9:1", "w900", 0, 256, 90 },
	{ "no think, four slots, weights 1:1", "e100", 0, 4, 50 },
	{ "think 25%, one slot, weights 9:1", "w900", 25, 1, 90 },
	{ "think 50%, one slot, weights 9:1", "w900", 50, 1, 90 },
	{ "think 100%, one slot, weights 9:1", "w900", 100, 1, 90 },
	{ "think 50%, four slots, weights 9:1", "w900", 50, 4, 90 },
	{ "think 1000%, one slot, weights 9:1", "w900", 1000, 1, 90 },
	{ "think 1000%, a ring of 256, weights 9:1", "w900", 1000, 256, 90 },
	{ "think 100%, one slot, weights 9:1, deep jobs of 250 us", "w900", 100, 1, 90, 250 },
};

static void cg_shape_desc(const struct cg_shape_case *c, char *desc)
{
	strscpy(desc, c->description, KUNIT_PARAM_DESC_SIZE);
}

KUNIT_ARRAY_PARAM(cg_shape, cg_shape_cases, cg_shape_desc);

struct cg_shape_run {
	unsigned int demand;	/* the shallow client's part of the engine alone */
	unsigned int got;	/* its part beside the deep client */
	unsigned int share;	/* its part of the GPU time the two used */
	unsigned int busy;	/* the engine's, beside the deep client */
	unsigned int want;
};

/*
 * drm_sched_cgroup_shapes()'s load: the shallow client alone, then beside
 * the deep one, in @c's cgroups or, with @upstream, in none (upstream's
 * policy, both entities at NORMAL), held to the same share: what the
 * policy gives the load, printed, in *@run.
 */
static void cg_shape_run(struct kunit *test, const struct cg_shape_case *c,
			 bool upstream, struct cg_shape_run *run)
{
	const unsigned int job_us = 2000, think_us = job_us * c->think_pct / 100;
	const unsigned int deep_us = c->deep_job_us ?: job_us;
	const char *shallow = upstream ? NULL : c->shallow;
	const char *heavy = upstream ? NULL : "w100";
	struct cg_client alone[1] = {
		{ .params = CG_SHALLOW(shallow, job_us, think_us) },
	};
	/*
	 * The shallow client comes first: work that waits behind a ring the
	 * deep client filled before it came is owed to it afterwards, and
	 * catching up would take longer than the window.
	 */
	struct cg_client both[2] = {
		{ .params = CG_SHALLOW(shallow, job_us, think_us) },
		{ .params = { heavy, c->credits + 4, deep_us, 0, 20 } },
	};

	cg_run_on(test, alone, 1, c->credits, upstream);
	run->demand = cg_busy_pct(&alone[0]);
	cg_run_on(test, both, 2, c->credits, upstream);
	run->got = cg_busy_pct(&both[0]);
	run->busy = run->got + cg_busy_pct(&both[1]);
	run->share = cg_share(both, 2, 0, 1);
	run->want = c->think_pct ? min(run->demand, c->share * run->busy / 100) : c->share;
	kunit_info(test, "%s%s: %u%% of the engine, %u%% of the GPU time used (alone %u%%), want %u%%; engine busy %u%%\n",
		   c->description, upstream ? ", no cgroup" : "", run->got,
		   run->share, run->demand, run->want, run->busy);
}

/*
 * A shallow client (one job queued at a time, thinking between its jobs)
 * against a deep one in w100 that keeps the ring full, however many slots
 * the engine has: with no think time, the two share the GPU time used by
 * their weights, within 5 points; with think time, the shallow client gets
 * the smaller of its demand (what it gets alone) and its share of the GPU
 * time used, within 5 points. Its demand includes the latency of a kthread
 * between two jobs, a millisecond under emulation. A shallow client that
 * thinks more than twice as long as its job runs is not waited for: the
 * engine is as busy as with the deep client alone, within 10 points (two
 * runs seconds apart differ by that much under emulation on a loaded host:
 * 66% and 72% once; waiting for the client's return would leave the engine
 * idle for most of its 20 ms of think time in every 22 ms, and holding one
 * window per job would cost 5 points, within the noise either way). On a
 * ring it still gets its demand: the deep client's jobs queue about one
 * job's worth ahead of the running one, not a ring's worth (512 ms). The
 * engine's busy time is only reported there: with one 2 ms job queued it
 * idles whenever the kthread takes longer than that to queue the next,
 * 2 and 19 points in two runs under emulation. Deep
 * jobs much shorter than the think time fit in its gaps: the deep client
 * gets at least a third of what it gets alone in the time the shallow one
 * leaves (holding the engine whole would give it a tenth of the time used;
 * jobs of 250 us under emulation leave the deep client alone a quarter of
 * the engine, and half was missed by a little on a busy host). Beside it,
 * on virtual time, the same load on upstream's policy alone (no cgroup,
 * both entities at NORMAL), held to the same share: printed, not asserted.
 */
static void drm_sched_cgroup_shapes(struct kunit *test)
{
	const struct cg_shape_case *c = test->param_value;
	const unsigned int deep_us = c->deep_job_us ?: 2000;
	struct cg_client deep[1] = {
		{ .params = { "w100", c->credits + 4, deep_us, 0 } },
	};
	struct cg_shape_run run, plain;
	unsigned int got, want, busy;

	cg_shape_run(test, c, false, &run);
	if (!gpucg_root)	/* on virtual time only: the VM's figure is coarse */
		cg_shape_run(test, c, true, &plain);
	want = run.want;
	busy = run.busy;
	got = c->think_pct ? run.got : run.share;
	KUNIT_EXPECT_GE(test, got + 5, want);
	/*
	 * At most its share: more than its demand alone is the emulator's
	 * noise (the two runs are seconds apart; a run at 29% beside the deep
	 * client and 23% alone was 76% of the time used, below its share)
	 */
	if (c->think_pct)
		KUNIT_EXPECT_LE(test, got, c->share * busy / 100 + 5);
	else
		KUNIT_EXPECT_LE(test, got, want + 5);
	if (c->think_pct > 200 || c->deep_job_us) {
		cg_run(test, deep, 1, c->credits);
		kunit_info(test, "%s: the deep client alone keeps the engine %u%% busy\n",
			   c->description, cg_busy_pct(&deep[0]));
	}
	if (c->think_pct > 200 && c->credits == 1)
		KUNIT_EXPECT_GE(test, busy + 10, cg_busy_pct(&deep[0]));
	if (c->deep_job_us)
		KUNIT_EXPECT_GE(test, 300 * (run.busy - run.got),
				cg_busy_pct(&deep[0]) * (100 - run.demand));
}

/* Priority: a deep client at priority 100 runs before one at 0. */
static void drm_sched_cgroup_priority(struct kunit *test)
{
	struct cg_client clients[2] = {
		{ .params = { "p0", 4, 2000, 0 } },
		{ .params = { "p100", 4, 2000, 0 } },
	};
	unsigned int share;

	cg_run(test, clients, 2, 1);
	share = cg_share(clients, 2, 1, 2);
	kunit_info(test, "priority 100 against 0: %u%%\n", share);
	KUNIT_EXPECT_GE(test, share, 95U);
}

/*
 * Kernel jobs go first, in the scheduler's own run queues, as upstream's
 * (amdgpu's page-table updates of a file's VM are such jobs): a deep
 * entity of the kernel's takes the engine from a deep client at priority
 * 100; the same load bound to a client at 0 leaves it to that client.
 */
static void drm_sched_cgroup_kernel_work(struct kunit *test)
{
	struct cg_client kernel[2] = {
		{ .params = { "p100", 4, 2000, 0 } },
		{ .params = { .depth = 4, .job_us = 2000, .kernel = true } },
	};
	struct cg_client bound[2] = {
		{ .params = { "p100", 4, 2000, 0 } },
		{ .params = { "p0", 4, 2000, 0 } },
	};
	unsigned int unbound_share, bound_share;

	cg_run(test, kernel, 2, 1);
	unbound_share = cg_share(kernel, 2, 1, 2);
	cg_run(test, bound, 2, 1);
	bound_share = cg_share(bound, 2, 1, 2);
	kunit_info(test, "a deep load against a client at 100: %u%% as the kernel's, %u%% as a client's at 0\n",
		   unbound_share, bound_share);
	KUNIT_EXPECT_GE(test, unbound_share, 95U);
	KUNIT_EXPECT_LE(test, bound_share, 5U);
}

/*
 * Clients of one cgroup share by upstream's policy, as they would with no
 * cgroup at all: two deep clients of one cgroup, with jobs of 2 and 3 ms,
 * get even shares of GPU time under the fair policy, and take turns by job
 * under FIFO (2:3).
 */
static void drm_sched_cgroup_inside(struct kunit *test)
{
	struct cg_client clients[2] = {
		{ .params = { "w400", 4, 2000, 0 } },
		{ .params = { "w400", 4, 3000, 0 } },
	};
	unsigned int share, want = drm_sched_gpucg_fair() ? 50 : 40;

	cg_run(test, clients, 2, 1);
	share = cg_share(clients, 2, 0, 1);
	kunit_info(test, "two clients of one cgroup: %u%% (want %u%%)\n", share,
		   want);
	KUNIT_EXPECT_GE(test, share, want - 5);
	KUNIT_EXPECT_LE(test, share, want + 5);
}

/*
 * Entity priorities inside one cgroup follow upstream's policy too: under
 * FIFO, which keeps entities of each priority in a run queue of their own,
 * a high-priority client's jobs go before a normal one's of its cgroup, as
 * they would with no cgroup; under the fair policy a priority only weighs
 * the entity's vruntime, and the high one gets the larger part.
 */
static void drm_sched_cgroup_priority_inside(struct kunit *test)
{
	struct cg_client clients[2] = {
		{ .params = { "w400", 4, 2000, 0, 0, true } },
		{ .params = { "w400", 4, 2000, 0 } },
	};
	unsigned int share, want = drm_sched_gpucg_fair() ? 55 : 95;

	cg_run(test, clients, 2, 1);
	share = cg_share(clients, 2, 0, 1);
	kunit_info(test, "a high-priority client beside a normal one of its cgroup: %u%% (want %u%% or more)\n",
		   share, want);
	KUNIT_EXPECT_GE(test, share, want);
}

struct cg_count {
	struct drm_gpu_scheduler *sched;
	unsigned int own;	/* entities in the scheduler's own run queues */
	unsigned int cgroups;	/* in the cgroups' */
};

static bool cg_count_entities(struct drm_sched_rq *rq, void *data)
{
	struct drm_sched_entity *entity;
	struct cg_count *count = data;
	unsigned int i, n = 0;
	bool own = false;

	for (i = 0; i < count->sched->num_rqs; i++)
		own |= rq == count->sched->sched_rq[i];
	spin_lock(&rq->lock);
	list_for_each_entry(entity, &rq->entities, list)
		n++;
	spin_unlock(&rq->lock);
	if (own)
		count->own += n;
	else
		count->cgroups += n;
	return false;
}

/*
 * Walks over every entity see the clients' entities in their cgroups' run
 * queues: drm_sched_visit_rqs() visits them, and a hang's karma marks
 * the guilty entity, not another cgroup's.
 */
static void drm_sched_cgroup_karma(struct kunit *test)
{
	static const char * const cgroups[] = { "w100", "w400" };
	struct drm_mock_sched_job *jobs[ARRAY_SIZE(cgroups)];
	struct drm_mock_sched_entity *entities[ARRAY_SIZE(cgroups)];
	atomic_t guilty[ARRAY_SIZE(cgroups)];
	struct drm_mock_scheduler *sched;
	struct cg_count count = {};
	struct gpucg_device *dev;
	unsigned int i;
	bool cookie;

	dev = cg_setup(test, &sched, 1, 1);
	for (i = 0; i < ARRAY_SIZE(cgroups); i++) {
		entities[i] = cg_entity_new(test, sched,
					    cg_client_new(test, dev, cgroups[i]),
					    false);
		atomic_set(&guilty[i], 0);
		entities[i]->base.guilty = &guilty[i];
	}
	for (i = 0; i < ARRAY_SIZE(cgroups); i++) {
		jobs[i] = drm_mock_sched_job_new(test, entities[i]);
		drm_mock_sched_job_set_duration_us(jobs[i], 1000);
	}
	/* the jobs stay queued: their entities stay in their run queues */
	cg_stop(test, sched);
	for (i = 0; i < ARRAY_SIZE(cgroups); i++)
		drm_mock_sched_job_submit(jobs[i]);

	count.sched = &sched->base;
	KUNIT_EXPECT_FALSE(test, drm_sched_visit_rqs(&sched->base,
						     cg_count_entities, &count));
	KUNIT_EXPECT_EQ(test, count.cgroups, ARRAY_SIZE(cgroups));
	KUNIT_EXPECT_EQ(test, count.own, 0);

	/* as a timeout handler calls it: in the fence-signalling path (lockdep) */
	cookie = dma_fence_begin_signalling();
	drm_sched_increase_karma(&jobs[1]->base);
	dma_fence_end_signalling(cookie);
	KUNIT_EXPECT_EQ(test, atomic_read(&guilty[0]), 0);
	KUNIT_EXPECT_EQ(test, atomic_read(&guilty[1]), 1);

	cg_start(test, sched);
	for (i = 0; i < ARRAY_SIZE(cgroups); i++)
		KUNIT_EXPECT_TRUE(test, drm_mock_sched_job_wait_finished(jobs[i], HZ));
	cg_teardown(test, entities, ARRAY_SIZE(entities), &sched, 1);
}

/* A job of @entity's as if of the lender test's client @i */
static struct drm_mock_sched_job *cg_lender_job(struct kunit *test,
						struct drm_mock_sched_entity *entity,
						unsigned int i)
{
	struct drm_mock_sched_job *job = drm_mock_sched_job_new(test, entity);

	job->base.s_fence->drm_client_id = CG_LENDER_ID(i);
	drm_mock_sched_job_set_duration_us(job, 1000);
	return job;
}

/*
 * The lender of @job once it waits on @deps, in that order; the job is
 * pushed after, as drm_sched_entity_push_job() does.
 */
static struct dma_fence *cg_lender_of(struct kunit *test,
				      struct drm_mock_sched_job *job,
				      struct dma_fence **deps, unsigned int n)
{
	struct dma_fence *lender;
	unsigned int i;

	for (i = 0; i < n; i++)
		KUNIT_EXPECT_EQ(test, drm_sched_job_add_dependency(&job->base,
								   dma_fence_get(deps[i])), 0);
	drm_sched_job_arm(&job->base);
	lender = drm_sched_job_gpucg_lender(&job->base);
	drm_sched_entity_push_job(&job->base);
	return lender;
}

/*
 * The fence a job lends to from its push (drm_sched_job_gpucg_lender()),
 * among dependencies in the order implicit synchronization gives them (a
 * client's own earlier jobs first): not one of its own cgroup's on its own
 * scheduler, whose run queue is its own, another client's of that cgroup
 * included; the first of another cgroup's, on its scheduler or another;
 * one of its own cgroup's on another scheduler only when there is none of
 * another's.
 */
static void drm_sched_cgroup_lender(struct kunit *test)
{
	/* clients 0 to 3: the waiter's, another in w100, e100's, w400's */
	static const char * const cgroups[] = { "w100", "w100", "e100", "w400" };
	struct gpucg_client *clients[CG_LENDER_CLIENTS] = {};
	struct drm_mock_sched_job *jobs[5], *waiters[4];
	struct drm_mock_sched_entity *entities[6];
	struct dma_fence *fences[5], *others[2];
	struct drm_mock_scheduler *scheds[2];
	struct dma_fence *lenders[4];
	struct gpucg_device *dev;
	unsigned int i;

	dev = cg_setup(test, scheds, ARRAY_SIZE(scheds), 1);
	for (i = 0; i < ARRAY_SIZE(cgroups); i++)
		clients[i] = cg_client_new(test, dev, cgroups[i]);
	test->priv = clients;
	/* the waiter's, its own elsewhere, the other w100 client's, e100's, w400's two */
	entities[0] = cg_entity_new(test, scheds[0], clients[0], false);
	entities[1] = cg_entity_new(test, scheds[1], clients[0], false);
	entities[2] = cg_entity_new(test, scheds[0], clients[1], false);
	entities[3] = cg_entity_new(test, scheds[0], clients[2], false);
	entities[4] = cg_entity_new(test, scheds[1], clients[3], false);
	entities[5] = cg_entity_new(test, scheds[0], clients[3], false);
	jobs[0] = cg_lender_job(test, entities[0], 0);
	jobs[1] = cg_lender_job(test, entities[1], 0);
	jobs[2] = cg_lender_job(test, entities[2], 1);
	jobs[3] = cg_lender_job(test, entities[3], 2);
	jobs[4] = cg_lender_job(test, entities[4], 3);
	for (i = 0; i < 3; i++)
		waiters[i] = cg_lender_job(test, entities[0], 0);
	waiters[3] = cg_lender_job(test, entities[5], 3);
	/* nothing runs: every job stays in its queue */
	for (i = 0; i < ARRAY_SIZE(scheds); i++)
		cg_stop(test, scheds[i]);
	kunit_activate_static_stub(test, drm_file_gpucg_client, cg_lender_file_client);

	for (i = 0; i < ARRAY_SIZE(jobs); i++)
		fences[i] = drm_mock_sched_job_submit_get_finished(jobs[i]);
	/* own entity, own cgroup elsewhere, the other w100 client here, e100 here */
	lenders[0] = cg_lender_of(test, waiters[0], fences, 4);
	/* without e100's: its own cgroup on the other scheduler */
	lenders[1] = cg_lender_of(test, waiters[1], fences, 3);
	/* its own cgroup's on its own scheduler only: none */
	lenders[2] = cg_lender_of(test, waiters[2], &fences[2], 1);
	/* w400's waiter: its own cgroup elsewhere, then w100's first job */
	others[0] = fences[4];
	others[1] = fences[0];
	lenders[3] = cg_lender_of(test, waiters[3], others, ARRAY_SIZE(others));
	kunit_deactivate_static_stub(test, drm_file_gpucg_client);

	KUNIT_EXPECT_PTR_EQ(test, lenders[0], fences[3]);
	KUNIT_EXPECT_PTR_EQ(test, lenders[1], fences[1]);
	KUNIT_EXPECT_NULL(test, lenders[2]);
	KUNIT_EXPECT_PTR_EQ(test, lenders[3], fences[0]);
	for (i = 0; i < ARRAY_SIZE(lenders); i++)
		dma_fence_put(lenders[i]);

	for (i = 0; i < ARRAY_SIZE(scheds); i++)
		cg_start(test, scheds[i]);
	for (i = 0; i < ARRAY_SIZE(fences); i++) {
		KUNIT_EXPECT_GT(test, dma_fence_wait_timeout(fences[i], false, HZ), 0);
		dma_fence_put(fences[i]);
	}
	cg_teardown(test, entities, ARRAY_SIZE(entities), scheds, ARRAY_SIZE(scheds));
}

/*
 * The two sides of a loan across schedulers: the waiter's client, at
 * priority 100, and the holder's, at 0, in test->priv for
 * cg_lender_file_client(), with an entity of the first on @scheds[0] and
 * one of the second on @scheds[1].
 */
static void cg_loan_setup(struct kunit *test,
			  struct drm_mock_scheduler **scheds,
			  unsigned int nr_scheds, struct gpucg_client **clients,
			  struct drm_mock_sched_entity **entities)
{
	struct gpucg_device *dev = cg_setup(test, scheds, nr_scheds, 1);

	clients[0] = cg_client_new(test, dev, "p100");
	clients[1] = cg_client_new(test, dev, "w100");
	test->priv = clients;
	entities[0] = cg_entity_new(test, scheds[0], clients[0], false);
	entities[1] = cg_entity_new(test, scheds[1], clients[1], false);
}

/*
 * A loan in place when the entity that holds the job goes with the job
 * still queued (a process killed, a device unplugged): its teardown
 * cancels the job and drops the loan, so the waiter runs and nothing
 * points at the entity that went (KASAN would see a touch of it).
 */
static void drm_sched_cgroup_loan_outlives_holder(struct kunit *test)
{
	struct gpucg_client *clients[CG_LENDER_CLIENTS] = {};
	struct drm_mock_sched_entity *entities[2];
	struct drm_mock_scheduler *scheds[2];
	struct drm_mock_sched_job *job, *waiter;
	struct dma_fence *fence;

	cg_loan_setup(test, scheds, ARRAY_SIZE(scheds), clients, entities);
	job = cg_lender_job(test, entities[1], 1);
	waiter = cg_lender_job(test, entities[0], 0);
	/* the holder's scheduler runs nothing: its job stays queued */
	cg_stop(test, scheds[1]);
	kunit_activate_static_stub(test, drm_file_gpucg_client, cg_lender_file_client);
	fence = drm_mock_sched_job_submit_get_finished(job);
	KUNIT_ASSERT_EQ(test, drm_sched_job_add_dependency(&waiter->base,
							   dma_fence_get(fence)), 0);
	drm_mock_sched_job_submit(waiter);
	kunit_deactivate_static_stub(test, drm_file_gpucg_client);
	KUNIT_EXPECT_PTR_EQ(test, entities[0]->base.gpucg_head.boost.to,
			    &entities[1]->base.gpucg);

	/* as a killed process's teardown, once its flush has given up */
	kunit_remove_action(test, cg_entity_free, entities[1]);
	drm_sched_entity_fini(&entities[1]->base);
	KUNIT_EXPECT_NULL(test, entities[0]->base.gpucg_head.boost.to);
	KUNIT_EXPECT_GT(test, dma_fence_wait_timeout(fence, false, HZ), 0);
	KUNIT_EXPECT_LT(test, fence->error, 0);
	KUNIT_EXPECT_TRUE(test, drm_mock_sched_job_wait_finished(waiter, HZ));
	dma_fence_put(fence);
	cg_start(test, scheds[1]);
	cg_teardown(test, entities, 1, scheds, ARRAY_SIZE(scheds));
}

/*
 * A loan to a job killed with its entity while the entity stays (a flush
 * that gave up on an exiting process whose file is open elsewhere): the
 * killed job leaves its queue once what it waits for is done, and the loan
 * ends then, at its scheduler's next selection, not when the entity goes
 * or when the waiter next submits. The holder's job waits on a gate that
 * a stopped scheduler holds until after the kill.
 */
static void drm_sched_cgroup_loan_ends_with_killed_job(struct kunit *test)
{
	struct gpucg_client *clients[CG_LENDER_CLIENTS] = {};
	struct drm_mock_sched_job *gate, *job, *waiter;
	struct drm_mock_sched_entity *entities[3];
	struct drm_mock_scheduler *scheds[3];
	struct dma_fence *gated, *fence;
	struct gpucg_queue *to = NULL;
	struct gpucg_boost *loan;
	unsigned long end;

	cg_loan_setup(test, scheds, ARRAY_SIZE(scheds), clients, entities);
	/* the gate's in the holder's cgroup */
	entities[2] = cg_entity_new(test, scheds[2], clients[1], false);
	loan = &entities[0]->base.gpucg_head.boost;
	cg_stop(test, scheds[2]);
	gate = cg_lender_job(test, entities[2], 1);
	job = cg_lender_job(test, entities[1], 1);
	waiter = cg_lender_job(test, entities[0], 0);
	kunit_activate_static_stub(test, drm_file_gpucg_client, cg_lender_file_client);
	gated = drm_mock_sched_job_submit_get_finished(gate);
	KUNIT_ASSERT_EQ(test, drm_sched_job_add_dependency(&job->base,
							   dma_fence_get(gated)), 0);
	fence = drm_mock_sched_job_submit_get_finished(job);
	KUNIT_ASSERT_EQ(test, drm_sched_job_add_dependency(&waiter->base,
							   dma_fence_get(fence)), 0);
	drm_mock_sched_job_submit(waiter);
	kunit_deactivate_static_stub(test, drm_file_gpucg_client);
	KUNIT_EXPECT_PTR_EQ(test, loan->to, &entities[1]->base.gpucg);

	/* killed, the job still waits for the gate: the loan stays */
	drm_sched_entity_kill(&entities[1]->base);
	KUNIT_EXPECT_PTR_EQ(test, loan->to, &entities[1]->base.gpucg);
	cg_start(test, scheds[2]);
	KUNIT_EXPECT_GT(test, dma_fence_wait_timeout(fence, false, HZ), 0);
	KUNIT_EXPECT_LT(test, fence->error, 0);
	KUNIT_EXPECT_TRUE(test, drm_mock_sched_job_wait_finished(waiter, HZ));
	/* the job has left: the loan goes, the holder's entity still there */
	for (end = jiffies + HZ; time_before(jiffies, end); msleep(1)) {
		to = READ_ONCE(loan->to);
		if (!to)
			break;
	}
	KUNIT_EXPECT_NULL(test, to);
	dma_fence_put(fence);
	dma_fence_put(gated);
	cg_teardown(test, entities, ARRAY_SIZE(entities), scheds, ARRAY_SIZE(scheds));
}

/* drm_sched_cgroup_loan_awaited()'s jobs, and its pairs of them */
#define CG_AWAIT_SIGNAL_US	5000
#define CG_AWAIT_MIDDLE_US	10000
#define CG_AWAIT_WARMUP		5	/* pairs that teach the engine */
#define CG_AWAIT_PAIRS		40	/* pairs measured */

struct cg_await_case {
	const char *description;
	unsigned int gap_us;	/* the signaller's submission to the waiter's */
};

static const struct cg_await_case cg_await_cases[] = {
	{ "a native submission gap (20 us)", 20 },
	{ "an emulator's submission gap (1.5 ms)", 1500 },
};

static void cg_await_desc(const struct cg_await_case *c, char *desc)
{
	strscpy(desc, c->description, KUNIT_PARAM_DESC_SIZE);
}

KUNIT_ARRAY_PARAM(cg_await, cg_await_cases, cg_await_desc);

static int cg_cmp_s64(const void *a, const void *b)
{
	s64 x = *(const s64 *)a, y = *(const s64 *)b;

	return x < y ? -1 : x > y;
}

/*
 * A loan awaited (the core's essay, "A loan comes only once the waiter's
 * job is queued"): a client at -100 queues a 5 ms job, and a client at 100
 * queues, the case's gap later, a 1 ms job on another scheduler that waits
 * for it, then waits for its own, and again; a deep client at 0 keeps the
 * signaller's scheduler busy with 10 ms jobs. Until the waiter's job comes
 * the signaller's job sits in its own band, and a middle job started then
 * would hold it for most of 10 ms. The engine expects the signaller back
 * in the band it was lent and awaits the loan once, so the job starts when
 * the loan comes: from the waiter's submission to the job's start, the
 * median is within a tenth of a middle job (it is 0 at both gaps). Booted
 * with gpu_anticipate_us=0 (no anticipation), a middle job starts first:
 * 9.0 ms with the native gap, 7.1 ms with the emulator's. (The VM tier
 * measured this once, through an emulator whose round trips between the
 * two clients outgrew the engine's bounded wait on a loaded host.)
 */
static void drm_sched_cgroup_loan_awaited(struct kunit *test)
{
	const struct cg_await_case *c = test->param_value;
	struct gpucg_client *clients[CG_LENDER_CLIENTS] = {};
	struct cg_client middle = {
		.params = { "p0", 2, CG_AWAIT_MIDDLE_US, 0 },
	};
	struct drm_mock_sched_job *signal, *wait;
	struct drm_mock_sched_entity *entities[3];
	struct drm_mock_scheduler *scheds[2];
	struct gpucg_device *dev;
	struct dma_fence *fence;
	unsigned int i, n = 0;
	ktime_t start;
	s64 *beyond;

	beyond = kunit_kcalloc(test, CG_AWAIT_PAIRS, sizeof(*beyond), GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, beyond);
	dev = cg_setup(test, scheds, ARRAY_SIZE(scheds), 1);
	/* the waiter's at 100, the signaller's at -100 */
	clients[0] = cg_client_new(test, dev, "p100");
	clients[1] = cg_client_new(test, dev, "m100");
	test->priv = clients;
	entities[0] = cg_entity_new(test, scheds[0], clients[0], false);
	entities[1] = cg_entity_new(test, scheds[1], clients[1], false);
	cg_client_setup(test, &middle, dev, scheds[1], 0);
	entities[2] = middle.entity;

	kthread_queue_work(middle.worker, &middle.work);
	msleep(CG_AWAIT_MIDDLE_US / USEC_PER_MSEC);
	kunit_activate_static_stub(test, drm_file_gpucg_client, cg_lender_file_client);
	for (i = 0; i < CG_AWAIT_WARMUP + CG_AWAIT_PAIRS; i++) {
		signal = cg_lender_job(test, entities[1], 1);
		drm_mock_sched_job_set_duration_us(signal, CG_AWAIT_SIGNAL_US);
		wait = cg_lender_job(test, entities[0], 0);
		fence = drm_mock_sched_job_submit_get_finished(signal);
		fsleep(c->gap_us);
		if (drm_sched_job_add_dependency(&wait->base, fence)) {
			drm_sched_job_cleanup(&wait->base);
			break;
		}
		drm_mock_sched_job_submit(wait);
		if (!drm_mock_sched_job_wait_finished(wait, HZ))
			break;
		start = ktime_sub_us(signal->finish_at, signal->duration_us);
		if (i >= CG_AWAIT_WARMUP)
			beyond[n++] = ktime_us_delta(start, wait->base.submit_ts);
	}
	kunit_deactivate_static_stub(test, drm_file_gpucg_client);
	cg_clients_stop(test, &middle, 1);
	cg_teardown(test, entities, ARRAY_SIZE(entities), scheds, ARRAY_SIZE(scheds));

	KUNIT_ASSERT_EQ(test, n, CG_AWAIT_PAIRS);
	sort(beyond, n, sizeof(*beyond), cg_cmp_s64, NULL);
	kunit_info(test, "%s: the signaller's job started %lld us (median) after the waiter's submission, %lld us at the 90th percentile, behind middle jobs of %u us\n",
		   c->description, beyond[n / 2], beyond[n * 9 / 10],
		   CG_AWAIT_MIDDLE_US);
	KUNIT_EXPECT_LE(test, beyond[n / 2], CG_AWAIT_MIDDLE_US / 10);
}

/* drm_sched_cgroup_inversion()'s rounds and its middle load */
#define CG_INV_WARMUP_MS	200
#define CG_INV_WINDOW_MS	1000
#define CG_INV_MIDDLE_US	5000
#define CG_INV_MAX_SIGNALLERS	2

struct cg_inv_case {
	const char *description;
	unsigned int signallers;	/* 1, or 2 for a chain */
	bool apart;		/* each signaller on a scheduler of its own */
	unsigned int job_us;	/* the waiter's and the signallers' jobs */
	unsigned int gap_us;	/* between one submission and the next */
};

static const struct cg_inv_case cg_inv_cases[] = {
	{ "one scheduler, 1 ms jobs, native gap", 1, false, 1000, 20 },
	{ "one scheduler, 3 ms jobs, native gap", 1, false, 3000, 20 },
	{ "two schedulers, 1 ms jobs, native gap", 1, true, 1000, 20 },
	{ "two schedulers, 3 ms jobs, native gap", 1, true, 3000, 20 },
	{ "a chain of three, 1 ms jobs, native gap", 2, true, 1000, 20 },
	{ "a chain of three, 3 ms jobs, native gap", 2, true, 3000, 20 },
	{ "one scheduler, 1 ms jobs, emulator's gap", 1, false, 1000, 1500 },
	{ "two schedulers, 1 ms jobs, emulator's gap", 1, true, 1000, 1500 },
	{ "a chain of three, 1 ms jobs, emulator's gap", 2, true, 1000, 1500 },
	{ "two schedulers, 3 ms jobs, emulator's gap", 1, true, 3000, 1500 },
};

static void cg_inv_desc(const struct cg_inv_case *c, char *desc)
{
	strscpy(desc, c->description, KUNIT_PARAM_DESC_SIZE);
}

KUNIT_ARRAY_PARAM(cg_inv, cg_inv_cases, cg_inv_desc);

/*
 * Who is who in cg_inv_rate(): the cgroups of the waiter, of each
 * signaller (the first is the one the waiter waits on) and of the middle
 * load; or, with no waiter's cgroup, no cgroup at all (upstream's policy
 * alone, on schedulers of no device) and each one's entity priority there
 * (the middle load's HIGH or NORMAL).
 */
struct cg_inv_roles {
	const char *waiter, *signallers[CG_INV_MAX_SIGNALLERS], *middle;
	enum drm_sched_priority waiter_prio, signaller_prio;
	bool middle_high;
};

/*
 * An entity on @sched of @cgroup's, its client in *@client (with @dev), or
 * with no @dev of no client at @prio; destroyed by cg_teardown().
 */
static struct drm_mock_sched_entity *cg_inv_entity(struct kunit *test,
						   struct gpucg_device *dev,
						   struct drm_mock_scheduler *sched,
						   const char *cgroup,
						   enum drm_sched_priority prio,
						   struct gpucg_client **client)
{
	struct drm_mock_sched_entity *entity;

	if (dev) {
		*client = cg_client_new(test, dev, cgroup);
		return cg_entity_new(test, sched, *client, false);
	}
	entity = drm_mock_sched_entity_new(test, prio, sched);
	KUNIT_ASSERT_EQ(test, kunit_add_action_or_reset(test, cg_entity_free, entity), 0);
	return entity;
}

/*
 * The rounds per second of the waiter of @roles, each round a job of each
 * signaller (the last first, each waiting on the one before) and then the
 * waiter's job waiting on the first, submitted @c->gap_us apart, while a
 * deep middle load keeps every signaller's scheduler busy. Counted over a
 * window after a warm-up.
 */
static unsigned int cg_inv_rate(struct kunit *test, const struct cg_inv_case *c,
				const struct cg_inv_roles *roles)
{
	struct gpucg_client *clients[CG_LENDER_CLIENTS] = {};
	struct drm_mock_sched_entity *entities[1 + 2 * CG_INV_MAX_SIGNALLERS];
	struct drm_mock_scheduler *scheds[1 + CG_INV_MAX_SIGNALLERS];
	struct cg_client middles[CG_INV_MAX_SIGNALLERS] = {};
	unsigned int i, n = 0, nr_scheds, nr_middles, rounds = 0;
	struct drm_mock_sched_job *job;
	struct gpucg_device *dev = NULL;
	struct dma_fence *fence;
	ktime_t begin, end;

	nr_scheds = c->apart ? 1 + c->signallers : 1;
	nr_middles = nr_scheds - (c->apart ? 1 : 0);
	if (roles->waiter)
		dev = cg_setup(test, scheds, nr_scheds, 1);
	else
		for (i = 0; i < nr_scheds; i++)
			scheds[i] = cg_sched_plain(test, 1);
	entities[n++] = cg_inv_entity(test, dev, scheds[0], roles->waiter,
				      roles->waiter_prio, &clients[0]);
	for (i = 0; i < c->signallers; i++)
		entities[n++] = cg_inv_entity(test, dev, scheds[c->apart ? 1 + i : 0],
					      roles->signallers[i],
					      roles->signaller_prio, &clients[1 + i]);
	test->priv = clients;
	for (i = 0; i < nr_middles; i++) {
		middles[i].params = (struct cg_client_params){
			.cgroup = roles->middle, .depth = 2,
			.job_us = CG_INV_MIDDLE_US, .high = roles->middle_high };
		cg_client_setup(test, &middles[i], dev,
				scheds[nr_scheds - nr_middles + i], i);
		entities[n++] = middles[i].entity;
		kthread_queue_work(middles[i].worker, &middles[i].work);
	}

	begin = ktime_add_ms(ktime_get(), CG_INV_WARMUP_MS);
	end = ktime_add_ms(begin, CG_INV_WINDOW_MS);
	if (dev)
		kunit_activate_static_stub(test, drm_file_gpucg_client,
					   cg_lender_file_client);
	while (ktime_before(ktime_get(), end)) {
		fence = NULL;
		for (i = c->signallers + 1; i-- > 0;) {
			job = cg_lender_job(test, entities[i], i);
			drm_mock_sched_job_set_duration_us(job, c->job_us);
			if (fence && drm_sched_job_add_dependency(&job->base, fence)) {
				drm_sched_job_cleanup(&job->base);
				goto out;
			}
			if (i) {
				fence = drm_mock_sched_job_submit_get_finished(job);
				fsleep(c->gap_us);
			} else {
				drm_mock_sched_job_submit(job);
			}
		}
		if (!drm_mock_sched_job_wait_finished(job, HZ))
			break;
		if (ktime_after(job->finish_at, begin) && !ktime_after(job->finish_at, end))
			rounds++;
	}
out:
	if (dev)
		kunit_deactivate_static_stub(test, drm_file_gpucg_client);
	cg_clients_stop(test, middles, nr_middles);
	cg_teardown(test, entities, n, scheds, nr_scheds);
	return rounds * MSEC_PER_SEC / CG_INV_WINDOW_MS;
}

/*
 * Priority inversion against its control (issue 38's cases): a waiter at
 * 100 whose every job waits on a job of a signaller at -100 (or, along a
 * chain, of one at -50 that waits on one at -100), each signaller's
 * scheduler kept busy by a deep client at 0 with 5 ms jobs, against the
 * same load with everyone in the waiter's band, where there is nothing to
 * invert. The waiter's rate is at least 95% of its control's with a
 * native submission gap (96% to 169%: a signaller lifted above the
 * middle does better than one that shares with it by weight); with an
 * emulator's it is shown: 86% across two schedulers and 53% along the
 * chain with 1 ms jobs, where the loan comes later than twice the
 * signaller's job after its job, the engine's bound on waiting for it
 * (the core's essay), and a middle job starts in between. That is what
 * the VM measured as 58% to 81%: the emulator's latencies, not a fault
 * of the policy that native latencies would show.
 *
 * Beside it, on virtual time, upstream's policy alone with no cgroup: the
 * waiter's entity at HIGH, the signallers' at LOW, the middle load's at
 * NORMAL, against everyone at HIGH; printed, not asserted.
 */
static void drm_sched_cgroup_inversion(struct kunit *test)
{
	static const struct cg_inv_roles low = {
		.waiter = "p100", .signallers = { "m100" }, .middle = "p0",
	}, chain = {
		.waiter = "p100", .signallers = { "m50", "m100" }, .middle = "p0",
	}, same = {
		.waiter = "p100", .signallers = { "q100", "r100" }, .middle = "s100",
	}, plain_low = {
		.waiter_prio = DRM_SCHED_PRIORITY_HIGH,
		.signaller_prio = DRM_SCHED_PRIORITY_LOW,
	}, plain_same = {
		.waiter_prio = DRM_SCHED_PRIORITY_HIGH,
		.signaller_prio = DRM_SCHED_PRIORITY_HIGH, .middle_high = true,
	};
	const struct cg_inv_case *c = test->param_value;
	unsigned int inverted, control;

	inverted = cg_inv_rate(test, c, c->signallers > 1 ? &chain : &low);
	control = cg_inv_rate(test, c, &same);
	kunit_info(test, "%s: %u rounds/s, %u in the waiter's band: %u%%\n",
		   c->description, inverted, control,
		   control ? inverted * 100 / control : 0);
	KUNIT_EXPECT_GT(test, control, 0U);
	KUNIT_EXPECT_GT(test, inverted, 0U);
	if (c->gap_us < 100)
		KUNIT_EXPECT_GE(test, inverted * 100, control * 95);

	if (gpucg_root)		/* on virtual time only: the VM's figure is coarse */
		return;
	inverted = cg_inv_rate(test, c, &plain_low);
	control = cg_inv_rate(test, c, &plain_same);
	kunit_info(test, "%s, no cgroup: %u rounds/s, %u in the waiter's band: %u%%\n",
		   c->description, inverted, control,
		   control ? inverted * 100 / control : 0);
}

KUNIT_DEFINE_ACTION_WRAPPER(cg_cgroup_free, gpucg_kunit_cgroup_free,
			    struct gpucg *);

/* A cgroup of the test's own, freed at its end. */
static struct gpucg *cg_cgroup_new(struct kunit *test, struct gpucg *parent,
				   u32 weight, int prio)
{
	struct gpucg *cg = gpucg_kunit_cgroup_new(parent, weight, prio);

	KUNIT_ASSERT_NOT_NULL(test, cg);
	KUNIT_ASSERT_EQ(test, kunit_add_action_or_reset(test, cg_cgroup_free, cg), 0);
	return cg;
}

/*
 * The scenarios below measure the policy on virtual time (tools/sim.sh),
 * where every figure is exact, and are skipped where the loader names its
 * cgroups (drm_sched_tests.gpucg_root: the VM, whose emulated clock would
 * only blur them): the tree's and the change's make cgroups of their own
 * (gpucg_kunit_cgroup_new()), which a real hierarchy would not show; the
 * high-priority wait's use the named ones, and is skipped by choice.
 */
static void cg_virtual_time_only(struct kunit *test)
{
	if (gpucg_root)
		kunit_skip(test, "on virtual time only (tools/sim.sh)");
}

/* A test's own cgroup at @weight and priority 0 under @parent (NULL: root) */
static struct gpucg *cg_group(struct kunit *test, struct gpucg *parent,
			      u32 weight)
{
	return cg_cgroup_new(test, parent, weight, 0);
}

struct cg_wait_case {
	const char *description;
	unsigned int credits;
};

static const struct cg_wait_case cg_wait_cases[] = {
	{ "one slot", 1 },
	{ "two slots", 2 },
	{ "four slots", 4 },
	{ "a ring of 256", 256 },
};

static void cg_wait_desc(const struct cg_wait_case *c, char *desc)
{
	strscpy(desc, c->description, KUNIT_PARAM_DESC_SIZE);
}

KUNIT_ARRAY_PARAM(cg_wait, cg_wait_cases, cg_wait_desc);

#define CG_WAIT_DEEP_US		2000
#define CG_WAIT_MAX		1024

/* The @pct-th percentile of @client's waits, in hundredths of a deep job */
static unsigned int cg_wait_pct(struct cg_client *client, unsigned int pct)
{
	unsigned int n = client->nr_waits;

	if (!n)
		return 0;
	sort(client->waits, n, sizeof(*client->waits), cg_cmp_s64, NULL);
	return div_s64(client->waits[min(n - 1, n * pct / 100)] * 100,
		       CG_WAIT_DEEP_US);
}

/*
 * The high-priority wait: a client at priority 100 that submits a 1 ms job,
 * waits for it and thinks 3 to 5 ms, against a deep client at 0 that keeps the
 * engine's slots full of 2 ms jobs. Each of its jobs waits from its push to
 * its start for at most the deep job on the engine: its 99th percentile is
 * within one deep job, however many slots the engine has. Beside it, the
 * same load on upstream's policy alone, the client's entity at
 * DRM_SCHED_PRIORITY_HIGH and the deep one's at NORMAL.
 */
static void drm_sched_cgroup_prio_wait(struct kunit *test)
{
	const struct cg_wait_case *c = test->param_value;
	struct cg_client clients[2] = {
		{ .params = CG_SHALLOW("p100", 1000, 3000) },
		{ .params = { "p0", c->credits + 4, CG_WAIT_DEEP_US, 0 } },
	};
	struct cg_client plain[2] = {
		{ .params = { NULL, 0, 1000, 3000, 0, true } },
		{ .params = { NULL, c->credits + 4, CG_WAIT_DEEP_US, 0 } },
	};
	unsigned int p50, p99, up50, up99;

	cg_virtual_time_only(test);
	/* thinking 3 to 5 ms, it comes at every phase of the deep jobs */
	clients[0].params.jitter_us = 2000;
	plain[0].params.jitter_us = 2000;
	clients[0].max_waits = CG_WAIT_MAX;
	clients[0].waits = kunit_kcalloc(test, CG_WAIT_MAX, sizeof(s64), GFP_KERNEL);
	plain[0].max_waits = CG_WAIT_MAX;
	plain[0].waits = kunit_kcalloc(test, CG_WAIT_MAX, sizeof(s64), GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, clients[0].waits);
	KUNIT_ASSERT_NOT_NULL(test, plain[0].waits);

	cg_run(test, clients, 2, c->credits);
	cg_run_on(test, plain, 2, c->credits, true);
	KUNIT_ASSERT_GT(test, clients[0].nr_waits, 100U);
	KUNIT_ASSERT_GT(test, plain[0].nr_waits, 0U);
	p50 = cg_wait_pct(&clients[0], 50);
	p99 = cg_wait_pct(&clients[0], 99);
	up50 = cg_wait_pct(&plain[0], 50);
	up99 = cg_wait_pct(&plain[0], 99);
	kunit_info(test, "%s: p50 %u.%02u jobs, p99 %u.%02u jobs (%u samples)\n",
		   c->description, p50 / 100, p50 % 100, p99 / 100, p99 % 100,
		   clients[0].nr_waits);
	kunit_info(test, "%s, no cgroup: p50 %u.%02u jobs, p99 %u.%02u jobs (%u samples)\n",
		   c->description, up50 / 100, up50 % 100, up99 / 100, up99 % 100,
		   plain[0].nr_waits);
	KUNIT_EXPECT_LE(test, p99, 100U);
}

#define CG_TREE_MAX	64

/* A cgroup of a scenario's tree: a client in it if @job_us */
struct cg_node {
	int parent;		/* its index in the case's nodes; -1: the root */
	u32 weight;
	unsigned int job_us;	/* its deep client's jobs; 0: no client */
	int prio;		/* its gpu.priority */
};

struct cg_tree_case {
	const char *description;
	unsigned int nr_nodes;
	const struct cg_node *nodes;	/* NULL: nr_nodes at weight 100 */
	unsigned int credits;		/* 0: one */
};

static const struct cg_node cg_tree_1_100[] = {
	{ -1, 100, 2000 }, { -1, 10000, 2000 },
};

static const struct cg_node cg_tree_10000_1[] = {
	{ -1, 10000, 2000 }, { -1, 1, 2000 },
};

/* weights drawn once at random (prandom, seed 38), fixed here */
static const struct cg_node cg_tree_random[] = {
	{ -1, 4177, 2000 }, { -1, 312, 2000 }, { -1, 9050, 2000 },
	{ -1, 61, 2000 }, { -1, 1500, 2000 }, { -1, 735, 2000 },
	{ -1, 2, 2000 }, { -1, 268, 2000 },
};

/* A at 300 (A1 at 100, A2 at 300 with A2a and A2b at 100), B at 100 (B1) */
static const struct cg_node cg_tree_levels[] = {
	{ -1, 300, 0 }, { -1, 100, 0 },
	{ 0, 100, 2000 }, { 0, 300, 0 },
	{ 3, 100, 2000 }, { 3, 100, 2000 },
	{ 1, 100, 2000 },
};

static const struct cg_node cg_tree_mixed[] = {
	{ -1, 100, 1000 }, { -1, 100, 7000 },
	{ -1, 300, 7000 }, { -1, 100, 1000 },
};

/*
 * A at 10000 with a client of 0.5 ms jobs and, below it at -100, one of
 * 64 ms; B at 100 with one of 5 ms; four slots. A's band flips to -100
 * whenever its 0.5 ms jobs are all in flight, and back when the next is
 * queued: no idle period, and A keeps its place (it got 37.5% when each
 * flip back counted as one).
 */
static const struct cg_node cg_tree_flip[] = {
	{ -1, 10000, 0 }, { 0, 100, 500 }, { 0, 100, 64000, -100 },
	{ -1, 100, 5000 },
};

static const struct cg_tree_case cg_tree_cases[] = {
	{ "weights 1:100", ARRAY_SIZE(cg_tree_1_100), cg_tree_1_100 },
	{ "weights 10000:1", ARRAY_SIZE(cg_tree_10000_1), cg_tree_10000_1 },
	{ "eight random weights", ARRAY_SIZE(cg_tree_random), cg_tree_random },
	{ "a tree of three levels", ARRAY_SIZE(cg_tree_levels), cg_tree_levels },
	{ "jobs of 1 and 7 ms, weights 1:1 and 3:1", ARRAY_SIZE(cg_tree_mixed),
	  cg_tree_mixed },
	{ "60 cgroups of equal weight", 60, NULL },
	{ "a band that flips as the ring fills, 10000:100, four slots",
	  ARRAY_SIZE(cg_tree_flip), cg_tree_flip, 4 },
};

static void cg_tree_desc(const struct cg_tree_case *c, char *desc)
{
	strscpy(desc, c->description, KUNIT_PARAM_DESC_SIZE);
}

KUNIT_ARRAY_PARAM(cg_tree, cg_tree_cases, cg_tree_desc);

static struct cg_node cg_tree_node(const struct cg_tree_case *c, unsigned int i)
{
	return c->nodes ? c->nodes[i] : (struct cg_node){ -1, 100, 2000 };
}

/* @i's effective priority: the least set on its path */
static int cg_tree_prio(const struct cg_tree_case *c, int i)
{
	int prio = INT_MAX;

	for (; i >= 0; i = cg_tree_node(c, i).parent)
		prio = min(prio, cg_tree_node(c, i).prio);
	return prio;
}

/*
 * @i's share by the weights, in millionths: its weight over its siblings'
 * (those with a client below them), along its path.
 */
static u64 cg_tree_want(const struct cg_tree_case *c, const bool *active,
			unsigned int i)
{
	u64 share = 1000000;
	unsigned int j;
	int node = i;

	while (node >= 0) {
		struct cg_node me = cg_tree_node(c, node);
		u64 sum = 0;

		for (j = 0; j < c->nr_nodes; j++)
			if (active[j] && cg_tree_node(c, j).parent == me.parent)
				sum += cg_tree_node(c, j).weight;
		share = div64_u64(share * me.weight, sum);
		node = me.parent;
	}
	return share;
}

/*
 * Per-cgroup shares in a tree (issue 38's loads): deep clients in the
 * cgroups of @c with a client, one slot unless @c says, each cgroup's share
 * of the GPU time used against its weight's along its path (among those of
 * the highest band with a client; below it, none). Beside it, where no
 * cgroup has a priority, the same clients on upstream's policy alone. The
 * largest distance is printed in tenths of a point, and with equal weights
 * Jain's fairness index of the shares ((sum x)^2 / (n sum x^2): 1 when all
 * are equal).
 */
static void drm_sched_cgroup_tree(struct kunit *test)
{
	const struct cg_tree_case *c = test->param_value;
	const unsigned int credits = c->credits ?: 1;
	struct cg_client *clients, *plain;
	struct gpucg **groups;
	unsigned int i, n = 0, err, worst = 0, worst_plain = 0;
	int top = INT_MIN;
	bool prios = false;
	u64 all = 0, all_plain = 0, *want;
	u64 jain[2][2] = {};	/* per run: sum x, sum x^2, x per mille */
	bool *active;

	cg_virtual_time_only(test);
	KUNIT_ASSERT_LE(test, c->nr_nodes, CG_TREE_MAX);
	groups = kunit_kcalloc(test, c->nr_nodes, sizeof(*groups), GFP_KERNEL);
	active = kunit_kcalloc(test, c->nr_nodes, sizeof(*active), GFP_KERNEL);
	clients = kunit_kcalloc(test, c->nr_nodes, sizeof(*clients), GFP_KERNEL);
	plain = kunit_kcalloc(test, c->nr_nodes, sizeof(*plain), GFP_KERNEL);
	want = kunit_kcalloc(test, c->nr_nodes, sizeof(*want), GFP_KERNEL);
	KUNIT_ASSERT_TRUE(test, groups && active && clients && plain && want);

	/* the highest band with a client: the others' work waits (share 0) */
	for (i = 0; i < c->nr_nodes; i++) {
		if (cg_tree_node(c, i).job_us)
			top = max(top, cg_tree_prio(c, i));
		prios |= cg_tree_node(c, i).prio;
	}
	/* parents come first in a case: made in order */
	for (i = 0; i < c->nr_nodes; i++) {
		struct cg_node node = cg_tree_node(c, i);

		KUNIT_ASSERT_LT(test, node.parent, (int)i);
		groups[i] = cg_cgroup_new(test, node.parent < 0 ? NULL : groups[node.parent],
					  node.weight, node.prio);
		if (!node.job_us)
			continue;
		for (int up = i; up >= 0 && cg_tree_prio(c, i) == top;
		     up = cg_tree_node(c, up).parent)
			active[up] = true;
		clients[n] = (struct cg_client){
			.group = groups[i],
			.params = { NULL, credits + 1, node.job_us, 0 },
		};
		plain[n].params = clients[n].params;
		n++;
	}
	cg_run(test, clients, n, credits);
	/* upstream's policy alone knows no cgroup's priority: not beside it */
	if (!prios)
		cg_run_on(test, plain, n, credits, true);

	for (i = 0; i < n; i++) {
		all += clients[i].busy_us;
		all_plain += plain[i].busy_us;
	}
	KUNIT_ASSERT_GT(test, all, 0ULL);
	KUNIT_ASSERT_TRUE(test, all_plain || prios);
	for (i = 0, n = 0; i < c->nr_nodes; i++) {
		u64 got, got_plain, x;

		if (!cg_tree_node(c, i).job_us)
			continue;
		want[n] = active[i] ? cg_tree_want(c, active, i) : 0;
		got = div64_u64(clients[n].busy_us * 1000000, all);
		got_plain = div64_u64(plain[n].busy_us * 1000000, max(all_plain, 1ULL));
		err = div64_u64(abs_diff(got, want[n]), 1000);
		worst = max(worst, err);
		worst_plain = max_t(unsigned int, worst_plain,
				    div64_u64(abs_diff(got_plain, want[n]), 1000));
		x = div64_u64(got * 1000, max(want[n], 1ULL));
		jain[0][0] += x;
		jain[0][1] += x * x;
		x = div64_u64(got_plain * 1000, max(want[n], 1ULL));
		jain[1][0] += x;
		jain[1][1] += x * x;
		n++;
	}
	kunit_info(test, "%s: largest error %u.%u points\n",
		   c->description, worst / 10, worst % 10);
	if (!prios)
		kunit_info(test, "%s, no cgroup: largest error %u.%u points\n",
			   c->description, worst_plain / 10, worst_plain % 10);
	if (!c->nodes) {
		kunit_info(test, "%s: Jain's index %llu/1000\n", c->description,
			   div64_u64(jain[0][0] * jain[0][0] * 1000, n * max(jain[0][1], 1ULL)));
		kunit_info(test, "%s, no cgroup: Jain's index %llu/1000\n", c->description,
			   div64_u64(jain[1][0] * jain[1][0] * 1000, n * max(jain[1][1], 1ULL)));
	}
	KUNIT_EXPECT_LE(test, worst, 10U);
}

/*
 * Starts @n clients on a device of the test's own with one mock scheduler
 * of one slot (*@sched), their entities in @entities, each counting over
 * @ms from now; returns now. cg_clients_stop() and cg_teardown() undo it.
 */
static ktime_t cg_clients_start(struct kunit *test, struct cg_client *clients,
				unsigned int n,
				struct drm_mock_sched_entity **entities,
				struct drm_mock_scheduler **sched, unsigned int ms)
{
	struct gpucg_device *dev = cg_setup(test, sched, 1, 1);
	unsigned int i;
	ktime_t start;

	for (i = 0; i < n; i++) {
		cg_client_setup(test, &clients[i], dev, *sched, i);
		entities[i] = clients[i].entity;
	}
	start = ktime_get();
	for (i = 0; i < n; i++) {
		clients[i].window_start = start;
		clients[i].window_end = ktime_add_ms(start, ms);
		kthread_queue_work(clients[i].worker, &clients[i].work);
	}
	return start;
}

struct cg_change_case {
	const char *description;
	u32 weight;		/* the second cgroup's, from half-time on */
	int prio;
	unsigned int want;	/* its share then, percent */
	unsigned int pause_ms;	/* instead: its client idles that long */
};

static const struct cg_change_case cg_change_cases[] = {
	{ "weight 100 to 900", 900, 0, 90 },
	{ "weight 900 to 100", 100, 0, 50 },
	{ "priority 0 to 100", 100, 100, 100 },
	{ "back after 400 ms idle", 100, 0, 50, 400 },
};

static void cg_change_desc(const struct cg_change_case *c, char *desc)
{
	strscpy(desc, c->description, KUNIT_PARAM_DESC_SIZE);
}

KUNIT_ARRAY_PARAM(cg_change, cg_change_cases, cg_change_desc);

#define CG_CHANGE_AT_MS		600
#define CG_CHANGE_RUN_MS	1600

/*
 * Convergence after a change of weight or priority: two deep clients in
 * cgroups at 100 (the second at 900 where it goes to 100), one slot, 2 ms
 * jobs; at 600 ms the second cgroup's weight or priority changes, and its
 * share in each whole 100 ms from then on is compared with its new due.
 * Or the second client idles for 400 ms until about 600 ms (its jobs
 * done), and from its return on must get its half, not the time it
 * missed: an entity back from idling banks no credit.
 * The time to converge is from the change to the start of the first
 * 100 ms from which on every one is within 2 points (a job) of it: at
 * most 200 ms (what is under 100 ms is the first whole 100 ms's).
 * Its shares over time are printed (bench/sim.py plots them).
 */
static void drm_sched_cgroup_change(struct kunit *test)
{
	const struct cg_change_case *c = test->param_value;
	const unsigned int nr = CG_CHANGE_RUN_MS / CG_BUCKET_MS;
	struct cg_client clients[2] = {
		{ .params = { NULL, 5, 2000, 0 } },
		{ .params = { NULL, 5, 2000, 0 } },
	};
	struct drm_mock_sched_entity *entities[2];
	struct drm_mock_scheduler *sched;
	unsigned int b, at, share, changed_ms, settled = nr;
	ktime_t start, changed;
	char *series;

	cg_virtual_time_only(test);
	clients[0].group = cg_group(test, NULL, 100);
	clients[1].group = cg_group(test, NULL, c->weight == 100 && !c->prio &&
				    !c->pause_ms ? 900 : 100);
	clients[1].params.pause_ms = c->pause_ms;
	clients[1].params.pause_at_ms = CG_CHANGE_AT_MS - c->pause_ms;
	series = kunit_kzalloc(test, CG_SERIES_LEN, GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, series);
	cg_buckets(test, clients, 2, CG_CHANGE_RUN_MS);
	start = cg_clients_start(test, clients, 2, entities, &sched, CG_CHANGE_RUN_MS);
	msleep(CG_CHANGE_AT_MS);
	/* a timer's jiffy later than asked, maybe: measured from when it is */
	changed = ktime_get();
	if (!c->pause_ms)
		gpucg_kunit_cgroup_set(clients[1].group, c->weight, c->prio);
	msleep(CG_CHANGE_RUN_MS - CG_CHANGE_AT_MS);
	cg_clients_stop(test, clients, 2);
	cg_teardown(test, entities, 2, &sched, 1);
	if (c->pause_ms)
		changed = clients[1].resumed;

	/* the first whole bucket after the change */
	changed_ms = ktime_ms_delta(changed, start);
	at = DIV_ROUND_UP(changed_ms, CG_BUCKET_MS);
	KUNIT_ASSERT_LT(test, at, nr);
	for (b = 0; b < nr; b++) {
		share = cg_bucket_share(clients, 2, 1, b);
		if (b >= at && share + 2 >= c->want && share <= c->want + 2) {
			if (settled == nr)
				settled = b;
		} else if (b >= at) {
			settled = nr;
		}
	}
	kunit_info(test, "%s: within 2 points of %u%% %u ms after the change\n",
		   c->description, c->want,
		   settled < nr ? settled * CG_BUCKET_MS - changed_ms : CG_CHANGE_RUN_MS);
	cg_series(clients, 2, 1, series, CG_SERIES_LEN);
	kunit_info(test, "%s: series %u ms: %s\n", c->description, CG_BUCKET_MS,
		   series);
	KUNIT_EXPECT_LE(test, settled * CG_BUCKET_MS, changed_ms + 200);
}

/*
 * A cgroup whose band flips: P at priority 100 holds a client at 100 that
 * runs 1 ms jobs 4 to 5 ms apart (P1) and one at 0 that is deep (P2); Q
 * at 0 beside it is deep; equal weights, 2 ms deep jobs, one slot. P's
 * band is 100 while P1 is ready and 0 otherwise, and in band 0 P2 and Q
 * share what P1 leaves by their weights: time P used at 100 delays none
 * of its work at 0, and its flips back to 0 bank nothing either (a vtime
 * kept per band). Printed as P2's part of the band-0 time, in tenths.
 */
static void drm_sched_cgroup_bands(struct kunit *test)
{
	struct cg_client clients[3] = {
		{ .params = CG_SHALLOW(NULL, 1000, 4000) },
		{ .params = { NULL, 2, 2000, 0 } },
		{ .params = { NULL, 2, 2000, 0 } },
	};
	struct gpucg *p;
	unsigned int part;
	u64 band0;

	cg_virtual_time_only(test);
	clients[0].params.jitter_us = 1000;
	p = cg_cgroup_new(test, NULL, 100, 100);
	clients[0].group = cg_cgroup_new(test, p, 100, 100);
	clients[1].group = cg_cgroup_new(test, p, 100, 0);
	clients[2].group = cg_group(test, NULL, 100);
	cg_run(test, clients, 3, 1);

	band0 = clients[1].busy_us + clients[2].busy_us;
	KUNIT_ASSERT_GT(test, band0, 0ULL);
	part = div64_u64(clients[1].busy_us * 1000, band0);
	kunit_info(test, "P1 %u%% of the engine; P2 %u.%u%% of band 0's time (want 50%%)\n",
		   cg_share(clients, 3, 0, 1), part / 10, part % 10);
	KUNIT_EXPECT_LE(test, abs_diff(part, 500U), 10U);
}

struct cg_max_case {
	const char *description;
	u32 max_us;		/* the client's cgroup's cap */
	u32 parent_us;		/* with it, its parent's; 0: none */
	bool beside;		/* an uncapped deep client in a cgroup beside */
	unsigned int job_us;
	u32 then_us;		/* the cap from CG_MAX_CHANGE_MS on; 0: none */
	unsigned int want;	/* the capped client's engine time, percent */
	bool shallow;		/* one job at a time, else two queued */
	unsigned int wait_us;	/* shallow: its think time after each job */
};

static const struct cg_max_case cg_max_cases[] = {
	{ "alone at 30%", 30000, 0, false, 2000, 0, 30 },
	{ "alone at 70%", 70000, 0, false, 2000, 0, 70 },
	{ "at 30% beside an uncapped client", 30000, 0, true, 2000, 0, 30 },
	{ "at 50% under a parent at 40%", 50000, 40000, false, 2000, 0, 40 },
	{ "at 30% with 7 ms jobs (debt)", 30000, 0, false, 7000, 0, 30 },
	{ "from 30% to 70%", 30000, 0, false, 2000, 70000, 70 },
	{ "one job at a time at 30%", 30000, 0, false, 2000, 0, 30, true, 0 },
	{ "one job at a time at 30% beside an uncapped client", 30000, 0, true,
	  2000, 0, 30, true, 0 },
	{ "thinking 8 ms after 2 ms jobs at 30%", 30000, 0, false, 2000, 0, 30,
	  true, 8000 },
	{ "thinking 2 ms after 2 ms jobs at 30% beside an uncapped client",
	  30000, 0, true, 2000, 0, 30, true, 2000 },
};

static void cg_max_desc(const struct cg_max_case *c, char *desc)
{
	strscpy(desc, c->description, KUNIT_PARAM_DESC_SIZE);
}

KUNIT_ARRAY_PARAM(cg_max, cg_max_cases, cg_max_desc);

#define CG_MAX_PERIOD_US	100000
#define CG_MAX_RUN_MS		2200
#define CG_MAX_CHANGE_MS	1000

/*
 * gpu.max: a client in a cgroup capped at MAX of every 100 ms, deep or one
 * job at a time with or without think time, alone on the engine or beside
 * an uncapped deep client at equal weight, under a capped parent, with
 * jobs that do not divide the budget (the time over it carried as debt),
 * or with the cap raised at 1 s; one slot. Its part of
 * the engine's time, over whole periods after the first 200 ms (from the
 * change on, for a change: how long the new cap takes, from the change to
 * the first of the periods that all stay within 2 points of it), within 1
 * point of the cap (or the parent's), or of its demand where that is less
 * (a thinking client's: what it gets alone, uncapped, its sleeps' slack
 * included). The uncapped client beside it takes at least 97% of the
 * rest; beside a thinking capped client, whose returns the engine waits
 * for while it has budget, at least 97% of what it gets beside the same
 * client uncapped: the cap takes nothing from it. Printed in tenths of a
 * point.
 */
/*
 * The loads of @clients uncapped, in cgroups of their own: the share in
 * thousandths that the first gets alone lowers @want to its demand, and
 * with @beside, @uncapped is what the second gets beside it. Apart from
 * drm_sched_cgroup_max(), whose frame holds its own clients: three more
 * there outgrow the stack limit under KASAN.
 */
static noinline_for_stack void cg_max_uncapped(struct kunit *test,
					       const struct cg_client *clients,
					       bool beside, u64 *want,
					       u64 *uncapped)
{
	struct cg_client alone[1] = { { .params = clients[0].params } };
	struct cg_client pair[2] = {
		{ .params = clients[0].params },
		{ .params = clients[1].params },
	};

	alone[0].group = cg_group(test, NULL, 100);
	cg_run(test, alone, 1, 1);
	*want = min(*want, div_u64(alone[0].busy_us * 1000,
				   CG_WINDOW_MS * USEC_PER_MSEC));
	if (!beside)
		return;
	pair[0].group = cg_group(test, NULL, 100);
	pair[1].group = cg_group(test, NULL, 100);
	cg_run(test, pair, 2, 1);
	*uncapped = div_u64(pair[1].busy_us * 1000,
			    CG_WINDOW_MS * USEC_PER_MSEC);
}

static void drm_sched_cgroup_max(struct kunit *test)
{
	const struct cg_max_case *c = test->param_value;
	const unsigned int nr = CG_MAX_RUN_MS / CG_BUCKET_MS;
	struct cg_client clients[2] = {
		{ .params = { NULL, c->shallow ? 0 : 2, c->job_us, c->wait_us } },
		{ .params = { NULL, 2, 2000, 0 } },
	};
	struct drm_mock_sched_entity *entities[2];
	unsigned int i, b, from, n = c->beside ? 2 : 1;
	unsigned int settled = nr, changed_ms = 0;
	u64 busy[2] = {}, got, other, want = c->want * 10ULL, uncapped = 0;
	struct drm_mock_scheduler *sched;
	struct gpucg *parent = NULL;
	ktime_t start, changed;
	char *series;

	cg_virtual_time_only(test);
	if (c->wait_us)
		cg_max_uncapped(test, clients, c->beside, &want, &uncapped);
	if (c->parent_us) {
		parent = cg_group(test, NULL, 100);
		gpucg_kunit_cgroup_set_max(parent, c->parent_us, CG_MAX_PERIOD_US);
	}
	clients[0].group = cg_group(test, parent, 100);
	gpucg_kunit_cgroup_set_max(clients[0].group, c->max_us, CG_MAX_PERIOD_US);
	clients[1].group = cg_group(test, NULL, 100);
	series = kunit_kzalloc(test, CG_SERIES_LEN, GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, series);
	cg_buckets(test, clients, n, CG_MAX_RUN_MS);
	start = cg_clients_start(test, clients, n, entities, &sched, CG_MAX_RUN_MS);
	if (c->then_us) {
		msleep(CG_MAX_CHANGE_MS);
		changed = ktime_get();
		gpucg_kunit_cgroup_set_max(clients[0].group, c->then_us,
					   CG_MAX_PERIOD_US);
		changed_ms = ktime_ms_delta(changed, start);
		msleep(CG_MAX_RUN_MS - CG_MAX_CHANGE_MS);
	} else {
		msleep(CG_MAX_RUN_MS);
	}
	cg_clients_stop(test, clients, n);
	cg_teardown(test, entities, n, &sched, 1);

	/* whole periods (buckets of their length), from 200 ms or the change */
	from = c->then_us ? DIV_ROUND_UP(changed_ms, CG_BUCKET_MS) : 2;
	KUNIT_ASSERT_LT(test, from, nr);
	for (b = from; b < nr; b++) {
		unsigned int pct = div_u64(clients[0].buckets[b], CG_BUCKET_MS * 10);

		for (i = 0; i < n; i++)
			busy[i] += clients[i].buckets[b];
		if (pct + 2 >= c->want && pct <= c->want + 2) {
			if (settled == nr)
				settled = b;
		} else {
			settled = nr;
		}
	}
	got = div_u64(busy[0] * 1000, (nr - from) * CG_BUCKET_MS * USEC_PER_MSEC);
	other = div_u64(busy[1] * 1000, (nr - from) * CG_BUCKET_MS * USEC_PER_MSEC);
	/* its part of the engine's time in each bucket */
	for (b = 0, i = 0; b < nr; b++)
		i += scnprintf(series + i, CG_SERIES_LEN - i, "%s%llu", b ? "," : "",
			       div_u64(clients[0].buckets[b], CG_BUCKET_MS * 10));
	if (uncapped)
		kunit_info(test, "%s: %llu.%llu%% of the engine (wanted %llu.%llu%%), the uncapped one %llu.%llu%% (%llu.%llu%% beside it uncapped)\n",
			   c->description, got / 10, got % 10, want / 10, want % 10,
			   other / 10, other % 10, uncapped / 10, uncapped % 10);
	else
		kunit_info(test, "%s: %llu.%llu%% of the engine (wanted %llu.%llu%%), the uncapped one %llu.%llu%%\n",
			   c->description, got / 10, got % 10, want / 10, want % 10,
			   other / 10, other % 10);
	if (c->then_us)
		kunit_info(test, "%s: within 2 points of %u%% %u ms after the change\n",
			   c->description, c->want,
			   settled < nr ? settled * CG_BUCKET_MS - changed_ms : CG_MAX_RUN_MS);
	kunit_info(test, "%s: series %u ms: %s\n", c->description, CG_BUCKET_MS,
		   series);
	KUNIT_EXPECT_LE(test, abs_diff(got, want), 10ULL);
	if (c->beside && !uncapped)
		KUNIT_EXPECT_GE(test, other * 100, (1000 - got) * 97);
	if (uncapped)
		KUNIT_EXPECT_GE(test, other * 100, uncapped * 97);
	if (c->then_us)
		KUNIT_EXPECT_LE(test, settled * CG_BUCKET_MS,
				changed_ms + 2 * CG_MAX_PERIOD_US / USEC_PER_MSEC);
}

#define CG_HOP_MS	200	/* a stay in one cgroup */
#define CG_HOP_STAYS	8

/*
 * A client hopping between cgroups: A at 100 and B at 900 each hold a deep
 * client, and a third deep client moves its owner from A to B and back
 * every 200 ms (as gpucg_client_set_owner() does when a process moves);
 * 2 ms jobs, one slot. Its entity follows at its next job, so from the
 * second 100 ms of each stay on it gets half its cgroup's share: 5% in A,
 * 45% in B (in the first it still runs the jobs it queued before the move
 * in the cgroup it left). Printed: the largest distance from that over
 * those 100 ms, and its series; beside it, upstream's policy alone, which
 * knows no cgroup and gives it a third throughout.
 */
static void drm_sched_cgroup_hop(struct kunit *test)
{
	const unsigned int nr = CG_HOP_STAYS * CG_HOP_MS / CG_BUCKET_MS;
	struct drm_mock_sched_entity *entities[3];
	struct cg_client *clients, *plain;
	struct drm_mock_scheduler *sched;
	unsigned int i, b, share, worst = 0, worst_plain = 0, want;
	struct gpucg *groups[2];
	char *series;

	cg_virtual_time_only(test);
	/* off the stack: six clients would pass the frame limit */
	clients = kunit_kcalloc(test, 3, sizeof(*clients), GFP_KERNEL);
	plain = kunit_kcalloc(test, 3, sizeof(*plain), GFP_KERNEL);
	KUNIT_ASSERT_TRUE(test, clients && plain);
	groups[0] = cg_group(test, NULL, 100);
	groups[1] = cg_group(test, NULL, 900);
	for (i = 0; i < 3; i++) {
		clients[i].params = (struct cg_client_params){ NULL, 2, 2000, 0 };
		clients[i].group = groups[i == 1];
		plain[i].params = clients[i].params;
	}
	series = kunit_kzalloc(test, CG_SERIES_LEN, GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, series);
	cg_buckets(test, clients, 3, CG_HOP_STAYS * CG_HOP_MS);
	cg_buckets(test, plain, 3, CG_HOP_STAYS * CG_HOP_MS);
	/* upstream's policy alone: no cgroups to hop between */
	cg_run_for(test, plain, 3, 1, true, CG_HOP_STAYS * CG_HOP_MS);

	cg_clients_start(test, clients, 3, entities, &sched, CG_HOP_STAYS * CG_HOP_MS);
	for (i = 1; i <= CG_HOP_STAYS; i++) {
		msleep(CG_HOP_MS);
		if (i < CG_HOP_STAYS)
			gpucg_kunit_client_move(clients[2].gpucg, groups[i % 2]);
	}
	cg_clients_stop(test, clients, 3);
	cg_teardown(test, entities, 3, &sched, 1);

	/* the second bucket of each stay: in A (even stays) or in B */
	for (b = 1; b < nr; b += CG_HOP_MS / CG_BUCKET_MS) {
		want = (b * CG_BUCKET_MS / CG_HOP_MS) % 2 ? 45 : 5;
		share = cg_bucket_share(clients, 3, 2, b);
		worst = max(worst, abs_diff(share, want));
		if (b < plain[2].nr_buckets)
			worst_plain = max(worst_plain,
					  abs_diff(cg_bucket_share(plain, 3, 2, b), want));
	}
	cg_series(clients, 3, 2, series, CG_SERIES_LEN);
	kunit_info(test, "hopping every %u ms between 100 and 900: within %u points of its due (5%%, 45%%)\n",
		   CG_HOP_MS, worst);
	kunit_info(test, "hopping every %u ms between 100 and 900: series %u ms: %s\n",
		   CG_HOP_MS, CG_BUCKET_MS, series);
	kunit_info(test, "hopping every %u ms between 100 and 900, no cgroup: within %u points of its due (5%%, 45%%)\n",
		   CG_HOP_MS, worst_plain);
	KUNIT_EXPECT_LE(test, worst, 2U);
}

#define CG_PROP_MIXES		200
#define CG_PROP_NODES		8
#define CG_PROP_CLIENTS		6
#define CG_PROP_WINDOW_MS	2000	/* at least; 100 of the longest jobs */
#define CG_PROP_LOG		16384	/* jobs a client may run in a mix */
/*
 * The longest an engine idles for one job of an entity it expects, at the
 * default window (the core's essay: 48 times the window's lower bound of
 * 1 ms, gpu_anticipate_us=, which tools/sim.sh leaves alone).
 */
#define CG_PROP_IDLE_MAX_NS	(48 * NSEC_PER_MSEC)
/*
 * Shorter stretches are the virtual clock's own step between a job's end
 * and the next handoff (a few hundred nanoseconds a job on UML), no wait.
 */
#define CG_PROP_SLACK_NS	1000

/* The mixes' priorities, lowest first: a cgroup's is an index into it */
static const int cg_prop_prios[] = { -100, 0, 50, 100 };

/* One byte per mix: its place in the array is its seed (from 1) */
static const u8 cg_prop_mixes[CG_PROP_MIXES];

static void cg_prop_desc(const u8 *mix, char *desc)
{
	snprintf(desc, KUNIT_PARAM_DESC_SIZE, "mix %td", mix - cg_prop_mixes + 1);
}

KUNIT_ARRAY_PARAM(cg_prop, cg_prop_mixes, cg_prop_desc);

/* A random mix: cgroups in a tree, clients in its leaves, an engine */
struct cg_prop_mix {
	unsigned int credits, nr_nodes, nr_clients, window_ms;
	struct cg_node nodes[CG_PROP_NODES];
	unsigned int own[CG_PROP_NODES];	/* gpu.priority, cg_prop_prios[] */
	unsigned int level[CG_PROP_NODES];	/* effective: least on the path */
	unsigned int node[CG_PROP_CLIENTS];	/* each client's cgroup */
	bool deep[CG_PROP_CLIENTS];	/* keeps a job queued behind a full engine */
	unsigned int waits_on[CG_PROP_CLIENTS];	/* its signaller + 1; 0: none */
	struct cg_client_params params[CG_PROP_CLIENTS];
};

/* One of the @n values of @from, at random */
static u32 cg_draw(struct rnd_state *rnd, const u32 *from, unsigned int n)
{
	return from[prandom_u32_state(rnd) % n];
}

/*
 * Mix @seed: 2 to 8 cgroups at most three levels deep, weights from 1 to
 * 10000, priorities -100 to 100; 2 to 6 clients in the leaves, with jobs
 * of 0.5 to 64 ms, each deep, one job at a time, or thinking 25 to 400% of
 * its job, around the bounds of the engine's waits too (with up to none,
 * a fifth or as much again at random); an engine of 1, 2 or 4 slots.
 * Then each client, with chance 1/5, waits with each job on another's last
 * job (which lends where that one is of a lower band and another cgroup).
 */
static void cg_prop_draw(struct cg_prop_mix *m, unsigned int seed)
{
	static const u32 credits[] = { 1, 1, 2, 4 };
	static const u32 weights[] = { 1, 10, 50, 100, 100, 100, 250, 1000, 10000 };
	static const u32 levels[] = { 0, 1, 1, 1, 2, 3 };
	static const u32 jobs[] = { 500, 1000, 2000, 5000, 8000, 16000, 64000 };
	static const u32 thinks[] = { 25, 50, 80, 100, 150, 190, 200, 400 };
	static const u32 jitters[] = { 0, 20, 100 };
	unsigned int depth[CG_PROP_NODES], leaves[CG_PROP_NODES], nr_leaves = 0;
	bool inner[CG_PROP_NODES] = {};
	struct rnd_state rnd;
	unsigned int i;

	prandom_seed_state(&rnd, seed);
	memset(m, 0, sizeof(*m));
	m->window_ms = CG_PROP_WINDOW_MS;
	m->credits = cg_draw(&rnd, credits, ARRAY_SIZE(credits));
	m->nr_nodes = 2 + prandom_u32_state(&rnd) % (CG_PROP_NODES - 1);
	for (i = 0; i < m->nr_nodes; i++) {
		int parent = (int)(prandom_u32_state(&rnd) % (i + 1)) - 1;

		if (parent >= 0 && depth[parent] >= 2)
			parent = -1;
		depth[i] = parent < 0 ? 0 : depth[parent] + 1;
		m->nodes[i].parent = parent;
		m->nodes[i].weight = cg_draw(&rnd, weights, ARRAY_SIZE(weights));
		m->own[i] = cg_draw(&rnd, levels, ARRAY_SIZE(levels));
		m->level[i] = parent < 0 ? m->own[i] : min(m->own[i], m->level[parent]);
		if (parent >= 0)
			inner[parent] = true;
	}
	for (i = 0; i < m->nr_nodes; i++)
		if (!inner[i])
			leaves[nr_leaves++] = i;
	m->nr_clients = 2 + prandom_u32_state(&rnd) % (CG_PROP_CLIENTS - 1);
	for (i = 0; i < m->nr_clients; i++) {
		struct cg_client_params *p = &m->params[i];
		unsigned int kind = prandom_u32_state(&rnd) % 4;

		m->node[i] = leaves[prandom_u32_state(&rnd) % nr_leaves];
		p->job_us = cg_draw(&rnd, jobs, ARRAY_SIZE(jobs));
		m->window_ms = max(m->window_ms, p->job_us / 10);
		if (kind < 2) {
			p->depth = m->credits + 1 + prandom_u32_state(&rnd) % 3;
			m->deep[i] = true;
		} else if (kind == 3) {
			p->wait_us = p->job_us * cg_draw(&rnd, thinks, ARRAY_SIZE(thinks)) / 100;
			p->jitter_us = p->wait_us / 100 *
				       cg_draw(&rnd, jitters, ARRAY_SIZE(jitters));
		}
	}
	for (i = 0; i < m->nr_clients; i++)
		if (!(prandom_u32_state(&rnd) % 5))
			m->waits_on[i] = 1 + (i + 1 + prandom_u32_state(&rnd) %
					      (m->nr_clients - 1)) % m->nr_clients;
}

/* @m's clients, for a mix that fails */
static void cg_prop_print(struct kunit *test, const struct cg_prop_mix *m)
{
	const struct cg_client_params *p;
	unsigned int i;

	for (i = 0; i < m->nr_clients; i++) {
		p = &m->params[i];
		kunit_info(test, "client %u: cgroup %u (parent %d, weight %u, priority %d), %s %u, jobs of %u us, waits on client %d\n",
			   i, m->node[i], m->nodes[m->node[i]].parent,
			   m->nodes[m->node[i]].weight, cg_prop_prios[m->level[m->node[i]]],
			   m->deep[i] ? "deep" : "thinks (us)",
			   m->deep[i] ? p->depth : p->wait_us, p->job_us,
			   (int)m->waits_on[i] - 1);
	}
}

static int cg_rec_by_seqno(const void *a, const void *b)
{
	const struct cg_job_rec *x = a, *y = b;

	return x->seqno < y->seqno ? -1 : x->seqno > y->seqno;
}

static int cg_rec_by_ready(const void *a, const void *b)
{
	const struct cg_job_rec *x = a, *y = b;

	return ktime_before(x->ready, y->ready) ? -1 : ktime_after(x->ready, y->ready);
}

static int cg_rec_index_by_seqno(const void *a, const void *b, const void *recs)
{
	return cg_rec_by_seqno((const struct cg_job_rec *)recs + *(const unsigned int *)a,
			       (const struct cg_job_rec *)recs + *(const unsigned int *)b);
}

/*
 * The loans in a mix's run, on @recs (the clients' logs one after another,
 * each in its order): each job's ready time (its push, or the handoff of
 * the signaller's job it waited on if later: a job that waits on a fence
 * of its own scheduler waits only for the job's handoff) and the band it
 * may run in. A waiter of a higher band than the job it waits on, and of
 * another cgroup (drm_sched_job_gpucg_lender(): a mix has one scheduler),
 * lends its band (its own, or one lent to it) from when it is first in its
 * queue (its push, or the handoff of the job before it), or from when it
 * was lent that band if later, until that job's handoff, to that job's
 * entity: the job and the jobs ahead of it in its queue, handed off
 * meanwhile, may run in the waiter's band.
 */
static void cg_prop_loans(struct kunit *test, const struct cg_prop_mix *m,
			  const struct cg_client *clients,
			  struct cg_job_rec *recs, unsigned int n)
{
	const unsigned int nr_bands = ARRAY_SIZE(cg_prop_prios);
	unsigned int first[CG_PROP_CLIENTS], *order, i, j, k, l, own;
	/*
	 * Per client and band, the earliest start of a loan at least that
	 * high to a job not yet handed off (later in the walk: a job ahead of
	 * it in its queue); per job, the loans to it, until the walk gets to it
	 */
	ktime_t lent[CG_PROP_CLIENTS][ARRAY_SIZE(cg_prop_prios)];
	ktime_t (*pend)[ARRAY_SIZE(cg_prop_prios)];
	struct cg_job_rec *w, *d;
	ktime_t since;
	u64 at;

	for (i = 0, k = 0; i < m->nr_clients; k += clients[i++].nr_log)
		first[i] = k;
	order = kunit_kcalloc(test, n, sizeof(*order), GFP_KERNEL);
	pend = kunit_kcalloc(test, n, sizeof(*pend), GFP_KERNEL);
	KUNIT_ASSERT_TRUE(test, order && pend);
	for (k = 0; k < n; k++) {
		w = &recs[k];
		order[k] = k;
		w->ready = w->submit;
		w->head = w->submit;
		if (k && recs[k - 1].client == w->client)
			w->head = max(w->head, recs[k - 1].handoff);
		w->lent_at = KTIME_MAX;
		w->dep = -1;
		w->level = m->level[m->node[w->client]];
		if (!w->dep_fseq)
			continue;
		j = m->waits_on[w->client] - 1;
		if (!clients[j].nr_log || w->dep_fseq < clients[j].log[0].fseq)
			continue;
		at = w->dep_fseq - clients[j].log[0].fseq;
		if (at >= clients[j].nr_log || clients[j].log[at].fseq != w->dep_fseq)
			continue;
		w->dep = first[j] + at;
		w->ready = max(w->submit, recs[w->dep].handoff);
	}
	/*
	 * Latest handoff first: a waiter goes to the hardware after what it
	 * waits on, and a job after the jobs ahead of it in its queue, so
	 * every loan a job may run on is known when it comes.
	 */
	for (i = 0; i < m->nr_clients; i++)
		for (l = 0; l < nr_bands; l++)
			lent[i][l] = KTIME_MAX;
	for (k = 0; k < n; k++)
		for (l = 0; l < nr_bands; l++)
			pend[k][l] = KTIME_MAX;
	sort_r(order, n, sizeof(*order), cg_rec_index_by_seqno, NULL, recs);
	for (k = n; k-- > 0;) {
		w = &recs[order[k]];
		for (l = 0; l < nr_bands; l++)
			lent[w->client][l] = min(lent[w->client][l], pend[order[k]][l]);
		own = w->level;
		for (l = nr_bands - 1; l > own; l--) {
			if (ktime_before(lent[w->client][l], w->handoff)) {
				w->level = l;
				w->lent_at = lent[w->client][l];
				break;
			}
		}
		if (w->dep < 0)
			continue;
		d = &recs[w->dep];
		/* a job of its own cgroup on its scheduler lends nothing */
		if (m->node[w->client] == m->node[d->client])
			continue;
		/* each band it may run in, from when it may */
		for (l = m->level[m->node[d->client]] + 1; l <= w->level; l++) {
			since = l <= own ? w->head : max(w->head, lent[w->client][l]);
			if (ktime_before(since, d->handoff))
				pend[w->dep][l] = min(pend[w->dep][l], since);
		}
	}
}

/* What a mix's run showed, against the essay's bounds */
struct cg_prop_figures {
	unsigned int inversions;	/* handoffs with higher work ready */
	s64 idle_ns;		/* engine idle with work ready, in the window */
	s64 idle_max_ns;	/* the longest such stretch */
	unsigned int share_err;	/* tenths of a point; deep top band only */
	bool share_checked;
};

/*
 * Handoffs that passed over ready work of a higher band than the one the
 * job may run in: going backwards over the handoffs (the mock hardware's
 * order), the earliest time each band had a job ready that was handed off
 * later, in its own band from its ready time and in a band lent to it from
 * when it was first in its queue, ready and lent; a job handed off after
 * that time, strictly, went before it. @recs sorted by seqno.
 */
static unsigned int cg_prop_inversions(struct kunit *test,
				       const struct cg_prop_mix *m,
				       const struct cg_job_rec *recs,
				       unsigned int n)
{
	const struct cg_job_rec *waiting[ARRAY_SIZE(cg_prop_prios)] = {};
	ktime_t since[ARRAY_SIZE(cg_prop_prios)];
	unsigned int k, l, own, found = 0;
	ktime_t t;

	for (k = n; k-- > 0;) {
		for (l = recs[k].level + 1; l < ARRAY_SIZE(waiting); l++) {
			if (!waiting[l] || !ktime_before(since[l], recs[k].handoff))
				continue;
			if (!found++)
				kunit_info(test, "client %u's job (in band %d, ready at %lld us) handed off at %lld us over client %u's (ready in band %d at %lld us), handed off at %lld us\n",
					   recs[k].client, cg_prop_prios[recs[k].level],
					   ktime_to_us(recs[k].ready),
					   ktime_to_us(recs[k].handoff),
					   waiting[l]->client, cg_prop_prios[l],
					   ktime_to_us(since[l]),
					   ktime_to_us(waiting[l]->handoff));
		}
		own = m->level[m->node[recs[k].client]];
		if (!waiting[own] || ktime_before(recs[k].ready, since[own])) {
			waiting[own] = &recs[k];
			since[own] = recs[k].ready;
		}
		l = recs[k].level;
		t = max3(recs[k].ready, recs[k].head, recs[k].lent_at);
		if (l > own && (!waiting[l] || ktime_before(t, since[l]))) {
			waiting[l] = &recs[k];
			since[l] = t;
		}
	}
	return found;
}

/*
 * The stretches of [@from, @to) in which the engine ran no job while one was
 * ready (of CG_PROP_SLACK_NS at least): the gaps between the jobs' runs
 * (@recs sorted by seqno: they run in that order) met with the union of
 * the times jobs were ready, from their push (or the handoff of what they
 * waited on) to their handoff (@recs then sorted by that).
 */
static void cg_prop_idle(struct kunit *test, struct cg_job_rec *recs,
			 unsigned int n, ktime_t from, ktime_t to,
			 struct cg_prop_figures *f)
{
	ktime_t *gaps = kunit_kcalloc(test, 2 * (n + 1), sizeof(*gaps), GFP_KERNEL);
	ktime_t end = from, a, b, q0, q1;
	unsigned int k, g, nr_gaps = 0;

	KUNIT_ASSERT_NOT_NULL(test, gaps);
	for (k = 0; k < n; k++) {
		a = max(end, from);
		b = min(recs[k].start, to);
		if (ktime_before(a, b)) {
			gaps[2 * nr_gaps] = a;
			gaps[2 * nr_gaps++ + 1] = b;
		}
		end = max(end, recs[k].end);
	}
	if (ktime_before(max(end, from), to)) {
		gaps[2 * nr_gaps] = max(end, from);
		gaps[2 * nr_gaps++ + 1] = to;
	}
	sort(recs, n, sizeof(*recs), cg_rec_by_ready, NULL);
	for (k = 0, g = 0; k < n && g < nr_gaps;) {
		/* the next stretch of ready work: jobs that overlap it merged */
		q0 = recs[k].ready;
		q1 = recs[k].handoff;
		while (++k < n && !ktime_after(recs[k].ready, q1))
			q1 = max(q1, recs[k].handoff);
		for (; g < nr_gaps && ktime_before(gaps[2 * g], q1); g++) {
			a = max(gaps[2 * g], q0);
			b = min(gaps[2 * g + 1], q1);
			if (ktime_to_ns(ktime_sub(b, a)) >= CG_PROP_SLACK_NS) {
				f->idle_ns += ktime_to_ns(ktime_sub(b, a));
				f->idle_max_ns = max(f->idle_max_ns, ktime_to_ns(ktime_sub(b, a)));
			}
			if (ktime_after(gaps[2 * g + 1], q1))
				break;	/* the gap goes on past this stretch */
		}
	}
}

/* @client's GPU time inside its window: its jobs' runs, cut to it */
static u64 cg_prop_busy(const struct cg_client *client)
{
	const struct cg_job_rec *rec;
	u64 busy = 0;
	ktime_t a, b;

	for (rec = client->log; rec < client->log + client->nr_log; rec++) {
		a = max(rec->start, client->window_start);
		b = min(rec->end, client->window_end);
		if (ktime_before(a, b))
			busy += ktime_to_ns(ktime_sub(b, a));
	}
	return busy;
}

/*
 * Where every client of the highest band in a mix is deep and no client waits
 * on another: each leaf's share of the GPU time used in the window,
 * against its weight's along its path among the cgroups with such a
 * client below them; the largest distance.
 */
static void cg_prop_shares(const struct cg_prop_mix *m,
			   const struct cg_client *clients,
			   struct cg_prop_figures *f)
{
	const struct cg_tree_case c = { "mix", m->nr_nodes, m->nodes };
	bool active[CG_PROP_NODES] = {};
	u64 busy[CG_PROP_CLIENTS], all = 0, got, want;
	unsigned int i, top = 0;
	int node;

	for (i = 0; i < m->nr_clients; i++)
		if (m->waits_on[i])
			return;	/* a deep waiter goes at its signaller's pace */
	for (i = 0; i < m->nr_clients; i++) {
		top = max(top, m->level[m->node[i]]);
		busy[i] = cg_prop_busy(&clients[i]);
		all += busy[i];
	}
	for (i = 0; i < m->nr_clients; i++) {
		if (m->level[m->node[i]] != top)
			continue;
		if (!m->deep[i] || !all)
			return;
		for (node = m->node[i]; node >= 0; node = m->nodes[node].parent)
			active[node] = true;
	}
	f->share_checked = true;
	for (node = 0; node < m->nr_nodes; node++) {
		bool has = false;

		for (i = 0, got = 0; i < m->nr_clients; i++) {
			if (m->node[i] != node)
				continue;
			has = true;
			got += busy[i];
		}
		/* a leaf with clients, all of the highest band (its own) */
		if (!has || m->level[node] != top)
			continue;
		want = cg_tree_want(&c, active, node);
		got = div64_u64(got * 1000000, all);
		f->share_err = max_t(unsigned int, f->share_err,
				     div64_u64(abs_diff(got, want), 1000));
	}
}

/*
 * Runs mix @m with its clients in @groups, as drawn or with @all_deep every
 * client deep, and asserts the essay's promises on what the engine did.
 */
static void cg_prop_run(struct kunit *test, struct cg_prop_mix *m,
			struct gpucg **groups, unsigned int seed, bool all_deep)
{
	unsigned int i, n = 0, nr_deep = 0, nr_waits = 0, shallow_jobs = 0;
	struct cg_prop_figures f = {};
	struct cg_client *clients;
	struct cg_job_rec *recs;

	clients = kunit_kcalloc(test, CG_PROP_CLIENTS, sizeof(*clients), GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, clients);
	for (i = 0; i < m->nr_clients; i++) {
		if (all_deep && !m->deep[i]) {
			m->params[i] = (struct cg_client_params){
				.depth = m->credits + 1,
				.job_us = m->params[i].job_us,
			};
			m->deep[i] = true;
		}
		if (all_deep)
			m->waits_on[i] = 0;
		if (m->waits_on[i]) {
			clients[i].signaller = &clients[m->waits_on[i] - 1];
			nr_waits++;
		}
		clients[i].group = groups[m->node[i]];
		clients[i].params = m->params[i];
		clients[i].max_log = CG_PROP_LOG;
	}
	cg_run_for(test, clients, m->nr_clients, m->credits, false, m->window_ms);

	for (i = 0; i < m->nr_clients; i++) {
		KUNIT_ASSERT_LT(test, clients[i].nr_log, clients[i].max_log);
		n += clients[i].nr_log;
		nr_deep += m->deep[i];
		if (!m->deep[i])
			shallow_jobs += clients[i].cycles;
	}
	recs = kunit_kcalloc(test, n, sizeof(*recs), GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, recs);
	for (i = 0, n = 0; i < m->nr_clients; i++) {
		memcpy(recs + n, clients[i].log, clients[i].nr_log * sizeof(*recs));
		n += clients[i].nr_log;
	}
	cg_prop_loans(test, m, clients, recs, n);
	sort(recs, n, sizeof(*recs), cg_rec_by_seqno, NULL);
	f.inversions = cg_prop_inversions(test, m, recs, n);
	cg_prop_idle(test, recs, n, clients[0].window_start, clients[0].window_end, &f);
	cg_prop_shares(m, clients, &f);

	kunit_info(test, "mix %u%s: %u slots, %u cgroups, %u clients (%u deep, %u waiting), %u jobs in %u ms: %u inversions, idle with work ready %lld us (longest %lld us), share error %s%u.%u points\n",
		   seed, all_deep ? ", all deep" : "", m->credits, m->nr_nodes,
		   m->nr_clients, nr_deep, nr_waits, n, m->window_ms, f.inversions,
		   div_s64(f.idle_ns, NSEC_PER_USEC),
		   div_s64(f.idle_max_ns, NSEC_PER_USEC),
		   f.share_checked ? "" : "(not checked) ",
		   f.share_err / 10, f.share_err % 10);
	if (f.inversions || f.idle_max_ns > CG_PROP_IDLE_MAX_NS ||
	    (nr_deep == m->nr_clients && !nr_waits && f.idle_ns) || f.share_err > 10)
		cg_prop_print(test, m);
	KUNIT_EXPECT_EQ(test, f.inversions, 0U);
	KUNIT_EXPECT_LE(test, f.idle_max_ns, CG_PROP_IDLE_MAX_NS);
	KUNIT_EXPECT_LE(test, f.idle_ns,
			(s64)(shallow_jobs + m->nr_clients) * CG_PROP_IDLE_MAX_NS);
	if (nr_deep == m->nr_clients && !nr_waits)
		KUNIT_EXPECT_EQ(test, f.idle_ns, 0);
	if (f.share_checked)
		KUNIT_EXPECT_LE(test, f.share_err, 10U);
}

/*
 * Property tests (issue 38): 200 mixes drawn at random from fixed seeds,
 * each run for 2 s after its warm-up (100 of its longest jobs, if longer)
 * as drawn and again with every client deep, and the essay's promises
 * asserted on what the engine did, job by job:
 *
 * - no job is handed to the hardware while a job of a higher effective
 *   priority is ready (pushed, and what it waits on handed off), unless a
 *   waiter of that band or higher lends to it (in the first run of a mix,
 *   each client waits on another's jobs with chance 1/5: a loan lifts the
 *   job waited on, and those ahead of it in its queue, to the waiter's
 *   band, along a chain too; and a lent job is ready in the lent band,
 *   which nothing lower may pass over);
 * - the engine runs nothing while a job is ready only while it expects an
 *   entity back, at most 48 ms at a stretch (48 windows' lower bound), and
 *   at most that per job of the clients that are not deep, in all: a mix of
 *   deep clients alone, none waiting, leaves it idle never;
 * - where every client of the highest band is deep and no client waits (always,
 *   the second time), each leaf of the tree with such a client gets its
 *   share by the weights along its path among those leaves, within 1
 *   point.
 *
 * The same mixes under both of drm_sched's policies (tools/sim.sh).
 */
static void drm_sched_cgroup_property(struct kunit *test)
{
	const unsigned int seed = (const u8 *)test->param_value - cg_prop_mixes + 1;
	struct gpucg *groups[CG_PROP_NODES];
	struct cg_prop_mix *m;
	unsigned int i;

	/* a mix's clients may all lend (cg_loans_on()) */
	BUILD_BUG_ON(CG_PROP_CLIENTS > CG_LENDER_CLIENTS);
	cg_virtual_time_only(test);
	m = kunit_kzalloc(test, sizeof(*m), GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, m);
	cg_prop_draw(m, seed);
	for (i = 0; i < m->nr_nodes; i++) {
		int parent = m->nodes[i].parent;

		groups[i] = cg_cgroup_new(test, parent < 0 ? NULL : groups[parent],
					  m->nodes[i].weight, cg_prop_prios[m->own[i]]);
	}
	cg_prop_run(test, m, groups, seed, false);
	cg_prop_run(test, m, groups, seed, true);
}

static struct kunit_case drm_sched_cgroup_tests[] = {
	KUNIT_CASE_PARAM_ATTR(drm_sched_cgroup_weights, cg_weight_gen_params,
			      { .speed = KUNIT_SPEED_SLOW }),
	KUNIT_CASE_PARAM_ATTR(drm_sched_cgroup_shapes, cg_shape_gen_params,
			      { .speed = KUNIT_SPEED_SLOW }),
	KUNIT_CASE_SLOW(drm_sched_cgroup_oversubscribed),
	KUNIT_CASE_SLOW(drm_sched_cgroup_interactive),
	KUNIT_CASE_SLOW(drm_sched_cgroup_priority),
	KUNIT_CASE_SLOW(drm_sched_cgroup_kernel_work),
	KUNIT_CASE_SLOW(drm_sched_cgroup_inside),
	KUNIT_CASE_SLOW(drm_sched_cgroup_priority_inside),
	KUNIT_CASE(drm_sched_cgroup_karma),
	KUNIT_CASE(drm_sched_cgroup_lender),
	KUNIT_CASE(drm_sched_cgroup_loan_outlives_holder),
	KUNIT_CASE(drm_sched_cgroup_loan_ends_with_killed_job),
	KUNIT_CASE_PARAM_ATTR(drm_sched_cgroup_loan_awaited, cg_await_gen_params,
			      { .speed = KUNIT_SPEED_SLOW }),
	KUNIT_CASE_PARAM_ATTR(drm_sched_cgroup_inversion, cg_inv_gen_params,
			      { .speed = KUNIT_SPEED_SLOW }),
	KUNIT_CASE_PARAM_ATTR(drm_sched_cgroup_prio_wait, cg_wait_gen_params,
			      { .speed = KUNIT_SPEED_SLOW }),
	KUNIT_CASE_PARAM_ATTR(drm_sched_cgroup_tree, cg_tree_gen_params,
			      { .speed = KUNIT_SPEED_SLOW }),
	KUNIT_CASE_PARAM_ATTR(drm_sched_cgroup_change, cg_change_gen_params,
			      { .speed = KUNIT_SPEED_SLOW }),
	KUNIT_CASE_SLOW(drm_sched_cgroup_bands),
	KUNIT_CASE_SLOW(drm_sched_cgroup_hop),
	KUNIT_CASE_PARAM_ATTR(drm_sched_cgroup_max, cg_max_gen_params,
			      { .speed = KUNIT_SPEED_SLOW }),
	KUNIT_CASE_PARAM_ATTR(drm_sched_cgroup_property, cg_prop_gen_params,
			      { .speed = KUNIT_SPEED_SLOW }),
	{}
};

/*
 * Without gpucg_root, the test's own cgroups, made before any device of the
 * test's: they are freed after the deferred actions that release the
 * devices.
 */
static int cg_init(struct kunit *test)
{
	struct gpucg *parent;
	unsigned int i;

	if (gpucg_root)
		return 0;
	parent = cg_cgroup_new(test, NULL, CGROUP_WEIGHT_DFL, 100);
	for (i = 0; i < ARRAY_SIZE(cg_names); i++)
		cg_made[i] = cg_cgroup_new(test, parent, cg_names[i].weight,
					   cg_names[i].prio);
	return 0;
}

static struct kunit_suite drm_sched_cgroup = {
	.name = "drm_sched_cgroup_tests",
	.init = cg_init,
	.test_cases = drm_sched_cgroup_tests,
};

kunit_test_suite(drm_sched_cgroup);
