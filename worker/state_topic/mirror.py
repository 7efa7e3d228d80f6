"""The worker's partition states mirrored in the state topic: which copy to restore, and its writes.

With a state topic (setting ``state_topic``), every checkpoint a worker writes to its checkpoint file
is also written to the topic (:mod:`worker.state_topic.client`), and on assignment the worker restores the
newer of the two copies. The checkpoint directory becomes a cache: a worker with an empty one, on any
machine, continues exactly where the partition's previous owner stopped.

**Which copy is newer.** A partition's state after ``n`` records is determined by those records (the
merge order is deterministic), and every record the state consumes adds one to its ``consumed``
counts, which nothing ever lowers (not even an offset reset after a topic was re-created, which moves
``next_offsets`` back). So two checkpoints of one partition are ordered by the records they have seen,
``consumed[features] + consumed[labels]``: the one that has seen more has processed everything the
other has, and more. On a tie both are the same point of the history and the file is kept (nothing to
decode twice). A file newer than the topic (its topic write failed, or the directory predates the
state topic) is written to the topic at once, so the next owner does not start further back.

>>> newer(file_seen=1200, topic_seen=1500), newer(1500, 1500), newer(0, None)
('topic', 'file', 'file')
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from confluent_kafka import Consumer, KafkaException, Producer

from worker.config import WorkerSettings
from worker.core.partition_state import PartitionState, state_header
from worker.logs import fields
from worker.metrics import WorkerMetrics
from worker.state_topic.admin import StateTopicConfig, ensure_topic
from worker.state_topic.client import StateTopic, Written
from worker.state_topic.errors import StateTopicError, StateTopicFenced, StateTopicLost
from worker.state_topic.writer import PendingWrite

Source = Literal["file", "topic"]

_TOPIC_WAIT_LOG_S = 30.0  # while the features topic does not exist yet, log that at most this often


def newer(file_seen: int, topic_seen: int | None) -> Source:
    """Which copy of a partition's state to restore, from the records each has seen (None: no copy)."""
    return "topic" if topic_seen is not None and topic_seen > file_seen else "file"


def _seen(payload: bytes) -> int:
    """Records seen by a state blob, from its header alone (ValueError when it has no usable one)."""
    try:
        return sum(int(c) for c in state_header(payload)["consumed"])
    except (KeyError, TypeError) as exc:
        raise ValueError(f"malformed state header: {type(exc).__name__}: {exc}") from None


def records_seen(state: PartitionState) -> int:
    """Records of both input topics the state has consumed: its position in the partition's history."""
    return sum(state.consumed)


@dataclass(frozen=True)
class Restored:
    """The state to continue a partition from, where it came from, and what the claim cost."""

    state: PartitionState
    source: Source
    topic_seconds: float  # claim and read of the state topic
    topic_seen: int | None  # records seen by the topic's state (None: the topic has none)
    payload: bytes | None = None  # the topic's payload, when the state came from there


@dataclass(frozen=True)
class Mirroring:
    """A checkpoint's write to the state topic, started after its file was durable."""

    pending: PendingWrite
    started: float  # time.monotonic() at start_write


def mirror_config(
    settings: WorkerSettings, client_options: Mapping[str, Any] | None = None
) -> StateTopicConfig:
    """The state topic's configuration from the worker's settings: its topic, how it is created, the
    clients' options and the reader's fetch settings (the consumer's own ``fetch_wait_max_ms`` and
    ``fetch_min_bytes``)."""
    topic = settings.state_topic_name
    assert topic is not None, "the state topic is off"
    return StateTopicConfig(
        settings.bootstrap_servers,
        topic,
        replication_factor=settings.state_topic_replication_factor,
        min_insync_replicas=settings.state_topic_min_insync_replicas,
        client_options={**dict(settings.kafka_options), **dict(client_options or {})},
        fetch_wait_max_ms=settings.fetch_wait_max_ms,
        fetch_min_bytes=settings.fetch_min_bytes,
    )


