"""How a leaf learns: its pending block, the split attempt, its value's and linear term's steps.

A `Tree` holds its leaves' learning state in flat arrays (see sgt.tree); its `LeafLearner` does the
arithmetic on them. Pending instances are merged into a leaf's statistics only when the leaf attempts
a split, one block of exactly `block[slot]` instances at a time (paper, section 3.3: the attempt
happens every grace_period instances). A new leaf's first block holds `grace_start * 2^depth`
instances and each attempt that leaves it a leaf doubles it, up to `grace_period`: a young tree moves
its values and makes its first splits after a handful of records instead of a full grace period, an
old leaf attempts as the paper's does, and deep leaves (most of them) add few attempts, which cost
time. With `Params.bound_block` k, a leaf at the depth bound (which never splits) doubles on up to k
grace periods (`Tree.block_limit`), and back to one grace period when an attempt moves its value (after
a drift its value follows as fast as before; where its value has settled it attempts seldom). The block
boundaries are therefore fixed by the algorithm, not by how a caller batched its records, which makes
every learning path give bit-identical statistics.

The attempt (paper section 3, with the conventions of the authors' public code): evaluate "update the
leaf value only" and the best split of every feature, take the candidate with the lowest penalised
mean loss change (the null candidate wins ties, then the earlier feature), and apply it iff its F-test
gives p < delta and its mean is negative. A value update moves the leaf by its delta and resets its
statistics; a split gives each child the parent's value plus its delta. A linear leaf first takes a
Newton step of its linear term on the block; an adaptive leaf first chooses which of its linear term
and its constant it serves next (`LeafLearner._choose`). Those steps of the linear term are
sgt.linear_term's `LinearTermSteps`, the learner's base class; this module holds the rest.

The learner is an object the tree owns rather than functions over the tree because a multi-output
tree learns with other arithmetic (sgt.multioutput's learner overrides the merge, the Newton step and
the candidates), and rather than a part of `Tree` so that the structure and routing read on their own.
"""

from __future__ import annotations

import math
import weakref
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from sgt import kernels
from sgt.features import FeatureSpace
from sgt.linear_term import LinearTermSteps
from sgt.split import (
    Candidate,
    best_nominal,
    best_numeric_compiled,
    best_numeric_leaves,
    best_numeric_planes,
    f_test,
    null_candidate,
    pooled,
)
from sgt.stats import MH, WIDTH, N, block_stats, merge

if TYPE_CHECKING:
    from sgt.layout import Layout
    from sgt.tree import Tree

__all__ = ["ACTIVE", "FIRST_FULL_WINDOW", "INACTIVE", "LeafLearner", "subspace"]

# how the memory budget holds a split: with active children, or inactive ones (see Tree.room_for_split)
ACTIVE, INACTIVE = "active", "inactive"
# the first prefix LeafLearner.first_full searches for a fill (then 4x longer ones)
FIRST_FULL_WINDOW = 256


