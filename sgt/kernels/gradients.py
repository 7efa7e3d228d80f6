"""The binary cross-entropy's gradients, compiled around numpy's exp: a boosted member's weighted ones
(`member_binary_exponents`, `member_binary_gradients`, for Member._gradients_of_rows), the steps of
sgt.softmax.binary_gradients where the rows lie.

The exp between them stays numpy's (numpy's SIMD exp need not round as the libm a kernel would call):
the first kernel gives its arguments, the second goes on from its results.
"""

from __future__ import annotations

import numpy as np

from sgt.kernels.compiling import compiled

__all__ = ["member_binary_exponents", "member_binary_gradients"]


@compiled
def member_binary_exponents(raw: np.ndarray, table: np.ndarray, rows: np.ndarray, column: int) -> np.ndarray:
    """The arguments of sgt.softmax.binary_gradients' two exps, [2, rows], for a boosted member's scores
    u = raw + the offset in `column` of each row of its target table `table` (`rows`), as
    Member._gradients adds them: 0 - top and u - top, top being ``np.maximum(0.0, u)`` (u itself where
    u is NaN, as np.maximum propagates it; where u is 0.0 or -0.0, either zero gives both arguments the
    same exp). One np.exp of the two rows then gives each element the bits of its own exp."""
    out = np.empty((2, rows.size))
    for i in range(rows.size):
        u = raw[i] + table[rows[i], column]
        top = u if u > 0.0 or u != u else 0.0
        out[0, i] = 0.0 - top
        out[1, i] = u - top
    return out


@compiled
def member_binary_gradients(
    e: np.ndarray, table: np.ndarray, rows: np.ndarray, target: int, weight: int
) -> tuple[np.ndarray, np.ndarray]:
    """sgt.softmax.binary_gradients after its exps `e` [2, rows] (class 0's, class 1's) of a boosted
    member's rows, times their weights: p = e1 / (e0 + e1), then g = p - y and h = p (1 - p), y being
    whether the row's `target` column holds 1, and g and h multiplied by its `weight` column, as
    Member._gradients multiplies them."""
    n = rows.size
    g, h = np.empty(n), np.empty(n)
    for i in range(n):
        p = e[1, i] / (e[0, i] + e[1, i])
        w = table[rows[i], weight]
        g[i] = (p - (1.0 if table[rows[i], target] == 1.0 else 0.0)) * w
        h[i] = p * (1.0 - p) * w
    return g, h
