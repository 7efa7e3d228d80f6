"""Deterministic synthetic data streams with concept drift, in pure numpy.

Every stream is a frozen description (parameters and a seed). Row ``i`` of a stream is a pure function
of that description and ``i``: the random numbers for row ``i`` come from counter-based positions of a
seeded PCG64 generator. So a stream can be read from any position, in any batch sizes, by any number of
threads or processes, and always yields the same rows. That is what lets the load generator resume at a
record id and lets tests compare what the worker saw with what was produced.

Each stream offers two views of the same rows:

- ``stream.batch(n, start)``: arrays ``(X, y)`` (``X`` is float64, or ``object`` when the stream has
  nominal features; ``y`` is int64 labels or float64 targets);
- ``iter(stream)`` / ``stream.iterate(start)``: an endless generator of ``(x, y)`` with ``x`` a dict
  from feature name to ``float`` or ``str`` and ``y`` a Python ``int`` or ``float``.

>>> stream = make_stream("sea", seed=3)
>>> X, y = stream.batch(4)
>>> X.shape, y.dtype.kind
((4, 3), 'i')
>>> x, label = next(iter(stream))
>>> sorted(x) == sorted(stream.feature_names) and x["x1"] == float(X[0, 0]) and label == int(y[0])
True
>>> bool((stream.batch(2, start=2)[0] == X[2:]).all())
True
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, ClassVar

import numpy as np

Features = dict[str, float | str]
Label = int | float

# Independent random sub-streams of one seed: one per purpose, so that adding a purpose never
# changes the numbers drawn for another.
_KEY_FEATURES = 1
_KEY_NOISE = 2
_KEY_CONCEPT = 3

DRIFT_PERIOD = 40_000
"""Default records per concept of the abruptly drifting streams: 20 s at the demo's 2,000 records/s, so
each of 4 partitions sees 10,000 records of a concept, enough for its tree to settle before it changes."""


def uniforms(seed: int, key: int, start: int, n: int, width: int) -> np.ndarray:
    """Uniform [0, 1) numbers of rows ``start .. start + n`` of a ``width``-wide random table.

    Row ``i`` is the same whatever ``start`` and ``n`` are: the generator jumps straight to position
    ``i * width`` (PCG64 draws one 64-bit word per double).

    >>> a = uniforms(7, 1, 0, 5, 2)
    >>> bool((uniforms(7, 1, 3, 2, 2) == a[3:]).all())
    True
    """
    bits = np.random.PCG64(np.random.SeedSequence([seed, key]))
    bits.advance(start * width)
    return np.random.Generator(bits).random((n, width))


def _flip(labels: np.ndarray, seed: int, start: int, rate: float) -> np.ndarray:
    """Binary labels with each one inverted with probability ``rate`` (label noise)."""
    if rate <= 0.0:
        return labels
    flips = uniforms(seed, _KEY_NOISE, start, len(labels), 1)[:, 0] < rate
    return np.where(flips, 1 - labels, labels)


def _pick(u: np.ndarray, choices: tuple[str, ...]) -> np.ndarray:
    """Map uniforms to equally likely choices (object array of strings)."""
    index = np.minimum((u * len(choices)).astype(np.int64), len(choices) - 1)
    return np.asarray(choices, dtype=object)[index]


@dataclass(frozen=True)
class Stream(ABC):
    """A deterministic, endless, randomly accessible stream of ``(x, y)`` rows."""

    seed: int = 42
    task: ClassVar[str] = "classification"

    @property
    @abstractmethod
    def feature_names(self) -> tuple[str, ...]:
        """Names of the features, in column order of `batch`."""

    @abstractmethod
    def batch(self, n: int, start: int = 0) -> tuple[np.ndarray, np.ndarray]:
        """Rows ``start .. start + n`` as arrays ``(X, y)``."""

    def iterate(self, start: int = 0, chunk: int = 512) -> Iterator[tuple[Features, Label]]:
        """Rows from ``start`` on, one ``(x: dict, y)`` pair at a time, generated ``chunk`` rows at once."""
        names = self.feature_names
        position = start
        while True:
            X, y = self.batch(chunk, position)
            for row, label in zip(X.tolist(), y.tolist(), strict=True):
                yield dict(zip(names, row, strict=True)), label
            position += chunk

    def take(self, n: int, start: int = 0) -> list[tuple[Features, Label]]:
        """The first ``n`` rows of `iterate` from ``start`` as a list."""
        names = self.feature_names
        X, y = self.batch(n, start)
        return [
            (dict(zip(names, row, strict=True)), label)
            for row, label in zip(X.tolist(), y.tolist(), strict=True)
        ]

    def __iter__(self) -> Iterator[tuple[Features, Label]]:
        return self.iterate()


@dataclass(frozen=True)
class RotatingHyperplane(Stream):
    """Binary classification by a hyperplane through the centre of ``[0, 1]^n`` that rotates steadily.

    The normal vector turns by ``speed`` radians per record in a random plane (gradual drift): after
    ``pi / speed`` records every label has flipped. ``noise`` is the probability that a label is
    inverted. Classes stay balanced at every moment.

    >>> s = RotatingHyperplane(n_features=4, speed=0.0, noise=0.0, seed=1)
    >>> X, y = s.batch(1000)
    >>> X.shape, s.feature_names[:2], sorted(set(y.tolist()))
    ((1000, 4), ('x0', 'x1'), [0, 1])
    >>> w = s.normal_at(np.array([0]))[0]
    >>> bool((y == ((X - 0.5) @ w >= 0)).all())
    True
    """

    n_features: int = 10
    speed: float = 1e-4
    noise: float = 0.05

    @property
    def feature_names(self) -> tuple[str, ...]:
        return tuple(f"x{i}" for i in range(self.n_features))

    def _plane(self) -> tuple[np.ndarray, np.ndarray]:
        """Two orthonormal vectors spanning the plane of rotation."""
        gauss = np.random.Generator(np.random.PCG64(np.random.SeedSequence([self.seed, _KEY_CONCEPT])))
        a, b = gauss.standard_normal((2, self.n_features))
        a /= np.linalg.norm(a)
        b -= (b @ a) * a
        b /= np.linalg.norm(b)
        return a, b

    def normal_at(self, positions: np.ndarray) -> np.ndarray:
        """The hyperplane's unit normal at each record position (one row per position)."""
        a, b = self._plane()
        angle = self.speed * positions.astype(np.float64)
        return np.cos(angle)[:, None] * a + np.sin(angle)[:, None] * b

    def batch(self, n: int, start: int = 0) -> tuple[np.ndarray, np.ndarray]:
        X = uniforms(self.seed, _KEY_FEATURES, start, n, self.n_features)
        normals = self.normal_at(np.arange(start, start + n))
        clean = (np.einsum("ij,ij->i", X - 0.5, normals) >= 0).astype(np.int64)
        return X, _flip(clean, self.seed, start, self.noise)


