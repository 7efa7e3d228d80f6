"""A loopback TCP proxy in front of a Kafka broker that can cut one client's produce path.

The broker advertises the proxy's address, so every connection of every client goes through it. While
:meth:`FaultProxy.hold` is in force, a connection that sends a Produce request (API key 0) carrying
the given ``client.id`` (and, when a topic is given, writing to that topic) stops being forwarded in
both directions, as if the broker had gone away for that producer; the same client's consumer
connections (Fetch, group requests) and its other producers go on. :meth:`release` ends it: the held
connections are closed and the client reconnects to a working broker. :func:`proxied_broker_fixture`
starts a broker of its own behind a proxy.

Kafka requests are framed as a 4-byte big-endian size, then the request header: API key (int16), API
version (int16), correlation id (int32), client id (int16 length, then the bytes), and from Produce
version 9 on (the "flexible" versions) tagged fields. The Produce body follows: transactional id,
acks, timeout, then the topics written, each a name and its partitions' record batches; flexible
versions write lengths and counts as unsigned varints of the value plus one.
"""

from __future__ import annotations

import contextlib
import socket
import struct
import subprocess
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from worker.devtools.embedded_broker import broker_binary, free_port

PRODUCE = 0
_TRANSACTIONAL_PRODUCE = 3  # the first Produce version with a transactional id (idempotence needs it)
_FLEXIBLE_PRODUCE = 9  # the first Produce version with compact strings and tagged fields
_TOPIC_IDS_PRODUCE = 13  # from here on a Produce request names its topics by id, not by name


class FaultProxy:
    """Forwards ``127.0.0.1:port`` to ``127.0.0.1:target_port``; see the module docstring."""

    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = int(self._listener.getsockname()[1])
        self._lock = threading.Lock()
        self._held_client: bytes | None = None
        self._held_topic: bytes | None = None  # None: any Produce request of the client
        self._held: list[socket.socket] = []
        self._open: list[socket.socket] = []
        self._closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def hold(self, client_id: str, topic: str | None = None) -> None:
        """Hold each connection that produces with ``client_id`` (to ``topic`` only, when given)."""
        with self._lock:
            self._held_client = client_id.encode()
            self._held_topic = None if topic is None else topic.encode()

    def release(self) -> None:
        with self._lock:
            self._held_client = self._held_topic = None
            held, self._held = self._held, []
        for sock in held:
            with contextlib.suppress(OSError):
                sock.close()

    def close(self) -> None:
        self._closed = True
        with contextlib.suppress(OSError):
            self._listener.close()
        with self._lock:
            socks = self._open + self._held
        for sock in socks:
            with contextlib.suppress(OSError):
                sock.close()

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                continue
            try:
                upstream = socket.create_connection(("127.0.0.1", self.target_port))
            except OSError:  # the broker is not listening (yet, or any more)
                client.close()
                continue
            with self._lock:
                self._open += [client, upstream]
            held = threading.Event()
            threading.Thread(target=self._requests, args=(client, upstream, held), daemon=True).start()
            threading.Thread(target=self._responses, args=(upstream, client, held), daemon=True).start()

    def _requests(self, client: socket.socket, upstream: socket.socket, held: threading.Event) -> None:
        buffer = b""
        try:
            while True:
                data = client.recv(65536)
                if not data:
                    break
                if held.is_set():
                    continue  # the broker is "away" for this connection: nothing goes through
                buffer += data
                while len(buffer) >= 4:
                    (size,) = struct.unpack(">i", buffer[:4])
                    if len(buffer) < 4 + size:
                        break
                    frame, buffer = buffer[: 4 + size], buffer[4 + size :]
                    if self._holds(frame):
                        held.set()
                        with self._lock:
                            self._held += [client, upstream]
                        buffer = b""
                        break
                    upstream.sendall(frame)
        except OSError:
            pass
        for sock in (client, upstream):
            with contextlib.suppress(OSError):
                sock.close()

    def _responses(self, upstream: socket.socket, client: socket.socket, held: threading.Event) -> None:
        try:
            while True:
                data = upstream.recv(65536)
                if not data:
                    break
                if not held.is_set():
                    client.sendall(data)
        except OSError:
            pass
        for sock in (client, upstream):
            with contextlib.suppress(OSError):
                sock.close()

    def _holds(self, frame: bytes) -> bool:
        with self._lock:
            wanted, topic = self._held_client, self._held_topic
        if wanted is None or len(frame) < 14:
            return False
        api_key, version, _correlation, id_len = struct.unpack(">hhih", frame[4:14])
        if api_key != PRODUCE or frame[14 : 14 + max(id_len, 0)] != wanted:
            return False
        return topic is None or topic in produce_topics(frame[14 + max(id_len, 0) :], version)


