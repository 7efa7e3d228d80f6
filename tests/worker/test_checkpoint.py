"""Checkpoint files: format checks, atomic replacement keeping the previous file, fallback on corruption;
owners (refusing another deployment's state, adopting the previous release's), the directory lock,
unique temporary files and their clean-up."""

from __future__ import annotations

import fcntl
import logging
import os
import re
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sgt.evaluation import Prequential
from worker.checkpoints.file_store import (
    LOCK_NAME,
    CheckpointError,
    CheckpointStore,
    Owner,
    OwnerConflict,
    checkpoint_path,
    decode,
    directory_problem,
    encode,
    partitions_in,
    previous_path,
    read_file,
    read_newest,
    read_owned,
    temporary_path,
    write_checkpoint,
)

OWNER = Owner("group", "features", None, "classification")


@given(st.binary(max_size=2000))
def test_encode_decode_round_trip(payload: bytes) -> None:
    assert decode(encode(payload, OWNER)) == (OWNER, payload)


@settings(max_examples=200)
@given(st.binary(min_size=1, max_size=300), st.data())
def test_any_single_byte_change_or_truncation_is_detected(payload: bytes, data: st.DataObject) -> None:
    blob = bytearray(encode(payload, OWNER))
    i = data.draw(st.integers(0, len(blob) - 1))
    flipped = bytearray(blob)
    flipped[i] ^= 1 << data.draw(st.integers(0, 7))
    with pytest.raises(CheckpointError):
        decode(bytes(flipped))
    with pytest.raises(CheckpointError):
        decode(bytes(blob[:i]))


def test_unknown_version_and_foreign_files_are_named() -> None:
    blob = bytearray(encode(b"x", OWNER))
    blob[9] = 7
    with pytest.raises(CheckpointError, match="version 7"):
        decode(bytes(blob))
    with pytest.raises(CheckpointError, match="magic"):
        decode(b"PK\x03\x04" + b"\0" * 60)


def test_writes_keep_the_previous_file_and_leave_no_temporaries(tmp_path: Path) -> None:
    for i in range(3):
        write_checkpoint(tmp_path, 5, f"state {i}".encode(), OWNER)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["partition-0005.ckpt", "partition-0005.ckpt.prev"]
    assert read_file(checkpoint_path(tmp_path, 5)) == b"state 2"
    assert read_file(previous_path(tmp_path, 5)) == b"state 1"
    assert partitions_in(tmp_path) == [5]


def test_a_corrupt_newest_checkpoint_is_reported_and_the_previous_one_used(tmp_path: Path) -> None:
    write_checkpoint(tmp_path, 0, b"old", OWNER)
    write_checkpoint(tmp_path, 0, b"new", OWNER)
    path = checkpoint_path(tmp_path, 0)
    data = bytearray(path.read_bytes())
    data[30] ^= 0xFF
    path.write_bytes(bytes(data))
    bad: list[tuple[Path, str]] = []
    loaded = read_newest(tmp_path, 0, on_bad=lambda p, why: bad.append((p, why)))
    assert loaded is not None and loaded.payload == b"old" and loaded.path == previous_path(tmp_path, 0)
    assert bad == [(path, "checksum mismatch")]


def test_a_rejected_payload_falls_back_too_and_nothing_valid_gives_none(tmp_path: Path) -> None:
    write_checkpoint(tmp_path, 1, b"good", OWNER)
    write_checkpoint(tmp_path, 1, b"other task", OWNER)

    def accept(payload: bytes) -> None:
        if payload != b"good":
            raise ValueError("written for another task")

    assert read_newest(tmp_path, 1, accept=accept).payload == b"good"  # type: ignore[union-attr]
    previous_path(tmp_path, 1).write_bytes(b"garbage")
    assert read_newest(tmp_path, 1, accept=accept) is None
    assert read_newest(tmp_path, 9) is None


def test_directory_problem_creates_the_directory_and_leaves_nothing_behind(tmp_path: Path) -> None:
    directory = tmp_path / "a" / "b"
    assert directory_problem(directory) is None
    assert directory.is_dir() and not list(directory.iterdir())
    (tmp_path / "file").write_text("")
    assert "cannot write checkpoints to" in (directory_problem(tmp_path / "file") or "")


# -- owners, the directory lock, temporary files ---------------------------------------------------

OTHER = Owner("other-group", "features", None, "classification")
FIXTURE = Path(__file__).parent / "fixtures" / "legacy-v1" / "partition-0000.ckpt"


