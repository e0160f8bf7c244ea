"""A key range of one table, read again on demand (``mysql-cdc resnapshot --key-from/--key-to/--key``, ``verify
--repair``): half-open ``[start, end)`` over the table's chunk key, either end open (``None``), compared as the
server compares the key: column after column, less the ``gaps`` in it, so that a list of keys is one range too
(a key ``k`` is the span from it to the key just after it) (pure; no server, no Spark).

Only chunk keys of integer and binary columns (BINARY, VARBINARY: a UUID kept as ``BINARY(16)``), NOT NULL,
take a range: their order is the same in MySQL, in Spark, in delta-rs and in Iceberg (numbers; bytes compared
unsigned, one after the other, a prefix first), so the rows a mirror deletes for the range
(:meth:`KeyRange.predicate`: integer and ``X'..'`` literals) are exactly those the source reads again. A key of
strings (ordered by a collation the lake does not know), of DECIMAL or temporal values (literals typed per
engine) is snapshotted again whole. A BIGINT UNSIGNED column (a DECIMAL(20, 0) in a lake) takes bounds below
2^53 only (:func:`range_problem`). The key just after a binary key ``k`` is ``k + b"\\x00"``.

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
import heapq
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from mysql_cdc.errors import ConfigError
from mysql_cdc.types import spark_type

Value = int | bytes  # an integer column's, or a binary column's
RangeKey = tuple[Value, ...]
Span = tuple[RangeKey | None, RangeKey | None]
# a request names at most this many spans of a table (a longer list of keys is joined across its smallest gaps:
# more rows are read again, the same keys among them), so that a mirror's delete is one predicate of bounded size
MAX_SPANS = 64


@dataclass(frozen=True)
class KeyRange:
    """``[start, end)`` over ``key_columns``; each bound a whole key (a value per column, as chunk bounds are)."""

    key_columns: tuple[str, ...]
    start: RangeKey | None = None
    end: RangeKey | None = None
    gaps: tuple[tuple[RangeKey, RangeKey], ...] = ()  # half-open, inside [start, end), in order: keys not in the range

    def __post_init__(self) -> None:
        if not self.key_columns:
            raise ConfigError("a key range needs the key's columns: a table without a key is snapshotted again whole")
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
    def of_spans(cls, key_columns: Sequence[str], spans: Sequence[Span]) -> KeyRange:
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
        return cls(cols, merged[0][0], merged[-1][1], gaps)

    @classmethod
    def of_keys(cls, key_columns: Sequence[str], keys: Sequence[Sequence[Value]]) -> KeyRange:
        """Exactly the keys given (each the span from it to the key just after it; keys next to each other join).

        >>> KeyRange.of_keys(("a", "b"), [(1, 5), (1, 6), (2, 0)]).text()
        '(a, b) in [(1, 5), (1, 7)), [(2, 0), (2, 1))'
        >>> KeyRange.of_keys(("uuid",), [(bytes.fromhex("11ee"),)]).predicate(str)
        "((uuid >= X'11ee')) AND ((uuid < X'11ee00'))"
        """
        return cls.of_spans(key_columns, [(tuple(k), (*k[:-1], _after(k[-1]))) for k in map(tuple, keys)])

    def spans(self) -> list[Span]:
        """The range's half-open spans in key order: ``[start, gap start)``, ... ``[last gap end, end)``."""
        edges: list[Any] = [self.start, *(v for g in self.gaps for v in g), self.end]
        return [(edges[i], edges[i + 1]) for i in range(0, len(edges), 2)]

    def contains(self, key: Sequence[Value]) -> bool:
        """Whether a full key lies in the range."""
        k = tuple(key)
        return ((self.start is None or k >= self.start) and (self.end is None or k < self.end)
                and not any(a <= k < b for a, b in self.gaps))

    def predicate(self, quote: Callable[[str], str]) -> str:
        """SQL text that holds for exactly the keys in the range (integer and ``X'..'`` literals, an integer
        end's last value written ``<= v - 1``; ``quote`` makes a column's name an identifier of the engine's
        dialect): the span's bounds, or one disjunction per span."""
        def span(start: RangeKey | None, end: RangeKey | None) -> str:
            parts = []
            if start is not None:
                parts.append(_bound(self.key_columns, start, ">", quote))
            if end is not None:
                parts.append(_bound(self.key_columns, end, "<", quote))
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
        KeyRange(key_columns=('id',), start=None, end=(9,), gaps=())
        """
        if other.key_columns != self.key_columns:
            raise ConfigError(f"key ranges over {self.key_columns!r} and {other.key_columns!r} cannot be joined")
        return KeyRange.of_spans(self.key_columns, [*self.spans(), *other.spans()])

    def text(self) -> str:
        """For lines a user reads.

        >>> KeyRange(("id",), (10,), None).text()
        'id in [10, +inf)'
        """
        def show(b: RangeKey | None, inf: str) -> str:
            return inf if b is None else shown_key(b)
        cols = self.key_columns[0] if len(self.key_columns) == 1 else f"({', '.join(self.key_columns)})"
        return f"{cols} in " + ", ".join(f"[{show(a, '-inf')}, {show(b, '+inf')})" for a, b in self.spans())

    def to_dict(self) -> dict[str, Any]:
        """The range as state files and ``-R`` rows keep it (``gaps`` only when it has some: a range without
        gaps is written as before they were known)."""
        def items(k: RangeKey) -> list[Any]:  # an integer as a JSON number (as ever), bytes as base64
            return [{"bin": base64.b64encode(v).decode("ascii")} if isinstance(v, bytes) else v for v in k]
        out: dict[str, Any] = {"key_columns": list(self.key_columns),
                               "start": None if self.start is None else items(self.start),
                               "end": None if self.end is None else items(self.end)}
        if self.gaps:
            out["gaps"] = [[items(a), items(b)] for a, b in self.gaps]
        return out

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> KeyRange:
        def value(x: Any) -> Value:
            if isinstance(x, dict) and set(x) == {"bin"}:
                return base64.b64decode(str(x["bin"]), validate=True)
            return int(x)

        def key(v: Any) -> RangeKey | None:
            return None if v is None else tuple(value(x) for x in v)
        gaps = tuple((tuple(value(x) for x in a), tuple(value(x) for x in b)) for a, b in d.get("gaps") or ())
        return cls(tuple(str(c) for c in d["key_columns"]), key(d.get("start")), key(d.get("end")), gaps)


# delta-rs writes a DECIMAL(20, 0) column's file statistics through a double: exact below 2^53 only (a file of
# keys 2^60 + 1 to 2^60 + 4 says min = max = 2^60; above 2^63 - 1 they stop there). Rounding keeps the order,
# so a bound below 2^53 compares with every rounded statistic as with its value; one at or above may skip a
# file that holds keys of the range, or drop one whole that holds keys outside it.
EXACT_LIMIT = 2**53


def range_problem(columns: Sequence[Any], key: Sequence[str], bounds: KeyRange | None = None) -> str | None:
    """Why a table whose chunk key is ``key`` (``columns``: its :class:`~mysql_cdc.schema.ColumnInfo` s) takes
    no key range (or not ``bounds``), or ``None``: the key must be integer or binary columns, NOT NULL, whose lake
    column is an integer (TINYINT(1) may be a BOOLEAN) or bytes too, or BIGINT UNSIGNED, whose lake column is a
    DECIMAL(20, 0): delta-rs keeps a Delta file's statistics of it as doubles, exact below 2^53
    (:data:`EXACT_LIMIT`) only, so a range may not name a value at or above that in such a column (a delete of
    it would skip files of keys in the range, or drop files of keys outside it); and each bound's value is of
    its column's kind (an integer, or bytes).

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
    'its chunk key id is not of integer or binary columns, NOT NULL (id is NULL-able int)'
    >>> b = [C("id", "binary", "binary(16)", False)]
    >>> range_problem(b, ["id"], KeyRange(("id",), (b"\\x11",))), range_problem(b, ["id"], KeyRange(("id",), (5,)))
    (None, 'its bound 5 of id (binary(16)) is not bytes: write it as 0x and hex digits, e.g. 0x11ee')
    """
    by = {c.name: c for c in columns}
    if not key or not all(k in by for k in key):
        return "it has no chunk key"
    bad = [by[k] for k in key if by[k].nullable or not (_binary(by[k]) or by[k].is_integral)
           or by[k].column_type.startswith("tinyint(1)")]
    if bad:
        shown = ", ".join(f"{c.name} is {'NULL-able ' if c.nullable else ''}{c.column_type}" for c in bad)
        return f"its chunk key {', '.join(key)} is not of integer or binary columns, NOT NULL ({shown})"
    if bounds is not None:
        for b, is_end in ((b, is_end) for span in bounds.spans() for b, is_end in zip(span, (False, True))):
            for i, (name, v) in enumerate(zip(bounds.key_columns, b or ())):
                c = by.get(name)
                if c is None:
                    continue
                if (why := kind_problem(c, v)) is not None:
                    return why
                if isinstance(v, bytes):
                    continue
                # the value as the predicate writes it: an end's last one as ``<= v - 1``
                written = v - 1 if is_end and i == len(b or ()) - 1 else v
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
    """One error unless each key (``None``: an open end) has one integer or bytes value per column of the key,
    each column's values of one kind (so that keys compare), said with the name given.

    >>> check_keys(("id",), [("key range start", (5,)), ("key range end", (b"\\x01",))])
    Traceback (most recent call last):
    ...
    mysql_cdc.errors.ConfigError: keys over id mix values of kinds: key range end (b'\\x01',) is not of the kinds \
