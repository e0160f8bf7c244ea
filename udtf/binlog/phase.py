"""The binlog phase: change rows after the recorded chunk watermarks, each change once.

Reads the binlog from the smallest high watermark of the captured tables' chunks (or from a startup offset)
up to an end, transaction by transaction, and applies the emit rule (:mod:`udtf.binlog.emit`) to each row image:
an image reaches the output when the chunk holding its key did not already reflect it. The decision needs
the key only while an event lies between a table's smallest and largest high watermark; after that every
event of the table is emitted. Keys are compared as the server orders them (:mod:`mysql_cdc.keyorder`).

An insert gives ``+I``, an update ``-U`` (before image) and ``+U`` (after image), a delete ``-D``. When a key
moves between chunks the two images of one update are judged separately, so one of them may be left out:
applying ``-U`` as a delete by identity and ``+U``/``+I`` as an upsert, in binlog order, on top of the
snapshot, gives the table.

A DDL statement on a captured table stops the read with :class:`~mysql_cdc.errors.SchemaChangedError`
naming the table and the position: the chunk plan and the column types no longer describe the rows.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple, Protocol

from mysql_cdc.chunks import ChunkRecord
from mysql_cdc.connect import ServerFacts, connect
from mysql_cdc.errors import BinlogError, ConfigError, SchemaChangedError, StateError
from mysql_cdc.ids import TableId
from mysql_cdc.keyorder import KeyOrder
from mysql_cdc.offsets import BinlogOffset, MariadbGtidPos, binlog_file_key, change_sequence, is_mariadb_gtids
from mysql_cdc.options import CdcOptions, ConnectionProfile
from mysql_cdc.schema import TableSchema
from mysql_cdc.udtf.binlog.emit import EmitRule, SortKey
from mysql_cdc.udtf.binlog.rowimage import RowDecoders
from mysql_cdc.udtf.binlog.transactions import (
    SchemaChange,
    Transaction,
    claimed_id,
    created_tables,
    dropped_tables,
    named_tables,
    read_transactions,
)
from mysql_cdc.udtf.convert import binlog_row_converter


class Change(NamedTuple):
    """One change row: the table's values (canonical, like the snapshot's) and where it is in the binlog (a
    named tuple: made for every change, so made cheaply)."""

    table: TableId
    op: str  # +I, -U, +U, -D
    values: tuple[Any, ...]
    file: str
    pos: int  # end position of the rows event
    row: int  # index of the change in its transaction (orders changes of one event)
    gtid: str | None
    timestamp: int  # commit time, seconds since the epoch
    seq: int = 0  # the image's LONG sequence (offsets.change_sequence): binlog order, unique


@dataclass(frozen=True)
class ReadFrom:
    """Where a binlog read starts: a transaction boundary, or (MySQL) every transaction not in a GTID set."""

    offset: BinlogOffset
    auto_position: bool = False
    skip_before: int | None = None  # startup from a timestamp: events committed before it are not emitted

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"file": self.offset.file, "pos": self.offset.pos}
        if self.auto_position:
            d["gtids"] = self.offset.gtids or ""
        if self.skip_before is not None:
            d["skip_before"] = self.skip_before
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> ReadFrom:
        auto = "gtids" in d
        off = BinlogOffset(str(d["file"]), int(d["pos"]), d.get("gtids"), "gtid" if auto else "position")
        sb = d.get("skip_before")
        return cls(off, auto, None if sb is None else int(sb))


def _plain(v: Any) -> Any:
    if isinstance(v, dt.datetime) and v.tzinfo is not None:
        return v.astimezone(dt.timezone.utc).replace(tzinfo=None)
    return v


def server_end(profile: ConnectionProfile, facts: ServerFacts, conn: Any | None = None) -> BinlogOffset:
    """The binlog end now (a transaction boundary), with MySQL's executed GTID set."""
    own = conn is None
    conn = conn or connect(profile)
    try:
        cur = conn.cursor()
        cur.execute(facts.status_sql)
        row = cur.fetchone()
        cur.close()
    finally:
        if own:
            conn.close()
    if row is None:
        raise BinlogError("the server reports no binlog position: enable log_bin")
    gtids = str(row[4]).replace("\n", "") if facts.flavor == "mysql" and len(row) > 4 and row[4] else None
    return BinlogOffset(str(row[0]), int(row[1]), gtids, "position")


