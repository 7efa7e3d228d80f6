"""The boosted classifier's Mondrian forest (`mondrian`, sgt.boosted.mondrian) and its outer choice
(sgt.boosted.classifier.MondrianChoice): what the model serves without it, the forest alone or a blend,
by errors with a margin, the forest retiring as the side models do. A batch, the one-record loop and a
restore give the same bits, with and without the kernels; a model without it saves what it saved
before the parameter; the explanation of what serves totals the served log ratio."""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sgt import BoostedClassifier, kernels
from sgt.boosted.classifier import MondrianChoice
from sgt.serialization import SerializationError, decode, encode

N = 900
PROPERTY = settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
#: a model whose choices move within a few hundred records
SMALL: dict[str, Any] = {"warm_up": 100, "mondrian": True}  # (the default, said)


def _board(n: int, seed: int = 3) -> tuple[list[dict[str, float]], list[Any]]:
    """A 4 x 4 checkerboard in two features (no single split gains), dict records, a third class
    ("edge") from row 600 on in a corner: the inner forest retires there, the Mondrian forest stays."""
    rng = np.random.default_rng(seed)
    X = rng.uniform(0, 1, (n, 2))
    y: list[Any] = ((np.floor(4 * X[:, 0]) + np.floor(4 * X[:, 1])) % 2).astype(int).tolist()
    for i in range(600, n):
        if X[i, 0] > 0.9 and X[i, 1] > 0.9:
            y[i] = "edge"
    return [{"x0": float(a), "x1": float(b)} for a, b in X], y


_X, _Y = _board(N)


def _loop(model: BoostedClassifier, X: Sequence[Any], y: Sequence[Any]) -> list[dict[Any, float]]:
    rows = []
    for x, target in zip(X, y, strict=True):
        rows.append(model.predict_proba_one(x))
        model.learn_one(x, target)
    return rows


def _loop_model() -> tuple[bytes, list[dict[Any, float]]]:
    model = BoostedClassifier(**SMALL)
    rows = _loop(model, _X, _Y)
    return model.to_bytes(), rows


_LOOP = _loop_model()


def test_the_mondrian_forest_serves_on_the_board_and_survives_the_third_class() -> None:
    model = BoostedClassifier(**SMALL)
    model.learn_many(_X, _Y)
    assert model._outer is not None and model._mondrian is not None
    assert model._outer.needs() >= {"mondrian"}, model._outer.errors  # (a candidate with the forest serves)
    assert model._forest is None  # (the inner forest retired at the third class)
    assert model._mondrian.classes_ == model.classes_ and model.classes_[-1] == "edge"
    assert (
        model.nbytes > BoostedClassifier(**{**SMALL, "mondrian": False}).nbytes + model._mondrian.nbytes // 2
    )


@PROPERTY
@given(
    cuts=st.lists(st.integers(1, N - 1), max_size=6, unique=True).map(sorted),
    methods=st.lists(st.sampled_from(["predict_learn_many", "learn_many", "loop", "restore"]), min_size=7),
)
def test_any_batching_loop_and_restores_give_the_same_probabilities_and_bytes(
    cuts: list[int], methods: list[str]
) -> None:
    model = BoostedClassifier(**SMALL)
    for part, method in zip(
        itertools.starmap(slice, itertools.pairwise([0, *cuts, N])), methods, strict=False
    ):
        if method == "restore":
            model = BoostedClassifier.from_bytes(model.to_bytes())
            method = "predict_learn_many"
        if method == "loop":
            _loop(model, _X[part], _Y[part])
        elif method == "learn_many":
            model.learn_many(_X[part], _Y[part])
        else:
            proba = model.predict_learn_many(_X[part], _Y[part])
            for row, expected in zip(proba, _LOOP[1][part], strict=True):
                got = {c: float(v) for c, v in zip(model.classes_, row, strict=True)}
                assert {c: got[c] for c in expected} == expected
    assert model.to_bytes() == _LOOP[0]


