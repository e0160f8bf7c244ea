"""Verify a mirror against its source: every table compared by checksums of its rows, at one binlog point,
without a row leaving the server unless it differs.

For each table (docs/DESIGN.md §14):

1. **The mirror, pinned.** The table's current version is read, and the batch it holds (its last commit of
   this sync's query, Delta's ``txn``) with the last batch the sync's checkpoint committed before that: the
   table then equals its source at the end of the later of the two batches (every batch's tables commit before
   its checkpoint entry, and batches commit in order), a binlog point ``P`` read from the checkpoint's offset.
2. **The source, in one read view.** ``START TRANSACTION WITH CONSISTENT SNAPSHOT`` (no lock), bracketed by the
   binlog points ``low`` and ``high`` (equal on MariaDB: the view's own point); each chunk of the capture's plan
   gives one query: its rows' count and sum of row hashes (``checksum``), summed on the server.
3. **The keys in flux.** Every key the binlog changed between ``min(P, low)`` and ``max(P, high)`` may differ
   between the two sides for a good reason: those keys are read on both sides (by key: an index lookup in the
   same read view, a join on the mirror) and taken out of both sums, and are not compared. For every other key
   the row at ``P`` is the row at the view's point, so both sides must agree exactly.
4. **The mirror's side** is one Spark job over the pinned version: count and sum, of the whole table or, where
   the key is one integer column, per region of it (runs of chunks: :mod:`.regions`). Where the two sides'
   sums differ (less the keys in flux), both sides are summed again per bucket of keys (the CRC-32 of the
   key's text), in the same read view and version, over the regions that differ alone: a clean table costs one
   pass without the keys' texts and the grouping, a damaged one a second pass over its damaged regions.
5. **Differing buckets are narrowed down** to their keys (the bucket's rows with their hashes from both
   sides), and the differing keys are checked once more after the sync's next batch (``recheck_seconds`` at
   most; no wait where no sync holds the state dir) against a newer point: a key that the sync had not applied
   yet then agrees (a transaction held between its binlog write and its engine commit can fall outside the
   window of step 3); one that still differs is reported.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import logging
import time
import urllib.parse
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from decimal import Decimal
from functools import partial
from typing import Any, Literal

import pyarrow as pa

from mysql_cdc.chunks import Chunk, Key
from mysql_cdc.connect import ServerFacts, connect
from mysql_cdc.errors import ConfigError, MysqlCdcError
from mysql_cdc.ids import TableId, ident, table_ident
from mysql_cdc.keyrange import EXACT_LIMIT, KeyRange, column_value, range_problem, shown_value
from mysql_cdc.offsets import BinlogOffset
from mysql_cdc.options import CdcOptions
from mysql_cdc.planner.splitter import cut_range
from mysql_cdc.profiles import ConnectionProfile
from mysql_cdc.schema import ColumnInfo, TableSchema
from mysql_cdc.sql import chunk_where
from mysql_cdc.state.store import StateStore
from mysql_cdc.types import spark_type
from mysql_cdc.udtf.binlog.spellings import keys_changed
from mysql_cdc.udtf.binlog.startup import server_end
from mysql_cdc.udtf.convert import columns_to_batch, table_arrow_schema
from mysql_cdc.udtf.snapshot.reader import snapshot_position
from mysql_cdc.udtf.sync import checksum as cs
from mysql_cdc.udtf.sync.job import batch_end, committed_batches, query_app_id
from mysql_cdc.udtf.sync.lake_types import Format, to_lake
from mysql_cdc.udtf.sync.regions import Regions, regions
from mysql_cdc.udtf.sync.sinks import quote

_log = logging.getLogger("mysql_cdc.verify")
_KEYS_PER_QUERY = 500
_PLAIN_FEATURES = {"timestampNtz", "v2Checkpoint", "vacuumProtocolCheck"}  # change nothing of a Parquet file's read
_SHOWN = 20  # differing keys named per table and kind
_NARROWED = 64  # differing buckets narrowed down to their keys per table (each is read from both sides)


# how verify's second look at the keys that differed ended its wait: the sync committed a batch; no sync holds the
# state dir (none will come); --recheck-seconds passed
Recheck = Literal["", "a batch", "no sync", "timed out"]


class VerifyError(MysqlCdcError):
    """A mirror table could not be verified (its point unknown, its binlog purged, its format unread)."""


@dataclass(frozen=True)
class TableCheck:
    """The verification of one table."""

    table: str
    rows: int = 0  # rows compared (the source's, less the keys in flux)
    chunks: int = 0
    in_flux: int = 0  # keys the binlog changed between the two points: left out
    missing: tuple[str, ...] = ()  # keys in the source, not in the mirror
    extra: tuple[str, ...] = ()  # keys in the mirror, not in the source
    changed: tuple[str, ...] = ()  # keys whose row differs
    twice: tuple[str, ...] = ()  # keys the mirror holds more than once
    differing: int = 0  # how many keys differ (the tuples above name at most _SHOWN each)
    buckets: int = 0  # buckets of keys that differ, not narrowed down to keys
    not_checked: str = ""  # why the table was not compared
    point: str = ""  # the mirror's binlog point
    seconds: float = 0.0
    source_seconds: float = 0.0  # of which the source's checksums
    mirror_seconds: float = 0.0  # and the mirror's (run at the same time)
    by_bucket: bool = False  # the totals differed, so both sides were summed again by buckets of keys
    regions: int = 0  # regions of the key summed apart in the first pass (0: the whole table's totals)
    regions_again: int = 0  # regions whose sums differed: the second pass summed only those by buckets
    waited: float = 0.0  # seconds the second look at differing keys waited for the sync's next batch
    recheck: Recheck = ""  # how that wait ended ("" where no key differed at first, or --recheck-seconds is 0)
    keys: tuple[tuple[Any, ...], ...] = field(default=(), compare=False, repr=False)  # every differing key

    @property
    def ok(self) -> bool:
        return not self.differing and not self.buckets and not self.not_checked

    def to_dict(self) -> dict[str, Any]:
        return {"table": self.table, "rows": self.rows, "chunks": self.chunks, "in_flux": self.in_flux,
                "missing": list(self.missing), "extra": list(self.extra), "changed": list(self.changed),
                "twice": list(self.twice), "differing": self.differing, "buckets": self.buckets,
                "not_checked": self.not_checked, "point": self.point,
                "seconds": round(self.seconds, 3), "source_seconds": round(self.source_seconds, 3),
                "mirror_seconds": round(self.mirror_seconds, 3), "by_bucket": self.by_bucket,
                "regions": self.regions, "regions_again": self.regions_again, "waited": round(self.waited, 3),
                "recheck": self.recheck}


@dataclass(frozen=True)
class Repair:
    """What ``verify --repair`` did: the tables that differed (``before``: their checks) were asked to be
    snapshotted again (request ``request``), and the sync had done it (``state`` ``done``), was still at it when
    ``repair_seconds`` ran out (``running``), or had not taken it (``waiting``: no sync runs on the state dir, or
    it did not plan a batch in time)."""

    request: int
    state: str
    seconds: float
    before: tuple[TableCheck, ...]
    gone: tuple[str, ...] = ()  # tables that no longer match the sync's patterns: taken out, not snapshotted
    why: str = ""  # why the sync passed the request over

    def line(self) -> str:
        names = ", ".join(t.table for t in self.before)
        if self.state == "passed":
            return f"repair: {names} not snapshotted again: the sync passed request {self.request} over: {self.why}"
        if self.state == "done":
            gone = f" ({', '.join(self.gone)} no longer captured)" if self.gone else ""
            return f"repair: {names} snapshotted again by the sync (request {self.request}, {self.seconds:.1f} s){gone}"
        if self.state == "running":
            return (f"repair: {names} asked to be snapshotted again (request {self.request}): the sync is still at "
                    f"it after {self.seconds:.1f} s; verify again once it is done (mysql-cdc resnapshot --request "
                    f"{self.request} --checkpoint ... says when)")
        return (f"repair: {names} asked to be snapshotted again (request {self.request}): no sync runs on this "
                "state dir now (or it took no batch in time); it snapshots them when it runs, verify again then "
                f"(mysql-cdc resnapshot --request {self.request} --checkpoint ... says when)")

    def to_dict(self) -> dict[str, Any]:
        return {"request": self.request, "state": self.state, "seconds": round(self.seconds, 3),
                "before": [t.to_dict() for t in self.before], "gone": list(self.gone), "why": self.why}


@dataclass(frozen=True)
class VerifyReport:
    """What a verification found: one :class:`TableCheck` per table (after a repair: the repaired tables' new
    checks, and ``repair``)."""

    tables: tuple[TableCheck, ...]
    seconds: float = 0.0
    repair: Repair | None = None

    @property
    def ok(self) -> bool:
        return all(t.ok for t in self.tables)

    def to_dict(self) -> dict[str, Any]:
        out = {"ok": self.ok, "seconds": round(self.seconds, 3), "tables": [t.to_dict() for t in self.tables]}
        if self.repair is not None:
            out["repair"] = self.repair.to_dict()
        return out

    def lines(self) -> list[str]:
        out = []
        if self.repair is not None:
            for t in self.repair.before:
                out += _check_lines(t)
            out.append(self.repair.line())
            if self.repair.state == "done":
                out.append("after the repair:")
        for t in self.tables:
            out += _check_lines(t)
        checked = [t for t in self.tables if not t.not_checked]
        out.append(f"verify: {len(checked)} of {len(self.tables)} tables checked, "
                   f"{sum(t.rows for t in checked):,} rows, "
                   f"{sum(1 for t in self.tables if not t.ok)} differ or were not checked, {self.seconds:.1f} s")
        return out


def _check_lines(t: TableCheck) -> list[str]:
    """A table's lines of the report."""
    if t.not_checked:
        return [f"{t.table}: NOT CHECKED: {t.not_checked}"]
    out = [f"{t.table}: {'ok' if t.ok else 'DIFFERS'}: {t.rows:,} rows in {t.chunks} chunks at "
           f"{t.point}, {t.in_flux} keys in flux left out, {t.seconds:.1f} s"]
    for kind, keys in (("missing from the mirror", t.missing), ("extra in the mirror", t.extra),
                       ("different in the mirror", t.changed), ("more than once in the mirror", t.twice)):
        if keys:
            out.append(f"  {kind}: {', '.join(keys)}")
    if t.differing > len(t.missing) + len(t.extra) + len(t.changed) + len(t.twice):
        out.append(f"  ({t.differing} keys differ in all)")
    if t.buckets:
        out.append(f"  and {t.buckets} more of the table's {cs.BUCKETS} buckets of keys differ, not narrowed "
                   "down to keys (verify the table again once these are mended)")
    return out


