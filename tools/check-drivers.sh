#!/usr/bin/env bash
# Compile-tests, at W=1, the GPU drivers the series converts, on the base
# PYCGPU_BASE selects:
#   tools/check-drivers.sh              x86_64, then arm64
#   tools/check-drivers.sh x86_64       the x86 drivers (amdgpu, nouveau, xe)
#                                       in the test kernel's configuration
#   tools/check-drivers.sh arm64        the arm64-only drivers (v3d, panfrost,
#                                       lima, etnaviv, msm, panthor, imagination)
#                                       with Debian's aarch64 cross compiler,
#                                       on arm64's defconfig
# Each architecture builds in a tree of its own in the cache
# ($PYCGPU_CACHE/BASE/drivers-ARCH), so later runs are incremental. Built:
# the controller, drm_sched, and in each driver the series touches the
# objects it changes and those that include a header it changes, rebuilt
# every run; the rest of a driver is upstream's and compiles as it did.
# Any warning fails.
set -euo pipefail
. "$(dirname "$0")/common.sh"

BASE_TAG=pycgpu-base

# driver directory under drivers/gpu/drm, its Kconfig symbol, its architecture
DRIVERS=(
	"amd/amdgpu DRM_AMDGPU x86_64"
	"nouveau DRM_NOUVEAU x86_64"
	"xe DRM_XE x86_64"
	"v3d DRM_V3D arm64"
	"panfrost DRM_PANFROST arm64"
	"lima DRM_LIMA arm64"
	"etnaviv DRM_ETNAVIV arm64"
	"msm DRM_MSM arm64"
	"panthor DRM_PANTHOR arm64"
	"imagination DRM_POWERVR arm64"
)

# The series' changed files under drivers/gpu/drm/$1.
changed() {
	git -C "$SRC" diff --name-only "$BASE_TAG..HEAD" -- "drivers/gpu/drm/$1/"
}

# The objects of driver directory $1 to build: its changed C files and the
# C files beside a changed header that include it.
objects() {
	local dir=$1 f h
	while read -r f; do
		case $f in
			*.c) echo "${f%.c}.o" ;;
			*.h)
				h=${f##*/}
				{ grep -l "#include \"$h\"" "$SRC/${f%/*}"/*.c 2>/dev/null || true; } |
					sed "s|^$SRC/||; s|\.c\$|.o|" ;;
		esac
	done < <(changed "$dir") | sort -u
}

check_arch() {
	local arch=$1
	local out=$KCACHE/drivers-$arch log=$KCACHE/drivers-$arch.log
	local -a mk targets=() syms=()
	local entry dir sym a
	for entry in "${DRIVERS[@]}"; do
		read -r dir sym a <<<"$entry"
		[ "$a" = "$arch" ] || continue
		[ -n "$(changed "$dir")" ] || continue
		syms+=("$sym")
		mapfile -t -O "${#targets[@]}" targets < <(objects "$dir")
	done
	if [ "${#syms[@]}" -eq 0 ]; then
		say "$arch: the $BASE series converts no driver of this architecture"
		return 0
	fi
	mk=(make -C "$SRC" O="$out" -j"$JOBS")
	if [ "$arch" = arm64 ]; then
		command -v aarch64-linux-gnu-gcc >/dev/null ||
			die "aarch64-linux-gnu-gcc is missing: run tools/setup-host.sh (as root)"
		mk+=(ARCH=arm64 CROSS_COMPILE=aarch64-linux-gnu-)
	fi
	mkdir -p "$out"
	# the configuration: the test kernel's (x86_64) or arm64's defconfig,
	# plus the controller and the drivers, rebuilt only when that changes
	local want have
	want=$( {
		if [ "$arch" = x86_64 ]; then
			[ -f "$OUT/.config" ] || die "no test kernel configuration yet: run make kernel PYCGPU_BASE=$BASE"
			cat "$OUT/.config"
		fi
		printf 'CONFIG_CGROUP_GPU=y\n'
		printf 'CONFIG_%s=m\n' "${syms[@]}"
		git -C "$SRC" rev-parse HEAD
	} | sha256sum | cut -c1-16)
	have=$(cat "$out/.pycgpu-config" 2>/dev/null || true)
	if [ "$want" != "$have" ]; then
		if [ "$arch" = x86_64 ]; then
			cp "$OUT/.config" "$out/.config"
		else
			run_logged "$arch: defconfig" "$log" "${mk[@]}" defconfig
		fi
		{
			printf 'CONFIG_CGROUP_GPU=y\n'
			printf 'CONFIG_%s=m\n' "${syms[@]}"
		} >>"$out/.config"
		run_logged "$arch: configuration with ${syms[*]}" "$log" "${mk[@]}" olddefconfig
		for sym in CGROUP_GPU "${syms[@]}"; do
			grep -q "^CONFIG_$sym=[ym]" "$out/.config" ||
				die "$arch: CONFIG_$sym did not stay set (a dependency is missing; see make O=$out menuconfig)"
		done
		echo "$want" >"$out/.pycgpu-config"
	fi
	run_logged "$arch: preparing the tree" "$log" "${mk[@]}" prepare
	# built again every run: an object left from a run that warned would
	# not be rebuilt, and its warnings would not be seen again
	rm -f "$out"/kernel/cgroup/gpu*.o "$out"/drivers/gpu/drm/scheduler/*.o \
		"${targets[@]/#/$out/}"
	run_logged "$arch: W=1 on the controller, drm_sched and ${#targets[@]} objects of ${syms[*]}" \
		"$log" "${mk[@]}" W=1 kernel/cgroup/gpu.o kernel/cgroup/gpu_sched.o \
		drivers/gpu/drm/scheduler/ "${targets[@]}"
	no_warnings "$log" "$arch: the drivers build with W=1 warnings"
}

[ -d "$SRC/.git" ] || die "no $BASE tree yet: run make kernel PYCGPU_BASE=$BASE"
case ${1:-all} in
	all) check_arch x86_64; check_arch arm64 ;;
	x86_64 | arm64) check_arch "$1" ;;
	*) sed -n '2,/^set/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//'; exit 2 ;;
esac
say "$BASE: the converted drivers build warning-free at W=1"
