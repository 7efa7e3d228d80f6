"""Loss functions: what a Stochastic Gradient Tree minimises.

An SGT never sees the loss itself, only its first and second derivatives with respect to the raw
score F(x) at the current leaf value (paper, Eq. 6). Any twice-differentiable loss therefore plugs
in by subclassing :class:`Loss` and giving `gradient_hessian` (and, where the raw score is not
the prediction, `link`).

All methods work on numpy arrays. Use numpy (not `math`) for transcendental functions: numpy's
results are identical element by element whatever the array length, which keeps one-by-one and
batch learning bit-identical.

Example: Poisson regression for counts, a task none of the SGT papers covers. The raw score is
the log of the rate, so predictions are `exp(F)` and stay positive:

>>> import numpy as np
>>> from sgt import SGTRegressor
>>> from sgt.losses import Poisson
>>> rng = np.random.default_rng(0)
>>> X = rng.uniform(0, 1, size=(6000, 2))
>>> y = rng.poisson(np.where(X[:, 0] > 0.5, 8.0, 1.0))
>>> model = SGTRegressor(loss=Poisson(), warm_up=500)
>>> model.learn_many(X, y)
>>> low, high = model.predict_many(np.array([[0.2, 0.5], [0.8, 0.5]]))
>>> bool(0.5 < low < 2.0 and 6.0 < high < 10.0)
True
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import ClassVar, SupportsFloat

import numpy as np

__all__ = ["MAX_TARGET", "Huber", "LogLoss", "Loss", "Poisson", "SquaredError", "get_loss"]

#: the largest target magnitude a model learns. A tree's split test sums the Newton step's fourth power
#: times the records' gradient spread, and a step is of the targets' scale: the trees learned the same at
#: every scale from 1e20 to 1e75, split no more at 1e90 (the sums overflowed), and at 1e160 the trend
#: offset's variance overflowed too, so the model could no longer be saved. 1e50 keeps those sums finite
#: over any stream (a step's fourth power 1e200, times at most 1e100 records' squared gradients)
MAX_TARGET = 1e50


class Loss(ABC):
    """A twice-differentiable loss l(y, F) of a target y and a raw score F.

    Subclasses set `name` (used by serialisation to find the loss again) and implement
    `gradient_hessian`. The Hessian must be non-negative for the Newton step to be a descent step.
    """

    name: ClassVar[str] = ""

    @abstractmethod
    def gradient_hessian(self, y: np.ndarray, raw: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """dl/dF and d2l/dF2 at the raw scores `raw`, element by element."""

    def link(self, raw: np.ndarray) -> np.ndarray:
        """Map raw scores to predictions (identity unless overridden)."""
        return raw

    def base_score(self, y: float) -> float:
        """The raw score the tree starts from, given the first target (0 unless overridden)."""
        return 0.0

    def check_target(self, y: SupportsFloat) -> float:
        """Validate one target and return it as a float; raise ValueError for impossible values."""
        value = float(y)
        if not -MAX_TARGET <= value <= MAX_TARGET:  # (NaN fails too; a float's comparison, not numpy's)
            raise ValueError(f"target must be a finite number of magnitude at most {MAX_TARGET:g}, got {y!r}")
        return value

    def __eq__(self, other: object) -> bool:
        return type(self) is type(other) and vars(self) == vars(other)

    def __hash__(self) -> int:
        return hash(type(self))

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


class SquaredError(Loss):
    """l = (F - y)^2 / 2, so g = F - y and h = 1 (paper, Eqs. 23-25).

    The base score is the first target: the tree then models deviations from it, so that shifting
    every target by a constant shifts every prediction by that constant and leaves the tree as it
    is (the paper starts from 0, which spends the first leaf updates walking towards the mean).
    """

    name = "squared_error"

    def gradient_hessian(self, y: np.ndarray, raw: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return raw - y, np.ones_like(raw)

    def base_score(self, y: float) -> float:
        return float(y)


class LogLoss(Loss):
    """Binary cross-entropy on the logit F, for targets in [0, 1]: g = p - y, h = p(1 - p)."""

    name = "log_loss"

    def gradient_hessian(self, y: np.ndarray, raw: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        p = self.link(raw)
        return p - y, p * (1.0 - p)

    def link(self, raw: np.ndarray) -> np.ndarray:
        return 1.0 / (1.0 + np.exp(-raw))

    def check_target(self, y: SupportsFloat) -> float:
        value = super().check_target(y)
        if not 0.0 <= value <= 1.0:
            raise ValueError(f"log-loss targets must lie in [0, 1], got {y!r}")
        return value


class Poisson(Loss):
    """Poisson deviance on the log-rate F: l = exp(F) - yF, g = exp(F) - y, h = exp(F).

    Predictions are exp(F), the expected count. Targets are non-negative counts (or rates).
    """

    name = "poisson"

    def gradient_hessian(self, y: np.ndarray, raw: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        rate = np.exp(raw)
        return rate - y, rate

    def link(self, raw: np.ndarray) -> np.ndarray:
        return np.exp(raw)

    def check_target(self, y: SupportsFloat) -> float:
        value = super().check_target(y)
        if value < 0.0:
            raise ValueError(f"Poisson targets must be >= 0, got {y!r}")
        return value


class Huber(Loss):
    """A robust loss for regression: l = r^2 / 2 for a residual r = F - y with |r| <= delta, and
    delta (|r| - delta / 2) beyond; g = r clipped to [-delta, delta], h = 1.

    h = 1 is the loss's largest curvature, not its curvature beyond delta (0): a Newton step with it
    minimises a quadratic that lies above the loss (a majorisation step), so it descends, and it moves
    a leaf by at most delta per record, which a gross outlier cannot exceed. (With the true curvature,
    as pseudo-Huber gives it, a young leaf whose residuals are all large divides by nearly 0: measured,
    MAE 744 against squared error's 10 on a stream with 5% gross outliers.) `delta` is in the targets'
    units: about the typical residual (1 for targets scaled to unit noise). Like squared error it
    starts from the first target.
    """

    name = "huber"

    def __init__(self, delta: float = 1.0) -> None:
        value = float(delta)
        if not (np.isfinite(value) and value > 0.0):
            raise ValueError(f"delta must be a finite number > 0, got {delta!r}")
        self.delta = value

    def gradient_hessian(self, y: np.ndarray, raw: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return np.clip(raw - y, -self.delta, self.delta), np.ones_like(raw)

    def base_score(self, y: float) -> float:
        return float(y)

    def __repr__(self) -> str:
        return f"Huber(delta={self.delta!r})"


_BUILT_IN: dict[str, type[Loss]] = {cls.name: cls for cls in (SquaredError, LogLoss, Poisson, Huber)}


def get_loss(name: str) -> Loss:
    """The built-in loss called `name`; ValueError naming the choices otherwise."""
    try:
        return _BUILT_IN[name]()
    except KeyError:
        raise ValueError(f"unknown loss {name!r}; built-in losses: {sorted(_BUILT_IN)}") from None
