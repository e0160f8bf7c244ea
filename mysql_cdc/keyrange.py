"""A key range of one table, read again on demand (``mysql-cdc resnapshot --key-from/--key-to``, ``verify
--repair``): half-open ``[start, end)`` over the table's chunk key, either end open (``None``), compared as the
server compares the key: column after column (pure; no server, no Spark).

Only chunk keys of integer columns, NOT NULL, take a range: their order is the same in MySQL, in Spark and in
delta-rs, so the rows a mirror deletes for the range (:meth:`KeyRange.predicate`) are exactly those the source
reads again. A key of strings (ordered by a collation the lake does not know), of DECIMAL or temporal values
(literals typed per engine) is snapshotted again whole. A BIGINT UNSIGNED column (a DECIMAL(20, 0) in a lake)
takes bounds below 2^53 only (:func:`range_problem`).

Worked example: over ``(a, b)`` the range ``[(1, 5), (3, 0))`` holds every key from ``(1, 5)`` up to, not
including, ``(3, 0)``; its SQL text says so column by column, each bound one disjunction:

>>> r = KeyRange(("a", "b"), (1, 5), (3, 0))
>>> r.contains((1, 5)), r.contains((2, -9)), r.contains((1, 4)), r.contains((3, 0))
(True, True, False, False)
>>> r.predicate(lambda c: f"`{c}`")
'((`a` > 1) OR (`a` = 1 AND `b` >= 5)) AND ((`a` < 3) OR (`a` = 3 AND `b` < 0))'
>>> KeyRange.from_dict(r.to_dict()) == r, r.to_dict()
(True, {'key_columns': ['a', 'b'], 'start': [1, 5], 'end': [3, 0]})
>>> KeyRange(("id",), None, None).predicate(str)
'TRUE'
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from mysql_cdc.errors import ConfigError

IntKey = tuple[int, ...]


@dataclass(frozen=True)
class KeyRange:
    """``[start, end)`` over ``key_columns``; each bound a whole key (a value per column, as chunk bounds are)."""

    key_columns: tuple[str, ...]
    start: IntKey | None = None
    end: IntKey | None = None

    def __post_init__(self) -> None:
        if not self.key_columns:
            raise ConfigError("a key range needs the key's columns: a table without a key is snapshotted again whole")
        for name, b in (("start", self.start), ("end", self.end)):
            if b is None:
                continue
            if len(b) != len(self.key_columns) or not all(isinstance(v, int) and not isinstance(v, bool) for v in b):
                raise ConfigError(f"key range {name} {b!r} must be {len(self.key_columns)} integer(s), one per "
                                  f"column of the key ({', '.join(self.key_columns)}) in order")
        if self.start is not None and self.end is not None and not self.start < self.end:
            raise ConfigError(f"key range start {self.start!r} is not below its end {self.end!r}: nothing to read")

    def contains(self, key: Sequence[int]) -> bool:
        """Whether a full key lies in the range."""
        k = tuple(key)
        return (self.start is None or k >= self.start) and (self.end is None or k < self.end)

    def predicate(self, quote: Callable[[str], str]) -> str:
        """SQL text that holds for exactly the keys in the range (integer literals; ``quote`` makes a column's
        name an identifier of the engine's dialect)."""
        parts = []
        if self.start is not None:
            parts.append(_bound(self.key_columns, self.start, ">", quote))
        if self.end is not None:
            parts.append(_bound(self.key_columns, self.end, "<", quote))
        return " AND ".join(parts) or "TRUE"

    def hull(self, other: KeyRange) -> KeyRange:
        """The smallest range holding both (requests for one table are taken together).

        >>> KeyRange(("id",), (5,), (9,)).hull(KeyRange(("id",), (1,), (3,)))
        KeyRange(key_columns=('id',), start=(1,), end=(9,))
        >>> KeyRange(("id",), (5,), (9,)).hull(KeyRange(("id",), None, (3,))).start is None
        True
        """
        if other.key_columns != self.key_columns:
            raise ConfigError(f"key ranges over {self.key_columns!r} and {other.key_columns!r} cannot be joined")
        start = None if self.start is None or other.start is None else min(self.start, other.start)
        end = None if self.end is None or other.end is None else max(self.end, other.end)
        return KeyRange(self.key_columns, start, end)

    def text(self) -> str:
        """For lines a user reads.

        >>> KeyRange(("id",), (10,), None).text()
        'id in [10, +inf)'
        """
        def show(b: IntKey | None, inf: str) -> str:
            return inf if b is None else ", ".join(map(str, b)) if len(b) == 1 else f"({', '.join(map(str, b))})"
        cols = self.key_columns[0] if len(self.key_columns) == 1 else f"({', '.join(self.key_columns)})"
        return f"{cols} in [{show(self.start, '-inf')}, {show(self.end, '+inf')})"

    def to_dict(self) -> dict[str, Any]:
        return {"key_columns": list(self.key_columns), "start": None if self.start is None else list(self.start),
                "end": None if self.end is None else list(self.end)}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> KeyRange:
        def key(v: Any) -> IntKey | None:
            return None if v is None else tuple(int(x) for x in v)
        return cls(tuple(str(c) for c in d["key_columns"]), key(d.get("start")), key(d.get("end")))


# delta-rs writes a DECIMAL(20, 0) column's file statistics through a double: exact below 2^53 only (a file of
# keys 2^60 + 1 to 2^60 + 4 says min = max = 2^60; above 2^63 - 1 they stop there). Rounding keeps the order,
# so a bound below 2^53 compares with every rounded statistic as with its value; one at or above may skip a
# file that holds keys of the range, or drop one whole that holds keys outside it.
EXACT_LIMIT = 2**53


def range_problem(columns: Sequence[Any], key: Sequence[str], bounds: KeyRange | None = None) -> str | None:
    """Why a table whose chunk key is ``key`` (``columns``: its :class:`~mysql_cdc.schema.ColumnInfo` s) takes
    no key range (or not ``bounds``), or ``None``: the key must be integer columns, NOT NULL, whose lake column
    is an integer too (TINYINT(1) may be a BOOLEAN), or BIGINT UNSIGNED, whose lake column is a DECIMAL(20, 0):
    delta-rs keeps a Delta file's statistics of it as doubles, exact below 2^53 (:data:`EXACT_LIMIT`) only, so
    a range may not name a value at or above that in such a column (a delete of it would skip files of keys
    in the range, or drop files of keys outside it).

    >>> from mysql_cdc.schema import ColumnInfo as C
    >>> range_problem([C("id", "int", "int", False)], ["id"]) is None
    True
    >>> u = [C("id", "bigint", "bigint unsigned", False)]
    >>> range_problem(u, ["id"]), range_problem(u, ["id"], KeyRange(("id",), (5,), (2**53 - 1,)))
    (None, None)
    >>> range_problem(u, ["id"], KeyRange(("id",), (2**53,)))
    "its bound 9007199254740992 of id (bigint unsigned) is not below 2^53, where the Delta files' statistics end"
    >>> range_problem([C("id", "int", "int", True)], ["id"])
    'its chunk key id is not of integer columns, NOT NULL (id is NULL-able int)'
    """
    by = {c.name: c for c in columns}
    if not key or not all(k in by for k in key):
        return "it has no chunk key"
    bad = [by[k] for k in key if by[k].nullable or not by[k].is_integral or by[k].column_type.startswith("tinyint(1)")]
    if bad:
        shown = ", ".join(f"{c.name} is {'NULL-able ' if c.nullable else ''}{c.column_type}" for c in bad)
        return f"its chunk key {', '.join(key)} is not of integer columns, NOT NULL ({shown})"
    if bounds is not None:
        for b in (bounds.start, bounds.end):
            for name, v in zip(bounds.key_columns, b or ()):
                c = by.get(name)
                if c is not None and c.data_type == "bigint" and "unsigned" in c.column_type and v >= EXACT_LIMIT:
                    return (f"its bound {v} of {name} ({c.column_type}) is not below 2^53, where the Delta files' "
                            "statistics end")
    return None


def reset_range(position: str | None) -> KeyRange | None:
    """The key range a ``-R`` row's ``__position`` names (``None`` for a ``T`` row's: the whole table).

    >>> reset_range('{"file":"b.1","pos":4,"range":{"key_columns":["id"],"start":[3],"end":null}}').text()
    'id in [3, +inf)'
    >>> reset_range('{"file":"b.1","pos":4}') is None
    True
    """
    d = json.loads(position) if position else {}
    return KeyRange.from_dict(d["range"]) if isinstance(d, dict) and d.get("range") else None


def parse_bound(text: str | None, key_columns: Sequence[str]) -> IntKey | None:
    """A bound as a user writes it: integers separated by commas, one per key column in order.

    >>> parse_bound("10", ["id"]), parse_bound(" 3, -4 ", ["a", "b"]), parse_bound(None, ["id"])
    ((10,), (3, -4), None)
    """
    if text is None:
        return None
    try:
        out = tuple(int(p) for p in text.split(","))
    except ValueError as e:
        raise ConfigError(f"key bound {text!r} is not integers separated by commas, one per key column "
                          f"({', '.join(key_columns)})") from e
    if len(out) != len(key_columns):
        raise ConfigError(f"key bound {text!r} has {len(out)} values but the key has {len(key_columns)} columns "
                          f"({', '.join(key_columns)})")
    return out


def _bound(cols: Sequence[str], bound: IntKey, op: str, quote: Callable[[str], str]) -> str:
    """Keys compared with a bound, column by column: ``>`` for a start (at or above), ``<`` for an end."""
    ors = []
    for i, v in enumerate(bound):
        eq = [f"{quote(cols[j])} = {bound[j]}" for j in range(i)]
        last = i == len(bound) - 1
        cmp = (">=" if op == ">" else "<") if last else op
        ors.append("(" + " AND ".join([*eq, f"{quote(cols[i])} {cmp} {v}"]) + ")")
    return "(" + " OR ".join(ors) + ")"