before it, (<class 'int'>,); each column's values are all integers or all bytes
    """
    kinds: tuple[type, ...] | None = None
    for name, k in named:
        if k is None:
            continue
        if len(k) != len(key_columns) or not all(isinstance(v, (int, bytes)) and not isinstance(v, bool) for v in k):
            raise ConfigError(f"{name} {k!r} must be {len(key_columns)} integer(s) or bytes, one per column of the "
                              f"key ({', '.join(key_columns)}) in order")
        these = tuple(type(v) for v in k)
        if kinds is not None and these != kinds:
            raise ConfigError(f"keys over {', '.join(key_columns)} mix values of kinds: {name} {k!r} is not of the "
                              f"kinds before it, {kinds!r}; each column's values are all integers or all bytes")
        kinds = these


_LAKE_BITS = {"TINYINT": 8, "SMALLINT": 16, "INT": 32, "BIGINT": 64}


def _lake_values(col: Any) -> tuple[int, int]:
    """The values an integer column's lake column holds (a literal outside it is an error in delta-rs, or worse):
    an unsigned column's lake type is the next wider one (BIGINT UNSIGNED's a DECIMAL(20, 0), exact as file
    statistics below 2^53).

    >>> from mysql_cdc.schema import ColumnInfo as C
    >>> _lake_values(C("a", "tinyint", "tinyint(3) unsigned", False)), _lake_values(C("b", "int", "int", False))
    ((-32768, 32767), (-2147483648, 2147483647))
    """
    lake = spark_type(col)
    if lake not in _LAKE_BITS:  # DECIMAL(20,0)
        return -(EXACT_LIMIT - 1), EXACT_LIMIT - 1
    bits = _LAKE_BITS[lake]
    return -(2 ** (bits - 1)), 2 ** (bits - 1) - 1


def kind_problem(col: Any, v: Value) -> str | None:
    """Why ``v`` cannot be a bound's value of column ``col`` (bytes for a binary column, else an integer)."""
    if _binary(col) == isinstance(v, bytes):
        return None
    want = "bytes: write it as 0x and hex digits, e.g. 0x11ee" if _binary(col) else "an integer"
    return f"its bound {_shown(v)} of {col.name} ({col.column_type}) is not {want}"


