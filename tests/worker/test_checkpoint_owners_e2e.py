"""Checkpoint ownership against the real broker, with real worker processes.

(a) A worker of another deployment (another group id, or another task) given a directory in use is
refused with exit code 2 and a log line saying what differs and what to do, while the running worker
goes on; once that worker has stopped, the directory's checkpoints still refuse it; its files are left
byte for byte as they were. Before owners, such a worker adopted or overwrote the state.
(b) A checkpoint written by the release before owners (format 1) is adopted by the deployment that
restores it, which continues it exactly: the final model is byte-identical to the sgt library run
offline over every record, the fixture's and the new ones.
"""

from __future__ import annotations

import hashlib
import signal
import struct
import subprocess
import sys
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import pytest

from sgt import SGTClassifier
from tests.kafka_util import produce_records, read_all
from tests.worker.worker_util import (  # start_worker_fixture provides the start_worker fixture
    caught_up,
    checkpoint_headers,
    start_worker_fixture,  # noqa: F401
    wait_for,
    worker_args,
)
from worker.checkpoints.file_store import Owner, checkpoint_path, read_owned
from worker.core.partition_state import split_state
from worker.devtools.embedded_broker import create_topics

FIXTURE = Path(__file__).parent / "fixtures" / "legacy-v1" / "partition-0000.ckpt"


def _files(directory: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(directory.glob("partition-*"))}


