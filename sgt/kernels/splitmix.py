"""splitmix64, sgt's one counter-based generator: its constants and its mixing, written once.

Online bagging's Poisson weights (sgt.boosted.bagging, compiled in sgt.kernels.poisson) and the Mondrian
forest's draws (sgt.kernels.mondrian) are each a pure function of a seed and counters (record, member,
tree, draw): a sum of the counters times odd constants, wrapped to 64 bits, then `mix`ed, its top 53
bits the uniform [0, 1) number (`unit`). So no generator state is saved, and a batch, the one-record
loop and a restore draw the same numbers.

Every step is in uint64, wrapping modulo 2**64: compiled, as numba's integers do; as plain Python (no
numba, or `uniforms`' numpy arrays), as numpy's uint64 do, where a scalar's wrap warns unless the
caller ignores overflow (``np.errstate(over="ignore")``; an array's never warns). A kernel calling
these is cached with their code (sgt.kernels.compiling: delete the cache after editing this module).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import cast

import numpy as np

from sgt.kernels.compiling import compiled, plain

__all__ = ["GOLDEN", "STEP", "mix", "uniforms", "unit"]

#: the golden ratio's odd 64-bit constant: the step of a record's counter (and of a draw's)
GOLDEN = np.uint64(0x9E3779B97F4A7C15)
#: a second odd constant: the step of the seed's counter (and of a bagging member's)
STEP = np.uint64(0xD1B54A32D192ED03)
_MIX_1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX_2 = np.uint64(0x94D049BB133111EB)
_SHIFT_1 = np.uint64(30)
_SHIFT_2 = np.uint64(27)
_SHIFT_3 = np.uint64(31)
#: a mixed value's bits below the 53 of a double's significand
_LOW_BITS = np.uint64(11)
#: a kernel's plain Python form called on arrays
_OnArrays = Callable[[np.ndarray], np.ndarray]


@compiled
def mix(z: np.uint64) -> np.uint64:
    """splitmix64's finaliser of `z` (a new value: an array argument is not changed)."""
    z = z ^ (z >> _SHIFT_1)
    z = z * _MIX_1
    z = z ^ (z >> _SHIFT_2)
    z = z * _MIX_2
    return z ^ (z >> _SHIFT_3)


@compiled
def unit(z: np.uint64) -> float:
    """The uniform [0, 1) number of a mixed value: its top 53 bits times 2**-53."""
    return np.float64(z >> _LOW_BITS) * (1.0 / 2.0**53)


def uniforms(z: np.ndarray) -> np.ndarray:
    """`unit(mix(z))` elementwise over a uint64 array, by numpy: the two kernels' plain Python forms run
    on the array (its wraps are silent: an array's never warn)."""
    return _UNIT_ARRAY(_MIX_ARRAY(z))


# (the same lines on arrays: numpy's elementwise operations)
_MIX_ARRAY = cast(_OnArrays, plain(mix))
_UNIT_ARRAY = cast(_OnArrays, plain(unit))
