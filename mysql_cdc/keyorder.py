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


def _text_expr(col: ColumnInfo, pad: bool) -> str:
    """The sort key of a value of ``col`` (``%s``): its collation's weights; for a PAD SPACE collation, of the
    value padded with spaces to the column's length (``AS CHAR(n)``), as the server compares ('a\\t' < 'a' =
    'a ': padded, 'a\\t' is 'a\\t  ' and 'a' is 'a   '; without it the shorter would sort first)."""
    cs = col.charset or "utf8mb4"
    coll = col.collation or ""
    if not re.fullmatch(r"[A-Za-z0-9_]+", cs) or (coll and not re.fullmatch(r"[A-Za-z0-9_]+", coll)):
        raise ChunkKeyError(f"column {col.name!r} has an unexpected charset/collation {cs!r}/{coll!r}")
    n = char_length(col) if pad else None
    return (f"WEIGHT_STRING(CONVERT(%s USING {cs})" + (f" COLLATE {coll}" if coll else "")
            + (f" AS CHAR({n}))" if n else ")"))


def char_length(col: ColumnInfo) -> int | None:
    """The characters a CHAR or VARCHAR column holds (``None`` for other types).

    >>> char_length(ColumnInfo("k", "varchar", "varchar(40)", False)), char_length(ColumnInfo("n", "int", "int", False))
    (40, None)
    """
    m = re.fullmatch(r"(?:var)?char\((\d+)\).*", col.column_type.strip().lower())
    return int(m.group(1)) if m and col.data_type in ("char", "varchar") else None


def _pads(conn: Any, col: ColumnInfo) -> bool:
    """Whether the server compares values of ``col`` PAD SPACE (``'a' = 'a '``): asked, not known by name."""
    cs, coll = col.charset or "utf8mb4", col.collation or ""
    cur = conn.cursor()
    try:
        cur.execute(f"SELECT CONVERT('a' USING {cs})" + (f" COLLATE {coll}" if coll else "")
                    + f" = CONVERT('a ' USING {cs})")
        row = cur.fetchone()
    finally:
        cur.close()
    return bool(row and row[0])


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
        self._cols = check_chunk_key(schema)
        self._text = [i for i, c in enumerate(self._cols) if c.is_text]
        for i in self._text:
            _text_expr(self._cols[i], False)  # its names checked before any server is asked
        self._exprs: dict[int, str] | None = None  # once the server said which collations pad

    def _expressions(self, conn: Any) -> dict[int, str]:
        if self._exprs is None:
            self._exprs = {i: _text_expr(self._cols[i], _pads(conn, self._cols[i])) for i in self._text}
        return self._exprs

    @property
    def needs_server(self) -> bool:
        return bool(self._text)

    def sort_keys(self, conn: Any, keys: Sequence[Key]) -> list[tuple[Any, ...]]:
        """One sort key per key; a server round trip per 200 keys when the key has collated strings."""
        if not self._text:
            return [tuple(k) for k in keys]
        out = [list(k) for k in keys]
        cells = [(r, i) for r in range(len(keys)) for i in self._text]
        exprs = self._expressions(conn)
        cur = conn.cursor()
        try:
            for lo in range(0, len(cells), _BATCH):
                part = cells[lo:lo + _BATCH]
                sql = "SELECT " + ", ".join(exprs[i] for _, i in part)
                cur.execute(sql, [_as_text(keys[r][i]) for r, i in part])
                row = cur.fetchone()
                for (r, i), w in zip(part, row):
                    out[r][i] = bytes(w) if w is not None else b""
        finally:
            cur.close()
        return [tuple(k) for k in out]

    def fits(self, conn: Any, keys: Sequence[Key]) -> list[bool]:
        """Whether each key's strings are values of their columns' character sets (asked of the server: a
        string one of them cannot hold, as ``'€'`` in a latin1 column of MySQL's latin1 without it, names no
        row, and a statement comparing the column with it fails, "Illegal mix of collations")."""
        cells = [(r, i) for r in range(len(keys)) for i in self._text if isinstance(keys[r][i], str)]
        out = [True] * len(keys)
        cur = conn.cursor()
        try:
            for lo in range(0, len(cells), _BATCH):
                part = cells[lo:lo + _BATCH]
                cur.execute("SELECT " + ", ".join(
                    f"CAST(CONVERT(CONVERT(%s USING {self._cols[i].charset or 'utf8mb4'}) USING utf8mb4) AS BINARY)"
                    " = CAST(CONVERT(%s USING utf8mb4) AS BINARY)" for _, i in part),
                    [v for r, i in part for v in (keys[r][i], keys[r][i])])
                for (r, _), same in zip(part, cur.fetchone()):
                    out[r] = out[r] and bool(same)
        finally:
            cur.close()
        return out

    def equal(self, conn: Any, a: Key, b: Key) -> bool:
        if tuple(a) == tuple(b):
            return True
        sa, sb = self.sort_keys(conn, [a, b])
        return sa == sb


def _as_text(v: Any) -> Any:
    return v.decode("utf-8", "surrogateescape") if isinstance(v, bytes | bytearray) else v
