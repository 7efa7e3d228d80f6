"""Hierarchical smoothing of class probabilities on the trees' partitions (Hierarchical Gradient Smoothing).

Every node of a classifier's tree counts the classes of the records learned through it. A record
that reaches node l (a leaf, or a nominal branch without a child for its category) gets the estimate
of Zhang, Petitjean and Buntine (PAKDD 2020, Eq. 4)::

    theta_l,k = (n_l,k + sum_p alpha_p * n_p,k / n_p) / (n_l + sum_p alpha_p)

over the ancestors p of l, each with its own weight alpha_p, plus a virtual ancestor above the root
whose estimate is uniform (1 / K): the root alone is then a Laplace-like estimate, and a node that
has learned nothing falls back on its ancestors. An ancestor with no count yet takes no part.

The paper fits the weights by gradient descent on the leave-one-out log loss of the training set.
The streaming counterpart here is the log loss of each record as predicted just before it is learned
(its own count is not in yet): each learned record adds d loss / d log alpha_p to an accumulator of
every ancestor on its path, and every `STEP` learned records the log-weights take one AdaGrad step.
Steps fall at fixed record counts, so the weights, like the counts (integers), do not depend on how
a caller batched the records: `Smoother.run` cuts a batch where a step falls and treats each piece
with numpy; the one-record path does the same arithmetic on Python lists, in the same order (only +,
-, *, / of the same values, each rounded once), so both agree bit for bit.

A node keeps weight `ALPHA_INIT` until it becomes an internal node; it then starts from its parent's
weight (the root keeps `ALPHA_INIT`). A new child starts without counts. A class seen for the first
time adds a zero count to every node; a tree added for it starts with the class counts of every
record learned so far at its root.

The committee (a tree per class but one, each with its own partition) combines its trees' estimates
as independent evidence (naive Bayes over the leaves): p_k ~ prod_t theta_t,k / pi_k^(T-1), with pi
the Laplace-smoothed class frequencies. Measured on two multiclass streams this beats their mean.

``blend`` then treats the trees' own (softmax) probability q as one more ancestor with a weight
beta, fitted like the alphas on the blended log loss::

    p_k = (E * s_k + beta * q_k) / (E + beta)

with s the smoothed estimate and E its evidence, n_l + sum_p alpha_p (the mean over the committee).
A young leaf leans on the trees' estimate (which a split sets from the parent's statistics at once);
a leaf with many records on its own counts.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

from sgt.tree import Tree

__all__ = ["ALPHA_INIT", "BETA_INIT", "MODES", "STEP", "Smoother"]

#: how the classifier turns its trees into probabilities (see SGTClassifier's ``proba``)
MODES = ("blend", "hgs", "tree")
#: the weight of the uniform prior, of the root and of every node until it becomes internal
ALPHA_INIT = 1.0
#: the initial weight of the trees' own estimate in the blend (in records)
BETA_INIT = 30.0
#: learned records between two gradient steps of the weights
STEP = 256
#: AdaGrad learning rate of the log-weights
LEARNING_RATE = 0.3
#: bounds of the log-weights (exp stays finite and non-zero)
LOG_BOUNDS = (-12.0, 14.0)
_EPSILON = 1e-12


class TreeCounts:
    """The smoothing state of one tree: class counts, weights and their pending gradients, per node.

    Indexed by node id + 1; index 0 is the uniform prior above the root (a constant count of 1 per
    class, so that its estimate n_k / n is 1 / K through the same formula). Counts, weights and
    gradients live either in numpy arrays (the batch path) or in Python lists (the one-record path,
    where indexing numpy per element would cost more than the arithmetic); `use_arrays` and
    `use_lists` convert, values unchanged.
    """

    #: the arrays a saved model holds (everything else follows from the tree)
    SAVED = ("counts", "log_alpha", "alpha", "grad", "square")

    def __init__(self, n_classes: int, root_counts: Sequence[int]) -> None:
        self.counts = np.array([[1] * n_classes, list(root_counts)], dtype=np.int64)
        self.log_alpha = np.full(2, math.log(ALPHA_INIT))
        self.alpha = np.full(2, ALPHA_INIT)
        self.grad = np.zeros(2)
        self.square = np.zeros(2)
        self.lists: tuple[list[list[int]], list[float], list[float]] | None = None
        self.internal = np.array([True, False])  # the prior is always an ancestor
        self.n_splits = 0  # the tree's splits when its internal nodes were last taken in
        # ancestors of every node (column 0 the prior, the node itself at `position`), -1 padded
        self.anc = np.array([[0, -1], [0, 1]], dtype=np.int32)
        self.position = np.array([0, 1], dtype=np.int32)
        self.paths = [[0], [0, 1]]

    @classmethod
    def restore(cls, tree: Tree, n_classes: int, saved: dict[str, np.ndarray]) -> TreeCounts:
        """A state from its saved arrays, for `tree` (ValueError if they do not fit it)."""
        state = cls(n_classes, [0] * n_classes)
        size = tree.n_nodes + 1
        for name in cls.SAVED:
            shape = (size, n_classes) if name == "counts" else (size,)
            if saved[name].shape != shape:
                raise ValueError(f"smoothing array {name} has shape {saved[name].shape}, expected {shape}")
        if (saved["counts"] < 0).any() or (saved["counts"][0] != 1).any():
            raise ValueError("smoothing counts out of range")
        state._grow(tree, size)
        for name in cls.SAVED:
            setattr(state, name, saved[name].astype(getattr(state, name).dtype))
        state.internal = np.concatenate([[True], tree.feature[: tree.n_nodes] >= 0])
        state.n_splits = tree.n_splits
        return state

    @property
    def size(self) -> int:
        """Nodes taken in, plus the prior."""
        return len(self.paths)

    # -- representation ------------------------------------------------------------------------
    def nbytes(self) -> int:
        """Bytes of the state, as arrays: per node its counts, four floats and its path row."""
        return self.size * (8 * self.counts.shape[1] + 4 * 8 + 4 * self.anc.shape[1] + 4 + 1)

    def use_arrays(self) -> None:
        if self.lists is not None:
            counts, alpha, grad = self.lists
            self.counts = np.array(counts, dtype=np.int64)
            self.alpha, self.grad = np.array(alpha), np.array(grad)
            self.lists = None

    def use_lists(self) -> tuple[list[list[int]], list[float], list[float]]:
        if self.lists is None:
            self.lists = (self.counts.tolist(), self.alpha.tolist(), self.grad.tolist())
        return self.lists

    # -- structure -----------------------------------------------------------------------------
    def add_class(self) -> None:
        self.use_arrays()
        column = np.zeros((self.size, 1), dtype=np.int64)
        column[0] = 1
        self.counts = np.concatenate([self.counts, column], axis=1)

    def sync(self, tree: Tree) -> None:
        """Take in the tree's new nodes (no counts) and weight its newly internal nodes."""
        if tree.n_nodes + 1 > self.size:
            self._grow(tree, tree.n_nodes + 1)
        if tree.n_splits != self.n_splits:
            self.n_splits = tree.n_splits
            internal = np.concatenate([[True], tree.feature[: tree.n_nodes] >= 0])
            alpha = self.alpha if self.lists is None else self.lists[1]
            for index in np.flatnonzero(internal & ~self.internal).tolist():  # parents first
                parent = int(tree.parent[index - 1]) + 1
                if parent > 0:  # below the root: start from the parent's weight
                    self.log_alpha[index] = self.log_alpha[parent]
                    alpha[index] = alpha[parent]
            self.internal = internal

    def _grow(self, tree: Tree, n: int) -> None:
        """Take in nodes up to index n - 1: no counts, weight ALPHA_INIT, their paths."""
        old = self.size
        extra = n - old
        if extra <= 0:
            return
        k = self.counts.shape[1]
        if self.lists is None:
            self.counts = np.concatenate([self.counts, np.zeros((extra, k), np.int64)])
            self.alpha = np.concatenate([self.alpha, np.full(extra, ALPHA_INIT)])
            self.grad = np.concatenate([self.grad, np.zeros(extra)])
        else:
            counts, alpha, grad = self.lists
            counts.extend([0] * k for _ in range(extra))
            alpha.extend([ALPHA_INIT] * extra)
            grad.extend([0.0] * extra)
        self.log_alpha = np.concatenate([self.log_alpha, np.full(extra, math.log(ALPHA_INIT))])
        self.square = np.concatenate([self.square, np.zeros(extra)])
        self.internal = np.concatenate([self.internal, np.zeros(extra, dtype=bool)])
        parents = (tree.parent[old - 1 : n - 1] + 1).tolist()
        for index, parent in enumerate(parents, start=old):  # parents come before their children
            self.paths.append([*self.paths[parent], index])
        width = max(len(p) for p in self.paths[old:])
        anc = np.full((n, max(width, self.anc.shape[1])), -1, dtype=np.int32)
        anc[:old, : self.anc.shape[1]] = self.anc
        for index in range(old, n):
            anc[index, : len(self.paths[index])] = self.paths[index]
        self.anc = anc
        self.position = np.concatenate([self.position, [len(p) - 1 for p in self.paths[old:]]]).astype(
            np.int32
        )

    def step(self) -> None:
        """One AdaGrad step of the log-weights on the gradients accumulated since the last one."""
        self.use_arrays()
        moved = self.grad != 0.0
        if not moved.any():
            return
        g = self.grad[moved]
        self.square[moved] += g * g
        log_alpha = self.log_alpha[moved] - LEARNING_RATE * g / (np.sqrt(self.square[moved]) + _EPSILON)
        self.log_alpha[moved] = np.clip(log_alpha, *LOG_BOUNDS)
        self.alpha[moved] = np.exp(self.log_alpha[moved])
        self.grad[:] = 0.0


