"""The node-by-node batch path of one-tree models (sgt.leafwise) gives the one-record loop's bits.

The streams here make a batch's passes busy: tiny blocks (grace_start 1 to 3, grace periods of a
few records) so that many leaves fill, attempt and split inside one pass, a nominal feature whose
categories keep arriving (new category children, nominal splits that leave later rows stopped), a
numeric feature whose range keeps growing (grids that grow inside a batch), missing values and
unlabelled rows. A spy on the passes checks that they did run several events per pass and deferred
events beyond a horizon, so the equalities below test that machinery, not a chunk per event.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import sgt.leafwise
from sgt import BoostedClassifier, BoostedRegressor, SGTClassifier, SGTRegressor
from tests.sgt.sgt_testkit import NO_SIDE_MODELS, NO_TREE_OR_FOREST

PROPERTY = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def stream(seed: int, n: int, regression: bool) -> tuple[list[dict[str, Any]], list[Any]]:
    """Records with a numeric feature whose range grows, a second numeric one, a nominal one whose
    categories keep arriving, missing values; labels (or targets) with some left out."""
    rng = np.random.default_rng(seed)
    records, labels = [], []
    for i in range(n):
        a = float(rng.normal()) * (1.0 + i / 40.0)
        b = float(rng.uniform(-1.0, 1.0))
        c = f"c{int(rng.integers(0, 2 + i // 25))}"
        x: dict[str, Any] = {"a": a, "b": b, "c": c}
        if rng.random() < 0.05:
            del x["a"]
        if rng.random() < 0.05:
            del x["c"]
        records.append(x)
        signal = (a > 0.3) ^ (c in ("c1", "c4", "c7")) ^ (b > 0.5)
        label: Any = 3.0 * signal + b + float(rng.normal(0.0, 0.1)) if regression else int(signal)
        labels.append(None if rng.random() < 0.1 else label)
    return records, labels


def cut(n: int, cuts: list[int]) -> Iterator[slice]:
    for lo, hi in itertools.pairwise([0, *sorted(c for c in set(cuts) if 0 < c < n), n]):
        yield slice(lo, hi)


def loop_predictions(model: Any, records: list[dict], labels: list[Any]) -> list[Any]:
    """Predict each record, then learn it (if labelled), one at a time."""
    out = []
    for x, y in zip(records, labels, strict=True):
        if isinstance(model, SGTClassifier):
            out.append(model.predict_proba_one(x))
        else:
            out.append(model.predict_one(x))
        if y is not None:
            model.learn_one(x, y)
    return out


def batch_predictions(model: Any, records: list[dict], labels: list[Any], cuts: list[int]) -> list[Any]:
    out: list[Any] = []
    for part in cut(len(records), cuts):
        P = model.predict_learn_many(records[part], labels[part])
        if isinstance(model, SGTClassifier):
            out += [{c: float(P[i, j]) for j, c in enumerate(model.classes_)} for i in range(P.shape[0])]
        else:
            out += [float(p) for p in P]
    return out


def same_predictions(batch: list[Any], loop: list[Any]) -> bool:
    """Equal bits; a class learned after a row's prediction has probability 0 in the batch's row."""
    for got, want in zip(batch, loop, strict=True):
        if isinstance(want, dict):
            if {c: p for c, p in got.items() if c in want} != want:
                return False
            if any(p != 0.0 for c, p in got.items() if c not in want):
                return False
        elif np.float64(got).tobytes() != np.float64(want).tobytes():
            return False
    return True


TINY = {"grace_period": 6, "warm_up": 10, "delta": 0.2, "nominal": ["c"]}
MODELS: dict[str, Callable[[int, int], Any]] = {
    # (without the leaves' naive Bayes, whose hooks watch the rows in order: the chunked path)
    "classifier": lambda start, _: SGTClassifier(grace_start=start, leaf_bayes=False, **TINY),
    "constant classifier": lambda start, _: SGTClassifier(
        grace_start=start, leaf_model="constant", leaf_bayes=False, **TINY
    ),
    "regressor": lambda start, _: SGTRegressor(grace_start=start, **TINY),
    # (the members alone: the single tree's and forest's leaves are the single trees' above, the
    # Mondrian forest's walk test_boosted_mondrian.py's)
    "boosted classifier": lambda start, seed: BoostedClassifier(
        n_members=3, grace_start=start, seed=seed, drift_threshold=None, **TINY, **NO_SIDE_MODELS
    ),
    "boosted regressor": lambda start, seed: BoostedRegressor(
        n_members=3, grace_start=start, poisson_rate=1.0, seed=seed, **TINY, **NO_TREE_OR_FOREST
    ),
}


@PROPERTY
@given(
    name=st.sampled_from(sorted(MODELS)),
    seed=st.integers(0, 2**16),
    start=st.integers(1, 3),
    cuts=st.lists(st.integers(1, 399), max_size=4),
)
def test_batches_equal_the_loop_where_many_leaves_fill_and_split_in_a_pass(
    name: str, seed: int, start: int, cuts: list[int]
) -> None:
    regression = "regressor" in name
    records, labels = stream(seed, 400, regression)
    loop, batch = MODELS[name](start, seed), MODELS[name](start, seed)
    expected = loop_predictions(loop, records, labels)
    got = batch_predictions(batch, records, labels, cuts)
    assert batch.to_bytes() == loop.to_bytes()
    assert same_predictions(got, expected)


@PROPERTY
@given(
    name=st.sampled_from(sorted(MODELS)),
    seed=st.integers(0, 2**16),
    at=st.integers(1, 399),
    cuts=st.lists(st.integers(1, 399), max_size=3),
)
def test_a_round_trip_inside_a_stream_continues_as_the_loop(
    name: str, seed: int, at: int, cuts: list[int]
) -> None:
    regression = "regressor" in name
    records, labels = stream(seed, 400, regression)
    loop = MODELS[name](2, seed)
    expected = loop_predictions(loop, records, labels)
    first = MODELS[name](2, seed)
    got = batch_predictions(first, records[:at], labels[:at], [c for c in cuts if c < at])
    restored = type(first).from_bytes(first.to_bytes())
    got += batch_predictions(restored, records[at:], labels[at:], [c - at for c in cuts if c > at])
    assert restored.to_bytes() == loop.to_bytes()
    assert same_predictions(got, expected)


@pytest.mark.parametrize("name", ["classifier", "boosted classifier"])
def test_a_third_class_after_splits_in_the_same_batch_continues_as_the_loop(name: str) -> None:
    """The node-by-node path stops at the new class's row, where the chunked path of several trees
    takes over: the rows after it must sit at the nodes the splits before it made."""
    records, labels = stream(8, 400, regression=False)
    labels = [2 if i >= 300 and i % 4 == 0 else y for i, y in enumerate(labels)]
    loop, batch = MODELS[name](1, 8), MODELS[name](1, 8)
    expected = loop_predictions(loop, records, labels)
    got = batch_predictions(batch, records, labels, [])
    assert batch.to_bytes() == loop.to_bytes()
    assert same_predictions(got, expected)


class PassSpy:
    """Records what each pass of sgt.leafwise took and ran (events per pass, events left waiting)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.found: list[int] = []  # events each pass found
        self.deferred = 0  # events still queued after a run of events (beyond a horizon)
        take, run_events = sgt.leafwise._take, sgt.leafwise._run_events

        def spy_take(*args: Any) -> list:
            events = take(*args)
            self.found.append(len(events))
            return events

        def spy_run_events(model: Any, queue: list, *args: Any) -> np.ndarray:
            rows = run_events(model, queue, *args)
            self.deferred += len(queue)
            return rows

        monkeypatch.setattr(sgt.leafwise, "_take", spy_take)
        monkeypatch.setattr(sgt.leafwise, "_run_events", spy_run_events)


