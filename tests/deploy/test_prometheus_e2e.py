"""End to end: a real Prometheus scrapes a live ``sgt-worker run``, and the dashboard and rules run on it.

The worker consumes from the session's test broker while ``sgt-worker produce`` feeds it the demo
stream (labels on their own topic) and a few unusable records go to the dead-letter path. Prometheus
runs the shipped configuration, pointed at the worker's loopback port, scraping and evaluating every
second. Through Prometheus's HTTP API every query of the Grafana dashboard, with its variables
substituted as Grafana would, must parse and return data, both as an instant and as a range query,
and must read only metrics the worker exports; every alert and threshold expression must parse, and
every loaded rule must evaluate without error.
"""

from __future__ import annotations

import contextlib
import re
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.deploy.deploy_files import (
    DASHBOARD,
    GRAFANA_INTERVALS,
    HEALTH_PATH,
    READY_PATH,
    WORKER_JOB,
    alert_rules,
    dashboard_queries,
    grafana_substitute,
    load_json,
    metric_names,
    threshold_rules,
)
from tests.deploy.prometheus_server import PrometheusError, PrometheusServer, free_port
from tests.kafka_util import produce_records

PARTITIONS = 2
DATA_TIMEOUT_S = 120.0
SGT_WORKER = str(Path(sys.executable).with_name("sgt-worker"))
BAD_FEATURES = [
    (b"bad-1", b"this is not json"),
    (b"bad-2", b"[1, 2, 3]"),
    (b"bad-3", b'{"x": "not an object"}'),
]
BAD_LABELS = [(b"bad-4", b"{broken")]

pytestmark = pytest.mark.kafka


def _get(url: str) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=5) as answer:
            return answer.status, answer.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()
    except (urllib.error.URLError, ConnectionError):
        return 0, b""


def _wait(predicate: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.25)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")


def _tail(path: Path, lines: int = 30) -> str:
    return "\n".join(path.read_text(errors="replace").splitlines()[-lines:]) if path.exists() else ""


@contextlib.contextmanager
def _process(args: list[str], log_path: Path) -> Iterator[subprocess.Popen[bytes]]:
    """A subprocess logging to ``log_path``; SIGTERM on exit, SIGKILL if it does not stop in time."""
    with log_path.open("wb") as log:
        process = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT)
    try:
        yield process
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(60)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(10)


def _exported_metrics(metrics_url: str) -> set[str]:
    """Names of the metrics in the worker's exposition (histogram series folded to their metric)."""
    status, body = _get(metrics_url)
    assert status == 200
    samples = re.findall(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)", body.decode(), flags=re.MULTILINE)
    return {name for sample in samples for name in metric_names(sample)}


# panels of a regression worker with interval_coverage: they must parse, but this classification
# worker has no data for them
REGRESSION_ONLY = ("Interval coverage", "Interval width")


def _panels_without_data(prometheus: PrometheusServer, partitions: list[str]) -> dict[str, str]:
    """``{panel / refId: what is wrong}`` for every dashboard query that fails or returns nothing."""
    missing = {}
    for title, expr in dashboard_queries(load_json(DASHBOARD)):
        query = grafana_substitute(expr, partitions)
        if title.startswith(REGRESSION_ONLY):
            prometheus.query(query)  # raises PrometheusError if it does not parse or evaluate
            continue
        try:
            if not prometheus.query(query):
                missing[title] = f"no data: {query}"
            elif not prometheus.query_range(query, 30, GRAFANA_INTERVALS["__interval"]):
                missing[title] = f"no data over the last 30 s: {query}"
        except PrometheusError as error:
            missing[title] = f"{error}: {query}"
    return missing


