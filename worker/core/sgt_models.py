"""The worker's models: which sgt class serves a task, built from the settings.

A checkpoint names its model's class and the worker restores it through sgt's registry
(``sgt.registry.MODEL_TYPES``), never importing or evaluating anything it read.
"""

from __future__ import annotations

from typing import Any, cast

import numpy as np

from sgt.registry import MODEL_TYPES
from worker.config import WorkerSettings
from worker.core.model_protocol import StreamModel

#: settings whose none means the model class's own default (which differs between the classes)
_DEFAULT_WHEN_NONE = ("delta", "leaf_model", "lambda_", "gamma", "linear_lambda")
#: the same, for the parameters each model adds to one tree's
_MODEL_DEFAULT_WHEN_NONE = {
    "sgt": (),
    "adaptive": ("drift_threshold",),
    "boosted": ("poisson_rate", "n_members", "learning_rate", "drift_threshold"),
}
#: the class of each `model` setting, before its task's suffix (a name of sgt.registry.MODEL_TYPES)
_CLASS_PREFIX = {"sgt": "SGT", "adaptive": "AdaptiveSGT", "boosted": "Boosted"}


def new_model(settings: WorkerSettings) -> StreamModel:
    """A fresh model for the configured task and hyperparameters."""
    kind = "Classifier" if settings.task == "classification" else "Regressor"
    model = settings.partition_model
    boosted = model == "boosted"
    cls = MODEL_TYPES[_CLASS_PREFIX[model] + kind]
    names = _DEFAULT_WHEN_NONE + _MODEL_DEFAULT_WHEN_NONE[model]
    chosen: dict[str, Any] = {name: getattr(settings, name) for name in names}
    params = {name: value for name, value in chosen.items() if value is not None}
    if settings.task == "regression" and settings.interval_coverage is not None:
        params["interval_coverages"] = (settings.interval_coverage,)
    # (a boosted regressor keeps its library default `fine_tree`: under the budget it does not
    # live either, and without one it is a constant-leaf SGTRegressor of at most 8 MB whose kernels
    # `preload` loads, so nothing stalls a partition's first batch; its figures: docs/decisions.md)
    if settings.task == "classification":
        if boosted:
            params["multiclass_trees"] = settings.multiclass_trees
            # no Mondrian forest (the library's default keeps one): under the budget none would live
            # anyway, and saying so keeps the checkpoints' parameters, and without a budget the
            # partitions' rate and state, what they were (`preload` loads no Mondrian kernel)
            params["mondrian"] = False
        else:  # the single trees', with or without the drift response
            params["proba"] = settings.proba
            params["linear_gate"] = settings.linear_gate  # none is a value here: every term kept
    # the SGT, AdaptiveSGT and Boosted classes are stream models (the registry's MILClassifier, which is
    # not, is never picked here)
    return cast(
        StreamModel,
        cls(
            **params,
            grace_start=settings.grace_start,
            grace_period=settings.grace_period,
            bins=settings.bins,
            warm_up=settings.warm_up,
            max_depth=settings.max_depth,
            max_categories=settings.max_categories,
            max_bytes=settings.model_max_bytes,
        ),
    )


def preload() -> None:
    """Load what the models load on first use: scipy's F distribution (the split test) and sgt's
        compiled kernels, which numba reads from its cache on their first call (about 0.3 s in all on the
        benchmark machine), or compiles there on a fresh install or container (about 13 s).

        The worker calls this while its consumer group join runs, which takes seconds anyway, so that a
        partition's first batch does not stall its pipeline, nor its first prediction after a restore
        wait, for them. The kernels load with the argument types of their calls, so small models of each
        shape the worker runs learn a few hundred synthetic records here: a single tree, boosted
        ensembles of two and of three classes (whose members' trees have one output, and several), a
        regressor with adaptive leaves (`leaf_model` may name them; their pass appends rows by a kernel
        the others never call), constant-leaf trees one split deep, whose leaves at the depth bound
        merge their blocks into their totals alone (as the leaves a memory budget makes inactive do): a
        classifier's with a linear gate step by step, a regressor's in one call with the null candidate
        (sgt.kernels' evaluate_bound, as a boosted forest's trees do it). The adaptive trees, one-member
    ensembles, call no kernel with types these have not. Not a Mondrian forest: the
        worker's models never have one (`new_model` asks for none; `mondrian` is not among its settings)."""
    from sgt import BoostedClassifier, SGTClassifier, SGTRegressor, kernels
    from sgt.split import f_test

    f_test(-1.0, 1.0, 10.0)
    if not kernels.ENABLED:
        return
    rng = np.random.default_rng(0)
    X = rng.uniform(size=(600, 3))
    two = (X[:, 0] > 0.5).tolist()
    three = np.minimum((X[:, 0] * 3).astype(int), 2).tolist()
    for model, y in (
        (SGTClassifier(warm_up=50), two),
        (BoostedClassifier(warm_up=50, mondrian=False), two),
        (BoostedClassifier(warm_up=50, mondrian=False), three),
        (SGTRegressor(warm_up=50, leaf_model="adaptive"), X[:, 0].tolist()),
        (SGTClassifier(warm_up=50, max_depth=1, leaf_model="constant"), two),
        (SGTRegressor(warm_up=50, max_depth=1, leaf_model="constant"), X[:, 0].tolist()),
    ):
        model.predict_learn_many(X, y)
