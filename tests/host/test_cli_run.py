"""`pycgpu run` on the fake kernel (conftest.FakeKernel), in-process: the
group is made with the knobs, COMMAND runs in it (a real child process,
which writes its pid to the group's cgroup.procs) and the groups run made
are removed when it ends; the status is COMMAND's."""

from __future__ import annotations

import os
import signal
import threading

import pytest


def test_run_makes_the_group_runs_in_it_and_removes_it(cli, tmp_path):
    cli.fake.make("batch")
    out = tmp_path / "out"
    cli("run", "--weight", "300", "--max", "30%", "batch/job", "--",
        "sh", "-c", f'cat "$0" > {out}', str(cli.fake.root / "batch/job/gpu.max"))
    assert out.read_text() == "default 30000 100000\n"  # the knob was there while it ran
    assert not (cli.fake.root / "batch" / "job").exists()
    assert (cli.fake.root / "batch").exists()  # not run's: it stays


def test_the_command_is_in_the_group_and_keep_leaves_it(cli, tmp_path):
    out = tmp_path / "out"
    cli("run", "--weight", "300", "--keep", "a/b", "sh", "-c", f"echo $$ > {out}")
    assert cli.fake.read("a/b/cgroup.procs").split() == [out.read_text().strip()]
    assert cli.fake.read("a/b/gpu.weight") == "default 300\n"


def test_parents_run_made_are_removed_too(cli):
    cli("run", "x/y/z", "--", "true")
    assert not (cli.fake.root / "x").exists()


@pytest.mark.parametrize("status", [0, 1, 7, 255])
def test_the_status_is_the_commands(cli, status):
    cli("run", "a", "--", "sh", "-c", f"exit {status}", code=status)
    assert not (cli.fake.root / "a").exists()


def test_a_command_a_signal_ended_gives_128_plus_it(cli):
    cli("run", "a", "--", "sh", "-c", "kill -KILL $$", code=128 + signal.SIGKILL)
    assert not (cli.fake.root / "a").exists()


def test_sigterm_to_pycgpu_is_passed_on(cli):
    """SIGTERM to pycgpu while it waits ends COMMAND (not pycgpu), whose
    status then says so; pycgpu's own disposition is back afterwards."""
    before = signal.getsignal(signal.SIGTERM)
    timer = threading.Timer(1.0, os.kill, (os.getpid(), signal.SIGTERM))
    timer.start()
    try:
        cli("run", "a", "--", "sleep", "30", code=128 + signal.SIGTERM)
    finally:
        timer.cancel()
    assert signal.getsignal(signal.SIGTERM) == before
    assert not (cli.fake.root / "a").exists()


def test_command_not_found_leaves_nothing(cli):
    r = cli("run", "--weight", "50", "a/b", "--", "no-such-command-pycgpu", code=127)
    assert "Error: no-such-command-pycgpu: command not found" in r.output
    assert not (cli.fake.root / "a").exists()


def test_command_not_executable_leaves_nothing(cli, tmp_path):
    script = tmp_path / "script"
    script.write_text("#!/bin/sh\n")
    r = cli("run", "a", "--", str(script), code=126)
    assert f"Error: cannot execute {script}: Permission denied" in r.output
    assert not (cli.fake.root / "a").exists()


def test_an_existing_group_is_refused_and_nothing_runs(cli, tmp_path):
    cli.fake.make("a")
    out = tmp_path / "out"
    r = cli("run", "a", "--", "sh", "-c", f"touch {out}", code=2)
    assert "cgroup /a already exists" in r.output
    assert not out.exists()
    assert (cli.fake.root / "a").exists()


def test_a_refused_knob_runs_nothing(cli, tmp_path):
    out = tmp_path / "out"
    r = cli("run", "--weight", "0", "a", "--", "sh", "-c", f"touch {out}", code=2)
    assert "weight" in r.output
    assert not out.exists()
    assert not (cli.fake.root / "a").exists()


def test_options_go_before_path(cli):
    r = cli("run", "a", "--weight", "5", "true", code=2)
    assert "'--weight' after PATH: pycgpu's options go before PATH" in r.output
    assert not (cli.fake.root / "a").exists()
    r = cli("run", "a", code=2)
    assert "Missing argument 'COMMAND...'" in r.output


def test_dry_run_changes_nothing(cli):
    cli.fake.make("batch")
    before = cli.fake.snapshot()
    r = cli("run", "--max", "30%", "--dry-run", "batch/job", "--", "echo", "a b")
    root = cli.fake.root
    assert f"would mkdir {root}/batch/job" in r.output
    assert f"would run echo 'a b' in {root}/batch/job" in r.output
    assert f"would rmdir {root}/batch/job once it is empty" in r.output
    assert cli.fake.snapshot() == before


def test_sigint_reaches_the_command_not_pycgpu(cli, tmp_path):
    """pycgpu ignores SIGINT while it waits (a terminal sends it to COMMAND
    too), and COMMAND gets the caller's disposition back, not the ignore."""
    out = tmp_path / "out"
    cli("run", "a", "--", "sh", "-c", f"grep SigIgn /proc/$$/status > {out}")
    ignored = int(out.read_text().split()[1], 16)
    assert not ignored & (1 << (signal.SIGINT - 1))


def test_a_signal_during_the_set_up_runs_nothing_and_removes_the_group(cli, tmp_path,
                                                                       monkeypatch):
    """SIGTERM while the group is made waits for it to be made; then
    COMMAND does not run, the group goes and the status says the signal."""
    from pycgpu.core import knobs

    apply = knobs.apply

    def apply_then_signal(plan, *args, **kw):
        apply(plan, *args, **kw)
        signal.pthread_kill(threading.main_thread().ident, signal.SIGTERM)

    monkeypatch.setattr(knobs, "apply", apply_then_signal)
    out = tmp_path / "out"
    r = cli("run", "a", "--", "sh", "-c", f"touch {out}", code=128 + signal.SIGTERM)
    assert "Error: SIGTERM came as the group was made; COMMAND did not run" in r.output
    assert not out.exists()
    assert not (cli.fake.root / "a").exists()


def test_a_signal_the_caller_ignores_stays_ignored(cli, tmp_path):
    """nohup pycgpu run ...: COMMAND keeps SIGHUP ignored."""
    out = tmp_path / "out"
    before = signal.signal(signal.SIGHUP, signal.SIG_IGN)
    try:
        cli("run", "a", "--", "sh", "-c", f"grep SigIgn /proc/$$/status > {out}")
    finally:
        signal.signal(signal.SIGHUP, before)
    ignored = int(out.read_text().split()[1], 16)
    assert ignored & (1 << (signal.SIGHUP - 1))
    assert signal.getsignal(signal.SIGHUP) == before