def binary_logs(profile: ConnectionProfile) -> list[tuple[str, int]]:
    """The server's binary log files and their sizes in bytes, oldest first (``SHOW BINARY LOGS``)."""
    conn = connect(profile)
    try:
        cur = conn.cursor()
        cur.execute("SHOW BINARY LOGS")
        rows = [(str(r[0]), int(r[1])) for r in cur.fetchall()]
        cur.close()
    finally:
        conn.close()
    return sorted(rows, key=lambda r: binlog_file_key(r[0]))


def earliest(profile: ConnectionProfile) -> BinlogOffset:
    files = binary_logs(profile)
    if not files:
        raise BinlogError("the server lists no binary logs: enable log_bin")
    return BinlogOffset(files[0][0], 4)


def parse_offset(text: str) -> ReadFrom:
    """A startup offset: ``file:pos``, a JSON offset dict, or a MySQL GTID set (read by auto-positioning)."""
    import json

    t = text.strip()
    if t.startswith("{"):
        try:
            return ReadFrom.from_dict(json.loads(t))
        except (ValueError, KeyError, TypeError) as e:
            raise ConfigError(f"bad startup_offset {text!r}: {e}; expected 'file:pos' or a GTID set") from e
    if is_mariadb_gtids(t):
        return ReadFrom(BinlogOffset("", 0, str(MariadbGtidPos.parse(t)), "gtid"), auto_position=True)
    file, sep, pos = t.rpartition(":")
    if sep and file and pos.isdigit() and "-" not in pos and not file.count(":"):
        return ReadFrom(BinlogOffset(file, int(pos)))
    from mysql_cdc.offsets import GtidSet

    try:
        gs = GtidSet.parse(t)
    except ConfigError:
        gs = GtidSet()
    if gs:
        return ReadFrom(BinlogOffset("", 0, str(gs), "gtid"), auto_position=True)
    raise ConfigError(f"bad startup_offset {text!r}; expected 'binlog.000003:4', a JSON offset, a MySQL GTID set "
                      "or a MariaDB GTID position ('0-1-100')")


# epoch seconds beyond this (the year 5138) are taken for milliseconds written without their unit
_MAX_EPOCH_SECONDS = 10**11


def parse_timestamp(text: str) -> int:
    """A startup timestamp as epoch seconds: seconds, milliseconds with their unit (Flink's
    ``scan.startup.timestamp-millis``), or ISO-8601 (UTC unless it says otherwise).

    >>> parse_timestamp("1700000000"), parse_timestamp("1700000000123ms"), parse_timestamp("2023-11-14T22:13:20Z")
    (1700000000, 1700000000, 1700000000)
    """
    t = text.strip()
    unit = 1
    if t.lower().endswith("ms"):
        t, unit = t[:-2].strip(), 1000
    elif t.lower().endswith("s") and t[:-1].strip().replace(".", "", 1).isdigit():
        t = t[:-1].strip()
    try:
        seconds = float(t) / unit
    except ValueError:
        seconds = None
    if seconds is not None:
        if unit == 1 and seconds >= _MAX_EPOCH_SECONDS:
            raise ConfigError(f"startup_timestamp {text!r} is not a time in seconds (it would be after the year "
                              f"5000): for milliseconds write {t + 'ms'!r}")
        return int(seconds)
    if unit != 1:
        raise ConfigError(f"bad startup_timestamp {text!r}; milliseconds are a number followed by 'ms'")
    try:
        d = dt.datetime.fromisoformat(t.replace("Z", "+00:00") if t.endswith("Z") else t)
    except ValueError:
        raise ConfigError(f"bad startup_timestamp {text!r}; expected seconds since the epoch, milliseconds "
                          "with 'ms' ('1700000000000ms') or ISO-8601 such as '2026-11-22T10:00:00+00:00'") from None
    if d.tzinfo is None:
        d = d.replace(tzinfo=dt.timezone.utc)
    return int(d.timestamp())


