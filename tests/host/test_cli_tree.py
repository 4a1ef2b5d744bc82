"""`pycgpu create`, `set` and `rm` on the fake kernel (conftest.FakeKernel):
validation before any write, all-or-none with rollback, --dry-run."""

from __future__ import annotations

import errno
import os

import pytest

from pycgpu.core.cgroup import Cgroup


def read(cli, rel):
    return cli.fake.read(rel)


# create ------------------------------------------------------------------------


def test_create_with_every_knob(cli):
    cli("create", "a/b", "--weight", "300", "--weight", "renderD128=50", "--priority", "-5",
        "--memory-max", "card1=512M", "--memory-max", "00:02.0=max")
    root = cli.fake.root
    assert (root / "a" / "b").is_dir()
    assert read(cli, "cgroup.subtree_control").split() == ["gpu"]
    assert read(cli, "a/cgroup.subtree_control").split() == ["gpu"]
    assert read(cli, "a/b/cgroup.subtree_control").split() == []  # the target stays a leaf
    assert read(cli, "a/b/gpu.weight") == "default 300\n226:128 50\n"
    assert read(cli, "a/b/gpu.priority") == "-5\n"
    assert read(cli, "a/b/gpu.memory.max") == "226:128 max\n226:129 536870912\n"
    assert cli.fake.log == [
        ("cgroup.subtree_control", "+gpu"),
        ("a/cgroup.subtree_control", "+gpu"),
        ("a/b/gpu.weight", "default 300"),
        ("a/b/gpu.weight", "226:128 50"),
        ("a/b/gpu.priority", "-5"),
        ("a/b/gpu.memory.max", "226:128 max"),
        ("a/b/gpu.memory.max", "226:129 536870912"),
    ]


def test_create_plain_and_absolute_path(cli):
    cli("create", str(cli.fake.root / "x" / "y"))
    assert (cli.fake.root / "x" / "y" / "gpu.weight").is_file()
    cli("create", "/z")
    assert (cli.fake.root / "z" / "gpu.weight").is_file()


def test_create_existing(cli):
    cli.fake.make("a")
    before = cli.fake.snapshot()
    r = cli("create", "a", "--priority", "7", code=2)
    assert r.output.strip() == ("Error: cgroup /a already exists (change it with pycgpu set /a, "
                                "or pass --exist-ok)")
    assert cli.fake.snapshot() == before and cli.fake.log == []
    cli("create", "a", "--exist-ok", "--priority", "7")
    assert read(cli, "a/gpu.priority") == "7\n"


def test_create_exist_ok_enables_gpu_along_existing_path(cli):
    (cli.fake.root / "sys.slice").mkdir()
    (cli.fake.root / "sys.slice" / "cgroup.subtree_control").write_text("\n")
    (cli.fake.root / "sys.slice" / "cgroup.controllers").write_text("cpu\n")
    (cli.fake.root / "sys.slice" / "app.scope").mkdir()
    cli("create", "sys.slice/app.scope", "--exist-ok", "--weight", "20")
    assert read(cli, "sys.slice/app.scope/gpu.weight") == "default 20\n"


def test_create_root_refused(cli):
    before = cli.fake.snapshot()
    r = cli("create", "/", "--weight", "5", code=2)
    assert "root cgroup" in r.output
    assert cli.fake.snapshot() == before and cli.fake.log == []


def test_create_dry_run_writes_nothing(cli):
    before = cli.fake.snapshot()
    r = cli("create", "a/b", "--weight", "300", "--memory-max", "renderD128=1G", "--dry-run")
    root = cli.fake.root
    assert r.output.splitlines() == [
        f"would write '+gpu' to {root}/cgroup.subtree_control",
        f"would mkdir {root}/a",
        f"would write '+gpu' to {root}/a/cgroup.subtree_control",
        f"would mkdir {root}/a/b",
        f"would write 'default 300' to {root}/a/b/gpu.weight",
        f"would write '226:128 1073741824' to {root}/a/b/gpu.memory.max",
    ]
    assert cli.fake.snapshot() == before
    assert not (root / "a").exists()
    assert cli.fake.log == []


