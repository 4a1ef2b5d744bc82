// SPDX-License-Identifier: GPL-2.0
/*
 * GPU cgroup controller: the scheduling core.
 *
 * The controller decides who deserves the GPU; drivers enforce it where
 * their scheduler lives. The unit a driver hands the core is a queue (a
 * drm_sched entity, an i915 context, a firmware queue) that runs on an
 * engine (one hardware scheduler) and belongs to a client (a DRM file),
 * whose owner's cgroup pays for the queue's GPU time.
 *
 * Active and idle. Every engine keeps a tree of entities that mirrors the
 * cgroup hierarchy and holds only the cgroups that have a ready queue on it:
 * an idle cgroup costs nothing and nothing ever scans the hierarchy. A queue
 * is active while the driver says it is ready (gpucg_queue_sync()): a
 * drm_sched entity whose head job waits on a fence is not, and comes back
 * when the fence signals. A pick (gpucg_queue_pick()) descends from the
 * engine's top through the leftmost entity of each level to a queue and
 * asks the driver whether it can take it: a queue found not ready leaves
 * the tree, a ready one that cannot run yet (no room on the engine) keeps
 * its turn. A pick costs O(depth); activation and charges
 * O(depth * log(active siblings)).
 *
 * Priority. Active entities are ordered first by key, highest first: the
 * highest effective gpu.priority of the ready work in their subtree. Work
 * of a higher priority anywhere runs before lower work anywhere else.
 *
 * Weights and vtime. Among entities of equal key, the lowest vtime goes
 * first. GPU time t used in a subtree advances the vtime of each entity on
 * the path by t * 100 / weight, as in CFS and blk-iocost, so that siblings
 * share in proportion to their weights at every level and a cgroup gets
 * the product of weight / sum-of-active-sibling-weights down its path.
 * Vtimes are compared only within one key (a priority band). An entity
 * that becomes active after a real idle period starts no lower than about
 * one average job (the estimate of one in flight) below the leftmost
 * active sibling of its band: it goes before that sibling's next job, as
 * upstream's fair policy puts a returning entity at the head, banks no
 * credit by idling, and keeps any debt. An entity whose key changes keeps
 * the vtime of the band it leaves and takes back the one of the band it
 * left before, if that is the band it enters (so a subtree whose key flips
 * between two bands as its high-priority work comes and goes keeps its
 * place in both), no lower than that band's floor if it idled there: if a
 * job of it started in the other band meanwhile, or nothing of it was in
 * flight for longer than its window. A flip while its work in the band was
 * all in flight (a deep client's whose jobs fill the ring) is no idling:
 * counted as one, a cgroup at 10000 beside one at 100, whose subtree also
 * has work at a lower band, got 37.5% of the engine on four slots. In any
 * other band it starts level with the leftmost entity there. So time used
 * at one priority never delays the same subtree's work at another, and a
 * newcomer is never placed against a band above it.
 *
 * In-flight work. gpucg_queue_start() charges an estimate (the entity's
 * average job length) when a job is handed to the hardware, and
 * gpucg_charge() replaces it with the real time when the job is done: a
 * driver with several slots does not pick the same cgroup again and again
 * before the first job retires. gpucg_charge() needs no queue, so jobs may
 * outlive theirs; drivers that learn GPU time otherwise (per context at a
 * context switch, by sampling) charge with gpucg_queue_charge().
 *
 * Shallow clients. Work conservation alone gives a client that keeps one
 * job queued an equal turn at best, whatever its weight: while it prepares
 * its next job the engine goes to someone else. On an engine with several
 * slots (a ring, which runs its jobs in order) it is worse: the jobs a
 * deep client puts in the ring while the shallow client's job runs come
 * before the shallow client's next job, so the shallow one waits behind
 * the ring's content on every job, whatever the weights (23:77 at 900:100 with
 * four slots). So the engine expects such an entity back (CFQ and BFQ call
 * this idling): from the moment its last ready work is picked, through its
 * jobs in flight, until its think time (the gap between its last job
 * retiring and new work arriving, averaged) and half again (at most
 * gpucg_gap_max()) have passed after their expected end, plus a window of
 * a quarter of its average job
 * (1 to 16 ms by default; gpu_anticipate_us= on the command line sets the
 * lower bound, 0 turns expecting off). Meanwhile a pick that would start
 * work of an entity the expected one beats returns nothing and says when
 * to ask again, unless that work fits: started now, behind what is in
 * flight, its job (its average) ends before the expected entity is back
 * (allowing for the average deviation of its think time).
 * An entity later than that is still expected for four of its cycles (job
 * and think time), but only to keep the ring shallow: work it beats starts
 * when the engine has no job in flight (every one charged), so a client
 * that is late now and then finds one job ahead of it rather than a ring's
 * worth.
 *
 * So a client that thinks gets the smaller of its demand and its share of
 * the GPU time used, and the others take the gaps its think time leaves
 * where the job of the one that would run next fits (a pick does not look
 * further for a shorter one). A budget of slots per cgroup would not do: the
 * shallow client would still wait behind the deep one's part of the ring
 * on every job. An entity that thinks more than twice as long as its jobs
 * run, or longer than 32 times the window's lower bound (32 ms by default,
 * whatever its job length), is not waited for, and the engine waits for
 * any other at most that bound plus the window. For four of its cycles
 * the engine still keeps the ring shallow for one it does not wait for,
 * but not empty: work of its band that it beats starts while the jobs
 * in flight end within one job (the longest of that work's average job,
 * the engine's and its window) from now. So a client whose think time
 * grows for a while (a stall, a busy CPU) finds the running job and one
 * job's worth ahead of it, never a ring's worth (1.3 s at 256 slots of
 * 5 ms), and the engine has the next job queued all the same. Work of a
 * lower band starts then only when nothing is in flight or when its job
 * ends before the client is back (its think time, less its average
 * deviation): a client of a higher priority finds at most the running job
 * ahead of it, and the lower band pays for that with its next job not
 * queued ahead where it would not fit (on an engine with slots, a
 * submission's latency per such job; a job overrunning its estimate by a
 * window ends the hold). A client that went away costs one
 * wait and a shallow ring for four cycles, a deep client costs nothing,
 * one that thinks far longer than it runs costs the others of its band
 * the depth of the ring beyond one queued job (engine time only where the
 * CPU takes longer than that job to queue the next: under emulation, 2 to
 * 19% of the engine with jobs of 2 ms), and the
 * engine idles at most one and a half think times plus a window per job
 * of a client it waits for: at most 48 times the window's lower bound,
 * 48 ms by default, however long that client's own jobs are (and a job
 * lent adds one wait for the next loan, below, bounded alike).
 * (Twice, not once: the latency between a job's end and the next job's
 * arrival counts as think time, and a client that renders for as long as
 * it waits must still get what it asks for.) An engine expects at most 8
 * entities at once: for a ninth, the oldest that is overdue (later than
 * its four cycles) or that it does not wait for makes room, else the
 * oldest if it waits for the newcomer; one it would not wait for is not
 * listed beside 8 it waits for (and its ring is not kept shallow), so any
 * number of clients that think long cannot push out one it waits for. A
 * gap shorter than the wait does not count as idling: the entity keeps its
 * vtime. Expecting assumes the engine runs the jobs in flight one after
 * another, as a ring does; it never makes a client wait for itself.
 *
 * Priority inheritance. A queue whose next work waits on a job of another
 * client that is still in its queue (a fence of a job not yet handed to
 * the hardware) would wait for as long as work of a band between the two
 * keeps that job's queue from running: a cgroup at priority 100 waiting on
 * one at -100 gets nothing while one at 0 saturates the engine. So the
 * waiter lends its effective priority (gpucg_boost_link()) to the queue
 * that holds the job, on the signaller's engine, which may be another
 * engine or device, until the job leaves the queue (the driver's done
 * callback says so, and the engine's first pick after a job of that queue
 * started or the queue was synced drops the link), or the waiter stops
 * waiting. The queue alone rises, and only while it is ready: a cgroup's
 * queues are ordered first by what their loans lift them to (a loan above
 * the cgroup's band), and the entity counts in the band of its first ready
 * queue's lift (its boost); a pick in that band takes that queue. The cgroup's
 * other queues stay in their band, and a job that cannot run (it waits on
 * a fence of its own, which the queue may lend to in turn) lifts nothing.
 * On a grouped engine (below) the driver's run queue holds all of a
 * cgroup's queues, so each of them is also a queue of the core that runs
 * only on loan (gpucg_queue_init_lent()). Its GPU time is charged to its own cgroup as
 * ever: the estimate of a job started on loan to its vtime in the band it
 * was lent (see above), the correction when the job ends to the band it
 * is in then. A waiter
 * lends what it has: its own effective priority, which its ancestors
 * already cap, or what is lent to its queue in turn, so chains pass a priority
 * on (a signaller that waits itself lends further) and a delegated
 * subtree can raise work only to the priority of a waiter that already
 * has it. A priority passed on travels at most GPUCG_BOOST_HOPS links and
 * a change passed on updates at most GPUCG_BOOST_BUDGET of them, so a
 * cycle of waits (a deadlock, or cgroups whose clients wait on each
 * other's jobs) cannot loop: a priority passed around a cycle stops after
 * GPUCG_BOOST_HOPS links, and a change that runs out of budget leaves the
 * links it did not reach as they were until the next change along them
 * or the end of the waits. A change of a cgroup's own gpu.priority
 * reaches every link of its waits (gpucg_boost_refresh()), each with a
 * budget of its own for what it passes on. A queue on loan is not held
 * for an expected entity whose priority is no higher than the loan (the
 * waiter may be that entity), nor, when a waiter on its own engine lends
 * it its own band, for one of that band. A loan no higher than the
 * cgroup's own band lifts nothing and reorders nothing: the same cgroup's
 * jobs on another engine that wait on a queue (a bin job's render job)
 * lend it its band and change nothing, so with no cgroup configured the
 * driver's order is untouched. Whether a loan lifts is decided when the
 * queue is sorted in, and weighed again for every queue lent anything when
 * the cgroup's priority changes (gpucg_entity_relift()). The links into a
 * queue are kept in order of what they lend (a tree, and one of those
 * from waiters on its own engine), so that making, dropping or changing
 * one costs O(log n) in the links into its queue, however many waiters a
 * client makes, and in the order its jobs leave it (a third tree, by the
 * place of the job each waits for), so that a look after a job of the
 * queue started drops the links whose job has gone and stops at the
 * first whose job has not.
 *
 * A loan comes only once the waiter's job is queued, after the signaller's:
 * in between, the signaller's job sits in its own band, and work of a band
 * between the two that starts then is work the lent job waits for all the
 * same, on an engine that does not preempt. So a loan is anticipated as a
 * client's next job is. An entity whose last job started on loan is
 * expected back, as above, in the band it was lent (gpucg_expect_key());
 * and when it is next ready in its own band, the engine awaits the loan
 * once: it holds work of the bands below the loan's for the loans' usual
 * delay after the entity became ready, half again, plus the window
 * (gpucg_loan_wait()), if that delay is at most twice its job and 32
 * windows' lower bound, and never longer than that bound plus the window
 * (as for a think time), and the
 * loan's arrival has the engine pick again (gpucg_boost_link() says so;
 * a loan passed on along a chain does not, and the wait's end does).
 * A job that waits on a fence of its own meanwhile is awaited again when
 * it is ready, within the same wait. A loan that comes late is still
 * sampled; work of the loan's own band is not held (the entity's vtime
 * there may be another band's). So one job lent costs the engine at most
 * one wait for the entity's next job and one for its loan. A job that
 * starts without a loan ends it: the waiter has
 * stopped waiting, its loan came too late, or nothing else was ready
 * (then the next job is lent only once it has waited). Nothing runs above
 * its band for it: only work that its loan would beat waits.
 *
 * Inside a cgroup, queues are ordered by context priority, then by their
 * own vtime (the estimates of the jobs they started), so the clients of one
 * cgroup take turns instead of running FIFO. The root cgroup's queues sit
 * in a leaf under the top with the default weight and priority 0, and the
 * kernel's queues (those of no client: a driver's page-table updates, say)
 * in another beside it, alike but never expected back; an inner
 * cgroup's own queues, which cgroup v2 allows only at the root, compete
 * with its children as one more child of the default weight.
 *
 * Grouped engines. A scheduler with a policy of its own inside a run queue
 * (drm_sched's: FIFO, or since Linux 7.2 a fair one, a vruntime per entity,
 * its priority a multiplier of it) keeps that policy inside each cgroup, as
 * CFS group scheduling does: the engine is created with &struct
 * gpucg_group_ops, the core gives every cgroup's entity on it one queue
 * that stands for a run queue of the driver's (gpucg_client_group()), and
 * the driver puts each client's work in the run queue of its owner's
 * cgroup. The core orders the run queues as above (priority, then vtime
 * over weight, with in-flight estimates and shallow clients expected
 * back), the driver's policy the work inside one. With every client in one
 * cgroup the choices are the driver's alone; an entity's priority orders
 * or weighs it against its own cgroup's entities and never against another
 * cgroup's. The run queues are created and freed with the cgroups'
 * entities, so a cgroup that goes away takes its run queue along.
 *
 * Against a hostile client. A client controls its job lengths, its think
 * times, what its jobs wait on (its own fences, other devices' and other
 * drivers'), how many queues it opens and, in a delegated subtree, its
 * cgroups. Whatever it does:
 *
 * - An engine idles for others at most 48 windows' lower bound (48 ms by
 *   default) per job of an entity it expects, and one such wait more for
 *   the loan of a job lent: the gaps it waits out are bounded absolutely
 *   (gpucg_gap_max()), not in multiples of the entity's own jobs.
 * - With interrupts off, the core does work bounded by the engine and the
 *   hierarchy, not by what a client made: a pick O(depth) plus the
 *   entities expected (at most GPUCG_EXPECT_MAX) and the queues it skips;
 *   a charge or an activation O(depth * log(active siblings)); a link, an
 *   unlink or a change of what a link lends O(log n) in the links into
 *   its target, plus what a change passes on (at most GPUCG_BOOST_BUDGET
 *   links); dropping links whose work has left its queue at most
 *   GPUCG_EXPIRE_BATCH links a section, each passing its change on to at
 *   most GPUCG_BOOST_BUDGET more, and so does an engine's destruction.
 *   A job start or a sync of a queue costs a pick, under the boost lock,
 *   one look at a link beyond the links it drops, however many links
 *   wait on the queue's later work (the links into a queue are kept in
 *   the order its work leaves, and a look stops at the first still
 *   waiting: gpucg_test_start_cost); only a queue that links point into
 *   costs the lock at all.
 *   Caps (gpu.max, below): a charge re-sorts the entities on its path whose
 *   throttle changes (O(depth^2 * log n)); a pick, or a driver's
 *   question whether a queue is throttled, releases at most
 *   GPUCG_CAP_BATCH throttled entities, and an engine's destruction
 *   releases them in batches of as many, the lock dropped in between,
 *   however many capped cgroups a delegatee made.
 *   A pick takes no lock but its engine's unless, since its last look,
 *   a queue of the engine that links point into started a job, was
 *   synced or went inactive, or a link into one was made.
 * - Kernel work moves no cgroup's vtime and arms no anticipation: queues
 *   without a client sit in an entity of their own (see above), never
 *   expected back and lending nothing, and a kernel job that no queue holds
 *   (gpucg_kernel_start()) counts only among the jobs in flight and in
 *   the device's total.
 * - Engine ids are allocated and freed, per device, so that no id aliases
 *   a live engine's; an engine keeps its device, and the device's state
 *   in every cgroup, until it is destroyed.
 * - A link reaches only queues that are there: a queue that goes drops
 *   the links into and out of it (gpucg_queue_fini()) before its engine
 *   can go, so a loan to another device's job outlives neither that job's
 *   queue nor the device. A driver finds the queue that holds a job, and
 *   touches its scheduler, only under a lock that the queue's teardown
 *   takes (drm_sched: the lookup of entities by fence context).
 * - A loan lifts the queue that holds the job waited for, while it is
 *   ready, and nothing else of its cgroup: a job that waits on something
 *   of its own lifts nothing meanwhile (gpucg_test_loan_lifts_only_its_holder).
 *   The jobs queued ahead of the one waited for go with it, as they must
 *   go before it; drm_sched's cgroup suite checks, over random mixes with
 *   loans, that nothing else runs above its band (drm_sched_cgroup_property).
 * - What a client makes the core allocate is charged to the memory cgroup
 *   of the task that made it (GFP_KERNEL_ACCOUNT), and a move of its
 *   owner makes the new cgroup's entity only on the engines the client's
 *   queues used (gpucg_client_prepare()), not on every engine of the
 *   device (other clients' per-queue engines): a process that moves
 *   through K cgroups pins K entities per engine it used
 *   (gpucg_test_move_makes_entities_where_used). Submissions take
 *   gpucg_mutex only to make what is missing: at a queue's creation, and
 *   once after a move of the owner.
 *
 * Locking: an engine's lock protects its entities' trees, keys, vtimes,
 * estimates and the list of entities it expects back, and is taken with
 * interrupts off: drivers call in from fence callbacks and interrupts (each
 * driver's engines have a lock class of their own, so that one that nests
 * its run queues' locks inside, as drm_sched does, and never calls in from
 * an interrupt is told apart).
 * gpucg_mutex (gpu.c) protects the creation and freeing of entities and
 * engines, and engine ids; it nests outside engine locks. A queue and a
 * ticket pin the cgroup of their entity; a grouped engine's run queue is
 * pinned by its driver (gpucg_client_group()), for as long as work sits in
 * it. Entities and run queues live until their cgroup is freed or their
 * engine destroyed. The entities an engine expects back are not pinned, so
 * that an idle engine keeps no removed cgroup alive: freeing an entity
 * takes it off the list.
 * gpucg_boost_lock protects every link of priority inheritance, the lists
 * of links out of each entity and queue and into each engine, the trees of
 * links into each queue, and nests outside engine locks, which it takes
 * one at a time, along chains of links too: a pick on an engine whose
 * queues with links were marked (below), and everything that links,
 * takes the locks of the engines reachable along them. The list of links
 * into an engine and a queue's tree of them by place are written under
 * both locks; the engine's list of queues marked for a look (a job of
 * theirs started, or they were synced: gpucg_boost_mark()) under its
 * lock, and a queue is on it only while links point into it. A link pins
 * the cgroup of its waiter; its holder's end goes with the holder
 * (gpucg_queue_fini() drops the links into a queue and out of it), and an
 * engine's destruction drops the links to and from it and refuses new
 * ones either way. A queue's boost and boost_local are written under both
 * locks, an entity's boost (what its first ready queue is lent) under its
 * engine's.
 */

