"""Soak benchmark: one worker at a steady input rate against the embedded broker for a long time.

Run from the repository root (loopback only; the size is ``--minutes`` times ``--rate`` records)::

    .venv/bin/python -m tests.bench.bench_soak --minutes 30          # 1,000 records/s, 4 partitions
    .venv/bin/python -m tests.bench.bench_soak --minutes 2 --interval 10

An ``sgt-worker run`` process (the console script, with the worker's default settings but the fast
group timing every worker benchmark uses, see :mod:`tests.bench.bench_worker`) learns the benchmarks'
stream (10 numeric features, gradual drift, inline labels) produced at ``--rate`` records/s over
``--partitions`` partitions. Every ``--interval`` seconds one row is printed: records produced and
predictions delivered so far, the delivered throughput over the interval, the p50 / p99 latency from
each record's own timestamp (``ts``, set when the record was handed to the producer) to its prediction
read back from the predictions topic, the worker process's RSS, and each partition's
``sgt_model_bytes`` (the worker's gauge of its model's memory).

A stall fails loudly: when no prediction arrives for ``--stall-seconds`` while records are being
produced, or the worker process exits, the benchmark prints why to stderr and exits with code 1.

The producer batches with ``linger.ms`` ``--input-linger-ms`` (100 by default, as the demo's) and the
worker and the reader fetch with the worker's default ``fetch.wait.max.ms`` (500 ms) unless
``--fetch-wait-ms`` says otherwise: on Tansu a fetch at the tail is held for the whole wait, so the
wait sets most of the latency, and each fetch walks every record batch a partition holds (see
docs/worker.md, "Throughput and latency"), so small waits and small batches cost broker CPU that
grows over a long run.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import orjson
from confluent_kafka import Consumer, KafkaError, Message, Producer, TopicPartition

from tests.bench.bench_worker import ClientTuning, bench_session, http_get, record_index, stop
from tests.bench.bench_worker_core import stream
from worker.config import MODELS
from worker.devtools.produce import MAX_BURST_RECORDS, TokenBucket, feature_record

DEFAULT_RATE = 1000.0
DEFAULT_PARTITIONS = 4
DEFAULT_INTERVAL_S = 60.0
DEFAULT_STALL_S = 60.0
INPUT_LINGER_MS = 100  # as the demo's producer: few, large batches keep Tansu's fetches cheap
WORKER_LINGER_MS = 5  # the worker's default linger_ms
WORKER_FETCH_WAIT_MS = 500  # the worker's default fetch_wait_max_ms
START_LIMIT_S = 120.0  # the worker must deliver its first prediction within this
_MODEL_BYTES = re.compile(r'^sgt_model_bytes\{partition="(\d+)"\} (\S+)$', re.M)


class Stalled(RuntimeError):
    """No progress for longer than allowed, or the worker process exited."""


# ------------------------------------------------------------------------------------ pure parts


@dataclass
class StallWatch:
    """Notices a count that stops growing: `check` raises Stalled once it has not grown for
    ``limit_s`` seconds (times are whatever clock the caller uses).

    >>> watch = StallWatch(limit_s=10.0, count=0, since=0.0)
    >>> watch.check(5, now=8.0)  # grew: the clock starts again
    >>> watch.check(5, now=17.0)  # 9 s without growth: still within the limit
    >>> watch.check(5, now=18.5)
    Traceback (most recent call last):
    ...
    tests.bench.bench_soak.Stalled: no progress for 10.5 s (count stays at 5)
    """

    limit_s: float
    count: int = 0
    since: float = 0.0

    def check(self, count: int, now: float) -> None:
        if count != self.count:
            self.count, self.since = count, now
            return
        if now - self.since > self.limit_s:
            raise Stalled(f"no progress for {now - self.since:.1f} s (count stays at {count})")


def model_bytes(metrics_text: str) -> dict[int, int]:
    """Each partition's ``sgt_model_bytes`` from a /metrics page.

    >>> page = ['sgt_model_bytes{partition="1"} 2048.0', 'sgt_model_bytes{partition="0"} 1e+06']
    >>> model_bytes(chr(10).join(page))
    {0: 1000000, 1: 2048}
    """
    return {int(p): int(float(v)) for p, v in sorted(_MODEL_BYTES.findall(metrics_text))}


def rss_bytes(pid: int) -> int:
    """Resident set size of a process (Linux ``/proc``); 0 when it cannot be read."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def percentiles_ms(latencies: list[float]) -> tuple[float, float]:
    """p50 and p99 (nearest rank) of latencies in seconds, in ms; nan when there are none.

    >>> percentiles_ms([0.001 * i for i in range(1, 101)])
    (50.0, 99.0)
    """
    if not latencies:
        return float("nan"), float("nan")
    ordered = np.sort(np.asarray(latencies))
    ranks = np.ceil(np.array([0.5, 0.99]) * len(ordered)).astype(int) - 1
    p50, p99 = 1000.0 * ordered[ranks]
    return round(float(p50), 1), round(float(p99), 1)


