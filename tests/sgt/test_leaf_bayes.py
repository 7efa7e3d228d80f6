"""The leaves' naive Bayes (`SGTClassifier(leaf_bayes=True)`, sgt.leaf_bayes): served only where it has
out-predicted the trees at a leaf; any batching, a memory budget's cuts and a restore give the same
probabilities and the same bytes as a one-record loop; a model without it saves the bytes it did."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sgt import SerializationError, SGTClassifier, leaf_bayes_batch
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


def test_a_memory_budget_cuts_batches_alike() -> None:
    X, y = mixed_records(900, seed=2)
    for x in X[400:]:
        x["late"] = 1.0  # a feature first learned mid-batch: the budget cuts the batch there
    params = {**SMALL, "max_bytes": 200_000, "leaf_bayes": True}
    loop = SGTClassifier(**params)
    expected = predicted_then_learned(loop, X, y)
    batch = SGTClassifier(**params)
    got = batch.predict_learn_many(X, y)
    assert batch.to_bytes() == loop.to_bytes()
    assert [list(p.values()) for p in expected[-5:]] == got[-5:].tolist()


@pytest.mark.parametrize("budget", [None, 200_000])
def test_the_array_replay_is_the_one_record_replay(
    monkeypatch: pytest.MonkeyPatch, budget: int | None
) -> None:
    """A batch's log replayed on arrays gives the bits of the same log replayed one record at a time
    (`SHORT` picks the path per piece); with a budget, rows the hooks logged one by one (a cut batch)
    are in the pieces too."""
    X, y = _circle(1200, seed=4)
    for x in X[500:]:
        x["late"] = 1.0  # a feature first learned mid-batch: a budget cuts the batch there
    params = {**SMALL, "leaf_bayes": True, "max_bytes": budget}
    runs = []
    for short in (0, 10**9):
        monkeypatch.setattr(leaf_bayes_batch, "SHORT", short)
        model = SGTClassifier(**params)
        pieces = [model.predict_learn_many(X[a : a + 300], y[a : a + 300]) for a in range(0, 1200, 300)]
        proba = np.concatenate([np.pad(p, ((0, 0), (0, 3 - p.shape[1]))) for p in pieces])
        runs.append((bits(proba).tolist(), model.to_bytes()))
    assert runs[0] == runs[1]


def test_without_it_nothing_changes() -> None:
    X, y = mixed_records(600, seed=1)
    plain = SGTClassifier(**SMALL)
    plain.learn_many(X, y)
    assert "leaf_bayes" not in plain.to_bytes()[:4096].decode("latin-1")  # the format before it
    assert SGTClassifier.from_bytes(plain.to_bytes()).get_params()["leaf_bayes"] is False


def test_it_helps_on_a_curved_boundary() -> None:
    X, y = _circle(3000, seed=7)
    rows = [(x, label) for x, label in zip(X, y, strict=True) if label is not None]
    right = {}
    for leaf_bayes in (False, True):
        model = SGTClassifier(leaf_bayes=leaf_bayes)
        hits = 0
        for x, label in rows:
            hits += model.predict_one(x) == label
            model.learn_one(x, label)
        right[leaf_bayes] = hits / len(rows)
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
