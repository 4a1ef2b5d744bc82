"""pycgpu.core.cgroup against a fake cgroup tree (plain files in a temporary directory)."""

import errno
import os

import pytest

from pycgpu.core.cgroup import Cgroup, CgroupError, find_mount
from pycgpu.core.formats import DevT


def make_fake_root(tmp_path, controllers="cpu memory gpu"):
    root = tmp_path / "cgroup"
    root.mkdir()
    (root / "cgroup.controllers").write_text(controllers + "\n")
    (root / "cgroup.subtree_control").write_text("\n")
    return root


def test_find_mount(tmp_path):
    info = tmp_path / "mountinfo"
    info.write_text(
        "22 1 0:21 / /proc rw,nosuid - proc proc rw\n"
        "30 22 0:26 / /sys/fs/cgroup rw,nosuid shared:9 - cgroup2 cgroup2 rw,nsdelegate\n"
    )
    assert str(find_mount(info)) == "/sys/fs/cgroup"


def test_find_mount_v1_host(tmp_path):
    info = tmp_path / "mountinfo"
    info.write_text("30 22 0:26 / /sys/fs/cgroup/cpu rw - cgroup cgroup rw,cpu\n")
    with pytest.raises(CgroupError, match="cgroup v1"):
        find_mount(info)


def test_paths(tmp_path):
    root = make_fake_root(tmp_path)
    cg = Cgroup(root, "/a/b/")
    assert cg.name == "/a/b"
    assert cg.parent.name == "/a"
    assert cg.parent.parent.is_root
    assert cg.parent.parent.parent is None
    assert Cgroup(root).name == "/"
    with pytest.raises(ValueError, match=r"\.\."):
        Cgroup(root, "a/../../etc")


def test_enable_controller_missing(tmp_path):
    root = make_fake_root(tmp_path, controllers="cpu memory")
    with pytest.raises(CgroupError, match="gpu controller is not available") as e:
        Cgroup(root, "a").create()
    assert e.value.errno == errno.ENOENT


def test_read_typed_files(tmp_path):
    root = make_fake_root(tmp_path)
    d = root / "a"
    d.mkdir()
    (d / "gpu.weight").write_text("default 200\n226:128 50\n")
    (d / "gpu.priority").write_text("-3\n")
    (d / "gpu.priority.effective").write_text("-7\n")
    cg = Cgroup(root, "a")
    assert cg.weights().for_device(DevT(226, 128)) == 50
    assert cg.priority() == -3
    assert cg.priority_effective() == -7


def test_write_refusal_names_file_and_value(tmp_path):
    root = make_fake_root(tmp_path)
    cg = Cgroup(root, "missing")
    with pytest.raises(CgroupError, match=r"writing '5' to .*missing/gpu.priority"):
        cg.set_priority(5)


@pytest.mark.skipif(os.geteuid() != 0, reason="chown needs root")
def test_refusal_on_a_delegated_group_says_who_may_set_it(tmp_path, monkeypatch):
    """The caller owns the directory (delegated to it) but not its gpu.*
    files: the refusal says the parent's owner sets them, and where the
    caller may."""
    root = make_fake_root(tmp_path)
    (root / "team").mkdir()
    (root / "team" / "gpu.weight").write_text("default 100\n")
    os.chown(root / "team", 1000, 1000)
    monkeypatch.setattr(os, "geteuid", lambda: 1000)

    def denied(path, data):
        raise PermissionError(errno.EACCES, "Permission denied")

    monkeypatch.setattr("pycgpu.core.cgroup._write_file", denied)
    with pytest.raises(CgroupError) as e:
        Cgroup(root, "team").write("gpu.weight", "500")
    assert e.value.errno == errno.EACCES
    from pycgpu.cli.commands.common import refused
    from pycgpu.core.cgroup import DelegatedRefusal
    assert isinstance(e.value, DelegatedRefusal)
    assert "(fix:" not in refused(e.value).message
    assert str(e.value).endswith(
        f"{root / 'team'} is delegated to you, and a delegated group's own gpu.weight is set "
        f"by the owner of its parent; you may set it on the groups you create below it")
    # not delegated: the plain reason
    os.chown(root / "team", 0, 0)
    with pytest.raises(CgroupError, match=r"gpu\.weight: permission denied$"):
        Cgroup(root, "team").write("gpu.weight", "500")
