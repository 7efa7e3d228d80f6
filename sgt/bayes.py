"""A Gaussian naive Bayes beside the trees, and the mixture of both by their log losses (proba="mixed").

A tree learns slowly at first: its linear leaves take one Newton step per block, and its first split
waits for evidence, so for a few hundred records its softmax is close to the class frequencies. A
naive Bayes over the numeric features (the leaf model of the Hoeffding trees) is fair from its first
records. ``proba="mixed"`` publishes the Bayes mixture of the two experts, weighted by how well each
predicted every learned record so far (its prequential log loss, each record predicted before it
was learned)::

    p = (q + r * b) / (1 + r),    r = exp(L_trees - L_bayes),

where q is the trees' softmax, b the naive Bayes estimate and L the cumulative log losses. The
mixture's log loss is then at most the better expert's plus log 2 (plus what the bound below costs).
The difference L_bayes - L_trees is kept within [-LOG_RATIO_BOUND, LOG_RATIO_BOUND] after every record: an
expert that has fallen far behind keeps a weight of about exp(-LOG_RATIO_BOUND), enough to come back
after a concept change, and too little to cost anything measurable meanwhile. The naive Bayes
estimate keeps a share `UNIFORM_SHARE` of the uniform distribution, so that its mistakes are bounded
(sgt.bayes_moments).
After a concept change the trees' log loss jumps and the naive Bayes takes over for a while, so it must
not hold on to the old concept: after every `HALF_LIFE` learned records its statistics halve (each
count of codes rounds down): a record learned n records ago weighs about 2^(-n / HALF_LIFE).

``proba="calibrated"`` mixes the same naive Bayes into the calibrated softmax while the trees are
young, and retires it for good by a rule of sgt.retirement (`Tournament`, on the experts' log losses over
every learned record: `NaiveBayes.lead`, the difference unbounded): `mix_until` is `mix` stopping at the
record at which it retires.

The estimate works on the features' codes (see sgt.features), whose statistics are integers: per
class, the count of records, and per class and numeric feature the count, sum and sum of squares of
the codes of records whose value was not missing. What the estimate makes of them (per class and
feature a Gaussian with one pseudo record, or a Bernoulli variable for a feature of two values; a
missing value leaving its feature out) is sgt.bayes_moments'. Nominal features take no part. When a
numeric grid grows, the per-code counts of every class carry over with the grid's mapping, and
halving keeps them consistent: the counts, sums and sums of squares are the halved per-code counts'.

Exactness: the statistics are integers (the same in any order). A single record takes `predict_one`
and `learn_one`: Python floats, with numpy's log and exp (whose bits do not depend on the array's
length). A batch takes `estimate`, then `mix`. The estimate does not depend on the trees, so `estimate`
computes every row of the batch in one vectorised pass before the trees run, each row seeing the
statistics of the rows before it (cumulative integer sums), with the same operations in the same
order as the one-record path; a row that grows a grid is estimated on the old grid and learned on the
new one, a row that brings a new class is learned with one class more than it was predicted with,
and the statistics halve between the row that completes a half-life and the next.
Once the trees have run, `mix` updates the log-loss difference row by row, in order, on Python floats
(each learned row's losses as the row is learned) and mixes every row at once. So both paths give the
same bits, however the trees' side of a batch is chunked.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

from sgt.bayes_moments import (
    UNIFORM_SHARE,
    Moments,
    bernoulli_terms,
    normalised,
    state_moments,
)
from sgt.features import Regrid
from sgt.retirement import Mixed, Retirement, Tournament

__all__ = [
    "HALF_LIFE",
    "LOG_RATIO_BOUND",
    "UNIFORM_SHARE",
    "Mixed",
    "NaiveBayes",
    "Retirement",
    "Tournament",
]

#: bound (in nats) of the difference between the experts' cumulative log losses
LOG_RATIO_BOUND = 10.0
#: the naive Bayes statistics halve after every this many learned records (it forgets a concept gone)
HALF_LIFE = 1000
#: a batch is estimated in pieces of at most this many cells of its [features, rows, classes] arrays:
#: small enough that numpy's temporaries are reused rather than mapped afresh (they are the cost)
PIECE_CELLS = 10240
#: the least probability whose log the mixture takes (the trees' softmax may underflow to 0)
_TINY = 1e-300


@dataclass(frozen=True)
class Estimate:
    """The naive Bayes' view of a batch of rows (`NaiveBayes.estimate`)."""

    known: np.ndarray  # [rows] the classes known when each row is predicted
    predicted: np.ndarray  # [rows, K] each row's estimate as predicted (0 beyond its known classes)
    learned: np.ndarray  # [rows] a learned row's estimate of its class as it is learned (1 if not learned)


