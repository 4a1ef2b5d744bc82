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

# The objects the Makefile (or Kbuild) of driver directory $1 builds in configuration
# file $2: those of its -y and -objs lists, and of its -$(CONFIG_X) lists
# whose X is y or m, outside blocks the configuration leaves out: ifdef
# CONFIG_X and ifneq ($(CONFIG_X),) hold when X is y or m, ifndef and
# ifeq ($(CONFIG_X),) when it is not, any other condition is taken as met.
configured() {
	local mk=$SRC/drivers/gpu/drm/$1/Makefile
	# 7.3's nouveau keeps its lists in a Kbuild file
	[ -f "$mk" ] || mk=${mk%Makefile}Kbuild
	awk -v cfg="$2" '
		BEGIN {
			while ((getline l < cfg) > 0)
				if (l ~ /^CONFIG_[A-Za-z0-9_]+=[ym]$/) { split(l, kv, "="); on[kv[1]] = 1 }
			depth = 0; off = 0
		}
		# the blocks: met[d] says whether block d holds, off counts those that do not
		!cont && /^(ifdef|ifndef|ifeq|ifneq)[ \t(]/ {
			held = 1
			if (match($0, /CONFIG_[A-Za-z0-9_]+/)) {
				sym = substr($0, RSTART, RLENGTH)
				if ($1 == "ifdef" || $0 ~ /^ifneq *\(\$\(CONFIG_[A-Za-z0-9_]+\), *\)/)
					held = sym in on
				else if ($1 == "ifndef" || $0 ~ /^ifeq *\(\$\(CONFIG_[A-Za-z0-9_]+\), *\)/)
					held = !(sym in on)
			}
			met[++depth] = held; off += !held
			next
		}
		!cont && /^else([ \t]|$)/ && depth { off += met[depth] ? 1 : -1; met[depth] = !met[depth]; next }
		!cont && /^endif([ \t]|$)/ && depth { off -= !met[depth]; depth--; next }
		off { cont = /\\$/; next }
		!cont {
			list = 0
			if (match($0, /^[A-Za-z0-9_-]+-(y|objs|\$\(CONFIG_[A-Za-z0-9_]+\))[ \t]*[:+]?=/)) {
				head = substr($0, 1, RLENGTH)
				list = 1
				if (match(head, /CONFIG_[A-Za-z0-9_]+/))
					list = substr(head, RSTART, RLENGTH) in on
			}
		}
		list { n = split($0, w, /[ \t\\=]+/); for (i = 1; i <= n; i++) if (w[i] ~ /\.o$/) print w[i] }
		{ cont = /\\$/ }' "$mk"
}

# The objects of driver directory $1 to build in configuration file $2: its
# changed C files, and the C files that include a changed header beside it
# and that the configuration builds. A C file another one #includes (KUnit
# tests, selftests: tests/NAME.c) has no object of its own: the file that
# includes it is built instead.
objects() {
	local dir=$1 cfg=$2 f h inc
	local -A built
	for f in $(configured "$dir" "$cfg"); do built[$f]=1; done
	while read -r f; do
		case $f in
			*.c)
				inc=$(grep -rl --include='*.c' "#include \"${f#*/drm/"$dir"/}\"" \
					"$SRC/drivers/gpu/drm/$dir" 2>/dev/null || true)
				if [ -n "$inc" ]; then
					sed "s|^$SRC/||; s|\.c\$|.o|" <<<"$inc"
				else
					echo "${f%.c}.o"
				fi ;;
			*.h)
				h=${f##*/}
				for inc in $(grep -l "#include \"$h\"" "$SRC/${f%/*}"/*.c 2>/dev/null); do
					inc=${inc#"$SRC"/}
					inc=${inc%.c}.o
					[ -n "${built[${inc#*/drm/"$dir"/}]:-}" ] && echo "$inc"
				done ;;
		esac
	done < <(changed "$dir") | sort -u
}

check_arch() {
	local arch=$1
	local out=$KCACHE/drivers-$arch log=$KCACHE/drivers-$arch.log
	local -a mk targets=() syms=() dirs=() added
	local entry dir sym a
	for entry in "${DRIVERS[@]}"; do
		read -r dir sym a <<<"$entry"
		[ "$a" = "$arch" ] || continue
		[ -n "$(changed "$dir")" ] || continue
		syms+=("$sym")
		dirs+=("$dir")
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
	for dir in "${dirs[@]}"; do
		mapfile -t -O "${#targets[@]}" targets < <(objects "$dir" "$out/.config")
	done
	run_logged "$arch: preparing the tree" "$log" "${mk[@]}" prepare
	# built again every run: an object left from a run that warned would
	# not be rebuilt, and its warnings would not be seen again
	rm -f "$out"/kernel/cgroup/gpu*.o "$out"/drivers/gpu/drm/scheduler/*.o \
		"${targets[@]/#/$out/}"
	run_logged "$arch: W=1 on the controller and drm_sched" \
		"$log" "${mk[@]}" W=1 kernel/cgroup/gpu.o kernel/cgroup/gpu_sched.o \
		drivers/gpu/drm/scheduler/
	# upstream's driver files carry kernel-doc warnings of their own at
	# W=1 (6.12's panthor_sched.c): the drivers' objects are built at W=1
	# without kernel-doc, which then checks the files the series adds
	run_logged "$arch: W=1 on ${#targets[@]} objects of ${syms[*]}" \
		"$log.drivers" "${mk[@]}" W=1 cmd_checkdoc= "${targets[@]}"
	cat "$log.drivers" >>"$log"
	added=()
	for dir in "${dirs[@]}"; do
		mapfile -t -O "${#added[@]}" added < <(git -C "$SRC" diff --diff-filter=A \
			--name-only "$BASE_TAG..HEAD" -- "drivers/gpu/drm/$dir/*.[ch]")
	done
	if [ "${#added[@]}" -gt 0 ]; then
		run_logged "$arch: kernel-doc on ${added[*]}" "$log.drivers" \
			bash -c 'cd "$1" && shift && "$@"' _ "$SRC" "$KERNELDOC" -none "${added[@]}"
		cat "$log.drivers" >>"$log"
	fi
	no_warnings "$log" "$arch: the drivers build with W=1 warnings"
}

[ -d "$SRC/.git" ] || die "no $BASE tree yet: run make kernel PYCGPU_BASE=$BASE"
# the kernel-doc script: tools/docs/ from Linux 7.0, scripts/ before
KERNELDOC=$SRC/tools/docs/kernel-doc
[ -x "$KERNELDOC" ] || KERNELDOC=$SRC/scripts/kernel-doc
case ${1:-all} in
	all) check_arch x86_64; check_arch arm64 ;;
	x86_64 | arm64) check_arch "$1" ;;
	*) sed -n '2,/^set/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//'; exit 2 ;;
esac
say "$BASE: the converted drivers build warning-free at W=1"
