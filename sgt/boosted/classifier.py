"""`BoostedClassifier`, and the classifier ensemble it shares with the adaptive single tree.

`_ClassifierEnsemble` is the boosted ensemble over SGTClassifier: the softmax cross-entropy, members
whose outputs follow the classes known, and the member count and split confidence that follow them
when not given. `BoostedClassifier` is that ensemble with its public parameters and the classifier's
drift policy; `sgt.adaptive.AdaptiveSGTClassifier` is a one-member one.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import numpy as np

from sgt.base import _check_int, _check_real
from sgt.boosted.engine import _Boosting
from sgt.boosted.ensemble import checked_feature_share, save_sides, side_from_saved
from sgt.boosted.forest import CLASSIFIER_FOREST, CLASSIFIER_FOREST_BOUND_BLOCK, Averaged, smaller_depth
from sgt.boosted.member import Outputs
from sgt.boosted.mondrian import MondrianForest
from sgt.boosted.policy import (
    BINARY_DELTA,
    BINARY_MEMBERS,
    CLASSIFIER_POLICY,
    MULTICLASS_DELTA,
    MULTICLASS_LINEAR_START,
    MULTICLASS_MEMBERS,
    MULTICLASS_TREES,
    RELAX,
    DriftPolicy,
)
from sgt.boosted.tree_choice import CANDIDATES, Candidate, TreeChoice
from sgt.classifier import SGTClassifier, _check_label
from sgt.explain import Explanation, blended_importances, explain_raw, on_features
from sgt.features import FeatureName, Regrid
from sgt.serialization import FORMAT_VERSION, Saved, SerializationError
from sgt.softmax import binary_gradients, binary_gradients_one, softmax_one, softmax_with_reference

__all__ = ["ENSEMBLE_PROBA_MODES", "BoostedClassifier", "ForestClassifier", "MondrianChoice", "SingleChoice"]

#: the ensemble's ways to make probabilities (see BoostedClassifier's ``proba``)
ENSEMBLE_PROBA_MODES = ("calibrated", "tree")


class _ClassifierEnsemble(_Boosting, SGTClassifier):
    """A boosted ensemble of SGTs for classification, with the drift policy it is given."""

    _is_classifier = True
    #: multi-output trees (three classes or more) have no adaptive leaves
    _leaf_models: ClassVar[tuple[str, ...]] = ("constant", "linear")
    #: the members' split confidence while fewer than three classes are known and `delta` is None
    _binary_delta: ClassVar[float] = BINARY_DELTA
    #: the members' blind split (BaseSGT._blind; not the single tree's)
    _blind: ClassVar[tuple[float, float] | None] = None
    #: the young naive Bayes' pseudo-record weight: 1, as before the single tree's lighter one (which
    #: was measured on the single tree only; sgt.bayes_moments.PSEUDO_WEIGHT)
    _bayes_pseudo: ClassVar[float] = 1.0

    def __init__(
        self,
        *,
        n_members: int | None,
        learning_rate: float,
        poisson_rate: float | None,
        drift_threshold: float | None,
        drift_delta: float,
        seed: int,
        delta: float | None,
        grace_period: int,
        lambda_: float,
        gamma: float,
        bins: int,
        warm_up: int,
        max_depth: int | None,
        feature_names: Sequence[str] | None,
        nominal: Sequence[str],
        max_categories: int | None,
        grace_start: int,
        leaf_model: str,
        linear_lambda: float,
        linear_start: int | None,
        multiclass_trees: str,
        max_bytes: int | None,
        policy: DriftPolicy,
        proba: str = "tree",
        linear_gate: float | None = None,
    ) -> None:
        if proba not in ENSEMBLE_PROBA_MODES:
            allowed = ", ".join(map(repr, ENSEMBLE_PROBA_MODES))
            raise ValueError(f"proba must be one of {allowed}, got {proba!r}")
        if multiclass_trees not in MULTICLASS_TREES:
            allowed = ", ".join(map(repr, MULTICLASS_TREES))
            raise ValueError(f"multiclass_trees must be one of {allowed}, got {multiclass_trees!r}")
        self.multiclass_trees = multiclass_trees
        outputs = Outputs(
            multi_output=multiclass_trees != "per-class",
            every_class_from_three=multiclass_trees == "multi-output",
        )
        self._outputs = outputs  # (the hooks read it while SGTClassifier's init runs)
        if linear_start is not None:
            _check_int(
                "linear_start",
                linear_start,
                low=0,
                allowed="None (by the number of classes) or an integer >= 0",
            )
        self.linear_start = None if linear_start is None else int(linear_start)
        if delta is not None:
            _check_real(
                "delta",
                delta,
                low=0.0,
                high=1.0,
                low_open=True,
                high_open=True,
                allowed="None (by the number of classes) or a number in (0, 1)",
            )
        self._delta_by_classes = delta is None
        SGTClassifier.__init__(
            self,
            self._binary_delta if delta is None else delta,
            grace_period,
            lambda_,
            gamma,
            bins,
            warm_up,
            max_depth,
            feature_names,
            nominal,
            max_categories=max_categories,
            grace_start=grace_start,
            leaf_model=leaf_model,
            linear_lambda=linear_lambda,
            max_bytes=max_bytes,
            proba=proba,  # the members keep no class counts to smooth with: "tree" or "calibrated"
            linear_gate=linear_gate,  # the members' trees' (`_member_gate`): the adaptive classifier's
            leaf_bayes=False,
        )
        self._init_boosting(
            n_members, learning_rate, poisson_rate, drift_threshold, drift_delta, seed, policy, outputs
        )
        #: the probabilities of each `_run_encoded` of a run, while `_run_proba` collects them
        self._proba_parts: list[np.ndarray] | None = None

    def _member_gate(self) -> float | None:
        return self.linear_gate

    def get_params(self) -> dict[str, Any]:
        params = SGTClassifier.get_params(self)
        del params["linear_gate"]  # not a parameter of the ensemble
        del params["leaf_bayes"]  # nor is the leaves' naive Bayes
        if self._delta_by_classes:
            params["delta"] = None
        return {
            **self._boosting_params(),
            **params,
            "linear_start": self.linear_start,
            "multiclass_trees": self.multiclass_trees,
            **self._subspace_param(),
        }

    def _saved_params(self) -> dict[str, Any]:
        # "per-class" is what a save without the parameter restores to: left out, such a model saves the
        # bytes of the format before the parameter
        params = super()._saved_params()
        if self.multiclass_trees == "per-class":
            params.pop("multiclass_trees", None)  # (absent from the adaptive classifier's)
        return self._without_subspace(params)

    def _state_extra(self) -> dict[str, Any]:
        extra: dict[str, Any] = {"classes": list(self._classes), **self._boosting_state()}
        if self._bayes is not None:
            extra["bayes"] = self._bayes.state()
        if self._calibrator is not None:
            extra["calibration"] = self._calibrator.state()
        return extra

    def _restore_extra(self, extra: dict[str, Any]) -> None:
        self._restore_boosting(extra)
        classes = extra["classes"]
        outputs = self._outputs_for_classes(len(classes))
        if any(m.n_outputs != outputs for m in self._all_members()):
            raise ValueError(f"{len(classes)} classes need {outputs} outputs per member")
        self._classes = [_check_label(c) for c in classes]
        self._class_index = {label: k for k, label in enumerate(self._classes)}
        self._follow_classes()  # the trees were restored with the model's delta before its classes
        if any(len(e) != self._member_count() for e in (self._members, self._background) if e is not None):
            raise ValueError(f"{len(self._members)} members do not match {len(classes)} classes")

    # -- probabilities (proba="calibrated") -------------------------------------------------------
    def _run_encoded(
        self,
        codes: np.ndarray,
        targets: np.ndarray,
        learn: np.ndarray,
        events: np.ndarray,
        regrids: dict[int, list[Regrid]],
    ) -> tuple[np.ndarray, np.ndarray]:
        """The engine's run, then with ``proba="calibrated"`` the calibration of the ensemble's raw scores
        and the young naive Bayes, row by row in order as SGTClassifier's (sgt.calibration, sgt.bayes).

        Every learned row is learned with the scores it was predicted with (the ensemble's prediction
        does not change while it learns a record), so the one-record path (a run of one row) and a
        batch give the same bits."""
        if self._calibrator is None:
            return super()._run_encoded(codes, targets, learn, events, regrids)
        rows = np.where(learn, np.asarray(targets, dtype=np.intp), -1)
        bayes, seen_before = self._bayes, self._n_seen
        estimate = None
        if bayes is not None:
            self._sync_layout()  # (the engine's run does it too) the numeric features of these codes
            estimate = bayes.estimate(codes, rows, len(self._classes), regrids, self._numeric(codes))
        raw, outputs_at = super()._run_encoded(codes, targets, learn, events, regrids)
        if bayes is None and self._proba_parts is None and codes.shape[0] == 1:
            self._calibrate_one(raw, outputs_at, rows, events)  # learn_one: no probabilities wanted
            return raw, outputs_at
        chosen = None if bayes is None else np.ones(codes.shape[0])
        proba = self._calibrator.run(
            raw,
            outputs_at,
            rows,
            self._event_scores(raw, outputs_at, rows, events),
            len(self._classes),
            chosen,
        )
        if bayes is not None and estimate is not None and chosen is not None:
            mixed = bayes.mix_until(estimate, proba, chosen, rows, self._retirement, seen_before)
            proba = mixed.proba
            if mixed.retired_at is not None:
                self._bayes = None
        if self._proba_parts is not None:
            self._proba_parts.append(proba)
        return raw, outputs_at

    def _calibrate_one(
        self, raw: np.ndarray, outputs_at: np.ndarray, rows: np.ndarray, events: np.ndarray
    ) -> None:
        """The calibration learns a run's one row on Python floats (`Calibrator.learn_one`, the same bits
        as `run`, without numpy's cost per call: about 9% of a record's time one at a time on
        hyperplane-10)."""
        assert self._calibrator is not None
        target = int(rows[0])
        if target < 0:
            return
        if events.size:
            scores = self._event_scores(raw, outputs_at, rows, events)[0]
        else:
            scores = raw[0, : max(0, int(outputs_at[0]) - 1)].tolist()
        self._calibrator.learn_one(scores, target)

    @staticmethod
    def _event_scores(
        raw: np.ndarray, outputs_at: np.ndarray, rows: np.ndarray, events: np.ndarray
    ) -> dict[int, list[float]]:
        """The scores the calibration learns each row that brings a new class with: as predicted, and 0
        for the new class (whose members' outputs start at 0), as the single tree's new tree starts."""
        scores: dict[int, list[float]] = {}
        for row in events.tolist():
            known = max(0, int(outputs_at[row]) - 1)
            scores[row] = raw[row, :known].tolist() + [0.0] * (int(rows[row]) - known)
        return scores

    def _run_proba(self, X: Any, y: Sequence[Any] | None) -> np.ndarray:
        if self._calibrator is None:
            return super()._run_proba(X, y)
        parts: list[np.ndarray] = []
        self._proba_parts = parts
        try:
            self._run(X, y)
        finally:
            self._proba_parts = None
        k = len(self._classes)
        out = np.zeros((sum(p.shape[0] for p in parts), k))
        start = 0
        for part in parts:  # (a memory budget may run a batch in parts; a class may come in a later one)
            out[start : start + part.shape[0], : part.shape[1]] = part
            start += part.shape[0]
        return out

    def predict_proba_one(self, x: Any) -> dict[Any, float]:
        if len(self._classes) < 2 or self._bayes is None:
            return super().predict_proba_one(x)  # the ensemble's softmax, calibrated if asked
        assert self._calibrator is not None
        codes = self._space.encode_one(x, learn=False)  # (once, for the members and the naive Bayes)
        tree = self._calibrator.proba_one(self._predict_raw_codes(codes))
        row = [int(c) for c in codes]
        return dict(zip(self._classes, self._bayes.predict_one(row, tree, self._numeric_list(len(row)))))

    def _n_outputs_per_member(self) -> int:
        return self._outputs_for_classes(len(self._classes))

    def _outputs_for_classes(self, n_classes: int) -> int:
        if self._outputs.every_class_from_three and n_classes >= 3:
            return n_classes
        return max(0, n_classes - 1)

    def _n_scores(self) -> int:
        return max(0, len(self._classes) - 1)

    def _member_delta(self, n_outputs: int) -> float:
        if not self._delta_by_classes:
            return self.delta
        return MULTICLASS_DELTA if n_outputs >= 2 else self._binary_delta

    def _linear_start(self, n_outputs: int) -> int:
        if self.linear_start is not None:
            return self.linear_start
        return MULTICLASS_LINEAR_START if n_outputs >= 2 else 0

    def _member_count(self) -> int:
        if self.n_members is not None:
            return self.n_members
        return MULTICLASS_MEMBERS if len(self._classes) >= 3 else BINARY_MEMBERS

    def _growth_cuts(self, events: np.ndarray) -> np.ndarray:
        """After the row that brings the third class when members are added there, or when members
        then start scoring every class (their raw scores move to other columns)."""
        third = 2 - len(self._classes)  # the event that brings the third class, if in this batch
        if (
            self.n_members is not None and not self._outputs.every_class_from_three
        ) or not 0 <= third < events.size:
            return events[:0]
        return events[third : third + 1] + 1

    def _grow_members(self) -> None:
        """With `n_members` None: add the members the classes known now ask for after the others (they
        learn from the next record on; the members before them are unchanged)."""
        for ensemble in (self._members, self._background):
            if ensemble is not None:
                ensemble.extend(self._new_member(m) for m in range(len(ensemble), self._member_count()))
        self._share_budget()

    def _follow_classes(self) -> None:
        """With `delta` None: the delta of the classes known now, for new members and every tree."""
        self.delta = self._member_delta(self._n_outputs_per_member())
        for member in self._all_members():
            member.set_tree_params(delta=self._member_delta(member.n_outputs) * member.delta_scale)

    def _n_raw(self, n_events: int) -> int:
        return max(1, len(self._classes) + n_events - 1)

    def _loss_gradients(
        self, point: np.ndarray, targets: np.ndarray, every_class: bool = False
    ) -> tuple[np.ndarray, np.ndarray]:
        if every_class:  # the softmax over every class: the same as over the scores less the first's
            p = softmax_with_reference(point[1:] - point[:1])
            y = targets[None, :] == np.arange(point.shape[0])[:, None]
        elif point.shape[0] == 1:  # two classes: the same bits in fewer numpy calls
            g, h = binary_gradients(point[0], targets == 1)
            return g[None], h[None]
        else:
            p = softmax_with_reference(point)[1:]
            y = targets[None, :] == np.arange(1, point.shape[0] + 1)[:, None]
        return p - y, p * (1.0 - p)

    def _loss_gradient_one(
        self, point: list[float], target: float, every_class: bool
    ) -> tuple[list[float], list[float]] | None:
        """`_loss_gradients` of one record: with two classes (one output) `binary_gradients_one` of its
        score; with more, the softmax by `softmax_one` (`softmax_with_reference`'s bits), where no score
        is NaN (whose maximum the two take differently; None there: the arrays' form)."""
        if len(point) == 1:
            gradient, hessian = binary_gradients_one(point[0], target == 1)
            return [gradient], [hessian]
        if any(v != v for v in point):
            return None
        if every_class:  # (the softmax over the scores less the first's, as `_loss_gradients`)
            probas, first = softmax_one([v - point[0] for v in point[1:]]), 0
        else:
            probas, first = softmax_one(point)[1:], 1
        g = [pk - (1.0 if k + first == target else 0.0) for k, pk in enumerate(probas)]
        return g, [pk * (1.0 - pk) for pk in probas]

    def _errors(self, point: np.ndarray, targets: np.ndarray, outputs_at: np.ndarray) -> np.ndarray:
        scores = np.concatenate([np.zeros((point.shape[0], 1)), point], axis=1)
        known = np.arange(scores.shape[1])[None, :] < np.maximum(outputs_at, 1)[:, None]
        predicted = np.where(known, scores, -np.inf).argmax(axis=1)
        return (predicted != targets).astype(np.float64)

    def _base_columns(
        self, n: int, width: int, learn: np.ndarray, targets: np.ndarray, events: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        zeros = np.zeros((n, width))
        return zeros, zeros.copy()

    def _register_events(self, targets: np.ndarray, events: np.ndarray) -> None:
        for row in events.tolist():
            self._register_target(int(targets[row]))
        if events.size:
            self._follow_classes()  # the members followed at the events' rows already
            self._grow_members()  # a batch is cut after the row that brings the third class


class SingleChoice:
    """Which probabilities a `BoostedClassifier` with side models (`single_tree`, `forest`) serves: the
    ensemble's, the single tree's, the forest's or a blend, by their errors counted over every learned
    record, with the side models retiring.

    The candidates are `tree_choice.CANDIDATES` in order: the ensemble, the tree, their mean and the
    other eighths of the two (the regressor's `TreeChoice` weights), then the forest, its mean with the
    ensemble and its mean with the tree; a choice without a forest has the first nine (a save before
    the blends, the first two). A candidate that needs a model the classifier lacks (never made, or
    retired) is neither counted nor served. Another candidate serves only once it has made more than
    `MARGIN` fewer errors than the serving one (a hysteresis: where the candidates are as good, on a
    noisy stream, flipping between them costs more than either); the ensemble serves first, and the
    first candidate of the fewest errors is the one that takes over. A side model retires for good
    once the ensemble has made `RETIRE` fewer errors than it (the model drops it: on a long stream
    where the ensemble leads its cost is paid at the start only), as the young naive Bayes retires
    (sgt.retirement); each does from `YOUTH` records learned on whenever the serving candidate does
    not need it (where the two are as good, a noisy LED display, it would cost as much for nothing:
    before the forest, whenever the ensemble served); the forest also retires at
    the first record of a third class (it serves two-class streams: with more classes it lost and cost
    most). A record's error is its class not being the first most probable one (`predict_one`'s label).

    Why errors, summed: the single classifier (blind splits, a lighter naive Bayes prior) beats the
    ensemble on short streams and where the members' shrunken steps add nothing (Phishing, the
    checkerboard, skewed classes); by log loss its better-calibrated probabilities served on Agrawal's
    gradual drift at a lower accuracy, and a faded count followed the noise of SEA's concept drifts.
    Why blends: where two err apart (the checkerboard, Agrawal's abrupt drifts, the hyperplane) a
    blend errs less than either. Why a forest: where no single split gains (the checkerboard, Bananas,
    moons) its deep averaged trees learn what neither the members nor the tree do (docs/decisions.md,
    "The boosted ensemble").

    Every step is on Python values in row order, on integer counts (a batch sums them), or on the
    same floating-point operations elementwise, so a batch and the one-record loop agree bit for bit.
    """

    #: errors by which the other candidate must lead (more than these) before it serves
    MARGIN = 3
    #: errors by which the ensemble must lead before a side model retires
    RETIRE = 20
    #: records learned from which on the side models retire whenever the ensemble serves (None: never)
    YOUTH: int | None = 1000
    #: each blend of the ensemble and the tree: its weight on the tree's probabilities
    WEIGHTS = TreeChoice.WEIGHTS
    #: `serve` looks for the next event in windows of this many learned rows, then twice as many, ...
    SCAN = 64
    #: the numbers of candidates a save may hold: the two before the blends, the nine before the
    #: forest, or all
    SAVED_SIZES = (2, len(WEIGHTS), len(CANDIDATES))
    #: each side model's candidate that is the model alone (its errors are the ensemble's to beat)
    ALONE: ClassVar[dict[str, int]] = {"tree": 1, "forest": len(WEIGHTS)}
    #: the model that serves first and that the side models must beat (candidate 0)
    BASE: ClassVar[str] = "ensemble"
    #: the side models that retire at the first record of a third class
    THIRD_CLASS: ClassVar[tuple[str, ...]] = ("forest",)

    def __init__(
        self,
        errors: Sequence[int] | None = None,
        serving: int = 0,
        learned: int = 0,
        *,
        tree: bool = True,
        forest: bool = False,
    ) -> None:
        size = len(CANDIDATES) if forest else len(self.WEIGHTS)
        self.errors = [0] * size if errors is None else [int(v) for v in errors]
        if len(self.errors) not in self.SAVED_SIZES or not 0 <= serving < len(self.errors):
            raise ValueError(
                f"a SingleChoice has {self.SAVED_SIZES} counts, serving one, got {self.errors}, {serving}"
            )
        if forest and len(self.errors) != len(CANDIDATES):
            raise ValueError(f"a SingleChoice with a forest has {len(CANDIDATES)} counts, got {self.errors}")
        self.candidates = CANDIDATES[: len(self.errors)]
        self.alive = {"ensemble": True, "tree": tree, "forest": forest}  # the models it may serve
        self.serving = serving
        self.learned = learned  # the records learned (the side models' youth)
        self._open = self._open_candidates()

    @property
    def retired(self) -> bool:
        """Whether every side model retired (the ensemble alone serves from now on)."""
        return not any(self.alive[name] for name in self.ALONE)

    def _open_candidates(self) -> list[int]:
        """The candidates whose models are all alive, in order."""
        return [k for k, c in enumerate(self.candidates) if all(self.alive[m] for m in c.models)]

    def served(self, predictions: Mapping[str, Any]) -> Any:
        """The serving candidate's probabilities from the models' (floats or arrays alike: the same
        operations, so the same bits); `predictions` needs the models it blends only."""
        return self.candidates[self.serving].of(predictions)

    def needs(self) -> frozenset[str]:
        """The models whose probabilities the serving candidate needs."""
        return self.candidates[self.serving].models

    def learn(self, predictions: Mapping[str, Sequence[float]], target: int) -> None:
        """After a learned record of class `target` the models alive predicted with probabilities
        `predictions` (in the model's class order): the candidates' errors grow, the serving candidate
        may change and side models may retire."""
        arrays = {name: np.asarray(p, dtype=np.float64) for name, p in predictions.items()}
        for k in self._open:
            proba = self.candidates[k].of(arrays).tolist()
            self.errors[k] += int(max(range(len(proba)), key=proba.__getitem__) != target)
        self._counted(target)

    def _counted(self, target: int) -> None:
        """A learned record of class `target` counted in `errors`: the serving candidate may change,
        side models retire."""
        self.learned += 1
        best = min(self._open, key=self.errors.__getitem__)  # (the first on ties)
        if self.errors[best] < self.errors[self.serving] - self.MARGIN:
            self.serving = best
        old = self.YOUTH is not None and self.learned >= self.YOUTH
        serving = self.needs()
        retiring = [
            name
            for name, alone in self.ALONE.items()
            if self.alive[name]
            and (
                (old and name not in serving)
                or self.errors[0] <= self.errors[alone] - self.RETIRE
                or (name in self.THIRD_CLASS and target >= 2)
            )
        ]
        if retiring:
            for name in retiring:
                self.alive[name] = False
            self._open = self._open_candidates()
            if self.serving not in self._open:
                self.serving = 0

    def serve(self, predictions: Mapping[str, np.ndarray], targets: np.ndarray) -> np.ndarray:
        """Each row's served probabilities as the counts stood before it; a learned row (its class's
        column in `targets`, -1: only predicted) then updates them. Rows after every side model
        retired are the ensemble's. `predictions` holds each model alive's probabilities [rows,
        classes] with the same columns (a side model that retires inside the batch may leave the rows
        after its retirement at zero: they are never read).

        The same as `served` then `learn` row by row, without a Python step per row: between two
        events (a learned row where the serving candidate changes or a side model retires, by
        `_counted`'s rules on the errors counted through it) the candidates' errors are cumulative sums
        and the rows are served by one blend; the event's row itself goes through `_counted`."""
        out = predictions[self.BASE].copy()
        if self.retired:
            return out
        learned = np.flatnonzero(targets >= 0)
        counts = self._cumulative_errors(predictions, targets, learned)
        classes = targets[learned]
        start, done = 0, 0  # the first row not served yet, the learned rows counted so far
        while True:
            event = self._next_event(counts, done, classes)
            stop = len(out) if event is None else int(learned[event]) + 1
            if self.serving != 0 and stop > start:
                out[start:stop] = self.served({name: p[start:stop] for name, p in predictions.items()})
            through = len(learned) if event is None else event + 1
            for k in self._open:
                self.errors[k] += int(counts[through, k] - counts[done, k])
            if event is None:
                self.learned += through - done
                return out
            self.learned += event - done  # (`_counted` counts the event's row)
            self._counted(int(classes[event]))
            start, done = stop, through
            if self.retired:
                return out

    def _cumulative_errors(
        self, predictions: Mapping[str, np.ndarray], targets: np.ndarray, learned: np.ndarray
    ) -> np.ndarray:
        """Each open candidate's errors over the first j learned rows, in row j ([learned rows + 1,
        candidates]; zero in the other candidates' columns). numpy's argmax takes the first most
        probable class, as `learn`."""
        counts = np.zeros((len(learned) + 1, len(self.errors)), dtype=np.int64)
        if not predictions[self.BASE].shape[1] or not len(learned):  # (no class known: no error)
            return counts
        if len(learned) < len(targets):
            predictions = {name: p[learned] for name, p in predictions.items()}
        classes = targets[learned]
        wrong = np.zeros((len(learned), len(self.errors)), dtype=np.int64)
        for k in self._open:
            wrong[:, k] = self.candidates[k].of(predictions).argmax(axis=1) != classes
        np.cumsum(wrong, axis=0, out=counts[1:])
        return counts

    def _next_event(self, counts: np.ndarray, done: int, classes: np.ndarray) -> int | None:
        """The first learned row from `done` on (its index among the learned rows) after which
        `_counted` would change the serving candidate or retire a side model, the choice standing as
        it does (None: none): each rule of `_counted` on the rows' errors at once, over windows that
        double from `SCAN` rows (events close together cost a window each, not the batch's rest)."""
        rows = len(classes)
        youth = self._youth_event(done)
        limit = rows if youth is None else min(rows, youth)  # (its row is one either way)
        start, width = done, self.SCAN
        while start < limit:
            stop = min(start + width, limit)
            hit = self._breaks(counts[start + 1 : stop + 1] - counts[done], classes[start:stop])
            if hit.any():
                return start + int(hit.argmax())
            start, width = stop, 2 * width
        return youth if youth is not None and youth < rows else None

    def _breaks(self, counted: np.ndarray, classes: np.ndarray) -> np.ndarray:
        """Whether `_counted` changes the serving candidate or retires a side model after each of some
        learned rows (of classes `classes`, with `counted` errors more than the counts now)."""
        errors = np.asarray(self.errors, dtype=np.int64) + counted
        hit = errors[:, self._open].min(axis=1) < errors[:, self.serving] - self.MARGIN
        for name, alone in self.ALONE.items():
            if self.alive[name]:
                hit |= errors[:, 0] <= errors[:, alone] - self.RETIRE
        if any(self.alive[name] for name in self.THIRD_CLASS):
            hit |= classes >= 2
        return hit

    def _youth_event(self, done: int) -> int | None:
        """The learned row (its index among the learned rows, `done` the next) after which a side model
        alive retires by its age alone while the serving candidate stands (None: none does)."""
        serving = self.needs()
        if self.YOUTH is None or all(not self.alive[n] or n in serving for n in self.ALONE):
            return None
        return done + max(self.YOUTH - self.learned - 1, 0)

    def state(self) -> list[int]:
        """The saved form: the counts of errors, the serving candidate, the records learned (which
        models are alive, the save says by the ones it holds)."""
        return [*self.errors, self.serving, self.learned]

    @classmethod
    def restored(cls, state: Any, tree: bool, forest: bool) -> SingleChoice:
        """The choice `state` saved, with the side models the save holds (SerializationError if it is
        not one)."""
        if (
            not isinstance(state, list)
            or len(state) - 2 not in cls.SAVED_SIZES
            or not all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in state)
            or state[-2] >= len(state) - 2
            or (forest and len(state) - 2 != len(CANDIDATES))
            or not (tree or forest)
        ):
            raise SerializationError(f"a BoostedClassifier's single-tree choice {state!r} is not valid")
        choice = cls(state[:-2], state[-2], state[-1], tree=tree, forest=forest)
        if choice.serving not in choice._open:
            raise SerializationError(f"a BoostedClassifier's choice {state!r} serves a model it lacks")
        return choice


class MondrianChoice(SingleChoice):
    """Which probabilities a `BoostedClassifier` with a Mondrian forest (`mondrian`) serves: what it
    would serve without the forest (its members', or what its `SingleChoice` serves: "served"), the
    forest's (sgt.boosted.mondrian) or a blend of the two in eighths (`SingleChoice.WEIGHTS` on the
    forest's), by `SingleChoice`'s rule on the errors counted over every learned record: another
    candidate serves once it has made more than `MARGIN` fewer errors than the serving one; the
    forest retires for good once "served" has made `RETIRE` fewer errors than the forest alone, or
    from `YOUTH` records learned on whenever "served" serves alone. It does not retire at a third
    class (it learns any number of classes).

    Why an outer choice, not more candidates of the inner one: the inner choice's side models and its
    rules were measured as they are; this one offers the forest against whatever they serve, and
    leaves them alone where it retires. Replayed and then measured with this rule, the choice gains
    where the forest leads (ImageSegments, a checkerboard, two moons, rbf-5) and loses at most about a
    point where it does not (a short stream of 30% label noise).
    """

    ALONE: ClassVar[dict[str, int]] = {"mondrian": 1}
    BASE: ClassVar[str] = "served"
    THIRD_CLASS: ClassVar[tuple[str, ...]] = ()
    #: "served" (weight 0), the forest (1), their mean, then the other eighths
    OFFERED: ClassVar[tuple[Candidate, ...]] = TreeChoice.blends("served", "mondrian")

    def __init__(self, errors: Sequence[int] | None = None, serving: int = 0, learned: int = 0) -> None:
        size = len(self.OFFERED)
        self.errors = [0] * size if errors is None else [int(v) for v in errors]
        if len(self.errors) != size or not 0 <= serving < size or learned < 0:
            raise ValueError(f"a MondrianChoice has {size} counts, serving one, got {self.errors}, {serving}")
        self.candidates = self.OFFERED
        self.alive = {"served": True, "mondrian": True}
        self.serving = serving
        self.learned = learned
        self._open = self._open_candidates()

    @classmethod
    def from_state(cls, state: Any) -> MondrianChoice:
        """The choice `state` saved (SerializationError if it is not one)."""
        if (
            not isinstance(state, list)
            or len(state) != len(cls.OFFERED) + 2
            or not all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in state)
            or state[-2] >= len(cls.OFFERED)
        ):
            raise SerializationError(f"a BoostedClassifier's Mondrian choice {state!r} is not valid")
        return cls(state[:-2], state[-2], state[-1])


class BoostedClassifier(_ClassifierEnsemble):
    """Online gradient boosting of SGTs for classification, with online bagging and drift detection.

    Member m (one tree while at most two classes are known; from the third class on, one multi-output
    tree or a tree per class, see `multiclass_trees`) learns from the softmax cross-entropy's
    gradients at the shrunken sum of the members before it plus its own output; see sgt.boosted for
    the algorithm. Same methods and guarantees as SGTClassifier (batching never changes the model,
    `predict_learn_many` is strictly prequential, `to_bytes` restores exactly), plus `n_trees` and
    `n_drifts`. Why the defaults are what they are: docs/decisions.md, "The boosted ensemble"; the
    figures: BENCHMARKS.md, section 5.

    Parameters
    ----------
    n_members
        Boosting stages. None (default): `BINARY_MEMBERS` (6) while fewer than three classes are
        known, `MULTICLASS_MEMBERS` (10) from the third class on (the members added at the record that
        brings it learn from the next record on, after the others): six are as accurate as ten with
        two classes and faster; with more classes six lose accuracy.
    learning_rate
        Shrinkage eta of each member's contribution, in (0, 1]. Default 0.3.
    poisson_rate
        Rate of each record's Poisson weight per member (online bagging); None: every weight is 1.
        Default 1.
    drift_threshold
        Page-Hinkley alarm level on the ensemble's 0/1 errors (a warning at half of it); None: no
        drift detection. Default 35.
    drift_delta
        Tolerated rise of the error rate before it counts towards the alarm. Default 0.005 (larger
        values leave a small rise of the error unanswered).
    seed
        Seed of the bagging weights.
    delta
        As for SGTClassifier; None (default): `BINARY_DELTA` (1e-3) while fewer than three classes are
        known, `MULTICLASS_DELTA` (0.03) from the third class on (every tree switches at the record
        that brings it; a number applies to every tree whatever the classes). Eager splits pay with
        many classes, where a class's score sees its own gradients only; with two classes they slow
        the recovery from drift. A leaf that finds no split while the ensemble's predictions on its
        records are uncertain (`RELAX`: a Gini impurity of 0.47 or more) relaxes its level, ten times
        per grace period of records up to 0.5: where no single split lowers the loss (a checkerboard,
        an XOR) the members split in the end, and where the ensemble predicts well they do not fit
        noise.
    lambda_
        As for SGTClassifier (L2 regularisation of leaf values), but default 0.5: the members then do
        not fit label noise.
    gamma
        As for SGTClassifier, but default 0.02.
    leaf_model, linear_lambda
        As for SGTClassifier, default "linear" and 0.01 ("adaptive" is not offered: multi-output trees
        have no adaptive leaves).
    linear_start
        Records the classifier learns before its members' linear leaves step their linear terms (a
        leaf keeps its parent's term meanwhile; values and splits learn from the first record). None
        (default): `MULTICLASS_LINEAR_START` (100) from the third class on, 0 with fewer classes (every
        tree switches at a fixed record, so batching and restoring give the same model). A numeric
        feature's grid grows from its first values (sgt.features), so a linear term fitted on the first
        records of a narrow grid extrapolates steeply once the grid widens; with two classes the delay
        costs more than it saves.
    multiclass_trees
        A member's trees from the third class on. "multi-output" (default): one tree whose leaves hold
        a value and a linear term per class, under the softmax over every class; its splits take the
        loss change summed over the classes (sgt.multioutput), so each record is routed once and each
        leaf attempts once for all classes. "multi-output-reference": the same tree with a value per
        class but the first (whose score is 0). "per-class": one tree per class but the first, each
        with its own splits (SGTClassifier's committee; saves written before the parameter restore
        so). While fewer than three classes are known every member has one tree, whatever the choice
        (the same model bit for bit).
    feature_share
        None (default): every split attempt of a member searches every feature. A number in (0, 1]:
        each attempt searches a random subset, each feature drawn with that probability, anew at every
        attempt of every leaf (random subspaces, as in random forests: the members grow different
        trees). The draw depends only on the seed, the member's position, the leaf and the records it
        holds, so batching and restoring keep the model exact. Off by default: it wins on many features
        (LED) and loses on few (the checkerboard), on SEA and on Agrawal's gradual drift (BENCHMARKS.md,
        section 5).
    proba
        How probabilities are made from the ensemble's raw scores (the members learn the same either
        way). "calibrated" (default): as SGTClassifier's, the softmax with a temperature and a bias per
        class fitted online on its log loss (sgt.calibration), mixed with a naive Bayes while the
        ensemble is young, until the ensemble leads it (sgt.retirement): on a noisy LED display (naive
        Bayes is near-optimal there) 73.3% against 65.2%, log loss and Brier score lower on each of the
        robustness suite's classification streams; the checkerboard, where a naive Bayes is of no use,
        loses 0.6 points (docs/decisions.md). "tree": the raw softmax (what a model saved before the
        parameter restores to).
    single_tree
        True (default): a single SGTClassifier (its own defaults, with the ensemble's `bins`, `warm_up`,
        `max_depth`, `feature_names`, `nominal` and `max_categories`) learns every record beside the
        members, and the probabilities served are the ensemble's, the single tree's or a blend of the
        two in eighths, whichever has made fewer errors over the records learned, by a margin
        (`SingleChoice`; a model saved before the blends keeps the first two). The single tree
        retires for good once the ensemble leads by `SingleChoice.RETIRE` errors, or from
        `SingleChoice.YOUTH` records on whenever the ensemble serves. It wins short streams and data
        where boosting adds nothing (Phishing 89.9% -> 91.2%, above SRP's 91.1%; the checkerboard
        84.9% -> 86.2%, 87.6% with the blends; ten skewed classes 94.5% -> 95.5%), at up to 1.5 times
        the members' CPU where it serves, about 1.05 times where it retires young (docs/decisions.md).
        Not with `max_bytes`.
        A model saved before the parameter restores without it. `n_trees` is the members';
        `explain_one` and `feature_importances` are of the candidate that serves.
    forest
        True (default): a forest (sgt.boosted.forest: sixteen constant-leaf members bagged and
        averaged, not boosted, each splitting on as few as ten records, at most 8 deep and within
        32 MB) learns every record beside the members and the single tree, and `SingleChoice` also
        offers it alone and its means with the ensemble and with the tree. It retires as the single
        tree does, and at the first record of a third class. Where no single split gains (a
        checkerboard, two interleaved moons, Bananas) the boosted members and the single tree learn
        little and the forest most
        (docs/decisions.md, "The boosted ensemble", has the figures). Not with `max_bytes`; a model
        saved before the parameter restores without it; False saves the bytes of the format before it.
    mondrian
        True (default): a bounded Mondrian forest (sgt.boosted.mondrian: 16 trees of at most 2,047
        nodes, on its own grids of 1,024 bins, with the ensemble's `seed`, `warm_up`, `feature_names`,
        `nominal` and `max_categories`) learns every record beside the others, and `MondrianChoice`
        serves what the model serves without it, the Mondrian forest alone or a blend of the two in
        eighths, whichever has made fewer errors by a margin, the forest retiring as the side models
        do. Where randomly placed splits averaged over trees learn what greedy splits do not (a
        checkerboard of 1,000 records, image segments) it leads. Its memory is fixed from its first
        record (2.9 MB on rbf-5's ten features and five classes, 14.3 MB on a hundred features) and
        freed when it retires. On the robustness suite's 20 classification streams it is at or above
        the best peer ensemble on 16 to 19 over five seeds of the forest (14 without it), about a
        point more on average: ImageSegments 90.0% -> 95.0%, the checkerboard of 1,000 records
        78.9% -> 87.6%, rbf-5 (20,000 records) 87.1% -> 91.8%; 30% label noise over 1,000 records
        62.3% -> 61.8%; the other benchmark and drift streams within 0.1 points; about 1.2 times the
        CPU where it lives on (rbf-5), little where it retires young (docs/decisions.md).
        False: no Mondrian forest, the default before (what a save without the parameter restores
        to; such a model saves the bytes of the format before it). Not with `max_bytes` (nor in the
        worker's models). The forest has no additive explanation: while a candidate with it serves,
        `explain_one` gives the other candidate's contributions times its weight, and the base the
        rest of the served log ratio; `feature_importances` counts none for the forest.

    The other parameters are SGTClassifier's and apply to every tree.

    Examples
    --------
    >>> import numpy as np
    >>> from sgt import BoostedClassifier
    >>> rng = np.random.default_rng(1)
    >>> X = rng.uniform(0, 1, size=(4000, 2))
    >>> y = (X[:, 0] + X[:, 1] > 1).astype(int)
    >>> model = BoostedClassifier(warm_up=200)
    >>> proba = model.predict_learn_many(X, y)
    >>> accuracy = (np.array(model.classes_)[proba.argmax(axis=1)] == y)[2000:].mean()
    >>> bool(accuracy > 0.9), model.n_trees
    (True, 6)
    >>> model.predict_one({"x0": 0.9, "x1": 0.8})
    1

    References
    ----------
    Gouk, Pfahringer and Frank, "Stochastic Gradient Trees", ACML 2019. Oza and Russell, "Online
    bagging and boosting", AISTATS 2001. Gomes et al., "Adaptive random forests for evolving data
    stream classification", Machine Learning 106, 2017 (the warning and background scheme).
    """

    #: the classifier's answer to warnings and drifts (sgt.boosted.policy), given to the ensemble
    _drift_policy: ClassVar[DriftPolicy] = CLASSIFIER_POLICY
    #: the members' split confidence relaxes in leaves that find no split where the ensemble is unsure
    #: (see `delta`; a model saved before it restores without it)
    _relax: ClassVar[tuple[float, float, float | None] | None] = RELAX
    #: the choice between the ensemble and the single tree (`single_tree`; a class attribute so that a
    #: benchmark variant may change its rule)
    _single_choice: ClassVar[type[SingleChoice]] = SingleChoice

    def __init__(
        self,
        n_members: int | None = None,
        learning_rate: float = 0.3,
        poisson_rate: float | None = 1.0,
        drift_threshold: float | None = 35.0,
        drift_delta: float = 0.005,
        seed: int = 0,
        delta: float | None = None,
        grace_period: int = 100,
        lambda_: float = 0.5,
        gamma: float = 0.02,
        bins: int = 64,
        warm_up: int = 1000,
        max_depth: int | None = None,
        feature_names: Sequence[str] | None = None,
        nominal: Sequence[str] = (),
        max_categories: int | None = None,
        grace_start: int = 10,
        leaf_model: str = "linear",
        linear_lambda: float = 0.01,
        linear_start: int | None = None,
        multiclass_trees: str = "multi-output",
        max_bytes: int | None = None,
        feature_share: float | None = None,
        proba: str = "calibrated",
        single_tree: bool = True,
        forest: bool = True,
        mondrian: bool = True,
    ) -> None:
        self.feature_share = checked_feature_share(feature_share)  # (the members made below read it)
        for name, value in (("single_tree", single_tree), ("forest", forest), ("mondrian", mondrian)):
            if not isinstance(value, bool):
                raise ValueError(f"{name} must be True or False, got {value!r}")
        self.single_tree = single_tree
        self.forest = forest
        self.mondrian = mondrian
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
            max_categories=max_categories,
            grace_start=grace_start,
            leaf_model=leaf_model,
            linear_lambda=linear_lambda,
            linear_start=linear_start,
            multiclass_trees=multiclass_trees,
            max_bytes=max_bytes,
            policy=self._drift_policy,
            proba=proba,
        )
        # the side models beside the members and the choice among them (None: none, as saved before
        # `single_tree`, with a memory budget, or once they retired)
        self._single: SGTClassifier | None = None
        self._forest: ForestClassifier | None = None
        self._choice: SingleChoice | None = None
        if (single_tree or forest) and max_bytes is None:
            self._single = self._new_single() if single_tree else None
            self._forest = self._new_forest() if forest else None
            self._choice = self._single_choice(tree=single_tree, forest=forest)
        # the Mondrian forest and the choice between it and what the model serves without it (None: none,
        # as saved before `mondrian`, with a memory budget, or once it retired)
        self._mondrian: MondrianForest | None = None
        self._outer: MondrianChoice | None = None
        if mondrian and max_bytes is None:
            self._mondrian = self._new_mondrian()
            self._outer = MondrianChoice()

    def _new_single(self) -> SGTClassifier:
        """The single classifier beside the members: SGTClassifier's own defaults, with the ensemble's
        settings of the data (its grid, depth, feature names and categories), but for the leaves'
        naive Bayes, which gave the ensemble nothing (docs/decisions.md)."""
        return SGTClassifier(**self._data_settings(), leaf_bayes=False)

    def _new_forest(self) -> ForestClassifier:
        """The forest beside the members: `CLASSIFIER_FOREST`, with the ensemble's settings of the data
        (its depth if it is the smaller)."""
        depth = smaller_depth(CLASSIFIER_FOREST["max_depth"], self.max_depth)
        return ForestClassifier(**{**CLASSIFIER_FOREST, **self._data_settings(), "max_depth": depth})

    def _new_mondrian(self) -> MondrianForest:
        """The Mondrian forest beside the members: its own grids (`mondrian.BINS`), the ensemble's seed and
        the rest of its settings of the data."""
        settings = {name: v for name, v in self._data_settings().items() if name not in ("bins", "max_depth")}
        return MondrianForest(seed=self.seed, **settings)

    def _data_settings(self) -> dict[str, Any]:
        """The settings of the data a side model takes from the ensemble."""
        return {
            "bins": self.bins,
            "warm_up": self.warm_up,
            "max_depth": self.max_depth,
            "feature_names": self.feature_names,
            "nominal": self.nominal,
            "max_categories": self.max_categories,
        }

    def get_params(self) -> dict[str, Any]:
        return {
            **super().get_params(),
            "single_tree": self.single_tree,
            "forest": self.forest,
            "mondrian": self.mondrian,
        }

    def _saved_params(self) -> dict[str, Any]:
        params = super()._saved_params()
        for name in ("single_tree", "forest", "mondrian"):  # (what a save without the parameter restores to)
            if not params.get(name, False):
                params.pop(name, None)
        return params

    def _saved_parts(self) -> tuple[dict[str, Any], list[tuple[str, np.ndarray]]]:
        """The model's parts, and its side models': each one's header under the header's
        ``extra.single`` or ``extra.forest``, its arrays last, as ``extra.single.<name>`` or
        ``extra.forest.<name>`` (absent once it retired); the choice with the first of them."""
        header, arrays = super()._saved_parts()
        if self._choice is not None:
            sides = [("single", self._single), ("forest", self._forest)]
            save_sides(header, arrays, sides, {"choice": self._choice.state()})
        if self._mondrian is not None and self._outer is not None:
            own, own_arrays = self._mondrian._saved_parts()
            header["extra"]["mondrian"] = {
                "header": own,
                "version": FORMAT_VERSION,
                "choice": self._outer.state(),
            }
            arrays += [(f"extra.mondrian.{name}", a) for name, a in own_arrays]
        return header, arrays

    def _restore_extra(self, extra: dict[str, Any]) -> None:
        super()._restore_extra(extra)
        # (restored with their arrays, `_restore_arrays`)
        self._saved_sides = {name: extra.get(name) for name in ("single", "forest")}
        self._saved_mondrian = extra.get("mondrian")

    def _restore_arrays(self, extra: dict[str, Any], arrays: dict[str, np.ndarray]) -> None:
        super()._restore_arrays(extra, arrays)
        self._restore_mondrian(getattr(self, "_saved_mondrian", None), arrays)
        self._saved_mondrian = None
        saved, self._saved_sides = getattr(self, "_saved_sides", {}), {}
        if self._choice is None:
            return  # (saved before the parameters, or without side models)
        self._single, self._forest, self._choice = None, None, None
        present = {name: side for name, side in saved.items() if side is not None}
        if not present:
            return  # every side model had retired
        for side in present.values():
            if not isinstance(side, dict) or not isinstance(side.get("header"), dict):
                raise SerializationError("a BoostedClassifier's side model is not valid")
        first = present.get("single", present.get("forest"))
        assert first is not None
        choice = self._single_choice.restored(
            first.get("choice"), tree="single" in present, forest="forest" in present
        )
        sides = {name: self._restored_side(name, side, arrays) for name, side in present.items()}
        self._single = sides.get("single")
        self._forest = sides.get("forest")
        self._choice = choice

    def _restore_mondrian(self, saved: Any, arrays: dict[str, np.ndarray]) -> None:
        """The Mondrian forest and its choice from the save's ``extra.mondrian`` (absent: none, or it had
        retired)."""
        self._mondrian, self._outer = None, None
        if saved is None:
            return
        if not self.mondrian or not isinstance(saved, dict) or not isinstance(saved.get("header"), dict):
            raise SerializationError("a BoostedClassifier's Mondrian forest is not valid")
        own = {name[len("mondrian.") :]: a for name, a in arrays.items() if name.startswith("mondrian.")}
        forest = MondrianForest.from_saved(Saved(saved["header"], own, int(saved["version"])))
        if forest.classes_ != self.classes_:
            raise SerializationError(
                "a BoostedClassifier's Mondrian forest knows other classes than its members"
            )
        self._outer = MondrianChoice.from_state(saved.get("choice"))
        self._mondrian = forest

    def _restored_side(self, name: str, saved: dict[str, Any], arrays: dict[str, np.ndarray]) -> Any:
        """The side model `name` ("single" or "forest") from its saved header and arrays."""
        side = side_from_saved(SGTClassifier if name == "single" else ForestClassifier, name, saved, arrays)
        if side.classes_ != self.classes_:
            raise SerializationError(f"a BoostedClassifier's {name} knows other classes than its members")
        return side

    @property
    def nbytes(self) -> int:
        """Bytes of the members' live arrays, and of the side models' beside them."""
        mondrian = 0 if self._mondrian is None else self._mondrian.nbytes
        return super().nbytes + sum(side.nbytes for side in self._sides().values()) + mondrian

    def _sides(self) -> dict[str, SGTClassifier]:
        """The side models alive, by the names the choice's candidates use."""
        sides: dict[str, SGTClassifier] = {}
        if self._single is not None:
            sides["tree"] = self._single
        if self._forest is not None:
            sides["forest"] = self._forest
        return sides

    def _drop_retired(self) -> None:
        """Drop the side models the choice retired (after a batch or a record)."""
        choice = self._choice
        if choice is None:
            return
        if not choice.alive["tree"]:
            self._single = None
        if not choice.alive["forest"]:
            self._forest = None
        if choice.retired:
            self._choice = None

    # -- the side models beside the members (`single_tree`, `forest`) -------------------------------
    def _run_proba(self, X: Any, y: Sequence[Any] | None) -> np.ndarray:
        """What `_run_inner` serves, or with a Mondrian forest what `MondrianChoice` serves of it and
        the forest's (which predicts then learns every row too; dropped after the batch if it retired)."""
        served = self._run_inner(X, y)
        if self._outer is None or self._mondrian is None:
            return served
        k = len(self._classes)
        forest = self._mondrian.predict_learn_many(X, y)
        predictions = {
            "served": np.pad(served, ((0, 0), (0, k - served.shape[1]))),
            "mondrian": np.pad(forest, ((0, 0), (0, k - forest.shape[1]))),
        }
        out = self._outer.serve(predictions, self._targets_of(y, len(X)))
        self._drop_retired_mondrian()
        return out

    def _targets_of(self, y: Sequence[Any] | None, n: int) -> np.ndarray:
        """Each row's class index (-1: only predicted)."""
        labels = [None] * n if y is None else y
        return np.array([-1 if t is None else self._class_index[t] for t in labels], dtype=np.intp)

    def _drop_retired_mondrian(self) -> None:
        """Drop the Mondrian forest once its choice retired it."""
        if self._outer is not None and self._outer.retired:
            self._mondrian, self._outer = None, None

    def _run_inner(self, X: Any, y: Sequence[Any] | None) -> np.ndarray:
        """The ensemble's probabilities of each row, or a side model's or a blend as `SingleChoice`
        serves them (every model predicts then learns every row; a retired one is dropped after the
        batch)."""
        if self._choice is None:
            return super()._run_proba(X, y)
        predictions = {"ensemble": super()._run_proba(X, y)}
        k = len(self._classes)
        targets = self._targets_of(y, len(X))
        for name, side in self._sides().items():
            # the forest retires at a third class's first record: it runs the rows up to that one
            rows = len(X) if name != "forest" else _through_second_class(targets)
            part = (X, y) if rows == len(X) else (X[:rows], None if y is None else y[:rows])
            proba = side._run_proba(*part)
            predictions[name] = np.zeros((len(X), proba.shape[1]))
            predictions[name][:rows] = proba
        predictions = {name: np.pad(p, ((0, 0), (0, k - p.shape[1]))) for name, p in predictions.items()}
        served = self._choice.serve(predictions, targets)
        self._drop_retired()
        return served

    def predict_proba_one(self, x: Any) -> dict[Any, float]:
        outer = self._outer
        if outer is None or outer.serving == 0 or self._mondrian is None:
            return self._inner_proba_one(x)
        probas = {"served": self._inner_proba_one(x), "mondrian": self._mondrian.predict_proba_one(x)}
        needs = outer.needs()
        if len(needs) == 1:
            return probas[next(iter(needs))]
        return {c: outer.served({name: p.get(c, 0.0) for name, p in probas.items()}) for c in self._classes}

    def _inner_proba_one(self, x: Any) -> dict[Any, float]:
        """What the model serves for `x` without its Mondrian forest."""
        if self._choice is None or self._choice.serving == 0:
            return super().predict_proba_one(x)
        needs = self._choice.needs()
        probas = {name: self._proba_of(name, x) for name in needs}
        if len(needs) == 1:
            return next(iter(probas.values()))
        return {
            c: self._choice.served({name: p.get(c, 0.0) for name, p in probas.items()}) for c in self._classes
        }

    def _proba_of(self, name: str, x: Any) -> dict[Any, float]:
        """The probabilities model `name` ("ensemble", "tree" or "forest") predicts for `x`."""
        if name == "ensemble":
            return super().predict_proba_one(x)
        return self._sides()[name].predict_proba_one(x)

    # -- explanations of the candidate served ------------------------------------------------------
    def explain_one(self, x: Any) -> dict[Any, Explanation]:
        """Each class's explanation, from the second class on (sgt.explain), of the candidate that
        serves (`SingleChoice`).

        While the members serve alone (always without side models, and once they retired) it is
        theirs, as `SGTClassifier.explain_one`'s: their logit of the class against the first, before
        the calibration and the young naive Bayes. While a candidate with the single tree or the forest
        serves, what it serves is a blend of the models' *probabilities*, each model's final ones (its
        calibration, smoothing and naive Bayes applied; nothing is applied after the blend), which no
        logit before calibration gives. The explanation is then the blend, with the candidate's
        weights, of each model's explanation it needs: the members', the tree's (`SGTClassifier`'s)
        and the forest's (a boosted model's, its contributions moved to this model's features by name:
        its feature space is its own; 0 for a feature it has not seen); the base takes the difference
        between that blend's total and the served probabilities' log ratio, so that each class's total
        is log(p_c / p_first) of what `predict_proba_one` returns (the blend's contributions show how
        the served models use the features; the base also holds the calibration and the blending's
        nonlinearity). Infinite where a served probability is 0.

        With a Mondrian forest (`mondrian`), while a candidate of `MondrianChoice` that needs the forest
        serves: the explanation above of what the model serves without it, times the candidate's weight
        on that (the forest has no additive explanation: its share goes to the base), the base again
        taking the rest of the served log ratio; the Mondrian forest alone serving, every contribution
        is 0 and the base is the log ratio.

        >>> import math
        >>> import numpy as np
        >>> from sgt import BoostedClassifier
        >>> rng = np.random.default_rng(0)
        >>> X = rng.uniform(0, 1, size=(2000, 2))
        >>> y = ((np.floor(X[:, 0] * 4) + np.floor(X[:, 1] * 4)) % 2).astype(int)  # a checkerboard
        >>> model = BoostedClassifier(warm_up=100)
        >>> model.learn_many(X, y)
        >>> x = {"x0": 0.1, "x1": 0.1}
        >>> first, second = model.classes_
        >>> p = model.predict_proba_one(x)  # the forest serves here: its probabilities
        >>> why = model.explain_one(x)[second]
        >>> abs(why.score - math.log(p[second] / p[first])) < 1e-9
        True
        """
        return super().explain_one(x)

    def _served_terms(self, terms: np.ndarray, x: Any) -> np.ndarray:
        """`explain_raw` of what serves: `_inner_terms` while the Mondrian forest is not served; else
        those times the candidate's weight on them (the forest, which has no additive explanation,
        contributes nothing), each row's base moved so that it totals the served log ratio."""
        inner = self._inner_terms(terms, x)
        outer = self._outer
        if outer is None or outer.needs() == {"served"} or len(self._classes) < 2:
            return inner
        candidate = outer.candidates[outer.serving]
        blended = np.array(
            candidate.of({"served": inner, "mondrian": np.zeros_like(inner)}), dtype=np.float64
        )
        blended[:, 0] += self._served_log_ratios(x) - blended.sum(axis=1)
        return blended

    def _inner_terms(self, terms: np.ndarray, x: Any) -> np.ndarray:
        """`explain_raw` of what serves (see `explain_one`), from the members' `terms` [classes - 1,
        1 + features]: those while the members serve alone, else the blend of each needed model's with
        the serving candidate's weights, each row's base moved so that it totals the served log
        ratio."""
        choice = self._choice
        if choice is None or choice.needs() == {"ensemble"} or len(self._classes) < 2:
            return terms
        candidate = choice.candidates[choice.serving]
        models = {
            name: terms if name == "ensemble" else self._side_terms(name, x, terms.shape[0])
            for name in candidate.models
        }
        blended = np.array(candidate.of(models), dtype=np.float64)  # (a copy: a lone model's is its own)
        blended[:, 0] += self._served_log_ratios(x) - blended.sum(axis=1)
        return blended

    def _side_terms(self, name: str, x: Any, rows: int) -> np.ndarray:
        """`explain_raw` of side model `name` ("tree" or "forest") for `x`, on this model's features,
        with `rows` rows (0 for a class it does not know)."""
        side = self._sides()[name]
        own = on_features(explain_raw(side, x), side._space.names, self._space.names)
        if own.shape[0] < rows:
            own = np.pad(own, ((0, rows - own.shape[0]), (0, 0)))
        return own[:rows]

    def _served_log_ratios(self, x: Any) -> np.ndarray:
        """log(p_c / p_first) of each class c from the second on, of the probabilities served for `x`."""
        proba = self.predict_proba_one(x)
        served = np.array([proba[c] for c in self._classes], dtype=np.float64)
        with np.errstate(divide="ignore", invalid="ignore"):  # (a probability of 0: infinite)
            logs = np.log(served)
            ratios: np.ndarray = logs[1:] - logs[0]
        return ratios

    def feature_importances(self) -> dict[FeatureName, float]:
        """The importances (sgt.explain) of what serves: `_inner_importances` while the Mondrian forest is
        not served; else those blended with the forest's, which counts none (its splits are drawn at
        random, not chosen by a gain), with the candidate's weights, normalised again (the forest alone:
        every feature 0)."""
        inner = self._inner_importances()
        outer = self._outer
        if outer is None or outer.needs() == {"served"}:
            return inner
        candidate = outer.candidates[outer.serving]
        return blended_importances(candidate, {"served": inner, "mondrian": {}}, list(self._space.names))

    def _inner_importances(self) -> dict[FeatureName, float]:
        """The importances (sgt.explain) of the candidate that serves: the members' while they serve
        alone; else each needed model's (normalised, on this model's features by name), blended with
        the candidate's weights, as its probabilities are, and normalised again (a model that has not
        split yet counts nothing). A lone side model's are its own."""
        members = super().feature_importances()
        choice = self._choice
        if choice is None or choice.needs() == {"ensemble"}:
            return members
        candidate = choice.candidates[choice.serving]
        sides = self._sides()
        per_model = {
            name: members if name == "ensemble" else sides[name].feature_importances()
            for name in candidate.models
        }
        return blended_importances(candidate, per_model, list(self._space.names))

    def predict_one(self, x: Any) -> Any:
        if (self._choice is None and self._outer is None) or len(self._classes) < 2:
            return super().predict_one(x)
        p = list(self.predict_proba_one(x).values())
        return self._classes[p.index(max(p))]

    def learn_one(self, x: Any, y: Any) -> None:
        outer, forest = self._outer, self._mondrian
        if outer is None or forest is None:
            self._learn_inner_one(x, y)
            return
        if y is None:
            raise ValueError("y must be a label, not None")
        # what the model served and the forest predicted (as a batch's row), then both learn the record
        probas = {"served": self._inner_proba_one(x), "mondrian": forest.predict_proba_one(x)}
        self._learn_inner_one(x, y)
        forest.learn_one(x, y)
        classes = self._classes
        outer.learn(
            {name: [p.get(c, 0.0) for c in classes] for name, p in probas.items()}, self._class_index[y]
        )
        self._drop_retired_mondrian()

    def _learn_inner_one(self, x: Any, y: Any) -> None:
        """`learn_one` without the Mondrian forest: the members, then the side models alive."""
        if self._choice is None:
            super().learn_one(x, y)
            return
        if y is None:
            raise ValueError("y must be a label, not None")
        # the probabilities each model predicted the record with (as a batch's row), then all learn it
        names = ["ensemble", *self._sides()]
        probas = {name: self._proba_of(name, x) for name in names}
        super().learn_one(x, y)
        for side in self._sides().values():
            side.learn_one(x, y)
        classes = self._classes
        self._choice.learn(
            {name: [p.get(c, 0.0) for c in classes] for name, p in probas.items()}, self._class_index[y]
        )
        self._drop_retired()

    @classmethod
    def _params_from_saved(cls, params: dict[str, Any], loss: Any) -> dict[str, Any]:
        params.setdefault("single_tree", False)  # saved before the parameter: no single tree
        params.setdefault("forest", False)  # saved before the parameter: no forest
        params.setdefault("mondrian", False)  # saved before the parameter: no Mondrian forest
        params.setdefault("linear_start", 0)  # saved before the parameter: linear steps from the start
        params.setdefault("multiclass_trees", "per-class")  # saved before the parameter: a tree per class
        params.setdefault("proba", "tree")  # saved before the parameter, or with "tree": the raw softmax
        params = super()._params_from_saved(params, loss)
        del params["linear_gate"]  # SGTClassifier's defaults for its saves, not parameters of the ensemble
        del params["leaf_bayes"]
        return params


def _through_second_class(targets: np.ndarray) -> int:
    """Rows up to and including the first of a third class (class index 2 or more), or all."""
    third = np.flatnonzero(targets >= 2)
    return int(third[0]) + 1 if third.size else len(targets)


class ForestClassifier(Averaged, BoostedClassifier):
    """A `BoostedClassifier` whose members are averaged, not boosted: the forest a boosted classifier
    keeps beside its members (sgt.boosted.forest, which has its settings)."""

    #: its own drift policy, the boosted classifier's default (a variant of the boosted class's policy, in a
    #: test or a benchmark, does not reach the forest)
    _drift_policy: ClassVar[DriftPolicy] = CLASSIFIER_POLICY
    #: its leaves at the depth bound lengthen their blocks (sgt.boosted.forest); a forest saved without the
    #: setting restores without it
    _bound_block: ClassVar[int | None] = CLASSIFIER_FOREST_BOUND_BLOCK
