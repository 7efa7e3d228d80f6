"""The worker's `model` setting: the boosted ensemble and the adaptive tree built from the settings,
restored from a partition's state, and their drifts and size exported. (End to end against the
broker: the SIGTERM proof of test_checkpoint_proofs.py runs with each model.)"""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

from sgt import (
    AdaptiveSGTClassifier,
    AdaptiveSGTRegressor,
    BoostedClassifier,
    BoostedRegressor,
    SGTClassifier,
    SGTRegressor,
)
from sgt.registry import MODEL_TYPES
from sgt.serialization import decode
from tests.worker.worker_util import samples, value
from worker.checkpoints.restore import state_config
from worker.config import MODEL_MAX_BYTES, ConfigError, load_settings
from worker.core.partition_state import PartitionState
from worker.core.sgt_models import new_model
from worker.metrics import WorkerMetrics


def test_the_model_setting_picks_the_ensemble_with_its_hyperparameters() -> None:
    # none: by task (DEFAULT_MODEL)
    assert type(new_model(load_settings({}, env={}))) is AdaptiveSGTClassifier
    assert type(new_model(load_settings({"task": "regression"}, env={}))) is SGTRegressor
    assert type(new_model(load_settings({"model": "sgt"}, env={}))) is SGTClassifier
    settings = load_settings(
        {"learning_rate": "0.25", "poisson_rate": "2"},
        env={"SGT_MODEL": "boosted", "SGT_N_MEMBERS": "4", "SGT_DRIFT_THRESHOLD": "30"},
    )
    model = new_model(settings)
    assert type(model) is BoostedClassifier
    params = model.get_params()
    assert (params["n_members"], params["learning_rate"], params["poisson_rate"]) == (4, 0.25, 2.0)
    assert params["drift_threshold"] == 30.0 and params["max_categories"] == 256
    # the `proba` setting is the single tree's: the ensemble's probabilities follow the library default
    assert params["proba"] == BoostedClassifier().proba == "calibrated"
    regressor = new_model(load_settings({"model": "boosted", "task": "regression"}, env={}))
    assert type(regressor) is BoostedRegressor
    assert regressor.n_members == BoostedRegressor().n_members  # none: the library's default
    # none: each class's own default, which differ between the classifier and the regressor
    for cls, task in ((BoostedClassifier, "classification"), (BoostedRegressor, "regression")):
        params = new_model(load_settings({"model": "boosted", "task": task}, env={})).get_params()
        defaults = cls().get_params()
        for name in ("learning_rate", "drift_threshold", "lambda_"):
            assert params[name] == defaults[name], (cls.__name__, name)


def test_the_adaptive_model_is_the_drift_answering_tree_with_its_hyperparameters() -> None:
    for cls, task in ((AdaptiveSGTClassifier, "classification"), (AdaptiveSGTRegressor, "regression")):
        params = new_model(load_settings({"model": "adaptive", "task": task}, env={})).get_params()
        assert params == {**cls(max_categories=256, max_bytes=MODEL_MAX_BYTES).get_params()}, cls
        chosen = load_settings(
            {"model": "adaptive", "task": task, "drift_threshold": "20", "leaf_model": "constant"}, env={}
        )
        model = new_model(chosen)
        assert type(model) is cls
        assert (model.get_params()["drift_threshold"], model.get_params()["leaf_model"]) == (20.0, "constant")
    # the single classifier's probabilities and gate; the ensemble's settings are not the adaptive tree's
    flags = {"model": "adaptive", "n_members": "3", "proba": "tree", "linear_gate": "none"}
    params = new_model(load_settings(flags, env={})).get_params()
    assert (params["proba"], params["linear_gate"]) == ("tree", None) and "n_members" not in params


