"""A thin River adapter for the sgt models, so that River's estimator checks (`river.checks`) run on them.

An adapter holds one sgt model of the class `model`, built from the keyword parameters `params`; River
rebuilds it from these two for `clone()`. Records pass through unchanged, one dict at a time, and so
do labels and predictions: every check sees the model's own behaviour. The one translation is for
MILClassifier, which learns bags of records: a record is a bag of one instance.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from river import base

from sgt import MILClassifier, SGTClassifier, SGTRegressor
from sgt.base import BaseSGT

#: small grace periods and warm-ups, so that River's short streams (200 records; 2,000 for the memory
#: check) grow trees, update leaves and grow grids inside the checks; every other parameter is the
#: class's default
SMALL = {"grace_period": 20, "grace_start": 10, "warm_up": 30}


class _Adapter:
    """The part both adapters share: the wrapped model and its construction."""

    def __init__(self, model: type[BaseSGT], **params: Any) -> None:
        self.model = model
        self.params = params
        self._model: Any = model(**params)

    @classmethod
    def _unit_test_params(cls) -> Iterator[dict[str, Any]]:
        yield dict(SMALL)

    def _record(self, x: dict[str, Any]) -> Any:
        return [x] if self.model is MILClassifier else x

    def __str__(self) -> str:
        return self.model.__name__


class RiverClassifier(_Adapter, base.Classifier):
    """An sgt classifier (SGTClassifier by default) as a River classifier."""

    def __init__(self, model: type[BaseSGT] = SGTClassifier, **params: Any) -> None:
        super().__init__(model, **params)

    @property
    def _multiclass(self) -> bool:
        return self.model is not MILClassifier  # multi-instance learning is binary

    def learn_one(self, x: dict[str, Any], y: Any) -> None:
        self._model.learn_one(self._record(x), y)

    def predict_proba_one(self, x: dict[str, Any]) -> dict[Any, float]:
        proba: dict[Any, float] = self._model.predict_proba_one(self._record(x))
        return proba

    def predict_one(self, x: dict[str, Any], **kwargs: Any) -> Any:
        return self._model.predict_one(self._record(x))


class RiverRegressor(_Adapter, base.Regressor):
    """An sgt regressor (SGTRegressor by default) as a River regressor."""

    def __init__(self, model: type[BaseSGT] = SGTRegressor, **params: Any) -> None:
        super().__init__(model, **params)

    def learn_one(self, x: dict[str, Any], y: Any) -> None:
        self._model.learn_one(x, y)

    def predict_one(self, x: dict[str, Any]) -> float:
        return float(self._model.predict_one(x))


def adapter(model: type[BaseSGT], **params: Any) -> RiverClassifier | RiverRegressor:
    """The River adapter of an sgt model class: a classifier's when it has probabilities."""
    if hasattr(model, "predict_proba_one"):
        return RiverClassifier(model, **params)
    return RiverRegressor(model, **params)
