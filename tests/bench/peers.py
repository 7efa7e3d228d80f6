"""The models ours is compared with: River's and MOA's (through CapyMOA), and constant baselines.

Every peer runs one record at a time, test-then-train, on the materialised stream: River's models on
the dicts (``predict_proba_one`` or ``predict_one``, then ``learn_one``), MOA's on the float array
through CapyMOA (``predict_proba`` or ``predict``, then ``train``). The predicted label of a River
classifier is the most probable class of the distribution it published (what its ``predict_one``
returns); MOA's is the first most probable class index. All peers use their library's defaults,
seeded where they draw random numbers. MOA's peers run only when CapyMOA imports (it needs a Java
runtime: ``JAVA_HOME``, or ``java`` on the ``PATH``).

River's ensembles: ARF (``forest.ARF*``, 10 trees), AMF (``forest.AMF*``, the Aggregated Mondrian
Forest), SRP (``ensemble.SRP*``, Streaming Random Patches) and, for classification only, Leveraging
Bagging (``ensemble.LeveragingBaggingClassifier``; River gives it no default base model, so it bags
MOA's default, a Hoeffding tree; River has no Leveraging Bagging regressor).

A peer is a :class:`Peer`: a name (used on the command line and in the tables), its kind (which
comparison it takes part in) and the tasks it handles.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from tests.bench.metrics import NO_LABEL, Predictions
from tests.bench.streams import SEED, Stream

SGT = "SGT"  # another implementation of stochastic gradient trees
TREE = "single tree"  # a single incremental (Hoeffding-family) tree
ENSEMBLE = "ensemble"
BASELINE = "baseline"
CLASSIFICATION, REGRESSION = "classification", "regression"


@dataclass(frozen=True)
class Peer:
    """A model to compare with: ``run`` predicts then learns every record of a stream."""

    name: str
    kind: str  # SGT, TREE, ENSEMBLE or BASELINE
    task: str  # CLASSIFICATION or REGRESSION
    run: Callable[[Stream], Predictions]
    needs_capymoa: bool = False


def task_of(stream: Stream) -> str:
    return REGRESSION if stream.spec.is_regression else CLASSIFICATION


# -- River ----------------------------------------------------------------------------------------


def run_river(model: Any, stream: Stream) -> Predictions:
    """A River model, one record at a time, on the stream's dicts."""
    n = stream.n
    if stream.spec.is_regression:
        values = np.zeros(n)
        start = time.perf_counter()
        for i, (x, y) in enumerate(zip(stream.dicts, stream.y, strict=True)):
            predicted = model.predict_one(x)
            values[i] = 0.0 if predicted is None else predicted
            model.learn_one(x, y)
        return Predictions(time.perf_counter() - start, value=values)
    index = {c: i for i, c in enumerate(stream.classes)}
    proba, label = np.zeros((n, len(index))), np.full(n, NO_LABEL)
    start = time.perf_counter()
    for i, (x, y) in enumerate(zip(stream.dicts, stream.y, strict=True)):
        dist = model.predict_proba_one(x)
        if dist:
            label[i] = index[max(dist, key=dist.get)]
            for c, p in dist.items():
                proba[i, index[c]] = p
        model.learn_one(x, y)
    return Predictions(time.perf_counter() - start, label=label, proba=proba)


def _river(make: Callable[[Stream], Any]) -> Callable[[Stream], Predictions]:
    return lambda stream: run_river(make(stream), stream)


def river_sgt(stream: Stream) -> Any:
    """River's SGT with its defaults; one-vs-rest for a multiclass stream (it is binary only)."""
    from river import multiclass, tree

    if stream.spec.is_regression:
        return tree.SGTRegressor()
    if len(stream.classes) > 2:
        return multiclass.OneVsRestClassifier(tree.SGTClassifier())
    return tree.SGTClassifier()


def _river_peers() -> list[Peer]:
    from river import ensemble, forest, preprocessing, tree

    def scaled_htr(stream: Stream) -> Any:
        return preprocessing.StandardScaler() | tree.HoeffdingTreeRegressor()

    def leveraging_bagging(stream: Stream) -> Any:
        # River's LeveragingBaggingClassifier has no default base model: MOA's, a Hoeffding tree
        return ensemble.LeveragingBaggingClassifier(tree.HoeffdingTreeClassifier(), seed=SEED)

    return [
        Peer("river-sgt", SGT, CLASSIFICATION, _river(river_sgt)),
        Peer("river-ht", TREE, CLASSIFICATION, _river(lambda s: tree.HoeffdingTreeClassifier())),
        Peer("river-hat", TREE, CLASSIFICATION, _river(
            lambda s: tree.HoeffdingAdaptiveTreeClassifier(seed=SEED))),
        Peer("river-efdt", TREE, CLASSIFICATION, _river(
            lambda s: tree.ExtremelyFastDecisionTreeClassifier())),
        Peer("river-arf", ENSEMBLE, CLASSIFICATION, _river(
            lambda s: forest.ARFClassifier(n_models=10, seed=SEED))),
        Peer("river-amf", ENSEMBLE, CLASSIFICATION, _river(lambda s: forest.AMFClassifier(seed=SEED))),
        Peer("river-srp", ENSEMBLE, CLASSIFICATION, _river(lambda s: ensemble.SRPClassifier(seed=SEED))),
        Peer("river-lb", ENSEMBLE, CLASSIFICATION, _river(leveraging_bagging)),
        Peer("river-sgt", SGT, REGRESSION, _river(river_sgt)),
        Peer("river-htr", TREE, REGRESSION, _river(lambda s: tree.HoeffdingTreeRegressor())),
        Peer("river-htr-scaled", TREE, REGRESSION, _river(scaled_htr)),
        Peer("river-arf", ENSEMBLE, REGRESSION, _river(
            lambda s: forest.ARFRegressor(n_models=10, seed=SEED))),
        Peer("river-amf", ENSEMBLE, REGRESSION, _river(lambda s: forest.AMFRegressor(seed=SEED))),
        Peer("river-srp", ENSEMBLE, REGRESSION, _river(lambda s: ensemble.SRPRegressor(seed=SEED))),
    ]  # fmt: skip


