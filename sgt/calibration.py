"""Online calibration of the trees' softmax: a temperature and a bias per class (proba="calibrated").

The trees' softmax is often over- or under-confident: right after a concept change its leaves still
hold the old concept's values at full confidence, and a young tree on a noisy stream spreads its
probabilities less or more than its accuracy warrants. A post-hoc map of the raw scores z (the
reference class's logit 0, then one per tree) corrects this without touching what the trees learn::

    u_0 = 0,    u_k = a * z_k + b_k,    p = softmax(u)

With two classes this is Platt scaling, p = sigmoid(a z + b). The scale `a` (an inverse temperature)
and the biases `b` start at the identity (a = 1, b = 0: a young model publishes its softmax), and are
fitted online by gradient descent on the log loss of every record learned, as the trees score it when
it is learned (before they learn it: for almost every record the score it was predicted with). The
gradients are those of the softmax cross-entropy: d/d b_k = p_k - y_k, d/d a = sum_k (p_k - y_k) z_k.

Steps fall at fixed record counts: the gradients of `STEP` learned records are summed in order, then
one step of constant size `LEARNING_RATE` moves the parameters (a is kept within `SCALE_BOUNDS`). A
constant step forgets: after a concept change the overconfident softmax is cooled within a few
hundred records, where a decaying step (AdaGrad) would have frozen. Between two steps the parameters
do not change, so a batch is calibrated one piece per step, each piece with numpy; the one-record
path does the same arithmetic on Python floats in the same order (+, -, * and numpy's exp, each
rounded once; sums of gradients from left to right, as numpy's cumulative sum), so both give the same
bits however the records were batched. A class first seen mid-stream starts with bias 0.

BENCHMARKS.md (section 3) has the measurements behind the step size, the step interval and the
alternatives that lost.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np

from sgt.softmax import softmax_one, softmax_rows

__all__ = ["LEARNING_RATE", "SCALE_BOUNDS", "STEP", "Calibrator"]

#: learned records whose gradients one step sums
STEP = 128
#: the constant step size, per record's gradient
LEARNING_RATE = 0.005
#: the scale a stays within these (a = 0 would forget the trees)
SCALE_BOUNDS = (0.05, 20.0)


@dataclass
class Calibrator:
    """The calibration's parameters and the gradients summed since the last step.

    `bias[k]` and `grad_bias[k]` belong to class k + 1 (the reference class has none); both grow as
    classes are learned.

    >>> c = Calibrator()
    >>> c.proba_one([0.0])  # the identity at first: the trees' softmax
    [0.5, 0.5]
    >>> for _ in range(STEP):
    ...     c.learn_one([2.0], 0)  # confident in class 1, always wrong
    >>> round(c.scale, 4), [round(b, 4) for b in c.bias]
    (0.05, [-0.5637])
    >>> [round(p, 3) for p in c.proba_one([2.0])]
    [0.614, 0.386]
    """

    scale: float = 1.0
    bias: list[float] = field(default_factory=list)
    grad_scale: float = 0.0
    grad_bias: list[float] = field(default_factory=list)
    pending: int = 0  # records learned since the last step
    # the last record's probabilities (a record is predicted, then learned); not state
    _last_raw: list[float] | None = field(default=None, repr=False, compare=False)
    _last_proba: list[float] = field(default_factory=list, repr=False, compare=False)

    # -- one record ----------------------------------------------------------------------------
    def logits_one(self, raw: Sequence[float]) -> list[float]:
        """The calibrated logits of the classes after the reference (whose logit stays 0)."""
        a, bias = self.scale, self.bias
        known = len(bias)
        if known == len(raw) == 1:  # two classes: the common case, spelled out (the same arithmetic)
            return [a * raw[0] + bias[0]]
        return [a * z + (bias[k] if k < known else 0.0) for k, z in enumerate(raw)]

    def proba_one(self, raw: Sequence[float]) -> list[float]:
        """The calibrated probabilities of a record with raw scores `raw` (one per tree)."""
        if raw == self._last_raw:  # a record predicted, then learned: computed once
            return self._last_proba
        proba = softmax_one(self.logits_one(raw))
        self._last_raw, self._last_proba = list(raw), proba
        return proba

    def learn_one(self, raw: Sequence[float], target: int) -> None:
        """Add the gradient of a learned record of class `target` (no tree yet: nothing to learn)."""
        if not raw:
            return
        grad_bias = self.grad_bias
        if len(raw) == len(grad_bias) == 1:  # two classes: the loop below, spelled out
            g = self.proba_one(raw)[1] - (1.0 if target == 1 else 0.0)
            self.grad_scale += g * raw[0]
            grad_bias[0] += g
        else:
            self._grow(len(raw))
            p = self.proba_one(raw)
            scale = 0.0
            for k, z in enumerate(raw):
                g = p[k + 1] - (1.0 if k + 1 == target else 0.0)
                scale = g * z if k == 0 else scale + g * z
                grad_bias[k] += g
            self.grad_scale += scale
        self.pending += 1
        if self.pending == STEP:
            self._step()

    # -- a batch -------------------------------------------------------------------------------
    def run(
        self,
        raw: np.ndarray,
        known: np.ndarray,
        targets: np.ndarray,
        learned_raw: Mapping[int, list[float]],
        n_classes: int,
        chosen: np.ndarray | None = None,
    ) -> np.ndarray:
        """Calibrate a batch and learn from it, as `proba_one` then `learn_one` row by row.

        `raw`: [rows, ≥ K - 1] each row's raw scores as predicted; `known`: the classes known when each
        row was predicted; `targets`: each row's class, -1 for a row only predicted; `learned_raw`: the
        raw scores of the rows learned with other scores than they were predicted with (a grid grew, a
        class or a category was new), by row. Returns probabilities [rows, n_classes]. If given,
        `chosen` [rows] takes each learned row's calibrated probability of its class as the row is
        learned (`proba_one(raw)[target]` before `learn_one`); other rows keep theirs.
        """
        n = raw.shape[0]
        out = np.zeros((n, n_classes))
        width = np.where(targets >= 0, known - 1, 0)  # trees a learned row is learned with
        events = np.zeros(n, dtype=bool)
        for row, scores in learned_raw.items():
            width[row] = len(scores)
            events[row] = True
        counted = np.flatnonzero(width > 0)
        batch = _Batch(raw, known, targets, learned_raw, width, events, out, chosen)
        events_before = np.concatenate([[0], np.cumsum(events)]).tolist()
        # a piece ends after each learned row that completes a step: its rows share the parameters
        ends = [*(counted[STEP - self.pending - 1 :: STEP] + 1).tolist(), n]
        lo = first = 0
        for hi, last in zip(ends, np.searchsorted(counted, ends).tolist()):
            if hi > lo:
                if known[lo] == known[hi - 1] == 2 and events_before[hi] == events_before[lo]:
                    self._binary(batch, lo, hi, counted[first:last])
                else:
                    self._predict(batch, lo, hi)
                    if last > first:
                        self._learn(batch, counted[first:last])
                if self.pending == STEP:
                    self._step()
            lo, first = hi, last
        return out

    def _binary(self, batch: _Batch, lo: int, hi: int, rows: np.ndarray) -> None:
        """`_predict` and `_learn` of rows [lo, hi) of two classes, each learned as predicted: the
        same arithmetic as `softmax_with_reference` and `_learn`, in fewer numpy calls."""
        z = batch.raw[lo:hi, 0]
        u = z * self.scale
        u += self._padded(1)[0]
        e = np.empty((2, hi - lo))  # the exps of the logits (0, u) less their maximum
        top = np.maximum(u, 0.0)
        np.subtract(0.0, top, out=e[0])
        np.subtract(u, top, out=e[1])
        np.exp(e, out=e)
        proba = batch.out[lo:hi, :2].T
        np.divide(e, e[0] + e[1], out=proba)
        if not rows.size:
            return
        if batch.chosen is not None:
            batch.chosen[rows] = batch.out[rows, batch.targets[rows]]
        self._grow(1)
        p1 = proba[1]
        if rows.size < hi - lo:
            p1, z = p1[rows - lo], z[rows - lo]
        terms = np.empty((rows.size + 1, 2))
        terms[0] = self.grad_scale, self.grad_bias[0]
        g = terms[1:, 1]
        np.subtract(p1, batch.targets[rows] == 1, out=g)
        np.multiply(g, z, out=terms[1:, 0])
        self.grad_scale, self.grad_bias[0] = np.cumsum(terms, axis=0)[-1].tolist()
        self.pending += rows.size

    def _predict(self, batch: _Batch, lo: int, hi: int) -> None:
        """Rows [lo, hi) predicted with the current parameters (the same for all of them)."""
        known = batch.known[lo:hi]
        trees = max(0, int(known.max()) - 1)
        logits = self.scale * batch.raw[lo:hi, :trees] + np.array(self._padded(trees))
        batch.out[lo:hi] = softmax_rows(logits, known, batch.out.shape[1])

    def _learn(self, batch: _Batch, rows: np.ndarray) -> None:
        """Add the gradients of the learned `rows` (in order, predicted already)."""
        width = batch.width[rows]
        trees = int(width.max())
        self._grow(trees)
        events = np.flatnonzero(batch.events[rows])
        uniform = not events.size and int(width.min()) == trees
        if uniform:  # learned as predicted, all with the same classes
            z = batch.raw[rows, :trees]
            p = batch.out[rows, : trees + 1]
        else:
            columns = np.arange(trees) < width[:, None]
            z = _fit(batch.raw[rows], trees) * columns
            p = _fit(batch.out[rows], trees + 1)
            for i in events.tolist():  # learned with other scores than predicted: as one record
                scores = batch.learned_raw[int(rows[i])]
                z[i] = 0.0
                z[i, : len(scores)] = scores
                p[i] = 0.0
                p[i, : len(scores) + 1] = softmax_one(self.logits_one(scores))
        if batch.chosen is not None:
            batch.chosen[rows] = p[np.arange(rows.size), batch.targets[rows]]
        g = p[:, 1:] - (batch.targets[rows][:, None] == np.arange(1, trees + 1))
        if not uniform:
            g *= columns  # no gradient for a class a row did not know
        terms = np.empty((rows.size + 1, trees + 1))
        terms[0, 0] = self.grad_scale
        terms[0, 1:] = self.grad_bias[:trees]
        scale = g[:, 0] * z[:, 0]
        for k in range(1, trees):
            scale = scale + g[:, k] * z[:, k]
        terms[1:, 0] = scale
        terms[1:, 1:] = g
        sums = np.cumsum(terms, axis=0)[-1].tolist()  # each column summed from the top down
        self.grad_scale = sums[0]
        self.grad_bias[:trees] = sums[1:]
        self.pending += rows.size

    # -- steps and state -----------------------------------------------------------------------
    def _grow(self, trees: int) -> None:
        while len(self.bias) < trees:
            self.bias.append(0.0)
            self.grad_bias.append(0.0)

    def _padded(self, trees: int) -> list[float]:
        return (self.bias + [0.0] * trees)[:trees]

    def _step(self) -> None:
        self._last_raw = None
        low, high = SCALE_BOUNDS
        self.scale = min(high, max(low, self.scale - LEARNING_RATE * self.grad_scale))
        self.bias = [b - LEARNING_RATE * g for b, g in zip(self.bias, self.grad_bias)]
        self.grad_scale = 0.0
        self.grad_bias = [0.0] * len(self.bias)
        self.pending = 0

    def state(self) -> dict[str, Any]:
        """JSON-safe state (Python's float repr round-trips exactly)."""
        return {
            "scale": self.scale,
            "bias": list(self.bias),
            "grad_scale": self.grad_scale,
            "grad_bias": list(self.grad_bias),
            "pending": self.pending,
        }

    @classmethod
    def restore(cls, state: Mapping[str, Any], n_classes: int) -> Calibrator:
        """The calibrator of a saved `state` (ValueError if it does not fit `n_classes`)."""
        bias = [float(b) for b in state["bias"]]
        grad_bias = [float(g) for g in state["grad_bias"]]
        pending = int(state["pending"])
        if len(bias) != len(grad_bias) or len(bias) > max(0, n_classes - 1) or not 0 <= pending < STEP:
            raise ValueError(
                f"calibration state of {len(bias)} biases, {len(grad_bias)} gradients and {pending} "
                f"pending records does not fit {n_classes} classes"
            )
        return cls(float(state["scale"]), bias, float(state["grad_scale"]), grad_bias, pending)


class _Batch(NamedTuple):
    """A batch being calibrated: `Calibrator.run`'s arguments, each learned row's number of trees
    (`width`), whether it was learned on the one-record path (`events`), the probabilities (`out`), and
    where each learned row's probability of its class goes, if anywhere (`chosen`)."""

    raw: np.ndarray
    known: np.ndarray
    targets: np.ndarray
    learned_raw: Mapping[int, list[float]]
    width: np.ndarray
    events: np.ndarray
    out: np.ndarray
    chosen: np.ndarray | None


def _fit(a: np.ndarray, width: int) -> np.ndarray:
    """`a`'s first `width` columns, zero-padded if it has fewer."""
    if a.shape[1] >= width:
        return a[:, :width]
    return np.pad(a, ((0, 0), (0, width - a.shape[1])))
