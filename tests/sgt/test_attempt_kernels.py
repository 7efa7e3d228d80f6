"""The split attempt's fused numpy kernels give the bits of the plain computations they replaced.

Each reference below is the straightforward form of a step (one numpy call per quantity, or a plain
loop); the library computes the same operations in the same order with fewer, larger numpy calls
(statistics as planes, stacked sides, sums down the rows instead of cumsum). Equality is bitwise,
so a kernel that reorders a sum, or rounds one step differently, fails here before it changes a model.
Every test runs twice: on the numpy code and on sgt.kernels' compiled steps (the `engine` fixture).
"""

from __future__ import annotations

import copy
import dataclasses
import math
from collections.abc import Iterator

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sgt import kernels
from sgt.features import FeatureSpace
from sgt.linear_gate import may_reject, rejects_block
from sgt.ordered import leaf_sums_in_order, solve_positive_definite, sums_in_order
from sgt.split import Candidate, best_numeric, best_numeric_planes, newton_step
from sgt.stats import CGH, M2G, M2H, MG, MH, N
from sgt.tree import Layout, Params, Tree, leaf_inputs_of
from tests.sgt.sgt_testkit import bits, same_candidates


@pytest.fixture(scope="module", params=[False, True], ids=["numpy", "kernels"], autouse=True)
def engine(request: pytest.FixtureRequest) -> Iterator[bool]:
    """The module's tests on the numpy code, then on the compiled kernels (module-scoped: hypothesis
    runs its examples inside one fixture's lifetime)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(kernels, "ENABLED", request.param)
        yield request.param


def reference_block_stats(index: np.ndarray, g: np.ndarray, h: np.ndarray, size: int) -> np.ndarray:
    out = np.zeros((size, 6))
    n = np.bincount(index, minlength=size).astype(np.float64)
    safe = np.maximum(n, 1.0)
    mg = np.bincount(index, weights=g, minlength=size) / safe
    mh = np.bincount(index, weights=h, minlength=size) / safe
    dg, dh = g - mg[index], h - mh[index]
    out[:, N], out[:, MG], out[:, MH] = n, mg, mh
    out[:, M2G] = np.bincount(index, weights=dg * dg, minlength=size)
    out[:, M2H] = np.bincount(index, weights=dh * dh, minlength=size)
    out[:, CGH] = np.bincount(index, weights=dg * dh, minlength=size)
    return out


def reference_best_numeric(blocks: np.ndarray, lambda_: float, gamma: float, n: float) -> Candidate | None:
    """best_numeric as it was written with one numpy call per quantity and side."""
    count = blocks[..., N]
    safe_total = np.maximum(count.sum(axis=1), 1.0)
    centre_g = (count * blocks[..., MG]).sum(axis=1) / safe_total
    centre_h = (count * blocks[..., MH]).sum(axis=1) / safe_total
    dev_g = blocks[..., MG] - centre_g[:, None]
    dev_h = blocks[..., MH] - centre_h[:, None]
    first = (count, count * dev_g, count * dev_h)
    cumulative = [np.cumsum(column[:, 1:], axis=1) for column in first]
    left = [c[:, :-1] for c in cumulative]
    right = [c[:, -1:] - side for c, side in zip(cumulative, left)]
    known_left, known_right = left[0], right[0]
    missing_left = known_left >= known_right
    left = [side + np.where(missing_left, column[:, :1], 0.0) for side, column in zip(left, first)]
    right = [side + np.where(missing_left, 0.0, column[:, :1]) for side, column in zip(right, first)]

    def side_loss(side: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
        safe = np.maximum(side[0], 1.0)
        mean_g = centre_g[:, None] + side[1] / safe
        mean_h = centre_h[:, None] + side[2] / safe
        delta = newton_step(mean_g, mean_h, lambda_)
        return mean_g * delta + 0.5 * mean_h * delta * delta, delta

    (mu_left, delta_left), (mu_right, delta_right) = side_loss(left), side_loss(right)
    mean = (left[0] * mu_left + right[0] * mu_right) / np.maximum(left[0] + right[0], 1.0)
    usable = (known_left > 0) & (known_right > 0) & ~np.isnan(mean)
    mean = np.where(usable, mean + gamma * 2.0 / n, np.inf)
    f, t = divmod(int(np.argmin(mean)), mean.shape[1])
    if not np.isfinite(mean[f, t]):
        return None
    row_n, row_g, row_h = count[f], dev_g[f], dev_h[f]
    second = np.stack(
        [
            blocks[f, :, M2G] + row_n * row_g * row_g,
            blocks[f, :, M2H] + row_n * row_h * row_h,
            blocks[f, :, CGH] + row_n * row_g * row_h,
        ],
        axis=1,
    )
    cumulative_second = np.cumsum(second[1:], axis=0)
    to_left = bool(missing_left[f, t])
    second_left = cumulative_second[t] + np.where(to_left, second[0], 0.0)
    second_right = cumulative_second[-1] - cumulative_second[t] + np.where(to_left, 0.0, second[0])
    groups = []
    for side, moments in ((left, second_left), (right, second_right)):
        size, sg, sh = (float(s[f, t]) for s in side)
        sgg, shh, sgh = moments.tolist()
        eg, eh = sg / size, sh / size
        mg, mh = float(centre_g[f]) + eg, float(centre_h[f]) + eh
        m2g, m2h, cgh = max(sgg - size * eg * eg, 0.0), max(shh - size * eh * eh, 0.0), sgh - size * eg * eh
        denominator = mh + lambda_
        delta = -mg / denominator if denominator > 0 else 0.0
        d2 = delta * delta
        within = max(d2 * m2g + 0.25 * d2 * d2 * m2h + d2 * delta * cgh, 0.0)
        groups.append((size, mg * delta + 0.5 * mh * d2, within))
    (n_left, mu_l, within_left), (n_right, mu_r, within_right) = groups
    total = n_left + n_right
    combined = (n_left * mu_l + n_right * mu_r) / total
    spread = n_left * ((mu_l - combined) * (mu_l - combined)) + n_right * (
        (mu_r - combined) * (mu_r - combined)
    )
    return Candidate(
        feature=f,
        mean=float(mean[f, t]),
        variance=(within_left + within_right + spread) / (total - 1.0),
        deltas=np.array([delta_left[f, t], delta_right[f, t]]),
        threshold=t,
        missing_child=0 if to_left else 1,
    )


def reference_solve(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    rows, rhs = a.tolist(), b.tolist()
    n = len(rhs)
    for k in range(n):
        pivot, top = rows[k], rhs[k]
        for i in range(k + 1, n):
            row = rows[i]
            factor = row[k] / pivot[k]
            for j in range(k, n):
                row[j] -= factor * pivot[j]
            rhs[i] -= factor * top
    x = [0.0] * n
    for k in range(n - 1, -1, -1):
        total = rhs[k]
        for j in range(k + 1, n):
            total -= rows[k][j] * x[j]
        x[k] = total / rows[k][k]
    return np.array(x)


@settings(max_examples=120, deadline=None)
@given(
    features=st.integers(1, 6),
    bins=st.integers(2, 12),
    rows=st.integers(2, 120),
    missing=st.floats(0.0, 0.5),
    seed=st.integers(0, 2**32 - 1),
    lambda_=st.sampled_from([0.0, 0.1, 1.0]),
)
def test_best_numeric_equals_the_per_quantity_search(features, bins, rows, missing, seed, lambda_) -> None:
    """Catches a stacked step of the threshold search that changes a bit of the winner."""
    rng = np.random.default_rng(seed)
    g = rng.normal(size=rows) + rng.choice([0.0, 3.0])
    h = rng.uniform(0.0, 1.0, size=rows) * rng.choice([0.0, 1.0])  # all-zero Hessians too
    codes = rng.integers(1, bins + 1, size=(features, rows))
    codes[rng.random(codes.shape) < missing] = 0
    blocks = np.stack([reference_block_stats(c, g, h, bins + 1) for c in codes])
    expected = reference_best_numeric(blocks, lambda_, 1.0, float(rows))
    for got in (
        best_numeric(blocks, lambda_, 1.0, float(rows)),
        best_numeric_planes(np.ascontiguousarray(np.moveaxis(blocks, -1, 0)), lambda_, 1.0, float(rows)),
        best_numeric_planes(np.moveaxis(blocks, -1, 0), lambda_, 1.0, float(rows)),  # a strided view
    ):
        if expected is None:
            assert got is None
            continue
        assert got is not None
        assert (got.feature, got.threshold, got.missing_child) == (
            expected.feature,
            expected.threshold,
            expected.missing_child,
        )
        assert bits(got.mean) == bits(expected.mean) and bits(got.variance) == bits(expected.variance)
        assert np.array_equal(bits(got.deltas), bits(expected.deltas))


@settings(max_examples=80, deadline=None)
@given(rows=st.integers(1, 40), columns=st.integers(0, 40), seed=st.integers(0, 2**32 - 1))
def test_sums_in_order_equal_the_last_cumulative_sum(rows, columns, seed) -> None:
    """Catches a pairwise (or any reordered) sum: rows of mixed magnitudes round differently then."""
    rng = np.random.default_rng(seed)
    terms = rng.normal(size=(rows, columns)) * 10.0 ** rng.integers(-8, 9, size=(rows, columns))
    terms[rng.random(terms.shape) < 0.1] = -0.0
    expected = np.cumsum(terms, axis=0)[-1] if rows else np.zeros(columns)
    assert np.array_equal(bits(sums_in_order(terms)), bits(expected))
    assert np.array_equal(bits(sums_in_order(np.asfortranarray(terms))), bits(expected))
    assert np.array_equal(bits(sums_in_order(terms.T.copy().T)), bits(expected))


@settings(max_examples=60, deadline=None)
@given(size=st.integers(1, 12), seed=st.integers(0, 2**32 - 1))
def test_solve_equals_the_full_elimination(size, seed) -> None:
    """Catches an elimination that skips an update it still reads, or reorders one."""
    rng = np.random.default_rng(seed)
    m = rng.normal(size=(size, size))
    a = m @ m.T / size + 0.01 * np.eye(size)
    b = rng.normal(size=size)
    assert np.array_equal(bits(np.array(solve_positive_definite(a, b))), bits(reference_solve(a, b)))


def linear_tree(seed: int, n_numeric: int) -> tuple[Tree, np.random.Generator]:
    """A tree with linear leaves over numeric features interleaved with nominal ones."""
    rng = np.random.default_rng(seed)
    space = FeatureSpace(bins=16, warm_up=50)
    record = {}
    for j in range(n_numeric):
        record[f"x{j}"] = float(j)
        if j % 3 == 1:
            record[f"c{j}"] = "a"
    space.encode_rows(
        [record, {k: (v * 3.0 + 1.0 if isinstance(v, float) else "b") for k, v in record.items()}], None
    )
    tree = Tree(Params(1e-3, 200, 0.1, 0.1, None, leaf_model="linear"), Layout(space))
    tree.weights[0] = rng.normal(size=tree.weights.shape[1])
    return tree, rng


@settings(max_examples=40, deadline=None)
@given(n_numeric=st.integers(1, 8), size=st.integers(1, 200), seed=st.integers(0, 2**32 - 1))
def test_linear_leaf_step_equals_the_outer_product_form(n_numeric, size, seed) -> None:
    """Catches a Newton step on the Hessian's triangle, or with sums down rows, that moves a bit."""
    tree, rng = linear_tree(seed, n_numeric)
    layout = tree.layout
    codes = rng.integers(0, layout.bins + 1, size=(size, layout.n_features))
    g, h = rng.normal(size=size), rng.uniform(0.0, 0.3, size=size)
    tree.reserve_pending(size)
    tree.pending_codes[0, :size], tree.pending_g[0, :size], tree.pending_h[0, :size] = codes, g, h
    tree.pending_n[0] = size
    before = copy.deepcopy(tree)
    tree.learner._newton_linear(0, 0)
    # the reference: numpy's outer products and cumsums, as the step was first written
    numeric = layout.numeric
    weights, value = before.weights[0].copy(), float(before.value[0])
    z = layout.inputs[codes[:, numeric]]
    h_sum = float(np.cumsum(h)[-1])
    if h_sum > 0.0:
        centre = np.cumsum(z * h[:, None], axis=0)[-1] / h_sum
        z = z - centre
        gradient = np.cumsum(z * g[:, None], axis=0)[-1] / size
        outer = z[:, :, None] * z[:, None, :] * h[:, None, None]
        hessian = np.cumsum(outer, axis=0)[-1] / size + 0.01 * np.eye(numeric.size)
        step = reference_solve(hessian, gradient)
        if np.all(np.isfinite(step)):
            weights[numeric] -= step
            value += float(np.cumsum(step * centre)[-1])
    assert np.array_equal(bits(tree.weights[0]), bits(weights))
    assert bits(float(tree.value[0])) == bits(value)


