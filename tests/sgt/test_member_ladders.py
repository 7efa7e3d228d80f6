"""The boosted ensembles' member settings: a split confidence that relaxes while a leaf finds no split
(`_relax`, Params.relax_growth; BoostedClassifier's default, where the ensemble is unsure), and the
variants measured in tests/bench/ours.py, members of diverse split confidence (`_delta_ladder`) and of
diverse shrinkage (`_step_ladder`). Each must keep the models exact: batch learning, the one-record
loop and a save restored half-way give the same bytes, with the compiled kernels and without; a model
saved before the relaxation restores and learns on as it did."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from sgt import AdaptiveSGTClassifier, BoostedClassifier, BoostedRegressor, kernels
from sgt.boosted.ensemble import _saved_relax
from sgt.boosted.policy import RELAX
from sgt.features import FeatureSpace
from sgt.layout import Layout, Params
from sgt.stats import MH
from sgt.tree import Tree
from tests.fixtures.make_boosted_fixture import PARAMS, ROWS, checkerboard
from tests.sgt.sgt_testkit import (
    NO_SIDE_MODELS,
    NO_TREE_OR_FOREST,
    looped_and_restored,
    mixed_records,
    step_regression_stream,
)

BEFORE_RELAX = Path(__file__).resolve().parents[1] / "fixtures" / "boosted-before-relax" / "classifier.sgt"

N = 1500
# the members alone: their settings are this module's subject (NO_SIDE_MODELS; the regressor has no
# Mondrian forest to leave out)
_SETTINGS = {"grace_period": 40, "warm_up": 80, "n_members": 3, "seed": 3}
SMALL = {**_SETTINGS, **NO_SIDE_MODELS}
SMALL_REGRESSOR = {**_SETTINGS, **NO_TREE_OR_FOREST}


class _Relaxing(BoostedClassifier):
    _relax = (10.0, 0.5, None)


class _Strict(BoostedClassifier):
    _relax = None


class _Ladder(BoostedClassifier):
    _delta_ladder = (1.0, 10.0, 100.0)


class _Steps(BoostedClassifier):
    _step_ladder = (1.0, 0.3)


class _RelaxingRegressor(BoostedRegressor):
    _relax = (10.0, 0.5, None)
    _delta_ladder = (1.0, 5.0)


def _records(n: int) -> tuple[list[dict[str, Any]], list[Any]]:
    """Mixed dict records with a third class from row 1000 (members then take multi-output trees)."""
    records, labels = mixed_records(n, seed=11)
    return records, [("third" if i >= 1000 and i % 5 == 0 else y) for i, y in enumerate(labels)]


def _streams() -> dict[str, tuple[Any, Any, Any]]:
    records, labels = _records(N)
    XR, yR = step_regression_stream(N, seed=5)
    X2, y2 = checkerboard(N, seed=7)
    return {
        "default": (lambda: BoostedClassifier(**SMALL), records, labels),
        "default, members by the classes": (
            lambda: BoostedClassifier(**{**SMALL, "n_members": None}),
            records,
            labels,
        ),
        "default, checkerboard": (lambda: BoostedClassifier(**SMALL), list(X2), list(y2)),
        "relaxing": (lambda: _Relaxing(**SMALL), records, labels),
        "delta ladder": (lambda: _Ladder(**{**SMALL, "n_members": None}), records, labels),
        "step ladder": (lambda: _Steps(**SMALL), records, labels),
        "regressor": (lambda: _RelaxingRegressor(**SMALL_REGRESSOR), list(XR), list(yR)),
    }


STREAMS = _streams()


def _batched(make: Any, X: list, y: list, cuts: list[int]) -> tuple[bytes, np.ndarray]:
    model = make()
    out = [model.predict_learn_many(X[a:b], y[a:b]) for a, b in itertools.pairwise([0, *cuts, len(X)])]
    return bytes(model.to_bytes()), out[-1]


@pytest.mark.parametrize("kernels_on", [True, False], ids=["kernels", "SGT_KERNELS=0"])
@pytest.mark.parametrize("name", sorted(STREAMS))
def test_batches_equal_the_loop_and_a_restore_byte_for_byte(name: str, kernels_on: bool, monkeypatch) -> None:
    """Catches a setting that is lost on restore (a restored member at its position must take it
    again) or that depends on how records are batched."""
    monkeypatch.setattr(kernels, "ENABLED", kernels_on and kernels.ENABLED)
    make, X, y = STREAMS[name]
    looped = looped_and_restored(make(), X, y, at=N // 2)
    loop = looped.saved
    assert looped.restored == loop
    assert _batched(make, X, y, [N])[0] == loop
    assert _batched(make, X, y, [1, 599, 601, 1000, 1001])[0] == loop


def test_a_restored_member_keeps_its_settings() -> None:
    """The ladder's delta and the relaxing level are the trees' parameters after a restore too."""
    make, X, y = STREAMS["relaxing"]
    model = make()
    model.learn_many(X, y)
    restored = type(model).from_bytes(model.to_bytes())
    assert {t.params.relax_growth for t in restored._trees} == {10.0}
    ladder = _Ladder(**SMALL)
    ladder.learn_many(X, y)
    again = _Ladder.from_bytes(ladder.to_bytes())
    deltas = [m.trees[0].params.delta for m in again._members]
    assert deltas == [m.trees[0].params.delta for m in ladder._members]
    assert deltas[1] == pytest.approx(10 * deltas[0]) and deltas[2] == pytest.approx(100 * deltas[0])


def _xor(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """A 4 x 4 checkerboard: no single split of either feature lowers the loss (an XOR concept)."""
    X = np.random.default_rng(seed).uniform(0, 1, (n, 2))
    return X, (np.floor(4 * X).astype(int).sum(axis=1) % 2).astype(int)


def test_relaxing_members_split_where_strict_ones_do_not() -> None:
    """Catches a relaxation that never reaches the F-test: on the checkerboard the relaxed members (the
    default's, and without the impurity condition) make more splits than strict ones, and predict
    better."""
    X, y = _xor(6000, 1)

    def run(model: BoostedClassifier) -> tuple[int, float]:
        proba = model.predict_learn_many(X, y)
        accuracy = float((np.array(model.classes_)[proba.argmax(axis=1)] == y)[3000:].mean())
        return sum(t.n_splits for t in model._trees), accuracy

    # (the members' splits and accuracy, without the forests', whose choices would serve over them)
    strict = run(_Strict(forest=False, mondrian=False))
    for relaxed in (
        run(BoostedClassifier(forest=False, mondrian=False)),
        run(_Relaxing(forest=False, mondrian=False)),
    ):
        assert relaxed[0] > strict[0] and relaxed[1] > strict[1] + 0.02


def test_the_level_relaxes_with_the_records_gathered_between_delta_and_the_cap() -> None:
    space = FeatureSpace(bins=8, warm_up=10)
    params = Params(1e-3, 100, 0.1, 0.0, None, relax_growth=10.0, relax_cap=0.5)
    tree = Tree(params, Layout(space))  # (kept: a learner refers to its tree weakly)
    learner = tree.learner
    assert learner._level(0, 0.0) == 1e-3
    assert learner._level(0, 100.0) == pytest.approx(1e-2)
    assert learner._level(0, 250.0) == pytest.approx(1e-3 * 10**2.5)
    assert learner._level(0, 1e6) == 0.5  # (no overflow)
    strict_tree = Tree(Params(1e-3, 100, 0.1, 0.0, None), Layout(space))
    assert strict_tree.learner._level(0, 1e6) == 1e-3


def test_only_a_leaf_whose_predictions_are_uncertain_relaxes() -> None:
    """With `relax_impurity`, the level relaxes only while the leaf's mean Hessian (doubled: the Gini
    impurity 2 p (1 - p) of two classes) reaches it."""
    space = FeatureSpace(bins=8, warm_up=10)
    params = Params(1e-3, 100, 0.1, 0.0, None, relax_growth=10.0, relax_cap=0.5, relax_impurity=0.47)
    tree = Tree(params, Layout(space))
    tree.total[0, MH] = 0.2  # p about 0.28 or 0.72 on average: impurity 0.4
    assert tree.learner._level(0, 1e6) == 1e-3
    tree.total[0, MH] = 0.24  # impurity 0.48
    assert tree.learner._level(0, 1e6) == 0.5


def test_the_step_ladder_weighs_each_member() -> None:
    """The ensemble's raw score is the sum of each member's output times its position's step."""
    make, X, y = STREAMS["step ladder"]
    model = make()
    model.learn_many(X[:800], y[:800])
    codes = model._space.encode_one(X[900], learn=False)
    outputs = [m.trees[0].predict_one(m.trees[0].route_one(codes)[0], codes) for m in model._members]
    expected = 1.0 * outputs[0] + 0.3 * outputs[1] + 0.3 * outputs[2]
    assert model._predict_raw_one(X[900])[0] == pytest.approx(expected)


