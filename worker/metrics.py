"""Prometheus metrics of one worker process, in their own registry, plus the HTTP server for them.

The names, types and labels are those of docs/operations.md (a test keeps them equal). Per-partition
series are removed when the partition is revoked or lost, so that ``sum()`` over the workers of a group
never counts a partition twice. The server answers ``/metrics``, ``/healthz`` (the processing loop
turned recently) and ``/readyz`` (joined the group and serving). It logs through the worker's logger
(JSON lines): a failing handler answers 500 and logs the error, and nothing, not even a client that
hangs up, prints a traceback of its own on stderr.

>>> m = WorkerMetrics()
>>> m.records.labels(topic="features", partition="0").inc(3)
>>> m.forget_partition(0, ["features"])
>>> b"sgt_records_total{" in m.render()
False
"""

from __future__ import annotations

import contextlib
import logging
import platform
import sys
import threading
import time
from collections.abc import Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.core import HistogramMetricFamily
from prometheus_client.exposition import CONTENT_TYPE_LATEST
from prometheus_client.registry import Collector

from worker import __version__
from worker.core.partition_state import PartitionState
from worker.logs import fields

# fine between 10 and 100 ms, where a healthy worker's p99 lies, so histogram_quantile is close there
_LATENCY_BUCKETS = (
    0.001, 0.0025, 0.005, 0.01, 0.015, 0.02, 0.03, 0.04, 0.05, 0.06, 0.075, 0.1, 0.15, 0.25, 0.5,
    1.0, 2.5, 5.0, 10.0, 30.0,
)  # fmt: skip
_CHECKPOINT_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)


