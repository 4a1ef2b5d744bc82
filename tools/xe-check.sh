#!/usr/bin/env bash
# Checks the gpu cgroup controller on a real Intel GPU driven by xe (Lunar
# Lake, Battlemage and later; earlier ones with xe.force_probe): run as
# root on a machine booted with a kernel that carries the series (see
# kernel/drivers-gpu-cgroup/README). Nothing here runs in the VM.
#
#   tools/xe-check.sh [weights|priority] [SECONDS]
#       Two copies of a GPU load, each in its own cgroup, for SECONDS
#       (default 20): weights puts them at gpu.weight 300 and 100 (want
#       3:1; GuC realizes it through each exec queue's timeslice, followed
#       every 100 ms), priority at gpu.priority 5 and 0 (want nearly all to
#       the first: its exec queues run in GuC's high band). Prints the
#       device's sched flag, each cgroup's gpu.stat usage, the same
#       clients' fdinfo time (xe's drm-cycles-*, converted at the rate its
#       drm-total-cycles-* advance; gpu.stat charges the same counter, so
#       the two columns should agree), and the ratio achieved
#       (tools/drm-check.sh).
#
# The load is $LOAD, run through sh -c (default: glmark2-es2-drm off
# screen, Debian package glmark2-es2-drm, on Mesa's iris); it must keep the
# GPU busy. Weights hold between exec queues of one band that both keep
# the engine busy; a queue at HIGH priority of its own (CAP_SYS_NICE) ties
# with cgroups above 0. Under SR-IOV (a VF) xe has no drm-total-cycles-*
# and the fdinfo column cannot be had.
set -euo pipefail
# shellcheck source=tools/drm-check.sh
. "$(dirname "$0")/drm-check.sh"
TOP=pycgpu-xe-check
driver_check xe "$0" "$@"
