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
"""

from __future__ import annotations

import gzip
import socket
import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .exporter import Exporter

TEXT = "text/plain; version=0.0.4; charset=utf-8"
OPENMETRICS = "application/openmetrics-text; version=1.0.0; charset=utf-8"
GZIP_LEVEL = 3
# OpenMetrics versions whose exposition this exporter writes (1.0.0; 0.0.1
# is the same text as Prometheus asks for it by that name)
_OM_VERSIONS = ("", "1.0.0", "0.0.1")


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


class _Handler(BaseHTTPRequestHandler):
    exporter: Exporter
    protocol_version = "HTTP/1.1"  # Prometheus keeps its connection open

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

    def log_message(self, format: str, *args: object) -> None:
        pass  # no line per scrape


class _Server(ThreadingHTTPServer):
    daemon_threads = True


class _Server6(_Server):
    address_family = socket.AF_INET6


def serve(exporter: Exporter, host: str, port: int) -> tuple[ThreadingHTTPServer,
                                                            threading.Thread]:
    """Serve @exporter on http://HOST:PORT/metrics from a daemon thread; port
    0 picks a free port (``server.server_port`` tells which)."""
    handler = type("Handler", (_Handler,), {"exporter": exporter})
    server_class = _Server6 if ":" in host else _Server
    server = server_class((host, port), handler)
    thread = threading.Thread(target=server.serve_forever, name="pycgpu-exporter",
                              daemon=True)
    thread.start()
    return server, thread
