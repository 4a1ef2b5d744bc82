"""A reference model of the gpu controller's interface files, written from
kernel/cgroup/gpu.c and lib/kstrtox.c, not from pycgpu's parsers: what a
write to gpu.weight, gpu.priority, gpu.max or gpu.memory.max does (the errno it
fails with, or the state it leaves) and the canonical text each file reads
back as; and gpu.priority.effective from the priorities on a path.

It is the independent reference of three tiers: the fuzz on the real kernel
(tests/vm/test_robust_fuzz.py, 100,000 writes) and the table recorded from
the real kernel (tests/host/fixtures/kernel_writes.json, replayed in the VM
by tests/vm/test_kernel_table.py) check the model against the kernel; the
host tier's fake kernel (tests/host/conftest.py) and the property tests
(tests/host/test_kernel_model.py) check pycgpu against the model.
"""

from __future__ import annotations

import errno
import random

U64_MAX = (1 << 64) - 1
# the VM's (x86-64) page: the largest write a cgroup file takes; the recorded
# table holds E2BIG entries at this size, whatever the host's page
PAGE = 4096


class Refused(Exception):
    def __init__(self, code: int) -> None:
        super().__init__(errno.errorcode[code])
        self.code = code


def _kstrtoull(s: bytes) -> int:
    """lib/kstrtox.c, base 10: digits (an overflow is ERANGE whatever
    follows), then at most one newline, then nothing."""
    n = len(s) - len(s.lstrip(b"0123456789"))
    if n and int(s[:n]) > U64_MAX:
        raise Refused(errno.ERANGE)
    if not n or s[n:] not in (b"", b"\n"):
        raise Refused(errno.EINVAL)
    return int(s[:n])


def kstrtoull(s: bytes) -> int:
    """kstrtoull() also takes one leading '+'."""
    return _kstrtoull(s[1:] if s.startswith(b"+") else s)


def kstrtoll(s: bytes, bits: int = 64) -> int:
    """kstrtoll(): a '-' then digits, or what kstrtoull() takes."""
    v = -_kstrtoull(s[1:]) if s.startswith(b"-") else kstrtoull(s)
    if not -(1 << (bits - 1)) <= v < (1 << (bits - 1)):
        raise Refused(errno.ERANGE)
    return v


def words(text: bytes, most: int) -> list[bytes]:
    """strsep() on space, tab and newline, empty words skipped, at most @most."""
    out = [w for w in text.replace(b"\t", b" ").replace(b"\n", b" ").split(b" ") if w]
    if len(out) > most:
        raise Refused(errno.EINVAL)
    return out


def devt(s: bytes) -> tuple[int, int]:
    maj, sep, mnr = s.partition(b":")
    if not sep:
        raise Refused(errno.EINVAL)
    try:
        a, b = kstrtoull(maj), kstrtoull(mnr)
    except Refused:
        raise Refused(errno.EINVAL) from None
    if a >= 1 << 12 or b >= 1 << 20:
        raise Refused(errno.EINVAL)
    return a, b


def weight(s: bytes) -> int:
    v = kstrtoll(s)
    if not 1 <= v <= 10000:
        raise Refused(errno.ERANGE)
    return v


def size(s: bytes) -> int:
    if s == b"max":
        return U64_MAX
    shift = {b"k": 10, b"m": 20, b"g": 30, b"t": 40}.get(s[-1:].lower(), 0)
    v = kstrtoull(s[:-1] if shift else s)
    v <<= shift
    if v >= U64_MAX:
        raise Refused(errno.ERANGE)
    return v


PRIO_UNSET = b"default"
U32_MAX = (1 << 32) - 1
PERIOD_DFL, PERIOD_MIN, PERIOD_MAX, MAX_MIN = 100000, 1000, 1000000, 1000


def kstrtou32(s: bytes) -> int:
    v = kstrtoull(s)
    if v > U32_MAX:
        raise Refused(errno.ERANGE)
    return v