def test_a_store_writes_its_owner_and_another_deployment_is_refused_its_checkpoint(tmp_path: Path) -> None:
    store = CheckpointStore(tmp_path, OWNER)
    store.write(0, b"old")
    store.write(0, b"new")
    assert read_owned(checkpoint_path(tmp_path, 0)) == (OWNER, b"new")
    bad: list[tuple[Path, str]] = []
    with pytest.raises(OwnerConflict, match="group_id 'group', not 'other-group'") as refused:
        CheckpointStore(tmp_path, OTHER).read_newest(0, on_bad=lambda p, why: bad.append((p, why)))
    assert "partition-0000.ckpt was written for" in str(refused.value)
    assert bad == []  # refused, not skipped as corrupt (which would start afresh and overwrite it)


def test_start_up_refuses_a_directory_holding_another_deployments_checkpoints(tmp_path: Path) -> None:
    store = CheckpointStore(tmp_path, OWNER)
    store.acquire()
    store.write(2, b"x")
    store.release()
    other = CheckpointStore(tmp_path, Owner("group", "features", "labels", "regression"))
    with pytest.raises(OwnerConflict) as refused:
        other.acquire()
    message = str(refused.value)
    assert "holds another deployment's checkpoints (partition-0002.ckpt was written for" in message
    assert "labels_topic None, not 'labels'; task 'classification', not 'regression'" in message
    assert "Give each deployment a checkpoint_dir of its own" in message
    for path in tmp_path.glob("partition-*"):  # once they are gone, the directory can change hands
        path.unlink()
    other.acquire()
    assert Owner.from_json((tmp_path / LOCK_NAME).read_bytes()) == other.owner
    other.release()


def test_processes_of_one_deployment_share_a_directory_and_another_is_refused_while_one_runs(
    tmp_path: Path,
) -> None:
    first, second, stranger = (CheckpointStore(tmp_path, o) for o in (OWNER, OWNER, OTHER))
    first.acquire()
    second.acquire()
    first.write(0, b"a")
    second.write(1, b"b")
    for holder in (first, second):
        with pytest.raises(OwnerConflict, match="in use by a running worker of another deployment"):
            stranger.acquire()
        holder.release()
    with pytest.raises(OwnerConflict, match="holds another deployment's checkpoints"):
        stranger.acquire()


def test_the_lock_is_held_across_processes_and_released_by_a_killed_one(tmp_path: Path) -> None:
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys; from worker.checkpoints.file_store import CheckpointStore, Owner; "
            f"CheckpointStore(sys.argv[1], Owner{tuple(OTHER.__dict__.values())!r}).acquire(); "
            "print('locked', flush=True); sys.stdin.read()",
            str(tmp_path),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "locked\n"
        with pytest.raises(OwnerConflict, match="group_id 'other-group', not 'group'"):
            CheckpointStore(tmp_path, OWNER).acquire()
    finally:
        holder.kill()
        holder.wait(10)
    store = CheckpointStore(tmp_path, OWNER)  # no file of the other deployment was written
    store.acquire()
    store.release()


def test_temporary_names_are_unique_across_processes_and_hosts(tmp_path: Path) -> None:
    target = checkpoint_path(tmp_path, 3)
    names = {temporary_path(target).name for _ in range(200)}
    assert len(names) == 200
    host = re.sub(r"[^A-Za-z0-9.-]", "_", socket.gethostname())[:64]
    assert all(
        n.startswith(f".partition-0003.ckpt.{os.getpid()}.") and n.endswith(f".{host}.tmp") for n in names
    )


