"""Learning from the first records: numeric grids that grow with the data, and short first blocks.

- A numeric split is possible at the first attempt, and a young leaf's value moves after a handful
  of records (a new user sees learning at once: no 1,000-record range warm-up, no 100-record wait).
- A grid that grows carries the statistics gathered so far (every guarantee holds across it: batch
  equals loop, any batching, save/restore at any point, byte for byte).
- Checkpoints written before grids grew (format 2) still load and learn on.
"""

from __future__ import annotations

import base64
import itertools

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sgt import SGTClassifier, SGTRegressor, load
from sgt.features import FeatureSpace
from tests.sgt.sgt_testkit import threshold_stream

PROPERTY = settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def test_a_numeric_split_comes_within_the_first_200_records() -> None:
    X, y = threshold_stream(200, seed=40)
    model = SGTClassifier()
    model.learn_many(X, y)
    assert model.n_splits >= 1
    root = model.to_dict()["trees"][0]
    assert root["feature"] == "x0" and 0.4 < root["threshold"] < 0.6


def test_a_young_leaf_moves_its_value_within_its_first_records() -> None:
    model = SGTRegressor(base_score=0.0)
    before = model.predict_one({"x": 1.0})
    for _ in range(10):
        model.learn_one({"x": 1.0}, 5.0)
    assert model.predict_one({"x": 1.0}) != before
    # each of the default's trees once, but the late one, whose root waits for 50 records (AUTO_LATE_STARTS)
    assert [tree.n_updates for tree in model._trees] == [1, 1, 1, 0]


def test_a_young_classifier_beats_the_majority_class_from_record_201() -> None:
    X, y = threshold_stream(1000, seed=41)
    model = SGTClassifier()
    proba = model.predict_learn_many(X, y)
    hits = np.array(model.classes_)[proba.argmax(axis=1)] == y
    assert hits[200:].mean() > 0.95


def test_young_blocks_double_with_depth_and_with_every_attempt_up_to_the_grace_period() -> None:
    model = SGTRegressor(grace_period=100, grace_start=10, base_score=0.0, delta=1e-7)
    rng = np.random.default_rng(42)
    attempts = []
    for t in range(1, 400):
        tree = model._trees[0]
        pending = int(tree.pending_n[0])
        model.learn_one({"x": float(rng.uniform())}, float(rng.normal()))
        if pending + 1 == int(tree.block[0]) or int(model._trees[0].pending_n[0]) == 0:
            attempts.append(t)
    assert attempts[:6] == [10, 30, 70, 150, 250, 350]


