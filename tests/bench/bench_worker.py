"""Benchmarks of the Kafka worker over the embedded Tansu broker (loopback only); not part of pytest.

Run from the repository root::

    .venv/bin/python -m tests.bench.bench_worker                 # all three, default sizes
    .venv/bin/python -m tests.bench.bench_worker --only throughput --records 200000

(a) throughput: ONE ``sgt-worker run`` process (found next to the interpreter, as the console
    script) against 4 partitions of 10 numeric features with inline labels, all input produced
    before it starts, in ``--repeat`` rounds (3 by default; medians reported, as the shared VM is
    noisy); records/s from process start to the last output's own timestamp (when the process
    handed it to its producer; outputs are read back once the process is done, so that no reader
    loads the broker during the run), side by side with a bare consume -> produce pass-through
    process (no model, no decoding, the worker's client settings), measured in the same run, each
    process on a fresh broker. Steady rates (first to last output) are shown too, because a group
    join on Tansu costs about half the session timeout. With ``--null-model`` each round also runs
    the worker with a model that does no work (``tests/bench/null_model_worker.py``): the ceiling
    of any model in this worker, which separates the model's cost from the rest of the worker's.
    The worker writes every checkpoint to its state topic too (the default); with
    ``--state-topic-comparison`` each round also runs it with ``--state-topic none``, right after
    the worker with it, and reports the ratio per round (``--checkpoint-seconds`` makes checkpoints,
    and so state-topic writes, frequent enough to weigh during a short run). With
    ``--exactly-once`` each round also runs the worker with ``--processing-guarantee exactly_once``
    right after the default one (at_least_once) and reports the ratio per round: the cost of the
    transactions (one per checkpoint, so ``--checkpoint-seconds`` matters here too). With ``--boosted``
    each round also runs the worker with ``--model boosted`` right after the default one (one tree,
    adaptive for classification, unless SGT_MODEL says otherwise) and reports the ensemble's rates over
    the tree's per round and their median: the ensemble's cost in the same run.
(b) latency: records produced at a steady 1,000/s while the worker runs, after 500 warm-up records
    came back (proving it fetches) and 2,000 more that are not measured (a new idempotent producer's
    first records wait for its producer id). The measure that matters to a consumer, record timestamp
    to the prediction delivered (its producer's delivery report), comes from the worker's own histogram,
    read as the measured records start and end; the pass-through notes its deliveries exactly. Also shown: the
    record's ``ts`` to the output's own timestamp (when the process handed it to its producer), p50 /
    p99 / max and the p50 of every 5 s. Nothing reads the outputs while the measured records flow
    (each fetch costs Tansu CPU, which this 2-CPU machine shares); they are read back afterwards.
(c) restore: a 1-partition worker learns 100,000 records and stops (final checkpoint); a new worker
    process restores that checkpoint; measured from the start of the assignment callback (the
    worker's "partition restored" log line minus its restore time) to the first prediction read
    for a record produced while no worker ran. Then a third worker with an EMPTY checkpoint
    directory restores the partition from the state topic, measured the same way. The checkpoint
    write time comes from the worker's ``sgt_checkpoint_seconds`` histogram and from timing
    ``worker.checkpoints.file_store.write_checkpoint`` on the restored state directly.

The hidden ``passthrough`` subcommand is the baseline process; the bench starts it itself.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import functools
import json
import math
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
from confluent_kafka import Consumer, Producer, TopicPartition

from tests.bench.bench_worker_core import measure, stream
from tests.worker.worker_util import topic_args
from worker.devtools.embedded_broker import TansuBroker, create_topics, free_port, start_tansu
from worker.devtools.produce import produce_stream

SESSION_TIMEOUT_MS = 6000  # the tests' fast group settings; a join on Tansu takes about half of it
HEARTBEAT_MS = 1000
# Every producer's linger.ms (bench input, worker, pass-through). Tansu's fetches slow down as a
# partition accumulates record batches; at 1,000 records/s over 4 partitions linger.ms=5 makes a
# batch of one or two records every 5 ms and one hop's p99 climbs from 15 to 73 ms within 40 s, while
# linger.ms=10 halves the batch count and holds it at 18 to 33 ms (BENCHMARKS.md section 6).
LINGER_MS = 10
BATCH_SIZE = 2000  # the worker's default consume batch
POLL_TIMEOUT_S = 0.01  # the worker's default poll timeout
WAIT_LIMIT_S = 600.0
READER_WAIT_S = 0.001
LATENCY_HISTOGRAM = "sgt_prediction_latency_seconds"
EXITED_GRACE_S = 15.0
LATENCY_WARM_UP = 500  # records whose predictions must arrive before latency is measured
LATENCY_SETTLE = 2000  # records produced, not measured, while the measuring producer starts up
NULL_MODEL = "null-model"  # the throughput kind of tests/bench/null_model_worker.py
NO_STATE_TOPIC = "worker-no-state"  # the throughput kind of the worker without a state topic
EXACTLY_ONCE = "worker-eos"  # the throughput kind of the worker with processing_guarantee exactly_once
BOOSTED = "worker-boosted"  # the throughput kind of the worker with the boosted ensemble (--model boosted)

# The worker's client settings (worker/kafka/loop.py), reproduced for the pass-through baseline.
CONSUMER_SETTINGS: dict[str, Any] = {
    "enable.auto.commit": False,
    "enable.auto.offset.store": False,
    "auto.offset.reset": "earliest",
    "partition.assignment.strategy": "range",
    "isolation.level": "read_committed",
    "fetch.wait.max.ms": 10,
    # Not a worker setting. When a partition's prefetch queue is over librdkafka's thresholds, its next
    # fetch waits this long (default 1,000 ms). The pass-through drains its queue in a fraction of that
    # and then sat idle: ~0.9 s stalls in 5 of 6 runs with the default, none in 6 with 10 ms. The
    # worker drains its queue more slowly and measured the same either way (BENCHMARKS.md section 6).
    "fetch.queue.backoff.ms": 10,
}
PRODUCER_SETTINGS: dict[str, Any] = {
    "enable.idempotence": True,
    "acks": "all",
    "partitioner": "murmur2_random",
}


# --------------------------------------------------------------------------------- processes


def worker_command() -> list[str]:
    """``sgt-worker`` from the environment of this interpreter (the console script)."""
    script = Path(sys.executable).parent / "sgt-worker"
    if script.exists():
        return [str(script)]
    found = shutil.which("sgt-worker")
    if found is None:
        raise SystemExit("sgt-worker console script not found; install the project (pip install -e .)")
    return [found]


@dataclass(frozen=True)
class ClientTuning:
    """Client timing shared by the worker, the pass-through and the bench's producers."""

    session_timeout_ms: int = SESSION_TIMEOUT_MS
    heartbeat_ms: int = HEARTBEAT_MS
    linger_ms: int = LINGER_MS

    def consumer_settings(self) -> dict[str, Any]:
        return {"session.timeout.ms": self.session_timeout_ms, "heartbeat.interval.ms": self.heartbeat_ms}

    def producer_settings(self) -> dict[str, Any]:
        return {"linger.ms": self.linger_ms}