def test_leftover_temporary_files_are_removed_at_start_but_not_one_being_written(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    leftovers = [
        tmp_path / ".partition-0000.ckpt.1.tmp",  # the previous release's name
        tmp_path / ".probe.1.tmp",
        temporary_path(checkpoint_path(tmp_path, 1)),
        temporary_path(tmp_path / "probe"),
    ]
    for path in leftovers:
        path.write_bytes(b"x" * 1000)
    busy = temporary_path(checkpoint_path(tmp_path, 2))
    others = [tmp_path / "notes.tmp", tmp_path / "partition-0005.ckpt.bak"]
    for path in [busy, *others]:
        path.write_bytes(b"y")
    caplog.set_level(logging.INFO, logger="test.checkpoint")
    with open(busy, "rb") as writing:
        fcntl.flock(writing.fileno(), fcntl.LOCK_EX)  # as a live writer holds it
        store = CheckpointStore(tmp_path, OWNER, logging.getLogger("test.checkpoint"))
        store.acquire()
        store.release()
    assert not any(p.exists() for p in leftovers)
    assert busy.exists() and all(p.exists() for p in others)
    [record] = [r for r in caplog.records if "temporary checkpoint files" in r.getMessage()]
    assert record.fields["files"] == 4 and record.fields["bytes"] == 4000  # type: ignore[attr-defined]


def test_a_write_fails_cleanly_if_its_temporary_file_is_removed_before_it_is_locked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A starting worker may take a temporary file created a moment ago for a leftover."""
    import worker.checkpoints.file_store as module

    real_flock = fcntl.flock

    def flock_after_removal(fd: int, operation: int) -> None:
        for path in tmp_path.glob(".partition-*.tmp"):
            path.unlink()
        real_flock(fd, operation)

    monkeypatch.setattr(module.fcntl, "flock", flock_after_removal)
    with pytest.raises(OSError, match="removed while it was created"):
        write_checkpoint(tmp_path, 0, b"payload", OWNER)
    monkeypatch.undo()
    assert list(tmp_path.iterdir()) == []


def test_a_checkpoint_of_the_previous_release_is_adopted_and_restores_exactly(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The fixture was written by the release before owners (format 1), from a PartitionState of
    partition 0 with labels on their own topic: 400 features and 385 labels processed, a 9-node
    model, 20 features waiting for their labels and 5 labels that never met their features."""
    from worker.checkpoints.restore import load_state
    from worker.config import load_settings
    from worker.core.partition_state import split_state

    shutil.copy(FIXTURE, tmp_path / FIXTURE.name)
    settings = load_settings(
        {
            "checkpoint_dir": str(tmp_path),
            "group_id": "adopter",
            "features_topic": "legacy-v1-features",
            "labels_topic": "legacy-v1-labels",
        },
        env={},
    )
    caplog.set_level(logging.WARNING, logger="test.checkpoint")
    store = CheckpointStore(tmp_path, Owner.of(settings), logging.getLogger("test.checkpoint"))
    store.acquire()  # a file without an owner is nobody else's
    state = load_state(settings, 0, store=store)
    assert "adopting a checkpoint written without an owner" in caplog.text
    assert read_owned(FIXTURE).owner is None
    header, model_blob = split_state(read_file(FIXTURE))
    # the same model (the library saves it in its current format)
    assert state.model.to_bytes() == type(state.model).from_bytes(model_blob).to_bytes()
    assert state.model.n_nodes == 9
    assert state.next_offsets == header["next_offsets"] == [400, 385]
    assert (len(state.join.features), len(state.join.labels)) == (20, 5)
    # the prequential state of that release restores into the current format with the same counts
    assert state.prequential.n == header["prequential"]["n"] == 380
    assert state.prequential.error == Prequential.from_dict(header["prequential"]).error
    store.write(0, state.to_bytes())  # from now on it is this deployment's
    assert read_owned(checkpoint_path(tmp_path, 0)).owner == Owner.of(settings)
    assert read_owned(previous_path(tmp_path, 0)).owner is None
    assert load_state(settings, 0, store=store).to_bytes() == state.to_bytes()
    store.release()


def test_a_checkpoint_of_the_previous_release_for_other_topics_or_task_is_refused(tmp_path: Path) -> None:
    from worker.checkpoints.restore import load_state
    from worker.config import load_settings

    shutil.copy(FIXTURE, tmp_path / FIXTURE.name)
    settings = load_settings(
        {
            "checkpoint_dir": str(tmp_path),
            "features_topic": "legacy-v1-features",
            "labels_topic": "legacy-v1-labels",
            "task": "regression",
        },
        env={},
    )
    with pytest.raises(OwnerConflict, match="task 'classification', not 'regression'"):
        load_state(settings, 0)


@pytest.mark.parametrize("how", ["deleted", "lock file removed"])
def test_a_checkpoint_directory_lost_while_running_is_recreated_with_its_lock_and_reported(
    tmp_path: Path, how: str, caplog: pytest.LogCaptureFixture
) -> None:
    """The directory (or its lock file) vanished under a running worker: the next write used to create a
    bare directory, without the owner lock that keeps another deployment out, and say nothing. Now the
    store takes the directory again as at start-up (lock, owner, checks), logs an error and counts it."""
    directory = tmp_path / "ckpt"
    store = CheckpointStore(directory, OWNER)
    counted: list[int] = []
    store.on_lost = lambda: counted.append(1)
    store.acquire()
    store.write(0, b"before")
    if how == "deleted":
        shutil.rmtree(directory)
    else:
        (directory / LOCK_NAME).unlink()
    with caplog.at_level(logging.ERROR, logger="worker.checkpoints.file_store"):
        store.write(0, b"after")
    assert Owner.from_json((directory / LOCK_NAME).read_bytes().strip()) == OWNER
    assert read_newest(directory, 0).payload == b"after"  # type: ignore[union-attr]
    assert counted == [1] and "checkpoint directory lost" in caplog.text
    stranger = CheckpointStore(directory, OTHER)
    with pytest.raises(OwnerConflict, match="in use by a running worker of another deployment"):
        stranger.acquire()  # the lock is held again
    store.write(0, b"again")  # nothing lost this time: nothing reported
    assert counted == [1]
    store.release()
