"""The leaves' naive Bayes (`SGTClassifier(leaf_bayes=True)`, sgt.leaf_bayes): served only where it has
out-predicted the trees at a leaf, retired where it has fallen far behind them; any batching and a
restore give the same probabilities and the same bytes as a one-record loop, a batch on arrays as one
record at a time; a model without it saves the bytes it did; none within a memory budget."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sgt import SerializationError, SGTClassifier, leaf_bayes, leaf_bayes_batch
from sgt.leaf_bayes import LeafBayes
from tests.sgt.sgt_testkit import (
    as_dicts,
    bits,
    learned_in_pieces,
    looped_and_restored,
    mixed_records,
    multiclass_stream,
    predicted_then_learned,
)

SMALL = {"grace_period": 20, "grace_start": 10, "warm_up": 50}
PROPERTY = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _circle(n: int, seed: int = 0) -> tuple[list[dict[str, Any]], list[str]]:
    """A curved boundary in two features, a third class from row 300 on, 2% missing values and rows
    whose label is None (predicted only)."""
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1.0, 1.0, (n, 2))
    inside = (X**2).sum(axis=1) < 0.5
    y = np.where(inside, "in", "out").astype(object)
    third = (np.arange(n) >= 300) & (X[:, 0] > 0.8)
    y[third] = "edge"
    X[rng.uniform(size=X.shape) < 0.02] = np.nan
    labels: list[Any] = list(y)
    for i in rng.choice(n, n // 20, replace=False).tolist():
        labels[i] = None
    return as_dicts(X), labels


def _loop(model: SGTClassifier, X: list[dict[str, Any]], y: list[Any]) -> list[list[float]]:
    """Predict every row, learn the labelled ones: the probabilities in the final classes' columns."""
    out = []
    for x, label in zip(X, y, strict=True):
        p = model.predict_proba_one(x)
        out.append(p)
        if label is not None:
            model.learn_one(x, label)
    return [[p.get(c, 0.0) for c in model.classes_] for p in out]


def test_served_only_where_it_leads() -> None:
    bayes = LeafBayes(bins=8)
    for x, y in [([2], 0), ([7], 1)] * 3:
        bayes.learn((1,), x, [0], y, trees_label=1 - y, k=2)  # the trees always wrong
        bayes.learn((2,), x, [0], y, trees_label=y, k=2)  # the trees always right
    assert bayes.predict((1,), [7], [0], 2) is not None
    assert bayes.predict((2,), [7], [0], 2) is None  # a tie (both always right) keeps the trees
    assert bayes.predict((3,), [7], [0], 2) is None  # a cell that learned nothing
    estimate = bayes.predict((1,), [7], [0], 2)
    assert estimate is not None and estimate[1] > 0.9 and math.isclose(sum(estimate), 1.0)
    assert LeafBayes.served([0.2, 0.8], None) == [0.2, 0.8]
    assert LeafBayes.served([0.2, 0.8], [0.6, 0.4]) == [0.4, 0.6000000000000001]


def test_batch_equals_loop_and_restore() -> None:
    X, y = _circle(1500)
    loop = SGTClassifier(leaf_bayes=True, **SMALL)
    expected = _loop(loop, X, y)
    assert loop.n_splits > 0 and loop._leaf_bayes is not None and loop._leaf_bayes.cells
    served = sum(cell.bayes_right > cell.trees_right for cell in loop._leaf_bayes.cells.values())
    assert served > 0  # the property below is not vacuous: the naive Bayes serves somewhere
    batch = SGTClassifier(leaf_bayes=True, **SMALL)
    pieces = [
        batch.predict_learn_many(X[a:b], y[a:b]) for a, b in [(0, 7), (7, 400), (400, 1100), (1100, 1500)]
    ]
    got = np.concatenate([np.pad(p, ((0, 0), (0, 3 - p.shape[1]))) for p in pieces])
    assert np.array_equal(bits(got), bits(np.array(expected)))
    assert batch.to_bytes() == loop.to_bytes()
    restored = SGTClassifier.from_bytes(loop.to_bytes())
    assert restored.to_bytes() == loop.to_bytes()
    assert restored.get_params()["leaf_bayes"] is True


def test_restore_midway_goes_on_alike() -> None:
    X, y = multiclass_stream(1200, seed=3)
    result = looped_and_restored(SGTClassifier(leaf_bayes=True, **SMALL), as_dicts(X), list(y), 600)
    assert result.restored == result.saved
    assert result.restored_predictions == result.predictions


@PROPERTY
@given(
    cuts=st.lists(st.integers(1, 799), min_size=1, max_size=5, unique=True).map(sorted),
    methods=st.lists(
        st.sampled_from(["learn_many", "predict_learn_many", "loop", "restore"]), min_size=6, max_size=6
    ),
)
def test_any_batching_gives_the_same_model(cuts: list[int], methods: list[str]) -> None:
    X, y = mixed_records(800, seed=5)
    reference = SGTClassifier(leaf_bayes=True, **SMALL)
    expected = predicted_then_learned(reference, X, y)
    model, got = learned_in_pieces(SGTClassifier(leaf_bayes=True, **SMALL), X, y, cuts, methods)
    assert model.to_bytes() == reference.to_bytes()
    for row, (a, b) in enumerate(zip(got, expected, strict=True)):
        if a is None:
            continue
        values = list(b.values()) if isinstance(b, dict) else b
        if isinstance(a, dict):
            a = list(a.values())
        assert bits(np.array(a[: len(values)])).tolist() == bits(np.array(values)).tolist(), row


