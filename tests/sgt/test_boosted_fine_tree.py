"""The boosted regressor's fine tree (`fine_tree`): a constant-leaf SGTRegressor on its own grid of
`FINE_BINS` (1,024) bins learns every record beside the members, the single tree and the forest, and the
choice (sgt.boosted.tree_choice.TreeChoice) adds its prediction and its means with the forest's and the
single tree's to the candidates.

A step-shaped target whose steps fall off the members' 64-bin grid is where it serves: their splits
fall on bin edges up to half a bin from a step. Models saved before the parameter restore without it
(the fixtures' tests in test_boosted_forest_regressor.py), and `fine_tree=False` saves the bytes of the
format before it.
"""

from __future__ import annotations

import numpy as np
import pytest

from sgt import BoostedRegressor, kernels
from sgt.boosted.regressor import FINE_BINS, FINE_MAX_BYTES, ForestRegressor
from sgt.boosted.tree_choice import FINE_CANDIDATES, Candidate
from sgt.explain import explain_raw
from sgt.losses import Poisson
from sgt.serialization import SerializationError, decode, encode
from tests.sgt.sgt_testkit import looped_with_restore


def _step(n: int, seed: int = 3) -> tuple[np.ndarray, np.ndarray]:
    """A step target, 4 floor(7 x) plus noise, whose steps at multiples of 1/7 fall off any grid of a
    power-of-two number of bins, and a second, irrelevant feature."""
    rng = np.random.default_rng(seed)
    X = rng.uniform(0, 1, (n, 2))
    y = 4.0 * np.floor(7.0 * X[:, 0]) + rng.normal(0, 0.5, n)
    return X, y


def _records(X: np.ndarray) -> list[dict[str, float]]:
    return [{"x0": float(a), "x1": float(b)} for a, b in X.tolist()]


def _batched(model: BoostedRegressor, X: np.ndarray, y: np.ndarray, size: int = 700) -> np.ndarray:
    return np.concatenate(
        [model.predict_learn_many(X[i : i + size], y[i : i + size].tolist()) for i in range(0, len(y), size)]
    )


def _serving(model: BoostedRegressor) -> Candidate:
    assert model._choice is not None
    return model._choice.offered[model._choice.serving()]


def test_a_step_off_the_grid_is_served_by_the_fine_tree() -> None:
    X, y = _step(8000)
    fine, coarse = BoostedRegressor(), BoostedRegressor(fine_tree=False)
    served, before = _batched(fine, X, y, 1000), _batched(coarse, X, y, 1000)
    assert "fine" in _serving(fine).models
    late, late_before = np.abs(served - y)[4000:].mean(), np.abs(before - y)[4000:].mean()
    assert late <= 0.93 * late_before, (late, late_before)  # (measured: 0.87 times)


