#!/usr/bin/env bash
# Builds the patched test kernel and the out-of-tree modules.
#
#   tools/kernel.sh [all]        prepare + apply + config + build + ext
#   tools/kernel.sh prepare      unpack Debian's linux-source-6.12 into the cache (once)
#   tools/kernel.sh apply        make the tree match kernel/drivers-gpu-cgroup/series
#   tools/kernel.sh config       virtme-ng defconfig + kernel/drivers-gpu-cgroup/vm.config
#                                (+ NAME.config with PYCGPU_FLAVOUR=NAME, built apart: debug, kmemleak)
#   tools/kernel.sh build        bzImage and modules, incrementally
#   tools/kernel.sh w1           the series' C files again with W=1 (warnings fail)
#   tools/kernel.sh ext          the out-of-tree modules of the top-level Kbuild
#   tools/kernel.sh export DIR   the series as git format-patch files
#   tools/kernel.sh checkpatch   scripts/checkpatch.pl --strict on the series
#   tools/kernel.sh info         what was built from what
#
# Everything lives under $PYCGPU_CACHE (default ~/.cache/pycgpu), never in
# the repository, so rebuilds are incremental.
set -euo pipefail
. "$(dirname "$0")/common.sh"

BASE_TAG=pycgpu-base
BRANCH=pycgpu-series

tarball_version() {
	dpkg-query -W -f='${Version}' "$KPACKAGE" 2>/dev/null || stat -c %Y "$KTARBALL"
}

# A git repository of the pristine tree, so that the series can be applied
# again and again without ever patching twice.
cmd_prepare() {
	local want have=""
	[ -f "$KTARBALL" ] || die "$KTARBALL is missing: run tools/setup-host.sh (installs $KPACKAGE)"
	want=$(tarball_version)
	[ -f "$CACHE/source.version" ] && have=$(cat "$CACHE/source.version")
	if [ "$have" = "$want" ] && git -C "$SRC" rev-parse -q --verify "$BASE_TAG" >/dev/null; then
		return 0
	fi
	rm -rf "$SRC" "$OUT" "$CACHE/source.version" "$CACHE/unpack"
	mkdir -p "$CACHE/unpack"
	run_logged "unpacking $KPACKAGE $want" "$CACHE/unpack.log" \
		tar -C "$CACHE/unpack" -xf "$KTARBALL"
	mv "$CACHE"/unpack/linux-source-* "$SRC"
	rmdir "$CACHE/unpack"
	# Debian's .gitignore ignores the whole top level: add with -f.
	run_logged "recording the pristine tree" "$CACHE/unpack.log" bash -c "
		cd '$SRC' && git init -q -b base . &&
		git add -f -A . &&
		git -c user.name=pycgpu -c user.email=pycgpu@localhost \
			commit -q -m 'Debian $KPACKAGE $want' &&
		git tag $BASE_TAG"
	echo "$want" >"$CACHE/source.version"
}

series_lines() {
	grep -v -e '^#' -e '^[[:space:]]*$' "$SERIES_DIR/series"
}

