"""Parsers and formatters for the gpu controller's cgroup files.

One function pair per file format of Documentation/admin-guide/cgroup-v2.rst
("Interface Files"), shared by the library, the CLI and the tests:

- single value, ``-5``: gpu.priority (or ``default``: none of its own), gpu.priority.effective
- weight (io.weight style), ``default 100`` then ``226:128 300``: gpu.weight
- cap (cpu.max style per device), ``default max 100000`` then ``226:128 30000 100000``:
  gpu.max
- flat keyed, ``226:128 1048576`` or ``226:128 max``: gpu.memory.max, .current, .peak
- nested keyed, ``226:128 usage_usec=10 wait_usec=2``: gpu.stat, gpu.memory.events[.local]
- region keyed (the dmem controller's), ``drm/0000:03:00.0/vram0 1048576`` or ``... max``:
  dmem.max, .min, .low, .current, .peak, .capacity; nested, ``drm/vgem/system max=2``:
  dmem.events[.local]

Every parse error is a :class:`FormatError` that names the offending text.
"""

from __future__ import annotations

import enum
import functools
import re
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Final, NamedTuple, TypeAlias

from .errors import Error

WEIGHT_MIN, WEIGHT_DEFAULT, WEIGHT_MAX = 1, 100, 10000
# PRIORITY_DEFAULT: the effective priority of a top-level group without a
# gpu.priority of its own (and every group's own value on a kernel before
# gpu.priority's ``default``)
PRIORITY_MIN, PRIORITY_DEFAULT, PRIORITY_MAX = -1023, 0, 1023
MAX = "max"
DEFAULT = "default"


class Unset(enum.Enum):
    """The type of :data:`UNSET`."""

    UNSET = DEFAULT

    def __str__(self) -> str:
        return DEFAULT

    def __repr__(self) -> str:
        return "UNSET"


UNSET: Final = Unset.UNSET
"""A gpu.priority that reads (and is written) ``default``: the group has no
priority of its own and inherits its parent's effective one; a top-level
group's is :data:`PRIORITY_DEFAULT`. Every new group's, on a kernel that has
it (issue 37 item 10); kernels before it print a number for every group."""

Priority: TypeAlias = int | Unset
"""A gpu.priority: a number in [PRIORITY_MIN, PRIORITY_MAX], or :data:`UNSET`."""


class FormatError(Error, ValueError):
    """Text that does not follow a cgroup file format, or a value out of range."""


class DevT(NamedTuple):
    """A device number, written ``MAJ:MIN`` in cgroup files. A named tuple:
    hashed and compared in C, as it keys every per-device dict of a scrape
    of thousands of groups."""

    major: int
    minor: int

    def __str__(self) -> str:
        return f"{self.major}:{self.minor}"

    @classmethod
    def parse(cls, text: str) -> DevT:
        devt = _parse_devt(text)
        return devt if cls is DevT else cls(devt.major, devt.minor)


# ASCII digits only, as the kernel's kstrto*(): \d takes other scripts' digits, int() "1_000"
_DEVT = re.compile(r"([0-9]{1,10}):([0-9]{1,10})")
_INT = re.compile(r"[+-]?[0-9]+")
_WHOLE = re.compile(r"[0-9]+")
# the kernel's dev_t: 12-bit major, 20-bit minor
_MAJOR_MAX, _MINOR_MAX = (1 << 12) - 1, (1 << 20) - 1


@functools.lru_cache(maxsize=256)
def _parse_devt(text: str) -> DevT:
    """DevT.parse, cached: a tree walk sees the same few devices thousands of times."""
    m = _DEVT.fullmatch(text.strip())
    if not m:
        raise FormatError(f"{shown(text)} is not a device number (MAJ:MIN, e.g. 226:128)")
    major, minor = int(m.group(1)), int(m.group(2))
    if major > _MAJOR_MAX or minor > _MINOR_MAX:
        raise FormatError(f"{text.strip()!r} is out of range (major <= {_MAJOR_MAX}, "
                          f"minor <= {_MINOR_MAX})")
    return DevT(major, minor)


# longer than any 64-bit number: refused before int() (whose own limit is 4300 digits)
_DIGITS_MAX = 20


def shown(text: str, limit: int = 40) -> str:
    """@text quoted for a message, cut short when it is long."""
    if len(text) <= limit:
        return repr(text)
    return repr(text[:limit]) + f"... ({len(text)} characters)"


