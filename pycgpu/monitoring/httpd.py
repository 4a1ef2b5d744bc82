"""The exporter's HTTP server (standard library only): ``GET /metrics`` and
``HEAD /metrics``, with

- content negotiation on ``Accept``: ``application/openmetrics-text`` (as
  Prometheus asks for it first) gets OpenMetrics 1.0.0, anything else the
  Prometheus text format 0.0.4;
- gzip on ``Accept-Encoding: gzip`` (a 2,000-container scrape is ~6 MB of
  text and ~30x smaller gzipped, at level 3 in about 10 ms);
- ``HEAD`` answered with the headers of the GET (status, the negotiated
  Content-Type and Content-Encoding, Vary), without a scrape: the length is
  known only by scraping, so Content-Length is left out, as RFC 9110 allows.

What real scrapers do is expected, and counted in the exporter's
``pycgpu_exporter_connections_dropped_total{reason}`` rather than printed:

- a scraper that goes away before the body is sent (its scrape timeout on
  a big page): ``disconnected``;
- a connection that stays silent for :data:`IDLE_TIMEOUT` seconds (an idle
  keep-alive connection, or one that never asks), whose request is not read
  whole within :data:`REQUEST_TIMEOUT` seconds of its first byte (a client
  sending a byte now and then), or whose reply cannot be sent within the
  idle timeout: closed, ``idle``;
- at most :data:`MAX_CONNECTIONS` connections are served at once, one
  thread each; one more (or one whose thread cannot start) is answered 503
  at once by the accepting thread, without a thread of its own, and closed:
  ``over_limit``. It is closed once its client has read the reply and
  closed, or after :data:`_LINGER` seconds, its request read
  :data:`_DRAIN` bytes a pass meanwhile; at most :data:`MAX_REJECTED` are
  left so, one more is closed at once.
"""

from __future__ import annotations

import gzip
import io
import socket
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .exporter import Exporter

TEXT = "text/plain; version=0.0.4; charset=utf-8"
OPENMETRICS = "application/openmetrics-text; version=1.0.0; charset=utf-8"
GZIP_LEVEL = 3
# OpenMetrics versions whose exposition this exporter writes (1.0.0; 0.0.1
# is the same text as Prometheus asks for it by that name)
_OM_VERSIONS = ("", "1.0.0", "0.0.1")

# a connection silent this long is closed (seconds): Prometheus keeps its
# connection between scrapes, and scrapes every 15 s to 1 min; one that comes
# back later opens a new connection
IDLE_TIMEOUT = 30.0
# a request (its line and headers) is read whole within this many seconds of
# its first byte, or its connection is closed: the idle timeout bounds each
# read, this the whole (a scraper sends its request at once)
REQUEST_TIMEOUT = 10.0
# connections served at once (a thread each): a node has a few scrapers
MAX_CONNECTIONS = 32
# why a connection ended early (the reason label of the exporter's counter)
DISCONNECTED, IDLE, OVER_LIMIT = "disconnected", "idle", "over_limit"
DROP_REASONS = (DISCONNECTED, IDLE, OVER_LIMIT)
# the reply to a connection over the bound
_BUSY = (b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain; charset=utf-8\r\n"
         b"Content-Length: 62\r\nRetry-After: 1\r\nConnection: close\r\n\r\n"
         b"too many connections to this exporter at once; try again soon\n")
# how long a rejected connection may take to read its 503 and close
_LINGER = 2.0
# what is read of a rejected connection's request in one pass, at most
_DRAIN = 65536
# rejected connections left to read their 503 at once; one more is closed at once
MAX_REJECTED = 64


def _quality(params: list[str]) -> float:
    for p in params:
        key, _, value = p.partition("=")
        if key.strip().lower() == "q":
            try:
                return max(0.0, min(1.0, float(value)))
            except ValueError:
                return 0.0
    return 1.0


def _param(params: list[str], name: str) -> str:
    for p in params:
        key, _, value = p.partition("=")
        if key.strip().lower() == name:
            return value.strip().strip('"')
    return ""


