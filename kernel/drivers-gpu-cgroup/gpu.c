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
 * gpu.memory.max limits the GPU buffer memory charged to a cgroup and its
 * descendants on one device (the "limits" model): a buffer is charged, when
 * userspace first gets a handle to it, to the cgroup of the task doing so,
 * and stays charged there until it is freed; the buffer pins its cgroup, so
 * a removed cgroup lingers until its buffers are gone. Buffers of kernel
 * threads are not charged, nor are buffers imported from another device
 * (their exporter pays). The root cgroup has no limit; its
 * gpu.memory.current is the total charged on the device, its own tasks'
 * buffers included, as misc.current is. An allocation that would take any
 * cgroup on the path over its limit fails with -ENOMEM. As memory.events
 * does, it counts in gpu.memory.events.local of the cgroup whose limit was
 * hit and in gpu.memory.events of that cgroup and every ancestor, so a
 * monitor of a parent sees the limit hits of its descendants. Lowering a
 * limit below the usage succeeds and only stops further growth.
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
 * Charges are lockless (page_counter); scalar knobs are written with
 * WRITE_ONCE() and read with READ_ONCE().
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
#include <linux/page_counter.h>
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

/* Returns the effective priority of @cg: the minimum along its path. */
int gpucg_priority_effective(struct gpucg *cg)
{
	int prio = GPUCG_PRIO_MAX;

	for (; cg && cg != &gpucg_root; cg = gpucg_parent(cg))
		prio = min(prio, READ_ONCE(cg->priority));
	return prio;
}

/* Called with gpucg_mutex held, by the last kref_put(). */
static void gpucg_device_free(struct kref *ref)
{
	struct gpucg_device *dev = container_of(ref, struct gpucg_device, ref);

	lockdep_assert_held(&gpucg_mutex);

	WARN_ON_ONCE(!list_empty(&dev->engines) || !list_empty(&dev->pools));
	WARN_ON_ONCE(page_counter_read(&dev->root.mem));
	xa_erase(&gpucg_devices, dev->id);
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

	dev = kzalloc_obj(*dev);
	if (!dev)
		return ERR_PTR(-ENOMEM);
	dev->devt = devt;
	dev->dead = true;
	kref_init(&dev->ref);
	INIT_LIST_HEAD(&dev->pools);
	INIT_LIST_HEAD(&dev->engines);
	dev->root.cg = &gpucg_root;
	dev->root.dev = dev;
	dev->root.mem_max = U64_MAX;
	INIT_LIST_HEAD(&dev->root.dev_node);
	xa_init(&dev->root.ents);
	page_counter_init(&dev->root.mem, NULL, false);

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
 * or charges. Buffers charged to it stay charged until they are freed: the
 * handle stays valid for gpucg_uncharge_mem() until gpucg_put_device().
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
	unsigned long pages = page_counter_read(&dev->root.mem);
	struct gpucg_pool *pool;

	lockdep_assert_held(&gpucg_mutex);
	list_for_each_entry(pool, &dev->pools, dev_node)
		if (!pool->parent)
			pages -= page_counter_read(&pool->mem);
	return pages;
}

/**
 * gpucg_put_device() - drop the driver's reference to a device
 * @dev: handle from gpucg_register_device(); NULL is ignored
 *
 * Called when the device is released: its engines are destroyed and no
 * buffer of it is charged any more. Frees its state in every cgroup, so
 * that a driver reload or hot-unplug leaves nothing behind in long-lived
 * cgroups. A pool still charged (a leak) keeps the device until its
 * cgroup is freed; a charge of the root cgroup's own tasks keeps it for
 * good.
 *
 * Context: process context, may sleep.
 */
void gpucg_put_device(struct gpucg_device *dev)
{
	struct gpucg_pool *pool, *tmp;

	if (IS_ERR_OR_NULL(dev))
		return;
	mutex_lock(&gpucg_mutex);
	WARN_ON_ONCE(!list_empty(&dev->engines));
	dev->dead = true;
	/* children were added after their parents: free them first */
	list_for_each_entry_safe_reverse(pool, tmp, &dev->pools, dev_node)
		if (!WARN_ON_ONCE(page_counter_read(&pool->mem)))
			gpucg_pool_free(pool);
	/* under the mutex: the interface files walk the device table */
	if (!WARN_ON_ONCE(gpucg_root_local_pages(dev)))
		kref_put(&dev->ref, gpucg_device_free);
	mutex_unlock(&gpucg_mutex);
}
EXPORT_SYMBOL_GPL(gpucg_put_device);

static struct gpucg_device *gpucg_device_find(dev_t devt)
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

	pool = kzalloc_obj(*pool);
	if (!pool)
		return ERR_PTR(-ENOMEM);
	pool->cg = cg;
	pool->dev = dev;
	pool->parent = ppool;
	pool->mem_max = U64_MAX;
	xa_init(&pool->ents);
	page_counter_init(&pool->mem, ppool ? &ppool->mem : &dev->root.mem,
			  false);
	ret = xa_insert(&cg->pools, dev->id, pool, GFP_KERNEL);
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

