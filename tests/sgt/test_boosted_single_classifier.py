"""The boosted classifier's single tree (`single_tree`): a single SGTClassifier learns beside the
members, and the ensemble's probabilities or the tree's serve, whichever made fewer errors over the
learned records by a margin; the tree retires once the ensemble leads by `SingleChoice.RETIRE` errors
(sgt.boosted.classifier.SingleChoice).

On a checkerboard no single split lowers the loss: the single classifier splits blind there, the
members do not, and the single tree serves. The forest beside them (`forest`) has its own tests
(test_boosted_forest_classifier.py); here it is off, so the tree's rules are seen alone. Models
saved before the parameter restore without the tree and predict as they did; a model saved after
its tree retired restores without it.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from sgt import BoostedClassifier, SGTClassifier, kernels
from sgt.boosted.classifier import SingleChoice
from sgt.serialization import SerializationError, decode, encode
from tests.fixtures.make_single_fixture import PARAMS, ROWS, checkerboard
from tests.floats import assert_within_ulps

#: a BoostedClassifier saved by the code before the single tree (tests/fixtures/make_single_fixture.py)
BEFORE_SINGLE = Path(__file__).resolve().parents[1] / "fixtures" / "boosted-before-single" / "classifier.sgt"
#: a BoostedClassifier saved by the code whose choice had two candidates, and what it predicted next
#: (tests/fixtures/make_two_choice_fixture.py)
TWO_CHOICE = Path(__file__).resolve().parents[1] / "fixtures" / "boosted-two-choice"


def _board(n: int, seed: int = 3) -> tuple[np.ndarray, list[int]]:
    """A 4 x 4 checkerboard in two features: no single split gains."""
    rng = np.random.default_rng(seed)
    X = rng.uniform(0, 1, (n, 2))
    y = ((np.floor(4 * X[:, 0]) + np.floor(4 * X[:, 1])) % 2).astype(int)
    return X, y.tolist()


def _line(n: int, seed: int = 5) -> tuple[np.ndarray, list[str]]:
    """A noisy linear boundary in four features, three string classes: the members fit it well."""
    rng = np.random.default_rng(seed)
    X = rng.uniform(0, 1, (n, 4))
    score = X[:, 0] + X[:, 1] - X[:, 2] + rng.normal(0, 0.1, n)
    y = np.where(score < 0.3, "a", np.where(score < 0.8, "b", "c"))
    return X, y.tolist()


def _two(ensemble: Any, tree: Any) -> dict[str, Any]:
    """The ensemble's and the tree's predictions as a choice takes them."""
    return {"ensemble": ensemble, "tree": tree}


def _records(X: np.ndarray) -> list[dict[str, float]]:
    names = [f"x{j}" for j in range(X.shape[1])]
    return [dict(zip(names, row.tolist(), strict=True)) for row in X]


def _accuracy(model: BoostedClassifier | SGTClassifier, X: np.ndarray, y: Sequence[Any]) -> float:
    hits = 0
    for i in range(0, len(y), 1000):
        proba = model.predict_learn_many(X[i : i + 1000], y[i : i + 1000])
        labels = np.array(model.classes_)[proba.argmax(axis=1)]
        hits += int((labels == np.array(y[i : i + 1000])).sum())
    return hits / len(y)


def _loop(model: BoostedClassifier, X: np.ndarray, y: Sequence[Any]) -> np.ndarray:
    """predict_proba_one then learn_one per record, as [rows, classes known at the end]."""
    rows = []
    for record, target in zip(_records(X), y, strict=True):
        rows.append(model.predict_proba_one(record))
        model.learn_one(record, target)
    return np.array([[row.get(c, 0.0) for c in model.classes_] for row in rows])


def test_the_checkerboard_is_learned_as_by_the_single_tree() -> None:
    X, y = _board(6000)
    with_tree = _accuracy(BoostedClassifier(single_tree=True, forest=False, mondrian=False), X, y)
    members = _accuracy(BoostedClassifier(single_tree=False, forest=False, mondrian=False), X, y)
    single = _accuracy(SGTClassifier(leaf_bayes=False), X, y)  # the single tree beside the members
    assert with_tree >= members + 0.015, (with_tree, members, single)  # (0.826 against 0.803)
    assert with_tree >= single - 0.01, (with_tree, single)


def test_a_stream_the_members_fit_better_keeps_their_probabilities() -> None:
    X, y = _line(6000)
    model = BoostedClassifier(single_tree=True, forest=False, mondrian=False)
    with_tree = _accuracy(model, X, y)
    members = _accuracy(BoostedClassifier(single_tree=False, forest=False, mondrian=False), X, y)
    assert with_tree >= members - 0.005, (with_tree, members)
    assert model._single is None  # retired: the ensemble led by RETIRE errors


@pytest.mark.parametrize("enabled", [True, False], ids=["kernels", "SGT_KERNELS=0"])
def test_loop_batch_and_restore_give_the_same_bits(enabled: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(kernels, "ENABLED", enabled and kernels.ENABLED)
    X, y = _board(2400)
    batched = BoostedClassifier(single_tree=True, forest=False, mondrian=False)
    predictions = np.concatenate(
        [
            np.pad(p, ((0, 0), (0, 2 - p.shape[1])))
            for p in (
                batched.predict_learn_many(X[i : i + 700], y[i : i + 700]) for i in range(0, len(y), 700)
            )
        ]
    )
    assert batched._choice is not None and batched._choice.serving == 2  # (a blend serves: the mean)
    loop = BoostedClassifier(single_tree=True, forest=False, mondrian=False)
    np.testing.assert_array_equal(_loop(loop, X, y), predictions)
    assert loop.to_bytes() == batched.to_bytes()
    half = BoostedClassifier(single_tree=True, forest=False, mondrian=False)
    first = half.predict_learn_many(X[:1100], y[:1100])
    restored = BoostedClassifier.from_bytes(half.to_bytes())
    assert restored.to_bytes() == half.to_bytes()
    rest = restored.predict_learn_many(X[1100:], y[1100:])
    np.testing.assert_array_equal(np.concatenate([first, rest]), predictions)
    assert restored.to_bytes() == batched.to_bytes()
    records = _records(X[:50])
    np.testing.assert_array_equal(restored.predict_many(X[:50]), [restored.predict_one(r) for r in records])
    np.testing.assert_array_equal(
        restored.predict_proba_many(X[:50]),
        [[p[c] for c in restored.classes_] for p in map(restored.predict_proba_one, records)],
    )


def test_a_retiring_tree_gives_the_same_bits_batched_and_looped(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(SingleChoice, "RETIRE", 10)  # (the ensemble leads by 38 errors at the end)
    X, y = _line(3000)
    batched = BoostedClassifier(single_tree=True, forest=False, mondrian=False)
    predictions = batched.predict_learn_many(X, y)
    assert batched._single is None  # (retired inside the batch)
    loop = BoostedClassifier(single_tree=True, forest=False, mondrian=False)
    np.testing.assert_array_equal(_loop(loop, X, y), predictions)
    assert loop._single is None and loop.to_bytes() == batched.to_bytes()
    restored = BoostedClassifier.from_bytes(batched.to_bytes())
    assert restored._single is None and restored.single_tree is True
    assert restored.to_bytes() == batched.to_bytes()


def test_rows_only_predicted_leave_the_choice_alone() -> None:
    X, y = _board(1500)
    model = BoostedClassifier(single_tree=True, forest=False, mondrian=False)
    model.learn_many(X[:1000], y[:1000])
    assert model._choice is not None
    before, saved = model._choice.state(), model.to_bytes()
    mixed = [None if i % 2 else t for i, t in enumerate(y[1000:])]
    predictions = model.predict_learn_many(X[1000:], mixed)
    other = BoostedClassifier.from_bytes(saved)
    expected = []
    for record, target in zip(_records(X[1000:]), mixed, strict=True):
        expected.append([other.predict_proba_one(record)[c] for c in other.classes_])
        if target is not None:
            other.learn_one(record, target)
    np.testing.assert_array_equal(predictions, expected)
    assert model.to_bytes() == other.to_bytes()
    fresh = BoostedClassifier.from_bytes(saved)
    fresh.predict_many(X[1000:])
    assert fresh._choice is not None and fresh._choice.state() == before


def test_a_model_saved_before_the_single_tree_predicts_without_it() -> None:
    X, y = _board(2000)
    model = BoostedClassifier(single_tree=True, forest=False, mondrian=False)
    model.learn_many(X[:1000], y[:1000])
    header, arrays, _ = decode(model.to_bytes())
    assert header["params"].pop("single_tree") is True
    assert set(header["extra"].pop("single")) == {"header", "version", "choice"}
    arrays = {name: a for name, a in arrays.items() if not name.startswith("extra.single.")}
    old = BoostedClassifier.from_bytes(encode(header, list(arrays.items())))
    assert old._single is None and old.get_params()["single_tree"] is False
    members = BoostedClassifier(single_tree=False, forest=False, mondrian=False)
    members.learn_many(X[:1000], y[:1000])
    assert old.to_bytes() == members.to_bytes()  # (saved as before the parameter)
    np.testing.assert_array_equal(
        old.predict_learn_many(X[1000:], y[1000:]), members.predict_learn_many(X[1000:], y[1000:])
    )
    saved = decode(old.to_bytes())
    assert "single_tree" not in saved.header["params"] and "single" not in saved.header["extra"]
    assert not any(name.startswith("extra.single.") for name in saved.arrays)


def test_a_model_saved_by_the_code_before_restores_and_learns_on_as_the_members_alone() -> None:
    blob = BEFORE_SINGLE.read_bytes()
    restored = BoostedClassifier.from_bytes(blob)
    assert restored._single is None and restored.single_tree is False
    assert restored.to_bytes() == blob
    # the members alone, learned here: the fixture's state up to the CPU's last bits (tests/floats.py),
    # so the two are compared within ulps, not byte for byte
    X, y = checkerboard(ROWS)
    members = BoostedClassifier(**PARAMS, single_tree=False, forest=False, mondrian=False)
    members.learn_many(X[: ROWS // 2], y[: ROWS // 2])
    assert_within_ulps(
        restored.predict_proba_many(X[ROWS // 2 :]), members.predict_proba_many(X[ROWS // 2 :])
    )
    np.testing.assert_allclose(
        restored.predict_learn_many(X[ROWS // 2 :], y[ROWS // 2 :]),
        members.predict_learn_many(X[ROWS // 2 :], y[ROWS // 2 :]),
        rtol=1e-9,
        atol=1e-12,
    )
    assert restored._single is None
    assert BoostedClassifier.from_bytes(restored.to_bytes()).to_bytes() == restored.to_bytes()


def test_a_bad_choice_is_refused() -> None:
    X, y = _board(500)
    model = BoostedClassifier(single_tree=True, forest=False, mondrian=False)
    model.learn_many(X, y)
    header, arrays, _ = decode(model.to_bytes())
    blends = [0] * len(SingleChoice.WEIGHTS)
    for bad in (
        [1, 2, 0],
        [1.0, 2, 0, 5],
        [1, 2, 2, 5],
        "x",
        [True, 1, 0, 5],
        [-1, 2, 0, 5],
        [1, 2, 3, 0, 5],
        [*blends, len(blends), 5],
    ):
        header["extra"]["single"]["choice"] = bad
        with pytest.raises(SerializationError, match="choice"):
            BoostedClassifier.from_bytes(encode(header, list(arrays.items())))


def test_no_single_tree_with_a_budget_and_a_bad_value_is_named() -> None:
    assert BoostedClassifier(max_bytes=1_000_000)._single is None
    assert BoostedClassifier()._single is not None and BoostedClassifier().single_tree is True
    with pytest.raises(ValueError, match="single_tree"):
        BoostedClassifier(single_tree=1)  # type: ignore[arg-type]


def test_the_choice_keeps_its_candidate_within_the_margin_and_retires_the_tree() -> None:
    choice = SingleChoice()
    right, wrong = [0.2, 0.8], [0.6, 0.4]  # (class 1 is right)
    for _ in range(SingleChoice.MARGIN):
        choice.learn(_two(wrong, right), 1)  # the tree leads, by the margin, not more
    assert choice.serving == 0 and choice.errors[:2] == [SingleChoice.MARGIN, 0]
    choice.learn(_two(wrong, right), 1)
    assert choice.serving == 1 and not choice.retired  # (the first of the fewest errors: the tree)
    choice.learn(_two([0.5, 0.5], [0.5, 0.5]), 1)  # ties: the first class, an error of both
    assert choice.errors[:2] == [SingleChoice.MARGIN + 2, 1]
    while not choice.retired:
        choice.learn(_two(right, wrong), 1)
    assert choice.serving == 0 and choice.errors[1] - choice.errors[0] == SingleChoice.RETIRE


def test_the_tree_retires_when_old_unless_it_serves(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(SingleChoice, "YOUTH", 10)
    serving, level = SingleChoice(), SingleChoice()
    right, wrong = [0.2, 0.8], [0.6, 0.4]
    for _ in range(9):
        serving.learn(_two(wrong, right), 1)
        level.learn(_two(right, right), 1)
    assert serving.serving == 1 and not level.retired and level.learned == 9
    serving.learn(_two(wrong, right), 1)
    level.learn(_two(right, right), 1)
    assert not serving.retired and level.retired


def test_the_single_trees_bytes_count() -> None:
    X, y = _board(1500)
    model = BoostedClassifier(single_tree=True, forest=False, mondrian=False)
    model.learn_many(X, y)
    assert model._single is not None
    members = BoostedClassifier(single_tree=False, forest=False, mondrian=False)
    members.learn_many(X, y)
    assert model.nbytes == members.nbytes + model._single.nbytes


def _apart(choice: SingleChoice, records: int) -> None:
    """`records` records of class 1 on which the ensemble and the tree err by turns, each by a small
    margin where the other is sure: their mean is always right."""
    sure, unsure = [0.2, 0.8], [0.6, 0.4]
    for i in range(records):
        choice.learn(_two(*((sure, unsure) if i % 2 else (unsure, sure))), 1)


def test_a_blend_serves_where_the_two_err_apart() -> None:
    choice = SingleChoice()
    _apart(choice, 2 * SingleChoice.MARGIN + 2)
    mean = SingleChoice.WEIGHTS.index(0.5)
    assert choice.errors[:2] == [SingleChoice.MARGIN + 1] * 2 and choice.errors[mean] == 0
    assert choice.serving == mean and not choice.retired  # (the first candidate without an error)
    rows = choice.served(_two(np.array([0.2, 0.8]), np.array([0.6, 0.4])))
    np.testing.assert_allclose(rows, [0.4, 0.6])
    rowwise = [choice.served(_two(e, t)) for e, t in ((0.2, 0.6), (0.8, 0.4))]
    np.testing.assert_array_equal(rows, rowwise)  # (the same bits)
    # saved before the blends: two candidates
    before = SingleChoice.restored([0, 0, 0, 0], tree=True, forest=False)
    _apart(before, 2 * SingleChoice.MARGIN + 2)
    assert before.state() == [
        SingleChoice.MARGIN + 1,
        SingleChoice.MARGIN + 1,
        0,
        2 * SingleChoice.MARGIN + 2,
    ]


def test_the_blends_on_the_checkerboard_beat_the_tree_or_the_ensemble() -> None:
    X, y = _board(3000)
    model = BoostedClassifier(single_tree=True, forest=False, mondrian=False)
    blends = _accuracy(model, X, y)
    assert model._choice is not None and model._choice.serving >= 2  # (a blend serves)
    two = BoostedClassifier(single_tree=True, forest=False, mondrian=False)
    # the two candidates before the blends
    two._choice = SingleChoice.restored([0, 0, 0, 0], tree=True, forest=False)
    assert blends >= _accuracy(two, X, y) + 0.003


def test_a_model_saved_with_two_candidates_keeps_them_and_learns_on_as_it_did() -> None:
    blob = (TWO_CHOICE / "classifier.sgt").read_bytes()
    restored = BoostedClassifier.from_bytes(blob)
    assert restored._choice is not None and len(restored._choice.errors) == 2
    assert restored._choice.serving == 1  # (the tree served)
    assert restored.to_bytes() == blob
    X, y = checkerboard(1800)
    after = restored.predict_learn_many(X[900:], y[900:])
    # learned on another CPU: the same up to the last bits (tests/floats.py)
    np.testing.assert_allclose(after, np.load(TWO_CHOICE / "after.npy"), rtol=1e-9, atol=1e-12)


def test_rows_predicted_before_any_class_leave_the_choice_alone() -> None:
    choice = SingleChoice()
    served = choice.serve(_two(np.zeros((3, 0)), np.zeros((3, 0))), np.array([-1, -1, -1]))
    assert served.shape == (3, 0) and choice.state() == SingleChoice().state()
