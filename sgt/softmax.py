"""The classifier's softmax over a reference logit of 0 and its trees' raw scores, batched and for one record.

Both forms do the same operations in the same order, so a row's probabilities have the same bits
whichever path computed them (the library's batch == loop guarantee rests on it).
"""

from __future__ import annotations

import numpy as np

__all__ = [
    "binary_gradients",
    "binary_gradients_one",
    "softmax_one",
    "softmax_rows",
    "softmax_with_reference",
]


def softmax_with_reference(raw: np.ndarray) -> np.ndarray:
    """Softmax over (0, raw[0], raw[1], ...) along axis 0: [K - 1, m] raw scores -> [K, m].

    The sum runs over classes in a fixed order so that results do not depend on the batch shape.
    """
    z = np.concatenate([np.zeros((1, raw.shape[1])), raw])
    e = np.exp(z - z.max(axis=0))
    total = e[0].copy()
    for k in range(1, e.shape[0]):
        total += e[k]
    return e / total


def binary_gradients(u: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The cross-entropy's gradient and hessian of class 1's raw scores `u` [m] against the labels
    `y` [m] (bool: class 1) with two classes: `softmax_with_reference(u[None])[1]` as p, then p - y
    and p (1 - p), the same operations on the same operands, so the same bits.

    Why: a boosted member's gradients are computed a few dozen rows at a time, where the general
    form's dozen numpy calls (concatenate, a reduction, a copy, ...) cost more than the arithmetic.
    The maximum over (0, u) is `np.maximum(0, u)` (the reduction compares the same pair, NaN
    included), and the sum adds class 0's exp and class 1's, in that order. With sgt.kernels a
    member's rows take these steps compiled where they lie (sgt.kernels.gradients), and one record
    takes them in Python floats (the boosted classifier's `_loss_gradient_one`): the same bits."""
    top = np.maximum(0.0, u)
    e0 = np.exp(0.0 - top)
    e1 = np.exp(u - top)
    p = e1 / (e0 + e1)
    return p - y, p * (1.0 - p)


def binary_gradients_one(u: float, y: bool) -> tuple[float, float]:
    """`binary_gradients` of one score `u` and label `y` in Python floats: the same steps on the same
    operands (np.exp of a float has an array element's bits), without numpy's cost per call, which
    dominates a record learned alone."""
    top = u if u > 0.0 or u != u else 0.0  # (np.maximum(0.0, u): u itself where it is NaN)
    e0, e1 = float(np.exp(0.0 - top)), float(np.exp(u - top))
    p = e1 / (e0 + e1)
    return p - (1.0 if y else 0.0), p * (1.0 - p)


def softmax_rows(raw: np.ndarray, known: np.ndarray, n_classes: int) -> np.ndarray:
    """Probabilities [rows, n_classes] of rows whose raw scores `raw` [rows, >= K - 1] were made with
    `known[i]` classes known: the softmax over those classes, 0 beyond them; a row with one class known
    (no tree yet) is certain of it."""
    out = np.zeros((raw.shape[0], n_classes))
    for k in np.unique(known).tolist():
        rows = np.flatnonzero(known == k)
        if k <= 1:
            out[rows, :k] = 1.0
        else:
            out[rows, :k] = softmax_with_reference(raw[rows, : k - 1].T).T
    return out


def softmax_one(raw: list[float]) -> list[float]:
    """`softmax_with_reference` for one record, in Python floats with the same operations in the
    same order (np.exp on a float gives the same bits as on an array), so both agree exactly."""
    if len(raw) == 1:  # two classes, spelled out: the larger logit's exp is exp(0) = 1 exactly
        u = raw[0]
        if u > 0.0:
            e0 = float(np.exp(0.0 - u))
            total = e0 + 1.0
            return [e0 / total, 1.0 / total]
        e1 = 1.0 if u == 0.0 else float(np.exp(u - 0.0))
        total = 1.0 + e1
        return [1.0 / total, e1 / total]
    z = [0.0, *raw]
    top = max(z)
    e = [1.0 if v == top else float(np.exp(v - top)) for v in z]  # exp(0) is 1 exactly
    total = e[0]
    for v in e[1:]:
        total += v
    return [v / total for v in e]
