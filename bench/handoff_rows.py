"""The rows of :mod:`bench.handoff`, made in the Python worker: read once per worker process and kept."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pyarrow as pa

from mysql_cdc.rows import META_COLUMNS
from mysql_cdc.rows import META_NULLABLE as _META_NULLABLE
from mysql_cdc.types import arrow_type

_TABLES: dict[str, pa.Table] = {}
# what a chunk of the snapshot carries in its metadata columns
_VALUES = ("r", "tpch", "orders", "tpch.orders#3", '{"file":"binlog.000001","kind":"snapshot","pos":123456789}',
           "binlog.000001", 123456789, 0, None, None)


def schema_with(base: pa.Schema, meta: str) -> pa.Schema:
    fields = list(base)
    if meta != "none":
        fields += [pa.field(m, arrow_type(t), m in _META_NULLABLE or meta == "nulls") for m, t in META_COLUMNS]
    return pa.schema(fields)


def batches(path: str, index: int, count: int, meta: str) -> Iterator[pa.RecordBatch]:
    import pyarrow.parquet as pq

    if path not in _TABLES:
        _TABLES[path] = pq.read_table(path)
    table = _TABLES[path]
    per = -(-table.num_rows // count)
    part = table.slice(index * per, per)
    schema = schema_with(table.schema, meta)
    for b in part.to_batches(max_chunksize=65536):
        cols: list[Any] = list(b.columns)
        if meta == "values":
            cols += [pa.repeat(pa.scalar(v, arrow_type(t)), b.num_rows) for v, (_, t) in zip(_VALUES, META_COLUMNS)]
        elif meta == "nulls":
            cols += [pa.nulls(b.num_rows, arrow_type(t)) for _, t in META_COLUMNS]
        yield pa.RecordBatch.from_arrays(cols, schema=schema)
