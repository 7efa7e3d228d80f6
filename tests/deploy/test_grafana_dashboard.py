"""The Grafana dashboard and its provisioning, checked structurally.

Stable uid, the partition variable, the panels an operator needs, every query on the provisioned
datasource and reading only metrics the worker exports, per-partition metrics filtered by the
variable, and a layout that fits Grafana's 24-column grid. test_prometheus_e2e.py runs the queries.
"""

from __future__ import annotations

import re
from typing import Any

import pytest

from tests.deploy.deploy_files import (
    DASHBOARD,
    GRAFANA_DATASOURCES,
    GRAFANA_PROVIDERS,
    dashboard_panels,
    dashboard_queries,
    grafana_substitute,
    load_json,
    load_yaml,
    metric_names,
)

# metrics with a partition label (docs/operations.md): every query of them must honour $partition
PARTITIONED = {
    "sgt_prequential_error",
    "sgt_prequential_log_loss",
    "sgt_prequential_brier",
    "sgt_tree_nodes",
    "sgt_tree_leaves",
    "sgt_tree_depth",
    "sgt_records_total",
    "sgt_predictions_total",
    "sgt_trained_total",
    "sgt_consumer_lag_records",
    "sgt_last_checkpoint_timestamp_seconds",
    "sgt_join_pending",
    "sgt_model_bytes",
    "sgt_model_version",
    "sgt_drifts_total",
    "sgt_model_trees",
    "sgt_interval_coverage",
    "sgt_interval_width",
    "sgt_feature_importance",
}

# what the dashboard must show: a metric, and a fragment the query must contain
REQUIRED = {
    "prequential error (cumulative)": ("sgt_prequential_error", 'window="cumulative"'),
    "prequential error (recent)": ("sgt_prequential_error", 'window="recent"'),
    "log loss (recent)": ("sgt_prequential_log_loss", 'window="recent"'),
    "Brier score (recent)": ("sgt_prequential_brier", 'window="recent"'),
    "tree nodes": ("sgt_tree_nodes", ""),
    "tree leaves": ("sgt_tree_leaves", ""),
    "tree depth": ("sgt_tree_depth", ""),
    "records per second": ("sgt_records_total", "rate("),
    "predictions per second": ("sgt_predictions_total", "rate("),
    "consumer lag": ("sgt_consumer_lag_records", ""),
    "checkpoint age": ("sgt_last_checkpoint_timestamp_seconds", "time() -"),
    "checkpoint duration": ("sgt_checkpoint_seconds", "histogram_quantile("),
    "dead-letter rate by reason": ("sgt_invalid_records_total", "reason"),
    "prediction latency": ("sgt_prediction_latency_seconds", "histogram_quantile("),
    "drifts answered per second": ("sgt_drifts_total", "rate("),
    "ensemble size": ("sgt_model_trees", ""),
    "interval coverage (recent)": ("sgt_interval_coverage", 'window="recent"'),
    "interval width (recent)": ("sgt_interval_width", 'window="recent"'),
    "feature importance": ("sgt_feature_importance", ""),
}


@pytest.fixture(scope="module")
def dashboard() -> dict[str, Any]:
    return load_json(DASHBOARD)


@pytest.fixture(scope="module")
def datasource_uid() -> str:
    (datasource,) = load_yaml(GRAFANA_DATASOURCES)["datasources"]
    assert datasource["type"] == "prometheus"
    return str(datasource["uid"])


def test_dashboard_identity_is_stable(dashboard: dict[str, Any]) -> None:
    assert dashboard["uid"] == "sgt-stream"
    assert dashboard["title"]
    assert dashboard["editable"] is False, "provisioned: changes belong in the repository"
    (provider,) = load_yaml(GRAFANA_PROVIDERS)["providers"]
    assert provider["type"] == "file" and provider["allowUiUpdates"] is False


def test_partition_variable_lists_the_partitions_of_the_tree_gauge(
    dashboard: dict[str, Any], datasource_uid: str
) -> None:
    (variable,) = dashboard["templating"]["list"]
    assert variable["name"] == "partition" and variable["type"] == "query"
    assert variable["definition"] == "label_values(sgt_tree_nodes, partition)"
    assert variable["query"]["query"] == variable["definition"]
    assert variable["datasource"]["uid"] == datasource_uid
    assert variable["multi"] is True and variable["includeAll"] is True and variable["allValue"] == ".*"
    assert variable["refresh"] == 2, "refreshed on time range change, as partitions move"


def test_every_panel_queries_the_provisioned_datasource(
    dashboard: dict[str, Any], datasource_uid: str
) -> None:
    panels = list(dashboard_panels(dashboard))
    assert panels
    for panel in panels:
        assert panel["datasource"]["uid"] == datasource_uid, panel["title"]
        assert panel["targets"], panel["title"]
        for target in panel["targets"]:
            assert target["datasource"]["uid"] == datasource_uid
            assert target["expr"].strip()


def test_panel_ids_and_titles_are_unique(dashboard: dict[str, Any]) -> None:
    ids = [p["id"] for p in dashboard["panels"]]
    titles = [p["title"] for p in dashboard_panels(dashboard)]
    assert len(ids) == len(set(ids))
    assert len(titles) == len(set(titles))
    for panel in dashboard_panels(dashboard):
        refs = [t["refId"] for t in panel["targets"]]
        assert len(refs) == len(set(refs)), panel["title"]


def test_layout_fits_the_grid_without_overlaps(dashboard: dict[str, Any]) -> None:
    cells: set[tuple[int, int]] = set()
    for panel in dashboard["panels"]:
        g = panel["gridPos"]
        assert g["x"] >= 0 and g["w"] > 0 and g["x"] + g["w"] <= 24, panel["title"]
        own = {(x, y) for x in range(g["x"], g["x"] + g["w"]) for y in range(g["y"], g["y"] + g["h"])}
        assert not own & cells, f"{panel['title']} overlaps another panel"
        cells |= own


def test_dashboard_shows_what_the_issue_asks_for(dashboard: dict[str, Any]) -> None:
    queries = [expr for _, expr in dashboard_queries(dashboard)]
    for what, (metric, fragment) in REQUIRED.items():
        assert any(metric in metric_names(q) and fragment in q for q in queries), what


def test_queries_read_only_metrics_the_worker_exports(
    dashboard: dict[str, Any], worker_metric_names: set[str]
) -> None:
    for title, expr in dashboard_queries(dashboard):
        unknown = metric_names(expr) - worker_metric_names - {"up"}
        assert not unknown, f"{title} reads {unknown}"


def test_partitioned_metrics_are_filtered_by_the_variable(dashboard: dict[str, Any]) -> None:
    for title, expr in dashboard_queries(dashboard):
        for metric in metric_names(expr) & PARTITIONED:
            selector = re.escape(metric) + r'\{[^}]*partition=~"\$partition"[^}]*\}'
            assert re.search(selector, expr), f"{title}: {metric}"


def test_substituted_queries_have_no_variables_left(dashboard: dict[str, Any]) -> None:
    for title, expr in dashboard_queries(dashboard):
        assert "$" not in grafana_substitute(expr, ["0", "1"]), title
