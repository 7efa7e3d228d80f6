"""docker-compose.yml, checked without a Docker engine, as compose reads it with no variables set.

Services, health checks, topic partitions, replicas without fixed names, the shared checkpoint volume,
the worker's settings and the wiring between Kafka, workers, Prometheus and Grafana.
"""

from __future__ import annotations

import re
from pathlib import PurePosixPath
from typing import Any

import pytest

from tests.deploy.deploy_files import (
    COMPOSE,
    DASHBOARD,
    GRAFANA_DATASOURCES,
    GRAFANA_PROVIDERS,
    PROMETHEUS_CONFIG,
    REPO,
    WORKER_JOB,
    compose_file,
    compose_interpolate,
    duration_seconds,
    load_json,
    load_yaml,
    sgt_variables,
)
from tests.deploy.dockerfile_model import parse_dockerfile
from worker.cli import parse_args

TOPIC_KINDS = ("features", "labels", "predictions", "dead-letters")
TOPIC_SETTINGS = {
    "features": "SGT_FEATURES_TOPIC",
    "labels": "SGT_LABELS_TOPIC",
    "predictions": "SGT_PREDICTIONS_TOPIC",
    "dead-letters": "SGT_DEAD_LETTER_TOPIC",
}
DEFAULT_PARTITIONS = 6


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    return compose_file()


@pytest.fixture(scope="module")
def services(compose: dict[str, Any]) -> dict[str, Any]:
    return compose["services"]


@pytest.fixture(scope="module")
def worker_env(services: dict[str, Any]) -> dict[str, str]:
    return {k: str(v) for k, v in services["worker"]["environment"].items()}


def _mounts(service: dict[str, Any]) -> dict[str, str]:
    """Container path -> source (a named volume or a host path) of a service's volumes."""
    out = {}
    for volume in service.get("volumes", []):
        source, target = volume.split(":")[:2]
        out[target] = source
    return out


def test_stack_has_every_service(services: dict[str, Any]) -> None:
    assert set(services) == {"kafka", "kafka-init", "worker", "producer", "prometheus", "grafana"}


def test_kafka_is_a_single_kraft_node_of_the_official_image_with_a_healthcheck(
    services: dict[str, Any],
) -> None:
    kafka = services["kafka"]
    env = kafka["environment"]
    assert re.fullmatch(r"apache/kafka:\d+\.\d+\.\d+", kafka["image"])
    assert set(env["KAFKA_PROCESS_ROLES"].split(",")) == {"broker", "controller"}
    assert env["KAFKA_CONTROLLER_QUORUM_VOTERS"] == f"{env['KAFKA_NODE_ID']}@kafka:29093"
    for internal_topic in (
        "KAFKA_OFFSETS_TOPIC_REPLICATION_FACTOR",
        "KAFKA_TRANSACTION_STATE_LOG_REPLICATION_FACTOR",
    ):
        assert env[internal_topic] == 1
    check = kafka["healthcheck"]["test"]
    assert check[0] == "CMD-SHELL" and "kafka-broker-api-versions.sh" in check[1]
    assert "kafka-data" in _mounts(kafka).values()


def test_every_long_running_service_has_a_healthcheck(services: dict[str, Any]) -> None:
    for name in ("kafka", "prometheus", "grafana"):
        assert services[name]["healthcheck"]["test"], name
    # the worker inherits the image's HEALTHCHECK on /healthz (test_dockerfile.py runs it); the
    # the producer serves no /healthz: it says so rather than inherit a check
    assert "healthcheck" not in services["worker"]
    assert services["producer"]["healthcheck"] == {"disable": True}


def _created_topics(services: dict[str, Any]) -> dict[str, str]:
    script = services["kafka-init"]["command"][0]
    return dict(re.findall(r"--create --if-not-exists --topic (\S+) --partitions (\S+)", script))


def test_topic_init_creates_the_four_topics_with_equal_partition_counts(services: dict[str, Any]) -> None:
    init = services["kafka-init"]
    assert init["depends_on"] == {"kafka": {"condition": "service_healthy"}}
    assert init["restart"] == "no"
    topics = _created_topics(services)
    assert set(topics) == set(TOPIC_KINDS)
    assert set(topics.values()) == {str(DEFAULT_PARTITIONS)}
    # the partition count is one knob, not four numbers that could drift apart
    raw = COMPOSE.read_text(encoding="utf-8")
    assert raw.count("--partitions ${TOPIC_PARTITIONS:-6}") == len(TOPIC_KINDS)


def test_workers_use_the_created_topics(services: dict[str, Any], worker_env: dict[str, str]) -> None:
    topics = _created_topics(services)
    for kind, variable in TOPIC_SETTINGS.items():
        assert worker_env[variable] in topics, kind


def test_worker_is_replicated_without_fixed_names_or_host_ports(services: dict[str, Any]) -> None:
    worker = services["worker"]
    assert worker["deploy"]["replicas"] >= 2
    # compose refuses to scale a service with a fixed container name; none of ours needs one
    for name, service in services.items():
        assert "container_name" not in service, name
    assert "ports" not in worker
    assert worker["depends_on"] == {"kafka-init": {"condition": "service_completed_successfully"}}
    assert worker["restart"] == "unless-stopped"


def test_each_replica_has_its_own_checkpoint_volume_and_restores_from_the_state_topic(
    compose: dict[str, Any], worker_env: dict[str, str], settings_by_env: dict[str, Any]
) -> None:
    worker = compose["services"]["worker"]
    assert worker_env["SGT_CHECKPOINT_DIR"] in worker["volumes"], "an anonymous volume: one per replica"
    assert "checkpoints" not in compose["volumes"]
    assert settings_by_env["SGT_STATE_TOPIC"].parse(worker_env["SGT_STATE_TOPIC"]) == "sgt-worker-state"