def test_none_within_a_memory_budget() -> None:
    model = SGTClassifier(**SMALL, max_bytes=200_000, leaf_bayes=True)
    assert model._leaf_bayes is None and model.get_params()["leaf_bayes"] is True


@pytest.mark.parametrize("behind", [leaf_bayes.BEHIND, 4])
def test_the_array_replay_is_the_one_record_replay(monkeypatch: pytest.MonkeyPatch, behind: int) -> None:
    """A batch's log replayed on arrays gives the bits of the same log replayed one record at a time
    (`SHORT` picks the path per piece); with cells retiring early, cells retire within pieces."""
    X, y = _circle(1200, seed=4)
    params = {**SMALL, "leaf_bayes": True}
    monkeypatch.setattr(leaf_bayes, "BEHIND", behind)
    runs = []
    for short in (0, 10**9):
        monkeypatch.setattr(leaf_bayes_batch, "SHORT", short)
        model = SGTClassifier(**params)
        pieces, saved, retired = [], [], 0
        for a in range(0, 1200, 150):
            pieces.append(model.predict_learn_many(X[a : a + 150], y[a : a + 150]))
            saved.append(model.to_bytes())
            assert model._leaf_bayes is not None
            retired += len(model._leaf_bayes.retired)
        proba = np.concatenate([np.pad(p, ((0, 0), (0, 3 - p.shape[1]))) for p in pieces])
        runs.append((bits(proba).tolist(), saved))
        assert (retired > 0) == (behind < 10)  # (the early retirement is not vacuous)
    assert runs[0] == runs[1]


def test_a_cell_far_behind_the_trees_retires() -> None:
    """A cell whose naive Bayes has been right `behind` times fewer than the trees stops learning and is
    never served; it stays retired through a save, and is forgotten when its leaf splits."""
    bayes = LeafBayes(bins=8)
    bayes.behind = 3
    for x, y in [([2], 0), ([7], 1)] * 3:
        bayes.learn((1,), x, [0], y, trees_label=y, k=2)  # both right
    for _ in range(3):
        bayes.learn((1,), [2], [0], 1, trees_label=1, k=2)  # the naive Bayes wrong, the trees right
    assert (1,) in bayes.retired and (1,) not in bayes.cells
    bayes.learn((1,), [2], [0], 1, trees_label=0, k=2)
    assert (1,) not in bayes.cells and bayes.predict((1,), [2], [0], 2) is None
    assert bayes.nbytes(2, 1) == 8
    restored = LeafBayes.restore(8, dict(bayes.arrays(1, 2, 1)), 1, 2, 1)
    assert restored.retired == {(1,)}

    class Split:
        feature = (-1, 0)  # node 1 split, node 0 a leaf

    bayes.prune([Split()])  # type: ignore[list-item]  # a stand-in with the one attribute prune reads
    assert not bayes.retired


def test_without_it_nothing_changes() -> None:
    X, y = mixed_records(600, seed=1)
    plain = SGTClassifier(**SMALL, leaf_bayes=False)
    plain.learn_many(X, y)
    assert "leaf_bayes" not in plain.to_bytes()[:4096].decode("latin-1")  # the format before it
    assert SGTClassifier.from_bytes(plain.to_bytes()).get_params()["leaf_bayes"] is False
    assert SGTClassifier().get_params()["leaf_bayes"] is True  # the default


def test_it_helps_on_a_curved_boundary() -> None:
    X, y = _circle(3000, seed=7)
    rows = [(x, label) for x, label in zip(X, y, strict=True) if label is not None]
    right = {}
    for with_it in (False, True):
        model = SGTClassifier(leaf_bayes=with_it)
        hits = 0
        for x, label in rows:
            hits += model.predict_one(x) == label
            model.learn_one(x, label)
        right[with_it] = hits / len(rows)
    assert right[True] > right[False]


def test_bad_values_are_refused() -> None:
    with pytest.raises(ValueError, match="leaf_bayes must be True or False"):
        SGTClassifier(leaf_bayes=1)  # type: ignore[arg-type]
    X, y = multiclass_stream(400)
    model = SGTClassifier(leaf_bayes=True, **SMALL)
    model.learn_many(as_dicts(X), list(y))
    assert model._leaf_bayes is not None
    arrays = dict(model._leaf_bayes.arrays(len(model._trees), 3, model._layout.n_features))
    arrays["leaf_bayes.tally"] = arrays["leaf_bayes.tally"][:, :1]
    with pytest.raises(ValueError, match="tally has shape"):
        LeafBayes.restore(model.bins, arrays, len(model._trees), 3, model._layout.n_features)
    blob = bytearray(model.to_bytes())
    with pytest.raises(SerializationError):
        SGTClassifier.from_bytes(bytes(blob[: len(blob) // 2]))
