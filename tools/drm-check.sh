#!/usr/bin/env bash
# Checks the gpu cgroup controller on a real GPU of a given DRM driver: run
# as root on a machine booted with a kernel that carries the series (see
# kernel/drivers-gpu-cgroup/README). tools/i915-check.sh and
# tools/amdgpu-check.sh call it; the VM tier runs it on simgpu.
#
#   tools/drm-check.sh DRIVER [weights|priority] [SECONDS]
#       Two copies of a GPU load on the first render node of DRIVER (or
#       $DRM_CHECK_NODE, renderDN, when it has several GPUs), each
#       in its own cgroup, for SECONDS (default 20): weights puts them at
#       gpu.weight 300 and 100 (want 3:1), priority at gpu.priority 5 and 0
#       (want nearly all to the first). Prints the device's sched flag,
#       each cgroup's gpu.stat usage, the same clients' fdinfo engine time
#       (drm-engine-*, or drm-cycles-* at the rate drm-total-cycles-*
#       advances, for xe), and the ratio achieved.
#
# The load is $LOAD, run through sh -c (default: glmark2-es2-drm off
# screen, Debian package glmark2-es2-drm, which runs on any Mesa driver);
# it must keep the GPU busy. On Linux 7.x drm_sched follows the weights
# under its FIFO (default) and fair policies, not RR: said if not.
set -euo pipefail
# EPOCHREALTIME and awk read numbers with a decimal point
export LC_ALL=C

CG_ROOT=$(awk '$3 == "cgroup2" { print $2; exit }' /proc/mounts)
TOP=${DRM_CHECK_CGROUP:-pycgpu-drm-check}

die() { echo "${0##*/}: $*" >&2; exit 1; }

# The driver of render node $1 (a sysfs directory): its device's driver, or
# for a device no driver binds (simulated ones) the name in its modalias.
node_driver() {
	if [ -e "$1/device/driver" ]; then
		basename "$(readlink -f "$1/device/driver")"
	else
		sed -n 's/^[a-z]*:\([a-z0-9_-]*\).*/\1/p' "$1/device/modalias" 2>/dev/null
	fi
}

# Whether the device driver $2 of a render node is DRM driver $1's: msm's
# render node hangs off its display or GPU device (msm_dpu, msm_mdp, mdp4,
# adreno).
driver_is() {
	case $1:$2 in
		msm:msm* | msm:mdp4 | msm:adreno) return 0 ;;
		*) [ "$1" = "$2" ] ;;
	esac
}

# The render node to check: $DRM_CHECK_NODE (renderDN) if set, else the
# first render node of driver $1.
render_node() {
	local n
	if [ -n "${DRM_CHECK_NODE:-}" ]; then
		n=/sys/class/drm/${DRM_CHECK_NODE##*/}
		[ -e "$n" ] && { echo "$n"; return; }
		return 1
	fi
	for n in /sys/class/drm/renderD*; do
		driver_is "$1" "$(node_driver "$n")" && { echo "$n"; return; }
	done
	return 1
}

# Checks the host and finds the node of $DRIVER: sets NODE and DEVT.
check_host() {
	[ "$(id -u)" = 0 ] || die "run as root"
	[ -n "$CG_ROOT" ] || die "no cgroup2 mount"
	grep -qw gpu "$CG_ROOT/cgroup.controllers" ||
		die "the kernel has no gpu cgroup controller (boot the kernel built with the series)"
	NODE=$(render_node "$DRIVER") || die "no $DRIVER render node${DRM_CHECK_NODE:+ $DRM_CHECK_NODE}"
	DEVT=$(cat "$NODE/dev")
}

# The cgroups a and b under $TOP, for $MODE.
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
	local g p sig
	[ -d "$CG_ROOT/$TOP" ] || return 0
	for g in "$CG_ROOT/$TOP"/*/; do
		[ -d "$g" ] || continue
		for sig in TERM KILL; do
			for p in $(cat "$g/cgroup.procs"); do kill -"$sig" "$p" 2>/dev/null || true; done
			for _ in 1 2 3 4 5 6 7 8 9 10; do
				[ -z "$(cat "$g/cgroup.procs")" ] && break
				sleep 0.5
			done
		done
		rmdir "$g"
	done
	rmdir "$CG_ROOT/$TOP"
}

# The value of key $2 (usage_usec, sched) in cgroup $1's gpu.stat line of the device.
stat_key() {
	sed -n "s/^$DEVT .*$2=\([0-9]*\).*/\1/p" "$CG_ROOT/$TOP/$1/gpu.stat" | head -n 1
}

