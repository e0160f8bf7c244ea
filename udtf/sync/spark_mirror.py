"""The mirror written by Spark's own Delta Lake (or Apache Iceberg: :class:`SparkIcebergMirror`, which differs
where the formats do): each micro-batch decoded, reduced to the last image per key and MERGEd by Spark jobs on
the executors; the driver plans and commits and never holds the batch's rows.

Used where the session has Delta's Spark classes (``udtf/sync/sinks.py``); the target is a folder
(``<to>/<db>/<table>``, as delta-rs writes it: either writer reads the other's tables) or a catalog namespace.
The same contract as :class:`~mysql_cdc.udtf.sync.mirror.DeltaMirror`:

- tables created (or checked: made by this capture, its sync id in table property ``mysql_cdc.sync``, with the
  capture's columns) before any data is read; key columns NOT NULL; column types by ``lake_types``;
- a batch's snapshot rows of new keys (``last_image.appends``) are appended (``INSERT``), without the MERGE's join;
- exactly once: every MERGE, INSERT and DELETE commits with Delta's idempotent-write settings
  ``spark.databricks.delta.write.txnAppId`` / ``txnVersion`` (the query's id, the batch id), which Delta skips
  when the table's log holds that version of that app already (measured on delta-spark 4.4.0: a replayed MERGE,
  INSERT or DELETE commits nothing); a schema change's ALTER or rewrite carries none (done again, it finds the
  table changed already, or gives the same table);
- a schema change is one ``ALTER TABLE`` where one does it (``delta_evolve``: columns added at the end, one
  renamed or some dropped, with column mapping), else it moves the rows to the new columns (``evolve_rows``, by
  the capture's history) in one overwrite of the table, as delta-rs does; a reset (``T`` row) deletes every row.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import uuid
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import pyarrow as pa

from mysql_cdc.errors import ConfigError, StateError, TableError
from mysql_cdc.ids import TableId
from mysql_cdc.keyrange import KeyRange
from mysql_cdc.large_values import LargeValues, large_values
from mysql_cdc.options import CdcOptions
from mysql_cdc.rowjson import decode_rows
from mysql_cdc.rows import OP_COLUMN, SEQ_COLUMN, VALUES_COLUMN
from mysql_cdc.schema import TableSchema
from mysql_cdc.state.store import StateStore
from mysql_cdc.udtf.schema.evolve import evolve_rows
from mysql_cdc.udtf.sync.applied import Applied, exactly_once
from mysql_cdc.udtf.sync.delta_evolve import COLUMN_MAPPING, delta_alter
from mysql_cdc.udtf.sync.iceberg_evolve import schema_update
from mysql_cdc.udtf.sync.lake_types import (
    Format,
    identifier_fields,
    lake_arrow_type,
    large_value_settings,
    to_lake,
)
from mysql_cdc.udtf.sync.last_image import DELETE_COLUMN, DELETE_OPS
from mysql_cdc.udtf.sync.mirror import _SYNC_ID, check_tables, delta_schema, mirror_renames, table_path
from mysql_cdc.udtf.sync.sinks import Target, check_names, quote

_log = logging.getLogger("mysql_cdc.sync")
SYNC_PROPERTY = "mysql_cdc.sync"
TXN_APP, TXN_VERSION = "spark.databricks.delta.write.txnAppId", "spark.databricks.delta.write.txnVersion"
_ONE_SESSION = threading.Lock()  # commits from one session, whose settings all its threads share, one at a time
_RANK = "__mysql_cdc_rank"


def _spark_schema(schema: pa.Schema, nullable: bool = True) -> Any:
    """Spark's schema of an Arrow schema, every field nullable (what ``mapInArrow`` hands back) unless
    ``nullable`` is false (then as the Arrow schema says: a rewrite's key columns stay NOT NULL)."""
    from pyspark.sql.pandas.types import from_arrow_schema

    return from_arrow_schema(pa.schema([f.with_nullable(True) for f in schema]) if nullable else schema)


def _types(schema: Any) -> list[tuple[str, str]]:
    return [(f.name, f.dataType.simpleString()) for f in schema.fields]


def _wanted(want: pa.Schema) -> list[tuple[str, str, bool]]:
    """The mirror's wanted columns as (name, Spark type text, nullable), as the schema-update rules take them."""
    return [(n, t, f.nullable) for (n, t), f in zip(_types(_spark_schema(want, nullable=False)), want)]


def decode_batches(capture: pa.Schema, lake: pa.Schema, fmt: Format = "delta",
                   large: LargeValues | None = None) -> Any:
    """The ``mapInArrow`` function of one table's rows: the JSON images decoded with the capture's schema
    (``rowjson``, exact), in the lake's types (``to_lake``), with the change type and sequence beside them. It
    runs on the executors, which read the large values ``large``'s folder holds."""
    out = pa.schema([*(f.with_nullable(True) for f in lake), pa.field(OP_COLUMN, pa.string()),
                     pa.field(SEQ_COLUMN, pa.int64())])

    def decode(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for b in batches:
            typed = to_lake(decode_rows(b.column(VALUES_COLUMN), capture, large), fmt)
            yield pa.RecordBatch.from_arrays([*typed.columns, b.column(OP_COLUMN), b.column(SEQ_COLUMN)],
                                             schema=out)
    return decode


class SparkDeltaMirror:
    """The Delta tables of one sync, written by Spark."""

    writer = "spark"
    fmt: Format = "delta"
    label = "Delta"

    def __init__(self, spark: Any, target: Target, opts: CdcOptions, state_dir: str) -> None:
        self.spark = spark
        self.target = target
        self.opts = opts
        self.state_dir = state_dir
        self._columns: dict[TableId, list[tuple[str, str]]] = {}
        self._parquet: dict[TableId, dict[str, str]] = {}  # the Parquet properties each table is known to have

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
        """The mirror table's columns: the capture's, in this format's types (``lake_types``)."""
        return pa.schema([f.with_type(lake_arrow_type(f.type, self.fmt)) for f in delta_schema(schema, self.opts)])

    def _ddl(self, want: pa.Schema, key: Iterable[str]) -> str:
        keys = set(key)
        return ", ".join(f"{quote(f.name)} {t} {'NOT NULL' if f.name in keys else ''}".rstrip()
                         for f, (_, t) in zip(want, _types(_spark_schema(want))))

    def _detail(self, table: TableId) -> Any:
        """``DESCRIBE DETAIL`` of the mirror table, ``None`` where there is no Delta table (a catalog's table is
        looked up first: Spark logs an error for a missing one even when the caller catches it)."""
        try:
            if self.target.kind == "catalog" and not self.spark.catalog.tableExists(self.name(table)):
                return None
            return self.spark.sql(f"DESCRIBE DETAIL {self.name(table)}").collect()[0]
        except Exception as e:  # AnalysisException on a missing table or a folder without a Delta log
            if _missing(e):
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
            exists, owner = self._owner(s.table)
            if exists:
                if owner != sync_id:
                    by = f"by the sync {owner!r}" if owner else "by something other than this job"
                    raise TableError(f"the {self.label} table {self.name(s.table)} for {str(s.table)!r} was made "
                                     f"{by}, not by the capture of state_dir {self.state_dir!r} (sync "
                                     f"{sync_id!r}): a mirror merges only into tables it made; sync into another "
                                     "target, or use the checkpoint and state_dir that made this one")
                self.evolve(s)
                self._large_value_properties(s)
            elif self.target.kind == "path" and _not_empty(table_path(self.target.value, s.table)):
                raise ConfigError(f"{table_path(self.target.value, s.table)!r} exists and is not a Delta table; the "
                                  f"mirror of {str(s.table)!r} goes there: move it away or sync into another target")
            elif store.mirror(s.table) is not None:
                raise StateError(f"the {self.label} table of {str(s.table)!r} that this capture made at "
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
            props = {SYNC_PROPERTY: sync_id, **self._large_value_settings(s)}
            self.spark.sql(f"CREATE TABLE IF NOT EXISTS {self.name(s.table)} ({self._ddl(want, s.primary_key)}) "
                           f"USING {self.fmt} COMMENT {_literal(comment)} "
                           f"TBLPROPERTIES ({', '.join(f'{_literal(k)} = {_literal(v)}' for k, v in props.items())})")
            self._keyed(s, want)
            store.record_mirror(s.table, self.name(s.table))
            self._columns[s.table] = _types(_spark_schema(want))
        return [s.table for s in todo]

    def _large_value_settings(self, schema: TableSchema) -> dict[str, str]:
        """Parquet's settings for the table's writes (:func:`.lake_types.large_value_settings`: none unless it has
        BLOB columns), as Delta table properties: Delta hands a table's properties to the Parquet writer of each
        write of it (a MERGE's, an append's, and a user's OPTIMIZE too), so no session setting is set and set
        back around a write. (Until 2026-12-01 they were session settings around the sync's write: a write of the
        table then got a dictionary in about one run of three of the 4.2 catalog test, its Parquet settings half
        set back, for a reason not found.)"""
        if self.fmt != "delta":
            return {}
        return large_value_settings([(c.name, c.data_type) for c in schema.columns], schema.primary_key)

    def _large_value_properties(self, schema: TableSchema) -> None:
        """An existing table (made before the settings were properties, or given a BLOB column since: a
        VARBINARY made a LONGBLOB changes no Spark type) gets them; asked of the table once per settings."""
        want = self._large_value_settings(schema)
        if not want or self._parquet.get(schema.table) == want:
            return
        detail = self._detail(schema.table)
        have = (detail["properties"] or {}) if detail is not None else {}
        if any(have.get(k) != v for k, v in want.items()):
            props = ", ".join(f"{_literal(k)} = {_literal(v)}" for k, v in want.items())
            self.spark.sql(f"ALTER TABLE {self.name(schema.table)} SET TBLPROPERTIES ({props})")
        self._parquet[schema.table] = want

    def _owner(self, table: TableId) -> tuple[bool, str | None]:
        """Whether the mirror table is there, and the sync id of the capture that made it: a table property
        (this writer) or the sync id in the description (delta-rs)."""
        detail = self._detail(table)
        if detail is None:
            return False, None
        described = _SYNC_ID.search(str(detail["description"] or ""))
        return True, (detail["properties"] or {}).get(SYNC_PROPERTY) or (described and described.group(1)) or None

    def _keyed(self, schema: TableSchema, want: pa.Schema) -> None:
        """What the format keeps of the key beside NOT NULL columns (Delta: nothing more)."""

    def _current(self, table: TableId) -> Any:
        """The mirror table's rows as a DataFrame."""
        detail = self._detail(table)
        if detail is None:
            raise StateError(f"the mirror table {self.name(table)} of {str(table)!r} is gone")
        return self.spark.read.format("delta").load(str(detail["location"]))

    def _rewrite(self, schema: TableSchema, moved: Any) -> None:
        """Replace the mirror table's columns and rows with ``moved`` in one commit; its properties (the sync
        id) and its name in a catalog stay."""
        location = str(self._detail(schema.table)["location"])
        moved.write.format("delta").mode("overwrite").option("overwriteSchema", "true").save(location)

    def _in_place(self, schema: TableSchema, have: list[tuple[str, str, bool]], want: pa.Schema,
                  renamed: dict[str, str]) -> bool:
        """Follow a schema change without a rewrite where the format can; true when done. ``have``: the table's
        (name, type, nullable). Delta: one ``ALTER TABLE`` (``delta_evolve``: columns added at the end, one
        renamed, or dropped), the table given column mapping first for a rename or a drop."""
        alter = delta_alter(schema_update(have, _wanted(want), renamed, schema.primary_key), have)
        if alter is None:
            return False
        name = self.name(schema.table)
        if alter.needs_mapping and (self._detail(schema.table)["properties"] or {}).get(
                "delta.columnMapping.mode", "none") == "none":
            props = ", ".join(f"{_literal(k)} = {_literal(v)}" for k, v in COLUMN_MAPPING.items())
            self.spark.sql(f"ALTER TABLE {name} SET TBLPROPERTIES ({props})")
        if alter.kind == "add":
            sql = f"ADD COLUMNS ({', '.join(f'{quote(n)} {t}' for n, t in alter.columns)})"
        elif alter.kind == "rename":
            (old, new), = alter.columns
            sql = f"RENAME COLUMN {quote(old)} TO {quote(new)}"
        else:
            sql = f"DROP COLUMNS ({', '.join(quote(n) for n, _ in alter.columns)})"
        self.spark.sql(f"ALTER TABLE {name} {sql}")
        return True

    def _exactly_once(self, session: Any, table: TableId, app_id: str, batch_id: int, sql: str) -> bool:
        """Run ``sql`` (one commit to the table) once for the batch: Delta skips it when the table's log holds
        this batch of this app (the idempotent-write settings). True when it committed.

        A MERGE says so itself: Delta answers one that ran with one row of counts (zeros too: it commits), and
        one it skipped with no row (delta-spark 4.4.0, measured). An INSERT answers no row either way, and a
        DELETE the same row both ways, so for them the table's version is read before and after (a
        ``DESCRIBE HISTORY`` each, 0.6-0.7 s on local[2]: two per table per batch, which MERGEs no longer pay)."""
        merge = sql.lstrip().upper().startswith("MERGE ")
        before = None if merge else self._version(session, table)
        self._txn(session, app_id, batch_id)
        try:
            answer = session.sql(sql).collect()
        finally:
            self._untxn(session)
        return bool(answer) if merge else self._version(session, table) != before

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
        current = self._current(schema.table)
        have_types = _types(current.schema)
        if have_types == want_types:
            self._columns[schema.table] = want_types
            return False
        from pyspark.sql.pandas.types import to_arrow_schema

        have = to_arrow_schema(current.schema)
        renamed = mirror_renames(StateStore(self.state_dir).history(schema.table), have, self._want)
        if renamed is None:
            if current.limit(1).count():
                raise TableError(f"the {self.label} table {name} of {str(schema.table)!r} has columns "
                                 f"{have_types!r}, which no schema the capture recorded for the table had (now "
                                 f"{want_types!r}): start this mirror again (a new target, checkpoint and state_dir)")
            renamed = {}
        moves = renamed
        keys = set(schema.primary_key)
        want = pa.schema([f.with_nullable(f.name not in keys) for f in want])  # as the table was created
        have_columns = [(f.name, f.dataType.simpleString(), f.nullable) for f in current.schema.fields]
        self._large_value_properties(schema)  # a BLOB column added: its Parquet settings before any write
        if self._in_place(schema, have_columns, want, renamed):
            self._columns[schema.table] = want_types
            _log.warning("mirror of %s: columns now %s (in place)", schema.table, [n for n, _ in want_types])
            return True

        def move(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
            for b in batches:
                yield from evolve_rows(pa.Table.from_batches([b]), want, moves).to_batches()

        # the frame's key columns NOT NULL (Delta cannot make a column NOT NULL afterwards), the others nullable;
        # one overwrite of the table's folder: its properties (the sync id) and its name in a catalog stay
        moved = current.mapInArrow(move, _spark_schema(want, nullable=False))
        self._rewrite(schema, moved)
        self._columns[schema.table] = want_types
        _log.warning("mirror of %s: columns now %s", schema.table, [n for n, _ in want_types])
        return True

    def reset(self, table: TableId, app_id: str, batch_id: int, key_range: KeyRange | None = None) -> bool:
        """Delete every row of the table's mirror (or those in ``key_range``) in a commit with the batch's
        transaction; false when the table had this batch already (true where there is no table: nothing to
        delete, and nothing to call applied before)."""
        if not self._owner(table)[0]:
            return True
        where = "" if key_range is None else f" WHERE {key_range.predicate(quote)}"
        return self._exactly_once(self.spark, table, app_id, batch_id, f"DELETE FROM {self.name(table)}{where}")

    def apply_frame(self, schema: TableSchema, rows: Any, capture: pa.Schema, app_id: str, batch_id: int,
                    own_session: bool = False, append: bool = False) -> bool:
        """Merge one batch's rows of one table (a DataFrame of the stream's rows of that table) with one MERGE,
        run by Spark; false when the table's log holds this batch already (Delta skipped it). ``own_session``:
        the MERGE runs in a new session of its own (a classic one), whose settings (the batch's transaction) no
        other table's MERGE running at the same time sees. ``append``: the rows are new keys, one row each
        (``last_image.appends``): appended (``INSERT``) in one commit with the same transaction, no join."""
        from pyspark.sql import Window
        from pyspark.sql import functions as F

        if schema.table not in self._columns:
            self.prepare([schema])
        self.evolve(schema)
        self._large_value_properties(schema)  # a VARBINARY made a BLOB changes no Spark type: asked each batch
        want = self._want(schema)
        typed = rows.select(VALUES_COLUMN, OP_COLUMN, SEQ_COLUMN).mapInArrow(
            decode_batches(capture, want, self.fmt,
                           large_values(self.opts.large_value_dir, self.opts.large_value_bytes)),
            _spark_schema(pa.schema([*want, pa.field(OP_COLUMN, pa.string()), pa.field(SEQ_COLUMN, pa.int64())])))
        if append:
            final = typed.select(*[F.col(quote(f.name)) for f in want])
        else:
            # the greatest _change_seq per key (one per image: the change type only makes the order total), with
            # no non-deterministic expression in the plan (Iceberg's MERGE refuses a source that has one)
            last = Window.partitionBy(*[F.col(quote(k)) for k in schema.primary_key]).orderBy(
                F.col(SEQ_COLUMN).desc(), F.col(OP_COLUMN).isin(*DELETE_OPS).asc())
            final = (typed.withColumn(_RANK, F.row_number().over(last)).filter(F.col(_RANK) == 1)
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
        sql = (f"INSERT INTO {self.name(schema.table)} ({', '.join(cols)}) SELECT {', '.join(cols)} FROM {source}"
               if append else
               f"MERGE INTO {self.name(schema.table)} AS t USING {source} AS s ON {on} "
               f"WHEN MATCHED AND {flag} THEN DELETE "
               f"WHEN MATCHED THEN UPDATE SET {', '.join(f't.{c} = s.{c}' for c in cols)} "
               f"WHEN NOT MATCHED AND NOT {flag} THEN INSERT ({', '.join(cols)}) "
               f"VALUES ({', '.join(f's.{c}' for c in cols)})")
        # not a session of its own (Spark Connect's, or one table): its transaction settings are one for every
        # thread that merges at the same time, so their MERGEs take turns (a thread's unset between another's
        # set and its MERGE would commit that MERGE without the batch's txn)
        try:
            with contextlib.nullcontext() if shared else _ONE_SESSION:
                return self._exactly_once(session, schema.table, app_id, batch_id, sql)
        finally:
            if shared:
                session.catalog.dropGlobalTempView(view)
            else:
                session.catalog.dropTempView(view)


SNAPSHOT_PROPERTY = "spark.sql.iceberg.snapshot-property."  # + key: a session setting each commit's summary gets
APP_PROPERTY, BATCH_PROPERTY = "mysql_cdc.app", "mysql_cdc.batch"


class SparkIcebergMirror(SparkDeltaMirror):
    """The Iceberg tables of one sync, in a catalog namespace (``lake.mirror_{database}``), written by Spark with
    Iceberg's runtime and SQL extension. As the Delta writer, except:

    - exactly once: Iceberg has no idempotent-write settings. Every commit of a batch (a MERGE, an append, a
      reset's overwrite by no rows) carries the query's id and the batch id in its snapshot summary (session settings
      ``spark.sql.iceberg.snapshot-property.mysql_cdc.app`` / ``.batch``), and a table whose snapshots hold
      that batch of that query, or a later one, skips it. One table's part of a batch is one Iceberg commit,
      all or nothing, so a batch Spark replays after a crash is applied once to every table. (Without the skip
      a replay would still give the same table: the MERGE upserts each key's final image or deletes the key.)
    - keys: NOT NULL and the table's identifier fields (``lake_types.identifier_fields``: none where a key
      column is FLOAT or DOUBLE, which Iceberg refuses; the MERGE is by the key all the same).
    - schema changes: one Iceberg schema update in place (``iceberg_evolve``: renames, drops, additions,
      promotions, order, identifier fields; one metadata commit, no data rewritten); what Iceberg cannot do in
      place rewrites the table in one atomic ``REPLACE`` of its rows moved by the capture's history, which
      keeps its snapshot history and properties (its key columns nullable then, without identifier fields).
    """

    fmt: Format = "iceberg"
    label = "Iceberg"

    def __init__(self, spark: Any, target: Target, opts: CdcOptions, state_dir: str) -> None:
        super().__init__(spark, target, opts, state_dir)
        self._seen = Applied()  # the batch each table took last, as this writer committed it (:mod:`.applied`)

    def __setstate__(self, state: dict[str, Any]) -> None:
        """Unpickled (a Spark Connect server's batch function), from a client of this version or an earlier one."""
        self.__dict__.update(state)
        self.__dict__.setdefault("_seen", Applied())

    def name(self, table: TableId) -> str:
        """``catalog.namespace.table`` (an Iceberg mirror is always in a namespace: ``sinks.choose_writer``)."""
        return self.target.table_name(table)

    def _owner(self, table: TableId) -> tuple[bool, str | None]:
        try:
            if not self.spark.catalog.tableExists(self.name(table)):  # asked first: no error logged by Spark
                return False, None
            rows = self.spark.sql(f"SHOW TBLPROPERTIES {self.name(table)}").collect()
        except Exception as e:
            if _missing(e):
                return False, None
            raise
        return True, {r["key"]: r["value"] for r in rows}.get(SYNC_PROPERTY)

    def _identifier(self, schema: TableSchema, want: pa.Schema) -> tuple[str, ...]:
        """The table's identifier fields: the key, or none (``lake_types.identifier_fields``)."""
        types = dict(_types(_spark_schema(want)))
        return identifier_fields([(k, types[k].upper()) for k in schema.primary_key], "iceberg")

    def reset(self, table: TableId, app_id: str, batch_id: int, key_range: KeyRange | None = None) -> bool:
        """Delete every row of the table's mirror in one commit marked with the batch. Not by ``DELETE FROM``:
        Iceberg deletes whole files from their metadata alone, in a commit that takes no snapshot property from
        the session (found by the eight-kill test: the reset's snapshot named no batch). An overwrite of every
        row by none (``overwrite(True)``: whatever the session's partition overwrite mode) is Spark's write,
        whose commit carries them. The rows of a ``key_range`` go by ``DELETE FROM ... WHERE``, a row-level
        delete (an overwrite by a filter fails on files holding rows on both sides of it); should its commit be
        one of whole files, unmarked, the delete runs again after a crash and finds nothing more to delete."""
        from pyspark.sql import functions as F

        if not self._owner(table)[0]:
            return True  # nothing to delete (not a batch this table had already)
        name = self.name(table)
        if key_range is not None:
            return self._exactly_once(self.spark, table, app_id, batch_id,
                                      f"DELETE FROM {name} WHERE {key_range.predicate(quote)}")
        return self._exactly_once(self.spark, table, app_id, batch_id,
                                  lambda session: session.table(name).where(F.lit(False)).writeTo(name).overwrite(
                                      F.lit(True)))

    def _keyed(self, schema: TableSchema, want: pa.Schema) -> None:
        fields = self._identifier(schema, want)
        if fields:
            self.spark.sql(f"ALTER TABLE {self.name(schema.table)} SET IDENTIFIER FIELDS "
                           f"{', '.join(quote(f) for f in fields)}")

    def _current(self, table: TableId) -> Any:
        if not self._owner(table)[0]:
            raise StateError(f"the mirror table {self.name(table)} of {str(table)!r} is gone")
        return self.spark.table(self.name(table))

    def _rewrite(self, schema: TableSchema, moved: Any) -> None:
        sync_id = StateStore(self.state_dir).record_sync_id()
        self._seen.forget(schema.table)  # the next batch reads the replaced table's history again
        (moved.writeTo(self.name(schema.table)).using("iceberg").tableProperty(SYNC_PROPERTY, sync_id)
         .tableProperty("comment", f"mirror of {schema.table} by pyspark-mysql-cdc, sync {sync_id}")
         .createOrReplace())
        try:  # Spark makes a replaced table's columns nullable, and Iceberg keys no nullable column
            self._keyed(schema, self._want(schema))
        except Exception as e:
            _log.warning("mirror of %s: rewritten without identifier fields (%s); it is merged by its key all the "
                         "same", schema.table, str(e).splitlines()[0][:200])

    def _in_place(self, schema: TableSchema, have: list[tuple[str, str, bool]], want: pa.Schema,
                  renamed: dict[str, str]) -> bool:
        """One Iceberg schema update (``iceberg_evolve``: renames, drops, additions, promotions, the order and
        the identifier fields in a single commit, no data rewritten), through Iceberg's Java API in the session's
        JVM; false where Iceberg cannot, or the session has no JVM here (Spark Connect): then a rewrite."""
        jvm = getattr(self.spark, "_jvm", None)
        update = schema_update(have, _wanted(want), renamed, schema.primary_key)
        if update is None or jvm is None:
            return False
        identifier = self._identifier(schema, want)

        def iceberg_type(spark_type: str) -> Any:
            from pyspark.sql.types import _parse_datatype_string

            data_type = jvm.org.apache.spark.sql.types.DataType.fromJson(_parse_datatype_string(spark_type).json())
            return jvm.org.apache.iceberg.spark.SparkSchemaUtil.convert(data_type)

        try:
            table = jvm.org.apache.iceberg.spark.Spark3Util.loadIcebergTable(self.spark._jsparkSession,
                                                                              self.name(schema.table))
            u = table.updateSchema()
            for old, new in update.renames:
                u = u.renameColumn(old, new)
            for name in update.drops:
                u = u.deleteColumn(name)
            for name, t in update.adds:
                u = u.addColumn(name, iceberg_type(t))
            for name, t in update.promotions:
                u = u.updateColumn(name, iceberg_type(t))
            u = u.moveFirst(update.order[0])
            for before, name in zip(update.order, update.order[1:]):
                u = u.moveAfter(name, before)
            names = jvm.java.util.ArrayList()
            for name in identifier:
                names.add(name)
            u.setIdentifierFields(names).commit()
        except Exception as e:  # an update Iceberg refuses after all (nothing committed): the rewrite does it
            _log.warning("mirror of %s: Iceberg refused the schema update in place (%s): rewriting it",
                         schema.table, str(e).splitlines()[0][:300])
            return False
        self.spark.sql(f"REFRESH TABLE {self.name(schema.table)}")
        return True

    def _applied(self, session: Any, table: TableId, app_id: str) -> int:
        """The latest batch of this query that a commit to the table carries (-1: none)."""
        got = session.sql(f"SELECT max(CAST(summary[{_literal(BATCH_PROPERTY)}] AS BIGINT)) AS b "
                          f"FROM {self.name(table)}.`snapshots` "
                          f"WHERE summary[{_literal(APP_PROPERTY)}] = {_literal(app_id)}").collect()[0]["b"]
        return -1 if got is None else int(got)

    def _exactly_once(self, session: Any, table: TableId, app_id: str, batch_id: int,
                      sql: str | Callable[[Any], None]) -> bool:
        """Run ``sql`` (a statement, or a write given the session) unless the table's snapshots hold this batch
        of this query or a later one (read from them where this writer does not know it:
        :func:`.applied.exactly_once`); its commit carries the query and the batch. True when it ran."""
        def commit() -> None:
            marks = {SNAPSHOT_PROPERTY + APP_PROPERTY: app_id, SNAPSHOT_PROPERTY + BATCH_PROPERTY: str(batch_id)}
            for k, v in marks.items():
                session.conf.set(k, v)
            try:
                session.sql(sql) if isinstance(sql, str) else sql(session)
            finally:
                for k in marks:
                    session.conf.unset(k)

        return exactly_once(self._seen, table, app_id, batch_id, lambda: self._applied(session, table, app_id),
                            commit)


def _missing(e: Exception) -> bool:
    """Whether Spark's error says the table (or its namespace, or a Delta log) is not there."""
    return any(s in str(e) for s in ("TABLE_OR_VIEW_NOT_FOUND", "DELTA_MISSING_DELTA_TABLE", "is not a Delta table",
                                     "DELTA_TABLE_NOT_FOUND", "PATH_NOT_FOUND", "doesn't exist",
                                     "DELTA_PATH_DOES_NOT_EXIST", "SCHEMA_NOT_FOUND", "NoSuchTableException",
                                     "NoSuchNamespaceException"))


def _not_empty(path: str) -> bool:
    """A local folder (or file) that is there and not empty (a URI: not looked at here)."""
    return os.path.lexists(path) and (not os.path.isdir(path) or bool(os.listdir(path)))


def _literal(text: str) -> str:
    """A SQL string literal."""
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"
