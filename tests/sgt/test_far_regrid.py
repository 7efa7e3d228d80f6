"""A feature grid that grows at once by its number of bins or more (a far outlier in the warm-up) no
longer makes linear leaves extrapolate to it.

The linear term is re-expressed on the grown grid by scaling its weight by the growth: the values it
was learned on now fall in one or two bins, so the term only extrapolates its slope to the outlier,
thousands off the target; the boosted regressor's later members then chase those errors. The tree now
moves such a term into its value. Models saved before the rule keep the old one.
"""

from __future__ import annotations

import numpy as np

from sgt import BoostedRegressor, SGTRegressor
from sgt.serialization import decode, encode


def _feature_outliers(n: int, seed: int = 14) -> tuple[np.ndarray, list[float]]:
    """A linear target of four uniform features, 1% of the feature values 1,000 times their range."""
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1, 1, (n, 4))
    y = 3 * X[:, 0] - 2 * X[:, 1] + rng.normal(0, 1, n)
    X[rng.uniform(0, 1, X.shape) < 0.01] *= 1000.0
    return X, y.tolist()


def _mae(model: SGTRegressor, X: np.ndarray, y: list[float]) -> float:
    return float(np.abs(np.asarray(model.predict_learn_many(X, y)) - y).mean())


def test_feature_outliers_do_not_make_the_boosted_regressor_diverge() -> None:
    X, y = _feature_outliers(3000)
    single = _mae(SGTRegressor(), X, y)
    assert _mae(BoostedRegressor(), X, y) <= 2.0 * single  # (before: 178 times)
    assert _mae(SGTRegressor(leaf_model="linear"), X, y) <= 2.0 * single


def test_a_far_growth_keeps_the_term_at_the_old_range_and_drops_its_slope() -> None:
    rng = np.random.default_rng(3)
    X = rng.uniform(-1, 1, (400, 1))
    y = (5 * X[:, 0]).tolist()
    model = SGTRegressor(leaf_model="linear", warm_up=1000, grace_start=10, grace_period=20)
    model._space.hold_far = 0  # every value grows the grid (far values held: test_held_far.py)
    model.learn_many(X, y)
    (tree,) = model._trees
    assert np.abs(tree.weights).max() > 1.0  # the term was learned
    inside = np.array([[0.01], [0.02]])
    before = np.asarray(model.predict_many(inside))
    model.learn_many(np.array([[3000.0]]), [0.0])  # the grid grows 2048-fold at once
    assert np.abs(tree.weights[: tree.n_nodes]).max() == 0.0
    after = np.asarray(model.predict_many(inside))
    assert np.abs(after - before).max() < 6.0  # the term's value near its old range stays
    assert abs(model.predict_one({"x0": 1500.0}) - before.mean()) < 10.0  # no slope to extrapolate


def test_a_model_saved_before_the_rule_keeps_rescaling() -> None:
    X, y = _feature_outliers(1600)
    X[:300] = np.clip(X[:300], -1.0, 1.0)  # the outliers come after the save, in the warm-up
    # (saved before the rule: no side models)
    model = BoostedRegressor(n_members=2, single_tree=False, forest=False, fine_tree=False)
    model._space.hold_far = 0  # every value grows the grid (far values held: test_held_far.py)
    model.learn_many(X[:300], y[:300])
    header, arrays, _ = decode(model.to_bytes())
    assert header.pop("drop_far_terms") is True
    old = BoostedRegressor.from_bytes(encode(header, list(arrays.items())))
    assert not old._drop_far_terms and all(not t.params.drop_far_terms for t in old._trees)
    new = BoostedRegressor.from_bytes(model.to_bytes())
    assert all(t.params.drop_far_terms for t in new._trees)
    for restored in (old, new):  # (levels as before the target means: they would replace the divergence)
        assert restored._residual is not None
        restored._residual.means = None
    old_mae = _mae(old, X[300:], y[300:])
    assert old_mae > 2.0 * _mae(new, X[300:], y[300:])
    again = BoostedRegressor.from_bytes(old.to_bytes())
    assert not again._drop_far_terms and again.to_bytes() == old.to_bytes()


def test_far_growths_keep_batch_loop_and_restore_exact() -> None:
    X, y = _feature_outliers(700)
    X[:150] = np.clip(X[:150], -1.0, 1.0)  # terms learned before the far growths
    batch = BoostedRegressor(n_members=3, warm_up=500)
    batch._space.hold_far = 0  # every value grows the grid (far values held: test_held_far.py)
    batch.learn_many(X, y)
    loop = BoostedRegressor(n_members=3, warm_up=500)
    loop._space.hold_far = 0
    for row, target in zip(X[:350], y[:350]):
        loop.learn_one({f"x{j}": float(v) for j, v in enumerate(row)}, target)
    loop = BoostedRegressor.from_bytes(loop.to_bytes())
    for row, target in zip(X[350:], y[350:]):
        loop.learn_one({f"x{j}": float(v) for j, v in enumerate(row)}, target)
    assert loop.to_bytes() == batch.to_bytes()
