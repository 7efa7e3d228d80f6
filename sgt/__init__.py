"""Stochastic Gradient Trees (Gouk, Pfahringer and Frank, ACML 2019) for online learning.

>>> from sgt import SGTClassifier
>>> model = SGTClassifier()
>>> model.learn_one({"age": 41, "plan": "pro"}, "churn")
>>> model.predict_one({"age": 39, "plan": "basic"})
'churn'
"""

from sgt import losses
from sgt.adaptive import AdaptiveSGTClassifier, AdaptiveSGTRegressor
from sgt.base import DEFAULTS, PAPER_DEFAULTS
from sgt.boosted import BoostedClassifier, BoostedRegressor
from sgt.classifier import SGTClassifier
from sgt.mil import MILClassifier
from sgt.registry import MODEL_TYPES, load
from sgt.regressor import SGTRegressor
from sgt.serialization import SerializationError

__all__ = [
    "DEFAULTS",
    "MODEL_TYPES",
    "PAPER_DEFAULTS",
    "AdaptiveSGTClassifier",
    "AdaptiveSGTRegressor",
    "BoostedClassifier",
    "BoostedRegressor",
    "MILClassifier",
    "SGTClassifier",
    "SGTRegressor",
    "SerializationError",
    "load",
    "losses",
]
