"""A leaf's whole evaluation in one compiled call (`evaluate_leaf`): the Newton step, the merge, the
null candidate and the best numeric split, for LeafLearner._evaluate_compiled.

A boosted member's attempt, most of its learning time, then pays one call's fixed cost instead of
four and their Python around them. It runs the kernels of sgt.kernels.leaf_steps and
sgt.kernels.split_search, so it gives their bits (a zero pivot in the Newton step included: inf and NaN).
"""

from __future__ import annotations

import numpy as np

from sgt.kernels.compiling import compiled
from sgt.kernels.leaf_steps import linear_newton, merge_block
from sgt.kernels.split_search import _group_loss, _winner_variance, numeric_search, numeric_winner

__all__ = ["EVALUATION_SIZE", "evaluate_leaf"]

#: What `evaluate_leaf` returns, by position.
EVALUATION_SIZE = 10


@compiled
def evaluate_leaf(
    node: int,
    slot: int,
    step_linear: bool,
    search: bool,
    codes: np.ndarray,
    g: np.ndarray,
    h: np.ndarray,
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
) -> np.ndarray:
    """The first half of the attempt of an active leaf of a one-output tree with constant or linear
    leaves, numeric features only and no linear gate or feature subspaces, as LeafLearner.evaluate
    does it with the kernels, in one call: the linear term's Newton step (`step_linear`; `linear_newton`,
    applied as LinearTermSteps._linear_step applies it: w -= s and value += s . c, the products added in
    order, unless the sum of h is not positive or the step overflowed), the merge of the block
    (`merge_block`), the null candidate (sgt.split.null_candidate), and, with `search` (the leaf may
    split), the best numeric split (`numeric_search`, `numeric_winner` and the winner's variance).

    `codes` [n, F], `g` and `h` [n, 1] the block (`codes[:, j]` of numeric feature j read through
    `numeric`), `weights` [nodes, features] and `value` [nodes] the tree's, `stats` [columns, 1, 6]
    and `total` [1, 6] the slot's statistics. Returns [EVALUATION_SIZE]: the null candidate's delta,
    mean and variance; the split's mean (+inf where no split is found), feature index among the
    numeric features, threshold, variance, left and right steps, and 1.0 if the missing values go left.
    """
    out = np.full(EVALUATION_SIZE, np.nan)
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
    merge_block(stats, total, codes, g, h, offsets)
    n, mg, mh, m2g, m2h, cgh = total[0, 0], total[0, 1], total[0, 2], total[0, 3], total[0, 4], total[0, 5]
    delta, mean, within = _group_loss(mg, mh, m2g, m2h, cgh, lambda_)
    out[0], out[1] = delta, mean
    out[2] = within / (n - 1.0) if n > 1 else np.nan
    out[3] = np.inf
    if search and numeric.size:
        best, f, t = numeric_search(stats, columns, lambda_, gamma, n)
        if np.isfinite(best):
            winner = numeric_winner(stats[:, 0], columns, f, t, lambda_)
            out[3], out[4], out[5] = best, f, t
            out[6] = _winner_variance(winner, lambda_)
            out[7], out[8], out[9] = winner[15], winner[16], winner[19]
    return out