def produce_topics(rest: bytes, version: int) -> list[bytes]:
    """The topic names a Produce request of ``version`` writes to, from what follows its client id."""
    if not _TRANSACTIONAL_PRODUCE <= version < _TOPIC_IDS_PRODUCE:
        raise ValueError(f"Produce v{version}: the proxy reads the topic names of v3 to v12")
    frame = _Frame(rest)
    flexible = version >= _FLEXIBLE_PRODUCE
    if flexible:
        frame.tags()
    frame.string(flexible)  # transactional id
    frame.skip(6)  # acks (int16), timeout (int32)
    topics = []
    for _ in range(frame.count(flexible)):
        topics.append(frame.string(flexible))
        for _ in range(frame.count(flexible)):
            frame.skip(4)  # partition index
            frame.skip(max(frame.varint() - 1 if flexible else frame.int32(), 0))  # record batches
            if flexible:
                frame.tags()
        if flexible:
            frame.tags()
    return topics


class _Frame:
    """A cursor over the bytes of a request, reading Kafka's primitive types."""

    def __init__(self, data: bytes) -> None:
        self.data, self.pos = data, 0

    def skip(self, n: int) -> None:
        self.pos += n

    def int16(self) -> int:
        (value,) = struct.unpack_from(">h", self.data, self.pos)
        self.pos += 2
        return int(value)

    def int32(self) -> int:
        (value,) = struct.unpack_from(">i", self.data, self.pos)
        self.pos += 4
        return int(value)

    def varint(self) -> int:
        """An unsigned varint: seven bits a byte, least significant first."""
        value = shift = 0
        while True:
            byte = self.data[self.pos]
            self.pos += 1
            value |= (byte & 0x7F) << shift
            if byte < 0x80:
                return value
            shift += 7

    def string(self, compact: bool) -> bytes:
        """A (nullable) string; compact ones store the length plus one, 0 for null."""
        length = self.varint() - 1 if compact else self.int16()
        value = self.data[self.pos : self.pos + max(length, 0)]
        self.pos += max(length, 0)
        return value

    def count(self, compact: bool) -> int:
        return max(self.varint() - 1 if compact else self.int32(), 0)

    def tags(self) -> None:
        for _ in range(self.varint()):
            self.varint()  # tag
            self.skip(self.varint())  # its data


@pytest.fixture(name="proxied_broker")
def proxied_broker_fixture(tmp_path: Path) -> Iterator[tuple[str, FaultProxy]]:
    """A broker for one test that advertises a :class:`FaultProxy`: every connection goes through it.

    Yields the bootstrap address (the proxy's) and the proxy; import it into a test module to use it.
    """
    broker_port = free_port()
    proxy = FaultProxy(broker_port)
    command = [
        broker_binary(),
        "broker",
        "--cluster-id",
        f"sgt-proxy-{uuid.uuid4().hex[:8]}",
        "--listener-url",
        f"tcp://127.0.0.1:{broker_port}",
        "--advertised-listener-url",
        f"tcp://127.0.0.1:{proxy.port}",
        "--storage-engine",
        "memory://tansu/",
    ]
    with open(tmp_path / "tansu.log", "ab") as log:
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    bootstrap = f"127.0.0.1:{proxy.port}"
    try:
        _wait_for_answer(bootstrap)
        yield bootstrap, proxy
    finally:
        proxy.close()
        process.terminate()
        process.wait(10)


def _wait_for_answer(bootstrap: str, timeout_s: float = 30.0) -> None:
    from confluent_kafka.admin import AdminClient

    deadline = time.monotonic() + timeout_s
    while True:
        try:
            AdminClient({"bootstrap.servers": bootstrap, "socket.timeout.ms": 1000}).list_topics(timeout=1.0)
            return
        except Exception:  # any failure means "not yet"
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)