# -- one record: Python floats ---------------------------------------------------------------------
class _Estimate(NamedTuple):
    """One tree's estimate of one record, with what learning from it needs."""

    theta: list[float]
    numerator: list[float]
    denominator: float
    path: list[int]
    active: list[tuple[int, float, list[float]]]  # (index, alpha, estimate) of each ancestor that smooths


def _estimate_one(state: TreeCounts, node: int) -> _Estimate:
    """Eq. 4 for one record at `node`: ancestors root first, the arithmetic of `_estimate_block`.

    Reads the path's counts and weights from whichever representation is current.
    """
    path = state.paths[node + 1]
    if state.lists is None:
        rows, alphas = state.counts[path].tolist(), state.alpha[path].tolist()
    else:
        counts, alpha, _ = state.lists
        rows, alphas = [counts[i] for i in path], [alpha[i] for i in path]
    if len(rows[0]) == 2:
        return _estimate_two(path, rows, alphas)
    total = 0.0
    mixed = [0.0] * len(rows[0])
    active = []
    for j in range(len(path) - 1):
        row = rows[j]
        n = sum(row)
        if n > 0:
            w = alphas[j]
            total = total + w
            mle = [c / n for c in row]
            mixed = [a + w * m for a, m in zip(mixed, mle)]
            active.append((path[j], w, mle))
    leaf = rows[-1]
    denominator = sum(leaf) + total
    numerator = [c + a for c, a in zip(leaf, mixed)]
    return _Estimate([q / denominator for q in numerator], numerator, denominator, path, active)


