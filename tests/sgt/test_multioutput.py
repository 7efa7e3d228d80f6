"""The multi-output tree (sgt.multioutput) and the boosted classifier whose members take one.

The candidates of a multi-output leaf against brute force and against the single-output search; the
widening at a new class; and the ensemble's exactness guarantees in that mode: any batching gives the
one-record loop's probabilities and bytes, a round trip at any point (across the third class's arrival
too) continues byte for byte, and saves without the parameter restore as committees of trees.
"""

from __future__ import annotations

import functools
import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import sgt
from sgt import BoostedClassifier
from sgt.features import FeatureSpace
from sgt.multioutput import MultiOutputTree, load_tree, widened
from sgt.ordered import solve_positive_definite, solve_positive_definite_many
from sgt.serialization import decode
from sgt.split import (
    best_nominal,
    best_nominal_outputs,
    best_numeric_leaves,
    best_numeric_outputs,
    null_candidate,
    null_candidate_outputs,
)
from sgt.stats import block_stats
from sgt.tree import Layout, Params, Tree, leaf_inputs_of
from tests.sgt.test_boosted import (
    _LABELS,
    _LABELS5,
    _RECORDS,
    _RECORDS5,
    LINEAR,
    MANY_CUTS,
    N_MANY,
    SMALL,
    N,
    batches,
    cut_points,
)

