"""The boosted ensembles' random feature subspaces (`feature_share`): each split attempt of a member
searches a random share of the features, drawn from saved state only, so the models stay exact."""

from __future__ import annotations

import functools
import itertools
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sgt import BoostedClassifier, BoostedRegressor, kernels
from sgt.leaf import subspace
from tests.sgt.sgt_testkit import (
    NO_SIDE_MODELS,
    NO_TREE_OR_FOREST,
    LoopAndRestore,
    looped_and_restored,
    mixed_records,
    multiclass_stream,
    step_regression_stream,
)

N = 1500
# the members alone: their split attempts are this module's subject (NO_SIDE_MODELS; the regressor has
# no Mondrian forest to leave out)
_SETTINGS = {"grace_period": 40, "warm_up": 80, "n_members": 3, "seed": 3}
SMALL = {**_SETTINGS, **NO_SIDE_MODELS}
SMALL_REGRESSOR = {**_SETTINGS, **NO_TREE_OR_FOREST}


def _records(n: int) -> tuple[list[dict[str, Any]], list[Any]]:
    """Mixed dict records (numeric, nominal and sparse features) with a feature first seen at row 600
    and a third class from row 1000 (members then take multi-output trees)."""
    records, labels = mixed_records(n, seed=11)
    rng = np.random.default_rng(12)
    for i, x in enumerate(records):
        if i >= 600:
            x["late"] = float(rng.uniform())
    out: list[Any] = [("third" if i >= 1000 and i % 5 == 0 else y) for i, y in enumerate(labels)]
    return records, out


def _streams() -> dict[str, tuple[Any, Any, Any]]:
    records, labels = _records(N)
    X3, y3 = multiclass_stream(N, seed=4)
    XR, yR = step_regression_stream(N, seed=5)
    return {
        "classifier, mixed records": (lambda: BoostedClassifier(feature_share=0.5, **SMALL), records, labels),
        "classifier, per-class trees": (
            lambda: BoostedClassifier(feature_share=0.5, multiclass_trees="per-class", **SMALL),
            list(X3),
            list(y3),
        ),
        "regressor": (lambda: BoostedRegressor(feature_share=0.6, **SMALL_REGRESSOR), list(XR), list(yR)),
    }


STREAMS = _streams()
PROPERTY = settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _looped(name: str) -> LoopAndRestore:
    """One record at a time (predict, then learn), and restored half-way, under the kernel switch now
    set: computed once per process and switch (the property test compares many batchings with it)."""
    return _looped_with(name, kernels.ENABLED)


@functools.cache
def _looped_with(name: str, kernels_enabled: bool) -> LoopAndRestore:
    make, X, y = STREAMS[name]
    return looped_and_restored(make(), X, y, at=N // 2)


def _batched(make: Any, X: list, y: list, cuts: list[int]) -> bytes:
    model = make()
    for a, b in itertools.pairwise([0, *cuts, len(X)]):
        model.learn_many(X[a:b], y[a:b])
    return bytes(model.to_bytes())


@pytest.mark.parametrize("kernels_on", [True, False], ids=["kernels", "SGT_KERNELS=0"])
@pytest.mark.parametrize("name", sorted(STREAMS))
def test_batches_equal_the_loop_and_a_restore_byte_for_byte(name: str, kernels_on: bool, monkeypatch) -> None:
    """Catches a subspace drawn from anything batching changes (the rows of a batch, the features a
    batch brings before the attempt's row) or not restored: batch learning, the one-record loop and
    a loop saved and restored half-way save the same bytes, with the compiled search and without."""
    monkeypatch.setattr(kernels, "ENABLED", kernels_on and kernels.ENABLED)
    make, X, y = STREAMS[name]
    looped = _looped(name)
    loop = looped.saved
    assert looped.restored == loop
    assert _batched(make, X, y, [N]) == loop
    assert _batched(make, X, y, [1, 599, 601, 1000, 1001]) == loop


@PROPERTY
@given(st.lists(st.integers(1, N - 1), max_size=8, unique=True).map(sorted))
def test_any_batching_gives_the_loops_bytes(cuts: list[int]) -> None:
    make, X, y = STREAMS["classifier, mixed records"]
    assert _batched(make, X, y, cuts) == _looped("classifier, mixed records").saved


def _splits(model: Any) -> int:
    return sum(tree.n_splits for tree in model._trees)


def test_a_tiny_share_leaves_no_feature_to_split_on() -> None:
    """Catches an attempt searching features it did not draw: with a share no draw falls below, no
    member ever splits (without subspaces they do)."""
    X, y = multiclass_stream(N, seed=4)
    free = BoostedClassifier(**SMALL)
    free.learn_many(X, y)
    starved = BoostedClassifier(feature_share=1e-12, **SMALL)
    starved.learn_many(X, y)
    assert _splits(free) > 0
    assert _splits(starved) == 0


def test_a_share_of_one_is_every_feature() -> None:
    """Every draw is below 1: the same trees as without subspaces, prediction for prediction."""
    X, y = step_regression_stream(N, seed=5)
    every = BoostedRegressor(feature_share=1.0, **SMALL_REGRESSOR)
    free = BoostedRegressor(**SMALL_REGRESSOR)
    assert np.array_equal(every.predict_learn_many(X, y), free.predict_learn_many(X, y))


def test_members_draw_differently() -> None:
    """Each member's draws are seeded by its position: two members' trees differ where, without
    subspaces and bagging, every member would see the same gradients' share of features."""
    X, y = step_regression_stream(N, seed=5)
    model = BoostedRegressor(feature_share=0.5, **SMALL_REGRESSOR)
    model.learn_many(X, y)
    seeds = {tree.params.feature_seed for tree in model._trees}
    assert seeds == {(3, 0), (3, 1), (3, 2)}


def test_the_draw_of_a_feature_does_not_depend_on_how_many_are_known() -> None:
    """A feature first seen later (in a batch) must change no other feature's draw."""
    wide = subspace((1, 2), 7, 400, 30, 0.5)
    assert np.array_equal(subspace((1, 2), 7, 400, 5, 0.5), wide[:5])
    assert not np.array_equal(subspace((1, 2), 7, 401, 30, 0.5), wide)
    assert 5 < int(wide.sum()) < 25


def test_the_parameter_round_trips_and_is_left_out_of_saves_while_none() -> None:
    model = BoostedClassifier(feature_share=0.3)
    assert BoostedClassifier(**model.get_params()).get_params() == model.get_params()
    assert BoostedClassifier.from_bytes(model.to_bytes()).feature_share == 0.3
    assert b"feature_share" not in BoostedClassifier().to_bytes()
    assert b"feature_share" not in BoostedRegressor().to_bytes()


@pytest.mark.parametrize("value", [0, 0.0, -0.1, 1.5, "sqrt", True, float("nan")])
@pytest.mark.parametrize("model", [BoostedClassifier, BoostedRegressor])
def test_a_bad_share_is_named_with_the_allowed_values(model: Any, value: object) -> None:
    with pytest.raises(
        ValueError, match=r"feature_share must be None \(every feature\) or a number in \(0, 1\]"
    ):
        model(feature_share=value)
