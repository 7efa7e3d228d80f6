"""Prequential (test-then-train) evaluation: cumulative and recent-window metrics, exact and serialisable.

The Kafka worker keeps one :class:`Prequential` per partition and stores it in its checkpoints, and the
offline evaluator and the benchmarks use it too. Two properties matter for that:

* **Exactness.** ``update_many`` runs the same per-record arithmetic, in the same order, as a loop of
  ``update``, so the state is bit for bit the same however the records were batched. Counts of
  classification errors are integers; the sums of absolute and squared errors and of log losses are
  accumulated one record at a time in record order. The recent-window error is computed on demand from
  the window's contents (``math.fsum``, correctly rounded), so it does not drift.
* **Serialisability.** :meth:`Prequential.to_dict` returns plain JSON types (ints, floats, strings,
  lists) and :meth:`Prequential.from_dict` restores the state exactly, window contents and order
  included, and rejects malformed input with ``ValueError``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

_TASKS = ("classification", "regression")
_P_MIN = 1e-15
_FORMAT = 2
_KEYS_V1 = frozenset(
    {"format", "task", "window", "n", "n_wrong", "sum_abs", "sum_sq", "n_log", "sum_log", "recent"}
)
# format 2 adds the Brier score and the recent windows of the probability scores
_KEYS = _KEYS_V1 | {"n_brier", "sum_brier", "recent_log", "recent_brier"}


class Prequential:
    """Cumulative and recent-window prequential metrics for a classification or regression stream.

    Feed it each record's true target and the prediction that was made *before* the model learned that
    record. ``error`` is the error rate for classification and the mean absolute error for regression;
    ``recent_error`` is the same over the last ``window`` records. ``p_true``, the probability the model
    gave the true class, feeds the log loss (clipped to ``[1e-15, 1]``); records without it do not count
    towards the log loss. ``p_sq``, the sum of the squared probabilities of all classes, adds the Brier
    score: ``sum_k (p_k - [k == y])^2 = 1 - 2 p_true + p_sq`` (0 for a certain right answer, 2 for a
    certain wrong one). Both are kept cumulatively and over the last ``window`` records that had them.

    >>> m = Prequential("classification", window=2)
    >>> m.update("cat", "cat", p_true=0.8)
    >>> m.update_many(["dog", "cat"], ["cat", "cat"], p_true=[0.25, 0.5])
    >>> m.n, round(m.error, 4), m.recent_error, m.accuracy
    (3, 0.3333, 0.5, 0.6666666666666666)
    >>> round(m.log_loss, 6), round(m.recent_log_loss, 6)
    (0.767528, 1.039721)
    >>> m.update("dog", "cat", p_true=0.25, p_sq=0.625)  # proba {"cat": 0.75, "dog": 0.25}
    >>> m.brier, m.recent_brier
    (1.125, 1.125)
    >>> Prequential.from_dict(m.to_dict()).to_dict() == m.to_dict()
    True
    >>> r = Prequential("regression")
    >>> r.update_many([1.0, 2.0, 4.0], [1.5, 2.0, 1.0])
    >>> r.mae, r.rmse, r.error_rate
    (1.1666666666666667, 1.7559422921421233, nan)
    """

    def __init__(self, task: str = "classification", window: int = 1000) -> None:
        if task not in _TASKS:
            raise ValueError(f"task must be 'classification' or 'regression', got {task!r}")
        if isinstance(window, bool) or not isinstance(window, int) or window < 1:
            raise ValueError(f"window must be an integer >= 1, got {window!r}")
        self._task = task
        self._window = window
        self._n = 0
        self._n_wrong = 0  # classification: records whose prediction was wrong
        self._sum_abs = 0.0  # regression: sum of |y - y_pred| in record order
        self._sum_sq = 0.0  # regression: sum of (y - y_pred)^2 in record order
        self._n_log = 0  # classification records that came with p_true
        self._sum_log = 0.0  # sum of -log(clip(p_true)) in record order
        self._n_brier = 0  # classification records that came with p_true and p_sq
        self._sum_brier = 0.0  # sum of their Brier scores in record order
        self._recent: list[float] = []  # per-record errors (0/1 or |y - y_pred|), last `window`, oldest first
        self._recent_log: list[float] = []  # log losses of the last `window` records that had one
        self._recent_brier: list[float] = []  # Brier scores of the last `window` records that had one

    # -- recording ---------------------------------------------------------------------------------

    def update(
        self, y_true: Any, y_pred: Any, p_true: float | None = None, p_sq: float | None = None
    ) -> None:
        """Score one record: ``y_pred`` was predicted for it before the model learned ``y_true``."""
        self.update_many(
            [y_true], [y_pred], None if p_true is None else [p_true], None if p_sq is None else [p_sq]
        )

    def update_many(
        self,
        y_true: Sequence[Any],
        y_pred: Sequence[Any],
        p_true: Sequence[float | None] | None = None,
        p_sq: Sequence[float | None] | None = None,
    ) -> None:
        """Score a batch of records in order; bit for bit the same state however a stream is batched.

        The batch is validated as a whole first, so a bad record leaves the metrics untouched.
        """
        ys, preds = list(y_true), list(y_pred)
        probs = [None] * len(ys) if p_true is None else list(p_true)
        squares = [None] * len(ys) if p_sq is None else list(p_sq)
        if not len(ys) == len(preds) == len(probs) == len(squares):
            lengths = f"{len(ys)}, {len(preds)}, {len(probs)}, {len(squares)}"
            raise ValueError(f"y_true, y_pred, p_true and p_sq must have the same length, got {lengths}")
        errors: list[float]  # 0 or 1 per record (classification), absolute errors (regression)
        if self._task == "classification":
            errors = [0 if yp == y else 1 for y, yp in zip(ys, preds, strict=True)]
            losses = [None if p is None else _log_loss(p) for p in probs]
            briers = [_brier(p, q) for p, q in zip(probs, squares, strict=True)]
        else:
            errors = [self._regression_error(y, yp, p, q) for y, yp, p, q in zip(ys, preds, probs, squares)]
        self._n += len(errors)
        if self._task == "regression":
            for err in errors:  # one record at a time, in record order, so batching cannot matter
                self._sum_abs += err
                self._sum_sq += err * err
            _push(self._recent, errors, self._window)
            return
        self._n_wrong += int(sum(errors))
        losses_given = [loss for loss in losses if loss is not None]
        briers_given = [b for b in briers if b is not None]
        for loss in losses_given:
            self._sum_log += loss
        for b in briers_given:
            self._sum_brier += b
        self._n_log += len(losses_given)
        self._n_brier += len(briers_given)
        _push(self._recent, errors, self._window)
        _push(self._recent_log, losses_given, self._window)
        _push(self._recent_brier, briers_given, self._window)

    def update_proba_many(self, y_true: Sequence[Any], proba: Any, classes: Sequence[Any]) -> None:
        """Score a batch of classifier probability rows, e.g. from ``predict_learn_many``.

        ``proba[i]`` holds row i's class probabilities in ``classes`` order. The prediction is the most
        probable class (the first one on ties, ``None`` while a row is all zero, i.e. before the model
        knew any class) and ``p_true`` is the probability of the true class (0 for a class not in
        ``classes``). Rows whose ``y_true`` is ``None`` are unlabelled and skipped.

        >>> m = Prequential("classification")
        >>> m.update_proba_many(["a", "b", None], [[0.0, 0.0], [0.7, 0.3], [0.5, 0.5]], ["a", "b"])
        >>> m.n, m.error_rate, round(m.log_loss, 4)
        (2, 1.0, 17.8714)
        """
        if self._task != "classification":
            raise ValueError("update_proba_many applies to classification only")
        ys_in, rows = list(y_true), list(proba)
        if len(ys_in) != len(rows):
            raise ValueError(f"y_true and proba must have the same length, got {len(ys_in)} and {len(rows)}")
        labels = list(classes)
        column = {c: j for j, c in enumerate(labels)}
        ys, preds, ps, squares = [], [], [], []
        for y, row in zip(ys_in, rows, strict=True):
            if y is None:
                continue
            values = [float(p) for p in row]
            if len(values) != len(labels):
                raise ValueError(f"a probability row has {len(values)} columns for {len(labels)} classes")
            best = max(range(len(values)), key=values.__getitem__, default=None)
            ys.append(y)
            preds.append(None if best is None or not values[best] > 0 else labels[best])
            ps.append(values[column[y]] if y in column else 0.0)
            squares.append(math.fsum(v * v for v in values))
        self.update_many(ys, preds, ps, squares)

    @staticmethod
    def _regression_error(y_true: Any, y_pred: Any, p_true: float | None, p_sq: float | None) -> float:
        """The record's absolute error; raise on bad values."""
        if p_true is not None or p_sq is not None:
            raise ValueError("p_true and p_sq apply to classification only")
        y, yp = _finite(y_true, "y_true"), _finite(y_pred, "y_pred")
        err = abs(y - yp)
        if math.isinf(err):
            raise ValueError(f"the error |y_true - y_pred| overflows: y_true={y!r}, y_pred={yp!r}")
        return err

    # -- metrics ---------------------------------------------------------------------------------------

    @property
    def task(self) -> str:
        """``"classification"`` or ``"regression"``."""
        return self._task

    @property
    def window(self) -> int:
        """Number of most recent records that ``recent_error`` covers."""
        return self._window

    @property
    def n(self) -> int:
        """Records scored so far."""
        return self._n

    @property
    def error(self) -> float:
        """Cumulative error: the error rate (classification) or the MAE (regression); nan when n = 0."""
        return self.error_rate if self._task == "classification" else self.mae

    @property
    def recent_error(self) -> float:
        """``error`` over the last ``window`` records; nan when no record was scored."""
        if not self._recent:
            return math.nan
        if self._task == "classification":
            return sum(self._recent) / len(self._recent)
        return math.fsum(self._recent) / len(self._recent)

    @property
    def error_rate(self) -> float:
        """Fraction of wrong predictions (classification; nan for regression or when n = 0)."""
        if self._task != "classification" or self._n == 0:
            return math.nan
        return self._n_wrong / self._n

    @property
    def accuracy(self) -> float:
        """Fraction of right predictions (classification; nan for regression or when n = 0)."""
        if self._task != "classification" or self._n == 0:
            return math.nan
        return (self._n - self._n_wrong) / self._n

    @property
    def log_loss(self) -> float:
        """Mean of ``-log(p_true)`` over the records that came with ``p_true``; nan when there were none."""
        return self._sum_log / self._n_log if self._n_log else math.nan

    @property
    def recent_log_loss(self) -> float:
        """``log_loss`` over the last ``window`` records that came with ``p_true``; nan when none did."""
        return math.fsum(self._recent_log) / len(self._recent_log) if self._recent_log else math.nan

    @property
    def brier(self) -> float:
        """Mean Brier score over the records that came with ``p_true`` and ``p_sq``; nan when none did."""
        return self._sum_brier / self._n_brier if self._n_brier else math.nan

    @property
    def recent_brier(self) -> float:
        """``brier`` over the last ``window`` records that had one; nan when none did."""
        return math.fsum(self._recent_brier) / len(self._recent_brier) if self._recent_brier else math.nan

    @property
    def mae(self) -> float:
        """Mean absolute error (regression; nan for classification or when n = 0)."""
        if self._task != "regression" or self._n == 0:
            return math.nan
        return self._sum_abs / self._n

    @property
    def rmse(self) -> float:
        """Root mean squared error (regression; nan for classification or when n = 0)."""
        if self._task != "regression" or self._n == 0:
            return math.nan
        return math.sqrt(self._sum_sq / self._n)

    def summary(self) -> dict[str, float | int]:
        """The metrics that apply to this task, as a flat dict (for reports and JSON output)."""
        out: dict[str, float | int] = {"n": self._n, "error": self.error, "recent_error": self.recent_error}
        if self._task == "classification":
            out.update(accuracy=self.accuracy, log_loss=self.log_loss, brier=self.brier)
        else:
            out.update(mae=self.mae, rmse=self.rmse)
        return out

    # -- serialisation ---------------------------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        """The complete state as JSON-safe plain types; the window is listed oldest record first."""
        return {
            "format": _FORMAT,
            "task": self._task,
            "window": self._window,
            "n": self._n,
            "n_wrong": self._n_wrong,
            "sum_abs": self._sum_abs,
            "sum_sq": self._sum_sq,
            "n_log": self._n_log,
            "sum_log": self._sum_log,
            "n_brier": self._n_brier,
            "sum_brier": self._sum_brier,
            "recent": list(self._recent),
            "recent_log": list(self._recent_log),
            "recent_brier": list(self._recent_brier),
        }

    @classmethod
    def from_dict(cls, d: Any) -> Prequential:
        """Restore a state written by :meth:`to_dict`; raise ``ValueError`` when ``d`` is malformed.

        A state of format 1 (before the Brier score and the recent probability windows) restores with
        those empty: they fill again from the next records.
        """
        if not isinstance(d, dict):
            raise ValueError(f"a Prequential state must be a dict, got {type(d).__name__}")
        version = d.get("format")
        if version not in (1, _FORMAT) or isinstance(version, bool):
            raise ValueError(f"unsupported Prequential state format {version!r} (expected 1 or {_FORMAT})")
        keys = _KEYS_V1 if version == 1 else _KEYS
        if set(d) != keys:
            raise ValueError(f"a Prequential state needs exactly the keys {sorted(keys)}, got {sorted(d)}")
        if version == 1:
            d = {**d, "n_brier": 0, "sum_brier": 0.0, "recent_log": [], "recent_brier": []}
        m = cls(d["task"], d["window"])
        n, n_wrong, n_log, n_brier = (_count(d, key) for key in ("n", "n_wrong", "n_log", "n_brier"))
        sum_abs, sum_sq, sum_log, sum_brier = (
            _total(d, key) for key in ("sum_abs", "sum_sq", "sum_log", "sum_brier")
        )
        regression = m.task == "regression"
        classified = n_wrong or n_log or sum_log or n_brier or sum_brier
        if n_wrong > n or n_log > n or n_brier > n_log or (regression and classified):
            raise ValueError("inconsistent Prequential state: counts exceed n or do not fit the task")
        if not regression and (sum_abs or sum_sq):
            raise ValueError("inconsistent Prequential state: regression sums in a classification state")
        recent = _window_entries(d["recent"], m.task, min(n, m.window))
        recent_log = _score_window(d["recent_log"], "recent_log", n_log, m.window, version)
        recent_brier = _score_window(d["recent_brier"], "recent_brier", n_brier, m.window, version)
        m._n, m._n_wrong, m._n_log, m._n_brier = n, n_wrong, n_log, n_brier
        m._sum_abs, m._sum_sq, m._sum_log, m._sum_brier = sum_abs, sum_sq, sum_log, sum_brier
        m._recent, m._recent_log, m._recent_brier = recent, recent_log, recent_brier
        return m

    def __repr__(self) -> str:
        return f"Prequential({self._task!r}, window={self._window}, n={self._n}, error={self.error:.6g})"