def column_drift(recorded: Iterable[ColumnInfo], now: Iterable[ColumnInfo]) -> str | None:
    """What differs between the columns the capture recorded and the server's now (name, type, type text,
    charset, in order: what each row's text on the server is made of), or ``None``. Both sides' texts are
    built from the recorded columns, so a schema change the sync has not reached yet (a type changed, a charset,
    a column dropped or added) would make rows differ that the mirror holds right: :func:`mysql_cdc.verify`
    does not check the table then, and says this. A charset the record lacks is not compared.

    >>> from mysql_cdc.schema import ColumnInfo as C
    >>> rec = [C("id", "int", "int", False), C("v", "varchar", "varchar(8)", True, "utf8mb4")]
    >>> column_drift(rec, [rec[0], C("v", "varchar", "varchar(8)", False, "utf8mb4")]) is None  # NULL-ability aside
    True
    >>> column_drift(rec, [rec[0], C("v", "varchar", "varchar(8)", True, "latin1")])
    'v: varchar(8) utf8mb4 then, varchar(8) latin1 now'
    >>> column_drift(rec, [C("id", "bigint", "bigint", False)])
    'id: int then, bigint now; v: varchar(8) utf8mb4 then, gone now'
    """
    def show(x: tuple[str, str, str | None] | None, when: str) -> str:
        return f"gone {when}" if x is None else f"{' '.join(v for v in x[1:] if v)} {when}"

    then, have = ({c.name: (c.data_type, c.column_type, c.charset) for c in cols} for cols in (recorded, now))
    out = []
    for name in [*then, *(n for n in have if n not in then)]:
        a, b = then.get(name), have.get(name)
        if a is not None and b is not None and a[:2] == b[:2] and (a[2] is None or a[2] == b[2]):
            continue
        out.append(f"{name}: {show(a, 'then')}, {show(b, 'now')}")
    if not out and list(then) != list(have):
        out.append(f"columns in order {', '.join(then)} then, {', '.join(have)} now")
    return "; ".join(out) or None


def nullable_either(recorded: TableSchema, now: Iterable[ColumnInfo]) -> TableSchema:
    """``recorded`` with each column NULL-able that is so now or was then: the server joins a NOT NULL column's
    text without a ``COALESCE`` (:func:`~mysql_cdc.udtf.sync.checksum.source_join`), so a column made NULL-able
    since the mirror's point, and holding a NULL, must not be taken as NOT NULL.

    >>> from mysql_cdc.schema import ColumnInfo as C
    >>> s = TableSchema(TableId("d", "t"), (C("id", "int", "int", False), C("v", "int", "int", False)), ("id",),
    ...                 ("id",))
    >>> [c.nullable for c in nullable_either(s, [C("id", "int", "int", False), C("v", "int", "int", True)]).columns]
    [False, True]
    """
    loose = {c.name for c in now if c.nullable}
    if not any(not c.nullable and c.name in loose for c in recorded.columns):
        return recorded
    return replace(recorded, columns=tuple(replace(c, nullable=True) if c.name in loose else c
                                           for c in recorded.columns))


