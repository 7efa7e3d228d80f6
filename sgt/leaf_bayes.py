"""A naive Bayes in every leaf, served beside the trees where it has out-predicted them (leaf_bayes=True).

A leaf of a gradient tree predicts one logit per class (or a linear function of the features), so on
a region where the classes are curved against the features it needs many splits, each waiting for
evidence. A Hoeffding tree's leaves hold a Gaussian naive Bayes instead, which draws curved
boundaries inside a leaf from its first records. Here each cell, the leaves a record reaches in every
tree of the committee, keeps its own naive Bayes over the numeric features' codes (per class: its
records, and per feature the count, sum and sum of squares of the codes of its values; a missing
value takes no part). Its estimate is sgt.bayes_moments' Gaussian with a pseudo record at the grid's
centre and a share of the uniform distribution.

Each cell also counts, over the records it learned, how often the naive Bayes' most probable class
was right and how often the trees' was (each predicted just before the record was learned). Where
the naive Bayes leads, the model publishes the mean of its probabilities and the naive Bayes'; where
it does not (every new cell), the model's probabilities alone. A leaf that splits leaves its cell
behind: the children start empty, so the rule falls back on the trees while they learn. A cell whose
naive Bayes has been right `BEHIND` times fewer than the trees retires: it would not be served again
for a long while, so it stops learning and scoring (half the naive Bayes' time one record at a time,
where the trees fit well) and drops its statistics; its key stays until its leaf splits.

Measured on 45 classification streams (docs/decisions.md, "A naive Bayes per leaf"), the mean with
the leaf's naive Bayes where it leads gained most on streams with curved class boundaries in few
features (sine, checkerboard, random RBF with drift) and lost little anywhere.

Exactness: the statistics are integers, and a mean, a variance and a log variance are functions of
one class's count, sum and sum of squares of one feature (sgt.bayes_moments' formulas, numpy's log).
One record is estimated on Python floats from the moments each cell keeps (refreshed as it learns);
a batch logs what the classifier's hooks see (sgt.leaf_bayes_batch) and replays it after the trees
ran, on numpy arrays, with the same operations in the same order: the log prior, then each feature's
term in feature order, numpy's exp, the sum over classes in class order. So any batching and a
restore give the same bits. A grown grid clears its feature's statistics in every cell (grids grow
during the warm-up only, while the trees have few leaves).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np

from sgt.bayes_moments import (
    PSEUDO_WEIGHT,
    VARIANCE_FLOOR,
    PseudoRecord,
    moments,
    priors,
    probabilities,
    state_moments,
)
from sgt.tree import Tree

__all__ = ["Cell", "Key", "LeafBayes", "Packed", "trees_label"]

Key = tuple[int, ...]

#: a cell retires once its naive Bayes has been right this many times fewer than the trees
BEHIND = 50


@dataclass
class Cell:
    """One cell's statistics and the moments they give, per class (rows) and code column (all rows of
    the cell as wide as `known`), its records per class, and its tally of right predictions."""

    classes: list[int] = field(default_factory=list)
    counts: list[list[int]] = field(default_factory=list)
    sums: list[list[int]] = field(default_factory=list)
    squares: list[list[int]] = field(default_factory=list)
    means: list[list[float]] = field(default_factory=list)
    variances: list[list[float]] = field(default_factory=list)
    logs: list[list[float]] = field(default_factory=list)  # the log variances
    known: list[bool] = field(default_factory=list)  # per column: some class has a value of it
    bayes_right: int = 0
    trees_right: int = 0

    @property
    def shape(self) -> tuple[int, int]:
        """The classes and code columns its statistics hold."""
        return len(self.classes), len(self.known)


@dataclass
class Packed:
    """A cell as a batch or a restore leaves it: its records per class [K], statistics [3, K, width]
    (count, sum, sum of squares per class and code column) and tally, as arrays; unpacked into a `Cell`
    (its moments computed) when a record at a time needs its estimate. A multiclass committee's cells
    are many and small (RBF-5: 9,900 of 20,000 records), and building a Cell for every cell a batch
    touched cost ten times the rest of the replay."""

    classes: np.ndarray
    stats: np.ndarray
    bayes_right: int
    trees_right: int

    @property
    def shape(self) -> tuple[int, int]:
        """The classes and code columns its statistics hold."""
        return self.classes.shape[0], self.stats.shape[2]

    def unpacked(self, bins: int) -> Cell:
        k, width = self.classes.shape[0], self.stats.shape[2]
        states = self.stats.transpose(1, 0, 2).reshape(k, 3 * width)  # [class, count | sum | square]
        means, variances, logs = (a.T.tolist() for a in state_moments(states, bins, PSEUDO_WEIGHT))
        return Cell(
            classes=self.classes.tolist(),
            counts=self.stats[0].tolist(),
            sums=self.stats[1].tolist(),
            squares=self.stats[2].tolist(),
            means=means,
            variances=variances,
            logs=logs,
            known=(self.stats[0] > 0).any(axis=0).tolist(),
            bayes_right=self.bayes_right,
            trees_right=self.trees_right,
        )


@dataclass(frozen=True)
class Empty:
    """The moments of a class with no value of a feature: the pseudo record's alone."""

    mean: float
    variance: float
    log: float

    @classmethod
    def of(cls, bins: int) -> Empty:
        means, variances = moments(bins, [0], [0], [0], PSEUDO_WEIGHT)
        return cls(means[0], variances[0], float(np.log(np.array(variances))[0]))


