// SPDX-License-Identifier: GPL-2.0
/*
 * GPU controller for cgroup v2.
 *
 * A GPU is identified by the device number of its DRM render node
 * ("226:128" for /dev/dri/renderD128); the DRM core registers every render
 * node with gpucg_register_device() and unregisters it when the node goes
 * away. Devices without a render node are not controlled.
 *
 * gpu.weight distributes GPU engine time with the weight model of
 * Documentation/admin-guide/cgroup-v2.rst: a cgroup has a default weight in
 * [1, 10000] (100 when created) and may override it per device, in the
 * format of io.weight:
 *
 *	default 100
 *	226:128 300
 *
 * gpu.priority orders work strictly: runnable work of a higher effective
 * priority runs before lower. The scale is i915's context priority scale,
 * [-1023, 1023], default 0. The effective priority of a cgroup is the minimum
 * of its own and that of its ancestors (the root imposes no clamp), so a
 * delegated subtree can lower its priority but never raise it; it is shown
 * in gpu.priority.effective.
 *
 * Every write sets one key. Malformed input fails with -EINVAL, a number out
 * of range with -ERANGE, and a failed write changes nothing.
 *
 * Locking: gpucg_mutex protects the device table, device ids and the
 * creation, configuration and destruction of per-(cgroup, device) pools.
 * Pools are freed after an RCU grace period, so readers on the scheduling
 * paths may look them up with xa_load() under rcu_read_lock(). Scalar knobs
 * are written with WRITE_ONCE() and read with READ_ONCE().
 */

#include <linux/cgroup.h>
#include <linux/cgroup_gpu.h>
#include <linux/kdev_t.h>
#include <linux/kernel.h>
#include <linux/list.h>
#include <linux/mutex.h>
#include <linux/rcupdate.h>
#include <linux/seq_file.h>
#include <linux/slab.h>
#include <linux/string.h>
#include <linux/xarray.h>

#define GPUCG_PRIO_MIN		(-1023)
#define GPUCG_PRIO_MAX		1023
#define GPUCG_DEFAULT_STR	"default"

struct gpucg_device {
	dev_t			devt;
	u32			id;	/* index in gpucg_devices and gpucg->pools */
	struct list_head	pools;	/* its gpucg_pool's, under gpucg_mutex */
};

struct gpucg;

/* State of one cgroup on one device, created when first needed. */
struct gpucg_pool {
	struct gpucg		*cg;
	struct gpucg_device	*dev;
	struct list_head	dev_node;	/* on dev->pools */
	u32			weight;		/* 0: the cgroup's default */
	struct rcu_head		rcu;
};

struct gpucg {
	struct cgroup_subsys_state	css;
	u32				weight;		/* default weight */
	int				priority;
	struct xarray			pools;		/* device id -> pool */
};

static DEFINE_MUTEX(gpucg_mutex);
static DEFINE_XARRAY_ALLOC(gpucg_devices);
static struct gpucg gpucg_root;

static struct gpucg *css_gpucg(struct cgroup_subsys_state *css)
{
	return css ? container_of(css, struct gpucg, css) : NULL;
}

static struct gpucg *gpucg_parent(struct gpucg *cg)
{
	return css_gpucg(cg->css.parent);
}

/* Returns the effective priority of @cg: the minimum along its path. */
static int gpucg_priority_effective(struct gpucg *cg)
{
	int prio = GPUCG_PRIO_MAX;

	for (; cg && cg != &gpucg_root; cg = gpucg_parent(cg))
		prio = min(prio, READ_ONCE(cg->priority));
	return prio;
}

/**
 * gpucg_register_device() - put a GPU under the controller
 * @devt: device number of the GPU's render node
 *
 * Context: process context, may sleep.
 * Return: a handle for gpucg_unregister_device(), or an ERR_PTR().
 */
struct gpucg_device *gpucg_register_device(dev_t devt)
{
	struct gpucg_device *dev;
	int ret;

	dev = kzalloc(sizeof(*dev), GFP_KERNEL);
	if (!dev)
		return ERR_PTR(-ENOMEM);
	dev->devt = devt;
	INIT_LIST_HEAD(&dev->pools);

	mutex_lock(&gpucg_mutex);
	ret = xa_alloc(&gpucg_devices, &dev->id, dev, xa_limit_31b, GFP_KERNEL);
	mutex_unlock(&gpucg_mutex);
	if (ret) {
		kfree(dev);
		return ERR_PTR(ret);
	}
	return dev;
}
EXPORT_SYMBOL_GPL(gpucg_register_device);

