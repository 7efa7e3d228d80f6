"""Online bagging's Poisson weights, compiled: sgt.boosted.bagging's draws in one loop (splitmix64's
uniforms, then the Poisson distribution's inverse CDF), the same numbers.
"""

from __future__ import annotations

import numpy as np

from sgt.kernels.compiling import compiled

__all__ = ["poisson_weights"]

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_MEMBER_STEP = np.uint64(0xD1B54A32D192ED03)
_MIX_1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX_2 = np.uint64(0x94D049BB133111EB)
_SHIFTS = (np.uint64(30), np.uint64(27), np.uint64(31), np.uint64(11))


@compiled
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