class LeafLearner(LinearTermSteps):
    """The learning of a tree's leaves: pending blocks, attempts, merges, candidates, and (from its
    base, sgt.linear_term's `LinearTermSteps`) the linear term's Newton steps and an adaptive leaf's
    choice.

    It keeps no state of its own: everything it reads and writes is the tree's (so a tree saves,
    restores and copies as before). A `Tree` makes its own (`Tree.learner`) and forwards its learning
    methods to it.

    Parameters
    ----------
    tree:
        The tree whose leaves it learns.
    """

    def __init__(self, tree: Tree) -> None:
        # a weak reference: the tree owns its learner, and a strong one both ways would make every tree a
        # reference cycle, freed only by the cyclic collector, which the worker runs seldom; trees a drift
        # replaced then held their arrays for minutes (the soak's RSS grew 8 MB a minute)
        self._tree = weakref.ref(tree)

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
        tree = self.tree
        if kernels.ENABLED and rank is not None and g.ndim == 1:
            arrays = (nodes, codes, g, h, rank, tree.slot, tree.pending_n)
            if not kernels.append_rows(*arrays, tree.pending_codes, tree.pending_g, tree.pending_h):
                tree.reserve_pending(int((tree.pending_n[tree.slot[nodes]] + rank).max()) + 1)
                kernels.append_rows(*arrays, tree.pending_codes, tree.pending_g, tree.pending_h)
            return
        slots = tree.slot[nodes]
        if rank is None:
            order = np.argsort(slots, kind="stable")
            sorted_slots = slots[order]
            first = np.searchsorted(sorted_slots, sorted_slots, side="left")
            rank = np.empty_like(order)
            rank[order] = np.arange(order.size) - first
        position = tree.pending_n[slots] + rank
        tree.reserve_pending(int(position.max()) + 1 if position.size else 0)
        tree.pending_codes[slots, position, : codes.shape[1]] = codes
        tree.pending_g[slots, position] = g
        tree.pending_h[slots, position] = h
        np.add.at(tree.pending_n, slots, 1)

    def first_full(self, nodes: np.ndarray) -> int:
        """Index of the first instance that would fill its leaf's pending block, or len(nodes).

        Whether instance i fills its block depends only on instances 0..i, so a prefix that holds a
        fill holds the first one. The search looks at growing prefixes: the next fill is usually a
        few dozen instances away, and sorting a short prefix costs far less than sorting them all.
        """
        tree = self.tree
        size = nodes.size
        if size == 0:
            return 0
        slots = tree.slot[nodes]
        need = tree.block[slots] - tree.pending_n[slots]
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
        tree = self.tree
        slot = int(tree.slot[node])
        position = int(tree.pending_n[slot])
        if position >= tree.pending_g.shape[1]:
            tree.reserve_pending(position + 1)
        tree.pending_codes[slot, position, : len(codes)] = codes
        tree.pending_g[slot, position] = g
        tree.pending_h[slot, position] = h
        tree.pending_n[slot] = position + 1
        if position + 1 < tree.block[slot]:
            return False
        return self.attempt(node, space)

    def attempt(self, node: int, space: FeatureSpace) -> bool:
        """Merge the leaf's full pending block and act on the best candidate. True if it split."""
        return self.act(node, self.evaluate(node), space)

    def evaluate(self, node: int) -> Candidate:
        """The first half of an attempt: the linear term's Newton step, the merge of the leaf's full
        block, and the best candidate. It changes this leaf only, and nothing reads the leaf before
        `act` (which finishes the attempt) but the attempt itself."""
        tree = self.tree
        slot = int(tree.slot[node])
        if self._evaluates_compiled(slot):
            return self._evaluate_active(node, slot)
        if tree.linear and tree.params.linear_steps:
            self._newton_linear(node, slot, self._choose(node, slot))
        self._merge_pending(slot)
        if not tree.active[slot]:  # (no split: `_best_candidates`' null candidate, without its search)
            return self._null_candidate(slot)
        return self._best_candidate(node, slot)

    def evaluate_leaves(self, nodes: list[int]) -> list[Candidate]:
        """`evaluate` of several leaves whose blocks are full, with one numpy pass for all of them
        where the arithmetic allows (the same bits as one at a time: see `_merge_leaves` and
        sgt.split.best_numeric_leaves)."""
        tree = self.tree
        if kernels.ENABLED and self._fuses():  # (the tree's checks once for all its leaves)
            return [self._evaluate_fused(node) for node in nodes]
        if kernels.ENABLED or len(nodes) == 1:
            # (each leaf's evaluation reads its own alone; with the kernels the numpy pass below would
            # merge and search its leaves one at a time too, with more Python around them)
            return [self.evaluate(node) for node in nodes]
        slots = [int(tree.slot[node]) for node in nodes]
        if tree.adaptive and tree.params.linear_steps:  # each leaf's own g (see _choose)
            for node, slot in zip(nodes, slots):
                self._newton_linear(node, slot, self._choose(node, slot))
        elif tree.linear and tree.params.linear_steps:
            self._newton_leaves(nodes, slots)
        self._merge_leaves(np.array(slots, dtype=np.intp))
        return self._best_candidates(nodes, slots)

    def _evaluates_compiled(self, slot: int) -> bool:
        """Whether `evaluate` takes `_evaluate_active` for the leaf at `slot`: an active leaf of a tree
        that `_fuses`."""
        return self._fuses() and bool(self.tree.active[slot])

    def _fuses(self) -> bool:
        """Whether the tree's active leaves evaluate by the fused kernels (`_evaluate_active`): with the
        kernels, a one-output tree (not a subclass's) with constant or linear leaves, numeric features
        only, and neither a linear gate nor feature subspaces."""
        tree = self.tree
        params = tree.params
        return (
            kernels.ENABLED
            and type(self) is LeafLearner
            and tree.n_outputs == 1
            and not tree.adaptive
            and not tree.layout.nominal
            and params.linear_gate is None
            and not params.feature_share
        )

    def _evaluate_fused(self, node: int) -> Candidate:
        """`evaluate` of a leaf of a tree that `_fuses`: `_evaluate_active` if it is active; an inactive
        constant leaf's by `_evaluate_bound` too (as `evaluate` does it: `_merge_total`, then
        `_null_candidate`), the others' as `evaluate` does it."""
        tree = self.tree
        slot = int(tree.slot[node])
        if tree.active[slot]:
            return self._evaluate_active(node, slot)
        if not tree.linear:
            return self._evaluate_bound(slot)
        return self.evaluate(node)

    def _evaluate_active(self, node: int, slot: int) -> Candidate:
        """`evaluate` of an active leaf of a tree that `_fuses`, by the fused kernels: `_evaluate_bound`
        for a constant leaf at the depth bound, `_evaluate_compiled` for the others."""
        bound = self.tree.at_depth_bound(node)
        if bound and not self.tree.linear:
            return self._evaluate_bound(slot)
        return self._evaluate_compiled(node, slot, search=not bound)

    def _evaluate_bound(self, slot: int) -> Candidate:
        """`evaluate` of a constant leaf of a tree that `_fuses` which never splits (at the depth bound,
        or inactive; no Newton step, no split search): the merge into its total alone (as
        `_merge_pending` merges such a leaf's block), then the null candidate, by sgt.kernels'
        evaluate_bound in one call (`_merge_total`'s and `_null_candidate`'s bits), with fewer
        arguments to pass than evaluate_leaf and none of the search's results to unpack: half the
        default classifier's attempts on SEA are of such leaves (a quarter at its forest's depth
        bound, a quarter made inactive by the forest's memory budget)."""
        tree = self.tree
        delta, mean, variance = kernels.evaluate_bound(
            tree.total, tree.pending_g, tree.pending_h, tree.pending_n, slot, tree.params.lambda_
        )
        return Candidate(-1, mean, variance, np.array([delta]))

    def _total_only(self, slot: int) -> bool:
        """Whether the leaf at `slot` merges its blocks into its total alone although it is active: a
        constant leaf of a one-output tree at the depth bound. It never splits, and its value update
        reads its total alone, so its split statistics would never be read: left as they are (zeros,
        whose memory pages a new slot never writes), they cost neither the merge nor memory nor bytes
        of a save. (Its total has the bits the whole merge gives it: see `_merge_total`. The budget still
        counts its statistics, so it makes the leaves inactive that it made before.)"""
        tree = self.tree
        return (
            not tree.linear
            and tree.n_outputs == 1
            and type(self) is LeafLearner
            and tree.at_depth_bound(int(tree.slot_node[slot]))
        )

    def _evaluate_compiled(self, node: int, slot: int, search: bool) -> Candidate:
        """`evaluate` by sgt.kernels' evaluate_leaf, in one call: the Newton step of `_newton_compiled`,
        the merge of `_merge_pending` and the candidates of `_best_candidates` (the null one, and with
        `search`, the leaf not at the depth bound, the best numeric split, which replaces it if its
        mean is lower), the same bits."""
        tree = self.tree
        params, layout = tree.params, tree.layout
        first, second = layout.pairs
        found = kernels.evaluate_leaf(
            node,
            slot,
            bool(tree.linear and params.linear_steps),
            search,
            tree.pending_codes,
            tree.pending_g,
            tree.pending_h,
            tree.pending_n,
            layout.numeric,
            layout.inputs,
            first,
            second,
            layout.pair_of,
            params.linear_lambda,
            tree.weights,
            tree.value,
            tree.stats[slot][:, None],
            tree.total,
            layout.offsets,
            layout.numeric_columns,
            params.lambda_,
            params.gamma,
        )
        delta, mean, variance, split_mean, f, threshold, split_variance, left, right, to_left = found
        if split_mean < mean:  # (never where no split is found: its mean is +inf)
            return Candidate(
                feature=int(layout.numeric[int(f)]),
                mean=split_mean,
                variance=split_variance,
                deltas=np.array([left, right]),
                threshold=int(threshold),
                missing_child=0 if to_left == 1.0 else 1,
            )
        return Candidate(-1, mean, variance, np.array([delta]))

    def act(self, node: int, candidate: Candidate, space: FeatureSpace) -> bool:
        """The second half of an attempt: apply the candidate if its F-test passes (a value update,
        or a split, which hands out node ids and slots: so attempts act in the order of their rows).
        True if the leaf split."""
        tree = self.tree
        slot = int(tree.slot[node])
        n = tree.merged_count(slot)
        # (read once: nothing below changes it before the budget's `deactivate`, which ends its use;
        # room_for_split makes other leaves inactive, never this one)
        active = bool(tree.active[slot])
        if not active and candidate.is_split:  # (made inactive after an early evaluation: see
            # sgt.leafwise; a candidate that is no split is the null one of the total already, as
            # evaluated: `_null_candidate`'s bits, or evaluate_leaf's, the same)
            candidate = self._null_candidate(slot)
        passed = candidate.mean < 0.0 and f_test(candidate.mean, candidate.variance, n) < self._level(slot, n)
        if not passed and active and tree.params.blind_after is not None:
            blind = self._blind_candidate(node, slot, n, candidate)
            if blind is not None:
                candidate, passed = blind, True
        split = candidate.is_split
        room = tree.room_for_split(slot, candidate, n) if passed and split else ACTIVE
        if room is None:
            tree.deactivate(slot)  # the budget holds no split of it: it stops gathering statistics
            passed = False
        elif active:
            tree.promise[slot] = max(0.0, -candidate.mean * n) if split else 0.0
        if not (passed and split):  # the leaf stays a leaf: its next block is longer
            longest = tree.block_limit(node)
            if passed and longest > tree.params.grace_period:  # (a value update at the depth bound)
                tree.block[slot] = tree.params.grace_period
            else:
                tree.block[slot] = min(2 * int(tree.block[slot]), longest)
        served = self._serve_next(node)
        if not passed:
            if tree.adaptive and served and not tree.serving[node]:
                tree.reset_slot(slot)  # see _serve_next
            return False
        if not split:
            self._step_value(node, candidate.deltas[0], served)
            tree.reset_slot(slot)
            tree.n_updates += 1
            return False
        tree.split(node, slot, candidate, space, served)
        if room == INACTIVE:
            for child in tree.children(node):
                tree.deactivate(int(tree.slot[child]))
        return True

    def _level(self, slot: int, n: float) -> float:
        """The F-test's level of an attempt of the leaf at `slot` on `n` records: delta, or with
        `Params.relax_growth` g, delta * g^(n / grace_period) up to `relax_cap`, n counting the records
        the leaf gathered since its last split or value update: a member's leaf facing an XOR-like
        concept, where no single split lowers the loss at first, splits in the end. With
        `relax_impurity`, only a leaf whose predictions are that uncertain relaxes (`_impurity`): where
        the model predicts well already (a linear concept its linear leaves fit), a split on weak
        evidence fits noise. A function of the statistics alone, so every learning path and a restored
        tree take the same level."""
        params = self.tree.params
        growth, cap, delta = params.relax_growth, params.relax_cap, params.delta
        if growth is None or growth <= 1.0 or cap <= delta:
            return delta
        if params.relax_impurity is not None and not self._impurity(slot) >= params.relax_impurity:
            return delta
        steps = n / params.grace_period
        if steps * math.log(growth) >= math.log(cap / delta):
            return cap  # (no power taken: a leaf that gathered records for long would overflow it)
        return min(cap, delta * growth**steps)

    def _blind_candidate(self, node: int, slot: int, n: float, best: Candidate) -> Candidate | None:
        """A split without significance, or None: with `Params.blind_after` k, a leaf that gathered k
        grace periods of records since its last split or value update, whose `best` candidate failed
        its F-test and whose predictions are still near a coin toss (`_impurity` of `blind_impurity` or
        more) takes `best` if it is a split; if the null candidate won (no split lowers the penalised
        loss), it splits at the median of its records on one numeric feature, the one at its depth in
        the numeric features' order (the next one if that cannot split them). Where no single split
        lowers the loss (an XOR, a checkerboard) a greedy tree never splits; its children, each holding
        part of the pattern, find the gain the parent's records hide (as a Mondrian tree splits without
        gain). A leaf whose predictions are not near a coin toss (one that fits a noisy boundary with its
        linear term) keeps waiting for evidence. Deterministic: a function of the leaf's statistics and
        depth, so every learning path and a restored tree split alike."""
        tree = self.tree
        params, layout = tree.params, tree.layout
        numeric = layout.numeric_list
        if (
            params.blind_after is None
            or tree.n_outputs != 1
            or n < params.blind_after * params.grace_period
            or tree.at_depth_bound(node)
            or not self._impurity(slot) >= params.blind_impurity
        ):
            return None
        if best.is_split:
            return best  # (its F-test failed: taken without significance)
        depth = int(tree.depth[node])
        stats = tree.stats[slot]
        for step in range(len(numeric)):
            feature = numeric[(depth + step) % len(numeric)]
            first = int(layout.offsets[feature])
            columns = stats[first : first + layout.bins + 1]  # the missing code 0, then bins 1..B
            candidate = _median_split(feature, columns, params.lambda_)
            if candidate is not None:
                return candidate
        return None

    def _impurity(self, slot: int) -> float:
        """How uncertain the leaf's predictions were on the records its statistics hold: the mean Hessian
        summed over the outputs, doubled for one output. Under the softmax cross-entropy a class's
        Hessian is p (1 - p), so this is the Gini impurity of the predicted probabilities, 2 p (1 - p)
        with two classes (0.5 at the most), 1 - sum p^2 with a score per class (each weighed by the
        record's bagging weight)."""
        total = self.tree.total
        if total.ndim == 2:  # one output ([slots, 6]: a scalar, without the 0-d array of `...`)
            return 2.0 * float(total[slot, MH])
        return math.fsum(total[slot, :, MH].tolist())

    def _serve_next(self, node: int) -> int:
        """What the leaf served during its block (1: its linear term, or the one model of a tree that is
        not adaptive), after setting what an adaptive leaf serves next by its tally.

        A leaf that falls back from its linear term to its constant resets its statistics, which hold
        the linear term's gradients: one that diverged left g in the thousands there, whose variance
        would fail every later F-test, so the leaf would never split. Only this change resets: a reset
        at every change of predictor loses (docs/decisions.md, "Trees: how a leaf learns")."""
        tree = self.tree
        if not tree.adaptive:
            return 1
        served = int(tree.serving[node])
        tree.serving[node] = int(float(tree.tally[node]) < 0.0)
        return served

    def _step_value(self, node: int, delta: Any, served: int) -> None:
        """A value update by `delta`, computed from the g and h of the predictions the leaf `served`: an
        adaptive leaf moves that predictor alone (the other took its own step in `_choose`)."""
        tree = self.tree
        if not tree.adaptive or not tree.layout.numeric.size:  # (no linear term: the value is the constant)
            tree.value[node] += delta
        elif served:
            tree.value[node] += delta
            tree.anchor[node] -= delta
        else:
            tree.anchor[node] += delta

    def _merge_leaves(self, slots: np.ndarray) -> None:
        """`_merge_pending` of several slots in one pass: each slot's statistics take their own
        columns of one `block_stats` (whose sums run in instance order within each column) and the
        merge is elementwise, so every slot gets the bits it gets alone."""
        tree = self.tree
        if kernels.ENABLED or not tree.active[slots].all() or any(map(self._total_only, slots.tolist())):
            for slot in slots.tolist():
                self._merge_pending(slot)
            return
        sizes = tree.pending_n[slots]
        capacity = tree.pending_g.shape[1]
        held = np.arange(capacity) < sizes[:, None]  # [slots, capacity]: the pending instances
        g = tree.pending_g[slots][held]
        h = tree.pending_h[slots][held]
        layout = tree.layout
        width = layout.n_features + 1
        columns = layout.n_columns + 1  # each slot's statistics, then its total (as `_merge_pending`)
        index = np.zeros((g.size, width), dtype=np.intp)
        index[:, :-1] = tree.pending_codes[slots][held]
        index += layout.offsets
        index += np.repeat(np.arange(slots.size) * columns, sizes)[:, None]
        block = block_stats(index.ravel(), np.repeat(g, width), np.repeat(h, width), slots.size * columns)
        held = np.stack([tree.stats[slot] for slot in slots.tolist()])
        merged = merge(
            np.concatenate([held, tree.total[slots][:, None]], axis=1),
            block.reshape(slots.size, columns, WIDTH),
        )
        for slot, rows in zip(slots.tolist(), merged):
            tree.stats[slot][...] = rows[:-1]  # (into the slot's own array: a view would keep `merged`)
        tree.total[slots] = merged[:, -1]
        tree.pending_n[slots] = 0

    def _merge_pending(self, slot: int) -> None:
        """Merge the slot's pending block into its statistics (sgt.stats) and empty the block (into its
        total alone where it gathers no split statistics: inactive, or `_total_only`)."""
        tree = self.tree
        if not tree.active[slot] or self._total_only(slot):
            self._merge_total(slot)
            return
        size = int(tree.pending_n[slot])
        if kernels.ENABLED:
            kernels.merge_block(  # (the kernel's output axis: one here)
                tree.stats[slot][:, None],
                tree.total[slot][None],
                tree.pending_codes[slot, :size],
                tree.pending_g[slot, :size, None],
                tree.pending_h[slot, :size, None],
                tree.layout.offsets,
            )
            tree.pending_n[slot] = 0
            return
        g = tree.pending_g[slot, :size]
        h = tree.pending_h[slot, :size]
        layout = tree.layout
        width = layout.n_features + 1
        # one column of statistics per feature and code, plus one (after them all) that takes every
        # instance: the leaf's total, from the same bincounts in the same instance order
        index = np.zeros((size, width), dtype=np.intp)
        index[:, :-1] = tree.pending_codes[slot, :size]
        index += layout.offsets
        block = block_stats(index.ravel(), np.repeat(g, width), np.repeat(h, width), layout.n_columns + 1)
        merged = merge(np.concatenate([tree.stats[slot], tree.total[slot : slot + 1]]), block)
        tree.stats[slot], tree.total[slot] = merged[:-1], merged[-1]
        tree.pending_n[slot] = 0

    def _best_candidate(self, node: int, slot: int) -> Candidate:
        return self._best_candidates([node], [slot])[0]

    def _best_candidates(self, nodes: list[int], slots: list[int]) -> list[Candidate]:
        """Each leaf's best candidate (the null one, the best numeric split, each nominal split), the
        numeric splits of all the leaves searched in one pass (sgt.split.best_numeric_leaves)."""
        tree = self.tree
        params, layout = tree.params, tree.layout
        bests = [self._null_candidate(slot) for slot in slots]
        open_ = [k for k, node in enumerate(nodes) if not tree.at_depth_bound(node) and tree.active[slots[k]]]
        # the best numeric split stands for every numeric feature: the scan below takes the lowest
        # mean, the earliest feature on ties, and best_numeric breaks its ties the same way
        by_feature: list[dict[int, Candidate | None]] = [{} for _ in nodes]
        allowed = {k: self._subspace(nodes[k], slots[k]) for k in open_} if params.feature_share else {}
        if layout.numeric.size and open_:
            if allowed:  # each leaf its own features: a search each
                chosen = [np.flatnonzero(allowed[k][layout.numeric]) for k in open_]
                numeric = [self._best_numeric([slots[k]], c)[0] for k, c in zip(open_, chosen)]
            else:
                numeric = self._best_numeric([slots[k] for k in open_])
            for k, candidate in zip(open_, numeric):
                if candidate is not None:
                    by_feature[k][candidate.feature] = candidate
        for k in open_:
            self._nominal_candidates(nodes[k], slots[k], by_feature[k], allowed.get(k))
            for j in sorted(by_feature[k]):
                candidate = by_feature[k][j]
                if candidate is not None and candidate.mean < bests[k].mean:
                    bests[k] = candidate
        return bests

    def _subspace(self, node: int, slot: int) -> np.ndarray:
        """The features (a mask over the layout's) this attempt of leaf `node` may split on."""
        tree = self.tree
        params = tree.params
        assert params.feature_share is not None
        count = int(tree.merged_count(slot))
        return subspace(params.feature_seed, node, count, tree.layout.n_features, params.feature_share)

    def _null_candidate(self, slot: int) -> Candidate:
        tree = self.tree
        return null_candidate(tree.total[slot], tree.params.lambda_)

    def _nominal_candidate(self, block: np.ndarray, n: float, feature: int) -> Candidate | None:
        tree = self.tree
        return best_nominal(block, tree.params.lambda_, tree.params.gamma, n, feature)

    def _best_numeric(self, slots: list[int], chosen: np.ndarray | None = None) -> list[Candidate | None]:
        """Each slot's best numeric split, from the planes [6, F, B + 1] of its statistics (taken
        at once for several slots: [slots, 6, F, B + 1]). `chosen`: of one slot, the positions of the
        numeric features it may split on (a random subspace; None: all)."""
        tree = self.tree
        if chosen is not None and not chosen.size:
            return [None]
        if kernels.ENABLED:
            return self._compiled_numeric(slots, chosen)
        params, layout = tree.params, tree.layout
        if len(slots) == 1:
            columns, features = _numeric_of(layout, chosen)
            planes = np.take(tree.stats[slots[0]].T, columns, axis=1)
            n = float(tree.total[slots[0], N])
            return [best_numeric_planes(planes, params.lambda_, params.gamma, n, features)]
        chosen = np.array(slots, dtype=np.intp)
        held = np.stack([tree.stats[slot] for slot in slots])
        planes = np.take(held.transpose(0, 2, 1), layout.numeric_columns, axis=2)
        n_leaves = tree.total[chosen, N]
        return best_numeric_leaves(planes, params.lambda_, params.gamma, n_leaves, layout.numeric)

    def _compiled_numeric(self, slots: list[int], chosen: np.ndarray | None = None) -> list[Candidate | None]:
        """`_best_numeric` by sgt.kernels' search, the same candidates (a multi-output tree's too: its
        slots' statistics are [columns, outputs, 6])."""
        tree = self.tree
        params = tree.params
        columns, features = _numeric_of(tree.layout, chosen)
        return [
            best_numeric_compiled(
                tree.stats[slot], columns, params.lambda_, params.gamma, tree.merged_count(slot), features
            )
            for slot in slots
        ]

    def _nominal_candidates(
        self, node: int, slot: int, by_feature: dict[int, Candidate | None], allowed: np.ndarray | None = None
    ) -> None:
        """Add the leaf's nominal splits to `by_feature` (a feature split once per path is not one;
        `allowed`: a mask of the features this attempt may split on, None: all)."""
        tree = self.tree
        layout = tree.layout
        if not layout.nominal:
            return
        n = tree.merged_count(slot)
        # a walk to the root (a large share of a split search on deep trees): only with nominal features
        used = tree.nominal_on_path(node)
        for j in layout.nominal:
            if j not in used and (allowed is None or allowed[j]):
                start = int(layout.offsets[j])
                block = tree.stats[slot][start : start + layout.widths[j]]
                by_feature[j] = self._nominal_candidate(block, n, j)

    def _merge_total(self, slot: int) -> None:
        """`_merge_pending` of an inactive slot: its total alone, with the bits the whole merge gives
        it (`block_stats` sums each group in instance order, and the total is a group of its own
        there; the merge is elementwise; the compiled merge has the same bits)."""
        tree = self.tree
        size = int(tree.pending_n[slot])
        outputs = tree.n_outputs
        if kernels.ENABLED:
            total = tree.total[slot].reshape(outputs, WIDTH)  # (views: the kernel writes the slot's total)
            pending = (size, outputs)
            kernels.merge_total(
                total,
                tree.pending_g[slot, :size].reshape(pending),
                tree.pending_h[slot, :size].reshape(pending),
            )
            tree.pending_n[slot] = 0
            return
        # output after output, each output's instances in order
        g = tree.pending_g[slot, :size].reshape(size, outputs).T.ravel()
        h = tree.pending_h[slot, :size].reshape(size, outputs).T.ravel()
        block = block_stats(np.repeat(np.arange(outputs), size), g, h, outputs)
        total = tree.total[slot]
        tree.total[slot] = merge(total.reshape(outputs, WIDTH), block).reshape(total.shape)
        tree.pending_n[slot] = 0


