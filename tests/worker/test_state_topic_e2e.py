"""worker.state_topic.client end to end against the session's real Kafka-protocol broker (loopback only).

Small ``max_message_bytes`` makes ordinary payloads multi-chunk. Zombies and interrupted writes are
played with a second StateTopic instance and a plain producer writing raw state records.
"""

from __future__ import annotations

import random
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import orjson
import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from tests.kafka_util import committed_offsets, produce_records, read_all
from tests.worker.fault_proxy import FaultProxy, proxied_broker_fixture
from tests.worker.worker_util import (
    WorkerProcess,
    WorkerThread,
    checkpoint_headers,
    inprocess_settings,
    samples,
    start_worker_fixture,
    value,
    wait_for,
    worker_args,
    worker_threads_fixture,
)
from worker.state_topic import rules
from worker.state_topic.admin import HEADROOM_BYTES, StateTopicConfig, ensure_topic
from worker.state_topic.client import StateTopic
from worker.state_topic.errors import StateTopicError, StateTopicFenced, StateTopicLost, StateWriteError

__all__ = ["proxied_broker_fixture", "start_worker_fixture", "worker_threads_fixture"]

SMALL = 3 * HEADROOM_BYTES  # chunks of 8 KiB


@pytest.fixture
def make_config(kafka_bootstrap: str) -> Callable[..., StateTopicConfig]:
    def make(partitions: int = 3, **kwargs: object) -> StateTopicConfig:
        config = StateTopicConfig(
            kafka_bootstrap,
            f"state-{uuid.uuid4().hex[:10]}",
            max_message_bytes=SMALL,
            timeout_s=20.0,
            **kwargs,
        )
        assert ensure_topic(config, partitions)
        return config

    return make


@pytest.fixture
def open_states() -> Iterator[Callable[[StateTopicConfig], StateTopic]]:
    opened: list[StateTopic] = []

    def make(config: StateTopicConfig) -> StateTopic:
        opened.append(StateTopic(config))
        return opened[-1]

    yield make
    for states in opened:
        states.close()


def payload(size: int, seed: int) -> bytes:
    return random.Random(seed).randbytes(size)


def live_keys(config: StateTopicConfig, partitions: int) -> dict[int, set[str]]:
    """Per partition, the keys whose newest record is not a tombstone (what compaction keeps)."""
    latest: dict[tuple[int, bytes], bool] = {}
    for message in read_all(config.bootstrap_servers, config.topic, partitions, idle_s=1.0):
        latest[(message.partition(), message.key())] = message.value() is not None
    out: dict[int, set[str]] = {p: set() for p in range(partitions)}
    for (partition, key), alive in latest.items():
        if alive:
            out[partition].add(key.decode())
    return out


