"""Predictions with ``interval`` and ``explain`` fields (worker.core.annotate): each row's field is the
one the model had when it predicted the row, the model learns the same bytes as without them, and the fields
stay within the size bound the settings check."""

from __future__ import annotations

from typing import Any

import numpy as np
import orjson
import pytest

from sgt import BoostedClassifier, SGTClassifier, SGTRegressor
from worker.config import ConfigError, load_settings
from worker.core.merge import FEATURES, LABELS, Merger
from worker.core.outputs import annotation_bound, prediction_bound
from worker.core.partition_state import PartitionState, StateConfig
from worker.core.sgt_models import new_model
from worker.core.values import Record


def _records(n: int, task: str, seed: int = 0) -> list[Record]:
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        x = {"a": float(rng.uniform(-1, 1)), "b": float(rng.uniform(-1, 1)), "c": float(rng.uniform(-1, 1))}
        y: Any = (
            3 * x["a"] + float(rng.normal(0, 0.1))
            if task == "regression"
            else int(x["b"] > 0.2) + (x["b"] > 0.6)
        )
        doc = {"id": f"r{i}", "x": x, "y": y, "ts": float(i)}
        out.append(Record(i, float(i), f"r{i}".encode(), orjson.dumps(doc)))
    return out


def _process(state: PartitionState, records: list[Record]) -> list[dict[str, Any]]:
    merger = Merger()
    merger.push(FEATURES, state.decode(FEATURES, records))
    merger.push(LABELS, [])
    result = state.process(merger.pop_ready(labels_done=True, features_done=True), now=1.0)
    return [orjson.loads(p.value) for p in result.predictions]


def _config(task: str, **kw: Any) -> StateConfig:
    return StateConfig(task, None, features_topic="features", **kw)


def _run_in_batches(model: Any, config: StateConfig, records: list[Record], size: int) -> tuple[Any, list]:
    state = PartitionState(0, model, config)
    docs = []
    for start in range(0, len(records), size):
        docs += _process(state, records[start : start + size])
    return state.model, docs


def test_intervals_are_the_ones_each_record_was_predicted_with() -> None:
    records = _records(600, "regression")
    config = _config("regression", interval_coverage=0.9)
    _, docs = _run_in_batches(SGTRegressor(), _config("regression"), records, 600)
    model, annotated = _run_in_batches(SGTRegressor(interval_coverages=(0.9,)), config, records, 250)
    loop = SGTRegressor(interval_coverages=(0.9,))
    for doc, record in zip(annotated, records):
        source = orjson.loads(record.value)
        low, high = loop.predict_interval_one(source["x"], 0.9)
        assert doc["interval"] == (None if np.isinf(low) else [low, high])
        loop.learn_one(source["x"], source["y"])
    assert model.to_bytes() == loop.to_bytes()
    assert [d["prediction"] for d in docs] == [d["prediction"] for d in annotated]
    assert "interval" not in docs[0] and "explain" not in docs[0]
    hits = [
        d["interval"][0] <= orjson.loads(r.value)["y"] <= d["interval"][1]
        for d, r in zip(annotated[100:], records[100:])
    ]
    assert annotated[0]["interval"] is None
    assert 0.85 < np.mean(hits) < 0.95


@pytest.mark.parametrize("task, make", [("regression", SGTRegressor), ("classification", SGTClassifier),
                                        ("classification", BoostedClassifier)])  # fmt: skip
def test_explanations_sum_to_the_published_score_and_the_model_is_the_batch_one(task: str, make: Any) -> None:
    records = _records(500, task)
    _, plain = _run_in_batches(make(), _config(task), records, 500)
    model, docs = _run_in_batches(make(), _config(task, explain=2), records, 200)
    batch = make()
    batch.predict_learn_many(
        [orjson.loads(r.value)["x"] for r in records], [orjson.loads(r.value)["y"] for r in records]
    )
    assert model.to_bytes() == batch.to_bytes()
    assert [d["prediction"] for d in docs] == [d["prediction"] for d in plain]
    assert [d.get("proba") for d in docs] == [d.get("proba") for d in plain]
    last = docs[-1]["explain"]
    assert len(last["top"]) == 2
    if task == "regression":
        # the top two of three features: the base plus them is the prediction up to the third's share
        assert set(last["top"]) <= {"a", "b", "c"} and "a" in last["top"]
    else:
        assert last["class"] in model.classes_[1:]


def test_a_model_without_the_coverage_publishes_no_interval() -> None:
    docs = _run_in_batches(
        SGTRegressor(), _config("regression", interval_coverage=0.9), _records(50, "regression"), 50
    )[1]
    assert all("interval" not in d for d in docs)


