"""The Kafka-free core of one input partition: validate, join, test-then-train, score, snapshot.

:class:`PartitionState` holds everything a checkpoint must restore (model, join buffer, prequential
metrics, feature schema, next offsets of both topics). :meth:`PartitionState.process` takes records in
the merged order of :mod:`worker.core.merge` and turns one run of them into a single strictly prequential
``predict_learn_many`` call: features are predicted with the model as it was before them, labels
(inline or joined) are learned in order, so the result does not depend on how Kafka batched the
records.

Example with a tiny stand-in model (the worker uses :mod:`sgt`'s trees):

>>> import numpy as np
>>> class Majority:
...     def __init__(self): self.classes_, self.counts = [], []
...     def predict_learn_many(self, X, y):
...         out = np.zeros((len(y), 2))
...         for i, label in enumerate(y):
...             if self.counts: out[i, int(np.argmax(self.counts))] = 1.0
...             if label is not None:
...                 if label not in self.classes_: self.classes_.append(label); self.counts.append(0)
...                 self.counts[self.classes_.index(label)] += 1
...         return out[:, : len(self.classes_)]
>>> state = PartitionState(0, Majority(), StateConfig("classification", None))
>>> recs = [Record(0, 0.0, None, b'{"x": [1.0], "y": "a"}'), Record(1, 1.0, None, b'{"x": [2.0], "y": "b"}')]
>>> out = state.process(state.decode(FEATURES, recs), now=5.0)
>>> docs = [orjson.loads(p.value) for p in out.predictions]
>>> [(d["prediction"], d["offset"], d["model_version"]) for d in docs]
[(None, 0, 0), ('a', 1, 1)]
>>> state.prequential.n, state.next_offsets
(2, [2, 0])
"""

from __future__ import annotations

import heapq
import struct
import zlib
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from itertools import accumulate, islice
from typing import Any, cast

import numpy as np
import orjson

from sgt.evaluation import Prequential
from worker.core.annotate import interval_of, predict_learn
from worker.core.interval_score import IntervalScore
from worker.core.join import JOIN_MAX_BYTES, JoinBuffer
from worker.core.merge import FEATURES, LABELS
from worker.core.model_protocol import ModelClass, StreamModel, classes_of
from worker.core.outputs import FRAMING_BYTES, fit_dead_letter
from worker.core.records import MAX_LABEL_BYTES, MAX_TS_AHEAD, decode_feature, decode_label
from worker.core.schema import MAX_FEATURES, FeatureSchema
from worker.core.values import (
    DeadLetter,
    Feature,
    Invalid,
    LabelRecord,
    MergeEntry,
    Output,
    PendingFeature,
    PendingLabel,
    Record,
)

STATE_FORMAT = 2  # 2: the model bytes are zlib-compressed

#: The most work one model call may take, in trees times rows: a classifier with K classes updates
#: K - 1 trees a row (the single tree's committee; the boosted ensemble's multi-output members cost
#: less, about a seventh at 500 classes). At about 20 us per tree and row (the committee at 2,000
#: classes: 26 records/s) 10,000 is about 0.2 s, so the loop, which sees checkpoints and signals
#: only between model calls, keeps its cadence at any max_classes; a binary or regression model,
#: one tree a row, is never cut below the 2,000 records of a default batch.
MODEL_CALL_TREE_ROWS = 10_000


@dataclass(frozen=True)
class StateConfig:
    """The settings that shape a partition's processing."""

    task: str
    labels_topic: str | None
    features_topic: str = "features"
    features: tuple[tuple[str, str], ...] = ()
    max_record_bytes: int = 1 << 20
    join_max_pending: int = 100000
    join_max_age: float = 3600.0
    join_max_bytes: int = JOIN_MAX_BYTES
    metrics_window: int = 1000
    max_features: int = MAX_FEATURES
    max_message_bytes: int = 1000000  # no output is larger (see worker.core.outputs)
    proba_top_k: int = 10  # classes listed in a prediction's proba
    # regression: the interval predictions carry (worker.core.annotate)
    interval_coverage: float | None = None
    explain: int = 0  # features a prediction's explain lists; 0: none
    max_label_bytes: int = MAX_LABEL_BYTES
    max_classes: int = 100  # classes a model learns; a label adding one more is dead-lettered
    max_ts_ahead: float = MAX_TS_AHEAD  # a ts further ahead of the Kafka timestamp is dead-lettered


