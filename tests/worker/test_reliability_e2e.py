"""Reliability end to end, against a real Kafka-protocol broker over loopback: a poison record and huge
labels do not stop a partition, no output is lost across an outage longer than the producer's
delivery timeout, the state topic catches up after such an outage of its own, offsets past a
re-created topic's end are read again, and a final checkpoint that fails gives a non-zero exit code.
The workers run in threads whose outcome each test asserts (a clean stop)."""

from __future__ import annotations

import hashlib
import os
import signal
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import NamedTuple

import orjson
import pytest
from confluent_kafka import Producer

from tests.kafka_util import produce_records, read_all
from tests.worker.fault_proxy import FaultProxy, proxied_broker_fixture
from tests.worker.worker_util import (
    WorkerProcess,
    WorkerThread,
    committed_offset,
    inprocess_settings,
    samples,
    start_worker_fixture,
    value,
    wait_for,
    worker_args,
    worker_threads_fixture,
)
from worker.checkpoints import file_store
from worker.checkpoints.restore import load_state
from worker.config import WorkerSettings
from worker.core.partition_state import state_header
from worker.devtools.embedded_broker import create_topics, start_tansu
from worker.state_topic.admin import StateTopicConfig
from worker.state_topic.client import StateTopic

__all__ = ["proxied_broker_fixture", "start_worker_fixture", "worker_threads_fixture"]


def _topics(bootstrap: str, partitions: int = 1) -> dict[str, str]:
    tag = uuid.uuid4().hex[:8]
    topics = {k: f"rel-{k}-{tag}" for k in ("features", "predictions", "dead")}
    create_topics(bootstrap, list(topics.values()), partitions)
    return topics


def _good(i: int) -> tuple[bytes, bytes]:
    return f"k{i}".encode(), orjson.dumps({"id": f"s{i}", "x": {"a": float(i % 7)}, "y": i % 2})


def _next_offsets(ckpt: Path) -> list[int] | None:
    loaded = file_store.read_newest(ckpt, 0)
    return None if loaded is None else list(state_header(loaded.payload)["next_offsets"])


@pytest.fixture
def own_broker(tmp_path: Path) -> Iterator[str]:
    """A broker for this test alone: a 10 MB record stays out of the session's broker's memory."""
    with start_tansu(log_path=tmp_path / "tansu.log") as broker:
        yield broker.bootstrap_servers


@pytest.mark.kafka
def test_a_poison_record_and_huge_labels_are_dead_lettered_within_the_message_bound(
    own_broker: str, tmp_path: Path, worker_threads: Callable[[WorkerSettings], WorkerThread]
) -> None:
    """A 10 MB record and three records with 900 KB labels, among good ones: before, the first put the
    partition in a crash loop (the producer refused its dead letter) and the others made every later
    prediction unsendable."""
    kafka_bootstrap = own_broker
    topics = _topics(kafka_bootstrap)
    poison = b'{"id": "big", "x": {"a": "' + b"z" * 10_000_000 + b'"}, "y": 1}'
    huge = [orjson.dumps({"id": f"h{i}", "x": {"a": 1.0}, "y": chr(65 + i) * 900_000}) for i in range(3)]
    records = [_good(i) for i in range(20)] + [(b"big", poison)] + [(None, h) for h in huge]
    records += [_good(i) for i in range(20, 40)]
    big = Producer({"bootstrap.servers": kafka_bootstrap, "message.max.bytes": 20_000_000, "linger.ms": 5})
    for key, payload in records:
        big.produce(topics["features"], payload, key, partition=0)
    assert big.flush(60) == 0
    run = worker_threads(inprocess_settings(kafka_bootstrap, topics, tmp_path, checkpoint_records=10))
    predictions = read_all(kafka_bootstrap, topics["predictions"], 1, expect=40, idle_s=30)
    docs = [orjson.loads(m.value()) for m in predictions]
    assert sorted(d["offset"] for d in docs) == list(range(20)) + list(range(24, 44))
    assert max(len(m.value()) for m in predictions) < 1000  # no class name of 900 KB in any proba
    dead = read_all(kafka_bootstrap, topics["dead"], 1, expect=4, idle_s=30)
    assert len(dead) == 4 and all(len(m.value()) + len(m.key() or b"") < 1_000_000 for m in dead)
    first = dict(dead[0].headers())
    assert first["reason"] == b"oversized" and first["source_offset"] == b"20"
    assert first["source_topic"] == topics["features"].encode() and first["source_partition"] == b"0"
    assert first["truncated"] == b"true" and first["original_bytes"] == str(len(poison)).encode()
    assert first["original_sha256"] == hashlib.sha256(poison).hexdigest().encode()
    assert poison.startswith(dead[0].value()) and len(dead[0].value()) > 900_000
    labels = [(dict(m.headers())["reason"], dict(m.headers())["source_offset"], m.value()) for m in dead[1:]]
    assert labels == [(b"label_too_long", str(21 + i).encode(), huge[i]) for i in range(3)]
    wait_for(lambda: _next_offsets(tmp_path) == [44, 0], 30, "a checkpoint past every record")
    assert run.worker.owned[0].state.model.classes_ == [0, 1]
    assert run.stop() is None  # a clean stop, its final checkpoint written


