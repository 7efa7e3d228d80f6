"""The blind split (Params.blind_after; SGTClassifier's default, `BLIND_SPLIT`): a leaf near a coin toss
that found no split for a grace period splits at the median of a numeric feature chosen by its depth.

On an XOR-like concept (a checkerboard) no single split lowers the loss, so a greedy tree never splits
and predicts a coin toss; split blind, its children find the gain. The split must keep the models exact
(batch learning, the one-record loop and a save restored half-way give the same bytes, with the compiled
kernels and without), and a model saved before it must restore and learn on without it.
"""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sgt import BoostedClassifier, BoostedRegressor, SGTClassifier, SGTRegressor, kernels
from sgt.base import saved_blind
from sgt.classifier import BLIND_SPLIT
from sgt.leaf import _median_split
from sgt.serialization import SerializationError
from sgt.stats import N, block_stats
from tests.fixtures.make_boosted_fixture import checkerboard
from tests.sgt.sgt_testkit import NO_SIDE_MODELS, looped_and_restored, predicted_then_learned

RELEASE = Path(__file__).resolve().parents[1] / "fixtures" / "release-0.1.0" / "classifier.sgt"
BEFORE_RELAX = Path(__file__).resolve().parents[1] / "fixtures" / "boosted-before-relax" / "classifier.sgt"
ROWS = 1500


class _Sighted(SGTClassifier):
    """The single classifier without the blind split (as before it)."""

    _blind = None


class _BlindBoosted(BoostedClassifier):
    """The boosted classifier whose members split blind (`BLIND_SPLIT`)."""

    _blind = BLIND_SPLIT


