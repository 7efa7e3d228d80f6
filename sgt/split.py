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
>>> best = best_numeric(block[None], lambda_=0.1, gamma=1.0, n=10.0)[0]
>>> best.threshold, round(best.mean, 10), round(best.variance, 10)
(1, -0.2958677686, 0.0275482094)
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from sgt.stats import CGH, M2G, M2H, MG, MH, N, merge

__all__ = [
    "Candidate",
    "best_nominal",
    "best_numeric",
    "f_test",
    "loss_change",
    "newton_step",
    "null_candidate",
    "pooled",
    "pooled_variance",
]


@dataclass(frozen=True)
class Candidate:
    """One possible change to a leaf: update its value only (`feature == -1`) or split it.

    `mean` is the penalised mean loss change per instance, `variance` the pooled sample variance of
    the per-instance loss changes, `deltas` the value change of each child (one entry for the null
    candidate). A numeric split sends bins `<= threshold` (0-based) left; a nominal split has one
    child per entry of `categories` (category codes). `missing_child` takes instances whose value
    is missing.
    """

    feature: int
    mean: float
    variance: float
    deltas: np.ndarray
    threshold: int = -1
    categories: np.ndarray = field(default_factory=lambda: np.empty(0, dtype=np.int64))
    missing_child: int = 0

    @property
    def is_split(self) -> bool:
        return self.feature >= 0


def newton_step(stats: np.ndarray, lambda_: float) -> np.ndarray:
    """delta = -mean g / (mean h + lambda) per set of statistics (0 where the denominator is 0)."""
    mg, denominator = stats[..., MG], stats[..., MH] + lambda_
    return np.divide(-mg, denominator, out=np.zeros_like(mg), where=denominator > 0)


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
    delta = newton_step(children, lambda_)
    mu, within = loss_change(children, delta)
    mean, variance = pooled_variance(children[..., N], mu, within)
    return mean, variance, delta


def f_test(mean: float, variance: float, n: float) -> float:
    """p-value of the test that the expected loss change is 0 (two-sided, df = 1, n - 1).

    Zero variance with a non-zero mean is certain evidence (p = 0); an undefined variance (fewer
    than two instances) is no evidence (p = 1). The survival function keeps precision for large F,
    unlike 1 - cdf.
    """
    if not n > 1 or not np.isfinite(variance):
        return 1.0
    if variance <= 0.0:
        return 0.0 if mean != 0.0 else 1.0
    # imported on first use: scipy.special takes longer to import than the rest of sgt together
    from scipy.special import fdtrc

    return float(fdtrc(1.0, n - 1.0, n * mean * mean / variance))


def null_candidate(total: np.ndarray, lambda_: float) -> Candidate:
    """Update the leaf value only: all instances form one group; no complexity penalty.

    Scalar arithmetic (the formulas of `pooled` for one group): numpy's per-call overhead would
    dominate on six numbers.
    """
    n, mg, mh, m2g, m2h, cgh = (float(v) for v in total)
    denominator = mh + lambda_
    delta = -mg / denominator if denominator > 0 else 0.0
    d2 = delta * delta
    mean = mg * delta + 0.5 * mh * d2
    within = max(d2 * m2g + 0.25 * d2 * d2 * m2h + d2 * delta * cgh, 0.0)
    variance = within / (n - 1.0) if n > 1 else math.nan
    return Candidate(feature=-1, mean=mean, variance=variance, deltas=np.array([delta]))


