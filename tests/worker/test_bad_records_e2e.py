"""A corpus of bad records between good ones, through a real worker process and the real broker.

Every good feature record is predicted exactly once and learned (its label arrives on the labels
topic); every bad record reaches the dead-letter topic byte for byte with headers naming the reason
and the source topic, partition and offset, and is counted by reason. The worker never stops.
Also checks the metrics endpoint, /healthz and /readyz, and ``sgt-worker inspect`` on the result.
"""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import time
import urllib.request
import uuid
from collections.abc import Callable
from pathlib import Path

import orjson

from tests.kafka_util import produce_records, read_all
from tests.worker.worker_util import (  # start_worker_fixture provides the start_worker fixture
    caught_up,
    checkpoint_headers,
    samples,
    start_worker_fixture,  # noqa: F401
    value,
    wait_for,
    worker_args,
)
from worker.devtools.embedded_broker import create_topics, free_port

PARTITIONS = 2
GOOD_PER_PARTITION = 300


def _good(p: int, i: int) -> tuple[str, bytes, bytes]:
    rid = f"g{p}-{i}"
    x = {"p": float(i % 11), "q": float((i * 7) % 5)}
    ts = 100.0 + i
    return (
        rid,
        orjson.dumps({"id": rid, "x": x, "ts": ts}),
        orjson.dumps({"id": rid, "y": "ab"[i % 3 == 0], "ts": ts + 0.5}),
    )


def _bad_features(p: int, i: int) -> list[tuple[str, bytes]]:
    ts = 100.0 + i + 0.25
    return [
        ("invalid_utf8", b"\xff\xfe\xfd"),
        ("invalid_json", b'{"id": "broken", "x": {"p": 1.0'),
        ("not_object", b"[1, 2, 3]"),
        ("missing_x", orjson.dumps({"id": f"mx{p}-{i}", "ts": ts})),
        ("bad_x", orjson.dumps({"id": f"bx{p}-{i}", "x": "abc", "ts": ts})),
        ("nested_value", orjson.dumps({"id": f"nv{p}-{i}", "x": {"p": {"deep": 1}}, "ts": ts})),
        ("wrong_feature_count", orjson.dumps({"id": f"wc{p}-{i}", "x": [1.0, 2.0, 3.0], "ts": ts})),
        ("unknown_feature", orjson.dumps({"id": f"uf{p}-{i}", "x": {"zzz": 1.0}, "ts": ts})),
        ("bad_label_type", orjson.dumps({"id": f"bl{p}-{i}", "x": {"p": 1.0}, "y": {"no": 1}, "ts": ts})),
        ("oversized", orjson.dumps({"id": f"big{p}-{i}", "x": {"p": 1.0}, "pad": "z" * 5000, "ts": ts})),
        ("missing_id", orjson.dumps({"x": {"p": 1.0}, "ts": ts})),
        ("bad_id", orjson.dumps({"id": [1], "x": {"p": 1.0}, "ts": ts})),
    ]


def _bad_labels(p: int) -> list[tuple[str, bytes]]:
    return [
        ("missing_y", orjson.dumps({"id": f"g{p}-3", "ts": 103.6})),
        ("bad_label_type", orjson.dumps({"id": f"g{p}-4", "y": [1], "ts": 104.6})),
        ("missing_id", orjson.dumps({"y": "a", "ts": 105.6})),
        ("invalid_json", b"{nope"),
        (
            "unknown_id",
            orjson.dumps({"id": f"ghost{p}", "y": "a", "ts": 101.0}),
        ),  # expires after 30 s of event time
    ]


def _corpus() -> tuple[dict[int, list[bytes]], dict[int, list[bytes]], dict[tuple[str, int, int], str], set]:
    """Records per partition for both topics, the expected dead letters and the good feature offsets."""
    features: dict[int, list[bytes]] = {}
    labels: dict[int, list[bytes]] = {}
    expected: dict[tuple[str, int, int], str] = {}
    good: set[tuple[int, int]] = set()
    for p in range(PARTITIONS):
        feats, labs = [], []
        bad_labels = _bad_labels(p)
        for i in range(GOOD_PER_PARTITION):
            _, feature, label = _good(p, i)
            good.add((p, len(feats)))
            feats.append(feature)
            if i % 25 == 5:
                dup = orjson.loads(feature)
                expected[("features", p, len(feats))] = "duplicate_id"
                feats.append(orjson.dumps(dup))  # same id while the first is still waiting for its label
            if i % 20 == 10:
                for reason, raw in _bad_features(p, i):
                    expected[("features", p, len(feats))] = reason
                    feats.append(raw)
            if i % 40 == 20 and bad_labels:
                reason, raw = bad_labels.pop()
                expected[("labels", p, len(labs))] = reason
                labs.append(raw)
            labs.append(label)
        features[p], labels[p] = feats, labs
    return features, labels, expected, good


def _produce(bootstrap: str, topic: str, per_partition: dict[int, list[bytes]]) -> None:
    for p, values in per_partition.items():
        produce_records(bootstrap, topic, [(None, v) for v in values], partition=p)


