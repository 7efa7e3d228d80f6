"""Split candidates: worked vectors, a brute-force check of every candidate, and the defects A1, A2, A3,
A6, M3 and R1 of the public SGT implementations (described in test_regressions.py) as regression tests."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sgt.split import best_nominal, best_numeric, f_test, null_candidate, pooled_variance
from sgt.stats import block_stats

LAMBDA, GAMMA = 0.1, 1.0

# a worked vector: one ordinal feature with 4 bins, h = 1 throughout (expected values by hand)
VECTOR_G = np.array([-1.2, -0.8, -1.1, -0.9, -1.0, 0.9, 1.1, 1.3, 0.7, 1.0])
VECTOR_BINS = np.array([1, 1, 2, 2, 2, 3, 3, 4, 4, 4])  # code 0 means missing


def vector_block() -> np.ndarray:
    return block_stats(VECTOR_BINS, VECTOR_G, np.ones(10), 5)


def test_pooled_variance_reference_vector() -> None:
    # (m = 2, s2 = 1, n = 5) with (m = 3, s2 = 4, n = 3): 1.982143 (A's formula gives 5.714286, bug A1)
    n = np.array([5.0, 3.0])
    mean, variance = pooled_variance(n, np.array([2.0, 3.0]), (n - 1) * np.array([1.0, 4.0]))
    assert mean == pytest.approx(2.375)
    assert variance == pytest.approx(1.982143, abs=5e-7)


def test_end_to_end_split_vector() -> None:
    best = best_numeric(vector_block()[None], LAMBDA, GAMMA, n=10.0)
    assert best is not None
    assert best.threshold == 1
    np.testing.assert_allclose(best.deltas, [0.9090909091, -0.9090909091], atol=1e-10)
    assert best.mean == pytest.approx(-0.2958677686, abs=1e-10)  # raw -0.4958677686 + 2 gamma / n
    assert best.variance == pytest.approx(0.0275482094, abs=1e-10)  # A1's formula gives 0.8517
    assert 10 * best.mean**2 / best.variance == pytest.approx(31.776, abs=1e-3)
    assert f_test(best.mean, best.variance, 10.0) == pytest.approx(3.19e-4, rel=2e-3)  # A1: 0.3372


def brute_force_numeric(bins, g, h, n_bins, t):
    """Mean (penalised) and variance of per-instance loss changes of threshold t, from the instances."""
    known = bins > 0
    left = known & (bins <= t + 1)
    right = known & (bins > t + 1)
    if not left.any() or not right.any():
        return math.inf, math.nan
    missing_left = left.sum() >= right.sum()
    left = left | (~known & missing_left)
    right = right | (~known & ~missing_left)
    loss = np.empty(bins.size)
    for side in (left, right):
        delta = -g[side].mean() / (h[side].mean() + LAMBDA)
        loss[side] = g[side] * delta + 0.5 * h[side] * delta * delta
    return loss.mean() + GAMMA * 2 / bins.size, loss.var(ddof=1)


instances = st.integers(4, 60).flatmap(
    lambda n: st.tuples(
        st.lists(st.integers(0, 6), min_size=n, max_size=n),
        st.lists(st.floats(-3, 3), min_size=n, max_size=n),
        st.lists(st.floats(0.01, 2), min_size=n, max_size=n),
    )
)


@settings(max_examples=150, deadline=None)
@given(instances)
def test_numeric_candidates_match_brute_force(data) -> None:
    """Catches A1 (pooled variance), A3 (penalised vs raw comparison) and R1 (accumulated left side)."""
    bins, g, h = (np.array(v) for v in data)
    n_bins = 6
    block = block_stats(bins, g, h, n_bins + 1)
    best = best_numeric(block[None], LAMBDA, GAMMA, n=float(bins.size))
    expected = [brute_force_numeric(bins, g, h, n_bins, t) for t in range(n_bins - 1)]
    means = [m for m, _ in expected]
    if not np.isfinite(min(means)):
        assert best is None
        return
    assert best is not None
    t = int(np.argmin(means))
    assert best.mean == pytest.approx(means[t], rel=1e-9, abs=1e-12)
    assert best.threshold == t or best.mean == pytest.approx(means[best.threshold], rel=1e-12, abs=1e-15)
    assert best.variance == pytest.approx(expected[best.threshold][1], rel=1e-7, abs=1e-12)


features = st.integers(4, 60).flatmap(
    lambda n: st.tuples(
        st.lists(st.lists(st.integers(0, 6), min_size=n, max_size=n), min_size=2, max_size=4),
        st.lists(st.floats(-3, 3), min_size=n, max_size=n),
        st.lists(st.floats(0.01, 2), min_size=n, max_size=n),
    )
)


@settings(max_examples=100, deadline=None)
@given(features)
def test_the_winner_over_several_features_matches_brute_force(data) -> None:
    """best_numeric scores all features at once: its winner has the lowest brute-force mean of any
    feature and threshold, and that candidate's variance (ties: the test below)."""
    columns, g, h = (np.array(v) for v in data)
    blocks = np.stack([block_stats(bins, g, h, 7) for bins in columns])
    names = np.arange(columns.shape[0]) + 10
    best = best_numeric(blocks, LAMBDA, GAMMA, n=float(g.size), features=names)
    expected = [[brute_force_numeric(bins, g, h, 6, t) for t in range(5)] for bins in columns]
    means = np.array([[m for m, _ in row] for row in expected])
    if not np.isfinite(means.min()):
        assert best is None
        return
    assert best is not None
    assert best.mean == pytest.approx(means.min(), rel=1e-9, abs=1e-12)
    feature, threshold = best.feature - 10, best.threshold
    assert means[feature, threshold] == pytest.approx(means.min(), rel=1e-12, abs=1e-15)
    assert best.variance == pytest.approx(expected[feature][threshold][1], rel=1e-7, abs=1e-12)


