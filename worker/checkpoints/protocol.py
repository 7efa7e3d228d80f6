"""The checkpoint protocol: when a partition's state may be written, and in which order things happen.

A checkpoint says "every record before these offsets is in the model, and every output of those
records is in its topic". Restore trusts it, so each step below must be finished before the next one
starts (:meth:`Checkpointer.maybe_checkpoint` runs them across turns of the loop, without blocking it;
:meth:`Checkpointer.checkpoint_now` runs them at once, on revoke and at shutdown):

1. **Snapshot**: the partition's state as bytes, the offsets it reflects and the number of runs of
   outputs produced before it. Taken on the loop's thread, between two runs, so it is consistent.
2. **Outputs acknowledged**: the snapshot waits until every run produced before it has been
   acknowledged by the broker (delivery reports, served by ``poll``). A partition whose latch records
   an output lost for good writes no snapshot at all: a checkpoint never covers a lost output.
3. **File durable**: the snapshot is written by a background thread (temporary file, fsync, rename,
   directory fsync: :meth:`worker.checkpoints.file_store.CheckpointStore.write`), so a slow disk does
   not stall the loop, the health beat or the metrics. One write at a time; a partition with a write
   in flight takes no new snapshot, and revoke, shutdown and rewinds wait for its write first.
3b. **State topic** (when one is configured, :mod:`worker.state_topic.mirror`): once the file is durable,
   the same bytes are handed to the state topic on the loop's thread; the loop goes on processing
   while they travel and checks each turn whether every record was acknowledged, then confirms the
   write (no newer owner claimed the partition). A write that fails (:class:`StateWriteError` and the
   like) commits nothing and makes the partition due again, as a failed file write does; a write
   fenced by a newer owner (:class:`StateTopicFenced`) puts the partition in :attr:`Checkpointer.fenced`
   for the shell to give it up.
3c. **Backoff** after a failed write (file or state topic): the partition is due again, but its next
   attempt waits for :class:`worker.checkpoints.backoff.Backoff` (0.5 s, doubling to 5 s, reset by a
   checkpoint that succeeds), so an outage that fails every write at once neither rewrites the file
   nor logs an error on every turn of the loop. Revoke and shutdown
   (:meth:`Checkpointer.checkpoint_now`) do not wait for it.
4. **Offsets committed** to Kafka, only once the file is durable (and the state topic's copy, when
   there is one) (informational: restore trusts the checkpoint, but monitoring reads the group's
   offsets).

Example (a partition with nothing new is not written again):

>>> from worker.checkpoints.file_store import CheckpointStore, Owner
>>> from worker.kafka.clients import Clients
>>> from worker.config import load_settings
>>> import logging, tempfile
>>> settings = load_settings({"checkpoint_dir": tempfile.mkdtemp()}, env={})
>>> store = CheckpointStore(settings.checkpoint_dir, Owner.of(settings))
>>> cp = Checkpointer(settings, Clients(), store, WorkerMetrics(), logging.getLogger("doc"))
>>> cp.maybe_checkpoint({})
>>> cp.close()
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass

from confluent_kafka import KafkaException, Producer, TopicPartition

from worker.checkpoints.file_store import CheckpointStore, checkpoint_path
from worker.checkpoints.schedule import Checkpointable
from worker.checkpoints.snapshot import Snapshot
from worker.config import WorkerSettings
from worker.core.merge import FEATURES, LABELS
from worker.kafka.clients import Clients
from worker.logs import fields
from worker.metrics import Health, WorkerMetrics
from worker.state_topic.errors import StateTopicError, StateTopicFenced, StateTopicLost
from worker.state_topic.mirror import Mirroring, StateMirror

FLUSH_TIMEOUT_S = 10.0


@dataclass(frozen=True)
class Write:
    """A snapshot being written by the background thread (step 3)."""

    owned: Checkpointable
    snapshot: Snapshot
    future: Future[float]  # the seconds the write took


@dataclass(frozen=True)
class _Mirror:
    """A durable snapshot travelling to the state topic (step 3b)."""

    owned: Checkpointable
    snapshot: Snapshot
    mirroring: Mirroring


class Checkpointer:
    """Runs the checkpoint protocol for the partitions of one worker."""

    def __init__(
        self,
        settings: WorkerSettings,
        clients: Clients,
        store: CheckpointStore,
        metrics: WorkerMetrics,
        log: logging.Logger,
        health: Health | None = None,
        mirror: StateMirror | None = None,
    ) -> None:
        self.settings, self.clients, self.store, self.metrics, self.log = (
            settings,
            clients,
            store,
            metrics,
            log,
        )
        self.health = health or Health()  # told each partition's checkpoint failures in a row
        self.mirror = mirror  # the state topic, when one is configured (opened by the worker's run)
        self._writer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="checkpoint-writer")
        self._writing: dict[int, Write] = {}
        self._mirroring: dict[int, _Mirror] = {}
        self.fenced: dict[int, str] = {}  # partitions a newer owner claimed in the state topic: why
        self.clock: Callable[[], float] = time.monotonic  # the schedule's and backoff's time (tests set it)

    def take_fenced(self, partitions: list[int] | None = None) -> dict[int, str]:
        """The partitions found fenced (another worker's now, with why), forgotten here: all of them,
        or those of ``partitions`` (revoked ones, which are given up already)."""
        chosen = list(self.fenced) if partitions is None else [p for p in partitions if p in self.fenced]
        return {p: self.fenced.pop(p) for p in chosen}

    def close(self) -> None:
        """Wait for the write in flight, if any (its offsets are not committed any more)."""
        self._writer.shutdown(wait=True)

    # -- the output producer --------------------------------------------------------------------------

    def started(self, producer: Producer) -> Producer:
        """A new output producer, ready for outputs (the exactly-once protocol opens a transaction)."""
        return producer

    def renew_producer(self, make: Callable[[], Producer]) -> None:
        """Outputs were lost for good: replace the producer before the partitions that lost one rewind.

        A producer whose messages timed out may stay unable to deliver (an idempotent producer's
        sequence state after in-flight requests timed out: some brokers then answer every request
        with PRODUCER_FENCED), so it is replaced by a new one. Its outputs still queued or in flight
        are purged first: their delivery reports fail, latching their partitions, which rewind too.
        """
        old = self.clients.producer
        if old is not None:
            old.purge()
            old.flush(0)  # serves the purged outputs' delivery reports
        self.clients.producer = make()

    def as_fenced(self, exc: BaseException) -> Exception | None:
        """The error that stopped the loop, as the protocol's own error when it means that this worker
        was fenced (only a transactional producer can be)."""
        return None

    def committed_offsets(self, partition: int) -> list[int] | None:
        """The next offsets below which the partition's outputs are known to be committed (per topic
        rank), for a restore to process those records again without producing: never known here, as
        at_least_once produces the outputs of replayed records again."""
        return None

    # -- while running: the steps across turns of the loop ---------------------------------------------

    def _due(self, owned: Checkpointable, now: float) -> bool:
        """Whether a partition's checkpoint is due at ``now``: enough records or enough time since its
        last one, and no failed attempt's pause lasting (step 3c)."""
        return owned.schedule.due(now, self.settings.checkpoint_records, self.settings.checkpoint_seconds)

    def _mirrored(self) -> bool:
        """Whether checkpoints are copied to the state topic now (one is configured, and not lost)."""
        return self.mirror is not None and self.mirror.usable

    def maybe_checkpoint(self, owned: Mapping[int, Checkpointable]) -> None:
        """Advance every partition's checkpoint by the steps that are ready, without waiting."""
        offsets = self._finished_writes()  # step 3 done: step 3b, or 4, for those partitions
        offsets += self._finished_mirrors()  # step 3b done: step 4
        now = self.clock()
        due = [
            p
            for p, o in owned.items()
            if o.schedule.pending is None
            and p not in self._writing
            and p not in self._mirroring
            and o.deliveries.failed is None
            and self._due(o, now)
        ]
        if due:  # step 1, at most one partition per turn (those assigned together fall due together)
            p = min(due, key=lambda p: owned[p].schedule.last)
            owned[p].schedule.hold(self.take_snapshot(owned[p]))
        for p, o in owned.items():
            acked = o.deliveries.advance()  # every turn: acknowledged runs must not pile up in memory
            snapshot = o.schedule.pending
            if snapshot is None or acked < snapshot.runs or p in self._writing or p in self._mirroring:
                continue
            o.schedule.release()
            if o.deliveries.failed is not None:  # step 2 failed: never written; the partition rewinds
                continue
            future = self._writer.submit(self._write_file, p, snapshot.blob)  # step 3
            self._writing[p] = Write(o, snapshot, future)
        self._commit(offsets, wait=False)  # step 4

    def _finished_writes(self) -> list[TopicPartition]:
        offsets: list[TopicPartition] = []
        for p, write in list(self._writing.items()):
            if write.future.done():
                del self._writing[p]
                if self._written(p, write):
                    offsets += self._after_file(p, write.owned, write.snapshot, wait=False)
        return offsets

    def _finished_mirrors(self) -> list[TopicPartition]:
        """Step 3b: confirm the state-topic writes whose records are all acknowledged."""
        if not self._mirroring:
            return []
        assert self.mirror is not None
        self.mirror.poll()
        offsets: list[TopicPartition] = []
        for p, m in list(self._mirroring.items()):
            if m.mirroring.pending.acknowledged:
                del self._mirroring[p]
                offsets += self._finish_mirror(p, m)
        return offsets

    def settle(self, partitions: list[int], commit: bool = True) -> None:
        """Wait for the writes in flight of these partitions; commit the offsets of those that
        succeeded unless ``commit`` is False (a lost partition's offsets are another member's now)."""
        offsets = self._wait(partitions)
        if commit:
            self._commit(offsets, wait=False)

    def _wait(self, partitions: list[int]) -> list[TopicPartition]:
        offsets: list[TopicPartition] = []
        for p in partitions:
            write = self._writing.pop(p, None)
            if write is not None:
                write.future.exception()  # waits
                if self._written(p, write):
                    offsets += self._after_file(p, write.owned, write.snapshot, wait=True)
            mirror = self._mirroring.pop(p, None)
            if mirror is not None:
                offsets += self._finish_mirror(p, mirror)
        return offsets

    # -- revoke and shutdown: the steps at once ---------------------------------------------------------

    def checkpoint_now(self, owned: Mapping[int, Checkpointable], partitions: list[int], force: bool) -> bool:
        """Write the partitions' current state durably, then commit the same offsets (waiting).

        Partitions with nothing new since their last checkpoint are skipped unless ``force`` and they
        have never been written (so a restored-but-idle partition does not rewrite its file). A
        snapshot still waiting for acknowledgements is superseded by the current state. Returns False
        when a partition that needed a checkpoint did not get one (the producer could not deliver
        everything, or the write failed): its records since the last checkpoint will be replayed.
        """
        offsets = self._wait(partitions)
        todo = [
            p
            for p in partitions
            if p in owned and (owned[p].schedule.records or owned[p].schedule.pending or force)
        ]
        if not todo:
            self._commit(offsets, wait=True)
            return True
        producer = self.clients.producer
        assert producer is not None
        left = producer.flush(FLUSH_TIMEOUT_S)  # step 2 for every output produced so far
        if left:
            self.metrics.checkpoint_failures.labels(reason="flush_timeout").inc()
            self.log.error("outputs not delivered; checkpoint postponed", extra=fields(undelivered=left))
            self._commit(offsets, wait=True)
            return False
        complete = True
        for p in todo:
            o = owned[p]
            pending = o.schedule.release()
            if o.deliveries.failed is not None:
                self.metrics.checkpoint_failures.labels(reason="delivery").inc()
                self.log.error(
                    "an output was not delivered; no checkpoint",
                    extra=fields(partition=p, error=o.deliveries.failed),
                )
                complete = False
                continue
            if (
                not o.schedule.records
                and pending is None
                and checkpoint_path(self.store.directory, p).exists()
            ):
                continue
            snapshot = self.take_snapshot(o)  # step 1
            if pending is not None:  # its records are in this one too; a failed write retries them all
                snapshot = dataclasses.replace(snapshot, records=snapshot.records + pending.records)
            written = self.write(p, o, snapshot)  # step 3
            done = self._after_file(p, o, snapshot, wait=True) if written else []  # step 3b
            if done:
                offsets += done
            else:
                complete = False
        self._commit(offsets, wait=True)  # step 4
        return complete

    # -- the steps --------------------------------------------------------------------------------------

    def take_snapshot(self, owned: Checkpointable) -> Snapshot:
        """Step 1: the partition's state now; it counts as checkpointed for scheduling from here on."""
        started = time.perf_counter()
        blob = owned.state.to_bytes()
        seconds = time.perf_counter() - started
        records = owned.schedule.taken(self.clock())
        offsets = (owned.state.next_offsets[FEATURES], owned.state.next_offsets[LABELS])
        return Snapshot(blob, offsets, owned.deliveries.produced, records, seconds)

    def write(self, partition: int, owned: Checkpointable, snapshot: Snapshot) -> bool:
        """Step 3 on the calling thread; True once the file is durable."""
        future: Future[float] = Future()
        try:
            future.set_result(self._write_file(partition, snapshot.blob))
        except OSError as exc:
            future.set_exception(exc)
        return self._written(partition, Write(owned, snapshot, future))

    def _write_file(self, partition: int, blob: bytes) -> float:
        started = time.perf_counter()
        self.store.write(partition, blob)
        return time.perf_counter() - started

    def _written(self, partition: int, write: Write) -> bool:
        """Account for a finished write: metrics and log on success; on failure, due again."""
        error = write.future.exception()
        if error is not None and not isinstance(error, OSError):
            raise error  # a bug, not the disk: the loop fails as it would on the loop's thread
        if error is not None:
            self.metrics.checkpoint_failures.labels(reason="write").inc()
            self.failed(partition, write.owned, write.snapshot, "checkpoint write failed", str(error))
            return False
        self.metrics.checkpoint_seconds.observe(write.snapshot.seconds + write.future.result())
        self.metrics.last_checkpoint.labels(partition=str(partition)).set(time.time())
        self.log.debug(
            "checkpoint written",
            extra=fields(partition=partition, next_offsets=list(write.snapshot.next_offsets)),
        )
        return True

    def _after_file(
        self, partition: int, owned: Checkpointable, snapshot: Snapshot, wait: bool
    ) -> list[TopicPartition]:
        """Step 3b after a durable file: the offsets to commit now (none while the state topic's copy
        travels, or when it failed)."""
        if self.mirror is None or not self._mirrored():
            return self.succeeded(partition, owned, snapshot)
        try:
            mirror = _Mirror(owned, snapshot, self.mirror.start(partition, snapshot.blob))
        except StateTopicError as exc:
            self._mirror_failed(partition, owned, snapshot, exc)
            return []
        if wait:
            return self._finish_mirror(partition, mirror)
        self._mirroring[partition] = mirror
        return []

    def _finish_mirror(self, partition: int, mirror: _Mirror) -> list[TopicPartition]:
        assert self.mirror is not None
        try:
            self.mirror.finish(mirror.mirroring)
        except StateTopicError as exc:
            self._mirror_failed(partition, mirror.owned, mirror.snapshot, exc)
            return []
        return self.succeeded(partition, mirror.owned, mirror.snapshot)

    def _mirror_failed(
        self, partition: int, owned: Checkpointable, snapshot: Snapshot, error: StateTopicError
    ) -> None:
        """A state-topic write failed: nothing is committed. Fenced: the partition is another worker's
        now. Otherwise it is due again, like a failed file write (its outputs are all delivered and
        its file is durable, so there is nothing to rewind: the next attempt writes a newer state)."""
        if isinstance(error, StateTopicFenced):
            self.metrics.checkpoint_failures.labels(reason="fenced").inc()
            self.fenced[partition] = str(error)
            return
        lost = isinstance(error, StateTopicLost)
        self.metrics.checkpoint_failures.labels(reason="state_topic_lost" if lost else "state_topic").inc()
        message = "checkpoint not written to the state topic; offsets not committed"
        self.failed(partition, owned, snapshot, message, str(error))

    def failed(
        self, partition: int, owned: Checkpointable, snapshot: Snapshot, message: str, error: str
    ) -> None:
        """A checkpoint attempt failed: the partition is due again, once its backoff's pause is over
        (step 3c). Logged at the start of a streak of failures, then at most once a minute."""
        failure = owned.schedule.failed(snapshot.records, self.clock())  # due again: the next attempt
        self.health.checkpoint_failed(partition, failure.failures)
        if failure.log:
            self.log.error(
                message,
                extra=fields(
                    partition=partition, error=error, failures=failure.failures, retry_in_s=failure.delay
                ),
            )

    def succeeded(self, partition: int, owned: Checkpointable, snapshot: Snapshot) -> list[TopicPartition]:
        """A checkpoint is complete (file, and state topic when there is one): the backoff's streak ends;
        returns the offsets to commit."""
        failures = owned.schedule.succeeded()
        self.health.checkpoint_succeeded(partition)
        if failures:
            self.log.info("checkpoint written again", extra=fields(partition=partition, failures=failures))
        return self._offsets(partition, snapshot.next_offsets)

    def drop_mirror(self) -> None:
        """The state topic was lost (the worker is stopping): from here on checkpoints go to the files
        alone. The copies still travelling to it never count; their partitions are due again."""
        for mirror in self._mirroring.values():
            mirror.owned.schedule.returned(mirror.snapshot.records)
        self._mirroring.clear()

    def commit_restored(self, offsets: list[TopicPartition]) -> None:
        """Commit the restored checkpoints' offsets on assignment: a worker that died between a durable
        checkpoint and its commit left the group's offsets behind, and one restored at a topic's end
        commits nothing more until new records come (monitoring reads the group's offsets)."""
        self._commit(offsets, wait=False)

    def _offsets(self, partition: int, next_offsets: tuple[int, int]) -> list[TopicPartition]:
        offsets = [TopicPartition(self.settings.features_topic, partition, next_offsets[FEATURES])]
        if self.settings.labels_topic:
            offsets.append(TopicPartition(self.settings.labels_topic, partition, next_offsets[LABELS]))
        return offsets

    def _commit(self, offsets: list[TopicPartition], wait: bool) -> None:
        consumer = self.clients.consumer
        if not offsets or consumer is None:
            return
        try:
            results: list[TopicPartition] | None
            if wait:
                results = consumer.commit(offsets=offsets, asynchronous=False)
            else:
                results = consumer.commit(offsets=offsets, asynchronous=True)
        except KafkaException as exc:
            self.log.warning(
                "offset commit failed (the checkpoint stays authoritative)", extra=fields(error=str(exc))
            )
            return
        for tp in results or []:
            if tp.error is not None:
                self.log.warning("offset commit failed", extra=fields(topic=tp.topic, partition=tp.partition))
