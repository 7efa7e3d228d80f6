"""A leaf's compiled learning steps on its pending block: the merge into its statistics and the
linear term's Newton step, the same bits as LeafLearner's numpy steps.

`merge_block` is LeafLearner._merge_pending (sgt.stats' block_stats and merge, Chan's update);
`linear_newton` is sgt.linear_term.LinearTermSteps._newton_linear's sums and solve, and `linear_steps`
applies each output's step of a multi-output leaf.
"""

from __future__ import annotations

import numpy as np

from sgt.kernels.compiling import compiled

__all__ = ["linear_newton", "linear_steps", "merge_block", "merge_output_total", "merge_total", "regrid_bins"]


@compiled
def merge_block(
    stats: np.ndarray, total: np.ndarray, codes: np.ndarray, g: np.ndarray, h: np.ndarray, offsets: np.ndarray
) -> None:
    """Merge a leaf's pending block into its statistics, in place, as LeafLearner._merge_pending does with
    sgt.stats' block_stats and merge: `stats` [columns, outputs, 6] and `total` [outputs, 6] the
    slot's, `codes` [n, F] the block's codes, `g` and `h` [n, outputs], `offsets` each feature's first
    column (a one-output tree passes its arrays with an output axis of 1).

    The block's statistics of each column (and of the total, the column after them) are np.bincount's:
    sums from +0.0 in the block's order, means over max(count, 1), then the centred moments; every
    column is then merged with Chan's update. Only the columns the block reaches are summed (each
    numbered by its first instance, so its sums keep the block's order): the others merge an empty
    block, which leaves statistics as they are unless they hold a -0.0 (the update turns it into
    +0.0, and must, as merge's does) or a number too large to square (the update's products overflow):
    only such a column is merged (`_settled`), so the work on the columns a block does not reach is a
    read, and the memory of a new slot's bins that no instance reached is never written. The outputs
    share the instances, so each instance's columns are found once for all of them, and each output's
    numbers get the operations they get alone."""
    columns, outputs = stats.shape[0], stats.shape[1]
    n, features = codes.shape
    reached = np.full(columns + 1, -1, dtype=np.int64)  # each column's row of `block`, -1: not reached
    rows = np.empty((n, features + 1), dtype=np.int64)  # each instance's rows of `block`
    used = 0
    for i in range(n):
        for j in range(features + 1):
            c = offsets[j] + codes[i, j] if j < features else columns
            if reached[c] < 0:
                reached[c] = used
                used += 1
            rows[i, j] = reached[c]
    block = np.zeros((used, outputs, 6))
    for i in range(n):  # counts and sums, instance after instance (np.bincount's order)
        for j in range(features + 1):
            r = rows[i, j]
            for k in range(outputs):
                block[r, k, 0] += 1.0
                block[r, k, 1] += g[i, k]
                block[r, k, 2] += h[i, k]
    for r in range(used):
        for k in range(outputs):
            safe = max(block[r, k, 0], 1.0)  # counts are whole numbers
            block[r, k, 1] = block[r, k, 1] / safe
            block[r, k, 2] = block[r, k, 2] / safe
    for i in range(n):
        for j in range(features + 1):
            r = rows[i, j]
            for k in range(outputs):
                dg, dh = g[i, k] - block[r, k, 1], h[i, k] - block[r, k, 2]
                block[r, k, 3] += dg * dg
                block[r, k, 4] += dh * dh
                block[r, k, 5] += dg * dh
    empty = np.zeros(6)
    for c in range(columns + 1):
        held = stats[c] if c < columns else total
        r = reached[c]
        if r < 0 and _settled(held):
            continue  # Chan's update of nothing leaves these numbers as they are: not written
        for k in range(outputs):
            _merge_into(held[k], block[r, k] if r >= 0 else empty)


@compiled
def merge_total(total: np.ndarray, g: np.ndarray, h: np.ndarray) -> None:
    """Merge a leaf's pending block into its total alone, in place, as LeafLearner._merge_total does
    with sgt.stats' block_stats and merge (a leaf that gathers no split statistics): `total`
    [outputs, 6], `g` and `h` [n, outputs], output after output (`merge_output_total`)."""
    for k in range(g.shape[1]):
        merge_output_total(total[k], g[:, k], h[:, k])


@compiled
def merge_output_total(total: np.ndarray, g: np.ndarray, h: np.ndarray) -> None:
    """`merge_total` of one output: `total` [6], `g` and `h` [n]. The sums run from +0.0 in the block's
    order (as np.bincount's), the means over max(count, 1), then the centred moments; then Chan's
    update, which merge applies even to an empty block."""
    block = np.zeros(6)
    for i in range(g.size):
        block[0] += 1.0
        block[1] += g[i]
        block[2] += h[i]
    safe = max(block[0], 1.0)  # counts are whole numbers
    block[1] = block[1] / safe
    block[2] = block[2] / safe
    for i in range(g.size):
        dg, dh = g[i] - block[1], h[i] - block[2]
        block[3] += dg * dg
        block[4] += dh * dh
        block[5] += dg * dh
    _merge_into(total, block)