def best_numeric(
    blocks: np.ndarray, lambda_: float, gamma: float, n: float, features: np.ndarray | None = None
) -> list[Candidate | None]:
    """The best threshold of each numeric feature, or None where no threshold splits the data.

    `blocks` has shape [F, B + 1, 6]: column 0 holds instances whose value is missing, columns
    1..B the equal-width bins. Threshold t sends bins 0..t left. Missing values join the side
    with more instances (ties: left), as they will be routed after the split. Thresholds that
    leave one side without a single known value are not candidates.

    Every threshold's mean loss change needs only counts and means, so all thresholds are scored
    from those; the variance (second moments) is computed for each feature's best threshold only.
    """
    n_features = blocks.shape[0]
    centre_g = _weighted_mean(blocks, MG)
    centre_h = _weighted_mean(blocks, MH)
    sums = _power_sums(blocks, centre_g, centre_h)
    cumulative = np.cumsum(sums[:, 1:, :], axis=1)
    left = cumulative[:, :-1, :]
    right = cumulative[:, -1:, :] - left
    known_left, known_right = left[..., 0], right[..., 0]
    missing = sums[:, None, 0, :]
    missing_left = known_left >= known_right
    left = left + np.where(missing_left[..., None], missing, 0.0)
    right = right + np.where(missing_left[..., None], 0.0, missing)
    sides = np.stack([left[..., :3], right[..., :3]], axis=-2)  # [F, T, 2, (n, Sg, Sh)]
    counts = sides[..., 0]
    safe = np.where(counts > 0, counts, 1.0)
    first = np.empty((*counts.shape, 6))
    first[..., N] = counts
    first[..., MG] = centre_g[:, None, None] + sides[..., 1] / safe
    first[..., MH] = centre_h[:, None, None] + sides[..., 2] / safe
    delta = newton_step(first, lambda_)
    mu = first[..., MG] * delta + 0.5 * first[..., MH] * delta * delta
    mean = (counts * mu).sum(axis=-1) / np.where(counts.sum(axis=-1) > 0, counts.sum(axis=-1), 1.0)
    mean = np.where((known_left > 0) & (known_right > 0), mean + gamma * 2.0 / n, np.inf)
    best = np.argmin(mean, axis=1)
    rows = np.arange(n_features)
    chosen = np.stack([left[rows, best], right[rows, best]], axis=1)  # [F, 2, 6] power sums
    children = _from_power_sums(chosen, centre_g, centre_h)
    _, variance, _ = pooled(children, lambda_)
    out: list[Candidate | None] = []
    for f in range(n_features):
        t = int(best[f])
        if not np.isfinite(mean[f, t]):
            out.append(None)
            continue
        out.append(
            Candidate(
                feature=int(features[f]) if features is not None else f,
                mean=float(mean[f, t]),
                variance=float(variance[f]),
                deltas=delta[f, t].copy(),
                threshold=t,
                missing_child=0 if missing_left[f, t] else 1,
            )
        )
    return out


def best_nominal(block: np.ndarray, lambda_: float, gamma: float, n: float, feature: int) -> Candidate | None:
    """The multiway split of a nominal feature: one child per category seen at the leaf.

    `block` has shape [K + 1, 6] (column 0: missing; column c: category code c). Missing values
    join the child with most instances (ties: the earliest category). At least two categories
    must be present; |Q| is the number of children.
    """
    counts = block[1:, N]
    categories = np.flatnonzero(counts > 0) + 1
    if categories.size < 2:
        return None
    children = block[categories].copy()
    missing_child = int(np.argmax(children[:, N]))
    if block[0, N] > 0:
        children[missing_child] = merge(children[missing_child], block[0])
    mean, variance, delta = pooled(children, lambda_)
    return Candidate(
        feature=feature,
        mean=float(mean) + gamma * categories.size / n,
        variance=float(variance),
        deltas=delta,
        categories=categories.astype(np.int64),
        missing_child=missing_child,
    )


def _weighted_mean(blocks: np.ndarray, column: int) -> np.ndarray:
    """Per feature, the mean of a column over all its bins (the leaf's mean g or h)."""
    n = blocks[..., N].sum(axis=1)
    return (blocks[..., N] * blocks[..., column]).sum(axis=1) / np.where(n > 0, n, 1.0)


def _power_sums(stats: np.ndarray, cg: np.ndarray, ch: np.ndarray) -> np.ndarray:
    """Convert statistics to power sums around (cg, ch) per feature: n, Sg, Sh, Sgg, Shh, Sgh.

    Power sums add, so cumulative sums over bins give every threshold's left side at once;
    centring on the leaf's mean keeps them free of any common offset.
    """
    cg = cg[:, None]
    ch = ch[:, None]
    n = stats[..., N]
    eg = stats[..., MG] - cg
    eh = stats[..., MH] - ch
    out = np.empty_like(stats)
    out[..., 0] = n
    out[..., 1] = n * eg
    out[..., 2] = n * eh
    out[..., 3] = stats[..., M2G] + n * eg * eg
    out[..., 4] = stats[..., M2H] + n * eh * eh
    out[..., 5] = stats[..., CGH] + n * eg * eh
    return out


def _from_power_sums(sums: np.ndarray, cg: np.ndarray, ch: np.ndarray) -> np.ndarray:
    """Inverse of `_power_sums` for arrays shaped [F, k, 6]."""
    n = sums[..., 0]
    safe = np.where(n > 0, n, 1.0)
    eg = sums[..., 1] / safe
    eh = sums[..., 2] / safe
    out = np.empty_like(sums)
    out[..., N] = n
    out[..., MG] = cg[:, None] + eg
    out[..., MH] = ch[:, None] + eh
    out[..., M2G] = np.maximum(sums[..., 3] - n * eg * eg, 0.0)
    out[..., M2H] = np.maximum(sums[..., 4] - n * eh * eh, 0.0)
    out[..., CGH] = sums[..., 5] - n * eg * eh
    return out
