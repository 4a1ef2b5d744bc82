"""pycgpu against the kernel's rules, without pycgpu's own parsers as the
judge: the reference model (tests/kernel_model.py) agrees with the table
recorded from the real kernel (replayed there by
tests/vm/test_kernel_table.py), and property tests check that what pycgpu
writes the model accepts as meant, that pycgpu reads the model's canonical
texts back exactly, and that pycgpu accepts a knob value given as text when,
and only when, the kernel would."""

from __future__ import annotations

import errno
import json
from pathlib import Path

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from kernel_model import U64_MAX, Model, Refused, table_state

from pycgpu.core import formats, knobs
from pycgpu.core.formats import DevT
from pycgpu.core.model import FILE


def model_file(name):
    """pycgpu's parser of the file @name (pycgpu.core.model's table)."""
    return FILE[name].parse

TABLE = Path(__file__).parent / "fixtures" / "kernel_writes.json"
# as in the VM the table was recorded in (vgem 226:128, simgpu 226:129): literal
# inputs such as "+226:+128" mean the same device here
SCHED, NOSCHED = (226, 129), (226, 128)
KEYS = {SCHED: "{sched}", NOSCHED: "{nosched}"}
FILES = ("gpu.weight", "gpu.priority", "gpu.memory.max", "gpu.max")


def model() -> Model:
    return Model({SCHED: True, NOSCHED: False})


def write(m: Model, name: str, text: str | bytes) -> str | None:
    data = text.encode("latin-1") if isinstance(text, str) else text
    try:
        m.write(name, data)
    except Refused as e:
        return errno.errorcode[e.code]
    return None


# the recorded table ------------------------------------------------------------------------


def test_the_model_agrees_with_every_write_recorded_from_the_kernel():
    entries = json.loads(TABLE.read_text())
    assert len(entries) > 900
    assert {e["errno"] for e in entries} >= {
        None, "EINVAL", "ERANGE", errno.errorcode[errno.EOPNOTSUPP], "E2BIG"}
    wrong = []
    for e in entries:
        m = model()
        m.write("gpu.priority", b"0")  # as tests/vm/test_kernel_table.py's reset() leaves it
        text = e["input"].replace("{sched}", "226:129").replace("{nosched}", "226:128")
        got = (write(m, e["file"], text), table_state(e["file"], m.render(e["file"]), KEYS))
        if got != (e["errno"], e["state"]):
            wrong.append((e, got))
    assert not wrong, f"{len(wrong)} differ, the first: {wrong[0]}"


def test_the_table_is_not_mostly_refusals():
    entries = json.loads(TABLE.read_text())
    for name in FILES:
        mine = [e for e in entries if e["file"] == name]
        accepted = sum(e["errno"] is None for e in mine)
        assert 0.2 < accepted / len(mine) < 0.9, (name, accepted, len(mine))


# what pycgpu writes, the kernel takes as meant -----------------------------------------------

weights = st.integers(formats.WEIGHT_MIN, formats.WEIGHT_MAX)
priorities = st.integers(formats.PRIORITY_MIN, formats.PRIORITY_MAX)
sizes = st.one_of(st.none(), st.integers(0, formats.SIZE_MAX),
                  st.integers(0, 1 << 30).map(lambda v: v * 4096))


@given(weights, st.one_of(st.none(), weights))
def test_weight_writes_are_taken_as_meant(default, override):
    m = model()
    m.write("gpu.weight", formats.format_weight_write(default).encode())
    dev = DevT(*SCHED)
    m.write("gpu.weight", formats.format_weight_write(override, dev).encode())
    assert m.default == default
    assert m.weights == ({} if override is None else {SCHED: override})


@given(sizes)
def test_memory_max_writes_are_taken_as_meant(size):
    m = model()
    m.write("gpu.memory.max", formats.format_flat_keyed_write(DevT(*NOSCHED), size).encode())
    assert m.read("gpu.memory.max")[NOSCHED] == (U64_MAX if size is None else size)


@given(st.one_of(st.just(formats.UNSET), priorities))
def test_priority_writes_are_taken_as_meant(prio):
    m = model()
    m.write("gpu.priority", b"-9")
    m.write("gpu.priority", formats.format_priority(prio).encode())
    assert m.priority == (None if prio is formats.UNSET else prio)


# what the kernel prints, pycgpu reads back exactly -------------------------------------------


@given(weights, st.dictionaries(st.sampled_from([SCHED]), weights),
       st.dictionaries(st.sampled_from([SCHED, NOSCHED]), st.integers(0, U64_MAX - 1)),
       st.one_of(st.none(), priorities))
def test_canonical_texts_parse_back_exactly(default, per_device, limits, prio):
    m = model()
    m.default, m.weights, m.mem, m.priority = default, per_device, limits, prio
    w = formats.parse_weight(m.render("gpu.weight"))
    assert (w.default, {(d.major, d.minor): v for d, v in w.devices.items()}) == (
        default, per_device)
    got = formats.parse_flat_keyed(m.render("gpu.memory.max"))
    assert {(d.major, d.minor): v for d, v in got.items()} == {
        d: limits.get(d) for d in (SCHED, NOSCHED)}
    assert model_file("gpu.priority")(m.render("gpu.priority")) == (
        formats.UNSET if prio is None else prio)


