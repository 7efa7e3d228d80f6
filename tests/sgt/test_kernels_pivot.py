"""A linear term's Newton step on degenerate statistics: a zero pivot gives IEEE numbers, never an error.

The Hessian a linear leaf solves is mean h (z-c)(z-c)' + linear_lambda I, which elimination without
pivoting meets with an exactly zero pivot when two features are collinear and linear_lambda is lost
in the rounding (a + l == a: a tiny linear_lambda, or a huge h). numpy divides by it as IEEE 754 says
(x / 0 = +-inf, 0 / 0 = NaN); a compiled kernel under numba's default error model, and Python floats,
raise ZeroDivisionError instead, which crashed a model (and the worker) on its data. Here the compiled
kernels, the numpy steps and the numpy solve must agree bit for bit on such statistics, the step
that is not finite being skipped by the leaf as any overflowed step is.
"""

from __future__ import annotations

import importlib
import pkgutil

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import sgt
from sgt import kernels
from sgt.features import FeatureSpace
from sgt.kernels.leaf_steps import _solve
from sgt.layout import Layout, Params
from sgt.multioutput import MultiOutputTree
from sgt.ordered import solve_positive_definite, solve_positive_definite_many
from sgt.tree import Tree
from tests.sgt.sgt_testkit import assert_newton_steps_agree, bits


def degenerate_system(rng: np.random.Generator, size: int, kind: str, scale: float) -> np.ndarray:
    """A symmetric [size, size] system that elimination without pivoting meets with a zero pivot (or
    NaN/inf): a rank-one matrix (every feature collinear), one with two equal rows and columns, a
    zero matrix, or one with a zero (or -0.0) diagonal entry."""
    v = rng.normal(size=size) * scale
    if kind == "rank one":
        return np.outer(v, v)
    if kind == "zeros":
        return np.zeros((size, size)) * rng.choice([1.0, -1.0])
    a = rng.normal(size=(size, size)) * scale
    a = a + a.T
    if kind == "equal rows" and size > 1:
        a[1], a[:, 1] = a[0], a[:, 0]
    else:
        a[0, 0] = rng.choice([0.0, -0.0])
    return a


@settings(deadline=None)  # the first example compiles the kernel
@given(
    size=st.integers(1, 6),
    kind=st.sampled_from(["rank one", "zeros", "equal rows", "zero diagonal"]),
    scale=st.sampled_from([1.0, 1e200, 1e-200]),
    ridge=st.sampled_from([0.0, 1e-300, 0.01]),
    zero_b=st.booleans(),
    seed=st.integers(0, 2**32 - 1),
)
def test_a_zero_pivot_solves_as_numpy_divides(size, kind, scale, ridge, zero_b, seed) -> None:
    """Catches the compiled solve (or the Python-float one) raising on an exactly zero pivot, or giving
    other bits than numpy's elimination: infinities and NaNs where numpy's division gives them."""
    rng = np.random.default_rng(seed)
    b = np.zeros(size) if zero_b else rng.normal(size=size)
    with np.errstate(all="ignore"):  # (1e200: overflows, as meant)
        a = degenerate_system(rng, size, kind, scale) + ridge * np.eye(size)
        expected = solve_positive_definite_many(a[None], b[None])[0]
        compiled = _solve(a, b)
        python = np.array(solve_positive_definite(a, b))
    assert np.array_equal(bits(compiled), bits(expected))
    assert np.array_equal(bits(python), bits(expected))


def collinear_block(
    tree: Tree | MultiOutputTree, rng: np.random.Generator, rows: int, h_scale: float
) -> None:
    """A pending block of `rows` instances in slot 0 whose numeric features all have the same codes
    (exactly collinear inputs) and whose h are `h_scale` times a uniform number (a huge h makes
    linear_lambda vanish beside the Hessian's entries)."""
    width = tree.layout.n_features
    outputs = tree.pending_g.shape[2] if tree.pending_g.ndim == 3 else 0
    shape = (rows, outputs) if outputs else (rows,)
    tree.reserve_pending(rows)
    tree.pending_codes[0, :rows] = rng.integers(0, 17, size=(rows, 1)).repeat(width, axis=1)
    tree.pending_g[0, :rows] = rng.normal(size=shape)
    tree.pending_h[0, :rows] = rng.uniform(0.0, 0.25, size=shape) * h_scale
    tree.pending_n[0] = rows


