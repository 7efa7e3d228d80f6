"""The boosted regressor's residual level (sgt.residual).

Its members move a leaf only once a block is full, so on a target that wanders over time the
prediction lagged the level by up to a block: TrumpApproval's ensemble had 3.4 times AMF's MAE and 7
times the last value's. The residual level adds a recent mean of the ensemble's own residuals where
that has had the smaller recent error, and leaves a stationary stream's predictions alone.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from sgt import BoostedRegressor
from sgt.explain import explain_raw
from sgt.losses import Poisson
from sgt.residual import RATES, ResidualLevel
from sgt.serialization import decode, encode


def _series(n: int, seed: int = 6) -> tuple[np.ndarray, np.ndarray]:
    """A time series: a random-walk level read at minute timestamps, plus a feature's effect and noise."""
    rng = np.random.default_rng(seed)
    t = 1.7e9 + 60.0 * np.arange(n)
    a = rng.uniform(0, 1, n)
    y = np.cumsum(rng.normal(0, 0.3, n)) + 3 * a + rng.normal(0, 0.3, n)
    return np.column_stack([t, a]), y


def _friedman(n: int, seed: int = 5) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = rng.uniform(0, 1, (n, 10))
    y = 10 * np.sin(np.pi * X[:, 0] * X[:, 1]) + 20 * (X[:, 2] - 0.5) ** 2 + 10 * X[:, 3] + 5 * X[:, 4]
    return X, y + rng.normal(0, 1, n)


def _mae(model: BoostedRegressor, X: np.ndarray, y: np.ndarray) -> float:
    return float(np.abs(model.predict_learn_many(X, y.tolist()) - y).mean())


def _without_level() -> BoostedRegressor:
    """The members alone, without the residual level (nor the single tree, which has levels of its own,
    nor the forest)."""
    model = BoostedRegressor(single_tree=False, forest=False, fine_tree=False)
    model._residual = None
    return model


def test_a_wandering_level_is_followed() -> None:
    X, y = _series(3000)
    last_value = float(np.abs(np.diff(y)).mean())  # predicting each target by the one before it
    mae = _mae(BoostedRegressor(single_tree=False, forest=False, fine_tree=False), X, y)
    # (before: 3.3 times the last value's MAE)
    assert mae <= 1.3 * last_value, (mae, last_value)
    assert mae <= 0.5 * _mae(_without_level(), X, y)
    assert _mae(BoostedRegressor(), X, y) <= mae  # (with the single tree beside the members)


def test_a_stationary_stream_keeps_the_ensembles_predictions() -> None:
    X, y = _friedman(5000)
    members = BoostedRegressor(single_tree=False, forest=False, fine_tree=False)
    assert _mae(members, X, y) <= 1.01 * _mae(_without_level(), X, y)


def test_no_correction_until_one_has_done_better() -> None:
    level = ResidualLevel(means=None)  # the residual means alone (as saved before the target means)
    assert level.correction() == 0.0
    level.learn(0.0, 1.0)  # every candidate erred alike on the first residual: none still wins
    assert level.correction() == 0.0
    level.learn(0.0, 1.0)
    assert level.correction() == pytest.approx(1.0 - (1.0 - RATES[0]) ** 2)


def test_a_target_mean_replaces_the_prediction_once_it_has_done_better() -> None:
    level = ResidualLevel()
    assert level.corrected(5.0) == 5.0
    level.learn(0.0, 1.0)  # every candidate erred alike on the first record: none still wins
    assert level.corrected(5.0) == 5.0
    level.learn(0.0, 1.0)  # the last target (1.0) erred 0.0 on it, the best of the residual means 0.5
    assert level.corrected(5.0) == 1.0
    assert level.correction(5.0) == -4.0


def test_a_non_finite_residual_is_skipped() -> None:
    level = ResidualLevel()
    level.learn(0.0, 2.0)
    before = level.state()
    level.learn(math.inf, 1.0)
    level.learn(math.nan, 1.0)
    assert level.state() == before
    with pytest.raises(ValueError, match="levels"):
        ResidualLevel([0.0], [0.0])
    with pytest.raises(ValueError, match="target means"):
        ResidualLevel(means=[0.0])


def test_loop_batch_and_restore_give_the_same_bits() -> None:
    X, y = _series(1500)
    batched = BoostedRegressor(warm_up=100)
    predictions = batched.predict_learn_many(X, y.tolist())
    loop = BoostedRegressor(warm_up=100)
    names = [f"x{j}" for j in range(X.shape[1])]
    looped = []
    for x, target in zip(X, y, strict=True):
        record = dict(zip(names, x.tolist(), strict=True))
        looped.append(loop.predict_one(record))
        loop.learn_one(record, float(target))
    np.testing.assert_array_equal(np.array(looped), predictions)
    assert loop.to_bytes() == batched.to_bytes()
    assert batched._residual is not None and batched._residual.correction() != 0.0
    half = BoostedRegressor(warm_up=100)
    first = half.predict_learn_many(X[:700], y[:700].tolist())
    restored = BoostedRegressor.from_bytes(half.to_bytes())
    assert restored.to_bytes() == half.to_bytes()
    rest = restored.predict_learn_many(X[700:], y[700:].tolist())
    np.testing.assert_array_equal(np.concatenate([first, rest]), predictions)
    assert restored.to_bytes() == batched.to_bytes()
    np.testing.assert_array_equal(
        restored.predict_many(X[:50]),
        [restored.predict_one(dict(zip(names, x.tolist(), strict=True))) for x in X[:50]],
    )


def test_explanations_add_up_to_the_corrected_prediction() -> None:
    X, y = _series(1200)
    model = BoostedRegressor()
    model.learn_many(X, y.tolist())
    assert model._residual is not None and model._residual.correction() != 0.0
    record = {"x0": float(X[-1, 0]), "x1": float(X[-1, 1])}
    assert abs(float(explain_raw(model, record).sum()) - model.predict_one(record)) < 1e-9


def test_a_model_saved_before_the_level_predicts_without_it() -> None:
    X, y = _series(1200)
    model = BoostedRegressor()
    model.learn_many(X[:600], y[:600].tolist())
    header, arrays, _ = decode(model.to_bytes())
    assert set(header["extra"].pop("residual")) == {"levels", "errors", "means", "mean_errors"}
    old = BoostedRegressor.from_bytes(encode(header, list(arrays.items())))
    assert old._residual is None
    plain = BoostedRegressor.from_bytes(model.to_bytes())
    plain._residual = None
    np.testing.assert_array_equal(
        old.predict_learn_many(X[600:], y[600:].tolist()), plain.predict_learn_many(X[600:], y[600:].tolist())
    )
    assert "residual" not in decode(old.to_bytes()).header["extra"]


def test_a_linked_loss_has_no_level() -> None:
    model = BoostedRegressor(loss=Poisson())
    assert model._residual is None
    assert "residual" not in decode(model.to_bytes()).header["extra"]
