"""One Stochastic Gradient Tree, stored in flat numpy arrays.

Nodes live in parallel arrays indexed by node id (split feature, threshold code, children, value,
depth, parent, leaf slot). Nominal branches keep a lookup table from category code to child.

Each leaf owns a *slot* of learning state:

- `stats[slot]`: split statistics, one row of six numbers (see sgt.stats) per feature and code:
  the `Layout` gives each feature a block of columns (column 0 of a block: missing values). Each
  slot's statistics are an array of their own, made with the slot: a growing tree copies none of
  them, and the rows of bins no instance reaches are never written, so their memory pages are never
  allocated (most of a multi-output leaf's 150 KB, and on a 2-core VM the page faults of copying and
  zeroing them were about a quarter of a 5-class boosted classifier's time);
- `total[slot]`: the statistics of all instances since the leaf's last reset (the paper's U);
- a pending block of at most `block[slot] - 1` instances (their codes, g and h) not yet merged.

Pending instances are merged into the statistics only when the leaf attempts a split, one block of exactly
`block[slot]` instances at a time (paper, section 3.3: the attempt happens every grace_period instances). A
new leaf's first block holds `grace_start * 2^depth` instances and each attempt that leaves it a leaf
doubles it, up to `grace_period`: a young tree moves its values and makes its first splits after a handful
of records instead of a full grace period, an old leaf attempts as the paper's does, and deep leaves (most
of them) add few attempts, which cost time. The block boundaries are therefore fixed by the algorithm, not
by how a caller batched its records, which makes every learning path give bit-identical statistics.

The attempt (paper section 3, with the conventions of the authors' public code):
evaluate "update the leaf value only" and the best split of every feature, take the candidate with
the lowest penalised mean loss change (the null candidate wins ties, then the earlier feature), and
apply it iff its F-test gives p < delta and its mean is negative. A value update moves the leaf by
its delta and resets its statistics; a split gives each child the parent's value plus its delta.

A memory budget (`Tree.cap`, bytes, set by the estimator; see "Memory budget" below) makes the least
promising leaves *inactive*: their split statistics are freed and they never split again, but they
still predict, take their blocks and update their value and linear term (an adaptive leaf its choice
too: see "Memory budget").
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

from sgt import kernels
from sgt.features import CODE_DTYPE, FeatureSpace, Regrid
from sgt.serialization import NamedArray, SerializationError, expect_shape
from sgt.split import (
    Candidate,
    best_nominal,
    best_numeric_compiled,
    best_numeric_leaves,
    best_numeric_planes,
    f_test,
    null_candidate,
)
from sgt.stats import WIDTH, N, block_stats, merge

__all__ = ["NODE_ARRAYS", "Layout", "LeafInputs", "Params", "Tree", "leaf_inputs_of"]

NO_NODE = -1
_LARGEST = 1e300  # an adaptive leaf's tally stays within +-this (see Tree._record)
#: the per-node arrays, indexed by node id
NODE_ARRAYS = (
    "feature",
    "threshold",
    "left",
    "right",
    "table",
    "missing",
    "value",
    "depth",
    "parent",
    "slot",
)
#: an adaptive tree's per-node arrays (see Tree._choose)
ADAPTIVE_ARRAYS = ("anchor", "tally", "serving")
INITIAL_PENDING_ROWS = 64
# how the memory budget holds a split: with active children, or inactive ones (see Tree._room_for_split)
ACTIVE, INACTIVE = "active", "inactive"
# the first prefix Tree.first_full searches for a fill (then 4x longer ones)
FIRST_FULL_WINDOW = 256


@dataclass(frozen=True)
class Params:
    """The hyperparameters a tree needs (validated by the estimator)."""

    delta: float
    grace_period: int
    lambda_: float
    gamma: float
    max_depth: int | None
    grace_start: int | None = None  # a new leaf's first block; None: grace_period (the paper's)
    # "constant", "linear" (a linear term per leaf, see Tree.predict_rows) or "adaptive" (a linear term
    # that each leaf serves only while it predicts better than the leaf's constant: Tree._choose)
    leaf_model: str = "constant"
    linear_lambda: float = 0.01  # L2 regularisation of the linear term's Newton steps
    linear_steps: bool = True  # whether a linear leaf's attempts step its linear term (else it stays)
    # None, or t: an attempt drops a linear leaf's term when its block's loss is significantly lower
    # without it (a t statistic below -t; see Tree._newton_linear and _drop_changes)
    linear_gate: float | None = None
    # "adaptive": the weight each attempt keeps of a leaf's tally of its linear term's loss change (the
    # blocks before it fade by this factor; see Tree._choose). Of 0.25, 0.5 and 0.9, 0.5 (BENCHMARKS.md)
    leaf_fading: float = 0.5


class Layout:
    """Where each feature's split statistics live in a slot, derived from a FeatureSpace."""

    def __init__(self, space: FeatureSpace) -> None:
        self.widths = space.widths()
        self.offsets = np.concatenate([[0], np.cumsum(self.widths)]).astype(np.intp)
        self.n_columns = int(self.offsets[-1])
        self.n_features = len(self.widths)
        self.bins = space.bins
        self.numeric = np.array([j for j in range(self.n_features) if not space.is_nominal(j)], dtype=np.intp)
        self.nominal = [j for j in range(self.n_features) if space.is_nominal(j)]
        self.numeric_columns = (self.offsets[self.numeric][:, None] + np.arange(self.bins + 1)).astype(
            np.intp
        )
        # a linear leaf's input of each numeric code 0..bins (leaf_inputs by table lookup), also as
        # Python floats for the one-record path
        self.inputs = leaf_inputs(np.arange(self.bins + 1), self.bins)
        self.input_list: list[float] = self.inputs.tolist()
        self.numeric_list: list[int] = self.numeric.tolist()
        # a linear leaf's Hessian is symmetric: its Newton step sums the products of the pairs
        # i <= j of numeric features only, and `pair_of[i, j]` finds either order's pair
        first, second = np.triu_indices(self.numeric.size)
        self.pairs = (first, second)
        self.pair_of = np.zeros((self.numeric.size, self.numeric.size), dtype=np.intp)
        self.pair_of[first, second] = self.pair_of[second, first] = np.arange(first.size)

    def numeric_within(self, width: int) -> np.ndarray:
        """The numeric features among the first `width` (codes of an older, narrower layout)."""
        return self.numeric[self.numeric < width]


class LeafInputs(NamedTuple):
    """A batch's linear-leaf inputs, computed once for every tree (and every member of an ensemble)."""

    columns: np.ndarray  # the numeric features the codes hold, in layout order
    values: np.ndarray  # [rows, columns]: each row's input of those features (Layout.inputs)
    every_column: bool  # columns are all the layout's features, 0, 1, ...: no selection needed


def leaf_inputs_of(layout: Layout, codes: np.ndarray) -> LeafInputs:
    """The inputs a linear leaf multiplies its weights by, for every row of `codes` (codes of an older,
    narrower layout hold fewer features)."""
    columns = layout.numeric_within(codes.shape[1])
    every = columns.size == layout.n_features
    return LeafInputs(columns, layout.inputs[codes if every else codes[:, columns]], every)


