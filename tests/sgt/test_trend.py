"""The regressors' trend offset (sgt.trend): the trees learn each target minus a slow running mean of the
targets before it, and the prediction adds that mean back.

On a trend under a function of the features (y = t + f(x)) each leaf's value went stale at its own pace
(a leaf moves once its block fills, the rarely visited ones least often), so the error grew along the
stream and no residual level shared by the leaves removed it. With the offset the trees learn f(x) and a
lag the same for every leaf. The offset is a function of the targets alone, so a batch's offsets are
known before its trees run: batch, one-record loop and restore give the same bits, with the compiled
kernels and without; a model saved without an offset (before it) restores without one.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sgt import BoostedRegressor, SGTRegressor, kernels
from sgt.losses import Huber, Poisson
from sgt.serialization import SerializationError, decode, encode
from sgt.trend import TrendOffset

NAMES = ("x0", "x1", "x2")  # (the names a batch of arrays gets)
RATE = 0.01


class _Trended(SGTRegressor):
    _trend_rate = RATE


class _TrendedBoosted(BoostedRegressor):
    """The boosted regressor whose single tree learns with the offset."""

    def _new_single(self) -> SGTRegressor:
        single = super()._new_single()
        single._trend = TrendOffset(RATE)
        return single


def _trending(n: int, seed: int = 3, slope: float = 0.004) -> tuple[np.ndarray, np.ndarray]:
    """A trend under a function of two features, read at minute timestamps (as tests/bench/stress.py's
    stress-timestamp, steeper)."""
    rng = np.random.default_rng(seed)
    t = 1.7e9 + 60.0 * np.arange(n)
    other = rng.uniform(0, 1, (n, 2))
    y = slope * np.arange(n) + 5 * np.sin(2 * np.pi * other[:, 0]) + 3 * other[:, 1] + rng.normal(0, 0.5, n)
    return np.column_stack([t, other]), y


def _record(x: np.ndarray) -> dict[str, float]:
    return dict(zip(NAMES, x.tolist(), strict=True))


def _late_mae(model: Any, X: np.ndarray, y: np.ndarray) -> float:
    """The prequential MAE over the stream's second half."""
    predictions = model.predict_learn_many(X, y.tolist())
    half = len(y) // 2
    return float(np.abs(predictions[half:] - y[half:]).mean())


@pytest.mark.parametrize("leaf_model", ["auto", "constant", "linear"])
def test_a_trend_under_a_function_is_followed(leaf_model: str) -> None:
    """Catches leaves that go stale along a trend (5,000 records, the MAE of the second half by leaf
    model "auto", "constant", "linear": without the offset 1.51, 1.72, 1.77; with it 0.54, 0.70, 0.55)."""
    X, y = _trending(5000)
    trended = _late_mae(_Trended(leaf_model=leaf_model), X, y)
    plain = _late_mae(SGTRegressor(leaf_model=leaf_model), X, y)
    assert trended <= 0.6 * plain, (trended, plain)


def _stream(n: int) -> tuple[np.ndarray, list[Any]]:
    """The trending stream with every 7th target missing (predicted, not learned)."""
    X, y = _trending(n, seed=8)
    return X, [None if i % 7 == 3 else float(v) for i, v in enumerate(y)]


