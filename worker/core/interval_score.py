"""Prequential score of the published prediction intervals: coverage and mean width, cumulative and
over the last ``window`` labelled records (the ``sgt_interval_coverage`` / ``sgt_interval_width``
gauges, windows ``cumulative`` and ``recent``, as ``sgt_prequential_error``'s).

A record counts once its label is known, against the interval published with its prediction (a
record published without one, before the model had learned anything, does not count). Saved in the
partition's checkpoint, so a restored partition goes on with the same figures.

>>> s = IntervalScore(window=2)
>>> for y, interval in [(1.0, (0.0, 2.0)), (5.0, (0.0, 2.0)), (1.5, (1.0, 2.0))]:
...     s.update(y, interval)
>>> s.coverage, s.width, s.recent_coverage, s.recent_width
(0.6666666666666666, 1.6666666666666667, 0.5, 1.5)
>>> IntervalScore.from_dict(s.to_dict()) == s
True
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass
class IntervalScore:
    """Hits and widths of the scored intervals, in label order."""

    window: int = 1000
    n: int = 0
    hits: int = 0
    width_sum: float = 0.0
    recent: deque[tuple[bool, float]] = field(default_factory=deque)

    def update(self, y: float, interval: tuple[float, float] | list[float]) -> None:
        """Score one labelled record against the interval published for it."""
        low, high = interval
        hit = bool(low <= y <= high)
        width = high - low
        self.n += 1
        self.hits += hit
        self.width_sum += width
        self.recent.append((hit, width))
        if len(self.recent) > self.window:
            self.recent.popleft()

    @property
    def coverage(self) -> float:
        return self.hits / self.n if self.n else math.nan

    @property
    def width(self) -> float:
        return self.width_sum / self.n if self.n else math.nan

    @property
    def recent_coverage(self) -> float:
        return sum(hit for hit, _ in self.recent) / len(self.recent) if self.recent else math.nan

    @property
    def recent_width(self) -> float:
        total = 0.0
        for _, width in self.recent:  # in order, as added
            total += width
        return total / len(self.recent) if self.recent else math.nan

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe state."""
        return {
            "window": self.window,
            "n": self.n,
            "hits": self.hits,
            "width_sum": self.width_sum,
            "recent": [[hit, width] for hit, width in self.recent],
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> IntervalScore:
        recent = deque((bool(hit), float(width)) for hit, width in data["recent"])
        return cls(int(data["window"]), int(data["n"]), int(data["hits"]), float(data["width_sum"]), recent)
