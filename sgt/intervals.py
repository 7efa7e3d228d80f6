"""Prediction intervals for the regressors: an online conformal layer over prequential residuals.

A regressor built with ``interval_coverages=(0.9, 0.95)`` keeps, per coverage c, a half-width q_c
and publishes ``[prediction - q_c, prediction + q_c]``. Every learned record updates the layer with
its *prequential* absolute residual r = |y - prediction|, the prediction being the one the model made
before learning the record (as `predict_learn_many` returns it, or `predict_one` before `learn_one`).

The update is online quantile tracking with a scale-adaptive step (the proportional term of conformal
PID control, Angelopoulos et al. 2023; a quantile form of adaptive conformal inference, Gibbs and
Candès 2021)::

    miss = 1 if r > q_c else 0
    q_c <- max(0, q_c + STEP * s * (miss - (1 - c)))
    s   <- s + max(1/n, SCALE_RATE) * (r - s)        (s: a running mean of r, n: records learned)

Summed over any stretch of T records, the misses differ from (1 - c) T by the change of q_c over it
divided by the step: coverage is held over every window, not only in the long run, and after a drift
the step (proportional to the current residual scale) widens the interval within tens of records. A
fixed window's empirical quantile, the alternative measured against it (BENCHMARKS.md), has no such
feedback: its coverage drifts with the residuals' distribution. The coverages are fixed at
construction because an online conformal layer must know its target while it learns.

The arithmetic is on Python floats in record order, whether a batch or a loop learned the records,
so the state has the same bits under any batching and after a save and restore. With no coverage
(the default) the models hold no layer and do no work.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

__all__ = ["SCALE_RATE", "STEP", "IntervalLayer", "check_coverages"]

#: the step of a half-width, as a share of the residual scale, per learned record
STEP = 0.2
#: the residual scale's exponential rate (after its first 1 / SCALE_RATE records, a running mean)
SCALE_RATE = 0.01


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
    """Half-widths tracked online, one per coverage, from prequential absolute residuals.

    >>> layer = IntervalLayer((0.9,))
    >>> for r in [1.0, -1.0] * 200:
    ...     layer.learn_one(0.0, r)
    >>> round(layer.half_width(0.9), 3)
    1.0
    >>> layer.interval(5.0, 0.9) == (5.0 - layer.half_width(0.9), 5.0 + layer.half_width(0.9))
    True
    """

    coverages: tuple[float, ...]
    half_widths: list[float] = field(default_factory=list)
    scale: float = 0.0
    n: int = 0

    def __post_init__(self) -> None:
        if not self.half_widths:
            self.half_widths = [0.0] * len(self.coverages)

    # -- learning ------------------------------------------------------------------------------
    def learn_one(self, prediction: float, target: float) -> None:
        """Learn the residual of one record (`prediction`: made before the model learned it)."""
        r = abs(float(target) - float(prediction))
        if not math.isfinite(r):
            return  # an overflowing prediction says nothing about the residuals' spread
        self.n += 1
        step = STEP * (r if self.n == 1 else self.scale)
        widths = self.half_widths
        for k, c in enumerate(self.coverages):
            q = widths[k]
            # a miss moves q up by step * (1 - alpha), a hit down by step * alpha (alpha = 1 - c)
            widths[k] = max(0.0, q + step * (c if r > q else c - 1.0))
        rate = max(1.0 / self.n, SCALE_RATE)
        self.scale = self.scale + rate * (r - self.scale)

    def learn_many(
        self, predictions: np.ndarray, targets: Sequence[Any], coverage: float | None = None
    ) -> np.ndarray | None:
        """`learn_one` for each row in order; rows whose target is None are skipped. With `coverage`,
        return each row's half-width at that coverage as it was before the row was learned."""
        k = -1 if coverage is None else self._index(coverage)
        widths: list[float] = []
        for prediction, target in zip(np.asarray(predictions, dtype=float).tolist(), targets):
            if k >= 0:
                widths.append(self.half_widths[k] if self.n else math.inf)
            if target is not None:
                self.learn_one(prediction, float(target))
        return None if k < 0 else np.array(widths, dtype=float)

    # -- prediction ----------------------------------------------------------------------------
    def half_width(self, coverage: float) -> float:
        """The half-width of the interval at `coverage` (inf before any residual was learned)."""
        k = self._index(coverage)
        return self.half_widths[k] if self.n else math.inf

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
        """JSON-safe state (Python's float repr round-trips exactly)."""
        return {"half_widths": list(self.half_widths), "scale": self.scale, "n": self.n}

    @classmethod
    def restore(cls, coverages: tuple[float, ...], state: Mapping[str, Any] | None) -> IntervalLayer:
        """The layer of a saved `state`; None (a model saved without one): an empty layer."""
        layer = cls(coverages)
        if state is None:
            return layer
        widths = [float(q) for q in state["half_widths"]]
        if len(widths) != len(coverages):
            raise ValueError(f"{len(widths)} saved half-widths do not fit the coverages {coverages}")
        layer.half_widths, layer.scale, layer.n = widths, float(state["scale"]), int(state["n"])
        return layer
