"""gpu.priority's ``default`` (issue 37 item 10): a group without a priority
of its own inherits its parent's effective one, a top-level group's is 0.
The parser and formatter, the effective rule of the fake kernel (the
reference model's), the ancestors' cap that set and create warn about and
--raise-ancestors lifts, show's text and JSON, and a kernel before the
change (a number in every group) still read."""

from __future__ import annotations

import itertools
import json

import jsonschema
import pytest
from kernel_model import effective

from pycgpu.core import formats, knobs, model, snapshot
from pycgpu.core.cgroup import Cgroup
from pycgpu.core.formats import UNSET
from pycgpu.core.schemas import SHOW_SCHEMA


def read(cli, rel):
    return cli.fake.read(rel)


def show_json(cli, *args):
    doc = json.loads(cli("show", "--json", *args).output)
    jsonschema.validate(doc, SHOW_SCHEMA)
    return {item["path"]: item for item in doc["cgroups"]}


# the format ----------------------------------------------------------------------------------


@pytest.mark.parametrize(("text", "value"), [
    ("default\n", UNSET), (" default\t\n", UNSET), ("-5\n", -5), ("0\n", 0), ("1023\n", 1023)])
def test_gpu_priority_reads_a_number_or_default(text, value):
    assert formats.parse_priority(text) == value
    assert model.FILE["gpu.priority"].parse(text) == value


@pytest.mark.parametrize("text", ["Default\n", "defaults\n", "default 5\n", "\n", "max\n"])
def test_anything_else_does_not_parse(text):
    with pytest.raises(formats.FormatError, match=r"^gpu\.priority: "):
        model.FILE["gpu.priority"].parse(text)


def test_the_writes_of_a_priority():
    assert formats.format_priority(UNSET) == "default"
    assert formats.format_priority(-7) == "-7"
    with pytest.raises(formats.FormatError, match="out of range"):
        formats.format_priority(1024)


@pytest.mark.parametrize(("text", "value"), [("default", UNSET), (" default ", UNSET),
                                             ("-3", -3), ("+12", 12)])
def test_the_option_takes_a_number_or_default(text, value):
    settings = knobs.parse_settings((), text, (), lambda t: formats.DevT.parse(t))
    assert settings.priority == value
    assert [w.value for w in settings.writes()] == [formats.format_priority(value)]


@pytest.mark.parametrize(("text", "message"), [
    ("Default", "--priority 'Default': 'Default' is not an integer (give N in [-1023, 1023], "
                "or default)"),
    ("default 5", "--priority 'default 5': 'default 5' is not an integer (give N in "
                  "[-1023, 1023], or default)"),
    ("2000", "--priority '2000': priority 2000 is out of range [-1023, 1023]")])
def test_the_option_refuses_anything_else(cli, text, message):
    cli.fake.make("a")
    r = cli("set", "a", "--priority", text, code=2)
    assert r.output == f"Error: {message}\n"


# the effective rule ----------------------------------------------------------------------------


@pytest.mark.parametrize(("path", "eff"), [
    ([500, None, None], 500), ([500, 800], 500), ([500, -5, None], -5), ([None, 300], 0),
    ([None], 0), ([None, -5], -5), ([None, None, 7], 0), ([1023], 1023)])
def test_the_models_effective_rule(path, eff):
    assert effective(path) == eff


def test_untouched_children_inherit_their_parents_priority(cli):
    """The example of issue 37 item 10: before, /P/C and /P/C/G read 0."""
    cli.fake.make("P/C/G")
    cli("set", "P", "--priority", "500")
    assert read(cli, "P/C/gpu.priority") == read(cli, "P/C/G/gpu.priority") == "default\n"
    assert read(cli, "P/C/gpu.priority.effective") == "500\n"
    assert read(cli, "P/C/G/gpu.priority.effective") == "500\n"
    cli("set", "P/C", "--priority", "800")  # up to the parent's
    assert read(cli, "P/C/gpu.priority.effective") == "500\n"
    assert read(cli, "P/C/G/gpu.priority.effective") == "500\n"
    cli("set", "P/C", "--priority", "-5")
    assert read(cli, "P/C/G/gpu.priority.effective") == "-5\n"


def test_priority_default_round_trip(cli):
    cli.fake.make("P/C")
    cli("set", "P", "--priority", "300")
    cli("set", "P/C", "--priority", "7")
    assert (read(cli, "P/C/gpu.priority"), read(cli, "P/C/gpu.priority.effective")) == (
        "7\n", "7\n")
    r = cli("set", "P/C", "--priority", "default")
    assert "warning" not in r.output
    assert cli.fake.log[-1] == ("P/C/gpu.priority", "default")
    assert (read(cli, "P/C/gpu.priority"), read(cli, "P/C/gpu.priority.effective")) == (
        "default\n", "300\n")
    assert Cgroup(cli.fake.root, "P/C").priority() is UNSET
    cli("create", "P/D", "--priority", "default", "--weight", "50")
    assert (read(cli, "P/D/gpu.priority"), read(cli, "P/D/gpu.priority.effective")) == (
        "default\n", "300\n")
    r = cli("set", "P/C", "--priority", "default", "--dry-run")
    assert r.output == f"would write 'default' to {cli.fake.root / 'P/C/gpu.priority'}\n"


