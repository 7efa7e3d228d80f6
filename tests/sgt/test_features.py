"""Feature handling seen through the public API: kinds, ranges, bins, clipping, nominal and missing values.

Semantics under test: a feature's kind is fixed by its first non-missing value or
by ``nominal=``; numeric ranges come from each feature's first ``warm_up`` finite values and are then
frozen; values outside the range and infinities fall into the end bins; missing values (None, NaN, an
absent key) never crash and, at a split, follow the child that had most instances when it was made.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sgt import (
    AdaptiveSGTRegressor,
    BoostedClassifier,
    BoostedRegressor,
    MILClassifier,
    SGTClassifier,
    SGTRegressor,
)
from sgt.base import ROW_BY_ROW_MAX
from sgt.features import UNKNOWN
from sgt.losses import MAX_TARGET
from tests.sgt.sgt_testkit import iter_nodes, route, threshold_stream


def _split_classifier(n: int = 3000, seed: int = 30, left_share: float = 0.5) -> SGTClassifier:
    """A classifier split on x0 near 0.5 (label x0 > 0.5), with `left_share` of the data on the left."""
    rng = np.random.default_rng(seed)
    left = rng.uniform(size=n) < left_share
    x0 = np.where(left, rng.uniform(0.0, 0.5, n), rng.uniform(0.5, 1.0, n))
    X = np.column_stack([x0, rng.uniform(0.0, 1.0, n)])
    model = SGTClassifier(grace_period=100, warm_up=100)
    model.learn_many(X, X[:, 0] > 0.5)
    assert model.to_dict()["trees"][0]["feature"] == "x0"
    return model


def test_feature_kinds_follow_the_first_non_missing_value() -> None:
    model = SGTClassifier()
    model.learn_one({"a": None, "b": "x", "c": 3, "d": True, "e": float("nan")}, 0)
    model.learn_one({"a": 1.5, "b": "y", "c": 4, "d": False, "e": "late"}, 1)
    kinds = {f["name"]: f["kind"] for f in model.to_dict()["features"]}
    assert kinds == {"a": "numeric", "b": "nominal", "c": "numeric", "d": "numeric", "e": "nominal"}


def test_nominal_parameter_makes_numbers_categories() -> None:
    model = SGTRegressor(nominal=["code"], grace_period=50, warm_up=50)
    rng = np.random.default_rng(31)
    codes = rng.integers(0, 3, 1500)
    model.learn_many([{"code": int(c)} for c in codes], np.array([1.0, 9.0, 4.0])[codes])
    (feature,) = model.to_dict()["features"]
    assert feature["kind"] == "nominal"
    assert sorted(feature["categories"]) == [0, 1, 2]
    assert feature["range"] is None
    root = model.to_dict()["trees"][0]
    assert root["kind"] == "nominal" and sorted(root["categories"]) == [0, 1, 2]
    assert model.predict_one({"code": 1}) == pytest.approx(9.0, abs=0.5)


def test_a_string_for_a_numeric_feature_is_a_value_error_naming_it() -> None:
    model = SGTClassifier()
    model.learn_one({"age": 41.0}, 0)
    with pytest.raises(ValueError, match="age"):
        model.learn_one({"age": "forty"}, 1)
    with pytest.raises(ValueError, match="age"):
        model.learn_many([{"age": 3.0}, {"age": "forty"}], [0, 1])


def test_a_number_for_a_string_feature_is_a_value_error_naming_it() -> None:
    model = SGTClassifier()
    model.learn_one({"plan": "pro"}, 0)
    with pytest.raises(ValueError, match="plan"):
        model.learn_one({"plan": 3.5}, 1)


def test_a_rejected_batch_is_not_learnt_at_all() -> None:
    model = SGTClassifier()
    model.learn_many([{"age": float(i), "plan": "pro"} for i in range(10)], [i % 2 for i in range(10)])
    blob = model.to_bytes()
    with pytest.raises(ValueError, match="age"):
        model.learn_many([{"age": 1.0, "plan": "new"}, {"age": "x"}], [0, "new-class"])
    assert model.to_bytes() == blob


@pytest.mark.parametrize("cls", [SGTClassifier, SGTRegressor, BoostedClassifier, BoostedRegressor])
@pytest.mark.parametrize(
    "record",
    [
        {"plan": "basic", "age": "forty", "new": 1.0},  # a known feature's bad value
        {"plan": "basic", "age": 4.0, "new": [1.0]},  # a new feature's (prediction skips it)
    ],
)
def test_a_rejected_record_leaves_the_model_unchanged(cls: type[Any], record: dict[str, Any]) -> None:
    # regression: SGTRegressor.learn_one had its trend offset take the target before the record was
    # encoded, so a record refused for a new feature's value still moved the offset
    model = cls()
    model.learn_many([{"age": float(i), "plan": "pro"} for i in range(10)], [i % 2 for i in range(10)])
    blob = model.to_bytes()
    with pytest.raises(ValueError):
        model.learn_one(record, 1)
    assert model.to_bytes() == blob


def test_a_bag_refused_for_a_later_instance_leaves_the_model_unchanged() -> None:
    # regression: the instances before the bad one had registered their features and grown the grids
    model = MILClassifier()
    model.learn_one([{"a": 1.0}, {"a": 3.0}], 0)
    blob = model.to_bytes()
    with pytest.raises(ValueError, match="'b' is numeric"):
        model.learn_one([{"a": 9.0, "b": 2.0, "c": 1.0}, {"b": "x"}], 1)
    assert model.to_bytes() == blob


@pytest.mark.parametrize("cls", [SGTRegressor, BoostedRegressor, AdaptiveSGTRegressor])
def test_a_target_beyond_the_largest_is_refused_and_the_largest_learns_as_others(cls: type[Any]) -> None:
    # regression: a target of 1e160 was learned, its square overflowed the trend offset's variance, and
    # the model could no longer be saved; from about 1e90 on the trees split no more
    model = cls()
    model.learn_many([{"a": float(i)} for i in range(20)], [float(i) for i in range(20)])
    blob = model.to_bytes()
    for learn in (
        lambda m: m.learn_one({"a": 1.0}, 1e90),
        lambda m: m.learn_many([{"a": 1.0}] * 2, [1.0, -1e160]),
    ):
        with pytest.raises(ValueError, match=r"target must be a finite number of magnitude at most 1e\+50"):
            learn(model)
        assert model.to_bytes() == blob
    rng = np.random.default_rng(34)
    X = rng.uniform(0.0, 1.0, (2000, 2))
    steps = np.where(X[:, 0] > 0.5, 1.0, -1.0) + 0.1 * rng.normal(0.0, 1.0, 2000)
    largest, smaller = cls(), cls()
    largest.learn_many(X, (steps * MAX_TARGET / 2).tolist())
    smaller.learn_many(X, (steps * 1e20).tolist())
    assert largest.n_splits == smaller.n_splits > 0
    assert type(largest).from_bytes(largest.to_bytes()).to_bytes() == largest.to_bytes()
    assert math.isfinite(largest.predict_one({"x0": 0.7, "x1": 0.2}))


def test_a_batch_of_bags_with_a_bad_one_is_not_learnt_at_all() -> None:
    # regression: MILClassifier.learn_many learned the bags before the bad one (a bad instance or label)
    good = [[{"a": float(i)}, {"a": float(i + 1), "b": 2.0}] for i in range(30)]
    for bags, labels in (([*good, [{"a": "x"}], *good], [0, 1] * 30 + [0]), (good, [0] * 29 + [2])):
        model = MILClassifier(grace_period=10, grace_start=5, warm_up=20)
        blob = model.to_bytes()
        with pytest.raises(ValueError):
            model.learn_many(bags, labels)
        assert model.to_bytes() == blob
    loop, batch = MILClassifier(grace_period=10, warm_up=20), MILClassifier(grace_period=10, warm_up=20)
    for bag, label in zip(good, [i % 2 for i in range(30)], strict=True):
        loop.learn_one(bag, label)
    batch.learn_many(good, [i % 2 for i in range(30)])
    assert batch.to_bytes() == loop.to_bytes()


def test_bools_are_numeric() -> None:
    rng = np.random.default_rng(32)
    flags = rng.uniform(size=2000) < 0.5
    model = SGTRegressor(grace_period=50, warm_up=50)
    model.learn_many([{"flag": bool(f)} for f in flags], np.where(flags, 5.0, -5.0))
    (feature,) = model.to_dict()["features"]
    assert feature["kind"] == "numeric" and feature["range"] == [-0.5, 1.5]  # 0 and 1: a grid centred on them
    assert model.predict_one({"flag": True}) == pytest.approx(5.0, abs=0.2)
    assert model.predict_one({"flag": False}) == pytest.approx(-5.0, abs=0.2)


def test_the_grid_grows_with_the_first_warm_up_finite_values_then_stops() -> None:
    """5 and 2: 64 bins of width 1/16 centred on them, [1.5, 5.5); 9 doubles it upwards; 4 is inside;
    100 and -100 come after the 4 finite values of the warm-up and are clipped."""
    values = [5.0, math.nan, 2.0, None, 9.0, math.inf, 4.0, 100.0, -100.0]
    model = SGTRegressor(warm_up=4, grace_period=1000)
    for v in values:
        model.learn_one({"v": v}, 1.0)
    (feature,) = model.to_dict()["features"]
    assert feature["range"] == [1.5, 9.5]


def test_split_thresholds_are_bin_edges_of_the_frozen_range() -> None:
    X, y = threshold_stream(3000, seed=33)
    model = SGTClassifier(grace_period=100, warm_up=100, bins=16)
    model.learn_many(X, y)
    ranges = {f["name"]: f["range"] for f in model.to_dict()["features"]}
    splits = [n for n in iter_nodes(model.to_dict()["trees"][0]) if not n["leaf"]]
    assert splits
    for node in splits:
        lo, hi = ranges[node["feature"]]
        assert node["threshold"] == pytest.approx(lo + (hi - lo) * (node["bin"] + 1) / 16, rel=1e-12)
        assert 0 <= node["bin"] < 15


def _deep_regressor() -> tuple[SGTRegressor, list[dict]]:  # constant leaves: a leaf's value is its prediction
    """A regressor with numeric and nominal splits, and records with missing and unseen values."""
    rng = np.random.default_rng(38)
    n = 6000
    a, b = rng.uniform(0.0, 1.0, n), rng.uniform(-5.0, 5.0, n)
    c = rng.choice(["u", "v", "w"], n)
    y = 4.0 * (a > 0.3) + 2.0 * (b > 1.0) + 3.0 * (c == "w") + rng.normal(0.0, 0.2, n)
    records = [{"a": float(p), "b": float(q), "c": str(r)} for p, q, r in zip(a, b, c, strict=True)]
    model = SGTRegressor(grace_period=100, warm_up=100, leaf_model="constant")
    model._levels = None  # (the exported tree's values are the predictions without the residual level)
    model.learn_many(records, y)
    probes = [
        {"a": float(p), "b": float(q), "c": str(r)}
        for p, q, r in zip(
            rng.uniform(-0.5, 1.5, 300), rng.uniform(-8, 8, 300), rng.choice(["u", "w", "new"], 300)
        )
    ]
    probes += [{"a": None, "b": 2.0, "c": "u"}, {"b": math.nan, "c": None}, {}]
    return model, probes


def test_predictions_follow_the_exported_tree() -> None:
    model, probes = _deep_regressor()
    root = model.to_dict()["trees"][0]
    assert model.n_splits >= 3
    assert {n["kind"] for n in iter_nodes(root) if not n["leaf"]} == {"numeric", "nominal"}
    for x in probes:
        assert model.predict_one(x) == route(root, x)["value"], x


def test_values_next_to_a_threshold_go_to_its_two_sides() -> None:
    model, _ = _deep_regressor()
    root = model.to_dict()["trees"][0]
    for node in iter_nodes(root):
        if not node["leaf"] and node["kind"] == "numeric":
            for side, x in enumerate(
                (math.nextafter(node["threshold"], -math.inf), node["threshold"] * 1.0001)
            ):
                record = {node["feature"]: x}
                assert route(node, record) is route(node["children"][side], record)


def test_a_value_equal_to_a_threshold_goes_left() -> None:
    model, probes = _deep_regressor()
    root = model.to_dict()["trees"][0]
    at_thresholds = [
        {**probes[0], node["feature"]: node["threshold"]}
        for node in iter_nodes(root)
        if not node["leaf"] and node["kind"] == "numeric"
    ]
    assert at_thresholds
    for x in at_thresholds:
        assert model.predict_one(x) == route(root, x)["value"], x


def test_values_outside_the_range_and_infinities_clip_to_the_end_bins() -> None:
    model = _split_classifier()
    lo, hi = next(f["range"] for f in model.to_dict()["features"] if f["name"] == "x0")
    below = model.predict_proba_one({"x0": lo})
    above = model.predict_proba_one({"x0": hi})
    for x in (lo - 1.0, -1e300, -math.inf):
        assert model.predict_proba_one({"x0": x}) == below
    for x in (hi + 1.0, 1e300, math.inf):
        assert model.predict_proba_one({"x0": x}) == above


def test_infinities_before_the_first_finite_value_take_the_end_bins_on_every_path() -> None:
    """Before any finite value a feature has no range; +inf took the first bin there (beside -inf), so
    the two could not be told apart, and its code disagreed with the range [v, v] that the first
    finite value v sets (+inf > v is the last bin)."""
    from sgt.features import FeatureSpace

    one, batch = FeatureSpace(4, 3), FeatureSpace(4, 3)
    values = [math.inf, -math.inf, math.inf]
    assert [one.encode_one({"a": v}, learn=True) for v in values] == [[4], [1], [4]]
    assert batch.encode_rows([{"a": v} for v in values], np.ones(3, dtype=bool)).tolist() == [[4], [1], [4]]
    assert one.encode_one({"a": 7.0}, learn=False) == [1]  # no range to place a finite value on
    for space in (one, batch):
        space.encode_one({"a": 2.0}, learn=True)
        assert space.range_of(0) == (2.0, 2.0)
        assert [space.encode_one({"a": v}, learn=False) for v in values] == [[4], [1], [4]]


def test_a_tree_splits_on_infinities_met_before_any_finite_value() -> None:
    """Only infinite values: the tree must tell +inf from -inf, and export the split (a threshold that
    sends every value but +inf left) without searching for a finite edge that does not exist."""
    import sys

    rows = [{"x": math.inf if i % 2 else -math.inf} for i in range(200)]
    targets = [10.0 if i % 2 else 0.0 for i in range(200)]
    loop, batch = (SGTRegressor(grace_period=20, leaf_model="constant") for _ in range(2))
    for x, y in zip(rows, targets, strict=True):
        loop.learn_one(x, y)
    batch.learn_many(rows, targets)
    assert batch.to_bytes() == loop.to_bytes()
    root = loop.to_dict()["trees"][0]
    assert (root["leaf"], root["feature"], root["threshold"]) == (False, "x", sys.float_info.max)
    assert loop.predict_one({"x": math.inf}) - loop.predict_one({"x": -math.inf}) > 5.0
    for x in ({"x": math.inf}, {"x": -math.inf}, {"x": 1e300}):
        assert loop.predict_one(x) == route(root, x)["value"]


@pytest.mark.parametrize(("left_share", "expected"), [(0.8, False), (0.2, True)])
def test_missing_values_follow_the_child_with_most_instances(left_share: float, expected: bool) -> None:
    model = _split_classifier(left_share=left_share)
    root = model.to_dict()["trees"][0]
    assert root["missing"] == (0 if left_share > 0.5 else 1)
    for missing in ({"x0": None}, {"x0": math.nan}, {}):
        assert model.predict_one({**missing, "x1": 0.3}) is expected


def test_missing_values_are_learnt_down_the_missing_child() -> None:
    model = _split_classifier(left_share=0.8)
    right_before = model.to_dict()["trees"][0]["children"][1]
    model.learn_many([{"x1": 0.5}, {"x0": None, "x1": 0.5}, {"x0": math.nan}] * 100, [True] * 300)
    root = model.to_dict()["trees"][0]
    assert root["children"][1] == right_before
    assert model.n_seen == 3300


def test_missing_values_are_counted_in_the_leaf() -> None:
    model = SGTRegressor(grace_period=1000, warm_up=5)
    model.learn_many([{"a": 1.0}, {"a": None}, {"a": math.nan}, {}, {"b": 2.0}], [1.0, 2.0, 3.0, 4.0, 5.0])
    assert model.to_dict()["trees"][0]["n"] == 5


def test_a_feature_missing_everywhere_so_far_is_no_feature_yet() -> None:
    model = SGTRegressor()
    model.learn_many([{"a": None, "b": 1.0}, {"a": math.nan, "b": 2.0}], [1.0, 2.0])
    assert [f["name"] for f in model.to_dict()["features"]] == ["b"]


def test_nominal_split_is_multiway_over_the_categories_seen() -> None:
    rng = np.random.default_rng(34)
    cats = rng.choice(["a", "b", "c"], 3000)
    means = {"a": 0.0, "b": 10.0, "c": 20.0}
    model = SGTRegressor(grace_period=100, warm_up=100)
    model.learn_many([{"c": str(c)} for c in cats], [means[str(c)] + rng.normal() for c in cats])
    root = model.to_dict()["trees"][0]
    assert root["kind"] == "nominal" and sorted(root["categories"]) == ["a", "b", "c"]
    assert len(root["children"]) == 3
    for cat, child in zip(root["categories"], root["children"], strict=True):
        assert child["value"] == pytest.approx(means[cat], abs=1.0)
        assert model.predict_one({"c": cat}) == child["value"]


def test_missing_nominal_values_follow_the_largest_child() -> None:
    rng = np.random.default_rng(35)
    cats = rng.choice(["small", "big"], 3000, p=[0.2, 0.8])
    model = SGTRegressor(grace_period=100, warm_up=100)
    model.learn_many([{"c": str(c)} for c in cats], np.where(cats == "big", 10.0, -10.0))
    root = model.to_dict()["trees"][0]
    big = root["categories"].index("big")
    assert root["missing"] == big
    assert model.predict_one({"c": None}) == model.predict_one({"c": "big"})
    assert model.predict_one({}) == model.predict_one({"c": "big"})


def test_unknown_features_at_prediction_time_are_ignored() -> None:
    model = _split_classifier()
    assert model.predict_proba_one({"x0": 0.9, "never-seen": "x"}) == model.predict_proba_one({"x0": 0.9})


def test_many_categories_and_large_records_stay_fast_and_correct() -> None:
    rng = np.random.default_rng(36)
    ids = rng.integers(0, 300, 5000)
    records = [
        {"id": f"u{i}", **{f"n{k}": float(v) for k, v in enumerate(rng.uniform(size=20))}} for i in ids
    ]
    model = SGTRegressor(grace_period=200, warm_up=200)
    model.learn_many(records, (ids % 2).astype(float) * 10.0)
    assert {f["name"] for f in model.to_dict()["features"]} == {"id"} | {f"n{k}" for k in range(20)}
    assert np.all(np.isfinite(model.predict_many(records[:100])))


def test_max_categories_gives_later_categories_one_shared_code() -> None:
    """A feature with ever-new values (an id) keeps every leaf's statistics and the leaf count bounded."""
    records = [{"user": f"u{i}", "a": float(i % 10)} for i in range(4000)]
    labels = [i % 2 for i in range(4000)]
    bounded = SGTClassifier(max_categories=8)
    bounded.learn_many(records, labels)
    features = {f["name"]: f for f in bounded.to_dict()["features"]}
    assert features["user"]["categories"] == [f"u{i}" for i in range(8)] + [None]  # None: "other"
    assert bounded.n_leaves <= 10 and bounded.nbytes < 200_000
    # every category beyond the first eight is "other", in learning and in prediction
    assert bounded.predict_proba_one({"user": "u3999", "a": 1.0}) == bounded.predict_proba_one(
        {"user": "never-seen", "a": 1.0}
    )
    unbounded = SGTClassifier()
    unbounded.learn_many(records[:1500], labels[:1500])
    (user,) = (f for f in unbounded.to_dict()["features"] if f["name"] == "user")
    assert len(user["categories"]) == 1500