def test_a_new_group_reads_default_and_a_kernel_before_0():
    assert model().render("gpu.priority") == "default\n"
    old = Model({SCHED: True}, unset=False)
    assert old.render("gpu.priority") == "0\n"
    assert write(old, "gpu.priority", "default") == "EINVAL"
    assert old.priority == 0


# pycgpu takes a value as text when, and only when, the kernel would -------------------------

# what a person types as a number: digits, signs, spaces, and the look-alikes
NUMBER_TEXT = st.text(alphabet="0123456789+- _.xXeE\u0665\u00b2", min_size=0, max_size=24)


def pycgpu_number(text: str, check) -> int | None:
    try:
        return check(formats.parse_number(text, "value", "a number"))
    except formats.FormatError:
        return None


def kernel_number(name: str, text: str) -> int | None:
    m = model()
    body = text.strip(" ")
    if not body or " " in body:
        return None  # not one word: the kernel reads a key, pycgpu refuses it too
    try:
        m.write(name, body.encode())
    except (Refused, UnicodeEncodeError):
        return None
    return m.default if name == "gpu.weight" else m.priority


@settings(max_examples=400)
@given(NUMBER_TEXT)
@example("1_000")
@example("\u0665")
@example("+7")
@example("0100")
@example("-0")
@example("10000")
@example("10001")
@example("0" * 21 + "7")
def test_a_weight_given_as_text_is_accepted_as_the_kernel_would(text):
    assert pycgpu_number(text, formats.check_weight) == kernel_number("gpu.weight", text)


@settings(max_examples=400)
@given(NUMBER_TEXT)
@example("1_0")
@example("-1023")
@example("1024")
def test_a_priority_given_as_text_is_accepted_as_the_kernel_would(text):
    assert pycgpu_number(text, formats.check_priority) == kernel_number("gpu.priority", text)


# a priority as text: the words of a number and of default, and the blanks strstrip() drops
PRIORITY_TEXT = st.lists(st.sampled_from(["default", "Default", "defaults", "de", "fault", "5",
                                          "-7", "0", " ", "\t", "\n", "\r", "\v"]),
                         min_size=1, max_size=4).map("".join)


@settings(max_examples=400)
@given(PRIORITY_TEXT)
@example("default")
@example(" default\n")
@example("\tdefault\r\v")
@example("default 5")
@example("defaultdefault")
@example("de" + "fault")
def test_a_priority_or_default_given_as_text_is_taken_as_the_kernel_would(text):
    """--priority and the annotation's parser against the kernel's write of
    the same text: the same value, or a refusal by both."""
    try:
        mine: object = knobs.parse_settings((), text, (), DevT.parse).priority
    except knobs.InvalidRequest:
        mine = "refused"
    m = model()
    m.write("gpu.priority", b"-9")
    try:
        m.write("gpu.priority", text.encode())
        theirs: object = formats.UNSET if m.priority is None else m.priority
    except Refused:
        theirs = "refused"
    assert mine == theirs


SIZE_TEXT = st.text(alphabet="0123456789kKmMgGtTpP+-_. ax\u0665", min_size=0, max_size=24)


@settings(max_examples=400)
@given(SIZE_TEXT)
@example("1_024")
@example("\u0665K")
@example("9223372036854775808")
@example("max")
@example("8m")
def test_a_size_pycgpu_takes_means_what_the_kernel_takes_it_to_mean(text):
    """pycgpu may refuse a size the kernel takes (a '+' sign, or a size past
    2^63 - 1), never the other way round, and never reads one differently."""
    try:
        mine = formats.check_size(formats.parse_size(text))
    except formats.FormatError:
        return
    m = model()
    m.write("gpu.memory.max", f"226:129 {text.strip()}".encode())
    theirs = m.read("gpu.memory.max")[SCHED]
    assert (U64_MAX if mine is None else mine) == theirs


@pytest.mark.parametrize("text", ["1_000", "\u0665", "\u00b2", "1e3", "0x10", "1.0"])
def test_look_alike_numbers_are_refused(text):
    assert pycgpu_number(text, formats.check_weight) is None


def test_a_new_groups_cap_reads_back_as_the_model_says():
    """The fuzz (tests/vm/test_robust_fuzz.py) compares a file's read-back
    with Model.read(): a period never written reads as the default."""
    from kernel_model import parse_back

    m = model()
    assert parse_back("gpu.max", m.render("gpu.max")) == m.read("gpu.max")
    m.write("gpu.max", b"226:129 5000")
    assert m.read("gpu.max") == ((0, 100000), {SCHED: (5000, 100000)})
    assert parse_back("gpu.max", m.render("gpu.max")) == m.read("gpu.max")