def check_offset_exists(profile: ConnectionProfile, offset: BinlogOffset) -> None:
    """A startup offset names a binlog file the server has, at a position inside it (else one clear error,
    instead of an empty result)."""
    logs = binary_logs(profile)
    files = dict(logs)
    names = [name for name, _ in logs]
    have = f"the server has {names[0]} .. {names[-1]}" if names else "the server lists no binary logs"
    if offset.file not in files:
        purged = bool(names) and binlog_file_key(offset.file) < binlog_file_key(names[0])
        why = "was purged" if purged else "does not exist"
        raise ConfigError(f"startup_offset names binlog file {offset.file!r}, which {why} ({have}); give a file "
                          "and position from SHOW BINARY LOGS / SHOW BINLOG EVENTS, or start from 'earliest'")
    if offset.pos < 4 or offset.pos > files[offset.file]:
        raise ConfigError(f"startup_offset position {offset.pos} is outside {offset.file!r}, which is "
                          f"{files[offset.file]} bytes long; give the end position of an event (SHOW BINLOG EVENTS)")


def chunk_rule(schema: TableSchema, records: list[ChunkRecord], key_order: KeyOrder, conn: Any | None) -> EmitRule:
    """The emit rule of one table from its recorded chunks (sort-key ranges and high watermarks; the chunk of
    NULL keys, when the key is nullable, apart)."""
    nulls = [r for r in records if r.nulls]
    bounds = [r.chunk() for r in records if not r.nulls]
    ends = [c.end for c in bounds if c.end is not None]
    sks = key_order.sort_keys(conn, [tuple(_plain(v) for v in k) for k in ends]) if ends else []
    it = iter(sks)
    ranges: list[tuple[SortKey | None, SortKey | None]] = []
    prev: SortKey | None = None
    for c in bounds:
        end = next(it) if c.end is not None else None
        ranges.append((prev, end))
        prev = end
    if len(nulls) > 1:
        raise StateError(f"{len(nulls)} chunks of NULL keys are recorded; one is planned")
    if records and records[0].nullable and not nulls:
        raise StateError("the chunk of NULL keys is not recorded")
    return EmitRule(ranges, [r.high for r in records if not r.nulls], nulls[0].high if nulls else None)


class _StopAtDdl(Exception):
    """Internal: a boundary scan met a DDL statement on a captured table."""


class RecordedChunks(Protocol):
    """Where finished chunks are recorded (``mysql_cdc.state.store.StateStore`` is one): the reader needs only
    this, so it does not depend on the state layer."""

    location: str

    def chunk_records(self, table: TableId) -> list[ChunkRecord]: ...


def recorded_rules(store: RecordedChunks, schemas: Mapping[TableId, TableSchema], conn_factory: Callable[[], Any]
                   ) -> dict[TableId, EmitRule]:
    """The emit rule of each table from its recorded chunks."""
    rules: dict[TableId, EmitRule] = {}
    conn = None
    try:
        for t, schema in schemas.items():
            recs = store.chunk_records(t)
            if not recs:
                raise StateError(f"no chunk watermarks of table {str(t)!r} are recorded under {store.location!r}: "
                                 "run the snapshot with this state_dir first, or start with startup => 'latest'")
            ko = KeyOrder(schema)
            if ko.needs_server and conn is None:
                conn = conn_factory()
            try:
                rules[t] = chunk_rule(schema, recs, ko, conn)
            except StateError as e:
                raise StateError(f"table {str(t)!r}: {e} (found {len(recs)} records under {store.location!r}); "
                                 "finish the snapshot first") from e
    finally:
        if conn is not None:
            conn.close()
    return rules


