"""The sgt-stream Kafka worker: partition-aware test-then-train with exact checkpoints."""

from __future__ import annotations

from typing import Any


def __getattr__(name: str) -> Any:
    """``__version__``, read from the installed package's metadata when first asked for: importing
    ``importlib.metadata`` takes 0.1 to 0.3 s, and ``sgt-worker`` installs its signal handlers before
    anything slow is imported (see :mod:`worker.cli`)."""
    if name != "__version__":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from importlib import metadata

    try:
        version = metadata.version("sgt-stream")
    except metadata.PackageNotFoundError:  # running from a source tree that was never installed
        version = "0+unknown"
    globals()["__version__"] = version
    return version
