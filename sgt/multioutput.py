"""A multi-output SGT: one tree structure whose leaves hold a value (and a linear term) per output.

A boosted classifier's member with K - 1 outputs could grow K - 1 trees (one per class logit, each
with its own splits and split attempts, as SGTClassifier's committee) or one tree for all of them, as
multiclass gradient-boosting libraries do. This tree is the second: every record is routed once,
every leaf attempts once per block for all outputs, and a candidate's loss change is the sum of the
outputs' (each output takes its own Newton step in each child).

Its arrays are sgt.tree.Tree's with one more axis per output, after the node or slot (and the
column): `value` [nodes, K], `weights` [nodes, K, features], `stats` [slots, columns, K, 6], `total`
[slots, K, 6], `pending_g` / `pending_h` [slots, rows, K]. Every output sees the same instances, so
their counts agree; a candidate's variance is the sum of the outputs' variances, since the statistics
keep no covariance between outputs (they are taken as independent). The batch arithmetic mirrors the
one-record arithmetic as in Tree, so every learning path gives the same bits.

>>> import numpy as np
>>> from sgt.features import FeatureSpace
>>> from sgt.tree import Layout, Params
>>> space = FeatureSpace(bins=8, warm_up=10)
>>> x = np.random.default_rng(0).uniform(0.0, 1.0, 60)
>>> codes = space.encode_array(x[:, None], np.ones(60, dtype=bool))
>>> tree = MultiOutputTree(Params(0.1, 20, 0.1, 0.0, None), Layout(space), outputs=2)
>>> for value, row in zip(x, codes):  # output 0 learns -1 below 0.5 and 1 above; output 1 nothing
...     g = -1.0 if value < 0.5 else 1.0
...     _ = tree.learn_one(tree.route_one(row)[0], row, [g, 0.0], [1.0, 1.0], space)
>>> tree.n_splits > 0, tree.value[: tree.n_nodes, 1].tolist() == [0.0] * tree.n_nodes
(True, True)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np

from sgt import kernels
from sgt.layout import Layout, LeafInputs, Params
from sgt.leaf import LeafLearner
from sgt.ordered import solve_positive_definite_many, sums_in_order
from sgt.split import (
    Candidate,
    best_nominal_outputs,
    best_numeric_outputs,
    null_candidate_outputs,
)
from sgt.stats import WIDTH, N, block_stats, merge
from sgt.tree import NODE_ARRAYS, Tree

__all__ = ["MultiOutputTree", "load_tree", "widened"]


class MultiOutputLearner(LeafLearner):
    """The leaf learning of a `MultiOutputTree`: the merge, the Newton step and the candidates with
    the outputs side by side (each output's numbers in the order one output's would be)."""

    def evaluate_leaves(self, nodes: list[int]) -> list[Candidate]:
        """One leaf at a time: the outputs side by side already fill each leaf's numpy passes."""
        return [self.evaluate(node) for node in nodes]

    def _newton_linear(self, node: int, slot: int, g_at: np.ndarray | None = None) -> None:
        """Each output's Newton step of its linear term on the block: LeafLearner._newton_linear with the
        outputs side by side (the same operations on each output's numbers, in the same order, so
        each output gets the bits it would get alone), their systems solved together. (`g_at`: always
        None here, as multi-output trees are never adaptive.)"""
        tree = self.tree
        size, k = int(tree.pending_n[slot]), tree.n_outputs
        layout = tree.layout
        numeric = layout.numeric
        if not numeric.size:
            return
        if kernels.ENABLED:
            first, second = layout.pairs
            kernels.linear_steps(
                tree.pending_codes[slot, :size],
                numeric,
                layout.inputs,
                tree.pending_g[slot, :size],
                tree.pending_h[slot, :size],
                first,
                second,
                layout.pair_of,
                tree.params.linear_lambda,
                tree.weights[node],
                tree.value[node],
            )
            return
        width = numeric.size
        z = layout.inputs[tree.pending_codes[slot, :size].T[numeric]]  # [features, instances]
        g, h = tree.pending_g[slot, :size].T, tree.pending_h[slot, :size].T  # [outputs, instances]
        weighted = np.empty((k, width + 1, size))
        weighted[:, 0] = h
        np.multiply(z[None], h[:, None], out=weighted[:, 1:])
        sums = sums_in_order(weighted.reshape(-1, size).T).reshape(k, width + 1)
        stepping = np.flatnonzero(sums[:, 0] > 0.0)  # (an output without a positive h sum: none)
        if not stepping.size:
            return
        with np.errstate(divide="ignore", invalid="ignore"):
            centre = sums[:, 1:] / sums[:, :1]
        centred = z[None] - centre[:, :, None]
        first, second = layout.pairs
        products = np.empty((k, width + first.size, size))
        np.multiply(centred, g[:, None], out=products[:, :width])
        np.multiply(centred[:, first], centred[:, second], out=products[:, width:])
        products[:, width:] *= h[:, None]
        means = sums_in_order(products.reshape(-1, size).T).reshape(k, -1) / size
        hessian = means[:, width:][:, layout.pair_of] + tree.params.linear_lambda * np.eye(width)
        steps = solve_positive_definite_many(hessian[stepping], means[stepping, :width])
        for out, step in zip(stepping.tolist(), steps.tolist()):
            self._linear_step(node, step, centre[out], (out,))

    def _merge_pending(self, slot: int) -> None:
        """LeafLearner._merge_pending with each output's statistics from one `block_stats`: output k's groups
        come after output k - 1's, each summed in instance order (with sgt.kernels: every output in one
        pass, the same sums)."""
        tree = self.tree
        if not tree.active[slot]:
            self._merge_total(slot)
            return
        size, k = int(tree.pending_n[slot]), tree.n_outputs
        if kernels.ENABLED:
            kernels.merge_block(
                tree.stats[slot],
                tree.total[slot],
                tree.pending_codes[slot, :size],
                tree.pending_g[slot, :size],
                tree.pending_h[slot, :size],
                tree.layout.offsets,
            )
            tree.pending_n[slot] = 0
            return
        layout = tree.layout
        width = layout.n_features + 1
        groups = layout.n_columns + 1  # the columns, then the total
        index = np.zeros((size, width), dtype=np.intp)
        index[:, :-1] = tree.pending_codes[slot, :size]
        index += layout.offsets
        every = (index.ravel()[None, :] + (np.arange(k) * groups)[:, None]).ravel()
        g = np.repeat(tree.pending_g[slot, :size].T, width, axis=1).ravel()
        h = np.repeat(tree.pending_h[slot, :size].T, width, axis=1).ravel()
        block = block_stats(every, g, h, k * groups).reshape(k, groups, WIDTH).transpose(1, 0, 2)
        merged = merge(np.concatenate([tree.stats[slot], tree.total[slot][None]]), block)
        tree.stats[slot], tree.total[slot] = merged[:-1], merged[-1]
        tree.pending_n[slot] = 0

    def _null_candidate(self, slot: int) -> Candidate:
        tree = self.tree
        return null_candidate_outputs(tree.total[slot], tree.params.lambda_)

    def _nominal_candidate(self, block: np.ndarray, n: float, feature: int) -> Candidate | None:
        tree = self.tree
        return best_nominal_outputs(block, tree.params.lambda_, tree.params.gamma, n, feature)

    def _best_numeric(self, slots: list[int], chosen: np.ndarray | None = None) -> list[Candidate | None]:
        tree = self.tree
        if chosen is not None and not chosen.size:
            return [None]
        if kernels.ENABLED:
            return self._compiled_numeric(slots, chosen)
        params, layout = tree.params, tree.layout
        columns = layout.numeric_columns if chosen is None else layout.numeric_columns[chosen]
        features = layout.numeric if chosen is None else layout.numeric[chosen]
        out = []
        for slot in slots:
            # [columns, outputs, 6] -> [outputs, 6, F, B + 1]
            planes = np.take(tree.stats[slot].transpose(1, 2, 0), columns, axis=2)
            n = tree.merged_count(slot)
            out.append(best_numeric_outputs(planes, params.lambda_, params.gamma, n, features))
        return out