def space_of(rng: np.random.Generator, features: int) -> FeatureSpace:
    """A feature space of `features` numeric features, its grids learned from 20 rows."""
    space = FeatureSpace(bins=16, warm_up=5)
    names = [f"x{j}" for j in range(features)]
    for row in rng.uniform(size=(20, features)).tolist():
        space.encode_one(dict(zip(names, row)), learn=True)
    return space


@settings(deadline=None)
@given(
    features=st.integers(2, 5),
    outputs=st.sampled_from([0, 2, 3]),
    rows=st.integers(2, 40),
    setting=st.sampled_from([(1e-300, 1.0), (0.01, 1e200), (0.01, 1e17), (5e-324, 1.0)]),
    seed=st.integers(0, 2**32 - 1),
)
def test_a_leafs_step_on_collinear_inputs_is_the_numpy_steps(features, outputs, rows, setting, seed) -> None:
    """Catches `linear_newton` (one output) or `linear_steps` (several) raising where a leaf's numpy
    step meets a zero pivot, or leaving the leaf's weights and value with other bits than it."""
    linear_lambda, h_scale = setting
    rng = np.random.default_rng(seed)
    params = Params(0.1, 200, 0.1, 0.0, None, leaf_model="linear", linear_lambda=linear_lambda)
    layout = Layout(space_of(rng, features))
    tree = MultiOutputTree(params, layout, outputs=outputs) if outputs else Tree(params, layout)
    collinear_block(tree, rng, rows, h_scale)
    tree.weights[0] = rng.normal(size=tree.weights[0].shape)
    tree.value[0] = rng.normal(size=tree.value[0].shape)
    assert_newton_steps_agree(tree)


def collinear_stream(n: int, scale: float) -> tuple[np.ndarray, np.ndarray]:
    """Rows of three equal features (exactly collinear inputs) of magnitude `scale`, and a target
    linear in them plus noise."""
    rng = np.random.default_rng(7)
    x = rng.uniform(size=n)
    return np.c_[x, x, x] * scale, 3.0 * x + 0.1 * rng.normal(size=n)


MODELS = {
    "boosted regressor": lambda: sgt.BoostedRegressor(
        warm_up=100, seed=1, leaf_model="linear", linear_lambda=1e-300
    ),
    "linear regressor": lambda: sgt.SGTRegressor(warm_up=100, leaf_model="linear", linear_lambda=1e-300),
    "multiclass classifier": lambda: sgt.SGTClassifier(
        warm_up=100, leaf_model="linear", linear_lambda=1e-300
    ),
}


@pytest.mark.parametrize("scale", [1.0, 1e200])
@pytest.mark.parametrize("name", sorted(MODELS))
def test_models_learn_collinear_features_with_and_without_the_kernels(name, scale, monkeypatch) -> None:
    """Catches a model raising on exactly collinear features whose linear steps meet a zero pivot (a
    crash of the worker on its data), or learning other bits with the kernels than without."""
    X, y = collinear_stream(2000, scale)
    if name == "multiclass classifier":
        y = np.digitize(y, [1.0, 2.0]).astype(str)  # three classes: a multi-output tree
    learned = {}
    for enabled in (True, False):
        monkeypatch.setattr(kernels, "ENABLED", enabled)
        model = MODELS[name]()
        predictions = [
            model.predict_learn_many(X[i : i + 250], y[i : i + 250]) for i in range(0, len(X), 250)
        ]
        learned[enabled] = (b"".join(np.asarray(p).tobytes() for p in predictions), model.to_bytes())
    assert learned[True] == learned[False]


@pytest.mark.skipif(kernels.numba is None, reason="the kernels are plain Python without numba")
def test_every_kernel_divides_as_numpy_divides() -> None:
    """Catches a kernel compiled under numba's default error model (ZeroDivisionError on x / 0.0)
    rather than numpy's, through sgt.kernels.compiling or beside it."""
    dispatchers = [
        value
        for info in pkgutil.iter_modules(kernels.__path__, "sgt.kernels.")
        for value in vars(importlib.import_module(info.name)).values()
        if isinstance(value, kernels.numba.core.registry.CPUDispatcher)
    ]
    assert len(dispatchers) > 20
    assert all(d.targetoptions.get("error_model") == "numpy" for d in dispatchers)