def cap(w: list[bytes], current: tuple[int, int]) -> tuple[int, int]:
    """gpucg_parse_cap(): ``MAX [PERIOD]`` over @current (max_us, 0 for
    none; period_us, 0 for the default), the period kept if not given."""
    if not 1 <= len(w) <= 2:
        raise Refused(errno.EINVAL)
    mx, period = 0, current[1] or PERIOD_DFL
    if w[0] != b"max":
        mx = kstrtou32(w[0])
        if mx < MAX_MIN:
            raise Refused(errno.ERANGE)
    if len(w) == 2:
        period = kstrtou32(w[1])
        if not PERIOD_MIN <= period <= PERIOD_MAX:
            raise Refused(errno.ERANGE)
    if mx > period:
        raise Refused(errno.ERANGE)
    return mx, period


def effective(priorities: list[int | None]) -> int:
    """gpu.priority.effective of a group from the gpu.priority of the groups
    on its path below the root, the top-level group first and the group
    last (None: unset, it reads ``default``), as gpucg_priority_effective()
    computes it: the minimum of the priorities set, and of 0 when the
    top-level group's is unset (the root imposes no clamp)."""
    prio = 1023
    for p in priorities:
        if p is not None:
            prio = min(prio, p)
    if priorities[0] is None:
        prio = min(prio, 0)
    return prio


