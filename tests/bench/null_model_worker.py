"""``sgt-worker`` with a model that does no work: how fast the worker can go whatever its model.

``bench_worker --null-model`` runs this beside the real worker, over the same input and broker, to
split the worker's cost between the model and everything else (consuming, decoding and checking,
joining, scoring, the prediction documents, producing, checkpoints). Once the classifier knows two
classes it predicts a uniform distribution and learns nothing; until then (the first records) it
is the real SGT, so predictions, scores and checkpoints look as usual. Nothing else changes: the
same flags, loop, checkpoints and metrics as ``sgt-worker``, whose ``main`` this calls.

Run as ``python -m tests.bench.null_model_worker run ...`` with the flags of ``sgt-worker run``.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any

import numpy as np

import worker.checkpoints.restore
from sgt import SGTClassifier
from worker.cli import main
from worker.config import WorkerSettings


class NullClassifier(SGTClassifier):
    """An SGT classifier that stops working once it knows two classes.

    >>> model = NullClassifier()
    >>> model.predict_learn_many([[0.0], [1.0], [2.0]], ["a", "b", "a"]).shape
    (3, 2)
    >>> model.predict_learn_many([[0.0]], ["a"]).tolist(), model.n_seen
    ([[0.5, 0.5]], 3)
    """

    def predict_learn_many(self, X: Any, y: Sequence[Any]) -> np.ndarray:
        classes = len(self.classes_)
        if classes < 2:
            return super().predict_learn_many(X, y)
        return np.full((len(y), classes), 1.0 / classes)


def null_model(_settings: WorkerSettings) -> NullClassifier:
    return NullClassifier()


if __name__ == "__main__":
    # the worker builds each partition's fresh model through this name (a checkpoint is never read:
    # the bench gives every process an empty checkpoint directory)
    worker.checkpoints.restore.new_model = null_model
    sys.exit(main())
