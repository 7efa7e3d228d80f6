"""SGTRegressor: one Stochastic Gradient Tree for squared error or any loss of sgt.losses."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from sgt.base import BaseSGT, _check_real
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
        leaf_model: str = "linear",
        linear_lambda: float = 0.01,
        max_bytes: int | None = None,
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
        self._new_tree()

    def get_params(self) -> dict[str, Any]:
        params = super().get_params()
        params.update(loss=self.loss.name, base_score=self.base_score)
        return params

    @classmethod
    def _params_from_saved(cls, params: dict[str, Any], loss: Any) -> dict[str, Any]:
        """The saved loss name becomes the built-in loss of that name, or `loss` if it has that name."""
        name = params.pop("loss")
        if loss is not None:
            if loss.name != name:
                raise SerializationError(f"the model was trained with loss {name!r}, not {loss.name!r}")
            return {**params, "loss": loss}
        try:
            return {**params, "loss": get_loss(name)}
        except ValueError:
            raise SerializationError(
                f"the model uses the custom loss {name!r}: pass it as load(..., loss=...)"
            ) from None

    def _state_extra(self) -> dict[str, Any]:
        return {"base": self._base_value}

    def _restore_extra(self, extra: dict[str, Any]) -> None:
        base = extra["base"]
        self._base_value = None if base is None else float(base)

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
        return self.loss.link(raw[:, 0])

    def learn_one(self, x: Any, y: float) -> None:
        """Learn one record."""
        self._learn_one(x, y)

    def learn_many(self, X: Any, y: Sequence[Any]) -> None:
        """Learn rows in order; identical to a loop of learn_one (targets None are skipped)."""
        self._run(X, y)

    # scikit-learn style aliases
    def partial_fit(self, X: Any, y: Sequence[Any]) -> SGTRegressor:
        self.learn_many(X, y)
        return self

    def predict(self, X: Any) -> np.ndarray:
        return self.predict_many(X)
