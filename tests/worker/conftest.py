"""Fixtures of the worker tests: worker processes that never outlive their test."""

from __future__ import annotations

import signal
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from worker_util import WorkerProcess


@pytest.fixture
def start_worker() -> Iterator[Callable[[list[str], Path], WorkerProcess]]:
    """``start_worker(args, log_path)`` runs ``python -m worker run ARGS``; leftovers die at teardown."""
    started: list[WorkerProcess] = []

    def start(args: list[str], log_path: Path) -> WorkerProcess:
        process = WorkerProcess(args, log_path)
        started.append(process)
        return process

    yield start
    for process in started:
        if process.proc.poll() is None:
            process.stop(signal.SIGKILL, timeout=10)
