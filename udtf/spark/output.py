"""What the Spark surfaces output: the schema of their rows (a table's own columns, typed, or the envelope of
a read of many tables) with the metadata columns of :mod:`mysql_cdc.rows`, and the Arrow hand-off of chunk
rows and change rows to Spark. Each surface has its own thin file over this, :mod:`.chunk_reads` and
:mod:`.capture`: :mod:`.sql_functions` (the SQL table functions), :mod:`.batch_source` (``spark.read``) and
:mod:`.stream_reader` (``spark.readStream``)."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.types import (
    StringType,
    StructField,
    StructType,
)

from mysql_cdc.chunks import CHUNK_COLUMNS
from mysql_cdc.errors import ConfigError, TableError
from mysql_cdc.ids import TableId
from mysql_cdc.keyrange import KeyRange
from mysql_cdc.large_values import large_values
from mysql_cdc.offsets import SNAPSHOT_SEQUENCE, change_sequence
from mysql_cdc.options import OPTIONS, CdcOptions
from mysql_cdc.rowjson import encode_column
from mysql_cdc.rows import CHANGE_TYPES, META_COLUMNS, META_NULLABLE, RANGE_RESET_OP, RESET_OP, VALUES_COLUMN
from mysql_cdc.schema import TableSchema
from mysql_cdc.types import arrow_type, spark_data_type, spark_type
from mysql_cdc.udtf.binlog.phase import ALTERNATING, Change, ChangeRun, run_changes
from mysql_cdc.udtf.convert import table_arrow_schema
from mysql_cdc.udtf.snapshot.reader import ChunkRead
from mysql_cdc.udtf.spark.change_columns import (
    grouped,
    key_before_images,
    meta_arrays,
    run_columns,
    table_places,
)

CHUNK_TABLE_DDL = ", ".join(f"{name} {kind}" for name, kind in CHUNK_COLUMNS)
# Options a SQL call may pass: connections come from a profile (a password never comes through SQL text).
SQL_OPTION_KEYS = tuple(o.key for o in OPTIONS
                        if o.key not in ("host", "port", "user", "password", "ssl_mode", "ssl_ca", "partitions"))


def meta_columns(opts: CdcOptions) -> tuple[tuple[str, str], ...]:
    """The metadata columns an output carries: all of them, or none for a snapshot read with
    ``metadata_columns`` false (Spark copies their strings into every row: measured, they double its cost on
    a narrow table; see bench/handoff.py)."""
    return META_COLUMNS if opts.metadata_columns else ()


def changes_need_metadata(opts: CdcOptions, surface: str) -> None:
    """Change rows are useless without their op and position: ``metadata_columns`` false is refused."""
    if not opts.metadata_columns:
        raise ConfigError(f"metadata_columns false is for snapshot reads; {surface} returns change rows, which need "
                          "__op and their binlog position: drop the option")


def output_schema(schema: TableSchema, opts: CdcOptions) -> StructType:
    """The snapshot output: the table's columns typed for Spark, then the metadata columns."""
    names = {c.name for c in schema.columns}
    clash = [m for m, _ in meta_columns(opts) if m in names]
    if clash:
        raise TableError(f"table {str(schema.table)!r} has columns named like the metadata columns {clash!r}; "
                         "rename them or read through a view")
    fields = [StructField(c.name, spark_data_type(spark_type(c, opts.tinyint1_as_boolean)), c.nullable)
              for c in schema.columns]
    fields += [StructField(m, spark_data_type(t), m in META_NULLABLE) for m, t in meta_columns(opts)]
    return StructType(fields)


def position_text(read: ChunkRead) -> str:
    return json.dumps(read.high.to_dict(), sort_keys=True, separators=(",", ":"))


def meta_values(read: ChunkRead) -> tuple[Any, ...]:
    """The metadata columns' values for every row of a chunk (see :data:`META_COLUMNS`)."""
    c = read.chunk
    return ("r", c.table.database, c.table.table, c.id, position_text(read), read.high.file, read.high.pos, 0,
            None, "insert", SNAPSHOT_SEQUENCE, None)


