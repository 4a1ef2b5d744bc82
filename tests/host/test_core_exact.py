"""Exact behaviour of pycgpu.core.cgroup, pycgpu.core.knobs and
pycgpu.runtime.oci where their other tests only checked the outline: the
errno, message, operation and file of every refusal, what a failed plan
raises in each case, and what a patch writes. Written against the
survivors of a mutation run over those modules (make mutation-core)."""

from __future__ import annotations

import errno
import json
import os
import stat
from pathlib import Path

import pytest

from pycgpu.core import cgroup, knobs
from pycgpu.core.cgroup import READ, RMDIR, WRITE, Cgroup, CgroupError, DelegatedRefusal
from pycgpu.core.formats import DevT, FormatError
from pycgpu.core.knobs import ApplyError, Unavailable
from pycgpu.runtime import oci

# read_interface ---------------------------------------------------------------------


def _fields(e: CgroupError) -> tuple:
    return e.errno, e.strerror, e.op, e.file


def test_a_file_that_cannot_be_opened_is_a_read_error(tmp_path):
    (tmp_path / "plain").write_text("")
    name = tmp_path / "plain" / "gpu.stat"  # a path through a file: ENOTDIR
    with pytest.raises(CgroupError) as info:
        cgroup.read_interface(name)
    assert _fields(info.value) == (errno.ENOTDIR, f"reading {name}: Not a directory", READ,
                                   name)


def test_a_file_that_cannot_be_read_is_a_read_error(tmp_path):
    (tmp_path / "gpu.stat").mkdir()  # opens, and read(2) says EISDIR
    with pytest.raises(CgroupError) as info:
        cgroup.read_interface(tmp_path / "gpu.stat")
    assert _fields(info.value) == (errno.EISDIR, f"reading {tmp_path}/gpu.stat: Is a directory",
                                   READ, tmp_path / "gpu.stat")


def test_text_that_is_not_utf8_is_a_read_error(tmp_path):
    (tmp_path / "gpu.weight").write_bytes(b"default \xff\n")
    with pytest.raises(CgroupError) as info:
        cgroup.read_interface(tmp_path / "gpu.weight")
    assert _fields(info.value) == (
        errno.EINVAL, f"reading {tmp_path}/gpu.weight: not UTF-8 text (byte 0xff at offset 8)",
        READ, tmp_path / "gpu.weight")


def test_files_are_read_relative_to_a_directory_and_whole(tmp_path, monkeypatch):
    big = "".join(f"226:{n} usage_usec={n} wait_usec=0\n" for n in range(400))
    assert len(big.encode()) > 3 * 4096
    (tmp_path / "gpu.stat").write_text(big)
    monkeypatch.chdir("/")
    fd = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        assert cgroup.read_interface("gpu.stat", fd) == big
        assert cgroup.read_interface("gpu.none", fd) is None
    finally:
        os.close(fd)
    exact = "x" * 4096  # exactly one first read: the second finds the end
    (tmp_path / "gpu.peak").write_text(exact)
    assert cgroup.read_interface(tmp_path / "gpu.peak") == exact


# refusals ---------------------------------------------------------------------------


def _refused(tmp_path: Path, name: str, code: int | None, value: str = "5") -> CgroupError:
    (tmp_path / "g").mkdir(exist_ok=True)
    path = tmp_path / "g" / name
    e = OSError(code, os.strerror(code)) if code is not None else OSError("odd")
    return cgroup._refusal(e, path, value)