# Builds the series' commits on top of the pristine tree in a scratch index,
# then checks the result out: only files whose content changed are
# rewritten, so make rebuilds only what the change touches.
cmd_apply() {
	local tmp parent tree commit patch files f src dst blob subject
	local -a info
	cmd_prepare
	tmp=$(mktemp -d)
	parent=$(git -C "$SRC" rev-parse "$BASE_TAG")
	while read -r patch files; do
		[ -f "$SERIES_DIR/$patch" ] || die "series names $patch, which is missing"
		export GIT_INDEX_FILE=$tmp/index
		git -C "$SRC" read-tree "$parent"
		git -C "$SRC" mailinfo "$tmp/msg" "$tmp/diff" <"$SERIES_DIR/$patch" >"$tmp/info"
		if [ -s "$tmp/diff" ]; then
			git -C "$SRC" apply --cached "$tmp/diff" ||
				die "$patch does not apply to $(cat "$CACHE/source.version")"
		fi
		for f in $files; do
			src=${f%%:*} dst=${f#*:}
			[ -f "$SERIES_DIR/$src" ] || die "series names $src, which is missing"
			blob=$(git -C "$SRC" hash-object -w "$SERIES_DIR/$src")
			git -C "$SRC" update-index --add --cacheinfo "100644,$blob,$dst"
		done
		tree=$(git -C "$SRC" write-tree)
		unset GIT_INDEX_FILE
		mapfile -t info <"$tmp/info"
		subject=$(sed -n 's/^Subject: //p' "$tmp/info")
		{ echo "$subject"; echo; cat "$tmp/msg"; } >"$tmp/message"
		commit=$(
			export GIT_AUTHOR_NAME GIT_AUTHOR_EMAIL GIT_AUTHOR_DATE
			GIT_AUTHOR_NAME=$(sed -n 's/^Author: //p' "$tmp/info")
			GIT_AUTHOR_EMAIL=$(sed -n 's/^Email: //p' "$tmp/info")
			GIT_AUTHOR_DATE=$(sed -n 's/^Date: //p' "$tmp/info")
			GIT_COMMITTER_NAME=$GIT_AUTHOR_NAME GIT_COMMITTER_EMAIL=$GIT_AUTHOR_EMAIL \
			GIT_COMMITTER_DATE=$GIT_AUTHOR_DATE \
				git -C "$SRC" commit-tree "$tree" -p "$parent" -F "$tmp/message"
		)
		parent=$commit
	done < <(series_lines)
	rm -rf "$tmp"
	if [ "$(git -C "$SRC" rev-parse -q --verify HEAD || true)" = "$parent" ] &&
		[ -z "$(git -C "$SRC" status --porcelain --untracked-files=no)" ]; then
		say "series already applied ($(git -C "$SRC" rev-parse --short HEAD))"
		return 0
	fi
	git -C "$SRC" checkout -q -f -B "$BRANCH" "$parent"
	say "series applied: $(git -C "$SRC" rev-list --count "$BASE_TAG..HEAD") patches, tree at $(git -C "$SRC" rev-parse --short HEAD)"
}

# The config fragment of the flavour: vm.config, and for another flavour its
# NAME.config after it, whose options replace vm.config's.
flavour_fragment() {
	local extra=$SERIES_DIR/$FLAVOUR.config

	if [ "$FLAVOUR" = test ]; then
		cat "$SERIES_DIR/vm.config"
		return 0
	fi
	awk 'function opt(l) { sub(/^# /, "", l); sub(/[= ].*/, "", l); return l }
		NR == FNR { if ($0 ~ /^(# )?CONFIG_/) over[opt($0)] = 1; next }
		!($0 ~ /^(# )?CONFIG_/ && opt($0) in over)' \
		"$extra" "$SERIES_DIR/vm.config"
	cat "$extra"
}

cmd_config() {
	local frag=$OUT.fragment want have=""
	mkdir -p "$OUT"
	flavour_fragment >"$frag"
	want=$( { sha256sum <"$frag"; pip_show_vng; } | sha256sum | cut -c1-16)
	[ -f "$OUT/.pycgpu-config" ] && have=$(cat "$OUT/.pycgpu-config")
	if [ -f "$OUT/.config" ] && [ "$have" = "$want" ]; then
		return 0
	fi
	command -v virtme-configkernel >/dev/null || die "virtme-ng is missing: run tools/setup-host.sh"
	mkdir -p "$OUT"
	# virtme-ng appends its own options after the fragment: apply it again.
	run_logged "configuring $FLAVOUR (virtme-ng defconfig + fragment)" "$CACHE/config$SUFFIX.log" \
		bash -c "cd '$SRC' && virtme-configkernel --defconfig --custom '$frag' O='$OUT' &&
			cat '$frag' >>'$OUT/.config' && make -C '$SRC' O='$OUT' olddefconfig"
	check_config "$frag"
	echo "$want" >"$OUT/.pycgpu-config"
}

pip_show_vng() {
	virtme-configkernel --help 2>/dev/null | head -n 1
	vng --version 2>/dev/null || true
}

# Every option the fragment asks for must have survived olddefconfig.
check_config() {
	local line opt missing=0
	while read -r line; do
		case "$line" in CONFIG_*=*) ;; *) continue ;; esac
		opt=${line%%=*}
		if ! grep -qxF "$line" "$OUT/.config"; then
			say "config: wanted $line, got: $(grep -E "^(# )?$opt[= ]" "$OUT/.config" || echo unset)"
			missing=1
		fi
	done <"$1"
	[ "$missing" -eq 0 ] || die "the kernel config lacks options of $1 (a dependency is missing)"
}

cmd_build() {
	run_logged "building the $FLAVOUR kernel (bzImage, modules; -j$JOBS)" "$CACHE/build$SUFFIX.log" \
		make -C "$SRC" O="$OUT" -j"$JOBS" bzImage modules
	{
		echo "source: $KPACKAGE $(cat "$CACHE/source.version")"
		echo "series: $(git -C "$SRC" rev-parse HEAD) ($(git -C "$SRC" rev-list --count "$BASE_TAG..HEAD") patches)"
		echo "kernel: $(cat "$OUT/include/config/kernel.release")"
		echo "built: $(date -u +%FT%TZ)"
	} >"$OUT/pycgpu-build.txt"
}

# The series' C files compiled again with W=1, to assembly only: no object
# is replaced, so the next build stays incremental. Any warning fails.
cmd_w1() {
	local f log=$CACHE/w1$SUFFIX.log
	local -a targets=()
	while read -r f; do
		# files #included by others (i915's selftests) have no object
		[ -f "$OUT/${f%.c}.o" ] && targets+=("${f%.c}.s")
	done < <(git -C "$SRC" diff --name-only "$BASE_TAG..HEAD" -- '*.c')
	[ "${#targets[@]}" -gt 0 ] || return 0
	run_logged "W=1 on the series' ${#targets[@]} C files" "$log" \
		make -C "$SRC" O="$OUT" -j"$JOBS" W=1 "${targets[@]}"
	if grep -q 'warning:' "$log"; then
		grep 'warning:' "$log" >&2
		die "the series' C files build with W=1 warnings"
	fi
}

# The top-level Kbuild's modules, built in a copy so that no object file
# lands in the repository (6.12 has no MO=). rsync keeps the mtimes of
# unchanged files, so this is incremental too.
cmd_ext() {
	mkdir -p "$EXT"
	rsync -a --delete --exclude '*.o' --exclude '*.ko' --exclude '.*.cmd' \
		--exclude '*.mod*' --exclude 'Module.symvers' --exclude 'modules.order' \
		--include 'Kbuild' --include 'kernel/' --include 'kernel/drivers-gpu-cgroup/' \
		--include 'kernel/drivers-gpu-cgroup/simgpu/' \
		--include 'kernel/drivers-gpu-cgroup/simgpu/*.[ch]' \
		--exclude '*' "$ROOT/" "$EXT/"
	run_logged "building the out-of-tree modules ($FLAVOUR)" "$CACHE/ext$SUFFIX.log" \
		make -C "$OUT" M="$EXT" -j"$JOBS" W=1 modules
	if grep -q 'warning:' "$CACHE/ext$SUFFIX.log"; then
		grep 'warning:' "$CACHE/ext$SUFFIX.log" >&2
		die "the out-of-tree modules build with warnings"
	fi
}

cmd_export() {
	local dir=${1:?usage: tools/kernel.sh export DIR}
	cmd_apply
	mkdir -p "$dir"
	rm -f "$dir"/*.patch
	git -C "$SRC" format-patch -q --zero-commit --no-signature -o "$(realpath "$dir")" "$BASE_TAG..HEAD"
	say "exported $(ls "$dir"/*.patch | wc -l) patches to $dir"
}

cmd_checkpatch() {
	local tmp rc=0 p
	tmp=$(mktemp -d)
	cmd_export "$tmp" >/dev/null
	# in the scratch directory: checkpatch leaves a cache file in its cwd
	for p in "$tmp"/*.patch; do
		(cd "$tmp" && "$SRC/scripts/checkpatch.pl" --strict --no-tree -q "$p") || rc=1
	done
	rm -rf "$tmp"
	[ "$rc" -eq 0 ] && say "checkpatch --strict: clean"
	return "$rc"
}

cmd_info() {
	cat "$OUT/pycgpu-build.txt" 2>/dev/null || say "nothing built yet"
}

cmd_all() {
	cmd_apply
	cmd_config
	cmd_build
	cmd_w1
	cmd_ext
}

case "${1:-all}" in
	all|prepare|apply|config|build|w1|ext|checkpatch|info) "cmd_${1:-all}" ;;
	export) shift; cmd_export "$@" ;;
	*) sed -n '2,/^set/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//'; exit 2 ;;
esac
