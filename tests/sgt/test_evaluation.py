"""Tests of sgt.evaluation.Prequential: exact metrics, batching invariance, window semantics, round trips."""

from __future__ import annotations

import itertools
import json
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sgt.evaluation import Prequential

labels = st.one_of(st.integers(0, 3), st.sampled_from(["a", "b", True, None]))
probs = st.one_of(st.none(), st.floats(0.0, 1.0), st.sampled_from([0.0, 1e-300, 1.0]))
reals = st.floats(-1e6, 1e6, allow_nan=False, allow_infinity=False)


@st.composite
def classification_stream(draw: st.DrawFn) -> tuple[list, list, list]:
    n = draw(st.integers(0, 60))
    ys = draw(st.lists(labels, min_size=n, max_size=n))
    preds = draw(st.lists(labels, min_size=n, max_size=n))
    ps = draw(st.lists(probs, min_size=n, max_size=n))
    return ys, preds, ps


@st.composite
def regression_stream(draw: st.DrawFn) -> tuple[list, list]:
    n = draw(st.integers(0, 60))
    return draw(st.lists(reals, min_size=n, max_size=n)), draw(st.lists(reals, min_size=n, max_size=n))


def split_points(n: int) -> st.SearchStrategy[list[int]]:
    return st.lists(st.integers(0, n), max_size=5).map(sorted)


def feed_in_batches(m: Prequential, cuts: list[int], *columns: list) -> None:
    bounds = [0, *cuts, len(columns[0])]
    for lo, hi in itertools.pairwise(bounds):
        m.update_many(*(c[lo:hi] for c in columns))


def same_state(a: Prequential, b: Prequential) -> bool:
    """Bit-for-bit equality of two states (floats compared by their exact hex form)."""

    def exact(v: object) -> object:
        if isinstance(v, float):
            return v.hex()
        if isinstance(v, list):
            return [exact(e) for e in v]
        return v

    da, db = a.to_dict(), b.to_dict()
    return {k: exact(v) for k, v in da.items()} == {k: exact(v) for k, v in db.items()}


@settings(max_examples=200, deadline=None)
@given(classification_stream(), st.integers(1, 8), st.data())
def test_classification_update_many_is_bit_for_bit_a_loop(stream, window, data) -> None:
    ys, preds, ps = stream
    looped, batched = Prequential("classification", window), Prequential("classification", window)
    for y, yp, p in zip(ys, preds, ps, strict=True):
        looped.update(y, yp, p)
    feed_in_batches(batched, data.draw(split_points(len(ys))), ys, preds, ps)
    assert same_state(looped, batched)
    assert looped.n == len(ys)


@settings(max_examples=200, deadline=None)
@given(regression_stream(), st.integers(1, 8), st.data())
def test_regression_update_many_is_bit_for_bit_a_loop(stream, window, data) -> None:
    ys, preds = stream
    looped, batched = Prequential("regression", window), Prequential("regression", window)
    for y, yp in zip(ys, preds, strict=True):
        looped.update(y, yp)
    feed_in_batches(batched, data.draw(split_points(len(ys))), ys, preds)
    assert same_state(looped, batched)
    if ys:
        assert looped.mae.hex() == batched.mae.hex()
        assert looped.rmse.hex() == batched.rmse.hex()


def test_update_many_accepts_numpy_arrays() -> None:
    ys, preds = np.array([1.0, 2.5, -3.0]), np.array([1.0, 2.0, 0.0])
    a, b = Prequential("regression"), Prequential("regression")
    a.update_many(ys, preds)
    for y, yp in zip(ys.tolist(), preds.tolist(), strict=True):
        b.update(y, yp)
    assert same_state(a, b)
    assert a.mae == 3.5 / 3


@settings(max_examples=200, deadline=None)
@given(classification_stream(), st.integers(1, 8))
def test_classification_metrics_equal_direct_computation(stream, window) -> None:
    ys, preds, ps = stream
    m = Prequential("classification", window)
    m.update_many(ys, preds, ps)
    wrong = [int(y != yp) for y, yp in zip(ys, preds, strict=True)]
    losses = [-math.log(min(max(p, 1e-15), 1.0)) for p in ps if p is not None]
    if ys:
        assert m.error_rate == sum(wrong) / len(ys)
        assert m.accuracy == (len(ys) - sum(wrong)) / len(ys)
        assert m.recent_error == sum(wrong[-window:]) / len(wrong[-window:])
        assert m.error == m.error_rate
    else:
        assert math.isnan(m.error) and math.isnan(m.recent_error) and math.isnan(m.accuracy)
    if losses:
        assert math.isclose(m.log_loss, sum(losses) / len(losses), rel_tol=1e-12)
    else:
        assert math.isnan(m.log_loss)
    assert math.isnan(m.mae) and math.isnan(m.rmse)


