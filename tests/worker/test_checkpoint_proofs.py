"""Checkpoint proofs against the real broker, with all input produced up front.

(a) SIGTERM mid-stream and restart; (b) SIGKILL at random moments, several times, and restart, with a
separate labels topic; (c) two workers with partitions moving between them. In every case, once the
input is consumed, each partition's model is byte-identical to the sgt library run offline over the
same records in the merged order (which is what one uninterrupted run computes; (b) also runs one
uninterrupted worker and compares), its checkpoint's next offsets equal the ends of both topics and
its prequential metrics equal the offline ones. Also: a corrupt newest checkpoint is detected,
reported in the metrics and the log, and the previous one is used.
"""

from __future__ import annotations

import random
import signal
import time
import urllib.request
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import pytest

from tests.kafka_util import produce_records, read_all
from tests.worker.worker_util import (  # start_worker_fixture provides the start_worker fixture
    caught_up,
    checkpoint_headers,
    offline_classification,
    start_worker_fixture,  # noqa: F401
    wait_for,
    worker_args,
)
from worker.checkpoint import checkpoint_path, previous_path, read_file
from worker.devtools.embedded_broker import create_topics

PARTITIONS = 4
N = 4000
# Many checkpoints, and batches small enough that a kill or a stop lands mid-stream: a worker taking
# 2,000 records a turn consumes these 4,000 in well under the shortest wait before a kill.
SLOW = ["--checkpoint-records", "50", "--checkpoint-seconds", "0.3", "--batch-size", "5"]


def _dataset(separate_labels: bool, seed: int) -> tuple[list[tuple[bytes, bytes]], list[tuple[bytes, bytes]]]:
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(N, 4))
    y = np.where(x[:, 0] + 0.5 * x[:, 1] - 0.3 * x[:, 2] > 0, "a", "b")
    features, labels = [], []
    for i in range(N):
        rid = f"r{i:05d}"
        doc: dict[str, Any] = {
            "id": rid,
            "x": dict(zip("pqrs", x[i].tolist(), strict=True)),
            "ts": 1000 + 0.01 * i,
        }
        if separate_labels:
            labels.append((rid.encode(), orjson.dumps({"id": rid, "y": str(y[i]), "ts": 1000.5 + 0.01 * i})))
        else:
            doc["y"] = str(y[i])
        features.append((rid.encode(), orjson.dumps(doc)))
    return features, labels


def _topics(
    bootstrap: str, separate_labels: bool, seed: int
) -> tuple[dict[str, str], dict[str, dict[int, int]]]:
    tag = uuid.uuid4().hex[:8]
    kinds = ["features", "predictions", "dead"] + (["labels"] if separate_labels else [])
    topics = {k: f"proof-{k}-{tag}" for k in kinds}
    create_topics(bootstrap, list(topics.values()), PARTITIONS)
    features, labels = _dataset(separate_labels, seed)
    produce_records(bootstrap, topics["features"], features)
    if labels:
        produce_records(bootstrap, topics["labels"], labels)
    return topics, {}


def _offline(
    bootstrap: str, topics: dict[str, str], flags: dict[str, Any] | None = None
) -> tuple[dict[int, tuple[bytes, dict]], dict[str, dict[int, int]]]:
    """Per partition: the offline model bytes and prequential state, and the ends of both topics."""
    events: dict[int, list[tuple[float, int, int, dict]]] = {p: [] for p in range(PARTITIONS)}
    ends: dict[str, dict[int, int]] = {"features": dict.fromkeys(range(PARTITIONS), 0)}
    ranks = [("features", 0)] + ([("labels", 1)] if "labels" in topics else [])
    for kind, rank in ranks:
        ends[kind] = dict.fromkeys(range(PARTITIONS), 0)
        expect = N
        for m in read_all(bootstrap, topics[kind], PARTITIONS, expect=expect):
            doc = orjson.loads(m.value())
            events[m.partition()].append((doc["ts"], rank, m.offset(), doc))
            ends[kind][m.partition()] = max(ends[kind][m.partition()], m.offset() + 1)
    out = {}
    for p, items in events.items():
        rows: list[tuple[dict, Any]] = []
        scores: list[tuple[Any, int]] = []
        row_of: dict[str, int] = {}
        x_of: dict[str, dict] = {}
        for _, rank, _, doc in sorted(items, key=lambda e: e[:3]):
            if rank == 0 and "y" in doc:
                scores.append((doc["y"], len(rows)))
                rows.append((doc["x"], doc["y"]))
            elif rank == 0:
                row_of[doc["id"]], x_of[doc["id"]] = len(rows), doc["x"]
                rows.append((doc["x"], None))
            else:
                scores.append((doc["y"], row_of[doc["id"]]))
                rows.append((x_of[doc["id"]], doc["y"]))
        out[p] = offline_classification(rows, scores, flags)
    return out, ends


