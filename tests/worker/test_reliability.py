"""The partition runtime, checkpoint protocol and rebalance handling with fake clients (no broker): a
producer whose deliveries fail, a slow disk, positions past a topic's end, readiness."""

from __future__ import annotations

import errno
import logging
import shutil
import threading
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import orjson
import pytest
from confluent_kafka import OFFSET_BEGINNING, KafkaError, KafkaException, TopicPartition

from tests.worker.stub_model import StubModel
from tests.worker.worker_util import samples, value
from worker.checkpoints import file_store
from worker.checkpoints.backoff import FIRST_RETRY_S
from worker.config import load_settings
from worker.core.merge import FEATURES
from worker.core.values import Record
from worker.kafka.loop import Worker
from worker.kafka.partition_runtime import AHEAD_GRACE_S
from worker.state_topic.errors import StateTopicFenced, StateWriteError


class FakeMessage:
    def __init__(self, topic: str) -> None:
        self._topic = topic

    def topic(self) -> str:
        return self._topic


class FakeProducer:
    """Deliveries are reported on poll/flush: acknowledged, or failed for good while ``fail`` is set."""

    def __init__(self) -> None:
        self.fail = False
        self.limit = 1_000_000
        self.purged = 0
        self.pending: list[tuple[str, bytes, Any]] = []
        self.delivered: list[tuple[str, bytes]] = []

    def produce(self, topic: str, value: bytes, key: bytes | None = None, **kw: Any) -> None:
        headers = kw.get("headers") or []
        size = len(value) + len(key or b"") + sum(len(n) + len(v) for n, v in headers)
        if size > self.limit:  # as librdkafka refuses a message past message.max.bytes
            raise KafkaException(KafkaError(KafkaError.MSG_SIZE_TOO_LARGE))
        self.pending.append((topic, value, kw["on_delivery"]))

    def poll(self, _timeout: float = 0) -> int:
        pending, self.pending = self.pending, []
        for topic, payload, callback in pending:
            error = KafkaError(KafkaError._MSG_TIMED_OUT) if self.fail else None
            if error is None:
                self.delivered.append((topic, payload))
            callback(error, FakeMessage(topic))
        return len(pending)

    def flush(self, _timeout: float = 0) -> int:
        self.poll()
        return 0

    def purge(self) -> None:
        self.purged += 1


class FakeConsumer:
    """Watermarks per topic (as the last fetch response gave them); seeks and commits are recorded."""

    def __init__(self, high: dict[str, int]) -> None:
        self.high = high
        self.seeks: list[tuple[str, int, int]] = []
        self.commits: list[list[tuple[str, int, int]]] = []

    def get_watermark_offsets(
        self, tp: TopicPartition, timeout: float = 0, cached: bool = False
    ) -> tuple[int, int]:
        return 0, self.high.get(tp.topic, -1)

    def seek(self, tp: TopicPartition) -> None:
        self.seeks.append((tp.topic, tp.partition, tp.offset))

    def pause(self, _tps: list[TopicPartition]) -> None:
        pass

    def resume(self, _tps: list[TopicPartition]) -> None:
        pass

    def assign(self, _tps: list[TopicPartition]) -> None:
        pass

    def commit(self, offsets: list[TopicPartition], asynchronous: bool = True) -> None:
        self.commits.append([(tp.topic, tp.partition, tp.offset) for tp in offsets])


def _worker(ckpt: Path, **extra: Any) -> tuple[Worker, FakeConsumer, FakeProducer]:
    settings = load_settings(
        {"checkpoint_dir": str(ckpt), "features_topic": "f", "checkpoint_records": 5, **extra}, env={}
    )
    worker = Worker(settings, model_factory=StubModel, model_registry={"StubModel": StubModel})
    consumer, producer = FakeConsumer({"f": 0}), FakeProducer()
    worker.clients.consumer, worker.clients.producer = consumer, producer  # type: ignore[assignment]
    worker.rebalancer.on_assign(consumer, [TopicPartition("f", 0)])  # type: ignore[arg-type]
    return worker, consumer, producer