# ------------------------------------------------------------------------------------ threads


@dataclass
class SteadyProducer:
    """Produces the bench stream at ``rate`` records/s in a thread, noting each record's ``ts`` by its
    number (``sent[i]``), so the reader can compute latencies without keeping the records."""

    bootstrap: str
    topic: str
    rate: float
    capacity: int
    linger_ms: int
    sent: np.ndarray = field(init=False)
    produced: int = 0
    failures: list[str] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def __post_init__(self) -> None:
        self.sent = np.full(self.capacity, np.nan)

    def start(self) -> SteadyProducer:
        self._thread = threading.Thread(target=self._run, name="soak-producer", daemon=True)
        self._thread.start()
        return self

    def _run(self) -> None:
        producer = Producer(
            {
                "bootstrap.servers": self.bootstrap,
                "enable.idempotence": True,
                "acks": "all",
                "linger.ms": self.linger_ms,
                "partitioner": "murmur2_random",
            }
        )
        rows = stream().iterate(0)
        bucket = TokenBucket(
            self.rate, max(1, min(MAX_BURST_RECORDS, int(self.rate / 100))), time.monotonic()
        )
        while not self._stop.is_set() and self.produced < self.capacity:
            granted = bucket.take(min(MAX_BURST_RECORDS, self.capacity - self.produced), time.monotonic())
            for _ in range(granted):
                x, y = next(rows)
                i, ts = self.produced, time.time()
                record_id = f"s-{i:09d}"
                self.sent[i] = ts
                self._send(producer, record_id.encode(), feature_record(record_id, x, y, ts))
                self.produced += 1
            producer.poll(0)
            if granted == 0:
                self._stop.wait(bucket.wait_time(time.monotonic()))
        producer.flush(30)

    def _send(self, producer: Producer, key: bytes, value: bytes) -> None:
        while True:
            try:
                producer.produce(self.topic, value=value, key=key, on_delivery=self._delivered)
                return
            except BufferError:
                producer.poll(0.05)

    def _delivered(self, err: KafkaError | None, _msg: Message) -> None:
        if err is not None:
            self.failures.append(err.str())

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(60)


@dataclass
class PredictionReader:
    """Reads the predictions topic in a thread; each prediction's latency is the time it was read
    minus its record's ``ts`` (from `SteadyProducer.sent`). `take` hands over the latencies so far."""

    bootstrap: str
    topic: str
    partitions: int
    sent: np.ndarray
    fetch_wait_ms: int
    delivered: int = 0
    _latencies: list[float] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> PredictionReader:
        consumer = Consumer(
            {
                "bootstrap.servers": self.bootstrap,
                "group.id": f"soak-reader-{uuid.uuid4().hex[:8]}",
                "enable.auto.commit": False,
                "fetch.wait.max.ms": self.fetch_wait_ms,
            }
        )
        consumer.assign([TopicPartition(self.topic, p, 0) for p in range(self.partitions)])
        self._thread = threading.Thread(target=self._run, args=(consumer,), name="soak-reader", daemon=True)
        self._thread.start()
        return self

    def _run(self, consumer: Consumer) -> None:
        try:
            while not self._stop.is_set():
                batch = [m for m in consumer.consume(10_000, 0.05) if m.error() is None]
                if not batch:
                    continue
                now = time.time()
                latencies = [now - self.sent[_record_number(m)] for m in batch]
                with self._lock:
                    self._latencies.extend(latencies)
                    self.delivered += len(batch)
        finally:
            consumer.close()

    def take(self) -> list[float]:
        with self._lock:
            taken, self._latencies = self._latencies, []
        return taken

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(10)


