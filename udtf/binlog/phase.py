"""The binlog phase: change rows after the recorded chunk watermarks, each change once.

Reads the binlog from the smallest high watermark of the captured tables' chunks (or from a startup offset)
up to an end, transaction by transaction (:mod:`.transactions`), and applies the emit rule (:mod:`.emit`) to
each row image: an image reaches the output when the chunk holding its key did not already reflect it. The
decision needs the key only while an event lies between a table's smallest and largest high watermark; after that every
event of the table is emitted. Keys are compared as the server orders them (:mod:`mysql_cdc.keyorder`).

An insert gives ``+I``, an update ``-U`` (before image) and ``+U`` (after image), a delete ``-D``. When a key
moves between chunks the two images of one update are judged separately, so one of them may be left out:
applying ``-U`` as a delete by identity and ``+U``/``+I`` as an upsert, in binlog order, on top of the
snapshot, gives the table.

A DDL statement on a captured table ends a stream's micro-batch just before it (:meth:`BinlogPhase.batch_end`),
so the stream can follow it (:mod:`udtf.spark.follow`); where it is not followed (option ``schema_changes``
stop, or a read that meets one it did not plan for) it stops the read with
:class:`~mysql_cdc.errors.SchemaChangedError` naming the table and the position.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, NamedTuple

from mysql_cdc.connect import ServerFacts, connect
from mysql_cdc.ddl import created_tables, dropped_tables, named_tables
from mysql_cdc.errors import SchemaChangedError
from mysql_cdc.ids import TableId
from mysql_cdc.keyorder import KeyOrder, key_value
from mysql_cdc.offsets import BinlogOffset, change_sequence
from mysql_cdc.options import CdcOptions
from mysql_cdc.profiles import ConnectionProfile
from mysql_cdc.schema import TableSchema
from mysql_cdc.udtf.binlog.catchup import keep_boundary, range_bytes, split_points
from mysql_cdc.udtf.binlog.columns import ColumnImages
from mysql_cdc.udtf.binlog.emit import EmitRule, SortKey
from mysql_cdc.udtf.binlog.emit_columns import emitted, stretches
from mysql_cdc.udtf.binlog.rowimage import RowDecoders
from mysql_cdc.udtf.binlog.server_ids import claimed_id
from mysql_cdc.udtf.binlog.startup import ReadFrom, binary_logs, server_end
from mysql_cdc.udtf.binlog.transactions import (
    BinlogRow,
    RowsRun,
    SchemaChange,
    Transaction,
    as_rows,
    image_count,
    read_transactions,
)
from mysql_cdc.udtf.convert import binlog_row_converter
from mysql_cdc.xa import after


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
    seq: int = 0  # the image's LONG sequence (offsets.change_sequence): unique, binlog order (XA: its prepare's)


ALTERNATING = "±U"  # a run of an update event's images: -U, +U, -U, +U, ...
_RUN_OPS = {"insert": "+I", "delete": "-D", "update": ALTERNATING}


class ChangeRun(NamedTuple):
    """Change rows of one rows event (or one change row) that share all but their values: what the Spark
    surfaces turn into Arrow columns without a Python object per row (:mod:`udtf.spark.output`). Image ``k``
    of the run has op ``op`` (``±U``: ``-U`` for even ``k``, ``+U`` for odd), values ``values[k]``, index
    ``row + k`` in its transaction and sequence ``seq + k``; the rest is the run's.

    >>> run = ChangeRun(TableId("d", "t"), ALTERNATING, [(1, "a"), (1, "b")], "b.000002", 900, 4, None, 7, 99)
    >>> [(c.op, c.values, c.row, c.seq) for c in run_changes(run)]
    [('-U', (1, 'a'), 4, 99), ('+U', (1, 'b'), 5, 100)]
    """

    table: TableId
    op: str  # +I, -U, +U, -D, or ±U (ALTERNATING)
    values: Sequence[tuple[Any, ...]]
    file: str
    pos: int
    row: int
    gtid: str | None
    timestamp: int
    seq: int


def run_changes(run: ChangeRun) -> Iterator[Change]:
    """A run's change rows, one by one."""
    t, op, f, p, r, g, ts, seq = run.table, run.op, run.file, run.pos, run.row, run.gtid, run.timestamp, run.seq
    if op != ALTERNATING:
        for k, vals in enumerate(run.values):
            yield Change(t, op, vals, f, p, r + k, g, ts, seq + k)
        return
    for k, vals in enumerate(run.values):
        yield Change(t, "+U" if k % 2 else "-U", vals, f, p, r + k, g, ts, seq + k)


