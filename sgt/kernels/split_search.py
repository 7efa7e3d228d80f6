"""The compiled numeric split search of one slot: sgt.split's best_numeric_planes (and, over several
outputs, best_numeric_outputs) and the winner's variance, the same bits.

`numeric_search` finds the best threshold of every numeric feature from the slot's statistics where
they lie; `numeric_winner` then gives what the winning split needs beyond its mean (each side's sums
and step), and `_winner_variance` its pooled variance, as sgt.split._winner_variance_of_sums.
"""

from __future__ import annotations

import numpy as np

from sgt.kernels.compiling import compiled
from sgt.kernels.summation import _pairwise_sum

__all__ = ["WINNER_SIZE", "numeric_search", "numeric_winner", "winner_outputs"]


@compiled
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


@compiled
def _centres_of(
    stats: np.ndarray, columns: np.ndarray, f: int, count: np.ndarray, total: float, scratch: np.ndarray
) -> tuple[float, float]:
    """`_centres` of one output from its feature's bin counts `count` and `total` (max(their pairwise
    sum, 1)), which every output of a slot shares: the same numbers, the counts summed once."""
    bins = columns.shape[1]
    for i in range(bins):
        scratch[i] = count[i] * stats[columns[f, i], 1]
    centre_g = _pairwise_sum(scratch[:bins]) / total
    for i in range(bins):
        scratch[i] = count[i] * stats[columns[f, i], 2]
    centre_h = _pairwise_sum(scratch[:bins]) / total
    return centre_g, centre_h


@compiled
def _step_and_loss(g: float, h: float, lambda_: float) -> tuple[float, float]:
    """A side's Newton step on its mean g and h, and its mean loss change (sgt.split.newton_step and
    the mean of loss_change)."""
    denominator = h + lambda_
    delta = -g / denominator if denominator > 0.0 else 0.0
    return delta, g * delta + 0.5 * h * delta * delta


@compiled
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
    the side with more known ones (ties: left).

    A threshold whose new left bin is empty (no instance) splits the instances as the threshold before
    it, and its mean is the same number, unless the empty bin's statistics are not finite (then NaN):
    either way it can never win over that threshold, as ties go to the lower threshold and a NaN is no
    candidate. So it takes that threshold's mean without its two Newton steps (most thresholds of a
    young leaf or of a feature taking a few values), and the search returns the same bits.
    """
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
            if count[t + 1] == 0.0:
                means[t] = means[t - 1]  # an empty bin: the previous threshold's split
                continue
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


@compiled
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
        total = max(_pairwise_sum(count), 1.0)  # (every output's counts: _centres' first sum)
        for k in range(outputs):
            centre_g, centre_h = _centres_of(stats[:, k], columns, f, count, total, scratch)
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
            if t > 0 and count[t + 1] == 0.0:
                continue  # the previous threshold's split and mean (see _threshold_means): no winner
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


@compiled
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


@compiled
def _not_below_zero(x: float) -> float:
    """Python's ``max(x, 0.0)``: x unless 0.0 > x (a NaN stays, and so does a -0.0)."""
    return 0.0 if x < 0.0 else x


@compiled
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


@compiled
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


@compiled
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


@compiled
def winner_outputs(stats: np.ndarray, columns: np.ndarray, f: int, t: int, lambda_: float) -> np.ndarray:
    """Each output's winning split [outputs, 4] (its variance, the left and the right step, and 1.0
    if the missing values go left, which every output shares) from a slot's statistics [columns,
    outputs, 6]: `numeric_winner` and `_winner_variance` of each output, as
    sgt.split.best_numeric_compiled took them output by output."""
    outputs = stats.shape[1]
    out = np.empty((outputs, 4))
    for k in range(outputs):
        winner = numeric_winner(stats[:, k], columns, f, t, lambda_)
        out[k, 0] = _winner_variance(winner, lambda_)
        out[k, 1], out[k, 2], out[k, 3] = winner[15], winner[16], winner[19]
    return out