def worker_args(
    bootstrap: str,
    topics: dict[str, str],
    group: str,
    checkpoints: Path,
    port: int,
    timing: ClientTuning,
    extra: tuple[str, ...] = (),
) -> list[str]:
    """``sgt-worker run`` with the tests' topic flags, a known metrics port and the bench's timing."""
    return [
        "run",
        *topic_args(bootstrap, group, topics, checkpoints),
        "--task",
        "classification",
        "--metrics-host",
        "127.0.0.1",
        "--metrics-port",
        str(port),
        "--session-timeout-ms",
        str(timing.session_timeout_ms),
        "--heartbeat-interval-ms",
        str(timing.heartbeat_ms),
        "--linger-ms",
        str(timing.linger_ms),
        # the embedded broker holds a fetch at the tail for its whole wait: the worker's default of
        # 500 ms (suited to real Kafka) would set the latency floor; the bench's clients all use 10 ms
        "--fetch-wait-max-ms",
        "10",
        "--log-level",
        "info",
        *extra,
    ]


def launch(command: list[str], log_path: Path) -> subprocess.Popen[bytes]:
    with log_path.open("ab") as log:
        return subprocess.Popen(
            command, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True
        )


def stop(process: subprocess.Popen[bytes], timeout_s: float = 60.0) -> int | None:
    """SIGTERM, wait, SIGKILL the process group on overrun; returns the exit code (None if killed)."""
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
    try:
        return process.wait(timeout_s)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait(10)
        return None


def http_get(port: int, path: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=2) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, ""
    except OSError:
        return 0, ""


def summarise(buckets: dict[str, float]) -> dict[str, float]:
    """Count, mean and the share within 100 ms of a histogram read by `histogram`."""
    count = buckets.get("count", 0.0)
    if not count:
        return {"count": 0.0}
    return {
        "count": count,
        "mean_s": buckets["sum"] / count,
        "share_le_0.1s": buckets.get("le=0.1", float("nan")) / count,
    }


def histogram(metrics_text: str, name: str) -> dict[str, float]:
    """``sum``, ``count`` and ``le=...`` buckets of an unlabelled histogram from a /metrics page.

    >>> lines = ['h_bucket{le="0.1"} 3.0', 'h_bucket{le="+Inf"} 4.0', "h_count 4.0", "h_sum 0.5", "h_x 1"]
    >>> page = chr(10).join(lines)
    >>> histogram(page, "h")
    {'le=0.1': 3.0, 'le=+Inf': 4.0, 'count': 4.0, 'sum': 0.5}
    >>> summarise(histogram(page, "h"))
    {'count': 4.0, 'mean_s': 0.125, 'share_le_0.1s': 0.75}
    """
    out: dict[str, float] = {}
    for line in metrics_text.splitlines():
        if line.startswith(f"{name}_sum "):
            out["sum"] = float(line.split()[-1])
        elif line.startswith(f"{name}_count "):
            out["count"] = float(line.split()[-1])
        elif line.startswith(f'{name}_bucket{{le="'):
            bound = line.split('le="', 1)[1].split('"', 1)[0]
            out[f"le={bound}"] = float(line.split()[-1])
    return out


def histogram_difference(later: dict[str, float], earlier: dict[str, float]) -> dict[str, float]:
    """What a histogram gained between two reads (each from `histogram`)."""
    return {key: value - earlier.get(key, 0.0) for key, value in later.items()}


def bucket_quantile(buckets: dict[str, float], q: float) -> float:
    """The q-quantile of a histogram read by `histogram`, interpolated within its bucket as
    Prometheus's ``histogram_quantile`` does; nan when empty or beyond the last finite bound.

    >>> bucket_quantile({"le=0.01": 50.0, "le=0.1": 100.0, "le=+Inf": 100.0, "count": 100.0}, 0.99)
    0.0982
    """
    count = buckets.get("count", 0.0)
    bounds = sorted((float(k[3:]), v) for k, v in buckets.items() if k.startswith("le=") and k != "le=+Inf")
    if not count or not bounds:
        return math.nan
    rank, lower, below = q * count, 0.0, 0.0
    for upper, cumulative in bounds:
        if cumulative >= rank:
            inside = cumulative - below
            return round(lower + (upper - lower) * ((rank - below) / inside if inside else 1.0), 6)
        lower, below = upper, cumulative
    return math.nan


@dataclass
class MetricsSnapshot:
    """Reads the worker's /metrics once the reader has seen ``records`` outputs (in a thread)."""

    port: int | None
    reader: Reader
    records: int
    page: str = ""
    _thread: threading.Thread | None = None

    def start(self) -> MetricsSnapshot:
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def _run(self) -> None:
        deadline = time.monotonic() + WAIT_LIMIT_S
        while self.reader.count < self.records and time.monotonic() < deadline:
            time.sleep(READER_WAIT_S)
        self.page = http_get(self.port, "/metrics")[1] if self.port else ""

    def wait(self) -> str:
        assert self._thread is not None
        self._thread.join(WAIT_LIMIT_S)
        return self.page