def rules_start(rules: Mapping[TableId, EmitRule]) -> ReadFrom:
    """Where the binlog phase starts: the smallest high watermark over all captured tables. With GTID
    watermarks, every transaction not in the smallest executed set (GTID auto-positioning), since a
    transaction can sit in the binlog before that position and still be missing from the set."""
    starts = [r.start for r in rules.values()]
    first = min(starts)
    if first.kind == "gtid":
        from mysql_cdc.offsets import GtidSet

        common = GtidSet.parse(starts[0].gtids)
        for s in starts[1:]:
            common = common.intersection(GtidSet.parse(s.gtids))
        return ReadFrom(BinlogOffset(first.file, first.pos, str(common), "gtid"), auto_position=True)
    return ReadFrom(BinlogOffset(first.file, first.pos))


class BinlogPhase:
    """Reads change rows of some tables between two binlog points and decides, row image by row image,
    whether each is emitted. ``rules`` maps a table to its emit rule; a table without one (startup from an
    offset, no snapshot) has every change emitted."""

    def __init__(self, profile: ConnectionProfile, facts: ServerFacts, opts: CdcOptions,
                 schemas: Mapping[TableId, TableSchema], rules: Mapping[TableId, EmitRule | None],
                 connect_factory: Callable[[ConnectionProfile], Any] = connect, followed: bool = False) -> None:
        self.profile = profile
        # followed: a stream's driver ended the batch before any DDL of the tables, or made it the batch alone
        # and followed it (new schemas recorded, or the table reset): a DDL met here is no stop
        self.followed = followed
        self.facts = facts
        self.opts = opts
        self.schemas = dict(schemas)
        self.rules = dict(rules)
        self._connect = connect_factory
        self._conv = {t: binlog_row_converter(s.columns, opts.tinyint1_as_boolean) for t, s in schemas.items()}
        self.decoders = RowDecoders(schemas, opts.tinyint1_as_boolean) if opts.row_decoder == "planned" else None
        self._names = {t: set(s.column_names) for t, s in schemas.items()}
        self._ids = {(t.database, t.table): t for t in schemas}
        self._ruled = any(rule is not None for rule in self.rules.values())
        self._orders = {t: KeyOrder(s) for t, s in schemas.items() if rules.get(t) is not None}
        self._keypos = {t: s.positions(s.chunk_key) for t, s in schemas.items()}
        self._conn: Any = None
        self.new_table_seen = False
        self.dropped: list[SchemaChange] = []
        self.seen: list[BinlogOffset] = []  # boundaries the last batch_end scan passed (see keep_boundary)
        self.transactions = 0
        self.last: BinlogOffset | None = None

    @property
    def _reading(self) -> dict[str, Any]:
        """How this phase's binlog reads see the server (:func:`read_transactions`' keyword arguments)."""
        return {"flavor": self.facts.flavor, "server_version": self.facts.version,
                "allow_statement_writes": self.opts.allow_statement_writes}

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def _sort_keys(self, table: TableId, keys: list[tuple[Any, ...]]) -> list[SortKey]:
        ko = self._orders[table]
        if ko.needs_server and self._conn is None:
            self._conn = self._connect(self.profile)
        return ko.sort_keys(self._conn, keys)

    def _before_snapshot(self, ch: SchemaChange) -> bool:
        """A statement that made ``ch.table`` (created it, or renamed a table to its name) where every chunk
        of it holds the statement (the table was snapshotted after it: added to the capture later): the rows
        the chunks hold are already of its new shape, and nothing of it before the statement is emitted."""
        rule = self.rules.get(ch.table)
        return (rule is not None and ch.table in created_tables(ch.statement, ch.database)
                and rule.decided(BinlogOffset(ch.file, ch.pos), ch.gtid) is False)

    def _on_schema_change(self, ch: SchemaChange) -> None:
        if self._before_snapshot(ch) or self.followed:
            return
        follow = ("option schema_changes is stop; with schema_changes follow (the default) a read of tables "
                  "follows it" if self.opts.tables is not None else "a read of one table (option table) has its "
                  "columns typed and stops at a DDL; read it with option tables to follow schema changes")
        raise SchemaChangedError(
            f"table {str(ch.table)!r} changed at {ch.file}:{ch.pos} ({ch.statement[:200]!r}); the chunk plan and "
            "the column types no longer describe its rows: the stream stops here. Changes before this position "
            f"were delivered; take a new snapshot of the table (new state_dir and checkpoint) to continue ({follow})")

    def changes(self, start: ReadFrom, end: BinlogOffset | None) -> Iterator[Change]:
        """Change rows of committed transactions after ``start`` up to ``end`` (a transaction boundary;
        ``None``: the binlog end when the read starts)."""
        if end is None:
            end = server_end(self.profile, self.facts)
        tables = set(self.schemas)
        first = 0
        with claimed_id(self.profile, self.opts) as sid:
            for txn in read_transactions(self.profile, sid, start.offset, tables, **self._reading,
                                         auto_position=start.auto_position, end=end,
                                         on_schema_change=self._on_schema_change, skip_before=start.skip_before,
                                         decoders=self.decoders, piece=self.opts.fetch_size):
                if txn.complete:
                    self.transactions += 1
                    self.last = BinlogOffset(txn.file, txn.end)
                yield from self._transaction(txn, first)
                # a transaction read in pieces numbers its images on from piece to piece
                first = 0 if txn.complete else first + sum(1 + (r.op == "update") for r in txn.rows)
        self.close()

    def batch_end(self, start: ReadFrom, end: BinlogOffset, max_rows: int = 0,
                  watch: Callable[[TableId], bool] | None = None, drops: bool = False,
                  follow: bool = False) -> BinlogOffset:
        """Where a micro-batch that starts at ``start`` ends: ``end``, or earlier at the first transaction
        boundary by which ``max_rows`` (if > 0) change rows of the tables were written, or earlier still at the
        boundary just before a DDL statement on a captured table, so that every change before the DDL is
        delivered and committed by the batch. A DDL right at ``start`` stops the stream here, in the driver,
        with :class:`SchemaChangedError` (also after a restart from the checkpoint), before any data moves.

        With ``watch`` (a test of a table's name: would the capture take it?), the batch also ends just after
        a DDL statement that names a table ``watch`` takes (a table created or renamed into the capture), so
        that the next batch can add it; :attr:`new_table_seen` then says so. With ``drops``, a ``DROP TABLE``
        of captured tables right at ``start`` is no stop: the batch is that statement alone, and
        :attr:`dropped` holds its :class:`SchemaChange` records (the caller takes the tables out of the
        capture from the batch's end on). With ``follow``, any DDL statement on captured tables right at
        ``start`` is no stop either: the batch is that statement alone, and :attr:`dropped` holds its records
        (the caller follows the change).

        Reads the range once more in the driver; without ``max_rows`` row events are not decoded (boundaries
        and statements only)."""
        seen = 0
        last = start.offset
        ddl: list[SchemaChange] = []
        self.new_table_seen = False
        self.dropped = []
        self.seen = []
        creating: list[str] = []

        def found(ch: SchemaChange) -> None:
            if self._before_snapshot(ch):
                return
            if last == start.offset and (follow or (drops and ch.table in dropped_tables(ch.statement, ch.database))):
                self.dropped.append(ch)
                return
            ddl.append(ch)
            raise _StopAtDdl

        def statement(q: str, db: str) -> None:
            if watch is not None and any(watch(t) for t in named_tables(q, db)):
                creating.append(q)

        with claimed_id(self.profile, self.opts) as sid:
            try:
                for txn in read_transactions(self.profile, sid, start.offset, set(self.schemas),
                                             **self._reading, auto_position=start.auto_position, end=end,
                                             on_schema_change=found, skip_before=start.skip_before,
                                             decode_rows=max_rows > 0, on_ddl=statement,
                                             decoders=self.decoders, piece=self.opts.fetch_size):
                    seen += sum(2 if r.op == "update" else 1 for r in txn.rows)
                    if not txn.complete:
                        continue
                    last = BinlogOffset(txn.file, txn.end)
                    keep_boundary(self.seen, last)
                    if self.dropped:  # the batch is the DROP statement alone
                        return last
                    if creating:  # the batch ends just after the statement: the next one adds the table
                        self.new_table_seen = True
                        return last
                    if max_rows > 0 and seen >= max_rows:
                        return last
            except _StopAtDdl:
                if last == start.offset:  # nothing before the DDL is left to deliver
                    self._on_schema_change(ddl[0])
                return last
        return end

    def statements(self, start: ReadFrom, end: BinlogOffset) -> list[SchemaChange]:
        """Every DDL statement on the tables after ``start`` up to ``end`` (boundaries and statements only, no
        row is decoded): where a stream looks for changes its recorded schemas may not show."""
        found: list[SchemaChange] = []
        with claimed_id(self.profile, self.opts) as sid:
            for _ in read_transactions(self.profile, sid, start.offset, set(self.schemas), **self._reading,
                                       auto_position=start.auto_position, end=end, on_schema_change=found.append,
                                       skip_before=start.skip_before, decode_rows=False):
                pass
        return found

    def boundaries(self, start: ReadFrom, end: BinlogOffset) -> list[BinlogOffset]:
        """Ends of transactions after ``start`` up to ``end``, at most one per :data:`BOUNDARY_STEP` bytes (a
        boundary scan: no row is decoded, and a DDL statement is a boundary like any other)."""
        out: list[BinlogOffset] = []
        with claimed_id(self.profile, self.opts) as sid:
            for txn in read_transactions(self.profile, sid, start.offset, set(self.schemas), **self._reading,
                                         auto_position=start.auto_position, end=end, skip_before=start.skip_before,
                                         decode_rows=False, on_schema_change=lambda ch: None):
                keep_boundary(out, BinlogOffset(txn.file, txn.end))
        return out

    def split(self, start: ReadFrom, end: BinlogOffset, parts: int, min_bytes: int,
              boundaries: list[BinlogOffset] | None = None) -> list[BinlogOffset]:
        """Where a range is cut to be read by ``parts`` readers at once (parallel catch-up): transaction
        boundaries inside it, about as many bytes apart (:func:`split_points`); none when the range is too short
        (under ``min_bytes`` a part) or its start is a GTID set alone. ``boundaries``: the range's, when a scan
        already found them (:attr:`seen` after :meth:`batch_end`), else the range is scanned."""
        if parts < 2 or not start.offset.file:
            return []
        sizes = dict(binary_logs(self.profile))
        found = self.boundaries(start, end) if boundaries is None else boundaries
        return split_points(start.offset, end, found, sizes, parts, min_bytes)

    def row_columns(self, start: ReadFrom, end: BinlogOffset) -> list[str] | None:
        """The columns (as the binlog's table map names them) of the first row of the tables changed after
        ``start`` up to ``end``; ``None`` when no row was."""
        with claimed_id(self.profile, self.opts) as sid:
            for txn in read_transactions(self.profile, sid, start.offset, set(self.schemas), **self._reading,
                                         auto_position=start.auto_position, end=end, skip_before=start.skip_before,
                                         on_schema_change=lambda ch: None):
                for r in txn.rows:
                    return list(r.after if r.after is not None else r.before or {})
        return None

    def _values(self, t: TableId, img: dict[str, Any] | tuple[Any, ...], r: Any) -> tuple[Any, ...]:
        """An image's canonical values: decoded so by its table map's plan, or converted from the library's dict."""
        if isinstance(img, tuple):
            return img
        if set(img) != self._names[t]:
            raise SchemaChangedError(
                f"table {str(t)!r} has columns {sorted(img)!r} at {r.file}:{r.pos}, but the stream "
                f"was planned with {sorted(self._names[t])!r}; take a new snapshot of the table")
        return self._conv[t](img)

    def _every_change(self, txn: Transaction, first: int) -> Iterator[Change]:
        """:meth:`_transaction` where no table has an emit rule (a read past every chunk, or from an offset):
        every image is emitted, so none waits for a decision."""
        n = first
        ts = txn.timestamp
        for r in txn.rows:
            t = self._ids.get((r.database, r.table)) or TableId(r.database, r.table)
            before, after = r.before, r.after
            if r.op == "update":
                assert before is not None and after is not None
                seq = change_sequence(r.file, r.start, 2 * r.ordinal)  # the +U image's is the next one
                yield Change(t, "-U", before if isinstance(before, tuple) else self._values(t, before, r), r.file,
                             r.pos, n, r.gtid, ts, seq)
                yield Change(t, "+U", after if isinstance(after, tuple) else self._values(t, after, r), r.file,
                             r.pos, n + 1, r.gtid, ts, seq + 1)
                n += 2
            else:
                img = after if r.op == "insert" else before
                assert img is not None
                yield Change(t, "+I" if r.op == "insert" else "-D",
                             img if isinstance(img, tuple) else self._values(t, img, r), r.file, r.pos, n, r.gtid,
                             ts, change_sequence(r.file, r.start, r.ordinal))
                n += 1

    def _transaction(self, txn: Transaction, first: int = 0) -> Iterator[Change]:
        # decide: by position or GTID alone where the rule allows, by the key's chunk otherwise. An image its
        # table's chunks already hold everywhere is not converted: it may predate the table's snapshot (a table
        # added later, renamed into the capture) and have another shape (its table map then does not fit the
        # schema, so udtf.binlog.rowimage left it to the library, as a dict).
        if not self._ruled:
            yield from self._every_change(txn, first)
            return
        images: list[tuple[TableId, str, tuple[Any, ...], Any]] = []
        verdict: list[bool | None] = []
        pending: dict[TableId, list[int]] = {}
        for r in txn.rows:
            t = TableId(r.database, r.table)
            rule = self.rules.get(t)
            d = True if rule is None else rule.decided(BinlogOffset(r.file, r.pos), r.gtid)
            pairs = ((("+I", r.after),) if r.op == "insert" else
                     (("-U", r.before), ("+U", r.after)) if r.op == "update" else (("-D", r.before),))
            for op, img in pairs:
                assert img is not None
                if d is False:
                    images.append((t, op, (), r))
                    verdict.append(False)
                    continue
                vals = self._values(t, img, r)
                if d is None:
                    pending.setdefault(t, []).append(len(images))
                images.append((t, op, vals, r))
                verdict.append(d)
        for t, idx in pending.items():
            rule = self.rules[t]
            assert rule is not None
            kp = self._keypos[t]
            keys = {i: tuple(_plain(images[i][2][p]) for p in kp) for i in idx}
            ranged = [i for i in idx if None not in keys[i]]  # a key with a NULL is the NULL chunk's
            sk_of: dict[int, SortKey | None] = dict(zip(ranged, self._sort_keys(t, [keys[i] for i in ranged]))) \
                if ranged else {}
            for i in idx:
                r = images[i][3]
                verdict[i] = rule.emit(sk_of.get(i), BinlogOffset(r.file, r.pos), r.gtid)
        for n, ((t, op, vals, r), ok) in enumerate(zip(images, verdict)):
            if ok:
                # an update's images are 2i and 2i+1 of its event; an insert's or a delete's, i
                image = 2 * r.ordinal + (op == "+U") if r.op == "update" else r.ordinal
                yield Change(t, op, vals, r.file, r.pos, first + n, r.gtid, txn.timestamp,
                             change_sequence(r.file, r.start, image))


