"""Durable records of finished chunks (their watermarks), readable and writable from driver and executors.

Layout under the state directory (a local path or a URI of a cluster's store such as ``s3://bucket/prefix``,
served by :mod:`.storage`)::

    chunks/<db>.<table>/<index>.json     one record per finished chunk, written once
    plans/<db>.<table>.json              a streaming query's chunk plan (:class:`PlanRecord`), written once
    schemas/<db>.<table>.json            a table's schema as the capture read it, written once (replaced only
                                         for a table about to be snapshotted again)
    capture.json                         options that shape the output's types, written once
    rounds/<n>.json                      a capture of many tables: the tables round n snapshots and where the
                                         binlog resumes after it, or the tables a DROP took out; written once
    retired/round-<n>/...                plans and chunk records of tables dropped in round n
    history/<db>.<table>/<file>@<pos>.json   the table's schema history: the schema a capture decodes it with
                                         from each point on (a snapshot, or a DDL statement followed), replaced
                                         when the stream decides that point again
    offsets/<stream>.json                the last committed offset of a stream, replaced atomically
    names/<short>.json                   the whole name behind a shortened file name (:func:`bounded`), once
    sync.json                            the id of the mirror this capture feeds (``{"id": uuid}``), once
    sync_query.json                      the streaming query that feeds it (``{"query": app id}``), once
    mirrors/<db>.<table>.json            where the sync created the table's mirror, once
    requests/<n>.json                    snapshots asked for while a capture runs (``mysql-cdc resnapshot``,
                                         ``verify --repair``): :class:`ResnapshotRequest`, written once; the round
                                         that takes one names it (``Round.request``); ``<n>.passed.json``: why
                                         the stream passed one over (none of its tables captured), once

Names are percent-encoded (:func:`table_file_name`); one longer than a file system takes (a pattern of a dozen
tables, a table name of 64 CJK characters) is shortened with a hash (:func:`bounded`), the whole kept in
``names/``; shorter ones are as earlier versions wrote them.

A chunk is recorded only after its rows were handed on (docs/DESIGN.md, contract C5). When a retried task
records a chunk again, the FIRST record stays: a re-read chunk sees a newer high watermark, and replaying the
binlog from the first one onto newer rows converges, while moving it forward could drop changes whose rows were
already emitted by the first attempt (docs/DESIGN.md §5). On a local path the first-wins write is atomic
(``link``); on other filesystems it is check-then-write, which is enough for one writer per chunk.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
import urllib.parse
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from mysql_cdc.chunks import Chunk, ChunkRecord, decode_key, encode_key, null_flags
from mysql_cdc.errors import ConfigError, StateError
from mysql_cdc.ids import TableId
from mysql_cdc.keyrange import KeyRange
from mysql_cdc.options import CdcOptions
from mysql_cdc.schema import SNAPSHOT, TableSchema
from mysql_cdc.state.history import HistoryEntry
from mysql_cdc.state.storage import parse_location


def tighten_umask() -> None:
    """Make the process's umask drop group and world write (at least 022), whatever it was: what delta-rs and
    Spark create from this process (mirror tables, checkpoints, outputs) is then never group- or world-writable.
    It only tightens; the state dir's own modes are set explicitly (:func:`make_dirs`, 0600 files)."""
    os.umask(os.umask(0o022) | 0o022)


def make_dirs(path: str, mode: int = 0o755, parents: int = 0o755) -> None:
    """``os.makedirs`` with the folder given ``mode`` and the parents it creates ``parents`` (0755 by default),
    whatever the umask (makedirs gives the parents 0777 & ~umask, and ``mkdir``'s mode is masked): nothing we
    write is group- or world-writable, and a private folder is private."""
    if not path or os.path.isdir(path):
        return
    parent = os.path.dirname(path)
    if parent != path:
        make_dirs(parent, parents, parents)
    try:
        os.mkdir(path, mode)
    except FileExistsError:
        return
    os.chmod(path, mode)