def decode(data: bytes, what: str) -> str:
    """The text of a kernel file; :class:`FormatError` when it is not UTF-8."""
    try:
        return data.decode()
    except UnicodeDecodeError as e:
        raise FormatError(f"{what}: not UTF-8 text (byte 0x{data[e.start]:02x} at offset "
                          f"{e.start})") from None


def parse_number(text: str, what: str, expected: str | None = None, *, signed: bool = True,
                 digits: int = _DIGITS_MAX) -> int:
    """The one parser of pycgpu's integers, in decimal ASCII digits: the
    kernel's files, a person's values (an option, an annotation, the device
    plugin's settings). Whitespace around is ignored; a sign only when
    @signed; at most @digits significant digits (leading zeros are not
    counted; longer is out of range, refused before int() sees it).
    :class:`FormatError` naming @what, saying what is @expected when given."""
    t = text.strip()
    give = f" (give {expected})" if expected else ""
    if not (_INT if signed else _WHOLE).fullmatch(t):
        noun = "an integer" if signed else "a whole number"
        raise FormatError(f"{what}: {shown(t)} is not {noun}{give}")
    if len(t.lstrip("+-").lstrip("0")) > digits:
        raise FormatError(f"{what}: {shown(t)} is out of range{give}")
    return int(t, 10)


def _escaped(ch: str) -> str:
    code = ord(ch)
    if 0xDC80 <= code <= 0xDCFF:  # a byte that is not UTF-8 (os.fsdecode's surrogate escape)
        return f"\\x{code - 0xDC00:02x}"
    if code < 0x20 or code == 0x7F:
        return f"\\x{code:02x}"
    return ch


def printable_name(name: str) -> str:
    """A cgroup name or path as pycgpu prints it, in text and JSON alike
    (the one rule): a byte that is not UTF-8 and a control character as
    ``\\xNN``, anything else as it is, a backslash included (systemd's unit
    names escape with ``\\x2d``: they print as systemctl prints them). The
    result is valid UTF-8 on one line."""
    if name.isprintable():
        return name
    return "".join(map(_escaped, name))


def _lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.strip()]


# single value ---------------------------------------------------------------


def parse_int(text: str, what: str = "value") -> int:
    """A kernel file's integer (:func:`parse_number`)."""
    return parse_number(text, what)


def check_priority(value: int) -> int:
    if not PRIORITY_MIN <= value <= PRIORITY_MAX:
        raise FormatError(
            f"priority {value} is out of range [{PRIORITY_MIN}, {PRIORITY_MAX}]"
        )
    return value


def parse_priority(text: str, what: str = "value", expected: str | None = None) -> Priority:
    """gpu.priority: a number, or ``default`` (:data:`UNSET`), whitespace
    around ignored (as the kernel's strstrip() does); a number is
    :func:`parse_number`'s (its range is :func:`check_priority`'s)."""
    if text.strip() == DEFAULT:
        return UNSET
    return parse_number(text, what, expected)


def format_priority(value: Priority) -> str:
    """The write of @value to gpu.priority: ``default`` for :data:`UNSET`,
    else the number, checked."""
    return DEFAULT if value is UNSET else str(check_priority(value))


def check_weight(value: int) -> int:
    if not WEIGHT_MIN <= value <= WEIGHT_MAX:
        raise FormatError(f"weight {value} is out of range [{WEIGHT_MIN}, {WEIGHT_MAX}]")
    return value


# weight ---------------------------------------------------------------------


@dataclass
class Weights:
    """gpu.weight: the default and the per-device overrides."""

    default: int = WEIGHT_DEFAULT
    devices: dict[DevT, int] = field(default_factory=dict)

    def for_device(self, dev: DevT) -> int:
        return self.devices.get(dev, self.default)


def parse_weight(text: str) -> Weights:
    lines = _lines(text)
    if not lines:
        raise FormatError("gpu.weight is empty")
    first = lines[0].split()
    if len(first) != 2 or first[0] != DEFAULT:
        raise FormatError(f"gpu.weight must start with 'default W', not {lines[0]!r}")
    weights = Weights(default=parse_number(first[1], "default weight"))
    for line in lines[1:]:
        words = line.split()
        if len(words) != 2:
            raise FormatError(f"gpu.weight line {line!r} is not 'MAJ:MIN W'")
        weights.devices[DevT.parse(words[0])] = parse_number(words[1], f"weight of {words[0]}")
    return weights