BOUNDARY_STEP = 64 << 10  # a cut needs no finer boundaries: a backlog of small transactions keeps few of them


def keep_boundary(kept: list[BinlogOffset], boundary: BinlogOffset) -> None:
    """Keep a transaction boundary for :func:`split_points` unless it is within :data:`BOUNDARY_STEP` bytes of
    the last one kept in the same file (memory: a million small transactions keep a few thousand).

    >>> kept: list[BinlogOffset] = []
    >>> for pos in (100, 200, 70_000, 70_100, 140_000):
    ...     keep_boundary(kept, BinlogOffset("binlog.000001", pos))
    >>> keep_boundary(kept, BinlogOffset("binlog.000002", 4))
    >>> [(o.file[-1], o.pos) for o in kept]
    [('1', 100), ('1', 70000), ('1', 140000), ('2', 4)]
    """
    if not kept or kept[-1].file != boundary.file or boundary.pos - kept[-1].pos >= BOUNDARY_STEP:
        kept.append(boundary)


def split_points(start: BinlogOffset, end: BinlogOffset, boundaries: list[BinlogOffset], sizes: Mapping[str, int],
                 parts: int, min_bytes: int) -> list[BinlogOffset]:
    """Transaction boundaries that cut the range ``start`` .. ``end`` into at most ``parts`` pieces of about
    equal bytes, each at least ``min_bytes`` (``sizes``: the binlog files' sizes, to measure a range across
    files). A piece ends at a boundary, so each is read like any range, and the emit rule, which holds per
    event, gives each change in exactly one piece.

    Worked example: a range of 300 bytes in one file with boundaries at 100, 180, 250 and 300, cut in three,
    aims at 100 and 200 bytes from its start and takes the boundary nearest each aim (after the cut before):

    >>> cut = split_points(BinlogOffset("b.1", 0), BinlogOffset("b.1", 300),
    ...                    [BinlogOffset("b.1", p) for p in (100, 180, 250, 300)], {"b.1": 300}, 3, 50)
    >>> [o.pos for o in cut]
    [100, 180]
    >>> split_points(BinlogOffset("b.1", 0), BinlogOffset("b.1", 300), [BinlogOffset("b.1", 300)], {"b.1": 300},
    ...              3, 50)  # one transaction: nothing to cut
    []
    >>> [(o.file, o.pos) for o in split_points(BinlogOffset("b.1", 200), BinlogOffset("b.2", 200),
    ...     [BinlogOffset("b.1", 300), BinlogOffset("b.2", 50), BinlogOffset("b.2", 200)], {"b.1": 300, "b.2": 900},
    ...     2, 50)]  # across a rotation: 100 bytes left in b.1, 200 read of b.2
    [('b.2', 50)]
    """
    order = sorted(sizes, key=binlog_file_key)
    before: dict[str, int] = {}
    total = 0
    for f in order:
        before[f] = total
        total += sizes[f]

    def at(o: BinlogOffset) -> int | None:
        return None if o.file not in before else before[o.file] + o.pos

    first, last = at(start), at(end)
    if first is None or last is None or last <= first:
        return []
    parts = min(parts, (last - first) // max(1, min_bytes))
    inside = [(g, b) for b in boundaries if (g := at(b)) is not None and first < g < last]
    cut: list[BinlogOffset] = []
    prev = first
    for i in range(1, parts):
        aim = first + (last - first) * i // parts
        found = min(((g, b) for g, b in inside if g > prev), key=lambda gb: abs(gb[0] - aim), default=None)
        if found is not None:
            prev = found[0]
            cut.append(found[1])
    return cut


def read_from(profile: ConnectionProfile, facts: ServerFacts, opts: CdcOptions,
              rules: Mapping[TableId, EmitRule] | None) -> ReadFrom:
    """Where the binlog read starts under ``opts.startup`` (``initial`` needs the recorded ``rules``)."""
    mode = opts.startup
    if mode == "initial":
        if not rules:
            raise StateError("startup 'initial' needs the recorded snapshot of the tables (state_dir)")
        return rules_start(rules)
    if mode == "latest":
        end = server_end(profile, facts)
        return ReadFrom(BinlogOffset(end.file, end.pos))
    if mode == "earliest":
        return ReadFrom(earliest(profile))
    if mode == "offset":
        rf = parse_offset(opts.startup_offset or "")
        if not rf.auto_position:
            check_offset_exists(profile, rf.offset)
        return rf
    if mode == "timestamp":
        return ReadFrom(earliest(profile), skip_before=parse_timestamp(opts.startup_timestamp or ""))
    raise ConfigError(f"startup {mode!r} reads no binlog; use initial, latest, earliest, offset or timestamp")


def parse_end(text: str, profile: ConnectionProfile, facts: ServerFacts) -> BinlogOffset:
    if text.strip().lower() == "latest":
        return server_end(profile, facts)
    try:
        rf = parse_offset(text)
    except ConfigError:
        rf = None
    if rf is None or rf.auto_position:
        raise ConfigError(f"bad end {text!r}; expected 'latest' or 'file:pos'")
    return rf.offset
