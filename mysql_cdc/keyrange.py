"""A key range of one table, read again on demand (``mysql-cdc resnapshot --key-from/--key-to/--key``, ``verify
--repair``): half-open ``[start, end)`` over the table's chunk key, either end open (``None``), compared as the
server compares the key: column after column, less the ``gaps`` in it, so that a list of keys is one range too
(a key ``k`` is the span from it to the key just after it) (pure; no server, no Spark).

Chunk keys of integer, binary (BINARY, VARBINARY: a UUID kept as ``BINARY(16)``), DECIMAL (up to 15 digits),
DATE, DATETIME and TIMESTAMP columns, NOT NULL, take a range: their order is the same in MySQL, in Spark, in
delta-rs and in Iceberg (numbers; bytes compared unsigned, one after the other, a prefix first; dates and times),
so the rows a mirror deletes for the range (:meth:`KeyRange.predicate`: number, ``X'..'`` and ISO text literals,
which each engine reads as the column's type; a TIMESTAMP's with ``Z``: the value is in UTC, as keys are held)
are exactly those the source reads again. A key with a string column (CHAR, VARCHAR: ordered by a collation the
lakes do not know) is deleted from a mirror by the keys it holds, each byte for byte (``CAST(X'..' AS STRING)``: no
quote or backslash in the text): a list of keys (``keys``), each read again as the server finds it (the keys
equal to it under the collation: one chunk ``[k, k AFTER)``, :data:`~mysql_cdc.chunks.AFTER`), or a range
``[start, end)`` read again as the server orders the key, with ``held``: every spelling of a key in it that a
mirror may hold, found by the server when the request is taken (:mod:`mysql_cdc.udtf.binlog.spellings`; before
that it has no predicate). A BIGINT UNSIGNED
column (a DECIMAL(20, 0) in a lake) takes bounds below 2^53 only and a DECIMAL at most 15 digits
(:func:`range_problem`: delta-rs keeps their file statistics as doubles). The key just
after ``k``: ``k + 1`` (an integer), ``k + b"\\x00"`` (bytes), ``k`` and one unit of its last digit (a DECIMAL at its
scale), the next day (a DATE), the next microsecond (a DATETIME, a TIMESTAMP).

Worked example: over ``(a, b)`` the range ``[(1, 5), (3, 0))`` holds every key from ``(1, 5)`` up to, not
including, ``(3, 0)``; its SQL text says so column by column, each bound one disjunction:

>>> r = KeyRange(("a", "b"), (1, 5), (3, 0))
>>> r.contains((1, 5)), r.contains((2, -9)), r.contains((1, 4)), r.contains((3, 0))
(True, True, False, False)
>>> r.predicate(lambda c: f"`{c}`")
'((`a` > 1) OR (`a` = 1 AND `b` >= 5)) AND ((`a` < 3) OR (`a` = 3 AND `b` <= -1))'
>>> KeyRange.from_dict(r.to_dict()) == r, r.to_dict()
(True, {'key_columns': ['a', 'b'], 'start': [1, 5], 'end': [3, 0]})
>>> KeyRange(("id",), None, None).predicate(str)
'TRUE'

Two keys far apart and a range beside them are one range with gaps, read again alone (its spans), not the
smallest range holding them all; its SQL text is one disjunction per span:

>>> k = KeyRange.of_keys(("id",), [(7,), (400,), (8,)]).union(KeyRange(("id",), (1000,), (1200,)))
>>> k.text(), k.spans()
('id in [7, 9), [400, 401), [1000, 1200)', [((7,), (9,)), ((400,), (401,)), ((1000,), (1200,))])
>>> k.contains((8,)), k.contains((9,)), k.contains((400,)), k.to_dict()["gaps"]
(True, False, True, [[[9], [400]], [[401], [1000]]])
>>> KeyRange(("id",), (7,), (9,), (((8,), (9,)),))
Traceback (most recent call last):
...
mysql_cdc.errors.ConfigError: key range gap ((8,), (9,)) must lie inside [(7,), (9,)) after the gaps before \
it, with keys on both sides
"""

from __future__ import annotations

import base64
import datetime as dt
import heapq
import json
import re
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation, localcontext
from typing import Any

from mysql_cdc.chunks import after, decode_value, encode_value
from mysql_cdc.errors import ConfigError
from mysql_cdc.types import TEXT_CHARSETS, spark_type

# an integer column's, a binary column's, a DECIMAL's (at its scale), a DATE's, a DATETIME's or a TIMESTAMP's (a
# naive datetime: UTC for a TIMESTAMP, as chunk keys are held), a string column's
Value = int | bytes | Decimal | dt.date | str
RangeKey = tuple[Value, ...]
Span = tuple[RangeKey | None, RangeKey | None]
# a request names at most this many spans of a table (a longer list of keys is joined across its smallest gaps:
# more rows are read again, the same keys among them), so that a mirror's delete is one predicate of bounded size
MAX_SPANS = 64
# a range over a key with a string column takes at most this many keys held in it (each named in the mirror's
# delete; more: the table is read again whole), in at most MAX_GROUPS disjunctions (delta-rs plans a chain of
# disjunctions in time that grows with its square: 1,000 took 4 s, 2,000 took 17 s and 5,000 crashed it, where
# one IN list of 2,000 took 0.14 s)
MAX_HELD = 10_000
MAX_GROUPS = 256