# ---------------------------------------------------------------------------------- reading


@dataclass
class Reader:
    """Reads a topic from offset 0 in a thread, noting when each record arrived (wall clock).

    With ``stop_after`` it closes its consumer once it has read that many records, so that it puts no
    fetch load on the broker afterwards (see `Bench.latency`).
    """

    bootstrap: str
    topic: str
    partitions: int
    keep_values: bool = False
    stop_after: int | None = None
    count: int = 0
    # (arrival, the record's own timestamp, value); arrival in time.time() seconds, the timestamp in
    # ms as the producer set it when handed the record (CreateTime)
    received: list[tuple[float, int, bytes]] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> Reader:
        consumer = Consumer(
            {
                "bootstrap.servers": self.bootstrap,
                "group.id": f"bench-reader-{uuid.uuid4().hex[:8]}",
                "enable.auto.commit": False,
                "fetch.wait.max.ms": 10,
            }
        )
        consumer.assign([TopicPartition(self.topic, p, 0) for p in range(self.partitions)])
        self._thread = threading.Thread(target=self._run, args=(consumer,), daemon=True)
        self._thread.start()
        return self

    def _run(self, consumer: Consumer) -> None:
        try:
            while not self._stop.is_set() and (self.stop_after is None or self.count < self.stop_after):
                # consume() waits for the whole batch or the timeout: keep the timeout short, so the
                # arrival time is noted within about READER_WAIT_S of the record reaching the client
                batch = consumer.consume(10_000, READER_WAIT_S)
                if not batch:
                    continue
                wall = time.time()
                good = [m for m in batch if m.error() is None]
                if not good:
                    continue
                if self.keep_values:
                    self.received.extend((wall, m.timestamp()[1], m.value()) for m in good)
                self.count += len(good)
        finally:
            consumer.close()

    def wait_for(
        self, n: int, timeout_s: float = WAIT_LIMIT_S, process: subprocess.Popen[bytes] | None = None
    ) -> None:
        deadline = time.monotonic() + timeout_s
        while self.count < n:
            if time.monotonic() > deadline:
                raise RuntimeError(f"only {self.count} of {n} records on {self.topic} in time")
            if process is not None and process.poll() is not None:
                if process.returncode != 0:
                    raise RuntimeError(
                        f"process exited with {process.returncode}; {self.count} of {n} records"
                    )
                # a clean exit (the pass-through after its count) flushed everything: allow reading it
                deadline = min(deadline, time.monotonic() + EXITED_GRACE_S)
                process = None
            time.sleep(0.005)

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(10)


# ------------------------------------------------------------------------------- pass-through


def passthrough(
    bootstrap: str,
    source: str,
    target: str,
    group: str,
    count: int,
    timing: ClientTuning,
    deliveries: Path | None = None,
) -> None:
    """Consume ``count`` records of ``source`` in a group and produce each value unchanged to ``target``.

    With ``deliveries`` it also notes, for every output, the source record's ``id``, its timestamp and
    when the delivery report arrived, and writes them there as JSON at the end: the pass-through's
    equivalent of the worker's ``sgt_prediction_latency_seconds``, exact rather than bucketed.
    """
    delivered: list[tuple[str, float, float]] = []  # (id, source record's timestamp, delivered at)

    def note(_error: Any, message: Any, created: float) -> None:
        delivered.append((orjson.loads(message.value())["id"], created, time.time()))

    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": group, **CONSUMER_SETTINGS, **timing.consumer_settings()}
    )
    producer = Producer({"bootstrap.servers": bootstrap, **PRODUCER_SETTINGS, **timing.producer_settings()})
    consumer.subscribe([source])
    done = 0
    try:
        while done < count:
            first = consumer.poll(POLL_TIMEOUT_S)  # as the worker fetches: one record, then the rest
            batch = [first, *consumer.consume(BATCH_SIZE - 1, 0)] if first is not None else []
            for message in batch:
                if message.error() is not None:
                    continue
                callback = None
                if deliveries is not None:
                    created = message.timestamp()[1] / 1000.0
                    callback = functools.partial(note, created=created)
                while True:
                    try:
                        producer.produce(
                            target, value=message.value(), key=message.key(), on_delivery=callback
                        )
                        break
                    except BufferError:
                        producer.poll(0.05)
                done += 1
            producer.poll(0)
        producer.flush(60)
    finally:
        consumer.close()
    if deliveries is not None:
        deliveries.write_bytes(orjson.dumps(delivered))


# --------------------------------------------------------------------------------- scenarios