def _estimate_two(path: list[int], rows: list[list[int]], alphas: list[float]) -> _Estimate:
    """`_estimate_one` for two classes, on scalars: the same operations in the same order."""
    total = m0 = m1 = 0.0
    active = []
    for j in range(len(path) - 1):
        c0, c1 = rows[j]
        n = c0 + c1
        if n > 0:
            w = alphas[j]
            total = total + w
            e0, e1 = c0 / n, c1 / n
            m0, m1 = m0 + w * e0, m1 + w * e1
            active.append((path[j], w, [e0, e1]))
    l0, l1 = rows[-1]
    denominator = (l0 + l1) + total
    q0, q1 = l0 + m0, l1 + m1
    return _Estimate([q0 / denominator, q1 / denominator], [q0, q1], denominator, path, active)


def _learn_one(state: TreeCounts, estimate: _Estimate, target: int) -> None:
    """Add d(log loss)/d(log alpha) of the record to its smoothing ancestors, then count it."""
    ty = estimate.theta[target]
    qy = estimate.numerator[target]
    if state.lists is None:  # the ancestors are distinct: one addition each, as in the loop below
        nodes = [i for i, _, _ in estimate.active]
        state.grad[nodes] += [w * (ty - mle[target]) / qy for _, w, mle in estimate.active]
        state.counts[estimate.path[1:], target] += 1
        return
    counts, _, grad = state.lists
    for index, w, mle in estimate.active:
        grad[index] = grad[index] + w * (ty - mle[target]) / qy
    for index in estimate.path[1:]:
        counts[index][target] += 1