@settings(max_examples=200, deadline=None)
@given(regression_stream(), st.integers(1, 8))
def test_regression_window_is_the_last_records(stream, window) -> None:
    ys, preds = stream
    m = Prequential("regression", window)
    m.update_many(ys, preds)
    errs = [abs(y - yp) for y, yp in zip(ys, preds, strict=True)]
    if ys:
        assert m.recent_error == math.fsum(errs[-window:]) / len(errs[-window:])
        assert m.error == m.mae
    assert m.to_dict()["recent"] == errs[-window:]
    assert math.isnan(m.error_rate) and math.isnan(m.accuracy) and math.isnan(m.log_loss)


def test_window_slides_exactly() -> None:
    m = Prequential("classification", window=3)
    outcomes = []
    for y, yp in [(1, 1), (1, 0), (0, 0), (0, 0), (1, 0), (1, 1), (0, 0)]:
        m.update(y, yp)
        outcomes.append(m.recent_error)
    assert outcomes == [0.0, 0.5, 1 / 3, 1 / 3, 1 / 3, 1 / 3, 1 / 3]
    assert m.to_dict()["recent"] == [1, 0, 0]
    m.update(1, 0)
    assert m.recent_error == 1 / 3 and m.to_dict()["recent"] == [0, 0, 1]
    assert m.error_rate == 3 / 8


def test_known_values() -> None:
    r = Prequential("regression")
    r.update_many([3.0, -1.0, 2.0, 7.0], [2.5, 0.0, 2.0, 8.0])
    assert r.mae == 0.625
    assert r.rmse == math.sqrt(2.25 / 4)
    c = Prequential("classification")
    c.update("x", "y", p_true=0.0)  # clipped to 1e-15
    c.update("y", "y", p_true=2.0)  # clipped to 1
    assert c.log_loss == -math.log(1e-15) / 2
    assert c.error_rate == 0.5 and c.accuracy == 0.5
    c.update("z", None)  # no probability: counts for the error, not for the log loss
    assert c.n == 3 and c.error_rate == 2 / 3 and c.log_loss == -math.log(1e-15) / 2


def test_large_targets_keep_small_errors_exact() -> None:
    r = Prequential("regression", window=4)
    r.update_many([1e6 + 1, 1e6 - 1, 1e6 + 0.5], [1e6, 1e6, 1e6])
    assert r.mae == 2.5 / 3 and r.recent_error == 2.5 / 3


@settings(max_examples=150, deadline=None)
@given(st.sampled_from(["classification", "regression"]), st.integers(1, 6), st.data())
def test_round_trip_through_json_is_exact_and_continues_identically(task, window, data) -> None:
    if task == "classification":
        ys, preds, ps = data.draw(classification_stream())
        cols: tuple[list, ...] = (ys, preds, ps)
    else:
        cols = data.draw(regression_stream())
    cut = data.draw(st.integers(0, len(cols[0])))
    original = Prequential(task, window)
    original.update_many(*(c[:cut] for c in cols))
    restored = Prequential.from_dict(json.loads(json.dumps(original.to_dict())))
    assert same_state(original, restored)
    original.update_many(*(c[cut:] for c in cols))
    restored.update_many(*(c[cut:] for c in cols))
    assert same_state(original, restored)
    assert repr(original) == repr(restored)


def test_to_dict_is_plain_json_types() -> None:
    m = Prequential("regression", window=2)
    m.update_many(np.array([1.0, 2.0, 3.0]), np.array([0.0, 0.0, 0.0]))
    d = m.to_dict()
    assert d == {
        "format": 2,
        "task": "regression",
        "window": 2,
        "n": 3,
        "n_wrong": 0,
        "sum_abs": 6.0,
        "sum_sq": 14.0,
        "n_log": 0,
        "sum_log": 0.0,
        "n_brier": 0,
        "sum_brier": 0.0,
        "recent": [2.0, 3.0],
        "recent_log": [],
        "recent_brier": [],
    }
    assert all(type(e) is float for e in d["recent"])


def test_bad_batch_leaves_state_untouched() -> None:
    m = Prequential("regression")
    m.update(1.0, 0.0)
    before = m.to_dict()
    with pytest.raises(ValueError, match="y_pred must be finite"):
        m.update_many([1.0, 2.0], [0.0, math.nan])
    with pytest.raises(ValueError, match="same length"):
        m.update_many([1.0, 2.0], [0.0])
    assert m.to_dict() == before


