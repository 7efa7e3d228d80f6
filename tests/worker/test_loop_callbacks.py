"""Rebalance, checkpoint and ingest paths of the Kafka shell that need no broker: lost partitions
write nothing, a failing checkpoint write is counted and leaves the worker running, records fetched
before a seek are dropped."""

from __future__ import annotations

from pathlib import Path

import pytest
from confluent_kafka import Producer, TopicPartition

from tests.worker.stub_model import StubModel
from tests.worker.worker_util import samples, value
from worker.checkpoints.ledger import DeliveryLatch
from worker.checkpoints.restore import state_config
from worker.config import load_settings
from worker.core.partition_state import PartitionState
from worker.core.values import Record
from worker.kafka.delivery import RunDelivery
from worker.kafka.loop import Worker
from worker.kafka.partition_runtime import OwnedPartition
from worker.kafka.positions import unseen


def _worker(ckpt: Path) -> Worker:
    settings = load_settings(
        {"checkpoint_dir": str(ckpt), "features_topic": "f", "labels_topic": "l"}, env={}
    )
    worker = Worker(settings, model_factory=StubModel, model_registry={"StubModel": StubModel})
    for p in (0, 1):
        owned = OwnedPartition.of(PartitionState(p, StubModel(), state_config(settings)))
        owned.schedule.processed(5)
        worker.owned[p] = owned
        worker.metrics.report_partition(p, owned.state)
        worker.metrics.records.labels(topic="f", partition=str(p)).inc(5)
    return worker


def _idle_producer() -> Producer:
    """A producer with no broker, for turns that produce nothing. Its connection failures are not
    logged: the client would print them on stderr for as long as it lives, into later tests' output."""
    return Producer({"bootstrap.servers": "127.0.0.1:1", "log_level": 0})


def _turn(worker: Worker) -> None:
    """One turn of the checkpoint protocol, then wait for the background write it may have started."""
    worker.checkpointer.maybe_checkpoint(worker.owned)
    worker.checkpointer.settle(list(worker.owned))


def test_lost_partitions_are_dropped_without_writing_anything(tmp_path: Path) -> None:
    worker = _worker(tmp_path / "ckpt")
    worker.rebalancer.on_lost(None, [TopicPartition("f", 0), TopicPartition("l", 0)])  # type: ignore[arg-type]
    assert sorted(worker.owned) == [1]
    assert not (tmp_path / "ckpt").exists()
    parsed = samples(worker.metrics.render().decode())
    assert value(parsed, "sgt_rebalances_total", event="lost") == 1
    assert value(parsed, "sgt_records_total", topic="f", partition="0") is None
    assert value(parsed, "sgt_records_total", topic="f", partition="1") == 5
    assert value(parsed, "sgt_assigned_partitions") == 1


