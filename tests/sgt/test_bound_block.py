"""`Params.bound_block`: a leaf at the depth bound, which can never split, lengthens its blocks past the
grace period (to k grace periods), so it attempts less often; its value still learns every record.

The setting changes nothing where it is not set (a model saves the bytes it saved before it), and
where it is set a batch, the one-record loop and a restore give the same bits, with and without the
compiled kernels, a memory budget included (its pending blocks are counted at their longest).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest

from sgt import SGTClassifier, kernels
from sgt.boosted.classifier import ForestClassifier
from sgt.boosted.forest import CLASSIFIER_FOREST, CLASSIFIER_FOREST_BOUND_BLOCK
from sgt.layout import Params
from sgt.serialization import SerializationError, decode, encode


def _stream(n: int, seed: int = 5) -> tuple[np.ndarray, list[int]]:
    """Three features, a noisy oblique boundary: a tree at depth 2 keeps learning its leaves' values."""
    rng = np.random.default_rng(seed)
    X = rng.uniform(0.0, 1.0, (n, 3))
    y = ((X[:, 0] + 0.5 * X[:, 1] > 0.75) ^ (rng.random(n) < 0.1)).astype(int)
    return X, y.tolist()


def _model(bound_block: int | None, max_bytes: int | None = None) -> SGTClassifier:
    model = SGTClassifier(max_depth=2, grace_period=10, delta=0.1, max_bytes=max_bytes)
    model.bound_block = bound_block  # (before its first tree, which reads it)
    return model


def _records(X: np.ndarray) -> list[dict[str, float]]:
    return [{f"x{j}": float(v) for j, v in enumerate(row)} for row in X]


def _batched(model: Any, X: np.ndarray, y: Sequence[int], size: int) -> np.ndarray:
    return np.concatenate(
        [model.predict_learn_many(X[i : i + size], y[i : i + size]) for i in range(0, len(y), size)]
    )


