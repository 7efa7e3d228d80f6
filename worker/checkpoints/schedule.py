"""`CheckpointSchedule`: when a partition's next checkpoint is due, and the snapshot waiting for its
outputs' acknowledgements.

A checkpoint falls due after ``checkpoint_records`` records or ``checkpoint_seconds`` seconds with at
least one record, unless a failed attempt's pause lasts (:class:`~worker.checkpoints.backoff.Backoff`).
The partition runtime tells the schedule what it processed; the checkpoint protocol takes snapshots,
and reports their fate. Times are ``time.monotonic()`` seconds (the protocol's clock).

>>> schedule = CheckpointSchedule(now=0.0)
>>> schedule.due(now=100.0, records=1000, seconds=30.0)  # nothing processed: nothing to write
False
>>> schedule.processed(5); schedule.due(now=10.0, records=1000, seconds=30.0)
False
>>> schedule.due(now=30.0, records=1000, seconds=30.0)
True
>>> schedule.taken(now=30.0), schedule.records
(5, 0)
>>> _ = schedule.failed(5, now=31.0); schedule.due(now=31.2, records=1, seconds=30.0)  # pausing
False
"""

from __future__ import annotations

from typing import Protocol

from worker.checkpoints.backoff import Backoff, Failure
from worker.checkpoints.ledger import DeliveryLedger
from worker.checkpoints.snapshot import Snapshot
from worker.core.partition_state import PartitionState


class CheckpointSchedule:
    """One partition's checkpoint schedule: records since its last snapshot, when that was taken, the
    backoff after failed attempts, and the snapshot waiting to be written (step 2 of the protocol)."""

    __slots__ = ("last", "pending", "records", "retry")

    def __init__(self, now: float) -> None:
        self.records = 0  # processed since the last snapshot (or returned by a failed attempt)
        self.last = now  # when the last snapshot was taken (or the partition restored)
        self.retry = Backoff()  # when a checkpoint may be tried again after failures
        self.pending: Snapshot | None = None  # taken, waiting for its outputs' acknowledgements

    def processed(self, records: int) -> None:
        """Records were processed (their outputs handed to the producer, or committed already)."""
        self.records += records

    def due(self, now: float, records: int, seconds: float) -> bool:
        """Whether a checkpoint is due at ``now``: ``records`` processed, or ``seconds`` passed with at
        least one, and no failed attempt's pause lasting."""
        return self.retry.ready(now) and bool(
            self.records >= records or (self.records and now - self.last >= seconds)
        )

    def taken(self, now: float) -> int:
        """A snapshot was taken at ``now``: it covers the records since the last one (returned); the
        partition counts as checkpointed for scheduling from here on."""
        records, self.records, self.last = self.records, 0, now
        return records

    def hold(self, snapshot: Snapshot) -> None:
        """Keep ``snapshot`` until every output produced before it is acknowledged."""
        self.pending = snapshot

    def release(self) -> Snapshot | None:
        """The snapshot waiting to be written, which the caller takes over (None if there is none)."""
        snapshot, self.pending = self.pending, None
        return snapshot

    def failed(self, records: int, now: float) -> Failure:
        """An attempt covering ``records`` failed: they are due again, after the backoff's pause."""
        self.records += records
        return self.retry.failed(now)

    def returned(self, records: int) -> None:
        """An attempt covering ``records`` will never count (its state topic is gone): due again."""
        self.records += records

    def succeeded(self) -> int:
        """A checkpoint is complete: the backoff's streak ends; returns how many failures it had."""
        return self.retry.succeeded()


class Checkpointable(Protocol):
    """What the checkpoint protocol needs of an owned partition: its state, the ledger of its
    outputs and its schedule (the Kafka shell's owned partition has them)."""

    @property
    def state(self) -> PartitionState: ...

    @property
    def deliveries(self) -> DeliveryLedger: ...

    @property
    def schedule(self) -> CheckpointSchedule: ...