def _safe(part: str) -> str:
    """One name part as a file-name part: percent-encoded, ``.`` included, so that ``<db>.<table>`` is an
    injective encoding of the pair (tables `x.y`.z and x.`y.z` must not share a folder).

    >>> _safe("x.y") + "." + _safe("z"), _safe("x") + "." + _safe("y.z"), _safe("orders")
    ('x%2Ey.z', 'x.y%2Ez', 'orders')
    """
    return urllib.parse.quote(part, safe="").replace(".", "%2E")


# The longest name part we derive, before the ".json" a file adds: file systems take 255 bytes (ext4, xfs, S3
# keys' parts are longer), and an encoded part is ASCII.
NAME_MAX = 250
_KEPT = 150  # a shortened name: this much of the name, "=", and the SHA-256 of the whole (64 hex digits)


def bounded(encoded: str) -> str:
    """A name part (:func:`_safe` text) as a file name: itself up to :data:`NAME_MAX` characters (every name an
    earlier version could write), else its first 150 characters, ``=`` and the SHA-256 of the whole. ``=`` is
    never in an encoded part (``quote`` writes it ``%3D``), so a shortened name is never another's own.

    >>> bounded("shop.orders")
    'shop.orders'
    >>> long = _safe("tables " + "|".join(f"shop[.]customer_table_{i}" for i in range(12)))
    >>> len(long), len(bounded(long)), bounded(long)[150], bounded(long) == bounded(long + "x")
    (392, 215, '=', False)
    """
    if len(encoded) <= NAME_MAX:
        return encoded
    import hashlib

    return f"{encoded[:_KEPT]}={hashlib.sha256(encoded.encode()).hexdigest()}"


def table_file_name(table: TableId) -> str:
    """The file-name form of a table: ``<db>.<table>``, each part encoded by :func:`_safe`, :func:`bounded`."""
    return bounded(f"{_safe(table.database)}.{_safe(table.table)}")


def table_of_file_name(name: str) -> TableId | None:
    """The table a :func:`table_file_name` names (``None`` for another name, or a shortened one: the store
    keeps those whole under ``names/``).

    >>> table_of_file_name(table_file_name(TableId("x.y", "z/é"))), table_of_file_name("notes")
    (TableId(database='x.y', table='z/é'), None)
    """
    db, sep, table = name.partition(".")
    if not sep or "." in table or "=" in name:
        return None
    return TableId(urllib.parse.unquote(db), urllib.parse.unquote(table))


@dataclass(frozen=True)
class Round:
    """A round of a capture of many tables: the tables it snapshots and the binlog point where the stream
    resumes after it (``resume``, a :class:`ReadFrom` dict; ``None``: round 0, the first snapshot), or the
    tables a DDL statement takes out of the capture (``dropped``, with ``note`` saying why and where, and
    ``end``, the binlog point just after the statement). ``schema_at``: the binlog end just before the round's
    tables were described (a DDL after it may not show in their recorded schemas). ``request``: the highest
    :class:`ResnapshotRequest` this round took (its ``dropped`` tables are snapshotted again on request).
    ``ranges``: dropped tables of which only a key range left the capture (the next round reads that range again);
    ``range_high``: the watermark (a :class:`~mysql_cdc.offsets.BinlogOffset` dict) the chunks around them are
    recorded at, the point they left (with MySQL's executed GTID set there when the chunks' watermarks are GTIDs).

    >>> r = Round((TableId("shop", "a"),), {"file": "b.000002", "pos": 900}, schema_at={"file": "b.000002", "pos": 4})
    >>> Round.from_dict(r.to_dict()) == r, sorted(r.to_dict())
    (True, ['resume', 'schema_at', 'tables'])
    >>> k = Round((), None, (TableId("shop", "a"),), ranges=((TableId("shop", "a"), KeyRange(("id",), (1,), None)),),
    ...           range_high={"file": "b.1", "pos": 4, "gtids": None, "kind": "position"})
    >>> Round.from_dict(k.to_dict()) == k, k.range_of(TableId("shop", "a")).text()
    (True, 'id in [1, +inf)')
    """

    tables: tuple[TableId, ...]
    resume: dict[str, Any] | None = None
    dropped: tuple[TableId, ...] = ()
    note: str | None = None
    end: dict[str, Any] | None = None
    schema_at: dict[str, Any] | None = None
    request: int | None = None
    ranges: tuple[tuple[TableId, KeyRange], ...] = ()
    range_high: dict[str, Any] | None = None

    def range_of(self, table: TableId) -> KeyRange | None:
        """The key range of ``table`` this round took out (``None``: the whole table, or not taken out)."""
        return next((r for t, r in self.ranges if t == table), None)

    def to_dict(self) -> dict[str, Any]:
        """The round as kept in ``rounds/<n>.json`` (``json.dumps(..., sort_keys=True)`` of it)."""
        data: dict[str, Any] = {"tables": [[t.database, t.table] for t in self.tables], "resume": self.resume}
        if self.dropped:
            data.update(dropped=[[t.database, t.table] for t in self.dropped], note=self.note, end=self.end)
        if self.schema_at is not None:
            data["schema_at"] = self.schema_at
        if self.request is not None:
            data["request"] = self.request
        if self.ranges:
            data["ranges"] = [[t.database, t.table, r.to_dict()] for t, r in self.ranges]
            data["range_high"] = self.range_high
        return data

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Round:
        return cls(tuple(TableId(str(db), str(t)) for db, t in d["tables"]), d.get("resume"),
                   tuple(TableId(str(db), str(t)) for db, t in d.get("dropped", [])), d.get("note"), d.get("end"),
                   d.get("schema_at"), None if d.get("request") is None else int(d["request"]),
                   tuple((TableId(str(db), str(t)), KeyRange.from_dict(r)) for db, t, r in d.get("ranges", [])),
                   d.get("range_high"))