def format_weight_write(weight: int | None, dev: DevT | None = None) -> str:
    """One write to gpu.weight: the default (dev None) or a device's override;
    weight None resets a device's override to the default."""
    if dev is None:
        if weight is None:
            raise FormatError("the default weight needs a value")
        return f"{DEFAULT} {check_weight(weight)}"
    return f"{dev} {DEFAULT if weight is None else check_weight(weight)}"


def format_weight(weights: Weights) -> str:
    lines = [f"{DEFAULT} {weights.default}"]
    lines += [f"{dev} {w}" for dev, w in sorted(weights.devices.items())]
    return "\n".join(lines) + "\n"


# cap: gpu.max ------------------------------------------------------------------

# the kernel's bounds (cpu.max's), microseconds
CAP_MIN_US, PERIOD_MIN_US, PERIOD_DEFAULT_US, PERIOD_MAX_US = 1000, 1000, 100000, 1000000


@dataclass(frozen=True)
class Cap:
    """One line of gpu.max: at most ``max_us`` of every ``period_us`` of each
    engine of a device; ``max_us`` None: no cap."""

    max_us: int | None = None
    period_us: int = PERIOD_DEFAULT_US

    @property
    def percent(self) -> float | None:
        """The cap as a part of each engine, percent; None: no cap."""
        return None if self.max_us is None else 100 * self.max_us / self.period_us

    def __str__(self) -> str:
        return f"{MAX if self.max_us is None else self.max_us} {self.period_us}"


def check_cap(cap: Cap) -> Cap:
    """@cap, if the kernel takes it: PERIOD in [1000, 1000000] µs, MAX at
    least 1000 µs and at most PERIOD (a cap per engine)."""
    if not PERIOD_MIN_US <= cap.period_us <= PERIOD_MAX_US:
        raise FormatError(f"period {cap.period_us} µs is out of range "
                          f"[{PERIOD_MIN_US}, {PERIOD_MAX_US}]")
    if cap.max_us is not None and not CAP_MIN_US <= cap.max_us <= cap.period_us:
        raise FormatError(f"cap {cap.max_us} µs is out of range [{CAP_MIN_US}, "
                          f"{cap.period_us}] (at least 1 ms, at most the period)")
    return cap


@dataclass
class Caps:
    """gpu.max: the default line and the per-device overrides."""

    default: Cap = field(default_factory=Cap)
    devices: dict[DevT, Cap] = field(default_factory=dict)

    def for_device(self, dev: DevT) -> Cap:
        return self.devices.get(dev, self.default)


def _parse_cap(words: list[str], what: str) -> Cap:
    if len(words) != 2:
        raise FormatError(f"{what} is not 'MAX PERIOD'")
    max_us = None if words[0] == MAX else parse_number(words[0], f"{what}'s MAX", signed=False)
    return Cap(max_us, parse_number(words[1], f"{what}'s PERIOD", signed=False))


def parse_max(text: str) -> Caps:
    lines = _lines(text)
    if not lines:
        raise FormatError("gpu.max is empty")
    first = lines[0].split()
    if not first or first[0] != DEFAULT:
        raise FormatError(f"gpu.max must start with 'default MAX PERIOD', not {lines[0]!r}")
    caps = Caps(default=_parse_cap(first[1:], "gpu.max's default line"))
    for line in lines[1:]:
        words = line.split()
        if not words:
            raise FormatError(f"gpu.max line {line!r} is not 'MAJ:MIN MAX PERIOD'")
        caps.devices[DevT.parse(words[0])] = _parse_cap(words[1:], f"gpu.max line {line!r}")
    return caps


def format_max_write(cap: Cap | None, dev: DevT | None = None) -> str:
    """One write to gpu.max: the default line (dev None) or a device's
    override; cap None drops a device's override."""
    if cap is None:
        if dev is None:
            raise FormatError("the default line of gpu.max needs a cap ('max' for none)")
        return f"{dev} {DEFAULT}"
    return f"{DEFAULT if dev is None else dev} {check_cap(cap)}"