class WorkerMetrics:
    """Every metric the worker exports, registered in a private :class:`CollectorRegistry`."""

    def __init__(self) -> None:
        r = self.registry = CollectorRegistry(auto_describe=True)
        self.prequential_error = Gauge(
            "sgt_prequential_error",
            "Prequential error: error rate (classification) or mean absolute error (regression).",
            ["partition", "window"],
            registry=r,
        )
        self.prequential_log_loss = Gauge(
            "sgt_prequential_log_loss",
            "Classification: mean log loss of the published probability of the true class.",
            ["partition", "window"],
            registry=r,
        )
        self.prequential_brier = Gauge(
            "sgt_prequential_brier",
            "Classification: mean Brier score (sum over classes of the squared probability error, 0 to 2).",
            ["partition", "window"],
            registry=r,
        )
        self.interval_coverage = Gauge(
            "sgt_interval_coverage",
            "Regression with interval_coverage: share of labelled records inside their published interval.",
            ["partition", "window"],
            registry=r,
        )
        self.interval_width = Gauge(
            "sgt_interval_width",
            "Regression with interval_coverage: mean width of the published intervals of labelled records.",
            ["partition", "window"],
            registry=r,
        )
        self.feature_importance = Gauge(
            "sgt_feature_importance",
            "With explain on: the model's importance of each of its top features (sums to 1 over all).",
            ["partition", "feature"],
            registry=r,
        )
        self._importance_labels: dict[str, set[str]] = {}  # partition -> features with a series
        self.tree_nodes = Gauge(
            "sgt_tree_nodes", "Nodes in the partition's model.", ["partition"], registry=r
        )
        self.tree_leaves = Gauge(
            "sgt_tree_leaves", "Leaves in the partition's model.", ["partition"], registry=r
        )
        self.tree_depth = Gauge(
            "sgt_tree_depth", "Depth of the partition's model.", ["partition"], registry=r
        )
        self.records = Counter("sgt_records", "Records consumed.", ["topic", "partition"], registry=r)
        self.predictions = Counter("sgt_predictions", "Predictions produced.", ["partition"], registry=r)
        self.trained = Counter("sgt_trained", "Records the model learned from.", ["partition"], registry=r)
        self.invalid = Counter(
            "sgt_invalid_records", "Records sent to the dead-letter topic.", ["topic", "reason"], registry=r
        )
        self.lag = Gauge(
            "sgt_consumer_lag_records",
            "Records behind the end of the partition.",
            ["topic", "partition"],
            registry=r,
        )
        self.checkpoint_seconds = Histogram(
            "sgt_checkpoint_seconds", "Time to write a checkpoint.", buckets=_CHECKPOINT_BUCKETS, registry=r
        )
        self.state_write_seconds = Histogram(
            "sgt_state_topic_write_seconds",
            "Time from handing a checkpoint to the state topic to its confirmation (the loop goes on).",
            buckets=_CHECKPOINT_BUCKETS,
            registry=r,
        )
        self.state_write_bytes = Counter(
            "sgt_state_topic_written_bytes",
            "Checkpoint payload bytes written to the state topic.",
            registry=r,
        )
        self.state_restore_seconds = Histogram(
            "sgt_state_topic_restore_seconds",
            "Time to claim a partition in the state topic and read its newest state.",
            buckets=_CHECKPOINT_BUCKETS,
            registry=r,
        )
        self.restores = Counter(
            "sgt_restores",
            "Partitions restored on assignment, by where their state came from (file, topic, fresh).",
            ["source"],
            registry=r,
        )
        self.last_checkpoint = Gauge(
            "sgt_last_checkpoint_timestamp_seconds",
            "Unix time of the last durable checkpoint.",
            ["partition"],
            registry=r,
        )
        self.latency = BulkHistogram(
            "sgt_prediction_latency_seconds",
            "Record (event) time to prediction delivered.",
            _LATENCY_BUCKETS,
            registry=r,
        )
        self.join_pending = Gauge(
            "sgt_join_pending", "Entries waiting in the join buffer.", ["partition", "side"], registry=r
        )
        self.join_pending_bytes = Gauge(
            "sgt_join_pending_bytes",
            "Bytes held by the entries waiting in the join buffer.",
            ["partition", "side"],
            registry=r,
        )
        self.join_expired = Counter(
            "sgt_join_expired",
            "Entries dropped from the join buffer.",
            ["partition", "side", "reason"],
            registry=r,
        )
        self.model_bytes = Gauge(
            "sgt_model_bytes", "Memory of the partition's model.", ["partition"], registry=r
        )
        self.model_version = Gauge(
            "sgt_model_version", "Changes applied to the model.", ["partition"], registry=r
        )
        self.drifts = Counter(
            "sgt_drifts", "Drifts the model detected and answered.", ["partition"], registry=r
        )
        self.model_trees = Gauge(
            "sgt_model_trees", "Trees in the partition's model.", ["partition"], registry=r
        )
        self._drifts_seen: dict[str, int] = {}  # partition -> the model's n_drifts last reported
        self.assigned = Gauge("sgt_assigned_partitions", "Partitions this process owns.", registry=r)
        self.rebalances = Counter("sgt_rebalances", "Rebalance events.", ["event"], registry=r)
        self.checkpoint_failures = Counter(
            "sgt_checkpoint_failures",
            "Checkpoint writes that failed and corrupt checkpoints skipped on restore.",
            ["reason"],
            registry=r,
        )
        self.checkpoint_dir_lost = Counter(
            "sgt_checkpoint_directory_lost",
            "Times the checkpoint directory (or its owner lock file) vanished while the worker ran (it is "
            "taken again, lock and owner included, at the next checkpoint).",
            registry=r,
        )
        self.delivery_failures = Counter(
            "sgt_delivery_failures",
            "Partitions rewound to their last checkpoint because an output was not delivered for good.",
            ["topic"],
            registry=r,
        )
        self.offset_resets = Counter(
            "sgt_offset_resets",
            "Topic partitions read again from their start: the restored offset was past the topic's end.",
            ["topic", "reason"],
            registry=r,
        )
        build = Gauge("sgt_build_info", "Build information.", ["version", "python"], registry=r)
        build.labels(version=__version__, python=platform.python_version()).set(1)
        self._partition_metrics = (
            self.tree_nodes,
            self.tree_leaves,
            self.tree_depth,
            self.predictions,
            self.trained,
            self.last_checkpoint,
            self.model_bytes,
            self.model_version,
            self.drifts,
            self.model_trees,
        )

    def forget_partition(self, partition: int, topics: list[str]) -> None:
        """Remove every series of an input partition (revoked or lost)."""
        p = str(partition)
        self._drifts_seen.pop(p, None)
        for metric in self._partition_metrics:
            _remove(metric, p)
        for window in ("cumulative", "recent"):
            for gauge in (self.prequential_error, self.prequential_log_loss, self.prequential_brier):
                _remove(gauge, p, window)
        for window in ("cumulative", "recent"):
            _remove(self.interval_coverage, p, window)
            _remove(self.interval_width, p, window)
        for feature in self._importance_labels.pop(p, set()):
            _remove(self.feature_importance, p, feature)
        for side in ("features", "labels"):
            _remove(self.join_pending, p, side)
            _remove(self.join_pending_bytes, p, side)
            for reason in ("size", "age"):
                _remove(self.join_expired, p, side, reason)
        for topic in topics:
            _remove(self.records, topic, p)
            _remove(self.lag, topic, p)

    def report_model(self, partition: str, n_trees: int, n_drifts: int) -> None:
        """The ensemble's size, and the drifts answered since the partition was assigned here."""
        self.model_trees.labels(partition=partition).set(n_trees)
        seen = self._drifts_seen.setdefault(partition, n_drifts)
        if n_drifts > seen:
            self.drifts.labels(partition=partition).inc(n_drifts - seen)
            self._drifts_seen[partition] = n_drifts
        else:
            self.drifts.labels(partition=partition)  # the series exists from the assignment on

    def report_importances(self, partition: str, importances: dict[str, float], top: int) -> None:
        """The `top` most important features of a partition's model (ties: name order); the series of
        features that left the top are removed, so a partition has at most `top` of them."""
        ranked = sorted(importances.items(), key=lambda item: (-item[1], item[0]))[:top]
        chosen = {name for name, value in ranked if value > 0}
        for gone in self._importance_labels.get(partition, set()) - chosen:
            _remove(self.feature_importance, partition, gone)
        for name, value in ranked:
            if name in chosen:
                self.feature_importance.labels(partition=partition, feature=name).set(value)
        self._importance_labels[partition] = chosen

    def report_partition(self, partition: int, state: PartitionState) -> None:
        """The per-partition gauges of the model, the prequential error and the join buffer."""
        m, p = self, str(partition)
        model = state.model
        m.tree_nodes.labels(partition=p).set(model.n_nodes)
        m.tree_leaves.labels(partition=p).set(model.n_leaves)
        m.tree_depth.labels(partition=p).set(model.depth)
        m.model_bytes.labels(partition=p).set(model.nbytes)
        m.model_version.labels(partition=p).set(model.version)
        m.report_model(p, getattr(model, "n_trees", 1), getattr(model, "n_drifts", 0))
        m.prequential_error.labels(partition=p, window="cumulative").set(state.prequential.error)
        m.prequential_error.labels(partition=p, window="recent").set(state.prequential.recent_error)
        if state.prequential.task == "classification":
            scores = state.prequential
            m.prequential_log_loss.labels(partition=p, window="cumulative").set(scores.log_loss)
            m.prequential_log_loss.labels(partition=p, window="recent").set(scores.recent_log_loss)
            m.prequential_brier.labels(partition=p, window="cumulative").set(scores.brier)
            m.prequential_brier.labels(partition=p, window="recent").set(scores.recent_brier)
        if state.intervals is not None:
            score = state.intervals
            m.interval_coverage.labels(partition=p, window="cumulative").set(score.coverage)
            m.interval_coverage.labels(partition=p, window="recent").set(score.recent_coverage)
            m.interval_width.labels(partition=p, window="cumulative").set(score.width)
            m.interval_width.labels(partition=p, window="recent").set(score.recent_width)
        if state.config.explain and hasattr(model, "feature_importances"):
            m.report_importances(p, model.feature_importances(), state.config.explain)
        m.join_pending.labels(partition=p, side="features").set(len(state.join.features))
        m.join_pending.labels(partition=p, side="labels").set(len(state.join.labels))
        m.join_pending_bytes.labels(partition=p, side="features").set(state.join.feature_bytes)
        m.join_pending_bytes.labels(partition=p, side="labels").set(state.join.label_bytes)

    def render(self) -> bytes:
        return generate_latest(self.registry)


