"""The regressor's tree-level leaf choice (`leaf_model="auto"`, its default): four trees learn side by
side, with adaptive, constant and linear leaves and a second adaptive tree whose root waits for 50
records, and the model predicts with the one whose faded absolute error is lowest
(sgt.regressor.AUTO_LEAVES, AUTO_LATE_STARTS, AUTO_FADING).

- On step-shaped targets it is within 5% of the better of the constant- and linear-leaf trees, which
  the adaptive leaves (the default before) were not: their tree grows elsewhere than the constant-leaf
  tree, and no choice within a leaf recovers that tree's MAE.
- It is exact like everything else: batch equals loop, any batching, save/restore at any point, byte
  for byte, with and without the compiled kernels.
- Where a root split on the first records takes a feature that matters in one region only (River's
  Planes2D), the late tree serves, within 5% of River's HoeffdingTreeRegressor (the three trees of
  before: 46% above it).
- Models saved before it restore as they were (a saved leaf model is kept; one saved without any
  restores with adaptive leaves, as it did; one saved with three trees, before the late one, learns on
  with three), and a blob that lacks the trees' errors is refused.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sgt import AdaptiveSGTRegressor, BoostedRegressor, SGTRegressor, kernels
from sgt.losses import Poisson
from sgt.regressor import AUTO_LATE_STARTS, AUTO_LEAVES
from sgt.serialization import SerializationError, decode, encode
from tests.sgt.sgt_testkit import learned_in_pieces, mixed_regression_stream, predicted_then_learned

PROPERTY = settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
N = 1200


def _steps(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """A target of steps in three of five features (where the constant-leaf tree splits best)."""
    rng = np.random.default_rng(seed)
    X = rng.uniform(0.0, 1.0, (n, 5))
    y = 10.0 * (X[:, 0] > 0.5) + 5.0 * (X[:, 1] > 0.3) * (X[:, 2] > 0.7) + rng.normal(0.0, 0.1, n)
    return X, y


def _mae(model: SGTRegressor, X: np.ndarray, y: np.ndarray) -> float:
    return float(np.abs(model.predict_learn_many(X, y) - y).mean())


@pytest.mark.parametrize("seed", [15, 16])
def test_the_default_is_within_five_percent_of_the_better_leaf_model_on_steps(seed: int) -> None:
    """Fails with the previous default (adaptive leaves): 1.8 to 2.4 times the constant leaves' MAE."""
    X, y = _steps(5000, seed)
    constant = _mae(SGTRegressor(leaf_model="constant"), X, y)
    linear = _mae(SGTRegressor(leaf_model="linear"), X, y)
    assert constant < linear  # (a step target: the constant leaves are the better ones)
    assert _mae(SGTRegressor(), X, y) <= 1.05 * constant


def test_the_default_keeps_the_linear_leaves_gain_on_a_linear_target() -> None:
    rng = np.random.default_rng(3)
    X = rng.uniform(-1.0, 1.0, (6000, 3))
    y = 3.0 * X[:, 0] - 2.0 * X[:, 1] + rng.normal(0.0, 0.1, 6000)
    linear = _mae(SGTRegressor(leaf_model="linear"), X, y)
    assert _mae(SGTRegressor(), X, y) <= 1.05 * linear < _mae(SGTRegressor(leaf_model="constant"), X, y)


def test_auto_is_the_regressors_default_and_only_the_single_regressors() -> None:
    model = SGTRegressor()
    assert model.leaf_model == "auto" and model.n_trees == len(AUTO_LEAVES) == 4
    assert [tree.params.leaf_model for tree in model._trees] == list(AUTO_LEAVES)
    assert [tree.params.grace_start for tree in model._trees] == [10, 10, 10, 50]
    # a model whose own grace_start is later than the late tree's keeps it for every tree
    assert [tree.params.grace_start for tree in SGTRegressor(grace_start=80)._trees] == [80] * 4
    for other in (BoostedRegressor, AdaptiveSGTRegressor):
        with pytest.raises(
            ValueError, match="leaf_model must be one of 'constant', 'linear', 'adaptive', got"
        ):
            other(leaf_model="auto")


