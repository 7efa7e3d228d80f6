"""The state topic's record format and rules, without Kafka: claims, chunked states, selection, cleanup.

A partition's checkpoint payload (any size) is stored in the partition of the same number of a
compacted topic as a run of records, all keyed under ``p{partition}/``:

- a **claim** ``p{P}/claim/{owner}``: written once by an owner when it is assigned the partition. Its
  offset is the owner's **epoch**: the broker hands out offsets in increasing order, so a later owner
  always has a greater epoch, with no coordination and no ties.
- **chunks** ``p{P}/e{epoch}/{slot}/chunk/{i}``: the payload cut into pieces that fit one message.
- a **manifest** ``p{P}/e{epoch}/{slot}/manifest``: partition, epoch, sequence number, owner, chunk
  count, payload length and SHA-256. Written after its chunks; a state is complete once its manifest
  is in the log and every chunk it names is the one it names.

Why keys look like this. Compaction keeps only the newest record of each key, so a reader must find
the same answer in the log before and after compaction: :func:`select` therefore looks only at the
newest record of each key (a tombstone removes the key), never at an older value. An owner alternates
between two **slots** (0 and 1) and never writes into the slot of its last complete state, so a crash
in the middle of a write (some chunks, no manifest) leaves the previous complete state whole in the
other slot, compacted or not. The epoch is part of every key, so a former owner that still writes (a
zombie) only ever overwrites its own keys, never a newer owner's.

Which state wins (:func:`select`): among complete states whose digest verifies, the highest epoch,
then the highest sequence number. A manifest written after the claim of a newer epoch is **void**: the
newer owner had already read the log when that state appeared, so it can never have been restored
from, and its owner had lost the partition. Together: a zombie can neither outrank a newer owner's
state (its epoch is lower) nor become the newest state once a newer owner has claimed (void), even
before the newer owner writes anything.

Cleanup: every write tombstones, right after its manifest, the chunk keys of its slot beyond the new
chunk count (own keys of a slot nobody restores from). After its first complete state, an owner also
tombstones every key it saw when it restored except its own claim (:func:`cleanup_keys`), but only
once :mod:`worker.state_topic.client` has checked that no newer claim precedes its manifest, so a zombie
never deletes the state a newer owner restored. Nothing else is ever deleted.

>>> plan = plan_write(Ownership(3, epoch=7, owner=b"o" * 16), b"x" * 10, chunk_bytes=4, now=0.0)
>>> [key.decode() for key, _ in plan.records][-2:]
['p3/e7/0/chunk/2', 'p3/e7/0/manifest']
>>> log = [LogRecord(7, *claim_record(3, b"o" * 16, 0.0))]
>>> log += [LogRecord(8 + i, k, v) for i, (k, v) in enumerate(plan.records)]
>>> found = select(3, log)
>>> found.newest.payload, found.newest.epoch, found.newest.seq, found.newest_epoch
(b'xxxxxxxxxx', 7, 0, 7)
"""

from __future__ import annotations

import hashlib
import struct
import zlib
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import NamedTuple

MAGIC = b"SGTSTATE"
FORMAT_VERSION = 1
SLOTS = 2

KIND_CLAIM = 1
KIND_MANIFEST = 2
KIND_CHUNK = 3

# Common head of every value: magic, format version, kind, partition.
_HEAD = struct.Struct(">8sHBI")
# Claim: owner id, wall-clock time of the claim (seconds; informational).
_CLAIM = struct.Struct(">16sd")
# Manifest: epoch, seq, slot, chunk count, payload length, payload SHA-256, owner, wall-clock time;
# followed by the CRC-32 of everything before it.
_MANIFEST = struct.Struct(">QQBIQ32s16sd")
_CRC = struct.Struct(">I")
# Chunk: epoch, seq, slot, index, count; followed by the chunk's bytes.
_CHUNK = struct.Struct(">QQBII")

OWNER_BYTES = 16
CHUNK_HEADER_BYTES = _HEAD.size + _CHUNK.size


class StateLogError(ValueError):
    """A state topic record is malformed, foreign, or names a different partition."""


class LogRecord(NamedTuple):
    """A record of a state topic partition as read back: offset, key and value (None: tombstone)."""

    offset: int
    key: bytes | None
    value: bytes | None


class Claim(NamedTuple):
    partition: int
    owner: bytes
    claimed_at: float


class Manifest(NamedTuple):
    partition: int
    epoch: int
    seq: int
    slot: int
    chunks: int
    length: int
    sha256: bytes
    owner: bytes
    written_at: float


class Chunk(NamedTuple):
    partition: int
    epoch: int
    seq: int
    slot: int
    part: int  # this chunk's number, from 0 (not `index`/`count`: a named tuple has methods of those names)
    parts: int  # chunks of the state
    data: bytes


