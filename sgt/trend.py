"""`TrendOffset`: the regressors' offset for a trend, a slow running mean of the targets' move, which the
trees learn the targets minus (each row's offset as it stood before the row) and the prediction adds.

A target with a trend under a function of the features (y = t + f(x), t rising with time) leaves every
leaf's value stale at its own pace: a leaf moves only when its block of records fills, so the leaves
that see few records lag the trend most, and the error grows along the stream. A residual level
(sgt.residual) adds one correction to every leaf alike and cannot undo lags that differ by leaf. With
the offset the trees learn y minus the trend carried by a running mean of the targets: f(x) and a lag
the same for every leaf (the mean's own lag behind the trend, steady once the slope is).

The offset is 0 until the trend shows, so that on a stream without one the trees learn exactly what
they learned without the offset (a mean of the targets that jitters with f(x) is noise to the trees, and
any change of what the young trees learn moves where they split: measured, docs/decisions.md). The mean
(a plain mean for its first `1 / rate` targets, then exponentially weighted at `rate`) is taken as the
reference once it has seen `1 / rate` targets; once it has moved from there by more than `threshold`
times the spread that move would have on independent targets (the targets' variance, weighted alike,
times rate / (2 - rate) for the mean and rate for the reference, a plain mean of 1 / rate), the offset
is the mean minus the reference from then on.

Exact and cheap: a few float operations per learned record in row order, a function of the targets
alone (not of any prediction), so a batch's offsets are known before its trees run, the one-record loop
makes the same operations, and the state (seven numbers) is saved exactly.

>>> trend = TrendOffset(0.25, threshold=1.0)
>>> [trend.take(y) for y in (0.0, 0.0, 0.0, 0.0, 4.0, 4.0, 4.0)]  # each target minus the offset before it
[0.0, 0.0, 0.0, 0.0, 4.0, 4.0, 2.25]
>>> trend.offset()  # the mean moved from 0 (its reference) beyond the threshold at the sixth target
2.3125
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from sgt import kernels

__all__ = ["TREND_RATE", "TREND_THRESHOLD", "TrendOffset"]

#: the rate of the running mean of the targets (a memory of about 100 records; docs/decisions.md,
#: "The trend offset")
TREND_RATE = 0.01
#: how many times its spread on independent targets the mean's move must exceed before the offset
#: follows it (at 6, none of 72 stationary streams of 50,000 records set it off; at 5, one)
TREND_THRESHOLD = 6.0

_KEYS = {"rate", "threshold", "count", "mean", "variance", "reference", "following"}


class TrendOffset:
    """A running mean of the learned targets (a step of max(rate, 1/n) at the n-th), its reference (its
    value at the `1 / rate`-th target) and whether the offset follows it; the trees' targets are the
    learned targets minus the offset before each."""

    def __init__(
        self,
        rate: float = TREND_RATE,
        threshold: float = TREND_THRESHOLD,
        count: int = 0,
        mean: float = 0.0,
        variance: float = 0.0,
        reference: float | None = None,
        following: bool = False,
    ) -> None:
        if not (isinstance(rate, (int, float)) and 0.0 < rate <= 1.0):
            raise ValueError(f"a trend offset's rate must be in (0, 1], got {rate!r}")
        if not (isinstance(threshold, (int, float)) and 0.0 <= threshold < math.inf):
            raise ValueError(f"a trend offset's threshold must be a finite number >= 0, got {threshold!r}")
        numbers = (mean, variance, 0.0 if reference is None else reference)
        if not all(math.isfinite(v) for v in numbers) or count < 0 or variance < 0:
            raise ValueError("a trend offset's mean, variance and reference must be finite, its count >= 0")
        self.rate = float(rate)
        self.threshold = float(threshold)
        self.count = int(count)
        self.mean = float(mean)
        self.variance = float(variance)
        self.reference = None if reference is None else float(reference)
        self.following = bool(following)
        # the targets after which the mean is the reference
        self._span = max(1, round(1.0 / self.rate))

    def offset(self) -> float:
        """The offset of the next row: the mean's move from its reference once it follows, else 0."""
        if not self.following:
            return 0.0
        assert self.reference is not None
        return self.mean - self.reference

    def take(self, target: float) -> float:
        """The trees' target for a learned `target` (the target minus the offset before it), after
        which the mean learns it. A non-finite target leaves the state as it was."""
        target = float(target)
        shifted = target - self.offset()
        if not math.isfinite(target):
            return shifted
        self.count += 1
        step = max(self.rate, 1.0 / self.count)
        error = target - self.mean
        self.mean = self.mean + step * error
        self.variance = (1.0 - step) * (self.variance + step * error * error)
        if self.reference is None:
            if self.count >= self._span:
                self.reference = self.mean
        elif not self.following:
            spread = math.sqrt(self.variance * (self.rate / (2.0 - self.rate) + 1.0 / self._span))
            self.following = abs(self.mean - self.reference) > self.threshold * spread
        return shifted

    def shift(self, targets: np.ndarray, learn: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """A batch's tree targets and each row's offset (as it stood before the row): `take` for each
        learned row in order (the one-record loop's float operations); rows not learned keep their
        target."""
        if kernels.ENABLED:
            return self._shift_compiled(targets, learn)
        values = targets.tolist()
        shifted = list(values)
        offsets = [0.0] * len(values)
        for i, learns in enumerate(learn.tolist()):
            offsets[i] = self.offset()
            if learns:
                shifted[i] = self.take(values[i])
        return np.array(shifted, dtype=np.float64), np.array(offsets, dtype=np.float64)

    def _shift_compiled(self, targets: np.ndarray, learn: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """`shift` by the compiled loop (sgt.kernels.trend_rows): the same float operations, in order."""
        has_reference = self.reference is not None
        state = np.array(
            [
                float(self.count),
                self.mean,
                self.variance,
                self.reference if self.reference is not None else 0.0,
                float(has_reference),
                float(self.following),
            ]
        )
        rows = np.ascontiguousarray(targets, dtype=np.float64)
        shifted, offsets = kernels.trend_rows(
            rows, np.asarray(learn, dtype=np.bool_), state, self.rate, self.threshold, self._span
        )
        self.count, self.mean, self.variance = int(state[0]), float(state[1]), float(state[2])
        self.reference = float(state[3]) if state[4] != 0.0 else None
        self.following = bool(state[5] != 0.0)
        return shifted, offsets

    def state(self) -> dict[str, Any]:
        """The saved state (floats the header keeps exactly, the count, the reference or None, and
        whether the offset follows the mean)."""
        return {
            "rate": self.rate,
            "threshold": self.threshold,
            "count": self.count,
            "mean": self.mean,
            "variance": self.variance,
            "reference": self.reference,
            "following": self.following,
        }

    @classmethod
    def restored(cls, state: Any) -> TrendOffset:
        """A saved offset (`state` as `state()` gave it)."""
        if not isinstance(state, dict) or set(state) != _KEYS:
            raise ValueError(f"a saved trend offset holds {sorted(_KEYS)}")
        reference = state["reference"]
        return cls(
            float(state["rate"]),
            float(state["threshold"]),
            int(state["count"]),
            float(state["mean"]),
            float(state["variance"]),
            None if reference is None else float(reference),
            bool(state["following"]),
        )
