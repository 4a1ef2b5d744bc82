# Shared settings and helpers for the tools/ scripts; sourced, not run.
# shellcheck shell=bash

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
CACHE=${PYCGPU_CACHE:-$HOME/.cache/pycgpu}
# The kernel the series is built on: 6.12 (the LTS, default) or 7.3
# (mainline). Each base has its own series (kernel/drivers-gpu-cgroup/BASE/)
# and its own source and build trees in the cache, so switching is free.
BASE=${PYCGPU_BASE:-6.12}
case $BASE in
	6.12 | 7.3) ;;
	*)
		printf 'PYCGPU_BASE must be 6.12 or 7.3, not %s\n' "$BASE" >&2
		exit 2 ;;
esac
KCACHE=$CACHE/$BASE
SRC=$KCACHE/linux         # kernel source, a git repository (tag pycgpu-base)
# Kernel flavours share the source tree and build apart, so that each stays
# incremental: test (vm.config) and NAME (vm.config + NAME.config beside it):
# debug (KASAN, kmemleak, debug objects, hung-task detection, fault
# injection) and kmemleak (the test kernel with kmemleak, to measure its cost).
FLAVOUR=${PYCGPU_FLAVOUR:-test}
SERIES_DIR=$ROOT/kernel/drivers-gpu-cgroup
BASE_DIR=$SERIES_DIR/$BASE
case $FLAVOUR in
	test) SUFFIX= ;;
	*[!a-z0-9]* | vm | '')
		printf 'PYCGPU_FLAVOUR must be test or a NAME with a NAME.config, not %s\n' "$FLAVOUR" >&2
		exit 2 ;;
	*)
		[ -f "$SERIES_DIR/$FLAVOUR.config" ] || {
			printf 'PYCGPU_FLAVOUR=%s: no %s.config in kernel/drivers-gpu-cgroup\n' \
				"$FLAVOUR" "$FLAVOUR" >&2
			exit 2
		}
		SUFFIX=-$FLAVOUR ;;
esac
OUT=$KCACHE/build$SUFFIX  # kernel build tree (make O=)
EXT=$KCACHE/ext$SUFFIX    # out-of-tree module build (top-level Kbuild)
# Debian's source package of the base: installed for 6.12 (bookworm has it),
# downloaded into the cache for 7.3 (tools/kernel.sh prepare).
KPACKAGE=linux-source-$BASE
KTARBALL=${PYCGPU_KERNEL_TARBALL:-}
VENV=$ROOT/.venv
JOBS=${JOBS:-$(nproc)}
# virtme-ng comes with the project's venv (tools/setup-host.sh)
PATH=$VENV/bin:$PATH

say() { printf '[%s] %s\n' "${0##*/}" "$*" >&2; }
die() { say "error: $*"; exit 1; }

# Fails with MESSAGE if build log LOG has a compiler warning, printing them.
no_warnings() {
	local log=$1 message=$2
	if grep -q 'warning:' "$log"; then
		grep 'warning:' "$log" >&2
		die "$message"
	fi
}

# Runs "$@" with its output in LOG; prints a progress line every 30 s and the
# elapsed time at the end; on failure prints the end of the log.
run_logged() {
	local what=$1 log=$2
	shift 2
	local start=$SECONDS pid rc
	say "$what (log: $log)"
	"$@" >"$log" 2>&1 &
	pid=$!
	local next=$((start + 30))
	while kill -0 "$pid" 2>/dev/null; do
		sleep 1
		if [ "$SECONDS" -ge "$next" ]; then
			say "  ... $what: $((SECONDS - start))s, $(wc -l <"$log") lines of log"
			next=$((next + 30))
		fi
	done
	wait "$pid" && rc=0 || rc=$?
	if [ "$rc" -ne 0 ]; then
		tail -n 40 "$log" >&2
		die "$what failed after $((SECONDS - start))s (exit $rc)"
	fi
	say "$what: done in $((SECONDS - start))s"
}
