"""Partition states in a compacted Kafka topic: create or check it, claim, restore, write durably.

Every checkpoint payload of an input partition (:meth:`worker.core.partition_state.PartitionState.to_bytes`,
any size) is also stored in the partition of the same number of the state topic, so a worker on any machine,
with an empty disk, can continue where the partition's previous owner stopped. The record format and the
rules (claims, epochs, chunk slots, which state wins, cleanup) are those of :mod:`worker.state_topic.rules`;
this module moves them through Kafka.

How the loop uses it (one :class:`StateTopic` per worker process):

1. at start-up, :func:`ensure_topic` creates the topic (compacted, as many partitions as the features
   topic) or refuses an existing one that does not fit;
2. on assignment of partition ``p``, :meth:`StateTopic.acquire` claims ``p`` (a new epoch, durable
   before it returns), reads the state topic's partition to its end and returns the newest valid state
   (or None) before the first record of ``p`` is processed;
3. at each checkpoint, after the checkpoint file is written and before the input offsets are
   committed, :meth:`StateTopic.write` stores the payload: chunks and manifest with acks=all, waits
   for every delivery, checks that no newer owner claimed ``p`` meanwhile (raises
   :class:`StateTopicFenced` if one did), then tombstones what the new state makes obsolete. Split
   in two, :meth:`StateTopic.start_write` queues the records and returns at once, and
   :meth:`StateTopic.finish` does the waiting and checking, so the loop can go on processing while
   the state travels and commit the offsets once ``finish`` returned;
4. on revoke (after the final checkpoint) or loss, :meth:`StateTopic.release` forgets ``p``; any
   later write for it raises.

Ownership check without extra round trips: the delivery reports give the offsets of the owner's own
records. When the offsets from the end of what it last verified up to its new manifest are all its
own, nobody else wrote to the partition meanwhile, so no newer claim can precede the manifest. Only
when other records sit in between (a newer owner's claim, a zombie's writes) are those read back.

Example (needs a broker; the tests run it against the embedded one)::

    >>> cfg = StateTopicConfig("127.0.0.1:9092", "sgt-state")            # doctest: +SKIP
    >>> ensure_topic(cfg, partitions=4)                                 # doctest: +SKIP
    >>> with StateTopic(cfg) as states:                                 # doctest: +SKIP
    ...     restored = states.acquire(2)
    ...     payload = restored.state.payload if restored.state else None
    ...     written = states.write(2, b"a checkpoint payload")
"""

from __future__ import annotations

import contextlib
import time
import uuid
import warnings
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, NamedTuple, NoReturn