def test_each_tree_learns_from_its_own_predictions_and_the_best_serves() -> None:
    """The trees are those each leaf model grows alone, and the prediction is the serving tree's."""
    X, y = _steps(3000, seed=15)
    model = SGTRegressor()
    model.learn_many(X, y)
    for tree, leaf_model, late in zip(model._trees, AUTO_LEAVES, AUTO_LATE_STARTS, strict=True):
        alone = SGTRegressor(leaf_model=leaf_model, grace_start=late or 10)
        alone.learn_many(X, y)
        assert tree.n_splits == alone.n_splits and np.array_equal(
            tree.value[: tree.n_nodes], alone._trees[0].value[: tree.n_nodes]
        )
    serving = model._serving()
    assert AUTO_LEAVES[serving] == "constant" and AUTO_LATE_STARTS[serving] is None
    alone = SGTRegressor(leaf_model="constant")
    alone.learn_many(X, y)
    np.testing.assert_array_equal(model.predict_many(X[:50]), alone.predict_many(X[:50]))
    assert model.explain_one(dict(zip([f"x{j}" for j in range(5)], X[0].tolist(), strict=True))) is not None


@pytest.mark.parametrize("seed", [42, 7])
def test_the_late_tree_serves_where_the_first_records_split_the_root_on_the_wrong_feature(seed: int) -> None:
    """River's Planes2D: a selector feature picks which of two linear planes the target follows. The
    trees that split their root on 10 records split it on a feature of one plane, which no later split
    undoes; the late tree splits on the selector. Fails with the three trees of before: 1.346 and
    1.255 against River's HoeffdingTreeRegressor's 0.920 and 0.928 (+46%, +35%); now 0.952 and 0.943."""
    from river.datasets import synth
    from river.tree import HoeffdingTreeRegressor

    data = list(synth.Planes2D(seed=seed).take(5000))
    X = np.array([list(x.values()) for x, _ in data])
    y = np.array([target for _, target in data])
    peer, peer_error = HoeffdingTreeRegressor(), 0.0
    for x, target in data:
        peer_error += abs(peer.predict_one(x) - target)
        peer.learn_one(x, target)
    model = SGTRegressor()
    errors = np.concatenate(
        [
            np.abs(model.predict_learn_many(X[lo : lo + 1000], y[lo : lo + 1000]) - y[lo : lo + 1000])
            for lo in range(0, 5000, 1000)
        ]
    )
    assert errors.mean() <= 1.05 * peer_error / len(data)
    assert AUTO_LATE_STARTS[model._serving()] is not None


_X, _Y = mixed_regression_stream(N, seed=5)


@PROPERTY
@given(
    cuts=st.lists(st.integers(1, N - 1), max_size=12, unique=True).map(sorted),
    methods=st.lists(st.sampled_from(["learn_many", "predict_learn_many", "loop", "restore"]), min_size=13),
    compiled=st.booleans(),
)
def test_an_auto_regressor_gives_the_same_bytes_and_predictions_however_batched_and_restored(
    cuts: list[int], methods: list[str], compiled: bool
) -> None:
    enabled = kernels.ENABLED
    reference = SGTRegressor(grace_period=40, interval_coverages=(0.9,))
    expected = predicted_then_learned(reference, _X, _Y)
    try:
        kernels.ENABLED = compiled and enabled
        fresh = SGTRegressor(grace_period=40, interval_coverages=(0.9,))
        model, got = learned_in_pieces(fresh, _X, _Y, cuts, methods)
    finally:
        kernels.ENABLED = enabled
    assert model.n_splits >= 3 and model.to_bytes() == reference.to_bytes()
    assert [g for g in got if g is not None] == [
        e for g, e in zip(got, expected, strict=True) if g is not None
    ]


def test_the_serving_tree_changes_along_the_stream_and_every_path_agrees() -> None:
    """On the mixed stream more than one tree serves in turn; a loop of learn_one (no predictions)
    ends with the errors and bytes of the batch."""
    model = SGTRegressor(grace_period=40)
    served = []
    for lo in range(0, N, 100):
        model.learn_many(_X[lo : lo + 100], _Y[lo : lo + 100])
        served.append(model._serving())
    assert len(set(served)) >= 2
    loop = SGTRegressor(grace_period=40)
    for x, target in zip(_X, _Y, strict=True):
        loop.learn_one(x, target)
    assert loop._auto_errors == model._auto_errors and loop.to_bytes() == model.to_bytes()


def test_a_model_saved_before_auto_restores_as_it_was() -> None:
    """A model saved with leaf_model="adaptive" (the default before) stays one adaptive tree, and one
    saved without a leaf model (release 0.1.0) restores with adaptive leaves, as it did before."""
    model = SGTRegressor(leaf_model="adaptive")
    model.learn_many(_X[:800], _Y[:800])
    restored = SGTRegressor.from_bytes(model.to_bytes())
    assert restored.leaf_model == "adaptive" and restored.n_trees == 1
    assert restored.to_bytes() == model.to_bytes()
    saved = decode(model.to_bytes())
    header = dict(saved.header)
    header["params"] = {k: v for k, v in header["params"].items() if k != "leaf_model"}
    old = SGTRegressor.from_bytes(encode(header, list(saved.arrays.items())))
    assert old.leaf_model == "adaptive" and old.n_trees == 1
    np.testing.assert_array_equal(old.predict_many(_X[800:]), model.predict_many(_X[800:]))


