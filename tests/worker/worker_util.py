"""Helpers for the worker's end-to-end tests: worker processes and threads, waiting, and the offline
reference.

Workers run as real ``python -m worker run`` processes (so SIGTERM and SIGKILL are real) against the
session's broker on loopback, or as :class:`WorkerThread` inside the test process, whose outcome the
test asserts; results are read back from the broker and the checkpoint files.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import pytest
from confluent_kafka import Consumer, TopicPartition

from sgt.evaluation import Prequential
from worker.checkpoints.file_store import read_newest
from worker.config import WorkerSettings, load_settings
from worker.core.partition_state import split_state
from worker.core.sgt_models import new_model
from worker.kafka.loop import Worker

FAST = ["--session-timeout-ms", "6000", "--heartbeat-interval-ms", "1000", "--fetch-wait-max-ms", "10"]


def inprocess_settings(bootstrap: str, topics: dict[str, str], ckpt: Path, **extra: object) -> WorkerSettings:
    """Settings for a worker run inside the test process: a fresh group, the ``topics`` (``features``,
    ``predictions``, ``dead``, optionally ``labels``), fast group timing, any free metrics port."""
    values: dict[str, object] = {
        "bootstrap_servers": bootstrap,
        "group_id": f"inproc-{uuid.uuid4().hex[:8]}",
        "features_topic": topics["features"],
        "labels_topic": topics.get("labels"),
        "predictions_topic": topics["predictions"],
        "dead_letter_topic": topics["dead"],
        "checkpoint_dir": str(ckpt),
        "session_timeout_ms": 6000,
        "heartbeat_interval_ms": 1000,
        # the embedded broker holds a fetch at the tail for the whole wait: keep the tests' latency low
        "fetch_wait_max_ms": 10,
        "metrics_port": 0,
        **extra,
    }
    return load_settings(values, env={})


class WorkerThread:
    """A :class:`~worker.kafka.loop.Worker` running in a daemon thread of the test process.

    What :meth:`Worker.run` raises is kept rather than left to the thread's excepthook (where pytest
    only warns about it): :meth:`stop` and :meth:`join` return it, None for a clean stop, so the test
    asserts the outcome, and the ``worker_threads`` fixture fails a test whose worker raised
    something the test never read.
    """

    def __init__(self, worker: Worker) -> None:
        self.worker = worker
        self.error: BaseException | None = None
        self.read = False  # the test has read the outcome
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            self.worker.run()
        except BaseException as exc:  # the test's to assert: see join()
            self.error = exc

    def join(self, timeout: float = 60.0) -> BaseException | None:
        """Wait for the worker to end by itself; what its run raised, or None."""
        self._thread.join(timeout)
        assert not self._thread.is_alive(), f"the worker still runs after {timeout:g} s"
        self.read = True
        return self.error

    def stop(self, timeout: float = 60.0) -> BaseException | None:
        """Stop the worker and wait for it; what its run raised (None: a clean stop)."""
        self.worker.stop()
        return self.join(timeout)


@pytest.fixture(name="worker_threads")
def worker_threads_fixture() -> Iterator[Callable[..., WorkerThread]]:
    """The ``worker_threads`` fixture, ``start(settings, **worker_options)``: import it into a test module
    to use it there. At teardown the workers still running are stopped, and a worker that raised
    without the test reading it fails the test."""
    started: list[WorkerThread] = []

    def start(settings: WorkerSettings, **options: Any) -> WorkerThread:
        started.append(WorkerThread(Worker(settings, **options)))
        return started[-1]

    yield start
    unread = [t for t in started if not t.read]
    errors = [error for error in (t.stop() for t in unread) if error is not None]
    if errors:
        pytest.fail(f"a worker thread raised and the test did not check it: {errors!r}")


def committed_offset(bootstrap: str, group: str, topic: str, partition: int) -> int:
    """The group's committed next offset of one topic partition (-1001 when none is)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        (found,) = consumer.committed([TopicPartition(topic, partition)], timeout=30)
    finally:
        consumer.close()
    return int(found.offset)


def topic_args(bootstrap: str, group: str, topics: dict[str, str], ckpt: Path) -> list[str]:
    """The ``sgt-worker run`` flags naming the broker, group, topics and checkpoint directory."""
    args = [
        "--bootstrap-servers",
        bootstrap,
        "--group-id",
        group,
        "--features-topic",
        topics["features"],
        "--predictions-topic",
        topics["predictions"],
        "--dead-letter-topic",
        topics["dead"],
        "--checkpoint-dir",
        str(ckpt),
    ]
    if "labels" in topics:
        args += ["--labels-topic", topics["labels"]]
    return args


