"""Snapshots on demand while a sync runs (``mysql-cdc resnapshot``, ``verify --repair``; docs/DESIGN.md §15).

A request is a file in the capture's state dir (:class:`~mysql_cdc.state.store.ResnapshotRequest`), written by
any process; the sync's stream takes it at the next micro-batch it plans in the binlog phase (a stopped sync:
when it starts again) with the rounds a schema change that resets a table uses: one batch empties the tables'
mirrors (``T`` rows) at the binlog point it starts at, and the next round snapshots them while the binlog waits
there, after which the binlog goes on with the new chunks' watermarks in the emit rule (C3, C5: the rounds are
recorded first-wins, so a sync killed at any point of this converges as it does after a DDL reset). Where a
request stands is read from the rounds and the sync's checkpoint (:mod:`mysql_cdc.state.resnapshot`).
"""

from __future__ import annotations

import datetime as dt
import re
import time
from collections.abc import Sequence
from decimal import Decimal
from typing import Any

from mysql_cdc.errors import ConfigError, StateError
from mysql_cdc.ids import TableId
from mysql_cdc.keyrange import (
    KeyRange,
    RangeKey,
    check_keys,
    column_value,
    kind_problem,
    parse_bound,
    range_problem,
    shown_key,
)
from mysql_cdc.options import split_patterns
from mysql_cdc.state.resnapshot import RequestProgress, progress
from mysql_cdc.state.storage import read_text
from mysql_cdc.state.store import ResnapshotRequest, StateStore
from mysql_cdc.udtf.sync.job import batch_end, captured_schemas, committed_batches


def matching(store: StateStore, tables: str) -> list[TableId]:
    """The captured tables whose ``db.table`` matches one of the comma-separated regular expressions ``tables``
    (as the sync's and verify's ``tables``); one error when none does."""
    if not store.exists():
        raise StateError(f"no capture is recorded under state_dir {store.location!r}: give the sync's --state-dir")
    try:
        patterns = [re.compile(p) for p in split_patterns(tables)]
    except re.error as e:
        raise ConfigError(f"tables {tables!r} is not a list of regular expressions: {e}") from e
    if not store.rounds():
        raise ConfigError(f"state_dir {store.location!r} holds a capture of one table (option table), not a sync's: "
                          "only a capture of many tables (the sync, option tables) is verified or snapshotted again "
                          "while it runs")
    held = [s.table for s in captured_schemas(store)]
    out = [t for t in held if any(p.fullmatch(str(t)) for p in patterns)]
    if not out:
        shown = ", ".join(sorted(map(str, held))[:20]) or "none"
        raise ConfigError(f"tables {tables!r} matches no table the sync of state_dir {store.location!r} captures "
                          f"({shown}); give regular expressions over 'db.table', e.g. 'shop[.]orders'")
    return out


