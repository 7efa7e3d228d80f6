"""Checkpoint files: one per partition, versioned, checksummed, written atomically, previous one kept.

File layout (big-endian): ``b"SGTCKPT1"`` magic, format version (u16), payload length (u64), payload
(a :meth:`worker.state.PartitionState.to_bytes` blob), SHA-256 of everything before it. Nothing read
from disk is ever unpickled or evaluated.

Writing ``partition-0003.ckpt``: the new file goes to a temporary name, is fsynced, the current file
becomes ``partition-0003.ckpt.prev``, the temporary file is renamed to the current name and the
directory is fsynced. A crash at any point leaves at least one complete file; restore takes the
current file if it verifies and falls back to the previous one otherwise.

>>> import tempfile
>>> d = tempfile.mkdtemp()
>>> _ = write_checkpoint(d, 3, b"state-1"); _ = write_checkpoint(d, 3, b"state-2")
>>> read_newest(d, 3).payload
b'state-2'
>>> sorted(p.name for p in Path(d).iterdir())
['partition-0003.ckpt', 'partition-0003.ckpt.prev']
"""

from __future__ import annotations

import hashlib
import os
import re
import struct
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

MAGIC = b"SGTCKPT1"
FORMAT_VERSION = 1
_HEAD = struct.Struct(">8sHQ")
_DIGEST = 32
_NAME = re.compile(r"^partition-(\d+)\.ckpt$")


class CheckpointError(ValueError):
    """A checkpoint file is missing, truncated, corrupt or of an unknown version."""


@dataclass(frozen=True)
class Loaded:
    """A verified checkpoint payload and where it came from."""

    path: Path
    payload: bytes


def checkpoint_path(directory: str | Path, partition: int) -> Path:
    return Path(directory) / f"partition-{partition:04d}.ckpt"


def previous_path(directory: str | Path, partition: int) -> Path:
    return Path(directory) / f"partition-{partition:04d}.ckpt.prev"


def encode(payload: bytes) -> bytes:
    """The file bytes for a payload."""
    body = _HEAD.pack(MAGIC, FORMAT_VERSION, len(payload)) + payload
    return body + hashlib.sha256(body).digest()


def decode(data: bytes) -> bytes:
    """The payload of checkpoint file bytes; raises CheckpointError if anything does not verify."""
    if len(data) < _HEAD.size + _DIGEST:
        raise CheckpointError("file is truncated")
    magic, version, size = _HEAD.unpack_from(data)
    if magic != MAGIC:
        raise CheckpointError("not a checkpoint file (bad magic)")
    if version != FORMAT_VERSION:
        raise CheckpointError(f"unsupported checkpoint format version {version}")
    if len(data) != _HEAD.size + size + _DIGEST:
        raise CheckpointError("file length does not match its header")
    if hashlib.sha256(data[:-_DIGEST]).digest() != data[-_DIGEST:]:
        raise CheckpointError("checksum mismatch")
    return data[_HEAD.size : -_DIGEST]


def directory_problem(directory: str | Path) -> str | None:
    """Why checkpoints cannot be written to ``directory`` (created if missing), or None.

    The worker asks this at start-up, so that a wrong path, a read-only volume or the wrong owner is
    refused at once rather than found at the first checkpoint. A probe file with the temporary
    files' name pattern is written and removed again (a leftover one is never read).
    """
    directory = Path(directory)
    try:
        directory.mkdir(parents=True, exist_ok=True)
        probe = directory / f".probe.{os.getpid()}.tmp"
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as exc:
        return f"cannot write checkpoints to {directory}: {exc.strerror or exc}"
    return None


def write_checkpoint(directory: str | Path, partition: int, payload: bytes) -> Path:
    """Write durably and atomically; the file it replaces is kept as the previous checkpoint."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    target = checkpoint_path(directory, partition)
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(encode(payload))
            handle.flush()
            os.fsync(handle.fileno())
        if target.exists():
            os.replace(target, previous_path(directory, partition))
        os.replace(tmp, target)
    finally:
        if tmp.exists():
            tmp.unlink()
    _fsync_dir(directory)
    return target


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def read_file(path: str | Path) -> bytes:
    """The verified payload of one checkpoint file."""
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise CheckpointError(f"cannot read: {exc.strerror}") from None
    return decode(data)


def read_newest(
    directory: str | Path,
    partition: int,
    on_bad: Callable[[Path, str], None] | None = None,
    accept: Callable[[bytes], object] | None = None,
) -> Loaded | None:
    """The newest checkpoint of a partition that verifies (and that ``accept`` does not reject).

    ``accept`` may raise ValueError to reject a payload that verifies but cannot be used (another
    task, topic or model version); ``on_bad(path, why)`` is told about every file skipped.
    """
    for path in (checkpoint_path(directory, partition), previous_path(directory, partition)):
        if not path.exists():
            continue
        try:
            payload = read_file(path)
            if accept is not None:
                accept(payload)
        except ValueError as exc:
            if on_bad is not None:
                on_bad(path, str(exc))
            continue
        return Loaded(path, payload)
    return None


def partitions_in(directory: str | Path) -> list[int]:
    """Partitions that have a current or previous checkpoint file in the directory."""
    found = set()
    for path in Path(directory).iterdir():
        match = _NAME.match(path.name.removesuffix(".prev"))
        if match:
            found.add(int(match.group(1)))
    return sorted(found)
