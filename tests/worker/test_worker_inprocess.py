"""The worker in-process against the real broker: co-partitioned assignment, live streams whose labels
topic is still empty, regression, and clean shutdown with per-partition series removed. Each worker
runs as a WorkerThread whose outcome the test asserts."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from pathlib import Path

import orjson
from confluent_kafka import Consumer

from tests.kafka_util import produce_records, read_all
from tests.worker.stub_model import StubModel
from tests.worker.worker_util import (
    WorkerThread,
    inprocess_settings,
    samples,
    value,
    wait_for,
    worker_threads_fixture,
)
from worker.devtools.embedded_broker import create_topics
from worker.kafka.clients import consumer_config

__all__ = ["worker_threads_fixture"]

Start = Callable[..., WorkerThread]


def _topics(bootstrap: str, partitions: int, *kinds: str) -> dict[str, str]:
    tag = uuid.uuid4().hex[:8]
    topics = {k: f"inproc-{k}-{tag}" for k in kinds}
    create_topics(bootstrap, list(topics.values()), partitions)
    return topics


def test_the_range_assignor_keeps_equal_partition_numbers_together(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    topics = _topics(kafka_bootstrap, 4, "features", "labels", "predictions", "dead")
    settings = inprocess_settings(kafka_bootstrap, topics, tmp_path)
    assigned: dict[int, list] = {0: [], 1: []}
    consumers = [Consumer(consumer_config(settings)) for _ in range(2)]
    for i, consumer in enumerate(consumers):
        consumer.subscribe(
            [topics["features"], topics["labels"]],
            on_assign=lambda _c, parts, i=i: assigned.__setitem__(i, [(p.topic, p.partition) for p in parts]),
        )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not (assigned[0] and assigned[1]):
        for consumer in consumers:
            consumer.poll(0.1)
    for consumer in consumers:
        consumer.close()
    assert assigned[0] and assigned[1], "both members should get partitions"
    for parts in assigned.values():
        features = {p for t, p in parts if t == topics["features"]}
        labels = {p for t, p in parts if t == topics["labels"]}
        assert features == labels and len(features) == 2
    assert {p for t, p in assigned[0]} | {p for t, p in assigned[1]} == {0, 1, 2, 3}


def test_features_flow_while_the_labels_topic_is_still_empty(
    kafka_bootstrap: str, tmp_path: Path, worker_threads: Start
) -> None:
    topics = _topics(kafka_bootstrap, 2, "features", "labels", "predictions", "dead")
    run = worker_threads(inprocess_settings(kafka_bootstrap, topics, tmp_path))
    worker = run.worker
    records = [(f"k{i}".encode(), orjson.dumps({"id": f"s{i}", "x": {"a": float(i)}})) for i in range(200)]
    produce_records(kafka_bootstrap, topics["features"], records)
    predictions = read_all(kafka_bootstrap, topics["predictions"], 2, expect=200, idle_s=20)
    assert len(predictions) == 200
    # labels arriving later are joined to the waiting features and learned
    labels = [(f"k{i}".encode(), orjson.dumps({"id": f"s{i}", "y": i % 2})) for i in range(200)]
    produce_records(kafka_bootstrap, topics["labels"], labels)
    wait_for(
        lambda: sum(o.state.trained for o in dict(worker.owned).values()) == 200,
        30,
        "the labels to be learned",
    )
    assert sum(o.state.prequential.n for o in worker.owned.values()) == 200
    assert run.stop() is None  # a clean stop, its final checkpoints written


def test_regression_inline_labels_and_series_removed_at_shutdown(
    kafka_bootstrap: str, tmp_path: Path, worker_threads: Start
) -> None:
    topics = _topics(kafka_bootstrap, 2, "features", "predictions", "dead")
    run = worker_threads(inprocess_settings(kafka_bootstrap, topics, tmp_path, task="regression"))
    worker = run.worker
    records = [
        (f"k{i}".encode(), orjson.dumps({"id": f"s{i}", "x": [float(i % 10), 1.0], "y": 2.0 * (i % 10)}))
        for i in range(500)
    ]
    produce_records(kafka_bootstrap, topics["features"], records)
    messages = read_all(kafka_bootstrap, topics["predictions"], 2, expect=500, idle_s=30)
    docs = [orjson.loads(m.value()) for m in messages]
    assert len(docs) == 500 and all(isinstance(d["prediction"], float) and "proba" not in d for d in docs)
    # keyed like the input, so with equal partition counts a prediction lands in its input's partition
    for m, d in zip(messages, docs, strict=True):
        assert m.key() == f"k{d['id'][1:]}".encode() and m.partition() == d["partition"]
    wait_for(lambda: worker.health.ready, 10, "readiness")
    parsed = samples(worker.metrics.render().decode())
    assert value(parsed, "sgt_assigned_partitions") == 2
    assert sum(value(parsed, "sgt_trained_total", partition=str(p)) or 0 for p in range(2)) == 500
    assert run.stop() is None  # a clean stop, its final checkpoints written
    text = worker.metrics.render().decode()
    assert 'partition="' not in text.replace('sgt_rebalances_total{event="', "")
    assert not worker.health.ready


class _BrokenGauges(StubModel):
    """Learns normally but fails when asked its size after a batch: a failure outside the model call."""

    @property
    def n_nodes(self) -> int:
        if self.n_seen:
            raise RuntimeError("gauge failure")
        return 1


def test_a_failing_loop_leaves_without_writing_a_checkpoint(
    kafka_bootstrap: str, tmp_path: Path, worker_threads: Start
) -> None:
    topics = _topics(kafka_bootstrap, 1, "features", "predictions", "dead")
    settings = inprocess_settings(kafka_bootstrap, topics, tmp_path, batch_size=10, checkpoint_records=10**6)
    run = worker_threads(
        settings, model_factory=_BrokenGauges, model_registry={"_BrokenGauges": _BrokenGauges}
    )
    records = [(None, orjson.dumps({"x": {"a": float(i)}, "y": i % 2})) for i in range(100)]
    produce_records(kafka_bootstrap, topics["features"], records)
    error = run.join(60)
    assert isinstance(error, RuntimeError) and str(error) == "gauge failure"
    assert not list(tmp_path.glob("partition-*"))


class _PoisonModel(StubModel):
    """Fails on rows with a == 13, after learning the rows before it in the same call."""

    def predict_learn_many(self, X: list, y: list) -> object:
        for i, x in enumerate(X):
            if x.get("a") == 13.0:
                super().predict_learn_many(X[:i], y[:i])
                raise ValueError("cannot learn this row")
        return super().predict_learn_many(X, y)


def test_a_record_the_model_fails_on_is_dead_lettered_and_the_rest_learned_exactly(
    kafka_bootstrap: str, tmp_path: Path, worker_threads: Start
) -> None:
    from worker.checkpoints.file_store import read_newest
    from worker.core.partition_state import split_state

    topics = _topics(kafka_bootstrap, 1, "features", "predictions", "dead")
    settings = inprocess_settings(kafka_bootstrap, topics, tmp_path, checkpoint_records=5, batch_size=30)
    run = worker_threads(settings, model_factory=_PoisonModel, model_registry={"_PoisonModel": _PoisonModel})
    worker = run.worker
    docs = [{"id": f"s{i}", "x": {"a": float(i)}, "y": i % 3} for i in range(200)]
    produce_records(kafka_bootstrap, topics["features"], [(None, orjson.dumps(d)) for d in docs])
    dead = read_all(kafka_bootstrap, topics["dead"], 1, expect=1, idle_s=30)
    assert [(m.value(), dict(m.headers())["reason"]) for m in dead] == [
        (orjson.dumps(docs[13]), b"model_error")
    ]
    wait_for(lambda: worker.owned and worker.owned[0].state.next_offsets == [200, 0], 30, "the end")
    assert run.stop() is None  # a clean stop, its final checkpoint written
    reference = StubModel()
    rows = [d for d in docs if d["x"]["a"] != 13.0]
    reference.predict_learn_many([d["x"] for d in rows], [d["y"] for d in rows])
    loaded = read_newest(tmp_path, 0)
    assert loaded is not None
    header, model_blob = split_state(loaded.payload)
    assert model_blob == reference.to_bytes() and header["next_offsets"] == [200, 0]
    predicted = {
        orjson.loads(m.value())["offset"]
        for m in read_all(kafka_bootstrap, topics["predictions"], 1, at_least=199)
    }
    assert predicted == set(range(200)) - {13}


def test_features_flow_when_the_labels_partitions_are_missing(
    kafka_bootstrap: str, tmp_path: Path, worker_threads: Start
) -> None:
    topics = _topics(kafka_bootstrap, 2, "features", "predictions", "dead")
    topics["labels"] = f"never-created-{uuid.uuid4().hex[:8]}"
    run = worker_threads(inprocess_settings(kafka_bootstrap, topics, tmp_path))
    records = [(f"k{i}".encode(), orjson.dumps({"id": f"s{i}", "x": {"a": float(i)}})) for i in range(100)]
    produce_records(kafka_bootstrap, topics["features"], records)
    assert len(read_all(kafka_bootstrap, topics["predictions"], 2, expect=100, idle_s=30)) == 100
    assert run.stop() is None  # a clean stop, its final checkpoints written