class Tree:
    """A single SGT: nodes, leaf slots and the split attempt. Used through the estimators."""

    #: raw scores per record (sgt.multioutput.MultiOutputTree has several)
    n_outputs = 1

    def __init__(self, params: Params, layout: Layout, root_value: float = 0.0) -> None:
        out = self._output_axes()
        self.params = params
        self.layout = layout
        self.n_splits = 0
        self.n_updates = 0
        # nodes
        self.n_nodes = 0
        self.feature = np.empty(0, dtype=np.int32)
        self.threshold = np.empty(0, dtype=np.int32)
        self.left = np.empty(0, dtype=np.int32)
        self.right = np.empty(0, dtype=np.int32)
        self.table = np.empty(0, dtype=np.int32)
        self.missing = np.empty(0, dtype=np.int32)
        self.value = np.empty((0, *out), dtype=np.float64)
        self.depth = np.empty(0, dtype=np.int32)
        self.parent = np.empty(0, dtype=np.int32)
        self.slot = np.empty(0, dtype=np.int32)
        self.tables: list[np.ndarray] = []
        # linear leaves: one weight per feature and node (numeric features only; see leaf_inputs)
        self.linear = params.leaf_model in ("linear", "adaptive")
        self.weights = np.zeros((0, *out, layout.n_features))
        # adaptive leaves (see _choose): a leaf serves its linear term (serving 1) or its constant, value +
        # anchor (serving 0); each attempt's act serves the linear term next iff the tally is negative
        self.adaptive = params.leaf_model == "adaptive"
        self.anchor = np.zeros(0)
        self.tally = np.zeros(0)
        self.serving = np.zeros(0, dtype=np.int32)
        self._mirror: tuple[list[Any], ...] | None = None
        # leaf slots
        self.n_slots = 0
        self.slot_node = np.empty(0, dtype=np.int32)
        self.stats: list[np.ndarray] = []
        self.total = np.zeros((0, *out, WIDTH))
        self.pending_n = np.zeros(0, dtype=np.int64)
        self.block = np.zeros(0, dtype=np.int64)  # instances of the slot's next block
        # the memory budget (see `fit_budget`): whether a slot gathers split statistics, and how
        # promising its leaf is (the loss reduction of its best split at its last attempt; inf before it)
        self.active = np.zeros(0, dtype=bool)
        self.promise = np.zeros(0)
        self.cap: int | None = None  # bytes this tree may take (None: unbounded); set by the estimator
        # pending rows grow on demand up to grace_period (a large grace period costs memory only
        # when leaves actually hold that many instances)
        rows = min(params.grace_period, INITIAL_PENDING_ROWS)
        self.pending_codes = np.zeros((0, rows, layout.n_features), dtype=CODE_DTYPE)
        self.pending_g = np.zeros((0, rows, *out))
        self.pending_h = np.zeros((0, rows, *out))
        self._new_leaf(parent=NO_NODE, value=root_value, depth=0)

    def _output_axes(self) -> tuple[int, ...]:
        """The axes values, linear terms, statistics and gradients have per output: none for one."""
        return ()

    def merged_count(self, slot: int) -> float:
        """Instances merged into a slot's statistics since its last reset."""
        return float(self.total[slot, N])

    # -- structure -----------------------------------------------------------------------------
    def _new_leaf(self, parent: int, value: Any, depth: int, slot: int | None = None) -> int:
        self._mirror = None  # the structure changes: rebuild the routing mirror when next needed
        node = self.n_nodes
        if node == self.feature.size:
            self._grow_nodes(max(8, 2 * node))
        self.n_nodes += 1
        self.feature[node] = -1
        self.threshold[node] = 0
        self.left[node] = self.right[node] = self.missing[node] = NO_NODE
        self.table[node] = -1
        self.value[node] = value
        self.depth[node] = depth
        self.parent[node] = parent
        if self.linear:  # a new leaf starts from its parent's model
            self.weights[node] = self.weights[parent] if parent != NO_NODE else 0.0
        if self.adaptive:  # and its choice
            self.anchor[node] = self.anchor[parent] if parent != NO_NODE else 0.0
            self.tally[node] = self.tally[parent] if parent != NO_NODE else 0.0
            self.serving[node] = self.serving[parent] if parent != NO_NODE else 0
        if slot is None:
            slot = self._new_slot()
        else:
            self._reset_slot(slot)
        self.block[slot] = self._first_block(depth)
        self.promise[slot] = math.inf  # not yet attempted: never the first to be made inactive
        self.slot[node] = slot
        self.slot_node[slot] = node
        return node

    def _first_block(self, depth: int) -> int:
        """A new leaf's first block: grace_start at the root, doubling with depth, at most grace_period."""
        grace = self.params.grace_period
        start = self.params.grace_start or grace
        return grace if start << min(depth, 40) >= grace else start << depth

    def _grow_nodes(self, capacity: int) -> None:
        for name in NODE_ARRAYS:
            setattr(self, name, _grow(getattr(self, name), capacity))
        if self.linear:
            self.weights = _grow(self.weights, capacity)
        if self.adaptive:
            self.anchor = _grow(self.anchor, capacity)
            self.tally = _grow(self.tally, capacity)
            self.serving = _grow(self.serving, capacity)

    def _new_slot(self) -> int:
        slot = self.n_slots
        if slot == self.total.shape[0]:
            # doubling, as the node arrays do (the statistics, each slot's own array, are not copied).
            # The spare slots cost memory only: `nbytes` and the saved state count the live ones
            capacity = max(4, 2 * slot)
            self.slot_node = _grow(self.slot_node, capacity)
            self.total = _grow(self.total, capacity)
            self.pending_n = _grow(self.pending_n, capacity)
            self.block = _grow(self.block, capacity)
            self.active = _grow(self.active, capacity)
            self.promise = _grow(self.promise, capacity)
            self.pending_codes = _grow(self.pending_codes, capacity)
            self.pending_g = _grow(self.pending_g, capacity)
            self.pending_h = _grow(self.pending_h, capacity)
        self.n_slots += 1
        self.active[slot] = True
        self.stats.append(self._new_stats())  # (the spare rows of total and pending_n are zero already)
        return slot

    def _new_stats(self, layout: Layout | None = None) -> np.ndarray:
        """A slot's statistics before any instance (in `layout`, by default the tree's): fresh zeros
        rather than zeros written, which would allocate every page of them."""
        columns = (layout or self.layout).n_columns
        return np.zeros((columns, *self._output_axes(), WIDTH))

    def reserve_pending(self, rows: int) -> None:
        """Make room for `rows` pending instances per leaf (doubling, at most grace_period)."""
        capacity = self.pending_g.shape[1]
        if rows <= capacity:
            return
        new = min(self.params.grace_period, max(rows, 2 * capacity))
        for name in ("pending_codes", "pending_g", "pending_h"):
            old = getattr(self, name)
            grown = np.zeros((old.shape[0], new, *old.shape[2:]), dtype=old.dtype)
            grown[:, :capacity] = old
            setattr(self, name, grown)

    def _reset_slot(self, slot: int) -> None:
        # (not filled with zeros: see _new_slot; an inactive slot keeps none)
        self.stats[slot] = self._new_stats() if self.active[slot] else self._no_stats()
        self.total[slot] = 0.0
        self.pending_n[slot] = 0

    def relayout(self, layout: Layout) -> None:
        """Adopt a new layout after features or categories were added.

        Existing columns move to their new place. A feature new to a leaf gets all the leaf's
        merged instances in its "missing" column, and code 0 for its pending instances, so every
        feature block keeps summarising every instance of the leaf.
        """
        old = self.layout
        stats = [self._new_stats(layout) if on else self._no_stats() for on in self.active[: self.n_slots]]
        for slot, (held, moved) in enumerate(zip(self.stats, stats)):
            if not self.active[slot]:
                continue
            for j in range(layout.n_features):
                start = int(layout.offsets[j])
                if j < old.n_features:
                    width = old.widths[j]
                    moved[start : start + width] = held[old.offsets[j] : old.offsets[j] + width]
                else:
                    moved[start] = self.total[slot]
        codes = np.zeros((*self.pending_codes.shape[:2], layout.n_features), dtype=CODE_DTYPE)
        codes[:, :, : old.n_features] = self.pending_codes
        self.stats, self.pending_codes, self.layout = stats, codes, layout
        if self.linear:
            weights = np.zeros((*self.weights.shape[:-1], layout.n_features))
            weights[..., : old.n_features] = self.weights
            self.weights = weights

    def regrid(self, regrid: Regrid) -> None:
        """Carry numeric `feature` over to its grown grid (see sgt.features.Regrid).

        Each leaf's bins that now share a bin merge, left to right (Chan's pairwise update); pending
        codes are mapped; a threshold on an edge the new grid keeps stays on it, one inside a new bin
        moves to the edge on the side holding more of that bin's old bins (ties: right edge, the bin
        goes left).
        """
        feature, mapping = regrid.feature, regrid.mapping
        bins = self.layout.bins
        columns = slice(int(self.layout.offsets[feature]) + 1, int(self.layout.offsets[feature]) + 1 + bins)
        held_by = [held for held, on in zip(self.stats, self.active.tolist()) if on]  # (inactive: none)
        if held_by:
            old = np.stack([held[columns] for held in held_by])  # [slots, bins, ...]
            new = np.zeros_like(old)
            target = mapping[1:].astype(np.intp) - 1
            position = np.arange(bins) - np.searchsorted(target, target, side="left")
            for p in range(int(position.max()) + 1):
                moved = np.flatnonzero(position == p)
                new[:, target[moved]] = merge(new[:, target[moved]], old[:, moved])
            for held, rows in zip(held_by, new):
                held[columns] = rows
        codes = self.pending_codes[: self.n_slots, :, feature]
        codes[...] = mapping[codes]
        nodes = np.flatnonzero((self.feature[: self.n_nodes] == feature) & (self.table[: self.n_nodes] < 0))
        for node in nodes.tolist():
            self.threshold[node] = _regridded_threshold(int(self.threshold[node]), mapping)
        if self.linear:
            self._regrid_weights(regrid)
        self._mirror = None

    def _regrid_weights(self, regrid: Regrid) -> None:
        """Re-express every node's linear term in `regrid.feature` on the new grid.

        The input is about u - 1/2 with u = (x - lo) / (hi - lo) (see leaf_inputs). With u_old =
        u_new S'/S + (lo' - lo)/S, w (u_old - 1/2) = w S'/S (u_new - 1/2) + w (S'/(2S) + (lo' - lo)/S - 1/2).
        From a single value (S = 0) every learned input was the same: the term moves into the value.
        So it does from a range too narrow for the new one to be measured in its width (S'/S beyond the
        float range: 0 and 2.2e-308 followed by 4), where S'/S would make every weight, zero included,
        infinite or NaN.
        """
        j, n = regrid.feature, self.n_nodes
        (lo, hi), (new_lo, new_hi) = regrid.old_range, regrid.new_range
        w = self.weights[:n, ..., j]
        span, new_span = hi - lo, new_hi - new_lo
        scale = new_span / span if hi != lo else math.inf
        if not math.isfinite(scale):
            shift = w * _input(1, self.layout.bins)
            self.weights[:n, ..., j] = 0.0
        else:
            shift = w * (0.5 * new_span / span + (new_lo - lo) / span - 0.5)
            self.weights[:n, ..., j] = w * scale
        self.value[:n] += shift
        if self.adaptive:  # the constant, value + anchor, stays where it was (up to rounding)
            self.anchor[:n] -= shift

    # -- prediction ----------------------------------------------------------------------------
    def predict_rows(self, nodes: np.ndarray, inputs: LeafInputs, first: int = 0) -> np.ndarray:
        """The tree's raw score of rows first, first + 1, ... of `inputs` at `nodes`: the value, plus
        the linear term if any.

        The linear term is summed feature by feature in layout order, as `predict_one` sums it. The
        inputs are computed once per batch (`leaf_inputs_of`) and shared by every tree that predicts it.
        """
        if not self.linear:
            return self.value[nodes]
        if not inputs.columns.size:
            return self._served(nodes, self.value[nodes])
        if kernels.ENABLED and self.n_outputs == 1:
            out = kernels.predict_linear(  # (the kernel's output axis: one here)
                nodes, self.value[:, None], self.weights[:, None], inputs.columns, inputs.values, first
            )[0]
            return self._served(nodes, out)
        out = self.value[nodes]
        weights = self.weights[nodes]
        if not inputs.every_column:
            weights = weights[:, inputs.columns]
        # the value and each feature's term, one row each, summed down the rows in that order
        terms = np.empty((1 + inputs.columns.size, out.size))
        terms[0] = out
        np.multiply(weights.T, inputs.values[first : first + out.size].T, out=terms[1:])
        return self._served(nodes, _sums_in_order(terms))

    def _served(self, nodes: np.ndarray, linear: np.ndarray) -> np.ndarray:
        """The rows' raw scores: `linear` (their linear predictions), but value + anchor at the nodes
        of an adaptive tree that serve their constant."""
        if not self.adaptive:
            return linear
        constant = self.serving[nodes] == 0
        if constant.any():
            at = nodes[constant]
            linear[constant] = self.value[at] + self.anchor[at]
        return linear

    def predict_outputs(self, nodes: np.ndarray, inputs: LeafInputs, first: int = 0) -> np.ndarray:
        """`predict_rows` as [outputs, rows] (what an estimator with multi-output trees stacks)."""
        return self.predict_rows(nodes, inputs, first)[None]

    def predict_outputs_one(self, node: int, codes: Sequence[int] | np.ndarray) -> list[float]:
        """`predict_one` as a list of the outputs' raw scores."""
        return [self.predict_one(node, codes)]

    def predict_one(self, node: int, codes: Sequence[int] | np.ndarray) -> float:
        """`predict_rows` for one row, in Python floats (the same operations in the same order)."""
        out = float(self.value[node])
        if not self.linear:
            return out
        if self.adaptive and not self.serving[node]:
            return out + float(self.anchor[node])
        inputs, weights, n = self.layout.input_list, self.weights[node].tolist(), len(codes)
        for j in self.layout.numeric_list:
            if j < n:
                out = out + weights[j] * inputs[int(codes[j])]
        return out

    # -- routing -------------------------------------------------------------------------------
    def route(self, codes: np.ndarray, start: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Node reached by each row of `codes`, moving all rows one level per step.

        Returns (node, stopped): `stopped[i]` means row i reached a nominal branch that has no child
        for its category; it stays at that branch, whose value is its prediction.
        """
        n = codes.shape[0]
        node = np.zeros(n, dtype=np.int32) if start is None else start.astype(np.int32, copy=True)
        stopped = np.zeros(n, dtype=bool)
        if kernels.ENABLED and not self.tables:  # no nominal branch: no row can stop on the way
            arrays = (self.feature, self.threshold, self.left, self.right, self.missing)
            return kernels.route_numeric(codes, node, *arrays), stopped
        active = np.flatnonzero(self.feature[node] >= 0)
        while active.size:
            at = node[active]
            code = codes[active, self.feature[at]].astype(np.int64)
            nxt = np.where(code <= self.threshold[at], self.left[at], self.right[at])
            nominal = self.table[at] >= 0
            if nominal.any():
                for k in np.unique(self.table[at][nominal]):
                    rows = np.flatnonzero(self.table[at] == k)
                    lookup = self.tables[k]
                    c = code[rows]
                    nxt[rows] = np.where(c < lookup.size, lookup[np.minimum(c, lookup.size - 1)], NO_NODE)
            nxt = np.where(code == 0, self.missing[at], nxt)
            stuck = nxt == NO_NODE
            stopped[active[stuck]] = True
            nxt = np.where(stuck, at, nxt)
            node[active] = nxt
            active = active[~stuck & (self.feature[nxt] >= 0)]
        return node, stopped

    def route_one(self, codes: Sequence[int] | np.ndarray) -> tuple[int, bool]:
        """`route` for a single row, on plain-list mirrors of the node arrays (no numpy per level)."""
        if self._mirror is None:
            n = self.n_nodes
            self._mirror = (
                self.feature[:n].tolist(),
                self.threshold[:n].tolist(),
                self.left[:n].tolist(),
                self.right[:n].tolist(),
                self.missing[:n].tolist(),
                self.table[:n].tolist(),
                [t.tolist() for t in self.tables],
            )
        feature, threshold, left, right, missing, table, tables = self._mirror
        node = 0
        while feature[node] >= 0:
            code = int(codes[feature[node]])
            if code == 0:
                nxt = missing[node]
            elif table[node] >= 0:
                lookup = tables[table[node]]
                nxt = lookup[code] if code < len(lookup) else NO_NODE
            else:
                nxt = left[node] if code <= threshold[node] else right[node]
            if nxt == NO_NODE:
                return node, True
            node = nxt
        return node, False

    def add_category_child(self, branch: int, code: int) -> int:
        """A leaf for a category first learned at a nominal branch; it starts at the branch's value."""
        lookup = self.tables[self.table[branch]]
        if code >= lookup.size:  # exactly as long as needed, for the reason given in `_split`
            grown = np.full(code + 1, NO_NODE, dtype=np.int32)
            grown[: lookup.size] = lookup
            self.tables[self.table[branch]] = lookup = grown
        child = self._new_leaf(
            parent=branch, value=self.value[branch].copy(), depth=int(self.depth[branch]) + 1
        )
        lookup[code] = child
        self.fit_budget()
        return child

    # -- learning ------------------------------------------------------------------------------
    def append(
        self,
        nodes: np.ndarray,
        codes: np.ndarray,
        g: np.ndarray,
        h: np.ndarray,
        rank: np.ndarray | None = None,
    ) -> None:
        """Add instances (in order) to their leaves' pending blocks; none may fill a block.

        `rank`: each instance's place among the given instances of its leaf (0, 1, ...), where the
        caller knows it already (sgt.leafwise ranks its rows by node); computed here otherwise."""
        if kernels.ENABLED and rank is not None and g.ndim == 1:
            arrays = (nodes, codes, g, h, rank, self.slot, self.pending_n)
            if not kernels.append_rows(*arrays, self.pending_codes, self.pending_g, self.pending_h):
                self.reserve_pending(int((self.pending_n[self.slot[nodes]] + rank).max()) + 1)
                kernels.append_rows(*arrays, self.pending_codes, self.pending_g, self.pending_h)
            return
        slots = self.slot[nodes]
        if rank is None:
            order = np.argsort(slots, kind="stable")
            sorted_slots = slots[order]
            first = np.searchsorted(sorted_slots, sorted_slots, side="left")
            rank = np.empty_like(order)
            rank[order] = np.arange(order.size) - first
        position = self.pending_n[slots] + rank
        self.reserve_pending(int(position.max()) + 1 if position.size else 0)
        self.pending_codes[slots, position, : codes.shape[1]] = codes
        self.pending_g[slots, position] = g
        self.pending_h[slots, position] = h
        np.add.at(self.pending_n, slots, 1)

    def first_full(self, nodes: np.ndarray) -> int:
        """Index of the first instance that would fill its leaf's pending block, or len(nodes).

        Whether instance i fills its block depends only on instances 0..i, so a prefix that holds a
        fill holds the first one. The search looks at growing prefixes: the next fill is usually a
        few dozen instances away, and sorting a short prefix costs far less than sorting them all.
        """
        size = nodes.size
        if size == 0:
            return 0
        slots = self.slot[nodes]
        need = self.block[slots] - self.pending_n[slots]
        if size < need.min():
            return size
        window = FIRST_FULL_WINDOW
        while True:
            prefix = slots[:window]
            order = np.argsort(prefix, kind="stable")
            sorted_slots = prefix[order]
            rank = np.arange(order.size) - np.searchsorted(sorted_slots, sorted_slots, side="left")
            hits = order[rank + 1 == need[order]]
            if hits.size:
                return int(hits.min())
            if window >= size:
                return size
            window *= 4

    def learn_one(
        self, node: int, codes: Sequence[int] | np.ndarray, g: Any, h: Any, space: FeatureSpace
    ) -> bool:
        """Add one instance to leaf `node`; attempt a split when its block fills. True if split.

        `g` and `h`: a float each, or one per output."""
        slot = int(self.slot[node])
        position = int(self.pending_n[slot])
        if position >= self.pending_g.shape[1]:
            self.reserve_pending(position + 1)
        self.pending_codes[slot, position, : len(codes)] = codes
        self.pending_g[slot, position] = g
        self.pending_h[slot, position] = h
        self.pending_n[slot] = position + 1
        if position + 1 < self.block[slot]:
            return False
        return self.attempt(node, space)

    def attempt(self, node: int, space: FeatureSpace) -> bool:
        """Merge the leaf's full pending block and act on the best candidate. True if it split."""
        return self.act(node, self.evaluate(node), space)

    def evaluate(self, node: int) -> Candidate:
        """The first half of an attempt: the linear term's Newton step, the merge of the leaf's full
        block, and the best candidate. It changes this leaf only, and nothing reads the leaf before
        `act` (which finishes the attempt) but the attempt itself."""
        slot = int(self.slot[node])
        if self.linear and self.params.linear_steps:
            self._newton_linear(node, slot, self._choose(node, slot))
        self._merge_pending(slot)
        return self._best_candidate(node, slot)

    def evaluate_leaves(self, nodes: list[int]) -> list[Candidate]:
        """`evaluate` of several leaves whose blocks are full, with one numpy pass for all of them
        where the arithmetic allows (the same bits as one at a time: see `_merge_leaves` and
        sgt.split.best_numeric_leaves)."""
        if len(nodes) == 1:
            return [self.evaluate(nodes[0])]
        slots = [int(self.slot[node]) for node in nodes]
        if self.adaptive and self.params.linear_steps:  # each leaf's own g (see _choose)
            for node, slot in zip(nodes, slots):
                self._newton_linear(node, slot, self._choose(node, slot))
        elif self.linear and self.params.linear_steps:
            self._newton_leaves(nodes, slots)
        self._merge_leaves(np.array(slots, dtype=np.intp))
        return self._best_candidates(nodes, slots)

    def act(self, node: int, candidate: Candidate, space: FeatureSpace) -> bool:
        """The second half of an attempt: apply the candidate if its F-test passes (a value update,
        or a split, which hands out node ids and slots: so attempts act in the order of their rows).
        True if the leaf split."""
        slot = int(self.slot[node])
        n = self.merged_count(slot)
        if not self.active[slot]:  # (made inactive after an early evaluation: see sgt.leafwise)
            candidate = self._null_candidate(slot)
        passed = candidate.mean < 0.0 and f_test(candidate.mean, candidate.variance, n) < self.params.delta
        room = self._room_for_split(slot, candidate, n) if passed and candidate.is_split else ACTIVE
        if room is None:
            self._deactivate(slot)  # the budget holds no split of it: it stops gathering statistics
            passed = False
        elif self.active[slot]:
            self.promise[slot] = max(0.0, -candidate.mean * n) if candidate.is_split else 0.0
        if not (passed and candidate.is_split):  # the leaf stays a leaf: its next block is longer
            self.block[slot] = min(2 * int(self.block[slot]), self.params.grace_period)
        served = self._serve_next(node)
        if not passed:
            if self.adaptive and served and not self.serving[node]:
                self._reset_slot(slot)  # see _serve_next
            return False
        if not candidate.is_split:
            self._step_value(node, candidate.deltas[0], served)
            self._reset_slot(slot)
            self.n_updates += 1
            return False
        self._split(node, slot, candidate, space, served)
        if room == INACTIVE:
            for child in self._children(node):
                self._deactivate(int(self.slot[child]))
        return True

    def _serve_next(self, node: int) -> int:
        """What the leaf served during its block (1: its linear term, or the one model of a tree that is
        not adaptive), after setting what an adaptive leaf serves next by its tally.

        A leaf that falls back from its linear term to its constant resets its statistics, which hold
        the linear term's gradients: one that diverged left g in the thousands there, whose variance
        failed every later F-test (measured: a root that never split, MAE 4.9 against the constant's
        1.9). (Reset at every change of predictor: Friedman #1's MAE 1.494 against 1.398.)"""
        if not self.adaptive:
            return 1
        served = int(self.serving[node])
        self.serving[node] = int(float(self.tally[node]) < 0.0)
        return served

    def _step_value(self, node: int, delta: Any, served: int) -> None:
        """A value update by `delta`, computed from the g and h of the predictions the leaf `served`: an
        adaptive leaf moves that predictor alone (the other took its own step in `_choose`)."""
        if not self.adaptive or not self.layout.numeric.size:  # (no linear term: the value is the constant)
            self.value[node] += delta
        elif served:
            self.value[node] += delta
            self.anchor[node] -= delta
        else:
            self.anchor[node] += delta

    def _choose(self, node: int, slot: int) -> np.ndarray | None:
        """An adaptive leaf's choice between its linear term and its constant, on its full block; the
        block's g at the linear term's predictions (for its Newton step) if the leaf served its
        constant, else None (the block's own g are).

        Every row of the block was predicted by the same leaf (it changes only at attempts), by its
        linear term p_l = value + w . z or its constant p_c = value + anchor. With e = p_l - p_c, the
        second-order expansion of the loss around the served prediction (exact for squared error) gives
        each row's loss change l(p_l) - l(p_c): g e - h e^2 / 2 if it served p_l, g e + h e^2 / 2 if
        p_c. The leaf's tally fades by `leaf_fading` and adds the block's sum (in row order): the
        prequential loss difference of the two predictors on the records the leaf saw, recent ones
        weighing most. The leaf serves its linear term while the tally is negative. A tally that is
        not a number (a linear term that overflowed) serves the constant (see `_record`).

        The block's g are at the served prediction; the linear term's Newton step needs them at its own,
        g + h e when the constant served (exact for squared error, the tree's own approximation else).
        The predictor not served also takes a Newton step of its level here, from its own g (g - h e
        for the constant, g + h e for the linear term): the value updates and split steps of `act`,
        computed from the served predictor's g, move the served one alone (`_step_value`), so each
        predictor's level follows its own residuals and either is ready when the tally turns.
        """
        if not self.adaptive:
            return None
        size = int(self.pending_n[slot])
        numeric = self.layout.numeric
        g, h = self.pending_g[slot, :size], self.pending_h[slot, :size]
        if not numeric.size or not size:
            return None
        z = self.layout.inputs[self.pending_codes[slot, :size].T[numeric]]  # [features, rows]
        terms = np.empty((numeric.size + 1, size))
        np.multiply(self.weights[node, numeric][:, None], z, out=terms[1:])
        terms[0] = -self.anchor[node]
        with np.errstate(over="ignore", invalid="ignore"):
            e = _sums_in_order(terms)
            linear = bool(self.serving[node])
            change = g * e - 0.5 * h * e * e if linear else g * e + 0.5 * h * e * e
            # the other predictor's g (at its own predictions) and h, summed for its level's step
            other = np.empty((size, 3))
            np.multiply(h, e, out=other[:, 0])
            if linear:
                np.subtract(g, other[:, 0], out=other[:, 0])
            else:
                np.add(g, other[:, 0], out=other[:, 0])
            other[:, 1] = h
            other[:, 2] = change
            g_sum, h_sum, change_sum = _sums_in_order(other).tolist()
            self._record(node, change_sum)
            step = g_sum / (h_sum + self.params.lambda_)
            if not math.isfinite(step):
                return None if linear else other[:, 0]
            if linear:  # the constant's level step
                self.anchor[node] -= step
                return None
            self.value[node] -= step  # the linear term's level step, the constant kept
            self.anchor[node] += step
            return other[:, 0] - h * step

    def _record(self, node: int, change: float) -> None:
        """Fade the leaf's tally and add a block's loss change; a change that is not a finite number
        counts as the largest finite loss of the linear term, so the leaf serves its constant and
        the tally stays finite (it can fade back)."""
        if not math.isfinite(change):
            change = _LARGEST
        tally = self.params.leaf_fading * float(self.tally[node]) + change
        self.tally[node] = min(max(tally, -_LARGEST), _LARGEST)

    def _newton_linear(self, node: int, slot: int, g_at: np.ndarray | None = None) -> None:
        """One Newton step of the leaf's linear term on its block, on inputs centred on the block.

        With z the block's inputs and c their h-weighted mean, w -= s and value += s . c, where
        s = (mean h (z-c)(z-c)' + l I)^-1 mean g (z-c): the step moves the prediction by -s . (z - c),
        nothing at the block's centre. Uncentred, a feature whose inputs barely vary in the leaf (a
        timestamp at the end of its grid) made the linear step a second intercept step beside the
        value's own, which overshot (measured: TrumpApproval's MAE 7.8 uncentred, 2.0 centred).

        l is linear_lambda, not the value's lambda_ (the inputs span [-1/2, 1/2], whereas a value's
        step is not scaled by inputs). Of 0.003, 0.01, 0.03 and 0.1 (BENCHMARKS.md), 0.01 is the
        default: 0.003 gains up to 5 points on some streams but doubles TrumpApproval's MAE.

        The block's g and h were computed at the model's predictions, linear term included, so this
        is a step on the leaf's loss as a function of w (the value has its own step, the null
        candidate). It happens at the block boundary, which the algorithm fixes, so it is exact.
        """
        size = int(self.pending_n[slot])
        layout = self.layout
        numeric = layout.numeric
        if not numeric.size:
            return
        if kernels.ENABLED:
            self._newton_compiled(node, slot, g_at)
            return
        width = numeric.size
        # one row per feature (or product) and one column per instance: numpy's elementwise steps run
        # along whole rows, not along short rows of a few features
        z = layout.inputs[self.pending_codes[slot, :size].T[numeric]]
        g = self.pending_g[slot, :size] if g_at is None else g_at
        h = self.pending_h[slot, :size]
        weighted = np.empty((width + 1, size))
        weighted[0] = h
        np.multiply(z, h, out=weighted[1:])
        sums = _sums_in_order(weighted.T)
        h_sum = float(sums[0])
        if not h_sum > 0.0:
            return
        centre = sums[1:] / h_sum
        z = z - centre[:, None]
        # the Hessian is symmetric: its upper triangle only
        first, second = layout.pairs
        quantities = width + first.size
        products = np.empty((quantities, size))
        np.multiply(z, g, out=products[:width])
        np.multiply(z[first], z[second], out=products[width:])
        products[width:] *= h
        sums = _sums_in_order(products.T)
        if self._gate_drops(node, sums[:width], lambda: z, g, h):
            self._drop_linear(node, centre)
            return
        means = sums / size
        hessian = means[width:][layout.pair_of] + self.params.linear_lambda * np.eye(width)
        self._linear_step(node, _solve_positive_definite(hessian, means[:width]), centre)

    def _newton_compiled(self, node: int, slot: int, g_at: np.ndarray | None = None) -> None:
        """`_newton_linear` by sgt.kernels' linear_newton: the same sums, step and gate, bit for bit."""
        size = int(self.pending_n[slot])
        layout = self.layout
        codes, g, h = (
            self.pending_codes[slot, :size],
            self.pending_g[slot, :size] if g_at is None else g_at,
            self.pending_h[slot, :size],
        )
        first, second = layout.pairs
        h_sum, centre, gradient, step = kernels.linear_newton(
            codes,
            layout.numeric,
            layout.inputs,
            g,
            h,
            first,
            second,
            layout.pair_of,
            self.params.linear_lambda,
        )
        if not h_sum > 0.0:
            return
        numeric = layout.numeric
        if self._gate_drops(node, gradient, lambda: layout.inputs[codes.T[numeric]] - centre[:, None], g, h):
            self._drop_linear(node, centre)
            return
        self._linear_step(node, step.tolist(), centre)

    def _gate_drops(
        self, node: int, gradient: np.ndarray, centred: Callable[[], np.ndarray], g: np.ndarray, h: np.ndarray
    ) -> bool:
        """Whether the linear gate drops the leaf's term on its block of g and h (two instances or
        more): the screen on the Newton step's own sums (`gradient`, G; `_may_reject`), then the t test
        over the block's instances, whose inputs centred on the block [features, instances] `centred`
        gives only then (the compiled step never forms them otherwise)."""
        gate = self.params.linear_gate
        if gate is None or g.shape[0] < 2:
            return False
        weights = self.weights[node, self.layout.numeric]
        return _may_reject(weights.tolist(), gradient.tolist(), gate) and _rejects_block(
            weights, centred(), g, h, gate
        )

    def _newton_leaves(self, nodes: list[int], slots: list[int]) -> None:
        """`_newton_linear` of several leaves, their sums in one pass: each leaf's block is padded to
        the longest with instances whose terms are exactly -0.0, which leave a sum in order unchanged
        (x + -0.0 is x for every x), so each leaf gets the bits of its own block alone. (One leaf
        takes `_newton_linear`: the padding and gathers cost it about 30 us an attempt.)"""
        if kernels.ENABLED:
            for node, slot in zip(nodes, slots):
                self._newton_linear(node, slot)
            return
        layout = self.layout
        numeric = layout.numeric
        if not numeric.size:
            return
        width = numeric.size
        index = np.array(slots, dtype=np.intp)
        sizes = self.pending_n[index]
        longest = int(sizes.max())
        padding = np.arange(longest) >= sizes[:, None]  # [leaves, instances]
        # one row per feature (or product) and one column per instance: numpy's elementwise steps run
        # along whole rows, not along short rows of a few features
        z = layout.inputs[self.pending_codes[index, :longest][:, :, numeric].transpose(0, 2, 1)]
        g, h = self.pending_g[index, :longest], self.pending_h[index, :longest]
        weighted = np.empty((index.size, width + 1, longest))
        weighted[:, 0] = h
        np.multiply(z, h[:, None], out=weighted[:, 1:])
        sums = _leaf_sums_in_order(weighted, padding)
        ok = sums[:, 0] > 0.0
        if not ok.any():
            return
        with np.errstate(divide="ignore", invalid="ignore"):  # leaves without a positive h sum: unused
            centre = sums[:, 1:] / sums[:, :1]
        z = z - centre[:, :, None]
        # the Hessian is symmetric: its upper triangle only
        first, second = layout.pairs
        quantities = width + first.size
        products = np.empty((index.size, quantities, longest))
        np.multiply(z, g[:, None], out=products[:, :width])
        np.multiply(z[:, first], z[:, second], out=products[:, width:])
        products[:, width:] *= h[:, None]
        sums = _leaf_sums_in_order(products, padding)
        means = sums / sizes[:, None]
        gate = self.params.linear_gate
        if gate is not None:
            weights = self.weights[np.array(nodes, dtype=np.intp)][:, numeric]
            weight_lists, gradients = weights.tolist(), sums[:, :width].tolist()
        eye = self.params.linear_lambda * np.eye(width)
        for k in np.flatnonzero(ok).tolist():
            size = int(sizes[k])
            if (
                gate is not None
                and size > 1
                and _may_reject(weight_lists[k], gradients[k], gate)
                and _rejects_block(weights[k], z[k, :, :size], g[k, :size], h[k, :size], gate)
            ):
                self._drop_linear(nodes[k], centre[k])
                continue
            hessian = means[k, width:][layout.pair_of] + eye
            self._linear_step(nodes[k], _solve_positive_definite(hessian, means[k, :width]), centre[k])

    def _drop_linear(self, node: int, centre: np.ndarray) -> None:
        """Drop the leaf's linear term, its value at the block's centre kept: value += w . c, w = 0,
        which is the Newton step s = w (the gate only drops finite terms, so w - w is 0 exactly)."""
        self._linear_step(node, self.weights[node, self.layout.numeric].tolist(), centre)

    def _linear_step(
        self, node: int, step: list[float], centre: np.ndarray, output: tuple[int, ...] = ()
    ) -> None:
        """Apply a Newton step of the linear term (unless it overflowed): w -= s, value += s . c
        (of `output`: see `_newton_step`)."""
        if not all(math.isfinite(v) for v in step):
            return
        index: tuple[Any, ...] = (node, *output, self.layout.numeric)
        self.weights[index] -= step
        shift = step[0] * float(centre[0])  # summed in order, as np.cumsum does
        for s_j, c_j in zip(step[1:], centre[1:].tolist()):
            shift += s_j * c_j
        self.value[(node, *output)] += shift
        if self.adaptive:  # the constant, value + anchor, stays
            self.anchor[(node, *output)] -= shift

    def _merge_leaves(self, slots: np.ndarray) -> None:
        """`_merge_pending` of several slots in one pass: each slot's statistics take their own
        columns of one `block_stats` (whose sums run in instance order within each column) and the
        merge is elementwise, so every slot gets the bits it gets alone."""
        if kernels.ENABLED or not self.active[slots].all():
            for slot in slots.tolist():
                self._merge_pending(slot)
            return
        sizes = self.pending_n[slots]
        capacity = self.pending_g.shape[1]
        held = np.arange(capacity) < sizes[:, None]  # [slots, capacity]: the pending instances
        g = self.pending_g[slots][held]
        h = self.pending_h[slots][held]
        layout = self.layout
        width = layout.n_features + 1
        columns = layout.n_columns + 1  # each slot's statistics, then its total (as `_merge_pending`)
        index = np.zeros((g.size, width), dtype=np.intp)
        index[:, :-1] = self.pending_codes[slots][held]
        index += layout.offsets
        index += np.repeat(np.arange(slots.size) * columns, sizes)[:, None]
        block = block_stats(index.ravel(), np.repeat(g, width), np.repeat(h, width), slots.size * columns)
        held = np.stack([self.stats[slot] for slot in slots.tolist()])
        merged = merge(
            np.concatenate([held, self.total[slots][:, None]], axis=1),
            block.reshape(slots.size, columns, WIDTH),
        )
        for slot, rows in zip(slots.tolist(), merged):
            self.stats[slot][...] = rows[:-1]  # (into the slot's own array: a view would keep `merged`)
        self.total[slots] = merged[:, -1]
        self.pending_n[slots] = 0

    def _merge_pending(self, slot: int) -> None:
        """Merge the slot's pending block into its statistics (sgt.stats) and empty the block."""
        if not self.active[slot]:
            self._merge_total(slot)
            return
        size = int(self.pending_n[slot])
        if kernels.ENABLED:
            kernels.merge_block(  # (the kernel's output axis: one here)
                self.stats[slot][:, None],
                self.total[slot][None],
                self.pending_codes[slot, :size],
                self.pending_g[slot, :size, None],
                self.pending_h[slot, :size, None],
                self.layout.offsets,
            )
            self.pending_n[slot] = 0
            return
        g = self.pending_g[slot, :size]
        h = self.pending_h[slot, :size]
        layout = self.layout
        width = layout.n_features + 1
        # one column of statistics per feature and code, plus one (after them all) that takes every
        # instance: the leaf's total, from the same bincounts in the same instance order
        index = np.zeros((size, width), dtype=np.intp)
        index[:, :-1] = self.pending_codes[slot, :size]
        index += layout.offsets
        block = block_stats(index.ravel(), np.repeat(g, width), np.repeat(h, width), layout.n_columns + 1)
        merged = merge(np.concatenate([self.stats[slot], self.total[slot : slot + 1]]), block)
        self.stats[slot], self.total[slot] = merged[:-1], merged[-1]
        self.pending_n[slot] = 0

    def _best_candidate(self, node: int, slot: int) -> Candidate:
        return self._best_candidates([node], [slot])[0]

    def _best_candidates(self, nodes: list[int], slots: list[int]) -> list[Candidate]:
        """Each leaf's best candidate (the null one, the best numeric split, each nominal split), the
        numeric splits of all the leaves searched in one pass (sgt.split.best_numeric_leaves)."""
        params, layout = self.params, self.layout
        bests = [self._null_candidate(slot) for slot in slots]
        open_ = [
            k
            for k, node in enumerate(nodes)
            if (params.max_depth is None or self.depth[node] < params.max_depth) and self.active[slots[k]]
        ]
        # the best numeric split stands for every numeric feature: the scan below takes the lowest
        # mean, the earliest feature on ties, and best_numeric breaks its ties the same way
        by_feature: list[dict[int, Candidate | None]] = [{} for _ in nodes]
        if layout.numeric.size and open_:
            numeric = self._best_numeric([slots[k] for k in open_])
            for k, candidate in zip(open_, numeric):
                if candidate is not None:
                    by_feature[k][candidate.feature] = candidate
        for k in open_:
            self._nominal_candidates(nodes[k], slots[k], by_feature[k])
            for j in sorted(by_feature[k]):
                candidate = by_feature[k][j]
                if candidate is not None and candidate.mean < bests[k].mean:
                    bests[k] = candidate
        return bests

    def _null_candidate(self, slot: int) -> Candidate:
        return null_candidate(self.total[slot], self.params.lambda_)

    def _nominal_candidate(self, block: np.ndarray, n: float, feature: int) -> Candidate | None:
        return best_nominal(block, self.params.lambda_, self.params.gamma, n, feature)

    def _best_numeric(self, slots: list[int]) -> list[Candidate | None]:
        """Each slot's best numeric split, from the planes [6, F, B + 1] of its statistics (taken
        at once for several slots: [slots, 6, F, B + 1])."""
        if kernels.ENABLED:
            return self._compiled_numeric(slots)
        params, layout = self.params, self.layout
        if len(slots) == 1:
            planes = np.take(self.stats[slots[0]].T, layout.numeric_columns, axis=1)
            n = float(self.total[slots[0], N])
            return [best_numeric_planes(planes, params.lambda_, params.gamma, n, layout.numeric)]
        chosen = np.array(slots, dtype=np.intp)
        held = np.stack([self.stats[slot] for slot in slots])
        planes = np.take(held.transpose(0, 2, 1), layout.numeric_columns, axis=2)
        n_leaves = self.total[chosen, N]
        return best_numeric_leaves(planes, params.lambda_, params.gamma, n_leaves, layout.numeric)

    def _compiled_numeric(self, slots: list[int]) -> list[Candidate | None]:
        """`_best_numeric` by sgt.kernels' search, the same candidates (a multi-output tree's too: its
        slots' statistics are [columns, outputs, 6])."""
        params, layout = self.params, self.layout
        return [
            best_numeric_compiled(
                self.stats[slot],
                layout.numeric_columns,
                params.lambda_,
                params.gamma,
                self.merged_count(slot),
                layout.numeric,
            )
            for slot in slots
        ]

    def _nominal_candidates(self, node: int, slot: int, by_feature: dict[int, Candidate | None]) -> None:
        """Add the leaf's nominal splits to `by_feature` (a feature split once per path is not one)."""
        layout = self.layout
        if not layout.nominal:
            return
        n = self.merged_count(slot)
        # a walk to the root (about 30% of a split search on deep trees): only with nominal features
        used = self._nominal_on_path(node)
        for j in layout.nominal:
            if j not in used:
                start = int(layout.offsets[j])
                block = self.stats[slot][start : start + layout.widths[j]]
                by_feature[j] = self._nominal_candidate(block, n, j)

    def _nominal_on_path(self, node: int) -> set[int]:
        """Nominal features already split on between the root and `node` (split once per path)."""
        used = set()
        parent = int(self.parent[node])
        while parent != NO_NODE:
            if self.table[parent] >= 0:
                used.add(int(self.feature[parent]))
            parent = int(self.parent[parent])
        return used

    def _split(
        self, node: int, slot: int, candidate: Candidate, space: FeatureSpace, served: int = 1
    ) -> None:
        """Split the leaf; each child starts from its model plus its step (an adaptive leaf's step moves
        the predictor it `served` alone, as `_step_value` does)."""
        value = self.value[node].copy()  # a float, or one per output: each child adds its step
        depth = int(self.depth[node]) + 1
        constant = bool(self.adaptive and self.layout.numeric.size and not served)  # the constant's step
        children = [
            self._new_leaf(node, value if constant else value + d, depth, slot=slot if k == 0 else None)
            for k, d in enumerate(candidate.deltas)
        ]
        if self.adaptive and self.layout.numeric.size:
            for child, d in zip(children, candidate.deltas):
                self.anchor[child] += d if constant else -d
        self.feature[node] = candidate.feature
        self.slot[node] = -1
        self.missing[node] = children[candidate.missing_child]
        if candidate.categories.size:
            # as long as the highest category it routes, not the layout's width: a batch knows the
            # categories of its later rows before a loop does, and both must write the same table
            lookup = np.full(int(candidate.categories[-1]) + 1, NO_NODE, dtype=np.int32)
            lookup[candidate.categories] = children
            self.table[node] = len(self.tables)
            self.tables.append(lookup)
        else:
            self.threshold[node] = candidate.threshold + 1  # codes 1..threshold+1 go left
            self.left[node], self.right[node] = children
        self._mirror = None
        self.n_splits += 1

    # -- introspection -------------------------------------------------------------------------
    @property
    def n_leaves(self) -> int:
        return self.n_slots

    def max_depth(self) -> int:
        return int(self.depth[: self.n_nodes].max())

    def leaf_count(self, node: int) -> int:
        """Instances at a leaf since its last reset (merged plus pending)."""
        slot = int(self.slot[node])
        return int(self.merged_count(slot)) + int(self.pending_n[slot])

    def nbytes(self) -> int:
        """Bytes of the live state: node arrays and the slots of the current leaves."""
        node_bytes = sum(getattr(self, name)[: self.n_nodes].nbytes for name in NODE_ARRAYS)
        node_bytes += self.weights[: self.n_nodes].nbytes
        node_bytes += sum(getattr(self, name)[: self.n_nodes].nbytes for name in ADAPTIVE_ARRAYS)
        per_slot = (
            self.total[0].nbytes
            + self.pending_codes[0].nbytes
            + self.pending_g[0].nbytes
            + self.pending_h[0].nbytes
            + 20
        )
        # each active slot's statistics are an array of the layout's size; an inactive slot has none
        stats = self._slot_bytes()[1] * int(self.active[: self.n_slots].sum())
        return node_bytes + sum(t.nbytes for t in self.tables) + per_slot * self.n_slots + stats

    # -- memory budget -------------------------------------------------------------------------
    # A tree with a cap keeps `budget_bytes` (an upper bound of `nbytes`) within it by making leaves
    # inactive: an inactive leaf's split statistics are freed and it never splits again, but it still
    # predicts and takes its blocks (the linear term's Newton step, the value update from its total).
    # Which leaves, and when, depends on the learned data only: the decisions are taken where a split
    # or a new leaf would grow the tree (an attempt acts, a category child is made; both at rows the
    # algorithm fixes) and where the estimator changes the cap or the layout (`fit_budget`), and they
    # read the structure and each slot's `promise`, which only an attempt's act writes. Batches that
    # evaluate a leaf's attempt early (sgt.leafwise) therefore decide alike: an attempt whose leaf was
    # made inactive in between acts on the null candidate, which its total alone gives.
    # An inactive adaptive leaf still makes its choice (`_choose`) as an active one does: the choice
    # reads the leaf's block alone (its g, h and codes), which an inactive leaf keeps, never its split
    # statistics; falling back from its linear term to its constant resets what it holds, its total.
    def _no_stats(self) -> np.ndarray:
        """An inactive slot's statistics: none."""
        return np.zeros((0, *self._output_axes(), WIDTH))

    def _merge_total(self, slot: int) -> None:
        """`_merge_pending` of an inactive slot: its total alone, with the bits the whole merge gives
        it (`block_stats` sums each group in instance order, and the total is a group of its own
        there; the merge is elementwise; the compiled merge has the same bits)."""
        size = int(self.pending_n[slot])
        outputs = math.prod(self._output_axes())
        # output after output, each output's instances in order
        g = self.pending_g[slot, :size].reshape(size, outputs).T.ravel()
        h = self.pending_h[slot, :size].reshape(size, outputs).T.ravel()
        block = block_stats(np.repeat(np.arange(outputs), size), g, h, outputs)
        total = self.total[slot]
        self.total[slot] = merge(total.reshape(outputs, WIDTH), block).reshape(total.shape)
        self.pending_n[slot] = 0

    def _deactivate(self, slot: int) -> None:
        self.active[slot] = False
        self.stats[slot] = self._no_stats()

    def _node_bytes(self) -> int:
        """Bytes of one node in the node arrays (and its linear term, and an adaptive leaf's choice)."""
        names = NODE_ARRAYS + ADAPTIVE_ARRAYS if self.adaptive else NODE_ARRAYS
        row = sum(getattr(self, name).itemsize * math.prod(getattr(self, name).shape[1:]) for name in names)
        return row + self.weights.itemsize * math.prod(self.weights.shape[1:])

    def _slot_bytes(self) -> tuple[int, int]:
        """Bytes of one slot without its statistics, its pending block counted at its longest
        (grace_period rows: the spare rows it may grow to), and of one active slot's statistics."""
        outputs = math.prod(self._output_axes())
        rows = self.params.grace_period
        codes = rows * self.layout.n_features * np.dtype(CODE_DTYPE).itemsize
        fixed = outputs * WIDTH * 8 + codes + 2 * rows * outputs * 8 + 20
        return fixed, self.layout.n_columns * outputs * WIDTH * 8

    def budget_bytes(self) -> int:
        """What the budget holds to the cap: `nbytes` with every pending block at its longest."""
        fixed, stats = self._slot_bytes()
        nodes = self._node_bytes() * self.n_nodes + sum(t.nbytes for t in self.tables)
        return nodes + fixed * self.n_slots + stats * int(self.active[: self.n_slots].sum())

    def _least_promising(self) -> list[int]:
        """The active slots, least promising first (ties: the older slot first)."""
        slots = np.flatnonzero(self.active[: self.n_slots])
        return slots[np.argsort(self.promise[slots], kind="stable")].tolist()

    def fit_budget(self) -> None:
        """Make the least promising leaves inactive until the tree is within its cap (or none is active)."""
        if self.cap is None:
            return
        excess = self.budget_bytes() - self.cap
        stats = self._slot_bytes()[1]
        for slot in self._least_promising():
            if excess <= 0:
                return
            self._deactivate(slot)
            excess -= stats

    def _room_for_split(self, slot: int, candidate: Candidate, n: float) -> str | None:
        """How the cap holds the split of `slot`'s leaf: with active children (ACTIVE), after making
        inactive the active leaves less promising than this split if need be (least first; made so
        only if that makes room); else with inactive children (INACTIVE), the split still improving
        the predictions; else not at all (None)."""
        if self.cap is None:
            return ACTIVE
        fixed, stats = self._slot_bytes()
        children = len(candidate.deltas)
        table = (int(candidate.categories[-1]) + 1) * 4 if candidate.categories.size else 0
        nodes = children * self._node_bytes() + (children - 1) * fixed + table
        budget = self.budget_bytes()
        excess = budget + nodes + (children - 1) * stats - self.cap
        if excess <= 0:
            return ACTIVE
        gain = -candidate.mean * n
        chosen: list[int] = []
        for other in self._least_promising():
            if other == slot or not self.promise[other] < gain:
                continue
            chosen.append(other)
            excess -= stats
            if excess <= 0:
                for freed in chosen:
                    self._deactivate(freed)
                return ACTIVE
        return INACTIVE if budget + nodes - stats <= self.cap else None

    def _children(self, node: int) -> list[int]:
        """A branch's children, in id order."""
        table = int(self.table[node])
        if table >= 0:
            return sorted(int(c) for c in self.tables[table] if c >= 0)
        return [int(self.left[node]), int(self.right[node])]

    def _load_budget(self, prefix: str, arrays: dict[str, np.ndarray]) -> None:
        """The slots' activity and promise, as saved (absent: saved without a budget, all active)."""
        s = self.n_slots
        self.active = np.ones(s, dtype=bool)
        self.promise = np.full(s, math.inf)
        if f"{prefix}.active" not in arrays:
            return
        active = expect_shape(f"{prefix}.active", arrays[f"{prefix}.active"], (s,))
        if not np.isin(active, (0, 1)).all():
            raise SerializationError(f"{prefix}: slot activity other than 0 and 1")
        self.active = active.astype(bool)
        self.promise = expect_shape(f"{prefix}.promise", arrays[f"{prefix}.promise"], (s,)).astype(np.float64)
        for slot in np.flatnonzero(~self.active).tolist():
            if self.stats[slot].any():
                raise SerializationError(f"{prefix}: an inactive slot holds statistics")
            self.stats[slot] = self._no_stats()

    # -- saving --------------------------------------------------------------------------------
    # Only the live part of each array is written (no spare capacity, no stale pending rows). A
    # leaf's split statistics are mostly empty bins, so they are stored sparsely from format 2 on:
    # the flat indices of the (slot, column) rows that hold any non-zero bit and those rows; every
    # other row is +0.0, which restores the same bits (1.9 MB instead of 17.8 MB for a 1,089-node
    # model). Format 1 stored them densely; formats 1 and 2 had no per-slot block sizes (every
    # block was a grace period).
    def saved(self, prefix: str) -> tuple[dict[str, Any], list[NamedArray]]:
        """The tree's counters and its arrays (named ``<prefix>.<array>``) for sgt's format."""
        n, s = self.n_nodes, self.n_slots
        counters = {
            "n_nodes": n,
            "n_slots": s,
            "n_splits": self.n_splits,
            "n_updates": self.n_updates,
            "n_tables": len(self.tables),
        }
        pending = self.pending_n[:s]

        def live(rows: np.ndarray) -> np.ndarray:  # each slot's pending rows, back to back
            return np.concatenate([rows[k, : pending[k]] for k in range(s)])

        out = [(f"{prefix}.{name}", getattr(self, name)[:n]) for name in NODE_ARRAYS]
        out += [
            (f"{prefix}.slot_node", self.slot_node[:s]),
            *_sparse_stats(prefix, self.stats, self.layout.n_columns * math.prod(self._output_axes())),
            (f"{prefix}.total", self.total[:s]),
            (f"{prefix}.pending_n", pending),
            (f"{prefix}.block", self.block[:s]),
            (
                f"{prefix}.pending_codes",
                np.concatenate([self.pending_codes[k, : pending[k]] for k in range(s)]),
            ),
            (f"{prefix}.pending_g", np.concatenate([self.pending_g[k, : pending[k]] for k in range(s)])),
            (f"{prefix}.pending_h", np.concatenate([self.pending_h[k, : pending[k]] for k in range(s)])),
        ]
        out += [(f"{prefix}.tables.{k}", table) for k, table in enumerate(self.tables)]
        if self.linear:
            out.append((f"{prefix}.weights", self.weights[:n]))
        if self.adaptive:
            out += [(f"{prefix}.{name}", getattr(self, name)[:n]) for name in ADAPTIVE_ARRAYS]
        if self.cap is not None:  # (unbounded: the bytes of the format before the budget)
            active = self.active[:s].astype(np.int32)  # (the format holds no booleans)
            out += [(f"{prefix}.active", active), (f"{prefix}.promise", self.promise[:s])]
        return counters, out

    @classmethod
    def from_saved(
        cls,
        params: Params,
        layout: Layout,
        prefix: str,
        counters: dict[str, Any],
        arrays: dict[str, np.ndarray],
    ) -> Tree:
        """The tree `saved` wrote, checked so that routing can walk it (SerializationError if not)."""
        tree = cls._empty(params, layout, counters)
        out = tree._output_axes()
        n, s = int(counters["n_nodes"]), int(counters["n_slots"])
        for name in NODE_ARRAYS:
            shape = (n, *out) if name == "value" else (n,)
            values = expect_shape(f"{prefix}.{name}", arrays[f"{prefix}.{name}"], shape)
            setattr(tree, name, values.astype(getattr(tree, name).dtype))
        tree.n_nodes, tree.n_slots = n, s
        tree.n_splits, tree.n_updates = int(counters["n_splits"]), int(counters["n_updates"])
        tree.slot_node = arrays[f"{prefix}.slot_node"].astype(np.int32)
        tree.stats = _slot_stats(prefix, arrays, (s, layout.n_columns, *out))
        tree.total = arrays[f"{prefix}.total"].reshape(s, *out, WIDTH)
        tree._load_budget(prefix, arrays)
        tree._load_pending(prefix, arrays)
        tree.tables = [
            arrays[f"{prefix}.tables.{k}"].astype(np.int32) for k in range(int(counters["n_tables"]))
        ]
        if tree.linear:
            shape = (n, *out, layout.n_features)
            tree.weights = np.zeros(shape)
            if f"{prefix}.weights" in arrays:  # (absent: written with constant leaves)
                weights = arrays[f"{prefix}.weights"]
                if weights.shape != shape:
                    raise SerializationError(f"{prefix}: weights of shape {weights.shape}, not {shape}")
                tree.weights = weights.astype(np.float64)
        if tree.adaptive:  # (absent: written with another leaf model; every leaf then starts at 0)
            for name in ADAPTIVE_ARRAYS:
                saved = arrays.get(f"{prefix}.{name}")
                values = np.zeros(n) if saved is None else expect_shape(f"{prefix}.{name}", saved, (n,))
                setattr(tree, name, values.astype(getattr(tree, name).dtype))
        tree._mirror = None
        _check_structure(prefix, tree)
        return tree

    @classmethod
    def _empty(cls, params: Params, layout: Layout, counters: dict[str, Any]) -> Tree:
        """A fresh tree of the kind `counters` describe, for `from_saved` to fill."""
        return cls(params, layout)

    def _load_pending(self, prefix: str, arrays: dict[str, np.ndarray]) -> None:
        """The slots' block sizes and pending blocks, from `saved`'s arrays (after the slot count)."""
        s, grace, n_features = self.n_slots, self.params.grace_period, self.layout.n_features
        self.pending_n = arrays[f"{prefix}.pending_n"].astype(np.int64).reshape(s)
        if f"{prefix}.block" in arrays:
            self.block = arrays[f"{prefix}.block"].astype(np.int64).reshape(s)
        else:  # formats 1 and 2: every block was a grace period
            self.block = np.full(s, grace, dtype=np.int64)
        if (self.block < 1).any() or (self.block > grace).any():
            raise SerializationError(f"{prefix}: block sizes out of range")
        if (self.pending_n < 0).any() or (self.pending_n >= self.block).any():
            raise SerializationError(f"{prefix}: pending block sizes out of range")
        # [pending instances, features], as written; checked as such rather than reshaped, because a
        # tree that knows no features yet has zero columns, whose row count a reshape cannot infer
        codes = arrays[f"{prefix}.pending_codes"]
        g, h = arrays[f"{prefix}.pending_g"], arrays[f"{prefix}.pending_h"]
        if codes.ndim != 2 or codes.shape[1] != n_features:
            raise SerializationError(
                f"{prefix}: pending codes have shape {codes.shape}, not [n, {n_features}]"
            )
        out = self._output_axes()
        count = int(self.pending_n.sum())
        if not (codes.shape[0] == count and g.shape == h.shape == (count, *out)):
            raise SerializationError(f"{prefix}: pending blocks disagree in size")
        rows = min(grace, max(INITIAL_PENDING_ROWS, int(self.pending_n.max(initial=0))))
        self.pending_codes = np.zeros((s, rows, n_features), dtype=codes.dtype)
        self.pending_g = np.zeros((s, rows, *out))
        self.pending_h = np.zeros((s, rows, *out))
        ends = np.cumsum(self.pending_n)
        for k in range(s):
            size = int(self.pending_n[k])
            block = slice(int(ends[k]) - size, int(ends[k]))
            self.pending_codes[k, :size] = codes[block]
            self.pending_g[k, :size] = g[block]
            self.pending_h[k, :size] = h[block]


def _sparse_stats(prefix: str, stats: list[np.ndarray], per_slot: int) -> list[NamedArray]:
    """The rows of the slots' statistics (each slot's viewed as [rows, 6], `per_slot` rows a slot,
    slot after slot) that hold any non-zero bit, and their flat indices (an inactive slot has none).

    Bitwise, so a -0.0 is kept and everything left out is exactly +0.0.
    """
    width = np.int32 if len(stats) * per_slot < 2**31 else np.int64  # 4 bytes an index whenever they fit
    indices, kept = [np.empty(0, dtype=width)], [np.empty((0, WIDTH))]
    for slot, held in enumerate(stats):
        rows = held.reshape(-1, WIDTH)
        found = np.flatnonzero(rows.view(np.uint64).any(axis=1))
        indices.append((found + slot * per_slot).astype(width))
        kept.append(rows[found])
    return [
        (f"{prefix}.stats_index", np.concatenate(indices)),
        (f"{prefix}.stats_rows", np.concatenate(kept)),
    ]


def _slot_stats(prefix: str, arrays: dict[str, np.ndarray], shape: tuple[int, ...]) -> list[np.ndarray]:
    """Each slot's [columns, (outputs,) 6] statistics of a tree from either format, each an array of
    its own (as a learning tree's are: none keeps another's memory alive), checked against its layout
    (`shape`: all but the last axis, slots first)."""
    if f"{prefix}.stats" in arrays:  # format 1
        return [np.array(held) for held in arrays[f"{prefix}.stats"].reshape(*shape, WIDTH)]
    index = arrays[f"{prefix}.stats_index"]
    values = arrays[f"{prefix}.stats_rows"]
    slots, per_slot = shape[0], math.prod(shape[1:])
    if index.ndim != 1 or values.shape != (index.size, WIDTH):
        raise SerializationError(f"{prefix}: sparse statistics disagree in size")
    if index.size and (index[0] < 0 or index[-1] >= slots * per_slot or (np.diff(index) <= 0).any()):
        raise SerializationError(f"{prefix}: sparse statistics index out of order or range")
    bounds = np.searchsorted(index, np.arange(slots + 1) * per_slot).tolist()
    out = []
    for slot in range(slots):
        held = np.zeros((per_slot, WIDTH))  # (only the rows written take memory: see the module)
        lo, hi = bounds[slot], bounds[slot + 1]
        held[index[lo:hi] - slot * per_slot] = values[lo:hi]
        out.append(held.reshape(*shape[1:], WIDTH))
    return out


def _check_structure(prefix: str, tree: Tree) -> None:
    """Reject structures that routing could not walk safely (corruption behind a valid checksum).

    Children are always created after their parent, so every child id must exceed its parent's
    and name it as parent: that rules out cycles. Missing values must go to one of the children.
    """
    n = tree.n_nodes
    if n < 1 or tree.n_slots < 1:
        raise SerializationError(f"{prefix}: empty tree")
    for node in range(n):
        feature = int(tree.feature[node])
        if feature < 0:
            slot = int(tree.slot[node])
            if not 0 <= slot < tree.n_slots or int(tree.slot_node[slot]) != node:
                raise SerializationError(f"{prefix}: leaf {node} has an invalid slot")
            continue
        if feature >= tree.layout.n_features:
            raise SerializationError(f"{prefix}: node {node} splits on an unknown feature")
        table = int(tree.table[node])
        if table >= len(tree.tables):
            raise SerializationError(f"{prefix}: node {node} names a missing category table")
        if table >= 0:
            children = [int(c) for c in tree.tables[table] if c >= 0]
        else:
            children = [int(tree.left[node]), int(tree.right[node])]
        for child in children:
            if not node < child < n or int(tree.parent[child]) != node:
                raise SerializationError(f"{prefix}: node {node} has an invalid child {child}")
        if int(tree.missing[node]) not in children:
            raise SerializationError(
                f"{prefix}: node {node} sends missing values to a node that is not its child"
            )


def _may_reject(weights: list[float], gradient: list[float], gate: float) -> bool:
    """Whether the gate's t test could drop a leaf's linear term, from the sums its Newton step takes
    anyway (`gradient`: G = sum g (z - c) over the block). With d = w . (z - c), the block's loss
    changes sum to sum e = sum (h d^2 / 2 - g d) = w' H w / 2 - w . G, where H = sum h (z - c)(z - c)'
    is positive semi-definite (h >= 0): so w . G <= 0 means sum e >= 0, which no gate >= 0 rejects.
    Most blocks are so (w . G > 0 in about a third of them on the benchmark streams), so the pass over
    the instances (`_rejects_block`) runs on few. Python floats summed in order: every path screens
    alike; NaN leaves the decision to the test."""
    product = weights[0] * gradient[0]
    for w_j, g_j in zip(weights[1:], gradient[1:]):
        product += w_j * g_j
    return gate < 0.0 or not product <= 0.0


def _rejects_block(weights: np.ndarray, z: np.ndarray, g: np.ndarray, h: np.ndarray, gate: float) -> bool:
    """The gate's t test on one leaf's block of two or more instances: `weights` [features], `z`
    [features, instances] centred on the block, `g` and `h` [instances] (see _drop_changes, _rejects)."""
    changes = np.empty((2, z.shape[1]))
    _drop_changes(weights[:, None], z, g, h, changes)
    return _rejects(_sums_in_order(changes.T).tolist(), z.shape[1], gate)


def _drop_changes(weights: np.ndarray, z: np.ndarray, g: np.ndarray, h: np.ndarray, out: np.ndarray) -> None:
    """Into `out` [2, instances]: the second-order loss change of each instance of a block if its
    leaf's linear term were dropped with its value at the block's centre kept, and its square.
    `weights` [features, 1] and `z` [features, instances] centred on the block.

    With d = w . (z - c) the instance's share of the term, dropping it moves the instance's score by
    -d, which changes its loss by e = (h d / 2 - g) d (g and h were computed at the scores with the
    term). Elementwise steps, and d summed feature by feature in layout order (down the rows of a
    C-contiguous array of two or more instances, as `_sums_in_order` sums).
    """
    with np.errstate(over="ignore", invalid="ignore"):  # an overflow drops nothing (see _rejects)
        d = np.add.reduce(weights * z, axis=-2, initial=-0.0)
        change = np.multiply(0.5 * h * d - g, d, out=out[0])
        np.multiply(change, change, out=out[1])


def _rejects(sums: list[float], size: int, gate: float) -> bool:
    """Whether a block of `size` instances whose loss changes e sum to sums[0] (their squares to
    sums[1]) says a leaf's loss is lower without its linear term: a one-sided t test, the mean of e
    below -gate standard errors. Python floats from the sums, so every path decides alike."""
    mean = sums[0] / size
    variance = (sums[1] - sums[0] * mean) / (size - 1)
    return variance > 0.0 and mean < -gate * math.sqrt(variance / size)  # False if either is NaN


def _sums_in_order(terms: np.ndarray) -> np.ndarray:
    """The sum down each column of a 2-d array, rows added first to last: `np.cumsum(terms, axis=0)[-1]`
    bit for bit, at a fraction of its cost (it computes and writes every partial sum: measured on a
    linear leaf's block of 200 instances and 10 features, 170 us by cumsum, 25 us so).

    Never BLAS nor numpy's pairwise summation: their rounding depends on the length, the memory
    alignment or the threads, and the same data must give the same bits in every process. numpy sums
    pairwise only along the fast axis in memory; down the rows of a C-contiguous array of two or more
    columns it adds one row after the other. It starts from -0.0, the exact identity of IEEE addition
    (from numpy's default 0.0 a column of -0.0 would sum to 0.0), so the first row is taken as it is,
    as cumsum takes it.
    """
    if terms.shape[1] < 2:  # one column: it would be the fast axis, summed pairwise
        return np.cumsum(terms, axis=0)[-1]
    return np.add.reduce(np.ascontiguousarray(terms), axis=0, initial=-0.0)


def _leaf_sums_in_order(terms: np.ndarray, padding: np.ndarray) -> np.ndarray:
    """`_sums_in_order` of each leaf's terms [leaves, quantities, instances] over its instances: the
    instances that `padding` [leaves, instances] marks become -0.0, which leave each sum as it is.

    Summed down the rows of a C-contiguous [leaves, instances, quantities] array (two quantities or
    more), which numpy adds one row after the other for each leaf, as `_sums_in_order` does."""
    rows = np.ascontiguousarray(terms.transpose(0, 2, 1))
    rows[padding] = -0.0
    return np.add.reduce(rows, axis=1, initial=-0.0)


def _solve_positive_definite(a: np.ndarray, b: np.ndarray) -> list[float]:
    """x with a x = b, a symmetric positive definite (Gaussian elimination without pivoting).

    Elementwise steps and sums in a fixed order only (no LAPACK), so the bits never depend on
    the process, the memory alignment or the number of threads.
    """
    # Python floats: at this size (one row per numeric feature) numpy's per-call overhead dominates;
    # each operation is rounded once, as numpy's elementwise steps were, so the bits are the same.
    # Column k below the pivot is never read again, so it is not updated
    rows, rhs = a.tolist(), b.tolist()
    n = len(rhs)
    for k in range(n - 1):
        pivot, top, diagonal = rows[k], rhs[k], rows[k][k]
        below = range(k + 1, n)
        for i in below:
            row = rows[i]
            factor = row[k] / diagonal
            for j in below:
                row[j] -= factor * pivot[j]
            rhs[i] -= factor * top
    x = [0.0] * n
    for k in range(n - 1, -1, -1):
        total, row = rhs[k], rows[k]
        for j in range(k + 1, n):
            total -= row[j] * x[j]
        x[k] = total / row[k]
    return x


def _solve_positive_definite_many(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """`_solve_positive_definite` of several systems side by side (`a` [m, n, n], `b` [m, n]): the
    same elementwise steps in the same order on each system's numbers, so each gets its own bits
    (numpy rounds each product and difference once, as Python floats do)."""
    rows, rhs = a.astype(np.float64), b.astype(np.float64)
    n = rhs.shape[1]
    for k in range(n - 1):
        below = slice(k + 1, n)
        factor = rows[:, below, k] / rows[:, k, k][:, None]
        rows[:, below, below] -= factor[:, :, None] * rows[:, None, k, below]
        rhs[:, below] -= factor * rhs[:, k : k + 1]
    x = np.zeros_like(rhs)
    for k in range(n - 1, -1, -1):
        total = rhs[:, k].copy()
        for j in range(k + 1, n):
            total -= rows[:, k, j] * x[:, j]
        x[:, k] = total / rows[:, k, k]
    return x


def leaf_inputs(codes: np.ndarray, bins: int) -> np.ndarray:
    """A linear leaf's inputs: each numeric code's bin centre on the grid, as a fraction of the grid
    minus 1/2 (in [-1/2, 1/2]); 0 for a missing value, which then adds nothing."""
    return np.where(codes == 0, 0.0, (codes - (bins + 1) / 2.0) / bins)


def _input(code: int, bins: int) -> float:
    """`leaf_inputs` of one non-missing code, as a Python float (same operations)."""
    return (code - (bins + 1) / 2.0) / bins


def _regridded_threshold(threshold: int, mapping: np.ndarray) -> int:
    """A numeric split's threshold (codes <= threshold go left) on a grown grid (see Tree.regrid)."""
    bins = mapping.size - 1
    if not 0 < threshold < bins:
        return threshold  # nothing, or everything, goes left: so it stays
    here = int(mapping[threshold])
    if here != int(mapping[threshold + 1]):
        return here
    group = np.flatnonzero(mapping[1:] == here) + 1
    left = int((group <= threshold).sum())
    return here if 2 * left >= group.size else here - 1


def _grow(array: np.ndarray, capacity: int) -> np.ndarray:
    grown = np.zeros((capacity, *array.shape[1:]), dtype=array.dtype)
    grown[: array.shape[0]] = array
    return grown