@dataclass(frozen=True)
class KeyRange:
    """``[start, end)`` over ``key_columns``; each bound a whole key (a value per column, as chunk bounds are)."""

    key_columns: tuple[str, ...]
    start: RangeKey | None = None
    end: RangeKey | None = None
    gaps: tuple[tuple[RangeKey, RangeKey], ...] = ()  # half-open, inside [start, end), in order: keys not in the range
    utc: tuple[str, ...] = ()  # the key columns whose values are UTC instants (TIMESTAMP): their literals say so
    keys: tuple[RangeKey, ...] = ()  # a list of keys (a key with a string column), in place of start, end and gaps
    # a range over a key with a string column: the keys a mirror may hold in it, each spelling (None: not known yet)
    held: tuple[RangeKey, ...] | None = None

    def __post_init__(self) -> None:
        if not self.key_columns:
            raise ConfigError("a key range needs the key's columns: a table without a key is snapshotted again whole")
        if self.keys:
            if self.start is not None or self.end is not None or self.gaps or self.held is not None:
                raise ConfigError(f"a list of keys {self.keys!r} has no start, end, gaps or keys held beside it")
            check_keys(self.key_columns, [("key", k) for k in self.keys])
            if len(self.keys) > MAX_SPANS:
                raise ConfigError(f"{len(self.keys)} keys over {', '.join(self.key_columns)} are asked for; a key with "
                                  f"a string column takes at most {MAX_SPANS} at once (each read again alone)")
            return
        if self.texts:  # ordered by the server's collation: its bounds are compared there (spellings.held_in_range)
            if self.gaps:
                raise ConfigError(f"a range over {', '.join(self.key_columns)}, a key with a string column, has no "
                                  f"gaps: {self.gaps!r}")
            check_keys(self.key_columns, [("key range start", self.start), ("key range end", self.end),
                                          *(("key held", k) for k in self.held or ())])
            if self.held is not None and len(self.held) > MAX_HELD:
                raise ConfigError(f"the range {self.text()} holds {len(self.held):,} keys; a range over a key with "
                                  f"a string column takes at most {MAX_HELD:,} (each named in the mirror's delete)")
            return
        if self.held is not None:
            raise ConfigError(f"keys held {self.held!r} belong to a range over a key with a string column only")
        check_keys(self.key_columns, [("key range start", self.start), ("key range end", self.end),
                                      *(("key range gap", v) for g in self.gaps for v in g)])
        if self.start is not None and self.end is not None and not self.start < self.end:
            raise ConfigError(f"key range start {self.start!r} is not below its end {self.end!r}: nothing to read")
        below = self.start
        for gap in self.gaps:
            a, b = gap
            if not (len(a) == len(b) == len(self.key_columns) and (below is None or below < a) and a < b
                    and (self.end is None or b < self.end)):
                raise ConfigError(f"key range gap {gap!r} must lie inside [{self.start!r}, {self.end!r}) after the "
                                  "gaps before it, with keys on both sides")
            below = b

    @classmethod
    def of_spans(cls, key_columns: Sequence[str], spans: Sequence[Span], utc: Sequence[str] = ()) -> KeyRange:
        """The union of half-open spans (``None``: open), in any order, overlapping or not; at most
        :data:`MAX_SPANS` of them kept apart (the smallest gaps closed first: a range that holds them all).

        >>> KeyRange.of_spans(("id",), [((5,), (9,)), ((1,), (3,)), ((3,), (4,))]).text()
        'id in [1, 4), [5, 9)'
        >>> KeyRange.of_spans(("id",), [((5,), (9,)), (None, (6,))]).text()
        'id in [-inf, 9)'
        """
        cols = tuple(str(c) for c in key_columns)
        if not spans:
            raise ConfigError(f"a key range over {', '.join(cols)} needs at least one span or key")
        check_keys(cols, [(f"key range {name}", k) for span in spans for name, k in zip(("start", "end"), span)])
        ordered = sorted(spans, key=lambda s: (s[0] is not None, s[0] or ()))  # open below first
        merged: list[list[Any]] = []
        for a, b in ordered:
            last = merged[-1] if merged else None
            if last is not None and (last[1] is None or a is None or a <= last[1]):  # overlapping or touching
                last[1] = None if last[1] is None or b is None else max(last[1], b)
            else:
                merged.append([a, b])
        if len(merged) > MAX_SPANS:  # keep the largest gaps (by key value, column after column), join the others
            kept = set(heapq.nlargest(MAX_SPANS - 1, range(len(merged) - 1),
                                      key=lambda j: _gap_size(merged[j][1], merged[j + 1][0])))
            joined = [merged[0]]
            for j in range(1, len(merged)):
                if j - 1 in kept:
                    joined.append(merged[j])
                else:
                    joined[-1][1] = merged[j][1]
            merged = joined
        gaps = tuple((tuple(merged[i][1]), tuple(merged[i + 1][0])) for i in range(len(merged) - 1))
        return cls(cols, merged[0][0], merged[-1][1], gaps, tuple(c for c in cols if c in utc))

    @classmethod
    def of_keys(cls, key_columns: Sequence[str], keys: Sequence[Sequence[Value]], utc: Sequence[str] = ()
                ) -> KeyRange:
        """Exactly the keys given (each the span from it to the key just after it; keys next to each other join).

        >>> KeyRange.of_keys(("a", "b"), [(1, 5), (1, 6), (2, 0)]).text()
        '(a, b) in [(1, 5), (1, 7)), [(2, 0), (2, 1))'
        >>> KeyRange.of_keys(("uuid",), [(bytes.fromhex("11ee"),)]).predicate(str)
        "((uuid >= X'11ee')) AND ((uuid < X'11ee00'))"
        >>> KeyRange.of_keys(("day", "price"), [(dt.date(2024, 2, 29), Decimal("9.50"))]).predicate(str)
        "((day > '2024-02-29') OR (day = '2024-02-29' AND price >= 9.50)) AND ((day < '2024-02-29') OR \
(day = '2024-02-29' AND price <= 9.50))"
        >>> KeyRange.of_keys(("at",), [(dt.datetime(2024, 2, 29, 10),)], utc=("at",)).predicate(str)
        "((at >= '2024-02-29T10:00:00.000000Z')) AND ((at < '2024-02-29T10:00:00.000001Z'))"

        Keys with a string are a list of keys, each as written (the same key twice once):

        >>> r = KeyRange.of_keys(("code", "n"), [("it's", 2), ("ABC", 1), ("it's", 2)])
        >>> print(r.text())
        (code, n) in {('ABC', 1), ("it's", 2)}
        >>> r.predicate(str)
        "(code = CAST(X'414243' AS STRING) AND n = 1) OR (code = CAST(X'69742773' AS STRING) AND n = 2)"
        >>> r.contains(("ABC", 1)), r.contains(("abc", 1)), KeyRange.from_dict(r.to_dict()) == r
        (True, False, True)
        """
        if any(isinstance(v, str) for k in keys for v in k):
            cols = tuple(str(c) for c in key_columns)
            check_keys(cols, [("key", tuple(k)) for k in keys])  # one kind per column before they are sorted
            return cls(cols, keys=tuple(sorted(set(map(tuple, keys)))), utc=tuple(c for c in key_columns if c in utc))
        return cls.of_spans(key_columns, [(tuple(k), (*k[:-1], _after(k[-1]))) for k in map(tuple, keys)], utc)

    @property
    def texts(self) -> bool:
        """Whether the range's bounds hold a string (a range over a key with a string column; a list of keys is
        not one). Such a range is read again as the server orders its key, and deleted from a mirror by the keys
        held in it, once they are known:

        >>> r = KeyRange(("code",), ("b",), ("M",))  # 'b' to 'M' under a case-insensitive collation
        >>> r.texts, r.spans(), r.text()
        (True, [(('b',), ('M',))], "code in ['b', 'M')")
        >>> r.predicate(str)
        Traceback (most recent call last):
        ...
        mysql_cdc.errors.ConfigError: the keys a mirror holds in code in ['b', 'M') are not known yet: they are \
found when the request is taken
        >>> h = KeyRange(("code",), ("b",), ("M",), held=(("b",), ("C",), ("c ",)))
        >>> h.predicate(str), h.contains(("c ",)), h.contains(("c",)), KeyRange.from_dict(h.to_dict()) == h
        ("code IN (CAST(X'43' AS STRING), CAST(X'62' AS STRING), CAST(X'6320' AS STRING))", True, False, True)
        """
        return any(isinstance(v, str) for k in (self.start, self.end) for v in k or ())

    def spans(self) -> list[Span]:
        """The range's half-open spans in key order: ``[start, gap start)``, ... ``[last gap end, end)``; a list
        of keys' ``[k, k AFTER)`` (in Python's order of its values, not a collation's)."""
        if self.keys:
            return [(k, after(k)) for k in self.keys]
        edges: list[Any] = [self.start, *(v for g in self.gaps for v in g), self.end]
        return [(edges[i], edges[i + 1]) for i in range(0, len(edges), 2)]

    def contains(self, key: Sequence[Value]) -> bool:
        """Whether a full key lies in the range (a datetime with a zone taken as its UTC time, as keys are held:
        pyarrow reads a lake's TIMESTAMP so).

        >>> utc = dt.timezone.utc
        >>> KeyRange.of_keys(("at",), [(dt.datetime(2024, 2, 29, 10),)], ("at",)).contains(
        ...     (dt.datetime(2024, 2, 29, 11, tzinfo=dt.timezone(dt.timedelta(hours=1))),))
        True
        """
        k = tuple(v.astimezone(dt.timezone.utc).replace(tzinfo=None) if isinstance(v, dt.datetime) and v.tzinfo
                  else v for v in key)
        if self.keys:
            return k in self.keys
        if self.texts:  # in the server's order alone: the keys it found there
            if self.held is None:
                raise ConfigError(f"the keys a mirror holds in {self.text()} are not known yet")
            return k in self.held
        return ((self.start is None or k >= self.start) and (self.end is None or k < self.end)
                and not any(a <= k < b for a, b in self.gaps))

    def predicate(self, quote: Callable[[str], str]) -> str:
        """SQL text that holds for exactly the keys in the range (number, ``X'..'`` and ISO text literals, an
        integer or DECIMAL end's last value written ``<= v`` less one unit; ``quote`` makes a column's name an
        identifier of the engine's dialect): the span's bounds, or one disjunction per span; a list of keys', or
        the keys held in a range over a key with a string column, as :func:`listed` writes them."""
        if self.keys or self.texts:
            if not self.keys and self.held is None:
                raise ConfigError(f"the keys a mirror holds in {self.text()} are not known yet: they are found when "
                                  "the request is taken")
            return listed(self.key_columns, self.keys or self.held or (), quote, self.utc)

        def span(start: RangeKey | None, end: RangeKey | None) -> str:
            parts = []
            if start is not None:
                parts.append(_bound(self.key_columns, start, ">", quote, self.utc))
            if end is not None:
                parts.append(_bound(self.key_columns, end, "<", quote, self.utc))
            return " AND ".join(parts) or "TRUE"
        spans = self.spans()
        if len(spans) == 1:
            return span(*spans[0])
        return " OR ".join(f"({span(a, b)})" for a, b in spans)

    def union(self, other: KeyRange) -> KeyRange:
        """The keys of both (requests for one table are taken together): their spans joined, no key more.

        >>> KeyRange(("id",), (5,), (9,)).union(KeyRange(("id",), (1,), (3,))).text()
        'id in [1, 3), [5, 9)'
        >>> KeyRange(("id",), (5,), (9,)).union(KeyRange(("id",), None, (6,)))
        KeyRange(key_columns=('id',), start=None, end=(9,), gaps=(), utc=(), keys=(), held=None)
        """
        if other.key_columns != self.key_columns:
            raise ConfigError(f"key ranges over {self.key_columns!r} and {other.key_columns!r} cannot be joined")
        if self.texts or other.texts:  # the lakes cannot order them: which keys two ranges share is the server's
            raise ConfigError(f"a range over a key with a string column ({(self if self.texts else other).text()}) "
                              "is read again alone, not with other keys or ranges of its table: ask for each apart")
        if self.keys or other.keys:
            if not (self.keys and other.keys):
                raise ConfigError(f"a list of keys {self.text()} and a range {other.text()} cannot be joined")
            return KeyRange.of_keys(self.key_columns, [*self.keys, *other.keys], (*self.utc, *other.utc))
        return KeyRange.of_spans(self.key_columns, [*self.spans(), *other.spans()], (*self.utc, *other.utc))

    def text(self) -> str:
        """For lines a user reads.

        >>> KeyRange(("id",), (10,), None).text()
        'id in [10, +inf)'
        """
        def show(b: RangeKey | None, inf: str) -> str:  # a TIMESTAMP's value marked UTC, as --key takes it back
            if b is None:
                return inf
            return shown_key(b, tuple(c in self.utc for c in self.key_columns))
        cols = self.key_columns[0] if len(self.key_columns) == 1 else f"({', '.join(self.key_columns)})"
        if self.keys:
            return f"{cols} in {{" + ", ".join(show(k, "") for k in self.keys) + "}"
        return f"{cols} in " + ", ".join(f"[{show(a, '-inf')}, {show(b, '+inf')})" for a, b in self.spans())

    def to_dict(self) -> dict[str, Any]:
        """The range as state files and ``-R`` rows keep it (``gaps`` only when it has some: a range without
        gaps is written as before they were known)."""
        def items(k: RangeKey) -> list[Any]:  # an integer as a JSON number (as ever), others as chunk bounds are
            return [v if isinstance(v, int) else encode_value(v) for v in k]
        out: dict[str, Any] = {"key_columns": list(self.key_columns),
                               "start": None if self.start is None else items(self.start),
                               "end": None if self.end is None else items(self.end)}
        if self.keys:  # a string as a JSON string (no range before held one)
            out["keys"] = [items(k) for k in self.keys]
        if self.held is not None:
            out["held"] = [items(k) for k in self.held]
        if self.gaps:
            out["gaps"] = [[items(a), items(b)] for a, b in self.gaps]
        if self.utc:
            out["utc"] = list(self.utc)
        return out

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> KeyRange:
        def value(x: Any) -> Value:
            if isinstance(x, dict) and set(x) == {"bin"}:
                return base64.b64decode(str(x["bin"]), validate=True)
            if isinstance(x, dict) and len(x) == 1 and set(x) <= {"dec", "date", "datetime"}:
                return decode_value(x)
            return x if isinstance(x, str) else int(x)

        def key(v: Any) -> RangeKey | None:
            return None if v is None else tuple(value(x) for x in v)
        try:
            gaps = tuple((tuple(value(x) for x in a), tuple(value(x) for x in b)) for a, b in d.get("gaps") or ())
            return cls(tuple(str(c) for c in d["key_columns"]), key(d.get("start")), key(d.get("end")), gaps,
                       tuple(str(c) for c in d.get("utc") or ()),
                       tuple(tuple(value(x) for x in k) for k in d.get("keys") or ()),
                       None if d.get("held") is None else tuple(tuple(value(x) for x in k) for k in d["held"]))
        except (ValueError, TypeError, KeyError) as e:
            raise ConfigError(f"key range {d!r} is not one this version reads: {e}") from e