def test_before_the_vocabulary_is_full_an_unseen_category_is_unknown() -> None:
    model = SGTRegressor(max_categories=3, grace_period=10, warm_up=10)
    model.learn_many([{"c": "a"}, {"c": "b"}] * 20, [0.0, 10.0] * 20)
    assert model._space.encode_one({"c": "z"}, learn=False) == [UNKNOWN]
    model.learn_one({"c": "c"}, 5.0)
    assert model._space.encode_one({"c": "z"}, learn=False) == [UNKNOWN]  # full, but no "other" yet
    model.learn_one({"c": "d"}, 5.0)
    assert (
        model._space.encode_one({"c": "z"}, learn=False)
        == [4]
        == model._space.encode_one({"c": "d"}, learn=False)
    )


def test_array_rows_starting_with_nan_give_the_same_model_on_every_path() -> None:
    X, y = threshold_stream(1500, seed=37)
    X[::5, 0] = np.nan
    batch, loop = SGTClassifier(grace_period=100, warm_up=100), SGTClassifier(grace_period=100, warm_up=100)
    batch.learn_many(X, y)
    for row, label in zip(X, y, strict=True):
        loop.learn_one(row, label)
    assert batch.to_bytes() == loop.to_bytes()


def test_sequence_records_of_any_width_learn_as_dicts_of_their_column_names() -> None:
    """A record given as a list or an array names its values by position (x0, x1, ... or the declared
    feature_names), whatever the widths of the records before it: narrower, then wider, then narrower."""
    rng = np.random.default_rng(5)
    widths = rng.choice([1, 3, 2, 4], size=600)
    rows = [rng.normal(size=w) for w in widths]
    y = [float(r[0] > 0) for r in rows]
    for names in (None, ["a", "b", "c"]):  # declared names for the first three columns, x3 after them
        seq = SGTClassifier(grace_period=50, warm_up=50, feature_names=names)
        dicts = SGTClassifier(grace_period=50, warm_up=50, feature_names=names)
        labels = names or []
        for row, label in zip(rows, y, strict=True):
            keys = [labels[c] if c < len(labels) else f"x{c}" for c in range(len(row))]
            record = dict(zip(keys, row.tolist(), strict=True))
            sequence = row if len(row) % 2 else row.tolist()  # arrays and lists alike
            assert seq.predict_proba_one(sequence) == dicts.predict_proba_one(record)
            seq.learn_one(sequence, label)
            dicts.learn_one(record, label)
        assert seq.to_bytes() == dicts.to_bytes()


