"""Issue 39, item 9: ``pycgpu rm`` takes the tree lock that ``create`` and
``set`` hold (pycgpu.core.locks.tree_lock), so that it cannot interleave
with a concurrent create and break its rollback."""

from __future__ import annotations

import time

from forked import FORK, finish, start
from test_concurrency import invoke

from pycgpu.core import locks


def test_rm_waits_for_the_tree_lock(cli):
    cli.fake.make("x/y")
    out = FORK.Queue()
    locked = FORK.Event()

    def child() -> None:
        locked.wait(10)
        out.put(invoke(cli.env, "rm", "-r", "x"))

    # the child is forked before the lock is taken: it must not inherit the
    # lock's open file (a flock belongs to the open file, which it would share)
    p = start(child)
    with locks.tree_lock(cli.fake.root):  # another pycgpu run, half-way through a create
        locked.set()
        time.sleep(0.5)
        assert (cli.fake.root / "x" / "y").is_dir()  # rm waits
        assert p.is_alive()
    assert finish(p) == [0]
    assert out.get(timeout=5) == (0, "")
    assert not (cli.fake.root / "x").exists()


def test_rm_dry_run_does_not_wait_for_the_lock(cli):
    cli.fake.make("x")
    with locks.tree_lock(cli.fake.root):
        r = cli("rm", "x", "--dry-run")
    assert r.output == f"would rmdir {cli.fake.root / 'x'}\n"
