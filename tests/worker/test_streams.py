"""Synthetic streams: determinism, random access, both views agree, the drift is where it is said to be."""

from __future__ import annotations

import doctest
import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import worker.devtools.streams as streams_module
from worker.devtools.streams import (
    DEMO_STREAM,
    SEA,
    STREAMS,
    Friedman,
    RotatingHyperplane,
    Subscriptions,
    make_stream,
    uniforms,
)

ALL = sorted(STREAMS)


def test_docstring_examples_pass() -> None:
    result = doctest.testmod(streams_module, optionflags=doctest.ELLIPSIS)
    assert result.attempted >= 8
    assert result.failed == 0


@pytest.mark.parametrize("name", ALL)
def test_same_seed_same_rows_other_seed_other_rows(name: str) -> None:
    X1, y1 = make_stream(name, seed=5).batch(300)
    X2, y2 = make_stream(name, seed=5).batch(300)
    X3, _ = make_stream(name, seed=6).batch(300)
    assert np.array_equal(X1, X2) and np.array_equal(y1, y2)
    assert not np.array_equal(X1, X3)


@settings(max_examples=30, deadline=None)
@given(
    name=st.sampled_from(ALL),
    start=st.integers(0, 50_000),
    cuts=st.lists(st.integers(1, 97), min_size=1, max_size=6),
)
def test_any_split_into_batches_gives_the_same_rows(name: str, start: int, cuts: list[int]) -> None:
    stream = make_stream(name, seed=11, period=700) if name != "hyperplane" else make_stream(name, seed=11)
    total = sum(cuts)
    X, y = stream.batch(total, start)
    parts = []
    position = start
    for n in cuts:
        parts.append(stream.batch(n, position))
        position += n
    assert np.array_equal(np.concatenate([p[0] for p in parts]), X)
    assert np.array_equal(np.concatenate([p[1] for p in parts]), y)


@pytest.mark.parametrize("name", ALL)
def test_dict_view_equals_array_view(name: str) -> None:
    stream = make_stream(name, seed=3)
    X, y = stream.batch(1100, start=40)
    rows = list(itertools.islice(stream.iterate(start=40, chunk=256), 1100))
    assert rows == stream.take(1100, start=40)
    for i in (0, 255, 256, 1099):
        x, label = rows[i]
        assert list(x) == list(stream.feature_names)
        assert list(x.values()) == X[i].tolist()
        assert label == y[i].item()
        assert type(label) is (int if stream.task == "classification" else float)
        assert all(isinstance(v, float | str) for v in x.values())


def test_uniforms_are_random_access_and_in_range() -> None:
    table = uniforms(1, 2, 0, 1000, 3)
    assert table.shape == (1000, 3)
    assert table.min() >= 0.0 and table.max() < 1.0
    assert np.array_equal(uniforms(1, 2, 999, 1, 3)[0], table[999])
    assert not np.array_equal(uniforms(1, 3, 0, 1000, 3), table)


def error_rate_of_fixed_concept(X: np.ndarray, y: np.ndarray, threshold: float) -> float:
    return float(np.mean(y != (X[:, 0] + X[:, 1] <= threshold)))


def test_sea_changes_concept_abruptly_at_each_period() -> None:
    stream = SEA(seed=2, period=2000, noise=0.1)
    X, y = stream.batch(8000)
    for block, threshold in enumerate((8.0, 9.0, 7.0, 9.5)):
        rows = slice(block * 2000, (block + 1) * 2000)
        # the concept in force explains the labels up to the 10 % noise ...
        assert abs(error_rate_of_fixed_concept(X[rows], y[rows], threshold) - 0.1) < 0.025
    # ... while the first concept is visibly wrong after the first drift
    assert error_rate_of_fixed_concept(X[2000:4000], y[2000:4000], 8.0) > 0.15
    assert stream.threshold_at(8000) == 8.0  # cyclic


def test_hyperplane_rotates_half_a_turn_and_stays_balanced() -> None:
    stream = RotatingHyperplane(seed=4, n_features=5, speed=np.pi / 10_000, noise=0.0)
    X0, y0 = stream.batch(2000)
    X1, y1 = stream.batch(2000, start=10_000)
    w0 = stream.normal_at(np.array([0]))[0]
    assert np.isclose(np.linalg.norm(w0), 1.0)
    assert np.allclose(stream.normal_at(np.array([10_000]))[0], -w0)
    for start, X, y in ((0, X0, y0), (10_000, X1, y1)):
        normals = stream.normal_at(np.arange(start, start + 2000))
        assert np.array_equal(y, (np.sum((X - 0.5) * normals, axis=1) >= 0).astype(int))
    assert 0.45 < y0.mean() < 0.55 and 0.45 < y1.mean() < 0.55


def test_hyperplane_noise_flips_the_stated_fraction() -> None:
    clean = RotatingHyperplane(seed=8, noise=0.0).batch(20_000)[1]
    noisy = RotatingHyperplane(seed=8, noise=0.2).batch(20_000)[1]
    assert abs(float(np.mean(clean != noisy)) - 0.2) < 0.015


def test_friedman_relevant_features_change_between_blocks() -> None:
    stream = Friedman(seed=9, period=5000, noise=0.0)
    X, y = stream.batch(10_000)
    second = stream.relevant_at(5000)
    assert stream.relevant_at(4999) == (0, 1, 2, 3, 4)
    assert second != (0, 1, 2, 3, 4) and len(set(second)) == 5
    a, b, c, d, e = X[5000:, list(second)].T
    assert np.allclose(y[5000:], 10 * np.sin(np.pi * a * b) + 20 * (c - 0.5) ** 2 + 10 * d + 5 * e)
    assert Friedman.task == "regression"


def test_friedman_noise_is_standard_normal() -> None:
    clean = Friedman(seed=1, noise=0.0).batch(40_000)[1]
    noisy = Friedman(seed=1, noise=1.0).batch(40_000)[1]
    residual = noisy - clean
    assert abs(residual.mean()) < 0.03 and abs(residual.std() - 1.0) < 0.03


def test_subscriptions_nominal_values_and_reversed_cutoffs() -> None:
    stream = Subscriptions(seed=6, period=3000, noise=0.0)
    X, y = stream.batch(6000)
    assert set(X[:, 0]) == set(Subscriptions.plans)
    assert set(X[:, 1]) == set(Subscriptions.regions)
    not_apac_young = ~((X[:, 1] == "apac") & (X[:, 3].astype(float) < 12))
    free = (X[:, 0] == "free") & not_apac_young
    usage = X[:, 2].astype(float)
    assert np.array_equal(y[:3000][free[:3000]], (usage[:3000][free[:3000]] < 6.0).astype(int))
    assert np.array_equal(y[3000:][free[3000:]], (usage[3000:][free[3000:]] < 1.0).astype(int))


def test_unknown_stream_name_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="unknown stream 'nope'"):
        make_stream("nope")


def test_the_demo_streams_drift_is_visible_to_an_sgt() -> None:
    from sgt import SGTClassifier

    stream = make_stream(DEMO_STREAM, seed=1, period=10_000)
    X, y = stream.batch(14_000)
    model = SGTClassifier()
    proba = model.predict_learn_many(X, y)
    wrong = np.asarray(model.classes_)[proba.argmax(axis=1)] != y
    settled, after_drift = wrong[8_000:10_000].mean(), wrong[10_000:12_000].mean()
    assert settled < 0.15  # 10 % label noise plus a little
    assert after_drift > settled + 0.04