class MultiOutputTree(Tree):
    """An SGT with `outputs` raw scores per record (two or more), one structure for all of them.

    Parameters
    ----------
    params, layout, root_value:
        As `sgt.tree.Tree`'s.
    outputs:
        Raw scores per record, two or more.
    """

    learner_type: ClassVar[type[LeafLearner]] = MultiOutputLearner

    def __init__(self, params: Params, layout: Layout, outputs: int, root_value: float = 0.0) -> None:
        if outputs < 2:
            raise ValueError(f"outputs must be an integer >= 2, got {outputs!r}")
        self.n_outputs = int(outputs)
        super().__init__(params, layout, root_value)

    def output_axes(self) -> tuple[int, ...]:
        return (self.n_outputs,)

    def merged_count(self, slot: int) -> float:
        return float(self.total[slot, 0, N])  # every output's count is the same

    # -- prediction ----------------------------------------------------------------------------
    def predict_outputs(self, nodes: np.ndarray, inputs: LeafInputs, first: int = 0) -> np.ndarray:
        """Each output's raw score [outputs, rows]: the value, plus the linear term summed feature by
        feature in layout order (as `predict_outputs_one`)."""
        if self.linear and inputs.columns.size and kernels.ENABLED:
            return kernels.predict_linear(
                nodes, self.value, self.weights, inputs.columns, inputs.values, first
            )
        values = self.value[nodes].T
        if not self.linear or not inputs.columns.size:
            return np.ascontiguousarray(values)
        weights = self.weights[nodes]  # [rows, outputs, features]
        if not inputs.every_column:
            weights = weights[:, :, inputs.columns]
        rows, k = nodes.size, self.n_outputs
        terms = np.empty((1 + inputs.columns.size, k, rows))
        terms[0] = values
        np.multiply(
            weights.transpose(2, 1, 0), inputs.values[first : first + rows].T[:, None, :], out=terms[1:]
        )
        return sums_in_order(terms.reshape(terms.shape[0], k * rows)).reshape(k, rows)

    def predict_rows(self, nodes: np.ndarray, inputs: LeafInputs, first: int = 0) -> np.ndarray:
        raise TypeError("a multi-output tree predicts several outputs: use predict_outputs")

    def predict_one(self, node: int, codes: Sequence[int] | np.ndarray) -> float:
        raise TypeError("a multi-output tree predicts several outputs: use predict_outputs_one")

    def predict_outputs_one(self, node: int, codes: Sequence[int] | np.ndarray) -> list[float]:
        values: list[float] = self.value[node].tolist()
        if not self.linear:
            return values
        inputs, n, numeric = self.layout.input_list, len(codes), self.layout.numeric_list
        out = []
        for value, weights in zip(values, self.weights[node].tolist()):
            for j in numeric:
                if j < n:
                    value = value + weights[j] * inputs[int(codes[j])]
            out.append(value)
        return out

    # -- learning ------------------------------------------------------------------------------
    def append(
        self,
        nodes: np.ndarray,
        codes: np.ndarray,
        g: np.ndarray,
        h: np.ndarray,
        rank: np.ndarray | None = None,
    ) -> None:
        """Tree.append with `g` and `h` [outputs, instances]."""
        super().append(nodes, codes, g.T, h.T, rank)

    # -- saving --------------------------------------------------------------------------------
    def saved(self, prefix: str) -> tuple[dict[str, Any], list[tuple[str, np.ndarray]]]:
        counters, arrays = super().saved(prefix)
        return {**counters, "outputs": self.n_outputs}, arrays

    @classmethod
    def _empty(cls, params: Params, layout: Layout, counters: dict[str, Any]) -> Tree:
        return cls(params, layout, int(counters["outputs"]))


