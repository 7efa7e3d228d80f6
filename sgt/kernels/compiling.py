"""How sgt's kernels are compiled: by numba where it is installed, each cached on disk where it can be.

Every kernel module of sgt.kernels decorates its functions with `compiled`. Without numba (the
``fast`` extra not installed) `numba` is None here and the kernels stay plain Python functions,
correct but slow, which sgt does not call (sgt.kernels.ENABLED is false; it takes the numpy code),
but for the Mondrian forest's walk, which has no numpy code: its kernel's Python form (`plain`) is
its walk without the kernels.

numba checks a cached kernel against its own source file only: a kernel that calls one of another
module (sgt.kernels.leaf_evaluation's `evaluate_leaf` calls the split search's and the leaf steps';
the Poisson and Mondrian kernels call sgt.kernels.splitmix's) holds that module's code as it was
compiled, and an edit of that module alone leaves it stale. A release installs every file anew, so
this concerns a working copy: after editing a kernel module, delete the cache
(``sgt/kernels/__pycache__/*.nbi`` and ``*.nbc``, or those in NUMBA_CACHE_DIR).

Every kernel divides as numpy does (numba's error model "numpy"): x / 0.0 is +-inf and 0.0 / 0.0 NaN,
IEEE 754's numbers, where numba's default ("python") raises ZeroDivisionError. A kernel must give the
numpy code's bits on any data, a zero divisor included (a linear leaf's exactly collinear inputs give
its Newton step's elimination a zero pivot), and must never stop a model or the worker instead.
numba's cache does not record the error model either: a working copy's cache compiled under another
one is stale too (delete it as above).
"""

from __future__ import annotations

from collections.abc import Callable
from types import FunctionType
from typing import Any, Final, TypeVar, cast

try:
    import numba
except ImportError:  # the `fast` extra is not installed: sgt takes the numpy code
    numba = None  # type: ignore[assignment]  # the module's name stands for "no numba" here

__all__ = ["compiled", "numba", "plain"]

F = TypeVar("F", bound=Callable[..., Any])

#: numba's error model of every kernel: divisions by zero give IEEE 754's inf and NaN, as numpy's do
_ERROR_MODEL: Final = "numpy"


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
        return cast(F, numba.njit(cache=True, error_model=_ERROR_MODEL)(function))
    except RuntimeError:  # numba: "cannot cache function ...: no locator available"
        return cast(F, numba.njit(error_model=_ERROR_MODEL)(function))


def plain(kernel: F) -> F:
    """The Python function `kernel` was compiled from, every kernel it calls in Python too: without
    numba, the kernel itself; with numba, its source (numba's `py_func`) run over a copy of its module's
    names in which every kernel is its own Python function, so no compiled code runs (where sgt runs
    a kernel's Python form, SGT_KERNELS=0 must mean what it says, and the tests' switch must run what
    a machine without numba runs)."""
    function = getattr(kernel, "py_func", None)
    if function is None:
        return kernel
    return cast(F, _python_names(function.__globals__)[function.__name__])


def _python_names(names: dict[str, Any]) -> dict[str, Any]:
    """A copy of a module's names (`names`: its globals) with each kernel replaced by its Python form:
    the module's own kernels as functions of the copy (so they call each other's Python forms), those
    it imports by `plain`."""
    python = dict(names)
    for name, value in names.items():
        function = getattr(value, "py_func", None)
        if function is None:
            continue
        if function.__globals__ is names:
            python[name] = FunctionType(
                function.__code__, python, function.__name__, function.__defaults__, function.__closure__
            )
        else:
            python[name] = plain(value)
    return python
