/* SPDX-License-Identifier: MIT */
/*
 * xe and the gpu cgroup controller: see xe_gpucg.c.
 */
#ifndef _XE_GPUCG_H_
#define _XE_GPUCG_H_

#include <linux/types.h>

#include "xe_exec_queue_types.h"

struct xe_device;
struct xe_file;

/* How often, at most, GuC follows the shares and priorities (xe_gpucg.c) */
#define XE_GPUCG_PERIOD_MS	100

int xe_gpucg_init(struct xe_device *xe);

int xe_gpucg_queue_init(struct xe_exec_queue *q, struct xe_file *xef);
void xe_gpucg_queue_fini(struct xe_exec_queue *q);
void xe_gpucg_queue_submit(struct xe_exec_queue *q);
void xe_gpucg_queue_charge(struct xe_exec_queue *q, u64 ticks);

enum xe_exec_queue_priority
xe_gpucg_priority(int cgroup, enum xe_exec_queue_priority own);
u32 xe_gpucg_timeslice_us(u32 share, unsigned int sharing, u32 timeslice_us);

#endif /* _XE_GPUCG_H_ */
