"""Row-image decoding behind one small interface: :func:`read_transactions` yields
:class:`BinlogRow`.

python-mysql-replication frames the events and parses table maps; row images are decoded by a plan made per
table map (:mod:`udtf.binlog.rowimage`) when the caller gives the tables' schemas, else by the library (adapted
below), without touching the correction or emit rules. Each concurrent binlog connection claims its own
replica server id from the configured range with a server-side user lock (``GET_LOCK``), so two readers never
share an id (sharing one makes the server drop the older connection, and events are lost).
"""

from __future__ import annotations

import functools
import re
import time
import types
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, NamedTuple

from mysql_cdc.connect import SESSION_INIT, guarded_connect, pymysql_kwargs
from mysql_cdc.ddl import Statement, read_statement
from mysql_cdc.errors import BinlogError, ServerSettingError
from mysql_cdc.ids import TableId
from mysql_cdc.offsets import BinlogOffset, GtidSet, binlog_file_key, change_sequence
from mysql_cdc.profiles import ConnectionProfile
from mysql_cdc.udtf.binlog.library import adapt_library, check_described, library_image, refuse_partial_json
from mysql_cdc.udtf.binlog.rowimage import RowDecoders
from mysql_cdc.xa import PendingXa, Xid, xa_statement

ANONYMOUS_GTID_EVENT = 34
_COMPRESSED = ("a compressed transaction or event, which python-mysql-replication cannot decode, so its changes "
               "(of any table) would be lost: set binlog_transaction_compression=OFF (MySQL) / log_bin_compress=OFF "
               "(MariaDB) globally and in every session, then take a new snapshot")
# events the library does not decode that may hold changes: the read stops rather than skip them
UNREADABLE_EVENTS = {
    26: "an incident event (the server lost events it could not log): take a new snapshot",
    40: _COMPRESSED, **dict.fromkeys(range(165, 172), _COMPRESSED),
    42: "a transaction with a tagged GTID (MySQL 8.3+), which this version does not follow: write without GTID "
        "tags",
}
READ_TIMEOUT = 120  # seconds without a byte from the server before a binlog read fails instead of hanging


def canonical_image(image: dict[str, Any] | tuple[Any, ...], convert: Callable[[dict[str, Any]], tuple[Any, ...]]
                    ) -> tuple[Any, ...]:
    """A row image as its canonical tuple: decoded by a table map's plan already, or converted from the library's
    dict by ``convert`` (:func:`udtf.convert.binlog_row_converter`)."""
    return image if isinstance(image, tuple) else convert(image)


class BinlogRow(NamedTuple):
    """One row change as read (a named tuple: made for every row, so made cheaply)."""

    database: str
    table: str
    op: str  # insert | update | delete
    # an image: the canonical row tuple in the schema's column order (decoded by udtf.binlog.rowimage), or the
    # library's dict of column name -> value (see canonical_image)
    before: dict[str, Any] | tuple[Any, ...] | None
    after: dict[str, Any] | tuple[Any, ...] | None
    file: str
    pos: int  # end position of the event that carried the row
    gtid: str | None
    timestamp: int
    start: int = 0  # start position of that event
    ordinal: int = 0  # the row's index in that event (an XA transaction's row: in its prepare's event)
    # where the row's images are numbered (``change_sequence`` of its event's file and start), when not where it
    # is delivered: an XA transaction's rows come at its commit and keep their prepare's numbers (on_xa_end)
    seq: int | None = None


class RowsRun(NamedTuple):
    """The rows of one rows event decoded by its table map's plan, kept together (a read with ``runs``): the
    images in the event's order (an update's before and after images alternate), nothing made per row."""

    database: str
    table: str
    op: str  # insert | update | delete
    images: Sequence[tuple[Any, ...]]  # a list, or ColumnImages (columns.py) in a read of runs
    file: str
    pos: int  # end position of the event
    gtid: str | None
    timestamp: int
    start: int  # start position of the event

    @property
    def row_total(self) -> int:
        """The rows it holds (an update's two images are one row)."""
        return len(self.images) // 2 if self.op == "update" else len(self.images)