@settings(max_examples=40, deadline=None)
@given(
    n_numeric=st.integers(1, 8),
    rows=st.integers(0, 30),
    narrow=st.booleans(),
    seed=st.integers(0, 2**32 - 1),
)
def test_predict_rows_equals_the_feature_by_feature_sum(n_numeric, rows, narrow, seed) -> None:
    """Catches a linear term summed in another order than predict_one's, feature by feature."""
    tree, rng = linear_tree(seed, n_numeric)
    layout = tree.layout
    for _ in range(3):
        tree._new_leaf(parent=0, value=float(rng.normal()), depth=1)
    tree.weights[: tree.n_nodes] = rng.normal(size=(tree.n_nodes, layout.n_features)) * 10.0 ** rng.integers(
        -6, 6, size=(tree.n_nodes, layout.n_features)
    )
    width = max(1, layout.n_features - 2) if narrow else layout.n_features  # codes of an older layout
    codes = rng.integers(0, layout.bins + 1, size=(rows, width)).astype(np.uint16)
    nodes = rng.integers(0, tree.n_nodes, size=rows)
    expected = tree.value[nodes]
    for j in layout.numeric.tolist():
        if j < width:
            expected = expected + tree.weights[nodes, j] * layout.inputs[codes[:, j]]
    got = tree.predict_rows(nodes, leaf_inputs_of(layout, codes))
    assert np.array_equal(bits(got), bits(expected))
    assert all(
        bits(tree.predict_one(int(node), row)) == bits(value)
        for node, row, value in zip(nodes, codes, got)
        if not math.isnan(value)
    )