# delta-rs writes a DECIMAL(20, 0) column's file statistics through a double: exact below 2^53 only (a file of
# keys 2^60 + 1 to 2^60 + 4 says min = max = 2^60; above 2^63 - 1 they stop there). Rounding keeps the order,
# so a bound below 2^53 compares with every rounded statistic as with its value; one at or above may skip a
# file that holds keys of the range, or drop one whole that holds keys outside it.
EXACT_LIMIT = 2**53


def range_problem(columns: Sequence[Any], key: Sequence[str], bounds: KeyRange | None = None) -> str | None:
    """Why a table whose chunk key is ``key`` (``columns``: its :class:`~mysql_cdc.schema.ColumnInfo` s) takes
    no key range (or not ``bounds``), or ``None``: the key must be integer, binary, DECIMAL, DATE, DATETIME,
    TIMESTAMP or string (CHAR, VARCHAR) columns, NOT NULL, whose lake column is an integer
    (TINYINT(1) may be a BOOLEAN), bytes, a DECIMAL, a date, a time or a string too.
    delta-rs keeps a Delta file's statistics of a DECIMAL as doubles: exact up to 15 digits
    (measured: a DECIMAL(20, 2) key's row was not deleted by its own value), so a DECIMAL of more digits takes no
    range, and BIGINT UNSIGNED (a lake's DECIMAL(20, 0)) takes bounds below 2^53 (:data:`EXACT_LIMIT`) only (a
    delete of such a value would skip files of keys in the range, or drop files of keys outside it); and each
    bound's value is of its column's kind (:func:`kind_problem`) and within its lake column's values.

    >>> from mysql_cdc.schema import ColumnInfo as C
    >>> range_problem([C("id", "int", "int", False)], ["id"]) is None
    True
    >>> u = [C("id", "bigint", "bigint unsigned", False)]
    >>> range_problem(u, ["id"]), range_problem(u, ["id"], KeyRange(("id",), (5,), (2**53 - 1,)))
    (None, None)
    >>> range_problem(u, ["id"], KeyRange(("id",), (2**53,)))
    "its bound 9007199254740992 of id (bigint unsigned) names keys at or above 2^53, where the Delta files' \
statistics end"
    >>> two = [C("a", "int", "int", False), C("b", "int", "int unsigned", False)]  # b's lake column a BIGINT
    >>> range_problem(two, ["a", "b"], KeyRange(("a", "b"), None, (3, 0))) is None  # written b <= -1
    True
    >>> range_problem([C("id", "int", "int", True)], ["id"])
    'its chunk key id is not of integer, binary, DECIMAL (up to 15 digits), DATE, DATETIME, TIMESTAMP or string \
columns, NOT NULL (id is NULL-able int)'
    >>> range_problem([C("p", "decimal", "decimal(20,2)", False, numeric_precision=20, numeric_scale=2)], ["p"])
    'its chunk key p is not of integer, binary, DECIMAL (up to 15 digits), DATE, DATETIME, TIMESTAMP or string \
columns, NOT NULL (p is decimal(20,2))'
    >>> s = [C("code", "varchar", "varchar(8)", False, charset="utf8mb4")]
    >>> range_problem(s, ["code"]), range_problem(s, ["code"], KeyRange.of_keys(("code",), [("a",)]))
    (None, None)
    >>> range_problem(s, ["code"], KeyRange(("code",), ("a",), ("m",))) is None
    True
    >>> su = [*s, C("n", "bigint", "bigint unsigned", False)]  # the keys a range holds, found by the server
    >>> range_problem(su, ["code", "n"], KeyRange(("code", "n"), ("a", 0), ("m", 0), held=(("b", 2**60),)))
    "its bound 1152921504606846976 of n (bigint unsigned) names keys at or above 2^53, where the Delta files' \
statistics end"
    >>> range_problem(s, ["code"], KeyRange(("code",), keys=((7,),)))
    'its bound 7 of code (varchar(8)) is not text'
    >>> d = [C("p", "decimal", "decimal(5,2)", False, numeric_precision=5, numeric_scale=2)]
    >>> range_problem(d, ["p"], KeyRange(("p",), (Decimal("-999.99"),), (Decimal("999.99"),))) is None
    True
    >>> range_problem(d, ["p"], KeyRange(("p",), (Decimal("1000.00"),)))
    'its bound 1000.00 of p (decimal(5,2)) is outside the values its bounds may take there, -999.99 to 999.99'
    >>> b = [C("id", "binary", "binary(16)", False)]
    >>> range_problem(b, ["id"], KeyRange(("id",), (b"\\x11",))), range_problem(b, ["id"], KeyRange(("id",), (5,)))
    (None, 'its bound 5 of id (binary(16)) is not bytes: write it as 0x and hex digits, e.g. 0x11ee')
    """
    by = {c.name: c for c in columns}
    if not key or not all(k in by for k in key):
        return "it has no chunk key"
    bad = [by[k] for k in key if by[k].nullable or _kind(by[k]) is None or by[k].column_type.startswith("tinyint(1)")]
    if bad:
        shown = ", ".join(f"{c.name} is {'NULL-able ' if c.nullable else ''}{c.column_type}" for c in bad)
        return (f"its chunk key {', '.join(key)} is not of integer, binary, DECIMAL (up to 15 digits), DATE, "
                f"DATETIME, TIMESTAMP or string columns, NOT NULL ({shown})")
    if bounds is not None:
        # a list's keys, or a range's bounds and the keys held in it (the server's: their numbers are written in
        # the mirror's delete as a list's are)
        edges: list[tuple[RangeKey | None, bool]] = [(k, False) for k in bounds.keys] or [
            (b, is_end) for span in bounds.spans() for b, is_end in zip(span, (False, True))] + [
            (k, False) for k in bounds.held or ()]
        for b, is_end in edges:
            for i, (name, v) in enumerate(zip(bounds.key_columns, b or ())):
                c = by.get(name)
                if c is None:
                    continue
                if (why := kind_problem(c, v)) is not None:
                    return why
                if not isinstance(v, (int, Decimal)):
                    continue
                # the value as the predicate writes it: an end's last one as ``<= v`` less one unit
                written = v - _unit(v) if is_end and i == len(b or ()) - 1 else v
                low, high = _lake_values(c)
                if c.data_type == "bigint" and "unsigned" in c.column_type and written >= EXACT_LIMIT:
                    return (f"its bound {v} of {name} ({c.column_type}) names keys at or above 2^53, where the Delta "
                            "files' statistics end")
                if not low <= written <= high:
                    shift = v - written
                    return (f"its bound {v} of {name} ({c.column_type}) is outside the values its bounds may take "
                            f"there, {low + shift} to {high + shift}")
    return None


