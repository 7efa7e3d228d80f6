"""Fencing: this process's claim on a partition of the state topic, and the check that no newer owner
claimed the partition before one of its writes.

The check needs no extra round trip in the common case: the delivery reports give the offsets of the
owner's own records. When the offsets from the end of what it last verified up to its new manifest
are all its own, nobody else wrote to the partition meanwhile, so no newer claim can precede the
manifest. Only when other records sit in between (a newer owner's claim, a zombie's writes) are those
read back.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from worker.state_topic import rules
from worker.state_topic.errors import StateTopicFenced
from worker.state_topic.reader import StateReader
from worker.state_topic.rules import Ownership
from worker.state_topic.writer import PendingWrite


@dataclass
class Claim:
    """This process's claim on one partition and how far it has verified the partition's log."""

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

    @property
    def partition(self) -> int:
        return self.ownership.partition

    # -- a write's life: started, then finished, aborted or of unknown outcome ------------------------

    def started(self, pending: PendingWrite) -> None:
        """A write was handed to a producer (one per partition at a time)."""
        self.pending = pending

    def finishing(self, pending: PendingWrite) -> bool:
        """Whether ``pending`` is this claim's write in flight; it is not any more from here on."""
        if self.pending is not pending:
            return False
        self.pending = None
        return True

    def aborted(self, plan: rules.WritePlan) -> None:
        """The write of ``plan`` may have landed or not (its transaction aborted, or some records were
        not acknowledged): the next write first reads what landed (:meth:`resync`)."""
        self.unsure = plan

    def own(self, offsets: list[int]) -> None:
        """These offsets hold this owner's own records (from delivery reports)."""
        self.own_offsets.update(offsets)

    def clean_up_later(self, keys: list[bytes]) -> None:
        """Tombstones of ``keys`` were not all acknowledged: the next write sends them again
        (tombstoning twice is harmless; leaving keys is not)."""
        self.ownership.cleanup = list(keys)

    def committed_staged(self) -> None:
        """A state staged in a caller's transaction was confirmed: the offset after it is that
        transaction's commit marker unless another record came first (see :meth:`verify`)."""
        self.marker = self.verified_end

    def fenced_by_broker(self, reason: str) -> None:
        """The broker fenced this partition's transactional producer: the partition is lost."""
        self.fenced = reason

    def fence(self, epoch: int) -> None:
        """``epoch`` claimed the partition: when newer than this claim, its writes raise from now on."""
        if epoch > self.ownership.epoch:
            self.fenced = f"epoch {epoch} claimed it after this worker's epoch {self.ownership.epoch}"

    def check(self, topic: str) -> None:
        """Raise :class:`StateTopicFenced` once the partition is another owner's."""
        if self.fenced is not None:
            raise StateTopicFenced(
                f"state topic {topic!r} partition {self.partition}: {self.fenced}; it lost the partition"
            )

    def verify(self, reader: StateReader, upto: int) -> None:
        """Raise StateTopicFenced if a newer claim lies between the last verified offset and ``upto``."""
        start = self.verified_end
        foreign = [o for o in range(start, upto + 1) if o not in self.own_offsets]
        # A single unknown offset right after a staged state is that transaction's commit marker: the
        # next transaction of the same producer cannot add the partition before the marker is written.
        # With anything else in between, the marker's offset is read too (a claim may sit there).
        if foreign and foreign != [self.marker]:
            read = reader.read(self.partition, foreign[0], upto)
            others = [r for r in read if r.offset not in self.own_offsets]
            newer = rules.newer_claim(self.partition, self.ownership.epoch, others)
            if newer is not None:
                self.fence(newer)
                self.check(reader.config.topic)
        self.verified_end = upto + 1
        self.own_offsets = {o for o in self.own_offsets if o > upto}
        self.marker = None

    def resync(self, reader: StateReader) -> None:
        """After a write whose outcome is unknown, read what landed since the last verified offset."""
        plan, self.unsure = self.unsure, None
        self.marker = None
        assert plan is not None
        records = list(reader.read(self.partition, self.verified_end, -1))
        newer = rules.settle(self.ownership, plan, records)
        if newer is not None:
            self.fence(newer)
            self.check(reader.config.topic)
        if records:
            self.verified_end = records[-1].offset + 1
            self.own_offsets = {o for o in self.own_offsets if o >= self.verified_end}
