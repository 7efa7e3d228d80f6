"""Gradient statistics: count, means and centred second moments of (g, h) pairs, as arrays.

One set of statistics is six float64 numbers along the last axis of an array:

======  ==========================================
column  meaning
======  ==========================================
N       number of (g, h) pairs
MG, MH  mean gradient, mean Hessian
M2G     sum of (g - mean g)^2
M2H     sum of (h - mean h)^2
CGH     sum of (g - mean g)(h - mean h)
======  ==========================================

Means and centred moments rather than raw power sums keep the statistics exact when gradients
carry a large common offset (a regression target around 1e6 gives g around -1e6 with unit spread;
sums of squares would lose all of it). Sets are combined with the pairwise update of Chan et al.
and Bennett et al. (2009), which the paper cites for this purpose.

>>> import numpy as np
>>> a = block_stats(np.zeros(3, dtype=np.intp), np.array([0.5, 1.0, 1.5]), np.ones(3), 1)[0]
>>> a.tolist()
[3.0, 1.0, 1.0, 0.5, 0.0, 0.0]
"""

from __future__ import annotations

import numpy as np

N, MG, MH, M2G, M2H, CGH = range(6)
WIDTH = 6

__all__ = ["CGH", "M2G", "M2H", "MG", "MH", "WIDTH", "N", "block_stats", "merge"]


def block_stats(index: np.ndarray, g: np.ndarray, h: np.ndarray, size: int) -> np.ndarray:
    """Statistics of the pairs (g[i], h[i]) grouped by `index[i]` into `size` groups.

    Two passes per group (means, then centred moments), each a `np.bincount`, which sums in
    input order: the result depends only on the pairs and their order, never on the caller.
    """
    out = np.zeros((size, WIDTH))
    n = np.bincount(index, minlength=size).astype(np.float64)
    safe = np.maximum(n, 1.0)  # counts are whole numbers: the same as n where n > 0, and cheaper than where
    mg = np.bincount(index, weights=g, minlength=size) / safe
    mh = np.bincount(index, weights=h, minlength=size) / safe
    dg = g - mg[index]
    dh = h - mh[index]
    out[:, N] = n
    out[:, MG] = mg
    out[:, MH] = mh
    out[:, M2G] = np.bincount(index, weights=dg * dg, minlength=size)
    out[:, M2H] = np.bincount(index, weights=dh * dh, minlength=size)
    out[:, CGH] = np.bincount(index, weights=dg * dh, minlength=size)
    return out


def merge(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The statistics of the union of the sets summarised by `a` and `b` (arrays of one shape)."""
    na, nb = a[..., N], b[..., N]
    n = na + nb
    safe = np.maximum(n, 1.0)  # counts: see block_stats
    wb = nb / safe
    k = na * nb / safe
    dg = b[..., MG] - a[..., MG]
    dh = b[..., MH] - a[..., MH]
    out = np.empty(a.shape)
    out[..., N] = n
    out[..., MG] = a[..., MG] + dg * wb
    out[..., MH] = a[..., MH] + dh * wb
    out[..., M2G] = a[..., M2G] + b[..., M2G] + dg * dg * k
    out[..., M2H] = a[..., M2H] + b[..., M2H] + dh * dh * k
    out[..., CGH] = a[..., CGH] + b[..., CGH] + dg * dh * k
    return out