#include <linux/cgroup.h>
#include <linux/cgroup_gpu.h>
#include <linux/init.h>
#include <linux/ktime.h>
#include <linux/math64.h>
#include <linux/minmax.h>
#include <linux/rcupdate.h>
#include <linux/refcount.h>
#include <linux/sched.h>
#include <linux/slab.h>

#include <kunit/static_stub.h>
#include <kunit/visibility.h>

#include "gpu.h"

#define GPUCG_KEY_NONE		INT_MIN

/* The core's clock; the KUnit suite (gpu_sched_test.c) sets its own. */
static u64 gpucg_now(void)
{
	KUNIT_STATIC_STUB_REDIRECT(gpucg_now);
	return ktime_get_ns();
}

/*
 * How long an engine waits for a shallow entity to come back: a quarter of
 * the entity's average job, at least this and at most 16 times this.
 */
static u64 gpucg_anticipate_ns = NSEC_PER_MSEC;

static int __init gpucg_anticipate_setup(char *s)
{
	unsigned int us;

	if (kstrtouint(s, 10, &us))
		return 0;
	gpucg_anticipate_ns = (u64)us * NSEC_PER_USEC;
	return 1;
}
__setup("gpu_anticipate_us=", gpucg_anticipate_setup);

/*
 * The mechanisms a test may switch off, one bit each, to measure what each
 * buys: gpu_sched_off= on the command line (tools/sim.sh, bench/ablation.py;
 * the kernel README's ablation table), only in kernels built with the
 * controller's KUnit suite (CONFIG_CGROUP_GPU_KUNIT_TEST).
 */
enum {
	GPUCG_OFF_ESTIMATE	= BIT(0),	/* in-flight estimates charged */
	GPUCG_OFF_WAIT		= BIT(1),	/* waiting for a shallow entity */
	GPUCG_OFF_RING		= BIT(2),	/* the ring shallow for a late one */
	GPUCG_OFF_ABOVE		= BIT(3),	/* a higher band's own hold */
	GPUCG_OFF_FITS		= BIT(4),	/* work that fits a wait runs */
	GPUCG_OFF_LEND		= BIT(5),	/* priority inheritance */
	GPUCG_OFF_LOAN_WAIT	= BIT(6),	/* awaiting a loan */
	GPUCG_OFF_FLOOR		= BIT(7),	/* a returning entity's floor */
	GPUCG_OFF_BANDS		= BIT(8),	/* a vtime kept per band */
};

static unsigned int gpucg_ablated __ro_after_init;

static bool gpucg_off(unsigned int mechanism)
{
	return IS_ENABLED(CONFIG_CGROUP_GPU_KUNIT_TEST) &&
	       (gpucg_ablated & mechanism);
}

#if IS_ENABLED(CONFIG_CGROUP_GPU_KUNIT_TEST)
static int __init gpucg_off_setup(char *s)
{
	return !kstrtouint(s, 0, &gpucg_ablated);
}
__setup("gpu_sched_off=", gpucg_off_setup);
#endif

/*
 * A cgroup's place in one engine's tree. The first four fields are set at
 * creation; the others are under the engine's lock.
 */
struct gpucg_entity {
	struct gpucg_entity	*parent;	/* NULL for an engine's top */
	int			depth;		/* below the top */
	struct gpucg_pool	*pool;		/* NULL for the top and root */
	struct gpucg_engine	*engine;
	struct list_head	engine_node;	/* in engine->ents, gpucg_mutex */
	struct rb_node		node;		/* in parent->children, if active */
	struct rb_root_cached	children;	/* active children */
	struct rb_root_cached	queues;		/* own active queues */
	u64			vtime;		/* in the parent's tree */
	u64			left_vtime;	/* its vtime in the band it left */
	u64			vclock;		/* highest vtime picked below */
	u64			self_vtime;	/* own queues against children */
	u64			qvclock;	/* highest queue vtime picked */
	u64			est_ns;		/* average job length */
	u64			idle_ns;	/* when it last became idle */
	u64			think_ns;	/* average think time */
	u64			think_dev_ns;	/* its average deviation */
	u64			due_ns;		/* expected end of its subtree's last job */
	u32			inflight;	/* jobs started, not charged */
	struct list_head	expect_node;	/* in engine->expected */
	int			prio;		/* effective priority */
	int			boost;		/* lent to its first ready queue */
	int			run_key;	/* own key its last job started in */
	int			await_key;	/* band of the loan it awaits */
	u64			await_ns;	/* awaiting it since; 0: no sample */
	u64			lend_ns;	/* average delay of a loan */
	struct list_head	boosts_out;	/* links of its waits, boost lock */
	unsigned int		nr_boosts_out;	/* boost lock */
	struct list_head	lent;		/* its queues lent anything */
	unsigned int		nr_lent;
	int			key;		/* its band in the parent's tree */
	int			left_key;	/* the band it left last */
	u64			left_ns;	/* when it left it */
	int			start_key;	/* its band at its last job's start */
	bool			active;
	bool			placed;		/* has been active once */
	struct gpucg_queue	*group;		/* its run queue, grouped engines */
	u64			cap_used;	/* GPU time in this period (gpu.max) */
	u64			cap_start;	/* this period's start; 0: none yet */
	u64			cap_until;	/* throttled until then */
	u64			cap_period;	/* the period it was throttled in */
	u64			throttled_at;
	bool			cap_released;	/* back from a throttle, not idle */
	bool			cap_counted;	/* this period in nr_periods */
	struct rb_node		cap_node;	/* in engine->throttled */
	bool			throttled;
};

struct gpucg_engine {
	struct gpucg_device	*dev;
	u32			id;		/* in gpucg_pool.ents, dev->engine_ids */
	struct list_head	dev_node;	/* in dev->engines, gpucg_mutex */
	struct list_head	ents;		/* entities, gpucg_mutex */
	spinlock_t		lock;
	struct gpucg_entity	top;		/* the root of the tree */
	struct gpucg_entity	root;		/* the root cgroup's queues */
	struct gpucg_entity	kernel;		/* queues of no client */
	struct list_head	expected;	/* entities expected back, oldest first */
	unsigned int		nr_expected;
	u64			busy_until;	/* expected end of the jobs in flight */
	u32			tickets;	/* jobs in flight */
	u64			est_ns;		/* average job of all entities */
	struct list_head	boosts;		/* links into it, both locks */
	unsigned int		nr_boosts;
	struct list_head	boost_dirty;	/* queues marked, its lock */
	unsigned int		nr_dirty;
	bool			dying;		/* takes no more links, boost lock */
	bool			schedules;	/* its scheduler follows the policy */
	bool			caps;		/* its driver holds work back (gpu.max) */
	struct rb_root_cached	throttled;	/* entities over their cap, by cap_until */
	const struct gpucg_group_ops *group_ops; /* NULL: not grouped */
	void			*group_priv;
};

struct gpucg_client {
	struct gpucg __rcu	*cg;	/* the owner's, holding a reference */
	struct gpucg_device	*dev;
	struct mutex		lock;	/* serializes owner changes */
	refcount_t		ref;	/* the DRM file's, and its queues' */
	struct xarray		engines; /* ids of the engines it used */
};

static struct gpucg_queue *gpucg_next(struct gpucg_engine *engine);
static void gpucg_queue_deactivate(struct gpucg_queue *q, u64 now);

static u64 gpucg_window(struct gpucg_entity *e)
{
	return clamp(e->est_ns / 4, gpucg_anticipate_ns,
		     16 * gpucg_anticipate_ns);
}

/* At most this many entities expected back per engine (gpucg_expect()) */
#define GPUCG_EXPECT_MAX	8
/* The shortest time after which a held pick asks again */
#define GPUCG_RETRY_MIN_NS	(50 * NSEC_PER_USEC)

/*
 * The longest gap (a think time, a loan's delay, with half again) that an
 * engine waits out for an entity, whatever the entity's own job length:
 * 32 times the window's lower bound, 32 ms by default: a client that
 * thinks for a frame at 30 frames a second is still waited for. With the
 * window,
 * the most an engine idles for one job of an entity it expects.
 */
static u64 gpucg_gap_max(void)
{
	return 32 * gpucg_anticipate_ns;
}

/*
 * How long the engine waits for an entity whose gaps average @gap, whose
 * jobs average @est: the gap and half again, at most gpucg_gap_max(), plus
 * the window; 0 if the gap is more than twice its job or more than
 * gpucg_gap_max() itself: such an entity is not waited for.
 */
static u64 gpucg_wait_ns(struct gpucg_entity *e, u64 gap, u64 est)
{
	if (!gpucg_anticipate_ns || gap > 2 * est || gap > gpucg_gap_max())
		return 0;
	return min(gap + gap / 2, gpucg_gap_max()) + gpucg_window(e);
}

/*
 * How long after its last job ends the engine waits for @e: its think time
 * and half again, plus the window; 0 if it is not waited for
 * (gpucg_wait_ns()).
 */
static u64 gpucg_expect_ns(struct gpucg_entity *e)
{
	if (e == &e->engine->kernel)	/* never expected back */
		return 0;
	return gpucg_wait_ns(e, e->think_ns, e->est_ns);
}

/* The average job of @e: the engine's for a newcomer, 1 ms on a new engine */
static u64 gpucg_est(struct gpucg_entity *e)
{
	return e->est_ns ?: e->engine->est_ns ?: NSEC_PER_MSEC;
}

/* When the jobs of @e in flight are expected to end, or it went idle. */
static u64 gpucg_since(struct gpucg_entity *e, u64 now)
{
	return e->inflight ? max(e->due_ns, now) : e->idle_ns;
}

/*
 * Whether @e, expected back, is later than four of its cycles (job and
 * think time) after its wait: then it is expected no longer.
 */
static bool gpucg_expect_over(struct gpucg_entity *e, u64 now)
{
	u64 until = gpucg_since(e, now) + gpucg_expect_ns(e);

	return (s64)(until + 4 * (e->est_ns + e->think_ns) - now) <= 0;
}

static bool vtime_before(u64 a, u64 b)
{
	return (s64)(a - b) < 0;
}

static u64 gpucg_loan_wait(struct gpucg_entity *e);

/*
 * Whether @e awaits a loan (gpucg_queue_activate()), its own queues ready:
 * while none is, it is expected back, if at all, as any other.
 */
static bool gpucg_awaits_loan(const struct gpucg_entity *e)
{
	return e->await_key != GPUCG_KEY_NONE &&
	       !RB_EMPTY_ROOT(&e->queues.rb_root);
}

/*
 * How long the engine waits for @e, listed in engine->expected: for its
 * loan if it awaits one (gpucg_loan_wait()), else for its next job
 * (gpucg_expect_ns()).
 */
static u64 gpucg_waits_for(struct gpucg_entity *e)
{
	return gpucg_awaits_loan(e) ? gpucg_loan_wait(e) : gpucg_expect_ns(e);
}

/* Whether @e, listed, is overdue: its loan's wait or its cycles are over. */
static bool gpucg_listed_over(struct gpucg_entity *e, u64 now)
{
	if (gpucg_awaits_loan(e))
		return (s64)(e->await_ns + gpucg_loan_wait(e) - now) <= 0;
	return gpucg_expect_over(e, now);
}

/* Engine lock held. */
static void gpucg_unexpect(struct gpucg_entity *e)
{
	if (list_empty(&e->expect_node))
		return;
	list_del_init(&e->expect_node);
	e->engine->nr_expected--;
}

/*
 * @e awaits no loan any more (its loan came, its wait is over, or a job of
 * its own started), and is no longer listed for one; if it is listed to be
 * expected back, it stays. Engine lock held.
 */
static void gpucg_await_end(struct gpucg_entity *e)
{
	if (gpucg_awaits_loan(e))
		gpucg_unexpect(e);
	e->await_key = GPUCG_KEY_NONE;
}

/*
 * The entity a full list drops to make room for @e: the oldest that is
 * overdue (gpucg_listed_over()) or that the engine does not wait for, else
 * the oldest if the engine waits for @e; NULL if it waits for every entity
 * listed and not for @e, which is then not listed. So clients that think
 * long, however many, never push out one the engine waits for. Engine lock
 * held.
 */
static struct gpucg_entity *gpucg_expect_victim(struct gpucg_engine *engine,
						struct gpucg_entity *e,
						u64 now)
{
	struct gpucg_entity *a;

	list_for_each_entry(a, &engine->expected, expect_node)
		if (!gpucg_waits_for(a) || gpucg_listed_over(a, now))
			return a;
	return gpucg_waits_for(e) ? list_first_entry(&engine->expected,
						     struct gpucg_entity,
						     expect_node) : NULL;
}

/*
 * Expects @e back, or its loan (held for, if gpucg_waits_for() says it
 * is; else only to keep the ring shallow), dropping an expected entity if
 * there are too many (gpucg_expect_victim(); one awaiting a loan awaits it
 * no more). Engine lock held.
 */
static void gpucg_expect(struct gpucg_entity *e, u64 now)
{
	struct gpucg_engine *engine = e->engine;
	struct gpucg_entity *victim;

	/* kernel work arms no anticipation */
	if (!e->placed || !gpucg_anticipate_ns || e == &engine->kernel) {
		gpucg_unexpect(e);
		return;
	}
	if (!list_empty(&e->expect_node)) {
		list_move_tail(&e->expect_node, &engine->expected);
		return;
	}
	if (engine->nr_expected == GPUCG_EXPECT_MAX) {
		victim = gpucg_expect_victim(engine, e, now);
		if (!victim)
			return;
		gpucg_unexpect(victim);
		victim->await_key = GPUCG_KEY_NONE;
	}
	list_add_tail(&e->expect_node, &engine->expected);
	engine->nr_expected++;
}

static void gpucg_entity_pin(struct gpucg_entity *e)
{
	if (e->pool)
		css_get(&e->pool->cg->css);
}

static void gpucg_entity_unpin(struct gpucg_entity *e)
{
	if (e->pool)
		css_put(&e->pool->cg->css);
}

static u32 gpucg_entity_weight(struct gpucg_entity *e)
{
	if (!e->pool)
		return CGROUP_WEIGHT_DFL;
	return READ_ONCE(e->pool->weight) ?: READ_ONCE(e->pool->cg->weight);
}

static void gpucg_entity_init(struct gpucg_entity *e, struct gpucg_engine *engine,
			      struct gpucg_entity *parent, struct gpucg_pool *pool)
{
	e->engine = engine;
	e->parent = parent;
	e->depth = parent ? parent->depth + 1 : 0;
	e->pool = pool;
	e->children = RB_ROOT_CACHED;
	e->queues = RB_ROOT_CACHED;
	e->key = GPUCG_KEY_NONE;
	e->boost = GPUCG_KEY_NONE;
	e->run_key = GPUCG_KEY_NONE;
	e->start_key = GPUCG_KEY_NONE;
	e->await_key = GPUCG_KEY_NONE;
	INIT_LIST_HEAD(&e->boosts_out);
	INIT_LIST_HEAD(&e->lent);
	INIT_LIST_HEAD(&e->engine_node);
	INIT_LIST_HEAD(&e->expect_node);
	RB_CLEAR_NODE(&e->node);
}

static bool gpucg_entity_less(struct rb_node *a, const struct rb_node *b)
{
	const struct gpucg_entity *ea = rb_entry(a, struct gpucg_entity, node);
	const struct gpucg_entity *eb = rb_entry(b, struct gpucg_entity, node);

	if (ea->key != eb->key)
		return ea->key > eb->key;
	return vtime_before(ea->vtime, eb->vtime);
}

/*
 * What a loan lifts @q to: what it is lent, if that is above its cgroup's
 * own band; else nothing. Set when the queue is sorted in (engine lock).
 */
static void gpucg_queue_set_lift(struct gpucg_queue *q)
{
	q->lift = q->boost > READ_ONCE(q->ent->prio) ? q->boost : GPUCG_KEY_NONE;
}

/* A cgroup's queues: the one lifted most first, then by context priority. */
static bool gpucg_queue_less(struct rb_node *a, const struct rb_node *b);

/* Sorts @q in among the ready queues of @ent. Engine lock held. */
static void gpucg_queue_insert(struct gpucg_queue *q, struct gpucg_entity *ent)
{
	gpucg_queue_set_lift(q);
	rb_add_cached(&q->node, &ent->queues, gpucg_queue_less);
}

static bool gpucg_queue_less(struct rb_node *a, const struct rb_node *b)
{
	const struct gpucg_queue *qa = rb_entry(a, struct gpucg_queue, node);
	const struct gpucg_queue *qb = rb_entry(b, struct gpucg_queue, node);

	if (qa->lift != qb->lift)
		return qa->lift > qb->lift;
	if (qa->ctx_prio != qb->ctx_prio)
		return qa->ctx_prio > qb->ctx_prio;
	return vtime_before(qa->vtime, qb->vtime);
}

static struct gpucg_entity *gpucg_first_child(struct gpucg_entity *e)
{
	struct rb_node *n = rb_first_cached(&e->children);

	return n ? rb_entry(n, struct gpucg_entity, node) : NULL;
}

static struct gpucg_queue *gpucg_first_queue(struct gpucg_entity *e)
{
	struct rb_node *n = rb_first_cached(&e->queues);

	return n ? rb_entry(n, struct gpucg_queue, node) : NULL;
}

/* The active child of @e with the lowest vtime in band @key, if any. */
static struct gpucg_entity *gpucg_band_first(struct gpucg_entity *e, int key)
{
	struct rb_node *n = e->children.rb_root.rb_node;
	struct gpucg_entity *c, *found = NULL;