def key_range(store: StateStore, table: TableId, start: Any, end: Any, keys: Sequence[Any] = ()) -> KeyRange:
    """The keys of ``table`` read again: the key range ``[start, end)`` over its chunk key, and (or) the ``keys``
    given one by one (each a value, a sequence of them, one per key column, or their text: integers, ``0x`` and
    hex digits for a binary column, a decimal number, a date, a date and time (a TIMESTAMP's in UTC unless it
    names its zone), a string column's text as written, separated by commas; a key of one string column is the
    whole text); a key with a string column takes at most 64 keys, or a range (ordered as the server orders the
    key: whether its start is below its end, and which keys it holds, are asked of the server when the request is
    taken), not both; one error, before anything is recorded, when the table's key takes no range or a value is
    not of its column's kind."""
    schema = next((s for s in captured_schemas(store) if s.table == table), None)
    if schema is None:
        raise ConfigError(f"{str(table)!r} is not captured by the sync of state_dir {store.location!r}")
    cols = tuple(schema.chunk_key)
    why = range_problem(schema.columns, cols)
    if why is not None:
        raise ConfigError(f"a key range of {str(table)!r} cannot be read again alone: {why}; snapshot the whole "
                          "table again (leave out the keys and key bounds)")

    by = {c.name: c for c in schema.columns}

    texts = [c for c in cols if by[c].data_type in ("char", "varchar")]

    def bound(b: Any, key: bool = False) -> RangeKey | None:
        if b is None or isinstance(b, str):
            parsed = parse_bound(b, cols, texts)
            if parsed is None:
                return None
            b = parsed
        if isinstance(b, (int, bytes, bytearray, Decimal, dt.date)):
            b = (b,)
        if not isinstance(b, (tuple, list)):
            raise ConfigError(f"key {b!r} of {str(table)!r} is not a value (an integer, bytes, a decimal, a date or "
                              f"a datetime), a sequence of them (one per key column: {', '.join(cols)}) or their text")
        if len(b) != len(cols):
            raise ConfigError(f"key {b!r} of {str(table)!r} has {len(b)} values but the key has {len(cols)} columns "
                              f"({', '.join(cols)})")
        out = tuple(column_value(by[name], v) for name, v in zip(cols, b))
        check_keys(cols, [(f"key of {str(table)!r}", out)])
        for name, v in zip(cols, out):  # each of its column's kind, before values are compared
            if (why := kind_problem(by[name], v)) is not None:
                raise ConfigError(f"key {shown_key(out)} of {str(table)!r}: {why}")
            if key and isinstance(v, bytes) and (why := _length_problem(by[name], v)) is not None:
                raise ConfigError(f"key {shown_key(out)} of {str(table)!r}: {why}")
            if key and isinstance(v, dt.datetime) and (why := _precision_problem(by[name], v)) is not None:
                raise ConfigError(f"key {shown_key(out)} of {str(table)!r}: {why}")
        return out
    utc = tuple(c for c in cols if by[c].data_type == "timestamp")  # whose literals say UTC
    spans = [(bound(start), bound(end))] if start is not None or end is not None or not keys else []
    out = KeyRange(cols, *spans[0], utc=utc) if spans else None  # its own errors first (a start not below its end)
    if any(k is None for k in keys):
        raise ConfigError(f"keys {list(keys)!r} hold None: give each key as a value, values or their text")
    listed = [k for k in (bound(k, key=True) for k in keys) if k is not None]
    if listed:
        out = KeyRange.of_keys(cols, listed, utc) if out is None else out.union(KeyRange.of_keys(cols, listed, utc))
    assert out is not None
    why = range_problem(schema.columns, cols, out)
    if why is not None:
        raise ConfigError(f"the key range {out.text()} of {str(table)!r} cannot be read again alone: {why}; give "
                          "keys it takes, or snapshot the whole table again (leave out the keys and key bounds)")
    return out


def _precision_problem(col: Any, v: dt.datetime) -> str | None:
    """Why ``v`` is no value of a DATETIME(p) or TIMESTAMP(p) column ``col`` as a key (finer than its p digits of a
    second: it names no row on either side), or ``None``.

    >>> from mysql_cdc.schema import ColumnInfo as C
    >>> _precision_problem(C("at", "datetime", "datetime(2)", False, datetime_precision=2), dt.datetime(2024, 2, 29,
    ...                    10, 0, 0, 250_500))
    'at (datetime(2)) holds 2 digits of a second, not 2024-02-29 10:00:00.250500'
    """
    p = col.datetime_precision or 0
    if v.microsecond % 10 ** (6 - p) == 0:
        return None
    return f"{col.name} ({col.column_type}) holds {p} digits of a second, not {v.isoformat(sep=' ')}"