def check_keys(key_columns: Sequence[str], named: Sequence[tuple[str, RangeKey | None]]) -> None:
    """One error unless each key (``None``: an open end) has one value per column of the key (an integer, bytes,
    a finite Decimal, a date or a naive datetime), each column's values of one kind (so that keys compare), said
    with the name given.

    >>> check_keys(("id",), [("key range start", (5,)), ("key range end", (b"\\x01",))])
    Traceback (most recent call last):
    ...
    mysql_cdc.errors.ConfigError: keys over id mix values of kinds: key range end (b'\\x01',) is not of the kinds \
before it, (<class 'int'>,); each column's values are all of one kind
    """
    kinds: tuple[type, ...] | None = None
    for name, k in named:
        if k is None:
            continue
        if len(k) != len(key_columns) or not all(_is_value(v) for v in k):
            raise ConfigError(f"{name} {k!r} must be {len(key_columns)} value(s) (integers, bytes, decimals, dates, "
                              f"datetimes without a zone or strings), one per column of the key "
                              f"({', '.join(key_columns)}) in order")
        these = tuple(type(v) for v in k)
        if kinds is not None and these != kinds:
            raise ConfigError(f"keys over {', '.join(key_columns)} mix values of kinds: {name} {k!r} is not of the "
                              f"kinds before it, {kinds!r}; each column's values are all of one kind")
        kinds = these