def leaves_tree(seed: int, n_numeric: int, linear: bool, max_depth: int | None) -> tuple[Tree, list[int]]:
    """A tree of several leaves at different depths (blocks of different sizes), numeric features
    interleaved with nominal ones, each leaf's pending block full of random instances on top of
    random merged statistics."""
    tree, rng = linear_tree(seed, n_numeric)
    tree.params = Params(
        1e-3, 40, 0.1, 0.1, max_depth, grace_start=3, leaf_model="linear" if linear else "constant"
    )
    tree.linear = linear
    layout = tree.layout
    for depth in (1, 1, 2, 3):
        tree._new_leaf(parent=0, value=float(rng.normal()), depth=depth)
    leaves = list(range(1, tree.n_nodes))
    tree.feature[0] = 0  # the root is a branch (the leaves' parent), not a leaf
    tree.weights[: tree.n_nodes] = rng.normal(size=(tree.n_nodes, layout.n_features))
    for leaf in leaves:
        slot = int(tree.slot[leaf])
        size = int(tree.block[slot])
        tree.reserve_pending(size)
        codes = np.stack([rng.integers(0, width, size=size) for width in layout.widths], axis=1)
        g, h = rng.normal(size=size), rng.uniform(0.0, 0.3, size=size)
        if rng.random() < 0.2:
            g[rng.random(size) < 0.5] = -0.0  # zeros of either sign reach the statistics
        tree.append(np.full(size, leaf), codes, g, h)
        if rng.random() < 0.5:  # statistics merged from earlier blocks
            tree.learner._merge_pending(slot)
            tree.append(np.full(size, leaf), codes[::-1].copy(), rng.normal(size=size), h[::-1].copy())
    return tree, leaves


