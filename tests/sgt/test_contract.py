"""Generic estimator contract, run over every estimator of the library (in the spirit of River's checks).

Each case is an estimator plus a small seeded stream chosen so that several split attempts, leaf-value
updates and splits happen (grace period 50, warm-up 100). The checks: predicting before learning,
inputs and constructor parameters left untouched, no aliasing of caller data, emerging, disappearing
and reordered features, every learning path giving a byte-identical model, exact serialisation round
trips and independent clones, the scikit-learn aliases, and hyperparameter validation.
"""

from __future__ import annotations

import copy
import functools
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest

import sgt
from sgt import (
    DEFAULTS,
    PAPER_DEFAULTS,
    BoostedClassifier,
    BoostedRegressor,
    MILClassifier,
    SGTClassifier,
    SGTRegressor,
    losses,
)
from tests.sgt.sgt_testkit import (
    NO_SIDE_MODELS,
    as_dicts,
    mixed_records,
    multiclass_stream,
    step_regression_stream,
    threshold_stream,
)

# grace_start = grace_period: constant blocks, so that the update path is exercised (with young
# leaves' short first blocks these streams are learned by splits alone)
SMALL = {"grace_period": 50, "grace_start": 50, "warm_up": 100, "leaf_model": "constant"}
BOOSTED = {"n_members": 3, "poisson_rate": 1.0, "drift_threshold": None}  # drifts: test_boosted.py
# the members alone (NO_SIDE_MODELS) on the binary and three-class streams: the default side models
# take the whole contract on the mixed records (nominal, missing and absent features) and on regression
MEMBERS = {**BOOSTED, **NO_SIDE_MODELS}


def _binary() -> tuple[list, list]:
    X, y = threshold_stream(1500, seed=1)
    return as_dicts(X), [int(v) for v in y]


def _multiclass() -> tuple[list, list]:
    X, y = multiclass_stream(1500, seed=2)
    return as_dicts(X), [f"class-{v}" for v in y]


def _mixed() -> tuple[list, list]:
    return mixed_records(1500, seed=3)


def _regression() -> tuple[list, list]:
    X, y = step_regression_stream(1500, seed=4)
    return as_dicts(X), [float(v) for v in y]


def _counts() -> tuple[list, list]:
    rng = np.random.default_rng(5)
    X = rng.uniform(0.0, 1.0, (1500, 2))
    y = rng.poisson(np.exp(0.5 + 1.5 * (X[:, 0] > 0.5)))
    return as_dicts(X), [float(v) for v in y]


def _bags() -> tuple[list, list]:
    rng = np.random.default_rng(6)
    bags, labels = [], []
    for _ in range(400):
        X = rng.uniform(0.0, 1.0, (int(rng.integers(1, 6)), 2))
        bags.append(as_dicts(X))
        labels.append(int(np.any(X[:, 0] > 0.8)))
    return bags, labels


@dataclass(frozen=True)
class Case:
    """One estimator under test: how to build it and the stream it learns."""

    name: str
    make: Callable[..., Any]
    data: Callable[[], tuple[list, list]]
    classifier: bool
    mil: bool = False

    def model(self, **params: Any) -> Any:
        return self.make(**{**SMALL, **params})


CASES = [
    Case("binary", SGTClassifier, _binary, classifier=True),
    Case("multiclass", SGTClassifier, _multiclass, classifier=True),
    Case("mixed-features", SGTClassifier, _mixed, classifier=True),
    Case("regression", SGTRegressor, _regression, classifier=False),
    Case("poisson", lambda **kw: SGTRegressor(loss=losses.Poisson(), **kw), _counts, classifier=False),
    Case("mil", MILClassifier, _bags, classifier=True, mil=True),
    # small ensembles with bagging
    Case("boosted-binary", lambda **kw: BoostedClassifier(**MEMBERS, **kw), _binary, classifier=True),
    Case("boosted-multiclass", lambda **kw: BoostedClassifier(**MEMBERS, **kw), _multiclass, classifier=True),
    Case("boosted-mixed", lambda **kw: BoostedClassifier(**BOOSTED, **kw), _mixed, classifier=True),
    Case("boosted-regression", lambda **kw: BoostedRegressor(**BOOSTED, **kw), _regression, classifier=False),
    Case(
        "boosted-poisson",
        lambda **kw: BoostedRegressor(loss=losses.Poisson(), **BOOSTED, **kw),
        _counts,
        classifier=False,
    ),
]
FLAT = [c for c in CASES if not c.mil]


def by_name(cases: list[Case]) -> Any:
    return pytest.mark.parametrize("case", cases, ids=[c.name for c in cases])