@pytest.mark.parametrize("kernels_on", [True, False], ids=["kernels", "SGT_KERNELS=0"])
@pytest.mark.parametrize(
    "params",
    [
        {},
        {"leaf_model": "constant"},
        {"leaf_model": "adaptive"},
        {"interval_coverages": (0.9,)},
        {"loss": Huber()},
    ],
    ids=["auto", "constant", "adaptive", "intervals", "huber"],
)
def test_loop_batch_and_restore_give_the_same_bits(
    params: dict[str, Any], kernels_on: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Batch learning (in uneven batches), the one-record loop and a model saved and restored half-way
    (by the plain class: the offset is in the save) give the same predictions and bytes."""
    monkeypatch.setattr(kernels, "ENABLED", kernels_on and kernels.ENABLED)
    X, y = _stream(1500)
    batched = _Trended(warm_up=100, **params)
    predictions = np.concatenate(
        [batched.predict_learn_many(X[a:b], y[a:b]) for a, b in [(0, 1), (1, 600), (600, 1001), (1001, 1500)]]
    )
    loop: SGTRegressor = _Trended(warm_up=100, **params)
    looped = []
    for i, (x, target) in enumerate(zip(X, y, strict=True)):
        if i == 750:
            loop = SGTRegressor.from_bytes(loop.to_bytes())
            assert loop._trend is not None
        looped.append(loop.predict_one(_record(x)))
        if target is not None:
            loop.learn_one(_record(x), target)
    np.testing.assert_array_equal(np.array(looped), predictions)
    assert loop.to_bytes() == batched.to_bytes()
    assert batched._trend is not None and batched._offset() > 3.0
    learned = _Trended(warm_up=100, **params)
    learned.learn_many(X, y)
    assert learned.to_bytes() == batched.to_bytes()
    np.testing.assert_array_equal(
        batched.predict_many(X[:50]), [batched.predict_one(_record(x)) for x in X[:50]]
    )


def test_the_boosted_regressors_single_tree_gives_the_same_bits() -> None:
    """The boosted regressor runs its single tree through `_run_codes` (the offset applied there) and
    predicts one record through `predict_one`: the same bits, and a save restores the offset."""
    X, y = _stream(1200)
    batched = _TrendedBoosted(warm_up=100)
    predictions = np.concatenate(
        [batched.predict_learn_many(X[a:b], y[a:b]) for a, b in [(0, 500), (500, 1200)]]
    )
    loop: BoostedRegressor = _TrendedBoosted(warm_up=100)
    looped = []
    for i, (x, target) in enumerate(zip(X, y, strict=True)):
        if i == 600:
            loop = BoostedRegressor.from_bytes(loop.to_bytes())
        looped.append(loop.predict_one(_record(x)))
        if target is not None:
            loop.learn_one(_record(x), target)
    np.testing.assert_array_equal(np.array(looped), predictions)
    assert loop.to_bytes() == batched.to_bytes()
    assert loop._single is not None and loop._single._trend is not None


def test_explanations_and_intervals_follow_the_offset_prediction() -> None:
    X, y = _trending(1500)
    model = _Trended(interval_coverages=(0.9,))
    model.learn_many(X, y.tolist())
    record = _record(X[-1])
    prediction = model.predict_one(record)
    explanation = model.explain_one(record)
    assert abs(explanation.score - prediction) < 1e-9
    assert abs(explanation.base + sum(explanation.contributions.values()) - prediction) < 1e-9
    low, high = model.predict_interval_one(record, 0.9)
    assert (low + high) / 2 == pytest.approx(prediction, abs=1e-9)
    boosted = _TrendedBoosted()
    boosted.learn_many(X, y.tolist())
    explained = boosted.explain_one(record)
    assert abs(explained.base + sum(explained.contributions.values()) - boosted.predict_one(record)) < 1e-9


def test_a_model_saved_without_the_offset_predicts_without_it() -> None:
    """The default saves no offset (as before it); a save whose offset is removed restores without one
    and learns on as an untrended model restored from the same trees."""
    X, y = _trending(1200)
    assert "trend" not in decode(SGTRegressor().to_bytes()).header["extra"]
    model = _Trended()
    model.learn_many(X[:600], y[:600].tolist())
    header, arrays, _ = decode(model.to_bytes())
    assert set(header["extra"].pop("trend")) == {"rate", "mean", "count"}
    old = SGTRegressor.from_bytes(encode(header, list(arrays.items())))
    assert old._trend is None
    plain = SGTRegressor.from_bytes(model.to_bytes())
    plain._trend = None
    np.testing.assert_array_equal(
        old.predict_learn_many(X[600:], y[600:].tolist()), plain.predict_learn_many(X[600:], y[600:].tolist())
    )
    assert "trend" not in decode(old.to_bytes()).header["extra"]
    header["extra"]["trend"] = {"rate": 2.0, "mean": 0.0, "count": 0}
    with pytest.raises(SerializationError, match="trend offset"):
        SGTRegressor.from_bytes(encode(header, list(arrays.items())))


def test_a_linked_loss_has_no_offset() -> None:
    """Poisson's trees learn a log-rate: a mean of the counts would not shift it."""
    assert type("P", (_Trended,), {})(loss=Poisson())._trend is None


@pytest.mark.parametrize("rate", [0.0, -0.1, 1.5, math.nan])
def test_a_bad_rate_is_refused(rate: float) -> None:
    with pytest.raises(ValueError, match="rate"):
        TrendOffset(rate)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.tuples(st.floats(-1e6, 1e6), st.booleans()), max_size=40),
    st.sampled_from([1.0, 0.5, 0.01]),
)
def test_taking_one_row_at_a_time_is_shift_bit_for_bit(rows: list[tuple[float, bool]], rate: float) -> None:
    """`TrendOffset.take` (the one-record path) repeats `shift`'s float operations (the batch's), through
    a save and restore half-way; each row's offset is the mean before it, the first target its own."""
    batch, single = TrendOffset(rate), TrendOffset(rate)
    targets = np.array([t for t, _ in rows], dtype=np.float64)
    learn = np.array([k for _, k in rows], dtype=bool)
    shifted, offsets = batch.shift(targets, learn)
    for i, (target, learns) in enumerate(rows):
        if i == len(rows) // 2:
            single = TrendOffset.restored(single.state())
        assert single.offset() == offsets[i]
        if learns:
            assert single.take(target) == shifted[i]
        else:
            assert shifted[i] == target
    assert single.state() == batch.state()
    first = [t for t, k in rows if k][:1]
    if first:
        assert shifted[learn.tolist().index(True)] == 0.0