def trees_label(raw: Sequence[float]) -> int:
    """The trees' most probable class from the committee's logits (the first class's is 0; the
    earliest on ties)."""
    z = [0.0, *raw]
    return z.index(max(z))


class LeafBayes:
    """The cells' naive Bayes and tallies, over the numeric code columns `numeric` of a grid of `bins`.

    >>> bayes = LeafBayes(bins=8)
    >>> for x, y in [([2], 0), ([7], 1)] * 5:
    ...     bayes.learn((1,), x, [0], y, trees_label=0, k=2)
    >>> bayes.predict((1,), [7], [0], 2) is not None  # right 10 times against the trees' 5: served
    True
    """

    def __init__(self, bins: int) -> None:
        self.bins = bins
        self.cells: dict[Key, Cell | Packed] = {}
        self.retired: set[Key] = set()  # cells whose naive Bayes fell `behind` the trees: no more learning
        self.behind = BEHIND
        self.empty = Empty.of(bins)
        self.pseudo = PseudoRecord.of(bins, PSEUDO_WEIGHT)
        # the last scores (cell, classes, codes): a record predicted, then learned, is scored once
        self._last: tuple[Key, int, list[int], list[float]] | None = None

    # -- one record ---------------------------------------------------------------------------
    def predict(self, key: Key, codes: list[int], numeric: Sequence[int], k: int) -> list[float] | None:
        """The naive Bayes estimate of a record with `codes` (Python ints) at cell `key` over `k`
        classes if it leads there."""
        cell = self.cells.get(key)
        if cell is None or k < 2 or cell.bayes_right <= cell.trees_right:
            return None
        if isinstance(cell, Packed):
            cell = self.cells[key] = cell.unpacked(self.bins)
        return probabilities(self._scores(key, cell, codes, numeric, k))

    def learn(
        self, key: Key, codes: list[int], numeric: Sequence[int], target: int, trees_label: int, k: int
    ) -> None:
        """Tally the cell's two predictions of a record of class `target` (`k` classes known), then
        learn it (`codes`: Python ints, kept by the cache of the last scores, so not changed after)."""
        cell = self.cells.get(key)
        if cell is None:
            if key in self.retired:
                return
            cell = self.cells[key] = Cell()
        elif isinstance(cell, Packed):
            cell = self.cells[key] = cell.unpacked(self.bins)
        if k >= 2:
            scores = self._scores(key, cell, codes, numeric, k)
            cell.bayes_right += scores.index(max(scores)) == target
            cell.trees_right += trees_label == target
            if cell.bayes_right - cell.trees_right <= -self.behind:
                del self.cells[key]
                self.retired.add(key)
                self._last = None
                return
        self._learn(cell, codes, numeric, target)

    def regrid(self, features: Iterable[int]) -> None:
        """Clear the statistics of features whose grid grew (their codes changed meaning)."""
        self._last = None
        empty = self.empty
        for j in features:
            for cell in self.cells.values():
                if isinstance(cell, Packed):
                    if j < cell.stats.shape[2]:
                        cell.stats[:, :, j] = 0
                    continue
                if j >= len(cell.known):
                    continue
                cell.known[j] = False
                for c in range(len(cell.classes)):
                    cell.counts[c][j] = cell.sums[c][j] = cell.squares[c][j] = 0
                    cell.means[c][j], cell.variances[c][j], cell.logs[c][j] = (
                        empty.mean,
                        empty.variance,
                        empty.log,
                    )

    @staticmethod
    def served(proba: Sequence[float] | np.ndarray, estimate: list[float] | None) -> list[float]:
        """The model's probabilities of one record with the naive Bayes served in where it leads."""
        if estimate is None:
            return list(proba)
        return [(p + q) / 2 for p, q in zip(proba, estimate, strict=True)]  # (numpy's bits: IEEE + and /)

    # -- the estimate -------------------------------------------------------------------------
    def _scores(self, key: Key, cell: Cell, codes: list[int], numeric: Sequence[int], k: int) -> list[float]:
        """Each of `k` classes' log prior plus log likelihood of one row of codes on the cell (the
        present features' terms added in feature order, as the batch adds them); its most probable
        class is the naive Bayes' prediction, sgt.bayes_moments.probabilities its estimate."""
        last = self._last
        if last is not None and last[0] == key and last[1] == k and last[2] == codes:
            return last[3]
        known, width = cell.known, min(len(codes), len(cell.known))
        present = [j for j in numeric if j < width and known[j] and codes[j] > 0]
        classes = cell.classes if len(cell.classes) == k else [*cell.classes, *[0] * (k - len(cell.classes))]
        scores = np.log(np.array(priors(classes))).tolist()
        for c in range(len(cell.classes)):
            means, variances, logs = cell.means[c], cell.variances[c], cell.logs[c]
            score = scores[c]
            for j in present:
                z = codes[j] - means[j]
                score = score + -0.5 * (logs[j] + z * z / variances[j])
            scores[c] = score
        empty = self.empty
        for c in range(len(cell.classes), k):
            score = scores[c]
            for j in present:
                z = codes[j] - empty.mean
                score = score + -0.5 * (empty.log + z * z / empty.variance)
            scores[c] = score
        self._last = (key, k, codes, scores)
        return scores

    def _learn(self, cell: Cell, codes: list[int], numeric: Sequence[int], target: int) -> None:
        self._last = None
        if len(codes) > len(cell.known) or target >= len(cell.classes):
            widen(cell, len(codes), target + 1, self.empty)
        cell.classes[target] += 1
        counts, sums, squares, known = (
            cell.counts[target],
            cell.sums[target],
            cell.squares[target],
            cell.known,
        )
        means, variances, pseudo = cell.means[target], cell.variances[target], self.pseudo
        present = []
        for j in numeric:
            if j < len(codes) and (v := codes[j]) > 0:
                n = counts[j] = counts[j] + 1
                s = sums[j] = sums[j] + v
                q = squares[j] = squares[j] + v * v
                known[j] = True
                # sgt.bayes_moments.moments' arithmetic, written out: a call with its argument lists
                # cost 6.5 us a learned record against 4.0 (10 features, alone); state_moments checks it
                weight = n + pseudo.weight
                mean = means[j] = (s + pseudo.sum) / weight
                variances[j] = (q + pseudo.square) / weight - mean * mean + VARIANCE_FLOOR
                present.append(j)
        if present:
            logs = cell.logs[target]
            for j, log in zip(
                present, np.log(np.array([variances[j] for j in present])).tolist(), strict=True
            ):
                logs[j] = log

    # -- a batch ------------------------------------------------------------------------------
    def put(self, key: Key, classes: np.ndarray, stats: np.ndarray, tally: tuple[int, int]) -> None:
        """Set a cell's records per class `classes` [K], statistics `stats` [3, K, width] (count, sum,
        sum of squares per class and column) and tally (a batch's end, a restore; copied)."""
        self.cells[key] = Packed(classes.copy(), stats.copy(), tally[0], tally[1])
        self._last = None

    def stats(self, key: Key, k: int, width: int) -> tuple[np.ndarray, np.ndarray, tuple[int, int]]:
        """A cell's records per class [k], statistics [3, k, width] and tally (zeros if it has none)."""
        classes, stats = np.zeros(k, dtype=np.int64), np.zeros((3, k, width), dtype=np.int64)
        cell = self.cells.get(key)
        if cell is None:
            return classes, stats, (0, 0)
        if isinstance(cell, Packed):
            have, wide = cell.stats.shape[1:]
            classes[:have], stats[:, :have, :wide] = cell.classes, cell.stats
            return classes, stats, (cell.bayes_right, cell.trees_right)
        classes[: len(cell.classes)] = cell.classes
        for s, rows in enumerate((cell.counts, cell.sums, cell.squares)):
            for c, row in enumerate(rows):
                stats[s, c, : len(row)] = row
        return classes, stats, (cell.bayes_right, cell.trees_right)

    # -- memory and saving ----------------------------------------------------------------------
    def prune(self, trees: Sequence[Tree]) -> None:
        """Forget the cells of leaves that have split (no record reaches them again)."""

        def split(key: Key) -> bool:
            return len(key) != len(trees) or any(t.feature[node] >= 0 for t, node in zip(trees, key))

        for key in [key for key in self.cells if split(key)]:
            del self.cells[key]
        self.retired = {key for key in self.retired if not split(key)}
        self._last = None

    def nbytes(self, k: int, width: int) -> int:
        """Bytes of the statistics as saved with `k` classes and `width` code columns, and of the retired
        cells' keys (eight per integer): the same whatever the order the cells learned in."""
        return len(self.cells) * 8 * (2 + k + 3 * k * width) + 8 * sum(len(key) for key in self.retired)

    def arrays(self, n_trees: int, k: int, width: int) -> list[tuple[str, np.ndarray]]:
        """The cells in key order, padded to `k` classes and `width` code columns."""
        keys = sorted(self.cells)
        stats = np.zeros((len(keys), 3, k, width), dtype=np.int64)
        classes = np.zeros((len(keys), k), dtype=np.int64)
        tally = np.zeros((len(keys), 2), dtype=np.int64)
        for i, key in enumerate(keys):
            classes[i], stats[i], tally[i] = self.stats(key, k, width)
        retired = sorted(self.retired)
        return [
            ("leaf_bayes.keys", np.array(keys, dtype=np.int64).reshape(len(keys), n_trees)),
            ("leaf_bayes.retired", np.array(retired, dtype=np.int64).reshape(len(retired), n_trees)),
            ("leaf_bayes.classes", classes),
            ("leaf_bayes.stats", stats),
            ("leaf_bayes.tally", tally),
        ]

    @classmethod
    def restore(cls, bins: int, arrays: dict[str, np.ndarray], n_trees: int, k: int, width: int) -> LeafBayes:
        """Inverse of `arrays` (ValueError if they do not fit the model)."""
        keys, classes = arrays["leaf_bayes.keys"], arrays["leaf_bayes.classes"]
        stats, tally = arrays["leaf_bayes.stats"], arrays["leaf_bayes.tally"]
        n = keys.shape[0]
        expected = {
            "keys": (keys.shape, (n, n_trees)),
            "classes": (classes.shape, (n, k)),
            "stats": (stats.shape, (n, 3, k, width)),
            "tally": (tally.shape, (n, 2)),
        }
        for name, (shape, wanted) in expected.items():
            if shape != wanted:
                raise ValueError(f"leaf naive Bayes array {name} has shape {shape}, expected {wanted}")
        if (classes < 0).any() or (stats[:, 0] < 0).any() or (stats[:, 2] < 0).any() or (tally < 0).any():
            raise ValueError("leaf naive Bayes statistics out of range")
        bayes = cls(bins)
        retired = arrays.get("leaf_bayes.retired", np.zeros((0, n_trees), dtype=np.int64))  # (none before it)
        if retired.ndim != 2 or retired.shape[1] != n_trees:
            raise ValueError(
                f"leaf naive Bayes array retired has shape {retired.shape}, expected (n, {n_trees})"
            )
        bayes.retired = {tuple(key) for key in retired.tolist()}
        for i, key in enumerate(keys.tolist()):
            bayes.put(tuple(key), classes[i], stats[i], (int(tally[i, 0]), int(tally[i, 1])))
        return bayes


def widen(cell: Cell, width: int, k: int, empty: Empty) -> None:
    """Make the cell's rows at least `width` columns wide and at least `k` classes long (zeros, and the
    moments of no value)."""
    have = len(cell.known)
    if width > have:
        grow = width - have
        cell.known.extend([False] * grow)
        for c in range(len(cell.classes)):
            for stats in (cell.counts[c], cell.sums[c], cell.squares[c]):
                stats.extend([0] * grow)
            cell.means[c].extend([empty.mean] * grow)
            cell.variances[c].extend([empty.variance] * grow)
            cell.logs[c].extend([empty.log] * grow)
    width = len(cell.known)
    while len(cell.classes) < k:
        cell.classes.append(0)
        for rows in (cell.counts, cell.sums, cell.squares):
            rows.append([0] * width)
        cell.means.append([empty.mean] * width)
        cell.variances.append([empty.variance] * width)
        cell.logs.append([empty.log] * width)
