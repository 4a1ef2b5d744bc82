"""gpu.max in pycgpu: the cap as people write it (formats.parse_cap), the
--max option of create and set (all or none, against the reference model
of the kernel's gpu.max), the pycgpu.io/gpu.max annotation and oci patch's
unified key, hook annotation and legacy stanza fields."""

from __future__ import annotations

import errno
import json

import pytest
from hypothesis import given
from hypothesis import strategies as st
from kernel_model import Model, Refused
from test_hook import SCOPE, ctr, hook, state  # noqa: F401  # ctr: a fixture
from test_oci import RUNC_SPEC, bundle, load  # noqa: F401  # bundle: a fixture

from pycgpu.core import formats as f
from pycgpu.core.formats import Cap, DevT

A, B = DevT(226, 128), DevT(226, 129)


# the text people write ------------------------------------------------------------------


@pytest.mark.parametrize("text,cap", [
    ("30%", Cap(30000, 100000)),
    ("12.5%/50ms", Cap(6250, 50000)),
    ("30ms/100ms", Cap(30000, 100000)),
    ("30000/100000", Cap(30000, 100000)),
    (" 30ms ", Cap(30000, 100000)),
    ("0.5s/1s", Cap(500000, 1000000)),
    ("100%", Cap(100000, 100000)),
    ("1ms/1ms", Cap(1000, 1000)),
    ("max", Cap(None, 100000)),
    ("max/50ms", Cap(None, 50000)),
    ("1000us/2ms", Cap(1000, 2000)),
    ("30% / 50ms", Cap(15000, 50000)),
    ("max /50ms", Cap(None, 50000)),
    ("2000μs/4ms", Cap(2000, 4000)),
])
def test_caps_people_write(text, cap):
    assert f.parse_cap(text) == cap


@pytest.mark.parametrize("text,why", [
    ("0.5%", "cap 500 µs is out of range [1000, 100000] (at least 1 ms, at most the period)"),
    ("101%", "101% is more than all of an engine"),
    ("-5%", "'-5%' is not a percentage"),
    ("30", "cap 30 µs is out of range"),
    ("30ms/2s", "period 2000000 µs is out of range [1000, 1000000]"),
    ("30ms/10ms", "cap 30000 µs is out of range [1000, 10000]"),
    ("30ms/", "the period '' does not parse; give P% of each engine"),
    ("1.5us", "the cap '1.5us' is not a whole number of µs"),
    ("30 ms", "the cap '30 ms' does not parse"),
    ("", "the cap '' does not parse"),
    ("30%/x", "the period 'x' does not parse"),
    ("max 100000", "the cap 'max 100000' does not parse"),
])
def test_caps_refused_with_the_reason(text, why):
    with pytest.raises(f.FormatError) as e:
        f.parse_cap(text, "--max x")
    assert str(e.value).startswith(f"--max x: {why}")


@given(st.integers(1000, 1000000), st.integers(1000, 1000000), st.booleans())
def test_the_written_form_reads_back(a, b, uncapped):
    mx, period = min(a, b), max(a, b)
    cap = Cap(None if uncapped else mx, period)
    assert f.parse_cap(f.format_cap_write(cap)) == cap
    shown = f.format_cap(cap)
    assert f.parse_cap(shown.split(" (")[-1].rstrip(")")) == cap  # 30% (30ms/100ms)


@given(st.decimals(min_value=1, max_value=100, places=4))
def test_a_percentage_is_rounded_to_the_microsecond(pct):
    assert f.parse_cap(f"{pct}%") == Cap(round(pct * 1000), 100000)


# the kernel's gpu.max, by the reference model -------------------------------------------


def test_the_model_of_gpu_max():
    m = Model({(226, 128): True, (226, 129): True}, caps={(226, 128): True, (226, 129): False})
    assert m.render("gpu.max") == "default max 100000\n"
    m.write("gpu.max", b"30000")  # MAX alone: the period kept
    m.write("gpu.max", b"226:128 20000 50000\n")
    assert m.render("gpu.max") == "default 30000 100000\n226:128 20000 50000\n"
    for text, code in [(b"999", errno.ERANGE), (b"2000 999", errno.ERANGE),
                       (b"200000 100000", errno.ERANGE), (b"5000000000", errno.ERANGE),
                       (b"-5", errno.EINVAL), (b"226:129 5000", errno.EOPNOTSUPP),
                       (b"226:130 5000", errno.EINVAL), (b"226:128", errno.EINVAL),
                       (b"default 1000 2000 3000", errno.EINVAL)]:
        with pytest.raises(Refused) as e:
            m.write("gpu.max", text)
        assert e.value.code == code, text
    m.write("gpu.max", b"226:128 default")
    m.write("gpu.max", b"default max")
    assert m.render("gpu.max") == "default max 100000\n"
    # every write pycgpu makes is one the kernel takes, and reads back as meant
    for cap in (Cap(30000), Cap(None, 5000), Cap(1000, 1000), Cap(1000000, 1000000)):
        m.write("gpu.max", f.format_max_write(cap).encode())
        assert f.parse_max(m.render("gpu.max")).default == cap
        m.write("gpu.max", f.format_max_write(cap, A).encode())
        assert f.parse_max(m.render("gpu.max")).devices[A] == cap


