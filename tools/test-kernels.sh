#!/usr/bin/env bash
# make test's kernel tiers: 6.12's, then 7.3's (make test-base on each).
#
# The VM runs under TCG leave about half a core idle on average (the guest
# waits on its simulated GPU's timers), so 7.3's kernel is built meanwhile,
# at the lowest CPU priority (SCHED_IDLE: it runs only on a core nothing
# else wants, so the VM's timing is left alone); from scratch that takes
# its build mostly off the critical path. Its log is in the cache; a failed
# build fails the run once 6.12's tiers are done.
set -euo pipefail
. "$(dirname "$0")/common.sh"

make --no-print-directory PYCGPU_BASE=6.12 kernel

log=$CACHE/7.3-background-build.log
mkdir -p "$CACHE"
say "building 7.3's kernel in the background while 6.12's tiers run (log: $log)"
PYCGPU_BASE=7.3 chrt --idle 0 tools/kernel.sh all >"$log" 2>&1 &
build=$!
trap 'kill "$build" 2>/dev/null || true' EXIT

status=0
make --no-print-directory PYCGPU_BASE=6.12 test-base || status=$?
say "waiting for 7.3's kernel build"
if ! wait "$build"; then
	trap - EXIT
	tail -n 20 "$log" >&2
	die "7.3's kernel build failed (log: $log)"
fi
trap - EXIT
[ "$status" -eq 0 ] || exit "$status"
make --no-print-directory PYCGPU_BASE=7.3 test-base