@pytest.mark.parametrize(
    ("task", "args", "message"),
    [
        ("regression", ("a", 1.0, None), "y_true must be a number"),
        ("regression", (math.inf, 1.0, None), "y_true must be finite"),
        ("regression", (1.0, 2.0, 0.5), "p_true and p_sq apply to classification only"),
        ("regression", (1.7e308, -1.7e308, None), "overflows"),
        ("classification", (1, 1, math.nan), "p_true must be a probability"),
        ("regression", (1.0, 2.0, None, 0.5), "p_true and p_sq apply to classification only"),
        ("classification", (1, 1, 0.5, math.inf), "must be finite"),
    ],
)
def test_bad_records_raise(task, args, message) -> None:
    with pytest.raises(ValueError, match=message):
        Prequential(task).update(*args)


@pytest.mark.parametrize(
    ("task", "window", "message"),
    [
        ("ranking", 10, "task must be"),
        ("regression", 0, "window must be"),
        ("regression", True, "window must be"),
    ],
)
def test_bad_constructor_arguments(task, window, message) -> None:
    with pytest.raises(ValueError, match=message):
        Prequential(task, window)


def _valid_state() -> dict:
    m = Prequential("classification", window=2)
    m.update_many([1, 0, 1], [1, 1, 1], [0.9, 0.2, None])
    return m.to_dict()


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda d: d.pop("n"), "exactly the keys"),
        (lambda d: d.update(extra=1), "exactly the keys"),
        (lambda d: d.update(format=3), "unsupported"),
        (lambda d: d.update(n_brier=3, sum_brier=0.5), "inconsistent"),
        (lambda d: d.update(recent_log=[0.1, 0.2, 0.3]), "at most 2 scores"),
        (lambda d: d.update(n_brier=1, sum_brier=0.5, recent_brier=[-0.5]), "finite scores >= 0"),
        (lambda d: d.update(task="ranking"), "task must be"),
        (lambda d: d.update(window=-1), "window must be"),
        (lambda d: d.update(n=-1), "'n' must be an integer"),
        (lambda d: d.update(n=2.0), "'n' must be an integer"),
        (lambda d: d.update(n_wrong=7), "inconsistent"),
        (lambda d: d.update(sum_log=math.nan), "'sum_log' must be a number"),
        (lambda d: d.update(sum_abs=1.0), "regression sums"),
        (lambda d: d.update(recent=[1]), "list of 2 errors"),
        (lambda d: d.update(recent=[1, 2]), "0 or 1"),
        (lambda d: d.update(recent="01"), "list of 2 errors"),
        (lambda d: d.update(task="regression"), "fit the task"),
    ],
)
def test_from_dict_rejects_malformed_state(change, message) -> None:
    d = _valid_state()
    change(d)
    with pytest.raises(ValueError, match=message):
        Prequential.from_dict(d)


def test_from_dict_rejects_non_dicts_and_bad_regression_windows() -> None:
    with pytest.raises(ValueError, match="must be a dict"):
        Prequential.from_dict([1, 2])
    m = Prequential("regression", window=2)
    m.update_many([1.0, 2.0], [0.0, 0.0])
    d = m.to_dict()
    d["recent"] = [1.0, -2.0]
    with pytest.raises(ValueError, match="finite errors >= 0"):
        Prequential.from_dict(d)


def test_update_many_is_fast_enough() -> None:
    n = 100_000
    rng = np.random.default_rng(0)
    ys, preds = rng.integers(0, 3, n), rng.integers(0, 3, n)
    ps = rng.random(n)
    m = Prequential("classification")
    m.update_many(ys, preds, ps)
    assert m.n == n
    assert m.error_rate == float(np.mean(ys != preds))