@pytest.mark.parametrize("enabled", [True, False], ids=["kernels", "SGT_KERNELS=0"])
def test_loop_batch_and_restore_give_the_same_bits(enabled: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(kernels, "ENABLED", enabled and kernels.ENABLED)
    X, y = _step(2400)

    def new() -> BoostedRegressor:
        return BoostedRegressor(warm_up=100)

    batched = new()
    predictions = _batched(batched, X, y)
    assert batched._choice is not None and "fine" in _serving(batched).models  # (it serves)
    loop, looped = looped_with_restore(new(), _records(X), y.tolist(), 1234)
    np.testing.assert_array_equal(np.array(looped), predictions)
    assert loop.to_bytes() == batched.to_bytes()
    half = new()
    first = half.predict_learn_many(X[:1100], y[:1100].tolist())
    restored = BoostedRegressor.from_bytes(half.to_bytes())
    fine = restored._fine
    assert fine is not None and fine._space is not restored._space and fine.bins == FINE_BINS
    assert restored.to_bytes() == half.to_bytes()
    rest = restored.predict_learn_many(X[1100:], y[1100:].tolist())
    np.testing.assert_array_equal(np.concatenate([first, rest]), predictions)
    assert restored.to_bytes() == batched.to_bytes()
    np.testing.assert_array_equal(
        restored.predict_many(X[:50]), [restored.predict_one(r) for r in _records(X[:50])]
    )


def test_the_fine_tree_is_on_by_default_constant_fine_and_in_its_own_space() -> None:
    model = BoostedRegressor(max_depth=6)
    assert model.fine_tree is True and model.get_params()["fine_tree"] is True
    fine = model._fine
    assert fine is not None and fine._space is not model._space
    assert fine.bins == FINE_BINS == 1024 and model.bins == 64
    assert fine.leaf_model == "constant" and fine.max_depth == 6 and fine.max_bytes == FINE_MAX_BYTES
    assert model._choice is not None and "fine" in model._choice.models
    assert model._forest is not None and model._forest.fine_tree is False  # (a forest has none)


def test_fine_tree_false_saves_the_format_before_it() -> None:
    X, y = _step(600)
    model = BoostedRegressor(warm_up=100, fine_tree=False)
    model.learn_many(X, y.tolist())
    header = decode(model.to_bytes()).header
    assert "fine_tree" not in header["params"] and "fine" not in header["extra"]
    assert len(header["extra"]["single"]["choice"]) == 12  # (the candidates before the fine tree)
    restored = BoostedRegressor.from_bytes(model.to_bytes())
    assert restored._fine is None and restored.fine_tree is False
    assert restored.to_bytes() == model.to_bytes()


def test_the_fine_tree_is_saved_beside_the_others_and_a_save_missing_it_is_refused() -> None:
    X, y = _step(600)
    model = BoostedRegressor(warm_up=100)
    model.learn_many(X, y.tolist())
    header, arrays, _ = decode(model.to_bytes())
    assert header["params"]["fine_tree"] is True
    assert set(header["extra"]["fine"]) == {"header", "version"}  # (the choice: with the tree's)
    assert header["extra"]["fine"]["header"]["model"] == "SGTRegressor"
    assert any(name.startswith("extra.fine.") for name in arrays)
    missing = {k: v for k, v in header["extra"].items() if k != "fine"}
    with pytest.raises(SerializationError, match="fine tree"):
        BoostedRegressor.from_bytes(encode({**header, "extra": missing}, list(arrays.items())))
    header["params"]["fine_tree"] = False  # (a fine tree the parameter says the model has not)
    with pytest.raises(SerializationError, match="fine tree"):
        BoostedRegressor.from_bytes(encode(header, list(arrays.items())))


def test_with_the_fine_tree_alone_the_choice_keeps_it_in_a_save() -> None:
    X, y = _step(600)
    model = BoostedRegressor(warm_up=100, single_tree=False, forest=False)
    predictions = model.predict_learn_many(X, y.tolist())
    assert model._choice is not None and model._choice.models == {"ensemble", "fine"}
    header = decode(model.to_bytes()).header
    assert len(header["extra"]["fine"]["choice"]) == 2  # (the ensemble, the fine tree)
    again = BoostedRegressor(warm_up=100, single_tree=False, forest=False)
    head = again.predict_learn_many(X[:300], y[:300].tolist())
    restored = BoostedRegressor.from_bytes(again.to_bytes())
    tail = restored.predict_learn_many(X[300:], y[300:].tolist())
    np.testing.assert_array_equal(np.concatenate([head, tail]), predictions)
    assert restored.to_bytes() == model.to_bytes()


def test_explanations_and_importances_follow_the_fine_tree_when_it_serves() -> None:
    X, y = _step(2000)
    model = BoostedRegressor(warm_up=100)
    model.learn_many(X, y.tolist())
    choice, fine = model._choice, model._fine
    assert choice is not None and fine is not None
    record = _records(X[-1:])[0]
    for candidate in FINE_CANDIDATES:
        choice.errors = [0.0 if c == candidate else 1.0 for c in choice.offered]
        assert abs(float(explain_raw(model, record).sum()) - model.predict_one(record)) < 1e-9
    choice.errors = [0.0 if c == Candidate("ensemble", "fine", 1.0) else 1.0 for c in choice.offered]
    assert model.predict_one(record) == fine.predict_one(record)
    assert model.feature_importances() == fine.feature_importances()


def test_the_fine_trees_bytes_count() -> None:
    X, y = _step(1500)
    fine, without = BoostedRegressor(warm_up=100), BoostedRegressor(warm_up=100, fine_tree=False)
    fine.learn_many(X, y.tolist())
    without.learn_many(X, y.tolist())
    assert fine._fine is not None
    assert fine.nbytes == without.nbytes + fine._fine.nbytes > without.nbytes


def test_no_fine_tree_with_a_linked_loss_or_a_budget_and_a_bad_value_is_refused() -> None:
    assert BoostedRegressor(loss=Poisson())._fine is None
    assert BoostedRegressor(max_bytes=1_000_000)._fine is None
    with pytest.raises(ValueError, match="fine_tree"):
        BoostedRegressor(fine_tree="yes")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="fine_tree"):
        ForestRegressor(forest=False, fine_tree=True)
    assert BoostedRegressor(single_tree=False, forest=False, fine_tree=False)._choice is None
