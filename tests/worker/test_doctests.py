"""Runs the examples in the worker's docstrings (pytest's testpaths do not include worker/)."""

from __future__ import annotations

import doctest
import importlib

import pytest

MODULES = [
    "worker.backoff",
    "worker.checkpoint",
    "worker.checkpointing",
    "worker.clients",
    "worker.config",
    "worker.delivery",
    "worker.devtools.demo",
    "worker.join",
    "worker.logs",
    "worker.merge",
    "worker.metrics",
    "worker.outputs",
    "worker.partition",
    "worker.records",
    "worker.schema",
    "worker.state",
    "worker.state_mirror",
    "worker.transactions",
]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name: str) -> None:
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.failed == 0 and result.attempted > 0
