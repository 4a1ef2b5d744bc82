"""docs/runtimes.md: the recipes the VM tier runs (tests/vm/test_runtimes.py)
are complete, and their `pycgpu oci generate` line produces, on the fake
host, a config the runtime-spec accepts with the knobs the text shows."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

from runtime_schemas import oci_errors

DOC = Path(__file__).resolve().parents[2] / "docs" / "runtimes.md"
BLOCK = re.compile(r"<!-- recipe (\w+):(\w+) -->\s*```sh\n(.*?)```", re.DOTALL)


def blocks() -> dict[str, str]:
    return {f"{rt}:{step}": body for rt, step, body in BLOCK.findall(DOC.read_text())}


def variables() -> dict[str, str]:
    out = {}
    for line in blocks()["runc:vars"].splitlines():
        name, _, value = line.split("#", 1)[0].strip().partition("=")
        out[name] = value
    return out


def test_recipes_are_there():
    b = blocks()
    assert set(b) == {"runc:vars", "runc:setup", "runc:run", "runc:inspect", "runc:cleanup",
                      "crun:run", "podman:vars", "podman:setup", "podman:run", "podman:inspect",
                      "podman:unified", "podman:cleanup"}
    assert variables() == {"GPU": "renderD128", "PARENT": "pycgpu-demo", "CTR": "pycgpu-demo"}
    assert b["runc:run"].strip() == "runc run --bundle bundle $CTR"
    assert b["crun:run"].strip() == "crun run --bundle bundle $CTR"


def test_the_recipes_generate_line_on_the_fake_host(tmp_path, cli):
    setup = blocks()["runc:setup"].replace("\\\n", " ")
    (line,) = [x for x in setup.splitlines() if x.startswith("pycgpu oci generate")]
    for name, value in variables().items():
        line = line.replace(f"${name}", value)
    argv = shlex.split(line)[1:]
    assert argv[:4] == ["oci", "generate", "--bundle", "bundle"]
    (tmp_path / "bundle").mkdir()
    argv[3] = str(tmp_path / "bundle")
    cli(*argv)
    doc = json.loads((tmp_path / "bundle" / "config.json").read_text())
    assert oci_errors(doc) == []
    assert doc["linux"]["resources"]["unified"] == {
        "gpu.weight": "default 300", "gpu.priority": "50", "gpu.memory.max": "226:128 67108864"}
    assert doc["linux"]["cgroupsPath"] == "/pycgpu-demo/ctr"
    assert doc["process"]["terminal"] is False
    assert doc["process"]["args"][:2] == ["sh", "-c"]
    assert "/dev/dri/renderD128" in doc["process"]["args"][2]
    # the excerpt the text shows is what was generated
    text = DOC.read_text()
    for key, value in doc["linux"]["resources"]["unified"].items():
        assert f'"{key}": "{value}"' in text
    assert json.dumps(doc["linux"]["resources"]["devices"][1]) in text
