#!/usr/bin/env bash
# Installs what the project needs on a Debian 12 host, idempotently:
#   tools/setup-host.sh          Debian packages (as root) and the Python venv
#   tools/setup-host.sh venv     only the Python venv (.venv, no root needed)
# apt-get runs only when a package is missing, so repeated runs take seconds.
set -euo pipefail
. "$(dirname "$0")/common.sh"

DEBS=(
	linux-source-6.12 qemu-system-x86 bc bison flex libelf-dev libssl-dev
	cpio busybox-static runc crun kmod xz-utils rsync make gcc git
	python3 python3-venv python3-pip udev libudev1 prometheus podman
	gcc-aarch64-linux-gnu binutils-aarch64-linux-gnu
)

setup_debs() {
	local missing=() p
	for p in "${DEBS[@]}"; do
		dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'ok installed' || missing+=("$p")
	done
	[ ${#missing[@]} -eq 0 ] && return 0
	if [ "$(id -u)" -ne 0 ]; then
		die "missing Debian packages: ${missing[*]} (run as root: apt-get install ${missing[*]})"
	fi
	say "installing ${missing[*]}"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -q >/dev/null
	apt-get install -y -q --no-install-recommends "${missing[@]}" >"$CACHE/apt.log" 2>&1 ||
		{ tail -n 20 "$CACHE/apt.log" >&2; die "apt-get install failed"; }
}

# The venv is rebuilt when pyproject.toml, setup.py or a .proto changes (the
# install generates the gRPC stubs: setup.py).
setup_venv() {
	local stamp=$VENV/.pycgpu-stamp want
	want=$(cat "$ROOT/pyproject.toml" "$ROOT/setup.py" "$ROOT"/pycgpu/k8s/api/*.proto |
		sha256sum | cut -c1-16)
	if [ -x "$VENV/bin/python" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$want" ]; then
		return 0
	fi
	say "creating the Python venv in .venv"
	python3 -m venv "$VENV"
	"$VENV/bin/pip" install -q --upgrade pip >"$CACHE/pip.log" 2>&1 || true
	"$VENV/bin/pip" install -q -e "$ROOT[test,vm,bench,k8s]" >>"$CACHE/pip.log" 2>&1 ||
		{ tail -n 20 "$CACHE/pip.log" >&2; die "pip install failed"; }
	echo "$want" >"$stamp"
}

mkdir -p "$CACHE"
case "${1:-all}" in
	all) setup_debs; setup_venv ;;
	venv) setup_venv ;;
	*) die "usage: tools/setup-host.sh [venv]" ;;
esac