# -- keys -------------------------------------------------------------------------------------------


def claim_key(partition: int, owner: bytes) -> bytes:
    return f"p{partition}/claim/{owner.hex()}".encode()


def manifest_key(partition: int, epoch: int, slot: int) -> bytes:
    return f"p{partition}/e{epoch}/{slot}/manifest".encode()


def chunk_key(partition: int, epoch: int, slot: int, index: int) -> bytes:
    return f"p{partition}/e{epoch}/{slot}/chunk/{index}".encode()


# -- values -----------------------------------------------------------------------------------------


def encode_claim(partition: int, owner: bytes, claimed_at: float) -> bytes:
    _check_owner(owner)
    return _HEAD.pack(MAGIC, FORMAT_VERSION, KIND_CLAIM, partition) + _CLAIM.pack(owner, claimed_at)


def encode_manifest(m: Manifest) -> bytes:
    _check_owner(m.owner)
    body = _HEAD.pack(MAGIC, FORMAT_VERSION, KIND_MANIFEST, m.partition) + _MANIFEST.pack(
        m.epoch, m.seq, m.slot, m.chunks, m.length, m.sha256, m.owner, m.written_at
    )
    return body + _CRC.pack(zlib.crc32(body))


def encode_chunk(c: Chunk) -> bytes:
    head = _HEAD.pack(MAGIC, FORMAT_VERSION, KIND_CHUNK, c.partition)
    return head + _CHUNK.pack(c.epoch, c.seq, c.slot, c.part, c.parts) + c.data


def decode(value: bytes) -> Claim | Manifest | Chunk:
    """The claim, manifest or chunk a record value holds; raises StateLogError when it is not one."""
    if len(value) < _HEAD.size:
        raise StateLogError("value too short for a state record")
    magic, version, kind, partition = _HEAD.unpack_from(value)
    if magic != MAGIC:
        raise StateLogError("not a state record (bad magic)")
    if version != FORMAT_VERSION:
        raise StateLogError(f"unsupported state record format version {version}")
    rest = memoryview(value)[_HEAD.size :]
    if kind == KIND_CLAIM:
        if len(rest) != _CLAIM.size:
            raise StateLogError("claim has the wrong length")
        owner, claimed_at = _CLAIM.unpack(rest)
        return Claim(partition, owner, claimed_at)
    if kind == KIND_MANIFEST:
        if len(rest) != _MANIFEST.size + _CRC.size:
            raise StateLogError("manifest has the wrong length")
        (crc,) = _CRC.unpack_from(rest, _MANIFEST.size)
        if zlib.crc32(value[: -_CRC.size]) != crc:
            raise StateLogError("manifest checksum mismatch")
        return Manifest(partition, *_MANIFEST.unpack_from(rest))
    if kind == KIND_CHUNK:
        if len(rest) < _CHUNK.size:
            raise StateLogError("chunk too short")
        epoch, seq, slot, part, parts = _CHUNK.unpack_from(rest)
        return Chunk(partition, epoch, seq, slot, part, parts, bytes(rest[_CHUNK.size :]))
    raise StateLogError(f"unknown state record kind {kind}")


def claim_record(partition: int, owner: bytes, claimed_at: float) -> tuple[bytes, bytes]:
    """The ``(key, value)`` of an owner's claim."""
    return claim_key(partition, owner), encode_claim(partition, owner, claimed_at)


def _check_owner(owner: bytes) -> None:
    if len(owner) != OWNER_BYTES:
        raise ValueError(f"owner id must be {OWNER_BYTES} bytes, got {len(owner)}")


def _expected_key(record: Claim | Manifest | Chunk) -> bytes:
    if isinstance(record, Claim):
        return claim_key(record.partition, record.owner)
    if isinstance(record, Manifest):
        return manifest_key(record.partition, record.epoch, record.slot)
    return chunk_key(record.partition, record.epoch, record.slot, record.part)


# -- writing ----------------------------------------------------------------------------------------


@dataclass
class Ownership:
    """What an owner of one partition knows about its own writes (see :func:`plan_write`).

    ``epoch`` is the offset of its claim; ``next_seq`` the sequence number of its next state;
    ``last_slot`` the slot of its last complete state in this epoch (None before the first);
    ``extents[slot]`` how many chunk keys of that slot may hold a value (stale ones are tombstoned);
    ``cleanup`` the keys to tombstone after the first complete state (see :func:`cleanup_keys`).
    """

    partition: int
    epoch: int
    owner: bytes
    next_seq: int = 0
    last_slot: int | None = None
    extents: list[int] = field(default_factory=lambda: [0] * SLOTS)
    cleanup: list[bytes] = field(default_factory=list)

    @property
    def next_slot(self) -> int:
        """Never the slot of the last complete state: an interrupted write cannot damage it."""
        return 0 if self.last_slot is None else 1 - self.last_slot


