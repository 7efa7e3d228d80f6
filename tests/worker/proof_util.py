"""The checkpoint proofs' streams and reference: input produced up front, the offline result.

Each proof produces ``N`` records over ``PARTITIONS`` partitions, runs workers however it likes, and
compares each partition's final state with :func:`offline_reference`: the sgt library run offline
over the same records in the worker's merge order, which is what one uninterrupted worker computes.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import numpy as np
import orjson

from tests.kafka_util import produce_records, read_all
from tests.worker.worker_util import checkpoint_headers, offline_classification
from worker.core.partition_state import split_state
from worker.devtools.embedded_broker import create_topics
from worker.state_topic.admin import StateTopicConfig
from worker.state_topic.client import StateTopic

PARTITIONS = 4
N = 4000
# Many checkpoints, and batches small enough that a kill or a stop lands mid-stream: a worker taking
# 2,000 records a turn consumes these 4,000 in well under the shortest wait before a kill.
SLOW = ["--checkpoint-records", "50", "--checkpoint-seconds", "0.3", "--batch-size", "5"]


def dataset(
    separate_labels: bool, seed: int, start_ts: float = 1000.0
) -> tuple[list[tuple[bytes, bytes]], list[tuple[bytes, bytes]]]:
    """``N`` records (and their labels when separate) with event times from ``start_ts`` on."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(N, 4))
    y = np.where(x[:, 0] + 0.5 * x[:, 1] - 0.3 * x[:, 2] > 0, "a", "b")
    features, labels = [], []
    for i in range(N):
        rid = f"r{i:05d}"
        doc: dict[str, Any] = {
            "id": rid,
            "x": dict(zip("pqrs", x[i].tolist(), strict=True)),
            "ts": start_ts + 0.01 * i,
        }
        if separate_labels:
            label = {"id": rid, "y": str(y[i]), "ts": start_ts + 0.5 + 0.01 * i}
            labels.append((rid.encode(), orjson.dumps(label)))
        else:
            doc["y"] = str(y[i])
        features.append((rid.encode(), orjson.dumps(doc)))
    return features, labels


def proof_topics(
    bootstrap: str, separate_labels: bool, seed: int
) -> tuple[dict[str, str], dict[str, dict[int, int]]]:
    tag = uuid.uuid4().hex[:8]
    kinds = ["features", "predictions", "dead"] + (["labels"] if separate_labels else [])
    topics = {k: f"proof-{k}-{tag}" for k in kinds}
    create_topics(bootstrap, list(topics.values()), PARTITIONS)
    features, labels = dataset(separate_labels, seed)
    produce_records(bootstrap, topics["features"], features)
    if labels:
        produce_records(bootstrap, topics["labels"], labels)
    return topics, {}


def offline_reference(
    bootstrap: str, topics: dict[str, str], flags: dict[str, Any] | None = None, records: int = N
) -> tuple[dict[int, tuple[bytes, dict]], dict[str, dict[int, int]]]:
    """Per partition: the offline model bytes and prequential state, and the ends of both topics."""
    events: dict[int, list[tuple[float, int, int, dict]]] = {p: [] for p in range(PARTITIONS)}
    ends: dict[str, dict[int, int]] = {"features": dict.fromkeys(range(PARTITIONS), 0)}
    ranks = [("features", 0)] + ([("labels", 1)] if "labels" in topics else [])
    for kind, rank in ranks:
        ends[kind] = dict.fromkeys(range(PARTITIONS), 0)
        for m in read_all(bootstrap, topics[kind], PARTITIONS, expect=records):
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


def assert_matches_offline(
    ckpt: Path, offline: dict[int, tuple[bytes, dict]], ends: dict[str, dict[int, int]]
) -> None:
    """The newest checkpoint file of every partition reached the ends and equals the offline run."""
    assert_states_match_offline(checkpoint_headers(ckpt, PARTITIONS), offline, ends)


def assert_states_match_offline(
    states: dict[int, tuple[dict[str, Any], bytes]],
    offline: dict[int, tuple[bytes, dict]],
    ends: dict[str, dict[int, int]],
) -> None:
    """Every partition's state (header, model bytes) reached the ends and equals the offline run."""
    assert sorted(states) == list(range(PARTITIONS))
    for p, (header, model_blob) in states.items():
        want_offsets = [ends["features"][p], ends.get("labels", {}).get(p, 0)]
        assert header["next_offsets"] == want_offsets, f"partition {p}"
        assert model_blob == offline[p][0], f"partition {p}: model differs from the offline run"
        assert header["prequential"] == offline[p][1], f"partition {p}: prequential metrics differ"


def progress(ckpt: Path) -> int:
    """Features records covered by the newest checkpoint files, over every partition."""
    return sum(h["next_offsets"][0] for h, _ in checkpoint_headers(ckpt, PARTITIONS).values())


def topic_states(bootstrap: str, topic: str) -> dict[int, tuple[dict[str, Any], bytes]]:
    """Header and model bytes of the newest valid state of every partition in a state topic."""
    out = {}
    with StateTopic(StateTopicConfig(bootstrap, topic, timeout_s=20.0)) as states:
        for p in range(PARTITIONS):
            newest = states.read(p).newest
            if newest is not None:
                out[p] = split_state(newest.payload)
    return out
