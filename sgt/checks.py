"""Checks of the estimators' settings: a bad value raises ValueError naming the setting and what it allows.

>>> check_int("bins", 1, low=2, allowed="an integer in [2, 4096]")
Traceback (most recent call last):
...
ValueError: bins must be an integer in [2, 4096], got 1
>>> check_real("delta", float("nan"), low=0.0, allowed="in (0, 1)", low_open=True)
Traceback (most recent call last):
...
ValueError: delta must be in (0, 1), got nan
"""

from __future__ import annotations

import math
import numbers
from typing import Any

__all__ = ["check_int", "check_real"]


def check_real(
    name: str,
    value: Any,
    low: float,
    allowed: str,
    high: float = math.inf,
    low_open: bool = False,
    high_open: bool = False,
) -> None:
    """Raise ValueError unless `value` is a finite real number (not a bool) within [low, high] (a bound
    open if said so); `allowed` says in words what is, for the message."""
    ok = isinstance(value, numbers.Real) and not isinstance(value, bool) and _finite(value)
    if ok:
        ok = (value > low if low_open else value >= low) and (value < high if high_open else value <= high)
    if not ok:
        raise ValueError(f"{name} must be {allowed}, got {value!r}")


def check_int(name: str, value: Any, low: int, allowed: str, high: int | None = None) -> None:
    """Raise ValueError unless `value` is an integer (not a bool) >= low and, if given, <= high;
    `allowed` says in words what is, for the message."""
    ok = isinstance(value, numbers.Integral) and not isinstance(value, bool)
    if ok:
        ok = value >= low and (high is None or value <= high)
    if not ok:
        raise ValueError(f"{name} must be {allowed}, got {value!r}")


def _finite(value: numbers.Real) -> bool:
    """Whether a real number is finite; an integer beyond the float range is not."""
    try:
        return math.isfinite(value)
    except OverflowError:
        return False
