"""Checkpoint files: format checks, atomic replacement keeping the previous file, fallback on corruption."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from worker.checkpoint import (
    CheckpointError,
    checkpoint_path,
    decode,
    directory_problem,
    encode,
    partitions_in,
    previous_path,
    read_file,
    read_newest,
    write_checkpoint,
)


@given(st.binary(max_size=2000))
def test_encode_decode_round_trip(payload: bytes) -> None:
    assert decode(encode(payload)) == payload


@settings(max_examples=200)
@given(st.binary(min_size=1, max_size=300), st.data())
def test_any_single_byte_change_or_truncation_is_detected(payload: bytes, data: st.DataObject) -> None:
    blob = bytearray(encode(payload))
    i = data.draw(st.integers(0, len(blob) - 1))
    flipped = bytearray(blob)
    flipped[i] ^= 1 << data.draw(st.integers(0, 7))
    with pytest.raises(CheckpointError):
        decode(bytes(flipped))
    with pytest.raises(CheckpointError):
        decode(bytes(blob[:i]))


def test_unknown_version_and_foreign_files_are_named() -> None:
    blob = bytearray(encode(b"x"))
    blob[9] = 7
    with pytest.raises(CheckpointError, match="version 7"):
        decode(bytes(blob))
    with pytest.raises(CheckpointError, match="magic"):
        decode(b"PK\x03\x04" + b"\0" * 60)


def test_writes_keep_the_previous_file_and_leave_no_temporaries(tmp_path: Path) -> None:
    for i in range(3):
        write_checkpoint(tmp_path, 5, f"state {i}".encode())
    assert sorted(p.name for p in tmp_path.iterdir()) == ["partition-0005.ckpt", "partition-0005.ckpt.prev"]
    assert read_file(checkpoint_path(tmp_path, 5)) == b"state 2"
    assert read_file(previous_path(tmp_path, 5)) == b"state 1"
    assert partitions_in(tmp_path) == [5]


def test_a_corrupt_newest_checkpoint_is_reported_and_the_previous_one_used(tmp_path: Path) -> None:
    write_checkpoint(tmp_path, 0, b"old")
    write_checkpoint(tmp_path, 0, b"new")
    path = checkpoint_path(tmp_path, 0)
    data = bytearray(path.read_bytes())
    data[30] ^= 0xFF
    path.write_bytes(bytes(data))
    bad: list[tuple[Path, str]] = []
    loaded = read_newest(tmp_path, 0, on_bad=lambda p, why: bad.append((p, why)))
    assert loaded is not None and loaded.payload == b"old" and loaded.path == previous_path(tmp_path, 0)
    assert bad == [(path, "checksum mismatch")]


def test_a_rejected_payload_falls_back_too_and_nothing_valid_gives_none(tmp_path: Path) -> None:
    write_checkpoint(tmp_path, 1, b"good")
    write_checkpoint(tmp_path, 1, b"other task")

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
