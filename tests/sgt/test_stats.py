"""Gradient statistics: block computation, Chan merges, stability under large offsets."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from sgt.stats import CGH, M2G, M2H, MG, MH, N, block_stats, merge


def welford(pairs: list[tuple[float, float]]) -> np.ndarray:
    """Reference: Welford's one-at-a-time update of means and centred (co)moments."""
    n = mg = mh = m2g = m2h = c = 0.0
    for g, h in pairs:
        n += 1
        dg0, dh0 = g - mg, h - mh
        mg += dg0 / n
        mh += dh0 / n
        m2g += dg0 * (g - mg)
        m2h += dh0 * (h - mh)
        c += dg0 * (h - mh)
    return np.array([n, mg, mh, m2g, m2h, c])


def stats_of(pairs: list[tuple[float, float]]) -> np.ndarray:
    g = np.array([p[0] for p in pairs])
    h = np.array([p[1] for p in pairs])
    return block_stats(np.zeros(len(pairs), dtype=np.intp), g, h, 1)[0]


def test_reference_vector_three_observations() -> None:
    # by hand: (0.5, 1), (1.0, 1), (1.5, 1) with delta = -1 give mu = -0.5, v = 0.25
    s = stats_of([(0.5, 1.0), (1.0, 1.0), (1.5, 1.0)])
    delta = -1.0
    mu = s[MG] * delta + 0.5 * s[MH] * delta**2
    variance = (delta**2 * s[M2G] + 0.25 * delta**4 * s[M2H] + delta**3 * s[CGH]) / (s[N] - 1)
    assert mu == -0.5
    assert variance == 0.25


def test_merge_equals_adding_all_observations_one_by_one() -> None:
    a = [(0.5, 0.8), (1.0, 1.0), (1.5, 1.2)]
    b = [(0.5, 1.2), (1.0, 1.0), (1.5, 0.9)]
    merged = merge(stats_of(a), stats_of(b))
    np.testing.assert_allclose(merged, welford(a + b), rtol=1e-12, atol=1e-15)


def test_merging_into_empty_statistics_is_exact() -> None:
    s = stats_of([(0.3, 0.2), (-1.7, 0.9)])
    assert np.array_equal(merge(np.zeros(6), s), s)
    assert np.array_equal(merge(s, np.zeros(6)), s)


def test_block_stats_groups_by_index_in_order() -> None:
    index = np.array([2, 0, 2, 2])
    g = np.array([1.0, 5.0, 2.0, 3.0])
    h = np.array([0.5, 0.5, 1.0, 1.5])
    out = block_stats(index, g, h, 3)
    np.testing.assert_allclose(out[2], welford([(1.0, 0.5), (2.0, 1.0), (3.0, 1.5)]), rtol=1e-12)
    np.testing.assert_array_equal(out[1], np.zeros(6))
    assert out[0, N] == 1 and out[0, MG] == 5.0 and out[0, M2G] == 0.0  # one instance: zero spread


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.tuples(st.floats(-50, 50), st.floats(0, 5)), min_size=1, max_size=40),
    st.integers(0, 40),
)
def test_any_split_then_merge_matches_welford(pairs: list[tuple[float, float]], cut: int) -> None:
    cut = min(cut, len(pairs))
    left = stats_of(pairs[:cut]) if cut else np.zeros(6)
    right = stats_of(pairs[cut:]) if cut < len(pairs) else np.zeros(6)
    np.testing.assert_allclose(merge(left, right), welford(pairs), rtol=1e-9, atol=1e-9)


def test_large_offsets_keep_the_spread() -> None:
    # regression targets around 1e6 give gradients around -1e6 with unit spread
    rng = np.random.default_rng(0)
    g = -1e6 + rng.normal(size=4000)
    h = np.ones(4000)
    blocks = [
        block_stats(np.zeros(200, dtype=np.intp), g[i : i + 200], h[i : i + 200], 1)[0]
        for i in range(0, 4000, 200)
    ]
    total = blocks[0]
    for block in blocks[1:]:
        total = merge(total, block)
    exact = np.sum((g - g.mean()) ** 2)
    assert abs(total[M2G] - exact) / exact < 1e-8
    assert total[M2H] == 0.0
