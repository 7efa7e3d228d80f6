"""SGTRegressor: a Stochastic Gradient Tree (by default one per leaf model, the best serving) for squared
error or any loss of sgt.losses."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np

from sgt import level_rows
from sgt.base import LEAF_MODELS, BaseSGT, TreeGroup, _check_real
from sgt.explain import Explanation, explanations
from sgt.features import Regrid
from sgt.intervals import IntervalLayer, check_coverages
from sgt.layout import LeafInputs, Params
from sgt.losses import Loss, SquaredError, get_loss
from sgt.residual import ResidualLevel
from sgt.serialization import SerializationError
from sgt.trend import TREND_RATE, TREND_THRESHOLD, TrendOffset

__all__ = ["AUTO_FADING", "AUTO_LATE_STARTS", "AUTO_LEAVES", "SGTRegressor", "fade_errors", "least_error"]

#: leaf_model="auto": the trees the regressor grows side by side, by their leaf models, in this order (the
#: first serves while the errors tie, as they do before the first record)
AUTO_LEAVES = ("adaptive", "constant", "linear", "adaptive")
#: leaf_model="auto": the records each tree's root waits for before its first split attempt, where that
#: is later than the model's `grace_start` (None: the model's). The last tree starts late: a tree whose
#: root split on the few records it had picks a feature that a later split cannot undo (SGT never revises
#: a split), and the choice then serves the late tree, which split with more evidence (the held-out
#: planes-2d: MAE 1.346 -> 0.952; docs/decisions.md, "The regressor's leaves")
AUTO_LATE_STARTS: tuple[int | None, ...] = (None, None, None, 50)
#: leaf_model="auto": the weight each learned record keeps of a tree's faded absolute error (a half-life
#: of about 34 records; why: docs/decisions.md, "The regressor's leaves")
AUTO_FADING = 0.98
_LARGEST = 1e300  # one record's absolute error counts as at most this (a faded error stays finite)


def least_error(errors: Sequence[float]) -> int:
    """The candidate that serves: the lowest faded error, the first on ties."""
    return min(range(len(errors)), key=errors.__getitem__)


def fade_errors(errors: list[float], predictions: Sequence[float], y: float, fading: float) -> None:
    """Fade each candidate's absolute error by `fading` and add its error on one learned record
    (`predictions`: the candidates' predictions made before it; `y`: its checked target), in place. An
    error that is not a number, or beyond `_LARGEST`, counts as `_LARGEST`: a candidate whose prediction
    overflowed stops serving, and its faded error stays finite, so it can serve again once it predicts
    well. The single regressor chooses its tree by these errors, a boosted regressor its served
    prediction (sgt.boosted.tree_choice)."""
    for k, p in enumerate(predictions):
        error = abs(p - y)  # (not a number fails the comparison: counted as _LARGEST)
        errors[k] = fading * errors[k] + (error if error <= _LARGEST else _LARGEST)


class SGTRegressor(BaseSGT):
    """Online regressor: a single Stochastic Gradient Tree (paper section 4.2); by default three, one per
    leaf model, of which the one that predicted the latest records best serves (`leaf_model` below).

    The prediction is `loss.link(base + tree(x))`. With the default squared error (g = F - y,
    h = 1) the base score is the first target, so the tree learns deviations from it: shifting
    all targets by a constant shifts all predictions by that constant and leaves the tree's
    structure unchanged (the paper's 0 would spend the first leaf updates walking to the mean).
    Pass `base_score=0.0` for the paper's behaviour. Any other twice-differentiable loss plugs in
    through `loss` (see sgt.losses, e.g. Poisson for counts).

    Scale: the split test works on squared gradients times squared steps, about the fourth power of
    the targets' spread, in doubles. With squared error it overflows once targets differ by more than
    about 1e76, and from then on the tree never splits; rescale such targets.

    Residual levels: with a loss whose link is the identity (squared error, Huber; not Poisson), each
    tree's prediction is corrected by a recent mean of its own prequential residuals, where such a
    correction has had the smaller recent absolute error (sgt.residual.ResidualLevel, one per tree):
    a tree moves a leaf only every `grace_period` records, so on a target that wanders over time (a
    time series) it lags the level, and no split on the features can learn the lag. Where the wandering
    level is most of the target, a recent mean of the targets themselves (the last target to a mean
    over tens of records) replaces the tree's prediction while it has had the smaller recent error.
    On a stationary stream no correction wins and the prediction stays the tree's. With
    leaf_model="auto" the tree that serves is the one whose corrected predictions erred least. The
    trees never see the corrections; intervals and explanations are those of the corrected
    prediction. Models saved before the levels restore without them, and levels saved before the
    target means without those.

    Trend offset: with an identity link the trees learn each target less the move of a slow running
    mean of the targets before it, once that move is beyond noise, and the predictions add it back
    (sgt.trend.TrendOffset): on a trend under a function of the features each leaf's value would go
    stale at its own pace. On a stream without a trend the offset stays 0 and the model learns as
    without it. Models saved before the offset restore without it.

    Parameters are those of SGTClassifier, plus:

    loss
        An sgt.losses.Loss; default SquaredError().
    base_score
        Raw score the tree starts from; None (default) takes `loss.base_score(first target)`.
    leaf_model
        "auto" (default): four trees learn side by side, one with each of the leaf models below and a
        second adaptive one whose root waits for 50 records before its first split attempt
        (`AUTO_LEAVES`, `AUTO_LATE_STARTS`), each from the gradients of its own predictions, and the
        model predicts with the one whose absolute error (of its corrected predictions, above), faded
        by `AUTO_FADING` per learned record, is lowest (about four times the work of one tree). A
        tree's structure depends on its leaf model: on a step-shaped target the trees with linear terms
        split elsewhere than the constant-leaf tree, and no choice within a leaf recovers the
        constant-leaf tree's MAE; and on the time its root splits: a root split on its first records
        may take a feature that matters in one region only, which no later split undoes
        (docs/decisions.md, "The regressor's leaves"). A model saved with three trees (before the late
        one) restores with three and learns on as it did.
        "adaptive": one tree whose leaves each serve their linear term or their constant, whichever
        predicted their records better so far (sgt.leaf.LeafLearner._choose); "linear" or "constant"
        as for the classifier.
    interval_coverages
        Coverages (in (0, 1)) whose prediction intervals the model tracks online from its prequential
        residuals, e.g. (0.9, 0.95) (sgt.intervals); `predict_interval_one` answers for these. Default
        (): no intervals, and no work for them.

    Examples
    --------
    >>> import numpy as np
    >>> from sgt import SGTRegressor
    >>> rng = np.random.default_rng(2)
    >>> X = rng.uniform(-1, 1, size=(20000, 3))
    >>> y = np.where(X[:, 0] > 0, 5.0, -5.0) + 2.0 * (X[:, 1] > 0.5) + rng.normal(0, 0.1, 20000)
    >>> model = SGTRegressor(leaf_model="constant")  # a piecewise-constant target: constant leaves
    >>> predictions = model.predict_learn_many(X, y)
    >>> bool(np.abs(predictions - y)[-2000:].mean() < 0.3)
    True
    >>> round(model.predict_one({"x0": 0.5, "x1": 0.9, "x2": 0.0}))
    7
    """

    _leaf_models: ClassVar[tuple[str, ...]] = (*LEAF_MODELS, "auto")
    # leaf_model="auto"'s trees and fading (class attributes so that a benchmark variant may change them)
    _auto_leaves: ClassVar[tuple[str, ...]] = AUTO_LEAVES
    _auto_late_starts: ClassVar[tuple[int | None, ...]] = AUTO_LATE_STARTS
    _auto_fading: ClassVar[float] = AUTO_FADING
    # whether the served prediction gets a residual level (sgt.residual; the boosted regressor keeps
    # its own, on the ensemble's score, and so has none here)
    _levelled: ClassVar[bool] = True
    # the trend offset's rate and threshold (sgt.trend), which the trees learn the targets minus; None:
    # no offset (a class attribute so that a benchmark variant may change it)
    _trend_setting: ClassVar[tuple[float, float] | None] = (TREND_RATE, TREND_THRESHOLD)

    def __init__(
        self,
        delta: float = 1e-3,
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
        leaf_model: str = "auto",
        linear_lambda: float = 0.01,
        max_bytes: int | None = None,
        interval_coverages: Sequence[float] = (),
    ) -> None:
        # leaf_model="auto": each tree's faded absolute error (see AUTO_LEAVES), None otherwise; its
        # trees, the first `_auto_count` of `_auto_leaves` (fewer for a model saved before the later ones)
        self._auto_count = len(self._auto_leaves)
        self._auto_errors: list[float] | None = [0.0] * self._auto_count if leaf_model == "auto" else None
        super().__init__(
            delta,
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
        )
        if loss is not None and not isinstance(loss, Loss):
            raise ValueError(f"loss must be an sgt.losses.Loss instance, got {loss!r}")
        if base_score is not None:
            _check_real("base_score", base_score, low=-np.inf, allowed="None or a finite number")
        self.loss = loss if loss is not None else SquaredError()
        self.base_score = None if base_score is None else float(base_score)
        self._base_value = self.base_score
        self.interval_coverages = check_coverages(interval_coverages)
        self._intervals = IntervalLayer(self.interval_coverages) if self.interval_coverages else None
        # the residual levels added to the trees' predictions, one per tree (None: none, as saved before
        # they existed; a level of a linked score would not add up, so only for an identity link)
        trees = self._auto_count if leaf_model == "auto" else 1
        self._levels: list[ResidualLevel] | None = (
            [ResidualLevel() for _ in range(trees)]
            if self._levelled and type(self.loss).link is Loss.link
            else None
        )
        # the trend offset (sgt.trend; None: none, as saved before it, and for a linked score, which a
        # mean of the targets would not shift)
        self._trend: TrendOffset | None = (
            TrendOffset(*self._trend_setting)
            if self._trend_setting is not None and type(self.loss).link is Loss.link
            else None
        )
        self._new_tree()

    def get_params(self) -> dict[str, Any]:
        params = super().get_params()
        params.update(loss=self.loss.name, base_score=self.base_score)
        params["interval_coverages"] = list(self.interval_coverages)
        return params

    def _saved_params(self) -> dict[str, Any]:
        """`get_params`, plus the loss's own arguments where it has any (Huber's delta), less
        `interval_coverages` when empty (the default: saved as before intervals existed)."""
        params = super()._saved_params()
        if not params.get("interval_coverages", True):
            del params["interval_coverages"]
        if vars(self.loss):
            params["loss_args"] = dict(vars(self.loss))
        return params

    @classmethod
    def _params_from_saved(cls, params: dict[str, Any], loss: Any) -> dict[str, Any]:
        """The saved loss name becomes the built-in loss of that name (with its saved arguments), or
        `loss` if it has that name (and those arguments). A model saved without a leaf model (before
        there was a choice) restores with "adaptive" leaves, as it did before "auto" was the default."""
        if "auto" in cls._leaf_models:  # saved before the parameter: restored as it was then restored
            params.setdefault("leaf_model", "adaptive")
        name = params.pop("loss")
        args = params.pop("loss_args", {})
        if loss is not None:
            if loss.name != name or (args and vars(loss) != args):
                raise SerializationError(
                    f"the model was trained with loss {name!r} {args or ''}, not {loss!r}".replace("  ", " ")
                )
            return {**params, "loss": loss}
        try:
            built_in = get_loss(name)
        except ValueError:
            raise SerializationError(
                f"the model uses the custom loss {name!r}: pass it as load(..., loss=...)"
            ) from None
        return {**params, "loss": type(built_in)(**args) if args else built_in}

    def _params_of_tree(self, t: int) -> Params:
        """With leaf_model="auto", tree t's leaf model is `AUTO_LEAVES[t]`, and its root waits for
        `AUTO_LATE_STARTS[t]` records where that is later than the model's grace_start."""
        params = super()._params_of_tree(t)
        if self.leaf_model != "auto" or t >= len(self._auto_leaves):  # (a blob of more: `_restore_extra`)
            return params
        params = dataclasses.replace(params, leaf_model=self._auto_leaves[t])
        late = self._auto_late_starts[t]
        if late is None or params.grace_start is None or params.grace_start >= late:
            return params  # (grace_start None: every first block is a grace period, the paper's)
        return dataclasses.replace(params, grace_start=late)

    def _new_tree(self, root_value: float = 0.0) -> None:
        """The model's tree, or with leaf_model="auto" its trees (`_auto_count` of them)."""
        for _ in range(self._auto_count if self.leaf_model == "auto" else 1):
            super()._new_tree(root_value)

    def _tree_groups(self) -> list[TreeGroup]:
        """The views show the tree that predicts (with leaf_model="auto", the serving one)."""
        if self._auto_errors is None:
            return super()._tree_groups()
        return [TreeGroup("", [self._trees[self._serving()]])]

    def _state_arrays(self) -> list[tuple[str, np.ndarray]]:
        arrays = super()._state_arrays()
        if self._auto_errors is not None:
            arrays.append(("errors", np.array(self._auto_errors)))
        return arrays

    def _restore_arrays(self, extra: dict[str, Any], arrays: dict[str, np.ndarray]) -> None:
        super()._restore_arrays(extra, arrays)
        if self._auto_errors is None:
            return
        errors = arrays.get("errors")
        if errors is None or errors.shape != (self._auto_count,) or not np.isfinite(errors).all():
            raise SerializationError("a model with leaf_model='auto' needs its trees' errors")
        self._auto_errors = errors.astype(np.float64).tolist()

    # -- leaf_model="auto": the tree that serves -------------------------------------------------
    def _serving(self) -> int:
        """The tree that predicts (its index): the lowest faded absolute error, the first on ties (the
        only one but with leaf_model="auto")."""
        errors = self._auto_errors
        return 0 if errors is None else least_error(errors)

    def _record_errors(self, predictions: list[float], y: float) -> None:
        """`fade_errors` of the trees on one learned record (`predictions`: the trees' predictions made
        before it was learned; `y`: its checked target)."""
        errors = self._auto_errors
        assert errors is not None
        fade_errors(errors, predictions, y, self._auto_fading)

    def _served_rows(self, raw: np.ndarray, y: Sequence[Any]) -> np.ndarray:
        """Each row's prediction from a run's raw scores [rows, columns] (the trees' first): the serving
        tree's, corrected by its residual level, as they stood before the row; each learned row then
        updates the errors (of the corrected predictions) and the levels, in row order."""
        if self._auto_errors is not None or self._levels is not None:
            learn = np.array([value is not None for value in y], dtype=bool)
            targets = np.array(
                [0.0 if v is None else float(self.loss.check_target(v)) for v in y], dtype=np.float64
            )
            served = self._served_array(raw, targets, learn)
            if served is not None:
                return served
        if self._auto_errors is None:
            return self._levelled_rows(self.loss.link(raw[:, 0]), y)
        # (contiguous, as the one-record path's array of the trees' scores is: the same loops of numpy)
        linked = self.loss.link(np.ascontiguousarray(raw[:, : self._auto_count]))
        out = np.empty(linked.shape[0])
        for i, row in enumerate(linked.tolist()):
            corrected = self._corrected(row)
            out[i] = corrected[self._serving()]
            if y[i] is not None:
                self._learn_served(row, corrected, float(self.loss.check_target(y[i])))
        return out

    def _served_array(self, raw: np.ndarray, targets: np.ndarray, learn: np.ndarray) -> np.ndarray | None:
        """`_served_rows` by the compiled loop (sgt.level_rows), from the rows' checked `targets` and
        `learn` mask; None (nothing changed) where it does not apply: then the Python walk serves."""
        trees = self._auto_count if self._auto_errors is not None else 1
        linked = self.loss.link(raw[:, :trees])
        choice, fading = self._auto_errors, self._auto_fading
        return level_rows.served_rows(linked, targets, learn, self._levels, choice, fading, _LARGEST)

    def _learn_served(self, linked: list[float], corrected: list[float], y: float) -> None:
        """leaf_model="auto", one learned record (`y`: its target, checked once by the caller, as it is
        a few microseconds a row): each tree's faded error of its corrected prediction, then each tree's
        level takes the residual of its uncorrected one (`linked`)."""
        self._record_errors(corrected, y)
        if self._levels is not None:
            for level, prediction in zip(self._levels, linked, strict=True):
                level.learn(prediction, y)

    # -- the residual levels (sgt.residual), one per tree, added to its predictions -------------
    def _corrected(self, linked: list[float]) -> list[float]:
        """The trees' predictions each corrected by its level (as they are without levels)."""
        if self._levels is None:
            return linked
        return [level.corrected(p) for p, level in zip(linked, self._levels, strict=True)]

    def _levelled_rows(self, served: np.ndarray, y: Sequence[Any]) -> np.ndarray:
        """One tree: `served` (each row's uncorrected prediction) corrected by the level as it stood
        before the row; the level then learns the row's residual if the row is learned (target not
        None). `apply` does it in one pass of floats."""
        if self._levels is None:
            return served
        level = self._levels[0]
        learn = [value is not None for value in y]
        targets = [0.0 if value is None else float(self.loss.check_target(value)) for value in y]
        return level.apply(served, targets, learn)

    def _served(self, prediction: float) -> float:
        """The serving tree's uncorrected `prediction` corrected by its residual level (as `_corrected`
        corrects it; itself without levels)."""
        return prediction if self._levels is None else self._levels[self._serving()].corrected(prediction)

    def _state_extra(self) -> dict[str, Any]:
        levels = {} if self._levels is None else {"levels": [level.state() for level in self._levels]}
        trend = {} if self._trend is None else {"trend": self._trend.state()}
        return {"base": self._base_value, **self._interval_state(), **levels, **trend}

    def _interval_state(self) -> dict[str, Any]:
        """The interval layer's state, if the model keeps one (else nothing: blobs as before)."""
        return {} if self._intervals is None else {"intervals": self._intervals.state()}

    def _restore_extra(self, extra: dict[str, Any]) -> None:
        if self.leaf_model == "auto":  # (its trees are restored already: as many as it was saved with)
            self._auto_count = len(self._trees)
            if not 1 <= self._auto_count <= len(self._auto_leaves):
                raise SerializationError(
                    f"a model with leaf_model='auto' has 1 to {len(self._auto_leaves)} trees, "
                    f"not {self._auto_count}"
                )
            self._auto_errors = [0.0] * self._auto_count  # (`_restore_arrays` then reads them)
        base = extra["base"]
        self._base_value = None if base is None else float(base)
        self._levels = self._restored_levels(extra.get("levels"))
        self._trend = self._restored_trend(extra.get("trend"))
        if self._intervals is not None:  # saved before the layer existed: it starts empty
            self._intervals = IntervalLayer.restore(self.interval_coverages, extra.get("intervals"))

    def _restored_levels(self, saved: Any) -> list[ResidualLevel] | None:
        """The saved levels (saved without: before the residual levels, or none; none)."""
        if saved is None or not self._levelled:
            return None
        trees = self._auto_count if self.leaf_model == "auto" else 1
        if not isinstance(saved, list) or len(saved) != trees:
            raise SerializationError(f"a model with {trees} tree(s) needs as many residual levels")
        return [ResidualLevel.restored(state) for state in saved]

    @staticmethod
    def _restored_trend(saved: Any) -> TrendOffset | None:
        """The saved trend offset (saved without one: before it, or none; none)."""
        if saved is None:
            return None
        try:
            return TrendOffset.restored(saved)
        except (TypeError, ValueError) as error:
            raise SerializationError(f"a bad trend offset: {error}") from None

    # -- the trend offset (sgt.trend): the trees learn the targets minus it, predictions add it --
    def _offset(self) -> float:
        """What the trend offset adds to the trees' next prediction (0 without one)."""
        return 0.0 if self._trend is None else self._trend.offset()

    def _tree_target_one(self, target: Any) -> Any:
        """The one-record path's tree target: the checked target less its trend offset, which then
        learns it (`TrendOffset.take`, as `_run_codes` takes a batch's)."""
        return target if self._trend is None else self._trend.take(target)

    def _published(self, raw: list[float]) -> list[float]:
        """The trees' raw scores of one record, plus the trend offset (an identity link: a score)."""
        if self._trend is None:
            return raw  # (as they are: adding `_offset()`'s 0.0 would turn a score of -0.0 into 0.0)
        offset = self._offset()
        return [value + offset for value in raw]

    def _run_codes(
        self,
        codes: np.ndarray,
        targets: np.ndarray,
        learn: np.ndarray,
        target_events: np.ndarray,
        out: Any = None,
        regrids: dict[int, list[Regrid]] | None = None,
        inputs: LeafInputs | None = None,
        routes: list[tuple[np.ndarray, np.ndarray]] | None = None,
    ) -> tuple[np.ndarray, np.ndarray]:
        """With a trend offset, the trees learn each learned row's target less the offset as it stood
        before the row, and each row's raw scores get that offset added: the offsets are a function of
        the targets alone, known before the trees run (every batch path, and the boosted regressor's
        single tree, runs through here)."""
        if self._trend is None:
            return super()._run_codes(codes, targets, learn, target_events, out, regrids, inputs, routes)
        shifted, offsets = self._trend.shift(targets, learn)
        raw, outputs = super()._run_codes(codes, shifted, learn, target_events, out, regrids, inputs, routes)
        return raw + offsets[:, None], outputs

    # -- targets and gradients -----------------------------------------------------------------
    def _prepare_targets(self, y: Sequence[Any], learn: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        targets = np.zeros(len(learn))
        rows = np.flatnonzero(learn)
        for i in rows.tolist():
            value = y[i]
            if isinstance(value, (str, bytes, bool)) or not isinstance(value, (int, float, np.number)):
                raise ValueError(f"a regression target must be a number, got {value!r}")
            targets[i] = self.loss.check_target(value)
        events = rows[:1] if self._base_value is None else rows[:0]
        return targets, events

    def _register_target(self, target: Any) -> None:
        if self._base_value is None:
            self._base_value = float(self.loss.base_score(float(target)))

    def _base(self) -> float:
        return 0.0 if self._base_value is None else self._base_value

    def _gradients(self, raw: np.ndarray, targets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Each tree's g and h at its own raw scores (with leaf_model="auto" the trees learn apart)."""
        if raw.shape[0] == 1:
            g, h = self.loss.gradient_hessian(targets, raw[0])
            return g[None, :], h[None, :]
        pairs = [self.loss.gradient_hessian(targets, scores) for scores in raw]
        return np.stack([g for g, _ in pairs]), np.stack([h for _, h in pairs])

    # -- prediction and learning ---------------------------------------------------------------
    def _linked_one(self, x: Any) -> np.ndarray:
        """The trees' predictions of one record (one per tree)."""
        return self.loss.link(np.array(self._predict_raw_one(x)))

    def predict_one(self, x: Any) -> float:
        """Prediction for one record."""
        return self._served_one(self._predict_raw_one(x))

    def _predict_codes_one(self, codes: Sequence[int] | np.ndarray) -> float:
        """`predict_one` of a record already encoded in the model's space (the boosted regressor's
        single tree shares the ensemble's space, so the ensemble's codes serve it as well)."""
        return self._served_one(self._predict_raw_codes(codes))

    def _served_one(self, raw: list[float]) -> float:
        """The prediction served from one record's raw scores (one per tree)."""
        return self._served(float(self.loss.link(np.array(raw))[self._serving()]))

    def predict_many(self, X: Any) -> np.ndarray:
        """Predictions for many records (1-D float array)."""
        raw, _ = self._run(X, None)
        served = self.loss.link(raw[:, self._serving()])
        if self._levels is None:
            return served
        return np.array([self._served(value) for value in served.tolist()], dtype=np.float64)

    def predict_learn_many(self, X: Any, y: Sequence[Any]) -> np.ndarray:
        """Predict each row with the model that learned all earlier rows, then learn it.

        Rows whose target is None are only predicted. Equal to a loop of predict_one and learn_one.
        """
        raw, _ = self._run(X, y)
        predictions = self._served_rows(raw, y)
        if self._intervals is not None:  # the prequential residuals, in row order
            self._intervals.learn_many(predictions, y)
        return predictions

    def learn_one(self, x: Any, y: float) -> None:
        """Learn one record."""
        if self._intervals is None and self._auto_errors is None and self._levels is None:
            self._learn_one(x, y)
            return
        # the residuals are those of the predictions before learning
        linked = self._linked_one(x).tolist()
        corrected = self._corrected(linked)
        prediction = corrected[self._serving()]
        self._learn_one(x, y)
        if self._auto_errors is not None:
            self._learn_served(linked, corrected, float(self.loss.check_target(y)))
        elif self._levels is not None:  # (`apply`, as the batch takes it, for the same float operations)
            self._levels[0].apply([linked[0]], [float(self.loss.check_target(y))], [True])
        if self._intervals is not None:
            self._intervals.learn_one(prediction, float(y))

    def learn_many(self, X: Any, y: Sequence[Any]) -> None:
        """Learn rows in order; identical to a loop of learn_one (targets None are skipped)."""
        if self._intervals is None and self._auto_errors is None and self._levels is None:
            self._run(X, y)
        else:
            self.predict_learn_many(X, y)

    def explain_one(self, x: Any) -> Explanation:
        """The raw score of `x` (for squared error, its prediction) as a base value plus each
        feature's contribution (sgt.explain): path contributions of the tree(s) and linear terms
        (with leaf_model="auto": of the tree that serves); the residual level's correction, which the
        prediction adds (or a recent mean of the targets' difference from the score, where that
        replaces the prediction), and the trend offset (sgt.trend), are in the base."""
        explanation = explanations(self, x)[self._serving()]
        correction = self._served(explanation.score + self._offset()) - explanation.score
        if not correction:
            return explanation
        return dataclasses.replace(
            explanation, base=explanation.base + correction, score=explanation.score + correction
        )

    # -- prediction intervals (sgt.intervals) --------------------------------------------------
    def _layer(self) -> IntervalLayer:
        if self._intervals is None:
            raise ValueError("the model tracks no intervals: build it with interval_coverages, e.g. (0.9,)")
        return self._intervals

    def predict_interval_one(self, x: Any, coverage: float) -> tuple[float, float]:
        """(low, high): the prediction plus or minus the half-width tracked for `coverage` (one of
        `interval_coverages`; (-inf, inf) before any record was learned)."""
        layer = self._layer()
        layer.half_width(coverage)  # an untracked coverage fails before the prediction is made
        return layer.interval(self.predict_one(x), coverage)

    def predict_learn_interval_many(
        self, X: Any, y: Sequence[Any], coverage: float
    ) -> tuple[np.ndarray, np.ndarray]:
        """`predict_learn_many` that also returns each row's interval [rows, 2] at `coverage`, as it
        stood when the row was predicted (a loop of `predict_interval_one` and `learn_one`)."""
        layer = self._layer()
        layer.half_width(coverage)
        raw, _ = self._run(X, y)
        predictions = self._served_rows(raw, y)
        widths = layer.learn_many(predictions, y, coverage)
        assert widths is not None
        return predictions, np.column_stack([predictions - widths, predictions + widths])

    def predict_interval_many(self, X: Any, coverage: float) -> np.ndarray:
        """[rows, 2]: `predict_interval_one` of each row."""
        layer = self._layer()
        layer.half_width(coverage)
        return layer.intervals(self.predict_many(X), coverage)

    # scikit-learn style aliases
    def partial_fit(self, X: Any, y: Sequence[Any]) -> SGTRegressor:
        self.learn_many(X, y)
        return self

    def predict(self, X: Any) -> np.ndarray:
        return self.predict_many(X)