def as_rows(item: BinlogRow | RowsRun) -> list[BinlogRow]:
    """A transaction's item as :class:`BinlogRow` s (a run cut into its rows).

    >>> run = RowsRun("d", "t", "update", [(1, "a"), (1, "b")], "b.1", 900, None, 7, 800)
    >>> [(r.op, r.before, r.after, r.ordinal) for r in as_rows(run)]
    [('update', (1, 'a'), (1, 'b'), 0)]
    """
    if isinstance(item, BinlogRow):
        return [item]
    d, t, f, p, g, ts, st = item.database, item.table, item.file, item.pos, item.gtid, item.timestamp, item.start
    im = item.images
    if item.op == "update":
        return [BinlogRow(d, t, "update", im[2 * i], im[2 * i + 1], f, p, g, ts, st, i) for i in range(len(im) // 2)]
    if item.op == "insert":
        return [BinlogRow(d, t, "insert", None, img, f, p, g, ts, st, i) for i, img in enumerate(im)]
    return [BinlogRow(d, t, "delete", img, None, f, p, g, ts, st, i) for i, img in enumerate(im)]


def image_count(items: Iterable[BinlogRow | RowsRun]) -> int:
    """Row images of a transaction's items (an update has two)."""
    return sum((1 + (i.op == "update")) if isinstance(i, BinlogRow) else len(i.images) for i in items)


@dataclass(frozen=True)
class Transaction:
    """The captured rows of one committed transaction, yielded once its commit was read; or, when the reader
    was asked for pieces, a piece of one (``complete`` False: more rows of it follow, and ``end`` is where the
    piece ends, not a boundary)."""

    gtid: str | None
    file: str
    end: int  # binlog position just after the commit: a transaction boundary, where a later read may start
    timestamp: int
    # its rows; a read with ``runs`` gives the rows of an event decoded by a plan as one RowsRun (as_rows)
    rows: tuple[BinlogRow | RowsRun, ...]
    complete: bool = True
    # what it did to XA transactions (mysql_cdc.xa.after): ("prepare", xid, where its group starts) for an XA
    # PREPARE, whose rows are held (``held``), not delivered; ("commit" | "rollback", xid, None) for the end
    xa: tuple[tuple[str, Xid, tuple[str, int] | None], ...] = ()
    held: tuple[BinlogRow, ...] = ()


@dataclass(frozen=True)
class SchemaChange:
    """A DDL statement on a captured table, met in the binlog."""

    table: TableId
    statement: str
    file: str
    pos: int
    database: str = ""  # the statement's default database
    gtid: str | None = None  # of its transaction


@functools.cache
def _events() -> Any:
    """python-mysql-replication's event classes (imported when a read starts: the library is slow to import)."""
    from pymysqlreplication import event, row_event

    return types.SimpleNamespace(
        gtid=(event.GtidEvent, event.MariadbGtidEvent), xid=event.XidEvent, xa_prepare=event.XAPrepareEvent,
        query=event.QueryEvent, rotate=event.RotateEvent, unknown=event.NotImplementedEvent,
        write=row_event.WriteRowsEvent, update=row_event.UpdateRowsEvent, delete=row_event.DeleteRowsEvent,
        partial=row_event.PartialUpdateRowsEvent)


class TransactionReader:
    """Frames the events of a binlog stream into :class:`Transaction` s (see :func:`read_transactions`): one
    method per event kind, each returning the transaction (or piece of one) it completes, if any; the open
    transaction's bookkeeping in fields."""

    def __init__(self, start: BinlogOffset, tables: set[TableId], *, flavor: str, auto_position: bool,
                 end: BinlogOffset | None = None, on_schema_change: Callable[[SchemaChange], None] | None = None,
                 skip_before: int | None = None, on_ddl: Callable[[str, str], None] | None = None,
                 decoders: RowDecoders | None = None, piece: int = 0,
                 server_version: tuple[int, int, int] | None = None, allow_statement_writes: bool = False,
                 prepared: dict[Xid, list[BinlogRow]] | None = None, runs: bool = False,
                 count_only: bool = False, columns: bool = False,
                 find_prepared: Callable[[Xid, BinlogOffset], list[BinlogRow]] | None = None) -> None:
        self.tables = tables
        self.wanted = {(t.database, t.table) for t in tables}
        self.flavor, self.server_version = flavor, server_version
        self.end_key = end.position_key() if end is not None else None
        self.on_schema_change, self.on_ddl = on_schema_change, on_ddl
        self.skip_before = skip_before
        self.decoders = decoders
        self.runs = runs
        self.columns = columns and runs
        self.count_only = count_only
        self.piece = piece if skip_before is None else 0  # the skip is decided per whole transaction
        self.allow_statement_writes = allow_statement_writes
        # the last boundary yielded (None: not known yet, a read by GTID auto-positioning)
        self.last: tuple[Any, ...] | None = start.position_key() if not auto_position else None
        self.file = start.file
        self.done = False  # the read reached its end
        # the open transaction
        self.gtid: str | None = None
        self.rows: list[BinlogRow | RowsRun] = []
        self.count = 0  # its rows
        self.ts = 0
        self.ts_set = False  # its time was read (its first event's: known before its rows)
        self.in_pieces = ""  # the table whose rows of it went out in pieces first ("": none did)
        self.sent_upto: tuple[Any, ...] | None = None  # the last rows event whose rows went out in a piece
        self.described: set[int] = set()  # table ids whose table map was checked for column metadata
        # XA transactions (mysql_cdc.xa): the rows of those prepared, held until their commit or rollback (with
        # those prepared before the read's start, read first); where the open group starts; whether it is an
        # XA one (its rows are never sent in pieces); what the open group did to XA transactions
        self.prepared: dict[Xid, list[BinlogRow]] = dict(prepared or {})
        self.find_prepared = find_prepared
        self.group_start = (start.file, start.pos)
        self.xa_open = False
        self.xa_here: list[tuple[str, Xid, tuple[str, int] | None]] = []

    def transactions(self, stream: Iterable[Any]) -> Iterator[Transaction]:
        ev = _events()
        for event in stream:
            pos = int(event.packet.log_pos)
            if isinstance(event, ev.rotate):
                if event.next_binlog != self.file:
                    self._new_file(stream)
                self.file = event.next_binlog
                continue
            if self._past_end(event, pos):
                self.done = True
                return
            if isinstance(event, ev.unknown):
                self.on_unknown(event, pos)
                continue
            if isinstance(event, ev.gtid):
                self.on_gtid(event, pos)
                continue
            if isinstance(event, ev.xa_prepare) and not event.one_phase:
                txn = self.on_xa_prepare(event, pos)
            elif isinstance(event, ev.xid | ev.xa_prepare) or (
                    isinstance(event, ev.query) and event.query.strip().upper() == "COMMIT"):
                txn = self.on_commit(pos)
            elif isinstance(event, ev.query):
                txn = self.on_query(event, pos)
            else:
                txn = self.on_rows(event, pos)
            if txn is not None:
                yield txn

    def _new_file(self, stream: Any) -> None:
        """The stream moves to another binlog file: the table maps read so far are forgotten. Table ids are the
        server's numbers of its open tables, unique within one run of it; a restarted server numbers its tables
        again from the start, in the new file it begins. The library forgets its maps at a rotation the server
        logged, not at the step a reader takes into the file a restarted server began (after that file's stop
        event, or none at a crash), and, told to freeze schemas, skips every table map of a table id it knows:
        rows of one table were decoded with another's map (misread, or, were the columns alike, given to the
        other table). Within one file a table id names one table, so a reconnect that resumes in the same file
        keeps the maps of the transaction it resumes."""
        if isinstance(getattr(stream, "table_map", None), dict):
            stream.table_map = {}
        self.described.clear()

    def _past_end(self, event: Any, pos: int) -> bool:
        """The read is done: its last boundary reached the end, or a transaction starts at or past it. After
        a rotation the end can be the new file's first position while the last boundary seen is still in the
        old file; transactions start with a GTID (MySQL without GTIDs: an anonymous one) or a query event
        (BEGIN, or a DDL statement), never with a row event."""
        if self.end_key is None:
            return False
        if self.last is not None and self.last >= self.end_key:
            return True
        ev = _events()
        starts = isinstance(event, (*ev.gtid, ev.query)) or (
            isinstance(event, ev.unknown) and event.event_type == ANONYMOUS_GTID_EVENT)
        return starts and BinlogOffset(self.file, pos - int(event.packet.event_size)).position_key() >= self.end_key

    def _boundary(self, pos: int, held: list[BinlogRow] | None = None) -> Transaction | None:
        """The open transaction ends at ``pos``: it, unless a reconnect sent it again (not past the last)."""
        txn = None
        if not self._resent(pos):
            txn = Transaction(self.gtid, self.file, pos, self.ts, tuple(self.rows), xa=tuple(self.xa_here),
                              held=tuple(held or ()))
            self.last = BinlogOffset(self.file, pos).position_key()
        self.rows, self.count, self.gtid, self.in_pieces, self.ts_set = [], 0, None, "", False
        self.xa_open, self.xa_here = False, []
        self.group_start = (self.file, pos)
        return txn

    def _resent(self, pos: int) -> bool:
        """Whether the group ending at ``pos`` was read already (a reconnect sends from an earlier point)."""
        return self.last is not None and BinlogOffset(self.file, pos).position_key() <= self.last

    def _late(self, ts: int) -> bool:
        return self.skip_before is None or ts >= self.skip_before

    def on_unknown(self, event: Any, pos: int) -> None:
        """Events the library does not decode: an anonymous GTID (a transaction begins, MySQL without GTIDs),
        heartbeats and others without rows; one that may hold changes stops the read."""
        if event.event_type == ANONYMOUS_GTID_EVENT:
            self.ts, self.ts_set = int(event.timestamp), True
            self.group_start = (self.file, pos - int(event.packet.event_size))
        if event.event_type in UNREADABLE_EVENTS:
            raise ServerSettingError(f"the binlog holds an event at {self.file}:{pos} that cannot be read here: "
                                     f"{UNREADABLE_EVENTS[event.event_type]}")

    def on_gtid(self, event: Any, pos: int) -> None:
        self.rows, self.count = [], 0
        self.gtid = str(event.gtid)
        self.ts, self.ts_set = int(event.timestamp), True
        self.group_start = (self.file, pos - int(event.packet.event_size))
        # MariaDB marks the group of an XA transaction's prepare in its GTID event (FL_PREPARED_XA); MySQL
        # logs XA START (on_query)
        self.xa_open = bool(int(getattr(event, "flags", 0) or 0) & 64)

    def on_xa_prepare(self, event: Any, pos: int) -> Transaction | None:
        """XA PREPARE: the rows are in the binlog now, and invisible to every other session until XA COMMIT,
        which comes later in a group of its own (or XA ROLLBACK): held until then (:mod:`mysql_cdc.xa`)."""
        if self.in_pieces:  # the group was not known as an XA one when its rows went out
            raise BinlogError(f"the XA transaction prepared at {self.file}:{pos} had rows of {self.in_pieces} sent "
                              "on before its prepare was read: raise fetch_size above its rows and read it again")
        xid = Xid(bytes(event.xid_gtrid), bytes(event.xid_bqual), int(event.xid_format_id))
        held = [r for item in self.rows for r in as_rows(item)]
        if not self._resent(pos):
            self.prepared[xid] = held
            self.xa_here.append(("prepare", xid, self.group_start))
        self.rows, self.count = [], 0
        return self._boundary(pos, held)

    def on_xa_end(self, verb: str, xid: Xid, event: Any, pos: int) -> Transaction | None:
        """XA COMMIT: the prepared transaction's rows, delivered here, where they became visible (each row at
        this group's position, in the order it was written); XA ROLLBACK: dropped.

        The rows keep the change sequences of the events their prepare logged (``BinlogRow.seq``): the commit's
        one event has too few bytes to number them all, and numbering them past it would give them the
        sequences of the transactions after it. Each key's sequences still grow with its changes: the prepared
        transaction holds its rows' locks until its commit, so no other transaction changes them in between."""
        if self._resent(pos):
            return self._boundary(pos)
        held = self.prepared.pop(xid, None)
        if verb == "commit" and held is None:
            if self.find_prepared is None:
                raise BinlogError(f"XA COMMIT of {xid} at {self.file}:{pos}: its XA PREPARE comes before this read's "
                                  "start and was not given to it; read from before the prepare")
            held = self.find_prepared(xid, BinlogOffset(self.file, pos))
        self.xa_here.append((verb, xid, None))
        if verb == "commit" and held and self._late(int(event.timestamp)):
            start = pos - int(event.packet.event_size)
            ts = int(event.timestamp)
            self.rows = [r._replace(file=self.file, pos=pos, start=start, gtid=self.gtid, timestamp=ts,
                                    seq=change_sequence(r.file, r.start, 0) if r.seq is None else r.seq)
                         for r in held]
            self.count = len(self.rows)
        return self._boundary(pos)

    def on_commit(self, pos: int) -> Transaction | None:
        if not self._late(self.ts):
            self.rows, self.count = [], 0
        return self._boundary(pos)

    def on_query(self, event: Any, pos: int) -> Transaction | None:
        """A statement logged as SQL text: the start of a transaction (BEGIN), DDL (a transaction of its own,
        told to ``on_ddl`` and, on a captured table, to ``on_schema_change``), or a write of rows without rows
        (:class:`mysql_cdc.ddl.Statement`), which stops the read."""
        q = event.query.strip()
        if q.upper() == "BEGIN":
            return None
        if q[:2].upper() == "XA":
            xa = xa_statement(q)
            if xa is not None and xa[0] in ("commit", "rollback") and xa[1] is not None:
                return self.on_xa_end(xa[0], xa[1], event, pos)
            self.xa_open = self.xa_open or (xa is not None and xa[0] == "start")
            return None
        db = event.schema.decode() if isinstance(event.schema, bytes) else str(event.schema or "")
        late = self._late(int(event.timestamp))
        run = read_statement(q, db, self.flavor, self.server_version)
        if late and run.kind == "write" and (not self.allow_statement_writes or run.writes(self.tables)):
            raise run.write_error(self.tables, f"{self.file}:{pos}")
        as_logged = Statement(q, db)  # DDL as logged (versioned comments not read yet: see the schema history)
        if self.on_ddl is not None and late and as_logged.kind == "ddl":
            self.on_ddl(q, db)
        if self.on_schema_change is not None and late:
            for t in as_logged.changes(self.tables):
                self.on_schema_change(SchemaChange(t, q, self.file, pos, db, self.gtid))
        return self._boundary(pos)

    def on_rows(self, event: Any, pos: int) -> Transaction | None:
        """A rows event: its rows join the open transaction (images decoded by the table map's plan, else by
        the library); a piece of it when it holds ``piece`` rows."""
        if (event.schema, event.table) not in self.wanted:
            return None
        if self.sent_upto is not None and BinlogOffset(self.file, pos).position_key() <= self.sent_upto:
            return None  # re-sent after a reconnect: its rows went out in a piece already
        if not self.ts_set:
            self.ts, self.ts_set = int(event.timestamp), True
        where = f"{event.schema}.{event.table} at {self.file}:{pos}"
        if event.table_id not in self.described:
            check_described(event.columns, where)
            self.described.add(event.table_id)
        ev = _events()
        partial = isinstance(event, ev.partial)
        if self.decoders is not None:  # before the library decodes any row (refuse_partial_json does)
            self.decoders.for_library(event)
        if partial:
            refuse_partial_json(event.rows, where)
        start = pos - int(event.packet.event_size)
        if self.count_only and self.decoders is not None and not partial:
            n = self.decoders.count(event, where)
            images: Sequence[tuple[Any, ...]] | None = None if n is None else [()] * n  # without values: a count
        else:
            images = None if self.decoders is None or partial else self.decoders.images(
                event, where, update=isinstance(event, ev.update), columns=self.columns and not self.xa_open)
        if images is None:
            rows = list(_library_rows(event, where, self.file, pos, self.gtid, self.ts, start))
            self.rows.extend(rows)
            self.count += len(rows)
        else:
            op = "insert" if isinstance(event, ev.write) else "update" if isinstance(event, ev.update) else "delete"
            run = RowsRun(event.schema, event.table, op, images, self.file, pos, self.gtid, self.ts, start)
            # an XA transaction's rows are held, then delivered elsewhere: as rows
            self.rows.extend((run,) if self.runs and not self.xa_open else as_rows(run))
            self.count += run.row_total
        if self.piece and not self.xa_open and self.count >= self.piece:
            self.in_pieces = self.in_pieces or f"{self.rows[0].database}.{self.rows[0].table}"
            txn = Transaction(self.gtid, self.file, pos, self.ts, tuple(self.rows), complete=False)
            self.rows, self.count = [], 0
            self.sent_upto = BinlogOffset(self.file, pos).position_key()
            return txn
        return None



# how long a read waits for a server that ended its stream before the read's end to make the rest readable:
# the end was the server's own (a watermark, the binlog end it reported), so this passes only if its binlog was
# reset or it is another server
END_WAIT_SECONDS = 30.0


def read_transactions(profile: ConnectionProfile, server_id: int, start: BinlogOffset, tables: set[TableId], *,
                      flavor: str, auto_position: bool, end: BinlogOffset | None = None,
                      on_schema_change: Callable[[SchemaChange], None] | None = None,
                      skip_before: int | None = None, decode_rows: bool = True,
                      on_ddl: Callable[[str, str], None] | None = None,
                      decoders: RowDecoders | None = None, piece: int = 0,
                      server_version: tuple[int, int, int] | None = None,
                      allow_statement_writes: bool = False, xa_pending: Sequence[PendingXa] = (),
                      xa_search: bool = True, runs: bool = False, count_only: bool = False,
                      columns: bool = False, claim: Callable[[], AbstractContextManager[int]] | None = None,
                      wait_for_end: float = END_WAIT_SECONDS) -> Iterator[Transaction]:
    """Committed transactions touching ``tables`` after ``start``, with their captured rows.

    From ``start.file``/``start.pos`` (a transaction boundary), or with ``auto_position`` by GTID
    auto-positioning from ``start.gtids`` (MySQL: every transaction not in that set). Stops at ``end`` (a
    transaction boundary: transactions committed at or before it are read) or, without one, at the end of the
    binlog. Transactions that do not touch ``tables`` are yielded with no rows, so callers see boundaries
    move. A transaction whose boundary is not past the last one yielded is dropped: after a reconnect the
    library may re-send (from the start position, or from the GTID set), and nothing comes out twice.

    - ``skip_before`` drops events with a timestamp before it (startup from a timestamp);
    - ``decode_rows=False`` reads boundaries and DDL only: row events are not decoded (no rows);
    - ``on_ddl`` is told every DDL statement (with its default database) before the transaction it makes is
      yielded, ``on_schema_change`` every DDL statement on a captured table;
    - with ``decoders``, rows events of tables whose table map matches their schema are decoded by
      :mod:`udtf.binlog.rowimage` (images come as canonical tuples); others by the library (dicts);
    - with ``runs`` (and ``decoders``), the rows of an event decoded by a plan come as one :class:`RowsRun`
      (nothing made per row), except an XA transaction's; with ``columns`` too, its images are only walked
      where the table map has a column plan (:class:`udtf.binlog.columns.ColumnImages`, read into Arrow
      columns by the Spark surfaces);
    - with ``count_only`` (and ``decoders``), the images of an event decoded by a plan are counted, not read:
      each is an empty tuple (what a micro-batch's planning needs);
    - with ``piece`` > 0 (and no ``skip_before``), a transaction is yielded in pieces of about that many rows
      as its rows events arrive, so that memory holds a piece, not a whole transaction; its last piece comes
      at its commit (the binlog holds a transaction's rows only once it committed; an XA transaction's are held
      whole until its commit);
    - a statement logged as SQL text that may change rows stops the read, read as the server of
      ``server_version`` runs it (:class:`mysql_cdc.ddl.Statement`); with ``allow_statement_writes`` only one
      that names a captured table does;
    - an XA transaction's rows come at its XA COMMIT (none at a rollback), :mod:`mysql_cdc.xa`: those prepared
      before ``start`` and still open there are read first from ``xa_pending``; one committed here whose
      prepare is in neither is looked for in the binlog before (:func:`find_prepared`, under a server id from
      ``claim``; with ``xa_search`` False, such a commit delivers nothing: a read that looks for one prepare).

    A read with an ``end`` reads up to it: when the server ends the stream short of it (it sends what it has
    made readable, :func:`short_of`), the read goes on from there, for up to ``wait_for_end`` seconds, then stops
    with :class:`BinlogError`; it never returns short of its range.

    The events are framed by :class:`TransactionReader`."""
    from pymysqlreplication import BinLogStreamReader

    adapt_library()
    if end is not None and not auto_position and start.position_key() >= end.position_key():
        return
    settings = {"host": profile.host, "port": profile.port, "user": profile.user, "password": profile.login_password(),
                "charset": "utf8mb4", "connect_timeout": max(1, int(round(profile.connect_timeout))),
                "init_command": SESSION_INIT,
                "read_timeout": int(profile.read_timeout) or READ_TIMEOUT,
                **pymysql_kwargs(profile)}
    kw: dict[str, Any] = {}
    if auto_position:
        kw["auto_position"] = start.gtids or ""
    else:
        kw.update(log_file=start.file, log_pos=start.pos, resume_stream=True)
    ev = _events()
    stream = BinLogStreamReader(
        connection_settings=settings, server_id=server_id, blocking=False, pymysql_wrapper=guarded_connect,
        # PartialUpdateRowsEvent: an update logged with partial JSON (refused, never skipped);
        # NotImplementedEvent: events the library cannot decode, checked for compressed ones
        only_events=[*ev.gtid, ev.xid, ev.xa_prepare, ev.query, ev.rotate, ev.unknown,
                     *((ev.write, ev.update, ev.partial, ev.delete) if decode_rows else ())],
        filter_non_implemented_events=False,
        only_schemas=sorted({t.database for t in tables}), only_tables=sorted({t.table for t in tables}),
        # the library's MariaDB mode starts from a GTID state and ignores file/position
        is_mariadb=flavor == "mariadb" and auto_position, enable_logging=False, freeze_schema=True, **kw)
    common: dict[str, Any] = {"flavor": flavor, "decoders": decoders, "server_version": server_version,
                              "allow_statement_writes": allow_statement_writes}
    prepared = {p.xid: prepared_rows(profile, server_id, p, tables, **common) for p in xa_pending}
    reader = TransactionReader(start, tables, flavor=flavor, auto_position=auto_position, end=end,
                               on_schema_change=on_schema_change, skip_before=skip_before, on_ddl=on_ddl,
                               decoders=decoders, piece=piece, server_version=server_version,
                               allow_statement_writes=allow_statement_writes, prepared=prepared, runs=runs,
                               count_only=count_only, columns=columns,
                               find_prepared=functools.partial(find_prepared, profile, server_id, tables=tables,
                                                               claim=claim, **common)
                               if xa_search else lambda xid, at: [])
    try:
        waited_since, tries = None, 0
        while True:
            yield from reader.transactions(stream)
            reached = short_of(stream, end) if end is not None and not reader.done else None
            if reached is None:
                break
            # the server ended the read (its non-blocking dump sends what it has made readable) before ``end``,
            # which it reported earlier: read on from there once it has, never return short of the range
            now = time.monotonic()
            waited_since = waited_since or now
            if now - waited_since > wait_for_end:
                assert end is not None
                raise BinlogError(f"the server's binlog ends at {reached.file}:{reached.pos}, before this read's "
                                  f"end {end.file}:{end.pos}, and did not reach it within {wait_for_end:.0f} s (was "
                                  "the binlog reset, or the server replaced by another?): take a new snapshot")
            time.sleep(min(1.0, 0.05 * 2 ** tries))
            tries += 1
    except BinlogError:
        raise
    except Exception as e:
        raise _unreadable_start(e, start) from None
    finally:
        stream.close()


def short_of(stream: Any, end: BinlogOffset) -> BinlogOffset | None:
    """Where a binlog stream that ended stands when that is before ``end`` (``None``: at or past it, or not
    known). The library keeps the file and the end of the last event it received, of every kind (also those
    it filtered out: the format description and GTID list events at a file's start), so a stream that read
    up to ``end`` stands at or past it.

    >>> from types import SimpleNamespace as S
    >>> short_of(S(log_file="b.000002", log_pos=900), BinlogOffset("b.000002", 1200))
    BinlogOffset(file='b.000002', pos=900, gtids=None, kind='position')
    >>> short_of(S(log_file="b.000002", log_pos=1200), BinlogOffset("b.000002", 1200)), short_of(S(log_file=None,
    ...     log_pos=None), BinlogOffset("b.000002", 4))
    (None, None)
    """
    file, pos = getattr(stream, "log_file", None), getattr(stream, "log_pos", None)
    if not file or pos is None:
        return None
    reached = BinlogOffset(str(file), int(pos))
    return reached if reached.position_key() < end.position_key() else None


def _held(profile: ConnectionProfile, server_id: int, xid: Xid, start: BinlogOffset, end: BinlogOffset | None,
          tables: set[TableId], *, last: bool = False, **common: Any) -> list[BinlogRow] | None:
    """The rows the XA PREPARE of ``xid`` holds, read from ``start`` (a transaction boundary) up to ``end``;
    ``None`` when it is not there. With ``last`` (``end`` being where the commit in question ends), the last
    prepare of ``xid`` before it not ended before it (an xid may be used again once its transaction ended);
    else the first."""
    found: list[BinlogRow] | None = None
    for txn in read_transactions(profile, server_id, start, tables, auto_position=False, end=end, xa_search=False,
                                 **common):
        if end is not None and BinlogOffset(txn.file, txn.end).position_key() >= end.position_key():
            break  # the commit in question
        for verb, x, _ in txn.xa:
            if x != xid:
                continue
            if verb == "prepare":
                found = list(txn.held)
                if not last:
                    return found
            else:
                found = None
    return found


def prepared_rows(profile: ConnectionProfile, server_id: int, pending: PendingXa, tables: set[TableId],
                  **common: Any) -> list[BinlogRow]:
    """The rows of a prepared XA transaction still open at a read's start, read again where its group starts."""
    rows = _held(profile, server_id, pending.xid, BinlogOffset(pending.file, pending.pos), None, tables, **common)
    if rows is None:
        raise BinlogError(f"the XA transaction {pending.xid} prepared at {pending.file}:{pending.pos} and not "
                          "committed before this read's start is not found there (the binlog was purged?): take a "
                          "new snapshot")
    return rows


XA_LOOK_BACK_FILES = 2  # binlog files before an XA COMMIT searched for its prepare (see find_prepared)


def find_prepared(profile: ConnectionProfile, server_id: int, xid: Xid, before: BinlogOffset, *,
                  tables: set[TableId], claim: Callable[[], AbstractContextManager[int]] | None = None,
                  **common: Any) -> list[BinlogRow]:
    """The rows of the XA transaction committed at ``before`` whose prepare came before the read's start and
    was not given to it (a snapshot's correction, the binlog's start after a snapshot): its last prepare before
    the commit, looked for in the binlog file of the commit and the one before it. The search is a binlog read
    of its own while the read that met the commit is still open: it runs under another replica server id
    (``claim``; a second connection with the same id makes the server end the first)."""
    from mysql_cdc.udtf.binlog.startup import binary_logs

    files = [(f, size) for f, size in binary_logs(profile) if binlog_file_key(f) <= binlog_file_key(before.file)]
    if claim is None:
        raise BinlogError(f"XA COMMIT of {xid} at {before.file}:{before.pos}: its XA PREPARE comes before this "
                          "read's start and no replica server id was given to look for it; read from before the "
                          "prepare")
    with claim() as sid:
        for f, size in reversed(files[-XA_LOOK_BACK_FILES:]):
            end = before if f == before.file else BinlogOffset(f, size)
            rows = _held(profile, sid, xid, BinlogOffset(f, 4), end, tables, last=True, **common)
            if rows is not None:
                return rows
    raise BinlogError(f"XA COMMIT of {xid} at {before.file}:{before.pos}: its XA PREPARE is not in the "
                      f"{XA_LOOK_BACK_FILES} binlog files up to it, so its rows are not known: take a new snapshot")


def _unreadable_start(e: Exception, start: BinlogOffset) -> Exception:
    """The error for a read the server refused to start (1236: a purged file, a position inside an event); any
    other error as it is."""
    args = getattr(e, "args", ())
    if not (args and args[0] == 1236):
        return e
    said = str(args[1]) if len(args) > 1 else ""
    if re.search(r"could not find first log file|purged|not find.*binlog|binlog.*not.*found", said, re.I):
        return BinlogError(f"the server cannot send the binlog from {start.to_dict()!r}: {said!r}; the binlog "
                           "files this read needs were purged: take a new snapshot (start the stream with a new "
                           "state_dir and checkpoint)")
    return BinlogError(f"the server cannot send the binlog from {start.to_dict()!r}: {said!r}; a position must "
                       "be the end of an event (see SHOW BINLOG EVENTS), inside the file")


def read_row_changes(profile: ConnectionProfile, server_id: int, start: BinlogOffset, tables: set[TableId],
                     *, flavor: str, use_gtid: bool, done: Callable[[str | None, str, int], bool],
                     decoders: RowDecoders | None = None, server_version: tuple[int, int, int] | None = None,
                     allow_statement_writes: bool = False,
                     claim: Callable[[], AbstractContextManager[int]] | None = None) -> Iterator[BinlogRow]:
    """Row changes of ``tables`` from ``start`` (exclusive), transaction by transaction, until
    ``done(gtid, file, end)`` says so after a transaction (used by the snapshot backfill)."""
    for txn in read_transactions(profile, server_id, start, tables, flavor=flavor, auto_position=use_gtid,
                                 decoders=decoders, server_version=server_version,
                                 allow_statement_writes=allow_statement_writes, claim=claim):
        for item in txn.rows:
            yield from as_rows(item)
        if done(txn.gtid, txn.file, txn.end):
            return


def gtid_window_done(needed: GtidSet) -> Callable[[str | None, str, int], bool]:
    """A ``done`` test for a GTID backfill: true once every transaction of ``needed`` has passed."""
    remaining = needed.count()
    seen: set[str] = set()

    def done(gtid: str | None, file: str, pos: int) -> bool:
        if gtid is not None and gtid not in seen and needed.contains_gtid(gtid):
            seen.add(gtid)
        return len(seen) >= remaining

    return done


def position_window_done(high: BinlogOffset) -> Callable[[str | None, str, int], bool]:
    """A ``done`` test for a position backfill: true once the stream reached the high watermark."""
    target = high.position_key()

    def done(gtid: str | None, file: str, pos: int) -> bool:
        return BinlogOffset(file, pos).position_key() >= target

    return done


def _library_rows(ev: Any, where: str, file: str, pos: int, gtid: str | None, ts: int, ev_start: int
                  ) -> Iterator[BinlogRow]:
    """The rows of a rows event as python-mysql-replication decodes them (images as dicts)."""
    from pymysqlreplication.row_event import UpdateRowsEvent, WriteRowsEvent

    for i, row in enumerate(ev.rows):
        if isinstance(ev, WriteRowsEvent):
            yield BinlogRow(ev.schema, ev.table, "insert", None, library_image(row, "", where), file, pos, gtid, ts,
                            ev_start, i)
        elif isinstance(ev, UpdateRowsEvent):
            yield BinlogRow(ev.schema, ev.table, "update", library_image(row, "before_", where),
                            library_image(row, "after_", where), file, pos, gtid, ts, ev_start, i)
        else:
            yield BinlogRow(ev.schema, ev.table, "delete", library_image(row, "", where), None, file, pos, gtid, ts,
                            ev_start, i)
