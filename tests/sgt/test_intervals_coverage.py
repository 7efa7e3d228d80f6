"""The interval layer's coverage (sgt.intervals) where the previous rule missed its target: short streams,
residual scales that jump or grow, a wild first residual; its bound over any stretch of records; and the
restore of the layer's state as the previous format wrote it (tests/sgt/data/*-intervals-v1.sgt)."""

from __future__ import annotations

import math
from itertools import pairwise
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import sgt
from sgt import BoostedRegressor, SGTRegressor
from sgt.intervals import (
    SCALE_RATE,
    STEP,
    YOUNG_STEP_CAP,
    IntervalLayer,
    level_step,
    scale_rate,
)
from sgt.serialization import decode
from tests.sgt.sgt_testkit import as_dicts

COVERAGES = (0.9, 0.95)
DATA = Path(__file__).parent / "data"
WINDOW, SKIP = 1000, 2000


def _hits(residuals: np.ndarray, coverages: tuple[float, ...] = COVERAGES) -> dict[float, np.ndarray]:
    """Whether each residual fell inside the interval the layer published before learning it (the
    predictions are 0, the targets the residuals)."""
    layer = IntervalLayer(coverages)
    hits: dict[float, list[bool]] = {c: [] for c in coverages}
    for r in residuals.tolist():
        for c in coverages:
            hits[c].append(abs(r) <= layer.half_width(c))
        layer.learn_one(0.0, r)
    return {c: np.array(h) for c, h in hits.items()}


def _points_off(hit: np.ndarray, c: float) -> float:
    return abs(float(hit.mean()) - c) * 100


def test_every_window_holds_when_the_residual_scale_jumps() -> None:
    """The residuals' scale jumps fivefold, then falls tenfold, each at the start of a window: every
    window of 1,000 records after the first 2,000 stays within a point of the target."""
    rng = np.random.default_rng(7)
    scale = np.concatenate([np.full(4000, 1.0), np.full(4000, 5.0), np.full(4000, 0.5)])
    for c, hit in _hits(rng.normal(0, 1, scale.size) * scale).items():
        off = [_points_off(hit[i : i + WINDOW], c) for i in range(SKIP, hit.size - WINDOW + 1, WINDOW)]
        assert max(off) <= 1.0, (c, off)


def test_a_short_stream_whose_residuals_grow_thirtyfold_is_covered() -> None:
    """600 records whose residual scale grows steadily (as ChickWeights' does): within a point."""
    rng = np.random.default_rng(7)
    residuals = rng.normal(0, 1, 600) * (1 + np.arange(600) / 20)
    for c, hit in _hits(residuals).items():
        assert _points_off(hit, c) <= 1.0, (c, hit.mean())


def test_a_wild_first_residual_does_not_widen_the_intervals_that_follow() -> None:
    """The untrained model's first residual is far larger than the rest (TrumpApproval's): within a
    point over 1,000 records, not over-covered."""
    rng = np.random.default_rng(7)
    residuals = rng.normal(0, 1, 1000)
    residuals[0] = 40.0
    for c, hit in _hits(residuals).items():
        assert _points_off(hit, c) <= 1.0, (c, hit.mean())


def test_a_short_growing_seasonal_series_is_covered() -> None:
    """144 monthly records as AirlinePassengers' (River's): a model that follows the trend but not the
    season, the level growing 1% a month, so the residuals peak each summer and the peaks grow. Within
    a point; the layer without its young step and scale rate covered 85.4% / 91.0% (its level had to
    climb from the Gaussian 2.1 to 4 at STEP while a running-mean scale lagged the peaks)."""
    rng = np.random.default_rng(31)
    months = np.arange(144)
    season = np.sin(2 * np.pi * months / 12)
    residuals = 112 * 1.01**months * 0.25 * np.sign(season) * np.abs(season) ** 3
    residuals += rng.normal(0, 5, months.size)
    for c, hit in _hits(residuals).items():
        assert _points_off(hit, c) <= 1.0, (c, hit.mean())


def test_the_young_step_and_scale_rate_fall_to_the_constants_and_never_rise() -> None:
    """The bound over a stretch needs a step that never grows with n; the long streams' figures need
    the layer to be the constant-step, constant-rate one once it is no longer young."""
    steps = [level_step(n) for n in range(1, 6000)]
    rates = [scale_rate(n) for n in range(1, 6000)]
    assert all(a >= b for a, b in pairwise(steps)) and all(a >= b for a, b in pairwise(rates))
    assert steps[0] == YOUNG_STEP_CAP and level_step(1111) > STEP and level_step(1112) == STEP
    assert scale_rate(4899) > SCALE_RATE and scale_rate(4900) == SCALE_RATE == rates[-1]