def _accuracy(model: Any, X: np.ndarray, y: np.ndarray) -> float:
    proba = model.predict_learn_many(X, y)
    predicted = np.array(model.classes_)[proba.argmax(axis=1)]
    return float((predicted == y)[len(y) // 2 :].mean())


def test_a_single_tree_splits_an_xor_where_no_split_gains() -> None:
    """Catches a tree that never splits a checkerboard (the code before the blind split: no split in
    4,000 records, accuracy a coin toss over the last 2,000) or whose blind splits lead nowhere."""
    X, y = checkerboard(4000, seed=5)
    sighted, blind = _Sighted(), SGTClassifier()
    assert _accuracy(sighted, X, y) < 0.55 and sighted.n_splits == 0
    assert _accuracy(blind, X, y) > 0.7
    assert blind.n_splits >= 10


def test_a_tree_that_finds_splits_does_not_split_blind() -> None:
    """On a concept a single split separates, the blind split never fires: the same tree as without it."""
    rng = np.random.default_rng(4)
    X = rng.uniform(0, 1, (2000, 3))
    y = (X[:, 0] + 0.3 * rng.normal(size=2000) > 0.5).astype(int)
    blind, sighted = SGTClassifier(), _Sighted()
    blind.learn_many(X, y)
    sighted.learn_many(X, y)
    (tree,), (same,) = blind._trees, sighted._trees
    assert tree.n_splits == same.n_splits > 0
    assert np.array_equal(tree.feature, same.feature) and np.array_equal(tree.threshold, same.threshold)
    assert np.array_equal(blind.predict_proba_many(X), sighted.predict_proba_many(X))


def _loop(make: Any, X: list, y: list) -> bytes:
    """One record at a time (predict, then learn): the bytes saved at the end."""
    model = make()
    predicted_then_learned(model, X, y)
    return bytes(model.to_bytes())


def _batched(make: Any, X: list, y: list, cuts: list[int]) -> bytes:
    model = make()
    for a, b in itertools.pairwise([0, *cuts, len(X)]):
        model.predict_learn_many(X[a:b], y[a:b])
    return bytes(model.to_bytes())


MAKERS = {
    "single": lambda: SGTClassifier(grace_period=50),
    "single, constant leaves": lambda: SGTClassifier(grace_period=50, leaf_model="constant"),
    "boosted members": lambda: _BlindBoosted(grace_period=40, n_members=3, seed=3, **NO_SIDE_MODELS),
}


@pytest.mark.parametrize("kernels_on", [True, False], ids=["kernels", "SGT_KERNELS=0"])
@pytest.mark.parametrize("name", sorted(MAKERS))
def test_batches_equal_the_loop_and_a_restore_byte_for_byte(name: str, kernels_on: bool, monkeypatch) -> None:
    """Catches a blind split that depends on how records are batched or is lost on restore."""
    monkeypatch.setattr(kernels, "ENABLED", kernels_on and kernels.ENABLED)
    X, y = checkerboard(ROWS, seed=7)
    records = [{"a": float(a), "b": float(b)} for a, b in X]
    labels = y.tolist()
    make = MAKERS[name]
    looped = looped_and_restored(make(), records, labels, at=ROWS // 2)
    loop = looped.saved
    assert b'"blind_split":[1.0,0.49]' in loop
    assert looped.restored == loop
    assert _batched(make, records, labels, [ROWS]) == loop
    assert _batched(make, records, labels, [1, 299, 301, 700, 701]) == loop


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    seed=st.integers(0, 1000),
    cuts=st.lists(st.integers(1, 599), max_size=4, unique=True).map(sorted),
    grace=st.sampled_from([10, 20, 40]),
)
def test_any_batching_of_a_blind_splitting_tree_gives_the_loop_bytes(
    seed: int, cuts: list[int], grace: int
) -> None:
    """Any cut of a checkerboard into batches (short grace periods: blind splits at many points) gives
    the one-record loop's bytes."""
    X, y = checkerboard(600, seed=seed)
    records, labels = X.tolist(), y.tolist()
    make = lambda: SGTClassifier(grace_period=grace)  # noqa: E731
    loop = _loop(make, records, labels)
    assert _batched(make, records, labels, cuts) == loop


def test_a_model_saved_before_the_blind_split_learns_on_without_it() -> None:
    """A save without the blind split's key (as every save before it: the key is the only difference)
    restores without it and learns on as such a model did, saving no key. Catches a restore that gives
    an old model the class's blind split (it would then split the checkerboard)."""
    X, y = checkerboard(3000, seed=5)
    old = _Sighted()
    old.learn_many(X[:1500], y[:1500])
    saved = old.to_bytes()
    assert b"blind_split" not in saved
    restored = SGTClassifier.from_bytes(saved)
    assert restored._blind_split is None
    assert {t.params.blind_after for t in restored._trees} == {None}
    restored.learn_many(X[1500:], y[1500:])
    old.learn_many(X[1500:], y[1500:])
    assert restored.to_bytes() == old.to_bytes()
    assert restored.n_splits == 0


def test_the_saved_fixtures_restore_without_the_blind_split() -> None:
    """The release 0.1.0 classifier and the boosted classifier saved before the relaxation."""
    single = SGTClassifier.from_bytes(RELEASE.read_bytes())
    assert single._blind_split is None and b"blind_split" not in single.to_bytes()
    boosted = BoostedClassifier.from_bytes(BEFORE_RELAX.read_bytes())
    assert {t.params.blind_after for t in boosted._trees} == {None}


def test_only_the_single_classifier_splits_blind_by_default() -> None:
    """The regressors' leaves (an impurity from squared-error Hessians means nothing) and, for now, the
    boosted classifier's members keep splitting on gain (the single tree beside them splits blind)."""
    assert SGTClassifier()._blind_split == BLIND_SPLIT
    for model in (SGTRegressor(), BoostedRegressor(), BoostedClassifier(single_tree=False)):
        model.learn_many([[0.1], [0.9], [0.5]], [0, 1, 1])
        assert b"blind_split" not in model.to_bytes()
        assert {t.params.blind_after for t in model._trees} == {None}
    boosted = BoostedClassifier()
    boosted.learn_many([[0.1], [0.9], [0.5]], [0, 1, 1])
    assert boosted._single is not None and boosted._single._blind_split == BLIND_SPLIT
    assert {t.params.blind_after for t in boosted._trees} == {None}


@pytest.mark.parametrize("saved", [[1.0], [1.0, "0.47"], [True, 0.47], "on", [0.0, 0.47], [1.0, 1.5]])
def test_a_corrupt_saved_blind_split_is_refused(saved: object) -> None:
    with pytest.raises(SerializationError, match=r"blind_split must be"):
        saved_blind(saved)


def test_a_saved_blind_split_reads_back() -> None:
    assert saved_blind(None) is None
    assert saved_blind([1, 0.47]) == (1.0, 0.47)


def _columns(codes: list[int], g: list[float], bins: int = 8) -> np.ndarray:
    return block_stats(np.array(codes, dtype=np.intp), np.array(g), np.full(len(g), 0.25), bins + 1)


def test_the_median_split_halves_the_known_values() -> None:
    """Bins up to the one where the count reaches half go left; missing values join the larger side."""
    columns = _columns([1, 1, 2, 3, 5, 5, 6, 8, 0], [0.5, -0.5] * 4 + [0.1])
    candidate = _median_split(4, columns, lambda_=0.1)
    assert candidate is not None
    assert (candidate.feature, candidate.threshold) == (4, 2)  # codes 1..3 (4 values) go left
    assert candidate.missing_child == 0  # (4 known values each side: ties go left)
    assert candidate.deltas.shape == (2,)
    left = _columns([1, 1, 2, 3], [0.5, -0.5, 0.5, -0.5])[:, N].sum()
    assert left == 4


def test_no_median_split_where_one_side_would_be_empty() -> None:
    assert _median_split(0, _columns([3, 3, 3, 0], [0.5, -0.5, 0.5, 0.0]), lambda_=0.1) is None
    assert _median_split(0, _columns([0, 0], [0.5, -0.5]), lambda_=0.1) is None
