"""Explanations (sgt.explain): contributions sum with the base to the raw score, the features a target
depends on rank first, and the importances follow a drift."""

from __future__ import annotations

import math
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
    SGTClassifier,
    SGTRegressor,
)
from sgt.explain import Explanation

REGRESSORS = (SGTRegressor, BoostedRegressor, AdaptiveSGTRegressor)
CLASSIFIERS = (SGTClassifier, BoostedClassifier, AdaptiveSGTClassifier)
NAMES = [f"x{j}" for j in range(6)]


def _records(X: np.ndarray, colour: np.ndarray | None = None) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = [dict(zip(NAMES, row.tolist())) for row in X]
    if colour is not None:
        for record, c in zip(out, colour.tolist()):
            record["colour"] = ["red", "green", "blue", "grey"][c]
    return out


def _data(n: int, seed: int, n_classes: int = 0) -> tuple[list[dict[str, Any]], list[Any]]:
    """A target of x0, x2 and a nominal feature; the other features are noise."""
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1, 1, size=(n, len(NAMES)))
    colour = rng.integers(0, 4, n)
    score = 3.0 * X[:, 0] + 2.0 * (X[:, 2] > 0) + (colour == 1) + rng.normal(0, 0.1, n)
    if not n_classes:
        return _records(X, colour), score.tolist()
    return _records(X, colour), np.digitize(score, np.linspace(-2, 4, n_classes + 1)[1:-1]).tolist()


def _explained_scores(model: Any, x: Any) -> list[float]:
    """What a classifier's explanation of `x` totals, class by class: its raw scores, or while a boosted
    classifier serves a candidate with a side model the served probabilities' log ratios against the
    first class, as while its Mondrian forest's choice serves a candidate with the forest
    (tests/sgt/test_boosted_explain.py has the details)."""
    choice = getattr(model, "_choice", None)
    outer = getattr(model, "_outer", None)
    members_serve = choice is None or choice.needs() == {"ensemble"}
    if (members_serve and (outer is None or outer.serving == 0)) or len(model.classes_) < 2:
        return list(model._predict_raw_one(x))
    proba = model.predict_proba_one(x)
    first, *others = model.classes_
    return [math.log(proba[c] / proba[first]) for c in others]


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    index=st.integers(0, len(REGRESSORS) + len(CLASSIFIERS) - 1),
    leaf_model=st.sampled_from(["constant", "linear", "adaptive"]),
    n=st.integers(0, 2500),
    seed=st.integers(0, 1000),
    n_classes=st.integers(2, 4),
    probe=st.lists(st.one_of(st.none(), st.floats(-3, 3)), min_size=len(NAMES), max_size=len(NAMES)),
    colour=st.sampled_from(["red", "green", "purple", None]),
)
def test_contributions_sum_with_the_base_to_the_raw_score(
    index: int, leaf_model: str, n: int, seed: int, n_classes: int, probe: list[float | None], colour: Any
) -> None:
    cls = (*REGRESSORS, *CLASSIFIERS)[index]
    classifier = cls in CLASSIFIERS
    if leaf_model == "adaptive" and cls in (BoostedClassifier, AdaptiveSGTClassifier):
        leaf_model = "linear"  # (their multi-output members refuse adaptive leaves)
    model = cls(warm_up=100, grace_period=50, leaf_model=leaf_model, nominal=["colour"])
    records, y = _data(n, seed, n_classes if classifier else 0)
    if n:
        model.learn_many(records, y)
    x: dict[str, Any] = {k: v for k, v in zip(NAMES, probe) if v is not None}  # missing values too
    if colour is not None:
        x["colour"] = colour  # "purple": a category never learned
    # a regressor's explanation is of its prediction (squared error: the identity link), its residual
    # level's correction included, which the trees' raw score of a single regressor leaves out
    raw = _explained_scores(model, x) if classifier else [model.predict_one(x)]
    explained = list(model.explain_one(x).values()) if classifier else [model.explain_one(x)]
    assert len(explained) == len(raw)
    for explanation, score in zip(explained, raw):
        total = explanation.base + sum(explanation.contributions.values())
        assert abs(total - score) <= 1e-9 * max(1.0, abs(score))
        assert abs(explanation.score - score) <= 1e-9 * max(1.0, abs(score))


@pytest.mark.parametrize("cls", REGRESSORS + CLASSIFIERS)
def test_the_features_the_target_depends_on_rank_first(cls: type) -> None:
    classifier = cls in CLASSIFIERS
    records, y = _data(6000, seed=1, n_classes=3 if classifier else 0)
    model = cls(warm_up=200, nominal=["colour"])
    model.learn_many(records, y)
    importances = model.feature_importances()
    ranked = sorted(importances, key=lambda name: -importances[name])
    assert set(ranked[:2]) == {"x0", "x2"}, importances
    assert abs(sum(importances.values()) - 1.0) < 1e-12
    explanation = model.explain_one(records[0])
    first = next(iter(explanation.values())) if classifier else explanation
    assert isinstance(first, Explanation) and first.top(1)[0][0] in {"x0", "x2", "colour"}


@pytest.mark.parametrize("cls", [AdaptiveSGTRegressor, BoostedRegressor])
def test_the_importances_follow_a_drift(cls: type) -> None:
    rng = np.random.default_rng(5)
    n = 16000
    X = rng.uniform(-1, 1, size=(n, len(NAMES)))
    y = np.where(np.arange(n) < n // 2, 4.0 * X[:, 0], 4.0 * X[:, 3]) + rng.normal(0, 0.1, n)
    model = cls(warm_up=200)
    model.learn_many(X[: n // 2], y[: n // 2].tolist())
    before = model.feature_importances()
    model.learn_many(X[n // 2 :], y[n // 2 :].tolist())
    after = model.feature_importances()
    assert max(before, key=before.__getitem__) == "x0"
    assert max(after, key=after.__getitem__) == "x3", after


def test_nothing_learned_explains_nothing() -> None:
    assert SGTRegressor().feature_importances() == {}
    assert SGTClassifier().explain_one({"x0": 1.0}) == {}
    explanation = SGTRegressor().explain_one({"x0": 1.0})
    assert explanation.base == explanation.score == 0.0 and explanation.contributions == {}


def test_asking_changes_no_state() -> None:
    records, y = _data(1500, seed=3)
    model = BoostedRegressor(warm_up=100, nominal=["colour"])
    model.learn_many(records, y)
    blob = model.to_bytes()
    model.feature_importances()
    model.explain_one(records[0])
    assert model.to_bytes() == blob


def test_top_ranks_integer_and_string_names_alike() -> None:
    # regression: ties were broken by comparing the names, and an integer name (River's generators key
    # features by integers) beside a string raised TypeError
    explanation = Explanation(base=0.0, contributions={"b": 1.0, 2: -1.0, "a": 0.5, 0: 1.0}, score=1.5)
    assert explanation.top(3) == [("b", 1.0), (0, 1.0), (2, -1.0)]