@dataclass
class Bench:
    broker: TansuBroker
    workdir: Path
    timing: ClientTuning = ClientTuning()
    worker_extra: tuple[str, ...] = ()  # more ``sgt-worker run`` flags for every worker

    def topics(self, partitions: int, *kinds: str) -> dict[str, str]:
        suffix = uuid.uuid4().hex[:8]
        names = {kind: f"bench-{kind}-{suffix}" for kind in kinds}
        create_topics(self.broker.bootstrap_servers, list(names.values()), partitions)
        return names

    def produce_up_front(
        self, topic: str, count: int, start_id: int = 0, labels_topic: str | None = None
    ) -> float:
        started = time.monotonic()
        result = produce_stream(
            self.broker.bootstrap_servers,
            topic,
            labels_topic,
            stream(),
            count=count,
            rate=None,
            start_id=start_id,
            producer_config=self.timing.producer_settings(),
        )
        if result.failed or result.features != count:
            raise RuntimeError(f"produced {result.features} of {count}, {result.failed} failed")
        return count / (time.monotonic() - started)

    def log(self, name: str) -> Path:
        return self.workdir / f"{name}.log"

    def start_worker(
        self,
        topics: dict[str, str],
        group: str,
        checkpoints: Path,
        name: str,
        profile: Path | None = None,
        null_model: bool = False,
        extra: tuple[str, ...] = (),
    ) -> tuple[subprocess.Popen[bytes], int]:
        """``sgt-worker run``, or with ``null_model`` the same worker whose model does no work."""
        port = free_port()
        args = worker_args(
            self.broker.bootstrap_servers,
            topics,
            group,
            checkpoints,
            port,
            self.timing,
            (*self.worker_extra, *extra),
        )
        command = worker_command() + args
        module = "tests.bench.null_model_worker" if null_model else "worker"
        if profile is not None:
            command = [sys.executable, "-m", "cProfile", "-o", str(profile), "-m", module, *args]
        elif null_model:
            command = [sys.executable, "-m", module, *args]
        return launch(command, self.log(name)), port

    def throughput(
        self, records: int, kind: str, profile: Path | None = None, separate_labels: bool = False
    ) -> dict[str, Any]:
        """Records/s of the worker or the pass-through over ``records`` produced before it starts.

        With ``separate_labels`` (worker only) the labels go to a co-partitioned labels topic; the
        time until the worker has trained on every record is then read from ``sgt_trained_total``.
        """
        kinds = ("features", "predictions", "dead", *(("labels",) if separate_labels else ()))
        topics = self.topics(4, *kinds)
        produce_rate = self.produce_up_front(topics["features"], records, labels_topic=topics.get("labels"))
        started = time.time()  # wall clock, as the outputs' own timestamps
        process, port = self.start(kind, topics, records, profile)
        trained_at = None
        try:
            wait_delivered(process, port, records)
            if separate_labels and port:
                trained_at = wait_trained(port, records, process)
            metrics = http_get(port, "/metrics")[1] if port else ""
        finally:
            code = stop(process)
        # when each output was handed to the producer, read back once the process is done: a reader
        # fetching during the run would load the broker that both processes share (see `latency`)
        created = [
            ms / 1000.0
            for _, ms, _ in read_back(self.broker.bootstrap_servers, topics["predictions"], 4, records)
        ]
        first, last = min(created), max(created)
        total = last - started
        steady = last - first
        return {
            "kind": kind + ("+labels" if separate_labels else ""),
            "records": records,
            "produce_rate": produce_rate,
            "seconds_to_last": total,
            "rate_total": records / total,
            "seconds_to_first": first - started,
            "rate_steady": records / steady if steady > 0 else float("inf"),
            "seconds_to_all_trained": None if trained_at is None else trained_at - started,
            "exit_code": code,
            "checkpoint_seconds": summarise(histogram(metrics, "sgt_checkpoint_seconds")),
            "state_topic_write_seconds": summarise(histogram(metrics, "sgt_state_topic_write_seconds")),
        }

    def latency(self, seconds: float, rate: float, kind: str) -> dict[str, Any]:
        """Latency of the worker or the pass-through at a steady rate, after a warm-up proving it fetches.

        Nothing reads the output topic while the measured records flow. Every fetch costs Tansu CPU in
        proportion to the record batches its partitions hold, and on this 2-CPU machine a reader
        fetching every 10 ms raised the worker's own p99 to delivery from about 60 to about 100 ms
        (BENCHMARKS.md section 6). The outputs are read back once the process has delivered them all.
        """
        topics = self.topics(4, "features", "predictions", "dead")
        bootstrap = self.broker.bootstrap_servers
        first = LATENCY_WARM_UP + LATENCY_SETTLE  # index of the first measured record
        total = first + int(rate * seconds)
        deliveries = self.workdir / f"{topics['predictions']}.deliveries.json"
        # reads the warm-up's outputs (proof that the process fetches) and the settling ones, then stops
        reader = Reader(bootstrap, topics["predictions"], 4, stop_after=first).start()
        process, port = self.start(kind, topics, total, deliveries=deliveries if kind != "worker" else None)
        try:
            tuning = self.timing.producer_settings()
            produce_stream(
                bootstrap,
                topics["features"],
                None,
                stream(),
                count=LATENCY_WARM_UP,
                rate=rate,
                producer_config=tuning,
            )
            reader.wait_for(LATENCY_WARM_UP, timeout_s=120, process=process)
            # the worker's own histogram over the measured records only: read it as they start
            before = MetricsSnapshot(port, reader, first).start()
            # the first records of a new idempotent producer wait for its producer id (up to a second
            # on Tansu): they are produced but not measured
            sent = produce_stream(
                bootstrap,
                topics["features"],
                None,
                stream(),
                count=total - LATENCY_WARM_UP,
                rate=rate,
                start_id=LATENCY_WARM_UP,
                producer_config=tuning,
            )
            wait_delivered(process, port, total)
            metrics = http_get(port, "/metrics")[1] if port else ""
        finally:
            stop(process)
            reader.close()
        sent_at = {doc["id"]: doc["ts"] for _, _, doc in read_back(bootstrap, topics["features"], 4, total)}
        handed = sorted(
            (sent_at[doc["id"]], created / 1000.0 - sent_at[doc["id"]])
            for _, created, doc in read_back(bootstrap, topics["predictions"], 4, total)
            if record_index(doc["id"]) >= first
        )
        if kind == "worker":
            buckets = histogram_difference(
                histogram(metrics, LATENCY_HISTOGRAM), histogram(before.wait(), LATENCY_HISTOGRAM)
            )
            delivered = {**summarise(buckets), "p99_s": bucket_quantile(buckets, 0.99)}
        else:
            notes = orjson.loads(deliveries.read_bytes())
            delivered = exact_summary([done - ts for i, ts, done in notes if record_index(i) >= first])
        latencies = sorted(latency for _, latency in handed)
        return {
            "kind": kind,
            "rate": rate,
            "records": len(latencies),
            "achieved_rate": sent.rate,
            "handed_p50_ms": 1000 * quantile(latencies, 0.50),
            "handed_p99_ms": 1000 * quantile(latencies, 0.99),
            "handed_max_ms": 1000 * latencies[-1],
            "handed_p50_ms_by_5s": windowed_medians(handed, 5.0),
            "delivered": delivered,
        }

    def start(
        self,
        kind: str,
        topics: dict[str, str],
        count: int,
        profile: Path | None = None,
        deliveries: Path | None = None,
    ) -> tuple[subprocess.Popen[bytes], int | None]:
        """Start the worker or the pass-through (which stops after ``count`` records, and notes its
        deliveries in ``deliveries`` if given) on ``topics``."""
        group = f"bench-{kind}-{uuid.uuid4().hex[:8]}"
        if kind in ("worker", NULL_MODEL, NO_STATE_TOPIC, EXACTLY_ONCE, BOOSTED):
            checkpoints = self.workdir / f"ckpt-{group}"
            extra: tuple[str, ...] = ("--state-topic", "none") if kind == NO_STATE_TOPIC else ()
            if kind == EXACTLY_ONCE:
                extra = ("--processing-guarantee", "exactly_once", "--transactional-id", group)
            if kind == BOOSTED:
                extra = ("--model", "boosted")
            return self.start_worker(
                topics, group, checkpoints, f"{kind}-{group}", profile, kind == NULL_MODEL, extra
            )
        command = [
            sys.executable,
            "-m",
            "tests.bench.bench_worker",
            "passthrough",
            self.broker.bootstrap_servers,
        ]
        command += [topics["features"], topics["predictions"], group, str(count)]
        command += ["--session-timeout-ms", str(self.timing.session_timeout_ms)]
        command += ["--heartbeat-interval-ms", str(self.timing.heartbeat_ms)]
        command += ["--linger-ms", str(self.timing.linger_ms)]
        command += ["--deliveries", str(deliveries)] if deliveries is not None else []
        return launch(command, self.log(f"{kind}-{group}")), None

    def restore(self, records: int, write_repeats: int) -> dict[str, Any]:
        topics = self.topics(1, "features", "predictions", "dead")
        self.produce_up_front(topics["features"], records)
        group = f"bench-restore-{uuid.uuid4().hex[:8]}"
        checkpoints = self.workdir / f"ckpt-{group}"
        reader = Reader(self.broker.bootstrap_servers, topics["predictions"], 1, keep_values=True).start()
        first, port = self.start_worker(topics, group, checkpoints, "restore-first")
        try:
            reader.wait_for(records, process=first)
            metrics = http_get(port, "/metrics")[1]
        finally:
            first_code = stop(first)
        self.produce_up_front(topics["features"], 1, start_id=records)
        log = self.log("restore-second")
        second, _ = self.start_worker(topics, group, checkpoints, "restore-second")
        try:
            arrived = wait_for_source_offset(reader, records, second)
        finally:
            stop(second)
            reader.close()
        restored = restore_log_line(log)
        assignment_wall = restored["ts"] - restored["seconds"]
        # a third worker on an EMPTY directory: the state comes from the state topic
        self.produce_up_front(topics["features"], 1, start_id=records + 1)
        reader = Reader(self.broker.bootstrap_servers, topics["predictions"], 1, keep_values=True).start()
        log = self.log("restore-third")
        third, _ = self.start_worker(topics, group, self.workdir / f"empty-{group}", "restore-third")
        try:
            arrived_third = wait_for_source_offset(reader, records + 1, third)
        finally:
            stop(third)
            reader.close()
        from_topic = restore_log_line(log)
        direct = time_checkpoint_io(checkpoints, topics, group, write_repeats)
        return {
            "records": records,
            "first_exit_code": first_code,
            "restore_seconds_logged": restored["seconds"],
            "restore_source": restored.get("source"),
            "assignment_to_first_prediction_s": arrived - assignment_wall,
            "empty_dir_restore_source": from_topic.get("source"),
            "empty_dir_restore_seconds_logged": from_topic["seconds"],
            "empty_dir_state_topic_seconds": from_topic.get("state_topic_seconds"),
            "empty_dir_assignment_to_first_prediction_s": arrived_third
            - (from_topic["ts"] - from_topic["seconds"]),
            "worker_checkpoint_seconds": summarise(histogram(metrics, "sgt_checkpoint_seconds")),
            **direct,
        }