#: Below this magnitude a number's square (and a product of two) is finite, so Chan's update of an
#: empty block into statistics no larger leaves them as they are (`_settled`).
_SQUARABLE = 1e150


@compiled
def _settled(rows: np.ndarray) -> bool:
    """Whether Chan's update of an empty block leaves `rows` [outputs, 6] as they are, bit for bit: every
    number finite, below `_SQUARABLE` in magnitude, and no -0.0. (The update adds +-0.0 to each number,
    and the products dg * dg * 0 and dg * dh * 0 to the moments: x + +-0.0 is x for any x but -0.0,
    which +0.0 turns into +0.0, and a product of numbers below `_SQUARABLE` times 0 is +-0.0, where an
    overflow to inf would give NaN.)"""
    for k in range(rows.shape[0]):
        for q in range(rows.shape[1]):
            x = rows[k, q]
            if not abs(x) < _SQUARABLE or (x == 0.0 and np.signbit(x)):
                return False
    return True


@compiled
def regrid_bins(held: np.ndarray, start: int, target: np.ndarray) -> None:
    """A slot's statistics [columns, outputs, 6] of one numeric feature carried to its grown grid, in
    place, as Tree.regrid does with sgt.stats' merge: old bin b (column start + b) goes to new bin
    target[b] (non-decreasing), the old bins sharing a new bin merged into it left to right from
    zeros (Chan's update, `_merge_into`: merge's operations), every new bin written."""
    bins, outputs = target.size, held.shape[1]
    new = np.zeros((bins, outputs, 6))
    for b in range(bins):
        for k in range(outputs):
            _merge_into(new[target[b], k], held[start + b, k])
    for b in range(bins):
        for k in range(outputs):
            for q in range(6):
                held[start + b, k, q] = new[b, k, q]


@compiled
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


@compiled
def _solve(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """x with a x = b, a symmetric positive definite: sgt.ordered.solve_positive_definite, its steps and
    their order (Gaussian elimination without pivoting; column k below the pivot is not updated). A
    pivot that is exactly zero (collinear inputs whose linear_lambda the rounding lost) is divided by
    as numpy divides (sgt.kernels.compiling's error model): inf and NaN, which the leaf skips as an
    overflowed step, where numba's default raised ZeroDivisionError."""
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


@compiled
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
    """A linear leaf's Newton step on its block, as LinearTermSteps._newton_linear computes it: (sum of h, the
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


@compiled
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
    LinearTermSteps._linear_step applies it: an output without a positive sum of h, or whose step overflowed,
    keeps its term; else w -= s and value += s . c, the products added in order.

    The outputs' sums run side by side, the output the innermost loop (each output's numbers get
    `linear_newton`'s operations in its order, so the same bits): an instance's inputs are looked up
    once for all outputs, and the outputs' products of a pair are contiguous, which the compiler can
    do several at a time (the pairs' products are most of a multiclass member's attempt)."""
    n, width, pairs, outputs = codes.shape[0], numeric.size, first.size, value.size
    h_sum = np.full(outputs, -0.0)
    weighted = np.full((width, outputs), -0.0)
    x = np.empty(width)
    for i in range(n):
        for k in range(outputs):
            h_sum[k] += h[i, k]
        for j in range(width):
            x[j] = inputs[codes[i, numeric[j]]]
            for k in range(outputs):
                weighted[j, k] += x[j] * h[i, k]
    centre = np.zeros((width, outputs))  # (an output without a positive sum of h takes no step)
    for j in range(width):
        for k in range(outputs):
            if h_sum[k] > 0.0:
                centre[j, k] = weighted[j, k] / h_sum[k]
    sums = np.full((width + pairs, outputs), -0.0)
    z = np.empty((width, outputs))
    for i in range(n):
        for j in range(width):
            x[j] = inputs[codes[i, numeric[j]]]
            for k in range(outputs):
                z[j, k] = x[j] - centre[j, k]
                sums[j, k] += z[j, k] * g[i, k]
        for p in range(pairs):
            a, b = first[p], second[p]
            for k in range(outputs):
                sums[width + p, k] += z[a, k] * z[b, k] * h[i, k]
    means = np.empty(width + pairs)
    hessian = np.empty((width, width))
    for k in range(outputs):
        if not h_sum[k] > 0.0:
            continue
        for q in range(width + pairs):
            means[q] = sums[q, k] / n
        for i in range(width):
            for j in range(width):  # + l I, as linear_newton adds it
                hessian[i, j] = means[width + pair_of[i, j]] + linear_lambda * (1.0 if i == j else 0.0)
        step = _solve(hessian, means[:width].copy())
        if not np.all(np.isfinite(step)):
            continue
        for j in range(width):
            weights[k, numeric[j]] -= step[j]
        shift = step[0] * centre[0, k]
        for j in range(1, width):
            shift += step[j] * centre[j, k]
        value[k] += shift
