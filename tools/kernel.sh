#!/usr/bin/env bash
# Builds the patched test kernel and the out-of-tree modules.
#
#   tools/kernel.sh [all]        prepare + apply + config + build + ext
#   tools/kernel.sh prepare      unpack Debian's linux-source-$PYCGPU_BASE into the cache (once;
#                                7.3's package is fetched from trixie-backports first)
#   tools/kernel.sh apply        make the tree match kernel/drivers-gpu-cgroup/BASE/series
#   tools/kernel.sh config       virtme-ng defconfig + kernel/drivers-gpu-cgroup/vm.config
#                                + BASE/vm.config (+ NAME.config with PYCGPU_FLAVOUR=NAME,
#                                built apart: debug, kmemleak)
#   tools/kernel.sh build        bzImage and modules, incrementally
#   tools/kernel.sh w1           the series' C files again with W=1 (warnings fail)
#   tools/kernel.sh ext          the out-of-tree modules of the top-level Kbuild
#   tools/kernel.sh export DIR   the series as git format-patch files
#   tools/kernel.sh checkpatch   scripts/checkpatch.pl --strict on the series
#   tools/kernel.sh info         what was built from what
#   tools/kernel.sh refresh      the series' patches and files back from the tree's commits
#                                (after editing the series as commits in the cache's tree)
#
# PYCGPU_BASE (6.12, the default, or 7.3) selects the kernel and its series
# (kernel/drivers-gpu-cgroup/BASE/series). Everything lives under
# $PYCGPU_CACHE/BASE (default ~/.cache/pycgpu), never in the repository, so
# rebuilds are incremental and each base keeps its own trees.
set -euo pipefail
. "$(dirname "$0")/common.sh"

BASE_TAG=pycgpu-base
BRANCH=pycgpu-series

# The suite of Debian's archive that carries a base's source package when
# the host's own release does not (bookworm has linux-source-6.12 only).
SUITE_7_3=trixie-backports