@pytest.mark.kafka
def test_no_output_is_lost_across_an_outage_longer_than_the_delivery_timeout(
    proxied_broker: tuple[str, FaultProxy],
    tmp_path: Path,
    worker_threads: Callable[[WorkerSettings], WorkerThread],
) -> None:
    """The worker's produce path is cut for longer than message.timeout.ms while it goes on consuming.
    Before, the failed predictions counted as delivered, the next checkpoint moved past them and they
    were never produced; now every record's prediction is in the topic once the broker is back, and
    the worker stops cleanly. (When the cut also caught the first checkpoint's state-topic write, the
    stop used to fail: see the next test.)"""
    bootstrap, proxy = proxied_broker
    topics, client, settings = _outage_setup(bootstrap, tmp_path)
    produce_records(bootstrap, topics["features"], [_good(i) for i in range(300)], partition=0)
    run = worker_threads(settings)
    worker = run.worker
    assert len(read_all(bootstrap, topics["predictions"], 1, expect=300, idle_s=30)) == 300
    wait_for(lambda: _next_offsets(tmp_path) == [300, 0], 30, "the first checkpoint")
    proxy.hold(client)  # from here on, the worker's predictions do not reach the broker
    produce_records(bootstrap, topics["features"], [_good(i) for i in range(300, 600)], partition=0)
    wait_for(
        lambda: worker.owned and worker.owned[0].position.fetched[0] == 600, 30, "the new records consumed"
    )
    time.sleep(5)  # more than message.timeout.ms: the held predictions fail for good
    assert _next_offsets(tmp_path) == [300, 0]  # no checkpoint covers an output not delivered
    proxy.release()
    wait_for(lambda: _next_offsets(tmp_path) == [600, 0], 60, "a checkpoint at the end")
    offsets = {
        orjson.loads(m.value())["offset"] for m in read_all(bootstrap, topics["predictions"], 1, at_least=600)
    }
    assert offsets == set(range(600))
    parsed = samples(worker.metrics.render().decode())
    assert (value(parsed, "sgt_delivery_failures_total", topic=topics["predictions"]) or 0) >= 1
    assert run.stop() is None  # a clean stop, its final checkpoint written


@pytest.mark.kafka
def test_the_state_topic_catches_up_after_an_outage_longer_than_the_delivery_timeout(
    proxied_broker: tuple[str, FaultProxy],
    tmp_path: Path,
    worker_threads: Callable[[WorkerSettings], WorkerThread],
) -> None:
    """Only the state topic's produce path is cut, for longer than message.timeout.ms, while the
    predictions flow and checkpoint files are written. Before, the state topic's producer never
    delivered again once its records had timed out (PRODUCER_FENCED for every later one): no checkpoint
    reached the state topic, no offset was committed, and the final checkpoint was refused
    (FinalCheckpointError). Now the state topic and the committed offsets catch up once it is back."""
    bootstrap, proxy = proxied_broker
    topics, client, settings = _outage_setup(bootstrap, tmp_path)
    state_topic = settings.state_topic_name
    assert state_topic is not None  # on by default

    def committed() -> int:
        return committed_offset(bootstrap, settings.group_id, topics["features"], 0)

    produce_records(bootstrap, topics["features"], [_good(i) for i in range(300)], partition=0)
    run = worker_threads(settings)
    wait_for(lambda: _state_offsets(bootstrap, state_topic) == [300, 0], 60, "the state topic", interval=0.5)
    wait_for(lambda: committed() == 300, 30, "the first commit", interval=0.5)
    proxy.hold(client, topic=state_topic)  # from here on, the state topic's records do not reach it
    produce_records(bootstrap, topics["features"], [_good(i) for i in range(300, 600)], partition=0)
    assert len(read_all(bootstrap, topics["predictions"], 1, expect=600, idle_s=30)) == 600
    wait_for(lambda: _failures(run, "state_topic") >= 1, 30, "a state write timed out")
    wait_for(lambda: _next_offsets(tmp_path) == [600, 0], 30, "the checkpoint files to go on")
    assert _state_offsets(bootstrap, state_topic) == [300, 0] and committed() == 300  # nothing else does
    proxy.release()
    wait_for(lambda: _state_offsets(bootstrap, state_topic) == [600, 0], 60, "the state topic", interval=0.5)
    wait_for(lambda: committed() == 600, 30, "the offsets committed", interval=0.5)
    assert run.stop() is None  # a clean stop, its final checkpoint written


