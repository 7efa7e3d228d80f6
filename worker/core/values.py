"""The value types of the worker's Kafka-free core, from a consumed message to what is produced.

A consumed message is a :class:`Record`; decoding turns it into a :class:`Feature`, a
:class:`LabelRecord` or an :class:`Invalid` (see :mod:`worker.core.records`); the pair waits in the merge
queues as a :class:`MergeEntry` (see :mod:`worker.core.merge`); a feature waiting for its label, or a label
for its features, is a :class:`PendingFeature` / :class:`PendingLabel` in the join buffer (see
:mod:`worker.core.join`); what the core hands to the producer is an :class:`Output`, with a
:class:`DeadLetter` naming the topic and reason of an unusable record.

The types made for every record on the hot path (:class:`Record`, :class:`Feature`,
:class:`MergeEntry`, :class:`Output`) are named tuples: a tuple is built in about half the time of a
dataclass. A feature entry of the join buffer is a slotted dataclass, as it gets its prediction once
the model call that predicts it has run.

>>> record = Record(offset=7, ts=1.5, key=None, value=b'{"x": [1.0]}')
>>> entry = MergeEntry(record.ts, 0, record.offset, record, Feature(None, [1.0], None, record.ts))
>>> entry.decoded.x, entry.record.offset
([1.0], 7)
>>> PendingLabel("a", 1, 0.0, b'{"id": "a", "y": 1}', None, 3).nbytes == 19 + ENTRY_OVERHEAD
True
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, NamedTuple, final

#: A feature value after decoding: integers are floats, strings are nominal values, None is missing.
Value = float | str | None
#: A class label (string or integer) or a regression target (float).
Label = int | str | float

#: Bytes charged to every join entry besides its record's: the entry, its id, the dict slot holding it.
ENTRY_OVERHEAD = 256
#: Bytes charged to a feature entry per decoded value, beyond the value's JSON text: its dict slot and
#: number object. (Measured with tracemalloc: an entry of 3, 20 and 200 numeric values held 480,
#: 1,360 and 15,550 bytes for records of 98, 464 and 4,498 bytes: ENTRY_OVERHEAD + record + 42 to 54
#: per value.)
VALUE_OVERHEAD = 56


class Record(NamedTuple):
    """A consumed Kafka message, reduced to what the core needs (``ts`` in seconds)."""

    offset: int
    ts: float
    key: bytes | None
    value: bytes | None


class Feature(NamedTuple):
    """A decoded feature record; ``x`` is a dict (names to values) or a list (configured order)."""

    id: str | None
    x: dict[str, Value] | list[Value]
    y: Label | None
    ts: float


@dataclass(frozen=True, slots=True)
class LabelRecord:
    """A decoded label record ``{"id", "y"}``."""

    id: str
    y: Label
    ts: float


@final  # so that the checker knows `type(d) is Invalid` is false for every other type
@dataclass(frozen=True, slots=True)
class Invalid:
    """A record that cannot be used, with the dead-letter reason.

    Its time is minus infinity: a bad record has no trustworthy event time (its Kafka timestamp may be
    on another clock than the ``ts`` of good records), so it is merged as soon as it heads its queue
    and never holds the other topic back.
    """

    reason: str
    ts: ClassVar[float] = float("-inf")


#: What a record decodes to.
Decoded = Feature | LabelRecord | Invalid


class MergeEntry(NamedTuple):
    """A decoded record in a merge queue, ordered by ``(ts, rank, offset)``.

    ``ts`` is the decoded record's event time (minus infinity for an :class:`Invalid`), ``rank`` its
    topic's (:data:`worker.core.merge.FEATURES` or :data:`worker.core.merge.LABELS`).
    """

    ts: float
    rank: int
    offset: int
    record: Record
    decoded: Decoded


@dataclass(slots=True)
class PendingFeature:
    """A predicted feature record waiting for its label; ``prediction``/``proba`` are what was published."""

    id: str
    x: dict[str, Value]
    ts: float
    offset: int
    prediction: Any = None  # a class label, a regression target, or None (no class known yet)
    proba: list[tuple[Label, float]] | None = None
    row: int | None = None  # row of the current predict_learn_many call until its prediction is known
    size: int = 0  # bytes of the record it came from
    interval: list[float] | None = None  # the published prediction interval (worker.core.annotate), if any

    @property
    def nbytes(self) -> int:
        return self.size + ENTRY_OVERHEAD + VALUE_OVERHEAD * len(self.x)


@dataclass(slots=True)
class PendingLabel:
    """A label that arrived before its features; kept byte for byte for the dead-letter topic."""

    id: str
    y: Label
    ts: float
    raw: bytes
    key: bytes | None
    offset: int

    @property
    def nbytes(self) -> int:
        return len(self.raw) + len(self.key or b"") + ENTRY_OVERHEAD


class Output(NamedTuple):
    """An encoded record for the prediction or dead-letter topic."""

    key: bytes | None
    value: bytes
    ts: float  # event time of the source record (latency metric)
    headers: list[tuple[str, bytes]] | None = None


class DeadLetter(NamedTuple):
    """An unusable record for the dead-letter topic, with the topic it came from and why."""

    output: Output
    source_topic: str
    reason: str
