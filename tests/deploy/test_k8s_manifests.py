"""deploy/k8s, checked without a cluster: wiring between objects, probes, ports, settings, volume, grace.

Every manifest is listed in kustomization.yaml, selectors match the pod labels, the probes use the
worker's real endpoints on the port the worker is configured to serve, every pod has its own
ReadWriteOnce checkpoint volume mounted where the worker writes, and the state topic is on.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.deploy.deploy_files import (
    DOCKERFILE,
    HEALTH_PATH,
    K8S_DIR,
    PROMETHEUS_K8S_CONFIG,
    READY_PATH,
    WORKER_JOB,
    k8s_object,
    k8s_objects,
    load_yaml,
    sgt_variables,
)
from tests.deploy.dockerfile_model import parse_dockerfile
from worker.cli import build_parser


@pytest.fixture(scope="module")
def objects() -> list[dict[str, Any]]:
    return k8s_objects()


@pytest.fixture(scope="module")
def workload(objects: list[dict[str, Any]]) -> dict[str, Any]:
    return k8s_object("StatefulSet", objects)


@pytest.fixture(scope="module")
def pod(workload: dict[str, Any]) -> dict[str, Any]:
    return workload["spec"]["template"]["spec"]


@pytest.fixture(scope="module")
def container(pod: dict[str, Any]) -> dict[str, Any]:
    (only,) = pod["containers"]
    return only


@pytest.fixture(scope="module")
def config(objects: list[dict[str, Any]], container: dict[str, Any]) -> dict[str, str]:
    """The worker's environment: the ConfigMap its container loads with envFrom."""
    (source,) = container["envFrom"]
    configmap = k8s_object("ConfigMap", objects)
    assert source["configMapRef"]["name"] == configmap["metadata"]["name"]
    assert "env" not in container
    return configmap["data"]


def _setting(config: dict[str, str], settings_by_env: dict[str, Any], env: str) -> Any:
    setting = settings_by_env[env]
    return setting.parse(config.get(env, setting.default))


def test_kustomization_lists_every_manifest(objects: list[dict[str, Any]]) -> None:
    listed = set(load_yaml(K8S_DIR / "kustomization.yaml")["resources"])
    on_disk = {p.name for p in K8S_DIR.glob("*.yaml")} - {"kustomization.yaml"}
    assert listed == on_disk
    kinds = sorted(o["kind"] for o in objects)
    assert kinds == sorted(["Namespace", "ConfigMap", "Service", "StatefulSet", "PodDisruptionBudget"])


def test_selectors_match_the_pod_labels(objects: list[dict[str, Any]], workload: dict[str, Any]) -> None:
    labels = workload["spec"]["template"]["metadata"]["labels"]
    assert workload["spec"]["selector"]["matchLabels"].items() <= labels.items()
    service = k8s_object("Service", objects)
    assert service["spec"]["selector"].items() <= labels.items()
    assert workload["spec"]["serviceName"] == service["metadata"]["name"]
    pdb = k8s_object("PodDisruptionBudget", objects)
    assert pdb["spec"]["selector"]["matchLabels"].items() <= labels.items()
    (spread,) = workload["spec"]["template"]["spec"]["topologySpreadConstraints"]
    assert spread["labelSelector"]["matchLabels"].items() <= labels.items()


def test_several_workers_start_in_parallel(workload: dict[str, Any]) -> None:
    assert workload["spec"]["replicas"] >= 2
    assert workload["spec"]["podManagementPolicy"] == "Parallel"


def test_settings_are_real_worker_settings_with_valid_values(
    config: dict[str, str], settings_by_env: dict[str, Any]
) -> None:
    for path in K8S_DIR.glob("*.yaml"):
        assert sgt_variables(path.read_text(encoding="utf-8")) <= set(settings_by_env), path.name
    for name, value in config.items():
        settings_by_env[name].parse(value)


def test_container_runs_the_worker(container: dict[str, Any]) -> None:
    assert "command" not in container, "the image's ENTRYPOINT (sgt-worker) stays"
    assert build_parser().parse_args(container["args"]).command == "run"


