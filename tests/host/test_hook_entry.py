"""``pycgpu-hook`` (pycgpu.runtime.hook:main): the hook as its own program,
started by the container runtime for every container. It imports only what
it needs (no click, rich, gRPC, Prometheus client, nor the k8s, monitoring
or CLI layers) and behaves as ``pycgpu oci hook`` does: same knobs written,
same exit codes, same one-line errors."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from test_hook import KNOBS, PID, SCOPE, ctr, read, state  # noqa: F401  (ctr: the fixture)

from pycgpu.cli import main
from pycgpu.runtime import hook

REPO = Path(__file__).resolve().parents[2]
FORBIDDEN = ("click", "rich", "grpc", "prometheus_client", "pycgpu.k8s", "pycgpu.monitoring",
             "pycgpu.cli")


def _loaded(code: str, stdin: str = "") -> list[str]:
    """The forbidden modules loaded once @code ran in a fresh interpreter."""
    probe = (f"{code}\nimport sys\n"
             f"print(sorted(m for m in sys.modules if m.split('.')[0] in {FORBIDDEN!r} "
             f"or m.startswith(('pycgpu.k8s', 'pycgpu.monitoring', 'pycgpu.cli'))))")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), str(REPO / "tests")])}
    r = subprocess.run([sys.executable, "-c", probe], input=stdin, capture_output=True,
                       text=True, env=env, timeout=60, check=False)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1].replace("'", '"'))


def test_importing_the_hook_loads_no_cli_nor_upper_layer():
    assert _loaded("import pycgpu.runtime.hook") == []


def test_a_run_loads_no_cli_nor_upper_layer(tmp_path):
    """A whole run, the state read and the annotations parsed (a container
    without pycgpu.io/ annotations: nothing to do, exit 0)."""
    bundle = tmp_path / "b"
    bundle.mkdir()
    (bundle / "config.json").write_text('{"ociVersion": "1.0.2"}')
    doc = json.dumps({"id": "c1", "pid": 1, "bundle": str(bundle),
                      "annotations": {"org.example/x": "1"}})
    code = ("import pycgpu.runtime.hook as h, sys\n"
            "rc = h.main(['--allow-list', '/nonexistent'])\n"
            "assert rc == 0, rc")
    assert _loaded(code, doc) == []


def test_the_hook_is_a_console_script_of_its_own():
    import tomllib

    scripts = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts["pycgpu-hook"] == "pycgpu.runtime.hook:main"


def run_main(cli, monkeypatch, stdin: str, *args: str) -> tuple[int, str]:
    for name, value in cli.env.items():
        monkeypatch.setenv(name, value)
    err = io.StringIO()
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(stdin.encode())))
    monkeypatch.setattr(sys, "stderr", err)
    return hook.main(list(args)), err.getvalue()


def test_main_applies_the_knobs_as_the_cli_does(cli, ctr, monkeypatch):  # noqa: F811
    code, err = run_main(cli, monkeypatch, json.dumps(state(ctr, KNOBS)))
    assert (code, err) == (0, "")
    assert read(cli, "gpu.weight") == "default 300\n226:129 20\n"
    assert read(cli, "gpu.priority") == "-7\n"
    assert read(cli, "gpu.memory.max") == "226:128 1073741824\n226:129 536870912\n"


@pytest.mark.parametrize("annotations, code, start", [
    ({"pycgpu.io/gpu.weight": "lots"}, 2, "container c1: annotation pycgpu.io/gpu.weight 'lots': "),
    ({"pycgpu.io/gpu.color": "red"}, 2, "container c1: annotation pycgpu.io/gpu.color is "
                                        "not allowed: "),
    ({"pycgpu.io/gpu.memory.max": "renderD128=1G", "pycgpu.io/image-check": "enforce"}, 3,
     "container c1: image check failed: "),
])
def test_main_fails_closed_as_the_cli_does(cli, ctr, monkeypatch, annotations, code,  # noqa: F811
                                           start):
    """The same exit code and the same one line as ``pycgpu oci hook``,
    its program's name aside; nothing written."""
    doc = json.dumps(state(ctr, annotations))
    via_cli = CliRunner().invoke(main, ["oci", "hook"], input=doc, env=cli.env)
    rc, err = run_main(cli, monkeypatch, doc)
    assert (rc, via_cli.exit_code) == (code, code)
    assert err.startswith(f"Error: pycgpu-hook: {start}") and err.count("\n") == 1
    assert err.replace("pycgpu-hook", "pycgpu oci hook") == via_cli.stderr
    assert not (cli.fake.root / SCOPE / "gpu.memory.max").exists()


def test_main_refuses_a_missing_cgroup_with_exit_1(cli, ctr, monkeypatch):  # noqa: F811
    (Path(cli.env["PYCGPU_PROC_ROOT"]) / str(PID) / "cgroup").write_text("0::/gone.scope\n")
    rc, err = run_main(cli, monkeypatch, json.dumps(state(ctr, KNOBS)))
    assert rc == 1
    assert err == f"Error: pycgpu-hook: the container's cgroup {cli.fake.root}/gone.scope " \
                  "does not exist\n"
    assert not (cli.fake.root / SCOPE / "gpu.weight").exists() or \
        read(cli, "gpu.weight") == "default 100\n"