def test_worker_settings_are_real_and_valid(
    services: dict[str, Any], worker_env: dict[str, str], settings_by_env: dict[str, Any]
) -> None:
    assert sgt_variables(COMPOSE.read_text(encoding="utf-8")) <= set(settings_by_env)
    for name, value in worker_env.items():
        settings_by_env[name].parse(value)
    kafka_env = services["kafka"]["environment"]
    assert f"PLAINTEXT://{worker_env['SGT_BOOTSTRAP_SERVERS']}" in kafka_env["KAFKA_ADVERTISED_LISTENERS"]
    assert worker_env["SGT_CHECKPOINT_DIR"] == "/var/lib/sgt/checkpoints"


def test_stop_grace_period_covers_the_final_checkpoint(
    services: dict[str, Any], worker_env: dict[str, str], settings_by_env: dict[str, Any]
) -> None:
    setting = settings_by_env["SGT_SHUTDOWN_TIMEOUT_SECONDS"]
    shutdown = setting.parse(worker_env.get(setting.env, setting.default))
    assert duration_seconds(services["worker"]["stop_grace_period"]) >= shutdown + 10


def test_images_are_built_from_the_repository_dockerfile(services: dict[str, Any]) -> None:
    """The workers run the production image (the default target); the producer the dev tools image."""
    source = {"context": ".", "dockerfile": "deploy/Dockerfile"}
    assert services["worker"]["build"] == source
    assert services["producer"]["build"] == {**source, "target": "tools"}
    assert services["producer"]["image"] != services["worker"]["image"]
    stages = [stage.name for stage in parse_dockerfile((REPO / "deploy" / "Dockerfile").read_text())]
    assert "tools" in stages and stages[-1] != "tools"


def test_producer_command_is_a_valid_produce_invocation_matching_the_topics(
    services: dict[str, Any], worker_env: dict[str, str]
) -> None:
    producer = services["producer"]
    args = parse_args([str(a) for a in producer["command"]])
    assert args.command == "produce"
    assert args.bootstrap_servers == worker_env["SGT_BOOTSTRAP_SERVERS"]
    assert args.features_topic == worker_env["SGT_FEATURES_TOPIC"]
    assert args.labels_topic == worker_env["SGT_LABELS_TOPIC"]
    assert args.partitions == DEFAULT_PARTITIONS
    assert args.rate > 0
    assert args.label_delay > 0, "labels follow their features, so the join buffer has work to show"
    assert producer["depends_on"] == {"kafka-init": {"condition": "service_completed_successfully"}}


def test_prometheus_scrapes_every_worker_replica_individually(
    services: dict[str, Any], worker_env: dict[str, str]
) -> None:
    prometheus = services["prometheus"]
    mounts = _mounts(prometheus)
    assert (REPO / mounts["/etc/prometheus"]).resolve() == PROMETHEUS_CONFIG.parent
    assert "--config.file=/etc/prometheus/prometheus.yml" in prometheus["command"]
    config = load_yaml(PROMETHEUS_CONFIG)
    (job,) = [j for j in config["scrape_configs"] if j["job_name"] == WORKER_JOB]
    # DNS service discovery: one target per A record, i.e. per replica
    assert "static_configs" not in job
    assert job["dns_sd_configs"] == [
        {
            "names": ["worker"],
            "type": "A",
            "port": int(worker_env["SGT_METRICS_PORT"]),
            "refresh_interval": "10s",
        }
    ]


def test_prometheus_loads_the_shipped_rule_files() -> None:
    config = load_yaml(PROMETHEUS_CONFIG)
    loaded = {p for pattern in config["rule_files"] for p in PROMETHEUS_CONFIG.parent.glob(pattern)}
    assert {p.name for p in loaded} == {"alerts.yml", "thresholds.yml"}


def test_grafana_is_provisioned_with_the_prometheus_datasource_and_dashboard(
    services: dict[str, Any],
) -> None:
    grafana = services["grafana"]
    mounts = _mounts(grafana)
    provisioning = (REPO / mounts["/etc/grafana/provisioning"]).resolve()
    assert provisioning == GRAFANA_DATASOURCES.parents[1]
    (datasource,) = load_yaml(GRAFANA_DATASOURCES)["datasources"]
    prometheus_port = services["prometheus"]["ports"][0].split(":")[1]
    assert datasource["url"] == f"http://prometheus:{prometheus_port}"
    # Grafana's $__rate_interval is only right when it knows the scrape interval
    assert datasource["jsonData"]["timeInterval"] == load_yaml(PROMETHEUS_CONFIG)["global"]["scrape_interval"]
    (provider,) = load_yaml(GRAFANA_PROVIDERS)["providers"]
    dashboards_dir = provider["options"]["path"]
    assert (REPO / mounts[dashboards_dir]).resolve() == DASHBOARD.parent
    home = PurePosixPath(grafana["environment"]["GF_DASHBOARDS_DEFAULT_HOME_DASHBOARD_PATH"])
    assert str(home.parent) == dashboards_dir and home.name == DASHBOARD.name
    assert load_json(DASHBOARD)["uid"]
    assert grafana["depends_on"] == {"prometheus": {"condition": "service_healthy"}}
    assert grafana["ports"] == ["3000:3000"]


def test_every_compose_variable_has_a_default() -> None:
    compose_interpolate(COMPOSE.read_text(encoding="utf-8"))  # raises on ${VAR} without a default
