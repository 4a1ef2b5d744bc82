"""pycgpu.core.model: the one model of a group's gpu.* files, read by one
function, and the projections of it (show/v1 items, the show/v1 schema,
the rollback's values, the kernel source's files)."""

from __future__ import annotations

import json

import jsonschema
import pytest

from pycgpu.core import model, schemas, snapshot
from pycgpu.core.formats import Cap, Caps, DevT, FormatError, Weights
from pycgpu.monitoring import kernel

A, B = DevT(226, 128), DevT(226, 129)

TEXTS = {
    "gpu.weight": "default 300\n226:129 20\n",
    "gpu.priority": "-3\n",
    "gpu.priority.effective": "-5\n",
    "gpu.memory.max": "226:128 1073741824\n226:129 max\n",
    "gpu.memory.current": "226:128 4096\n226:129 0\n",
    "gpu.memory.peak": "226:128 8192\n226:129 0\n",
    "gpu.memory.events": "226:128 max=2\n226:129 max=0\n",
    "gpu.memory.events.local": "226:128 max=1\n226:129 max=0\n",
    "gpu.stat": "226:128 usage_usec=10 wait_usec=2\n226:129 usage_usec=0 wait_usec=0\n",
    "gpu.max": "default 30000 100000\n226:129 max 50000\n",
}
CAPS = Caps(Cap(30000), {B: Cap(None, 50000)})


@pytest.fixture
def group(tmp_path):
    for name, text in TEXTS.items():
        (tmp_path / name).write_text(text)
    return tmp_path


def test_read_group_types_every_file(group):
    files = model.read_group(str(group), "/a")
    assert files == model.GroupFiles(
        "/a", frozenset(TEXTS), weight=Weights(300, {B: 20}), priority=-3,
        priority_effective=-5, caps=CAPS, memory_max={A: 1 << 30, B: None},
        memory_current={A: 4096, B: 0}, memory_peak={A: 8192, B: 0},
        memory_events={A: {"max": 2}, B: {"max": 0}},
        memory_events_local={A: {"max": 1}, B: {"max": 0}},
        stat={A: {"usage_usec": 10, "wait_usec": 2}, B: {"usage_usec": 0, "wait_usec": 0}})
    assert files.gpu_enabled and files.errors == ()
    with pytest.raises(AttributeError):
        files.priority = 1  # type: ignore[misc]  # frozen


def test_a_file_missing_or_not_listed_is_none(group):
    (group / "gpu.memory.peak").unlink()
    files = model.read_group(str(group), "/a", present={"gpu.stat", "gpu.weight"})
    assert files.present == {"gpu.stat", "gpu.weight"}
    assert files.priority is None and files.stat is not None
    assert model.read_group(str(group), "/a").memory_peak is None
    root = model.read_group(str(group), "/", names=("gpu.stat", "gpu.memory.current"))
    assert not root.gpu_enabled and root.weight is None and root.memory_current == {
        A: 4096, B: 0}


def test_a_file_that_does_not_parse_is_an_error_of_the_model(group):
    (group / "gpu.priority").write_text("high\n")
    files = model.read_group(str(group), "/a")
    assert files.priority is None and files.weight is not None
    assert [(name, str(e)) for name, e in files.errors] == [
        ("gpu.priority", "gpu.priority: 'high' is not an integer")]
    with pytest.raises(FormatError, match="'high' is not an integer"):
        files.value("gpu.priority")
    with pytest.raises(FormatError, match=r"/a: no gpu\.memory\.events"):
        model.read_group(str(group), "/a", names=("gpu.stat",)).value("gpu.memory.events")


def test_show_items_are_a_projection_of_the_model(group):
    item = snapshot.read_group(str(group), "/a", set(TEXTS))
    assert item == model.show_item(model.read_group(str(group), "/a"))
    assert json.dumps(item) == json.dumps({
        "path": "/a", "gpu_enabled": True,
        "weight": {"default": 300, "devices": {"226:129": 20}},
        "priority": -3, "priority_effective": -5,
        "max": {"default": {"max_us": 30000, "period_us": 100000},
                "devices": {"226:129": {"max_us": None, "period_us": 50000}}},
        "stat": {"226:128": {"usage_usec": 10, "wait_usec": 2},
                 "226:129": {"usage_usec": 0, "wait_usec": 0}},
        "memory": {"max": {"226:128": 1073741824, "226:129": None},
                   "current": {"226:128": 4096, "226:129": 0},
                   "peak": {"226:128": 8192, "226:129": 0},
                   "events": {"226:128": {"max": 2}, "226:129": {"max": 0}},
                   "events_local": {"226:128": {"max": 1}, "226:129": {"max": 0}}}})


