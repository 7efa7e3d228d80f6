"""Drift detection: a Page-Hinkley test on a stream of non-negative errors, updated a batch at a time.

The test (Page 1954; Hinkley 1971) watches for an increase of the mean. With x_t the t-th value and
mean_t the mean of x_1..x_t, it accumulates

    m_t = sum_{s <= t} (x_s - mean_s - delta)

and signals a drift at the first t with t >= min_n and m_t - min_{s <= t} m_s > threshold: the values
have run above their long-run mean by more than `delta` each, for long enough to add up to `threshold`.
`delta` is the tolerated increase per value, `threshold` trades detection delay against false alarms.

The values are errors: 0/1 misclassifications, or, with `relative=True`, absolute errors of a
regression divided by the mean absolute error seen before them (so the test is free of the
target's scale; a value is capped at `RELATIVE_CAP` mean errors so that one outlier cannot raise an
alarm alone).

`update` takes a whole array at once and computes every running sum with `np.cumsum`, which adds in
order, so feeding the values in any split into arrays gives the same bits, and the same alarm, as
feeding them one at a time. After an alarm the detector ignores further values until `reset`.

>>> detector = PageHinkley(delta=0.05, threshold=5.0, min_n=10)
>>> detector.update(np.zeros(100))          # a perfect stretch: no alarm
-1
>>> detector.update(np.ones(20))            # then every value is an error
5
>>> detector.alarm, detector.n
(True, 106)
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

__all__ = ["RELATIVE_CAP", "PageHinkley"]

#: the largest value a relative error counts for (in mean absolute errors)
RELATIVE_CAP = 10.0


@dataclass
class _State:
    n: int = 0  # values seen since the last reset
    total: float = 0.0  # their sum
    cum: float = 0.0  # m_t
    low: float = 0.0  # min over s <= t of m_s (m_0 = 0)
    low_n: int = 0  # the last s at which m_s fell to that minimum: the rise began after it
    abs_n: int = 0  # relative mode: absolute errors seen, and their sum (the scale)
    abs_total: float = 0.0
    alarm: bool = False


class PageHinkley:
    """One-sided Page-Hinkley test for an increase in the mean of a stream of errors.

    Parameters
    ----------
    delta
        Tolerated increase per value, in the values' unit (>= 0).
    threshold
        Alarm level of the accumulated excess (> 0).
    min_n
        Values needed since the last reset before an alarm can be raised (>= 1).
    relative
        Divide each value by the mean of the values before it (regression errors), see the module.
    """

    def __init__(self, delta: float, threshold: float, min_n: int = 30, relative: bool = False) -> None:
        self.delta = float(delta)
        self.threshold = float(threshold)
        self.min_n = int(min_n)
        self.relative = bool(relative)
        self._state = _State()

    @property
    def alarm(self) -> bool:
        """A drift was signalled since the last reset."""
        return self._state.alarm

    @property
    def n(self) -> int:
        return self._state.n

    @property
    def rising(self) -> int:
        """Values since the accumulated excess was last at its minimum: the estimated length of the rise
        that an alarm reports (all values when it never fell below its start)."""
        return self._state.n - self._state.low_n

    @property
    def excess(self) -> float:
        """The accumulated excess over its minimum, m_t - min m_s: an alarm comes when it passes the
        threshold."""
        return self._state.cum - self._state.low

    def reset(self) -> None:
        """Forget everything (after the drift was answered)."""
        self._state = _State()

    def update(self, values: np.ndarray) -> int:
        """Feed values in order; return the index of the one that raised the alarm, or -1.

        Values after the alarming one are ignored, as are all values while an alarm is standing.
        """
        state = self._state
        x = np.asarray(values, dtype=np.float64)
        if state.alarm or x.size == 0:
            return -1
        if x.size == 1 and math.isfinite(state.cum + state.low + state.total + float(x[0])):
            return self._update_one(float(x[0]))
        if self.relative:
            x, abs_totals = self._relative(x)
        k = np.arange(1, x.size + 1)
        n = state.n + k
        total = np.cumsum(np.concatenate(([state.total], x)))[1:]
        cum = np.cumsum(np.concatenate(([state.cum], x - total / n - self.delta)))[1:]
        low = np.minimum.accumulate(np.concatenate(([state.low], cum)))
        fell = np.flatnonzero(cum < low[:-1])  # a new minimum (strictly lower: the same in any split)
        low = low[1:]
        hits = np.flatnonzero((n >= self.min_n) & (cum - low > self.threshold))
        last = int(hits[0]) if hits.size else x.size - 1
        fell = fell[fell <= last]
        if fell.size:
            state.low_n = int(n[fell[-1]])
        state.n = int(n[last])
        state.total = float(total[last])
        state.cum = float(cum[last])
        state.low = float(low[last])
        if self.relative:
            state.abs_total = float(abs_totals[last])
            state.abs_n += last + 1
        if hits.size:
            state.alarm = True
            return last
        return -1

    def _update_one(self, value: float) -> int:
        """`update` of one finite value (no alarm standing) in Python floats: the same operations in the
        same order as the arrays' (each cumulative sum of two values is one addition; the minimum of
        finite values is `min`'s), without numpy's cost per call, which dominates a record learned
        alone (two tests per ensemble, each about 20 numpy calls)."""
        state = self._state
        if self.relative:
            e = abs(value)
            scale = state.abs_total / state.abs_n if state.abs_n > 0 else 0.0
            value = min(e / scale if scale > 0.0 else (1.0 if e > 0.0 else 0.0), RELATIVE_CAP)
            state.abs_total += e
            state.abs_n += 1
        n = state.n + 1
        total = state.total + value
        cum = state.cum + (value - total / n - self.delta)
        if cum < state.low:
            state.low_n = n
        state.n, state.total, state.cum, state.low = n, total, cum, min(state.low, cum)
        if n >= self.min_n and cum - state.low > self.threshold:
            state.alarm = True
            return 0
        return -1

    def _relative(self, errors: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Each absolute error divided by the mean absolute error before it (1 for the first), and the
        running sums of absolute errors after each one."""
        state = self._state
        e = np.abs(errors)
        sums = np.cumsum(np.concatenate(([state.abs_total], e)))
        counts = state.abs_n + np.arange(e.size)
        scale = np.divide(sums[:-1], counts, out=np.zeros(e.size), where=counts > 0)
        x = np.divide(e, scale, out=np.where(e > 0, 1.0, 0.0), where=scale > 0)
        return np.minimum(x, RELATIVE_CAP), sums[1:]

    # -- state (JSON-safe) -----------------------------------------------------------------------
    def state(self) -> dict[str, Any]:
        return asdict(self._state)

    def restore(self, state: dict[str, Any]) -> None:
        self._state = _State(
            n=int(state["n"]),
            total=float(state["total"]),
            cum=float(state["cum"]),
            low=float(state["low"]),
            low_n=int(state.get("low_n", state["n"])),  # saved before it was kept: from the restore
            abs_n=int(state["abs_n"]),
            abs_total=float(state["abs_total"]),
            alarm=bool(state["alarm"]),
        )
