"""The linear gate: whether a block says a leaf's loss is lower without its linear term.

With `Params.linear_gate` = t, before its Newton step a linear leaf's term is tested on the block it
was not fitted on, and dropped (its value at the block's centre kept) when removing it lowers those
records' loss with a t statistic below -t. A linear term a child inherited can extrapolate wrongly
where the classes are not monotone in any feature; the gate lets such a leaf fall back to its value.
The screen `may_reject` reads the sums the Newton step takes anyway, so the pass over the block's
instances (`rejects_block`) runs on few blocks. Every decision is taken on Python floats or sums in
order, so every learning path gates alike.
"""

from __future__ import annotations

import math

import numpy as np

from sgt.ordered import sums_in_order

__all__ = ["drop_changes", "may_reject", "rejects", "rejects_block"]


def may_reject(weights: list[float], gradient: list[float], gate: float) -> bool:
    """Whether the gate's t test could drop a leaf's linear term, from the sums its Newton step takes
    anyway (`gradient`: G = sum g (z - c) over the block). With d = w . (z - c), the block's loss
    changes sum to sum e = sum (h d^2 / 2 - g d) = w' H w / 2 - w . G, where H = sum h (z - c)(z - c)'
    is positive semi-definite (h >= 0): so w . G <= 0 means sum e >= 0, which no gate >= 0 rejects.
    Most blocks are so (w . G > 0 in about a third of them on the benchmark streams), so the pass over
    the instances (`rejects_block`) runs on few. Python floats summed in order: every path screens
    alike; NaN leaves the decision to the test."""
    product = weights[0] * gradient[0]
    for w_j, g_j in zip(weights[1:], gradient[1:]):
        product += w_j * g_j
    return gate < 0.0 or not product <= 0.0


def rejects_block(weights: np.ndarray, z: np.ndarray, g: np.ndarray, h: np.ndarray, gate: float) -> bool:
    """The gate's t test on one leaf's block of two or more instances: `weights` [features], `z`
    [features, instances] centred on the block, `g` and `h` [instances] (see drop_changes, rejects)."""
    changes = np.empty((2, z.shape[1]))
    drop_changes(weights[:, None], z, g, h, changes)
    return rejects(sums_in_order(changes.T).tolist(), z.shape[1], gate)


def drop_changes(weights: np.ndarray, z: np.ndarray, g: np.ndarray, h: np.ndarray, out: np.ndarray) -> None:
    """Into `out` [2, instances]: the second-order loss change of each instance of a block if its
    leaf's linear term were dropped with its value at the block's centre kept, and its square.
    `weights` [features, 1] and `z` [features, instances] centred on the block.

    With d = w . (z - c) the instance's share of the term, dropping it moves the instance's score by
    -d, which changes its loss by e = (h d / 2 - g) d (g and h were computed at the scores with the
    term). Elementwise steps, and d summed feature by feature in layout order (down the rows of a
    C-contiguous array of two or more instances, as `sums_in_order` sums).
    """
    with np.errstate(over="ignore", invalid="ignore"):  # an overflow drops nothing (see rejects)
        d = np.add.reduce(weights * z, axis=-2, initial=-0.0)
        change = np.multiply(0.5 * h * d - g, d, out=out[0])
        np.multiply(change, change, out=out[1])


def rejects(sums: list[float], size: int, gate: float) -> bool:
    """Whether a block of `size` instances whose loss changes e sum to sums[0] (their squares to
    sums[1]) says a leaf's loss is lower without its linear term: a one-sided t test, the mean of e
    below -gate standard errors. Python floats from the sums, so every path decides alike."""
    mean = sums[0] / size
    variance = (sums[1] - sums[0] * mean) / (size - 1)
    return variance > 0.0 and mean < -gate * math.sqrt(variance / size)  # False if either is NaN