@pytest.mark.parametrize("name, code, why", [
    ("cgroup.procs", errno.EBUSY,
     "busy (the group has controllers enabled for its children: use a leaf group)"),
    ("gpu.weight", errno.EOPNOTSUPP, "the device has no scheduler that follows the gpu "
     "controller (gpu.stat shows sched=0 for it): a weight could not act there"),
    ("cgroup.subtree_control", errno.EBUSY,
     "busy (the group has processes: move them into a leaf group first)"),
    ("gpu.priority", errno.EBUSY, "busy"),
    ("gpu.priority", errno.EOPNOTSUPP, "not supported"),
    ("gpu.weight", errno.EINVAL, "invalid value"),
    ("gpu.weight", errno.ERANGE, "out of range"),
    ("gpu.weight", errno.ENODEV, "no such device"),
    ("gpu.weight", errno.ENOSPC, "No space left on device"),
])
def test_each_refusal_says_why(tmp_path, name, code, why):
    e = _refused(tmp_path, name, code)
    path = tmp_path / "g" / name
    assert type(e) is CgroupError
    assert _fields(e) == (code, f"writing '5' to {path}: {why}", WRITE, path)


def test_a_refusal_without_an_errno(tmp_path):
    e = _refused(tmp_path, "gpu.weight", None)
    assert (e.errno, e.strerror) == (0, f"writing '5' to {tmp_path}/g/gpu.weight: odd")


@pytest.mark.parametrize("name, exists, why", [
    ("gpu.memory.max", True, "the gpu controller is not enabled for {g} (or this kernel "
                             "lacks gpu.memory.*)"),
    ("gpu.weight", True, "the gpu controller is not enabled for {g}"),
    ("cgroup.procs", True, "no such file"),
    ("gpu.weight", False, "no such cgroup {g}"),
])
def test_a_missing_file_says_why(tmp_path, name, exists, why):
    group = tmp_path / "g"
    if exists:
        group.mkdir()
    e = cgroup._refusal(OSError(errno.ENOENT, "x"), group / name, "5")
    assert e.strerror == f"writing '5' to {group / name}: " + why.format(g=group)
    assert (e.errno, e.op) == (errno.ENOENT, WRITE)


@pytest.mark.skipif(os.geteuid() != 0, reason="gives the file to another user")
def test_a_delegated_groups_own_file(tmp_path):
    group = tmp_path / "g"
    group.mkdir()
    (group / "gpu.weight").write_text("default 100\n")
    os.chown(group / "gpu.weight", 65534, 65534)
    e = cgroup._refusal(OSError(errno.EACCES, "x"), group / "gpu.weight", "default 5")
    assert type(e) is DelegatedRefusal
    assert _fields(e) == (
        errno.EACCES, f"writing 'default 5' to {group}/gpu.weight: permission denied: {group} "
        "is delegated to you, and a delegated group's own gpu.weight is set by the owner of "
        "its parent; you may set it on the groups you create below it", WRITE,
        group / "gpu.weight")
    assert cgroup.delegated_to_caller(group / "gpu.weight")
    os.chown(group / "gpu.weight", 0, 0)
    assert not cgroup.delegated_to_caller(group / "gpu.weight")
    assert not cgroup.delegated_to_caller(group / "absent")
    e = cgroup._refusal(OSError(errno.EPERM, "x"), group / "gpu.weight", "default 5")
    assert type(e) is CgroupError and e.strerror.endswith(": operation not permitted")


# the tree ---------------------------------------------------------------------------


@pytest.mark.parametrize("code, why", [
    (errno.EBUSY, "the group still has processes (move them out first)"),
    (errno.ENOTEMPTY, "the group has child groups"),
    (errno.EACCES, "Permission denied"),
])
def test_remove_says_why_not(fake, monkeypatch, code, why):
    fake.make("a")
    monkeypatch.setattr(cgroup, "_rmdir", lambda p: (_ for _ in ()).throw(
        OSError(code, os.strerror(code))))
    with pytest.raises(CgroupError) as info:
        Cgroup(fake.root, "a").remove()
    assert _fields(info.value) == (code, f"removing {fake.root}/a: {why}", RMDIR, fake.root / "a")


def test_remove_recursive_takes_the_children_first(fake, monkeypatch):
    fake.make("a/b/c")
    fake.make("a/d")
    gone = []
    real = cgroup._rmdir

    def rmdir(path):
        gone.append(str(path.relative_to(fake.root)))
        real(path)

    monkeypatch.setattr(cgroup, "_rmdir", rmdir)
    Cgroup(fake.root, "a").remove(recursive=True)
    assert gone == ["a/b/c", "a/b", "a/d", "a"]
    assert not (fake.root / "a").exists()