def _mean_one(values: list[float]) -> float:
    total = values[0]
    for v in values[1:]:
        total = total + v
    return total / len(values) if len(values) > 1 else total


def _combine_one(thetas: list[list[float]], class_counts: list[int]) -> list[float]:
    """The committee's estimate: its trees' estimates as independent evidence (see the module doc)."""
    if len(thetas) == 1:
        return thetas[0]
    n = sum(class_counts) + len(class_counts)
    prior = [(c + 1) / n for c in class_counts]
    v = thetas[0]
    for theta in thetas[1:]:
        v = [a * b / q for a, b, q in zip(v, theta, prior, strict=True)]
    total = v[0]
    for a in v[1:]:
        total = total + a
    return [a / total for a in v]


# -- a block of rows: numpy ----------------------------------------------------------------------
@dataclass(frozen=True)
class _Block:
    """One tree's estimates of a block of rows, with what learning from them needs."""

    theta: np.ndarray  # [m, K]
    numerator: np.ndarray  # [m, K]
    denominator: np.ndarray  # [m]
    anc: np.ndarray  # [m, W] each row's path (-1 beyond its node)
    position: np.ndarray  # [m] column of the row's node in `anc`
    weights: np.ndarray  # [m, W] alpha of each ancestor that smooths, 0 elsewhere
    mle: np.ndarray  # [m, W, K] each path node's estimate (0 without counts)


def _estimate_block(state: TreeCounts, nodes: np.ndarray, targets: np.ndarray) -> _Block:
    """Eq. 4 for rows at `nodes`, each with the counts left by the rows before it in the block.

    `targets[i]`: row i's class, or -1 if it is only predicted. Counts are integers (exact in any
    order); the weighted sums are cumulative sums along the path, root first, which add the same
    terms in the same order as `_estimate_one` (a term of weight 0 adds +0.0, which changes nothing).
    """
    state.use_arrays()
    m, k = nodes.size, state.counts.shape[1]
    anc = state.anc[nodes + 1]  # [m, W], -1 past each row's node
    width = anc.shape[1]
    position = state.position[nodes + 1]
    keys = anc.ravel()  # row-major: rows in order, each row's path root first
    learned = np.repeat(targets >= 0, width) & (keys > 0)  # the prior's counts never move
    classes = np.repeat(targets, width)
    # each path node's counts from the earlier rows of the block: a stable sort keeps rows in order
    order = np.argsort(keys, kind="stable")
    sorted_keys = keys[order]
    starts = np.searchsorted(sorted_keys, sorted_keys, side="left")
    base = state.counts[np.maximum(keys, 0)]
    valid = (anc >= 0).astype(np.int64)
    counts = []
    for c in range(k):
        ones = (learned & (classes == c))[order].astype(np.int64)
        before = np.cumsum(ones) - ones
        before -= before[starts]
        earlier = np.empty_like(before)
        earlier[order] = before
        counts.append((base[:, c] + earlier).reshape(m, width) * valid)
    totals = counts[0].copy()
    for c in range(1, k):
        totals += counts[c]
    totals_f = totals.astype(np.float64)
    smooths = (np.arange(width)[None, :] < position[:, None]) & (totals > 0)
    weights = np.where(smooths, state.alpha[np.maximum(anc, 0)], 0.0)
    safe = np.maximum(totals_f, 1.0)
    mle = np.stack([count / safe for count in counts], axis=2)  # [m, W, K]
    total = np.cumsum(weights, axis=1)[:, -1]
    mixed = np.cumsum(weights[:, :, None] * mle, axis=1)[:, -1]
    at = np.arange(m)
    denominator = totals_f[at, position] + total
    leaf = np.stack([count[at, position] for count in counts], axis=1).astype(np.float64)
    numerator = leaf + mixed
    return _Block(numerator / denominator[:, None], numerator, denominator, anc, position, weights, mle)