BAD = [
    (["--weight", "0"], "--weight '0': weight 0 is out of range [1, 10000]"),
    (["--weight", "10001"], "weight 10001 is out of range [1, 10000]"),
    (["--weight", "abc"], "--weight 'abc': 'abc' is not an integer (give W or DEV=W"),
    (["--weight", "default"], "--weight 'default'"),
    (["--weight", "renderD128=-1"], "weight -1 is out of range"),
    (["--weight", "renderD999=5"], "--weight 'renderD999=5': unknown device 'renderD999'; "
                                   "known devices: renderD128 (226:128, i915, 0000:00:02.0), "
                                   "renderD129 (226:129) (see pycgpu devices)"),
    (["--weight", "5", "--weight", "6"], "the default weight is given twice"),
    (["--weight", "card0=5", "--weight", "226:128=6"], "the weight of 226:128 is given twice"),
    (["--priority", "1024"], "--priority '1024': priority 1024 is out of range [-1023, 1023]"),
    (["--priority", "-1024"], "priority -1024 is out of range"),
    (["--priority", "high"], "--priority 'high': 'high' is not an integer (give N in [-1023"),
    (["--memory-max", "2G"], "--memory-max '2G': give DEV=SIZE"),
    (["--memory-max", "renderD128=2X"], "'2X' is not a size"),
    (["--memory-max", "renderD128=-1"], "'-1' is not a size"),
    (["--memory-max", "renderD128=99999999999T"], "out of range"),
    (["--memory-max", "7:7=1G"], "unknown device '7:7'"),
]


@pytest.mark.parametrize(("args", "message"), BAD)
@pytest.mark.parametrize("command", ["create", "set"])
def test_bad_values_write_nothing(cli, command, args, message):
    if command == "set":
        cli.fake.make("a")
    before = cli.fake.snapshot()
    # a valid knob first: it must not be written either
    r = cli(command, "a", "--weight", "renderD129=9", *args, code=2)
    lines = r.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: ")
    assert message in lines[0]
    assert cli.fake.snapshot() == before
    assert cli.fake.log == []


def test_create_without_controller(cli):
    (cli.fake.root / "cgroup.controllers").write_text("cpu memory\n")
    before = cli.fake.snapshot()
    r = cli("create", "a", "--weight", "5", code=1)
    assert r.output.strip() == (f"Error: no gpu controller in {cli.fake.root}/cgroup.controllers "
                                "(a kernel without CONFIG_CGROUP_GPU, or booted with "
                                "cgroup_disable=gpu); no dmem controller for GPU memory either "
                                "(fix: see pycgpu check)")
    assert not (cli.fake.root / "a").exists()
    assert cli.fake.snapshot() == before and cli.fake.log == []


def test_create_memory_on_kernel_without_memory_is_rolled_back(cli):
    cli.fake.memory = False
    before = cli.fake.snapshot()
    r = cli("create", "a/b", "--weight", "5", "--memory-max", "renderD128=1G", code=1)
    assert "lacks gpu.memory.max" in r.output
    assert cli.fake.snapshot() == before  # dirs removed, +gpu taken back
    assert not (cli.fake.root / "a").exists()


def test_create_memory_refused_early_when_a_sibling_shows_it_missing(cli):
    cli.fake.memory = False
    cli.fake.make("a")
    cli.fake.log.clear()
    r = cli("create", "a/b", "--memory-max", "renderD128=1G", code=1)
    assert "this kernel lacks gpu.memory.max" in r.output
    assert cli.fake.log == []


def test_create_kernel_refusal_removes_created_groups(cli):
    cli.fake.fail["a/b/gpu.priority"] = errno.ERANGE
    before = cli.fake.snapshot()
    r = cli("create", "a/b", "--weight", "300", "--priority", "5", code=1)
    out = r.output.strip()
    assert len(out.splitlines()) == 1
    assert f"writing '5' to {cli.fake.root}/a/b/gpu.priority: out of range" in out
    assert "nothing was changed" in out
    assert cli.fake.snapshot() == before


def test_create_mkdir_refusal_rolls_back_parents(cli):
    cli.fake.fail["a/b"] = errno.EACCES
    before = cli.fake.snapshot()
    r = cli("create", "a/b", code=1)
    assert "permission denied" in r.output.lower() and "run as root" in r.output
    assert cli.fake.snapshot() == before


# set -----------------------------------------------------------------------------


@pytest.fixture
def group(cli):
    cli.fake.make("a")
    cli("set", "a", "--weight", "200", "--weight", "renderD128=70", "--priority", "-9",
        "--memory-max", "renderD128=4G")
    cli.fake.log.clear()
    return Cgroup(cli.fake.root, "a")


def test_set_changes_only_what_is_given(cli, group):
    cli("set", "a", "--weight", "renderD128=default", "--weight", "renderD129=1",
        "--memory-max", "renderD129=512K")
    assert read(cli, "a/gpu.weight") == "default 200\n226:129 1\n"
    assert read(cli, "a/gpu.priority") == "-9\n"
    assert read(cli, "a/gpu.memory.max") == "226:128 4294967296\n226:129 524288\n"


