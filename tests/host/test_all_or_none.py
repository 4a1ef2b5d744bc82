"""All or none under any failure, and one clear line (never a traceback)
for bad file content, bad paths and huge numbers: the library's writes
(knobs.apply), the CLI and the hook, on the fake kernel."""

from __future__ import annotations

import errno
import json
from pathlib import Path

import pytest

from pycgpu.core import formats, knobs
from pycgpu.core.cgroup import (
    READ,
    WRITE,
    Cgroup,
    CgroupError,
    InvalidPath,
    check_relpath,
    resolve_path,
)


def one_line_error(result) -> str:
    assert result.exception is None or isinstance(result.exception, SystemExit)
    lines = result.output.strip().splitlines()
    assert len(lines) == 1, result.output
    assert lines[0].startswith("Error: ")
    return lines[0]


def test_parse_error_while_applying_rolls_back_subtree_control(fake, monkeypatch):
    """gpu.weight that does not parse when apply() reads it back: the +gpu it
    wrote to cgroup.subtree_control is taken back."""
    (fake.root / "x").mkdir()
    for name, text in (("cgroup.controllers", "cpu memory\n"),
                       ("cgroup.subtree_control", "\n"), ("cgroup.procs", "")):
        (fake.root / "x" / name).write_text(text)
    real = fake.write

    def write(path, data):
        real(path, data)
        if path.name == "cgroup.subtree_control" and data == b"+gpu":
            (fake.root / "x" / "gpu.weight").write_text("default one hundred\n")

    monkeypatch.setattr("pycgpu.core.cgroup._write_file", write)
    cg = Cgroup(fake.root, "x")
    plan = knobs.plan_create(cg, knobs.Settings(weight=300), exist_ok=True)
    with pytest.raises(knobs.ApplyError) as e:
        knobs.apply(plan)
    assert "gpu.weight" in str(e.value) and "nothing was changed" in str(e.value)
    assert fake.read("cgroup.subtree_control").split() == []
    assert fake.log == [("cgroup.subtree_control", "+gpu"), ("cgroup.subtree_control", "-gpu")]


def test_set_with_a_malformed_knob_file_changes_nothing(cli):
    cli.fake.make("a")
    (cli.fake.root / "a" / "gpu.priority").write_text("high\n")
    before = cli.fake.snapshot()
    r = cli("set", "a", "--weight", "300", "--priority", "5", code=1)
    line = one_line_error(r)
    assert "gpu.priority" in line and "nothing was changed" in line
    assert cli.fake.snapshot() == before


@pytest.mark.parametrize("command, tail", [
    (["show", "a"], ""), (["show", "-r", "--json", "a"], ""),
    (["set", "a", "--weight", "5"], "; nothing was changed")])
def test_non_utf8_file_content_is_one_line(cli, command, tail):
    """The exact line: a file pycgpu could not read gets no hint about
    values the kernel rejected (nothing was written)."""
    cli.fake.make("a")
    (cli.fake.root / "a" / "gpu.weight").write_bytes(b"default \xff\n")
    before = cli.fake.snapshot()
    r = cli(*command, code=1)
    assert one_line_error(r) == (f"Error: reading {cli.fake.root}/a/gpu.weight: not UTF-8 text "
                                 f"(byte 0xff at offset 8){tail}")
    assert cli.fake.snapshot() == before


@pytest.mark.parametrize("op, name, code, fix", [
    (WRITE, "gpu.weight", errno.EINVAL, "the kernel rejected the value"),
    (WRITE, "gpu.memory.max", errno.ERANGE, "see the ranges in pycgpu set --help"),
    (READ, "gpu.weight", errno.EINVAL, None),
    (READ, "gpu.weight", errno.ERANGE, None),
    (WRITE, "cgroup.subtree_control", errno.EINVAL, None),
    (WRITE, "cgroup.procs", errno.ERANGE, None),
    (READ, "gpu.weight", errno.EACCES, "run as root"),
    ("", "", errno.EINVAL, None),
])
def test_hints_follow_what_failed_not_the_errno_alone(op, name, code, fix):
    from pycgpu.cli.commands.common import hint

    e = CgroupError(code, "x", op, f"/cg/a/{name}" if name else None)
    got = hint(e)
    assert (got is None) if fix is None else (got is not None and got.startswith(fix))


def test_a_read_error_of_a_knob_file_has_no_write_hint(cli, monkeypatch):
    """EINVAL from read(2) of gpu.weight (a driver's bug): reported as a
    read error, not as a value the kernel rejected."""
    import os as os_mod

    cli.fake.make("a")
    real_read = os_mod.read

    def read(fd, n):
        if os_mod.readlink(f"/proc/self/fd/{fd}").endswith("/a/gpu.weight"):
            raise OSError(errno.EINVAL, os_mod.strerror(errno.EINVAL))
        return real_read(fd, n)

    monkeypatch.setattr(os_mod, "read", read)
    r = cli("show", "a", code=1)
    assert one_line_error(r) == f"Error: reading {cli.fake.root}/a/gpu.weight: Invalid argument"


def test_a_path_component_over_255_bytes(cli):
    before = cli.fake.snapshot()
    for command in (["create", "a/" + "x" * 256], ["set", "y" * 300, "--weight", "5"],
                    ["show", "z" * 256], ["exec", "w" * 256, "--", "true"],
                    ["check", "--path", "v" * 256], ["stat", "u" * 256]):
        r = cli(*command, code=2)
        assert "bytes long, the limit is 255" in one_line_error(r)
    assert cli.fake.snapshot() == before
    assert not [p for p in cli.fake.root.iterdir() if p.is_dir()]