def differing_range(schema: TableSchema, check: TableCheck) -> KeyRange | None:
    """The keys of ``check`` that differ, as a key range of those keys alone (:meth:`KeyRange.of_keys`; a long
    list joined across its smallest gaps), where a range of the table can be read again
    (:mod:`mysql_cdc.keyrange`: a chunk key of integer, binary, DECIMAL, DATE, DATETIME or TIMESTAMP columns, NOT
    NULL, that is the primary key, its BIGINT UNSIGNED values below 2^53) and every differing key is known (no
    bucket left unnarrowed); else ``None``: the table is read again whole. A TIMESTAMP's value is its naive UTC
    time on both sides (the source's sessions are in UTC; :func:`mirror_rows` reads the mirror's as microseconds).

    >>> from mysql_cdc.schema import ColumnInfo
    >>> from mysql_cdc.ids import TableId
    >>> s = TableSchema(TableId("d", "t"), (ColumnInfo("id", "int", "int", False),), ("id",), ("id",))
    >>> differing_range(s, TableCheck("d.t", differing=2, keys=((7,), (3,)))).text()
    'id in [3, 4), [7, 8)'
    >>> differing_range(s, TableCheck("d.t", differing=2, buckets=1, keys=((7,), (3,)))) is None
    True
    >>> u = TableSchema(TableId("d", "t"), (ColumnInfo("id", "bigint", "bigint unsigned", False),), ("id",), ("id",))
    >>> differing_range(u, TableCheck("d.t", differing=1, keys=((Decimal(7),),))).text()  # a lake's DECIMAL(20, 0)
    'id in [7, 8)'
    >>> differing_range(u, TableCheck("d.t", differing=2, keys=((Decimal(7),), (Decimal(2**53),)))) is None
    True
    >>> b = TableSchema(TableId("d", "t"), (ColumnInfo("id", "binary", "binary(2)", False),), ("id",), ("id",))
    >>> differing_range(b, TableCheck("d.t", differing=1, keys=((bytearray(b"\\x11\\xee"),),))).text()
    'id in [0x11ee, 0x11ee00)'
    >>> p = TableSchema(TableId("d", "t"), (ColumnInfo("day", "date", "date", False),
    ...                                     ColumnInfo("p", "decimal", "decimal(5,2)", False, numeric_precision=5,
    ...                                                numeric_scale=2)), ("day", "p"), ("day", "p"))
    >>> import datetime as dt
    >>> differing_range(p, TableCheck("d.t", differing=1, keys=((dt.date(2024, 2, 29), Decimal("9.50")),))).text()
    '(day, p) in [(2024-02-29, 9.50), (2024-02-29, 9.51))'

    A string key's differing keys are a list of keys, both sides' spellings (past 64 keys, the whole table):

    >>> c = TableSchema(TableId("d", "t"), (ColumnInfo("code", "varchar", "varchar(8)", False, "utf8mb4"),),
    ...                 ("code",), ("code",))
    >>> differing_range(c, TableCheck("d.t", differing=2, keys=(("K-100",), ("k-100",)))).text()
    "code in {'K-100', 'k-100'}"
    >>> differing_range(c, TableCheck("d.t", differing=65, keys=tuple((str(i),) for i in range(65)))) is None
    True
    """
    cols = tuple(schema.chunk_key)
    if (check.buckets or not check.keys or len(check.keys) != check.differing or cols != tuple(schema.primary_key)
            or range_problem(schema.columns, cols) is not None):
        return None
    by = [schema.column(c) for c in cols]
    try:  # a mirror's BIGINT UNSIGNED is a DECIMAL(20, 0); Spark's bytes a bytearray
        keys = [tuple(column_value(c, v) for c, v in zip(by, k)) for k in check.keys]
        out = KeyRange.of_keys(cols, keys, [c.name for c in by if c.data_type == "timestamp"])
    except ConfigError:  # a value of another kind (a zero date read as NULL), or the largest of its type
        return None
    return None if range_problem(schema.columns, cols, out) is not None else out


def repair_tables(report: VerifyReport, store: StateStore, checkpoint: str, timeout: float, started: float,
                  again: Callable[[set[TableId]], VerifyReport]) -> VerifyReport:
    """``verify --repair``: the tables of ``report`` that differ snapshotted again by the sync
    (:mod:`.resnapshot`), waited for up to ``timeout`` seconds, and verified again (``again``)."""
    from mysql_cdc.udtf.sync.job import captured_schemas
    from mysql_cdc.udtf.sync.resnapshot import ask, wait
    from mysql_cdc.udtf.sync.target import sync_holds

    bad = tuple(t for t in report.tables if not t.ok and not t.not_checked)
    if not bad:
        return report
    schemas = {str(s.table): s for s in captured_schemas(store)}
    tables = [schemas[t.table].table for t in bad]
    keys = sum(t.differing for t in bad)
    why = f"verify --repair: {keys} keys and {sum(t.buckets for t in bad)} buckets differed"
    ranges = {schemas[t.table].table: r for t in bad if (r := differing_range(schemas[t.table], t)) is not None}
    whole = [t for t in tables if t not in ranges]
    asked = [ask(store, [t], why, r) for t, r in ranges.items()] + ([ask(store, whole, why)] if whole else [])
    t0 = time.monotonic()
    gone: list[str] = []
    for request in asked:  # taken by the sync's next round, or the one after
        now = wait(store, checkpoint, request, max(0.0, timeout - (time.monotonic() - t0)),
                   sync_holds(store.location))
        gone += map(str, now.gone)
        if now.state != "done":
            break
    done = Repair(request, now.state, time.monotonic() - t0, bad, tuple(gone), now.why)
    if now.state != "done":
        return VerifyReport(report.tables, time.monotonic() - started, done)
    after = {t.table: t for t in again({t for t in tables if str(t) not in gone}).tables}
    checks = tuple(after.get(t.table, t) if t.table not in done.gone else TableCheck(
        t.table, not_checked="no longer captured: it left the sync's tables") for t in report.tables)
    return VerifyReport(checks, time.monotonic() - started, done)


# ---- where the mirror stands ----

@dataclass(frozen=True)
class PinnedMirror:
    """A mirror table at one version: its rows (a Spark DataFrame), the binlog point they equal, and its format
    (``lake_types``: how its columns hold the capture's values)."""

    rows: Any
    point: BinlogOffset
    batch: int
    fmt: Format = "delta"
    still: Callable[[], bool] | None = None  # whether the table is still at the version read (rows read as it is now)


def _pinned(rows: Any, checkpoint: str, before: int, held: int, table: TableId, where: str,
            fmt: Format) -> PinnedMirror:
    """The rows of a mirror table at one version, which holds the sync's batches up to ``held`` (-1: none) and at
    least those the checkpoint committed ``before`` it was read: pinned at the binlog point that batch ends at."""
    batch = max(before, held)
    if batch < 0:
        raise VerifyError(f"the sync has committed no batch to {where!r} yet: run it first")
    end = batch_end(checkpoint, batch)
    if end.get("phase") != "binlog":
        raise VerifyError(f"the mirror of {str(table)!r} is at batch {batch}, which ends in a snapshot (chunk "
                          f"{end.get('chunk')} of {end.get('chunks')}): verify once the sync follows the binlog")
    return PinnedMirror(rows, BinlogOffset(str(end["file"]), int(end["pos"]), end.get("gtids"), "position"), batch,
                        fmt)


def mirror_place(location: str) -> tuple[bool, str]:
    """Where a recorded mirror table is (``StateStore.mirror``): (True, its catalog name) or (False, its folder:
    delta-rs's path or URI, or the folder of Spark's ``delta.`<folder>```).

    >>> mirror_place("/lake/shop/t"), mirror_place("delta.`/la``ke/t`"), mirror_place("`lake`.`shop`.`t`")
    ((False, '/lake/shop/t'), (False, '/la`ke/t'), (True, '`lake`.`shop`.`t`'))
    """
    if location.startswith("delta.`") and location.endswith("`"):
        return False, location[len("delta.`"):-1].replace("``", "`")
    return ("://" not in location and not location.startswith("/")), location


def local_path(location: str) -> str:
    """A ``file:`` URI (as Spark's catalog gives a table's location) as the local path delta-rs opens; other
    locations as they are.

    >>> [local_path(u) for u in ("file:/w/t", "file:///w/my%20t", "file://localhost/w/t", "s3://b/t")]
    ['/w/t', '/w/my t', '/w/t', 's3://b/t']
    """
    if not location.startswith("file:"):
        return location
    parsed = urllib.parse.urlparse(location)
    return urllib.parse.unquote(parsed.path)


def plain_features(dt: Any) -> list[str]:
    """What a Delta table (delta-rs's ``DeltaTable``) uses that a read of its Parquet files alone cannot follow:
    reader features beyond :data:`_PLAIN_FEATURES`, column mapping (reader version 2 without a features list is
    column mapping: Spark's Delta sets it for a rename or a drop), partitions."""
    proto = dt.protocol()
    features = set(proto.reader_features or ()) - _PLAIN_FEATURES
    mapping = dt.metadata().configuration.get("delta.columnMapping.mode", "none")
    if mapping not in ("none", None) or proto.min_reader_version == 2:
        features.add("columnMapping")
    return sorted(features) + (["partitions"] if dt.metadata().partition_columns else [])