def test_mkdir_error_and_repr(fake, monkeypatch):
    monkeypatch.setattr(cgroup, "_mkdir", lambda p: (_ for _ in ()).throw(
        OSError(errno.ENOSPC, "No space left on device")))
    with pytest.raises(CgroupError) as info:
        Cgroup(fake.root, "n").mkdir()
    assert _fields(info.value) == (errno.ENOSPC, f"creating {fake.root}/n: No space left on "
                                   "device", cgroup.MKDIR, fake.root / "n")
    assert repr(Cgroup(fake.root, "a/b")) == "Cgroup(/a/b)"
    assert repr(Cgroup(fake.root)) == "Cgroup(/)"


def test_add_proc_writes_the_pid(fake):
    fake.make("a")
    Cgroup(fake.root, "a").add_proc(4242)
    assert fake.read("a/cgroup.procs").split() == ["4242"]
    assert Cgroup(fake.root, "a").procs() == [4242]


def test_find_mount(tmp_path):
    missing = tmp_path / "mountinfo"
    with pytest.raises(CgroupError) as info:
        cgroup.find_mount(missing)
    assert _fields(info.value) == (errno.ENOENT, f"cannot read {missing}: No such file or "
                                   "directory", READ, missing)
    missing.write_text("22 1 0:21 / /proc rw - proc proc rw\n")
    with pytest.raises(CgroupError) as info:
        cgroup.find_mount(missing)
    assert (info.value.errno, info.value.strerror) == (
        errno.ENOENT, "no cgroup2 file system is mounted (cgroup v1 host?)")
    missing.write_text("22 1 0:21 / /proc rw - proc proc rw\n"
                       "30 1 0:26 / /run/cg rw - cgroup2 cgroup2 rw\n"
                       "31 1 0:27 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n")
    assert cgroup.find_mount(missing) == Path("/run/cg")


@pytest.mark.parametrize("mount, text, rel", [
    ("/run/cg", "/run/cg", "."), ("/run/cg", "/run/cg/", "."), ("/run/cg/", "/run/cg", "."),
    ("/run/cg", "/run/cg/a/b", "a/b"), ("/run/cg", "/run/cgx/a", "run/cgx/a"),
    ("/", "/a", "a"), ("/", "/", "."), ("/sys/fs/cgroup", "/sys/fs/cgroup/a", "a"),
    ("/sys/fs/cgroup", "a/", "a"),
])
def test_resolve_path(mount, text, rel):
    assert cgroup.resolve_path(Path(mount), text) == Path(rel)


@pytest.mark.parametrize("text", ["/sys/fs/cgroup", "/sys/fs/cgroup/", "/sys/fs/cgroup/a"])
def test_resolve_path_refuses_the_usual_mount_elsewhere(text):
    with pytest.raises(cgroup.InvalidPath, match="is under /sys/fs/cgroup, but the cgroup root "
                                                 "is /run/cg"):
        cgroup.resolve_path(Path("/run/cg"), text)
    assert cgroup.resolve_path(Path("/run/cg"), "/sys/fs/cgroupx") == Path("sys/fs/cgroupx")


# what a failed plan raises ----------------------------------------------------------


def _undone(errors=(), kept=()) -> knobs._Undone:
    return knobs._Undone(list(errors), list(kept))


def test_failure_of_an_unavailable_knob_fully_undone_is_itself():
    e = Unavailable(errno.ENOENT, "no knob")
    assert knobs._failure(e, _undone()) is e
    undo_error = CgroupError(errno.EBUSY, "undo failed")
    for undone in (_undone([undo_error]), _undone(kept=["kept"])):
        out = knobs._failure(e, undone)
        assert isinstance(out, ApplyError) and out.cause is e


