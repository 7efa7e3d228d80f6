"""The boosted ensembles' per-member settings measured as variants (tests/bench/ours.py): a split
confidence that relaxes while a leaf finds no split (`_relax`, Params.relax_growth), members of
diverse split confidence (`_delta_ladder`) and of diverse shrinkage (`_step_ladder`). None is a default
(docs/decisions.md, "The boosted ensemble"), but each must keep the models exact: batch learning, the
one-record loop and a save restored half-way give the same bytes, with the compiled kernels and
without."""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np
import pytest

from sgt import BoostedClassifier, BoostedRegressor, kernels
from sgt.features import FeatureSpace
from sgt.layout import Layout, Params
from sgt.tree import Tree
from tests.sgt.sgt_testkit import mixed_records, step_regression_stream

N = 1500
SMALL = {"grace_period": 40, "warm_up": 80, "n_members": 3, "seed": 3}


class _Relaxing(BoostedClassifier):
    _relax = (10.0, 0.5)


class _Ladder(BoostedClassifier):
    _delta_ladder = (1.0, 10.0, 100.0)


class _Steps(BoostedClassifier):
    _step_ladder = (1.0, 0.3)


class _RelaxingRegressor(BoostedRegressor):
    _relax = (10.0, 0.5)
    _delta_ladder = (1.0, 5.0)


def _records(n: int) -> tuple[list[dict[str, Any]], list[Any]]:
    """Mixed dict records with a third class from row 1000 (members then take multi-output trees)."""
    records, labels = mixed_records(n, seed=11)
    return records, [("third" if i >= 1000 and i % 5 == 0 else y) for i, y in enumerate(labels)]


def _streams() -> dict[str, tuple[Any, Any, Any]]:
    records, labels = _records(N)
    XR, yR = step_regression_stream(N, seed=5)
    return {
        "relaxing": (lambda: _Relaxing(**SMALL), records, labels),
        "delta ladder": (lambda: _Ladder(**{**SMALL, "n_members": None}), records, labels),
        "step ladder": (lambda: _Steps(**SMALL), records, labels),
        "regressor": (lambda: _RelaxingRegressor(**SMALL), list(XR), list(yR)),
    }


STREAMS = _streams()


def _loop(make: Any, X: list, y: list, restore_at: int | None = None) -> tuple[bytes, list[Any]]:
    """One record at a time (predict, then learn), saved and restored at `restore_at`."""
    model = make()
    regression = isinstance(model, BoostedRegressor)
    out = []
    for i, (x, target) in enumerate(zip(X, y, strict=True)):
        if i == restore_at:
            model = type(model).from_bytes(model.to_bytes())
        out.append(model.predict_one(x) if regression else model.predict_proba_one(x))
        model.learn_one(x, target)
    return model.to_bytes(), out


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
    loop, _ = _loop(make, X, y)
    assert _loop(make, X, y, restore_at=N // 2)[0] == loop
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
    """Catches a relaxation that never reaches the F-test: on the checkerboard the relaxed members
    make more splits than the default's, and predict better."""
    X, y = _xor(6000, 1)
    strict, relaxed = BoostedClassifier(), _Relaxing()
    p_strict = strict.predict_learn_many(X, y)
    p_relaxed = relaxed.predict_learn_many(X, y)

    def splits(model: BoostedClassifier) -> int:
        return sum(t.n_splits for t in model._trees)

    assert splits(relaxed) > splits(strict)

    def accuracy(model: BoostedClassifier, proba: np.ndarray) -> float:
        return float((np.array(model.classes_)[proba.argmax(axis=1)] == y)[3000:].mean())

    assert accuracy(relaxed, p_relaxed) > accuracy(strict, p_strict) + 0.02


def test_the_level_relaxes_with_the_records_gathered_between_delta_and_the_cap() -> None:
    space = FeatureSpace(bins=8, warm_up=10)
    params = Params(1e-3, 100, 0.1, 0.0, None, relax_growth=10.0, relax_cap=0.5)
    learner = Tree(params, Layout(space)).learner
    assert learner._level(0.0) == 1e-3
    assert learner._level(100.0) == pytest.approx(1e-2)
    assert learner._level(250.0) == pytest.approx(1e-3 * 10**2.5)
    assert learner._level(1e6) == 0.5
    strict = Tree(Params(1e-3, 100, 0.1, 0.0, None), Layout(space)).learner
    assert strict._level(1e6) == 1e-3


def test_the_step_ladder_weighs_each_member() -> None:
    """The ensemble's raw score is the sum of each member's output times its position's step."""
    make, X, y = STREAMS["step ladder"]
    model = make()
    model.learn_many(X[:800], y[:800])
    codes = model._space.encode_one(X[900], learn=False)
    outputs = [m.trees[0].predict_one(m.trees[0].route_one(codes)[0], codes) for m in model._members]
    expected = 1.0 * outputs[0] + 0.3 * outputs[1] + 0.3 * outputs[2]
    assert model._predict_raw_one(X[900])[0] == pytest.approx(expected)