def test_thresholds_whose_mean_is_not_a_number_are_not_candidates() -> None:
    # a bin with a NaN mean gradient (inf - inf upstream) poisons every threshold of its feature;
    # the other feature's best split must still win, with a finite mean
    poisoned = vector_block()
    poisoned[2, 1] = np.nan
    best = best_numeric(np.stack([poisoned, vector_block()]), LAMBDA, GAMMA, n=10.0)
    assert best is not None and best.feature == 1 and math.isfinite(best.mean)
    assert best_numeric(poisoned[None], LAMBDA, GAMMA, n=10.0) is None


def test_equal_features_tie_to_the_earlier_one() -> None:
    block = vector_block()
    best = best_numeric(np.stack([block, block, block]), LAMBDA, GAMMA, n=10.0, features=np.array([4, 7, 9]))
    assert best is not None and best.feature == 4 and best.threshold == 1


@settings(max_examples=100, deadline=None)
@given(instances)
def test_nominal_candidate_matches_brute_force(data) -> None:
    """A2: each child's deviation is taken from the final pooled mean."""
    codes, g, h = (np.array(v) for v in data)
    block = block_stats(codes, g, h, 7)
    candidate = best_nominal(block, LAMBDA, GAMMA, n=float(codes.size), feature=0)
    present = sorted(set(codes[codes > 0].tolist()))
    if len(present) < 2:
        assert candidate is None
        return
    sizes = [(codes == c).sum() for c in present]
    target = present[int(np.argmax(sizes))]
    groups = np.where(codes == 0, target, codes)
    loss = np.empty(codes.size)
    for c in present:
        side = groups == c
        delta = -g[side].mean() / (h[side].mean() + LAMBDA)
        loss[side] = g[side] * delta + 0.5 * h[side] * delta * delta
    assert candidate is not None
    assert list(candidate.categories) == present
    assert candidate.mean == pytest.approx(
        loss.mean() + GAMMA * len(present) / codes.size, rel=1e-9, abs=1e-12
    )
    assert candidate.variance == pytest.approx(loss.var(ddof=1), rel=1e-7, abs=1e-12)


