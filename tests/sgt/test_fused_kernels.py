"""The hot path's fused kernels give the bits of the step-by-step code they replace.

Two steps of a one-output tree run as one compiled call each where the tree allows it:

- a leaf's evaluation (the first half of a split attempt: Newton step of the linear term, merge of
  the block, null candidate and best numeric split) by sgt.kernels' `evaluate_leaf`
  (`LeafLearner._evaluate_compiled`), instead of four kernels and their Python around them;
- a leafwise pass's planning and prediction by `take_pass` (sgt.leafwise's `_take_compiled`),
  instead of `plan_pass`, `Tree.predict_rows` and the numpy steps between them.

Each is compared bit for bit with the kernels' step-by-step path (the fused step switched off) and
with the numpy code (the kernels switched off): on random leaves whose statistics, blocks and terms
reach the edges (zeros of either sign, huge and tiny gradients, overflowing steps, leaves at the
depth limit), and on whole models, the boosted classifier the worker runs among them.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import sgt
import sgt.leafwise
from sgt import kernels
from sgt.boosted.bagging import Bagging
from sgt.boosted.member import OFFSETS, TARGET, WEIGHT, Outputs
from sgt.features import FeatureSpace
from sgt.leaf import LeafLearner
from sgt.tree import Layout, Params, Tree
from tests.sgt.sgt_testkit import NO_SIDE_MODELS, bits, same_candidates

pytestmark = pytest.mark.skipif(not kernels.ENABLED, reason="the fused kernels run only with numba")

ARRAYS = ("value", "weights", "stats", "total", "pending_n", "pending_g", "pending_h", "pending_codes")


def numeric_tree(seed: int, n_numeric: int, linear: bool, max_depth: int | None) -> tuple[Tree, list[int]]:
    """A tree over numeric features only, with leaves at depths 1 to 3 under a branch root, each leaf's
    block full of random instances, some on top of statistics merged from an earlier block."""
    rng = np.random.default_rng(seed)
    space = FeatureSpace(bins=16, warm_up=50)
    record = {f"x{j}": float(j) for j in range(n_numeric)}
    space.encode_rows([record, {k: v * 3.0 + 1.0 for k, v in record.items()}], None)
    params = Params(
        1e-3, 40, 0.1, 0.1, max_depth, grace_start=3, leaf_model="linear" if linear else "constant"
    )
    tree = Tree(params, Layout(space))
    layout = tree.layout
    for depth in (1, 1, 2, 3):
        tree._new_leaf(parent=0, value=float(rng.normal()), depth=depth)
    leaves = list(range(1, tree.n_nodes))
    tree.feature[0] = 0  # the root is a branch (the leaves' parent), not a leaf
    if linear:
        tree.weights[: tree.n_nodes] = rng.normal(size=(tree.n_nodes, layout.n_features))
    scale = float(rng.choice([1.0, 1e-9, 1e9, 1e200]))  # 1e200: Newton steps that overflow
    for leaf in leaves:
        slot = int(tree.slot[leaf])
        size = int(tree.block[slot])
        tree.reserve_pending(size)
        codes = np.stack([rng.integers(0, width, size=size) for width in layout.widths], axis=1)
        g, h = rng.normal(size=size) * scale, rng.uniform(0.0, 0.3, size=size)
        if rng.random() < 0.2:
            g[rng.random(size) < 0.5] = -0.0  # zeros of either sign reach the statistics
        if rng.random() < 0.1:
            h[:] = 0.0  # no positive sum of h: no Newton step
        tree.append(np.full(size, leaf), codes, g, h)
        if rng.random() < 0.5:  # statistics merged from earlier blocks
            tree.learner._merge_pending(slot)
            tree.append(np.full(size, leaf), codes[::-1].copy(), rng.normal(size=size), h[::-1].copy())
    return tree, leaves


def same_trees(a: Tree, b: Tree) -> bool:
    """The trees' values, terms, totals and pending counts, then each slot's statistics (an inactive
    slot's are empty: not stacked with the others'), the same bits."""
    arrays = [name for name in ARRAYS[:5] if name != "stats"]
    return all(np.array_equal(bits(getattr(a, name)), bits(getattr(b, name))) for name in arrays) and all(
        np.array_equal(x.view(np.uint8), y.view(np.uint8)) for x, y in zip(a.stats, b.stats, strict=True)
    )


@settings(max_examples=80, deadline=None)
@given(
    n_numeric=st.integers(1, 7),
    linear=st.booleans(),
    linear_steps=st.booleans(),
    max_depth=st.sampled_from([None, 1, 2]),
    pick=st.lists(st.integers(0, 3), min_size=1, max_size=4, unique=True),
    seed=st.integers(0, 2**32 - 1),
)
def test_a_fused_evaluation_equals_the_step_by_step_kernels_and_numpy(
    n_numeric, linear, linear_steps, max_depth, pick, seed
) -> None:
    """Catches `evaluate_leaf` giving a leaf other bits than its evaluation step by step (with the
    kernels, and with numpy): its value, linear term, statistics and the candidate it returns."""
    tree, leaves = numeric_tree(seed, n_numeric, linear, max_depth)
    tree.params = dataclasses.replace(tree.params, linear_steps=linear_steps)
    nodes = [leaves[k] for k in pick]
    assert all(tree.learner._evaluates_compiled(int(tree.slot[node])) for node in nodes)
    by_kernel, by_numpy = copy.deepcopy(tree), copy.deepcopy(tree)
    fused = tree.evaluate_leaves(nodes)
    with pytest.MonkeyPatch.context() as patch, np.errstate(all="ignore"):  # (1e200: overflows, as meant)
        patch.setattr(LeafLearner, "_fuses", lambda self: False)  # (`_evaluates_compiled` reads it)
        stepwise = by_kernel.evaluate_leaves(nodes)
        patch.setattr(kernels, "ENABLED", False)
        reference = by_numpy.evaluate_leaves(nodes)
    assert all(same_candidates(a, b) for a, b in zip(fused, stepwise, strict=True))
    assert all(same_candidates(a, b) for a, b in zip(fused, reference, strict=True))
    assert same_trees(tree, by_kernel)
    assert same_trees(tree, by_numpy)


@settings(max_examples=60, deadline=None)
@given(
    n_numeric=st.integers(1, 7),
    linear=st.booleans(),
    max_depth=st.sampled_from([None, 1, 2]),
    inactive=st.lists(st.integers(0, 3), min_size=1, max_size=4, unique=True),
    seed=st.integers(0, 2**32 - 1),
)
def test_a_fused_evaluation_of_inactive_leaves_equals_the_step_by_step_kernels_and_numpy(
    n_numeric, linear, max_depth, inactive, seed
) -> None:
    """Catches an inactive leaf (one a memory budget stopped gathering split statistics) evaluated with
    other bits when its tree's leaves take the fused evaluation: a constant one by evaluate_bound (its
    total merged alone, its null candidate), a linear one as `evaluate` does it, beside active leaves."""
    tree, leaves = numeric_tree(seed, n_numeric, linear, max_depth)
    for k in inactive:
        tree.deactivate(int(tree.slot[leaves[k]]))
    assert tree.learner._fuses()
    by_kernel, by_numpy = copy.deepcopy(tree), copy.deepcopy(tree)
    fused = tree.evaluate_leaves(leaves)
    with pytest.MonkeyPatch.context() as patch, np.errstate(all="ignore"):  # (1e200: overflows, as meant)
        patch.setattr(LeafLearner, "_fuses", lambda self: False)
        stepwise = by_kernel.evaluate_leaves(leaves)
        patch.setattr(kernels, "ENABLED", False)
        reference = by_numpy.evaluate_leaves(leaves)
    assert all(same_candidates(a, b) for a, b in zip(fused, stepwise, strict=True))
    assert all(same_candidates(a, b) for a, b in zip(fused, reference, strict=True))
    assert same_trees(tree, by_kernel)
    assert same_trees(tree, by_numpy)


def test_the_fused_evaluation_is_taken_only_where_it_applies() -> None:
    """Catches the fused evaluation taking a leaf it does not compute: an adaptive leaf, a tree with
    a nominal feature, a linear gate, feature subspaces or an inactive slot."""
    tree, leaves = numeric_tree(3, 3, True, None)
    slot = int(tree.slot[leaves[0]])
    assert tree.learner._evaluates_compiled(slot)
    for params in (
        dataclasses.replace(tree.params, linear_gate=0.5),
        dataclasses.replace(tree.params, feature_share=0.5),
    ):
        other = copy.deepcopy(tree)
        other.params = params
        assert not other.learner._evaluates_compiled(slot), params
    adaptive = copy.deepcopy(tree)
    adaptive.adaptive = True
    assert not adaptive.learner._evaluates_compiled(slot)
    inactive = copy.deepcopy(tree)
    inactive.deactivate(slot)
    assert not inactive.learner._evaluates_compiled(slot)


def threshold_stream(n: int, seed: int = 0) -> tuple[list[dict[str, float]], list[int]]:
    """Ten numeric features, a rotating hyperplane's labels with 5% noise, a few missing values."""
    rng = np.random.default_rng(seed)
    X = rng.uniform(size=(n, 10))
    angle = np.linspace(0.0, 1.5, n)
    score = X[:, 0] * np.cos(angle) + X[:, 1] * np.sin(angle) + 0.3 * X[:, 2] * X[:, 3]
    y = ((score > np.median(score)) ^ (rng.random(n) < 0.05)).astype(int).tolist()
    records = [{f"x{j}": float(v) for j, v in enumerate(row) if not (j == 4 and v < 0.05)} for row in X]
    return records, y


