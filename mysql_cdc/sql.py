"""SQL text for key ranges. Identifiers are backtick-quoted and escaped; values are always bound parameters.

Text made here is in the drivers' parameter format: pymysql and mysqlclient apply Python's ``%`` formatting to
a statement executed with parameters, so a ``%`` inside an identifier is written ``%%`` (:func:`ident`);
:func:`inline_params` reads the same format. Execute it with a parameter list, even an empty one.

Pure logic. A composite key compares lexicographically, written out as nested OR/AND so that both MySQL and
MariaDB use a range scan on the key's index.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Sequence
from decimal import Decimal
from typing import Any

from mysql_cdc.chunks import Chunk, Key, is_after
from mysql_cdc.ids import ident, table_ident


def key_compare(cols: Sequence[str], key: Key, op: str) -> tuple[str, list[Any]]:
    """``(cols) op (key)`` for op in ``>=``, ``>``, ``<``, ``<=``, written per column; a bound just after a key
    (:data:`~mysql_cdc.chunks.AFTER`) is compared as that key: at or above it is above the key, below it is at
    or below the key.

    >>> key_compare(["a", "b"], (1, 2), ">=")
    ('(`a` > %s OR (`a` = %s AND `b` >= %s))', [1, 1, 2])
    >>> from mysql_cdc.chunks import AFTER
    >>> key_compare(["a"], (5,), "<"), key_compare(["a"], ("x", AFTER), "<"), key_compare(["a"], ("x", AFTER), ">=")
    (('`a` < %s', [5]), ('`a` <= %s', ['x']), ('`a` > %s', ['x']))
    """
    if is_after(key):
        key, op = key[:-1], {">=": ">", ">": ">", "<": "<=", "<=": "<="}[op]
    if len(cols) != len(key) or not cols:
        raise ValueError(f"key {key!r} does not fit columns {list(cols)!r}")
    strict = {">=": ">", ">": ">", "<": "<", "<=": "<"}[op]
    q = [ident(c) for c in cols]
    last = q[-1] + f" {op} %s"
    params: list[Any] = [key[-1]]
    sql = last
    for i in range(len(cols) - 2, -1, -1):
        sql = f"({q[i]} {strict} %s OR ({q[i]} = %s AND {sql}))"
        params = [key[i], key[i], *params]
    return sql, params


def chunk_where(chunk: Chunk) -> tuple[str, list[Any]]:
    """``WHERE`` text (without the keyword) selecting exactly the chunk's half-open key range; for a nullable
    chunk key, ranges hold no key with a NULL and the ``nulls`` chunk holds every such key.

    >>> from mysql_cdc.ids import TableId
    >>> chunk_where(Chunk(TableId("d", "t"), 0, ("a", "b"), None, (5, 1), nullable=True))
    ('`a` IS NOT NULL AND `b` IS NOT NULL AND (`a` < %s OR (`a` = %s AND `b` < %s))', [5, 5, 1])
    >>> chunk_where(Chunk(TableId("d", "t"), 1, ("a", "b"), None, None, nullable=True, nulls=True))
    ('(`a` IS NULL OR `b` IS NULL)', [])
    """
    if chunk.nulls:
        return "(" + " OR ".join(f"{ident(c)} IS NULL" for c in chunk.key_columns) + ")", []
    parts: list[str] = [f"{ident(c)} IS NOT NULL" for c in chunk.key_columns] if chunk.nullable else []
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


def select_chunk_sql(chunk: Chunk, columns: Sequence[str], exprs: Sequence[str] | None = None
                     ) -> tuple[str, list[Any]]:
    """The chunk's SELECT; ``exprs`` (one per column, from trusted code, made with :func:`ident`) replace plain
    column references.

    >>> from mysql_cdc.ids import TableId
    >>> select_chunk_sql(Chunk(TableId("d", "t%"), 0, ("k",), (5,), None), ["k", "v%"])
    ('SELECT `k`, `v%%` FROM `d`.`t%%` WHERE `k` >= %s', [5])
    """
    where, params = chunk_where(chunk)
    cols = ", ".join(ident(c) if exprs is None or e == ident(c) else f"{e} AS {ident(c)}"
                     for c, e in zip(columns, exprs or columns))
    return f"SELECT {cols} FROM {table_ident(chunk.table)} WHERE {where}", params


def sql_literal(v: Any) -> str:
    """A value as a SQL literal, for drivers without bound parameters (the Arrow-native path).

    Strings and bytes go as hex literals, so no quote, backslash or ``sql_mode`` can change their meaning.

    >>> sql_literal("it's"), sql_literal(b"\\x00"), sql_literal(Decimal("1E+3"))
    ("_utf8mb4 X'69742773'", "X'00'", '1000')
    """
    if v is None:
        return "NULL"
    if isinstance(v, bool):
        return "1" if v else "0"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, Decimal):
        return format(v, "f")
    if isinstance(v, float):
        return repr(v)
    if isinstance(v, str):
        return "_utf8mb4 X'" + v.encode("utf-8").hex() + "'" if v else "''"
    if isinstance(v, bytes | bytearray):
        return "X'" + bytes(v).hex() + "'" if v else "_binary''"
    if isinstance(v, dt.datetime):
        return "'" + v.replace(tzinfo=None).isoformat(sep=" ", timespec="microseconds") + "'"
    if isinstance(v, dt.date):
        return "'" + v.isoformat() + "'"
    if isinstance(v, dt.timedelta):
        us = (v.days * 86400 + v.seconds) * 1_000_000 + v.microseconds
        sign, us = ("-" if us < 0 else ""), abs(us)
        hours, minutes, seconds = us // 3_600_000_000, us // 60_000_000 % 60, us // 1_000_000 % 60
        return f"'{sign}{hours}:{minutes:02d}:{seconds:02d}.{us % 1_000_000:06d}'"
    raise TypeError(f"no SQL literal for {v!r} of type {type(v).__name__}")


def inline_params(sql: str, params: Sequence[Any]) -> str:
    """Replace each ``%s`` of text made by this module with the literal of its parameter (and ``%%`` with
    ``%``), for a driver that takes plain text.

    >>> inline_params("SELECT `a%%s` FROM t WHERE k = %s", [7])
    'SELECT `a%s` FROM t WHERE k = 7'
    """
    tokens = re.split(r"(%%|%s)", sql)
    if sum(t == "%s" for t in tokens) != len(params):
        raise ValueError(f"{sum(t == '%s' for t in tokens)} placeholders for {len(params)} parameters")
    it = iter(params)
    return "".join(sql_literal(next(it)) if t == "%s" else "%" if t == "%%" else t for t in tokens)
