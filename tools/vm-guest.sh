#!/usr/bin/env bash
# Runs inside the VM (started by tools/vm.sh run): the command, then the
# kernel log and the command's status into $PYCGPU_VM_OUT for the host.
set -u
cd "$(dirname "$0")/.." || exit 1
export PYCGPU_IN_VM=1 PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1
# the host boots once more a guest that died before this line
touch "$PYCGPU_VM_OUT/started"
# cgroup2 is mounted by virtme-ng's init; make sure, for older versions.
if ! grep -q ' /sys/fs/cgroup cgroup2 ' /proc/mounts; then
	mount -t cgroup2 none /sys/fs/cgroup
fi
# debugfs: kmemleak and fault injection live there
if ! grep -q ' /sys/kernel/debug debugfs ' /proc/mounts; then
	mount -t debugfs none /sys/kernel/debug 2>/dev/null
fi
# TCG and static keys flipped under a running vCPU (tools/vm.sh): the
# first memory cgroup switches memcg_kmem_online_key on for good, and each
# memory cgroup counts in memcg_sockets_enabled_key and
# memcg_bpf_enabled_key, so the first container of a run, and every cgroup
# the tests made and removed once runc had left +memory in the root's
# subtree_control, patched the kernel's text while it ran (an "Oops: int3"
# in kmem_cache_free, once in a clean-clone run). A memory cgroup kept for
# the whole run flips them now, while nothing else runs, and never again:
# +memory stays in the root's subtree_control, as runc leaves it.
if grep -qw memory /sys/fs/cgroup/cgroup.controllers 2>/dev/null; then
	{ echo +memory >/sys/fs/cgroup/cgroup.subtree_control &&
		mkdir -p /sys/fs/cgroup/pycgpu-vm-static-keys; } ||
		echo "vm-guest.sh: no memory cgroup kept for the static keys" >&2
fi
# drm_sched, a module on 7.3, with the options of the kernel command line
# (simgpu is loaded with insmod, which resolves no dependency)
modprobe -q gpu-sched 2>/dev/null || true
# TTM, a module on 7.3, which simgpu's simulated VRAM builds on there
modprobe -q ttm 2>/dev/null || true
bash -c "$1"
rc=$?
# a kernel with kmemleak: scan twice (objects must stay unreferenced) and
# hand the report over; an empty report is no leak
if [ -w /sys/kernel/debug/kmemleak ]; then
	echo scan >/sys/kernel/debug/kmemleak
	sleep 5
	echo scan >/sys/kernel/debug/kmemleak
	cat /sys/kernel/debug/kmemleak >"$PYCGPU_VM_OUT/kmemleak"
fi
dmesg >"$PYCGPU_VM_OUT/dmesg"
echo "$rc" >"$PYCGPU_VM_OUT/status"
exit "$rc"
