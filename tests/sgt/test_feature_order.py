"""Feature order never matters: a model's predictions and saved bytes do not depend on the order of the
keys in any record, for every model class (property tests with hypothesis).

Each example is a stream of dict records in which features emerge over time (several in one record,
the first record included), disappear, go missing (None, NaN, an absent key) and mix numeric and
nominal kinds, with names whose plain and natural orders differ ("b10" and "b2"). The same stream is
learned twice: once as written and once with the keys of every record permuted at random, one record
at a time or in batches. Both models must predict the same bits before every record and end in the
same bytes.
"""

from __future__ import annotations

import itertools
import math
import random
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, Phase, assume, example, given, settings
from hypothesis import strategies as st

from sgt import BoostedClassifier, SGTClassifier
from sgt.features import FeatureSpace
from sgt.registry import MODEL_TYPES

#: small grace periods and warm-ups, so that a few hundred records bring splits, leaf updates and
#: grown grids; every other parameter is the class's default
SMALL = {"grace_period": 20, "grace_start": 10, "warm_up": 30}
RECORDS = 240
# no shrinking: an example is a few seeds, which shrink to nothing clearer
PROPERTY = settings(
    max_examples=8,
    deadline=None,
    phases=[Phase.explicit, Phase.reuse, Phase.generate],
    suppress_health_check=[HealthCheck.too_slow],
)


def _record(rng: np.random.Generator, i: int, late: int) -> tuple[dict[str, Any], float]:
    """Record i of a stream: the features and a hidden score its target derives from."""
    x: dict[str, Any] = {
        "b2": float(rng.uniform(0.0, 1.0)),
        "colour": str(rng.choice(["red", "blue", "sun"])),
    }
    x["b10"] = float(rng.normal(0.0, 100.0))
    r = rng.uniform()
    x["a"] = None if r < 0.1 else math.nan if r < 0.2 else float(rng.uniform(-1.0, 1.0))
    if r > 0.8:
        del x["a"]  # absent
    if i >= late:  # emerging together, in one record, after the stream began
        x["zeta"] = float(rng.integers(0, 4))
        x["Yank"] = str(rng.choice(["p", "q"]))
        x["x1"] = float(rng.uniform(0.0, 1e-6))
    if i % 7 == 3:
        x.pop("b2")  # disappearing for a record
    score = 2.0 * x.get("b2", 0.5) + (x["colour"] == "blue") + 0.01 * x["b10"] + x.get("zeta", 0.0) / 3.0
    return x, score


def _stream(seed: int, late: int) -> tuple[list[dict[str, Any]], list[float]]:
    rng = np.random.default_rng(seed)
    pairs = [_record(rng, i, late) for i in range(RECORDS)]
    return [x for x, _ in pairs], [s for _, s in pairs]


def _permuted(records: list[dict[str, Any]], seed: int) -> list[dict[str, Any]]:
    """The same records, each one's keys in a random order of its own."""
    shuffle = random.Random(seed)
    out = []
    for x in records:
        keys = list(x)
        shuffle.shuffle(keys)
        out.append({k: x[k] for k in keys})
    return out


def _targets(name: str, scores: list[float]) -> list[Any]:
    if name.endswith("Regressor"):
        return scores
    if name == "MILClassifier":  # a bag is positive when one of its instances is
        return [int(max(bag) > 2.2) for bag in _bagged(scores)]
    return [f"c{min(int(s), 3)}" for s in scores]  # up to four classes: the multiclass paths too


def _bagged(items: list[Any]) -> list[list[Any]]:
    """MILClassifier learns bags: consecutive records, one to three a bag."""
    return [items[i : i + 1 + i % 3] for i in range(len(items))]


def _predict(model: Any, x: Any) -> Any:
    return model.predict_proba_one(x) if hasattr(model, "predict_proba_one") else model.predict_one(x)


def _learn_loop(model: Any, xs: list[Any], ys: list[Any]) -> list[Any]:
    """Predict then learn each record in turn; the predictions."""
    out = []
    for x, y in zip(xs, ys, strict=True):
        out.append(_predict(model, x))
        model.learn_one(x, y)
    return out


def _learn_batches(model: Any, xs: list[Any], ys: list[Any]) -> list[Any]:
    """Batches of irregular sizes; the predictions a loop would make, as `_learn_loop` returns them.

    Each batch is predicted record by record on a copy restored from the model's bytes, which
    learns the batch's records one at a time as it goes (a restore continues exactly, byte for byte),
    before the model learns the batch in one call.
    """
    out = []
    start = 0
    for size in itertools.cycle([1, 5, 17, 3, 60]):
        if start >= len(xs):
            break
        part = slice(start, start + size)
        out.extend(_learn_loop(type(model).from_bytes(model.to_bytes()), xs[part], ys[part]))
        model.learn_many(xs[part], ys[part])
        start += size
    return out