/**
 * gpucg_unregister_device() - take a GPU from the controller
 * @dev: handle from gpucg_register_device(); NULL is ignored
 *
 * Drops every cgroup's settings for the device.
 *
 * Context: process context, may sleep.
 */
void gpucg_unregister_device(struct gpucg_device *dev)
{
	struct gpucg_pool *pool, *tmp;

	if (IS_ERR_OR_NULL(dev))
		return;

	mutex_lock(&gpucg_mutex);
	xa_erase(&gpucg_devices, dev->id);
	list_for_each_entry_safe(pool, tmp, &dev->pools, dev_node) {
		/* pool->cg is alive: its css_free() would take gpucg_mutex */
		xa_erase(&pool->cg->pools, dev->id);
		list_del(&pool->dev_node);
		kfree_rcu(pool, rcu);
	}
	mutex_unlock(&gpucg_mutex);
	kfree(dev);
}
EXPORT_SYMBOL_GPL(gpucg_unregister_device);

static struct gpucg_device *gpucg_device_find(dev_t devt)
{
	struct gpucg_device *dev;
	unsigned long id;

	lockdep_assert_held(&gpucg_mutex);
	xa_for_each(&gpucg_devices, id, dev)
		if (dev->devt == devt)
			return dev;
	return NULL;
}

static struct gpucg_pool *gpucg_pool_get(struct gpucg *cg,
					 struct gpucg_device *dev)
{
	struct gpucg_pool *pool;
	int ret;

	lockdep_assert_held(&gpucg_mutex);
	pool = xa_load(&cg->pools, dev->id);
	if (pool)
		return pool;

	pool = kzalloc(sizeof(*pool), GFP_KERNEL);
	if (!pool)
		return ERR_PTR(-ENOMEM);
	pool->cg = cg;
	pool->dev = dev;
	ret = xa_insert(&cg->pools, dev->id, pool, GFP_KERNEL);
	if (ret) {
		kfree(pool);
		return ERR_PTR(ret);
	}
	list_add(&pool->dev_node, &dev->pools);
	return pool;
}

static struct cgroup_subsys_state *
gpucg_css_alloc(struct cgroup_subsys_state *parent_css)
{
	struct gpucg *cg;

	if (!parent_css) {
		cg = &gpucg_root;
	} else {
		cg = kzalloc(sizeof(*cg), GFP_KERNEL);
		if (!cg)
			return ERR_PTR(-ENOMEM);
	}
	cg->weight = CGROUP_WEIGHT_DFL;
	xa_init(&cg->pools);
	return &cg->css;
}

static void gpucg_css_free(struct cgroup_subsys_state *css)
{
	struct gpucg *cg = css_gpucg(css);
	struct gpucg_pool *pool;
	unsigned long id;

	mutex_lock(&gpucg_mutex);
	xa_for_each(&cg->pools, id, pool) {
		list_del(&pool->dev_node);
		kfree_rcu(pool, rcu);
	}
	mutex_unlock(&gpucg_mutex);
	xa_destroy(&cg->pools);
	if (cg != &gpucg_root)
		kfree(cg);
}

/*
 * Parsing, shared by every file: a weight, a priority and a device key.
 * kstrto*() fail with -EINVAL on malformed input and -ERANGE on overflow.
 */
static int gpucg_parse_weight(const char *s, u32 *weight)
{
	s64 v;
	int ret;

	ret = kstrtos64(s, 10, &v);
	if (ret)
		return ret;
	if (v < CGROUP_WEIGHT_MIN || v > CGROUP_WEIGHT_MAX)
		return -ERANGE;
	*weight = v;
	return 0;
}

static int gpucg_parse_devt(char *s, dev_t *devt)
{
	char *min = strchr(s, ':');
	unsigned int maj, mnr;

	if (!min)
		return -EINVAL;
	*min++ = '\0';
	if (kstrtouint(s, 10, &maj) || kstrtouint(min, 10, &mnr))
		return -EINVAL;
	if (maj != MAJOR(MKDEV(maj, 0)) || mnr != MINOR(MKDEV(0, mnr)))
		return -EINVAL;
	*devt = MKDEV(maj, mnr);
	return 0;
}

