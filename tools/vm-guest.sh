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
bash -c "$1"
rc=$?
dmesg >"$PYCGPU_VM_OUT/dmesg"
echo "$rc" >"$PYCGPU_VM_OUT/status"
exit "$rc"