	while (n) {
		c = rb_entry(n, struct gpucg_entity, node);
		if (c->key > key) {
			n = n->rb_right;
		} else {
			if (c->key == key)
				found = c;
			n = n->rb_left;
		}
	}
	return found;
}

/*
 * The band of the entity's own queues: its priority, or what is lent to the
 * first of them that is ready, if that is higher.
 */
static int gpucg_own_key(const struct gpucg_entity *e)
{
	return max(e->prio, e->boost);
}

/*
 * The band @e is expected back in: its own, or the one its last job
 * started in if that was higher (lent to it, by a waiter that is likely
 * to wait on its next job too).
 */
static int gpucg_expect_key(const struct gpucg_entity *e)
{
	return max(gpucg_own_key(e), e->run_key);
}

/*
 * How long after its job became ready in its own band the engine waits for
 * @e's loan: its loans' usual delay and half again, plus the window; 0 if
 * it awaits no loan (gpucg_queue_activate()), or its loans come too late
 * to be waited for (gpucg_wait_ns()).
 */
static u64 gpucg_loan_wait(struct gpucg_entity *e)
{
	if (e->await_key <= gpucg_own_key(e))
		return 0;
	return gpucg_wait_ns(e, e->lend_ns, gpucg_est(e));
}

/*
 * Samples the delay of @e's loan, which came @now: since its job became
 * ready, even if the engine waited less, at most four times its job or the
 * window (as its think time). Engine lock held. Return: whether the engine
 * was holding work for it.
 */
static bool gpucg_entity_lent(struct gpucg_entity *e, u64 now)
{
	u64 delay = min(now - e->await_ns,
			4 * max(gpucg_est(e), gpucg_window(e)));
	bool held = gpucg_awaits_loan(e) && !list_empty(&e->expect_node);

	e->lend_ns = (3 * e->lend_ns + delay) / 4;
	e->await_ns = 0;
	gpucg_await_end(e);
	return held;
}

/* The entity's key: the highest band of its ready work. */
static int gpucg_entity_key(struct gpucg_entity *e)
{
	struct gpucg_entity *child = gpucg_first_child(e);
	int key = RB_EMPTY_ROOT(&e->queues.rb_root) ? GPUCG_KEY_NONE :
		  gpucg_own_key(e);

	/* over its cap (gpu.max): out of its parent's tree until released */
	if (e->throttled)
		return GPUCG_KEY_NONE;
	return child ? max(key, child->key) : key;
}

/*
 * Where @e, which joins band @key of its parent's tree, starts at the
 * earliest: the band's leftmost entity's vtime, less one average job of it
 * if it has one in flight (about where it stood when its last job was
 * picked). So one that comes back goes before the leftmost entity's next
 * job rather than behind it (upstream's fair policy puts a returning
 * entity at the head too), and banks no more than one job of it: not a
 * ring's worth, which it will wait behind anyway. On a tie, @e goes first
 * if its jobs are no longer than the leftmost's (upstream's fair policy
 * breaks the tie the same way, for interactivity): one that comes back
 * between the leftmost's job retiring and its next pick would otherwise
 * wait a whole job of it. False if the band is empty.
 */
static bool gpucg_band_floor(struct gpucg_entity *e, int key, u64 *floor)
{
	struct gpucg_entity *first = gpucg_band_first(e->parent, key);

	if (!first)
		return false;
	*floor = first->vtime;
	if (first->inflight)
		*floor -= mul_u64_u32_div(gpucg_est(first), CGROUP_WEIGHT_DFL,
					  gpucg_entity_weight(first));
	if (gpucg_est(e) <= gpucg_est(first))
		*floor -= 1;
	return true;
}

/*
 * Places @e, which becomes active in band @key, against its siblings. A
 * newcomer, or an entity entering a band other than the two it was in
 * last, starts at the band's floor (gpucg_band_floor(); alone in its band,
 * at the parent's clock). One back in its band after a real idle period
 * starts no lower than the floor (it banks no credit) and keeps any debt;
 * so does one back in the band it left last if no job of it started in
 * that band since its last real idle period, or a job of it started in the
 * other band, or it has nothing in flight and left longer than its wait
 * (the window at least) ago. One back while the engine waits for it, or within
 * the window, keeps its vtime, and so does one whose work in a band was
 * all in flight for a moment (a deep client's whose jobs fill the ring),
 * so that its band flipped to another and back with no job started there:
 * it has not idled, and a floor would take the credit its weight earns.
 */
static void gpucg_entity_place(struct gpucg_entity *e, int key, u64 now)
{
	u64 bound = max(gpucg_window(e), gpucg_expect_ns(e));
	bool idled = !e->inflight && now - e->idle_ns > bound;
	u64 floor = e->parent->vclock;
	bool found = gpucg_band_floor(e, key, &floor);
	bool flipped = e->placed && e->key != key;
	int back;

	if (flipped) {
		/* keep the vtime of the band it leaves, take the other's */
		back = e->left_key;
		e->left_key = e->key;
		swap(e->vtime, e->left_vtime);
		if (back != key || gpucg_off(GPUCG_OFF_BANDS)) {
			e->left_ns = now;
			e->vtime = floor;
			return;
		}
		idled = e->start_key != key ||
			(!e->inflight && now - e->left_ns > bound);
		e->left_ns = now;
	}
	if (!e->placed) {
		e->vtime = floor;
		e->left_key = GPUCG_KEY_NONE;
		e->placed = true;
	} else if (idled && found && vtime_before(e->vtime, floor) &&
		   !gpucg_off(GPUCG_OFF_FLOOR)) {
		e->vtime = floor;
	}
	/* back from idling: a flip later is no longer one of in-flight work */
	if (idled && !flipped)
		e->start_key = GPUCG_KEY_NONE;
}

/*
 * Samples the think time of @e, which becomes active again: the gap since
 * its last job retired (none if one is still in flight), at most four times
 * its job or the window, into an average and an average deviation from it, as TCP samples
 * round trips.
 */
static void gpucg_entity_think(struct gpucg_entity *e, u64 now)
{
	u64 gap = e->inflight ? 0 : min(now - e->idle_ns,
					4 * max(e->est_ns, gpucg_window(e)));
	u64 dev = gap > e->think_ns ? gap - e->think_ns : e->think_ns - gap;

	e->think_dev_ns = (3 * e->think_dev_ns + dev) / 4;
	e->think_ns = (3 * e->think_ns + gap) / 4;
}

/*
 * Re-sorts @e and its ancestors after their queues, children or priority
 * changed: activates, re-keys or deactivates each in its parent's tree.
 */
static void gpucg_entity_update(struct gpucg_entity *e, u64 now)
{
	int key;

	for (; e->parent; e = e->parent) {
		key = gpucg_entity_key(e);
		if (e->active && key == e->key)
			break;	/* nothing above changes */
		if (e->active)
			rb_erase_cached(&e->node, &e->parent->children);
		if (key == GPUCG_KEY_NONE) {
			if (e->active && !e->inflight)
				e->idle_ns = now;
			e->active = false;
			continue;
		}
		/* a throttle is not a think time */
		if (!e->active && e->placed && !e->cap_released)
			gpucg_entity_think(e, now);
		e->cap_released = false;
		gpucg_entity_place(e, key, now);
		e->key = key;
		e->active = true;
		rb_add_cached(&e->node, &e->parent->children, gpucg_entity_less);
	}
}

/*
 * Caps (gpu.max). A cgroup with a cap may use at most MAX of every PERIOD
 * of each engine whose driver holds work back when the core says so
 * (gpucg_engine_enforce_max()): its entity there counts the GPU time its
 * subtree's jobs take in the current period (the estimate when a job
 * starts, corrected when it is charged), and once that reaches MAX leaves
 * its parent's tree, as an idle one does, until the period in which the
 * time over is paid: a job that overran its budget (an engine that cannot
 * preempt) is carried as debt, so the long-run share is the cap. Caps nest:
 * an entity runs only while no entity on its path is throttled. Within
 * what the caps leave, weights and priority order as ever; not work
 * conserving, by design. A job lent a higher priority does not run through
 * its cgroup's throttle: its waiter waits until the throttles on the job's
 * path are paid (a loan cannot make a cap a lie). Debt is carried for
 * GPUCG_CAP_DEBT periods at most (a job hung to its timeout throttles its
 * cgroup for ten periods, not for as long as it hung). The engine releases
 * entities whose period came at its picks, at most GPUCG_CAP_BATCH a pick,
 * and a pick that finds nothing to run asks again when the next one is
 * due, a period ahead at most, so that a cap raised or lifted while the
 * engine idles acts within one period. An entity throttled is not
 * expected back, and its throttle is not a think time.
 */

/* Throttled entities a pick releases at most, with interrupts off */
#define GPUCG_CAP_BATCH		16
/* Periods of debt a cgroup carries at most */
#define GPUCG_CAP_DEBT		10

/* @e's cap on its engine, in ns; false if it has none (or no effect) */
static bool gpucg_cap_of(struct gpucg_entity *e, u64 *max, u64 *period)
{
	struct gpucg_pool *pool = e->pool;
	u32 max_us, period_us;

	if (!pool || !READ_ONCE(e->engine->caps))	/* the top, root's, kernel's */
		return false;
	/* pairs with the release in gpu_max_write(): the values, then the flag */
	if (smp_load_acquire(&pool->cap_set)) {
		max_us = READ_ONCE(pool->cap.max_us);
		period_us = READ_ONCE(pool->cap.period_us);
	} else {
		max_us = READ_ONCE(pool->cg->cap.max_us);
		period_us = READ_ONCE(pool->cg->cap.period_us);
	}
	if (!max_us)
		return false;
	*max = (u64)max_us * NSEC_PER_USEC;
	*period = (u64)(period_us ?: GPUCG_PERIOD_DFL_US) * NSEC_PER_USEC;
	return true;
}

/* Moves @e on to the period @now is in, paying MAX of debt per period. */
static void gpucg_cap_refresh(struct gpucg_entity *e, u64 max, u64 period,
			      u64 now)
{
	u64 n;

	if (!e->cap_start) {
		e->cap_start = now;
		e->cap_counted = false;
		return;
	}
	if (now - e->cap_start < period)
		return;
	n = div64_u64(now - e->cap_start, period);
	e->cap_start += n * period;
	e->cap_used = e->cap_used > n * max ? e->cap_used - n * max : 0;
	e->cap_counted = false;
}

static bool gpucg_cap_less(struct rb_node *a, const struct rb_node *b)
{
	return (s64)(rb_entry(a, struct gpucg_entity, cap_node)->cap_until -
		     rb_entry(b, struct gpucg_entity, cap_node)->cap_until) < 0;
}

/* Releases @e, throttled. */
static void gpucg_cap_release(struct gpucg_entity *e, u64 now)
{
	e->throttled = false;
	e->cap_released = true;
	rb_erase_cached(&e->cap_node, &e->engine->throttled);
	atomic64_add(now - e->throttled_at, &e->pool->throttled_ns);
}

/*
 * Throttles or releases @e by its use of this period, and re-sorts it if
 * that changed; a throttled one is due back in the period in which its
 * time over MAX is paid.
 */
static void gpucg_cap_check(struct gpucg_entity *e, u64 max, u64 period,
			    u64 now)
{
	bool over = e->cap_used >= max;

	if (over && e->throttled)
		rb_erase_cached(&e->cap_node, &e->engine->throttled);
	else if (over)
		atomic64_inc(&e->pool->nr_throttled);
	else if (e->throttled)
		gpucg_cap_release(e, now);
	else
		return;
	if (over) {
		if (!e->throttled) {
			e->throttled_at = now;
			gpucg_unexpect(e);	/* it cannot run when back */
		}
		e->throttled = true;
		e->cap_period = period;
		e->cap_until = e->cap_start + div64_u64(e->cap_used, max) * period;
		rb_add_cached(&e->cap_node, &e->engine->throttled, gpucg_cap_less);
	}
	gpucg_entity_update(e, now);
}

/*
 * Counts @ns of GPU time (taken back with @sub: an estimate corrected)
 * against every cap on @ent's path, throttling or releasing each entity
 * by its use: O(depth) entities, each re-sorted up its path (O(depth *
 * log n)) when its throttle changes. Engine lock held.
 */
static void gpucg_cap_account(struct gpucg_entity *ent, u64 ns, bool sub,
			      u64 now)
{
	struct gpucg_entity *e;
	u64 max, period;

	for (e = ent; e->parent; e = e->parent) {
		if (!gpucg_cap_of(e, &max, &period))
			continue;
		gpucg_cap_refresh(e, max, period, now);
		if (!e->cap_counted) {	/* a period it used the engine in */
			atomic64_inc(&e->pool->nr_periods);
			e->cap_counted = true;
		}
		/* debt of GPUCG_CAP_DEBT periods at most: a job hung to its timeout */
		e->cap_used = sub ? e->cap_used - min(ns, e->cap_used) :
			      min(e->cap_used + ns, (GPUCG_CAP_DEBT + 1) * max);
		gpucg_cap_check(e, max, period, now);
	}
}

/*
 * Looks again at @e after a write of gpu.max: a cap gone, raised or
 * lowered acts now. Engine lock held.
 */
static void gpucg_cap_recheck(struct gpucg_entity *e, u64 now)
{
	u64 max, period;

	if (gpucg_cap_of(e, &max, &period)) {
		gpucg_cap_refresh(e, max, period, now);
		gpucg_cap_check(e, max, period, now);
	} else if (e->throttled) {
		gpucg_cap_release(e, now);
		gpucg_entity_update(e, now);
	}
}

/*
 * Releases the throttled entities whose period came, at most
 * GPUCG_CAP_BATCH. Return: when to look again, in ns from @now (0: none
 * is throttled), a period at most.
 */
static u64 gpucg_cap_expire(struct gpucg_engine *engine, u64 now)
{
	struct gpucg_entity *e;
	struct rb_node *node;
	int batch = GPUCG_CAP_BATCH;

	while ((node = rb_first_cached(&engine->throttled))) {
		e = rb_entry(node, struct gpucg_entity, cap_node);
		/* a period at most: a cap raised meanwhile acts by then */
		if ((s64)(e->cap_until - now) > 0)
			return min(e->cap_until - now, e->cap_period);
		if (!batch--)
			return GPUCG_RETRY_MIN_NS;	/* the rest at the next pick */
		gpucg_cap_recheck(e, now);
	}
	return 0;
}

/* Whether @e or an entity above it is throttled */
static bool gpucg_cap_held(struct gpucg_entity *e)
{
	for (; e->parent; e = e->parent)
		if (e->throttled)
			return true;
	return false;
}

/*
 * Sets @e's boost to what its first ready queue is lent (its queues are in
 * order of that) and re-sorts it and its ancestors. Engine lock held.
 * Return: whether a loan came that the engine was holding work for
 * (gpucg_loan_wait()).
 */
static bool gpucg_entity_reboost(struct gpucg_entity *e, u64 now)
{
	struct gpucg_queue *first = gpucg_first_queue(e);
	int old = e->boost, boost = first ? first->lift : GPUCG_KEY_NONE;
	bool held = false;

	e->boost = boost;
	/* a loan came (not one of several that ended) */
	if (e->await_ns && boost > old && boost > e->prio)
		held = gpucg_entity_lent(e, now);
	gpucg_entity_update(e, now);
	return held;
}

/*
 * Sorts @q, taken out of @ent's ready queues, in again; if what its loan
 * lifts it to changed meanwhile (its cgroup's priority did) and the first
 * queue's lift is not the entity's boost any more, re-sorts the entity.
 * Engine lock held.
 */
static void gpucg_queue_requeue(struct gpucg_queue *q, struct gpucg_entity *ent,
				u64 now)
{
	gpucg_queue_insert(q, ent);
	if (gpucg_first_queue(ent)->lift != ent->boost)
		gpucg_entity_reboost(ent, now);
}

/* Adds @ns of GPU time (@sub: takes it back) to the vtimes of @e's path. */
static void gpucg_entity_account(struct gpucg_entity *e, u64 ns, bool sub)
{
	u64 d;

	for (; e->parent; e = e->parent) {
		d = mul_u64_u32_div(ns, CGROUP_WEIGHT_DFL, gpucg_entity_weight(e));
		if (e->active)
			rb_erase_cached(&e->node, &e->parent->children);
		e->vtime = sub ? e->vtime - d : e->vtime + d;
		if (e->active)
			rb_add_cached(&e->node, &e->parent->children,
				      gpucg_entity_less);
	}
}

/* The entity of @cg on @engine, if it exists. Any context. */
static struct gpucg_entity *gpucg_entity_find(struct gpucg *cg,
					      struct gpucg_engine *engine)
{
	struct gpucg_pool *pool;

	if (cg == &gpucg_root)
		return &engine->root;
	pool = xa_load(&cg->pools, engine->dev->id);
	return pool ? xa_load(&pool->ents, engine->id) : NULL;
}

/*
 * Priority inheritance: the links of waiting queues to the queues that
 * hold the work they wait for (see the top of this file).
 */

/* Links a priority passed on travels at most */
#define GPUCG_BOOST_HOPS	4
/* Links one change updates at most */
#define GPUCG_BOOST_BUDGET	64
/* Links an engine's expiry looks at with interrupts off, at most */
#define GPUCG_EXPIRE_BATCH	16

static DEFINE_SPINLOCK(gpucg_boost_lock);

/*
 * The KUnit suite counts the links looked at in each section under
 * gpucg_boost_lock and keeps the largest count, the links looked at in
 * all, and the times the lock was taken (gpu_sched_test.c).
 */
#if IS_ENABLED(CONFIG_CGROUP_GPU_KUNIT_TEST)
static unsigned int gpucg_boost_steps, gpucg_boost_steps_max;
static unsigned long gpucg_boost_steps_all, gpucg_boost_locks;
#define gpucg_boost_step()	(gpucg_boost_steps++, gpucg_boost_steps_all++)
#else
#define gpucg_boost_step()	do { } while (0)
#endif

static void gpucg_boost_lock_irqsave(unsigned long *flags)
	__acquires(&gpucg_boost_lock)
{
	spin_lock_irqsave(&gpucg_boost_lock, *flags);
#if IS_ENABLED(CONFIG_CGROUP_GPU_KUNIT_TEST)
	gpucg_boost_steps = 0;
	gpucg_boost_locks++;
#endif
}

