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
estimate keeps a share `UNIFORM_SHARE` of the uniform distribution, so that its mistakes are bounded.

The estimate works on the features' codes (see sgt.features), whose statistics are integers: per
class, the count of records, and per class and numeric feature the count, sum and sum of squares of
the codes of records whose value was not missing. Each feature's mean and variance take one pseudo
record at the grid's centre with the variance of the whole grid, so that a class with no value yet
has a broad, defined density; a variance never falls below that of a uniform value within one bin
(1/12). A missing value leaves its feature out of the estimate, and so does a feature of which no
value has been learned yet. Nominal features take no part. When a numeric grid grows, the per-code
counts of every class carry over with the grid's mapping.

Exactness: the statistics are integers (the same in any order); a block of rows is estimated with
every row seeing the statistics of the rows before it (cumulative sums). A single record takes
`run_one`, the same operations in the same order on Python floats, with numpy's log and exp (whose
bits do not depend on the array's length); so both paths give the same bits. The log-loss
difference is updated row by row, in order, on Python floats.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from sgt.features import Regrid

__all__ = ["LOG_RATIO_BOUND", "UNIFORM_SHARE", "NaiveBayes"]

#: bound (in nats) of the difference between the experts' cumulative log losses
LOG_RATIO_BOUND = 10.0
#: share of the uniform distribution in the naive Bayes estimate
UNIFORM_SHARE = 0.05
#: the least variance of a feature's codes: a uniform value within one bin
VARIANCE_FLOOR = 1.0 / 12.0
#: a block is estimated in pieces of at most this many rows (the per-row statistics are [rows, K, F])
PIECE = 256
#: the least probability whose log the mixture takes (the trees' softmax may underflow to 0)
_TINY = 1e-300


@dataclass(frozen=True)
class Mixed:
    """What the mixture publishes for rows: its probabilities, and the naive Bayes estimate alone."""

    proba: np.ndarray  # [rows, K]
    bayes: np.ndarray  # [rows, K]


