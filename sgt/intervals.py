"""Prediction intervals for the regressors: an online conformal layer over prequential residuals.

A regressor built with ``interval_coverages=(0.9, 0.95)`` publishes, per coverage c,
``[prediction - q_c, prediction + q_c]`` with the half-width ``q_c = level_c * s``: ``s`` is the
recent scale of the residuals and ``level_c`` a unit-free multiple of it, tracked online. Every learned
record updates both with its *prequential* absolute residual r = |y - prediction|, the prediction being
the one the model made before learning the record (as `predict_learn_many` returns it, or
`predict_one` before `learn_one`)::

    miss     = 1 if r > level_c * s else 0                 (the published interval missed the record)
    level_c <- max(0, level_c + step(n) * (miss - (1 - c)))     (n: residuals learned before r)
    s       <- s + rate(n + 1) * (min(r, SCALE_CLIP * s) - s)
    step(n)  = max(STEP, min(YOUNG_STEP_CAP, YOUNG_STEP / sqrt(n)))     (STEP from n = 1,112)
    rate(n)  = max(1/n, SCALE_RATE, YOUNG_RATE / sqrt(n))                (SCALE_RATE from n = 4,900)

This is quantile tracking (adaptive conformal inference in the quantile form of Gibbs and Candès 2021;
the proportional term of conformal PID control, Angelopoulos et al. 2023) on residuals normalised by
their recent scale. Its guarantee is finite-sample and needs no assumption on the residuals: over any
stretch of T records, the misses exceed (1 - c) T by at most the level's rise over the stretch divided
by STEP (the level moves by exactly step * (miss - (1 - c)) a record, unless it stops at 0, which only
adds hits); on a stretch that starts young, by at most the level at its end / STEP - the level at its
start / the step there (the step never grows with n). The level is a ratio of residuals and moves
by a unit or so, so the bound is a few records: a unit of rise is 3.3 misses at STEP, a third of a
point over 1,000 records, half a point over 600. Normalising is what keeps the level that still: the
scale follows a change of the residuals' size within about 1 / SCALE_RATE records, so the level
(their shape) barely moves when they grow or jump, where an absolute half-width stepped by the
residual scale lags a growing scale by a share of misses (ChickWeights: 83% for 90%) and a jump by
tens of misses (up to 4 points of a window).

The level starts where it would stand for Gaussian residuals (``z_((1+c)/2) / sqrt(2 / pi)``, the
quantile over the mean of |N(0, 1)|), so a short stream does not spend its first records walking up
from 0; the residual scale's update is clipped at SCALE_CLIP times itself so that one gross outlier
does not widen the next hundred intervals (it still counts as the miss it is). BENCHMARKS.md
(section 10) has the figures and the rules measured against this one: an integrator on the coverage
error (conformal PID), adaptive conformal inference over a window of residuals, a step proportional to
the half-width itself, the levels starting at 0, the layer without its young step and scale rate
or with the young step uncapped.

The young step and rate are for the short growing stream (AirlinePassengers: 144 records whose
residuals peak each summer, the peaks growing). With STEP and a running mean from the start it was
covered 84.7% / 88.9% (single tree): the peaks are four to five times a running-mean scale, so the
level had to climb from 2.1 to 4.4, 7.8 misses at STEP, more than 144 records pay back. A scale
weighted towards recent residuals lags the peaks less, and a large step pays the climb in a few misses;
the cap keeps the first misses of a young layer from throwing the level far up (uncapped, a 600-record
stream of growing Gaussian residuals is over-covered: 92% / 99%). Both are functions of n alone, so
exactness holds and the saved state keeps its format.

The coverages are fixed at construction because an online conformal layer must know its target while
it learns. The arithmetic is on Python floats in record order, whether a batch or a loop learned the
records, so the state has the same bits under any batching and after a save and restore. The saved
state is versioned: format 1 (absolute half-widths, before the levels) restores as the levels that
publish the same half-widths. With no coverage (the default) the models hold no layer and do no work.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from statistics import NormalDist
from typing import Any

import numpy as np

__all__ = [
    "SCALE_CLIP",
    "SCALE_RATE",
    "STATE_VERSION",
    "STEP",
    "YOUNG_RATE",
    "YOUNG_STEP",
    "YOUNG_STEP_CAP",
    "IntervalLayer",
    "check_coverages",
    "initial_level",
    "level_step",
    "scale_rate",
]

#: the level's step per learned record, in units of the residual scale (unit-free)
STEP = 0.3
#: the residual scale's exponential rate (after its first 1 / SCALE_RATE records, a running mean)
SCALE_RATE = 0.01
#: a residual counts towards the scale up to this many times the scale (one outlier moves it by 9%)
SCALE_CLIP = 10.0
#: while young, the residual after n steps the levels by YOUNG_STEP / sqrt(n) (STEP from n = 1,112)
YOUNG_STEP = 10.0
#: ... but by at most YOUNG_STEP_CAP, so that the first few misses do not throw the levels far up
YOUNG_STEP_CAP = 2.0
#: while young, the scale's rate at the n-th residual is YOUNG_RATE / sqrt(n) (SCALE_RATE from 4,900)
YOUNG_RATE = 0.7
#: the saved state's format: 2 = levels and scale (1, unversioned: absolute half-widths)
STATE_VERSION = 2


def level_step(n: int) -> float:
    """The levels' step on the residual that follows `n` >= 1 learned ones: large while the layer is
    young, so that a short stream's level reaches its residuals' shape in a few misses; STEP from
    n = 1,112 on. It never grows with n, which is what the layer's bound needs."""
    return max(STEP, min(YOUNG_STEP_CAP, YOUNG_STEP / math.sqrt(n)))