def regression_stream(n: int, seed: int = 0) -> tuple[list[dict[str, float]], list[float]]:
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1.0, 1.0, size=(n, 4))
    y = 2.0 * (X[:, 0] > 0.2) + X[:, 1] + rng.normal(0.0, 0.1, size=n)
    return [{f"x{j}": float(v) for j, v in enumerate(row)} for row in X], y.tolist()


MODELS: dict[str, Any] = {
    # the default but for the Mondrian forest, which has no fused steps (its walk is one kernel, its
    # Python twin run with the kernels off: test_boosted_mondrian.py proves them equal)
    "boosted classifier": (
        lambda: sgt.BoostedClassifier(warm_up=100, seed=1, mondrian=False),
        threshold_stream,
    ),
    # (the members alone: the default model's side models run in the case above)
    "boosted classifier, constant members": (
        lambda: sgt.BoostedClassifier(
            warm_up=100, seed=2, leaf_model="constant", max_depth=3, **NO_SIDE_MODELS
        ),
        threshold_stream,
    ),
    "boosted regressor": (lambda: sgt.BoostedRegressor(warm_up=100, seed=1), regression_stream),
    "linear regressor": (lambda: sgt.SGTRegressor(warm_up=100, leaf_model="linear"), regression_stream),
    "constant regressor": (lambda: sgt.SGTRegressor(warm_up=100, leaf_model="constant"), regression_stream),
}