def _learn_on(model: BoostedClassifier, X: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, bytes]:
    proba = model.predict_learn_many(X, y)
    return proba, bytes(model.to_bytes())


def test_a_model_saved_before_the_relaxation_learns_on_without_it(monkeypatch) -> None:
    """The fixture was saved by the code before the relaxation (tests/fixtures/make_boosted_fixture.py),
    half-way through a checkerboard. Restored, it must learn the second half as that code would: as a
    model whose class has no relaxation (the same bits, and no relaxation in its later saves). Catches
    a restore that gives an old model the class's relaxation (its members then split more)."""
    X, y = checkerboard(ROWS)
    rest = slice(ROWS // 2, ROWS)
    model = BoostedClassifier.from_bytes(BEFORE_RELAX.read_bytes())
    # (saved before the ensemble's `proba`: it restores with the raw softmax, "tree")
    # (and before the single tree: it restores without it)
    assert (
        model.get_params()
        == BoostedClassifier(
            **PARAMS, proba="tree", single_tree=False, forest=False, mondrian=False
        ).get_params()
    )
    proba, saved = _learn_on(model, X[rest], y[rest])
    monkeypatch.setattr(BoostedClassifier, "_relax", None)
    reference = BoostedClassifier.from_bytes(BEFORE_RELAX.read_bytes())
    expected, expected_saved = _learn_on(reference, X[rest], y[rest])
    assert np.array_equal(proba, expected)
    assert saved == expected_saved
    assert b'"relax"' not in saved
    monkeypatch.undo()
    relaxed = BoostedClassifier(**PARAMS, proba="tree", single_tree=False, forest=False, mondrian=False)
    relaxed.learn_many(X[: ROWS // 2], y[: ROWS // 2])
    assert not np.array_equal(_learn_on(relaxed, X[rest], y[rest])[0], proba)  # (the relaxation matters here)


def test_the_relaxation_is_saved_with_the_model_and_only_where_it_is_on() -> None:
    X, y = checkerboard(600, seed=3)
    model = BoostedClassifier(**SMALL)
    model.learn_many(X, y)
    restored = BoostedClassifier.from_bytes(model.to_bytes())
    assert restored._relaxed == RELAX
    assert {
        (t.params.relax_growth, t.params.relax_cap, t.params.relax_impurity) for t in restored._trees
    } == {RELAX}
    strict = _Strict(**SMALL)
    strict.learn_many(X, y)
    assert b'"relax"' not in strict.to_bytes()
    for other in (BoostedRegressor(**SMALL_REGRESSOR), AdaptiveSGTClassifier()):
        assert b'"relax"' not in other.to_bytes()


@pytest.mark.parametrize(
    "saved", [[10, 0.5], [10, "0.5", None], [10, 0.5, True], "on", [float("nan"), 0.5, None]]
)
def test_a_corrupt_saved_relaxation_is_refused(saved: object) -> None:
    with pytest.raises(ValueError, match=r"relax must be \[growth, cap, impurity or null\]"):
        _saved_relax(saved)


def test_a_saved_relaxation_reads_back() -> None:
    assert _saved_relax(None) is None
    assert _saved_relax([10, 0.5, None]) == (10.0, 0.5, None)
    assert _saved_relax(list(RELAX)) == RELAX