def learn(model: Any, records: list, targets: list) -> Any:
    for x, y in zip(records, targets, strict=True):
        model.learn_one(x, y)
    return model


def outputs(case: Case, model: Any, records: list) -> list:
    """What the model says about each record: class probabilities or the regression prediction."""
    if case.classifier:
        return [model.predict_proba_one(x) for x in records]
    return [model.predict_one(x) for x in records]


def probe(records: list) -> list:
    """A fixed sample of records to compare predictions on."""
    return records[::37]


@dataclass(frozen=True)
class Learned:
    """What a case's model saves after learning its whole stream one record at a time, and what it
    then says about the probe records."""

    saved: bytes
    outputs: list


@functools.cache
def looped(case: Case) -> Learned:
    """The one-record loop over a case's stream, learned once per process: the tests that compare
    another way of learning (batches, shuffled keys, a second model) with the loop share it."""
    records, targets = case.data()
    model = learn(case.model(), records, targets)
    return Learned(bytes(model.to_bytes()), outputs(case, model, probe(records)))


@by_name(CASES)
def test_predict_before_learning(case: Case) -> None:
    records, _ = case.data()
    model = case.model()
    if case.mil:  # the two bag classes are known from the start
        assert model.predict_proba_one(records[0]) == {0: 0.5, 1: 0.5}
        assert model.predict_one(records[0]) == 0
    elif case.classifier:
        assert model.predict_proba_one(records[0]) == {}
        assert model.predict_one(records[0]) is None
    else:
        assert math.isfinite(model.predict_one(records[0]))
    assert model.n_seen == 0
    assert model.version == 0
    assert model.n_nodes == model.n_leaves


@by_name(FLAT)
def test_predict_many_before_learning(case: Case) -> None:
    records, _ = case.data()
    pred = case.model().predict_many(records[:5])
    assert len(pred) == 5


@by_name(CASES)
def test_learning_and_predicting_leave_inputs_untouched(case: Case) -> None:
    records, targets = case.data()
    records, targets = records[:400], targets[:400]
    before = repr((records, targets))
    model = learn(case.model(), records, targets)
    outputs(case, model, records)
    if not case.mil:
        model.learn_many(records, targets)
        model.predict_many(records)
        model.predict_learn_many(records, targets)
    assert repr((records, targets)) == before


@by_name(FLAT)
def test_array_inputs_are_not_modified(case: Case) -> None:
    X = np.random.default_rng(0).uniform(0.0, 1.0, (300, 2))
    X[::7, 1] = np.nan
    y = (X[:, 0] > 0.5).astype(int) if case.classifier else X[:, 0] * 3.0
    X_before, y_before = X.copy(), y.copy()
    model = case.model()
    model.learn_many(X, y)
    model.predict_many(X)
    model.predict_learn_many(X, y)
    np.testing.assert_array_equal(X, X_before)
    np.testing.assert_array_equal(y, y_before)


@by_name(CASES)
def test_model_keeps_no_reference_to_caller_records(case: Case) -> None:
    records, targets = case.data()
    records, targets = records[:600], targets[:600]
    reference = learn(case.model(), copy.deepcopy(records), targets)
    model = case.model()
    for x, y in zip(records, targets, strict=True):
        model.learn_one(x, y)
        scramble(x)
    assert model.to_bytes() == reference.to_bytes()


def scramble(record: Any) -> None:
    """Overwrite a caller's record in place (a bag is a list of records)."""
    if isinstance(record, list):
        for x in record:
            scramble(x)
        record.append({"zzz": 1.0})
        return
    for key in list(record):
        record[key] = "changed" if isinstance(record[key], str) else -1e9
    record["zzz"] = 1.0


@by_name(FLAT)
def test_constructor_parameters_are_not_mutated(case: Case) -> None:
    records, targets = case.data()
    nominal = ["colour"]
    model = case.model(nominal=nominal)
    params_before = model.to_dict()["params"]
    learn(model, records[:600], targets[:600])
    learn(model, [{**x, "late": "text"} for x in records[600:700]], targets[600:700])
    assert nominal == ["colour"]
    assert model.to_dict()["params"] == params_before
    assert list(model.nominal) == ["colour"]


@by_name(FLAT)
def test_emerging_features(case: Case) -> None:
    records, targets = case.data()
    model = case.model()
    head = [{k: v for k, v in x.items() if k not in ("x1", "colour")} for x in records[:500]]
    learn(model, head, targets[:500])
    learn(model, records[500:], targets[500:])
    names = [f["name"] for f in model.to_dict()["features"]]
    assert set(names) == set().union(*(x.keys() for x in records))
    for out in outputs(case, model, probe(records)):
        assert_valid_output(case, out)


