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
behind: the children start empty, so the rule falls back on the trees while they learn.

Measured on 45 classification streams (docs/decisions.md, "A naive Bayes per leaf"), the mean with
the leaf's naive Bayes where it leads gained most on streams with curved class boundaries in few
features (sine, checkerboard, random RBF with drift) and lost little anywhere.

Exactness: the statistics are integers; an estimate and a learned record take the same Python
arithmetic (`_estimate`, `_learn`) on the one-record path and in a batch, where the classifier logs
what its hooks see (`Log`) and replays it in row order after the trees have run: so any batching and
a restore give the same bits. A grown grid clears its feature's statistics in every cell (grids grow
during the warm-up only, while the trees have few leaves).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from sgt.bayes_moments import PSEUDO_WEIGHT, UNIFORM_SHARE, moments, priors
from sgt.tree import Tree

__all__ = ["LeafBayes", "Log", "trees_label"]

Key = tuple[int, ...]


@dataclass
class Cell:
    """One cell's statistics (per class, then per code column) and its tally of right predictions."""

    classes: list[int] = field(default_factory=list)
    counts: list[list[int]] = field(default_factory=list)
    sums: list[list[int]] = field(default_factory=list)
    squares: list[list[int]] = field(default_factory=list)
    bayes_right: int = 0
    trees_right: int = 0


class Predicted(NamedTuple):
    """A row as predicted in a batch: its cell and codes, and the classes known then."""

    key: Key
    codes: list[int]
    k: int


class Learned(NamedTuple):
    """A row as learned in a batch: its cell and codes, its class, the trees' most probable class and
    the classes known then (its own included)."""

    key: Key
    codes: list[int]
    target: int
    trees_label: int
    k: int


class Regridded(NamedTuple):
    """Grids grown before the next row is learned: the features whose statistics are cleared."""

    features: list[int]


