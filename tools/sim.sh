#!/usr/bin/env bash
# The virtual-time tier: the scheduling core's KUnit suite, upstream's
# drm_sched suites and TTM's device and pool suites on a UML kernel of 7.3's tree with
# the series, and the core's suite on one of 6.12's, run by the kernel's own runner
# (tools/testing/kunit/kunit.py) with time-travel=inf-cpu: clocks and timers
# are virtual and CPU work takes no time, so the figures are exact and the
# same on every run. No root, no emulator.
#
#   tools/sim.sh [all]   build, then run
#   tools/sim.sh build [BASE]
#                        the UML kernels, incrementally ($PYCGPU_CACHE/BASE/uml),
#                        of both bases or of BASE alone
#   tools/sim.sh run     the suites: the core's on both bases, upstream's
#                        drm_sched under FIFO and under FAIR on 7.3, and
#                        upstream's TTM device and pool suites on 7.3
#   tools/sim.sh scenarios
#                        the cgroup suite alone, under FIFO and FAIR on 7.3
#
# PYCGPU_SIM_ARGS adds kernel arguments to every boot (bench/ablation.py
# switches mechanisms off with gpu_sched_off=).
#
# The kernel configurations are kernel/drivers-gpu-cgroup/uml.kunitconfig
# (7.3) and uml-core.kunitconfig (6.12) over kunit.py's UML defaults. The
# kernel's log of each boot and its parsed results go to $PYCGPU_CACHE/BASE/uml.
set -euo pipefail
export PYCGPU_BASE=7.3
. "$(dirname "$0")/common.sh"

# The UML build directory, source tree and configuration of a base
uml_dir() { echo "$CACHE/$1/uml"; }
uml_src() { echo "$CACHE/$1/linux"; }
uml_config() {
	case $1 in
		7.3) echo "$SERIES_DIR/uml.kunitconfig" ;;
		6.12) echo "$SERIES_DIR/uml-core.kunitconfig" ;;
	esac
}

build_base() {
	local base=$1 uml
	uml=$(uml_dir "$base")
	PYCGPU_BASE=$base "$ROOT/tools/kernel.sh" apply
	run_logged "building $base's UML kernel for the virtual-time suites (-j$JOBS)" "$uml.build.log" \
		python3 "$(uml_src "$base")/tools/testing/kunit/kunit.py" build --build_dir="$uml" \
		--kunitconfig="$(uml_config "$base")" --jobs="$JOBS"
}

cmd_build() {
	case ${1:-both} in
		both) build_base 7.3; build_base 6.12 ;;
		7.3 | 6.12) build_base "$1" ;;
		*) die "tools/sim.sh build: no base $1 (6.12 or 7.3)" ;;
	esac
}

# The kernel's own reports in a boot's log @1 (lockdep, a WARN, a
# refcount gone wrong, a sleep in atomic context), which kunit.py does not
# count: a test that passes while the kernel warned fails all the same.
# 6.12's UML warns once at boot that kunit.py's PCI emulation has no device;
# upstream's ttm_device_init_no_vma_man makes ttm_device_init() warn on purpose.
splats() {
	local found
	found=$(grep -n -E '^(WARNING:|BUG:|kernel BUG|Oops|refcount_t: |UBSAN: |KASAN: )|possible (circular|recursive) locking|inconsistent lock state|suspicious RCU usage' "$1" |
		grep -v -E 'at arch/um/drivers/virt-pci\.c|WARNING: drivers/gpu/drm/ttm/ttm_device\.c:[0-9]+ at ttm_device_init\+' || true)
	[ -z "$found" ] && return 0
	echo "  $2: the kernel reported a problem (log: $1):"
	sed 's/^/    /' <<<"$found"
	return 1
}

# One line for the property tests' runs in a boot's log @1 (their lines per
# mix stay in the log): how many, and the worst of each figure.
property_summary() {
	awk '/drm_sched_cgroup_property: mix [0-9]+/ {
		runs++
		if (match($0, /: [0-9]+ inversions/)) inv += substr($0, RSTART + 2, RLENGTH - 13)
		if (match($0, /longest [0-9]+ us/)) { v = substr($0, RSTART + 8, RLENGTH - 11) + 0; if (v > idle) idle = v }
		if (match($0, /work ready [0-9]+ us/)) total += substr($0, RSTART + 11, RLENGTH - 14)
		if ($0 !~ /not checked/ && match($0, /share error [0-9.]+ points/)) {
			checked++; v = substr($0, RSTART + 12, RLENGTH - 19) + 0; if (v > err) err = v
		}
	}
	END { if (runs) printf "    drm_sched_cgroup_property: %d runs: %d inversions, longest idle with work ready %d us, largest share error %.1f points (%d runs checked), idle with work ready %d ms in all\n", runs, inv, idle, err, checked, total / 1000 }' "$1"
}