def scale_rate(n: int) -> float:
    """The scale's rate at the `n`-th residual: the running mean weighted towards recent residuals
    while young (so that it follows a short growing series), SCALE_RATE from n = 4,900 on."""
    return max(1.0 / n, SCALE_RATE, YOUNG_RATE / math.sqrt(n))


def initial_level(coverage: float) -> float:
    """The level at which Gaussian residuals are covered at `coverage`: the (1 + c) / 2 quantile of
    N(0, 1) over E|N(0, 1)| = sqrt(2 / pi) (2.06 for 90%, 2.46 for 95%)."""
    return NormalDist().inv_cdf((1.0 + coverage) / 2.0) / math.sqrt(2.0 / math.pi)


def check_coverages(coverages: Any) -> tuple[float, ...]:
    """The coverages as a sorted tuple without repeats; ValueError naming the setting if invalid."""
    allowed = "interval_coverages must be a sequence of numbers in (0, 1)"
    if isinstance(coverages, (str, bytes)) or not isinstance(coverages, Iterable):
        raise ValueError(f"{allowed}, got {coverages!r}")
    values = list(coverages)
    for c in values:
        ok = isinstance(c, numbers.Real) and not isinstance(c, bool) and 0.0 < float(c) < 1.0
        if not ok:
            raise ValueError(f"{allowed}, got {coverages!r}")
    return tuple(sorted({float(c) for c in values}))


