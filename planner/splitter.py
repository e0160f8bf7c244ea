"""Split a table into chunks, as Flink CDC's ChunkSplitter does, with the server's ordering.

Evenly sized chunks for a single integral key whose distribution factor ``(max - min + 1) / rows`` lies within
the configured bounds; otherwise unevenly sized chunks whose boundaries are real keys found by the server
(``ORDER BY key LIMIT 1 OFFSET chunk_size``), so strings compare under the column's collation, binary and
temporal keys under the server's order, composite keys column by column.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from typing import Any

from mysql_cdc.chunks import Chunk, Key, chunks_from_bounds, even_bounds, is_after
from mysql_cdc.errors import ChunkKeyError
from mysql_cdc.ids import ident, table_ident
from mysql_cdc.keyorder import KeyOrder
from mysql_cdc.schema import TableSchema
from mysql_cdc.sql import chunk_where, key_compare


def approx_rows(conn: Any, schema: TableSchema) -> int:
    """The optimizer's row estimate (cheap; the information_schema cache can be a day old on MySQL 8+)."""
    cur = conn.cursor()
    try:
        cur.execute(f"EXPLAIN SELECT * FROM {schema.table.quoted()}")
        return explained_rows(cur)
    finally:
        cur.close()


_TREE_ROWS = re.compile(r"rows=(\d+(?:\.\d*)?(?:e[+-]?\d+)?)")


def explained_rows(cur: Any) -> int:
    """The row estimate of an EXPLAIN just executed on ``cur``: the ``rows`` column of the table format, or the
    first ``rows=`` of MySQL 9's default tree format, which writes a million and more in scientific notation.

    >>> class Tree:
    ...     description = [("EXPLAIN",)]
    ...     def fetchone(self):
    ...         return ("-> Table scan on orders  (cost=154429 rows=1.48e+6)",)
    >>> explained_rows(Tree())
    1480000
    """
    names = [d[0].lower() for d in cur.description]
    row = cur.fetchone()
    if row and "rows" in names:
        return int(row[names.index("rows")] or 0)
    m = _TREE_ROWS.search(str(row[0]) if row else "")
    return int(float(m.group(1))) if m else 0


# chunk_size 0 (the default) sizes chunks by bytes: a chunk's fixed cost (connections, watermark queries, the
# SELECT's round trip; 5-7 ms measured on both servers) stays near 5% of its read time at about 100 MB/s per
# reader (see README, Benchmark). The bounds keep tiny rows from making huge chunks and huge rows tiny ones.
CHUNK_TARGET_BYTES = 16 * 2**20
MIN_AUTO_CHUNK_ROWS = 1024
CHUNK_MAX_BYTES = 256 * 2**20  # no auto-sized chunk holds more (the floor of rows gives way for large rows)
MAX_AUTO_CHUNK_ROWS = 1_000_000
FALLBACK_CHUNK_ROWS = 8096  # no statistics (an empty or never analyzed table): Flink CDC's default


