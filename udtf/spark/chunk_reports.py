"""A stream's chunk watermarks, handed from the executors back to the driver, which records them.

An executor that finished a chunk (its rows handed on to Spark) knows the chunk's watermarks; the state dir
that keeps them may be on the driver's disk alone (a cluster's executors see none of it). So the executor
sends the record to the query's driver, which writes it (first wins, docs/DESIGN.md §5) and answers with the
record now stored; only then does the task go on. Before it reads, a task asks the driver which of its chunks
are recorded already (a task Spark runs again after a failure corrects such a chunk to its first watermark,
as a re-read must: C5). The driver side lives in the process that plans the stream
(Spark keeps it for the query's life); every snapshot partition carries where it listens (:class:`ReportTo`).

One message each way, a line of JSON: the request and its HMAC-SHA256 under a key made for this driver
process (the key travels in the partition, never on the wire, so nothing else can record a chunk; a record
sent again is stored once). The driver listens on every interface, on a port chosen by the system, and
gives its addresses in turn (option ``driver_host`` first, else the addresses of its host name, its
outward address, and loopback); the executor uses the first it reaches.

>>> key = b"k" * 32
>>> ask = {"record": {"database": "shop", "index": 0}}
>>> sealed = seal(key, ask)
>>> opened(key, sealed) == ask, opened(b"x" * 32, sealed)
(True, None)
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import os
import secrets
import socket
import socketserver
import threading
from dataclasses import dataclass
from typing import Any

from mysql_cdc.chunks import Chunk, ChunkRecord
from mysql_cdc.errors import StateError
from mysql_cdc.ids import TableId
from mysql_cdc.offsets import BinlogOffset

CONNECT_SECONDS = 3.0  # per address tried
REPLY_SECONDS = 120.0  # the driver writes one small file; a slow store (an object store) may take a while
# a line's bound: a task's question names each of its chunks, the answer gives each recorded one's high
# watermark (a GTID set may take a kilobyte), and a batch may put thousands of chunks in one task
MAX_LINE = 64 << 20


def seal(key: bytes, request: dict[str, Any]) -> bytes:
    """The message for ``request``: one line of JSON with its MAC."""
    body = json.dumps(request, sort_keys=True)
    mac = hmac.new(key, body.encode(), hashlib.sha256).hexdigest()
    return json.dumps({"request": body, "mac": mac}).encode() + b"\n"


def opened(key: bytes, line: bytes) -> dict[str, Any] | None:
    """The request of a message sealed with ``key``; ``None`` for any other line."""
    try:
        msg = json.loads(line)
        body, mac = str(msg["request"]), str(msg["mac"])
        expected = hmac.new(key, body.encode(), hashlib.sha256).hexdigest()
    except (ValueError, KeyError, TypeError):  # not JSON, not ours, a lone surrogate
        return None
    if not hmac.compare_digest(expected, mac.encode("ascii", "replace").decode()):
        return None
    request = json.loads(body)
    return request if isinstance(request, dict) else None


@dataclass(frozen=True)
class ReportTo:
    """Where an executor hands a chunk record back: the driver's addresses, tried in turn, its port, the key."""

    hosts: tuple[str, ...]
    port: int
    key: bytes

    def __repr__(self) -> str:  # the key is not for logs
        return f"ReportTo(hosts={self.hosts!r}, port={self.port})"


def own_addresses(given: str | None = None) -> tuple[str, ...]:
    """Addresses of this host for an executor to try, best first: ``given`` (option ``driver_host``),
    ``SPARK_LOCAL_IP``, the address a connection outwards would leave from (no packet is sent), those of the
    host name, the host name itself, loopback."""
    out: list[str] = []
    if given:
        out.append(given)
    if os.environ.get("SPARK_LOCAL_IP"):
        out.append(os.environ["SPARK_LOCAL_IP"])
    with contextlib.suppress(OSError), socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.connect(("192.0.2.1", 9))  # TEST-NET-1: a route lookup only
        out.append(s.getsockname()[0])
    with contextlib.suppress(OSError):
        out += socket.gethostbyname_ex(socket.gethostname())[2]
    with contextlib.suppress(OSError):
        out.append(socket.getfqdn())
    out.append("127.0.0.1")
    return tuple(dict.fromkeys(a for a in out if a and a != "0.0.0.0"))