# create and set --------------------------------------------------------------------------


def test_create_and_set_write_the_cap(cli):
    cli("create", "batch/render", "--weight", "50", "--max", "30%", "--max", "renderD129=max")
    assert cli.fake.read("batch/render/gpu.max") == "default 30000 100000\n226:129 max 100000\n"
    assert ("batch/render/gpu.max", "default 30000 100000") in cli.fake.log
    cli("set", "batch/render", "--max", "card1=default", "--max", "default=20ms/50ms")
    assert cli.fake.read("batch/render/gpu.max") == "default 20000 50000\n"
    out = cli("show", "batch/render").output
    assert "  max                  default 40% (20ms/50ms)" in out
    cli("set", "batch/render", "--max", "max")
    assert cli.fake.read("batch/render/gpu.max") == "default max 100000\n"


def test_dry_run_prints_the_writes(cli):
    cli.fake.make("a")
    before = cli.fake.snapshot()
    out = cli("set", "a", "--max", "renderD128=12.5%/40ms", "--dry-run").output
    assert out.strip() == f"would write '226:128 5000 40000' to {cli.fake.root}/a/gpu.max"
    assert cli.fake.snapshot() == before


@pytest.mark.parametrize("args,why", [
    (["--max", "130%"], "Error: --max '130%': 130% is more than all of an engine"),
    (["--max", "renderD200=30%"], "Error: --max 'renderD200=30%': unknown device"),
    (["--max", "30%", "--max", "default=20%"],
     "Error: --max 'default=20%': the cap of the default line is given twice"),
    (["--max", "card1=30%", "--max", "renderD129=max"],
     "Error: --max 'renderD129=max': the cap of 226:129 is given twice"),
    (["--max", "default=default"],
     "Error: --max 'default=default': the cap 'default' does not parse"),
])
def test_bad_caps_write_nothing(cli, args, why):
    cli.fake.make("a")
    before = cli.fake.snapshot()
    r = cli("set", "a", *args, code=2)
    assert r.output.startswith(why), r.output
    assert cli.fake.snapshot() == before and cli.fake.log == []


def test_a_refused_cap_rolls_the_other_knobs_back(cli):
    """The kernel refuses a device's cap (EOPNOTSUPP: no engine of it can
    hold work back): the weight written before it is restored."""
    cli.fake.make("a")
    cli.fake.fail["a/gpu.max"] = errno.EOPNOTSUPP
    r = cli("set", "a", "--weight", "300", "--max", "renderD128=30%", code=1)
    assert "no engine of the device can hold work back" in r.output
    assert r.output.rstrip().endswith("nothing was changed")
    assert cli.fake.read("a/gpu.weight") == "default 100\n"


def test_a_kernel_without_gpu_max(cli):
    cli.fake.make("a")
    (cli.fake.root / "a" / "gpu.max").unlink()
    r = cli("set", "a", "--max", "30%", code=1)
    assert r.output.strip() == ("Error: this kernel lacks gpu.max (the hard cap on GPU time) (fix: "
                                "boot a kernel of the series with gpu.max, or leave out --max)")


# annotations and OCI ---------------------------------------------------------------------


def test_the_hook_applies_an_allowed_cap(cli, ctr, tmp_path):  # noqa: F811
    allow = tmp_path / "annotations.allow"
    allow.write_text("gpu.max\n")
    hook(cli, state(ctr, {"pycgpu.io/gpu.max": "30%, renderD129=max/50ms"}))
    assert cli.fake.read(f"{SCOPE}/gpu.max") == "default 30000 100000\n226:129 max 50000\n"


