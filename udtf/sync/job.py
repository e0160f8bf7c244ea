"""The sync job (``mysql_cdc.sync``, ``mysql-cdc sync``): a whole database mirrored into Delta tables.

A Structured Streaming query reads the matched tables (the ``mysql_cdc`` stream: snapshot, then binlog) and
``foreachBatch`` applies each micro-batch to one Delta table per source table: each table's rows of the batch
become one MERGE of their final image per key (:mod:`.last_image`), which upserts and deletes; by Spark on the
executors where the session has Delta (:mod:`.spark_mirror`, a catalog namespace or a folder), else by delta-rs
in this process (:mod:`.mirror`, a folder ``<to>/<database>/<table>``): :mod:`.sinks` decides. The paths are
checked, and locked, before anything is created (:mod:`.target`).

Exactly once across crashes: every MERGE commits, in the same Delta commit, a transaction action
``(app id, batch id)`` (Delta's idempotent writes, ``txnAppId`` / ``txnVersion``), where the app id is the
streaming query's id from its checkpoint. Spark runs a micro-batch again after a crash with the same batch id;
a table whose log already holds that batch id (or a later one) for this app id is skipped, so no batch is
applied twice to any table and a half-applied batch is completed.
"""

from __future__ import annotations

import ast
import json
import logging
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from mysql_cdc.chunks import is_after
from mysql_cdc.errors import ConfigError, MysqlCdcError, StateError
from mysql_cdc.ids import TableId
from mysql_cdc.keyrange import KeyRange, reset_range
from mysql_cdc.large_values import LargeValues, large_values
from mysql_cdc.memory import return_freed_memory
from mysql_cdc.options import CdcOptions
from mysql_cdc.rowjson import decode_rows
from mysql_cdc.rows import (
    COMMIT_COLUMN,
    DATABASE_COLUMN,
    OP_COLUMN,
    POSITION_COLUMN,
    RANGE_RESET_OP,
    RESETS,
    SEQ_COLUMN,
    SNAPSHOT,
    TABLE_COLUMN,
    VALUES_COLUMN,
)
from mysql_cdc.schema import TableSchema
from mysql_cdc.state.storage import list_names, read_text
from mysql_cdc.state.store import StateStore, capture_options, tighten_umask
from mysql_cdc.udtf.convert import table_arrow_schema
from mysql_cdc.udtf.sync.last_image import appends, merge_fields
from mysql_cdc.udtf.sync.mirror import DeltaMirror, check_tables
from mysql_cdc.udtf.sync.target import SyncLock, hold_sync_locks

APP_PREFIX = "mysql_cdc.sync:"
MERGE_THREADS = 4  # tables of a batch merged at once by the Spark writer (each a Spark job)
_log = logging.getLogger("mysql_cdc.sync")


@dataclass
class BatchStats:
    """What one micro-batch did (for progress)."""

    batch_id: int
    rows: int = 0
    applied: dict[str, int] = field(default_factory=dict)  # table -> rows merged
    skipped: list[str] = field(default_factory=list)  # tables this batch had already been applied to
    ignored: list[str] = field(default_factory=list)  # tables without a primary key, not mirrored
    seconds: float = 0.0
    # where the batch's time went in this process: collecting it from Spark (which runs the read; Spark's
    # writers: the job that reads the batch, persists it and counts each table's rows), decoding the rows (delta-rs:
    # in this process), merging them (Spark's writers: decoded on the executors as they merge)
    collect_seconds: float = 0.0
    decode_seconds: float = 0.0
    merge_seconds: float = 0.0
    last_commit: float | None = None  # commit time of the latest change applied, seconds since the epoch
    large_values: int = 0  # files of large values removed after the batch (its values', and any an attempt left)

    def count(self, table: TableId, merged: bool, rows: int, last: Any) -> None:
        """One table's part of the batch: merged (``rows``) or skipped (its mirror had the batch already), and
        the commit time of its latest change (a datetime, or ``None``)."""
        if merged:
            self.applied[str(table)] = rows
        else:
            self.skipped.append(str(table))
        if last is not None:
            self.last_commit = max(self.last_commit or 0.0, last.timestamp())