def wait_trained(port: int, records: int, process: subprocess.Popen[bytes]) -> float:
    """Wall time at which the worker's ``sgt_trained_total`` (all partitions) reached ``records``."""
    deadline = time.monotonic() + WAIT_LIMIT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"worker exited with {process.returncode}")
        text = http_get(port, "/metrics")[1]
        trained = sum(
            float(line.split()[-1]) for line in text.splitlines() if line.startswith("sgt_trained_total{")
        )
        if trained >= records:
            return time.time()
        time.sleep(0.02)
    raise RuntimeError("the worker did not train on every record in time")


def wait_for_source_offset(reader: Reader, offset: int, process: subprocess.Popen[bytes]) -> float:
    """Wall time at which the prediction for source offset ``offset`` was read."""
    deadline = time.monotonic() + 120
    seen = 0
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"worker exited with {process.returncode}")
        for arrived, _, value in reader.received[seen:]:
            if orjson.loads(value)["offset"] == offset:
                return arrived
        seen = len(reader.received)
        time.sleep(0.002)
    raise RuntimeError("no prediction for the new record in time")


def restore_log_line(log: Path) -> dict[str, Any]:
    """The worker's "partition restored" log record (JSON); fails if the partition started fresh."""
    for line in log.read_text(errors="replace").splitlines():
        with contextlib.suppress(ValueError):
            doc = json.loads(line)
            if doc.get("msg") == "partition restored":
                return doc
    raise RuntimeError(f"no 'partition restored' line in {log}: the second worker did not restore")