def test_the_cap_annotation_is_off_the_default_allow_list(cli, ctr, tmp_path):  # noqa: F811
    del cli.env["PYCGPU_ALLOW_LIST"]
    cli.env["PYCGPU_ALLOW_LIST"] = str(tmp_path / "none")  # no file: the default list
    r = hook(cli, state(ctr, {"pycgpu.io/gpu.max": "max"}), code=2)
    assert "annotation pycgpu.io/gpu.max is not on this node's allow-list" in r.output


def test_oci_patch_and_unpatch_the_cap(cli, bundle):  # noqa: F811
    config = bundle / "config.json"
    cli("oci", "patch", str(config), "--device", "renderD128", "--max", "renderD128=30%")
    assert load(config)["linux"]["resources"]["unified"] == {"gpu.max": "226:128 30000 100000"}
    # a second patch replaces it: one value per knob
    cli("oci", "patch", str(config), "--max", "25ms/50ms", "--hook")
    doc = load(config)
    assert "gpu.max" not in doc["linux"]["resources"]["unified"]
    assert doc["annotations"]["pycgpu.io/gpu.max"] == "25ms/50ms"
    # the bundle's author set the cap: its hook entry allows it
    assert doc["hooks"]["createRuntime"][0]["args"][-2:] == ["--allow", "pycgpu.io/gpu.max"]
    cli("oci", "patch", str(config), "--max", "40%", "--max", "renderD128=default", "--hook")
    assert load(config)["annotations"]["pycgpu.io/gpu.max"] == "40ms/100ms,226:128=default"
    cli("oci", "unpatch", str(config))
    doc = load(config)
    assert "pycgpu.io/gpu.max" not in doc.get("annotations", {})


def test_the_legacy_stanza_carries_quota_and_period(cli, bundle):  # noqa: F811
    config = bundle / "config.json"
    cli("oci", "patch", str(config), "--max", "30%", "--priority", "5", "--legacy-stanza")
    doc = load(config)
    assert doc["linux"]["resources"]["gpu"] == {"prio": 5, "quota": 30000, "period": 100000}
    assert doc["linux"]["resources"]["unified"]["gpu.max"] == "default 30000 100000"
    cli("oci", "patch", str(config), "--max", "max/20ms", "--legacy-stanza")
    assert load(config)["linux"]["resources"]["gpu"] == {"period": 20000}
    assert json.loads(RUNC_SPEC)["linux"]["resources"].get("gpu") is None


# the device plugin's capped shares -------------------------------------------------------


@pytest.fixture
def capped_inventory(fake_sysfs):
    from pycgpu.core.devices import discover
    from pycgpu.k8s import shares as sh

    config, _ = sh.parse_config(["4"], 100, [], capped=True)
    return sh.build(discover(*fake_sysfs), config, fake_sysfs[0])


def capped_grant(inventory, ids):
    from test_issue39_runtime_share_ids import HOOK

    from pycgpu.k8s import shares as sh
    from pycgpu.runtime import cdi

    spec = cdi.spec(sorted((g.device for g in inventory.gpus.values()), key=lambda d: d.devt),
                    HOOK, {g.name: g.ids() for g in inventory.gpus.values()},
                    {g.name: g.cap(1) for g in inventory.gpus.values()})
    return sh.grant(inventory, ids, share_devices=True), spec


def test_a_capped_share_entry_carries_its_cap(capped_inventory):
    from pycgpu.runtime import oci

    _, spec = capped_grant(capped_inventory, ["renderD128-s0"])
    by_name = {d["name"]: d for d in spec["devices"]}
    (entry,) = by_name["renderD128-s3"]["containerEdits"]["hooks"]
    assert entry["args"] == ["true", "pycgpu-share-id=renderD128-s3",
                             "pycgpu-share-cap=25000/100000"]
    plain = {k: v for k, v in entry.items() if k != "hookName"}
    assert oci.share_id_of(plain) == "renderD128-s3"
    assert oci.share_cap_of(plain) == Cap(25000, 100000)
    assert oci.share_cap_of(oci.share_id_entry("renderD128-s3")) is None
    with pytest.raises(oci.ConfigError, match="cap 5 µs is out of range"):
        oci.share_cap_of({"args": ["true", "pycgpu-share-id=renderD128-s3",
                                   "pycgpu-share-cap=5/100000"]})
    # anything else after the ID is not a share entry at all
    assert oci.share_id_of({"args": ["true", "pycgpu-share-id=renderD128-s3", "x"]}) is None