def committed_batches(checkpoint: str) -> int:
    """The last batch a sync's checkpoint committed (-1: none)."""
    done = [int(n) for n in list_names(checkpoint, "commits") if n.isdigit()]
    return max(done, default=-1)


def batch_end(checkpoint: str, batch: int) -> dict[str, Any]:
    """Where batch ``batch`` of a sync's stream ended: the source's offset Spark logged for it (JSON, or on Spark
    4.0 the dict's Python text)."""
    text = read_text(checkpoint, "offsets", str(batch))
    lines = [line for line in (text or "").splitlines() if line.strip()]
    if len(lines) < 3:
        raise StateError(f"the checkpoint {checkpoint!r} has no offset of batch {batch}: is it this sync's?")
    try:
        end = json.loads(lines[-1])
    except ValueError:
        end = ast.literal_eval(lines[-1])
    if not isinstance(end, dict):
        raise StateError(f"the checkpoint {checkpoint!r} logged an offset of batch {batch} not ours: {lines[-1]!r}")
    return end


def query_app_id(checkpoint: str) -> str:
    """The app id of a sync's Delta transactions: the streaming query's id, which Spark keeps in the
    checkpoint's ``metadata`` file across restarts (a new checkpoint is a new query: its batch ids start again
    at 0 and must not be taken for the old query's)."""
    where = f"{checkpoint.rstrip('/')}/metadata"
    try:
        text = read_text(checkpoint, "metadata")
        if text is None:
            raise FileNotFoundError(f"no such file: {where!r}")
        return APP_PREFIX + str(json.loads(text)["id"])
    except (OSError, ValueError, KeyError, MysqlCdcError) as e:
        raise StateError(f"cannot read the streaming query's id from {where!r} ({e}); the sync reads its "
                         "checkpoint on a local path or a store the state_dir could be on (state/storage.py)") from e


def claim_query(state_dir: str, app_id: str) -> str:
    """``app_id`` (the streaming query of the sync's checkpoint), once the capture's state dir records it as the
    query that feeds its mirror (the first batch of a sync records it); a state dir that another query fed is
    refused: that query read the capture's snapshot onto the mirror, and this one, which starts from its own
    checkpoint, would read it again (``last_image.appends`` counts on one query per mirror)."""
    held = StateStore(state_dir).record_sync_query(app_id)
    if held != app_id:
        raise StateError(f"the state_dir {state_dir!r} feeds the streaming query {held!r}, and this checkpoint is of "
                         f"another one ({app_id!r}): a capture's state_dir goes with the checkpoint it began with. "
                         "Give the sync its checkpoint back, or start this mirror again (a new target, checkpoint and "
                         "state_dir)")
    return app_id


