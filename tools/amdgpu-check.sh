#!/usr/bin/env bash
# Checks the gpu cgroup controller on a real AMD GPU: run as root on a
# machine booted with a kernel that carries the series (see
# kernel/drivers-gpu-cgroup/README). Nothing here runs in the VM.
#
#   tools/amdgpu-check.sh [weights|priority] [SECONDS]
#       Two copies of a GPU load on amdgpu's kernel rings (graphics, through
#       Mesa), each in its own cgroup, for SECONDS (default 20): weights
#       puts them at gpu.weight 300 and 100 (want 3:1), priority at
#       gpu.priority 5 and 0 (want nearly all to the first). Prints the
#       device's sched flag, each cgroup's gpu.stat usage, the same
#       clients' fdinfo engine time (amdgpu's drm-engine-gfx and others),
#       and the ratio achieved (tools/drm-check.sh).
#
# The load is $LOAD, run through sh -c (default: glmark2-es2-drm off
# screen, Debian package glmark2-es2-drm); it must keep the GPU busy. ROCm
# (HIP, OpenCL on amdkfd) is no load for this check: its compute queues do
# not go through drm_sched, so the controller neither charges nor orders
# them. On Linux 7.x drm_sched's RR policy (gpu_sched.sched_policy=0) orders
# nothing by cgroup.
set -euo pipefail
# shellcheck source=tools/drm-check.sh
. "$(dirname "$0")/drm-check.sh"
TOP=pycgpu-amdgpu-check
driver_check amdgpu "$0" "$@"
