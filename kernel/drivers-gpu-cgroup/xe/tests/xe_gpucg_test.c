// SPDX-License-Identifier: GPL-2.0 AND MIT
/*
 * KUnit tests of how xe maps the gpu cgroup controller onto GuC: a cgroup's
 * priority to a band, a queue's share to its timeslice (xe_gpucg.c).
 */

#include <kunit/test.h>

#include "xe_gpucg.h"
#include "xe_hw_engine.h"

#define XE_GPUCG_EQUAL(n)	((1U << 16) / (n))

static void gpucg_priority_cgroup_at_zero(struct kunit *test)
{
	enum xe_exec_queue_priority p;

	/* a cgroup at 0 changes nothing */
	for (p = XE_EXEC_QUEUE_PRIORITY_LOW; p < XE_EXEC_QUEUE_PRIORITY_COUNT; p++)
		KUNIT_EXPECT_EQ(test, xe_gpucg_priority(0, p), p);
}

static void gpucg_priority_cgroup_is_major(struct kunit *test)
{
	static const int cgroups[] = { 1, 50, 10000 };
	enum xe_exec_queue_priority p;
	unsigned int i;

	for (i = 0; i < ARRAY_SIZE(cgroups); i++) {
		for (p = XE_EXEC_QUEUE_PRIORITY_LOW; p <= XE_EXEC_QUEUE_PRIORITY_HIGH; p++) {
			/* above 0: the high band whatever the queue asked */
			KUNIT_EXPECT_EQ(test, xe_gpucg_priority(cgroups[i], p),
					XE_EXEC_QUEUE_PRIORITY_HIGH);
			/* below 0: the low band, even for a queue that asked high */
			KUNIT_EXPECT_EQ(test, xe_gpucg_priority(-cgroups[i], p),
					XE_EXEC_QUEUE_PRIORITY_LOW);
		}
	}
}

static void gpucg_priority_kernel_untouched(struct kunit *test)
{
	KUNIT_EXPECT_EQ(test, xe_gpucg_priority(-10000, XE_EXEC_QUEUE_PRIORITY_KERNEL),
			XE_EXEC_QUEUE_PRIORITY_KERNEL);
	KUNIT_EXPECT_EQ(test, xe_gpucg_priority(10000, XE_EXEC_QUEUE_PRIORITY_KERNEL),
			XE_EXEC_QUEUE_PRIORITY_KERNEL);
}

static void gpucg_timeslice_equal_shares(struct kunit *test)
{
	unsigned int n;

	/* equal weights keep the queue's timeslice (shares lose up to n / 65536) */
	for (n = 1; n <= 8; n++)
		KUNIT_EXPECT_EQ(test, xe_gpucg_timeslice_us(XE_GPUCG_EQUAL(n), n, 5000),
				5000);
	for (n = 9; n <= 64; n++)
		KUNIT_EXPECT_LE(test, 5000 - xe_gpucg_timeslice_us(XE_GPUCG_EQUAL(n), n, 5000),
				5);
}

static void gpucg_timeslice_follows_share(struct kunit *test)
{
	/* 3:1 between two queues: 1.5 and 0.5 times the equal split */
	KUNIT_EXPECT_EQ(test, xe_gpucg_timeslice_us(3 << 14, 2, 1000), 1500);
	KUNIT_EXPECT_EQ(test, xe_gpucg_timeslice_us(1 << 14, 2, 1000), 500);
	/* 9:1 is within the clamp on one side only */
	KUNIT_EXPECT_EQ(test, xe_gpucg_timeslice_us(58982, 2, 1000), 1800);
	KUNIT_EXPECT_EQ(test, xe_gpucg_timeslice_us(6554, 2, 1000), 250);
}

static void gpucg_timeslice_clamps(struct kunit *test)
{
	/* a quarter to four times the base: 16:1 at most */
	KUNIT_EXPECT_EQ(test, xe_gpucg_timeslice_us(1, 2, 1000), 250);
	KUNIT_EXPECT_EQ(test, xe_gpucg_timeslice_us(1 << 16, 16, 1000), 4000);
	/* a quarter of 1 us is still 1 us */
	KUNIT_EXPECT_EQ(test, xe_gpucg_timeslice_us(1, 64, 1), 1);
	/* four times the base stops at the most GuC takes */
	KUNIT_EXPECT_EQ(test, xe_gpucg_timeslice_us(1 << 16, 64, 5 * 1000 * 1000),
			XE_HW_ENGINE_TIMESLICE_MAX);
}

static void gpucg_timeslice_no_share(struct kunit *test)
{
	/* no share, or no one sharing: the queue's own timeslice */
	KUNIT_EXPECT_EQ(test, xe_gpucg_timeslice_us(0, 4, 2000), 2000);
	KUNIT_EXPECT_EQ(test, xe_gpucg_timeslice_us(1 << 15, 0, 2000), 2000);
	/* busy below a busy higher priority (share 1): a quarter of it */
	KUNIT_EXPECT_EQ(test, xe_gpucg_timeslice_us(1, 1, 2000), 500);
	/* timeslicing off stays off */
	KUNIT_EXPECT_EQ(test, xe_gpucg_timeslice_us(1 << 15, 2, 0), 0);
}

static struct kunit_case xe_gpucg_tests[] = {
	KUNIT_CASE(gpucg_priority_cgroup_at_zero),
	KUNIT_CASE(gpucg_priority_cgroup_is_major),
	KUNIT_CASE(gpucg_priority_kernel_untouched),
	KUNIT_CASE(gpucg_timeslice_equal_shares),
	KUNIT_CASE(gpucg_timeslice_follows_share),
	KUNIT_CASE(gpucg_timeslice_clamps),
	KUNIT_CASE(gpucg_timeslice_no_share),
	{}
};

static struct kunit_suite xe_gpucg_suite = {
	.name = "xe_gpucg",
	.test_cases = xe_gpucg_tests,
};

kunit_test_suite(xe_gpucg_suite);
