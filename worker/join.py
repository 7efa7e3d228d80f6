"""The bounded join buffer of one partition: features waiting for labels, labels waiting for features.

Both sides are dicts keyed by id, in arrival order. An entry leaves when its partner arrives, when its
side is full (the oldest goes, reason ``size``) or when it is older than the age limit in *event time*
(reason ``age``). Event time rather than wall-clock time keeps the buffer a pure function of the input,
so a replay drops exactly the same entries. Age expiry walks from the oldest entry and stops at the
first young one, so an out-of-order young entry can shield older ones behind it until it leaves.

>>> buf = JoinBuffer(max_pending=2, max_age=10.0)
>>> buf.add_label(PendingLabel("a", 1, 0.0, b"{}", None, 5))
[]
>>> [e.id for e in buf.expire(now=20.0)[1]]
['a']
"""

from __future__ import annotations

import base64
from dataclasses import dataclass
from typing import Any

from worker.records import Label, Value


@dataclass(slots=True)
class PendingFeature:
    """A predicted feature record waiting for its label; ``prediction``/``proba`` are what was published."""

    id: str
    x: dict[str, Value]
    ts: float
    offset: int
    prediction: Any = None
    proba: list[tuple[Label, float]] | None = None
    row: int | None = None  # row of the current predict_learn_many call until its prediction is known


@dataclass(slots=True)
class PendingLabel:
    """A label that arrived before its features; kept byte for byte for the dead-letter topic."""

    id: str
    y: Label
    ts: float
    raw: bytes
    key: bytes | None
    offset: int


class JoinBuffer:
    """Pending features and labels of one partition, bounded in size and in event-time age."""

    def __init__(self, max_pending: int, max_age: float) -> None:
        self.max_pending = max_pending
        self.max_age = max_age
        self.features: dict[str, PendingFeature] = {}
        self.labels: dict[str, PendingLabel] = {}

    def add_feature(self, entry: PendingFeature) -> list[PendingFeature]:
        """Store a feature entry; return the entries evicted because the side is full."""
        self.features[entry.id] = entry
        return _evict(self.features, self.max_pending)

    def add_label(self, entry: PendingLabel) -> list[PendingLabel]:
        """Store a label entry; return the entries evicted because the side is full."""
        self.labels[entry.id] = entry
        return _evict(self.labels, self.max_pending)

    def expire(self, now: float) -> tuple[list[PendingFeature], list[PendingLabel]]:
        """Remove and return the entries older than ``max_age`` at event time ``now``."""
        cutoff = now - self.max_age
        return _expire(self.features, cutoff), _expire(self.labels, cutoff)

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe state (label bytes as base64), in arrival order."""
        return {
            "features": [
                [
                    e.id,
                    e.x,
                    e.ts,
                    e.offset,
                    e.prediction,
                    None if e.proba is None else [list(p) for p in e.proba],
                ]
                for e in self.features.values()
            ],
            "labels": [
                [e.id, e.y, e.ts, _b64(e.raw), None if e.key is None else _b64(e.key), e.offset]
                for e in self.labels.values()
            ],
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any], max_pending: int, max_age: float) -> JoinBuffer:
        buf = cls(max_pending, max_age)
        for rid, x, ts, offset, prediction, proba in data["features"]:
            pairs = None if proba is None else [(label, p) for label, p in proba]
            buf.features[rid] = PendingFeature(rid, x, ts, offset, prediction, pairs)
        for rid, y, ts, raw, key, offset in data["labels"]:
            buf.labels[rid] = PendingLabel(
                rid, y, ts, _unb64(raw), None if key is None else _unb64(key), offset
            )
        return buf


def _evict(side: dict[str, Any], limit: int) -> list[Any]:
    evicted = []
    while len(side) > limit:
        evicted.append(side.pop(next(iter(side))))
    return evicted


def _expire(side: dict[str, Any], cutoff: float) -> list[Any]:
    expired = []
    while side:
        oldest = next(iter(side.values()))
        if oldest.ts >= cutoff:
            break
        expired.append(side.pop(oldest.id))
    return expired


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _unb64(text: str) -> bytes:
    return base64.b64decode(text.encode("ascii"), validate=True)
