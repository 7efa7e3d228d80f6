"""Property tests (hypothesis): invariances the library promises for every input, not just chosen ones.

- How a stream is cut into batches, and which batch method learns it, never changes the model's bytes.
- ``predict_learn_many`` is strictly prequential: equal to a predict-then-learn loop, however chunked.
- Regression: shifting every target by a constant shifts every prediction and leaves the tree.
- Classification: renaming the labels (same order of first appearance) leaves the trees.
- Probabilities are probabilities, and ``predict_one`` is their arg-max.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import math

import numpy as np
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from sgt import SGTClassifier, SGTRegressor
from tests.sgt.sgt_testkit import mixed_records, step_regression_stream, structure, threshold_stream

SMALL = {"grace_period": 40, "warm_up": 80}
N = 1200
PROPERTY = settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])

_RECORDS, _LABELS = mixed_records(N, seed=80)
_XR, _YR = step_regression_stream(N, seed=81)


def cut_points(n: int) -> st.SearchStrategy[list[int]]:
    """Sorted, distinct cut positions strictly inside [0, n], including runs of tiny batches."""
    return st.lists(st.integers(1, n - 1), max_size=12, unique=True).map(sorted)


def batches(n: int, cuts: list[int]) -> list[slice]:
    edges = [0, *cuts, n]
    return [slice(a, b) for a, b in itertools.pairwise(edges)]


@functools.cache
def _reference_classifier() -> bytes:
    model = SGTClassifier(**SMALL)
    for x, y in zip(_RECORDS, _LABELS, strict=True):
        model.learn_one(x, y)
    return model.to_bytes()


@PROPERTY
@given(
    cuts=cut_points(N),
    methods=st.lists(st.sampled_from(["learn_many", "predict_learn_many", "loop"]), min_size=13),
)
def test_any_batching_gives_a_byte_identical_classifier(cuts: list[int], methods: list[str]) -> None:
    model = SGTClassifier(**SMALL)
    for part, method in zip(batches(N, cuts), methods, strict=False):
        records, labels = _RECORDS[part], _LABELS[part]
        if method == "loop":
            for x, y in zip(records, labels, strict=True):
                model.learn_one(x, y)
        else:
            getattr(model, method)(records, labels)
    assert model.to_bytes() == _reference_classifier()


@PROPERTY
@given(cuts=cut_points(N))
def test_any_batching_gives_a_byte_identical_regressor(cuts: list[int]) -> None:
    whole, parts = SGTRegressor(**SMALL), SGTRegressor(**SMALL)
    whole.learn_many(_XR, _YR)
    for part in batches(N, cuts):
        parts.learn_many(_XR[part], _YR[part])
    assert whole.n_splits >= 2
    assert parts.to_bytes() == whole.to_bytes()


@functools.cache
def _prequential_loop() -> tuple[list[dict], list]:
    model = SGTClassifier(**SMALL)
    out = []
    for x, y in zip(_RECORDS, _LABELS, strict=True):
        out.append(model.predict_proba_one(x))
        model.learn_one(x, y)
    return out, model.classes_


@PROPERTY
@given(cuts=cut_points(N))
def test_predict_learn_many_is_strictly_prequential_whatever_the_chunks(cuts: list[int]) -> None:
    model = SGTClassifier(**SMALL)
    rows = []
    for part in batches(N, cuts):
        P = model.predict_learn_many(_RECORDS[part], _LABELS[part])
        rows.extend((P[i], list(model.classes_)) for i in range(P.shape[0]))
    loop_proba, loop_classes = _prequential_loop()
    assert model.classes_ == loop_classes
    for (row, classes), expected in zip(rows, loop_proba, strict=True):
        got = {c: row[j] for j, c in enumerate(classes) if c in expected or row[j] != 0.0}
        assert got == expected


@PROPERTY
@given(
    offset=st.one_of(st.sampled_from([1e6, -1e6, 123.456]), st.floats(-1e5, 1e5, allow_nan=False)),
    seed=st.integers(0, 3),
)
def test_shifting_regression_targets_shifts_predictions_and_keeps_the_tree(offset: float, seed: int) -> None:
    X, y = step_regression_stream(N, seed=seed)
    base, shifted = SGTRegressor(**SMALL), SGTRegressor(**SMALL)
    # (the residual levels choose among near-equal decayed errors, which a shift rounds differently:
    # shift-equivariant up to such ties only, so the trees alone are compared)
    base._levels = shifted._levels = None
    p_base = base.predict_learn_many(X, y)
    p_shifted = shifted.predict_learn_many(X, y + offset)
    assert [structure(t) for t in shifted.to_dict()["trees"]] == [
        structure(t) for t in base.to_dict()["trees"]
    ]
    assert shifted.n_updates == base.n_updates
    tolerance = 1e-9 * max(1.0, abs(offset))
    assert p_base[0] == p_shifted[0] == 0.0  # no target yet, so no base score
    np.testing.assert_allclose(p_shifted[1:] - offset, p_base[1:], rtol=0, atol=tolerance * 10)
    np.testing.assert_allclose(
        shifted.predict_many(X[:100]) - offset, base.predict_many(X[:100]), atol=tolerance * 10
    )


LABEL_SETS = st.sampled_from([(0, 1), ("a", "b"), (True, False), (2.5, -1.0), ("x", 3), (False, "no")])


@PROPERTY
@given(labels=LABEL_SETS, seed=st.integers(0, 3))
def test_renaming_labels_keeps_the_trees(labels: tuple, seed: int) -> None:
    X, y = threshold_stream(N, seed=seed)
    reference, renamed = SGTClassifier(**SMALL), SGTClassifier(**SMALL)
    reference.learn_many(X, y)
    renamed.learn_many(X, [labels[int(v)] for v in y])
    assert renamed.to_dict()["trees"] == reference.to_dict()["trees"]
    assert renamed.classes_ == [labels[int(v)] for v in reference.classes_]


@PROPERTY
@given(
    rows=st.lists(
        st.tuples(st.floats(-10, 10), st.floats(-1e6, 1e6), st.sampled_from(["u", "v", None])), max_size=30
    )
)
def test_probabilities_are_probabilities_and_predict_is_their_argmax(rows: list) -> None:
    model = _trained()
    records = [{"a": a, "b": b, "colour": c} for a, b, c in rows]
    for x in records:
        proba = model.predict_proba_one(x)
        assert list(proba) == model.classes_
        assert all(0.0 <= p <= 1.0 for p in proba.values())
        assert abs(sum(proba.values()) - 1.0) < 1e-12
        assert model.predict_one(x) == max(model.classes_, key=lambda c: proba[c])
    if records:
        np.testing.assert_array_equal(
            model.predict_proba_many(records),
            [[model.predict_proba_one(x)[c] for c in model.classes_] for x in records],
        )


@functools.cache
def _trained() -> SGTClassifier:
    records, labels = mixed_records(3000, seed=82)
    model = SGTClassifier(**SMALL)
    model.learn_many(records, [f"label-{v}" for v in labels])
    model.learn_many(records[:300], ["third"] * 300)
    return model


@settings(max_examples=30, deadline=None)
@given(
    stream=st.lists(
        st.tuples(
            st.one_of(st.none(), st.floats(allow_nan=True, allow_infinity=True)),
            st.one_of(st.none(), st.sampled_from(["p", "q", "r"])),
            st.floats(-5, 5),
        ),
        min_size=1,
        max_size=300,
    )
)
# 4 / 2.2e-308 overflows: re-expressed on the grown grid, every linear weight (zero ones too) became NaN
@example(stream=[(0.0, None, 0.0), (2.2250738585072014e-308, None, 1.0), (4.0, None, 2.0), (1.0, None, 3.0)])
def test_arbitrary_values_never_crash_and_stay_deterministic(stream: list) -> None:
    records = [{"num": a, "cat": c} for a, c, _ in stream]
    targets = [t for _, _, t in stream]
    a, b = SGTRegressor(grace_period=10, warm_up=5), SGTRegressor(grace_period=10, warm_up=5)
    a.learn_many(records, targets)
    for x, t in zip(records, targets, strict=True):
        b.learn_one(x, t)
    assert a.to_bytes() == b.to_bytes()
    assert np.all(np.isfinite(a.predict_many(records)))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    stream=st.lists(
        st.tuples(
            st.one_of(st.none(), st.floats(-1e3, 1e3), st.sampled_from([math.nan, math.inf, -math.inf])),
            st.one_of(st.none(), st.sampled_from(["p", "q", "r", "s"])),
            st.sampled_from([0, 0, 1, 1, "two", None]),
        ),
        min_size=1,
        max_size=250,
    ),
    cuts=st.lists(st.integers(1, 249), max_size=8, unique=True).map(sorted),
    max_categories=st.sampled_from([None, 1, 2]),
)
def test_classifier_batches_equal_the_loop_on_arbitrary_streams(
    stream: list, cuts: list[int], max_categories: int | None
) -> None:
    """New classes, new categories at branches (or the shared "other" code beyond max_categories),
    missing values and unlabelled rows inside batches."""
    records = [{"num": a} if i % 3 else {"cat": c, "num": a} for i, (a, c, _) in enumerate(stream)]
    labels = [label for _, _, label in stream]
    loop = SGTClassifier(grace_period=10, warm_up=5, delta=0.05, max_categories=max_categories)
    expected = []
    for x, label in zip(records, labels, strict=True):
        expected.append(loop.predict_proba_one(x))
        if label is not None:
            loop.learn_one(x, label)
    batch = SGTClassifier(grace_period=10, warm_up=5, delta=0.05, max_categories=max_categories)
    rows = []
    for part in batches(len(stream), [c for c in cuts if c < len(stream)]):
        P = batch.predict_learn_many(records[part], labels[part])
        rows.extend({c: P[i, j] for j, c in enumerate(batch.classes_)} for i in range(P.shape[0]))
    assert batch.to_bytes() == loop.to_bytes()
    for got, want in zip(rows, expected, strict=True):
        assert {c: p for c, p in got.items() if c in want} == want
        assert all(p == 0.0 for c, p in got.items() if c not in want)


NUMBERS = st.one_of(
    st.none(),
    st.just(math.nan),
    st.floats(-1e6, 1e6),
    st.integers(-1000, 1000),
    st.booleans(),
    st.floats(-1e3, 1e3).map(np.float32),
    st.integers(-1000, 1000).map(np.int64),
    st.sampled_from([math.inf, -math.inf]),
)
CATEGORIES = st.one_of(
    st.none(), st.just(math.nan), st.sampled_from(["p", "q", "r"]), st.sampled_from(["p", "q"]).map(np.str_)
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    rows=st.lists(st.tuples(NUMBERS, CATEGORIES, st.floats(-3, 3)), min_size=2, max_size=200),
    cut=st.integers(1, 199),
    bad=st.one_of(
        st.none(),
        st.tuples(st.integers(0, 199), st.just("num"), st.sampled_from(["text", np.str_("x"), "1.5"])),
        st.tuples(
            st.integers(0, 199), st.just("cat"), st.sampled_from([2.5, 3, True, np.float64(1.0), np.int64(2)])
        ),
    ),
)
def test_dict_batches_with_mixed_value_types_equal_the_loop(rows: list, cut: int, bad: tuple | None) -> None:
    """Python and numpy scalars, bools, None, NaN and infinities in known columns; a wrong-kind value
    anywhere in a batch rejects the whole batch (and the same record one by one), changing nothing."""
    records = [{"num": 1.0, "cat": "p"}, *({"num": a, "cat": c} for a, c, _ in rows)]
    targets = [0.0, *(t for _, _, t in rows)]
    if bad is not None and bad[0] < len(rows):
        records[bad[0] + 1][bad[1]] = bad[2]
    loop, batch = SGTRegressor(grace_period=10, warm_up=5), SGTRegressor(grace_period=10, warm_up=5)
    rejected_loop = rejected_batch = False
    for x, t in zip(records, targets, strict=True):
        try:
            loop.learn_one(x, t)
        except ValueError:
            rejected_loop = True
    cut = min(cut, len(records) - 1)
    for part in (slice(0, cut), slice(cut, None)):
        before = batch.to_bytes()
        try:
            batch.learn_many(records[part], targets[part])
        except ValueError:
            rejected_batch = True
            assert batch.to_bytes() == before
            for x, t in zip(records[part], targets[part], strict=True):
                with contextlib.suppress(ValueError):
                    batch.learn_one(x, t)
    assert rejected_loop == rejected_batch == (bad is not None and bad[0] < len(rows))
    assert batch.to_bytes() == loop.to_bytes()
