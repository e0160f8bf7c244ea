"""Compare chunk keys as the server does.

Integers, DECIMAL, binary strings, temporal values and floats order the same in Python and on the server.
Strings under a collation do not ('a' = 'A' under a case-insensitive collation, accents, PAD SPACE), so their
sort keys come from the server's ``WEIGHT_STRING()`` for the column's collation: comparing those byte strings
in Python is comparing as the server does; under a PAD SPACE collation as if the shorter were padded with
spaces (:class:`Padded`).
"""

from __future__ import annotations

import datetime as dt
import functools
import re
from collections.abc import Sequence
from typing import Any

from mysql_cdc.chunks import Key
from mysql_cdc.errors import ChunkKeyError
from mysql_cdc.schema import ColumnInfo, TableSchema
from mysql_cdc.types import MARIADB_TEXT, TEXT_CHARSETS

_BATCH = 200


def _names(col: ColumnInfo) -> tuple[str, str]:
    cs = col.charset or "utf8mb4"
    coll = col.collation or ""
    if not re.fullmatch(r"[A-Za-z0-9_]+", cs) or (coll and not re.fullmatch(r"[A-Za-z0-9_]+", coll)):
        raise ChunkKeyError(f"column {col.name!r} has an unexpected charset/collation {cs!r}/{coll!r}")
    return cs, coll


def _text_expr(col: ColumnInfo, trim: bool = False) -> str:
    """The weights of a value of ``col`` (``%s``) under its collation, all of them (no ``AS CHAR(n)``: MariaDB
    counts ``n`` in weights, so a value with an expansion, 'ß' as 'ss', would lose its last ones); ``trim``: of
    the value less its trailing spaces."""
    cs, coll = _names(col)
    value = f"TRIM(TRAILING ' ' FROM CONVERT(%s USING {cs}))" if trim else f"CONVERT(%s USING {cs})"
    return f"WEIGHT_STRING({value}" + (f" COLLATE {coll})" if coll else ")")


@functools.total_ordering
class Padded:
    """The weights of a value under a PAD SPACE collation of one level, compared as the server compares the
    values: the shorter as if padded with the space's weight (``space``, one unit; the trailing ones are left
    out). Plain weights would put ``'a'`` before ``'a\\t'`` (a prefix first), where the server puts it after
    (``'a '`` against ``'a\\t'``), and ``'a'`` before ``'a '``, which it holds equal.

    >>> sp = b"\\x00 "  # utf8mb4_general_ci: two bytes a character
    >>> a, tab, a_sp = Padded(b"\\x00A", sp), Padded(b"\\x00A\\x00\\t", sp), Padded(b"\\x00A\\x00 ", sp)
    >>> tab < a, a == a_sp, hash(a) == hash(a_sp), a < Padded(b"\\x00A\\x00!", sp)
    (True, True, True, True)
    """

    __slots__ = ("space", "weights")

    def __init__(self, weights: bytes, space: bytes) -> None:
        n = len(space)
        while n and len(weights) >= n and weights[-n:] == space:
            weights = weights[:-n]
        self.weights, self.space = weights, space

    def _cmp(self, other: Padded) -> int:
        a, b = self.weights, other.weights
        m = min(len(a), len(b))
        if a[:m] != b[:m]:
            return -1 if a[:m] < b[:m] else 1
        if len(a) == len(b):
            return 0
        rest = a[m:] if len(a) > m else b[m:]
        pad = self.space * (len(rest) // max(len(self.space), 1))
        sign = (rest > pad) - (rest < pad)
        return sign if len(a) > m else -sign

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Padded) and self.weights == other.weights

    def __lt__(self, other: Padded) -> bool:
        return self._cmp(other) < 0

    def __hash__(self) -> int:
        return hash(self.weights)

    def __repr__(self) -> str:
        return f"Padded({self.weights!r})"

    def __reduce__(self) -> tuple[Any, ...]:
        return Padded, (self.weights, self.space)


def _padding(conn: Any, col: ColumnInfo) -> tuple[bool, bytes | None]:
    """How the server compares values of ``col``, asked (not known by name): PAD SPACE (``'a' = 'a '``) or not,
    and for PAD SPACE of one level of weights (a space's weights twice are two spaces'), the space's weights."""
    cs, coll = _names(col)
    c = f" COLLATE {coll}" if coll else ""
    cur = conn.cursor()
    try:
        cur.execute(f"SELECT CONVERT('a' USING {cs}){c} = CONVERT('a ' USING {cs}), "
                    f"WEIGHT_STRING(CONVERT(' ' USING {cs}){c}), WEIGHT_STRING(CONVERT('  ' USING {cs}){c})")
        pads, one, two = cur.fetchone()
    finally:
        cur.close()
    one, two = bytes(one or b""), bytes(two or b"")
    return bool(pads), one if pads and one and two == one + one else None


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
            _names(self._cols[i])  # checked before any server is asked
        # once the server said how each collation compares: the weights' SQL, and the space's weights of a
        # PAD SPACE collation of one level (its sort keys Padded); of several levels, the value's trailing spaces
        # are trimmed (exact but for a character weighing less than a space after a common start: 'a' and 'a\\tb')
        self._exprs: dict[int, tuple[str, bytes | None]] | None = None

    def _expressions(self, conn: Any) -> dict[int, tuple[str, bytes | None]]:
        if self._exprs is None:
            out = {}
            for i in self._text:
                pads, space = _padding(conn, self._cols[i])
                out[i] = (_text_expr(self._cols[i], trim=pads and space is None), space)
            self._exprs = out
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
                sql = "SELECT " + ", ".join(exprs[i][0] for _, i in part)
                cur.execute(sql, [_as_text(keys[r][i]) for r, i in part])
                row = cur.fetchone()
                for (r, i), w in zip(part, row):
                    weights, space = bytes(w) if w is not None else b"", exprs[i][1]
                    out[r][i] = weights if space is None else Padded(weights, space)
        finally:
            cur.close()
        return [tuple(k) for k in out]

    def fits(self, conn: Any, keys: Sequence[Key]) -> list[bool]:
        """Whether each key's strings are values of their columns' character sets (asked of the server: a
        string one of them cannot hold, as ``'\\u0080'`` in a latin1 column (MySQL's latin1 is cp1252), names no
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
