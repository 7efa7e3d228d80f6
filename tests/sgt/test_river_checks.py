"""River's own estimator checks (`river.checks.yield_checks`) on every model class, one test case each.

Through the thin adapter of tests/sgt/river_adapter.py. The checks: learning, the purity of learn and
predict, emerging, disappearing and reordered features (keys shuffled in every record), predicting
before learning, no aliasing of the input, clones (same class, parameters, independence), pickling,
probabilities (a distribution over every label seen; True and False for binary models) and bounded
memory growth. They run on River's small built-in data sets (Phishing, ImageSegments, TrumpApproval;
shipped with River, nothing downloaded), with the small grace periods of `SMALL` so that the trees
grow inside them. The classifier's leaf naive Bayes (an option that changes what it predicts and
saves) runs them too.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from river import checks

from sgt import SGTClassifier
from sgt.registry import MODEL_TYPES
from tests.sgt.river_adapter import SMALL, adapter

#: every model class with its defaults, and the options that change what a model predicts and saves
CONFIGS: dict[str, tuple[type, dict[str, Any]]] = {
    **{name: (cls, {}) for name, cls in MODEL_TYPES.items()},
    "SGTClassifier-leaf_bayes": (SGTClassifier, {"leaf_bayes": True}),
}


def _estimator(name: str) -> Any:
    cls, params = CONFIGS[name]
    return adapter(cls, **SMALL, **params)


def _checks(name: str) -> Iterator[tuple[str, Callable[[Any], None]]]:
    """River's checks for a model class, each with an id: its name, and which of its data sets."""
    estimator = _estimator(name)
    seen: dict[str, int] = {}
    for check in checks.yield_checks(estimator):
        if check.__name__ in estimator._unit_test_skips():
            continue
        k = seen[check.__name__] = seen.get(check.__name__, -1) + 1
        dataset = f"-{k}" if isinstance(check, functools.partial) else ""
        yield f"{check.__name__}{dataset}", check


CASES = [(name, check_id) for name in sorted(CONFIGS) for check_id, _ in _checks(name)]


@pytest.mark.parametrize(("name", "check_id"), CASES, ids=[f"{n}-{c}" for n, c in CASES])
def test_river_check(name: str, check_id: str) -> None:
    # a fresh check (its data set is an iterator that one run consumes) on a fresh clone, as
    # `river.checks.check_estimator` runs them
    check = dict(_checks(name))[check_id]
    check(_estimator(name).clone())
