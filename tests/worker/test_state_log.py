"""The state topic's record format and rules, without Kafka (worker.state_topic.rules).

The property test plays owners against one simulated partition log: claims, complete and interrupted
writes, zombies that keep writing after a newer owner claimed, cleanup, and compaction at any point.
Each owner follows the protocol of worker.state_topic.client: claim, restore (read everything), then per
state: chunks and manifest, check the records others wrote in between for a newer claim, and only
then tombstone.
"""

from __future__ import annotations

import doctest
import random
import re
from dataclasses import dataclass, field

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from worker.state_topic import rules as sl
from worker.state_topic.rules import LogRecord, Ownership


def owner_id(n: int) -> bytes:
    return n.to_bytes(sl.OWNER_BYTES, "big")


class Log:
    """One partition of a compacted topic: append-only, offsets kept through compaction."""

    def __init__(self) -> None:
        self.records: list[LogRecord] = []
        self.end = 0

    def append(self, key: bytes, value: bytes | None) -> int:
        self.records.append(LogRecord(self.end, key, value))
        self.end += 1
        return self.end - 1

    def compact(self, rng: random.Random) -> None:
        """Keep the newest record of each key; a tombstone that is newest may or may not survive."""
        newest = {r.key: r.offset for r in self.records}
        self.records = [
            r
            for r in self.records
            if newest[r.key] == r.offset and (r.value is not None or rng.random() < 0.5)
        ]

    def since(self, offset: int) -> list[LogRecord]:
        return [r for r in self.records if r.offset >= offset]


@dataclass
class Owner:
    own: Ownership
    claim_key: bytes
    verified_end: int
    own_offsets: set[int] = field(default_factory=set)
    fenced: bool = False
    last_complete: bytes | None = None
    unsure: tuple[sl.WritePlan, bytes] | None = None  # a cut-off write and its payload


def acquire(log: Log, partition: int, n: int) -> tuple[Owner, sl.Selection]:
    key, value = sl.claim_record(partition, owner_id(n), 0.0)
    epoch = log.append(key, value)
    found = sl.select(partition, log.records)
    seq = found.newest.seq + 1 if found.newest is not None else 0
    own = Ownership(partition, epoch, owner_id(n), next_seq=seq, cleanup=sl.cleanup_keys(found, key))
    owner = Owner(own, key, verified_end=log.end)
    if sl.newer_claim(partition, epoch, log.since(epoch + 1)) is not None:
        owner.fenced = True
    return owner, found


def write(
    log: Log,
    owner: Owner,
    payload: bytes,
    chunk_bytes: int,
    interrupt_at: int | None,
    stale: set[tuple[int, int]] | None = None,
) -> bool:
    """One state write as worker.state_topic.client does it; False when interrupted or fenced.

    ``stale`` collects the (epoch, seq) of manifests appended while a newer claim existed.
    """
    if owner.unsure is not None:  # the last write was cut off: read what landed before writing again
        cut, cut_payload = owner.unsure
        owner.unsure = None
        if sl.settle(owner.own, cut, log.since(owner.verified_end)) is not None:
            owner.fenced = True
            return False
        owner.verified_end = log.end
        if owner.own.last_slot == cut.slot:  # it had landed whole: it is the last complete state
            owner.last_complete = cut_payload
    plan = sl.plan_write(owner.own, payload, chunk_bytes, now=0.0)
    records = plan.records if interrupt_at is None else plan.records[: interrupt_at % len(plan.records)]
    offsets = [log.append(key, value) for key, value in records]
    owner.own_offsets.update(offsets)
    newest_claim = max(r.offset for r in log.records if b"/claim/" in r.key and r.value is not None)
    if stale is not None and interrupt_at is None and newest_claim > owner.own.epoch:
        stale.add((owner.own.epoch, plan.seq))
    if interrupt_at is not None:
        sl.attempted(owner.own, plan)
        owner.unsure = (plan, payload)
        return False
    others = [r for r in log.since(owner.verified_end) if r.offset not in owner.own_offsets]
    if sl.newer_claim(owner.own.partition, owner.own.epoch, others) is not None:
        owner.fenced = True
        sl.attempted(owner.own, plan)
        return False
    owner.verified_end = offsets[-1] + 1
    for key in plan.cleanup:
        owner.own_offsets.add(log.append(key, None))
    sl.completed(owner.own, plan)
    owner.last_complete = payload
    return True


operation = st.one_of(
    st.tuples(st.just("claim")),
    st.tuples(
        st.just("write"),
        st.integers(0, 7),  # which owner (modulo the owners so far)
        st.binary(max_size=40),
        st.none() | st.integers(0, 50),  # where the write is cut off (None: complete)
    ),
    st.tuples(st.just("compact")),
)