@settings(max_examples=40, deadline=None)
@given(
    n_numeric=st.integers(1, 6),
    linear=st.booleans(),
    max_depth=st.sampled_from([None, 2]),
    pick=st.lists(st.integers(0, 3), min_size=1, max_size=4, unique=True),
    seed=st.integers(0, 2**32 - 1),
    gate=st.sampled_from([None, 0.5, -1.0]),  # -1: most blocks drop their terms
)
def test_evaluating_leaves_together_equals_one_at_a_time(
    n_numeric, linear, max_depth, pick, seed, gate
) -> None:
    """Catches a batched attempt (Newton steps padded to the longest block, one merge, one numeric
    search, linear terms dropped by `linear_gate`) that gives any leaf other bits than its own
    attempt: values, weights, statistics, candidates."""
    tree, leaves = leaves_tree(seed, n_numeric, linear, max_depth)
    tree.params = dataclasses.replace(tree.params, linear_gate=gate)
    nodes = [leaves[k] for k in pick]
    alone = copy.deepcopy(tree)
    together = tree.evaluate_leaves(nodes)
    one_by_one = [alone.evaluate(node) for node in nodes]
    assert all(same_candidates(a, b) for a, b in zip(together, one_by_one, strict=True))
    for name in ("value", "weights", "stats", "total", "pending_n"):
        assert np.array_equal(bits(getattr(tree, name)), bits(getattr(alone, name))), name


