"""`sgt-worker produce`: a rate-limited load generator for the worker's input topics.

Records come from a synthetic stream (`worker.devtools.streams`) or from a CSV / JSON-lines file, and are
written as feature records ``{"id", "x", "y"?, "ts"}`` keyed by ``id``. Labels are either inline (``y`` in the
feature record) or, when a labels topic is given, sent separately as ``{"id", "y"}`` with the same key
(so they land in the same partition number), optionally ``label_delay`` seconds later. ``ts`` is the
wall-clock time at which the feature record was handed to the producer, so prediction latency can be
measured from it. Pacing is a token bucket: at most ``rate`` records per second on average, with bursts
of at most ``burst`` records.

The producer is idempotent (``acks=all``) and partitions keys with murmur2, as Java clients do.
`produce_stream` is the plain function behind the command; the demo runs it in a thread and stops it
with a `threading.Event`.

Example (needs a broker, so not run here)::

    >>> from worker.devtools.streams import make_stream
    >>> result = produce_stream("127.0.0.1:9092", "features", None, make_stream("sea"),
    ...                         count=10_000, rate=2_000)            # doctest: +SKIP
    >>> result.features                                              # doctest: +SKIP
    10000
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import dataclasses
import os
import signal
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from types import FrameType
from typing import IO, Any

import orjson
from confluent_kafka import KafkaError, Message, Producer

from worker.devtools.embedded_broker import create_topics
from worker.devtools.streams import DEMO_STREAM, STREAMS, Features, Label, Stream, make_stream

Row = tuple[Features, Label | None]

PRODUCER_DEFAULTS: Mapping[str, Any] = {
    "enable.idempotence": True,
    "acks": "all",
    "linger.ms": 5,
    "partitioner": "murmur2_random",
    "queue.buffering.max.messages": 500_000,
}
MAX_BURST_RECORDS = 1000
PROGRESS_INTERVAL_S = 1.0


class TokenBucket:
    """Token-bucket pacing: ``rate`` tokens per second, at most ``burst`` stored; starts full.

    Pure arithmetic on the times it is given, so it is exact to test and cheap to call.

    >>> bucket = TokenBucket(rate=100.0, burst=5, now=0.0)
    >>> bucket.take(10, now=0.0)
    5
    >>> bucket.take(10, now=0.0), bucket.wait_time(now=0.0)
    (0, 0.01)
    >>> bucket.take(10, now=0.5)
    5
    """

    def __init__(self, rate: float, burst: int, now: float) -> None:
        if rate <= 0 or burst < 1:
            raise ValueError("rate must be > 0 and burst >= 1")
        self.rate = rate
        self.burst = burst
        self._tokens = float(burst)
        self._updated = now

    def _refill(self, now: float) -> None:
        elapsed = max(0.0, now - self._updated)
        self._tokens = min(float(self.burst), self._tokens + elapsed * self.rate)
        self._updated = max(self._updated, now)

    def take(self, wanted: int, now: float) -> int:
        """Take up to ``wanted`` whole tokens available at ``now``; returns how many were taken."""
        self._refill(now)
        granted = min(wanted, int(self._tokens))
        self._tokens -= granted
        return granted

    def wait_time(self, now: float) -> float:
        """Seconds from ``now`` until one whole token is available (0 if one is)."""
        self._refill(now)
        return max(0.0, (1.0 - self._tokens) / self.rate)


@dataclasses.dataclass
class ProduceResult:
    """What `produce_stream` sent: records handed to the producer, failures reported back, time taken."""

    features: int = 0
    labels: int = 0
    failed: int = 0
    seconds: float = 0.0
    error: str | None = None  # why the rows ended early: a row of the input file that could not be read

    @property
    def rate(self) -> float:
        """Feature records per second over the run."""
        return self.features / self.seconds if self.seconds > 0 else 0.0


class _Sender:
    """One producer plus the bookkeeping of what it sent and what failed."""

    def __init__(self, bootstrap: str, config: Mapping[str, Any] | None) -> None:
        self.producer = Producer({"bootstrap.servers": bootstrap, **PRODUCER_DEFAULTS, **(config or {})})
        self.failures: list[KafkaError] = []

    def _on_delivery(self, err: KafkaError | None, _msg: Message) -> None:
        if err is not None:
            self.failures.append(err)

    def send(self, topic: str, key: bytes, value: bytes) -> None:
        while True:
            try:
                self.producer.produce(topic, value=value, key=key, on_delivery=self._on_delivery)
                return
            except BufferError:  # local queue full: serve delivery reports, then retry
                self.producer.poll(0.05)

    def flush(self, timeout_s: float) -> int:
        """Wait for outstanding deliveries; returns how many records are still undelivered."""
        return int(self.producer.flush(timeout_s))


def feature_record(record_id: str, x: Features, y: Label | None, ts: float) -> bytes:
    """The JSON feature record; ``y`` is left out when None (label sent separately or unknown).

    >>> feature_record("s-000001", {"a": 1.5, "plan": "pro"}, 1, 10.25)
    b'{"id":"s-000001","x":{"a":1.5,"plan":"pro"},"y":1,"ts":10.25}'
    """
    doc: dict[str, Any] = {"id": record_id, "x": x}
    if y is not None:
        doc["y"] = y
    doc["ts"] = ts
    return orjson.dumps(doc)


def label_record(record_id: str, y: Label) -> bytes:
    """The JSON label record.

    >>> label_record("s-000001", 0)
    b'{"id":"s-000001","y":0}'
    """
    return orjson.dumps({"id": record_id, "y": y})


def produce_stream(
    bootstrap: str,
    features_topic: str,
    labels_topic: str | None,
    stream: Stream | Iterable[Row],
    count: int | None,
    rate: float | None,
    *,
    duration: float | None = None,
    label_delay: float = 0.0,
    stop: threading.Event | None = None,
    start_id: int = 0,
    id_prefix: str = "s-",
    partitions: int | None = None,
    burst: int | None = None,
    producer_config: Mapping[str, Any] | None = None,
    progress: Callable[[ProduceResult], None] | None = None,
    flush_timeout_s: float = 60.0,
) -> ProduceResult:
    """Produce feature (and label) records from ``stream`` until ``count`` records, ``duration``
    seconds, the end of the stream or ``stop`` is set, whichever comes first; then flush.

    ``rate`` is in records per second (None or 0: as fast as possible). Record ``i`` (counting from
    ``start_id``) has id ``f"{id_prefix}{i:06d}"``; for a synthetic stream it is row ``i`` of the
    stream. With ``labels_topic`` the labels go there ``label_delay`` seconds after their features;
    labels still waiting when production ends are sent at their due time unless ``stop`` is set,
    in which case they are dropped. With ``partitions``, missing topics are created first. A row of
    a file that cannot be read ends production there, with ``error`` saying why in the result; the
    rows before it are delivered as usual.
    ``progress`` is called about once a second with the running totals.
    """
    if partitions is not None:
        create_topics(bootstrap, [t for t in (features_topic, labels_topic) if t], partitions)
    stop = stop or threading.Event()
    rows: Iterator[Row] = stream.iterate(start_id) if isinstance(stream, Stream) else iter(stream)
    sender = _Sender(bootstrap, producer_config)
    result = ProduceResult()
    waiting: deque[tuple[float, bytes, bytes]] = deque()  # labels by due time (constant delay: FIFO)
    started = time.monotonic()
    bucket = TokenBucket(rate, burst or _default_burst(rate), started) if rate else None
    deadline = started + duration if duration is not None else None
    next_progress = started + PROGRESS_INTERVAL_S
    index = start_id
    exhausted = False
    while not exhausted and not stop.is_set() and (count is None or result.features < count):
        now = time.monotonic()
        if deadline is not None and now >= deadline:
            break
        wanted = MAX_BURST_RECORDS if count is None else min(MAX_BURST_RECORDS, count - result.features)
        granted = wanted if bucket is None else bucket.take(wanted, now)
        for _ in range(granted):
            try:
                row = next(rows, None)
            except InputFileError as exc:  # stop there, but deliver every row before it
                result.error, row = str(exc), None
            if row is None:
                exhausted = True
                break
            _send_row(
                sender, features_topic, labels_topic, label_delay, waiting, f"{id_prefix}{index:06d}", row
            )
            result.features += 1
            index += 1
        result.labels += _send_due_labels(sender, labels_topic, waiting, time.monotonic())
        sender.producer.poll(0)
        if progress is not None and time.monotonic() >= next_progress:
            next_progress = time.monotonic() + PROGRESS_INTERVAL_S
            progress(_snapshot(result, sender, started))
        if bucket is not None and granted == 0:
            stop.wait(_pause(bucket, waiting, deadline))
    result.labels += _drain_labels(sender, labels_topic, waiting, stop)
    undelivered = sender.flush(flush_timeout_s)
    final = _snapshot(result, sender, started)
    final.failed += undelivered
    return final


def _default_burst(rate: float | None) -> int:
    """About 10 ms worth of records: smooth enough for latency runs, coarse enough to be cheap."""
    return max(1, min(MAX_BURST_RECORDS, int((rate or 0) / 100)))


def _pause(bucket: TokenBucket, waiting: deque[tuple[float, bytes, bytes]], deadline: float | None) -> float:
    """How long to sleep: until the next token, a label falls due or the deadline, whichever is first."""
    now = time.monotonic()
    pause = bucket.wait_time(now)
    if waiting:
        pause = min(pause, max(0.0, waiting[0][0] - now))
    if deadline is not None:
        pause = min(pause, max(0.0, deadline - now))
    return pause


def _send_row(
    sender: _Sender,
    features_topic: str,
    labels_topic: str | None,
    label_delay: float,
    waiting: deque[tuple[float, bytes, bytes]],
    record_id: str,
    row: Row,
) -> None:
    x, y = row
    key = record_id.encode()
    inline = y if labels_topic is None else None
    sender.send(features_topic, key, feature_record(record_id, x, inline, time.time()))
    if labels_topic is not None and y is not None:
        waiting.append((time.monotonic() + label_delay, key, label_record(record_id, y)))


def _send_due_labels(
    sender: _Sender, labels_topic: str | None, waiting: deque[tuple[float, bytes, bytes]], now: float
) -> int:
    sent = 0
    while waiting and waiting[0][0] <= now:
        _, key, value = waiting.popleft()
        assert labels_topic is not None
        sender.send(labels_topic, key, value)
        sent += 1
    return sent


def _drain_labels(
    sender: _Sender,
    labels_topic: str | None,
    waiting: deque[tuple[float, bytes, bytes]],
    stop: threading.Event,
) -> int:
    """Send the labels still waiting, each at its due time, unless ``stop`` is set."""
    sent = 0
    while waiting and not stop.is_set():
        sent += _send_due_labels(sender, labels_topic, waiting, time.monotonic())
        sender.producer.poll(0)
        if waiting:
            stop.wait(max(0.0, waiting[0][0] - time.monotonic()))
    return sent


def _snapshot(result: ProduceResult, sender: _Sender, started: float) -> ProduceResult:
    return dataclasses.replace(result, failed=len(sender.failures), seconds=time.monotonic() - started)


# ---------------------------------------------------------------------------------------------- files


def _scalar(text: str) -> float | int | str | None:
    """A CSV cell as a number when it reads as one (int before float), None when empty, else the text."""
    if text == "":
        return None
    for parse in (int, float):
        try:
            return parse(text)
        except ValueError:
            continue
    return text


class InputFileError(ValueError):
    """A row of the input file that cannot be read, named by file and line."""


def read_rows(path: str | Path, target: str | None) -> Iterator[Row]:
    """Rows of a CSV file (with a header) or a JSON-lines file (one object per line).

    The ``target`` column becomes the label (None when absent or empty); every other column is a
    feature. The format follows the suffix: ``.csv`` is CSV, anything else is JSON lines. Values
    are parsed as data only (orjson / csv), never evaluated. A row that cannot be read (not UTF-8,
    not JSON, not an object, a CSV row whose field count differs from the header's) raises
    :class:`InputFileError` when the iteration reaches it, once the rows before it have been yielded.
    """
    path = Path(path)
    rows = _csv_rows(path) if path.suffix.lower() == ".csv" else _json_rows(path)
    for columns in rows:
        y = columns.pop(target, None) if target is not None else None
        yield columns, y


def _csv_rows(path: Path) -> Iterator[dict[str, Any]]:
    with path.open("rb") as handle:
        reader = csv.reader(_text_lines(path, handle))
        try:
            header = next(reader, [])
            for row in reader:
                if not row:  # a blank line
                    continue
                if len(row) != len(header):
                    raise InputFileError(
                        f"{path}:{reader.line_num}: {len(row)} fields, the header has {len(header)}"
                    )
                yield {name: _scalar(value) for name, value in zip(header, row, strict=True)}
        except csv.Error as exc:
            raise InputFileError(f"{path}:{reader.line_num}: {exc}") from None


def _text_lines(path: Path, handle: IO[bytes]) -> Iterator[str]:
    """The file's lines as text, decoded one at a time so that a decoding error names its line.

    The first line may start with a UTF-8 byte order mark (spreadsheets write one), which is dropped.
    """
    for number, raw in enumerate(handle, start=1):
        try:
            yield raw.decode("utf-8-sig" if number == 1 else "utf-8")
        except UnicodeDecodeError:
            raise InputFileError(f"{path}:{number}: not UTF-8 text") from None


def _json_rows(path: Path) -> Iterator[dict[str, Any]]:
    with path.open("rb") as handle:
        for number, line in enumerate(_text_lines(path, handle), start=1):
            if not line.strip():
                continue
            try:
                doc = orjson.loads(line)
            except orjson.JSONDecodeError as exc:
                raise InputFileError(f"{path}:{number}: not JSON ({exc})") from None
            if not isinstance(doc, dict):
                raise InputFileError(f"{path}:{number}: expected a JSON object per line")
            yield doc


# ------------------------------------------------------------------------------------------------ CLI


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the ``produce`` subcommand's options to ``parser``."""
    env = os.environ.get
    parser.add_argument(
        "--bootstrap-servers",
        default=env("SGT_BOOTSTRAP_SERVERS", "localhost:9092"),
        help="Kafka bootstrap servers (env SGT_BOOTSTRAP_SERVERS; default localhost:9092).",
    )
    parser.add_argument("--features-topic", default=env("SGT_FEATURES_TOPIC", "features"))
    parser.add_argument(
        "--labels-topic",
        default=env("SGT_LABELS_TOPIC") or None,
        help="Send labels here as {id, y} instead of inline (default: inline labels).",
    )
    parser.add_argument(
        "--partitions", type=int, default=4, help="Partitions of topics created when missing (default 4)."
    )
    source = parser.add_mutually_exclusive_group()
    source.add_argument("--stream", choices=sorted(STREAMS), default=DEMO_STREAM, help="Synthetic stream.")
    source.add_argument(
        "--file",
        type=Path,
        help="CSV (with header) or JSON-lines file to replay; a row that cannot be read stops it there "
        "(exit 2, naming the line) after the rows before it are delivered.",
    )
    parser.add_argument("--target", default="y", help="Label column of --file (default y).")
    parser.add_argument("--seed", type=int, default=42, help="Seed of the synthetic stream.")
    parser.add_argument(
        "--rate",
        type=float,
        default=1000.0,
        help="Records per second; 0 = as fast as possible (default 1000).",
    )
    limit = parser.add_mutually_exclusive_group()
    limit.add_argument("--count", type=int, help="Stop after this many records.")
    limit.add_argument("--duration", type=float, help="Stop after this many seconds.")
    parser.add_argument(
        "--label-delay", type=float, default=0.0, help="Seconds between features and their label."
    )
    parser.add_argument("--start-id", type=int, default=0, help="Number of the first record id.")
    parser.add_argument("--id-prefix", default="s-", help="Prefix of record ids (default s-).")


def argument_problem(args: argparse.Namespace) -> str | None:
    """What is wrong with the options, checked before connecting; None when nothing."""
    if not args.rate >= 0:  # also refuses nan
        return f"--rate must be >= 0 records per second (0: as fast as possible), got {args.rate:g}"
    if args.count is not None and args.count < 0:
        return f"--count must be >= 0, got {args.count}"
    if args.duration is not None and not args.duration > 0:
        return f"--duration must be > 0 seconds, got {args.duration:g}"
    if args.partitions < 1:
        return f"--partitions must be >= 1, got {args.partitions}"
    if not args.label_delay >= 0:
        return f"--label-delay must be >= 0 seconds, got {args.label_delay:g}"
    if args.label_delay > 0 and not args.labels_topic:
        return "--label-delay needs --labels-topic"
    return None


def run(args: argparse.Namespace) -> int:
    """Run ``sgt-worker produce``; returns the exit code (0 when every record was delivered)."""
    problem = argument_problem(args)
    if problem is not None:
        print(f"produce: {problem}", file=sys.stderr)
        return 2
    source: Stream | Iterable[Row]
    if args.file is not None:
        try:
            Path(args.file).open("rb").close()  # fail before connecting: the rows are read lazily
        except OSError as exc:
            print(f"produce: cannot read --file {args.file}: {exc.strerror}", file=sys.stderr)
            return 2
        source = read_rows(args.file, args.target)
    else:
        source = make_stream(args.stream, seed=args.seed)
    stop = threading.Event()
    with _stop_on_signals(stop):
        result = produce_stream(
            args.bootstrap_servers,
            args.features_topic,
            args.labels_topic,
            source,
            args.count,
            args.rate or None,
            duration=args.duration,
            label_delay=args.label_delay,
            stop=stop,
            start_id=args.start_id,
            id_prefix=args.id_prefix,
            partitions=args.partitions,
            progress=_print_progress,
        )
    _print_progress(result, final=True)
    if result.error is not None:
        print(f"produce: stopped at a bad row: {result.error}", file=sys.stderr)
        return 2
    return 0 if result.failed == 0 else 1


def _print_progress(result: ProduceResult, final: bool = False) -> None:
    word = "produced" if final else "producing:"
    failed = f", {result.failed} failed" if result.failed else ""
    print(
        f"{word} {result.features} features, {result.labels} labels in {result.seconds:.1f} s "
        f"({result.rate:,.0f} records/s){failed}",
        file=sys.stderr,
        flush=True,
    )


@contextlib.contextmanager
def _stop_on_signals(stop: threading.Event) -> Iterator[None]:
    """Set ``stop`` on SIGINT / SIGTERM while active, so production ends cleanly with a flush."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handle(_signum: int, _frame: FrameType | None) -> None:
        stop.set()

    previous = {sig: signal.signal(sig, handle) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