static void gpucg_boost_unlock_irqrestore(unsigned long flags)
	__releases(&gpucg_boost_lock)
{
#if IS_ENABLED(CONFIG_CGROUP_GPU_KUNIT_TEST)
	gpucg_boost_steps_max = max(gpucg_boost_steps_max, gpucg_boost_steps);
#endif
	spin_unlock_irqrestore(&gpucg_boost_lock, flags);
}

static bool gpucg_boost_update(struct gpucg_queue *q, int *budget);
static bool gpucg_queue_activate(struct gpucg_queue *q, u64 now);
static void gpucg_queue_bind(struct gpucg_queue *q);

/* Orders the links into a queue: the highest priority, then fewest hops. */
static bool gpucg_boost_less(struct rb_node *a, const struct rb_node *b)
{
	const struct gpucg_boost *ba = rb_entry(a, struct gpucg_boost, to_node);
	const struct gpucg_boost *bb = rb_entry(b, struct gpucg_boost, to_node);

	if (ba->prio != bb->prio)
		return ba->prio > bb->prio;
	return ba->hops < bb->hops;
}

/* The tree of @b's holder that holds @b: by whether the waiter is local. */
static struct rb_root_cached *gpucg_boost_tree(struct gpucg_boost *b)
{
	return b->local ? &b->to->boosts_local : &b->to->boosts_in;
}

static struct gpucg_boost *gpucg_boost_first(struct rb_root_cached *root)
{
	struct rb_node *n = rb_first_cached(root);

	return n ? rb_entry(n, struct gpucg_boost, to_node) : NULL;
}

/*
 * Orders the links into a queue by the place of the work they wait for in
 * it, earliest first: 32-bit places that wrap, compared as dma_fence
 * compares the seqnos of a 32-bit context (the links into a queue wait on
 * work it still holds, far fewer than 2^31 jobs apart).
 */
static bool gpucg_boost_seq_less(struct rb_node *a, const struct rb_node *b)
{
	u32 sa = rb_entry(a, struct gpucg_boost, seq_node)->seq;
	u32 sb = rb_entry(b, struct gpucg_boost, seq_node)->seq;

	return (s32)(sa - sb) < 0;
}

/* The link into @q that waits for its earliest work, or NULL. */
static struct gpucg_boost *gpucg_boost_earliest(struct gpucg_queue *q)
{
	struct rb_node *n = rb_first_cached(&q->boosts_seq);

	lockdep_assert_held(&gpucg_boost_lock);
	return n ? rb_entry(n, struct gpucg_boost, seq_node) : NULL;
}

/*
 * Work may have left @q (a job of it started, it was synced, or a link
 * came): the next pick of its engine looks at the links into it
 * (gpucg_boost_expire()), if it has any, first in line if @first.
 * Engine lock held. O(1).
 */
static void __gpucg_boost_mark(struct gpucg_queue *q, bool first)
{
	struct gpucg_engine *engine = q->engine;

	lockdep_assert_held(&engine->lock);
	if (RB_EMPTY_ROOT(&q->boosts_seq.rb_root) ||
	    !list_empty(&q->dirty_node))
		return;
	if (first)
		list_add(&q->dirty_node, &engine->boost_dirty);
	else
		list_add_tail(&q->dirty_node, &engine->boost_dirty);
	WRITE_ONCE(engine->nr_dirty, engine->nr_dirty + 1);
}

static void gpucg_boost_mark(struct gpucg_queue *q)
{
	__gpucg_boost_mark(q, false);
}

/* Takes @q off its engine's list of queues to look at. Engine lock held. */
static void gpucg_boost_unmark(struct gpucg_queue *q)
{
	struct gpucg_engine *engine = q->engine;

	lockdep_assert_held(&engine->lock);
	if (list_empty(&q->dirty_node))
		return;
	list_del_init(&q->dirty_node);
	WRITE_ONCE(engine->nr_dirty, engine->nr_dirty - 1);
}

/*
 * Sets the priority @b lends: its waiter's cgroup's own, or what is lent to
 * the waiting queue if that is higher and came over fewer than
 * GPUCG_BOOST_HOPS links; @b is re-sorted among the links into its holder.
 * Boost lock held. Return: whether it changed.
 */
static bool gpucg_boost_carry(struct gpucg_boost *b)
{
	struct gpucg_queue *waiter = b->waiter;
	int prio = READ_ONCE(b->from->prio), hops = 1;

	if (waiter->boost > prio && waiter->boost_hops < GPUCG_BOOST_HOPS) {
		prio = waiter->boost;
		hops = waiter->boost_hops + 1;
	}
	if (prio == b->prio && hops == b->hops)
		return false;
	rb_erase_cached(&b->to_node, gpucg_boost_tree(b));
	b->prio = prio;
	b->hops = hops;
	rb_add_cached(&b->to_node, gpucg_boost_tree(b), gpucg_boost_less);
	return true;
}

/* Passes a change of what @q is lent on to the links of its waits. */
static void gpucg_boost_pass(struct gpucg_queue *q, int *budget)
{
	struct gpucg_boost *b;

	list_for_each_entry(b, &q->boosts_out, qout_node) {
		if (--*budget < 0)
			return;
		gpucg_boost_step();
		if (gpucg_boost_carry(b))
			gpucg_boost_update(b->to, budget);
	}
}

/*
 * Weighs what @q is lent against its cgroup's band, after a change of
 * either: an active queue is re-sorted among its cgroup's, and the
 * cgroup's entity takes the lift of its first; a queue that runs only on
 * loan (gpucg_queue_init_lent()) is active only while it is lent above its
 * cgroup's band and its driver says it is ready. Engine lock held; writes
 * nothing of the loan itself. Return: whether a loan came that the engine
 * was holding work for.
 */
static bool gpucg_queue_relift(struct gpucg_queue *q, u64 now)
{
	struct gpucg_entity *ent;
	bool lifts;

	/* the band a loan is weighed against is the owner's cgroup's now */
	if (q->lent_only && !q->active)
		gpucg_queue_bind(q);
	ent = q->ent;
	lifts = q->boost > READ_ONCE(ent->prio);
	if (q->lent_only && q->active && !lifts) {
		gpucg_queue_deactivate(q, now);
		return false;
	}
	if (!q->active)
		return q->lent_only && q->ready && lifts &&
		       gpucg_queue_activate(q, now);
	rb_erase_cached(&q->node, &ent->queues);
	gpucg_queue_insert(q, ent);
	return gpucg_entity_reboost(ent, now);
}

/*
 * Sets what @q is lent, @boost (through @hops links), and weighs it
 * (gpucg_queue_relift()). Boost lock and engine lock held: both guard
 * @q's boost. Return: as gpucg_entity_reboost().
 */
static bool gpucg_queue_reboost(struct gpucg_queue *q, int boost, int hops,
				u64 now)
{
	struct gpucg_entity *ent = q->ent;

	if (boost != GPUCG_KEY_NONE && list_empty(&q->lent_node)) {
		list_add_tail(&q->lent_node, &ent->lent);
		ent->nr_lent++;
	} else if (boost == GPUCG_KEY_NONE && !list_empty(&q->lent_node)) {
		list_del_init(&q->lent_node);
		ent->nr_lent--;
	}
	WRITE_ONCE(q->boost, boost);
	q->boost_hops = hops;
	return gpucg_queue_relift(q, now);
}

/*
 * Sets @q's boost to the highest priority its links lend it (and what
 * waiters on its own engine lend it, for gpucg_hold()): the first of each
 * of its trees, in O(1). Re-sorts it, and passes a change on, within
 * @budget links. Boost lock held; takes @q's engine lock, with interrupts
 * off already. Return: whether @q's engine was holding work for this loan
 * (gpucg_loan_wait()).
 */
static bool gpucg_boost_update(struct gpucg_queue *q, int *budget)
{
	struct gpucg_boost *best = gpucg_boost_first(&q->boosts_in);
	struct gpucg_boost *near = gpucg_boost_first(&q->boosts_local);
	int boost, local, hops;
	bool changed, held = false;

	lockdep_assert_held(&gpucg_boost_lock);
	if (near && (!best || gpucg_boost_less(&near->to_node, &best->to_node)))
		best = near;
	boost = best ? best->prio : GPUCG_KEY_NONE;
	hops = best ? best->hops : 0;
	local = near ? near->prio : GPUCG_KEY_NONE;
	changed = boost != q->boost || hops != q->boost_hops;
	if (!changed && local == q->boost_local)
		return false;
	spin_lock(&q->engine->lock);
	q->boost_local = local;
	if (changed)
		held = gpucg_queue_reboost(q, boost, hops, gpucg_now());
	spin_unlock(&q->engine->lock);
	if (changed)
		gpucg_boost_pass(q, budget);
	return held;
}

/*
 * Takes @b off both its ends and unpins its waiter's entity. Boost lock
 * held: the waiter reads @b only under it (gpucg_boost_unlink()). O(log n)
 * in the links into its holder, and what the holder's new boost passes on.
 */
static void gpucg_boost_detach(struct gpucg_boost *b)
{
	struct gpucg_entity *from = b->from;
	struct gpucg_engine *engine = b->engine;
	struct gpucg_queue *to = b->to;
	int budget = GPUCG_BOOST_BUDGET;

	spin_lock(&engine->lock);
	list_del(&b->in_node);
	WRITE_ONCE(engine->nr_boosts, engine->nr_boosts - 1);
	rb_erase_cached(&b->seq_node, &to->boosts_seq);
	if (RB_EMPTY_ROOT(&to->boosts_seq.rb_root))
		gpucg_boost_unmark(to);
	spin_unlock(&engine->lock);
	rb_erase_cached(&b->to_node, gpucg_boost_tree(b));
	list_del(&b->out_node);
	list_del(&b->qout_node);
	from->nr_boosts_out--;
	b->to = NULL;
	b->from = NULL;
	b->waiter = NULL;
	gpucg_boost_update(to, &budget);
	gpucg_entity_unpin(from);
}

/*
 * Drops the links into @engine whose work has left its queue, before a
 * pick: those into the queues marked since the last look (a job of the
 * queue started, or it was synced: a job leaves its queue when it starts,
 * or cancelled, with its entity, whose driver syncs the queue). A queue's
 * work leaves it in the order of the places its links give
 * (gpucg_boost_link()), so the look pops the queue's links from the
 * earliest while their work has left and stops at the first whose work
 * has not: each link is looked at once when it goes, and each mark costs
 * one look more, so a job start costs O(1) however many links wait on the
 * queue's later work, and an engine none of whose queues was marked takes
 * no lock but its own. A loan never outlasts the job it was for by more
 * than the engine's first pick after the job left: a job leaves when it
 * starts, and the pick after the start looks (the driver's done callback
 * says so by then, as drm_sched's does: the run-job work signals the job's
 * scheduled fence before it picks again), or cancelled, and the driver
 * syncs the queue once the jobs it cancelled have left (drm_sched: once
 * the last job killed with an entity is done). At most GPUCG_EXPIRE_BATCH
 * links are looked at with interrupts off; a look takes as many marked
 * queues as there were when it began.
 */
static void gpucg_boost_expire(struct gpucg_engine *engine)
{
	unsigned int left = READ_ONCE(engine->nr_dirty), n;
	struct gpucg_boost *b;
	struct gpucg_queue *q;
	unsigned long flags;

	while (left) {
		gpucg_boost_lock_irqsave(&flags);
		spin_lock(&engine->lock);
		q = list_first_entry_or_null(&engine->boost_dirty,
					     struct gpucg_queue, dirty_node);
		if (q)
			gpucg_boost_unmark(q);
		spin_unlock(&engine->lock);
		for (n = 0; q && n < GPUCG_EXPIRE_BATCH; n++) {
			b = gpucg_boost_earliest(q);
			if (!b)
				break;
			gpucg_boost_step();
			if (!b->done(b))
				break;
			gpucg_boost_detach(b);
		}
		if (!q) {
			left = 0;
		} else if (n == GPUCG_EXPIRE_BATCH && gpucg_boost_earliest(q)) {
			/* more to look at: first in line again, after a pause */
			spin_lock(&engine->lock);
			__gpucg_boost_mark(q, true);
			spin_unlock(&engine->lock);
		} else {
			left--;
		}
		gpucg_boost_unlock_irqrestore(flags);
	}
}

/*
 * Drops the links on @head, the list of links into an engine (@in) or out
 * of an entity, GPUCG_EXPIRE_BATCH at a time.
 */
static void gpucg_boost_drop_list(struct list_head *head, bool in)
{
	struct gpucg_boost *b;
	unsigned long flags;
	unsigned int n;
	bool more;

	do {
		gpucg_boost_lock_irqsave(&flags);
		for (n = 0; n < GPUCG_EXPIRE_BATCH && !list_empty(head); n++) {
			b = in ? list_first_entry(head, struct gpucg_boost, in_node) :
				 list_first_entry(head, struct gpucg_boost, out_node);
			gpucg_boost_step();
			gpucg_boost_detach(b);
		}
		more = !list_empty(head);
		gpucg_boost_unlock_irqrestore(flags);
	} while (more);
}

/*
 * Drops every link into @engine and out of its entities, GPUCG_EXPIRE_BATCH
 * at a time, and refuses new ones either way: its entities are freed
 * next. gpucg_mutex held.
 */
static void gpucg_boost_drop_engine(struct gpucg_engine *engine)
{
	struct gpucg_entity *ent;
	unsigned long flags;

	gpucg_boost_lock_irqsave(&flags);
	engine->dying = true;
	gpucg_boost_unlock_irqrestore(flags);
	gpucg_boost_drop_list(&engine->boosts, true);
	list_for_each_entry(ent, &engine->ents, engine_node)
		gpucg_boost_drop_list(&ent->boosts_out, false);
	gpucg_boost_drop_list(&engine->root.boosts_out, false);
	gpucg_boost_drop_list(&engine->kernel.boosts_out, false);
}

/*
 * Drops every link into @q and out of it, GPUCG_EXPIRE_BATCH at a time,
 * and returns holding the boost lock (*@flags) in the section that found
 * none left, so that the caller changes @q before a link sees it again.
 */
static void __gpucg_boost_drop_queue(struct gpucg_queue *q,
				     unsigned long *flags)
	__acquires(&gpucg_boost_lock)
{
	struct gpucg_boost *b;
	unsigned int n;

	for (;;) {
		gpucg_boost_lock_irqsave(flags);
		for (n = 0; n < GPUCG_EXPIRE_BATCH; n++) {
			b = gpucg_boost_first(&q->boosts_in) ?:
			    gpucg_boost_first(&q->boosts_local) ?:
			    list_first_entry_or_null(&q->boosts_out,
						     struct gpucg_boost,
						     qout_node);
			if (!b)
				return;
			gpucg_boost_step();
			gpucg_boost_detach(b);
		}
		gpucg_boost_unlock_irqrestore(*flags);
	}
}

/* Drops every link into @q and out of it: the queue goes. */
static void gpucg_boost_drop_queue(struct gpucg_queue *q)
{
	unsigned long flags;

	__gpucg_boost_drop_queue(q, &flags);
	gpucg_boost_unlock_irqrestore(flags);
}

/*
 * Passes a change of @e's own priority on to every link of its waits,
 * GPUCG_EXPIRE_BATCH at a time with interrupts on in between; each has
 * GPUCG_BOOST_BUDGET links for what it passes on further.
 */
static void gpucg_boost_refresh(struct gpucg_entity *e)
{
	struct gpucg_boost *b;
	unsigned int left, n;
	unsigned long flags;
	int budget;

	gpucg_boost_lock_irqsave(&flags);
	/* each link there now, once, each with a budget for what it passes on */
	for (left = e->nr_boosts_out; left && !list_empty(&e->boosts_out);) {
		for (n = 0; n < GPUCG_EXPIRE_BATCH && left &&
		     !list_empty(&e->boosts_out); n++, left--) {
			b = list_first_entry(&e->boosts_out, struct gpucg_boost,
					     out_node);
			list_move_tail(&b->out_node, &e->boosts_out);
			budget = GPUCG_BOOST_BUDGET;
			gpucg_boost_step();
			if (gpucg_boost_carry(b))
				gpucg_boost_update(b->to, &budget);
		}
		/* interrupts on between batches */
		gpucg_boost_unlock_irqrestore(flags);
		gpucg_boost_lock_irqsave(&flags);
	}
	gpucg_boost_unlock_irqrestore(flags);
}

/**
 * gpucg_boost_link() - lend a waiting queue's priority to the work it waits for
 * @b: the wait, zeroed or unlinked; linked to nothing if it was linked
 * @waiter: the queue whose next work waits
 * @holder: the queue that holds the job it waits for; the caller keeps it
 *	    from gpucg_queue_fini() during the call (which drops the links
 *	    into it), and its engine is alive, as is the one a
 *	    gpucg_queue_move() under way takes it to (its job is queued on
 *	    one of them)
 * @seq: the job's place in @holder, whose jobs leave it in the order of
 *	 their places (a 32-bit count that may wrap, with the jobs queued at
 *	 once less than 2^31 apart; drm_sched: the seqno of the job's
 *	 scheduled fence), the same for every wait on one job; a link whose
 *	 job left before an earlier one is dropped after that one's, so a
 *	 driver whose jobs could leave out of order would keep loans past
 *	 their jobs
 * @done: says, under the core's locks and without sleeping, whether the
 *	  job has left its queue (gone to the hardware, or been cancelled):
 *	  nothing is linked if it has, and the first pick of @holder's
 *	  engine after a job of @holder started or @holder was synced drops
 *	  the link (the job's and every earlier one's, in the order of @seq);
 *	  a driver that cancels jobs syncs @holder once they have left
 *
 * Until gpucg_boost_unlink() or @done, @holder runs, while it is ready, at
 * least at @waiter's effective priority, or at what is lent to @waiter in
 * turn (see the top of this file): its cgroup's other queues stay in
 * their band. Nothing is linked to a queue of the waiter's own cgroup on
 * its own engine, nor to an engine that does not schedule or is being
 * destroyed, nor from a kernel queue (of no client) or to one.
 *
 * Context: process context, not under an engine's lock, where the drivers
 * of every engine reachable along the links allow their engines' locks to
 * be taken (drm_sched's: process context); does not sleep.
 * Return: true if @holder's engine was holding work for this loan (the
 * cgroup's job was ready, its last job ran on loan, and the engine
 * anticipated this one: see the top of this file); the caller then has
 * that engine pick again.
 */
