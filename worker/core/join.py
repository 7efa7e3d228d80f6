"""The bounded join buffer of one partition: features waiting for labels, labels waiting for features.

Both sides are dicts keyed by id, in arrival order. An entry leaves when its partner arrives, when its
side is full (the oldest go, reason ``size``: more than ``max_pending`` entries or more than
``max_bytes`` bytes) or when it is older than the age limit in *event time* (reason ``age``). Event
time rather than wall-clock time keeps the buffer a pure function of the input, so a replay drops
exactly the same entries. Age expiry walks from the oldest entry and stops at the first young one, so
an out-of-order young entry can shield older ones behind it until it leaves.

An entry's bytes approximate the memory it holds: a label keeps its record and key byte for byte (for
the dead-letter topic), plus :data:`~worker.core.values.ENTRY_OVERHEAD`; a feature entry keeps what was
decoded from its record, counted as the record's bytes, ``ENTRY_OVERHEAD`` and
:data:`~worker.core.values.VALUE_OVERHEAD` per value. They are a function of the input too, and saved with
the buffer, so that a restored buffer drops the same entries as one that never stopped.

>>> from worker.core.values import ENTRY_OVERHEAD
>>> buf = JoinBuffer(max_pending=2, max_age=10.0, max_bytes=ENTRY_OVERHEAD + 10)
>>> buf.add_label(PendingLabel("a", 1, 0.0, b"{}", None, 5))
[]
>>> [e.id for e in buf.add_label(PendingLabel("b", 1, 1.0, b"{...}", None, 6))]  # 7 bytes: too many
['a']
>>> buf.label_bytes == ENTRY_OVERHEAD + 5
True
>>> [e.id for e in buf.expire(now=20.0)[1]]
['b']
"""

from __future__ import annotations

import base64
from typing import Any

import orjson

from worker.core.values import PendingFeature, PendingLabel

#: Default of ``max_bytes``, per side of one partition's buffer (the ``join_max_bytes`` setting).
JOIN_MAX_BYTES = 64 << 20


