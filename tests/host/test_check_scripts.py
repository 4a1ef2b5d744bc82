"""The hardware checks' driver scripts (tools/amdgpu-check.sh,
tools/xe-check.sh) on the host: what they do without the hardware, their
usage. The check itself runs on simgpu in the VM tier
(tests/vm/test_drm_check.py)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("script,driver", [("amdgpu-check.sh", "AMD"), ("xe-check.sh", "xe")])
def test_bad_mode_prints_usage(script: str, driver: str) -> None:
    r = subprocess.run([str(ROOT / "tools" / script), "bogus"], capture_output=True, text=True)
    assert r.returncode == 2
    assert r.stdout.startswith("Checks the gpu cgroup controller on a real")
    assert driver in r.stdout.splitlines()[0]
    assert f"tools/{script} [weights|priority] [SECONDS]" in r.stdout


def test_bad_seconds_prints_usage() -> None:
    r = subprocess.run([str(ROOT / "tools/xe-check.sh"), "weights", "ten"],
                       capture_output=True, text=True)
    assert r.returncode == 2
    assert "tools/xe-check.sh [weights|priority] [SECONDS]" in r.stdout