def test_a_failing_checkpoint_write_is_counted_and_not_fatal(tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("x")
    worker = _worker(blocker / "ckpt")
    owned = worker.owned[0]
    assert worker.checkpointer.write(0, owned, worker.checkpointer.take_snapshot(owned)) is False
    assert owned.schedule.records == 5  # still due: the next attempt writes it
    parsed = samples(worker.metrics.render().decode())
    assert value(parsed, "sgt_checkpoint_failures_total", reason="write") == 1
    assert value(parsed, "sgt_last_checkpoint_timestamp_seconds", partition="0") is None


def test_a_successful_write_restores_to_the_same_state(tmp_path: Path) -> None:
    from worker.checkpoints.restore import load_state

    worker = _worker(tmp_path)
    owned = worker.owned[1]
    assert worker.checkpointer.write(1, owned, worker.checkpointer.take_snapshot(owned)) is True
    restored = load_state(worker.settings, 1, registry={"StubModel": StubModel})
    assert restored.to_bytes() == owned.state.to_bytes()
    assert owned.schedule.records == 0


def test_a_run_reports_its_latencies_once_its_last_prediction_is_acknowledged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    import logging
    import time

    reports: list[tuple[float, list[float]]] = []
    latch = DeliveryLatch()
    delivered = RunDelivery([10.0, 11.0, 12.0], reports.append, logging.getLogger("test"), latch)
    delivered(None, None)
    delivered(None, None)
    assert reports == []  # one acknowledgement still outstanding
    before = time.time()
    delivered(None, None)
    assert len(reports) == 1 and reports[0][1] == [10.0, 11.0, 12.0] and reports[0][0] >= before
    assert latch.failed is None


def test_a_delivery_failing_for_good_is_latched_on_the_partition(caplog: pytest.LogCaptureFixture) -> None:
    import logging

    from confluent_kafka import KafkaError

    latch = DeliveryLatch()
    delivered = RunDelivery([10.0, 11.0], None, logging.getLogger("test"), latch)
    delivered(None, None)
    delivered(KafkaError(KafkaError._MSG_TIMED_OUT), None)
    assert delivered.left == 0  # nothing more will come for it
    assert latch.failed is not None and "timed out" in latch.failed.lower()
    assert "prediction not delivered" in caplog.text


def test_partitions_due_together_are_checkpointed_one_per_turn_oldest_first(tmp_path: Path) -> None:
    from worker.checkpoints.file_store import checkpoint_path

    worker = _worker(tmp_path)
    worker.clients.producer = _idle_producer()  # nothing to flush, no broker needed
    worker.owned[0].schedule.last = 0.0  # both long due by time, partition 0 the longer
    worker.owned[1].schedule.last = 1.0
    _turn(worker)
    assert checkpoint_path(tmp_path, 0).exists() and not checkpoint_path(tmp_path, 1).exists()
    _turn(worker)
    assert checkpoint_path(tmp_path, 1).exists()
    assert [o.schedule.records for o in worker.owned.values()] == [0, 0]


def test_a_snapshot_is_written_only_once_the_outputs_before_it_are_acknowledged(tmp_path: Path) -> None:
    import logging

    from worker.checkpoints.file_store import checkpoint_path

    worker = _worker(tmp_path)
    worker.clients.producer = _idle_producer()
    owned = worker.owned[0]
    run = RunDelivery([1.0, 2.0], None, logging.getLogger("test"), owned.deliveries.latch)  # two in flight
    owned.deliveries.add(run)
    owned.schedule.last = 0.0
    _turn(worker)  # snapshots partition 0, which must wait for its run
    assert owned.schedule.pending is not None and owned.schedule.pending.runs == 1
    assert not checkpoint_path(tmp_path, 0).exists()
    run(None, None)
    _turn(worker)
    assert not checkpoint_path(tmp_path, 0).exists()  # one acknowledgement still outstanding
    run(None, None)
    _turn(worker)
    assert checkpoint_path(tmp_path, 0).exists() and owned.schedule.pending is None
    assert owned.deliveries.advance() == 1 and not owned.deliveries.in_flight


def test_acknowledged_runs_are_released_every_turn_without_a_snapshot(tmp_path: Path) -> None:
    import logging

    worker = _worker(tmp_path)
    worker.clients.producer = _idle_producer()
    owned = worker.owned[1]
    reports: list[tuple[float, list[float]]] = []
    runs = [
        RunDelivery([1.0], reports.append, logging.getLogger("test"), owned.deliveries.latch)
        for _ in range(3)
    ]
    for run in runs:
        owned.deliveries.add(run)
    runs[0](None, None)
    runs[2](None, None)  # acknowledged out of order: only the leading run can be released
    _turn(worker)
    assert owned.schedule.pending is None and owned.deliveries.in_flight == runs[1:]
    assert owned.deliveries.advance() == 1
    assert runs[0].event_ts == [] and len(reports) == 2  # reported, then released


@pytest.mark.parametrize(
    ("offsets", "fetched", "kept"),
    [
        ([5, 6, 8, 9], 5, [5, 6, 8, 9]),  # the usual batch (gaps are fine: transaction markers)
        ([3, 4, 5, 6], 5, [5, 6]),  # fetched before a seek forward
        ([5, 6, 5, 6, 7], 5, [5, 6, 7]),  # replayed within the batch: each offset once
        ([], 5, []),
    ],
)
def test_only_unseen_offsets_are_ingested(offsets: list[int], fetched: int, kept: list[int]) -> None:
    records = [Record(o, 0.0, None, b"{}") for o in offsets]
    assert [r.offset for r in unseen(records, fetched)] == kept


class _PauseRecorder:
    """Records the consumer's pause and resume calls (all that the backpressure step uses)."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, list[tuple[str, int]]]] = []

    def pause(self, partitions: list[TopicPartition]) -> None:
        self.calls.append(("pause", [(tp.topic, tp.partition) for tp in partitions]))

    def resume(self, partitions: list[TopicPartition]) -> None:
        self.calls.append(("resume", [(tp.topic, tp.partition) for tp in partitions]))


def test_a_topic_whose_queued_records_hold_too_many_bytes_is_paused_until_half_are_used(
    tmp_path: Path,
) -> None:
    """Before, only the number of queued records (100,000) paused a topic, whatever their size."""
    from worker.core.merge import FEATURES, LABELS
    from worker.core.values import Invalid, MergeEntry

    worker = _worker(tmp_path)
    worker.runtime.settings = worker.runtime.settings.replace(merge_max_bytes=1000)
    recorder = _PauseRecorder()
    worker.clients.consumer = recorder  # type: ignore[assignment]
    owned = worker.owned[0]

    def entry(ts: float, rank: int, offset: int) -> MergeEntry:
        return MergeEntry(ts, rank, offset, Record(offset, ts, None, None), Invalid("bad_x"))

    entries = [entry(float(i), FEATURES, i) for i in range(4)]
    owned.merger.push(FEATURES, entries[:2], [500, 500])
    worker.runtime.backpressure(0, owned)
    assert recorder.calls == [] and owned.merger.queued_bytes(FEATURES) == 1000
    owned.merger.push(FEATURES, entries[2:], [300, 300])
    worker.runtime.backpressure(0, owned)
    assert recorder.calls == [("pause", [("f", 0)])] and owned.position.paused == {FEATURES}
    owned.merger.push(LABELS, [entry(1.5, LABELS, 0)], [10])  # the merge takes the records before it
    assert [e.offset for e in owned.merger.pop_ready(labels_done=False, features_done=False)] == [0, 1, 0]
    assert owned.merger.queued_bytes(FEATURES) == 600
    worker.runtime.backpressure(0, owned)
    assert owned.position.paused == {FEATURES}  # above half of the bound still
    owned.merger.pop_ready(labels_done=True, features_done=True)
    worker.runtime.backpressure(0, owned)
    assert recorder.calls[-1] == ("resume", [("f", 0)]) and owned.position.paused == set()


def test_the_worker_builds_its_collaborators_first_and_hands_them_on(tmp_path: Path) -> None:
    """Each collaborator gets what it uses through its constructor: one checkpointer, one state-topic
    mirror and one registry of owned partitions, the same everywhere; nothing is patched in later."""
    worker = _worker(tmp_path)
    runtime, checkpointer = worker.runtime, worker.checkpointer
    assert runtime.checkpointer is checkpointer and worker.rebalancer.checkpointer is checkpointer
    assert worker.mirror is not None  # the state topic is on by default
    assert runtime.mirror is worker.mirror and checkpointer.mirror is worker.mirror
    assert not worker.mirror.usable  # its clients come with run(), which opens the state topic
    assert runtime.owned is worker.owned and runtime.publisher is worker.publisher
    assert checkpointer.health is worker.health
    worker.store.on_lost()
    assert value(samples(worker.metrics.render().decode()), "sgt_checkpoint_directory_lost_total") == 1
