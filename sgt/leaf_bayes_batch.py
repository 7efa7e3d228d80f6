"""The leaves' naive Bayes over a batch (sgt.leaf_bayes): what the classifier's hooks saw, replayed on
arrays after the trees ran, with the one-record path's bits.

While a batch runs, the classifier's hooks log each row as the one-record path would take it (`Log`):
predicted (its cell, its codes, the classes known), learned if labelled (its class and the trees'
most probable class too), and the features whose grid grew in between. The replay takes the log in
pieces between grown grids, a row to an event (`Events`). Within a piece a row's cell and codes are
fixed, and a cell's statistics before a row are its statistics before the piece plus what its earlier
rows in the piece brought: integers, so running sums over the events sorted by cell give them
exactly (`Running`). From them every row's scores and estimate, a class at a time (`_estimates`);
from the learned rows' scores their tallies, whose running sums tell which predictions the naive
Bayes serves.

The arrays take sgt.leaf_bayes' operations in the same order: the log prior, each present feature's
term in feature order (a feature that takes no part adds 0.0, which changes no sum), numpy's exp, the
normalising sum in class order. So a batch gives the one-record path's bits; a short piece (`SHORT`
events or fewer) takes the one-record path itself, where the arrays would cost more.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from sgt.bayes_moments import PSEUDO_WEIGHT, log_priors, normalised_joint, state_moments
from sgt.leaf_bayes import Key, LeafBayes, trees_label

__all__ = ["SHORT", "Log", "replay"]

#: pieces of at most this many events take the one-record path (measured in batches of 4 to 128 rows of
#: 10 features: at 32 rows the arrays cost 1.1 times the one-record path, at 64 rows 0.98 times)
SHORT = 48


class Piece(NamedTuple):
    """Rows the hooks saw together: each row's cell (`keys` [rows, trees]), codes [rows, width], class
    (`targets`, -1 for a row not learned), the trees' most probable class (`labels`) and the classes
    known then (`k`); whether each row was predicted before it was learned (`predicted`), and whether
    its route ended at leaves (`at_leaves`: a row stopped at a branch is not served); a row learned on
    the one-record path during a node-by-node run knows its row of the batch (`row`, else -1)."""

    keys: np.ndarray
    codes: np.ndarray
    targets: np.ndarray
    labels: np.ndarray
    k: int
    predicted: bool
    at_leaves: np.ndarray
    row: int = -1


class Regridded(NamedTuple):
    """Grids grown before the next row is learned: the features whose statistics are cleared."""

    features: list[int]


class Log:
    """What a batch's hooks saw, in the order the one-record path would see it."""

    def __init__(self) -> None:
        self.entries: list[Piece | Regridded] = []
        self.event_row = -1  # the row of the batch learned next on the one-record path

    def predicted(
        self, nodes: Sequence[int], codes: Sequence[int] | np.ndarray, k: int, at_leaves: bool
    ) -> None:
        row = Piece(_row(nodes), _row(codes), np.array([-1]), np.array([0]), k, True, np.array([at_leaves]))
        self.entries.append(row)

    def learned(
        self,
        nodes: Sequence[int],
        codes: Sequence[int] | np.ndarray,
        target: int,
        raw: Sequence[float],
        k: int,
    ) -> None:
        label = np.array([trees_label(raw)])
        learned = np.array([target])
        row = Piece(
            _row(nodes), _row(codes), learned, label, k, False, np.ones(1, dtype=bool), self.event_row
        )
        self.entries.append(row)

    def regridded(self, features: list[int]) -> None:
        self.entries.append(Regridded(features))

    def block(
        self,
        nodes: Sequence[np.ndarray],
        raw: np.ndarray | None,
        codes: np.ndarray,
        targets: np.ndarray,
        k: int,
        at_leaves: np.ndarray,
    ) -> None:
        """Rows of a block that the trees predict, then learn, at fixed leaves (`nodes[t]`: each row's
        leaf in tree t, or the branch where its route stopped, `at_leaves` false; `raw` [trees, rows];
        `targets`: each row's class, -1 for a row only predicted)."""
        n = codes.shape[0]
        keys = np.stack(nodes, axis=1) if nodes else np.zeros((n, 0), dtype=np.int64)
        # the first class's logit is 0, the earliest class wins ties (`trees_label`)
        labels = (
            np.zeros(n, dtype=np.int64) if raw is None else np.vstack([np.zeros((1, n)), raw]).argmax(axis=0)
        )
        codes = np.array(codes, dtype=np.int64)
        self.entries.append(Piece(keys, codes, targets.copy(), labels, k, True, at_leaves.copy()))

    def nodewise(
        self,
        start: int,
        nodes: np.ndarray,
        raw: np.ndarray,
        codes: np.ndarray,
        targets: np.ndarray,
        k: int,
        at_leaves: np.ndarray,
    ) -> None:
        """The rows from `start` of a node-by-node run of one tree (sgt.leafwise), as `block` takes them
        (`nodes`: each row's node as predicted), put in row order: a row that its route stopped at a
        branch was learned on the one-record path during the run, and logged then (`learned`, after
        the run's earlier rows had been); its learned twin goes back after its prediction."""
        events: list[Piece] = []
        while self.entries and isinstance(last := self.entries[-1], Piece) and last.row >= start:
            events.append(last)
            self.entries.pop()
        cut = 0
        for event in reversed(events):  # (popped last first)
            end = event.row - start + 1
            self.block(
                [nodes[cut:end]], raw[:, cut:end], codes[cut:end], targets[cut:end], k, at_leaves[cut:end]
            )
            self.entries.append(event)
            cut = end
        if cut < nodes.shape[0]:
            self.block([nodes[cut:]], raw[:, cut:], codes[cut:], targets[cut:], k, at_leaves[cut:])


