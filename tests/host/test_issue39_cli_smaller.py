"""Issue 39, item 11 (the CLI's share): --priority given twice is an error
as --weight twice is; a path over PATH_MAX is one short line and exit 2; a
symlinked allow-list is reported as untrusted."""

from __future__ import annotations

import pytest
from test_all_or_none import one_line_error

from pycgpu.runtime import allowlist


def test_priority_given_twice_is_an_error_as_weight_twice_is(cli):
    cli.fake.make("a")
    before = cli.fake.snapshot()
    r = cli("set", "a", "--weight", "5", "--weight", "6", code=2)
    assert "given twice" in one_line_error(r)
    for command in ("set", "create"):
        path = "a" if command == "set" else "b"
        r = cli(command, path, "--priority", "1", "--priority", "2", code=2)
        assert one_line_error(r) == "Error: --priority '2': the priority is given twice"
    assert cli.fake.snapshot() == before


@pytest.mark.parametrize("command", [["create"], ["set"], ["show"], ["rm"], ["stat"],
                                     ["check", "--path"]])
def test_a_path_over_path_max_is_one_short_line_and_exit_2(cli, command):
    long = "/".join(["x" * 200] * 25)  # 5024 bytes, each component allowed
    before = cli.fake.snapshot()
    args = [*command, long] + (["--weight", "5"] if command[0] in ("create", "set") else [])
    r = cli(*args, code=2)
    line = one_line_error(r)
    assert len(line) < 200 and "5024 bytes long, the limit is " in line, line
    assert cli.fake.snapshot() == before


def _long_path(size: int) -> str:
    """A relative cgroup path of @size bytes, each component allowed."""
    whole, rest = divmod(size, 201)  # components of 200 bytes and a slash
    path = "/".join(["y" * 200] * whole + (["y" * (rest - 1)] if rest > 1 else []))
    path += "y" * (size - len(path))  # rest 0 or 1: lengthen the last component
    assert len(path) == size
    return path


@pytest.mark.parametrize("command", [["create"], ["set"], ["show"], ["rm"], ["stat"]])
def test_the_limit_is_on_the_whole_path_under_the_mount(cli, command):
    """Review of issue 39, item 3: a relative path under PATH_MAX whose full
    path (the mount, the path, an interface file's name) is not is refused
    with one short line, exit 2, not ENAMETOOLONG's 4 KB message, exit 1."""
    mount = len(str(cli.fake.root).rstrip("/")) + 1
    long = _long_path(4090 - mount)
    before = cli.fake.snapshot()
    args = [*command, long] + (["--weight", "5"] if command[0] in ("create", "set") else [])
    r = cli(*args, code=2)
    line = one_line_error(r)
    assert len(line) < 200 and f"{len(long)} bytes long, the limit is " in line, line
    assert cli.fake.snapshot() == before


def test_a_path_that_fits_under_the_mount_is_taken(tmp_path):
    from pycgpu.core.cgroup import FILE_ROOM, PATH_MAX, Cgroup, InvalidPath

    mount = tmp_path / "cg"
    room = PATH_MAX - 1 - FILE_ROOM - len(str(mount)) - 1
    assert Cgroup(mount, _long_path(room)).relpath
    with pytest.raises(InvalidPath, match=f"{room + 1} bytes long, the limit is {room}"):
        Cgroup(mount, _long_path(room + 1))
    # every file pycgpu opens in a group fits: the longest interface file name
    assert len(str(Cgroup(mount, _long_path(room)).path / "gpu.memory.events.local")) < PATH_MAX


def test_a_symlinked_allow_list_is_untrusted(tmp_path):
    real = tmp_path / "real.allow"
    real.write_text("gpu.priority\n")
    real.chmod(0o644)
    link = tmp_path / "link.allow"
    link.symlink_to(real)
    with pytest.raises(allowlist.AllowListError) as info:
        allowlist.load(link)
    assert str(info.value) == (f"cannot open the allow-list {link}: it is a symbolic link, "
                               "not trusted (name the file itself)")


@pytest.mark.parametrize("command", ["patch", "generate"])
def test_oci_priority_given_twice_is_an_error_as_in_create(cli, tmp_path, command):
    """oci patch and oci generate take the knob options of create and set:
    a second --priority is exit 2, nothing written."""
    config = tmp_path / "config.json"
    config.write_text("{}\n")
    args = (["oci", "patch", str(config)] if command == "patch" else
            ["oci", "generate", "--bundle", str(tmp_path / "b")])
    r = cli(*args, "--priority", "1", "--priority", "2", code=2)
    assert one_line_error(r) == "Error: --priority '2': the priority is given twice"
    assert config.read_text() == "{}\n" and not (tmp_path / "b").exists()


@pytest.mark.parametrize("command", [[], ["create"], ["set"]])
def test_the_help_names_dev_region_and_dmem(command):
    """Memory limits on a dmem kernel name one of a device's several regions
    as DEV:REGION: the help of create, set and pycgpu itself says so."""
    from click.testing import CliRunner

    from pycgpu.cli import main

    text = " ".join(CliRunner().invoke(main, [*command, "--help"]).output.split())
    assert "DEV:REGION" in text and "dmem" in text, text
