"""SGTRegressor: one Stochastic Gradient Tree for squared error or any loss of sgt.losses."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from sgt.base import BaseSGT, _check_real
from sgt.explain import Explanation, explanations
from sgt.intervals import IntervalLayer, check_coverages
from sgt.losses import Loss, SquaredError, get_loss
from sgt.serialization import SerializationError

__all__ = ["SGTRegressor"]


class SGTRegressor(BaseSGT):
    """Online regressor: a single Stochastic Gradient Tree (paper section 4.2).

    The prediction is `loss.link(base + tree(x))`. With the default squared error (g = F - y,
    h = 1) the base score is the first target, so the tree learns deviations from it: shifting
    all targets by a constant shifts all predictions by that constant and leaves the tree's
    structure unchanged (the paper's 0 would spend the first leaf updates walking to the mean).
    Pass `base_score=0.0` for the paper's behaviour. Any other twice-differentiable loss plugs in
    through `loss` (see sgt.losses, e.g. Poisson for counts).

    Scale: the split test works on squared gradients times squared steps, about the fourth power of
    the targets' spread, in doubles. With squared error it overflows once targets differ by more than
    about 1e76, and from then on the tree never splits; rescale such targets.

    Parameters are those of SGTClassifier, plus:

    loss
        An sgt.losses.Loss; default SquaredError().
    base_score
        Raw score the tree starts from; None (default) takes `loss.base_score(first target)`.
    leaf_model
        "adaptive" (default): each leaf serves its linear term or its constant, whichever predicted
        its records better so far (sgt.leaf.LeafLearner._choose); "linear" or "constant" as for the
        classifier.
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
        leaf_model: str = "adaptive",
        linear_lambda: float = 0.01,
        max_bytes: int | None = None,
        interval_coverages: Sequence[float] = (),
    ) -> None:
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
        `loss` if it has that name (and those arguments)."""
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

    def _state_extra(self) -> dict[str, Any]:
        return {"base": self._base_value, **self._interval_state()}

    def _interval_state(self) -> dict[str, Any]:
        """The interval layer's state, if the model keeps one (else nothing: blobs as before)."""
        return {} if self._intervals is None else {"intervals": self._intervals.state()}

    def _restore_extra(self, extra: dict[str, Any]) -> None:
        base = extra["base"]
        self._base_value = None if base is None else float(base)
        if self._intervals is not None:  # saved before the layer existed: it starts empty
            self._intervals = IntervalLayer.restore(self.interval_coverages, extra.get("intervals"))

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
        g, h = self.loss.gradient_hessian(targets, raw[0])
        return g[None, :], h[None, :]

    # -- prediction and learning ---------------------------------------------------------------
    def predict_one(self, x: Any) -> float:
        """Prediction for one record."""
        return float(self.loss.link(np.array(self._predict_raw_one(x)))[0])

    def predict_many(self, X: Any) -> np.ndarray:
        """Predictions for many records (1-D float array)."""
        raw, _ = self._run(X, None)
        return self.loss.link(raw[:, 0])

    def predict_learn_many(self, X: Any, y: Sequence[Any]) -> np.ndarray:
        """Predict each row with the model that learned all earlier rows, then learn it.

        Rows whose target is None are only predicted. Equal to a loop of predict_one and learn_one.
        """
        raw, _ = self._run(X, y)
        predictions = self.loss.link(raw[:, 0])
        if self._intervals is not None:  # the prequential residuals, in row order
            self._intervals.learn_many(predictions, y)
        return predictions

    def learn_one(self, x: Any, y: float) -> None:
        """Learn one record."""
        if self._intervals is None:
            self._learn_one(x, y)
            return
        prediction = self.predict_one(x)  # the residual is the one of the prediction before learning
        self._learn_one(x, y)
        self._intervals.learn_one(prediction, float(y))

    def learn_many(self, X: Any, y: Sequence[Any]) -> None:
        """Learn rows in order; identical to a loop of learn_one (targets None are skipped)."""
        if self._intervals is None:
            self._run(X, y)
        else:
            self.predict_learn_many(X, y)

    def explain_one(self, x: Any) -> Explanation:
        """The raw score of `x` (for squared error, its prediction) as a base value plus each
        feature's contribution (sgt.explain): path contributions of the tree(s) and linear terms."""
        return explanations(self, x)[0]

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
        predictions = self.loss.link(raw[:, 0])
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
