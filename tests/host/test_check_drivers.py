"""tools/check-drivers.sh: which objects of a driver's Makefile a configuration builds.

The W=1 check compiles the objects the series changes and those that include
a header it changes, among the objects the configuration builds: an object
of a block the configuration leaves out (amdgpu's amdkfd files without
CONFIG_HSA_AMD) does not compile there, and one read from a Kbuild file
(7.3's nouveau) must be found too.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "tools" / "check-drivers.sh"

MAKEFILE = """\
foo-y := core.o
foo-$(CONFIG_FOO_A) += a.o
foo-$(CONFIG_FOO_B) += b.o

ifneq ($(CONFIG_FOO_KFD),)
foo-y += \\
\tkfd_one.o \\
\tkfd_two.o
ifneq ($(CONFIG_FOO_CIK),)
foo-y += kfd_cik.o
endif
endif

ifdef CONFIG_FOO_A
foo-y += a_only.o
else
foo-y += not_a.o
endif

ifeq ($(CONFIG_FOO_B),)
foo-y += no_b.o
endif

ifeq ($(KBUILD_EXTMOD),)
foo-y += always.o
endif

obj-$(CONFIG_FOO) += foo.o
"""


def configured(tmp_path: Path, config: str, name: str = "Makefile") -> list[str]:
    src = tmp_path / "src"
    driver = src / "drivers" / "gpu" / "drm" / "foo"
    driver.mkdir(parents=True)
    (driver / name).write_text(MAKEFILE)
    cfg = tmp_path / "config"
    cfg.write_text(config)
    lines = SCRIPT.read_text().splitlines(keepends=True)
    start = lines.index("configured() {\n")
    end = lines.index("}\n", start)
    function = "".join(lines[start : end + 1])
    out = subprocess.run(
        ["bash", "-c", f'{function}\nconfigured foo "$1"', "_", str(cfg)],
        env={"SRC": str(src), "PATH": "/usr/bin:/bin"},
        capture_output=True, text=True, check=True,
    )
    assert out.stderr == ""
    return out.stdout.split()


def test_blocks_left_out(tmp_path: Path) -> None:
    got = configured(tmp_path, "CONFIG_FOO=m\nCONFIG_FOO_A=y\n# CONFIG_FOO_KFD is not set\n")
    assert got == ["core.o", "a.o", "a_only.o", "no_b.o", "always.o", "foo.o"]


def test_blocks_met(tmp_path: Path) -> None:
    got = configured(tmp_path, "CONFIG_FOO=m\nCONFIG_FOO_B=y\nCONFIG_FOO_KFD=y\nCONFIG_FOO_CIK=y\n")
    assert got == ["core.o", "b.o", "kfd_one.o", "kfd_two.o", "kfd_cik.o", "not_a.o",
                   "always.o", "foo.o"]


def test_nested_block_left_out(tmp_path: Path) -> None:
    got = configured(tmp_path, "CONFIG_FOO=m\nCONFIG_FOO_KFD=y\n")
    assert "kfd_one.o" in got and "kfd_cik.o" not in got


def test_kbuild(tmp_path: Path) -> None:
    assert configured(tmp_path, "CONFIG_FOO=m\n", "Kbuild")[0] == "core.o"