class ChunkReports:
    """The driver's side: a small server that answers which chunks ``store`` holds, and records the chunks
    executors hand back into it."""

    def __init__(self, store: Any, driver_host: str | None = None) -> None:
        self.store = store
        self.key = secrets.token_bytes(32)
        key, owner = self.key, self

        class Handler(socketserver.StreamRequestHandler):
            timeout = REPLY_SECONDS  # a peer that sends nothing does not hold a thread

            def handle(self) -> None:
                request = opened(key, self.rfile.readline(MAX_LINE))
                if request is None:
                    return  # not ours: no answer
                try:
                    answer = owner.answer(request)
                except Exception as e:  # said to the executor, whose task fails with it
                    answer = {"error": f"{type(e).__name__}: {e}"}
                self.wfile.write(json.dumps(answer).encode() + b"\n")

        class Server(socketserver.ThreadingTCPServer):
            daemon_threads = True
            allow_reuse_address = True

        self._server = Server(("0.0.0.0", 0), Handler)
        self.to = ReportTo(own_addresses(driver_host), int(self._server.server_address[1]), self.key)
        self._thread = threading.Thread(target=self._server.serve_forever, name="mysql-cdc-chunk-reports",
                                        daemon=True)
        self._thread.start()

    def answer(self, request: dict[str, Any]) -> dict[str, Any]:
        if "record" in request:
            return {"stored": self.store.record_chunk(ChunkRecord.from_dict(request["record"])).to_dict()}
        highs = {}
        for db, table, index in request["recorded"]:
            rec = self.store.chunk_record(TableId(str(db), str(table)), int(index))
            if rec is not None:
                highs[rec.id] = rec.high.to_dict()
        return {"highs": highs}

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()


_REACHED: dict[tuple[tuple[str, ...], int], str] = {}  # the address that answered, per driver (an executor's)


def _ask(to: ReportTo, request: dict[str, Any], what: str) -> dict[str, Any]:
    """The driver's answer to ``request`` (trying its addresses in turn, the one that answered before first)."""
    known = _REACHED.get((to.hosts, to.port))
    hosts = ([known] if known else []) + [h for h in to.hosts if h != known]
    tried: list[str] = []
    for host in hosts:
        try:
            conn = socket.create_connection((host, to.port), timeout=CONNECT_SECONDS)
        except OSError as e:
            tried.append(f"{host}: {e}")
            continue
        with conn:
            conn.settimeout(REPLY_SECONDS)
            try:
                conn.sendall(seal(to.key, request))
                answer = json.loads(conn.makefile("rb").readline(MAX_LINE) or b"{}")
            except (OSError, ValueError) as e:
                raise StateError(f"the stream's driver at {host}:{to.port} did not answer ({what}): {e}; the task "
                                 "fails and Spark runs it again") from e
        _REACHED[(to.hosts, to.port)] = host
        if "error" in answer or not answer:
            raise StateError(f"the stream's driver could not answer ({what}): {answer.get('error', 'no answer')}")
        return dict(answer)
    raise StateError(f"this executor ({socket.gethostname()!r}) cannot reach the stream's driver ({what}; port "
                     f"{to.port}; tried {'; '.join(tried)}): set option driver_host to an address of the driver "
                     "that executors reach, and let them connect to it")


def report(to: ReportTo, rec: ChunkRecord) -> ChunkRecord:
    """Hand ``rec`` to the driver and return the record it stored (the first of the chunk's records)."""
    answer = _ask(to, {"record": rec.to_dict()}, f"recording chunk {rec.id!r}")
    return ChunkRecord.from_dict(answer["stored"])


def recorded_highs(to: ReportTo, chunks: tuple[Chunk, ...] | list[Chunk]) -> dict[str, BinlogOffset]:
    """The high watermark the driver holds for each of ``chunks`` recorded already, by chunk id."""
    answer = _ask(to, {"recorded": [[c.table.database, c.table.table, c.index] for c in chunks]},
                  "asking for recorded chunks")
    return {str(k): BinlogOffset.from_dict(v) for k, v in answer["highs"].items()}
