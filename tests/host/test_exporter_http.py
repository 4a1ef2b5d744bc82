"""The exporter over HTTP: OpenMetrics when asked for (as Prometheus asks),
the text format otherwise, gzip when accepted, HEAD answered like GET
without a body; and the negotiation rules on their own."""

from __future__ import annotations

import gzip
import http.client
from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client.openmetrics.parser import (
    text_string_to_metric_families as openmetrics_families,
)
from prometheus_client.parser import text_string_to_metric_families as text_families
from test_cli_monitor import TRAIN, env  # noqa: F401  (the fixture: a fake cgroup tree)

from pycgpu.monitoring import exporter as exp
from pycgpu.monitoring.httpd import OPENMETRICS, TEXT, wants_gzip, wants_openmetrics
from pycgpu.monitoring.kernel import KernelSource
from pycgpu.monitoring.view import Monitor

# what Prometheus 2.x/3.x sends (scrape_protocols default)
PROMETHEUS_ACCEPT = ("application/openmetrics-text;version=1.0.0,application/openmetrics-text;"
                     "version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1")


@pytest.fixture
def server(env: dict[str, str]) -> Iterator[int]:  # noqa: F811
    monitor = Monitor(KernelSource(Path(env["PYCGPU_CGROUP_ROOT"])))
    srv, _ = exp.serve(exp.Exporter(monitor), "127.0.0.1", 0)
    try:
        yield srv.server_port
    finally:
        srv.shutdown()
        srv.server_close()


