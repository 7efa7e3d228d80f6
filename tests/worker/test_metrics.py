"""Metrics registry and the HTTP server (real HTTP on loopback): names, removal on revoke, health, and
the server's own logs (JSON lines through the worker's logger)."""

from __future__ import annotations

import json
import logging
import socket
import struct
import time
import urllib.error
import urllib.request
from collections.abc import Iterator

import pytest
from prometheus_client.registry import Collector

from tests.worker.worker_util import samples, value
from worker.logs import configure_logging
from worker.metrics import Health, MetricsServer, WorkerMetrics

REQUIRED = {
    "sgt_prequential_error": "gauge",
    "sgt_prequential_log_loss": "gauge",
    "sgt_prequential_brier": "gauge",
    "sgt_tree_nodes": "gauge",
    "sgt_tree_leaves": "gauge",
    "sgt_tree_depth": "gauge",
    "sgt_records": "counter",
    "sgt_predictions": "counter",
    "sgt_trained": "counter",
    "sgt_invalid_records": "counter",
    "sgt_consumer_lag_records": "gauge",
    "sgt_checkpoint_seconds": "histogram",
    "sgt_last_checkpoint_timestamp_seconds": "gauge",
    "sgt_prediction_latency_seconds": "histogram",
    "sgt_join_pending": "gauge",
    "sgt_join_expired": "counter",
    "sgt_model_bytes": "gauge",
    "sgt_model_version": "gauge",
    "sgt_drifts": "counter",
    "sgt_model_trees": "gauge",
    "sgt_assigned_partitions": "gauge",
    "sgt_rebalances": "counter",
    "sgt_checkpoint_failures": "counter",
    "sgt_build_info": "gauge",
}


def test_every_documented_metric_is_registered_with_its_type() -> None:
    from prometheus_client.parser import text_string_to_metric_families

    families = {f.name: f.type for f in text_string_to_metric_families(WorkerMetrics().render().decode())}
    assert {name: families.get(name) for name in REQUIRED} == REQUIRED


def test_forget_partition_removes_only_that_partitions_series() -> None:
    m = WorkerMetrics()
    for p in ("0", "1"):
        m.records.labels(topic="f", partition=p).inc(2)
        m.prequential_error.labels(partition=p, window="recent").set(0.5)
        m.prequential_log_loss.labels(partition=p, window="cumulative").set(0.7)
        m.prequential_brier.labels(partition=p, window="recent").set(0.4)
        m.join_expired.labels(partition=p, side="labels", reason="age").inc()
        m.tree_nodes.labels(partition=p).set(3)
    m.invalid.labels(topic="f", reason="bad_x").inc()
    m.forget_partition(0, ["f"])
    parsed = samples(m.render().decode())
    assert not [key for key in parsed if ("partition", "0") in key[1]]
    assert value(parsed, "sgt_records_total", topic="f", partition="1") == 2
    assert value(parsed, "sgt_tree_nodes", partition="1") == 3
    assert value(parsed, "sgt_prequential_brier", partition="1", window="recent") == 0.4
    assert value(parsed, "sgt_invalid_records_total", topic="f", reason="bad_x") == 1


def _get(port: int, path: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


@pytest.fixture
def server() -> Iterator[tuple[MetricsServer, Health]]:
    health = Health(stale_after=60)
    srv = MetricsServer(WorkerMetrics(), health, "127.0.0.1", 0).start()
    yield srv, health
    srv.close()


def test_http_endpoints(server: tuple[MetricsServer, Health]) -> None:
    srv, health = server
    status, body = _get(srv.port, "/metrics")
    assert status == 200 and "sgt_build_info{" in body
    assert _get(srv.port, "/healthz")[0] == 200
    assert _get(srv.port, "/readyz")[0] == 503
    health.set_ready(True)
    assert _get(srv.port, "/readyz")[0] == 200
    assert _get(srv.port, "/nope")[0] == 404


def test_a_stalled_loop_is_unhealthy_and_unready() -> None:
    health = Health(stale_after=0.0)
    health.set_ready(True)
    assert not health.alive and not health.ready


class _BrokenCollector(Collector):
    def describe(self) -> list:
        return []  # registering does not collect

    def collect(self) -> list:
        raise RuntimeError("broken collector")


@pytest.fixture
def worker_log() -> Iterator[None]:
    """Restores the worker's logger after a test that configured it."""
    logger = logging.getLogger("worker")
    saved = (list(logger.handlers), logger.level, logger.propagate)
    yield
    logger.handlers[:], logger.level, logger.propagate = saved[0], saved[1], saved[2]


def test_the_server_logs_its_errors_as_json_lines_and_prints_no_traceback(
    worker_log: None, capfd: pytest.CaptureFixture[str]
) -> None:
    """A failing handler, a malformed request and a client that hangs up: the server used to print
    plain-text tracebacks and request lines on stderr."""
    configure_logging("info")  # as `sgt-worker run` does: JSON lines on (the captured) stderr
    metrics = WorkerMetrics()
    metrics.registry.register(_BrokenCollector())
    srv = MetricsServer(metrics, Health(), "127.0.0.1", 0).start()
    try:
        status, body = _get(srv.port, "/metrics")
        assert status == 500 and body == "internal error\n"
        with socket.create_connection(("127.0.0.1", srv.port), timeout=5) as raw:
            raw.sendall(b"BREW /metrics HTTP/1.1\r\n\r\n")
            assert raw.recv(100).startswith(b"HTTP/1.0 501")
        hang_up = socket.create_connection(("127.0.0.1", srv.port), timeout=5)
        hang_up.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        hang_up.close()  # a reset, as from a scraper that timed out
        assert _get(srv.port, "/healthz")[0] == 200  # still serving
        time.sleep(0.5)  # for the reset connection's thread
    finally:
        srv.close()
    err = capfd.readouterr().err
    lines = [json.loads(line) for line in err.splitlines()]  # every line is a JSON object
    by_msg = {line["msg"]: line for line in lines}
    failed = by_msg["metrics request failed"]
    assert failed["level"] == "error" and failed["path"] == "/metrics"
    assert "RuntimeError: broken collector" in failed["exc"]
    refused = by_msg["metrics request refused"]
    assert refused["level"] == "warning" and "Unsupported method ('BREW')" in refused["error"]
    gone = by_msg["metrics client went away"]
    assert gone["level"] == "info" and "Connection reset" in gone["error"]
    assert all(line["logger"] == "worker.http" for line in lines)


def test_the_server_logs_through_the_workers_logger_by_default() -> None:
    srv = MetricsServer(WorkerMetrics(), Health(), "127.0.0.1", 0)
    try:
        assert srv.httpd.log.name == "worker.http"
    finally:
        srv.httpd.server_close()
