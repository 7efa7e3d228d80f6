"""The boosted regressor's single tree (`single_tree`): a single SGTRegressor with its own leaf choice
learns beside the members, and the ensemble's prediction, the tree's, their mean or a blend of the two
in eighths serves, whichever has the lowest faded absolute error (sgt.boosted.tree_choice.TreeChoice).

The ensemble's members have linear leaves: on a step-shaped target the single tree's constant-leaf
tree had half the ensemble's MAE, and on others the mean of the two beat both. Models saved before the
parameter restore without the tree and predict as they did; models saved with the first three
candidates alone (before the other blends) keep choosing among those three.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sgt import BoostedRegressor, SGTRegressor, kernels
from sgt.boosted.tree_choice import TreeChoice
from sgt.explain import explain_raw
from sgt.losses import Huber, Poisson
from sgt.serialization import SerializationError, decode, encode
from tests.sgt.sgt_testkit import counted_encodings, looped_with_restore


def _steps(n: int, seed: int = 3) -> tuple[np.ndarray, np.ndarray]:
    """A target of several steps in one feature, two irrelevant features, little noise."""
    rng = np.random.default_rng(seed)
    X = rng.uniform(0, 1, (n, 3))
    y = np.floor(X[:, 0] * 6) * 2.0 + rng.normal(0, 0.1, n)
    return X, y


def _friedman(n: int, seed: int = 5) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = rng.uniform(0, 1, (n, 10))
    y = 10 * np.sin(np.pi * X[:, 0] * X[:, 1]) + 20 * (X[:, 2] - 0.5) ** 2 + 10 * X[:, 3] + 5 * X[:, 4]
    return X, y + rng.normal(0, 1, n)


def _records(X: np.ndarray) -> list[dict[str, float]]:
    names = [f"x{j}" for j in range(X.shape[1])]
    return [dict(zip(names, row.tolist(), strict=True)) for row in X]


def _mae(model: BoostedRegressor | SGTRegressor, X: np.ndarray, y: np.ndarray) -> float:
    predictions = np.concatenate(
        [model.predict_learn_many(X[i : i + 1000], y[i : i + 1000].tolist()) for i in range(0, len(y), 1000)]
    )
    return float(np.abs(predictions - y).mean())


def test_a_step_target_is_learned_as_well_as_by_the_single_tree() -> None:
    X, y = _steps(6000)
    with_tree = _mae(BoostedRegressor(fine_tree=False, single_tree=True, forest=False), X, y)
    members = _mae(BoostedRegressor(single_tree=False, forest=False, fine_tree=False), X, y)
    single = _mae(SGTRegressor(), X, y)
    # (the members alone: 1.5 times the single tree's MAE)
    assert with_tree <= 1.02 * single, (with_tree, single, members)
    assert with_tree <= 0.8 * members, (with_tree, members)


def test_a_stream_the_members_fit_better_keeps_their_predictions() -> None:
    X, y = _friedman(6000)
    with_tree = _mae(BoostedRegressor(single_tree=True, forest=False), X, y)
    members = _mae(BoostedRegressor(single_tree=False, forest=False, fine_tree=False), X, y)
    assert with_tree <= 1.01 * members, (with_tree, members)  # (here it is 0.9 times)


@pytest.mark.parametrize("enabled", [True, False], ids=["kernels", "SGT_KERNELS=0"])
def test_loop_batch_and_restore_give_the_same_bits(enabled: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(kernels, "ENABLED", enabled and kernels.ENABLED)
    X, y = _steps(2400)
    batched = BoostedRegressor(warm_up=100, single_tree=True, forest=False)
    predictions = np.concatenate(
        [batched.predict_learn_many(X[i : i + 700], y[i : i + 700].tolist()) for i in range(0, len(y), 700)]
    )
    assert batched._choice is not None and batched._choice.serving() != 0  # (the tree or the mean)
    loop = BoostedRegressor(warm_up=100, single_tree=True, forest=False)
    looped = []
    for record, target in zip(_records(X), y.tolist(), strict=True):
        looped.append(loop.predict_one(record))
        loop.learn_one(record, target)
    np.testing.assert_array_equal(np.array(looped), predictions)
    assert loop.to_bytes() == batched.to_bytes()
    half = BoostedRegressor(warm_up=100, single_tree=True, forest=False)
    first = half.predict_learn_many(X[:1100], y[:1100].tolist())
    restored = BoostedRegressor.from_bytes(half.to_bytes())
    assert restored.to_bytes() == half.to_bytes()
    rest = restored.predict_learn_many(X[1100:], y[1100:].tolist())
    np.testing.assert_array_equal(np.concatenate([first, rest]), predictions)
    assert restored.to_bytes() == batched.to_bytes()
    np.testing.assert_array_equal(
        restored.predict_many(X[:50]), [restored.predict_one(r) for r in _records(X[:50])]
    )


def test_rows_only_predicted_leave_the_choice_alone() -> None:
    X, y = _steps(1500)
    model = BoostedRegressor(warm_up=100, single_tree=True, forest=False)
    model.learn_many(X[:1000], y[:1000].tolist())
    assert model._choice is not None
    before, saved = list(model._choice.errors), model.to_bytes()
    mixed = [None if i % 2 else float(t) for i, t in enumerate(y[1000:])]
    predictions = model.predict_learn_many(X[1000:], mixed)
    other = BoostedRegressor.from_bytes(saved)
    expected = []
    for record, target in zip(_records(X[1000:]), mixed, strict=True):
        expected.append(other.predict_one(record))
        if target is not None:
            other.learn_one(record, target)
    np.testing.assert_array_equal(predictions, expected)
    assert model.to_bytes() == other.to_bytes()
    fresh = BoostedRegressor.from_bytes(saved)
    fresh.predict_many(X[1000:])
    assert fresh._choice is not None and fresh._choice.errors == before


def test_explanations_add_up_to_the_served_prediction() -> None:
    X, y = _steps(3000)
    model = BoostedRegressor(single_tree=True, forest=False)
    model.learn_many(X, y.tolist())
    assert model._choice is not None
    record = _records(X[-1:])[0]
    served = set()
    for serving in range(TreeChoice.CANDIDATES):
        model._choice.errors = [0.0 if k == serving else 1.0 for k in range(TreeChoice.CANDIDATES)]
        served.add(model.predict_one(record))
        assert abs(float(explain_raw(model, record).sum()) - model.predict_one(record)) < 1e-9
        assert abs(model.explain_one(record).score - model.predict_one(record)) < 1e-9
    assert len(served) == TreeChoice.CANDIDATES


def test_a_model_saved_before_the_single_tree_predicts_without_it() -> None:
    X, y = _steps(2000)
    model = BoostedRegressor(fine_tree=False, single_tree=True, forest=False)
    model.learn_many(X[:1000], y[:1000].tolist())
    header, arrays, _ = decode(model.to_bytes())
    assert header["params"].pop("single_tree") is True
    assert set(header["extra"].pop("single")) == {"header", "version", "choice"}
    arrays = {name: a for name, a in arrays.items() if not name.startswith("extra.single.")}
    old = BoostedRegressor.from_bytes(encode(header, list(arrays.items())))
    assert old._single is None and old.get_params()["single_tree"] is False
    plain = BoostedRegressor.from_bytes(model.to_bytes())
    plain._single, plain._choice = None, None
    np.testing.assert_array_equal(
        old.predict_learn_many(X[1000:], y[1000:].tolist()),
        plain.predict_learn_many(X[1000:], y[1000:].tolist()),
    )
    saved = decode(old.to_bytes())  # (saved as before the parameter)
    assert "single_tree" not in saved.header["params"] and "single" not in saved.header["extra"]
    assert not any(name.startswith("extra.single.") for name in saved.arrays)


def test_without_the_single_tree_the_members_save_as_before() -> None:
    X, y = _steps(800)
    model = BoostedRegressor(single_tree=False, forest=False, fine_tree=False)
    model.learn_many(X, y.tolist())
    header = decode(model.to_bytes()).header
    assert "single_tree" not in header["params"] and "single" not in header["extra"]


def test_a_save_missing_the_tree_is_refused() -> None:
    X, y = _steps(500)
    model = BoostedRegressor(single_tree=True, forest=False)
    model.learn_many(X, y.tolist())
    header, arrays, _ = decode(model.to_bytes())
    del header["extra"]["single"]
    with pytest.raises(SerializationError, match="single tree"):
        BoostedRegressor.from_bytes(encode(header, list(arrays.items())))


def test_no_single_tree_with_a_linked_loss_or_a_budget() -> None:
    assert BoostedRegressor(loss=Poisson())._single is None
    assert BoostedRegressor(max_bytes=1_000_000)._single is None
    assert BoostedRegressor(loss=Huber(), single_tree=True, forest=False)._single is not None
    with pytest.raises(ValueError, match="single_tree"):
        BoostedRegressor(single_tree=1)  # type: ignore[arg-type]


def test_a_prediction_that_overflows_stops_serving() -> None:
    choice = TreeChoice()
    choice.learn([1.0, float("nan"), float("inf")], 1.0)
    assert choice.serving() == 0 and all(np.isfinite(choice.errors))


def test_the_single_tree_is_on_by_default() -> None:
    model = BoostedRegressor()
    assert model.single_tree is True and model._single is not None
    assert model._single.leaf_model == "auto" and model._single._space is model._space


def test_the_single_trees_bytes_count() -> None:
    X, y = _steps(1500)
    with_tree, members = (
        BoostedRegressor(single_tree=True, forest=False, fine_tree=False),
        BoostedRegressor(single_tree=False, forest=False, fine_tree=False),
    )
    with_tree.learn_many(X, y.tolist())
    members.learn_many(X, y.tolist())
    assert with_tree._single is not None
    assert with_tree.nbytes == members.nbytes + with_tree._single.nbytes


@pytest.mark.parametrize("max_categories", [None, 3])
def test_categories_and_missing_features_keep_loop_batch_and_restore_exact(
    max_categories: int | None,
) -> None:
    """The single tree shares the members' feature space (categories, grids): whatever it adds there
    must leave the members' batch and loop alike."""
    rng = np.random.default_rng(4)
    categories = ["a", "b", "c", "d", "e", "f"]
    records, targets = [], []
    for i in range(2000):
        category = categories[min(int(rng.integers(0, 2 + i // 300)), 5)]
        record = {"c": category, "u": float(rng.uniform()), "t": 1.7e9 + 60.0 * i}
        if i % 7 == 0:
            del record["u"]
        records.append(record)
        targets.append(categories.index(category) * 2.0 + float(record.get("u", 0.5) > 0.5))

    def new() -> BoostedRegressor:
        return BoostedRegressor(
            warm_up=100, nominal=["c"], max_categories=max_categories, single_tree=True, forest=False
        )

    batched = new()
    predictions = np.concatenate(
        [batched.predict_learn_many(records[i : i + 500], targets[i : i + 500]) for i in range(0, 2000, 500)]
    )
    loop, looped = looped_with_restore(new(), records, targets, 1234)
    np.testing.assert_array_equal(np.array(looped), predictions)
    assert loop.to_bytes() == batched.to_bytes()


_VALUES = st.one_of(
    st.floats(-1e6, 1e6, allow_nan=False),
    st.sampled_from([0.0, 1e300, -1e300, 1e308, math.inf, -math.inf, math.nan]),
)


@settings(max_examples=200, deadline=None)
@given(
    rows=st.lists(st.tuples(_VALUES, _VALUES, st.floats(-1e6, 1e6), st.booleans()), min_size=0, max_size=90),
    start=st.sampled_from(TreeChoice.SAVED_SIZES).flatmap(
        lambda size: st.lists(st.floats(0.0, 1e6), min_size=size, max_size=size)
    ),
)
def test_the_filtered_choice_is_the_row_by_row_one(
    rows: list[tuple[float, float, float, bool]], start: list[float]
) -> None:
    """`TreeChoice.serve` filters a batch's errors at once: the same served values and errors, bit for
    bit, as a row at a time (and as a split batch)."""
    ensemble, tree, targets, learn = (
        (np.array(column) for column in zip(*rows)) if rows else [np.zeros(0)] * 4
    )
    learn = learn.astype(bool)
    filtered, by_rows, halves = TreeChoice(start), TreeChoice(start), TreeChoice(start)
    models = {"ensemble": ensemble, "tree": tree}
    served = filtered.serve(models, targets, learn)
    expected = by_rows._serve_rows(models, targets, learn)
    half = len(rows) // 2
    split = np.concatenate(
        [
            halves.serve({name: p[:half] for name, p in models.items()}, targets[:half], learn[:half]),
            halves.serve({name: p[half:] for name, p in models.items()}, targets[half:], learn[half:]),
        ]
    )
    assert served.tobytes() == expected.tobytes() == split.tobytes()
    assert filtered.errors == by_rows.errors == halves.errors


def test_a_long_batch_is_filtered_as_row_by_row() -> None:
    rng = np.random.default_rng(9)
    n = 3000
    ensemble, tree, targets = rng.normal(0, 1, n), rng.normal(0, 1, n), rng.normal(0, 1, n)
    tree[::97], ensemble[::89] = math.nan, 1e308  # (an overflowing candidate stops serving for a while)
    learn = rng.uniform(size=n) < 0.8
    filtered, by_rows = TreeChoice(), TreeChoice()
    models = {"ensemble": ensemble, "tree": tree}
    served = filtered.serve(models, targets, learn)
    assert served.tobytes() == by_rows._serve_rows(models, targets, learn).tobytes()
    assert filtered.errors == by_rows.errors


def test_a_blend_of_the_two_serves_where_it_errs_least() -> None:
    """Between the ensemble, the tree and their mean, the blends in eighths: a target a quarter of the
    way from the ensemble's prediction to the tree's is served by that blend, not by the mean."""
    rng = np.random.default_rng(11)
    ensemble, tree = rng.normal(0, 1, 400), rng.normal(0, 1, 400)
    targets = 0.75 * ensemble + 0.25 * tree
    choice = TreeChoice()
    served = choice.serve({"ensemble": ensemble, "tree": tree}, targets, np.ones(400, dtype=bool))
    assert TreeChoice.WEIGHTS[choice.serving()] == 0.25
    assert np.abs(served[100:] - targets[100:]).max() < 1e-12


def _three_candidates(
    errors: list[float], ensemble: np.ndarray, tree: np.ndarray, targets: np.ndarray
) -> tuple[list[float], list[float]]:
    """The choice among the ensemble, the tree and their mean alone (as before the blends), row by row."""
    out = []
    for e, t, y in zip(ensemble.tolist(), tree.tolist(), targets.tolist(), strict=True):
        predictions = (e, t, 0.5 * (e + t))
        out.append(predictions[min(range(3), key=errors.__getitem__)])
        errors = [0.98 * errors[k] + abs(p - y) for k, p in enumerate(predictions)]
    return out, errors


@pytest.mark.parametrize("enabled", [True, False], ids=["kernels", "SGT_KERNELS=0"])
def test_a_choice_saved_with_three_candidates_keeps_them(
    enabled: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A model saved before the blends (three faded errors) restores choosing among the three as
    before, in a batch and a row at a time, and saves three errors again."""
    monkeypatch.setattr(kernels, "ENABLED", enabled and kernels.ENABLED)
    rng = np.random.default_rng(12)
    ensemble, tree, targets = rng.normal(0, 1, 300), rng.normal(0, 1, 300), rng.normal(0, 1, 300)
    start = [0.5, 0.2, 0.3]
    expected, errors = _three_candidates(start, ensemble, tree, targets)
    learn = np.ones(300, dtype=bool)
    filtered, by_rows = TreeChoice(start), TreeChoice(start)
    models = {"ensemble": ensemble, "tree": tree}
    assert filtered.serve(models, targets, learn).tolist() == expected
    assert by_rows._serve_rows(models, targets, learn).tolist() == expected
    assert filtered.errors == by_rows.errors == errors
    X, y = _steps(2000)
    model = BoostedRegressor(fine_tree=False, warm_up=100, single_tree=True, forest=False)
    model.learn_many(X[:1000], y[:1000].tolist())
    header, arrays, _ = decode(model.to_bytes())
    header["extra"]["single"]["choice"] = header["extra"]["single"]["choice"][:3]
    old = encode(header, list(arrays.items()))
    batched, loop = BoostedRegressor.from_bytes(old), BoostedRegressor.from_bytes(old)
    predictions = batched.predict_learn_many(X[1000:], y[1000:].tolist())
    looped = []
    for record, target in zip(_records(X[1000:]), y[1000:].tolist(), strict=True):
        looped.append(loop.predict_one(record))
        loop.learn_one(record, target)
    np.testing.assert_array_equal(predictions, looped)
    assert batched.to_bytes() == loop.to_bytes()
    assert batched._choice is not None and len(batched._choice.errors) == 3
    restored = BoostedRegressor.from_bytes(old)
    first = restored.predict_learn_many(X[1000:1500], y[1000:1500].tolist())
    rest = BoostedRegressor.from_bytes(restored.to_bytes()).predict_learn_many(X[1500:], y[1500:].tolist())
    np.testing.assert_array_equal(np.concatenate([first, rest]), predictions)
    assert len(decode(batched.to_bytes()).header["extra"]["single"]["choice"]) == 3


def test_predict_one_encodes_the_record_once_for_the_members_and_the_single_tree(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The single tree shares the ensemble's feature space, so the ensemble's codes serve it too (the
    forest encodes in a space of its own); the prediction is the same."""
    X, y = _steps(900)  # (fewer than the forest's youth: it cannot have retired)
    model = BoostedRegressor(warm_up=100)
    model.learn_many(X, y.tolist())
    assert model._single is not None and model._forest is not None  # (all three predict)
    record = _records(X[:1])[0]
    expected = model.predict_one(record)
    calls = counted_encodings(model, monkeypatch)
    assert model.predict_one(record) == expected
    assert calls == [False]