@by_name(FLAT)
def test_disappearing_features(case: Case) -> None:
    records, targets = case.data()
    model = learn(case.model(), records[:900], targets[:900])
    tail = [{k: v for k, v in x.items() if k in ("x1", "colour")} for x in records[900:]]
    learn(model, tail, targets[900:])
    for out in outputs(case, model, [*tail[::20], {}]):
        assert_valid_output(case, out)


@by_name(FLAT)
def test_key_order_does_not_matter(case: Case) -> None:
    records, targets = case.data()
    rng = np.random.default_rng(0)
    shuffled = [records[0]]
    for x in records[1:]:
        keys = list(x)
        rng.shuffle(keys)
        shuffled.append({k: x[k] for k in keys})
    b = learn(case.model(), shuffled, targets)
    assert b.to_bytes() == looped(case).saved
    assert outputs(case, b, probe(shuffled)) == looped(case).outputs


def assert_valid_output(case: Case, out: Any) -> None:
    if case.classifier:
        assert all(0.0 <= p <= 1.0 for p in out.values())
        assert sum(out.values()) == pytest.approx(1.0, abs=1e-9)
    else:
        assert math.isfinite(out)


@by_name(FLAT)
def test_learn_many_equals_learn_one_loop(case: Case) -> None:
    records, targets = case.data()
    batch = case.model()
    batch.learn_many(records, targets)
    assert batch.to_bytes() == looped(case).saved
    assert batch.n_updates > 0 and batch.n_seen == len(records)
    assert outputs(case, batch, probe(records)) == looped(case).outputs


@by_name(FLAT)
def test_predict_learn_many_gives_the_same_model(case: Case) -> None:
    records, targets = case.data()
    both = case.model()
    both.predict_learn_many(records[:700], targets[:700])
    both.predict_learn_many(records[700:], targets[700:])
    assert both.to_bytes() == looped(case).saved


@by_name(FLAT)
def test_predict_many_equals_predict_one(case: Case) -> None:
    records, targets = case.data()
    model = case.model()
    model.learn_many(records, targets)  # (the loop's model: test_learn_many_equals_learn_one_loop)
    sample = probe(records)
    pred = model.predict_many(sample)
    assert len(pred) == len(sample)
    assert list(pred) == [model.predict_one(x) for x in sample]
    if case.classifier:
        proba = model.predict_proba_many(sample)
        assert proba.shape == (len(sample), len(model.classes_))
        expected = [[d.get(c, 0.0) for c in model.classes_] for d in outputs(case, model, sample)]
        np.testing.assert_allclose(proba, expected, rtol=1e-12, atol=1e-15)


@by_name(FLAT)
def test_scikit_learn_aliases(case: Case) -> None:
    records, targets = case.data()
    a, b = case.model(), case.model()
    a.learn_many(records, targets)
    b.partial_fit(records, targets)
    assert a.to_bytes() == b.to_bytes()
    assert list(b.predict(records[:50])) == list(a.predict_many(records[:50]))
    if case.classifier:
        np.testing.assert_array_equal(b.predict_proba(records[:50]), a.predict_proba_many(records[:50]))


@by_name(CASES)
def test_same_data_gives_the_same_bytes(case: Case) -> None:
    records, targets = case.data()
    assert learn(case.model(), records, targets).to_bytes() == looped(case).saved


@by_name(CASES)
def test_round_trip_then_identical_behaviour(case: Case) -> None:
    records, targets = case.data()
    half = len(records) // 2
    model = learn(case.model(), records[:half], targets[:half])
    restored = type(model).from_bytes(model.to_bytes())
    assert type(restored) is type(model)
    assert restored.to_bytes() == model.to_bytes()
    assert outputs(case, restored, probe(records)) == outputs(case, model, probe(records))
    learn(model, records[half:], targets[half:])
    learn(restored, records[half:], targets[half:])
    assert restored.to_bytes() == model.to_bytes()
    assert outputs(case, restored, probe(records)) == outputs(case, model, probe(records))


@by_name(CASES)
def test_clone_by_from_bytes_is_independent(case: Case) -> None:
    records, targets = case.data()
    half = len(records) // 2
    model = learn(case.model(), records[:half], targets[:half])
    blob = model.to_bytes()
    clone = sgt.load(blob)
    learn(clone, records[half:], targets[half:])
    assert clone.n_seen == len(records)
    assert model.to_bytes() == blob
    learn(model, records[half:], targets[half:])
    assert sgt.load(blob).to_bytes() == blob


