"""A single model learns the record it just predicted from the codes, leaves and scores the prediction
found (`sgt.base.LastRecord`): the same model as encoding and routing it again, whatever the caller does
between the two calls: a dict changed in place, another record learned or predicted in between, a
record predicted twice, names and values of every kind.

Each property runs one model on the caller's dicts, which it may recognise, and one on fresh copies
of them at every call, learning each as a batch of one row, which never takes a kept record; both
must predict alike and save the same bytes.
"""

from __future__ import annotations

import math
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sgt import SGTClassifier, SGTRegressor
from sgt.features import FeatureSpace

SMALL = {"grace_period": 10, "grace_start": 5, "warm_up": 8}
PROPERTY = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])

VALUES = st.one_of(
    st.floats(-3.0, 3.0, allow_nan=False),
    st.integers(-3, 3),
    st.sampled_from([math.nan, math.inf, True, "a", "u", "z", None]),
)
#: a record: two numeric features and a nominal one
RECORDS = st.fixed_dictionaries(
    {"a": st.floats(-3.0, 3.0), "b": st.floats(-3.0, 3.0), "c": st.sampled_from(["u", "v", "w"])}
)
#: what the caller does with a record: predict then learn it; predict it, change one of its values in
#: place, learn it; predict it, learn another, learn it; predict it twice, then learn it; predict
#: another in between
ACTIONS = st.sampled_from(["plain", "mutate-a", "mutate-c", "learn-between", "twice", "predict-between"])
STEPS = st.lists(st.tuples(RECORDS, ACTIONS, VALUES), min_size=30, max_size=90)

MODELS = {
    "classifier": lambda: SGTClassifier(**SMALL),
    "classifier-tree": lambda: SGTClassifier(proba="tree", **SMALL),
    "regressor": lambda: SGTRegressor(**SMALL),
    "regressor-linear": lambda: SGTRegressor(leaf_model="linear", **SMALL),
}


def _label(kind: str, x: dict[str, Any]) -> Any:
    a = x.get("a", 0.0)
    signal = (a if isinstance(a, float) and math.isfinite(a) else 0.0) + (1.0 if x.get("c") == "u" else -0.5)
    return int(signal > 0.0) if kind.startswith("classifier") else 2.0 * signal + 1.0


def _predict(model: Any, x: dict[str, Any]) -> Any:
    """The prediction, or the error's kind (a number where a string made a feature nominal)."""
    try:
        return model.predict_proba_one(x) if isinstance(model, SGTClassifier) else model.predict_one(x)
    except (TypeError, ValueError) as error:
        return type(error).__name__


def _learn(model: Any, x: dict[str, Any], y: Any, fresh: bool) -> bool:
    """Learn one record: by `learn_one`, or, `fresh`, as a batch of one row (which never takes a kept
    record: a regressor's `learn_one` predicts the record itself before it learns it)."""
    try:
        if fresh:
            model.learn_many([x], [y])
        else:
            model.learn_one(x, y)
    except (TypeError, ValueError):
        return False
    return True


def _run(kind: str, steps: list[tuple[dict[str, Any], str, Any]], fresh: bool) -> tuple[list[Any], bytes]:
    """The steps on a new model; `fresh`: every call gets a new copy of its dict, and learning takes
    the batch path."""
    model = MODELS[kind]()
    seen: list[Any] = []

    def give(x: dict[str, Any]) -> dict[str, Any]:
        return dict(x) if fresh else x

    other = {"a": 0.5, "b": -0.5, "c": "v"}
    for template, action, value in steps:
        x = dict(template)
        seen.append(_predict(model, give(x)))
        if action == "twice":
            seen.append(_predict(model, give(x)))
        elif action.startswith("mutate"):
            x[action[-1]] = value
        elif action == "learn-between":
            _learn(model, give(other), _label(kind, other), fresh)
        elif action == "predict-between":
            seen.append(_predict(model, give(other)))
        seen.append(_learn(model, give(x), _label(kind, x), fresh))
    return seen, model.to_bytes()


