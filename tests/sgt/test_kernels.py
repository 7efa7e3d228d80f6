"""sgt.kernels' compiled split search and block merge give the numpy code's bits, and so do models.

Every comparison is bitwise: a kernel that sums in another order, or rounds one step differently,
fails here before it changes a model (and a model saved with the kernels would then restore
differently without them). The kernels run compiled where numba is installed (the test extra installs
it) and as plain Python otherwise: the same operations either way.
"""

from __future__ import annotations

import copy
import os
import subprocess
import sys
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import sgt
from sgt import kernels, level_rows
from sgt.features import FeatureSpace, Regrid
from sgt.kernels import compiling
from sgt.kernels.summation import _pairwise_sum
from sgt.layout import Layout, Params
from sgt.multioutput import MultiOutputTree
from sgt.regressor import _LARGEST, AUTO_FADING, fade_errors, least_error
from sgt.residual import ResidualLevel
from sgt.split import best_numeric_compiled, best_numeric_outputs, best_numeric_planes
from sgt.stats import block_stats, merge
from tests.sgt.sgt_testkit import (
    NO_SIDE_MODELS,
    assert_newton_steps_agree,
    bits,
    multiclass_stream,
    same_candidates,
    step_regression_stream,
    threshold_stream,
)


@settings(deadline=None)  # the first example compiles the kernel
@given(
    n=st.one_of(st.integers(0, 300), st.sampled_from([1000, 1031, 4097])),
    scale=st.sampled_from([1.0, 1e12, 1e-12]),
    zeros=st.booleans(),
    seed=st.integers(0, 2**32 - 1),
)
def test_pairwise_sum_is_numpys_sum(n, scale, zeros, seed) -> None:
    """Catches a sum in another order than numpy's (in order, eight accumulators, halving above 128),
    and a lost identity (numpy's sum of -0.0 values is +0.0)."""
    rng = np.random.default_rng(seed)
    values = np.full(n, -0.0) if zeros else rng.normal(size=n) * scale + rng.choice([0.0, 1e3])
    assert bits(_pairwise_sum(values)) == bits(values.sum())


def leaf_statistics(
    rng: np.random.Generator, features: int, bins: int, rows: int, missing: float, outputs: int = 1
) -> np.ndarray:
    """A slot's statistics [features * (bins + 1), outputs, 6], merged from two blocks as a leaf's are:
    every output counts the same instances, each with gradients of its own."""
    columns = features * (bins + 1)
    stats = np.zeros((columns, outputs, 6))
    for _ in range(2):
        codes = rng.integers(1, bins + 1, size=(rows, features))
        codes[rng.random(codes.shape) < missing] = 0
        index = (codes + np.arange(features) * (bins + 1)).ravel()
        for k in range(outputs):
            g = rng.normal(size=rows) + rng.choice([0.0, 3.0, -1e6])  # a large common offset too
            h = rng.uniform(0.0, 1.0, size=rows) * rng.choice([0.0, 1.0])  # all-zero Hessians too
            block = block_stats(index, np.repeat(g, features), np.repeat(h, features), columns)
            stats[:, k] = merge(stats[:, k], block)
    return stats


@settings(max_examples=150, deadline=None)
@given(
    features=st.integers(1, 6),
    bins=st.sampled_from([2, 3, 8, 64, 200]),
    rows=st.integers(1, 150),
    missing=st.sampled_from([0.0, 0.2, 0.9]),
    outputs=st.sampled_from([1, 1, 2, 5]),
    lambda_=st.sampled_from([0.0, 0.1, 1.0]),
    gamma=st.sampled_from([0.0, 1.0]),
    seed=st.integers(0, 2**32 - 1),
)
def test_compiled_search_finds_the_numpy_searchs_candidate(
    features, bins, rows, missing, outputs, lambda_, gamma, seed
) -> None:
    """Catches any bit of the winner (its feature, threshold, missing side, mean, variance, steps)
    that the compiled search computes differently from best_numeric_planes (one output) or
    best_numeric_outputs (a multi-output leaf's, whose outputs' loss changes add up)."""
    rng = np.random.default_rng(seed)
    stats = leaf_statistics(rng, features, bins, rows, missing, outputs)
    columns = np.arange(features * (bins + 1)).reshape(features, bins + 1)
    names = np.arange(features) * 2 + 1  # the numeric features' indices among all features
    n = 2.0 * rows
    if outputs == 1:
        one = stats[:, 0]
        expected = best_numeric_planes(np.take(one.T, columns, axis=1), lambda_, gamma, n, names)
        assert same_candidates(best_numeric_compiled(one, columns, lambda_, gamma, n, names), expected)
    else:
        planes = np.take(stats.transpose(1, 2, 0), columns, axis=2)
        expected = best_numeric_outputs(planes, lambda_, gamma, n, names)
        assert same_candidates(best_numeric_compiled(stats, columns, lambda_, gamma, n, names), expected)


