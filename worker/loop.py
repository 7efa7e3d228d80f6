"""The Kafka shell around :class:`worker.state.PartitionState`: consume, merge, process, produce, checkpoint.

One :class:`Worker` runs one consumer (group member) and one idempotent producer. The eager ``range``
assignor gives a member equal partition numbers of the features and labels topics when they have the
same partition count, so each input partition's two topics are owned together. For each owned
partition the worker keeps a state restored from the checkpoint directory and seeks both topics to
the offsets in it; records are merged per partition in a deterministic order (:mod:`worker.merge`),
processed in runs, and their predictions and dead letters produced. A checkpoint is taken every
``checkpoint_records`` records or ``checkpoint_seconds`` seconds (a snapshot, written once the outputs
before it are acknowledged), and on revoke and at shutdown (flush the producer, write the file
durably); the same offsets are then committed to Kafka (informational: restore always trusts the
checkpoint). Lost partitions are dropped without writing anything.

Usage (needs a broker)::

    >>> worker = Worker(load_settings({"bootstrap_servers": "127.0.0.1:9092"}))  # doctest: +SKIP
    >>> threading.Thread(target=worker.run).start(); worker.stop()                # doctest: +SKIP
"""

from __future__ import annotations

import dataclasses
import gc
import logging
import operator
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from confluent_kafka import Consumer, KafkaError, KafkaException, Message, Producer, TopicPartition

from worker import checkpoint
from worker.config import WorkerSettings
from worker.logs import RepeatFilter, fields
from worker.merge import FEATURES, LABELS, Entry, Merger
from worker.metrics import Health, WorkerMetrics
from worker.model import model_types, new_model, preload
from worker.records import Invalid
from worker.state import PartitionState, ProcessResult, Record, StateConfig

_CONSUMER_KEYS = frozenset(
    {"session.timeout.ms", "heartbeat.interval.ms", "fetch.wait.max.ms", "max.poll.interval.ms"}
)
_PRODUCER_KEYS = frozenset({"linger.ms", "partitioner", "batch.size", "compression.type"})
_GAUGE_INTERVAL_S = 1.0
_FLUSH_TIMEOUT_S = 10.0
_LIST_INTERVAL_S = 1.0
_CLIENT_LOG_INTERVAL_S = 30.0  # the Kafka clients log one message (a reconnect failure...) at most this often
_GC_THRESHOLD = 20_000  # allocations between first-generation collections (default 700)
_MAX_QUEUED = 100_000  # fetched records waiting for the other topic, per topic and partition


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
    labels_assigned: bool = False  # this member consumes the labels topic's partition too
    in_flight: deque[_RunDelivery] = field(default_factory=deque)  # produced runs, oldest first
    produced_runs: int = 0  # runs of outputs handed to the producer
    acked_runs: int = 0  # of those, the leading ones whose every output was acknowledged
    snapshot: Snapshot | None = None  # taken, waiting for its outputs' acknowledgements to be written

    def advance_acks(self) -> int:
        """Drop fully acknowledged runs from the front; return how many runs are acknowledged so far."""
        while self.in_flight and self.in_flight[0].left <= 0:
            self.in_flight.popleft()
            self.acked_runs += 1
        return self.acked_runs


@dataclass(frozen=True)
class Snapshot:
    """A partition's state as bytes, writable once the outputs of its first ``runs`` runs are delivered."""

    blob: bytes
    next_offsets: tuple[int, int]
    runs: int  # Owned.produced_runs when it was taken
    records: int  # records it covers beyond the previous checkpoint
    seconds: float  # time spent taking it


def state_config(settings: WorkerSettings) -> StateConfig:
    return StateConfig(
        task=settings.task,
        labels_topic=settings.labels_topic,
        features_topic=settings.features_topic,
        features=settings.features,
        max_record_bytes=settings.max_record_bytes,
        join_max_pending=settings.join_max_pending,
        join_max_age=settings.join_max_age_seconds,
        metrics_window=settings.metrics_window,
        max_features=settings.max_features,
    )