@settings(max_examples=300, deadline=None)
@given(
    ops=st.lists(operation, min_size=1, max_size=40),
    chunk_bytes=st.integers(1, 9),
    seed=st.integers(0, 2**32 - 1),
)
def test_newest_complete_state_of_the_newest_owner_wins_and_never_regresses(
    ops: list[tuple], chunk_bytes: int, seed: int
) -> None:
    """Any interleaving of claims, complete, interrupted and zombie writes, and compactions:

    - a write the newest owner completed is exactly what a reader restores, until it writes again;
    - the restored state never moves backwards in (epoch, seq) and never disappears, whatever
      interrupted writes, zombie writes, cleanups and compactions happen;
    - its payload is byte for byte the one written under that (epoch, seq);
    - it is never a state written while a newer owner had claimed the partition (a zombie's);
    - the answer is the same before and after compaction.
    """
    rng = random.Random(seed)
    partition = 2
    log = Log()
    owners: list[Owner] = []
    written: dict[tuple[int, int], bytes] = {}
    stale: set[tuple[int, int]] = set()
    best: tuple[int, int] | None = None
    for op in ops:
        confirmed = False
        if op[0] == "claim":
            owner, found = acquire(log, partition, len(owners))
            owners.append(owner)
            assert found.newest_epoch == owner.own.epoch
        elif op[0] == "write" and owners:
            owner = owners[op[1] % len(owners)]
            if owner.fenced:
                continue
            written[(owner.own.epoch, owner.own.next_seq)] = op[2]  # whatever lands of it
            confirmed = write(log, owner, op[2], chunk_bytes, op[3], stale)
        elif op[0] == "compact":
            before = sl.select(partition, log.records).newest
            log.compact(rng)
            after = sl.select(partition, log.records).newest
            assert before == after
        found = sl.select(partition, log.records)
        newest = found.newest
        if best is not None:
            assert newest is not None, "a complete state was lost"
            assert (newest.epoch, newest.seq) >= best, "the restored state moved backwards"
        if newest is not None:
            best = (newest.epoch, newest.seq)
            assert best not in stale, "a zombie's state won"
            assert newest.payload == written[best]
        if op[0] == "write" and confirmed and owner is max(owners, key=lambda o: o.own.epoch):
            assert newest is not None and newest.epoch == owner.own.epoch
            assert newest.payload == owner.last_complete == op[2]


def test_interrupted_write_keeps_the_previous_state_after_compaction() -> None:
    log = Log()
    owner, _ = acquire(log, 0, 1)
    assert write(log, owner, b"first state", 3, None)
    assert write(log, owner, b"second state", 3, None)
    assert not write(log, owner, b"third, interrupted", 3, interrupt_at=4)
    log.compact(random.Random(0))
    found = sl.select(0, log.records)
    assert found.newest is not None and found.newest.payload == b"second state"
    # The damaged slot's manifest is older than the state found, so it is not even examined.
    assert found.skipped == []


def test_a_cut_off_write_that_landed_whole_is_not_overwritten_next() -> None:
    """The acknowledgements of a write were lost but its manifest landed: the next write must use
    the other slot, or a crash in it would take the newest state away."""
    log = Log()
    owner, _ = acquire(log, 0, 1)
    assert write(log, owner, b"a" * 8, 4, None)  # slot 0
    assert write(log, owner, b"b" * 8, 4, None)  # slot 1
    assert not write(log, owner, b"c" * 4, 4, interrupt_at=2)  # slot 0: chunk and manifest landed
    assert sl.select(0, log.records).newest.payload == b"c" * 4
    assert not write(log, owner, b"d" * 8, 4, interrupt_at=1)  # one chunk, into slot 1
    assert sl.select(0, log.records).newest.payload == b"c" * 4


def test_zombie_state_written_after_a_newer_claim_is_void() -> None:
    log = Log()
    zombie, _ = acquire(log, 1, 1)
    assert write(log, zombie, b"zombie 1", 4, None)
    newer, found = acquire(log, 1, 2)
    assert found.newest is not None and found.newest.payload == b"zombie 1"
    # The zombie does not notice (e.g. a raw producer): its manifest comes after the newer claim.
    plan = sl.plan_write(zombie.own, b"zombie 2, more records", 4, now=0.0)
    for key, value in plan.records:
        log.append(key, value)
    found = sl.select(1, log.records)
    assert found.newest is not None and found.newest.payload == b"zombie 1"
    assert found.skipped[0].reason.startswith(f"void: written by epoch {zombie.own.epoch} after epoch")
    # Through the protocol, the zombie learns it is fenced and tombstones nothing.
    assert not write(log, zombie, b"zombie 3", 4, None) and zombie.fenced
    assert write(log, newer, b"newer 1", 4, None)
    assert sl.select(1, log.records).newest.payload == b"newer 1"


