"""The worker's default fetch settings keep it reading a partition of many small record batches.

The embedded broker (Tansu's memory engine) walks every batch a partition holds on each fetch and,
once the fetch's ``max_wait`` has run out, answers empty even when records are there. With a wait of
10 ms a partition of some ten thousand batches was never read again: the demo froze after about a
minute. The worker's default wait (500 ms, librdkafka's own) reads such a partition at once.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from confluent_kafka import Producer

from tests.worker.worker_util import WorkerThread, inprocess_settings, wait_for, worker_threads_fixture
from worker.devtools.produce import feature_record

__all__ = ["worker_threads_fixture"]

BATCHES = 30_000  # one record each: a wait of 10 ms read none of them in 30 s (see the module doc)


def _produce_one_record_batches(bootstrap: str, topic: str, count: int) -> None:
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "linger.ms": 0,
            "batch.num.messages": 1,  # every record a batch of its own
            "queue.buffering.max.messages": 2 * count,
        }
    )
    for i in range(count):
        value = feature_record(f"t{i}", {"a": float(i % 97)}, i % 2, 1_700_000_000.0 + i / 1000)
        producer.produce(topic, value=value, key=b"k", partition=0)
    assert producer.flush(120) == 0


def test_the_default_fetch_wait_reads_a_partition_of_many_small_batches(
    kafka_bootstrap: str,
    tmp_path: Path,
    topic_factory: Callable[..., dict[str, str]],
    worker_threads: Callable[..., WorkerThread],
) -> None:
    topics = topic_factory(1, "features", "predictions", "dead")
    _produce_one_record_batches(kafka_bootstrap, topics["features"], BATCHES)
    # fetch_wait_max_ms=None: the setting's default (the tests' helper sets 10 ms for latency)
    settings = inprocess_settings(kafka_bootstrap, topics, tmp_path, fetch_wait_max_ms=None)
    run = worker_threads(settings)
    wait_for(
        lambda: sum(o.state.consumed[0] for o in dict(run.worker.owned).values()) >= BATCHES,
        90,
        f"the worker to read all {BATCHES} records of one-record batches",
    )
    assert run.stop() is None