@settings(max_examples=150, deadline=None)
@given(
    features=st.integers(1, 4),
    bins=st.sampled_from([3, 8, 64]),
    values=st.integers(1, 4),
    rows=st.integers(1, 150),
    outputs=st.sampled_from([1, 2, 9]),
    leftover=st.sampled_from([0.0, -0.0, 1e300, np.inf, np.nan]),
    lambda_=st.sampled_from([0.0, 0.1]),
    gamma=st.sampled_from([0.0, 1.0]),
    seed=st.integers(0, 2**32 - 1),
)
def test_compiled_search_skips_no_candidate_over_empty_bins(
    features, bins, values, rows, outputs, leftover, lambda_, gamma, seed
) -> None:
    """Catches the compiled search's shortcut over empty bins (a threshold whose new left bin is empty
    takes the previous threshold's mean) choosing another winner than the numpy search: features
    taking a few values among many bins (as 24 two-valued features in 64 bins), the empty bins
    holding zeros or numbers an empty bin's statistics can keep (a -0.0 mean, or a huge or non-finite
    one after an overflow, whose deviations are no zeros)."""
    rng = np.random.default_rng(seed)
    width = bins + 1
    used = np.sort(rng.choice(np.arange(1, width), size=min(values, bins), replace=False))
    codes = used[rng.integers(0, used.size, size=(rows, features))]
    codes[rng.random(codes.shape) < 0.1] = 0  # some missing values
    index = (codes + np.arange(features) * width).ravel()
    columns = features * width
    stats = np.zeros((columns, outputs, 6))
    for k in range(outputs):
        g = rng.normal(size=rows) + rng.choice([0.0, 3.0])
        h = rng.uniform(0.0, 1.0, size=rows) * rng.choice([0.0, 1.0])
        stats[:, k] = block_stats(index, np.repeat(g, features), np.repeat(h, features), columns)
    empty = stats[:, 0, 0] == 0.0
    stats[empty & (rng.random(columns) < 0.3), :, rng.integers(1, 3)] = leftover
    grid = np.arange(columns).reshape(features, width)
    names = np.arange(features)
    n = float(rows)
    if outputs == 1:
        one = stats[:, 0]
        expected = best_numeric_planes(np.take(one.T, grid, axis=1), lambda_, gamma, n, names)
        assert same_candidates(best_numeric_compiled(one, grid, lambda_, gamma, n, names), expected)
    else:
        planes = np.take(stats.transpose(1, 2, 0), grid, axis=2)
        expected = best_numeric_outputs(planes, lambda_, gamma, n, names)
        assert same_candidates(best_numeric_compiled(stats, grid, lambda_, gamma, n, names), expected)


