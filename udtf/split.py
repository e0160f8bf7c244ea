"""``mysql_cdc.split(df, state_dir)``: the rows of a read of many tables (the envelope, option ``tables``)
as one DataFrame per table, typed as a read of that one table types it (option ``table``).

Each table's DataFrame decodes ``__values`` with the table's schema as the capture recorded it in its
``state_dir`` (:mod:`mysql_cdc.rowjson`) and keeps the metadata columns, so its rows equal, value for value,
what a single-table read of the same rows gives (contract C4). Decoding runs in Spark (``mapInArrow``), one
pass per table over the input: in ``foreachBatch``, persist the micro-batch first.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pyarrow as pa

from mysql_cdc.chunks import TableId
from mysql_cdc.errors import ConfigError, StateError
from mysql_cdc.options import CdcOptions
from mysql_cdc.rowjson import decode_rows
from mysql_cdc.schema import TableSchema
from mysql_cdc.state.store import StateStore
from mysql_cdc.udtf.adapter import META_COLUMNS, VALUES_COLUMN, arrow_schema_of, capture_options, output_schema


def _decoder(values_schema: pa.Schema, out_schema: pa.Schema) -> Any:
    meta = [m for m, _ in META_COLUMNS]

    def decode(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for b in batches:
            typed = decode_rows(b.column(VALUES_COLUMN).to_pylist(), values_schema)
            cols = [*typed.columns, *(b.column(m) for m in meta)]
            yield pa.RecordBatch.from_arrays(cols, schema=out_schema)

    return decode


def table_frames(df: Any, state_dir: str, tables: list[str] | None = None) -> dict[str, Any]:
    """``{'db.table': DataFrame}`` for every table recorded in ``state_dir`` (or the ``tables`` named), each
    typed as a single-table read (see the module's text). Tables without rows in ``df`` give empty frames."""
    if VALUES_COLUMN not in df.columns or "__table" not in df.columns:
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
        rows = df.where((df["__database"] == table.database) & (df["__table"] == table.table))
        out[name] = rows.mapInArrow(_decoder(values, typed), output_schema(schema, opts))
    return out
