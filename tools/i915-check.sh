#!/usr/bin/env bash
# Checks the gpu cgroup controller on a real Intel GPU: run as root on a
# machine booted with a kernel that carries the series (see
# kernel/drivers-gpu-cgroup/README). Nothing here runs in the VM.
#
#   tools/i915-check.sh [weights|priority] [SECONDS]
#       Two copies of a GPU load, each in its own cgroup, for SECONDS
#       (default 20): weights puts them at gpu.weight 300 and 100 (want
#       3:1), priority at gpu.priority 5 and 0 (want nearly all to the
#       first). Prints each cgroup's gpu.stat usage, the same clients'
#       fdinfo engine time, and the ratio achieved (tools/drm-check.sh).
#   tools/i915-check.sh selftests
#       Reloads i915 with the series' live selftests (i915_gpucg group):
#       the display goes away while it runs.
#
# The load is $LOAD, run through sh -c (default: glmark2-es2-drm off
# screen, Debian package glmark2-es2-drm); it must keep the GPU busy.
set -euo pipefail
# shellcheck source=tools/drm-check.sh
. "$(dirname "$0")/drm-check.sh"
DRIVER=i915
TOP=pycgpu-i915-check

run_selftests() {
	local param result
	param=$(modinfo -p i915 | sed -n 's/^\(igt__[0-9]*__live_gpucg\):.*/\1/p')
	[ -n "$param" ] || die "this i915 has no live gpucg selftests (CONFIG_DRM_I915_SELFTEST=y and the series)"
	MODE=priority
	setup
	mkdir "$CG_ROOT/$TOP/lo" "$CG_ROOT/$TOP/hi" "$CG_ROOT/$TOP/w1" "$CG_ROOT/$TOP/w3"
	echo -5 >"$CG_ROOT/$TOP/lo/gpu.priority"
	echo 5 >"$CG_ROOT/$TOP/hi/gpu.priority"
	echo 100 >"$CG_ROOT/$TOP/w1/gpu.weight"
	echo 300 >"$CG_ROOT/$TOP/w3/gpu.weight"
	modprobe -r i915 || die "i915 is in use: stop the display manager first"
	modprobe i915 live_selftests=-1 "st_gpucg=/$TOP" "$param=1"
	result=$(cat /sys/module/i915/parameters/live_selftests)
	cleanup
	dmesg | grep -E 'i915_gpucg|i915: Running i915_gpucg|failed with error' | tail -n 20
	# -ENOTTY: every selected test passed
	[ "$result" = -25 ] || die "live selftests failed: $result"
	echo "live gpucg selftests passed; reload i915 (modprobe -r i915 && modprobe i915) to get the display back"
}

case ${1:-weights} in
	weights | priority) main i915 "$@" ;;
	selftests) check_host; run_selftests ;;
	*) sed -n '2,/^set/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//'; exit 2 ;;
esac
