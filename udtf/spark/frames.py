"""``mysql_cdc.split(df, state_dir)``: the rows of a read of many tables (the envelope, option ``tables``)
as one DataFrame per table, typed as a read of that one table types it (option ``table``).

Each table's DataFrame decodes ``__values`` with the table's schema as the capture recorded it in its
``state_dir`` (:mod:`mysql_cdc.rowjson`) and keeps the metadata columns, so its rows equal, value for value,
what a single-table read of the same rows gives (docs/DESIGN.md, contract C4). Decoding runs in Spark
(``mapInArrow``), one pass per table over the input: in ``foreachBatch``, persist the micro-batch first.

With schema changes followed (option ``schema_changes``), each row is decoded with the schema its table had
where the row was written (the capture's schema history) and given the latest columns: renamed and widened
columns carry over, dropped ones go, new ones are NULL in older rows. ``T`` rows (a table reset) are not in the
frames: read them from the envelope.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from pyspark.sql.types import StructField, StructType

from mysql_cdc.errors import ConfigError, SchemaChangedError, StateError
from mysql_cdc.ids import TableId
from mysql_cdc.large_values import LargeValues, large_values
from mysql_cdc.offsets import binlog_file_key
from mysql_cdc.options import CdcOptions
from mysql_cdc.rowjson import decode_rows
from mysql_cdc.rows import (
    DATABASE_COLUMN,
    FILE_COLUMN,
    META_COLUMNS,
    OP_COLUMN,
    POS_COLUMN,
    RESETS,
    TABLE_COLUMN,
    VALUES_COLUMN,
)
from mysql_cdc.schema import TableSchema
from mysql_cdc.state.history import HistoryEntry, renames_since
from mysql_cdc.state.store import StateStore, capture_options
from mysql_cdc.udtf.convert import table_arrow_schema
from mysql_cdc.udtf.schema.evolve import evolve_rows
from mysql_cdc.udtf.spark.output import arrow_schema_of, output_schema


@dataclass(frozen=True)
class Version:
    """A schema a table's rows were written with, from binlog point ``at`` on: its values' Arrow schema and its
    columns renamed since (latest name to its name here)."""

    at: tuple[tuple[str, int], int]
    values: pa.Schema
    renamed: dict[str, str]


def versions_of(history: list[HistoryEntry], opts: CdcOptions) -> list[Version]:
    """The table's schema versions: its history entries with a schema (a snapshot, an ALTER followed)."""
    out = []
    for i, e in enumerate(history):
        if e.schema is not None:
            out.append(Version(e.key[:2], table_arrow_schema(e.schema.columns, opts.tinyint1_as_boolean),
                               renames_since(history, i)))
    return out


def _decoder(table: str, values_schema: pa.Schema, out_schema: pa.Schema, versions: list[Version],
             large: LargeValues | None = None) -> Any:
    """Each row decoded with the schema its table had at the row's binlog point (a snapshot row's: its chunk's
    high watermark), then moved to the latest columns (:func:`udtf.schema.evolve.evolve_rows`); ``T`` rows are left
    out. Without a schema history (schema_changes stop): every row with the recorded schema."""
    meta = [m for m, _ in META_COLUMNS]

    def version(file: str, pos: int) -> Version | None:
        at = (binlog_file_key(file), pos)
        found = None
        for v in versions:
            if v.at <= at:
                found = v
        return found

    def decode(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for b in batches:
            if not versions:
                typed = decode_rows(b.column(VALUES_COLUMN), values_schema, large)
                yield pa.RecordBatch.from_arrays([*typed.columns, *(b.column(m) for m in meta)], schema=out_schema)
                continue
            ops, files, poss = (b.column(c).to_pylist() for c in (OP_COLUMN, FILE_COLUMN, POS_COLUMN))
            keep = [i for i in range(b.num_rows) if ops[i] not in RESETS]
            groups: dict[int, list[int]] = {}
            found = [version(files[i], poss[i]) for i in keep]
            for i, v in zip(keep, found):
                groups.setdefault(id(v), []).append(i)
            by_id = {id(v): v for v in found}
            texts = b.column(VALUES_COLUMN).to_pylist()
            parts, order = [], []
            for key, idx in groups.items():
                v = by_id[key]
                schema = v.values if v is not None else values_schema
                typed = pa.Table.from_batches([decode_rows([texts[i] for i in idx], schema, large)])
                try:
                    parts.append(evolve_rows(typed, values_schema, v.renamed if v is not None else {}))
                except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
                    raise SchemaChangedError(
                        f"rows of {table!r} written with columns {schema.names!r} cannot take its latest types "
                        f"({e}): the table was snapshotted again since with other types; split the rows after "
                        "its last T row (__op 'T') apart from those before") from e
                order += idx
            rows = pa.concat_tables(parts) if parts else values_schema.empty_table()
            if parts:
                rows = rows.take(pa.array(sorted(range(len(order)), key=order.__getitem__)))
            picked = b.take(pa.array(sorted(order), pa.int64()))
            cols = [*rows.columns, *(picked.column(m) for m in meta)]
            yield pa.RecordBatch.from_arrays([c.combine_chunks() if isinstance(c, pa.ChunkedArray) else c
                                              for c in cols], schema=out_schema)

    return decode


def table_frames(df: Any, state_dir: str, tables: list[str] | None = None,
                 large_value_dir: str | None = None) -> dict[str, Any]:
    """``{'db.table': DataFrame}`` for every table recorded in ``state_dir`` (or the ``tables`` named), each
    typed as a single-table read (see the module's text). Tables without rows in ``df`` give empty frames. Values
    the read wrote into files (its option ``large_value_dir``) are read from ``large_value_dir`` by the
    executors."""
    large = large_values(large_value_dir, 1)
    if VALUES_COLUMN not in df.columns or TABLE_COLUMN not in df.columns:
        raise ConfigError(f"split takes the output of a read with option tables (columns {VALUES_COLUMN!r}, "
                          f"'__database', '__table', ...); this DataFrame has {df.columns[:6]!r}")
    store = StateStore(state_dir)
    opts: CdcOptions = capture_options(store)
    recorded = {str(t): t for t in store.recorded_schemas()}
    wanted = list(recorded) if tables is None else list(tables)
    out: dict[str, Any] = {}
    for name in wanted:
        if name not in recorded:
            raise StateError(f"no schema of table {name!r} is recorded under {state_dir!r} (recorded: "
                             f"{sorted(recorded)!r}); split needs the state_dir of the read that produced the rows")
        table: TableId = recorded[name]
        schema: TableSchema | None = store.schema(table)
        assert schema is not None
        typed = arrow_schema_of(schema, opts)
        values = pa.schema(list(typed)[:len(schema.columns)])
        versions = versions_of(store.history(table), opts)
        rows = df.where((df[DATABASE_COLUMN] == table.database) & (df[TABLE_COLUMN] == table.table))
        spark_schema = output_schema(schema, opts)
        if opts.before_images == "key":  # a -U row holds its key alone: the other columns may be NULL in it
            keys = set(schema.primary_key)
            spark_schema = StructType([f if i >= len(schema.columns) or f.name in keys
                                       else StructField(f.name, f.dataType, True, f.metadata)
                                       for i, f in enumerate(spark_schema.fields)])
        out[name] = rows.mapInArrow(_decoder(name, values, typed, versions, large), spark_schema)
    return out
