// SPDX-License-Identifier: GPL-2.0
/*
 * GPU controller for cgroup v2: GPU buffer memory, for kernels without the
 * dmem controller (CONFIG_CGROUP_GPU_MEMORY). Where dmem exists, the DRM
 * core charges buffers to dmem regions instead and this file is not built:
 * one kernel has one device-memory controller.
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
 * Locking: as in gpu.c. Charges are lockless (page_counter); a pool's
 * limit is written under gpucg_mutex.
 */

#include <linux/cgroup.h>
#include <linux/cgroup_gpu.h>
#include <linux/init.h>
#include <linux/kernel.h>
#include <linux/overflow.h>
#include <linux/page_counter.h>
#include <linux/sched.h>
#include <linux/seq_file.h>
#include <linux/string.h>

#include "gpu.h"

enum gpucg_mem_file {
	GPUCG_MEM_MAX,
	GPUCG_MEM_CURRENT,
	GPUCG_MEM_PEAK,
	GPUCG_MEM_EVENTS,
	GPUCG_MEM_EVENTS_LOCAL,
};

/*
 * Sets up the memory state of a new pool: no limit, its page counter
 * hanging from @parent's (NULL for a device's root pool).
 */
void gpucg_mem_init(struct gpucg_pool *pool, struct gpucg_pool *parent)
{
	pool->mem_max = U64_MAX;
	page_counter_init(&pool->mem, parent ? &parent->mem : NULL, false);
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

static void gpu_memory_show_pool(struct seq_file *sf, struct gpucg_device *dev,
				 struct gpucg_pool *pool, unsigned long file)
{
	u64 val;

	switch (file) {
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

/*
 * One line per registered device, whether or not the cgroup has used it;
 * the device's totals on the root cgroup.
 */
static int gpu_memory_show(struct seq_file *sf, void *v)
{
	return gpucg_devices_show(sf, gpu_memory_show_pool);
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

static struct cftype gpucg_mem_files[] = {
	{
		.name = "memory.max",
		.flags = CFTYPE_NOT_ON_ROOT,
		.seq_show = gpu_memory_show,
		.write = gpu_memory_max_write,
		.private = GPUCG_MEM_MAX,
	},
	{
		.name = "memory.current",
		.seq_show = gpu_memory_show,
		.private = GPUCG_MEM_CURRENT,
	},
	{
		.name = "memory.peak",
		.flags = CFTYPE_NOT_ON_ROOT,
		.seq_show = gpu_memory_show,
		.private = GPUCG_MEM_PEAK,
	},
	{
		.name = "memory.events",
		.flags = CFTYPE_NOT_ON_ROOT,
		.seq_show = gpu_memory_show,
		.file_offset = offsetof(struct gpucg, events_file),
		.private = GPUCG_MEM_EVENTS,
	},
	{
		.name = "memory.events.local",
		.flags = CFTYPE_NOT_ON_ROOT,
		.seq_show = gpu_memory_show,
		.file_offset = offsetof(struct gpucg, events_local_file),
		.private = GPUCG_MEM_EVENTS_LOCAL,
	},
	{ }	/* terminate */
};

/* As memcg adds its swap files: the interface files of the memory part. */
static int __init gpucg_mem_files_init(void)
{
	WARN_ON(cgroup_add_dfl_cftypes(&gpu_cgrp_subsys, gpucg_mem_files));
	return 0;
}
subsys_initcall(gpucg_mem_files_init);
