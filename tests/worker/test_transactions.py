"""The exactly-once checkpoint protocol with fake clients (no broker): what an abortable error, a
fenced producer and lost partitions do to the open transaction and the partitions."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import orjson
import pytest
from confluent_kafka import KafkaError, KafkaException, TopicPartition

from tests.worker.stub_model import StubModel
from tests.worker.test_reliability import (
    FakeClock,
    FakeConsumer,
    FakeProducer,
    FullDisk,
    _checkpointed,
    _feed,
    _turn,
)
from tests.worker.worker_util import samples, value
from worker.checkpoints.transactional import TransactionalCheckpointer, TransactionFenced
from worker.config import load_settings
from worker.kafka.loop import Worker


class FakeTransactionalProducer(FakeProducer):
    """Outputs are visible once their transaction commits; ``fail_commit`` makes the next commit raise."""

    def __init__(self, consumer: TransactionalConsumer) -> None:
        super().__init__()
        self.consumer = consumer
        self.calls: list[str] = []
        self.fail_commit: KafkaError | None = None
        self.open: list[tuple[str, bytes]] = []
        self.committed: list[tuple[str, bytes]] = []
        self.offsets: list[TopicPartition] = []

    def init_transactions(self, _timeout: float) -> None:
        self.calls.append("init")

    def begin_transaction(self) -> None:
        self.calls.append("begin")
        self.open, self.offsets = [], []

    def poll(self, _timeout: float = 0) -> int:
        self.open += [(topic, payload) for topic, payload, _ in self.pending]
        return super().poll()

    def send_offsets_to_transaction(
        self, offsets: list[TopicPartition], metadata: Any, _timeout: float
    ) -> None:
        assert metadata == "group metadata"
        self.offsets = offsets

    def commit_transaction(self, _timeout: float) -> None:
        self.calls.append("commit")
        self.flush()
        if self.fail_commit is not None:
            error, self.fail_commit = self.fail_commit, None
            raise KafkaException(error)
        self.committed += self.open
        self.consumer.committed_offsets.update({(tp.topic, tp.partition): tp.offset for tp in self.offsets})

    def abort_transaction(self, _timeout: float) -> None:
        self.calls.append("abort")


class TransactionalConsumer(FakeConsumer):
    def __init__(self, high: dict[str, int]) -> None:
        super().__init__(high)
        self.committed_offsets: dict[tuple[str, int], int] = {}

    def consumer_group_metadata(self) -> str:
        return "group metadata"

    def committed(self, tps: list[TopicPartition], timeout: float = 0) -> list[TopicPartition]:
        return [
            TopicPartition(
                tp.topic, tp.partition, self.committed_offsets.get((tp.topic, tp.partition), -1001)
            )
            for tp in tps
        ]


class RecordingMirror:
    """Stands for the state topic in the checkpointer: records which partitions' states were staged."""

    usable = True  # prepared, and not lost

    def __init__(self) -> None:
        self.staged: list[int] = []

    def stage(self, partition: int, _blob: bytes, _producer: Any) -> Any:
        self.staged.append(partition)
        return SimpleNamespace(pending=SimpleNamespace(delivery=SimpleNamespace(errors=[])))

    def confirm(self, _mirroring: Any) -> None:
        pass

    def discard(self, _mirroring: Any) -> None:
        pass


class ErringConsumer(TransactionalConsumer):
    """Answers the committed-offsets request with a partition error, as a broker loading the group does."""

    def committed(self, tps: list[TopicPartition], timeout: float = 0) -> list[Any]:
        error = KafkaError(KafkaError.COORDINATOR_LOAD_IN_PROGRESS, "loading", retriable=True)
        return [
            SimpleNamespace(topic=tp.topic, partition=tp.partition, offset=-1001, error=error) for tp in tps
        ]


def _worker(ckpt: Path) -> tuple[Worker, TransactionalConsumer, FakeTransactionalProducer]:
    settings = load_settings(
        {
            "checkpoint_dir": str(ckpt),
            "features_topic": "f",
            "checkpoint_records": 5,
            "processing_guarantee": "exactly_once",
            "transactional_id": "t",
        },
        env={},
    )
    worker = Worker(settings, model_factory=StubModel, model_registry={"StubModel": StubModel})
    assert isinstance(worker.checkpointer, TransactionalCheckpointer)
    consumer = TransactionalConsumer({"f": 0})
    producer = FakeTransactionalProducer(consumer)
    worker.clients.consumer = consumer  # type: ignore[assignment]
    worker.clients.producer = worker.checkpointer.started(producer)  # type: ignore[arg-type]
    worker.rebalancer.on_assign(consumer, [TopicPartition("f", 0)])  # type: ignore[arg-type]
    return worker, consumer, producer


