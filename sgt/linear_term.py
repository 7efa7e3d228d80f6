"""How a leaf's linear term learns: its Newton step on each block, the gate that drops it, and an
adaptive leaf's choice between its linear term and its constant.

A linear leaf predicts value + w . z, z its numeric inputs. At each attempt, before the block is
merged into the statistics, the term takes one Newton step on the block, on inputs centred on it
(`_newton_linear`; by sgt.kernels' `linear_newton` with the kernels, the same bits); the linear gate
(sgt.linear_gate) may drop the term instead; an adaptive leaf first tallies which of its linear term
and its constant predicted its block better, and serves that one next (`_choose`).

`LinearTermSteps` is the part of `LeafLearner` (sgt.leaf) that does this arithmetic, a base class
rather than functions over the tree so that a multi-output tree's learner overrides its step
(sgt.multioutput) as it overrides the rest of LeafLearner. Like LeafLearner it keeps no state of its
own: everything it reads and writes is the tree's.
"""

from __future__ import annotations

import math
import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from sgt import kernels
from sgt.linear_gate import may_reject, rejects_block
from sgt.ordered import leaf_sums_in_order, solve_positive_definite, sums_in_order

if TYPE_CHECKING:
    from sgt.tree import Tree

__all__ = ["CLASSIFIER_LEVEL_STEP_BOUND", "LinearTermSteps"]

_LARGEST = 1e300  # an adaptive leaf's tally stays within +-this (see LinearTermSteps._record)

#: a classification tree's `Params.level_step_bound`: the largest step, in logits, of the level of the
#: predictor an adaptive leaf does not serve. Its gradients are the served ones moved by h e (`_choose`),
#: exact for squared error but unbounded for a softmax, whose gradients lie in [-1, 1]: where the two
#: predictors drifted apart, the steps of saturated rows (h near 0) ran a leaf's constant to -981 logits
#: on Agrawal's gradual drifts. The single classifier with adaptive leaves over the 45 classification
#: streams of the benchmark, short, drift, robust and held-out groups: a bound of 4 changes three
#: (Agrawal's gradual drifts 68.11% -> 78.29%, its abrupt drifts 80.12 -> 84.34, timestamp-binary
#: 86.15 -> 86.16) and no other; 2 gains more on Agrawal (+12.1) but loses timestamp-binary 0.9, 1 and
#: 0.5 lose up to 2.1 elsewhere (docs/decisions.md)
CLASSIFIER_LEVEL_STEP_BOUND = 4.0


