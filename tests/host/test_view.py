"""The presentation layer outside the monitors (those are in
test_cli_monitor.py): device and card order past card9 and renderD137, the
tables drawn by rich, and mount points with escaped characters."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from click.testing import CliRunner
from conftest import _node

from pycgpu.cli import main
from pycgpu.core.formats import DevT

# order -------------------------------------------------------------------------------------


def test_render_and_card_nodes_are_in_numeric_order(cli, fake_sysfs):
    """Past card9 and renderD137: card10 is no card1, renderD138 follows
    renderD137, and devices, DEV names and k8s inventory go by number."""
    sysfs, dev = fake_sysfs
    for i in range(2, 13):  # card2..card12 with renderD130..renderD140
        parent = sysfs / "devices" / "platform" / f"gpu{i}"
        parent.mkdir(parents=True)
        _node(sysfs, parent, f"card{i}", f"226:{i}")
        _node(sysfs, parent, f"renderD{128 + i}", f"226:{128 + i}")
        for name in (f"card{i}", f"renderD{128 + i}"):
            (dev / "dri" / name).write_text("")
    # a device with two card nodes: its card is the lowest number, card9 not card13
    parent = sysfs / "devices" / "platform" / "gpu9"
    _node(sysfs, parent, "card13", "226:13")
    doc = json.loads(cli("devices", "--json").output)
    nodes = [Path(d["render_node"]).name for d in doc["devices"]]
    assert nodes == [f"renderD{n}" for n in range(128, 141)]
    cards = {Path(d["render_node"]).name: Path(d["card_node"]).name for d in doc["devices"]}
    assert cards["renderD137"] == "card9" and cards["renderD138"] == "card10"
    text = [line.split()[0] for line in cli("devices").output.splitlines()[1:]]
    assert [Path(t).name for t in text] == nodes
    # DEV names resolve by number, not by prefix
    cli.fake.devices |= {DevT(226, n) for n in range(130, 141)}  # the fake kernel knows them
    cli.fake.make("a")
    cli("set", "a", "--weight", "card10=7", "--weight", "card1=8")
    assert cli.fake.read("a/gpu.weight") == "default 100\n226:129 8\n226:138 7\n"
    inv = json.loads(cli("k8s", "inventory", "--shares", "12", "--json").output)
    assert [g["device"] for g in inv["gpus"]] == nodes
    assert inv["gpus"][0]["ids"] == ["renderD128-s0", "renderD128-s11"]


# tables --------------------------------------------------------------------------------------


def test_table_cells_are_text_not_markup():
    from pycgpu.monitoring.tables import plain, table

    text = plain(table(["NAME", "N"], [["[bold]x[/bold] :smile:", "1"], ["y", "10"]],
                       left={"NAME"}))
    assert text.splitlines() == ["NAME".ljust(22) + "   N",
                                 "[bold]x[/bold] :smile:   1",
                                 "y".ljust(22) + "  10"]


def test_the_table_module_keeps_rich_lazy():
    code = ("import sys, pycgpu.monitoring.tables, pycgpu.cli.commands.cmd_devices, "
            "pycgpu.cli.commands.cmd_k8s; "
            "print('rich' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "False"


# mount points --------------------------------------------------------------------------------


def test_cgroup_mount_point_with_a_space(tmp_path, cli):
    """mountinfo writes a space as \\040: the tree is found at the real path,
    and `check` names it and quotes it in the fix it prints."""
    from pycgpu.core.capabilities import Host, check
    from pycgpu.core.cgroup import find_mount

    root = tmp_path / "my cgroup"
    root.mkdir()
    (root / "cgroup.controllers").write_text("cpu gpu\n")
    (root / "cgroup.subtree_control").write_text("\n")
    escaped = str(root).replace(" ", "\\040")
    info = tmp_path / "mountinfo"
    info.write_text("22 1 0:21 / /proc rw - proc proc rw\n"
                    f"30 22 0:26 / {escaped} rw,nosuid - cgroup2 cgroup2 rw\n")
    assert find_mount(info) == root
    report = check(Host(mountinfo=info, proc_cgroups=tmp_path / "none",
                        pid1_comm=tmp_path / "none", systemd_run=tmp_path / "none"), path="a")
    assert report.cgroup_root == root
    (f,) = [f for f in report.findings if f.id == "path"]
    assert str(root) in f.message
    # the printed fix quotes the path: run, it writes to the file with the space
    subprocess.run(f.fix.removeprefix("sudo "), shell=True, check=True)
    assert (root / "cgroup.subtree_control").read_text() == "+gpu\n"
    r = CliRunner().invoke(main, ["--cgroup-root", str(root), "show", "-r"])
    assert r.exit_code == 0 and r.output.startswith("/  (root: no gpu.* files)")
