"""Seeded synthetic streams and tree-walking helpers shared by the sgt test modules.

Every stream is a pure function of its seed, so a failing test reproduces exactly. The helpers walk the
JSON form of a model (``to_dict()``) because that is the public view of the trees the tests assert on.

>>> X, y = threshold_stream(4, seed=0)
>>> X.shape, y.tolist() == [bool(v) for v in X[:, 0] > 0.5]
((4, 2), True)
"""

from __future__ import annotations

import copy
import itertools
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest

from sgt import kernels
from sgt.split import Candidate

#: A boosted classifier's or regressor's settings without its two costliest side models, the single
#: tree and the forest of averaged members, for a test of the members' own mechanics (drift response,
#: spans, bagging, ladders, kernels, probabilities). The side models predict and learn each batch on
#: their own and meet the members only in the choice of what is served, so they add nothing to such a
#: test but time: with them, test_boosted.py took 3 min 52 s of CPU (two processes), without them
#: 1 min 45 s, the test that keeps them included. Their own exactness (batch, loop, restore,
#: retirement inside a batch, the choice) is proved in their modules (test_boosted_single_*.py,
#: test_boosted_forest_*.py), and test_boosted.py runs the default side models through a drift and a
#: third class once (`test_the_side_models_beside_drifting_members_batch_loop_and_restore_alike`).
NO_TREE_OR_FOREST: dict[str, Any] = {"single_tree": False, "forest": False}

#: A boosted classifier's settings without any of its three side models: NO_TREE_OR_FOREST's two and
#: the Mondrian forest (the regressor has none), for the same tests of the members' own mechanics. The
#: forest learns each batch on its own too and meets the members only in the served choice; its 16
#: trees walk every record, in Python where the kernels are off: the modules that use this, with
#: test_boosted_damping.py (`-n 2`, test_boosted.py's use not yet made), took 4 min 45 s with it and
#: 3 min 2 s without. Its exactness (batch, loop, restore, kernels against Python, retirement) is
#: test_boosted_mondrian.py's, and test_boosted.py's side-models test runs it beside drifting members.
NO_SIDE_MODELS: dict[str, Any] = {**NO_TREE_OR_FOREST, "mondrian": False}