bool gpucg_boost_link(struct gpucg_boost *b, struct gpucg_queue *waiter,
		      struct gpucg_queue *holder, u32 seq,
		      bool (*done)(struct gpucg_boost *b))
{
	int budget = GPUCG_BOOST_BUDGET;
	struct gpucg_engine *engine;
	struct gpucg_entity *from;
	unsigned long flags;
	bool held;

	gpucg_boost_unlink(b);
again:
	engine = READ_ONCE(holder->engine);
	if (!waiter->engine || !engine || !engine->schedules || !holder->client ||
	    gpucg_off(GPUCG_OFF_LEND))
		return false;
	/* kernel work lends nothing (kernel queues never move) */
	if (waiter->ent == &waiter->engine->kernel)
		return false;

	/* the waiter's entity, pinned: its queue may move when it activates */
	spin_lock_irqsave(&waiter->engine->lock, flags);
	from = waiter->ent;
	gpucg_entity_pin(from);
	spin_unlock_irqrestore(&waiter->engine->lock, flags);

	gpucg_boost_lock_irqsave(&flags);
	/* the holder moved meanwhile: gpucg_queue_move() under this lock */
	if (unlikely(READ_ONCE(holder->engine) != engine)) {
		gpucg_boost_unlock_irqrestore(flags);
		gpucg_entity_unpin(from);
		goto again;
	}
	/*
	 * An engine's entities outlive it only until its destruction drops
	 * links; a job that left its queue already lends nothing.
	 */
	if (engine->dying || waiter->engine->dying ||
	    READ_ONCE(holder->ent) == from || done(b)) {
		gpucg_boost_unlock_irqrestore(flags);
		gpucg_entity_unpin(from);
		return false;
	}
	WRITE_ONCE(waiter->linked, true);
	WRITE_ONCE(holder->linked, true);
	b->from = from;
	b->waiter = waiter;
	b->to = holder;
	b->engine = engine;
	b->local = waiter->engine == engine;
	b->done = done;
	b->seq = seq;
	b->prio = GPUCG_KEY_NONE;
	b->hops = 0;
	list_add_tail(&b->out_node, &from->boosts_out);
	from->nr_boosts_out++;
	list_add_tail(&b->qout_node, &waiter->boosts_out);
	rb_add_cached(&b->to_node, gpucg_boost_tree(b), gpucg_boost_less);
	gpucg_boost_carry(b);
	spin_lock(&engine->lock);
	list_add_tail(&b->in_node, &engine->boosts);
	WRITE_ONCE(engine->nr_boosts, engine->nr_boosts + 1);
	rb_add_cached(&b->seq_node, &holder->boosts_seq, gpucg_boost_seq_less);
	/* the job may have left since done() said no: the next pick looks */
	gpucg_boost_mark(holder);
	spin_unlock(&engine->lock);
	held = gpucg_boost_update(holder, &budget);
	gpucg_boost_unlock_irqrestore(flags);
	return held;
}
EXPORT_SYMBOL_GPL(gpucg_boost_link);

/**
 * gpucg_boost_unlink() - the waiting queue no longer waits
 * @b: the wait; nothing happens if it is not linked (or was unlinked by
 *     the core)
 *
 * After this returns the core neither calls @b's done callback nor
 * touches @b.
 *
 * Context: as gpucg_boost_link().
 */
void gpucg_boost_unlink(struct gpucg_boost *b)
{
	unsigned long flags;

	gpucg_boost_lock_irqsave(&flags);
	if (b->to)
		gpucg_boost_detach(b);
	gpucg_boost_unlock_irqrestore(flags);
}
EXPORT_SYMBOL_GPL(gpucg_boost_unlink);

/* Clears @q: inactive, lent nothing, linked to nothing. */
static void gpucg_queue_clear(struct gpucg_queue *q)
{
	memset(q, 0, sizeof(*q));
	RB_CLEAR_NODE(&q->node);
	q->boosts_in = RB_ROOT_CACHED;
	q->boosts_local = RB_ROOT_CACHED;
	q->boosts_seq = RB_ROOT_CACHED;
	INIT_LIST_HEAD(&q->boosts_out);
	INIT_LIST_HEAD(&q->lent_node);
	INIT_LIST_HEAD(&q->dirty_node);
	q->boost = GPUCG_KEY_NONE;
	q->boost_local = GPUCG_KEY_NONE;
	q->lift = GPUCG_KEY_NONE;
}

/*
 * Gives @ent of @cg its run queue, on a grouped engine: a queue of the
 * entity that stands for the cgroup, with no client and no reference of its
 * own (the entity lives as long as the cgroup).
 */
static int gpucg_group_alloc(struct gpucg_entity *ent, struct gpucg *cg)
{
	struct gpucg_engine *engine = ent->engine;
	struct gpucg_queue *q;

	if (!engine->group_ops)
		return 0;
	q = engine->group_ops->alloc(engine->group_priv);
	if (!q)
		return -ENOMEM;
	gpucg_queue_clear(q);
	q->engine = engine;
	q->ent = ent;
	q->cg = cg;
	ent->group = q;
	return 0;
}

static void gpucg_group_free(struct gpucg_entity *ent)
{
	struct gpucg_engine *engine = ent->engine;

	if (!ent->group)
		return;
	WARN_ON_ONCE(ent->group->active);
	engine->group_ops->free(ent->group, engine->group_priv);
	ent->group = NULL;
}

/* The entity of @cg on @engine, created with its ancestors' if missing. */
static struct gpucg_entity *gpucg_entity_get(struct gpucg *cg,
					     struct gpucg_engine *engine)
{
	struct gpucg_entity *ent, *parent;
	struct gpucg_pool *pool, *p;
	int ret;

	lockdep_assert_held(&gpucg_mutex);
	if (cg == &gpucg_root)
		return &engine->root;
	pool = gpucg_pool_get(cg, engine->dev);
	if (IS_ERR(pool))
		return ERR_CAST(pool);

	while (!(ent = xa_load(&pool->ents, engine->id))) {
		/* top-down: the highest pool without an entity */
		for (p = pool; p->parent && !xa_load(&p->parent->ents, engine->id);
		     p = p->parent)
			;
		parent = p->parent ? xa_load(&p->parent->ents, engine->id) :
			 &engine->top;
		/* charged to whoever makes it: the client that first needs it */
		ent = kzalloc_obj(*ent, GFP_KERNEL_ACCOUNT);
		if (!ent)
			return ERR_PTR(-ENOMEM);
		gpucg_entity_init(ent, engine, parent, p);
		ent->prio = gpucg_priority_effective(p->cg);
		ret = gpucg_group_alloc(ent, p->cg);
		if (!ret)
			ret = xa_insert(&p->ents, engine->id, ent,
					GFP_KERNEL_ACCOUNT);
		if (ret) {
			gpucg_group_free(ent);
			kfree(ent);
			return ERR_PTR(ret);
		}
		list_add(&ent->engine_node, &engine->ents);
	}
	return ent;
}

/**
 * __gpucg_engine_create() - add an engine, one hardware scheduler, to a device
 * @dev: the device, from gpucg_register_device(); NULL is allowed
 * @schedules: whether the engine's scheduler orders its queues by the
 *	       controller's policy; false for one that only charges GPU
 *	       time (gpu.stat says sched=0 for a device with no engine that
 *	       schedules, and refuses a per-device gpu.weight for it)
 * @ops: for a grouped engine, the driver's run queues per cgroup (see
 *	 &struct gpucg_group_ops); NULL for an engine of queues
 * @priv: passed to @ops
 * @key: the lock class of the engine's lock, one per caller: drivers call
 *	 in from different contexts and nest their own locks inside
 *
 * Called through gpucg_engine_create() and gpucg_engine_create_grouped().
 *
 * Context: process context, may sleep.
 * Return: the engine, NULL if @dev is NULL, or an ERR_PTR().
 */
struct gpucg_engine *__gpucg_engine_create(struct gpucg_device *dev,
					   bool schedules,
					   const struct gpucg_group_ops *ops,
					   void *priv,
					   struct lock_class_key *key)
{
	struct gpucg_engine *engine;
	int id;

	if (!dev)
		return NULL;
	/* charged to whoever makes it: a user's queue, for per-queue engines */
	engine = kzalloc_obj(*engine, GFP_KERNEL_ACCOUNT);
	if (!engine)
		return ERR_PTR(-ENOMEM);
	engine->dev = dev;
	engine->schedules = schedules;
	engine->group_ops = ops;
	engine->group_priv = priv;
	spin_lock_init(&engine->lock);
	lockdep_set_class(&engine->lock, key);
	INIT_LIST_HEAD(&engine->ents);
	INIT_LIST_HEAD(&engine->expected);
	INIT_LIST_HEAD(&engine->boosts);
	INIT_LIST_HEAD(&engine->boost_dirty);
	engine->throttled = RB_ROOT_CACHED;
	gpucg_entity_init(&engine->top, engine, NULL, NULL);
	gpucg_entity_init(&engine->root, engine, &engine->top, NULL);
	gpucg_entity_init(&engine->kernel, engine, &engine->top, NULL);
	if (gpucg_group_alloc(&engine->root, &gpucg_root)) {
		kfree(engine);
		return ERR_PTR(-ENOMEM);
	}

	mutex_lock(&gpucg_mutex);
	/* an id no live engine of @dev has: the pools' entities are under it */
	id = WARN_ON_ONCE(dev->released) ? -ENODEV :
	     ida_alloc(&dev->engine_ids, GFP_KERNEL);
	if (id >= 0) {
		engine->id = id;
		list_add_tail(&engine->dev_node, &dev->engines);
	}
	mutex_unlock(&gpucg_mutex);
	if (id < 0) {
		gpucg_group_free(&engine->root);
		kfree(engine);
		return ERR_PTR(id);
	}
	return engine;
}
EXPORT_SYMBOL_GPL(__gpucg_engine_create);

/**
 * gpucg_engine_destroy() - remove an engine and its state in every cgroup
 * @engine: from gpucg_engine_create(); NULL and ERR_PTR()s are ignored
 *
 * Every queue on it must have gone through gpucg_queue_fini(); tickets may
 * not outlive it either, but on a grouped engine, whose run queues go with
 * it active or not: there gpucg_charge() with a NULL engine drops them.
 *
 * Context: process context, may sleep.
 */
void gpucg_engine_destroy(struct gpucg_engine *engine)
{
	struct gpucg_entity *ent, *tmp;
	struct gpucg_queue *q;
	unsigned long flags;
	unsigned int n;

	if (IS_ERR_OR_NULL(engine))
		return;
	mutex_lock(&gpucg_mutex);
	gpucg_boost_drop_engine(engine);
	/* throttled entities' queues are out of the tree: back in, in batches */
	do {
		spin_lock_irqsave(&engine->lock, flags);
		for (n = 0; n < GPUCG_CAP_BATCH &&
		     !RB_EMPTY_ROOT(&engine->throttled.rb_root); n++) {
			ent = rb_entry(rb_first_cached(&engine->throttled),
				       struct gpucg_entity, cap_node);
			gpucg_cap_release(ent, gpucg_now());
			gpucg_entity_update(ent, gpucg_now());
		}
		spin_unlock_irqrestore(&engine->lock, flags);
	} while (n == GPUCG_CAP_BATCH);
	if (engine->group_ops) {
		spin_lock_irqsave(&engine->lock, flags);
		while ((q = gpucg_next(engine)))
			gpucg_queue_deactivate(q, gpucg_now());
		spin_unlock_irqrestore(&engine->lock, flags);
	}
	WARN_ON_ONCE(!RB_EMPTY_ROOT(&engine->top.children.rb_root));
	list_for_each_entry_safe(ent, tmp, &engine->ents, engine_node) {
		/* a grouped engine's scheduler may go with jobs in flight */
		WARN_ON_ONCE(ent->active || !RB_EMPTY_ROOT(&ent->queues.rb_root) ||
			     (ent->inflight && !engine->group_ops));
		xa_erase(&ent->pool->ents, engine->id);
		list_del(&ent->engine_node);
		gpucg_group_free(ent);
		kfree(ent);
	}
	list_del(&engine->dev_node);
	ida_free(&engine->dev->engine_ids, engine->id);
	/* the device was released while it had engines: this was the last */
	if (engine->dev->released && list_empty(&engine->dev->engines))
		gpucg_device_release(engine->dev);
	mutex_unlock(&gpucg_mutex);
	gpucg_group_free(&engine->root);
	/* its links are gone, and with them every mark */
	WARN_ON_ONCE(!list_empty(&engine->boost_dirty));
	kfree(engine);
}
EXPORT_SYMBOL_GPL(gpucg_engine_destroy);

/* Frees @pool's entities. Called with gpucg_mutex held by gpu.c. */
void gpucg_sched_pool_free(struct gpucg_pool *pool)
{
	struct gpucg_entity *ent;
	unsigned long id, flags;

	lockdep_assert_held(&gpucg_mutex);
	/* nothing may still point at them: no queue, child or job in flight */
	xa_for_each(&pool->ents, id, ent) {
		spin_lock_irqsave(&ent->engine->lock, flags);
		gpucg_unexpect(ent);
		if (ent->throttled)
			gpucg_cap_release(ent, gpucg_now());
		spin_unlock_irqrestore(&ent->engine->lock, flags);
		WARN_ON_ONCE(ent->active || ent->inflight ||
			     !list_empty(&ent->boosts_out) ||
			     !list_empty(&ent->lent) ||
			     !RB_EMPTY_ROOT(&ent->queues.rb_root) ||
			     !RB_EMPTY_ROOT(&ent->children.rb_root));
		list_del(&ent->engine_node);
		gpucg_group_free(ent);
		kfree(ent);
	}
	xa_destroy(&pool->ents);
}

/**
 * gpucg_engine_enforce_max() - gpu.max acts on an engine
 * @engine: the engine; NULL is ignored
 *
 * For a driver that picks with gpucg_queue_pick() and starts nothing the
 * pick does not return, asking again when it says (drm_sched's glue), or
 * that keeps its own queue and starts no work of a queue while
 * gpucg_queue_throttled() says so, asking again when it says (i915's
 * execlists): a throttled cgroup's work is then held until its next
 * period. Without it, a write of gpu.max for the engine's device fails
 * with EOPNOTSUPP (unless another engine of the device enforces it), and
 * the engine ignores caps.
 *
 * Context: process context, before the engine's first pick.
 */
void gpucg_engine_enforce_max(struct gpucg_engine *engine)
{
	if (IS_ERR_OR_NULL(engine))
		return;
	mutex_lock(&gpucg_mutex);
	WRITE_ONCE(engine->caps, true);
	mutex_unlock(&gpucg_mutex);
}
EXPORT_SYMBOL_GPL(gpucg_engine_enforce_max);

/* Whether an engine of @dev enforces gpu.max. gpucg_mutex held. */
bool gpucg_device_caps(struct gpucg_device *dev)
{
	struct gpucg_engine *engine;

	lockdep_assert_held(&gpucg_mutex);
	list_for_each_entry(engine, &dev->engines, dev_node)
		if (engine->caps)
			return true;
	return false;
}

/**
 * gpucg_sched_recap() - a write of @cg's gpu.max acts now
 * @cg: the cgroup
 *
 * Each of @cg's entities is throttled or released by its new cap at
 * once; an engine left idle picks again by the time it was told before,
 * a period at most (gpucg_cap_expire()).
 *
 * Context: process context; takes gpucg_mutex.
 */
void gpucg_sched_recap(struct gpucg *cg)
{
	struct gpucg_entity *ent;
	struct gpucg_pool *pool;
	unsigned long id, eid, flags;

	mutex_lock(&gpucg_mutex);
	xa_for_each(&cg->pools, id, pool) {
		xa_for_each(&pool->ents, eid, ent) {
			spin_lock_irqsave(&ent->engine->lock, flags);
			gpucg_cap_recheck(ent, gpucg_now());
			spin_unlock_irqrestore(&ent->engine->lock, flags);
		}
	}
	mutex_unlock(&gpucg_mutex);
}

bool gpucg_device_schedules(struct gpucg_device *dev)
{
	struct gpucg_engine *engine;

	lockdep_assert_held(&gpucg_mutex);
	list_for_each_entry(engine, &dev->engines, dev_node)
		if (engine->schedules)
			return true;
	return false;
}

/*
 * Weighs the loans of @e's queues against its priority again, after a
 * change of it: whether each lifts its queue, and so the queue's place and
 * whether one that runs only on loan is active. GPUCG_EXPIRE_BATCH queues
 * at a time, with interrupts on in between.
 */
static void gpucg_entity_relift(struct gpucg_entity *e)
{
	struct gpucg_queue *q;
	unsigned int left, n;
	unsigned long flags;

	spin_lock_irqsave(&e->engine->lock, flags);
	for (left = e->nr_lent; left && !list_empty(&e->lent);) {
		for (n = 0; n < GPUCG_EXPIRE_BATCH && left &&
		     !list_empty(&e->lent); n++, left--) {
			q = list_first_entry(&e->lent, struct gpucg_queue,
					     lent_node);
			list_move_tail(&q->lent_node, &e->lent);
			gpucg_queue_relift(q, gpucg_now());
		}
		spin_unlock_irqrestore(&e->engine->lock, flags);
		spin_lock_irqsave(&e->engine->lock, flags);
	}
	spin_unlock_irqrestore(&e->engine->lock, flags);
}

/*
 * Applies a change of gpu.priority in @cg to the entities of its subtree.
 * Context: process context, takes gpucg_mutex.
 */