def test_cleanup_leaves_only_the_owners_keys() -> None:
    log = Log()
    first, _ = acquire(log, 0, 1)
    for payload in (b"a" * 10, b"b" * 30, b"c" * 5):
        assert write(log, first, payload, 4, None)
    second, _ = acquire(log, 0, 2)
    assert write(log, second, b"d" * 9, 4, None)
    log.compact(random.Random(1))
    live = {r.key.decode() for r in log.records if r.value is not None}
    e = second.own.epoch
    assert live == {second.claim_key.decode(), f"p0/e{e}/0/manifest"} | {
        f"p0/e{e}/0/chunk/{i}" for i in range(3)
    }


def test_shrinking_state_tombstones_its_stale_chunks() -> None:
    log = Log()
    owner, _ = acquire(log, 0, 1)
    assert write(log, owner, b"x" * 40, 4, None)  # slot 0: 10 chunks
    assert write(log, owner, b"y" * 4, 4, None)  # slot 1: 1 chunk
    assert write(log, owner, b"z" * 8, 4, None)  # slot 0: 2 chunks, 8 stale
    log.compact(random.Random(2))
    chunks0 = {r.key for r in log.records if r.value is not None and b"/0/chunk/" in r.key}
    assert len(chunks0) == 2


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        (b"", "value too short for a state record"),
        (b"X" * 40, "not a state record (bad magic)"),
        (sl.MAGIC + b"\x00\x09" + b"\x01" + b"\x00" * 4, "unsupported state record format version 9"),
        (sl.MAGIC + b"\x00\x01" + b"\x07" + b"\x00" * 4, "unknown state record kind 7"),
    ],
)
def test_malformed_values_are_rejected_with_a_reason(value: bytes, reason: str) -> None:
    with pytest.raises(sl.StateLogError, match=re.escape(reason)):
        sl.decode(value)


def test_corrupt_manifest_and_chunk_are_skipped_and_reported() -> None:
    log = Log()
    owner, _ = acquire(log, 0, 1)
    assert write(log, owner, b"good old state", 5, None)
    plan = sl.plan_write(owner.own, b"newer but damaged", 5, now=0.0)
    for key, value in plan.records[: plan.chunks]:
        log.append(key, value[:-1] + bytes([value[-1] ^ 1]))  # one bit flipped in each chunk
    log.append(*plan.records[plan.chunks])
    found = sl.select(0, log.records)
    assert found.newest is not None and found.newest.payload == b"good old state"
    assert [s.reason for s in found.skipped] == ["payload SHA-256 mismatch"]
    key, value = plan.records[plan.chunks]
    log.append(key, value[:20] + bytes([value[20] ^ 1]) + value[21:])
    assert sl.select(0, log.records).skipped[0].reason == "manifest checksum mismatch"


def test_records_of_another_partition_or_with_a_wrong_key_are_skipped() -> None:
    log = Log()
    key, value = sl.claim_record(5, owner_id(1), 0.0)
    log.append(key, value)
    log.append(b"p0/claim/" + owner_id(1).hex().encode(), value)
    found = sl.select(0, log.records)
    assert found.newest_epoch == -1
    assert [s.reason for s in found.skipped] == [
        "record of partition 5 in partition 0",
        "record of partition 5 in partition 0",
    ]
    log2 = Log()
    log2.append(b"p0/claim/other", sl.encode_claim(0, owner_id(1), 0.0))
    assert sl.select(0, log2.records).skipped[0].reason == "key does not match the value"


@settings(deadline=None)
@given(size=st.integers(0, 5000), chunk_bytes=st.integers(1, 700))
def test_any_payload_size_round_trips(size: int, chunk_bytes: int) -> None:
    payload = random.Random(size).randbytes(size)
    log = Log()
    owner, _ = acquire(log, 3, 1)
    assert write(log, owner, payload, chunk_bytes, None)
    newest = sl.select(3, log.records).newest
    assert newest is not None and newest.payload == payload
    assert newest.chunks == sl.chunk_count(size, chunk_bytes)


def test_docstring_example() -> None:
    result = doctest.testmod(sl)
    assert result.failed == 0 and result.attempted > 0


@given(size=st.integers(0, 40_000), partition=st.integers(0, 10_000), epoch=st.integers(0, 2**63 - 1))
@settings(max_examples=50, deadline=None)
def test_every_record_fits_the_configured_message_size(size: int, partition: int, epoch: int) -> None:
    """Chunk records, with key and framing, stay under max.message.bytes (HEADROOM_BYTES covers the rest)."""
    from worker.state_topic.admin import HEADROOM_BYTES, StateTopicConfig

    config = StateTopicConfig("127.0.0.1:1", "state", max_message_bytes=2 * HEADROOM_BYTES)
    own = Ownership(partition, epoch, owner_id(1), next_seq=2**63 - 1)
    plan = sl.plan_write(own, bytes(size), config.chunk_bytes, now=0.0)
    framing = 61 + 25  # record batch header, and a record's length, attributes, deltas and counts
    assert max(len(k) + len(v or b"") for k, v in plan.records) + framing <= config.max_message_bytes
