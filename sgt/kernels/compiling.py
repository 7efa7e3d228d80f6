"""How sgt's kernels are compiled: by numba where it is installed, each cached on disk where it can be.

Every kernel module of sgt.kernels decorates its functions with `compiled`. Without numba (the
``fast`` extra not installed) `numba` is None here and the kernels stay plain Python functions,
correct but slow, which sgt does not call (sgt.kernels.ENABLED is false; it takes the numpy code).

numba checks a cached kernel against its own source file only: a kernel that calls one of another
module (sgt.kernels.leaf_evaluation's `evaluate_leaf` calls the split search's and the leaf steps')
holds that module's code as it was compiled, and an edit of that module alone leaves it stale. A
release installs every file anew, so this concerns a working copy: after editing a kernel module,
delete the cache (``sgt/kernels/__pycache__/*.nbi`` and ``*.nbc``, or those in NUMBA_CACHE_DIR).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar, cast

try:
    import numba
except ImportError:  # the `fast` extra is not installed: sgt takes the numpy code
    numba = None  # type: ignore[assignment]  # the module's name stands for "no numba" here

__all__ = ["compiled", "numba"]

F = TypeVar("F", bound=Callable[..., Any])


def compiled(function: F) -> F:
    """The function compiled by numba, or as it is without numba.

    numba caches what it compiles (about 13 s for every kernel on the benchmark machine) in
    NUMBA_CACHE_DIR, beside the module or in the user's cache directory, the first of them it can
    write, so a process compiles nothing an earlier one did. Where it can write none (a read-only
    install, no home directory), each process compiles the kernels it calls instead of failing to
    import sgt."""
    if numba is None:
        return function
    try:
        return cast(F, numba.njit(cache=True)(function))
    except RuntimeError:  # numba: "cannot cache function ...: no locator available"
        return cast(F, numba.njit(function))