class StateMirror:
    """The worker's side of the state topic, one per process: created with the worker, its clients
    created and connected by :meth:`prepare` at start-up, before the group join.

    Not thread-safe, as :class:`~worker.state_topic.client.StateTopic`: the loop's thread calls it.
    """

    def __init__(
        self,
        settings: WorkerSettings,
        metrics: WorkerMetrics,
        log: logging.Logger,
        client_options: Mapping[str, Any] | None = None,
    ) -> None:
        self.settings, self.metrics, self.log = settings, metrics, log
        self.config = mirror_config(settings, client_options)
        self._topic: StateTopic | None = None  # its clients, created by prepare() (they connect at once)
        self.lost: str | None = None  # why the state topic is gone (deleted or created again), once it is

    @property
    def topic(self) -> StateTopic:
        """The state topic's client, created at first use (:meth:`prepare`, at start-up)."""
        if self._topic is None:
            self._topic = StateTopic(self.config)
        return self._topic

    @property
    def usable(self) -> bool:
        """Whether states go to and come from the topic now: it is prepared, and not lost."""
        return self._topic is not None and self.lost is None

    @classmethod
    def of(
        cls,
        settings: WorkerSettings,
        metrics: WorkerMetrics,
        log: logging.Logger,
        client_options: Mapping[str, Any] | None = None,
    ) -> StateMirror | None:
        """The mirror of the settings' state topic, or None when the state topic is off."""
        if settings.state_topic_name is None:
            return None
        return cls(settings, metrics, log, client_options)

    def prepare(self, features_partitions: int) -> None:
        """Create the state topic when missing (or refuse one that does not fit), connect the clients."""
        if ensure_topic(self.config, features_partitions):
            self.log.info(
                "state topic created",
                extra=fields(topic=self.config.topic, partitions=features_partitions, **self._created()),
            )
        self.topic.connect()

    def _created(self) -> dict[str, Any]:
        return {"replication_factor": self.config.replication_factor, **self.config.topic_settings()}

    # -- restoring --------------------------------------------------------------------------------------

    def restore(
        self, partition: int, local: PartitionState, parse: Callable[[bytes], PartitionState]
    ) -> Restored:
        """Claim ``partition`` and return the newer of ``local`` (from the file) and the topic's state.

        Raises :class:`~worker.state_topic.errors.StateTopicFenced` when another worker claimed the partition
        meanwhile. A topic state that does not parse (another task or topics) is logged, counted as
        ``corrupt`` and skipped. When the file is the newer, it is written to the topic before this
        returns.
        """
        restored = self.topic.acquire(partition)
        self.metrics.state_restore_seconds.observe(restored.seconds)
        for skipped in restored.skipped:
            self.log.warning(
                "skipping an unusable state in the state topic",
                extra=fields(partition=partition, reason=str(skipped)),
            )
        topic_seen = None
        file_seen = records_seen(local)
        try:
            if restored.state is not None:
                topic_seen = _seen(restored.state.payload)
                if newer(file_seen, topic_seen) == "topic":
                    payload = restored.state.payload
                    return Restored(parse(payload), "topic", restored.seconds, topic_seen, payload)
        except ValueError as exc:
            self.metrics.checkpoint_failures.labels(reason="corrupt").inc()
            self.log.error(
                "skipping an unusable state in the state topic",
                extra=fields(partition=partition, topic=self.config.topic, reason=str(exc)),
            )
            topic_seen = None
        if file_seen > (topic_seen if topic_seen is not None else 0):
            self._catch_up(partition, local)
        return Restored(local, "file", restored.seconds, topic_seen)

    def _catch_up(self, partition: int, local: PartitionState) -> None:
        """The topic is behind the file: write the file's state, so that the next owner does not start
        further back. Not written (StateWriteError...): the next checkpoint will be; fenced: raised."""
        try:
            self.write(partition, local.to_bytes())
        except StateTopicFenced:
            raise
        except StateTopicError as exc:
            self.metrics.checkpoint_failures.labels(reason="state_topic").inc()
            self.log.error(
                "the checkpoint file is newer than the state topic and could not be written there",
                extra=fields(partition=partition, error=str(exc)),
            )

    # -- writing ----------------------------------------------------------------------------------------

    def start(self, partition: int, blob: bytes) -> Mirroring:
        """Hand a checkpoint to the state topic; :meth:`finish` it before committing its offsets."""
        return Mirroring(self.topic.start_write(partition, blob), time.monotonic())

    def poll(self) -> None:
        self.topic.poll()

    def finish(self, mirroring: Mirroring) -> None:
        """Wait until the checkpoint is durable in the topic and confirmed as the owner's.

        Raises :class:`~worker.state_topic.errors.StateTopicFenced` (another worker owns the partition) or
        another :class:`~worker.state_topic.errors.StateTopicError` (not written;
        :class:`~worker.state_topic.errors.StateTopicLost`: the topic was deleted, and :attr:`lost`
        says so)."""
        try:
            written = self.topic.finish(mirroring.pending)
        except StateTopicLost as exc:
            self._lose(exc)
            raise
        self._written(written, mirroring)

    def _lose(self, error: StateTopicLost) -> None:
        if self.lost is None:
            self.lost = str(error)
            self.log.error(
                "state topic lost: every state it held is gone; stopping (the next start creates it again "
                "and fills it from the checkpoint files)",
                extra=fields(topic=self.config.topic, error=str(error)),
            )

    def _written(self, written: Written, mirroring: Mirroring) -> None:
        self.metrics.state_write_seconds.observe(time.monotonic() - mirroring.started)
        self.metrics.state_write_bytes.inc(written.bytes)
        if written.cleanup_pending:
            self.log.warning(
                "state topic cleanup not acknowledged; retried with the next write",
                extra=fields(partition=written.partition, keys=written.cleanup_pending),
            )

    def stage(self, partition: int, blob: bytes, producer: Producer) -> Mirroring:
        """exactly_once: the checkpoint's state records go into ``producer``'s open transaction, to
        commit with its outputs and input offsets; :meth:`confirm` it after the commit, or
        :meth:`discard` it after an abort."""
        return Mirroring(self.topic.stage(partition, blob, producer), time.monotonic())

    def confirm(self, mirroring: Mirroring) -> None:
        """After the transaction of :meth:`stage` committed: the ownership check and the cleanup.

        Raises :class:`~worker.state_topic.errors.StateTopicFenced` when a newer owner claimed the partition
        before the state (void for every reader: the next owner restores an older state or the file,
        and processes the records since without producing their outputs again), or
        :class:`~worker.state_topic.errors.StateTopicLost` as :meth:`finish` does."""
        try:
            written = self.topic.confirm(mirroring.pending)
        except StateTopicLost as exc:
            self._lose(exc)
            raise
        self._written(written, mirroring)

    def discard(self, mirroring: Mirroring) -> None:
        """The transaction of :meth:`stage` aborted: the state was not written."""
        self.topic.discard(mirroring.pending)

    def write(self, partition: int, blob: bytes) -> None:
        """:meth:`start` and :meth:`finish` at once."""
        self.finish(self.start(partition, blob))

    def release(self, partitions: list[int]) -> None:
        """Forget partitions revoked (after their final checkpoint), lost or given up."""
        if self._topic is None:
            return
        for p in partitions:
            self._topic.release(p)

    def close(self) -> None:
        if self._topic is not None:
            self._topic.close()


def features_partitions(
    consumer: Consumer, topic: str, stopped: Callable[[], bool], log: logging.Logger
) -> int | None:
    """The features topic's partition count (the state topic needs as many); waits until the broker
    answers and the topic exists, logging while it does not. None when ``stopped()`` became true first."""
    logged = -_TOPIC_WAIT_LOG_S
    while not stopped():
        why = "the features topic does not exist yet"
        try:
            metadata = consumer.list_topics(topic, timeout=1.0).topics.get(topic)
        except KafkaException as exc:  # the broker is not reachable (yet): the clients keep trying
            metadata, why = None, exc.args[0].str()
        if metadata is not None and metadata.error is None and metadata.partitions:
            return len(metadata.partitions)
        now = time.monotonic()
        if now - logged >= _TOPIC_WAIT_LOG_S:
            logged = now
            log.warning(
                "waiting for the features topic's partition count (the state topic gets as many)",
                extra=fields(topic=topic, reason=why),
            )
        time.sleep(0.5)
    return None