def _log_loss(p_true: Any) -> float:
    """``-log`` of the true class's probability, clipped to ``[1e-15, 1]``; nan is refused."""
    p = float(p_true)
    if math.isnan(p):
        raise ValueError("p_true must be a probability, got nan")
    return -math.log(min(max(p, _P_MIN), 1.0))


def _brier(p_true: Any, p_sq: Any) -> float | None:
    """The Brier score ``1 - 2 p_true + p_sq`` of one record; None unless both are given.

    The identity ``sum_k (p_k - [k == y])^2 = 1 - 2 p_y + sum_k p_k^2`` holds for any row, so a class
    the row does not name (``p_true`` 0) costs its full 1.
    """
    if p_true is None or p_sq is None:
        return None
    p, q = float(p_true), float(p_sq)
    if not (math.isfinite(p) and math.isfinite(q) and q >= 0.0):
        raise ValueError(f"p_true and p_sq must be finite and p_sq >= 0, got {p_true!r} and {p_sq!r}")
    return max(1.0 - 2.0 * p + q, 0.0)  # rounding may take a certain right answer just below 0


def _push(window: list[float], values: list[Any], size: int) -> None:
    """Add values to a recent window, oldest first, dropping the oldest beyond ``size``."""
    window.extend(values)
    if len(window) > size:
        del window[: len(window) - size]


