"""Chunks: half-open primary-key ranges that partition a table's key space.

Pure logic, no driver and no pyspark. A chunk covers keys ``start <= key < end`` (tuples compared in the
server's order); ``start=None`` is open below, ``end=None`` open above. The chunks of a table are contiguous:
chunk ``i``'s end is chunk ``i+1``'s start, the first is open below and the last open above, so every key lies
in exactly one chunk (docs/DESIGN.md, contract C1). A bound may end in :data:`AFTER`: the key just after the
values before it (a chunk of one string key, read again on demand).
"""

from __future__ import annotations

import base64
import datetime as dt
import json
import re
import time
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from mysql_cdc.errors import ConfigError, StateError
from mysql_cdc.ids import TableId, split_ident_parts
from mysql_cdc.offsets import BinlogOffset

Key = tuple[Any, ...]


class _After:
    """The last item of a bound "just after" the key before it (:data:`AFTER`): over strings under a collation no
    key lies just after another (``'abc '`` equals ``'abc'``, ``'abc\\x01'`` sorts before it), so a chunk of one
    key ``k`` is ``[k, k AFTER)``, which the SQL text writes ``key >= k AND key <= k`` and the next chunk's start
    ``key > k``. In Python a bound ``(*k, AFTER)`` sorts after ``k`` and before every key above it (a tuple after
    its prefix), so sort keys (:mod:`mysql_cdc.keyorder`) and emit rules compare it unchanged.

    >>> import pickle
    >>> (("a",) < ("a", AFTER) < ("b",)), pickle.loads(pickle.dumps(AFTER)) is AFTER, decode_key(encode_key((7, AFTER)))
    (True, True, (7, AFTER))
    """

    def __repr__(self) -> str:
        return "AFTER"

    def __reduce__(self) -> str:
        return "AFTER"  # one object, also after pickling: found by name in this module


AFTER = _After()


def after(key: Key) -> Key:
    """The bound just after ``key`` (:data:`AFTER`)."""
    return (*key, AFTER)


def is_after(key: Key | None) -> bool:
    """Whether a bound is one just after a key.

    >>> is_after((5, AFTER)), is_after((5,)), is_after(None)
    (True, False, False)
    """
    return bool(key) and key[-1] is AFTER  # type: ignore[index]


@dataclass(frozen=True)
class Chunk:
    """One key range of one table. ``index`` counts from 0 in key order.

    A chunk key whose columns may be NULL (``nullable``) splits only keys without a NULL into ranges; the rows
    whose key has a NULL in any column form one more chunk, the last, with ``nulls`` set and no bounds. A table
    without any key has one chunk with no key columns: every row."""

    table: TableId
    index: int
    key_columns: tuple[str, ...]
    start: Key | None
    end: Key | None
    nullable: bool = False
    nulls: bool = False

    @property
    def id(self) -> str:
        return chunk_id(self.table, self.index)


def chunk_id(table: TableId, index: int) -> str:
    """``db.table:17``.

    >>> chunk_id(TableId("shop", "orders"), 17)
    'shop.orders:17'
    """
    return f"{table}:{index}"


def parse_chunk_id(text: str) -> tuple[TableId, int]:
    """Inverse of :func:`chunk_id`.

    >>> parse_chunk_id("shop.orders:17")
    (TableId(database='shop', table='orders'), 17)
    """
    parts, rest = split_ident_parts(text, 2)
    m = re.fullmatch(r":(\d+)", rest)
    if len(parts) != 2 or not m:
        raise ConfigError(f"bad chunk id {text!r}; expected 'database.table:N'")
    return TableId(parts[0], parts[1]), int(m.group(1))