def test_failure_of_a_refusal_is_an_apply_error():
    cause = CgroupError(errno.EINVAL, "bad", WRITE, "/x/gpu.weight")
    undo_error = CgroupError(errno.EBUSY, "undo failed")
    out = knobs._failure(cause, _undone([undo_error], ["gpu stays"]))
    assert isinstance(out, ApplyError)
    assert (out.cause, out.rollback_errors, out.kept) == (cause, [undo_error], ["gpu stays"])
    assert (out.errno, out.op, out.file) == (errno.EINVAL, WRITE, Path("/x/gpu.weight"))
    assert out.strerror == "bad; rollback incomplete: undo failed; gpu stays"
    assert knobs._failure(cause, _undone(kept=["gpu stays"])).strerror == \
        "bad; gpu stays; nothing else was changed"
    assert knobs._failure(cause, _undone()).strerror == "bad; nothing was changed"


def test_failure_of_a_text_that_does_not_parse():
    out = knobs._failure(FormatError("gpu.weight: junk"), _undone(kept=["k"]))
    assert isinstance(out, ApplyError)
    assert (out.errno, out.strerror, out.kept) == (errno.EINVAL, "gpu.weight: junk; k; nothing "
                                                   "else was changed", ["k"])
    assert isinstance(out.cause, CgroupError) and out.cause.strerror == "gpu.weight: junk"


def test_failure_of_another_os_error():
    e = OSError(errno.EIO, "Input/output error", "/x/f")
    out = knobs._failure(e, _undone())
    assert isinstance(out, ApplyError)
    assert (out.errno, out.strerror) == (errno.EIO, "/x/f: Input/output error; nothing was "
                                         "changed")
    out = knobs._failure(OSError(errno.EIO, "Input/output error"), _undone([CgroupError(
        errno.EBUSY, "u")]))
    assert out.strerror == "Input/output error; rollback incomplete: u"
    assert knobs._failure(OSError("plain"), _undone()).strerror == "plain; nothing was changed"


def test_failure_of_a_bug_keeps_it_with_notes():
    bug = KeyError("x")
    out = knobs._failure(bug, _undone([CgroupError(errno.EBUSY, "undo failed")], ["kept it"]))
    assert out is bug
    assert bug.__notes__ == ["pycgpu: undo failed", "pycgpu: kept it"]


# OCI patches ------------------------------------------------------------------------


def test_apply_sets_args_terminal_and_cgroups_path():
    doc: dict = {"ociVersion": "1.0.2"}
    changes = oci.apply(doc, oci.Patch(args=["sh", "-c", "x"], terminal=False,
                                       cgroups_path="/pods/c1"))
    assert doc == {"ociVersion": "1.0.2", "process": {"args": ["sh", "-c", "x"],
                                                      "terminal": False},
                   "linux": {"cgroupsPath": "/pods/c1"}}
    assert changes == ['set process.args = ["sh", "-c", "x"]', "set process.terminal = false",
                       "set linux.cgroupsPath = '/pods/c1'"]


def test_apply_removes_the_legacy_stanza_and_keeps_equal_values():
    doc = {"linux": {"resources": {"gpu": {"prio": 1},
                                   "unified": {"gpu.weight": "default 5"}}}}
    changes = oci.apply(doc, oci.Patch(settings=knobs.Settings(weight=5), legacy_stanza=False))
    assert doc == {"linux": {"resources": {"unified": {"gpu.weight": "default 5"}}}}
    assert changes == ["remove linux.resources.gpu"]
    assert oci.apply(doc, oci.Patch(legacy_stanza=False)) == []


@pytest.mark.parametrize("where, doc", [
    ("linux.devices", {"linux": {"devices": {}}}),
    ("linux.resources.devices", {"linux": {"resources": {"devices": 3}}}),
    ("linux.resources.unified", {"linux": {"resources": {"unified": []}}}),
    ("annotations", {"annotations": "x"}),
    ("hooks", {"hooks": []}),
    ("hooks.createRuntime", {"hooks": {"createRuntime": {}}}),
    ("process", {"process": "x"}),
    ("linux", {"linux": 1}),
])
def test_a_field_of_the_wrong_type_is_named(where, doc):
    with pytest.raises(oci.ConfigError) as info:
        oci.apply(doc, oci.Patch(args=["x"], settings=knobs.Settings(weight=5)))
    assert str(info.value).startswith(f"{where} ")