# For drivers that count GPU time in clock cycles (xe: drm-cycles-*, with
# that clock's reading beside them in drm-total-cycles-*): the clock's rate
# in Hz, from two readings of a client of cgroup $1 about a second apart
# over the wall time between them, written to $CYCLES_HZ_FILE; nothing for
# drivers that count ns.
measure_cycles_hz() {
	local pid f c0 c1 w0 w1
	for pid in $(cat "$CG_ROOT/$TOP/$1/cgroup.procs"); do
		for f in /proc/"$pid"/fdinfo/*; do
			grep -q "^drm-driver:[[:space:]]*$DRIVER\$" "$f" 2>/dev/null || continue
			grep -q '^drm-cycles-' "$f" || return 0
			w0=$EPOCHREALTIME c0=$(total_cycles "$f")
			sleep 1
			w1=$EPOCHREALTIME c1=$(total_cycles "$f")
			[ -n "$c0" ] && [ -n "$c1" ] && [ "$c1" -gt "$c0" ] ||
				die "$f: drm-cycles-* without a drm-total-cycles-* that advances"
			awk -v c="$((c1 - c0))" -v w0="$w0" -v w1="$w1" \
				'BEGIN { printf "%.0f\n", c / (w1 - w0) }' >"$CYCLES_HZ_FILE"
			return 0
		done
	done
}

total_cycles() {
	sed -n 's/^drm-total-cycles-[^:]*:[[:space:]]*\([0-9]*\).*/\1/p' "$1" | head -n 1
}