def _assert_matches_offline(
    ckpt: Path, offline: dict[int, tuple[bytes, dict]], ends: dict[str, dict[int, int]]
) -> None:
    states = checkpoint_headers(ckpt, PARTITIONS)
    assert sorted(states) == list(range(PARTITIONS))
    for p, (header, model_blob) in states.items():
        want_offsets = [ends["features"][p], ends.get("labels", {}).get(p, 0)]
        assert header["next_offsets"] == want_offsets, f"partition {p}"
        assert model_blob == offline[p][0], f"partition {p}: model differs from the offline run"
        assert header["prequential"] == offline[p][1], f"partition {p}: prequential metrics differ"


def _progress(ckpt: Path) -> int:
    return sum(h["next_offsets"][0] for h, _ in checkpoint_headers(ckpt, PARTITIONS).values())


# the boosted ensemble, small (3 members) and with a drift threshold low enough to act on this stream
BOOSTED = {"model": "boosted", "n_members": 3, "drift_threshold": 2.0}


@pytest.mark.parametrize("model", ["sgt", "boosted"])
def test_sigterm_mid_stream_then_restart_gives_the_uninterrupted_result(
    kafka_bootstrap: str, tmp_path: Path, start_worker: Callable, model: str
) -> None:
    flags = BOOSTED if model == "boosted" else {}
    topics, _ = _topics(kafka_bootstrap, separate_labels=False, seed=1)
    offline, ends = _offline(kafka_bootstrap, topics, flags)
    ckpt, group = tmp_path / "ckpt", f"proof-a-{uuid.uuid4().hex[:8]}"
    extra = [f"--{k.replace('_', '-')}={v}" for k, v in flags.items()]
    args = worker_args(kafka_bootstrap, group, topics, ckpt, *SLOW, *extra)
    first = start_worker(args, tmp_path / "w1.log")
    wait_for(lambda: _progress(ckpt) > 0, 60, "a first checkpoint", interval=0.005)
    assert first.stop(signal.SIGTERM) == 0
    assert 0 < _progress(ckpt) < N, "the first run should stop mid-stream"
    second = start_worker(args, tmp_path / "w2.log")
    wait_for(lambda: second.log_count("partitions assigned") > 0, 60, "an assignment")
    wait_for(lambda: caught_up(ckpt, ends), 90, "the restarted worker to reach the ends")
    assert second.stop(signal.SIGTERM) == 0
    _assert_matches_offline(ckpt, offline, ends)
    predicted = {
        (m.partition(), orjson.loads(m.value())["offset"])
        for m in read_all(kafka_bootstrap, topics["predictions"], PARTITIONS)
    }
    assert len(predicted) == N  # duplicates after the restart are allowed, gaps are not


def test_sigkill_at_random_moments_then_restart_gives_the_uninterrupted_result(
    kafka_bootstrap: str, tmp_path: Path, start_worker: Callable
) -> None:
    topics, _ = _topics(kafka_bootstrap, separate_labels=True, seed=2)
    offline, ends = _offline(kafka_bootstrap, topics)
    ckpt, ref_ckpt = tmp_path / "ckpt", tmp_path / "reference"
    group = f"proof-b-{uuid.uuid4().hex[:8]}"
    reference = start_worker(
        worker_args(kafka_bootstrap, f"{group}-ref", topics, ref_ckpt, "--checkpoint-seconds", "0.3"),
        tmp_path / "ref.log",
    )
    rng = random.Random(7)
    # Kill points are spread over the stream in checkpointed progress, then a random moment of the
    # next turns. Waiting a random time after the assignment instead was at the mercy of this VM's
    # speed: in one fast moment the first worker took all 4,000 records within the 0.36 s it waited.
    targets = sorted(rng.uniform(0.1, 0.9) * N for _ in range(3))
    at_kill: list[int] = []
    args = worker_args(kafka_bootstrap, group, topics, ckpt, *SLOW)
    for attempt, target in enumerate(targets):
        worker = start_worker(args, tmp_path / f"kill{attempt}.log")
        wait_for(lambda w=worker: w.log_count("partitions assigned") > 0, 60, "an assignment")
        wait_for(lambda t=target: _progress(ckpt) >= t, 60, f"progress {target:.0f}", interval=0.005)
        time.sleep(rng.uniform(0.0, 0.05))
        assert worker.stop(signal.SIGKILL) == -signal.SIGKILL
        at_kill.append(_progress(ckpt))
    assert any(0 < done < N for done in at_kill), f"no kill landed mid-stream: {at_kill}"
    last = start_worker(args, tmp_path / "last.log")
    wait_for(lambda: last.log_count("partitions assigned") > 0, 60, "an assignment")
    wait_for(lambda: caught_up(ckpt, ends), 120, "the restarted worker to reach the ends")
    assert last.stop(signal.SIGTERM) == 0
    wait_for(lambda: caught_up(ref_ckpt, ends), 60, "the uninterrupted worker to reach the ends")
    assert reference.stop(signal.SIGTERM) == 0
    _assert_matches_offline(ckpt, offline, ends)
    _assert_matches_offline(ref_ckpt, offline, ends)