def time_checkpoint_io(checkpoints: Path, topics: dict[str, str], group: str, repeats: int) -> dict[str, Any]:
    """Restore the checkpoint in-process and time state serialisation and the durable write directly."""
    from worker.checkpoints.file_store import Owner, write_checkpoint
    from worker.checkpoints.restore import load_state
    from worker.config import load_settings

    settings = load_settings(
        {
            "checkpoint_dir": str(checkpoints),
            "group_id": group,
            "features_topic": topics["features"],
            "task": "classification",
        }
    )
    started = time.perf_counter()
    state = load_state(settings, 0)
    load_s = time.perf_counter() - started
    scratch = Path(tempfile.mkdtemp(prefix="bench-ckpt-"))
    to_bytes, writes = [], []
    size = 0
    try:
        for _ in range(repeats):
            t0 = time.perf_counter()
            payload = state.to_bytes()
            t1 = time.perf_counter()
            write_checkpoint(scratch, 0, payload, Owner.of(settings))
            t2 = time.perf_counter()
            to_bytes.append(t1 - t0)
            writes.append(t2 - t0)
            size = len(payload)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    model = state.model
    return {
        "model_n_seen": getattr(model, "n_seen", None),
        "model_nodes": getattr(model, "n_nodes", None),
        "state_bytes": size,
        "direct_load_state_s": load_s,
        "direct_to_bytes_median_s": statistics.median(to_bytes),
        "direct_checkpoint_median_s": statistics.median(writes),
        "direct_checkpoint_max_s": max(writes),
    }


def read_back(bootstrap: str, topic: str, partitions: int, count: int) -> list[tuple[float, int, Any]]:
    """The first ``count`` records of ``topic`` as (arrival, timestamp in ms, decoded JSON value)."""
    reader = Reader(bootstrap, topic, partitions, keep_values=True).start()
    try:
        reader.wait_for(count, timeout_s=60)
    finally:
        reader.close()
    return [(arrived, created, orjson.loads(value)) for arrived, created, value in reader.received]


def record_index(record_id: str) -> int:
    """The sequence number in a bench record's id (``produce_stream`` numbers them).

    >>> record_index("r-000042")
    42
    """
    return int(record_id[2:])


def exact_summary(latencies: list[float]) -> dict[str, float]:
    """`summarise`'s fields, and the p99, from exact latencies (seconds) instead of a histogram."""
    ordered = sorted(latencies)
    return {
        "count": float(len(ordered)),
        "mean_s": statistics.fmean(ordered),
        "share_le_0.1s": sum(1 for x in ordered if x <= 0.1) / len(ordered),
        "p99_s": quantile(ordered, 0.99),
    }


def wait_delivered(process: subprocess.Popen[bytes], port: int | None, total: int) -> None:
    """Until the worker (``port`` given) counts ``total`` deliveries, or the pass-through has exited.

    Polled four times a second: a /metrics page costs the worker a little CPU.
    """
    deadline = time.monotonic() + WAIT_LIMIT_S
    while time.monotonic() < deadline:
        code = process.poll()
        if code is not None:
            if port is None and code == 0:
                return
            raise RuntimeError(f"process exited with {code}")
        page = http_get(port, "/metrics")[1] if port is not None else ""
        if port is not None and histogram(page, LATENCY_HISTOGRAM).get("count", 0.0) >= total:
            return
        time.sleep(0.25)
    raise RuntimeError(f"not all {total} outputs delivered in time")