def even_bounds(min_key: int, max_key: int, approx_rows: int, chunk_size: int,
                lower: float, upper: float) -> list[int] | None:
    """Inner boundaries of evenly sized chunks for an integral key, or ``None`` when the keys are too
    unevenly spread (distribution factor outside ``[lower, upper]``).

    The factor is ``(max - min + 1) / approx_rows``; the step is ``max(int(factor * chunk_size), 1)``.
    Boundaries are ``min + step, min + 2*step, ...`` below ``max``... each becomes the exclusive end of one
    chunk and the start of the next; the first chunk is open below and the last open above.

    >>> even_bounds(1, 100, 100, 25, 0.05, 1000.0)
    [26, 51, 76]
    >>> even_bounds(1, 10**9, 10, 5, 0.05, 1000.0) is None   # factor 1e8: uneven split instead
    True
    """
    if chunk_size < 1:
        raise ConfigError(f"chunk_size must be >= 1, got {chunk_size!r}")
    if approx_rows <= 0:
        return None
    factor = (max_key - min_key + 1) / approx_rows
    if not (lower <= factor <= upper):
        return None
    step = max(int(factor * chunk_size), 1)
    bounds = []
    b = min_key + step
    while b <= max_key:
        bounds.append(b)
        b += step
    return bounds


def chunks_from_bounds(table: TableId, key_columns: tuple[str, ...], bounds: list[Key], nullable: bool = False
                       ) -> list[Chunk]:
    """Contiguous chunks from strictly increasing inner boundaries: ``(-inf, b0), [b0, b1), ..., [bn, +inf)``;
    for a ``nullable`` key, then the chunk of keys with a NULL.

    >>> [(c.start, c.end) for c in chunks_from_bounds(TableId("d", "t"), ("id",), [(10,), (20,)])]
    [(None, (10,)), ((10,), (20,)), ((20,), None)]
    >>> [(c.index, c.start, c.end, c.nulls) for c in chunks_from_bounds(TableId("d", "t"), ("k",), [(5,)], True)]
    [(0, None, (5,), False), (1, (5,), None, False), (2, None, None, True)]
    """
    if nullable and any(v is None for b in bounds for v in b):
        raise StateError(f"a chunk boundary of {table} holds a NULL: keys with a NULL belong to the NULL chunk only")
    edges: list[Key | None] = [None, *bounds, None]
    out = [Chunk(table, i, key_columns, edges[i], edges[i + 1], nullable) for i in range(len(edges) - 1)]
    if nullable:
        out.append(Chunk(table, len(out), key_columns, None, None, True, True))
    return out


# ---- JSON-safe encoding of key values (chunk table columns, state files) ----

def encode_value(v: Any) -> Any:
    """A key value as a small JSON-safe item; :func:`decode_value` inverts it exactly."""
    if v is None:
        return None
    if v is AFTER:
        return {"after": True}
    if isinstance(v, bool):
        return {"bool": v}
    if isinstance(v, int):
        return v if -(2**53) < v < 2**53 else {"int": str(v)}
    if isinstance(v, Decimal):
        return {"dec": str(v)}
    if isinstance(v, float):
        return {"float": repr(v)}
    if isinstance(v, str):
        return v
    if isinstance(v, bytes | bytearray):
        return {"bin": base64.b64encode(bytes(v)).decode("ascii")}
    if isinstance(v, dt.datetime):
        return {"datetime": v.isoformat()}
    if isinstance(v, dt.date):
        return {"date": v.isoformat()}
    if isinstance(v, dt.timedelta):
        return {"time_us": (v.days * 86400 + v.seconds) * 1_000_000 + v.microseconds}
    if isinstance(v, dt.time):
        return {"clock": v.isoformat()}
    raise ConfigError(f"cannot encode key value {v!r} of type {type(v).__name__}")


def decode_value(item: Any) -> Any:
    if item is None or (isinstance(item, int | str) and not isinstance(item, bool)):
        return item
    if isinstance(item, dict) and len(item) == 1:
        (tag, val), = item.items()
        if tag == "after" and val is True:
            return AFTER
        if tag == "bool":
            return bool(val)
        if tag == "int":
            return int(val)
        if tag == "dec":
            return Decimal(val)
        if tag == "float":
            return float(val)
        if tag == "bin":
            return base64.b64decode(val)
        if tag == "datetime":
            return dt.datetime.fromisoformat(val)
        if tag == "date":
            return dt.date.fromisoformat(val)
        if tag == "time_us":
            return dt.timedelta(microseconds=int(val))
        if tag == "clock":
            return dt.time.fromisoformat(val)
    raise ConfigError(f"cannot decode key value {item!r}")