_LAKE_BITS = {"TINYINT": 8, "SMALLINT": 16, "INT": 32, "BIGINT": 64}
DECIMAL_DIGITS = 15  # a DECIMAL of at most this many digits is exact as delta-rs's double statistics


def _lake_values(col: Any) -> tuple[Any, Any]:
    """The values an integer or DECIMAL column's lake column holds (a literal outside it is an error in delta-rs,
    or worse): an unsigned column's lake type is the next wider one (BIGINT UNSIGNED's a DECIMAL(20, 0), exact as
    file statistics below 2^53); a DECIMAL(p, s)'s are its own.

    >>> from mysql_cdc.schema import ColumnInfo as C
    >>> _lake_values(C("a", "tinyint", "tinyint(3) unsigned", False)), _lake_values(C("b", "int", "int", False))
    ((-32768, 32767), (-2147483648, 2147483647))
    >>> _lake_values(C("p", "decimal", "decimal(5,2)", False, numeric_precision=5, numeric_scale=2))
    (Decimal('-999.99'), Decimal('999.99'))
    """
    if _kind(col) is Decimal:
        p, sc = col.numeric_precision or 10, col.numeric_scale or 0
        top = Decimal(10**p - 1).scaleb(-sc)
        return -top, top
    lake = spark_type(col)
    if lake not in _LAKE_BITS:  # DECIMAL(20,0)
        return -(EXACT_LIMIT - 1), EXACT_LIMIT - 1
    bits = _LAKE_BITS[lake]
    return -(2 ** (bits - 1)), 2 ** (bits - 1) - 1


