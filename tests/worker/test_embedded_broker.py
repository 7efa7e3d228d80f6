"""The embedded Tansu broker and the session broker fixture, against real processes over loopback."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient

from tests.kafka_util import CONSUMER_SETTINGS, end_offsets, produce_records, read_all
from worker.devtools.embedded_broker import (
    BrokerStartError,
    TansuBroker,
    create_topics,
    free_port,
    start_tansu,
)

pytestmark = pytest.mark.kafka

ROOT = Path(__file__).resolve().parents[2]


def partition_counts(bootstrap: str) -> dict[str, int]:
    metadata = AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=10)
    return {name: len(topic.partitions) for name, topic in metadata.topics.items()}


def test_start_serves_metadata_on_loopback_and_close_stops_the_process(tmp_path: Path) -> None:
    log = tmp_path / "tansu.log"
    broker = start_tansu(log_path=log)
    try:
        host, port = broker.bootstrap_servers.split(":")
        assert (host, int(port)) == ("127.0.0.1", broker.port)
        assert broker.running
        assert isinstance(partition_counts(broker.bootstrap_servers), dict)
    finally:
        broker.close()
    assert not broker.running
    assert broker.process.returncode is not None
    broker.close()  # idempotent
    assert log.exists()


def test_context_manager_and_explicit_port() -> None:
    port = free_port()
    with start_tansu(port=port) as broker:
        assert isinstance(broker, TansuBroker)
        assert broker.bootstrap_servers == f"127.0.0.1:{port}"
        create_topics(broker.bootstrap_servers, ["t"], 2)
        assert partition_counts(broker.bootstrap_servers)["t"] == 2
    assert not broker.running
    with socket.socket() as probe:
        assert probe.connect_ex(("127.0.0.1", port)) != 0, "port still served after close"


def test_port_in_use_raises_and_leaves_no_process(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(BrokerStartError):
            start_tansu(port=port, log_path=tmp_path / "tansu.log")
    assert "in use" in (tmp_path / "tansu.log").read_text(errors="replace").lower()


def test_a_port_served_by_another_broker_is_not_mistaken_for_ours() -> None:
    with start_tansu() as other:
        with pytest.raises(BrokerStartError):
            start_tansu(port=other.port)
        assert other.running
        metadata = AdminClient({"bootstrap.servers": other.bootstrap_servers}).list_topics(timeout=10)
        assert metadata.cluster_id == other.cluster_id


def test_create_topics_is_idempotent_and_keeps_existing(kafka_bootstrap: str) -> None:
    create_topics(kafka_bootstrap, ["idem-a", "idem-b"], 3)
    create_topics(kafka_bootstrap, ["idem-a", "idem-c"], 5)
    create_topics(kafka_bootstrap, [], 1)
    counts = partition_counts(kafka_bootstrap)
    assert (counts["idem-a"], counts["idem-b"], counts["idem-c"]) == (3, 3, 5)


def test_topic_factory_and_unique_group_are_unique(
    kafka_bootstrap: str, topic_factory: Callable[..., dict[str, str]], unique_group: Callable[[], str]
) -> None:
    first = topic_factory(4, "features", "labels")
    second = topic_factory(1, "features")
    assert set(first) == {"features", "labels"}
    assert first["features"] != second["features"]
    assert first["features"].startswith("features-")
    counts = partition_counts(kafka_bootstrap)
    assert (counts[first["features"]], counts[first["labels"]], counts[second["features"]]) == (4, 4, 1)
    assert len({unique_group() for _ in range(100)}) == 100


def test_produce_then_read_back_in_order_with_keys(
    kafka_bootstrap: str, topic_factory: Callable[..., dict[str, str]]
) -> None:
    topic = topic_factory(4, "data")["data"]
    records = [(f"k{i % 7}".encode(), f"v{i}".encode()) for i in range(700)]
    assert produce_records(kafka_bootstrap, topic, records) == 700
    messages = read_all(kafka_bootstrap, topic, 4, expect=700)
    assert sorted(m.value() for m in messages) == sorted(v for _, v in records)
    by_key: dict[bytes, set[int]] = {}
    for m in messages:
        by_key.setdefault(m.key(), set()).add(m.partition())
    assert all(len(parts) == 1 for parts in by_key.values()), "one key spread over partitions"
    for key in by_key:
        in_key = [m.value() for m in messages if m.key() == key]
        assert in_key == [v for k, v in records if k == key], "order within a key changed"


def test_explicit_partition_and_end_offsets_by_reading(
    kafka_bootstrap: str, topic_factory: Callable[..., dict[str, str]]
) -> None:
    topic = topic_factory(3, "data")["data"]
    produce_records(kafka_bootstrap, topic, [(None, b"a")] * 5, partition=2)
    produce_records(kafka_bootstrap, topic, [(b"k", b"b")] * 3, partition=0)
    assert end_offsets(kafka_bootstrap, topic, 3, idle_s=1.0) == {0: 3, 1: 0, 2: 5}


def test_fast_group_join_gets_an_assignment(
    kafka_bootstrap: str, topic_factory: Callable[..., dict[str, str]], unique_group: Callable[[], str]
) -> None:
    topic = topic_factory(2, "data")["data"]
    produce_records(kafka_bootstrap, topic, [(b"k", b"v")])
    consumer = Consumer(
        {
            "bootstrap.servers": kafka_bootstrap,
            "group.id": unique_group(),
            "auto.offset.reset": "earliest",
            **CONSUMER_SETTINGS,
        }
    )
    try:
        consumer.subscribe([topic])
        seen = []
        for _ in range(200):  # at most 20 s; a join takes about 3 s with the fast settings
            seen = [m for m in consumer.consume(10, 0.1) if m.error() is None]
            if seen:
                break
        assert [m.value() for m in seen] == [b"v"]
        assignment = {tp.partition for tp in consumer.assignment()}
        assert assignment == {0, 1}
        assert all(isinstance(tp, TopicPartition) for tp in consumer.assignment())
    finally:
        consumer.close()


PROBE = """
import os
from confluent_kafka.admin import AdminClient