from confluent_kafka import (
    Consumer,
    KafkaError,
    KafkaException,
    Message,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic, ResourceType

from worker.state_topic import rules
from worker.state_topic.rules import LogRecord, Ownership, Selection, Skipped, State

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
_FENCED = frozenset({KafkaError._FENCED, KafkaError.PRODUCER_FENCED, KafkaError.INVALID_PRODUCER_EPOCH})


class StateTopicError(RuntimeError):
    """The state topic cannot be used: wrong settings, unreachable, or a read that did not finish."""


class StateWriteError(StateTopicError):
    """A state was not durably written (some record was not acknowledged); nothing counts as written."""


class StateTopicFenced(StateTopicError):
    """A newer owner claimed the partition: this process lost it and must not write its state."""


class StateTopicLost(StateTopicError):
    """The state topic was deleted, or deleted and created again, since this process first used it.

    Every state it held is gone, so a worker with an empty disk would start its partitions afresh:
    the worker stops (as Kafka Streams does when a changelog topic goes missing), and the next start
    creates the topic again and fills it from the checkpoint files."""


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


class Restored(NamedTuple):
    """What :meth:`StateTopic.acquire` found: the new epoch, the newest valid state, and the cost."""

    partition: int
    epoch: int
    state: State | None
    skipped: list[Skipped]
    records: int  # records read
    bytes: int  # key and value bytes read
    seconds: float  # claim and read


class Written(NamedTuple):
    """A state that is durable and confirmed as written by the partition's current owner."""

    partition: int
    epoch: int
    seq: int
    chunks: int
    bytes: int  # payload bytes
    offset: int  # of the manifest
    seconds: float
    tombstones: int  # keys tombstoned after it
    cleanup_pending: int  # tombstones not acknowledged; retried with the next write


# -- the topic --------------------------------------------------------------------------------------


def ensure_topic(config: StateTopicConfig, partitions: int) -> bool:
    """Create the state topic when missing, else check it; True when it was created.

    Raises :class:`StateTopicError` naming what is wrong with an existing topic: its partition count
    (must equal the features topic's, ``partitions``), its ``cleanup.policy`` (must be ``compact``
    only: ``delete`` would drop the state of a partition that has not checkpointed within the
    retention time) or its ``max.message.bytes`` (must fit a chunk).
    """
    if partitions < 1:
        raise ValueError(f"partitions must be >= 1, got {partitions}")
    admin = AdminClient(_client(config))
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
    admin = admin or AdminClient(_client(config))
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


def _client(config: StateTopicConfig) -> dict[str, Any]:
    return {**config.client_options, "bootstrap.servers": config.bootstrap_servers}


def reader_config(config: StateTopicConfig) -> dict[str, Any]:
    """The reader's consumer settings: assign() only, partition-EOF events to find the end, fetches
    sized for the largest chunk, and the configured fetch wait and minimum bytes."""
    return {
        # before the client options, which may set them as they may for the worker's consumer
        "fetch.wait.max.ms": config.fetch_wait_max_ms,
        "fetch.min.bytes": config.fetch_min_bytes,
        **_client(config),
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


# -- claiming, reading, writing ---------------------------------------------------------------------


@dataclass
class _Owned:
    """This process's ownership of one partition and how far it has verified the partition's log."""

    ownership: Ownership
    claim_key: bytes
    verified_end: int  # every record below this offset has been checked for newer claims
    own_offsets: set[int] = field(default_factory=set)  # offsets of own records at or above it
    fenced: str | None = None  # why this process lost the partition
    unsure: rules.WritePlan | None = None  # a write some of whose records were not acknowledged
    pending: PendingWrite | None = None  # started, not finished
    # after a state staged in a caller's transaction: the offset right after its records, where the
    # transaction's commit marker lies unless another record came first (see StateTopic.confirm)
    marker: int | None = None


class _Delivery:
    """Delivery reports of one batch of records: offsets in produce order, and the first failure."""

    def __init__(self, count: int, producer: Producer) -> None:
        self.producer = producer  # the one the records were handed to
        self.offsets: list[int | None] = [None] * count
        self.errors: list[str] = []
        self.queued = 0  # records handed to the producer (a locally refused one ends the batch)
        self.reports = 0

    def callback(self, index: int) -> Any:
        def on_delivery(err: KafkaError | None, msg: Message) -> None:
            self.reports += 1
            if err is not None:
                self.errors.append(err.str())
            else:
                self.offsets[index] = msg.offset()

        return on_delivery

    @property
    def missing(self) -> int:
        return sum(o is None for o in self.offsets)

    @property
    def acknowledged(self) -> bool:
        """Every queued record has its delivery report."""
        return self.reports == self.queued


@dataclass
class PendingWrite:
    """A state write handed to the producer by :meth:`StateTopic.start_write`, not yet confirmed."""

    partition: int
    plan: rules.WritePlan
    delivery: _Delivery
    payload_bytes: int
    cost: float = 0.0  # seconds spent in start_write

    @property
    def acknowledged(self) -> bool:
        """True once every record has a delivery report: :meth:`StateTopic.finish` will not wait."""
        return self.delivery.acknowledged


class StateTopic:
    """Claims, restores and writes partition states in one state topic (one instance per process).

    Not thread-safe: the worker loop calls it from its own thread, one partition at a time.
    """

    def __init__(self, config: StateTopicConfig) -> None:
        self.config = config
        self._owned: dict[int, _Owned] = {}
        # One idempotent producer for every partition, or (transactional mode) one per partition.
        self._shared = None if config.transactional_id_prefix else Producer(self._producer_settings())
        self._transactional: dict[int, Producer] = {}
        self._consumer: Consumer | None = None
        self._partitions: int | None = None  # the topic's partition count when first used (check_topic)
        self._closed = False

    def _producer_settings(self) -> dict[str, Any]:
        return {
            **_client(self.config),
            "enable.idempotence": True,  # in order, no duplicates, per partition
            "acks": "all",
            "message.max.bytes": self.config.max_message_bytes,
            "compression.type": "none",  # the payload is compressed already
            "linger.ms": 0,
        }

    @property
    def transactional(self) -> bool:
        """True when each partition is written in transactions by its own transactional producer."""
        return self._shared is None

    def _producer(self, partition: int) -> Producer:
        if self._shared is not None:
            return self._shared
        return self._transactional[partition]

    def connect(self) -> None:
        """Connect the clients now rather than at the first :meth:`acquire` (about half a second).

        Call it at start-up, while the consumer group join runs."""
        self._reader().list_topics(self.config.topic, timeout=self.config.timeout_s)
        if self._shared is not None:
            self._shared.list_topics(self.config.topic, timeout=self.config.timeout_s)
        self._remember_partitions()

    # -- the topic's identity ---------------------------------------------------------------------------

    def partition_count(self) -> int | None:
        """The topic's partition count now; None when it does not exist. StateTopicError when the
        broker does not answer.

        Asked through the reader's metadata request, not an AdminClient's DescribeTopics (which also
        gives the topic's id): librdkafka 2.16 crashed (a segmentation fault in its metadata cache) on
        the embedded broker's answer to that for a topic deleted and created again. A topic created
        again is found by its offsets instead (:meth:`finish`)."""
        topic = self.config.topic
        try:
            metadata = self._reader().list_topics(topic, timeout=self.config.timeout_s).topics.get(topic)
        except KafkaException as exc:
            raise StateTopicError(
                f"cannot read state topic {topic!r}'s metadata: {exc.args[0].str()}"
            ) from None
        if metadata is not None and metadata.error is not None:
            if metadata.error.code() != KafkaError.UNKNOWN_TOPIC_OR_PART:
                raise StateTopicError(f"cannot read state topic {topic!r}'s metadata: {metadata.error.str()}")
            return None
        return len(metadata.partitions) if metadata is not None and metadata.partitions else None

    def _remember_partitions(self) -> None:
        if self._partitions is None:
            with contextlib.suppress(StateTopicError):  # checked at the next write instead
                self._partitions = self.partition_count()

    def check_topic(self) -> None:
        """Raise :class:`StateTopicLost` when the topic is gone or has another partition count than
        when first used (deleted and created anew, by hand or by a broker's
        ``auto.create.topics.enable`` when a producer wrote to it after it was deleted).

        A produce to a deleted topic can be acknowledged (by a broker that creates it again, or by the
        embedded test broker, which accepts it), so acknowledgements alone do not show it; every
        write is checked here before it counts. A broker that does not answer proves nothing: the
        check is left to the next write."""
        try:
            now = self.partition_count()
        except StateTopicError:
            return
        if now is None:
            raise StateTopicLost(f"state topic {self.config.topic!r} does not exist any more (deleted)")
        if self._partitions is None:
            self._partitions = now
        elif now != self._partitions:
            raise StateTopicLost(
                f"state topic {self.config.topic!r} was deleted and created again: {now} partitions, "
                f"{self._partitions} before"
            )

    # -- ownership ----------------------------------------------------------------------------------

    def acquire(self, partition: int) -> Restored:
        """Claim ``partition`` (a new epoch) and return the newest valid state in the topic.

        Call it on assignment, before the partition's first record is processed. The claim is durable
        before the log is read, so every state written before it is seen, and every state an older
        owner writes after it is void. Raises :class:`StateTopicFenced` if a newer claim already
        follows this one (another process was assigned the partition meanwhile). In transactional
        mode the partition's transactional producer is (re)initialised first, which makes the broker
        fence any older producer of the same partition.
        """
        started = time.perf_counter()
        self.release(partition)
        self._remember_partitions()
        if self.transactional:
            self._init_transactional(partition)
        owner = uuid.uuid4().bytes
        key, value = rules.claim_record(partition, owner, time.time())
        delivery = self._send(partition, [(key, value)], "claim")
        epoch = delivery.offsets[0]
        assert epoch is not None
        read = _Reader()
        selection = rules.select(partition, read.counting(self._read(partition, 0, epoch)))
        if selection.newest_epoch > epoch:
            raise StateTopicFenced(
                f"state topic {self.config.topic!r} partition {partition}: claimed epoch {epoch}, but epoch "
                f"{selection.newest_epoch} claimed it too; another worker owns it"
            )
        newest = selection.newest
        ownership = Ownership(
            partition,
            epoch,
            owner,
            next_seq=0 if newest is None else newest.seq + 1,
            cleanup=rules.cleanup_keys(selection, key),
        )
        self._owned[partition] = _Owned(ownership, key, verified_end=read.end)
        return Restored(
            partition,
            epoch,
            newest,
            selection.skipped,
            read.records,
            read.bytes,
            time.perf_counter() - started,
        )

    def _init_transactional(self, partition: int) -> None:
        prefix = self.config.transactional_id_prefix
        producer = Producer({**self._producer_settings(), "transactional.id": f"{prefix}-{partition}"})
        try:
            producer.init_transactions(self.config.timeout_s)
        except KafkaException as exc:
            raise StateTopicError(
                f"state topic {self.config.topic!r} partition {partition}: cannot initialise the "
                f"transactional producer: {exc.args[0].str()}"
            ) from None
        self._transactional[partition] = producer

    def release(self, partition: int) -> None:
        """Forget ``partition`` (on revoke, after its final checkpoint, or on loss); later writes raise."""
        self._owned.pop(partition, None)
        producer = self._transactional.pop(partition, None)
        if producer is not None:
            # A fenced producer cannot abort its transaction and says so in a RuntimeWarning: expected.
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)
                producer.close()

    def fence(self, partition: int, epoch: int) -> None:
        """Tell the owner that ``epoch`` claimed ``partition``: when newer, its writes raise from now on."""
        owned = self._owned.get(partition)
        if owned is not None and epoch > owned.ownership.epoch:
            owned.fenced = f"epoch {epoch} claimed it after this worker's epoch {owned.ownership.epoch}"

    def epoch(self, partition: int) -> int | None:
        """This process's epoch for ``partition``, or None when it does not own it."""
        owned = self._owned.get(partition)
        return None if owned is None else owned.ownership.epoch

    # -- writing ------------------------------------------------------------------------------------

    def write(self, partition: int, payload: bytes) -> Written:
        """Store ``payload`` as the partition's newest state; return once it is durable and confirmed.

        The same as :meth:`finish` of :meth:`start_write`; see them for the errors.
        """
        return self.finish(self.start_write(partition, payload))

    def start_write(self, partition: int, payload: bytes) -> PendingWrite:
        """Hand the records of ``payload``'s state to the producer and return without waiting.

        The caller may go on processing records while they are delivered (serve the delivery reports
        with :meth:`poll`; :attr:`PendingWrite.acknowledged` tells when all have a report), and must
        call :meth:`finish` before it counts the state as written (before committing the offsets it
        covers). One write per partition at a time.
        """
        started = time.perf_counter()
        owned = self._writable(partition)
        plan = rules.plan_write(owned.ownership, payload, self.config.chunk_bytes, time.time())
        records = plan.records
        if self.transactional:  # one transaction: everything commits or nothing does
            records = [*records, *((key, None) for key in plan.cleanup)]
            self._begin(partition, f"state seq {plan.seq}")
        pending = PendingWrite(partition, plan, self._produce(partition, records), len(payload))
        pending.cost = time.perf_counter() - started
        owned.pending = pending
        return pending

    def stage(self, partition: int, payload: bytes, producer: Producer) -> PendingWrite:
        """Produce the records of ``payload``'s state on ``producer``, inside its open transaction.

        For a caller whose own transactional producer commits the state together with its other
        records (the worker's outputs and input offsets with ``processing_guarantee`` exactly_once):
        the state is written if and only if that transaction commits. Then call :meth:`confirm` (the
        ownership check and the cleanup); if it aborted, :meth:`discard`. The tombstones of the
        cleanup are not staged: they wait for the ownership check, as in :meth:`finish`. Needs a
        StateTopic without ``transactional_id_prefix``; one write per partition at a time.
        """
        started = time.perf_counter()
        if self.transactional:
            raise StateTopicError("stage() needs a StateTopic without transactional_id_prefix")
        owned = self._writable(partition)
        plan = rules.plan_write(owned.ownership, payload, self.config.chunk_bytes, time.time())
        pending = PendingWrite(
            partition, plan, self._produce(partition, plan.records, producer), len(payload)
        )
        pending.cost = time.perf_counter() - started
        owned.pending = pending
        return pending

    def confirm(self, pending: PendingWrite) -> Written:
        """After the caller's transaction with the state of :meth:`stage` committed: check that no newer
        owner claimed the partition before it (:class:`StateTopicFenced` otherwise: the state is void
        for every reader), then tombstone what it makes obsolete. Call it after the caller's producer
        served the delivery reports (``poll``), which give the offsets the check needs."""
        if self.transactional:
            raise StateTopicError("confirm() needs a StateTopic without transactional_id_prefix")
        if not pending.delivery.acknowledged or pending.delivery.missing:
            raise StateWriteError(
                f"state topic {self.config.topic!r} partition {pending.partition}: confirm() before every "
                "record's delivery report was served"
            )
        written = self.finish(pending)
        owned = self._owned[pending.partition]
        owned.marker = owned.verified_end
        return written

    def discard(self, pending: PendingWrite) -> None:
        """The caller's transaction with the state of :meth:`stage` aborted: the state was not written.

        A broker that shows aborted records to readers shows it anyway, so the next write first reads
        what landed, as after a write whose outcome is unknown."""
        owned = self._owned.get(pending.partition)
        if owned is None or owned.pending is not pending:
            return
        owned.pending = None
        rules.attempted(owned.ownership, pending.plan)
        owned.unsure = pending.plan

    def _writable(self, partition: int) -> _Owned:
        """The partition's ownership, ready for a new write (or StateTopicError / StateTopicFenced)."""
        owned = self._owned.get(partition)
        if owned is None:
            raise StateTopicError(f"partition {partition} is not acquired; call acquire() first")
        self._check_fence(partition, owned)
        if owned.pending is not None:
            raise StateTopicError(f"partition {partition} has a state write in progress; finish() it first")
        if owned.unsure is not None:
            self._resync(partition, owned)
        return owned

    def poll(self) -> None:
        """Serve the delivery reports of writes in flight (cheap; the loop may call it every turn)."""
        for producer in [self._shared] if self._shared is not None else self._transactional.values():
            producer.poll(0)

    def finish(self, pending: PendingWrite) -> Written:
        """Wait until the state of :meth:`start_write` is durable and confirmed; return what was written.

        Raises :class:`StateWriteError` when a record is not acknowledged (the state does not count
        as written, and the previous one stays whole: an interrupted write never touches the slot of
        the last complete state), :class:`StateTopicFenced` when a newer owner claimed the partition
        before the manifest (the state is void for every reader; this and every later write raise).
        In transactional mode the broker itself refuses a fenced producer's commit.
        """
        started = time.perf_counter()
        partition, plan = pending.partition, pending.plan
        owned = self._owned.get(partition)
        if owned is None or owned.pending is not pending:
            raise StateTopicError(
                f"partition {partition} was released or re-acquired since this write started"
            )
        owned.pending = None
        try:
            self._complete(partition, pending.delivery, f"state seq {plan.seq}")
        except StateWriteError:
            owned.unsure = None if self.transactional else plan
            self.check_topic()  # not written because the topic is gone? Then that is the error
            raise
        finally:
            rules.attempted(owned.ownership, plan)
        offsets = [o for o in pending.delivery.offsets if o is not None]
        if min(offsets) < owned.verified_end:  # the log starts again below what was verified: a new topic
            raise StateTopicLost(
                f"state topic {self.config.topic!r} partition {partition}: records written at offset "
                f"{min(offsets)}, below offset {owned.verified_end} it held before (deleted and created "
                "again)"
            )
        self.check_topic()
        unacknowledged = 0
        if not self.transactional:
            owned.own_offsets.update(offsets)
            self._verify(partition, owned, max(offsets))
            unacknowledged = self._tombstone(partition, owned, plan.cleanup)
        rules.completed(owned.ownership, plan)
        if unacknowledged:
            owned.ownership.cleanup = list(plan.cleanup)  # tombstoning twice is harmless; leaving keys is not
        manifest_offset = pending.delivery.offsets[plan.chunks]
        assert manifest_offset is not None
        return Written(
            partition,
            owned.ownership.epoch,
            plan.seq,
            plan.chunks,
            pending.payload_bytes,
            manifest_offset,
            pending.cost + time.perf_counter() - started,
            len(plan.records) - plan.chunks - 1 + len(plan.cleanup),
            unacknowledged,
        )

    def _tombstone(self, partition: int, owned: _Owned, keys: list[bytes]) -> int:
        """Tombstone ``keys`` (after the ownership check) and wait; the number not acknowledged."""
        if not keys:
            return 0
        delivery = self._produce(partition, [(key, None) for key in keys])
        self._drain(partition)
        if delivery.errors or delivery.missing:
            self._renew_after_failure(delivery)
        owned.own_offsets.update(o for o in delivery.offsets if o is not None)
        return delivery.missing

    def _resync(self, partition: int, owned: _Owned) -> None:
        """After a write whose outcome is unknown, read what landed since the last verified offset."""
        plan, owned.unsure = owned.unsure, None
        owned.marker = None
        assert plan is not None
        records = list(self._read(partition, owned.verified_end, -1))
        newer = rules.settle(owned.ownership, plan, records)
        if newer is not None:
            self.fence(partition, newer)
            self._check_fence(partition, owned)
        if records:
            owned.verified_end = records[-1].offset + 1
            owned.own_offsets = {o for o in owned.own_offsets if o >= owned.verified_end}

    def _check_fence(self, partition: int, owned: _Owned) -> None:
        if owned.fenced is not None:
            raise StateTopicFenced(
                f"state topic {self.config.topic!r} partition {partition}: {owned.fenced}; "
                "it lost the partition"
            )

    def _verify(self, partition: int, owned: _Owned, upto: int) -> None:
        """Raise StateTopicFenced if a newer claim lies between the last verified offset and ``upto``."""
        start = owned.verified_end
        foreign = [o for o in range(start, upto + 1) if o not in owned.own_offsets]
        # A single unknown offset right after a staged state is that transaction's commit marker: the
        # next transaction of the same producer cannot add the partition before the marker is written.
        # With anything else in between, the marker's offset is read too (a claim may sit there).
        if foreign and foreign != [owned.marker]:
            read = self._read(partition, foreign[0], upto)
            others = [r for r in read if r.offset not in owned.own_offsets]
            newer = rules.newer_claim(partition, owned.ownership.epoch, others)
            if newer is not None:
                self.fence(partition, newer)
                self._check_fence(partition, owned)
        owned.verified_end = upto + 1
        owned.own_offsets = {o for o in owned.own_offsets if o > upto}
        owned.marker = None

    # -- reading without owning ---------------------------------------------------------------------

    def partitions(self) -> list[int]:
        """The state topic's partitions; StateTopicError when it cannot be reached or does not exist."""
        try:
            metadata = self._reader().list_topics(self.config.topic, timeout=self.config.timeout_s)
        except KafkaException as exc:
            raise StateTopicError(
                f"cannot reach {self.config.bootstrap_servers}: {exc.args[0].str()}"
            ) from None
        found = metadata.topics.get(self.config.topic)
        if found is None or found.error is not None or not found.partitions:
            raise StateTopicError(
                f"state topic {self.config.topic!r} does not exist at {self.config.bootstrap_servers}"
            )
        return sorted(found.partitions)

    def read(self, partition: int) -> Selection:
        """The newest valid state of ``partition`` and what was skipped, without claiming it."""
        return rules.select(partition, self._read(partition, 0, -1))

    # -- Kafka plumbing -----------------------------------------------------------------------------

    def _send(self, partition: int, records: list[tuple[bytes, bytes | None]], what: str) -> _Delivery:
        """Produce ``records`` and wait for every acknowledgement (one transaction in transactional mode)."""
        if self.transactional:
            self._begin(partition, what)
        delivery = self._produce(partition, records)
        self._complete(partition, delivery, what)
        return delivery

    def _begin(self, partition: int, what: str) -> None:
        try:
            self._transactional[partition].begin_transaction()
        except KafkaException as exc:
            self._transaction_failed(partition, exc.args[0], what)

    def _complete(self, partition: int, delivery: _Delivery, what: str) -> None:
        """Wait for the records' acknowledgements (commit the transaction in transactional mode).

        Raises StateWriteError unless every record was acknowledged, StateTopicFenced when the broker
        fenced this partition's transactional producer.
        """
        if self.transactional:
            producer = self._transactional[partition]
            try:
                if delivery.queued < len(delivery.offsets):  # a record was refused: commit nothing
                    producer.abort_transaction(self.config.timeout_s)
                else:
                    producer.commit_transaction(self.config.timeout_s)
            except KafkaException as exc:
                self._transaction_failed(partition, exc.args[0], what)
        elif not delivery.acknowledged:
            self._drain(partition)
        if delivery.errors or delivery.missing:
            self._renew_after_failure(delivery)
            first = (
                delivery.errors[0]
                if delivery.errors
                else f"not acknowledged within {self.config.timeout_s:g} s"
            )
            raise StateWriteError(
                f"state topic {self.config.topic!r} partition {partition}: {what} not written, "
                f"{delivery.missing} of {len(delivery.offsets)} records unacknowledged ({first})"
            )

    def _transaction_failed(self, partition: int, error: KafkaError, what: str) -> NoReturn:
        if error.code() in _FENCED or error.fatal():
            reason = f"the broker fenced its transactional producer ({error.str()})"
            owned = self._owned.get(partition)
            if owned is not None:
                owned.fenced = reason
            raise StateTopicFenced(
                f"state topic {self.config.topic!r} partition {partition}: {what} refused, {reason}; "
                "it lost the partition"
            )
        with contextlib.suppress(KafkaException):
            self._transactional[partition].abort_transaction(self.config.timeout_s)
        raise StateWriteError(
            f"state topic {self.config.topic!r} partition {partition}: {what} not written, "
            f"transaction aborted ({error.str()})"
        )

    def _produce(
        self, partition: int, records: list[tuple[bytes, bytes | None]], producer: Producer | None = None
    ) -> _Delivery:
        producer = producer or self._producer(partition)
        delivery = _Delivery(len(records), producer)
        for index, (key, value) in enumerate(records):
            while True:
                try:
                    producer.produce(
                        self.config.topic,
                        value,
                        key,
                        partition=partition,
                        on_delivery=delivery.callback(index),
                    )
                    delivery.queued += 1
                    break
                except BufferError:  # the local queue is full: let deliveries drain it
                    producer.poll(0.05)
                except KafkaException as exc:  # refused locally (unknown partition, too large, ...)
                    delivery.errors.append(exc.args[0].str())
                    return delivery
        return delivery

    def _renew_after_failure(self, delivery: _Delivery) -> None:
        """Replace the shared producer when records handed to it were not delivered.

        An idempotent producer whose records timed out (the broker was out of reach for longer than
        ``message.timeout.ms``) can stay unable to deliver anything: a broker may answer each of its
        later requests with PRODUCER_FENCED, and then no state would ever be written again. The next
        write goes through a new producer. What other partitions' writes still have in the old one
        is purged first: their delivery reports fail, so those writes fail (and are written again
        later) instead of waiting for reports that would never be served. Transactional producers
        and a caller's producer (:meth:`stage`) are left alone.
        """
        old = self._shared
        if old is None or delivery.producer is not old:
            return
        old.purge()
        # serves the purged records' delivery reports: all of them at once, as the purge queued them
        # before returning; waiting (if one were still to come) beats a write that never finishes
        old.flush(self.config.timeout_s)
        self._shared = Producer(self._producer_settings())

    def _drain(self, partition: int) -> None:
        """Wait for every delivery report (or the timeout); undelivered records are purged."""
        producer = self._producer(partition)
        if producer.flush(self.config.timeout_s):
            producer.purge(in_queue=True, in_flight=False)
            producer.flush(0)

    def _read(self, partition: int, start: int, at_least: int) -> Iterator[LogRecord]:
        """Records of the partition from ``start`` to its end (at least past offset ``at_least``).

        The end is the high watermark of the fetch responses (librdkafka's partition-EOF event),
        which is right on every broker, unlike a ListOffsets(latest) request.
        """
        consumer = self._reader()
        consumer.assign([TopicPartition(self.config.topic, partition, start)])
        deadline = time.monotonic() + self.config.timeout_s
        last = start - 1
        try:
            while time.monotonic() < deadline:
                # poll returns at the first message; consume(..., 0) then takes what has arrived.
                first = consumer.poll(0.05)
                batch = [] if first is None else [first, *consumer.consume(10_000, 0)]
                for message in batch:
                    if message.topic() != self.config.topic or message.partition() != partition:
                        continue
                    error, offset = message.error(), message.offset()
                    if error is None:
                        if offset is not None and offset >= start:
                            last = offset
                            yield LogRecord(last, message.key(), message.value())
                    elif error.code() == KafkaError._PARTITION_EOF:
                        if offset is not None and offset > at_least:
                            return
                    elif error.fatal() or not error.retriable():
                        raise StateTopicError(
                            f"reading state topic {self.config.topic!r} partition {partition}: {error.str()}"
                        )
            raise StateTopicError(
                f"reading state topic {self.config.topic!r} partition {partition} did not reach its end "
                f"within {self.config.timeout_s:g} s (last offset read {last})"
            )
        finally:
            consumer.unassign()

    def _reader(self) -> Consumer:
        if self._consumer is None:
            self._consumer = Consumer(reader_config(self.config))
        return self._consumer

    def close(self) -> None:
        """Flush what is queued and close the clients. Idempotent."""
        self._owned.clear()
        if self._consumer is not None:
            self._consumer.close()
            self._consumer = None
        for partition in list(self._transactional):
            self.release(partition)
        if not self._closed and self._shared is not None:
            self._shared.flush(self.config.timeout_s)
            self._shared.close()
        self._closed = True

    def __enter__(self) -> StateTopic:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


class _Reader:
    """Counts the records and bytes a read yields and the offset after the last one."""

    def __init__(self) -> None:
        self.records = self.bytes = 0
        self.end = 0

    def counting(self, records: Iterator[LogRecord]) -> Iterator[LogRecord]:
        for record in records:
            self.records += 1
            self.bytes += len(record.key or b"") + len(record.value or b"")
            self.end = record.offset + 1
            yield record
