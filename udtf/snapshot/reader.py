"""The snapshot reader: one chunk between a low and a high watermark, corrected to the high watermark.

Watermarks are exact per server (docs/DESIGN.md §4), never a plain binlog position unless asked:

- ``snapshot`` (MariaDB): ``START TRANSACTION WITH CONSISTENT SNAPSHOT``, then ``binlog_snapshot_file`` /
  ``binlog_snapshot_position``, which match the transaction's read view exactly. The chunk SELECTed in that
  transaction is the table at that position: low = high, no backfill, rows stream straight out. One exception,
  found by the stateful property test: right after a binlog rotation MariaDB writes a ``Binlog_checkpoint``
  event, which moves the reported position to the binlog end, past transactions written to the binlog but not
  yet committed in the engine (invisible to the read view). When the event ending at the reported position is
  such a checkpoint, the chunk is read like ``position`` instead, from a low watermark every transaction before
  which is committed (the start of the file the checkpoint names): backfill and correction make it exact.
- ``gtid`` (MySQL with GTIDs): low = executed GTID set before the read view opens, high = executed set after
  the SELECT; the backfill replays the transactions in high - low (GTID auto-positioning from low).
- ``position`` (MySQL without GTIDs; the method of DBLog and Flink CDC): binlog end before and after,
  backfill between. A transaction written to the binlog but not yet committed in the engine while the low
  watermark is taken is lost by this method; it is here for servers without GTIDs, with a warning, and so
  tests can show the loss.

A table without a primary key cannot be corrected: its rows are identified by all their columns, two equal rows
are two rows, and a change the SELECT already saw would be applied twice. Its chunks are read at one exact
point instead, on every server and strategy (:meth:`SnapshotReader._read_pinned`): a second session holds
``LOCK TABLES <table> READ`` only while the reading transaction opens its read view and the binlog position
(and GTID set) is read. The lock waits for every transaction that wrote the table to end and keeps new ones
out, so the read view holds exactly the table's changes before that point and none after it: low = high, no
backfill. Writers of that table wait for the lock, a few milliseconds; a lock not granted within
:data:`PIN_LOCK_WAIT` seconds (a long transaction on the table) is tried again, then reported.

Memory is bounded by the chunk: the ``snapshot`` strategy streams batches; the others hold one chunk's rows. The
Spark readers read the next chunk ahead (:func:`udtf.spark.output.read_chunks`), so a worker holds two chunks.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from typing import Any

import pyarrow as pa

from mysql_cdc.chunks import Chunk
from mysql_cdc.connect import ServerFacts, connect_fast, streaming_cursor
from mysql_cdc.errors import LOCK_REFUSED, ConfigError, ServerSettingError, StateError, TableError, lock_refused
from mysql_cdc.ids import ident, quote_ident
from mysql_cdc.keyorder import KeyOrder, key_value
from mysql_cdc.offsets import BinlogOffset
from mysql_cdc.options import CdcOptions
from mysql_cdc.profiles import ConnectionProfile
from mysql_cdc.schema import TableSchema
from mysql_cdc.sql import select_chunk_sql
from mysql_cdc.udtf.binlog.rowimage import RowDecoders
from mysql_cdc.udtf.binlog.server_ids import claimed_id
from mysql_cdc.udtf.binlog.transactions import canonical_image, gtid_window_done, position_window_done, read_row_changes
from mysql_cdc.udtf.convert import (
    arrow_canonical,
    batch_to_rows,
    binlog_row_converter,
    columns_to_batch,
    select_expr,
    table_arrow_schema,
    value_converter,
)
from mysql_cdc.udtf.snapshot.correct import RowChange, correct_chunk, undo_changes
from mysql_cdc.udtf.snapshot.fast_select import FastPathUnavailable, fast_columns, fast_select

log = logging.getLogger("mysql_cdc")
ARROW_BATCH_ROWS = 65536
PIN_LOCK_WAIT = 1  # seconds a table without a primary key waits for its brief read lock, per attempt
PIN_ATTEMPTS = 30
PIN_PAUSE = 0.5  # seconds between attempts: the table's writers queued behind a pending lock go on meanwhile


@dataclass
class Hooks:
    """Test hooks between snapshot phases: after the low watermark (read view open, before the SELECT) and
    before the high watermark (after the SELECT)."""

    after_low_watermark: Callable[[Chunk], None] | None = None
    before_high_watermark: Callable[[Chunk], None] | None = None


def choose_strategy(facts: ServerFacts, requested: str) -> str:
    if requested == "auto":
        if facts.flavor == "mariadb":
            return "snapshot"
        if facts.gtid_mode:
            return "gtid"
        log.warning("MySQL without GTIDs: falling back to plain binlog-position watermarks, which can miss a "
                    "transaction that is in the binlog but not yet committed while a chunk starts; enable "
                    "gtid_mode=ON and enforce_gtid_consistency=ON for exact watermarks")
        return "position"
    if requested == "snapshot" and facts.flavor != "mariadb":
        raise ConfigError("watermark 'snapshot' needs MariaDB (binlog_snapshot_position); use 'auto' or 'gtid'")
    if requested == "gtid" and not facts.gtid_mode:
        raise ServerSettingError(f"watermark 'gtid' needs MySQL with gtid_mode=ON; server {facts.version_text!r} "
                                 f"has gtid_mode={facts.variables.get('gtid_mode')!r}")
    return requested


def checkpoint_sizes(file: str) -> list[int]:
    """Possible byte sizes of a MariaDB ``Binlog_checkpoint`` event in ``file``: the 19-byte header, the name
    length (4 bytes), the name of a binlog file (this one, or an older one with a digit less after a rollover)
    and a CRC32 checksum unless checksums are off.

    >>> checkpoint_sizes("binlog.000002")
    [40, 36, 39, 35]
    """
    return [19 + 4 + n + crc for n in (len(file), len(file) - 1) for crc in (4, 0)]


def unsafe_snapshot_low(conn: Any, pos: BinlogOffset) -> BinlogOffset | None:
    """MariaDB: if the event that ends at the consistent-snapshot position ``pos`` is a ``Binlog_checkpoint``,
    the position may be past transactions the read view does not see; return a safe low watermark (the start
    of the file the checkpoint names: every transaction before it is committed, which is what the checkpoint
    records). ``None`` when ``pos`` ends a transaction, as it does outside that window."""
    cur = conn.cursor()
    try:
        for size in checkpoint_sizes(pos.file):
            start = pos.pos - size
            if start < 4:
                continue
            try:
                cur.execute(f"SHOW BINLOG EVENTS IN %s FROM {int(start)} LIMIT 1", (pos.file,))
            except Exception as e:
                if getattr(e, "args", (None,))[0] == 1220:  # not an event start: not this size
                    continue
                raise
            row = cur.fetchone()
            if row is not None and str(row[2]) == "Binlog_checkpoint" and int(row[4]) == pos.pos:
                named = str(row[5]).strip() or pos.file
                return BinlogOffset(named, 4, None, "position")
        return None
    finally:
        cur.close()


def snapshot_position(conn: Any) -> BinlogOffset:
    """MariaDB: the binlog point of ``conn``'s read view (opened by ``START TRANSACTION WITH CONSISTENT
    SNAPSHOT``), a watermark of kind ``snapshot``."""
    cur = conn.cursor()
    cur.execute("SHOW STATUS LIKE 'binlog_snapshot_%'")
    vals = {str(k).lower(): str(v) for k, v in cur.fetchall()}
    cur.close()
    return BinlogOffset(vals["binlog_snapshot_file"], int(vals["binlog_snapshot_position"]), None, "snapshot")


@dataclass
class ChunkRead:
    """The result of reading one chunk: its watermarks and its corrected rows as Arrow record batches in the
    canonical schema (:func:`udtf.convert.table_arrow_schema`)."""

    chunk: Chunk
    low: BinlogOffset
    high: BinlogOffset
    batches: Iterator[pa.RecordBatch]
    rows: int = 0
    corrected: int = 0  # binlog row changes applied by the correction
    path: str = "mysqlclient"  # or "arrow" (connectorx)


def _columnar(rows: list[tuple[Any, ...]], convs: list[Any], width: int) -> list[list[Any]]:
    cols: list[list[Any]] = [list(c) for c in zip(*rows)] if rows else [[] for _ in range(width)]
    for i, f in convs:
        col = cols[i]
        cols[i] = [None if v is None else f(v) for v in col]
    return cols


class SnapshotReader:
    """Reads chunks of one table. ``fast`` uses the Arrow-native SELECT (connectorx) where the table's types
    allow it and no test hook needs a pause inside the read; otherwise, and whenever that path fails, the
    mysqlclient path reads the same rows."""

    def __init__(self, profile: ConnectionProfile, schema: TableSchema, facts: ServerFacts, opts: CdcOptions,
                 hooks: Hooks | None = None, connect: Callable[[ConnectionProfile], Any] = connect_fast,
                 fast: bool = True) -> None:
        self.profile = profile
        self.schema = schema
        self.facts = facts
        self.opts = opts
        self.hooks = hooks or Hooks()
        self.connect = connect
        self.strategy = choose_strategy(facts, opts.watermark)
        self.key_order = KeyOrder(schema)
        self.arrow_schema = table_arrow_schema(schema.columns, opts.tinyint1_as_boolean)
        self.fast = fast and fast_columns(schema) is not None
        self.pinned = not schema.primary_key  # rows identified by all columns: read at one exact point
        self._convs = [(i, f) for i, c in enumerate(schema.columns)
                       if (f := value_converter(c, opts.tinyint1_as_boolean)) is not None]
        self._decoders = RowDecoders({schema.table: schema}, opts.tinyint1_as_boolean,
                                     planned=opts.row_decoder == "planned")

    # -- watermarks --
    def _binlog_end(self, conn: Any, kind: str) -> BinlogOffset:
        cur = conn.cursor()
        cur.execute(self.facts.status_sql)
        row = cur.fetchone()
        cur.close()
        if row is None:
            raise ServerSettingError("the server reports no binlog position: enable log_bin")
        gtids = str(row[4]).replace("\n", "") if len(row) > 4 and row[4] is not None else None
        return BinlogOffset(str(row[0]), int(row[1]), gtids if self.facts.flavor == "mysql" else None, kind)

    def binlog_end_now(self) -> BinlogOffset:
        """The binlog's end now, as a watermark of this reader's kind."""
        conn = self.connect(self.profile)
        try:
            kind = {"gtid": "gtid", "snapshot": "snapshot"}.get(self.strategy, "position")
            return self._binlog_end(conn, kind)
        finally:
            conn.close()

    def _snapshot_position(self, conn: Any) -> BinlogOffset:
        return snapshot_position(conn)

    # -- reading --
    def read(self, chunk: Chunk, as_of: BinlogOffset | None = None) -> ChunkRead:
        """The chunk's rows, exact at the high watermark of the result. ``as_of``: the high watermark a former
        read of this chunk recorded (the binlog phase starts there); a table without a primary key is brought
        back to it (:meth:`_read_pinned`), a keyed table needs not be (its changes apply idempotently)."""
        if chunk.table != self.schema.table:
            raise ConfigError(f"chunk {chunk.id!r} is not of table {str(self.schema.table)!r}")
        if tuple(chunk.key_columns) != tuple(self.schema.chunk_key):
            raise ConfigError(f"chunk {chunk.id!r} is split by {list(chunk.key_columns)!r}, but the table's chunk key "
                              f"is {list(self.schema.chunk_key)!r}: plan the chunks again with the same chunk_key")
        if chunk.nullable != self.schema.nullable_key:  # a chunk-table row does not say; the schema does
            chunk = replace(chunk, nullable=self.schema.nullable_key)
        if chunk.nulls and not chunk.nullable:
            raise ConfigError(f"chunk {chunk.id!r} is the chunk of NULL keys, but the chunk key of "
                              f"{str(self.schema.table)!r} is NOT NULL: plan the chunks again")
        if self.pinned:
            return self._read_pinned(chunk, as_of)
        if self.strategy == "snapshot" and self.fast and not self.hooks.after_low_watermark \
                and not self.hooks.before_high_watermark:
            try:
                fast = self._read_snapshot_arrow(chunk)
                if fast is not None:
                    return fast
            except FastPathUnavailable as e:
                log.info("%s; reading it with mysqlclient", e)
        conn = self.connect(self.profile)
        try:
            if self.strategy == "snapshot":
                return self._read_streaming(conn, chunk)
            return self._read_with_backfill(conn, chunk)
        except BaseException:
            conn.close()
            raise

    def _rows_table(self, rows: list[tuple[Any, ...]]) -> pa.Table:
        """Rows already in canonical form (read back from batches, or binlog images) as one Arrow table."""
        cols = [list(c) for c in zip(*rows)] if rows else [[] for _ in self.schema.columns]
        return pa.Table.from_batches([columns_to_batch(cols, self.arrow_schema)])

    def _batches(self, table: pa.Table) -> Iterator[pa.RecordBatch]:
        # whole chunks are in memory already: hand them on in large batches (fewer round trips to the JVM)
        yield from table.combine_chunks().to_batches(max_chunksize=max(self.opts.fetch_size, ARROW_BATCH_ROWS))

    def _read_snapshot_arrow(self, chunk: Chunk) -> ChunkRead | None:
        """MariaDB: the consistent-snapshot transaction, its binlog position and the chunk in one statement on
        one connection. An empty chunk returns no row to carry the position: ``None`` (use the other path)."""
        status = ("(SELECT VARIABLE_VALUE FROM information_schema.SESSION_STATUS "
                  "WHERE VARIABLE_NAME = 'BINLOG_SNAPSHOT_{}')")
        table = fast_select(self.profile, self.schema, chunk, pre=["START TRANSACTION WITH CONSISTENT SNAPSHOT"],
                            extra=[status.format("FILE") + " AS `__snap_file`",
                                   status.format("POSITION") + " AS `__snap_pos`"])
        if table.num_rows == 0:
            return None
        file = str(table.column("__snap_file")[0].as_py())
        pos = int(table.column("__snap_pos")[0].as_py())
        n = len(self.schema.columns)
        data = arrow_canonical(table.select(list(range(n))), self.schema.columns, self.opts.tinyint1_as_boolean)
        offset = BinlogOffset(file, pos, None, "snapshot")
        conn = self.connect(self.profile)
        try:
            low = unsafe_snapshot_low(conn, offset)
            if low is not None:
                log.info("chunk %s: the snapshot position %s:%s follows a binlog checkpoint; correcting from %s:%s",
                         chunk.id, file, pos, low.file, low.pos)
                return self._corrected(conn, chunk, low, data, "arrow")
        finally:
            conn.close()
        return ChunkRead(chunk, offset, offset, self._batches(data), rows=data.num_rows, path="arrow")

    def _select(self, conn: Any, chunk: Chunk) -> Iterator[list[tuple[Any, ...]]]:
        sql, params = select_chunk_sql(chunk, self.schema.column_names,
                                       [select_expr(c, ident(c.name)) for c in self.schema.columns])
        cur = streaming_cursor(conn)
        try:
            cur.execute(sql, params)
            while True:
                rows = cur.fetchmany(self.opts.fetch_size)
                if not rows:
                    break
                yield list(rows)
        finally:
            cur.close()

    def _pin(self, lock: Any, conn: Any) -> BinlogOffset:
        """Open ``conn``'s read view while ``lock`` holds the table's read lock; the binlog point it matches.

        A pending table lock queues the table's new writers behind it, so each attempt waits at most
        :data:`PIN_LOCK_WAIT` seconds and the next one comes after a pause in which they get through."""
        cur = lock.cursor()
        try:
            cur.execute(f"SET SESSION lock_wait_timeout = {PIN_LOCK_WAIT}")
            for attempt in range(1, PIN_ATTEMPTS + 1):
                try:
                    cur.execute(f"LOCK TABLES {self.schema.table.quoted()} READ")
                    break
                except Exception as e:
                    code = e.args[0] if getattr(e, "args", None) else None
                    if code in LOCK_REFUSED:
                        raise lock_refused(str(self.schema.table), quote_ident(self.schema.table.database),
                                           code) from None
                    if code != 1205:
                        raise
                    if attempt == PIN_ATTEMPTS:
                        raise TableError(
                            f"table {str(self.schema.table)!r} (no primary key) could not be read-locked for a "
                            f"moment in {PIN_ATTEMPTS} tries of {PIN_LOCK_WAIT} s: a transaction that writes it "
                            "stays open that long; end long transactions on it, or add a primary key") from None
                    log.info("table %s: read lock not granted in %s s (attempt %s)", self.schema.table,
                             PIN_LOCK_WAIT, attempt)
                    time.sleep(PIN_PAUSE)
            try:
                conn.query("START TRANSACTION WITH CONSISTENT SNAPSHOT")
                if self.strategy == "snapshot":
                    return self._snapshot_position(conn)
                return self._binlog_end(lock, "gtid" if self.strategy == "gtid" else "position")
            finally:
                with contextlib.suppress(Exception):  # closing the session releases the lock anyway
                    cur.execute("UNLOCK TABLES")
        finally:
            cur.close()

    def _read_pinned(self, chunk: Chunk, as_of: BinlogOffset | None) -> ChunkRead:
        """A chunk of a table without a primary key: its rows at one exact point (see the module docstring).
        Read again after a crash (``as_of`` recorded by the former read), the rows are brought back to that
        point by undoing the table's changes between it and now (:func:`udtf.snapshot.correct.undo_changes`): the output
        is then the same multiset whichever read's output a sink keeps, and the binlog phase applies each later
        change exactly once to it."""
        lock = self.connect(self.profile)
        try:
            conn = self.connect(self.profile)
            try:
                pos = self._pin(lock, conn)
            except BaseException:
                conn.close()
                raise
        finally:
            lock.close()
        if self.hooks.after_low_watermark:
            try:
                self.hooks.after_low_watermark(chunk)
            except BaseException:
                conn.close()
                raise
        read = self._stream(conn, chunk, pos)
        if as_of is None or as_of.to_dict() == pos.to_dict():
            return read
        if (as_of.kind == "gtid") != (pos.kind == "gtid"):
            conn.close()
            raise StateError(f"chunk {chunk.id!r} was recorded at {as_of.to_dict()!r}, with {as_of.kind} watermarks, "
                             f"but is read now with {pos.kind} ones (the server's GTID mode or the watermark option "
                             "changed): take a new snapshot (a new state_dir and checkpoint)")
        rows = [r for b in read.batches for r in batch_to_rows(b)]
        changes = self._backfill(as_of, pos)
        undone = 0
        if changes:
            images = [img for ch in changes for img in (ch.before, ch.after) if img is not None]
            with contextlib.closing(self.connect(self.profile)) as c:
                in_chunk = self._in_chunk(c, chunk, images)
            undone = sum(1 for img in images if in_chunk(img))
            rows = undo_changes(rows, changes, in_chunk)
        data = self._rows_table(rows)
        log.info("chunk %s read again at %s: %s row images of it since its recorded point %s undone", chunk.id,
                 pos.to_dict(), undone, as_of.to_dict())
        return ChunkRead(chunk, as_of, as_of, self._batches(data), rows=len(rows), corrected=undone)

    def _read_streaming(self, conn: Any, chunk: Chunk) -> ChunkRead:
        conn.query("START TRANSACTION WITH CONSISTENT SNAPSHOT")
        pos = self._snapshot_position(conn)
        if self.hooks.after_low_watermark:
            self.hooks.after_low_watermark(chunk)
        width = len(self.schema.columns)
        low = unsafe_snapshot_low(conn, pos)
        if low is not None:
            log.info("chunk %s: the snapshot position %s:%s follows a binlog checkpoint; correcting from %s:%s",
                     chunk.id, pos.file, pos.pos, low.file, low.pos)
            rows: list[tuple[Any, ...]] = []
            for batch in self._select(conn, chunk):
                rows.extend(batch)
            conn.query("COMMIT")
            data = pa.Table.from_batches([columns_to_batch(_columnar(rows, self._convs, width), self.arrow_schema)])
            try:
                return self._corrected(conn, chunk, low, data, "mysqlclient")
            finally:
                conn.close()
        return self._stream(conn, chunk, pos)

    def _stream(self, conn: Any, chunk: Chunk, pos: BinlogOffset) -> ChunkRead:
        """The chunk's rows from ``conn``'s open read view, which is the table at ``pos`` (low = high)."""
        width = len(self.schema.columns)
        result = ChunkRead(chunk, pos, pos, iter(()))

        def gen() -> Iterator[pa.RecordBatch]:
            try:
                for rows in self._select(conn, chunk):
                    result.rows += len(rows)
                    yield columns_to_batch(_columnar(rows, self._convs, width), self.arrow_schema)
                if self.hooks.before_high_watermark:
                    self.hooks.before_high_watermark(chunk)
                conn.query("COMMIT")
            finally:
                conn.close()

        result.batches = gen()
        return result

    def _read_with_backfill(self, conn: Any, chunk: Chunk) -> ChunkRead:
        kind = "gtid" if self.strategy == "gtid" else "position"
        low = self._binlog_end(conn, kind)
        path = "mysqlclient"
        data: pa.Table | None = None
        hooked = False
        if self.fast:
            # the SELECT's read view opens at the statement, after the low watermark was read
            if self.hooks.after_low_watermark:
                self.hooks.after_low_watermark(chunk)
                hooked = True
            try:
                data = arrow_canonical(fast_select(self.profile, self.schema, chunk), self.schema.columns,
                                       self.opts.tinyint1_as_boolean)
                path = "arrow"
            except FastPathUnavailable as e:
                log.info("%s; reading it with mysqlclient", e)
        if data is None:
            conn.query("START TRANSACTION WITH CONSISTENT SNAPSHOT")
            if self.hooks.after_low_watermark and not hooked:
                self.hooks.after_low_watermark(chunk)
            rows: list[tuple[Any, ...]] = []
            for batch in self._select(conn, chunk):
                rows.extend(batch)
            conn.query("COMMIT")
            cols = _columnar(rows, self._convs, len(self.schema.columns))
            data = pa.Table.from_batches([columns_to_batch(cols, self.arrow_schema)])
        result = self._corrected(conn, chunk, low, data, path, kind)
        conn.close()
        return result

    def _corrected(self, conn: Any, chunk: Chunk, low: BinlogOffset, data: pa.Table, path: str,
                   kind: str = "position") -> ChunkRead:
        """The SELECTed rows ``data``, corrected with the binlog from ``low`` to the high watermark read now
        (after the SELECT). Also MariaDB's path after a binlog checkpoint (see the module docstring)."""
        if self.hooks.before_high_watermark:
            self.hooks.before_high_watermark(chunk)
        high = self._binlog_end(conn, kind)
        changes = self._backfill(low, high)
        result = ChunkRead(chunk, low, high, iter(()), rows=data.num_rows, path=path)
        if changes:
            current = [r for b in data.to_batches() for r in batch_to_rows(b)]
            fixed = self._correct(conn, chunk, current, changes)
            result.corrected = len(changes)
            result.rows = len(fixed)
            data = self._rows_table(fixed)
        result.batches = self._batches(data)
        return result

    def _backfill(self, low: BinlogOffset, high: BinlogOffset) -> list[RowChange]:
        if self.strategy == "gtid":
            needed = high.gtid_set().difference(low.gtid_set())
            if not needed:
                return []
            done = gtid_window_done(needed)
            keep: Callable[[Any], bool] = lambda r: r.gtid is not None and needed.contains_gtid(r.gtid)  # noqa: E731
        else:
            if high.position_key() <= low.position_key():
                return []
            done = position_window_done(high)
            target = high.position_key()
            keep = lambda r: BinlogOffset(r.file, r.pos).position_key() <= target  # noqa: E731
        conv = binlog_row_converter(self.schema.columns, self.opts.tinyint1_as_boolean)
        changes: list[RowChange] = []
        with claimed_id(self.profile, self.opts) as sid:
            for r in read_row_changes(self.profile, sid, low, {self.schema.table}, flavor=self.facts.flavor,
                                      use_gtid=self.strategy == "gtid", done=done, decoders=self._decoders,
                                      server_version=self.facts.version,
                                      allow_statement_writes=self.opts.allow_statement_writes,
                                      claim=lambda: claimed_id(self.profile, self.opts)):
                if keep(r):
                    changes.append(RowChange(r.op, None if r.before is None else canonical_image(r.before, conv),
                                             None if r.after is None else canonical_image(r.after, conv)))
        return changes

    def _in_chunk(self, conn: Any, chunk: Chunk, images: list[tuple[Any, ...]]) -> Callable[[tuple[Any, ...]], bool]:
        """Whether an image (one of ``images``) has its key in the chunk: in its range, with no NULL in it for a
        nullable key; with a NULL in it for the chunk of NULL keys."""
        key_pos = self.schema.positions(self.schema.chunk_key)
        keys = [tuple(key_value(img[i]) for i in key_pos) for img in images]
        ranged = [(img, k) for img, k in zip(images, keys) if None not in k]
        nulls = {id(img) for img, k in zip(images, keys) if None in k}
        bounds = [b for b in (chunk.start, chunk.end) if b is not None]
        sks = self.key_order.sort_keys(conn, [*(k for _, k in ranged), *bounds]) if (ranged or bounds) else []
        sk_of = {id(img): sk for (img, _), sk in zip(ranged, sks)}
        start_sk = sks[len(ranged)] if chunk.start is not None else None
        end_sk = sks[-1] if chunk.end is not None else None

        def in_chunk(img: tuple[Any, ...]) -> bool:
            if id(img) in nulls:
                return chunk.nulls
            if chunk.nulls:
                return False
            sk = sk_of[id(img)]
            return (start_sk is None or sk >= start_sk) and (end_sk is None or sk < end_sk)

        return in_chunk

    def _correct(self, conn: Any, chunk: Chunk, rows: list[tuple[Any, ...]], changes: list[RowChange]
                 ) -> list[tuple[Any, ...]]:
        id_pos = self.schema.positions(self.schema.identity)
        images = [img for ch in changes for img in (ch.before, ch.after) if img is not None]
        return correct_chunk(rows, changes, identity=lambda r: tuple(r[i] for i in id_pos),
                             in_chunk=self._in_chunk(conn, chunk, images))


