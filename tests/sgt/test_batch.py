"""The batch path: predictions on a batch's precomputed leaf inputs, from any row on, are the one-record
path's bits, and a committee whose leaf-filling records are learned at the end of the plain rows (a classifier
with proba="tree", a regressor) still gives the one-record loop's bytes and predictions."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from sgt import SGTClassifier, SGTRegressor
from sgt.features import FeatureSpace
from sgt.tree import Layout, Params, Tree, leaf_inputs_of

PROPERTY = settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@PROPERTY
@given(
    seed=st.integers(0, 2**32 - 1),
    nominal=st.lists(st.booleans(), min_size=1, max_size=6),
    rows=st.integers(0, 40),
    narrower=st.integers(0, 2),
)
def test_predictions_on_leaf_inputs_are_the_trees_bits(
    seed: int, nominal: list[bool], rows: int, narrower: int
) -> None:
    """Any weights, any codes (0: missing), nominal features between numeric ones, codes narrower than
    the layout (features learned after the batch was coded)."""
    rng = np.random.default_rng(seed)
    names = [f"f{j}" for j in range(len(nominal))]
    space = FeatureSpace(8, 10, [n for n, nom in zip(names, nominal, strict=True) if nom], names, None)
    space.encode_one({n: "a" if nom else 0.5 for n, nom in zip(names, nominal, strict=True)}, learn=True)
    layout = Layout(space)
    tree = Tree(Params(0.1, 10, 0.1, 0.1, None, 10, "linear", 0.01), layout)
    size = tree.value.size  # nodes the tree has room for: give each a value and weights
    tree.value[:] = rng.normal(size=size) * 10.0 ** rng.integers(-3, 4, size=size)
    tree.weights[:] = rng.normal(size=(size, layout.n_features)) * 10.0 ** rng.integers(-3, 4, size=(size, 1))
    width = max(0, layout.n_features - narrower)
    codes = rng.integers(0, 9, size=(rows + 3, width))  # bins + 1 codes.astype(np.uint16)
    nodes = rng.integers(0, size, size=rows).astype(np.int32)
    inputs = leaf_inputs_of(layout, codes)
    got = tree.predict_rows(nodes, inputs, 3)
    one_by_one = [tree.predict_one(int(node), row) for node, row in zip(nodes, codes[3:], strict=True)]
    assert got.tobytes() == np.array(one_by_one, dtype=np.float64).tobytes()
    tree.linear = False
    assert tree.predict_rows(nodes, inputs, 3).tobytes() == tree.value[nodes].tobytes()


def batches(n: int, cuts: list[int]) -> list[slice]:
    return [slice(a, b) for a, b in itertools.pairwise([0, *[c for c in cuts if c < n], n])]


def _records(n: int, seed: int) -> tuple[list[dict], list]:
    """Up to five classes first seen anywhere, categories, missing values, unlabelled rows."""
    rng = np.random.default_rng(seed)
    numbers = rng.normal(size=n) * 100.0
    numbers[rng.uniform(size=n) < 0.1] = math.nan
    records = [
        {"num": float(v), "cat": str(rng.choice(list("pqrs")))} if i % 4 else {"num": float(v)}
        for i, v in enumerate(numbers)
    ]
    labels = [None if v == 5 else int(v) for v in rng.integers(0, 6, size=n)]
    return records, labels


SIZE = st.integers(17, 300)  # a batch of more than 16 rows takes the chunked path
CUTS = st.lists(st.integers(1, 299), max_size=6, unique=True).map(sorted)


@pytest.mark.parametrize("leaf_bayes", [False, True])
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(n=SIZE, seed=st.integers(0, 2**32 - 1), cuts=CUTS)
# a record whose category the root's branch had not seen stopped there, and a batch served it the cell
# of the root before its split, which the loop had forgotten
@example(n=25, seed=129108399, cuts=[])
# so too a row of a block (the chunked path's rows at fixed leaves) whose route stopped at a branch
@example(n=129, seed=4294967294, cuts=[])
def test_a_tree_proba_classifier_batches_as_the_loop(
    leaf_bayes: bool, n: int, seed: int, cuts: list[int]
) -> None:
    """Up to five classes (four trees, any of which cuts a run), categories first learned at branches,
    missing values, unlabelled rows; blocks of 2 to 6 records; with and without the leaves' naive Bayes."""
    params = {
        "grace_start": 2,
        "grace_period": 6,
        "warm_up": 5,
        "delta": 0.2,
        "proba": "tree",
        "leaf_bayes": leaf_bayes,
    }
    records, labels = _records(n, seed)
    loop, expected = SGTClassifier(**params), []
    for x, label in zip(records, labels, strict=True):
        expected.append(loop.predict_proba_one(x))
        if label is not None:
            loop.learn_one(x, label)
    batch, rows = SGTClassifier(**params), []
    for part in batches(n, cuts):
        P = batch.predict_learn_many(records[part], labels[part])
        rows.extend({c: P[i, j] for j, c in enumerate(batch.classes_)} for i in range(P.shape[0]))
    assert batch.to_bytes() == loop.to_bytes()
    for got, want in zip(rows, expected, strict=True):
        assert {c: p for c, p in got.items() if c in want} == want


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(n=SIZE, seed=st.integers(0, 2**32 - 1), cuts=CUTS)
def test_a_regressor_batches_as_the_loop(n: int, seed: int, cuts: list[int]) -> None:
    params = {"grace_start": 2, "grace_period": 6, "warm_up": 5, "delta": 0.2}
    rng = np.random.default_rng(seed)
    X = rng.uniform(-10.0, 10.0, size=(n, 2))
    y = np.where(X[:, 0] > 0, 50.0, -20.0) + X[:, 1] * rng.uniform(-5.0, 5.0, size=n)
    loop, expected = SGTRegressor(**params), []
    for row, target in zip(X, y, strict=True):
        expected.append(loop.predict_one(row))
        loop.learn_one(row, target)
    batch = SGTRegressor(**params)
    got = np.concatenate([batch.predict_learn_many(X[part], y[part]) for part in batches(n, cuts)])
    assert batch.to_bytes() == loop.to_bytes()
    assert got.tolist() == expected


def test_a_batch_of_one_record_learns_the_one_record_loops_bits() -> None:
    # a batch of one dict record takes FeatureSpace.encode_one (without the batch encoder's passes per
    # column): the same codes and grids, so the same model, learned or only predicted
    rng = np.random.default_rng(7)
    records = [{"a": float(v), "b": float(w), "c": str(int(w * 3))} for v, w in rng.normal(size=(400, 2))]
    targets = [r["a"] * 2.0 + (r["c"] == "1") for r in records]
    alone, batched = (SGTRegressor(grace_period=50, nominal=["c"]) for _ in range(2))
    for i, (x, y) in enumerate(zip(records, targets, strict=True)):
        learned = y if i % 7 else None
        assert batched.predict_learn_many([x], [learned])[0] == alone.predict_one(x)
        if learned is not None:
            alone.learn_one(x, y)
    assert batched.to_bytes() == alone.to_bytes()