def _length_problem(col: Any, v: bytes) -> str | None:
    """Why ``v`` is no value of binary column ``col`` as a key (a BINARY(n) holds n bytes, padded with zero
    bytes: a shorter key names no row on either side), or ``None``.

    >>> from mysql_cdc.schema import ColumnInfo as C
    >>> _length_problem(C("id", "binary", "binary(4)", False), b"\\x11\\xee")
    'id (binary(4)) holds 4 bytes, not 2: give all of them (0x11ee0000 if the rest are zero bytes)'
    >>> _length_problem(C("id", "varbinary", "varbinary(4)", False), b"\\x11\\xee") is None
    True
    """
    m = re.fullmatch(r"(var)?binary\((\d+)\)", str(col.column_type))
    if m is None:
        return None
    n = int(m.group(2))
    if m.group(1) is None and len(v) != n:
        pad = "0x" + v[:n].ljust(n, b"\x00").hex()
        return (f"{col.name} ({col.column_type}) holds {n} bytes, not {len(v)}: give all of them"
                + (f" ({pad} if the rest are zero bytes)" if len(v) < n else ""))
    if len(v) > n:
        return f"{col.name} ({col.column_type}) holds at most {n} bytes, not {len(v)}"
    return None


def ask(store: StateStore, tables: Sequence[TableId], why: str = "", key_range: KeyRange | None = None) -> int:
    """Record a request to snapshot ``tables`` again (each must be captured now: one error naming those that
    are not, and what is captured), or only ``key_range`` of the one table named; returns its number."""
    if not store.exists():
        raise StateError(f"no capture is recorded under state_dir {store.location!r}: give the sync's --state-dir")
    if not tables:
        raise ConfigError("name at least one table to snapshot again ('db.table')")
    held = {s.table for s in captured_schemas(store)}
    unknown = [t for t in tables if t not in held]
    if unknown:
        shown = ", ".join(sorted(map(str, held))[:20]) or "none"
        raise ConfigError(f"{', '.join(repr(str(t)) for t in unknown)} is not captured by the sync of state_dir "
                          f"{store.location!r}, which captures: {shown}; name tables it captures ('db.table')")
    at = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    tables = tuple(dict.fromkeys(tables))
    if key_range is not None and len(tables) != 1:
        raise ConfigError(f"key bounds name a range of one table, but {', '.join(map(str, tables))} match: give "
                          "a pattern of that table alone")
    return store.record_request(ResnapshotRequest(tables, why[:500], at, key_range))


def where(store: StateStore, checkpoint: str | None, request: int) -> RequestProgress:
    """Where request ``request`` stands, by the rounds recorded and the sync's last committed batch (no
    checkpoint: as far as the rounds tell, never ``done``)."""
    if request < 0 or not store.requests(request)[:1]:
        raise StateError(f"no snapshot request {request!r} is recorded under {store.location!r}")
    passed = store.request_passed(request)
    if passed is not None:
        return RequestProgress("passed", request=request, why=passed)
    committed = None
    if checkpoint is not None:
        if read_text(checkpoint, "metadata") is None:
            raise StateError(f"checkpoint {checkpoint!r} is no Spark checkpoint (it has no metadata): give the "
                             "sync's --checkpoint")
        done = committed_batches(checkpoint)
        committed = batch_end(checkpoint, done) if done >= 0 else None
    now = progress(store.rounds(), request, committed)
    if checkpoint is None and now.state == "done":
        return RequestProgress("running", now.round, now.reset, now.snapshotted, request)
    return now


def wait(store: StateStore, checkpoint: str, request: int, timeout: float, running: bool | None = None
         ) -> RequestProgress:
    """Wait up to ``timeout`` seconds for request ``request`` to be done (checked twice a second); returns where it
    stands then. ``running``: whether a sync holds the state dir (``False``: not waited for: a stopped sync takes
    the request when it starts)."""
    deadline = time.monotonic() + timeout
    while True:
        now = where(store, checkpoint, request)
        if now.state in ("done", "passed") or running is False or time.monotonic() >= deadline:
            return now
        time.sleep(0.5)