class BulkHistogram(Collector):
    """A label-free histogram fed a batch of observations at a time (one per prediction is too many
    for :class:`prometheus_client.Histogram`'s per-call cost on the hot path).

    >>> reg = CollectorRegistry()
    >>> h = BulkHistogram("demo_seconds", "Demo.", (0.1, 1.0), registry=reg)
    >>> h.observe_many([0.05, 0.1, 0.5, 7.0])
    >>> [(s.labels.get("le"), s.value) for s in next(iter(reg.collect())).samples][:3]
    [('0.1', 2.0), ('1.0', 3.0), ('+Inf', 4.0)]
    """

    def __init__(
        self, name: str, documentation: str, buckets: tuple[float, ...], registry: CollectorRegistry
    ) -> None:
        self.name, self.documentation = name, documentation
        self.bounds = np.asarray(buckets, dtype=float)
        self.counts = np.zeros(len(buckets) + 1, dtype=np.int64)
        self.total = 0.0
        self._lock = threading.Lock()
        registry.register(self)

    def observe_many(self, values: Sequence[float] | np.ndarray) -> None:
        if len(values) == 0:
            return
        data = np.asarray(values, dtype=float)
        counts = np.bincount(np.searchsorted(self.bounds, data, side="left"), minlength=len(self.counts))
        with self._lock:
            self.counts += counts
            self.total += float(data.sum())

    def collect(self) -> list[HistogramMetricFamily]:
        with self._lock:
            cumulative = np.cumsum(self.counts).astype(float).tolist()
            total = self.total
        family = HistogramMetricFamily(self.name, self.documentation)
        labels = [_bound(b) for b in self.bounds.tolist()] + ["+Inf"]
        family.add_metric([], list(zip(labels, cumulative, strict=True)), total)
        return [family]

    def describe(self) -> list[HistogramMetricFamily]:
        return [HistogramMetricFamily(self.name, self.documentation)]


