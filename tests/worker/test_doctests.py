"""Runs the examples in the worker's docstrings (pytest's testpaths do not include worker/)."""

from __future__ import annotations

import doctest
import importlib

import pytest

MODULES = [
    "worker.checkpoints.backoff",
    "worker.checkpoints.file_store",
    "worker.checkpoints.protocol",
    "worker.kafka.clients",
    "worker.config",
    "worker.config.parsers",
    "worker.config.sources",
    "worker.config.table",
    "worker.checkpoints.ledger",
    "worker.checkpoints.schedule",
    "worker.core.recovery",
    "worker.kafka.delivery",
    "worker.kafka.positions",
    "worker.devtools.demo",
    "worker.core.join",
    "worker.logs",
    "worker.core.merge",
    "worker.metrics",
    "worker.core.outputs",
    "worker.kafka.partition_runtime",
    "worker.core.records",
    "worker.core.schema",
    "worker.core.partition_state",
    "worker.state_topic.admin",
    "worker.state_topic.mirror",
    "worker.checkpoints.transactional",
]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name: str) -> None:
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.failed == 0 and result.attempted > 0