def pin_delta(spark: Any, name: str, location: str, app_id: str, checkpoint: str, table: TableId,
              spark_reads_delta: bool = False) -> PinnedMirror:
    """A Delta table (delta-rs or Spark wrote it; ``name`` its SQL text: ``delta.`<folder>``` or a catalog's
    name) at its current version, with the batch it holds (its ``txn`` of the query), both from its log by
    delta-rs; its rows read by Spark's Delta at that version where the session has Delta (``spark_reads_delta``:
    every table feature, column mapping too), else from the version's Parquet files (what delta-rs writes; a
    table with more is refused). Where delta-rs cannot open the log (not installed, an object store it has no
    credentials for) and Spark reads Delta: the version from Spark's ``DESCRIBE HISTORY`` and no batch known, so
    the table is pinned at the checkpoint's last batch before it (a point at or before the rows', which the keys
    in flux cover)."""
    before = committed_batches(checkpoint)
    try:
        from deltalake import DeltaTable

        dt = DeltaTable(local_path(location))
    except Exception as e:  # ImportError, or a location delta-rs cannot open
        if not spark_reads_delta:
            if isinstance(e, ImportError):
                raise VerifyError("verify reads a Delta table's log with delta-rs, which this Python lacks: pip "
                                  "install 'pyspark-mysql-cdc[delta]' (or verify from a Spark with Delta's jars)"
                                  ) from e
            raise
        version = int(spark.sql(f"DESCRIBE HISTORY {name} LIMIT 1").collect()[0]["version"])
        rows = spark.sql(f"SELECT * FROM {name} VERSION AS OF {version}")
        return _pinned(rows, checkpoint, before, -1, table, location, "delta")
    held = dt.transaction_version(app_id)
    if spark_reads_delta:
        rows = spark.sql(f"SELECT * FROM {name} VERSION AS OF {int(dt.version())}")
        return _pinned(rows, checkpoint, before, -1 if held is None else int(held), table, location, "delta")
    features = plain_features(dt)
    if features:
        raise VerifyError(f"the mirror of {str(table)!r} at {location!r} uses Delta features a plain Parquet read "
                          f"cannot follow ({features}): verify it from a Spark with Delta (the CLI loads Delta's "
                          "jars where Delta ships them: pyspark 4.0 to 4.2)")
    files = dt.file_uris()
    schema = _spark_schema_of(dt.schema().to_arrow() if hasattr(dt.schema(), "to_arrow") else dt.schema())
    rows = spark.read.schema(schema).parquet(*files) if files else spark.createDataFrame([], schema)
    return _pinned(rows, checkpoint, before, -1 if held is None else int(held), table, location, "delta")


def _iceberg_current(spark: Any, name: str) -> int | None:
    """The snapshot the Iceberg table's ``main`` branch is at (``None``: no snapshot yet)."""
    got = spark.sql(f"SELECT snapshot_id FROM {name}.`refs` WHERE name = 'main'").collect()
    return int(got[0][0]) if got else None


def held_batch(snapshots: list[tuple[int, int | None, Any, str | None, int | None]], current: int,
               app_id: str) -> int:
    """The highest batch of query ``app_id`` that the Iceberg snapshot ``current`` holds, from the table's
    snapshots as (id, parent id, committed at, app, batch): those of its ancestors, and where the line of parents
    ends (a ``REPLACE`` starts a new one) every snapshot committed before that end; -1 if none is marked. A
    snapshot off the line (after a rollback) does not count.

    >>> snaps = [(1, None, 1, "q", 0), (2, 1, 2, "q", 1), (3, 2, 3, "q", 2), (4, 2, 4, None, None)]
    >>> held_batch(snaps, 4, "q"), held_batch(snaps, 3, "q"), held_batch(snaps, 3, "other")
    (1, 2, -1)
    >>> held_batch([(1, None, 1, "q", 5), (7, None, 2, None, None)], 7, "q")  # a REPLACE after batch 5
    5
    """
    by_id = {s[0]: s for s in snapshots}
    line: list[int] = []
    at: int | None = current
    while at is not None and at in by_id and at not in line:
        line.append(at)
        at = by_id[at][1]
    first = by_id[line[-1]][2] if line else None
    held = [s[4] for s in snapshots if s[3] == app_id and s[4] is not None
            and (s[0] in line or (first is not None and s[2] < first))]
    return max(held, default=-1)


def pin_iceberg(spark: Any, name: str, app_id: str, checkpoint: str, table: TableId) -> PinnedMirror:
    """An Iceberg table at the snapshot its ``main`` branch is at, with the highest batch of the query its line of
    snapshots carries (:func:`held_batch`; ``spark_mirror.SparkIcebergMirror`` marks each commit with the query
    and the batch). The table is refreshed first: a catalog keeps a loaded table for a while, and a batch the
    checkpoint committed must not be taken for held by an older snapshot. A schema change the sync made in place
    (an Iceberg schema update makes no snapshot) after that snapshot: the snapshot's rows are read with the
    table's current columns, and the check holds only if the table is still at that snapshot when it is done
    (``PinnedMirror.still``)."""
    from mysql_cdc.udtf.sync.spark_mirror import APP_PROPERTY, BATCH_PROPERTY, _literal

    before = committed_batches(checkpoint)
    spark.sql(f"REFRESH TABLE {name}")
    current = _iceberg_current(spark, name)
    if current is None:
        raise VerifyError(f"the sync has committed no batch to {name} yet: run it first")
    snaps = [(int(r[0]), None if r[1] is None else int(r[1]), r[2], r[3], None if r[4] is None else int(r[4]))
             for r in spark.sql(f"SELECT snapshot_id, parent_id, committed_at, summary[{_literal(APP_PROPERTY)}], "
                                f"CAST(summary[{_literal(BATCH_PROPERTY)}] AS BIGINT) FROM {name}.`snapshots`"
                                ).collect()]
    rows = spark.sql(f"SELECT * FROM {name} VERSION AS OF {current}")
    now = spark.table(name)
    pinned = _pinned(rows, checkpoint, before, held_batch(snaps, current, app_id), table, name, "iceberg")
    if rows.dtypes != now.dtypes:
        def still() -> bool:
            spark.sql(f"REFRESH TABLE {name}")
            return _iceberg_current(spark, name) == current

        pinned = replace(pinned, rows=now, still=still)
    return pinned


def catalog_format(spark: Any, name: str) -> str:
    """The format of the catalog table ``name``: its provider (``delta``, ``iceberg``), from the detailed part
    of ``DESCRIBE TABLE EXTENDED`` (after its columns, one of which may be named ``Provider``)."""
    rows = spark.sql(f"DESCRIBE TABLE EXTENDED {name}").collect()
    detail = next((i for i, r in enumerate(rows) if str(r[0]).strip() == "# Detailed Table Information"), len(rows))
    return next((str(r[1]).strip().lower() for r in rows[detail:] if str(r[0]).strip() == "Provider"), "")


def _spark_schema_of(arrow_schema: Any) -> Any:
    from pyspark.sql.pandas.types import from_arrow_schema

    return from_arrow_schema(pa.schema(arrow_schema))


# ---- the source ----

@dataclass
class SourceView:
    """A read view of the source (one transaction) and the binlog points that bracket it."""

    conn: Any
    low: BinlogOffset
    high: BinlogOffset | None = None


