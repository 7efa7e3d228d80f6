"""Runs the examples in the worker's docstrings (pytest's testpaths do not include worker/).

The modules are found by walking the package, not listed by hand: a hand-kept list missed nine modules
whose examples then went unchecked (one of them stale).
"""

from __future__ import annotations

import doctest
import importlib
import pkgutil
from types import ModuleType

import pytest

import worker


def _modules_with_examples() -> list[str]:
    """Every worker module whose docstrings hold an example (``__main__`` runs the CLI on import)."""
    finder = doctest.DocTestFinder()
    names = []
    for info in pkgutil.walk_packages(worker.__path__, "worker."):
        if info.name.endswith("__main__"):
            continue
        module: ModuleType = importlib.import_module(info.name)
        if any(test.examples for test in finder.find(module)):
            names.append(info.name)
    return sorted(names)


MODULES = _modules_with_examples()


def test_the_walk_finds_the_worker_modules() -> None:
    assert {"worker.config", "worker.core.model_protocol", "worker.kafka.loop"} <= set(MODULES)


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name: str) -> None:
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.failed == 0