def test_the_hook_caps_a_container_at_its_shares(cli, ctr, capped_inventory):  # noqa: F811
    """Three of four capped shares of renderD128 and one of renderD129:
    75% and 25% of each engine, whatever a forged annotation says (the node
    allows gpu.max annotations here: the shares' caps still win)."""
    from test_issue39_runtime_share_ids import with_cdi_devices

    grant, spec = capped_grant(capped_inventory, ["renderD128-s0", "renderD128-s1",
                                                  "renderD128-s2", "renderD129-s3"])
    with_cdi_devices(ctr, spec, grant.cdi_devices)
    (ctr.parent / "annotations.allow").write_text("gpu.weight\ngpu.memory.max\ngpu.max\n")
    hook(cli, state(ctr, {**grant.annotations,
                          "pycgpu.io/gpu.max": "max,renderD128=max,226:129=default"}))
    assert cli.fake.read(f"{SCOPE}/gpu.max") == (
        "default max 100000\n226:128 75000 100000\n226:129 25000 100000\n")
    assert cli.fake.read(f"{SCOPE}/gpu.weight") == "default 100\n226:128 300\n226:129 100\n"


def test_the_hook_caps_even_without_annotations(cli, ctr, capped_inventory):  # noqa: F811
    from test_issue39_runtime_share_ids import with_cdi_devices

    grant, spec = capped_grant(capped_inventory, ["renderD129-s0"])
    with_cdi_devices(ctr, spec, grant.cdi_devices)
    hook(cli, state(ctr, {}))
    assert cli.fake.read(f"{SCOPE}/gpu.max") == "default max 100000\n226:129 25000 100000\n"


def test_capped_shares_need_the_plugins_cdi_spec(cli):
    r = cli("k8s", "device-plugin", "--capped", code=2)
    assert "--capped: capped shares travel in the plugin's CDI spec" in r.output
    doc = json.loads(cli("k8s", "inventory", "--shares", "8", "--capped", "--json").stdout)
    assert {g["cap_per_share_us"] for g in doc["gpus"]} == {12500}
    text = cli("k8s", "inventory", "--shares", "8", "--capped").stdout
    assert "CAP/SHARE" in text and "12.5% (12500us/100ms)" in text


def test_a_later_hook_patch_keeps_allowing_the_cap(cli, bundle):  # noqa: F811
    """The cap stays in the annotations when a later --hook patch gives
    only a weight: its hook entry must still allow it, or the runtime would
    refuse the container at its start."""
    config = bundle / "config.json"
    cli("oci", "patch", str(config), "--max", "30%", "--priority", "5", "--hook")
    cli("oci", "patch", str(config), "--weight", "5", "--hook")
    doc = load(config)
    assert doc["annotations"]["pycgpu.io/gpu.max"] == "30ms/100ms"
    (entry,) = doc["hooks"]["createRuntime"]
    assert entry["args"][-4:] == ["--allow", "pycgpu.io/gpu.max",
                                  "--allow", "pycgpu.io/gpu.priority"]


def test_a_default_cap_warns_of_the_devices_it_does_not_act_on(cli):
    """The fake sysfs has i915 (which holds work back under execlists) and
    renderD129 without a driver link, which is not known to: the kernel
    takes the default line and ignores it there; a device's own cap is not
    warned of (the kernel refuses it, and the set is undone)."""
    cli.fake.make("a")
    r = cli("set", "a", "--max", "30%")
    assert r.output.strip().splitlines() == [
        "warning: the default cap does not act on renderD129 (unknown driver: not known to "
        "hold work back): its engines cannot hold work back (the kernel README's driver table)",
        "warning: the default cap acts on renderD128 (i915) only under execlists submission: "
        "under GuC submission (the default from Alder Lake-P and DG2 on) the kernel refuses a "
        "cap of the device and the default line does not act there"]
    assert cli.fake.read("a/gpu.max") == "default 30000 100000\n"
    assert cli("set", "a", "--max", "renderD129=max").output == ""
    # i915's own line: no caveat (the kernel answers it: EOPNOTSUPP under GuC)
    assert cli("set", "a", "--max", "30%", "--max", "renderD129=max",
               "--max", "renderD128=20%").output == ""
    assert cli("set", "a", "--max", "max").output == ""


def test_a_device_put_back_on_the_default_line_is_warned_of(cli):
    """DEV=default puts a device that cannot hold work back on the default
    line, which then does not act there: warned, as a device without a line."""
    cli.fake.make("a")
    r = cli("set", "a", "--max", "30%", "--max", "renderD129=default")
    assert "the default cap does not act on renderD129 (unknown driver" in r.output