# a cap as people write it (options, annotations, the device plugin's
# settings): ``30%``, ``12.5%/50ms``, ``30ms/100ms``, ``30000/100000`` (µs), ``max``
_CAP_PERCENT = re.compile(r"([0-9]{1,3}(?:\.[0-9]{1,4})?)%")
_DURATION = re.compile(r"([0-9]{1,7}(?:\.[0-9]{1,6})?)(us|µs|μs|ms|s)?")
_DURATION_US = {None: 1, "us": 1, "µs": 1, "μs": 1, "ms": 1000, "s": 1000000}
CAP_EXPECTED = ("P% of each engine (30%, 12.5%/50ms), MAX/PERIOD (30ms/100ms, "
                "30000/100000 in µs), or max")


def _duration_us(text: str, what: str) -> int:
    m = _DURATION.fullmatch(text)
    if not m:
        raise FormatError(f"{what} {shown(text)} does not parse; give {CAP_EXPECTED}")
    value = Fraction(m.group(1)) * _DURATION_US[m.group(2)]
    if value.denominator != 1:
        raise FormatError(f"{what} {shown(text)} is not a whole number of µs")
    return int(value)


def parse_cap(text: str, what: str = "cap") -> Cap:
    """A cap as people write it: ``max`` (none); ``P%`` of each engine
    (up to 4 decimals) with an optional ``/PERIOD``; ``MAX/PERIOD`` or
    ``MAX`` as durations (``us``, ``ms``, ``s``; a bare number is µs, as
    the kernel's). The period defaults to 100 ms, cpu.max's. Checked
    against the kernel's bounds (:func:`check_cap`); :class:`FormatError`
    naming @what."""
    head, sep, tail = (part.strip() for part in text.strip().partition("/"))
    try:
        period = _duration_us(tail, "the period") if sep else PERIOD_DEFAULT_US
        if head == MAX:
            return check_cap(Cap(None, period))
        m = _CAP_PERCENT.fullmatch(head)
        if m:
            part = Fraction(m.group(1))
            if part > 100:
                raise FormatError(f"{m.group(1)}% is more than all of an engine")
            return check_cap(Cap(round(part * period / 100), period))
        if head.endswith("%"):
            raise FormatError(f"{shown(head)} is not a percentage; give {CAP_EXPECTED}")
        return check_cap(Cap(_duration_us(head, "the cap"), period))
    except FormatError as e:
        raise FormatError(f"{what}: {e}") from None


def format_cap(cap: Cap) -> str:
    """@cap as people read it: ``max``, ``30% (30ms/100ms)``; the part in
    parentheses (or ``max``, ``max/50ms``) is a text :func:`parse_cap`
    reads back exactly (the percentage is rounded to 4 decimals)."""
    if cap.max_us is None:
        return MAX if cap.period_us == PERIOD_DEFAULT_US else f"{MAX}/{_duration(cap.period_us)}"
    percent = Fraction(100 * cap.max_us, cap.period_us)
    pct = f"{float(percent):.4f}".rstrip("0").rstrip(".")
    return f"{pct}% ({_duration(cap.max_us)}/{_duration(cap.period_us)})"


def format_cap_write(cap: Cap) -> str:
    """@cap in the words :func:`parse_cap` reads exactly: ``max``,
    ``30ms/100ms``, ``max/50ms``."""
    if cap.max_us is None:
        return MAX if cap.period_us == PERIOD_DEFAULT_US else f"{MAX}/{_duration(cap.period_us)}"
    return f"{_duration(cap.max_us)}/{_duration(cap.period_us)}"


def _duration(us: int) -> str:
    for unit, n in (("s", 1000000), ("ms", 1000)):
        if us % n == 0:
            return f"{us // n}{unit}"
    return f"{us}us"


def format_max(caps: Caps) -> str:
    lines = [f"{DEFAULT} {caps.default}"]
    lines += [f"{dev} {cap}" for dev, cap in sorted(caps.devices.items())]
    return "\n".join(lines) + "\n"


# flat keyed -----------------------------------------------------------------

_SUFFIX = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}


def parse_size(text: str) -> int | None:
    """``4096``, ``512K``, ``2G`` or ``max`` (None: no limit)."""
    t = text.strip()
    if t == MAX:
        return None
    m = re.fullmatch(r"([0-9]+)([KMGT]?)", t, flags=re.IGNORECASE)
    if not m:
        raise FormatError(
            f"{shown(text)} is not a size (bytes, with an optional K/M/G/T suffix, or max)"
        )
    if len(m.group(1).lstrip("0")) > _DIGITS_MAX:
        raise FormatError(f"size {shown(t)} is out of range [0, {SIZE_MAX}]")
    return int(m.group(1)) * _SUFFIX[m.group(2).upper()]