@dataclass(frozen=True)
class ResnapshotRequest:
    """Tables to snapshot again while the capture runs, asked for by ``mysql-cdc resnapshot`` or ``verify
    --repair`` (another process than the sync's): kept in ``requests/<n>.json``, taken by the stream at the next
    micro-batch it plans (a stopped one: at its start) as a round that resets the tables (their mirror is emptied
    in that batch, ``T`` rows) followed by the round that snapshots them, while the binlog waits.

    A request of one table may name a key ``range`` (:class:`~mysql_cdc.keyrange.KeyRange`): only the mirror's
    rows in it are deleted (a ``-R`` row) and read again; the rest of the table stays as it is.

    >>> r = ResnapshotRequest((TableId("shop", "a"),), "verify --repair", "2026-11-28T20:00:00Z")
    >>> ResnapshotRequest.from_dict(r.to_dict()) == r, r.to_dict()["tables"], "range" in r.to_dict()
    (True, [['shop', 'a']], False)
    >>> k = ResnapshotRequest((TableId("shop", "a"),), range=KeyRange(("id",), (10,), (20,)))
    >>> ResnapshotRequest.from_dict(k.to_dict()) == k, k.to_dict()["range"]["start"]
    (True, [10])
    """

    tables: tuple[TableId, ...]
    why: str = ""
    at: str = ""  # when it was asked for (UTC, ISO 8601)
    range: KeyRange | None = None

    def __post_init__(self) -> None:
        if self.range is not None and len(self.tables) != 1:
            raise ConfigError(f"a key range ({self.range.text()}) is read again in one table, not in "
                              f"{len(self.tables)}: ask for each table apart")

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"tables": [[t.database, t.table] for t in self.tables], "why": self.why, "at": self.at}
        if self.range is not None:
            d["range"] = self.range.to_dict()
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ResnapshotRequest:
        return cls(tuple(TableId(str(db), str(t)) for db, t in d["tables"]), str(d.get("why", "")),
                   str(d.get("at", "")), KeyRange.from_dict(d["range"]) if d.get("range") else None)


