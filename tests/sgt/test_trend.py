"""The regressors' trend offset (sgt.trend): the trees learn each target minus the move of a running mean
of the targets before it, once that move is beyond noise, and the prediction adds it back.

On a trend under a function of the features (y = t + f(x)) each leaf's value went stale at its own pace
(a leaf moves once its block fills, the rarely visited ones least often), so the error grew along the
stream and no residual level shared by the leaves removed it. With the offset the trees learn f(x) and a
lag the same for every leaf. On a stream without a trend the offset stays 0 and the trees learn what they
learned before. The offset is a function of the targets alone, so a batch's offsets are known before its
trees run: batch, one-record loop and restore give the same bits, with the compiled kernels and
without; a model saved without an offset (before it) restores without one and predicts as it did.
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


def _untrended(**params: Any) -> SGTRegressor:
    """SGTRegressor as before the offset."""
    model = SGTRegressor(**params)
    model._trend = None
    return model


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
    """Catches leaves that go stale along a trend (5,000 records, the offset following from the 710th;
    the MAE of the second half by leaf model "auto", "constant", "linear": without the offset 1.51, 1.72,
    1.77; with it 0.52, 0.74, 0.51)."""
    X, y = _trending(5000)
    trended = _late_mae(SGTRegressor(leaf_model=leaf_model), X, y)
    plain = _late_mae(_untrended(leaf_model=leaf_model), X, y)
    assert trended <= 0.5 * plain, (trended, plain)


@pytest.mark.parametrize("leaf_model", ["auto", "constant", "linear", "adaptive"])
def test_a_stream_without_a_trend_learns_as_before(leaf_model: str) -> None:
    """Friedman #1 and a step-shaped target (no trend): the offset never follows, and the predictions
    and trees are those of the model without it, bit for bit."""
    rng = np.random.default_rng(4)
    X = rng.uniform(0, 1, (6000, 5))
    friedman = 10 * np.sin(np.pi * X[:, 0] * X[:, 1]) + 20 * (X[:, 2] - 0.5) ** 2 + 10 * X[:, 3] + 5 * X[:, 4]
    for y in (friedman + rng.normal(0, 1, 6000), 10.0 * (X[:, 0] > 0.5) + rng.normal(0, 0.1, 6000)):
        model, plain = SGTRegressor(leaf_model=leaf_model), _untrended(leaf_model=leaf_model)
        np.testing.assert_array_equal(
            model.predict_learn_many(X, y.tolist()), plain.predict_learn_many(X, y.tolist())
        )
        assert model._trend is not None and not model._trend.following
        assert model.to_text() == plain.to_text()


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
    batched = SGTRegressor(warm_up=100, **params)
    predictions = np.concatenate(
        [batched.predict_learn_many(X[a:b], y[a:b]) for a, b in [(0, 1), (1, 600), (600, 1001), (1001, 1500)]]
    )
    loop: SGTRegressor = SGTRegressor(warm_up=100, **params)
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
    assert batched._trend is not None and batched._trend.following and batched._offset() > 1.0
    learned = SGTRegressor(warm_up=100, **params)
    learned.learn_many(X, y)
    assert learned.to_bytes() == batched.to_bytes()
    np.testing.assert_array_equal(
        batched.predict_many(X[:50]), [batched.predict_one(_record(x)) for x in X[:50]]
    )


def test_the_boosted_regressors_single_tree_gives_the_same_bits() -> None:
    """The boosted regressor runs its single tree through `_run_codes` (the offset applied there) and
    predicts one record through `predict_one`: the same bits, and a save restores the offset."""
    X, y = _stream(1200)
    batched = BoostedRegressor(warm_up=100)
    predictions = np.concatenate(
        [batched.predict_learn_many(X[a:b], y[a:b]) for a, b in [(0, 500), (500, 1200)]]
    )
    loop: BoostedRegressor = BoostedRegressor(warm_up=100)
    looped = []
    for i, (x, target) in enumerate(zip(X, y, strict=True)):
        if i == 600:
            loop = BoostedRegressor.from_bytes(loop.to_bytes())
        looped.append(loop.predict_one(_record(x)))
        if target is not None:
            loop.learn_one(_record(x), target)
    np.testing.assert_array_equal(np.array(looped), predictions)
    assert loop.to_bytes() == batched.to_bytes()
    assert loop._single is not None and loop._single._trend is not None and loop._single._trend.following


def test_explanations_and_intervals_follow_the_offset_prediction() -> None:
    X, y = _trending(1500)
    model = SGTRegressor(interval_coverages=(0.9,))
    model.learn_many(X, y.tolist())
    record = _record(X[-1])
    prediction = model.predict_one(record)
    explanation = model.explain_one(record)
    assert abs(explanation.score - prediction) < 1e-9
    assert abs(explanation.base + sum(explanation.contributions.values()) - prediction) < 1e-9
    low, high = model.predict_interval_one(record, 0.9)
    assert (low + high) / 2 == pytest.approx(prediction, abs=1e-9)
    boosted = BoostedRegressor()
    boosted.learn_many(X, y.tolist())
    explained = boosted.explain_one(record)
    assert abs(explained.base + sum(explained.contributions.values()) - boosted.predict_one(record)) < 1e-9


def test_a_model_saved_without_the_offset_predicts_without_it() -> None:
    """A save without the offset (before it) restores without one and learns on as the model does with
    its offset dropped; a bad saved offset is refused, naming it."""
    X, y = _trending(1200, slope=0.01)
    model = SGTRegressor()
    model.learn_many(X[:600], y[:600].tolist())
    header, arrays, _ = decode(model.to_bytes())
    assert header["extra"].pop("trend")["following"]
    old = SGTRegressor.from_bytes(encode(header, list(arrays.items())))
    assert old._trend is None
    plain = SGTRegressor.from_bytes(model.to_bytes())
    plain._trend = None
    np.testing.assert_array_equal(
        old.predict_learn_many(X[600:], y[600:].tolist()), plain.predict_learn_many(X[600:], y[600:].tolist())
    )
    assert "trend" not in decode(old.to_bytes()).header["extra"]
    header["extra"]["trend"] = {**model._trend.state(), "rate": 2.0}
    with pytest.raises(SerializationError, match="trend offset"):
        SGTRegressor.from_bytes(encode(header, list(arrays.items())))


def test_a_linked_loss_has_no_offset() -> None:
    """Poisson's trees learn a log-rate: a mean of the counts would not shift it."""
    assert SGTRegressor(loss=Poisson())._trend is None
    assert "trend" not in decode(SGTRegressor(loss=Poisson()).to_bytes()).header["extra"]