class SyncBatches:
    """The ``foreachBatch`` function of a sync: each micro-batch of the envelope stream (option ``tables``)
    split by table, typed again with the schema the capture recorded, and merged into that table's mirror."""

    def __init__(self, mirror: Any, state_dir: str, checkpoint: str,
                 on_batch: Callable[[BatchStats], None] | None = None, prepare: bool = False,
                 large: LargeValues | None = None) -> None:
        self.mirror = mirror
        self.large = large  # the folder the stream's large values come through (option large_value_dir)
        self.state_dir = state_dir
        self.checkpoint = checkpoint
        self.on_batch = on_batch
        self._prepare = prepare  # create or check the tables where the batches run, before the first is read
        self._app_id: str | None = None
        self._ignored: set[TableId] = set()
        self._locks: list[SyncLock] = []

    def __call__(self, df: Any, batch_id: int) -> None:
        started = time.monotonic()
        return_freed_memory()  # a batch's large values are given back once written (mysql_cdc.memory)
        by_spark = getattr(self.mirror, "writer", "delta-rs") == "spark"  # merged by Spark: no row comes here
        if by_spark:
            self.mirror.spark = df.sparkSession  # the session the batch runs in (a Connect server's own)
        if self._prepare:
            # a Spark Connect server's batch function: it holds the locks, where it writes (for the life of its
            # process, which is the query's)
            tighten_umask()
            self._locks = hold_sync_locks(self.state_dir, self.mirror.root)
            # the tables the capture holds, with the columns it recorded when it planned them (before this
            # first batch): the client neither connects nor describes; a mirror follows a later ALTER when the
            # stream comes to it, not before
            schemas = captured_schemas(StateStore(self.state_dir))
            check_tables(schemas)
            self.mirror.prepare(schemas)
            self._prepare = False
        if self._app_id is None:
            self._app_id = claim_query(self.state_dir, query_app_id(self.checkpoint))
        stats = BatchStats(batch_id)
        if by_spark:
            self.follow_schemas()
            self.apply_frame(df, batch_id, stats)
        else:
            held = [df.toArrow()]  # in a list apply empties: no reference here keeps the batch's texts alive
            stats.collect_seconds = time.monotonic() - started
            stats.rows = held[0].num_rows
            self.follow_schemas()
            if stats.rows:
                self.apply(held, batch_id, stats)
        if self.large is not None:
            # the batch is in the mirror: no value of it is read again (a batch run again after a failure is
            # read again from the source, which writes its values again). A failure here fails no batch (Spark
            # would run it again, the mirror skip it, and this fail again): the files are garbage now.
            try:
                stats.large_values = self.large.clear()
            except OSError as e:
                _log.warning("the files of large values under %r were not removed (%s); the next batch tries "
                             "again", self.large.folder, e)
        stats.seconds = time.monotonic() - started
        if self.on_batch is not None:
            self.on_batch(stats)

    def follow_schemas(self) -> None:
        """Mirrors whose table's schema the capture changed (a DDL statement followed) get its new columns, also
        when the batch has no row of them."""
        store = StateStore(self.state_dir)
        for table in store.recorded_schemas():
            schema = store.schema(table)
            if schema is not None and schema.primary_key and store.mirror(table) is not None:
                self.mirror.evolve(schema)

    def apply(self, held: list[pa.Table], batch_id: int, stats: BatchStats) -> None:
        """Merge a batch (the envelope's rows, the one table of ``held``, which this takes out) into the mirror,
        table by table. A batch of one table lets its texts go once decoded, before the write: a row of large
        values (which comes alone) is then held once as bytes, not also as its JSON text."""
        assert self._app_id is not None
        data = held.pop()
        store = StateStore(self.state_dir)
        opts = capture_options(store)
        names = pc.binary_join_element_wise(data.column(DATABASE_COLUMN), data.column(TABLE_COLUMN), "\x00")
        tables = pc.unique(names).to_pylist()
        for name in tables:
            db, tb = name.split("\x00")
            table = TableId(db, tb)
            part = data if len(tables) == 1 else data.filter(pc.equal(names, name))  # no copy of a batch of one
            ops = part.column(OP_COLUMN).to_pylist()
            resets = [i for i, op in enumerate(ops) if op in RESETS]
            key_range = reset_range(part.column(POSITION_COLUMN)[resets[0]].as_py()) if resets else None
            schema = self._to_merge(table, part.num_rows, bool(resets), store, batch_id, stats, key_range)
            if schema is None:
                continue
            t0 = time.monotonic()
            values = pa.schema(merge_fields(table_arrow_schema(schema.columns, opts.tinyint1_as_boolean),
                                            schema.primary_key))
            typed = pa.Table.from_batches([decode_rows(c, values, self.large)
                                           for c in part.column(VALUES_COLUMN).chunks],
                                          schema=values)
            # __op and _change_seq copied: a batch read from Spark has one buffer for all its columns, which a
            # slice of it keeps whole
            rows = typed.append_column(OP_COLUMN, _own(part.column(OP_COLUMN))) \
                .append_column(SEQ_COLUMN, _own(part.column(SEQ_COLUMN)))
            last = pc.max(part.column(COMMIT_COLUMN)).as_py()
            if len(tables) == 1:
                del data, part, typed  # the texts go (the loop ends here)
            t1 = time.monotonic()
            stats.decode_seconds += t1 - t0
            snapshot = all(op == SNAPSHOT for op in ops)
            fresh = appends(snapshot, schema.primary_key, schema.chunk_key, snapshot and reads_keys(store, table))
            merged = self.mirror.apply(schema, rows, self._app_id, batch_id, append=fresh)
            stats.merge_seconds += time.monotonic() - t1
            stats.count(table, merged, len(ops), last)

    def _to_merge(self, table: TableId, rows: int, reset: bool, store: StateStore, batch_id: int,
                  stats: BatchStats, key_range: KeyRange | None = None) -> TableSchema | None:
        """What a batch's rows of ``table`` ask before any merge: a reset (the table left the capture; the batch
        is the statement that took it out, alone: its mirror's rows go, or those in ``key_range`` for a ``-R``
        row), done here; a table without a key, left out; else the schema to merge them with."""
        assert self._app_id is not None
        if reset:
            if rows != 1:
                raise StateError(f"a batch holds {rows - 1} rows of {str(table)!r} beside its reset")
            stats.count(table, self.mirror.reset(table, self._app_id, batch_id, key_range), 1, None)
            return None
        schema = store.schema(table)
        if schema is None:
            raise StateError(f"rows of {str(table)!r} came without a recorded schema under {self.state_dir!r}")
        if not schema.primary_key:
            # a table without a key that started to match while the job ran (at the start such a table is an
            # error): the stream captures it from then on, whatever the patterns say after a restart, and a
            # mirror cannot merge it. Said once per run, counted in every batch.
            if table not in self._ignored:
                self._ignored.add(table)
                _log.warning("table %s has no primary key: the sync leaves it out (a mirror merges by key); "
                             "give it one and start this mirror again to mirror it", table)
            stats.ignored.append(str(table))
            return None
        return schema

    def apply_frame(self, df: Any, batch_id: int, stats: BatchStats) -> None:
        """:meth:`apply` for a mirror Spark writes: the batch is persisted once and each table's rows merged by
        Spark jobs (:meth:`.spark_mirror.SparkDeltaMirror.apply_frame`); this process sees one row per table."""
        from pyspark.sql import functions as F

        assert self._app_id is not None
        store = StateStore(self.state_dir)
        opts = capture_options(store)
        df = df.persist()
        try:
            t0 = time.monotonic()
            groups = (df.groupBy(DATABASE_COLUMN, TABLE_COLUMN)
                      .agg(F.count(F.lit(1)).alias("n"),
                           F.max(F.col(OP_COLUMN).isin(*RESETS).cast("int")).alias("reset"),
                           F.max(F.when(F.col(OP_COLUMN) == RANGE_RESET_OP, F.col(POSITION_COLUMN))).alias("range"),
                           F.min((F.col(OP_COLUMN) == SNAPSHOT).cast("int")).alias("snapshot"),
                           F.max(COMMIT_COLUMN).alias("last")).collect())
            stats.collect_seconds = time.monotonic() - t0  # the batch read from the source and persisted
            stats.rows = sum(int(g["n"]) for g in groups)
            merges: list[tuple[Any, TableSchema, Any]] = []  # (group, schema, rows): merged together below
            for g in groups:
                table = TableId(g[DATABASE_COLUMN], g[TABLE_COLUMN])
                schema = self._to_merge(table, int(g["n"]), bool(g["reset"]), store, batch_id, stats,
                                        reset_range(g["range"]))
                if schema is None:
                    continue
                part = df.filter((F.col(DATABASE_COLUMN) == table.database) & (F.col(TABLE_COLUMN) == table.table))
                merges.append((g, schema, part))
            t0 = time.monotonic()
            app_id, together = self._app_id, len(merges) > 1

            def merge(item: tuple[Any, TableSchema, Any]) -> bool:
                g, schema, part = item
                capture = table_arrow_schema(schema.columns, opts.tinyint1_as_boolean)
                fresh = appends(bool(g["snapshot"]), schema.primary_key, schema.chunk_key,  # new keys only
                                bool(g["snapshot"]) and reads_keys(store, schema.table))
                return bool(self.mirror.apply_frame(schema, part, capture, app_id, batch_id, own_session=together,
                                                    append=fresh))

            # the batch's tables merge at the same time, each MERGE a Spark job of its own (its own session)
            with ThreadPoolExecutor(max_workers=min(MERGE_THREADS, max(1, len(merges)))) as pool:
                done = list(pool.map(merge, merges))
            stats.merge_seconds += time.monotonic() - t0
            for (g, schema, _), merged in zip(merges, done):
                stats.count(schema.table, merged, int(g["n"]), g["last"])
        finally:
            df.unpersist()


