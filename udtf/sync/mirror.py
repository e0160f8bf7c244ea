"""The mirror's Delta tables: created (or checked) before any data is read, then merged into, one MERGE per table
and batch, exactly once (Delta's idempotent writes: a ``txn`` action of the query's id and the batch id in the
MERGE's own commit).

Delta tables are written with delta-rs (the ``deltalake`` package): Delta's Spark jars (4.4.0, built for Spark
4.2) fail on Spark 4.3 (``NoSuchMethodError: LogicalRDD.<init>`` on the first read). The tables are plain Delta
tables: Spark with Delta, delta-rs, DuckDB, Trino and others read them."""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Callable, Iterable
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from mysql_cdc.errors import ConfigError, StateError, TableError
from mysql_cdc.ids import TableId
from mysql_cdc.keyrange import KeyRange
from mysql_cdc.options import CdcOptions
from mysql_cdc.rows import (
    META_COLUMNS,
)
from mysql_cdc.schema import EVOLVE, RESET, SNAPSHOT, TableSchema
from mysql_cdc.state.history import HistoryEntry, renames_since
from mysql_cdc.state.store import StateStore, make_dirs, tighten_umask
from mysql_cdc.types import arrow_type, spark_type
from mysql_cdc.udtf.convert import table_arrow_schema
from mysql_cdc.udtf.schema.evolve import evolve_rows
from mysql_cdc.udtf.sync.lake_types import lake_arrow_type, unindexed_columns
from mysql_cdc.udtf.sync.last_image import DELETE_COLUMN, ORDER_COLUMN, final_images, merge_fields
from mysql_cdc.udtf.sync.replace_keys import keys_predicate
from mysql_cdc.udtf.sync.target import local_path, writable

# the sync's stream options unless given: micro-batches the driver can hold (each batch is collected there)
CHECKPOINT_EVERY = 100  # Delta versions between two checkpoints of a mirror table's log
_log = logging.getLogger("mysql_cdc.sync")


def _deltalake() -> Any:
    try:
        import deltalake
    except ImportError as e:
        raise ConfigError(f"the sync job writes Delta tables with the deltalake package, which cannot be imported "
                          f"({e}); install it with: pip install 'pyspark-mysql-cdc[delta]'") from e
    return deltalake


def delta_type(t: pa.DataType) -> pa.DataType:
    """The Delta column type of one of our Arrow types (:func:`.lake_types.lake_arrow_type`): the same, except
    TIME (an Arrow duration: Delta has no interval type), which the mirror keeps as BIGINT microseconds, signed."""
    return lake_arrow_type(t, "delta")


def delta_schema(schema: TableSchema, opts: CdcOptions) -> pa.Schema:
    """The mirror table of ``schema``: its columns, typed as a read of the table types them (see
    :func:`delta_type`); primary key columns NOT NULL, the others nullable, as Spark's writers make them: a
    ``NOT NULL`` DATE, DATETIME or TIMESTAMP column holds zero dates, which read as NULL (the type table).
    Mirrors made before kept the source's ``NOT NULL``; :meth:`DeltaMirror.prepare` relaxes them in place."""
    key = set(schema.primary_key)
    return pa.schema([pa.field(f.name, delta_type(f.type), f.name not in key)
                      for f in table_arrow_schema(schema.columns, opts.tinyint1_as_boolean)])


