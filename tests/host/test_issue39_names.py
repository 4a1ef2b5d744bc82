"""Issue 39, item 11: a cgroup name with bytes that are not UTF-8 (or a
control character) is printed by one rule, formats.printable_name: such a
byte as \\xNN, the rest as it is; in text and in JSON,
which then has no lone surrogates."""

from __future__ import annotations

import json
import os

import pytest

from pycgpu.core.formats import printable_name

BAD = os.fsdecode(b"bad\xffname")  # "bad\udcffname", as os.scandir gives it


@pytest.mark.parametrize(("name", "shown"), [
    ("/ai/train", "/ai/train"),
    ("/" + BAD, "/bad\\xffname"),
    ("/a\nb", "/a\\x0ab"),
    # a backslash stays: systemd's unit names escape with \x2d, printed as systemctl does
    ("/system.slice/systemd-fsck@dev-disk-by\\x2duuid-1.service",
     "/system.slice/systemd-fsck@dev-disk-by\\x2duuid-1.service"),
    ("/caf\u00e9", "/caf\u00e9"),
])
def test_the_rule(name, shown):
    assert printable_name(name) == shown
    shown.encode("utf-8")  # valid UTF-8, no lone surrogate


def test_show_escapes_a_bad_name_in_text_and_json(cli):
    cli.fake.make(BAD)
    text = cli("show", "-r").output
    assert "/bad\\xffname" in text and "\udcff" not in text
    doc = json.loads(cli("show", "-r", "--json").output)
    assert [g["path"] for g in doc["cgroups"]] == ["/", "/bad\\xffname"]
    raw = cli("show", "-r", "--json").output
    assert "\\udc" not in raw.lower()
    # the group itself is still shown, by the name the file system has
    assert json.loads(cli("show", "--json", BAD).output)["cgroups"][0]["path"] == \
        "/bad\\xffname"


def test_stat_and_the_exporter_print_a_bad_name_by_the_rule(cli):
    from click.testing import CliRunner

    from pycgpu.cli import main
    from pycgpu.monitoring.exporter import escape

    group = cli.fake.make(BAD)
    (group / "gpu.stat").write_text("226:128 usage_usec=5 wait_usec=0\n")

    def run(*args: str) -> str:
        r = CliRunner().invoke(main, list(args), env=cli.env)
        assert r.exit_code == 0, r.output
        return r.output

    raw = run("stat", "--json", "-i", "0")
    assert "\\udc" not in raw.lower()
    assert [g["path"] for g in json.loads(raw)["groups"]] == ["/bad\\xffname"]
    text = run("stat", "-i", "0")
    assert "bad\\xffname" in text and "\udcff" not in text
    # Prometheus' label escaping on top of the rule
    assert escape("/" + BAD) == "/bad\\\\xffname"
    assert escape('a"b\nc') == 'a\\"b\\\\x0ac'
