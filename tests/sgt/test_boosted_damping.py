"""The boosted regressor's members after the first take a damped share of their Newton steps.

Every member steps at the same block boundaries, from gradients gathered before any of them moved: the
members after the first also fit what the ones before them fit at that very boundary. Undamped, the
prediction moved by `n_members * step` (2.5) times the residual, and on a slowly moving target the
members after the first kept undoing it with alternating signs (TrumpApproval: the running mean's MAE).
Models saved before the damping keep their undamped members.
"""

from __future__ import annotations

import numpy as np
import pytest

from sgt import BoostedRegressor, kernels
from sgt.boosted.regressor import MIN_SHARE, damped_share
from sgt.serialization import decode, encode
from tests.sgt.sgt_testkit import NO_TREE_OR_FOREST


def _members_only(**params: object) -> BoostedRegressor:
    """A BoostedRegressor without its residual level (sgt.residual) or single tree: the members'
    predictions."""
    model = BoostedRegressor(single_tree=False, forest=False, fine_tree=False, **params)  # type: ignore[arg-type]
    model._residual = None
    return model


def _shift(n: int) -> tuple[np.ndarray, np.ndarray]:
    """A first target of 0 (the base score), then a target of 1: the residual every member sees."""
    rng = np.random.default_rng(3)
    X = rng.uniform(0, 1, (n, 2))
    y = np.ones(n)
    y[0] = 0.0
    return X, y


def _walk(n: int, seed: int = 4) -> tuple[np.ndarray, np.ndarray]:
    """A slowly moving target (a random walk over time) and noisy readings of it, as in a time series."""
    rng = np.random.default_rng(seed)
    level = np.cumsum(rng.normal(0, 0.3, n))
    X = np.column_stack([np.arange(n, dtype=float), level + rng.normal(0, 1, n), rng.uniform(0, 1, n)])
    return X, level + rng.normal(0, 0.2, n)


def test_the_members_together_never_overshoot_a_shifted_target() -> None:
    X, y = _shift(400)
    predictions = _members_only(warm_up=50).predict_learn_many(X, y.tolist())
    # (undamped: 2.5 times the residual after the first block boundary)
    assert predictions.max() <= 1.25, predictions.max()
    assert abs(predictions[-100:] - 1.0).max() < 0.2  # (undamped: still 1.5 off)


def test_a_slowly_moving_target_is_tracked_as_well_as_by_one_member() -> None:
    X, y = _walk(1500)
    ensemble = _members_only(leaf_model="constant").predict_learn_many(X, y.tolist())
    one = _members_only(n_members=1, learning_rate=1.0, leaf_model="constant").predict_learn_many(
        X, y.tolist()
    )
    mae, one_mae = float(np.abs(ensemble - y).mean()), float(np.abs(one - y).mean())
    # (undamped: 1.34 times one member's MAE)
    assert mae <= 1.1 * one_mae, (mae, one_mae)


@pytest.mark.parametrize(("step", "members"), [(0.5, 5), (0.25, 10), (1.0, 1), (0.125, 20), (0.3, 2)])
def test_the_damped_members_move_the_prediction_by_at_most_the_residual(step: float, members: int) -> None:
    share = damped_share(step, members)
    assert 0.0 < share <= 1.0
    assert step * (1 + (members - 1) * share) <= 1.0 + 1e-12 or share == 1.0


def test_members_after_a_full_step_still_learn() -> None:
    # (at a step of 1 the bound leaves them nothing: before the floor, a division by zero)
    assert damped_share(1.0, 2) == damped_share(1.0, 5) == MIN_SHARE
    X, y = _shift(300)
    model = _members_only(n_members=2, learning_rate=1.0)
    assert [m._step_share for m in model._members] == [1.0, MIN_SHARE]
    predictions = model.predict_learn_many(X, y.tolist())
    assert abs(predictions[-50:] - 1.0).max() < 0.2


def test_the_shares_are_the_default_members_own() -> None:
    model = BoostedRegressor()
    assert [m._step_share for m in model._members] == [1.0, 0.25, 0.25, 0.25, 0.25]
    assert [m.trees[0].params.lambda_ for m in model._members] == [0.1, 0.4, 0.4, 0.4, 0.4]
    one = BoostedRegressor(n_members=1, learning_rate=1.0)
    assert "damped_members" not in decode(one.to_bytes()).header["extra"]


@pytest.mark.parametrize("enabled", [True, False])
def test_batch_loop_and_restore_give_the_same_bits(enabled: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(kernels, "ENABLED", enabled and kernels.ENABLED)
    X, y = _walk(1200)
    # (the members alone, NO_TREE_OR_FOREST: their damped steps are the subject)
    batch = BoostedRegressor(warm_up=100, **NO_TREE_OR_FOREST)
    batched = batch.predict_learn_many(X, y.tolist())
    loop = BoostedRegressor(warm_up=100, **NO_TREE_OR_FOREST)
    looped: list[float] = []
    for x, t in zip(X, y, strict=True):
        looped.append(loop.predict_learn_many(x[None, :], [float(t)])[0])
    np.testing.assert_array_equal(np.array(looped), batched)
    assert loop.to_bytes() == batch.to_bytes()
    half = BoostedRegressor(warm_up=100, **NO_TREE_OR_FOREST)
    first = half.predict_learn_many(X[:600], y[:600].tolist())
    restored = BoostedRegressor.from_bytes(half.to_bytes())
    assert restored.to_bytes() == half.to_bytes()
    rest = restored.predict_learn_many(X[600:], y[600:].tolist())
    np.testing.assert_array_equal(np.concatenate([first, rest]), batched)
    assert restored.to_bytes() == batch.to_bytes()


def test_a_model_saved_before_the_damping_keeps_its_undamped_members() -> None:
    X, y = _walk(1600)
    model = BoostedRegressor(warm_up=100)
    model.learn_many(X[:800], y[:800].tolist())
    header, arrays, _ = decode(model.to_bytes())
    assert header["extra"].pop("damped_members") is True
    old = BoostedRegressor.from_bytes(encode(header, list(arrays.items())))
    assert [m._step_share for m in old._members] == [1.0] * 5
    assert [m.trees[0].params.lambda_ for m in old._members] == [0.1] * 5
    assert "damped_members" not in decode(old.to_bytes()).header["extra"]
    # it learns on as an undamped model would (the same trees, undamped steps from here)
    undamped = BoostedRegressor.from_bytes(encode(header, list(arrays.items())))
    old.learn_many(X[800:], y[800:].tolist())
    undamped.learn_many(X[800:], y[800:].tolist())
    assert old.to_bytes() == undamped.to_bytes()
