"""Prediction intervals (sgt.intervals): exact under any batching and restore, calibrated, and absent
(no state, no saved parameter) when not asked for."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sgt import AdaptiveSGTRegressor, BoostedRegressor, SGTRegressor
from sgt.intervals import IntervalLayer
from sgt.serialization import decode
from tests.sgt.sgt_testkit import as_dicts

REGRESSORS = (SGTRegressor, BoostedRegressor, AdaptiveSGTRegressor)
COVERAGES = (0.9, 0.95)


def _stream(n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """A linear target whose slope flips halfway (a drift), with Gaussian noise."""
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1, 1, size=(n, 3))
    slope = np.where(np.arange(n) < n // 2, 1.0, -4.0)
    return X, 3.0 * X[:, 0] + slope * X[:, 1] + rng.normal(0, 0.3, n)


def _model(cls: type, **params: Any) -> Any:
    return cls(interval_coverages=COVERAGES, warm_up=100, grace_period=50, **params)


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    cls=st.sampled_from(REGRESSORS),
    chunks=st.lists(st.integers(1, 700), min_size=1, max_size=6),
    save_at=st.integers(0, 1500),
)
def test_batch_loop_and_restore_keep_the_same_bytes(cls: type, chunks: list[int], save_at: int) -> None:
    X, y = _stream(1500, seed=len(chunks))
    loop = _model(cls)
    for i, x in enumerate(as_dicts(X)):
        if i == save_at:
            loop = cls.from_bytes(loop.to_bytes())
        loop.learn_one(x, float(y[i]))
    batch, start, k = _model(cls), 0, 0
    while start < len(y):
        end = min(len(y), start + chunks[k % len(chunks)])
        if k % 2:
            batch.learn_many(X[start:end], y[start:end].tolist())
        else:
            batch.predict_learn_many(X[start:end], y[start:end].tolist())
        start, k = end, k + 1
    assert batch.to_bytes() == loop.to_bytes()
    assert batch._intervals.n == 1500


def test_the_layer_learns_the_prequential_residuals() -> None:
    X, y = _stream(800)
    model = _model(SGTRegressor)
    predictions = _model(SGTRegressor).predict_learn_many(X, y.tolist())
    layer = IntervalLayer(COVERAGES)
    layer.learn_many(predictions, y.tolist())
    model.learn_many(X, y.tolist())
    assert model._intervals == layer


@pytest.mark.parametrize("cls", REGRESSORS)
def test_coverage_is_held_prequentially_through_a_drift(cls: type) -> None:
    X, y = _stream(8000)
    model = _model(cls)
    hits = {c: [] for c in COVERAGES}
    for start in range(0, len(y), 50):  # the interval each record had before it was learned
        rows = slice(start, start + 50)
        predictions = model.predict_many(X[rows])
        for c in COVERAGES:
            q = model._intervals.half_width(c)
            hits[c].append(np.abs(y[rows] - predictions) <= q)
        model.learn_many(X[rows], y[rows].tolist())
    for c in COVERAGES:
        covered = np.concatenate(hits[c])[1000:].mean()
        assert abs(covered - c) < 0.02, (c, covered)


def test_intervals_are_centred_on_the_prediction() -> None:
    X, y = _stream(600)
    model = _model(SGTRegressor)
    x = {"x0": 0.2, "x1": -0.3, "x2": 0.0}
    assert model.predict_interval_one(x, 0.9) == (-math.inf, math.inf)  # nothing learned: no claim
    model.learn_many(X, y.tolist())
    low, high = model.predict_interval_one(x, 0.9)
    q = model._intervals.half_width(0.9)
    assert (low, high) == (model.predict_one(x) - q, model.predict_one(x) + q)
    assert 0 < high - low < model.predict_interval_one(x, 0.95)[1] - model.predict_interval_one(x, 0.95)[0]
    many = model.predict_interval_many(X[:5], 0.95)
    assert many.shape == (5, 2)
    assert np.allclose(many[:, 1] - many[:, 0], 2 * model._intervals.half_width(0.95))


def test_errors_name_the_setting_and_the_allowed_values() -> None:
    with pytest.raises(ValueError, match="interval_coverages must be a sequence of numbers in \\(0, 1\\)"):
        SGTRegressor(interval_coverages=(0.9, 1.0))
    with pytest.raises(ValueError, match="interval_coverages"):
        BoostedRegressor(interval_coverages="0.9")
    with pytest.raises(ValueError, match=r"one of the tracked interval_coverages \(0.9, 0.95\)"):
        _model(SGTRegressor).predict_interval_one({"x0": 1.0}, 0.8)
    with pytest.raises(ValueError, match="tracks no intervals"):
        SGTRegressor().predict_interval_many(np.zeros((1, 1)), 0.9)


@pytest.mark.parametrize("cls", REGRESSORS)
def test_without_coverages_nothing_is_kept_or_saved(cls: type) -> None:
    X, y = _stream(300)
    model = cls(warm_up=100)
    model.learn_many(X, y.tolist())
    header = decode(model.to_bytes()).header
    assert model._intervals is None
    assert "interval_coverages" not in header["params"] and "intervals" not in header["extra"]
    assert model.get_params()["interval_coverages"] == []


def test_a_state_saved_without_the_layer_restores_it_empty() -> None:
    layer = IntervalLayer.restore(COVERAGES, None)
    assert layer == IntervalLayer(COVERAGES) and layer.half_width(0.9) == math.inf
    with pytest.raises(ValueError, match="half-widths"):
        IntervalLayer.restore(COVERAGES, {"half_widths": [1.0], "scale": 1.0, "n": 3})


def test_the_batch_gives_each_row_the_interval_it_had_when_predicted() -> None:
    X, y = _stream(700)
    batch, loop = _model(BoostedRegressor), _model(BoostedRegressor)
    predictions, intervals = batch.predict_learn_interval_many(X, y.tolist(), 0.95)
    expected = []
    for x, target in zip(as_dicts(X), y.tolist()):
        expected.append(loop.predict_interval_one(x, 0.95))
        loop.learn_one(x, target)
    assert np.array_equal(intervals, np.array(expected))
    assert np.isinf(intervals[0]).all()  # nothing learned yet: no claim
    assert np.allclose(predictions[1:], intervals[1:].mean(axis=1))
    assert batch.to_bytes() == loop.to_bytes()


@pytest.mark.parametrize("cls", REGRESSORS)
def test_missing_values_categories_and_late_features_keep_batch_and_loop_equal(cls: type) -> None:
    from tests.sgt.sgt_testkit import mixed_records

    records, labels = mixed_records(2000, seed=3)
    X = [dict(x, late=float(i % 7)) if i >= 1000 else x for i, x in enumerate(records)]  # a feature appears
    y = [float(v) + 0.1 * (i % 5) for i, v in enumerate(labels)]
    batch, loop = (cls(interval_coverages=(0.9,), warm_up=100, nominal=["colour"]) for _ in range(2))
    for start in range(0, 2000, 333):
        batch.learn_many(X[start : start + 333], y[start : start + 333])
    for x, target in zip(X, y):
        loop.learn_one(x, target)
    assert batch.to_bytes() == loop.to_bytes()
