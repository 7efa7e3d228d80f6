"""One boosting stage (`Member`) and what it needs of its ensemble (`MemberContext`).

A member is one SGT per output (or one multi-output tree, sgt.multioutput) that learns from the
gradients of the loss at an offset its ensemble gives: the shrunken sum of the members before it. It
reads nothing of its ensemble but the context it was built with: the shape of the outputs and the
ensemble's loss and per-output tree settings.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import numpy as np

from sgt import kernels
from sgt.base import BaseSGT
from sgt.chunked import before_regrids
from sgt.features import FeatureSpace, Regrid
from sgt.linear_term import CLASSIFIER_LEVEL_STEP_BOUND
from sgt.multioutput import MultiOutputTree, widened
from sgt.tree import Layout, LeafInputs, Params

__all__ = ["OFFSETS", "TARGET", "WEIGHT", "Marks", "Member", "MemberContext", "Outputs"]

# columns of a member's target table before the offsets: target, weight
TARGET, WEIGHT, OFFSETS = 0, 1, 2

#: g and h ([outputs, rows]) of the loss at raw scores [outputs, rows] for targets, and whether the
#: scores hold every class's
Gradients = Callable[[np.ndarray, np.ndarray, bool], tuple[np.ndarray, np.ndarray]]
#: `Gradients` of one record's scores (one per output), its target and whether the scores hold every
#: class's, in Python floats with the same operations in the same order (the same bits); None where
#: the loss has no such form
GradientOne = Callable[[list[float], float, bool], tuple[list[float], list[float]] | None]


@dataclasses.dataclass(frozen=True)
class Outputs:
    """How the members' outputs map onto the ensemble's score columns.

    multi_output
        Whether a member takes one multi-output tree for two outputs or more (else a tree per output).
    every_class_from_three
        Whether members score every class from the third class on (a softmax over K outputs), rather
        than every class but the first against it (K - 1 outputs beside a reference score of 0).
    """

    multi_output: bool = False
    every_class_from_three: bool = False

    def every_class(self, n_outputs: int) -> bool:
        """Whether a member with `n_outputs` outputs scores every class."""
        return self.every_class_from_three and n_outputs >= 3

    def first_column(self, n_outputs: int) -> int:
        """The ensemble's score column of a member's first output. The columns are the raw scores the
        members sum, one per output; with a softmax over every class they are one per class from the
        first, and a member of fewer than three outputs (scoring classes from the second against the
        first, whose score is 0) starts at column 1."""
        return int(self.every_class_from_three and n_outputs < 3)


@dataclasses.dataclass(frozen=True)
class MemberContext:
    """What a member needs of its ensemble: the feature space, the outputs' shape, the loss, and for a
    classifier the outputs that a number of classes asks and the tree settings for a number of
    outputs (`delta`, `linear_steps`), which follow the classes and the records learned."""

    space: FeatureSpace
    outputs: Outputs
    loss_gradients: Gradients
    outputs_for_classes: Callable[[int], int] | None  # None: a regressor (one output, no classes)
    member_delta: Callable[[int], float]
    linear_steps_now: Callable[[int], bool]
    #: whether `loss_gradients` of one output is sgt.softmax.binary_gradients at the scores, against
    #: targets equal to 1 (the classifier's with two classes): a member then computes it from its
    #: table's rows in compiled steps (`Member._gradients_of_rows`)
    binary_cross_entropy: bool = False
    #: `loss_gradients` of one record's scores and target, in floats (see `GradientOne`): a member's
    #: one-record path (`Member.run_one`) then needs no numpy for its gradients
    gradient_one: GradientOne | None = None


class Member(BaseSGT):
    """One boosting stage: a tree per output, learning from gradients at an offset the ensemble gives.

    Its targets are rows of a float table: the target (class index or value), the record's bagging
    weight, then the offset of each output (the shrunken sum of the members before it).
    """

    def __init__(
        self,
        context: MemberContext,
        tree_params: dict[str, Any],
        n_outputs: int,
        layout: Layout,
        layout_revision: int,
        budget: int | None,
    ) -> None:
        self.linear_steps = context.linear_steps_now(n_outputs)  # before BaseSGT's init, which may make trees
        self.feature_share: float | None = None  # the random subspaces (set_tree_params; Params)
        self.feature_seed: tuple[int, ...] = ()
        self.relax_growth: float | None = None
        self.relax_cap: float = 0.1
        self.relax_impurity: float | None = None
        self.blind_after: float | None = None  # (Params.blind_after: the ensemble's `_blind`)
        self.blind_impurity: float = Params.blind_impurity
        self.linear_gate: float | None = None  # (Params.linear_gate)
        # a classifier's trees bound an adaptive leaf's other level step (Params.level_step_bound)
        self.level_step_bound = None if context.outputs_for_classes is None else CLASSIFIER_LEVEL_STEP_BOUND
        super().__init__(**tree_params)
        self._context = context
        self._delta_scale = 1.0  # the young ensemble's factor on its split confidence (see Youth)
        self._space = context.space
        self._layout = layout
        self._layout_revision = layout_revision
        self._budget = budget  # bytes its trees may take together (None: unbounded)
        self._grow_outputs(n_outputs)
        self._marks: Marks | None = None  # set for a run whose changes are wanted at some rows
        self._step_share = 1.0  # the share of its Newton steps it takes (see `set_step_share`)
        self._undamped = (self.lambda_, self.linear_lambda, self.gamma)  # (its parameters at share 1)

    @property
    def n_outputs(self) -> int:
        """Raw scores per record: the outputs of its trees."""
        return self._n_raw_scores()

    @property
    def trees(self) -> list[Any]:
        """Its trees (the list itself, which the ensemble's views and budget share)."""
        return self._trees

    @property
    def delta_scale(self) -> float:
        """The young ensemble's factor on its split confidence (see Youth)."""
        return self._delta_scale

    def use_layout(self, layout: Layout, revision: int) -> None:
        """Route with the ensemble's current layout (after the grids grew)."""
        self._layout, self._layout_revision = layout, revision

    def use_trees(self, trees: list[Any]) -> None:
        """Take restored trees."""
        self._trees = trees

    def set_budget(self, budget: int | None) -> None:
        """A new share of the ensemble's budget; its trees are brought within it by `fit_budget`."""
        self._budget = budget

    def fit_budget(self) -> None:
        """Give every tree its share of the member's budget and bring it within."""
        self._fit_budget()

    def follow_far_terms(self, drop: bool) -> None:
        """Carry linear terms over large grid growths as the ensemble does (Params.drop_far_terms):
        a model restored from a save before the rule keeps the old one, in its new trees too."""
        self._drop_far_terms = drop
        self.set_tree_params(drop_far_terms=drop)

    def set_step_share(self, share: float) -> None:
        """Take `share` (in (0, 1]) of each Newton step its leaves would take, with the same splits.

        The Hessians it learns from and its trees' `lambda_` and `linear_lambda` are divided by the
        share, and `gamma` multiplied by it: every Newton step (leaf values and linear terms) is then
        that share of the undamped one, and every candidate's loss change too, so the split tests (the
        F-test is scale-free; the penalty scales with them) decide as before. Its ensemble damps the
        members that step at the same block boundaries as the ones before them (see
        sgt.boosted.regressor's `damped_share`). Set anew on restored trees, which hold the model's.
        """
        lambda_, linear_lambda, gamma = self._undamped
        self._step_share = share
        self.set_tree_params(
            lambda_=lambda_ / share, linear_lambda=linear_lambda / share, gamma=gamma * share
        )

    def set_delta_scale(self, scale: float) -> None:
        self._delta_scale = scale

    def run(
        self,
        codes: np.ndarray,
        table: np.ndarray,
        learn: np.ndarray,
        events: np.ndarray,
        regrids: dict[int, list[Regrid]],
        inputs: LeafInputs,
        routes: list[tuple[np.ndarray, np.ndarray]] | None,
    ) -> np.ndarray:
        """Predict then learn the rows of target table `table` in order (sgt.base's exact batch
        algorithm): the raw scores [rows, outputs] each row was predicted with."""
        raw, _ = self._run_codes(codes, table, learn, events, None, regrids, inputs, routes)
        return raw

    def run_one(
        self, codes: list[int], target: list[float], learn: bool, regrids: list[Regrid] | None
    ) -> list[float]:
        """`run` of one row, without its arrays: sgt.chunked's one-record path (`_run_rows`) for a row
        with `codes`, table row `target`, learned if `learn`, that grows the grids `regrids` (if any);
        the raw scores it was predicted with (one per output, as known then)."""
        predicted = None  # the leaves and scores learning takes as predicted (see `_learn_codes`)
        if regrids:
            _, raw, _ = before_regrids(self, codes, regrids)
            self._apply_regrids(regrids)
        else:
            routes = [tree.route_one(codes) for tree in self._trees]
            nodes = [node for node, _ in routes]
            raw = self._raw_one(nodes, codes)
            if not any(stopped for _, stopped in routes):
                predicted = (nodes, raw)
        if learn:
            self._before_changes(0)
            self._learn_codes(codes, target, predicted)
        return raw

    def watch(self, marks: Marks | None) -> None:
        """Count changes at `marks`'s rows in the next run (None: stop counting)."""
        self._marks = marks

    def _grow_outputs(self, outputs: int) -> None:
        """Trees for `outputs` outputs: one more tree per output, or, when the owner's members take
        one multi-output tree from two outputs on, that tree (widened from the member's tree, in place
        in the list of trees, which a batch run in progress holds). With a softmax over every class,
        a single tree's output scores class 1: it becomes the second of the multi-output tree's."""
        shape = self._context.outputs
        if not (shape.multi_output and outputs >= 2):
            while len(self._trees) < outputs:
                self._new_tree()
        elif not self._trees:
            self._trees.append(MultiOutputTree(self._params(), self._layout, outputs))
        elif self.n_outputs < outputs:
            old = self.n_outputs
            positions = [1] if shape.first_column(old) == 1 else list(range(old))
            self._trees[0] = widened(self._trees[0], outputs, positions)
        self._fit_budget()  # its trees' shares (at a new class's row: wider statistics, or more trees)

    def _tree_cap(self) -> int | None:
        """An equal share of the member's budget for each of its trees."""
        return None if self._budget is None else self._budget // max(1, len(self._trees))

    def _register_target(self, target: Any) -> None:
        context = self._context
        if context.outputs_for_classes is None:
            return
        needed = context.outputs_for_classes(int(target[TARGET]) + 1)
        if self.n_outputs < needed:
            self._grow_outputs(needed)
            outputs = self.n_outputs  # at the new class's row
            self.set_tree_params(
                delta=context.member_delta(outputs) * self._delta_scale,
                linear_steps=context.linear_steps_now(outputs),
            )

    def _params(self) -> Params:
        return dataclasses.replace(
            super()._params(),
            linear_steps=self.linear_steps,
            feature_share=self.feature_share,
            feature_seed=self.feature_seed,
            relax_growth=self.relax_growth,
            relax_cap=self.relax_cap,
            relax_impurity=self.relax_impurity,
            blind_after=self.blind_after,
            blind_impurity=self.blind_impurity,
            linear_gate=self.linear_gate,
            level_step_bound=self.level_step_bound,
        )

    def changes(self) -> int:
        """Splits and leaf-value updates its trees have made."""
        return sum(t.n_splits + t.n_updates for t in self._trees)

    def _before_changes(self, row: int) -> None:
        if self._marks is not None:
            self._marks.reach(row, self)

    def set_tree_params(self, **changes: Any) -> None:
        """Give the member's trees, and those it makes later, the tree parameters `changes` (`delta`: the
        split confidence; `linear_steps`: whether linear leaves step their linear terms; `feature_share`
        and `feature_seed`: the random subspaces of its split attempts; `bound_block`: the blocks of its
        leaves at the depth bound)."""
        for name, value in changes.items():
            setattr(self, name, value)
        for tree in self._trees:
            if any(getattr(tree.params, name) != value for name, value in changes.items()):
                tree.params = dataclasses.replace(tree.params, **changes)

    def _gradients(self, raw: np.ndarray, targets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        shape = self._context.outputs
        outputs = self.n_outputs
        first = OFFSETS + shape.first_column(outputs)
        point = raw + targets[:, first : first + raw.shape[0]].T
        g, h = self._context.loss_gradients(point, targets[:, TARGET], shape.every_class(outputs))
        weight = targets[:, WEIGHT]
        if self._step_share != 1.0:  # (1.0: the bits of before the share)
            return g * weight, h * (weight / self._step_share)
        return g * weight, h * weight

    def _gradients_one(self, raw: list[float], target: Any) -> tuple[list[float], list[float]]:
        """`_gradients` of one record in Python floats where the loss has that form
        (`MemberContext.gradient_one`): the same operations in the same order as the arrays', without
        numpy's cost per call (a third of a member's one-record learning, on two classes)."""
        one = self._context.gradient_one
        if one is not None:
            shape = self._context.outputs
            column = OFFSETS + shape.first_column(len(raw))
            point = [r + float(target[column + k]) for k, r in enumerate(raw)]
            gh = one(point, float(target[TARGET]), shape.every_class(len(raw)))
            if gh is not None:
                weight = float(target[WEIGHT])
                damped = weight if self._step_share == 1.0 else weight / self._step_share  # (`_gradients`)
                return [g * weight for g in gh[0]], [h * damped for h in gh[1]]
        return super()._gradients_one(raw, target)

    def _gradients_of_rows(
        self, raw: np.ndarray, targets: np.ndarray, rows: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """`_gradients` of one output's raw scores of rows `rows` of the target table `targets`: with the
        two-class cross-entropy and sgt.kernels, by `member_binary_exponents`, one np.exp and
        `member_binary_gradients` (the same operations on the same operands as `_gradients` and
        binary_gradients, where the rows lie, without gathering them: the same bits)."""
        context = self._context
        if not (kernels.ENABLED and context.binary_cross_entropy and self.n_outputs == 1):
            return super()._gradients_of_rows(raw, targets, rows)
        column = OFFSETS + context.outputs.first_column(1)
        e = np.exp(kernels.member_binary_exponents(raw, targets, rows, column))
        return kernels.member_binary_gradients(e, targets, rows, TARGET, WEIGHT)


class Marks:
    """A member's changes (`Member.changes`) at given rows of a run: at each, those made before it."""

    def __init__(self, rows: list[int]) -> None:
        self.rows = rows  # ascending
        self.changes: list[int] = []

    def reach(self, row: int, member: Member) -> None:
        """The member may change next at `row`: the rows up to it have their count."""
        while len(self.changes) < len(self.rows) and self.rows[len(self.changes)] <= row:
            self.changes.append(member.changes())