def _row(values: Sequence[int] | Sequence[float] | np.ndarray) -> np.ndarray:
    return np.array(values, dtype=np.int64).reshape(1, -1)


def replay(bayes: LeafBayes, log: Log, numeric: Sequence[int], proba: np.ndarray) -> None:
    """Take a batch's log in order: learn its learned rows, and serve the naive Bayes into the rows of
    `proba` [rows, classes] (the model's probabilities of every predicted row, in row order) where it
    leads, as `LeafBayes.served` does for one record."""
    row, pieces = 0, []
    for entry in [*log.entries, None]:
        if isinstance(entry, Piece):
            pieces.append(entry)
            continue
        if pieces:
            events = Events.of(pieces, row)
            if len(events.k) <= SHORT:
                _replay_one_by_one(bayes, events, numeric, proba)
            else:
                _replay_arrays(bayes, events, numeric, proba)
            row += int((events.proba_row >= 0).sum())
            pieces = []
        if isinstance(entry, Regridded):
            bayes.regrid(entry.features)


@dataclass
class Events:
    """A run of pieces as events in order, one per row: predicted (`proba_row` >= 0, its row in the
    batch's probabilities), learned (`target` >= 0), or predicted then learned, with nothing between;
    keys padded with -1, codes with 0 (missing)."""

    keys: np.ndarray  # [events, trees]
    codes: np.ndarray  # [events, width]
    target: np.ndarray  # the class learned, -1 for a row only predicted
    label: np.ndarray  # the trees' most probable class, for a learned row
    k: np.ndarray  # the classes known
    proba_row: np.ndarray  # the row of the batch's probabilities, -1 for a row only learned
    at_leaves: np.ndarray  # a predicted row's route ended at leaves (else it is not served)

    @classmethod
    def of(cls, pieces: list[Piece], first_row: int) -> Events:
        trees = max(p.keys.shape[1] for p in pieces)
        width = max(p.codes.shape[1] for p in pieces)
        columns = [
            (
                _pad(p.keys, trees, -1),
                _pad(p.codes, width, 0),
                p.targets,
                p.labels,
                np.full(p.targets.shape[0], p.k),
                np.full(p.targets.shape[0], p.predicted),
                p.at_leaves,
            )
            for p in pieces
        ]
        keys, codes, target, label, k, predicted, at_leaves = (
            np.concatenate(column) for column in zip(*columns, strict=True)
        )
        # a row predicted alone (the one-record path's hooks), then learned at the same cell with the same
        # codes and classes: one event, as a block's row
        merged = predicted[:-1] & (target[:-1] < 0) & ~predicted[1:] & (target[1:] >= 0) & (k[1:] == k[:-1])
        merged &= (keys[1:] == keys[:-1]).all(axis=1) & (codes[1:] == codes[:-1]).all(axis=1)
        if merged.any():
            at = np.flatnonzero(merged)
            target[at], label[at] = target[at + 1], label[at + 1]
            kept = np.ones(target.shape[0], dtype=bool)
            kept[at + 1] = False
            keys, codes, target, label, k, predicted, at_leaves = (
                a[kept] for a in (keys, codes, target, label, k, predicted, at_leaves)
            )
        proba_row = np.where(predicted, first_row + np.cumsum(predicted) - 1, -1)
        return cls(keys, codes, target, label, k, proba_row, at_leaves)

    def only(self, rows: np.ndarray) -> Events:
        """The events `rows` (a mask) of these."""
        columns = (self.keys, self.codes, self.target, self.label, self.k, self.proba_row, self.at_leaves)
        return Events(*(a[rows] for a in columns))

    def key(self, e: int) -> Key:
        return tuple(v for v in self.keys[e].tolist() if v >= 0)


