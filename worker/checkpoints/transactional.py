"""The exactly-once commit strategy: each checkpoint of the worker is one Kafka transaction.

With ``processing_guarantee = exactly_once`` the output producer is transactional (one per worker
process, ``transactional.id`` from :func:`worker.kafka.clients.transactional_id`) and always has a
transaction open. Every prediction and dead letter goes into it. When a partition's checkpoint falls
due (``checkpoint_records`` / ``checkpoint_seconds``, as with at_least_once), every partition that
processed records since the last commit is checkpointed at once, between two runs:

1. **Snapshot** of each such partition (its state as bytes and the next offsets it reflects); with a
   state topic (:mod:`worker.state_topic.mirror`) each snapshot's state records are staged in the same
   transaction (:meth:`worker.state_topic.client.StateTopic.stage`), once the group has committed offsets
   for the partition (see below).
2. **Offsets into the transaction**: ``send_offsets_to_transaction`` with those next offsets and the
   consumer's group metadata (the broker refuses them from a member of an older group generation: a
   zombie cannot commit).
3. **Commit** (``commit_transaction``, which first waits for every output to be acknowledged), then the
   next transaction begins; staged states are confirmed (ownership check and cleanup).
4. **Files**: the snapshots are written to the checkpoint files by the background writer (after the
   commit, so a file is never ahead of the committed offsets).

A crash between 3 and 4 leaves a file behind the committed offsets: on restore, the records between are
processed again without producing anything (their outputs are committed;
:attr:`worker.core.recovery.Recovery.replay_until`), which brings the model, byte for byte, to where it was.
A file ahead of the committed offsets would instead hold learning whose outputs were aborted, and
they would never be produced again; docs/reliability.md has the whole argument.

The state topic's copy must never be ahead either. Kafka hides an aborted transaction's state records
from the restoring reader (read_committed); a broker that does not filter them (the embedded test
broker) shows them, and a restore skips a state past the group's committed offsets
(:meth:`worker.kafka.partition_runtime.PartitionRuntime.assign`). That check needs committed offsets to
compare with, so a partition's state is staged only from the transaction after the first one that
commits its offsets: before, an aborted first transaction left a state the check could not tell from a
committed one, and its partition restarted past outputs that were never committed. (When the group has
no offsets for a partition, e.g. after Kafka expired an idle group's offsets, the topic's state is
trusted, as it must be on a broker that filters aborted records.)

Errors: an output not delivered for good, or an abortable error of the transaction, aborts it and
rewinds every partition of the worker to its last commit, through the same path as at_least_once's
lost outputs (:meth:`worker.kafka.loop.Worker.recover_deliveries`). A fatal error (another process
initialised the same ``transactional.id``, the broker fenced this producer) raises
:class:`TransactionFenced`: the worker stops without writing anything more (exit code 5).

Which errors stop the worker rather than abort and rewind: those
:func:`worker.state_topic.writer.is_fenced` names, the state topic's writer's rule too (a refused
``produce()`` of a producer fenced while the loop ran among them).

Example (needs a broker and a consumer in the group; see tests/worker/test_exactly_once_e2e.py)::

    >>> settings = load_settings({"processing_guarantee": "exactly_once"})            # doctest: +SKIP
    >>> cp = TransactionalCheckpointer(settings, clients, store, metrics, log, owned)  # doctest: +SKIP
    >>> clients.producer = cp.started(Producer(producer_config(settings)))            # doctest: +SKIP
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping

from confluent_kafka import KafkaError, KafkaException, Producer, TopicPartition

from worker.checkpoints.file_store import CheckpointStore, checkpoint_path
from worker.checkpoints.protocol import Checkpointer, Write
from worker.checkpoints.schedule import Checkpointable
from worker.checkpoints.snapshot import Snapshot
from worker.config import WorkerSettings
from worker.kafka.clients import Clients
from worker.logs import fields
from worker.metrics import Health, WorkerMetrics
from worker.state_topic.errors import StateTopicError, StateTopicFenced
from worker.state_topic.mirror import Mirroring, StateMirror
from worker.state_topic.writer import is_fenced

_CALL_TIMEOUT_S = 30.0  # one call of the transactional API (init, send offsets, commit, abort)
_RETRY_S = 90.0  # how long a call that failed with a retriable error is tried again


class TransactionError(RuntimeError):
    """A call of the transactional API failed for good (neither retriable within its time nor
    abortable): the worker stops, as on any other failure of its loop (exit code 1)."""


class TransactionFenced(TransactionError):
    """The output producer can no longer commit: another worker took its ``transactional.id`` over,
    or the broker fenced it. Nothing this worker produced since its last commit is committed."""


class TransactionalCheckpointer(Checkpointer):
    """The checkpoint protocol of exactly_once: outputs, input offsets and checkpoints of all the
    worker's partitions commit together in one transaction (see the module docstring).

    ``owned`` is the partition runtime's dict of owned partitions (the same object, kept up to date by
    the runtime): an abort latches all of them.
    """

    def __init__(
        self,
        settings: WorkerSettings,
        clients: Clients,
        store: CheckpointStore,
        metrics: WorkerMetrics,
        log: logging.Logger,
        owned: Mapping[int, Checkpointable],
        health: Health | None = None,
        mirror: StateMirror | None = None,
    ) -> None:
        super().__init__(settings, clients, store, metrics, log, health, mirror)
        self._owned = owned
        # the open transaction was begun after an abort that latched every owned partition, so it holds
        # no output of theirs: the rewinds that follow need no second abort
        self._just_aborted = False
        # partitions whose offsets the group is known to have committed: their states may be staged
        self._has_commit: set[int] = set()

    # -- the producer -----------------------------------------------------------------------------------

    def started(self, producer: Producer) -> Producer:
        """Register the transactional producer with the broker (fencing any older instance with the same
        ``transactional.id`` and aborting what it left open) and open the first transaction."""
        self._call(producer.init_transactions, _CALL_TIMEOUT_S)
        self._call(producer.begin_transaction)
        return producer

    def renew_producer(self, make: Callable[[], Producer]) -> None:
        """Abort the open transaction and begin the next; every owned partition rewinds to its last commit.

        The transactional producer stays: an abort clears what an undelivered output left behind.
        Every partition is latched, so the caller rewinds them all: those whose outputs were aborted,
        and those that had none (cheap, and one rule instead of two).
        """
        if not self._just_aborted:
            self._abort("an output was not delivered")
        self._just_aborted = False

    def _abort(self, why: str, staged: dict[int, Mirroring] | None = None) -> None:
        producer = self.clients.producer
        assert producer is not None
        for mirroring in (staged or {}).values():
            assert self.mirror is not None
            self.mirror.discard(mirroring)
        self.metrics.checkpoint_failures.labels(reason="transaction_aborted").inc()
        self.log.error(
            "transaction aborted; every partition rewinds to its last commit",
            extra=fields(reason=why, partitions=sorted(self._owned)),
        )
        self._call(producer.abort_transaction, _CALL_TIMEOUT_S)
        self._call(producer.begin_transaction)
        for o in self._owned.values():
            o.deliveries.fail(f"transaction aborted: {why}")
            o.schedule.release()
        self._just_aborted = True

    # -- while running --------------------------------------------------------------------------------

    def maybe_checkpoint(self, owned: Mapping[int, Checkpointable]) -> None:
        """Commit the transaction once some partition's checkpoint is due (files follow in the background)."""
        self._await_writes([p for p, write in self._writing.items() if write.future.done()])
        for o in owned.values():
            o.deliveries.advance()  # acknowledged runs must not pile up in memory
        if any(o.deliveries.failed is not None for o in owned.values()):
            return  # the transaction cannot commit: the loop aborts it and rewinds (renew_producer)
        now = self.clock()
        if any(self._due(o, now) for o in owned.values()):  # a failed file write waits out its pause
            self._commit_transaction(owned)

    def checkpoint_now(self, owned: Mapping[int, Checkpointable], partitions: list[int], force: bool) -> bool:
        """Commit the open transaction (every partition with records since the last commit, not only
        ``partitions``) and wait for the files of ``partitions``; with ``force``, a partition that never
        had a file gets one. False when the transaction was aborted instead: the records since the last
        commit are processed again (by this worker after a rewind, or by the partitions' next owner)."""
        committed = self._commit_transaction(owned)
        if committed and force:
            for p in partitions:
                if p in owned and not checkpoint_path(self.store.directory, p).exists():
                    self._submit(p, owned[p], self.take_snapshot(owned[p]))
        self._await_writes(partitions)
        return committed

    def settle(self, partitions: list[int], commit: bool = True) -> None:
        """Wait for the file writes of these partitions. Lost partitions (``commit`` False) may belong to
        another member already: the open transaction, which may hold their outputs, is aborted."""
        self._await_writes(partitions)
        if not commit and any(o.schedule.records for o in self._owned.values()):
            self._abort("partitions lost")

    # -- the steps --------------------------------------------------------------------------------------

    def _commit_transaction(self, owned: Mapping[int, Checkpointable]) -> bool:
        """Steps 1 to 4 for every partition with records since the last commit; False if aborted."""
        if any(o.deliveries.failed is not None for o in owned.values()):
            self.metrics.checkpoint_failures.labels(reason="delivery").inc()
            self._abort("an output was not delivered")
            return False
        dirty = [p for p, o in owned.items() if o.schedule.records]
        if not dirty:
            return True
        snapshots = {p: self.take_snapshot(owned[p]) for p in dirty}  # step 1
        offsets = [tp for p, s in snapshots.items() for tp in self._offsets(p, s.next_offsets)]
        producer, consumer = self.clients.producer, self.clients.consumer
        assert producer is not None and consumer is not None
        staged = self._stage(snapshots, producer)  # step 1b
        if any(p in self.fenced for p in snapshots):  # another worker's now: its outputs must not commit
            self._abort("a partition was claimed by another worker in the state topic", staged)
            return False
        try:
            self._call(  # step 2
                producer.send_offsets_to_transaction,
                offsets,
                consumer.consumer_group_metadata(),
                _CALL_TIMEOUT_S,
            )
            self._call(producer.commit_transaction, _CALL_TIMEOUT_S)  # step 3
        except _Abortable as exc:
            self._abort(str(exc), staged)
            return False
        self._just_aborted = False
        self._has_commit.update(snapshots)
        self._call(producer.begin_transaction)
        producer.poll(0)  # the delivery reports of the committed outputs and states
        self._confirm(staged)
        for p, snapshot in snapshots.items():  # step 4
            self._submit(p, owned[p], snapshot)
        return True

    def _stage(self, snapshots: dict[int, Snapshot], producer: Producer) -> dict[int, Mirroring]:
        """Step 1b, with a state topic: each snapshot's state records into the open transaction. A
        partition whose state cannot be staged commits without it (the topic's copy stays older: a
        restore from it processes the records since without producing their outputs again); one that
        another worker claimed is marked in :attr:`fenced`. A partition without committed offsets yet
        commits without it too (see the module docstring)."""
        staged: dict[int, Mirroring] = {}
        if self.mirror is None or not self._mirrored():
            return staged
        for p, snapshot in snapshots.items():
            if p not in self._has_commit:
                continue
            try:
                staged[p] = mirroring = self.mirror.stage(p, snapshot.blob, producer)
            except StateTopicFenced as exc:
                self.metrics.checkpoint_failures.labels(reason="fenced").inc()
                self.fenced[p] = str(exc)
                continue
            except StateTopicError as exc:
                self._state_not_written(p, str(exc))
                continue
            if mirroring.pending.delivery.errors:  # a record was refused: the state is incomplete
                self.mirror.discard(staged.pop(p))
                self._state_not_written(p, mirroring.pending.delivery.errors[0])
        return staged

    def _confirm(self, staged: dict[int, Mirroring]) -> None:
        """After the commit: each staged state's ownership check and cleanup (a newer owner's claim
        before it makes the partition another worker's: :attr:`fenced`)."""
        mirror = self.mirror
        assert mirror is not None or not staged
        for p, mirroring in staged.items():
            assert mirror is not None  # (states are staged only with a mirror: checked above)
            try:
                mirror.confirm(mirroring)
            except StateTopicFenced as exc:
                self.metrics.checkpoint_failures.labels(reason="fenced").inc()
                self.fenced[p] = str(exc)
            except StateTopicError as exc:
                self._state_not_written(p, str(exc))

    def _state_not_written(self, partition: int, error: str) -> None:
        self.metrics.checkpoint_failures.labels(reason="state_topic").inc()
        self.log.error(
            "checkpoint not written to the state topic (the topic's copy stays older)",
            extra=fields(partition=partition, error=error),
        )

    def _submit(self, partition: int, owned: Checkpointable, snapshot: Snapshot) -> None:
        """Hand a committed snapshot to the background writer, after the partition's previous write."""
        self._await_writes([partition])
        future = self._writer.submit(self._write_file, partition, snapshot.blob)
        self._writing[partition] = Write(owned, snapshot, future)

    def _await_writes(self, partitions: list[int]) -> None:
        """Wait for the partitions' file writes and account for them. A failed write makes the partition
        due again once its backoff's pause is over (its offsets are committed already; the next commit
        writes its file anew)."""
        for p in partitions:
            write = self._writing.pop(p, None)
            if write is not None:
                write.future.exception()  # waits
                if self._written(p, write):
                    self.succeeded(p, write.owned, write.snapshot)  # its offsets were committed before

    def commit_restored(self, offsets: list[TopicPartition]) -> None:
        """Nothing: the offsets are committed in transactions only. A restored checkpoint is at or
        behind the committed offsets (the file is written after the commit), so committing its offsets
        would move the group's offsets back below outputs that are committed already."""

    def committed_offsets(self, partition: int) -> list[int] | None:
        """The group's committed next offsets of the partition's topics (per topic rank): the outputs of
        the records below them are committed. None when the group has committed nothing for it. A
        partition the broker answers with an error for raises (as a failed request does): a restore
        that took "unknown" for "nothing" would produce committed outputs again."""
        consumer = self.clients.consumer
        assert consumer is not None
        topics = [self.settings.features_topic] + [t for t in [self.settings.labels_topic] if t]
        found = consumer.committed([TopicPartition(t, partition) for t in topics], _CALL_TIMEOUT_S)
        for tp in found:  # not knowing is not "nothing committed": stop rather than guess
            if tp.error is not None:
                raise KafkaException(tp.error)
        offsets = [max(tp.offset, 0) for tp in found] + [0] * (2 - len(found))
        if not any(offsets):
            return None
        self._has_commit.add(partition)
        return offsets

    def as_fenced(self, exc: BaseException) -> TransactionFenced | None:
        """The error as :class:`TransactionFenced` (logged) when it is a fatal one of the transactional
        producer: fenced by a newer instance or by the broker. It may come from any producer call
        (``produce``, ``poll``), not only from the transactional API."""
        if isinstance(exc, TransactionFenced):
            return exc
        if not isinstance(exc, KafkaException) or not isinstance(exc.args[0], KafkaError):
            return None
        error: KafkaError = exc.args[0]
        if not is_fenced(error):
            return None
        self.log.error(
            "the output producer was fenced (another worker uses its transactional.id, or the broker "
            "ended its session); stopping without committing anything more",
            extra=fields(error=error.str(), code=error.name()),
        )
        return TransactionFenced(f"the transactional producer was fenced: {error.str()}")

    def _call(self, method: Callable[..., object], *args: object) -> None:
        """Call a method of the transactional API: retry what may be retried; an abortable error raises
        :class:`_Abortable`, a fatal one :class:`TransactionFenced`, anything else (not retriable,
        or still failing after ``_RETRY_S``) :class:`TransactionError`."""
        deadline = time.monotonic() + _RETRY_S
        while True:
            try:
                method(*args)
                return
            except KafkaException as exc:
                error: KafkaError = exc.args[0]
                fenced = self.as_fenced(exc)
                if fenced is not None:
                    raise fenced from None
                if error.txn_requires_abort():
                    raise _Abortable(error.str()) from None
                if not error.retriable() or time.monotonic() > deadline:
                    raise TransactionError(f"a transaction call failed for good: {error.str()}") from None
                self.log.warning("transaction call failed; retrying", extra=fields(error=error.str()))


class _Abortable(Exception):
    """An error after which the transaction must be aborted and its records processed again."""