/* A refusal by @limit's limit: counted there, and up to the top. */
static void gpucg_mem_event(struct gpucg_pool *limit)
{
	struct gpucg_pool *pool;

	atomic64_inc(&limit->events_local);
	cgroup_file_notify(&limit->cg->events_local_file);
	for (pool = limit; pool; pool = pool->parent) {
		atomic64_inc(&pool->events);
		cgroup_file_notify(&pool->cg->events_file);
	}
}

/**
 * gpucg_try_charge_mem() - charge a buffer to the current task's cgroup
 * @dev: the device the buffer belongs to; NULL charges nothing
 * @size: the buffer's size in bytes
 * @poolp: where to store what gpucg_uncharge_mem() needs, NULL if nothing
 *	   was charged
 *
 * The charge pins the cgroup until it is uncharged.
 *
 * Context: process context, may sleep.
 * Return: 0, or -ENOMEM if a limit on the path does not allow it.
 */
int gpucg_try_charge_mem(struct gpucg_device *dev, u64 size,
			 struct gpucg_pool **poolp)
{
	unsigned long nr_pages = DIV_ROUND_UP_ULL(size, PAGE_SIZE);
	struct cgroup_subsys_state *css;
	struct page_counter *fail;
	struct gpucg_pool *pool;
	struct gpucg *cg;

	*poolp = NULL;
	if (!dev || READ_ONCE(dev->dead) || (current->flags & PF_KTHREAD))
		return 0;

	css = task_get_css(current, gpu_cgrp_id);
	cg = css_gpucg(css);
	pool = cg == &gpucg_root ? &dev->root : xa_load(&cg->pools, dev->id);
	if (!pool) {
		mutex_lock(&gpucg_mutex);
		pool = gpucg_pool_get(cg, dev);
		mutex_unlock(&gpucg_mutex);
		if (IS_ERR(pool)) {
			css_put(css);
			return PTR_ERR(pool);
		}
	}

	if (!page_counter_try_charge(&pool->mem, nr_pages, &fail)) {
		gpucg_mem_event(container_of(fail, struct gpucg_pool, mem));
		css_put(css);
		return -ENOMEM;
	}
	*poolp = pool;
	return 0;
}
EXPORT_SYMBOL_GPL(gpucg_try_charge_mem);

/**
 * gpucg_uncharge_mem() - undo gpucg_try_charge_mem()
 * @pool: what gpucg_try_charge_mem() stored; NULL is ignored
 * @size: the size that was charged
 *
 * Context: any context.
 */
void gpucg_uncharge_mem(struct gpucg_pool *pool, u64 size)
{
	if (!pool)
		return;
	page_counter_uncharge(&pool->mem, DIV_ROUND_UP_ULL(size, PAGE_SIZE));
	css_put(&pool->cg->css);
}
EXPORT_SYMBOL_GPL(gpucg_uncharge_mem);

