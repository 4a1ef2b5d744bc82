"""The table of writes recorded from the real kernel
(tests/host/fixtures/kernel_writes.json) still says what the kernel does.

The host tier checks pycgpu against a fake kernel; the fake answers as
tests/kernel_model.py, and the host tier checks the model against this
table (tests/host/test_kernel_model.py). This test replays every entry on
the real controller, so neither the table nor the model can drift from
kernel/cgroup/gpu.c unseen.

Each entry is one write to a group reset to its defaults: the file, the
bytes written (``{sched}`` for a device whose scheduler follows the
controller, ``{nosched}`` for one that does not), the errno name or null,
and the file's state afterwards on those two devices. To record the table
again after a deliberate change of the kernel's rules (the repository is
read-only in the VM: tools/vm.sh brings the table out to out/vm/):

    make vm-run CMD='PYCGPU_RECORD_TABLE=1 .venv/bin/python -m pytest tests/vm/test_kernel_table.py'
    cp out/vm/kernel_writes.json tests/host/fixtures/
"""

from __future__ import annotations

import errno
import json
import os
import random
from pathlib import Path

import pytest
from kernel_model import table_state, value

from pycgpu.core.cgroup import Cgroup

TABLE = Path(__file__).parent.parent / "host" / "fixtures" / "kernel_writes.json"
FILES = ("gpu.weight", "gpu.priority", "gpu.memory.max", "gpu.max")
# stand-ins for the two devices while inputs are generated (no literal input contains them)
SCHED, NOSCHED = (9001, 1), (9002, 2)

EDGES = {
    "gpu.weight": ["", " ", "\n", "100", "+100", "-0", "0", "1", "10000", "10001", "-1",
                   "default 50", "default", "default\n", "default  7\n", "{sched} 200",
                   "{sched} default", "{sched}  1\n", "{nosched} 200", "{nosched} default",
                   "226:9999 200", "{sched} 200 300", "{sched} 0", "{sched} 10001", "0x10",
                   "1.5", "99999999999999999999", "default 99999999999999999999 ",
                   "9223372036854775808", "\t300\t", "300\n\n", "3 00", "{sched}"],
    "gpu.priority": ["", "0", "-0", "+0", "-1023", "1023", "1024", "-1024", " 5 ", "5\n\n",
                     "5 6", "2147483647", "2147483648", "-2147483649", "\t-7\n", "0x5", "1e3",
                     "max", "--5", "+-5", "default", " default\n", "Default", "default 5",
                     "defaults", "default\n\n"],
    "gpu.memory.max": ["{sched} 4096", "{sched} 4097", "{sched} 0", "{sched} 4k", "{sched} 1M",
                       "{sched} 1G", "{sched} 1T", "{sched} 1P", "{sched} 16384T",
                       "{sched} 16777216T", "{sched} 18446744073709551615",
                       "{sched} 18446744073709551614", "{sched} 18446744073709551616",
                       "{sched} max", "{sched}", "{sched} -1", "{sched} +5", "{nosched} 4096",
                       "{nosched} max", "226:9999 4096", "{sched} 1.5G", "{sched} 1KB",
                       "{sched} 1 2", "max", "{sched} MAX", "{sched} 8m\n", "  {sched}\t2g  "],
    "gpu.max": ["", " ", "30000", "30000 100000", "default 30000", "default 30000 50000",
                "max", "max 50000", "default max", "default max 1000000", "999", "1000",
                "1000 1000", "1001 1000", "100000 999", "100000 1000001", "4294967295",
                "4294967296", "-1", "+5000", "5000x", "30000 100000 7", "default",
                "{sched} 30000", "{sched} 30000 50000", "{sched} max", "{sched} default",
                "{sched} default 5", "{sched}", "{nosched} 30000", "{nosched} max",
                "{nosched} default", "226:9999 30000", "  {sched}\t20000\n", "0x1000",
                "default 1e4", "30000\n\n", "default  2000  4000 "],
}
GENERATED = 300  # per file, from the fuzz's grammar with a fixed seed


def inputs() -> list[tuple[str, str]]:
    """Every (file, input) of the table, inputs as latin-1 text with placeholders."""
    rng = random.Random(20261123)
    out = [(name, text) for name in FILES for text in EDGES[name]]
    for name in FILES:
        for _ in range(GENERATED):
            data = value(rng, name, [SCHED, NOSCHED]).decode("latin-1")
            data = data.replace("9001:1", "{sched}").replace("9002:2", "{nosched}")
            out.append((name, data))
    return out


def reset(cg: Cgroup, sched: str, nosched: str) -> None:
    for name, text in (("gpu.weight", "default 100"), ("gpu.weight", f"{sched} default"),
                       ("gpu.priority", "0"), ("gpu.memory.max", f"{sched} max"),
                       ("gpu.memory.max", f"{nosched} max"), ("gpu.max", "default max 100000"),
                       ("gpu.max", f"{sched} default")):
        if cg.has(name):
            cg.write(name, text)


def play(cg: Cgroup, name: str, text: str, sched: str, nosched: str) -> str | None:
    """Writes @text (placeholders filled) in one write(2); the errno name or None."""
    data = text.replace("{sched}", sched).replace("{nosched}", nosched).encode("latin-1")
    fd = os.open(cg.path / name, os.O_WRONLY)
    try:
        os.write(fd, data)
    except OSError as e:
        return errno.errorcode[e.errno or 0]
    finally:
        os.close(fd)
    return None


def test_the_recorded_table_is_what_the_kernel_does(cgroup, simgpu_nodes, vgem):
    st = os.stat(simgpu_nodes[0])
    sched_dev = (os.major(st.st_rdev), os.minor(st.st_rdev))
    nosched_dev = (vgem.major, vgem.minor)
    # literal inputs ("+226:+128", "226:128abc") name these devices: the host
    # tier replays the table with the same numbers
    assert (nosched_dev, sched_dev) == ((226, 128), (226, 129)), (nosched_dev, sched_dev)
    sched, nosched = (f"{d[0]}:{d[1]}" for d in (sched_dev, nosched_dev))
    devs = {sched_dev: "{sched}", nosched_dev: "{nosched}"}
    # the 7.3 series has no gpu.memory.max (its GPU memory is dmem's, whose
    # parser is upstream's: tests/vm/test_memory.py checks dmem.max's limits)
    here = {name for name in FILES if cgroup.has(name)}
    results = []
    for name, text in inputs():
        if name not in here:
            continue
        reset(cgroup, sched, nosched)
        err = play(cgroup, name, text, sched, nosched)
        results.append({"file": name, "input": text, "errno": err,
                        "state": table_state(name, cgroup.read(name), devs)})
    if os.environ.get("PYCGPU_RECORD_TABLE") == "1":
        keep = os.environ.get("PYCGPU_VM_OUT")
        out = Path(keep, "keep") if keep else TABLE.parent
        out.mkdir(exist_ok=True)
        out /= TABLE.name
        out.write_text(json.dumps(results, indent=0) + "\n")
        pytest.skip(f"recorded {len(results)} writes to {out}")
    recorded = [r for r in json.loads(TABLE.read_text()) if r["file"] in here]
    assert len(recorded) == len(results)
    diffs = [(r, k) for r, k in zip(recorded, results, strict=True) if r != k]
    assert not diffs, f"{len(diffs)} entries differ, the first: {diffs[0]}"
    # the table covers every outcome the handlers have
    assert {r["errno"] for r in recorded} >= {
        None, "EINVAL", "ERANGE", errno.errorcode[errno.EOPNOTSUPP], "E2BIG"}
