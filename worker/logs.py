"""Structured logs: one JSON object per line on stderr, with the fields a log pipeline can index.

>>> import io, logging
>>> stream = io.StringIO()
>>> log = configure_logging("info", stream=stream, name="doc")
>>> log.info("checkpoint written", extra={"fields": {"partition": 3}})
>>> sorted(orjson.loads(stream.getvalue()))
['level', 'logger', 'msg', 'partition', 'ts']
"""

from __future__ import annotations

import logging
import re
import sys
import time
from collections.abc import Callable
from typing import Any, TextIO

import orjson


class JsonFormatter(logging.Formatter):
    """Formats a record as ``{"ts", "level", "logger", "msg", ...fields}``; fields come from ``extra``."""

    def format(self, record: logging.LogRecord) -> str:
        doc: dict[str, Any] = {
            "ts": round(record.created, 6),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        doc.update(getattr(record, "fields", {}))
        if record.exc_info:
            doc["exc"] = self.formatException(record.exc_info)
        return orjson.dumps(doc, default=str).decode()


def configure_logging(level: str, stream: TextIO | None = None, name: str = "worker") -> logging.Logger:
    """Send the ``name`` logger's records, as JSON lines, to ``stream`` (stderr by default)."""
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(JsonFormatter())
    logger = logging.getLogger(name)
    logger.handlers[:] = [handler]
    logger.setLevel(level.upper())
    logger.propagate = False
    return logger


def fields(**values: Any) -> dict[str, dict[str, Any]]:
    """``extra=`` for a log call: ``log.info("msg", extra=fields(partition=3))``."""
    return {"fields": values}


_NUMBERS = re.compile(r"\d+")


class RepeatFilter(logging.Filter):
    """Lets a message through at most once per ``interval`` seconds, and counts what it held back.

    For the Kafka client: while a broker is unreachable, librdkafka reports every reconnect attempt
    (about 20 lines a second from one worker, measured). Messages that differ only in their numbers
    (milliseconds, ports, counters) count as the same message; the ``error`` field is part of it.
    The next one let through after a pause carries ``suppressed``, the number held back meanwhile.

    >>> now = [0.0]
    >>> repeats = RepeatFilter(30.0, clock=lambda: now[0])
    >>> def record(msg):
    ...     return logging.LogRecord("kafka", logging.ERROR, "", 0, msg, None, None)
    >>> [repeats.filter(record(f"connect failed after {ms}ms")) for ms in (0, 1, 2)]
    [True, False, False]
    >>> now[0] = 31.0
    >>> later = record("connect failed after 5ms")
    >>> repeats.filter(later), later.fields
    (True, {'suppressed': 2})
    """

    def __init__(
        self, interval: float, clock: Callable[[], float] = time.monotonic, capacity: int = 1000
    ) -> None:
        super().__init__()
        self.interval = interval
        self.clock = clock
        self.capacity = capacity
        self._last: dict[str, tuple[float, int]] = {}  # message shape -> (last let through, held back since)

    def filter(self, record: logging.LogRecord) -> bool:
        fields = getattr(record, "fields", {})
        key = _NUMBERS.sub("#", f"{record.getMessage()} {fields.get('error', '')}")
        now = self.clock()
        last = self._last.get(key)
        if last is not None and now - last[0] < self.interval:
            self._last[key] = (last[0], last[1] + 1)
            return False
        if last is not None and last[1]:
            record.fields = {**fields, "suppressed": last[1]}
        if len(self._last) >= self.capacity:  # shapes are few; this only bounds a pathological stream
            self._last.clear()
        self._last[key] = (now, 0)
        return True