def test_every_good_record_is_predicted_and_learned_and_every_bad_one_dead_lettered(
    kafka_bootstrap: str, tmp_path: Path, start_worker: Callable
) -> None:
    tag = uuid.uuid4().hex[:8]
    topics = {k: f"corpus-{k}-{tag}" for k in ("features", "labels", "predictions", "dead")}
    create_topics(kafka_bootstrap, list(topics.values()), PARTITIONS)
    features, labels, expected, good = _corpus()
    _produce(kafka_bootstrap, topics["features"], features)
    _produce(kafka_bootstrap, topics["labels"], labels)
    ends = {
        "features": {p: len(v) for p, v in features.items()},
        "labels": {p: len(v) for p, v in labels.items()},
    }
    ckpt, port = tmp_path / "ckpt", free_port()
    args = worker_args(kafka_bootstrap, f"corpus-{tag}", topics, ckpt)
    args += ["--metrics-port", str(port), "--metrics-host", "127.0.0.1", "--checkpoint-seconds", "0.3"]
    args += ["--features", "p,q", "--max-record-bytes", "4096", "--join-max-age-seconds", "30"]
    worker = start_worker(args, tmp_path / "worker.log")
    wait_for(lambda: caught_up(ckpt, ends), 90, "the worker to reach the ends of both topics")

    base = f"http://127.0.0.1:{port}"
    time.sleep(1.5)  # the lag gauges are refreshed once a second
    metrics = urllib.request.urlopen(f"{base}/metrics", timeout=5).read().decode()
    assert urllib.request.urlopen(f"{base}/healthz", timeout=5).status == 200
    assert urllib.request.urlopen(f"{base}/readyz", timeout=5).status == 200

    predictions = read_all(kafka_bootstrap, topics["predictions"], PARTITIONS, expect=len(good))
    dead = read_all(kafka_bootstrap, topics["dead"], PARTITIONS, expect=len(expected))
    assert worker.stop(signal.SIGTERM) == 0

    docs = [orjson.loads(m.value()) for m in predictions]
    assert sorted((d["partition"], d["offset"]) for d in docs) == sorted(good)
    assert {"id", "prediction", "proba", "partition", "offset", "model_version", "ts"} <= set(docs[-1])

    got = {}
    for m in dead:
        headers = {k: v.decode() for k, v in m.headers()}
        kind = "features" if headers["source_topic"] == topics["features"] else "labels"
        key = (kind, int(headers["source_partition"]), int(headers["source_offset"]))
        source = (features if kind == "features" else labels)[key[1]][key[2]]
        assert m.value() == source, f"dead letter {key} is not byte for byte the source record"
        got[key] = headers["reason"]
    assert got == expected

    parsed = samples(metrics)
    for (topic, reason), n in _count_by_reason(expected, topics).items():
        assert value(parsed, "sgt_invalid_records_total", topic=topic, reason=reason) == n, (topic, reason)
    for p in map(str, range(PARTITIONS)):
        assert value(parsed, "sgt_trained_total", partition=p) == GOOD_PER_PARTITION
        assert value(parsed, "sgt_predictions_total", partition=p) == GOOD_PER_PARTITION
        assert value(parsed, "sgt_join_expired_total", partition=p, side="labels", reason="age") == 1
        assert value(parsed, "sgt_join_pending", partition=p, side="features") == 0
        for kind in ("features", "labels"):
            topic = topics[kind]
            assert value(parsed, "sgt_consumer_lag_records", topic=topic, partition=p) == 0
            assert value(parsed, "sgt_records_total", topic=topic, partition=p) == ends[kind][int(p)]
    for name in (
        "sgt_prequential_error",
        "sgt_prequential_log_loss",
        "sgt_prequential_brier",
        "sgt_tree_nodes",
        "sgt_tree_leaves",
        "sgt_tree_depth",
        "sgt_model_bytes",
    ):
        assert len(re.findall(rf"^{name}\{{", metrics, re.M)) >= PARTITIONS
    assert 'sgt_build_info{python="' in metrics and "sgt_prediction_latency_seconds_count" in metrics

    for p, (header, _) in checkpoint_headers(ckpt, PARTITIONS).items():
        assert header["trained"] == GOOD_PER_PARTITION and header["prequential"]["n"] == GOOD_PER_PARTITION
        assert header["join"] == {"features": [], "labels": []}, f"partition {p} left entries pending"

    out = subprocess.run(
        [sys.executable, "-m", "worker", "inspect", str(ckpt)], capture_output=True, text=True
    )
    summary = json.loads(out.stdout)
    assert [s["partition"] for s in summary] == list(range(PARTITIONS))
    assert all(len(s["model_sha256"]) == 64 and s["trained"] == GOOD_PER_PARTITION for s in summary)
    assert summary[0]["next_offsets"] == {"features": ends["features"][0], "labels": ends["labels"][0]}


def _count_by_reason(
    expected: dict[tuple[str, int, int], str], topics: dict[str, str]
) -> dict[tuple[str, str], int]:
    counts: dict[tuple[str, str], int] = {}
    for (kind, _, _), reason in expected.items():
        key = (topics[kind], reason)
        counts[key] = counts.get(key, 0) + 1
    return counts
