"""Online bagging's Poisson weights, compiled: sgt.boosted.bagging's draws in one loop (sgt.kernels.
splitmix's uniforms, then the Poisson distribution's inverse CDF), the same numbers.
"""

from __future__ import annotations

import numpy as np

from sgt.kernels.compiling import compiled
from sgt.kernels.splitmix import GOLDEN, STEP, mix, unit

__all__ = ["poisson_weights"]


@compiled
def poisson_weights(
    seed: np.uint64, first: np.uint64, learn: np.ndarray, members: int, cdf: np.ndarray
) -> np.ndarray:
    """sgt.boosted.bagging's weights [members, rows]: for the k-th learned row (record first + k) and
    member m, splitmix64's uniform of (seed, record, m) (every step in uint64, wrapping as numpy's),
    then the number of `cdf` entries at or below it (np.searchsorted's side "right"); 0 for rows not
    learned."""
    weights = np.zeros((members, learn.size))
    base = seed * STEP
    record = first
    for i in range(learn.size):
        if not learn[i]:
            continue
        for m in range(members):
            z = base + record * GOLDEN
            uniform = unit(mix(z + np.uint64(m + 1) * STEP))
            count = 0
            while count < cdf.size and cdf[count] <= uniform:
                count += 1
            weights[m, i] = count
        record += np.uint64(1)
    return weights