def relaxed_columns(have: pa.Schema, want: pa.Schema) -> list[str] | None:
    """The columns a table made as ``have`` needs made nullable to be ``want``, when its columns and types are
    ``want``'s (``None`` otherwise). A column nullable in ``have`` that ``want`` has NOT NULL (a key column the
    table was made without) is not this rule's: Delta cannot make a column NOT NULL (see :meth:`DeltaMirror.evolve`).

    >>> f = pa.field
    >>> have = pa.schema([f("id", pa.int32(), False), f("d", pa.date32(), False), f("v", pa.string())])
    >>> relaxed_columns(have, pa.schema([f("id", pa.int32(), False), f("d", pa.date32()), f("v", pa.string())]))
    ['d']
    >>> relaxed_columns(have, have), relaxed_columns(have, pa.schema([f("id", pa.int64()), *list(have)[1:]]))
    ([], None)
    >>> relaxed_columns(pa.schema([f("id", pa.int32()), *list(have)[1:]]), pa.schema([f("id", pa.int32(), False),
    ...                 f("d", pa.date32()), f("v", pa.string())]))  # the key nullable: d relaxed all the same
    ['d']
    """
    if _same_columns(have, want) is not None:
        return None
    return [w.name for h, w in zip(have, want) if w.nullable and not h.nullable]


def table_path(root: str, table: TableId) -> str:
    """``<root>/<database>/<table>``, the names as they are except ``/``, ``\\``, ``%``, ``~``, NUL and a leading
    ``.`` or ``_``, written as ``~`` and their UTF-8 bytes in hex: no name leaves ``root`` or names a hidden
    file, two names never share a path, no ``%`` appears (Delta readers take a path as a URL and would decode
    it), and no folder of a mirror starts with ``_``: those names are the format's (``_delta_log``) and ours
    (``<root>/_sync/...`` for the checkpoint and the state_dir, the lock file).

    >>> table_path("/lake", TableId("shop", "tÜ x")), table_path("/lake", TableId("..", "a/b%~"))
    ('/lake/shop/tÜ x', '/lake/~2e./a~2fb~25~7e')
    >>> table_path("/lake", TableId("_sync", "_delta_log"))
    '/lake/~5fsync/~5fdelta_log'
    """
    def part(name: str) -> str:
        return "".join("".join(f"~{b:02x}" for b in ch.encode()) if ch in "/\\%~\x00" or (i == 0 and ch in "._")
                       else ch for i, ch in enumerate(name))
    return os.path.join(root, part(table.database), part(table.table))


def legacy_table_path(root: str, table: TableId) -> str:
    """Where a mirror made before a leading ``_`` was escaped keeps its table (:func:`table_path` of then).

    >>> legacy_table_path("/lake", TableId("_sync", "ck"))
    '/lake/_sync/ck'
    """
    def part(name: str) -> str:
        return "".join("".join(f"~{b:02x}" for b in ch.encode()) if ch in "/\\%~\x00" or (i == 0 and ch == ".")
                       else ch for i, ch in enumerate(name))
    return os.path.join(root, part(table.database), part(table.table))


_SYNC_ID = re.compile(r"by pyspark-mysql-cdc, sync ([0-9a-f-]{36})$")


# names the batch rows carry beside the table's columns (the metadata columns), and the merge's own
_RESERVED = frozenset([m for m, _ in META_COLUMNS] + [DELETE_COLUMN, ORDER_COLUMN])


def check_tables(schemas: Iterable[TableSchema]) -> None:
    """Every table has a primary key (a mirror merges by key) and no column named like the rows' metadata."""
    schemas = list(schemas)
    keyless = [str(s.table) for s in schemas if not s.primary_key]
    if keyless:
        raise TableError(f"tables {keyless!r} have no primary key, and a mirror merges by key: give them one, "
                         "or leave them out of the sync (option exclude / --exclude)")
    for s in schemas:
        clash = sorted(_RESERVED.intersection(s.column_names))
        if clash:
            raise TableError(f"table {str(s.table)!r} has columns named like the sync's metadata columns {clash!r}; "
                             "rename them, or leave the table out of the sync (option exclude / --exclude)")


def _same_columns(have: pa.Schema, want: pa.Schema) -> str | None:
    """What differs between an existing table's columns and the wanted ones (``None``: nothing)."""
    h = [(f.name, str(f.type)) for f in have]
    w = [(f.name, str(f.type)) for f in want]
    if h == w:
        return None
    return f"it has columns {h!r}, the mirror of the source table needs {w!r}"


