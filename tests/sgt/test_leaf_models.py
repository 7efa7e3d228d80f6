"""Linear leaves (`leaf_model="linear"`): a linear term per leaf in the numeric features' bin centres.

- It pays where the target is linear within a leaf (far lower error than constant leaves, fewer leaves).
- It is exact like everything else: batch equals loop, any batching, save/restore at any point, byte
  for byte, for regression and for the classifier's committee, with nominal and missing values and
  grids that grow.
- A new leaf starts from its parent's model; constant leaves are unchanged (no weights stored).
"""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sgt import SGTClassifier, SGTRegressor
from tests.sgt.sgt_testkit import learned_in_pieces, mixed_records, predicted_then_learned

PROPERTY = settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
N = 1500


def _linear_stream(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1.0, 1.0, (n, 3)) * np.array([1.0, 10.0, 100.0])
    y = 3.0 * X[:, 0] - 0.2 * X[:, 1] + 2.0 * (X[:, 2] > 0) + rng.normal(0.0, 0.1, n)
    X[rng.uniform(size=X.shape) < 0.03] = np.nan
    return X, y


_X, _Y = _linear_stream(N, seed=50)
_RECORDS, _LABELS = mixed_records(N, seed=51)


def test_linear_leaves_fit_a_linear_target_far_better_than_constant_ones() -> None:
    rng = np.random.default_rng(52)
    X = rng.uniform(-1.0, 1.0, (20_000, 3)) * np.array([1.0, 10.0, 100.0])
    y = 3.0 * X[:, 0] - 0.2 * X[:, 1] + rng.normal(0.0, 0.1, 20_000)
    errors, leaves = {}, {}
    for leaf_model in ("constant", "linear"):
        model = SGTRegressor(leaf_model=leaf_model)
        prediction = model.predict_learn_many(X, y)
        errors[leaf_model] = float(np.abs(prediction - y)[5000:].mean())
        leaves[leaf_model] = model.n_leaves
    assert errors["linear"] < 0.6 * errors["constant"]  # measured 0.112 against 0.212
    assert leaves["linear"] < leaves["constant"]


def test_linear_leaves_help_a_classifier_on_a_linear_boundary() -> None:
    rng = np.random.default_rng(53)
    X = rng.uniform(-1.0, 1.0, (20_000, 4))
    y = (X @ np.array([1.0, -1.0, 0.5, 0.25]) > 0).astype(int)
    hits = {}
    for leaf_model in ("constant", "linear"):
        model = SGTClassifier(leaf_model=leaf_model)
        proba = model.predict_learn_many(X, y)
        hits[leaf_model] = float((proba.argmax(axis=1) == y)[5000:].mean())
    assert hits["linear"] > hits["constant"] + 0.01  # measured 92.5% against 91.2%


@PROPERTY
@given(
    cuts=st.lists(st.integers(1, N - 1), max_size=12, unique=True).map(sorted),
    methods=st.lists(st.sampled_from(["learn_many", "predict_learn_many", "loop", "restore"]), min_size=13),
)
def test_a_linear_regressor_gives_the_same_bytes_however_batched_and_restored(
    cuts: list[int], methods: list[str]
) -> None:
    reference = SGTRegressor(leaf_model="linear", grace_period=40)
    expected = predicted_then_learned(reference, _X, _Y)
    model, got = learned_in_pieces(SGTRegressor(leaf_model="linear", grace_period=40), _X, _Y, cuts, methods)
    assert model.n_splits >= 2
    assert model.to_bytes() == reference.to_bytes()
    assert [g for g in got if g is not None] == [
        e for g, e in zip(got, expected, strict=True) if g is not None
    ]


@PROPERTY
@given(
    cuts=st.lists(st.integers(1, N - 1), max_size=12, unique=True).map(sorted),
    methods=st.lists(st.sampled_from(["learn_many", "loop", "restore"]), min_size=13),
)
def test_a_linear_classifier_with_nominal_and_missing_values_gives_the_same_bytes(
    cuts: list[int], methods: list[str]
) -> None:
    reference = SGTClassifier(leaf_model="linear", grace_period=40)
    for x, y in zip(_RECORDS, _LABELS, strict=True):
        reference.learn_one(x, y)
    model = SGTClassifier(leaf_model="linear", grace_period=40)
    for (a, b), method in zip(itertools.pairwise([0, *cuts, N]), methods, strict=False):
        if method == "restore":
            model = SGTClassifier.from_bytes(model.to_bytes())
            method = "learn_many"
        if method == "loop":
            for x, y in zip(_RECORDS[a:b], _LABELS[a:b], strict=True):
                model.learn_one(x, y)
        else:
            model.learn_many(_RECORDS[a:b], _LABELS[a:b])
    assert model.n_splits >= 1
    assert model.to_bytes() == reference.to_bytes()


def test_predict_learn_many_of_a_linear_classifier_is_the_prequentialpredicted_then_learned() -> None:
    loop, batch = SGTClassifier(leaf_model="linear"), SGTClassifier(leaf_model="linear")
    expected = predicted_then_learned(loop, _RECORDS, _LABELS)
    proba = batch.predict_learn_many(_RECORDS, _LABELS)
    classes = batch.classes_
    assert [
        dict(zip(classes[: len(p)], row[: len(p)], strict=True)) for p, row in zip(expected, proba)
    ] == expected
    assert batch.to_bytes() == loop.to_bytes()