class NaiveBayes:
    """The naive Bayes state of a classifier and the log-loss difference of the mixture.

    `numeric` flags the features the estimate uses (the classifier's layout decides); arrays grow with
    the classes and features the classifier learns (`fit`).
    """

    #: the arrays a saved model holds
    SAVED = ("class_counts", "counts", "sums", "squares", "histogram")

    def __init__(
        self, bins: int, half_life: int = HALF_LIFE, two_valued: bool = False, pseudo: float = 1.0
    ) -> None:
        self.bins = bins
        self.half_life = half_life
        # the weight of the pseudo record in each class's moments (sgt.bayes_moments): saved unless 1, and
        # absent before it (1, a prior as strong as one record); a new classifier's is PSEUDO_WEIGHT
        self.pseudo = pseudo
        # whether a feature whose learned values take exactly two codes is estimated as a Bernoulli
        # variable (see `_seen`, `Moments.pairs`) rather than a Gaussian: saved, absent before it (a
        # Gaussian every time)
        self.two_valued = two_valued
        # the statistics, by name (see the properties below); `_pending` holds the records learned one at
        # a time and not yet added to them (integer sums: added in bulk, in any order, they are the same)
        self._store: dict[str, np.ndarray] = {
            "class_counts": np.zeros(0, dtype=np.int64),  # [K]
            "counts": np.zeros((0, 0), dtype=np.int64),  # [K, F] records with a value
            "sums": np.zeros((0, 0), dtype=np.int64),  # [K, F] sum of codes
            "squares": np.zeros((0, 0), dtype=np.int64),  # [K, F] sum of squared codes
            "histogram": np.zeros((0, 0, bins + 1), dtype=np.int64),  # [K, F, code]: for regrids
        }
        self._pending: list[_Learned] = []
        self.log_ratio = 0.0  # L_bayes - L_trees, bounded
        # L_bayes - L_trees over every learned record, unbounded: what `Tournament` retires a young naive
        # Bayes by; None where nothing reads it (proba="mixed", or a young one saved before it was kept)
        self.lead: float | None = None
        self.since = 0  # records learned since the statistics last halved
        # what a record's estimate needs from the statistics, for `predict_one`, `learn_one` and a row that
        # `estimate` takes alone (the boosted classifier's one-record path), while they do not change (a
        # record predicted, then learned, computes it once): refreshed by `_add_one`, dropped by every
        # other change of the statistics (deriving it again for every record cost a fifth of a
        # members-only BoostedClassifier's one-record loop on SEA and ImageSegments); not model state
        self._derived: Moments | None = None

    def _array(self, name: str) -> np.ndarray:
        """One of the statistics, with every record learned so far."""
        if self._pending:
            self._flush()
        return self._store[name]

    @property
    def class_counts(self) -> np.ndarray:
        return self._array("class_counts")

    @class_counts.setter
    def class_counts(self, value: np.ndarray) -> None:
        self._store["class_counts"] = value

    @property
    def counts(self) -> np.ndarray:
        return self._array("counts")

    @counts.setter
    def counts(self, value: np.ndarray) -> None:
        self._store["counts"] = value

    @property
    def sums(self) -> np.ndarray:
        return self._array("sums")

    @sums.setter
    def sums(self, value: np.ndarray) -> None:
        self._store["sums"] = value

    @property
    def squares(self) -> np.ndarray:
        return self._array("squares")

    @squares.setter
    def squares(self, value: np.ndarray) -> None:
        self._store["squares"] = value

    @property
    def histogram(self) -> np.ndarray:
        return self._array("histogram")

    @histogram.setter
    def histogram(self, value: np.ndarray) -> None:
        self._store["histogram"] = value

    def _flush(self) -> None:
        """Add the records learned one at a time to the statistics (exact integer sums)."""
        pending, self._pending = self._pending, []
        store = self._store
        np.add.at(store["class_counts"], np.array([r.target for r in pending], dtype=np.int64), 1)
        owners = np.array([r.target for r in pending for _ in r.features], dtype=np.int64)
        if not owners.size:
            return
        cells = (owners, np.array([j for r in pending for j in r.features], dtype=np.int64))
        codes = np.array([v for r in pending for v in r.codes], dtype=np.int64)
        np.add.at(store["counts"], cells, 1)
        np.add.at(store["sums"], cells, codes)
        np.add.at(store["squares"], cells, codes * codes)
        np.add.at(store["histogram"], (*cells, codes), 1)

    # -- structure -------------------------------------------------------------------------------
    def fit(self, n_classes: int, n_features: int) -> None:
        """Grow the arrays to `n_classes` classes and `n_features` features (new ones without counts;
        records not yet added keep their places)."""
        store = self._store
        k, f = store["counts"].shape
        if n_classes == k and n_features == f:
            return
        self._derived = None
        k, f = max(k, n_classes), max(f, n_features)
        store["class_counts"] = _padded(store["class_counts"], (k,))
        for name in ("counts", "sums", "squares"):
            store[name] = _padded(store[name], (k, f))
        store["histogram"] = _padded(store["histogram"], (k, f, self.bins + 1))

    def regrid(self, regrid: Regrid) -> None:
        """Carry a numeric feature's per-code counts over to its grown grid."""
        j = regrid.feature
        if j >= self.counts.shape[1]:
            return
        self._derived = None
        histogram = self.histogram
        size = self.bins + 1
        moves = np.zeros((size, size), dtype=np.int64)  # old code -> new code
        moves[np.arange(size), regrid.mapping] = 1
        new = histogram[:, j] @ moves  # integer counts: exact in any order
        codes = np.arange(size, dtype=np.int64)
        histogram[:, j] = new
        self.sums[:, j] = (new * codes).sum(axis=1)
        self.squares[:, j] = (new * codes * codes).sum(axis=1)

    def nbytes(self) -> int:
        return sum(getattr(self, name).nbytes for name in self.SAVED)

    # -- one record: Python floats -----------------------------------------------------------------
    def predict_one(self, codes: list[int], tree_proba: list[float], numeric: list[int]) -> list[float]:
        """The mixture of one record (`codes` all its codes, `tree_proba` the trees' softmax), as a list."""
        k = len(tree_proba)
        self.fit(k, len(codes))
        bayes = self._estimate_one([codes[j] for j in numeric], numeric, k)
        r = float(np.exp(np.array([-self.log_ratio]))[0])  # numpy's exp, as `mix`
        return [(q + r * b) / (1.0 + r) for q, b in zip(tree_proba, bayes, strict=True)]

    def learn_one(self, codes: list[int], tree_proba: list[float], target: int, numeric: list[int]) -> None:
        """Learn one record of class `target`: the log-loss difference moves by the experts' losses on it
        (each as it is learned), then the statistics take its codes."""
        k = len(tree_proba)
        self.fit(k, len(codes))
        x = [codes[j] for j in numeric]
        bayes = self._estimate_one(x, numeric, k)
        logs = np.log(np.array([max(bayes[target], _TINY), max(tree_proba[target], _TINY)])).tolist()
        loss_bayes, loss_trees = -logs[0], -logs[1]  # numpy's log, as `mix`
        step = loss_bayes - loss_trees
        ratio = self.log_ratio + step
        self.log_ratio = min(LOG_RATIO_BOUND, max(-LOG_RATIO_BOUND, ratio))
        if self.lead is not None:
            self.lead += step  # as `mix_until`, row by row on Python floats
        self._learn_one(x, numeric, target)

    def _derive(self, numeric: list[int], k: int) -> Moments:
        """What a record's estimate needs from the statistics, of the features `numeric` and the first
        `k` classes (kept while the statistics do not change)."""
        key = (tuple(numeric), k)
        if self._derived is not None and self._derived.key == key:
            return self._derived
        cols = list(numeric)
        counts = self.counts[:k, cols].ravel().tolist()
        sums = self.sums[:k, cols].ravel().tolist()
        squares = self.squares[:k, cols].ravel().tolist()
        classes = self.class_counts[:k].tolist()
        seen = self._seen(np.array(cols, dtype=np.int64))
        self._derived = Moments.of(key, self.bins, counts, sums, squares, classes, seen, self.pseudo)
        return self._derived

    def _seen(self, numeric: np.ndarray) -> list[tuple[int, ...] | None]:
        """Per feature of `numeric`, the codes of its learned values, in order, while at most two (None
        for more, and for every feature without `two_valued`: each is then a Gaussian whatever comes)."""
        if not self.two_valued:
            return [None] * len(numeric)
        present = self.histogram[:, numeric].sum(axis=0) > 0  # [features, code]
        out: list[tuple[int, ...] | None] = []
        for row in present:
            codes = np.flatnonzero(row)
            out.append(tuple(codes.tolist()) if codes.size <= 2 else None)
        return out

    def _estimate_one(self, x: list[int], numeric: list[int], k: int) -> list[float]:
        """`_piece`'s estimate of one row, in the same order of operations (`Moments.estimate`)."""
        return self._derive(numeric, k).estimate(x)

    def _learn_one(self, x: list[int], numeric: list[int], target: int) -> None:
        self._add_one(x, numeric, target)
        self.since = (self.since + 1) % self.half_life
        if self.since == 0:
            self._halve()

    def _add_one(self, x: list[int], numeric: list[int], target: int) -> None:
        """Add one record's codes to the statistics (the halving's count is the caller's)."""
        positions = [j for j, v in enumerate(x) if v > 0]
        values = [x[j] for j in positions]
        self._pending.append(_Learned(target, [numeric[j] for j in positions], values))
        if self._derived is not None and self._derived.key != (
            tuple(numeric),
            len(self._store["class_counts"]),
        ):
            self._derived = None
        d = self._derived
        if d is not None and any(_new_code(d.seen[j], x[j]) for j in positions):
            self._derived = None  # a feature of at most two codes learned another: its kind may change
        elif d is not None:  # `_derive` again: only the moments the record changes
            d.refresh(target, positions, values)

    def _halve(self) -> None:
        """Forget half of what was learned: every count of the histogram halves (rounding down), and the
        statistics are the histogram's again; so do the class counts."""
        self._derived = None
        self.histogram //= 2
        codes = np.arange(self.bins + 1, dtype=np.int64)
        self.counts[...] = self.histogram.sum(axis=2)
        self.sums[...] = self.histogram @ codes
        self.squares[...] = self.histogram @ (codes * codes)
        self.class_counts //= 2

    # -- a batch of rows: numpy -------------------------------------------------------------------
    def estimate(
        self,
        codes: np.ndarray,
        targets: np.ndarray,
        classes_before: int,
        regrids: dict[int, list[Regrid]],
        numeric: np.ndarray,
    ) -> Estimate:
        """Estimate every row of a batch as `predict_one` and `learn_one` would, in order; learn the
        labelled rows.

        `codes`: [rows, F] the rows' codes (a row that grows a grid holds its code on the new grid);
        `targets`: [rows] each row's class, -1 for a row only predicted (a class first seen in the batch
        takes the next index, as the classifier numbers them); `classes_before`: the classes known before
        the batch; `regrids`: the grids each row grows (by row); `numeric`: the numeric features'
        indices. The trees take no part: `mix` then weighs the estimates against the trees' softmax.
        """
        m = codes.shape[0]
        seen = np.maximum.accumulate(np.concatenate([[classes_before - 1], targets]))
        known = seen[:-1] + 1  # classes known when each row is predicted
        k = int(seen[-1]) + 1
        out = Estimate(known, np.zeros((m, k)), np.ones(m))
        if k == 0:  # no class yet and no row learned: nothing to estimate, nothing to keep
            return out
        self.fit(k, codes.shape[1])
        x = codes[:, numeric].astype(np.int64)
        # the learned rows after which the statistics halve (`half_life` learned records since the last)
        learned = np.flatnonzero(targets >= 0)
        halving = learned[(self.since + np.arange(1, learned.size + 1)) % self.half_life == 0].tolist()
        self.since = (self.since + learned.size) % self.half_life
        first = 0
        for row in sorted({*regrids, *halving}):
            if row in regrids:
                self._rows(x, targets, numeric, first, row, out, predict=True)
                self._regrid_row(x, targets, numeric, row, regrids[row], out)
            else:
                self._rows(x, targets, numeric, first, row + 1, out, predict=True)
            if halving and row == halving[0]:
                self._halve()
                halving.pop(0)
            first = row + 1
        self._rows(x, targets, numeric, first, m, out, predict=True)
        return out

    def _regrid_row(
        self,
        x: np.ndarray,
        targets: np.ndarray,
        numeric: np.ndarray,
        row: int,
        regrids: list[Regrid],
        out: Estimate,
    ) -> None:
        """`estimate` of a row that grows grids, as the one-record path takes it (one row: Python floats
        cost less than a piece's numpy calls, with the same bits): predicted on the old grid (its old
        codes, the statistics before the regrid), learned on the new one."""
        columns = numeric.tolist()
        codes = x[row].tolist()
        old = list(codes)
        for regrid in regrids:
            old[columns.index(regrid.feature)] = regrid.code_before
        known, target = int(out.known[row]), int(targets[row])
        predicted = self._estimate_one(old, columns, max(known, 1))
        out.predicted[row, : len(predicted)] = predicted
        for regrid in regrids:
            self.regrid(regrid)
        if target < 0:
            return
        # a row that brings a new class is learned with one class more than it was predicted with
        out.learned[row] = self._estimate_one(codes, columns, max(known, target + 1))[target]
        self._add_one(codes, columns, target)

    def _rows(
        self,
        x: np.ndarray,
        targets: np.ndarray,
        numeric: np.ndarray,
        first: int,
        end: int,
        out: Estimate,
        predict: bool,
    ) -> None:
        """`estimate` of rows [first, end) of `x` (their numeric codes) in pieces, into `out` (its
        `predicted` rows only if `predict`)."""
        step = max(1, PIECE_CELLS // (self.class_counts.size * max(1, x.shape[1])))
        start = first
        while start < end:
            seen = self._seen(numeric)
            stop = _after_new_code(x, targets, seen, start, min(end, start + step))
            rows = slice(start, stop)
            piece = self._piece(x[rows], targets[rows], out.known[rows], numeric, seen)
            if predict:
                out.predicted[rows] = piece.predicted
            out.learned[rows] = piece.learned
            start = stop

    def _piece(
        self,
        x: np.ndarray,
        targets: np.ndarray,
        known: np.ndarray,
        numeric: np.ndarray,
        codes_before: list[tuple[int, ...] | None],
    ) -> Estimate:
        """`estimate` of rows without grids growing, nor a feature of at most two codes learning another
        but in the last row (`codes_before`: `_seen` before the piece): each from the statistics of the
        rows before it.

        Between two learned rows of a class its statistics do not change, so each class's moments are
        computed once per *state* (its statistics before the piece, then after each of its rows: K
        states plus one per learned row), and every row gathers the state of each class it sees.
        """
        m, k = x.shape[0], self.class_counts.shape[0]
        valid = x > 0  # code 0 is a missing value
        rows = np.flatnonzero(targets >= 0)
        y = targets[rows]
        per_class = np.bincount(y, minlength=k)
        starts = np.cumsum(per_class) - per_class  # each class's first learned row, rows grouped by class
        ahead = self.counts[:, numeric].sum(axis=0) > 0  # features with values learned before the piece
        states = self._learn_piece(x[rows], valid[rows], y, per_class, starts, numeric)
        # each class's moments per state: one pseudo record at the grid's centre with the grid's variance
        f = x.shape[1]
        mean, variance, log_variance = state_moments(states, self.bins, self.pseudo)  # [F, state]
        # the state of class c that row i sees: before the piece, or after its last row of class c before i
        onehot = np.zeros((m, k), dtype=np.int64)
        onehot[rows, y] = 1
        seen = np.cumsum(onehot, axis=0) - onehot
        state = np.where(seen > 0, k - 1 + starts[None, :] + seen, np.arange(k)[None, :])  # [m, K]
        # -0.5 (log variance + (x - mean)^2 / variance) per feature, row and class, [F, m, K] (2 pi cancels
        # between classes); in place: fresh temporaries of this size cost more than the arithmetic
        terms = np.take(mean, state, axis=1)
        np.subtract(x.T[:, :, None], terms, out=terms)
        np.multiply(terms, terms, out=terms)
        np.divide(terms, np.take(variance, state, axis=1), out=terms)
        np.add(np.take(log_variance, state, axis=1), terms, out=terms)
        np.multiply(-0.5, terms, out=terms)
        for j, codes in enumerate(codes_before):
            if codes is not None and len(codes) == 2:
                terms[j] = bernoulli_terms(states[:, j], states[:, f + j], codes, x[:, j], state)
        # a feature takes part with a value, and values of it learned before (`Moments.known`)
        used = valid
        if not ahead.all():
            counted = valid & (targets >= 0)[:, None]
            used = valid & (ahead | (np.cumsum(counted, axis=0) - counted > 0))
        if not used.all():
            terms = np.where(used.T[:, :, None], terms, 0.0)
        classes = self.class_counts[None, :] - per_class + seen
        predicted = normalised(terms, classes, known)
        at, target = np.arange(m), np.maximum(targets, 0)
        chosen = predicted[at, target]
        # a row that brings a new class is learned with one class more than it was predicted with
        new = np.flatnonzero(targets >= known)
        if new.size:
            again = normalised(terms[:, new], classes[new], known[new] + 1)
            chosen[new] = again[np.arange(new.size), target[new]]
        return Estimate(known, predicted, np.where(targets >= 0, chosen, 1.0))

    def _learn_piece(
        self,
        x: np.ndarray,
        valid: np.ndarray,
        y: np.ndarray,
        per_class: np.ndarray,
        starts: np.ndarray,
        numeric: np.ndarray,
    ) -> np.ndarray:
        """Learn a piece's learned rows (codes `x`, classes `y`); return each class's statistics per
        state, [state, count | sum | sum of squares per feature]: the K classes' before the piece, then
        each class's after each of its rows (rows grouped by class, in order within a class; class c's
        from K + `starts[c]`). Integer sums: the same in any order."""
        self._derived = None  # what `_derive` made of the statistics no longer holds
        k, f = len(per_class), x.shape[1]
        order = np.argsort(y, kind="stable")
        codes = x[order]
        states = np.empty((k + len(y), 3 * f), dtype=np.int64)
        before = states[:k]
        before[:, :f], before[:, f : 2 * f], before[:, 2 * f :] = (
            self.counts[:, numeric],
            self.sums[:, numeric],
            self.squares[:, numeric],
        )
        # what the rows added so far (summed down the rows, numpy's fast axis), then within each class
        # from its statistics before the piece
        after = states[k:]
        after[:, :f], after[:, f : 2 * f] = valid[order], codes
        np.multiply(codes, codes, out=after[:, 2 * f :])
        np.cumsum(after, axis=0, out=after)
        ends = starts + per_class
        added = np.concatenate([np.zeros((1, 3 * f), dtype=np.int64), after])
        final = before + (added[ends] - added[starts])
        after += np.repeat(before - added[starts], per_class, axis=0)
        self.class_counts += per_class
        self.counts[:, numeric], self.sums[:, numeric], self.squares[:, numeric] = (
            final[:, :f],
            final[:, f : 2 * f],
            final[:, 2 * f :],
        )
        width, size = self.histogram.shape[1], self.bins + 1
        flat = (y[:, None] * width + numeric[None, :]) * size + x
        self.histogram += np.bincount(flat[valid], minlength=self.histogram.size).reshape(
            self.histogram.shape
        )
        return states

    def mix(
        self, estimate: Estimate, tree: np.ndarray, tree_learned: np.ndarray, targets: np.ndarray
    ) -> np.ndarray:
        """[rows, K] the mixture of a batch's rows, whose `estimate` is made; updates the log-loss difference.

        `tree`: [rows, K] the trees' softmax of each row as predicted (0 beyond the classes known then);
        `tree_learned`: [rows] their probability of each learned row's class as the row is learned. The
        difference moves row by row, in order (Python floats, as `learn_one`); each row is mixed with the
        difference of the rows before it. A row predicted with fewer than two classes keeps `tree`.
        """
        return self.mix_until(estimate, tree, tree_learned, targets).proba

    def mix_until(
        self,
        estimate: Estimate,
        tree: np.ndarray,
        tree_learned: np.ndarray,
        targets: np.ndarray,
        retirement: Retirement | Tournament | None = None,
        learned_before: int = 0,
    ) -> Mixed:
        """`mix`, stopping after the learned row at which `retirement` says the naive Bayes retires
        (`learned_before`: the records the model learned before the batch); the rows after it keep
        `tree` exactly, and the difference is that after the retiring row."""
        learned = targets >= 0
        losses = -np.log(np.maximum(np.stack([estimate.learned[learned], tree_learned[learned]]), _TINY))
        ratio, bound, lead = self.log_ratio, LOG_RATIO_BOUND, self.lead
        path = [ratio]  # the difference after each learned row
        retired = -1
        for step in (losses[0] - losses[1]).tolist():
            ratio += step
            if ratio > bound:
                ratio = bound
            elif ratio < -bound:
                ratio = -bound
            path.append(ratio)
            if lead is not None:
                lead += step
            if retirement is not None and retirement.retires(ratio, learned_before + len(path) - 1, lead):
                retired = len(path) - 2  # among the learned rows
                break
        self.log_ratio, self.lead = ratio, lead
        order: np.ndarray = np.cumsum(learned) - learned  # each row: the learned rows before it
        at = None if retired < 0 else int(np.flatnonzero(learned)[retired])  # the retiring row
        if at is not None:
            order = np.minimum(order, retired)  # (the rows after it are not mixed)
        r = np.exp(-np.array(path)[order])[:, None]
        mixed = (tree + r * estimate.predicted) / (1.0 + r)
        alone = estimate.known < 2
        if at is not None:
            alone = alone | (np.arange(len(targets)) > at)
        return Mixed(np.where(alone[:, None], tree, mixed) if alone.any() else mixed, at)

    # -- serialisation ---------------------------------------------------------------------------
    def state(self) -> dict[str, Any]:
        state: dict[str, Any] = {"log_ratio": self.log_ratio, "since": self.since}
        if self.lead is not None:  # absent, a young naive Bayes restores with the rule it was saved under
            state["lead"] = self.lead
        if self.two_valued:  # absent, every feature is a Gaussian, as before two-valued features
            state["two_valued"] = True
        if self.pseudo != 1.0:  # absent, a pseudo record as strong as a learned one, as before the weight
            state["pseudo"] = self.pseudo
        return state

    def arrays(self) -> list[tuple[str, np.ndarray]]:
        return [(f"bayes.{name}", getattr(self, name)) for name in self.SAVED]

    @classmethod
    def restore(cls, bins: int, state: dict[str, Any], arrays: dict[str, np.ndarray]) -> NaiveBayes:
        """Inverse of `state` and `arrays` (ValueError if they do not fit together)."""
        bayes = cls(bins)
        log_ratio = float(state["log_ratio"])
        if not abs(log_ratio) <= LOG_RATIO_BOUND:
            raise ValueError(f"naive Bayes log-loss difference {log_ratio!r} out of range")
        bayes.log_ratio = log_ratio
        two_valued = state.get("two_valued", False)
        if not isinstance(two_valued, bool):
            raise ValueError(f"naive Bayes two_valued must be true or false, got {two_valued!r}")
        bayes.two_valued = two_valued
        bayes.pseudo = _pseudo(state.get("pseudo", 1.0))
        lead = state.get("lead")  # absent before `Tournament`, and with proba="mixed"
        if lead is not None:
            if isinstance(lead, bool) or not isinstance(lead, (int, float)) or not math.isfinite(lead):
                raise ValueError(
                    f"naive Bayes cumulative log-loss difference {lead!r} is not a finite number"
                )
            bayes.lead = float(lead)
        since = state.get("since", 0)  # absent before the statistics halved
        if not (isinstance(since, int) and not isinstance(since, bool) and 0 <= since < HALF_LIFE):
            raise ValueError(f"naive Bayes records since halving {since!r} out of range [0, {HALF_LIFE})")
        bayes.since = since
        loaded = {name: np.asarray(arrays[f"bayes.{name}"]).astype(np.int64) for name in cls.SAVED}
        k = loaded["class_counts"].shape[0] if loaded["class_counts"].ndim == 1 else -1
        f = loaded["counts"].shape[1] if loaded["counts"].ndim == 2 else -1
        shapes = {
            "class_counts": (k,),
            "counts": (k, f),
            "sums": (k, f),
            "squares": (k, f),
            "histogram": (k, f, bins + 1),
        }
        for name, shape in shapes.items():
            if loaded[name].shape != shape or (loaded[name] < 0).any():
                raise ValueError(f"naive Bayes array {name} has shape {loaded[name].shape}, expected {shape}")
            setattr(bayes, name, loaded[name])
        return bayes


class _Learned(NamedTuple):
    """A record learned one at a time, not yet added to the statistics."""

    target: int
    features: list[int]  # the numeric features it has a value of
    codes: list[int]  # their codes


def _after_new_code(
    x: np.ndarray, targets: np.ndarray, seen: list[tuple[int, ...] | None], start: int, stop: int
) -> int:
    """`stop`, or the row after the first learned row of [start, stop) that brings a feature of at most
    two codes (`seen`, per column of `x`) another code: the rows after it see it of another kind."""
    watched = [j for j, codes in enumerate(seen) if codes is not None]
    if not watched:
        return stop
    rows = x[start:stop][:, watched]
    fresh = (rows > 0) & (targets[start:stop] >= 0)[:, None]
    for column, j in enumerate(watched):
        for code in seen[j] or ():
            fresh[:, column] &= rows[:, column] != code
    hits = np.flatnonzero(fresh.any(axis=1))
    return stop if not hits.size else start + int(hits[0]) + 1


def _new_code(seen: tuple[int, ...] | None, code: int) -> bool:
    """Whether a learned `code` is new to a feature whose codes so far are `seen` (None: more than two,
    which no code changes)."""
    return seen is not None and code not in seen


def _padded(array: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    out = np.zeros(shape, dtype=array.dtype)
    out[tuple(slice(0, s) for s in array.shape)] = array
    return out


def _pseudo(value: Any) -> float:
    """A saved pseudo-record weight, checked: a finite number > 0 (ValueError naming it otherwise)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 < value < math.inf:
        raise ValueError(
            f"naive Bayes pseudo (the pseudo record's weight) must be a number > 0, got {value!r}"
        )
    return float(value)