_KIND_NAMES: dict[Any, str] = {
    int: "an integer", bytes: "bytes: write it as 0x and hex digits, e.g. 0x11ee", Decimal: "a decimal number",
    dt.date: "a date, e.g. 2024-02-29", dt.datetime: "a date and time without a zone, e.g. 2024-02-29 10:00:00.25",
    str: "text",
    "timestamp": "a date and time, e.g. 2024-02-29 10:00:00.25 (in UTC unless it names its zone: +01:00)"}


def _kind(col: Any) -> type | None:
    """The kind of value a key column's bounds take, or ``None`` when it takes no range."""
    t = str(col.data_type)
    if t in ("binary", "varbinary"):
        return bytes
    if t in ("char", "varchar"):  # its server order is the collation's: a list of keys only
        return str if getattr(col, "charset", None) in TEXT_CHARSETS else None
    if col.is_integral:
        return int
    if t in ("decimal", "numeric"):
        return Decimal if (col.numeric_precision or 10) <= DECIMAL_DIGITS else None
    return {"date": dt.date, "datetime": dt.datetime, "timestamp": dt.datetime}.get(t)


def _is_value(v: Any) -> bool:
    if isinstance(v, str):
        try:
            v.encode("utf-8")  # no lone surrogate (a command-line argument not in UTF-8 reaches Python so)
        except UnicodeEncodeError:
            return False
        return True
    if isinstance(v, dt.datetime):
        return v.tzinfo is None
    if isinstance(v, Decimal):
        return v.is_finite()
    return isinstance(v, (int, bytes, dt.date, str)) and not isinstance(v, bool)


def kind_problem(col: Any, v: Value) -> str | None:
    """Why ``v`` cannot be a bound's value of column ``col`` (bytes for a binary column, a Decimal at most at the
    column's scale for a DECIMAL, a date for a DATE, a datetime for a DATETIME or TIMESTAMP, else an integer).

    >>> from mysql_cdc.schema import ColumnInfo as C
    >>> kind_problem(C("p", "decimal", "decimal(5,2)", False, numeric_precision=5, numeric_scale=2), Decimal("1.255"))
    'its bound 1.255 of p (decimal(5,2)) has more decimals than its scale, 2'
    """
    want = _kind(col)
    if want is None or (type(v) is want and not isinstance(v, bool)):
        scale = col.numeric_scale or 0
        if isinstance(v, Decimal) and v.as_tuple().exponent != -scale:
            if not v.is_finite() or v.scaleb(scale) != v.scaleb(scale).to_integral_value():
                return (f"its bound {shown_value(v)} of {col.name} ({col.column_type}) has more decimals than its "
                        f"scale, {scale}")
            return (f"its bound {shown_value(v)} of {col.name} ({col.column_type}) is not written at its scale, "
                    f"{scale}")
        return None
    return f"its bound {shown_value(v)} of {col.name} ({col.column_type}) is not {_KIND_NAMES[want]}"


def column_value(col: Any, v: Any) -> Value:
    """A key value given for column ``col`` (by a user: its text, or a Python value) as the column's kind, at a
    DECIMAL's scale; a TIMESTAMP's with a zone as UTC (one error naming the value and what it should be).

    >>> from mysql_cdc.schema import ColumnInfo as C
    >>> column_value(C("p", "decimal", "decimal(5,2)", False, numeric_precision=5, numeric_scale=2), "7.5")
    Decimal('7.50')
    >>> column_value(C("at", "timestamp", "timestamp(6)", False), "2024-02-29 10:00:00+01:00")
    datetime.datetime(2024, 2, 29, 9, 0)
    >>> column_value(C("at", "datetime", "datetime(6)", False), "2024-02-29 10:00:00+01:00")
    Traceback (most recent call last):
    ...
    mysql_cdc.errors.ConfigError: key value '2024-02-29 10:00:00+01:00' of at (datetime(6)) has a zone, which a \
DATETIME has not: give it without one
    >>> column_value(C("id", "binary", "binary(2)", False), "11ee")
    Traceback (most recent call last):
    ...
    mysql_cdc.errors.ConfigError: key value '11ee' of id (binary(2)) is not bytes: write it as 0x and hex digits, \
e.g. 0x11ee
    >>> column_value(C("p", "decimal", "decimal(5,2)", False, numeric_precision=5, numeric_scale=2), "1e30")
    Decimal('1000000000000000000000000000000.00')
    >>> column_value(C("day", "date", "date", False), "2024-02-30")
    Traceback (most recent call last):
    ...
    mysql_cdc.errors.ConfigError: key value '2024-02-30' of day (date) is not a date, e.g. 2024-02-29
    """
    want = _kind(col)
    if want is None:
        return v  # the table takes no range: range_problem says so
    given = v
    not_one = (f"key value {given!r} of {col.name} ({col.column_type}) is not "
               f"{_KIND_NAMES['timestamp' if col.data_type == 'timestamp' else want]}")
    try:
        if isinstance(v, bytearray):
            v = bytes(v)
        if want is bytes and isinstance(v, str):
            raise ValueError("not 0x and hex digits")
        if want is str and not isinstance(v, str):
            raise ValueError("not text")
        if want is str:
            v.encode("utf-8")  # a lone surrogate (an argument not in UTF-8) is no text a server holds
        if want is int and isinstance(v, str):
            v = int(v.strip())
        elif want is int and isinstance(v, Decimal) and v == v.to_integral_value():
            v = int(v)
        elif want is Decimal and isinstance(v, (str, int)) and not isinstance(v, bool):
            v = Decimal(v.strip() if isinstance(v, str) else v)
        elif want is dt.date and isinstance(v, str):
            v = dt.date.fromisoformat(v.strip())
        elif want is dt.datetime and isinstance(v, str):
            if re.search(r"\.\d{7}", v):  # Python would cut it to microseconds, and name another key
                raise ValueError("finer than a microsecond")
            v = dt.datetime.fromisoformat(v.strip())
        if want is Decimal and isinstance(v, Decimal):
            if not v.is_finite():
                raise ValueError("not finite")
            with localcontext() as ctx:  # exact, whatever its size: range_problem then says it is too large
                ctx.prec = max(ctx.prec, v.adjusted() + (col.numeric_scale or 0) + 3)
                q = v.quantize(Decimal(1).scaleb(-(col.numeric_scale or 0)))
            v = q if q == v else v  # at its scale, unless it has more decimals (kind_problem says so)
    except (ValueError, InvalidOperation) as e:  # UnicodeEncodeError too
        raise ConfigError(not_one) from e
    if want is dt.datetime and isinstance(v, dt.datetime) and v.tzinfo is not None:
        if col.data_type != "timestamp":
            raise ConfigError(f"key value {given!r} of {col.name} ({col.column_type}) has a zone, which a DATETIME "
                              "has not: give it without one")
        try:
            v = v.astimezone(dt.timezone.utc).replace(tzinfo=None)
        except OverflowError as e:  # a time of year 1 ahead of UTC
            raise ConfigError(not_one) from e
    return v


