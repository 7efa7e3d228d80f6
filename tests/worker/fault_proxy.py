"""A loopback TCP proxy in front of a Kafka broker that can cut one client's produce path.

The broker advertises the proxy's address, so every connection of every client goes through it. While
:meth:`FaultProxy.hold` is in force, a connection that sends a Produce request (API key 0) carrying
the given ``client.id`` stops being forwarded in both directions, as if the broker had gone away for
that producer; the same client's consumer connections (Fetch, group requests) go on. :meth:`release`
ends it: the held connections are closed and the client reconnects to a working broker.

Kafka requests are framed as a 4-byte big-endian size, then the request header: API key (int16), API
version (int16), correlation id (int32), client id (int16 length, then the bytes).
"""

from __future__ import annotations

import contextlib
import socket
import struct
import threading

PRODUCE = 0


class FaultProxy:
    """Forwards ``127.0.0.1:port`` to ``127.0.0.1:target_port``; see the module docstring."""

    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = int(self._listener.getsockname()[1])
        self._lock = threading.Lock()
        self._held_client: bytes | None = None
        self._held: list[socket.socket] = []
        self._open: list[socket.socket] = []
        self._closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def hold(self, client_id: str) -> None:
        with self._lock:
            self._held_client = client_id.encode()

    def release(self) -> None:
        with self._lock:
            self._held_client = None
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
                upstream = socket.create_connection(("127.0.0.1", self.target_port))
            except OSError:
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
            wanted = self._held_client
        if wanted is None or len(frame) < 14:
            return False
        api_key, _version, _correlation, id_len = struct.unpack(">hhih", frame[4:14])
        return api_key == PRODUCE and frame[14 : 14 + max(id_len, 0)] == wanted
