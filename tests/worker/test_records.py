"""Decoding and stateless validation: every reason in the dead-letter corpus, and the good shapes."""

from __future__ import annotations

from typing import Any

import numpy as np
import orjson
import pytest

from sgt import SGTRegressor
from worker.core.records import MAX_TARGET, decode_feature, decode_label, parse_label
from worker.core.values import Feature, Invalid, LabelRecord

BAD_FEATURES = [
    (b"\xff\xfe not json", "invalid_utf8"),
    (b'{"id": "q", "x": {"a": 1.0', "invalid_json"),
    (b"", "invalid_json"),
    (b"[1, 2, 3]", "not_object"),
    (b'"just a string"', "not_object"),
    (b'{"id": "q2", "y": 1}', "missing_x"),
    (b'{"id": "q3", "x": "abc", "y": 1}', "bad_x"),
    (b'{"id": "q3", "x": {"a": true}}', "bad_x"),
    (b'{"id": "q4", "x": {"a": {"nested": 1}}, "y": 1}', "nested_value"),
    (b'{"id": "q4", "x": [1.0, [2.0]]}', "nested_value"),
    (b'{"id": "q5", "x": {"a": 1.0}, "y": {"bad": 1}}', "bad_label_type"),
    (b'{"id": "q5", "x": {"a": 1.0}, "y": 1.5}', "bad_label_type"),
    (b'{"id": "q5", "x": {"a": 1.0}, "y": true}', "bad_label_type"),
    (b'{"id": {"a": 1}, "x": {"a": 1.0}}', "bad_id"),
    (b'{"id": "big", "x": {"a": "' + b"z" * 200 + b'"}}', "oversized"),
]


@pytest.mark.parametrize(("raw", "reason"), BAD_FEATURES)
def test_bad_feature_records_are_rejected_with_their_reason(raw: bytes, reason: str) -> None:
    assert decode_feature(raw, 7.0, "classification", 100) == Invalid(reason)


def test_a_missing_value_is_a_bad_record() -> None:
    assert decode_feature(None, 1.0, "classification", 100) == Invalid("invalid_json")


def test_good_feature_records_decode_with_numbers_as_floats_and_event_time() -> None:
    raw = b'{"id": "s-1", "x": {"age": 41, "plan": "pro", "gone": null}, "y": "yes", "ts": 12.5}'
    assert decode_feature(raw, 0.0, "classification", 1000) == Feature(
        "s-1", {"age": 41.0, "plan": "pro", "gone": None}, "yes", 12.5
    )
    assert decode_feature(b'{"x": [1, 2.5, null], "id": 3}', 9.0, "regression", 1000) == Feature(
        "3", [1.0, 2.5, None], None, 9.0
    )


def test_a_non_numeric_ts_falls_back_to_the_record_timestamp() -> None:
    assert decode_feature(b'{"x": {}, "ts": "noon"}', 4.0, "classification", 100).ts == 4.0


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        (b'{"y": 1}', "missing_id"),
        (b'{"id": "a"}', "missing_y"),
        (b'{"id": "a", "y": null}', "missing_y"),
        (b'{"id": "a", "y": [1]}', "bad_label_type"),
        (b'{"id": [1], "y": 1}', "bad_id"),
        (b"[]", "not_object"),
        (b"\xc3\x28", "invalid_utf8"),
    ],
)
def test_bad_label_records_are_rejected_with_their_reason(raw: bytes, reason: str) -> None:
    assert decode_label(raw, 2.0, "classification", 100) == Invalid(reason)


def test_label_records_decode() -> None:
    assert decode_label(b'{"id": "a", "y": 2.0}', 1.0, "classification", 100) == LabelRecord("a", 2, 1.0)
    assert decode_label(b'{"id": "a", "y": 2.5, "ts": 3}', 1.0, "regression", 100) == LabelRecord(
        "a", 2.5, 3.0
    )


@pytest.mark.parametrize(
    ("value", "task", "expected"),
    [
        ("cat", "classification", "cat"),
        (3, "classification", 3),
        (3.0, "classification", 3),
        (3.5, "classification", None),
        (2.0**53, "classification", 2**53),
        (-(2.0**53), "classification", -(2**53)),
        (2.0**53 + 2, "classification", None),
        (-1e100, "classification", None),
        (False, "classification", None),
        (3, "regression", 3.0),
        ("3", "regression", None),
        (True, "regression", None),
        (1e50, "regression", 1e50),
        (-1e51, "regression", None),
        (1e100, "regression", None),
    ],
)
def test_label_types_per_task(value: object, task: str, expected: object) -> None:
    assert parse_label(value, task) == expected


def test_the_trees_still_learn_at_the_largest_accepted_regression_target() -> None:
    """MAX_TARGET is set by the model's arithmetic: at 1e80 the split statistics overflow and the
    tree never splits; at the bound it learns the step as it does at scale 1."""
    rng = np.random.default_rng(3)
    X = rng.uniform(0.0, 1.0, (3000, 2))
    y = np.where(X[:, 0] > 0.5, MAX_TARGET, -MAX_TARGET)
    model = SGTRegressor(grace_period=50, warm_up=100)
    predictions = model.predict_learn_many([{"a": a, "b": b} for a, b in X], y.tolist())
    assert model.n_splits >= 1
    assert np.mean(np.abs(predictions[-500:] - y[-500:])) < 0.1 * MAX_TARGET


@pytest.mark.parametrize("decode", [decode_feature, decode_label])
def test_a_class_label_past_max_label_bytes_is_label_too_long(decode: Any) -> None:
    def doc(y: object) -> bytes:
        return orjson.dumps({"id": "a", "x": [1.0], "y": y})

    assert decode(doc("é" * 5), 0.0, "classification", 10_000, 10).y == "é" * 5  # 10 bytes
    assert decode(doc("é" * 5 + "a"), 0.0, "classification", 10_000, 10).reason == "label_too_long"
    assert decode(doc("a" * 900_000), 0.0, "classification", 10**7).reason == "label_too_long"  # default 256
    assert decode(doc(2**53), 0.0, "classification", 10_000, 10).y == 2**53  # integers are short
    assert decode(doc(1.5), 0.0, "regression", 10_000, 1).y == 1.5  # a regression target is no class