def _unit(v: int | Decimal) -> int | Decimal:
    """One unit of a number's last digit: 1 for an integer, ``0.01`` for ``Decimal('7.50')``."""
    return Decimal(1).scaleb(v.as_tuple().exponent) if isinstance(v, Decimal) else 1  # type: ignore[arg-type]


def _after(v: Value) -> Value:
    """The key value just after ``v``: the next integer, or the next at a DECIMAL's scale; for bytes, ``v`` and
    one zero byte (no bytes between); the next day; the next microsecond."""
    if isinstance(v, bytes):
        return v + b"\x00"
    if isinstance(v, (int, Decimal)):
        return v + _unit(v)
    if isinstance(v, str):  # of_keys makes a list of keys of them: no string lies just after another
        raise ConfigError(f"no key lies just after the string {v!r}")
    try:
        return v + (dt.timedelta(microseconds=1) if isinstance(v, dt.datetime) else dt.timedelta(days=1))
    except OverflowError as e:
        raise ConfigError(f"key {shown_value(v)} is the largest its type holds: give it as a range from it, open at "
                          "the end (--key-from alone)") from e


def _gap_size(a: RangeKey, b: RangeKey) -> tuple[int, ...]:
    """How far apart two keys are, column after column, to join the nearest spans first (bytes: the earlier
    they differ and the more at that byte, the farther; a missing byte below every byte).

    >>> _gap_size((b"\\x01\\x02", 5), (b"\\x01\\x09", 0)) > _gap_size((b"\\x01\\x02\\x00", 0), (b"\\x01\\x02\\xff", 9))
    True
    """
    def far(x: Value, y: Value) -> Any:
        if not isinstance(x, bytes) or not isinstance(y, bytes):
            return y - x  # type: ignore[operator]
        i = next((j for j, (p, q) in enumerate(zip(x, y)) if p != q), min(len(x), len(y)))
        return (-i, (y[i] if i < len(y) else -1) - (x[i] if i < len(x) else -1))
    return tuple(far(x, y) for x, y in zip(a, b))


def shown_value(v: Value) -> str:
    """A key value for lines a user reads, as ``--key`` takes it: ``0x11ee``, ``2024-02-29 10:00:00``, ``9.50``; a
    string as Python writes it, in quotes (``--key`` takes the text it stands for)."""
    if isinstance(v, str):
        return repr(v)
    if isinstance(v, bytes):
        return "0x" + v.hex()
    if isinstance(v, dt.datetime):
        return v.isoformat(sep=" ")
    return format(v, "f") if isinstance(v, Decimal) else str(v)


def shown_key(k: RangeKey, utc: Sequence[bool] = ()) -> str:
    """A key for lines a user reads: ``7``, ``0x11ee``, ``(3, -4)``; a value whose ``utc`` is true (a TIMESTAMP's)
    marked ``Z``: ``2024-02-29 10:00:00Z``."""
    parts = [shown_value(v) + ("Z" if i < len(utc) and utc[i] else "") for i, v in enumerate(k)]
    return parts[0] if len(parts) == 1 else f"({', '.join(parts)})"


def _literal(v: Value, utc: bool = False) -> str:
    """SQL literal of a key value (MySQL, Spark SQL, DataFusion and SQLite read each alike, a date's and a time's
    text as the column's type; a TIMESTAMP's ends in ``Z``, or Spark would read it in its session's zone).

    >>> _literal(Decimal("-0.50")), _literal(dt.datetime(2024, 2, 29, 10), utc=True), _literal(dt.date(2024, 2, 29))
    ('-0.50', "'2024-02-29T10:00:00.000000Z'", "'2024-02-29'")

    A string is its UTF-8 bytes made text (Spark SQL and DataFusion read it alike; no quote, backslash or escape
    rule of either can change it):

    >>> _literal("it's \\\\ é")
    "CAST(X'69742773205c20c3a9' AS STRING)"
    """
    if isinstance(v, str):
        return f"CAST(X'{v.encode('utf-8').hex()}' AS STRING)"
    if isinstance(v, bytes):
        return f"X'{v.hex()}'"
    if isinstance(v, dt.datetime):
        return f"'{v.isoformat(timespec='microseconds')}{'Z' if utc else ''}'"
    if isinstance(v, dt.date):
        return f"'{v.isoformat()}'"
    return format(v, "f") if isinstance(v, Decimal) else str(int(v))


