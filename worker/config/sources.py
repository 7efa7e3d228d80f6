"""Where setting values come from, and which wins: command-line flag, then ``SGT_*`` environment
variable, then the TOML file given with ``--config``, then the default.

>>> load_settings({"task": "regression"}, env={"SGT_GROUP_ID": "g1"}).group_id
'g1'
"""

from __future__ import annotations

import argparse
import difflib
import os
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from worker.config.parsers import ConfigError
from worker.config.table import BY_NAME, SETTINGS, check
from worker.config.worker_settings import WorkerSettings

#: ``SGT_*`` variables that are not settings but are read all the same: the settings file, and the
#: library's switch of its compiled kernels (``sgt.kernels``).
OTHER_VARIABLES = frozenset({"SGT_CONFIG", "SGT_KERNELS"})


def unknown_variables(env: Mapping[str, str]) -> list[tuple[str, str | None]]:
    """The ``SGT_*`` variables of ``env`` that nothing reads, each with the closest known name (None
    when none is close), sorted by name.

    A misspelt variable would be ignored without a word (an unknown TOML key is refused); the worker
    warns about these rather than refusing them, since other tools may use the prefix too.
    """
    known = {s.env for s in SETTINGS} | OTHER_VARIABLES
    return [
        (name, next(iter(difflib.get_close_matches(name, sorted(known), n=1, cutoff=0.8)), None))
        for name in sorted(env)
        if name.startswith("SGT_") and name not in known
    ]


def read_toml(path: str | Path) -> dict[str, Any]:
    """The settings table of a TOML file: its ``[worker]`` table if present, else the top level."""
    try:
        with open(path, "rb") as handle:
            data = tomllib.load(handle)
    except OSError as exc:
        raise ConfigError(f"setting config (--config / SGT_CONFIG): cannot read {path}: {exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(
            f"setting config (--config / SGT_CONFIG): {path} is not valid TOML: {exc}"
        ) from None
    table = data.get("worker", data)
    if not isinstance(table, dict):
        raise ConfigError(f"setting config: [worker] in {path} must be a table")
    unknown = sorted(set(table) - set(BY_NAME) - {"worker"})
    if unknown:
        raise ConfigError(f"setting config: unknown setting(s) {', '.join(unknown)} in {path}")
    return dict(table)


def load_settings(
    flags: Mapping[str, Any] | None = None,
    env: Mapping[str, str] | None = None,
    file_values: Mapping[str, Any] | None = None,
) -> WorkerSettings:
    """Resolve every setting: ``flags`` (non-None) > ``env`` (``SGT_*``) > ``file_values`` > default."""
    flags = flags or {}
    env = os.environ if env is None else env
    file_values = file_values or {}
    values: dict[str, Any] = {}
    for setting in SETTINGS:
        if flags.get(setting.name) is not None:
            values[setting.name] = check(setting, flags[setting.name], f"flag {setting.flag}")
        elif setting.env in env:
            values[setting.name] = check(setting, env[setting.env], f"environment {setting.env}")
        elif setting.name in file_values:
            values[setting.name] = check(setting, file_values[setting.name], "config file")
        else:
            values[setting.name] = check(setting, setting.default, "default")
    return WorkerSettings(**values)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add ``--config`` and one flag per setting; every flag defaults to None so precedence stays ours."""
    parser.add_argument(
        "--config",
        metavar="FILE",
        default=None,
        help="TOML file of settings (env SGT_CONFIG); flags > env > file.",
    )
    for setting in SETTINGS:
        default = "none" if setting.default in (None, ()) else setting.default
        parser.add_argument(
            setting.flag,
            dest=setting.name,
            default=None,
            metavar=setting.name.rstrip("_").upper(),
            help=f"{setting.help} [env {setting.env}; default {default}]",
        )


def settings_from_args(args: argparse.Namespace, env: Mapping[str, str] | None = None) -> WorkerSettings:
    """Settings from parsed flags, the environment and the TOML file named by --config or SGT_CONFIG."""
    env = os.environ if env is None else env
    config_path = getattr(args, "config", None) or env.get("SGT_CONFIG")
    file_values = read_toml(config_path) if config_path else {}
    flags = {s.name: getattr(args, s.name, None) for s in SETTINGS}
    return load_settings(flags, env, file_values)