@pytest.mark.parametrize("entry, ours", [
    ({"path": "/usr/bin/pycgpu", "args": ["pycgpu", "oci", "hook"]}, True),
    ({"path": "/opt/x/bin/pycgpu", "args": ["x", "oci", "hook", "--allow", "k"]}, True),
    ({"path": "/usr/bin/python3", "args": ["python3", "-m", "pycgpu", "oci", "hook"]}, True),
    ({"path": "/usr/bin/python3", "args": ["python3", "-m", "pycgpu.runtime.hook",
                                           "--allow", "k"]}, True),
    ({"path": "/opt/pycgpu/bin/pycgpu-hook", "args": ["pycgpu-hook"]}, True),
    ({"path": "/opt/p/bin/pycgpu-hook", "args": ["pycgpu-hook", "--allow", "a", "--allow",
                                                  "b"]}, True),
    ({"path": "/usr/bin/other", "args": ["other", "oci", "hook"]}, False),
    ({"path": "/usr/bin/other", "args": ["other"]}, False),
    ({"path": "/usr/bin/pycgpu-hook", "args": ["pycgpu-hook", "extra"]}, False),
    ({"path": "/usr/bin/pycgpu", "args": ["pycgpu", "oci", "patch"]}, False),
    ({"path": "/usr/bin/pycgpu", "args": "pycgpu oci hook"}, False),
    ({"args": ["pycgpu", "oci", "hook"]}, True),
    ({"path": 5, "args": ["x", "oci", "hook"]}, False),
])
def test_is_pycgpu_hook(entry, ours):
    assert oci.is_pycgpu_hook(entry) is ours


def test_a_pycgpu_hook_entry_is_replaced_and_unpatched():
    hook = oci.HookCommand("/opt/pycgpu/bin/pycgpu-hook", ("pycgpu-hook",))
    doc: dict = {}
    oci.apply(doc, oci.Patch(settings=knobs.Settings(weight=5), hook=hook))
    oci.apply(doc, oci.Patch(settings=knobs.Settings(weight=7), hook=hook))
    assert doc["hooks"]["createRuntime"] == [{"path": "/opt/pycgpu/bin/pycgpu-hook",
                                              "args": ["pycgpu-hook"]}]
    oci.unpatch(doc)
    assert doc["hooks"]["createRuntime"] == []


def test_atomic_write(tmp_path):
    target = tmp_path / "config.json"
    oci.atomic_write(target, '{"ü": 1}\n')
    assert target.read_bytes() == '{"ü": 1}\n'.encode()
    assert stat.S_IMODE(target.stat().st_mode) == 0o666 & ~oci._umask()
    target.chmod(0o600)
    oci.atomic_write(target, "{}\n")
    assert stat.S_IMODE(target.stat().st_mode) == 0o600 and target.read_text() == "{}\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["config.json"]
    with pytest.raises(OSError) as info:
        oci.atomic_write(tmp_path / "none" / "config.json", "{}")
    assert (info.value.errno, info.value.filename) == (errno.ENOENT, str(tmp_path / "none"))


def test_atomic_write_names_its_temporary_file_beside_the_target(tmp_path, monkeypatch):
    seen = []
    real = os.replace

    def replace(src, dst):
        seen.append((os.path.dirname(src), os.path.basename(src),
                     json.loads(Path(src).read_text())))
        real(src, dst)

    monkeypatch.setattr(os, "replace", replace)
    oci.atomic_write(tmp_path / "c.json", "[1]")
    [(where, name, content)] = seen
    assert where == str(tmp_path) and content == [1]
    assert name.startswith(".c.json.") and name.endswith(".tmp")


# the hook's state -------------------------------------------------------------------


def _state(**fields) -> str:
    return json.dumps({"id": "c1", "pid": 42, "bundle": "/run/b", **fields})


