"""The checkpoint retry schedule on its own (no Kafka, no clock: times are passed in)."""

from __future__ import annotations

import itertools

from hypothesis import given
from hypothesis import strategies as st

from worker.checkpoints.backoff import FIRST_RETRY_S, LOG_EVERY_S, MAX_RETRY_S, Backoff


def test_the_pause_starts_soon_doubles_and_is_capped() -> None:
    backoff = Backoff()
    delays = [backoff.failed(now=0.0).delay for _ in range(8)]
    assert delays == [0.5, 1.0, 2.0, 4.0, 5.0, 5.0, 5.0, 5.0]
    assert (FIRST_RETRY_S, MAX_RETRY_S) == (0.5, 5.0)


def test_a_new_attempt_waits_for_the_pause_after_the_failure() -> None:
    backoff = Backoff()
    assert backoff.ready(0.0)  # never failed: no pause
    backoff.failed(now=100.0)
    assert not backoff.ready(100.0) and not backoff.ready(100.49) and backoff.ready(100.5)
    backoff.failed(now=100.5)
    assert not backoff.ready(101.49) and backoff.ready(101.5)


def test_a_success_ends_the_streak() -> None:
    backoff = Backoff()
    for t in range(5):
        backoff.failed(now=float(t))
    assert backoff.succeeded() == 5
    assert backoff.ready(0.0) and backoff.failures == 0
    failure = backoff.failed(now=10.0)
    assert (failure.failures, failure.delay, failure.log) == (1, FIRST_RETRY_S, True)
    assert backoff.succeeded() == 1 and backoff.succeeded() == 0


def test_a_streak_is_logged_at_its_start_then_once_a_minute() -> None:
    backoff = Backoff()
    now, logged = 0.0, []
    for _ in range(100):  # 100 failures, each retried as soon as its pause is over
        failure = backoff.failed(now)
        if failure.log:
            logged.append((now, failure.failures))
        now = backoff.retry_at
    assert [n for _, n in logged] == [1, 16, 28, 40, 52, 64, 76, 88, 100]  # 0 s, 62.5 s, 122.5 s, ...
    assert all(b - a >= LOG_EVERY_S for (a, _), (b, _) in itertools.pairwise(logged))
    backoff.succeeded()
    assert backoff.failed(now).log  # a new streak is logged at once


@given(st.lists(st.floats(min_value=0.0, max_value=1000.0), min_size=1, max_size=60))
def test_every_pause_is_within_the_bounds_and_never_shrinks_in_a_streak(gaps: list[float]) -> None:
    backoff, now, previous = Backoff(), 0.0, 0.0
    for i, gap in enumerate(gaps, start=1):
        now += gap
        failure = backoff.failed(now)
        assert failure.failures == i
        assert FIRST_RETRY_S <= failure.delay <= MAX_RETRY_S and failure.delay >= previous
        assert backoff.retry_at == now + failure.delay
        assert not backoff.ready(now) and backoff.ready(now + failure.delay)
        previous = failure.delay