@settings(max_examples=150, deadline=None)
@given(
    features=st.integers(1, 6),
    bins=st.sampled_from([2, 8, 64]),
    held_rows=st.integers(0, 50),
    rows=st.integers(1, 120),
    outputs=st.sampled_from([1, 1, 2, 5]),
    seed=st.integers(0, 2**32 - 1),
)
def test_merge_block_is_block_stats_then_merge(features, bins, held_rows, rows, outputs, seed) -> None:
    """Catches a block merged with other bits than LeafLearner._merge_pending's numpy steps, for each output
    of a multi-output leaf alike: the block's sums in another order, or empty columns left untouched
    (merge turns their -0.0 means into +0.0, an infinity or a mean beyond 1e154 into NaN)."""
    rng = np.random.default_rng(seed)
    widths = np.full(features, bins + 1)
    offsets = np.concatenate([[0], np.cumsum(widths)]).astype(np.intp)
    columns = int(offsets[-1])
    shape = (columns, outputs, 6)
    held = leaf_statistics(rng, features, bins, held_rows, 0.2, outputs) if held_rows else np.zeros(shape)
    held[rng.random(columns) < 0.3, :, 1] = -0.0  # means of -0.0, as a block of zero gradients leaves
    # numbers that Chan's update of an empty block changes (not skipped where the block reached none)
    odd = rng.random(columns) < 0.05
    held[odd, :, rng.integers(0, 6)] = rng.choice([np.inf, -np.inf, np.nan, -0.0, 1e200, -3e160, 1e140])
    held_total = [np.array([3.0, -0.5 * k, 0.25, 1.0, 0.1, -0.2]) for k in range(outputs)]
    total = np.stack([merge(np.zeros(6), one) for one in held_total])
    codes = rng.integers(0, bins + 1, size=(rows, features)).astype(np.uint16)
    g = rng.normal(size=(rows, outputs)) * rng.choice([1.0, 1e-9, 1e9])
    h = rng.uniform(0.0, 0.25, size=(rows, outputs))
    # LeafLearner._merge_pending's numpy steps, output by output: one column per feature and code, then
    # the total
    index = np.zeros((rows, features + 1), dtype=np.intp)
    index[:, :-1] = codes
    index += offsets
    expected = []
    for k in range(outputs):
        g_k, h_k = np.repeat(g[:, k], features + 1), np.repeat(h[:, k], features + 1)
        block = block_stats(index.ravel(), g_k, h_k, columns + 1)
        expected.append(merge(np.concatenate([held[:, k], total[k][None]]), block))
    kernels.merge_block(held, total, codes, g, h, offsets)
    for k in range(outputs):
        assert np.array_equal(bits(held[:, k]), bits(expected[k][:-1]))
        assert np.array_equal(bits(total[k]), bits(expected[k][-1]))


@settings(max_examples=150, deadline=None)
@given(
    rows=st.integers(0, 120),
    outputs=st.sampled_from([1, 1, 2, 5]),
    held=st.sampled_from(["empty", "numbers", "odd"]),
    seed=st.integers(0, 2**32 - 1),
)
def test_merge_total_is_block_stats_then_merge(rows, outputs, held, seed) -> None:
    """Catches a block merged into a total (a leaf that gathers no split statistics) with other bits than
    LeafLearner._merge_total's numpy steps: the sums in another order, or an empty block not merged
    (merge turns a -0.0 mean into +0.0, an infinity into NaN)."""
    rng = np.random.default_rng(seed)
    total = np.zeros((outputs, 6))
    if held == "numbers":
        total = np.stack(
            [merge(np.zeros(6), np.array([3.0, -0.5 * k, 0.25, 1.0, 0.1, -0.2])) for k in range(outputs)]
        )
    elif held == "odd":
        total[:, 1] = -0.0
        total[:, rng.integers(0, 6)] = rng.choice([np.inf, -np.inf, np.nan, 1e200])
    g = rng.normal(size=(rows, outputs)) * rng.choice([1.0, 1e-9, 1e9])
    h = rng.uniform(0.0, 0.25, size=(rows, outputs))
    g[rng.random((rows, outputs)) < 0.2] = 0.0  # (a bagging weight of 0)
    # LeafLearner._merge_total's numpy steps: output after output, each output's instances in order
    index = np.repeat(np.arange(outputs), rows)
    block = block_stats(index, g.T.ravel(), h.T.ravel(), outputs)
    expected = merge(total, block)
    kernels.merge_total(total, g, h)
    assert np.array_equal(bits(total), bits(expected))