def encode_key(key: Key | None) -> str | None:
    """A key tuple as compact JSON text (``None`` stays ``None``: an open end).

    >>> encode_key((1, "a")), decode_key('[1,"a"]')
    ('[1,"a"]', (1, 'a'))
    """
    if key is None:
        return None
    return json.dumps([encode_value(v) for v in key], separators=(",", ":"), ensure_ascii=False)


def decode_key(text: str | None) -> Key | None:
    if text is None:
        return None
    try:
        items = json.loads(text)
    except json.JSONDecodeError as e:
        raise ConfigError(f"bad chunk bound {text!r}: not JSON") from e
    if not isinstance(items, list):
        raise ConfigError(f"bad chunk bound {text!r}: expected a JSON list")
    return tuple(decode_value(i) for i in items)


# ---- the chunk table (``mysql_cdc_chunks`` rows, ``mysql_cdc.plan_chunks`` dicts) ----

CHUNK_COLUMNS: tuple[tuple[str, str], ...] = (
    ("database", "STRING"), ("table_name", "STRING"), ("chunk_id", "STRING"), ("chunk_index", "INT"),
    ("key_columns", "ARRAY<STRING>"), ("chunk_start", "STRING"), ("chunk_end", "STRING"), ("null_keys", "BOOLEAN"))


def chunk_row(c: Chunk) -> tuple[Any, ...]:
    """One chunk as a chunk-table row (bounds JSON-encoded; ``None`` for an open end; ``null_keys`` true for
    the chunk of rows whose nullable chunk key has a NULL)."""
    return (c.table.database, c.table.table, c.id, c.index, list(c.key_columns), encode_key(c.start),
            encode_key(c.end), c.nulls)


@dataclass(frozen=True)
class ChunkRecord:
    table: TableId
    index: int
    key_columns: tuple[str, ...]
    start: str | None  # encoded key (mysql_cdc.chunks.encode_key)
    end: str | None
    low: BinlogOffset
    high: BinlogOffset
    rows: int
    finished_at: float
    nullable: bool = False
    nulls: bool = False

    @property
    def id(self) -> str:
        return chunk_id(self.table, self.index)

    def chunk(self) -> Chunk:
        return Chunk(self.table, self.index, self.key_columns, decode_key(self.start), decode_key(self.end),
                     self.nullable, self.nulls)

    def to_dict(self) -> dict[str, Any]:
        d = {"database": self.table.database, "table": self.table.table, "index": self.index,
             "key_columns": list(self.key_columns), "start": self.start, "end": self.end,
             "low": self.low.to_dict(), "high": self.high.to_dict(), "rows": self.rows,
             "finished_at": self.finished_at}
        return {**d, **null_flags(self)}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ChunkRecord:
        try:
            return cls(TableId(d["database"], d["table"]), int(d["index"]), tuple(d["key_columns"]), d["start"],
                       d["end"], BinlogOffset.from_dict(d["low"]), BinlogOffset.from_dict(d["high"]),
                       int(d["rows"]), float(d["finished_at"]), bool(d.get("nullable", False)),
                       bool(d.get("nulls", False)))
        except (KeyError, TypeError, ValueError) as e:
            raise StateError(f"bad chunk record {d!r}: {e}") from e

    @classmethod
    def of(cls, chunk: Chunk, low: BinlogOffset, high: BinlogOffset, rows: int) -> ChunkRecord:
        return cls(chunk.table, chunk.index, chunk.key_columns, encode_key(chunk.start), encode_key(chunk.end),
                   low, high, rows, time.time(), chunk.nullable, chunk.nulls)


def null_flags(c: Chunk | ChunkRecord) -> dict[str, bool]:
    """The NULL-key flags of a chunk for a JSON record: present only when set (records of NOT NULL keys keep
    their form).

    >>> null_flags(Chunk(TableId("d", "t"), 2, ("k",), None, None, True, True))
    {'nullable': True, 'nulls': True}
    """
    return {k: True for k in ("nullable", "nulls") if getattr(c, k)}
