"""Prequential scores of one model on one stream, computed from the predictions it published.

Every model is run test-then-train, one pass: each record is predicted by the model that has learned
all earlier records and none later. A run yields :class:`Predictions` (what was published before each
record was learned) and this module turns them into :class:`Scores`, the same way for every model:

* **accuracy**: % of records whose predicted label is the true one (no prediction counts as wrong);
  **MAE** for regression (no prediction counts as 0.0, as River's evaluation does);
* **log loss**: mean of ``-ln p``, where ``p`` is the probability published for the true class,
  clipped to ``[1e-15, 1]`` (a class the model had not seen yet has ``p = 0``, so it costs
  ``-ln 1e-15 ≈ 34.5``; so does a record predicted before the model published any distribution);
* **Brier score**: mean over records of ``sum_k (p_k - [y = k])^2`` over all the stream's classes
  (0 is perfect, 2 the worst; a model that publishes nothing scores 1 on that record);
  probabilities whose sum is positive but not 1 (MOA's votes) are divided by their sum first;
* **first 500 / first 2,000**: accuracy (MAE) over the first 500 and 2,000 records (nan on a shorter
  stream);
* **from record 201**: accuracy (MAE) over records 201 to the end, the range on which a model must
  at least match a constant majority-class guess;
* **recovery after a drift** (streams with known drifts): the per-record error is 1/0 (wrong/right)
  for classification and the absolute error for regression; the *recent-window error at record t*
  is its mean over the ``window`` records before t (default 1,000). The *pre-drift level* ``L`` is the
  recent-window error at the first record that may come from the new concept (``Drift.start``). The
  recovery is ``t - Drift.end`` for the first ``t >= Drift.end + window`` (so that the window holds
  only records after the change) at which the recent-window error is at most ``L + 0.01`` (1 point;
  for regression ``L × 1.05``). It is therefore at least ``window``; ``None`` means the error was not
  back within the tolerance before the next drift started (or the stream ended). A drift with fewer
  than ``window`` records before it, or fewer than ``window`` after its end, is not measurable.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from tests.bench.streams import Drift, Stream

P_MIN = 1e-15  # the clip of the log loss, as the library's prequential metrics
WINDOW = 1_000
RECOVERY_POINTS = 0.01  # classification: back within 1 point of the pre-drift error
RECOVERY_RELATIVE = 0.05  # regression: back within 5% of the pre-drift MAE
NO_LABEL = -1


@dataclass(frozen=True)
class Predictions:
    """What a model published before learning each record, and how long the whole run took.

    Classification: ``label`` (class index into ``Stream.classes``, ``NO_LABEL`` when it made no
    prediction) and ``proba`` ``[records, classes]`` in ``Stream.classes`` order (all zero when it
    published nothing). Regression: ``value``.
    """

    seconds: float
    label: np.ndarray | None = None
    proba: np.ndarray | None = None
    value: np.ndarray | None = None

    @property
    def n(self) -> int:
        return len(self.value if self.value is not None else self.label)


@dataclass(frozen=True)
class Recovery:
    """Records needed after one drift until the recent-window error is back to its pre-drift level."""

    drift: Drift
    before: float  # the pre-drift recent-window error (error rate, or MAE); nan when not measurable
    records: int | None  # None: not back before the next drift or the end of the stream

    @property
    def measurable(self) -> bool:
        """False when the stream has too few records before or after the drift for a full window."""
        return not math.isnan(self.before)


@dataclass(frozen=True)
class Scores:
    """One model's prequential scores on one stream (accuracy in %, or MAE for regression)."""

    regression: bool
    n: int
    seconds: float
    headline: float  # accuracy % or MAE over all records
    first_500: float
    first_2000: float
    from_201: float
    log_loss: float  # nan for regression
    brier: float  # nan for regression
    recoveries: tuple[Recovery, ...]

    @property
    def rate(self) -> float:
        """Records per second of the whole prequential run (predict, then learn)."""
        return self.n / self.seconds if self.seconds > 0 else math.nan


def errors(stream: Stream, predictions: Predictions) -> np.ndarray:
    """Per-record error: 1.0/0.0 for a wrong/right label, or the absolute error of a regression."""
    truth = stream.target[: predictions.n]
    if stream.spec.is_regression:
        return np.abs(truth - predictions.value)
    return (predictions.label != truth).astype(float)


def _headline(err: np.ndarray, regression: bool) -> float:
    if len(err) == 0:
        return math.nan
    return float(err.mean()) if regression else 100.0 * (1.0 - float(err.mean()))


def normalised(proba: np.ndarray) -> np.ndarray:
    """Rows divided by their sum where it is positive (all-zero rows stay zero)."""
    total = proba.sum(axis=1, keepdims=True)
    return np.divide(proba, total, out=np.zeros_like(proba), where=total > 0)


def log_loss(truth: np.ndarray, proba: np.ndarray) -> float:
    """Mean ``-ln p(true class)``, clipped to ``[P_MIN, 1]``."""
    p_true = normalised(proba)[np.arange(len(truth)), truth]
    return float(-np.log(np.clip(p_true, P_MIN, 1.0)).mean())


def brier(truth: np.ndarray, proba: np.ndarray) -> float:
    """Mean over records of the squared error summed over classes (0 best, 2 worst)."""
    onehot = np.zeros_like(proba)
    onehot[np.arange(len(truth)), truth] = 1.0
    return float(((normalised(proba) - onehot) ** 2).sum(axis=1).mean())


def recoveries(
    err: np.ndarray, drifts: tuple[Drift, ...], regression: bool, window: int
) -> tuple[Recovery, ...]:
    """Recovery after each drift (the module docstring defines it)."""
    cumulative = np.concatenate([[0.0], np.cumsum(err)])

    def recent(t: np.ndarray | int) -> np.ndarray:  # mean error over records [t - window, t)
        return (cumulative[t] - cumulative[np.subtract(t, window)]) / window

    out = []
    for i, drift in enumerate(drifts):
        horizon = drifts[i + 1].start if i + 1 < len(drifts) else len(err)
        if drift.start < window or drift.end + window > horizon:
            out.append(Recovery(drift, math.nan, None))
            continue
        before = float(recent(drift.start))
        limit = before * (1 + RECOVERY_RELATIVE) if regression else before + RECOVERY_POINTS
        t = np.arange(drift.end + window, horizon + 1)
        back = np.flatnonzero(recent(t) <= limit + 1e-12)
        out.append(Recovery(drift, before, int(t[back[0]] - drift.end) if len(back) else None))
    return tuple(out)


def score(stream: Stream, predictions: Predictions, window: int = WINDOW) -> Scores:
    """Every score of one run; ``window`` is the recent window of the drift recovery."""
    regression = stream.spec.is_regression
    err = errors(stream, predictions)
    if regression:
        loss = brier_score = math.nan
    else:
        truth = stream.target[: predictions.n]
        loss, brier_score = log_loss(truth, predictions.proba), brier(truth, predictions.proba)
    return Scores(
        regression=regression,
        n=predictions.n,
        seconds=predictions.seconds,
        headline=_headline(err, regression),
        first_500=_headline(err[:500], regression) if len(err) >= 500 else math.nan,
        first_2000=_headline(err[:2000], regression) if len(err) >= 2000 else math.nan,
        from_201=_headline(err[200:], regression),
        log_loss=loss,
        brier=brier_score,
        recoveries=recoveries(err, stream.drifts, regression, window),
    )
