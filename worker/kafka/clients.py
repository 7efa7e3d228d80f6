"""The Kafka clients' settings: what the worker's guarantees need from its consumer and producer.

The producer's ``message.max.bytes`` is the worker's own ``max_message_bytes`` setting and nothing
else (``kafka_options`` cannot override it): every output is built to fit it (see
:mod:`worker.core.outputs`), so no produce call is refused for its size. Kafka's brokers accept a record
batch of up to 1,048,588 bytes by default (``message.max.bytes``, per topic ``max.message.bytes``);
the default of 1,000,000 leaves room for the batch framing.

With ``processing_guarantee`` exactly_once the producer is transactional: its ``transactional.id``
is the ``transactional_id`` setting or, by default, ``{group_id}-{host name}`` (stable across restarts
of a worker on the same host, which lets the restarted worker abort its predecessor's open transaction
at once; see :func:`transactional_id`), and ``transaction.timeout.ms`` is three times
``checkpoint_seconds`` (at least 60 s), as a transaction stays open for up to one checkpoint period.

>>> from worker.config import load_settings
>>> producer_config(load_settings({}, env={}))["message.max.bytes"]
1000000
>>> conf = producer_config(load_settings({"processing_guarantee": "exactly_once", "group_id": "g"}, env={}))
>>> conf["transactional.id"].startswith("g-"), conf["transaction.timeout.ms"]
(True, 90000)
"""

from __future__ import annotations

import math
import socket
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from confluent_kafka import Consumer, Producer

from worker.config import WorkerSettings

_CONSUMER_KEYS = frozenset(
    {
        "session.timeout.ms",
        "heartbeat.interval.ms",
        "fetch.wait.max.ms",
        "fetch.min.bytes",
        "max.poll.interval.ms",
    }
)
_PRODUCER_KEYS = frozenset({"linger.ms", "partitioner", "batch.size", "compression.type"})
_PRODUCER_QUEUE_KBYTES = 128 << 10  # 128 MiB
_MIN_TRANSACTION_TIMEOUT_MS = 60_000  # librdkafka's default


def consumer_config(settings: WorkerSettings, overrides: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The consumer settings: manual offsets (the checkpoint is the truth) and the co-partitioning
    ``range`` assignor, which gives a member equal partition numbers of topics with equal counts."""
    conf: dict[str, Any] = {
        "bootstrap.servers": settings.bootstrap_servers,
        "group.id": settings.group_id,
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "auto.offset.reset": "earliest",
        "partition.assignment.strategy": "range",
        "isolation.level": "read_committed",
        "session.timeout.ms": settings.session_timeout_ms,
        "heartbeat.interval.ms": settings.heartbeat_interval_ms,
        "fetch.wait.max.ms": settings.fetch_wait_max_ms,
        "fetch.min.bytes": settings.fetch_min_bytes,
        **dict(settings.kafka_options),
    }
    conf.update({k: v for k, v in (overrides or {}).items() if k in _CONSUMER_KEYS})
    return conf


def producer_config(settings: WorkerSettings, overrides: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The producer settings: idempotent, acks=all, Java-compatible key partitioning, and the size
    bound every output is built to fit (``max_message_bytes``)."""
    conf: dict[str, Any] = {
        "bootstrap.servers": settings.bootstrap_servers,
        "enable.idempotence": True,
        "acks": "all",
        "linger.ms": settings.linger_ms,
        "partitioner": "murmur2_random",
        # the local queue of outputs waiting to be sent, bounded in bytes and not only in number
        # (librdkafka's default lets it hold 1 GiB); it must hold at least one largest message
        "queue.buffering.max.kbytes": max(_PRODUCER_QUEUE_KBYTES, 2 * settings.max_message_bytes >> 10),
        **dict(settings.kafka_options),
        "message.max.bytes": settings.max_message_bytes,
    }
    if settings.processing_guarantee == "exactly_once":
        conf["transactional.id"] = transactional_id(settings)
        conf["transaction.timeout.ms"] = max(
            _MIN_TRANSACTION_TIMEOUT_MS, math.ceil(3000 * settings.checkpoint_seconds)
        )
    conf.update({k: v for k, v in (overrides or {}).items() if k in _PRODUCER_KEYS})
    return conf


def transactional_id(settings: WorkerSettings) -> str:
    """The output producer's ``transactional.id``: the setting, or ``{group_id}-{host name}``.

    It must differ between the worker processes running at the same time (two with the same id fence
    each other: the older one stops) and should stay the same when a process restarts, so that the new
    one's ``init_transactions`` aborts what its predecessor left open instead of read_committed
    consumers waiting for the transaction timeout. The host name does both where each worker has a
    host of its own (a container or pod); set ``transactional_id`` when several share one host.
    """
    return settings.transactional_id or f"{settings.group_id}-{socket.gethostname()}"


@dataclass
class Clients:
    """The worker's consumer and producer, shared by the modules that call them; None before
    :meth:`worker.kafka.loop.Worker.run` creates them and after it closes them (tests put fakes here)."""

    consumer: Consumer | None = None
    producer: Producer | None = None