@dataclass(frozen=True)
class PlanRecord:
    """A table's chunk plan as the state dir keeps it (``plans/<db>.<table>.json``): its chunks; the rows each
    chunk was planned to hold and the table's average row length (0 and 0 in a plan of a version that did not
    record them, whose JSON has neither key); the indexes of chunks not read (a key range read again: the chunks
    around it), a key only when there are some. The JSON is a contract: a running capture's plan is read as
    it was written.

    >>> from mysql_cdc.chunks import Chunk
    >>> t = TableId("shop", "orders")
    >>> rec = PlanRecord(t, (Chunk(t, 0, ("id",), None, (100,)), Chunk(t, 1, ("id",), (100,), None)), 100, 42)
    >>> rec.to_dict()["chunks"][1], rec.sizes, PlanRecord.from_dict(t, rec.to_dict()) == rec
    ({'index': 1, 'key_columns': ['id'], 'start': '[100]', 'end': None}, (100, 42), True)
    """

    table: TableId
    chunks: tuple[Chunk, ...]
    rows_per_chunk: int = 0
    avg_row_bytes: int = 0
    outside: frozenset[int] = frozenset()

    @property
    def sizes(self) -> tuple[int, int] | None:
        """(rows per chunk, average row bytes), or ``None`` when the plan does not say."""
        return (self.rows_per_chunk, self.avg_row_bytes) if self.rows_per_chunk else None

    def to_dict(self) -> dict[str, Any]:
        rows = [{"index": c.index, "key_columns": list(c.key_columns), "start": encode_key(c.start),
                 "end": encode_key(c.end), **null_flags(c)} for c in self.chunks]
        sizes = {"rows_per_chunk": self.rows_per_chunk, "avg_row_bytes": self.avg_row_bytes} \
            if self.rows_per_chunk else {}
        more = {"outside": sorted(self.outside)} if self.outside else {}
        return {"chunks": rows, **sizes, **more}

    @classmethod
    def from_dict(cls, table: TableId, d: dict[str, Any]) -> PlanRecord:
        chunks = tuple(Chunk(table, int(r["index"]), tuple(r["key_columns"]), decode_key(r["start"]),
                             decode_key(r["end"]), bool(r.get("nullable", False)), bool(r.get("nulls", False)))
                       for r in d["chunks"])
        rows, avg = cls.sizes_of(d) or (0, 0)
        return cls(table, chunks, rows, avg, cls.outside_of(d))

    @staticmethod
    def sizes_of(d: dict[str, Any]) -> tuple[int, int] | None:
        """:attr:`sizes` of a plan's JSON, without decoding its chunks' bounds (the stream reader asks per batch)."""
        rows = int(d.get("rows_per_chunk") or 0)
        return (rows, int(d.get("avg_row_bytes") or 0)) if rows else None

    @staticmethod
    def outside_of(d: dict[str, Any]) -> frozenset[int]:
        """:attr:`outside` of a plan's JSON, without decoding its chunks' bounds."""
        return frozenset(int(i) for i in d.get("outside", ()))


