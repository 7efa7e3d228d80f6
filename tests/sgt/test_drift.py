"""The Page-Hinkley drift detector: exact values, no alarm on stationary noise, an alarm soon after a step,
and the same state whatever the split of the values into arrays."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sgt.drift import RELATIVE_CAP, PageHinkley

# what the ensembles use by default (sgt.boosted)
DEFAULT = {"delta": 0.02, "threshold": 50.0, "min_n": 250}
RELATIVE = {"delta": 0.2, "threshold": 50.0, "min_n": 250, "relative": True}


def reference(values: list[float], delta: float, threshold: float, min_n: int) -> tuple[int, list[float]]:
    """The test written out one value at a time, in plain Python floats: (alarm index, final state)."""
    n, total, cum, low = 0, 0.0, 0.0, 0.0
    for i, x in enumerate(values):
        n += 1
        total += x
        cum += x - total / n - delta
        low = min(low, cum)
        if n >= min_n and cum - low > threshold:
            return i, [n, total, cum, low]
    return -1, [n, total, cum, low]


def state(detector: PageHinkley) -> list[float]:
    s = detector.state()
    return [s["n"], s["total"], s["cum"], s["low"]]


def test_exact_values_of_a_short_sequence() -> None:
    detector = PageHinkley(delta=0.1, threshold=0.6, min_n=1)
    assert detector.update(np.array([0.0, 1.0])) == -1
    # m_1 = 0 - 0 - 0.1 = -0.1; m_2 = -0.1 + (1 - 0.5 - 0.1) = 0.3; the low is m_1
    assert state(detector) == pytest.approx([2, 1.0, 0.3, -0.1], abs=1e-15)
    # m_3 = 0.3 + (1 - 2/3 - 0.1) = 0.5333...: 0.6333... above the low, over the threshold
    assert detector.update(np.array([1.0, 1.0])) == 0
    assert detector.alarm
    assert state(detector) == pytest.approx([3, 2.0, 0.3 + (1 - 2 / 3 - 0.1), -0.1], abs=1e-15)


def test_the_excess_is_the_accumulated_sum_above_its_minimum() -> None:
    detector = PageHinkley(delta=0.1, threshold=10.0, min_n=1)
    assert detector.excess == 0.0
    detector.update(np.array([0.0, 1.0]))  # m_1 = -0.1 (the low), m_2 = 0.3 (as above)
    assert detector.excess == pytest.approx(0.4, abs=1e-15)
    detector.update(np.array([1.0]))  # m_3 = 0.3 + (1 - 2/3 - 0.1)
    assert detector.excess == pytest.approx(0.4 + 1 - 2 / 3 - 0.1, abs=1e-15)
    detector.update(np.array([0.0] * 3))  # m_6 < m_1: a new low, no excess
    assert detector.excess == 0.0
    detector.reset()
    assert detector.excess == 0.0


def test_the_vectorised_test_equals_the_one_value_loop_bit_for_bit() -> None:
    rng = np.random.default_rng(1)
    values = np.concatenate([rng.random(3000) < 0.1, rng.random(2000) < 0.5]).astype(float)
    expected_index, expected_state = reference(values.tolist(), **DEFAULT)
    detector = PageHinkley(**DEFAULT)
    assert detector.update(values) == expected_index
    assert state(detector) == expected_state  # exact equality: same additions in the same order
    assert 3000 < expected_index < 3200


@pytest.mark.parametrize("rate", [0.02, 0.1, 0.25, 0.4])
@pytest.mark.parametrize("seed", [0, 1])
def test_no_alarm_on_stationary_errors(rate: float, seed: int) -> None:
    errors = (np.random.default_rng(seed).random(200_000) < rate).astype(float)
    detector = PageHinkley(**DEFAULT)
    assert detector.update(errors) == -1
    assert detector.n == errors.size


@pytest.mark.parametrize(("before", "after", "within"), [(0.05, 0.3, 300), (0.1, 0.5, 250), (0.2, 0.5, 400)])
def test_alarm_soon_after_a_step_in_the_error_rate(before: float, after: float, within: int) -> None:
    rng = np.random.default_rng(7)
    errors = np.concatenate([rng.random(10_000) < before, rng.random(5_000) < after]).astype(float)
    index = PageHinkley(**DEFAULT).update(errors)
    assert 10_000 <= index < 10_000 + within


def test_no_alarm_before_min_n() -> None:
    detector = PageHinkley(delta=0.0, threshold=1.0, min_n=50)
    assert detector.update(np.concatenate([np.zeros(10), np.ones(39)])) == -1
    assert detector.update(np.ones(1)) == 0


def test_values_after_the_alarm_are_ignored_until_reset() -> None:
    detector = PageHinkley(delta=0.0, threshold=2.0, min_n=1)
    assert detector.update(np.array([0.0] * 5 + [1.0] * 10)) == 7
    frozen = detector.state()
    assert detector.update(np.ones(5)) == -1
    assert detector.state() == frozen
    detector.reset()
    assert not detector.alarm and detector.n == 0
    assert detector.state() == PageHinkley(delta=0.0, threshold=2.0).state()


def test_state_round_trip() -> None:
    detector = PageHinkley(**RELATIVE)
    detector.update(np.random.default_rng(3).exponential(1.0, 777))
    copy = PageHinkley(**RELATIVE)
    copy.restore(detector.state())
    more = np.random.default_rng(4).exponential(3.0, 2000)
    assert copy.update(more) == detector.update(more)
    assert copy.state() == detector.state()


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cuts=st.lists(st.integers(1, 2999), max_size=15, unique=True).map(sorted), relative=st.booleans())
def test_any_split_into_arrays_gives_the_same_state_and_alarm(cuts: list[int], relative: bool) -> None:
    rng = np.random.default_rng(5)
    if relative:
        values = np.concatenate([rng.exponential(1.0, 2000), rng.exponential(4.0, 1000)])
    else:
        values = np.concatenate([rng.random(2000) < 0.1, rng.random(1000) < 0.6]).astype(float)
    params = RELATIVE if relative else DEFAULT
    whole = PageHinkley(**params)
    alarm = whole.update(values)
    assert alarm >= 2000
    parts = PageHinkley(**params)
    found = -1
    for a, b in itertools.pairwise([0, *cuts, values.size]):
        k = parts.update(values[a:b])
        if k >= 0 and found < 0:
            found = a + k
    assert found == alarm
    assert parts.state() == whole.state()


def test_relative_errors_do_not_depend_on_the_scale() -> None:
    rng = np.random.default_rng(6)
    errors = np.concatenate([rng.exponential(1.0, 5000), rng.exponential(3.0, 2000)])
    alarms = []
    for scale in (1e-6, 1.0, 1e6):
        detector = PageHinkley(**RELATIVE)
        alarms.append(detector.update(errors * scale))
    assert alarms[0] == alarms[1] == alarms[2]
    assert 5000 <= alarms[0] < 5300


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_relative_errors_raise_no_alarm_on_stationary_noise(seed: int) -> None:
    rng = np.random.default_rng(seed)
    detector = PageHinkley(**RELATIVE)
    assert detector.update(np.abs(rng.standard_t(3, 200_000))) == -1
    detector = PageHinkley(**RELATIVE)
    assert detector.update(rng.exponential(2.0, 200_000)) == -1  # heavy tails: capped


def test_a_single_outlier_counts_for_at_most_the_cap() -> None:
    detector = PageHinkley(delta=0.0, threshold=RELATIVE_CAP, min_n=1, relative=True)
    assert detector.update(np.array([1.0] * 100 + [1e12])) == -1


def _reference_rise(values: np.ndarray, delta: float) -> int:
    """Values since the excess was last at a new minimum, one value at a time (no alarm)."""
    n, total, cum, low, low_n = 0, 0.0, 0.0, 0.0, 0
    for x in values.tolist():
        n += 1
        total += x
        cum += x - total / n - delta
        if cum < low:
            low, low_n = cum, n
    return n - low_n


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_rise_is_counted_from_the_last_minimum_in_any_split(seed: int) -> None:
    rng = np.random.default_rng(seed)
    values = np.concatenate([rng.random(1500) < 0.1, rng.random(30) < 0.7]).astype(float)
    whole = PageHinkley(delta=0.005, threshold=1e9, min_n=1)
    whole.update(values)
    assert whole.rising == _reference_rise(values, 0.005)
    parts = PageHinkley(delta=0.005, threshold=1e9, min_n=1)
    for a, b in itertools.pairwise([0, *sorted(rng.choice(1529, 9, replace=False) + 1), 1530]):
        parts.update(values[a:b])
    assert parts.rising == whole.rising and parts.state() == whole.state()


def test_an_alarm_reports_a_rise_from_about_the_step() -> None:
    rng = np.random.default_rng(7)
    values = np.concatenate([rng.random(2000) < 0.1, rng.random(1000) < 0.6]).astype(float)
    detector = PageHinkley(**DEFAULT)
    alarm = detector.update(values)
    assert detector.alarm and abs((alarm + 1 - detector.rising) - 2000) < 30


def test_a_state_saved_before_the_rise_was_kept_counts_it_from_the_restore() -> None:
    detector = PageHinkley(**DEFAULT)
    detector.update(np.zeros(300))
    saved = detector.state()
    del saved["low_n"]
    detector.restore(saved)
    assert detector.rising == 0


@pytest.mark.parametrize("relative", [False, True])
def test_one_value_at_a_time_gives_the_arrays_state_and_alarm_bit_for_bit(relative: bool) -> None:
    # a record learned alone feeds one value (PageHinkley._update_one, in Python floats): it must keep
    # the arrays' every bit, the rise's start and the alarm's index included
    rng = np.random.default_rng(6)
    if relative:
        values = np.concatenate([rng.exponential(1.0, 2000), [0.0, 0.0], rng.exponential(4.0, 1000)])
    else:
        values = np.concatenate([rng.random(2000) < 0.1, rng.random(1000) < 0.6]).astype(float)
    params = RELATIVE if relative else DEFAULT
    whole, alone = PageHinkley(**params), PageHinkley(**params)
    alarm = whole.update(values)
    found = next(i for i, v in enumerate(values) if alone.update(np.array([v])) >= 0)
    assert found == alarm >= 2000
    assert alone.state() == whole.state()
    assert alone.rising == whole.rising
