"""The runtime of the partitions one worker owns: fetch positions, merging, pausing, recovery.

Each owned input partition is an :class:`Owned`: its :class:`~worker.core.partition_state.PartitionState`
restored from the checkpoint directory, its merge queues, the next offset to receive per topic and the
bookkeeping of its checkpoints and deliveries. :class:`PartitionRuntime` turns fetched messages into
processed runs:

* **Fetch positions.** A fetch from before a seek may still deliver older records; :func:`unseen`
  keeps each offset once, in order.
* **Backpressure.** A topic partition whose records pile up waiting for the other topic is paused,
  and resumed at half the bound.
* **Poison records.** When the model raises, the partition rewinds to its last checkpoint and
  replays one record per call up to where it failed; the record that fails alone is dead-lettered
  (``model_error``) from then on.
* **Failed deliveries.** When an output of the partition is not delivered for good (its
  :class:`~worker.kafka.delivery.DeliveryLatch` is set), the partition stops processing; the shell then
  renews its producer and the partition rewinds to its last checkpoint: that checkpoint does not
  cover the lost output (see :mod:`worker.checkpoints.protocol`), so the records after it are processed and
  their outputs produced again. The producer keeps each new output until the broker takes it or
  ``message.timeout.ms`` passes; in the second case the partition rewinds again.
* **Committed outputs.** With exactly_once the group's committed offsets may be ahead of the
  checkpoint file (the transaction committed, then the process died before the file was durable):
  the records between are processed again, learning as before, without producing their outputs,
  which are committed already (:attr:`Owned.replay_until`, from :attr:`PartitionRuntime.committed_offsets`).
* **Offsets past the end.** Restored offsets beyond the end of a topic (the topic was deleted and
  re-created) are detected from the fetch responses' high watermarks: once a topic partition has
  stayed ahead of its end for ``AHEAD_GRACE_S``, it is logged, counted
  (``sgt_offset_resets_total{reason="past_end"}``) and read again from its start; the model, the
  join buffer and the other topic's position are kept.

>>> [r.offset for r in unseen([Record(o, 0.0, None, b"") for o in (3, 4, 5)], 4)]
[4, 5]
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, KafkaError, KafkaException, Message, TopicPartition

from sgt.registry import MODEL_TYPES
from worker.checkpoints.backoff import Backoff
from worker.checkpoints.file_store import CheckpointStore, Owner
from worker.checkpoints.snapshot import Snapshot
from worker.config import WorkerSettings
from worker.core.merge import FEATURES, LABELS, Merger
from worker.core.model_protocol import ModelClass, StreamModel
from worker.core.partition_state import PartitionState, ProcessResult, StateConfig, split_state
from worker.core.sgt_models import new_model
from worker.core.values import Invalid, MergeEntry, Record
from worker.kafka.clients import Clients
from worker.kafka.delivery import DeliveryLatch, RunDelivery
from worker.logs import fields
from worker.metrics import WorkerMetrics
from worker.state_topic.errors import StateTopicFenced
from worker.state_topic.mirror import StateMirror

MAX_QUEUED = 100_000  # fetched records waiting for the other topic, per topic and partition
AHEAD_GRACE_S = 3.0  # how long a position must stay past the fetched end before it counts as past it
_LIST_INTERVAL_S = 1.0


@dataclass
class Owned:
    """An owned input partition: its state, its merge queues and checkpoint bookkeeping."""

    state: PartitionState
    merger: Merger = field(default_factory=Merger)
    fetched: list[int] = field(default_factory=lambda: [0, 0])  # next offset to receive, per topic
    since_checkpoint: int = 0
    last_checkpoint: float = field(default_factory=time.monotonic)
    paused: set[int] = field(default_factory=set)  # topic ranks paused because their queue is long
    poison: set[tuple[int, int]] = field(default_factory=set)  # (rank, offset) of records the model fails on
    careful_until: list[int] | None = None  # next offsets up to which records go one per model call
    replay_until: list[int] | None = None  # next offsets below which the outputs are committed already
    labels_assigned: bool = False  # this member consumes the labels topic's partition too
    in_flight: deque[RunDelivery] = field(default_factory=deque)  # produced runs, oldest first
    produced_runs: int = 0  # runs of outputs handed to the producer
    acked_runs: int = 0  # of those, the leading ones whose every output was acknowledged
    snapshot: Snapshot | None = None  # taken, waiting for its outputs' acknowledgements to be written
    latch: DeliveryLatch = field(default_factory=DeliveryLatch)  # set when an output is lost for good
    ahead_since: list[float | None] = field(default_factory=lambda: [None, None])  # per topic rank
    retry: Backoff = field(default_factory=Backoff)  # when a checkpoint may be tried again after failures

    def advance_acks(self) -> int:
        """Drop fully acknowledged runs from the front; return how many runs are acknowledged so far."""
        while self.in_flight and self.in_flight[0].left <= 0:
            self.in_flight.popleft()
            self.acked_runs += 1
        return self.acked_runs


def state_config(settings: WorkerSettings) -> StateConfig:
    return StateConfig(
        task=settings.task,
        labels_topic=settings.labels_topic,
        features_topic=settings.features_topic,
        features=settings.features,
        max_record_bytes=settings.max_record_bytes,
        join_max_pending=settings.join_max_pending,
        join_max_age=settings.join_max_age_seconds,
        join_max_bytes=settings.join_max_bytes,
        metrics_window=settings.metrics_window,
        max_features=settings.max_features,
        max_message_bytes=settings.max_message_bytes,
        proba_top_k=settings.proba_top_k,
        interval_coverage=settings.interval_coverage,
        explain=settings.explain,
        max_label_bytes=settings.max_label_bytes,
        max_classes=settings.max_classes,
        max_ts_ahead=settings.max_ts_ahead_seconds,
    )


def state_parser(
    settings: WorkerSettings, partition: int, registry: Mapping[str, ModelClass] | None = None
) -> Callable[[bytes], PartitionState]:
    """Parses a checkpoint payload of ``partition``; ValueError when it does not fit the settings."""
    config = state_config(settings)
    types: Mapping[str, ModelClass] = registry if registry is not None else MODEL_TYPES

    def parse(payload: bytes) -> PartitionState:
        state = PartitionState.from_bytes(payload, config, types)
        if state.partition != partition:
            raise ValueError(f"checkpoint holds partition {state.partition}, not {partition}")
        return state

    return parse


def load_state(
    settings: WorkerSettings,
    partition: int,
    on_bad: Callable[[Any, str], None] | None = None,
    model_factory: Callable[[], StreamModel] | None = None,
    registry: Mapping[str, ModelClass] | None = None,
    store: CheckpointStore | None = None,
) -> PartitionState:
    """The partition's state from its newest valid checkpoint, or a fresh one.

    ``model_factory`` / ``registry`` replace the sgt models (fresh model; class name -> class).
    ``store`` (default: the settings' directory and deployment) raises
    :class:`~worker.checkpoints.file_store.OwnerConflict` on another deployment's checkpoint.
    """
    config = state_config(settings)
    parse = state_parser(settings, partition, registry)

    def legacy_owner(payload: bytes) -> Owner:
        """A checkpoint of the release before owners names its topics and task, not its group."""
        header, _ = split_state(payload)
        named = [header.get(k) for k in ("features_topic", "labels_topic", "task")]
        if not isinstance(named[0], str) or not isinstance(named[2], str):
            raise ValueError("malformed state: the header names no topics or task")
        return Owner(settings.group_id, named[0], named[1], named[2])

    store = store or CheckpointStore(settings.checkpoint_dir, Owner.of(settings))
    loaded = store.read_newest(partition, on_bad=on_bad, accept=parse, legacy_owner=legacy_owner)
    if loaded is not None:
        return parse(loaded.payload)
    model = model_factory() if model_factory is not None else new_model(settings)
    return PartitionState(partition, model, config)


def set_partition_gauges(metrics: WorkerMetrics, partition: int, owned: Owned) -> None:
    """The per-partition gauges of the model, the prequential error and the join buffer."""
    m, state, p = metrics, owned.state, str(partition)
    model = state.model
    m.tree_nodes.labels(partition=p).set(model.n_nodes)
    m.tree_leaves.labels(partition=p).set(model.n_leaves)
    m.tree_depth.labels(partition=p).set(model.depth)
    m.model_bytes.labels(partition=p).set(model.nbytes)
    m.model_version.labels(partition=p).set(model.version)
    m.report_model(p, getattr(model, "n_trees", 1), getattr(model, "n_drifts", 0))
    m.prequential_error.labels(partition=p, window="cumulative").set(state.prequential.error)
    m.prequential_error.labels(partition=p, window="recent").set(state.prequential.recent_error)
    if state.prequential.task == "classification":
        scores = state.prequential
        m.prequential_log_loss.labels(partition=p, window="cumulative").set(scores.log_loss)
        m.prequential_log_loss.labels(partition=p, window="recent").set(scores.recent_log_loss)
        m.prequential_brier.labels(partition=p, window="cumulative").set(scores.brier)
        m.prequential_brier.labels(partition=p, window="recent").set(scores.recent_brier)
    if state.intervals is not None:
        score = state.intervals
        m.interval_coverage.labels(partition=p, window="cumulative").set(score.coverage)
        m.interval_coverage.labels(partition=p, window="recent").set(score.recent_coverage)
        m.interval_width.labels(partition=p, window="cumulative").set(score.width)
        m.interval_width.labels(partition=p, window="recent").set(score.recent_width)
    if state.config.explain and hasattr(model, "feature_importances"):
        m.report_importances(p, model.feature_importances(), state.config.explain)
    m.join_pending.labels(partition=p, side="features").set(len(state.join.features))
    m.join_pending.labels(partition=p, side="labels").set(len(state.join.labels))
    m.join_pending_bytes.labels(partition=p, side="features").set(state.join.feature_bytes)
    m.join_pending_bytes.labels(partition=p, side="labels").set(state.join.label_bytes)


Emit = Callable[[int, Owned, ProcessResult], None]


class PartitionRuntime:
    """The owned partitions and what happens to them between a fetch and the produce calls.

    ``emit(partition, owned, result)`` publishes a processed run (the shell's producer side);
    ``before_restore(partition)`` runs before a partition is restored from its checkpoint file (the
    checkpoint protocol waits there for that partition's write in flight); ``committed_offsets(partition)``
    gives the next offsets (per topic rank) whose records' outputs are committed already, or None when
    that is not known (at_least_once: outputs are published again on replay).
    """

    def __init__(
        self,
        settings: WorkerSettings,
        clients: Clients,
        metrics: WorkerMetrics,
        log: logging.Logger,
        emit: Emit,
        store: CheckpointStore,
        model_factory: Callable[[], StreamModel] | None = None,
        model_registry: Mapping[str, ModelClass] | None = None,
    ) -> None:
        self.settings, self.clients, self.metrics, self.log = settings, clients, metrics, log
        self.store = store
        self.emit = emit
        self.before_restore: Callable[[int], None] = lambda _p: None
        self.committed_offsets: Callable[[int], list[int] | None] = lambda _p: None
        self.mirror: StateMirror | None = None  # the state topic, when one is configured
        self.topics = [settings.features_topic] + ([settings.labels_topic] if settings.labels_topic else [])
        self.owned: dict[int, Owned] = {}
        self.more_ready = False  # the last process_all left ready records for the next turn
        self._model_factory, self._model_registry = model_factory, model_registry
        self._listed: dict[tuple[str, int], tuple[float, int, int]] = {}

    # -- owning -----------------------------------------------------------------------------------------

    def assign(self, partition: int) -> Owned | None:
        """The partition as its newest checkpoint left it, on assignment; None when it is not ours.

        Without a state topic that is the checkpoint file (or a fresh state). With one, the partition
        is claimed in the topic and the newer of the file's and the topic's state is restored (see
        :mod:`worker.state_topic.mirror`); a state taken from the topic is written to the file too, so that
        rewinds (which read the file) find it. None when another worker claimed the partition in the
        state topic meanwhile: it is not processed here.
        """
        started = time.monotonic()
        local = self._load(partition)
        if self.mirror is None:
            return self._count(self._restored(partition, local, "file", started), "file")
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
            state_topic_seconds=round(restored.topic_seconds, 4),
            state_topic_records_seen=restored.topic_seen,
        )
        return self._count(owned, restored.source)

    def _beyond_commit(self, partition: int, state: PartitionState) -> bool:
        """Whether ``state`` is past the committed offsets (exactly_once): a state staged in a
        transaction that aborted, which a broker without read_committed (the test broker) still
        shows. Its outputs were aborted, so it must not be continued; the file never is past them."""
        committed = self.committed_offsets(partition)
        if committed is None or all(n <= c for n, c in zip(state.next_offsets, committed, strict=True)):
            return False
        self.log.warning(
            "the state topic's newest state is past the committed offsets (its transaction aborted); "
            "restoring the checkpoint file",
            extra=fields(partition=partition, next_offsets=state.next_offsets, committed=committed),
        )
        return True

    def _count(self, owned: Owned, source: str) -> Owned:
        fresh = owned.state.consumed == [0, 0]
        self.metrics.restores.labels(source="fresh" if fresh else source).inc()
        return owned

    def restore(self, partition: int) -> Owned:
        """The partition as its newest valid checkpoint file left it (or fresh); counted and logged.

        Used by rewinds: the file is never older than the state topic's state of the current owner
        (a checkpoint goes to the file first, and :meth:`assign` caches the topic's state there)."""
        started = time.monotonic()
        return self._restored(partition, self._load(partition), "file", started)

    def _load(self, partition: int) -> PartitionState:
        self.before_restore(partition)

        def on_bad(path: Any, why: str) -> None:
            self.metrics.checkpoint_failures.labels(reason="corrupt").inc()
            self.log.error("skipping unusable checkpoint", extra=fields(path=str(path), reason=why))

        return load_state(
            self.settings, partition, on_bad, self._model_factory, self._model_registry, self.store
        )

    def _restored(
        self, partition: int, state: PartitionState, source: str, started: float, **extra: Any
    ) -> Owned:
        owned = Owned(state, fetched=list(state.next_offsets))
        committed = self.committed_offsets(partition)
        if committed is not None and any(c > n for c, n in zip(committed, state.next_offsets, strict=True)):
            owned.replay_until = committed
        fresh = state.consumed == [0, 0]
        self.log.info(
            "partition starts fresh" if fresh else "partition restored",
            extra=fields(
                partition=partition,
                source="fresh" if fresh else source,
                next_offsets=state.next_offsets,
                records_seen=sum(state.consumed),
                committed_outputs_until=owned.replay_until,
                seconds=round(time.monotonic() - started, 4),
                **extra,
            ),
        )
        set_partition_gauges(self.metrics, partition, owned)
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
            records = unseen(records_of(group), owned.fetched[rank])
            if not records:
                continue
            owned.fetched[rank] = records[-1].offset + 1
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
            if owned.latch.failed is not None:
                continue
            self.process(partition, owned)
            self.backpressure(partition, self.owned[partition])  # a recovery may have replaced it

    def process(self, partition: int, owned: Owned) -> None:
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
        if owned.poison:
            entries = [defuse(entry, owned.poison) for entry in entries]
        if owned.replay_until is not None:
            done = committed_prefix(entries, owned.replay_until)
            if done < len(entries):  # the merge order is the committed one: the rest are all new
                owned.replay_until = None
            if done and not self._run_all(partition, owned, entries[:done], publish=False):
                return
            entries = entries[done:]
        if entries:
            self._run_all(partition, owned, entries, publish=True)

    def _run_all(self, partition: int, owned: Owned, entries: list[MergeEntry], publish: bool) -> bool:
        """Process entries in one run, or one per run after a model failure; False if one failed."""
        careful_until = owned.careful_until
        if careful_until is None:
            return self._run(partition, owned, entries, publish)
        for i, entry in enumerate(entries):  # after a model failure: one record per call, to find the one
            if not self._run(partition, owned, [entry], publish):
                return False
            if all(n >= end for n, end in zip(owned.state.next_offsets, careful_until, strict=True)):
                owned.careful_until = None  # past the failed run: the rest of the batch goes in one call
                rest = entries[i + 1 :]
                return not rest or self._run(partition, owned, rest, publish)
        return True

    def _run(self, partition: int, owned: Owned, entries: list[MergeEntry], publish: bool) -> bool:
        """Process entries and publish the results unless told not to (their outputs are committed
        already); on a model failure recover and return False."""
        try:
            result = owned.state.process(entries, time.time())
        except Exception:
            self._recover(partition, owned, entries)
            return False
        owned.since_checkpoint += len(entries)
        if publish:
            self.emit(partition, owned, result)
        return True

    def _recover(self, partition: int, owned: Owned, entries: list[MergeEntry]) -> None:
        """The model raised: its state may be half-updated, so restore the last checkpoint and replay.

        The replay goes one record at a time up to the end of the failed run; the record whose call
        fails alone is dead-lettered (``model_error``) from then on. Input is never the reason the
        worker stops, and the result is the same as if that record had been invalid from the start.
        """
        rank, offset = entries[0].rank, entries[0].offset
        if len(entries) == 1:
            owned.poison.add((rank, offset))
        self.log.exception(
            "model failed; restoring the last checkpoint and replaying",
            extra=fields(partition=partition, records=len(entries), topic=self.topics[rank], offset=offset),
        )
        failed_end = list(owned.state.next_offsets)
        careful_until = [
            max(a, b) for a, b in zip(failed_end, owned.careful_until or failed_end, strict=True)
        ]
        self._rewind(partition, owned, careful_until)

    def latched(self) -> list[int]:
        """The owned partitions with an output lost for good."""
        return [p for p, owned in self.owned.items() if owned.latch.failed is not None]

    def rewind_lost_output(self, partition: int) -> None:
        """An output of the partition was not delivered for good: process again from the last checkpoint.

        No checkpoint taken after the lost output was written (its snapshot waits for every earlier
        output, and a latched partition writes none), so the last checkpoint is before it.
        """
        owned = self.owned[partition]
        self.metrics.delivery_failures.labels(topic=owned.latch.topic or "").inc()
        self.log.error(
            "an output was not delivered; restoring the last checkpoint and processing again",
            extra=fields(partition=partition, error=owned.latch.failed, topic=owned.latch.topic),
        )
        self._rewind(partition, owned, owned.careful_until)

    def _rewind(self, partition: int, owned: Owned, careful_until: list[int] | None) -> None:
        """Replace the partition by its last checkpoint and seek its topics to the offsets in it."""
        consumer = self.clients.consumer
        assert consumer is not None
        if owned.paused:
            consumer.resume([TopicPartition(self.topics[r], partition) for r in owned.paused])
        restored = self.restore(partition)
        restored.poison, restored.careful_until = owned.poison, careful_until
        restored.labels_assigned = owned.labels_assigned
        self.owned[partition] = restored
        for r, topic in enumerate(self.topics[: 2 if restored.labels_assigned else 1]):
            consumer.seek(TopicPartition(topic, partition, restored.state.next_offsets[r]))

    def backpressure(self, partition: int, owned: Owned) -> None:
        """Pause a topic partition whose records pile up waiting for the other topic; resume at half.

        After processing at most one queue of a partition is non-empty (the merge drains until one
        side is exhausted), so the topic being waited for is never paused and this cannot deadlock.
        """
        consumer = self.clients.consumer
        assert consumer is not None
        max_bytes = self.settings.merge_max_bytes
        for rank, topic in enumerate(self.topics):
            queued, queued_bytes = owned.merger.pending(rank), owned.merger.queued_bytes(rank)
            if rank not in owned.paused and (queued > MAX_QUEUED or queued_bytes > max_bytes):
                consumer.pause([TopicPartition(topic, partition)])
                owned.paused.add(rank)
            elif rank in owned.paused and queued <= MAX_QUEUED // 2 and queued_bytes <= max_bytes // 2:
                consumer.resume([TopicPartition(topic, partition)])
                owned.paused.discard(rank)

    # -- positions against the topics' ends -----------------------------------------------------------

    def topic_done(self, rank: int, partition: int, owned: Owned) -> bool:
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
            return owned.fetched[rank] >= high
        return self._listed_empty(tp, owned.fetched[rank])

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

    def check_ends(self, partition: int, owned: Owned, rank: int, high: int, now: float) -> None:
        """Restart a topic partition from its start once its position has stayed past its end.

        ``high`` is the high watermark of the latest fetch response (-1 before the first one). A
        position past it is normal for a moment after an assignment (a watermark cached from an
        earlier fetch); one that stays there ``AHEAD_GRACE_S`` means the topic holds fewer records
        than the checkpoint read: it was deleted and re-created. Waiting would skip every new record
        below the old position, so the policy is to read the topic again from its start and keep the
        model (its learning is still valid; the records are new ones).
        """
        if high < 0 or owned.fetched[rank] <= high or owned.merger.pending(rank):
            owned.ahead_since[rank] = None
            return
        since = owned.ahead_since[rank]
        if since is None:
            owned.ahead_since[rank] = now
            return
        if now - since < AHEAD_GRACE_S:
            return
        topic = self.topics[rank]
        self.metrics.offset_resets.labels(topic=topic, reason="past_end").inc()
        self.log.warning(
            "restored offset is past the end of the topic (re-created?); reading it again from its start",
            extra=fields(partition=partition, topic=topic, offset=owned.fetched[rank], end=high),
        )
        consumer = self.clients.consumer
        assert consumer is not None
        owned.ahead_since[rank] = None
        owned.fetched[rank] = owned.state.next_offsets[rank] = 0
        owned.snapshot = None  # it holds the old offsets; the next one is due with the records since
        consumer.seek(TopicPartition(topic, partition, OFFSET_BEGINNING))


def records_of(messages: list[Message]) -> list[Record]:
    """The messages as the core's records, with the timestamp in seconds (0.0 when there is none)."""
    records = []
    for m in messages:
        kind, millis = m.timestamp()
        offset = m.offset()
        assert offset is not None  # a fetched message (not an error) has one
        records.append(Record(offset, millis / 1000.0 if kind else 0.0, m.key(), m.value()))
    return records


def unseen(records: list[Record], fetched: int) -> list[Record]:
    """The records of one topic partition at or after offset ``fetched``, each offset once.

    A fetch from before a seek may still deliver older records; they are dropped here, as is anything
    out of order.
    """
    kept = []
    for record in records:
        if record.offset >= fetched:
            kept.append(record)
            fetched = record.offset + 1
    return kept


def committed_prefix(entries: list[MergeEntry], committed: list[int]) -> int:
    """How many leading entries come from records below the ``committed`` next offsets (per rank).

    Those records' outputs were committed before a crash; they are processed again only to bring the
    model where it was. The merge order is deterministic, so those records come first.

    >>> def entry(ts, rank, offset):  # an entry whose record does not matter here
    ...     return MergeEntry(ts, rank, offset, Record(offset, ts, None, None), Invalid("bad_x"))
    >>> committed_prefix([entry(0.0, 0, 4), entry(0.1, 1, 2), entry(0.2, 0, 5)], [5, 3])
    2
    """
    done = 0
    for entry in entries:
        if entry.offset >= committed[entry.rank]:
            break
        done += 1
    return done


def defuse(entry: MergeEntry, poison: set[tuple[int, int]]) -> MergeEntry:
    """The entry, or the same record marked invalid (``model_error``) if the model failed on it."""
    if (entry.rank, entry.offset) in poison:
        return entry._replace(decoded=Invalid("model_error"))
    return entry