def test_set_kernel_refusal_restores_previous_values(cli, group):
    before = cli.fake.snapshot()
    cli.fake.fail["a/gpu.memory.max"] = errno.EINVAL
    r = cli("set", "a", "--weight", "300", "--weight", "card0=80", "--weight", "card1=90",
            "--priority", "4", "--memory-max", "renderD129=1G", code=1)
    assert "gpu.memory.max: invalid value" in r.output
    assert "nothing was changed" in r.output
    assert cli.fake.snapshot() == before
    # the undo writes, newest first
    assert cli.fake.log[-4:] == [("a/gpu.priority", "-9"), ("a/gpu.weight", "226:129 default"),
                                 ("a/gpu.weight", "226:128 70"), ("a/gpu.weight", "default 200")]


def test_set_reports_an_incomplete_rollback(cli, group, monkeypatch):
    from pycgpu.core import cgroup as cgroup_mod

    writes = []
    real = cgroup_mod._write_file

    def flaky(path, data):
        writes.append(data)
        if len(writes) == 2:  # the priority: refused
            raise OSError(errno.ERANGE, "out of range")
        if len(writes) == 3:  # undoing the weight fails too
            raise OSError(errno.EIO, "I/O error")
        real(path, data)

    monkeypatch.setattr(cgroup_mod, "_write_file", flaky)
    r = cli("set", "a", "--weight", "300", "--priority", "4", code=1)
    assert "out of range; rollback incomplete: writing 'default 200'" in r.output


def test_set_dry_run(cli, group):
    before = cli.fake.snapshot()
    r = cli("set", "a", "--priority", "3", "--dry-run")
    assert r.output == f"would write '3' to {cli.fake.root}/a/gpu.priority\n"
    assert cli.fake.snapshot() == before


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [(["nope", "--priority", "1"], 2,
      "cgroup /nope does not exist (create it: pycgpu create /nope)"),
     (["/", "--priority", "1"], 2, "the root cgroup has no gpu.* files"),
     (["a"], 2, "nothing to set: give --weight, --priority, --memory-max or --max"),
     (["a/../..", "--priority", "1"], 2, "must not contain '..'")],
)
def test_set_bad_requests(cli, group, args, code, message):
    before = cli.fake.snapshot()
    r = cli("set", *args, code=code)
    assert message in r.output
    assert cli.fake.snapshot() == before and cli.fake.log == []
    assert not (cli.fake.root / "nope").exists()


def test_set_without_gpu_enabled(cli):
    (cli.fake.root / "plain").mkdir()
    before = cli.fake.snapshot()
    r = cli("set", "plain", "--weight", "5", code=1)
    assert r.output.strip() == ("Error: the gpu controller is not enabled for /plain (no "
                                "gpu.weight; fix: pycgpu create /plain --exist-ok)")
    assert cli.fake.snapshot() == before and cli.fake.log == []  # gpu not enabled for it


def test_set_memory_on_kernel_without_memory(cli):
    cli.fake.memory = False
    cli.fake.make("a")
    cli.fake.log.clear()
    r = cli("set", "a", "--weight", "5", "--memory-max", "renderD128=1G", code=1)
    assert r.output.strip() == ("Error: this kernel lacks gpu.memory.max (fix: boot a kernel "
                                "with the gpu memory support, or leave out --memory-max)")
    assert cli.fake.log == []


@pytest.mark.parametrize(
    ("code", "text"),
    [(errno.EINVAL, "invalid value; nothing was changed (fix: the kernel rejected the value"),
     (errno.ERANGE, "out of range; nothing was changed (fix: see the ranges in pycgpu set"),
     (errno.EACCES, "permission denied; nothing was changed (fix: run as root"),
     (errno.EPERM, "operation not permitted; nothing was changed (fix: run as root")],
)
def test_kernel_refusals_are_translated(cli, group, code, text):
    cli.fake.fail["a/gpu.priority"] = code
    before = cli.fake.snapshot()
    r = cli("set", "a", "--weight", "5", "--priority", "1", code=1)
    assert text in r.output
    assert len(r.output.strip().splitlines()) == 1
    assert cli.fake.snapshot() == before  # the weight written first is back


# rm ------------------------------------------------------------------------------


def test_rm_leaf(cli):
    cli.fake.make("a/b")
    cli("rm", "a/b")
    assert not (cli.fake.root / "a" / "b").exists()
    assert (cli.fake.root / "a").exists()


