"""The boosted regressor's forest (`forest`): a ForestRegressor (sgt.boosted.forest's REGRESSOR_FOREST:
ten bagged members averaged, splitting on few records) learns every record beside the members and the
single tree, on the same coded rows, and the choice (sgt.boosted.tree_choice.TreeChoice) serves
whichever of the twelve candidates (the ensemble/tree blends, the forest, its means with the ensemble
and with the tree) has the lowest faded absolute error.

A low-dimensional nonlinear target is where the forest's deep bagged trees beat the boosted linear
members and the single tree. Models saved before the parameter restore without the forest, save the
same bytes and predict as they did; `forest=False` saves the bytes of the format before it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sgt import BoostedRegressor, kernels
from sgt.boosted.regressor import ForestRegressor
from sgt.boosted.tree_choice import CANDIDATES, Candidate, TreeChoice
from sgt.explain import explain_raw, importances
from sgt.losses import Huber, Poisson
from sgt.serialization import SerializationError, decode, encode
from tests.fixtures.make_forest_fixture import FOREST_PARAMS, FOREST_ROWS, linear
from tests.fixtures.make_nine_choice_fixture import PARAMS, ROWS, piecewise
from tests.floats import assert_within_ulps
from tests.sgt.sgt_testkit import looped_with_restore

#: a BoostedRegressor saved by the code whose forest never retired, and what it predicted after
#: (tests/fixtures/make_forest_fixture.py)
UNRETIRED = Path(__file__).resolve().parents[1] / "fixtures" / "boosted-forest-unretired"
#: a BoostedRegressor saved by the code whose choice had nine candidates (before the forest), and what
#: it predicted after (tests/fixtures/make_nine_choice_fixture.py)
NINE_CHOICE = Path(__file__).resolve().parents[1] / "fixtures" / "boosted-nine-choice"


def _waves(n: int, seed: int = 7) -> tuple[np.ndarray, np.ndarray]:
    """A smooth nonlinear target of two features (a product of waves), one irrelevant feature."""
    rng = np.random.default_rng(seed)
    X = rng.uniform(0, 1, (n, 3))
    y = 4.0 * np.sin(2 * np.pi * X[:, 0]) * np.cos(2 * np.pi * X[:, 1]) + rng.normal(0, 0.1, n)
    return X, y


def _records(X: np.ndarray) -> list[dict[str, float]]:
    names = [f"x{j}" for j in range(X.shape[1])]
    return [dict(zip(names, row.tolist(), strict=True)) for row in X]


def _batched(model: BoostedRegressor, X: np.ndarray, y: np.ndarray, size: int = 700) -> np.ndarray:
    return np.concatenate(
        [model.predict_learn_many(X[i : i + size], y[i : i + size].tolist()) for i in range(0, len(y), size)]
    )


def _serving_models(model: BoostedRegressor) -> frozenset[str]:
    assert model._choice is not None
    return model._choice.offered[model._choice.serving()].models


def test_a_low_dimensional_nonlinear_target_is_served_by_the_forest() -> None:
    X, y = _waves(8000)
    with_forest, without = BoostedRegressor(), BoostedRegressor(forest=False)
    served, alone = _batched(with_forest, X, y, 1000), _batched(without, X, y, 1000)
    assert "forest" in _serving_models(with_forest)
    late, late_alone = np.abs(served - y)[4000:].mean(), np.abs(alone - y)[4000:].mean()
    assert late <= 0.6 * late_alone, (late, late_alone)  # (measured: 0.37 times)


@pytest.mark.parametrize("enabled", [True, False], ids=["kernels", "SGT_KERNELS=0"])
@pytest.mark.parametrize("single_tree", [True, False], ids=["tree", "no tree"])
def test_loop_batch_and_restore_give_the_same_bits(
    enabled: bool, single_tree: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(kernels, "ENABLED", enabled and kernels.ENABLED)
    X, y = piecewise(2400)

    def new() -> BoostedRegressor:
        return BoostedRegressor(fine_tree=False, warm_up=100, single_tree=single_tree)

    batched = new()
    predictions = _batched(batched, X, y)
    assert "forest" in _serving_models(batched)
    assert batched._choice is not None and len(batched._choice.errors) == (12 if single_tree else 3)
    loop = new()
    looped = []
    for record, target in zip(_records(X), y.tolist(), strict=True):
        looped.append(loop.predict_one(record))
        loop.learn_one(record, target)
    np.testing.assert_array_equal(np.array(looped), predictions)
    assert loop.to_bytes() == batched.to_bytes()
    half = new()
    first = half.predict_learn_many(X[:1100], y[:1100].tolist())
    restored = BoostedRegressor.from_bytes(half.to_bytes())
    assert restored._forest is not None and restored._forest._space is not restored._space
    assert restored.to_bytes() == half.to_bytes()
    rest = restored.predict_learn_many(X[1100:], y[1100:].tolist())
    np.testing.assert_array_equal(np.concatenate([first, rest]), predictions)
    assert restored.to_bytes() == batched.to_bytes()
    np.testing.assert_array_equal(
        restored.predict_many(X[:50]), [restored.predict_one(r) for r in _records(X[:50])]
    )


@pytest.mark.parametrize("max_categories", [None, 3])
def test_categories_and_missing_features_keep_loop_batch_and_restore_exact(
    max_categories: int | None,
) -> None:
    """The forest has its own feature space beside the members' (categories, grids that grow): each
    must keep every model's batch and loop alike."""
    rng = np.random.default_rng(4)
    categories = ["a", "b", "c", "d", "e", "f"]
    records, targets = [], []
    for i in range(1600):
        category = categories[min(int(rng.integers(0, 2 + i // 250)), 5)]
        record = {"c": category, "u": float(rng.uniform()), "t": 1.7e9 + 60.0 * i * (1 + i // 400)}
        if i % 7 == 0:
            del record["u"]
        records.append(record)
        targets.append(categories.index(category) * 2.0 + float(record.get("u", 0.5) > 0.5))

    def new() -> BoostedRegressor:
        return BoostedRegressor(warm_up=100, nominal=["c"], max_categories=max_categories)

    batched = new()
    predictions = np.concatenate(
        [batched.predict_learn_many(records[i : i + 500], targets[i : i + 500]) for i in range(0, 1600, 500)]
    )
    loop, looped = looped_with_restore(new(), records, targets, 777)
    np.testing.assert_array_equal(np.array(looped), predictions)
    assert loop.to_bytes() == batched.to_bytes()


def test_a_model_saved_before_the_forest_restores_and_predicts_the_same() -> None:
    """The fixture (nine candidates, no forest) restores without a forest, saves the same bytes and
    predicts what the code that saved it predicted; a new model with `forest=False` saves those bytes
    too."""
    blob = (NINE_CHOICE / "regressor.sgt").read_bytes()
    old = BoostedRegressor.from_bytes(blob)
    assert old._forest is None and old.forest is False and old._choice is not None
    assert len(old._choice.errors) == TreeChoice.CANDIDATES
    assert old.to_bytes() == blob
    X, y = piecewise(ROWS)
    fresh = BoostedRegressor.from_bytes(blob).predict_many(X[ROWS // 2 :])
    after = old.predict_learn_many(X[ROWS // 2 :], y[ROWS // 2 :].tolist())
    # learned on another CPU: the same up to the last bits (tests/floats.py), so within a tolerance
    np.testing.assert_allclose(after, np.load(NINE_CHOICE / "after.npy"), rtol=1e-9, atol=1e-12)
    # a model learned here with `forest=False`: the fixture's format and, up to the CPU's last bits,
    # its state (compared by what it predicts, not byte for byte)
    today = BoostedRegressor(fine_tree=False, **PARAMS, forest=False)
    today.learn_many(X[: ROWS // 2], y[: ROWS // 2].tolist())
    assert_within_ulps(today.predict_many(X[ROWS // 2 :]), fresh)
    header = decode(today.to_bytes()).header
    assert header["params"] == decode(blob).header["params"]
    assert "forest" not in header["params"] and "forest" not in header["extra"]


def test_the_forest_is_saved_beside_the_single_tree() -> None:
    X, y = piecewise(600)
    model = BoostedRegressor(fine_tree=False, warm_up=100)
    model.learn_many(X, y.tolist())
    header, arrays, _ = decode(model.to_bytes())
    assert header["params"]["forest"] is True
    assert set(header["extra"]["forest"]) == {"header", "version"}  # (the choice: with the tree's)
    assert len(header["extra"]["single"]["choice"]) == len(CANDIDATES)
    assert header["extra"]["single"]["learned"] == 600  # (the records the forest's youth counts)
    assert header["extra"]["forest"]["header"]["model"] == "ForestRegressor"
    assert any(name.startswith("extra.forest.") for name in arrays)
    alone = BoostedRegressor(fine_tree=False, warm_up=100, single_tree=False)
    alone.learn_many(X, y.tolist())
    header = decode(alone.to_bytes()).header
    assert "single" not in header["extra"] and len(header["extra"]["forest"]["choice"]) == 3


def test_a_save_missing_the_forest_or_its_choice_is_refused() -> None:
    X, y = piecewise(500)
    model = BoostedRegressor(warm_up=100)
    model.learn_many(X, y.tolist())
    header, arrays, _ = decode(model.to_bytes())
    missing = {k: v for k, v in header["extra"].items() if k != "forest"}
    with pytest.raises(SerializationError, match="forest"):
        BoostedRegressor.from_bytes(encode({**header, "extra": missing}, list(arrays.items())))
    header["extra"]["single"]["choice"] = header["extra"]["single"]["choice"][:9]  # (no forest's)
    with pytest.raises(SerializationError, match="choice"):
        BoostedRegressor.from_bytes(encode(header, list(arrays.items())))


def test_explanations_add_up_to_the_served_prediction() -> None:
    X, y = piecewise(2000)
    model = BoostedRegressor(warm_up=100)
    model.learn_many(X, y.tolist())
    assert model._choice is not None
    record = _records(X[-1:])[0]
    served = set()
    for serving in range(len(CANDIDATES)):
        model._choice.errors = [0.0 if k == serving else 1.0 for k in range(len(CANDIDATES))]
        served.add(model.predict_one(record))
        assert abs(float(explain_raw(model, record).sum()) - model.predict_one(record)) < 1e-9
        assert abs(model.explain_one(record).score - model.predict_one(record)) < 1e-9
    assert len(served) == len(CANDIDATES)


def test_the_importances_follow_the_served_prediction() -> None:
    X, y = piecewise(2000)
    model = BoostedRegressor(warm_up=100)
    model.learn_many(X, y.tolist())
    choice, forest = model._choice, model._forest
    assert choice is not None and forest is not None
    members, own = importances(model), forest.feature_importances()
    assert members != own

    def serve(candidate: Candidate) -> dict[str, float]:
        assert choice is not None
        choice.errors = [0.0 if c == candidate else 1.0 for c in choice.offered]
        return model.feature_importances()

    assert serve(Candidate("ensemble", "forest", 1.0)) == own
    blended = serve(Candidate("ensemble", "forest", 0.5))
    assert sum(blended.values()) == pytest.approx(1.0, rel=1e-12)
    for name in members:
        assert blended[name] == pytest.approx(0.5 * (members[name] + own[name]), rel=1e-12)
    assert serve(Candidate("ensemble", "tree", 0.0)) == members


def test_intervals_follow_the_served_prediction() -> None:
    X, y = piecewise(1500)
    batched = BoostedRegressor(warm_up=100, interval_coverages=(0.9,))
    predictions, intervals = batched.predict_learn_interval_many(X, y.tolist(), 0.9)
    assert "forest" in _serving_models(batched)
    loop = BoostedRegressor(warm_up=100, interval_coverages=(0.9,))
    for i, (record, target) in enumerate(zip(_records(X), y.tolist(), strict=True)):
        low, high = loop.predict_interval_one(record, 0.9)
        assert (low, high) == tuple(intervals[i].tolist())
        assert loop.predict_one(record) == predictions[i]
        loop.learn_one(record, target)
    assert loop.to_bytes() == batched.to_bytes()
    inside = (intervals[500:, 0] <= y[500:]) & (y[500:] <= intervals[500:, 1])
    assert inside.mean() > 0.8


def test_the_forests_bytes_count() -> None:
    X, y = piecewise(1500)
    with_forest, without = BoostedRegressor(warm_up=100), BoostedRegressor(warm_up=100, forest=False)
    with_forest.learn_many(X, y.tolist())
    without.learn_many(X, y.tolist())
    assert with_forest._forest is not None
    assert with_forest.nbytes == without.nbytes + with_forest._forest.nbytes > without.nbytes


def test_the_forest_is_on_by_default_bounded_and_in_its_own_space() -> None:
    model = BoostedRegressor()
    assert model.forest is True and model.get_params()["forest"] is True
    forest = model._forest
    assert forest is not None and forest._space is not model._space
    assert all(member._space is forest._space for member in forest._members)
    assert forest.n_members == 10 and forest.learning_rate == 0.1 and forest.poisson_rate == 1.0
    assert forest.max_depth is None and forest.max_bytes == 32_000_000
    assert BoostedRegressor(max_depth=5)._forest.max_depth == 5  # type: ignore[union-attr]


def test_no_forest_with_a_linked_loss_or_a_budget_and_a_bad_value_is_refused() -> None:
    assert BoostedRegressor(fine_tree=False, loss=Poisson())._forest is None
    assert BoostedRegressor(fine_tree=False, max_bytes=1_000_000)._forest is None
    assert BoostedRegressor(fine_tree=False, loss=Poisson())._choice is None
    with pytest.raises(ValueError, match="forest"):
        BoostedRegressor(fine_tree=False, forest=1)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="forest"):
        ForestRegressor(forest=True)
    assert BoostedRegressor(fine_tree=False, single_tree=False, forest=False)._choice is None


def test_rows_only_predicted_leave_the_choice_and_the_forest_alone() -> None:
    X, y = piecewise(1500)
    model = BoostedRegressor(warm_up=100)
    model.learn_many(X[:1000], y[:1000].tolist())
    saved = model.to_bytes()
    model.predict_many(X[1000:])
    assert model.to_bytes() == saved


@pytest.mark.parametrize("params", [{"base_score": 0.0}, {"loss": Huber()}], ids=["base score", "huber"])
def test_a_given_base_score_or_another_loss_keeps_loop_and_batch_exact(params: dict[str, Any]) -> None:
    """The forest registers its base score at the same row as the members (or has it from the start):
    the target events the ensemble's rows carry are the forest's too."""
    X, y = piecewise(900)
    batched = BoostedRegressor(warm_up=100, **params)
    predictions = _batched(batched, X, y, 400)
    assert batched._forest is not None and batched._forest.loss.name == batched.loss.name
    loop = BoostedRegressor(warm_up=100, **params)
    looped = []
    for record, target in zip(_records(X), y.tolist(), strict=True):
        looped.append(loop.predict_one(record))
        loop.learn_one(record, target)
    np.testing.assert_array_equal(np.array(looped), predictions)
    assert loop.to_bytes() == batched.to_bytes() == BoostedRegressor.from_bytes(loop.to_bytes()).to_bytes()


# -- the forest's retirement and memory bound ---------------------------------------------------------
def _linear(n: int, seed: int = 11) -> tuple[np.ndarray, np.ndarray]:
    """A linear target (the linear members fit it; the forest's averaged steps do not)."""
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1, 1, (n, 3))
    return X, 2.0 * X[:, 0] - 1.5 * X[:, 1] + rng.normal(0, 0.05, n)


def _loop(model: BoostedRegressor, X: np.ndarray, y: np.ndarray) -> np.ndarray:
    out = []
    for record, target in zip(_records(X), y.tolist(), strict=True):
        out.append(model.predict_one(record))
        model.learn_one(record, target)
    return np.array(out)


class _WeakForest(BoostedRegressor):
    """A forest of constant leaves that never split (the mean): the ensemble serves, the forest retires
    (without the single tree the default forest serves on the streams a test can afford)."""

    _forest_settings: ClassVar[dict[str, Any]] = {
        **BoostedRegressor._forest_settings,
        "grace_period": 10**6,
        "leaf_model": "constant",
    }


@pytest.mark.parametrize("enabled", [True, False], ids=["kernels", "SGT_KERNELS=0"])
@pytest.mark.parametrize("single_tree", [True, False], ids=["tree", "no tree"])
def test_the_forest_retires_inside_a_batch_as_in_the_loop_and_after_a_restore(
    enabled: bool, single_tree: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """From `TreeChoice.YOUTH` learned records on, the forest retires at the first record after which
    the serving candidate does not need it: the batch (the retirement inside a batch of 700), the
    one-record loop and a model restored before it retire at the same record, predict the same and
    save the same bytes (without the forest; without the choice when there is no single tree)."""
    monkeypatch.setattr(kernels, "ENABLED", enabled and kernels.ENABLED)
    X, y = _linear(2400)

    def new() -> BoostedRegressor:
        kind = BoostedRegressor if single_tree else _WeakForest
        return kind(warm_up=100, single_tree=single_tree, fine_tree=False)

    batched = new()
    predictions = _batched(batched, X, y)
    assert batched._forest is None and batched.forest is True
    assert (batched._choice is None) is (not single_tree)
    loop = new()
    np.testing.assert_array_equal(_loop(loop, X, y), predictions)
    assert loop.to_bytes() == batched.to_bytes()
    half = new()
    first = half.predict_learn_many(X[:900], y[:900].tolist())
    assert half._forest is not None  # (young: not yet retired)
    restored = type(half).from_bytes(half.to_bytes())
    rest = _batched(restored, X[900:], y[900:], 1000)
    np.testing.assert_array_equal(np.concatenate([first, rest]), predictions)
    assert restored.to_bytes() == batched.to_bytes()
    # the batch in which it retired: the rows after it were served without the forest's candidates
    retiring = new()
    retiring.predict_learn_many(X[:700], y[:700].tolist())
    assert retiring._forest is not None
    retiring.predict_learn_many(X[700:1400], y[700:1400].tolist())
    assert retiring._forest is None


def test_a_model_restored_after_the_forest_retired_has_none_and_learns_on() -> None:
    X, y = _linear(3000)
    model = BoostedRegressor(fine_tree=False, warm_up=100)
    model.learn_many(X[:2000], y[:2000].tolist())
    assert model._forest is None and model._choice is not None
    blob = model.to_bytes()
    header = decode(blob).header
    assert header["params"]["forest"] is True and "forest" not in header["extra"]
    assert "learned" not in header["extra"]["single"]  # (nothing left to retire)
    restored = BoostedRegressor.from_bytes(blob)
    assert restored._forest is None and restored.forest is True and restored.to_bytes() == blob
    assert restored._choice is not None and restored._choice.models == {"ensemble", "tree"}
    np.testing.assert_array_equal(
        restored.predict_learn_many(X[2000:], y[2000:].tolist()),
        model.predict_learn_many(X[2000:], y[2000:].tolist()),
    )
    assert restored.to_bytes() == model.to_bytes()
    alone = _WeakForest(warm_up=100, single_tree=False, fine_tree=False)
    alone.learn_many(X[:2000], y[:2000].tolist())
    assert alone._forest is None and alone._choice is None
    back = BoostedRegressor.from_bytes(alone.to_bytes())
    assert back._forest is None and back._choice is None and back.to_bytes() == alone.to_bytes()


def test_a_save_with_the_forest_but_no_count_never_retires_it() -> None:
    """A model saved before the retirement (its choice has no count of learned records) keeps its
    forest, as the code that saved it did."""
    X, y = _linear(2400)
    model = BoostedRegressor(warm_up=100)
    model.learn_many(X[:500], y[:500].tolist())
    header, arrays, _ = decode(model.to_bytes())
    del header["extra"]["single"]["learned"]
    old = BoostedRegressor.from_bytes(encode(header, list(arrays.items())))
    old.learn_many(X[500:], y[500:].tolist())
    assert old._forest is not None and old._choice is not None and old._choice.learned is None
    header["extra"]["single"]["learned"] = "many"
    with pytest.raises(SerializationError, match="count"):
        BoostedRegressor.from_bytes(encode(header, list(arrays.items())))


class _TightForest(BoostedRegressor):
    """The forest within 400 kB (a budget that binds early on the stream below)."""

    _forest_settings: ClassVar[dict[str, Any]] = {**BoostedRegressor._forest_settings, "max_bytes": 400_000}


def test_the_forest_stays_within_its_budget_and_exact_where_the_layout_widens() -> None:
    """The forest's budget holds on a stream where it serves, and its batches stay exact where a
    category widens the layout inside a batch (the forest cuts its batch there, in its own space)."""
    rng = np.random.default_rng(8)
    categories = ["a", "b", "c", "d"]
    records, targets = [], []
    for i in range(3000):
        category = categories[min(int(rng.integers(0, 2 + i // 1200)), 3)]  # (new: rows 1200, 2400)
        u, v = float(rng.uniform()), float(rng.uniform())
        records.append({"c": category, "u": u, "v": v})
        targets.append(4.0 * np.sin(2 * np.pi * u) * np.cos(2 * np.pi * v) + categories.index(category))

    def new() -> BoostedRegressor:
        return _TightForest(warm_up=100, nominal=["c"], single_tree=False)

    batched = new()
    predictions = np.concatenate(
        [batched.predict_learn_many(records[i : i + 700], targets[i : i + 700]) for i in range(0, 3000, 700)]
    )
    assert batched._forest is not None and "forest" in _serving_models(batched)
    assert batched._forest.nbytes <= 400_000 and batched._forest.n_inactive > 0  # (the budget bound it)
    loop, looped = looped_with_restore(new(), records, targets, 1234)
    np.testing.assert_array_equal(np.array(looped), predictions)
    assert loop.to_bytes() == batched.to_bytes()


class _YoungChoice(TreeChoice):
    """A choice whose forest and tree retire from 20 and 25 learned records on (a property test's
    batches are short)."""

    YOUTH = 20
    TREE_YOUTH = 25


#: a choice's rows for the property tests: the ensemble's, the tree's and the forest's predictions, the
#: target, and whether the row is learned
_CHOICE_ROWS = st.lists(
    st.tuples(st.floats(-10, 10), st.floats(-10, 10), st.floats(-10, 10), st.floats(-10, 10), st.booleans()),
    min_size=0,
    max_size=120,
)


def _predictions(
    ensemble: np.ndarray, tree: np.ndarray | None, forest: np.ndarray | None
) -> dict[str, np.ndarray]:
    """The models' predictions as `TreeChoice.serve` takes them (the models the choice has)."""
    models = {"ensemble": ensemble, "tree": tree, "forest": forest}
    return {name: p for name, p in models.items() if p is not None}


def _rows(predictions: dict[str, np.ndarray], rows: slice) -> dict[str, np.ndarray]:
    """The same, of some of the rows."""
    return {name: p[rows] for name, p in predictions.items()}


@settings(max_examples=150, deadline=None)
@given(
    rows=_CHOICE_ROWS,
    learned=st.integers(0, 40),
    tree=st.booleans(),
    margin=st.sampled_from([0.0, 0.25]),
)
def test_the_filtered_choice_retires_the_forest_as_row_by_row(
    rows: list[tuple[float, float, float, float, bool]], learned: int, tree: bool, margin: float
) -> None:
    """`TreeChoice.serve` finds the retirement row from its filtered errors and serves the rows after
    it without the forest's candidates: the same served values, errors and models, bit for bit, as a
    row at a time and as a split batch."""
    columns = [np.array(c) for c in zip(*rows)] if rows else [np.zeros(0)] * 5
    ensemble, trees, forests, targets = columns[:4]
    learn = columns[4].astype(bool)
    models = ("ensemble", "tree", "forest") if tree else ("ensemble", "forest")

    def new() -> TreeChoice:
        choice = _YoungChoice(models=models, learned=learned)
        choice.RETIRE_MARGIN = margin  # (an instance's own margin: the class's is the default's)
        return choice

    filtered, by_rows, halves = new(), new(), new()
    predictions = _predictions(ensemble, trees if tree else None, forests)
    served = filtered.serve(predictions, targets, learn)
    expected = by_rows._serve_rows(predictions, targets, learn)
    half = len(rows) // 2
    first = halves.serve(_rows(predictions, slice(half)), targets[:half], learn[:half])
    rest = halves.serve(_rows(predictions, slice(half, None)), targets[half:], learn[half:])
    assert served.tobytes() == expected.tobytes() == np.concatenate([first, rest]).tobytes()
    assert filtered.errors == by_rows.errors == halves.errors
    assert filtered.models == by_rows.models == halves.models
    assert filtered.learned == by_rows.learned == halves.learned


@pytest.mark.parametrize("learned", [0, 500, 990, 1000, 2000])
@pytest.mark.parametrize("tree", [True, False], ids=["tree", "no tree"])
def test_a_long_batch_retires_the_forest_as_row_by_row(learned: int, tree: bool) -> None:
    """Candidates whose lead flips often: the forest retires at the first learned record from the
    youth on after which none of its candidates serves, inside the batch; the rows after it are served
    as row by row (never by the forest's candidates)."""
    rng = np.random.default_rng(learned + tree)
    n = 3000
    targets = rng.normal(0, 1, n)
    ensemble, trees = targets + rng.normal(0, 1, n), targets + rng.normal(0, 1, n)
    forests = targets + rng.normal(0, 0.3, n)
    forests[n // 2 : 3 * n // 4] += rng.normal(0, 5, n // 4)  # (it leads, errs far more, leads again)
    learn = rng.uniform(size=n) < 0.9
    models = ("ensemble", "tree", "forest") if tree else ("ensemble", "forest")
    filtered, by_rows = TreeChoice(models=models, learned=learned), TreeChoice(models=models, learned=learned)
    predictions = _predictions(ensemble, trees if tree else None, forests)
    served = filtered.serve(predictions, targets, learn)
    assert served.tobytes() == by_rows._serve_rows(predictions, targets, learn).tobytes()
    assert filtered.errors == by_rows.errors and filtered.models == by_rows.models == set(models) - {"forest"}
    kept = TreeChoice(models=models)  # (never retires: it serves the forest again at the end)
    kept.learned = None
    assert not np.array_equal(kept.serve(predictions, targets, learn), served)


def test_a_model_saved_before_the_retirement_keeps_its_forest_and_predicts_the_same() -> None:
    """The fixture (a forest that never retired, in the members' feature space, unbounded) restores
    with its forest, saves the same bytes and predicts what the code that saved it predicted, on a
    linear target where a new model's forest retires."""
    blob = (UNRETIRED / "regressor.sgt").read_bytes()
    old = BoostedRegressor.from_bytes(blob)
    assert old._forest is not None and old._choice is not None and old._choice.learned is None
    assert old._forest.max_bytes is None and old._forest.max_depth is None
    assert old.to_bytes() == blob
    X, y = linear(FOREST_ROWS)
    after = old.predict_learn_many(X[FOREST_ROWS // 2 :], y[FOREST_ROWS // 2 :].tolist())
    # learned on another CPU: the same up to the last bits (tests/floats.py), so within a tolerance
    np.testing.assert_allclose(after, np.load(UNRETIRED / "after.npy"), rtol=1e-9, atol=1e-12)
    assert old._forest is not None
    today = BoostedRegressor(**FOREST_PARAMS)
    today.learn_many(X, y.tolist())
    assert today._forest is None  # (the same stream: a new model's forest retired)


# -- the youth at which a side model may first retire -------------------------------------------------
@settings(max_examples=60, deadline=None)
@given(
    learn=st.lists(st.booleans(), min_size=40, max_size=90),
    learned=st.integers(0, 30),
    side=st.sampled_from(["forest", "tree"]),
    filtered=st.booleans(),
)
def test_a_lagging_side_model_retires_at_the_very_record_that_makes_it_old_enough(
    learn: list[bool], learned: int, side: str, filtered: bool
) -> None:
    """A side model whose candidates always lag far behind the ensemble's retires after the last
    learned record of its youth (`YOUTH`, `TREE_YOUTH`; counting those learned before the batch; at
    once if it was already that old), not one record earlier or later: a batch ending just before that
    record keeps it, one ending with it does not (filtered or row by row). Both paths share the youth's
    arithmetic, so comparing them alone would miss an off-by-one in it."""
    pad = 32  # (rows not learned first: every prefix below is long enough for the filtered path)
    flags = np.array([False] * pad + learn + [True])
    n = flags.size
    targets = np.linspace(-1.0, 1.0, n)
    ensemble, lagging = targets + 0.5, targets + 100.0
    positions = np.flatnonzero(flags)
    youth = _YoungChoice.YOUTH if side == "forest" else _YoungChoice.TREE_YOUTH
    old_enough = max(0, youth - learned - 1)  # (among the learned rows)
    models = ("ensemble", side)

    def served(rows: int) -> TreeChoice:
        counts = {"learned": learned} if side == "forest" else {"tree_learned": learned}
        choice = _YoungChoice(models=models, **counts)
        serve = choice.serve if filtered else choice._serve_rows
        serve({"ensemble": ensemble[:rows], side: lagging[:rows]}, targets[:rows], flags[:rows])
        return choice

    if old_enough >= positions.size:  # (too few learned records: it never gets old enough)
        assert side in served(n).models
        return
    row = int(positions[old_enough])
    assert side in served(row).models  # (the batch ends before the record that makes it old enough)
    assert served(row + 1).retired  # (it ends with that record: retired after it)


# -- the single tree's retirement --------------------------------------------------------------------
class _RetiringTree(BoostedRegressor):
    """The regressor whose single tree may retire (`TreeChoice.TREE_MARGIN`; the default's)."""

    _tree_retires: ClassVar[bool] = True


class _KeptTree(BoostedRegressor):
    """The regressor whose single tree never retires (as before the rule)."""

    _tree_retires: ClassVar[bool] = False


class _RetiringTreeWeakForest(_WeakForest):
    """The same, with a forest that never splits and a tree of constant leaves: on a linear target the
    ensemble serves, and both retire."""

    _tree_retires: ClassVar[bool] = True
    _single_leaves: ClassVar[str] = "constant"


@settings(max_examples=150, deadline=None)
@given(
    rows=_CHOICE_ROWS,
    learned=st.one_of(st.none(), st.integers(0, 40)),
    tree_learned=st.one_of(st.none(), st.integers(0, 40)),
    forest=st.booleans(),
    margins=st.sampled_from([(0.0, 0.0), (0.25, 0.0), (0.0, 0.25), (0.1, 0.05)]),
)
def test_the_filtered_choice_retires_the_tree_and_the_forest_as_row_by_row(
    rows: list[tuple[float, float, float, float, bool]],
    learned: int | None,
    tree_learned: int | None,
    forest: bool,
    margins: tuple[float, float],
) -> None:
    """With the single tree retiring too (either or both, in one batch, on one record): the same served
    values, errors, models and counts, bit for bit, filtered, a row at a time and as a split batch."""
    columns = [np.array(c) for c in zip(*rows)] if rows else [np.zeros(0)] * 5
    ensemble, trees, forests, targets = columns[:4]
    learn = columns[4].astype(bool)
    models = ("ensemble", "tree", "forest") if forest else ("ensemble", "tree")
    f = forests if forest else None

    def new() -> TreeChoice:
        choice = _YoungChoice(models=models, learned=learned if forest else None, tree_learned=tree_learned)
        choice.RETIRE_MARGIN, choice.TREE_MARGIN = margins  # (an instance's own margins)
        return choice

    filtered, by_rows, halves = new(), new(), new()
    predictions = _predictions(ensemble, trees, f)
    served = filtered.serve(predictions, targets, learn)
    expected = by_rows._serve_rows(predictions, targets, learn)
    half = len(rows) // 2
    first = halves.serve(_rows(predictions, slice(half)), targets[:half], learn[:half])
    rest = halves.serve(_rows(predictions, slice(half, None)), targets[half:], learn[half:])
    assert served.tobytes() == expected.tobytes() == np.concatenate([first, rest]).tobytes()
    assert filtered.errors == by_rows.errors == halves.errors
    assert filtered.models == by_rows.models == halves.models
    assert filtered.learned == by_rows.learned == halves.learned
    assert filtered.tree_learned == by_rows.tree_learned == halves.tree_learned
    assert [c for c in filtered.offered] == [c for c in by_rows.offered]


@pytest.mark.parametrize("enabled", [True, False], ids=["kernels", "SGT_KERNELS=0"])
def test_the_tree_retires_inside_a_batch_as_in_the_loop_and_after_a_restore(
    enabled: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where the forest serves (the piecewise target), the single tree retires from
    `TreeChoice.TREE_YOUTH` learned records on (here 1,000), inside a batch of 700, at the same record
    as the one-record loop and a model restored before it; they predict the same and save the same
    bytes (without the tree, the choice's errors beside the forest). Without the rule the tree stays."""
    monkeypatch.setattr(kernels, "ENABLED", enabled and kernels.ENABLED)
    monkeypatch.setattr(TreeChoice, "TREE_YOUTH", 1000)  # (the streams a test affords are short)
    X, y = piecewise(2400)
    batched = _RetiringTree(warm_up=100, fine_tree=False)
    predictions = _batched(batched, X, y)
    assert batched._single is None and batched.single_tree is True and batched._forest is not None
    assert batched._choice is not None and batched._choice.models == {"ensemble", "forest"}
    assert batched._choice.tree_learned is None and len(batched._choice.errors) == 3
    loop = _RetiringTree(warm_up=100, fine_tree=False)
    np.testing.assert_array_equal(_loop(loop, X, y), predictions)
    assert loop.to_bytes() == batched.to_bytes()
    half = _RetiringTree(warm_up=100, fine_tree=False)
    first = half.predict_learn_many(X[:900], y[:900].tolist())
    assert half._single is not None and half._choice is not None and half._choice.tree_learned == 900
    assert decode(half.to_bytes()).header["extra"]["single"]["tree_learned"] == 900
    restored = _RetiringTree.from_bytes(half.to_bytes())
    assert restored.to_bytes() == half.to_bytes()
    rest = _batched(restored, X[900:], y[900:])
    np.testing.assert_array_equal(np.concatenate([first, rest]), predictions)
    assert restored.to_bytes() == batched.to_bytes()
    # restored after it retired: no tree, the choice's errors beside the forest; it learns on the same
    blob = batched.to_bytes()
    header = decode(blob).header
    assert "single" not in header["extra"] and len(header["extra"]["forest"]["choice"]) == 3
    assert header["extra"]["tree_retired"] is True and header["params"]["single_tree"] is True
    back = _RetiringTree.from_bytes(blob)
    assert back._single is None and back._choice is not None and back.to_bytes() == blob
    X2, y2 = piecewise(600, seed=5)
    np.testing.assert_array_equal(
        back.predict_learn_many(X2, y2.tolist()), batched.predict_learn_many(X2, y2.tolist())
    )
    assert back.to_bytes() == batched.to_bytes()
    kept = _KeptTree(warm_up=100)  # (without the rule: the tree stays)
    kept.learn_many(X, y.tolist())
    assert kept._single is not None and kept._choice is not None and kept._choice.tree_learned is None


def test_the_tree_and_the_forest_both_retire_and_the_members_serve_alone(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Where the ensemble leads (a linear target; a forest that never splits, a tree of constant
    leaves), both side models retire and the model drops the choice; batch, loop and restore agree."""
    monkeypatch.setattr(TreeChoice, "TREE_YOUTH", 1000)  # (the streams a test affords are short)
    X, y = _linear(2400)
    batched = _RetiringTreeWeakForest(warm_up=100, fine_tree=False)
    predictions = _batched(batched, X, y)
    assert batched._single is None and batched._forest is None and batched._choice is None
    loop = _RetiringTreeWeakForest(warm_up=100, fine_tree=False)
    np.testing.assert_array_equal(_loop(loop, X, y), predictions)
    assert loop.to_bytes() == batched.to_bytes()
    blob = batched.to_bytes()
    extra = decode(blob).header["extra"]
    assert not {"single", "forest"} & set(extra) and extra["tree_retired"] is True
    back = _RetiringTreeWeakForest.from_bytes(blob)
    assert back._single is None and back._choice is None and back.to_bytes() == blob


def test_a_save_without_the_trees_count_never_retires_it_and_a_bad_one_is_refused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A model saved by the code before the tree's retirement (its choice has no `tree_learned`) keeps
    its tree, as that code did, even in a class whose tree retires; a bad count, or a count beside no
    tree, is refused."""
    monkeypatch.setattr(TreeChoice, "TREE_YOUTH", 1000)  # (where it would retire, with the count)
    X, y = piecewise(2400)
    model = _RetiringTree(warm_up=100, fine_tree=False)
    model.learn_many(X[:500], y[:500].tolist())
    header, arrays, _ = decode(model.to_bytes())
    del header["extra"]["single"]["tree_learned"]
    old = _RetiringTree.from_bytes(encode(header, list(arrays.items())))
    assert old._choice is not None and old._choice.tree_learned is None
    old.learn_many(X[500:], y[500:].tolist())
    assert old._single is not None and old._choice is not None and "tree" in old._choice.models
    header["extra"]["single"]["tree_learned"] = "many"
    with pytest.raises(SerializationError, match="count"):
        BoostedRegressor.from_bytes(encode(header, list(arrays.items())))
    header["extra"]["single"]["tree_learned"] = 500
    moved = dict(header["extra"])
    single = moved.pop("single")
    moved["forest"] = {**moved["forest"], **{k: v for k, v in single.items() if k != "header"}}
    moved["forest"]["header"] = header["extra"]["forest"]["header"]
    kept = [(k, a) for k, a in arrays.items() if not k.startswith("extra.single.")]
    with pytest.raises(SerializationError, match="needs its single tree"):  # (not marked retired)
        BoostedRegressor.from_bytes(encode({**header, "extra": moved}, kept))
    with pytest.raises(SerializationError, match="youth of a single tree"):  # (marked, but counted)
        BoostedRegressor.from_bytes(encode({**header, "extra": {**moved, "tree_retired": True}}, kept))
    with pytest.raises(SerializationError, match="retired saves no single tree"):  # (marked, but saved)
        BoostedRegressor.from_bytes(
            encode({**header, "extra": {**header["extra"], "tree_retired": True}}, list(arrays.items()))
        )


def test_without_a_forest_the_tree_never_retires_and_saves_as_before(monkeypatch: pytest.MonkeyPatch) -> None:
    """The single tree retires beside a forest only: a model without one (`forest=False`) keeps its
    tree and saves the format before the retirement (no count)."""
    monkeypatch.setattr(TreeChoice, "TREE_YOUTH", 1000)
    X, y = piecewise(2400)
    model = BoostedRegressor(warm_up=100, forest=False)
    model.learn_many(X, y.tolist())
    assert model._single is not None and model._choice is not None and model._choice.tree_learned is None
    assert set(decode(model.to_bytes()).header["extra"]["single"]) == {"header", "version", "choice"}