def open_view(profile: ConnectionProfile, facts: ServerFacts) -> SourceView:
    conn = connect(profile)
    cur = conn.cursor()
    # connect() ran SESSION_INIT: UTC, and sql_mode '' so that the texts' SQL means what checksum.py says whatever
    # the server's global mode (not ORACLE's CONCAT, which skips a NULL, nor PAD_CHAR_TO_FULL_LENGTH's CHARs), and
    # READ_VIEWS: REPEATABLE READ, where the consistent snapshot opens its read view at once
    low = server_end(profile, facts, conn)
    cur.execute("START TRANSACTION WITH CONSISTENT SNAPSHOT")
    cur.close()
    view = SourceView(conn, low)
    if facts.flavor == "mariadb":  # the view's own point
        view.low = view.high = snapshot_position(conn)
    return view


def _key_columns(schema: TableSchema) -> list[ColumnInfo]:
    return [schema.column(k) for k in schema.primary_key]


def checked_chunks(table: TableId, key: tuple[str, ...], plan: list[Chunk] | None, outside: frozenset[int],
                   cut: Callable[[Chunk], list[Key]]) -> list[Chunk]:
    """The chunks the source is summed by, one query each: the capture's plan, whose chunks hold about the same
    rows; but each chunk the plan does not read (``outside``: the rest of a table around a key range read again,
    most of it) cut again where ``cut`` says, so that no query sums far more rows than the others and the rows/s
    limit paces evenly. No plan: the whole table in one.

    >>> t = TableId("d", "t")
    >>> plan = [Chunk(t, 0, ("id",), None, (7,)), Chunk(t, 1, ("id",), (7,), (8,)), Chunk(t, 2, ("id",), (8,), None)]
    >>> cut = lambda c: [(200,), (400,)] if c.start == (8,) else []
    >>> [(c.index, c.start, c.end) for c in checked_chunks(t, ("id",), plan, frozenset({0, 2}), cut)]
    [(0, None, (7,)), (1, (7,), (8,)), (2, (8,), (200,)), (3, (200,), (400,)), (4, (400,), None)]
    >>> len(checked_chunks(t, ("id",), None, frozenset(), cut))
    1
    """
    if not plan:
        return [Chunk(table, 0, key, None, None)]
    out: list[Chunk] = []
    for c in plan:
        edges = [c.start, *cut(c), c.end] if c.index in outside else [c.start, c.end]
        for lo, hi in zip(edges, edges[1:]):
            out.append(replace(c, index=len(out), start=lo, end=hi))
    return out


TOTAL = -1  # the one "bucket" of a first pass by totals: the whole table's rows and sum


def source_buckets(view: SourceView, schema: TableSchema, chunks: list[Chunk], b1: bool, limit: float,
                   by_bucket: bool = True, place: Callable[[Chunk], int] | None = None
                   ) -> dict[int, tuple[int, int]]:
    """Per bucket: (rows, sum of row hashes) of the ``chunks`` of the table in the view, one query per chunk, at
    most ``limit`` rows a second (0: no limit); with ``by_bucket`` False, the totals alone (bucket
    :data:`TOTAL`, or each chunk's region by ``place``: :mod:`.regions`), without the key's text, its CRC-32 and
    the server's grouping (a tenth of the time on TPC-H)."""
    value = cs.source_value(cs.source_row(list(schema.columns), b1))
    rows = f"FROM {table_ident(schema.table)} WHERE"
    if by_bucket:  # grouped outside (only_full_group_by refuses the expression grouped by its alias)
        bucket = cs.source_bucket(_key_columns(schema), b1)
        head, tail = f"SELECT b, COUNT(*), SUM(v) FROM (SELECT {bucket} AS b, {value} AS v {rows}", ") AS r GROUP BY b"
    else:
        head, tail = f"SELECT {TOTAL}, COUNT(*), SUM({value}) {rows}", ""
    out: dict[int, list[int]] = {}
    cur = view.conn.cursor()
    try:
        for chunk in chunks:
            started = time.monotonic()
            where, params = chunk_where(chunk)
            cur.execute(f"{head} {where}{tail}", params)
            n = 0
            for b, count, total in cur.fetchall():
                if not count:  # a chunk without rows (its SUM is NULL)
                    continue
                acc = out.setdefault(place(chunk) if place is not None and not by_bucket else int(b), [0, 0])
                acc[0] += int(count)
                acc[1] += int(total)
                n += int(count)
            if limit > 0:
                time.sleep(max(0.0, n / limit - (time.monotonic() - started)))
    finally:
        cur.close()
    return {b: (c, s) for b, (c, s) in out.items()}


def source_rows(view: SourceView, schema: TableSchema, b1: bool, *, buckets: Iterable[int] = (),
                keys: Iterable[tuple[Any, ...]] = (), where: tuple[str, list[Any]] | None = None
                ) -> dict[str, tuple[str, tuple[Any, ...]]]:
    """key text (hex) -> (row hash, key values) of the source rows in ``buckets`` (of those ``where`` holds for:
    SQL and its parameters) or with one of ``keys``."""
    row = cs.source_row(list(schema.columns), b1)
    key = cs.source_key(_key_columns(schema), b1)
    select = (f"SELECT {key}, {row}, {', '.join(ident(k) for k in schema.primary_key)} "
              f"FROM {table_ident(schema.table)} WHERE ")
    out: dict[str, tuple[str, tuple[Any, ...]]] = {}
    cur = view.conn.cursor()
    try:
        wanted = sorted(set(buckets))
        if wanted:
            also, params = (f" AND ({where[0]})", list(where[1])) if where is not None else ("", [])
            cur.execute(select + f"{cs.source_bucket(_key_columns(schema), b1)} IN ({', '.join(map(str, wanted))})"
                        + also, params)
            out.update({str(r[0]): (str(r[1]), tuple(r[2:])) for r in cur.fetchall()})
        keys = list(keys)
        names = ", ".join(ident(k) for k in schema.primary_key)
        one = "(" + ", ".join(["%s"] * len(schema.primary_key)) + ")"
        for i in range(0, len(keys), _KEYS_PER_QUERY):
            part = keys[i:i + _KEYS_PER_QUERY]
            cur.execute(select + f"({names}) IN ({', '.join([one] * len(part))})",
                        [v for k in part for v in k])
            out.update({str(r[0]): (str(r[1]), tuple(r[2:])) for r in cur.fetchall()})
    finally:
        cur.close()
    return out


# ---- the mirror's side ----

def _register(spark: Any, flavor: str, udf: Callable[..., Any]) -> None:
    """The session function that writes a double as the server does (:func:`checksum.double_text`); ``udf`` is
    the session's kind's (``udtf/spark/compat.session_udf``)."""

    def double_text(x: float | None) -> str | None:
        return None if x is None else cs.double_text(x, flavor)

    from pyspark.sql.types import StringType  # a type, not its name: parsing "string" needs a classic session

    spark.udf.register(cs.DOUBLE_FUNCTION, udf(double_text, StringType(), useArrow=True))


_K, _H, _B, _S = (f"__mysql_cdc_{n}" for n in ("key", "row_hash", "bucket", "sum"))