def listed(cols: Sequence[str], keys: Sequence[RangeKey], quote: Callable[[str], str], utc: Collection[str] = ()
           ) -> str:
    """SQL text that holds for exactly ``keys`` (each value as written: :func:`_literal`): one column's values
    in one ``IN`` list (``=`` for one), the keys grouped by their other columns' values, one disjunction per
    group; the column is the one that makes the fewest groups (the last of those; a date or time column's values
    each a group of their own). None: ``FALSE``. More than
    :data:`MAX_GROUPS` groups: a :class:`ConfigError` (one IN list plans at once in delta-rs, a chain of
    disjunctions does not).

    >>> listed(("code", "n"), [("a", 1), ("b", 1), ("c", 2)], str)
    "(n = 1 AND code IN (CAST(X'61' AS STRING), CAST(X'62' AS STRING))) OR (n = 2 AND code = CAST(X'63' AS STRING))"
    >>> listed(("code",), [("b",), ("a",)], str), listed(("code",), [], str)
    ("code IN (CAST(X'61' AS STRING), CAST(X'62' AS STRING))", 'FALSE')

    A date or a time is never in an IN list (Spark without ANSI compares the list's text with the column's):

    >>> listed(("code", "at"), [("a", dt.datetime(2024, 2, 29, 10)), ("a", dt.datetime(2024, 2, 29, 11))], str,
    ...        utc=("at",))
    "(code = CAST(X'61' AS STRING) AND at = '2024-02-29T10:00:00.000000Z') OR (code = CAST(X'61' AS STRING) AND \
at = '2024-02-29T11:00:00.000000Z')"
    """
    if not keys:
        return "FALSE"
    keys = sorted(set(map(tuple, keys)))  # each column's values of one kind (check_keys)
    n = len(cols)

    def groups(j: int) -> dict[RangeKey, list[Value]]:
        out: dict[RangeKey, list[Value]] = {}
        for k in keys:
            # a date's or a time's text in an IN list is compared as text by Spark without ANSI (CAST(at AS
            # STRING) IN ('...Z')): such a column is compared by = alone, one group per value
            out.setdefault(k[:j] + k[j + 1:] if not isinstance(k[j], dt.date) else k, []).append(k[j])
        return out
    j = min(range(n), key=lambda i: (len(groups(i)), -i))
    by = groups(j)
    if len(by) > MAX_GROUPS:
        raise ConfigError(f"{len(keys):,} keys over {', '.join(cols)} make {len(by):,} groups of keys a mirror's "
                          f"delete names; it takes at most {MAX_GROUPS}")
    others = [c for i, c in enumerate(cols) if i != j]
    parts = []
    for rest, values in by.items():
        rest = rest[:j] + rest[j + 1:] if len(rest) == n else rest  # a key whole: its date or time by = below
        eq = [f"{quote(c)} = {_literal(v, c in utc)}" for c, v in zip(others, rest)]
        texts = [_literal(v, cols[j] in utc) for v in values]
        within = f"{quote(cols[j])} = {texts[0]}" if len(texts) == 1 else f"{quote(cols[j])} IN ({', '.join(texts)})"
        parts.append(" AND ".join([*eq, within]))
    return parts[0] if len(parts) == 1 and n == 1 else " OR ".join(f"({p})" for p in parts)


def reset_range(position: str | None) -> KeyRange | None:
    """The key range a ``-R`` row's ``__position`` names (``None`` for a ``T`` row's: the whole table).

    >>> reset_range('{"file":"b.1","pos":4,"range":{"key_columns":["id"],"start":[3],"end":null}}').text()
    'id in [3, +inf)'
    >>> reset_range('{"file":"b.1","pos":4}') is None
    True
    """
    d = json.loads(position) if position else {}
    return KeyRange.from_dict(d["range"]) if isinstance(d, dict) and d.get("range") else None


def parse_bound(text: str | None, key_columns: Sequence[str], text_columns: Collection[str] = ()
                ) -> tuple[Value | str, ...] | None:
    """A bound or key as a user writes it: values separated by commas, one per key column in order, each an
    integer, ``0x`` and hex digits (a binary column), or text the column's type reads (:func:`column_value`: a
    decimal number, a date, a date and time); a string column's (``text_columns``) as written, less the spaces
    around it, or the whole text, spaces and commas too, for a key of that one column.

    >>> parse_bound("10", ["id"]), parse_bound(" 3, -4 ", ["a", "b"]), parse_bound(None, ["id"])
    ((10,), (3, -4), None)
    >>> parse_bound("0x11EE, 7", ["uuid", "n"]), parse_bound("2024-02-29 10:00, 9.5", ["at", "p"])
    ((b'\\x11\\xee', 7), ('2024-02-29 10:00', '9.5'))
    >>> parse_bound(" 007, x ", ["code"], ["code"]), parse_bound("007, 3", ["code", "n"], ["code"])
    ((' 007, x ',), ('007', 3))
    """
    if text is None:
        return None
    if len(key_columns) == 1 and key_columns[0] in text_columns:
        return (text,)

    def value(p: str) -> Value | str:
        p = p.strip()
        if p[:2].lower() == "0x":
            return bytes.fromhex(p[2:])
        return int(p) if re.fullmatch(r"[+-]?\d+", p) else p
    try:
        out = tuple(p.strip() if c in text_columns else value(p)
                    for p, c in zip(text.split(","), [*key_columns, *[""] * text.count(",")]))
    except ValueError as e:
        raise ConfigError(f"key bound {text!r} is not values (integers, 0x and hex digits for a binary column, a "
                          f"decimal number, a date or a date and time) separated by commas, one per key column "
                          f"({', '.join(key_columns)})") from e
    if len(out) != len(key_columns):
        raise ConfigError(f"key bound {text!r} has {len(out)} values but the key has {len(key_columns)} columns "
                          f"({', '.join(key_columns)})")
    return out


def _bound(cols: Sequence[str], bound: RangeKey, op: str, quote: Callable[[str], str], utc: Sequence[str] = ()
           ) -> str:
    """Keys compared with a bound, column by column: ``>`` for a start (at or above), ``<`` for an end; an
    integer or DECIMAL end's last value written ``<= v`` less one unit (the end just after a column's largest
    value, as a key list's span of it has, is no value of its type: delta-rs refuses the literal)."""
    ors = []
    for i, v in enumerate(bound):
        eq = [f"{quote(cols[j])} = {_literal(bound[j], cols[j] in utc)}" for j in range(i)]
        last = i == len(bound) - 1
        cmp, w = ((">=", v) if op == ">" and last else
                  ("<=", v - _unit(v)) if last and isinstance(v, (int, Decimal)) else (op, v))
        ors.append("(" + " AND ".join([*eq, f"{quote(cols[i])} {cmp} {_literal(w, cols[i] in utc)}"]) + ")")
    return "(" + " OR ".join(ors) + ")"