def _feed(worker: Worker, consumer: FakeConsumer, offsets: range) -> None:
    """Records as the consumer would have fetched them, processed and produced (one turn, no fetch)."""
    owned = worker.owned[0]
    records = [
        Record(o, float(o), None, orjson.dumps({"id": f"r{o}", "x": [float(o)], "y": o % 2})) for o in offsets
    ]
    owned.merger.push(FEATURES, owned.state.decode(FEATURES, records))
    owned.position.fetched[FEATURES] = offsets.stop
    consumer.high["f"] = max(consumer.high["f"], offsets.stop)
    _turn(worker)


def _turn(worker: Worker) -> None:
    worker.runtime.process_all()
    assert worker.clients.producer is not None
    worker.clients.producer.poll(0)
    worker.checkpointer.maybe_checkpoint(worker.owned)
    worker.checkpointer.settle(list(worker.owned))
    worker.checkpointer.maybe_checkpoint(worker.owned)  # commits what settled


def _checkpointed(ckpt: Path) -> list[int] | None:
    loaded = file_store.read_newest(ckpt, 0)
    if loaded is None:
        return None
    head = loaded.payload[4 : 4 + int.from_bytes(loaded.payload[:4], "big")]
    return orjson.loads(head)["next_offsets"]


def test_a_delivery_failing_for_good_rewinds_the_partition_to_its_last_checkpoint(tmp_path: Path) -> None:
    worker, consumer, producer = _worker(tmp_path)
    _feed(worker, consumer, range(0, 10))
    assert _checkpointed(tmp_path) == [10, 0] and consumer.commits[-1] == [("f", 0, 10)]
    producer.fail = True
    _feed(worker, consumer, range(10, 20))
    # the failed outputs are latched: no checkpoint or commit covers them, however many turns pass
    for _ in range(3):
        worker.checkpointer.maybe_checkpoint(worker.owned)
    assert _checkpointed(tmp_path) == [10, 0] and consumer.commits[-1] == [("f", 0, 10)]
    worker.recover_deliveries(0.0)  # the rewind waits a moment, then a new producer takes over
    assert not consumer.seeks and worker.owned[0].state.next_offsets == [20, 0]
    worker.make_producer = lambda: producer  # type: ignore[assignment,return-value]
    worker.recover_deliveries(10.0)  # rewinds: the last checkpoint, and the consumer back to its offsets
    assert consumer.seeks[-1] == ("f", 0, 10) and worker.owned[0].state.next_offsets == [10, 0]
    assert producer.purged == 1
    parsed = samples(worker.metrics.render().decode())
    assert value(parsed, "sgt_delivery_failures_total", topic="predictions") == 1
    producer.fail = False  # the broker is back: the same records are processed and delivered again
    _feed(worker, consumer, range(10, 20))
    assert _checkpointed(tmp_path) == [20, 0] and consumer.commits[-1] == [("f", 0, 20)]
    offsets = sorted(orjson.loads(v)["offset"] for t, v in producer.delivered if t == "predictions")
    assert offsets == list(range(20))


def test_a_partition_with_a_lost_output_gets_no_final_checkpoint(tmp_path: Path) -> None:
    worker, consumer, producer = _worker(tmp_path, checkpoint_records=1000)
    producer.fail = True
    _feed(worker, consumer, range(0, 10))
    assert worker.checkpointer.checkpoint_now(worker.owned, [0], force=True) is False
    assert _checkpointed(tmp_path) is None
    parsed = samples(worker.metrics.render().decode())
    assert value(parsed, "sgt_checkpoint_failures_total", reason="delivery") == 1


