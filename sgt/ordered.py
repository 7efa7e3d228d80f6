"""Sums and linear solves whose bits never depend on the process: the arithmetic of exactness.

Every learning path of sgt (one record at a time, batches, the leafwise engine, the compiled kernels,
a restored model) must give the same bits. numpy's pairwise summation, BLAS and LAPACK round by the
length of the data, its alignment in memory or the number of threads, so the sums and solves that
linear leaves and predictions take are written here as elementwise steps in a fixed order instead.
sgt.kernels computes the same operations in the same order.
"""

from __future__ import annotations

import numpy as np

__all__ = ["leaf_sums_in_order", "solve_positive_definite", "solve_positive_definite_many", "sums_in_order"]


def sums_in_order(terms: np.ndarray) -> np.ndarray:
    """The sum down each column of a 2-d array, rows added first to last: `np.cumsum(terms, axis=0)[-1]`
    bit for bit, at a fraction of its cost (cumsum computes and writes every partial sum; see
    docs/decisions.md, "Trees: exact arithmetic").

    Never BLAS nor numpy's pairwise summation: their rounding depends on the length, the memory
    alignment or the threads, and the same data must give the same bits in every process. numpy sums
    pairwise only along the fast axis in memory; down the rows of a C-contiguous array of two or more
    columns it adds one row after the other. It starts from -0.0, the exact identity of IEEE addition
    (from numpy's default 0.0 a column of -0.0 would sum to 0.0), so the first row is taken as it is,
    as cumsum takes it.
    """
    if terms.shape[1] < 2:  # one column: it would be the fast axis, summed pairwise
        return np.cumsum(terms, axis=0)[-1]
    return np.add.reduce(np.ascontiguousarray(terms), axis=0, initial=-0.0)


def leaf_sums_in_order(terms: np.ndarray, padding: np.ndarray) -> np.ndarray:
    """`sums_in_order` of each leaf's terms [leaves, quantities, instances] over its instances: the
    instances that `padding` [leaves, instances] marks become -0.0, which leave each sum as it is.

    Summed down the rows of a C-contiguous [leaves, instances, quantities] array (two quantities or
    more), which numpy adds one row after the other for each leaf, as `sums_in_order` does."""
    rows = np.ascontiguousarray(terms.transpose(0, 2, 1))
    rows[padding] = -0.0
    return np.add.reduce(rows, axis=1, initial=-0.0)


def solve_positive_definite(a: np.ndarray, b: np.ndarray) -> list[float]:
    """x with a x = b, a symmetric positive definite (Gaussian elimination without pivoting).

    Elementwise steps and sums in a fixed order only (no LAPACK), so the bits never depend on
    the process, the memory alignment or the number of threads. A pivot that is exactly zero (a
    singular system: collinear inputs whose regularisation the rounding lost) is divided by as numpy
    and the kernels divide (`_divide`), giving infinities and NaNs, never an error.
    """
    # Python floats: at this size (one row per numeric feature) numpy's per-call overhead dominates;
    # each operation is rounded once, as numpy's elementwise steps were, so the bits are the same.
    # Column k below the pivot is never read again, so it is not updated
    rows, rhs = a.tolist(), b.tolist()
    n = len(rhs)
    for k in range(n - 1):
        pivot, top, diagonal = rows[k], rhs[k], rows[k][k]
        below = range(k + 1, n)
        for i in below:
            row = rows[i]
            factor = _divide(row[k], diagonal)
            for j in below:
                row[j] -= factor * pivot[j]
            rhs[i] -= factor * top
    x = [0.0] * n
    for k in range(n - 1, -1, -1):
        total, row = rhs[k], rows[k]
        for j in range(k + 1, n):
            total -= row[j] * x[j]
        x[k] = _divide(total, row[k])
    return x


def _divide(numerator: float, denominator: float) -> float:
    """numerator / denominator as IEEE 754 divides (numpy's division): +-inf or NaN by a zero, where
    Python's float division raises ZeroDivisionError."""
    if denominator != 0.0:  # (a NaN too: Python divides by it)
        return numerator / denominator
    with np.errstate(divide="ignore", invalid="ignore"):
        return float(np.float64(numerator) / np.float64(denominator))


def solve_positive_definite_many(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """`solve_positive_definite` of several systems side by side (`a` [m, n, n], `b` [m, n]): the
    same elementwise steps in the same order on each system's numbers, so each gets its own bits
    (numpy rounds each product and difference once, as Python floats do)."""
    rows, rhs = a.astype(np.float64), b.astype(np.float64)
    n = rhs.shape[1]
    for k in range(n - 1):
        below = slice(k + 1, n)
        factor = rows[:, below, k] / rows[:, k, k][:, None]
        rows[:, below, below] -= factor[:, :, None] * rows[:, None, k, below]
        rhs[:, below] -= factor * rhs[:, k : k + 1]
    x = np.zeros_like(rhs)
    for k in range(n - 1, -1, -1):
        total = rhs[:, k].copy()
        for j in range(k + 1, n):
            total -= rows[:, k, j] * x[:, j]
        x[:, k] = total / rows[:, k, k]
    return x