def mirror_buckets(rows: Any, schema: TableSchema, b1: bool, by_bucket: bool = True, region: str | None = None
                   ) -> dict[int, tuple[int, int]]:
    """Per bucket: (rows, sum of row hashes) of the mirror table, one Spark job (SQL text only: no
    ``pyspark.sql.functions``, whose classic module a Spark Connect client beside a classic install cannot use);
    with ``by_bucket`` False, its totals alone (bucket :data:`TOTAL`, or per region by the Spark SQL
    ``region``: :mod:`.regions`)."""
    row = f"{cs.mirror_row(list(schema.columns), b1)} AS {_H}"
    if by_bucket:
        hashed = rows.selectExpr(f"{cs.mirror_bucket(_key_columns(schema), b1)} AS {_B}", row)
    else:  # no row: no group, as the source's
        hashed = rows.selectExpr(f"{region if region is not None else TOTAL} AS {_B}", row)
    # the hash computed once, in its own projection (Spark keeps a costly expression used more than once apart)
    parts = [f"{_S}{i}" for i in range(len(cs.PARTS))]
    sums = hashed.selectExpr(_B, *(f"{e} AS {p}" for e, p in zip(cs.mirror_values(_H), parts))).groupBy(_B).agg(
        {"*": "count", **dict.fromkeys(parts, "sum")})
    n = next(c for c in sums.columns if c.startswith("count("))  # the name is Spark's to choose
    return {int(r[_B]): (int(r[n]), cs.joined_sum([int(r[f"sum({p})"]) for p in parts])) for r in sums.collect()}


def mirror_rows(spark: Any, rows: Any, schema: TableSchema, b1: bool, fmt: str, *, buckets: Iterable[int] = (),
                keys: Iterable[tuple[Any, ...]] = (), twice: dict[str, tuple[Any, ...]] | None = None
                ) -> dict[str, tuple[str, tuple[Any, ...]]]:
    """key text (hex) -> (row hash, key values) of the mirror rows in ``buckets`` or with one of ``keys`` (joined on
    the key columns: a key's values as the mirror holds them, ``lake_types``); a key the mirror holds more than
    once goes into ``twice``."""
    key_names = [f"__mysql_cdc_key{i}" for i in range(len(schema.primary_key))]
    # a TIMESTAMP key's value also as microseconds since 1970 UTC: Python gets a Spark timestamp in its own zone
    micros = {i: f"__mysql_cdc_micros{i}" for i, k in enumerate(schema.primary_key)
              if schema.column(k).data_type == "timestamp"}
    picked = rows.selectExpr(f"{cs.mirror_key(_key_columns(schema), b1)} AS {_K}",
                             f"{cs.mirror_row(list(schema.columns), b1)} AS {_H}",
                             f"{cs.mirror_bucket(_key_columns(schema), b1)} AS {_B}",
                             *[f"{cs._spark_ident(k)} AS {n}" for k, n in zip(schema.primary_key, key_names)],
                             *[f"unix_micros({cs._spark_ident(schema.primary_key[i])}) AS {n}"
                               for i, n in micros.items()])

    def key_of(r: Any) -> tuple[Any, ...]:  # the key's values, a TIMESTAMP's as the naive UTC time keys are held in
        vals = list(r[2:2 + len(key_names)])
        for j, i in enumerate(micros):
            m = r[2 + len(key_names) + j]
            vals[i] = None if m is None else _EPOCH + dt.timedelta(microseconds=int(m))
        return tuple(vals)
    out: dict[str, tuple[str, tuple[Any, ...]]] = {}
    wanted = sorted(set(buckets))
    if wanted:
        for r in picked.filter(f"{_B} IN ({', '.join(str(int(b)) for b in wanted)})").select(
                _K, _H, *key_names, *micros.values()).collect():
            if r[0] in out and twice is not None:
                twice[r[0]] = key_of(r)
            out[r[0]] = (r[1], key_of(r))
    keys = list(keys)
    if keys:
        key_cols = _key_columns(schema)
        batch = columns_to_batch([[k[i] for k in keys] for i in range(len(key_cols))],
                                 table_arrow_schema(tuple(key_cols), b1))
        lake = pa.Table.from_batches([to_lake(batch, fmt)])  # type: ignore[arg-type]
        given = [f"__mysql_cdc_given{i}" for i in range(len(key_cols))]
        lake = lake.rename_columns(given)
        wanted_keys = spark.createDataFrame(lake, schema=_spark_schema_of(lake.schema))
        cond = [picked[n] == wanted_keys[g] for n, g in zip(key_names, given)]
        for r in picked.join(wanted_keys, cond, "inner").select(_K, _H, *key_names, *micros.values()).collect():
            out[r[0]] = (r[1], key_of(r))
    return out


_EPOCH = dt.datetime(1970, 1, 1)


# ---- one table ----

def _compare(src: dict[int, tuple[int, int]], mir: dict[int, tuple[int, int]]) -> list[int]:
    return sorted(b for b in set(src) | set(mir) if src.get(b, (0, 0)) != mir.get(b, (0, 0)))


def _by_bucket(key_hex: str, key: tuple[Any, ...]) -> int:
    return cs.bucket_of(key_hex)


def _in_total(key_hex: str, key: tuple[Any, ...]) -> int:
    return TOTAL


def _in_region(reg: Regions, key_hex: str, key: tuple[Any, ...]) -> int:
    return reg.of_key(key[0])


def _less(sums: dict[int, tuple[int, int]], rows: dict[str, tuple[str, tuple[Any, ...]]],
          place: Callable[[str, tuple[Any, ...]], int] = _by_bucket) -> dict[int, tuple[int, int]]:
    """``sums`` without ``rows`` (key text as hex -> (row hash, key values)), each where ``place`` puts it: its
    bucket, the totals (:func:`_in_total`) or its region."""
    out = {b: list(v) for b, v in sums.items()}
    for k, (h, key) in rows.items():
        acc = out.setdefault(place(k, key), [0, 0])
        acc[0] -= 1
        acc[1] -= cs.hash_value(h)
    return {b: (c, s) for b, (c, s) in out.items() if c or s}


