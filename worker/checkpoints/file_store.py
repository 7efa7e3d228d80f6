"""Checkpoint files: one per partition, versioned, checksummed, written atomically, owned by one deployment.

File layout (big-endian), format 2: ``b"SGTCKPT1"`` magic, format version (u16), owner length (u32),
payload length (u64), the owner (JSON: group id, features and labels topics, task), the payload (a
:meth:`worker.core.partition_state.PartitionState.to_bytes` blob), SHA-256 of everything before it.
Format 1, written by the previous release, has no owner (magic, version, payload length, payload,
SHA-256); such a file is still read, and adopted by the deployment that restores it. Nothing read
from disk is ever unpickled or evaluated.

Writing ``partition-0003.ckpt``: the new file goes to a temporary name unique across hosts and
processes (``.partition-0003.ckpt.<pid>.<random>.<host>.tmp``), locked while it is written, is
fsynced, the current file becomes ``partition-0003.ckpt.prev``, the temporary file is renamed to the
current name and the directory is fsynced. A crash at any point leaves at least one complete file;
restore takes the current file if it verifies and falls back to the previous one otherwise. A
temporary file nobody holds a lock on was left by a crash and is removed when a worker starts.

A :class:`CheckpointStore` is a directory used by one deployment. While a worker runs it holds a shared
lock on ``owner.lock``, which records the deployment: the processes of one deployment share the
directory, a process of another deployment is refused (:class:`OwnerConflict`), and so is a directory
that holds another deployment's checkpoints.

>>> import tempfile
>>> d = tempfile.mkdtemp()
>>> store = CheckpointStore(d, Owner("group-a", "features", None, "classification"))
>>> store.acquire()
>>> _ = store.write(3, b"state-1"); _ = store.write(3, b"state-2")
>>> store.read_newest(3).payload
b'state-2'
>>> sorted(p.name for p in Path(d).iterdir())
['owner.lock', 'partition-0003.ckpt', 'partition-0003.ckpt.prev']
>>> other = CheckpointStore(d, Owner("group-b", "features", None, "classification"))
>>> import textwrap
>>> try:
...     other.acquire()
... except OwnerConflict as exc:
...     print(textwrap.fill(str(exc).replace(d, "DIR"), 100))
checkpoint directory DIR is in use by a running worker of another deployment (group_id 'group-a',
not 'group-b'). Give each deployment a checkpoint_dir of its own.
>>> store.release()
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import logging
import os
import re
import secrets
import socket
import struct
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

import orjson

if TYPE_CHECKING:
    from worker.config import WorkerSettings

MAGIC = b"SGTCKPT1"
FORMAT_VERSION = 2
_LEGACY_VERSION = 1  # no owner: written by the previous release
_PREFIX = struct.Struct(">8sH")
_HEAD = struct.Struct(">8sHIQ")  # magic, version, owner length, payload length
_LEGACY_HEAD = struct.Struct(">8sHQ")  # magic, version, payload length
_DIGEST = 32
_MAX_OWNER_BYTES = 1 << 16
_NAME = re.compile(r"^partition-(\d+)\.ckpt$")
LOCK_NAME = "owner.lock"
# temporary files: ".<name>.<pid>.<random>.<host>.tmp"; the previous release wrote ".<name>.<pid>.tmp"
_TEMPORARY = re.compile(r"^\..+\.\d+\.(?:[0-9a-f]{8}\.[A-Za-z0-9_.-]+\.)?tmp$")
_LOCK_WAIT_S = 10.0  # a process holds the exclusive lock only for the moment it takes to start


class CheckpointError(ValueError):
    """A checkpoint file is missing, truncated, corrupt or of an unknown version."""


class OwnerConflict(Exception):
    """The checkpoint directory belongs to another deployment (its files, or a running worker of it).

    Not a :class:`ValueError`: a checkpoint of another deployment is not a corrupt file to skip (that
    would start the partition afresh and overwrite the other deployment's state), it stops the worker.
    """


@dataclass(frozen=True)
class Owner:
    """The deployment a checkpoint belongs to: what decides which records its offsets count.

    >>> a = Owner("g1", "features", "labels", "classification")
    >>> Owner.from_json(a.to_json()) == a
    True
    >>> a.differences(Owner("g2", "features", None, "classification"))
    ["group_id 'g1', not 'g2'", "labels_topic 'labels', not None"]
    """

    group_id: str
    features_topic: str
    labels_topic: str | None
    task: str

    @classmethod
    def of(cls, settings: WorkerSettings) -> Owner:
        return cls(settings.group_id, settings.features_topic, settings.labels_topic, settings.task)

    def to_json(self) -> bytes:
        return orjson.dumps(asdict(self), option=orjson.OPT_SORT_KEYS)

    @classmethod
    def from_json(cls, data: bytes) -> Owner:
        """Parse and check an owner; raises CheckpointError when it is not one."""
        try:
            doc = orjson.loads(data)
        except orjson.JSONDecodeError:
            raise CheckpointError("the owner is not valid JSON") from None
        names = [f.name for f in fields(cls)]
        if not isinstance(doc, dict) or sorted(doc) != sorted(names):
            raise CheckpointError(f"the owner must be an object with exactly {', '.join(names)}")
        if not all(isinstance(doc[n], str) or (n == "labels_topic" and doc[n] is None) for n in names):
            raise CheckpointError("the owner's values must be strings (labels_topic may be null)")
        return cls(**doc)

    def differences(self, current: Owner) -> list[str]:
        """What differs from ``current``, as ``"name <ours>, not <current's>"``."""
        return [
            f"{f.name} {getattr(self, f.name)!r}, not {getattr(current, f.name)!r}"
            for f in fields(self)
            if getattr(self, f.name) != getattr(current, f.name)
        ]


class Decoded(NamedTuple):
    """The contents of a verified checkpoint file; ``owner`` is None for the previous release's format."""

    owner: Owner | None
    payload: bytes


@dataclass(frozen=True)
class Loaded:
    """A verified checkpoint payload, where it came from and whose it is (None: written without an owner)."""

    path: Path
    payload: bytes
    owner: Owner | None = None


def checkpoint_path(directory: str | Path, partition: int) -> Path:
    return Path(directory) / f"partition-{partition:04d}.ckpt"


def previous_path(directory: str | Path, partition: int) -> Path:
    return Path(directory) / f"partition-{partition:04d}.ckpt.prev"


def temporary_path(target: Path) -> Path:
    """A name for ``target``'s temporary file that no other process, on this host or another, uses.

    The process id alone is not enough: it is 1 in every container.
    """
    host = re.sub(r"[^A-Za-z0-9.-]", "_", socket.gethostname())[:64] or "host"
    return target.with_name(f".{target.name}.{os.getpid()}.{secrets.token_hex(4)}.{host}.tmp")


def _pieces(payload: bytes, owner: Owner) -> tuple[bytes, bytes, bytes]:
    """Header, owner and digest: the file is ``header + owner + payload + digest``.

    Kept apart so that a large payload is hashed and written without being copied.
    """
    owner_json = owner.to_json()
    head = _HEAD.pack(MAGIC, FORMAT_VERSION, len(owner_json), len(payload))
    digest = hashlib.sha256(head)
    digest.update(owner_json)
    digest.update(payload)
    return head, owner_json, digest.digest()


def encode(payload: bytes, owner: Owner) -> bytes:
    """The file bytes for a payload."""
    head, owner_json, digest = _pieces(payload, owner)
    return head + owner_json + payload + digest


def decode(data: bytes) -> Decoded:
    """The owner and payload of checkpoint file bytes; raises CheckpointError if anything does not verify."""
    if len(data) < _LEGACY_HEAD.size + _DIGEST:
        raise CheckpointError("file is truncated")
    magic, version = _PREFIX.unpack_from(data)
    if magic != MAGIC:
        raise CheckpointError("not a checkpoint file (bad magic)")
    if version == FORMAT_VERSION:
        if len(data) < _HEAD.size + _DIGEST:
            raise CheckpointError("file is truncated")
        _, _, owner_size, size = _HEAD.unpack_from(data)
        start = _HEAD.size + owner_size
    elif version == _LEGACY_VERSION:
        _, _, size = _LEGACY_HEAD.unpack_from(data)
        owner_size, start = 0, _LEGACY_HEAD.size
    else:
        raise CheckpointError(f"unsupported checkpoint format version {version}")
    if len(data) != start + size + _DIGEST:
        raise CheckpointError("file length does not match its header")
    if hashlib.sha256(memoryview(data)[:-_DIGEST]).digest() != data[-_DIGEST:]:
        raise CheckpointError("checksum mismatch")
    owner = Owner.from_json(data[start - owner_size : start]) if version == FORMAT_VERSION else None
    return Decoded(owner, data[start:-_DIGEST])


def directory_problem(directory: str | Path) -> str | None:
    """Why checkpoints cannot be written to ``directory`` (created if missing), or None.

    The worker asks this at start-up, so that a wrong path, a read-only volume or the wrong owner is
    refused at once rather than found at the first checkpoint. A probe file with a temporary file's
    name is written and removed again (a leftover one is never read).
    """
    directory = Path(directory)
    try:
        directory.mkdir(parents=True, exist_ok=True)
        probe = temporary_path(directory / "probe")
        probe.write_bytes(b"")
        probe.unlink(missing_ok=True)  # a worker starting meanwhile may have taken it for a leftover
    except OSError as exc:
        return f"cannot write checkpoints to {directory}: {exc.strerror or exc}"
    return None


def write_checkpoint(directory: str | Path, partition: int, payload: bytes, owner: Owner) -> Path:
    """Write durably and atomically; the file it replaces is kept as the previous checkpoint."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    target = checkpoint_path(directory, partition)
    tmp = temporary_path(target)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    try:
        with os.fdopen(fd, "wb") as handle:
            # The lock marks the file as being written, so that a worker starting meanwhile does not
            # take it for a crash's leftover. Such a worker may have removed it just before we locked.
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
            if os.fstat(handle.fileno()).st_nlink == 0:
                raise OSError(errno.ENOENT, "temporary file removed while it was created", str(tmp))
            head, owner_json, digest = _pieces(payload, owner)
            for piece in (head, owner_json, payload, digest):
                handle.write(piece)
            handle.flush()
            os.fsync(handle.fileno())
            if target.exists():
                os.replace(target, previous_path(directory, partition))
            os.replace(tmp, target)  # still locked: the name never lingers unlocked
    finally:
        tmp.unlink(missing_ok=True)
    _fsync_dir(directory)
    return target


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def read_owned(path: str | Path) -> Decoded:
    """The verified owner and payload of one checkpoint file."""
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise CheckpointError(f"cannot read: {exc.strerror}") from None
    return decode(data)


def read_file(path: str | Path) -> bytes:
    """The verified payload of one checkpoint file."""
    return read_owned(path).payload


def read_newest(
    directory: str | Path,
    partition: int,
    on_bad: Callable[[Path, str], None] | None = None,
    accept: Callable[[bytes], object] | None = None,
    owner: Owner | None = None,
    legacy_owner: Callable[[bytes], Owner] | None = None,
) -> Loaded | None:
    """The newest checkpoint of a partition that verifies (and that ``accept`` does not reject).

    ``accept`` may raise ValueError to reject a payload that verifies but cannot be used (another
    model version); ``on_bad(path, why)`` is told about every file skipped. With ``owner``, a file that
    verifies but belongs to another deployment raises :class:`OwnerConflict` (it is not skipped);
    ``legacy_owner(payload)`` says whose a file written without an owner is, as far as its payload
    tells (it may raise ValueError too).
    """
    for path in (checkpoint_path(directory, partition), previous_path(directory, partition)):
        if not path.exists():
            continue
        try:
            found, payload = read_owned(path)
            claimed = legacy_owner(payload) if found is None and legacy_owner is not None else found
            if owner is not None and claimed is not None and claimed != owner:
                raise OwnerConflict(_foreign_files_message(Path(directory), path, claimed, owner))
            if accept is not None:
                accept(payload)
        except ValueError as exc:
            if on_bad is not None:
                on_bad(path, str(exc))
            continue
        return Loaded(path, payload, found)
    return None


def partitions_in(directory: str | Path) -> list[int]:
    """Partitions that have a current or previous checkpoint file in the directory."""
    found = set()
    for path in Path(directory).iterdir():
        match = _NAME.match(path.name.removesuffix(".prev"))
        if match:
            found.add(int(match.group(1)))
    return sorted(found)


def _checkpoint_files(directory: Path) -> Iterator[Path]:
    for path in sorted(directory.iterdir()):
        if _NAME.match(path.name.removesuffix(".prev")):
            yield path


def _peek_owner(path: Path) -> Owner | None:
    """The owner a checkpoint file names, read from its header only (None: the previous format).

    Unverified: a caller that acts on a foreign owner verifies the whole file first.
    """
    with open(path, "rb") as handle:
        head = handle.read(_HEAD.size)
        if len(head) < _PREFIX.size:
            raise CheckpointError("file is truncated")
        magic, version = _PREFIX.unpack_from(head)
        if magic != MAGIC:
            raise CheckpointError("not a checkpoint file (bad magic)")
        if version == _LEGACY_VERSION:
            return None
        if version != FORMAT_VERSION or len(head) < _HEAD.size:
            raise CheckpointError("unreadable header")
        owner_size = _HEAD.unpack_from(head)[2]
        if owner_size > _MAX_OWNER_BYTES:
            raise CheckpointError("unreadable header")
        return Owner.from_json(handle.read(owner_size))


def _foreign_files_message(directory: Path, path: Path, found: Owner, current: Owner) -> str:
    return (
        f"checkpoint directory {directory} holds another deployment's checkpoints ({path.name} was "
        f"written for {'; '.join(found.differences(current))}). Give each deployment a checkpoint_dir "
        "of its own; move those files away only if that deployment's state is no longer wanted."
    )


class CheckpointStore:
    """The checkpoint directory of one deployment: writes carry its owner, reads refuse another's.

    :meth:`acquire` (once, at start-up, before the first read) locks the directory for this deployment,
    refuses a directory that holds another deployment's checkpoints or is in use by a running worker of
    another deployment, and removes the temporary files that crashes left; :meth:`release` unlocks it.
    Several processes of one deployment share a directory (each holds a shared lock).
    """

    def __init__(
        self,
        directory: str | Path,
        owner: Owner,
        log: logging.Logger | None = None,
        on_lost: Callable[[], None] | None = None,
    ) -> None:
        self.directory = Path(directory)
        self.owner = owner
        self.log = log or logging.getLogger("worker.checkpoint")
        self._lock_fd: int | None = None
        self._lock_id: tuple[int, int] | None = None  # (device, inode) of the lock file held
        self._wanted = False  # acquired and not released: a lost lock is taken again
        self._relock = threading.Lock()  # the loop's thread and the writer's may both find it lost
        self.on_lost: Callable[[], None] = on_lost or (
            lambda: None
        )  # told each time the directory or its lock vanished

    # -- the directory lock -------------------------------------------------------------------------

    def acquire(self) -> None:
        """Lock the directory for this deployment; raises OwnerConflict if it belongs to another.

        The lock file holds the deployment's owner. A process that finds no other process holding the
        lock takes it exclusively, checks the checkpoint files, cleans up and writes its owner into it,
        then keeps a shared lock, as does a process that finds its own deployment running. Turning the
        exclusive lock into a shared one is not atomic, so the owner is read again afterwards.
        """
        if self._lock_fd is not None:
            return
        self._take()
        self._wanted = True

    def _take(self) -> None:
        """Create (if missing) and lock the directory, as :meth:`acquire` describes."""
        self.directory.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.directory / LOCK_NAME, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            alone = _lock(fd, self.directory / LOCK_NAME)
            if alone:
                self._check_files()
                self._remove_leftovers()
                _write_owner(fd, self.owner)
                fcntl.flock(fd, fcntl.LOCK_SH)
            running = _read_owner(fd)
            if running != self.owner:
                raise OwnerConflict(self._running_message(running))
            if not alone:
                self._check_files()
                self._remove_leftovers()
        except BaseException:
            os.close(fd)
            raise
        self._lock_fd = fd
        info = os.fstat(fd)
        self._lock_id = (info.st_dev, info.st_ino)

    def release(self) -> None:
        self._wanted = False
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = self._lock_id = None

    def _holds_lock(self) -> bool:
        """Whether the directory's lock file is still the one this process locked."""
        try:
            info = os.stat(self.directory / LOCK_NAME)
        except OSError:  # gone, or the directory is (under) a file now
            return False
        return (info.st_dev, info.st_ino) == self._lock_id

    def _ensure_locked(self) -> None:
        """Take the directory again if it (or its lock file) vanished while this process held it.

        Deleted under a running worker, the directory used to be re-created by the next write without
        its lock file: bare, so that a worker of another deployment could take it, and silently. Now
        the loss is logged as an error and :attr:`on_lost` told, and the directory is taken as at
        start-up (:meth:`acquire`: created, locked, its owner written, its files checked, which raises
        OwnerConflict if another deployment took it meanwhile). While it cannot be (the path is a
        file now, the disk is read-only), the write fails with that OSError, as any failed write does,
        and the next attempt tries again.
        """
        if not self._wanted or (self._lock_fd is not None and self._holds_lock()):
            return
        with self._relock:
            if self._lock_fd is not None:
                if self._holds_lock():
                    return  # another thread took it again meanwhile
                self.log.error(
                    "checkpoint directory lost while the worker ran (deleted, or its lock file removed); "
                    "taking it again with its lock; the checkpoints it held are gone",
                    extra={"fields": {"directory": str(self.directory)}},
                )
                self.on_lost()
                os.close(self._lock_fd)
                self._lock_fd = self._lock_id = None
            self._take()
            self.log.warning(
                "checkpoint directory taken again", extra={"fields": {"directory": str(self.directory)}}
            )

    def _running_message(self, running: Owner | None) -> str:
        what = "an unknown deployment" if running is None else "another deployment"
        differs = "" if running is None else f" ({'; '.join(running.differences(self.owner))})"
        return (
            f"checkpoint directory {self.directory} is in use by a running worker of {what}{differs}. "
            "Give each deployment a checkpoint_dir of its own."
        )

    def _check_files(self) -> None:
        """Refuse a directory holding a (verified) checkpoint of another deployment."""
        for path in _checkpoint_files(self.directory):
            try:
                if _peek_owner(path) in (None, self.owner):
                    continue
                found = read_owned(path).owner  # verified: a damaged header is not a foreign owner
            except (OSError, CheckpointError):
                continue  # unreadable: restore reports it and falls back
            if found is not None and found != self.owner:
                raise OwnerConflict(_foreign_files_message(self.directory, path, found, self.owner))

    def _remove_leftovers(self) -> None:
        """Remove the temporary files that no process is writing: crashes left them behind."""
        removed, freed = 0, 0
        for path in self.directory.iterdir():
            if not _TEMPORARY.match(path.name):
                continue
            with contextlib.suppress(OSError), open(path, "rb") as handle:
                try:
                    fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    continue  # being written
                freed += os.fstat(handle.fileno()).st_size
                path.unlink()
                removed += 1
        if removed:
            self.log.info(
                "removed temporary checkpoint files left by a crash",
                extra={"fields": {"directory": str(self.directory), "files": removed, "bytes": freed}},
            )

    # -- reading and writing ------------------------------------------------------------------------

    def write(self, partition: int, payload: bytes) -> Path:
        """Write the partition's checkpoint durably and atomically, with this deployment as its owner
        (taking the directory again first if it vanished: :meth:`_ensure_locked`)."""
        self._ensure_locked()
        return write_checkpoint(self.directory, partition, payload, self.owner)

    def read_newest(
        self,
        partition: int,
        on_bad: Callable[[Path, str], None] | None = None,
        accept: Callable[[bytes], object] | None = None,
        legacy_owner: Callable[[bytes], Owner] | None = None,
    ) -> Loaded | None:
        """The partition's newest usable checkpoint (see :func:`read_newest`); raises OwnerConflict if
        it belongs to another deployment. One written without an owner is adopted, with a log line."""
        loaded = read_newest(self.directory, partition, on_bad, accept, self.owner, legacy_owner)
        if loaded is not None and loaded.owner is None:
            self.log.warning(
                "adopting a checkpoint written without an owner (previous release) as this deployment's",
                extra={"fields": {"path": str(loaded.path), "owner": asdict(self.owner)}},
            )
        return loaded


def _lock(fd: int, path: Path) -> bool:
    """Take the lock: exclusively if no process holds it (True), else shared (False)."""
    deadline = time.monotonic() + _LOCK_WAIT_S
    while True:
        with contextlib.suppress(BlockingIOError):
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        with contextlib.suppress(BlockingIOError):
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
            return False
        if time.monotonic() > deadline:  # someone holds it exclusively for longer than a start-up takes
            raise OSError(errno.EWOULDBLOCK, "another process keeps the lock taken", str(path))
        time.sleep(0.02)


def _write_owner(fd: int, owner: Owner) -> None:
    data = owner.to_json() + b"\n"
    os.ftruncate(fd, 0)
    os.pwrite(fd, data, 0)
    os.fsync(fd)


def _read_owner(fd: int) -> Owner | None:
    data = os.pread(fd, _MAX_OWNER_BYTES, 0)
    try:
        return Owner.from_json(data)
    except CheckpointError:
        return None
