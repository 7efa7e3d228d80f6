"""`BoostedRegressor`, and the regression ensemble it shares with the adaptive single tree.

`_RegressorEnsemble` is the boosted ensemble over SGTRegressor: one tree per member, the loss's
gradients at the base score plus the shrunken sum of the members, relative absolute errors for the
drift tests. `BoostedRegressor` is that ensemble with its public parameters and the regressor's drift
policy; `sgt.adaptive.AdaptiveSGTRegressor` is a one-member one.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np

from sgt import level_rows
from sgt.base import LEAF_MODELS
from sgt.boosted.engine import _Boosting
from sgt.boosted.ensemble import checked_feature_share, save_sides, side_from_saved
from sgt.boosted.forest import REGRESSOR_FOREST, Averaged, smaller_depth
from sgt.boosted.policy import REGRESSOR_POLICY, DriftPolicy
from sgt.boosted.tree_choice import TreeChoice
from sgt.explain import blended_importances, explain_raw, on_features
from sgt.features import FeatureName, Regrid
from sgt.losses import Loss, SquaredError
from sgt.regressor import SGTRegressor
from sgt.residual import ResidualLevel
from sgt.serialization import SerializationError

__all__ = [
    "FINE_BINS",
    "FINE_MAX_BYTES",
    "MIN_SHARE",
    "TOTAL_STEP",
    "BoostedRegressor",
    "ForestRegressor",
    "damped_share",
]

#: the largest sum of the members' shrinkage, n_members * step. Every member takes its Newton step at
#: the same block boundaries, from gradients gathered before any of them moved: together they move the
#: prediction by that sum times the residual they saw. Above about 2.5 the overshoot grows from one
#: boundary to the next (Friedman #1: 20 members at 0.5 had 50 times the MAE of 5 at 0.5); 2.5 is the
#: largest sum measured stable (5 at 0.5, 10 at 0.25), so the defaults keep their step.
TOTAL_STEP = 2.5


#: the least share `damped_share` gives: at a step of 1 (or near it) the first member alone moves the
#: prediction by the residual, and the members after it would otherwise not learn at all
MIN_SHARE = 0.1


#: the grid of the fine tree (BoostedRegressor's `fine_tree`): a split falls on a bin edge, up to half a
#: bin from a step in the target, and the records between cost the step's height; 1,024 bins put it 16
#: times nearer than the members' 64 (a constant-leaf tree on stress-step: 0.578 at 64 bins, 0.474 at
#: 1,024; docs/decisions.md, "The boosted ensemble")
FINE_BINS = 1024

#: the fine tree's memory budget (its `max_bytes`): a constant-leaf tree of 1,024 bins gathers sixteen
#: times the statistics of a 64-bin one per leaf (unbounded, stress-irrelevant's took 71 MB in 10,000
#: records); where it serves (steps) it stays under 2.5 MB
FINE_MAX_BYTES = 8_000_000

#: the parameters of BoostedRegressor's side models (False: the model has none, as saved before it)
_SIDE_PARAMS = ("single_tree", "forest", "fine_tree")


def damped_share(step: float, members: int) -> float:
    """The share of its Newton steps each member after the first takes, so that the members together
    move the prediction by at most the residual they saw: step * (1 + (members - 1) * share) <= 1.

    Why: every member takes its Newton step at the same block boundaries, from gradients gathered
    before any of them moved (the members' leaves start and split together), so each member after
    the first also fits the part of the residual the members before it are fitting at that very
    boundary. (At least `MIN_SHARE`: with a step near 1 the bound cannot hold but by members that
    never learn.) Undamped, the prediction moves by step * members times the residual (2.5 with the
    defaults), and the members after the first then spend the following blocks undoing it, each with
    the sign of the one before flipped: on a slowly moving target (a time series) they never settle,
    and the ensemble learned next to nothing (TrumpApproval: the MAE of the running mean, where one
    tree has two thirds of it). Damped so, the first boundary moves the prediction by at most the
    residual, and the damped members still converge to the same fit (a damped Newton step has the same
    fixed point), a few blocks later.
    """
    if members <= 1:
        return 1.0
    return min(1.0, max(MIN_SHARE, (1.0 / step - 1.0) / (members - 1)))


class _RegressorEnsemble(_Boosting, SGTRegressor):
    """A boosted ensemble of SGTs for regression, with the drift policy it is given."""

    _levelled = False  # (its residual level, `_residual`, corrects the ensemble's score instead)
    _leaf_models: ClassVar[tuple[str, ...]] = LEAF_MODELS  # (not the single regressor's "auto")

    def __init__(
        self,
        *,
        n_members: int,
        learning_rate: float,
        poisson_rate: float | None,
        drift_threshold: float | None,
        drift_delta: float,
        seed: int,
        delta: float,
        grace_period: int,
        lambda_: float,
        gamma: float,
        bins: int,
        warm_up: int,
        max_depth: int | None,
        feature_names: Sequence[str] | None,
        nominal: Sequence[str],
        loss: Loss | None,
        base_score: float | None,
        max_categories: int | None,
        grace_start: int,
        leaf_model: str,
        linear_lambda: float,
        max_bytes: int | None,
        interval_coverages: Sequence[float],
        policy: DriftPolicy,
    ) -> None:
        SGTRegressor.__init__(
            self,
            delta,
            grace_period,
            lambda_,
            gamma,
            bins,
            warm_up,
            max_depth,
            feature_names,
            nominal,
            loss=loss,
            base_score=base_score,
            max_categories=max_categories,
            grace_start=grace_start,
            leaf_model=leaf_model,
            linear_lambda=linear_lambda,
            max_bytes=max_bytes,
            interval_coverages=interval_coverages,
        )
        self._bounded_step = True  # False for models saved before the bound (see `_step`)
        self._damped_members = True  # False for models saved before the damping (see `_step_share`)
        # the residual level added to the predictions (BoostedRegressor's; None: none, as saved before)
        self._residual: ResidualLevel | None = None
        # the single regressor learning beside the members, and which prediction serves (BoostedRegressor's
        # `single_tree`; None: none, as saved before it)
        self._single: SGTRegressor | None = None
        # the forest learning beside them (BoostedRegressor's `forest`; None: none, as saved before it)
        self._forest: ForestRegressor | None = None
        # the fine tree learning beside them (BoostedRegressor's `fine_tree`; None: none, as saved before)
        self._fine: SGTRegressor | None = None
        # whether the single tree retired (`TreeChoice`): a save then lacks it on purpose
        self._tree_retired = False
        self._choice: TreeChoice | None = None
        # the rows (X, y) of the run under way, which the forest encodes in its own feature space
        self._rows: tuple[Any, Sequence[Any] | None] | None = None
        self._init_boosting(
            n_members, learning_rate, poisson_rate, drift_threshold, drift_delta, seed, policy
        )

    def get_params(self) -> dict[str, Any]:
        # (`single_tree` among the parameters of the class that takes it: not the adaptive tree's)
        # (and `forest`, `fine_tree`: BoostedRegressor's too)
        sides: dict[str, Any] = {n: vars(self)[n] for n in _SIDE_PARAMS if n in vars(self)}
        return {
            **self._boosting_params(),
            **SGTRegressor.get_params(self),
            **self._subspace_param(),
            **sides,
        }

    def _saved_params(self) -> dict[str, Any]:
        params = self._without_subspace(super()._saved_params())
        for name in _SIDE_PARAMS:
            if params.get(name, True) is False:  # (what a save without the parameter restores to)
                del params[name]
        return params

    def _state_extra(self) -> dict[str, Any]:
        # keys saved only where they change something, so a model they leave alone saves as before
        bound: dict[str, Any] = {"bounded_step": True} if self._step() != self.learning_rate else {}
        if self._damped_members and self._step_share(1) != 1.0:
            bound["damped_members"] = True
        if self._residual is not None:
            bound["residual"] = self._residual.state()
        if self._tree_retired:
            bound["tree_retired"] = True
        return {"base": self._base_value, **self._boosting_state(), **self._interval_state(), **bound}

    def _restore_extra(self, extra: dict[str, Any]) -> None:
        # saved without the key: before the bound, or a step it leaves alone (the same either way)
        self._bounded_step = bool(extra.get("bounded_step", False))
        # saved without the key: before the damping, or with no member it damps (the same either way)
        self._damped_members = bool(extra.get("damped_members", False))
        residual = extra.get("residual")  # (saved without: before the residual level, none)
        self._residual = None if residual is None else ResidualLevel.restored(residual)
        self._saved_single = extra.get("single")  # (restored with its arrays, `_restore_arrays`)
        self._saved_forest = extra.get("forest")  # (the same)
        self._saved_fine = extra.get("fine")  # (the same)
        self._tree_retired = extra.get("tree_retired", False) is True  # (saved without: it had not)
        self._restore_boosting(extra)
        for ensemble in (self._members, self._background or []):
            for position, member in enumerate(ensemble):
                member.set_step_share(self._step_share(position))
        if any(len(m.trees) != 1 for m in self._all_members()):
            raise ValueError("every member of a regressor has one tree")
        SGTRegressor._restore_extra(self, extra)

    def _saved_parts(self) -> tuple[dict[str, Any], list[tuple[str, np.ndarray]]]:
        """The model's parts, and its side models': the single tree's header under the header's
        ``extra.single``, the forest's under ``extra.forest``, the fine tree's under ``extra.fine``, the
        choice's errors under the first of them the model has; their arrays last, as
        ``extra.<side>.<name>`` (`_restore_arrays` reads them)."""
        header, arrays = super()._saved_parts()
        if self._choice is None:
            return header, arrays
        choice: dict[str, Any] = {"choice": self._choice.errors}
        if self._choice.learned is not None:  # (the forest may still retire)
            choice["learned"] = self._choice.learned
        if self._choice.tree_learned is not None:  # (the single tree may still retire)
            choice["tree_learned"] = self._choice.tree_learned
        sides = [("single", self._single), ("forest", self._forest), ("fine", self._fine)]
        save_sides(header, arrays, sides, choice)
        return header, arrays

    def _restore_arrays(self, extra: dict[str, Any], arrays: dict[str, np.ndarray]) -> None:
        super()._restore_arrays(extra, arrays)
        saved_single, self._saved_single = getattr(self, "_saved_single", None), None
        saved_forest, self._saved_forest = getattr(self, "_saved_forest", None), None
        saved_fine, self._saved_fine = getattr(self, "_saved_fine", None), None
        if self._choice is None:
            return  # (a model without side models, as saved before them)
        if (self._fine is None) != (saved_fine is None):  # (the fine tree never retires)
            raise SerializationError("a BoostedRegressor with its fine tree saves it, and one without none")
        if self._forest is not None and saved_forest is None:
            self._forest = None  # (it had retired)
        if self._single is not None and saved_single is None and self._tree_retired:
            self._single = None  # (it had retired; without the mark the save is refused below)
        if self._tree_retired and saved_single is not None:
            raise SerializationError("a BoostedRegressor whose single tree retired saves no single tree")
        if self._single is None and self._forest is None and self._fine is None:
            self._choice = None  # (the forest had retired, and there is no single tree)
            return
        if self._single is not None:
            single = _saved_side(SGTRegressor, "single", saved_single, arrays, self.loss)
            single._space = self._space  # (the same records: the ensemble's space, which encodes for all)
            self._single = single
        if self._forest is not None:
            # (its own feature space: saved by a model whose forest shared the ensemble's, that one's)
            self._forest = _saved_side(ForestRegressor, "forest", saved_forest, arrays, self.loss)
        if self._fine is not None:  # (its own feature space, saved with it)
            self._fine = _saved_side(SGTRegressor, "fine", saved_fine, arrays, self.loss)
        holder = next(
            saved
            for side, saved in (
                (self._single, saved_single),
                (self._forest, saved_forest),
                (self._fine, saved_fine),
            )
            if side is not None
        )
        assert isinstance(holder, dict)  # (`_saved_side` checked it)
        errors, learned, tree_learned = (
            holder.get("choice"),
            holder.get("learned"),
            holder.get("tree_learned"),
        )
        for count in (learned, tree_learned):
            if count is not None and (not isinstance(count, int) or isinstance(count, bool)):
                raise SerializationError(f"a BoostedRegressor's choice has a bad count of records: {count!r}")
        for count, side, what in (
            (learned, self._forest, "forest"),
            (tree_learned, self._single, "single tree"),
        ):
            if count is not None and side is None:
                raise SerializationError(
                    f"a BoostedRegressor's choice counts the youth of a {what} the save lacks"
                )
        try:
            self._choice = TreeChoice(errors, self._choice_models(), learned, tree_learned)
        except (TypeError, ValueError) as error:
            raise SerializationError(f"a BoostedRegressor needs its choice's errors: {error}") from None

    def _choice_models(self) -> frozenset[str]:
        """The models the choice serves from: the ensemble and the side models the model has."""
        sides = {"tree": self._single, "forest": self._forest, "fine": self._fine}
        return frozenset(["ensemble", *(name for name, side in sides.items() if side is not None)])

    @property
    def nbytes(self) -> int:
        """Bytes of the members' live arrays, and of the side models' beside them (the single tree's, the
        forest's and the fine tree's)."""
        sides = (self._single, self._forest, self._fine)
        return super().nbytes + sum(side.nbytes for side in sides if side is not None)

    def _n_outputs_per_member(self) -> int:
        return 1

    def _step(self) -> float:
        """`learning_rate`, at most TOTAL_STEP / n_members (unless saved before the bound)."""
        if not self._bounded_step:
            return self.learning_rate
        return min(self.learning_rate, TOTAL_STEP / self._member_count())

    def _step_share(self, position: int) -> float:
        """The share of its Newton steps the member at `position` takes: all for the first, and for
        the others `damped_share` (unless saved before the damping)."""
        if position == 0 or not getattr(self, "_damped_members", False):
            return 1.0
        return damped_share(self._step(), self._member_count())

    def _n_raw(self, n_events: int) -> int:
        return 1

    # -- the residual level (sgt.residual), added to the ensemble's predictions ----------
    def _run_encoded(
        self,
        codes: np.ndarray,
        targets: np.ndarray,
        learn: np.ndarray,
        events: np.ndarray,
        regrids: dict[int, list[Regrid]],
    ) -> tuple[np.ndarray, np.ndarray]:
        """The engine's run, then each row's prediction corrected by the residual level as it stood
        before the row, which then learns the row's residual (every path runs through here)."""
        out, outputs_at = super()._run_encoded(codes, targets, learn, events, regrids)
        if self._residual is not None:
            served = level_rows.served_rows(out[:, :1], targets, learn, [self._residual], None)
            out[:, 0] = self._residual.apply(out[:, 0], targets, learn) if served is None else served
        if self._choice is not None:
            predictions = {"ensemble": out[:, 0]}
            if self._single is not None:
                predictions["tree"] = self._single_rows(codes, targets, learn, events, regrids)
            if self._forest is not None:
                predictions["forest"] = self._forest_rows()
            if self._fine is not None:
                predictions["fine"] = self._fine_rows()
            out[:, 0] = self._choice.serve(predictions, targets, learn)
            self._drop_retired()
        return out, outputs_at

    def _drop_retired(self) -> None:
        """Drop the forest or the single tree once the choice retired it (after a batch or a record), and
        the choice once the ensemble alone is left."""
        choice = self._choice
        assert choice is not None
        if "forest" not in choice.models:
            self._forest = None
        if "tree" not in choice.models and self._single is not None:
            self._single = None
            self._tree_retired = True
        if choice.retired:
            self._choice = None

    def _single_rows(
        self,
        codes: np.ndarray,
        targets: np.ndarray,
        learn: np.ndarray,
        events: np.ndarray,
        regrids: dict[int, list[Regrid]],
    ) -> np.ndarray:
        """The single tree's prediction of each row (then it learns the row, if learned): the same coded
        rows, run as its own batch path runs them after encoding."""
        single = self._single
        assert single is not None
        single._sync_layout()
        raw, _ = single._run_codes(codes, targets, learn, events, None, regrids)
        served = single._served_array(raw, targets, learn)  # (the targets are checked: the same loss)
        if served is not None:
            return served
        targets_or_none = [t if learned else None for t, learned in zip(targets.tolist(), learn.tolist())]
        return single._served_rows(raw, targets_or_none)

    def _forest_rows(self) -> np.ndarray:
        """The forest's prediction of each row of the run under way (then it learns the row, if
        learned): the same rows, run through its own batch path, in its own feature space. Why its own:
        its memory budget (REGRESSOR_FOREST's `max_bytes`) cuts a batch where the layout widens, as a
        one-record loop would, which the space shared with the members (widened by their encoding of
        the whole batch first) cannot; the same records give its own space the same codes."""
        forest, rows = self._forest, self._rows
        assert forest is not None and rows is not None
        raw, _ = forest._run(*rows)
        return np.asarray(forest.loss.link(raw[:, 0]), dtype=np.float64)

    def _fine_rows(self) -> np.ndarray:
        """The fine tree's prediction of each row of the run under way (then it learns the row, if
        learned): the same rows, through its own public batch path, in its own feature space (its grid
        is finer than the members')."""
        fine, rows = self._fine, self._rows
        assert fine is not None and rows is not None
        X, y = rows
        predicted = fine.predict_many(X) if y is None else fine.predict_learn_many(X, y)
        return np.asarray(predicted, dtype=np.float64)

    def _run(self, X: Any, y: Sequence[Any] | None, out: Any = None) -> tuple[np.ndarray, np.ndarray]:
        """The engine's run, with its rows kept for the forest and the fine tree (`_forest_rows`,
        `_fine_rows`)."""
        self._rows = (X, y)
        try:
            return super()._run(X, y, out)
        finally:
            self._rows = None

    def _learn_one(self, x: Any, y: Any) -> None:
        """The engine's one record, kept for the forest and the fine tree as a run of one row
        (`_forest_rows`, `_fine_rows`)."""
        self._rows = ([x], [y])
        try:
            super()._learn_one(x, y)
        finally:
            self._rows = None

    def _predict_raw_one(self, x: Any) -> list[float]:
        """The served score of one record, encoded once for the members and the single tree (they share
        a space); the forest and the fine tree encode it in their own (`_forest_rows` says why)."""
        codes = self._space.encode_one(x, learn=False)
        scores = self._predict_raw_codes(codes)
        if self._residual is not None:
            scores = [self._residual.corrected(scores[0])]  # (as `ResidualLevel.apply` corrects it)
        if self._choice is None:
            return scores
        single = self._single
        assert single is None or single._space is self._space  # (`_new_single`, `_restore_arrays`)
        predictions = {"ensemble": scores[0]}
        if single is not None:
            predictions["tree"] = single._predict_codes_one(codes)
        if self._forest is not None:
            predictions["forest"] = self._forest.predict_one(x)
        if self._fine is not None:
            predictions["fine"] = self._fine.predict_one(x)
        served = self._choice.candidates(predictions)
        return [served[self._choice.serving()]]

    def _served_terms(self, terms: np.ndarray, x: Any) -> np.ndarray:
        """`explain_raw` of the served prediction, from the ensemble's `terms` [1, 1 + features]: those,
        the single tree's (its serving tree's, its level's correction and trend offset in the base), the
        forest's (as a boosted model's, moved to this model's features: its feature space is its own),
        the fine tree's (as the single tree's, moved so) or the blend of two that serves."""
        if self._choice is None:
            return terms
        candidate = self._choice.offered[self._choice.serving()]
        models: dict[str, np.ndarray] = {"ensemble": terms}
        if "tree" in candidate.models and self._single is not None:
            models["tree"] = _tree_terms(self._single, x)
        if "forest" in candidate.models and self._forest is not None:
            forest = self._forest
            models["forest"] = on_features(explain_raw(forest, x), forest._space.names, self._space.names)
        if "fine" in candidate.models and self._fine is not None:
            fine = self._fine
            models["fine"] = on_features(_tree_terms(fine, x), fine._space.names, self._space.names)
        result: np.ndarray = candidate.of(models)
        return result

    def feature_importances(self) -> dict[FeatureName, float]:
        """The importances (sgt.explain) of the candidate that serves: the members' while they serve
        alone; else each needed model's, blended with the candidate's weights as its predictions are
        (`sgt.explain.blended_importances`)."""
        members = super().feature_importances()
        if self._choice is None:
            return members
        candidate = self._choice.offered[self._choice.serving()]
        if candidate.models == {"ensemble"}:
            return members
        sides = {"tree": self._single, "forest": self._forest, "fine": self._fine}
        per_model = {}
        for name in candidate.models:
            side = sides.get(name)
            per_model[name] = members if side is None else side.feature_importances()
        return blended_importances(candidate, per_model, list(self._space.names))

    def _output_offset(self, score: float) -> float:
        return 0.0 if self._residual is None else self._residual.correction(score)

    def _base(self) -> float:
        return 0.0  # the trees hold deviations; `_base_columns` adds the base score once, to F

    def _loss_gradients(
        self, point: np.ndarray, targets: np.ndarray, every_class: bool = False
    ) -> tuple[np.ndarray, np.ndarray]:
        g, h = self.loss.gradient_hessian(targets, point[0])
        return g[None, :], h[None, :]

    def _loss_gradient_one(
        self, point: list[float], target: float, every_class: bool
    ) -> tuple[list[float], list[float]] | None:
        """The squared error's g = point - target and h = 1 (`SquaredError.gradient_hessian`); None for
        the other losses."""
        if type(self.loss) is not SquaredError or len(point) != 1:
            return None
        return [point[0] - target], [1.0]

    def _errors(self, point: np.ndarray, targets: np.ndarray, outputs_at: np.ndarray) -> np.ndarray:
        return np.abs(self.loss.link(point[:, 0]) - targets)

    def _base_columns(
        self, n: int, width: int, learn: np.ndarray, targets: np.ndarray, events: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        base = SGTRegressor._base(self)
        predicted = np.full((n, width), base)
        learned = predicted.copy()
        if events.size:  # the first target ever: it sets the base score before the row is learned
            row = int(events[0])
            first = float(self.loss.base_score(float(targets[row])))
            predicted[row + 1 :] = first
            learned[row:] = first
        return predicted, learned

    def _register_events(self, targets: np.ndarray, events: np.ndarray) -> None:
        if events.size:
            self._register_target(float(targets[int(events[0])]))


def _tree_terms(single: SGTRegressor, x: Any) -> np.ndarray:
    """`explain_raw` of a single regressor's served prediction of `x` [1, 1 + its features]: its serving
    tree's terms, its level's correction and trend offset in the base."""
    own = explain_raw(single, x)[single._serving() : single._serving() + 1].copy()
    score = float(own[0].sum())
    own[0, 0] += single._served(score + single._offset()) - score  # (its trend offset too)
    return own


def _saved_side(kind: Any, name: str, saved: Any, arrays: dict[str, np.ndarray], loss: Loss) -> Any:
    """The side model `name` ("single", "forest", "fine") of class `kind` a save holds
    (`side_from_saved`), once its header under the header's ``extra.<name>`` is checked."""
    what = {"single": "single tree", "forest": "forest", "fine": "fine tree"}[name]
    if not isinstance(saved, dict) or not isinstance(saved.get("header"), dict):
        raise SerializationError(f"a BoostedRegressor with its {what} needs its {what}'s state")
    return side_from_saved(kind, name, saved, arrays, loss)


class BoostedRegressor(_RegressorEnsemble):
    """Online gradient boosting of SGTs for regression, with online bagging and drift detection.

    The prediction is `loss.link(b + eta (f_1 + ... + f_M))`, b the loss's base score of the first
    target; member m learns from the loss's gradients at b + eta (f_1 + ... + f_{m-1}) + f_m. See
    sgt.boosted for the algorithm. The members after the first take `damped_share` of their Newton
    steps (all take theirs at the same block boundaries), and with a loss without a link (squared
    error, Huber) the prediction is corrected by a recent mean of the ensemble's own residuals where
    that has done better (sgt.residual: a target that wanders over time). By default a single
    SGTRegressor learns beside the members and the prediction served is the ensemble's, the single
    tree's, a forest's beside them (`forest`), a fine tree's (`fine_tree`) or a blend of two, whichever
    erred least lately (`single_tree`, `forest`, `fine_tree`). Same methods and guarantees as
    SGTRegressor, plus `n_trees` and `n_drifts` (the members' trees: the views and `n_trees` show the
    members; explanations follow the prediction served). Why the defaults are what they are:
    docs/decisions.md, "The boosted ensemble"; the figures: BENCHMARKS.md, sections 5 and 9.

    Parameters
    ----------
    n_members
        Boosting stages. Default 5.
    learning_rate
        Shrinkage eta of each member's contribution, in (0, 1]. Default 0.5. The ensemble takes at most
        2.5 / n_members (`TOTAL_STEP`): more members at a large rate diverged.
    poisson_rate
        As for BoostedClassifier, but default None (no bagging: with linear members bagging lost
        accuracy).
    drift_threshold
        Page-Hinkley alarm level on the ensemble's absolute errors, each divided by the mean absolute
        error before it (a warning at half of it); None: no drift detection. Default 50.
    drift_delta
        Tolerated rise of that relative error before it counts towards the alarm. Default 0.2 (a
        relative error varies far more than a 0/1 error rate: smaller values raise false alarms).
    seed
        As for BoostedClassifier.
    delta
        As for SGTRegressor, but default 1e-2.
    lambda_
        As for SGTRegressor, default 0.1 (larger values raised false drift alarms on a stationary
        stream).
    leaf_model, linear_lambda
        As for SGTRegressor, but default linear members with `linear_lambda` 0.1.
    feature_share
        None (default): every split attempt of a member searches every feature. A number in (0, 1]:
        each attempt searches a random subset, each feature drawn with that probability, anew at every
        attempt of every leaf (random subspaces, as in random forests: the members grow different
        trees). The draw depends only on the seed, the member's position, the leaf and the records it
        holds, so batching and restoring keep the model exact. Off by default: 0.5 wins on most
        regression streams and loses on two of the three real ones (BENCHMARKS.md, section 5).
    single_tree
        True (default): a single SGTRegressor (`leaf_model="auto"`: a tree per leaf model, the best
        serving; its own `delta` and `linear_lambda`, the ensemble's other tree settings) learns every
        record beside the members, on the same coded rows, and the model serves the ensemble's
        prediction, the tree's, their mean or a blend of the two in eighths, whichever has the lowest
        absolute error faded by 0.98 per learned record (`TreeChoice`). The linear members lose to the
        tree's constant leaves on step-shaped targets and a blend beats both where they err apart: on
        the robustness suite's 19 regression streams 0.91 times the members' MAE in geometric mean,
        worse on none. It costs the single tree's work (about 2.5 to 3.7 times the members' time
        batched). Beside a forest (`forest`), from `TreeChoice.TREE_YOUTH` (3,000) learned records on
        it retires for good at the first record after which the serving candidate does not need it and
        its best candidate errs `TreeChoice.TREE_MARGIN` (5%) more than the serving one (where the
        forest's candidates or the members' lead, its work buys nothing); the model then drops it
        (`single_tree` stays True). Not with a memory budget (`max_bytes`) or a loss with a link
        (Poisson): there the members serve alone. A model saved with the ensemble, the tree and their
        mean alone (before the other blends) keeps choosing among those three; one saved before the
        tree's retirement keeps its tree.
        False: the members alone (as saved before the parameter).
    forest
        True (default): a forest (`ForestRegressor` with sgt.boosted.forest's REGRESSOR_FOREST: ten
        members of split confidence 0.1 and grace period 20, each weighing the records by its own
        Poisson(1) draws, averaged instead of boosted, within 32 MB; the ensemble's
        grids, loss and base score) learns every record beside the members and the single tree, in its
        own feature space, and the choice adds three candidates: the forest's prediction, its mean with
        the ensemble's and its mean with the tree's (`tree_choice.CANDIDATES`; without the single tree,
        the ensemble, the forest and their mean). The forest's deep bagged trees fit low-dimensional
        nonlinear targets that the boosted linear members and the single tree fit slowly
        (docs/decisions.md has the figures). From `TreeChoice.YOUTH` (1,000) learned records on it
        retires for good at the first record after which the serving candidate does not need it and
        its best candidate errs `TreeChoice.RETIRE_MARGIN` (10%) more than the serving one; the model
        then drops it (a save holds no forest; `forest` stays True). Not with a memory budget or a loss
        with a link, as `single_tree`. False: no forest (as saved before the parameter: the bytes of
        that format). A model saved before the retirement keeps its forest, as it did.
    fine_tree
        True (default): a constant-leaf SGTRegressor on its own grid of `FINE_BINS` (1,024) bins within
        `FINE_MAX_BYTES` (8 MB), the ensemble's other tree settings, learns every record beside the
        members, the single tree and the forest, and the choice adds three candidates: its prediction
        and its means with the forest's and the single tree's (`tree_choice.FINE_CANDIDATES`). Why: a
        split falls on a bin edge, up to half a bin from a step in the target, and the records between
        cost the step's height; the members' 64 bins are kept (finer grids for every tree, or for the
        single tree or the forest, lost elsewhere: docs/decisions.md). It never retires: a
        constant-leaf tree costs little beside the others (its own encoding of each record included).
        Not with a memory budget or a loss with a link, as `single_tree`. False: none (as saved before
        the parameter: the bytes of that format).

    The other parameters are SGTRegressor's and apply to every tree.

    Examples
    --------
    >>> import numpy as np
    >>> from sgt import BoostedRegressor
    >>> rng = np.random.default_rng(2)
    >>> X = rng.uniform(-1, 1, size=(8000, 2))
    >>> y = 4.0 * (X[:, 0] > 0) + 2.0 * X[:, 1] + rng.normal(0, 0.1, 8000)
    >>> model = BoostedRegressor(warm_up=200)
    >>> predictions = model.predict_learn_many(X, y)
    >>> bool(np.abs(predictions - y)[-2000:].mean() < 0.5), model.n_trees
    (True, 5)

    References
    ----------
    Gouk, Pfahringer and Frank, "Stochastic Gradient Trees", ACML 2019. Oza and Russell, "Online
    bagging and boosting", AISTATS 2001.
    """

    #: the regressor's answer to warnings and drifts (sgt.boosted.policy), given to the ensemble
    _drift_policy: ClassVar[DriftPolicy] = REGRESSOR_POLICY
    #: the single tree's leaf model and class (class attributes so that a benchmark variant may change them)
    _single_leaves: ClassVar[str] = "auto"
    _single_class: ClassVar[type[SGTRegressor]] = SGTRegressor
    #: the forest's settings (a class attribute so that a benchmark variant may change them)
    _forest_settings: ClassVar[dict[str, Any]] = REGRESSOR_FOREST
    #: whether the single tree may retire (`TreeChoice.TREE_MARGIN`; a class attribute so that a
    #: benchmark variant may change it)
    _tree_retires: ClassVar[bool] = True

    def __init__(
        self,
        n_members: int = 5,
        learning_rate: float = 0.5,
        poisson_rate: float | None = None,
        drift_threshold: float | None = 50.0,
        drift_delta: float = 0.2,
        seed: int = 0,
        delta: float = 1e-2,
        grace_period: int = 100,
        lambda_: float = 0.1,
        gamma: float = 0.1,
        bins: int = 64,
        warm_up: int = 1000,
        max_depth: int | None = None,
        feature_names: Sequence[str] | None = None,
        nominal: Sequence[str] = (),
        loss: Loss | None = None,
        base_score: float | None = None,
        max_categories: int | None = None,
        grace_start: int = 10,
        leaf_model: str = "linear",
        linear_lambda: float = 0.1,
        max_bytes: int | None = None,
        interval_coverages: Sequence[float] = (),
        feature_share: float | None = None,
        single_tree: bool = True,
        forest: bool = True,
        fine_tree: bool = True,
    ) -> None:
        self.feature_share = checked_feature_share(feature_share)  # (the members made below read it)
        for name, value in (("single_tree", single_tree), ("forest", forest), ("fine_tree", fine_tree)):
            if not isinstance(value, bool):
                raise ValueError(f"{name} must be True or False, got {value!r}")
        if forest and self._averaged:
            raise ValueError("forest must be False for a ForestRegressor (a forest has no forest of its own)")
        if fine_tree and self._averaged:
            raise ValueError("fine_tree must be False for a ForestRegressor (its members are its trees)")
        self.single_tree = single_tree
        self.forest = forest
        self.fine_tree = fine_tree
        super().__init__(
            n_members=n_members,
            learning_rate=learning_rate,
            poisson_rate=poisson_rate,
            drift_threshold=drift_threshold,
            drift_delta=drift_delta,
            seed=seed,
            delta=delta,
            grace_period=grace_period,
            lambda_=lambda_,
            gamma=gamma,
            bins=bins,
            warm_up=warm_up,
            max_depth=max_depth,
            feature_names=feature_names,
            nominal=nominal,
            loss=loss,
            base_score=base_score,
            max_categories=max_categories,
            grace_start=grace_start,
            leaf_model=leaf_model,
            linear_lambda=linear_lambda,
            max_bytes=max_bytes,
            interval_coverages=interval_coverages,
            policy=self._drift_policy,
        )
        if type(self.loss).link is Loss.link:  # (a residual level of a linked score would not add up)
            self._residual = ResidualLevel()
            if max_bytes is None:
                self._single = self._new_single() if single_tree else None
                self._forest = self._new_forest() if forest else None
                self._fine = self._new_fine() if fine_tree else None
            if self._single is not None or self._forest is not None or self._fine is not None:
                # (the tree retires beside a forest only: without one, a model saves as before)
                beside = self._single is not None and self._forest is not None
                tree_learned = 0 if beside and self._tree_retires else None
                self._choice = TreeChoice(models=self._choice_models(), tree_learned=tree_learned)

    def _new_single(self) -> SGTRegressor:
        """The single regressor beside the members: SGTRegressor's own `delta`, `linear_lambda` and
        leaf models ("auto"), the ensemble's other tree settings, and the ensemble's feature space (it
        encodes each record once for both)."""
        single = self._single_class(
            grace_period=self.grace_period,
            lambda_=self.lambda_,
            gamma=self.gamma,
            **self._data_settings(),
            max_depth=self.max_depth,
            leaf_model=self._single_leaves,
        )
        single._space = self._space
        return single

    def _new_fine(self) -> SGTRegressor:
        """The fine tree beside the members: constant leaves on a grid of `FINE_BINS` bins within
        `FINE_MAX_BYTES`, SGTRegressor's own `delta`, the ensemble's other tree and data settings, in a
        feature space of its own."""
        return SGTRegressor(
            grace_period=self.grace_period,
            lambda_=self.lambda_,
            gamma=self.gamma,
            **{**self._data_settings(), "bins": FINE_BINS},
            max_depth=self.max_depth,
            leaf_model="constant",
            max_bytes=FINE_MAX_BYTES,
        )

    def _new_forest(self) -> ForestRegressor:
        """The forest beside the members: `_forest_settings` (sgt.boosted.forest's REGRESSOR_FOREST; its
        depth, or the ensemble's if that is the smaller) and the ensemble's data settings (grids, loss,
        base score, categories), in a feature space of its own (`_forest_rows`)."""
        settings = dict(self._forest_settings)
        depth = smaller_depth(settings.pop("max_depth", None), self.max_depth)
        return ForestRegressor(**settings, **self._data_settings(), max_depth=depth)

    def _data_settings(self) -> dict[str, Any]:
        """The settings of the data a side model takes from the ensemble (but its depth): grids,
        names and categories, loss and base score."""
        return {
            "bins": self.bins,
            "warm_up": self.warm_up,
            "feature_names": self.feature_names,
            "nominal": self.nominal,
            "loss": self.loss,
            "base_score": self.base_score,
            "max_categories": self.max_categories,
            "grace_start": self.grace_start,
        }

    @classmethod
    def _params_from_saved(cls, params: dict[str, Any], loss: Any) -> dict[str, Any]:
        """A model saved without `single_tree`, `forest` or `fine_tree` (before them, or without the side
        model) restores without it."""
        sides = dict.fromkeys(_SIDE_PARAMS, False)
        return {**sides, **super()._params_from_saved(params, loss)}


class ForestRegressor(Averaged, BoostedRegressor):
    """A `BoostedRegressor` whose members are averaged, not boosted: the forest a boosted regressor
    keeps beside its members (sgt.boosted.forest, which has its settings)."""

    #: its own drift policy, the boosted regressor's default (a variant of the boosted class's policy, in a
    #: test or a benchmark, does not reach the forest)
    _drift_policy: ClassVar[DriftPolicy] = REGRESSOR_POLICY
