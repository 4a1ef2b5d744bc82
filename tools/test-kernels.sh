#!/usr/bin/env bash
# make test: lint and the host tier, then the kernel tiers of 6.12 and of
# 7.3 (make test-base on each), and the virtual-time tier (make test-sim:
# KUnit on UML, 7.3's tree) before 7.3's.
#
# 7.3's kernel is built, and its drivers' compile test run (so that
# test-base's is incremental), then the virtual-time tier's UML kernel, in
# the background from the start, at the lowest
# priority there is (SCHED_IDLE in an autogroup at nice 19, idle I/O
# class): it takes only CPU time
# nothing else wants (the host tier and the builds' serial steps leave a
# core idle, and the VM runs under TCG about half a core on average, as
# the guest waits on its simulated GPU's timers), though it still shares
# memory, caches and the disk with the rest. From scratch that takes most
# of its build off the critical path. It runs in a process group of its
# own, stopped with everything in it if this script stops early; a failed
# build fails the run once 6.12's tiers are done, and both failures are
# said.
set -euo pipefail
. "$(dirname "$0")/common.sh"
MAKE=${MAKE:-make}

"$MAKE" --no-print-directory setup

log=$CACHE/7.3/background-build.log
mkdir -p "$CACHE/7.3"
say "building 7.3's kernel in the background (log: $log)"
# setsid gives the build a session, and with it an autogroup of its own
# where the kernel groups tasks by session (sched_autogroup_enabled): that
# group would get as much CPU as the rest of make test whatever the policy
# of its tasks, so its nice goes to 19 before the build starts.
PYCGPU_BASE=7.3 setsid bash -c '
	[ -w /proc/self/autogroup ] && echo 19 >/proc/self/autogroup
	exec chrt --idle 0 ionice -c 3 bash -c "tools/kernel.sh all && tools/check-drivers.sh && tools/sim.sh build 7.3"' >"$log" 2>&1 &
build=$!
stop_build() { kill -TERM -- "-$build" 2>/dev/null || true; wait "$build" 2>/dev/null || true; }
trap stop_build EXIT

"$MAKE" --no-print-directory lint test-host
"$MAKE" --no-print-directory PYCGPU_BASE=6.12 kernel
status=0
"$MAKE" --no-print-directory PYCGPU_BASE=6.12 test-base || status=$?
[ "$status" -eq 0 ] || say "6.12's tiers failed (exit $status); 7.3's kernel build goes on, to be said too"
say "waiting for 7.3's kernel build"
built=0
wait "$build" || built=$?
trap - EXIT
if [ "$built" -ne 0 ]; then
	tail -n 20 "$log" >&2
	say "7.3's kernel build failed (exit $built; log: $log)"
fi
[ "$status" -eq 0 ] || die "6.12's tiers failed (exit $status)"
[ "$built" -eq 0 ] || exit "$built"
"$MAKE" --no-print-directory test-sim
"$MAKE" --no-print-directory PYCGPU_BASE=7.3 test-base