def test_partitions_moving_between_two_workers_give_the_uninterrupted_result(
    kafka_bootstrap: str, tmp_path: Path, start_worker: Callable
) -> None:
    topics, _ = _topics(kafka_bootstrap, separate_labels=True, seed=3)
    offline, ends = _offline(kafka_bootstrap, topics)
    ckpt, group = tmp_path / "ckpt", f"proof-c-{uuid.uuid4().hex[:8]}"
    args = worker_args(kafka_bootstrap, group, topics, ckpt, *SLOW)
    one = start_worker(args, tmp_path / "one.log")
    wait_for(lambda: one.log_count("partitions assigned") > 0, 60, "the first assignment")
    two = start_worker(args, tmp_path / "two.log")
    wait_for(lambda: two.log_count("partitions assigned") > 0, 60, "the second worker joining")
    wait_for(lambda: one.log_count("partitions revoked") > 0, 30, "a rebalance")
    wait_for(lambda: len(one.log_events("partitions assigned")) > 1, 30, "the first worker's new assignment")
    halves = [
        one.log_events("partitions assigned")[-1]["partitions"],
        two.log_events("partitions assigned")[0]["partitions"],
    ]
    assert sorted(halves[0] + halves[1]) == list(range(PARTITIONS)) and len(halves[0]) == PARTITIONS // 2
    assert one.stop(signal.SIGTERM) == 0  # its partitions move to the second worker
    wait_for(lambda: two.log_count("partitions assigned") > 1, 60, "the second worker taking over")
    wait_for(lambda: caught_up(ckpt, ends), 120, "the remaining worker to reach the ends")
    assert two.stop(signal.SIGTERM) == 0
    _assert_matches_offline(ckpt, offline, ends)
    assert "partition restored" in (tmp_path / "two.log").read_text()


def test_a_corrupt_newest_checkpoint_is_detected_and_the_previous_one_used(
    kafka_bootstrap: str, tmp_path: Path, start_worker: Callable
) -> None:
    topics, _ = _topics(kafka_bootstrap, separate_labels=False, seed=4)
    offline, ends = _offline(kafka_bootstrap, topics)
    ckpt, group = tmp_path / "ckpt", f"proof-d-{uuid.uuid4().hex[:8]}"
    args = worker_args(kafka_bootstrap, group, topics, ckpt, *SLOW)
    first = start_worker(args, tmp_path / "w1.log")
    wait_for(lambda: caught_up(ckpt, ends), 90, "the first run to reach the ends")
    assert first.stop(signal.SIGTERM) == 0
    # Corrupt partition 0's newest checkpoint: restore must use the previous (older) one and replay.
    assert read_file(previous_path(ckpt, 0)) != read_file(checkpoint_path(ckpt, 0))
    path = checkpoint_path(ckpt, 0)
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x55
    path.write_bytes(bytes(data))
    port = _free_port()
    second = start_worker(
        [*args, "--metrics-port", str(port), "--metrics-host", "127.0.0.1"], tmp_path / "w2.log"
    )
    wait_for(lambda: second.log_count("partitions assigned") > 0, 60, "an assignment")
    wait_for(lambda: caught_up(ckpt, ends), 60, "the restored worker to reach the ends again")
    metrics = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    assert 'sgt_checkpoint_failures_total{reason="corrupt"} 1.0' in metrics
    assert second.stop(signal.SIGTERM) == 0
    log = (tmp_path / "w2.log").read_text()
    assert "skipping unusable checkpoint" in log and "checksum mismatch" in log
    _assert_matches_offline(ckpt, offline, ends)


def _free_port() -> int:
    from worker.devtools.embedded_broker import free_port

    return free_port()


pytestmark = pytest.mark.timeout(300)
