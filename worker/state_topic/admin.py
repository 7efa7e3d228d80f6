"""The state topic's settings and administration: where it is, how it is configured, created and
checked, and the settings of the clients that read and write it.

>>> StateTopicConfig("127.0.0.1:9092", "sgt-state").chunk_bytes
995904
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic, ResourceType

from worker.state_topic.errors import StateTopicError

DEFAULT_MAX_MESSAGE_BYTES = 1_000_000
"""Largest record batch the state topic accepts (its ``max.message.bytes``) and the producer sends.

Just under the broker default (1,048,588), so the topic needs no broker-side change."""

HEADROOM_BYTES = 4096
"""Room left in a message for the record batch and record framing (about 100 bytes), the key (under
64) and the chunk header (40): a chunk's data is ``max_message_bytes - HEADROOM_BYTES``."""

DEFAULT_SEGMENT_BYTES = 16 << 20
"""``segment.bytes`` of a created topic. Compaction never touches the active segment, so a restore
reads up to about this much history beyond the live states; smaller keeps restores short."""

DEFAULT_SEGMENT_MS = 600_000
"""``segment.ms`` of a created topic: a slowly written partition still rolls, and compacts, often."""

_FETCH_BYTES = 64 << 20


@dataclass(frozen=True)
class StateTopicConfig:
    """Where the state topic is and how it is written.

    ``transactional_id_prefix`` turns on transactional mode: partition ``p`` is written by a producer
    with ``transactional.id`` ``{prefix}-{p}``, so the broker fences the previous owner's producer
    as soon as a new owner acquires ``p`` (as Kafka Streams' first exactly-once mode). Readers then
    need ``isolation.level=read_committed`` to skip aborted writes; the digest check skips them
    anyway on brokers that do not filter them.

    ``client_options`` go to every client (security settings and the like); the settings this
    module's guarantees depend on (acks, idempotence, sizes) are applied after them.
    """

    bootstrap_servers: str
    topic: str
    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES
    replication_factor: int = 1  # -1: the broker's default.replication.factor
    min_insync_replicas: int | None = None  # None: the broker's default
    timeout_s: float = 30.0
    segment_bytes: int = DEFAULT_SEGMENT_BYTES
    segment_ms: int = DEFAULT_SEGMENT_MS
    transactional_id_prefix: str | None = None
    client_options: Mapping[str, Any] = field(default_factory=dict)
    # The reader's fetch.wait.max.ms and fetch.min.bytes: the worker passes its settings of the same
    # names. A read ends with a fetch at the partition's end, which the broker holds for the whole
    # wait; 10 ms keeps direct reads (tools, tests, benchmarks) quick on a log of few batches.
    fetch_wait_max_ms: int = 10
    fetch_min_bytes: int = 1

    def __post_init__(self) -> None:
        if self.max_message_bytes < 2 * HEADROOM_BYTES:
            raise ValueError(
                f"max_message_bytes must be >= {2 * HEADROOM_BYTES}, got {self.max_message_bytes}"
            )
        if self.replication_factor < 1 and self.replication_factor != -1:
            raise ValueError(f"replication_factor must be -1 or >= 1, got {self.replication_factor}")
        if self.min_insync_replicas is not None and self.min_insync_replicas < 1:
            raise ValueError(f"min_insync_replicas must be None or >= 1, got {self.min_insync_replicas}")

    @property
    def chunk_bytes(self) -> int:
        """Payload bytes per chunk record."""
        return self.max_message_bytes - HEADROOM_BYTES

    def topic_settings(self) -> dict[str, str]:
        """The topic configuration :func:`ensure_topic` creates the topic with."""
        settings = {
            "cleanup.policy": "compact",
            "max.message.bytes": str(self.max_message_bytes),
            "segment.bytes": str(self.segment_bytes),
            "segment.ms": str(self.segment_ms),
        }
        if self.min_insync_replicas is not None:
            settings["min.insync.replicas"] = str(self.min_insync_replicas)
        return settings


# -- the topic -------------------------------------------------------------------------------------


