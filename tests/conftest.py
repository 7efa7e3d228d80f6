"""Shared fixtures: one real Kafka-protocol broker per test session, unique topics and group ids.

The broker is chosen in this order: ``KAFKA_BOOTSTRAP_SERVERS`` when set; else a testcontainers
Kafka container when a Docker engine answers; else the embedded Tansu broker on a free loopback port.
Tests that use it are marked ``kafka`` (done automatically for any test that requests
``kafka_bootstrap``), so ``pytest -m "not kafka"`` runs without a broker.
"""

from __future__ import annotations

import contextlib
import os
import uuid
from collections.abc import Callable, Iterator

import pytest
from hypothesis import settings

from tests.kafka_util import FAST_CLIENT_SETTINGS

# No per-example deadline for hypothesis: `make test` runs four processes on as few as two cores, where
# a 200 ms deadline is a timing assertion that fails by load alone (speed is measured in tests/bench)
settings.register_profile("sgt-suite", deadline=None)
settings.load_profile("sgt-suite")

__all__ = ["FAST_CLIENT_SETTINGS"]

DOCKER_PING_TIMEOUT_S = 2


def _docker_kafka(stack: contextlib.ExitStack) -> str | None:
    """Bootstrap address of a fresh Kafka container, or None when no Docker engine answers quickly."""
    try:
        import docker

        docker.from_env(timeout=DOCKER_PING_TIMEOUT_S).ping()
    except Exception:  # no client library, no socket, no daemon: all mean "no Docker here"
        return None
    from testcontainers.community.kafka import KafkaContainer

    container = stack.enter_context(KafkaContainer().with_kraft())
    return str(container.get_bootstrap_server())


def _tansu(stack: contextlib.ExitStack, log_path: os.PathLike[str]) -> str:
    from worker.devtools.embedded_broker import start_tansu

    return stack.enter_context(start_tansu(log_path=log_path)).bootstrap_servers


@pytest.fixture(scope="session")
def kafka_bootstrap(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """``host:port`` of the session's broker; a broker started here is stopped at session end."""
    configured = os.environ.get("KAFKA_BOOTSTRAP_SERVERS")
    if configured:
        yield configured
        return
    with contextlib.ExitStack() as stack:
        bootstrap = _docker_kafka(stack) or _tansu(stack, tmp_path_factory.mktemp("broker") / "tansu.log")
        yield bootstrap


@pytest.fixture
def topic_factory(kafka_bootstrap: str) -> Callable[..., dict[str, str]]:
    """``make(partitions, *kinds)`` creates one fresh topic per kind and returns ``{kind: topic name}``.

    >>> topics = topic_factory(4, "features", "labels")   # doctest: +SKIP
    >>> topics["features"]                                # doctest: +SKIP
    'features-3f9c0a1b2c'
    """
    from worker.devtools.embedded_broker import create_topics

    def make(partitions: int, *kinds: str) -> dict[str, str]:
        suffix = uuid.uuid4().hex[:10]
        names = {kind: f"{kind}-{suffix}" for kind in kinds}
        create_topics(kafka_bootstrap, list(names.values()), partitions)
        return names

    return make


@pytest.fixture
def unique_group() -> Callable[[], str]:
    """A callable that returns a consumer group id never used before in this session."""

    def make() -> str:
        return f"test-group-{uuid.uuid4().hex[:12]}"

    return make


def pytest_configure(config: pytest.Config) -> None:
    """With xdist's processes (``-n``), load sgt's compiled kernels once, here in the controlling
    process, before the processes start: what the worker preloads, and the Mondrian forest's kernels (a
    default boosted classifier's, which the worker never runs). numba caches what it compiles; on a
    fresh checkout each process would otherwise compile the same kernels at the same time
    (tests/worker/test_boosted_model.py preloads them as it is collected). tests/sgt/test_contract.py
    and test_fused_kernels.py under ``-n 4`` on 2 cores, from an empty cache, took 2 min 47 s (5 min 18 s
    of CPU) without this and 2 min 34 s (4 min 23 s) with it; from a full cache, 1 min 55 s (3 min 41 s)."""
    if hasattr(config, "workerinput") or not config.getoption("numprocesses", None):
        return
    from sgt import BoostedClassifier, kernels
    from worker.core.sgt_models import preload

    preload()
    if kernels.ENABLED:
        BoostedClassifier(warm_up=20).learn_many(
            [[i % 7, i % 3] for i in range(200)], [i % 2 for i in range(200)]
        )


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark every test that needs the broker as ``kafka``, so that it can be deselected."""
    for item in items:
        if "kafka_bootstrap" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.kafka)
