"""Generated regression stress streams: data no default was tuned on, as a new user would bring it.

Each generator is seeded and yields River-style ``(dict, target)`` pairs, so the streams plug into
``tests/bench/streams.py`` like River's own. They probe what breaks a leaf model on day one:

* ``timestamp``: a feature at timestamp scale (about 1.7e9, one step a minute) that drives a trend, beside
  two ordinary features;
* ``micro``: every feature at micro scale (1e-6), a Friedman-like target;
* ``heavy-tail``: a linear target under Student t noise with 1.5 degrees of freedom (infinite variance);
* ``step``: a step-shaped target of one feature (five levels), two irrelevant features;
* ``outliers``: a linear target with 2% gross outliers (50 standard deviations);
* ``irrelevant``: Friedman #1's five informative features among 25 irrelevant ones;
* ``piecewise``: ten features, a different linear function in each of four regions;
* ``feature-outliers``: a linear target, 1% of the feature values 1,000 times their range (the grid spans
  them: a linear leaf's term diverges on them);
* ``steps``: a target of steps in three of five features (where the constant-leaf tree splits best);
* ``random-walk``: a timestamp feature and a target that wanders (a linear term in time extrapolates);
* the same streams cut short (600 to 2,000 records) in the benchmark's ``robust`` group.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator

import numpy as np

SEED = 7


def _pairs(X: np.ndarray, y: np.ndarray, names: list[str] | None = None) -> Iterator[tuple[dict, float]]:
    keys = names or [f"x{j}" for j in range(X.shape[1])]
    for row, target in zip(X.tolist(), y.tolist(), strict=True):
        yield dict(zip(keys, row, strict=True)), float(target)


def _friedman(X: np.ndarray) -> np.ndarray:
    """Friedman #1 of the first five columns (each uniform on [0, 1])."""
    return 10 * np.sin(np.pi * X[:, 0] * X[:, 1]) + 20 * (X[:, 2] - 0.5) ** 2 + 10 * X[:, 3] + 5 * X[:, 4]


def timestamp(n: int) -> Iterable[tuple[dict, float]]:
    rng = np.random.default_rng(SEED)
    t = 1.7e9 + 60.0 * np.arange(n)
    other = rng.uniform(0, 1, (n, 2))
    trend = 10 * (t - t[0]) / (60.0 * max(n, 1))
    y = trend + 5 * np.sin(2 * np.pi * other[:, 0]) + 3 * other[:, 1] + rng.normal(0, 1, n)
    return _pairs(np.column_stack([t, other]), y, ["time", "a", "b"])


def micro(n: int) -> Iterable[tuple[dict, float]]:
    rng = np.random.default_rng(SEED + 1)
    X = rng.uniform(0, 1, (n, 5))
    return _pairs(X * 1e-6, _friedman(X) + rng.normal(0, 1, n))


def heavy_tail(n: int) -> Iterable[tuple[dict, float]]:
    rng = np.random.default_rng(SEED + 2)
    X = rng.uniform(-1, 1, (n, 4))
    y = 3 * X[:, 0] - 2 * X[:, 1] + X[:, 2] + rng.standard_t(1.5, n)
    return _pairs(X, y)


def step(n: int) -> Iterable[tuple[dict, float]]:
    rng = np.random.default_rng(SEED + 3)
    X = rng.uniform(0, 1, (n, 3))
    y = 4.0 * np.floor(5 * X[:, 0]) + rng.normal(0, 0.5, n)
    return _pairs(X, y)


def outliers(n: int) -> Iterable[tuple[dict, float]]:
    rng = np.random.default_rng(SEED + 4)
    X = rng.uniform(-1, 1, (n, 4))
    y = 3 * X[:, 0] - 2 * X[:, 1] + X[:, 2] + rng.normal(0, 1, n)
    gross = rng.uniform(0, 1, n) < 0.02
    y[gross] += rng.choice([-50.0, 50.0], int(gross.sum()))
    return _pairs(X, y)


def irrelevant(n: int) -> Iterable[tuple[dict, float]]:
    rng = np.random.default_rng(SEED + 5)
    X = rng.uniform(0, 1, (n, 30))
    return _pairs(X, _friedman(X) + rng.normal(0, 1, n))


def piecewise(n: int) -> Iterable[tuple[dict, float]]:
    rng = np.random.default_rng(SEED + 6)
    X = rng.uniform(-1, 1, (n, 10))
    slopes = rng.normal(0, 2, (4, 10))
    region = (X[:, 0] > 0).astype(int) * 2 + (X[:, 1] > 0).astype(int)
    y = np.einsum("ij,ij->i", X, slopes[region]) + 3.0 * region + rng.normal(0, 0.5, n)
    return _pairs(X, y)


def feature_outliers(n: int) -> Iterable[tuple[dict, float]]:
    rng = np.random.default_rng(SEED + 7)
    X = rng.uniform(-1, 1, (n, 4))
    y = 3 * X[:, 0] - 2 * X[:, 1] + rng.normal(0, 1, n)
    X[rng.uniform(0, 1, X.shape) < 0.01] *= 1000.0
    return _pairs(X, y)


def steps(n: int) -> Iterable[tuple[dict, float]]:
    rng = np.random.default_rng(SEED + 8)
    X = rng.uniform(0, 1, (n, 5))
    y = 10 * (X[:, 0] > 0.5) + 5 * (X[:, 1] > 0.3) * (X[:, 2] > 0.7) + rng.normal(0, 0.1, n)
    return _pairs(X, y)


def random_walk(n: int) -> Iterable[tuple[dict, float]]:
    rng = np.random.default_rng(SEED + 9)
    t = 1.7e9 + 60.0 * np.arange(n)
    other = rng.uniform(0, 1, (n, 2))
    y = np.cumsum(rng.normal(0, 0.3, n)) + 3 * other[:, 0] + rng.normal(0, 0.5, n)
    return _pairs(np.column_stack([t, other]), y, ["time", "a", "b"])


#: name -> (generator, records): the benchmark's ``robust`` group (the short ones end in their length)
STREAMS: dict[str, tuple[Callable[[int], Iterable[tuple[dict, float]]], int]] = {
    "stress-timestamp": (timestamp, 10_000),
    "stress-micro": (micro, 10_000),
    "stress-heavy-tail": (heavy_tail, 10_000),
    "stress-step": (step, 10_000),
    "stress-outliers": (outliers, 10_000),
    "stress-irrelevant": (irrelevant, 10_000),
    "stress-piecewise": (piecewise, 10_000),
    "stress-feature-outliers": (feature_outliers, 5_000),
    "stress-steps": (steps, 5_000),
    "stress-random-walk": (random_walk, 5_000),
    "stress-timestamp-600": (timestamp, 600),
    "stress-outliers-1k": (outliers, 1_000),
    "stress-piecewise-2k": (piecewise, 2_000),
}