class WritePlan(NamedTuple):
    """The records of one state, in the order they must reach the log, and what to tombstone after.

    ``records``: the chunks, the manifest (at index ``chunks``), then tombstones of the slot's chunk
    keys beyond the new count (own keys of a slot nobody restores from: safe at once). ``cleanup``:
    keys to tombstone once the manifest is durable and ownership confirmed.
    """

    seq: int
    slot: int
    chunks: int
    records: list[tuple[bytes, bytes | None]]
    cleanup: list[bytes]


def chunk_count(length: int, chunk_bytes: int) -> int:
    """Chunks a payload of ``length`` bytes needs; an empty payload still has one (empty) chunk."""
    return max(1, -(-length // chunk_bytes))


def plan_write(own: Ownership, payload: bytes, chunk_bytes: int, now: float) -> WritePlan:
    """The records that store ``payload`` as the owner's next state (its bookkeeping is not changed)."""
    if chunk_bytes < 1:
        raise ValueError(f"chunk_bytes must be >= 1, got {chunk_bytes}")
    seq, slot, p = own.next_seq, own.next_slot, own.partition
    count = chunk_count(len(payload), chunk_bytes)
    view = memoryview(payload)
    records: list[tuple[bytes, bytes | None]] = [
        (
            chunk_key(p, own.epoch, slot, i),
            encode_chunk(
                Chunk(p, own.epoch, seq, slot, i, count, bytes(view[i * chunk_bytes : (i + 1) * chunk_bytes]))
            ),
        )
        for i in range(count)
    ]
    digest = hashlib.sha256(payload).digest()
    manifest = Manifest(p, own.epoch, seq, slot, count, len(payload), digest, own.owner, now)
    records.append((manifest_key(p, own.epoch, slot), encode_manifest(manifest)))
    records += [(chunk_key(p, own.epoch, slot, i), None) for i in range(count, own.extents[slot])]
    return WritePlan(seq, slot, count, records, list(own.cleanup))


def attempted(own: Ownership, plan: WritePlan) -> None:
    """Bookkeeping after a write that may have reached the log only in part: its chunks may be there."""
    own.extents[plan.slot] = max(own.extents[plan.slot], plan.chunks)
    own.next_seq = plan.seq + 1


def settle(own: Ownership, plan: WritePlan, since: list[LogRecord]) -> int | None:
    """After a write whose outcome is unknown: what the log since the last verified offset says.

    Its records may have landed although their acknowledgements were lost. Returns the epoch of a
    newer claim among ``since`` (the owner lost the partition and must not write), else None; and
    when the write's state is complete there, its slot becomes the last complete one, so the next
    write does not overwrite it.
    """
    newer = newer_claim(own.partition, own.epoch, since)
    if newer is not None:
        return newer
    found = select(own.partition, since).newest
    if found is not None and (found.epoch, found.seq) == (own.epoch, plan.seq):
        own.last_slot = plan.slot
    return None


def completed(own: Ownership, plan: WritePlan) -> None:
    """Bookkeeping after a write whose records and tombstones are all durable."""
    own.extents[plan.slot] = plan.chunks
    own.next_seq = plan.seq + 1
    own.last_slot = plan.slot
    own.cleanup = []


# -- reading ----------------------------------------------------------------------------------------


class Skipped(NamedTuple):
    """A record or state that :func:`select` could not use, and why."""

    offset: int
    key: str
    reason: str


class State(NamedTuple):
    """A complete, verified state found in the log."""

    partition: int
    epoch: int
    seq: int
    slot: int
    chunks: int
    offset: int  # of its manifest
    owner: bytes
    payload: bytes


@dataclass
class Selection:
    """What one partition's log holds: the newest valid state, the newest epoch, and what was skipped.

    ``live`` lists the keys whose newest record is not a tombstone (what compaction keeps), for
    :func:`cleanup_keys`; ``claims`` maps every live claim's epoch to its owner.
    """

    partition: int
    newest: State | None
    newest_epoch: int  # -1 when nothing was ever claimed
    claims: dict[int, bytes]
    skipped: list[Skipped]
    live: list[bytes]


def select(partition: int, records: Iterable[LogRecord]) -> Selection:
    """The newest complete, verified, non-void state of ``partition`` in a log read in offset order.

    Only the newest record of each key counts (what compaction keeps), so the answer is the same
    before and after the topic compacts. Malformed, foreign and incomplete records and states are
    reported in ``skipped`` and otherwise ignored.
    """
    latest: dict[bytes, LogRecord] = {}
    for record in records:
        if record.key is None:
            continue
        if record.value is None:
            latest.pop(record.key, None)
        else:
            latest[record.key] = record
    skipped: list[Skipped] = []
    claims: dict[int, bytes] = {}
    manifests: list[tuple[int, Manifest]] = []
    chunks: dict[bytes, tuple[int, Chunk]] = {}
    newest_epoch = -1
    for key, record in latest.items():
        parsed = _parse(partition, record, skipped)
        if parsed is None:
            continue
        if isinstance(parsed, Claim):
            claims[record.offset] = parsed.owner
            newest_epoch = max(newest_epoch, record.offset)
        elif isinstance(parsed, Manifest):
            manifests.append((record.offset, parsed))
            newest_epoch = max(newest_epoch, parsed.epoch)
        else:
            chunks[key] = (record.offset, parsed)
            newest_epoch = max(newest_epoch, parsed.epoch)
    claim_offsets = sorted(claims)
    best: State | None = None
    # Newest first; states below the first valid one are not even verified.
    for offset, manifest in sorted(manifests, key=lambda om: (om[1].epoch, om[1].seq), reverse=True):
        problem = _void(manifest, offset, claim_offsets)
        if problem is None:
            best, problem = _assemble(manifest, offset, chunks)
        if best is not None:
            break
        name = manifest_key(partition, manifest.epoch, manifest.slot).decode()
        skipped.append(Skipped(offset, name, problem or "unusable"))
    return Selection(partition, best, newest_epoch, claims, skipped, list(latest))


def _parse(partition: int, record: LogRecord, skipped: list[Skipped]) -> Claim | Manifest | Chunk | None:
    key = record.key or b""
    assert record.value is not None
    try:
        parsed = decode(record.value)
    except StateLogError as exc:
        skipped.append(Skipped(record.offset, key.decode(errors="replace"), str(exc)))
        return None
    if parsed.partition != partition:
        why = f"record of partition {parsed.partition} in partition {partition}"
        skipped.append(Skipped(record.offset, key.decode(errors="replace"), why))
        return None
    if key != _expected_key(parsed):
        skipped.append(Skipped(record.offset, key.decode(errors="replace"), "key does not match the value"))
        return None
    return parsed


def _void(manifest: Manifest, offset: int, claim_offsets: list[int]) -> str | None:
    """Why a manifest cannot be a restorable state whatever its chunks hold, or None."""
    if manifest.epoch >= offset:
        return f"epoch {manifest.epoch} is not before its manifest (offset {offset})"
    newer = [c for c in claim_offsets if manifest.epoch < c < offset]
    if newer:
        return f"void: written by epoch {manifest.epoch} after epoch {newer[0]} claimed the partition"
    return None


def _assemble(
    manifest: Manifest, offset: int, chunks: dict[bytes, tuple[int, Chunk]]
) -> tuple[State | None, str | None]:
    pieces = []
    for i in range(manifest.chunks):
        found = chunks.get(chunk_key(manifest.partition, manifest.epoch, manifest.slot, i))
        if found is None:
            return None, f"incomplete: chunk {i} of {manifest.chunks} missing"
        chunk_offset, chunk = found
        if (chunk.seq, chunk.parts) != (manifest.seq, manifest.chunks) or chunk_offset > offset:
            return None, f"incomplete: chunk {i} of {manifest.chunks} belongs to another write"
        pieces.append(chunk.data)
    payload = b"".join(pieces)
    if len(payload) != manifest.length:
        return None, f"payload is {len(payload)} bytes, manifest says {manifest.length}"
    if hashlib.sha256(payload).digest() != manifest.sha256:
        return None, "payload SHA-256 mismatch"
    m = manifest
    return State(m.partition, m.epoch, m.seq, m.slot, m.chunks, offset, m.owner, payload), None


def cleanup_keys(selection: Selection, own_claim: bytes) -> list[bytes]:
    """The keys an owner tombstones after its first complete state: all it saw at restore but its claim.

    Safe because the owner's new state outranks every one of them (higher epoch), and is only
    tombstoned once that state has been confirmed as written before any newer claim.
    """
    return [key for key in selection.live if key != own_claim]


def newer_claim(partition: int, epoch: int, records: Iterable[LogRecord]) -> int | None:
    """The epoch of the first claim newer than ``epoch`` among ``records``, or None.

    An owner asks this of the records other writers put between its own, to learn whether it still
    owns the partition (see :mod:`worker.state_topic.client`).
    """
    for record in records:
        if record.offset <= epoch or record.value is None or not record.key:
            continue
        try:
            parsed = decode(record.value)
        except StateLogError:
            continue
        if isinstance(parsed, Claim) and parsed.partition == partition:
            return record.offset
    return None
