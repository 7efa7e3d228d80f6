"""Intervals and explanations end to end, on the real (embedded) broker: a regression worker with
``interval_coverage`` and ``explain`` publishes both fields, exports the interval and importance gauges
for its partitions, and removes those series when it stops."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from pathlib import Path

import numpy as np
import orjson

from tests.kafka_util import produce_records, read_all
from tests.worker.worker_util import (
    WorkerThread,
    inprocess_settings,
    samples,
    value,
    wait_for,
    worker_threads_fixture,
)
from worker.devtools.embedded_broker import create_topics

__all__ = ["worker_threads_fixture"]

Start = Callable[..., WorkerThread]


def test_predictions_carry_intervals_and_explanations_and_the_gauges_follow(
    kafka_bootstrap: str, tmp_path: Path, worker_threads: Start
) -> None:
    tag = uuid.uuid4().hex[:8]
    topics = {k: f"annotate-{k}-{tag}" for k in ("features", "predictions", "dead")}
    create_topics(kafka_bootstrap, list(topics.values()), 2)
    settings = inprocess_settings(
        kafka_bootstrap, topics, tmp_path, task="regression", interval_coverage=0.9, explain=2
    )
    run = worker_threads(settings)
    worker = run.worker
    rng = np.random.default_rng(0)
    records = []
    for i in range(1200):
        x = {
            "a": float(rng.uniform(-1, 1)),
            "b": float(rng.uniform(-1, 1)),
            "noise": float(rng.uniform(-1, 1)),
        }
        y = 3.0 * x["a"] + 2.0 * (x["b"] > 0) + float(rng.normal(0, 0.1))
        records.append((f"k{i}".encode(), orjson.dumps({"id": f"s{i}", "x": x, "y": y})))
    produce_records(kafka_bootstrap, topics["features"], records)
    docs = [
        orjson.loads(m.value())
        for m in read_all(kafka_bootstrap, topics["predictions"], 2, expect=1200, idle_s=30)
    ]
    assert len(docs) == 1200
    late = [d for d in docs if d["model_version"] > 100]
    assert late and all(d["interval"][0] <= d["prediction"] <= d["interval"][1] for d in late)
    assert all(
        len(d["explain"]["top"]) == 2 and set(d["explain"]["top"]) <= {"a", "b", "noise"} for d in late
    )
    wait_for(lambda: worker.health.ready, 10, "readiness")

    def gauges_set() -> bool:
        parsed = samples(worker.metrics.render().decode())
        found = [
            value(parsed, "sgt_interval_coverage", partition=str(p), window="cumulative") for p in (0, 1)
        ]
        return all(v is not None and v == v for v in found)  # (NaN until a record is scored)

    wait_for(gauges_set, 10, "the interval gauges")
    parsed = samples(worker.metrics.render().decode())
    for p in ("0", "1"):
        coverage = value(parsed, "sgt_interval_coverage", partition=p, window="cumulative")
        assert coverage is not None and 0.8 < coverage <= 1.0
        assert (value(parsed, "sgt_interval_width", partition=p, window="recent") or 0) > 0
        features = {
            labels
            for (name, labels) in parsed
            if name == "sgt_feature_importance" and ("partition", p) in labels
        }
        assert 1 <= len(features) <= 2  # the top two at most
        assert ("feature", "a") in set().union(*features)
    assert run.stop() is None
    text = worker.metrics.render().decode()
    assert "sgt_interval_coverage{" not in text and "sgt_feature_importance{" not in text