class _Outage(NamedTuple):
    topics: dict[str, str]
    client: str  # the worker's client.id, which the fault proxy holds
    settings: WorkerSettings


def _outage_setup(bootstrap: str, tmp_path: Path) -> _Outage:
    """A worker's topics and settings for an outage test: checkpoints every 100 records or 0.5 s, a
    client.id of its own for the fault proxy to hold, and deliveries that fail after 2 s."""
    topics = _topics(bootstrap)
    client = f"worker-{uuid.uuid4().hex[:6]}"
    settings = inprocess_settings(
        bootstrap,
        topics,
        tmp_path,
        checkpoint_records=100,
        checkpoint_seconds=0.5,
        kafka_options=f"client.id={client},message.timeout.ms=2000",
    )
    return _Outage(topics, client, settings)


def _state_offsets(bootstrap: str, topic: str) -> list[int] | None:
    """The next offsets of partition 0's newest state in the state topic (None: it holds none)."""
    with StateTopic(StateTopicConfig(bootstrap, topic, timeout_s=20.0)) as states:
        newest = states.read(0).newest
    return None if newest is None else list(state_header(newest.payload)["next_offsets"])


def _failures(run: WorkerThread, reason: str) -> float:
    parsed = samples(run.worker.metrics.render().decode())
    return value(parsed, "sgt_checkpoint_failures_total", reason=reason) or 0


def test_offsets_past_a_recreated_topics_end_are_read_again_from_its_start(
    kafka_bootstrap: str, tmp_path: Path, worker_threads: Callable[[WorkerSettings], WorkerThread]
) -> None:
    """A checkpoint that read 5,000 records of a topic that now holds 50 (deleted and re-created):
    before, the worker waited for offset 5,000 and skipped every new record, with lag 0."""
    topics = _topics(kafka_bootstrap)
    settings = inprocess_settings(kafka_bootstrap, topics, tmp_path, checkpoint_seconds=0.5)
    state = load_state(settings, 0)
    state.next_offsets = [5000, 0]
    file_store.write_checkpoint(tmp_path, 0, state.to_bytes(), file_store.Owner.of(settings))
    produce_records(kafka_bootstrap, topics["features"], [_good(i) for i in range(50)], partition=0)
    run = worker_threads(settings)
    predictions = read_all(kafka_bootstrap, topics["predictions"], 1, expect=50, idle_s=30)
    assert sorted(orjson.loads(m.value())["offset"] for m in predictions) == list(range(50))
    wait_for(lambda: _next_offsets(tmp_path) == [50, 0], 30, "a checkpoint at the new end")
    parsed = samples(run.worker.metrics.render().decode())
    assert value(parsed, "sgt_offset_resets_total", topic=topics["features"], reason="past_end") == 1
    assert run.stop() is None  # a clean stop, its final checkpoint written


def test_a_failed_final_checkpoint_exits_non_zero(
    kafka_bootstrap: str, tmp_path: Path, start_worker: Callable[[list[str], Path], WorkerProcess]
) -> None:
    topics = _topics(kafka_bootstrap)
    ckpt = tmp_path / "ckpt"
    produce_records(kafka_bootstrap, topics["features"], [_good(i) for i in range(100)], partition=0)
    args = worker_args(
        kafka_bootstrap, f"rel-{uuid.uuid4().hex[:8]}", topics, ckpt, "--checkpoint-seconds", "0.2"
    )
    worker = start_worker(args, tmp_path / "worker.log")
    wait_for(lambda: _next_offsets(ckpt) == [100, 0], 60, "the first checkpoint")
    os.rename(ckpt, tmp_path / "moved")
    ckpt.write_text("not a directory any more")  # every later checkpoint write fails
    produce_records(kafka_bootstrap, topics["features"], [_good(i) for i in range(100, 150)], partition=0)
    wait_for(lambda: _predicted(kafka_bootstrap, topics) >= 150, 60, "the new records predicted")
    assert worker.stop(signal.SIGTERM) == 4
    assert worker.log_events("worker stopped without its final checkpoint")


def _predicted(bootstrap: str, topics: dict[str, str]) -> int:
    return len(read_all(bootstrap, topics["predictions"], 1, idle_s=0.5))
