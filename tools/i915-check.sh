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
#       fdinfo engine time, and the ratio achieved.
#   tools/i915-check.sh selftests
#       Reloads i915 with the series' live selftests (i915_gpucg group):
#       the display goes away while it runs.
#
# The load is $LOAD, run through sh -c (default: glmark2-es2-drm off
# screen, Debian package glmark2-es2-drm); it must keep the GPU busy.
set -euo pipefail

MODE=${1:-weights}
SECONDS_RUN=${2:-20}
LOAD=${LOAD:-glmark2-es2-drm --off-screen --run-forever -b build}
CG_ROOT=$(awk '$3 == "cgroup2" { print $2; exit }' /proc/mounts)
TOP=pycgpu-i915-check

die() { echo "i915-check: $*" >&2; exit 1; }

[ "$(id -u)" = 0 ] || die "run as root"
[ -n "$CG_ROOT" ] || die "no cgroup2 mount"
grep -qw gpu "$CG_ROOT/cgroup.controllers" ||
	die "the kernel has no gpu cgroup controller (boot the kernel built with the series)"

render_node() {
	local n
	for n in /sys/class/drm/renderD*; do
		[ "$(basename "$(readlink -f "$n/device/driver")")" = i915 ] && { echo "$n"; return; }
	done
	return 1
}
NODE=$(render_node) || die "no i915 render node"
DEVT=$(cat "$NODE/dev")

setup() {
	cleanup
	echo +gpu >"$CG_ROOT/cgroup.subtree_control"
	mkdir "$CG_ROOT/$TOP"
	echo +gpu >"$CG_ROOT/$TOP/cgroup.subtree_control"
	mkdir "$CG_ROOT/$TOP/a" "$CG_ROOT/$TOP/b"
	case $MODE in
	weights)
		echo 300 >"$CG_ROOT/$TOP/a/gpu.weight"
		echo 100 >"$CG_ROOT/$TOP/b/gpu.weight" ;;
	priority)
		echo 5 >"$CG_ROOT/$TOP/gpu.priority"
		echo 5 >"$CG_ROOT/$TOP/a/gpu.priority"
		echo 0 >"$CG_ROOT/$TOP/b/gpu.priority" ;;
	esac
}

cleanup() {
	local g p
	[ -d "$CG_ROOT/$TOP" ] || return 0
	for g in "$CG_ROOT/$TOP"/*/; do
		[ -d "$g" ] || continue
		for p in $(cat "$g/cgroup.procs"); do kill "$p" 2>/dev/null || true; done
		for _ in 1 2 3 4 5 6 7 8 9 10; do
			[ -z "$(cat "$g/cgroup.procs")" ] && break
			sleep 0.5
		done
		rmdir "$g"
	done
	rmdir "$CG_ROOT/$TOP"
}

# usage_usec of cgroup $1 on the device
usage() {
	sed -n "s/^$DEVT .*usage_usec=\([0-9]*\).*/\1/p" "$CG_ROOT/$TOP/$1/gpu.stat" | head -n 1
}

# the i915 engine time (ns, every class) of every DRM client in cgroup $1
fdinfo_ns() {
	local pid f sum=0 v
	for pid in $(cat "$CG_ROOT/$TOP/$1/cgroup.procs"); do
		for f in /proc/"$pid"/fdinfo/*; do
			grep -q '^drm-driver:[[:space:]]*i915' "$f" 2>/dev/null || continue
			for v in $(sed -n 's/^drm-engine-[a-z-]*:[[:space:]]*\([0-9]*\) ns/\1/p' "$f"); do
				sum=$((sum + v))
			done
		done
	done
	echo "$sum"
}

run_loads() {
	local g u0a u0b f0a f0b ua ub fa fb
	command -v "${LOAD%% *}" >/dev/null ||
		die "no load: install glmark2-es2-drm, or set LOAD to a command that keeps the GPU busy"
	setup
	trap cleanup EXIT
	for g in a b; do
		sh -c "echo \$\$ >'$CG_ROOT/$TOP/$g/cgroup.procs' && exec $LOAD" >/dev/null 2>&1 &
	done
	sleep 3
	u0a=$(usage a) u0b=$(usage b) f0a=$(fdinfo_ns a) f0b=$(fdinfo_ns b)
	sleep "$SECONDS_RUN"
	ua=$(( $(usage a) - u0a )) ub=$(( $(usage b) - u0b ))
	fa=$(( $(fdinfo_ns a) - f0a )) fb=$(( $(fdinfo_ns b) - f0b ))
	echo "device $DEVT ($(basename "$NODE")), $MODE, ${SECONDS_RUN}s of: $LOAD"
	printf '%-6s %16s %16s\n' cgroup gpu.stat_usec fdinfo_usec
	printf '%-6s %16d %16d\n' a "$ua" $((fa / 1000)) b "$ub" $((fb / 1000))
	if [ "$ub" -gt 0 ]; then
		awk -v a="$ua" -v b="$ub" -v m="$MODE" 'BEGIN {
			printf "ratio a:b %.2f (want %s)\n", a / b, m == "weights" ? "about 3" : "a large one" }'
	else
		echo "ratio a:b: b got no GPU time"
	fi
}

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

case $MODE in
	weights|priority) run_loads ;;
	selftests) run_selftests ;;
	*) sed -n '2,/^set/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//'; exit 2 ;;
esac