def _record_number(prediction: Message) -> int:
    """The number of the input record a prediction answers (from its ``id``)."""
    return record_index(orjson.loads(prediction.value() or b"{}")["id"])


# ------------------------------------------------------------------------------------ the run


@dataclass(frozen=True)
class SoakOptions:
    seconds: float
    rate: float = DEFAULT_RATE
    partitions: int = DEFAULT_PARTITIONS
    interval_s: float = DEFAULT_INTERVAL_S
    stall_s: float = DEFAULT_STALL_S
    fetch_wait_ms: int = WORKER_FETCH_WAIT_MS
    input_linger_ms: int = INPUT_LINGER_MS
    model: str | None = None  # (None: the worker's default)
    keep: bool = False


@dataclass(frozen=True)
class SoakRow:
    """One interval of the soak: totals so far, the interval's rate and latency, memory now."""

    minutes: float
    produced: int
    delivered: int
    rate: int  # predictions delivered per second over the interval
    p50_ms: float
    p99_ms: float
    rss_mb: int
    model_bytes: dict[int, int]

    def __str__(self) -> str:
        shown = " ".join(f"p{p}:{b / 1e6:.2f}MB" for p, b in self.model_bytes.items())
        return (
            f"{self.minutes:>6} {self.produced:>10} {self.delivered:>10} {self.rate:>7} "
            f"{self.p50_ms:>8} {self.p99_ms:>8} {self.rss_mb:>7}  {shown}"
        )


HEADER = (
    f"{'min':>6} {'produced':>10} {'delivered':>10} {'rec/s':>7} {'p50 ms':>8} {'p99 ms':>8} "
    f"{'RSS MB':>7}  model bytes per partition"
)


def soak(options: SoakOptions) -> list[SoakRow]:
    """Run the soak; print and return one row per interval. Raises Stalled on a stall."""
    rows: list[SoakRow] = []
    timing = ClientTuning(linger_ms=WORKER_LINGER_MS)
    chosen = () if options.model is None else ("--model", options.model)
    extra = ("--fetch-wait-max-ms", str(options.fetch_wait_ms), *chosen)
    with bench_session(options.keep, timing, extra) as bench:
        topics = bench.topics(options.partitions, "features", "predictions", "dead")
        process, port = bench.start_worker(
            topics, f"soak-{uuid.uuid4().hex[:8]}", Path(tempfile.mkdtemp(prefix="soak-ckpt-")), "soak-worker"
        )
        bootstrap = bench.broker.bootstrap_servers
        capacity = int(options.rate * (options.seconds + 2 * START_LIMIT_S)) + 1
        producer = SteadyProducer(
            bootstrap, topics["features"], options.rate, capacity, options.input_linger_ms
        )
        reader = PredictionReader(
            bootstrap, topics["predictions"], options.partitions, producer.sent, options.fetch_wait_ms
        )
        try:
            reader.start()
            producer.start()
            started = time.monotonic()
            _wait_first(reader, process, started)
            print(
                f"soak: worker delivering after {time.monotonic() - started:.1f} s; "
                f"{options.rate:g} records/s over {options.partitions} partitions "
                f"for {options.seconds / 60:g} min",
                flush=True,
            )
            print(HEADER, flush=True)
            rows = _watch(options, producer, reader, process, port, time.monotonic())
        finally:
            producer.close()
            reader.close()
            code = stop(process)
        if producer.failures:
            raise Stalled(f"{len(producer.failures)} input records failed: {producer.failures[:3]}")
        print(f"soak: done; the worker exited with code {code}", flush=True)
    return rows