@settings(max_examples=100, deadline=None)
@given(
    features=st.integers(1, 7),
    nominal=st.booleans(),
    outputs=st.sampled_from([2, 3, 9]),
    rows=st.integers(1, 60),
    zero_h=st.sampled_from([None, 0, 1]),
    scale=st.sampled_from([1.0, 1e-150, 1e6]),
    seed=st.integers(0, 2**32 - 1),
)
def test_linear_steps_are_each_outputs_numpy_newton_step(
    features, nominal, outputs, rows, zero_h, scale, seed
) -> None:
    """Catches a multi-output leaf's compiled linear steps (`linear_steps`, its outputs side by side)
    giving any output other bits than MultiOutputLearner's numpy steps: its weights and value, with
    outputs whose sum of h is zero (no step), tiny and large gradients, and a nominal feature
    beside the numeric ones (not in the linear term)."""
    rng = np.random.default_rng(seed)
    names = [*(f"x{j}" for j in range(features)), *(["c"] if nominal else [])]
    space = FeatureSpace(bins=16, warm_up=5, nominal=["c"] if nominal else [])
    for row in rng.uniform(size=(20, features)).tolist():
        space.encode_one(dict(zip(names, [*row, "a"])), learn=True)
    params = Params(0.1, 200, 0.1, 0.0, None, leaf_model="linear")
    tree = MultiOutputTree(params, Layout(space), outputs=outputs)
    width = tree.layout.n_features
    tree.reserve_pending(rows)
    tree.pending_codes[0, :rows] = rng.integers(0, 17, size=(rows, width))
    tree.pending_g[0, :rows] = rng.normal(size=(rows, outputs)) * scale
    tree.pending_h[0, :rows] = rng.uniform(0.0, 0.25, size=(rows, outputs)) * scale
    if zero_h is not None:
        tree.pending_h[0, :rows, zero_h] = 0.0
    tree.pending_n[0] = rows
    tree.weights[0] = rng.normal(size=(outputs, width))
    tree.value[0] = rng.normal(size=outputs)
    assert_newton_steps_agree(tree)


@settings(max_examples=60, deadline=None)
@given(
    classes=st.sampled_from([0, 2, 3]),
    bins=st.sampled_from([4, 8, 64]),
    groups=st.integers(1, 64),
    feature=st.integers(0, 2),
    seed=st.integers(0, 2**32 - 1),
)
def test_a_regrid_merges_the_bins_as_numpy_merges_them(classes, bins, groups, feature, seed) -> None:
    """Catches Tree.regrid's compiled merges (`regrid_bins`) giving a slot's statistics other bits than
    its numpy merges: old bins merged into their new bin in another order, a new bin left unwritten, or
    another feature's columns touched (one-output trees and a multiclass member's, -0.0 means too)."""
    rng = np.random.default_rng(seed)
    X = rng.uniform(size=(400, 3))
    if classes:
        model: Any = sgt.BoostedClassifier(warm_up=20, bins=bins, n_members=2)
        y: Any = (X[:, 0] * classes).astype(int).tolist()
    else:
        model, y = sgt.SGTRegressor(warm_up=20, bins=bins), (X[:, 0] + X[:, 1]).tolist()
    model.predict_learn_many(X, y)
    trees = [t for m in getattr(model, "_members", []) for t in m.trees] or model._trees
    cut = np.sort(rng.choice(np.arange(1, bins), size=min(groups, bins) - 1, replace=False))
    mapping = np.concatenate([[0], 1 + np.searchsorted(cut, np.arange(bins), side="right")])
    regrid = Regrid(0, feature, mapping, 1, (0.0, 1.0), (0.0, 2.0))
    for tree in trees:
        for held in tree.stats:
            held[rng.random(held.shape[0]) < 0.2, ..., 1] = -0.0
        by_numpy = copy.deepcopy(tree)
        tree.regrid(regrid)
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(kernels, "ENABLED", False)
            by_numpy.regrid(regrid)
        for a, b in zip(tree.stats, by_numpy.stats, strict=True):
            assert np.array_equal(bits(a), bits(b))


