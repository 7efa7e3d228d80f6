"""scipy's F survival function (scipy.special.fdtrc) called from compiled code, for sgt.split.f_test.

A split attempt ends in an F-test (sgt.split.f_test), one call of fdtrc on three floats, and a ufunc
call from Python costs about 1.0 us there, most of it the ufunc's own machinery: the same function
called through numba takes 0.4 us. It is scipy's function itself, not a copy of its arithmetic, so
its bits are the ufunc's.

scipy publishes its special functions for compiled callers in scipy.special.cython_special (its
Cython API), each function's C pointer in that module's ``__pyx_capi__`` table under its C name (the
double version of fdtrc, a function over fused types, is ``__pyx_fuse_0fdtrc``), the function the
ufunc's loop runs for doubles. `load` registers that pointer with LLVM under a name of our own
(llvmlite's add_symbol), which `_f_survival` calls: numba caches the compiled function, whose code
names the symbol, not an address of one process, and every process registers it before the function's
first call (`load` returns the function only then). Where scipy has no such table entry (another
version's naming, or signature), `load` returns None and sgt.split.f_test calls the ufunc: the same
bits either way (tests/sgt/test_fdist.py compares them).
"""

from __future__ import annotations

import ctypes
import functools
from collections.abc import Callable
from typing import Any, Final

from sgt.kernels.compiling import compiled, numba

__all__ = ["load"]

#: The symbol `_f_survival` calls, and the C function scipy's table must hold under it.
_SYMBOL: Final = "sgt_scipy_fdtrc"
_CAPSULE: Final = "__pyx_fuse_0fdtrc"
_SIGNATURE: Final = b"double (double, double, double, int __pyx_skip_dispatch)"

if numba is not None:  # (Any: numba's types are called in compiled code, which mypy does not see)
    _fdtrc: Any = numba.types.ExternalFunction(
        _SYMBOL,
        numba.types.float64(numba.types.float64, numba.types.float64, numba.types.float64, numba.types.intc),
    )


@compiled
def _f_survival(dfn: float, dfd: float, x: float) -> float:
    """scipy.special.fdtrc(dfn, dfd, x) of doubles (the Cython function's last argument, which no
    module-level function reads, is 0)."""
    return float(_fdtrc(dfn, dfd, x, 0))


@functools.cache
def load() -> Callable[[float, float, float], float] | None:
    """`_f_survival` once scipy's fdtrc is registered under its symbol (registered at the first call:
    importing scipy.special takes longer than importing sgt); None without numba, or where scipy's
    Cython API has no double fdtrc of the signature expected."""
    if numba is None:
        return None
    address = _fdtrc_address()
    if address is None:
        return None
    from llvmlite import binding  # type: ignore[import-untyped]  # (numba's dependency: no type information)

    binding.add_symbol(_SYMBOL, address)
    return _f_survival


def _fdtrc_address() -> int | None:
    """The address of scipy.special.cython_special's double fdtrc, or None where its table has none of
    the signature expected."""
    from scipy.special import cython_special

    capsule: Any = getattr(cython_special, "__pyx_capi__", {}).get(_CAPSULE)
    if capsule is None:
        return None
    # (prototypes of our own, rather than attributes set on ctypes.pythonapi's shared functions)
    name_of = ctypes.PYFUNCTYPE(ctypes.c_char_p, ctypes.py_object)(("PyCapsule_GetName", ctypes.pythonapi))
    pointer_of = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.py_object, ctypes.c_char_p)(
        ("PyCapsule_GetPointer", ctypes.pythonapi)
    )
    name = name_of(capsule)
    if name != _SIGNATURE:
        return None
    address = pointer_of(capsule, name)
    return int(address) if address else None
