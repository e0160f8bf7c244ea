"""The mirror written by Spark's own Delta Lake: each micro-batch decoded, reduced to the last image per key and
MERGEd by Spark jobs on the executors; the driver plans and commits and never holds the batch's rows.

Used where the session has Delta's Spark classes (``udtf/sync/sinks.py``); the target is a folder
(``<to>/<db>/<table>``, as delta-rs writes it: either writer reads the other's tables) or a catalog namespace.
The same contract as :class:`~mysql_cdc.udtf.sync.mirror.DeltaMirror`:

- tables created (or checked: made by this capture, its sync id in table property ``mysql_cdc.sync``, with the
  capture's columns) before any data is read; key columns NOT NULL; column types by ``lake_types``;
- exactly once: every MERGE, DELETE and rewrite commits with Delta's idempotent-write settings
  ``spark.databricks.delta.write.txnAppId`` / ``txnVersion`` (the query's id, the batch id), which Delta skips
  when the table's log holds that version of that app already (measured on delta-spark 4.4.0: a replayed MERGE
  or DELETE commits nothing);
- a schema change moves the rows to the new columns (``evolve_rows``, by the capture's history) in one
  overwrite of the table, as delta-rs does; a reset (``T`` row) deletes every row.
"""

from __future__ import annotations

import logging
import os
import uuid
from collections.abc import Iterable, Iterator
from typing import Any

import pyarrow as pa

from mysql_cdc.errors import ConfigError, StateError, TableError
from mysql_cdc.ids import TableId
from mysql_cdc.options import CdcOptions
from mysql_cdc.rowjson import decode_rows
from mysql_cdc.rows import OP_COLUMN, SEQ_COLUMN, VALUES_COLUMN
from mysql_cdc.schema import TableSchema
from mysql_cdc.state.store import StateStore
from mysql_cdc.udtf.schema.evolve import evolve_rows
from mysql_cdc.udtf.sync.lake_types import to_lake
from mysql_cdc.udtf.sync.last_image import DELETE_COLUMN, DELETE_OPS, ORDER_COLUMN
from mysql_cdc.udtf.sync.mirror import _SYNC_ID, check_tables, delta_schema, mirror_renames, table_path
from mysql_cdc.udtf.sync.sinks import Target, check_names, quote

_log = logging.getLogger("mysql_cdc.sync")
SYNC_PROPERTY = "mysql_cdc.sync"
TXN_APP, TXN_VERSION = "spark.databricks.delta.write.txnAppId", "spark.databricks.delta.write.txnVersion"
_RANK = "__mysql_cdc_rank"


def _spark_schema(schema: pa.Schema, nullable: bool = True) -> Any:
    """Spark's schema of an Arrow schema, every field nullable (what ``mapInArrow`` hands back) unless
    ``nullable`` is false (then as the Arrow schema says: a rewrite's key columns stay NOT NULL)."""
    from pyspark.sql.pandas.types import from_arrow_schema

    return from_arrow_schema(pa.schema([f.with_nullable(True) for f in schema]) if nullable else schema)


def _types(schema: Any) -> list[tuple[str, str]]:
    return [(f.name, f.dataType.simpleString()) for f in schema.fields]