@pytest.mark.parametrize("model", [None, "adaptive"])
def test_a_probability_mode_the_adaptive_classifier_lacks_is_named(model: str | None) -> None:
    flags = {"proba": "hgs", **({} if model is None else {"model": model})}
    with pytest.raises(ConfigError, match=r"setting proba.*allowed are calibrated, tree"):
        load_settings(flags, env={})
    assert load_settings({**flags, "task": "regression"}, env={}).proba == "hgs"  # (not used there)
    assert type(new_model(load_settings({"proba": "hgs", "model": "sgt"}, env={}))) is SGTClassifier


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        ({"model": "forest"}, "setting model"),
        ({"n_members": "0"}, "setting n_members"),
        ({"learning_rate": "0"}, "setting learning_rate"),
        ({"poisson_rate": "-1"}, "setting poisson_rate"),
        ({"drift_threshold": "0"}, "setting drift_threshold"),
    ],
)
def test_bad_ensemble_settings_are_named(flags: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        load_settings(flags, env={})


@pytest.mark.parametrize(
    ("flags", "cls"),
    [
        ({"model": "boosted", "n_members": "3"}, BoostedClassifier),
        ({"model": "adaptive"}, AdaptiveSGTClassifier),
    ],
)
def test_a_partition_state_with_the_model_restores_exactly(flags: dict, cls: type) -> None:
    settings = load_settings(flags, env={})
    model = new_model(settings)
    rng = np.random.default_rng(1)
    X = rng.uniform(0, 1, (3000, 2))
    model.learn_many(X, (X[:, 0] > 0.5).astype(int))
    state = PartitionState(0, model, state_config(settings))
    blob = state.to_bytes()
    restored = PartitionState.from_bytes(blob, state_config(settings), MODEL_TYPES)
    assert type(restored.model) is cls
    assert restored.to_bytes() == blob


def test_drifts_and_the_ensemble_size_are_exported_per_partition() -> None:
    m = WorkerMetrics()
    m.report_model("0", 30, 2)  # a restored model's earlier drifts are not counted again
    m.report_model("1", 1, 0)
    m.report_model("0", 30, 5)
    parsed = samples(m.render().decode())
    assert value(parsed, "sgt_drifts_total", partition="0") == 3
    assert value(parsed, "sgt_drifts_total", partition="1") == 0
    assert value(parsed, "sgt_model_trees", partition="0") == 30
    m.forget_partition(0, [])
    parsed = samples(m.render().decode())
    assert not [key for key in parsed if ("partition", "0") in key[1]]
    m.report_model("0", 30, 7)  # assigned again: counted from here
    assert value(samples(m.render().decode()), "sgt_drifts_total", partition="0") == 0


_PRELOAD_CHECK = """
import numpy as np
import sgt
from sgt import kernels
from tests.sgt.sgt_testkit import multiclass_stream, step_regression_stream, threshold_stream
from worker.core.sgt_models import preload

preload()
dispatchers = [getattr(kernels, name) for name in kernels.__all__]
dispatchers = [d for d in dispatchers if hasattr(d, "signatures")]
loaded = [len(d.signatures) for d in dispatchers]
for make, stream in [
    (sgt.SGTClassifier, threshold_stream),
    (sgt.SGTRegressor, step_regression_stream),
    (sgt.BoostedClassifier, threshold_stream),
    (sgt.BoostedClassifier, multiclass_stream),
    (sgt.BoostedRegressor, step_regression_stream),
    (sgt.AdaptiveSGTClassifier, threshold_stream),
    (sgt.AdaptiveSGTClassifier, multiclass_stream),
    (sgt.AdaptiveSGTRegressor, step_regression_stream),
]:
    X, y = stream(3000)
    make(warm_up=100).predict_learn_many(X, y)
print(len(dispatchers), min(loaded), loaded == [len(d.signatures) for d in dispatchers])
"""


def test_preload_loads_every_kernel_the_models_call() -> None:
    """Catches a kernel that the worker's models would first load (or compile) inside a partition's
    batch, after preload: in a fresh interpreter, preload loads every kernel, and models of each kind
    and shape then call none with argument types it has not loaded."""
    pytest.importorskip("numba")
    env = {key: value for key, value in os.environ.items() if key != "SGT_KERNELS"}
    result = subprocess.run(
        [sys.executable, "-c", _PRELOAD_CHECK], capture_output=True, text=True, env=env, check=True
    )
    count, least, unchanged = result.stdout.split()
    assert int(count) >= 7 and int(least) >= 1 and unchanged == "True", result.stdout


@pytest.mark.parametrize("model_name", ["sgt", "adaptive", "boosted"])
def test_a_partition_model_keeps_to_model_max_bytes_and_its_state_is_exact(model_name: str) -> None:
    """With the smallest budget the setting allows, a partition's model (what sgt_model_bytes reports)
    stays within it on a drifting stream, and the state is the same whether the records came in one
    batch or several with a restore between them."""
    from tests.worker.test_state import feature, run_all

    settings = load_settings({"model": model_name, "model_max_bytes": "65536"}, env={})
    rng = np.random.default_rng(7)
    X = rng.uniform(0, 10, (6000, 3))
    concept = np.where(np.arange(6000) // 1500 % 2 == 0, 8.0, 11.0)
    y = np.where(X[:, 0] + X[:, 1] <= concept, "low", "high")
    feats = [
        feature(i, f"r{i}", float(i), y=str(y[i]), x={f"x{j}": float(X[i, j]) for j in range(3)})
        for i in range(6000)
    ]
    whole = PartitionState(0, new_model(settings), state_config(settings))
    run_all(whole, feats, [])
    assert whole.model.nbytes <= 65536 and whole.model.n_inactive > 0
    parts = PartitionState(0, new_model(settings), state_config(settings))
    for start in range(0, 6000, 1700):
        run_all(parts, feats[start : start + 1700], [])
        parts = PartitionState.from_bytes(parts.to_bytes(), state_config(settings), MODEL_TYPES)
        assert parts.model.nbytes <= 65536
    assert parts.to_bytes() == whole.to_bytes()


@pytest.mark.parametrize("budget", [None, "none"])
def test_a_worker_built_classifier_has_no_mondrian_forest(budget: str | None) -> None:
    """The library's boosted classifier keeps a Mondrian forest by default, the worker's never: under
    its memory budget (the default 32 MiB) a boosted classifier has no side model at all, and without
    one (`model_max_bytes` none) the worker asks for none, so its checkpoints, its rate and its
    preload (which loads no Mondrian kernel) are what they were before that default."""
    flags = {"model": "boosted", **({} if budget is None else {"model_max_bytes": budget})}
    model = new_model(load_settings(flags, env={}))
    assert isinstance(model, BoostedClassifier) and BoostedClassifier().mondrian is True
    assert model.get_params()["mondrian"] is False
    X = np.random.default_rng(3).uniform(size=(300, 2))
    model.learn_many(X, (X[:, 0] > 0.5).tolist())
    assert model._mondrian is None and "mondrian" not in decode(model.to_bytes()).header["extra"]
    if budget is None:
        assert model._single is None and model._forest is None  # (no side model under a budget)