def _committed_predictions(producer: FakeTransactionalProducer) -> list[int]:
    return sorted(orjson.loads(v)["offset"] for t, v in producer.committed if t == "predictions")


def test_outputs_offsets_and_then_the_file_commit_together(tmp_path: Path) -> None:
    worker, consumer, producer = _worker(tmp_path)
    _feed(worker, consumer, range(0, 10))
    assert producer.calls == ["init", "begin", "commit", "begin"]
    assert consumer.committed_offsets == {("f", 0): 10} and _checkpointed(tmp_path) == [10, 0]
    assert _committed_predictions(producer) == list(range(10)) and not consumer.commits


def test_an_abortable_error_aborts_and_rewinds_to_the_last_commit(tmp_path: Path) -> None:
    worker, consumer, producer = _worker(tmp_path)
    _feed(worker, consumer, range(0, 10))
    producer.fail_commit = KafkaError(KafkaError._MSG_TIMED_OUT, "timed out", txn_requires_abort=True)
    _feed(worker, consumer, range(10, 20))
    assert producer.calls[-3:] == ["commit", "abort", "begin"]
    assert consumer.committed_offsets == {("f", 0): 10} and _checkpointed(tmp_path) == [10, 0]
    assert worker.owned[0].deliveries.failed is not None  # no more processing until the rewind
    worker.recover_deliveries(0.0)
    worker.recover_deliveries(10.0)  # the rewind; the transaction was aborted already: no second abort
    assert producer.calls.count("abort") == 1
    assert consumer.seeks[-1] == ("f", 0, 10) and worker.owned[0].state.next_offsets == [10, 0]
    _feed(worker, consumer, range(10, 20))  # processed and produced again, and committed this time
    assert consumer.committed_offsets == {("f", 0): 20} and _checkpointed(tmp_path) == [20, 0]
    assert _committed_predictions(producer) == list(range(20))
    parsed = samples(worker.metrics.render().decode())
    assert value(parsed, "sgt_checkpoint_failures_total", reason="transaction_aborted") == 1


def test_a_lost_output_aborts_the_transaction_before_the_rewind(tmp_path: Path) -> None:
    worker, consumer, producer = _worker(tmp_path)
    _feed(worker, consumer, range(0, 10))
    producer.fail = True
    _feed(worker, consumer, range(10, 13))  # not due yet; the latch keeps every commit away anyway
    _feed(worker, consumer, range(13, 20))
    assert "abort" not in producer.calls and consumer.committed_offsets == {("f", 0): 10}
    worker.recover_deliveries(0.0)
    worker.recover_deliveries(10.0)
    assert producer.calls[-2:] == ["abort", "begin"] and worker.owned[0].state.next_offsets == [10, 0]
    producer.fail = False
    _feed(worker, consumer, range(10, 20))
    assert _committed_predictions(producer) == list(range(20))


def test_a_fenced_producer_stops_the_worker(tmp_path: Path) -> None:
    worker, consumer, producer = _worker(tmp_path)
    producer.fail_commit = KafkaError(KafkaError._FENCED, "fenced by a newer instance", fatal=True)
    with pytest.raises(TransactionFenced, match="fenced by a newer instance"):
        _feed(worker, consumer, range(0, 10))
    assert consumer.committed_offsets == {} and _checkpointed(tmp_path) is None


def test_a_produce_refused_after_the_fencing_stops_the_worker_as_fenced(tmp_path: Path) -> None:
    """A regression: once a newer instance has fenced the producer, ``produce()`` raises _FATAL
    ("Unable to produce message") without the fatal flag, and the fencing (_FENCED) reaches only the
    error callback. The loop took it for an ordinary failure, flushed the dead producer and exited with
    code 1, not 5 (seen in test_exactly_once_e2e's fencing test, where the second half of the stream
    arrives after the fencing)."""
    worker, _, _ = _worker(tmp_path)
    refused = KafkaException(KafkaError(KafkaError._FATAL, "Unable to produce message: Local: Fatal error"))
    fenced = worker.checkpointer.as_fenced(refused)
    assert isinstance(fenced, TransactionFenced) and "Unable to produce message" in str(fenced)
    assert worker.checkpointer.as_fenced(KafkaException(KafkaError(KafkaError._TRANSPORT, "down"))) is None


