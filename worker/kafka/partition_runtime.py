"""The runtime of the partitions one worker owns: restoring them, fetched records merged and processed
in runs, pausing, recovery, rewinds.

Each owned input partition is an :class:`OwnedPartition`: its
:class:`~worker.core.partition_state.PartitionState`, its merge queues, and one owner for each other
piece of its state: its :class:`~worker.kafka.positions.FetchPosition` (written here), its
:class:`~worker.core.recovery.Recovery` (told here what failed), the
:class:`~worker.checkpoints.ledger.DeliveryLedger` of its outputs (the publisher adds runs, the
producer's callbacks count them) and its :class:`~worker.checkpoints.schedule.CheckpointSchedule` (the
checkpoint protocol's). A rewind replaces the whole partition by a new one restored from its last
checkpoint. :class:`PartitionRuntime` turns fetched messages into processed runs:

* **Fetch positions.** A fetch from before a seek may still deliver older records; each offset is
  kept once, in order.
* **Backpressure.** A topic partition whose records pile up waiting for the other topic is paused,
  and resumed at half the bound.
* **Poison records** and **committed outputs**: see :mod:`worker.core.recovery`.
* **Failed deliveries.** When an output of the partition is not delivered for good (its ledger's
  latch is set), the partition stops processing; the shell then renews its producer and the
  partition rewinds to its last checkpoint: that checkpoint does not cover the lost output (see
  :mod:`worker.checkpoints.protocol`), so the records after it are processed and their outputs
  produced again. The producer keeps each new output until the broker takes it or
  ``message.timeout.ms`` passes; in the second case the partition rewinds again.
* **Offsets past the end.** Restored offsets beyond the end of a topic (the topic was deleted and
  re-created) are detected from the fetch responses' high watermarks: once a topic partition has
  stayed ahead of its end for ``AHEAD_GRACE_S``, it is logged, counted
  (``sgt_offset_resets_total{reason="past_end"}``) and read again from its start; the model, the
  join buffer and the other topic's position are kept.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, KafkaError, KafkaException, Message, TopicPartition

from worker.checkpoints.file_store import CheckpointStore
from worker.checkpoints.ledger import DeliveryLedger
from worker.checkpoints.protocol import Checkpointer
from worker.checkpoints.restore import load_state, state_parser
from worker.checkpoints.schedule import CheckpointSchedule
from worker.config import WorkerSettings
from worker.core.merge import FEATURES, LABELS, Merger
from worker.core.model_protocol import ModelClass, StreamModel
from worker.core.partition_state import PartitionState
from worker.core.recovery import Recovery
from worker.core.values import MergeEntry, Record
from worker.kafka.clients import Clients
from worker.kafka.positions import FetchPosition
from worker.kafka.publisher import Publisher
from worker.logs import fields
from worker.metrics import WorkerMetrics
from worker.state_topic.errors import StateTopicFenced
from worker.state_topic.mirror import StateMirror

MAX_QUEUED = 100_000  # fetched records waiting for the other topic, per topic and partition
AHEAD_GRACE_S = 3.0  # how long a position must stay past the fetched end before it counts as past it
_LIST_INTERVAL_S = 1.0


@dataclass(frozen=True)
class OwnedPartition:
    """An owned input partition: its state, its merge queues, and the owner of each other piece of its
    state (see the module docstring). Its fields are never replaced: a rewind makes a new one.

    >>> from worker.checkpoints.restore import state_config
    >>> from worker.config import load_settings
    >>> from worker.core.sgt_models import new_model
    >>> settings = load_settings({}, env={})
    >>> owned = OwnedPartition.of(PartitionState(3, new_model(settings), state_config(settings)))
    >>> owned.position.fetched, owned.schedule.records, owned.deliveries.failed
    ([0, 0], 0, None)
    """

    state: PartitionState
    labels_assigned: bool  # this member consumes the labels topic's partition too
    position: FetchPosition
    recovery: Recovery
    schedule: CheckpointSchedule
    merger: Merger = field(default_factory=Merger)
    deliveries: DeliveryLedger = field(default_factory=DeliveryLedger)

    @classmethod
    def of(
        cls,
        state: PartitionState,
        labels_assigned: bool = False,
        replay_until: list[int] | None = None,
        now: float | None = None,
    ) -> OwnedPartition:
        """The partition as ``state`` leaves it: read on from its offsets, nothing in flight, its
        schedule started at ``now`` (default: the monotonic clock now)."""
        return cls(
            state,
            labels_assigned,
            FetchPosition(state.next_offsets),
            Recovery(replay_until),
            CheckpointSchedule(time.monotonic() if now is None else now),
        )


class PartitionRuntime:
    """The owned partitions and what happens to them between a fetch and the produce calls.

    ``owned`` is the worker's registry of owned partitions, shared with the checkpoint protocol and
    written here alone. ``publisher`` produces each processed run; ``checkpointer`` is asked before a
    partition is restored from its file (it waits there for that partition's write in flight) and
    for the next offsets whose records' outputs are committed already (exactly_once); ``mirror`` is
    the state topic, when one is configured.
    """

    def __init__(
        self,
        settings: WorkerSettings,
        clients: Clients,
        metrics: WorkerMetrics,
        log: logging.Logger,
        owned: dict[int, OwnedPartition],
        publisher: Publisher,
        store: CheckpointStore,
        checkpointer: Checkpointer,
        mirror: StateMirror | None,
        model_factory: Callable[[], StreamModel] | None = None,
        model_registry: Mapping[str, ModelClass] | None = None,
    ) -> None:
        self.settings, self.clients, self.metrics, self.log = settings, clients, metrics, log
        self.owned = owned
        self.publisher, self.store, self.checkpointer, self.mirror = publisher, store, checkpointer, mirror
        self.topics = [settings.features_topic] + ([settings.labels_topic] if settings.labels_topic else [])
        self.more_ready = False  # the last process_all left ready records for the next turn
        self._model_factory, self._model_registry = model_factory, model_registry
        self._listed: dict[tuple[str, int], tuple[float, int, int]] = {}

    # -- owning -----------------------------------------------------------------------------------------

    def assign(self, partition: int, labels_assigned: bool) -> OwnedPartition | None:
        """Own the partition as its newest checkpoint left it; None when it is not ours.

        Without a state topic that is the checkpoint file (or a fresh state). With one, the partition
        is claimed in the topic and the newer of the file's and the topic's state is restored (see
        :mod:`worker.state_topic.mirror`); a state taken from the topic is written to the file too, so
        that rewinds (which read the file) find it. None when another worker claimed the partition in
        the state topic meanwhile: it is not processed here.
        """
        started = time.monotonic()
        local = self._load(partition)
        if self.mirror is None or not self.mirror.usable:
            owned = self._restored(partition, local, "file", started, labels_assigned)
            return self._own(partition, owned, "file")
        try:
            restored = self.mirror.restore(
                partition, local, state_parser(self.settings, partition, self._model_registry)
            )
        except StateTopicFenced as exc:
            self.metrics.checkpoint_failures.labels(reason="fenced").inc()
            self.log.error(
                "partition claimed by another worker in the state topic; not taking it",
                extra=fields(partition=partition, reason=str(exc)),
            )
            return None
        if restored.source == "topic" and self._beyond_commit(partition, restored.state):
            restored = dataclasses.replace(restored, state=local, source="file", payload=None)
        if restored.payload is not None:
            try:
                self.store.write(partition, restored.payload)
            except OSError as exc:  # only a cache: rewinds would start from the older file
                self.log.warning(
                    "cannot cache the state topic's state in the checkpoint directory",
                    extra=fields(partition=partition, error=str(exc)),
                )
        owned = self._restored(
            partition,
            restored.state,
            restored.source,
            started,
            labels_assigned,
            state_topic_seconds=round(restored.topic_seconds, 4),
            state_topic_records_seen=restored.topic_seen,
        )
        return self._own(partition, owned, restored.source)

    def _beyond_commit(self, partition: int, state: PartitionState) -> bool:
        """Whether ``state`` is past the committed offsets (exactly_once): a state staged in a
        transaction that aborted, which a broker without read_committed (the test broker) still
        shows. Its outputs were aborted, so it must not be continued; the file never is past them."""
        committed = self.checkpointer.committed_offsets(partition)
        if committed is None or all(n <= c for n, c in zip(state.next_offsets, committed, strict=True)):
            return False
        self.log.warning(
            "the state topic's newest state is past the committed offsets (its transaction aborted); "
            "restoring the checkpoint file",
            extra=fields(partition=partition, next_offsets=state.next_offsets, committed=committed),
        )
        return True

    def _own(self, partition: int, owned: OwnedPartition, source: str) -> OwnedPartition:
        fresh = owned.state.consumed == [0, 0]
        self.metrics.restores.labels(source="fresh" if fresh else source).inc()
        self.owned[partition] = owned
        self.metrics.assigned.set(len(self.owned))
        return owned

    def _load(self, partition: int) -> PartitionState:
        self.checkpointer.settle([partition])  # a write in flight of the partition lands first

        def on_bad(path: Any, why: str) -> None:
            self.metrics.checkpoint_failures.labels(reason="corrupt").inc()
            self.log.error("skipping unusable checkpoint", extra=fields(path=str(path), reason=why))

        return load_state(
            self.settings, partition, on_bad, self._model_factory, self._model_registry, self.store
        )

    def _restored(
        self,
        partition: int,
        state: PartitionState,
        source: str,
        started: float,
        labels_assigned: bool,
        **extra: Any,
    ) -> OwnedPartition:
        committed = self.checkpointer.committed_offsets(partition)
        if committed is not None and not any(
            c > n for c, n in zip(committed, state.next_offsets, strict=True)
        ):
            committed = None  # nothing beyond the checkpoint is committed: nothing to replay silently
        owned = OwnedPartition.of(state, labels_assigned, replay_until=committed)
        fresh = state.consumed == [0, 0]
        self.log.info(
            "partition starts fresh" if fresh else "partition restored",
            extra=fields(
                partition=partition,
                source="fresh" if fresh else source,
                next_offsets=state.next_offsets,
                records_seen=sum(state.consumed),
                committed_outputs_until=owned.recovery.replay_until,
                seconds=round(time.monotonic() - started, 4),
                **extra,
            ),
        )
        self.metrics.report_partition(partition, state)
        return owned

    def give_up(self, partitions: list[int], why: str) -> None:
        """Stop processing partitions another worker owns now (fenced in the state topic): their
        topics are paused, nothing more is produced, checkpointed or committed for them."""
        consumer = self.clients.consumer
        for p in partitions:
            owned = self.owned.get(p)
            if owned is None:
                continue
            if consumer is not None:
                ranks = range(2 if owned.labels_assigned else 1)
                consumer.pause([TopicPartition(self.topics[r], p) for r in ranks])
            self.log.error(
                "partition taken over by another worker; dropping it without a checkpoint",
                extra=fields(partition=p, reason=why),
            )
        self.drop(partitions)

    def drop(self, partitions: list[int]) -> None:
        for p in partitions:
            self.owned.pop(p, None)
            self.metrics.forget_partition(p, self.topics)
        self.metrics.assigned.set(len(self.owned))

    # -- consuming and processing ---------------------------------------------------------------------

    def ingest(self, messages: list[Message]) -> None:
        """Decode fetched records and queue them for the merge, per partition and topic.

        The batch is grouped by partition and topic first (a consumer's batch holds long runs of one
        partition), so that each group is converted and decoded in one pass.
        """
        groups: dict[tuple[int | None, str | None], list[Message]] = {}
        for msg in messages:
            error = msg.error()
            if error is not None:
                self._on_message_error(error)
                continue
            key = (msg.partition(), msg.topic())
            group = groups.get(key)
            if group is None:
                group = groups[key] = []
            group.append(msg)
        for (p, topic), group in groups.items():
            owned = None if p is None else self.owned.get(p)
            if owned is None or topic is None:  # (a message without an error has both)
                continue
            rank = FEATURES if topic == self.settings.features_topic else LABELS
            records = owned.position.unseen(rank, records_of(group))
            if not records:
                continue
            sizes = [len(r.value or b"") for r in records]
            owned.merger.push(rank, owned.state.decode(rank, records), sizes)
            self.metrics.records.labels(topic=topic, partition=str(p)).inc(len(records))

    def _on_message_error(self, error: KafkaError) -> None:
        if error.code() == KafkaError._PARTITION_EOF:
            return
        if error.fatal():
            raise KafkaException(error)
        self.log.warning("consume error", extra=fields(error=str(error)))

    def process_all(self) -> None:
        """Process what is ready in every owned partition but those that lost an output (they wait
        for :meth:`rewind_lost_output`). At most one model call's worth per partition
        (:meth:`~worker.core.partition_state.PartitionState.rows_per_call`): :attr:`more_ready` says
        whether some partition has more, for the loop to come back without waiting for new records."""
        self.more_ready = False
        for partition, owned in list(self.owned.items()):
            if owned.deliveries.failed is not None:
                continue
            self.process(partition, owned)
            self.backpressure(partition, self.owned[partition])  # a recovery may have replaced it

    def process(self, partition: int, owned: OwnedPartition) -> None:
        merger = owned.merger
        if not (merger.pending(FEATURES) or merger.pending(LABELS)):
            return
        labels_done = merger.pending(LABELS) == 0 and self.topic_done(LABELS, partition, owned)
        features_done = merger.pending(FEATURES) == 0 and self.topic_done(FEATURES, partition, owned)
        limit = owned.state.rows_per_call(merger.queues)  # the model call's work stays bounded
        entries = merger.pop_ready(labels_done=labels_done, features_done=features_done, limit=limit)
        if not entries:
            return
        if (
            limit is not None
            and len(entries) == limit
            and (merger.pending(FEATURES) or merger.pending(LABELS))
        ):
            self.more_ready = True  # the rest on the next turn, after checkpoints and signals
        entries = owned.recovery.defuse(entries)
        done = owned.recovery.committed(entries)
        if done and not self._run_all(partition, owned, entries[:done], publish=False):
            return
        entries = entries[done:]
        if entries:
            self._run_all(partition, owned, entries, publish=True)

    def _run_all(
        self, partition: int, owned: OwnedPartition, entries: list[MergeEntry], publish: bool
    ) -> bool:
        """Process entries in one run, or one per run after a model failure; False if one failed."""
        if not owned.recovery.one_at_a_time:
            return self._run(partition, owned, entries, publish)
        for i, entry in enumerate(entries):  # after a model failure: one record per call, to find the one
            if not self._run(partition, owned, [entry], publish):
                return False
            if owned.recovery.caught_up(owned.state.next_offsets):
                rest = entries[i + 1 :]  # past the failed run: the rest of the batch goes in one call
                return not rest or self._run(partition, owned, rest, publish)
        return True

    def _run(self, partition: int, owned: OwnedPartition, entries: list[MergeEntry], publish: bool) -> bool:
        """Process entries and publish the results unless told not to (their outputs are committed
        already); on a model failure recover and return False."""
        try:
            result = owned.state.process(entries, time.time())
        except Exception:
            self._recover(partition, owned, entries)
            return False
        owned.schedule.processed(len(entries))
        if publish:
            self.publisher.publish(partition, owned.deliveries, result)
        return True

    def _recover(self, partition: int, owned: OwnedPartition, entries: list[MergeEntry]) -> None:
        """The model raised: its state may be half-updated, so restore the last checkpoint and replay.

        The replay goes one record at a time up to the end of the failed run; the record whose call
        fails alone is dead-lettered (``model_error``) from then on. Input is never the reason the
        worker stops, and the result is the same as if that record had been invalid from the start.
        """
        rank, offset = entries[0].rank, entries[0].offset
        self.log.exception(
            "model failed; restoring the last checkpoint and replaying",
            extra=fields(partition=partition, records=len(entries), topic=self.topics[rank], offset=offset),
        )
        owned.recovery.model_failed(entries, owned.state.next_offsets)
        self._rewind(partition, owned)

    def latched(self) -> list[int]:
        """The owned partitions with an output lost for good."""
        return [p for p, owned in self.owned.items() if owned.deliveries.failed is not None]

    def rewind_lost_output(self, partition: int) -> None:
        """An output of the partition was not delivered for good: process again from the last checkpoint.

        No checkpoint taken after the lost output was written (its snapshot waits for every earlier
        output, and a latched partition writes none), so the last checkpoint is before it.
        """
        owned = self.owned[partition]
        latch = owned.deliveries.latch
        self.metrics.delivery_failures.labels(topic=latch.topic or "").inc()
        self.log.error(
            "an output was not delivered; restoring the last checkpoint and processing again",
            extra=fields(partition=partition, error=latch.failed, topic=latch.topic),
        )
        self._rewind(partition, owned)

    def _rewind(self, partition: int, owned: OwnedPartition) -> None:
        """Replace the partition by its last checkpoint and seek its topics to the offsets in it."""
        consumer = self.clients.consumer
        assert consumer is not None
        if owned.position.paused:
            consumer.resume([TopicPartition(self.topics[r], partition) for r in owned.position.paused])
        started = time.monotonic()
        restored = self._restored(partition, self._load(partition), "file", started, owned.labels_assigned)
        restored.recovery.inherit(owned.recovery)
        self.owned[partition] = restored
        for r, topic in enumerate(self.topics[: 2 if restored.labels_assigned else 1]):
            consumer.seek(TopicPartition(topic, partition, restored.state.next_offsets[r]))

    def backpressure(self, partition: int, owned: OwnedPartition) -> None:
        """Pause a topic partition whose records pile up waiting for the other topic; resume at half.

        After processing at most one queue of a partition is non-empty (the merge drains until one
        side is exhausted), so the topic being waited for is never paused and this cannot deadlock.
        """
        consumer = self.clients.consumer
        assert consumer is not None
        max_bytes = self.settings.merge_max_bytes
        paused = owned.position.paused
        for rank, topic in enumerate(self.topics):
            queued, queued_bytes = owned.merger.pending(rank), owned.merger.queued_bytes(rank)
            if rank not in paused and (queued > MAX_QUEUED or queued_bytes > max_bytes):
                consumer.pause([TopicPartition(topic, partition)])
                owned.position.pause(rank)
            elif rank in paused and queued <= MAX_QUEUED // 2 and queued_bytes <= max_bytes // 2:
                consumer.resume([TopicPartition(topic, partition)])
                owned.position.resume(rank)

    # -- positions against the topics' ends -----------------------------------------------------------

    def topic_done(self, rank: int, partition: int, owned: OwnedPartition) -> bool:
        """No more records of that topic to wait for: not consumed, or read to its end.

        The end is the high watermark of the last fetch response. Some brokers (Tansu) send none for
        an empty partition; then the partition counts as done only if the broker lists it as holding
        no records at all (low == high), which its imprecise ListOffsets still answers correctly.
        """
        if rank == LABELS and not owned.labels_assigned:
            return True  # no labels topic, or this member did not get its partition (logged at assign)
        consumer = self.clients.consumer
        assert consumer is not None
        tp = TopicPartition(self.topics[rank], partition)
        _, high = consumer.get_watermark_offsets(tp, cached=True)
        if high >= 0:
            return owned.position.fetched[rank] >= high
        return self._listed_empty(tp, owned.position.fetched[rank])

    def _listed_empty(self, tp: TopicPartition, fetched: int) -> bool:
        """Whether the broker lists the partition as empty up to ``fetched`` (asked at most once a second)."""
        consumer = self.clients.consumer
        assert consumer is not None
        key = (tp.topic, tp.partition)
        now = time.monotonic()
        cached = self._listed.get(key)
        if cached is None or now - cached[0] > _LIST_INTERVAL_S:
            try:
                low, high = consumer.get_watermark_offsets(tp, timeout=1.0, cached=False)
            except KafkaException:
                low, high = -1, -1
            cached = self._listed[key] = (now, low, high)
        _, low, high = cached
        return 0 <= low == high <= fetched

    def check_ends(self, partition: int, owned: OwnedPartition, rank: int, high: int, now: float) -> None:
        """Restart a topic partition from its start once its position has stayed past its end.

        ``high`` is the high watermark of the latest fetch response (-1 before the first one). A
        position past it is normal for a moment after an assignment (a watermark cached from an
        earlier fetch); one that stays there ``AHEAD_GRACE_S`` means the topic holds fewer records
        than the checkpoint read: it was deleted and re-created. Waiting would skip every new record
        below the old position, so the policy is to read the topic again from its start and keep the
        model (its learning is still valid; the records are new ones).
        """
        position = owned.position
        if not position.stayed_past_end(rank, high, bool(owned.merger.pending(rank)), now, AHEAD_GRACE_S):
            return
        topic = self.topics[rank]
        self.metrics.offset_resets.labels(topic=topic, reason="past_end").inc()
        self.log.warning(
            "restored offset is past the end of the topic (re-created?); reading it again from its start",
            extra=fields(partition=partition, topic=topic, offset=position.fetched[rank], end=high),
        )
        consumer = self.clients.consumer
        assert consumer is not None
        position.read_again(rank)
        owned.state.read_again(rank)
        owned.schedule.release()  # it holds the old offsets; the next one is due with the records since
        consumer.seek(TopicPartition(topic, partition, OFFSET_BEGINNING))

    def update_gauges(self, now: float) -> None:
        """Per-partition gauges and lag; positions found past a topic's end are handled here too."""
        consumer = self.clients.consumer
        assert consumer is not None
        for p, owned in list(self.owned.items()):
            self.metrics.report_partition(p, owned.state)
            for rank, topic in enumerate(self.topics[: 2 if owned.labels_assigned else 1]):
                _, high = consumer.get_watermark_offsets(TopicPartition(topic, p), cached=True)
                self.check_ends(p, owned, rank, high, now)
                if high >= 0:
                    behind = high - owned.state.next_offsets[rank]
                    self.metrics.lag.labels(topic=topic, partition=str(p)).set(max(behind, 0))


def records_of(messages: list[Message]) -> list[Record]:
    """The messages as the core's records, with the timestamp in seconds (0.0 when there is none)."""
    records = []
    for m in messages:
        kind, millis = m.timestamp()
        offset = m.offset()
        assert offset is not None  # a fetched message (not an error) has one
        records.append(Record(offset, millis / 1000.0 if kind else 0.0, m.key(), m.value()))
    return records