@pytest.mark.parametrize("max_bytes", [None, 30_000], ids=["unbounded", "budget"])
@pytest.mark.parametrize("enabled", [True, False], ids=["kernels", "SGT_KERNELS=0"])
def test_batch_loop_and_restore_give_the_same_bits(
    enabled: bool, max_bytes: int | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(kernels, "ENABLED", enabled and kernels.ENABLED)
    X, y = _stream(3000)
    batched = _model(4, max_bytes)
    predictions = _batched(batched, X, y, 700)
    tree = batched._trees[0]
    bound = tree.depth[tree.slot_node[: tree.n_slots]] >= 2
    assert bound.any() and (tree.block[: tree.n_slots][bound] > 10).any()  # (the setting acts)
    loop = _model(4, max_bytes)
    for k, record in enumerate(_records(X)):
        proba = loop.predict_proba_one(record)
        assert [proba.get(c, 0.0) for c in batched.classes_] == predictions[k].tolist()
        loop.learn_one(record, y[k])
    assert loop.to_bytes() == batched.to_bytes()
    restored = _model(4, max_bytes)
    _batched(restored, X[:1300], y[:1300], 650)
    restored = SGTClassifier.from_bytes(restored.to_bytes())
    assert restored.bound_block == 4
    _batched(restored, X[1300:], y[1300:], 850)
    assert restored.to_bytes() == batched.to_bytes()


def test_leaves_at_the_bound_attempt_less_and_others_as_before() -> None:
    """Catches a setting that does not act (the same bytes) or that reaches leaves above the bound (the
    first splits, where the root's attempts alone decide, would move)."""
    X, y = _stream(3000)
    before, after = _model(None), _model(8)
    _batched(before, X, y, 500)
    _batched(after, X, y, 500)
    assert before.to_bytes() != after.to_bytes()
    old, new = before._trees[0], after._trees[0]
    assert new.n_updates < old.n_updates  # (fewer value updates: fewer attempts at the bound)
    assert int(new.block[: new.n_slots].max()) == 80 and int(old.block[: old.n_slots].max()) == 10


def test_a_leaf_at_the_bound_whose_value_moves_attempts_again_soon() -> None:
    """Where the labels flip (a drift), a leaf at the bound whose value update passes starts its blocks
    over at one grace period, so its value follows the change; on the stationary stretch before, the
    blocks stay at their longest. Catches blocks that never shorten after an update (they stay at 80)."""
    X, y = _stream(4000)
    flipped = y[:2000] + [1 - v for v in y[2000:]]
    model = _model(8)
    _batched(model, X[:2000], flipped[:2000], 500)
    tree = model._trees[0]
    bound = tree.depth[tree.slot_node[: tree.n_slots]] >= 2
    assert tree.block[: tree.n_slots][bound].tolist() == [80] * int(bound.sum())
    updates = tree.n_updates
    _batched(model, X[2000:2150], flipped[2000:2150], 150)
    assert tree.n_updates > updates
    assert int(tree.block[: tree.n_slots][bound].min()) < 80


def test_unset_it_saves_the_bytes_of_before() -> None:
    X, y = _stream(800)
    model = _model(None)
    _batched(model, X, y, 400)
    assert "bound_block" not in decode(model.to_bytes()).header
    assert SGTClassifier.from_bytes(model.to_bytes()).bound_block is None


@pytest.mark.parametrize("bad", [0, 1, -3, 2.0, True, "4"])
def test_a_bad_value_is_rejected_naming_the_setting(bad: Any) -> None:
    with pytest.raises(ValueError, match="bound_block must be None or an integer >= 2"):
        Params(0.1, 10, 0.1, 0.0, 2, bound_block=bad)
    model = _model(None)
    model.bound_block = bad
    with pytest.raises(ValueError, match="bound_block"):
        model.learn_many([[0.1, 0.2, 0.3], [0.9, 0.8, 0.7]], [0, 1])
    X, y = _stream(200)
    saved = _model(4)
    _batched(saved, X, y, 200)
    blob = decode(saved.to_bytes())
    blob.header["bound_block"] = bad
    with pytest.raises(SerializationError, match="bound_block"):
        SGTClassifier.from_bytes(encode(blob.header, list(blob.arrays.items())))


def test_the_classifier_s_forest_bounds_its_blocks_and_learns_a_batch_as_its_loop() -> None:
    X, y = _stream(1500)
    settings = {**CLASSIFIER_FOREST, "max_depth": 3}
    batched, loop = ForestClassifier(**settings), ForestClassifier(**settings)
    predictions = _batched(batched, X, y, 500)
    for k, record in enumerate(_records(X)):
        proba = loop.predict_proba_one(record)
        assert [proba.get(c, 0.0) for c in batched.classes_] == predictions[k].tolist()
        loop.learn_one(record, y[k])
    assert loop.to_bytes() == batched.to_bytes()
    assert batched.bound_block == CLASSIFIER_FOREST_BOUND_BLOCK == 4
    trees = [tree for member in batched._members for tree in member._trees]
    assert all(tree.params.bound_block == 4 for tree in trees)
    assert max(int(tree.block[: tree.n_slots].max()) for tree in trees) > CLASSIFIER_FOREST["grace_period"]
    restored = ForestClassifier.from_bytes(batched.to_bytes())
    assert restored.bound_block == 4 and all(member.bound_block == 4 for member in restored._members)


def test_a_forest_saved_without_the_setting_restores_and_learns_without_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A forest saved before the setting (its header without `bound_block`) keeps attempting every grace
    period after a restore, its members too (which the restored class first makes with its own)."""
    X, y = _stream(2000)
    settings = {**CLASSIFIER_FOREST, "max_depth": 3}
    with monkeypatch.context() as patch:
        patch.setattr(ForestClassifier, "_bound_block", None)  # (the class before the setting)
        old, whole = ForestClassifier(**settings), ForestClassifier(**settings)
        _batched(old, X[:900], y[:900], 450)
        _batched(whole, X, y, 500)
    blob = old.to_bytes()
    assert "bound_block" not in decode(blob).header
    restored = ForestClassifier.from_bytes(blob)
    assert restored.bound_block is None and all(member.bound_block is None for member in restored._members)
    _batched(restored, X[900:], y[900:], 550)
    assert restored.to_bytes() == whole.to_bytes()