@pytest.mark.skipif(kernels.numba is None, reason="the kernels need numba")
def test_the_kernels_and_the_python_walk_give_the_same_model(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(kernels, "ENABLED", False)
    model = BoostedClassifier(**SMALL)
    first = model.predict_learn_many(_X[:500], _Y[:500])
    monkeypatch.setattr(kernels, "ENABLED", True)
    second = model.predict_learn_many(_X[500:], _Y[500:])
    assert model.to_bytes() == _LOOP[0]
    rows = [*first.tolist(), *second.tolist()]
    for row, expected in zip(rows, _LOOP[1], strict=True):
        assert [v for v in row[: len(expected)]] == list(expected.values())


def test_the_mondrian_forest_retires_where_the_model_leads_it() -> None:
    rng = np.random.default_rng(4)
    X = rng.uniform(0, 1, (1500, 3))
    y = (X[:, 0] > 0.5).astype(int).tolist()  # one split: the members and the single tree lead
    model = BoostedClassifier(**SMALL)
    model.learn_many(X, y)
    assert model._mondrian is None and model._outer is None
    assert "mondrian" not in decode(model.to_bytes()).header["extra"]
    restored = BoostedClassifier.from_bytes(model.to_bytes())
    assert restored._mondrian is None and restored.to_bytes() == model.to_bytes()


def test_the_default_says_it_has_the_forest_and_without_it_a_model_saves_the_bytes_of_before() -> None:
    """The forest is the default, and a default model's save says so (`mondrian: true`), since a save
    without the parameter restores without it; `mondrian=False` saves the bytes of the format before."""
    default = BoostedClassifier(warm_up=100)
    assert default.mondrian is True and default.get_params()["mondrian"] is True
    default.learn_many(_X[:300], _Y[:300])
    header = decode(default.to_bytes()).header
    assert header["params"]["mondrian"] is True and "mondrian" in header["extra"]
    restored = BoostedClassifier.from_bytes(default.to_bytes())
    assert restored.get_params()["mondrian"] is True and restored.to_bytes() == default.to_bytes()
    model = BoostedClassifier(warm_up=100, mondrian=False)
    model.learn_many(_X[:300], _Y[:300])
    header = decode(model.to_bytes()).header
    assert "mondrian" not in header["params"] and "mondrian" not in header["extra"]
    assert BoostedClassifier.from_bytes(model.to_bytes()).get_params()["mondrian"] is False
    assert BoostedClassifier(**model.get_params()).get_params() == model.get_params()  # (a clone keeps False)


def test_under_a_budget_the_default_has_no_mondrian_forest() -> None:
    model = BoostedClassifier(warm_up=100, max_bytes=1 << 20)
    model.learn_many(_X[:300], _Y[:300])
    assert model._mondrian is None and model._outer is None
    assert "mondrian" not in decode(model.to_bytes()).header["extra"]


def test_the_explanation_totals_the_served_log_ratio_and_the_forest_counts_no_importance() -> None:
    model = BoostedClassifier(**SMALL)
    model.learn_many(_X[:500], _Y[:500])
    assert model._outer is not None
    x = _X[0]
    for serving in range(len(MondrianChoice.OFFERED)):
        model._outer.serving = serving
        proba = model.predict_proba_one(x)
        first, second = model.classes_[:2]
        why = model.explain_one(x)[second]
        assert math.isclose(why.score, math.log(proba[second] / proba[first]), abs_tol=1e-9)
        importances = model.feature_importances()
        if serving == 1:  # the Mondrian forest alone: no contribution, no importance
            assert all(v == 0.0 for v in why.contributions.values())
            assert all(v == 0.0 for v in importances.values())
        else:
            assert math.isclose(sum(importances.values()), 1.0)


def test_a_bad_setting_or_save_is_refused() -> None:
    with pytest.raises(ValueError, match="mondrian"):
        BoostedClassifier(mondrian="yes")  # type: ignore[arg-type]  # (the wrong type is the point)
    model = BoostedClassifier(**SMALL)
    model.learn_many(_X[:300], _Y[:300])
    saved = decode(model.to_bytes())
    header = saved.header
    header["extra"]["mondrian"]["choice"] = [1, 2]
    with pytest.raises(SerializationError, match="Mondrian choice"):
        BoostedClassifier.from_bytes(encode(header, list(saved.arrays.items())))


FIXTURES = sorted((Path(__file__).resolve().parents[1] / "fixtures").glob("boosted-*/classifier.sgt"))


@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: p.parent.name)
def test_a_classifier_saved_before_the_parameter_restores_the_same_bytes(path: Path) -> None:
    blob = path.read_bytes()
    model = BoostedClassifier.from_bytes(blob)
    assert model.to_bytes() == blob
    assert model.get_params()["mondrian"] is False and model._mondrian is None


def test_records_keyed_by_integers_are_learned_one_at_a_time_by_the_forest_too() -> None:
    """River's generators key features by integers, which `learn_one` takes: the forest learns them too
    (before, its rows refused such names, so the default model raised on River's records)."""
    records = [{0: x["x0"], 1: x["x1"]} for x in _X[:400]]
    model = BoostedClassifier(**SMALL)
    for x, target in zip(records, _Y[:400], strict=True):
        model.learn_one(x, target)
    assert model._mondrian is not None and model._mondrian._space.names == [0, 1]
    restored = BoostedClassifier.from_bytes(model.to_bytes())
    assert restored.to_bytes() == model.to_bytes()
    assert restored.predict_proba_one(records[0]) == model.predict_proba_one(records[0])
