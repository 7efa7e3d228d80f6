"""Partition states in a compacted Kafka topic: claim, restore, write durably.

Every checkpoint payload of an input partition
(:meth:`worker.core.partition_state.PartitionState.to_bytes`, any size) is also stored in the
partition of the same number of the state topic, so a worker on any machine, with an empty disk, can
continue where the partition's previous owner stopped. The record format and the rules (claims,
epochs, chunk slots, which state wins, cleanup) are those of :mod:`worker.state_topic.rules`; this
module moves them through Kafka, with a reader (:mod:`worker.state_topic.reader`), a writer
(:mod:`worker.state_topic.writer`) and one :class:`~worker.state_topic.fence.Claim` per owned
partition (:mod:`worker.state_topic.fence`: the ownership check).

How the loop uses it (one :class:`StateTopic` per worker process):

1. at start-up, :func:`~worker.state_topic.admin.ensure_topic` creates the topic (compacted, as many
   partitions as the features topic) or refuses an existing one that does not fit;
2. on assignment of partition ``p``, :meth:`StateTopic.acquire` claims ``p`` (a new epoch, durable
   before it returns), reads the state topic's partition to its end and returns the newest valid state
   (or None) before the first record of ``p`` is processed;
3. at each checkpoint, after the checkpoint file is written and before the input offsets are
   committed, :meth:`StateTopic.write` stores the payload: chunks and manifest with acks=all, waits
   for every delivery, checks that no newer owner claimed ``p`` meanwhile (raises
   :class:`~worker.state_topic.errors.StateTopicFenced` if one did), then tombstones what the new
   state makes obsolete. Split in two, :meth:`StateTopic.start_write` queues the records and returns
   at once, and :meth:`StateTopic.finish` does the waiting and checking, so the loop can go on
   processing while the state travels and commit the offsets once ``finish`` returned;
4. on revoke (after the final checkpoint) or loss, :meth:`StateTopic.release` forgets ``p``; any
   later write for it raises.

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
from types import TracebackType
from typing import NamedTuple

from confluent_kafka import Producer

from worker.state_topic import rules
from worker.state_topic.admin import StateTopicConfig
from worker.state_topic.errors import StateTopicError, StateTopicFenced, StateTopicLost, StateWriteError
from worker.state_topic.fence import Claim
from worker.state_topic.reader import ReadCount, StateReader
from worker.state_topic.rules import Ownership, Selection, Skipped, State
from worker.state_topic.writer import PendingWrite, StateWriter


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


class StateTopic:
    """Claims, restores and writes partition states in one state topic (one instance per process).

    Not thread-safe: the worker loop calls it from its own thread, one partition at a time.
    """

    def __init__(self, config: StateTopicConfig) -> None:
        self.config = config
        self.claims: dict[int, Claim] = {}
        self.reader = StateReader(config)
        self.writer = StateWriter(config, self._fenced_by_broker)
        self._partitions: int | None = None  # the topic's partition count when first used (check_topic)

    @property
    def transactional(self) -> bool:
        """True when each partition is written in transactions by its own transactional producer."""
        return self.writer.transactional

    def connect(self) -> None:
        """Connect the clients now rather than at the first :meth:`acquire` (about half a second).

        Call it at start-up, while the consumer group join runs."""
        self.reader.connect()
        self.writer.connect()
        self._remember_partitions()

    # -- the topic's identity ---------------------------------------------------------------------------

    def partition_count(self) -> int | None:
        """The topic's partition count now (see :meth:`StateReader.partition_count`)."""
        return self.reader.partition_count()

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
            self.writer.init_transactional(partition)
        owner = uuid.uuid4().bytes
        key, value = rules.claim_record(partition, owner, time.time())
        delivery = self.writer.send(partition, [(key, value)], "claim")
        epoch = delivery.offsets[0]
        assert epoch is not None
        read = ReadCount()
        selection = rules.select(partition, read.counting(self.reader.read(partition, 0, epoch)))
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
        self.claims[partition] = Claim(ownership, key, verified_end=read.end)
        return Restored(
            partition,
            epoch,
            newest,
            selection.skipped,
            read.records,
            read.bytes,
            time.perf_counter() - started,
        )

    def release(self, partition: int) -> None:
        """Forget ``partition`` (on revoke, after its final checkpoint, or on loss); later writes raise."""
        self.claims.pop(partition, None)
        self.writer.release(partition)

    def fence(self, partition: int, epoch: int) -> None:
        """Tell the owner that ``epoch`` claimed ``partition``: when newer, its writes raise from now on."""
        claim = self.claims.get(partition)
        if claim is not None:
            claim.fence(epoch)

    def _fenced_by_broker(self, partition: int, reason: str) -> None:
        claim = self.claims.get(partition)
        if claim is not None:
            claim.fenced_by_broker(reason)

    def epoch(self, partition: int) -> int | None:
        """This process's epoch for ``partition``, or None when it does not own it."""
        claim = self.claims.get(partition)
        return None if claim is None else claim.ownership.epoch

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
        claim = self._writable(partition)
        plan = rules.plan_write(claim.ownership, payload, self.config.chunk_bytes, time.time())
        records = plan.records
        if self.transactional:  # one transaction: everything commits or nothing does
            records = [*records, *((key, None) for key in plan.cleanup)]
            self.writer.begin(partition, f"state seq {plan.seq}")
        pending = PendingWrite(partition, plan, self.writer.produce(partition, records), len(payload))
        pending.cost = time.perf_counter() - started
        claim.started(pending)
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
        claim = self._writable(partition)
        plan = rules.plan_write(claim.ownership, payload, self.config.chunk_bytes, time.time())
        pending = PendingWrite(
            partition, plan, self.writer.produce(partition, plan.records, producer), len(payload)
        )
        pending.cost = time.perf_counter() - started
        claim.started(pending)
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
        self.claims[pending.partition].committed_staged()
        return written

    def discard(self, pending: PendingWrite) -> None:
        """The caller's transaction with the state of :meth:`stage` aborted: the state was not written.

        A broker that shows aborted records to readers shows it anyway, so the next write first reads
        what landed, as after a write whose outcome is unknown."""
        claim = self.claims.get(pending.partition)
        if claim is None or not claim.finishing(pending):
            return
        rules.attempted(claim.ownership, pending.plan)
        claim.aborted(pending.plan)

    def _writable(self, partition: int) -> Claim:
        """The partition's claim, ready for a new write (or StateTopicError / StateTopicFenced)."""
        claim = self.claims.get(partition)
        if claim is None:
            raise StateTopicError(f"partition {partition} is not acquired; call acquire() first")
        claim.check(self.config.topic)
        if claim.pending is not None:
            raise StateTopicError(f"partition {partition} has a state write in progress; finish() it first")
        if claim.unsure is not None:
            claim.resync(self.reader)
        return claim

    def poll(self) -> None:
        """Serve the delivery reports of writes in flight (cheap; the loop may call it every turn)."""
        self.writer.poll()

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
        claim = self.claims.get(partition)
        if claim is None or not claim.finishing(pending):
            raise StateTopicError(
                f"partition {partition} was released or re-acquired since this write started"
            )
        try:
            self.writer.complete(partition, pending.delivery, f"state seq {plan.seq}")
        except StateWriteError:
            if not self.transactional:  # a transaction that did not commit left nothing behind
                claim.aborted(plan)
            self.check_topic()  # not written because the topic is gone? Then that is the error
            raise
        finally:
            rules.attempted(claim.ownership, plan)
        offsets = [o for o in pending.delivery.offsets if o is not None]
        if min(offsets) < claim.verified_end:  # the log starts again below what was verified: a new topic
            raise StateTopicLost(
                f"state topic {self.config.topic!r} partition {partition}: records written at offset "
                f"{min(offsets)}, below offset {claim.verified_end} it held before (deleted and created "
                "again)"
            )
        self.check_topic()
        unacknowledged = 0
        if not self.transactional:
            claim.own(offsets)
            claim.verify(self.reader, max(offsets))
            unacknowledged = self._tombstone(partition, claim, plan.cleanup)
        rules.completed(claim.ownership, plan)
        if unacknowledged:
            claim.clean_up_later(plan.cleanup)
        manifest_offset = pending.delivery.offsets[plan.chunks]
        assert manifest_offset is not None
        return Written(
            partition,
            claim.ownership.epoch,
            plan.seq,
            plan.chunks,
            pending.payload_bytes,
            manifest_offset,
            pending.cost + time.perf_counter() - started,
            len(plan.records) - plan.chunks - 1 + len(plan.cleanup),
            unacknowledged,
        )

    def _tombstone(self, partition: int, claim: Claim, keys: list[bytes]) -> int:
        """Tombstone ``keys`` (after the ownership check) and wait; the number not acknowledged."""
        if not keys:
            return 0
        delivery = self.writer.produce(partition, [(key, None) for key in keys])
        self.writer.drain(partition)
        if delivery.errors or delivery.missing:
            self.writer.renew_after_failure(delivery)
        claim.own([o for o in delivery.offsets if o is not None])
        return delivery.missing

    # -- reading without owning ---------------------------------------------------------------------

    def partitions(self) -> list[int]:
        """The state topic's partitions; StateTopicError when it cannot be reached or does not exist."""
        return self.reader.partitions()

    def read(self, partition: int) -> Selection:
        """The newest valid state of ``partition`` and what was skipped, without claiming it."""
        return rules.select(partition, self.reader.read(partition, 0, -1))

    def close(self) -> None:
        """Flush what is queued and close the clients. Idempotent."""
        self.claims.clear()
        self.reader.close()
        self.writer.close()

    def __enter__(self) -> StateTopic:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()