def test_a_new_leaf_starts_from_its_parents_linear_model() -> None:
    model = SGTRegressor(leaf_model="linear", grace_period=40)
    for x, y in zip(_X, _Y, strict=True):
        tree = model._trees[0]
        before = (tree.n_splits, tree.weights[: tree.n_nodes].copy())
        model.learn_one(x, y)
        if tree.n_splits > before[0]:
            break
    (parent,) = np.flatnonzero(tree.feature[: tree.n_nodes] >= 0)
    children = [int(tree.left[parent]), int(tree.right[parent])]
    assert np.any(tree.weights[parent] != 0.0)
    for child in children:
        assert tree.weights[child].tolist() == tree.weights[parent].tolist()


def test_constant_leaves_store_no_weights_and_a_bad_leaf_model_is_named() -> None:
    model = SGTRegressor(leaf_model="constant")
    model.learn_many(_X[:300], _Y[:300])
    linear = SGTRegressor(leaf_model="linear")
    linear.learn_many(_X[:300], _Y[:300])
    assert b"t0.weights" not in model.to_bytes() and b"t0.weights" in linear.to_bytes()
    assert SGTRegressor.from_bytes(linear.to_bytes()).to_bytes() == linear.to_bytes()
    bad = "leaf_model must be one of 'constant', 'linear', 'adaptive', 'auto', got 'tree'"
    with pytest.raises(ValueError, match=bad):
        SGTRegressor(leaf_model="tree")
    with pytest.raises(ValueError, match="linear_lambda must be > 0, got 0"):
        SGTClassifier(linear_lambda=0)


@pytest.mark.parametrize("reverse", [False, True])
def test_grids_growing_at_one_record_give_the_loops_bytes_whatever_the_key_order(reverse: bool) -> None:
    """Regression: the batch coder meets a record's features in set order, the loop in the record's
    order; two grids growing at one record must be applied in one order (feature order), as the
    linear leaves add both offsets to the values. A worker proof caught it across processes."""
    rng = np.random.default_rng(54)
    records = []
    for i in range(600):
        scale = 1.0 if i < 300 else 50.0  # at record 300 both grids grow
        a, b = rng.uniform(-1.0, 1.0, 2) * scale
        records.append({"b": float(b), "a": float(a)} if reverse and i else {"a": float(a), "b": float(b)})
    y = [float(3.0 * x["a"] - x["b"] + rng.normal(0.0, 0.1)) for x in records]
    loop, batch = SGTRegressor(grace_period=20), SGTRegressor(grace_period=20)
    for x, target in zip(records, y, strict=True):
        loop.learn_one(x, target)
    batch.learn_many(records, y)
    assert batch.to_bytes() == loop.to_bytes()


def _gated() -> SGTClassifier:
    return SGTClassifier(leaf_model="linear", grace_period=40, linear_gate=1.0)


def test_the_linear_gate_drops_terms_on_the_mixed_stream() -> None:
    """Without a drop the exactness test below would not exercise the gate."""
    gated, plain = _gated(), SGTClassifier(leaf_model="linear", grace_period=40, linear_gate=None)
    gated.learn_many(_RECORDS, _LABELS)
    plain.learn_many(_RECORDS, _LABELS)
    assert gated._trees[0].weights.tolist() != plain._trees[0].weights.tolist()


@PROPERTY
@given(
    cuts=st.lists(st.integers(1, N - 1), max_size=12, unique=True).map(sorted),
    methods=st.lists(st.sampled_from(["predict_learn_many", "loop", "restore"]), min_size=13),
)
def test_a_gated_linear_classifier_gives_the_loops_predictions_and_bytes_however_batched_and_restored(
    cuts: list[int], methods: list[str]
) -> None:
    reference = _gated()
    expected = predicted_then_learned(reference, _RECORDS, _LABELS)
    model = _gated()
    got: list[Any] = []
    for (a, b), method in zip(itertools.pairwise([0, *cuts, N]), methods, strict=False):
        if method == "restore":
            model = SGTClassifier.from_bytes(model.to_bytes())
            method = "predict_learn_many"
        if method == "loop":
            got += predicted_then_learned(model, _RECORDS[a:b], _LABELS[a:b])
        else:
            proba = model.predict_learn_many(_RECORDS[a:b], _LABELS[a:b])
            got += [
                dict(zip(model.classes_[: len(e)], row[: len(e)])) for row, e in zip(proba, expected[a:b])
            ]
    assert model.get_params()["linear_gate"] == 1.0
    assert model.to_bytes() == reference.to_bytes()
    assert got == expected


@pytest.mark.parametrize("value", [0, -1.0, float("nan"), float("inf"), "2", True])
def test_a_bad_linear_gate_is_named_with_the_allowed_values(value: object) -> None:
    with pytest.raises(ValueError, match=r"linear_gate must be None or a number > 0"):
        SGTClassifier(linear_gate=value)  # type: ignore[arg-type]


def test_a_model_saved_without_a_linear_gate_restores_without_one_and_saves_back_the_same_bytes() -> None:
    """A model saved before `linear_gate` existed has no such parameter: it keeps every linear term,
    as it did then (catches a restore that takes today's default)."""
    model = SGTClassifier(linear_gate=None, grace_period=40)
    model.learn_many(_RECORDS[:600], _LABELS[:600])
    blob = model.to_bytes()
    assert b"linear_gate" not in blob
    restored = SGTClassifier.from_bytes(blob)
    assert restored.linear_gate is None and restored.to_bytes() == blob
    restored.learn_many(_RECORDS[600:], _LABELS[600:])
    model.learn_many(_RECORDS[600:], _LABELS[600:])
    assert restored.to_bytes() == model.to_bytes()
    gated = SGTClassifier(grace_period=40)
    gated.learn_many(_RECORDS, _LABELS)
    assert gated.get_params()["linear_gate"] == 1.5 and gated.to_bytes() != model.to_bytes()