class DeltaMirror:
    """The Delta tables of one sync: created (or checked) before any data is read, then merged into."""

    def __init__(self, root: str, opts: CdcOptions, state_dir: str) -> None:
        self.given = root  # made absolute where it is used: a Spark Connect server's directory, not the client's
        self.opts = opts
        self.state_dir = state_dir
        self._schemas: dict[TableId, pa.Schema] = {}
        self._paths: dict[TableId, str] = {}

    @property
    def root(self) -> str:
        return os.path.abspath(local_path("to", self.given))

    def path(self, table: TableId) -> str:
        """The table's mirror: at :func:`table_path`, or where a mirror made before a leading ``_`` was escaped
        has it (:func:`legacy_table_path`)."""
        if table not in self._paths:
            p, old = table_path(self.root, table), legacy_table_path(self.root, table)
            if p != old and not os.path.isdir(p) and _deltalake().DeltaTable.is_deltatable(old):
                p = old
            self._paths[table] = p
        return self._paths[table]

    def check_root(self) -> None:
        """The target directory can be made or written: one clear error otherwise. Nothing is created."""
        local_path("to", self.given)
        writable("target", self.root)

    def prepare(self, schemas: Iterable[TableSchema]) -> list[TableId]:
        """Create the mirror table of each schema, or check the existing one: made by this capture (the sync id
        in its description, see :meth:`StateStore.record_sync_id`), with the schema's columns; the tables
        created. A table this capture made and that is gone is an error, not a new empty table (its rows were
        merged already). Every check runs before any table is created, so a bad target changes nothing."""
        dl = _deltalake()
        schemas = list(schemas)
        check_tables(schemas)
        self.check_root()
        store = StateStore(self.state_dir)
        sync_id = store.record_sync_id()
        todo = []
        for s in schemas:
            want = delta_schema(s, self.opts)
            p = self.path(s.table)
            made = store.mirror(s.table)
            if dl.DeltaTable.is_deltatable(p):
                existing = dl.DeltaTable(p)
                meta = existing.metadata()
                if meta.configuration.get("delta.columnMapping.mode", "none") != "none":
                    raise TableError(f"the Delta table {p!r} of {str(s.table)!r} uses column mapping (Spark's Delta "
                                     "renamed or dropped a column of it in place), which delta-rs does not write: "
                                     "sync it with Spark's Delta (pyspark 4.0 to 4.2 with Delta's jars), or start "
                                     "this mirror again (a new target, checkpoint and state_dir)")
                owner = _SYNC_ID.search(meta.description or "")
                diff = _same_columns(pa.schema(existing.schema().to_arrow()), want)
                if owner is None or owner.group(1) != sync_id:
                    by = f"by the sync {owner.group(1)!r}" if owner else "by something other than this job"
                    raise TableError(f"the Delta table {p!r} for {str(s.table)!r} was made {by}, not by the capture "
                                     f"of state_dir {self.state_dir!r} (sync {sync_id!r})"
                                     f"{'' if diff is None else ', and ' + diff}: a mirror merges only into tables "
                                     "it made; sync into another target, or use the checkpoint and state_dir that "
                                     "made this one")
                if diff is not None:  # the source table changed since (a schema change followed): follow it
                    self.evolve(s)
                else:  # made before its non-key columns were nullable: relaxed in place, else rewritten
                    relax = relaxed_columns(pa.schema(existing.schema().to_arrow()), want)
                    if relax and not self._relax(existing, s.table, relax):
                        self.evolve(s)
            elif made is not None:
                raise StateError(f"the Delta table of {str(s.table)!r} that this capture made at {made!r} is "
                                 f"missing at {p!r}, and rows were merged into it already: put it back (or give "
                                 "the target it was made in), or start this mirror again (a new target, checkpoint "
                                 "and state_dir)")
            elif os.path.lexists(p) and (not os.path.isdir(p) or os.listdir(p)):
                raise ConfigError(f"{p!r} exists and is not a Delta table; the mirror of {str(s.table)!r} goes "
                                  "there: move it away or sync into another target")
            else:
                todo.append((s, want, p))
            self._schemas[s.table] = want
        tighten_umask()
        for s, want, p in todo:
            make_dirs(p)
            dl.DeltaTable.create(p, schema=want, mode="ignore", name=s.table.table,
                                 description=f"mirror of {s.table} by pyspark-mysql-cdc, sync {sync_id}")
            store.record_mirror(s.table, p)
        return [s.table for s, _, _ in todo]

    def evolve(self, schema: TableSchema) -> bool:
        """Bring the table's mirror to ``schema``'s columns, if it has others: its rows moved to them by the
        capture's schema history (:func:`udtf.schema.evolve.evolve_rows`: columns kept, renamed, widened, dropped, or
        new and NULL), or, when it holds no row (a table reset, to be snapshotted again), just its columns
        replaced. The rewrite is one Delta commit of the whole table. True when it changed the table."""
        want = delta_schema(schema, self.opts)
        if self._schemas.get(schema.table) == want:
            return False
        check_tables([schema])
        dl = _deltalake()
        p = self.path(schema.table)
        table = dl.DeltaTable(p)
        have = pa.schema(table.schema().to_arrow())
        self._schemas[schema.table] = want
        relax = relaxed_columns(have, want) or []
        relaxed = self._relax(table, schema.table, relax)
        if relaxed:
            have = pa.schema([f.with_nullable(True) if f.name in relax else f for f in have])
        if _same_columns(have, want) is None and [f.nullable for f in have] == [f.nullable for f in want]:
            return relaxed
        dataset = table.to_pyarrow_dataset()
        count = dataset.count_rows()
        data: Any = want.empty_table()
        if count:
            history = StateStore(self.state_dir).history(schema.table)
            renamed = mirror_renames(history, have, lambda s: delta_schema(s, self.opts))
            if renamed is None:
                del self._schemas[schema.table]
                raise TableError(f"the Delta table {p!r} of {str(schema.table)!r} has columns "
                                 f"{[f'{f.name} {f.type}' for f in have]!r}, which no schema the capture recorded for "
                                 f"the table had (now {[f'{f.name} {f.type}' for f in want]!r}): start this mirror "
                                 "again (a new target, checkpoint and state_dir)")
            moved = renamed  # a batch of the table's files at a time: memory bounded by a batch, not the table
            data = pa.RecordBatchReader.from_batches(want, (
                out for b in dataset.to_batches()
                for out in evolve_rows(pa.Table.from_batches([b]), want, moved).to_batches()))
        dl.write_deltalake(p, data, mode="overwrite", schema_mode="overwrite",
                           writer_properties=writer_properties(schema),
                           commit_properties=dl.CommitProperties(custom_metadata={"mysql_cdc.evolve": "columns"}))
        _log.warning("mirror of %s: columns now %s (%d rows moved)", schema.table, want.names, count)
        return True

    def _relax(self, table: Any, name: TableId, columns: list[str] | None) -> bool:
        """Make ``columns`` of the table nullable in place, one metadata commit each (no file is rewritten; a
        commit done before a kill is seen done); false when there are none. A delta-rs without the operation
        (``alter.drop_column_not_null``, new in 2026's 1.x releases) rewrites the table instead (:meth:`evolve`)."""
        if not columns:
            return False
        alter = table.alter
        if not hasattr(alter, "drop_column_not_null"):
            return False
        commit = _deltalake().CommitProperties(custom_metadata={"mysql_cdc.evolve": "nullable"})
        for c in columns:
            alter.drop_column_not_null(c, commit_properties=commit)
        _log.warning("mirror of %s: columns %s made nullable (zero dates read as NULL)", name, columns)
        return True

    def reset(self, table: TableId, app_id: str, batch_id: int, key_range: KeyRange | None = None) -> bool:
        """Delete every row of the table's mirror (its table was dropped, truncated, renamed away or is
        snapshotted again: a ``T`` row), or those in ``key_range`` (a ``-R`` row: the range is read again), in
        a commit with the batch's transaction; false when done already (true where there is no table: nothing to
        delete, and not a batch the table had already, as the batch's line would say)."""
        dl = _deltalake()
        p = self.path(table)
        if not dl.DeltaTable.is_deltatable(p):
            return True
        t = dl.DeltaTable(p)
        done = t.transaction_version(app_id)
        if done is not None and int(done) >= batch_id:
            return False
        where = None if key_range is None else key_range.predicate(lambda c: "`" + c.replace("`", "``") + "`")
        t.delete(where, writer_properties=writer_properties(StateStore(self.state_dir).schema(table)),
                 commit_properties=dl.CommitProperties(app_transactions=[dl.Transaction(app_id, batch_id)],
                                                       custom_metadata={"mysql_cdc.batch": str(batch_id)}))
        return True

    def apply(self, schema: TableSchema, rows: pa.Table, app_id: str, batch_id: int, append: bool = False) -> bool:
        """Merge one batch's rows of one table (the table's columns, ``__op``, ``_change_seq``); false when the
        table's log already holds this batch (or a later one) of ``app_id``. ``append``: the rows are new keys,
        one row each (:func:`.last_image.appends`: a table's snapshot rows), written without a MERGE, so the
        table's files are neither scanned nor joined (a MERGE read them all: a table of large values held each
        earlier batch's values again in memory). Otherwise the batch's keys' rows are replaced by their last
        images in one overwrite by a predicate of the keys, where :func:`.replace_keys.keys_predicate` can name
        them (a one-column key of integers or strings, up to 1,000 keys), and merged where it cannot."""
        dl = _deltalake()
        want = delta_schema(schema, self.opts)
        if schema.table not in self._schemas:
            self.prepare([schema])
        self.evolve(schema)
        p = self.path(schema.table)
        table = dl.DeltaTable(p)
        done = table.transaction_version(app_id)
        if done is not None and int(done) >= batch_id:
            return False
        null_keys = [k for k in schema.primary_key if rows.column(k).null_count]
        if null_keys:
            raise TableError(f"table {str(schema.table)!r} has rows whose key column(s) {null_keys!r} read as NULL: a "
                             "date Python has not ('0000-00-00', a zero month or day, year 0, or '2024-02-30' under "
                             "ALLOW_INVALID_DATES) in a NOT NULL key column, which reads as NULL as every such date "
                             "does, and a mirror merges by key: give those rows a real date in the source, or leave "
                             "the table out of the sync (option exclude / --exclude)")
        commit = dl.CommitProperties(app_transactions=[dl.Transaction(app_id, batch_id)],
                                     custom_metadata={"mysql_cdc.batch": str(batch_id)})
        src = rows if append else final_images(rows, schema.primary_key)
        cols = [src.column(f.name).cast(f.type) if pa.types.is_duration(src.schema.field(f.name).type)
                else src.column(f.name) for f in want]
        if append:
            dl.write_deltalake(table, pa.Table.from_arrays(cols, schema=want), mode="append",
                               writer_properties=writer_properties(schema), commit_properties=commit)
            return self._written(table)

        def q(name: str) -> str:
            return "`" + name.replace("`", "``") + "`"
        # the batch's keys' rows replaced where a predicate names them (replace_keys: the same rows as a MERGE,
        # in one commit; a large value held a third as much)
        where = keys_predicate(pa.table({k: cols[want.get_field_index(k)] for k in schema.primary_key}),
                               schema.primary_key, q)
        if where is not None:
            data = pa.Table.from_arrays(cols, schema=want).filter(pc.invert(src.column(DELETE_COLUMN)))
            dl.write_deltalake(table, data, mode="overwrite", predicate=where,
                               writer_properties=writer_properties(schema), commit_properties=commit)
            return self._written(table)
        src = pa.Table.from_arrays([*cols, src.column(DELETE_COLUMN)],
                                   schema=pa.schema([*merge_fields(want, schema.primary_key),
                                                     pa.field(DELETE_COLUMN, pa.bool_(), False)]))
        on = " AND ".join(f"t.{q(k)} = s.{q(k)}" for k in schema.primary_key)
        sets = {q(f.name): f"s.{q(f.name)}" for f in want}
        flag = f"s.{q(DELETE_COLUMN)}"
        (table.merge(src, on, source_alias="s", target_alias="t", writer_properties=writer_properties(schema),
                     commit_properties=commit)
         .when_matched_delete(predicate=flag)
         .when_matched_update(updates=sets, predicate=f"NOT {flag}")
         .when_not_matched_insert(updates=sets, predicate=f"NOT {flag}")
         .execute())
        return self._written(table)

    @staticmethod
    def _written(table: Any) -> bool:
        """After a batch's commit: a checkpoint of the log every :data:`CHECKPOINT_EVERY` versions (a reader, and
        the next batch, replay a short log)."""
        table.update_incremental()
        if table.version() % CHECKPOINT_EVERY == 0:
            table.create_checkpoint()
        return True