def _binary(col: Any) -> bool:
    return str(col.data_type) in ("binary", "varbinary")


def _after(v: Value) -> Value:
    """The key value just after ``v``: the next integer; for bytes, ``v`` and one zero byte (no bytes between)."""
    return v + b"\x00" if isinstance(v, bytes) else v + 1


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


def _shown(v: Value) -> str:
    return "0x" + v.hex() if isinstance(v, bytes) else str(v)


def shown_key(k: RangeKey) -> str:
    """A key for lines a user reads: ``7``, ``0x11ee``, ``(3, -4)``."""
    return _shown(k[0]) if len(k) == 1 else f"({', '.join(map(_shown, k))})"


def _literal(v: Value) -> str:
    """SQL literal of a key value (MySQL, Spark SQL, DataFusion and SQLite read both alike)."""
    return f"X'{v.hex()}'" if isinstance(v, bytes) else str(int(v))


def reset_range(position: str | None) -> KeyRange | None:
    """The key range a ``-R`` row's ``__position`` names (``None`` for a ``T`` row's: the whole table).

    >>> reset_range('{"file":"b.1","pos":4,"range":{"key_columns":["id"],"start":[3],"end":null}}').text()
    'id in [3, +inf)'
    >>> reset_range('{"file":"b.1","pos":4}') is None
    True
    """
    d = json.loads(position) if position else {}
    return KeyRange.from_dict(d["range"]) if isinstance(d, dict) and d.get("range") else None


