"""The worker tests' own configuration: an exception escaping a thread fails the test.

Pytest only warns about an exception that ends a thread (``PytestUnhandledThreadExceptionWarning``),
so a worker thread that raised at its stop (a final checkpoint refused) let its test pass. Here
every worker test turns that warning into an error. In-process workers run as
:class:`tests.worker.worker_util.WorkerThread`, which keeps what the worker raised for the test to
assert; this catches any other thread (a proxy's, a client callback's).
"""

from __future__ import annotations

from pathlib import Path

import pytest

_HERE = Path(__file__).parent
_THREAD_EXCEPTIONS_FAIL = pytest.mark.filterwarnings("error::pytest.PytestUnhandledThreadExceptionWarning")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if _HERE in item.path.parents:
            item.add_marker(_THREAD_EXCEPTIONS_FAIL)