def _learn_block(state: TreeCounts, block: _Block, learn: np.ndarray, targets: np.ndarray) -> None:
    """`_learn_one` for the learned rows of a block, rows in order, ancestors root first."""
    y = targets[learn]
    ty = block.theta[learn, y]
    qy = block.numerator[learn, y]
    mle_y = block.mle[learn][np.arange(learn.size), :, y]  # [rows, W]
    grads = block.weights[learn] * (ty[:, None] - mle_y) / qy[:, None]
    smooths = block.weights[learn] > 0.0
    np.add.at(state.grad, block.anc[learn][smooths], grads[smooths])  # in order, like the loop
    path = block.anc[learn]
    on_path = (np.arange(path.shape[1])[None, :] <= block.position[learn, None]) & (path > 0)
    flat = path[on_path].astype(np.int64) * state.counts.shape[1] + np.repeat(y, on_path.sum(axis=1))
    state.counts += np.bincount(flat, minlength=state.counts.size).reshape(state.counts.shape)


def _mean_block(values: list[np.ndarray]) -> np.ndarray:
    total = values[0]
    for v in values[1:]:
        total = total + v
    return total / len(values) if len(values) > 1 else total


def _combine_block(thetas: list[np.ndarray], class_counts: np.ndarray) -> np.ndarray:
    """`_combine_one` for a block; `class_counts[i]`: the counts row i finds."""
    if len(thetas) == 1:
        return thetas[0]
    prior = (class_counts + 1) / (class_counts.sum(axis=1) + class_counts.shape[1])[:, None]
    v = thetas[0]
    for theta in thetas[1:]:
        v = v * theta / prior
    total = v[:, 0]
    for j in range(1, v.shape[1]):
        total = total + v[:, j]
    return v / total[:, None]


# -- the committee ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class Probabilities:
    """What the smoothing predicts for rows: the smoothed estimate, and the blend (None if not asked)."""

    smoothed: Any
    blended: Any