@pytest.mark.parametrize("kind", sorted(MODELS))
@PROPERTY
@given(steps=STEPS)
def test_learning_the_record_just_predicted_learns_what_encoding_it_again_would(
    kind: str, steps: list[tuple[dict[str, Any], str, Any]]
) -> None:
    kept, kept_bytes = _run(kind, steps, fresh=False)
    fresh, fresh_bytes = _run(kind, steps, fresh=True)
    assert repr(kept) == repr(fresh)  # (repr: NaN equals NaN)
    assert kept_bytes == fresh_bytes


@pytest.mark.parametrize("kind", sorted(MODELS))
def test_a_record_changed_in_place_after_its_prediction_is_learnt_as_changed(kind: str) -> None:
    records = [{"a": (i % 17) / 17.0 - 0.5, "b": (i % 5) / 5.0} for i in range(300)]
    kept, fresh = MODELS[kind](), MODELS[kind]()
    for x in records:
        _predict(kept, x)
        x["a"] = -x["a"]  # the same dict, another value: learning must not take the old codes
        kept.learn_one(x, _label(kind, x))
        fresh.learn_one(dict(x), _label(kind, x))
    assert kept.to_bytes() == fresh.to_bytes()


@pytest.mark.parametrize("kind", sorted(MODELS))
def test_a_record_predicted_then_learnt_is_encoded_once_past_the_warm_up(
    kind: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = MODELS[kind]()
    for i in range(50):
        x = {"a": (i % 7) / 7.0, "b": (i % 3) / 3.0}
        _predict(model, x)
        model.learn_one(x, _label(kind, x))
    calls: list[bool] = []
    encode = FeatureSpace.encode_one

    def counted(space: FeatureSpace, x: Any, learn: bool) -> list[int]:
        calls.append(learn)
        return encode(space, x, learn)

    monkeypatch.setattr(FeatureSpace, "encode_one", counted)
    x = {"a": 0.25, "b": 0.5}
    _predict(model, x)
    model.learn_one(x, _label(kind, x))
    assert calls == [False]
    unknown = {"a": 0.25, "b": 0.5, "c": 1.0}  # a feature not yet known: learning registers it
    _predict(model, unknown)
    model.learn_one(unknown, _label(kind, unknown))
    assert calls[1:].count(True) == 1
    assert calls[-1] is True


@pytest.mark.parametrize("name", [True, 1.0])
def test_a_name_equal_to_a_known_one_learns_as_encoding_it_again_would(name: Any) -> None:
    """A dict key equal to a known name (True or 1.0 for 1) finds that feature on every path; the
    record is learnt as a fresh copy of it would be."""
    kept, fresh = SGTClassifier(**SMALL), SGTClassifier(**SMALL)
    for i in range(40):
        for model in (kept, fresh):
            model.learn_one({1: float(i % 4), "b": float(i % 3)}, i % 2)
    for i in range(40):
        x = {name: float(i % 4), "b": float(i % 3)}
        kept.predict_proba_one(x)
        kept.learn_one(x, i % 2)
        fresh.learn_one(dict(x), i % 2)
    assert kept.to_bytes() == fresh.to_bytes()


@pytest.mark.parametrize("kind", ["regressor", "regressor-linear"])
def test_the_first_record_learnt_is_scored_again_with_the_base_score_its_target_sets(kind: str) -> None:
    """A regressor's first target sets its base score: a record without features (which learning
    encodes as predicting does) predicted before it was scored without one. Found by
    test_odd_inputs.py: learnt one at a time, {} took the prediction's scores."""
    stream = [({}, 1.0), ({"a": 0.5}, 2.0), ({}, 3.0)]
    loop, batch = MODELS[kind](), MODELS[kind]()
    for x, y in stream:
        loop.predict_one(x)
        loop.learn_one(x, y)
    batch.learn_many([x for x, _ in stream], [y for _, y in stream])
    assert loop.to_bytes() == batch.to_bytes()