def test_rows_of_an_array_with_nan_predict_like_dicts_with_none() -> None:
    X, y = threshold_stream(1500, seed=37)
    X[::5, 0] = np.nan
    records = [{"x0": None if math.isnan(a) else a, "x1": b} for a, b in X.tolist()]
    a, b = SGTClassifier(grace_period=100, warm_up=100), SGTClassifier(grace_period=100, warm_up=100)
    a.learn_many(X, y)
    b.learn_many(records, y)
    assert a.to_dict()["trees"] == b.to_dict()["trees"]
    np.testing.assert_array_equal(a.predict_proba_many(X), b.predict_proba_many(records))


def test_nan_for_a_nominal_feature_is_missing_on_every_path() -> None:
    one, many = SGTRegressor(), SGTRegressor()
    records = [{"c": "p"}, {"c": math.nan}, {"c": None}, {"c": "q"}]
    for x in records:
        one.learn_one(x, 1.0)
    many.learn_many(records, [1.0] * 4)
    assert one.to_bytes() == many.to_bytes()
    assert one.predict_one({"c": math.nan}) == one.predict_one({"c": None})


def test_signed_zeros_give_the_same_bytes_on_every_path() -> None:
    records = [{"num": 1.0}, {"num": 0.0}, {"num": -0.0}]
    loop, batch = SGTRegressor(warm_up=5), SGTRegressor(warm_up=5)
    for x in records:
        loop.learn_one(x, 0.0)
    batch.learn_many(records, [0.0] * 3)
    assert batch.to_bytes() == loop.to_bytes()


