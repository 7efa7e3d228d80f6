"""Fixtures of the deployment tests: the worker's settings and metrics, and the Prometheus binaries.

``promtool`` and ``prometheus`` come from Debian's ``prometheus`` package. Tests that need them skip
when they are missing, unless ``SGT_REQUIRE_PROMETHEUS`` is set (CI sets it): then they fail, so that a
CI machine without them cannot pass silently.
"""

from __future__ import annotations

import os
import shutil
from typing import Any

import pytest


def _binary(name: str) -> str:
    path = shutil.which(name)
    if path:
        return path
    message = f"{name} not found on PATH (Debian: apt-get install prometheus)"
    if os.environ.get("SGT_REQUIRE_PROMETHEUS", "") not in ("", "0"):
        pytest.fail(message + "; SGT_REQUIRE_PROMETHEUS is set", pytrace=False)
    pytest.skip(message)


@pytest.fixture(scope="session")
def promtool() -> str:
    return _binary("promtool")


@pytest.fixture(scope="session")
def prometheus_binary() -> str:
    return _binary("prometheus")


@pytest.fixture(scope="session")
def settings_by_env() -> dict[str, Any]:
    """The worker's settings registry keyed by environment variable name."""
    from worker.config import SETTINGS

    return {setting.env: setting for setting in SETTINGS}


@pytest.fixture(scope="session")
def worker_metric_names() -> set[str]:
    """Names of the series the worker exports (counters with ``_total``, histograms by base name)."""
    from worker.metrics import WorkerMetrics

    names = set()
    for family in WorkerMetrics().registry.collect():
        names.add(family.name + "_total" if family.type == "counter" else family.name)
    return names