def _pad(a: np.ndarray, width: int, value: int) -> np.ndarray:
    if a.shape[1] == width:
        return a
    return np.pad(a, ((0, 0), (0, width - a.shape[1])), constant_values=value)


def _replay_one_by_one(bayes: LeafBayes, events: Events, numeric: Sequence[int], proba: np.ndarray) -> None:
    for e in range(events.k.shape[0]):
        key, codes, k = events.key(e), events.codes[e].tolist(), int(events.k[e])
        row = int(events.proba_row[e])
        if row >= 0 and events.at_leaves[e]:
            estimate = bayes.predict(key, codes, numeric, k)
            if estimate is not None:
                proba[row, :k] = bayes.served(proba[row, :k], estimate)
        if events.target[e] >= 0:
            bayes.learn(key, codes, numeric, int(events.target[e]), int(events.label[e]), k)


class Running:
    """Events sorted by cell, stably (so in event order within a cell), and running sums over each
    cell's earlier events (integers: exact)."""

    def __init__(self, cell: np.ndarray) -> None:
        self.order = np.argsort(cell, kind="stable")
        self.cell = cell[self.order]  # each sorted event's cell
        starts = np.flatnonzero(np.r_[True, self.cell[1:] != self.cell[:-1]])
        self.ends = np.r_[starts[1:], cell.shape[0]] - 1  # each cell's last event
        self.first = np.repeat(starts, np.diff(np.r_[starts, cell.shape[0]]))  # each event's cell's first

    def before(self, values: np.ndarray) -> np.ndarray:
        """[events, ...] each sorted event's cell's sum of `values` (in sorted order) over its earlier
        events."""
        exclusive = np.cumsum(values, axis=0) - values
        return exclusive - exclusive[self.first]

    def totals(self, values: np.ndarray, before: np.ndarray | None = None) -> np.ndarray:
        """[cells, ...] each cell's sum of `values` (with `before`, their `before` if already taken)."""
        if before is None:
            before = self.before(values)
        return before[self.ends] + values[self.ends]


@dataclass
class Base:
    """The cells' state before a piece: records per class [cells, K], statistics of the numeric columns
    [cells, K, 3 * F] (counts, then sums, then squares) and tallies [cells, 2]."""

    classes: np.ndarray
    states: np.ndarray
    tally: np.ndarray

    @classmethod
    def of(cls, bayes: LeafBayes, keys: list[Key], k: int, width: int, columns: np.ndarray) -> Base:
        n = len(keys)
        classes = np.zeros((n, k), dtype=np.int64)
        states = np.zeros((n, k, 3 * columns.shape[0]), dtype=np.int64)
        tally = np.zeros((n, 2), dtype=np.int64)
        for i, key in enumerate(keys):
            if key in bayes.cells:
                classes[i], stats, tally[i] = bayes.stats(key, k, width)
                states[i] = stats[:, :, columns].transpose(1, 0, 2).reshape(k, -1)
        return cls(classes, states, tally)


