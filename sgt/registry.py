"""The model classes a saved blob may name, by the type tag it carries, and `load` for any of them.

A blob names its model type (the class name) in its header; only the classes listed here can be
rebuilt from one, so reading never imports or evaluates anything it read. The worker restores its
checkpoints through this registry too.

>>> from sgt import SGTRegressor
>>> blob = SGTRegressor().to_bytes()
>>> type(load(blob)).__name__
'SGTRegressor'
>>> sorted(MODEL_TYPES)  # doctest: +NORMALIZE_WHITESPACE
['AdaptiveSGTClassifier', 'AdaptiveSGTRegressor', 'BoostedClassifier', 'BoostedRegressor',
 'MILClassifier', 'SGTClassifier', 'SGTRegressor']
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from sgt.adaptive import AdaptiveSGTClassifier, AdaptiveSGTRegressor
from sgt.base import BaseSGT
from sgt.boosted import BoostedClassifier, BoostedRegressor
from sgt.classifier import SGTClassifier
from sgt.losses import Loss
from sgt.mil import MILClassifier
from sgt.regressor import SGTRegressor
from sgt.serialization import SerializationError, decode

__all__ = ["MODEL_TYPES", "load"]

#: type tag (the class name a blob's header holds) -> model class; read-only
MODEL_TYPES: Mapping[str, type[BaseSGT]] = MappingProxyType(
    {
        cls.__name__: cls
        for cls in (
            SGTClassifier,
            SGTRegressor,
            MILClassifier,
            BoostedClassifier,
            BoostedRegressor,
            AdaptiveSGTClassifier,
            AdaptiveSGTRegressor,
        )
    }
)


def load(blob: bytes, loss: Loss | None = None) -> BaseSGT:
    """The model of any type that `to_bytes` wrote. `loss` supplies a custom (non built-in) loss."""
    saved = decode(blob)
    kind = saved.header.get("model")
    cls = MODEL_TYPES.get(kind) if isinstance(kind, str) else None
    if cls is None:
        raise SerializationError(f"unknown model type {kind!r}")
    model: BaseSGT = cls.from_saved(saved, loss)
    return model
