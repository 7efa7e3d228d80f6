"""sgt.kernels.fdist: the split attempt's F-test calls scipy's F survival function through numba, and
gets the ufunc's bits (scipy.special.fdtrc), in this process and in a fresh one that loads the
compiled function from numba's cache; where scipy's Cython API lacks the function, sgt.split.f_test
calls the ufunc."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.special import fdtrc

from sgt import kernels
from sgt.kernels import fdist
from sgt.split import f_test
from tests.sgt.sgt_testkit import bits

pytestmark = pytest.mark.skipif(not kernels.ENABLED, reason="the compiled F-test runs only with numba")

EDGES = [0.0, -0.0, 1e-300, 5e-324, 1.0, 1e300, np.inf, -np.inf, np.nan, -1.0]
DEGREES = st.one_of(st.floats(0.0, 1e7), st.integers(1, 100_000).map(float), st.sampled_from(EDGES))
STATISTICS = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True), st.floats(0.0, 50.0), st.sampled_from(EDGES)
)


def test_scipys_double_fdtrc_is_found() -> None:
    """Catches the compiled F-test never taken with the scipy the tests install (its table entry, or its
    signature, not found): sgt would silently call the ufunc, the same bits, slower."""
    assert fdist.load() is not None


@settings(max_examples=2000, deadline=None)
@given(dfn=st.sampled_from([1.0, 2.0, 0.5]), dfd=DEGREES, x=STATISTICS)
def test_the_compiled_fdtrc_is_the_ufuncs_bits(dfn, dfd, x) -> None:
    """Catches the compiled call giving other bits than scipy.special.fdtrc on any arguments: degrees of
    freedom and statistics of every size, zeros of either sign, infinities, NaN, negatives (out of the
    domain: NaN either way)."""
    survival = fdist.load()
    assert survival is not None
    with np.errstate(all="ignore"):
        expected = float(fdtrc(dfn, dfd, x))
    assert bits(survival(dfn, dfd, x)) == bits(expected)


@settings(max_examples=500, deadline=None)
@given(
    mean=st.one_of(st.floats(-10.0, 10.0), st.sampled_from([0.0, -0.0, -1e-300, -1e200])),
    variance=st.one_of(st.floats(0.0, 10.0), st.sampled_from([0.0, 1e-300, 1e300, np.inf, np.nan])),
    n=st.one_of(st.floats(0.0, 1e6), st.integers(0, 5000).map(float)),
)
def test_f_test_gives_the_same_p_with_the_kernels_and_without(mean, variance, n) -> None:
    """Catches sgt.split.f_test giving another p-value with the kernels than without them."""
    with_kernels = f_test(mean, variance, n)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(kernels, "ENABLED", False)
        assert bits(with_kernels) == bits(f_test(mean, variance, n))


def test_without_scipys_entry_f_test_calls_the_ufunc(monkeypatch) -> None:
    """Catches a scipy whose Cython API names fdtrc otherwise (or not at all) breaking the F-test: the
    loader finds nothing, and f_test calls the ufunc."""
    monkeypatch.setattr(fdist, "_CAPSULE", "__pyx_fuse_9no_such_function")
    fdist.load.cache_clear()
    try:
        assert fdist.load() is None
        assert f_test(-0.5, 2.0, 40.0) == float(fdtrc(1.0, 39.0, 40 * 0.25 / 2.0))
    finally:
        fdist.load.cache_clear()


def test_a_fresh_process_loads_the_compiled_fdtrc_from_the_cache() -> None:
    """Catches the compiled function called before scipy's symbol is registered in a process that reads
    it from numba's cache (an unresolved symbol), or giving other bits there."""
    script = (
        "from sgt.kernels import fdist; from scipy.special import fdtrc; f = fdist.load(); "
        "print(f(1.0, 39.0, 3.0) == float(fdtrc(1.0, 39.0, 3.0)))"
    )
    fdist.load()(1.0, 39.0, 3.0)  # (compiled and cached here first)
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True, timeout=300
    )
    assert out.stdout.strip() == "True"