def _wait_first(reader: PredictionReader, process: subprocess.Popen[bytes], started: float) -> None:
    while reader.delivered == 0:
        _check_alive(process)
        if time.monotonic() - started > START_LIMIT_S:
            raise Stalled(f"no prediction within {START_LIMIT_S:g} s of the start")
        time.sleep(0.1)
    reader.take()  # the start-up backlog is not part of the steady latency


def _check_alive(process: subprocess.Popen[bytes]) -> None:
    code = process.poll()
    if code is not None:
        raise Stalled(f"the worker process exited with code {code}")


def _watch(
    options: SoakOptions,
    producer: SteadyProducer,
    reader: PredictionReader,
    process: subprocess.Popen[bytes],
    port: int,
    began: float,
) -> list[SoakRow]:
    rows: list[SoakRow] = []
    watch = StallWatch(options.stall_s, reader.delivered, began)
    last_delivered, last_time = reader.delivered, began
    next_row = began + options.interval_s
    end = began + options.seconds
    while True:
        now = time.monotonic()
        _check_alive(process)
        watch.check(reader.delivered, now)
        if now >= next_row or now >= end:
            delivered = reader.delivered
            p50, p99 = percentiles_ms(reader.take())
            row = SoakRow(
                minutes=round((now - began) / 60.0, 2),
                produced=producer.produced,
                delivered=delivered,
                rate=round((delivered - last_delivered) / max(now - last_time, 1e-9)),
                p50_ms=p50,
                p99_ms=p99,
                rss_mb=round(rss_bytes(process.pid) / 2**20),
                model_bytes=model_bytes(http_get(port, "/metrics")[1]),
            )
            rows.append(row)
            print(row, flush=True)
            last_delivered, last_time, next_row = delivered, now, next_row + options.interval_s
            if now >= end:
                return rows
        time.sleep(min(1.0, max(0.0, min(next_row, end) - time.monotonic())))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tests.bench.bench_soak", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--minutes", type=float, default=30.0, help="length of the steady run (default 30)")
    parser.add_argument("--rate", type=float, default=DEFAULT_RATE, help="input records/s (default 1000)")
    parser.add_argument("--partitions", type=int, default=DEFAULT_PARTITIONS)
    parser.add_argument("--interval", type=float, default=DEFAULT_INTERVAL_S, help="seconds between rows")
    parser.add_argument(
        "--stall-seconds",
        type=float,
        default=DEFAULT_STALL_S,
        help="fail after this long without a prediction",
    )
    parser.add_argument(
        "--fetch-wait-ms",
        type=int,
        default=WORKER_FETCH_WAIT_MS,
        help="worker's and reader's fetch.wait.max.ms",
    )
    parser.add_argument(
        "--input-linger-ms", type=int, default=INPUT_LINGER_MS, help="input producer's linger.ms"
    )
    parser.add_argument("--model", choices=MODELS, help="the worker's model (default: the worker's default)")
    parser.add_argument("--keep", action="store_true", help="keep the logs (the worker's and Tansu's)")
    args = parser.parse_args(argv)
    if not (args.minutes > 0 and args.rate > 0 and args.partitions >= 1 and args.interval > 0):
        parser.error("--minutes, --rate and --interval must be > 0 and --partitions >= 1")
    options = SoakOptions(
        seconds=60.0 * args.minutes,
        rate=args.rate,
        partitions=args.partitions,
        interval_s=args.interval,
        stall_s=args.stall_seconds,
        fetch_wait_ms=args.fetch_wait_ms,
        input_linger_ms=args.input_linger_ms,
        model=args.model,
        keep=args.keep,
    )
    try:
        soak(options)
    except Stalled as exc:
        print(f"\nSOAK FAILED: {exc}\n", file=sys.stderr, flush=True)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