def _outcome(call: Any) -> str:
    try:
        call()
    except ValueError:
        return "ValueError"
    return "accepted"


@pytest.mark.parametrize(
    "bad",
    [
        pytest.param([1], id="list"),
        pytest.param((2.0,), id="tuple"),
        pytest.param(np.array([3.0]), id="1-d-array"),
        pytest.param(np.array(5.0), id="0-d-array"),
        pytest.param("4", id="str"),
        pytest.param(b"5", id="bytes"),
        pytest.param({"a": 1}, id="dict"),
        pytest.param(1 + 2j, id="complex"),
    ],
)
def test_odd_values_are_refused_alike_by_every_path(bad: Any) -> None:
    def fresh() -> SGTRegressor:
        model = SGTRegressor(warm_up=2)
        model.learn_many([{"num": 1.0}, {"num": 2.0}], [1.0, 2.0])
        return model

    outcomes = {
        "learn_one": _outcome(lambda: fresh().learn_one({"num": bad}, 3.0)),
        "learn_many": _outcome(lambda: fresh().learn_many([{"num": 1.5}, {"num": bad}], [3.0, 3.0])),
        "predict_one": _outcome(lambda: fresh().predict_one({"num": bad})),
        "predict_many": _outcome(lambda: fresh().predict_many([{"num": 1.5}, {"num": bad}])),
        "predict_learn_many": _outcome(lambda: fresh().predict_learn_many([{"num": bad}], [None])),
    }
    assert set(outcomes.values()) == {"ValueError"}, outcomes