@by_name(CASES)
def test_counters_are_consistent(case: Case) -> None:
    records, targets = case.data()
    model = learn(case.model(), records, targets)
    trees = model.to_dict()["trees"]
    nodes = [node for tree in trees for node in _walk(tree)]
    internal = [node for node in nodes if not node["leaf"]]
    assert model.n_seen == len(records)
    assert model.n_nodes == len(nodes)
    assert model.n_leaves == len(nodes) - len(internal)
    assert model.n_splits == len(internal)
    assert model.version == model.n_splits + model.n_updates
    assert model.depth == max(node["depth"] for node in nodes)
    assert model.nbytes > 0


def _walk(node: dict) -> list[dict]:
    return [node, *(n for child in node.get("children", ()) for n in _walk(child))]


BAD_PARAMS = [
    ("delta", 0.0),
    ("delta", 1.0),
    ("delta", -1e-3),
    ("delta", float("nan")),
    ("grace_period", 0),
    ("grace_period", -10),
    ("lambda_", -0.1),
    ("lambda_", float("nan")),
    ("gamma", -1.0),
    ("gamma", float("nan")),
    # an integer beyond the float range: numpy's isfinite raised a TypeError naming nothing
    ("lambda_", 10**400),
    ("gamma", 10**400),
    ("bins", 1),
    ("bins", 4097),
    ("warm_up", 0),
    ("max_depth", -1),
    ("max_categories", 0),
    ("max_categories", 65534),
]
ALLOWED = {
    "delta": "(0, 1)",
    "grace_period": ">= 1",
    "lambda_": ">= 0",
    "gamma": ">= 0",
    "bins": "[2, 4096]",
    "warm_up": ">= 1",
    "max_depth": ">= 0",
    "max_categories": "[1, 65533]",
}
WRONG_TYPES = [
    ("grace_period", 2.5),
    ("bins", 16.5),
    ("warm_up", 10.5),
    ("max_depth", 1.5),
    ("max_categories", True),
]
GOOD_PARAMS = [
    ("delta", 0.5),
    ("grace_period", 1),
    ("lambda_", 0.0),
    ("gamma", 0.0),
    ("bins", 2),
    ("bins", 4096),
    ("warm_up", 1),
    ("max_depth", 0),
    ("max_depth", None),
    ("max_categories", 1),
    ("max_categories", 65533),
    ("max_categories", None),
]
ESTIMATORS = [SGTClassifier, SGTRegressor, MILClassifier, BoostedClassifier, BoostedRegressor]


@pytest.mark.parametrize("estimator", ESTIMATORS, ids=lambda e: e.__name__)
@pytest.mark.parametrize(("name", "value"), BAD_PARAMS, ids=[f"{n}={v!r:.12}" for n, v in BAD_PARAMS])
def test_bad_hyperparameter_is_a_value_error_naming_it(estimator: type, name: str, value: Any) -> None:
    with pytest.raises(ValueError, match=name) as info:
        estimator(**{name: value})
    assert ALLOWED[name] in str(info.value)


@pytest.mark.parametrize("estimator", ESTIMATORS, ids=lambda e: e.__name__)
@pytest.mark.parametrize(("name", "value"), WRONG_TYPES, ids=[f"{n}={v}" for n, v in WRONG_TYPES])
def test_non_integer_count_is_rejected(estimator: type, name: str, value: Any) -> None:
    with pytest.raises((ValueError, TypeError), match=name):
        estimator(**{name: value})


@pytest.mark.parametrize(("name", "value"), GOOD_PARAMS, ids=[f"{n}={v}" for n, v in GOOD_PARAMS])
def test_boundary_hyperparameters_are_accepted_and_work(name: str, value: Any) -> None:
    X, y = step_regression_stream(400, seed=7)
    model = SGTRegressor(**{"grace_period": 50, "warm_up": 50, name: value})
    model.learn_many(X, y)
    assert np.all(np.isfinite(model.predict_many(X)))
    assert model.to_dict()["params"][name] == value


def test_defaults_are_documented_and_the_papers_are_one_argument_away() -> None:
    # our defaults differ from the paper's in delta, grace_period, gamma and grace_start (measured)
    for model in (SGTClassifier(), SGTRegressor(), MILClassifier()):
        params = model.to_dict()["params"]
        # the regressor chooses between trees of each leaf model (measured)
        own = {"leaf_model": "auto"} if isinstance(model, SGTRegressor) else {}
        assert {k: params[k] for k in DEFAULTS} == {**DEFAULTS, **own}
        assert params["max_depth"] is None
    assert DEFAULTS == {
        "delta": 1e-3,
        "grace_period": 100,
        "lambda_": 0.1,
        "gamma": 0.1,
        "bins": 64,
        "warm_up": 1000,
        "grace_start": 10,
        "leaf_model": "linear",
        "linear_lambda": 0.01,
    }
    paper = SGTClassifier(**PAPER_DEFAULTS).to_dict()["params"]
    expected = {
        "delta": 1e-7,
        "grace_period": 200,
        "lambda_": 0.1,
        "gamma": 1.0,
        "bins": 64,
        "warm_up": 1000,
        "grace_start": 200,
        "leaf_model": "constant",
    }
    assert {k: paper[k] for k in expected} == expected