@dataclass
class ProcessResult:
    """What one :meth:`PartitionState.process` call produced."""

    predictions: list[Output] = field(default_factory=list)
    dead_letters: list[DeadLetter] = field(default_factory=list)
    expired: dict[tuple[str, str], int] = field(default_factory=dict)  # (side, reason) -> count
    consumed: list[int] = field(default_factory=lambda: [0, 0])  # per topic rank
    trained: int = 0


class _Run:
    """Rows of one predict_learn_many call and the bookkeeping to resolve them afterwards.

    ``classes`` holds the classes the model knows plus those this run's labels add (classification);
    a label that would take it past ``max_classes`` is dead-lettered instead of learned.
    """

    def __init__(self, classes: set[Any] | None = None, max_classes: int = 0) -> None:
        self.classes, self.max_classes = classes, max_classes
        self.x: list[dict[str, Any]] = []
        self.y: list[Any] = []
        self.published: list[tuple[int, Feature, Record]] = []  # (row, features, source) to publish
        self.scores: list[tuple[Any, Any]] = []  # (y_true, row index | PendingFeature)
        self.waiting: list[PendingFeature] = []  # entries whose prediction is a row of this run

    def add(self, x: dict[str, Any], y: Any) -> int:
        self.x.append(x)
        self.y.append(y)
        return len(self.y) - 1

    def admits(self, y: Any) -> bool:
        """Whether label ``y`` may be learned (reserving its class when it is a new one)."""
        classes = self.classes
        if classes is None or y in classes:
            return True
        if len(classes) >= self.max_classes:
            return False
        classes.add(y)
        return True


class _Predictions:
    """The result of one predict_learn_many call, as plain Python lists indexed by row.

    ``labels[row]`` is the published prediction. Classification: the most probable class, the first
    in ``classes_`` order on a tie; a row predicted before any class was known (all probabilities 0)
    predicts None. ``rows[row]`` holds the class probabilities in ``classes`` order, and
    ``known[row]`` how many of the classes existed when the row was predicted (the model returns
    columns for the classes it knows after the call; a class first seen at row i is 0 before it and
    must not be named there), or None when every row knew them all.
    """

    def __init__(self, scores: np.ndarray, classes: list[Any] | None, known: list[int] | None = None) -> None:
        """``classes``: the model's classes after the call (classification), None for regression."""
        self.known = known
        self.classification = classes is not None
        if classes is None:
            self.labels: list[Any] = np.asarray(scores, dtype=float).tolist()
            return
        self.classes = list(classes)
        self.names = [str(c) for c in self.classes]
        self.index = {c: i for i, c in enumerate(self.classes)}
        matrix = np.asarray(scores, dtype=float).reshape(len(scores), len(self.classes))
        self.rows: list[list[float]] = matrix.tolist()
        if self.classes:
            best = matrix.argmax(axis=1)
            any_class = matrix[np.arange(len(matrix)), best] > 0
            self.labels = [
                self.classes[b] if k else None for b, k in zip(best.tolist(), any_class.tolist(), strict=True)
            ]
        else:
            self.labels = [None] * len(self.rows)

    def pairs(self, row: int) -> list[tuple[Any, float]] | None:
        """Every class known at that row with its probability (kept to score a label joined later)."""
        if not self.classification:
            return None
        n = len(self.classes) if self.known is None else self.known[row]
        return list(zip(self.classes[:n], self.rows[row][:n], strict=True))

    def proba_dicts(self, published: list[tuple[int, Feature, Record]], top_k: int) -> list[dict[str, float]]:
        """The ``proba`` object of each published row: class name to probability, in class order, for
        the ``top_k`` most probable classes known at that row (the first in class order on a tie)."""
        names, rows, known = self.names, self.rows, self.known
        out = []
        for row, _, _ in published:
            n = len(names) if known is None else known[row]
            values = rows[row]
            if n <= top_k:
                out.append(dict(zip(names[:n], values[:n], strict=True)))
            else:  # nlargest is stable: on a tie the earlier class comes first
                top = sorted(heapq.nlargest(top_k, range(n), key=values.__getitem__))
                out.append({names[i]: values[i] for i in top})
        return out