@settings(max_examples=150, deadline=None)
@given(st.data())
def test_update_proba_many_scores_argmax_and_true_class_probability(data) -> None:
    classes = data.draw(st.lists(st.sampled_from(["a", "b", "c", 7]), unique=True, max_size=4))
    n = data.draw(st.integers(0, 30))
    rows = data.draw(
        st.lists(
            st.lists(st.sampled_from([0.0, 0.25, 0.5, 1.0]), min_size=len(classes), max_size=len(classes)),
            min_size=n,
            max_size=n,
        )
    )
    ys = data.draw(st.lists(st.sampled_from(["a", "b", "c", 7, "new", None]), min_size=n, max_size=n))
    batched, looped = Prequential("classification", 5), Prequential("classification", 5)
    batched.update_proba_many(ys, np.array(rows).reshape(n, len(classes)), classes)
    for y, row in zip(ys, rows, strict=True):
        if y is None:
            continue
        top = max(row, default=0.0)
        pred = classes[row.index(top)] if top > 0 else None  # first maximum wins ties
        p_true = row[classes.index(y)] if y in classes else 0.0
        looped.update(y, pred, p_true, math.fsum(v * v for v in row))
    assert same_state(batched, looped)
    assert batched.n == sum(y is not None for y in ys)


def test_update_proba_many_rejects_bad_input() -> None:
    with pytest.raises(ValueError, match="classification only"):
        Prequential("regression").update_proba_many([1.0], [[1.0]], [1.0])
    with pytest.raises(ValueError, match="2 columns for 3 classes"):
        Prequential("classification").update_proba_many(["a"], [[0.5, 0.5]], ["a", "b", "c"])
    with pytest.raises(ValueError, match="same length"):
        Prequential("classification").update_proba_many(["a", "b"], [[1.0]], ["a"])


@settings(max_examples=200, deadline=None)
@given(st.data(), st.integers(1, 8))
def test_brier_and_recent_log_loss_equal_direct_computation(data, window) -> None:
    n = data.draw(st.integers(0, 40))
    rows = data.draw(st.lists(st.lists(st.floats(0.0, 1.0), min_size=3, max_size=3), min_size=n, max_size=n))
    ys = data.draw(st.lists(st.sampled_from(["a", "b", "c", "unseen"]), min_size=n, max_size=n))
    m = Prequential("classification", window)
    for cut in [*data.draw(split_points(n)), n]:  # any batching: the state is the same bit for bit
        done = m.n
        m.update_proba_many(ys[done:cut], np.array(rows[done:cut]).reshape(-1, 3), ["a", "b", "c"])
    briers = [
        sum((p - (c == y)) ** 2 for p, c in zip(row, "abc", strict=True)) + (y == "unseen")
        for y, row in zip(ys, rows, strict=True)
    ]
    losses = [
        -math.log(min(max(row["abc".find(y)] if y != "unseen" else 0.0, 1e-15), 1.0))
        for y, row in zip(ys, rows, strict=True)
    ]
    if n:
        assert math.isclose(m.brier, sum(briers) / n, rel_tol=1e-9, abs_tol=1e-12)
        recent = briers[-window:]
        assert math.isclose(m.recent_brier, sum(recent) / len(recent), rel_tol=1e-9, abs_tol=1e-12)
        assert math.isclose(
            m.recent_log_loss, math.fsum(losses[-window:]) / len(losses[-window:]), rel_tol=1e-12
        )
    else:
        assert math.isnan(m.brier) and math.isnan(m.recent_brier) and math.isnan(m.recent_log_loss)


def test_brier_known_values() -> None:
    m = Prequential("classification", window=2)
    m.update("a", "a", p_true=1.0, p_sq=1.0)  # certain and right: 0
    m.update("a", "b", p_true=0.0, p_sq=1.0)  # certain and wrong: 2
    m.update("a", "a", p_true=0.5, p_sq=0.5)  # (0.5 - 1)^2 + 0.5^2 = 0.5
    assert m.brier == 2.5 / 3
    assert m.recent_brier == 1.25
    m.update("a", "a", p_true=0.5)  # without p_sq: log loss only
    assert m.brier == 2.5 / 3 and m.recent_brier == 1.25


def test_a_format_1_state_restores_and_its_windows_fill_again() -> None:
    """A worker checkpoint of the release before the Brier score holds a format-1 state."""
    old = {
        "format": 1,
        "task": "classification",
        "window": 2,
        "n": 3,
        "n_wrong": 1,
        "sum_abs": 0.0,
        "sum_sq": 0.0,
        "n_log": 3,
        "sum_log": 1.5,
        "recent": [0, 1],
    }
    m = Prequential.from_dict(old)
    assert (m.n, m.log_loss, m.error_rate) == (3, 0.5, 1 / 3)
    assert math.isnan(m.brier) and math.isnan(m.recent_log_loss)
    m.update("a", "a", p_true=0.5, p_sq=0.5)
    assert m.recent_log_loss == -math.log(0.5) and m.brier == 0.5
    again = Prequential.from_dict(json.loads(json.dumps(m.to_dict())))
    assert same_state(m, again)