def reads_keys(store: StateStore, table: TableId) -> bool:
    """Whether the table's plan reads a list of keys of a string key (a chunk of one key: its end just after it,
    :data:`~mysql_cdc.chunks.AFTER`)."""
    return any(is_after(c.end) for c in store.plan(table) or ())


def _own(col: pa.ChunkedArray) -> pa.ChunkedArray:
    """A column in buffers of its own (Arrow's concatenation copies, also of one piece)."""
    return pa.chunked_array([pa.concat_arrays(col.chunks)] if col.num_chunks else [], col.type)


def captured_schemas(store: StateStore) -> list[TableSchema]:
    """The schemas the capture recorded for the tables it holds now: every round's tables, less those a
    round took out (dropped)."""
    held: dict[TableId, None] = {}
    for rnd in store.rounds():
        for t in rnd.tables:
            held[t] = None
        for t in rnd.dropped:
            held.pop(t, None)
    out = []
    for t in held:
        schema = store.schema(t)
        if schema is None:
            raise StateError(f"the schema of {str(t)!r} is missing under {store.location!r}; the state_dir must stay "
                             "with the checkpoint")
        out.append(schema)
    return out


def make_mirror(spark: Any, to: str, opts: CdcOptions, lakes: tuple[str, ...], fmt: str = "delta") -> Any:
    """The mirror of a sync in format ``fmt``: written by Spark where the session writes that format (the
    caller asks ``udtf/spark/compat.lake_formats``: this layer does not import the Spark surfaces), else, for
    Delta, by delta-rs (:func:`.sinks.choose_writer`); the choice is logged (the CLI prints it)."""
    from mysql_cdc.udtf.sync.sinks import check_format, choose_writer, parse_target

    assert opts.state_dir
    target = parse_target(to)
    lake = check_format(fmt)
    writer = choose_writer(target, lakes, lake)
    _log.info("the mirror's %s tables are written by %s", "Iceberg" if lake == "iceberg" else "Delta",
              "Spark" if writer == "spark" else "delta-rs")
    if lake == "iceberg":
        from mysql_cdc.udtf.sync.spark_mirror import SparkIcebergMirror

        return SparkIcebergMirror(spark, target, opts, opts.state_dir)
    if writer == "spark":
        from mysql_cdc.udtf.sync.spark_mirror import SparkDeltaMirror

        return SparkDeltaMirror(spark, target, opts, opts.state_dir)
    return DeltaMirror(to, opts, opts.state_dir)