# Runs the suites matching each GLOB, one boot each, under drm_sched's
# POLICY (gpu_sched.sched_policy): the kernel's log of the Nth goes to
# $PYCGPU_CACHE/BASE/uml/raw-NAME-N.log, its parsed results beside it.
# Prints the results, and the figures the controller's suites print (their
# "# test: ..." lines).
run_suites() {
	local base=$1 name=$2 policy=$3 glob rc=0 n=0 raw uml src
	shift 3
	uml=$(uml_dir "$base")
	src=$(uml_src "$base")
	[ -x "$uml/linux" ] || die "no UML kernel in $uml: run tools/sim.sh build"
	say "virtual time, $base, $name (sched_policy=$policy${PYCGPU_SIM_ARGS:+ $PYCGPU_SIM_ARGS}): $*"
	local extra=() args=() arg
	read -r -a args <<<"${PYCGPU_SIM_ARGS:-}"
	for arg in "${args[@]}"; do
		extra+=("--kernel_args=$arg")
	done
	for glob; do
		n=$((n + 1))
		raw=$uml/raw-$name-$n.log
		(cd "$src" && python3 tools/testing/kunit/kunit.py exec --build_dir="$uml" --timeout=600 \
			--kernel_args=time-travel=inf-cpu \
			--kernel_args="gpu_sched.sched_policy=$policy" "${extra[@]}" \
			--raw_output=all "$glob") >"$raw" 2>&1 || rc=$?
		python3 "$src/tools/testing/kunit/kunit.py" parse --json="$uml/results-$name-$n.json" "$raw" \
			>"$uml/results-$name-$n.log" 2>&1 || rc=$?
		grep -h -E 'Testing complete|FAILED|CRASHED|ASSERTION|EXPECTATION|Expected' \
			"$uml/results-$name-$n.log" | sed "s/^\[[0-9:]*\] /  $glob: /" || true
		grep -h -E '^ +# (gpucg_test|drm_sched_cgroup|drm_sched_scheduler_rejoin)[a-z_0-9]*: ' "$raw" |
			grep -v -E ': pass:[0-9]+ |\.speed: |drm_sched_cgroup_property: (mix|client) ' |
			sed 's/^ *# /    /' || true
		property_summary "$raw"
		splats "$raw" "$glob" || rc=1
	done
	[ "$rc" -eq 0 ] && return 0
	echo "[sim.sh] $base's $name suites failed (logs: $uml/raw-$name-*.log, $uml/results-$name-*.log)" >&2
	return 1
}

# Upstream's drm_sched suites but drm_sched_scheduler_overhead_tests, whose
# jobs time out on virtual time (it times the scheduler's own overhead in
# wall-clock time, which time-travel does not have); and the cgroup suite,
# under both policies (the cgroup order extends each).
DRM_SCHED_SUITES=(
	'drm_sched_basic*' 'drm_sched_concurrent*'
	'drm_sched_scheduler_two_clients*' 'drm_sched_scheduler_many_clients*'
	'drm_sched_scheduler_rejoin*'
)

# Each set of suites runs whether or not one before failed; then the
# exit status says whether all passed.
cmd_run() {
	local rc=0
	run_suites 7.3 core 1 'gpu_cgroup_sched*' || rc=1
	run_suites 6.12 core 1 'gpu_cgroup_sched*' || rc=1
	run_suites 7.3 fifo 1 "${DRM_SCHED_SUITES[@]}" 'drm_sched_cgroup*' || rc=1
	run_suites 7.3 fair 2 "${DRM_SCHED_SUITES[@]}" 'drm_sched_cgroup*' || rc=1
	# in one boot, the device suite first (link order): the pool suite makes
	# pools without a TTM device and relies on the global pools' lock and
	# list, which the device suite's devices have set up
	run_suites 7.3 ttm 1 'ttm_[dp][eo]*' || rc=1
	return "$rc"
}

cmd_scenarios() {
	local rc=0
	run_suites 7.3 fifo 1 'drm_sched_cgroup*' || rc=1
	run_suites 7.3 fair 2 'drm_sched_cgroup*' || rc=1
	return "$rc"
}

case ${1:-all} in
	all) cmd_build; cmd_run ;;
	build) cmd_build "${2:-both}" ;;
	run) cmd_run ;;
	scenarios) cmd_scenarios ;;
	*) die "usage: tools/sim.sh [all|build [BASE]|run|scenarios]" ;;
esac