def test_ties_between_identical_features_go_to_the_earlier_feature() -> None:
    """Two copies of one column give identical candidates: the first registered feature must win."""
    X, y = threshold_stream(3000, seed=39)
    twins = np.column_stack([X[:, 1], X[:, 0], X[:, 0]])  # noise, then the signal twice
    model = SGTClassifier(grace_period=100, warm_up=100)
    model.learn_many(twins, y)
    used = {n["feature"] for n in iter_nodes(model.to_dict()["trees"][0]) if not n["leaf"]}
    assert used == {"x1"}


def test_a_range_too_wide_for_a_double_codes_alike_on_every_path() -> None:
    """hi - lo overflows to inf here, so (x - lo) / width can be inf / inf = nan for a finite x: the
    batch coding must give such a value the first bin, as the one-record coding does."""
    from sgt.features import FeatureSpace

    warm = [-1.7e308, 1.7e308]
    values = [1.7e308, -1.7e308, 0.0, 1e308, math.inf, -math.inf, math.nan, 5.0]
    one, batch = FeatureSpace(8, 2), FeatureSpace(8, 2)
    for v in warm:
        one.encode_one({"a": v}, learn=True)
    batch.encode_rows([{"a": v} for v in warm], np.ones(2, dtype=bool))
    expected = [one.encode_one({"a": v}, learn=False) for v in values]
    got = batch.encode_rows([{"a": v} for v in values], np.zeros(len(values), dtype=bool)).tolist()
    assert got == expected


