"""The checks of single setting values: each parser returns the value or raises ValueError saying
what the setting accepts (:func:`worker.config.table.check` names the setting in the error).

>>> parse_feature_spec("amount:numeric,plan:nominal")
(('amount', 'numeric'), ('plan', 'nominal'))
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from typing import Any


class ConfigError(ValueError):
    """A setting has a value it does not accept; the message names the setting and what is allowed."""


def text_value(value: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ValueError("a non-empty string")
    return value.strip()


def optional_text_value(value: Any) -> str | None:
    if value is None or (isinstance(value, str) and value.strip().lower() in ("", "none")):
        return None
    return text_value(value)


def optional_one_of(*allowed: str) -> Callable[[Any], str | None]:
    choice = one_of(*allowed)

    def parse(value: Any) -> str | None:
        if value is None or (isinstance(value, str) and value.strip().lower() in ("", "none")):
            return None
        try:
            return choice(value)
        except ValueError:
            raise ValueError("none or one of " + ", ".join(allowed)) from None

    return parse


def one_of(*allowed: str) -> Callable[[Any], str]:
    def parse(value: Any) -> str:
        text = str(value).strip().lower()
        if text not in allowed:
            raise ValueError("one of " + ", ".join(allowed))
        return text

    return parse


def _integer_range(low: int, high: int | None) -> str:
    """How an integer setting's allowed values are named in error messages."""
    return f"an integer >= {low}" + (f" and <= {high}" if high is not None else "")


def int_in(low: int, high: int | None = None) -> Callable[[Any], int]:
    what = _integer_range(low, high)

    def parse(value: Any) -> int:
        if isinstance(value, bool):
            raise ValueError(what)
        try:
            number = int(str(value).strip()) if not isinstance(value, int) else value
        except ValueError:
            raise ValueError(what) from None
        if number < low or (high is not None and number > high):
            raise ValueError(what)
        return number

    return parse


def float_in(
    low: float, high: float | None = None, open_low: bool = False, open_high: bool = False
) -> Callable[[Any], float]:
    what = f"a number {'>' if open_low else '>='} {low:g}"
    if high is not None:
        what += f" and {'<' if open_high else '<='} {high:g}"

    def parse(value: Any) -> float:
        if isinstance(value, bool):
            raise ValueError(what)
        try:
            number = float(value)
        except (TypeError, ValueError):
            raise ValueError(what) from None
        too_low = number <= low if open_low else number < low
        too_high = high is not None and (number >= high if open_high else number > high)
        if not math.isfinite(number) or too_low or too_high:
            raise ValueError(what)
        return number

    return parse


def optional_float_in(
    low: float, high: float | None = None, open_low: bool = False, open_high: bool = False
) -> Callable[[Any], float | None]:
    number = float_in(low, high, open_low=open_low, open_high=open_high)

    def parse(value: Any) -> float | None:
        if value is None or (isinstance(value, str) and value.strip().lower() in ("", "none")):
            return None
        try:
            return number(value)
        except ValueError as e:
            raise ValueError(f"none or {e}") from None

    return parse


def optional_int_in(low: int, high: int | None = None) -> Callable[[Any], int | None]:
    whole = int_in(low, high)

    def parse(value: Any) -> int | None:
        if value is None or (isinstance(value, str) and value.strip().lower() in ("", "none")):
            return None
        try:
            return whole(value)
        except ValueError:
            raise ValueError(f"none or {_integer_range(low, high)}") from None

    return parse


TOPIC_NAME = re.compile(r"^[A-Za-z0-9._-]{1,249}$")  # Kafka's rule for topic names
STATE_TOPIC_AUTO = "auto"


def parse_state_topic(value: Any) -> str | None:
    """``auto`` (the group's own ``<group_id>-state``), ``none`` (off) or a topic name."""
    if value is None or (isinstance(value, str) and value.strip().lower() in ("", "none")):
        return None
    text = text_value(value)
    if text.lower() == STATE_TOPIC_AUTO:
        return STATE_TOPIC_AUTO
    if not TOPIC_NAME.match(text) or text in (".", ".."):
        raise ValueError(
            "auto, none, or a Kafka topic name (1 to 249 characters among letters, digits, '.', '_', '-')"
        )
    return text


def replication_factor(value: Any) -> int:
    whole = int_in(-1)
    try:
        number = whole(value)
    except ValueError:
        number = 0
    if number == 0:
        raise ValueError("-1 (the broker's default.replication.factor) or an integer >= 1")
    return number


FEATURE_TYPES = ("numeric", "nominal")


def parse_feature_spec(value: Any) -> tuple[tuple[str, str], ...]:
    """Parse ``"age:numeric,plan:nominal,usage"`` (type defaults to numeric) or a TOML list of such items."""
    what = "a comma-separated list of NAME or NAME:numeric|nominal, each name once"
    if value is None or value == "" or value == ():
        return ()
    if isinstance(value, tuple):
        return value
    items = value if isinstance(value, list) else str(value).split(",")
    spec: list[tuple[str, str]] = []
    for item in items:
        if not isinstance(item, str):
            raise ValueError(what)
        name, _, kind = item.strip().partition(":")
        kind = kind.strip().lower() or "numeric"
        if not name.strip() or kind not in FEATURE_TYPES:
            raise ValueError(what)
        spec.append((name.strip(), kind))
    if len({name for name, _ in spec}) != len(spec):
        raise ValueError(what)
    return tuple(spec)


# Client properties that the worker's guarantees depend on: not overridable through kafka_options.
PROTECTED_CLIENT_KEYS = frozenset(
    {
        "bootstrap.servers",
        "group.id",
        "enable.auto.commit",
        "enable.auto.offset.store",
        "partition.assignment.strategy",
        "group.protocol",
        "isolation.level",
        "enable.idempotence",
        "acks",
        "transactional.id",  # the transactional_id setting (exactly_once)
        "transaction.timeout.ms",  # three times checkpoint_seconds (exactly_once)
        "message.max.bytes",  # the max_message_bytes setting, which every output is built to fit
    }
)


def parse_client_options(value: Any) -> tuple[tuple[str, str], ...]:
    """Parse ``"security.protocol=SASL_SSL,sasl.mechanism=PLAIN"`` or a TOML table into (key, value) pairs."""
    what = (
        "comma-separated librdkafka properties KEY=VALUE (not "
        + ", ".join(sorted(PROTECTED_CLIENT_KEYS))
        + ")"
    )
    if value is None or value == "" or value == ():
        return ()
    if isinstance(value, tuple):
        return value
    if isinstance(value, dict):
        items = [(str(k), str(v)) for k, v in value.items()]
    else:
        items = []
        for item in str(value).split(","):
            key, sep, val = item.partition("=")
            if not sep or not key.strip():
                raise ValueError(what)
            items.append((key.strip(), val.strip()))
    if any(key in PROTECTED_CLIENT_KEYS for key, _ in items):
        raise ValueError(what)
    return tuple(items)


def redacted(options: tuple[tuple[str, str], ...]) -> dict[str, str]:
    """Client options for logs, with passwords and secrets masked."""
    secret = ("password", "secret", "token", "key")
    return {k: "***" if any(word in k for word in secret) else v for k, v in options}