def wants_openmetrics(accept: str | None) -> bool:
    """Whether @accept (an ``Accept`` header) prefers OpenMetrics to the
    text format: an ``application/openmetrics-text`` range of a version this
    exporter writes, with a quality above 0 and at least that of any range
    that takes ``text/plain``."""
    if not accept:
        return False
    best_om = best_text = 0.0
    for item in accept.split(","):
        media, *params = item.split(";")
        media = media.strip().lower()
        q = _quality(params)
        if media == "application/openmetrics-text":
            if _param(params, "version") in _OM_VERSIONS:
                best_om = max(best_om, q)
        elif media in ("text/plain", "text/*", "*/*"):
            best_text = max(best_text, q)
    return best_om > 0 and best_om >= best_text


def wants_gzip(accept_encoding: str | None) -> bool:
    """Whether @accept_encoding takes gzip (``gzip`` or ``*``, quality above 0)."""
    gz = star = None
    for item in (accept_encoding or "").split(","):
        coding, *params = item.split(";")
        coding = coding.strip().lower()
        if coding in ("gzip", "x-gzip"):
            gz = _quality(params)
        elif coding == "*":
            star = _quality(params)
    q = gz if gz is not None else star
    return q is not None and q > 0


@dataclass(frozen=True)
class Reply:
    """What a request for /metrics gets: the format and the encoding."""

    openmetrics: bool
    gzip: bool

    @property
    def content_type(self) -> str:
        return OPENMETRICS if self.openmetrics else TEXT


class _Done(Exception):
    """The request is answered (an error was sent)."""


class _Reader(io.RawIOBase):
    """A connection's reads: waiting for a request, each read within
    @idle seconds; once its first bytes came (``deadline`` set), each read
    within what is left of :data:`REQUEST_TIMEOUT` too (TimeoutError past it)."""

    def __init__(self, sock: socket.socket, idle: float | None) -> None:
        super().__init__()
        self.sock, self.idle = sock, idle
        self.deadline: float | None = None

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        if self.deadline is None:
            self.sock.settimeout(self.idle)
            n = self.sock.recv_into(buffer)
            self.deadline = time.monotonic() + REQUEST_TIMEOUT
            return n
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("the request was not read whole in time")
        self.sock.settimeout(left if self.idle is None else min(left, self.idle))
        return self.sock.recv_into(buffer)


class _Handler(BaseHTTPRequestHandler):
    exporter: Exporter
    protocol_version = "HTTP/1.1"  # Prometheus keeps its connection open

    def setup(self) -> None:
        super().setup()
        self._reader = _Reader(self.connection, self.timeout)
        self.rfile = io.BufferedReader(self._reader)

    def parse_request(self) -> bool:
        try:
            return super().parse_request()  # reads the headers
        finally:  # the request is read: the reply is sent within the idle timeout
            self._reader.deadline = None
            self.connection.settimeout(self.timeout)

    def _reply(self) -> Reply | None:
        """The Reply for /metrics; None for / (a link); a 404 for the rest."""
        path = self.path.split("?", 1)[0]
        if path not in ("/metrics", "/"):
            self.send_error(404, "try /metrics")
            raise _Done
        if path == "/":
            return None
        return Reply(wants_openmetrics(self.headers.get("Accept")),
                     wants_gzip(self.headers.get("Accept-Encoding")))

    def _headers(self, reply: Reply | None, length: int | None) -> None:
        self.send_response(200)
        if reply is None:
            self.send_header("Content-Type", "text/html; charset=utf-8")
        else:
            self.send_header("Content-Type", reply.content_type)
            self.send_header("Vary", "Accept, Accept-Encoding")
            if reply.gzip:
                self.send_header("Content-Encoding", "gzip")
        if length is not None:
            self.send_header("Content-Length", str(length))
        self.end_headers()

    def do_GET(self) -> None:
        try:
            reply = self._reply()
        except _Done:
            return
        if reply is None:
            body = b'<a href="/metrics">/metrics</a>\n'
        else:
            body = self.exporter.scrape(openmetrics=reply.openmetrics)
            if reply.gzip:
                body = gzip.compress(body, compresslevel=GZIP_LEVEL, mtime=0)
        self._headers(reply, len(body))
        self.wfile.write(body)

    def do_HEAD(self) -> None:
        try:
            reply = self._reply()
        except _Done:
            return
        self._headers(reply, None)

    def handle_one_request(self) -> None:
        self._reader.deadline = None  # a new request: its deadline starts with its first bytes
        try:
            super().handle_one_request()
        except ConnectionError:  # the scraper went away (reset, broken pipe)
            self.exporter.dropped(DISCONNECTED)
            self.close_connection = True

    def log_error(self, format: str, *args: Any) -> None:
        # the server's one report of a connection it closed because it timed out
        if args and isinstance(args[0], TimeoutError):
            self.exporter.dropped(IDLE)

    def log_message(self, format: str, *args: object) -> None:
        pass  # no line per scrape