def key_words(key: tuple[Any, ...]) -> str:
    """A key as the report names it: numbers as their digits, bytes as ``0x`` and hex digits, dates and times
    in ISO form (as ``resnapshot --key`` takes them), other values as Python writes them.

    >>> key_words((Decimal("7"),)), key_words((3, "b")), key_words((bytearray(b"\\x11\\xee"),))
    ('7', "(3, 'b')", '0x11ee')
    >>> import datetime as dt
    >>> key_words((dt.date(2024, 2, 29), dt.datetime(2024, 2, 29, 10, 0, 0, 7), Decimal("1.50")))
    '(2024-02-29, 2024-02-29 10:00:00.000007, 1.50)'
    """
    parts = [str(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else
             shown_value(bytes(v) if isinstance(v, bytearray) else v)
             if isinstance(v, (bytes, bytearray, Decimal, dt.date)) else repr(v) for v in key]
    return parts[0] if len(parts) == 1 else "(" + ", ".join(parts) + ")"


def ordered_words(keys: Iterable[tuple[Any, ...]]) -> list[str]:
    """Keys as the report names them, in key order (NULL first; as text where values of a column do not compare).

    >>> ordered_words([(400,), (7,), (None,)]), ordered_words([(b"\\x02",), (bytearray(b"\\x01\\xff"),)])
    (['None', '7', '400'], ['0x01ff', '0x02'])
    """
    def order(key: tuple[Any, ...]) -> tuple[Any, ...]:
        return tuple((0, 0) if v is None else (1, bytes(v)) if isinstance(v, (bytes, bytearray)) else (2, v)
                     for v in key)
    keys = list(keys)
    try:
        return [key_words(k) for k in sorted(keys, key=order)]
    except TypeError:
        return sorted(map(key_words, keys))


@dataclass
class _Round:
    """What one comparison found, and where its time went."""

    point: str
    diff: _Diff = field(default_factory=lambda: _Diff())
    rows: int = 0
    chunks: int = 0
    in_flux: int = 0
    source_seconds: float = 0.0  # the source's checksums (one query per chunk)
    mirror_seconds: float = 0.0  # the mirror's (one Spark job, run meanwhile)
    flux_seconds: float = 0.0  # the keys in flux: the binlog between the two points, their rows on both sides
    by_bucket: bool = False  # the sums differed: both sides summed again by buckets of keys
    regions: int = 0  # regions of the key summed apart in the first pass (0: the table's totals; .regions)
    regions_again: int = 0  # of which summed again by buckets, their sums differing


@dataclass
class _Diff:
    missing: dict[str, tuple[Any, ...]] = field(default_factory=dict)
    extra: dict[str, tuple[Any, ...]] = field(default_factory=dict)
    changed: dict[str, tuple[Any, ...]] = field(default_factory=dict)
    twice: dict[str, tuple[Any, ...]] = field(default_factory=dict)  # keys the mirror holds more than once
    buckets: int = 0  # buckets that differ but were not narrowed down (past _NARROWED, or no key to name)

    def key_texts(self) -> set[str]:
        return {*self.missing, *self.extra, *self.changed, *self.twice}

    def __len__(self) -> int:
        return len(self.missing) + len(self.extra) + len(self.changed) + len(self.twice)


def _diff(src: dict[str, tuple[str, tuple[Any, ...]]], mir: dict[str, tuple[str, tuple[Any, ...]]],
          skip: set[str], twice: dict[str, tuple[Any, ...]]) -> _Diff:
    """The keys that differ between the two sides' rows (key text -> (row hash, key)), less ``skip`` (the keys
    in flux); ``twice``: the keys the mirror's read found more than once (:func:`mirror_rows`), those of ``mir``
    kept."""
    d = _Diff(twice={k: v for k, v in twice.items() if k in mir and k not in skip})
    for k in set(src) | set(mir):
        if k in skip:
            continue
        if k not in mir:
            d.missing[k] = src[k][1]
        elif k not in src:
            d.extra[k] = mir[k][1]
        elif src[k][0] != mir[k][0]:
            d.changed[k] = src[k][1]
    return d


def _still(mirror: PinnedMirror, table: TableId) -> None:
    """A mirror read as it is now (``PinnedMirror.still``) that changed while it was read is not checked."""
    if mirror.still is not None and not mirror.still():
        raise VerifyError(f"the mirror of {str(table)!r} changed while it was read (its columns changed in place "
                          "after its last snapshot, and a batch came since): verify it again")


class Verifier:
    """Verifies one sync's mirror tables (see the module docstring)."""

    def __init__(self, spark: Any, profile: ConnectionProfile, opts: CdcOptions, facts: ServerFacts,
                 store: StateStore, checkpoint: str, *, max_rows_per_second: float = 0.0,
                 recheck_seconds: float = 30.0, tinyint1_as_boolean: bool = False,
                 lakes: tuple[str, ...] = (), udf: Callable[..., Any] | None = None) -> None:
        self.spark, self.profile, self.opts, self.facts = spark, profile, opts, facts
        self.lakes = lakes  # the formats the session reads with Spark (``udtf/spark/compat.lake_formats``)
        self.store, self.checkpoint = store, checkpoint
        self.limit, self.recheck_seconds = max_rows_per_second, recheck_seconds
        self.app_id = query_app_id(checkpoint)
        self.b1 = tinyint1_as_boolean  # as the capture recorded it (capture.json)
        if udf is None:
            from pyspark.sql.functions import udf as classic_udf

            udf = classic_udf
        _register(spark, facts.flavor, udf)

    def pin(self, table: TableId) -> PinnedMirror:
        """The table's mirror at its current version. Where it is: a folder delta-rs writes (a path), one Spark's
        Delta writes (``delta.`<folder>```), or a catalog's table (Delta or Iceberg, read by the session's
        catalog, as the sync wrote it)."""
        location = self.store.mirror(table)
        if location is None:
            raise VerifyError(f"the sync has not made a mirror of {str(table)!r}")
        by_spark = "delta" in self.lakes
        catalog = False
        try:
            catalog, location = mirror_place(location)
            if catalog:
                fmt = catalog_format(self.spark, location)
                if fmt == "iceberg":
                    return pin_iceberg(self.spark, location, self.app_id, self.checkpoint, table)
                if fmt != "delta" or not by_spark:
                    raise VerifyError(f"the mirror of {str(table)!r} is the catalog table {location} "
                                      f"({fmt or 'no format given'}): verify it from a Spark session that reads it "
                                      "(Delta's or Iceberg's jars and the catalog, as the sync had them)")
                name = location
                location = str(self.spark.sql(f"DESCRIBE DETAIL {name}").collect()[0]["location"])
                return pin_delta(self.spark, name, location, self.app_id, self.checkpoint, table, by_spark)
            return pin_delta(self.spark, "delta." + quote(location), location, self.app_id, self.checkpoint, table,
                             by_spark)
        except MysqlCdcError:
            raise
        except Exception as e:  # delta-rs or Spark: no table there, or one it cannot read
            java = getattr(e, "java_exception", None)  # py4j's: its first line names only the call
            first = (str(java if java is not None else e).strip().splitlines() or [type(e).__name__])[0][:300]
            hint = (" (a catalog's table: give this session the catalog the sync wrote it with, e.g. the CLI's "
                    "--format iceberg --conf spark.sql.catalog.<name>=...)") if catalog else ""
            raise VerifyError(f"the mirror of {str(table)!r} at {location!r} cannot be read: {first}{hint}") from e

    def check(self, schema: TableSchema) -> TableCheck:
        started = time.monotonic()
        name = str(schema.table)
        try:
            return self._check(schema, started)
        except MysqlCdcError as e:
            return TableCheck(name, not_checked=str(e), seconds=time.monotonic() - started)
        except Exception as e:  # the server's or Spark's: the table is not checked, the others go on
            _log.debug("verify of %s failed", name, exc_info=True)
            java = getattr(e, "java_exception", None)  # py4j's: its first line names only the call
            first = (str(java if java is not None else e).strip().splitlines() or [""])[0][:300]
            return TableCheck(name, not_checked=f"{type(e).__name__}: {first} (verify the table again)",
                              seconds=time.monotonic() - started)

    def _round(self, schema: TableSchema, keys: set[str] | None) -> _Round:
        """One comparison, of the whole table (``keys`` None) or of ``keys`` only (key texts as hex: compared
        by their buckets' rows, so that no key value has to travel from one side to the other)."""
        mirror = self.pin(schema.table)
        out = _Round(point=f"{mirror.point.file}:{mirror.point.pos}")
        view = open_view(self.profile, self.facts)
        pool = ThreadPoolExecutor(max_workers=1)
        try:
            mir_future = None
            reg: Regions | None = None
            if keys is None:  # the mirror's Spark job runs while the server sums the source
                t0 = time.monotonic()
                recorded = self.store.plan_record(schema.table)
                sizes = recorded.sizes if recorded is not None else None
                rows_per = sizes[0] if sizes is not None else self.opts.chunk_size

                def cut(c: Chunk) -> list[Key]:  # the plan's rows per chunk: the user's chunk_size when set
                    ok = rows_per > 0 and tuple(c.key_columns) == tuple(schema.chunk_key)
                    return cut_range(view.conn, schema, c.start, c.end, rows_per) if ok else []
                chunks = checked_chunks(schema.table, schema.chunk_key,
                                        list(recorded.chunks) if recorded is not None else None,
                                        recorded.outside if recorded is not None else frozenset(), cut)
                reg = self._regions(schema, chunks)
                region = reg.spark_region(cs._spark_ident(schema.primary_key[0])) if reg is not None else None

                def mirror_side(by_bucket: bool, rows: Any) -> dict[int, tuple[int, int]]:
                    t0 = time.monotonic()
                    try:
                        return mirror_buckets(rows, schema, self.b1, by_bucket, region)
                    finally:
                        out.mirror_seconds += time.monotonic() - t0
                mir_future = pool.submit(mirror_side, False, mirror.rows)  # first the sums: a clean table needs no more
                src = source_buckets(view, schema, chunks, self.b1, self.limit, by_bucket=False,
                                     place=reg.of_chunk if reg is not None else None)
                out.source_seconds += time.monotonic() - t0
                out.chunks = len(chunks)
                out.regions = len(reg) if reg is not None else 0
            t0 = time.monotonic()
            if view.high is None:
                view.high = server_end(self.profile, self.facts, view.conn)
            start = min(mirror.point, view.low, key=lambda o: o.position_key())
            end = max(mirror.point, view.high, key=lambda o: o.position_key())
            flux = keys_changed(self.profile, self.opts, self.facts, schema, start, end, self.b1)
            src_flux = source_rows(view, schema, self.b1, keys=flux)
            mir_flux = mirror_rows(self.spark, mirror.rows, schema, self.b1, mirror.fmt, keys=flux)
            skip = set(src_flux) | set(mir_flux)
            out.in_flux = len(flux)
            out.flux_seconds += time.monotonic() - t0
            if keys is not None:
                buckets = {cs.bucket_of(k) for k in keys}
                src_rows = source_rows(view, schema, self.b1, buckets=buckets)
                held_twice = dict[str, tuple[Any, ...]]()  # a key the mirror holds twice: its copies agree or not
                mir_rows = mirror_rows(self.spark, mirror.rows, schema, self.b1, mirror.fmt, buckets=buckets,
                                       twice=held_twice)
                out.diff = _diff({k: v for k, v in src_rows.items() if k in keys},
                                 {k: v for k, v in mir_rows.items() if k in keys}, skip, held_twice)
                out.rows = len(src_rows)
                _still(mirror, schema.table)
                return out
            assert mir_future is not None
            mir = mir_future.result()
            first = partial(_in_region, reg) if reg is not None else _in_total
            src_less, mir_less = _less(src, src_flux, first), _less(mir, mir_flux, first)
            out.rows = sum(c for c, _ in src_less.values())
            differ: list[int] = []
            src_where: tuple[str, list[Any]] | None = None
            mir_rows = mirror.rows
            regions_again = _compare(src_less, mir_less)
            if regions_again:  # the sums differ: both sides again by buckets, in the same view and the same
                out.by_bucket = True  # version of the mirror
                again = chunks
                if reg is not None:  # only the regions whose sums differ
                    out.regions_again = len(regions_again)
                    wanted = set(regions_again)
                    src_where = reg.source_where(regions_again, ident(schema.primary_key[0]))
                    mir_where = reg.spark_where(regions_again, cs._spark_ident(schema.primary_key[0]))
                    if not self._exact_stats(schema, reg):  # files are not to be skipped by the key's statistics
                        mir_where = f"({region}) IN ({', '.join(str(int(r)) for r in regions_again)})"
                    mir_rows = mirror.rows.filter(mir_where)
                    again = [c for c in chunks if reg.of_chunk(c) in wanted]
                    src_flux = {k: v for k, v in src_flux.items() if reg.of_key(v[1][0]) in wanted}
                    mir_flux = {k: v for k, v in mir_flux.items() if reg.of_key(v[1][0]) in wanted}
                mir_future = pool.submit(mirror_side, True, mir_rows)
                t0 = time.monotonic()
                src = source_buckets(view, schema, again, self.b1, self.limit)
                out.source_seconds += time.monotonic() - t0
                mir = mir_future.result()
                src_less, mir_less = _less(src, src_flux), _less(mir, mir_flux)
                differ = _compare(src_less, mir_less)
                if not differ:  # sums differ, buckets agree: no key to name, never reported as agreeing
                    out.diff.buckets = 1
            if differ:
                narrowed, twice = differ[:_NARROWED], dict[str, tuple[Any, ...]]()
                out.diff = _diff(source_rows(view, schema, self.b1, buckets=narrowed, where=src_where),
                                 mirror_rows(self.spark, mir_rows, schema, self.b1, mirror.fmt, buckets=narrowed,
                                             twice=twice), skip, twice)
                out.diff.buckets = len(differ) - len(narrowed)
                if not len(out.diff):  # the sums differ, and no key says why: never reported as agreeing
                    out.diff.buckets = len(differ)
            _still(mirror, schema.table)
            return out
        finally:
            pool.shutdown(wait=True)
            with contextlib.suppress(Exception):
                view.conn.rollback()
            view.conn.close()

    def _regions(self, schema: TableSchema, chunks: list[Chunk]) -> Regions | None:
        """The regions the first pass sums each side by (:mod:`.regions`), where the key is one integer column
        that the chunks split; else ``None`` (the whole table's totals)."""
        if len(schema.primary_key) != 1 or tuple(schema.chunk_key) != tuple(schema.primary_key) or any(
                tuple(c.key_columns) != tuple(schema.primary_key) for c in chunks):
            return None
        col = schema.column(schema.primary_key[0])
        if not col.is_integral or spark_type(col, self.b1) == "BOOLEAN":
            return None
        return regions(chunks)

    def _exact_stats(self, schema: TableSchema, reg: Regions) -> bool:
        """Whether a filter on the key by the regions' starts may skip the mirror's files by their statistics:
        not where the key is a ``BIGINT UNSIGNED`` (the mirror's DECIMAL(20,0)) and a start is at or above 2^53,
        since delta-rs keeps a DECIMAL's statistics as doubles (``keyrange.EXACT_LIMIT``) and Spark's Delta,
        which reads them, would skip files that hold rows of the region (the filter is then the region's
        ``CASE``, which no statistic answers)."""
        col = schema.column(schema.primary_key[0])
        return not spark_type(col, self.b1).startswith("DECIMAL") or all(abs(s) < EXACT_LIMIT for s in reg.starts)

    def _check(self, schema: TableSchema, started: float) -> TableCheck:
        first = self._round(schema, None)
        d = first.diff
        flux = first.in_flux
        waited = 0.0
        recheck: Recheck = ""
        if len(d) and self.recheck_seconds > 0:
            # a key the sync had not applied yet agrees later: compare the differing keys once more, after the
            # sync's next batch (not waited for where no sync holds the state dir: none comes)
            from mysql_cdc.udtf.sync.target import sync_holds

            t0 = time.monotonic()
            deadline = t0 + self.recheck_seconds
            seen = committed_batches(self.checkpoint)

            def ended() -> Recheck:
                if committed_batches(self.checkpoint) > seen:
                    return "a batch"
                if sync_holds(self.store.location) is False:
                    return "no sync"
                return "timed out" if time.monotonic() >= deadline else ""

            while not (recheck := ended()):
                time.sleep(0.2)
            waited = time.monotonic() - t0
            d = self._round(schema, d.key_texts()).diff
        words = [tuple(ordered_words(part.values())[:_SHOWN])
                 for part in (d.missing, d.extra, d.changed, d.twice)]
        return TableCheck(str(schema.table), rows=first.rows, chunks=first.chunks, in_flux=flux, missing=words[0],
                          extra=words[1], changed=words[2], twice=words[3], differing=len(d),
                          buckets=first.diff.buckets, point=first.point,
                          seconds=time.monotonic() - started, source_seconds=first.source_seconds,
                          mirror_seconds=first.mirror_seconds, by_bucket=first.by_bucket,
                          regions=first.regions, regions_again=first.regions_again, waited=waited,
                          recheck=recheck,
                          keys=tuple(k for part in (d.missing, d.extra, d.changed, d.twice) for k in part.values()))