class _ThreeTrees(SGTRegressor):
    """leaf_model="auto" as it was before the late tree: three trees."""

    _auto_leaves = AUTO_LEAVES[:3]


def _saved_as(model: SGTRegressor, name: str) -> bytes:
    """`model`'s bytes with the class name `name` in the header (a blob as that class saves it)."""
    saved = decode(model.to_bytes())
    return encode({**saved.header, "model": name}, list(saved.arrays.items()))


def test_a_model_saved_with_three_trees_before_the_late_one_learns_on_with_three() -> None:
    three = _ThreeTrees(grace_period=40)
    three.learn_many(_X[:600], _Y[:600])
    old = SGTRegressor.from_bytes(_saved_as(three, "SGTRegressor"))
    assert type(old) is SGTRegressor and old.n_trees == 3 and len(old._auto_errors or []) == 3
    assert old.to_bytes() == _saved_as(three, "SGTRegressor")
    np.testing.assert_array_equal(
        old.predict_learn_many(_X[600:], _Y[600:]), three.predict_learn_many(_X[600:], _Y[600:])
    )
    assert old.to_bytes() == _saved_as(three, "SGTRegressor")
    assert SGTRegressor.from_bytes(old.to_bytes()).n_trees == 3


def test_a_blob_with_more_trees_than_auto_grows_is_refused() -> None:
    model = SGTRegressor()
    model.learn_many(_X[:300], _Y[:300])
    with pytest.raises(SerializationError, match="has 1 to 3 trees, not 4"):
        _ThreeTrees.from_bytes(_saved_as(model, "_ThreeTrees"))


def test_a_blob_without_the_trees_errors_is_refused() -> None:
    model = SGTRegressor()
    model.learn_many(_X[:300], _Y[:300])
    saved = decode(model.to_bytes())
    arrays = [(name, a) for name, a in saved.arrays.items() if name != "extra.errors"]
    with pytest.raises(SerializationError, match="needs its trees' errors"):
        SGTRegressor.from_bytes(encode(dict(saved.header), arrays))


def test_a_tree_whose_predictions_overflow_stops_serving_and_the_errors_stay_finite() -> None:
    model = SGTRegressor()
    model._record_errors([np.inf, 1.0, np.nan, 1.0], 1.0)
    assert model._auto_errors == [1e300, 0.0, 1e300, 0.0] and model._serving() == 1
    for _ in range(5):
        model._record_errors([1e308, 1.0, 1.0, 1.0], -1e308)
    assert all(np.isfinite(model._auto_errors))


def test_rows_without_a_target_are_predicted_and_leave_the_errors_as_they_are() -> None:
    """predict_learn_many with targets None on some rows: each row predicted as predict_one would, and
    the errors (and bytes) of a loop that learns only the others."""
    y = [None if i % 7 == 3 else float(t) for i, t in enumerate(_Y[:900])]
    batched = SGTRegressor(grace_period=40)
    got = batched.predict_learn_many(_X[:900], y)
    loop = SGTRegressor(grace_period=40)
    expected = []
    for x, target in zip(_X[:900], y, strict=True):
        expected.append(loop.predict_one(x))
        if target is not None:
            loop.learn_one(x, target)
    assert got.tolist() == expected
    assert batched._auto_errors == loop._auto_errors and batched.to_bytes() == loop.to_bytes()


@pytest.mark.parametrize("compiled", [False, True])
def test_an_auto_regressor_with_a_poisson_loss_gives_the_loops_predictions_and_bytes(compiled: bool) -> None:
    """The trees' predictions pass through the loss's link (exp) before their errors are taken."""
    rng = np.random.default_rng(9)
    X = rng.uniform(-1.0, 1.0, (1500, 3))
    y = rng.poisson(np.exp(1.0 + (X[:, 0] > 0) + 0.5 * X[:, 1])).astype(float)
    enabled = kernels.ENABLED
    try:
        kernels.ENABLED = compiled and enabled
        batched = SGTRegressor(loss=Poisson(), grace_period=40)
        got = np.concatenate(
            [batched.predict_learn_many(X[lo : lo + 250], y[lo : lo + 250]) for lo in range(0, 1500, 250)]
        )
        loop = SGTRegressor(loss=Poisson(), grace_period=40)
        expected = predicted_then_learned(loop, X, y)
    finally:
        kernels.ENABLED = enabled
    assert got.tolist() == expected and batched.to_bytes() == loop.to_bytes()
    assert len(set(batched._auto_errors)) == 4 and batched.n_splits >= 3