class Smoother:
    """The smoothing state of a classifier's committee and the weight of its blend with the trees.

    Used through SGTClassifier (``proba="hgs"`` or ``"blend"``). `run` is the batch path; `predict_one`
    and `learn_one` the one-record path of the same computation. `prefer_arrays` (not model state:
    only how it is computed) makes the one-record path read and write the numpy arrays while a batch
    runs, so that its events need no conversion of the trees' counts to lists and back.
    """

    def __init__(self) -> None:
        self.trees: list[TreeCounts] = []
        self.class_counts: list[int] = []
        self.n_learned = 0
        self.log_beta = math.log(BETA_INIT)
        self.beta_grad = 0.0
        self.beta_square = 0.0
        self.prefer_arrays = False
        # the last record's estimates, for learning it right after predicting it (not model state)
        self._cache: tuple[tuple[Any, ...], list[_Estimate]] | None = None

    def sync(self, trees: Sequence[Tree], n_classes: int) -> None:
        """Follow the committee: new classes, new trees, new nodes."""
        if n_classes == len(self.class_counts) and len(trees) == len(self.trees):
            for state, tree in zip(self.trees, trees):
                if tree.n_nodes + 1 != len(state.paths) or tree.n_splits != state.n_splits:
                    state.sync(tree)
            return
        while len(self.class_counts) < n_classes:
            self.class_counts.append(0)
            for state in self.trees:
                state.add_class()
        while len(self.trees) < len(trees):
            self.trees.append(TreeCounts(n_classes, self.class_counts))
        for state, tree in zip(self.trees, trees, strict=True):
            state.sync(tree)

    def nbytes(self) -> int:
        return sum(state.nbytes() for state in self.trees)

    @property
    def beta(self) -> float:
        return math.exp(self.log_beta)

    def _one_record(self) -> None:
        """Outside a batch, the one-record path works on lists (converted once)."""
        if not self.prefer_arrays:
            for state in self.trees:
                state.use_lists()

    # -- one record ----------------------------------------------------------------------------
    def predict_one(self, nodes: Sequence[int], tree_proba: list[float] | None) -> Probabilities:
        """Probabilities of a record at `nodes` (one per tree); the blend with `tree_proba` if given."""
        self._one_record()
        estimates = self._estimates_one(nodes)
        smoothed = _combine_one([e.theta for e in estimates], self.class_counts)
        if tree_proba is None:
            return Probabilities(smoothed, None)
        e, beta = _mean_one([e.denominator for e in estimates]), self.beta
        total = e + beta
        return Probabilities(
            smoothed, [(e * s + beta * q) / total for s, q in zip(smoothed, tree_proba, strict=True)]
        )

    def learn_one(self, nodes: Sequence[int], tree_proba: list[float] | None, target: int) -> None:
        """Learn a record of class `target` at `nodes`; with `tree_proba`, the blend's weight too."""
        self._one_record()
        estimates = self._estimates_one(nodes)
        self._cache = None
        for state, estimate in zip(self.trees, estimates, strict=True):
            _learn_one(state, estimate, target)
        if estimates and tree_proba is not None:
            smoothed = _combine_one([e.theta for e in estimates], self.class_counts)
            e, beta = _mean_one([e.denominator for e in estimates]), self.beta
            total = e + beta
            p = (e * smoothed[target] + beta * tree_proba[target]) / total
            self.beta_grad = self.beta_grad + beta * (p - tree_proba[target]) / (total * p)
        self.class_counts[target] += 1
        self._count_learned(1)

    def _estimates_one(self, nodes: Sequence[int]) -> list[_Estimate]:
        """Every tree's estimate of a record at `nodes`; the same record twice in a row (predicted,
        then learned) is computed once: the key changes with anything learned or any new class."""
        key = (*nodes, self.n_learned, len(self.class_counts))
        if self._cache is not None and self._cache[0] == key:
            return self._cache[1]
        estimates = [_estimate_one(state, node) for state, node in zip(self.trees, nodes, strict=True)]
        self._cache = (key, estimates)
        return estimates

    # -- a block of rows -----------------------------------------------------------------------
    def run(
        self, nodes: Sequence[np.ndarray], tree_proba: np.ndarray | None, targets: np.ndarray
    ) -> Probabilities:
        """Predict rows in order and learn those with a target >= 0, while the trees do not change.

        `nodes[t]`: each row's node in tree t; `tree_proba`: [rows, K] the trees' probabilities, for
        the blend (None: no blend). Returns [rows, K] arrays, each row as predicted before it is
        learned. The rows are cut where a gradient step falls, where the one-record path steps.
        """
        m, k = targets.size, len(self.class_counts)
        if self.n_learned % STEP + m < STEP:  # no step falls in the batch
            return self._run_block(nodes, tree_proba, targets)
        smoothed = np.zeros((m, k))
        blended = None if tree_proba is None else np.zeros((m, k))
        learned = np.cumsum(targets >= 0)
        start = 0
        while start < m:
            done = int(learned[start - 1]) if start else 0
            end = min(m, int(np.searchsorted(learned, done + STEP - self.n_learned % STEP)) + 1)
            rows = slice(start, end)
            out = self._run_block(
                [n[rows] for n in nodes], None if tree_proba is None else tree_proba[rows], targets[rows]
            )
            smoothed[rows] = out.smoothed
            if blended is not None:
                blended[rows] = out.blended
            start = end
        return Probabilities(smoothed, blended)

    def _run_block(
        self, nodes: Sequence[np.ndarray], tree_proba: np.ndarray | None, targets: np.ndarray
    ) -> Probabilities:
        m, k = targets.size, len(self.class_counts)
        learn = np.flatnonzero(targets >= 0)
        blocks = [_estimate_block(state, at, targets) for state, at in zip(self.trees, nodes, strict=True)]
        for state, block in zip(self.trees, blocks, strict=True):
            if learn.size:
                _learn_block(state, block, learn, targets)
        smoothed = np.zeros((m, k))
        blended = None
        if blocks:
            thetas = [b.theta for b in blocks]
            smoothed = (
                thetas[0] if len(blocks) == 1 else _combine_block(thetas, self._class_counts_before(targets))
            )
            if tree_proba is not None:
                e, beta = _mean_block([b.denominator for b in blocks]), self.beta
                total = e + beta
                blended = (e[:, None] * smoothed + beta * tree_proba) / total[:, None]
                if learn.size:
                    y = targets[learn]
                    p, q = blended[learn, y], tree_proba[learn, y]
                    terms = beta * (p - q) / (total[learn] * p)
                    self.beta_grad = float(np.cumsum(np.concatenate([[self.beta_grad], terms]))[-1])
        if learn.size:
            added = np.bincount(targets[learn], minlength=k).tolist()
            self.class_counts = [a + b for a, b in zip(self.class_counts, added, strict=True)]
        self._count_learned(int(learn.size))
        return Probabilities(smoothed, blended)

    def _class_counts_before(self, targets: np.ndarray) -> np.ndarray:
        """[rows, K] the class counts each row of a block finds (earlier rows included)."""
        ones = np.zeros((targets.size, len(self.class_counts)), dtype=np.int64)
        learned = np.flatnonzero(targets >= 0)
        ones[learned, targets[learned]] = 1
        return np.array(self.class_counts, dtype=np.int64)[None, :] + np.cumsum(ones, axis=0) - ones

    # -- gradient steps ------------------------------------------------------------------------
    def _count_learned(self, n: int) -> None:
        before = self.n_learned
        self.n_learned += n
        if self.n_learned // STEP > before // STEP:
            for state in self.trees:
                state.step()
            if self.beta_grad != 0.0:
                g = self.beta_grad
                self.beta_square += g * g
                log_beta = self.log_beta - LEARNING_RATE * g / (math.sqrt(self.beta_square) + _EPSILON)
                self.log_beta = min(LOG_BOUNDS[1], max(LOG_BOUNDS[0], log_beta))
                self.beta_grad = 0.0

    # -- serialisation ---------------------------------------------------------------------------
    def state(self) -> dict[str, Any]:
        """The scalars, JSON-safe (a float's repr reads back to the same bits)."""
        return {
            "class_counts": list(self.class_counts),
            "n_learned": self.n_learned,
            "log_beta": self.log_beta,
            "beta_grad": self.beta_grad,
            "beta_square": self.beta_square,
        }

    def arrays(self) -> list[tuple[str, np.ndarray]]:
        """The per-node arrays of every tree, named ``s<tree>.<array>``."""
        out = []
        for t, state in enumerate(self.trees):
            state.use_arrays()
            out += [(f"s{t}.{name}", getattr(state, name)) for name in TreeCounts.SAVED]
        return out

    @classmethod
    def restore(
        cls, state: dict[str, Any], arrays: dict[str, np.ndarray], trees: Sequence[Tree], n_classes: int
    ) -> Smoother:
        """Inverse of `state` and `arrays` for a committee of `trees` (ValueError if inconsistent)."""
        smoother = cls()
        smoother.class_counts = [int(c) for c in state["class_counts"]]
        if len(smoother.class_counts) != n_classes or min(smoother.class_counts, default=0) < 0:
            raise ValueError(
                f"smoothing class counts {state['class_counts']!r} do not fit {n_classes} classes"
            )
        smoother.n_learned = int(state["n_learned"])
        smoother.log_beta = float(state["log_beta"])
        smoother.beta_grad = float(state["beta_grad"])
        smoother.beta_square = float(state["beta_square"])
        for t, tree in enumerate(trees):
            saved = {name: arrays[f"s{t}.{name}"] for name in TreeCounts.SAVED}
            smoother.trees.append(TreeCounts.restore(tree, n_classes, saved))
        return smoother
