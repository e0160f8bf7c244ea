"""Split a table into chunks, following the seeds (Flink CDC's ChunkSplitter), with the server's ordering.

Evenly sized chunks for a single integral key whose distribution factor ``(max - min + 1) / rows`` lies within
the configured bounds; otherwise unevenly sized chunks whose boundaries are real keys found by the server
(``ORDER BY key LIMIT 1 OFFSET chunk_size``), so strings compare under the column's collation, binary and
temporal keys under the server's order, composite keys column by column.
"""

from __future__ import annotations

import re
from typing import Any

from mysql_cdc.chunks import Chunk, Key, chunks_from_bounds, even_bounds, quote_ident
from mysql_cdc.keyorder import KeyOrder
from mysql_cdc.schema import TableSchema
from mysql_cdc.sql import ident, key_compare, table_ident


def approx_rows(conn: Any, schema: TableSchema) -> int:
    """The optimizer's row estimate (cheap; the information_schema cache can be a day old on MySQL 8+)."""
    cur = conn.cursor()
    cur.execute(f"EXPLAIN SELECT * FROM {schema.table.quoted()}")
    names = [d[0].lower() for d in cur.description]
    row = cur.fetchone()
    cur.close()
    if row and "rows" in names:
        return int(row[names.index("rows")] or 0)
    m = re.search(r"rows=(\d+)", str(row[0]) if row else "")  # MySQL 9 explains as a tree by default
    return int(m.group(1)) if m else 0


def _next_start(conn: Any, schema: TableSchema, start: Key | None, chunk_size: int) -> Key | None:
    """The key ``chunk_size`` rows after ``start`` (inclusive), moved past ``start`` when keys repeat."""
    cols = schema.chunk_key
    qcols = ", ".join(ident(c) for c in cols)  # executed with parameters: % written %%
    table = table_ident(schema.table)
    cur = conn.cursor()
    try:
        if start is None:
            cur.execute(f"SELECT {qcols} FROM {table} ORDER BY {qcols} LIMIT 1 OFFSET %s",
                        (chunk_size,))
        else:
            where, params = key_compare(cols, start, ">=")
            cur.execute(f"SELECT {qcols} FROM {table} WHERE {where} ORDER BY {qcols} "
                        "LIMIT 1 OFFSET %s", (*params, chunk_size))
        row = cur.fetchone()
        if row is None:
            return None
        key = tuple(row)
        if start is not None and schema.chunk_key != schema.primary_key and KeyOrder(schema).equal(conn, key, start):
            where, params = key_compare(cols, start, ">")
            cur.execute(f"SELECT {qcols} FROM {table} WHERE {where} ORDER BY {qcols} LIMIT 1",
                        params)
            row = cur.fetchone()
            return None if row is None else tuple(row)
        return key
    finally:
        cur.close()


def split_table(conn: Any, schema: TableSchema, chunk_size: int, lower: float = 0.05, upper: float = 1000.0
                ) -> list[Chunk]:
    """All chunks of the table, in key order; one open chunk for an empty or one-row table."""
    cols = schema.chunk_key
    if len(cols) == 1 and schema.column(cols[0]).is_integral:
        q = quote_ident(cols[0])
        cur = conn.cursor()
        cur.execute(f"SELECT MIN({q}), MAX({q}) FROM {schema.table.quoted()}")
        lo, hi = cur.fetchone()
        cur.close()
        if lo is None or lo == hi:
            return chunks_from_bounds(schema.table, cols, [])
        bounds = even_bounds(int(lo), int(hi), approx_rows(conn, schema), chunk_size, lower, upper)
        if bounds is not None:
            return chunks_from_bounds(schema.table, cols, [(b,) for b in bounds])
    inner: list[Key] = []
    start: Key | None = None
    while True:
        nxt = _next_start(conn, schema, start, chunk_size)
        if nxt is None:
            break
        inner.append(nxt)
        start = nxt
    return chunks_from_bounds(schema.table, cols, inner)