class NaiveBayes:
    """The naive Bayes state of a classifier and the log-loss difference of the mixture.

    `numeric` flags the features the estimate uses (the classifier's layout decides); arrays grow with
    the classes and features the classifier learns (`fit`).
    """

    #: the arrays a saved model holds
    SAVED = ("class_counts", "counts", "sums", "squares", "histogram")

    def __init__(self, bins: int) -> None:
        self.bins = bins
        self.class_counts = np.zeros(0, dtype=np.int64)  # [K]
        self.counts = np.zeros((0, 0), dtype=np.int64)  # [K, F] records with a value
        self.sums = np.zeros((0, 0), dtype=np.int64)  # [K, F] sum of codes
        self.squares = np.zeros((0, 0), dtype=np.int64)  # [K, F] sum of squared codes
        self.histogram = np.zeros((0, 0, bins + 1), dtype=np.int64)  # [K, F, code]: for regrids
        self.log_ratio = 0.0  # L_bayes - L_trees, bounded
        # what a record's estimate needs from the statistics, for `run_one` while they do not change
        # (a record predicted, then learned, computes it once); not model state
        self._derived: _Derived | None = None

    # -- structure -------------------------------------------------------------------------------
    def fit(self, n_classes: int, n_features: int) -> None:
        """Grow the arrays to `n_classes` classes and `n_features` features (new ones without counts)."""
        k, f = self.counts.shape
        if n_classes == k and n_features == f:
            return
        self._derived = None
        k, f = max(k, n_classes), max(f, n_features)
        self.class_counts = _padded(self.class_counts, (k,))
        self.counts = _padded(self.counts, (k, f))
        self.sums = _padded(self.sums, (k, f))
        self.squares = _padded(self.squares, (k, f))
        self.histogram = _padded(self.histogram, (k, f, self.bins + 1))

    def regrid(self, regrid: Regrid) -> None:
        """Carry a numeric feature's per-code counts over to its grown grid."""
        j = regrid.feature
        if j >= self.counts.shape[1]:
            return
        self._derived = None
        old = self.histogram[:, j].copy()
        new = np.zeros_like(old)
        for code in range(old.shape[1]):  # integer counts: exact in any order
            new[:, int(regrid.mapping[code])] += old[:, code]
        codes = np.arange(self.bins + 1, dtype=np.int64)
        self.histogram[:, j] = new
        self.sums[:, j] = (new * codes).sum(axis=1)
        self.squares[:, j] = (new * codes * codes).sum(axis=1)

    def nbytes(self) -> int:
        return sum(getattr(self, name).nbytes for name in self.SAVED)

    # -- one record: Python floats -----------------------------------------------------------------
    def run_one(
        self, codes: list[int], tree_proba: list[float], target: int, numeric: list[int]
    ) -> tuple[list[float], list[float]]:
        """`run` for one record (`codes` all its codes, `target` -1 to predict only): the mixture and the
        estimate, as lists."""
        k = len(tree_proba)
        self.fit(k, len(codes))
        x = [codes[j] for j in numeric]
        bayes = self._estimate_one(x, numeric, k)
        r = float(np.exp(-np.array([self.log_ratio]))[0])
        proba = [(q + r * b) / (1.0 + r) for q, b in zip(tree_proba, bayes, strict=True)]
        if target >= 0:
            losses = -np.log(np.maximum(np.array([bayes[target], tree_proba[target]]), _TINY))
            loss_bayes, loss_trees = losses.tolist()
            ratio = self.log_ratio + (loss_bayes - loss_trees)
            self.log_ratio = min(LOG_RATIO_BOUND, max(-LOG_RATIO_BOUND, ratio))
            self._learn_one(x, numeric, target)
        return proba, bayes

    def _derive(self, numeric: list[int], k: int) -> _Derived:
        """Each class's mean, variance and log variance per feature and log prior: `_estimate`'s."""
        key = (tuple(numeric), k)
        if self._derived is not None and self._derived.key == key:
            return self._derived
        counts = self.counts[:, numeric].tolist()
        means, variances = [], []
        for c in range(k):
            mean, variance = self._moments(c, numeric)
            means += mean
            variances += variance
        logs = np.log(np.array([*variances, *self._priors(k)])).tolist()
        # a feature no class has a value of yet takes no part (not even equal terms for every class: in
        # a batch, a feature first learned later in it is already known, with no values, to earlier rows)
        known = [any(row[j] for row in counts) for j in range(len(numeric))]
        self._derived = _Derived(key, means, variances, logs, known)
        return self._derived

    def _moments(self, c: int, numeric: list[int]) -> tuple[list[float], list[float]]:
        """Class c's mean and variance of every feature in `numeric`, as `_estimate` computes them."""
        centre, spread = (self.bins + 1) / 2.0, self.bins * self.bins / 12.0
        extra = centre * centre + spread
        means, variances = [], []
        counts, sums = self.counts[c, numeric].tolist(), self.sums[c, numeric].tolist()
        for n, s, q in zip(counts, sums, self.squares[c, numeric].tolist(), strict=True):
            weight = n + 1.0
            mean = (s + centre) / weight
            means.append(mean)
            variances.append((q + extra) / weight - mean * mean + VARIANCE_FLOOR)
        return means, variances

    def _priors(self, k: int) -> list[float]:
        classes = self.class_counts.tolist()
        total = sum(classes)
        return [(n + 1.0) / (total + k) for n in classes]

    def _refresh(self, c: int, present: list[int]) -> None:
        """`_derive` again after class c learned a record with values of features `present` (positions
        in `numeric`): only its row and the priors change."""
        d = self._derived
        if d is None:
            return
        numeric, k = list(d.key[0]), d.key[1]
        width = len(numeric)
        means, variances = self._moments(c, numeric)
        logs = np.log(np.array([*variances, *self._priors(k)])).tolist()
        row = slice(c * width, (c + 1) * width)
        d.means[row], d.variances[row], d.logs[row] = means, variances, logs[:width]
        d.logs[k * width :] = logs[width:]
        for j in present:
            d.known[j] = True

    def _estimate_one(self, x: list[int], numeric: list[int], k: int) -> list[float]:
        """`_estimate` of one row, in the same order of operations."""
        d = self._derive(numeric, k)
        width = len(numeric)
        present = [j for j, v in enumerate(x) if v > 0 and d.known[j]]
        scores = []
        for c in range(k):
            score = d.logs[k * width + c]
            for j in present:
                at = c * width + j
                z = x[j] - d.means[at]
                score = score + -0.5 * (d.logs[at] + z * z / d.variances[at])
            scores.append(score)
        top = max(scores)
        e = np.exp(np.array(scores) - top).tolist()
        norm = e[0]
        for v in e[1:]:
            norm += v
        return [(1.0 - UNIFORM_SHARE) * (v / norm) + UNIFORM_SHARE / k for v in e]

    def _learn_one(self, x: list[int], numeric: list[int], target: int) -> None:
        positions = [j for j, v in enumerate(x) if v > 0]
        present = [numeric[j] for j in positions]
        values = np.array([x[j] for j in positions], dtype=np.int64)
        self.class_counts[target] += 1
        self.counts[target, present] += 1
        self.sums[target, present] += values
        self.squares[target, present] += values * values
        self.histogram[target, present, values] += 1
        if self._derived is not None and self._derived.key != (tuple(numeric), len(self.class_counts)):
            self._derived = None
        self._refresh(target, positions)

    # -- a block of rows: numpy ------------------------------------------------------------------
    def run(
        self, codes: np.ndarray, tree_proba: np.ndarray, targets: np.ndarray, numeric: np.ndarray
    ) -> Mixed:
        """Predict rows in order and learn those with a target >= 0.

        `codes`: [rows, F] the rows' codes; `tree_proba`: [rows, K] the trees' softmax of each row as
        it is learned (the classifier's K classes, at least two); `numeric`: the numeric features'
        indices. Returns each row's mixture and estimate as predicted before the row is learned.
        """
        m, k = tree_proba.shape
        self.fit(k, codes.shape[1])
        proba, bayes = np.zeros((m, k)), np.zeros((m, k))
        for start in range(0, m, PIECE):
            rows = slice(start, min(m, start + PIECE))
            x = codes[rows][:, numeric].astype(np.int64)
            piece = self._run_piece(x, tree_proba[rows], targets[rows], numeric)
            proba[rows], bayes[rows] = piece.proba, piece.bayes
        return Mixed(proba, bayes)

    def _run_piece(
        self, x: np.ndarray, tree_proba: np.ndarray, targets: np.ndarray, numeric: np.ndarray
    ) -> Mixed:
        m, k = tree_proba.shape
        bayes = self._estimate(x, targets, numeric, k)
        # the mixture's weight of the estimate, row by row: each row sees the losses of the rows before it
        learned = (targets >= 0).tolist()
        y = np.maximum(targets, 0)
        at = np.arange(m)
        loss_bayes = (-np.log(np.maximum(bayes[at, y], _TINY))).tolist()
        loss_trees = (-np.log(np.maximum(tree_proba[at, y], _TINY))).tolist()
        before = [0.0] * m
        ratio = self.log_ratio
        for i in range(m):
            before[i] = ratio
            if learned[i]:
                ratio = min(LOG_RATIO_BOUND, max(-LOG_RATIO_BOUND, ratio + (loss_bayes[i] - loss_trees[i])))
        self.log_ratio = ratio
        r = np.exp(-np.array(before))[:, None]
        return Mixed((tree_proba + r * bayes) / (1.0 + r), bayes)

    def _estimate(self, x: np.ndarray, targets: np.ndarray, numeric: np.ndarray, k: int) -> np.ndarray:
        """[rows, K] the naive Bayes estimate of each row from the rows before it; learns the rows."""
        self._derived = None
        m = x.shape[0]
        learned = targets >= 0
        onehot = np.zeros((m, k), dtype=np.int64)
        onehot[np.flatnonzero(learned), targets[learned]] = 1
        valid = (x > 0).astype(np.int64)  # [m, F]: code 0 is a missing value
        # each row's own contribution, then the statistics before it (exclusive cumulative sums)
        add_n = onehot[:, :, None] * valid[:, None, :]  # [m, K, F]
        add_s = add_n * x[:, None, :]
        add_q = add_s * x[:, None, :]
        cols = numeric
        n = self.counts[:, cols][None] + np.cumsum(add_n, axis=0) - add_n
        s = self.sums[:, cols][None] + np.cumsum(add_s, axis=0) - add_s
        q = self.squares[:, cols][None] + np.cumsum(add_q, axis=0) - add_q
        classes = self.class_counts[None, :] + np.cumsum(onehot, axis=0) - onehot  # [m, K]
        # learn the piece: integer sums, the same in any order
        self.class_counts += onehot.sum(axis=0)
        self.counts[:, cols] += add_n.sum(axis=0)
        self.sums[:, cols] += add_s.sum(axis=0)
        self.squares[:, cols] += add_q.sum(axis=0)
        rows, features = np.nonzero(learned[:, None] & (valid > 0))
        np.add.at(self.histogram, (targets[rows], cols[features], x[rows, features]), 1)
        # one pseudo record at the grid's centre with the grid's variance
        centre, spread = (self.bins + 1) / 2.0, self.bins * self.bins / 12.0
        weight = n + 1.0
        mean = (s + centre) / weight
        variance = (q + (centre * centre + spread)) / weight - mean * mean + VARIANCE_FLOOR
        z = x[:, None, :] - mean
        terms = -0.5 * (np.log(variance) + z * z / variance)  # [m, K, F]; 2 pi cancels between classes
        total = classes.sum(axis=1, keepdims=True)  # integers: exact
        log_joint = np.log((classes + 1.0) / (total + k))
        used = (valid > 0) & (n.sum(axis=1) > 0)  # a value, and values of the feature before (run_one)
        for j in range(x.shape[1]):  # features in order, the others adding nothing
            log_joint = log_joint + np.where(used[:, j, None], terms[:, :, j], 0.0)
        top = log_joint.max(axis=1, keepdims=True)
        e = np.exp(log_joint - top)
        norm = e[:, 0].copy()
        for c in range(1, k):
            norm += e[:, c]
        return (1.0 - UNIFORM_SHARE) * (e / norm[:, None]) + UNIFORM_SHARE / k

    # -- serialisation ---------------------------------------------------------------------------
    def state(self) -> dict[str, Any]:
        return {"log_ratio": self.log_ratio}

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


@dataclass
class _Derived:
    """`NaiveBayes._derive`'s result: per class and feature (row-major, classes first) and per class."""

    key: tuple[tuple[int, ...], int]
    means: list[float]
    variances: list[float]
    logs: list[float]  # the log variances, then the K log priors
    known: list[bool]  # per feature: some class has a value of it


def _padded(array: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    out = np.zeros(shape, dtype=array.dtype)
    out[tuple(slice(0, s) for s in array.shape)] = array
    return out