def test_lost_partitions_abort_the_open_transaction(tmp_path: Path) -> None:
    worker, consumer, producer = _worker(tmp_path)
    _feed(worker, consumer, range(0, 3))  # not due: still in the open transaction
    worker.rebalancer.on_lost(consumer, [TopicPartition("f", 0)])  # type: ignore[arg-type]
    assert producer.calls[-2:] == ["abort", "begin"] and not worker.owned
    assert consumer.committed_offsets == {} and not producer.committed


def test_a_restore_behind_the_committed_offsets_learns_without_producing(tmp_path: Path) -> None:
    worker, consumer, producer = _worker(tmp_path)
    _feed(worker, consumer, range(0, 10))
    consumer.committed_offsets[("f", 0)] = 15  # as if a later commit's file never became durable
    worker.rebalancer.on_assign(consumer, [TopicPartition("f", 0)])  # type: ignore[arg-type]
    assert worker.owned[0].recovery.replay_until == [15, 0]
    assert not consumer.commits  # committing the file's offsets would move the group's back below 15
    before = len(producer.committed)
    _feed(worker, consumer, range(10, 20))
    assert sorted(orjson.loads(v)["offset"] for _, v in producer.committed[before:]) == list(range(15, 20))
    assert worker.owned[0].recovery.replay_until is None and _checkpointed(tmp_path) == [20, 0]


def test_a_full_disk_spaces_the_transactions_that_write_the_file_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A file write that fails after its transaction committed makes the partition due again; before,
    a transaction was committed and the file rewritten on every turn of the loop while the disk was
    full. Now they follow the partition's backoff (0.5 s, then 1 s, ...), and the file catches up."""
    worker, consumer, producer = _worker(tmp_path)
    clock = FakeClock(worker)
    _feed(worker, consumer, range(0, 10))
    disk = FullDisk(monkeypatch)
    _feed(worker, consumer, range(10, 20))  # committed, then its file write fails, at 0 s
    assert consumer.committed_offsets == {("f", 0): 20} and disk.writes == 1
    for _ in range(12):  # 3 s of turns: attempts at 0.5 s and 1.5 s (the next one is at 3.5 s)
        clock.now += 0.25
        _turn(worker)
    assert disk.writes == 3 and producer.calls.count("commit") == 4
    assert _checkpointed(tmp_path) == [10, 0]
    disk.full = False
    clock.now += 0.5
    _turn(worker)
    assert disk.writes == 4 and producer.calls.count("commit") == 5 and _checkpointed(tmp_path) == [20, 0]
    assert worker.owned[0].schedule.retry.failures == 0


def test_a_partition_state_is_staged_only_once_the_group_has_committed_its_offsets(tmp_path: Path) -> None:
    """A state staged in a partition's first transaction could not be told from a committed one if that
    transaction aborted on a broker that shows aborted records (nothing committed to compare with)."""
    worker, consumer, _ = _worker(tmp_path)
    mirror = RecordingMirror()
    worker.checkpointer.mirror = mirror  # type: ignore[assignment]
    _feed(worker, consumer, range(0, 10))
    assert consumer.committed_offsets == {("f", 0): 10} and mirror.staged == []
    _feed(worker, consumer, range(10, 20))
    assert consumer.committed_offsets == {("f", 0): 20} and mirror.staged == [0]
    worker.rebalancer.on_revoke(consumer, [TopicPartition("f", 0)])  # type: ignore[arg-type]
    restarted, consumer2, _ = _worker(tmp_path / "next")
    consumer2.committed_offsets = {("f", 0): 20}  # the group committed before: staged from the first commit
    restarted.rebalancer.on_assign(consumer2, [TopicPartition("f", 0)])  # type: ignore[arg-type]
    restarted.checkpointer.mirror = second = RecordingMirror()  # type: ignore[assignment]
    _feed(restarted, consumer2, range(20, 30))
    assert second.staged == [0]


def test_an_error_reading_the_committed_offsets_is_not_taken_for_no_commit(tmp_path: Path) -> None:
    worker, _, _ = _worker(tmp_path)
    worker.clients.consumer = ErringConsumer({"f": 0})  # type: ignore[assignment]
    with pytest.raises(KafkaException, match="loading"):
        worker.checkpointer.committed_offsets(0)