@settings(max_examples=60)
@given(
    residuals=st.lists(
        st.one_of(st.floats(0, 1e3), st.floats(1e-6, 1e-3), st.just(0.0)), min_size=2, max_size=300
    ),
    start=st.integers(0, 299),
)
def test_over_any_stretch_the_misses_exceed_the_target_by_at_most_the_levels_rise(
    residuals: list[float], start: int
) -> None:
    """Over records start..T of any residual sequence, misses - (1 - c) * records <= level at T / STEP -
    level at start / (the step at start): the layer's finite-sample bound (sgt.intervals), whatever the
    residuals' scale; (level at T - level at start) / STEP once the layer is no longer young."""
    layer = IntervalLayer(COVERAGES)
    layer.learn_one(0.0, residuals[0])  # the first residual sets the scale; no interval was published
    start = min(start, len(residuals) - 1)
    for r in residuals[1:start]:
        layer.learn_one(0.0, r)
    before, step = list(layer.levels), level_step(layer.n)
    misses = [0, 0]
    for r in residuals[max(1, start) :]:
        for k, c in enumerate(COVERAGES):
            misses[k] += abs(r) > layer.half_width(c)
        layer.learn_one(0.0, r)
    stretch = len(residuals) - max(1, start)
    for k, c in enumerate(COVERAGES):
        bound = layer.levels[k] / STEP - before[k] / step
        assert misses[k] - (1 - c) * stretch <= bound + 1e-9


# -- the state written before the layer's levels (format 1: absolute half-widths) -----------------
# The two files were saved by the format-1 layer (the code of main before format 2, which cannot write
# them again): SGTRegressor and BoostedRegressor(n_members=3), both with interval_coverages=(0.9, 0.95),
# warm_up=100, grace_period=50, learning 400 records of 3 * x0 - 2 * x1 + N(0, 0.3) (x uniform in
# [-1, 1]^3, numpy default_rng(31)) with one learn_many.


@pytest.mark.parametrize("name", ["regressor", "boosted"])
def test_a_model_saved_with_half_widths_restores_with_the_same_intervals_and_goes_on(name: str) -> None:
    """Bytes written by the previous interval layer ({"half_widths", "scale", "n"}): the restored model
    publishes the intervals it saved (within rounding), saves the current format, and learns on the
    same under any batching and restore."""
    blob = (DATA / f"{name}-intervals-v1.sgt").read_bytes()
    saved = decode(blob).header["extra"]["intervals"]
    assert "version" not in saved and "half_widths" in saved
    model = sgt.load(blob)
    assert isinstance(model, (SGTRegressor, BoostedRegressor))
    for c, q in zip(COVERAGES, saved["half_widths"]):
        assert model._layer().half_width(c) == pytest.approx(q, rel=1e-12, abs=1e-300)
    assert decode(model.to_bytes()).header["extra"]["intervals"]["version"] == 2
    rng = np.random.default_rng(5)
    X = rng.uniform(-1, 1, size=(500, 3))
    y = (3.0 * X[:, 0] - 2.0 * X[:, 1] + rng.normal(0, 0.3, 500)).tolist()
    loop = type(model).from_bytes(blob)
    for i, x in enumerate(as_dicts(X)):
        if i == 250:
            loop = type(model).from_bytes(loop.to_bytes())
        loop.learn_one(x, y[i])
    model.learn_many(X[:123], y[:123])
    model.predict_learn_many(X[123:], y[123:])
    assert model.to_bytes() == loop.to_bytes()


def test_a_state_of_an_unknown_version_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match="interval layer state version 3"):
        IntervalLayer.restore(COVERAGES, {"version": 3, "levels": [1.0, 1.0], "scale": 1.0, "n": 2})


def test_a_restored_format_1_state_without_scale_keeps_its_zero_intervals() -> None:
    """A format-1 layer that only saw zero residuals (scale 0, half-widths 0) publishes zero widths."""
    layer = IntervalLayer.restore(COVERAGES, {"half_widths": [0.0, 0.0], "scale": 0.0, "n": 5})
    assert [layer.half_width(c) for c in COVERAGES] == [0.0, 0.0]
    assert math.isinf(IntervalLayer.restore(COVERAGES, None).half_width(0.9))