LAMBDA, GAMMA = 0.1, 1.0
MULTI = {"multiclass_trees": "multi-output"}
REFERENCE = {"multiclass_trees": "multi-output-reference"}
PROPERTY = settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
SLOW_PROPERTY = settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _instances(seed: int, n: int, outputs: int, bins: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Codes 0..bins (0: missing, about one in ten) and each output's g and h > 0."""
    rng = np.random.default_rng(seed)
    codes = rng.integers(1, bins + 1, size=n)
    codes[rng.uniform(size=n) < 0.1] = 0
    g = rng.normal(size=(outputs, n)) + rng.normal(size=(outputs, 1)) * (codes > bins // 2)
    h = rng.uniform(0.05, 1.0, size=(outputs, n))
    return codes, g, h


def _planes(codes: np.ndarray, g: np.ndarray, h: np.ndarray, bins: int) -> np.ndarray:
    """One feature's statistics per output, as the search takes them: [outputs, 6, 1, bins + 1]."""
    return np.stack([block_stats(codes, g[k], h[k], bins + 1).T[:, None, :] for k in range(g.shape[0])])


def _brute_force(codes: np.ndarray, g: np.ndarray, h: np.ndarray, t: int) -> tuple[float, float]:
    """Threshold t's mean loss change summed over the outputs (penalised) and the sum of the outputs'
    variances, from the instances (missing values join the side with more known ones; ties: left)."""
    known = codes > 0
    left, right = known & (codes <= t + 1), known & (codes > t + 1)
    if not left.any() or not right.any():
        return math.inf, math.nan
    to_left = left.sum() >= right.sum()
    left, right = left | (~known & to_left), right | (~known & ~to_left)
    mean = variance = 0.0
    for gk, hk in zip(g, h):
        loss = np.empty(codes.size)
        for side in (left, right):
            delta = -gk[side].mean() / (hk[side].mean() + LAMBDA)
            loss[side] = gk[side] * delta + 0.5 * hk[side] * delta * delta
        mean += loss.mean()
        variance += loss.var(ddof=1)
    return mean + GAMMA * 2 / codes.size, variance


@given(seed=st.integers(0, 10_000), outputs=st.integers(2, 5), n=st.integers(2, 120))
def test_the_numeric_search_of_several_outputs_is_the_brute_force_one(
    seed: int, outputs: int, n: int
) -> None:
    bins = 8
    codes, g, h = _instances(seed, n, outputs, bins)
    best = best_numeric_outputs(_planes(codes, g, h, bins), LAMBDA, GAMMA, float(n))
    scores = [_brute_force(codes, g, h, t) for t in range(bins - 1)]
    lowest = min(mean for mean, _ in scores)
    if not math.isfinite(lowest):
        assert best is None
        return
    assert best is not None and best.deltas.shape == (2, outputs)
    mean, variance = scores[best.threshold]
    assert best.mean == pytest.approx(lowest, rel=1e-9, abs=1e-12)
    assert mean == pytest.approx(lowest, rel=1e-9, abs=1e-12)
    assert best.variance == pytest.approx(variance, rel=1e-7, abs=1e-12)


@given(seed=st.integers(0, 10_000), n=st.integers(2, 120))
def test_one_output_searches_as_a_single_tree_bit_for_bit(seed: int, n: int) -> None:
    bins = 8
    codes, g, h = _instances(seed, n, 1, bins)
    planes = _planes(codes, g, h, bins)
    multi = best_numeric_outputs(planes, LAMBDA, GAMMA, float(n))
    (single,) = best_numeric_leaves(planes, LAMBDA, GAMMA, np.array([float(n)]))
    assert (multi is None) == (single is None)
    if multi is not None and single is not None:
        assert (multi.threshold, multi.mean, multi.variance) == (
            single.threshold,
            single.mean,
            single.variance,
        )
        assert multi.deltas[:, 0].tolist() == single.deltas.tolist()
    block = block_stats(codes, g[0], h[0], bins + 1)
    nominal, alone = (
        best_nominal_outputs(block[:, None], LAMBDA, GAMMA, float(n), 0),
        best_nominal(block, LAMBDA, GAMMA, float(n), 0),
    )
    assert (nominal is None) == (alone is None)
    if nominal is not None and alone is not None:
        assert (nominal.mean, nominal.variance, nominal.missing_child) == (
            alone.mean,
            alone.variance,
            alone.missing_child,
        )
        assert nominal.deltas[:, 0].tolist() == alone.deltas.tolist()


def test_the_null_candidate_of_several_outputs_sums_theirs() -> None:
    _, g, h = _instances(3, 50, 3, 4)
    totals = np.stack([block_stats(np.zeros(50, dtype=np.intp), g[k], h[k], 1)[0] for k in range(3)])
    both = null_candidate_outputs(totals, LAMBDA)
    alone = [null_candidate(total, LAMBDA) for total in totals]
    assert both.mean == alone[0].mean + alone[1].mean + alone[2].mean
    assert both.variance == alone[0].variance + alone[1].variance + alone[2].variance
    assert both.deltas.tolist() == [[c.deltas[0] for c in alone]]


@given(seed=st.integers(0, 10_000), systems=st.integers(1, 4), n=st.integers(1, 9))
def test_systems_solved_side_by_side_get_the_bits_of_each_alone(seed: int, systems: int, n: int) -> None:
    rng = np.random.default_rng(seed)
    m = rng.normal(size=(systems, n, n))
    a = m @ m.transpose(0, 2, 1) + 0.01 * np.eye(n)
    b = rng.normal(size=(systems, n))
    together = solve_positive_definite_many(a, b).tolist()
    assert together == [solve_positive_definite(a[k], b[k]) for k in range(systems)]


def test_each_outputs_linear_step_is_a_single_trees_on_its_gradients() -> None:
    rng = np.random.default_rng(4)
    space = FeatureSpace(bins=16, warm_up=10)
    codes = space.encode_array(rng.uniform(-1, 1, size=(60, 4)), np.ones(60, dtype=bool))
    params, layout = Params(0.1, 100, 0.1, 0.0, None, 100, "linear"), Layout(space)
    g, h = rng.normal(size=(3, 60)), rng.uniform(0.0, 1.0, size=(3, 60))
    h[1] = 0.0  # an output without a positive Hessian sum takes no step
    multi = MultiOutputTree(params, layout, 3)
    multi.append(np.zeros(60, dtype=np.int32), codes, g, h)
    multi.learner._newton_linear(0, 0)
    for k in range(3):
        single = Tree(params, layout)
        single.append(np.zeros(60, dtype=np.int32), codes, g[k], h[k])
        single.learner._newton_linear(0, 0)
        assert multi.weights[0, k].tolist() == single.weights[0].tolist()
        assert float(multi.value[0, k]) == float(single.value[0])
    assert not multi.weights[0, 1].any() and multi.weights[0, 0].any()


def _grown_tree(outputs: int) -> tuple[Tree, np.ndarray]:
    """A tree with splits, pending instances and linear terms, learned one record at a time."""
    rng = np.random.default_rng(outputs)
    space = FeatureSpace(bins=16, warm_up=10)
    X = rng.uniform(-1, 1, size=(600, 3))
    codes = space.encode_array(X, np.ones(600, dtype=bool))
    params = Params(0.2, 30, 0.1, 0.0, None, 5, "linear")
    layout = Layout(space)
    tree = Tree(params, layout) if outputs == 1 else MultiOutputTree(params, layout, outputs)
    for x, row in zip(X, codes[:-7]):
        g = [float(np.sign(x[0]) + k * x[1]) for k in range(outputs)]
        node = tree.route_one(row)[0]
        tree.learn_one(
            node, row, g[0] if outputs == 1 else g, 1.0 if outputs == 1 else [1.0] * outputs, space
        )
    return tree, codes


@pytest.mark.parametrize(("outputs", "positions"), [(1, [1]), (1, [0]), (2, [0, 1]), (2, [3, 1])])
def test_a_widened_tree_keeps_its_outputs_and_adds_zeros(outputs: int, positions: list[int]) -> None:
    tree, codes = _grown_tree(outputs)
    assert tree.n_splits > 0 and tree.pending_n[: tree.n_slots].sum() > 0
    wide = widened(tree, outputs + 2, positions)
    added = [k for k in range(outputs + 2) if k not in positions]
    nodes = wide.route(codes)[0]
    inputs = leaf_inputs_of(wide.layout, codes)
    before = tree.predict_outputs(tree.route(codes)[0], inputs)
    after = wide.predict_outputs(nodes, inputs)
    assert after[positions].tolist() == before.tolist() and not after[added].any()
    slots = wide.n_slots
    assert (wide.total[:slots, added, 0] == wide.total[:slots, positions[:1], 0]).all()  # the same counts
    assert not wide.total[:slots, added, 1:].any() and not wide.pending_g[:slots, :, added].any()
    counters, arrays = wide.saved("t")
    restored = load_tree(wide.params, wide.layout, "t", counters, dict(arrays))
    assert isinstance(restored, MultiOutputTree) and restored.n_outputs == outputs + 2
    assert [(n, a.tobytes()) for n, a in restored.saved("t")[1]] == [(n, a.tobytes()) for n, a in arrays]


def test_a_multi_output_tree_predicts_a_batch_as_one_record_at_a_time() -> None:
    tree, codes = _grown_tree(3)
    nodes = tree.route(codes)[0]
    batch = tree.predict_outputs(nodes, leaf_inputs_of(tree.layout, codes))
    one = [tree.predict_outputs_one(int(node), row) for node, row in zip(nodes, codes)]
    assert batch.T.tolist() == one
    with pytest.raises(TypeError, match="predict_outputs"):
        tree.predict_one(0, codes[0])


# -- the boosted classifier with multi-output members ----------------------------------------------


@functools.cache
def _loop(name: str) -> tuple[bytes, list[dict]]:
    params, records, labels = _STREAMS[name]
    model, proba = BoostedClassifier(**params), []
    for x, y in zip(records, labels, strict=True):
        proba.append(model.predict_proba_one(x))
        if y is not None:
            model.learn_one(x, y)
    return model.to_bytes(), proba


# the drifting stream whose third class comes at record 1100 (the members widen there), with constant
# and linear leaves, and that of five classes with a nominal feature, missing values and unlabelled
# rows; members that score every class, and every class but the first
_BY_CLASSES = {k: v for k, v in SMALL.items() if k != "n_members"}
_STREAMS = {
    "small": ({**SMALL, **MULTI}, _RECORDS, _LABELS),
    "by-classes": ({**_BY_CLASSES, **MULTI}, _RECORDS, _LABELS),
    "linear": ({**LINEAR, **MULTI}, _RECORDS, _LABELS),
    "five": ({**MANY_CUTS, **MULTI}, _RECORDS5, _LABELS5),
    "small-reference": ({**SMALL, **REFERENCE}, _RECORDS, _LABELS),
    "five-reference": ({**MANY_CUTS, **REFERENCE}, _RECORDS5, _LABELS5),
}


@pytest.mark.parametrize("name", ["small", "by-classes", "five", "small-reference", "five-reference"])
def test_the_members_hold_one_tree_from_the_third_class_on(name: str) -> None:
    model = sgt.load(_loop(name)[0])
    every = model.multiclass_trees == "multi-output"
    assert len(model.classes_) >= 3 and model.multiclass_trees == _STREAMS[name][0]["multiclass_trees"]
    members = model._all_members()
    outputs = len(model.classes_) - (0 if every else 1)
    assert all(len(m._trees) == 1 and m._trees[0].n_outputs == outputs for m in members)
    assert model.n_trees == len(members) and model.n_splits > 0
    if name.startswith("small"):
        assert model.n_drifts > 0


def test_a_binary_stream_learns_the_same_whatever_the_multiclass_trees() -> None:
    labels = [y if y in (0, 1) else 1 for y in _LABELS]  # no third class
    models = [BoostedClassifier(**SMALL, multiclass_trees=kind) for kind in ("per-class", "multi-output")]
    P = [model.predict_learn_many(_RECORDS, labels) for model in models]
    assert P[0].tobytes() == P[1].tobytes()
    saved = [decode(model.to_bytes()) for model in models]
    assert [{k: a.tobytes() for k, a in d.arrays.items()} for d in saved[:1]] == [
        {k: a.tobytes() for k, a in d.arrays.items()} for d in saved[1:]
    ]
    assert saved[1].header["params"].pop("multiclass_trees") == "multi-output"
    assert saved[0].header == saved[1].header


@SLOW_PROPERTY
@given(
    name=st.sampled_from(sorted(_STREAMS)),
    cuts=st.lists(st.integers(1, N - 1), max_size=10, unique=True).map(sorted),
    at=st.integers(0, N),
)
def test_any_batching_and_a_round_trip_at_any_point_give_the_loop(
    name: str, cuts: list[int], at: int
) -> None:
    params, records, labels = _STREAMS[name]
    n = len(records)
    cuts, at = [c for c in cuts if c < n], min(at, n)
    expected, loop_proba = _loop(name)
    model, rows = BoostedClassifier(**params), []
    for part in batches(n, cuts):
        P = model.predict_learn_many(records[part], labels[part])
        rows.extend((P[i], list(model.classes_)) for i in range(P.shape[0]))
    assert model.to_bytes() == expected
    for (row, classes), want in zip(rows, loop_proba, strict=True):
        assert {c: row[j] for j, c in enumerate(classes) if c in want or row[j] != 0.0} == want
    model = BoostedClassifier(**params)
    model.learn_many(records[:at], labels[:at])
    restored = BoostedClassifier.from_bytes(model.to_bytes())
    assert restored.to_bytes() == model.to_bytes()
    restored.learn_many(records[at:], labels[at:])
    assert restored.to_bytes() == expected


@PROPERTY
@given(cuts=cut_points(N_MANY), methods=st.lists(st.sampled_from(["learn_many", "loop"]), min_size=11))
def test_learning_methods_mixed_give_the_loop(cuts: list[int], methods: list[str]) -> None:
    params, records, labels = _STREAMS["five"]
    model = BoostedClassifier(**params)
    for part, method in zip(batches(N_MANY, cuts), methods, strict=False):
        if method == "loop":
            for x, y in zip(records[part], labels[part], strict=True):
                if y is not None:
                    model.learn_one(x, y)
        else:
            model.learn_many(records[part], labels[part])
    assert model.to_bytes() == _loop("five")[0]


def test_a_save_without_the_parameter_restores_as_a_committee_and_continues() -> None:
    # what the classifier wrote before it had the parameter: a committee per member, no parameter
    model = BoostedClassifier(**{**MANY_CUTS, "multiclass_trees": "per-class"})
    model.learn_many(_RECORDS5[:500], _LABELS5[:500])
    blob = model.to_bytes()
    assert "multiclass_trees" not in decode(blob).header["params"]
    restored = BoostedClassifier.from_bytes(blob)
    assert restored.multiclass_trees == "per-class" and all(len(m._trees) == 4 for m in restored._members)
    for m in (model, restored):
        m.learn_many(_RECORDS5[500:], _LABELS5[500:])
    assert restored.to_bytes() == model.to_bytes()
    assert decode(_loop("five")[0]).header["params"]["multiclass_trees"] == "multi-output"


@pytest.mark.parametrize(("name", "outputs"), [("five", 5), ("five-reference", 4)])
def test_the_views_show_a_value_per_class(name: str, outputs: int) -> None:
    model = sgt.load(_loop(name)[0])
    classes = ", ".join(map(repr, model.classes_[5 - outputs :]))
    against = "" if outputs == 5 else f" against {model.classes_[0]!r}"
    text = model.to_text()
    assert f"member 0 tree 0 (classes {classes}{against})" in text and "leaf value=[" in text
    leaf = _leaves(model.to_dict()["trees"][0])[0]
    assert len(leaf["value"]) == outputs and len(leaf["weights"]) == outputs
    assert "[" in model.to_dot()


def _leaves(node: dict) -> list[dict]:
    return [node] if node["leaf"] else [leaf for child in node["children"] for leaf in _leaves(child)]


def test_an_unknown_member_tree_kind_is_refused() -> None:
    with pytest.raises(
        ValueError, match="multiclass_trees must be one of 'per-class', 'multi-output', 'multi-o"
    ):
        BoostedClassifier(multiclass_trees="one")
    with pytest.raises(ValueError, match="outputs must be an integer >= 2"):
        MultiOutputTree(Params(0.1, 10, 0.1, 0.0, None), Layout(FeatureSpace(8, 10)), 1)