def test_a3_threshold_choice_compares_like_with_like() -> None:
    # two thresholds whose raw means differ by less than 2 gamma / n: the better one must win
    block = vector_block()
    best = best_numeric(block[None], LAMBDA, GAMMA, n=10.0)
    raw = [brute_force_numeric(VECTOR_BINS, VECTOR_G, np.ones(10), 4, t)[0] for t in range(3)]
    assert best.threshold == int(np.argmin(raw))


def test_a6_a_child_with_one_instance_can_still_split() -> None:
    # 199 instances with g near -1 and one with g = +5 alone in its bin: A gave that child an infinite
    # variance, so this best candidate could never pass and blocked the whole attempt
    bins = np.array([1] * 199 + [2])
    g = np.r_[np.linspace(-1.2, -0.8, 199), [5.0]]
    best = best_numeric(block_stats(bins, g, np.ones(200), 3)[None], LAMBDA, 0.0, n=200.0)
    assert best is not None and math.isfinite(best.variance)
    assert (
        best.mean
        < null_candidate(block_stats(np.zeros(200, dtype=np.intp), g, np.ones(200), 1)[0], LAMBDA).mean
    )
    assert f_test(best.mean, best.variance, 200.0) < 1e-7


def test_identical_loss_changes_are_certain_evidence_whatever_their_rounding() -> None:
    # log loss at logit 0 (g = +-0.5, h = 0.25), split by label: every instance's loss change is the same
    # (g^2 is), so the exact variance is 0 and the test is certain (p = 0). The centred sums round that 0
    # to about 1e-17 here; against the mean's square (0.14) it gives F near 1e17 and p near 1e-49, the
    # same decision for any delta above that. Rounding could decide only where the mean is rounding too:
    # a split's mean holds its penalty gamma |Q| / n, and the null candidate's is that small only when
    # mean g is, which keeps its F (at most n (mean g)^2 / var g where h is constant) small as well
    g = np.array([0.5] + [-0.5] * 6)
    bins = np.array([1] + [2] * 6)
    best = best_numeric(block_stats(bins, g, np.full(7, 0.25), 3)[None], LAMBDA, 0.3, n=7.0)
    assert best is not None and best.threshold == 0
    step = 0.5 / (0.25 + LAMBDA)
    assert best.mean == pytest.approx(-0.5 * step + 0.5 * 0.25 * step**2 + 0.3 * 2 / 7, rel=1e-12)
    assert 0.0 <= best.variance < 1e-15 * best.mean**2
    assert f_test(best.mean, best.variance, 7.0) < 1e-40


def test_m3_one_or_no_instance_never_gives_nan() -> None:
    one = block_stats(np.zeros(1, dtype=np.intp), np.array([2.0]), np.array([1.0]), 1)[0]
    candidate = null_candidate(one, LAMBDA)
    assert f_test(candidate.mean, candidate.variance, 1.0) == 1.0  # no evidence from one instance
    assert f_test(-1.0, 0.0, 10.0) == 0.0  # zero variance, negative mean: certain
    assert f_test(0.0, 0.0, 10.0) == 1.0


def test_degenerate_thresholds_are_not_candidates() -> None:
    # every known value in one bin: no threshold separates anything (R1's empty right children)
    bins = np.array([3] * 8 + [0, 0])
    block = block_stats(bins, np.linspace(-1, 1, 10), np.ones(10), 5)
    assert best_numeric(block[None], LAMBDA, GAMMA, n=10.0) is None


def test_f_test_keeps_precision_for_huge_statistics() -> None:
    p = f_test(-1.0, 1e-6, 1000.0)
    assert 0.0 <= p < 1e-100