def change_meta_columns(changes: Sequence[Change]) -> list[list[Any]]:
    """The metadata columns' values of change rows, column by column (:data:`META_COLUMNS`): made per column,
    the strings and times a transaction's rows share once (a change row's hot path).

    >>> from mysql_cdc.udtf.binlog.phase import Change
    >>> ch = Change(TableId("d", "t"), "+U", (1,), "binlog.000002", 900, 3, "0-1-7", 1700000000, 8589935492)
    >>> [col[0] for col in change_meta_columns([ch])][:9]
    ['+U', 'd', 't', None, '{"file":"binlog.000002","pos":900,"gtid":"0-1-7"}', 'binlog.000002', 900, 3, '0-1-7']
    >>> [col[0] for col in change_meta_columns([ch])][9:]
    ['update_postimage', 8589935492, datetime.datetime(2023, 11, 14, 22, 13, 20, tzinfo=datetime.timezone.utc)]
    """
    files = {f: json.dumps(f) for f in {c.file for c in changes}}
    gtids = {g: json.dumps(g) for g in {c.gtid for c in changes} if g}
    times = {t: dt.datetime.fromtimestamp(t, dt.timezone.utc) for t in {c.timestamp for c in changes}}
    return [[c.op for c in changes], [c.table.database for c in changes], [c.table.table for c in changes],
            [None] * len(changes),
            [f'{{"file":{files[c.file]},"pos":{c.pos},"gtid":{gtids[c.gtid]}}}' if c.gtid else
             f'{{"file":{files[c.file]},"pos":{c.pos}}}' for c in changes],
            [c.file for c in changes], [c.pos for c in changes], [c.row for c in changes],
            [c.gtid for c in changes], [CHANGE_TYPES[c.op] for c in changes], [c.seq for c in changes],
            [times[c.timestamp] for c in changes]]


def change_meta(ch: Change) -> tuple[Any, ...]:
    """The metadata columns' values of a change row."""
    return tuple(col[0] for col in change_meta_columns([ch]))


def change_rows(runs: Iterator[ChangeRun]) -> Iterator[tuple[Any, ...]]:
    """Change rows of one table as Python tuples (values, then :data:`META_COLUMNS`): what a Python UDTF
    yields. The metadata are made once per run; an image's op, row and sequence from the run's."""
    for run in runs:
        if not run.values:
            continue
        first = next(run_changes(run))
        op, db, table, chunk, where, file, pos, row, gtid, _, seq, at = change_meta(first)
        if run.op == ALTERNATING:
            for k, vals in enumerate(run.values):
                o = "+U" if k % 2 else "-U"
                yield (*vals, o, db, table, chunk, where, file, pos, row + k, gtid, CHANGE_TYPES[o], seq + k, at)
        else:
            kind = CHANGE_TYPES[op]
            for k, vals in enumerate(run.values):
                yield (*vals, op, db, table, chunk, where, file, pos, row + k, gtid, kind, seq + k, at)


def with_metadata(read: ChunkRead, batch: pa.RecordBatch, out_schema: pa.Schema) -> pa.RecordBatch:
    """The chunk's rows plus the metadata columns (constant per chunk), if ``out_schema`` has them."""
    if len(out_schema) == batch.num_columns:
        return pa.RecordBatch.from_arrays(batch.columns, schema=out_schema)
    n = batch.num_rows
    meta = [pa.repeat(pa.scalar(v, arrow_type(t)), n) for v, (_, t) in zip(meta_values(read), META_COLUMNS)]
    return pa.RecordBatch.from_arrays([*batch.columns, *meta], schema=out_schema)


def arrow_schema_of(schema: TableSchema, opts: CdcOptions) -> pa.Schema:
    fields = list(table_arrow_schema(schema.columns, opts.tinyint1_as_boolean))
    fields += [pa.field(m, arrow_type(t), m in META_NULLABLE) for m, t in meta_columns(opts)]
    return pa.schema(fields)


def _typed(rows: list[tuple[Any, ...]], schema: pa.Schema) -> pa.RecordBatch:
    """Rows of canonical values as a record batch of ``schema`` (the one conversion every change row takes)."""
    return _arrays([list(c) for c in zip(*rows)] if rows else [[] for _ in schema], schema)


def _arrays(columns: list[Any], schema: pa.Schema) -> pa.RecordBatch:
    """A record batch of ``schema`` from one list (or Arrow array) per column."""
    return pa.RecordBatch.from_arrays([col if isinstance(col, pa.Array) else pa.array(col, type=schema.field(i).type)
                                       for i, col in enumerate(columns)], schema=schema)


def changes_to_batches(runs: Iterator[ChangeRun], out_schema: pa.Schema, size: int) -> Iterator[pa.RecordBatch]:
    """Change rows of one table, as runs (:mod:`.change_columns`), as record batches of the output schema, about
    ``size`` rows at a time (a run is never cut)."""
    width = len(out_schema) - len(META_COLUMNS)
    values = pa.schema(list(out_schema)[:width])
    for group in grouped(runs, size):
        yield pa.RecordBatch.from_arrays([*run_columns(group, values), *meta_arrays(group)],
                                         schema=out_schema)


# ---- many tables in one output: the envelope ----


def envelope_schema() -> StructType:
    """The output of a read of many tables (option ``tables``): each row's values as one JSON object in
    ``__values`` (:mod:`mysql_cdc.rowjson`), then the metadata columns, which say the row's table. A stream has
    one schema while its tables have many; :func:`mysql_cdc.split` types each table's rows again."""
    return StructType([StructField(VALUES_COLUMN, StringType(), False)] +
                      [StructField(m, spark_data_type(t), m in META_NULLABLE) for m, t in META_COLUMNS])