def _known_classes(classes_before: list[Any], ys: list[Any]) -> list[int]:
    """How many classes the model knows when each row is predicted: those before the call, plus the
    new labels of earlier rows (classes are numbered in order of first appearance)."""
    seen = set(classes_before)
    known = []
    for y in ys:
        known.append(len(seen))
        if y is not None:
            seen.add(y)
    return known


def _documents(
    published: list[tuple[int, Feature, Record]],
    labels: list[Any],
    probas: list[dict[str, float]] | None,
    model_versions: list[int],
    partition: int,
    now: float,
) -> list[dict[str, Any]]:
    """The prediction documents of a run, with the class probabilities when there are any.

    Two literals rather than one with an optional key, as the comprehension runs once per record.
    """
    if probas is None:
        return [
            {
                "id": feat.id,
                "prediction": labels[row],
                "partition": partition,
                "offset": record.offset,
                "model_version": model_versions[row],
                "ts": now,
            }
            for row, feat, record in published
        ]
    return [
        {
            "id": feat.id,
            "prediction": labels[row],
            "proba": proba,
            "partition": partition,
            "offset": record.offset,
            "model_version": model_versions[row],
            "ts": now,
        }
        for (row, feat, record), proba in zip(published, probas, strict=True)
    ]


class PartitionState:
    """Model, join buffer, prequential metrics, schema and next offsets of one input partition."""

    def __init__(self, partition: int, model: StreamModel, config: StateConfig) -> None:
        self.partition = partition
        self.model = model
        self.config = config
        self.classification = config.task == "classification"
        self.prequential = Prequential(config.task, config.metrics_window)
        # the published intervals' coverage and width (regression with interval_coverage)
        scored = config.task == "regression" and config.interval_coverage is not None
        self.intervals = IntervalScore(config.metrics_window) if scored else None
        self.schema = FeatureSchema(config.features, config.max_features)
        self.join = JoinBuffer(config.join_max_pending, config.join_max_age, config.join_max_bytes)
        self.next_offsets = [0, 0]  # features, labels
        self.consumed = [0, 0]
        self.trained = 0
        self.predicted = 0
        self.event_time = float("-inf")

    # -- decoding -----------------------------------------------------------------------------------

    def decode(self, rank: int, records: list[Record]) -> list[MergeEntry]:
        """Decode records of one topic (stateless checks only) into merge entries for :meth:`process`.

        A record that cannot be used decodes to an :class:`~worker.core.values.Invalid`, whose event time is
        minus infinity.
        """
        cfg = self.config
        decode = decode_feature if rank == FEATURES else decode_label
        task, limit, label_limit = cfg.task, cfg.max_record_bytes, cfg.max_label_bytes
        ahead = cfg.max_ts_ahead
        decoded = [decode(r.value, r.ts, task, limit, label_limit, ahead) for r in records]
        return [MergeEntry(d.ts, rank, r.offset, r, d) for r, d in zip(records, decoded, strict=True)]

    # -- processing -----------------------------------------------------------------------------------

    def read_again(self, rank: int) -> None:
        """Topic ``rank`` is read again from its start (it was deleted and created again): its next
        offset is 0; the model, the join buffer and the other topic's offset stay."""
        self.next_offsets[rank] = 0

    def rows_per_call(self, queues: Sequence[deque[MergeEntry]]) -> int | None:
        """How many of the queued entries one :meth:`process` call may take (None: all of them), so
        that its model call stays within :data:`MODEL_CALL_TREE_ROWS`.

        Classification only: a row costs a tree per class but one, counting the classes the model
        knows and every new one among the entries that could be taken (the first that many of each
        topic's queue), as if all came first: an upper bound, which depends only on the queued
        records, not on when they were fetched. The result never changes the model or the
        predictions: the library's batch learning equals a one-record loop, under any cut.
        """
        if not self.classification:
            return None
        known = classes_of(self.model)
        cap = _rows_within(len(known))
        if sum(len(q) for q in queues) * _trees(self.config.max_classes) <= MODEL_CALL_TREE_ROWS:
            return None
        labels = set().union(*({getattr(e.decoded, "y", None) for e in islice(q, cap)} for q in queues))
        labels.discard(None)
        new = len(labels.difference(known))
        return cap if not new else _rows_within(min(len(known) + new, self.config.max_classes))

    def process(self, entries: list[MergeEntry], now: float) -> ProcessResult:
        """Process merged entries (in the order of :mod:`worker.core.merge`); ``now`` stamps predictions."""
        result = ProcessResult()
        run = _Run(set(classes_of(self.model)), self.config.max_classes) if self.classification else _Run()
        if self.config.labels_topic is None:  # then every entry is a feature record
            self._ingest_inline(entries, result, run)
        else:
            self._ingest_joined(entries, result, run)
        self._execute(run, result, now)
        for rank in (FEATURES, LABELS):
            self.consumed[rank] += result.consumed[rank]
        return result

    def _ingest_inline(self, entries: list[MergeEntry], result: ProcessResult, run: _Run) -> None:
        """Feature records with their labels inline (no labels topic): one model row per usable record.

        The same decisions as :meth:`_ingest_joined` takes for these records, without the join: with no
        labels topic the join buffer stays empty, so there is nothing to expire as event time moves.
        """
        if not entries:
            return
        self.next_offsets[FEATURES] = entries[-1].offset + 1
        result.consumed[FEATURES] = len(entries)
        # with no labels topic every entry is a feature record, decoded by decode_feature
        decoded = cast(list[Feature | Invalid], [e.decoded for e in entries])
        for entry, feat in zip(entries, decoded, strict=True):
            record = entry.record
            if isinstance(feat, Invalid):
                self._dead_letter(result, FEATURES, record, feat.reason)
                continue
            self.event_time = max(self.event_time, feat.ts)
            x = self.schema.conform(feat.x)
            if isinstance(x, str):
                self._dead_letter(result, FEATURES, record, x)
                continue
            if feat.y is not None and not run.admits(feat.y):
                self._dead_letter(result, FEATURES, record, "too_many_classes")
                continue
            row = run.add(x, feat.y)
            if feat.y is not None:
                run.scores.append((feat.y, row))
            run.published.append((row, feat, record))

    def _ingest_joined(self, entries: list[MergeEntry], result: ProcessResult, run: _Run) -> None:
        """Records of both topics in merge order, joining labels to features by id."""
        for entry in entries:
            rank, record, decoded = entry.rank, entry.record, entry.decoded
            self.next_offsets[rank] = entry.offset + 1
            result.consumed[rank] += 1
            if entry.ts > self.event_time and not isinstance(decoded, Invalid):
                # only usable records move the event clock: a bad record's time may be on another clock
                self.event_time = entry.ts
                self._expire(result)
            if isinstance(decoded, Invalid):
                self._dead_letter(result, rank, record, decoded.reason)
            elif isinstance(decoded, Feature):  # the features topic's records decode to Features
                self._on_feature(result, run, record, decoded)
            else:
                self._on_label(result, run, record, decoded)

    def _on_feature(self, result: ProcessResult, run: _Run, record: Record, feat: Feature) -> None:
        x = self.schema.conform(feat.x)
        if isinstance(x, str):
            self._dead_letter(result, FEATURES, record, x)
            return
        if feat.y is not None:
            if not run.admits(feat.y):
                self._dead_letter(result, FEATURES, record, "too_many_classes")
                return
            row = run.add(x, feat.y)
            run.scores.append((feat.y, row))
        elif self.config.labels_topic is None:
            row = run.add(x, None)
        elif feat.id is None:
            self._dead_letter(result, FEATURES, record, "missing_id")
            return
        elif feat.id in self.join.features:
            self._dead_letter(result, FEATURES, record, "duplicate_id")
            return
        elif (label := self.join.pop_label(feat.id)) is not None:  # its label was waiting
            if run.admits(label.y):
                row = run.add(x, label.y)
                run.scores.append((label.y, row))
            else:
                source = Record(label.offset, label.ts, label.key, label.raw)
                self._dead_letter(result, LABELS, source, "too_many_classes")
                row = run.add(x, None)
        else:
            row = run.add(x, None)
            entry = PendingFeature(feat.id, x, feat.ts, record.offset, row=row, size=len(record.value or b""))
            run.waiting.append(entry)
            for _ in self.join.add_feature(entry):
                _count(result.expired, ("features", "size"))
        run.published.append((row, feat, record))

    def _on_label(self, result: ProcessResult, run: _Run, record: Record, label: LabelRecord) -> None:
        pending = self.join.features.get(label.id)
        if pending is not None and not run.admits(label.y):
            self._dead_letter(result, LABELS, record, "too_many_classes")
        elif pending is not None:
            self.join.pop_feature(label.id)
            run.add(pending.x, label.y)
            run.scores.append((label.y, pending))
        elif label.id in self.join.labels:
            self._dead_letter(result, LABELS, record, "duplicate_id")
        else:
            entry = PendingLabel(label.id, label.y, label.ts, record.value or b"", record.key, record.offset)
            for evicted in self.join.add_label(entry):
                self._drop_label(result, evicted, "size")

    def _expire(self, result: ProcessResult) -> None:
        if not (self.join.features or self.join.labels):
            return
        features, labels = self.join.expire(self.event_time)
        if features:
            _count(result.expired, ("features", "age"), len(features))
        for entry in labels:
            self._drop_label(result, entry, "age")

    def _drop_label(self, result: ProcessResult, entry: PendingLabel, reason: str) -> None:
        """A label that never met its features is counted as expired and dead-lettered as unknown_id."""
        _count(result.expired, ("labels", reason))
        source = Record(entry.offset, entry.ts, entry.key, entry.raw)
        self._dead_letter(result, LABELS, source, "unknown_id")

    def _dead_letter(self, result: ProcessResult, rank: int, record: Record, reason: str) -> None:
        topic = self.config.features_topic if rank == FEATURES else (self.config.labels_topic or "")
        headers = [
            ("reason", reason.encode()),
            ("source_topic", topic.encode()),
            ("source_partition", str(self.partition).encode()),
            ("source_offset", str(record.offset).encode()),
        ]
        key, value, headers = fit_dead_letter(
            record.key, record.value or b"", headers, self.config.max_message_bytes
        )
        result.dead_letters.append(DeadLetter(Output(key, value, record.ts, headers), topic, reason))

    # -- the model call -------------------------------------------------------------------------------

    def _execute(self, run: _Run, result: ProcessResult, now: float) -> None:
        if not run.y:
            return
        classes_before = list(classes_of(self.model)) if self.classification else []
        config = self.config
        coverage = None if self.classification else interval_of(self.model, config.interval_coverage)
        rows = [row for row, _, _ in run.published] if coverage is not None or config.explain else []
        call = predict_learn(self.model, run.x, run.y, rows, coverage, config.explain, config.max_label_bytes)
        scores = call.scores
        classes = classes_of(self.model) if self.classification else None
        known = None
        if classes is not None and len(classes) > len(classes_before):
            known = _known_classes(classes_before, run.y)
        out = _Predictions(scores, classes, known)
        # model_version of row r: records learned before this call plus rows before r that carried a label
        learned_before = list(accumulate((y is not None for y in run.y), initial=self.trained))
        for entry in run.waiting:
            assert entry.row is not None  # a waiting entry's row is in this run
            entry.prediction, entry.proba = out.labels[entry.row], out.pairs(entry.row)
            entry.interval = call.fields.get(entry.row, {}).get("interval")
            entry.row = None
        self._score(run, out)
        self._score_intervals(run, call.fields)
        labels, published = out.labels, run.published
        probas = out.proba_dicts(published, self.config.proba_top_k) if out.classification else None
        docs = _documents(published, labels, probas, learned_before, self.partition, now)
        if call.fields:
            for doc, (row, _, _) in zip(docs, published, strict=True):
                doc.update(call.fields[row])
        # b"%b" % copies each document into a bytes object of its own size. It buys memory, not time: a
        # bytes object orjson returns keeps a 4 KiB buffer (tracemalloc: 4,097 bytes per 121-byte
        # prediction, 162 with the copy), and a run, which may be as long as the merge queues (up to
        # 100,000 records, 400 MB), keeps all of its predictions until they are produced. (The copy
        # costs no time: 0.31 against 0.38 us per record, the core benchmark's predictions.)
        values = [b"%b" % orjson.dumps(doc) for doc in docs]
        result.predictions = [
            Output(record.key, value, feat.ts)
            for (_, feat, record), value in zip(published, values, strict=True)
        ]
        room = self.config.max_message_bytes - FRAMING_BYTES
        keys = [record.key for _, _, record in published]
        if max(map(len, values), default=0) + max(map(len, filter(None, keys)), default=0) > room:
            self._drop_oversized(result, published, room)
        result.trained = learned_before[-1] - self.trained
        self.trained = learned_before[-1]
        self.predicted += len(run.published)

    def _drop_oversized(
        self, result: ProcessResult, published: list[tuple[int, Feature, Record]], room: int
    ) -> None:
        """Dead-letter (``prediction_too_large``) the records whose prediction would not fit a message:
        only an id or key of about the message size does that, as labels and ``proba`` are bounded."""
        kept = []
        for out, (_, _, record) in zip(result.predictions, published, strict=True):
            if len(out.value) + len(out.key or b"") > room:
                self._dead_letter(result, FEATURES, record, "prediction_too_large")
            else:
                kept.append(out)
        result.predictions = kept

    def _score(self, run: _Run, out: _Predictions) -> None:
        """Score each labelled record against the prediction published for it (this call's or earlier)."""
        if not run.scores:
            return
        truths = [y_true for y_true, _ in run.scores]
        labels = out.labels
        preds = [labels[source] if type(source) is int else source.prediction for _, source in run.scores]
        probs = squares = None
        if out.classification:
            rows, column = out.rows, out.index
            probs = [
                (rows[source][column[y_true]] if y_true in column else 0.0)
                if type(source) is int
                else None
                if source.proba is None
                else dict(source.proba).get(y_true, 0.0)
                for y_true, source in run.scores
            ]
            # for the Brier score: the sum of the squared probabilities of the published row
            squares = [
                sum(p * p for p in rows[source])
                if type(source) is int
                else None
                if source.proba is None
                else sum(p * p for _, p in source.proba)
                for _, source in run.scores
            ]
        self.prequential.update_many(truths, preds, probs, squares)

    def _score_intervals(self, run: _Run, fields: dict[int, dict[str, Any]]) -> None:
        """Score each labelled record against the interval published for it, if it had one."""
        if self.intervals is None:
            return
        for y_true, source in run.scores:
            interval = fields.get(source, {}).get("interval") if type(source) is int else source.interval
            if interval is not None:
                self.intervals.update(float(y_true), interval)

    # -- snapshot -----------------------------------------------------------------------------------

    def to_bytes(self) -> bytes:
        """Header (JSON) and the model's bytes, zlib-compressed; restored exactly by :meth:`from_bytes`.

        sgt already leaves out the empty bins of the split statistics; level-1 compression shrinks
        the rest about fivefold (1.9 MB to 0.36 MB for a 1,089-node model) in about 10 ms, which keeps
        checkpoint files and their fsync small.
        """
        header = {
            "format": STATE_FORMAT,
            "partition": self.partition,
            "task": self.config.task,
            "features_topic": self.config.features_topic,
            "labels_topic": self.config.labels_topic,
            "model_type": type(self.model).__name__,
            "next_offsets": self.next_offsets,
            "consumed": self.consumed,
            "trained": self.trained,
            "predicted": self.predicted,
            "event_time": None if self.event_time == float("-inf") else self.event_time,
            "prequential": self.prequential.to_dict(),
            "schema": self.schema.to_dict(),
            "join": self.join.to_dict(),
        }
        if self.intervals is not None:
            header["intervals"] = self.intervals.to_dict()
        head = orjson.dumps(header)
        return struct.pack(">I", len(head)) + head + zlib.compress(self.model.to_bytes(), 1)

    @classmethod
    def from_bytes(
        cls, blob: bytes, config: StateConfig, model_types: Mapping[str, ModelClass]
    ) -> PartitionState:
        """Restore a state; raises ValueError when the blob does not fit ``config`` or is malformed."""
        try:
            return cls._from_bytes(blob, config, model_types)
        except (KeyError, TypeError, IndexError, AttributeError) as exc:
            raise ValueError(f"malformed state: {type(exc).__name__}: {exc}") from None

    @classmethod
    def _from_bytes(
        cls, blob: bytes, config: StateConfig, model_types: Mapping[str, ModelClass]
    ) -> PartitionState:
        header, model_blob = split_state(blob)
        if header.get("format") != STATE_FORMAT:
            raise ValueError(f"unsupported state format {header.get('format')!r}")
        for key, expected in (
            ("task", config.task),
            ("features_topic", config.features_topic),
            ("labels_topic", config.labels_topic),
        ):
            if header[key] != expected:
                raise ValueError(f"checkpoint was written for {key}={header[key]!r}, not {expected!r}")
        model_type = model_types.get(header["model_type"])
        if model_type is None:
            raise ValueError(f"unknown model type {header['model_type']!r}")
        state = cls(int(header["partition"]), model_type.from_bytes(model_blob), config)
        state.next_offsets = [int(o) for o in header["next_offsets"]]
        state.consumed = [int(c) for c in header["consumed"]]
        state.trained = int(header["trained"])
        state.predicted = int(header["predicted"])
        state.event_time = float("-inf") if header["event_time"] is None else float(header["event_time"])
        state.prequential = Prequential.from_dict(header["prequential"])
        if state.intervals is not None and "intervals" in header:  # (else saved before it was on)
            state.intervals = IntervalScore.from_dict(header["intervals"])
        state.schema = FeatureSchema.from_dict(header["schema"], config.max_features)
        state.join = JoinBuffer.from_dict(
            header["join"], config.join_max_pending, config.join_max_age, config.join_max_bytes
        )
        return state


