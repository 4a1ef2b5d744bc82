#!/usr/bin/env bash
# Runs inside the VM (started by tools/vm.sh run): the command, then the
# kernel log and the command's status into $PYCGPU_VM_OUT for the host.
set -u
cd "$(dirname "$0")/.." || exit 1
export PYCGPU_IN_VM=1 PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1
# cgroup2 is mounted by virtme-ng's init; make sure, for older versions.
if ! grep -q ' /sys/fs/cgroup cgroup2 ' /proc/mounts; then
	mount -t cgroup2 none /sys/fs/cgroup
fi
# debugfs: kmemleak and fault injection live there
if ! grep -q ' /sys/kernel/debug debugfs ' /proc/mounts; then
	mount -t debugfs none /sys/kernel/debug 2>/dev/null
fi
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