def run(model: Any, X: list[Any], y: list[Any], batch: int) -> tuple[bytes, bytes]:
    """Every prediction made before learning (predict_learn_many, in batches) and the saved model."""
    outputs = [
        np.asarray(model.predict_learn_many(X[i : i + batch], y[i : i + batch]))
        for i in range(0, len(X), batch)
    ]
    return b"".join(o.tobytes() for o in outputs), model.to_bytes()


@pytest.fixture
def paths(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """Switches: the fused steps off (the kernels step by step), then the kernels off (numpy)."""

    def choose(name: str) -> None:
        fused = name == "fused"
        monkeypatch.setattr(kernels, "ENABLED", name != "numpy")
        monkeypatch.setattr(sgt.leafwise, "_one_pass", original_one_pass if fused else lambda tree: False)
        monkeypatch.setattr(LeafLearner, "_fuses", original_fuses if fused else lambda s: False)

    original_one_pass, original_fuses = sgt.leafwise._one_pass, LeafLearner._fuses
    yield choose


@pytest.mark.parametrize("name", sorted(MODELS))
@pytest.mark.parametrize("batch", [1, 200, 2000])
def test_models_learn_the_same_bits_with_the_fused_kernels(name, batch, paths) -> None:
    """Catches a fused step that changes what a model predicts or saves: the fused path, the kernels
    step by step and the numpy code give the same predictions and the same bytes, in batches of one
    record (the one-record path), of 200 and of 2,000."""
    make, stream = MODELS[name]
    X, y = stream(1500 if batch == 1 else 4000)  # (one record at a time is slow)
    results = {}
    for path in ("fused", "stepwise", "numpy"):
        paths(path)
        results[path] = run(make(), X, y, batch)
    assert results["fused"] == results["stepwise"] == results["numpy"]


def test_the_workers_boosted_model_learns_the_same_bits_with_the_fused_kernels(paths) -> None:
    """Catches a difference on the worker's own model and stream shape: the boosted classifier with the
    worker's settings, on the worker benchmark's stream (10 numeric features, gradual drift, binary),
    in the batches of a partition."""
    from tests.bench.bench_worker_core import settings as worker_settings
    from tests.bench.bench_worker_core import stream
    from worker.core.sgt_models import new_model

    rows = stream().take(6000)
    X, y = [x for x, _ in rows], [label for _, label in rows]
    results = {}
    for path in ("fused", "numpy"):
        paths(path)
        results[path] = run(new_model(worker_settings("boosted")), X, y, 500)
    assert results["fused"] == results["numpy"]


SCORES = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.floats(-40.0, 40.0),
    st.sampled_from([0.0, -0.0, 1e-300, -1e-300, 709.0, 710.0, -745.0, -746.0, 1e308]),
)