def test_a_rollback_unsets_a_priority_again(cli):
    cli.fake.make("a")
    cli.fake.fail["a/gpu.memory.max"] = 22
    cli("set", "a", "--priority", "5", "--memory-max", "renderD128=1G", code=1)
    assert cli.fake.log == [("a/gpu.priority", "5"), ("a/gpu.priority", "default")]
    assert read(cli, "a/gpu.priority") == "default\n"


def _path(fake, values):
    """Groups g0/g1/... with these priorities (None: left unset), the leaf last."""
    rel = "/".join(f"g{i}" for i in range(len(values)))
    fake.make(rel)
    for i, value in enumerate(values):
        if value is not None:
            fake.write(fake.root.joinpath(*[f"g{j}" for j in range(i + 1)], "gpu.priority"),
                       str(value).encode())
    return Cgroup(fake.root, rel)


@pytest.mark.parametrize("values", list(itertools.product([None, -5, 0, 300], repeat=3)))
def test_the_ancestors_cap_is_what_the_kernel_computes(fake, values):
    """knobs.ceiling against the fake kernel's gpu.priority.effective (the
    reference model's rule): an unset leaf has its ancestors' cap."""
    leaf = _path(fake, [*values, None])
    cap = knobs.ceiling(leaf)
    assert cap is not None
    assert cap.priority == leaf.priority_effective()
    # the group it names sets it: its own value, or a top-level group's default
    owner = cap.group.priority()
    assert owner == cap.priority if cap.own else (owner is UNSET and cap.group.parent.is_root)


# set and create: the warning and --raise-ancestors -----------------------------------------------


def test_only_set_ancestors_and_an_unset_top_level_one_cap(cli):
    cli.fake.make("a/b/c")
    cli("set", "a", "--priority", "900")
    r = cli("set", "a/b/c", "--priority", "500")  # /a/b inherits 900: nothing caps
    assert "warning" not in r.output
    cli("set", "a", "--priority", "100")
    r = cli("set", "a/b/c", "--priority", "500")
    assert ("warning: /a/b/c gets priority 500 but its effective priority stays 100: "
            "ancestor /a has gpu.priority 100 (fix: add --raise-ancestors, or pycgpu set /a "
            "--priority 500)") in r.output
    cli("set", "a/b", "--priority", "-2")
    r = cli("set", "a/b/c", "--priority", "500")
    assert "stays -2: ancestor /a/b has gpu.priority -2" in r.output


def test_raise_ancestors_lifts_set_ones_and_an_unset_top_level_one(cli):
    """/x is top-level and unset (0), /x/y set below N, /x/y/z unset: /x and
    /x/y are raised, /x/y/z inherits and is left alone."""
    cli.fake.make("x/y/z/leaf")
    cli("set", "x/y", "--priority", "10")
    cli.fake.log.clear()
    r = cli("set", "x/y/z/leaf", "--priority", "400", "--raise-ancestors")
    assert "warning" not in r.output
    assert cli.fake.log == [("x/gpu.priority", "400"), ("x/y/gpu.priority", "400"),
                            ("x/y/z/leaf/gpu.priority", "400")]
    assert read(cli, "x/y/z/gpu.priority") == "default\n"
    assert read(cli, "x/y/z/gpu.priority.effective") == "400\n"
    assert read(cli, "x/y/z/leaf/gpu.priority.effective") == "400\n"


def test_raise_ancestors_for_a_negative_priority_lifts_nothing(cli):
    cli.fake.make("a/b")
    cli.fake.log.clear()
    cli("set", "a/b", "--priority", "-5", "--raise-ancestors")
    assert cli.fake.log == [("a/b/gpu.priority", "-5")]


def test_create_raise_ancestors_lifts_a_new_group_only_where_the_kernel_gives_it_0(cli):
    """A group the plan makes below the top level: its lift is written only
    if it reads a number below N once made (a kernel before default)."""
    root = cli.fake.root
    r = cli("create", "x/y/z", "--priority", "7", "--raise-ancestors", "--dry-run")
    assert r.output.splitlines()[-3:] == [
        f"would write '7' to {root / 'x/gpu.priority'}",
        f"would write '7' to {root / 'x/y/gpu.priority'} if it reads a number below 7 once "
        "made (a kernel before gpu.priority's default)",
        f"would write '7' to {root / 'x/y/z/gpu.priority'}"]
    cli("create", "x/y/z", "--priority", "7", "--raise-ancestors")
    assert [w for w in cli.fake.log if w[0].endswith("gpu.priority")] == [
        ("x/gpu.priority", "7"), ("x/y/z/gpu.priority", "7")]
    assert read(cli, "x/y/gpu.priority") == "default\n"
    assert read(cli, "x/y/z/gpu.priority.effective") == "7\n"


