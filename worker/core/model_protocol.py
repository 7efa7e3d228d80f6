"""What the worker needs from a model, as protocols: sgt's models have it, and so may a stand-in.

The worker's core (:mod:`worker.core.partition_state`) predicts and learns a run of records with one strictly
prequential ``predict_learn_many`` call, reads ``classes_`` for classification, saves the model with
``to_bytes`` and restores it with its class's ``from_bytes``; the metrics read its size and shape.
Nothing else is called, so any class with these members can serve (the tests use small stand-ins).

>>> from sgt import SGTClassifier, SGTRegressor
>>> def check(model: StreamModel, cls: ModelClass) -> StreamModel:  # checked by the type checker
...     return cls.from_bytes(model.to_bytes())
>>> check(SGTRegressor(), SGTRegressor).n_nodes  # leaf_model="auto": four trees of one leaf each
4
>>> classes_of(SGTClassifier())
[]
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol, cast

import numpy as np


class StreamModel(Protocol):
    """A model the worker can run, score, checkpoint and report on."""

    def predict_learn_many(self, X: list[dict[str, Any]], y: Sequence[Any]) -> np.ndarray:
        """Row i predicted with the model that has learned rows < i, then learned if ``y[i]`` is not
        None. Classification: probabilities [rows, classes] in ``classes_`` order as it is after the
        call; regression: predictions [rows]."""
        ...

    def to_bytes(self) -> bytes:
        """The model, exactly (the class's ``from_bytes`` restores it)."""
        ...

    @property
    def n_seen(self) -> int:
        """Records learned."""
        ...

    @property
    def n_nodes(self) -> int: ...

    @property
    def n_leaves(self) -> int: ...

    @property
    def depth(self) -> int: ...

    @property
    def nbytes(self) -> int: ...

    @property
    def version(self) -> int:
        """Changes applied to the model so far (the ``sgt_model_version`` gauge)."""
        ...


class ClassifierModel(StreamModel, Protocol):
    """A classification model: its columns of probabilities are ``classes_``, in order of first
    appearance."""

    @property
    def classes_(self) -> list[Any]: ...


class ModelClass(Protocol):
    """A model class as the registry of restorable models holds it."""

    def from_bytes(self, blob: bytes, /) -> StreamModel:
        """The model ``to_bytes`` saved; raises on data that is not one."""
        ...


def classes_of(model: StreamModel) -> list[Any]:
    """The classes of a classification model (the worker asks only when its task is classification,
    whose models :func:`worker.core.sgt_models.new_model` makes or the registry restores are classifiers)."""
    return cast(ClassifierModel, model).classes_
