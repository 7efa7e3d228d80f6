"""Rare gross outliers in the warm-up no longer stretch a numeric feature's grid.

A grid grows to hold every learned value of its warm-up, so before this rule one feature value 1,000
times the feature's range made the grid 1,000 times wider: every ordinary value then fell into one of
the 64 bins, and no split could separate them. A space that holds far values (`FeatureSpace.hold_far`)
sends a value more than `hold_far` - 1 grid widths beyond the grid to the end bin on its side instead,
and grows only once such values make up a share of the feature's values (a tail that keeps coming).
Exact as ever: batch == one-record loop == save/restore, byte for byte; models saved without the rule
keep growing to every value.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sgt import BoostedRegressor, SGTClassifier, SGTRegressor, kernels
from sgt.features import HOLD_SHARE, FeatureSpace
from sgt.serialization import decode, encode


def _feature_outliers(n: int, seed: int = 14) -> tuple[np.ndarray, list[float]]:
    """A linear target of four uniform features, 1% of the feature values 1,000 times their range."""
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1, 1, (n, 4))
    y = 3 * X[:, 0] - 2 * X[:, 1] + rng.normal(0, 1, n)
    X[rng.uniform(0, 1, X.shape) < 0.01] *= 1000.0
    return X, y.tolist()


def _ordinary_bins(model: SGTRegressor, X: np.ndarray) -> list[int]:
    """How many bins each feature's ordinary values (|x| <= 1) occupy on the model's grids."""
    codes = model._space.encode_array(X, learn=np.zeros(len(X), dtype=bool))
    return [len(set(codes[np.abs(X[:, j]) <= 1.0, j].tolist())) for j in range(X.shape[1])]


def test_ordinary_values_keep_their_bins_after_gross_outliers() -> None:
    """Failed before the rule: every feature's ordinary values shared one bin."""
    X, y = _feature_outliers(3000)
    model = SGTRegressor()
    model.learn_many(X[:2000], y[:2000])
    assert sum(np.abs(X[:2000]) > 1.0).min() >= 10  # every feature met about 20 outliers
    bins = _ordinary_bins(model, X[2000:])
    assert sorted(bins)[1] >= 16, bins  # (one feature may meet an outlier among its first values)


def test_the_rule_before_stretches_the_grids() -> None:
    X, y = _feature_outliers(3000)
    model = SGTRegressor()
    model._space.hold_far = 0
    model.learn_many(X[:2000], y[:2000])
    assert max(_ordinary_bins(model, X[2000:])) <= 2


def test_a_tail_that_keeps_coming_grows_the_grid() -> None:
    space = FeatureSpace(bins=64, warm_up=10_000, hold_far=8)
    rng = np.random.default_rng(5)
    ordinary = rng.uniform(-1, 1, 200)
    space.encode_array(ordinary[:, None], learn=None)
    before = space.range_of(0)
    assert before is not None and before[1] - before[0] <= 4.0
    far = np.full(1, 1000.0)
    codes = [space.encode_one([1000.0], learn=True)[0] for _ in range(5)]
    assert space.range_of(0) == before and codes == [64] * 5  # held: the end bin
    # held values up to 1 / HOLD_SHARE of the values so far: the last of them grows the grid
    needed = math.ceil((200 + 5 + 1) / HOLD_SHARE)
    for _ in range(needed):
        space.encode_array(far[:, None], learn=None)
    grown = space.range_of(0)
    assert grown is not None and grown[1] > 1000.0
    assert space.numeric[0] is not None and space.numeric[0].far == 0


