"""Generated stress streams: data no default was tuned on, as a new user would bring it.

Each generator is seeded and yields River-style ``(dict, target)`` pairs, so the streams plug into
``tests/bench/streams.py`` like River's own. The regression streams (``STREAMS``) probe what breaks a
leaf model on day one:

* ``timestamp``: a feature at timestamp scale (about 1.7e9, one step a minute) that drives a trend, beside
  two ordinary features;
* ``micro``: every feature at micro scale (1e-6), a Friedman-like target;
* ``heavy-tail``: a linear target under Student t noise with 1.5 degrees of freedom (infinite variance);
* ``step``: a step-shaped target of one feature (five levels), two irrelevant features;
* ``outliers``: a linear target with 2% gross outliers (50 standard deviations);
* ``irrelevant``: Friedman #1's five informative features among 25 irrelevant ones;
* ``piecewise``: ten features, a different linear function in each of four regions;
* ``feature-outliers``: a linear target, 1% of the feature values 1,000 times their range (a grid that grew
  to hold them left the ordinary values one bin, and a linear leaf's term diverged on them);
* ``steps``: a target of steps in three of five features (where the constant-leaf tree splits best);
* ``random-walk``: a timestamp feature and a target that wanders (a linear term in time extrapolates);
* the same streams cut short (600 to 2,000 records) in the benchmark's ``robust`` group.

The classification streams (``CLASSIFICATION``; labels are ints) probe the same for classifiers and
ensembles:

* ``timestamp-binary`` / ``micro-binary``: a binary concept beside a timestamp-scale feature, or with
  every feature at micro scale;
* ``irrelevant-binary``: Friedman #1 above 14 from five informative features among 25 irrelevant ones;
* ``imbalance-95``: a binary stream, 5% positives, shifted in three of eight Gaussian features;
* ``skewed-10``: ten Gaussian classes in eight dimensions, priors falling by 0.6 a class (43% to 0.4%);
* ``label-noise-10`` / ``label-noise-30``: a clean nonlinear binary concept, 10% or 30% of the labels
  flipped;
* ``led-24``: the LED display's ten digits, each of the seven segments flipped with probability 0.1,
  beside 17 irrelevant random bits (24 binary features, a noisy 10-class stream);
* ``moons`` / ``checkerboard``: 2-D nonlinear binary sets (two interleaved half circles with Gaussian
  noise 0.25; a 4 × 4 checkerboard, where no single split gains: a greedy tree must split blind);
* short versions (600 to 2,000 records).
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


# -- classification ---------------------------------------------------------------------------------

CLASSIFICATION_SEED = 101


def _labelled(X: np.ndarray, y: np.ndarray, names: list[str] | None = None) -> Iterator[tuple[dict, int]]:
    keys = names or [f"x{j}" for j in range(X.shape[1])]
    for row, label in zip(X.tolist(), y.tolist(), strict=True):
        yield dict(zip(keys, row, strict=True)), int(label)


def _flip(rng: np.random.Generator, y: np.ndarray, share: float, classes: int = 2) -> np.ndarray:
    """``y`` with ``share`` of the labels replaced by another class drawn uniformly."""
    flipped = rng.uniform(0, 1, len(y)) < share
    shift = rng.integers(1, classes, len(y))
    return np.where(flipped, (y + shift) % classes, y)


def timestamp_binary(n: int) -> Iterable[tuple[dict, int]]:
    rng = np.random.default_rng(CLASSIFICATION_SEED)
    t = 1.7e9 + 60.0 * np.arange(n)
    other = rng.uniform(0, 1, (n, 2))
    trend = (t - t[0]) / (60.0 * max(n, 1)) - 0.5  # the boundary moves with time
    score = np.sin(2 * np.pi * other[:, 0]) + 2 * other[:, 1] - 1 + trend + rng.normal(0, 0.3, n)
    return _labelled(np.column_stack([t, other]), (score > 0).astype(int), ["time", "a", "b"])


def micro_binary(n: int) -> Iterable[tuple[dict, int]]:
    rng = np.random.default_rng(CLASSIFICATION_SEED + 1)
    X = rng.uniform(0, 1, (n, 5))
    return _labelled(X * 1e-6, (_friedman(X) + rng.normal(0, 1, n) > 14.0).astype(int))


def irrelevant_binary(n: int) -> Iterable[tuple[dict, int]]:
    rng = np.random.default_rng(CLASSIFICATION_SEED + 2)
    X = rng.uniform(0, 1, (n, 30))
    return _labelled(X, (_friedman(X) + rng.normal(0, 1, n) > 14.0).astype(int))


def imbalance_95(n: int) -> Iterable[tuple[dict, int]]:
    rng = np.random.default_rng(CLASSIFICATION_SEED + 3)
    y = (rng.uniform(0, 1, n) < 0.05).astype(int)
    X = rng.normal(0, 1, (n, 8))
    X[:, :3] += 1.5 * y[:, None]
    return _labelled(X, y)


def skewed_10(n: int) -> Iterable[tuple[dict, int]]:
    rng = np.random.default_rng(CLASSIFICATION_SEED + 4)
    prior = 0.6 ** np.arange(10)
    y = rng.choice(10, n, p=prior / prior.sum())
    centres = rng.normal(0, 1.5, (10, 8))
    return _labelled(centres[y] + rng.normal(0, 1, (n, 8)), y)


def _nonlinear_concept(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    X = rng.uniform(0, 1, (n, 5))
    return X, (X[:, 0] + X[:, 1] + 0.5 * np.sin(2 * np.pi * X[:, 2]) > 1).astype(int)


def label_noise(share: float) -> Callable[[int], Iterable[tuple[dict, int]]]:
    """The nonlinear binary concept with ``share`` of its labels flipped (the same records per share)."""

    def make(n: int) -> Iterable[tuple[dict, int]]:
        rng = np.random.default_rng(CLASSIFICATION_SEED + 5)
        X, y = _nonlinear_concept(rng, n)
        return _labelled(X, _flip(np.random.default_rng(CLASSIFICATION_SEED + 6), y, share))

    return make


# the seven segments (top, upper left, upper right, middle, lower left, lower right, bottom) of each digit
_SEGMENTS = np.array([
    [1, 1, 1, 0, 1, 1, 1], [0, 0, 1, 0, 0, 1, 0], [1, 0, 1, 1, 1, 0, 1], [1, 0, 1, 1, 0, 1, 1],
    [0, 1, 1, 1, 0, 1, 0], [1, 1, 0, 1, 0, 1, 1], [1, 1, 0, 1, 1, 1, 1], [1, 0, 1, 0, 0, 1, 0],
    [1, 1, 1, 1, 1, 1, 1], [1, 1, 1, 1, 0, 1, 1],
])  # fmt: skip


def led_24(n: int) -> Iterable[tuple[dict, int]]:
    rng = np.random.default_rng(CLASSIFICATION_SEED + 7)
    y = rng.integers(0, 10, n)
    segments = _SEGMENTS[y] ^ (rng.uniform(0, 1, (n, 7)) < 0.1)
    X = np.column_stack([segments, rng.integers(0, 2, (n, 17))]).astype(float)
    return _labelled(X, y)


def moons(n: int) -> Iterable[tuple[dict, int]]:
    rng = np.random.default_rng(CLASSIFICATION_SEED + 8)
    y = rng.integers(0, 2, n)
    angle = rng.uniform(0, np.pi, n)
    x0 = np.where(y == 0, np.cos(angle), 1 - np.cos(angle))
    x1 = np.where(y == 0, np.sin(angle), 0.5 - np.sin(angle))
    return _labelled(np.column_stack([x0, x1]) + rng.normal(0, 0.25, (n, 2)), y)


def checkerboard(n: int) -> Iterable[tuple[dict, int]]:
    rng = np.random.default_rng(CLASSIFICATION_SEED + 9)
    X = rng.uniform(0, 1, (n, 2))
    cells = np.floor(4 * X).astype(int)
    return _labelled(X, (cells.sum(axis=1) % 2).astype(int))


#: name -> (generator, records, task): the classification streams of the ``robust`` group
CLASSIFICATION: dict[str, tuple[Callable[[int], Iterable[tuple[dict, int]]], int, str]] = {
    "stress-timestamp-binary": (timestamp_binary, 10_000, "binary"),
    "stress-micro-binary": (micro_binary, 10_000, "binary"),
    "stress-irrelevant-binary": (irrelevant_binary, 10_000, "binary"),
    "stress-imbalance-95": (imbalance_95, 10_000, "binary"),
    "stress-skewed-10": (skewed_10, 10_000, "multiclass"),
    "stress-label-noise-10": (label_noise(0.1), 10_000, "binary"),
    "stress-label-noise-30": (label_noise(0.3), 10_000, "binary"),
    "stress-led-24": (led_24, 10_000, "multiclass"),
    "stress-moons": (moons, 5_000, "binary"),
    "stress-checkerboard": (checkerboard, 10_000, "binary"),
    "stress-moons-600": (moons, 600, "binary"),
    "stress-checkerboard-1k": (checkerboard, 1_000, "binary"),
    "stress-imbalance-95-2k": (imbalance_95, 2_000, "binary"),
    "stress-skewed-10-2k": (skewed_10, 2_000, "multiclass"),
    "stress-led-24-2k": (led_24, 2_000, "multiclass"),
    "stress-label-noise-30-1k": (label_noise(0.3), 1_000, "binary"),
}

#: name -> (generator, records): the regression streams of the ``robust`` group (short: length in name)
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