def parse_bound(text: str | None, key_columns: Sequence[str]) -> RangeKey | None:
    """A bound or key as a user writes it: values separated by commas, one per key column in order, each an
    integer or, for a binary column, ``0x`` and hex digits.

    >>> parse_bound("10", ["id"]), parse_bound(" 3, -4 ", ["a", "b"]), parse_bound(None, ["id"])
    ((10,), (3, -4), None)
    >>> parse_bound("0x11EE, 7", ["uuid", "n"])
    (b'\\x11\\xee', 7)
    """
    if text is None:
        return None

    def value(p: str) -> Value:
        p = p.strip()
        return bytes.fromhex(p[2:]) if p[:2].lower() == "0x" else int(p)
    try:
        out = tuple(value(p) for p in text.split(","))
    except ValueError as e:
        raise ConfigError(f"key bound {text!r} is not integers (or 0x and hex digits for a binary column) separated "
                          f"by commas, one per key column ({', '.join(key_columns)})") from e
    if len(out) != len(key_columns):
        raise ConfigError(f"key bound {text!r} has {len(out)} values but the key has {len(key_columns)} columns "
                          f"({', '.join(key_columns)})")
    return out


def _bound(cols: Sequence[str], bound: RangeKey, op: str, quote: Callable[[str], str]) -> str:
    """Keys compared with a bound, column by column: ``>`` for a start (at or above), ``<`` for an end; an
    integer end's last value written ``<= v - 1`` (the end just after a column's largest value, as a key list's
    span of it has, is no value of its type: delta-rs refuses the literal)."""
    ors = []
    for i, v in enumerate(bound):
        eq = [f"{quote(cols[j])} = {_literal(bound[j])}" for j in range(i)]
        last = i == len(bound) - 1
        cmp, w = (">=", v) if op == ">" and last else ("<=", v - 1) if last and isinstance(v, int) else (op, v)
        ors.append("(" + " AND ".join([*eq, f"{quote(cols[i])} {cmp} {_literal(w)}"]) + ")")
    return "(" + " OR ".join(ors) + ")"