@dataclass(frozen=True)
class SEA(Stream):
    """The SEA concepts (Street and Kim, 2001): abrupt drift between four thresholds.

    Three features uniform on ``[0, 10]``; ``y = 1`` when ``x1 + x2 <= threshold`` (``x3`` is
    irrelevant). The threshold moves through ``thresholds`` every ``period`` records, cyclically, so
    the concept changes abruptly. ``noise`` is the probability that a label is inverted.

    >>> s = SEA(period=100, noise=0.0)
    >>> X, y = s.batch(400)
    >>> [s.threshold_at(i) for i in (0, 99, 100, 399)]
    [8.0, 8.0, 9.0, 9.5]
    >>> bool((y == (X[:, 0] + X[:, 1] <= np.array([s.threshold_at(i) for i in range(400)]))).all())
    True
    """

    period: int = DRIFT_PERIOD
    noise: float = 0.1
    thresholds: tuple[float, ...] = (8.0, 9.0, 7.0, 9.5)

    @property
    def feature_names(self) -> tuple[str, ...]:
        return ("x1", "x2", "x3")

    def threshold_at(self, position: int) -> float:
        """The threshold in force for the record at ``position``."""
        return self.thresholds[(position // self.period) % len(self.thresholds)]

    def batch(self, n: int, start: int = 0) -> tuple[np.ndarray, np.ndarray]:
        X = 10.0 * uniforms(self.seed, _KEY_FEATURES, start, n, 3)
        concept = (np.arange(start, start + n) // self.period) % len(self.thresholds)
        clean = (X[:, 0] + X[:, 1] <= np.asarray(self.thresholds)[concept]).astype(np.int64)
        return X, _flip(clean, self.seed, start, self.noise)


@dataclass(frozen=True)
class Friedman(Stream):
    """Friedman #1 regression with abrupt drift in which features matter.

    Ten features uniform on ``[0, 1]``; ``y = 10 sin(pi a b) + 20 (c - 0.5)^2 + 10 d + 5 e + noise * N(0, 1)``
    where ``(a, b, c, d, e)`` are the first five features of a permutation of the ten. The first
    ``period`` records use ``x0 .. x4``; every later block of ``period`` records uses a fresh
    permutation drawn from the seed, so the relevant features change abruptly.

    >>> s = Friedman(noise=0.0, period=50)
    >>> X, y = s.batch(100)
    >>> a, b, c, d, e = X[:50, :5].T
    >>> bool(np.allclose(y[:50], 10 * np.sin(np.pi * a * b) + 20 * (c - 0.5) ** 2 + 10 * d + 5 * e))
    True
    >>> s.relevant_at(0), len(set(s.relevant_at(50)))
    ((0, 1, 2, 3, 4), 5)
    """

    period: int = DRIFT_PERIOD
    noise: float = 1.0
    task: ClassVar[str] = "regression"

    @property
    def feature_names(self) -> tuple[str, ...]:
        return tuple(f"x{i}" for i in range(10))

    def relevant_at(self, position: int) -> tuple[int, ...]:
        """Indices of the five features that drive the target at ``position``."""
        block = position // self.period
        if block == 0:
            return (0, 1, 2, 3, 4)
        order = np.random.Generator(np.random.PCG64(np.random.SeedSequence([self.seed, _KEY_CONCEPT, block])))
        return tuple(int(i) for i in order.permutation(10)[:5])

    def batch(self, n: int, start: int = 0) -> tuple[np.ndarray, np.ndarray]:
        X = uniforms(self.seed, _KEY_FEATURES, start, n, 10)
        y = np.empty(n, dtype=np.float64)
        positions = np.arange(start, start + n)
        for block in np.unique(positions // self.period):
            rows = positions // self.period == block
            a, b, c, d, e = X[rows][:, list(self.relevant_at(int(block) * self.period))].T
            y[rows] = 10 * np.sin(np.pi * a * b) + 20 * (c - 0.5) ** 2 + 10 * d + 5 * e
        if self.noise > 0.0:
            u = uniforms(self.seed, _KEY_NOISE, start, n, 2)
            # Box-Muller from two uniforms per row keeps row i a function of i alone.
            y += self.noise * np.sqrt(-2.0 * np.log1p(-u[:, 0])) * np.cos(2.0 * math.pi * u[:, 1])
        return X, y


@dataclass(frozen=True)
class Subscriptions(Stream):
    """Churn of subscribers, with nominal features and abrupt drift.

    Features: ``plan`` (``free``, ``basic``, ``pro``, ``team``), ``region`` (``eu``, ``us``, ``apac``),
    ``usage`` in ``[0, 10]`` and ``tenure`` in ``[0, 60]`` months. A subscriber churns (``y = 1``)
    when their usage is below their plan's cut-off, or when they are in ``apac`` with under a year of
    tenure. Every ``period`` records the cut-offs are handed to the plans in reverse order (abrupt
    drift that only a model splitting on ``plan`` can follow). ``noise`` inverts labels.

    >>> s = Subscriptions(noise=0.0)
    >>> X, y = s.batch(3)
    >>> X.dtype, s.feature_names
    (dtype('O'), ('plan', 'region', 'usage', 'tenure'))
    >>> x, _ = s.take(1)[0]
    >>> x["plan"] in Subscriptions.plans and isinstance(x["usage"], float)
    True
    """

    period: int = DRIFT_PERIOD
    noise: float = 0.05
    plans: ClassVar[tuple[str, ...]] = ("free", "basic", "pro", "team")
    regions: ClassVar[tuple[str, ...]] = ("eu", "us", "apac")
    cutoffs: ClassVar[tuple[float, ...]] = (6.0, 4.0, 2.0, 1.0)

    @property
    def feature_names(self) -> tuple[str, ...]:
        return ("plan", "region", "usage", "tenure")

    def batch(self, n: int, start: int = 0) -> tuple[np.ndarray, np.ndarray]:
        u = uniforms(self.seed, _KEY_FEATURES, start, n, 4)
        plan_index = np.minimum((u[:, 0] * len(self.plans)).astype(np.int64), len(self.plans) - 1)
        usage = 10.0 * u[:, 2]
        tenure = 60.0 * u[:, 3]
        reversed_concept = (np.arange(start, start + n) // self.period) % 2 == 1
        cutoff_index = np.where(reversed_concept, len(self.plans) - 1 - plan_index, plan_index)
        region = _pick(u[:, 1], self.regions)
        churn = (usage < np.asarray(self.cutoffs)[cutoff_index]) | ((region == "apac") & (tenure < 12.0))
        X = np.empty((n, 4), dtype=object)
        X[:, 0] = np.asarray(self.plans, dtype=object)[plan_index]
        X[:, 1] = region
        X[:, 2] = usage
        X[:, 3] = tenure
        return X, _flip(churn.astype(np.int64), self.seed, start, self.noise)


STREAMS: Mapping[str, type[Stream]] = MappingProxyType(
    {"hyperplane": RotatingHyperplane, "sea": SEA, "friedman": Friedman, "subscriptions": Subscriptions}
)
"""Streams by the name that ``sgt-worker produce --stream`` accepts."""

DEMO_STREAM = "sea"
"""The stream the demo uses: its error visibly drops while a concept lasts and jumps when it changes."""


def make_stream(name: str, seed: int = 42, **params: Any) -> Stream:
    """The stream called ``name`` (a key of `STREAMS`) with the given seed and parameters.

    >>> make_stream("friedman", seed=1, period=500).task
    'regression'
    """
    try:
        kind = STREAMS[name]
    except KeyError:
        raise ValueError(f"unknown stream {name!r}; choose one of {', '.join(STREAMS)}") from None
    return kind(seed=seed, **params)