@settings(max_examples=100, deadline=None)
@given(
    trees=st.sampled_from([1, 3]),
    choice=st.booleans(),
    saved=st.sampled_from(["none", "empty", "means"]),
    rows=st.integers(1, 80),
    scale=st.sampled_from([1.0, 1e-9, 1e300]),
    seed=st.integers(0, 2**32 - 1),
)
def test_the_compiled_rows_serve_as_the_python_walk(trees, choice, saved, rows, scale, seed) -> None:
    """Catches sgt.level_rows' compiled walk (residual levels and the tree choice) serving a row or
    leaving a level or an error with other bits than ResidualLevel's and fade_errors' Python: levels
    saved before the target means, without any learned yet and with them, unlearned rows, and
    predictions that overflow or are not numbers."""
    rng = np.random.default_rng(seed)
    linked = rng.normal(size=(rows, trees)) * scale
    linked[rng.random(linked.shape) < 0.05] = rng.choice([np.inf, np.nan, 1e308])
    targets = rng.normal(size=rows) * scale
    learn = rng.random(rows) < 0.8

    def level() -> ResidualLevel:
        if saved == "none":
            return ResidualLevel(rng.normal(size=4).tolist(), rng.uniform(size=4).tolist(), means=None)
        means = rng.normal(size=4).tolist() if saved == "means" else []
        return ResidualLevel(
            rng.normal(size=4).tolist(), rng.uniform(size=4).tolist(), means, rng.uniform(size=4).tolist()
        )

    levels = [level() for _ in range(trees)]
    errors = rng.uniform(size=trees).tolist() if choice else None
    if not choice:
        linked = linked[:, :1]
        levels = levels[:1]
    py_levels, py_errors = copy.deepcopy(levels), copy.deepcopy(errors)
    served = level_rows.served_rows(linked, targets, learn, levels, errors, AUTO_FADING, _LARGEST)
    expected = []
    for row, y, learned in zip(linked.tolist(), targets.tolist(), learn.tolist(), strict=True):
        corrected = [lv.corrected(p) for lv, p in zip(py_levels, row, strict=True)]
        expected.append(corrected[0 if py_errors is None else least_error(py_errors)])
        if learned:
            if py_errors is not None:
                fade_errors(py_errors, corrected, y, AUTO_FADING)
            for lv, p in zip(py_levels, row, strict=True):
                lv.learn(p, y)
    assert served is not None
    assert np.array_equal(bits(served), bits(np.array(expected)))
    assert errors == py_errors or np.array_equal(bits(np.array(errors)), bits(np.array(py_errors)))
    assert [bits(np.array(lv.levels + lv.errors)).tolist() for lv in levels] == [
        bits(np.array(lv.levels + lv.errors)).tolist() for lv in py_levels
    ]
    assert [(lv.means, lv.mean_errors) for lv in levels] == [
        (lv.means, lv.mean_errors) for lv in py_levels
    ] or all(
        np.array_equal(
            bits(np.array((a.means or []) + a.mean_errors)), bits(np.array((b.means or []) + b.mean_errors))
        )
        for a, b in zip(levels, py_levels, strict=True)
    )


def run(model, X, y, batch: int) -> tuple[bytes, bytes]:
    """Every prediction made before learning (predict_learn_many, in batches) and the saved model."""
    outputs = [
        np.asarray(model.predict_learn_many(X[i : i + batch], y[i : i + batch]))
        for i in range(0, len(X), batch)
    ]
    return b"".join(o.tobytes() for o in outputs), model.to_bytes()


MODELS = {
    "classifier": (lambda: sgt.SGTClassifier(warm_up=100), lambda: threshold_stream(4000)),
    "linear regressor": (
        lambda: sgt.SGTRegressor(warm_up=100, leaf_model="linear"),
        lambda: step_regression_stream(4000, offset=1e3),
    ),
    "adaptive regressor": (
        lambda: sgt.SGTRegressor(warm_up=100, leaf_model="adaptive"),
        lambda: step_regression_stream(4000, offset=1e3),
    ),
    "boosted, binary": (lambda: sgt.BoostedClassifier(warm_up=100, seed=1), lambda: threshold_stream(4000)),
    "boosted, three classes": (  # multi-output members (alone: the side models run in the binary case)
        lambda: sgt.BoostedClassifier(warm_up=100, seed=1, **NO_SIDE_MODELS),
        lambda: multiclass_stream(4000),
    ),
    "boosted regressor": (
        lambda: sgt.BoostedRegressor(warm_up=100, seed=1),
        lambda: step_regression_stream(4000),
    ),
}