_number = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True, width=64),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.booleans(),
)


@settings(max_examples=150, deadline=None)
@given(
    width=st.integers(min_value=2, max_value=4),
    data=st.data(),
    gaps=st.booleans(),
)
def test_dict_batches_with_every_feature_present_learn_as_record_by_record(
    width: int, data: st.DataObject, gaps: bool
) -> None:
    """Batches of dicts that all hold every feature as a plain number take a dense path through the
    encoder (each record read once); the model must be bit-for-bit the one that learns them one at a
    time. With ``gaps`` some records lack a feature or hold None, which takes the per-column path."""
    names = [f"f{k}" for k in range(width)]
    rows = data.draw(
        st.lists(
            st.fixed_dictionaries({name: _number for name in names}), min_size=ROW_BY_ROW_MAX + 1, max_size=60
        )
    )
    if gaps:
        for i in data.draw(st.lists(st.integers(0, len(rows) - 1), max_size=3)):
            rows[i] = (
                {**rows[i], names[0]: None} if i % 2 else {k: v for k, v in rows[i].items() if k != names[-1]}
            )
    targets = [float(i % 3) for i in range(len(rows))]
    loop, batch = SGTRegressor(warm_up=5, grace_period=10), SGTRegressor(warm_up=5, grace_period=10)
    for model in (loop, batch):  # features the encoder knows already: the batch path's precondition
        model.learn_one(dict.fromkeys(names, 0.5), 0.0)
    for x, y in zip(rows, targets, strict=True):
        loop.learn_one(x, y)
    batch.learn_many(rows, targets)
    assert batch.to_bytes() == loop.to_bytes()