def test_the_show_schema_has_every_file_of_the_model():
    props = schemas.SHOW_SCHEMA["properties"]["cgroups"]["items"]["properties"]
    for f in model.FILES:
        where = props if len(f.show_key) == 1 else props["memory"]["properties"]
        if f.name.startswith("gpu.memory."):
            # memory is keyed by region: gpu.memory.*'s device keys are region keys too
            assert f.schema["additionalProperties"] == where[f.show_key[-1]][
                "additionalProperties"], f.name
        else:
            assert where[f.show_key[-1]] == f.schema, f.name
    assert list(props) == ["path", "gpu_enabled", "weight", "priority", "priority_inherited",
                           "priority_effective", "priority_capped_by", "max", "memory", "stat"]


def test_the_rollback_writes_back_what_the_model_read(group):
    files = model.read_group(str(group), "/a")
    undo = {name: model.FILE[name].undo for name in ("gpu.weight", "gpu.priority", "gpu.max",
                                                      "gpu.memory.max", "dmem.max",
                                                      "dmem.min", "dmem.low")}
    assert undo["gpu.weight"](files, None) == "default 300"
    assert undo["gpu.weight"](files, B) == "226:129 20"
    assert undo["gpu.weight"](files, A) == "226:128 default"
    assert undo["gpu.priority"](files, None) == "-3"
    assert undo["gpu.max"](files, None) == "default 30000 100000"
    assert undo["gpu.max"](files, B) == "226:129 max 50000"
    assert undo["gpu.max"](files, A) == "226:128 default"  # follows the default line
    assert undo["gpu.memory.max"](files, A) == "226:128 1073741824"
    assert undo["gpu.memory.max"](files, B) == "226:129 max"
    assert undo["gpu.memory.max"](files, "226:129") == "226:129 max"  # a region key
    assert [f.name for f in model.FILES if f.kind == model.SETTING] == list(undo)
    with pytest.raises(FormatError):
        model.FILE["gpu.stat"].undo(files, A)


def test_the_kernel_source_reads_the_model_files_with_its_parsers():
    assert kernel.FILES == model.USAGE_FILES and kernel.FILES[0] == "gpu.stat"
    assert set(kernel.FILES) <= set(model.FILE)
    # its fast parsers read what the model's read, and leave the rest to them
    assert kernel._stat(TEXTS["gpu.stat"]) == {A: (10_000, 2_000, None, None, None),
                                               B: (0, 0, None, None, None)}
    assert kernel._stat("226:128 wait_usec=2 usage_usec=10\n") == {
        A: (10_000, 2_000, None, None, None)}
    # the series' own line: sched=, then gpu.max's counters
    line = ("226:128 usage_usec=10 wait_usec=2 sched=1 nr_periods=7 nr_throttled=3 "
            "throttled_usec=40\n")
    assert kernel._STAT.fullmatch(line)
    assert kernel._stat(line) == {A: (10_000, 2_000, 7, 3, 40_000)}
    assert kernel._stat(line.replace("sched=1", "sched=1 x=1")) == {A: (10_000, 2_000, 7, 3,
                                                                        40_000)}
    assert kernel._flat(TEXTS["gpu.memory.max"]) == model.FILE["gpu.memory.max"].parse(
        TEXTS["gpu.memory.max"])
    with pytest.raises(FormatError, match="is not a device number"):
        kernel._flat("nodev 5\n")


def test_dmem_files_show_by_region_key(tmp_path):
    """On a kernel whose memory is dmem's, show/v1's memory is keyed as on
    gpu.memory.* for a device with one region, DEV:REGION for one of several."""
    from pycgpu.core.memory import DMEM, Interface, Region

    (tmp_path / "dmem.max").write_text("drm/vgem/system 4096\ndrm/0000:03:00.0/vram0 max\n")
    (tmp_path / "dmem.current").write_text("drm/vgem/system 0\ndrm/0000:03:00.0/vram0 8192\n")
    (tmp_path / "dmem.events").write_text("drm/vgem/system max=3\ndrm/0000:03:00.0/vram0 max=0\n")
    files = model.read_group(str(tmp_path), "/a")
    regions = Interface(DMEM, (Region("226:128:vram0", "drm/0000:03:00.0/vram0", A, "vram0", 8),
                               Region("226:129", "drm/vgem/system", B, "system", 8)))
    item = model.show_item(files, regions)
    assert item["memory"] == {"max": {"226:129": 4096, "226:128:vram0": None},
                              "current": {"226:129": 0, "226:128:vram0": 8192},
                              "events": {"226:129": {"max": 3}, "226:128:vram0": {"max": 0}}}
    # without the regions (none detected), dmem's own names
    assert model.show_item(files)["memory"]["max"] == {"drm/vgem/system": 4096,
                                                       "drm/0000:03:00.0/vram0": None}
    assert model.FILE["dmem.max"].undo(files, "drm/vgem/system") == "drm/vgem/system 4096"
    assert model.FILE["dmem.max"].undo(files, "drm/0000:03:00.0/vram0") == \
        "drm/0000:03:00.0/vram0 max"
    jsonschema.validate({"schema": "pycgpu.show/v1", "cgroup_root": "/sys/fs/cgroup",
                         "cgroups": [item]}, schemas.SHOW_SCHEMA)