class JoinBuffer:
    """Pending features and labels of one partition, bounded in entries, bytes and event-time age.

    ``features`` and ``labels`` may be read directly; entries leave through the methods, which keep
    ``feature_bytes`` and ``label_bytes`` (the bytes each side holds) up to date.
    """

    def __init__(self, max_pending: int, max_age: float, max_bytes: int = JOIN_MAX_BYTES) -> None:
        self.max_pending = max_pending
        self.max_age = max_age
        self.max_bytes = max_bytes
        self.features: dict[str, PendingFeature] = {}
        self.labels: dict[str, PendingLabel] = {}
        self.feature_bytes = 0
        self.label_bytes = 0

    def add_feature(self, entry: PendingFeature) -> list[PendingFeature]:
        """Store a feature entry; return the entries evicted because the side is full."""
        self.features[entry.id] = entry
        self.feature_bytes += entry.nbytes
        evicted = _evict(self.features, self.max_pending, self.feature_bytes, self.max_bytes)
        self.feature_bytes -= sum(e.nbytes for e in evicted)
        return evicted

    def add_label(self, entry: PendingLabel) -> list[PendingLabel]:
        """Store a label entry; return the entries evicted because the side is full."""
        self.labels[entry.id] = entry
        self.label_bytes += entry.nbytes
        evicted = _evict(self.labels, self.max_pending, self.label_bytes, self.max_bytes)
        self.label_bytes -= sum(e.nbytes for e in evicted)
        return evicted

    def pop_feature(self, rid: str) -> PendingFeature | None:
        """Remove and return the feature entry waiting under that id, if any."""
        entry = self.features.pop(rid, None)
        if entry is not None:
            self.feature_bytes -= entry.nbytes
        return entry

    def pop_label(self, rid: str) -> PendingLabel | None:
        """Remove and return the label entry waiting under that id, if any."""
        entry = self.labels.pop(rid, None)
        if entry is not None:
            self.label_bytes -= entry.nbytes
        return entry

    def expire(self, now: float) -> tuple[list[PendingFeature], list[PendingLabel]]:
        """Remove and return the entries older than ``max_age`` at event time ``now``."""
        cutoff = now - self.max_age
        features, labels = _expire(self.features, cutoff), _expire(self.labels, cutoff)
        self.feature_bytes -= sum(e.nbytes for e in features)
        self.label_bytes -= sum(e.nbytes for e in labels)
        return features, labels

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe state, in arrival order (a label's record as text when it is UTF-8, else base64;
        its key as base64)."""
        return {
            "features": [
                [
                    e.id,
                    e.x,
                    e.ts,
                    e.offset,
                    e.prediction,
                    None if e.proba is None else [list(p) for p in e.proba],
                    e.size,
                    *([] if e.interval is None else [e.interval]),
                ]
                for e in self.features.values()
            ],
            "labels": [
                [e.id, e.y, e.ts, *_text(e.raw), None if e.key is None else _b64(e.key), e.offset]
                for e in self.labels.values()
            ],
        }

    @classmethod
    def from_dict(
        cls, data: dict[str, Any], max_pending: int, max_age: float, max_bytes: int = JOIN_MAX_BYTES
    ) -> JoinBuffer:
        """The buffer :meth:`to_dict` saved. A feature entry saved by the previous release, without its
        record's size, is charged the size of its id and features as JSON."""
        buf = cls(max_pending, max_age, max_bytes)
        for rid, x, ts, offset, prediction, proba, *rest in data["features"]:
            pairs = None if proba is None else [(label, p) for label, p in proba]
            nbytes = rest[0] if rest else len(orjson.dumps({"id": rid, "x": x}))
            interval = [float(v) for v in rest[1]] if len(rest) > 1 else None  # (only when published)
            entry = buf.features[rid] = PendingFeature(
                rid, x, ts, offset, prediction, pairs, size=nbytes, interval=interval
            )
            buf.feature_bytes += entry.nbytes
        for rid, y, ts, *raw, key, offset in data["labels"]:
            label = buf.labels[rid] = PendingLabel(
                rid, y, ts, _untext(*raw), None if key is None else _unb64(key), offset
            )
            buf.label_bytes += label.nbytes
        return buf


def _evict(side: dict[str, Any], limit: int, nbytes: int, max_bytes: int) -> list[Any]:
    """Remove the oldest entries until the side holds at most ``limit`` entries and ``max_bytes`` bytes."""
    evicted = []
    while len(side) > limit or nbytes > max_bytes:
        entry = side.pop(next(iter(side)))
        nbytes -= entry.nbytes
        evicted.append(entry)
    return evicted


def _expire(side: dict[str, Any], cutoff: float) -> list[Any]:
    expired = []
    while side:
        oldest = next(iter(side.values()))
        if oldest.ts >= cutoff:
            break
        expired.append(side.pop(oldest.id))
    return expired


def _text(raw: bytes) -> tuple[str, str]:
    """A label's record for the JSON state: as text when it is UTF-8, as every label that decoded is
    (a quarter smaller and about four times faster to save than base64), else base64."""
    try:
        return "utf8", raw.decode("utf-8")
    except UnicodeDecodeError:
        return "base64", _b64(raw)


def _untext(*saved: str) -> bytes:
    """The record :func:`_text` saved; the previous release saved base64 alone."""
    if len(saved) == 1:
        return _unb64(saved[0])
    encoding, text = saved
    if encoding == "utf8":
        return text.encode("utf-8")
    if encoding == "base64":
        return _unb64(text)
    raise ValueError(f"unknown encoding {encoding!r} of a pending label")


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _unb64(text: str) -> bytes:
    return base64.b64decode(text.encode("ascii"), validate=True)