@pytest.mark.parametrize("max_depth", [0, 1, 2])
def test_max_depth_is_respected(max_depth: int) -> None:
    X, y = step_regression_stream(3000, seed=8)
    model = SGTRegressor(
        grace_period=50, grace_start=50, warm_up=100, max_depth=max_depth, leaf_model="constant"
    )
    model.learn_many(X, y)
    assert model.depth <= max_depth
    assert model.n_updates > 0


def test_array_list_and_dict_inputs_give_the_same_model() -> None:
    X, y = threshold_stream(1200, seed=9)
    from_array, from_lists, from_dicts, one_by_one = (SGTClassifier(**SMALL) for _ in range(4))
    from_array.learn_many(X, y)
    from_lists.learn_many(X.tolist(), y.tolist())
    from_dicts.learn_many(as_dicts(X), y.tolist())
    for row, label in zip(X, y, strict=True):
        one_by_one.learn_one(row, bool(label))
    assert from_array.to_bytes() == from_lists.to_bytes() == from_dicts.to_bytes() == one_by_one.to_bytes()


def test_feature_names_name_array_columns() -> None:
    X, y = threshold_stream(1200, seed=10)
    named = SGTClassifier(feature_names=["size", "noise"], **SMALL)
    named.learn_many(X, y)
    dicts = SGTClassifier(**SMALL)
    dicts.learn_many(as_dicts(X, ["size", "noise"]), y)
    assert [f["name"] for f in named.to_dict()["features"]] == ["size", "noise"]
    assert named.to_dict()["trees"] == dicts.to_dict()["trees"]
    assert named.predict_one({"size": 0.9, "noise": 3.0}) == named.predict_one([0.9, 3.0])


@pytest.mark.parametrize("estimator", [SGTClassifier, SGTRegressor], ids=lambda e: e.__name__)
def test_an_empty_list_batch_is_a_no_op(estimator: type) -> None:
    model = estimator(**SMALL)
    model.learn_many([{"a": 1.0}, {"a": 2.0}], [0, 1])
    blob = model.to_bytes()
    model.learn_many([], [])
    assert model.predict_many([]).shape == (0,)
    expected = (0, len(model.classes_)) if estimator is SGTClassifier else (0,)
    assert model.predict_learn_many([], []).shape == expected
    assert model.to_bytes() == blob


@pytest.mark.parametrize("estimator", [SGTClassifier, SGTRegressor], ids=lambda e: e.__name__)
def test_an_empty_array_batch_is_a_no_op(estimator: type) -> None:
    model = estimator(**SMALL)
    model.learn_many(np.ones((2, 3)), [0, 1])
    blob = model.to_bytes()
    empty = np.empty((0, 3))
    model.learn_many(empty, [])
    assert model.predict_many(empty).shape == (0,)
    assert model.predict_learn_many(empty, np.array([])).shape[0] == 0
    assert model.to_bytes() == blob


def test_mismatched_lengths_are_a_value_error() -> None:
    model = SGTClassifier()
    with pytest.raises(ValueError):
        model.learn_many([[1.0], [2.0]], [1])
    with pytest.raises(ValueError):
        model.predict_learn_many(np.ones((3, 1)), [1, 0])
    assert model.n_seen == 0


@by_name(FLAT)
def test_predicting_never_changes_the_model(case: Case) -> None:
    records, targets = case.data()
    model = learn(case.model(), records[:800], targets[:800])
    blob = model.to_bytes()
    odd = [
        {"brand-new": 1.0, "also-new": "text"},
        {"colour": "never-seen", "x0": float("inf"), "a": -1e300},
        {"x0": float("nan"), "x1": None, "b": float("-inf")},
        {},
    ]
    for x in [*records[800:900], *odd]:
        outputs(case, model, [x])
        model.predict_one(x)
    model.predict_many([*records[800:900], *odd])
    model.predict_learn_many([*records[800:900], *odd], [None] * 104)
    if case.classifier:
        model.predict_proba_many(odd)
    assert model.to_bytes() == blob