class _Server(ThreadingHTTPServer):
    """At most @max_connections handled at once, a thread each; one more
    gets :data:`_BUSY` from the accepting thread and is closed once it has
    read it (or after :data:`_LINGER` seconds)."""

    daemon_threads = True

    def __init__(self, address: tuple[str, int], handler: type[_Handler], exporter: Exporter,
                 max_connections: int = MAX_CONNECTIONS) -> None:
        self.exporter = exporter
        self.max_connections = max_connections
        self._lock = threading.Lock()
        self._active = 0
        self._rejected: list[tuple[socket.socket, float]] = []
        super().__init__(address, handler)

    def process_request(self, request: Any, client_address: Any) -> None:
        with self._lock:
            over = self._active >= self.max_connections
            if not over:
                self._active += 1
        if not over:
            try:
                super().process_request(request, client_address)
                return
            except RuntimeError:  # its thread cannot start: answered as one over the bound
                with self._lock:
                    self._active -= 1
        self.exporter.dropped(OVER_LIMIT)
        try:
            request.setblocking(False)
            request.send(_BUSY)  # a few bytes: into the socket's buffer, at once
            request.shutdown(socket.SHUT_WR)
        except OSError:
            self.shutdown_request(request)
            return
        # closed once the client has read the reply and closed its side: a
        # close with its request unread would reset the connection, the 503
        # possibly unread
        if len(self._rejected) >= MAX_REJECTED:
            self.shutdown_request(request)
            return
        self._rejected.append((request, time.monotonic() + _LINGER))

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            with self._lock:
                self._active -= 1

    def service_actions(self) -> None:
        """Between two accepts (and twice a second): close the rejected
        connections whose client closed, or whose time is up."""
        super().service_actions()
        now, keep = time.monotonic(), []
        for sock, deadline in self._rejected:
            try:  # its request, unread: a bounded part a pass (a client may never stop)
                done = not sock.recv(_DRAIN)  # b"": the client closed its side
            except BlockingIOError:
                done = False
            except OSError:
                done = True
            if done or now >= deadline:
                sock.close()
            else:
                keep.append((sock, deadline))
        self._rejected = keep

    def handle_error(self, request: Any, client_address: Any) -> None:
        import sys

        if isinstance(sys.exc_info()[1], ConnectionError):  # in setup or finish
            self.exporter.dropped(DISCONNECTED)
            return
        super().handle_error(request, client_address)

    def server_close(self) -> None:
        super().server_close()
        for sock, _ in self._rejected:
            sock.close()
        self._rejected = []


class _Server6(_Server):
    address_family = socket.AF_INET6


def serve(exporter: Exporter, host: str, port: int, idle_timeout: float = IDLE_TIMEOUT,
          max_connections: int = MAX_CONNECTIONS) -> tuple[ThreadingHTTPServer,
                                                           threading.Thread]:
    """Serve @exporter on http://HOST:PORT/metrics from a daemon thread; port
    0 picks a free port (``server.server_port`` tells which). A connection
    silent for @idle_timeout seconds, or whose request is not read whole
    within :data:`REQUEST_TIMEOUT` seconds, is closed; at most
    @max_connections are served at once (the module docstring)."""
    handler = type("Handler", (_Handler,), {"exporter": exporter, "timeout": idle_timeout})
    server_class = _Server6 if ":" in host else _Server
    server = server_class((host, port), handler, exporter, max_connections)
    thread = threading.Thread(target=server.serve_forever, name="pycgpu-exporter",
                              daemon=True)
    thread.start()
    return server, thread