def load_tree(
    params: Params, layout: Layout, prefix: str, counters: dict[str, Any], arrays: dict[str, np.ndarray]
) -> Tree:
    """The tree `Tree.saved` or `MultiOutputTree.saved` wrote (the counters say which)."""
    kind = MultiOutputTree if "outputs" in counters else Tree
    return kind.from_saved(params, layout, prefix, counters, arrays)


def widened(tree: Tree, outputs: int, positions: Sequence[int] | None = None) -> MultiOutputTree:
    """`tree` (single- or multi-output) with `outputs` outputs, its own at `positions` (default: the
    first ones, in order) and new ones elsewhere.

    The structure, the slots and the blocks stay; a new output starts at 0 in every node (value and
    linear term), and its statistics count the instances its leaves hold already with zero gradient
    and Hessian (so that every output keeps the same counts): it learns from the next record on.
    """
    old = tree.n_outputs
    kept = list(range(old)) if positions is None else [int(k) for k in positions]
    if len(kept) != old or len(set(kept)) != old or not all(0 <= k < outputs for k in kept):
        raise ValueError(f"{old} outputs cannot take the positions {kept} of {outputs}")
    added = [k for k in range(outputs) if k not in kept]
    wide = MultiOutputTree(tree.params, tree.layout, outputs)
    structure = [name for name in NODE_ARRAYS if name != "value"]  # (the values widen below)
    counters = ("n_splits", "n_updates", "n_nodes", "n_slots", "tables", "slot_node", "pending_n", "block")
    budget = ("active", "promise", "cap")  # (the memory budget's: see Tree.fit_budget)
    for name in (*counters, *budget, *structure, "pending_codes"):
        setattr(wide, name, getattr(tree, name))

    def grown(array: np.ndarray, axis: int) -> np.ndarray:  # the output axis at `axis`, widened
        if old == 1:
            array = np.expand_dims(array, axis)
        shape = list(array.shape)
        shape[axis] = outputs
        out = np.zeros(shape)
        out[(slice(None),) * axis + (kept,)] = array
        return out

    wide.value = grown(tree.value, 1)
    wide.weights = grown(tree.weights, 1)
    wide.pending_g = grown(tree.pending_g, 2)
    wide.pending_h = grown(tree.pending_h, 2)
    wide.stats = [grown(held, 1) for held in tree.stats]
    wide.total = grown(tree.total, 1)
    # the counts of the new outputs: the instances already merged
    for held in wide.stats:
        held[:, added, N] = held[:, kept[:1], N]
    wide.total[:, added, N] = wide.total[:, kept[:1], N]
    return wide