def _bound(value: float) -> str:
    return repr(float(value))


def _remove(metric: Counter | Gauge, *labels: str) -> None:
    with contextlib.suppress(KeyError):
        metric.remove(*labels)


class Health:
    """Liveness and readiness flags shared between the processing loop and the HTTP server.

    Alive: the processing loop turned within ``stale_after`` seconds, no partition's checkpoint has
    failed ``max_checkpoint_failures`` times in a row, and nothing ended the worker's usefulness for
    good (:meth:`fail`: the state topic was deleted). A worker whose checkpoints keep failing (a full
    or read-only disk) goes on processing, but every record since its last checkpoint would be
    replayed after a crash, more and more of them; reported unhealthy, it is restarted (on another
    node) by its orchestrator. It is healthy again as soon as a checkpoint succeeds. Ready: alive, and
    the member holds an assignment from the group: set when partitions are assigned (an empty
    assignment too: an idle member, when the group has more members than partitions, is in the group
    and takes partitions at the next rebalance), cleared when they are revoked or lost (until the next
    assignment, however long the group takes) and at shutdown.

    >>> h = Health(max_checkpoint_failures=2); h.ready
    False
    >>> h.set_ready(True); h.ready, h.alive
    (True, True)
    >>> h.checkpoint_failed(3, failures=2); h.alive, h.problem
    (False, 'the checkpoint of partition 3 failed 2 times in a row')
    >>> h.checkpoint_succeeded(3); h.alive
    True
    """

    def __init__(self, stale_after: float = 60.0, max_checkpoint_failures: int = 10) -> None:
        self.stale_after = stale_after
        self.max_checkpoint_failures = max_checkpoint_failures
        self._beat = time.monotonic()
        self._ready = False
        self._failing: dict[int, int] = {}  # partition -> checkpoint failures in a row
        self._failed: str | None = None
        self._lock = threading.Lock()

    def beat(self) -> None:
        with self._lock:
            self._beat = time.monotonic()

    def set_ready(self, ready: bool) -> None:
        with self._lock:
            self._ready = ready

    def checkpoint_failed(self, partition: int, failures: int) -> None:
        """The partition's checkpoint has failed ``failures`` times in a row."""
        with self._lock:
            self._failing[partition] = failures

    def checkpoint_succeeded(self, partition: int) -> None:
        with self._lock:
            self._failing.pop(partition, None)

    def forget(self, partitions: list[int]) -> None:
        """Partitions revoked, lost or given up: their checkpoints are another worker's concern now."""
        with self._lock:
            for p in partitions:
                self._failing.pop(p, None)

    def fail(self, reason: str) -> None:
        """Unhealthy for good: the worker cannot go on (it is stopping)."""
        with self._lock:
            self._failed = reason

    @property
    def problem(self) -> str | None:
        """Why the worker is not alive, or None when it is."""
        with self._lock:
            return self._problem()

    def _problem(self) -> str | None:
        if self._failed is not None:
            return self._failed
        if time.monotonic() - self._beat >= self.stale_after:
            return f"the processing loop has not turned for {self.stale_after:g} s"
        worst = max(self._failing.items(), key=lambda item: (item[1], -item[0]), default=None)
        if worst is not None and worst[1] >= self.max_checkpoint_failures:
            return f"the checkpoint of partition {worst[0]} failed {worst[1]} times in a row"
        return None

    @property
    def alive(self) -> bool:
        with self._lock:
            return self._problem() is None

    @property
    def ready(self) -> bool:
        with self._lock:
            return self._ready and self._problem() is None