class LinearTermSteps:
    """A leaf's linear-term steps on the tree's arrays: the Newton step (one leaf, or several in one
    pass), the gate's drop, an adaptive leaf's choice and tally. The base of `LeafLearner`, which
    calls them in its attempt."""

    #: the tree whose leaves it learns, weakly (set by LeafLearner, which the tree owns)
    _tree: weakref.ref[Tree]

    @property
    def tree(self) -> Tree:
        """The tree whose leaves it learns."""
        tree = self._tree()
        assert tree is not None, "a learner outlived its tree"
        return tree

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
        for the constant, g + h e for the linear term): the value updates and split steps of LeafLearner.act,
        computed from the served predictor's g, move the served one alone (LeafLearner._step_value), so each
        predictor's level follows its own residuals and either is ready when the tally turns.
        """
        tree = self.tree
        if not tree.adaptive:
            return None
        size = int(tree.pending_n[slot])
        numeric = tree.layout.numeric
        g, h = tree.pending_g[slot, :size], tree.pending_h[slot, :size]
        if not numeric.size or not size:
            return None
        z = tree.layout.inputs[tree.pending_codes[slot, :size].T[numeric]]  # [features, rows]
        terms = np.empty((numeric.size + 1, size))
        np.multiply(tree.weights[node, numeric][:, None], z, out=terms[1:])
        terms[0] = -tree.anchor[node]
        with np.errstate(over="ignore", invalid="ignore"):
            e = sums_in_order(terms)
            linear = bool(tree.serving[node])
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
            g_sum, h_sum, change_sum = sums_in_order(other).tolist()
            self._record(node, change_sum)
            step = g_sum / (h_sum + tree.params.lambda_)
            if not math.isfinite(step):
                return None if linear else other[:, 0]
            bound = tree.params.level_step_bound
            if bound is not None:  # (a classification tree's: see CLASSIFIER_LEVEL_STEP_BOUND)
                step = min(max(step, -bound), bound)
            if linear:  # the constant's level step
                tree.anchor[node] -= step
                return None
            tree.value[node] -= step  # the linear term's level step, the constant kept
            tree.anchor[node] += step
            return other[:, 0] - h * step

    def _record(self, node: int, change: float) -> None:
        """Fade the leaf's tally and add a block's loss change; a change that is not a finite number
        counts as the largest finite loss of the linear term, so the leaf serves its constant and
        the tally stays finite (it can fade back)."""
        tree = self.tree
        if not math.isfinite(change):
            change = _LARGEST
        tally = tree.params.leaf_fading * float(tree.tally[node]) + change
        tree.tally[node] = min(max(tally, -_LARGEST), _LARGEST)

    def _newton_linear(self, node: int, slot: int, g_at: np.ndarray | None = None) -> None:
        """One Newton step of the leaf's linear term on its block, on inputs centred on the block.

        With z the block's inputs and c their h-weighted mean, w -= s and value += s . c, where
        s = (mean h (z-c)(z-c)' + l I)^-1 mean g (z-c): the step moves the prediction by -s . (z - c),
        nothing at the block's centre. Uncentred, a feature whose inputs barely vary in the leaf (a
        timestamp at the end of its grid) made the linear step a second intercept step beside the
        value's own, which overshot (docs/decisions.md, "Trees: how a leaf learns").

        l is linear_lambda, not the value's lambda_ (the inputs span [-1/2, 1/2], whereas a value's
        step is not scaled by inputs; its default: docs/decisions.md).

        The block's g and h were computed at the model's predictions, linear term included, so this
        is a step on the leaf's loss as a function of w (the value has its own step, the null
        candidate). It happens at the block boundary, which the algorithm fixes, so it is exact.
        """
        tree = self.tree
        size = int(tree.pending_n[slot])
        layout = tree.layout
        numeric = layout.numeric
        if not numeric.size:
            return
        if kernels.ENABLED:
            self._newton_compiled(node, slot, g_at)
            return
        width = numeric.size
        # one row per feature (or product) and one column per instance: numpy's elementwise steps run
        # along whole rows, not along short rows of a few features
        z = layout.inputs[tree.pending_codes[slot, :size].T[numeric]]
        g = tree.pending_g[slot, :size] if g_at is None else g_at
        h = tree.pending_h[slot, :size]
        weighted = np.empty((width + 1, size))
        weighted[0] = h
        np.multiply(z, h, out=weighted[1:])
        sums = sums_in_order(weighted.T)
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
        sums = sums_in_order(products.T)
        if self._gate_drops(node, sums[:width], lambda: z, g, h):
            self._drop_linear(node, centre)
            return
        means = sums / size
        hessian = means[width:][layout.pair_of] + tree.params.linear_lambda * np.eye(width)
        self._linear_step(node, solve_positive_definite(hessian, means[:width]), centre)

    def _newton_compiled(self, node: int, slot: int, g_at: np.ndarray | None = None) -> None:
        """`_newton_linear` by sgt.kernels' linear_newton: the same sums, step and gate, bit for bit."""
        tree = self.tree
        size = int(tree.pending_n[slot])
        layout = tree.layout
        codes, g, h = (
            tree.pending_codes[slot, :size],
            tree.pending_g[slot, :size] if g_at is None else g_at,
            tree.pending_h[slot, :size],
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
            tree.params.linear_lambda,
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
        more): the screen on the Newton step's own sums (`gradient`, G; `may_reject`), then the t test
        over the block's instances, whose inputs centred on the block [features, instances] `centred`
        gives only then (the compiled step never forms them otherwise)."""
        tree = self.tree
        gate = tree.params.linear_gate
        if gate is None or g.shape[0] < 2:
            return False
        weights = tree.weights[node, tree.layout.numeric]
        return may_reject(weights.tolist(), gradient.tolist(), gate) and rejects_block(
            weights, centred(), g, h, gate
        )

    def _newton_leaves(self, nodes: list[int], slots: list[int]) -> None:
        """`_newton_linear` of several leaves, their sums in one pass: each leaf's block is padded to
        the longest with instances whose terms are exactly -0.0, which leave a sum in order unchanged
        (x + -0.0 is x for every x), so each leaf gets the bits of its own block alone. (One leaf
        takes `_newton_linear`, which pays no padding and gathers.)"""
        tree = self.tree
        if kernels.ENABLED:
            for node, slot in zip(nodes, slots):
                self._newton_linear(node, slot)
            return
        layout = tree.layout
        numeric = layout.numeric
        if not numeric.size:
            return
        width = numeric.size
        index = np.array(slots, dtype=np.intp)
        sizes = tree.pending_n[index]
        longest = int(sizes.max())
        padding = np.arange(longest) >= sizes[:, None]  # [leaves, instances]
        # one row per feature (or product) and one column per instance: numpy's elementwise steps run
        # along whole rows, not along short rows of a few features
        z = layout.inputs[tree.pending_codes[index, :longest][:, :, numeric].transpose(0, 2, 1)]
        g, h = tree.pending_g[index, :longest], tree.pending_h[index, :longest]
        weighted = np.empty((index.size, width + 1, longest))
        weighted[:, 0] = h
        np.multiply(z, h[:, None], out=weighted[:, 1:])
        sums = leaf_sums_in_order(weighted, padding)
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
        sums = leaf_sums_in_order(products, padding)
        means = sums / sizes[:, None]
        gate = tree.params.linear_gate
        if gate is not None:
            weights = tree.weights[np.array(nodes, dtype=np.intp)][:, numeric]
            weight_lists, gradients = weights.tolist(), sums[:, :width].tolist()
        eye = tree.params.linear_lambda * np.eye(width)
        for k in np.flatnonzero(ok).tolist():
            size = int(sizes[k])
            if (
                gate is not None
                and size > 1
                and may_reject(weight_lists[k], gradients[k], gate)
                and rejects_block(weights[k], z[k, :, :size], g[k, :size], h[k, :size], gate)
            ):
                self._drop_linear(nodes[k], centre[k])
                continue
            hessian = means[k, width:][layout.pair_of] + eye
            self._linear_step(nodes[k], solve_positive_definite(hessian, means[k, :width]), centre[k])

    def _drop_linear(self, node: int, centre: np.ndarray) -> None:
        """Drop the leaf's linear term, its value at the block's centre kept: value += w . c, w = 0,
        which is the Newton step s = w (the gate only drops finite terms, so w - w is 0 exactly)."""
        tree = self.tree
        self._linear_step(node, tree.weights[node, tree.layout.numeric].tolist(), centre)

    def _linear_step(
        self, node: int, step: list[float], centre: np.ndarray, output: tuple[int, ...] = ()
    ) -> None:
        """Apply a Newton step of the linear term (unless it overflowed): w -= s, value += s . c
        (of `output`: see `_newton_step`)."""
        tree = self.tree
        if not all(math.isfinite(v) for v in step):
            return
        index: tuple[Any, ...] = (node, *output, tree.layout.numeric)
        tree.weights[index] -= step
        shift = step[0] * float(centre[0])  # summed in order, as np.cumsum does
        for s_j, c_j in zip(step[1:], centre[1:].tolist()):
            shift += s_j * c_j
        tree.value[(node, *output)] += shift
        if tree.adaptive:  # the constant, value + anchor, stays
            tree.anchor[(node, *output)] -= shift