def test_dotdot_is_refused_everywhere(cli):
    cli.fake.make("a")
    before = cli.fake.snapshot()
    for command in (["create", "a/../../etc"], ["set", "a/..", "--weight", "5"],
                    ["show", "a/../.."], ["rm", "a/../a"], ["exec", "a/..", "--", "true"],
                    ["check", "--path", "a/../../etc"], ["stat", "a/.."], ["top", "a/.."]):
        r = cli(*command, code=2)
        assert "must not contain '..'" in one_line_error(r), command
    assert cli.fake.snapshot() == before


def test_absolute_path_outside_the_root_is_refused(cli):
    before = cli.fake.snapshot()
    r = cli("create", "/sys/fs/cgroup/x", code=2)
    line = one_line_error(r)
    assert f"is under /sys/fs/cgroup, but the cgroup root is {cli.fake.root}" in line
    assert cli.fake.snapshot() == before
    assert not (cli.fake.root / "sys").exists()


def test_the_path_rule():
    root = Path("/mnt/cg")
    assert resolve_path(root, "/mnt/cg/a/b") == Path("a/b")
    assert resolve_path(root, "/mnt/cg") == Path(".")
    assert resolve_path(root, "/a/b") == Path("a/b")
    assert resolve_path(root, "a/b/") == Path("a/b")
    assert resolve_path(root, "/") == Path(".")
    assert resolve_path(root, "/").parts == ()
    with pytest.raises(InvalidPath):
        resolve_path(root, "/sys/fs/cgroup/x")
    assert resolve_path(Path("/sys/fs/cgroup"), "/sys/fs/cgroup/x") == Path("x")
    with pytest.raises(InvalidPath):
        check_relpath("a/\n")


@pytest.mark.parametrize("text, parts", [
    ("..foo", ("..foo",)), (".hidden", (".hidden",)), ("...", ("...",)),
    ("/..foo/", ("..foo",)), ("a/..b/.c", ("a", "..b", ".c")), ("/mnt/cg/.x", (".x",)),
    ("./a", ("a",)), ("a//b", ("a", "b")),
])
def test_dotted_names_are_kept_as_given(text, parts):
    rel = resolve_path(Path("/mnt/cg"), text)
    assert rel.parts == parts
    assert Cgroup(Path("/mnt/cg"), rel).path == Path("/mnt/cg", *parts)


@pytest.mark.parametrize("text", ["..", "../x", "a/..", "a/../b", "/mnt/cg/.."])
def test_dotdot_components_are_refused(text):
    with pytest.raises(InvalidPath, match=r"must not contain '\.\.'"):
        resolve_path(Path("/mnt/cg"), text)


def test_each_command_acts_on_the_dotted_group_named(cli):
    """rm ..foo removed /foo, create .hidden created /hidden, show ... showed
    the root: the leading dots were stripped."""
    root = cli.fake.root
    cli.fake.make("foo")
    cli("create", "..foo", "--weight", "7")
    assert (root / "..foo" / "gpu.weight").read_text() == "default 7\n"
    cli("set", "..foo", "--priority", "3")
    assert (root / "..foo" / "gpu.priority").read_text() == "3\n"
    cli("rm", "..foo")
    assert not (root / "..foo").exists() and (root / "foo").is_dir()
    cli("create", ".hidden")
    assert (root / ".hidden").is_dir() and not (root / "hidden").exists()
    r = cli("show", "--json", ".hidden")
    assert [g["path"] for g in json.loads(r.output)["cgroups"]] == ["/.hidden"]
    r = cli("show", "...", code=2)
    assert r.output == "Error: cgroup /... does not exist\n"
    r = cli("check", "--path", "..foo", code=3)
    assert "cgroup /..foo does not exist" in r.output
    assert "pycgpu create /..foo" in r.output


@pytest.mark.parametrize("args, why", [
    (["--memory-max", "renderD128=" + "9" * 5000], "out of range"),
    (["--memory-max", "renderD128=" + "9" * 5000 + "G"], "out of range"),
    (["--priority", "9" * 5000], "out of range"),
    (["--weight", "9" * 5000], "out of range"),
    (["--weight", "226:" + "1" * 5000 + "=5"], "unknown device"),
])
def test_huge_numbers_on_the_command_line(cli, args, why):
    cli.fake.make("a")
    before = cli.fake.snapshot()
    r = cli("set", "a", *args, code=2)
    line = one_line_error(r)
    assert why in line and len(line) < 300
    assert cli.fake.snapshot() == before


def test_formats_refuse_huge_numbers():
    with pytest.raises(formats.FormatError, match="out of range"):
        formats.parse_size("1" * 5000)
    with pytest.raises(formats.FormatError, match="out of range"):
        formats.parse_flat_keyed("226:128 " + "1" * 5000)
    with pytest.raises(formats.FormatError, match="out of range"):
        formats.DevT.parse("4096:0")
    with pytest.raises(formats.FormatError, match="not UTF-8"):
        formats.decode(b"\xc3", "gpu.stat")
    assert json.dumps(formats.parse_size("16G")) == str(16 << 30)
