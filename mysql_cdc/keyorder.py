"""Compare chunk keys as the server does.

Integers, DECIMAL, binary strings, temporal values and floats order the same in Python and on the server.
Strings under a collation do not ('a' = 'A' under a case-insensitive collation, accents, PAD SPACE), so their
sort keys come from the server's ``WEIGHT_STRING()`` for the column's collation: comparing those byte strings
in Python is comparing as the server does; under a PAD SPACE collation as if the shorter were padded with
spaces (:class:`Padded`), and under one of several levels of weights (MariaDB's ``uca1400_*_as_*`` and
``*_cs``, ``thai_520_w2``) level by level, each padded with the space's weight at that level (the server gives
them apart: ``WEIGHT_STRING(... LEVEL n)``), as the server compares them (:func:`_weighing`).
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


def _text_expr(col: ColumnInfo, trim: bool = False, level: int | None = None) -> str:
    """The weights of a value of ``col`` (``%s``) under its collation, all of them (no ``AS CHAR(n)``: MariaDB
    counts ``n`` in weights, so a value with an expansion, 'ß' as 'ss', would lose its last ones); ``trim``: of
    the value less its trailing spaces; ``level``: those of that level alone."""
    cs, coll = _names(col)
    value = f"TRIM(TRAILING ' ' FROM CONVERT(%s USING {cs}))" if trim else f"CONVERT(%s USING {cs})"
    return f"WEIGHT_STRING({value}" + (f" COLLATE {coll}" if coll else "") + (f" LEVEL {level})" if level else ")")


@functools.total_ordering
class Padded:
    """The weights of a value under a PAD SPACE collation (of one level, or one level of several), compared as
    the server compares the values: the shorter as if padded with the space's weight (``space``, one unit; the
    trailing ones are left out). Plain weights would put ``'a'`` before ``'a\\t'`` (a prefix first), where the
    server puts it after (``'a '`` against ``'a\\t'``), and ``'a'`` before ``'a '``, which it holds equal.

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


# a value whose characters weigh apart at each level: a case, an accent, an expansion ('ß'), a space, a tab
_PROBE = "Aé ß\tb-0"


def _weighing(conn: Any, col: ColumnInfo) -> tuple[tuple[str, ...], tuple[bytes, ...] | None]:
    """How the server compares values of ``col``, asked (not known by name): the SQL of a value's weights, one
    expression per level compared apart, and under PAD SPACE (``'a' = 'a '``) the space's weights at each (a
    space's weights twice are two spaces'); ``None``: NO PAD, the weights compared as bytes.

    Several levels under PAD SPACE (two spaces weigh other than a space's weights twice: the levels follow each
    other in one weight string) are asked apart where the server gives them (MariaDB's ``LEVEL n``): the levels
    whose weights, one after the other, are the whole weight string of :data:`_PROBE`. Where it does not (MySQL
    has no ``LEVEL``; its multi-level PAD SPACE collations are the Czech ones), the value's trailing spaces are
    trimmed (exact but for a character weighing less than a space after a common start: 'a' and 'a\\tb')."""
    cs, coll = _names(col)
    c = f" COLLATE {coll}" if coll else ""
    cur = conn.cursor()
    try:
        cur.execute(f"SELECT CONVERT('a' USING {cs}){c} = CONVERT('a ' USING {cs}), "
                    f"WEIGHT_STRING(CONVERT(' ' USING {cs}){c}), WEIGHT_STRING(CONVERT('  ' USING {cs}){c}), "
                    f"WEIGHT_STRING(CONVERT(%s USING {cs}){c})", (_PROBE,))
        pads, one, two, whole = (bytes(v or b"") if i else v for i, v in enumerate(cur.fetchone()))
        if not pads:
            return (_text_expr(col),), None
        if one and two == one + one:
            return (_text_expr(col),), (one,)
        levels: list[tuple[int, bytes]] = []
        seen = b""
        for n in range(1, 7):
            try:
                cur.execute(f"SELECT WEIGHT_STRING(CONVERT(%s USING {cs}){c} LEVEL {n}), "
                            f"WEIGHT_STRING(CONVERT(' ' USING {cs}){c} LEVEL {n}), "
                            f"WEIGHT_STRING(CONVERT('  ' USING {cs}){c} LEVEL {n})", (_PROBE,))
            except Exception as e:  # no LEVEL here (MySQL: a syntax error)
                if not (e.args and e.args[0] in (1064, 1149)):
                    raise
                break
            part, sp, sp2 = (bytes(v or b"") for v in cur.fetchone())
            if part:
                if not sp or sp2 != sp + sp:
                    break  # a level whose space is not one unit of weights: not padded as Padded pads
                levels.append((n, sp))
                seen += part
            if seen == whole or not whole.startswith(seen):
                break
        if levels and seen == whole:
            return tuple(_text_expr(col, level=n) for n, _ in levels), tuple(sp for _, sp in levels)
        return (_text_expr(col, trim=True),), None
    finally:
        cur.close()


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
        # once the server said how each collation compares (:func:`_weighing`): the weights' SQL, one per level
        # compared apart, and the space's weights at each under PAD SPACE (its sort keys Padded)
        self._exprs: dict[int, tuple[tuple[str, ...], tuple[bytes, ...] | None]] | None = None

    def _expressions(self, conn: Any) -> dict[int, tuple[tuple[str, ...], tuple[bytes, ...] | None]]:
        if self._exprs is None:
            self._exprs = {i: _weighing(conn, self._cols[i]) for i in self._text}
        return self._exprs

    @property
    def needs_server(self) -> bool:
        return bool(self._text)

    def sort_keys(self, conn: Any, keys: Sequence[Key]) -> list[tuple[Any, ...]]:
        """One sort key per key; a server round trip per 200 weights asked when the key has collated strings. A
        string's is its weights (bytes), :class:`Padded` under PAD SPACE, a tuple of them, one a level, where
        the levels are compared apart."""
        if not self._text:
            return [tuple(k) for k in keys]
        out = [list(k) for k in keys]
        exprs = self._expressions(conn)
        cells = [(r, i, n) for r in range(len(keys)) for i in self._text for n in range(len(exprs[i][0]))]
        got: dict[tuple[int, int], list[bytes]] = {}
        cur = conn.cursor()
        try:
            for lo in range(0, len(cells), _BATCH):
                part = cells[lo:lo + _BATCH]
                cur.execute("SELECT " + ", ".join(exprs[i][0][n] for _, i, n in part),
                            [_as_text(keys[r][i]) for r, i, _ in part])
                for (r, i, _), w in zip(part, cur.fetchone()):
                    got.setdefault((r, i), []).append(bytes(w) if w is not None else b"")
        finally:
            cur.close()
        for (r, i), weights in got.items():
            spaces = exprs[i][1]
            if spaces is None:
                out[r][i] = weights[0]
            elif len(spaces) == 1:
                out[r][i] = Padded(weights[0], spaces[0])
            else:
                out[r][i] = tuple(Padded(w, sp) for w, sp in zip(weights, spaces))
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
