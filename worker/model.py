"""The worker's models: which sgt class serves a task, built from the settings.

A checkpoint names its model's class and the worker restores it through sgt's registry
(``sgt.registry.MODEL_TYPES``), never importing or evaluating anything it read.
"""

from __future__ import annotations

from typing import Any, cast

from sgt.registry import MODEL_TYPES
from worker.config import WorkerSettings
from worker.model_protocol import StreamModel


def new_model(settings: WorkerSettings) -> StreamModel:
    """A fresh model for the configured task and hyperparameters."""
    kind = "Classifier" if settings.task == "classification" else "Regressor"
    ensemble: dict[str, Any] = {}
    if settings.model == "boosted":
        # none: the library's default, which differs between the classifier and the regressor
        optional = {
            "poisson_rate": settings.poisson_rate,
            "n_members": settings.n_members,
            "learning_rate": settings.learning_rate,
            "drift_threshold": settings.drift_threshold,
        }
        ensemble.update({name: value for name, value in optional.items() if value is not None})
    cls = MODEL_TYPES[("Boosted" if settings.model == "boosted" else "SGT") + kind]
    leaves: dict[str, Any] = {} if settings.leaf_model is None else {"leaf_model": settings.leaf_model}
    # none: the model's default (the boosted classifier's lambda_ and the boosted regressor's
    # linear_lambda differ from the single tree's)
    for name in ("lambda_", "linear_lambda"):
        if getattr(settings, name) is not None:
            leaves[name] = getattr(settings, name)
    if settings.model == "sgt" and settings.task == "classification":
        leaves["proba"] = settings.proba
    # the SGT and Boosted classes are stream models (the registry's MILClassifier, which is not, is never
    # picked here)
    return cast(
        StreamModel,
        cls(
            **ensemble,
            **leaves,
            grace_start=settings.grace_start,
            delta=settings.delta,
            grace_period=settings.grace_period,
            gamma=settings.gamma,
            bins=settings.bins,
            warm_up=settings.warm_up,
            max_depth=settings.max_depth,
            max_categories=settings.max_categories,
        ),
    )


def preload() -> None:
    """Load what the models import on first use (scipy's F distribution, for the split test).

    The worker calls this while its consumer group join runs, which takes seconds anyway, so that a
    partition's first split attempt does not stall its pipeline for the import.
    """
    from sgt.split import f_test

    f_test(-1.0, 1.0, 10.0)
