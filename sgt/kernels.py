"""Compiled kernels of sgt's learning steps: its numpy results, bit for bit, in a fraction of the time.

A split attempt's arrays are small (10 features x 65 bins), and a batch pass of sgt.leafwise takes a
few dozen rows, so numpy's fixed cost per call is most of their time. Their steps run here as loops
compiled by numba instead. Three steps of the attempt:

- the numeric split search (`numeric_search`, then `numeric_winner` for the winner's variance and
  steps): about 13 us against sgt.split.best_numeric_planes' 80 us (10 features, 64 bins), reading
  the slot's statistics where they lie instead of gathering them into planes;
- the merge of a leaf's pending block into its statistics (`merge_block`), which LeafLearner._merge_pending
  does with sgt.stats' block_stats and merge;
- a linear leaf's Newton step on its block (`linear_newton`), LeafLearner._newton_linear's sums and solve.

A leaf of a one-output tree with numeric features only (no linear gate, no feature subspaces, not
adaptive) takes the three in one call, `evaluate_leaf`, with the null candidate and the winner's
variance (LeafLearner._evaluate_compiled): a boosted member's attempt, most of its learning time, pays
one call's fixed cost instead of four and their Python around them.

A multi-output tree (a multiclass ensemble's member) runs them too: the search sums its outputs' loss
changes, the merge takes every output in one pass over the block, and `linear_steps` steps and applies
each output's linear term. And the steps of a batch:

- which rows a leafwise pass takes, and its events (`plan_pass`, leafwise._take's ranking); after an
  event, the node's later rows (`node_rows_after`) and the earliest row where their next event may
  fall (`next_event`, leafwise._horizon);
- a linear tree's raw scores (`predict_linear`, Tree.predict_rows and MultiOutputTree.predict_outputs);
- both at once for a one-output tree that is not adaptive (`take_pass`, leafwise._take_compiled);
- a binary member's gradients around numpy's exp, which stays numpy's (`member_binary_exponents`,
  `member_binary_gradients`; `binary_exponents`, `binary_finish` for sgt.softmax.binary_gradients);
- appending the taken rows to their leaves' pending blocks (`append_rows`, Tree.append; `append_taken`
  reads the rows' codes where they lie);
- routing rows through a tree without nominal branches (`route_numeric`, Tree.route);
- online bagging's Poisson weights (`poisson_weights`, sgt.boosted.bagging).

Every floating-point operation is the numpy code's, on the same operands, in the same order:

- sums over a feature's bins follow numpy's pairwise summation (`_pairwise_sum`), the order in
  which `ndarray.sum` adds a contiguous row;
- cumulative sums run bin after bin, as `np.cumsum` does;
- each product, quotient and difference is rounded once: numba, as numpy, contracts no ``a * b + c``
  into a fused multiply-add (its ``fastmath`` is off);
- an exp is numpy's own (numpy's SIMD exp need not round as the libm a kernel would call): the kernels
  compute its arguments and go on from its results, one np.exp between them.

So a model learns the same bits with the kernels or without, and a model saved by either restores in
the other byte for byte (tests/sgt/test_kernels.py compares them on random statistics, and whole
models with and without them).

The kernels run compiled when numba is installed (the ``fast`` extra: ``pip install 'sgt-stream[fast]'``),
unless the environment sets ``SGT_KERNELS=0`` when sgt is imported; `ENABLED` tells whether sgt uses
them. Without numba they are plain Python functions, correct but slow, which sgt does not call (it
takes the numpy code); sgt itself needs only numpy and scipy.

>>> import numpy as np
>>> from sgt.stats import block_stats
>>> codes = np.array([1, 1, 2, 2, 2, 3, 3, 4, 4, 4])  # one feature, bins 1..4 (column 0: missing)
>>> # one output's statistics: [columns, 1, 6]
>>> g = np.array([-1.2, -0.8, -1.1, -0.9, -1.0, 0.9, 1.1, 1.3, 0.7, 1.0])
>>> stats = block_stats(codes, g, np.ones(10), 5)
>>> best, feature, threshold = numeric_search(stats[:, None], np.arange(5)[None], 0.1, 1.0, 10.0)
>>> round(best, 10), feature, threshold
(-0.2958677686, 0, 1)
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any, TypeVar, cast

import numpy as np

try:
    import numba
except ImportError:  # the `fast` extra is not installed: sgt takes the numpy code
    numba = None  # type: ignore[assignment]  # the module's name stands for "no numba" here

__all__ = [
    "ENABLED",
    "EVALUATION_SIZE",
    "WINNER_SIZE",
    "append_rows",
    "append_taken",
    "binary_exponents",
    "binary_finish",
    "evaluate_leaf",
    "linear_newton",
    "linear_steps",
    "member_binary_exponents",
    "member_binary_gradients",
    "merge_block",
    "next_event",
    "node_rows_after",
    "numeric_search",
    "numeric_winner",
    "plan_pass",
    "poisson_weights",
    "predict_linear",
    "route_numeric",
    "take_pass",
]

#: Whether sgt runs these kernels (numba importable, SGT_KERNELS not "0").
ENABLED = numba is not None and os.environ.get("SGT_KERNELS", "1") != "0"

F = TypeVar("F", bound=Callable[..., Any])


def _compiled(function: F) -> F:
    """The function compiled by numba, or as it is without numba.

    numba caches what it compiles (about 13 s for every kernel on the benchmark machine) in
    NUMBA_CACHE_DIR, beside the module or in the user's cache directory, the first of them it can
    write, so a process compiles nothing an earlier one did. Where it can write none (a read-only
    install, no home directory), each process compiles the kernels it calls instead of failing to
    import sgt."""
    if numba is None:
        return function
    try:
        return cast(F, numba.njit(cache=True)(function))
    except RuntimeError:  # numba: "cannot cache function ...: no locator available"
        return cast(F, numba.njit(function))


# numpy's pairwise summation adds up to this many values with eight accumulators, and halves longer runs
_BLOCK = 128


@_compiled
def _block(values: np.ndarray, start: int, n: int) -> float:
    """numpy's pairwise sum of values[start : start + n], n <= _BLOCK: in order below 8 values,
    else eight accumulators, combined as a balanced tree, then the rest in order."""
    if n < 8:
        total = 0.0
        for i in range(start, start + n):
            total += values[i]
        return total
    r0, r1, r2, r3 = values[start], values[start + 1], values[start + 2], values[start + 3]
    r4, r5, r6, r7 = values[start + 4], values[start + 5], values[start + 6], values[start + 7]
    i = start + 8
    whole = start + n - n % 8
    while i < whole:
        r0 += values[i]
        r1 += values[i + 1]
        r2 += values[i + 2]
        r3 += values[i + 3]
        r4 += values[i + 4]
        r5 += values[i + 5]
        r6 += values[i + 6]
        r7 += values[i + 7]
        i += 8
    total = ((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7))
    while i < start + n:
        total += values[i]
        i += 1
    return total


@_compiled
def _pairwise(values: np.ndarray) -> float:
    """numpy's pairwise sum of a contiguous array (its `pairwise_sum`, without the identity): a run
    longer than _BLOCK is halved (the first half a multiple of 8) and the halves' sums added.

    Written with an explicit stack of tasks, not recursion: numba's cache cannot reload a recursive
    function (the process crashed on the second run)."""
    # tasks: (start, length), or length -1 for "add the last two sums"; 64 entries hold any depth
    starts = np.empty(64, dtype=np.int64)
    lengths = np.empty(64, dtype=np.int64)
    sums = np.empty(64)
    tasks, done = 1, 0
    starts[0], lengths[0] = 0, values.size
    while tasks:
        tasks -= 1
        start, n = starts[tasks], lengths[tasks]
        if n < 0:
            done -= 1
            sums[done - 1] = sums[done - 1] + sums[done]
        elif n <= _BLOCK:
            sums[done] = _block(values, start, n)
            done += 1
        else:
            half = n // 2
            half -= half % 8
            # popped in reverse: the first half, then the second, then their sum
            starts[tasks], lengths[tasks] = 0, -1
            starts[tasks + 1], lengths[tasks + 1] = start + half, n - half
            starts[tasks + 2], lengths[tasks + 2] = start, half
            tasks += 3
    return sums[0]


@_compiled
def _pairwise_sum(values: np.ndarray) -> float:
    """``values.sum()`` of a contiguous 1-D array, bit for bit: numpy starts from the identity +0.0 and
    adds the pairwise sum to it (so a sum of -0.0 values is +0.0, as numpy's is)."""
    return 0.0 + _pairwise(values)


@_compiled
def _centres(stats: np.ndarray, columns: np.ndarray, f: int, scratch: np.ndarray) -> tuple[float, float]:
    """Feature f's count-weighted mean g and h over its bins (the search's centres), as
    best_numeric_planes computes them: each sum over the bins pairwise, divided by max(count, 1)."""
    bins = columns.shape[1]
    for i in range(bins):
        scratch[i] = stats[columns[f, i], 0]
    total = max(_pairwise_sum(scratch[:bins]), 1.0)  # counts are whole numbers
    for i in range(bins):
        scratch[i] = stats[columns[f, i], 0] * stats[columns[f, i], 1]
    centre_g = _pairwise_sum(scratch[:bins]) / total
    for i in range(bins):
        scratch[i] = stats[columns[f, i], 0] * stats[columns[f, i], 2]
    centre_h = _pairwise_sum(scratch[:bins]) / total
    return centre_g, centre_h


@_compiled
def _step_and_loss(g: float, h: float, lambda_: float) -> tuple[float, float]:
    """A side's Newton step on its mean g and h, and its mean loss change (sgt.split.newton_step and
    the mean of loss_change)."""
    denominator = h + lambda_
    delta = -g / denominator if denominator > 0.0 else 0.0
    return delta, g * delta + 0.5 * h * delta * delta


@_compiled
def _threshold_means(
    count: np.ndarray,
    dev_g: np.ndarray,
    dev_h: np.ndarray,
    centre_g: float,
    centre_h: float,
    lambda_: float,
    means: np.ndarray,
) -> None:
    """Into `means` [bins - 2]: each threshold's mean loss change (not penalised) of one output's
    feature, as best_numeric_planes computes it. `count`, `dev_g` and `dev_h` per bin (bin 0: the
    missing values), the deviations of g and h from the centres, count-weighted. Sums over the known
    bins run from bin 1 in order (np.cumsum takes the first value as it is); the missing values join
    the side with more known ones (ties: left)."""
    bins = count.size
    all_n, all_g, all_h = count[1], dev_g[1], dev_h[1]
    for i in range(2, bins):
        all_n += count[i]
        all_g += dev_g[i]
        all_h += dev_h[i]
    left_n, left_g, left_h = count[1], dev_g[1], dev_h[1]
    for t in range(bins - 2):
        if t > 0:
            left_n += count[t + 1]
            left_g += dev_g[t + 1]
            left_h += dev_h[t + 1]
        right_n, right_g, right_h = all_n - left_n, all_g - left_g, all_h - left_h
        if left_n >= right_n:
            side_n, side_g, side_h = left_n + count[0], left_g + dev_g[0], left_h + dev_h[0]
            other_n, other_g, other_h = right_n + 0.0, right_g + 0.0, right_h + 0.0
        else:
            side_n, side_g, side_h = left_n + 0.0, left_g + 0.0, left_h + 0.0
            other_n, other_g, other_h = right_n + count[0], right_g + dev_g[0], right_h + dev_h[0]
        _, loss_left = _step_and_loss(
            centre_g + side_g / max(side_n, 1.0), centre_h + side_h / max(side_n, 1.0), lambda_
        )
        _, loss_right = _step_and_loss(
            centre_g + other_g / max(other_n, 1.0), centre_h + other_h / max(other_n, 1.0), lambda_
        )
        means[t] = (side_n * loss_left + other_n * loss_right) / max(side_n + other_n, 1.0)


@_compiled
def numeric_search(
    stats: np.ndarray, columns: np.ndarray, lambda_: float, gamma: float, n: float
) -> tuple[float, int, int]:
    """The best numeric split of one slot: (penalised mean loss change, feature index, threshold), the
    mean +inf where no threshold splits the data (then the rest is -1).

    `stats` is the slot's statistics [columns, outputs, 6] (sgt.stats; one output for a one-output
    tree), `columns` [F, B + 1] the columns of each numeric feature's bins (column 0 of a feature: its
    missing values), `n` the leaf's instances. The rules are best_numeric_planes' and, over several
    outputs, best_numeric_outputs': a threshold's mean is the sum of the outputs' in order from -0.0
    (which leaves one output's as it is); a threshold leaving a side without a known value, or with a
    NaN mean for any output, is no candidate; ties go to the earlier feature, then the lower
    threshold. Every output's statistics hold the same instances, so the counts are the first output's.
    """
    features, bins = columns.shape
    outputs = stats.shape[1]
    penalty = gamma * 2.0 / n
    scratch, count = np.empty(bins), np.empty(bins)
    dev_g, dev_h = np.empty(bins), np.empty(bins)
    means = np.empty((outputs, bins - 2))
    best, best_feature, best_threshold = np.inf, -1, -1
    for f in range(features):
        for i in range(bins):
            count[i] = stats[columns[f, i], 0, 0]
        for k in range(outputs):
            centre_g, centre_h = _centres(stats[:, k], columns, f, scratch)
            for i in range(bins):
                column = columns[f, i]
                dev_g[i] = count[i] * (stats[column, k, 1] - centre_g)
                dev_h[i] = count[i] * (stats[column, k, 2] - centre_h)
            _threshold_means(count, dev_g, dev_h, centre_g, centre_h, lambda_, means[k])
        all_n = count[1]
        for i in range(2, bins):
            all_n += count[i]
        left_n = 0.0
        for t in range(bins - 2):
            left_n = count[1] if t == 0 else left_n + count[t + 1]
            if not min(left_n, all_n - left_n) > 0.0:  # a side without a known value
                continue
            total = -0.0
            numbers = True
            for k in range(outputs):
                numbers = numbers and means[k, t] == means[k, t]
                total += means[k, t]
            if numbers and total + penalty < best:
                best, best_feature, best_threshold = total + penalty, f, t
    return best, best_feature, best_threshold


#: The values `numeric_winner` returns, by position.
WINNER_SIZE = 20


@_compiled
def numeric_winner(stats: np.ndarray, columns: np.ndarray, f: int, t: int, lambda_: float) -> np.ndarray:
    """What the winning split (feature index f, threshold t) needs beyond its mean, as
    best_numeric_planes and _winner_variance compute it: [0:3] the left side's count and sums of g and
    h deviations, [3:6] the right side's, [6:9] the second-order sums (gg, hh, gh) of the known bins up
    to t, [9:12] of every known bin, [12:15] of the missing values, [15:17] each side's step,
    [17:19] the centres of g and h, [19] 1.0 if the missing values go left."""
    bins = columns.shape[1]
    scratch = np.empty(bins)
    centre_g, centre_h = _centres(stats, columns, f, scratch)
    first = np.empty((3, bins))  # count, count * dev g, count * dev h
    second = np.empty((3, bins))  # + the bin's own centred moments: gg, hh, gh
    for i in range(bins):
        column = columns[f, i]
        count = stats[column, 0]
        dev_g, dev_h = stats[column, 1] - centre_g, stats[column, 2] - centre_h
        first[0, i], first[1, i], first[2, i] = count, count * dev_g, count * dev_h
        second[0, i] = stats[column, 3] + first[1, i] * dev_g
        second[1, i] = stats[column, 4] + first[2, i] * dev_h
        second[2, i] = stats[column, 5] + first[1, i] * dev_h
    out = np.empty(WINNER_SIZE)
    left = np.empty(3)
    for q in range(3):
        up_to = every = first[q, 1]
        second_up_to = second_every = second[q, 1]
        for i in range(2, bins):
            every += first[q, i]
            second_every += second[q, i]
            if i == t + 1:
                up_to, second_up_to = every, second_every
        left[q] = up_to
        out[3 + q] = every - up_to  # the known right side, missing values added below
        out[6 + q], out[9 + q], out[12 + q] = second_up_to, second_every, second[q, 0]
    to_left = left[0] >= out[3]
    for q in range(3):
        if to_left:
            out[q], out[3 + q] = left[q] + first[q, 0], out[3 + q] + 0.0
        else:
            out[q], out[3 + q] = left[q] + 0.0, out[3 + q] + first[q, 0]
    out[15], _ = _step_and_loss(
        centre_g + out[1] / max(out[0], 1.0), centre_h + out[2] / max(out[0], 1.0), lambda_
    )
    out[16], _ = _step_and_loss(
        centre_g + out[4] / max(out[3], 1.0), centre_h + out[5] / max(out[3], 1.0), lambda_
    )
    out[17], out[18] = centre_g, centre_h
    out[19] = 1.0 if to_left else 0.0
    return out


@_compiled
def merge_block(
    stats: np.ndarray, total: np.ndarray, codes: np.ndarray, g: np.ndarray, h: np.ndarray, offsets: np.ndarray
) -> None:
    """Merge a leaf's pending block into its statistics, in place, as LeafLearner._merge_pending does with
    sgt.stats' block_stats and merge: `stats` [columns, outputs, 6] and `total` [outputs, 6] the
    slot's, `codes` [n, F] the block's codes, `g` and `h` [n, outputs], `offsets` each feature's first
    column (a one-output tree passes its arrays with an output axis of 1).

    The block's statistics of each column (and of the total, the column after them) are np.bincount's:
    sums from +0.0 in the block's order, means over max(count, 1), then the centred moments; every
    column is then merged with Chan's update, the empty ones too (their arithmetic can turn a -0.0
    into +0.0, and must, as merge's does), but for a column empty in the block whose statistics are
    all +0.0, which the update leaves as they are: it is not written, so the memory of a new slot's
    bins that no instance reached is never allocated. The outputs share the instances, so each
    instance's columns are found once for all of them, and each output's numbers get the operations
    they get alone."""
    columns, outputs = stats.shape[0], stats.shape[1]
    block = np.zeros((columns + 1, outputs, 6))
    n, features = codes.shape
    for i in range(n):  # counts and sums, instance after instance (np.bincount's order)
        for j in range(features + 1):
            c = offsets[j] + codes[i, j] if j < features else columns
            for k in range(outputs):
                block[c, k, 0] += 1.0
                block[c, k, 1] += g[i, k]
                block[c, k, 2] += h[i, k]
    for c in range(columns + 1):
        for k in range(outputs):
            safe = max(block[c, k, 0], 1.0)  # counts are whole numbers
            block[c, k, 1] = block[c, k, 1] / safe
            block[c, k, 2] = block[c, k, 2] / safe
    for i in range(n):
        for j in range(features + 1):
            c = offsets[j] + codes[i, j] if j < features else columns
            for k in range(outputs):
                dg, dh = g[i, k] - block[c, k, 1], h[i, k] - block[c, k, 2]
                block[c, k, 3] += dg * dg
                block[c, k, 4] += dh * dh
                block[c, k, 5] += dg * dh
    for c in range(columns + 1):
        held = stats[c] if c < columns else total
        if block[c, 0, 0] == 0.0 and _clear(held):
            continue  # Chan's update of nothing into +0.0 gives +0.0: the row stays unwritten
        for k in range(outputs):
            _merge_into(held[k], block[c, k])


@_compiled
def _clear(rows: np.ndarray) -> bool:
    """Whether every number of `rows` [outputs, 6] is +0.0 (a -0.0 is not: merge turns it into +0.0)."""
    for k in range(rows.shape[0]):
        for q in range(rows.shape[1]):
            if rows[k, q] != 0.0 or np.signbit(rows[k, q]):
                return False
    return True


@_compiled
def _merge_into(held: np.ndarray, block: np.ndarray) -> None:
    """sgt.stats.merge of one set of statistics into `held` [6], in place (Chan's update)."""
    held_n, block_n = held[0], block[0]
    count = held_n + block_n
    safe = max(count, 1.0)
    weight = block_n / safe
    k = held_n * block_n / safe
    dg, dh = block[1] - held[1], block[2] - held[2]
    held[0] = count
    held[1] = held[1] + dg * weight
    held[2] = held[2] + dh * weight
    held[3] = held[3] + block[3] + dg * dg * k
    held[4] = held[4] + block[4] + dh * dh * k
    held[5] = held[5] + block[5] + dg * dh * k


@_compiled
def _solve(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """x with a x = b, a symmetric positive definite: sgt.ordered.solve_positive_definite, its steps and
    their order (Gaussian elimination without pivoting; column k below the pivot is not updated)."""
    rows, rhs = a.copy(), b.copy()
    n = rhs.size
    for k in range(n - 1):
        for i in range(k + 1, n):
            factor = rows[i, k] / rows[k, k]
            for j in range(k + 1, n):
                rows[i, j] -= factor * rows[k, j]
            rhs[i] -= factor * rhs[k]
    x = np.zeros(n)
    for k in range(n - 1, -1, -1):
        total = rhs[k]
        for j in range(k + 1, n):
            total -= rows[k, j] * x[j]
        x[k] = total / rows[k, k]
    return x


@_compiled
def linear_newton(
    codes: np.ndarray,
    numeric: np.ndarray,
    inputs: np.ndarray,
    g: np.ndarray,
    h: np.ndarray,
    first: np.ndarray,
    second: np.ndarray,
    pair_of: np.ndarray,
    linear_lambda: float,
) -> tuple[float, np.ndarray, np.ndarray, np.ndarray]:
    """A linear leaf's Newton step on its block, as LeafLearner._newton_linear computes it: (sum of h, the
    block's h-weighted centre c of the inputs, G = sum g (z - c), the step s), s solving
    (mean h (z-c)(z-c)' + linear_lambda I) s = G / n; c, G and s are empty when the sum of h is not
    positive (then there is no step).

    `codes` [n, features] the block's codes, `numeric` the numeric features, `inputs` each code's input
    z, `g` and `h` [n]; `first`, `second` the upper triangle's pairs of numeric features and `pair_of`
    [width, width] the pair of each (i, j). Every sum runs over the instances in order from -0.0, as
    sgt.ordered.sums_in_order's do, and the Hessian's pair products are (z_i z_j) h, as numpy forms them."""
    n, width, pairs = codes.shape[0], numeric.size, first.size
    empty = np.empty(0)
    h_sum = -0.0
    weighted = np.full(width, -0.0)
    for i in range(n):
        h_sum += h[i]
        for j in range(width):
            weighted[j] += inputs[codes[i, numeric[j]]] * h[i]
    if not h_sum > 0.0:
        return h_sum, empty, empty, empty
    centre = weighted / h_sum
    sums = np.full(width + pairs, -0.0)
    z = np.empty(width)
    for i in range(n):
        for j in range(width):
            z[j] = inputs[codes[i, numeric[j]]] - centre[j]
            sums[j] += z[j] * g[i]
        for p in range(pairs):
            sums[width + p] += z[first[p]] * z[second[p]] * h[i]
    means = sums / n
    hessian = np.empty((width, width))
    for i in range(width):
        for j in range(width):  # + l I: l * 1.0 on the diagonal, l * 0.0 (+0.0) elsewhere, as numpy adds it
            hessian[i, j] = means[width + pair_of[i, j]] + linear_lambda * (1.0 if i == j else 0.0)
    return h_sum, centre, sums[:width].copy(), _solve(hessian, means[:width].copy())


@_compiled
def linear_steps(
    codes: np.ndarray,
    numeric: np.ndarray,
    inputs: np.ndarray,
    g: np.ndarray,
    h: np.ndarray,
    first: np.ndarray,
    second: np.ndarray,
    pair_of: np.ndarray,
    linear_lambda: float,
    weights: np.ndarray,
    value: np.ndarray,
) -> None:
    """Each output's `linear_newton` step on a multi-output leaf's block (`g`, `h` [n, outputs]),
    applied to the leaf's `weights` [outputs, features] and `value` [outputs] in place as
    LeafLearner._linear_step applies it: an output without a positive sum of h, or whose step overflowed,
    keeps its term; else w -= s and value += s . c, the products added in order."""
    for k in range(value.size):
        h_sum, centre, _, step = linear_newton(
            codes, numeric, inputs, g[:, k], h[:, k], first, second, pair_of, linear_lambda
        )
        if not h_sum > 0.0 or not np.all(np.isfinite(step)):
            continue
        for j in range(numeric.size):
            weights[k, numeric[j]] -= step[j]
        shift = step[0] * centre[0]
        for j in range(1, numeric.size):
            shift += step[j] * centre[j]
        value[k] += shift


@_compiled
def binary_exponents(u: np.ndarray) -> np.ndarray:
    """The arguments of sgt.softmax.binary_gradients' two exps, [2, rows]: 0 - top and u - top, top
    being ``np.maximum(0.0, u)`` (u itself where u is NaN, as np.maximum propagates it; where u is
    0.0 or -0.0, either zero gives both arguments the same exp). One np.exp of the two rows then
    gives each element the bits of its own exp."""
    out = np.empty((2, u.size))
    for i in range(u.size):
        top = u[i] if u[i] > 0.0 or u[i] != u[i] else 0.0
        out[0, i] = 0.0 - top
        out[1, i] = u[i] - top
    return out


@_compiled
def binary_finish(e: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """sgt.softmax.binary_gradients after its exps `e` [2, rows] (class 0's, class 1's): p = e1 / (e0
    + e1), then g = p - y and h = p (1 - p), `y` (bool) counting as 1.0 or 0.0 as numpy casts it."""
    n = y.size
    g, h = np.empty(n), np.empty(n)
    for i in range(n):
        p = e[1, i] / (e[0, i] + e[1, i])
        g[i] = p - (1.0 if y[i] else 0.0)
        h[i] = p * (1.0 - p)
    return g, h


_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_MEMBER_STEP = np.uint64(0xD1B54A32D192ED03)
_MIX_1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX_2 = np.uint64(0x94D049BB133111EB)
_SHIFTS = (np.uint64(30), np.uint64(27), np.uint64(31), np.uint64(11))


@_compiled
def poisson_weights(
    seed: np.uint64, first: np.uint64, learn: np.ndarray, members: int, cdf: np.ndarray
) -> np.ndarray:
    """sgt.boosted.bagging's weights [members, rows]: for the k-th learned row (record first + k) and
    member m, splitmix64's uniform of (seed, record, m) (every step in uint64, wrapping as numpy's),
    then the number of `cdf` entries at or below it (np.searchsorted's side "right"); 0 for rows not
    learned."""
    weights = np.zeros((members, learn.size))
    base = seed * _MEMBER_STEP
    record = first
    for i in range(learn.size):
        if not learn[i]:
            continue
        for m in range(members):
            z = base + record * _GOLDEN
            z = z + np.uint64(m + 1) * _MEMBER_STEP
            z ^= z >> _SHIFTS[0]
            z *= _MIX_1
            z ^= z >> _SHIFTS[1]
            z *= _MIX_2
            z ^= z >> _SHIFTS[2]
            uniform = np.float64(z >> _SHIFTS[3]) * (1.0 / 2.0**53)
            count = 0
            while count < cdf.size and cdf[count] <= uniform:
                count += 1
            weights[m, i] = count
        record += np.uint64(1)
    return weights


@_compiled
def member_binary_exponents(raw: np.ndarray, table: np.ndarray, rows: np.ndarray, column: int) -> np.ndarray:
    """`binary_exponents` of a boosted member's scores: u = raw + the offset in `column` of each row of
    its target table `table` (`rows`), as Member._gradients adds them."""
    out = np.empty((2, rows.size))
    for i in range(rows.size):
        u = raw[i] + table[rows[i], column]
        top = u if u > 0.0 or u != u else 0.0
        out[0, i] = 0.0 - top
        out[1, i] = u - top
    return out


@_compiled
def member_binary_gradients(
    e: np.ndarray, table: np.ndarray, rows: np.ndarray, target: int, weight: int
) -> tuple[np.ndarray, np.ndarray]:
    """`binary_finish` of a boosted member's rows, times their weights: y is whether the row's
    `target` column holds 1, and g and h are multiplied by its `weight` column, as Member._gradients
    multiplies them."""
    n = rows.size
    g, h = np.empty(n), np.empty(n)
    for i in range(n):
        p = e[1, i] / (e[0, i] + e[1, i])
        w = table[rows[i], weight]
        g[i] = (p - (1.0 if table[rows[i], target] == 1.0 else 0.0)) * w
        h[i] = p * (1.0 - p) * w
    return g, h


#: What `evaluate_leaf` returns, by position.
EVALUATION_SIZE = 10


@_compiled
def _not_below_zero(x: float) -> float:
    """Python's ``max(x, 0.0)``: x unless 0.0 > x (a NaN stays, and so does a -0.0)."""
    return 0.0 if x < 0.0 else x


@_compiled
def _group_loss(
    mg: float, mh: float, m2g: float, m2h: float, cgh: float, lambda_: float
) -> tuple[float, float, float]:
    """sgt.split._group_loss: one group's delta, mean loss change and within-group sum of squares,
    the same operations in the same order."""
    denominator = mh + lambda_
    delta = -mg / denominator if denominator > 0 else 0.0
    d2 = delta * delta
    mu = mg * delta + 0.5 * mh * d2
    return delta, mu, _not_below_zero(d2 * m2g + 0.25 * d2 * d2 * m2h + d2 * delta * cgh)


@_compiled
def _side_loss(
    n: float,
    sg: float,
    sh: float,
    sgg: float,
    shh: float,
    sgh: float,
    centre_g: float,
    centre_h: float,
    lambda_: float,
) -> tuple[float, float]:
    """One side of sgt.split._split_variance: its mean loss change and within-side sum of squares."""
    eg, eh = sg / n, sh / n
    _, mu, within = _group_loss(
        centre_g + eg,
        centre_h + eh,
        _not_below_zero(sgg - n * eg * eg),
        _not_below_zero(shh - n * eh * eh),
        sgh - n * eg * eh,
        lambda_,
    )
    return mu, within


@_compiled
def _winner_variance(winner: np.ndarray, lambda_: float) -> float:
    """sgt.split._winner_variance_of_sums of `numeric_winner`'s values, the same operations in the
    same order: each side's second-order sums (the missing values' joining the side they go to),
    then `_split_variance`'s pooled variance of the two sides."""
    to_left = winner[19] == 1.0
    second_left = np.empty(3)
    second_right = np.empty(3)
    for q in range(3):
        at, last, missed = winner[6 + q], winner[9 + q], winner[12 + q]
        second_left[q] = at + (missed if to_left else 0.0)
        second_right[q] = last - at + (0.0 if to_left else missed)
    centre_g, centre_h = winner[17], winner[18]
    n_left, n_right = winner[0], winner[3]
    mu_left, within_left = _side_loss(
        n_left,
        winner[1],
        winner[2],
        second_left[0],
        second_left[1],
        second_left[2],
        centre_g,
        centre_h,
        lambda_,
    )
    mu_right, within_right = _side_loss(
        n_right,
        winner[4],
        winner[5],
        second_right[0],
        second_right[1],
        second_right[2],
        centre_g,
        centre_h,
        lambda_,
    )
    total = n_left + n_right
    combined = (n_left * mu_left + n_right * mu_right) / total
    spread = n_left * ((mu_left - combined) * (mu_left - combined)) + n_right * (
        (mu_right - combined) * (mu_right - combined)
    )
    return (within_left + within_right + spread) / (total - 1.0)


@_compiled
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
    applied as LeafLearner._linear_step applies it: w -= s and value += s . c, the products added in
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


@_compiled
def plan_pass(
    rows: np.ndarray,
    at: np.ndarray,
    learned: np.ndarray,
    feature: np.ndarray,
    slot: np.ndarray,
    block: np.ndarray,
    pending_n: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """sgt.leafwise's pass over `rows` (ascending, at nodes `at`): which rows it takes, each node's up
    to its next event, as leafwise._take finds them. Returns (the taken rows' indices into `rows`,
    ascending; whether each taken row is at a leaf; each taken row's place among its node's learned
    rows, from 0; the events' rows and nodes, in row order).

    A learned row is its node's event when it is the node's `need`-th learned row of the pass: the
    rest of the leaf's block (block - pending_n of its slot), or the first at a branch (a nominal
    branch's new category). A node's rows after its event wait for the next pass."""
    n = rows.size
    seen = np.zeros(feature.size, dtype=np.int64)  # each node's learned rows so far in the pass
    done = np.zeros(feature.size, dtype=np.bool_)  # whether its event is found (later rows wait)
    taken = np.empty(n, dtype=np.int64)
    leaf = np.empty(n, dtype=np.bool_)
    place = np.empty(n, dtype=np.int64)
    event_rows = np.empty(n, dtype=np.int64)
    event_nodes = np.empty(n, dtype=np.int64)
    n_taken = n_events = 0
    for i in range(n):
        node = at[i]
        if done[node]:
            continue
        count = seen[node]
        is_leaf = feature[node] < 0
        if learned[i]:
            count += 1
            seen[node] = count
            need = block[slot[node]] - pending_n[slot[node]] if is_leaf else 1
            if count == need:
                done[node] = True
                event_rows[n_events], event_nodes[n_events] = rows[i], node
                n_events += 1
        taken[n_taken], leaf[n_taken], place[n_taken] = i, is_leaf, count - 1
        n_taken += 1
    return taken[:n_taken], leaf[:n_taken], place[:n_taken], event_rows[:n_events], event_nodes[:n_events]


@_compiled
def take_pass(
    rows: np.ndarray,
    nodes: np.ndarray,
    learn: np.ndarray,
    feature: np.ndarray,
    slot: np.ndarray,
    block: np.ndarray,
    pending_n: np.ndarray,
    value: np.ndarray,
    weights: np.ndarray,
    columns: np.ndarray,
    inputs: np.ndarray,
    base: float,
    raw_out: np.ndarray,
    outputs_at: np.ndarray,
    n_outputs: int,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """sgt.leafwise's pass over `rows` of a one-output tree with constant or linear leaves (not
    adaptive), in one loop: `plan_pass`'s rows and events, and each taken row predicted as
    Tree.predict_rows predicts it (the node's value, plus, with `columns` non-empty, its `weights`
    of `columns` times the row's `inputs` added feature by feature in order), plus `base`, written
    to `raw_out` [rows, outputs] column 0, with `n_outputs` to `outputs_at`.

    Returns, of the taken rows that are learned at a leaf (what sgt.leafwise appends to the pending
    blocks), in row order: their rows, nodes, places among their node's learned rows and raw scores;
    then the events' rows and nodes, in row order. `nodes` and `learn` are the run's, by row; `inputs`
    the run's leaf inputs [rows, columns] (a constant tree passes no columns)."""
    n = rows.size
    seen = np.zeros(feature.size, dtype=np.int64)  # each node's learned rows so far in the pass
    done = np.zeros(feature.size, dtype=np.bool_)  # whether its event is found (later rows wait)
    learned = np.empty(n, dtype=np.int64)
    learned_nodes = np.empty(n, dtype=np.int64)
    place = np.empty(n, dtype=np.int64)
    raw = np.empty(n)
    event_rows = np.empty(n, dtype=np.int64)
    event_nodes = np.empty(n, dtype=np.int64)
    n_learned = n_events = 0
    for i in range(n):
        row = rows[i]
        node = nodes[row]
        if done[node]:
            continue
        count = seen[node]
        is_leaf = feature[node] < 0
        if learn[row]:
            count += 1
            seen[node] = count
            need = block[slot[node]] - pending_n[slot[node]] if is_leaf else 1
            if count == need:
                done[node] = True
                event_rows[n_events], event_nodes[n_events] = row, node
                n_events += 1
        total = value[node]
        for j in range(columns.size):
            total += weights[node, columns[j]] * inputs[row, j]
        total = total + base
        raw_out[row, 0] = total
        outputs_at[row] = n_outputs
        if learn[row] and is_leaf:
            learned[n_learned], learned_nodes[n_learned] = row, node
            place[n_learned], raw[n_learned] = count - 1, total
            n_learned += 1
    return (
        learned[:n_learned],
        learned_nodes[:n_learned],
        place[:n_learned],
        raw[:n_learned],
        event_rows[:n_events],
        event_nodes[:n_events],
    )


@_compiled
def node_rows_after(nodes: np.ndarray, row: int, node: int) -> np.ndarray:
    """The rows after `row` whose node is `node`, ascending: sgt.leafwise._run_events' scan after an
    event, ``row + 1 + np.flatnonzero(nodes[row + 1:] == node)``."""
    out = np.empty(nodes.size - row - 1 if nodes.size > row else 0, dtype=np.int64)
    n = 0
    for i in range(row + 1, nodes.size):
        if nodes[i] == node:
            out[n] = i
            n += 1
    return out[:n]


@_compiled
def next_event(
    rest: np.ndarray,
    learn: np.ndarray,
    nodes: np.ndarray,
    feature: np.ndarray,
    slot: np.ndarray,
    block: np.ndarray,
    pending_n: np.ndarray,
    stop: int,
) -> int:
    """sgt.leafwise._horizon: the earliest row of `rest` (ascending, not yet taken) where an event of
    their nodes may fall: with `need` the smallest number of learned rows any of their nodes takes
    before its event (the rest of a leaf's block, 1 at a branch), the `need`-th learned row of
    `rest`; `stop` when fewer are learned."""
    need = -1
    count = 0
    for i in range(rest.size):
        row = rest[i]
        if not learn[row]:
            continue
        count += 1
        node = nodes[row]
        own = 1 if feature[node] >= 0 else block[slot[node]] - pending_n[slot[node]]
        if need < 0 or own < need:
            need = own
    if need < 0 or need > count:
        return stop
    index = need - 1 if need > 0 else count + need - 1  # (numpy's index from the end, as leafwise's)
    for i in range(rest.size):
        row = rest[i]
        if learn[row]:
            if index == 0:
                return int(row)
            index -= 1
    return stop


@_compiled
def predict_linear(
    nodes: np.ndarray,
    value: np.ndarray,
    weights: np.ndarray,
    columns: np.ndarray,
    inputs: np.ndarray,
    first: int,
) -> np.ndarray:
    """A linear tree's raw scores [outputs, rows] of rows first, first + 1, ... of `inputs` [rows,
    columns] at `nodes`: each output's value (`value` [nodes, outputs]) plus its weights (`weights`
    [nodes, outputs, features]) of `columns` times the inputs, added feature by feature in order, as
    Tree.predict_rows and MultiOutputTree.predict_outputs sum them (a one-output tree passes its
    arrays with an output axis of 1)."""
    outputs = value.shape[1]
    out = np.empty((outputs, nodes.size))
    for i in range(nodes.size):
        node = nodes[i]
        for k in range(outputs):
            total = value[node, k]
            for j in range(columns.size):
                total += weights[node, k, columns[j]] * inputs[first + i, j]
            out[k, i] = total
    return out


@_compiled
def append_rows(
    nodes: np.ndarray,
    codes: np.ndarray,
    g: np.ndarray,
    h: np.ndarray,
    place: np.ndarray,
    slot: np.ndarray,
    pending_n: np.ndarray,
    pending_codes: np.ndarray,
    pending_g: np.ndarray,
    pending_h: np.ndarray,
) -> bool:
    """Tree.append of one-output instances with their places among the given instances of their leaf:
    each goes to position pending_n + place of its leaf's pending block. False, and nothing written,
    when a position lies beyond the blocks' capacity (the caller reserves room and calls again)."""
    capacity, width = pending_g.shape[1], codes.shape[1]
    for i in range(nodes.size):
        if pending_n[slot[nodes[i]]] + place[i] >= capacity:
            return False
    for i in range(nodes.size):
        leaf = slot[nodes[i]]
        position = pending_n[leaf] + place[i]
        pending_codes[leaf, position, :width] = codes[i]
        pending_g[leaf, position] = g[i]
        pending_h[leaf, position] = h[i]
    for i in range(nodes.size):
        pending_n[slot[nodes[i]]] += 1
    return True


@_compiled
def append_taken(
    learned: np.ndarray,
    codes: np.ndarray,
    nodes: np.ndarray,
    g: np.ndarray,
    h: np.ndarray,
    place: np.ndarray,
    slot: np.ndarray,
    pending_n: np.ndarray,
    pending_codes: np.ndarray,
    pending_g: np.ndarray,
    pending_h: np.ndarray,
) -> bool:
    """`append_rows` of rows `learned` of a run's `codes` (each instance's codes read there, not
    gathered first): sgt.leafwise's append of a pass's learned rows. False, and nothing written,
    when a position lies beyond the blocks' capacity."""
    capacity, width = pending_g.shape[1], codes.shape[1]
    for i in range(nodes.size):
        if pending_n[slot[nodes[i]]] + place[i] >= capacity:
            return False
    for i in range(nodes.size):
        leaf = slot[nodes[i]]
        position = pending_n[leaf] + place[i]
        pending_codes[leaf, position, :width] = codes[learned[i]]
        pending_g[leaf, position] = g[i]
        pending_h[leaf, position] = h[i]
    for i in range(nodes.size):
        pending_n[slot[nodes[i]]] += 1
    return True


@_compiled
def route_numeric(
    codes: np.ndarray,
    start: np.ndarray,
    feature: np.ndarray,
    threshold: np.ndarray,
    left: np.ndarray,
    right: np.ndarray,
    missing: np.ndarray,
) -> np.ndarray:
    """Tree.route of a tree without nominal branches: the leaf each row of `codes` reaches from its
    `start` node (code 0, a missing value, takes the branch's missing child; codes up to the threshold
    go left). No row stops on the way: a numeric branch has a child for every code."""
    out = np.empty(start.size, dtype=np.int32)
    for i in range(start.size):
        node = start[i]
        while feature[node] >= 0:
            code = codes[i, feature[node]]
            if code == 0:
                node = missing[node]
            elif code <= threshold[node]:
                node = left[node]
            else:
                node = right[node]
        out[i] = node
    return out
