/* SPDX-License-Identifier: GPL-2.0 */
/*
 * GPU cgroup controller: state shared by the interface (gpu.c), the
 * scheduling core (gpu_sched.c) and, on kernels without the dmem
 * controller, the memory part (gpu_mem.c).
 */
#ifndef _KERNEL_CGROUP_GPU_H
#define _KERNEL_CGROUP_GPU_H

#include <linux/cgroup.h>
#include <linux/idr.h>
#include <linux/kref.h>
#include <linux/limits.h>
#include <linux/list.h>
#include <linux/mutex.h>
#include <linux/page_counter.h>
#include <linux/rbtree.h>
#include <linux/seq_file.h>
#include <linux/slab.h>
#include <linux/spinlock.h>
#include <linux/xarray.h>

/*
 * The controller's files are one source for Linux 7.3 and the 6.12 LTS:
 * the typed allocator of 7.x, on 6.12 for the uses made of it here (every
 * one gives its gfp flags).
 */
#ifndef kzalloc_obj
#define kzalloc_obj(P, gfp)	kzalloc(sizeof(P), gfp)
#endif

#define GPUCG_PRIO_MIN		(-1023)
#define GPUCG_PRIO_MAX		1023
#define GPUCG_PRIO_DFL		0		/* of a top-level cgroup */
#define GPUCG_PRIO_UNSET	INT_MIN		/* gpu.priority "default" */

/*
 * gpu.max: at most MAX of every PERIOD of each engine, in microseconds,
 * with cpu.max's bounds; a MAX of 0 stands for "max" (no cap), a PERIOD of
 * 0 for the default.
 */
#define GPUCG_PERIOD_DFL_US	100000
#define GPUCG_PERIOD_MIN_US	1000
#define GPUCG_PERIOD_MAX_US	1000000
#define GPUCG_MAX_MIN_US	1000

/* A cap as written: max_us 0 for none */
struct gpucg_cap {
	u32			max_us;
	u32			period_us;
};

struct gpucg_device;
struct gpucg_entity;

/*
 * State of one cgroup on one device, created when first needed. The root
 * cgroup's is embedded in the device: its counters are the device's totals
 * (every charge and all GPU time); it has no entities and no limit.
 */
struct gpucg_pool {
	struct gpucg		*cg;
	struct gpucg_device	*dev;
	struct gpucg_pool	*parent;	/* the parent's; NULL at the top */
	struct list_head	dev_node;	/* in dev->pools */
	struct xarray		ents;		/* engine id -> entity */
	atomic64_t		usage_ns;	/* GPU time, hierarchical */
	atomic64_t		wait_ns;	/* ready, not running */
	u32			weight;		/* 0: the cgroup's default */
	struct gpucg_cap	cap;		/* gpu.max's line, if cap_set */
	bool			cap_set;
	atomic64_t		nr_periods;	/* gpu.stat, summed over engines */
	atomic64_t		nr_throttled;
	atomic64_t		throttled_ns;
#ifdef CONFIG_CGROUP_GPU_MEMORY
	u64			mem_max;	/* bytes as written, U64_MAX: max */
	struct page_counter	mem;		/* parent: the parent's, or root */
	atomic64_t		events;		/* refusals, hierarchical */
	atomic64_t		events_local;	/* refusals by this limit */
#endif
	struct rcu_head		rcu;
};

/* A GPU, keyed by its render node. Fields under gpucg_mutex unless noted. */
struct gpucg_device {
	dev_t			devt;
	u32			id;		/* index in gpucg_devices */
	bool			dead;		/* not (or no longer) registered */
	struct kref		ref;		/* the driver's, and one per pool */
	struct list_head	pools;		/* gpucg_pool.dev_node */
	struct list_head	engines;	/* gpucg_engine.dev_node */
	struct ida		engine_ids;	/* of the live engines */
	bool			released;	/* by the driver (gpucg_put_device()) */
	struct gpucg_pool	root;		/* the root cgroup's, lockless */
};

struct gpucg {
	struct cgroup_subsys_state	css;
	u32				weight;		/* default weight */
	int				priority;	/* or GPUCG_PRIO_UNSET */
	struct gpucg_cap		cap;		/* default gpu.max */
	struct xarray			pools;		/* device id -> pool */
#ifdef CONFIG_CGROUP_GPU_MEMORY
	struct cgroup_file		events_file;
	struct cgroup_file		events_local_file;
#endif
};

extern struct mutex gpucg_mutex;
extern struct gpucg gpucg_root;

static inline struct gpucg *css_gpucg(struct cgroup_subsys_state *css)
{
	return css ? container_of(css, struct gpucg, css) : NULL;
}

static inline struct gpucg *gpucg_parent(struct gpucg *cg)
{
	return css_gpucg(cg->css.parent);
}

int gpucg_priority_effective(struct gpucg *cg);
struct gpucg_pool *gpucg_pool_get(struct gpucg *cg, struct gpucg_device *dev);
struct gpucg_device *gpucg_device_find(dev_t devt);
int gpucg_parse_devt(char *s, dev_t *devt);
int gpucg_split(char *buf, char **words, int max);
void gpucg_device_release(struct gpucg_device *dev);
int gpucg_devices_show(struct seq_file *sf,
		       void (*show)(struct seq_file *sf, struct gpucg_device *dev,
				    struct gpucg_pool *pool, unsigned long file));

/* gpu_mem.c: gpu.memory.*, built where CONFIG_CGROUP_GPU_MEMORY is set */
#ifdef CONFIG_CGROUP_GPU_MEMORY
void gpucg_mem_init(struct gpucg_pool *pool, struct gpucg_pool *parent);
static inline unsigned long gpucg_mem_pages(struct gpucg_pool *pool)
{
	return page_counter_read(&pool->mem);
}
#else
static inline void gpucg_mem_init(struct gpucg_pool *pool,
				  struct gpucg_pool *parent)
{
}

static inline unsigned long gpucg_mem_pages(struct gpucg_pool *pool)
{
	return 0;
}
#endif

/* gpu_sched.c */
void gpucg_sched_pool_free(struct gpucg_pool *pool);
void gpucg_sched_rekey(struct gpucg *cg);
void gpucg_sched_recap(struct gpucg *cg);
bool gpucg_device_schedules(struct gpucg_device *dev);
bool gpucg_device_caps(struct gpucg_device *dev);

#endif /* _KERNEL_CGROUP_GPU_H */
