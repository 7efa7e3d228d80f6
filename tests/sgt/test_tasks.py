"""The learning tasks: regression, binary and multiclass classification (softmax committee of K-1
trees, labels of any JSON scalar type, classes first seen mid-stream), multi-instance learning
(streaming and multi-epoch batch) and custom losses through ``sgt.losses``.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from sgt import MILClassifier, SGTClassifier, SGTRegressor, losses
from tests.sgt.sgt_testkit import (
    accuracy,
    as_dicts,
    multiclass_stream,
    proba_to_labels,
    step_regression_stream,
    structure,
    threshold_stream,
)

# constant leaves: these tests pin the paper's trees (with linear leaves the step function below takes
# 31 splits instead of 3 to 8, as the linear terms absorb part of each step)
SMALL = {"grace_period": 100, "warm_up": 100, "leaf_model": "constant"}


def test_regression_learns_a_step_function() -> None:
    X, y = step_regression_stream(6000, seed=40)
    model = SGTRegressor(**SMALL)
    pred = model.predict_learn_many(X, y)
    assert pred.shape == (6000,) and pred.dtype == np.float64
    assert np.mean(np.abs(pred[3000:] - y[3000:])) < 0.3
    assert 3 <= model.n_splits <= 8


def test_regression_rejects_non_finite_targets() -> None:
    model = SGTRegressor()
    model.learn_one({"a": 1.0}, 2.0)
    blob = model.to_bytes()
    for bad in (math.nan, math.inf, -math.inf):
        with pytest.raises(ValueError):
            model.learn_one({"a": 1.0}, bad)
        with pytest.raises(ValueError):
            model.learn_many([{"a": 1.0}, {"a": 2.0}], [1.0, bad])
    assert model.to_bytes() == blob


def test_regression_base_score_is_the_first_target() -> None:
    model = SGTRegressor()
    assert model.predict_one({"a": 1.0}) == 0.0
    model.learn_one({"a": 1.0}, 42.5)
    assert model.predict_one({"a": 1.0}) == 42.5
    fixed = SGTRegressor(base_score=3.0)
    fixed.learn_one({"a": 1.0}, 42.5)
    assert fixed.predict_one({"a": 1.0}) == 3.0


def test_regression_with_a_large_offset_builds_the_same_tree() -> None:
    X, y = step_regression_stream(5000, seed=41)
    near_zero, far = SGTRegressor(**SMALL), SGTRegressor(**SMALL)
    near_zero.learn_many(X, y)
    far.learn_many(X, y + 1e6)
    assert near_zero.n_splits >= 3
    assert [structure(t) for t in far.to_dict()["trees"]] == [
        structure(t) for t in near_zero.to_dict()["trees"]
    ]
    np.testing.assert_allclose(far.predict_many(X[:200]) - 1e6, near_zero.predict_many(X[:200]), atol=1e-6)


@pytest.mark.parametrize(
    "labels",
    [(False, True), (0, 1), ("no", "yes"), (0.5, 2.5), (7, "seven")],
    ids=["bool", "int", "str", "float", "mixed"],
)
def test_binary_labels_of_any_json_scalar_type(labels: tuple) -> None:
    X, y = threshold_stream(3000, seed=42)
    reference = SGTClassifier(**SMALL)
    reference.learn_many(X, y)
    model = SGTClassifier(**SMALL)
    mapped = [labels[int(v)] for v in y]
    P = model.predict_learn_many(X, mapped)
    assert model.classes_ == [mapped[0], labels[1 - labels.index(mapped[0])]]
    assert model.to_dict()["classes"] == model.classes_
    assert len(model.to_dict()["trees"]) == 1
    assert model.to_dict()["trees"] == reference.to_dict()["trees"]
    assert model.predict_one([0.9, 1.0]) == labels[1]
    assert model.predict_one([0.1, 1.0]) == labels[0]
    assert accuracy(np.array(proba_to_labels(P[1500:], model.classes_), dtype=object), mapped[1500:]) > 0.97
    for x in ([0.9, 1.0], [0.1, 1.0], [0.5, 500.0]):
        mine, theirs = model.predict_proba_one(x), reference.predict_proba_one(x)
        assert [mine[c] for c in model.classes_] == [theirs[c] for c in reference.classes_]


def test_predict_before_any_label_and_with_one_class() -> None:
    model = SGTClassifier()
    assert model.predict_one({"a": 1.0}) is None
    assert model.predict_proba_one({"a": 1.0}) == {}
    assert model.predict_proba_many([{"a": 1.0}]).shape == (1, 0)
    for i in range(300):
        model.learn_one({"a": float(i)}, "only")
    assert model.classes_ == ["only"]
    assert model.predict_one({"a": 3.0}) == "only"
    assert model.predict_proba_one({"a": 3.0}) == {"only": 1.0}
    np.testing.assert_array_equal(model.predict_proba_many([{"a": 1.0}, {}]), [[1.0], [1.0]])


@pytest.mark.parametrize("label", [None, math.nan, math.inf, [1], {"a": 1}, (1, 2)], ids=repr)
def test_labels_must_be_json_scalars(label: object) -> None:
    model = SGTClassifier()
    with pytest.raises(ValueError):
        model.learn_one({"a": 1.0}, label)
    if label is not None:  # None in a batch means "predict only"
        with pytest.raises(ValueError):
            model.learn_many([{"a": 1.0}, {"a": 2.0}], [0, label])
    assert model.n_seen == 0
    assert model.classes_ == []


def test_multiclass_is_a_committee_of_k_minus_1_trees() -> None:
    X, y = multiclass_stream(8000, seed=43)
    labels = np.array(["low", "mid", "high"], dtype=object)[y]
    model = SGTClassifier(**SMALL)
    P = model.predict_learn_many(X, labels)
    assert model.classes_ == list(dict.fromkeys(labels))
    assert len(model.to_dict()["trees"]) == 2
    assert P.shape == (8000, 3)
    np.testing.assert_allclose(P.sum(axis=1)[1:], 1.0, atol=1e-12)
    assert accuracy(np.array(proba_to_labels(P[4000:], model.classes_), dtype=object), labels[4000:]) > 0.95
    for x0, label in [(0.1, "low"), (0.5, "mid"), (0.9, "high")]:
        assert model.predict_one([x0, 0.5]) == label


def test_a_class_first_seen_mid_stream_adds_a_tree_without_resetting() -> None:
    X, y = threshold_stream(6000, seed=44)
    labels = [int(v) for v in y]
    for i in range(3000, 6000):
        if X[i, 0] > 0.8:
            labels[i] = 2
    model = SGTClassifier(**SMALL)
    first = labels.index(2)
    model.learn_many(X[:first], labels[:first])
    before = model.to_dict()
    splits = model.n_splits
    assert len(before["trees"]) == 1 and splits >= 1
    model.learn_one(X[first], 2)
    after = model.to_dict()
    assert model.classes_ == [labels[0], 1 - labels[0], 2]
    assert len(after["trees"]) == 2
    assert structure(after["trees"][0]) == structure(before["trees"][0])
    assert model.n_splits == splits
    P = model.predict_learn_many(X[first + 1 :], labels[first + 1 :])
    assert P.shape == (6000 - first - 1, 3)
    pred = proba_to_labels(P[-1500:], model.classes_)
    assert accuracy(np.array(pred), np.array(labels[-1500:])) > 0.95


def test_predict_learn_many_gives_zero_to_classes_not_seen_yet() -> None:
    X, y = multiclass_stream(600, seed=45)
    model = SGTClassifier(**SMALL)
    P = model.predict_learn_many(X, y)
    first = {c: int(np.argmax(y == c)) for c in model.classes_}
    for column, c in enumerate(model.classes_):
        assert np.all(P[: first[c] + 1, column] == 0.0) or first[c] == 0
    assert np.all(P[0] == 0.0)
    np.testing.assert_allclose(P[1:].sum(axis=1), 1.0, atol=1e-12)


def test_rows_without_a_label_are_only_predicted() -> None:
    X, y = threshold_stream(2000, seed=46)
    labels: list = [bool(v) for v in y]
    for i in range(0, 2000, 4):
        labels[i] = None
    both = SGTClassifier(**SMALL)
    P = both.predict_learn_many(X, labels)
    keep = [i for i in range(2000) if labels[i] is not None]
    learnt = SGTClassifier(**SMALL)
    learnt.learn_many(X[keep], [labels[i] for i in keep])
    assert both.to_bytes() == learnt.to_bytes()
    assert both.n_seen == len(keep)
    loop = SGTClassifier(**SMALL)
    for i in range(2000):
        p = loop.predict_proba_one(X[i])
        np.testing.assert_array_equal(P[i, : len(p)], list(p.values()))
        if labels[i] is not None:
            loop.learn_one(X[i], labels[i])


def _bags(n: int, seed: int) -> tuple[list[list[dict]], list[int]]:
    """Bags of 1-6 instances; a bag is positive iff one of its instances has x0 > 0.75."""
    rng = np.random.default_rng(seed)
    bags, labels = [], []
    for _ in range(n):
        X = rng.uniform(0.0, 1.0, (int(rng.integers(1, 7)), 2))
        bags.append(as_dicts(X))
        labels.append(int(np.any(X[:, 0] > 0.75)))
    return bags, labels


def test_mil_streaming_learns_the_witness_concept() -> None:
    bags, labels = _bags(4000, seed=47)
    model = MILClassifier(**SMALL)
    correct = []
    for bag, label in zip(bags, labels, strict=True):
        correct.append(model.predict_one(bag) == label)
        model.learn_one(bag, label)
    assert np.mean(correct[2000:]) > 0.85
    assert model.n_splits >= 1


def test_mil_bag_probability_is_that_of_its_top_instance() -> None:
    bags, labels = _bags(1500, seed=48)
    model = MILClassifier(**SMALL)
    for bag, label in zip(bags, labels, strict=True):
        model.learn_one(bag, label)
    for bag in bags[:50]:
        p_bag = model.predict_proba_one(bag)
        p_best = max((model.predict_proba_one([x]) for x in bag), key=lambda d: d[1])
        assert p_bag == p_best


def test_mil_batch_fit_over_epochs() -> None:
    train, train_labels = _bags(300, seed=49)
    test, test_labels = _bags(300, seed=50)
    model = MILClassifier(grace_period=50, warm_up=100)
    model.fit(train, train_labels, epochs=20)
    one_epoch = MILClassifier(grace_period=50, warm_up=100)
    one_epoch.fit(train, train_labels, epochs=1)
    assert model.n_seen > one_epoch.n_seen
    assert accuracy(np.array([model.predict_one(b) for b in test]), np.array(test_labels)) > 0.8


def test_mil_rejects_an_empty_bag() -> None:
    model = MILClassifier()
    with pytest.raises(ValueError):
        model.learn_one([], 1)


def test_poisson_regression_for_counts() -> None:
    rng = np.random.default_rng(51)
    X = rng.uniform(0.0, 1.0, (8000, 2))
    rate = np.where(X[:, 0] > 0.5, 6.0, 1.5)
    y = rng.poisson(rate).astype(float)
    model = SGTRegressor(loss=losses.Poisson(), **SMALL)
    model.learn_many(X, y)
    low, high = model.predict_many(np.array([[0.2, 0.5], [0.8, 0.5]]))
    assert low == pytest.approx(1.5, rel=0.25)  # measured 1.70
    assert high == pytest.approx(6.0, rel=0.1)  # measured 6.08
    assert np.all(model.predict_many(X) > 0.0)
    with pytest.raises(ValueError):
        model.learn_one([0.5, 0.5], -1.0)


class HalfSquaredError(losses.Loss):
    """A user-defined loss identical to SquaredError, to show that any Loss subclass plugs in."""

    name = "test_half_squared_error"

    def gradient_hessian(self, y: np.ndarray, raw: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return raw - y, np.ones_like(raw)

    def base_score(self, y: float) -> float:
        return float(y)


def test_a_custom_loss_plugs_in() -> None:
    X, y = step_regression_stream(4000, seed=52)
    custom, builtin = SGTRegressor(loss=HalfSquaredError(), **SMALL), SGTRegressor(**SMALL)
    custom.learn_many(X, y)
    builtin.learn_many(X, y)
    assert custom.n_splits >= 3
    assert custom.to_dict()["trees"] == builtin.to_dict()["trees"]
    np.testing.assert_array_equal(custom.predict_many(X[:100]), builtin.predict_many(X[:100]))


def test_labels_equal_in_python_are_one_class() -> None:
    """True == 1 == 1.0 as dict keys, so they must be one class for {label: p} results to add up."""
    model = SGTClassifier(grace_period=10, warm_up=5)
    labels = [True, 1, "1", 1.5, 1.0]
    for i in range(120):
        model.learn_one({"a": float(i % 7)}, labels[i % 5])
    assert model.classes_ == [True, "1", 1.5]
    proba = model.predict_proba_one({"a": 1.0})
    assert len(proba) == len(model.classes_)
    assert sum(proba.values()) == pytest.approx(1.0)


def test_labels_keep_their_json_type_through_serialisation() -> None:
    model = SGTClassifier(grace_period=10, warm_up=5)
    labels = ["1", 1.5, 2, False]
    for i in range(120):
        model.learn_one({"a": float(i % 7)}, labels[i % 4])
    restored = type(model).from_bytes(model.to_bytes())
    assert restored.classes_ == labels
    assert [type(c) for c in restored.classes_] == [str, float, int, bool]


def test_mil_fit_with_a_seed_is_reproducible() -> None:
    bags, labels = _bags(120, seed=53)
    a, b, c = (MILClassifier(grace_period=20, warm_up=50) for _ in range(3))
    a.fit(bags, labels, epochs=3, seed=7)
    b.fit(bags, labels, epochs=3, seed=7)
    c.fit(bags, labels, epochs=3)
    assert a.to_bytes() == b.to_bytes()
    assert a.n_seen == c.n_seen == 3 * 120


def test_mil_rejects_labels_other_than_0_and_1() -> None:
    model = MILClassifier()
    for bad in (2, "yes", None, 0.5):
        with pytest.raises(ValueError):
            model.learn_one([{"a": 1.0}], bad)
    assert model.n_seen == 0


def test_regressor_rows_without_a_target_are_only_predicted() -> None:
    X, y = step_regression_stream(1500, seed=54)
    targets: list = [float(v) for v in y]
    for i in range(0, 1500, 3):
        targets[i] = None
    both = SGTRegressor(**SMALL)
    pred = both.predict_learn_many(X, targets)
    keep = [i for i in range(1500) if targets[i] is not None]
    learnt = SGTRegressor(**SMALL)
    learnt.learn_many(X[keep], [targets[i] for i in keep])
    assert both.to_bytes() == learnt.to_bytes()
    loop = SGTRegressor(**SMALL)
    expected = []
    for row, target in zip(X, targets, strict=True):
        expected.append(loop.predict_one(row))
        if target is not None:
            loop.learn_one(row, target)
    np.testing.assert_array_equal(pred, expected)