def _finite(value: Any, name: str) -> float:
    try:
        x = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a number, got {value!r}") from None
    if not math.isfinite(x):
        raise ValueError(f"{name} must be finite, got {value!r}")
    return x


def _count(d: dict[str, Any], key: str) -> int:
    value = d[key]
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"Prequential state {key!r} must be an integer >= 0, got {value!r}")
    return value


def _total(d: dict[str, Any], key: str) -> float:
    value = d[key]
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value >= 0:
        raise ValueError(f"Prequential state {key!r} must be a number >= 0, got {value!r}")
    return float(value)


def _window_entries(entries: Any, task: str, expected: int) -> list[float]:
    if not isinstance(entries, list) or len(entries) != expected:
        raise ValueError(f"Prequential state 'recent' must be a list of {expected} errors, got {entries!r}")
    for e in entries:
        if task == "classification" and (type(e) is not int or e not in (0, 1)):
            raise ValueError(f"a classification window holds 0 or 1 per record, got {e!r}")
        if task == "regression" and (type(e) is not float or not (math.isfinite(e) and e >= 0)):
            raise ValueError(f"a regression window holds finite errors >= 0, got {e!r}")
    return list(entries)


def _score_window(entries: Any, key: str, given: int, window: int, version: int) -> list[float]:
    """A recent window of log losses or Brier scores: at most ``min(given, window)`` finite values >= 0.

    It holds fewer only in a state restored from format 1, which had no such windows (they start empty
    and fill from the next records).
    """
    most = 0 if version == 1 else min(given, window)
    if not isinstance(entries, list) or len(entries) > most:
        raise ValueError(
            f"Prequential state {key!r} must be a list of at most {most} scores, got {entries!r}"
        )
    for e in entries:
        if type(e) is not float or not (math.isfinite(e) and e >= 0):
            raise ValueError(f"Prequential state {key!r} holds finite scores >= 0, got {e!r}")
    return list(entries)