def request(port: int, method: str = "GET", path: str = "/metrics",
            **headers: str) -> tuple[http.client.HTTPResponse, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.request(method, path, headers={k.replace("_", "-"): v for k, v in headers.items()})
        r = conn.getresponse()
        return r, r.read()
    finally:
        conn.close()


def test_the_text_format_by_default(server: int) -> None:
    r, body = request(server)
    assert r.status == 200
    assert r.headers["Content-Type"] == TEXT == exp.CONTENT_TYPE
    assert r.headers["Content-Encoding"] is None
    assert int(r.headers["Content-Length"]) == len(body)
    text = body.decode()
    assert "# EOF" not in text
    names = {f.name for f in text_families(text)}
    assert "pycgpu_gpu_time_seconds" in names  # the parser drops _total from counters


def test_openmetrics_when_prometheus_asks(server: int) -> None:
    r, body = request(server, Accept=PROMETHEUS_ACCEPT)
    assert r.status == 200
    assert r.headers["Content-Type"] == OPENMETRICS
    assert "Accept" in r.headers["Vary"]
    text = body.decode()
    assert text.endswith("# EOF\n")
    assert "# TYPE pycgpu_gpu_time_seconds counter\n" in text
    assert "# TYPE pycgpu_gpu_time_seconds_total" not in text
    # Prometheus' own OpenMetrics parser reads it all (it refuses a missing
    # # EOF, a counter family named _total, an unescaped quote in HELP)
    families = {f.name: f for f in openmetrics_families(text)}
    time_ = families["pycgpu_gpu_time_seconds"]
    assert time_.type == "counter"
    sample = next(s for s in time_.samples if s.labels["cgroup"] == TRAIN)
    assert sample.name == "pycgpu_gpu_time_seconds_total" and sample.value == 4.0
    counters = [f for f in families.values() if f.type == "counter"]
    assert len(counters) >= 3
    assert all(not f.name.endswith("_total") for f in counters)
    assert all(s.name.endswith("_total") for f in counters for s in f.samples)
    assert families["pycgpu_gpu_memory_bytes"].type == "gauge"


def test_the_same_samples_in_both_formats(server: int) -> None:
    _, text = request(server)
    _, om = request(server, Accept="application/openmetrics-text")
    strip = [line for line in text.decode().splitlines() if not line.startswith("#")]
    om_lines = [line for line in om.decode().splitlines() if not line.startswith("#")]
    drop = ("pycgpu_exporter_scrape_duration_seconds",)
    assert [x for x in strip if not x.startswith(drop)] == [
        x for x in om_lines if not x.startswith(drop)]


def test_gzip_when_accepted(server: int) -> None:
    _, plain = request(server)
    r, body = request(server, Accept_Encoding="gzip, deflate")
    assert r.headers["Content-Encoding"] == "gzip"
    assert "Accept-Encoding" in r.headers["Vary"]
    assert int(r.headers["Content-Length"]) == len(body)
    text = gzip.decompress(body)
    assert text.splitlines()[:3] == plain.splitlines()[:3]
    r, body = request(server, Accept_Encoding="gzip;q=0, identity")
    assert r.headers["Content-Encoding"] is None and body.startswith(b"# HELP")


def test_gzip_and_openmetrics_together(server: int) -> None:
    r, body = request(server, Accept=PROMETHEUS_ACCEPT, Accept_Encoding="gzip")
    assert r.headers["Content-Type"] == OPENMETRICS
    assert r.headers["Content-Encoding"] == "gzip"
    assert gzip.decompress(body).endswith(b"# EOF\n")


def test_head_answers_like_get_without_a_body(server: int) -> None:
    r, body = request(server, "HEAD")
    assert r.status == 200 and body == b""
    assert r.headers["Content-Type"] == TEXT
    r, _ = request(server, "HEAD", Accept=PROMETHEUS_ACCEPT, Accept_Encoding="gzip")
    assert r.status == 200
    assert r.headers["Content-Type"] == OPENMETRICS
    assert r.headers["Content-Encoding"] == "gzip"
    r, _ = request(server, "HEAD", "/")
    assert r.status == 200 and r.headers["Content-Type"].startswith("text/html")
    r, _ = request(server, "HEAD", "/nothing")
    assert r.status == 404


def test_other_paths_are_404(server: int) -> None:
    r, _ = request(server, path="/metricsx")
    assert r.status == 404
    r, body = request(server, path="/")
    assert r.status == 200 and b"/metrics" in body


@pytest.mark.parametrize(("accept", "openmetrics"), [
    (None, False),
    ("", False),
    ("*/*", False),
    ("text/plain", False),
    ("application/openmetrics-text", True),
    ("application/openmetrics-text; version=1.0.0", True),
    ("application/openmetrics-text;version=0.0.1", True),
    (PROMETHEUS_ACCEPT, True),
    # a version this exporter does not write
    ("application/openmetrics-text;version=2.0.0", False),
    ("application/openmetrics-text;version=2.0.0,text/plain;q=0.5", False),
    # refused, or preferred less than the text format
    ("application/openmetrics-text;q=0", False),
    ("text/plain;version=0.0.4,application/openmetrics-text;q=0.5", False),
    ("APPLICATION/OpenMetrics-Text ; q=0.9 , text/plain;q=0.5", True),
    ("application/openmetrics-text;q=bad", False),
])
def test_wants_openmetrics(accept: str | None, openmetrics: bool) -> None:
    assert wants_openmetrics(accept) is openmetrics


@pytest.mark.parametrize(("encoding", "gz"), [
    (None, False), ("", False), ("identity", False), ("gzip", True), ("GZIP", True),
    ("deflate, gzip;q=0.5", True), ("gzip;q=0", False), ("*", True), ("*;q=0", False),
    ("gzip;q=0, *", False), ("x-gzip", True), ("br", False),
])
def test_wants_gzip(encoding: str | None, gz: bool) -> None:
    assert wants_gzip(encoding) is gz


def test_openmetrics_help_escapes_quotes() -> None:
    """pycgpu_scrape_errors_total's HELP holds a quote: OpenMetrics escapes it."""
    out = exp._Out()
    out.add("pycgpu_scrape_errors_total", 'cgroup=""', 2)
    text = out.text(openmetrics=True)
    assert '(cgroup \\"\\": errors' in text
    (family,) = openmetrics_families(text)
    assert family.name == "pycgpu_scrape_errors" and family.samples[0].value == 2
    assert '(cgroup "": errors' in out.text()  # the text format does not escape quotes
