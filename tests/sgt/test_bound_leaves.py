"""A constant leaf of a one-output tree at the depth bound gathers no split statistics, only its total
(`LeafLearner._total_only`): it never splits, and its value update reads its total alone.

So the model predicts and learns exactly as one whose bound leaves gather them (the statistics are
never read there; the memory budget counts them as before), saves fewer bytes, and a model saved by
the code before (its bound leaves holding statistics) restores and goes on predicting the same.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

from sgt import SGTClassifier, kernels
from sgt.boosted.classifier import ForestClassifier
from sgt.boosted.forest import CLASSIFIER_FOREST
from sgt.leaf import LeafLearner
from sgt.serialization import decode
from sgt.tree import Tree


def _stream(n: int, seed: int = 11) -> tuple[np.ndarray, list[int]]:
    """Four features, a noisy oblique boundary: the trees reach their depth bound and keep learning."""
    rng = np.random.default_rng(seed)
    X = rng.uniform(0.0, 1.0, (n, 4))
    y = ((X[:, 0] + 0.7 * X[:, 1] - 0.3 * X[:, 2] > 0.6) ^ (rng.random(n) < 0.1)).astype(int)
    return X, y.tolist()


def _models() -> dict[str, Any]:
    return {
        "single": SGTClassifier(max_depth=2, grace_period=20, delta=0.1, leaf_model="constant"),
        "budget": SGTClassifier(
            max_depth=3, grace_period=20, delta=0.1, leaf_model="constant", max_bytes=60_000
        ),
        "forest": ForestClassifier(**{**CLASSIFIER_FOREST, "max_depth": 3}),
    }


def _trees(model: Any) -> Iterator[Tree]:
    members = getattr(model, "_members", None)
    for owner in [model] if members is None else members:
        yield from owner._trees


def _learn(model: Any, X: np.ndarray, y: list[int]) -> np.ndarray:
    return np.concatenate(
        [model.predict_learn_many(X[i : i + 400], y[i : i + 400]) for i in range(0, len(y), 400)]
    )


def _bound_statistics(model: Any) -> list[np.ndarray]:
    held = []
    for tree in _trees(model):
        for slot in range(tree.n_slots):
            at_bound = tree.depth[tree.slot_node[slot]] >= tree.params.max_depth
            if at_bound and tree.active[slot]:
                held.append(tree.stats[slot])
    return held


@pytest.mark.parametrize("name", ["single", "budget", "forest"])
@pytest.mark.parametrize("enabled", [True, False], ids=["kernels", "SGT_KERNELS=0"])
def test_bound_leaves_learn_as_before_without_statistics(
    name: str, enabled: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Catches bound leaves that gather statistics (the code before: they hold some), or a model that
    then predicts or learns otherwise than one whose bound leaves gather them."""
    monkeypatch.setattr(kernels, "ENABLED", enabled and kernels.ENABLED)
    X, y = _stream(2400)
    model = _models()[name]
    predictions = _learn(model, X, y)
    held = _bound_statistics(model)
    assert held and not any(stats.any() for stats in held)
    with monkeypatch.context() as before:
        before.setattr(LeafLearner, "_total_only", lambda self, slot: False)
        before.setattr(kernels, "ENABLED", False)  # (the numpy merge of every active leaf's statistics)
        gathering = _models()[name]
        assert np.array_equal(_learn(gathering, X, y), predictions)
    assert any(stats.any() for stats in _bound_statistics(gathering))
    for ours, theirs in zip(_trees(model), _trees(gathering), strict=True):
        for array in ("value", "feature", "threshold", "block", "pending_n", "total", "active", "promise"):
            assert np.array_equal(getattr(ours, array), getattr(theirs, array), equal_nan=True), array
    assert len(model.to_bytes()) < len(gathering.to_bytes())


@pytest.mark.parametrize("name", ["single", "forest"])
def test_a_model_saved_with_bound_statistics_restores_and_predicts_the_same(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A save of the code before (bound leaves holding statistics) restores, and goes on learning and
    predicting as the model that never gathered them."""
    X, y = _stream(2400)
    with monkeypatch.context() as before:
        before.setattr(LeafLearner, "_total_only", lambda self, slot: False)
        before.setattr(kernels, "ENABLED", False)
        old = _models()[name]
        _learn(old, X[:1200], y[:1200])
        blob = old.to_bytes()
    assert any(stats.any() for stats in _bound_statistics(old))
    model = _models()[name]
    _learn(model, X[:1200], y[:1200])
    restored = type(model).from_bytes(blob)
    assert restored.to_bytes() == blob
    assert np.array_equal(_learn(restored, X[1200:], y[1200:]), _learn(model, X[1200:], y[1200:]))
    saved, ours = decode(restored.to_bytes()), decode(model.to_bytes())
    # (the header's table of arrays differs in the statistics' lengths alone)
    assert {**ours.header, "arrays": None} == {**saved.header, "arrays": None}
    statistics = [name for name in ours.arrays if name.endswith((".stats_index", ".stats_rows"))]
    for array in ours.arrays:
        if array not in statistics:
            assert np.array_equal(ours.arrays[array], saved.arrays[array], equal_nan=True), array
