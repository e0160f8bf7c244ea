"""A server that speaks only the first steps of MySQL's protocol: it greets a client, asks it to log in with
``mysql_clear_password`` (the password in clear text) and records every byte the client sends, then refuses
the login. Tests point real clients (pymysql, mysqlclient, connectorx, python-mysql-replication, Spark) at it
and check that no password ever reaches it: the part of the protocol under test is the client's, the server
here is the hostile peer a SQL author could name, or a real server's clear-text plugin over plain TCP.

It is not a mock of MySQL: nothing here answers a query.
"""

from __future__ import annotations

import contextlib
import socket
import struct
import threading
from collections.abc import Iterator

# capability flags (MySQL's CLIENT_*): long password, found rows, long flag, connect with db, protocol 41,
# transactions, secure connection, plugin auth, connect attrs, lenenc client data, deprecate EOF
_CAPS = (0x1 | 0x2 | 0x4 | 0x8 | 0x200 | 0x2000 | 0x8000 | 0x80000 | 0x100000 | 0x200000 | 0x1000000)


def _packet(seq: int, payload: bytes) -> bytes:
    return struct.pack("<I", len(payload))[:3] + bytes([seq & 0xFF]) + payload


def _greeting(plugin: bytes) -> bytes:
    salt = b"abcdefgh" + b"ijklmnopqrst"
    return (b"\x0a" + b"8.0.99-fake\x00" + struct.pack("<I", 7) + salt[:8] + b"\x00"
            + struct.pack("<H", _CAPS & 0xFFFF) + b"\x2d" + struct.pack("<H", 2)
            + struct.pack("<H", _CAPS >> 16) + bytes([21]) + b"\x00" * 10 + salt[8:] + b"\x00"
            + plugin + b"\x00")


def _error(code: int, message: str) -> bytes:
    return b"\xff" + struct.pack("<H", code) + b"#28000" + message.encode()


class ClearTextServer:
    """Listens on 127.0.0.1 (a free port); ``received`` holds every byte each connection sent.

    ``initial``: the plugin named in the greeting. With ``mysql_native_password`` the client answers with a
    scramble and the server then switches it to ``mysql_clear_password`` (an auth switch request); with
    ``mysql_clear_password`` the client is asked for clear text from the start (and switched to it when it
    answers with another plugin).
    """

    def __init__(self, initial: bytes = b"mysql_native_password") -> None:
        self.initial = initial
        self.received: list[bytes] = []
        self.connections = 0
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind(("127.0.0.1", 0))
        self._sock.listen(16)
        self.port = self._sock.getsockname()[1]
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def seen(self, secret: str) -> bool:
        """Whether any connection sent ``secret``'s bytes (anywhere in what it sent)."""
        with self._lock:
            return any(secret.encode() in data for data in self.received)

    def _serve(self) -> None:
        self._sock.settimeout(0.2)
        while not self._stop.is_set():
            try:
                conn, _ = self._sock.accept()
            except OSError:
                continue
            threading.Thread(target=self._handle, args=(conn,), daemon=True).start()

    def _handle(self, conn: socket.socket) -> None:
        with self._lock:
            self.connections += 1
            index = len(self.received)
            self.received.append(b"")
        conn.settimeout(5)

        def read_packet() -> tuple[int, bytes] | None:
            head = b""
            while len(head) < 4:
                chunk = conn.recv(4 - len(head))
                if not chunk:
                    return None
                head += chunk
            size = int.from_bytes(head[:3], "little")
            body = b""
            while len(body) < size:
                chunk = conn.recv(size - len(body))
                if not chunk:
                    return None
                body += chunk
            with self._lock:
                self.received[index] += head + body
            return head[3], body

        with contextlib.suppress(OSError), conn:
            conn.sendall(_packet(0, _greeting(self.initial)))
            got = read_packet()
            if got is None:
                return
            seq = got[0] + 1
            if b"mysql_clear_password\x00" not in got[1]:  # the client answered with another plugin: switch it
                conn.sendall(_packet(seq, b"\xfe" + b"mysql_clear_password\x00"))
                seq += 1
            # the client's answer (its password in clear text, if it gives it), or it hangs up
            got = read_packet()
            if got is not None:
                seq = got[0] + 1
            conn.sendall(_packet(seq, _error(1045, "Access denied (fake server)")))
            # drain whatever else comes, until the client closes
            while read_packet() is not None:
                pass

    def close(self) -> None:
        self._stop.set()
        self._sock.close()
        self._thread.join(timeout=5)


@contextlib.contextmanager
def clear_text_server(initial: bytes = b"mysql_native_password") -> Iterator[ClearTextServer]:
    srv = ClearTextServer(initial)
    try:
        yield srv
    finally:
        srv.close()