@pytest.mark.parametrize("name", sorted(MODELS))
def test_models_learn_the_same_bits_with_and_without_the_kernels(name, monkeypatch) -> None:
    """Catches a kernel path that changes what a model predicts or saves: the numpy path and the
    kernels' give the same predictions and the same bytes, and a model saved by either continues
    in the other as in itself."""
    make, stream = MODELS[name]
    X, y = stream()
    half = len(X) // 2
    monkeypatch.setattr(kernels, "ENABLED", True)
    with_kernels = run(make(), X, y, 250)
    monkeypatch.setattr(kernels, "ENABLED", False)
    without = run(make(), X, y, 250)
    assert with_kernels == without
    first = make()
    run(first, X[:half], y[:half], 500)
    saved = first.to_bytes()
    monkeypatch.setattr(kernels, "ENABLED", True)  # saved without the kernels, continued with them
    continued = run(type(first).from_bytes(saved), X[half:], y[half:], 500)
    monkeypatch.setattr(kernels, "ENABLED", False)
    assert continued == run(type(first).from_bytes(saved), X[half:], y[half:], 500)


@pytest.mark.parametrize(
    ("environment", "blocked", "expected"),
    [({}, False, kernels.numba is not None), ({"SGT_KERNELS": "0"}, False, False), ({}, True, False)],
    ids=["default", "SGT_KERNELS=0", "without numba"],
)
def test_the_kernels_are_used_where_numba_is_and_not_switched_off(environment, blocked, expected) -> None:
    """Catches sgt failing to import without numba, or using the kernels against SGT_KERNELS=0; in a
    fresh interpreter, since the choice is made when sgt is imported (blocking numba's import there
    stands for an environment without it)."""
    script = (
        ("import sys; sys.modules['numba'] = None\n" if blocked else "")
        + "import sgt\nfrom sgt import kernels\n"
        + "from tests.sgt.sgt_testkit import threshold_stream\n"
        + "X, y = threshold_stream(2000)\n"
        + "model = sgt.SGTClassifier(warm_up=100)\nmodel.learn_many(X, y)\n"
        + "print(kernels.ENABLED, model.n_nodes > 1)\n"
    )
    env = {**os.environ, **environment}
    if not environment:
        env.pop("SGT_KERNELS", None)
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=env, check=True
    )
    assert result.stdout.split() == [str(expected), "True"]


class _Uncacheable:
    """Stands for numba where no cache location is writable: njit(cache=True) raises as numba does."""

    def njit(self, function=None, *, cache=False, error_model="python"):
        if cache:
            raise RuntimeError("cannot cache function 'f': no locator available for file 'f.py'")

        def compile_(f):
            f.error_model = error_model  # what numba would compile it under
            return f

        return compile_ if function is None else compile_(function)


def test_kernels_compile_without_a_cache_where_none_is_writable(monkeypatch) -> None:
    """Catches `import sgt` failing on a read-only install with no writable cache directory: the
    kernels are then compiled without caching (a pure unit test: numba stood in for), and under the
    same error model as the cached ones (numpy's: a division by zero gives inf or NaN)."""
    monkeypatch.setattr(compiling, "numba", _Uncacheable())  # where `compiled` reads it

    def double(x: float) -> float:
        return 2.0 * x

    kernel = compiling.compiled(double)
    assert kernel(2.0) == 4.0
    assert kernel.error_model == "numpy"


