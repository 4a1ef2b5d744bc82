"""Issue 39, item 5: the exporter under real scrapers, over real sockets on
localhost. A scraper that goes away in the middle of a body is counted in
pycgpu_exporter_connections_dropped_total{reason="disconnected"}, without a
traceback; a connection idle longer than the idle timeout is closed; the
connections served at once are bounded, and one over the bound gets a 503
at once; and after all of it the exporter still serves."""

from __future__ import annotations

import http.client
import socket
import struct
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from test_cli_monitor import env  # noqa: F401  (the fixture: a fake cgroup tree)

from pycgpu.monitoring import exporter as exp
from pycgpu.monitoring import httpd
from pycgpu.monitoring.kernel import KernelSource
from pycgpu.monitoring.view import Monitor

BIG = 32 << 20  # more than the loopback's socket buffers hold


class _Big(exp.Exporter):
    """A scrape of BIG bytes (a node with very many containers)."""

    def scrape(self, openmetrics: bool = False) -> bytes:
        if getattr(self, "big", False):
            return b"#" * BIG
        return super().scrape(openmetrics)


Serve = Callable[..., tuple[int, _Big]]


@pytest.fixture
def serve(env: dict[str, str]) -> Iterator[Serve]:  # noqa: F811
    servers = []

    def start(**limits: float) -> tuple[int, _Big]:
        exporter = _Big(Monitor(KernelSource(Path(env["PYCGPU_CGROUP_ROOT"]))))
        srv, _ = exp.serve(exporter, "127.0.0.1", 0, **limits)
        servers.append(srv)
        return srv.server_port, exporter

    yield start
    for srv in servers:
        srv.shutdown()
        srv.server_close()


def get(port: int, path: str = "/metrics") -> tuple[int, str]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.request("GET", path)
        r = conn.getresponse()
        return r.status, r.read().decode()
    finally:
        conn.close()


def dropped(port: int, reason: str) -> float:
    status, text = get(port)
    assert status == 200
    line = f'pycgpu_exporter_connections_dropped_total{{reason="{reason}"}} '
    (value,) = [x[len(line):] for x in text.splitlines() if x.startswith(line)]
    return float(value)


def wait_for(check: Callable[[], bool], timeout: float = 10) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if check():
            return True
        time.sleep(0.05)
    return check()


def test_a_scraper_gone_mid_body_is_counted_not_printed(serve, capfd):
    port, exporter = serve()
    assert dropped(port, "disconnected") == 0
    exporter.big = True
    for _ in range(2):
        s = socket.create_connection(("127.0.0.1", port))
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        s.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        assert s.recv(1024).startswith(b"HTTP/1.1 200")
        # a scrape timeout: the scraper resets the connection, the body half sent
        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        s.close()
    exporter.big = False
    assert wait_for(lambda: dropped(port, "disconnected") == 2)
    err = capfd.readouterr().err
    assert "Traceback" not in err and "ConnectionResetError" not in err, err
    assert get(port)[0] == 200  # still serving


def test_idle_connections_are_closed_after_the_idle_timeout(serve):
    port, _ = serve(idle_timeout=0.5)
    # a keep-alive connection after its answer, and one that never asks
    kept = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    kept.request("GET", "/metrics")
    r = kept.getresponse()
    r.read()
    assert r.status == 200 and not r.will_close
    silent = socket.create_connection(("127.0.0.1", port), timeout=10)
    t0 = time.monotonic()
    assert silent.recv(1) == b""  # the exporter closed it
    assert 0.3 < time.monotonic() - t0 < 5
    assert kept.sock is not None and kept.sock.recv(1) == b""
    silent.close()
    kept.close()
    assert wait_for(lambda: dropped(port, "idle") >= 2)
    assert get(port)[0] == 200


def test_the_default_idle_timeout_and_bound_are_finite():
    assert 0 < httpd.IDLE_TIMEOUT <= 120
    assert 1 <= httpd.MAX_CONNECTIONS <= 256


def test_connections_over_the_bound_get_a_503_at_once(serve):
    port, _ = serve(max_connections=4, idle_timeout=30)
    threads = threading.active_count()
    idle = [socket.create_connection(("127.0.0.1", port), timeout=10) for _ in range(4)]
    assert wait_for(lambda: threading.active_count() == threads + 4)
    t0 = time.monotonic()
    for _ in range(20):  # each answered in turn, without a thread of its own
        status, body = get(port)
        assert status == 503 and "connections" in body
    assert time.monotonic() - t0 < 5
    assert threading.active_count() == threads + 4
    for s in idle:
        s.close()
    # the exporter keeps serving once the connections are gone
    assert wait_for(lambda: get(port)[0] == 200)
    # (a request while the closed connections' threads were ending counts too)
    assert dropped(port, "over_limit") >= 20


def test_the_docs_state_the_limits_the_code_has():
    from click.testing import CliRunner

    from pycgpu.cli import main

    root = Path(__file__).resolve().parents[2]
    doc = " ".join((root / "docs" / "monitoring.md").read_text().split())
    idle, bound = int(httpd.IDLE_TIMEOUT), httpd.MAX_CONNECTIONS
    assert f"stays silent for **{idle} seconds**" in doc
    assert f"at most **{bound} connections** are served at once" in doc
    text = " ".join(CliRunner().invoke(main, ["exporter", "--help"]).output.split())
    deadline = int(httpd.REQUEST_TIMEOUT)
    assert (f"silent for {idle} s, or whose request is not read in {deadline} s, is closed;"
            f" at most {bound} are served at once") in text
