"""`TrendOffset`: a slow running mean of a regressor's targets, which its trees learn the targets minus
(each row's offset is the mean of the targets before it) and which its predictions add back.

A target with a trend under a function of the features (y = t + f(x), t rising with time) leaves
every leaf's value stale at its own pace: a leaf moves only when its block of records fills, so the
leaves that see few records lag the trend most, and the error grows along the stream. A residual level
(sgt.residual) adds one correction to every leaf alike and cannot undo lags that differ by leaf. With
the offset the trees learn y minus a running mean of the targets, f(x) plus a lag that is the same
for every leaf (the mean's own lag behind the trend, steady once the slope is), and the prediction
adds the mean back: the trend is carried by one number that moves with every record.

The mean is exact and cheap: one float update per learned record, in row order, a function of the
targets alone (not of any prediction), so a batch's offsets are known before its trees run, the one-
record loop makes the same operations, and the state (rate, mean, count: three numbers) is saved
exactly. The first target is its own offset (the trees' first target is 0, so their base score is 0);
the first `1 / rate` targets are averaged plainly (a step of 1 / n), so the mean starts at the
targets' level rather than walking to it, and then it moves by `rate` of each error.

>>> trend = TrendOffset(0.5)
>>> [trend.take(y) for y in (4.0, 6.0, 8.0, 8.0)]  # each target minus the mean before it
[0.0, 2.0, 3.0, 1.5]
>>> trend.offset()  # the mean the next prediction adds
7.25
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

__all__ = ["TrendOffset"]


class TrendOffset:
    """The running mean of the learned targets at `rate` (a step of max(rate, 1/n) at the n-th
    target), and the tree targets it gives: each learned target minus the mean before it."""

    def __init__(self, rate: float, mean: float = 0.0, count: int = 0) -> None:
        if not (isinstance(rate, (int, float)) and 0.0 < rate <= 1.0):
            raise ValueError(f"a trend offset's rate must be in (0, 1], got {rate!r}")
        if not math.isfinite(mean) or count < 0:
            raise ValueError(
                f"a trend offset's mean must be finite and its count at least 0, got {mean!r}, {count!r}"
            )
        self.rate = float(rate)
        self.mean = float(mean)
        self.count = int(count)

    def offset(self) -> float:
        """The offset of the next row: the mean of the targets learned so far (0 before any)."""
        return self.mean

    def take(self, target: float) -> float:
        """The trees' target for a learned `target` (the target minus its offset; the first target is
        its own offset), then the mean learns it. A non-finite target leaves the mean as it was (the
        trees meet it as they would have)."""
        target = float(target)
        if self.count == 0:
            if math.isfinite(target):
                self.mean, self.count = target, 1
            return target - self.mean
        shifted = target - self.mean
        if math.isfinite(shifted):
            self.count += 1
            step = max(self.rate, 1.0 / self.count)
            self.mean = self.mean + step * shifted
        return shifted

    def shift(self, targets: np.ndarray, learn: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """A batch's tree targets and each row's offset (the mean as it stood before the row), `take`
        for each learned row in order (the same float operations as the one-record loop); rows not
        learned keep their target and get the current offset."""
        values = targets.tolist()
        learned = learn.tolist()
        shifted = list(values)
        offsets = [0.0] * len(values)
        for i, (value, learns) in enumerate(zip(values, learned, strict=True)):
            offsets[i] = self.mean
            if learns:
                shifted[i] = self.take(value)
        return np.array(shifted, dtype=np.float64), np.array(offsets, dtype=np.float64)

    def state(self) -> dict[str, Any]:
        """The saved state (floats the header keeps exactly, and the count)."""
        return {"rate": self.rate, "mean": self.mean, "count": self.count}

    @classmethod
    def restored(cls, state: Any) -> TrendOffset:
        """A saved offset (`state` as `state()` gave it)."""
        if not isinstance(state, dict) or set(state) != {"rate", "mean", "count"}:
            raise ValueError("a saved trend offset holds its rate, mean and count")
        return cls(float(state["rate"]), float(state["mean"]), int(state["count"]))