class StateStore:
    def __init__(self, location: str) -> None:
        self.location = location
        where = parse_location(location)  # one rule for every store (state/storage.py); refuses what it cannot serve
        self._local = where.local
        self._made = False
        self._named: set[str] = set()
        self._root = where.path
        self._fs = where.filesystem()

    def missing(self, what: str) -> StateError:
        """The error for a record a running capture needs and does not find here."""
        return StateError(f"{what} is missing under {self.location!r}; the state_dir must stay with the checkpoint")

    def _chunk_dir(self, table: TableId, write: bool = False) -> str:
        return f"{self._root.rstrip('/')}/chunks/{self._table(table, write)}"

    def _name(self, encoded: str, write: bool = False) -> str:
        """An encoded name part as its file name (:func:`bounded`); when writing, a shortened one's whole name is
        kept in ``names/`` first."""
        short = bounded(encoded)
        if write and short != encoded and short not in self._named:
            self._write(self._path("names", f"{short}.json"), json.dumps({"name": encoded}).encode(), first_wins=True)
            self._named.add(short)
        return short

    def _table(self, table: TableId, write: bool = False) -> str:
        return self._name(f"{_safe(table.database)}.{_safe(table.table)}", write)

    def _whole(self, name: str) -> str:
        """The encoded name behind a file name: itself, or a shortened one's from ``names/``."""
        if "=" not in name:
            return name
        d = self._read_json(self._path("names", f"{name}.json"))
        return str(d["name"]) if isinstance(d, dict) and isinstance(d.get("name"), str) else name

    def _tables_named(self, names: list[str]) -> list[TableId]:
        return sorted({t for t in (table_of_file_name(self._whole(n)) for n in names) if t is not None}, key=str)

    def _path(self, *parts: str) -> str:
        return "/".join([self._root.rstrip("/"), *parts])

    def _private_root(self) -> None:
        """The state dir is private (0700, its files 0600): made so, and an older one (0755) made so."""
        if not self._made:
            make_dirs(self._root, 0o700)
            with contextlib.suppress(OSError):
                if os.stat(self._root).st_mode & 0o077:
                    os.chmod(self._root, 0o700)
            self._made = True

    def _write(self, path: str, data: bytes, first_wins: bool) -> None:
        """Write atomically; with ``first_wins`` an existing file stays (atomic ``link`` on local paths)."""
        if self._local:
            self._private_root()
            make_dirs(os.path.dirname(path), 0o700, 0o700)
            fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), prefix=".tmp-")
            try:
                with os.fdopen(fd, "wb") as f:
                    f.write(data)
                    f.flush()
                    os.fsync(f.fileno())
                if first_wins:
                    with contextlib.suppress(FileExistsError):
                        os.link(tmp, path)
                else:
                    os.replace(tmp, path)
                    tmp = ""
            finally:
                if tmp:
                    os.unlink(tmp)
        else:
            assert self._fs is not None
            import pyarrow.fs as pafs

            if first_wins and self._fs.get_file_info(path).type != pafs.FileType.NotFound:
                return
            self._fs.create_dir(os.path.dirname(path), recursive=True)
            with self._fs.open_output_stream(path) as f:  # object stores replace whole objects atomically
                f.write(data)

    def _read_bytes(self, path: str) -> bytes | None:
        try:
            if self._local:
                with open(path, "rb") as f:
                    return f.read()
            assert self._fs is not None
            with self._fs.open_input_stream(path) as f:
                return bytes(f.read())
        except FileNotFoundError:
            return None

    def _read_json(self, path: str) -> Any:
        raw = self._read_bytes(path)
        if raw is None:
            return None
        try:
            return json.loads(raw)
        except json.JSONDecodeError as e:
            raise StateError(f"state file {path!r} is not valid JSON: {e}; it was damaged outside this tool, "
                             "remove the state directory and take a new snapshot") from e

    def record_chunk(self, rec: ChunkRecord) -> ChunkRecord:
        """Write the record unless one exists already; return the record that is now stored."""
        path = f"{self._chunk_dir(rec.table, write=True)}/{rec.index}.json"
        self._write(path, json.dumps(rec.to_dict(), sort_keys=True).encode(), first_wins=True)
        stored = self._read(path)
        assert stored is not None
        return stored

    def record_plan(self, table: TableId, chunks: Sequence[Chunk], rows_per_chunk: int = 0,
                    avg_row_bytes: int = 0, outside: Sequence[int] = ()) -> list[Chunk]:
        """Keep a table's chunk plan (first one wins, so a restarted stream reads the same chunks), with the rows
        each chunk was planned to hold and the table's average row length when known (:meth:`plan_sizes`).
        ``outside``: indexes of chunks not read (a key range read again: the chunks around it, recorded at the
        point the range left the capture; :meth:`outside`)."""
        path = self._path("plans", f"{self._table(table, write=True)}.json")
        rec = PlanRecord(table, tuple(chunks), int(rows_per_chunk), int(avg_row_bytes), frozenset(outside))
        self._write(path, json.dumps(rec.to_dict()).encode(), first_wins=True)
        stored = self.plan(table)
        assert stored is not None
        return stored

    def _plan_json(self, table: TableId) -> dict[str, Any] | None:
        d = self._read_json(self._path("plans", f"{self._table(table)}.json"))
        return d if isinstance(d, dict) else None

    def plan_record(self, table: TableId) -> PlanRecord | None:
        """The table's plan file, read once (:meth:`plan`, :meth:`outside` and :meth:`plan_sizes` each read it)."""
        d = self._plan_json(table)
        return PlanRecord.from_dict(table, d) if d is not None else None

    def outside(self, table: TableId) -> frozenset[int]:
        """Indexes of the table's planned chunks that are not read (:meth:`record_plan`)."""
        d = self._plan_json(table)
        return PlanRecord.outside_of(d) if d is not None else frozenset()

    def chunk_record(self, table: TableId, index: int) -> ChunkRecord | None:
        """The recorded chunk ``index`` of the table, if it is recorded."""
        return self._read(f"{self._chunk_dir(table)}/{int(index)}.json")

    def plan_sizes(self, table: TableId) -> tuple[int, int] | None:
        """(rows per chunk, average row bytes) the table's plan was made with; ``None`` for a plan that does not
        say (made by an earlier version)."""
        d = self._plan_json(table)
        return PlanRecord.sizes_of(d) if d is not None else None

    def plan(self, table: TableId) -> list[Chunk] | None:
        rec = self.plan_record(table)
        return list(rec.chunks) if rec is not None else None

    def record_schema(self, schema: TableSchema, replace: bool = False) -> TableSchema:
        """Keep the table's schema as a stream first planned it (first one wins, unless ``replace``: a table
        about to be snapshotted, of which nothing was read yet); return the stored one."""
        path = self._path("schemas", f"{self._table(schema.table, write=True)}.json")
        self._write(path, json.dumps(schema.to_dict(), sort_keys=True).encode(), first_wins=not replace)
        stored = self.schema(schema.table)
        assert stored is not None
        return stored

    def schema(self, table: TableId) -> TableSchema | None:
        d = self._read_json(self._path("schemas", f"{self._table(table)}.json"))
        if d is None:
            return None
        try:
            return TableSchema.from_dict(d)
        except (KeyError, TypeError, ValueError) as e:
            raise StateError(f"bad schema record of {str(table)!r} under {self.location!r}: {e}") from e

    def recorded_schemas(self) -> list[TableId]:
        """Tables whose schema is recorded here."""
        names = [n[:-5] for n in self._list("schemas") or [] if n.endswith(".json")]
        return self._tables_named(names)

    def record_capture(self, settings: dict[str, Any]) -> dict[str, Any]:
        """Keep the settings that shape a capture's output (first one wins); return the stored ones."""
        path = self._path("capture.json")
        self._write(path, json.dumps(settings, sort_keys=True).encode(), first_wins=True)
        stored = self.capture()
        assert stored is not None
        return stored

    def capture(self) -> dict[str, Any] | None:
        d = self._read_json(self._path("capture.json"))
        return d if isinstance(d, dict) else None

    def record_sync_id(self) -> str:
        """The id of the mirror this capture feeds (the sync job's), made on first use (first one wins): its
        Delta tables carry it, so a capture never merges into another capture's tables."""
        import uuid

        path = self._path("sync.json")
        self._write(path, json.dumps({"id": str(uuid.uuid4())}).encode(), first_wins=True)
        d = self._read_json(path)
        assert isinstance(d, dict)
        return str(d["id"])

    def record_sync_query(self, query: str) -> str:
        """The streaming query that feeds this capture's mirror (its app id, from its checkpoint), recorded by its
        first batch (first one wins); the stored one. A state dir goes with one checkpoint: another query would
        read the capture's snapshot again onto a mirror that has it (the sync refuses that)."""
        path = self._path("sync_query.json")
        self._write(path, json.dumps({"query": query}).encode(), first_wins=True)
        d = self._read_json(path)
        assert isinstance(d, dict)
        return str(d["query"])

    def record_mirror(self, table: TableId, location: str) -> str:
        """Note that the sync created the table's mirror at ``location`` (first one wins); the stored one."""
        path = self._path("mirrors", self._table(table, write=True) + ".json")
        self._write(path, json.dumps({"location": location}).encode(), first_wins=True)
        stored = self.mirror(table)
        assert stored is not None
        return stored

    def mirror(self, table: TableId) -> str | None:
        """Where the sync created the table's mirror (``None``: it has not)."""
        d = self._read_json(self._path("mirrors", self._table(table) + ".json"))
        return str(d["location"]) if isinstance(d, dict) else None

    def record_round(self, index: int, rnd: Round) -> Round:
        """Keep round ``index`` of a capture of many tables (first one wins); return the stored round."""
        path = self._path("rounds", f"{int(index)}.json")
        self._write(path, json.dumps(rnd.to_dict(), sort_keys=True).encode(), first_wins=True)
        stored = self.round(index)
        assert stored is not None
        return stored

    def round(self, index: int) -> Round | None:
        """Round ``index``, if it is recorded."""
        d = self._read_json(self._path("rounds", f"{int(index)}.json"))
        return None if d is None else Round.from_dict(d)

    def rounds(self) -> list[Round]:
        """Every recorded round, in order (rounds are recorded one after another, from 0)."""
        out: list[Round] = []
        while (rnd := self.round(len(out))) is not None:
            out.append(rnd)
        return out

    def record_request(self, request: ResnapshotRequest) -> int:
        """Keep a request under the next free number (first-wins: two processes asking at once get two numbers);
        return its number."""
        data = json.dumps(request.to_dict(), sort_keys=True).encode()
        n = len(self.requests())
        while True:  # another process may have taken n since
            path = self._path("requests", f"{n}.json")
            self._write(path, data, first_wins=True)
            if self._read_bytes(path) == data:
                return n
            n += 1

    def pass_request(self, index: int, why: str) -> str:
        """Record that the stream passed request ``index`` over (``requests/<n>.passed.json``, first-wins: the
        decision stands after a restart); returns the recorded reason."""
        path = self._path("requests", f"{int(index)}.passed.json")
        self._write(path, json.dumps({"why": why[:1000]}, sort_keys=True).encode(), first_wins=True)
        return self.request_passed(index) or why

    def request_passed(self, index: int) -> str | None:
        """Why request ``index`` was passed over, if it was."""
        d = self._read_json(self._path("requests", f"{int(index)}.passed.json"))
        return str(d.get("why", "")) if isinstance(d, dict) else None

    def requests(self, start: int = 0) -> list[ResnapshotRequest]:
        """The recorded requests from number ``start`` on, in order (numbered one after another from 0)."""
        out: list[ResnapshotRequest] = []
        while (d := self._read_json(self._path("requests", f"{start + len(out)}.json"))) is not None:
            out.append(ResnapshotRequest.from_dict(d))
        return out

    def record_history(self, table: TableId, entry: HistoryEntry) -> None:
        """Keep a schema history entry of ``table`` (:class:`HistoryEntry`), replacing one at the same point (a
        point decided again after a crash, before any row of it was delivered)."""
        file, pos = entry.at
        # a statement's entry and a snapshot's at one point are both kept (a reset, then the table described)
        name = f"{bounded(f'{_safe(file)}@{int(pos)}')}{'@snapshot' if entry.action == SNAPSHOT else ''}.json"
        self._write(self._path("history", self._table(table, write=True), name),
                    json.dumps(entry.to_dict(), sort_keys=True).encode(), first_wins=False)

    def history(self, table: TableId) -> list[HistoryEntry]:
        """The table's schema history entries, in binlog order."""
        folder = f"history/{self._table(table)}"
        out = []
        for n in self._list(folder) or []:
            if n.endswith(".json") and not n.startswith("."):
                d = self._read_json(self._path("history", self._table(table), n))
                if isinstance(d, dict):
                    out.append(HistoryEntry.from_dict(d))
        return sorted(out, key=lambda e: e.key)

    def record_offset(self, name: str, offset: dict[str, Any]) -> None:
        """The latest committed offset of a stream (replaced atomically)."""
        self._write(self._path("offsets", f"{self._name(_safe(name), write=True)}.json"),
                    json.dumps(offset, sort_keys=True).encode(),
                    first_wins=False)

    def offset(self, name: str) -> dict[str, Any] | None:
        d = self._read_json(self._path("offsets", f"{self._name(_safe(name))}.json"))
        return d if isinstance(d, dict) else None

    def retire(self, table: TableId, tag: str) -> None:
        """Move a dropped table's chunk plan and chunk records under ``retired/<tag>/`` (its schema stays, for
        reading its rows), so that a table created later under its name is planned and recorded afresh.
        Idempotent: what is already moved is left."""
        name = self._table(table)
        moves = [(self._path("plans", f"{name}.json"), self._path("retired", _safe(tag), "plans", f"{name}.json")),
                 (self._chunk_dir(table), self._path("retired", _safe(tag), "chunks", name))]
        for src, dst in moves:
            if self._local:
                if os.path.exists(src):
                    make_dirs(os.path.dirname(dst), 0o700, 0o700)
                    os.replace(src, dst)
            else:  # object stores move objects, not folders: one file at a time
                assert self._fs is not None
                import pyarrow.fs as pafs

                kind = self._fs.get_file_info(src).type
                if kind == pafs.FileType.Directory:
                    files = [i.path for i in self._fs.get_file_info(pafs.FileSelector(src, recursive=True))
                             if i.type == pafs.FileType.File]
                    pairs = [(f, dst + f[len(src):]) for f in files]
                elif kind == pafs.FileType.File:
                    pairs = [(src, dst)]
                else:
                    pairs = []
                for a, b in pairs:
                    self._fs.create_dir(os.path.dirname(b), recursive=True)
                    self._fs.move(a, b)

    def offsets(self) -> dict[str, dict[str, Any]]:
        """Every stream's last committed offset recorded here, by the name it was recorded under."""
        out: dict[str, dict[str, Any]] = {}
        for n in self._list("offsets") or []:
            if n.endswith(".json") and not n.startswith("."):
                d = self._read_json(self._path("offsets", n))
                if isinstance(d, dict):
                    out[urllib.parse.unquote(self._whole(n[:-5]))] = d
        return out

    def _read(self, path: str) -> ChunkRecord | None:
        d = self._read_json(path)
        return None if d is None else ChunkRecord.from_dict(d)

    def _list(self, folder: str) -> list[str] | None:
        """Names in a folder of the state location (``None``: the folder does not exist)."""
        path = self._path(folder) if folder else self._root.rstrip("/")
        if self._local:
            return sorted(os.listdir(path)) if os.path.isdir(path) else None
        assert self._fs is not None
        import pyarrow.fs as pafs

        if self._fs.get_file_info(path).type != pafs.FileType.Directory:
            return None
        return sorted(os.path.basename(i.path) for i in self._fs.get_file_info(pafs.FileSelector(path)))

    def exists(self) -> bool:
        return self._list("") is not None

    def recorded_tables(self) -> list[TableId]:
        """Tables with a chunk plan or chunk records here."""
        names = [n[:-5] for n in self._list("plans") or [] if n.endswith(".json")] + list(self._list("chunks") or [])
        return self._tables_named(names)

    def chunk_records(self, table: TableId) -> list[ChunkRecord]:
        """Every recorded chunk of the table, by index."""
        d = self._chunk_dir(table)
        names: list[str] = []
        if self._local:
            if os.path.isdir(d):
                names = [n for n in os.listdir(d) if n.endswith(".json") and not n.startswith(".")]
        else:
            assert self._fs is not None
            import pyarrow.fs as pafs

            infos = self._fs.get_file_info(pafs.FileSelector(d, allow_not_found=True))
            names = [os.path.basename(i.path) for i in infos if i.path.endswith(".json")]
        recs = [self._read(f"{d}/{n}") for n in names]
        return sorted((r for r in recs if r is not None), key=lambda r: r.index)


# options that shape a capture's output types: kept in its state dir on first use, the same ever after
SHAPING = ("tinyint1_as_boolean", "before_images")


def pin_capture(opts: CdcOptions) -> None:
    """Record the output-shaping options in ``opts.state_dir`` the first time; refuse other values later."""
    if not opts.state_dir:
        return
    now = {k: getattr(opts, k) for k in SHAPING}
    kept = StateStore(opts.state_dir).record_capture(now)
    changed = {k: (kept.get(k), v) for k, v in now.items() if kept.get(k, v) != v}
    if changed:
        raise StateError(f"state_dir {opts.state_dir!r} was read with other output types: option(s) "
                         f"{', '.join(f'{k}={old!r}' for k, (old, _) in changed.items())} (now "
                         f"{', '.join(f'{k}={new!r}' for k, (_, new) in changed.items())}); keep them, or give a new "
                         "state_dir (and checkpoint)")


def capture_options(store: StateStore) -> CdcOptions:
    """The output-shaping options a capture recorded in ``store`` (defaults where it recorded none)."""
    kept = store.capture() or {}
    return CdcOptions(**{k: kept[k] for k in SHAPING if k in kept})