@dataclass
class IntervalLayer:
    """Levels tracked online, one per coverage, and the residuals' scale, from prequential residuals.

    >>> layer = IntervalLayer((0.9,))
    >>> for r in [1.0, -1.0] * 200:
    ...     layer.learn_one(0.0, r)
    >>> 0.9 < layer.half_width(0.9) < 1.2
    True
    >>> layer.interval(5.0, 0.9) == (5.0 - layer.half_width(0.9), 5.0 + layer.half_width(0.9))
    True
    """

    coverages: tuple[float, ...]
    levels: list[float] = field(default_factory=list)
    scale: float = 0.0
    n: int = 0

    def __post_init__(self) -> None:
        if not self.levels:
            self.levels = [initial_level(c) for c in self.coverages]

    # -- learning ------------------------------------------------------------------------------
    def learn_one(self, prediction: float, target: float) -> None:
        """Learn the residual of one record (`prediction`: made before the model learned it)."""
        r = abs(float(target) - float(prediction))
        if not math.isfinite(r):
            return  # an overflowing prediction says nothing about the residuals' spread
        if self.n:  # (the first residual has no interval to score: it only sets the scale)
            self._track(r)
        self.n += 1
        scale = self.scale
        counted = min(r, SCALE_CLIP * scale) if scale > 0.0 else r
        self.scale = scale + scale_rate(self.n) * (counted - scale)

    def _track(self, r: float) -> None:
        """Move each level by level_step(n) * (miss - (1 - c)); the miss is judged by the published half-width
        (the same product `half_width` returns), so the layer scores exactly what it published."""
        levels, scale, step = self.levels, self.scale, level_step(self.n)
        for k, c in enumerate(self.coverages):
            level = levels[k]
            # a miss moves the level up by step * (1 - alpha), a hit down by step * alpha (alpha = 1 - c)
            levels[k] = max(0.0, level + step * (c if r > level * scale else c - 1.0))

    def learn_many(
        self, predictions: np.ndarray, targets: Sequence[Any], coverage: float | None = None
    ) -> np.ndarray | None:
        """`learn_one` for each row in order; rows whose target is None are skipped. With `coverage`,
        return each row's half-width at that coverage as it was before the row was learned."""
        k = -1 if coverage is None else self._index(coverage)
        widths: list[float] = []
        for prediction, target in zip(np.asarray(predictions, dtype=float).tolist(), targets):
            if k >= 0:
                widths.append(self.levels[k] * self.scale if self.n else math.inf)
            if target is not None:
                self.learn_one(prediction, float(target))
        return None if k < 0 else np.array(widths, dtype=float)

    # -- prediction ----------------------------------------------------------------------------
    def half_width(self, coverage: float) -> float:
        """The half-width of the interval at `coverage` (inf before any residual was learned)."""
        k = self._index(coverage)
        return self.levels[k] * self.scale if self.n else math.inf

    def interval(self, prediction: float, coverage: float) -> tuple[float, float]:
        """(low, high) around `prediction` at `coverage`."""
        q = self.half_width(coverage)
        return prediction - q, prediction + q

    def intervals(self, predictions: np.ndarray, coverage: float) -> np.ndarray:
        """[rows, 2]: each prediction's (low, high) at `coverage`."""
        q = self.half_width(coverage)
        predictions = np.asarray(predictions, dtype=float)
        return np.column_stack([predictions - q, predictions + q])

    def _index(self, coverage: float) -> int:
        for k, c in enumerate(self.coverages):
            if c == coverage:
                return k
        tracked = ", ".join(repr(c) for c in self.coverages)
        raise ValueError(
            f"coverage must be one of the tracked interval_coverages ({tracked}), got {coverage!r}"
        )

    # -- state ---------------------------------------------------------------------------------
    def state(self) -> dict[str, Any]:
        """JSON-safe state (Python's float repr round-trips exactly), in format STATE_VERSION."""
        return {"version": STATE_VERSION, "levels": list(self.levels), "scale": self.scale, "n": self.n}

    @classmethod
    def restore(cls, coverages: tuple[float, ...], state: Mapping[str, Any] | None) -> IntervalLayer:
        """The layer of a saved `state`; None (a model saved without one): an empty layer."""
        layer = cls(coverages)
        if state is None:
            return layer
        version = state.get("version", 1)
        if version == 1:
            levels = _levels_of_half_widths(coverages, state)
        elif version == STATE_VERSION:
            levels = [float(v) for v in state["levels"]]
        else:
            raise ValueError(f"interval layer state version {version!r}: this sgt reads versions 1 and 2")
        if len(levels) != len(coverages):
            raise ValueError(f"{len(levels)} saved levels do not fit the coverages {coverages}")
        layer.levels, layer.scale, layer.n = levels, float(state["scale"]), int(state["n"])
        return layer


def _levels_of_half_widths(coverages: tuple[float, ...], state: Mapping[str, Any]) -> list[float]:
    """Format 1 saved absolute half-widths q: the levels q / scale publish them again (a layer whose
    residuals were all 0 has scale 0 and publishes 0 at any level: it keeps the initial ones)."""
    widths = [float(q) for q in state["half_widths"]]
    if len(widths) != len(coverages):
        raise ValueError(f"{len(widths)} saved half-widths do not fit the coverages {coverages}")
    scale = float(state["scale"])
    if scale > 0.0:
        return [q / scale for q in widths]
    return [initial_level(c) for c in coverages]