@settings(max_examples=60, deadline=None)
@given(
    values=st.lists(
        st.one_of(
            st.floats(-2.0, 2.0),
            st.sampled_from([1e3, -1e3, 5e5, -3e7, 1e300, math.inf, math.nan, 0.0, -0.0]),
        ),
        min_size=1,
        max_size=120,
    ),
    hold=st.sampled_from([0, 2, 4, 8, 64]),
    warm_up=st.sampled_from([5, 40, 1000]),
    cut=st.integers(0, 120),
)
def test_the_batch_path_holds_and_grows_exactly_as_the_one_record_path(
    values: list[float], hold: int, warm_up: int, cut: int
) -> None:
    values = [0.5, *values]  # (a feature registers at its first value that is not missing)
    one = FeatureSpace(bins=16, warm_up=warm_up, hold_far=hold)
    loop_codes = [one.encode_one({"x0": v}, learn=True)[0] for v in values]
    loop_regrids = [(r.mapping.tolist(), r.old_range, r.new_range) for r in one.take_regrids()]
    many = FeatureSpace(bins=16, warm_up=warm_up, hold_far=hold)
    column = np.array(values)[:, None]
    batch_codes = np.concatenate(
        [many.encode_array(part, learn=None)[:, 0] for part in (column[:cut], column[cut:]) if len(part)]
    ).tolist()
    batch_regrids = [(r.mapping.tolist(), r.old_range, r.new_range) for r in many.take_regrids()]
    assert batch_codes == loop_codes
    assert batch_regrids == loop_regrids
    assert many.saved()[0] == one.saved()[0]
    assert np.array_equal(many.saved()[1][1], one.saved()[1][1], equal_nan=True)


@pytest.mark.parametrize("enabled", [True, False], ids=["kernels", "numpy"])
@pytest.mark.parametrize(
    "make", [SGTRegressor, lambda: BoostedRegressor(n_members=3)], ids=["tree", "boosted"]
)
def test_held_values_keep_batch_loop_and_restore_exact(make, enabled, monkeypatch) -> None:
    monkeypatch.setattr(kernels, "ENABLED", enabled)
    X, y = _feature_outliers(1500)
    batch = make()
    batch.learn_many(X, y)
    loop = make()
    for row, target in zip(X[:700], y[:700]):
        loop.learn_one({f"x{j}": float(v) for j, v in enumerate(row)}, target)
    loop = type(loop).from_bytes(loop.to_bytes())
    for row, target in zip(X[700:], y[700:]):
        loop.learn_one({f"x{j}": float(v) for j, v in enumerate(row)}, target)
    assert max(_ordinary_bins(batch, X)) >= 16  # far values were held (before: at most 2 bins each)
    assert loop.to_bytes() == batch.to_bytes()
    assert np.array_equal(loop.predict_many(X[:50]), batch.predict_many(X[:50]))


def test_the_classifier_holds_far_values_too() -> None:
    X, _ = _feature_outliers(3000)
    labels = (X[:, 0] > 0).astype(int).tolist()
    model = SGTClassifier()
    model.learn_many(X[:2000], labels[:2000])
    assert sorted(_ordinary_bins(model, X[2000:]))[1] >= 16


def test_a_model_saved_before_the_rule_keeps_growing_to_every_value() -> None:
    X, y = _feature_outliers(1600)
    X[:300] = np.clip(X[:300], -1.0, 1.0)  # the outliers come after the save, in the warm-up
    model = SGTRegressor()
    model.learn_many(X[:300], y[:300])
    header, arrays, _ = decode(model.to_bytes())
    assert header["space"].pop("hold_far") > 1
    assert header["space"].pop("far") == [0, 0, 0, 0]
    old = SGTRegressor.from_bytes(encode(header, list(arrays.items())))
    assert old._space.hold_far == 0
    new = SGTRegressor.from_bytes(model.to_bytes())
    assert new._space.hold_far == model._space.hold_far
    old.learn_many(X[300:], y[300:])
    new.learn_many(X[300:], y[300:])
    assert max(_ordinary_bins(old, X[:300])) <= 2  # stretched, as before the rule
    assert sorted(_ordinary_bins(new, X[:300]))[1] >= 16
    again = SGTRegressor.from_bytes(old.to_bytes())
    assert again._space.hold_far == 0 and again.to_bytes() == old.to_bytes()
    assert "hold_far" not in decode(old.to_bytes())[0]["space"]  # written as before the rule