@pytest.mark.parametrize("args", [["--bogus"], ["--allow"], ["x"]])
def test_main_usage_errors_exit_2(monkeypatch, args):
    err = io.StringIO()
    monkeypatch.setattr(sys, "stderr", err)
    assert hook.main(args) == 2
    assert err.getvalue().startswith("usage: pycgpu-hook ")


def test_main_help(capsys):
    assert hook.main(["--help"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: pycgpu-hook ") and "--allow-list FILE" in out


def test_options_are_parsed_or_refused():
    assert hook._options(["--allow", "a", "--allow=b", "--cgroup-root", "/x", "--proc-root=/p",
                          "--sysfs-root", "/s", "--dev-root", "/d", "--allow-list", "/l"]) == {
        "allow": ["a", "b"], "cgroup_root": ["/x"], "proc_root": ["/p"], "sysfs_root": ["/s"],
        "dev_root": ["/d"], "allow_list": ["/l"]}
    assert hook._options([]) == {}
    for bad in (["--allow"], ["--bogus=1"], ["x"], ["--allow", "a", "--cgroup-root"]):
        assert hook._options(bad) is None, bad


def test_options_win_over_the_environment(cli, ctr, monkeypatch, capsys):  # noqa: F811
    args = [f"--{name.lower().removeprefix('pycgpu_').replace('_', '-')}={value}"
            for name, value in cli.env.items()]
    assert sorted(a.split("=")[0] for a in args) == [
        "--allow-list", "--cgroup-root", "--dev-root", "--proc-root", "--sysfs-root"]
    env = dict(cli.env)
    for name in env:
        cli.env[name] = "/nonexistent"
    code, err = run_main(cli, monkeypatch, json.dumps(state(ctr, KNOBS)), *args)
    assert (code, err) == (0, "")
    assert read(cli, "gpu.priority") == "-7\n"
    assert read(cli, "gpu.memory.max") == "226:128 1073741824\n226:129 536870912\n"
    assert capsys.readouterr().out == ""


def test_allow_adds_to_the_nodes_list(cli, ctr, monkeypatch, tmp_path):  # noqa: F811
    only_weight = tmp_path / "weight.allow"
    only_weight.write_text("gpu.weight\n")
    only_weight.chmod(0o644)
    cli.env["PYCGPU_ALLOW_LIST"] = str(only_weight)
    doc = json.dumps(state(ctr, {"pycgpu.io/gpu.priority": "4"}))
    code, err = run_main(cli, monkeypatch, doc)
    assert code == 2 and "pycgpu.io/gpu.priority is not on this node's allow-list" in err
    code, err = run_main(cli, monkeypatch, doc, "--allow", "gpu.priority")
    assert (code, err) == (0, "")
    assert read(cli, "gpu.priority") == "4\n"


def test_an_untrusted_allow_list_refuses(cli, ctr, monkeypatch, capsys):  # noqa: F811
    Path(cli.env["PYCGPU_ALLOW_LIST"]).chmod(0o666)
    code, err = run_main(cli, monkeypatch, json.dumps(state(ctr, KNOBS)))
    assert code == 1 and err.startswith("Error: pycgpu-hook: ") and err.count("\n") == 1
    assert "writable" in err
    assert capsys.readouterr().out == ""


def test_a_cgroup_root_that_is_no_cgroup2_mount(cli, ctr, monkeypatch, tmp_path):  # noqa: F811
    code, err = run_main(cli, monkeypatch, json.dumps(state(ctr, KNOBS)),
                         "--cgroup-root", str(tmp_path))
    assert code == 1
    assert err == (f"Error: pycgpu-hook: the cgroup root {tmp_path} is not a cgroup2 mount "
                   "(no cgroup.controllers)\n")


def test_warnings_go_to_stderr_as_the_clis(cli, ctr, monkeypatch, capsys):  # noqa: F811
    doc = json.dumps(state(ctr, {"pycgpu.io/gpu.memory.max": "renderD128=1G",
                                 "pycgpu.io/image-check": "warn"}))
    via_cli = CliRunner().invoke(main, ["oci", "hook"], input=doc, env=cli.env)
    code, err = run_main(cli, monkeypatch, doc)
    assert (code, via_cli.exit_code) == (0, 0)
    assert err.startswith("pycgpu-hook: warning: image check: ")
    assert err.replace("pycgpu-hook", "pycgpu oci hook") == via_cli.stderr
    assert capsys.readouterr().out == ""
    assert read(cli, "gpu.memory.max").startswith("226:128 1073741824\n")


def test_a_terminal_on_stdin_is_refused(monkeypatch):
    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    err = io.StringIO()
    monkeypatch.setattr(sys, "stdin", Tty())
    monkeypatch.setattr(sys, "stderr", err)
    assert hook.main([]) == 2
    assert err.getvalue() == ("Error: pycgpu-hook reads the container's OCI state on stdin: "
                              "the runtime runs it (see pycgpu-hook --help)\n")