void gpucg_sched_rekey(struct gpucg *cg)
{
	struct cgroup_subsys_state *pos;
	struct gpucg_entity *ent;
	struct gpucg_pool *pool;
	unsigned long id, eid, flags;
	int prio;

	mutex_lock(&gpucg_mutex);
	rcu_read_lock();
	css_for_each_descendant_pre(pos, &cg->css) {
		/* pinned, so that the walk may leave RCU while it works */
		if (!css_tryget(pos))
			continue;
		rcu_read_unlock();
		prio = gpucg_priority_effective(css_gpucg(pos));
		xa_for_each(&css_gpucg(pos)->pools, id, pool) {
			xa_for_each(&pool->ents, eid, ent) {
				spin_lock_irqsave(&ent->engine->lock, flags);
				WRITE_ONCE(ent->prio, prio);
				gpucg_entity_update(ent, gpucg_now());
				spin_unlock_irqrestore(&ent->engine->lock, flags);
				gpucg_entity_relift(ent);
				gpucg_boost_refresh(ent);
			}
		}
		/* no global stall: others may make entities meanwhile */
		mutex_unlock(&gpucg_mutex);
		cond_resched();
		mutex_lock(&gpucg_mutex);
		rcu_read_lock();
		css_put(pos);
	}
	rcu_read_unlock();
	mutex_unlock(&gpucg_mutex);
}

/*
 * Records that @client's queues use @engine, so that a move of its owner
 * makes the new cgroup's entity there (gpucg_client_prepare()). The record
 * stays with the client: an id that a later engine takes over costs that
 * engine an entity per move, at most one per engine id the client used.
 * Without memory for it, a queue there stays in its cgroup after a move
 * (gpucg_queue_bind()). Process context.
 */
static void gpucg_client_use(struct gpucg_client *client,
			     struct gpucg_engine *engine)
{
	if (!xa_load(&client->engines, engine->id))
		xa_store_irq(&client->engines, engine->id, xa_mk_value(0),
			     GFP_KERNEL_ACCOUNT);
}

/*
 * Creates the entities of @cg on the engines @client's queues used, so that
 * they can move to them in any context; O(engines of the device) without
 * allocation for the others. If that fails, they stay where they are
 * (gpucg_queue_bind()). Client's lock held.
 */
static void gpucg_client_prepare(struct gpucg_client *client, struct gpucg *cg)
{
	struct gpucg_engine *engine;

	mutex_lock(&gpucg_mutex);
	list_for_each_entry(engine, &client->dev->engines, dev_node)
		if (xa_load(&client->engines, engine->id))
			gpucg_entity_get(cg, engine);
	mutex_unlock(&gpucg_mutex);
}

static struct lock_class_key gpucg_client_engines_key;

/* A client of @dev owned by @cg, whose reference it takes over. */
static struct gpucg_client *gpucg_client_new(struct gpucg_device *dev,
					     struct gpucg *cg)
{
	struct gpucg_client *client;

	client = kzalloc_obj(*client, GFP_KERNEL_ACCOUNT);
	if (!client) {
		css_put(&cg->css);
		return ERR_PTR(-ENOMEM);
	}
	client->dev = dev;
	mutex_init(&client->lock);
	refcount_set(&client->ref, 1);
	/*
	 * The last put, which destroys it, may come in any context; a class
	 * of its own, apart from the other xarrays this file initializes
	 * (those of KUnit's cgroups, locked with interrupts on).
	 */
	xa_init_flags(&client->engines, XA_FLAGS_LOCK_IRQ);
	lockdep_set_class(&client->engines.xa_lock, &gpucg_client_engines_key);
	RCU_INIT_POINTER(client->cg, cg);
	return client;
}

/**
 * gpucg_client_create() - a GPU client (a DRM file), owned by current
 * @dev: the device the client uses; NULL gives a NULL client
 *
 * Context: process context, may sleep.
 * Return: the client, NULL, or an ERR_PTR().
 */
struct gpucg_client *gpucg_client_create(struct gpucg_device *dev)
{
	if (!dev)
		return NULL;
	return gpucg_client_new(dev, css_gpucg(task_get_css(current, gpu_cgrp_id)));
}
EXPORT_SYMBOL_GPL(gpucg_client_create);

/**
 * gpucg_client_create_in() - a GPU client owned by a cgroup
 * @dev: the device the client uses; NULL gives a NULL client
 * @cgrp: the owner: its gpu state, or its nearest ancestor's where the
 *	  controller is not enabled
 *
 * For kernel code that submits on behalf of a cgroup rather than of a task
 * (a kernel thread cannot join a cgroup), and for selftests. The client
 * stays with @cgrp unless gpucg_client_set_owner() is called on it.
 *
 * Context: process context, may sleep.
 * Return: the client, NULL, or an ERR_PTR().
 */
struct gpucg_client *gpucg_client_create_in(struct gpucg_device *dev,
					    struct cgroup *cgrp)
{
	if (!dev)
		return NULL;
	return gpucg_client_new(dev, css_gpucg(cgroup_get_e_css(cgrp, &gpu_cgrp_subsys)));
}
EXPORT_SYMBOL_GPL(gpucg_client_create_in);

/**
 * gpucg_client_priority() - the effective gpu.priority of a client's owner
 * @client: the client; NULL stands for kernel work
 *
 * For drivers that fold the cgroup's priority into their own request
 * priority. Kernel work and the root cgroup's have priority 0. The answer
 * is a snapshot: the owner may move, or a priority change, right after.
 *
 * Context: any context.
 * Return: the priority, in [-1023, 1023].
 */
int gpucg_client_priority(struct gpucg_client *client)
{
	struct gpucg *cg;
	int prio = 0;

	if (!client)
		return 0;
	rcu_read_lock();
	cg = rcu_dereference(client->cg);
	if (cg != &gpucg_root)
		prio = gpucg_priority_effective(cg);
	rcu_read_unlock();
	return prio;
}
EXPORT_SYMBOL_GPL(gpucg_client_priority);

/**
 * gpucg_client_same_cgroup() - whether two clients belong to one cgroup
 * @a: a client; NULL stands for kernel work, which belongs to no cgroup
 * @b: another
 *
 * For drivers that choose which of a job's dependencies to lend to: a wait
 * on work of the waiter's own cgroup links nothing on the waiter's engine
 * (gpucg_boost_link()) and lends only what the waiter has on another. The
 * answer is a snapshot: either owner may move right after.
 *
 * Context: any context.
 * Return: true if both are clients owned by the same cgroup now.
 */
bool gpucg_client_same_cgroup(struct gpucg_client *a, struct gpucg_client *b)
{
	return a && b && rcu_access_pointer(a->cg) == rcu_access_pointer(b->cg);
}
EXPORT_SYMBOL_GPL(gpucg_client_same_cgroup);

/**
 * gpucg_client_tryget() - take a reference on a client
 * @client: a client whose memory is valid (under the lock of the table
 *	    that holds it); NULL is allowed
 *
 * Context: any context.
 * Return: @client, or NULL if it is NULL or being freed.
 */
struct gpucg_client *gpucg_client_tryget(struct gpucg_client *client)
{
	return client && refcount_inc_not_zero(&client->ref) ? client : NULL;
}
EXPORT_SYMBOL_GPL(gpucg_client_tryget);

/**
 * gpucg_client_put() - drop a reference on a client
 * @client: from gpucg_client_create() or gpucg_client_tryget(); NULL and
 *	    ERR_PTR()s are ignored
 *
 * The creator's reference is dropped when the DRM file is freed; every
 * queue holds one of its own.
 *
 * Context: any context.
 */
void gpucg_client_put(struct gpucg_client *client)
{
	if (IS_ERR_OR_NULL(client) || !refcount_dec_and_test(&client->ref))
		return;
	css_put(&rcu_dereference_protected(client->cg, true)->css);
	xa_destroy(&client->engines);
	kfree(client);
}
EXPORT_SYMBOL_GPL(gpucg_client_put);

/**
 * gpucg_client_set_owner() - charge the client's future work to current's
 *			      cgroup
 * @client: the client; NULL is ignored
 *
 * Called by the DRM core on every ioctl; costs a comparison unless the
 * owner's cgroup changed, by a change of owner or a move of the owner.
 * Queues follow when they next become active; tickets stay with the cgroup
 * that started them.
 *
 * Context: process context, may sleep.
 */
void gpucg_client_set_owner(struct gpucg_client *client)
{
	struct cgroup_subsys_state *css;
	struct gpucg *old;
	bool same;

	if (!client || (current->flags & PF_KTHREAD))
		return;
	rcu_read_lock();
	same = task_css(current, gpu_cgrp_id) == &rcu_dereference(client->cg)->css;
	rcu_read_unlock();
	if (same)
		return;

	mutex_lock(&client->lock);
	old = rcu_dereference_protected(client->cg, lockdep_is_held(&client->lock));
	css = task_get_css(current, gpu_cgrp_id);
	if (css == &old->css) {
		css_put(css);
		mutex_unlock(&client->lock);
		return;
	}
	gpucg_client_prepare(client, css_gpucg(css));
	rcu_assign_pointer(client->cg, css_gpucg(css));
	mutex_unlock(&client->lock);
	css_put(&old->css);
}
EXPORT_SYMBOL_GPL(gpucg_client_set_owner);

/**
 * gpucg_queue_init() - set up a queue of a client on an engine
 * @q: the queue, embedded in the driver's
 * @engine: where it runs; NULL makes every other call on @q a no-op
 * @client: whose it is; NULL charges the root cgroup (kernel queues)
 * @ctx_prio: its priority among the queues of its cgroup
 *
 * Context: process context, may sleep.
 * Return: 0 or -ENOMEM.
 */
int gpucg_queue_init(struct gpucg_queue *q, struct gpucg_engine *engine,
		     struct gpucg_client *client, int ctx_prio)
{
	struct gpucg_entity *ent = NULL;
	struct gpucg *cg = &gpucg_root;

	gpucg_queue_clear(q);
	if (!engine)
		return 0;
	if (client) {
		mutex_lock(&client->lock);
		cg = rcu_dereference_protected(client->cg,
					       lockdep_is_held(&client->lock));
		mutex_lock(&gpucg_mutex);
		ent = gpucg_entity_get(cg, engine);
		mutex_unlock(&gpucg_mutex);
		if (!IS_ERR(ent)) {
			css_get(&cg->css);
			gpucg_client_use(client, engine);
		}
		mutex_unlock(&client->lock);
		if (IS_ERR(ent))
			return PTR_ERR(ent);
	} else {
		ent = &engine->kernel;
	}
	q->cg = cg;
	q->engine = engine;
	q->client = client;
	if (client)
		refcount_inc(&client->ref);
	q->ent = ent;
	q->ctx_prio = ctx_prio;
	return 0;
}
EXPORT_SYMBOL_GPL(gpucg_queue_init);

/**
 * gpucg_queue_init_lent() - set up a queue that runs only on loan
 * @q: the queue, embedded in the driver's
 * @engine: where it runs, a grouped engine; NULL makes every other call on
 *	    @q a no-op
 * @client: whose it is
 *
 * For a grouped engine, whose driver keeps a client's queue in its
 * cgroup's run queue (gpucg_client_group()) and lets its own policy order
 * it there: the same queue, seen by the core apart, so that a wait on its
 * job can lift it alone (gpucg_boost_link()). It is active only while it
 * is lent above its cgroup's band and its driver says it is ready
 * (gpucg_queue_sync()); a pick
 * that offers it lends its cgroup's band to nothing else. Its jobs start
 * and are charged through its cgroup's run queue.
 *
 * Context: process context, may sleep.
 * Return: 0 or -ENOMEM.
 */
int gpucg_queue_init_lent(struct gpucg_queue *q, struct gpucg_engine *engine,
			  struct gpucg_client *client)
{
	int ret = gpucg_queue_init(q, engine, client, 0);

	q->lent_only = true;
	return ret;
}
EXPORT_SYMBOL_GPL(gpucg_queue_init_lent);

/**
 * gpucg_queue_lent() - whether a wait lends a queue a priority
 * @q: the queue, set up
 *
 * A hint, without the core's locks: for a driver that tells the core
 * whether a queue that runs only on loan (gpucg_queue_init_lent()) is
 * ready only while it is lent, from a context where it cannot (a fence
 * callback), and defers it. Whether the loan lifts the queue does not
 * matter: a change of its cgroup's priority may make it lift, and the core
 * then needs to know whether the queue is ready.
 *
 * Context: any context.
 */
bool gpucg_queue_lent(const struct gpucg_queue *q)
{
	return READ_ONCE(q->boost) != GPUCG_KEY_NONE;
}
EXPORT_SYMBOL_GPL(gpucg_queue_lent);

/*
 * The entity of the cgroup that owns @q's client now, if that is not the
 * one @q is in and it exists (its allocation may have failed). Under RCU.
 */
static struct gpucg_entity *gpucg_queue_moved(struct gpucg_queue *q,
					      struct gpucg **cg)
{
	struct gpucg_entity *ent;

	if (!q->client)
		return NULL;
	*cg = rcu_dereference(q->client->cg);
	if (*cg == q->cg)
		return NULL;
	ent = gpucg_entity_find(*cg, q->engine);
	return ent != q->ent ? ent : NULL;
}

/*
 * Moves an inactive @q to the entity of its client's cgroup, with its place
 * among the entity's queues that are lent something. If the entity is
 * missing (its allocation failed), the queue stays where it was. Engine
 * lock held.
 */
static void gpucg_queue_bind(struct gpucg_queue *q)
{
	struct gpucg_entity *ent;
	struct gpucg *cg;

	rcu_read_lock();
	ent = gpucg_queue_moved(q, &cg);
	/* the client may drop its reference on @cg right now */
	if (ent && css_tryget(&cg->css)) {
		css_put(&q->cg->css);
		if (!list_empty(&q->lent_node)) {
			list_move_tail(&q->lent_node, &ent->lent);
			q->ent->nr_lent--;
			ent->nr_lent++;
		}
		q->cg = cg;
		q->ent = ent;
	}
	rcu_read_unlock();
}

/* Whether active @q's owner moved to a cgroup it can follow. */
static bool gpucg_queue_follows(struct gpucg_queue *q)
{
	struct gpucg *cg;
	bool moved;

	rcu_read_lock();
	moved = gpucg_queue_moved(q, &cg);
	rcu_read_unlock();
	return moved;
}

/*
 * Activates @q. Return: whether a loan came with it that the engine was
 * holding work for (a queue that runs on loan, ready).
 */
static bool gpucg_queue_activate(struct gpucg_queue *q, u64 now)
{
	struct gpucg_entity *ent;
	struct gpucg_queue *first;
	bool held;

	gpucg_queue_bind(q);
	ent = q->ent;
	/* one that runs on loan only while the loan lifts it */
	if (q->lent_only && q->boost <= READ_ONCE(ent->prio))
		return false;
	first = gpucg_first_queue(ent);
	/* a queue idle for a while gets no credit among its cgroup's */
	if (vtime_before(q->vtime, first ? first->vtime : ent->qvclock))
		q->vtime = first ? first->vtime : ent->qvclock;
	/* own queues back among children: no credit against them either */
	if (!first && gpucg_first_child(ent) &&
	    vtime_before(ent->self_vtime, gpucg_first_child(ent)->vtime))
		ent->self_vtime = gpucg_first_child(ent)->vtime;
	q->ready_ns = now;
	q->active = true;
	gpucg_queue_insert(q, ent);
	held = gpucg_entity_reboost(ent, now);
	if (first)	/* its own queues were ready already */
		return held;
	gpucg_unexpect(ent);
	/*
	 * Ready in its own band after a job that started on loan: await the
	 * next loan, once (a job that starts is lent afresh or not at all),
	 * from now; or again, within that wait, if its job was ready and then
	 * was not (a fence the pick found unsignalled).
	 */
	if (ent->run_key > gpucg_own_key(ent)) {
		ent->await_key = ent->run_key;
		ent->await_ns = now;
		ent->run_key = GPUCG_KEY_NONE;
	}
	if (gpucg_awaits_loan(ent) && gpucg_loan_wait(ent) &&
	    !gpucg_listed_over(ent, now))
		gpucg_expect(ent, now);
	return held;
}

static void gpucg_queue_deactivate(struct gpucg_queue *q, u64 now)
{
	struct gpucg_entity *ent = q->ent;

	rb_erase_cached(&q->node, &ent->queues);
	RB_CLEAR_NODE(&q->node);
	q->active = false;
	/* its work may have left with its entity: gpucg_boost_expire() */
	gpucg_boost_mark(q);
	gpucg_entity_reboost(ent, now);
	/*
	 * None of its own queues ready, and no job started: it keeps the
	 * loan it awaits, off the list until it is ready again.
	 */
	if (RB_EMPTY_ROOT(&ent->queues.rb_root) &&
	    ent->await_key != GPUCG_KEY_NONE)
		gpucg_unexpect(ent);
	/* its last ready work went to the hardware: expect it back */
	if (!ent->active && !ent->throttled && ent->inflight)
		gpucg_expect(ent, now);
}

/**
 * gpucg_queue_sync() - tell the core whether a queue is ready
 * @q: the queue
 * @ready: says, under the engine's lock, whether @q has work that could run
 *
 * Call it after anything that can make the queue ready (new work, a fence
 * it waited on signalled) or not ready (its last work was taken). Because
 * @ready runs under the same lock as gpucg_queue_pick(), a wake-up cannot
 * be lost between the two. A queue that runs only on loan
 * (gpucg_queue_init_lent()) is active while it is ready and lent above its
 * cgroup's band.
 *
 * Context: any context; @ready must not sleep.
 */
void gpucg_queue_sync(struct gpucg_queue *q,
		      bool (*ready)(struct gpucg_queue *q))
{
	struct gpucg_engine *engine;
	unsigned long flags;
	bool r;

again:
	/* pairs with gpucg_queue_move(): the queue as it left it */
	engine = smp_load_acquire(&q->engine);
	if (!engine)
		return;
	spin_lock_irqsave(&engine->lock, flags);
	/* it moved meanwhile: gpucg_queue_move() under this lock */
	if (unlikely(READ_ONCE(q->engine) != engine)) {
		spin_unlock_irqrestore(&engine->lock, flags);
		goto again;
	}
	/* work may have left the queue: gpucg_boost_expire() looks again */
	gpucg_boost_mark(q);
	r = ready(q);
	if (q->lent_only) {
		q->ready = r;
		/* weighed against the band of its owner's cgroup now */
		if (!q->active)
			gpucg_queue_bind(q);
		r = r && q->boost > READ_ONCE(q->ent->prio);
	}
	/* an owner that moved takes a ready queue along */
	if (r && q->active && gpucg_queue_follows(q))
		gpucg_queue_deactivate(q, gpucg_now());
	if (r && !q->active)
		gpucg_queue_activate(q, gpucg_now());
	else if (!r && q->active)
		gpucg_queue_deactivate(q, gpucg_now());
	spin_unlock_irqrestore(&engine->lock, flags);
}
EXPORT_SYMBOL_GPL(gpucg_queue_sync);