class Sorted(NamedTuple):
    """A piece's events in `Running` order, the numeric codes only (`x` [events, F], 0: missing)."""

    x: np.ndarray
    target: np.ndarray
    label: np.ndarray
    k: np.ndarray
    proba_row: np.ndarray
    at_leaves: np.ndarray

    @classmethod
    def of(cls, events: Events, order: np.ndarray, width: int, columns: np.ndarray) -> Sorted:
        return cls(
            _pad(events.codes, width, 0)[order][:, columns],
            events.target[order],
            events.label[order],
            events.k[order],
            events.proba_row[order],
            events.at_leaves[order],
        )


def _replay_arrays(bayes: LeafBayes, events: Events, numeric: Sequence[int], proba: np.ndarray) -> None:
    uniques, cell = _cells(events.keys)
    keys = [tuple(v for v in row if v >= 0) for row in uniques.tolist()]
    if bayes.retired:  # a retired cell's rows take no part
        gone = np.array([key in bayes.retired for key in keys])
        if gone.any():
            events = events.only(~gone[cell])
            if events.k.shape[0] == 0:
                return
            uniques, cell = _cells(events.keys)
            keys = [tuple(v for v in row if v >= 0) for row in uniques.tolist()]
    old = [bayes.cells[key] for key in keys if key in bayes.cells]
    k_most = max([int(events.k.max()), *(c.shape[0] for c in old)])
    width = max([events.codes.shape[1], *(c.shape[1] for c in old)])
    columns = np.array([j for j in numeric if j < width], dtype=np.intp)  # (the only columns it learns)
    base = Base.of(bayes, keys, k_most, width, columns)
    running = Running(cell)
    e = Sorted.of(events, running.order, width, columns)

    learned = e.target >= 0
    one_hot = (learned[:, None] & (e.target[:, None] == np.arange(k_most))).astype(np.int64)
    brought = Brought(np.where(learned[:, None], e.x, 0), one_hot)
    f = columns.shape[0]
    classes = base.classes[running.cell] + running.before(one_hot)
    known = base.states[:, :, :f].sum(axis=1)[running.cell] + running.before(
        (brought.value > 0).astype(np.int64)
    )

    # the estimates of the rows learned or predicted (a prediction's, where it is served)
    tallied = learned & (e.k >= 2)
    servable = (e.proba_row >= 0) & (e.k >= 2) & e.at_leaves
    at = np.flatnonzero(tallied | servable)
    estimate, best = np.zeros((e.k.shape[0], k_most)), np.zeros(e.k.shape[0], dtype=np.int64)
    estimate[at], best[at], states = _estimates(
        bayes.bins, at, e, (e.x > 0) & (known > 0), classes, base, running, brought
    )

    # each learned row's tally, then the running tallies before each prediction tell where it serves
    right = np.zeros((e.k.shape[0], 2), dtype=np.int64)
    right[tallied, 0] = best[tallied] == e.target[tallied]
    right[tallied, 1] = e.label[tallied] == e.target[tallied]
    right_before = running.before(right)
    tally = base.tally[running.cell] + right_before
    # a cell retires at its first row whose tally leaves its naive Bayes `behind` the trees: its later
    # rows take no part (their estimates above are of no use)
    lead_after = tally[:, 0] + right[:, 0] - tally[:, 1] - right[:, 1]
    events_n = e.k.shape[0]
    retires = np.full(len(keys), events_n)
    falls = np.flatnonzero(tallied & (lead_after <= -bayes.behind))
    np.minimum.at(retires, running.cell[falls], falls)
    live = np.arange(events_n) <= retires[running.cell]
    served = np.flatnonzero(live & servable & (tally[:, 0] > tally[:, 1]))
    _serve(proba, e.proba_row[served], e.k[served], estimate[served])

    # the cells that learned: their statistics and tallies after the piece
    final_classes = base.classes + running.totals(one_hot)
    final_tally = base.tally + running.totals(right, right_before)
    for i in np.flatnonzero(retires < events_n).tolist():
        bayes.cells.pop(keys[i], None)
        bayes.retired.add(keys[i])
    touched = np.unique(running.cell[learned & (retires[running.cell] == events_n)])
    stats = np.zeros((touched.shape[0], 3, k_most, width), dtype=np.int64)  # (0 in other features' columns)
    stats[:, :, :, columns] = states[touched].reshape(-1, k_most, 3, f).transpose(0, 2, 1, 3)
    for i, t in enumerate(touched.tolist()):
        bayes.put(keys[t], final_classes[t], stats[i], (int(final_tally[t, 0]), int(final_tally[t, 1])))


