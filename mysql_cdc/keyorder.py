"""Compare chunk keys as the server does.

Integers, DECIMAL, binary strings, temporal values and floats order the same in Python and on the server.
Strings under a collation do not ('a' = 'A' under a case-insensitive collation, accents, PAD SPACE), so their
sort keys come from the server's ``WEIGHT_STRING()`` for the column's collation: comparing those byte strings
in Python is comparing as the server does.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Sequence
from typing import Any

from mysql_cdc.chunks import Key
from mysql_cdc.errors import ChunkKeyError
from mysql_cdc.schema import ColumnInfo, TableSchema
from mysql_cdc.types import MARIADB_TEXT, TEXT_CHARSETS

_BATCH = 200


def _text_expr(col: ColumnInfo) -> str:
    cs = col.charset or "utf8mb4"
    coll = col.collation or ""
    if not re.fullmatch(r"[A-Za-z0-9_]+", cs) or (coll and not re.fullmatch(r"[A-Za-z0-9_]+", coll)):
        raise ChunkKeyError(f"column {col.name!r} has an unexpected charset/collation {cs!r}/{coll!r}")
    return f"WEIGHT_STRING(CONVERT(%s USING {cs})" + (f" COLLATE {coll})" if coll else ")")


def key_value(v: Any) -> Any:
    """A canonical value in the form keys and chunk bounds are held and compared in: a TIMESTAMP (an aware
    datetime in UTC) as the naive UTC datetime that sessions in UTC read.

    >>> key_value(dt.datetime(2026, 1, 2, 3, 4, tzinfo=dt.timezone.utc)), key_value(7)
    (datetime.datetime(2026, 1, 2, 3, 4), 7)
    """
    if isinstance(v, dt.datetime) and v.tzinfo is not None:
        return v.astimezone(dt.timezone.utc).replace(tzinfo=None)
    return v


def check_chunk_key(schema: TableSchema) -> list[ColumnInfo]:
    """The chunk key's columns, if each is of a type whose server order we can reproduce (else ChunkKeyError).

    MariaDB's INET4/INET6/UUID are ordered by their stored bytes (UUIDs partly swapped), not by the text we
    deliver; text in a character set without an exact decoder is delivered as bytes. (Text keys holding bytes
    their character set leaves undefined, writable only as binary literals, read as '?' by every path.)"""
    cols = [schema.column(c) for c in schema.chunk_key]
    for c in cols:
        if c.data_type in ("enum", "set", "json", "geometry", "blob", "text", *MARIADB_TEXT):
            raise ChunkKeyError(f"column {c.name!r} of {str(schema.table)!r} has type {c.column_type!r}, "
                                "which cannot be a chunk key; use a primary key or chunk_key of another type")
        if c.is_text and c.charset not in TEXT_CHARSETS:
            raise ChunkKeyError(
                f"column {c.name!r} of {str(schema.table)!r} uses character set {c.charset!r}, which is read "
                "as bytes (no exact decoder here) and cannot be a chunk key; set chunk_key to another unique "
                "column or convert the column to utf8mb4")
    return cols


class KeyOrder:
    """Sort keys for one table's chunk key: Python values, with server weights for collated strings."""

    def __init__(self, schema: TableSchema) -> None:
        cols = check_chunk_key(schema)
        self._text = [i for i, c in enumerate(cols) if c.is_text]
        self._exprs = {i: _text_expr(cols[i]) for i in self._text}

    @property
    def needs_server(self) -> bool:
        return bool(self._text)

    def sort_keys(self, conn: Any, keys: Sequence[Key]) -> list[tuple[Any, ...]]:
        """One sort key per key; a server round trip per 200 keys when the key has collated strings."""
        if not self._text:
            return [tuple(k) for k in keys]
        out = [list(k) for k in keys]
        cells = [(r, i) for r in range(len(keys)) for i in self._text]
        cur = conn.cursor()
        try:
            for lo in range(0, len(cells), _BATCH):
                part = cells[lo:lo + _BATCH]
                sql = "SELECT " + ", ".join(self._exprs[i] for _, i in part)
                cur.execute(sql, [_as_text(keys[r][i]) for r, i in part])
                row = cur.fetchone()
                for (r, i), w in zip(part, row):
                    out[r][i] = bytes(w) if w is not None else b""
        finally:
            cur.close()
        return [tuple(k) for k in out]

    def equal(self, conn: Any, a: Key, b: Key) -> bool:
        if tuple(a) == tuple(b):
            return True
        sa, sb = self.sort_keys(conn, [a, b])
        return sa == sb


def _as_text(v: Any) -> Any:
    return v.decode("utf-8", "surrogateescape") if isinstance(v, bytes | bytearray) else v