def test_probe(kafka_bootstrap, kafka_bootstrap_again):
    assert kafka_bootstrap == kafka_bootstrap_again  # one broker per session
    if not os.environ.get("KAFKA_BOOTSTRAP_SERVERS"):
        AdminClient({"bootstrap.servers": kafka_bootstrap}).list_topics(timeout=10)
    with open(os.environ["PROBE_OUT"], "w") as out:
        out.write(kafka_bootstrap)


import pytest


@pytest.fixture(scope="session")
def kafka_bootstrap_again(kafka_bootstrap):
    return kafka_bootstrap
"""


def run_fixture_probe(tmp_path: Path, bootstrap_env: str | None) -> str:
    """Run a one-test pytest session that uses this suite's conftest as a plugin; return its bootstrap."""
    (tmp_path / "test_probe.py").write_text(PROBE, encoding="utf-8")
    (tmp_path / "pytest.ini").write_text("[pytest]\n", encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if k != "KAFKA_BOOTSTRAP_SERVERS"}
    env["PROBE_OUT"] = str(tmp_path / "bootstrap.txt")
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])  # the `tests` package
    if bootstrap_env is not None:
        env["KAFKA_BOOTSTRAP_SERVERS"] = bootstrap_env
    command = [
        sys.executable,
        "-m",
        "pytest",
        "-q",
        "-p",
        "tests.conftest",
        "-c",
        str(tmp_path / "pytest.ini"),
    ]
    done = subprocess.run(
        [*command, "--rootdir", str(tmp_path), str(tmp_path / "test_probe.py")],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    return (tmp_path / "bootstrap.txt").read_text(encoding="utf-8")


def test_fixture_prefers_the_configured_cluster(tmp_path: Path) -> None:
    assert run_fixture_probe(tmp_path, "127.0.0.1:1") == "127.0.0.1:1"


def test_fixture_falls_back_to_tansu_and_stops_it_at_session_end(tmp_path: Path) -> None:
    bootstrap = run_fixture_probe(tmp_path, None)
    host, port = bootstrap.split(":")
    assert host == "127.0.0.1"
    with socket.socket() as probe:
        assert probe.connect_ex((host, int(port))) != 0, "the session's broker outlived the session"


@pytest.mark.skipif(sys.platform != "linux", reason="parent-death signal is Linux only")
def test_broker_dies_with_a_killed_parent(tmp_path: Path) -> None:
    script = (
        "import sys, time\n"
        "from worker.devtools.embedded_broker import start_tansu\n"
        "broker = start_tansu()\n"
        "print(broker.port, broker.process.pid, flush=True)\n"
        "time.sleep(120)\n"
    )
    parent = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        assert parent.stdout is not None
        port, pid = (int(v) for v in parent.stdout.readline().split())
    finally:
        parent.kill()
        parent.wait(10)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and Path(f"/proc/{pid}").exists() and not zombie(pid):
        time.sleep(0.05)
    assert not Path(f"/proc/{pid}").exists() or zombie(pid), "orphaned broker still running"
    with socket.socket() as probe:
        assert probe.connect_ex(("127.0.0.1", port)) != 0


def zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] == "Z"
    except OSError:
        return False
