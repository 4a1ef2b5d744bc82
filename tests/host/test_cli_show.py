"""`pycgpu show` text and pycgpu.show/v1 JSON on fake trees."""

from __future__ import annotations

import json

import jsonschema
import pytest

from pycgpu.core import snapshot
from pycgpu.core.schemas import SHOW_SCHEMA


@pytest.fixture
def tree(cli):
    """/a with every file filled in, /a/b with defaults, /plain without gpu."""
    fake = cli.fake
    fake.make("a/b")
    (fake.root / "plain").mkdir()
    a = fake.root / "a"
    (a / "gpu.weight").write_text("default 300\n226:128 50\n")
    (a / "gpu.priority").write_text("-5\n")
    (a / "gpu.priority.effective").write_text("-5\n")
    (a / "gpu.memory.max").write_text("226:128 536870912\n226:129 max\n")
    (a / "gpu.memory.current").write_text("226:128 4096\n226:129 0\n")
    (a / "gpu.memory.peak").write_text("226:128 8192\n226:129 0\n")
    (a / "gpu.memory.events").write_text("226:128 max=3\n226:129 max=0\n")
    (a / "gpu.memory.events.local").write_text("226:128 max=1\n226:129 max=0\n")
    (a / "gpu.stat").write_text("226:128 usage_usec=1500 wait_usec=20\n")
    (a / "gpu.max").write_text("default 30000 100000\n226:129 max 50000\n")
    return fake


def test_show_text(cli, tree):
    r = cli("show", "a")
    assert r.output.splitlines() == [
        "/a",
        "  weight               default 300, renderD128 (226:128) 50",
        "  priority             -5 (effective -5)",
        "  max                  default 30% (30ms/100ms), renderD129 (226:129) max/50ms",
        "  memory.max           renderD128 (226:128) 512M, renderD129 (226:129) max",
        "  memory.current       renderD128 (226:128) 4K, renderD129 (226:129) 0",
        "  memory.peak          renderD128 (226:128) 8K, renderD129 (226:129) 0",
        "  memory.events        renderD128 (226:128) max=3; renderD129 (226:129) max=0",
        "  memory.events.local  renderD128 (226:128) max=1; renderD129 (226:129) max=0",
        "  stat                 renderD128 (226:128) usage_usec=1500 wait_usec=20",
    ]


def test_show_text_sizes_and_unknown_devices(cli, tree):
    """Sizes in the one human format (exact where a whole number of a unit,
    else one decimal); a device without a known render node keeps its
    MAJ:MIN alone."""
    a = tree.root / "a"
    (a / "gpu.memory.max").write_text("226:128 1610612736\n226:129 max\n226:140 4096\n")
    (a / "gpu.memory.current").write_text("226:128 1000000\n226:129 12348030976\n")
    lines = {line.split()[0]: line for line in cli("show", "a").output.splitlines()}
    assert lines["memory.max"].split(None, 1)[1] == (
        "renderD128 (226:128) 1536M, renderD129 (226:129) max, 226:140 4K")
    assert lines["memory.current"].split(None, 1)[1] == (
        "renderD128 (226:128) 976.6K, renderD129 (226:129) 11.5G")


def test_show_recursive_text(cli, tree):
    r = cli("show", "-r", "/")
    paths = [line for line in r.output.splitlines() if not line.startswith(" ")]
    assert paths == ["/  (root: no gpu.* files)", "/a", "/a/b", "/plain  (gpu not enabled)"]


