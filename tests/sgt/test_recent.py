"""The recent learned records a new boosted ensemble learns first: what is kept, in any split of the
records into calls, and its saved form."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sgt.features import CODE_DTYPE
from sgt.recent import RecentRecords
from sgt.serialization import SerializationError

ROWS = 40


def _records() -> tuple[list[np.ndarray], np.ndarray, set[int]]:
    """Each row's codes as wide as the features known at it (a feature joins at rows 10 and 25), the
    targets, and the rows where a grid grew."""
    rng = np.random.default_rng(3)
    widths = [2 if i < 10 else 3 if i < 25 else 4 for i in range(ROWS)]
    codes = [rng.integers(1, 60, size=w).astype(CODE_DTYPE) for w in widths]
    return codes, rng.random(ROWS), {5, 30}


def _remember(recent: RecentRecords, lo: int, hi: int) -> None:
    """Rows [lo, hi) in one call, coded as wide as the widest of them (a batch codes later features of
    earlier rows as missing)."""
    codes, targets, regrids = _records()
    width = max(c.size for c in codes[lo:hi])
    block = np.zeros((hi - lo, width), dtype=CODE_DTYPE)
    for i in range(lo, hi):
        block[i - lo, : codes[i].size] = codes[i]
    grown = [r - lo for r in sorted(regrids) if lo <= r < hi]
    recent.remember(block, targets[lo:hi], grown[-1] if grown else None)


@settings(max_examples=40, deadline=None)
@given(
    cuts=st.lists(st.integers(1, ROWS - 1), max_size=8, unique=True).map(sorted),
    capacity=st.sampled_from([0, 1, 7, 20, 100]),
)
def test_any_split_into_calls_keeps_the_same_records(cuts: list[int], capacity: int) -> None:
    one_by_one, split = RecentRecords(capacity), RecentRecords(capacity)
    for i in range(ROWS):
        _remember(one_by_one, i, i + 1)
    for lo, hi in itertools.pairwise([0, *cuts, ROWS]):
        _remember(split, lo, hi)
    for recent in (one_by_one, split):
        assert len(recent) == min(capacity, ROWS - 30)  # the grid grew at row 30: older rows dropped
    assert [a.tolist() for _, a in one_by_one.arrays("r", 4)] == [a.tolist() for _, a in split.arrays("r", 4)]
    codes, targets, _ = _records()
    kept, kept_targets = split.last(ROWS, 5)
    start = ROWS - len(split)
    assert kept_targets.tolist() == targets[start:].tolist()
    for row, i in zip(kept, range(start, ROWS), strict=True):
        assert row.tolist() == [*codes[i].tolist(), *[0] * (5 - codes[i].size)]


def test_the_saved_records_restore_and_a_bad_shape_is_refused() -> None:
    recent = RecentRecords(10)
    _remember(recent, 30, 40)
    arrays = dict(recent.arrays("r", 4))
    copy = RecentRecords(10)
    copy.restore("r", arrays, 4)
    assert [a.tolist() for _, a in copy.arrays("r", 4)] == [a.tolist() for _, a in recent.arrays("r", 4)]
    for bad in (
        {**arrays, "r.targets": arrays["r.targets"][:-1]},
        {**arrays, "r.codes": arrays["r.codes"][:, :3]},
    ):
        with pytest.raises(SerializationError, match="recent records"):
            RecentRecords(10).restore("r", bad, 4)
    with pytest.raises(SerializationError, match="recent records"):
        RecentRecords(5).restore("r", arrays, 4)  # more than the capacity
