"""docs/operations.md stays true to the files it describes.

Its tables of services, compose knobs and alert thresholds must match docker-compose.yml and
thresholds.yml, every ``SGT_*`` name it mentions must be a worker setting, and every repository path
it names must exist.
"""

from __future__ import annotations

import re

from tests.deploy.deploy_files import (
    COMPOSE,
    DEPLOY,
    DEPLOYMENT_DOC,
    REPO,
    compose_file,
    sgt_variables,
    threshold_rules,
)


def _doc() -> str:
    return DEPLOYMENT_DOC.read_text(encoding="utf-8")


def _table_rows(first_header: str) -> list[list[str]]:
    """Cells of the Markdown table whose first header cell is ``first_header``."""
    lines = _doc().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(f"| {first_header} |"))
    rows = []
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        rows.append([cell.strip() for cell in line.strip("|").split("|")])
    return rows


def test_every_setting_named_is_a_worker_setting(settings_by_env: dict) -> None:
    # SGT_CONFIG names the TOML file itself (worker.config), the one variable that is not a setting
    assert sgt_variables(_doc()) <= set(settings_by_env) | {"SGT_CONFIG"}


def test_every_setting_named_in_any_deployment_file_is_a_worker_setting(settings_by_env: dict) -> None:
    files = [COMPOSE, *(p for p in DEPLOY.rglob("*") if p.is_file())]
    assert len(files) > 10
    for path in files:
        unknown = sgt_variables(path.read_text(encoding="utf-8")) - set(settings_by_env)
        assert not unknown, f"{path.relative_to(REPO)}: {sorted(unknown)}"


def test_every_repository_path_named_exists() -> None:
    paths = set(re.findall(r"`((?:deploy|docs|tests)/[\w./-]+|docker-compose\.yml)`", _doc()))
    assert paths
    for path in paths:
        assert (REPO / path.rstrip("/")).exists(), path


def test_service_table_lists_the_compose_services() -> None:
    named = {re.match(r"`([\w-]+)`", row[0]).group(1) for row in _table_rows("service")}
    assert named == set(compose_file()["services"])


def test_knob_table_lists_the_compose_variables_with_their_defaults() -> None:
    defaults = dict(re.findall(r"\$\{(\w+):-([^}]*)\}", COMPOSE.read_text(encoding="utf-8")))
    documented = {row[0].strip("`"): row[1].strip("`") for row in _table_rows("variable")}
    assert documented == defaults


def test_threshold_table_matches_the_recording_rules() -> None:
    shipped = {
        rule["record"]: re.fullmatch(r"vector\((.+)\)", rule["expr"]).group(1) for rule in threshold_rules()
    }
    documented = {row[0].strip("`"): row[1] for row in _table_rows("threshold")}
    assert documented == shipped
