"""SQL text for key ranges. Identifiers are backtick-quoted and escaped; values are always bound parameters.

Pure logic. A composite key compares lexicographically, written out as nested OR/AND so that both MySQL and
MariaDB use a range scan on the key's index.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from planner.chunks import Chunk, Key, quote_ident


def key_compare(cols: Sequence[str], key: Key, op: str) -> tuple[str, list[Any]]:
    """``(cols) op (key)`` for op in ``>=``, ``>``, ``<``, written per column.

    >>> key_compare(["a", "b"], (1, 2), ">=")
    ('(`a` > %s OR (`a` = %s AND `b` >= %s))', [1, 1, 2])
    >>> key_compare(["a"], (5,), "<")
    ('`a` < %s', [5])
    """
    if len(cols) != len(key) or not cols:
        raise ValueError(f"key {key!r} does not fit columns {list(cols)!r}")
    strict = {">=": ">", ">": ">", "<": "<"}[op]
    q = [quote_ident(c) for c in cols]
    last = q[-1] + f" {op} %s"
    params: list[Any] = [key[-1]]
    sql = last
    for i in range(len(cols) - 2, -1, -1):
        sql = f"({q[i]} {strict} %s OR ({q[i]} = %s AND {sql}))"
        params = [key[i], key[i], *params]
    return sql, params


def chunk_where(chunk: Chunk) -> tuple[str, list[Any]]:
    """``WHERE`` text (without the keyword) selecting exactly the chunk's half-open key range."""
    parts: list[str] = []
    params: list[Any] = []
    if chunk.start is not None:
        s, p = key_compare(chunk.key_columns, chunk.start, ">=")
        parts.append(s)
        params += p
    if chunk.end is not None:
        s, p = key_compare(chunk.key_columns, chunk.end, "<")
        parts.append(s)
        params += p
    return (" AND ".join(parts) or "TRUE"), params


def select_chunk_sql(chunk: Chunk, columns: Sequence[str]) -> tuple[str, list[Any]]:
    where, params = chunk_where(chunk)
    cols = ", ".join(quote_ident(c) for c in columns)
    return f"SELECT {cols} FROM {chunk.table.quoted()} WHERE {where}", params
