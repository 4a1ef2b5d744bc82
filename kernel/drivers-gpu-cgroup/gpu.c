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
 * [-1023, 1023]. A new cgroup's priority is unset, read and written as
 * "default": it inherits its parent's effective priority, and a top-level
 * cgroup's is 0. A set priority takes effect up to the parent's effective
 * one (the root imposes no clamp), so a delegated subtree can lower its
 * priority but never raise it, and a priority given to a container's cgroup
 * reaches the cgroups it makes. The result is shown in
 * gpu.priority.effective.
 *
 * GPU time is divided by the scheduling core in gpu_sched.c, which the
 * drivers' schedulers consult, and reported in gpu.stat, per device:
 *
 *	226:128 usage_usec=N wait_usec=N sched=1
 *
 * usage_usec is the GPU time the cgroup's work used and wait_usec the time
 * its queues were ready but not running (summed over its queues, like the
 * run delay of schedstats), both hierarchical and kept after the tasks
 * exit. sched=0 says that no scheduler of the device consults the
 * controller: weights and priorities cannot act there, and a per-device
 * gpu.weight for it is refused with -EOPNOTSUPP. On the root cgroup,
 * gpu.stat gives the device's totals: the time of all work, the root
 * cgroup's and the kernel's included, as io.stat does for a disk.
 *
 * GPU buffer memory is not this file's: where the kernel has the dmem
 * controller (Linux 6.14 and later), the DRM core charges buffers to dmem
 * regions of their device; on older kernels gpu_mem.c offers
 * gpu.memory.* (CONFIG_CGROUP_GPU_MEMORY).
 *
 * Every write sets one key. Malformed input and unknown devices fail with
 * -EINVAL, a number out of range with -ERANGE, and a failed write changes
 * nothing.
 *
 * Locking: gpucg_mutex protects the device table and the creation,
 * configuration and freeing of per-(cgroup, device) pools and of the
 * scheduling state in them; drivers may hold their own locks when they call
 * in (DRM's object_name_lock nests outside it). A pool lives until its
 * cgroup is freed in css_free() or its device is released, so whoever holds
 * a reference on the cgroup and the device may use its pools without locks.
 * Scalar knobs are written with WRITE_ONCE() and read with READ_ONCE().
 */

#include <linux/cgroup.h>
#include <linux/cgroup_gpu.h>
#include <linux/kdev_t.h>
#include <linux/kernel.h>
#include <linux/kref.h>
#include <linux/ktime.h>
#include <linux/list.h>
#include <linux/mutex.h>
#include <linux/overflow.h>
#include <linux/rbtree.h>
#include <linux/rcupdate.h>
#include <linux/sched.h>
#include <linux/seq_file.h>
#include <linux/slab.h>
#include <linux/spinlock.h>
#include <linux/string.h>
#include <linux/xarray.h>

#include "gpu.h"

#define GPUCG_DEFAULT_STR	"default"

/* the device table; pools, engines and entities as they come and go */
DEFINE_MUTEX(gpucg_mutex);
static DEFINE_XARRAY_ALLOC(gpucg_devices);
struct gpucg gpucg_root;

/*
 * Returns the effective priority of @cg: the minimum of the priorities set
 * on its path, where an unset one inherits its parent's effective priority
 * and a top-level cgroup's unset one is GPUCG_PRIO_DFL. Lockless: a
 * concurrent write is seen or not.
 */
int gpucg_priority_effective(struct gpucg *cg)
{
	int prio = GPUCG_PRIO_MAX, own = GPUCG_PRIO_DFL;

	for (; cg && cg != &gpucg_root; cg = gpucg_parent(cg)) {
		own = READ_ONCE(cg->priority);
		if (own != GPUCG_PRIO_UNSET)
			prio = min(prio, own);
	}
	/* @own is now the top-level cgroup's */
	if (own == GPUCG_PRIO_UNSET)
		prio = min(prio, GPUCG_PRIO_DFL);
	return prio;
}

/* Called with gpucg_mutex held, by the last kref_put(). */
static void gpucg_device_free(struct kref *ref)
{
	struct gpucg_device *dev = container_of(ref, struct gpucg_device, ref);

	lockdep_assert_held(&gpucg_mutex);

	WARN_ON_ONCE(!list_empty(&dev->engines) || !list_empty(&dev->pools));
	WARN_ON_ONCE(gpucg_mem_pages(&dev->root));
	xa_erase(&gpucg_devices, dev->id);
	ida_destroy(&dev->engine_ids);
	kfree(dev);
}

/* Frees @pool and its entities, and drops its reference on the device. */
static void gpucg_pool_free(struct gpucg_pool *pool)
{
	struct gpucg_device *dev = pool->dev;

	lockdep_assert_held(&gpucg_mutex);
	gpucg_sched_pool_free(pool);
	xa_erase(&pool->cg->pools, dev->id);
	list_del(&pool->dev_node);
	kfree_rcu(pool, rcu);
	kref_put(&dev->ref, gpucg_device_free);
}

/**
 * gpucg_register_device() - put a GPU under the controller
 * @devt: device number of the GPU's render node
 *
 * The device stays out of the interface files until gpucg_publish_device(),
 * but drivers can create engines on it right away.
 *
 * Context: process context, may sleep.
 * Return: a handle for the calls below, or an ERR_PTR().
 */
struct gpucg_device *gpucg_register_device(dev_t devt)
{
	struct gpucg_device *dev;
	int ret;

	dev = kzalloc_obj(*dev, GFP_KERNEL);
	if (!dev)
		return ERR_PTR(-ENOMEM);
	dev->devt = devt;
	dev->dead = true;
	kref_init(&dev->ref);
	INIT_LIST_HEAD(&dev->pools);
	INIT_LIST_HEAD(&dev->engines);
	ida_init(&dev->engine_ids);
	dev->root.cg = &gpucg_root;
	dev->root.dev = dev;
	INIT_LIST_HEAD(&dev->root.dev_node);
	xa_init(&dev->root.ents);
	gpucg_mem_init(&dev->root, NULL);

	ret = xa_alloc(&gpucg_devices, &dev->id, dev, xa_limit_31b, GFP_KERNEL);
	if (ret) {
		kfree(dev);
		return ERR_PTR(ret);
	}
	return dev;
}
EXPORT_SYMBOL_GPL(gpucg_register_device);

/**
 * gpucg_publish_device() - show a registered GPU in the interface files
 * @dev: handle from gpucg_register_device(); NULL is ignored
 *
 * Context: process context, may sleep.
 */
void gpucg_publish_device(struct gpucg_device *dev)
{
	if (IS_ERR_OR_NULL(dev))
		return;
	mutex_lock(&gpucg_mutex);
	WRITE_ONCE(dev->dead, false);
	mutex_unlock(&gpucg_mutex);
}
EXPORT_SYMBOL_GPL(gpucg_publish_device);

/**
 * gpucg_unregister_device() - take a GPU from the controller
 * @dev: handle from gpucg_register_device(); NULL is ignored
 *
 * The device disappears from the interface files and takes no new settings
 * or charges. The handle stays valid until gpucg_put_device(), for the
 * device's engines and for uncharging buffers charged to it
 * (gpu.memory.*), which stay charged until they are freed.
 *
 * Context: process context, may sleep.
 */
void gpucg_unregister_device(struct gpucg_device *dev)
{
	if (IS_ERR_OR_NULL(dev))
		return;
	mutex_lock(&gpucg_mutex);
	WRITE_ONCE(dev->dead, true);
	mutex_unlock(&gpucg_mutex);
}
EXPORT_SYMBOL_GPL(gpucg_unregister_device);

/*
 * The pages charged to the root cgroup's own tasks on @dev: the device's
 * total less what its top-level pools hold.
 */
static unsigned long gpucg_root_local_pages(struct gpucg_device *dev)
{
	unsigned long pages = gpucg_mem_pages(&dev->root);
	struct gpucg_pool *pool;

	lockdep_assert_held(&gpucg_mutex);
	list_for_each_entry(pool, &dev->pools, dev_node)
		if (!pool->parent)
			pages -= gpucg_mem_pages(pool);
	return pages;
}

/*
 * Frees @dev's state in every cgroup and drops the driver's reference, once
 * the driver has released the device and its last engine is gone. A pool
 * still charged (a leak) keeps the device until its cgroup is freed; a
 * charge of the root cgroup's own tasks keeps it for good. gpucg_mutex
 * held.
 */
void gpucg_device_release(struct gpucg_device *dev)
{
	struct gpucg_pool *pool, *tmp;

	lockdep_assert_held(&gpucg_mutex);
	/* children were added after their parents: free them first */
	list_for_each_entry_safe_reverse(pool, tmp, &dev->pools, dev_node)
		if (!WARN_ON_ONCE(gpucg_mem_pages(pool)))
			gpucg_pool_free(pool);
	if (!WARN_ON_ONCE(gpucg_root_local_pages(dev)))
		kref_put(&dev->ref, gpucg_device_free);
}

/**
 * gpucg_put_device() - drop the driver's reference to a device
 * @dev: handle from gpucg_register_device(); NULL is ignored
 *
 * Called when the device is released, once no buffer of it is charged any
 * more. Frees its state in every cgroup, so that a driver reload or
 * hot-unplug leaves nothing behind in long-lived cgroups: now, or, if
 * engines of the device are still there (a scheduler per user queue may
 * outlive the device's release), when the last of them is destroyed: an
 * engine keeps its device.
 *
 * Context: process context, may sleep.
 */
void gpucg_put_device(struct gpucg_device *dev)
{
	if (IS_ERR_OR_NULL(dev))
		return;
	mutex_lock(&gpucg_mutex);
	dev->dead = true;
	dev->released = true;
	/* under the mutex: the interface files walk the device table */
	if (list_empty(&dev->engines))
		gpucg_device_release(dev);
	mutex_unlock(&gpucg_mutex);
}
EXPORT_SYMBOL_GPL(gpucg_put_device);

/* Returns the published device of @devt, or NULL. */
struct gpucg_device *gpucg_device_find(dev_t devt)
{
	struct gpucg_device *dev;
	unsigned long id;

	lockdep_assert_held(&gpucg_mutex);
	xa_for_each(&gpucg_devices, id, dev)
		if (dev->devt == devt && !dev->dead)
			return dev;
	return NULL;
}

static struct gpucg_pool *gpucg_pool_create(struct gpucg *cg,
					    struct gpucg_device *dev)
{
	struct gpucg *parent = gpucg_parent(cg);
	struct gpucg_pool *pool, *ppool = NULL;
	int ret;

	if (parent != &gpucg_root)
		ppool = xa_load(&parent->pools, dev->id);

	/* charged to whoever makes it: a client's first use, a write */
	pool = kzalloc_obj(*pool, GFP_KERNEL_ACCOUNT);
	if (!pool)
		return ERR_PTR(-ENOMEM);
	pool->cg = cg;
	pool->dev = dev;
	pool->parent = ppool;
	xa_init(&pool->ents);
	gpucg_mem_init(pool, ppool ?: &dev->root);
	ret = xa_insert(&cg->pools, dev->id, pool, GFP_KERNEL_ACCOUNT);
	if (ret) {
		kfree(pool);
		return ERR_PTR(ret);
	}
	list_add_tail(&pool->dev_node, &dev->pools);
	kref_get(&dev->ref);
	return pool;
}

/*
 * Returns the pool of @cg on @dev. Its page counter hangs from the parent's
 * pool, so missing pools are created top-down from the highest ancestor
 * that lacks one.
 */
struct gpucg_pool *gpucg_pool_get(struct gpucg *cg, struct gpucg_device *dev)
{
	struct gpucg_pool *pool;
	struct gpucg *top, *parent;

	lockdep_assert_held(&gpucg_mutex);
	pool = xa_load(&cg->pools, dev->id);
	while (!pool) {
		top = cg;
		while ((parent = gpucg_parent(top)) != &gpucg_root &&
		       !xa_load(&parent->pools, dev->id))
			top = parent;
		pool = gpucg_pool_create(top, dev);
		if (IS_ERR(pool) || top == cg)
			return pool;
		pool = NULL;
	}
	return pool;
}

static struct cgroup_subsys_state *
gpucg_css_alloc(struct cgroup_subsys_state *parent_css)
{
	struct gpucg *cg;

	if (!parent_css) {
		cg = &gpucg_root;
	} else {
		cg = kzalloc_obj(*cg, GFP_KERNEL);
		if (!cg)
			return ERR_PTR(-ENOMEM);
	}
	cg->weight = CGROUP_WEIGHT_DFL;
	cg->priority = GPUCG_PRIO_UNSET;
	xa_init(&cg->pools);
	return &cg->css;
}

static void gpucg_css_free(struct cgroup_subsys_state *css)
{
	struct gpucg *cg = css_gpucg(css);
	struct gpucg_pool *pool;
	unsigned long id;

	/*
	 * No charge, active queue or ticket is left: each would hold a
	 * reference on @css. The children's pools are gone: their cgroups
	 * pinned @css.
	 */
	mutex_lock(&gpucg_mutex);
	xa_for_each(&cg->pools, id, pool) {
		WARN_ON_ONCE(gpucg_mem_pages(pool));
		gpucg_pool_free(pool);
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

/* "MAJ:MIN" */
int gpucg_parse_devt(char *s, dev_t *devt)
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
int gpucg_split(char *buf, char **words, int max)
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
		if (pool->weight && !pool->dev->dead)
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
	} else if (!gpucg_device_schedules(dev)) {
		ret = -EOPNOTSUPP;	/* no engine: the weight could not act */
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

/* "MAX [PERIOD]" into @cap: MAX "max" or microseconds, PERIOD kept if not given */
static int gpucg_parse_cap(char **words, int n, struct gpucg_cap *cap)
{
	u32 max = 0, period = cap->period_us ?: GPUCG_PERIOD_DFL_US;
	int ret;

	if (n < 1 || n > 2)
		return -EINVAL;
	if (strcmp(words[0], "max")) {
		ret = kstrtou32(words[0], 10, &max);
		if (ret)
			return ret;
		if (max < GPUCG_MAX_MIN_US)
			return -ERANGE;
	}
	if (n == 2) {
		ret = kstrtou32(words[1], 10, &period);
		if (ret)
			return ret;
		if (period < GPUCG_PERIOD_MIN_US || period > GPUCG_PERIOD_MAX_US)
			return -ERANGE;
	}
	/* per engine: more than the period would be no cap */
	if (max > period)
		return -ERANGE;
	cap->max_us = max;
	cap->period_us = period;
	return 0;
}

static void gpucg_show_cap(struct seq_file *sf, struct gpucg_cap cap)
{
	if (cap.max_us)
		seq_printf(sf, " %u", cap.max_us);
	else
		seq_puts(sf, " max");
	seq_printf(sf, " %u\n", cap.period_us ?: GPUCG_PERIOD_DFL_US);
}

static int gpu_max_show(struct seq_file *sf, void *v)
{
	struct gpucg *cg = css_gpucg(seq_css(sf));
	struct gpucg_pool *pool;
	unsigned long id;

	mutex_lock(&gpucg_mutex);
	seq_puts(sf, GPUCG_DEFAULT_STR);
	gpucg_show_cap(sf, cg->cap);
	xa_for_each(&cg->pools, id, pool) {
		if (!pool->cap_set || pool->dev->dead)
			continue;
		seq_printf(sf, "%u:%u", MAJOR(pool->dev->devt), MINOR(pool->dev->devt));
		gpucg_show_cap(sf, pool->cap);
	}
	mutex_unlock(&gpucg_mutex);
	return 0;
}

/*
 * "MAX [PERIOD]", "default MAX [PERIOD]", "MAJ:MIN MAX [PERIOD]" or
 * "MAJ:MIN default" (the device follows the default line again)
 */
static ssize_t gpu_max_write(struct kernfs_open_file *of, char *buf,
			     size_t nbytes, loff_t off)
{
	struct gpucg *cg = css_gpucg(of_css(of));
	struct gpucg_device *dev;
	struct gpucg_pool *pool;
	struct gpucg_cap cap;
	char *words[3];
	bool keyed;
	dev_t devt;
	int n, ret;

	n = gpucg_split(buf, words, 3);
	if (n <= 0)
		return -EINVAL;
	keyed = !strcmp(words[0], GPUCG_DEFAULT_STR) || strchr(words[0], ':');
	if (!keyed || !strcmp(words[0], GPUCG_DEFAULT_STR)) {
		mutex_lock(&gpucg_mutex);
		cap = cg->cap;
		ret = gpucg_parse_cap(words + keyed, n - keyed, &cap);
		if (!ret) {
			WRITE_ONCE(cg->cap.max_us, cap.max_us);
			WRITE_ONCE(cg->cap.period_us, cap.period_us);
		}
		mutex_unlock(&gpucg_mutex);
		if (!ret)
			gpucg_sched_recap(cg);
		return ret ?: nbytes;
	}

	ret = gpucg_parse_devt(words[0], &devt);
	if (ret)
		return ret;
	mutex_lock(&gpucg_mutex);
	dev = gpucg_device_find(devt);
	pool = dev ? xa_load(&cg->pools, dev->id) : NULL;
	cap = pool && pool->cap_set ? pool->cap : cg->cap;
	if (!dev) {
		ret = -EINVAL;
	} else if (n == 2 && !strcmp(words[1], GPUCG_DEFAULT_STR)) {
		if (pool)
			WRITE_ONCE(pool->cap_set, false);
	} else {
		ret = gpucg_parse_cap(words + 1, n - 1, &cap);
		/* no engine of it can hold work back */
		if (!ret && !gpucg_device_caps(dev))
			ret = -EOPNOTSUPP;
		pool = ret ? NULL : gpucg_pool_get(cg, dev);
		if (IS_ERR(pool)) {
			ret = PTR_ERR(pool);
		} else if (pool) {
			WRITE_ONCE(pool->cap.max_us, cap.max_us);
			WRITE_ONCE(pool->cap.period_us, cap.period_us);
			/* the values before the flag (gpucg_cap_of()) */
			smp_store_release(&pool->cap_set, true);
		}
	}
	mutex_unlock(&gpucg_mutex);
	if (!ret)
		gpucg_sched_recap(cg);
	return ret ?: nbytes;
}

static int gpu_priority_show(struct seq_file *sf, void *v)
{
	int prio = READ_ONCE(css_gpucg(seq_css(sf))->priority);

	if (prio == GPUCG_PRIO_UNSET)
		seq_puts(sf, GPUCG_DEFAULT_STR "\n");
	else
		seq_printf(sf, "%d\n", prio);
	return 0;
}

/* "N" in [GPUCG_PRIO_MIN, GPUCG_PRIO_MAX], or "default" to unset it */
static ssize_t gpu_priority_write(struct kernfs_open_file *of, char *buf,
				  size_t nbytes, loff_t off)
{
	struct gpucg *cg = css_gpucg(of_css(of));
	int prio, ret;

	buf = strstrip(buf);
	if (!strcmp(buf, GPUCG_DEFAULT_STR)) {
		prio = GPUCG_PRIO_UNSET;
	} else {
		ret = kstrtoint(buf, 10, &prio);
		if (ret)
			return ret;
		if (prio < GPUCG_PRIO_MIN || prio > GPUCG_PRIO_MAX)
			return -ERANGE;
	}
	WRITE_ONCE(cg->priority, prio);
	gpucg_sched_rekey(cg);
	return nbytes;
}

static int gpu_priority_effective_show(struct seq_file *sf, void *v)
{
	seq_printf(sf, "%d\n", gpucg_priority_effective(css_gpucg(seq_css(sf))));
	return 0;
}

/**
 * gpucg_devices_show() - one line per published device
 * @sf: the file
 * @show: prints the rest of a device's line, after "MAJ:MIN ", for the
 *	  device, the cgroup's pool on it (the device's root pool on the root
 *	  cgroup, NULL if the cgroup has never used it), and the file's cftype
 *	  private value
 *
 * Context: process context; takes gpucg_mutex.
 * Return: 0.
 */
int gpucg_devices_show(struct seq_file *sf,
		       void (*show)(struct seq_file *sf, struct gpucg_device *dev,
				    struct gpucg_pool *pool, unsigned long file))
{
	struct gpucg *cg = css_gpucg(seq_css(sf));
	struct gpucg_device *dev;
	unsigned long id;

	mutex_lock(&gpucg_mutex);
	xa_for_each(&gpucg_devices, id, dev) {
		if (dev->dead)
			continue;
		seq_printf(sf, "%u:%u ", MAJOR(dev->devt), MINOR(dev->devt));
		show(sf, dev, cg == &gpucg_root ? &dev->root : xa_load(&cg->pools, id),
		     seq_cft(sf)->private);
	}
	mutex_unlock(&gpucg_mutex);
	return 0;
}

static void gpu_stat_show_pool(struct seq_file *sf, struct gpucg_device *dev,
			       struct gpucg_pool *pool, unsigned long file)
{
	u64 usage = pool ? atomic64_read(&pool->usage_ns) : 0;
	u64 wait = pool ? atomic64_read(&pool->wait_ns) : 0;
	u64 periods = pool ? atomic64_read(&pool->nr_periods) : 0;
	u64 throttled = pool ? atomic64_read(&pool->nr_throttled) : 0;
	u64 throttled_ns = pool ? atomic64_read(&pool->throttled_ns) : 0;

	seq_printf(sf, "usage_usec=%llu wait_usec=%llu sched=%d nr_periods=%llu nr_throttled=%llu throttled_usec=%llu\n",
		   div_u64(usage, NSEC_PER_USEC), div_u64(wait, NSEC_PER_USEC),
		   gpucg_device_schedules(dev), periods, throttled,
		   div_u64(throttled_ns, NSEC_PER_USEC));
}

static int gpu_stat_show(struct seq_file *sf, void *v)
{
	return gpucg_devices_show(sf, gpu_stat_show_pool);
}

static struct cftype gpucg_files[] = {
	{
		.name = "weight",
		.flags = CFTYPE_NOT_ON_ROOT,
		.seq_show = gpu_weight_show,
		.write = gpu_weight_write,
	},
	{
		.name = "max",
		.flags = CFTYPE_NOT_ON_ROOT,
		.seq_show = gpu_max_show,
		.write = gpu_max_write,
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
	{
		.name = "stat",
		.seq_show = gpu_stat_show,
	},
	{ }	/* terminate */
};

struct cgroup_subsys gpu_cgrp_subsys = {
	.css_alloc = gpucg_css_alloc,
	.css_free = gpucg_css_free,
	.dfl_cftypes = gpucg_files,
};