def test_dashboard_and_rules_run_on_a_live_worker(
    kafka_bootstrap: str, topic_factory: Callable[..., dict[str, str]], prometheus_binary: str, tmp_path: Path
) -> None:
    topics = topic_factory(PARTITIONS, "features", "labels", "predictions", "dead-letters")
    metrics_port = free_port()
    worker_args = [
        SGT_WORKER,
        "run",
        *("--bootstrap-servers", kafka_bootstrap, "--group-id", f"e2e-{topics['features']}"),
        *("--features-topic", topics["features"], "--labels-topic", topics["labels"]),
        *("--predictions-topic", topics["predictions"], "--dead-letter-topic", topics["dead-letters"]),
        *("--checkpoint-dir", str(tmp_path / "checkpoints"), "--checkpoint-seconds", "1"),
        *("--metrics-host", "127.0.0.1", "--metrics-port", str(metrics_port)),
        *("--session-timeout-ms", "6000", "--heartbeat-interval-ms", "1000"),
        *("--warm-up", "100", "--grace-period", "50"),
        *("--explain", "2"),  # predictions explained, the feature importance gauges exported
    ]
    producer_args = [
        SGT_WORKER,
        "produce",
        *("--bootstrap-servers", kafka_bootstrap, "--partitions", str(PARTITIONS)),
        *("--features-topic", topics["features"], "--labels-topic", topics["labels"]),
        *("--stream", "sea", "--rate", "200", "--label-delay", "0.5", "--duration", "300"),
    ]
    worker_url = f"http://127.0.0.1:{metrics_port}"
    worker_log = tmp_path / "worker.log"
    with (
        _process(worker_args, worker_log) as worker,
        _process(producer_args, tmp_path / "producer.log"),
    ):
        _wait(lambda: _get(worker_url + READY_PATH)[0] == 200 or worker.poll() is not None, 90, "/readyz")
        assert worker.poll() is None, _tail(worker_log)
        assert _get(worker_url + HEALTH_PATH)[0] == 200
        produce_records(kafka_bootstrap, topics["features"], BAD_FEATURES)
        produce_records(kafka_bootstrap, topics["labels"], BAD_LABELS)

        (tmp_path / "prometheus").mkdir()
        prometheus = PrometheusServer.start(
            prometheus_binary, [f"127.0.0.1:{metrics_port}"], tmp_path / "prometheus"
        )
        try:
            prometheus.wait_ready()
            partitions: list[str] = []

            def partitions_listed() -> bool:
                partitions[:] = prometheus.api("label/partition/values", **{"match[]": "sgt_tree_nodes"})
                return len(partitions) == PARTITIONS

            _wait(partitions_listed, DATA_TIMEOUT_S, "the partition variable's values")
            assert sorted(partitions) == [str(p) for p in range(PARTITIONS)]

            missing: dict[str, str] = {}

            def every_panel_has_data() -> bool:
                missing.clear()
                missing.update(_panels_without_data(prometheus, partitions))
                return not missing

            with contextlib.suppress(AssertionError):
                _wait(every_panel_has_data, DATA_TIMEOUT_S, "data in every panel")
            assert not missing, "\n".join(f"{k}: {v}" for k, v in missing.items()) + "\n" + _tail(worker_log)

            exported = _exported_metrics(worker_url + "/metrics")
            for title, expr in dashboard_queries(load_json(DASHBOARD)):
                if not title.startswith(REGRESSION_ONLY):  # (no series on a classification worker)
                    assert metric_names(expr) - {"up"} <= exported, title

            for rule in [*alert_rules(), *threshold_rules()]:
                prometheus.query(rule["expr"])  # raises PrometheusError if it does not parse or evaluate
            _assert_rules_evaluate(prometheus)
            # a healthy, scraped worker: the worker-health alerts' conditions are false (retried, as
            # one scrape of a busy machine may miss its 1 s timeout)
            health_rules = [
                r["expr"] for r in alert_rules() if r["alert"] in ("SgtWorkerDown", "SgtNoWorkerUp")
            ]
            assert len(health_rules) == 2

            def worker_seen_healthy() -> bool:
                up = [s["value"][1] for s in prometheus.query(f'up{{job="{WORKER_JOB}"}}')]
                return up == ["1"] and all(prometheus.query(expr) == [] for expr in health_rules)

            _wait(worker_seen_healthy, 30, "up == 1 and quiet worker-health alert conditions")
        finally:
            prometheus.stop()
        worker.send_signal(signal.SIGTERM)
        assert worker.wait(60) == 0, _tail(worker_log)


def _assert_rules_evaluate(prometheus: PrometheusServer) -> None:
    """Every loaded rule has been evaluated at least once, without error."""
    expected = {r["alert"] for r in alert_rules()} | {r["record"] for r in threshold_rules()}

    def rules() -> list[dict[str, object]]:
        return [rule for group in prometheus.api("rules")["groups"] for rule in group["rules"]]

    def all_evaluated() -> bool:
        return all(rule["health"] != "unknown" for rule in rules())

    _wait(all_evaluated, 30, "every rule to be evaluated")
    loaded = rules()
    assert {str(rule["name"]) for rule in loaded} == expected
    unhealthy = {rule["name"]: rule.get("lastError") for rule in loaded if rule["health"] != "ok"}
    assert not unhealthy, unhealthy