def test_create_raise_ancestors_for_a_negative_priority_lifts_nothing(cli):
    r = cli("create", "x/y/z", "--priority", "-5", "--raise-ancestors", "--dry-run")
    assert [line for line in r.output.splitlines() if "gpu.priority" in line] == [
        f"would write '-5' to {cli.fake.root / 'x/y/z/gpu.priority'}"]


def test_create_raise_ancestors_on_a_kernel_before_default(cli):
    cli.fake.unset = False
    cli("create", "x/y/z", "--priority", "7", "--raise-ancestors")
    assert [w for w in cli.fake.log if w[0].endswith("gpu.priority")] == [
        ("x/gpu.priority", "7"), ("x/y/gpu.priority", "7"), ("x/y/z/gpu.priority", "7")]
    assert read(cli, "x/y/z/gpu.priority.effective") == "7\n"


def test_the_warning_on_a_kernel_before_default(cli):
    cli.fake.unset = False
    cli.fake.make("team/job")
    r = cli("set", "team/job", "--priority", "500")
    assert ("warning: /team/job gets priority 500 but its effective priority stays 0: "
            "ancestor /team has gpu.priority 0 (fix:") in r.output


# show ---------------------------------------------------------------------------------------


def test_show_an_inherited_priority(cli):
    cli.fake.make("P/C/G")
    cli("set", "P", "--priority", "500")
    cli("set", "P/C/G", "--priority", "800")
    out = cli("show", "-r", "P").output
    assert "\n  priority             500 (effective 500)\n" in out
    assert "/P/C\n  weight               default 100\n  priority             default " \
           "(effective 500, inherited from /P)\n" in out
    assert "  priority             800 (effective 500, capped by /P)\n" in out
    items = show_json(cli, "-r", "P")
    assert items["/P"]["priority"] == 500 and "priority_inherited" not in items["/P"]
    c = items["/P/C"]
    assert "priority" not in c
    assert (c["priority_inherited"], c["priority_effective"], c["priority_capped_by"]) == (
        True, 500, "/P")
    assert items["/P/C/G"]["priority_capped_by"] == "/P"


def test_show_an_unset_top_level_group(cli):
    cli.fake.make("T/U")
    out = [line for line in cli("show", "-r", "T").output.splitlines() if "priority" in line]
    assert out == ["  priority             default (effective 0)",
                   "  priority             default (effective 0, inherited from /T)"]
    items = show_json(cli, "-r", "T")
    assert "priority_capped_by" not in items["/T"]
    assert items["/T/U"]["priority_capped_by"] == "/T"


def test_the_snapshot_of_an_unset_group(fake):
    fake.make("a")
    files = model.read_group(str(fake.root / "a"), "/a")
    assert files.priority is UNSET
    item = model.show_item(files)
    assert (item["priority_inherited"], "priority" in item) == (True, False)
    assert model.FILE["gpu.priority"].undo(files, None) == "default"
    assert snapshot.document(fake.root, [item])["cgroups"] == [item]


def test_a_kernel_before_default_still_reads(cli):
    """Every group holds a number there, a new one 0; nothing reads default."""
    cli.fake.unset = False
    cli.fake.make("team/job")
    assert read(cli, "team/job/gpu.priority") == "0\n"
    cli("set", "team/job", "--priority", "500")
    out = cli("show", "-r", "team").output
    assert "  priority             0 (effective 0)\n" in out
    assert "  priority             500 (effective 0, capped by /team)\n" in out
    items = show_json(cli, "-r", "team")
    assert items["/team"]["priority"] == 0
    assert not any("priority_inherited" in item for item in items.values())
    assert Cgroup(cli.fake.root, "team").priority() == 0
    r = cli("set", "team/job", "--priority", "default", code=1)
    assert "writing 'default' to" in r.output and "invalid value" in r.output
    assert read(cli, "team/job/gpu.priority") == "500\n"


def test_the_example_of_docs_cli(cli):
    """docs/cli.md, "Priority and its ancestors"."""
    cli.fake.make("team/job")
    r = cli("set", "team/job", "--priority", "500")
    assert r.output == (
        "warning: /team/job gets priority 500 but its effective priority stays 0: ancestor "
        "/team has gpu.priority default, 0 for a top-level group (fix: add --raise-ancestors, "
        "or pycgpu set /team --priority 500)\n")
    assert "  priority             500 (effective 0, capped by /team)\n" in cli(
        "show", "team/job").output
    cli("set", "team/job", "--priority", "500", "--raise-ancestors")
    cli("create", "team/job/worker")
    assert "  priority             default (effective 500, inherited from /team)\n" in cli(
        "show", "team/job/worker").output
