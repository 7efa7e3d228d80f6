"""Plain helpers for tests that talk to a real Kafka-protocol broker over loopback.

Client settings tuned for tests (fast group joins, low latency, Java-compatible keyed partitioning),
and three helpers that need no consumer group: `produce_records`, `read_all` and `end_offsets`.
Tests import them as ``from tests.kafka_util import ...``.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterable, Mapping
from typing import Any

from confluent_kafka import Consumer, KafkaError, Message, Producer, TopicPartition

# Group settings: Tansu takes about half of session.timeout.ms to complete a join (23 s by default).
GROUP_SETTINGS: Mapping[str, Any] = {"session.timeout.ms": 6000, "heartbeat.interval.ms": 1000}
# Producer side: small linger for latency; murmur2_random partitions keys as Java clients do, so
# features and labels produced by different clients land in the same partition number.
PRODUCER_SETTINGS: Mapping[str, Any] = {"linger.ms": 5, "partitioner": "murmur2_random"}
# Consumer side: answer fetches after 10 ms instead of 500 ms when there is little data.
CONSUMER_SETTINGS: Mapping[str, Any] = {**GROUP_SETTINGS, "fetch.wait.max.ms": 10}

# Ordered, acknowledged delivery without the idempotent producer's start-up wait (test input only).
ORDERED_PRODUCER_SETTINGS: Mapping[str, Any] = {
    "enable.idempotence": False,
    "acks": "all",
    "max.in.flight.requests.per.connection": 1,
}

FAST_CLIENT_SETTINGS: dict[str, Any] = {**CONSUMER_SETTINGS, **PRODUCER_SETTINGS}
"""Every fast setting in one dict, as the worker's tests pass them through (the worker splits them)."""

READ_LIMIT_S = 120.0


class DeliveryError(RuntimeError):
    """Some records were not acknowledged by the broker."""


def produce_records(
    bootstrap: str,
    topic: str,
    records: Iterable[tuple[bytes | None, bytes]],
    partition: int | None = None,
    timeout_s: float = 60.0,
) -> int:
    """Produce ``(key, value)`` records in order (acks=all, one request in flight); return the count.

    With ``partition`` every record goes to that partition; otherwise the key decides (murmur2, as
    Java clients). Raises `DeliveryError` unless every record was acknowledged. The producer is not
    idempotent on purpose: a new idempotent librdkafka producer waits 0.5 to 1 s for its producer id
    before the first delivery; one request in flight keeps the order without it.
    """
    producer = Producer({"bootstrap.servers": bootstrap, **PRODUCER_SETTINGS, **ORDERED_PRODUCER_SETTINGS})
    failures: list[KafkaError] = []

    def on_delivery(err: KafkaError | None, _msg: Message) -> None:
        if err is not None:
            failures.append(err)

    extra = {} if partition is None else {"partition": partition}
    count = 0
    for key, value in records:
        while True:
            try:
                producer.produce(topic, value=value, key=key, on_delivery=on_delivery, **extra)
                break
            except BufferError:
                producer.poll(0.05)
        count += 1
        if count % 10_000 == 0:
            producer.poll(0)
    left = producer.flush(timeout_s)
    if left or failures:
        raise DeliveryError(f"{left} records undelivered, {len(failures)} failed: {failures[:3]}")
    return count


def read_all(
    bootstrap: str,
    topic: str,
    partitions: int,
    idle_s: float = 2.0,
    expect: int | None = None,
    limit_s: float = READ_LIMIT_S,
    at_least: int = 0,
) -> list[Message]:
    """Every record of ``topic`` (partitions ``0 .. partitions - 1``), read from offset 0 without a group.

    Reading stops when no record has arrived for ``idle_s`` seconds once ``at_least`` records have
    been read, as soon as ``expect`` records have been read when given, or after ``limit_s`` seconds.
    Records of one partition are in offset order. (On a loaded machine the broker can stay silent for
    longer than ``idle_s`` before the last records: a test that knows how many must be there says so.)
    """
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"read-all-{uuid.uuid4().hex[:12]}",
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "fetch.wait.max.ms": 10,
        }
    )
    out: list[Message] = []
    try:
        consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        start = last = time.monotonic()
        while (
            len(out) < at_least or time.monotonic() - last < idle_s
        ) and time.monotonic() - start < limit_s:
            if expect is not None and len(out) >= expect:
                break
            batch = consumer.consume(10_000, 0.1)
            records = [m for m in batch if m.error() is None]
            if records:
                out.extend(records)
                last = time.monotonic()
    finally:
        consumer.close()
    return out


def end_offsets(bootstrap: str, topic: str, partitions: int, idle_s: float = 2.0) -> dict[int, int]:
    """Offset after the last record of every partition, found by reading the topic.

    Tansu answers ListOffsets(latest) with the last record batch's base offset plus one, so
    ``get_watermark_offsets(cached=False)`` undercounts there; reading is right on every broker.
    """
    ends = dict.fromkeys(range(partitions), 0)
    for message in read_all(bootstrap, topic, partitions, idle_s=idle_s):
        ends[message.partition()] = max(ends[message.partition()], message.offset() + 1)
    return ends


def committed_offsets(bootstrap: str, group: str, topic: str, partitions: int) -> dict[int, int]:
    """The group's committed next offsets of the topic's partitions (0 where none)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        found = consumer.committed([TopicPartition(topic, p) for p in range(partitions)], 30)
    finally:
        consumer.close()
    return {tp.partition: max(tp.offset, 0) for tp in found}