class Model:
    """The knobs of one cgroup as kernel/cgroup/gpu.c keeps them. @unset:
    the kernel has gpu.priority's ``default`` (issue 37 item 10: a new
    group's priority is unset, and a write of ``default`` unsets it);
    False: a kernel before it (a new group's is 0, ``default`` is EINVAL)."""

    def __init__(self, devices: dict[tuple[int, int], bool], unset: bool = True,
                 caps: dict[tuple[int, int], bool] | None = None) -> None:
        self.devices = devices  # key -> schedules
        # key -> an engine of it can hold work back (gpu.max); default: where it schedules
        self.caps = dict(devices) if caps is None else caps
        self.cap: tuple[int, int] = (0, 0)  # gpu.max's default line: (max_us, period_us)
        self.dev_caps: dict[tuple[int, int], tuple[int, int]] = {}
        self.default, self.weights = 100, {}
        self.unset = unset
        self.priority: int | None = None if unset else 0  # None: unset
        self.mem: dict[tuple[int, int], int] = {}

    def write(self, name: str, data: bytes) -> None:
        if not data:
            return  # kernfs does not call the handler for an empty write
        if len(data) > PAGE:
            raise Refused(errno.E2BIG)
        text = data.split(b"\0")[0]  # the handlers see a C string
        if name == "gpu.weight":
            w = words(text, 2)
            if not w:
                raise Refused(errno.EINVAL)
            key, val = (w[0] if len(w) == 2 else b"default"), w[-1]
            if key == b"default":
                self.default = weight(val)
                return
            dev = devt(key)
            new = 0 if val == b"default" else weight(val)
            if dev not in self.devices:
                raise Refused(errno.EINVAL)
            if not self.devices[dev]:
                raise Refused(errno.EOPNOTSUPP)
            if new:
                self.weights[dev] = new
            else:
                self.weights.pop(dev, None)
        elif name == "gpu.priority":
            text = text.strip(b" \t\n\r\v\f\xa0")  # strstrip(): isspace()
            if self.unset and text == PRIO_UNSET:  # strcmp(): exactly
                self.priority = None
                return
            v = kstrtoll(text, 32)
            if not -1023 <= v <= 1023:
                raise Refused(errno.ERANGE)
            self.priority = v
        elif name == "gpu.max":
            self._write_max(text)
        else:
            w = words(text, 2)
            if len(w) != 2:
                raise Refused(errno.EINVAL)
            dev, v = devt(w[0]), size(w[1])
            if dev not in self.devices:
                raise Refused(errno.EINVAL)
            self.mem[dev] = v

    def _write_max(self, text: bytes) -> None:
        """gpu_max_write()."""
        w = words(text, 3)
        if not w:
            raise Refused(errno.EINVAL)
        keyed = w[0] == b"default" or b":" in w[0]
        if not keyed or w[0] == b"default":
            self.cap = cap(w[1:] if keyed else w, self.cap)
            return
        dev = devt(w[0])
        if dev not in self.devices:
            raise Refused(errno.EINVAL)
        if len(w) == 2 and w[1] == b"default":
            self.dev_caps.pop(dev, None)
            return
        new = cap(w[1:], self.dev_caps.get(dev, self.cap))
        if not self.caps.get(dev):
            raise Refused(errno.EOPNOTSUPP)
        self.dev_caps[dev] = new

    def render(self, name: str) -> str:
        """The file's text, as gpu.c's show functions print it: devices in
        registration order (the order of @devices)."""
        if name == "gpu.weight":
            return f"default {self.default}\n" + "".join(
                f"{d[0]}:{d[1]} {self.weights[d]}\n" for d in self.devices if d in self.weights)
        if name == "gpu.priority":
            return ("default" if self.priority is None else str(self.priority)) + "\n"
        if name == "gpu.max":
            def line(c: tuple[int, int]) -> str:
                return f"{c[0] or 'max'} {c[1] or PERIOD_DFL}\n"
            return f"default {line(self.cap)}" + "".join(
                f"{d[0]}:{d[1]} {line(self.dev_caps[d])}" for d in self.devices
                if d in self.dev_caps)
        return "".join(f"{d[0]}:{d[1]} " + ("max" if v == U64_MAX else str(v)) + "\n"
                       for d, v in self.read(name).items())  # type: ignore[union-attr]

    def load(self, name: str, text: str) -> None:
        """Take the state @text (a file's canonical text) shows."""
        if not text:
            return
        got = parse_back(name, text)
        if name == "gpu.weight":
            self.default, self.weights = got  # type: ignore[misc]
        elif name == "gpu.priority":
            self.priority = got  # type: ignore[assignment]
        elif name == "gpu.max":
            self.cap, self.dev_caps = got  # type: ignore[misc]
        else:
            self.mem = {d: v for d, v in got.items() if v != U64_MAX}  # type: ignore[union-attr]

    def read(self, name: str) -> object:
        if name == "gpu.weight":
            return (self.default, dict(self.weights))
        if name == "gpu.priority":
            return self.priority
        if name == "gpu.max":  # as the file shows it: a period never set is the default
            def shown(c: tuple[int, int]) -> tuple[int, int]:
                return (c[0], c[1] or PERIOD_DFL)
            return (shown(self.cap), {d: shown(c) for d, c in self.dev_caps.items()})
        return {d: self.mem.get(d, U64_MAX) for d in self.devices}


def parse_back(name: str, text: str) -> object:
    """The canonical forms, read strictly: any other form fails the test."""
    lines = text.splitlines()
    if name == "gpu.weight":
        first, rest = lines[0].split(" "), lines[1:]
        assert first[0] == "default", text
        devs = {}
        for line in rest:
            key, w = line.split(" ")
            maj, mnr = key.split(":")
            devs[(int(maj), int(mnr))] = int(w)
        return (int(first[1]), devs)
    if name == "gpu.priority":
        assert len(lines) == 1
        return None if lines[0] == "default" else int(lines[0])
    if name == "gpu.max":
        def cap_of(mx: str, period: str) -> tuple[int, int]:
            return (0 if mx == "max" else int(mx), int(period))
        key, mx, period = lines[0].split(" ")
        assert key == "default", text
        default, caps = cap_of(mx, period), {}
        for line in lines[1:]:
            key, mx, period = line.split(" ")
            maj, mnr = key.split(":")
            caps[(int(maj), int(mnr))] = cap_of(mx, period)
        return (default, caps)
    out = {}
    for line in lines:
        key, v = line.split(" ")
        maj, mnr = key.split(":")
        out[(int(maj), int(mnr))] = U64_MAX if v == "max" else int(v)
    return out


