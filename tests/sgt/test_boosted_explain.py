"""The boosted classifier explains the candidate it serves (`BoostedClassifier.explain_one`): while a
side model serves alone or in a blend, each class's explanation totals the log ratio of the served
probabilities; while the members serve, and without side models, it is the members' explanation as
before. Its feature importances follow the served candidate too."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sgt import BoostedClassifier
from sgt.boosted.tree_choice import Candidate
from sgt.explain import explain_raw, importances, on_features


def _checkerboard(n: int, seed: int) -> tuple[np.ndarray, list[int]]:
    """A 4 x 4 checkerboard on the unit square: no single split gains (the forest serves)."""
    rng = np.random.default_rng(seed)
    X = rng.uniform(0, 1, size=(n, 2))
    return X, ((np.floor(X[:, 0] * 4) + np.floor(X[:, 1] * 4)) % 2).astype(int).tolist()


def _threshold(n: int, seed: int) -> tuple[np.ndarray, list[int]]:
    """One threshold on x0 of three features (the single tree serves)."""
    rng = np.random.default_rng(seed)
    X = rng.uniform(0, 1, size=(n, 3))
    return X, (X[:, 0] > 0.5).astype(int).tolist()


def _blobs(n: int, seed: int, k: int = 3) -> tuple[np.ndarray, list[int]]:
    """`k` Gaussian blobs in four dimensions."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, k, n)
    X = rng.normal(0, 2, size=(k, 4))[y] + rng.normal(0, 1, size=(n, 4))
    return X, y.tolist()


def _trained(X: np.ndarray, y: list[int], **params: Any) -> BoostedClassifier:
    """A model of the side models these tests explain: the single tree and the forest, without the
    Mondrian forest, whose outer choice would serve over them on the checkerboard (its explanation:
    tests/sgt/test_boosted_mondrian.py)."""
    model = BoostedClassifier(warm_up=100, **{"mondrian": False, **params})
    model.learn_many(X, y)
    return model


