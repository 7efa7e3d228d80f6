"""A tiny deterministic stand-in for the sgt models, for tests of the worker's core.

It implements the part of the sgt API the worker uses (``predict_learn_many`` strictly prequential,
``to_bytes``/``from_bytes``, ``classes_``, size attributes) with per-class counts and a running mean,
so the worker's bookkeeping can be tested exactly without depending on the learning library.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import orjson


class StubModel:
    """Majority class (classification) or running mean of the target (regression)."""

    def __init__(self, task: str = "classification") -> None:
        self.task = task
        self.classes_: list[Any] = []
        self.counts: list[int] = []
        self.total = 0.0
        self.n_seen = 0
        self.version = 0
        self.feature_sum = 0.0

    def predict_learn_many(self, X: list[dict[str, Any]], y: list[Any]) -> np.ndarray:
        rows = []
        for x, label in zip(X, y, strict=True):
            rows.append(self._predict())
            if label is not None:
                self._learn(x, label)
        if self.task == "regression":
            return np.asarray(rows, dtype=float)
        out = np.zeros((len(rows), len(self.classes_)))
        for i, row in enumerate(rows):
            out[i, : len(row)] = row
        return out

    def _predict(self) -> Any:
        if self.task == "regression":
            return self.total / self.n_seen if self.n_seen else 0.0
        n = sum(self.counts)
        return [c / n for c in self.counts] if n else []

    def _learn(self, x: dict[str, Any], label: Any) -> None:
        self.n_seen += 1
        self.version += 1
        self.feature_sum += sum(v for v in x.values() if isinstance(v, float))
        if self.task == "regression":
            self.total += label
            return
        if label not in self.classes_:
            self.classes_.append(label)
            self.counts.append(0)
        self.counts[self.classes_.index(label)] += 1

    n_nodes = property(lambda self: 1 + 2 * (self.n_seen // 50))
    n_leaves = property(lambda self: 1 + self.n_seen // 50)
    depth = property(lambda self: self.n_seen // 50)
    nbytes = property(lambda self: 100 + 8 * len(self.counts))

    def to_bytes(self) -> bytes:
        return orjson.dumps(
            [self.task, self.classes_, self.counts, self.total, self.n_seen, self.version, self.feature_sum]
        )

    @classmethod
    def from_bytes(cls, blob: bytes) -> StubModel:
        task, classes, counts, total, n_seen, version, feature_sum = orjson.loads(blob)
        model = cls(task)
        model.classes_, model.counts, model.total = classes, counts, total
        model.n_seen, model.version, model.feature_sum = n_seen, version, feature_sum
        return model