@pytest.mark.parametrize("text, message", [
    ("{", "the OCI state on stdin:1:2: not valid JSON: Expecting property name enclosed in "
          "double quotes - is this running as an OCI hook?"),
    ("[]", "the OCI state on stdin is not a JSON object"),
    (_state(id=5), "the OCI state on stdin has no container id"),
    (_state(id=""), "the OCI state on stdin has no container id"),
    (_state(pid=-1), "container c1: the state's pid -1 is not a process id"),
    (_state(pid=True), "container c1: the state's pid True is not a process id"),
    (_state(pid="42"), "container c1: the state's pid '42' is not a process id"),
    (_state(bundle=5), "container c1: the state has no bundle path"),
    (_state(bundle=""), "container c1: the state has no bundle path"),
    (_state(annotations=[]), "container c1: the state's annotations are not an object"),
])
def test_a_bad_state_says_what_is_wrong(text, message):
    from pycgpu.runtime import hook

    with pytest.raises(hook.BadInput) as info:
        hook.ContainerState.parse(text)
    assert str(info.value) == message


def test_a_state_parses_from_text_or_bytes():
    from pycgpu.core.jsontext import MAX_DEPTH
    from pycgpu.runtime import hook

    state = hook.ContainerState.parse(_state(pid=0, annotations={"a": "b"}).encode())
    assert state == hook.ContainerState("c1", None, Path("/run/b"), {"a": "b"})
    assert hook.ContainerState.parse(_state()).pid == 42
    nested: object = 1
    for _ in range(MAX_DEPTH - 1):  # the state's object and MAX_DEPTH - 1 lists
        nested = [nested]
    assert hook.ContainerState.parse(_state(x=nested)).id == "c1"  # as deep as allowed
    with pytest.raises(hook.BadInput, match=f"nested deeper than {MAX_DEPTH} levels"):
        hook.ContainerState.parse(_state(x=[nested]))


# the hook's pod bookkeeping ---------------------------------------------------------


def test_attribute_errors_name_the_group_and_keep_the_errno(fake, monkeypatch):
    from pycgpu.runtime import kubepods

    fake.make("a")
    cg = Cgroup(fake.root, "a")

    def fail(*args):
        raise OSError(errno.EOPNOTSUPP, "Operation not supported")

    monkeypatch.setattr(os, "getxattr", fail)
    with pytest.raises(CgroupError) as info:
        kubepods.read_asked(cg)
    assert (info.value.errno, info.value.strerror) == (
        errno.EOPNOTSUPP, f"{cg.path}: reading {kubepods.XATTR}: Operation not supported")
    monkeypatch.setattr(os, "setxattr", fail)
    with pytest.raises(CgroupError) as info:
        kubepods._set_raw(cg, b"default 5")
    assert (info.value.errno, info.value.strerror) == (
        errno.EOPNOTSUPP, f"{cg.path}: setting {kubepods.XATTR}: Operation not supported")
    monkeypatch.setattr(os, "removexattr", fail)
    with pytest.raises(CgroupError, match=r"setting trusted\.pycgpu\.weight"):
        kubepods._set_raw(cg, None)
    monkeypatch.setattr(os, "removexattr", lambda *a: (_ for _ in ()).throw(
        OSError(errno.ENODATA, "No data available")))
    kubepods._set_raw(cg, None)  # nothing to remove: fine


def test_an_attribute_that_does_not_parse_names_the_group(fake, monkeypatch):
    from pycgpu.runtime import kubepods

    fake.make("a")
    cg = Cgroup(fake.root, "a")
    monkeypatch.setattr(os, "getxattr", lambda *a: b"default lots\n")
    with pytest.raises(CgroupError) as info:
        kubepods.read_asked(cg)
    assert (info.value.errno, info.value.strerror) == (
        errno.EINVAL, f"{cg.path}: {kubepods.XATTR}: 'lots' is not an integer")
    monkeypatch.setattr(os, "getxattr", lambda *a: b"226:128 many\n")
    with pytest.raises(CgroupError, match=r"trusted\.pycgpu\.weight: 'many' is not an integer"):
        kubepods.read_asked(cg)