def _numeric_of(layout: Layout, chosen: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    """The numeric features' columns [F, B + 1] and indices, or those at positions `chosen` only."""
    if chosen is None:
        return layout.numeric_columns, layout.numeric
    return layout.numeric_columns[chosen], layout.numeric[chosen]


def subspace(seed: tuple[int, ...], node: int, count: int, n_features: int, share: float) -> np.ndarray:
    """The features (a mask [n_features]) one split attempt may split on: feature j when the j-th uniform
    draw of a generator seeded with (`seed`, `node`, `count`) is below `share`.

    The draw is a pure function of the tree's seed, the leaf's node id and the records its statistics
    hold at the attempt, all saved state that batching does not change, so batch learning, the
    one-record loop and a restored model draw the same features. Feature j's draw does not depend on
    how many features are known (a generator's first j draws are the same however many follow), so a
    feature first seen later in a batch changes no other feature's draw."""
    return np.random.default_rng([*seed, node, count]).random(n_features) < share


def _median_split(feature: int, columns: np.ndarray, lambda_: float) -> Candidate | None:
    """The split of a numeric feature's statistics `columns` [B + 1, 6] (the missing code, then the
    bins) at the median of its known values: bins up to the first whose cumulative count reaches half
    go left, missing values join the larger side (ties: left, as `sgt.split.best_numeric`); None if one
    side would hold no known value. Its mean and variance are the split's own (no cost of a split:
    taken regardless), its deltas each child's Newton step."""
    counts = columns[1:, N]
    cumulative = np.cumsum(counts)
    known = float(cumulative[-1])
    if not known > 0.0:
        return None
    threshold = int(np.searchsorted(cumulative, 0.5 * known))
    left_count = float(cumulative[threshold])
    if not (left_count > 0.0 and known - left_count > 0.0):
        return None
    to_left = left_count >= known - left_count
    sides = [columns[1 : threshold + 2], columns[threshold + 2 :]]
    sides[0 if to_left else 1] = np.concatenate([columns[:1], sides[0 if to_left else 1]])
    children = np.zeros((2, WIDTH))
    for k, rows in enumerate(sides):
        for row in rows:  # (bins in order: a fixed function of the statistics)
            children[k] = merge(children[k], row)
    mean, variance, deltas = pooled(children, lambda_)
    return Candidate(
        feature=feature,
        mean=float(mean),
        variance=float(variance),
        deltas=deltas,
        threshold=threshold,
        missing_child=0 if to_left else 1,
    )