def _cells(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The distinct rows of `keys` [events, trees] (sorted) and each event's among them: `np.unique`
    over rows, on one integer per row where the keys fit (a fifth of the replay's time otherwise)."""
    radix = keys.max(axis=0, initial=-1).astype(np.float64) + 2  # keys are -1 (padding) or node numbers
    if keys.shape[1] == 0 or float(np.prod(radix)) >= 2.0**62:
        uniques, cell = np.unique(keys, axis=0, return_inverse=True)
        return uniques, cell.reshape(-1)
    packed = np.zeros(keys.shape[0], dtype=np.int64)
    for t in range(keys.shape[1]):  # lexicographic: the first tree's node most significant
        packed = packed * int(radix[t]) + (keys[:, t] + 1)
    _, first, cell = np.unique(packed, return_index=True, return_inverse=True)
    return keys[first], cell.reshape(-1)


class Brought:
    """What the piece's learned events bring to each class's statistics of the numeric columns, per
    (sorted) event: `value`, the codes of the learned events (0 elsewhere), and their classes
    (`one_hot` [events, K])."""

    def __init__(self, value: np.ndarray, one_hot: np.ndarray) -> None:
        self.value, self.one_hot = value, one_hot

    def of(self, c: int) -> np.ndarray | None:
        """[events, 3 * F] what each event brings to class c's statistics (count, sum, square per
        column), or None if no event is of class c."""
        if not self.one_hot[:, c].any():
            return None
        mine = np.where(self.one_hot[:, c, None] > 0, self.value, 0)
        return np.concatenate([(mine > 0).astype(np.int64), mine, mine * mine], axis=1)


def _estimates(
    bins: int,
    at: np.ndarray,
    e: Sorted,
    present: np.ndarray,
    classes: np.ndarray,
    base: Base,
    running: Running,
    brought: Brought,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """[len(at), K] the estimates of sorted events `at` over their classes (0 beyond them) and
    [len(at)] their most probable classes: `LeafBayes._scores` on arrays, in its order of operations,
    then sgt.bayes_moments' normalisation; and, as each class's running statistics are at hand, every
    cell's statistics after the piece [cells, K, 3 * F]."""
    k_most = classes.shape[1]
    k = e.k[at]
    log_prior = log_priors(classes[at], k)
    xs, present_at, cells = e.x[at].T, present[at].T, running.cell[at]
    scores = np.empty((at.shape[0], k_most))
    final = base.states.copy()
    for c in range(k_most):
        states = base.states[cells, c]
        own = brought.of(c)
        if own is not None:
            before = running.before(own)
            states = states + before[at]
            final[:, c] += running.totals(own, before)
        mean, variance, log_variance = state_moments(states, bins, PSEUDO_WEIGHT)  # each [F, rows]
        z = xs - mean
        terms = -0.5 * (log_variance + z * z / variance)
        score = log_prior[:, c]
        for j in range(terms.shape[0]):
            score = score + np.where(present_at[j], terms[j], 0.0)
        scores[:, c] = score
    mine = np.arange(k_most)[None, :] < k[:, None]
    best = np.where(mine, scores, -np.inf).argmax(axis=1)  # (the earliest on ties, as list.index(max(...)))
    return normalised_joint(scores, k), best, final


def _serve(proba: np.ndarray, rows: np.ndarray, k: np.ndarray, estimate: np.ndarray) -> None:
    """`LeafBayes.served` on rows `rows` of `proba` over their `k` classes."""
    width = proba.shape[1]
    padded = np.zeros((rows.shape[0], width))
    padded[:, : min(width, estimate.shape[1])] = estimate[:, :width]
    mine = np.arange(width)[None, :] < k[:, None]
    proba[rows] = np.where(mine, (proba[rows] + padded) / 2, proba[rows])
