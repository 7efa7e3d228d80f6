"""A run's model call when predictions carry an ``interval`` or an ``explain`` field (both opt-in).

* ``interval`` (regression, setting ``interval_coverage``): ``[low, high]``, the interval the model
  had for the row when it predicted it (sgt.intervals, through ``predict_learn_interval_many``: the
  same model, and the same bytes, as ``predict_learn_many``); null before the model learned a record.
* ``explain`` (setting ``explain`` = k > 0): the model's raw score for the row (a regressor's
  prediction under squared error; a classifier's logit of ``class`` against its first class, or for a
  boosted classifier served by its single tree or forest the log ratio of the served probabilities) as
  ``base`` plus the ``top`` k feature contributions (sgt.explain), largest first, under the model that
  made the prediction. For a classifier, ``class`` is the predicted class, or the second class when the
  prediction is the first (whose logit is 0 by construction). A feature name is cut to
  ``max_label_bytes`` UTF-8 bytes, so that the field stays within :func:`worker.core.outputs.explain_bound`.
  Explaining needs the model as it was before each row, so the run is learned one row at a time
  (the same model as the batch: sgt's batch equals its loop), which is slower.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, NamedTuple, Protocol, cast

import numpy as np

from worker.core.model_protocol import StreamModel, classes_of


class AnnotatingModel(StreamModel, Protocol):
    """What the extra fields need beside `StreamModel` (sgt's models have it; a regressor with
    ``interval_coverages`` gives intervals)."""

    def explain_one(self, x: dict[str, Any]) -> Any: ...

    def predict_learn_interval_many(
        self, X: list[dict[str, Any]], y: Sequence[Any], coverage: float
    ) -> tuple[np.ndarray, np.ndarray]: ...


class Annotated(NamedTuple):
    """The model call's scores (as ``predict_learn_many`` returns them) and each published row's
    extra fields, by row."""

    scores: np.ndarray
    fields: dict[int, dict[str, Any]]


def interval_of(model: StreamModel, coverage: float | None) -> float | None:
    """The coverage the model can give intervals for (None: none asked, or a model without that
    coverage, such as one restored from a checkpoint made before the setting was on)."""
    if coverage is None or coverage not in getattr(model, "interval_coverages", ()):
        return None
    return coverage


def predict_learn(
    model: StreamModel,
    x: list[dict[str, Any]],
    y: Sequence[Any],
    published: Sequence[int],
    coverage: float | None,
    explain: int,
    max_name_bytes: int,
) -> Annotated:
    """Predict then learn each row, as ``predict_learn_many``, with the extra fields of `published`."""
    if not explain:
        if coverage is None:
            return Annotated(model.predict_learn_many(x, y), {})
        predictions, intervals = cast(AnnotatingModel, model).predict_learn_interval_many(x, y, coverage)
        rows = intervals.tolist()
        return Annotated(predictions, {row: {"interval": _interval(rows[row])} for row in published})
    return _row_by_row(cast(AnnotatingModel, model), x, y, set(published), coverage, explain, max_name_bytes)


def _row_by_row(
    model: AnnotatingModel,
    x: list[dict[str, Any]],
    y: Sequence[Any],
    published: set[int],
    coverage: float | None,
    top_k: int,
    max_name_bytes: int,
) -> Annotated:
    classification = hasattr(model, "classes_")
    scores: list[np.ndarray] = []
    fields: dict[int, dict[str, Any]] = {}
    for row in range(len(x)):
        explained = model.explain_one(x[row]) if row in published else None
        if coverage is not None:
            score, interval = model.predict_learn_interval_many(x[row : row + 1], y[row : row + 1], coverage)
        else:
            score, interval = model.predict_learn_many(x[row : row + 1], y[row : row + 1]), None
        scores.append(np.asarray(score, dtype=float))
        if explained is None:
            continue
        extra: dict[str, Any] = {}
        if interval is not None:
            extra["interval"] = _interval(interval.tolist()[0])
        if classification:
            extra["explain"] = _class_explanation(
                explained, classes_of(model), scores[-1][0], top_k, max_name_bytes
            )
        else:
            extra["explain"] = _document(explained, top_k, max_name_bytes)
        fields[row] = extra
    if not classification:
        return Annotated(np.concatenate(scores) if scores else np.zeros(0), fields)
    width = len(classes_of(model))  # classes only append: a row's columns are a prefix of the last
    matrix = np.zeros((len(scores), width))
    for row, score in enumerate(scores):
        matrix[row, : score.shape[1]] = score[0]
    return Annotated(matrix, fields)


def _interval(pair: list[float]) -> list[float] | None:
    return pair if all(math.isfinite(v) for v in pair) else None


def _document(explanation: Any, top_k: int, max_name_bytes: int) -> dict[str, Any]:
    top = {_cut(name, max_name_bytes): value for name, value in explanation.top(top_k)}
    return {"base": explanation.base, "top": top}


def _class_explanation(
    by_class: dict[Any, Any], classes: list[Any], proba: np.ndarray, top_k: int, max_name_bytes: int
) -> dict[str, Any] | None:
    """The explanation of the predicted class's logit (or the second class's: see the module)."""
    if not by_class:
        return None
    known = proba[: len(classes)]
    predicted = classes[int(np.argmax(known))] if known.size and known.max() > 0 else None
    label = predicted if predicted in by_class else next(iter(by_class))
    return {"class": label, **_document(by_class[label], top_k, max_name_bytes)}


def _cut(name: str, max_bytes: int) -> str:
    """A feature name cut to at most `max_bytes` UTF-8 bytes (whole characters)."""
    return name.encode()[:max_bytes].decode(errors="ignore")