def threshold_stream(n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """x0 ~ U(0, 1), x1 ~ U(0, 1000), y = [x0 > 0.5] (a bool array): features of very different ranges,
    on which a range shared by all features (defect M1) puts every x0 in one bin."""
    rng = np.random.default_rng(seed)
    X = np.column_stack([rng.uniform(0.0, 1.0, n), rng.uniform(0.0, 1000.0, n)])
    return X, X[:, 0] > 0.5


def step_regression_stream(n: int, seed: int = 0, offset: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
    """Two features; y = offset + 3 [x0 > 0.5] + 2 [x1 > 0.3] + N(0, 0.1²): a few clear splits."""
    rng = np.random.default_rng(seed)
    X = rng.uniform(0.0, 1.0, (n, 2))
    y = 3.0 * (X[:, 0] > 0.5) + 2.0 * (X[:, 1] > 0.3) + rng.normal(0.0, 0.1, n)
    return X, y + offset


def multiclass_stream(n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Three classes by thirds of x0 (labels 0, 1, 2), plus a noise feature."""
    rng = np.random.default_rng(seed)
    X = rng.uniform(0.0, 1.0, (n, 2))
    return X, np.minimum((X[:, 0] * 3).astype(int), 2)


def mixed_regression_stream(n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Linear in one region, a constant under heavy-tailed noise in the other, with 2% missing values:
    adaptive leaves that serve either predictor."""
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1.0, 1.0, (n, 3))
    noisy = 5.0 + 2.0 * rng.standard_t(1.5, n)
    y = np.where(X[:, 2] > 0, 4.0 * X[:, 0] + rng.normal(0.0, 0.3, n), noisy)
    X[rng.uniform(size=X.shape) < 0.02] = np.nan
    return X, y


def mixed_records(n: int, seed: int = 0) -> tuple[list[dict[str, Any]], list[int]]:
    """Dict records with a numeric, a nominal and a sparse feature (missing as None, NaN or absent key).

    The label depends on both the numeric and the nominal feature, so splits on both kinds happen.
    """
    rng = np.random.default_rng(seed)
    records: list[dict[str, Any]] = []
    labels: list[int] = []
    for _ in range(n):
        a = float(rng.uniform(0.0, 1.0))
        colour = str(rng.choice(["red", "green", "blue"]))
        x: dict[str, Any] = {"a": a, "colour": colour}
        r = rng.uniform()
        if r < 0.1:
            x["b"] = None
        elif r < 0.2:
            x["b"] = float("nan")
        elif r < 0.9:
            x["b"] = float(rng.normal())
        records.append(x)
        labels.append(int((a > 0.6) != (colour == "blue")))
    return records, labels


def as_dicts(X: np.ndarray, names: list[str] | None = None) -> list[dict[str, float]]:
    """Rows of a 2-D array as dicts named x0, x1, ... (the library's default names)."""
    names = names or [f"x{j}" for j in range(X.shape[1])]
    return [{name: float(v) for name, v in zip(names, row, strict=True)} for row in X]


def iter_nodes(node: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """Depth-first walk over one tree of ``to_dict()``, parents before children."""
    yield node
    for child in node.get("children", ()):
        yield from iter_nodes(child)


def iter_paths(node: dict[str, Any], path: tuple[dict[str, Any], ...] = ()) -> Iterator[tuple[dict, ...]]:
    """Every root-to-node path (a tuple of nodes) of one tree of ``to_dict()``."""
    path = (*path, node)
    yield path
    for child in node.get("children", ()):
        yield from iter_paths(child, path)


def structure(node: dict[str, Any]) -> Any:
    """The shape of a tree without leaf values or counts: split features, thresholds, categories."""
    if node["leaf"]:
        return "leaf"
    return (
        node["feature"],
        node["kind"],
        node.get("threshold"),
        tuple(node.get("categories", ())),
        node["missing"],
        tuple(structure(child) for child in node["children"]),
    )


def accuracy(pred: np.ndarray, y: np.ndarray) -> float:
    """Fraction of equal entries (labels compared with ==)."""
    return float(np.mean([p == t for p, t in zip(pred, y, strict=True)]))


def proba_to_labels(proba: np.ndarray, classes: list[Any]) -> list[Any]:
    """Arg-max labels of a probability matrix whose columns follow ``classes``."""
    return [classes[int(i)] for i in np.argmax(proba, axis=1)]


def route(node: dict[str, Any], x: dict[str, Any]) -> dict[str, Any]:
    """The node that record x reaches by the documented rules of ``to_dict()``.

    Numeric: x <= threshold goes to child 0, otherwise child 1. Nominal: the child of x's category; an
    unknown category stops at the branch. Missing (None, NaN, absent): the ``missing`` child.
    """
    while not node["leaf"]:
        value = x.get(node["feature"])
        if value is None or (isinstance(value, float) and math.isnan(value)):
            node = node["children"][node["missing"]]
        elif node["kind"] == "numeric":
            node = node["children"][0 if value <= node["threshold"] else 1]
        elif value in node["categories"]:
            node = node["children"][node["categories"].index(value)]
        else:
            return node
    return node


def predicted_then_learned(model: Any, X: Any, y: Any) -> list[Any]:
    """Predict then learn each row with ``learn_one`` (a regressor's ``predict_one``, a classifier's
    ``predict_proba_one``); the predictions."""
    predict = model.predict_proba_one if hasattr(model, "predict_proba_one") else model.predict_one
    out: list[Any] = []
    for x, target in zip(X, y, strict=True):
        out.append(predict(x))
        model.learn_one(x, target)
    return out


def looped_with_restore(model: Any, X: Any, y: Any, at: int) -> tuple[Any, list[Any]]:
    """`predicted_then_learned` over rows ``X``, ``y``, the model saved and restored after row ``at``:
    the model at the end (a new object) and each row's prediction."""
    head = predicted_then_learned(model, X[: at + 1], y[: at + 1])
    model = type(model).from_bytes(model.to_bytes())
    return model, head + predicted_then_learned(model, X[at + 1 :], y[at + 1 :])


@dataclass(frozen=True)
class LoopAndRestore:
    """What `looped_and_restored` gives: the bytes the one-record loop saves at the end and each row's
    prediction, and the same for the model restored from the loop's save half-way."""

    saved: bytes
    predictions: list[Any]
    restored: bytes
    restored_predictions: list[Any]


def looped_and_restored(
    model: Any, X: Any, y: Any, at: int, load: Callable[[bytes], Any] | None = None
) -> LoopAndRestore:
    """`predicted_then_learned` over rows ``X``, ``y``, the model saved before row ``at``; then a model
    restored from that save (by ``load``, the model's ``from_bytes`` by default) learns rows ``at``
    onwards the same way.

    One pass and a half where a plain loop and a second loop restored half-way take two: learning is
    deterministic, so the second loop's first half would repeat the first's bits. The first loop saves
    half-way and learns on, so a save that changed the model would also show (its end bytes would
    differ from the restored model's, and from a batch learner's that never saved)."""
    load = load or type(model).from_bytes
    head = predicted_then_learned(model, X[:at], y[:at])
    blob = bytes(model.to_bytes())
    tail = predicted_then_learned(model, X[at:], y[at:])
    restored = load(blob)
    restored_tail = predicted_then_learned(restored, X[at:], y[at:])
    return LoopAndRestore(
        bytes(model.to_bytes()), head + tail, bytes(restored.to_bytes()), head + restored_tail
    )


def learned_in_pieces(
    model: Any, X: Any, y: Any, cuts: list[int], methods: list[str]
) -> tuple[Any, list[Any]]:
    """A regressor that learned rows ``X``, ``y`` cut at ``cuts``, each piece by its method:
    ``learn_many``, ``predict_learn_many``, ``loop`` (`predicted_then_learned`) or ``restore`` (saved,
    restored, then ``predict_learn_many``). Returns the model (a restored one is a new object) and each
    row's prediction, None where it learned without one."""
    got: list[Any] = []
    for (a, b), method in zip(itertools.pairwise([0, *cuts, len(y)]), methods, strict=False):
        if method == "restore":
            model = type(model).from_bytes(model.to_bytes())
            method = "predict_learn_many"
        if method == "loop":
            got += predicted_then_learned(model, X[a:b], y[a:b])
        elif method == "predict_learn_many":
            got += model.predict_learn_many(X[a:b], y[a:b]).tolist()
        else:
            got += [None] * (b - a)
            model.learn_many(X[a:b], y[a:b])
    return model, got


def bits(a: np.ndarray | float) -> np.ndarray:
    """The IEEE bits of a float or an array, as unsigned integers: equal bits, not equal values (-0.0
    is not 0.0, and a NaN equals the same NaN)."""
    return np.asarray(a, dtype=np.float64).view(np.uint64)


def assert_newton_steps_agree(tree: Any) -> None:
    """A linear leaf's Newton step at node 0 (slot 0) by the kernels and by the numpy code give the same
    bits of the leaf's weights and value (overflows and divisions by zero included)."""
    by_numpy = copy.deepcopy(tree)
    with np.errstate(all="ignore"):
        tree.learner._newton_linear(0, 0)
        enabled = kernels.ENABLED
        kernels.ENABLED = False
        try:
            by_numpy.learner._newton_linear(0, 0)
        finally:
            kernels.ENABLED = enabled
    assert np.array_equal(bits(tree.weights[0]), bits(by_numpy.weights[0]))
    assert np.array_equal(bits(tree.value[0]), bits(by_numpy.value[0]))


def same_candidates(a: Candidate | None, b: Candidate | None) -> bool:
    """Whether two split candidates are the same bit for bit (None only as None)."""
    if a is None or b is None:
        return a is b
    return (
        a.feature == b.feature
        and bits(a.mean) == bits(b.mean)
        and bits(a.variance) == bits(b.variance)
        and np.array_equal(bits(a.deltas), bits(b.deltas))
        and a.threshold == b.threshold
        and np.array_equal(a.categories, b.categories)
        and a.missing_child == b.missing_child
    )


def counted_encodings(model: Any, monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """The `learn` flag of each record `model`'s own feature space encodes from now on (a side
    model's too where it shares that space; not one whose space is its own)."""
    calls: list[bool] = []
    encode = model._space.encode_one

    def counted(x: Any, learn: bool) -> list[int]:
        calls.append(learn)
        return encode(x, learn)

    monkeypatch.setattr(model._space, "encode_one", counted)
    return calls
