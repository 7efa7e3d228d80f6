"""One Stochastic Gradient Tree, stored in flat numpy arrays: its structure and routing.

Nodes live in parallel arrays indexed by node id (split feature, threshold code, children, value,
depth, parent, leaf slot). Nominal branches keep a lookup table from category code to child.

Each leaf owns a *slot* of learning state:

- `stats[slot]`: split statistics, one row of six numbers (see sgt.stats) per feature and code:
  the `Layout` gives each feature a block of columns (column 0 of a block: missing values). Each
  slot's statistics are an array of their own, made with the slot: a growing tree copies none of
  them, and the rows of bins no instance reaches are never written, so their memory pages are never
  allocated (most of a multi-output leaf's statistics; see docs/decisions.md, "Trees in memory");
- `total[slot]`: the statistics of all instances since the leaf's last reset (the paper's U);
- a pending block of at most `block[slot] - 1` instances (their codes, g and h) not yet merged.

This module holds the arrays and what changes or reads the structure: new leaves and splits, new
features and grown grids (`relayout`, `regrid`), prediction, routing a record or a batch to its
leaves, and the memory budget. How a leaf learns (its blocks, the split attempt, the Newton steps
of linear leaves) is sgt.leaf's `LeafLearner`, which each tree owns; saving and restoring a tree
is sgt.tree_persistence; the hyperparameters and the layout of the statistics are sgt.layout's.

A memory budget (`Tree.cap`, bytes, set by the estimator; see "Memory budget" below) makes the least
promising leaves *inactive*: they still predict and learn their values, but never split again.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np

from sgt import kernels
from sgt.features import CODE_DTYPE, FeatureSpace, Regrid
from sgt.layout import Layout, LeafInputs, Params, leaf_input, leaf_inputs_of
from sgt.leaf import ACTIVE, INACTIVE, LeafLearner
from sgt.ordered import sums_in_order
from sgt.serialization import NamedArray
from sgt.split import Candidate
from sgt.stats import WIDTH, N, merge
from sgt.tree_persistence import ADAPTIVE_ARRAYS, INITIAL_PENDING_ROWS, NODE_ARRAYS, restore, saved

__all__ = ["NODE_ARRAYS", "Layout", "LeafInputs", "Params", "Tree", "leaf_inputs_of"]

NO_NODE = -1
_CODE_BYTES = np.dtype(CODE_DTYPE).itemsize  # (of one pending code)


class Tree:
    """A single SGT: its nodes and leaf slots in flat arrays, routing and prediction; its leaves learn
    through its `learner` (sgt.leaf). Used through the estimators, which validate the parameters.

    Parameters
    ----------
    params:
        The hyperparameters (`sgt.layout.Params`).
    layout:
        Where each feature's statistics live in a leaf (`sgt.layout.Layout`); `relayout` adopts a
        wider one as features and categories arrive.
    root_value:
        The root's value, the tree's prediction before it learns anything.

    Examples
    --------
    >>> import numpy as np
    >>> from sgt.features import FeatureSpace
    >>> space = FeatureSpace(bins=8, warm_up=10)
    >>> x = np.random.default_rng(0).uniform(0.0, 1.0, 60)
    >>> codes = space.encode_array(x[:, None], np.ones(60, dtype=bool))
    >>> tree = Tree(Params(0.1, 20, 0.1, 0.0, None), Layout(space))
    >>> for value, row in zip(x, codes):  # g = -1 below 0.5, 1 above: a split near 0.5
    ...     _ = tree.learn_one(tree.route_one(row)[0], row, -1.0 if value < 0.5 else 1.0, 1.0, space)
    >>> tree.n_splits > 0, tree.route_one(space.encode_one([0.1], learn=False))[1]
    (True, False)
    """

    #: raw scores per record (sgt.multioutput.MultiOutputTree has several)
    n_outputs = 1
    #: what learns the leaves (sgt.multioutput's learner has the arithmetic of several outputs)
    learner_type: ClassVar[type[LeafLearner]] = LeafLearner

    def __init__(self, params: Params, layout: Layout, root_value: float = 0.0) -> None:
        out = self.output_axes()
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
        # adaptive leaves (see LeafLearner._choose): a leaf serves its linear term (serving 1) or its
        # constant, value + anchor (serving 0); each attempt's act serves the linear term next iff the
        # tally is negative
        self.adaptive = params.leaf_model == "adaptive"
        self.anchor = np.zeros(0)
        self.tally = np.zeros(0)
        self.serving = np.zeros(0, dtype=np.int32)
        self._mirror: tuple[list[Any], ...] | None = None
        # `_node_bytes` and what it was computed for (the node arrays' trailing axes: see there)
        self._node_row: tuple[tuple[Any, ...], int] | None = None
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
        self.learner = self.learner_type(self)
        self._new_leaf(parent=NO_NODE, value=root_value, depth=0)

    # a copy (copy.deepcopy, pickle) gets a learner of its own: the learner refers to its tree weakly,
    # and a copied weak reference would still point at the original tree
    def __getstate__(self) -> dict[str, Any]:
        return {name: value for name, value in self.__dict__.items() if name != "learner"}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self.learner = self.learner_type(self)

    def output_axes(self) -> tuple[int, ...]:
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
            self.reset_slot(slot)
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

    def at_depth_bound(self, node: int) -> bool:
        """Whether node `node` lies at the depth bound (`max_depth`): a leaf there never splits."""
        bound = self.params.max_depth
        return bound is not None and bool(self.depth[node] >= bound)

    def block_limit(self, node: int) -> int:
        """The longest block of leaf `node`: grace_period, or with `Params.bound_block` k, k grace
        periods at the depth bound (a leaf there never splits: its attempts only step its value)."""
        return self.pending_limit() if self.at_depth_bound(node) else self.params.grace_period

    def pending_limit(self) -> int:
        """The longest block any leaf may hold (`block_limit` at its largest)."""
        params = self.params
        if params.bound_block is not None and params.max_depth is not None:
            return params.grace_period * params.bound_block
        return params.grace_period

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
        return np.zeros((columns, *self.output_axes(), WIDTH))

    def reserve_pending(self, rows: int) -> None:
        """Make room for `rows` pending instances per leaf (doubling, at most `pending_limit`)."""
        capacity = self.pending_g.shape[1]
        if rows <= capacity:
            return
        new = min(self.pending_limit(), max(rows, 2 * capacity))
        for name in ("pending_codes", "pending_g", "pending_h"):
            old = getattr(self, name)
            grown = np.zeros((old.shape[0], new, *old.shape[2:]), dtype=old.dtype)
            grown[:, :capacity] = old
            setattr(self, name, grown)

    def reset_slot(self, slot: int) -> None:
        """Forget what a slot's leaf learned since its last reset (after a value update, a fall back to
        its constant, or for a split's first child): statistics, total and pending block."""
        # (not filled with zeros: see _new_slot; an inactive slot keeps none)
        self.stats[slot] = self._new_stats() if self.active[slot] else self.no_stats()
        self.total[slot] = 0.0
        self.pending_n[slot] = 0

    def relayout(self, layout: Layout) -> None:
        """Adopt a new layout after features or categories were added.

        Existing columns move to their new place. A feature new to a leaf gets all the leaf's
        merged instances in its "missing" column, and code 0 for its pending instances, so every
        feature block keeps summarising every instance of the leaf.
        """
        old = self.layout
        stats = [self._new_stats(layout) if on else self.no_stats() for on in self.active[: self.n_slots]]
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
        if held_by and kernels.ENABLED and all(held.flags.c_contiguous for held in held_by):
            target = mapping[1:].astype(np.intp) - 1
            for held in held_by:  # (the same merges, slot by slot: see kernels.regrid_bins)
                kernels.regrid_bins(held.reshape(held.shape[0], -1, WIDTH), columns.start, target)
        elif held_by:
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
        bins = self.layout.bins
        if not math.isfinite(scale):
            shift = w * leaf_input(1, bins)
            self.weights[:n, ..., j] = 0.0
        elif scale >= bins and self.params.drop_far_terms:
            # the old range fits in one new bin (two at most), whose centre may lie far outside it:
            # rescaled, the term would give the values it was learned on its value at that centre and
            # extrapolate its full slope to the far value that grew the grid. Dropped, it keeps its
            # value at the old range's middle (input 0), the leaf's value
            shift = np.zeros_like(w)
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
        return self._served(nodes, sums_in_order(terms))

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
        if code >= lookup.size:  # exactly as long as needed, for the reason given in `split`
            grown = np.full(code + 1, NO_NODE, dtype=np.int32)
            grown[: lookup.size] = lookup
            self.tables[self.table[branch]] = lookup = grown
        child = self._new_leaf(
            parent=branch, value=self.value[branch].copy(), depth=int(self.depth[branch]) + 1
        )
        lookup[code] = child
        self.fit_budget()
        return child

    # -- learning (sgt.leaf) ---------------------------------------------------------------------
    def append(
        self,
        nodes: np.ndarray,
        codes: np.ndarray,
        g: np.ndarray,
        h: np.ndarray,
        rank: np.ndarray | None = None,
    ) -> None:
        """Add instances (in order) to their leaves' pending blocks; none may fill a block (see
        `LeafLearner.append`)."""
        self.learner.append(nodes, codes, g, h, rank)

    def first_full(self, nodes: np.ndarray) -> int:
        """Index of the first instance that would fill its leaf's pending block, or len(nodes)."""
        return self.learner.first_full(nodes)

    def learn_one(
        self, node: int, codes: Sequence[int] | np.ndarray, g: Any, h: Any, space: FeatureSpace
    ) -> bool:
        """Add one instance to leaf `node`; attempt a split when its block fills. True if split."""
        return self.learner.learn_one(node, codes, g, h, space)

    def attempt(self, node: int, space: FeatureSpace) -> bool:
        """Merge the leaf's full pending block and act on the best candidate. True if it split."""
        return self.learner.attempt(node, space)

    def evaluate(self, node: int) -> Candidate:
        """The first half of an attempt: the leaf's best candidate (see `LeafLearner.evaluate`)."""
        return self.learner.evaluate(node)

    def evaluate_leaves(self, nodes: list[int]) -> list[Candidate]:
        """`evaluate` of several leaves whose blocks are full, with the bits of one at a time."""
        return self.learner.evaluate_leaves(nodes)

    def act(self, node: int, candidate: Candidate, space: FeatureSpace) -> bool:
        """The second half of an attempt: apply the candidate if its F-test passes. True if split."""
        return self.learner.act(node, candidate, space)

    # -- splitting -----------------------------------------------------------------------------
    def nominal_on_path(self, node: int) -> set[int]:
        """Nominal features already split on between the root and `node` (split once per path)."""
        used = set()
        parent = int(self.parent[node])
        while parent != NO_NODE:
            if self.table[parent] >= 0:
                used.add(int(self.feature[parent]))
            parent = int(self.parent[parent])
        return used

    def split(self, node: int, slot: int, candidate: Candidate, space: FeatureSpace, served: int = 1) -> None:
        """Split the leaf; each child starts from its model plus its step (an adaptive leaf's step moves
        the predictor it `served` alone, as `LeafLearner._step_value` does)."""
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
    # An inactive adaptive leaf still makes its choice (`LeafLearner._choose`) as an active one does:
    # the choice reads the leaf's block alone (its g, h and codes), which an inactive leaf keeps, never
    # its split statistics; falling back from its linear term to its constant resets what it holds,
    # its total.
    def no_stats(self) -> np.ndarray:
        """An inactive slot's statistics: none."""
        return np.zeros((0, *self.output_axes(), WIDTH))

    def deactivate(self, slot: int) -> None:
        """Make a slot's leaf inactive: its split statistics are freed, it never splits again."""
        self.active[slot] = False
        self.stats[slot] = self.no_stats()

    def _node_bytes(self) -> int:
        """Bytes of one node in the node arrays (and its linear term, and an adaptive leaf's choice).

        Kept with the trailing axes it was computed for (the budget asks at every split): the arrays'
        types never change, and their trailing axes only with the outputs (`value`) and the features
        (`weights`)."""
        key = (self.value.shape[1:], self.weights.shape[1:], self.adaptive)
        if self._node_row is not None and self._node_row[0] == key:
            return self._node_row[1]
        names = NODE_ARRAYS + ADAPTIVE_ARRAYS if self.adaptive else NODE_ARRAYS
        row = sum(getattr(self, name).itemsize * math.prod(getattr(self, name).shape[1:]) for name in names)
        row += self.weights.itemsize * math.prod(self.weights.shape[1:])
        self._node_row = (key, row)
        return row

    def _slot_bytes(self) -> tuple[int, int]:
        """Bytes of one slot without its statistics, its pending block counted at its longest
        (`pending_limit` rows: the spare rows it may grow to), and of one active slot's statistics."""
        outputs = math.prod(self.output_axes())
        rows = self.pending_limit()
        codes = rows * self.layout.n_features * _CODE_BYTES
        fixed = outputs * WIDTH * 8 + codes + 2 * rows * outputs * 8 + 20
        return fixed, self.layout.n_columns * outputs * WIDTH * 8

    def budget_bytes(self) -> int:
        """What the budget holds to the cap: `nbytes` with every pending block at its longest."""
        fixed, stats = self._slot_bytes()
        nodes = self._node_bytes() * self.n_nodes + sum(t.nbytes for t in self.tables)
        # (count_nonzero: the count sum gives, in 0.6 us against 1.9 us; the budget asks at every split)
        return nodes + fixed * self.n_slots + stats * int(np.count_nonzero(self.active[: self.n_slots]))

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
            self.deactivate(slot)
            excess -= stats

    def room_for_split(self, slot: int, candidate: Candidate, n: float) -> str | None:
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
                    self.deactivate(freed)
                return ACTIVE
        return INACTIVE if budget + nodes - stats <= self.cap else None

    def children(self, node: int) -> list[int]:
        """A branch's children, in id order."""
        table = int(self.table[node])
        if table >= 0:
            return sorted(int(c) for c in self.tables[table] if c >= 0)
        return [int(self.left[node]), int(self.right[node])]

    # -- saving (sgt.tree_persistence) ---------------------------------------------------------
    def saved(self, prefix: str) -> tuple[dict[str, Any], list[NamedArray]]:
        """The tree's counters and its arrays (named ``<prefix>.<array>``) for sgt's format."""
        return saved(self, prefix)

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
        restore(tree, prefix, counters, arrays)
        return tree

    @classmethod
    def _empty(cls, params: Params, layout: Layout, counters: dict[str, Any]) -> Tree:
        """A fresh tree of the kind `counters` describe, for `from_saved` to fill."""
        return cls(params, layout)


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
