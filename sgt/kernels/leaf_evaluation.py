"""A leaf's whole evaluation in one compiled call (`evaluate_leaf`): the Newton step, the merge, the
null candidate and the best numeric split, for LeafLearner._evaluate_compiled; and that of a constant
leaf at the depth bound (`evaluate_bound`: the merge into its total, the null candidate), for
LeafLearner._evaluate_bound.

A boosted member's attempt, most of its learning time, then pays one call's fixed cost instead of
four and their Python around them; both return floats (not an array, which costs its allocation and
its conversion: measured, an array handed back costs 0.55 us more than a tuple of floats, and its
`tolist` more). It runs the kernels of sgt.kernels.leaf_steps and
sgt.kernels.split_search, so it gives their bits (a zero pivot in the Newton step included: inf and NaN).
"""

from __future__ import annotations

import numpy as np

from sgt.kernels.compiling import compiled
from sgt.kernels.leaf_steps import linear_newton, merge_block, merge_output_total
from sgt.kernels.split_search import _group_loss, _winner_variance, numeric_search, numeric_winner

__all__ = ["evaluate_bound", "evaluate_leaf"]


@compiled
def evaluate_leaf(
    node: int,
    slot: int,
    step_linear: bool,
    search: bool,
    pending_codes: np.ndarray,
    pending_g: np.ndarray,
    pending_h: np.ndarray,
    pending_n: np.ndarray,
    numeric: np.ndarray,
    inputs: np.ndarray,
    first: np.ndarray,
    second: np.ndarray,
    pair_of: np.ndarray,
    linear_lambda: float,
    weights: np.ndarray,
    value: np.ndarray,
    stats: np.ndarray,
    total: np.ndarray,
    offsets: np.ndarray,
    columns: np.ndarray,
    lambda_: float,
    gamma: float,
) -> tuple[float, float, float, float, float, float, float, float, float, float]:
    """The first half of the attempt of an active leaf of a one-output tree with constant or linear
    leaves, numeric features only and no linear gate or feature subspaces, as LeafLearner.evaluate
    does it with the kernels, in one call: the linear term's Newton step (`step_linear`; `linear_newton`,
    applied as LinearTermSteps._linear_step applies it: w -= s and value += s . c, the products added in
    order, unless the sum of h is not positive or the step overflowed), the merge of the block
    (`merge_block`), the null candidate (sgt.split.null_candidate), and, with `search` (the leaf may
    split), the best numeric split (`numeric_search`, `numeric_winner` and the winner's variance). The
    block is emptied (`pending_n[slot] = 0`).

    The block is the slot's first `pending_n[slot]` rows of the tree's `pending_codes` [slots, rows, F]
    (`codes[:, j]` of numeric feature j read through `numeric`), `pending_g` and `pending_h` [slots,
    rows]; `weights` [nodes, features] and `value` [nodes] the tree's, `stats` [columns, 1, 6] the
    slot's statistics and `total` [slots, 6] the tree's totals. Returns, as floats: the null
    candidate's delta, mean and variance; the split's mean (+inf where no split is found), feature
    index among the numeric features, threshold, variance, left and right steps, and 1.0 if the
    missing values go left (NaN for those of no split).
    """
    size = pending_n[slot]
    codes, g, h = pending_codes[slot, :size], pending_g[slot, :size, None], pending_h[slot, :size, None]
    if step_linear and numeric.size:
        h_sum, centre, _, step = linear_newton(
            codes, numeric, inputs, g[:, 0], h[:, 0], first, second, pair_of, linear_lambda
        )
        if h_sum > 0.0 and np.all(np.isfinite(step)):
            for j in range(numeric.size):
                weights[node, numeric[j]] -= step[j]
            shift = step[0] * centre[0]
            for j in range(1, numeric.size):
                shift += step[j] * centre[j]
            value[node] += shift
    held = total[slot : slot + 1]
    merge_block(stats, held, codes, g, h, offsets)
    pending_n[slot] = 0
    delta, mean, variance = _null_of(held[0], lambda_)
    split_mean = np.inf
    f = t = split_variance = left = right = to_left = np.nan
    if search and numeric.size:
        best, feature, threshold = numeric_search(stats, columns, lambda_, gamma, held[0, 0])
        if np.isfinite(best):
            winner = numeric_winner(stats[:, 0], columns, feature, threshold, lambda_)
            split_mean, f, t = best, float(feature), float(threshold)
            split_variance = _winner_variance(winner, lambda_)
            left, right, to_left = winner[15], winner[16], winner[19]
    return delta, mean, variance, split_mean, f, t, split_variance, left, right, to_left


@compiled
def evaluate_bound(
    total: np.ndarray,
    pending_g: np.ndarray,
    pending_h: np.ndarray,
    pending_n: np.ndarray,
    slot: int,
    lambda_: float,
) -> tuple[float, float, float]:
    """The first half of the attempt of a constant leaf of a one-output tree at the depth bound, as
    LeafLearner.evaluate does it with the kernels (its `_merge_total`, then `_null_candidate`): the
    merge of the slot's block (its first `pending_n[slot]` rows of `pending_g` and `pending_h` [slots,
    rows]) into its total alone (`merge_output_total`; `total` [slots, 6] the tree's), the block emptied,
    and the null candidate's delta, mean and variance (sgt.split.null_candidate's)."""
    size = pending_n[slot]
    merge_output_total(total[slot], pending_g[slot, :size], pending_h[slot, :size])
    pending_n[slot] = 0
    return _null_of(total[slot], lambda_)


@compiled
def _null_of(total: np.ndarray, lambda_: float) -> tuple[float, float, float]:
    """sgt.split.null_candidate's delta, mean and variance of the statistics `total` [6]: one group."""
    n = total[0]
    delta, mean, within = _group_loss(total[1], total[2], total[3], total[4], total[5], lambda_)
    return delta, mean, within / (n - 1.0) if n > 1 else np.nan