def _probes(X: np.ndarray) -> list[dict[str, float]]:
    """Records to explain: some of the stream's, and one with a feature missing."""
    names = [f"x{j}" for j in range(X.shape[1])]
    probes = [dict(zip(names, row.tolist())) for row in X[:: max(1, len(X) // 12)]]
    return [*probes, dict(zip(names[1:], X[0, 1:].tolist()))]


def _serving(model: BoostedClassifier) -> Candidate | None:
    choice = model._choice
    return None if choice is None else choice.candidates[choice.serving]


def _assert_totals_are_the_served_log_ratios(model: BoostedClassifier, x: dict[str, float]) -> None:
    proba = model.predict_proba_one(x)
    first, *others = model.classes_
    explained = model.explain_one(x)
    assert list(explained) == others
    for c in others:
        expected = math.log(proba[c] / proba[first])
        explanation = explained[c]
        total = explanation.base + sum(explanation.contributions.values())
        assert list(explanation.contributions) == list(model._space.names)
        assert total == pytest.approx(expected, rel=1e-9, abs=1e-9)
        assert explanation.score == pytest.approx(expected, rel=1e-9, abs=1e-9)


@pytest.mark.parametrize(
    ("stream", "n", "seed", "serving"),
    [
        (_checkerboard, 2000, 0, Candidate("ensemble", "forest", 1.0)),  # the forest alone
        (_checkerboard, 300, 0, Candidate("tree", "forest", 0.5)),  # the tree's and the forest's mean
        (_threshold, 600, 1, Candidate("ensemble", "tree", 1.0)),  # the tree alone, the forest alive
        (_blobs, 900, 1, Candidate("ensemble", "tree", 1.0)),  # three classes: the tree alone
    ],
)
def test_the_explanation_totals_the_served_probabilities(
    stream: Any, n: int, seed: int, serving: Any
) -> None:
    X, y = stream(n, seed)
    model = _trained(X, y)
    assert _serving(model) == serving  # (the stream's choice; a change of the choice's rule may move it)
    for x in _probes(X):
        _assert_totals_are_the_served_log_ratios(model, x)


def test_with_the_forest_serving_the_explanation_is_not_the_members() -> None:
    """Before: the members' logits, whatever served (on the checkerboard they barely learn)."""
    X, y = _checkerboard(2000, 0)
    model = _trained(X, y)
    x = {"x0": 0.1, "x1": 0.1}  # (a square of one class: the forest is sure, the members are not)
    first, second = model.classes_
    proba = model.predict_proba_one(x)
    served = math.log(proba[second] / proba[first])
    assert abs(served - model._predict_raw_one(x)[0]) > 0.5  # (so the test tells them apart)
    assert model.explain_one(x)[second].score == pytest.approx(served, rel=1e-9, abs=1e-9)


def test_every_candidate_totals_what_it_serves() -> None:
    """Each of the twelve candidates made to serve in turn (the tree and the forest alive)."""
    X, y = _checkerboard(300, 0)
    model = _trained(X, y)
    choice = model._choice
    assert choice is not None and choice._open == list(range(12))
    for k in range(1, 12):
        choice.serving = k
        for x in _probes(X)[:4]:
            _assert_totals_are_the_served_log_ratios(model, x)


def test_the_forest_contributes_by_feature_name() -> None:
    """The forest alone serving: its contributions under this model's names, in this model's order,
    whatever order the forest's feature space holds them in."""
    X, y = _checkerboard(2000, 0)
    model = _trained(X, y)
    forest = model._forest
    assert forest is not None and _serving(model) == Candidate("ensemble", "forest", 1.0)
    x = {"x1": 0.3, "x0": 0.8}
    second = model.classes_[1]
    explanation = model.explain_one(x)[second]
    own = forest.explain_one(x)[second]
    assert explanation.contributions == own.contributions


def test_terms_move_to_another_model_s_features_by_name() -> None:
    """A side model's terms on the model's features: by name, 0 where it has not seen the feature,
    and a feature the model lacks in the base (each row's total kept)."""
    terms = np.array([[0.5, 1.0, 2.0, 4.0], [-1.0, 8.0, 16.0, 32.0]])
    moved = on_features(terms, ["b", "z", "a"], ["a", "b", "c"])
    assert moved.tolist() == [[2.5, 4.0, 1.0, 0.0], [15.0, 32.0, 8.0, 0.0]]
    assert on_features(terms, ["a", "b", "c"], ["a", "b", "c"]) is terms


def _members_terms(model: BoostedClassifier, x: dict[str, float]) -> np.ndarray:
    """The members' explanation as it was before the served one: `explain_raw` without its hook."""
    from sgt.explain import _ensemble_terms

    return _ensemble_terms(model, model._space.encode_one(x, learn=False), len(model._space))


@pytest.mark.parametrize("stream", [_checkerboard, _blobs])
def test_without_side_models_the_explanation_is_the_members(stream: Any) -> None:
    X, y = stream(1500, 2)
    model = _trained(X, y, single_tree=False, forest=False)
    for x in _probes(X):
        terms = _members_terms(model, x)
        assert np.array_equal(explain_raw(model, x), terms)
        explained = model.explain_one(x)
        for row, explanation in zip(terms.tolist(), explained.values()):
            assert explanation.base == row[0]
            assert list(explanation.contributions.values()) == row[1:]
        raw = model._predict_raw_one(x)
        assert [e.score for e in explained.values()] == pytest.approx(raw, rel=1e-9, abs=1e-9)


def test_while_the_members_serve_the_explanation_is_a_model_without_sides() -> None:
    """The members of a model with side models learn as a model's without: the same explanation while
    they serve, and once the side models retired."""
    X, y = _blobs(3000, 3)
    model, alone = _trained(X[:300], y[:300]), _trained(X[:300], y[:300], single_tree=False, forest=False)
    assert model._choice is not None and model._choice.serving == 0
    for x in _probes(X):
        assert model.explain_one(x) == alone.explain_one(x)
    model.learn_many(X[300:], y[300:])
    alone.learn_many(X[300:], y[300:])
    assert model._choice is None  # every side model retired
    for x in _probes(X):
        assert model.explain_one(x) == alone.explain_one(x)
    assert model.feature_importances() == alone.feature_importances()


def test_the_importances_follow_the_served_candidate() -> None:
    X, y = _checkerboard(2000, 0)
    model = _trained(X, y)
    forest = model._forest
    assert forest is not None and _serving(model) == Candidate("ensemble", "forest", 1.0)
    assert model.feature_importances() == forest.feature_importances()
    choice = model._choice
    assert choice is not None
    choice.serving = 10  # the mean of the members and the forest: the mean of their importances
    members, own = importances(model), forest.feature_importances()
    blended = model.feature_importances()
    assert sum(blended.values()) == pytest.approx(1.0, rel=1e-12)
    for name in members:
        assert blended[name] == pytest.approx(0.5 * (members[name] + own[name]), rel=1e-12)
    choice.serving = 0
    assert model.feature_importances() == members


def test_asking_changes_no_state_and_a_restored_model_explains_alike() -> None:
    X, y = _checkerboard(600, 0)
    model = _trained(X, y)
    assert _serving(model) == Candidate("tree", "forest", 0.5)
    blob = model.to_bytes()
    explained = [model.explain_one(x) for x in _probes(X)]
    shares = model.feature_importances()
    assert model.to_bytes() == blob
    restored = BoostedClassifier.from_bytes(blob)
    assert [restored.explain_one(x) for x in _probes(X)] == explained
    assert restored.feature_importances() == shares


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    kind=st.sampled_from(["checkerboard", "threshold", "blobs2", "blobs3"]),
    n=st.integers(60, 700),
    seed=st.integers(0, 1000),
    serving=st.integers(0, 11),
)
def test_the_totals_match_the_served_probabilities(kind: str, n: int, seed: int, serving: int) -> None:
    """Random small streams, any candidate the model may serve made to serve: each class's total is
    the served log ratio (the members alone: their logits)."""
    streams = {
        "checkerboard": _checkerboard,
        "threshold": _threshold,
        "blobs2": lambda n, seed: _blobs(n, seed, k=2),
        "blobs3": _blobs,
    }
    X, y = streams[kind](n, seed)
    model = BoostedClassifier(warm_up=50, grace_period=30, mondrian=False)
    model.learn_many(X, y)
    choice = model._choice
    if choice is not None and choice._open:
        choice.serving = choice._open[serving % len(choice._open)]
    for x in _probes(X)[:4]:
        if _serving(model) in (None, Candidate("ensemble", "tree", 0.0)):
            raw = model._predict_raw_one(x)
            assert [e.score for e in model.explain_one(x).values()] == pytest.approx(raw, rel=1e-9, abs=1e-9)
        else:
            _assert_totals_are_the_served_log_ratios(model, x)