@settings(max_examples=60, deadline=None)
@given(
    sizes=st.lists(st.integers(1, 30), min_size=1, max_size=5),
    quantities=st.integers(2, 12),
    seed=st.integers(0, 2**32 - 1),
)
def test_leaf_sums_equal_each_leafs_own_sums(sizes, quantities, seed) -> None:
    """Catches padding that is not an exact identity of a sum in order (+0.0 turns a sum of -0.0
    terms into +0.0), or sums that leave the row-by-row order."""
    rng = np.random.default_rng(seed)
    longest = max(sizes)
    terms = (
        rng.normal(size=(len(sizes), quantities, longest))
        * 10.0 ** rng.integers(-3, 3, size=quantities)[:, None]
    )
    terms[:, 0] = -0.0  # a quantity whose every term is -0.0 sums to -0.0
    padding = np.arange(longest) >= np.array(sizes)[:, None]
    got = leaf_sums_in_order(terms, padding)
    for k, size in enumerate(sizes):
        assert np.array_equal(bits(got[k]), bits(sums_in_order(terms[k, :, :size].T)))


def gated_leaf(slope: float, seed: int) -> Tree:
    """A one-feature tree whose root's linear term has weight 2 and whose full block of 100 records
    has gradients g = slope * input (plus noise) at h = 1/4: the term's loss falls along -g."""
    tree, rng = linear_tree(seed, 1)
    tree.params = dataclasses.replace(tree.params, linear_gate=2.0)
    tree.weights[0] = 2.0
    codes = rng.integers(1, tree.layout.bins + 1, size=(100, 1))
    g = slope * tree.layout.inputs[codes[:, 0]] + rng.normal(0.0, 0.01, 100)
    tree.reserve_pending(100)
    tree.append(np.zeros(100, dtype=np.intp), codes, g, np.full(100, 0.25))
    return tree