def writer_properties(schema: TableSchema | None) -> Any:
    """delta-rs's Parquet settings for a table's files: no min/max statistics for its columns of large values
    (:func:`.lake_types.unindexed_columns`); ``None`` (delta-rs's defaults) where it has none. Settings given
    start from the Parquet library's, not delta-rs's: Snappy and statistics cut at 64 bytes are delta-rs's, set
    again here (without them the files were written uncompressed, and a long VARCHAR's statistics whole)."""
    if schema is None:
        return None
    names = unindexed_columns([(c.name, c.data_type, arrow_type(spark_type(c))) for c in schema.columns],
                              schema.primary_key)
    if not names:
        return None
    dl = _deltalake()
    off = dl.ColumnProperties(statistics_enabled="NONE")
    return dl.WriterProperties(compression="SNAPPY", statistics_truncate_length=64,
                               column_properties={n: off for n in names})


def mirror_renames(history: list[HistoryEntry], have: pa.Schema, columns_of: Callable[[TableSchema], pa.Schema]
                   ) -> dict[str, str] | None:
    """How a mirror with columns ``have`` reaches the table's latest schema: the columns renamed since, latest
    name to the name in ``have`` (``None``: no recorded schema had those columns). The start is the latest
    history entry with a schema whose mirror columns (``columns_of``) are ``have``; each later ``evolve``
    entry's renames compose with the earlier ones.

    >>> from mysql_cdc.ids import TableId
    >>> from mysql_cdc.schema import ColumnInfo
    >>> t = lambda *names: TableSchema(TableId("d", "t"), tuple(ColumnInfo(n, "int", "int", True) for n in names), (),
    ...                                ())
    >>> h = [HistoryEntry(("b.1", 4), "snapshot", t("a", "b")),
    ...      HistoryEntry(("b.1", 9), "evolve", t("a", "c"), {"c": "b"}),
    ...      HistoryEntry(("b.1", 12), "evolve", t("a", "d"), {"d": "c"})]
    >>> cols = lambda s: pa.schema([(n, pa.int32()) for n in s.column_names])
    >>> mirror_renames(h, cols(t("a", "b")), cols), mirror_renames(h, cols(t("a", "c")), cols)
    ({'d': 'b'}, {'d': 'c'})
    >>> mirror_renames(h, cols(t("x")), cols) is None
    True
    """
    start = None
    for i, e in enumerate(history):
        if e.schema is not None and e.action in (SNAPSHOT, EVOLVE):
            mine = columns_of(e.schema)
            if [(f.name, f.type) for f in mine] == [(f.name, f.type) for f in have]:
                start = i
    if start is None or any(e.action == RESET for e in history[start + 1:]):
        return None
    return renames_since(history, start)