def test_a_slow_checkpoint_write_does_not_stall_the_loop(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    worker, consumer, producer = _worker(tmp_path)
    release = threading.Event()
    write = file_store.write_checkpoint

    def slow_write(directory: Any, partition: int, payload: bytes, owner: Any) -> Path:
        release.wait(10)
        return write(directory, partition, payload, owner)

    monkeypatch.setattr(file_store, "write_checkpoint", slow_write)
    owned = worker.owned[0]
    records = [Record(o, float(o), None, orjson.dumps({"x": [1.0], "y": 1})) for o in range(10)]
    owned.merger.push(FEATURES, owned.state.decode(FEATURES, records))
    owned.position.fetched[FEATURES] = consumer.high["f"] = 10
    worker.runtime.process_all()
    producer.poll()
    started = time.monotonic()
    for _ in range(5):  # snapshot, outputs acknowledged, write started: none of it waits for the disk
        worker.checkpointer.maybe_checkpoint(worker.owned)
    assert time.monotonic() - started < 1.0
    assert not consumer.commits and _checkpointed(tmp_path) is None  # not durable yet: nothing committed
    release.set()
    worker.checkpointer.settle([])  # nothing to wait for by partition; the write finishes on its own
    deadline = time.monotonic() + 10
    while not consumer.commits and time.monotonic() < deadline:
        worker.checkpointer.maybe_checkpoint(worker.owned)
        time.sleep(0.01)
    assert consumer.commits == [[("f", 0, 10)]] and _checkpointed(tmp_path) == [10, 0]


class FakeMirror:
    """The state topic's side of the checkpoint protocol: each write acknowledged at once, then
    confirmed, or refused with ``error`` (a StateWriteError, a StateTopicFenced)."""

    usable = True  # prepared, and not lost
    lost: str | None = None

    def __init__(self) -> None:
        self.error: Exception | None = None
        self.written: list[tuple[int, bytes]] = []
        self.released: list[int] = []
        self.attempts = 0

    def start(self, partition: int, blob: bytes) -> Any:
        self.attempts += 1
        return SimpleNamespace(pending=SimpleNamespace(acknowledged=True), partition=partition, blob=blob)

    def poll(self) -> None:
        pass

    def finish(self, mirroring: Any) -> None:
        if self.error is not None:
            raise self.error
        self.written.append((mirroring.partition, mirroring.blob))

    def release(self, partitions: list[int]) -> None:
        self.released += partitions


def _mirrored(worker: Worker) -> FakeMirror:
    mirror = FakeMirror()
    worker.checkpointer.mirror = worker.mirror = mirror  # type: ignore[assignment]
    return mirror


class FakeClock:
    """The checkpointer's clock, moved by hand (it starts where the partition's schedule started)."""

    def __init__(self, worker: Worker) -> None:
        self.now = time.monotonic()
        worker.checkpointer.clock = self

    def __call__(self) -> float:
        return self.now


def test_a_failed_state_topic_write_commits_nothing_and_is_retried(tmp_path: Path) -> None:
    worker, consumer, _ = _worker(tmp_path)
    mirror = _mirrored(worker)
    clock = FakeClock(worker)
    _feed(worker, consumer, range(0, 10))
    assert consumer.commits[-1] == [("f", 0, 10)] and len(mirror.written) == 1
    mirror.error = StateWriteError("3 of 3 records unacknowledged")
    _feed(worker, consumer, range(10, 20))
    assert _checkpointed(tmp_path) == [20, 0]  # the file is durable...
    assert consumer.commits[-1] == [("f", 0, 10)]  # ...but its offsets wait for the state topic's copy
    parsed = samples(worker.metrics.render().decode())
    assert value(parsed, "sgt_checkpoint_failures_total", reason="state_topic") == 1
    assert value(parsed, "sgt_restores_total", source="fresh") == 1
    mirror.error = None
    _turn(worker)  # no new record: the partition is due again, but only after the backoff's first pause
    assert consumer.commits[-1] == [("f", 0, 10)] and mirror.attempts == 2
    clock.now += FIRST_RETRY_S
    _turn(worker)
    assert consumer.commits[-1] == [("f", 0, 20)] and mirror.attempts == 3
    assert orjson.loads(state_header_of(mirror.written[-1][1]))["next_offsets"] == [20, 0]


def test_failed_state_topic_writes_are_retried_with_a_capped_exponential_backoff(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A state topic that refuses every write at once: before, the partition was due again on every turn
    of the loop (its file rewritten, an error logged each time, about 20 a second). Now the attempts
    are 0.5, 1, 2, 4, then 5 s apart, only the first failure is logged, and the first attempt after the
    outage, at most 5 s later, commits."""
    worker, consumer, _ = _worker(tmp_path)
    mirror = _mirrored(worker)
    clock = FakeClock(worker)
    _feed(worker, consumer, range(0, 10))
    mirror.error = StateWriteError("3 of 3 records unacknowledged")
    with caplog.at_level(logging.ERROR, logger="worker"):
        _feed(worker, consumer, range(10, 20))  # the first failed attempt, at 0 s
        attempts = []
        for quarter in range(1, 81):  # 20 s of turns, 0.25 s apart
            clock.now += 0.25
            before = mirror.attempts
            _turn(worker)
            if mirror.attempts > before:
                attempts.append(quarter / 4)
    assert attempts == [0.5, 1.5, 3.5, 7.5, 12.5, 17.5]
    assert [r.getMessage() for r in caplog.records] == [
        "checkpoint not written to the state topic; offsets not committed"
    ]
    parsed = samples(worker.metrics.render().decode())
    assert value(parsed, "sgt_checkpoint_failures_total", reason="state_topic") == 7
    assert consumer.commits[-1] == [("f", 0, 10)]
    mirror.error = None  # the outage is over: the next attempt, 22.5 s, succeeds
    clock.now += 2.25
    _turn(worker)
    assert consumer.commits[-1] == [("f", 0, 10)]
    clock.now += 0.25
    _turn(worker)
    assert consumer.commits[-1] == [("f", 0, 20)]
    assert orjson.loads(state_header_of(mirror.written[-1][1]))["next_offsets"] == [20, 0]


class FullDisk:
    """Checkpoint file writes that fail with ENOSPC while ``full``; ``writes`` counts the attempts."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.full, self.writes, self._write = True, 0, file_store.write_checkpoint
        monkeypatch.setattr(file_store, "write_checkpoint", self)

    def __call__(self, directory: Any, partition: int, payload: bytes, owner: Any) -> Path:
        self.writes += 1
        if self.full:
            raise OSError(errno.ENOSPC, "No space left on device")
        return self._write(directory, partition, payload, owner)


def test_a_full_disk_is_retried_with_backoff_and_a_stop_does_not_wait_for_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    worker, consumer, _ = _worker(tmp_path)
    clock = FakeClock(worker)
    _feed(worker, consumer, range(0, 10))
    disk = FullDisk(monkeypatch)
    _feed(worker, consumer, range(10, 20))  # the first failed write, at 0 s
    for _ in range(12):  # 3 s of turns: attempts at 0.5 s and 1.5 s (the next one is at 3.5 s)
        clock.now += 0.25
        _turn(worker)
    assert disk.writes == 3 and _checkpointed(tmp_path) == [10, 0] and consumer.commits[-1] == [("f", 0, 10)]
    # a stop (or revoke) inside the pause attempts its checkpoint at once: failing, then succeeding
    assert worker.checkpointer.checkpoint_now(worker.owned, [0], force=True) is False
    assert disk.writes == 4
    disk.full = False
    assert worker.checkpointer.checkpoint_now(worker.owned, [0], force=True) is True
    assert disk.writes == 5 and _checkpointed(tmp_path) == [20, 0] and consumer.commits[-1] == [("f", 0, 20)]
    assert worker.owned[0].schedule.retry.failures == 0  # the streak ended with it
    parsed = samples(worker.metrics.render().decode())
    assert value(parsed, "sgt_checkpoint_failures_total", reason="write") == 4


def test_a_fenced_state_topic_write_gives_the_partition_up(tmp_path: Path) -> None:
    worker, consumer, producer = _worker(tmp_path)
    mirror = _mirrored(worker)
    _feed(worker, consumer, range(0, 10))
    mirror.error = StateTopicFenced("epoch 9 claimed it after this worker's epoch 3")
    _feed(worker, consumer, range(10, 20))
    assert consumer.commits[-1] == [("f", 0, 10)]
    worker._give_up_fenced()
    assert worker.owned == {} and mirror.released == [0]
    delivered = len(producer.delivered)
    _turn(worker)  # nothing more for it: no outputs, no commits
    assert len(producer.delivered) == delivered and consumer.commits[-1] == [("f", 0, 10)]
    parsed = samples(worker.metrics.render().decode())
    assert value(parsed, "sgt_checkpoint_failures_total", reason="fenced") == 1


def test_the_restored_offsets_are_committed_on_assignment(tmp_path: Path) -> None:
    """A worker that died between a durable checkpoint and its commit left the group's offsets
    behind; its successor, restored at the end with nothing new to process, would never commit."""
    first, consumer, _ = _worker(tmp_path)
    _feed(first, consumer, range(0, 10))
    _, successor, _ = _worker(tmp_path)
    assert successor.commits == [[("f", 0, 10)]]


def state_header_of(blob: bytes) -> bytes:
    return blob[4 : 4 + int.from_bytes(blob[:4], "big")]


def test_a_position_past_the_end_restarts_the_topic_from_its_start(tmp_path: Path) -> None:
    worker, consumer, _ = _worker(tmp_path)
    owned = worker.owned[0]
    # restored from a longer topic
    owned.position.fetched[FEATURES] = owned.state.next_offsets[FEATURES] = 1000
    consumer.high["f"] = 50
    runtime = worker.runtime
    runtime.check_ends(0, owned, FEATURES, 50, now=100.0)
    runtime.check_ends(0, owned, FEATURES, 50, now=100.0 + AHEAD_GRACE_S / 2)
    assert not consumer.seeks  # a stale watermark just after an assignment is not enough
    runtime.check_ends(0, owned, FEATURES, 50, now=100.0 + AHEAD_GRACE_S)
    assert consumer.seeks == [("f", 0, OFFSET_BEGINNING)]
    assert owned.position.fetched[FEATURES] == owned.state.next_offsets[FEATURES] == 0
    parsed = samples(worker.metrics.render().decode())
    assert value(parsed, "sgt_offset_resets_total", topic="f", reason="past_end") == 1


def test_a_position_that_catches_up_with_its_end_is_left_alone(tmp_path: Path) -> None:
    worker, consumer, _ = _worker(tmp_path)
    owned = worker.owned[0]
    owned.position.fetched[FEATURES] = 60
    worker.runtime.check_ends(0, owned, FEATURES, 50, now=0.0)  # an old watermark, then a fresh one
    worker.runtime.check_ends(0, owned, FEATURES, 60, now=AHEAD_GRACE_S)
    worker.runtime.check_ends(0, owned, FEATURES, 60, now=10 * AHEAD_GRACE_S)
    assert not consumer.seeks and owned.position.fetched[FEATURES] == 60


def test_readiness_follows_the_assignment(tmp_path: Path) -> None:
    worker, consumer, _ = _worker(tmp_path)
    health, rebalancer = worker.health, worker.rebalancer
    health.beat()
    assert health.ready
    rebalancer.on_revoke(consumer, [TopicPartition("f", 0)])  # type: ignore[arg-type]
    assert not health.ready and not worker.owned  # waiting for the group: not ready, however long
    rebalancer.on_assign(consumer, [])  # type: ignore[arg-type]
    assert health.ready  # an idle member (no partition for it) is in the group: ready
    rebalancer.on_lost(consumer, [])  # type: ignore[arg-type]
    assert not health.ready


def test_nothing_the_worker_produces_is_refused_for_its_size(tmp_path: Path) -> None:
    """A 10 MB record, 900 KB labels and a 2 MB id, against a producer refusing more than
    max_message_bytes: before, the first one's dead letter raised MSG_SIZE_TOO_LARGE in the loop."""
    worker, consumer, producer = _worker(tmp_path, max_record_bytes=20_000_000, max_message_bytes=100_000)
    producer.limit = 100_000
    docs = [
        b'{"x": [1.0], "y": 1, "pad": "' + b"z" * 25_000_000 + b'"}',  # oversized
        orjson.dumps({"x": [1.0], "y": "L" * 900_000}),  # label_too_long
        orjson.dumps({"id": "i" * 2_000_000, "x": [1.0], "y": 1}),  # prediction_too_large
        orjson.dumps({"x": [1.0], "y": 0}),
    ]
    owned = worker.owned[0]
    owned.merger.push(
        FEATURES, owned.state.decode(FEATURES, [Record(o, 0.0, b"k", d) for o, d in enumerate(docs)])
    )
    owned.position.fetched[FEATURES] = consumer.high["f"] = len(docs)
    _turn(worker)
    assert sorted(t for t, _ in producer.delivered) == ["dead-letters"] * 3 + ["predictions"]
    assert worker.owned[0].state.next_offsets == [4, 0] and worker.owned[0].deliveries.failed is None
    parsed = samples(worker.metrics.render().decode())
    reasons = ("oversized", "label_too_long", "prediction_too_large")
    assert [value(parsed, "sgt_invalid_records_total", topic="f", reason=r) for r in reasons] == [1, 1, 1]


class _FailsOnThree(StubModel):
    """Fails on the row with x0 == 3."""

    def predict_learn_many(self, X: list[dict[str, Any]], y: list[Any]) -> Any:
        if any(x.get("x0") == 3.0 for x in X):
            raise ValueError("cannot learn this row")
        return super().predict_learn_many(X, y)


def test_records_past_the_replayed_range_in_the_same_batch_are_processed_after_a_model_failure(
    tmp_path: Path,
) -> None:
    """After a model failure the partition replays one record per call up to where the failed run
    ended (offset 3 is then dead-lettered as model_error). Before, when the batch being replayed
    went on past that point, the next record raised TypeError (the bound, just cleared, was read
    again) and the loop stopped."""
    settings = load_settings({"checkpoint_dir": str(tmp_path), "features_topic": "f"}, env={})
    worker = Worker(settings, model_factory=_FailsOnThree, model_registry={"_FailsOnThree": _FailsOnThree})
    consumer, producer = FakeConsumer({"f": 0}), FakeProducer()
    worker.clients.consumer, worker.clients.producer = consumer, producer  # type: ignore[assignment]
    worker.rebalancer.on_assign(consumer, [TopicPartition("f", 0)])  # type: ignore[arg-type]
    _feed(worker, consumer, range(0, 6))  # fails at offset 3: rewound, replayed one by one up to 6
    assert worker.owned[0].recovery.careful_until == [6, 0] and consumer.seeks[-1] == ("f", 0, 0)
    _feed(worker, consumer, range(0, 6))  # the replay: offset 3 fails alone, is marked, rewound again
    recovery = worker.owned[0].recovery
    assert recovery.poison == {(FEATURES, 3)} and recovery.careful_until == [6, 0]
    _feed(worker, consumer, range(0, 10))  # the replay, with 4 new records in the same batch
    owned = worker.owned[0]
    assert owned.state.next_offsets == [10, 0] and owned.recovery.careful_until is None
    predicted = [
        orjson.loads(v)["offset"] for topic, v in producer.delivered if topic == settings.predictions_topic
    ]
    assert predicted[-9:] == [0, 1, 2, 4, 5, 6, 7, 8, 9]  # (0 to 2 went out before offset 3 failed, too)


def test_health_turns_unhealthy_after_consecutive_checkpoint_failures_and_back_after_one_succeeds(
    tmp_path: Path,
) -> None:
    """/healthz and /readyz used to answer 200 through any number of failed checkpoints, while the
    records a restart would replay piled up. A real failure the file system gives root too: the
    checkpoint directory replaced by a file (writes fail with ENOTDIR or EEXIST)."""
    from worker.metrics import MetricsServer

    ckpt = tmp_path / "ckpt"
    worker, consumer, _ = _worker(ckpt, unhealthy_after_checkpoint_failures=3)
    worker.store.acquire()
    server = MetricsServer(worker.metrics, worker.health, "127.0.0.1", 0).start()
    try:
        clock = FakeClock(worker)
        _feed(worker, consumer, range(0, 10))
        assert _checkpointed(ckpt) == [10, 0] and _status(server.port) == (200, 200)
        shutil.rmtree(ckpt)
        ckpt.write_text("not a directory any more")
        _feed(worker, consumer, range(10, 20))  # failure 1, at 0 s
        for _ in range(6):  # attempts at 0.5 s (failure 2) and 1.5 s (failure 3)
            clock.now += 0.25
            _turn(worker)
        assert worker.owned[0].schedule.retry.failures == 3
        assert _status(server.port) == (503, 503) and not worker.health.alive
        ckpt.unlink()  # the file system is usable again: the next attempt (3.5 s) succeeds
        for _ in range(8):
            clock.now += 0.25
            _turn(worker)
        assert _checkpointed(ckpt) == [20, 0] and worker.owned[0].schedule.retry.failures == 0
        assert _status(server.port) == (200, 200)
    finally:
        server.close()
        worker.store.release()


def _status(port: int) -> tuple[int, int]:
    """The HTTP status of /healthz and of /readyz."""
    import urllib.error
    import urllib.request

    codes = []
    for path in ("/healthz", "/readyz"):
        try:
            codes.append(urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5).status)
        except urllib.error.HTTPError as exc:
            codes.append(exc.code)
    return codes[0], codes[1]


class _CallSizes(StubModel):
    """The stub model, recording the rows of each predict_learn_many call."""

    def __init__(self, task: str = "classification") -> None:
        super().__init__(task)
        self.calls: list[int] = []

    def predict_learn_many(self, X: list, y: list) -> Any:
        self.calls.append(len(y))
        return super().predict_learn_many(X, y)


def test_the_work_of_one_model_call_is_bounded_by_the_number_of_classes(tmp_path: Path) -> None:
    """With many classes one record costs a tree per class: 2,000 records with 2,000 classes in one
    call took minutes (26 records/s), so checkpoints and signals, seen only between calls, waited that
    long. A turn of the loop now processes at most as many records as the cost estimate allows (the
    classes known plus those the records bring), and the rest on the following turns, with the same
    result as one call."""
    from worker.checkpoints.restore import state_config
    from worker.core.partition_state import PartitionState

    settings = load_settings(
        {
            "checkpoint_dir": str(tmp_path),
            "features_topic": "f",
            "max_classes": 5000,
            "checkpoint_records": 10**6,
        },
        env={},
    )
    worker = Worker(settings, model_factory=_CallSizes, model_registry={"_CallSizes": _CallSizes})
    consumer, producer = FakeConsumer({"f": 0}), FakeProducer()
    worker.clients.consumer, worker.clients.producer = consumer, producer  # type: ignore[assignment]
    worker.rebalancer.on_assign(consumer, [TopicPartition("f", 0)])  # type: ignore[arg-type]
    records = [
        Record(o, float(o), None, orjson.dumps({"id": f"r{o}", "x": [float(o % 7)], "y": f"c{o % 2000}"}))
        for o in range(3000)
    ]
    owned = worker.owned[0]
    owned.merger.push(FEATURES, owned.state.decode(FEATURES, records))
    owned.position.fetched[FEATURES] = consumer.high["f"] = 3000
    model = owned.state.model
    assert isinstance(model, _CallSizes)
    worker.runtime.process_all()
    assert model.calls and max(model.calls) <= 10, model.calls  # 2,000 classes: a handful of rows
    assert worker.runtime.more_ready
    turns = 1
    while worker.runtime.more_ready:
        worker.runtime.process_all()
        turns += 1
    assert owned.state.next_offsets == [3000, 0] and turns > 100
    # the same state as one call over every record (the model's calls do not change the result)
    whole = PartitionState(0, _CallSizes(), state_config(settings))
    whole.process(whole.decode(FEATURES, records), now=0.0)
    assert whole.model.to_bytes() == owned.state.model.to_bytes()
    assert whole.prequential.to_dict() == owned.state.prequential.to_dict()


@pytest.mark.parametrize("model", ["sgt", "adaptive", "boosted"])
def test_model_calls_cut_by_the_class_count_give_the_model_of_one_call(tmp_path: Path, model: str) -> None:
    """The real models, 600 records of 150 classes, cut into calls of at most 67 rows: the same model
    bytes and prequential state as one call over all of them."""
    from worker.checkpoints.restore import state_config
    from worker.core.partition_state import PartitionState

    settings = load_settings(
        {"checkpoint_dir": str(tmp_path), "features_topic": "f", "max_classes": 200, "model": model}, env={}
    )
    worker = Worker(settings)
    consumer, producer = FakeConsumer({"f": 0}), FakeProducer()
    worker.clients.consumer, worker.clients.producer = consumer, producer  # type: ignore[assignment]
    worker.rebalancer.on_assign(consumer, [TopicPartition("f", 0)])  # type: ignore[arg-type]
    records = [
        Record(o, float(o), None, orjson.dumps({"x": {"a": float(o % 13), "b": o * 0.37 % 5}, "y": o % 150}))
        for o in range(600)
    ]
    owned = worker.owned[0]
    owned.merger.push(FEATURES, owned.state.decode(FEATURES, records))
    owned.position.fetched[FEATURES] = consumer.high["f"] = 600
    turns = 0
    while turns == 0 or worker.runtime.more_ready:
        worker.runtime.process_all()
        turns += 1
    assert owned.state.next_offsets == [600, 0] and turns >= 9
    from worker.core.sgt_models import new_model

    whole = PartitionState(0, new_model(settings), state_config(settings))
    whole.process(whole.decode(FEATURES, records), now=0.0)
    assert whole.model.to_bytes() == owned.state.model.to_bytes()
    assert whole.prequential.to_dict() == owned.state.prequential.to_dict()
