"""Online bagging (Oza and Russell 2001): each member weighs each record by a Poisson draw.

The draw for record n and member m is a pure function of (seed, n, m), made by a counter-based
generator (splitmix64: sgt.kernels.splitmix), so it needs no state beyond the number of records
learned and does not depend on how records are batched.

With `mean_one` each draw is divided by the rate: the weights have mean 1 whatever the rate, so a
higher rate leaves fewer records out of a member (Poisson(1) leaves out 37% of them, Poisson(3) 5%)
and makes the weights vary less (variance 1 / rate), while the leaves' regularisation (`lambda_`,
`gamma`, which a weight of mean `rate` would shrink by that factor) weighs as at rate 1. At rate 1 the
weights are the same either way. An ensemble turns it on by `_Core._mean_one_bagging`
(sgt.boosted.ensemble; off by default: docs/decisions.md, "The boosted ensemble").

>>> bagging = Bagging(rate=1.0, seed=0)
>>> weights = bagging.weights(np.ones(5, dtype=bool), members=2, first=0)
>>> weights.shape, bool((weights == bagging.weights(np.ones(5, dtype=bool), 2, 0)).all())
((2, 5), True)
>>> Bagging(rate=None, seed=0).weights(np.array([True, False]), members=1, first=0).tolist()
[[1.0, 0.0]]
>>> Bagging(rate=4.0, seed=0, mean_one=True).weights(np.ones(3, dtype=bool), 1, 0).tolist()
[[1.0, 0.5, 1.0]]
"""

from __future__ import annotations

import math

import numpy as np

from sgt import kernels
from sgt.kernels.splitmix import GOLDEN, STEP, uniforms

__all__ = ["Bagging"]


class Bagging:
    """Poisson(`rate`) weights per member and record (`rate` None: every learned record weighs 1), each
    divided by the rate if `mean_one`."""

    def __init__(self, rate: float | None, seed: int, mean_one: bool = False) -> None:
        self.rate = rate
        self.seed = seed
        self.mean_one = mean_one
        self._cdf = None if rate is None else _poisson_cdf(rate)

    def weights(self, learn: np.ndarray, members: int, first: int, rate: float | None = None) -> np.ndarray:
        """[members, rows]: each member's weight of each row (0 for rows not learned); the first learned
        row is record `first`. `rate`: a rate other than the model's (a young ensemble's)."""
        weights = np.zeros((members, learn.size))
        rows = np.flatnonzero(learn)
        if self._cdf is None or self.rate is None:
            weights[:, rows] = 1.0
            return weights
        cdf = self._cdf if rate is None else _poisson_cdf(rate)
        rate = self.rate if rate is None else rate
        if kernels.ENABLED:  # the same numbers, in one compiled loop
            weights = kernels.poisson_weights(np.uint64(self.seed), np.uint64(first), learn, members, cdf)
        else:
            index = (first + np.arange(rows.size)).astype(np.uint64)
            uniform = _uniform(self.seed, index, members)
            weights[:, rows] = np.searchsorted(cdf, uniform, side="right")
        if self.mean_one:  # (one division per weight: the same bits however the rows are batched)
            weights /= rate
        return weights


def _poisson_cdf(rate: float) -> np.ndarray:
    """P(K <= k) for k = 0, 1, ... until it rounds to 1 (inverse-CDF sampling by searchsorted)."""
    cdf = []
    term = total = math.exp(-rate)
    k = 0
    while total < 1.0 - 1e-15 and k < 1000:
        cdf.append(total)
        k += 1
        term *= rate / k
        total += term
    cdf.append(1.0)
    return np.array(cdf)


def _uniform(seed: int, index: np.ndarray, members: int) -> np.ndarray:
    """Uniform [0, 1) numbers [members, records] for (record index, member), a pure function of the seed
    (sgt.kernels.splitmix; sgt.kernels.poisson draws the same)."""
    with np.errstate(over="ignore"):  # (the seed's product is a scalar's: its wrap would warn)
        z = np.uint64(seed) * STEP + index[None, :] * GOLDEN
        z = z + (np.arange(1, members + 1, dtype=np.uint64) * STEP)[:, None]
    return uniforms(z)
