"""Split candidates: their loss change, its variance, the best one, and the F-test on it.

A candidate partitions a leaf's instances into children j. With child statistics (n_j, mean g_j,
mean h_j, ...) the paper's Newton step (Eq. 13, on means as every implementation does) is

    delta_j = -mean_g_j / (mean_h_j + lambda)

and instance i in child j changes the loss, to second order, by L_i = g_i delta_j + h_i delta_j^2 / 2
(Eq. 7). The candidate's mean loss change and the sample variance of the L_i (Eq. 18, pooled over
the children) feed a one-sample test of E[L] = 0 (Eq. 16), written as F = n mean^2 / var with
F ~ F(1, n - 1). The complexity penalty gamma |Q| / n (Eq. 5, per instance) is added to the mean.

Defects of the public implementations avoided here (see tests/sgt/test_split.py):
- A1/M2: the pooled variance subtracts the squared mean (A subtracted the mean).
- A2: each child's deviation is taken from the final pooled mean.
- A3: thresholds and features are compared on the same (penalised) mean.
- A6/M3: a child with one instance contributes its exact within-child sum of squares (zero),
  never an infinite or NaN variance: we pool sums of squares and never divide by n_j - 1.
- R1: every threshold's left side is computed afresh (cumulative sums), never accumulated across
  thresholds.

>>> import numpy as np
>>> from sgt.stats import block_stats
>>> g = np.array([-1.2, -0.8, -1.1, -0.9, -1.0, 0.9, 1.1, 1.3, 0.7, 1.0])
>>> bins = np.array([1, 1, 2, 2, 2, 3, 3, 4, 4, 4])  # code 0 is "missing"; bins 1..4
>>> block = block_stats(bins, g, np.ones(10), 5)
>>> best = best_numeric(block[None], lambda_=0.1, gamma=1.0, n=10.0)
>>> best.threshold, round(best.mean, 10), round(best.variance, 10)
(1, -0.2958677686, 0.0275482094)
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import NamedTuple, cast

import numpy as np

from sgt import kernels
from sgt.stats import CGH, M2G, M2H, MG, MH, WIDTH, N, merge

__all__ = [
    "NO_CATEGORIES",
    "Candidate",
    "best_nominal",
    "best_nominal_outputs",
    "best_numeric",
    "best_numeric_compiled",
    "best_numeric_leaves",
    "best_numeric_outputs",
    "best_numeric_planes",
    "f_test",
    "loss_change",
    "newton_step",
    "null_candidate",
    "null_candidate_outputs",
    "pooled",
    "pooled_variance",
]


#: the categories of a candidate that is not a nominal split: shared (read only, and empty)
NO_CATEGORIES = np.empty(0, dtype=np.int64)
NO_CATEGORIES.flags.writeable = False


class Candidate(NamedTuple):
    """One possible change to a leaf: update its value only (`feature == -1`) or split it.

    `mean` is the penalised mean loss change per instance, `variance` the pooled sample variance of
    the per-instance loss changes, `deltas` the value change of each child (one entry for the null
    candidate; a multi-output leaf's: [children, outputs]). A numeric split sends bins `<= threshold`
    (0-based) left; a nominal split has one child per entry of `categories` (category codes).
    `missing_child` takes instances whose value is missing.

    A named tuple rather than a frozen dataclass: a leaf's attempt makes one, and a boosted forest
    makes about one per record (measured: 0.46 us a candidate against the dataclass's 1.2 us).
    """

    feature: int
    mean: float
    variance: float
    deltas: np.ndarray
    threshold: int = -1
    categories: np.ndarray = NO_CATEGORIES
    missing_child: int = 0

    @property
    def is_split(self) -> bool:
        return self.feature >= 0


def newton_step(mean_g: np.ndarray, mean_h: np.ndarray, lambda_: float) -> np.ndarray:
    """delta = -mean g / (mean h + lambda), elementwise (0 where the denominator is not positive)."""
    denominator = mean_h + lambda_
    return np.divide(-mean_g, denominator, out=np.zeros_like(mean_g), where=denominator > 0)


def loss_change(stats: np.ndarray, delta: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Mean and within-set sum of squares of L = g delta + h delta^2 / 2 over each set.

    Because delta is a constant within the set (the paper's Eq. 18, times n - 1), the sum of
    squared deviations is delta^2 M2G + delta^4 M2H / 4 + delta^3 CGH, clamped at 0 against rounding.
    """
    d2 = delta * delta
    mu = stats[..., MG] * delta + 0.5 * stats[..., MH] * d2
    within = d2 * stats[..., M2G] + 0.25 * d2 * d2 * stats[..., M2H] + d2 * delta * stats[..., CGH]
    return mu, np.maximum(within, 0.0)


def pooled_variance(n: np.ndarray, mean: np.ndarray, within: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Combined mean and sample variance of groups (last axis) from their counts, means and sums of squares.

    variance = [sum_j within_j + sum_j n_j (mean_j - mean)^2] / (N - 1), NaN when N < 2.
    """
    total = n.sum(axis=-1)
    combined = (n * mean).sum(axis=-1) / np.where(total > 0, total, 1.0)
    spread = (n * (mean - combined[..., None]) ** 2).sum(axis=-1)
    return combined, (within.sum(axis=-1) + spread) / np.where(total > 1, total - 1.0, np.nan)


def pooled(children: np.ndarray, lambda_: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Mean and sample variance of L over all children (axis -2), and each child's delta.

    `children` has shape [..., m, 6]; empty children contribute nothing.
    """
    delta = newton_step(children[..., MG], children[..., MH], lambda_)
    mu, within = loss_change(children, delta)
    mean, variance = pooled_variance(children[..., N], mu, within)
    return mean, variance, delta


def f_test(mean: float, variance: float, n: float) -> float:
    """p-value of the test that the expected loss change is 0 (two-sided, df = 1, n - 1).

    Zero variance with a non-zero mean is certain evidence (p = 0); an undefined variance (fewer
    than two instances) is no evidence (p = 1). The survival function keeps precision for large F,
    unlike 1 - cdf.
    """
    if not n > 1 or not math.isfinite(variance):
        return 1.0
    if variance <= 0.0:
        return 0.0 if mean != 0.0 else 1.0
    return float(_fdtrc()(1.0, n - 1.0, n * mean * mean / variance))


@functools.cache
def _fdtrc() -> Callable[[float, float, float], float]:
    """scipy's F survival function, imported on first use: scipy.special takes longer to import than
    the rest of sgt together. (Kept after it: an import statement in `f_test`, run at every split
    attempt, cost 0.5 us of its 1.5 us.)"""
    from scipy.special import fdtrc

    return cast(Callable[[float, float, float], float], fdtrc)


def null_candidate(total: np.ndarray, lambda_: float) -> Candidate:
    """Update the leaf value only: all instances form one group; no complexity penalty.

    Scalar arithmetic (the formulas of `pooled` for one group): numpy's per-call overhead would
    dominate on six numbers.
    """
    n, mg, mh, m2g, m2h, cgh = total.tolist()
    delta, mean, within = _group_loss(mg, mh, m2g, m2h, cgh, lambda_)
    variance = within / (n - 1.0) if n > 1 else math.nan
    return Candidate(feature=-1, mean=mean, variance=variance, deltas=np.array([delta]))


def null_candidate_outputs(total: np.ndarray, lambda_: float) -> Candidate:
    """`null_candidate` of a multi-output leaf (`total` [outputs, 6]): each output's step, the sum of
    their mean loss changes and of their variances (`deltas` [1, outputs])."""
    mean = variance = 0.0
    deltas = []
    for n, mg, mh, m2g, m2h, cgh in total.tolist():
        delta, mu, within = _group_loss(mg, mh, m2g, m2h, cgh, lambda_)
        deltas.append(delta)
        mean += mu
        variance += within / (n - 1.0) if n > 1 else math.nan
    return Candidate(feature=-1, mean=mean, variance=variance, deltas=np.array([deltas]))


def best_numeric(
    blocks: np.ndarray, lambda_: float, gamma: float, n: float, features: np.ndarray | None = None
) -> Candidate | None:
    """The best threshold of any numeric feature, or None where no threshold splits the data.

    `blocks` has shape [F, B + 1, 6]: column 0 holds instances whose value is missing, columns
    1..B the equal-width bins; `features` names the F features (default 0..F-1). Threshold t sends
    bins 0..t left. Missing values join the side with more instances (ties: left), as they will be
    routed after the split. Thresholds that leave one side without a single known value are not
    candidates, nor are thresholds whose mean is not a number. Ties go to the earlier feature, then
    the lower threshold.
    """
    planes = np.ascontiguousarray(np.moveaxis(blocks, -1, 0))
    return best_numeric_planes(planes, lambda_, gamma, n, features)


def best_numeric_planes(
    planes: np.ndarray, lambda_: float, gamma: float, n: float, features: np.ndarray | None = None
) -> Candidate | None:
    """`best_numeric` of the statistics laid out [6, F, B + 1], C-contiguous (one plane per statistic).

    Bins are summed as power sums around the feature's mean g and h (`dev`): sums add, so
    cumulative sums give every threshold's left side at once, and centring keeps them free of any
    common offset. Every threshold's mean loss change needs only counts and first-order sums, so
    all F x (B - 1) thresholds are scored from those; the second moments, and from them the
    variance, are summed for the winner only.

    A split attempt's arrays are small (10 features x 65 bins), so numpy's per-call overhead is most
    of the cost: the g and h halves of each step, and the left and right sides, are stacked on
    leading axes and computed in one call each (measured: 230 us a search down to about 100 us). The
    reductions run along the contiguous last axis, as the per-quantity arrays had them, and every
    element sees the same operations in the same order, so the bits are the same. (Written for one
    leaf beside `best_numeric_leaves`, whose extra axis costs about 15 us a search.)
    """
    # C order: the sums over bins below must run along the fast axis in memory (numpy sums pairwise
    # there), as they did on the per-feature arrays
    planes = np.ascontiguousarray(planes)
    count = planes[N]
    total = count.sum(axis=1)
    safe_total = np.maximum(total, 1.0)  # counts are whole numbers (see sgt.stats.block_stats)
    centre = (count * planes[MG : MH + 1]).sum(axis=2) / safe_total  # [2, F]: g, h
    dev = planes[MG : MH + 1] - centre[..., None]
    first = np.empty((3, *count.shape))  # count and count * dev of g and h, [3, F, B + 1]
    first[0] = count
    np.multiply(count, dev, out=first[1:])
    cumulative = np.cumsum(first[:, :, 1:], axis=2)
    known_left = cumulative[:, :, :-1]
    known_right = cumulative[:, :, -1:] - known_left
    missing_left = known_left[0] >= known_right[0]
    missing = first[:, :, :1]
    sides = np.empty((3, 2, *missing_left.shape))  # [count, sum g, sum h] x [left, right] x [F, T]
    np.add(known_left, np.where(missing_left, missing, 0.0), out=sides[:, 0])
    np.add(known_right, np.where(missing_left, 0.0, missing), out=sides[:, 1])
    # each side's mean loss change per instance and Newton step: `newton_step` and `loss_change`,
    # written as the per-feature search before them wrote them (the same rounding, bit for bit)
    means = centre[:, None, :, None] + sides[1:] / np.maximum(sides[0], 1.0)  # [g, h] x sides x [F, T]
    delta = newton_step(means[0], means[1], lambda_)
    mu = means[0] * delta + 0.5 * means[1] * delta * delta
    weighted = sides[0] * mu
    mean = (weighted[0] + weighted[1]) / np.maximum(sides[0, 0] + sides[0, 1], 1.0)
    # counts are never NaN: min > 0 is "both > 0"; mean == mean is "not NaN"
    usable = (np.minimum(known_left[0], known_right[0]) > 0) & (mean == mean)
    mean = np.where(usable, mean + gamma * 2.0 / n, np.inf)
    f, t = divmod(int(np.argmin(mean)), mean.shape[1])
    best = float(mean[f, t])
    if not math.isfinite(best):
        return None
    to_left = bool(missing_left[f, t])
    return Candidate(
        feature=int(features[f]) if features is not None else f,
        mean=best,
        variance=_winner_variance(planes, first, dev, sides, centre, f, t, to_left, lambda_),
        deltas=delta[:, f, t].copy(),
        threshold=t,
        missing_child=0 if to_left else 1,
    )


def best_numeric_compiled(
    stats: np.ndarray,
    columns: np.ndarray,
    lambda_: float,
    gamma: float,
    n: float,
    features: np.ndarray | None = None,
) -> Candidate | None:
    """`best_numeric_planes` by sgt.kernels' compiled search, the same candidate bit for bit: `stats`
    one slot's statistics [columns, 6], `columns` [F, B + 1] each numeric feature's columns there. With
    a multi-output leaf's statistics [columns, outputs, 6], `best_numeric_outputs`' candidate.

    >>> import numpy as np
    >>> from sgt.stats import block_stats
    >>> codes = np.array([1, 1, 2, 2, 2, 3, 3, 4, 4, 4])
    >>> g = np.array([-1.2, -0.8, -1.1, -0.9, -1.0, 0.9, 1.1, 1.3, 0.7, 1.0])
    >>> stats = block_stats(codes, g, np.ones(10), 5)
    >>> best = best_numeric_compiled(stats, np.arange(5)[None], lambda_=0.1, gamma=1.0, n=10.0)
    >>> same = best_numeric(stats[None], lambda_=0.1, gamma=1.0, n=10.0)
    >>> (best.threshold, best.mean, best.variance) == (same.threshold, same.mean, same.variance)
    True
    """
    outputs = stats[:, None] if stats.ndim == 2 else stats
    best, f, t = kernels.numeric_search(outputs, columns, lambda_, gamma, n)
    if not math.isfinite(best):
        return None
    # each output's winner variance, steps and missing side [outputs, 4] (sgt.kernels'
    # _winner_variance: the operations of _winner_variance_of_sums, whose bits the kernel tests compare)
    winners = kernels.winner_outputs(outputs, columns, f, t, lambda_)
    to_left = bool(winners[0, 3] == 1.0)  # the same for every output: they count the same instances
    if stats.ndim == 2:
        variance, steps = float(winners[0, 0]), winners[0, 1:3].copy()
    else:  # best_numeric_outputs' sum of the outputs' variances, and each side's step of each output
        variance = 0.0
        for output_variance in winners[:, 0].tolist():
            variance += output_variance
        steps = winners[:, 1:3].T.copy()
    return Candidate(
        feature=int(features[f]) if features is not None else f,
        mean=best,
        variance=variance,
        deltas=steps,
        threshold=t,
        missing_child=0 if to_left else 1,
    )


def best_numeric_leaves(
    planes: np.ndarray, lambda_: float, gamma: float, n: np.ndarray, features: np.ndarray | None = None
) -> list[Candidate | None]:
    """`best_numeric_planes` of several leaves at once: `planes` [leaves, 6, F, B + 1], `n` each
    leaf's instances. The same steps with one more leading axis: every element sees the same
    operations, and every sum runs along the same contiguous last axis, so each leaf gets the bits
    it gets alone."""
    scores = _threshold_scores(planes, lambda_)
    # counts are never NaN: min > 0 is "both > 0"; mean == mean is "not NaN"
    usable = scores.usable & (scores.mean == scores.mean)
    mean = np.where(usable, scores.mean + (gamma * 2.0 / n)[:, None, None], np.inf)
    thresholds = mean.shape[2]
    winners = np.argmin(mean.reshape(mean.shape[0], -1), axis=1).tolist()
    out: list[Candidate | None] = []
    for k, winner in enumerate(winners):
        f, t = divmod(winner, thresholds)
        best = float(mean[k, f, t])
        if not math.isfinite(best):
            out.append(None)
            continue
        to_left = bool(scores.missing_left[k, f, t])
        out.append(
            Candidate(
                feature=int(features[f]) if features is not None else f,
                mean=best,
                variance=scores.variance(k, f, t, lambda_),
                deltas=scores.delta[k, :, f, t].copy(),
                threshold=t,
                missing_child=0 if to_left else 1,
            )
        )
    return out


def best_numeric_outputs(
    planes: np.ndarray, lambda_: float, gamma: float, n: float, features: np.ndarray | None = None
) -> Candidate | None:
    """The best threshold of a multi-output leaf: `planes` [outputs, 6, F, B + 1], each output's
    statistics of the same instances (so the same counts). A threshold's mean loss change is the sum
    of the outputs' (one step per output and side), plus the penalty once; its variance is the sum of
    the outputs' variances (the statistics hold no covariance between outputs: taken as independent).
    The winner's `deltas` are [2, outputs]: each side's step of each output."""
    scores = _threshold_scores(planes, lambda_)
    usable = scores.usable[0] & (scores.mean == scores.mean).all(axis=0)
    total = np.add.reduce(scores.mean, axis=0, initial=-0.0)  # outputs in order (rows of [K, F, T])
    mean = np.where(usable, total + gamma * 2.0 / n, np.inf)
    f, t = divmod(int(np.argmin(mean)), mean.shape[1])
    best = float(mean[f, t])
    if not math.isfinite(best):
        return None
    variance = 0.0
    for output_variance in scores.variances(f, t, lambda_):
        variance += output_variance
    return Candidate(
        feature=int(features[f]) if features is not None else f,
        mean=best,
        variance=variance,
        deltas=scores.delta[:, :, f, t].T.copy(),
        threshold=t,
        missing_child=0 if scores.missing_left[0, f, t] else 1,
    )


@dataclass(frozen=True)
class _Scores:
    """Every threshold's unpenalised mean loss change and steps for several statistics [L, 6, F, B + 1]
    (leaves, or a leaf's outputs), and what the winner's variance is computed from."""

    planes: np.ndarray
    first: np.ndarray
    dev: np.ndarray
    sides: np.ndarray
    centre: np.ndarray
    missing_left: np.ndarray  # [L, F, T]
    delta: np.ndarray  # [L, 2, F, T]: each side's step
    mean: np.ndarray  # [L, F, T]
    usable: np.ndarray  # [L, F, T]: both sides hold a known value

    def variance(self, k: int, f: int, t: int, lambda_: float) -> float:
        to_left = bool(self.missing_left[k, f, t])
        return _winner_variance(
            self.planes[k], self.first[k], self.dev[k], self.sides[k], self.centre[k], f, t, to_left, lambda_
        )

    def variances(self, f: int, t: int, lambda_: float) -> list[float]:
        """`variance` of every statistics at the same split (a multi-output leaf's outputs), their
        sums in one numpy pass (measured on RBF-5's five outputs: 5 x 35 us down to about 60 us)."""
        # `_winner_variance`'s steps with the outputs' axis in front
        second = np.empty((self.planes.shape[0], 3, self.planes.shape[3]))
        np.multiply(self.first[:, 1:, f], self.dev[:, :, f], out=second[:, :2])
        np.multiply(self.first[:, 1, f], self.dev[:, 1, f], out=second[:, 2])
        np.add(self.planes[:, M2G:, f], second, out=second)
        cumulative = np.cumsum(second[:, :, 1:], axis=2)  # along the bins, in order, as for one
        return [
            _winner_variance_of_sums(at, last, missed, left, right, centre_g, centre_h, to_left, lambda_)
            for at, last, missed, left, right, centre_g, centre_h, to_left in zip(
                cumulative[:, :, t].tolist(),
                cumulative[:, :, -1].tolist(),
                second[:, :, 0].tolist(),
                self.sides[:, :, 0, f, t].tolist(),
                self.sides[:, :, 1, f, t].tolist(),
                self.centre[:, 0, f].tolist(),
                self.centre[:, 1, f].tolist(),
                self.missing_left[:, f, t].tolist(),
            )
        ]


def _threshold_scores(planes: np.ndarray, lambda_: float) -> _Scores:
    """The steps of `best_numeric_planes` for [L, 6, F, B + 1] statistics, with one more leading axis:
    every element sees the same operations, and every sum runs along the same contiguous last axis."""
    # C order: the sums over bins below must run along the fast axis in memory (numpy sums pairwise
    # there), as they did on the per-feature arrays
    planes = np.ascontiguousarray(planes)
    count = planes[:, N]
    total = count.sum(axis=-1)
    safe_total = np.maximum(total, 1.0)  # counts are whole numbers (see sgt.stats.block_stats)
    centre = (count[:, None] * planes[:, MG : MH + 1]).sum(axis=-1) / safe_total[:, None]  # [L, 2, F]
    dev = planes[:, MG : MH + 1] - centre[..., None]
    first = np.empty((count.shape[0], 3, *count.shape[1:]))  # count, count * dev of g and h
    first[:, 0] = count
    np.multiply(count[:, None], dev, out=first[:, 1:])
    cumulative = np.cumsum(first[..., 1:], axis=-1)
    known_left = cumulative[..., :-1]
    known_right = cumulative[..., -1:] - known_left
    missing_left = known_left[:, 0] >= known_right[:, 0]
    missing = first[..., :1]
    # [L] x [count, sum g, sum h] x [left, right] x [F, T]
    sides = np.empty((count.shape[0], 3, 2, *missing_left.shape[1:]))
    np.add(known_left, np.where(missing_left[:, None], missing, 0.0), out=sides[:, :, 0])
    np.add(known_right, np.where(missing_left[:, None], 0.0, missing), out=sides[:, :, 1])
    # each side's mean loss change per instance and Newton step: `newton_step` and `loss_change`,
    # written as the per-feature search before them wrote them (the same rounding, bit for bit)
    means = centre[:, :, None, :, None] + sides[:, 1:] / np.maximum(sides[:, 0], 1.0)[:, None]
    delta = newton_step(means[:, 0], means[:, 1], lambda_)
    mu = means[:, 0] * delta + 0.5 * means[:, 1] * delta * delta
    weighted = sides[:, 0] * mu
    mean = (weighted[:, 0] + weighted[:, 1]) / np.maximum(sides[:, 0, 0] + sides[:, 0, 1], 1.0)
    usable = np.minimum(known_left[:, 0], known_right[:, 0]) > 0  # counts are never NaN
    return _Scores(planes, first, dev, sides, centre, missing_left, delta, mean, usable)


def _winner_variance(
    planes: np.ndarray,
    first: np.ndarray,
    dev: np.ndarray,
    sides: np.ndarray,
    centre: np.ndarray,
    f: int,
    t: int,
    to_left: bool,
    lambda_: float,
) -> float:
    """The variance of the winning split (feature f, threshold t) of one leaf: its second-order power
    sums (g g, h h, g h), cumulated as the first-order ones were. (Written for one leaf beside
    `_Scores.variances`: with its leading axis, the binary profile run took 0.2 to 0.5% more
    instructions.)"""
    second = np.empty((3, planes.shape[2]))
    np.multiply(first[1:, f], dev[:, f], out=second[:2])
    np.multiply(first[1, f], dev[1, f], out=second[2])
    np.add(planes[M2G:, f], second, out=second)
    cumulative = np.cumsum(second[:, 1:], axis=1)
    return _winner_variance_of_sums(
        cumulative[:, t].tolist(),
        cumulative[:, -1].tolist(),
        second[:, 0].tolist(),
        sides[:, 0, f, t].tolist(),
        sides[:, 1, f, t].tolist(),
        float(centre[0, f]),
        float(centre[1, f]),
        to_left,
        lambda_,
    )


def _winner_variance_of_sums(
    at: list[float],
    last: list[float],
    missed: list[float],
    left: list[float],
    right: list[float],
    centre_g: float,
    centre_h: float,
    to_left: bool,
    lambda_: float,
) -> float:
    """The winning split's variance from its second-order sums up to its threshold (`at`), over all
    known bins (`last`) and of the missing values (`missed`), and each side's first-order sums."""
    second_left = [c + (m if to_left else 0.0) for c, m in zip(at, missed)]
    second_right = [e - c + (0.0 if to_left else m) for c, e, m in zip(at, last, missed)]
    return _split_variance(left + second_left, right + second_right, centre_g, centre_h, lambda_)


def _split_variance(
    left: list[float], right: list[float], centre_g: float, centre_h: float, lambda_: float
) -> float:
    """`pooled`'s variance of the two children of a numeric split, in scalars (two children are too
    few for numpy to pay). Each side is (n, Sg, Sh, Sgg, Shh, Sgh), power sums around the centres;
    both sides hold at least one instance."""
    groups = []
    for n, sg, sh, sgg, shh, sgh in (left, right):
        eg, eh = sg / n, sh / n
        moments = (max(sgg - n * eg * eg, 0.0), max(shh - n * eh * eh, 0.0), sgh - n * eg * eh)
        _, mu, within = _group_loss(centre_g + eg, centre_h + eh, *moments, lambda_)
        groups.append((n, mu, within))
    (n_left, mu_left, within_left), (n_right, mu_right, within_right) = groups
    total = n_left + n_right
    combined = (n_left * mu_left + n_right * mu_right) / total
    spread = n_left * ((mu_left - combined) * (mu_left - combined)) + n_right * (
        (mu_right - combined) * (mu_right - combined)
    )
    return (within_left + within_right + spread) / (total - 1.0)


def _group_loss(
    mg: float, mh: float, m2g: float, m2h: float, cgh: float, lambda_: float
) -> tuple[float, float, float]:
    """One group's delta, mean loss change and its within-group sum of squares, in scalars: the
    formulas of `newton_step` and `loss_change`."""
    denominator = mh + lambda_
    delta = -mg / denominator if denominator > 0 else 0.0
    d2 = delta * delta
    mu = mg * delta + 0.5 * mh * d2
    return delta, mu, max(d2 * m2g + 0.25 * d2 * d2 * m2h + d2 * delta * cgh, 0.0)


def best_nominal(block: np.ndarray, lambda_: float, gamma: float, n: float, feature: int) -> Candidate | None:
    """The multiway split of a nominal feature: one child per category seen at the leaf.

    `block` has shape [K + 1, 6] (column 0: missing; column c: category code c). Missing values
    join the child with most instances (ties: the earliest category). At least two categories
    must be present; |Q| is the number of children.
    """
    grouped = _nominal_children(block)
    if grouped is None:
        return None
    mean, variance, delta = pooled(grouped.children, lambda_)
    return Candidate(
        feature=feature,
        mean=float(mean) + gamma * grouped.categories.size / n,
        variance=float(variance),
        deltas=delta,
        categories=grouped.categories.astype(np.int64),
        missing_child=grouped.missing_child,
    )


def best_nominal_outputs(
    block: np.ndarray, lambda_: float, gamma: float, n: float, feature: int
) -> Candidate | None:
    """`best_nominal` of a multi-output leaf: `block` [K + 1, outputs, 6]. The children's mean loss
    changes and variances are summed over the outputs (as `best_numeric_outputs`); `deltas` are
    [children, outputs]."""
    grouped = _nominal_children(block)
    if grouped is None:
        return None
    children = grouped.children  # [m, outputs, 6]
    mean, variance, delta = pooled(np.ascontiguousarray(children.transpose(1, 0, 2)), lambda_)
    return Candidate(
        feature=feature,
        mean=float(np.add.reduce(mean, initial=-0.0)) + gamma * grouped.categories.size / n,
        variance=float(np.add.reduce(variance, initial=-0.0)),
        deltas=delta.T.copy(),
        categories=grouped.categories.astype(np.int64),
        missing_child=grouped.missing_child,
    )


class _NominalChildren(NamedTuple):
    """A nominal split's children: the category codes seen at the leaf, their statistics (missing
    values merged into `missing_child`), and which child takes missing values."""

    categories: np.ndarray
    children: np.ndarray
    missing_child: int


def _nominal_children(block: np.ndarray) -> _NominalChildren | None:
    """The children of a nominal split of `block` ([K + 1, 6], or [K + 1, outputs, 6]: every output
    counts the same instances): one per category seen, missing values joining the child with most
    instances (ties: the earliest category); None with fewer than two categories."""
    counts = block.reshape(block.shape[0], -1, WIDTH)[:, 0, N]
    categories = np.flatnonzero(counts[1:] > 0) + 1
    if categories.size < 2:
        return None
    children = block[categories].copy()
    missing_child = int(np.argmax(counts[categories]))
    if counts[0] > 0:
        children[missing_child] = merge(children[missing_child], block[0])
    return _NominalChildren(categories, children, missing_child)
