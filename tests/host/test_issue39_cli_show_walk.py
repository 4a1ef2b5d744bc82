"""Issue 39, item 3: ``pycgpu show -r`` on a tree where groups come and go.
A group that disappears during the walk is left out (as stat and the
exporter leave it out), and a group whose files do not parse is left out
with a warning on stderr; the rest of the listing is printed, exit 0. The
group PATH names is still an error of its own (exit 1)."""

from __future__ import annotations

import json
import os
import shutil

import pytest

from pycgpu.core import snapshot


def _vanishing(monkeypatch, victim: str, after: str) -> None:
    """Remove the group @victim (a directory under the fake root) right after
    the walk has listed the group @after: it is gone when the walk gets there."""
    real = snapshot._scan

    def scan(dirpath: str):
        found = real(dirpath)
        if dirpath.endswith(after):
            shutil.rmtree(victim)
        return found

    monkeypatch.setattr(snapshot, "_scan", scan)


@pytest.mark.parametrize("as_json", [False, True])
def test_a_group_that_disappears_mid_walk_is_left_out(cli, monkeypatch, as_json):
    for rel in ("a/b/c", "a/d", "a/e"):
        cli.fake.make(rel)
    _vanishing(monkeypatch, str(cli.fake.root / "a" / "b"), "/a")
    r = cli("show", "-r", "a", *(["--json"] if as_json else []))
    if as_json:
        paths = [item["path"] for item in json.loads(r.stdout)["cgroups"]]
    else:
        paths = [line for line in r.stdout.splitlines() if line.startswith("/")]
    assert paths == ["/a", "/a/d", "/a/e"]
    assert "Error" not in r.output


def test_a_group_whose_files_vanish_after_the_listing_is_left_out(cli, monkeypatch):
    """The directory was listed (its gpu.* files seen), then removed before
    its files were read: it is not shown as a group without gpu."""
    for rel in ("a/b", "a/c"):
        cli.fake.make(rel)
    real = snapshot._scan

    def scan(dirpath: str):
        found = real(dirpath)
        if dirpath.endswith("/a/b"):
            shutil.rmtree(dirpath)
        return found

    monkeypatch.setattr(snapshot, "_scan", scan)
    r = cli("show", "-r", "a")
    assert [line for line in r.stdout.splitlines() if line.startswith("/")] == ["/a", "/a/c"]


def test_an_unparseable_group_is_left_out_with_a_warning(cli):
    for rel in ("a/b/c", "a/d"):
        cli.fake.make(rel)
    (cli.fake.root / "a" / "b" / "gpu.weight").write_text("default lots\n")
    r = cli("show", "-r", "--json", "a")
    doc = json.loads(r.stdout)
    # the broken group alone is left out: its children are still listed
    assert [item["path"] for item in doc["cgroups"]] == ["/a", "/a/b/c", "/a/d"]
    assert r.stderr.startswith("warning: ") and len(r.stderr.splitlines()) == 1
    assert f"{cli.fake.root}/a/b/gpu.weight" in r.stderr and "skipped" in r.stderr


def test_an_unreadable_group_is_left_out_with_a_warning(cli, monkeypatch):
    for rel in ("a/b", "a/c"):
        cli.fake.make(rel)
    real = os.scandir

    def scandir(path):
        if str(path).endswith("/a/b"):
            raise PermissionError(13, "Permission denied")
        return real(path)

    monkeypatch.setattr(snapshot.os, "scandir", scandir)
    r = cli("show", "-r", "a")
    assert [line for line in r.stdout.splitlines() if line.startswith("/")] == ["/a", "/a/c"]
    assert r.stderr.startswith("warning: ") and "Permission denied" in r.stderr


def test_the_group_named_is_still_an_error(cli):
    cli.fake.make("a/b")
    (cli.fake.root / "a" / "gpu.weight").write_text("default lots\n")
    r = cli("show", "-r", "a", code=1)
    assert r.output.startswith("Error: ") and len(r.output.splitlines()) == 1


def test_an_ancestor_that_cannot_be_read_leaves_capped_by_out(cli, monkeypatch):
    """priority_capped_by reads the ancestors' gpu.priority: one that went
    away or does not parse costs that note, not the listing."""
    cli.fake.make("a/b")
    b = cli.fake.root / "a" / "b"
    (b / "gpu.priority").write_text("5\n")
    (b / "gpu.priority.effective").write_text("0\n")
    (cli.fake.root / "a" / "gpu.priority").write_text("zero\n")
    r = cli("show", "-r", "--json", "a/b")
    assert [item["path"] for item in json.loads(r.stdout)["cgroups"]] == ["/a/b"]