/* Splits @buf into at most @max whitespace-separated words. */
static int gpucg_split(char *buf, char **words, int max)
{
	char *w;
	int n = 0;

	while ((w = strsep(&buf, " \t\n"))) {
		if (!*w)
			continue;
		if (n == max)
			return -EINVAL;
		words[n++] = w;
	}
	return n;
}

static int gpu_weight_show(struct seq_file *sf, void *v)
{
	struct gpucg *cg = css_gpucg(seq_css(sf));
	struct gpucg_pool *pool;
	unsigned long id;

	seq_printf(sf, "%s %u\n", GPUCG_DEFAULT_STR, READ_ONCE(cg->weight));
	mutex_lock(&gpucg_mutex);
	xa_for_each(&cg->pools, id, pool)
		if (pool->weight)
			seq_printf(sf, "%u:%u %u\n", MAJOR(pool->dev->devt),
				   MINOR(pool->dev->devt), pool->weight);
	mutex_unlock(&gpucg_mutex);
	return 0;
}

/* "W", "default W", "MAJ:MIN W" or "MAJ:MIN default" */
static ssize_t gpu_weight_write(struct kernfs_open_file *of, char *buf,
				size_t nbytes, loff_t off)
{
	struct gpucg *cg = css_gpucg(of_css(of));
	struct gpucg_device *dev;
	struct gpucg_pool *pool;
	char *words[2], *key, *val;
	u32 weight = 0;
	dev_t devt;
	int n, ret;

	n = gpucg_split(buf, words, 2);
	if (n <= 0)
		return -EINVAL;
	key = n == 2 ? words[0] : GPUCG_DEFAULT_STR;
	val = words[n - 1];

	if (!strcmp(key, GPUCG_DEFAULT_STR)) {
		ret = gpucg_parse_weight(val, &weight);
		if (ret)
			return ret;
		WRITE_ONCE(cg->weight, weight);
		return nbytes;
	}

	ret = gpucg_parse_devt(key, &devt);
	if (ret)
		return ret;
	if (strcmp(val, GPUCG_DEFAULT_STR)) {
		ret = gpucg_parse_weight(val, &weight);
		if (ret)
			return ret;
	}

	mutex_lock(&gpucg_mutex);
	dev = gpucg_device_find(devt);
	if (!dev) {
		ret = -EINVAL;
	} else if (!weight) {
		pool = xa_load(&cg->pools, dev->id);
		if (pool)
			WRITE_ONCE(pool->weight, 0);
	} else {
		pool = gpucg_pool_get(cg, dev);
		if (IS_ERR(pool))
			ret = PTR_ERR(pool);
		else
			WRITE_ONCE(pool->weight, weight);
	}
	mutex_unlock(&gpucg_mutex);
	return ret ?: nbytes;
}

static int gpu_priority_show(struct seq_file *sf, void *v)
{
	seq_printf(sf, "%d\n", READ_ONCE(css_gpucg(seq_css(sf))->priority));
	return 0;
}

static ssize_t gpu_priority_write(struct kernfs_open_file *of, char *buf,
				  size_t nbytes, loff_t off)
{
	struct gpucg *cg = css_gpucg(of_css(of));
	int prio, ret;

	ret = kstrtoint(strstrip(buf), 10, &prio);
	if (ret)
		return ret;
	if (prio < GPUCG_PRIO_MIN || prio > GPUCG_PRIO_MAX)
		return -ERANGE;
	WRITE_ONCE(cg->priority, prio);
	return nbytes;
}

static int gpu_priority_effective_show(struct seq_file *sf, void *v)
{
	seq_printf(sf, "%d\n", gpucg_priority_effective(css_gpucg(seq_css(sf))));
	return 0;
}

static struct cftype gpucg_files[] = {
	{
		.name = "weight",
		.flags = CFTYPE_NOT_ON_ROOT,
		.seq_show = gpu_weight_show,
		.write = gpu_weight_write,
	},
	{
		.name = "priority",
		.flags = CFTYPE_NOT_ON_ROOT,
		.seq_show = gpu_priority_show,
		.write = gpu_priority_write,
	},
	{
		.name = "priority.effective",
		.flags = CFTYPE_NOT_ON_ROOT,
		.seq_show = gpu_priority_effective_show,
	},
	{ }	/* terminate */
};

struct cgroup_subsys gpu_cgrp_subsys = {
	.css_alloc = gpucg_css_alloc,
	.css_free = gpucg_css_free,
	.dfl_cftypes = gpucg_files,
};