def test_multi_chunk_state_round_trips_through_a_new_process(make_config, open_states) -> None:
    config = make_config()
    blob = payload(100_000, 1)
    writer = open_states(config)
    first = writer.acquire(1)
    assert first.state is None and first.skipped == []
    written = writer.write(1, blob)
    assert written.chunks == -(-100_000 // config.chunk_bytes) == 13
    assert (written.epoch, written.seq, written.bytes) == (first.epoch, 0, 100_000)
    restored = open_states(config).acquire(1)
    assert restored.state is not None and restored.state.payload == blob
    assert (restored.state.epoch, restored.state.seq, restored.state.chunks) == (first.epoch, 0, 13)
    assert restored.epoch > first.epoch
    assert open_states(config).read(0).newest is None  # other partitions untouched


def test_restore_picks_the_newest_state_and_cleans_up_behind_it(make_config, open_states) -> None:
    config = make_config()
    writer = open_states(config)
    writer.acquire(2)
    sizes = [30_000, 5_000, 60_000, 100]
    for seq, size in enumerate(sizes):
        assert writer.write(2, payload(size, seq)).seq == seq
    newer = open_states(config)
    restored = newer.acquire(2)
    assert restored.state is not None and restored.state.payload == payload(100, 3)
    assert restored.state.seq == 3
    # The new owner's first state tombstones everything the old owner left.
    written = newer.write(2, payload(20_000, 9))
    assert written.seq == 4 and written.tombstones > 0 and written.cleanup_pending == 0
    e = written.epoch
    claim = next(k for k in live_keys(config, 3)[2] if "/claim/" in k)
    assert live_keys(config, 3)[2] == {
        claim,
        f"p2/e{e}/0/manifest",
        f"p2/e{e}/0/chunk/0",
        f"p2/e{e}/0/chunk/1",
        f"p2/e{e}/0/chunk/2",
    }
    assert open_states(config).read(2).newest.payload == payload(20_000, 9)


def test_an_interrupted_write_leaves_the_previous_state_restorable(
    make_config, open_states, kafka_bootstrap
) -> None:
    config = make_config()
    writer = open_states(config)
    writer.acquire(0)
    writer.write(0, payload(50_000, 1))  # slot 0
    writer.write(0, payload(40_000, 2))  # slot 1
    # The owner crashes while writing its third state into slot 0: some chunks, no manifest.
    epoch = writer.epoch(0)
    own = rules.Ownership(0, epoch, b"\0" * 16, next_seq=2, last_slot=1, extents=[7, 5])
    plan = rules.plan_write(own, payload(60_000, 3), config.chunk_bytes, now=0.0)
    assert plan.slot == 0 and plan.chunks == 8
    produce_records(kafka_bootstrap, config.topic, plan.records[:5], partition=0)
    restored = open_states(config).acquire(0)
    assert restored.state is not None and restored.state.payload == payload(40_000, 2)
    # Even the crash's own slot: its old manifest now names chunks of another write.
    selection = open_states(config).read(0)
    assert selection.newest.seq == 1


def test_a_stale_owner_is_fenced_and_its_states_ignored(make_config, open_states, kafka_bootstrap) -> None:
    config = make_config()
    old = open_states(config)
    old.acquire(1)
    old.write(1, payload(20_000, 1))
    new = open_states(config)
    restored = new.acquire(1)
    assert restored.state.payload == payload(20_000, 1)
    # The old owner has not noticed it lost the partition: its next write is refused, and void anyway.
    with pytest.raises(
        StateTopicFenced, match=rf"epoch {restored.epoch} claimed it after this worker's epoch"
    ):
        old.write(1, payload(25_000, 2))
    with pytest.raises(StateTopicFenced):
        old.write(1, payload(25_000, 3))  # sticky
    selection = open_states(config).read(1)
    assert selection.newest.payload == payload(20_000, 1)
    assert any(s.reason.startswith("void: written by epoch") for s in selection.skipped)
    # A zombie that skips the check (raw records into its free slot) cannot win either, before or
    # after the new owner writes.
    zombie = rules.Ownership(1, old.epoch(1), b"\1" * 16, next_seq=9, last_slot=0)
    produce_records(kafka_bootstrap, config.topic, rules.plan_write(zombie, b"zombie", 100, 0.0).records, 1)
    assert open_states(config).read(1).newest.payload == payload(20_000, 1)
    new.write(1, payload(30_000, 4))
    produce_records(kafka_bootstrap, config.topic, rules.plan_write(zombie, b"zombie", 100, 0.0).records, 1)
    assert open_states(config).read(1).newest.payload == payload(30_000, 4)
    # Told about a newer epoch, an owner stops writing.
    new.fence(1, new.epoch(1) + 1)
    with pytest.raises(StateTopicFenced):
        new.write(1, b"late")


def test_acquire_is_refused_when_a_newer_owner_already_claimed(
    make_config, open_states, kafka_bootstrap
) -> None:
    config = make_config(partitions=1)
    first = open_states(config)
    first.acquire(0)
    second = open_states(config)
    second.acquire(0)
    assert first.epoch(0) < second.epoch(0)
    with pytest.raises(StateTopicError, match="not acquired"):
        second.write(1, b"x")
    second.release(0)
    with pytest.raises(StateTopicError, match="not acquired"):
        second.write(0, b"x")


def test_topic_creation_and_checks(kafka_bootstrap: str) -> None:
    name = f"state-{uuid.uuid4().hex[:10]}"
    config = StateTopicConfig(kafka_bootstrap, name, timeout_s=20.0)
    assert ensure_topic(config, 4) is True
    assert ensure_topic(config, 4) is False  # exists and fits
    with pytest.raises(StateTopicError, match="it has 4 partitions, the features topic has 6"):
        ensure_topic(config, 6)
    bigger = StateTopicConfig(kafka_bootstrap, name, max_message_bytes=2_000_000, timeout_s=20.0)
    with pytest.raises(StateTopicError, match=r"max\.message\.bytes is 1000000, below the 2000000"):
        ensure_topic(bigger, 4)
    plain = f"plain-{uuid.uuid4().hex[:10]}"
    admin = AdminClient({"bootstrap.servers": kafka_bootstrap})
    admin.create_topics([NewTopic(plain, num_partitions=2, replication_factor=1)])[plain].result(20)
    with pytest.raises(StateTopicError) as info:
        ensure_topic(StateTopicConfig(kafka_bootstrap, plain, timeout_s=20.0), 3)
    message = str(info.value)
    assert f"state topic {plain!r} cannot be used" in message
    assert "it has 2 partitions, the features topic has 3" in message
    assert "cleanup.policy is 'delete', it must be 'compact'" in message


def test_transactional_mode_lets_the_broker_fence_the_old_owner(make_config, open_states) -> None:
    config = make_config(partitions=2, transactional_id_prefix=f"sgt-state-{uuid.uuid4().hex[:8]}")
    old = open_states(config)
    assert old.transactional
    old.acquire(0)
    old.write(0, payload(30_000, 1))
    old.write(0, payload(10_000, 2))
    new = open_states(config)
    restored = new.acquire(0)  # init_transactions with the same transactional.id fences the old producer
    assert restored.state is not None and restored.state.payload == payload(10_000, 2)
    with pytest.raises(StateTopicFenced, match="refused, the broker fenced its transactional producer"):
        old.write(0, payload(20_000, 3))
    with pytest.raises(StateTopicFenced):
        old.write(0, payload(20_000, 4))  # sticky
    written = new.write(0, payload(50_000, 5))
    assert written.chunks == 7 and written.tombstones > 0
    assert open_states(config).read(0).newest.payload == payload(50_000, 5)


@pytest.mark.parametrize("transactional", [False, True])
def test_an_unacknowledged_record_raises_and_does_not_count(make_config, open_states, transactional) -> None:
    prefix = f"sgt-state-{uuid.uuid4().hex[:8]}" if transactional else None
    config = make_config(partitions=1, transactional_id_prefix=prefix)
    states = open_states(config)
    with pytest.raises(
        StateWriteError, match=r"partition 3: claim not written, 1 of 1 records unacknowledged"
    ):
        states.acquire(3)  # the topic has one partition
    assert states.epoch(3) is None
    with pytest.raises(StateTopicError, match="partition 3 is not acquired"):
        states.write(3, b"state")


def test_a_write_whose_acknowledgements_were_lost_is_found_in_the_log(
    make_config, open_states, kafka_bootstrap
) -> None:
    """A write that landed although the client saw no acknowledgement: the next write reads the log,
    finds that state complete, and so writes into the other slot rather than over it."""
    config = make_config(partitions=1)
    writer = open_states(config)
    writer.acquire(0)
    writer.write(0, payload(30_000, 1))  # seq 0, slot 0
    claim = writer.claims[0]
    plan = rules.plan_write(claim.ownership, payload(30_000, 2), config.chunk_bytes, now=0.0)
    produce_records(kafka_bootstrap, config.topic, plan.records, partition=0)  # landed, unacknowledged
    rules.attempted(claim.ownership, plan)
    claim.aborted(plan)
    assert plan.slot == 1
    written = writer.write(0, payload(30_000, 3))
    assert written.seq == 2
    newest = open_states(config).read(0).newest
    assert (newest.seq, newest.slot, newest.payload) == (2, 0, payload(30_000, 3))
    # Without the check the third write would have gone to slot 1 again, over the complete seq 1.


def test_writes_can_travel_while_the_caller_works(make_config, open_states) -> None:
    config = make_config()
    states = open_states(config)
    for p in (0, 1):
        states.acquire(p)
    pending = [states.start_write(0, payload(40_000, 1)), states.start_write(1, payload(40_000, 2))]
    with pytest.raises(StateTopicError, match="partition 0 has a state write in progress"):
        states.start_write(0, b"another")
    deadline = time.monotonic() + 20
    while not all(w.acknowledged for w in pending) and time.monotonic() < deadline:
        states.poll()
        time.sleep(0.001)
    assert all(w.acknowledged for w in pending)
    written = [states.finish(w) for w in pending]
    assert [(w.partition, w.seq, w.chunks) for w in written] == [(0, 0, 5), (1, 0, 5)]
    assert open_states(config).read(1).newest.payload == payload(40_000, 2)
    late = states.start_write(0, payload(10, 3))
    states.release(0)
    with pytest.raises(StateTopicError, match="partition 0 was released or re-acquired"):
        states.finish(late)


def _transactional_producer(config: StateTopicConfig) -> Producer:
    producer = Producer(
        {
            "bootstrap.servers": config.bootstrap_servers,
            "transactional.id": f"caller-{uuid.uuid4().hex[:8]}",
            "message.max.bytes": config.max_message_bytes,
        }
    )
    producer.init_transactions(20)
    return producer


def test_a_state_staged_in_the_callers_transaction_is_written_when_it_commits(
    make_config, open_states, monkeypatch
) -> None:
    config = make_config()
    states = open_states(config)
    states.acquire(0)
    states.write(0, payload(10_000, 1))  # an older state of its own, cleaned up after the staged one
    producer = _transactional_producer(config)
    producer.begin_transaction()
    pending = states.stage(0, payload(30_000, 2), producer)
    with pytest.raises(StateTopicError, match="write in progress"):
        states.stage(0, payload(1, 3), producer)
    producer.commit_transaction(20)
    producer.poll(0)
    written = states.confirm(pending)
    assert (written.seq, written.chunks, written.bytes) == (1, 4, 30_000)
    assert open_states(config).read(0).newest.payload == payload(30_000, 2)
    # an aborted transaction writes nothing the owner counts; its next state follows as usual
    producer.begin_transaction()
    aborted = states.stage(0, payload(5_000, 4), producer)
    producer.abort_transaction(20)
    states.discard(aborted)
    producer.begin_transaction()
    pending = states.stage(0, payload(7_000, 5), producer)
    producer.commit_transaction(20)
    producer.poll(0)
    assert states.confirm(pending).seq == 3
    assert open_states(config).read(0).newest.payload == payload(7_000, 5)
    # a state staged right after a confirmed one: the only other offset between them is the commit
    # marker, so the ownership check reads nothing
    reads: list[int] = []
    read = states.reader.read
    monkeypatch.setattr(
        states.reader, "read", lambda p, start, upto: reads.append(start) or read(p, start, upto)
    )
    producer.begin_transaction()
    pending = states.stage(0, payload(7_000, 6), producer)
    producer.commit_transaction(20)
    producer.poll(0)
    assert states.confirm(pending).seq == 4 and reads == []
    newer = open_states(config)
    newer.acquire(0)  # a claim between two staged states: read, and fenced
    producer.begin_transaction()
    pending = states.stage(0, payload(7_000, 7), producer)
    producer.commit_transaction(20)
    producer.poll(0)
    with pytest.raises(StateTopicFenced):
        states.confirm(pending)
    assert len(reads) == 1


def test_a_staged_state_after_a_newer_claim_is_refused_at_confirm(make_config, open_states) -> None:
    config = make_config()
    old = open_states(config)
    old.acquire(2)
    producer = _transactional_producer(config)
    # A newer owner claims before the old one stages (not while its transaction is open: a
    # read_committed reader's acquire would wait for that transaction to end)
    newer = open_states(config).acquire(2)
    producer.begin_transaction()
    pending = old.stage(2, payload(9_000, 1), producer)
    producer.commit_transaction(20)
    producer.poll(0)
    with pytest.raises(StateTopicFenced, match=rf"epoch {newer.epoch} claimed it after"):
        old.confirm(pending)
    with pytest.raises(StateTopicFenced):
        old.stage(2, payload(1, 2), producer)  # sticky


def test_stage_needs_a_state_topic_that_is_not_transactional_itself(make_config, open_states) -> None:
    config = make_config(transactional_id_prefix=f"tx-{uuid.uuid4().hex[:8]}")
    states = open_states(config)
    states.acquire(0)
    with pytest.raises(StateTopicError, match="without transactional_id_prefix"):
        states.stage(0, b"x", _transactional_producer(config))


@pytest.mark.kafka
def test_writes_go_on_after_an_outage_longer_than_the_delivery_timeout(
    proxied_broker: tuple[str, FaultProxy],
) -> None:
    """Writes whose records time out (the broker unreachable for longer than message.timeout.ms) fail;
    once the broker is back, the next writes are durable. Before, the idempotent producer whose records
    had timed out got PRODUCER_FENCED for every later record, so no state was written again (and the
    worker refused its final checkpoint)."""
    bootstrap, proxy = proxied_broker
    client = f"state-{uuid.uuid4().hex[:6]}"
    config = StateTopicConfig(
        bootstrap,
        f"state-{uuid.uuid4().hex[:10]}",
        max_message_bytes=SMALL,
        timeout_s=20.0,
        client_options={"client.id": client, "message.timeout.ms": 2000},
    )
    assert ensure_topic(config, 2)
    with StateTopic(config) as states:
        for p in (0, 1):
            states.acquire(p)
            states.write(p, payload(20_000, p))
        proxy.hold(client)
        held = [states.start_write(p, payload(20_000, 10 + p)) for p in (0, 1)]
        for p in (0, 1):  # the first failure replaces the producer; the second is reported all the same
            with pytest.raises(StateWriteError, match=r"state seq 1 not written.*Message timed out"):
                states.finish(held[p])
        proxy.release()
        assert [states.write(p, payload(20_000, 20 + p)).seq for p in (0, 1, 0)] == [2, 2, 3]
    with StateTopic(config) as reader:
        assert [reader.read(p).newest.payload for p in (0, 1)] == [payload(20_000, 20), payload(20_000, 21)]


def _delete_topic(bootstrap: str, topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.delete_topics([topic], operation_timeout=20)[topic].result(30)
    deadline = time.monotonic() + 30
    while topic in admin.list_topics(timeout=10).topics:
        assert time.monotonic() < deadline, f"{topic} still listed after its deletion"
        time.sleep(0.2)


@pytest.mark.parametrize("created_again", [False, True])
def test_a_deleted_or_recreated_state_topic_is_found_at_the_next_write(
    make_config, open_states, kafka_bootstrap, created_again: bool
) -> None:
    """Deleting the state topic under a writer went unnoticed: the embedded broker acknowledges records
    produced to a deleted topic (a Kafka broker with auto.create.topics.enable creates it again), so
    every later write was confirmed while no state survived. Now the write raises StateTopicLost."""
    config = make_config(partitions=2)
    states = open_states(config)
    states.connect()
    states.acquire(1)
    states.write(1, payload(20_000, 1))
    _delete_topic(kafka_bootstrap, config.topic)
    if created_again:
        assert ensure_topic(config, 2)  # the same name, partition count and settings: another topic
    with pytest.raises(StateTopicLost, match="deleted"):
        states.write(1, payload(20_000, 2))


def _feature(i: int) -> tuple[bytes, bytes]:
    return f"k{i}".encode(), orjson.dumps({"id": f"s{i}", "x": {"a": float(i % 7)}, "y": i % 2})


def _worker_topics(bootstrap: str) -> dict[str, str]:
    from worker.devtools.embedded_broker import create_topics

    tag = uuid.uuid4().hex[:8]
    topics = {kind: f"lost-{kind}-{tag}" for kind in ("features", "predictions", "dead")}
    create_topics(bootstrap, list(topics.values()), 1)
    return topics


def test_a_worker_whose_state_topic_is_deleted_reports_it_and_stops(
    kafka_bootstrap: str, tmp_path: Path, worker_threads: Callable[..., WorkerThread]
) -> None:
    """The state topic deleted under a running worker: checkpoints went on being confirmed, the
    written-bytes counter grew, nothing was logged, and the worker stopped with exit 0, while a worker
    on an empty disk would have found no state. Now the next checkpoint finds it out: counted, the
    worker unhealthy with the reason, its final checkpoints written to the files, and run() raises
    StateTopicLost (the command line's exit code 6)."""
    topics = _worker_topics(kafka_bootstrap)
    settings = inprocess_settings(
        kafka_bootstrap, topics, tmp_path, checkpoint_records=50, checkpoint_seconds=0.5, batch_size=50
    )
    state_topic = settings.state_topic_name
    assert state_topic is not None  # on by default
    produce_records(kafka_bootstrap, topics["features"], [_feature(i) for i in range(100)], partition=0)
    run = worker_threads(settings)
    worker = run.worker

    def written() -> float:
        return value(samples(worker.metrics.render().decode()), "sgt_state_topic_written_bytes_total") or 0.0

    def next_offsets() -> list[int] | None:
        found = checkpoint_headers(tmp_path, 1)
        return found[0][0]["next_offsets"] if found else None

    wait_for(lambda: next_offsets() == [100, 0], 60, "a checkpoint")
    wait_for(lambda: written() > 0, 30, "a state-topic write")
    # (and that checkpoint complete: its state-topic write confirmed, its offsets committed. Deleted
    # while the write is in flight, the topic is found lost at once and the worker rightly stops before
    # reading the next records, which this test needs it to have read)
    group = settings.group_id
    wait_for(
        lambda: committed_offsets(kafka_bootstrap, group, topics["features"], 1) == {0: 100}, 60, "commit"
    )
    _delete_topic(kafka_bootstrap, state_topic)
    produce_records(kafka_bootstrap, topics["features"], [_feature(i) for i in range(100, 200)], partition=0)
    error = run.join(60)
    assert isinstance(error, StateTopicLost), error
    parsed = samples(worker.metrics.render().decode())
    assert value(parsed, "sgt_checkpoint_failures_total", reason="state_topic_lost") == 1
    assert not worker.health.alive and (worker.health.problem or "").startswith("state topic lost")
    assert next_offsets() == [200, 0]  # the final checkpoint: the file has it all


def test_the_command_line_exits_with_code_6_when_the_state_topic_is_deleted(
    kafka_bootstrap: str, tmp_path: Path, start_worker: Callable[[list[str], Path], WorkerProcess]
) -> None:
    topics = _worker_topics(kafka_bootstrap)
    group = f"lost-{uuid.uuid4().hex[:8]}"
    args = worker_args(kafka_bootstrap, group, topics, tmp_path / "ckpt", "--checkpoint-seconds", "0.5")
    produce_records(kafka_bootstrap, topics["features"], [_feature(i) for i in range(100)], partition=0)
    process = start_worker(args, tmp_path / "worker.log")
    wait_for(lambda: process.log_count("partitions assigned") >= 1, 60, "the assignment")
    wait_for(lambda: (tmp_path / "ckpt" / "partition-0000.ckpt").exists(), 60, "a checkpoint")
    _delete_topic(kafka_bootstrap, f"{group}-state")
    produce_records(kafka_bootstrap, topics["features"], [_feature(i) for i in range(100, 200)], partition=0)
    assert process.proc.wait(60) == 6
    assert process.log_events("worker stopped: the state topic was deleted or created again")