@settings(deadline=None)  # the first example compiles the kernels
@given(
    n_rows=st.integers(1, 80),
    n_nodes=st.integers(1, 6),
    learned_share=st.sampled_from([0.0, 0.5, 1.0]),
    seed=st.integers(0, 2**32 - 1),
)
def test_the_event_scans_are_leafwise_numpy_code(n_rows, n_nodes, learned_share, seed) -> None:
    """Catches `node_rows_after` or `next_event` giving other rows than sgt.leafwise's numpy code:
    after an event at a row, the node's later rows, and the row where their nodes' next event may
    fall (leaves with part of a block pending, branches needing one row, rows not learned skipped)."""
    from types import SimpleNamespace

    from sgt import leafwise

    rng = np.random.default_rng(seed)
    nodes = rng.integers(0, n_nodes, size=n_rows).astype(np.int32)
    learn = rng.random(n_rows) < learned_share
    block = rng.integers(1, 6, size=n_nodes).astype(np.int64)
    tree = SimpleNamespace(
        feature=np.where(rng.random(n_nodes) < 0.3, 2, -1).astype(np.int32),
        slot=rng.permutation(n_nodes).astype(np.int32),
        block=block,
        pending_n=(rng.integers(0, 6, size=n_nodes) % block).astype(np.int64),
    )
    run = SimpleNamespace(nodes=nodes, learn=learn)
    stop = int(rng.integers(n_rows // 2, n_rows + 1))
    row, node = int(rng.integers(0, n_rows)), int(rng.integers(0, n_nodes))
    rest = np.flatnonzero(rng.random(n_rows) < 0.6)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(kernels, "ENABLED", False)
        expected = (
            row + 1 + np.flatnonzero(nodes[row + 1 :] == node),
            leafwise._horizon(tree, rest, run, stop),
        )
        patch.setattr(kernels, "ENABLED", True)
        assert leafwise._horizon(tree, rest, run, stop) == expected[1]
    later = kernels.node_rows_after(nodes, row, node)
    assert later.tolist() == expected[0].tolist()
    assert later.dtype == expected[0].dtype
    args = (rest, learn, nodes, tree.feature, tree.slot, tree.block, tree.pending_n, stop)
    assert kernels.next_event(*args) == expected[1]


@settings(deadline=None)  # the first example compiles the kernel
@given(
    n_rows=st.integers(1, 80),
    n_nodes=st.integers(1, 6),
    learned_share=st.sampled_from([0.0, 0.5, 1.0]),
    need=st.integers(1, 8),
    seed=st.integers(0, 2**32 - 1),
)
def test_the_scan_after_a_leaf_that_stays_is_leafwise_numpy_code(
    n_rows, n_nodes, learned_share, need, seed
) -> None:
    """Catches `leaf_rows_after` giving other rows or another next event than sgt.leafwise's numpy code
    after an attempt that left its leaf a leaf: the leaf's later rows before the run's stop, and the
    row of its next event (the `need`-th learned one, rows not learned skipped; the stop if none)."""
    from types import SimpleNamespace

    from sgt import leafwise

    rng = np.random.default_rng(seed)
    nodes = rng.integers(0, n_nodes, size=n_rows).astype(np.int32)
    learn = rng.random(n_rows) < learned_share
    node = int(rng.integers(0, n_nodes))
    tree = SimpleNamespace(
        feature=np.full(n_nodes, -1, dtype=np.int32),  # (leaves, each in its own slot)
        slot=np.arange(n_nodes, dtype=np.int32),
        block=np.full(n_nodes, need, dtype=np.int64),
        pending_n=np.zeros(n_nodes, dtype=np.int64),
    )
    run = SimpleNamespace(nodes=nodes, learn=learn)
    stop = int(rng.integers(n_rows // 2, n_rows + 1))
    row = int(rng.integers(0, n_rows))
    later = row + 1 + np.flatnonzero(nodes[row + 1 :] == node)
    rest = later[later < stop]
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(kernels, "ENABLED", False)
        expected = leafwise._horizon(tree, rest, run, stop) if rest.size else stop
    out = np.full(n_rows + 3, -7, dtype=np.intp)  # (rows written after 3 held there already)
    count, event = kernels.leaf_rows_after(nodes, learn, row, node, stop, *arrays(tree), out, 3)
    assert out[3:count].tolist() == rest.tolist() and out[:3].tolist() == [-7] * 3
    assert count == 3 + rest.size
    assert event == expected
    if need > 1:  # the need read from the leaf's slot: its block less what it holds pending
        tree.block[node], tree.pending_n[node] = need + 2, 2
        assert kernels.leaf_rows_after(nodes, learn, row, node, stop, *arrays(tree), out, 3)[1] == event


def arrays(tree: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    return tree.slot, tree.block, tree.pending_n
