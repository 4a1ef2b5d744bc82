"""Fuzzed knobs (make test-debug): 100,000 random and grammar-aware writes to
gpu.weight, gpu.priority and gpu.memory.max from four processes, each on
its own cgroup, while buffers are allocated and jobs run there. Every write
is checked against a reference model of the kernel's rules written here
from kernel/cgroup/gpu.c (not from pycgpu's parsers): a rejected write
gives the model's errno and changes nothing, an accepted one reads back in
the kernel's canonical form."""

from __future__ import annotations

import contextlib
import errno
import multiprocessing as mp
import os
import random
from pathlib import Path

import pytest
from clients import JOB_NS

from pycgpu.drm import DrmNode
from pycgpu.simgpu import Load

pytestmark = pytest.mark.debug

WRITES = 100_000
PROCS = 4
U64_MAX = (1 << 64) - 1
PAGE = os.sysconf("SC_PAGE_SIZE")


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


class Model:
    """The knobs of one cgroup as kernel/cgroup/gpu.c keeps them."""

    def __init__(self, devices: dict[tuple[int, int], bool]) -> None:
        self.devices = devices  # key -> schedules
        self.default, self.weights = 100, {}
        self.priority = 0
        self.mem: dict[tuple[int, int], int] = {}

    def write(self, name: str, data: bytes) -> None:
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
            v = kstrtoll(text.strip(b" \t\n\r\v\f\xa0"), 32)  # strstrip(): isspace()
            if not -1023 <= v <= 1023:
                raise Refused(errno.ERANGE)
            self.priority = v
        else:
            w = words(text, 2)
            if len(w) != 2:
                raise Refused(errno.EINVAL)
            dev, v = devt(w[0]), size(w[1])
            if dev not in self.devices:
                raise Refused(errno.EINVAL)
            self.mem[dev] = v

    def read(self, name: str) -> object:
        if name == "gpu.weight":
            return (self.default, dict(self.weights))
        if name == "gpu.priority":
            return self.priority
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
        return int(lines[0])
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
    else:
        unit = rng.choice(["", "", "K", "m", "G", "t", "P", "KB"])
        body = rng.choice([f"{dev()}{sep}{number()}{unit}", f"{dev()}{sep}max", dev(),
                           f"{dev()}{sep}{rng.randint(0, 1 << 62)}{unit}"])
    out = (rng.choice(["", " ", "\t"]) + body + end).encode()
    return out or b" "  # an empty write never reaches the handler


def fuzz(path: str, devices: dict, seed: int, n: int, out) -> None:
    try:
        rng = random.Random(seed)
        model = Model(devices)
        devs = list(devices)
        names = ["gpu.weight", "gpu.priority", "gpu.memory.max"]
        accepted = 0
        for i in range(n):
            name = rng.choice(names)
            data = value(rng, name, devs)
            try:
                model.write(name, data)
                want_err = 0
            except Refused as e:
                want_err = e.code
            fd = os.open(os.path.join(path, name), os.O_WRONLY)
            try:
                os.write(fd, data)
                got_err = 0
            except OSError as e:
                got_err = e.errno or -1
            finally:
                os.close(fd)
            if got_err != want_err:
                out.put(f"write {i} {data!r} to {name}: kernel {errno.errorcode.get(got_err)}, "
                        f"model {errno.errorcode.get(want_err, 'success')}")
                return
            accepted += not got_err
            got = parse_back(name, Path(path, name).read_text())
            if got != model.read(name):
                out.put(f"write {i} {data!r} to {name}: reads back {got}, model {model.read(name)}")
                return
        out.put(f"ok {accepted}")
    except Exception as e:
        out.put(f"error: {e!r}")


def _allocate(card: str, cgroup: str, stop) -> None:
    Path(cgroup, "cgroup.procs").write_text(str(os.getpid()))
    with DrmNode(card) as node:
        while not stop.is_set():
            with contextlib.suppress(OSError):  # a fuzzed limit may refuse it
                node.destroy_dumb(node.create_dumb(64, 64, 32).handle)


def test_fuzzed_writes_match_the_reference_model(cgroup, simgpu_nodes, vgem, vgem_card):
    devices = {}
    for node in simgpu_nodes:
        st = os.stat(node)
        devices[(os.major(st.st_rdev), os.minor(st.st_rdev))] = True
    devices[(vgem.major, vgem.minor)] = False
    groups = []
    for i in range(PROCS):
        g = cgroup.child(f"fz{i}")
        g.create()
        groups.append(g)
    ctx = mp.get_context("fork")
    out, stop = ctx.Queue(), ctx.Event()
    loads = [Load(simgpu_nodes[0], g.path, JOB_NS // 5, depth=2) for g in groups]
    allocs = [ctx.Process(target=_allocate, args=(str(vgem_card), str(g.path), stop))
              for g in groups]
    for p in allocs:
        p.start()
    fuzzers = [ctx.Process(target=fuzz, args=(str(g.path), devices, 1000 + i,
                                              WRITES // PROCS, out))
               for i, g in enumerate(groups)]
    try:
        for p in fuzzers:
            p.start()
        results = [out.get(timeout=1800) for _ in fuzzers]
    finally:
        stop.set()
        for p in fuzzers + allocs:
            p.join(60)
        for load in loads:
            load.stop()
    bad = [r for r in results if not r.startswith("ok ")]
    assert not bad, bad
    accepted = sum(int(r.split()[1]) for r in results)
    assert accepted > WRITES // 10, f"only {accepted} of {WRITES} writes were accepted"