def decode_batches(capture: pa.Schema, lake: pa.Schema) -> Any:
    """The ``mapInArrow`` function of one table's rows: the JSON images decoded with the capture's schema
    (``rowjson``, exact), in the lake's types (``to_lake``), with the change type and sequence beside them. It
    runs on the executors."""
    out = pa.schema([*(f.with_nullable(True) for f in lake), pa.field(OP_COLUMN, pa.string()),
                     pa.field(SEQ_COLUMN, pa.int64())])

    def decode(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for b in batches:
            typed = to_lake(decode_rows(b.column(VALUES_COLUMN).to_pylist(), capture), "delta")
            yield pa.RecordBatch.from_arrays([*typed.columns, b.column(OP_COLUMN), b.column(SEQ_COLUMN)],
                                             schema=out)
    return decode


class SparkDeltaMirror:
    """The Delta tables of one sync, written by Spark."""

    writer = "spark"

    def __init__(self, spark: Any, target: Target, opts: CdcOptions, state_dir: str) -> None:
        self.spark = spark
        self.target = target
        self.opts = opts
        self.state_dir = state_dir
        self._columns: dict[TableId, list[tuple[str, str]]] = {}

    def __getstate__(self) -> dict[str, Any]:
        """Pickled (a Spark Connect server's batch function) without the session: the batch's is used there."""
        return {**self.__dict__, "spark": None, "_columns": {}}

    @property
    def root(self) -> str | None:
        """The folder of a folder target (the sync locks it), ``None`` for a namespace."""
        return self.target.value if self.target.kind == "path" else None

    def name(self, table: TableId) -> str:
        """The mirror table as SQL text: ``delta.`<folder>/<db>/<table>``` or ``catalog.namespace.table``."""
        if self.target.kind == "path":
            return "delta." + quote(table_path(self.target.value, table))
        return self.target.table_name(table)

    def _want(self, schema: TableSchema) -> pa.Schema:
        return delta_schema(schema, self.opts)

    def _ddl(self, want: pa.Schema, key: Iterable[str]) -> str:
        keys = set(key)
        return ", ".join(f"{quote(f.name)} {t} {'NOT NULL' if f.name in keys else ''}".rstrip()
                         for f, (_, t) in zip(want, _types(_spark_schema(want))))

    def _detail(self, table: TableId) -> Any:
        """``DESCRIBE DETAIL`` of the mirror table, ``None`` where there is no Delta table."""
        try:
            return self.spark.sql(f"DESCRIBE DETAIL {self.name(table)}").collect()[0]
        except Exception as e:  # AnalysisException on a missing table or a folder without a Delta log
            text = str(e)
            if any(s in text for s in ("TABLE_OR_VIEW_NOT_FOUND", "DELTA_MISSING_DELTA_TABLE", "is not a Delta table",
                                       "DELTA_TABLE_NOT_FOUND", "PATH_NOT_FOUND", "doesn't exist",
                                       "DELTA_PATH_DOES_NOT_EXIST", "SCHEMA_NOT_FOUND")):
                return None
            raise

    def prepare(self, schemas: Iterable[TableSchema]) -> list[TableId]:
        """Create the mirror table of each schema, or check the existing one (made by this capture, with its
        columns; a later schema is followed); every check runs before any table is created."""
        schemas = list(schemas)
        check_tables(schemas)
        check_names(self.target, [*self._columns, *(s.table for s in schemas)])
        store = StateStore(self.state_dir)
        sync_id = store.record_sync_id()
        todo = []
        for s in schemas:
            detail = self._detail(s.table)
            if detail is not None:
                # made by this writer (a table property) or by delta-rs (the sync id in the description)
                described = _SYNC_ID.search(str(detail["description"] or ""))
                owner = (detail["properties"] or {}).get(SYNC_PROPERTY) or (described and described.group(1))
                if owner != sync_id:
                    by = f"by the sync {owner!r}" if owner else "by something other than this job"
                    raise TableError(f"the Delta table {self.name(s.table)} for {str(s.table)!r} was made {by}, not "
                                     f"by the capture of state_dir {self.state_dir!r} (sync {sync_id!r}): a mirror "
                                     "merges only into tables it made; sync into another target, or use the "
                                     "checkpoint and state_dir that made this one")
                self.evolve(s)
            elif self.target.kind == "path" and _not_empty(table_path(self.target.value, s.table)):
                raise ConfigError(f"{table_path(self.target.value, s.table)!r} exists and is not a Delta table; the "
                                  f"mirror of {str(s.table)!r} goes there: move it away or sync into another target")
            elif store.mirror(s.table) is not None:
                raise StateError(f"the Delta table of {str(s.table)!r} that this capture made at "
                                 f"{store.mirror(s.table)!r} is missing at {self.name(s.table)}, and rows were merged "
                                 "into it already: put it back, or start this mirror again (a new target, "
                                 "checkpoint and state_dir)")
            else:
                todo.append(s)
        for s in todo:
            want = self._want(s)
            if self.target.kind == "catalog":
                self.spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {self.target.namespace(s.table)}")
            comment = f"mirror of {s.table} by pyspark-mysql-cdc, sync {sync_id}"  # as delta-rs describes its own
            self.spark.sql(f"CREATE TABLE IF NOT EXISTS {self.name(s.table)} ({self._ddl(want, s.primary_key)}) "
                           f"USING delta COMMENT {_literal(comment)} "
                           f"TBLPROPERTIES ({_literal(SYNC_PROPERTY)} = {_literal(sync_id)})")
            store.record_mirror(s.table, self.name(s.table))
            self._columns[s.table] = _types(_spark_schema(want))
        return [s.table for s in todo]

    def _txn(self, session: Any, app_id: str, batch_id: int) -> None:
        session.conf.set(TXN_APP, app_id)
        session.conf.set(TXN_VERSION, str(batch_id))

    def _untxn(self, session: Any) -> None:
        session.conf.unset(TXN_APP)
        session.conf.unset(TXN_VERSION)

    def _version(self, session: Any, table: TableId) -> int:
        return int(session.sql(f"DESCRIBE HISTORY {self.name(table)} LIMIT 1").collect()[0]["version"])

    def evolve(self, schema: TableSchema) -> bool:
        """Bring the mirror to ``schema``'s columns if it has others: the table is rewritten with them, its rows
        moved by the capture's history (``evolve_rows``), in one overwrite. Without the batch's transaction: the
        batch's MERGE carries it (Delta would skip a MERGE whose batch the rewrite had claimed), and a rewrite
        done twice gives the same table. True when it changed the table."""
        want = self._want(schema)
        want_types = _types(_spark_schema(want))
        if self._columns.get(schema.table) == want_types:
            return False
        check_tables([schema])
        name = self.name(schema.table)
        detail = self._detail(schema.table)
        if detail is None:
            raise StateError(f"the mirror table {name} of {str(schema.table)!r} is gone")
        location = str(detail["location"])
        current = self.spark.read.format("delta").load(location)
        have_types = _types(current.schema)
        if have_types == want_types:
            self._columns[schema.table] = want_types
            return False
        from pyspark.sql.pandas.types import to_arrow_schema

        have = to_arrow_schema(current.schema)
        renamed = mirror_renames(StateStore(self.state_dir).history(schema.table), have, self._want)
        if renamed is None:
            if current.limit(1).count():
                raise TableError(f"the Delta table {name} of {str(schema.table)!r} has columns {have_types!r}, which "
                                 f"no schema the capture recorded for the table had (now {want_types!r}): start this "
                                 "mirror again (a new target, checkpoint and state_dir)")
            renamed = {}
        moves = renamed
        keys = set(schema.primary_key)
        want = pa.schema([f.with_nullable(f.name not in keys) for f in want])  # as the table was created

        def move(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
            for b in batches:
                yield from evolve_rows(pa.Table.from_batches([b]), want, moves).to_batches()

        # the frame's key columns NOT NULL (Delta cannot make a column NOT NULL afterwards), the others nullable;
        # one overwrite of the table's folder: its properties (the sync id) and its name in a catalog stay
        moved = current.mapInArrow(move, _spark_schema(want, nullable=False))
        moved.write.format("delta").mode("overwrite").option("overwriteSchema", "true").save(location)
        self._columns[schema.table] = want_types
        _log.warning("mirror of %s: columns now %s", schema.table, [n for n, _ in want_types])
        return True

    def reset(self, table: TableId, app_id: str, batch_id: int) -> bool:
        """Delete every row of the table's mirror in a commit with the batch's transaction; false when the table
        is not there or had this batch already."""
        if self._detail(table) is None:
            return False
        session = self.spark
        before = self._version(session, table)
        self._txn(session, app_id, batch_id)
        try:
            session.sql(f"DELETE FROM {self.name(table)}")
        finally:
            self._untxn(session)
        return self._version(session, table) != before

    def apply_frame(self, schema: TableSchema, rows: Any, capture: pa.Schema, app_id: str, batch_id: int,
                    own_session: bool = False) -> bool:
        """Merge one batch's rows of one table (a DataFrame of the stream's rows of that table) with one MERGE,
        run by Spark; false when the table's log holds this batch already (Delta skipped it). ``own_session``:
        the MERGE runs in a new session of its own (a classic one), whose settings (the batch's transaction) no
        other table's MERGE running at the same time sees."""
        from pyspark.sql import Window
        from pyspark.sql import functions as F

        if schema.table not in self._columns:
            self.prepare([schema])
        self.evolve(schema)
        want = self._want(schema)
        typed = rows.select(VALUES_COLUMN, OP_COLUMN, SEQ_COLUMN).mapInArrow(
            decode_batches(capture, want),
            _spark_schema(pa.schema([*want, pa.field(OP_COLUMN, pa.string()), pa.field(SEQ_COLUMN, pa.int64())])))
        last = Window.partitionBy(*[F.col(quote(k)) for k in schema.primary_key]).orderBy(
            F.col(SEQ_COLUMN).desc(), F.col(ORDER_COLUMN).desc())
        final = (typed.withColumn(ORDER_COLUMN, F.monotonically_increasing_id())
                 .withColumn(_RANK, F.row_number().over(last)).filter(F.col(_RANK) == 1)
                 .select(*[F.col(quote(f.name)) for f in want],
                         F.col(OP_COLUMN).isin(*DELETE_OPS).alias(DELETE_COLUMN)))
        session = final.sparkSession
        view = f"mysql_cdc_batch_{uuid.uuid4().hex}"
        shared = own_session and not type(session).__module__.startswith("pyspark.sql.connect")
        if shared:  # a view every session of this Spark sees, merged from a session of its own
            final.createOrReplaceGlobalTempView(view)
            source, session = f"global_temp.{view}", session.newSession()
        else:
            final.createOrReplaceTempView(view)
            source = view
        cols = [quote(f.name) for f in want]
        on = " AND ".join(f"t.{quote(k)} = s.{quote(k)}" for k in schema.primary_key)
        flag = f"s.{quote(DELETE_COLUMN)}"
        sql = (f"MERGE INTO {self.name(schema.table)} AS t USING {source} AS s ON {on} "
               f"WHEN MATCHED AND {flag} THEN DELETE "
               f"WHEN MATCHED THEN UPDATE SET {', '.join(f't.{c} = s.{c}' for c in cols)} "
               f"WHEN NOT MATCHED AND NOT {flag} THEN INSERT ({', '.join(cols)}) "
               f"VALUES ({', '.join(f's.{c}' for c in cols)})")
        before = self._version(session, schema.table)
        self._txn(session, app_id, batch_id)
        try:
            session.sql(sql)
        finally:
            self._untxn(session)
            if shared:
                session.catalog.dropGlobalTempView(view)
            else:
                session.catalog.dropTempView(view)
        return self._version(session, schema.table) != before


def _not_empty(path: str) -> bool:
    """A local folder (or file) that is there and not empty (a URI: not looked at here)."""
    return os.path.lexists(path) and (not os.path.isdir(path) or bool(os.listdir(path)))


def _literal(text: str) -> str:
    """A SQL string literal."""
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"