def _refused(args: list[str], log: Path) -> dict[str, Any]:
    """Run a worker that must refuse to start; return its refusal log line."""
    out = subprocess.run(
        [sys.executable, "-m", "worker", "run", *args], capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 2, out.stderr[-3000:]
    log.write_text(out.stderr)
    lines = [orjson.loads(line) for line in out.stderr.splitlines()]
    [refusal] = [line for line in lines if line["msg"] == "checkpoint directory refused"]
    assert refusal["level"] == "error"
    return refusal


def test_another_deployment_is_refused_a_directory_in_use_and_one_holding_its_checkpoints(
    kafka_bootstrap: str, tmp_path: Path, start_worker: Callable
) -> None:
    tag = uuid.uuid4().hex[:8]
    topics = {k: f"owners-{k}-{tag}" for k in ("features", "predictions", "dead")}
    create_topics(kafka_bootstrap, list(topics.values()), 2)
    records = [
        (f"k{i}".encode(), orjson.dumps({"id": f"r{i}", "x": {"a": float(i % 7)}, "y": i % 2}))
        for i in range(300)
    ]
    produce_records(kafka_bootstrap, topics["features"], records)
    ends = {"features": {0: 0, 1: 0}}
    for m in read_all(kafka_bootstrap, topics["features"], 2, expect=300):
        ends["features"][m.partition()] = max(ends["features"][m.partition()], m.offset() + 1)
    ckpt = tmp_path / "ckpt"
    first = start_worker(
        worker_args(kafka_bootstrap, f"owners-a-{tag}", topics, ckpt, "--checkpoint-seconds", "0.3"),
        tmp_path / "first.log",
    )
    wait_for(lambda: caught_up(ckpt, ends), 90, "the first deployment to checkpoint the ends")
    other = worker_args(kafka_bootstrap, f"owners-b-{tag}", topics, ckpt)
    refusal = _refused(other, tmp_path / "running.log")
    assert (
        f"is in use by a running worker of another deployment (group_id 'owners-a-{tag}', "
        f"not 'owners-b-{tag}')" in refusal["error"]
    )
    assert "Give each deployment a checkpoint_dir of its own" in refusal["error"]
    assert first.proc.poll() is None  # the running worker goes on
    assert first.stop(signal.SIGTERM) == 0
    files = _files(ckpt)
    assert {"partition-0000.ckpt", "partition-0001.ckpt"} <= set(files)
    refusal = _refused(other, tmp_path / "stopped.log")
    assert "holds another deployment's checkpoints (partition-0000.ckpt was written for " in refusal["error"]
    assert f"group_id 'owners-a-{tag}', not 'owners-b-{tag}'" in refusal["error"]
    same_group_other_task = worker_args(
        kafka_bootstrap, f"owners-a-{tag}", topics, ckpt, "--task", "regression"
    )
    refusal = _refused(same_group_other_task, tmp_path / "task.log")
    assert "task 'classification', not 'regression'" in refusal["error"]
    assert _files(ckpt) == files  # nothing written by the refused workers
    owner = Owner(f"owners-a-{tag}", topics["features"], None, "classification")
    assert all(read_owned(ckpt / name).owner == owner for name in files)


def _legacy_file(payload: bytes) -> bytes:
    """A checkpoint file in the format of the release before owners (format 1)."""
    body = b"SGTCKPT1" + struct.pack(">HQ", 1, len(payload)) + payload
    return body + hashlib.sha256(body).digest()


def _with_topics(payload: bytes, features: str, labels: str) -> bytes:
    """The fixture's state payload, its header naming other topics (the model bytes are kept as they are)."""
    (size,) = struct.unpack(">I", payload[:4])
    header = orjson.loads(payload[4 : 4 + size])
    header["features_topic"], header["labels_topic"] = features, labels
    head = orjson.dumps(header)
    return struct.pack(">I", len(head)) + head + payload[4 + size :]


def _legacy_input() -> tuple[list[tuple[bytes, bytes]], list[tuple[bytes, bytes]]]:
    """The records the fixture was written from (features 0-399, labels of 0-379 and five labels of
    features that never come), then 100 more features and the labels of features 380-499."""
    rng = np.random.default_rng(0)
    features, labels = [], []
    xs = []
    for i in range(500):
        x = {"a": float(rng.normal()), "b": float(rng.normal())}
        xs.append(x)
        features.append((f"k{i}".encode(), orjson.dumps({"id": f"r{i}", "x": x, "ts": 1000.0 + i})))

    def label(i: int, ts: float) -> tuple[bytes, bytes]:
        y = "p" if xs[i]["a"] + xs[i]["b"] > 0 else "n"
        return f"k{i}".encode(), orjson.dumps({"id": f"r{i}", "y": y, "ts": ts})

    labels = [label(i, 1000.5 + i) for i in range(380)]
    labels += [
        (f"q{j}".encode(), orjson.dumps({"id": f"orphan{j}", "y": "p", "ts": 1390.0 + j})) for j in range(5)
    ]
    labels += [label(i, 1395.0 + (i - 380) * 0.9) for i in range(380, 500)]  # event times keep increasing
    return features, labels


def _offline_model(features: list[tuple[bytes, bytes]], labels: list[tuple[bytes, bytes]]) -> bytes:
    """The fixture's model, restored by the library, going on with the records after its offsets in the
    merged order (a feature still waiting in the fixture's join buffer is learned with its label)."""
    header, model_blob = split_state(read_owned(FIXTURE).payload)
    start = header["next_offsets"]
    events = [(orjson.loads(v)["ts"], 0, o, orjson.loads(v)) for o, (_, v) in enumerate(features)]
    events += [(orjson.loads(v)["ts"], 1, o, orjson.loads(v)) for o, (_, v) in enumerate(labels)]
    x_of: dict[str, dict] = {}
    X, y = [], []
    for _, rank, offset, doc in sorted(events, key=lambda e: e[:3]):
        if rank == 0:
            x_of[doc["id"]] = doc["x"]
        if offset < start[rank]:
            continue  # in the fixture's model already (or waiting in its join buffer)
        if rank == 0:
            X.append(doc["x"])
            y.append(None)
        elif doc["id"] in x_of:
            X.append(x_of[doc["id"]])
            y.append(doc["y"])
    model = SGTClassifier.from_bytes(model_blob)
    model.predict_learn_many(X, y)
    return model.to_bytes()


def test_a_checkpoint_of_the_previous_release_is_adopted_and_continued_exactly(
    kafka_bootstrap: str, tmp_path: Path, start_worker: Callable
) -> None:
    tag = uuid.uuid4().hex[:8]
    topics = {k: f"legacy-{k}-{tag}" for k in ("features", "labels", "predictions", "dead")}
    create_topics(kafka_bootstrap, list(topics.values()), 1)
    features, labels = _legacy_input()
    produce_records(kafka_bootstrap, topics["features"], features)
    produce_records(kafka_bootstrap, topics["labels"], labels)
    ckpt = tmp_path / "ckpt"
    ckpt.mkdir()
    payload = read_owned(FIXTURE).payload
    checkpoint_path(ckpt, 0).write_bytes(
        _legacy_file(_with_topics(payload, topics["features"], topics["labels"]))
    )
    group = f"legacy-{tag}"
    worker = start_worker(
        worker_args(kafka_bootstrap, group, topics, ckpt, "--checkpoint-seconds", "0.3"), tmp_path / "w.log"
    )
    ends = {"features": {0: 500}, "labels": {0: len(labels)}}
    wait_for(lambda: caught_up(ckpt, ends), 90, "the worker to continue the old checkpoint to the ends")
    assert worker.stop(signal.SIGTERM) == 0
    [adopted] = worker.log_events(
        "adopting a checkpoint written without an owner (previous release) as this deployment's"
    )
    assert adopted["owner"]["group_id"] == group
    header, model_blob = checkpoint_headers(ckpt, 1)[0]
    assert model_blob == _offline_model(features, labels)
    assert header["next_offsets"] == [500, len(labels)] and len(header["join"]["labels"]) == 5
    assert read_owned(checkpoint_path(ckpt, 0)).owner == Owner(
        group, topics["features"], topics["labels"], "classification"
    )
    predicted = sorted(
        orjson.loads(m.value())["offset"]
        for m in read_all(kafka_bootstrap, topics["predictions"], 1, at_least=100)
    )
    assert predicted == list(range(400, 500))  # the fixture's records were predicted before it was written
    assert split_state(payload)[1] != model_blob  # it did learn from the new records


pytestmark = pytest.mark.timeout(300)
