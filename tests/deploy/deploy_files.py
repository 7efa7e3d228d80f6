"""The shipped deployment files, loaded for tests, and small readers of what is inside them.

Paths are relative to the repository root. The readers cover compose's variable interpolation, the
``SGT_*`` names a file mentions, the metric names a PromQL expression uses and the queries of a
Grafana dashboard with its variables substituted the way Grafana does before it sends them.

>>> compose_interpolate("--partitions ${TOPIC_PARTITIONS:-6}")
'--partitions 6'
>>> sorted(sgt_variables("SGT_TASK=regression and ${SGT_GROUP_ID}"))
['SGT_GROUP_ID', 'SGT_TASK']
>>> sorted(metric_names('sum by (le) (rate(sgt_checkpoint_seconds_bucket{a="b"}[5m])) > on () sgt:t:x'))
['sgt_checkpoint_seconds']
>>> grafana_substitute('rate(sgt_records_total{partition=~"$partition"}[$__rate_interval])', ["0", "1"])
'rate(sgt_records_total{partition=~"0|1"}[20s])'
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[2]
DEPLOY = REPO / "deploy"
DOCKERFILE = DEPLOY / "Dockerfile"
DOCKERIGNORE = REPO / ".dockerignore"
COMPOSE = REPO / "docker-compose.yml"
PROMETHEUS_DIR = DEPLOY / "prometheus"
PROMETHEUS_CONFIG = PROMETHEUS_DIR / "prometheus.yml"
PROMETHEUS_K8S_CONFIG = PROMETHEUS_DIR / "prometheus-kubernetes.yml"
RULES_DIR = PROMETHEUS_DIR / "rules"
ALERTS = RULES_DIR / "alerts.yml"
THRESHOLDS = RULES_DIR / "thresholds.yml"
RULE_TESTS_DIR = PROMETHEUS_DIR / "tests"
GRAFANA_DIR = DEPLOY / "grafana"
DASHBOARD = GRAFANA_DIR / "dashboards" / "sgt-stream.json"
GRAFANA_DATASOURCES = GRAFANA_DIR / "provisioning" / "datasources" / "prometheus.yml"
GRAFANA_PROVIDERS = GRAFANA_DIR / "provisioning" / "dashboards" / "sgt-stream.yml"
K8S_DIR = DEPLOY / "k8s"
DEPLOYMENT_DOC = REPO / "docs" / "operations.md"

WORKER_JOB = "sgt-worker"
"""Prometheus job name of the workers; the alert rules select it."""

HEALTH_PATH = "/healthz"
READY_PATH = "/readyz"

# Grafana's $__rate_interval is max(4 x scrape interval, $__interval + scrape interval); these are the
# values for a 5 s scrape interval and a short dashboard time range.
GRAFANA_INTERVALS = {"__rate_interval": "20s", "__interval": "5s", "__range": "15m"}

_INTERPOLATION = re.compile(r"\$\{(\w+)(?::?-([^}]*))?\}")
_SGT_NAME = re.compile(r"\bSGT_[A-Z0-9_]+\b")
# a name not preceded by a word character, colon, quote or dollar sign
_IDENTIFIER = re.compile(r"(?<![\w:\"'$])([a-zA-Z_][a-zA-Z0-9_:]*)")
# PromQL keywords and functions: words of an expression that are not metric names
# fmt: off
_PROMQL_WORDS = frozenset({
    "sum", "min", "max", "avg", "count", "stddev", "stdvar", "topk", "bottomk", "quantile", "count_values",
    "group", "by", "without", "on", "ignoring", "group_left", "group_right", "and", "or", "unless", "bool",
    "offset", "rate", "irate", "increase", "delta", "idelta", "deriv", "histogram_quantile", "time",
    "vector", "scalar", "absent", "absent_over_time", "abs", "ceil", "floor", "round", "clamp_min",
    "clamp_max", "label_replace", "label_join", "max_over_time", "min_over_time", "avg_over_time",
    "sum_over_time", "count_over_time", "last_over_time", "predict_linear", "resets", "changes", "sort",
    "sort_desc", "timestamp", "le",
})
# fmt: on
_HISTOGRAM_SUFFIXES = ("_bucket", "_sum", "_count")


def load_yaml(path: Path) -> Any:
    return yaml.safe_load(path.read_text(encoding="utf-8"))


def load_yaml_documents(path: Path) -> list[Any]:
    return [d for d in yaml.safe_load_all(path.read_text(encoding="utf-8")) if d is not None]


def load_json(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))


def compose_interpolate(text: str) -> str:
    """``${VAR:-default}`` and ``${VAR-default}`` resolved to their defaults (compose run without .env)."""

    def replace(match: re.Match[str]) -> str:
        if match.group(2) is None:
            raise ValueError(f"compose variable {match.group(1)} has no default")
        return match.group(2)

    return _INTERPOLATION.sub(replace, text)


def compose_file() -> dict[str, Any]:
    """docker-compose.yml as compose sees it with no variables set."""
    return yaml.safe_load(compose_interpolate(COMPOSE.read_text(encoding="utf-8")))


def sgt_variables(text: str) -> set[str]:
    """Every ``SGT_*`` name mentioned in ``text``."""
    return set(_SGT_NAME.findall(text))


def metric_names(expr: str) -> set[str]:
    """Names of the raw metrics an expression reads (histogram series folded to the metric name)."""
    names = set()
    without_strings = re.sub(r'"[^"]*"', '""', expr)
    without_ranges = re.sub(r"\[[^\]]*\]", "[]", without_strings)
    for word in _IDENTIFIER.findall(without_ranges):
        if ":" in word or word in _PROMQL_WORDS or re.fullmatch(r"\d.*", word):
            continue
        names.add(_fold_histogram(word))
    return names - _grouping_labels(without_ranges)


def _grouping_labels(expr: str) -> set[str]:
    labels: set[str] = set()
    for group in re.findall(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\(([^)]*)\)", expr):
        labels.update(w.strip() for w in group.split(",") if w.strip())
    for selector in re.findall(r"\{([^}]*)\}", expr):
        labels.update(re.findall(r"([a-zA-Z_]\w*)\s*(?:=~|!~|!=|=)", selector))
    return labels


def _fold_histogram(name: str) -> str:
    for suffix in _HISTOGRAM_SUFFIXES:
        if name.endswith(suffix) and name.startswith("sgt_"):
            return name[: -len(suffix)]
    return name


def dashboard_panels(dashboard: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """Every panel that shows data (rows excluded), including those nested in collapsed rows."""
    for panel in dashboard["panels"]:
        if panel.get("type") == "row":
            yield from panel.get("panels", [])
        else:
            yield panel


def dashboard_queries(dashboard: dict[str, Any]) -> list[tuple[str, str]]:
    """``(panel title / refId, expression)`` of every target of every panel."""
    return [
        (f"{panel['title']} / {target['refId']}", target["expr"])
        for panel in dashboard_panels(dashboard)
        for target in panel["targets"]
    ]


def grafana_substitute(expr: str, partitions: list[str]) -> str:
    """The expression as Grafana sends it with every partition selected (a regex alternation)."""
    result = re.sub(r"\$\{partition(?::\w+)?\}|\$partition\b", "|".join(partitions), expr)
    for name, value in GRAFANA_INTERVALS.items():
        result = re.sub(r"\$\{" + name + r"\}|\$" + name + r"\b", value, result)
    return result


def alert_rules() -> list[dict[str, Any]]:
    return [rule for group in load_yaml(ALERTS)["groups"] for rule in group["rules"]]


def threshold_rules() -> list[dict[str, Any]]:
    return [rule for group in load_yaml(THRESHOLDS)["groups"] for rule in group["rules"]]


def k8s_objects() -> list[dict[str, Any]]:
    """Every object of the manifests listed in deploy/k8s/kustomization.yaml, in that order."""
    kustomization = load_yaml(K8S_DIR / "kustomization.yaml")
    return [doc for name in kustomization["resources"] for doc in load_yaml_documents(K8S_DIR / name)]


def k8s_object(kind: str, objects: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """The one object of ``kind`` in the manifests."""
    matches = [o for o in (objects if objects is not None else k8s_objects()) if o["kind"] == kind]
    if len(matches) != 1:
        raise LookupError(f"expected one {kind}, found {len(matches)}")
    return matches[0]


def duration_seconds(text: str | int | float) -> float:
    """Seconds of a compose / Prometheus duration such as ``45s``, ``1m30s`` or a bare number."""
    if isinstance(text, int | float):
        return float(text)
    units = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}
    parts = re.findall(r"(\d+(?:\.\d+)?)(ms|s|m|h)", text)
    if not parts or "".join(a + b for a, b in parts) != text:
        raise ValueError(f"not a duration: {text!r}")
    return sum(float(value) * units[unit] for value, unit in parts)
