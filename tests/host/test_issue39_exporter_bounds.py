"""Issue 39, item 5, after review: the exporter's bounds hold against
clients that keep sending. A request must be read whole within the request
deadline (a header byte now and then does not hold a connection forever);
a connection answered 503 is read a bounded amount per pass and closed at
its time even while its client keeps sending; the connections left to read
their 503 are bounded; and a connection whose thread cannot start gives
its slot back. Over real sockets on localhost."""

from __future__ import annotations

import http.client
import select
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from test_cli_monitor import env  # noqa: F401  (the fixture: a fake cgroup tree)
from test_issue39_cli_exporter import dropped, get, wait_for

from pycgpu.monitoring import exporter as exp
from pycgpu.monitoring import httpd
from pycgpu.monitoring.kernel import KernelSource
from pycgpu.monitoring.view import Monitor


@pytest.fixture
def server(env: dict[str, str]) -> Iterator[object]:  # noqa: F811
    """A started server factory: serve(**limits) -> the server."""
    servers = []

    def start(**limits: float) -> httpd.ThreadingHTTPServer:
        exporter = exp.Exporter(Monitor(KernelSource(Path(env["PYCGPU_CGROUP_ROOT"]))))
        srv, _ = exp.serve(exporter, "127.0.0.1", 0, **limits)
        servers.append(srv)
        return srv

    yield start
    for srv in servers:
        srv.shutdown()
        srv.server_close()


def _closed(s: socket.socket) -> bool:
    """Whether the server closed @s (at once, without waiting)."""
    if not select.select([s], [], [], 0)[0]:
        return False
    try:
        return s.recv(4096) == b""
    except ConnectionError:
        return True


def test_a_request_sent_a_byte_at_a_time_is_closed_at_the_request_deadline(server, monkeypatch):
    """Each byte within the idle timeout, the whole request never: closed
    once the request deadline is past, counted as idle."""
    monkeypatch.setattr(httpd, "REQUEST_TIMEOUT", 1.0, raising=False)
    srv = server(idle_timeout=0.8)
    port = srv.server_port
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    t0 = time.monotonic()
    request = b"GET /metrics HTTP/1.1\r\nX-Slow: " + b"a" * 1000
    closed = False
    for byte in request:
        try:
            s.send(bytes([byte]))
        except ConnectionError:
            closed = True
        if closed or _closed(s):
            closed = True
            break
        if time.monotonic() - t0 > 5:
            break
        time.sleep(0.2)
    elapsed = time.monotonic() - t0
    s.close()
    assert closed, "a request trickled byte by byte held its connection"
    assert 0.8 < elapsed < 4
    assert wait_for(lambda: dropped(port, "idle") >= 1)
    assert get(port)[0] == 200


def test_the_gap_between_two_requests_is_the_idle_timeout_not_the_deadline(server,
                                                                          monkeypatch):
    monkeypatch.setattr(httpd, "REQUEST_TIMEOUT", 0.5, raising=False)
    srv = server(idle_timeout=3)
    conn = http.client.HTTPConnection("127.0.0.1", srv.server_port, timeout=10)
    for _ in range(2):
        conn.request("GET", "/metrics")
        r = conn.getresponse()
        r.read()
        assert r.status == 200
        time.sleep(1)  # longer than the deadline, within the idle timeout
    conn.close()


def test_a_request_in_pieces_within_the_deadline_is_answered(server, monkeypatch):
    monkeypatch.setattr(httpd, "REQUEST_TIMEOUT", 2.0, raising=False)
    srv = server(idle_timeout=1)
    s = socket.create_connection(("127.0.0.1", srv.server_port), timeout=10)
    for piece in (b"GET /metrics HTTP/1.1\r\n", b"Host: x\r\n", b"Connection: close\r\n\r\n"):
        s.sendall(piece)
        time.sleep(0.2)
    assert s.recv(64).startswith(b"HTTP/1.1 200")
    s.close()


class _Endless(socket.socket):
    """A connection whose client keeps sending, faster than it is read."""

    def recv(self, n: int, flags: int = 0) -> bytes:
        return b"x" * min(n, 65536)


def test_a_503_connection_whose_client_keeps_sending_is_closed_at_its_time(env):  # noqa: F811
    """service_actions reads a bounded amount per pass and checks the time
    every pass: it returns, and closes the connection whose time is up."""
    exporter = exp.Exporter(Monitor(KernelSource(Path(env["PYCGPU_CGROUP_ROOT"]))))
    handler = type("Handler", (httpd._Handler,), {"exporter": exporter, "timeout": 30})
    srv = httpd._Server(("127.0.0.1", 0), handler, exporter)  # not serving: no other pass
    a, b = socket.socketpair()
    endless = _Endless(fileno=a.detach())
    endless.setblocking(False)
    srv._rejected.append((endless, time.monotonic() + 60))
    try:
        one = threading.Thread(target=srv.service_actions, daemon=True)
        one.start()
        one.join(3)
        assert not one.is_alive(), "one pass never ends while the client sends"
        assert endless.fileno() != -1  # its time is not up
        srv._rejected = [(endless, time.monotonic() - 1)]
        srv.service_actions()
        assert endless.fileno() == -1 and srv._rejected == []
    finally:
        endless.close()
        b.close()
        srv.server_close()


def test_the_connections_left_to_read_their_503_are_bounded(server, monkeypatch):
    """Clients that neither read their 503 nor close: at most MAX_REJECTED
    are left to linger, the others are closed at once."""
    monkeypatch.setattr(httpd, "_LINGER", 30.0)
    monkeypatch.setattr(httpd, "MAX_REJECTED", 4, raising=False)
    srv = server(max_connections=1, idle_timeout=30)
    port = srv.server_port
    busy = socket.create_connection(("127.0.0.1", port), timeout=10)
    assert wait_for(lambda: srv._active == 1)
    rejected = []
    try:
        for _ in range(10):
            s = socket.create_connection(("127.0.0.1", port), timeout=10)
            rejected.append(s)
            assert select.select([s], [], [], 10)[0]  # its 503 came
        assert len(srv._rejected) <= 4
    finally:
        for s in rejected:
            s.close()
        busy.close()


def test_a_thread_that_cannot_start_gives_its_slot_back(server, monkeypatch, capfd):
    """Answered 503 as one over the bound (not a traceback and a reset),
    and its slot is free again: the next connection is served."""
    srv = server(max_connections=1, idle_timeout=30)
    port = srv.server_port
    real = threading.Thread.start

    def start(self: threading.Thread) -> None:
        if getattr(getattr(self, "_target", None), "__name__", "") == "process_request_thread":
            raise RuntimeError("can't start new thread")
        real(self)

    monkeypatch.setattr(threading.Thread, "start", start)
    assert get(port)[0] == 503
    monkeypatch.undo()
    assert get(port)[0] == 200
    assert "Traceback" not in capfd.readouterr().err


def test_the_docs_state_the_request_deadline_and_bounds_the_code_has():
    root = Path(__file__).resolve().parents[2]
    doc = " ".join((root / "docs" / "monitoring.md").read_text().split())
    assert f"not read whole within **{int(httpd.REQUEST_TIMEOUT)} seconds**" in doc
    assert f"after {int(httpd._LINGER)} seconds however much it sends" in doc
    assert f"at most {httpd.MAX_REJECTED} are left to read their answer" in doc