LEARNERS: dict[str, Callable[[Any, list[Any], list[Any]], list[Any]]] = {
    "loop": _learn_loop,
    "batches": _learn_batches,
}


@pytest.mark.parametrize("name", sorted(MODEL_TYPES))
@PROPERTY
@example(seed=0, shuffle=0, late=0, path="loop")
@given(
    seed=st.integers(0, 2**32 - 1),
    shuffle=st.integers(0, 2**32 - 1),
    late=st.integers(0, RECORDS // 2),
    path=st.sampled_from(sorted(LEARNERS)),
)
def test_permuting_the_keys_of_every_record_changes_no_prediction_and_no_byte(
    name: str, seed: int, shuffle: int, late: int, path: str
) -> None:
    records, scores = _stream(seed, late)
    permuted = _permuted(records, shuffle)
    targets = _targets(name, scores)
    if name == "MILClassifier":
        xs, ys, xs_permuted = _bagged(records), targets, _bagged(permuted)
    else:
        xs, ys, xs_permuted = records, targets, permuted
    cls = MODEL_TYPES[name]
    written, shuffled = cls(**SMALL), cls(**SMALL)
    before = _learn_loop(written, xs, ys)
    after = LEARNERS[path](shuffled, xs_permuted, ys)
    # a draw whose stream never moved the model proves nothing, so it is set aside, not failed:
    # MILClassifier's noisy bags may leave every update insignificant in 240 records (seed 2127, late 83)
    assume(written.version > 0)
    if seed == 0:  # the explicit example: the stream is long enough to exercise splits
        assert written.n_splits > 0
    assert after == before
    assert shuffled.to_bytes() == written.to_bytes()


@given(names=st.lists(st.text(min_size=1, max_size=6), min_size=1, max_size=8, unique=True), data=st.data())
def test_the_space_registers_a_records_new_features_in_one_order_whatever_their_key_order(
    names: list[str], data: st.DataObject
) -> None:
    order = data.draw(st.permutations(names))
    a, b = FeatureSpace(8, 4), FeatureSpace(8, 4)
    a.encode_one({name: 1.0 for name in names}, learn=True)
    b.encode_rows([{name: 1.0 for name in order}], learn=None)
    assert a.names == b.names


def test_a_records_new_features_register_in_natural_order_of_their_names() -> None:
    space = FeatureSpace(8, 4)
    space.encode_one({"b10": 1.0, "x01": 2.0, "b2": "u", "Z": 3.0, "x1": 4.0, "a": None}, learn=True)
    space.encode_one({"a": 5.0, "b1": 6.0}, learn=True)  # later records' features come after
    assert space.names == ["Z", "b2", "b10", "x01", "x1", "a", "b1"]


def test_array_columns_register_in_position_order_as_dicts_of_their_names_do() -> None:
    """Arrays are positional: columns x0 ... x11 keep their order (natural, not plain: x2 before x10),
    and dicts with those names, keys in any order, learn the same bytes."""
    rng = np.random.default_rng(7)
    X = rng.uniform(0.0, 1.0, (400, 12))
    y = (X[:, 11] + X[:, 2] > 1.0).tolist()
    shuffle = random.Random(7)
    records = []
    for row in X.tolist():
        keys = [f"x{c}" for c in range(12)]
        shuffle.shuffle(keys)
        records.append({k: row[int(k[1:])] for k in keys})
    from_array, from_dicts = SGTClassifier(**SMALL), SGTClassifier(**SMALL)
    from_array.learn_many(X, y)
    for x, label in zip(records, y, strict=True):
        from_dicts.learn_one(x, label)
    assert [f["name"] for f in from_array.to_dict()["features"]] == [f"x{c}" for c in range(12)]
    assert from_array.n_splits > 0
    assert from_dicts.to_bytes() == from_array.to_bytes()


def test_declared_feature_names_keep_their_order_for_arrays_and_dicts() -> None:
    names = ["size", "noise", "age"]  # not sorted
    rng = np.random.default_rng(8)
    X = rng.uniform(0.0, 1.0, (400, 3))
    y = (X[:, 0] > 0.5).tolist()
    from_array = SGTClassifier(feature_names=names, **SMALL)
    from_dicts = SGTClassifier(feature_names=names, **SMALL)
    from_array.learn_many(X, y)
    from_dicts.learn_many([dict(reversed(list(zip(names, row)))) for row in X.tolist()], y)
    assert [f["name"] for f in from_array.to_dict()["features"]] == names
    assert from_dicts.to_bytes() == from_array.to_bytes()


def test_keys_that_are_not_strings_order_canonically_too() -> None:
    """learn_one takes integer keys (River's generators use them) beside strings: any order, one model."""
    rng = np.random.default_rng(9)
    records = [
        {0: float(a), 1: float(b), 10: float(c), 2: float(d), "s": str(e)}
        for a, b, c, d, e in zip(*rng.uniform(0.0, 1.0, (4, 300)), rng.choice(["u", "v"], 300), strict=True)
    ]
    labels = [x[10] + x[0] > 1.0 for x in records]
    written, permuted = BoostedClassifier(**SMALL), BoostedClassifier(**SMALL)
    for x, label in zip(records, labels, strict=True):
        written.learn_one(x, label)
    for x, label in zip(_permuted(records, 9), labels, strict=True):
        permuted.learn_one(x, label)
    assert [f["name"] for f in written.to_dict()["features"]] == ["s", 0, 1, 2, 10]
    assert written.n_splits > 0
    assert permuted.to_bytes() == written.to_bytes()


#: integer names for some of `_record`'s features (River's generators key their features by integers);
#: "colour" and "Yank" stay strings, so a record mixes both kinds of name
_INTEGER_NAMES = {"a": 0, "b2": 2, "b10": 10, "zeta": 7, "x1": 1}


def _integer_keyed(records: list[dict[str, Any]], kind: Callable[[int], Any] = int) -> list[dict[Any, Any]]:
    return [{kind(_INTEGER_NAMES[k]) if k in _INTEGER_NAMES else k: v for k, v in x.items()} for x in records]


@pytest.mark.parametrize("name", sorted(MODEL_TYPES))
def test_integer_names_learn_the_same_model_one_at_a_time_and_in_batches(name: str) -> None:
    # regression: a batch (and BoostedRegressor.learn_one, which learns a batch of one) refused the
    # integer names that learn_one took, so River's generators' records could not be learned in batches
    records, scores = _stream(5, 40)
    targets = _targets(name, scores)
    xs = _bagged(_integer_keyed(records)) if name == "MILClassifier" else _integer_keyed(records)
    cls = MODEL_TYPES[name]
    loop, batches = cls(**SMALL), cls(**SMALL)
    before = _learn_loop(loop, xs, targets)
    after = _learn_batches(batches, xs, targets)
    assert loop.version > 0
    assert after == before
    assert batches.to_bytes() == loop.to_bytes()
    assert cls.from_bytes(loop.to_bytes()).to_bytes() == loop.to_bytes()


def test_numpy_integer_names_are_the_integers_they_equal() -> None:
    # regression: a numpy integer name was kept as such, and the model could not be saved (JSON)
    records, scores = _stream(6, 0)
    plain, numpy_keyed = SGTClassifier(**SMALL), SGTClassifier(**SMALL)
    targets = _targets("SGTClassifier", scores)
    _learn_loop(plain, _integer_keyed(records), targets)
    _learn_loop(numpy_keyed, _integer_keyed(records, np.int64), targets)
    assert numpy_keyed.to_bytes() == plain.to_bytes()
    assert all(type(f["name"]) in (str, int) for f in numpy_keyed.to_dict()["features"])


@pytest.mark.parametrize("name", sorted(MODEL_TYPES))
@pytest.mark.parametrize("key", [2.5, None, (1, 2), True, np.float64(3.0)])
def test_names_other_than_strings_and_integers_are_refused_on_every_path(name: str, key: Any) -> None:
    """A name a saved model could not hold is refused where it first arrives, whichever the path,
    and the model is left as it was (before, learn_one took any name, and some failed on saving)."""
    x: dict[Any, Any] = {key: 1.0, "s": 0.5}
    target = _targets(name, [1.0])[0]
    cls = MODEL_TYPES[name]
    for learn in (
        lambda m: m.learn_one([x] if name == "MILClassifier" else x, target),
        lambda m: m.learn_many([[x]] if name == "MILClassifier" else [x], [target]),
        lambda m: m.learn_many([[x]] * 2 if name == "MILClassifier" else [x, x], [target] * 2),
    ):
        model = cls(**SMALL)
        fresh = model.to_bytes()
        with pytest.raises(TypeError, match="feature names must be strings or integers"):
            learn(model)
        assert model.to_bytes() == fresh


def test_a_batch_of_plain_and_numpy_numbers_learns_the_loops_model() -> None:
    # regression: the batch encoder's fast path coded a column of plain floats (growing its grid) before
    # it met a column of numpy floats, gave up and left the batch to the row-by-row path, which coded the
    # first column again: that feature's warm-up counted its values twice, so the batch's grids, and the
    # model, differed from the one-record loop's (which column came first followed the set of the keys)
    rng = np.random.default_rng(11)
    # feature 0 grows its grid all through its warm-up (a time), so counting its values twice ends it early
    records = [{0: 1.5 * i, 1: np.float64(b)} for i, b in enumerate(rng.uniform(0.0, 1.0, 300))]
    labels = [x[1] > 0.5 for x in records]
    loop, batches = SGTClassifier(**SMALL), SGTClassifier(**SMALL)
    for x, label in zip(records, labels, strict=True):
        loop.learn_one(x, label)
    for start in range(0, len(records), 7):
        batches.learn_many(records[start : start + 7], labels[start : start + 7])
    assert loop.n_splits > 0
    assert batches.to_bytes() == loop.to_bytes()
