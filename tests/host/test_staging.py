"""tests/staging.py, which the VM's delegation tests use to run Python as
uid 65534 from a checkout that user cannot read: what it stages is all a
bare interpreter needs to import pycgpu's CLI and the tests' helpers."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
import staging

TESTS = Path(__file__).resolve().parents[1]


def test_sources_are_what_the_imports_load_outside_the_standard_library():
    found = staging.sources(["pycgpu.cli", "drmtest"], [TESTS])
    assert {"pycgpu", "drmtest", "click", "cffi", "_cffi_backend", "pycparser"} <= set(found)
    assert not {"os", "json", "dataclasses", "pytest", "staging"} & set(found)
    assert found["drmtest"] == str(TESTS / "drmtest.py")
    assert os.path.isdir(found["pycgpu"]) and os.path.isdir(found["click"])


@pytest.fixture
def staged():
    """The modules staged where staging puts them by default (pytest's
    tmp_path sits in a directory only its user may enter)."""
    dest = staging.stage(staging.sources(["pycgpu.cli", "drmtest"], [TESTS]))
    yield dest
    shutil.rmtree(dest)


def test_staged_modules_are_readable_by_all_and_enough(staged):
    dest = staged
    assert dest.parent == Path(tempfile.gettempdir()).resolve()
    assert dest.name.startswith("pycgpu-staged-")
    for directory, dirs, files in os.walk(dest):
        assert "__pycache__" not in dirs
        assert stat.S_IMODE(os.stat(directory).st_mode) == 0o755
        for f in files:
            assert stat.S_IMODE(os.stat(os.path.join(directory, f)).st_mode) in (0o644, 0o755)
    assert (dest / "pycgpu" / "core" / "knobs.py").is_file() and (dest / "drmtest.py").is_file()
    # without site (no venv, no user site), only the staged copies can be imported
    code = "import pycgpu, drmtest, pycgpu.cli; print(pycgpu.__file__, drmtest.__file__)"
    r = subprocess.run([sys.executable, "-S", "-c", code], capture_output=True, text=True,
                       cwd="/", env={"PYTHONPATH": str(dest), "PATH": os.environ["PATH"]})
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == [str(dest / "pycgpu" / "__init__.py"), str(dest / "drmtest.py")]


def test_interpreters_of_this_version():
    found = staging.interpreters()
    assert found[0] == os.path.realpath(sys.executable)
    assert len(found) == len(set(found))
    for python in found:
        r = subprocess.run([python, "-c", "import sys; print(sys.version_info[:2])"],
                           capture_output=True, text=True)
        assert r.stdout.strip() == str(tuple(sys.version_info[:2]))


def test_a_parent_others_cannot_enter_is_refused(tmp_path):
    closed = tmp_path / "closed"
    closed.mkdir(mode=0o700)
    with pytest.raises(PermissionError, match=f"{closed} is not searchable by them"):
        staging.stage({}, closed / "sub" / "..")
    assert list(closed.iterdir()) == []
