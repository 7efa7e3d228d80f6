"""The state of a boosted ensemble and what the classifier and regressor give it (`_Core`).

The model holds a main ensemble of members (sgt.boosted.member), at times a background one learning
beside it since a warning, the bagging weights (sgt.boosted.bagging), the drift policy
(sgt.boosted.policy) and the drift response that holds the two drift tests and decides
(sgt.boosted.response). This layer holds the ensembles, the hooks the concrete classes give (the loss,
the errors the tests watch, the outputs per member), the members' shares of the memory budget, the
views and the saved state; it carries out what the drift response decides (start, promote or drop a
background ensemble, which may first replay recent records), ages young ensembles, and runs members
one after the other over rows (`_run_members`), each learning at the shrunken sum of those before
it. The exact span engine (sgt.boosted.engine) is the layer above it.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from sgt.base import ROW_BY_ROW_MAX, BaseSGT, TreeGroup, _check_int, _check_real, blind_params
from sgt.boosted.bagging import Bagging
from sgt.boosted.member import OFFSETS, TARGET, WEIGHT, Member, MemberContext, Outputs
from sgt.boosted.policy import DriftPolicy
from sgt.boosted.response import DriftResponse
from sgt.boosted.spans import NO_EVENTS, Batch, Part
from sgt.drift import PageHinkley
from sgt.features import Regrid
from sgt.recent import RecentRecords
from sgt.serialization import FORMAT_VERSION, Saved
from sgt.tree import Params, leaf_inputs_of

__all__: list[str] = []

_MAX_SEED = 2**63 - 1
#: the saved state's word for bagging weights divided by the rate (see `_Core._mean_one_bagging`)
MEAN_ONE = "mean-one"


def checked_feature_share(value: Any) -> float | None:
    """`feature_share` as the ensembles keep it, or ValueError naming the setting and what it allows."""
    if value is None:
        return None
    _check_real(
        "feature_share",
        value,
        low=0.0,
        high=1.0,
        low_open=True,
        allowed="None (every feature) or a number in (0, 1]",
    )
    return float(value)


if TYPE_CHECKING:  # the layers are always combined with a BaseSGT subclass, whose members they use
    _Estimator = BaseSGT
else:
    _Estimator = object


class _Core(_Estimator):
    """What the boosted classifier and regressor share: the ensembles, their drift response and the hooks."""

    _is_classifier = False
    #: an ensemble keeps the scores of the record it last scored its own way (`_predict_raw_codes`)
    _keeps_last = False
    #: the share of the features each split attempt of a member may split on (None: all); the boosted
    #: classes take it as a constructor option, the adaptive single trees keep None
    feature_share: float | None = None
    #: (growth, cap, impurity) of the members' split confidence while a leaf finds no split
    #: (Params.relax_growth, relax_cap, relax_impurity); None: every leaf keeps its delta. A new model
    #: takes its class's; a restored one what it was saved with (none if saved before the relaxation).
    #: This and the two ladders below are class attributes, so the variants in tests/bench/ours.py can
    #: set them (the ladders won nothing broadly: docs/decisions.md, "The boosted ensemble")
    _relax: ClassVar[tuple[float, float, float | None] | None] = None
    #: factors on the split confidence of the members by position in their ensemble (the last repeats;
    #: empty: 1), through each member's `delta_scale` (so not with a policy's `youth`, which sets it)
    _delta_ladder: ClassVar[tuple[float, ...]] = ()
    #: the shrinkage of the members by position (the last repeats; empty: `_step()` for every member)
    _step_ladder: ClassVar[tuple[float, ...]] = ()
    #: whether a new model's bagging weights are its Poisson draws divided by `poisson_rate` (mean 1:
    #: sgt.boosted.bagging), saved in its state; a restored one keeps what it was saved with (the draws
    #: themselves if saved without). Off by default: with the classifier at rate 3 it won the robustness
    #: suite's classification streams but lost SEA's drift streams (docs/decisions.md); the variants in
    #: tests/bench/ours.py set it
    _mean_one_bagging: ClassVar[bool] = False
    #: whether the members are averaged, not boosted: each learns at the base score alone (not at the
    #: sum of the members before it) and the model sums them at `_step()` each, 1 / n_members (the
    #: forests beside the members, sgt.boosted.forest); a class attribute, as the class is saved
    _averaged: ClassVar[bool] = False
    _space: Any
    _layout: Any
    _layout_revision: int
    _trees: list[Any]
    _n_seen: int

    def _init_boosting(
        self,
        n_members: int | None,
        learning_rate: float,
        poisson_rate: float | None,
        drift_threshold: float | None,
        drift_delta: float,
        seed: int,
        policy: DriftPolicy,
        outputs: Outputs | None = None,
    ) -> None:
        if n_members is not None or not self._is_classifier:
            allowed = "None (by the number of classes) or " if self._is_classifier else ""
            _check_int("n_members", n_members, low=1, high=1000, allowed=f"{allowed}an integer in [1, 1000]")
        _check_real(
            "learning_rate", learning_rate, low=0.0, high=1.0, low_open=True, allowed="a number in (0, 1]"
        )
        if poisson_rate is not None:
            _check_real(
                "poisson_rate",
                poisson_rate,
                low=0.0,
                high=100.0,
                low_open=True,
                allowed="None (no bagging) or a number in (0, 100]",
            )
        if drift_threshold is not None:
            _check_real(
                "drift_threshold",
                drift_threshold,
                low=0.0,
                low_open=True,
                allowed="None (no drift detection) or a number > 0",
            )
        _check_real("drift_delta", drift_delta, low=0.0, allowed="a number >= 0")

        _check_int("seed", seed, low=0, high=_MAX_SEED, allowed=f"an integer in [0, {_MAX_SEED}]")
        self.n_members = None if n_members is None else int(n_members)
        self.learning_rate = float(learning_rate)
        self.poisson_rate = None if poisson_rate is None else float(poisson_rate)
        self.drift_threshold = None if drift_threshold is None else float(drift_threshold)
        self.drift_delta = float(drift_delta)
        self.seed = int(seed)
        self._policy = policy
        self._relaxed = self._relax  # (the members made below read it)
        self._outputs = Outputs() if outputs is None else outputs
        self._bagging = Bagging(self.poisson_rate, self.seed, self._mean_one_bagging)
        self._member_context = MemberContext(
            space=self._space,
            outputs=self._outputs,
            loss_gradients=self._loss_gradients,
            outputs_for_classes=self._outputs_for_classes if self._is_classifier else None,
            member_delta=self._member_delta,
            linear_steps_now=self._linear_steps_now,
            binary_cross_entropy=self._is_classifier,
            gradient_one=self._loss_gradient_one,
        )
        self._retired_version = 0  # changes made by members since replaced, so `version` never decreases
        # while a stop inside a span is answered: the ensembles that ran past it, with their changes as
        # of the stop (see `_run_span`)
        self._ran_past: list[tuple[list[Member], int]] = []
        #: the last record `_predict_raw_codes` scored: (records learned, space revision, codes), the
        #: main ensemble then, and the scores (a record learned after being predicted, as a River-style
        #: loop does, is predicted again by `learn_one` before the members learn it)
        self._last_scored: tuple[tuple[int, int, tuple[int, ...]], list[Member], list[float]] | None = None
        self._members = self._new_members()
        self._background: list[Member] | None = None  # learning since the last warning, if any
        self._background_since = 0  # records learned when it started
        self._members_since = 0  # records learned when the main ensemble started
        self._recent = RecentRecords(policy.replay)
        # the drift tests and the answers the policy gives (it starts, replaces and drops ensembles
        # through this model's `start_background`, `promote_background` and `drop_background`)
        self._response = DriftResponse(
            policy, self.drift_threshold or 1.0, self.drift_delta, relative=not self._is_classifier
        )
        self._refresh_trees()

    # -- hooks the concrete classes give ---------------------------------------------------------
    def _tree_params(self) -> dict[str, Any]:
        params: dict[str, Any] = BaseSGT.get_params(self)
        return params

    def _n_outputs_per_member(self) -> int:
        raise NotImplementedError

    def _outputs_for_classes(self, n_classes: int) -> int:
        """Outputs a member has with `n_classes` classes known (a regressor's: 1)."""
        return 1

    def _reference_scores(self, scores: np.ndarray) -> np.ndarray:
        """The ensemble's raw scores [rows, columns] as the softmax with a reference class takes them:
        with a score per class, each class's score less the first's (the same probabilities); else
        as they are."""
        if not self._outputs.every_class_from_three:
            return scores
        return scores[:, 1:] - scores[:, :1]

    def _linear_start(self, n_outputs: int) -> int:
        """Records learned before the linear leaves of a member with `n_outputs` outputs step their
        linear terms (the classifier's depend on the classes; see BoostedClassifier's `linear_start`)."""
        return 0

    def _linear_steps_now(self, n_outputs: int) -> bool:
        return self._n_seen >= self._linear_start(n_outputs)

    def _member_delta(self, n_outputs: int) -> float:
        """The split confidence of a member with `n_outputs` outputs (the classifier's follows the
        classes)."""
        return self.delta

    def _member_count(self) -> int:
        """Members an ensemble has now (the classifier's follows the classes when `n_members` is None)."""
        assert self.n_members is not None
        return self.n_members

    def _growth_cuts(self, events: np.ndarray) -> np.ndarray:
        """Where a batch with new classes at rows `events` must be cut because members are added there
        (after the row): none unless the member count follows the classes."""
        return events[:0]

    def _loss_gradients(
        self, point: np.ndarray, targets: np.ndarray, every_class: bool = False
    ) -> tuple[np.ndarray, np.ndarray]:
        """g and h ([outputs, rows]) of the loss at raw scores `point` for targets (a float column);
        `every_class`: the classifier's `point` holds every class's score."""
        raise NotImplementedError

    def _loss_gradient_one(
        self, point: list[float], target: float, every_class: bool
    ) -> tuple[list[float], list[float]] | None:
        """`_loss_gradients` of one record's scores `point` and target in Python floats, the same
        operations in the same order (sgt.boosted.member's `GradientOne`); None: no such form."""
        return None

    def _errors(self, point: np.ndarray, targets: np.ndarray, outputs_at: np.ndarray) -> np.ndarray:
        """What a detector watches: the error of raw scores `point` [rows, outputs] for each row."""
        raise NotImplementedError

    def _base_columns(
        self, n: int, width: int, learn: np.ndarray, targets: np.ndarray, events: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """The base score each row is predicted with, and learned with ([rows, width] each)."""
        raise NotImplementedError

    def _register_events(self, targets: np.ndarray, events: np.ndarray) -> None:
        raise NotImplementedError

    def _n_raw(self, n_events: int) -> int:
        """Raw score columns a batch needs (outputs after its events, at least one)."""
        raise NotImplementedError

    def _n_scores(self) -> int:
        """Raw scores of a record (the classifier's: one per class but the first)."""
        return 1

    def _step(self) -> float:
        """The shrinkage each member's output is added with (the regressor bounds it)."""
        return self.learning_rate

    def _output_offset(self, score: float) -> float:
        """What is added to the first raw score `score` of a record after the members' (the
        regressor's residual level; sgt.explain adds it to the base)."""
        return 0.0

    def _step_share(self, position: int) -> float:
        """The share of its Newton steps the member at `position` takes (the regressor damps all but
        the first; see `Member.set_step_share`)."""
        return 1.0

    def _member_step(self, position: int) -> float:
        """The shrinkage of the member at `position` in its ensemble."""
        ladder = self._step_ladder
        return ladder[min(position, len(ladder) - 1)] if ladder else self._step()

    # -- parameters and introspection ----------------------------------------------------------
    def _boosting_params(self) -> dict[str, Any]:
        return {
            "n_members": self.n_members,
            "learning_rate": self.learning_rate,
            "poisson_rate": self.poisson_rate,
            "drift_threshold": self.drift_threshold,
            "drift_delta": self.drift_delta,
            "seed": self.seed,
        }

    @property
    def n_trees(self) -> int:
        """Trees in all members (one per output), a background ensemble's included."""
        return len(self._trees)

    @property
    def n_drifts(self) -> int:
        """Drifts detected and answered by replacing the ensemble."""
        return self._response.n_drifts

    @property
    def version(self) -> int:
        """Changes applied so far (splits plus leaf-value updates, replaced members' included)."""
        return sum(t.n_splits + t.n_updates for t in self._trees) + self._retired_version

    def _tree_groups(self) -> list[TreeGroup]:
        """The views show the members' trees member by member (not a background ensemble's)."""
        return [TreeGroup(f"member {m}", member.trees) for m, member in enumerate(self._members)]

    def _view_heading(self) -> str | None:
        params = ", ".join(f"{k}={v!r}" for k, v in self._boosting_params().items())
        return f"{type(self).__name__}: {len(self._members)} members, {len(self._trees)} trees ({params})"

    def _new_tree(self, root_value: float = 0.0) -> None:
        """The ensemble holds no trees of its own (they live in the members)."""

    def _new_member(self, position: int) -> Member:
        """A fresh member at `position` in its ensemble (which seeds its random subspaces)."""
        member = Member(
            self._member_context,
            self._tree_params(),
            self._n_outputs_per_member(),
            self._layout,
            self._layout_revision,
            self._member_budget(),
        )
        member.follow_far_terms(self._drop_far_terms)
        member.set_tree_params(
            **self._subspaces(position), **self._leaf_rules(), bound_block=self.bound_block
        )
        member.set_step_share(self._step_share(position))
        ladder = self._delta_ladder
        if ladder:
            member.set_delta_scale(ladder[min(position, len(ladder) - 1)])
            member.set_tree_params(delta=self._member_delta(member.n_outputs) * member.delta_scale)
        return member

    def _leaf_rules(self) -> dict[str, Any]:
        """The tree parameters of the members' leaf rules: their split confidence relaxation, blind split
        and linear gate, the model's or none (each named, so that a restore can take back what its class
        gave the members made before it)."""
        # (the members' blind split: BaseSGT._blind)
        rules = {**blind_params(self._blind_split), "linear_gate": self._member_gate()}
        if self._relaxed is None:
            return {"relax_growth": None, "relax_cap": Params.relax_cap, "relax_impurity": None, **rules}
        growth, cap, impurity = self._relaxed
        return {"relax_growth": growth, "relax_cap": cap, "relax_impurity": impurity, **rules}

    def _member_gate(self) -> float | None:
        """The linear gate of the members' trees (Params.linear_gate): none, but in the adaptive
        classifier, whose one member is SGTClassifier's tree."""
        return None

    def _subspace_param(self) -> dict[str, Any]:
        """`feature_share` among the parameters of the classes that take it (not the adaptive trees)."""
        return {"feature_share": self.feature_share} if "feature_share" in vars(self) else {}

    @staticmethod
    def _without_subspace(params: dict[str, Any]) -> dict[str, Any]:
        """Saved parameters without `feature_share` while it is None: what a save without the parameter
        restores to, so such a model saves the bytes of the format before it."""
        if params.get("feature_share", 0) is None:
            del params["feature_share"]
        return params

    def _subspaces(self, position: int) -> dict[str, Any]:
        """The tree parameters of the random subspaces of the member at `position` (none without
        `feature_share`): its draws are seeded by the model's seed and its position, so the members of
        an ensemble draw differently and a restored or replacing member at that position as before."""
        if self.feature_share is None:
            return {}
        return {"feature_share": self.feature_share, "feature_seed": (self.seed, position)}

    def _new_members(self, count: int | None = None) -> list[Member]:
        return [self._new_member(m) for m in range(self._member_count() if count is None else count)]

    def _all_members(self) -> list[Member]:
        return self._members + (self._background or [])

    def _ensembles(self) -> list[tuple[list[Member], int]]:
        """The main ensemble and the background one (if any), each with the records learned when it
        started."""
        pairs = [(self._members, self._members_since)]
        if self._background is not None:
            pairs.append((self._background, self._background_since))
        return pairs

    def _member_budget(self) -> int | None:
        """Bytes a member's trees may take: an equal share of `max_bytes` for each member of the main
        ensemble and of a background one, which may start at any fixed point (so a main ensemble's
        members never need the room a background ensemble takes)."""
        return None if self.max_bytes is None else self.max_bytes // (2 * self._member_count())

    def _fit_budget(self) -> None:
        for member in self._all_members():
            member.fit_budget()

    def _share_budget(self) -> None:
        """Every member's share of the budget as the members counted now ask, each brought within it
        (where the count changes: at a row that cuts the batch, or after a restore)."""
        budget = self._member_budget()
        for member in self._all_members():
            member.set_budget(budget)
        self._fit_budget()

    def _restored(self) -> None:
        self._share_budget()  # (members were restored before the classes that count them)

    def _refresh_trees(self) -> None:
        self._trees = [tree for member in self._all_members() for tree in member.trees]

    def _sync_layout(self) -> None:
        BaseSGT._sync_layout(self)
        for member in self._all_members():
            member.use_layout(self._layout, self._layout_revision)

    # -- serialisation -------------------------------------------------------------------------
    def _boosting_state(self) -> dict[str, Any]:
        return {
            "members": [len(m.trees) for m in self._members],
            "background": None if self._background is None else [len(m.trees) for m in self._background],
            "background_since": self._background_since,
            "members_since": self._members_since,
            "pending": self._response.pending,
            "lead": self._response.lead,
            "detector": self._response.detector.state(),
            "warning": self._response.warning.state(),
            "n_drifts": self._response.n_drifts,
            "retired_version": self._retired_version,
            **({} if self._relaxed is None else {"relax": list(self._relaxed)}),
            **({"bagging": MEAN_ONE} if self._bagging.mean_one else {}),
        }

    def _restore_boosting(self, extra: dict[str, Any]) -> None:
        self._relaxed = _saved_relax(extra.get("relax"))  # (saved before the relaxation: none)
        self._bagging = Bagging(self.poisson_rate, self.seed, _saved_mean_one(extra.get("bagging")))
        counts = [int(c) for c in extra["members"]]
        background = extra["background"]
        if self.n_members is None:  # the count followed the classes, restored after the members
            self._members = self._new_members(len(counts))
        if background is not None:
            saved = [int(c) for c in background]
            counts += saved
            self._background = self._new_members(len(saved) if self.n_members is None else None)
        members = self._all_members()
        if len(counts) != len(members) or sum(counts) != len(self._trees) or min(counts) < 0:
            raise ValueError(f"{len(self._trees)} trees do not make members of {counts}")
        trees = iter(self._trees)
        positions = [*range(len(self._members)), *range(len(members) - len(self._members))]
        for member, count, position in zip(members, counts, positions):
            member.use_trees(list(itertools.islice(trees, count)))
            member.follow_far_terms(self._drop_far_terms)  # (those made before the restore read it)
            member.use_layout(self._layout, self._layout_revision)
            # the trees were restored with the model's own parameters
            member.set_tree_params(
                linear_steps=self._linear_steps_now(member.n_outputs),
                **self._subspaces(position),
                **self._leaf_rules(),
                bound_block=self.bound_block,  # (the members made before the restore took the class's)
            )
            if self._delta_ladder:  # (the classifier's follow its classes once they are restored)
                member.set_tree_params(delta=self._member_delta(member.n_outputs) * member.delta_scale)
        self._response.restore(extra)
        # states saved before backgrounds had a bounded life: the life counts from the restore
        self._background_since = int(extra.get("background_since", self._n_seen))
        self._members_since = int(extra.get("members_since", 0))  # saved before: the first ensemble's
        self._retired_version = int(extra["retired_version"])

    def _state_arrays(self) -> list[tuple[str, np.ndarray]]:
        arrays: list[tuple[str, np.ndarray]] = super()._state_arrays()
        if self._policy.replay:
            arrays += self._recent.arrays("recent", self._layout.n_features)
        return arrays

    def _restore_arrays(self, extra: dict[str, Any], arrays: dict[str, np.ndarray]) -> None:
        super()._restore_arrays(extra, arrays)
        if self._policy.replay and "recent.codes" in arrays:  # (else saved without: none kept)
            self._recent.restore("recent", arrays, self._layout.n_features)

    # -- prediction of one record --------------------------------------------------------------
    def _predict_raw_codes(self, codes: Sequence[int] | np.ndarray) -> list[float]:
        """The members' shrunken sum as `_run_members` predicts a row, in Python floats (the same
        operations in the same order as the arrays', without numpy's cost per member).

        The members change only as the model learns a record (which counts it) or replaces its main
        ensemble, and the space's grids only as it learns: the scores of the record last scored are
        kept for as long as neither happened."""
        key = (self._n_seen, self._space.revision, tuple(int(c) for c in codes))
        last = self._last_scored
        if last is not None and last[0] == key and last[1] is self._members:
            return list(last[2])
        columns = self._n_raw(0) + int(self._outputs.every_class_from_three)
        base = self._base_columns(1, columns, np.zeros(1, dtype=bool), np.zeros(1), NO_EVENTS)[0]
        total: list[float] = base[0].tolist()
        for m, member in enumerate(self._members):
            raw = [0.0] * columns
            values = [
                v for tree in member.trees for v in tree.predict_outputs_one(tree.route_one(codes)[0], codes)
            ]
            first = self._outputs.first_column(member.n_outputs)
            raw[first : first + len(values)] = values
            step = self._member_step(m)
            total = [t + step * r for t, r in zip(total, raw, strict=True)]
        if self._outputs.every_class_from_three:  # (`_reference_scores`)
            total = [t - total[0] for t in total[1:]]
        scores = total[: self._n_scores()]
        self._last_scored = (key, self._members, scores)
        return list(scores)

    # -- members in order ----------------------------------------------------------------------
    def _run_members(
        self,
        members: list[Member],
        part: Part,
        table: np.ndarray,
        weights: np.ndarray,
        base: tuple[np.ndarray, np.ndarray],
        learn: np.ndarray,
        events: np.ndarray,
        regrids: dict[int, list[Regrid]],
    ) -> np.ndarray:
        """Run members in order, each learning at the shrunken sum of those before it (at the base
        score alone if `_averaged`); return the ensemble's raw scores (as predicted, before each row
        was learned)."""
        predicted, learned = base
        n, width = predicted.shape
        if n == 1:
            one = self._run_members_one(members, part, table[0], weights[:, 0], base, learn, regrids)
            return np.array([one])
        for m, member in enumerate(members):
            table[:, WEIGHT] = weights[m]
            table[:, OFFSETS:] = learned
            routes = part.routes(member) if n > ROW_BY_ROW_MAX else None
            # the columns the rows are predicted in (a member that widens at a row of the span does
            # so at its last: see `_growth_cuts`)
            first = self._outputs.first_column(member.n_outputs)
            member_raw = member.run(part.codes, table, learn, events, regrids, part.inputs, routes)
            raw = np.zeros((n, width))
            columns = min(width - first, member_raw.shape[1])
            raw[:, first : first + columns] = member_raw[:, :columns]
            step = self._member_step(m) * raw
            predicted = predicted + step
            if not self._averaged:
                learned = learned + step
        return predicted

    def _run_members_one(
        self,
        members: list[Member],
        part: Part,
        row: np.ndarray,
        weights: np.ndarray,
        base: tuple[np.ndarray, np.ndarray],
        learn: np.ndarray,
        regrids: dict[int, list[Regrid]],
    ) -> list[float]:
        """`_run_members` of one row (its table row `row`, its members' weights `weights`) in Python
        floats (`Member.run_one`): the same operations in the same order as the arrays', without
        numpy's cost per call, which dominates a record learned alone (sgt's one-record path)."""
        predicted, learned = base[0][0].tolist(), base[1][0].tolist()
        width = len(predicted)
        codes, target, grown = part.codes[0].tolist(), float(row[TARGET]), regrids.get(0)
        each = weights.tolist()
        for m, member in enumerate(members):
            first = self._outputs.first_column(member.n_outputs)
            member_raw = member.run_one(codes, [target, each[m], *learned], bool(learn[0]), grown)
            raw = [0.0] * width
            shown = member_raw[: width - first]
            raw[first : first + len(shown)] = shown
            shrink = self._member_step(m)
            step = [shrink * v for v in raw]
            predicted = [p + s for p, s in zip(predicted, step, strict=True)]
            if not self._averaged:
                learned = [v + s for v, s in zip(learned, step, strict=True)]
        return predicted

    # -- young ensembles (the policy's `youth`) ----------------------------------------------
    def _follow_linear_start(self) -> None:
        """Every member's linear steps as `_linear_steps_now` says (at a fixed row: see `_run_encoded`)."""
        for member in self._all_members():
            steps = self._linear_steps_now(member.n_outputs)
            if steps != member.linear_steps:  # (else its trees hold it already: `Member.set_tree_params`)
                member.set_tree_params(linear_steps=steps)

    def _follow_youth(self) -> None:
        """Every ensemble's parameters for its age (at a fixed row: see `_run_encoded`)."""
        youth = self._policy.youth
        if youth is None:
            return
        for ensemble, since in self._ensembles():
            share = self._youth_share(since)
            scale = 1.0 if youth.delta_factor is None else youth.delta_factor ** (1.0 - share)
            changes: dict[str, Any] = {}
            for name in ("lambda_", "grace_period", "grace_start"):
                young = getattr(youth, name)
                if young is not None:
                    value = young + share * (getattr(self, name) - young)
                    changes[name] = value if name == "lambda_" else round(value)
            for member in ensemble:
                member.set_delta_scale(scale)
                member.set_tree_params(delta=self._member_delta(member.n_outputs) * scale, **changes)

    def _youth_share(self, since: int) -> float:
        """How far an ensemble started at `since` has moved from its young parameters (0 to 1), by its
        age at the start of the current drift period."""
        youth = self._policy.youth
        assert youth is not None
        if since == 0 and not youth.first:
            return 1.0
        period = self._policy.drift_period
        age = (self._n_seen - since) // period * period
        return min(1.0, age / youth.records)

    def _weights(self, learn: np.ndarray, since: int | None = None, first: int | None = None) -> np.ndarray:
        """Bagging weight of every row for every member of the ensemble started at `since` (None: the
        main one) ([members, rows]; 0 for rows not learned); the first learned row is record `first`
        (None: the next one)."""
        youth = self._policy.youth
        rate = None
        if youth is not None and youth.poisson_rate is not None and self.poisson_rate is not None:
            share = self._youth_share(self._members_since if since is None else since)
            rate = youth.poisson_rate + share * (self.poisson_rate - youth.poisson_rate)
        first = self._n_seen if first is None else first
        return self._bagging.weights(learn, self._member_count(), first, rate)

    # -- what the drift response does to the ensembles (`Ensembles`) -----------------------
    def has_background(self) -> bool:
        return self._background is not None

    def background_expired(self) -> bool:
        """Whether the background ensemble has learned for the policy's `background_life` records."""
        return self._n_seen - self._background_since >= self._policy.background_life

    def start_background(self, detector: PageHinkley | None = None, most: int | None = None) -> None:
        """A new background ensemble; with the policy's `replay`, it first learns the recent records
        since the change `detector` estimates (at most `most`)."""
        self._retire(self._background or [])
        self._background = self._new_members()
        self._background_since = self._n_seen
        if self._policy.replay and detector is not None:
            k = math.ceil(self._policy.replay_share * detector.rising)
            self._learn_recent(self._background, k if most is None else min(k, most))

    def promote_background(self) -> None:
        """The background ensemble becomes the main one."""
        assert self._background is not None
        self._retire(self._members)
        self._members, self._background = self._background, None
        self._members_since = self._background_since

    def drop_background(self) -> None:
        self._retire(self._background or [])
        self._background = None

    def _learn_recent(self, members: list[Member], k: int) -> None:
        """`members` (a new ensemble, young) learn the last k records kept (as many as are), with the
        bagging weights of those records."""
        codes, targets = self._recent.last(k, self._layout.n_features)
        k = targets.size
        if not k:
            return
        self._follow_youth()
        learn = np.ones(k, dtype=bool)
        width = self._n_raw(0) + int(self._outputs.every_class_from_three)
        table = np.zeros((k, OFFSETS + width))
        table[:, TARGET] = targets
        weights = self._weights(learn, self._background_since, first=self._n_seen - k)
        base = self._base_columns(k, width, learn, targets, NO_EVENTS)
        part = Batch(codes, leaf_inputs_of(self._layout, codes)).part(0, k)
        self._run_members(members, part, table, weights, base, learn, NO_EVENTS, {})

    def _retire(self, members: list[Member]) -> None:
        """Keep the changes of members about to be dropped in `version`, so that it never decreases."""
        counted = next((changes for ran, changes in self._ran_past if ran is members), None)
        self._retired_version += sum(m.changes() for m in members) if counted is None else counted


def save_sides(
    header: dict[str, Any],
    arrays: list[tuple[str, np.ndarray]],
    sides: Sequence[tuple[str, BaseSGT | None]],
    choice: dict[str, Any],
) -> None:
    """Add a boosted model's side models (its single tree, its forest) to its saved parts: each one
    alive's header under the header's ``extra.<name>``, with the choice's saved fields `choice` beside
    the first of them, and its arrays as ``extra.<name>.<array>``, last (`side_from_saved` reads one
    back)."""
    for name, side in sides:
        if side is None:
            continue
        side_header, side_arrays = side._saved_parts()
        header["extra"][name] = {"header": side_header, "version": FORMAT_VERSION, **choice}
        arrays += [(f"extra.{name}.{array}", a) for array, a in side_arrays]
        choice = {}


def side_from_saved(
    kind: type[BaseSGT], name: str, saved: dict[str, Any], arrays: dict[str, np.ndarray], loss: Any = None
) -> Any:
    """The side model `name` of class `kind` from its saved header `saved` (``extra.<name>``, checked
    by the caller) and its arrays among `arrays` (those after ``extra.``: ``<name>.<array>``)."""
    prefix = f"{name}."
    own = {array[len(prefix) :]: a for array, a in arrays.items() if array.startswith(prefix)}
    return kind.from_saved(Saved(saved["header"], own, int(saved["version"])), loss)


def _saved_relax(saved: Any) -> tuple[float, float, float | None] | None:
    """The relaxation a save holds (growth, cap, impurity), checked; None if it holds none."""
    if saved is None:
        return None
    if not (isinstance(saved, list) and len(saved) == 3 and all(_is_number(v) for v in saved[:2])):
        raise ValueError(f"relax must be [growth, cap, impurity or null], got {saved!r}")
    if saved[2] is not None and not _is_number(saved[2]):
        raise ValueError(f"relax must be [growth, cap, impurity or null], got {saved!r}")
    return float(saved[0]), float(saved[1]), None if saved[2] is None else float(saved[2])


def _saved_mean_one(saved: Any) -> bool:
    """Whether a save's bagging weights are divided by the rate (`MEAN_ONE`); absent: the raw draws of
    the format before."""
    if saved is None:
        return False
    if saved != MEAN_ONE:
        raise ValueError(f"bagging must be {MEAN_ONE!r} or absent, got {saved!r}")
    return True


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