def windowed_medians(timed: list[tuple[float, float]], window_s: float) -> list[float]:
    """Median latency (ms) of each ``window_s`` of send time, from ``(sent, latency)`` sorted by sent.

    >>> windowed_medians([(0.0, 0.010), (1.0, 0.030), (5.5, 0.002)], 5.0)
    [20.0, 2.0]
    """
    windows: dict[int, list[float]] = {}
    for sent, latency in timed:
        windows.setdefault(int((sent - timed[0][0]) // window_s), []).append(latency)
    return [round(1000 * statistics.median(windows[k]), 1) for k in sorted(windows)]


def quantile(sorted_values: list[float], q: float) -> float:
    """Nearest-rank quantile of already sorted values.

    >>> quantile([1.0, 2.0, 3.0, 4.0], 0.5), quantile([1.0, 2.0, 3.0, 4.0], 0.99), quantile([7.0], 0.5)
    (2.0, 4.0, 7.0)
    """
    rank = max(1, -(-len(sorted_values) * q // 1))
    return sorted_values[int(rank) - 1]


# ------------------------------------------------------------------------------------- main


@contextlib.contextmanager
def bench_session(
    keep: bool, timing: ClientTuning | None = None, worker_extra: tuple[str, ...] = ()
) -> Iterator[Bench]:
    workdir = Path(tempfile.mkdtemp(prefix="bench-worker-"))
    try:
        with start_tansu(log_path=workdir / "tansu.log") as broker:
            yield Bench(broker, workdir, timing or ClientTuning(), worker_extra)
    finally:
        if keep:
            print(f"logs and checkpoints kept in {workdir}", file=sys.stderr)
        else:
            shutil.rmtree(workdir, ignore_errors=True)


def machine_speed(records: int = 50_000) -> dict[str, float]:
    """The worker's Kafka-free core and the model alone on ``records`` records, in records/s, printed.

    This VM's speed drifts by a third within an hour, and the worker (Python) suffers more from a slow
    period than the pass-through (C, mostly waiting): these two figures put each suite in context.
    """
    rounds = measure(records, 2000, 1)
    speed = {name: rounds.rate(name, records) for name in ("core", "model")}
    print(
        f"machine speed: the worker's core {speed['core']:,.0f} records/s, the model alone "
        f"{speed['model']:,.0f} records/s ({records:,} records; tests/bench/bench_worker_core.py)"
    )
    return speed


def report_throughput(rows: list[dict[str, Any]]) -> None:
    print("\n(a) throughput, 4 partitions, 10 numeric features, input produced up front (inline labels")
    print("    unless +labels: then a labels topic, and 'trained' is when every record was learned)")
    print(
        f"{'round':>5} {'process':<14} {'records':>8} {'to first s':>10} {'to last s':>10} "
        f"{'rec/s total':>12} {'rec/s steady':>13}"
    )
    for r in rows:
        print(
            f"{r['round']:>5} {r['kind']:<14} {r['records']:>8} {r['seconds_to_first']:>10.2f} "
            f"{r['seconds_to_last']:>10.2f} "
            f"{r['rate_total']:>12,.0f} {r['rate_steady']:>13,.0f}"
            + (f"  trained {r['seconds_to_all_trained']:.2f} s" if r.get("seconds_to_all_trained") else "")
        )
    ratios = round_ratios(rows)
    for r in ratios:
        print(f"round {r['round']}: worker / pass-through {r['total']:.0%} total, {r['steady']:.0%} steady")
    for r in round_ratios(rows, NULL_MODEL):
        print(
            f"round {r['round']}: null-model worker / pass-through {r['total']:.0%} total, "
            f"{r['steady']:.0%} steady (the ceiling of any model in this worker)"
        )
    eos = relative_rates(rows, EXACTLY_ONCE, "worker")
    for r in eos:
        print(
            f"round {r['round']}: worker exactly_once / at_least_once {r['total']:.1%} total, "
            f"{r['steady']:.1%} steady"
        )
    if eos:
        print(
            f"median of {len(eos)} rounds: exactly_once / at_least_once "
            f"{statistics.median(r['total'] for r in eos):.1%} total, "
            f"{statistics.median(r['steady'] for r in eos):.1%} steady"
        )
    boosted = relative_rates(rows, BOOSTED, "worker")
    for r in boosted:
        print(f"round {r['round']}: boosted / single tree {r['total']:.1%} total, {r['steady']:.1%} steady")
    if boosted:
        print(
            f"median of {len(boosted)} rounds: boosted / single tree "
            f"{statistics.median(r['total'] for r in boosted):.1%} total, "
            f"{statistics.median(r['steady'] for r in boosted):.1%} steady (target >= 50% steady)"
        )
    costs = state_topic_costs(rows)
    for r in costs:
        print(
            f"round {r['round']}: worker with / without the state topic {r['total']:.1%} total, "
            f"{r['steady']:.1%} steady"
        )
    if costs:
        print(
            f"median of {len(costs)} rounds: with / without the state topic "
            f"{statistics.median(r['total'] for r in costs):.1%} total, "
            f"{statistics.median(r['steady'] for r in costs):.1%} steady (target >= 95%)"
        )
    if ratios:
        share = statistics.median(r["total"] for r in ratios)
        rate = statistics.median(r["worker_rate_total"] for r in ratios)
        print(
            f"median of {len(ratios)} rounds: worker / pass-through {share:.0%} total, "
            f"worker {rate:,.0f} records/s total"
            " (target >= 50% and >= 20,000 records/s)"
        )


def round_ratios(rows: list[dict[str, Any]], kind: str = "worker") -> list[dict[str, float]]:
    """Per round, the rates of ``kind`` (the inline-label worker) over the pass-through's of that round.

    >>> rows = [{"round": 1, "kind": "passthrough", "rate_total": 40.0, "rate_steady": 80.0},
    ...         {"round": 1, "kind": "worker", "rate_total": 20.0, "rate_steady": 10.0}]
    >>> round_ratios(rows)
    [{'round': 1, 'total': 0.5, 'steady': 0.125, 'worker_rate_total': 20.0}]
    """
    out = []
    for n in sorted({r["round"] for r in rows}):
        by_kind = {r["kind"]: r for r in rows if r["round"] == n}
        if {kind, "passthrough"} <= set(by_kind):
            w, p = by_kind[kind], by_kind["passthrough"]
            out.append(
                {
                    "round": n,
                    "total": w["rate_total"] / p["rate_total"],
                    "steady": w["rate_steady"] / p["rate_steady"],
                    "worker_rate_total": w["rate_total"],
                }
            )
    return out


def state_topic_costs(rows: list[dict[str, Any]]) -> list[dict[str, float]]:
    """Per round, the worker's rates with its state topic over its rates without one.

    >>> rows = [{"round": 1, "kind": "worker", "rate_total": 19.0, "rate_steady": 38.0},
    ...         {"round": 1, "kind": "worker-no-state", "rate_total": 20.0, "rate_steady": 40.0}]
    >>> state_topic_costs(rows)
    [{'round': 1, 'total': 0.95, 'steady': 0.95}]
    """
    return relative_rates(rows, "worker", NO_STATE_TOPIC)


def relative_rates(rows: list[dict[str, Any]], kind: str, baseline: str) -> list[dict[str, float]]:
    """Per round, the rates of ``kind`` over those of ``baseline`` in the same round.

    >>> rows = [{"round": 2, "kind": "worker", "rate_total": 20.0, "rate_steady": 40.0},
    ...         {"round": 2, "kind": "worker-eos", "rate_total": 18.0, "rate_steady": 30.0}]
    >>> relative_rates(rows, "worker-eos", "worker")
    [{'round': 2, 'total': 0.9, 'steady': 0.75}]
    """
    out = []
    for n in sorted({r["round"] for r in rows}):
        by_kind = {r["kind"]: r for r in rows if r["round"] == n}
        if {kind, baseline} <= set(by_kind):
            w, b = by_kind[kind], by_kind[baseline]
            out.append(
                {
                    "round": n,
                    "total": w["rate_total"] / b["rate_total"],
                    "steady": w["rate_steady"] / b["rate_steady"],
                }
            )
    return out


def report_latency(rows: list[dict[str, Any]]) -> None:
    print(f"\n(b) latency at {rows[0]['rate']:,.0f} records/s (no reader of the outputs while measured)")
    print(
        f"{'process':<12} {'records':>8} | {'to delivery: p99':>17} {'within 100 ms':>14} {'mean ms':>8} | "
        f"{'handed to producer: p50':>24} {'p99':>7} {'max':>7}"
    )
    for r in rows:
        d = r["delivered"]
        how = "exact" if r["kind"] != "worker" else "bucketed"
        print(
            f"{r['kind']:<12} {r['records']:>8} | {1000 * d['p99_s']:>8.1f} ms ({how:>8}) "
            f"{d['share_le_0.1s']:>13.2%} "
            f"{1000 * d['mean_s']:>8.1f} | {r['handed_p50_ms']:>21.1f} ms {r['handed_p99_ms']:>7.1f} "
            f"{r['handed_max_ms']:>7.1f}   p50 per 5 s: {r['handed_p50_ms_by_5s']}"
        )
    print(
        "to delivery: record timestamp -> the process's delivery report (what a consumer waits); the "
        "worker's from its own histogram (p99 interpolated in its bucket), the pass-through's exact. "
        "handed to producer: record ts -> the output's own timestamp. Target: p99 to delivery <= 100 ms."
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tests.bench.bench_worker", description=__doc__.split("\n")[0]
    )
    sub = parser.add_subparsers(dest="command")
    internal = sub.add_parser("passthrough", help="(internal) the pass-through baseline process")
    for name in ("bootstrap", "source", "target", "group"):
        internal.add_argument(name)
    internal.add_argument("count", type=int)
    internal.add_argument("--deliveries", type=Path, help="write (id, record ts, delivered at) here as JSON")
    for options in (internal, parser):
        options.add_argument("--session-timeout-ms", type=int, default=SESSION_TIMEOUT_MS)
        options.add_argument("--heartbeat-interval-ms", type=int, default=HEARTBEAT_MS)
        options.add_argument("--linger-ms", type=int, default=LINGER_MS, help="every producer's linger.ms")
    parser.add_argument(
        "--only", choices=("throughput", "passthrough", "latency", "restore"), action="append"
    )
    parser.add_argument("--records", type=int, default=200_000, help="throughput: records (default 200,000)")
    parser.add_argument(
        "--repeat", type=int, default=3, help="throughput: rounds of pass-through then worker (default 3)"
    )
    parser.add_argument(
        "--latency-seconds", type=float, default=30.0, help="latency: seconds at --latency-rate"
    )
    parser.add_argument("--latency-rate", type=float, default=1000.0)
    parser.add_argument("--restore-records", type=int, default=100_000)
    parser.add_argument("--write-repeats", type=int, default=20)
    parser.add_argument(
        "--separate-labels", action="store_true", help="throughput: also run the worker with a labels topic"
    )
    parser.add_argument(
        "--null-model",
        action="store_true",
        help="throughput: each round also runs the worker with a model that does no work",
    )
    parser.add_argument(
        "--state-topic-comparison",
        action="store_true",
        help="throughput: each round also runs the worker without a state topic, right after it",
    )
    parser.add_argument(
        "--exactly-once",
        action="store_true",
        help="throughput: each round also runs the worker with exactly_once, right after the default one",
    )
    parser.add_argument(
        "--boosted",
        action="store_true",
        help="throughput: each round also runs the worker with the boosted ensemble right after the default",
    )
    parser.add_argument(
        "--checkpoint-seconds", type=float, help="every worker's --checkpoint-seconds (default: its own)"
    )
    parser.add_argument("--profile", type=Path, help="throughput: run the worker under cProfile, stats here")
    parser.add_argument("--json", type=Path, help="also write the results as JSON here")
    parser.add_argument("--keep", action="store_true", help="keep logs and checkpoints")
    args = parser.parse_args(argv)
    if args.command == "passthrough":
        timing = ClientTuning(args.session_timeout_ms, args.heartbeat_interval_ms, args.linger_ms)
        passthrough(args.bootstrap, args.source, args.target, args.group, args.count, timing, args.deliveries)
        return 0
    wanted = set(args.only or ("throughput", "latency", "restore"))
    print(f"load average before: {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs (other processes skew it)")
    timing = ClientTuning(args.session_timeout_ms, args.heartbeat_interval_ms, args.linger_ms)
    print(
        f"client timing: session {timing.session_timeout_ms} ms, heartbeat {timing.heartbeat_ms} ms, "
        f"linger {timing.linger_ms} ms"
    )
    results: dict[str, Any] = {"load_average_before": os.getloadavg(), "cpus": os.cpu_count()}
    results["client_timing"] = dataclasses.asdict(timing)

    # Every measured process gets a fresh broker: Tansu keeps everything in memory and slows down as it
    # fills (a latency run after the throughput runs measured p99 146 ms, on a fresh broker 65 ms).
    extra = () if args.checkpoint_seconds is None else ("--checkpoint-seconds", str(args.checkpoint_seconds))

    def measure(part: Callable[[Bench], dict[str, Any]]) -> dict[str, Any]:
        with bench_session(args.keep, timing, extra) as bench:
            return part(bench)

    if wanted & {"throughput", "passthrough"}:
        results["machine_speed"] = machine_speed()
        kinds = ["passthrough"]
        profiles = {"worker": args.profile} if args.profile else {}  # the real worker's only
        if "throughput" in wanted:
            kinds += ["worker", *([NO_STATE_TOPIC] if args.state_topic_comparison else [])]
            kinds += [EXACTLY_ONCE] if args.exactly_once else []
            kinds += [BOOSTED] if args.boosted else []
            kinds += [NULL_MODEL] if args.null_model else []
        results["throughput"] = [
            {"round": n, **measure(lambda b, k=kind: b.throughput(args.records, k, profiles.get(k)))}
            for n in range(1, args.repeat + 1)
            for kind in kinds
        ]
        if args.separate_labels and "throughput" in wanted:
            row = measure(lambda b: b.throughput(args.records, "worker", separate_labels=True))
            results["throughput"].append({"round": args.repeat, **row})
        report_throughput(results["throughput"])
    if "latency" in wanted:
        results["latency"] = [
            measure(lambda b, k=kind: b.latency(args.latency_seconds, args.latency_rate, k))
            for kind in ("passthrough", "worker")
        ]
        report_latency(results["latency"])
    if "restore" in wanted:
        results["restore"] = measure(lambda b: b.restore(args.restore_records, args.write_repeats))
        print(f"\n(c) restore and checkpoint: {json.dumps(results['restore'], indent=1)}")
    results["load_average_after"] = os.getloadavg()
    print(f"load average after: {os.getloadavg()[0]:.2f}")
    if args.json is not None:
        args.json.write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
