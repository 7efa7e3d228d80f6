"""The shipped Prometheus configuration and rules: promtool's checks and unit tests, and their coverage.

promtool validates both scrape configurations and the rule files and runs the unit tests in
deploy/prometheus/tests. The structural checks make sure every alert has a unit test in which it
fires, every threshold is used, every metric a rule reads is one the worker exports and every alert
has a runbook entry in docs/operations.md.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.deploy.deploy_files import (
    DEPLOYMENT_DOC,
    PROMETHEUS_CONFIG,
    PROMETHEUS_K8S_CONFIG,
    RULE_TESTS_DIR,
    RULES_DIR,
    WORKER_JOB,
    alert_rules,
    compose_file,
    k8s_object,
    load_yaml,
    metric_names,
    threshold_rules,
)

REQUIRED_ALERTS = {
    "SgtConsumerLagHigh",
    "SgtConsumerLagGrowing",
    "SgtNoProgress",
    "SgtCheckpointStale",
    "SgtWorkerDown",
    "SgtPrequentialErrorHigh",
    "SgtDeadLetterRate",
}


def _promtool(promtool: str, *args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [promtool, *map(str, args)], capture_output=True, text=True, timeout=120, cwd=RULES_DIR.parent
    )


@pytest.mark.parametrize("config", [PROMETHEUS_CONFIG, PROMETHEUS_K8S_CONFIG], ids=lambda p: p.name)
def test_promtool_check_config(promtool: str, config: Path) -> None:
    result = _promtool(promtool, "check", "config", config)
    assert result.returncode == 0, result.stdout + result.stderr


def test_promtool_check_rules(promtool: str) -> None:
    result = _promtool(promtool, "check", "rules", *sorted(RULES_DIR.glob("*.yml")))
    assert result.returncode == 0, result.stdout + result.stderr


def test_promtool_test_rules(promtool: str) -> None:
    tests = sorted(RULE_TESTS_DIR.glob("*.yml"))
    assert tests
    result = _promtool(promtool, "test", "rules", *tests)
    assert result.returncode == 0, result.stdout + result.stderr


def test_promtool_test_rules_fails_on_a_wrong_expectation(promtool: str, tmp_path: Path) -> None:
    """The unit tests are not vacuous: a copy expecting a different label fails."""
    source = RULE_TESTS_DIR / "alerts_test.yml"
    text = source.read_text(encoding="utf-8").replace("../rules/", str(RULES_DIR) + "/")
    broken = text.replace(
        'exp_labels: {severity: warning, topic: features, partition: "0"}',
        'exp_labels: {severity: warning, topic: features, partition: "1"}',
        1,
    )
    assert broken != text
    path = tmp_path / "broken_test.yml"
    path.write_text(broken, encoding="utf-8")
    assert _promtool(promtool, "test", "rules", path).returncode != 0


def _unit_tests() -> list[dict[str, Any]]:
    return [t for path in sorted(RULE_TESTS_DIR.glob("*.yml")) for t in load_yaml(path)["tests"]]


def test_every_alert_has_a_unit_test_where_it_fires_and_one_where_it_does_not() -> None:
    firing: set[str] = set()
    quiet: set[str] = set()
    for unit in _unit_tests():
        for case in unit.get("alert_rule_test", []):
            (firing if case["exp_alerts"] else quiet).add(case["alertname"])
    names = {rule["alert"] for rule in alert_rules()}
    assert names >= REQUIRED_ALERTS
    assert firing == names
    assert quiet == names


def test_unit_tests_load_the_shipped_rule_files() -> None:
    for path in RULE_TESTS_DIR.glob("*.yml"):
        files = {(path.parent / f).resolve() for f in load_yaml(path)["rule_files"]}
        assert files == {p.resolve() for p in RULES_DIR.glob("*.yml")}, path.name


def test_alerts_carry_severity_and_annotations() -> None:
    for rule in alert_rules():
        assert rule["labels"]["severity"] in {"critical", "warning", "info"}, rule["alert"]
        assert set(rule["annotations"]) == {"summary", "description"}, rule["alert"]
        assert re.fullmatch(r"Sgt[A-Z][A-Za-z]+", rule["alert"])


def test_every_threshold_is_defined_once_and_used() -> None:
    defined = [rule["record"] for rule in threshold_rules()]
    assert len(defined) == len(set(defined))
    assert all(re.fullmatch(r"sgt:threshold:[a-z_]+", name) for name in defined)
    used = {name for rule in alert_rules() for name in re.findall(r"sgt:threshold:[a-z_]+", rule["expr"])}
    assert used == set(defined)
    for rule in threshold_rules():
        assert re.fullmatch(r"vector\([0-9.e+-]+\)", rule["expr"]), "a plain number, easy to edit"


def test_rules_read_only_metrics_the_worker_exports(worker_metric_names: set[str]) -> None:
    for rule in alert_rules():
        unknown = metric_names(rule["expr"]) - worker_metric_names - {"up"}
        assert not unknown, f"{rule['alert']} reads {unknown}"


def test_worker_down_rules_select_the_scrape_job() -> None:
    config_jobs = {job["job_name"] for job in load_yaml(PROMETHEUS_CONFIG)["scrape_configs"]}
    assert WORKER_JOB in config_jobs
    for rule in alert_rules():
        if "up{" in rule["expr"]:
            assert f'job="{WORKER_JOB}"' in rule["expr"], rule["alert"]


def test_every_alert_has_a_runbook_entry() -> None:
    doc = DEPLOYMENT_DOC.read_text(encoding="utf-8")
    headings = set(re.findall(r"^#{2,5} +`?(Sgt\w+)`?", doc, flags=re.MULTILINE))
    assert headings == {rule["alert"] for rule in alert_rules()}


def test_checkpoint_stale_threshold_leaves_room_for_the_configured_checkpoint_interval(
    settings_by_env: dict[str, Any],
) -> None:
    (threshold,) = [r for r in threshold_rules() if r["record"] == "sgt:threshold:checkpoint_age_seconds"]
    stale_after = float(re.fullmatch(r"vector\((.+)\)", threshold["expr"]).group(1))
    setting = settings_by_env["SGT_CHECKPOINT_SECONDS"]
    configured = [
        compose_file()["services"]["worker"]["environment"].get(setting.env, setting.default),
        k8s_object("ConfigMap")["data"].get(setting.env, setting.default),
    ]
    for value in configured:
        assert stale_after >= 5 * setting.parse(value)