ENVELOPE_ARROW = pa.schema([pa.field(VALUES_COLUMN, pa.string(), False)] +
                           [pa.field(m, arrow_type(t), m in META_NULLABLE) for m, t in META_COLUMNS])


class Output:
    """How rows leave for Spark: one table's own columns, typed (option ``table``), or many tables' rows in
    the envelope (option ``tables``, :func:`envelope_schema`). Both start from the same typed Arrow values."""

    def __init__(self, schemas: Mapping[TableId, TableSchema], opts: CdcOptions) -> None:
        self.schemas = dict(schemas)
        self.opts = opts
        self.envelope = opts.tables is not None
        if self.envelope and not opts.metadata_columns:
            raise ConfigError("metadata_columns false is for reads of one table (option table): a read of tables "
                              "says each row's table in __database and __table; drop the option")
        self._arrow = {t: arrow_schema_of(s, opts) for t, s in self.schemas.items()}
        self._values = {t: table_arrow_schema(s.columns, opts.tinyint1_as_boolean) for t, s in self.schemas.items()}
        self._large = large_values(opts.large_value_dir, opts.large_value_bytes)  # where large values go
        # option before_images key: where each table's primary key is among its columns (a table without one
        # keeps its before images whole: there is no key to cut them to)
        self._key_places = {t: [i for i, c in enumerate(s.columns) if c.name in s.primary_key]
                            for t, s in self.schemas.items()
                            if opts.before_images == "key" and s.primary_key} if self.envelope else {}

    def spark_schema(self) -> StructType:
        if self.envelope:
            return envelope_schema()
        (schema,) = self.schemas.values()
        return output_schema(schema, self.opts)

    def chunk_batch(self, read: ChunkRead, batch: pa.RecordBatch) -> pa.RecordBatch:
        """A batch of a chunk's rows, as the output has them."""
        if not self.envelope:
            return with_metadata(read, batch, self._arrow[read.chunk.table])
        texts = encode_column(batch, self._large)
        n = batch.num_rows
        meta = [pa.repeat(pa.scalar(v, arrow_type(t)), n) for v, (_, t) in zip(meta_values(read), META_COLUMNS)]
        return pa.RecordBatch.from_arrays([texts, *meta], schema=ENVELOPE_ARROW)

    def change_batches(self, runs: Iterator[ChangeRun], size: int) -> Iterator[pa.RecordBatch]:
        """Change rows (as runs: :meth:`BinlogPhase.runs`), about ``size`` at a time, as the output has them (in
        binlog order, across tables)."""
        if not self.envelope:
            (table,) = self.schemas
            yield from changes_to_batches(runs, self._arrow[table], size)
            return
        for group in grouped(runs, size):
            yield self._envelope(group)

    def _envelope(self, runs: list[ChangeRun]) -> pa.RecordBatch:
        """Runs of any tables in the envelope: each table's images typed as a single-table read types them and
        written as JSON on whole columns, then put back in the runs' order."""
        if self._key_places:
            runs = [key_before_images(r, self._key_places[r.table]) if r.table in self._key_places else r
                    for r in runs]
        places = table_places(runs)
        if len(places) == 1:
            ((t, _),) = places.items()
            texts = self._texts(t, runs)
        else:
            parts = [self._texts(t, [r for r in runs if r.table == t]) for t in places]
            where = np.concatenate(list(places.values()))
            texts = pc.take(pa.concat_arrays(parts), pa.array(np.argsort(where, kind="stable")))
        return pa.RecordBatch.from_arrays([texts, *meta_arrays(runs)], schema=ENVELOPE_ARROW)

    def _texts(self, table: TableId, runs: list[ChangeRun]) -> pa.Array:
        schema = self._values[table]
        return encode_column(pa.RecordBatch.from_arrays(run_columns(runs, schema), schema=schema), self._large)


def reset_batch(tables: list[TableId], at: Mapping[str, Any],
                ranges: Mapping[TableId, KeyRange] | None = None) -> pa.RecordBatch:
    """The ``T`` rows (:data:`RESET_OP`) of tables that left a capture of many tables at binlog point ``at``; a
    ``-R`` row (:data:`RANGE_RESET_OP`) for a table of which only a key range left (``ranges``), the range in
    its ``__position``."""
    file, pos = str(at["file"]), int(at["pos"])
    rows = []
    for i, t in enumerate(tables):
        r = (ranges or {}).get(t)
        op = RESET_OP if r is None else RANGE_RESET_OP
        where = json.dumps({"file": file, "pos": pos, **({"range": r.to_dict()} if r is not None else {})},
                           separators=(",", ":"))
        rows.append(("{}", op, t.database, t.table, None, where, file, pos, i, None, CHANGE_TYPES[op],
                     change_sequence(file, pos, i), None))
    return _typed(rows, ENVELOPE_ARROW)