def ensure_topic(config: StateTopicConfig, partitions: int) -> bool:
    """Create the state topic when missing, else check it; True when it was created.

    Raises :class:`StateTopicError` naming what is wrong with an existing topic: its partition count
    (must equal the features topic's, ``partitions``), its ``cleanup.policy`` (must be ``compact``
    only: ``delete`` would drop the state of a partition that has not checkpointed within the
    retention time) or its ``max.message.bytes`` (must fit a chunk).
    """
    if partitions < 1:
        raise ValueError(f"partitions must be >= 1, got {partitions}")
    admin = AdminClient(client_settings(config))
    if config.topic not in _topics(admin, config):
        topic = NewTopic(
            config.topic,
            num_partitions=partitions,
            replication_factor=config.replication_factor,
            config=config.topic_settings(),
        )
        future = admin.create_topics([topic], request_timeout=config.timeout_s)[config.topic]
        try:
            future.result(config.timeout_s)
            return True
        except KafkaException as exc:
            if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
                raise StateTopicError(
                    f"cannot create state topic {config.topic!r}: {exc.args[0].str()}"
                ) from None
    problems = topic_problems(config, partitions, admin)
    if problems:
        raise StateTopicError(f"state topic {config.topic!r} cannot be used: " + "; ".join(problems))
    return False


def topic_problems(config: StateTopicConfig, partitions: int, admin: AdminClient | None = None) -> list[str]:
    """What is wrong with the existing state topic (empty when it fits; it must exist)."""
    admin = admin or AdminClient(client_settings(config))
    metadata = _topics(admin, config).get(config.topic)
    if metadata is None:
        return ["it does not exist"]
    problems = []
    found = len(metadata.partitions)
    if found != partitions:
        problems.append(
            f"it has {found} partitions, the features topic has {partitions} (they must be equal: "
            "partition p's state lives in partition p)"
        )
    resource = ConfigResource(ResourceType.TOPIC, config.topic)
    try:
        settings = admin.describe_configs([resource], request_timeout=config.timeout_s)[resource].result(
            config.timeout_s
        )
    except KafkaException as exc:
        return [*problems, f"its configuration cannot be read: {exc.args[0].str()}"]
    policy = settings["cleanup.policy"].value if "cleanup.policy" in settings else "delete"
    if policy.replace(" ", "") != "compact":
        problems.append(f"cleanup.policy is {policy!r}, it must be 'compact'")
    if "max.message.bytes" in settings:
        limit = int(settings["max.message.bytes"].value)
        if limit < config.max_message_bytes:
            problems.append(
                f"max.message.bytes is {limit}, below the {config.max_message_bytes} the state chunks need"
            )
    return problems


def _topics(admin: AdminClient, config: StateTopicConfig) -> dict[str, Any]:
    try:
        return dict(admin.list_topics(timeout=config.timeout_s).topics)
    except KafkaException as exc:
        raise StateTopicError(
            f"cannot list topics at {config.bootstrap_servers}: {exc.args[0].str()}"
        ) from None


def client_settings(config: StateTopicConfig) -> dict[str, Any]:
    """The settings every client of the state topic starts from: the client options and the brokers."""
    return {**config.client_options, "bootstrap.servers": config.bootstrap_servers}


def reader_config(config: StateTopicConfig) -> dict[str, Any]:
    """The reader's consumer settings: assign() only, partition-EOF events to find the end, fetches
    sized for the largest chunk, and the configured fetch wait and minimum bytes."""
    return {
        # before the client options, which may set them as they may for the worker's consumer
        "fetch.wait.max.ms": config.fetch_wait_max_ms,
        "fetch.min.bytes": config.fetch_min_bytes,
        **client_settings(config),
        # Only assign() is used: the client needs a group id, never joined or committed.
        "group.id": f"sgt-state-reader-{uuid.uuid4().hex[:12]}",
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "enable.partition.eof": True,
        "auto.offset.reset": "earliest",
        "fetch.max.bytes": _FETCH_BYTES,
        "max.partition.fetch.bytes": _FETCH_BYTES,
        "receive.message.max.bytes": _FETCH_BYTES + (1 << 20),
    }