def _growing_stream(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Features whose spread keeps growing (every grid grows many times) and a target on x0."""
    rng = np.random.default_rng(seed)
    scale = np.exp(np.linspace(0.0, 8.0, n))[:, None]
    X = rng.normal(size=(n, 3)) * scale + rng.choice([-1e3, 0.0, 1e3], 3)
    X[rng.uniform(size=X.shape) < 0.05] = np.nan
    y = np.where(np.nan_to_num(X[:, 0] - X[0, 0]) > 0, 1.0, -1.0) * 3.0 + rng.normal(0.0, 0.5, n)
    return X, y


_XG, _YG = _growing_stream(1500, seed=43)
SMALL = {"grace_period": 40, "warm_up": 2000}


def test_the_growing_stream_grows_grids_many_times() -> None:
    space = FeatureSpace(bins=64, warm_up=2000)
    space.encode_array(_XG, None)
    assert len(space.take_regrids()) >= 15


@PROPERTY
@given(
    cuts=st.lists(st.integers(1, 1499), max_size=12, unique=True).map(sorted),
    methods=st.lists(st.sampled_from(["learn_many", "predict_learn_many", "loop", "restore"]), min_size=13),
)
def test_growing_grids_give_the_same_bytes_however_batched_and_restored(
    cuts: list[int], methods: list[str]
) -> None:
    reference = SGTRegressor(**SMALL)
    for x, y in zip(_XG, _YG, strict=True):
        reference.predict_one(x)
        reference.learn_one(x, y)
    model = SGTRegressor(**SMALL)
    for (a, b), method in zip(itertools.pairwise([0, *cuts, 1500]), methods, strict=False):
        if method == "restore":
            model = SGTRegressor.from_bytes(model.to_bytes())
            method = "learn_many"
        if method == "loop":
            for x, y in zip(_XG[a:b], _YG[a:b], strict=True):
                model.learn_one(x, y)
        else:
            getattr(model, method)(_XG[a:b], _YG[a:b])
    assert model.n_splits >= 2
    assert model.to_bytes() == reference.to_bytes()


def test_predictions_across_grid_growth_are_those_of_the_loop() -> None:
    loop = SGTClassifier(grace_period=30)
    labels = _YG > 0
    expected = []
    for x, y in zip(_XG, labels, strict=True):
        expected.append(loop.predict_proba_one(x).get(True, 0.0))
        loop.learn_one(x, bool(y))
    batch = SGTClassifier(grace_period=30)
    proba = batch.predict_learn_many(_XG, labels)
    got = proba[:, batch.classes_.index(True)]
    assert got.tolist() == expected
    assert batch.to_bytes() == loop.to_bytes()


# SGTRegressor(grace_period=20, warm_up=40) after 60 records of x0 ~ U(0, 1) (range frozen after 40
# values) and x1 ~ U(-5, 5) missing from record 30 on (30 values: still warming up), written by the
# release before grids grew (format 2).
FORMAT_2 = base64.b64decode(
    "U0dUTU9ERUwCAJkDAAB7ImFycmF5cyI6W1sic3BhY2UucmFuZ2VzIiwiPGY4IixbMiwyXV0sWyJ0MC5mZWF0dXJlIiwiPGk0IixbM11dLFsidDAudGhyZXNob2xkIiwiPGk0IixbM11dLFsidDAubGVmdCIsIjxpNCIsWzNdXSxbInQwLnJpZ2h0IiwiPGk0IixbM11dLFsidDAudGFibGUiLCI8aTQiLFszXV0sWyJ0MC5taXNzaW5nIiwiPGk0IixbM11dLFsidDAudmFsdWUiLCI8ZjgiLFszXV0sWyJ0MC5kZXB0aCIsIjxpNCIsWzNdXSxbInQwLnBhcmVudCIsIjxpNCIsWzNdXSxbInQwLnNsb3QiLCI8aTQiLFszXV0sWyJ0MC5zbG90X25vZGUiLCI8aTQiLFsyXV0sWyJ0MC5zdGF0c19pbmRleCIsIjxpNCIsWzBdXSxbInQwLnN0YXRzX3Jvd3MiLCI8ZjgiLFswLDZdXSxbInQwLnRvdGFsIiwiPGY4IixbMiw2XV0sWyJ0MC5wZW5kaW5nX24iLCI8aTgiLFsyXV0sWyJ0MC5wZW5kaW5nX2NvZGVzIiwiPHUyIixbMCwyXV0sWyJ0MC5wZW5kaW5nX2ciLCI8ZjgiLFswXV0sWyJ0MC5wZW5kaW5nX2giLCI8ZjgiLFswXV1dLCJleHRyYSI6eyJiYXNlIjozLjE4NzU2NDYwNTM3NzUyNzd9LCJtb2RlbCI6IlNHVFJlZ3Jlc3NvciIsIm5fc2VlbiI6NjAsInBhcmFtcyI6eyJiYXNlX3Njb3JlIjpudWxsLCJiaW5zIjo2NCwiZGVsdGEiOjAuMDAxLCJmZWF0dXJlX25hbWVzIjpudWxsLCJnYW1tYSI6MC4xLCJncmFjZV9wZXJpb2QiOjIwLCJsYW1iZGFfIjowLjEsImxvc3MiOiJzcXVhcmVkX2Vycm9yIiwibWF4X2NhdGVnb3JpZXMiOm51bGwsIm1heF9kZXB0aCI6bnVsbCwibm9taW5hbCI6W10sIndhcm1fdXAiOjQwfSwic3BhY2UiOnsibmFtZXMiOlsieDAiLCJ4MSJdLCJzZWVuIjpbNDAsMzBdLCJ2b2NhYiI6W251bGwsbnVsbF19LCJ0cmVlcyI6W3sibl9ub2RlcyI6Mywibl9zbG90cyI6Miwibl9zcGxpdHMiOjEsIm5fdGFibGVzIjowLCJuX3VwZGF0ZXMiOjF9XX0AsFdx1qdTPxfDJDBA+e8/Dvz505T2E8AEGlMDxaoTQAAAAAD//////////x0AAAAAAAAAAAAAAAEAAAD//////////wIAAAD//////////////////////////wIAAAD///////////UFcf5xefm/wJaPxeWGCMBUN6DAEvvTvwAAAAABAAAAAQAAAP////8AAAAAAAAAAP////8AAAAAAQAAAAEAAAACAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAHvnWfUcD70n8SxsTZnDt+bI1odmbbQY0CX1b8J5/qfc"
)


def test_a_format_2_checkpoint_loads_and_learns_on() -> None:
    model = load(FORMAT_2)
    assert isinstance(model, SGTRegressor) and model.n_seen == 60
    ranges = {f["name"]: f["range"] for f in model.to_dict()["features"]}
    assert ranges["x0"] == [0.0011996835868286482, 0.9991761150650714]  # frozen: binned as before
    lo, hi = ranges["x1"]  # warming up: now a grid holding its values so far
    assert lo <= -4.9 and 4.9 <= hi < 20.0
    rng = np.random.default_rng(44)
    X = rng.uniform(-5.0, 5.0, (400, 2))
    model.learn_many(X, 3.0 * (X[:, 0] > 0.5) + 2.0 * (X[:, 1] > 0.0))
    again = load(FORMAT_2)
    for x, y in zip(X, 3.0 * (X[:, 0] > 0.5) + 2.0 * (X[:, 1] > 0.0), strict=True):
        again.learn_one(x, y)
    assert again.to_bytes() == model.to_bytes()
    assert model.n_splits >= 2