/**
 * gpucg_queue_fini() - take a queue off its engine for good
 * @q: the queue; its tickets stay valid
 *
 * Also cancels it: after this returns, no pick returns @q. If the queue is
 * not active, this does not touch its engine, which may be gone. The links
 * of waits into it and out of it (gpucg_boost_link()) go first; the driver
 * makes no new one meanwhile.
 *
 * Context: any context for a queue never linked; process context (or any
 * context in which the boost lock may be taken) for one that was.
 */
void gpucg_queue_fini(struct gpucg_queue *q)
{
	unsigned long flags;

	if (!q->engine)
		return;
	/* no link holds it any more: the queue is inactive once they go */
	if (READ_ONCE(q->linked))
		gpucg_boost_drop_queue(q);
	/* an inactive queue stays so: its driver no longer calls in */
	if (READ_ONCE(q->active)) {
		spin_lock_irqsave(&q->engine->lock, flags);
		if (q->active)
			gpucg_queue_deactivate(q, gpucg_now());
		spin_unlock_irqrestore(&q->engine->lock, flags);
	}
	css_put(&q->cg->css);
	gpucg_client_put(q->client);
	q->client = NULL;
	q->engine = NULL;
}
EXPORT_SYMBOL_GPL(gpucg_queue_fini);

/**
 * gpucg_queue_move() - move an inactive queue to another engine
 * @q: the queue, set up with gpucg_queue_init() and not active
 * @engine: an engine of the same device
 *
 * For schedulers that balance an idle queue between identical engines. An
 * idle queue holds no job waited for and waits for nothing: the links left
 * into it and out of it are dropped.
 *
 * Context: as gpucg_queue_fini().
 */
void gpucg_queue_move(struct gpucg_queue *q, struct gpucg_engine *engine)
{
	struct gpucg_engine *old = q->engine;
	struct gpucg_entity *ent;
	unsigned long flags;

	if (!old || old == engine || WARN_ON_ONCE(q->active))
		return;
	/*
	 * The links go, and the queue moves in the section that found none
	 * left: a wait on its job published before the driver moves it
	 * (drm_sched arms a job on the new scheduler and moves the queue at
	 * the push) links on the old engine before this, or on the new one
	 * after (gpucg_boost_link() checks the holder's engine under the
	 * lock), never into a queue whose engine changes under the link.
	 * The old engine's lock keeps out a sync meanwhile (a fence callback
	 * of a stopped entity's; gpucg_queue_sync() checks the engine again
	 * under it) and its rebinding of the queue to its owner's cgroup.
	 */
	__gpucg_boost_drop_queue(q, &flags);
	spin_lock(&old->lock);
	ent = q->client ? gpucg_entity_find(q->cg, engine) : &engine->kernel;
	if (!ent) {	/* its allocation failed: charge the root */
		css_put(&q->cg->css);
		q->cg = &gpucg_root;
		ent = &engine->root;
	}
	q->ent = ent;
	q->vtime = 0;
	/* pairs with gpucg_queue_sync(), which may lock the new engine now */
	smp_store_release(&q->engine, engine);
	spin_unlock(&old->lock);
	gpucg_boost_unlock_irqrestore(flags);
}
EXPORT_SYMBOL_GPL(gpucg_queue_move);

/**
 * gpucg_client_group() - the run queue of a client's cgroup on a grouped
 *			  engine
 * @engine: an engine from gpucg_engine_create_grouped()
 * @client: the client; NULL stands for the root cgroup
 *
 * The queue of the cgroup that owns @client now, pinned: the driver keeps
 * it while work of the client's sits in it and drops it with
 * gpucg_group_put(). The root cgroup's if the cgroup has none (its
 * allocation failed, or the cgroup is going away).
 *
 * Context: any context.
 * Return: the queue, embedded in the driver's run queue.
 */
struct gpucg_queue *gpucg_client_group(struct gpucg_engine *engine,
				       struct gpucg_client *client)
{
	struct gpucg_entity *ent = NULL;
	struct gpucg *cg;

	rcu_read_lock();
	cg = client ? rcu_dereference(client->cg) : &gpucg_root;
	if (cg != &gpucg_root && css_tryget(&cg->css)) {
		ent = gpucg_entity_find(cg, engine);
		if (!ent || !ent->group) {
			css_put(&cg->css);
			ent = NULL;
		}
	}
	rcu_read_unlock();
	return ent ? ent->group : engine->root.group;
}
EXPORT_SYMBOL_GPL(gpucg_client_group);

/**
 * gpucg_client_group_prepare() - make the entity of a client's cgroup on an
 *				  engine its queues may run on
 * @engine: the engine; for one from gpucg_engine_create_grouped() the
 *	    entity comes with the cgroup's run queue there. NULL is allowed
 * @client: the client; NULL is allowed
 *
 * A queue moves to the entity of its owner's cgroup, and between engines
 * (gpucg_queue_move()), in contexts that cannot sleep; the core makes the
 * entities it needs at gpucg_queue_init() and, for the engines a client
 * used, when its owner moves. A driver whose queue may run on other
 * engines, or gets a run queue per cgroup there, calls this before it
 * needs the entity, after a move of the owner too. Cheap when the entity
 * exists and the engine is known to be the client's.
 *
 * Context: process context, may sleep.
 */
void gpucg_client_group_prepare(struct gpucg_engine *engine,
				struct gpucg_client *client)
{
	struct gpucg *cg;
	bool found;

	if (!engine || !client)
		return;
	rcu_read_lock();
	cg = rcu_dereference(client->cg);
	found = xa_load(&client->engines, engine->id) &&
		(cg == &gpucg_root || gpucg_entity_find(cg, engine));
	rcu_read_unlock();
	if (found)
		return;
	mutex_lock(&client->lock);
	cg = rcu_dereference_protected(client->cg, lockdep_is_held(&client->lock));
	mutex_lock(&gpucg_mutex);
	gpucg_entity_get(cg, engine);	/* else the root cgroup's is used */
	mutex_unlock(&gpucg_mutex);
	gpucg_client_use(client, engine);
	mutex_unlock(&client->lock);
}
EXPORT_SYMBOL_GPL(gpucg_client_group_prepare);

/**
 * gpucg_group_tryget() - pin a run queue that may be going away
 * @q: a run queue of a grouped engine, under rcu_read_lock(): its memory
 *     stays until a grace period after its cgroup's last pin went
 *
 * Context: any context, under rcu_read_lock().
 * Return: whether it is pinned now.
 */
bool gpucg_group_tryget(struct gpucg_queue *q)
{
	return css_tryget(&q->cg->css);
}
EXPORT_SYMBOL_GPL(gpucg_group_tryget);

/**
 * gpucg_group_get() - pin a run queue again
 * @q: a queue from gpucg_client_group(), still pinned
 *
 * Context: any context.
 */
void gpucg_group_get(struct gpucg_queue *q)
{
	css_get(&q->cg->css);
}
EXPORT_SYMBOL_GPL(gpucg_group_get);

/**
 * gpucg_group_put() - unpin a run queue from gpucg_client_group()
 * @q: the queue
 *
 * Context: any context.
 */
void gpucg_group_put(struct gpucg_queue *q)
{
	css_put(&q->cg->css);
}
EXPORT_SYMBOL_GPL(gpucg_group_put);

/* The queue that runs next: the leftmost path of the tree. */
static struct gpucg_queue *gpucg_next(struct gpucg_engine *engine)
{
	struct gpucg_entity *e = &engine->top, *child;
	struct gpucg_queue *q;

	for (;;) {
		child = gpucg_first_child(e);
		q = gpucg_first_queue(e);
		if (!child)
			return q;
		/* own queues against the children, as one more child */
		if (q && (child->key < gpucg_own_key(e) ||
			  (child->key == gpucg_own_key(e) &&
			   vtime_before(e->self_vtime, child->vtime))))
			return q;
		if (vtime_before(e->vclock, child->vtime))
			e->vclock = child->vtime;
		e = child;
	}
}

static int gpucg_depth(struct gpucg_entity *e)
{
	return e->depth;
}

/*
 * Whether the expected entity @a, were it ready in band @prio, would run
 * before the work of @b: compared where their paths meet, as the pick
 * would; in a band it is only lent, a tie does not count (its vtime may
 * be another band's).
 */
static bool gpucg_expected_beats(struct gpucg_entity *a, struct gpucg_entity *b,
				 int prio)
{
	int da = gpucg_depth(a), db = gpucg_depth(b), ka;
	bool lent = prio > gpucg_own_key(a);

	for (; da > db; da--)
		a = a->parent;
	for (; db > da; db--)
		b = b->parent;
	if (a == b)	/* the same, or one holds the other: let it run */
		return false;
	while (a->parent != b->parent) {
		a = a->parent;
		b = b->parent;
	}
	ka = a->active ? max(a->key, prio) : prio;
	if (ka != b->key)
		return ka > b->key;
	/* in a band it is only lent its vtime may be another's: no tie */
	return !lent && vtime_before(a->vtime, b->vtime);
}

/*
 * Whether a job of @e started now, behind the jobs in flight, ends before
 * @a is back: its think time after its jobs end, less the think time's
 * average deviation.
 */
static bool gpucg_fits(struct gpucg_entity *e, struct gpucg_entity *a,
		       u64 now)
{
	struct gpucg_engine *engine = e->engine;
	u64 end = max(now, engine->busy_until) + gpucg_est(e);
	u64 back = gpucg_since(a, now) + a->think_ns;

	return (s64)(end + a->think_dev_ns - back) <= 0;
}

/*
 * Whether the jobs in flight end later than one more job from @now (of @e's
 * or the engine's average, or the window of the expected entity @a, the
 * longest): then a job of @e started now would queue behind more than the
 * next job, and so would @a's next one.
 */
static bool gpucg_ring_deep(struct gpucg_engine *engine,
			    struct gpucg_entity *e, struct gpucg_entity *a,
			    u64 now)
{
	u64 ahead = max3(gpucg_est(e), engine->est_ns, gpucg_window(a));

	return engine->tickets && (s64)(engine->busy_until - now - ahead) > 0;
}

/*
 * Whether the engine is held, for an entity expected back, from work of
 * @q, whose entity is @e below: until the expected entity's wait ends,
 * if it beats @e, unless a job of @e fits (gpucg_fits());
 * then, while the entity is late, for as long as the engine has jobs in
 * flight (not yet charged), so that @e's work does not fill a ring ahead
 * of it. An entity the engine does not wait for (gpucg_expect_ns() is 0)
 * holds @e's work only while the jobs in flight are more than one job
 * ahead (gpucg_ring_deep()). An entity later than four of its cycles is
 * no longer expected, and one whose priority is no higher than what @q
 * is lent (gpucg_boost_link()) holds nothing for it: it may be the waiter
 * @q serves. An entity ready in its own band that awaits a loan holds the
 * work its loan would beat until gpucg_loan_wait() after it became ready.
 * Return: 0 to let @e's work run, else the time after which to pick
 * again, in ns from @now.
 */
static u64 gpucg_hold(struct gpucg_engine *engine, struct gpucg_queue *q,
		      u64 now)
{
	/*
	 * What @q is lent above its cgroup's band, or by a waiter on this
	 * engine (which may be in its band, and expected): it serves a waiter
	 * of no more. Its cgroup's own jobs on another engine that wait on it
	 * lend it its band, and that alone must not stop it being held.
	 */
	struct gpucg_entity *e = q->ent;
	int lent = q->lift != GPUCG_KEY_NONE ? q->lift : q->boost_local;
	struct gpucg_entity *a, *tmp;
	u64 until, wait, hold = U64_MAX;
	bool deep, above;

	list_for_each_entry_safe(a, tmp, &engine->expected, expect_node) {
		/* over its cap, it cannot run when back: nothing waits for it */
		if (gpucg_cap_held(a))
			continue;
		if (gpucg_awaits_loan(a)) {	/* ready */
			if (gpucg_off(GPUCG_OFF_LOAN_WAIT))
				continue;
			if (gpucg_listed_over(a, now)) {
				/* a late loan is still sampled */
				gpucg_await_end(a);
				continue;
			}
			if (a->await_key > lent &&
			    gpucg_expected_beats(a, e, a->await_key))
				hold = min(hold, a->await_ns +
					   gpucg_loan_wait(a) - now);
			continue;
		}
		if (gpucg_expect_over(a, now)) {
			gpucg_unexpect(a);
			continue;
		}
		wait = gpucg_off(GPUCG_OFF_WAIT) ? 0 : gpucg_expect_ns(a);
		until = gpucg_since(a, now) + wait;
		/* the waiter may be the one expected: never held for it */
		if (gpucg_expect_key(a) <= lent ||
		    !gpucg_expected_beats(a, e, gpucg_expect_key(a)))
			continue;
		if (wait && (s64)(until - now) > 0) {
			if (gpucg_off(GPUCG_OFF_FITS) || !gpucg_fits(e, a, now))
				hold = min(hold, until - now);
			continue;
		}
		/*
		 * One not waited for, of a band above the work's, finds only
		 * the running job ahead of it, unless the work's job ends
		 * before it is back; one of the work's band one job more, so
		 * that the engine has the next job queued. A late one waited
		 * for finds only the running job.
		 */
		above = gpucg_expect_key(a) > max(gpucg_own_key(e), lent) &&
			!gpucg_off(GPUCG_OFF_ABOVE);
		if (!above && gpucg_off(GPUCG_OFF_RING))
			continue;
		if (above && !wait && !gpucg_off(GPUCG_OFF_FITS) &&
		    gpucg_fits(e, a, now))
			continue;
		if (wait)
			deep = engine->tickets;
		else if (above)	/* bounded in time, as the ring's depth */
			deep = engine->tickets &&
			       (s64)(engine->busy_until + gpucg_window(a) - now) > 0;
		else
			deep = gpucg_ring_deep(engine, e, a, now);
		/* a retirement picks again: the time is a safeguard */
		if (deep)
			hold = min(hold, gpucg_window(a));
	}
	/* no storm of picks while a job overruns with a tiny window */
	return hold == U64_MAX ? 0 : max(hold, GPUCG_RETRY_MIN_NS);
}

/**
 * gpucg_queue_pick() - the ready queue that runs next on an engine
 * @engine: the engine
 * @take: called under the engine's lock with the best queue: GPUCG_TAKE
 *	  it, GPUCG_SKIP it (not ready: it leaves the tree and the next best
 *	  is offered) or GPUCG_HOLD (ready, but cannot run yet: it keeps its
 *	  turn); must not sleep
 * @arg: passed to @take
 * @retry_ns: set to the time after which to pick again if the engine is
 *	      held for an entity it expects back, or if nothing may run
 *	      before a throttled cgroup's next period (gpu.max), else 0
 *
 * The queue stays active; call gpucg_queue_start() when its job goes to the
 * hardware and gpucg_queue_sync() when it may have become empty. Links of
 * priority inheritance into the queues of the engine marked since the last
 * pick (a job started, the queue was synced) whose work has left are
 * dropped first.
 *
 * Context: any context; not under an engine's lock. On an engine that
 * waits are linked to (gpucg_boost_link()), as that call.
 * Return: the queue, or NULL.
 */
struct gpucg_queue *
gpucg_queue_pick(struct gpucg_engine *engine,
		 enum gpucg_take (*take)(struct gpucg_queue *q, void *arg),
		 void *arg, u64 *retry_ns)
{
	struct gpucg_queue *q;
	unsigned long flags;
	u64 now, hold, capped;

	*retry_ns = 0;
	gpucg_boost_expire(engine);
	spin_lock_irqsave(&engine->lock, flags);
	now = gpucg_now();
	capped = gpucg_cap_expire(engine, now);
	while ((q = gpucg_next(engine))) {
		hold = gpucg_hold(engine, q, now);
		if (hold) {
			*retry_ns = hold;
			q = NULL;
			break;
		}
		switch (take(q, arg)) {
		case GPUCG_TAKE:
			goto out;
		case GPUCG_HOLD:
			q = NULL;
			goto out;
		case GPUCG_SKIP:
			q->ready = false;
			gpucg_queue_deactivate(q, now);
			break;
		}
	}
out:
	/* nothing to run: again when the next throttled entity is due */
	if (!q && capped && (!*retry_ns || capped < *retry_ns))
		*retry_ns = max(capped, GPUCG_RETRY_MIN_NS);
	spin_unlock_irqrestore(&engine->lock, flags);
	return q;
}
EXPORT_SYMBOL_GPL(gpucg_queue_pick);

/**
 * gpucg_kernel_start() - a job of the kernel's own goes to the hardware
 * @engine: the engine; NULL is allowed
 * @t: the job's ticket, for gpucg_charge(); it pins nothing
 *
 * For a job without a client (a driver's page-table update, a buffer move)
 * that the driver does not queue through the core (drm_sched on a grouped
 * engine runs those first, in run queues of its own): its GPU time shows
 * in the device's total (the root cgroup's gpu.stat), it moves no vtime
 * and the engine expects nothing back after it.
 *
 * Context: any context.
 */
void gpucg_kernel_start(struct gpucg_engine *engine, struct gpucg_ticket *t)
{
	unsigned long flags;
	u64 now;

	t->ent = NULL;
	if (!engine)
		return;
	spin_lock_irqsave(&engine->lock, flags);
	now = gpucg_now();
	/* the top has no parent: nothing to account to, or expect */
	t->ent = &engine->top;
	t->cg = &gpucg_root;
	t->est_ns = engine->est_ns ?: NSEC_PER_MSEC;
	engine->tickets++;
	engine->busy_until = max(now, engine->busy_until) + t->est_ns;
	spin_unlock_irqrestore(&engine->lock, flags);
}
EXPORT_SYMBOL_GPL(gpucg_kernel_start);