# -- MOA through CapyMOA --------------------------------------------------------------------------


def capymoa_available() -> bool:
    """True when CapyMOA imports (which also starts its Java virtual machine)."""
    try:
        import capymoa.classifier  # noqa: F401
    except Exception:  # ImportError, or CapyMOA's own error when no Java runtime is found
        return False
    return True


def run_moa(make: Callable[[Any], Any], stream: Stream) -> Predictions:
    """A MOA learner through CapyMOA, one instance at a time, on the stream's float array.

    CapyMOA's ``NumpyStream`` names the classes ``"0"`` .. ``"K-1"`` and takes the class index as the
    target, so MOA's class indices are ``Stream.classes`` indices.
    """
    if stream.X is None:
        raise TypeError("a nominal (string) feature: MOA's learners here take a float array only")
    from capymoa.stream import NumpyStream

    regression = stream.spec.is_regression
    moa_stream = NumpyStream(
        stream.X, stream.target.astype(float), target_type="numeric" if regression else "categorical"
    )
    learner = make(moa_stream.get_schema())
    n = stream.n
    values, proba, label = np.zeros(n), np.zeros((n, len(stream.classes))), np.full(n, NO_LABEL)
    start = time.perf_counter()
    for i in range(n):
        instance = moa_stream.next_instance()
        if regression:
            predicted = learner.predict(instance)
            values[i] = 0.0 if predicted is None else predicted
        else:
            dist = learner.predict_proba(instance)
            if dist is not None:
                proba[i, : len(dist)] = dist
                label[i] = int(np.argmax(dist))
        learner.train(instance)
    seconds = time.perf_counter() - start
    return (
        Predictions(seconds, value=values) if regression else Predictions(seconds, label=label, proba=proba)
    )


def _moa(class_name: str, module: str) -> Callable[[Stream], Predictions]:
    def run(stream: Stream) -> Predictions:
        import importlib

        learner_class = getattr(importlib.import_module(f"capymoa.{module}"), class_name)
        return run_moa(lambda schema: learner_class(schema=schema), stream)

    return run


def _moa_peers() -> list[Peer]:
    def peer(name: str, kind: str, task: str, class_name: str) -> Peer:
        module = "regressor" if task == REGRESSION else "classifier"
        return Peer(name, kind, task, _moa(class_name, module), needs_capymoa=True)

    return [
        peer("moa-sgt", SGT, CLASSIFICATION, "StochasticGradientTree"),
        peer("moa-ht", TREE, CLASSIFICATION, "HoeffdingTree"),
        peer("moa-efdt", TREE, CLASSIFICATION, "EFDT"),
        peer("moa-sgbt", ENSEMBLE, CLASSIFICATION, "StreamingGradientBoostedTrees"),
        peer("moa-sgt", SGT, REGRESSION, "StochasticGradientTree"),
        peer("moa-fimtdd", TREE, REGRESSION, "FIMTDD"),
        peer("moa-sgbt", ENSEMBLE, REGRESSION, "StreamingGradientBoostedRegression"),
    ]


# -- constant baselines ---------------------------------------------------------------------------


def run_majority(stream: Stream) -> Predictions:
    """The most frequent class so far (lowest class index on ties); its probabilities are the class
    frequencies so far (nothing before the first record). Computed at once, so not timed (nan)."""
    n, k = stream.n, len(stream.classes)
    counts = np.zeros((n + 1, k))
    counts[np.arange(1, n + 1), stream.target] = 1.0
    before = np.cumsum(counts, axis=0)[:n]  # row i: the counts of records 0..i-1
    total = before.sum(axis=1, keepdims=True)
    proba = np.divide(before, total, out=np.zeros_like(before), where=total > 0)
    label = np.where(total[:, 0] > 0, before.argmax(axis=1), NO_LABEL)
    return Predictions(math.nan, label=label, proba=proba)


def run_mean(stream: Stream) -> Predictions:
    """The mean target so far (0.0 before the first record). Computed at once, so not timed (nan)."""
    seen = np.arange(stream.n)
    sums = np.concatenate([[0.0], np.cumsum(stream.target)[:-1]])
    values = np.divide(sums, seen, out=np.zeros(stream.n), where=seen > 0)
    return Predictions(math.nan, value=values)


def peers() -> list[Peer]:
    """Every peer, River's first, then MOA's, then the baselines."""
    return [
        *_river_peers(),
        *_moa_peers(),
        Peer("majority", BASELINE, CLASSIFICATION, run_majority),
        Peer("mean", BASELINE, REGRESSION, run_mean),
    ]