@pytest.mark.parametrize("rate", [0.0, -0.1, 1.5, math.nan])
def test_a_bad_rate_is_refused(rate: float) -> None:
    with pytest.raises(ValueError, match="rate"):
        TrendOffset(rate)


@pytest.mark.parametrize("threshold", [-1.0, math.inf, math.nan])
def test_a_bad_threshold_is_refused(threshold: float) -> None:
    with pytest.raises(ValueError, match="threshold"):
        TrendOffset(0.01, threshold)


@settings(max_examples=80, deadline=None)
@given(
    st.lists(st.tuples(st.floats(-1e6, 1e6), st.booleans()), max_size=60),
    st.sampled_from([1.0, 0.25, 0.1]),
    st.sampled_from([0.0, 1.0, 6.0]),
)
def test_taking_one_row_at_a_time_is_shift_bit_for_bit(
    rows: list[tuple[float, bool]], rate: float, threshold: float
) -> None:
    """`TrendOffset.take` (the one-record path) repeats `shift`'s float operations (the batch's), through
    a save and restore half-way; each row's offset is the one before it, 0 until the offset follows."""
    batch, single = TrendOffset(rate, threshold), TrendOffset(rate, threshold)
    targets = np.array([t for t, _ in rows], dtype=np.float64)
    learn = np.array([k for _, k in rows], dtype=bool)
    shifted, offsets = batch.shift(targets, learn)
    for i, (target, learns) in enumerate(rows):
        if i == len(rows) // 2:
            single = TrendOffset.restored(single.state())
        assert single.offset() == offsets[i]
        assert single.following or offsets[i] == 0.0
        if learns:
            assert single.take(target) == shifted[i]
        else:
            assert shifted[i] == target
    assert single.state() == batch.state()


def test_the_offset_follows_a_trend_and_not_noise() -> None:
    """Independent targets never set the offset off (a mean's move within its spread); a trend does,
    and the offset then is the mean's move from its reference."""
    rng = np.random.default_rng(1)
    noise = TrendOffset()
    noise.shift(rng.standard_t(1.5, 50_000), np.ones(50_000, dtype=bool))
    assert not noise.following and noise.offset() == 0.0
    trend = TrendOffset()
    trend.shift(0.002 * np.arange(5000) + rng.normal(0, 1, 5000), np.ones(5000, dtype=bool))
    assert trend.following and trend.reference is not None
    assert trend.offset() == trend.mean - trend.reference and 8.0 < trend.offset() < 10.0


@pytest.mark.skipif(not kernels.ENABLED, reason="the compiled kernels are off")
@settings(max_examples=80, deadline=None)
@given(
    st.lists(
        st.tuples(st.one_of(st.floats(-1e6, 1e6), st.sampled_from([math.nan, math.inf])), st.booleans()),
        max_size=80,
    ),
    st.integers(1, 40),
    st.sampled_from([1.0, 0.25, 0.1]),
    st.sampled_from([0.0, 1.0, 6.0]),
)
def test_the_compiled_shift_is_the_python_walk_bit_for_bit(
    rows: list[tuple[float, bool]], batch: int, rate: float, threshold: float
) -> None:
    """`shift` by sgt.kernels.trend_rows gives the Python walk's tree targets, offsets and state, batch
    after batch, non-finite targets included."""
    compiled, walked = TrendOffset(rate, threshold), TrendOffset(rate, threshold)
    targets = np.array([t for t, _ in rows], dtype=np.float64)
    learn = np.array([k for _, k in rows], dtype=bool)
    for start in range(0, len(rows), batch):
        part = slice(start, start + batch)
        kernels.ENABLED = False  # (hypothesis takes no function-scoped fixture such as monkeypatch)
        try:
            expected = walked.shift(targets[part], learn[part])
        finally:
            kernels.ENABLED = True
        got = compiled.shift(targets[part], learn[part])
        for a, b in zip(got, expected, strict=True):
            np.testing.assert_array_equal(a.view(np.int64), b.view(np.int64))
        assert compiled.state() == walked.state()