class MetricsServer:
    """A threaded HTTP server for /metrics, /healthz and /readyz; ``port=0`` picks a free port.

    ``log`` (default: the ``worker.http`` logger, which the worker's JSON handler serves) receives the
    server's errors.
    """

    def __init__(
        self,
        metrics: WorkerMetrics,
        health: Health,
        host: str,
        port: int,
        log: logging.Logger | None = None,
    ) -> None:
        log = log or logging.getLogger("worker.http")
        self.httpd = _Server((host, port), _handler(metrics, health, log), log)
        self.httpd.daemon_threads = True
        self.port = int(self.httpd.server_address[1])
        self._thread = threading.Thread(target=self.httpd.serve_forever, name="metrics-http", daemon=True)

    def start(self) -> MetricsServer:
        self._thread.start()
        return self

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


# A client that goes away mid-request (a scrape timing out) is routine, not a server error.
_CLIENT_GONE = (ConnectionError, TimeoutError)


class _Server(ThreadingHTTPServer):
    """The HTTP server, reporting a failed request through the logger instead of printing on stderr."""

    def __init__(
        self, address: tuple[str, int], handler: type[BaseHTTPRequestHandler], log: logging.Logger
    ) -> None:
        self.log = log
        super().__init__(address, handler)

    def handle_error(self, request: object, client_address: object) -> None:
        """socketserver calls this for an exception that escaped the handler (by default: a traceback)."""
        error = sys.exc_info()[1]
        if isinstance(error, _CLIENT_GONE):
            self.log.info(
                "metrics client went away", extra=fields(client=str(client_address), error=str(error))
            )
        else:
            self.log.error("metrics request failed", exc_info=True, extra=fields(client=str(client_address)))


def _handler(metrics: WorkerMetrics, health: Health, log: logging.Logger) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            path = self.path.split("?", 1)[0]
            try:
                self._answer(path)
            except _CLIENT_GONE:
                raise  # the server logs it (the answer cannot reach the client anyway)
            except Exception:
                log.error("metrics request failed", exc_info=True, extra=fields(path=path))
                with contextlib.suppress(OSError):
                    self._send(500, b"internal error\n")

        def _answer(self, path: str) -> None:
            if path == "/metrics":
                self._send(200, metrics.render(), CONTENT_TYPE_LATEST)
            elif path == "/healthz":
                problem = health.problem
                self._send(200 if problem is None else 503, f"{problem or 'ok'}\n".encode())
            elif path == "/readyz":
                ok = health.ready
                self._send(200 if ok else 503, b"ready\n" if ok else b"not ready\n")
            else:
                self._send(404, b"not found\n")

        def _send(self, code: int, body: bytes, content_type: str = "text/plain; charset=utf-8") -> None:
            self.send_response(code)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_request(self, code: int | str = "-", size: int | str = "-") -> None:
            """Scrapes are not worth a log line each."""

        def log_message(self, format: str, *args: object) -> None:
            """What http.server would print on stderr (a malformed request, say) goes to the log."""
            log.warning(
                "metrics request refused",
                extra=fields(client=self.address_string(), error=format % args),
            )

    return Handler