# the rollback's values ---------------------------------------------------------------


def test_an_undo_value_that_cannot_be_read_says_why(fake):
    fake.make("a")
    cg = Cgroup(fake.root, "a")
    (fake.root / "a" / "gpu.weight").write_text("default lots\n")
    with pytest.raises(CgroupError) as info:
        knobs.Write("gpu.weight", "default 5").undo_value(cg)
    path = fake.root / "a" / "gpu.weight"
    assert _fields(info.value) == (
        errno.EINVAL, f"reading {path}: default weight: 'lots' is not an integer", READ, path)
    (fake.root / "a" / "gpu.priority").unlink()
    with pytest.raises(CgroupError) as info:
        knobs.Write("gpu.priority", "5").undo_value(cg)
    path = fake.root / "a" / "gpu.priority"
    assert _fields(info.value) == (
        errno.ENOENT, f"reading {path}: the gpu controller is not enabled for {fake.root}/a",
        READ, path)
    assert knobs.Write("gpu.memory.max", "226:128 5", DevT(226, 128)).undo_value(cg) == \
        "226:128 max"


def test_a_file_that_does_not_parse_names_itself(fake):
    fake.make("a")
    (fake.root / "a" / "gpu.priority").write_text("high\n")
    with pytest.raises(CgroupError) as info:
        Cgroup(fake.root, "a").priority()
    path = fake.root / "a" / "gpu.priority"
    assert _fields(info.value) == (errno.EINVAL, f"reading {path}: value: 'high' is not an "
                                   "integer", READ, path)


def test_pod_sums_that_cannot_be_restored_are_named(fake, monkeypatch):
    from pycgpu.runtime import kubepods

    fake.make("kubepods/pod1/ctr")
    ctr = Cgroup(fake.root, "kubepods/pod1/ctr")
    pod = Cgroup(fake.root, "kubepods/pod1")
    monkeypatch.setattr(kubepods, "kube_ancestors", lambda cg: [pod])
    real_set_raw = kubepods._set_raw
    calls = []

    def set_raw(cg, raw):
        calls.append((cg.name, raw))
        if len(calls) > 1:  # the restore
            raise CgroupError(errno.EIO, "no restore")
        real_set_raw(cg, raw)

    def sums(cg):
        raise CgroupError(errno.EBUSY, "boom")

    monkeypatch.setattr(kubepods, "_set_raw", set_raw)
    monkeypatch.setattr(kubepods, "sums", sums)
    with pytest.raises(knobs.PartialUndo) as info:
        kubepods.apply(ctr, kubepods.Asked(300))
    assert (info.value.errno, info.value.strerror) == (
        errno.EBUSY, "boom; could not restore the GPU weights of /kubepods/pod1/ctr")
    assert calls == [("/kubepods/pod1/ctr", b"default 300\n"), ("/kubepods/pod1/ctr", None)]

    calls.clear()
    monkeypatch.setattr(kubepods, "sums", lambda cg: {}["bug"])
    with pytest.raises(KeyError) as bug:
        kubepods.apply(ctr, kubepods.Asked(300))
    assert bug.value.__notes__ == [
        "pycgpu: could not restore the GPU weights of /kubepods/pod1/ctr"]


def test_patch_refusals_say_what(tmp_path):
    hook = oci.HookCommand("/bin/pycgpu-hook", ("pycgpu-hook",))
    with pytest.raises(oci.ConfigError) as info:
        oci.apply({}, oci.Patch(settings=knobs.Settings(weight=0), hook=hook))
    assert str(info.value) == "weight 0 is out of range [1, 10000]"
    with pytest.raises(oci.ConfigError) as info:
        oci.apply({}, oci.Patch(hook=hook, image_check="maybe"))
    assert str(info.value) == "image check 'maybe': give " + ", ".join(
        oci.ann.IMAGE_CHECK_MODES)