class Log:
    """What a batch's hooks saw, in the order the one-record path would see it."""

    def __init__(self) -> None:
        self.events: list[Predicted | Learned | Regridded] = []

    def predicted(self, nodes: Sequence[int], codes: Sequence[int] | np.ndarray, k: int) -> None:
        self.events.append(Predicted(tuple(nodes), [int(c) for c in codes], k))

    def learned(
        self,
        nodes: Sequence[int],
        codes: Sequence[int] | np.ndarray,
        target: int,
        raw: Sequence[float],
        k: int,
    ) -> None:
        self.events.append(Learned(tuple(nodes), [int(c) for c in codes], target, trees_label(raw), k))

    def regridded(self, features: list[int]) -> None:
        self.events.append(Regridded(features))

    def block(
        self,
        nodes: Sequence[np.ndarray],
        raw: np.ndarray | None,
        codes: np.ndarray,
        targets: np.ndarray,
        k: int,
    ) -> None:
        """Rows of a block that the trees predict, then learn, at fixed leaves (`nodes[t]`: each row's
        leaf in tree t; `raw` [trees, rows]; `targets`: each row's class, -1 for a row only predicted):
        each row predicted, then learned if labelled, as the one-record path takes them."""
        n = codes.shape[0]
        keys = list(zip(*(a.tolist() for a in nodes))) if nodes else [()] * n
        # the first class's logit is 0, the earliest class wins ties (`trees_label`)
        labels = [0] * n if raw is None else np.vstack([np.zeros((1, n)), raw]).argmax(axis=0).tolist()
        for key, row, target, label in zip(keys, codes.tolist(), targets.tolist(), labels, strict=True):
            self.events.append(Predicted(key, row, k))
            if target >= 0:
                self.events.append(Learned(key, row, target, label, k))


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
        self.cells: dict[Key, Cell] = {}

    # -- one record ---------------------------------------------------------------------------
    def predict(self, key: Key, codes: Sequence[int], numeric: Sequence[int], k: int) -> list[float] | None:
        """The naive Bayes estimate of a record at cell `key` over `k` classes if it leads there."""
        cell = self.cells.get(key)
        if cell is None or k < 2 or cell.bayes_right <= cell.trees_right:
            return None
        return self._estimate(cell, codes, numeric, k)

    def learn(
        self, key: Key, codes: Sequence[int], numeric: Sequence[int], target: int, trees_label: int, k: int
    ) -> None:
        """Tally the cell's two predictions of a record of class `target` (`k` classes known), then
        learn it."""
        cell = self.cells.get(key)
        if cell is None:
            cell = self.cells[key] = Cell()
        if k >= 2:
            estimate = self._estimate(cell, codes, numeric, k)
            cell.bayes_right += estimate.index(max(estimate)) == target
            cell.trees_right += trees_label == target
        self._learn(cell, codes, numeric, target)

    def regrid(self, features: Iterable[int]) -> None:
        """Clear the statistics of features whose grid grew (their codes changed meaning)."""
        for j in features:
            for cell in self.cells.values():
                for stats in (cell.counts, cell.sums, cell.squares):
                    for row in stats:
                        if j < len(row):
                            row[j] = 0

    # -- a batch ------------------------------------------------------------------------------
    def replay(self, log: Log, numeric: Sequence[int], proba: np.ndarray) -> None:
        """Take a batch's events in order: learn its learned rows, and serve the naive Bayes into the
        rows of `proba` [rows, classes] (the model's probabilities of every predicted row, in row
        order) where it leads, as `served` does for one record."""
        row = 0
        for event in log.events:
            if isinstance(event, Predicted):
                estimate = self.predict(event.key, event.codes, numeric, event.k)
                if estimate is not None:
                    proba[row, : event.k] = self.served(proba[row, : event.k], estimate)
                row += 1
            elif isinstance(event, Learned):
                self.learn(event.key, event.codes, numeric, event.target, event.trees_label, event.k)
            else:
                self.regrid(event.features)

    @staticmethod
    def served(proba: Sequence[float] | np.ndarray, estimate: list[float] | None) -> list[float]:
        """The model's probabilities of one record with the naive Bayes served in where it leads."""
        if estimate is None:
            return list(proba)
        mean: list[float] = ((np.asarray(proba) + np.array(estimate)) / 2).tolist()
        return mean

    # -- the estimate -------------------------------------------------------------------------
    def _estimate(self, cell: Cell, codes: Sequence[int], numeric: Sequence[int], k: int) -> list[float]:
        """sgt.bayes_moments' Gaussian naive Bayes of one row of codes over `k` classes, on the cell."""
        counts = cell.counts
        present = [
            j
            for j in numeric
            if j < len(codes) and codes[j] > 0 and any(j < len(row) and row[j] for row in counts)
        ]
        scores = []
        for c, prior in enumerate(priors([*cell.classes, *[0] * (k - len(cell.classes))])):
            score = math.log(prior)
            stats = [_stats(cell, c, j) for j in present]
            counts_c, sums_c, squares_c = ([row[i] for row in stats] for i in range(3))
            means, variances = moments(self.bins, counts_c, sums_c, squares_c, PSEUDO_WEIGHT)
            for j, mean, variance in zip(present, means, variances, strict=True):
                z = codes[j] - mean
                score += -0.5 * (math.log(variance) + z * z / variance)
            scores.append(score)
        top = max(scores)
        e = [math.exp(score - top) for score in scores]
        norm = sum(e)
        return [(1.0 - UNIFORM_SHARE) * (v / norm) + UNIFORM_SHARE / k for v in e]

    @staticmethod
    def _learn(cell: Cell, codes: Sequence[int], numeric: Sequence[int], target: int) -> None:
        width = len(codes)
        while len(cell.classes) <= target:
            cell.classes.append(0)
            for stats in (cell.counts, cell.sums, cell.squares):
                stats.append([])
        cell.classes[target] += 1
        counts, sums, squares = cell.counts[target], cell.sums[target], cell.squares[target]
        if len(counts) < width:
            for row in (counts, sums, squares):
                row.extend([0] * (width - len(row)))
        for j in numeric:
            v = int(codes[j]) if j < width else 0
            if v > 0:
                counts[j] += 1
                sums[j] += v
                squares[j] += v * v

    # -- memory and saving ----------------------------------------------------------------------
    def prune(self, trees: Sequence[Tree]) -> None:
        """Forget the cells of leaves that have split (no record reaches them again)."""
        dead = [
            key
            for key in self.cells
            if len(key) != len(trees) or any(t.feature[node] >= 0 for t, node in zip(trees, key))
        ]
        for key in dead:
            del self.cells[key]

    def nbytes(self) -> int:
        """Bytes of the statistics as saved (eight per integer)."""
        return sum(
            8 * (2 + len(c.classes) + sum(3 * len(row) for row in c.counts)) for c in self.cells.values()
        )

    def arrays(self, n_trees: int, k: int, width: int) -> list[tuple[str, np.ndarray]]:
        """The cells in key order, padded to `k` classes and `width` code columns."""
        keys = sorted(self.cells)
        stats = np.zeros((len(keys), 3, k, width), dtype=np.int64)
        classes = np.zeros((len(keys), k), dtype=np.int64)
        tally = np.zeros((len(keys), 2), dtype=np.int64)
        for i, key in enumerate(keys):
            cell = self.cells[key]
            classes[i, : len(cell.classes)] = cell.classes
            tally[i] = cell.bayes_right, cell.trees_right
            for s, rows in enumerate((cell.counts, cell.sums, cell.squares)):
                for c, row in enumerate(rows):
                    stats[i, s, c, : len(row)] = row
        return [
            ("leaf_bayes.keys", np.array(keys, dtype=np.int64).reshape(len(keys), n_trees)),
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
        for i, key in enumerate(keys.tolist()):
            bayes.cells[tuple(key)] = Cell(
                classes=classes[i].tolist(),
                counts=stats[i, 0].tolist(),
                sums=stats[i, 1].tolist(),
                squares=stats[i, 2].tolist(),
                bayes_right=int(tally[i, 0]),
                trees_right=int(tally[i, 1]),
            )
        return bayes


def _stats(cell: Cell, c: int, j: int) -> tuple[int, int, int]:
    """Class c's count, sum and sum of squares of feature j in the cell (0 where it has none yet)."""
    if c >= len(cell.counts) or j >= len(cell.counts[c]):
        return 0, 0, 0
    return cell.counts[c][j], cell.sums[c][j], cell.squares[c][j]