static struct cgroup_subsys_state *
gpucg_css_alloc(struct cgroup_subsys_state *parent_css)
{
	struct gpucg *cg;

	if (!parent_css) {
		cg = &gpucg_root;
	} else {
		cg = kzalloc_obj(*cg);
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

	/*
	 * No charge, active queue or ticket is left: each would hold a
	 * reference on @css. The children's pools are gone: their cgroups
	 * pinned @css.
	 */
	mutex_lock(&gpucg_mutex);
	xa_for_each(&cg->pools, id, pool) {
		WARN_ON_ONCE(page_counter_read(&pool->mem));
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
	gpucg_sched_rekey(cg);
	return nbytes;
}

static int gpu_priority_effective_show(struct seq_file *sf, void *v)
{
	seq_printf(sf, "%d\n", gpucg_priority_effective(css_gpucg(seq_css(sf))));
	return 0;
}

/* "4096", "512K", "2G" or "max" (U64_MAX) */
static int gpucg_parse_bytes(char *s, u64 *bytes)
{
	size_t len = strlen(s);
	unsigned int shift = 0;
	u64 v;
	int ret;

	if (!strcmp(s, "max")) {
		*bytes = U64_MAX;
		return 0;
	}
	if (len) {
		switch (s[len - 1]) {
		case 'K': case 'k':
			shift = 10;
			break;
		case 'M': case 'm':
			shift = 20;
			break;
		case 'G': case 'g':
			shift = 30;
			break;
		case 'T': case 't':
			shift = 40;
			break;
		}
		if (shift)
			s[len - 1] = '\0';
	}
	ret = kstrtou64(s, 10, &v);
	if (ret)
		return ret;
	if (check_shl_overflow(v, shift, &v) || v == U64_MAX)
		return -ERANGE;
	*bytes = v;
	return 0;
}

enum gpucg_device_file {
	GPUCG_STAT,
	GPUCG_MEM_MAX,
	GPUCG_MEM_CURRENT,
	GPUCG_MEM_PEAK,
	GPUCG_MEM_EVENTS,
	GPUCG_MEM_EVENTS_LOCAL,
};

/*
 * One line per registered device, whether or not @cg has used it; the
 * device's totals on the root cgroup.
 */
static int gpu_device_show(struct seq_file *sf, void *v)
{
	struct gpucg *cg = css_gpucg(seq_css(sf));
	enum gpucg_device_file file = seq_cft(sf)->private;
	struct gpucg_device *dev;
	struct gpucg_pool *pool;
	unsigned long id;
	u64 val;

	mutex_lock(&gpucg_mutex);
	xa_for_each(&gpucg_devices, id, dev) {
		if (dev->dead)
			continue;
		pool = cg == &gpucg_root ? &dev->root : xa_load(&cg->pools, id);
		seq_printf(sf, "%u:%u ", MAJOR(dev->devt), MINOR(dev->devt));
		switch (file) {
		case GPUCG_STAT:
			val = pool ? atomic64_read(&pool->usage_ns) : 0;
			seq_printf(sf, "usage_usec=%llu ",
				   div_u64(val, NSEC_PER_USEC));
			val = pool ? atomic64_read(&pool->wait_ns) : 0;
			seq_printf(sf, "wait_usec=%llu ",
				   div_u64(val, NSEC_PER_USEC));
			seq_printf(sf, "sched=%d\n", gpucg_device_schedules(dev));
			break;
		case GPUCG_MEM_MAX:
			val = pool ? pool->mem_max : U64_MAX;
			if (val == U64_MAX)
				seq_puts(sf, "max\n");
			else
				seq_printf(sf, "%llu\n", val);
			break;
		case GPUCG_MEM_CURRENT:
			val = pool ? page_counter_read(&pool->mem) : 0;
			seq_printf(sf, "%llu\n", val * PAGE_SIZE);
			break;
		case GPUCG_MEM_PEAK:
			val = pool ? READ_ONCE(pool->mem.watermark) : 0;
			seq_printf(sf, "%llu\n", val * PAGE_SIZE);
			break;
		case GPUCG_MEM_EVENTS:
			val = pool ? atomic64_read(&pool->events) : 0;
			seq_printf(sf, "max=%llu\n", val);
			break;
		case GPUCG_MEM_EVENTS_LOCAL:
			val = pool ? atomic64_read(&pool->events_local) : 0;
			seq_printf(sf, "max=%llu\n", val);
			break;
		}
	}
	mutex_unlock(&gpucg_mutex);
	return 0;
}

/* "MAJ:MIN BYTES" or "MAJ:MIN max" */
static ssize_t gpu_memory_max_write(struct kernfs_open_file *of, char *buf,
				    size_t nbytes, loff_t off)
{
	struct gpucg *cg = css_gpucg(of_css(of));
	struct gpucg_device *dev;
	struct gpucg_pool *pool;
	unsigned long pages;
	char *words[2];
	dev_t devt;
	u64 bytes;
	int ret;

	if (gpucg_split(buf, words, 2) != 2)
		return -EINVAL;
	ret = gpucg_parse_devt(words[0], &devt);
	if (ret)
		return ret;
	ret = gpucg_parse_bytes(words[1], &bytes);
	if (ret)
		return ret;
	pages = min_t(u64, bytes >> PAGE_SHIFT, PAGE_COUNTER_MAX);

	mutex_lock(&gpucg_mutex);
	dev = gpucg_device_find(devt);
	pool = dev ? gpucg_pool_get(cg, dev) : ERR_PTR(-EINVAL);
	if (IS_ERR(pool)) {
		ret = PTR_ERR(pool);
	} else {
		pool->mem_max = bytes;
		/*
		 * Not page_counter_set_max(): a limit below the usage is
		 * taken and stops further charges.
		 */
		WRITE_ONCE(pool->mem.max, pages);
	}
	mutex_unlock(&gpucg_mutex);
	return ret ?: nbytes;
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
	{
		.name = "stat",
		.seq_show = gpu_device_show,
		.private = GPUCG_STAT,
	},
	{
		.name = "memory.max",
		.flags = CFTYPE_NOT_ON_ROOT,
		.seq_show = gpu_device_show,
		.write = gpu_memory_max_write,
		.private = GPUCG_MEM_MAX,
	},
	{
		.name = "memory.current",
		.seq_show = gpu_device_show,
		.private = GPUCG_MEM_CURRENT,
	},
	{
		.name = "memory.peak",
		.flags = CFTYPE_NOT_ON_ROOT,
		.seq_show = gpu_device_show,
		.private = GPUCG_MEM_PEAK,
	},
	{
		.name = "memory.events",
		.flags = CFTYPE_NOT_ON_ROOT,
		.seq_show = gpu_device_show,
		.file_offset = offsetof(struct gpucg, events_file),
		.private = GPUCG_MEM_EVENTS,
	},
	{
		.name = "memory.events.local",
		.flags = CFTYPE_NOT_ON_ROOT,
		.seq_show = gpu_device_show,
		.file_offset = offsetof(struct gpucg, events_local_file),
		.private = GPUCG_MEM_EVENTS_LOCAL,
	},
	{ }	/* terminate */
};

struct cgroup_subsys gpu_cgrp_subsys = {
	.css_alloc = gpucg_css_alloc,
	.css_free = gpucg_css_free,
	.dfl_cftypes = gpucg_files,
};