def worker_args(bootstrap: str, group: str, topics: dict[str, str], ckpt: Path, *extra: str) -> list[str]:
    """The tests' flags: `topic_args`, an ephemeral metrics port, debug logs and fast group timing."""
    return [
        *topic_args(bootstrap, group, topics, ckpt),
        "--metrics-port",
        "0",
        "--log-level",
        "debug",
        *FAST,
        *extra,
    ]


class WorkerProcess:
    """A ``python -m worker run`` process whose JSON log goes to a file."""

    def __init__(self, args: list[str], log_path: Path) -> None:
        self.log_path = log_path
        self._log = open(log_path, "ab")  # noqa: SIM115 - closed in stop()
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "worker", "run", *args],
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env=env,
            cwd=Path(__file__).resolve().parents[2],
        )

    def log_count(self, text: str) -> int:
        return self.log_path.read_text(errors="replace").count(text)

    def log_events(self, msg: str) -> list[dict[str, Any]]:
        """The JSON log lines with this message, in order."""
        events = []
        for line in self.log_path.read_text(errors="replace").splitlines():
            if line.startswith("{") and f'"msg":"{msg}"' in line:
                events.append(orjson.loads(line))
        return events

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 60.0) -> int | None:
        with contextlib.suppress(ProcessLookupError):
            self.proc.send_signal(sig)
        try:
            code = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)
            code = None
        self._log.close()
        return code


def wait_for(predicate: Callable[[], bool], timeout: float, what: str, interval: float = 0.1) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")


def checkpoint_headers(ckpt: Path, partitions: int) -> dict[int, tuple[dict[str, Any], bytes]]:
    """Header and model bytes of the newest valid checkpoint of every partition that has one."""
    out = {}
    for p in range(partitions):
        loaded = read_newest(ckpt, p)
        if loaded is not None:
            out[p] = split_state(loaded.payload)
    return out


def caught_up(ckpt: Path, ends: dict[str, dict[int, int]]) -> bool:
    """Every partition's checkpoint has reached the ends of both topics."""
    partitions = len(ends["features"])
    states = checkpoint_headers(ckpt, partitions)
    if len(states) != partitions:
        return False
    for p, (header, _) in states.items():
        want = [ends["features"][p], ends.get("labels", {}).get(p, 0)]
        if header["next_offsets"] != want:
            return False
    return True


def offline_classification(
    rows: list[tuple[dict[str, Any], Any]], scores: list[tuple[Any, int]], flags: dict[str, Any] | None = None
) -> tuple[bytes, dict[str, Any]]:
    """Run sgt offline: ``predict_learn_many`` over ``(x, y or None)`` rows in order, then score.

    ``scores`` lists ``(true label, row whose prediction it scores)`` in the order labels became
    known. Returns the model bytes and the Prequential state. The model has the hyperparameters of
    a worker's fresh model with default settings, or with the settings ``flags`` gives.
    """
    model = new_model(load_settings(flags or {}, env={}))
    metrics = Prequential("classification", 1000)
    proba = model.predict_learn_many([r[0] for r in rows], [r[1] for r in rows])
    classes = list(model.classes_)
    for y, row in scores:
        p = proba[row]
        predicted = classes[int(np.argmax(p))] if classes and p.max() > 0 else None
        row = p.tolist()
        # p_sq: the sum of the squared published probabilities, for the Brier score, as the worker sums them
        metrics.update(
            y, predicted, dict(zip(classes, row, strict=True)).get(y, 0.0), sum(q * q for q in row)
        )
    return model.to_bytes(), metrics.to_dict()


def samples(text: str) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    """Prometheus exposition text as ``{(sample name, labels): value}``."""
    from prometheus_client.parser import text_string_to_metric_families

    out = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            out[(sample.name, frozenset(sample.labels.items()))] = sample.value
    return out


def value(
    parsed: dict[tuple[str, frozenset[tuple[str, str]]], float], name: str, **labels: str
) -> float | None:
    return parsed.get((name, frozenset(labels.items())))


@contextlib.contextmanager
def worker_processes() -> Iterator[Callable[[list[str], Path], WorkerProcess]]:
    """Yields ``start(args, log_path)``; processes still running at the end are killed."""
    started: list[WorkerProcess] = []

    def start(args: list[str], log_path: Path) -> WorkerProcess:
        process = WorkerProcess(args, log_path)
        started.append(process)
        return process

    try:
        yield start
    finally:
        for process in started:
            if process.proc.poll() is None:
                process.stop(signal.SIGKILL, timeout=10)


@pytest.fixture(name="start_worker")
def start_worker_fixture() -> Iterator[Callable[[list[str], Path], WorkerProcess]]:
    """The ``start_worker`` fixture: import it into a test module to use it there."""
    with worker_processes() as start:
        yield start