def test_rm_with_children_needs_recursive(cli):
    cli.fake.make("a/b")
    cli.fake.make("a/c/d")
    before = cli.fake.snapshot()
    r = cli("rm", "a", code=2)
    assert "cgroup /a has child groups (/a/b, /a/c): remove them first or pass --recursive" in (
        r.output)
    assert cli.fake.snapshot() == before
    r = cli("rm", "-r", "a", "--dry-run")
    root = cli.fake.root
    assert r.output.splitlines() == [f"would rmdir {root}/a/b", f"would rmdir {root}/a/c/d",
                                     f"would rmdir {root}/a/c", f"would rmdir {root}/a"]
    assert (root / "a" / "c" / "d").exists()
    cli("rm", "--recursive", "a")
    assert not (root / "a").exists()


def test_rm_busy_group_removes_nothing(cli):
    cli.fake.make("a/b")
    cli.fake.make("a/c")  # removable, but all or none: it stays too
    pid = os.getpid()  # a process that is there
    (cli.fake.root / "a" / "b" / "cgroup.procs").write_text(f"{pid}\n")
    before = cli.fake.snapshot()
    r = cli("rm", "-r", "a", code=1)
    assert f"cgroup /a/b still has processes ({pid}): move them out first" in r.output
    assert (cli.fake.root / "a" / "b").exists()
    assert cli.fake.snapshot() == before


@pytest.mark.parametrize(("path", "message"), [("/", "root cgroup cannot be removed"),
                                               ("nope", "cgroup /nope does not exist")])
def test_rm_bad_path(cli, path, message):
    cli.fake.make("a")
    before = cli.fake.snapshot()
    r = cli("rm", path, code=2)
    assert message in r.output
    assert cli.fake.snapshot() == before


# priority clamp ---------------------------------------------------------------


def test_set_priority_names_the_clamping_ancestor(cli):
    cli.fake.make("team/job")
    r = cli("set", "team/job", "--priority", "500")
    assert ("warning: /team/job gets priority 500 but its effective priority stays 0: "
            "ancestor /team has gpu.priority default, 0 for a top-level group (fix: add "
            "--raise-ancestors, or pycgpu set /team --priority 500)") in r.output
    assert read(cli, "team/job/gpu.priority.effective") == "0\n"
    out = cli("show", "team/job").output
    assert "priority             500 (effective 0, capped by /team)" in out
    doc = __import__("json").loads(cli("show", "--json", "team/job").output)
    assert doc["cgroups"][0]["priority_capped_by"] == "/team"


def test_no_warning_when_nothing_clamps(cli):
    cli.fake.make("team/job")
    r = cli("set", "team/job", "--priority", "-5")
    assert "warning" not in r.output


def test_raise_ancestors(cli):
    cli.fake.make("a/b/c")
    cli("set", "a", "--priority", "900")
    cli.fake.log.clear()
    r = cli("set", "a/b/c", "--priority", "500", "--raise-ancestors")
    assert "warning" not in r.output
    # /a/b has no priority of its own: it inherits 900 and caps nothing
    assert cli.fake.log == [("a/b/c/gpu.priority", "500")]
    assert read(cli, "a/b/c/gpu.priority.effective") == "500\n"
    assert read(cli, "a/gpu.priority") == "900\n"  # above already: left alone
    assert read(cli, "a/b/gpu.priority") == "default\n"


def test_raise_ancestors_on_a_kernel_before_default(cli):
    """Every group has a number there, a new one 0: each caps."""
    cli.fake.unset = False
    cli.fake.make("a/b/c")
    cli("set", "a", "--priority", "900")
    cli.fake.log.clear()
    r = cli("set", "a/b/c", "--priority", "500", "--raise-ancestors")
    assert "warning" not in r.output
    assert cli.fake.log == [("a/b/gpu.priority", "500"), ("a/b/c/gpu.priority", "500")]
    assert read(cli, "a/b/c/gpu.priority.effective") == "500\n"


def test_raise_ancestors_is_all_or_none(cli):
    cli.fake.make("a/b/c")
    cli("set", "a/b", "--priority", "0")
    cli.fake.log.clear()
    cli.fake.fail["a/b/c/gpu.priority"] = errno.EACCES
    before = cli.fake.snapshot()
    cli("set", "a/b/c", "--priority", "500", "--raise-ancestors", code=1)
    assert cli.fake.snapshot() == before
    # /a: a top-level group's default counts as 0; the undo unsets it again
    assert cli.fake.log == [("a/gpu.priority", "500"), ("a/b/gpu.priority", "500"),
                            ("a/b/gpu.priority", "0"), ("a/gpu.priority", "default")]


def test_create_raise_ancestors_dry_run(cli):
    r = cli("create", "x/y", "--priority", "7", "--raise-ancestors", "--dry-run")
    root = cli.fake.root
    assert f"would write '7' to {root / 'x' / 'gpu.priority'}" in r.output
    assert f"would write '7' to {root / 'x' / 'y' / 'gpu.priority'}" in r.output
    assert not (root / "x").exists()
