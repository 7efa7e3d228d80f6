"""Comparing floats that another machine computed.

A model restored from bytes holds the same bits on every machine, but what it computes from them need
not: numpy picks its ``exp`` and ``log`` loops by the CPU's instruction sets (AVX-512, AVX2, NEON) and
a BLAS picks its kernels the same way, and those agree only to within an ulp or two. So a figure pinned
in a fixture (written on one machine, read on another) is compared within `CROSS_MACHINE_ULPS` units in
the last place, while results computed in one process (batch against loop, saved against restored) stay
compared bit for bit.

Measured: the release fixture's probabilities differ by at most 2 ulps between numpy's AVX-512 and AVX2
loops (``NPY_DISABLE_CPU_FEATURES="X86_V4 AVX512_ICL"`` on an AVX-512 machine); 16 leaves room for
a softmax's sum and a libm of another architecture.

>>> assert_within_ulps([1.0, 0.1], [1.0, 0.1 + 2.8e-17])
>>> assert_within_ulps([0.1], [0.2])
Traceback (most recent call last):
...
AssertionError: ...
"""

from __future__ import annotations

from typing import Any

import numpy as np

CROSS_MACHINE_ULPS = 16


def assert_within_ulps(actual: Any, expected: Any, ulps: int = CROSS_MACHINE_ULPS) -> None:
    """Assert the same shape and every element within ``ulps`` units in the last place of ``expected``.

    NaNs must match NaNs; infinities must be equal.
    """
    got, want = np.asarray(actual, dtype=np.float64), np.asarray(expected, dtype=np.float64)
    assert got.shape == want.shape, f"shapes differ: {got.shape} against {want.shape}"
    np.testing.assert_array_max_ulp(got, want, maxulp=ulps)
