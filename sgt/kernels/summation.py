"""numpy's pairwise summation, compiled: the order in which ``ndarray.sum`` adds a contiguous array.

The split search sums a feature's bins as best_numeric_planes' ``sum`` over them does; an add in
another order could round otherwise, so the kernels sum as numpy does (`_pairwise_sum`).
"""

from __future__ import annotations

import numpy as np

from sgt.kernels.compiling import compiled

# numpy's pairwise summation adds up to this many values with eight accumulators, and halves longer runs
_BLOCK = 128


@compiled
def _block(values: np.ndarray, start: int, n: int) -> float:
    """numpy's pairwise sum of values[start : start + n], n <= _BLOCK: in order below 8 values,
    else eight accumulators, combined as a balanced tree, then the rest in order."""
    if n < 8:
        total = 0.0
        for i in range(start, start + n):
            total += values[i]
        return total
    r0, r1, r2, r3 = values[start], values[start + 1], values[start + 2], values[start + 3]
    r4, r5, r6, r7 = values[start + 4], values[start + 5], values[start + 6], values[start + 7]
    i = start + 8
    whole = start + n - n % 8
    while i < whole:
        r0 += values[i]
        r1 += values[i + 1]
        r2 += values[i + 2]
        r3 += values[i + 3]
        r4 += values[i + 4]
        r5 += values[i + 5]
        r6 += values[i + 6]
        r7 += values[i + 7]
        i += 8
    total = ((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7))
    while i < start + n:
        total += values[i]
        i += 1
    return total


@compiled
def _pairwise(values: np.ndarray) -> float:
    """numpy's pairwise sum of a contiguous array (its `pairwise_sum`, without the identity): a run
    longer than _BLOCK is halved (the first half a multiple of 8) and the halves' sums added.

    Written with an explicit stack of tasks, not recursion: numba's cache cannot reload a recursive
    function (the process crashed on the second run)."""
    # tasks: (start, length), or length -1 for "add the last two sums"; 64 entries hold any depth
    starts = np.empty(64, dtype=np.int64)
    lengths = np.empty(64, dtype=np.int64)
    sums = np.empty(64)
    tasks, done = 1, 0
    starts[0], lengths[0] = 0, values.size
    while tasks:
        tasks -= 1
        start, n = starts[tasks], lengths[tasks]
        if n < 0:
            done -= 1
            sums[done - 1] = sums[done - 1] + sums[done]
        elif n <= _BLOCK:
            sums[done] = _block(values, start, n)
            done += 1
        else:
            half = n // 2
            half -= half % 8
            # popped in reverse: the first half, then the second, then their sum
            starts[tasks], lengths[tasks] = 0, -1
            starts[tasks + 1], lengths[tasks + 1] = start + half, n - half
            starts[tasks + 2], lengths[tasks + 2] = start, half
            tasks += 3
    return sums[0]


@compiled
def _pairwise_sum(values: np.ndarray) -> float:
    """``values.sum()`` of a contiguous 1-D array, bit for bit: numpy starts from the identity +0.0 and
    adds the pairwise sum to it (so a sum of -0.0 values is +0.0, as numpy's is)."""
    return 0.0 + _pairwise(values)
