"""The boosted classifier's forest (`forest`, sgt.boosted.forest): bagged members that split on few
records, averaged, learn beside the boosted members and the single tree, and the choice
(sgt.boosted.classifier.SingleChoice) serves it, alone or in a mean, where it has erred least.

On a checkerboard no single split lowers the loss: the boosted members and the single tree learn little
of it in a few thousand records, the forest most of it. The forest retires for good once the ensemble
leads it, from `SingleChoice.YOUTH` records on while the ensemble serves, and at the first record of a
third class. A batch, the one-record loop and a restore give the same bits throughout.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import pairwise
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sgt import BoostedClassifier, kernels
from sgt.boosted.classifier import ForestClassifier, SingleChoice
from sgt.boosted.forest import CLASSIFIER_FOREST
from sgt.boosted.tree_choice import CANDIDATES
from sgt.serialization import SerializationError, decode, encode

#: the candidates that serve the forest: alone, its mean with the ensemble, its mean with the tree
FOREST_ALONE = len(SingleChoice.WEIGHTS)


def _board(n: int, seed: int = 3) -> tuple[np.ndarray, list[int]]:
    """A 4 x 4 checkerboard in two features: no single split gains."""
    rng = np.random.default_rng(seed)
    X = rng.uniform(0, 1, (n, 2))
    y = ((np.floor(4 * X[:, 0]) + np.floor(4 * X[:, 1])) % 2).astype(int)
    return X, y.tolist()


def _accuracy(model: Any, X: np.ndarray, y: Sequence[Any]) -> float:
    hits = 0
    for i in range(0, len(y), 1000):
        proba = model.predict_learn_many(X[i : i + 1000], y[i : i + 1000])
        labels = np.array(model.classes_)[proba.argmax(axis=1)]
        hits += int((labels == np.array(y[i : i + 1000])).sum())
    return hits / len(y)


def _loop(model: BoostedClassifier, X: np.ndarray, y: Sequence[Any]) -> np.ndarray:
    """predict_proba_one then learn_one per record, as [rows, classes known at the end]."""
    rows = []
    for row, target in zip(X, y, strict=True):
        record = {f"x{j}": float(v) for j, v in enumerate(row)}
        rows.append(model.predict_proba_one(record))
        model.learn_one(record, target)
    return np.array([[p.get(c, 0.0) for c in model.classes_] for p in rows])


def _batched(model: BoostedClassifier, X: np.ndarray, y: Sequence[Any], size: int) -> np.ndarray:
    parts = [model.predict_learn_many(X[i : i + size], y[i : i + size]) for i in range(0, len(y), size)]
    width = max(p.shape[1] for p in parts)
    return np.concatenate([np.pad(p, ((0, 0), (0, width - p.shape[1]))) for p in parts])


def test_the_forest_learns_the_checkerboard_the_others_do_not() -> None:
    X, y = _board(5000)
    model = BoostedClassifier(mondrian=False)  # (the Mondrian forest would serve over it here)
    with_forest = _accuracy(model, X, y)
    without = _accuracy(BoostedClassifier(forest=False, mondrian=False), X, y)
    assert with_forest >= without + 0.05, (with_forest, without)  # (0.91 against 0.83)
    assert model._choice is not None and model._choice.serving >= FOREST_ALONE  # (the forest serves)


# (the exactness tests below leave the Mondrian forest out: it is not this module's subject, its own
# exactness is test_boosted_mondrian.py's, and its Python walk made the SGT_KERNELS=0 case the slowest
# test of the module)
@pytest.mark.parametrize("enabled", [True, False], ids=["kernels", "SGT_KERNELS=0"])
def test_loop_batch_and_restore_give_the_same_bits(enabled: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(kernels, "ENABLED", enabled and kernels.ENABLED)
    X, y = _board(1800)
    batched = BoostedClassifier(mondrian=False)
    predictions = _batched(batched, X, y, 700)
    assert batched._choice is not None and batched._choice.serving >= FOREST_ALONE
    loop = BoostedClassifier(mondrian=False)
    np.testing.assert_array_equal(_loop(loop, X, y), predictions)
    assert loop.to_bytes() == batched.to_bytes()
    half = BoostedClassifier(mondrian=False)
    first = half.predict_learn_many(X[:900], y[:900])
    restored = BoostedClassifier.from_bytes(half.to_bytes())
    assert restored.to_bytes() == half.to_bytes() and restored._forest is not None
    rest = restored.predict_learn_many(X[900:], y[900:])
    np.testing.assert_array_equal(np.concatenate([first, rest]), predictions)
    assert restored.to_bytes() == batched.to_bytes()
    np.testing.assert_array_equal(
        restored.predict_proba_many(X[:40]),
        [[p[c] for c in restored.classes_] for p in map(restored.predict_proba_one, X[:40])],
    )


def test_a_third_class_retires_the_forest_at_its_record_batched_or_looped() -> None:
    X, y = _board(900)
    y = [2 if i == 650 else t for i, t in enumerate(y)]  # (a third class inside the second batch)
    batched = BoostedClassifier(mondrian=False)
    predictions = _batched(batched, X, y, 500)
    assert batched._forest is None and batched._choice is not None  # (the tree stays)
    loop = BoostedClassifier(mondrian=False)
    np.testing.assert_array_equal(_loop(loop, X, y), predictions)
    assert loop._forest is None and loop.to_bytes() == batched.to_bytes()
    restored = BoostedClassifier.from_bytes(batched.to_bytes())
    assert restored._forest is None and restored.forest is True
    assert restored.to_bytes() == batched.to_bytes()


def test_a_forest_without_the_tree_saves_the_choice_with_it() -> None:
    X, y = _board(1200)
    model = BoostedClassifier(single_tree=False)
    assert model._single is None and model._forest is not None
    model.learn_many(X[:600], y[:600])
    header = decode(model.to_bytes()).header
    assert "single" not in header["extra"] and len(header["extra"]["forest"]["choice"]) == len(CANDIDATES) + 2
    restored = BoostedClassifier.from_bytes(model.to_bytes())
    np.testing.assert_array_equal(
        restored.predict_learn_many(X[600:], y[600:]), model.predict_learn_many(X[600:], y[600:])
    )
    assert restored.to_bytes() == model.to_bytes()
    assert restored._choice is not None and all(
        "tree" not in CANDIDATES[k].models for k in restored._choice._open_candidates()
    )


def test_without_the_forest_the_bytes_are_the_format_before_it() -> None:
    X, y = _board(600)
    model = BoostedClassifier(forest=False)
    model.learn_many(X, y)
    header = decode(model.to_bytes()).header
    assert "forest" not in header["params"] and "forest" not in header["extra"]
    assert len(header["extra"]["single"]["choice"]) == len(SingleChoice.WEIGHTS) + 2
    restored = BoostedClassifier.from_bytes(model.to_bytes())
    assert restored.forest is False and restored._forest is None


def test_a_bad_forest_or_choice_is_refused() -> None:
    X, y = _board(300)
    model = BoostedClassifier()
    model.learn_many(X, y)
    header, arrays, _ = decode(model.to_bytes())
    header["extra"]["single"]["choice"] = [0] * (len(SingleChoice.WEIGHTS) + 2)  # (no forest counts)
    with pytest.raises(SerializationError, match="choice"):
        BoostedClassifier.from_bytes(encode(header, list(arrays.items())))
    header, arrays, _ = decode(model.to_bytes())
    header["extra"]["forest"] = "x"
    with pytest.raises(SerializationError, match="side model"):
        BoostedClassifier.from_bytes(encode(header, list(arrays.items())))
    with pytest.raises(SerializationError, match="lacks"):  # (serves the forest, which is not saved)
        SingleChoice.restored([0] * len(CANDIDATES) + [FOREST_ALONE, 0], tree=True, forest=False)


def test_the_forest_retires_once_the_ensemble_leads_and_the_tree_serves_on() -> None:
    choice = SingleChoice(tree=True, forest=True)
    right, wrong = [0.2, 0.8], [0.6, 0.4]  # (class 1 is right)
    for _ in range(SingleChoice.RETIRE):
        choice.learn({"ensemble": right, "tree": right, "forest": wrong}, 1)
    assert not choice.alive["forest"] and choice.alive["tree"] and not choice.retired
    assert FOREST_ALONE not in choice._open
    for _ in range(SingleChoice.MARGIN + 1):  # (the forest's candidates are neither counted nor served)
        choice.learn({"ensemble": wrong, "tree": right}, 1)
    assert choice.serving == 1 and choice.errors[FOREST_ALONE] == SingleChoice.RETIRE


def test_no_forest_with_a_budget_and_a_bad_value_is_named() -> None:
    assert BoostedClassifier(max_bytes=1_000_000)._forest is None
    assert BoostedClassifier().forest is True
    with pytest.raises(ValueError, match="forest"):
        BoostedClassifier(forest=1)  # type: ignore[arg-type]


def test_averaged_members_each_learn_the_target_alone() -> None:
    X, y = _board(800)
    settings = {**CLASSIFIER_FOREST, "poisson_rate": None, "max_bytes": None}
    # without bagging two averaged members learn the same records at the same point (the base score),
    # so they are the same tree, and their mean is the one member's score, bit for bit
    one = ForestClassifier(**{**settings, "n_members": 1, "learning_rate": 1.0})
    two = ForestClassifier(**{**settings, "n_members": 2, "learning_rate": 0.5})
    one.learn_many(X, y)
    two.learn_many(X, y)
    scores = [[one._predict_raw_one(row) for row in X[:50]], [two._predict_raw_one(row) for row in X[:50]]]
    assert scores[0] == scores[1]
    boosted = BoostedClassifier(**{**settings, "n_members": 2, "learning_rate": 0.5})
    boosted.learn_many(X, y)  # (the second member learns what the first leaves: another score)
    assert [boosted._predict_raw_one(row) for row in X[:50]] != scores[0]


def test_the_forest_counts_in_the_bytes() -> None:
    X, y = _board(800)
    model = BoostedClassifier(mondrian=False)
    model.learn_many(X, y)
    assert model._forest is not None and model._single is not None
    members = BoostedClassifier(single_tree=False, forest=False, mondrian=False)
    members.learn_many(X, y)
    assert model.nbytes == members.nbytes + model._single.nbytes + model._forest.nbytes


def _rows(draw: Any, n: int, k: int) -> np.ndarray:
    """`n` rows of `k` probabilities, coarse (ties happen, as the blends' argmax must settle them)."""
    raw = np.array(draw(st.lists(st.integers(0, 4), min_size=n * k, max_size=n * k)), dtype=np.float64)
    raw = raw.reshape(n, k) + 0.5
    return raw / raw.sum(axis=1, keepdims=True)


@st.composite
def _choices(draw: Any) -> tuple[SingleChoice, dict[str, np.ndarray], np.ndarray]:
    """A choice as a save may hold it (counts, the candidate serving, the records learned) and a batch
    of rows for it: several switches, retirements and unlearned rows (-1) inside one batch."""
    n, k = draw(st.integers(1, 60)), draw(st.integers(2, 3))
    tree, forest = draw(st.sampled_from([(True, True), (True, False), (False, True)]))
    names = ["ensemble", *(["tree"] if tree else []), *(["forest"] if forest else [])]
    predictions = {name: _rows(draw, n, k) for name in names}
    targets = np.array(draw(st.lists(st.integers(-1, k - 1), min_size=n, max_size=n)), dtype=np.intp)
    fresh = SingleChoice(tree=tree, forest=forest)
    errors = draw(st.lists(st.integers(0, 6), min_size=len(fresh.errors), max_size=len(fresh.errors)))
    serving = draw(st.sampled_from(fresh._open))
    learned = draw(st.integers(0, 40))
    return SingleChoice(errors, serving, learned, tree=tree, forest=forest), predictions, targets


@settings(max_examples=300, deadline=None)
@given(
    case=_choices(),
    youth=st.integers(1, 60),
    retire=st.integers(1, 8),
    margin=st.integers(0, 3),
    scan=st.integers(1, 8),
    cuts=st.lists(st.integers(1, 59), max_size=3),
)
def test_a_batch_serves_as_the_records_one_at_a_time(
    case: tuple[SingleChoice, dict[str, np.ndarray], np.ndarray],
    youth: int,
    retire: int,
    margin: int,
    scan: int,
    cuts: list[int],
) -> None:
    """`serve` over batches against `served` and `learn` a record at a time: the same probabilities,
    counts, serving candidate and retirements, whatever the models alive, the state the choice starts
    from, the classes (a third retires the forest), the rules' thresholds, where batches end and
    how far `serve` looks at once."""
    batch, predictions, targets = case
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(SingleChoice, "YOUTH", youth)
        patch.setattr(SingleChoice, "RETIRE", retire)
        patch.setattr(SingleChoice, "MARGIN", margin)
        patch.setattr(SingleChoice, "SCAN", scan)  # (events in the first window and after several)
        one = SingleChoice(
            batch.errors, batch.serving, batch.learned, tree=batch.alive["tree"], forest=batch.alive["forest"]
        )
        bounds = [0, *sorted({c for c in cuts if c < len(targets)}), len(targets)]
        served = np.concatenate(
            [
                batch.serve({name: p[lo:hi] for name, p in predictions.items()}, targets[lo:hi])
                for lo, hi in pairwise(bounds)
            ]
        )
        for i, target in enumerate(targets.tolist()):
            row = {name: p[i] for name, p in predictions.items() if one.alive[name]}
            expected = predictions["ensemble"][i] if one.serving == 0 else one.served(row)
            np.testing.assert_array_equal(served[i], expected)
            if target >= 0 and not one.retired:
                one.learn({name: p.tolist() for name, p in row.items()}, target)
    assert batch.state() == one.state() and batch.alive == one.alive
    assert all(type(v) is int for v in batch.state())  # (saved as they are)


def test_a_batch_before_any_class_serves_the_ensemble_and_counts_nothing() -> None:
    choice = SingleChoice(tree=True, forest=True)
    served = choice.serve({name: np.zeros((4, 0)) for name in ("ensemble", "tree", "forest")}, np.full(4, -1))
    assert served.shape == (4, 0) and choice.state() == SingleChoice(tree=True, forest=True).state()