def value(rng: random.Random, name: str, devs: list[tuple[int, int]]) -> bytes:
    """A write: mostly near the grammar, sometimes anything."""
    def dev() -> str:
        r = rng.random()
        if r < 0.7:
            maj, mnr = rng.choice(devs)
            return f"{maj}:{mnr}"
        return rng.choice(["226:9999", "1:2:3", ":128", "226:", "x:y", "4096:0", "+226:+128",
                           "226:1048576", "99999999999:1", "226", "226:128abc"])

    def number() -> str:
        return rng.choice([str(rng.randint(-20, 20000)), str(rng.randint(-5000, 5000)),
                           "+" + str(rng.randint(0, 200)), "0x10", "1.5", "", "-0", "0100",
                           "99999999999999999999", "-9223372036854775809", "default", "max",
                           str(rng.randint(1, 10000))])

    r = rng.random()
    if r < 0.05:  # anything
        return bytes(rng.randrange(256) for _ in range(rng.randint(1, 40)))
    if r < 0.07:
        return b"1" * rng.choice([4090, 4095, 4096, 4097, 5000])
    sep = rng.choice([" ", "  ", "\t", " \t "])
    end = rng.choice(["", "\n", " ", "\n\n"])
    if name == "gpu.weight":
        form = rng.randrange(5)
        body = [number(), f"default{sep}{number()}", f"{dev()}{sep}{number()}",
                f"{dev()}{sep}default", f"{dev()}{sep}{number()}{sep}{number()}"][form]
    elif name == "gpu.priority":
        body = rng.choice([str(rng.randint(-1100, 1100)), number(), f"{number()}{sep}{number()}"])
    elif name == "gpu.max":
        def us() -> str:
            return rng.choice([str(rng.randint(0, 1200000)), str(rng.randint(900, 1100)),
                               "max", number(), "100000", "1000000", "1000001", "4294967296"])
        key = rng.choice(["", f"default{sep}", f"{dev()}{sep}"])
        body = rng.choice([f"{key}{us()}", f"{key}{us()}{sep}{us()}", f"{dev()}{sep}default",
                           f"{key}{us()}{sep}{us()}{sep}{us()}", key.strip() or "default"])
    else:
        unit = rng.choice(["", "", "K", "m", "G", "t", "P", "KB"])
        body = rng.choice([f"{dev()}{sep}{number()}{unit}", f"{dev()}{sep}max", dev(),
                           f"{dev()}{sep}{rng.randint(0, 1 << 62)}{unit}"])
    out = (rng.choice(["", " ", "\t"]) + body + end).encode()
    return out or b" "  # an empty write never reaches the handler


def table_state(name: str, text: str, devs: dict[tuple[int, int], str]) -> object:
    """The state a file's text shows, in the terms of the table recorded from
    the kernel (tests/host/fixtures/kernel_writes.json): devices named by
    @devs (``{sched}``, ``{nosched}``), others left out, ``max`` for no limit,
    ``default`` for an unset priority."""
    got = parse_back(name, text)
    if name == "gpu.priority":
        return "default" if got is None else got
    if name == "gpu.max":
        (mx, period), per = got  # type: ignore[misc]
        return {"default": [mx or "max", period],
                **{devs[d]: [c[0] or "max", c[1]] for d, c in per.items() if d in devs}}
    if name == "gpu.weight":
        default, per = got  # type: ignore[misc]
        return {"default": default, **{devs[d]: w for d, w in per.items() if d in devs}}
    return {devs[d]: "max" if v == U64_MAX else v
            for d, v in got.items() if d in devs}  # type: ignore[union-attr]