def test_show_json_schema_and_types(cli, tree):
    doc = json.loads(cli("show", "--json", "-r", "a").output)
    jsonschema.validate(doc, SHOW_SCHEMA)
    assert doc["schema"] == "pycgpu.show/v1"
    assert doc["cgroup_root"] == str(tree.root)
    a, b = doc["cgroups"]
    assert a == {
        "path": "/a",
        "gpu_enabled": True,
        "weight": {"default": 300, "devices": {"226:128": 50}},
        "priority": -5,
        "priority_effective": -5,
        "max": {"default": {"max_us": 30000, "period_us": 100000},
                "devices": {"226:129": {"max_us": None, "period_us": 50000}}},
        "memory": {
            "max": {"226:128": 536870912, "226:129": None},
            "current": {"226:128": 4096, "226:129": 0},
            "peak": {"226:128": 8192, "226:129": 0},
            "events": {"226:128": {"max": 3}, "226:129": {"max": 0}},
            "events_local": {"226:128": {"max": 1}, "226:129": {"max": 0}},
        },
        "stat": {"226:128": {"usage_usec": 1500, "wait_usec": 20}},
    }
    assert b["path"] == "/a/b" and b["weight"] == {"default": 100, "devices": {}}


def test_show_omits_absent_files(cli):
    cli.fake.memory = False
    cli.fake.make("a")
    doc = json.loads(cli("show", "--json", "a").output)
    jsonschema.validate(doc, SHOW_SCHEMA)
    (item,) = doc["cgroups"]
    assert set(item) == {"path", "gpu_enabled", "weight", "priority_inherited",
                         "priority_effective", "max"}
    assert item["max"] == {"default": {"max_us": None, "period_us": 100000}, "devices": {}}
    text = cli("show", "a").output
    assert "memory" not in text and "stat" not in text


def test_show_root_and_group_without_gpu(cli, tree):
    doc = json.loads(cli("show", "--json").output)
    assert doc["cgroups"] == [{"path": "/", "gpu_enabled": False}]
    doc = json.loads(cli("show", "--json", "plain").output)
    assert doc["cgroups"] == [{"path": "/plain", "gpu_enabled": False}]


def test_show_missing_group(cli):
    r = cli("show", "nope", code=2)
    assert r.output.strip() == "Error: cgroup /nope does not exist"


def test_show_unparsable_file_names_it(cli, tree):
    (tree.root / "a" / "gpu.priority").write_text("high\n")
    r = cli("show", "a", code=1)
    assert f"{tree.root}/a/gpu.priority: gpu.priority: 'high' is not an integer" in r.output


def test_walk_is_preorder_by_name(tmp_path):
    for rel in ("b", "a/z", "a/y/x", "c"):
        (tmp_path / rel).mkdir(parents=True)
    names = [item["path"] for item in snapshot.walk(tmp_path, "/", recursive=True)]
    assert names == ["/", "/a", "/a/y", "/a/y/x", "/a/z", "/b", "/c"]
    assert [i["path"] for i in snapshot.walk(tmp_path, "a/y", recursive=True)] == [
        "/a/y", "/a/y/x"]


def test_show_1000_groups(cli):
    """Smoke test of the recursive walk at the size the benchmark uses."""
    fake = cli.fake
    fake.make("many/g0000")
    for i in range(1, 1000):
        fake.mkdir(fake.root / "many" / f"g{i:04}")
    doc = json.loads(cli("show", "-r", "--json", "many").output)
    assert len(doc["cgroups"]) == 1001
    assert all(item["gpu_enabled"] for item in doc["cgroups"][1:])


def test_show_root_with_device_totals(cli, tree, fake):
    (fake.root / "gpu.stat").write_text("226:128 usage_usec=5 wait_usec=1 sched=1\n")
    (fake.root / "gpu.memory.current").write_text("226:128 1048576\n")
    doc = json.loads(cli("show", "--json").output)
    assert doc["cgroups"] == [{"path": "/", "gpu_enabled": False,
                               "stat": {"226:128": {"usage_usec": 5, "wait_usec": 1, "sched": 1}},
                               "memory": {"current": {"226:128": 1048576}}}]
    assert cli("show").output.splitlines() == [
        "/  (device totals)",
        "  memory.current       renderD128 (226:128) 1M",
        "  stat                 renderD128 (226:128) usage_usec=5 wait_usec=1 sched=1"]