# The Debian archive apt already uses (no host name is written here): the
# first source whose release file says it is Debian's own, not security;
# before apt-get update has fetched any release file, the first URI of
# apt's sources that is not a security one.
debian_archive() {
	local uri
	uri=$(apt-cache policy 2>/dev/null | awk '
		/^ *-?[0-9]+ [a-z]+:\/\// { uri = $2; next }
		/release .*o=Debian,.*l=Debian,/ && uri { print uri; exit }')
	if [ -z "$uri" ]; then
		uri=$(cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list \
			/etc/apt/sources.list.d/*.sources 2>/dev/null |
			grep -v -e '^[[:space:]]*#' -e security |
			grep -o -E 'https?://[^[:space:]]+' | head -n 1)
	fi
	echo "$uri"
}

# Downloads $KPACKAGE from $SUITE_7_3 into the cache with a private apt
# state (the host's sources and packages stay as they are) and extracts its
# tarball. Checks the suite at most once a day; offline, a tarball already
# fetched is used as it is.
fetch_package() {
	local dir=$KCACHE/apt archive ver deb stamp=$KCACHE/apt/checked
	local -a apt
	mkdir -p "$dir/lists/partial" "$dir/cache/archives/partial"
	apt=(-o "Dir::Etc::SourceList=$dir/sources.list" -o Dir::Etc::SourceParts=-
		-o "Dir::State::Lists=$dir/lists" -o "Dir::Cache=$dir/cache"
		-o APT::Sandbox::User=root -o Debug::NoLocking=1)
	if [ -f "$dir/$KPACKAGE.tar.xz" ] && [ -n "$(find "$stamp" -mmin -1440 2>/dev/null)" ]; then
		return 0
	fi
	archive=$(debian_archive)
	if [ -z "$archive" ]; then
		[ -f "$dir/$KPACKAGE.tar.xz" ] && return 0
		die "$KPACKAGE comes from Debian's $SUITE_7_3, and apt has no Debian archive in its sources: add one (or set PYCGPU_KERNEL_TARBALL to a $KPACKAGE tarball)"
	fi
	echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $archive $SUITE_7_3 main" \
		>"$dir/sources.list"
	if ! apt-get "${apt[@]}" -q update >"$dir/update.log" 2>&1; then
		if [ -f "$dir/$KPACKAGE.tar.xz" ]; then
			say "could not check $SUITE_7_3 for a newer $KPACKAGE: building on the one fetched before"
			return 0
		fi
		die "$KPACKAGE: apt-get update of $SUITE_7_3 failed (log: $dir/update.log; or set PYCGPU_KERNEL_TARBALL)"
	fi
	ver=$(apt-cache "${apt[@]}" show --no-all-versions "$KPACKAGE" 2>/dev/null |
		sed -n 's/^Version: //p' | head -n 1)
	[ -n "$ver" ] || die "$KPACKAGE is not in Debian's $SUITE_7_3 (set PYCGPU_KERNEL_TARBALL to a $KPACKAGE tarball)"
	if [ "$(cat "$dir/version" 2>/dev/null)" != "$ver" ] || [ ! -f "$dir/$KPACKAGE.tar.xz" ]; then
		rm -f "$dir"/*.deb
		run_logged "downloading $KPACKAGE $ver from $SUITE_7_3" "$dir/download.log" \
			bash -c "cd '$dir' && apt-get $(printf '%q ' "${apt[@]}") -q download '$KPACKAGE=$ver'"
		deb=$(ls "$dir"/*.deb)
		dpkg-deb --fsys-tarfile "$deb" | tar -xO "./usr/src/$KPACKAGE.tar.xz" >"$dir/$KPACKAGE.tar.xz.new"
		mv "$dir/$KPACKAGE.tar.xz.new" "$dir/$KPACKAGE.tar.xz"
		rm -f "$deb"
		echo "$ver" >"$dir/version"
	fi
	touch "$stamp"
}

# The base's tarball: PYCGPU_KERNEL_TARBALL, Debian's installed package, or
# (7.3) the package fetched into the cache.
source_tarball() {
	if [ -n "$KTARBALL" ]; then
		[ -f "$KTARBALL" ] || die "PYCGPU_KERNEL_TARBALL=$KTARBALL does not exist"
		echo "$KTARBALL"
	elif [ -f "/usr/src/$KPACKAGE.tar.xz" ]; then
		echo "/usr/src/$KPACKAGE.tar.xz"
	elif [ "$BASE" = 6.12 ]; then
		die "/usr/src/$KPACKAGE.tar.xz is missing: run tools/setup-host.sh (installs $KPACKAGE)"
	else
		fetch_package
		echo "$KCACHE/apt/$KPACKAGE.tar.xz"
	fi
}

tarball_version() {
	local tarball=$1
	if [ -n "$KTARBALL" ]; then
		stat -c %Y "$tarball"
	elif [ "$tarball" = "/usr/src/$KPACKAGE.tar.xz" ]; then
		dpkg-query -W -f='${Version}' "$KPACKAGE"
	else
		cat "$KCACHE/apt/version"
	fi
}

# The Debian version the series was made on (a "# made on: VERSION" line of
# its series file); a newer one in the suite is a rebase, said in one line.
series_made_on() {
	sed -n 's/^# made on: *//p' "$BASE_DIR/series" | head -n 1
}

# A git repository of the pristine tree, so that the series can be applied
# again and again without ever patching twice.
cmd_prepare() {
	local want have="" tarball made
	tarball=$(source_tarball)
	want=$(tarball_version "$tarball")
	made=$(series_made_on)
	if [ -n "$made" ] && [ "$made" != "$want" ]; then
		say "$KPACKAGE is $want; the $BASE series was made on $made: a rebase if it does not apply"
	fi
	[ -f "$KCACHE/source.version" ] && have=$(cat "$KCACHE/source.version")
	if [ "$have" = "$want" ] && git -C "$SRC" rev-parse -q --verify "$BASE_TAG" >/dev/null; then
		return 0
	fi
	rm -rf "$SRC" "$OUT" "$KCACHE/source.version" "$KCACHE/unpack"
	mkdir -p "$KCACHE/unpack"
	run_logged "unpacking $KPACKAGE $want" "$KCACHE/unpack.log" \
		tar -C "$KCACHE/unpack" -xf "$tarball"
	mv "$KCACHE"/unpack/linux-source-* "$SRC"
	rmdir "$KCACHE/unpack"
	# Debian's .gitignore ignores the whole top level: add with -f.
	run_logged "recording the pristine tree" "$KCACHE/unpack.log" bash -c "
		cd '$SRC' && git init -q -b base . &&
		git add -f -A . &&
		git -c user.name=pycgpu -c user.email=pycgpu@localhost \
			commit -q -m 'Debian $KPACKAGE $want' &&
		git tag $BASE_TAG"
	echo "$want" >"$KCACHE/source.version"
}

series_lines() {
	grep -v -e '^#' -e '^[[:space:]]*$' "$BASE_DIR/series"
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
				die "$patch does not apply to $KPACKAGE $(cat "$KCACHE/source.version"): the $BASE series needs a rebase"
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

# "cat A B" where options B sets replace A's lines for them.
overlay() {
	awk 'function opt(l) { sub(/^# /, "", l); sub(/[= ].*/, "", l); return l }
		NR == FNR { if ($0 ~ /^(# )?CONFIG_/) over[opt($0)] = 1; next }
		!($0 ~ /^(# )?CONFIG_/ && opt($0) in over)' "$2" "$1"
	cat "$2"
}

# The config fragment: vm.config, then the base's vm.config (BASE/vm.config,
# if any), then for a flavour other than test its NAME.config; each one's
# options replace those of the ones before.
flavour_fragment() {
	local tmp
	tmp=$(mktemp)
	cat "$SERIES_DIR/vm.config" >"$tmp"
	if [ -f "$BASE_DIR/vm.config" ]; then
		overlay "$tmp" "$BASE_DIR/vm.config" >"$tmp.2" && mv "$tmp.2" "$tmp"
	fi
	if [ "$FLAVOUR" != test ]; then
		overlay "$tmp" "$SERIES_DIR/$FLAVOUR.config" >"$tmp.2" && mv "$tmp.2" "$tmp"
	fi
	cat "$tmp"
	rm -f "$tmp"
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
	run_logged "configuring $FLAVOUR (virtme-ng defconfig + fragment)" "$KCACHE/config$SUFFIX.log" \
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
	run_logged "building the $FLAVOUR kernel (bzImage, modules; -j$JOBS)" "$KCACHE/build$SUFFIX.log" \
		make -C "$SRC" O="$OUT" -j"$JOBS" bzImage modules
	{
		echo "source: $KPACKAGE $(cat "$KCACHE/source.version")"
		echo "series: $(git -C "$SRC" rev-parse HEAD) ($(git -C "$SRC" rev-list --count "$BASE_TAG..HEAD") patches)"
		echo "kernel: $(cat "$OUT/include/config/kernel.release")"
		echo "built: $(date -u +%FT%TZ)"
	} >"$OUT/pycgpu-build.txt"
}

# The series' C files compiled again with W=1, to assembly only: no object
# is replaced, so the next build stays incremental. Any warning fails.
cmd_w1() {
	local f log=$KCACHE/w1$SUFFIX.log
	local -a targets=()
	while read -r f; do
		# files #included by others (i915's selftests) have no object
		[ -f "$OUT/${f%.c}.o" ] && targets+=("${f%.c}.s")
	done < <(git -C "$SRC" diff --name-only "$BASE_TAG..HEAD" -- '*.c')
	[ "${#targets[@]}" -gt 0 ] || return 0
	run_logged "W=1 on the series' ${#targets[@]} C files" "$log" \
		make -C "$SRC" O="$OUT" -j"$JOBS" W=1 "${targets[@]}"
	no_warnings "$log" "the series' C files build with W=1 warnings"
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
	run_logged "building the out-of-tree modules ($FLAVOUR)" "$KCACHE/ext$SUFFIX.log" \
		make -C "$OUT" M="$EXT" -j"$JOBS" W=1 modules
	no_warnings "$KCACHE/ext$SUFFIX.log" "the out-of-tree modules build with warnings"
}

cmd_export() {
	local dir=${1:?usage: tools/kernel.sh export DIR}
	cmd_apply
	mkdir -p "$dir"
	rm -f "$dir"/*.patch
	git -C "$SRC" -c core.abbrev=9 format-patch -q -n --zero-commit --no-signature -o "$(realpath "$dir")" "$BASE_TAG..HEAD"
	# the cover letter, BASE/cover-letter, with the shortlog and diffstat
	if [ -f "$BASE_DIR/cover-letter" ]; then
		{
			echo "From 0000000000000000000000000000000000000000 Mon Sep 17 00:00:00 2001"
			git -C "$SRC" log -1 --format='From: %an <%ae>' "$BASE_TAG..HEAD"
			git -C "$SRC" log -1 --format='Date: %aD' HEAD
			cat "$BASE_DIR/cover-letter"
			echo
			git -C "$SRC" shortlog "$BASE_TAG..HEAD"
			git -C "$SRC" diff --stat=72 "$BASE_TAG..HEAD"
		} >"$dir/0000-cover-letter.patch"
	fi
	say "exported $(ls "$dir"/*.patch | wc -l) patches to $dir"
}

# The other way round, for whoever edits the series in the cache's tree:
# the commits on top of the pristine tree become the series' patches again,
# one for each line of BASE/series in order. The files the series adds from
# this directory are edited here, not in the tree (the shared ones belong to
# both bases): only one that is missing here is copied from the tree.
cmd_refresh() {
	local -a commits lines paths=()
	local i patch files f src dst tmp
	mapfile -t commits < <(git -C "$SRC" rev-list --reverse "$BASE_TAG..HEAD")
	mapfile -t lines < <(series_lines)
	[ "${#commits[@]}" -eq "${#lines[@]}" ] ||
		die "the tree has ${#commits[@]} commits on $BASE_TAG, $BASE/series names ${#lines[@]}"
	tmp=$(mktemp -d)
	for i in "${!commits[@]}"; do
		read -r patch files <<<"${lines[$i]}"
		for f in $files; do
			src=${f%%:*} dst=${f#*:}
			paths+=(":(exclude)$dst")
			git -C "$SRC" show "${commits[$i]}:$dst" >"$tmp/f"
			if [ ! -f "$SERIES_DIR/$src" ]; then
				mv "$tmp/f" "$SERIES_DIR/$src"
			elif ! cmp -s "$tmp/f" "$SERIES_DIR/$src"; then
				say "kept kernel/drivers-gpu-cgroup/$src, which differs from the tree's $dst (edit it here, then apply)"
			fi
		done
	done
	# numbered as a series, blank context lines without
	# their trailing space (git apply takes them so)
	git -C "$SRC" -c core.abbrev=9 format-patch -q -n --zero-commit --no-signature \
		-o "$tmp/out" "$BASE_TAG..HEAD" -- . "${paths[@]}"
	mapfile -t files < <(ls "$tmp"/out/*.patch)
	for i in "${!commits[@]}"; do
		read -r patch _ <<<"${lines[$i]}"
		sed 's/^ $//' "${files[$i]}" >"$SERIES_DIR/$patch"
	done
	rm -rf "$tmp"
	say "refreshed ${#commits[@]} patches of the $BASE series from $(git -C "$SRC" rev-parse --short HEAD)"
}

cmd_checkpatch() {
	local tmp rc=0 p
	tmp=$(mktemp -d)
	cmd_export "$tmp" >/dev/null
	# in the scratch directory: checkpatch leaves a cache file in its cwd
	for p in "$tmp"/*.patch; do
		case $p in */0000-cover-letter.patch) continue ;; esac
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
	all|prepare|apply|config|build|w1|ext|checkpatch|info|refresh) "cmd_${1:-all}" ;;
	export) shift; cmd_export "$@" ;;
	*) sed -n '2,/^set/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//'; exit 2 ;;
esac