def _trees(classes: int) -> int:
    """The trees a classifier with that many classes updates a row (at least one)."""
    return max(classes - 1, 1)


def _rows_within(classes: int) -> int:
    """The rows of one model call at that many classes (at least one)."""
    return max(MODEL_CALL_TREE_ROWS // _trees(classes), 1)


def state_header(blob: bytes) -> dict[str, Any]:
    """The JSON header of a state blob (offsets, records seen, ...), without decompressing the model."""
    return _split_header(blob)[0]


def _split_header(blob: bytes) -> tuple[dict[str, Any], int]:
    if len(blob) < 4:
        raise ValueError("state blob too short")
    (size,) = struct.unpack(">I", blob[:4])
    if size > len(blob) - 4:
        raise ValueError("state header length exceeds the blob")
    header = orjson.loads(blob[4 : 4 + size])
    if not isinstance(header, dict):
        raise ValueError("state header is not an object")
    return header, size


def split_state(blob: bytes) -> tuple[dict[str, Any], bytes]:
    """The JSON header and the (decompressed) model bytes of a state blob."""
    header, size = _split_header(blob)
    try:
        return header, zlib.decompress(blob[4 + size :])
    except zlib.error as exc:
        raise ValueError(f"the model bytes are not valid zlib data: {exc}") from None


def _count(counter: dict[tuple[str, str], int], key: tuple[str, str], n: int = 1) -> None:
    counter[key] = counter.get(key, 0) + n