def load_state(
    settings: WorkerSettings,
    partition: int,
    on_bad: Callable[[Any, str], None] | None = None,
    model_factory: Callable[[], Any] | None = None,
    registry: Mapping[str, Any] | None = None,
) -> PartitionState:
    """The partition's state from its newest valid checkpoint, or a fresh one.

    ``model_factory`` / ``registry`` replace the sgt models (fresh model; class name -> class).
    """
    config = state_config(settings)
    types = registry if registry is not None else model_types()

    def parse(payload: bytes) -> PartitionState:
        state = PartitionState.from_bytes(payload, config, types)
        if state.partition != partition:
            raise ValueError(f"checkpoint holds partition {state.partition}, not {partition}")
        return state

    loaded = checkpoint.read_newest(settings.checkpoint_dir, partition, on_bad=on_bad, accept=parse)
    if loaded is not None:
        return parse(loaded.payload)
    model = model_factory() if model_factory is not None else new_model(settings)
    return PartitionState(partition, model, config)


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
        **dict(settings.kafka_options),
    }
    conf.update({k: v for k, v in (overrides or {}).items() if k in _CONSUMER_KEYS})
    return conf


def producer_config(settings: WorkerSettings, overrides: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The producer settings: idempotent, acks=all, Java-compatible key partitioning."""
    conf: dict[str, Any] = {
        "bootstrap.servers": settings.bootstrap_servers,
        "enable.idempotence": True,
        "acks": "all",
        "linger.ms": settings.linger_ms,
        "partitioner": "murmur2_random",
        "message.max.bytes": max(settings.max_record_bytes * 2, 1 << 20) + 65536,
        **dict(settings.kafka_options),
    }
    conf.update({k: v for k, v in (overrides or {}).items() if k in _PRODUCER_KEYS})
    return conf


class Worker:
    """One member of the worker group; :meth:`run` blocks until :meth:`stop` is called."""

    def __init__(
        self,
        settings: WorkerSettings,
        metrics: WorkerMetrics | None = None,
        health: Health | None = None,
        client_overrides: Mapping[str, Any] | None = None,
        log: logging.Logger | None = None,
        model_factory: Callable[[], Any] | None = None,
        model_registry: Mapping[str, Any] | None = None,
    ) -> None:
        self.settings = settings
        self._model_factory = model_factory
        self._model_registry = model_registry
        self.metrics = metrics or WorkerMetrics()
        self.health = health or Health()
        self.log = log or logging.getLogger("worker")
        # the Kafka clients' logs and errors, each shape at most once per interval (see RepeatFilter)
        self._client_log = self.log.getChild("librdkafka")
        if not any(isinstance(f, RepeatFilter) for f in self._client_log.filters):
            self._client_log.addFilter(RepeatFilter(_CLIENT_LOG_INTERVAL_S))
        self.owned: dict[int, Owned] = {}
        self.topics = [settings.features_topic] + ([settings.labels_topic] if settings.labels_topic else [])
        self._stop = threading.Event()
        self._overrides = dict(client_overrides or {})
        self._next_gauges = 0.0
        self._listed: dict[tuple[str, int], tuple[float, int, int]] = {}
        self._latencies: list[tuple[float, list[float]]] = []  # (delivered at, event times of a run)
        self.consumer: Consumer | None = None
        self.producer: Producer | None = None

    # -- lifecycle ------------------------------------------------------------------------------------

    def stop(self) -> None:
        """Ask :meth:`run` to finish: final checkpoint, flush, commit, leave the group. Thread-safe."""
        self._stop.set()

    @property
    def stopping(self) -> bool:
        return self._stop.is_set()

    def run(self) -> None:
        """Consume and learn until stopped; then shut down cleanly."""
        _tune_gc()
        self.producer = Producer(self._producer_config())
        self.consumer = Consumer(self._consumer_config())
        self.consumer.subscribe(
            self.topics, on_assign=self._on_assign, on_revoke=self._on_revoke, on_lost=self._on_lost
        )
        self.log.info("worker started", extra=fields(topics=self.topics, group=self.settings.group_id))
        preload()  # while the group join runs in the client's background threads
        try:
            while not self._stop.is_set():
                self.step()
        except BaseException:
            # The state may be half-updated: write nothing, the next owner replays from the last checkpoint.
            self.log.exception("worker loop failed; leaving without a final checkpoint")
            self._drop(sorted(self.owned))
            self._shutdown()
            raise
        self._shutdown()

    def step(self) -> None:
        """One turn of the loop: consume a batch, process what is ready, produce, maybe checkpoint."""
        assert self.consumer is not None and self.producer is not None
        messages = self._fetch()
        self.health.beat()
        if messages:
            self._ingest(messages)
        for partition, owned in list(self.owned.items()):
            self._process(partition, owned)
            self._backpressure(partition, self.owned[partition])  # a recovery may have replaced it
        self.producer.poll(0)
        self._maybe_checkpoint()
        if self._latencies:  # filled by delivery callbacks, which run inside poll() and flush()
            for delivered_at, event_ts in self._latencies:
                self.metrics.latency.observe_many(np.maximum(delivered_at - np.asarray(event_ts), 0.0))
            self._latencies.clear()
        now = time.monotonic()
        if now >= self._next_gauges:
            self._next_gauges = now + _GAUGE_INTERVAL_S
            self._update_gauges()

    def _fetch(self) -> list[Message]:
        """Wait up to the poll timeout for one record, then take what else is already fetched.

        ``consume(n, timeout)`` alone waits the whole timeout unless ``n`` records are there, which at
        a low rate adds up to the timeout to every record's latency; ``poll`` returns on the first one.
        """
        assert self.consumer is not None
        first = self.consumer.poll(self.settings.poll_timeout_seconds)
        if first is None:
            return []
        return (
            [first, *self.consumer.consume(self.settings.batch_size - 1, 0)]
            if self.settings.batch_size > 1
            else [first]
        )

    def _shutdown(self) -> None:
        self.log.info("worker stopping", extra=fields(partitions=sorted(self.owned)))
        self.health.set_ready(False)
        try:
            if self.owned:
                self._checkpoint(list(self.owned), force=True)
        finally:
            if self.consumer is not None:
                self.consumer.close()  # runs on_revoke (nothing left to write) and leaves the group
            if self.producer is not None:
                left = self.producer.flush(_FLUSH_TIMEOUT_S)
                if left:
                    self.log.error("records left undelivered at shutdown", extra=fields(undelivered=left))
            self.consumer = self.producer = None
            self.log.info("worker stopped")

    # -- client configuration -------------------------------------------------------------------------

    def _consumer_config(self) -> dict[str, Any]:
        return self._with_callbacks(consumer_config(self.settings, self._overrides))

    def _producer_config(self) -> dict[str, Any]:
        return self._with_callbacks(producer_config(self.settings, self._overrides))

    def _with_callbacks(self, conf: dict[str, Any]) -> dict[str, Any]:
        # librdkafka's own log lines go through the worker's logger (JSON, like every other line)
        # rather than straight to stderr; they reach it from poll(), on this thread
        return {**conf, "error_cb": self._on_error, "logger": self._client_log}

    def _on_error(self, error: KafkaError) -> None:
        level = logging.ERROR if error.fatal() else logging.WARNING
        self._client_log.log(level, "kafka client error", extra=fields(error=str(error), code=error.code()))
        if error.fatal():
            self._stop.set()

    # -- rebalances -----------------------------------------------------------------------------------

    def _on_assign(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        self.metrics.rebalances.labels(event="assign").inc()
        by_topic: dict[str, set[int]] = {}
        for tp in partitions:
            by_topic.setdefault(tp.topic, set()).add(tp.partition)
        features = by_topic.get(self.settings.features_topic, set())
        labels = by_topic.get(self.settings.labels_topic or "", set())
        if self.settings.labels_topic and features != labels:
            self.log.error(
                "features and labels partitions are not co-assigned; are the partition counts equal?",
                extra=fields(features=sorted(features), labels=sorted(labels)),
            )
        assignment = []
        for p in sorted(features):
            owned = self._restore(p)
            self.owned[p] = owned
            assignment.append(
                TopicPartition(self.settings.features_topic, p, owned.state.next_offsets[FEATURES])
            )
            owned.labels_assigned = bool(self.settings.labels_topic) and p in labels
            if owned.labels_assigned:
                assignment.append(
                    TopicPartition(self.settings.labels_topic, p, owned.state.next_offsets[LABELS])
                )
        consumer.assign(assignment)
        self.metrics.assigned.set(len(self.owned))
        self.health.set_ready(True)
        self.log.info("partitions assigned", extra=fields(partitions=sorted(features)))

    def _restore(self, partition: int) -> Owned:
        started = time.monotonic()

        def on_bad(path: Any, why: str) -> None:
            self.metrics.checkpoint_failures.labels(reason="corrupt").inc()
            self.log.error("skipping unusable checkpoint", extra=fields(path=str(path), reason=why))

        state = load_state(self.settings, partition, on_bad, self._model_factory, self._model_registry)
        owned = Owned(state, fetched=list(state.next_offsets))
        self.log.info(
            "partition restored" if state.consumed != [0, 0] else "partition starts fresh",
            extra=fields(
                partition=partition,
                next_offsets=state.next_offsets,
                seconds=round(time.monotonic() - started, 4),
            ),
        )
        self._set_partition_gauges(partition, owned)
        return owned

    def _on_revoke(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        self.metrics.rebalances.labels(event="revoke").inc()
        revoked = sorted(
            {tp.partition for tp in partitions if tp.topic == self.settings.features_topic} & set(self.owned)
        )
        try:
            self._checkpoint(revoked, force=False)
        finally:
            self._drop(revoked)
            self.log.info("partitions revoked", extra=fields(partitions=revoked))

    def _on_lost(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        self.metrics.rebalances.labels(event="lost").inc()
        lost = sorted({tp.partition for tp in partitions} & set(self.owned))
        self._drop(lost)
        self.log.warning("partitions lost; nothing written", extra=fields(partitions=lost))

    def _drop(self, partitions: list[int]) -> None:
        for p in partitions:
            self.owned.pop(p, None)
            self.metrics.forget_partition(p, self.topics)
        self.metrics.assigned.set(len(self.owned))

    # -- consuming and processing ---------------------------------------------------------------------

    def _ingest(self, messages: list[Message]) -> None:
        """Decode fetched records and queue them for the merge, per partition and topic.

        The batch is grouped by partition and topic first (a consumer's batch holds long runs of one
        partition), so that each group is converted and decoded in one pass.
        """
        groups: dict[tuple[int, str], list[Message]] = {}
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
            owned = self.owned.get(p)
            if owned is None:
                continue
            rank = FEATURES if topic == self.settings.features_topic else LABELS
            records = _unseen(_records(group), owned.fetched[rank])
            if not records:
                continue
            owned.fetched[rank] = records[-1].offset + 1
            owned.merger.push(rank, owned.state.decode(rank, records))
            self.metrics.records.labels(topic=topic, partition=str(p)).inc(len(records))

    def _on_message_error(self, error: KafkaError) -> None:
        if error.code() == KafkaError._PARTITION_EOF:
            return
        if error.fatal():
            raise KafkaException(error)
        self.log.warning("consume error", extra=fields(error=str(error)))

    def _topic_done(self, rank: int, partition: int, owned: Owned) -> bool:
        """No more records of that topic to wait for: not consumed, or read to its end.

        The end is the high watermark of the last fetch response. Some brokers (Tansu) send none for
        an empty partition; then the partition counts as done only if the broker lists it as holding
        no records at all (low == high), which its imprecise ListOffsets still answers correctly.
        """
        if rank == LABELS and not owned.labels_assigned:
            return True  # no labels topic, or this member did not get its partition (logged at assign)
        assert self.consumer is not None
        tp = TopicPartition(self.topics[rank], partition)
        _, high = self.consumer.get_watermark_offsets(tp, cached=True)
        if high >= 0:
            return owned.fetched[rank] >= high
        return self._listed_empty(tp, owned.fetched[rank])

    def _listed_empty(self, tp: TopicPartition, fetched: int) -> bool:
        """Whether the broker lists the partition as empty up to ``fetched`` (asked at most once a second)."""
        assert self.consumer is not None
        key = (tp.topic, tp.partition)
        now = time.monotonic()
        cached = self._listed.get(key)
        if cached is None or now - cached[0] > _LIST_INTERVAL_S:
            try:
                low, high = self.consumer.get_watermark_offsets(tp, timeout=1.0, cached=False)
            except KafkaException:
                low, high = -1, -1
            cached = self._listed[key] = (now, low, high)
        _, low, high = cached
        return 0 <= low == high <= fetched

    def _process(self, partition: int, owned: Owned) -> None:
        merger = owned.merger
        if not (merger.pending(FEATURES) or merger.pending(LABELS)):
            return
        labels_done = merger.pending(LABELS) == 0 and self._topic_done(LABELS, partition, owned)
        features_done = merger.pending(FEATURES) == 0 and self._topic_done(FEATURES, partition, owned)
        entries = merger.pop_ready(labels_done=labels_done, features_done=features_done)
        if not entries:
            return
        if owned.poison:
            entries = [_defuse(entry, owned.poison) for entry in entries]
        if owned.careful_until is None:
            self._run(partition, owned, entries)
            return
        for entry in entries:  # after a model failure: one record per call, to find the one that fails
            if not self._run(partition, owned, [entry]):
                return
            if all(n >= end for n, end in zip(owned.state.next_offsets, owned.careful_until, strict=True)):
                owned.careful_until = None

    def _run(self, partition: int, owned: Owned, entries: list[Entry]) -> bool:
        """Process entries and publish the results; on a model failure recover and return False."""
        try:
            result = owned.state.process(entries, time.time())
        except Exception:
            self._recover(partition, owned, entries)
            return False
        owned.since_checkpoint += len(entries)
        self._emit(partition, result)
        return True

    def _recover(self, partition: int, owned: Owned, entries: list[Entry]) -> None:
        """The model raised: its state may be half-updated, so restore the last checkpoint and replay.

        The replay goes one record at a time up to the end of the failed run; the record whose call
        fails alone is dead-lettered (``model_error``) from then on. Input is never the reason the
        worker stops, and the result is the same as if that record had been invalid from the start.
        """
        _, rank, offset, _ = entries[0]
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
        assert self.consumer is not None
        if owned.paused:
            self.consumer.resume([TopicPartition(self.topics[r], partition) for r in owned.paused])
        restored = self._restore(partition)
        restored.poison, restored.careful_until = owned.poison, careful_until
        restored.labels_assigned = owned.labels_assigned
        self.owned[partition] = restored
        for r, topic in enumerate(self.topics[: 2 if restored.labels_assigned else 1]):
            self.consumer.seek(TopicPartition(topic, partition, restored.state.next_offsets[r]))

    def _backpressure(self, partition: int, owned: Owned) -> None:
        """Pause a topic partition whose records pile up waiting for the other topic; resume at half.

        After processing at most one queue of a partition is non-empty (the merge drains until one
        side is exhausted), so the topic being waited for is never paused and this cannot deadlock.
        """
        assert self.consumer is not None
        for rank, topic in enumerate(self.topics):
            queued = owned.merger.pending(rank)
            if rank not in owned.paused and queued > _MAX_QUEUED:
                self.consumer.pause([TopicPartition(topic, partition)])
                owned.paused.add(rank)
            elif rank in owned.paused and queued <= _MAX_QUEUED // 2:
                self.consumer.resume([TopicPartition(topic, partition)])
                owned.paused.discard(rank)

    def _emit(self, partition: int, result: ProcessResult) -> None:
        producer = self.producer
        assert producer is not None
        topic = self.settings.predictions_topic
        owned = self.owned[partition]
        delivered = _RunDelivery([out.ts for out in result.predictions], self._latencies.append, self.log)
        produce = producer.produce
        for out in result.predictions:
            try:  # inline, as this runs once per prediction; _produce waits out a full queue
                produce(topic, out.value, out.key, on_delivery=delivered)
            except BufferError:
                _produce(producer, topic, out.key, out.value, None, delivered)
        if result.predictions:
            owned.in_flight.append(delivered)
            owned.produced_runs += 1
        if result.dead_letters:
            dead = _RunDelivery([out.ts for out, _, _ in result.dead_letters], None, self.log, "dead letter")
            for out, source_topic, reason in result.dead_letters:
                _produce(producer, self.settings.dead_letter_topic, out.key, out.value, out.headers, dead)
                self.metrics.invalid.labels(topic=source_topic, reason=reason).inc()
            owned.in_flight.append(dead)
            owned.produced_runs += 1
        p = str(partition)
        if result.predictions:
            self.metrics.predictions.labels(partition=p).inc(len(result.predictions))
        if result.trained:
            self.metrics.trained.labels(partition=p).inc(result.trained)
        for (side, reason), n in result.expired.items():
            self.metrics.join_expired.labels(partition=p, side=side, reason=reason).inc(n)

    # -- checkpoints ----------------------------------------------------------------------------------

    def _maybe_checkpoint(self) -> None:
        """Checkpoint due partitions without stopping the loop. The steps, in order:

        1. Snapshot at most one due partition per turn, the longest-waiting first: its state as bytes,
           the offsets it reflects, and the number of runs of outputs produced before it. (Partitions
           assigned together fall due together; one per turn keeps each turn's pause to one snapshot.)
        2. Write a snapshot only once every run produced before it has been acknowledged (delivery
           callbacks, served by ``poll``), so a checkpoint never covers an output that could still be
           lost. Records go on flowing meanwhile; nothing waits on ``flush()``.
        3. Commit the written offsets to Kafka, without waiting (informational; restore trusts the file).

        Revoke and shutdown take the synchronous path, :meth:`_checkpoint`.
        """
        now = time.monotonic()
        due = [
            p
            for p, o in self.owned.items()
            if o.snapshot is None
            and (
                o.since_checkpoint >= self.settings.checkpoint_records
                or (o.since_checkpoint and now - o.last_checkpoint >= self.settings.checkpoint_seconds)
            )
        ]
        if due:
            p = min(due, key=lambda p: self.owned[p].last_checkpoint)
            self.owned[p].snapshot = self._take_snapshot(self.owned[p])
        offsets: list[TopicPartition] = []
        for p, owned in self.owned.items():
            acked = owned.advance_acks()  # every turn: acknowledged runs must not pile up in memory
            snapshot = owned.snapshot
            if snapshot is not None and acked >= snapshot.runs:
                owned.snapshot = None
                if self._write(p, owned, snapshot):
                    offsets += self._offsets(p, snapshot.next_offsets)
        self._commit(offsets, wait=False)

    def _checkpoint(self, partitions: list[int], force: bool) -> None:
        """Flush predictions, write the checkpoints durably, then commit the same offsets (waiting).

        Partitions with nothing new since their last checkpoint are skipped unless ``force`` and they
        have never been written (so a restored-but-idle partition does not rewrite its file). A
        snapshot still waiting for acknowledgements is superseded by the current state.
        """
        todo = [
            p
            for p in partitions
            if p in self.owned
            and (self.owned[p].since_checkpoint or self.owned[p].snapshot is not None or force)
        ]
        if not todo:
            return
        assert self.producer is not None
        left = self.producer.flush(_FLUSH_TIMEOUT_S)
        if left:
            self.metrics.checkpoint_failures.labels(reason="flush_timeout").inc()
            self.log.error("predictions not delivered; checkpoint postponed", extra=fields(undelivered=left))
            return
        offsets = []
        for p in todo:
            owned = self.owned[p]
            pending, owned.snapshot = owned.snapshot, None
            if (
                not owned.since_checkpoint
                and pending is None
                and checkpoint.checkpoint_path(self.settings.checkpoint_dir, p).exists()
            ):
                continue
            snapshot = self._take_snapshot(owned)
            if pending is not None:  # its records are in this one too; a failed write retries them all
                snapshot = dataclasses.replace(snapshot, records=snapshot.records + pending.records)
            if self._write(p, owned, snapshot):
                offsets += self._offsets(p, snapshot.next_offsets)
        self._commit(offsets, wait=True)

    def _take_snapshot(self, owned: Owned) -> Snapshot:
        """The partition's state now; it counts as checkpointed for scheduling from here on."""
        started = time.perf_counter()
        blob = owned.state.to_bytes()
        snapshot = Snapshot(
            blob,
            (owned.state.next_offsets[FEATURES], owned.state.next_offsets[LABELS]),
            owned.produced_runs,
            owned.since_checkpoint,
            time.perf_counter() - started,
        )
        owned.since_checkpoint = 0
        owned.last_checkpoint = time.monotonic()
        return snapshot

    def _write(self, partition: int, owned: Owned, snapshot: Snapshot) -> bool:
        started = time.perf_counter()
        try:
            checkpoint.write_checkpoint(self.settings.checkpoint_dir, partition, snapshot.blob)
        except OSError as exc:
            self.metrics.checkpoint_failures.labels(reason="write").inc()
            self.log.error("checkpoint write failed", extra=fields(partition=partition, error=str(exc)))
            owned.since_checkpoint += snapshot.records  # due again: the next attempt writes them
            return False
        self.metrics.checkpoint_seconds.observe(snapshot.seconds + time.perf_counter() - started)
        self.metrics.last_checkpoint.labels(partition=str(partition)).set(time.time())
        self.log.debug(
            "checkpoint written", extra=fields(partition=partition, next_offsets=list(snapshot.next_offsets))
        )
        return True

    def _offsets(self, partition: int, next_offsets: tuple[int, int]) -> list[TopicPartition]:
        offsets = [TopicPartition(self.settings.features_topic, partition, next_offsets[FEATURES])]
        if self.settings.labels_topic:
            offsets.append(TopicPartition(self.settings.labels_topic, partition, next_offsets[LABELS]))
        return offsets

    def _commit(self, offsets: list[TopicPartition], wait: bool) -> None:
        if not offsets or self.consumer is None:
            return
        try:
            results = self.consumer.commit(offsets=offsets, asynchronous=not wait)
        except KafkaException as exc:
            self.log.warning(
                "offset commit failed (the checkpoint stays authoritative)", extra=fields(error=str(exc))
            )
            return
        for tp in results or []:
            if tp.error is not None:
                self.log.warning("offset commit failed", extra=fields(topic=tp.topic, partition=tp.partition))

    # -- gauges ---------------------------------------------------------------------------------------

    def _update_gauges(self) -> None:
        assert self.consumer is not None
        for p, owned in self.owned.items():
            self._set_partition_gauges(p, owned)
            for rank, topic in enumerate(self.topics):
                _, high = self.consumer.get_watermark_offsets(TopicPartition(topic, p), cached=True)
                if high >= 0:
                    behind = high - owned.state.next_offsets[rank]
                    self.metrics.lag.labels(topic=topic, partition=str(p)).set(max(behind, 0))

    def _set_partition_gauges(self, partition: int, owned: Owned) -> None:
        m, state, p = self.metrics, owned.state, str(partition)
        model = state.model
        m.tree_nodes.labels(partition=p).set(model.n_nodes)
        m.tree_leaves.labels(partition=p).set(model.n_leaves)
        m.tree_depth.labels(partition=p).set(model.depth)
        m.model_bytes.labels(partition=p).set(model.nbytes)
        m.model_version.labels(partition=p).set(model.version)
        m.report_model(p, getattr(model, "n_trees", 1), getattr(model, "n_drifts", 0))
        m.prequential_error.labels(partition=p, window="cumulative").set(state.prequential.error)
        m.prequential_error.labels(partition=p, window="recent").set(state.prequential.recent_error)
        m.join_pending.labels(partition=p, side="features").set(len(state.join.features))
        m.join_pending.labels(partition=p, side="labels").set(len(state.join.labels))


def _tune_gc() -> None:
    """Make Python's cyclic garbage collector cheap for the processing loop.

    Each record allocates a few dozen short-lived containers (decoded JSON, tuples, output dicts) and
    almost none of them form reference cycles, so the default first-generation threshold (700
    allocations) runs a collection every few records. Objects alive at start-up (modules, settings)
    are moved out of the collector's reach with ``gc.freeze`` and collections run less often
    (BENCHMARKS.md section 6 has the measured effect). Cycles are still collected, in larger batches.
    """
    gc.freeze()
    gc.set_threshold(_GC_THRESHOLD, *gc.get_threshold()[1:])


def _records(messages: list[Message]) -> list[Record]:
    """The messages as the core's records, with the timestamp in seconds (0.0 when there is none)."""
    new = tuple.__new__  # Record(...) without the NamedTuple's Python-level __new__ (once per record)
    return [
        new(Record, (m.offset(), millis / 1000.0 if kind else 0.0, m.key(), m.value()))
        for m in messages
        for kind, millis in (m.timestamp(),)  # binds the pair; compiled as a plain assignment
    ]


def _unseen(records: list[Record], fetched: int) -> list[Record]:
    """The records of one topic partition at or after offset ``fetched``, each offset once.

    A fetch from before a seek may still deliver older records; they are dropped here, as is anything
    out of order. The usual batch, increasing from ``fetched`` on, is checked in one C-speed pass.
    """
    offsets = [r.offset for r in records]
    if offsets and offsets[0] >= fetched and all(map(operator.lt, offsets, offsets[1:])):
        return records
    kept = []
    for record in records:
        if record.offset >= fetched:
            kept.append(record)
            fetched = record.offset + 1
    return kept


def _defuse(entry: Entry, poison: set[tuple[int, int]]) -> Entry:
    """The entry, or the same record marked invalid (``model_error``) if the model failed on it."""
    ts, rank, offset, (record, _) = entry
    if (rank, offset) in poison:
        return ts, rank, offset, (record, Invalid("model_error"))
    return entry


def _produce(
    producer: Producer,
    topic: str,
    key: bytes | None,
    value: bytes,
    headers: list[tuple[str, bytes]] | None,
    callback: Callable[[KafkaError | None, Message], None],
) -> None:
    while True:
        try:
            producer.produce(topic, value=value, key=key, headers=headers, on_delivery=callback)
            return
        except BufferError:
            producer.poll(0.05)  # the local queue is full: serve deliveries, then retry


class _RunDelivery:
    """The delivery callback of one run's outputs: counts the acknowledgements and, when the last one
    arrives, reports every output's latency (its record's event time to that moment) if asked to.

    One shared callable per run rather than a closure per record keeps the per-output cost to a
    counter decrement. The outputs of a run are produced together, so their acknowledgements arrive
    together too; timing them all by the last one errs, if at all, on the slow side. A failed delivery
    is logged and counts as done, as it would after ``flush()``.
    """

    __slots__ = ("event_ts", "left", "log", "report", "what")

    def __init__(
        self,
        event_ts: list[float],
        report: Callable[[tuple[float, list[float]]], None] | None,
        log: logging.Logger,
        what: str = "prediction",
    ) -> None:
        self.event_ts, self.left, self.report = event_ts, len(event_ts), report
        self.log, self.what = log, what

    def __call__(self, error: KafkaError | None, _msg: Message) -> None:
        if error is not None:
            self.log.error(f"{self.what} not delivered", extra=fields(error=str(error)))
        self.left -= 1
        if self.left == 0 and self.report is not None:
            self.report((time.time(), self.event_ts))
            self.event_ts = []