def test_metrics_port_probes_and_scrape_annotations_agree(
    container: dict[str, Any],
    config: dict[str, str],
    settings_by_env: dict[str, Any],
    workload: dict[str, Any],
) -> None:
    port = _setting(config, settings_by_env, "SGT_METRICS_PORT")
    (declared,) = container["ports"]
    assert declared["containerPort"] == port
    probes = {
        kind: container[kind]["httpGet"] for kind in ("startupProbe", "livenessProbe", "readinessProbe")
    }
    assert probes["startupProbe"]["path"] == HEALTH_PATH
    assert probes["livenessProbe"]["path"] == HEALTH_PATH
    assert probes["readinessProbe"]["path"] == READY_PATH
    for probe in probes.values():
        assert probe["port"] in (declared["name"], port)
    annotations = workload["spec"]["template"]["metadata"]["annotations"]
    assert annotations["prometheus.io/port"] == str(port)
    assert annotations["prometheus.io/path"] == "/metrics"


def test_liveness_tolerates_a_slow_start(container: dict[str, Any]) -> None:
    startup = container["startupProbe"]
    assert startup["periodSeconds"] * startup["failureThreshold"] >= 60


def test_service_is_headless_and_publishes_the_metrics_port(
    objects: list[dict[str, Any]], container: dict[str, Any]
) -> None:
    service = k8s_object("Service", objects)
    assert service["spec"]["clusterIP"] == "None"
    assert service["spec"]["publishNotReadyAddresses"] is True
    (port,) = service["spec"]["ports"]
    assert port["targetPort"] == container["ports"][0]["name"]


def test_prometheus_kubernetes_config_finds_every_pod_through_the_service(
    objects: list[dict[str, Any]], container: dict[str, Any]
) -> None:
    service = k8s_object("Service", objects)
    namespace = load_yaml(K8S_DIR / "kustomization.yaml")["namespace"]
    (job,) = load_yaml(PROMETHEUS_K8S_CONFIG)["scrape_configs"]
    assert job["job_name"] == WORKER_JOB
    (discovery,) = job["dns_sd_configs"]
    assert discovery["names"] == [f"{service['metadata']['name']}.{namespace}.svc.cluster.local"]
    assert discovery["type"] == "A" and discovery["port"] == container["ports"][0]["containerPort"]


def test_every_pod_has_its_own_checkpoint_volume_and_restores_from_the_state_topic(
    objects: list[dict[str, Any]],
    workload: dict[str, Any],
    pod: dict[str, Any],
    container: dict[str, Any],
    config: dict[str, str],
    settings_by_env: dict[str, Any],
) -> None:
    """Partitions do not follow pods: per-pod volumes are only a cache when the state topic is on."""
    assert not [o for o in objects if o["kind"] == "PersistentVolumeClaim"], "no shared volume"
    (template,) = workload["spec"]["volumeClaimTemplates"]
    assert template["spec"]["accessModes"] == ["ReadWriteOnce"]
    mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
    checkpoint_dir = _setting(config, settings_by_env, "SGT_CHECKPOINT_DIR")
    assert mounts[checkpoint_dir] == template["metadata"]["name"]
    assert template["metadata"]["name"] not in {v["name"] for v in pod["volumes"]}
    state_topic = settings_by_env["SGT_STATE_TOPIC"].parse(config["SGT_STATE_TOPIC"])
    assert state_topic not in (None, "auto")
    replicas = _setting(config, settings_by_env, "SGT_STATE_TOPIC_REPLICATION_FACTOR")
    in_sync = _setting(config, settings_by_env, "SGT_STATE_TOPIC_MIN_INSYNC_REPLICAS")
    assert 1 <= in_sync < replicas, "a state survives a broker's loss and writes go on without it"


def test_grace_period_covers_the_final_checkpoint(
    pod: dict[str, Any], config: dict[str, str], settings_by_env: dict[str, Any]
) -> None:
    shutdown = _setting(config, settings_by_env, "SGT_SHUTDOWN_TIMEOUT_SECONDS")
    assert pod["terminationGracePeriodSeconds"] >= shutdown + 10


def test_pod_runs_as_the_image_user_without_privileges(
    pod: dict[str, Any], container: dict[str, Any]
) -> None:
    image_user = parse_dockerfile(DOCKERFILE.read_text(encoding="utf-8"))[-1].last("USER").arguments
    uid, _, gid = image_user.partition(":")
    security = pod["securityContext"]
    assert security["runAsNonRoot"] is True
    assert (security["runAsUser"], security["runAsGroup"], security["fsGroup"]) == (
        int(uid),
        int(gid),
        int(gid),
    )
    own = container["securityContext"]
    assert own["allowPrivilegeEscalation"] is False and own["readOnlyRootFilesystem"] is True
    assert own["capabilities"] == {"drop": ["ALL"]}
    # a read-only root file system still needs a writable /tmp
    assert "/tmp" in {m["mountPath"] for m in container["volumeMounts"]}