/**
 * gpucg_queue_start() - a job of @q goes to the hardware
 * @q: the queue, from gpucg_queue_pick()
 * @t: the job's ticket, for gpucg_charge()
 *
 * Charges an estimate of the job's GPU time now, so that the next pick
 * sees it, and the time the queue was ready before its job started.
 *
 * Context: any context.
 */
void gpucg_queue_start(struct gpucg_queue *q, struct gpucg_ticket *t)
{
	struct gpucg_entity *ent, *e;
	struct gpucg_pool *pool;
	unsigned long flags;
	u64 now, wait = 0;

	t->ent = NULL;
	if (!q->engine)
		return;
	spin_lock_irqsave(&q->engine->lock, flags);
	now = gpucg_now();
	/* an owner that moved takes even a queue that never idles along */
	if (q->active && gpucg_queue_follows(q)) {
		gpucg_queue_deactivate(q, now);
		gpucg_queue_activate(q, now);
	} else if (!q->active) {
		/* one that is never active: a scheduler that only charges */
		gpucg_queue_bind(q);
	}
	ent = q->ent;
	/* a job left its queue: gpucg_boost_expire() looks again */
	gpucg_boost_mark(q);
	/* it awaits no loan any more; the band it is expected back in */
	gpucg_await_end(ent);
	ent->await_ns = 0;
	ent->run_key = gpucg_own_key(ent);
	css_get(&q->cg->css);
	t->ent = ent;
	t->cg = q->cg;
	/* a newcomer's first jobs count as the engine's average, or 1 ms */
	t->est_ns = gpucg_est(ent);
	q->engine->tickets++;
	q->engine->busy_until = max(now, q->engine->busy_until) + t->est_ns;
	for (e = ent; e->parent; e = e->parent) {
		e->inflight++;
		e->due_ns = q->engine->busy_until;
		e->start_key = e->key;
	}
	if (!gpucg_off(GPUCG_OFF_ESTIMATE))
		gpucg_entity_account(ent, t->est_ns, false);
	if (q->active) {
		wait = now - q->ready_ns;
		q->ready_ns = now;
		rb_erase_cached(&q->node, &ent->queues);
	}
	q->vtime += t->est_ns;
	if (vtime_before(ent->qvclock, q->vtime))
		ent->qvclock = q->vtime;
	ent->self_vtime += t->est_ns;
	if (q->active)
		gpucg_queue_requeue(q, ent, now);
	gpucg_cap_account(ent, t->est_ns, false, now);
	spin_unlock_irqrestore(&q->engine->lock, flags);

	for (pool = ent->pool; pool && wait; pool = pool->parent)
		atomic64_add(wait, &pool->wait_ns);
	if (wait)
		atomic64_add(wait, &ent->engine->dev->root.wait_ns);
}
EXPORT_SYMBOL_GPL(gpucg_queue_start);

static void gpucg_usage_add(struct gpucg_entity *ent, u64 ns)
{
	struct gpucg_pool *pool;

	for (pool = ent->pool; pool; pool = pool->parent)
		atomic64_add(ns, &pool->usage_ns);
	atomic64_add(ns, &ent->engine->dev->root.usage_ns);
}

/**
 * gpucg_charge() - the GPU time a started job took
 * @engine: the engine of the queue that started it
 * @t: its ticket, from gpucg_queue_start(); cleared, so charging twice
 *     does nothing
 * @ns: the GPU time; 0 for a job cancelled before it ran
 *
 * If that was the last job of an entity with no ready queue, the engine
 * expects the entity back after its think time (gpucg_expect_ns()).
 *
 * Context: any context.
 */
void gpucg_charge(struct gpucg_engine *engine, struct gpucg_ticket *t, u64 ns)
{
	struct gpucg_entity *ent = t->ent, *e;
	unsigned long flags;
	u64 now;

	if (!ent)
		return;
	t->ent = NULL;
	if (!engine) {	/* the engine went first: only the pin is left */
		css_put(&t->cg->css);
		return;
	}
	spin_lock_irqsave(&engine->lock, flags);
	now = gpucg_now();
	/* a kernel job's entity is the top: nothing to account, or expect */
	if (gpucg_off(GPUCG_OFF_ESTIMATE))
		gpucg_entity_account(ent, ns, false);
	else if (ns > t->est_ns)
		gpucg_entity_account(ent, ns - t->est_ns, false);
	else
		gpucg_entity_account(ent, t->est_ns - ns, true);
	if (ns > t->est_ns)
		gpucg_cap_account(ent, ns - t->est_ns, false, now);
	else
		gpucg_cap_account(ent, t->est_ns - ns, true, now);
	for (e = ent; e->parent; e = e->parent) {
		if (ns)
			e->est_ns = e->est_ns ? (3 * e->est_ns + ns) / 4 : ns;
		if (!--e->inflight && !e->active)
			e->idle_ns = now;
	}
	if (ns)
		engine->est_ns = engine->est_ns ?
				 (7 * engine->est_ns + ns) / 8 : ns;
	if (!WARN_ON_ONCE(!engine->tickets) && --engine->tickets) {
		/* the jobs behind it move by what it took over its estimate */
		if (ns > t->est_ns)
			engine->busy_until += min(ns - t->est_ns, NSEC_PER_SEC);
		else
			engine->busy_until -= t->est_ns - ns;
	}
	if (!engine->tickets || (s64)(engine->busy_until - now) < 0)
		engine->busy_until = now;
	/* only work that waits to be ready again */
	if (ent->parent && !ent->inflight && !ent->active && !ent->throttled) {
		if (ns)
			gpucg_expect(ent, now);
		else
			gpucg_unexpect(ent);
	}
	spin_unlock_irqrestore(&engine->lock, flags);

	gpucg_usage_add(ent, ns);
	css_put(&t->cg->css);
}
EXPORT_SYMBOL_GPL(gpucg_charge);

/**
 * gpucg_queue_charge() - GPU time of @q learnt outside a pick
 * @q: the queue
 * @ns: GPU time it used since the last report
 *
 * For drivers that learn GPU time per context (at a context switch, or by
 * sampling) rather than per job.
 *
 * Context: any context.
 */
void gpucg_queue_charge(struct gpucg_queue *q, u64 ns)
{
	struct gpucg_entity *ent;
	unsigned long flags;

	if (!q->engine || !ns)
		return;
	spin_lock_irqsave(&q->engine->lock, flags);
	ent = q->ent;
	gpucg_entity_pin(ent);
	gpucg_entity_account(ent, ns, false);
	if (q->active)
		rb_erase_cached(&q->node, &ent->queues);
	q->vtime += ns;
	if (q->active)
		gpucg_queue_requeue(q, ent, gpucg_now());
	gpucg_cap_account(ent, ns, false, gpucg_now());
	spin_unlock_irqrestore(&q->engine->lock, flags);
	gpucg_usage_add(ent, ns);
	gpucg_entity_unpin(ent);
}
EXPORT_SYMBOL_GPL(gpucg_queue_charge);

/**
 * gpucg_queue_throttled() - whether gpu.max holds a queue's work back
 * @q: a queue
 * @retry_ns: set, if it does, to the time after which to ask again (a
 *	      period at most), else to 0
 * @capped: if not NULL, set to whether a cap acts on @q at all (its cgroup's
 *	    or an ancestor's), throttled or not: a driver that hands a queue's
 *	    work to the hardware in batches hands it one job at a time then,
 *	    so that what runs past the budget is one job at most
 *
 * For a driver that keeps its own queue and enforces gpu.max on the engine
 * (gpucg_engine_enforce_max(); i915's execlists): it starts no work of @q
 * while this says so. Releases the engine's throttled entities whose
 * period came first, as a pick does (GPUCG_CAP_BATCH at most). A queue of
 * no engine, or of one that does not enforce caps, is never throttled.
 *
 * Context: any context; takes the engine's lock.
 * Return: whether @q's cgroup, or a cgroup above it, used its cap on the
 * engine for the current period.
 */
bool gpucg_queue_throttled(struct gpucg_queue *q, u64 *retry_ns, bool *capped)
{
	struct gpucg_entity *e;
	unsigned long flags;
	u64 next, max, period;
	bool held;

	*retry_ns = 0;
	if (capped)
		*capped = false;
	if (!q->engine || !READ_ONCE(q->engine->caps))
		return false;
	spin_lock_irqsave(&q->engine->lock, flags);
	next = gpucg_cap_expire(q->engine, gpucg_now());
	held = gpucg_cap_held(q->ent);
	for (e = q->ent; capped && !*capped && e->parent; e = e->parent)
		*capped = gpucg_cap_of(e, &max, &period);
	spin_unlock_irqrestore(&q->engine->lock, flags);
	if (held)
		*retry_ns = max(next, GPUCG_RETRY_MIN_NS);
	return held;
}
EXPORT_SYMBOL_GPL(gpucg_queue_throttled);

/**
 * gpucg_queue_before() - does @a run before @b by the controller's policy?
 * @a: a queue
 * @b: another queue on the same engine
 *
 * For drivers that keep their own queue: the comparison the pick makes,
 * where the two queues' paths meet. The answer is a snapshot.
 *
 * Context: any context; takes the engine's lock.
 */
bool gpucg_queue_before(const struct gpucg_queue *a, const struct gpucg_queue *b)
{
	struct gpucg_entity *ea, *eb;
	unsigned long flags;
	int da, db, ka, kb;
	bool ret;

	if (!a->engine || a->engine != b->engine)
		return false;
	spin_lock_irqsave(&a->engine->lock, flags);
	ea = a->ent;
	eb = b->ent;
	if (ea == eb) {
		ret = gpucg_queue_less((struct rb_node *)&a->node, &b->node);
		goto out;
	}
	da = gpucg_depth(ea);
	db = gpucg_depth(eb);
	for (; da > db + 1; da--)
		ea = ea->parent;
	for (; db > da + 1; db--)
		eb = eb->parent;
	if (da != db && (da > db ? ea->parent : eb->parent) == (da > db ? eb : ea)) {
		/* one cgroup's own work against its child's subtree */
		if (da > db) {
			kb = gpucg_own_key(eb);
			ret = !(kb > ea->key || (kb == ea->key &&
				vtime_before(eb->self_vtime, ea->vtime)));
		} else {
			ka = gpucg_own_key(ea);
			ret = ka > eb->key || (ka == eb->key &&
			      vtime_before(ea->self_vtime, eb->vtime));
		}
		goto out;
	}
	for (; da > db; da--)
		ea = ea->parent;
	for (; db > da; db--)
		eb = eb->parent;
	while (ea->parent != eb->parent) {
		ea = ea->parent;
		eb = eb->parent;
	}
	ka = ea->active ? ea->key : gpucg_own_key(ea);
	kb = eb->active ? eb->key : gpucg_own_key(eb);
	if (ka != kb)
		ret = ka > kb;
	else
		ret = vtime_before(ea->vtime, eb->vtime);
out:
	spin_unlock_irqrestore(&a->engine->lock, flags);
	return ret;
}
EXPORT_SYMBOL_GPL(gpucg_queue_before);

/**
 * gpucg_queue_share() - the share of the engine @q is entitled to
 * @q: an active queue
 *
 * For firmware schedulers that take a time quantum per queue: its cgroup's
 * share (the product of weight / sum of the weights of the active siblings
 * in its band, down the path) divided evenly among the cgroup's active
 * queues, in units of 1/65536 of the engine. 0 if @q is not active or a
 * higher band is active.
 *
 * Context: any context; takes the engine's lock. O(depth * siblings +
 * the cgroup's active queues).
 */
u32 gpucg_queue_share(struct gpucg_queue *q)
{
	struct gpucg_entity *e, *s;
	struct rb_node *n;
	unsigned long flags;
	u64 share = 1 << 16, sum;
	u32 queues = 0;

	if (!q->engine)
		return 0;
	spin_lock_irqsave(&q->engine->lock, flags);
	if (!q->active) {
		share = 0;
		goto out;
	}
	for (e = q->ent; e->parent; e = e->parent) {
		sum = 0;
		for (n = rb_first_cached(&e->parent->children); n; n = rb_next(n)) {
			s = rb_entry(n, struct gpucg_entity, node);
			if (s->key == e->key)
				sum += gpucg_entity_weight(s);
		}
		if (!e->active || gpucg_first_child(e->parent)->key != e->key) {
			share = 0;
			goto out;
		}
		share = div64_u64(share * gpucg_entity_weight(e), sum);
	}
	for (n = rb_first_cached(&q->ent->queues); n; n = rb_next(n))
		queues++;
	share /= queues;
out:
	spin_unlock_irqrestore(&q->engine->lock, flags);
	return share;
}
EXPORT_SYMBOL_GPL(gpucg_queue_share);

#if IS_ENABLED(CONFIG_KUNIT)
/**
 * gpucg_kunit_cgroup_new() - a cgroup for a KUnit test, in no hierarchy
 * @parent: its parent, from this call; NULL: under the root
 * @weight: its default gpu.weight
 * @prio: its gpu.priority
 *
 * Lets a KUnit test (this core's, drm_sched's) place clients in cgroups
 * without a cgroup2 mount, on UML as in a VM. Its css holds no references
 * (as the root's) and has no children a walk of the hierarchy could find:
 * the test keeps it, and frees it with gpucg_kunit_cgroup_free() once
 * every engine and device that has state in it is destroyed and released
 * (a deferred action added before the device's is run after it).
 *
 * Context: process context, may sleep.
 * Return: the cgroup, or NULL if it cannot be allocated.
 */
struct gpucg *gpucg_kunit_cgroup_new(struct gpucg *parent, u32 weight,
				     int prio)
{
	struct gpucg *cg = kzalloc_obj(*cg, GFP_KERNEL);

	if (!cg)
		return NULL;
	cg->css.flags = CSS_NO_REF;
	cg->css.parent = &(parent ?: &gpucg_root)->css;
	INIT_LIST_HEAD(&cg->css.sibling);
	INIT_LIST_HEAD(&cg->css.children);
	cg->weight = weight;
	cg->priority = prio;
	xa_init(&cg->pools);
	return cg;
}
EXPORT_SYMBOL_IF_KUNIT(gpucg_kunit_cgroup_new);

/**
 * gpucg_kunit_cgroup_free() - free a cgroup from gpucg_kunit_cgroup_new()
 * @cg: the cgroup; NULL is ignored
 *
 * Context: process context.
 */
void gpucg_kunit_cgroup_free(struct gpucg *cg)
{
	/* a pool left (a charge the device kept) points at it: leaked */
	if (!cg || WARN_ON_ONCE(!xa_empty(&cg->pools)))
		return;
	xa_destroy(&cg->pools);
	kfree(cg);
}
EXPORT_SYMBOL_IF_KUNIT(gpucg_kunit_cgroup_free);

/**
 * gpucg_kunit_cgroup_set() - change a KUnit test's cgroup's knobs
 * @cg: from gpucg_kunit_cgroup_new()
 * @weight: its new default gpu.weight
 * @prio: its new gpu.priority
 *
 * As writes of gpu.weight's default and of gpu.priority do: the weight
 * acts from the next charge, the priority at once on every entity of @cg
 * (a KUnit cgroup lists no children, so a change reaches no descendant's:
 * change leaves).
 *
 * Context: process context, may sleep; takes gpucg_mutex.
 */
void gpucg_kunit_cgroup_set(struct gpucg *cg, u32 weight, int prio)
{
	WRITE_ONCE(cg->weight, weight);
	WRITE_ONCE(cg->priority, prio);
	gpucg_sched_rekey(cg);
}
EXPORT_SYMBOL_IF_KUNIT(gpucg_kunit_cgroup_set);

/**
 * gpucg_kunit_cgroup_set_max() - set a KUnit test's cgroup's gpu.max
 * @cg: from gpucg_kunit_cgroup_new()
 * @max_us: its default MAX, 0 for "max"
 * @period_us: its default PERIOD
 *
 * As a write of gpu.max's default line does: it acts at once.
 *
 * Context: process context, may sleep; takes gpucg_mutex.
 */
void gpucg_kunit_cgroup_set_max(struct gpucg *cg, u32 max_us, u32 period_us)
{
	mutex_lock(&gpucg_mutex);
	WRITE_ONCE(cg->cap.max_us, max_us);
	WRITE_ONCE(cg->cap.period_us, period_us);
	mutex_unlock(&gpucg_mutex);
	gpucg_sched_recap(cg);
}
EXPORT_SYMBOL_IF_KUNIT(gpucg_kunit_cgroup_set_max);

/**
 * gpucg_kunit_client() - a client of @dev owned by a KUnit test's cgroup
 * @dev: the device
 * @cg: from gpucg_kunit_cgroup_new()
 *
 * Context: process context, may sleep; a KUnit test.
 * Return: the client, for gpucg_client_put(), or an ERR_PTR().
 */
struct gpucg_client *gpucg_kunit_client(struct gpucg_device *dev,
					struct gpucg *cg)
{
	return gpucg_client_new(dev, cg);
}
EXPORT_SYMBOL_IF_KUNIT(gpucg_kunit_client);

/**
 * gpucg_kunit_client_move() - move a client's owner to a KUnit cgroup
 * @client: the client
 * @cg: from gpucg_kunit_cgroup_new()
 *
 * As gpucg_client_set_owner() does when the owner moves: its queues
 * follow when they next become active (drm_sched's entities at their next
 * job's arm); tickets stay with the cgroup that started them.
 *
 * Context: process context, may sleep.
 */
void gpucg_kunit_client_move(struct gpucg_client *client, struct gpucg *cg)
{
	struct gpucg *old;

	css_get(&cg->css);
	mutex_lock(&client->lock);
	old = rcu_dereference_protected(client->cg, lockdep_is_held(&client->lock));
	gpucg_client_prepare(client, cg);
	rcu_assign_pointer(client->cg, cg);
	mutex_unlock(&client->lock);
	css_put(&old->css);
}
EXPORT_SYMBOL_IF_KUNIT(gpucg_kunit_client_move);
#endif

#if IS_ENABLED(CONFIG_CGROUP_GPU_KUNIT_TEST)
#include "gpu_sched_test.c"
#endif