SIZE_MAX = (1 << 63) - 1


def check_size(value: int | None) -> int | None:
    if value is not None and value > SIZE_MAX:
        raise FormatError(f"size {value} is out of range [0, {SIZE_MAX}]")
    return value


def format_size(value: int | None) -> str:
    return MAX if value is None else str(value)


_UNITS = ("T", "G", "M", "K", "")  # the largest first
# an exact form is shown while it is this short: 1536M, 9999K; 1677720K reads better as 1.6G
_EXACT_DIGITS = 4


def format_size_exact(value: int) -> str:
    """The largest exact K/M/G/T form, else bytes, whatever its length:
    536870912 -> ``512M``, 1000 -> ``1000``. :func:`parse_size` reads it
    back to @value: for values handed to a program (annotations)."""
    for suffix in _UNITS[:-1]:
        unit = _SUFFIX[suffix]
        if value and value % unit == 0:
            return f"{value // unit}{suffix}"
    return str(value)


def format_size_human(value: int | None) -> str:
    """The one size format of pycgpu's human-readable output (show, top,
    stat, k8s inventory): binary suffixes K/M/G/T.

    - ``max`` for no limit (None);
    - the exact form where the value is a whole number of a unit, so that
      it can be typed back as a limit: 4096 -> ``4K``, 1610612736 ->
      ``1536M`` (not 1.5G), 1000 -> ``1000``; while it has at most 4 digits;
    - else the largest unit with one decimal: 1000000 -> ``976.6K``,
      12348030976 -> ``11.5G``. A decimal point always marks a rounded value.
    """
    if value is None:
        return MAX
    exact = format_size_exact(value)
    if len(exact.rstrip("".join(_UNITS))) <= _EXACT_DIGITS:
        return exact
    for i, suffix in enumerate(_UNITS[:-1]):
        unit = _SUFFIX[suffix]
        if value >= unit:
            text = f"{value / unit:.1f}"
            if i > 0 and float(text) >= 1024:  # 1048575 -> 1.0M, not 1024.0K
                bigger = _UNITS[i - 1]
                return f"{value / _SUFFIX[bigger]:.1f}{bigger}"
            return text + suffix
    return exact  # below 1K: bytes, exact and short


def parse_flat_keyed(text: str) -> dict[DevT, int | None]:
    out: dict[DevT, int | None] = {}
    for line in _lines(text):
        words = line.split()
        if len(words) != 2:
            raise FormatError(f"line {line!r} is not 'MAJ:MIN VALUE'")
        out[DevT.parse(words[0])] = None if words[1] == MAX else parse_number(words[1], words[0])
    return out


def format_flat_keyed_write(dev: DevT, value: int | None) -> str:
    return f"{dev} {format_size(value)}"


# nested keyed ---------------------------------------------------------------


def _nested(line: str, words: list[str]) -> dict[str, int]:
    keys: dict[str, int] = {}
    for word in words:
        key, sep, value = word.partition("=")
        if not sep or not key:
            raise FormatError(f"{word!r} in line {line!r} is not KEY=VALUE")
        keys[key] = parse_number(value, key)
    return keys


def parse_nested_keyed(text: str) -> dict[DevT, dict[str, int]]:
    out: dict[DevT, dict[str, int]] = {}
    for line in _lines(text):
        words = line.split()
        out[DevT.parse(words[0])] = _nested(line, words[1:])
    return out


# region keyed (dmem) -------------------------------------------------------


def parse_region_keyed(text: str) -> dict[str, int | None]:
    """dmem.max, .min, .low, .current, .peak and .capacity: ``REGION BYTES``
    or ``REGION max`` per line."""
    out: dict[str, int | None] = {}
    for line in _lines(text):
        words = line.split()
        if len(words) != 2:
            raise FormatError(f"line {line!r} is not 'REGION VALUE'")
        # dmem's region names ("drm/<device>/<region>") are any blank-free text
        out[words[0]] = None if words[1] == MAX else parse_number(words[1], words[0])
    return out


def format_region_keyed_write(region: str, value: int | None) -> str:
    return f"{region} {format_size(value)}"


def parse_region_nested_keyed(text: str) -> dict[str, dict[str, int]]:
    """dmem.events and dmem.events.local: ``REGION max=N`` per line."""
    out: dict[str, dict[str, int]] = {}
    for line in _lines(text):
        words = line.split()
        out[words[0]] = _nested(line, words[1:])
    return out