def test_a_linear_term_its_new_block_rejects_is_dropped_and_its_mean_kept_in_the_value() -> None:
    """Catches a gate that keeps a term the block says is wrong, that still steps it, or that drops it
    without keeping the score at the block's h-weighted centre."""
    tree = gated_leaf(slope=1.0, seed=5)  # g grows with the input: the loss falls with less slope
    slot = int(tree.slot[0])
    z = tree.layout.inputs[tree.pending_codes[slot, :100, 0]]
    centre = float((z * 0.25).sum() / 25.0)
    value = float(tree.value[0])
    tree.learner._newton_linear(0, slot)
    assert tree.weights[0].tolist() == [0.0] * tree.weights.shape[1]
    assert math.isclose(float(tree.value[0]), value + 2.0 * centre, rel_tol=1e-12, abs_tol=1e-15)


def test_a_linear_term_its_new_block_supports_is_stepped_as_without_the_gate() -> None:
    """Catches a gate that drops a term whose slope the block confirms (g falls as the input grows)."""
    gated, plain = gated_leaf(slope=-1.0, seed=6), gated_leaf(slope=-1.0, seed=6)
    plain.params = dataclasses.replace(plain.params, linear_gate=None)
    gated.learner._newton_linear(0, int(gated.slot[0]))
    plain.learner._newton_linear(0, int(plain.slot[0]))
    assert gated.weights[0, 0] != 2.0 and np.array_equal(bits(gated.weights), bits(plain.weights))
    assert bits(gated.value[0]) == bits(plain.value[0])


def test_without_the_gate_a_rejected_term_is_stepped() -> None:
    """Catches a gate that acts with `linear_gate` None."""
    tree = gated_leaf(slope=1.0, seed=5)
    tree.params = dataclasses.replace(tree.params, linear_gate=None)
    tree.learner._newton_linear(0, int(tree.slot[0]))
    assert tree.weights[0, 0] != 0.0


@settings(max_examples=200, deadline=None)
@given(
    n_numeric=st.integers(1, 6),
    size=st.integers(2, 60),
    gate=st.floats(0.0, 3.0),
    drift=st.floats(-2.0, 2.0),
    seed=st.integers(0, 2**32 - 1),
)
def test_the_gates_screen_passes_every_block_the_t_test_rejects(n_numeric, size, gate, drift, seed) -> None:
    """Catches a screen that skips the t test of a block it would reject (w . G of the wrong sign, or
    of the wrong sums), which would keep a term the block says is wrong."""
    tree, rng = linear_tree(seed, n_numeric)
    first, second = tree.layout.pairs
    weights = rng.normal(size=n_numeric)
    z = rng.uniform(-0.5, 0.5, size=(n_numeric, size))
    h = rng.uniform(0.01, 0.25, size=size)
    z -= (z * h).sum(axis=1, keepdims=True) / h.sum()
    g = drift * (weights @ z) + rng.normal(size=size) * 0.1  # drift > 0: the block rejects the term
    sums = sums_in_order(np.concatenate([z * g, z[first] * z[second] * h]).T)
    if rejects_block(weights, z, g, h, gate):
        assert may_reject(weights.tolist(), sums[:n_numeric].tolist(), gate)


def test_the_gates_screen_sends_to_the_t_test_only_blocks_that_could_reject() -> None:
    """Catches a screen that skips a block whose w . G is positive or NaN, or a negative gate (which
    can reject a block whose loss is higher without its term)."""
    assert not may_reject([1.0, 2.0], [-1.0, 0.25], 1.5) and not may_reject([1.0], [0.0], 1.5)
    assert may_reject([1.0, 2.0], [-1.0, 0.75], 1.5)
    assert may_reject([1.0, 2.0], [-1.0, 0.25], -1.0)
    assert may_reject([math.inf, 1.0], [0.0, -1.0], 1.5)