def test_the_settings_build_the_layer_and_bound_the_fields() -> None:
    settings = load_settings({"task": "regression", "interval_coverage": "0.95", "explain": "3"}, env={})
    assert settings.interval_coverage == 0.95 and settings.explain == 3
    model = new_model(settings)
    assert model.interval_coverages == (0.95,)  # type: ignore[attr-defined]  # an SGTRegressor
    assert load_settings({}, env={}).interval_coverage is None and load_settings({}, env={}).explain == 0
    with pytest.raises(ConfigError, match="interval_coverage"):
        load_settings({"interval_coverage": "1.5"}, env={})
    with pytest.raises(ConfigError, match="explain"):
        load_settings({"explain": "-1"}, env={})
    with pytest.raises(ConfigError, match="explain"):
        load_settings({"explain": "100", "max_label_bytes": "4096", "max_message_bytes": "65536"}, env={})
    assert annotation_bound(False, 0, 256) == 0


def test_the_fields_stay_within_their_bound() -> None:
    name = "é" * 300  # longer than max_label_bytes: cut
    records = []
    for i in range(300):
        x = {name + str(j): float((i * (j + 3)) % 7) for j in range(4)}
        records.append(
            Record(i, float(i), None, orjson.dumps({"id": "x", "x": x, "y": float(i % 7), "ts": float(i)}))
        )
    config = _config("regression", interval_coverage=0.9, explain=3, max_label_bytes=64)
    docs = _run_in_batches(SGTRegressor(interval_coverages=(0.9,)), config, records, 300)[1]
    without_id = len(orjson.dumps(docs[-1])) - len(b'"x"')
    assert all(len(n.encode()) <= 64 for n in docs[-1]["explain"]["top"])
    assert without_id <= prediction_bound(10, 64) + annotation_bound(True, 3, 64)


def _joined(n: int) -> tuple[list[Record], list[Record]]:
    """Features with ids, and their labels arriving later (so that they wait in the join buffer)."""
    rng = np.random.default_rng(4)
    feats, labels = [], []
    for i in range(n):
        x = {"a": float(rng.uniform(-1, 1)), "b": float(rng.uniform(-1, 1))}
        feats.append(
            Record(i, float(i), f"r{i}".encode(), orjson.dumps({"id": f"r{i}", "x": x, "ts": float(i)}))
        )
        y = 2 * x["a"] + float(rng.normal(0, 0.2))
        labels.append(
            Record(i, i + 0.5, f"r{i}".encode(), orjson.dumps({"id": f"r{i}", "y": y, "ts": i + 0.5}))
        )
    return feats, labels


def test_interval_scores_count_joined_labels_and_survive_a_checkpoint() -> None:
    config = StateConfig("regression", "labels", interval_coverage=0.9, metrics_window=100)
    state = PartitionState(0, SGTRegressor(interval_coverages=(0.9,)), config)
    feats, labels = _joined(800)
    published: dict[str, Any] = {}
    for start in range(0, 800, 100):
        merger = Merger()
        merger.push(FEATURES, state.decode(FEATURES, feats[start : start + 100]))
        # the labels of the previous batch's records: they join entries waiting in the join buffer
        merger.push(LABELS, state.decode(LABELS, labels[max(0, start - 100) : start]))
        for p in state.process(merger.pop_ready(labels_done=True, features_done=True), now=1.0).predictions:
            doc = orjson.loads(p.value)
            published[doc["id"]] = doc["interval"]
        if start == 400:  # records 400 to 499 wait for their labels, with their intervals, in the checkpoint
            state = PartitionState.from_bytes(state.to_bytes(), config, {"SGTRegressor": SGTRegressor})
    truth = {orjson.loads(r.value)["id"]: orjson.loads(r.value)["y"] for r in labels}
    labelled = [f"r{i}" for i in range(700) if published[f"r{i}"] is not None]
    hits = [published[k][0] <= truth[k] <= published[k][1] for k in labelled]
    # the first 100 were predicted before any label was learned: no interval
    assert state.intervals is not None and state.intervals.n == len(labelled) == 600
    assert state.intervals.coverage == np.mean(hits)
    assert 0.8 < state.intervals.coverage < 0.97 and len(state.intervals.recent) == 100


def test_importance_series_are_the_top_features_and_leave_with_the_partition() -> None:
    from worker.metrics import WorkerMetrics

    metrics = WorkerMetrics()
    metrics.report_importances("3", {"a": 0.5, "b": 0.3, "c": 0.2, "d": 0.0}, top=2)
    text = metrics.render().decode()
    assert 'sgt_feature_importance{feature="a",partition="3"} 0.5' in text
    assert 'feature="b"' in text and 'feature="c"' not in text
    metrics.report_importances("3", {"a": 0.1, "b": 0.2, "c": 0.7}, top=2)  # a leaves the top two
    text = metrics.render().decode()
    assert 'feature="a"' not in text and 'feature="c"' in text
    metrics.forget_partition(3, ["features"])
    assert "sgt_feature_importance{" not in metrics.render().decode()