def test_the_streams_run_many_events_per_pass_and_defer_some(monkeypatch: pytest.MonkeyPatch) -> None:
    spy = PassSpy(monkeypatch)
    records, labels = stream(5, 400, regression=False)
    model = SGTClassifier(grace_start=1, leaf_bayes=False, **TINY)
    model.predict_learn_many(records, labels)
    assert model.n_splits >= 10
    assert max(spy.found) >= 5  # several leaves filled in one pass
    assert spy.deferred >= 1  # an event beyond a horizon waited for the next pass


def test_models_whose_hooks_watch_the_rows_in_order_keep_the_chunked_path(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    spy = PassSpy(monkeypatch)
    records, labels = stream(6, 300, regression=False)
    for proba in ("mixed", "hgs", "blend"):
        SGTClassifier(grace_start=2, proba=proba, leaf_bayes=False, **TINY).predict_learn_many(
            records, labels
        )
    multiclass = [None if y is None else (y + i) % 3 for i, y in enumerate(labels)]
    SGTClassifier(grace_start=2, leaf_bayes=False, **TINY).predict_learn_many(records, multiclass)
    assert spy.found == []
    SGTClassifier(grace_start=2, leaf_bayes=False, **TINY).predict_learn_many(records, labels)
    assert spy.found


def test_the_leaves_naive_bayes_follows_a_node_by_node_run(monkeypatch: pytest.MonkeyPatch) -> None:
    """Its hooks need only each row's leaf as predicted (sgt.leafwise.Watched): the default binary
    classifier keeps the node-by-node path, with the one-record loop's bits."""
    spy = PassSpy(monkeypatch)
    records, labels = stream(6, 300, regression=False)
    batched = SGTClassifier(grace_start=2, **TINY)
    proba = batched.predict_learn_many(records, labels)
    assert max(spy.found) >= 2
    looped, classes = SGTClassifier(grace_start=2, **TINY), list(batched.classes_)
    expected = np.zeros_like(proba)
    for i, (x, y) in enumerate(zip(records, labels, strict=True)):
        for c, p in looped.predict_proba_one(x).items():
            expected[i, classes.index(c)] = p
        if y is not None:
            looped.learn_one(x, y)
    assert np.array_equal(expected, proba)
    assert looped.to_bytes() == batched.to_bytes()