# The engine time (ns, every engine) of the DRM clients of $DRIVER in cgroup
# $1: each client once, though its file may be open on several fds (Mesa
# duplicates it). drm-engine-* where the driver has it, else drm-cycles-*
# at the rate measure_cycles_hz found. (awk's sums are printed with %.0f:
# mawk's %d stops at 2^31.)
fdinfo_ns() {
	local pid f sum=0 v id
	local -A seen
	for pid in $(cat "$CG_ROOT/$TOP/$1/cgroup.procs"); do
		for f in /proc/"$pid"/fdinfo/*; do
			grep -q "^drm-driver:[[:space:]]*$DRIVER\$" "$f" 2>/dev/null || continue
			id=$(sed -n 's/^drm-client-id:[[:space:]]*//p' "$f")
			[ -n "$id" ] && [ -n "${seen[$id]:-}" ] && continue
			[ -n "$id" ] && seen[$id]=1
			# drm-engine-capacity-* is no time
			if grep -Eq '^drm-engine-[^:]*:[[:space:]]*[0-9]+ ns' "$f"; then
				v=$(sed -n 's/^drm-engine-[^:]*:[[:space:]]*\([0-9]*\) ns/\1/p' "$f" |
					awk '{ s += $1 } END { printf "%.0f", s }')
			elif [ -s "$CYCLES_HZ_FILE" ] && grep -q '^drm-cycles-' "$f"; then
				v=$(awk -v hz="$(cat "$CYCLES_HZ_FILE")" '/^drm-cycles-/ { s += $2 }
					END { printf "%.0f", s * 1e9 / hz }' "$f")
			else
				v=0
			fi
			sum=$((sum + v))
		done
	done
	echo "$sum"
}

# Waits up to a minute for a process of cgroup $1 to have a DRM file of $DRIVER open.
wait_clients() {
	local pid f
	for _ in $(seq 120); do
		for pid in $(cat "$CG_ROOT/$TOP/$1/cgroup.procs"); do
			for f in /proc/"$pid"/fdinfo/*; do
				grep -q "^drm-driver:[[:space:]]*$DRIVER\$" "$f" 2>/dev/null && return 0
			done
		done
		sleep 0.5
	done
	return 1
}

# drm_sched's policy where it has a fair one (Linux 7.x), else nothing.
sched_policy() {
	case $(uname -r) in
		[0-6].*) ;;
		*) cat /sys/module/gpu_sched/parameters/sched_policy 2>/dev/null || true ;;
	esac
}

run_loads() {
	local g u0a u0b f0a f0b ua ub fa fb policy
	command -v "${LOAD%% *}" >/dev/null ||
		die "no load: install glmark2-es2-drm, or set LOAD to a command that keeps the GPU busy"
	policy=$(sched_policy)
	CYCLES_HZ_FILE=$(mktemp)
	trap 'cleanup; rm -f "$CYCLES_HZ_FILE"' EXIT
	setup
	for g in a b; do
		sh -c "echo \$\$ >'$CG_ROOT/$TOP/$g/cgroup.procs' && exec $LOAD" >/dev/null 2>&1 &
	done
	wait_clients a && wait_clients b ||
		die "the load did not open $DRIVER's render node within a minute in both cgroups"
	sleep 2
	measure_cycles_hz a
	u0a=$(stat_key a usage_usec) u0b=$(stat_key b usage_usec)
	f0a=$(fdinfo_ns a) f0b=$(fdinfo_ns b)
	sleep "$SECONDS_RUN"
	ua=$(( $(stat_key a usage_usec) - u0a )) ub=$(( $(stat_key b usage_usec) - u0b ))
	fa=$(( $(fdinfo_ns a) - f0a )) fb=$(( $(fdinfo_ns b) - f0b ))
	echo "device $DEVT ($(basename "$NODE"), $DRIVER), $MODE, ${SECONDS_RUN}s of: $LOAD"
	echo "sched=$(stat_key a sched)${policy:+ (gpu_sched.sched_policy=$policy)}"
	if [ "$(stat_key a sched)" != 1 ]; then
		if [ "$policy" = 0 ]; then
			echo "note: the knobs need drm_sched's FIFO or fair policy, not RR: boot without gpu_sched.sched_policy=0"
		else
			echo "note: $DRIVER's scheduler does not follow the controller: only GPU time is charged"
		fi
	fi
	printf '%-6s %16s %16s\n' cgroup gpu.stat_usec fdinfo_usec
	printf '%-6s %16d %16d\n' a "$ua" $((fa / 1000)) b "$ub" $((fb / 1000))
	if [ "$ub" -gt 0 ]; then
		awk -v a="$ua" -v b="$ub" -v m="$MODE" 'BEGIN {
			printf "ratio a:b %.2f (want %s)\n", a / b, m == "weights" ? "about 3" : "a large one" }'
	else
		echo "ratio a:b: b got no GPU time"
	fi
}

usage() {
	sed -n '2,/^set/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//'
	exit 2
}

main() {
	DRIVER=${1:-}
	MODE=${2:-weights}
	SECONDS_RUN=${3:-20}
	LOAD=${LOAD:-glmark2-es2-drm --off-screen --run-forever -b build}
	[ -n "$DRIVER" ] || usage
	case $MODE in weights | priority) ;; *) usage ;; esac
	case $SECONDS_RUN in '' | *[!0-9]*) usage ;; esac
	check_host
	run_loads
}

# The entry of a driver's script: driver_check DRIVER SCRIPT ARGS..., with
# SCRIPT's header as its usage.
driver_check() {
	local driver=$1 script=$2
	shift 2
	case ${1:-weights} in
		weights | priority) main "$driver" "$@" ;;
		*) sed -n '2,/^set/p' "$script" | sed -e '$d' -e 's/^# \{0,1\}//'; exit 2 ;;
	esac
}

# sourced by the driver scripts for its functions, run for a check
if [ "${BASH_SOURCE[0]}" = "$0" ]; then
	main "$@"
fi