def test_the_threshold_of_the_last_bin_sends_every_value_left() -> None:
    """A split threshold that a grown grid moved to the last bin: threshold_value searched for a
    finite value binned past it, which does not exist (the export of such a tree never returned)."""
    from sgt.features import FeatureSpace

    space = FeatureSpace(8, 100)
    for v in (0.0, 1.0, 5.0):
        space.encode_one({"a": v}, learn=True)
    assert space.threshold_value(0, 7) == math.inf
    assert space.threshold_value(0, 6) < math.inf


def test_a_threshold_that_rounding_moves_far_in_ulps_is_found() -> None:
    """The grid [-0.5, 1) of 3 bins has an edge at 0, but (x + 0.5) / 1.5 * 3 rounds to 1 for every x
    above -2^-54: the search stepped one ulp at a time from 0 down and never returned (an export hung)."""
    from sgt.features import FeatureSpace

    space = FeatureSpace(3, 7)
    for v in (0.0, 0.9):
        space.encode_one({"a": v}, learn=True)
    assert space.range_of(0) == (-0.5, 1.0)
    x = space.threshold_value(0, 0)
    assert space.encode_one({"a": x}, learn=False) == [1]
    assert space.encode_one({"a": math.nextafter(x, math.inf)}, learn=False) == [2]
    assert -1e-16 < x < 0.0


def test_a_grid_that_cannot_double_within_the_float_range_stays_as_it_is() -> None:
    """A grid around 0 meeting -1.4e306: doubling towards it overflows the distance between the grids'
    origins, and rounding it raised OverflowError (found by the batch-equals-loop property test above).
    The grid stays as it is and the value falls in its first bin, on both paths."""
    rows = [{"f0": 0.0, "f1": v} for v in [0.0, 0.0, 0.0, -1.4044477616111846e306, 0.0, 0.3]]
    loop, batch = SGTRegressor(warm_up=5, grace_period=10), SGTRegressor(warm_up=5, grace_period=10)
    for model in (loop, batch):
        model.learn_one({"f0": 0.5, "f1": 0.5}, 0.0)
    for x in rows:
        loop.learn_one(x, 1.0)
    batch.learn_many(rows, [1.0] * len(rows))
    assert batch.to_bytes() == loop.to_bytes()
