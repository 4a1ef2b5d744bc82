"""`pycgpu exec` in a real subprocess (it replaces the process) on a plain
fake tree: the pid lands in cgroup.procs and the status passes through."""

from __future__ import annotations

import subprocess
import sys

import pytest


@pytest.fixture
def root(tmp_path):
    root = tmp_path / "cgroup"
    (root / "a").mkdir(parents=True)
    (root / "cgroup.controllers").write_text("cpu gpu\n")
    (root / "a" / "cgroup.procs").write_text("")
    return root


def pycgpu(root, *args):
    return subprocess.run([sys.executable, "-m", "pycgpu", "--cgroup-root", str(root), *args],
                          capture_output=True, text=True, timeout=60)


def test_exec_writes_own_pid_then_runs_the_command(root):
    r = pycgpu(root, "exec", "a", "--", "sh", "-c", "echo $$")
    assert r.returncode == 0, r.stderr
    # the shell's pid is pycgpu's: exec replaced pycgpu after it joined the group
    assert (root / "a" / "cgroup.procs").read_text().strip() == r.stdout.strip()


def test_exec_true(root):
    r = pycgpu(root, "exec", "/a", "--", "true")
    assert r.returncode == 0
    assert int((root / "a" / "cgroup.procs").read_text()) > 1


@pytest.mark.parametrize("status", [1, 2, 7, 255])
def test_exit_status_passes_through(root, status):
    assert pycgpu(root, "exec", "a", "--", "sh", "-c", f"exit {status}").returncode == status


def test_command_options_are_not_pycgpu_options(root):
    r = pycgpu(root, "exec", "a", "--", "sh", "-c", 'echo "$1"', "_", "--help")
    assert r.stdout == "--help\n"
    r = pycgpu(root, "exec", "a", "echo", "--dry-run", "-x")  # no --: still the command's
    assert r.stdout == "--dry-run -x\n"


def test_command_not_found(root):
    r = pycgpu(root, "exec", "a", "--", "no-such-command-pycgpu")
    assert r.returncode == 127
    assert r.stderr.strip() == "Error: no-such-command-pycgpu: command not found"


def test_command_not_executable(root, tmp_path):
    script = tmp_path / "script"
    script.write_text("#!/bin/sh\n")
    r = pycgpu(root, "exec", "a", "--", str(script))
    assert r.returncode == 126
    assert "cannot execute" in r.stderr


def test_missing_group_runs_nothing(root, tmp_path):
    marker = tmp_path / "ran"
    r = pycgpu(root, "exec", "b", "--", "touch", str(marker))
    assert r.returncode == 2
    assert "cgroup /b does not exist (create it: pycgpu create /b)" in r.stderr
    assert not marker.exists()


def test_refused_move_runs_nothing(root, tmp_path):
    (root / "a" / "cgroup.procs").unlink()
    (root / "a" / "cgroup.procs").mkdir()  # open(O_WRONLY) fails with EISDIR
    marker = tmp_path / "ran"
    r = pycgpu(root, "exec", "a", "--", "touch", str(marker))
    assert r.returncode == 1
    assert "cgroup.procs" in r.stderr
    assert not marker.exists()


def test_dry_run(cli):
    cli.fake.make("a")
    r = cli("exec", "--dry-run", "a", "--", "echo", "hi")
    lines = r.output.splitlines()
    assert lines[0].startswith("would write '") and lines[0].endswith("/a/cgroup.procs")
    assert lines[1].startswith("would exec echo hi (/")
    assert cli.fake.read("a/cgroup.procs") == ""


def test_dry_run_after_path_writes_and_runs_nothing(root, tmp_path):
    marker = tmp_path / "ran"
    r = pycgpu(root, "exec", "a", "--dry-run", "--", "touch", str(marker))
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[1].startswith(f"would exec touch {marker} (/")
    assert (root / "a" / "cgroup.procs").read_text() == ""
    assert not marker.exists()


def test_dry_run_checks_the_command(root):
    r = pycgpu(root, "exec", "a", "--dry-run", "--", "no-such-command-pycgpu")
    assert r.returncode == 127
    assert r.stderr.strip() == "Error: no-such-command-pycgpu: command not found"
    assert (root / "a" / "cgroup.procs").read_text() == ""


def test_dry_run_checks_the_group_takes_processes(root):
    (root / "a" / "cgroup.subtree_control").write_text("gpu\n")
    r = pycgpu(root, "exec", "--dry-run", "a", "--", "true")
    assert r.returncode == 1
    assert "has controllers enabled for its children (gpu)" in r.stderr
    assert (root / "a" / "cgroup.procs").read_text() == ""


def test_unknown_option_before_command_runs_nothing(root, tmp_path):
    r = pycgpu(root, "exec", "a", "--dry-runn", "--", "true")
    assert r.returncode == 2
    assert "no such option '--dry-runn' before COMMAND" in r.stderr
    assert (root / "a" / "cgroup.procs").read_text() == ""