@settings(max_examples=150, deadline=None)
@given(
    seed=st.one_of(st.integers(0, 100), st.integers(0, 2**64 - 1)),
    first=st.one_of(st.integers(0, 1000), st.integers(0, 2**62)),
    members=st.integers(1, 12),
    rate=st.sampled_from([None, 0.3, 1.0, 6.0, 40.0]),
    young=st.sampled_from([None, 0.5]),
    learned=st.lists(st.booleans(), max_size=300),
)
def test_the_compiled_bagging_weights_are_numpys(seed, first, members, rate, young, learned) -> None:
    """Catches the compiled Poisson weights of online bagging (sgt.kernels.poisson_weights) drawing other
    numbers than the numpy steps: uint64 arithmetic that wraps otherwise or turns into floats, another
    inverse-CDF rule, weights on rows not learned, records counted otherwise."""
    bagging = Bagging(rate, seed)
    learn = np.array(learned, dtype=bool)
    compiled = bagging.weights(learn, members, first, young if rate is not None else None)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(kernels, "ENABLED", False)
        reference = bagging.weights(learn, members, first, young if rate is not None else None)
    assert compiled.shape == reference.shape
    assert np.array_equal(bits(compiled), bits(reference))


@settings(max_examples=200, deadline=None)
@given(
    scores=st.lists(SCORES, min_size=1, max_size=70),
    offsets=st.lists(SCORES, min_size=70, max_size=70),
    every_class_from_three=st.booleans(),
    seed=st.integers(0, 2**32 - 1),
)
def test_a_binary_members_row_gradients_are_its_gradients_bits(
    scores, offsets, every_class_from_three, seed
) -> None:
    """Catches a binary member's compiled gradients (Member._gradients_of_rows, the leafwise pass's)
    differing from its numpy `_gradients` of the gathered rows by one bit: the offset added otherwise,
    the weight applied otherwise (Poisson weights 0 to 4), a target other than class 1 counted as 1,
    NaN, infinities, signed zeros."""
    rng = np.random.default_rng(seed)
    model = sgt.BoostedClassifier(seed=1, n_members=2, **NO_SIDE_MODELS)  # (a member is the subject)
    model.learn_one({"x": 0.0}, 0)
    model.learn_one({"x": 1.0}, 1)  # two classes: each member has one tree of one output
    member = model._members[1]
    # the offsets' column: the first after the weight, or the next where members score every class
    outputs = Outputs(multi_output=True, every_class_from_three=every_class_from_three)
    member._context = dataclasses.replace(member._context, outputs=outputs)
    assert member.n_outputs == 1
    table = np.zeros((70, OFFSETS + 2))
    table[:, TARGET] = rng.integers(0, 3, size=70)
    table[:, WEIGHT] = rng.integers(0, 5, size=70)
    table[:, OFFSETS] = offsets
    table[:, OFFSETS + 1] = offsets[::-1]
    rows = np.sort(rng.choice(70, size=len(scores), replace=False))
    raw = np.array(scores)
    with np.errstate(all="ignore"):
        compiled = member._gradients_of_rows(raw, table, rows)
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(kernels, "ENABLED", False)
            reference = member._gradients_of_rows(raw, table, rows)
    for got, expected in zip(compiled, reference, strict=True):
        assert bits(got).tolist() == bits(expected).tolist()


@settings(max_examples=300, deadline=None)
@given(
    score=SCORES,
    offset=SCORES,
    target=st.integers(0, 2),
    weight=st.integers(0, 4),
    kernels_on=st.booleans(),
)
def test_a_binary_members_one_record_gradients_are_its_rows_bits(
    score: float, offset: float, target: int, weight: int, kernels_on: bool
) -> None:
    """Catches a binary member's gradients of one record in Python floats (`Member._gradients_one`, the
    one-record loop's) differing by one bit from those of the same row in a batch
    (`_gradients_of_rows`, compiled or numpy): p's exps taken otherwise, NaN, infinities, signed zeros,
    a target other than class 1, Poisson weights 0 to 4."""
    model = sgt.BoostedClassifier(seed=1, n_members=2, **NO_SIDE_MODELS)  # (a member is the subject)
    model.learn_one({"x": 0.0}, 0)
    model.learn_one({"x": 1.0}, 1)  # two classes: each member has one tree of one output
    member = model._members[1]
    table = np.zeros((1, OFFSETS + 2))  # (the offset in every column a member's outputs may start at)
    table[0, TARGET], table[0, WEIGHT], table[0, OFFSETS:] = target, weight, offset
    with np.errstate(all="ignore"):
        g, h = member._gradients_one([score], table[0])
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(kernels, "ENABLED", kernels_on and kernels.ENABLED)
            rows_g, rows_h = member._gradients_of_rows(np.array([score]), table, np.array([0]))
    assert bits(np.array(g)).tolist() == bits(rows_g).tolist()
    assert bits(np.array(h)).tolist() == bits(rows_h).tolist()