def start_sync(spark: Any, opts: CdcOptions, schemas: list[TableSchema] | None, to: str, checkpoint: str,
               reader_options: Mapping[str, str], trigger: Mapping[str, Any],
               on_batch: Callable[[BatchStats], None] | None = None, remote: bool = False,
               lakes: tuple[str, ...] = (), fmt: str = "delta") -> Any:
    """Create or check the mirror tables of ``schemas``, then start the streaming query; returns it. From a Spark
    Connect client (``remote``, no ``schemas``) the batch function runs in the server, whose file system holds
    the target, and whose stream described the tables: they are created or checked there from what the
    capture recorded (:func:`captured_schemas`), before the first batch's rows are read."""
    if not opts.state_dir:
        raise ConfigError("the sync job needs a state_dir (the capture's chunk plan, watermarks and schemas)")
    mirror = make_mirror(spark, to, opts, lakes, fmt)
    if not remote:
        assert schemas is not None
        mirror.prepare(schemas)
    reader = spark.readStream.format("mysql_cdc")
    for k, v in reader_options.items():
        reader = reader.option(k, v)
    handler = SyncBatches(mirror, opts.state_dir, checkpoint, on_batch, prepare=remote,
                          large=large_values(opts.large_value_dir, opts.large_value_bytes))
    return (reader.load().writeStream.foreachBatch(handler).option("checkpointLocation", checkpoint)
            .trigger(**trigger).start())
