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
import sys
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