def chunk_rows(chunk_size: int, avg_row_bytes: int) -> int:
    """Rows per chunk: ``chunk_size`` when set (> 0), else :data:`CHUNK_TARGET_BYTES` of rows of the table's
    average length (the server's statistics), within [1,024, 1,000,000] and :data:`CHUNK_MAX_BYTES`;
    :data:`FALLBACK_CHUNK_ROWS` when the server has no average.

    >>> chunk_rows(5000, 137)  # set by the user
    5000
    >>> chunk_rows(0, 137)  # TPC-H orders: 16 MiB / 137 bytes
    122461
    >>> chunk_rows(0, 40_000), chunk_rows(0, 3), chunk_rows(0, 0)
    (1024, 1000000, 8096)
    >>> chunk_rows(0, 1 << 20), chunk_rows(0, 256 << 20)  # the floor stops where a chunk would pass 256 MiB
    (256, 1)
    """
    if chunk_size > 0:
        return chunk_size
    if avg_row_bytes <= 0:
        return FALLBACK_CHUNK_ROWS
    rows = max(MIN_AUTO_CHUNK_ROWS, min(MAX_AUTO_CHUNK_ROWS, CHUNK_TARGET_BYTES // avg_row_bytes))
    return max(1, min(rows, CHUNK_MAX_BYTES // avg_row_bytes))


# a chunk cut smaller to spread a table over the session's task slots holds at least this much: a table under
# 1 MiB a slot is read by fewer tasks, as a task's fixed cost (a connection, two watermarks) would outweigh it
SPREAD_MIN_BYTES = 1 << 20


def spread_rows(size: int, rows: int, avg_row_bytes: int, slots: int) -> int:
    """Rows per chunk so that a table of ``rows`` rows (the server's estimate) makes at least one chunk per task
    slot of the session: ``size`` cut to ``ceil(rows / slots)``, but not below :data:`SPREAD_MIN_BYTES` of rows.

    >>> spread_rows(479_349, 200_000, 35, 2)   # 7 MB of rows, two slots: two chunks, not one
    100000
    >>> spread_rows(479_349, 200_000, 35, 16)  # sixteen slots: chunks of 1 MiB (7 chunks)
    29959
    >>> spread_rows(479_349, 20_000, 35, 2), spread_rows(8096, 0, 0, 8)  # small, or no statistics: as it was
    (29959, 8096)
    """
    if slots <= 1 or rows <= 0 or avg_row_bytes <= 0:
        return size
    floor = max(1, SPREAD_MIN_BYTES // avg_row_bytes)
    return max(1, min(size, max(-(-rows // slots), floor)))


def bounded_chunk_rows(opts: Any, avg_row_bytes: int, rows: int = 0, slots: int = 1) -> int:
    """Rows per chunk (:func:`chunk_rows`), spread over ``slots`` task slots (:func:`spread_rows`, for a table of
    about ``rows`` rows), and for a stream's batches of whole chunks no more than a batch may hold:
    ``max_rows_per_batch`` rows, ``max_bytes_per_batch`` bytes of rows of the table's average length (a table of
    256 MB values: one row per chunk). ``chunk_size`` set by the user is kept.

    >>> from mysql_cdc.options import parse_options as opts
    >>> bounded_chunk_rows(opts({}), 35), bounded_chunk_rows(opts({"max_rows_per_batch": "200000"}), 35)
    (479349, 200000)
    >>> bounded_chunk_rows(opts({"max_bytes_per_batch": str(64 << 20)}), 256 << 20)
    1
    >>> bounded_chunk_rows(opts({}), 35, rows=200_000, slots=4), bounded_chunk_rows(opts({"chunk_size": "9"}), 35)
    (50000, 9)
    """
    if opts.chunk_size > 0:
        return int(opts.chunk_size)
    size = spread_rows(chunk_rows(0, avg_row_bytes), rows, avg_row_bytes, slots)
    if opts.max_rows_per_batch > 0:
        size = min(size, opts.max_rows_per_batch)
    if opts.max_bytes_per_batch > 0 and avg_row_bytes > 0:
        size = min(size, max(1, opts.max_bytes_per_batch // avg_row_bytes))
    return max(1, size)


def table_stats(conn: Any, schema: TableSchema, flavor: str) -> tuple[int, int]:
    """The server's average row length of the table and its estimated rows (0 when it has none). MySQL 8+
    caches these statistics for a day by default; the session asks for fresh ones."""
    cur = conn.cursor()
    try:
        if flavor == "mysql":
            cur.execute("SET SESSION information_schema_stats_expiry = 0")
        cur.execute("SELECT AVG_ROW_LENGTH, TABLE_ROWS FROM information_schema.TABLES WHERE TABLE_SCHEMA = %s AND "
                    "TABLE_NAME = %s", (schema.table.database, schema.table.table))
        row = cur.fetchone()
    finally:
        cur.close()
    return (int(row[0] or 0), int(row[1] or 0)) if row else (0, 0)


def exact_key_columns(schema: TableSchema) -> str:
    """The chunk key's columns as a SELECT list that reads each value exactly: a FLOAT comes through the text
    protocol rounded to 6 digits (``5.3`` for a stored ``5.300000190734863``), a bound no key equals, and a
    planner that asked for keys after it would get the same key back forever; read as a DOUBLE (``+ 0e0``) it
    is the stored value.

    >>> from mysql_cdc.ids import TableId
    >>> from mysql_cdc.schema import ColumnInfo
    >>> cols = (ColumnInfo("f", "float", "float", False), ColumnInfo("id", "int", "int", False))
    >>> exact_key_columns(TableSchema(TableId("d", "t"), cols, ("f", "id"), ("f", "id")))
    '(`f` + 0e0), `id`'
    """
    return ", ".join(f"({ident(c)} + 0e0)" if schema.column(c).data_type == "float" else ident(c)
                     for c in schema.chunk_key)


def _next_start(conn: Any, schema: TableSchema, start: Key | None, chunk_size: int, end: Key | None,
                order: Callable[[], KeyOrder]) -> Key | None:
    """The key ``chunk_size`` rows after ``start`` (inclusive) and below ``end`` (the index read no further than
    that: a short span of a key range is one query of its own rows), moved past ``start`` when keys repeat
    (``order``: the chunk key's :class:`KeyOrder`, made once per table: it asks the server how a collation
    weighs text the first time it compares)."""
    cols = schema.chunk_key
    qcols = ", ".join(ident(c) for c in cols)  # executed with parameters: % written %%
    values = exact_key_columns(schema)
    table = table_ident(schema.table)
    # keys with a NULL are the NULL chunk's, never a range boundary
    nn = "".join(f"{ident(c)} IS NOT NULL AND " for c in cols if schema.column(c).nullable)
    below, below_params = key_compare(cols, end, "<") if end is not None else ("TRUE", [])
    cur = conn.cursor()
    try:
        if start is None:
            cur.execute(f"SELECT {values} FROM {table} WHERE {nn}{below} ORDER BY {qcols} LIMIT 1 OFFSET %s",
                        (*below_params, chunk_size))
        else:
            where, params = key_compare(cols, start, ">=")
            cur.execute(f"SELECT {values} FROM {table} WHERE {nn}{where} AND {below} ORDER BY {qcols} "
                        "LIMIT 1 OFFSET %s", (*params, *below_params, chunk_size))
        row = cur.fetchone()
        if row is None:
            return None
        key = tuple(row)
        if start is not None and schema.chunk_key != schema.primary_key and order().equal(conn, key, start):
            where, params = key_compare(cols, start, ">")
            cur.execute(f"SELECT {values} FROM {table} WHERE {nn}{where} ORDER BY {qcols} LIMIT 1",
                        params)
            row = cur.fetchone()
            return None if row is None else tuple(row)
        return key
    finally:
        cur.close()


def split_table(conn: Any, schema: TableSchema, chunk_size: int, lower: float = 0.05, upper: float = 1000.0
                ) -> list[Chunk]:
    """All chunks of the table, in key order; one open chunk for an empty or one-row table, or a table without
    a key; for a nullable key, then the chunk of keys with a NULL. An integer key spread evenly enough is cut
    into even ranges by the optimizer's row estimate (one chunk where it says the table fits in one and
    :func:`_holds_more_than` agrees); any other is cut at keys the server finds."""
    cols = schema.chunk_key
    nullable = schema.nullable_key
    if not cols:
        return chunks_from_bounds(schema.table, cols, [])
    if len(cols) == 1 and schema.column(cols[0]).is_integral:
        lo, hi = _key_extremes(conn, schema, None, None)
        if lo is None or lo == hi:
            return chunks_from_bounds(schema.table, cols, [], nullable)
        bounds = even_bounds(int(lo), int(hi), approx_rows(conn, schema), chunk_size, lower, upper)
        if bounds == [] and not _holds_more_than(conn, schema, chunk_size):  # one chunk, and the count agrees
            return chunks_from_bounds(schema.table, cols, [], nullable)
        if bounds:
            return chunks_from_bounds(schema.table, cols, _resplit_crowded(conn, schema, bounds, chunk_size),
                                      nullable)
    # keys spread too unevenly for even ranges, keys of another type, or an estimate of one chunk the count belies
    return chunks_from_bounds(schema.table, cols, _query_bounds(conn, schema, chunk_size, None, None), nullable)


def split_range(conn: Any, schema: TableSchema, spans: list[tuple[Key | None, Key | None]], chunk_size: int
                ) -> tuple[list[Chunk], tuple[int, ...]]:
    """Chunks of a whole table whose rows in ``spans`` (half-open ``[start, end)``, in key order, apart: a key
    range asked for on demand, :meth:`~mysql_cdc.keyrange.KeyRange.spans`) are read again: each span split by
    boundaries the server finds, ``chunk_size`` rows apart, with a chunk below the first, one between each two
    and one from the last's end on, which are not read (their indexes are returned: the rows there stay as the
    mirror holds them, recorded at the point the range left the capture). A span ``[k, k AFTER)`` (one key of a
    list, :func:`mysql_cdc.planner.plan.point_spans`) is one chunk."""
    if not spans:  # every key asked for names no row: one chunk, not read
        return chunks_from_bounds(schema.table, schema.chunk_key, []), (0,)
    bounds: list[Key] = []
    around: list[int] = []  # positions in ``bounds`` where a chunk not read starts (-1: the first, open below)
    for i, (start, end) in enumerate(spans):
        if start is not None:
            if i == 0:
                around.append(-1)  # (-inf, start)
            bounds.append(start)
        if not is_after(end):  # a key alone (a string key's, its end just after it) is one chunk
            bounds += _query_bounds(conn, schema, chunk_size, start, end)
        if end is not None:
            around.append(len(bounds))  # [end, next start) or [end, +inf)
            bounds.append(end)
    chunks = chunks_from_bounds(schema.table, schema.chunk_key, bounds)
    return chunks, tuple(p + 1 for p in around)


def cut_range(conn: Any, schema: TableSchema, start: Key | None, end: Key | None, chunk_size: int) -> list[Key]:
    """Boundaries that cut ``[start, end)`` into pieces of about ``chunk_size`` rows, evenly by key value, for a
    chunk key of one integer column; none for another key or a range of fewer rows. What ``mysql-cdc verify``
    sums the chunks around a key range read again by (they hold the rest of the table): the optimizer's estimate
    of the range's rows and its smallest and largest key, queries that read the index's ends only (the
    boundaries the planner finds by OFFSET would read the whole range once more)."""
    cols = schema.chunk_key
    if len(cols) != 1 or not schema.column(cols[0]).is_integral or chunk_size < 1:
        return []
    rows = range_rows(conn, schema, start, end)
    if rows <= chunk_size:
        return []
    lo, hi = _key_extremes(conn, schema, start, end)
    if lo is None:
        return []
    return [(b,) for b in even_bounds(int(lo), int(hi), rows, chunk_size, 0.0, float("inf")) or []]


def _holds_more_than(conn: Any, schema: TableSchema, rows: int) -> bool:
    """Whether the table holds more than ``rows`` rows with no NULL in the chunk key (the NULL keys have a chunk
    of their own), found by skipping that many in an index: at most ``rows + 1`` entries read, no row sorted or
    kept, and no more than the single chunk's read would take anyway.

    The even split trusts the optimizer's estimate of the table's rows, which lags behind a table filled a moment
    ago (MySQL 9.7 estimated 28 rows for a table of 100 just inserted, once in 200 tries): where it promises a
    single chunk, this checks it, and a table that holds more is split by queries.
    """
    nn = " AND ".join(f"{ident(c)} IS NOT NULL" for c in schema.chunk_key if schema.column(c).nullable)
    cur = conn.cursor()
    try:
        cur.execute(f"SELECT 1 FROM {table_ident(schema.table)} WHERE {nn or 'TRUE'} LIMIT 1 OFFSET %s", (rows,))
        return cur.fetchone() is not None
    finally:
        cur.close()


def _range_where(schema: TableSchema, start: Key | None, end: Key | None) -> tuple[str, list[Any]]:
    """``WHERE`` text and parameters of the chunk key's ``[start, end)`` (``TRUE`` for the whole table)."""
    return chunk_where(Chunk(schema.table, 0, tuple(schema.chunk_key), start, end))


def _key_extremes(conn: Any, schema: TableSchema, start: Key | None, end: Key | None) -> tuple[Any, Any]:
    """The smallest and largest value of a one-column chunk key in ``[start, end)`` (the index's ends)."""
    col = ident(schema.chunk_key[0])
    where, params = _range_where(schema, start, end)
    cur = conn.cursor()
    try:
        cur.execute(f"SELECT MIN({col}), MAX({col}) FROM {table_ident(schema.table)} WHERE {where}", params)
        lo, hi = cur.fetchone()
        return lo, hi
    finally:
        cur.close()


# An evenly sized range the optimizer estimates at more rows than this many chunks is split again by queries:
# a dense run of keys inside an even spread put one chunk of 3,000 rows among chunks of 500 (memory and task
# time follow the largest chunk).
RESPLIT_FACTOR = 4


def _query_bounds(conn: Any, schema: TableSchema, chunk_size: int, start: Key | None, end: Key | None
                  ) -> list[Key]:
    """Inner boundaries found by the server, ``chunk_size`` rows apart, from ``start`` up to ``end``."""
    inner: list[Key] = []
    seen: set[Key] = set()
    order = functools.cache(lambda: KeyOrder(schema))
    while True:
        nxt = _next_start(conn, schema, start, chunk_size, end, order)
        if nxt is None or (end is not None and _at_or_after(conn, order(), nxt, end)):
            return inner
        if start is not None and (tuple(nxt) == tuple(start) or tuple(nxt) in seen):  # it moves on, or stops
            raise ChunkKeyError(
                f"planning the chunks of {str(schema.table)!r} made no progress: the server gave the key "
                f"{tuple(nxt)!r} again after it (chunk key {', '.join(schema.chunk_key)}); its values do not come "
                "back exactly as stored: set option chunk_key to columns of exact values (integers, strings, "
                "DECIMAL, temporal types)")
        inner.append(nxt)
        seen.add(tuple(nxt))
        start = nxt


def _at_or_after(conn: Any, order: KeyOrder, key: Key, end: Key) -> bool:
    """Whether ``key`` is at or after ``end`` as the server orders the chunk key (a string column by its
    collation, where Python's order of the text is another: 'b' < 'M' under a case-insensitive one)."""
    if not order.needs_server:
        return tuple(key) >= tuple(end)
    a, b = order.sort_keys(conn, [key, end])
    return bool(a >= b)


def range_rows(conn: Any, schema: TableSchema, start: Key | None, end: Key | None) -> int:
    """The optimizer's row estimate for a key range (index dives: cheap, and close for a primary key)."""
    where, params = _range_where(schema, start, end)
    cur = conn.cursor()
    try:
        cur.execute(f"EXPLAIN SELECT * FROM {table_ident(schema.table)} WHERE {where}", params)
        return explained_rows(cur)
    finally:
        cur.close()


def _resplit_crowded(conn: Any, schema: TableSchema, bounds: list[int], chunk_size: int) -> list[Key]:
    """Even boundaries, with each range estimated at more than ``RESPLIT_FACTOR * chunk_size`` rows split
    again at boundaries found by the server."""
    edges: list[Key | None] = [None, *[(b,) for b in bounds], None]
    out: list[Key] = []
    for i in range(len(edges) - 1):
        start, end = edges[i], edges[i + 1]
        if range_rows(conn, schema, start, end) > RESPLIT_FACTOR * chunk_size:
            out += _query_bounds(conn, schema, chunk_size, start, end)
        if end is not None:
            out.append(end)
    return out
