"""A numeric feature's grid: how it grows exactly, and an integer order of the doubles.

A feature's B equal-width bins lie on a grid [lo, hi) whose width is a power of two and whose origin is a
multiple of it (`grown_grid`), so that doubling the grid towards a new value merges old bins pairwise and
statistics gathered on the old grid carry over exactly (see `sgt.features` for the codes and when a grid
grows). `ordered` and `from_ordered` map doubles to integers in the same order, which lets a threshold's
value be found by bisection over the doubles themselves.

>>> low, high, mapping = grown_grid(0.0, 0.0, 3.0, 4)
>>> (low, high), mapping.tolist()
((-1.0, 7.0), [0, 1, 1, 1, 1])
>>> from_ordered(ordered(-2.5)), ordered(-0.0) == ordered(0.0)
(-2.5, True)
"""

from __future__ import annotations

import math
import struct

import numpy as np

__all__ = ["from_ordered", "grown_grid", "ordered", "power_of_two_above"]


def grown_grid(lo: float, hi: float, x: float, bins: int) -> tuple[float, float, np.ndarray] | None:
    """The grid [lo', hi') that holds the grid [lo, hi) and x, and the map from old to new codes.

    From a single value v (lo == hi): B bins of the smallest power-of-two width above |x - v| / B,
    about centred on v and x (the origin a multiple of the width). From a grid: doubled towards x
    (the old grid becomes the half on the other side) until x is inside, so every old bin lies
    within one new bin. None when the grid would not be finite (x near the float limits).
    """
    if lo == hi:
        distance = abs(x - lo)
        width = power_of_two_above(distance / bins)
        if not 0.0 < width < math.inf:
            return None
        # an origin on the width's lattice keeps every later edge exact (doubling adds and subtracts
        # multiples of the width), so old bins pair up exactly; then doubled up if needed to hold both
        origin = (min(x, lo) - (bins * width - distance) / 2.0) / width
        if not math.isfinite(origin):
            return None
        low = math.floor(origin) * width
        high = low + bins * width
        while not (math.isfinite(high) and max(x, lo) < high):
            if not math.isfinite(high):
                return None
            high = low + 2.0 * (high - low)
        # every learned value so far was lo (code 1): they all move to lo's bin on the new grid
        z = (lo - low) / (high - low) * bins
        if not math.isfinite(z):  # lo - low or high - low past the float range
            return None
        mapping = np.full(bins + 1, 1 + min(bins - 1, max(0, int(z))))
    else:
        low, high, step = lo, hi, 0
        while not low <= x < high:
            span = high - low
            if x < low:
                low = high - 2.0 * span
            else:
                high = low + 2.0 * span
            step += 1
            if not (math.isfinite(low) and math.isfinite(high)):
                return None
        # old bin i covers [lo + i w, lo + (i + 1) w), which lies in new bin (i + offset) >> step
        # (Python integers: the offset exceeds 64 bits when a value far out grows the grid)
        # (clipped: where the origins differ by more than 2^53 old bins, the offset is only rounded)
        shift = (lo - low) / ((hi - lo) / bins)
        if not math.isfinite(shift):  # lo - low past the float range: the grid cannot grow that far
            return None
        offset = round(shift)
        mapping = np.clip([((i + offset) >> step) + 1 for i in range(-1, bins)], 1, bins)
    mapping[0] = 0  # code 0, a missing value (sgt.features.MISSING), stays missing
    return low, high, mapping.astype(np.uint16)


def ordered(x: float) -> int:
    """An integer for each double, in the doubles' order (both zeros are 0)."""
    (bits,) = struct.unpack("<q", struct.pack("<d", x))
    return bits if bits >= 0 else -(bits & 0x7FFF_FFFF_FFFF_FFFF)


def from_ordered(k: int) -> float:
    """The double of `ordered` integer k."""
    bits = struct.pack("<q", k) if k >= 0 else struct.pack("<Q", -k | 1 << 63)
    return float(struct.unpack("<d", bits)[0])


def power_of_two_above(x: float) -> float:
    """The smallest power of two above x (x > 0), exactly; 0 for x = 0."""
    if x == 0.0:
        return 0.0
    return math.ldexp(1.0, math.frexp(x)[1])