def _image_seq(row: BinlogRow, image: int) -> int:
    """The change sequence of image ``image`` of ``row``'s event: where the event starts, or where an XA
    transaction's prepare logged it (``BinlogRow.seq``, kept when its rows are delivered at the commit)."""
    return change_sequence(row.file, row.start, image) if row.seq is None else row.seq + image


class _StopAtDdl(Exception):
    """Internal: a boundary scan met a DDL statement on a captured table."""


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
        # option before_images key: an update's before image is read for its primary and chunk keys alone (the
        # emit rule places it by the chunk key; the output keeps the primary key), its other values not at all
        keep = {t: {*s.positions(s.primary_key), *s.positions(s.chunk_key)} for t, s in schemas.items()
                if opts.before_images == "key" and s.primary_key}
        self.decoders = RowDecoders(schemas, opts.tinyint1_as_boolean, keep, planned=opts.row_decoder == "planned")
        self._names = {t: set(s.column_names) for t, s in schemas.items()}
        self._ids = {(t.database, t.table): t for t in schemas}
        self._ruled = any(rule is not None for rule in self.rules.values())
        self._orders = {t: KeyOrder(s) for t, s in schemas.items() if rules.get(t) is not None}
        self._keypos = {t: s.positions(s.chunk_key) for t, s in schemas.items()}
        self._conn: Any = None
        self.new_table_seen = False
        self.dropped: list[SchemaChange] = []
        self.seen: list[BinlogOffset] = []  # boundaries the last batch_end scan passed (see keep_boundary)
        self.seen_xa: dict[tuple[str, int], Any] = {}  # the XA transactions open at each of them
        self.transactions = 0
        self.last: BinlogOffset | None = None

    @property
    def _reading(self) -> dict[str, Any]:
        """How this phase's binlog reads see the server (:func:`read_transactions`' keyword arguments)."""
        return {"flavor": self.facts.flavor, "server_version": self.facts.version,
                "allow_statement_writes": self.opts.allow_statement_writes,
                "claim": functools.partial(claimed_id, self.profile, self.opts)}

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
        ``None``: the binlog end when the read starts): :meth:`runs`, row by row."""
        for run in self.runs(start, end):
            yield from run_changes(run)

    def runs(self, start: ReadFrom, end: BinlogOffset | None, columns: bool = False) -> Iterator[ChangeRun]:
        """The change rows of :meth:`changes` as :class:`ChangeRun` s: an event's rows decoded by a plan and
        emitted whole (no emit rule, or one that decides the event by its position) are one run; every other
        change row is a run of its own. With ``columns``, a run's values are a walk of its event's images
        where the table has a column plan (:class:`udtf.binlog.columns.ColumnImages`: for Arrow columns; a
        sequence of row tuples too, read when asked)."""
        if end is None:
            end = server_end(self.profile, self.facts)
        tables = set(self.schemas)
        first = 0
        with claimed_id(self.profile, self.opts) as sid:
            for txn in read_transactions(self.profile, sid, start.offset, tables, **self._reading,
                                         auto_position=start.auto_position, end=end,
                                         on_schema_change=self._on_schema_change, skip_before=start.skip_before,
                                         decoders=self.decoders, piece=self.opts.fetch_size, xa_pending=start.xa,
                                         runs=True, columns=columns):
                if txn.complete:
                    self.transactions += 1
                    self.last = BinlogOffset(txn.file, txn.end)
                yield from self._runs(txn, first)
                # a transaction read in pieces numbers its images on from piece to piece
                first = 0 if txn.complete else first + image_count(txn.rows)
        self.close()

    def batch_end(self, start: ReadFrom, end: BinlogOffset, max_rows: int = 0,
                  watch: Callable[[TableId], bool] | None = None, drops: bool = False,
                  follow: bool = False, max_bytes: int = 0) -> BinlogOffset:
        """Where a micro-batch that starts at ``start`` ends: ``end``, or earlier at the first transaction
        boundary by which ``max_rows`` (if > 0) change rows of the tables were written or ``max_bytes`` (if > 0)
        bytes of binlog were passed (a larger transaction is a batch of its own), or earlier still at the
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
        and statements only), with it their images are counted, not read
        (:func:`udtf.binlog.rowimage.compile_counter`). :attr:`pending_xa`: the XA transactions prepared and still
        open at the end returned (``start``'s, less those it commits or rolls back, and those it prepares)."""
        seen = passed = 0
        self.pending_xa = start.xa
        pending = start.xa
        last = start.offset
        ddl: list[SchemaChange] = []
        self.new_table_seen = False
        self.dropped = []
        self.seen = []
        self.seen_xa = {}
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
                                             decode_rows=max_rows > 0, on_ddl=statement, count_only=True,
                                             runs=True, decoders=self.decoders, piece=self.opts.fetch_size,
                                             xa_search=False):
                    seen += image_count(txn.rows)
                    if not txn.complete:
                        continue
                    passed += txn.end - (last.pos if txn.file == last.file else 0)
                    last = BinlogOffset(txn.file, txn.end)
                    pending = after(pending, txn.xa)
                    self.pending_xa = pending
                    keep_boundary(self.seen, last)
                    if self.seen[-1] is last:
                        self.seen_xa[(last.file, last.pos)] = pending
                    if self.dropped:  # the batch is the DROP statement alone
                        return last
                    if creating:  # the batch ends just after the statement: the next one adds the table
                        self.new_table_seen = True
                        return last
                    if (max_rows > 0 and seen >= max_rows) or (max_bytes > 0 and passed >= max_bytes):
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
                                       skip_before=start.skip_before, decode_rows=False, xa_search=False):
                pass
        return found

    def boundaries(self, start: ReadFrom, end: BinlogOffset) -> list[BinlogOffset]:
        """Ends of transactions after ``start`` up to ``end``, at most one per :data:`BOUNDARY_STEP` bytes (a
        boundary scan: no row is decoded, and a DDL statement is a boundary like any other)."""
        out: list[BinlogOffset] = []
        pending = start.xa
        self.seen_xa = {}  # the XA transactions open at each boundary kept, as batch_end notes them
        with claimed_id(self.profile, self.opts) as sid:
            for txn in read_transactions(self.profile, sid, start.offset, set(self.schemas), **self._reading,
                                         auto_position=start.auto_position, end=end, skip_before=start.skip_before,
                                         decode_rows=False, on_schema_change=lambda ch: None, xa_search=False):
                if not txn.complete:
                    continue
                pending = after(pending, txn.xa)
                last = BinlogOffset(txn.file, txn.end)
                keep_boundary(out, last)
                if out[-1] is last:
                    self.seen_xa[(last.file, last.pos)] = pending
        return out

    def cut_points(self, start: ReadFrom, end: BinlogOffset, parts: int, min_bytes: int,
                   boundaries: list[BinlogOffset] | None = None) -> list[BinlogOffset]:
        """Where a range is cut to be read by ``parts`` readers at once (parallel catch-up): transaction
        boundaries inside it, about as many bytes apart (:func:`split_points`); none when the range is too short
        (under ``min_bytes`` a part) or its start is a GTID set alone. ``boundaries``: the range's, when a scan
        already found them (:attr:`seen` after :meth:`batch_end`), else the range is scanned."""
        if parts < 2 or not start.offset.file:
            return []
        sizes = dict(binary_logs(self.profile))
        if range_bytes(start.offset, end, sizes) < 2 * min_bytes:  # too short to cut: no scan for boundaries
            return []
        found = self.boundaries(start, end) if boundaries is None else boundaries
        return split_points(start.offset, end, found, sizes, parts, min_bytes)

    @staticmethod
    def part_starts(start: ReadFrom, cuts: Sequence[BinlogOffset], xa_at: Mapping[tuple[str, int], Any]
                    ) -> list[ReadFrom]:
        """Where each part of a cut range starts: ``start``, then each cut, given the XA transactions open
        there (``xa_at``: :attr:`seen_xa` of the scan that found the cuts, :meth:`batch_end`'s or
        :meth:`boundaries`'). An xid committed and prepared again before a cut is open there with its new
        prepare, which the part after it delivers at its commit."""
        return [start, *(ReadFrom(BinlogOffset(c.file, c.pos), skip_before=start.skip_before,
                                  xa=xa_at.get((c.file, c.pos), start.xa)) for c in cuts)]

    def row_columns(self, start: ReadFrom, end: BinlogOffset) -> list[str] | None:
        """The columns (as the binlog's table map names them) of the first row of the tables changed after
        ``start`` up to ``end``; ``None`` when no row was."""
        # the library's images (dicts by name), an old temporal format read as the schema has it (oldtemporal.py)
        names = RowDecoders(self.schemas, self.opts.tinyint1_as_boolean, planned=False)
        with claimed_id(self.profile, self.opts) as sid:
            for txn in read_transactions(self.profile, sid, start.offset, set(self.schemas), **self._reading,
                                         auto_position=start.auto_position, end=end, skip_before=start.skip_before,
                                         on_schema_change=lambda ch: None, xa_search=False, decoders=names):
                for item in txn.rows:
                    r = as_rows(item)[0]
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

    def _runs(self, txn: Transaction, first: int) -> Iterator[ChangeRun]:
        """A transaction's change rows as runs: an event's rows (a :class:`RowsRun`) whole when every image of
        it is emitted without looking at keys; the emitted stretches of a walked event whose one-column integer
        chunk key the emit rule reads as a column (:mod:`.emit_columns`); row by row (:meth:`_transaction`)
        when the emit rule has to look at another key of one of its events."""
        decided: list[tuple[TableId, Any]] = []
        for item in txn.rows:
            t = self._ids.get((item.database, item.table)) or TableId(item.database, item.table)
            rule = self.rules.get(t)
            d: Any = True if rule is None else rule.decided(BinlogOffset(item.file, item.pos), item.gtid)
            if d is None:
                assert rule is not None
                d = self._emitted(t, rule, item)
            if d is None:
                rows = [r for it in txn.rows for r in as_rows(it)]
                for ch in self._transaction(rows, txn.timestamp, first):
                    yield ChangeRun(ch.table, ch.op, (ch.values,), ch.file, ch.pos, ch.row, ch.gtid, ch.timestamp,
                                    ch.seq)
                return
            decided.append((t, d))
        n = first
        ts = txn.timestamp
        for item, (t, d) in zip(txn.rows, decided):
            if isinstance(item, RowsRun):
                seq = change_sequence(item.file, item.start, 0)
                if d is True:
                    yield ChangeRun(t, _RUN_OPS[item.op], item.images, item.file, item.pos, n, item.gtid, ts, seq)
                elif d is not False:  # the images' verdicts: their emitted stretches
                    assert isinstance(item.images, ColumnImages)
                    for a, b, op in stretches(d, item.op == "update"):
                        vals = item.images.part(a, b) if op is None else [item.images[a]]
                        yield ChangeRun(t, op or _RUN_OPS[item.op], vals, item.file, item.pos, n + a, item.gtid, ts,
                                        seq + a)
                n += len(item.images)
                continue
            if not d:  # not converted: it may predate the table's snapshot and have another shape
                n += 1 + (item.op == "update")
                continue
            for ch in self._every_change((item,), ts, n):
                yield ChangeRun(t, ch.op, (ch.values,), ch.file, ch.pos, ch.row, ch.gtid, ts, ch.seq)
                n += 1

    def _emitted(self, t: TableId, rule: EmitRule, item: BinlogRow | RowsRun) -> Any:
        """The emit rule's verdict on each image of a walked rows event (a NumPy mask) where the table's chunk
        key is one column read as integers, else ``None`` (decided row by row)."""
        if not isinstance(item, RowsRun) or not isinstance(item.images, ColumnImages):
            return None
        kp = self._keypos[t]
        fits = len(kp) == 1 and item.images.span is None and rule.int_starts() is not None
        got = item.images.int_column(kp[0]) if fits else None
        if got is None:
            return None
        mask = emitted(rule, got[0], got[1], BinlogOffset(item.file, item.pos), item.gtid)
        return True if mask.all() else False if not mask.any() else mask

    def _every_change(self, rows: Sequence[BinlogRow], ts: int, first: int) -> Iterator[Change]:
        """:meth:`_transaction` where no table has an emit rule (a read past every chunk, or from an offset):
        every image is emitted, so none waits for a decision."""
        n = first
        for r in rows:
            t = self._ids.get((r.database, r.table)) or TableId(r.database, r.table)
            before, after = r.before, r.after
            if r.op == "update":
                assert before is not None and after is not None
                seq = _image_seq(r, 2 * r.ordinal)  # the +U image's is the next one
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
                             ts, _image_seq(r, r.ordinal))
                n += 1

    def _transaction(self, rows: Sequence[BinlogRow], ts: int, first: int = 0) -> Iterator[Change]:
        # decide: by position or GTID alone where the rule allows, by the key's chunk otherwise. An image its
        # table's chunks already hold everywhere is not converted: it may predate the table's snapshot (a table
        # added later, renamed into the capture) and have another shape (its table map then does not fit the
        # schema, so udtf.binlog.rowimage left it to the library, as a dict).
        if not self._ruled:
            yield from self._every_change(rows, ts, first)
            return
        images: list[tuple[TableId, str, tuple[Any, ...], Any]] = []
        verdict: list[bool | None] = []
        pending: dict[TableId, list[int]] = {}
        for r in rows:
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
            keys = {i: tuple(key_value(images[i][2][p]) for p in kp) for i in idx}
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
                yield Change(t, op, vals, r.file, r.pos, first + n, r.gtid, ts, _image_seq(r, image))




def executed_at(profile: ConnectionProfile, facts: ServerFacts, opts: CdcOptions, start: ReadFrom) -> BinlogOffset:
    """MySQL's executed GTID set at a transaction boundary ``start`` read by position (a GTID watermark of that
    point, for chunks recorded there: ``emit.outside_high``): the set at the binlog's end now, less the GTIDs of
    the transactions the binlog holds from ``start`` up to there (read as boundaries: no row is decoded)."""
    from mysql_cdc.offsets import GtidSet

    if start.auto_position:
        return BinlogOffset(start.offset.file, start.offset.pos, start.offset.gtids, "gtid")
    end = server_end(profile, facts)
    later = GtidSet.parse("")
    with claimed_id(profile, opts) as sid:
        for txn in read_transactions(profile, sid, start.offset, set(), flavor=facts.flavor, auto_position=False,
                                     end=end, decode_rows=False, server_version=facts.version,
                                     allow_statement_writes=True, xa_pending=start.xa, xa_search=False):
            if txn.gtid:
                later = later.union(GtidSet.parse(txn.gtid))
    now = GtidSet.parse(end.gtids).difference(later)
    return BinlogOffset(start.offset.file, start.offset.pos, str(now), "gtid")
