"""Worker settings: one registry, four sources, one precedence.

Every setting is declared once in :data:`SETTINGS` (:mod:`worker.config.table`: name, flag,
environment variable, default, help, parser of :mod:`worker.config.parsers`). A value comes from the
first source that has it (:mod:`worker.config.sources`): command-line flag, then ``SGT_*``
environment variable, then the TOML file given with ``--config`` (keys are the setting names, either at
the top level or under a ``[worker]`` table), then the default. A bad value is rejected with a
:class:`ConfigError` naming the setting and what it accepts; :class:`WorkerSettings`
(:mod:`worker.config.worker_settings`) holds the validated values and checks them against each other.
This package re-exports the names the rest of the worker and its users import.

>>> s = load_settings({"task": "regression"}, env={"SGT_GROUP_ID": "g1"})
>>> (s.task, s.group_id, s.features_topic)
('regression', 'g1', 'features')
"""

from __future__ import annotations

from worker.config.parsers import (
    FEATURE_TYPES,
    PROTECTED_CLIENT_KEYS,
    STATE_TOPIC_AUTO,
    ConfigError,
    parse_client_options,
    parse_feature_spec,
    redacted,
)
from worker.config.sources import (
    OTHER_VARIABLES,
    add_arguments,
    load_settings,
    read_toml,
    settings_from_args,
    unknown_variables,
)
from worker.config.table import (
    GUARANTEES,
    MAX_TRANSACTION_SECONDS,
    MODEL_MAX_BYTES,
    MODEL_MIN_BYTES,
    MODELS,
    SETTINGS,
    Setting,
    describe,
)
from worker.config.worker_settings import WorkerSettings

__all__ = [
    "FEATURE_TYPES",
    "GUARANTEES",
    "MAX_TRANSACTION_SECONDS",
    "MODELS",
    "MODEL_MAX_BYTES",
    "MODEL_MIN_BYTES",
    "OTHER_VARIABLES",
    "PROTECTED_CLIENT_KEYS",
    "SETTINGS",
    "STATE_TOPIC_AUTO",
    "ConfigError",
    "Setting",
    "WorkerSettings",
    "add_arguments",
    "describe",
    "load_settings",
    "parse_client_options",
    "parse_feature_spec",
    "read_toml",
    "redacted",
    "settings_from_args",
    "unknown_variables",
]
