"""The memory budget (`max_bytes`): a bounded model stays within it on a long drifting stream, and the
budget's decisions are as exact as the rest of learning (any batching, the one-record loop and a
restore at any point give the same bytes), saved with the model.
"""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sgt import (
    AdaptiveSGTClassifier,
    AdaptiveSGTRegressor,
    BoostedClassifier,
    BoostedRegressor,
    MILClassifier,
    SGTClassifier,
    SGTRegressor,
    kernels,
    load,
)
from sgt.losses import Huber
from sgt.registry import MODEL_TYPES
from sgt.serialization import SerializationError, decode, encode
from tests.sgt.sgt_testkit import mixed_regression_stream, multiclass_stream, step_regression_stream

PROPERTY = settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
SMALL = {"grace_period": 40, "warm_up": 80}


def sea(n: int, period: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """SEA concepts: x0 + x1 <= a threshold that changes every `period` records, 10% label noise."""
    rng = np.random.default_rng(seed)
    X = rng.uniform(0.0, 10.0, (n, 3))
    thresholds = np.array([8.0, 9.0, 7.0, 9.5])[(np.arange(n) // period) % 4]
    y = (X[:, 0] + X[:, 1] <= thresholds).astype(int)
    return X, np.where(rng.uniform(size=n) < 0.1, 1 - y, y)


def growing_records(n: int, seed: int = 0) -> tuple[list[dict[str, Any]], list[int]]:
    """Dict records whose nominal feature meets a new category every n / 12 records (its layout widens
    mid-stream, at 4 and at 8 categories) and whose numeric feature "late" first comes at n / 2."""
    rng = np.random.default_rng(seed)
    records, labels = [], []
    for i in range(n):
        known = 1 + (12 * i) // n
        colour = f"c{int(rng.integers(known))}"
        x: dict[str, Any] = {"a": float(rng.uniform()), "colour": colour}
        if i >= n // 2 and rng.uniform() < 0.7:
            x["late"] = float(rng.normal())
        records.append(x)
        labels.append(int((x["a"] > 0.5) != (colour in ("c1", "c4", "c7")) != (x.get("late", 0.0) > 1.0)))
    return records, labels


def outlier_regression(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """A linear target whose features take 1% of their values 1,000 times their range: an adaptive
    leaf's linear term diverges there and the leaf falls back to its constant, and back again."""
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1.0, 1.0, (n, 4))
    y = 3.0 * X[:, 0] - 2.0 * X[:, 1] + rng.normal(0.0, 1.0, n)
    X[rng.uniform(size=X.shape) < 0.01] *= 1000.0
    return X, y


def growing_to_every_value(model: Any) -> Any:
    """`model` with grids that grow to every learned value of their warm-up (`FeatureSpace.hold_far` 0):
    the outliers then stretch a grid and meet a linear term far out, as the cases below need."""
    model._space.hold_far = 0
    return model


N = 1500
_RECORDS, _LABELS = growing_records(N, seed=5)
_XM, _YM = multiclass_stream(1200, seed=3)
_XR, _YR = step_regression_stream(2000, seed=81)
_XA, _YA = mixed_regression_stream(2000, seed=7)
_XO, _YO = outlier_regression(3000, seed=2)


def batches(n: int, cuts: list[int]) -> list[slice]:
    return [slice(a, b) for a, b in itertools.pairwise([0, *cuts, n])]


def cut_points(n: int) -> st.SearchStrategy[list[int]]:
    return st.lists(st.integers(1, n - 1), max_size=10, unique=True).map(sorted)


# each case: a model maker taking max_bytes, and its stream; the budget is a third of what the model
# takes unbounded, so that it binds early and many leaves become inactive
CASES: dict[str, tuple[Callable[[int | None], Any], Any, list[Any]]] = {
    "classifier": (lambda b: SGTClassifier(**SMALL, max_bytes=b), _RECORDS, _LABELS),
    "classifier-3": (lambda b: SGTClassifier(**SMALL, max_bytes=b), _XM, _YM.tolist()),
    # the regressors' default leaves are adaptive; linear ones as before
    "regressor": (lambda b: SGTRegressor(**SMALL, max_bytes=b), _XR, _YR.tolist()),
    "regressor-linear": (
        lambda b: SGTRegressor(**SMALL, leaf_model="linear", max_bytes=b),
        _XR,
        _YR.tolist(),
    ),
    "regressor-huber": (lambda b: SGTRegressor(**SMALL, loss=Huber(), max_bytes=b), _XA, _YA.tolist()),
    "regressor-mixed": (lambda b: SGTRegressor(**SMALL, max_bytes=b), _XA, _YA.tolist()),
    "regressor-outliers": (  # (one tree of adaptive leaves, whose choice the budget must keep)
        lambda b: growing_to_every_value(SGTRegressor(**SMALL, leaf_model="adaptive", max_bytes=b)),
        _XO,
        _YO.tolist(),
    ),
    "regressor-intervals": (  # (nominal features that widen the layout mid-batch, intervals saved)
        lambda b: SGTRegressor(**SMALL, interval_coverages=(0.9,), max_bytes=b),
        _RECORDS,
        [label + 0.1 * (i % 3) for i, label in enumerate(_LABELS)],
    ),
    "classifier-adaptive": (
        lambda b: SGTClassifier(**SMALL, leaf_model="adaptive", max_bytes=b),
        _RECORDS,
        _LABELS,
    ),
    "boosted": (lambda b: BoostedClassifier(**SMALL, max_bytes=b), _RECORDS[:1000], _LABELS[:1000]),
    "boosted-3": (lambda b: BoostedClassifier(**SMALL, max_bytes=b), _XM, _YM.tolist()),
    "boosted-per-class": (
        lambda b: BoostedClassifier(**SMALL, max_bytes=b, multiclass_trees="per-class"),
        _XM,
        _YM.tolist(),
    ),
    "boosted-regressor": (lambda b: BoostedRegressor(**SMALL, max_bytes=b), _XR, _YR.tolist()),
    "adaptive": (lambda b: AdaptiveSGTClassifier(**SMALL, max_bytes=b), _RECORDS[:1000], _LABELS[:1000]),
    "adaptive-regressor": (lambda b: AdaptiveSGTRegressor(**SMALL, max_bytes=b), _XR, _YR.tolist()),
}


@functools.cache
def budget_of(case: str) -> int:
    make, X, y = CASES[case]
    unbounded = make(None)
    unbounded.learn_many(X, y)
    return int(unbounded.nbytes // 3)


@functools.cache
def loop_bytes(case: str) -> bytes:
    """The bounded model of a one-record loop."""
    make, X, y = CASES[case]
    model = make(budget_of(case))
    for x, target in zip(X, y, strict=True):
        model.learn_one(x, target)
    assert model.n_inactive > 0  # the budget binds
    assert model.nbytes <= budget_of(case)
    return bytes(model.to_bytes())


@pytest.mark.parametrize("case", sorted(CASES))
def test_batches_and_restores_give_the_bytes_of_the_loop_with_the_budget_binding(case: str) -> None:
    make, X, y = CASES[case]
    batch = make(budget_of(case))
    batch.learn_many(X, y)
    assert batch.to_bytes() == loop_bytes(case)
    parts = make(budget_of(case))
    for part in batches(len(y), [7, 100, 333, 901]):
        parts.predict_learn_many(X[part], y[part])
        parts = type(parts).from_bytes(parts.to_bytes())
    assert parts.to_bytes() == loop_bytes(case)


@pytest.mark.skipif(kernels.numba is None, reason="the compiled kernels need numba")
@pytest.mark.parametrize("case", ["regressor", "regressor-outliers", "classifier-adaptive", "boosted-3"])
def test_the_kernels_and_the_numpy_code_give_the_bytes_of_the_loop_with_the_budget_binding(
    case: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The budget's decisions (and, for adaptive leaves, each inactive leaf's choice) take the same bits
    with and without the compiled kernels (SGT_KERNELS=0), and a model saved by either path continues
    in the other."""
    make, X, y = CASES[case]
    half = len(y) // 2
    saved = {}
    for enabled in (True, False):
        monkeypatch.setattr(kernels, "ENABLED", enabled)
        model = make(budget_of(case))
        model.learn_many(X[:half], y[:half])
        saved[enabled] = model.to_bytes()
    assert saved[True] == saved[False]
    for enabled in (True, False):
        monkeypatch.setattr(kernels, "ENABLED", enabled)
        model = type(model).from_bytes(saved[not enabled])
        model.predict_learn_many(X[half:], y[half:])
        assert model.to_bytes() == loop_bytes(case)


@PROPERTY
@given(
    cuts=cut_points(N),
    methods=st.lists(st.sampled_from(["learn_many", "predict_learn_many", "loop", "restore"]), min_size=11),
)
def test_any_batching_and_restores_give_a_byte_identical_bounded_classifier(
    cuts: list[int], methods: list[str]
) -> None:
    """New categories that widen the layout, and a new feature, inside batches."""
    model = SGTClassifier(**SMALL, max_bytes=budget_of("classifier"))
    for part, method in zip(batches(N, cuts), methods, strict=False):
        records, labels = _RECORDS[part], _LABELS[part]
        if method == "loop":
            for x, label in zip(records, labels, strict=True):
                model.learn_one(x, label)
        elif method == "restore":
            model.learn_many(records, labels)
            model = SGTClassifier.from_bytes(model.to_bytes())
        else:
            getattr(model, method)(records, labels)
    assert model.to_bytes() == loop_bytes("classifier")


@PROPERTY
@given(cuts=cut_points(N))
def test_a_bounded_classifier_stays_strictly_prequential_whatever_the_chunks(cuts: list[int]) -> None:
    loop = SGTClassifier(**SMALL, max_bytes=budget_of("classifier"))
    expected = []
    for x, label in zip(_RECORDS, _LABELS, strict=True):
        expected.append(loop.predict_proba_one(x))
        loop.learn_one(x, label)
    model = SGTClassifier(**SMALL, max_bytes=budget_of("classifier"))
    rows = []
    for part in batches(N, cuts):
        P = model.predict_learn_many(_RECORDS[part], _LABELS[part])
        rows.extend({c: P[i, j] for j, c in enumerate(model.classes_)} for i in range(P.shape[0]))
    for got, want in zip(rows, expected, strict=True):
        assert {c: p for c, p in got.items() if c in want} == want


@PROPERTY
@given(cuts=cut_points(N))
def test_any_batching_gives_a_byte_identical_bounded_boosted_classifier(cuts: list[int]) -> None:
    model = BoostedClassifier(**SMALL, max_bytes=budget_of("boosted"))
    for part in batches(1000, [c for c in cuts if c < 1000]):
        model.learn_many(_RECORDS[part], _LABELS[part])
    assert model.to_bytes() == loop_bytes("boosted")


@pytest.mark.parametrize(
    ("make", "n", "period", "budget", "used"),
    [
        (lambda b: SGTClassifier(max_bytes=b), 200_000, 20_000, 256 * 1024, 0.5),
        (
            lambda b: SGTClassifier(proba="tree", leaf_model="constant", max_bytes=b),
            200_000,
            20_000,
            256 * 1024,
            0.5,
        ),
        (lambda b: BoostedClassifier(max_bytes=b), 30_000, 5_000, 256 * 1024, 0.15),
        (lambda b: AdaptiveSGTClassifier(max_bytes=b), 60_000, 10_000, 128 * 1024, 0.25),
        # (the leaves' naive Bayes, whose cells the budget does not bound, is off within one)
        (lambda b: SGTClassifier(max_bytes=b, leaf_bayes=True), 200_000, 20_000, 256 * 1024, 0.5),
    ],
    ids=["classifier", "constant-leaves", "boosted", "adaptive", "leaf-bayes"],
)
def test_a_small_budget_holds_on_a_long_drifting_stream(
    make: Callable[[int | None], Any], n: int, period: int, budget: int, used: float
) -> None:
    """nbytes (what the worker's sgt_model_bytes reports) never exceeds the budget after any batch, where
    the unbounded model grows past it; the bounded model still learns (its accuracy stays close).

    An ensemble keeps half of its budget for a background ensemble, which may start at any drift
    point, and shares it out between its members: it uses less of it (`used`, the share that the
    largest size reaches at least)."""
    X, y = sea(n, period)
    bounded, unbounded = make(budget), make(None)
    hits = {"bounded": 0, "unbounded": 0}
    most = 0
    for start in range(0, n, 2000):
        part = slice(start, start + 2000)
        for name, model in (("bounded", bounded), ("unbounded", unbounded)):
            proba = model.predict_learn_many(X[part], y[part].tolist())
            hits[name] += int((np.asarray(model.classes_)[proba.argmax(axis=1)] == y[part]).sum())
        most = max(most, bounded.nbytes)
        assert bounded.nbytes <= budget
    assert unbounded.nbytes > 2 * budget  # the budget binds
    assert bounded.n_inactive > 0 and unbounded.n_inactive == 0
    assert most > used * budget  # the budget is used, not left idle
    assert hits["bounded"] / n > hits["unbounded"] / n - 0.03


def test_inactive_leaves_still_learn_their_values() -> None:
    """An inactive leaf holds no split statistics and never splits, but its value still moves."""
    X, y = sea(60_000, 10_000)
    model = SGTRegressor(leaf_model="constant", max_bytes=40_000)
    model.learn_many(X[:20_000], y[:20_000].astype(float))
    tree = model._trees[0]
    inactive = [int(tree.slot_node[s]) for s in range(tree.n_slots) if not tree.active[s]]
    assert inactive and all(tree.stats[int(tree.slot[node])].size == 0 for node in inactive)
    before = tree.value[inactive].copy()
    nodes = model.n_nodes
    model.learn_many(X[20_000:], y[20_000:].astype(float))
    tree = model._trees[0]
    assert not (tree.value[inactive] == before).all()
    assert all(not tree.active[int(tree.slot[node])] for node in inactive if tree.feature[node] < 0)
    assert all(tree.feature[node] < 0 for node in inactive)  # none split
    assert model.n_nodes >= nodes


def test_the_budget_is_saved_and_unbounded_models_keep_their_bytes() -> None:
    X, y = sea(20_000, 5_000)
    unbounded = SGTClassifier()
    unbounded.learn_many(X, y.tolist())
    saved = decode(unbounded.to_bytes())
    assert "max_bytes" not in saved.header["params"]
    assert not any(name.endswith((".active", ".promise")) for name in saved.arrays)
    assert SGTClassifier.from_bytes(unbounded.to_bytes()).max_bytes is None
    bounded = SGTClassifier(max_bytes=150_000)
    bounded.learn_many(X, y.tolist())
    blob = bounded.to_bytes()
    saved = decode(blob)
    assert saved.header["params"]["max_bytes"] == 150_000
    assert saved.arrays["t0.active"].dtype == np.int32 and not saved.arrays["t0.active"].all()
    restored = load(blob)
    assert restored.max_bytes == 150_000 and restored.n_inactive == bounded.n_inactive > 0
    assert restored.nbytes <= 150_000 and restored.to_bytes() == blob
    assert restored._trees[0].budget_bytes() == bounded._trees[0].budget_bytes()
    assert restored.get_params() == bounded.get_params()


def test_a_corrupted_budget_state_is_refused() -> None:
    X, y = sea(20_000, 5_000)
    bounded = SGTClassifier(max_bytes=150_000)
    bounded.learn_many(X, y.tolist())
    saved = decode(bounded.to_bytes())
    for name, bad in (("t0.active", lambda a: a + 2), ("t0.promise", lambda a: a[:-1])):
        arrays = dict(saved.arrays)
        arrays[name] = bad(arrays[name])
        with pytest.raises(SerializationError):
            SGTClassifier.from_bytes(encode(saved.header, list(arrays.items())))
    # a slot marked inactive that holds statistics
    arrays = dict(saved.arrays)
    arrays["t0.active"] = np.zeros_like(arrays["t0.active"])
    with pytest.raises(SerializationError, match="inactive slot holds statistics"):
        SGTClassifier.from_bytes(encode(saved.header, list(arrays.items())))


@pytest.mark.parametrize("cls", list(MODEL_TYPES.values()), ids=list(MODEL_TYPES))
def test_every_model_takes_the_budget_and_refuses_bad_values_by_name(cls: type) -> None:
    assert cls().max_bytes is None and cls(max_bytes=1 << 20).max_bytes == 1 << 20
    assert cls(max_bytes=1 << 20).get_params()["max_bytes"] == 1 << 20
    for bad in (0, -1, 1.5, True, "1000000", math.inf):
        with pytest.raises(ValueError, match=r"max_bytes must be None \(unbounded\) or an integer >= 1"):
            cls(max_bytes=bad)


def test_a_bounded_mil_classifier_stays_within_its_budget_and_restores() -> None:
    rng = np.random.default_rng(3)
    bags = [rng.uniform(0, 1, size=(4, 3)) for _ in range(3000)]
    labels = [int((bag[:, 0] > 0.8).any()) for bag in bags]
    model = MILClassifier(grace_period=20, max_bytes=20_000)
    model.learn_many(bags, labels)
    assert model.nbytes <= 20_000 and model.n_inactive > 0
    assert MILClassifier.from_bytes(model.to_bytes()).to_bytes() == model.to_bytes()


def test_ensembles_started_after_a_drift_keep_to_the_budget() -> None:
    """A multiclass ensemble's background and replacing members (one multi-output tree each) get
    their share of the budget as the first members do."""
    X, y = multiclass_stream(20_000, seed=3)
    y = np.where(np.arange(20_000) < 10_000, y, (y + 1) % 3)  # the classes rotate halfway
    budget = 400_000
    model = BoostedClassifier(max_bytes=budget)
    for start in range(0, 20_000, 500):
        model.learn_many(X[start : start + 500], y[start : start + 500].tolist())
        assert model.nbytes <= budget
        assert all(tree.cap == budget // (2 * len(model._members)) for tree in model._trees)
    assert model.n_drifts >= 1


@pytest.mark.parametrize("cls", [SGTClassifier, BoostedClassifier])
def test_a_bad_label_in_a_batch_that_widens_the_layout_changes_nothing(cls: type) -> None:
    """A batch learned in parts (the layout widens inside it) is still checked whole before any part."""
    model = cls(**SMALL, max_bytes=budget_of("classifier"))
    model.learn_many(_RECORDS[:300], _LABELS[:300])
    before = model.to_bytes()
    labels: list[Any] = list(_LABELS[300:1200])
    labels[-1] = [1]  # not a JSON scalar
    with pytest.raises(ValueError, match="class label"):
        model.learn_many(_RECORDS[300:1200], labels)
    assert model.to_bytes() == before


@pytest.mark.parametrize("leaf_model", ["constant", "linear", "adaptive"])
def test_the_budget_counts_every_array_a_node_has_whatever_its_leaf_model(leaf_model: str) -> None:
    """`budget_bytes` (what the cap holds) is `nbytes` (what the model reports) once every pending
    block has its longest rows (grace_period 40: from the start): an adaptive leaf's anchor, tally and
    serving count per node. Fails without them (nbytes past the budget by 20 bytes a node)."""
    X, y = step_regression_stream(2000, seed=81)
    model = SGTRegressor(**SMALL, leaf_model=leaf_model)
    model.learn_many(X, y.tolist())
    tree = model._trees[0]
    assert tree.pending_g.shape[1] == SMALL["grace_period"] and tree.n_nodes > 1
    assert tree.nbytes() == tree.budget_bytes()


def test_inactive_adaptive_leaves_still_choose_between_their_linear_term_and_their_constant() -> None:
    """An adaptive leaf's choice reads only its block (g, h and codes), which an inactive leaf keeps:
    it goes on tallying and switching, both ways; falling back to its constant resets its total, the
    only statistics it holds. Here the budget holds no split at all: the root, inactive, falls back
    when an outlier meets its linear term and returns to it."""
    make, X, y = CASES["regressor-outliers"]
    model = make(budget_of("regressor-outliers"))
    switches = set()
    for x, target in zip(X, y, strict=True):
        tree = model._trees[0]
        served = (int(tree.serving[0]), float(tree.tally[0]))
        model.learn_one(x, target)
        tree = model._trees[0]
        if not tree.active[0] and int(tree.serving[0]) != served[0]:
            switches.add((served[0], int(tree.serving[0])))
            if served[0] == 1:  # a fallback: its total starts again
                assert tree.merged_count(0) == 0
        assert tree.stats[0].size == 0 or tree.active[0]
    assert switches == {(0, 1), (1, 0)}
    assert model.n_nodes == 1 and model.n_inactive == 1
