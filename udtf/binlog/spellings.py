"""The keys a table's binlog changed between two points, and the spellings of a list of string keys, or of the keys
of a range over a key with a string column, that a mirror may hold at a binlog point (``mysql-cdc resnapshot
--key``, ``--key-from/--key-to``, ``verify --repair``; docs/DESIGN.md §15).

A string key is one key under its collation in many spellings: ``'K-100'`` and ``'k-100'`` under a ``_ci``
collation, ``'abc'`` and ``'abc '`` under every PAD SPACE one. The server reads a listed key again with all its
spellings, but a mirror deletes what the list names byte for byte. A spelling the mirror held when the key left
it at point ``P`` (its ``-R`` row) and the list did not name stayed there for good when the source deleted or
changed that row after ``P`` and before the key's chunk was read: the change falls before the chunk's high
watermark, so the emit rule leaves it to the chunk, which no longer holds the row. So the list the round records
names every spelling the mirror may hold at ``P``: those stored now (asked by the key's own columns, equal under
the collation) and those of every row image the binlog holds from ``P`` to after that question (a row changed
or deleted since ``P``), each with the server's sort key of a listed key (:class:`~mysql_cdc.keyorder.KeyOrder`).
That is every spelling the source held at ``P``, which a mirror kept by the sync holds; a spelling named that the
mirror does not hold deletes nothing.

A range ``[start, end)`` over such a key is the server's: ``'b'`` to ``'M'`` under a case-insensitive
collation holds ``'C'`` and ``'c '``, which the lakes order elsewhere. Its keys a mirror may hold at ``P`` are
found the same way (:func:`held_in_range`): those stored in it now and those of the binlog's row images since
``P`` whose sort key lies in it (:func:`within`), each spelling once; the mirror deletes them by name.

Which keys join the list (pure): a key whose sort key is a listed key's, not already listed byte for byte.

>>> weights = {"k-100": 1, "K-100": 1, "a": 2, "b": 3}
>>> joining([("k-100",), ("a",)], [("K-100",), ("k-100",), ("b",), ("K-100",)], lambda k: weights[k[0]])
[('K-100',)]
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from typing import Any

from mysql_cdc.chunks import Chunk, Key
from mysql_cdc.connect import ServerFacts, connect
from mysql_cdc.errors import ConfigError
from mysql_cdc.ids import ident, table_ident
from mysql_cdc.keyorder import KeyOrder
from mysql_cdc.keyrange import MAX_HELD, column_value
from mysql_cdc.offsets import BinlogOffset
from mysql_cdc.options import CdcOptions
from mysql_cdc.profiles import ConnectionProfile
from mysql_cdc.schema import TableSchema
from mysql_cdc.sql import chunk_where
from mysql_cdc.udtf.binlog.rowimage import RowDecoders
from mysql_cdc.udtf.binlog.server_ids import claimed_id
from mysql_cdc.udtf.binlog.startup import server_end
from mysql_cdc.udtf.binlog.transactions import canonical_image, position_window_done, read_row_changes
from mysql_cdc.udtf.convert import binlog_row_converter

MAX_STORED = 1000  # spellings of one listed key stored (more: ConfigError, and the table is read whole)


def keys_changed(profile: ConnectionProfile, opts: CdcOptions, facts: ServerFacts, schema: TableSchema,
                 start: BinlogOffset, end: BinlogOffset, b1: bool, key: Sequence[str] = ()
                 ) -> set[tuple[Any, ...]]:
    """The keys (``key``'s columns; the primary key's when empty) of every row image of the table that the
    binlog holds between ``start`` and ``end``."""
    if end.position_key() <= start.position_key():
        return set()
    conv = binlog_row_converter(schema.columns, b1)  # the capture's types: as the mirror holds the keys
    at = schema.positions(tuple(key) or schema.primary_key)
    keys: set[tuple[Any, ...]] = set()
    target = end.position_key()
    # the capture's row readers (an old temporal format is read with the schema's precision: oldtemporal.py)
    decoders = RowDecoders({schema.table: schema}, b1, planned=opts.row_decoder == "planned")
    with claimed_id(profile, opts) as sid:
        for r in read_row_changes(profile, sid, start, {schema.table}, flavor=facts.flavor, use_gtid=False,
                                  done=position_window_done(end), server_version=facts.version, decoders=decoders,
                                  allow_statement_writes=opts.allow_statement_writes,
                                  claim=lambda: claimed_id(profile, opts)):
            if BinlogOffset(r.file, r.pos).position_key() > target:
                continue
            for image in (r.before, r.after):
                if image is not None:
                    values = canonical_image(image, conv)
                    keys.add(tuple(values[i] for i in at))
    return keys


def joining(listed: Sequence[Key], candidates: Sequence[Key], sort_key: Callable[[Key], Hashable]) -> list[Key]:
    """The ``candidates`` whose sort key is a listed key's and which the list does not hold byte for byte, once
    each, in their order."""
    wanted = {sort_key(tuple(k)) for k in listed}
    have = set(map(tuple, listed))
    out: list[Key] = []
    for k in candidates:
        if tuple(k) not in have and sort_key(tuple(k)) in wanted:
            have.add(tuple(k))
            out.append(tuple(k))
    return out


def _spelled(schema: TableSchema, where: str, limit: int) -> str:
    """A ``SELECT`` of the chunk key's values ``WHERE where`` (``%s`` parameters), each spelling once (a chunk key
    that is not unique may hold one many times): grouped by their bytes, ``MIN`` of a group of equal bytes is
    that value; at most ``limit``."""
    picked = ", ".join(f"MIN({ident(c)})" for c in schema.chunk_key)
    groups = ", ".join(f"CAST({ident(c)} AS BINARY)" for c in schema.chunk_key)
    return f"SELECT {picked} FROM {table_ident(schema.table)} WHERE {where} GROUP BY {groups} LIMIT {limit}"


def _changed_since(profile: ConnectionProfile, opts: CdcOptions, facts: ServerFacts, schema: TableSchema,
                   at: BinlogOffset) -> list[Key]:
    """The chunk key of every row image of the table the binlog holds from ``at`` to where the server ends now
    (after what was asked of it before: a row changed since is in the window), as the server holds them (a
    TINYINT(1) too: a key range holds integers), in one order."""
    end = server_end(profile, facts)
    return sorted(keys_changed(profile, opts, facts, schema, at, end, False, schema.chunk_key), key=repr)


def _as_keys(schema: TableSchema, values: Sequence[Sequence[Any]]) -> list[Key]:
    """Chunk keys as a key range holds them (:func:`~mysql_cdc.keyrange.column_value`), once each, in their order;
    one with a value no key's column holds (a NULL) left out."""
    cols = [schema.column(c) for c in schema.chunk_key]
    out: dict[Key, None] = {}
    for v in values:
        try:
            out.setdefault(tuple(column_value(c, x) for c, x in zip(cols, v)), None)
        except ConfigError:
            continue
    return list(out)


def within(keys: Sequence[Key], sort_keys: Sequence[Any], start: Any, end: Any) -> list[Key]:
    """The ``keys`` whose sort key (``sort_keys``, one each) lies in ``[start, end)`` (sort keys; ``None``: open).

    >>> within([("a",), ("B",), ("m",)], [1, 2, 13], 2, 13)
    [('B',)]
    """
    return [k for k, sk in zip(keys, sort_keys) if (start is None or sk >= start) and (end is None or sk < end)]


def held_in_range(profile: ConnectionProfile, opts: CdcOptions, facts: ServerFacts, schema: TableSchema,
                  start: Key | None, end: Key | None, at: BinlogOffset) -> list[Key]:
    """Every key of ``[start, end)`` over ``schema``'s chunk key (a key with a string column, ordered as the server
    orders it) that a mirror may hold at ``at``, each spelling once: stored in the range now, or in a row image the
    binlog holds from ``at`` to after that was asked, its sort key in the range (each as the capture holds a key:
    a TIMESTAMP's as naive UTC). A :class:`ConfigError` when a bound is no value its column holds, the start is
    not below the end under the key's collation, or the range holds more than :data:`~mysql_cdc.keyrange.MAX_HELD`
    keys."""
    order = KeyOrder(schema)
    bounds = [b for b in (start, end) if b is not None]
    conn = connect(profile)
    try:
        if not all(order.fits(conn, bounds)):
            raise ConfigError(f"a bound of [{start!r}, {end!r}) is no value the character set of "
                              f"{', '.join(schema.chunk_key)} holds")
        marks = order.sort_keys(conn, bounds)
        low = marks[0] if start is not None else None
        high = marks[-1] if end is not None else None
        if low is not None and high is not None and not low < high:
            raise ConfigError(f"key range start {start!r} is not below its end {end!r} as the server orders "
                              f"{', '.join(schema.chunk_key)} (its collation): nothing to read")
        where, params = chunk_where(Chunk(schema.table, 0, tuple(schema.chunk_key), start, end))
        if tuple(schema.chunk_key) == tuple(schema.primary_key):  # each key once as it is
            sql = (f"SELECT {', '.join(ident(c) for c in schema.chunk_key)} FROM {table_ident(schema.table)} "
                   f"WHERE {where} LIMIT {MAX_HELD + 1}")
        else:
            sql = _spelled(schema, where, MAX_HELD + 1)
        cur = conn.cursor()
        try:
            cur.execute(sql, params)
            rows = cur.fetchall()
        finally:
            cur.close()
        if len(rows) > MAX_HELD:
            raise ConfigError(f"the range [{start!r}, {end!r}) of {str(schema.table)!r} holds more than {MAX_HELD:,} "
                              "keys, each of which the mirror's delete would name")
        found = dict.fromkeys(_as_keys(schema, rows))
        candidates = [k for k in _as_keys(schema, _changed_since(profile, opts, facts, schema, at)) if k not in found]
        inside = within(candidates, order.sort_keys(conn, candidates), low, high) if candidates else []
    finally:
        conn.close()
    return [*found, *inside]


def spellings(profile: ConnectionProfile, opts: CdcOptions, facts: ServerFacts, schema: TableSchema,
              keys: Sequence[Key], at: BinlogOffset) -> list[Key]:
    """The spellings of ``keys`` (a list of keys of ``schema``'s chunk key, with a string column) that a mirror
    may hold at ``at`` and the list does not name byte for byte: stored now, or in a row image the binlog holds
    from ``at`` to after they were asked (each as the capture holds a key: a TIMESTAMP's as naive UTC)."""
    order = KeyOrder(schema)
    cols = [schema.column(c) for c in schema.chunk_key]
    text = [i for i, c in enumerate(cols) if c.is_text]
    conn = connect(profile)
    try:
        keys = [k for k, ok in zip(keys, order.fits(conn, keys)) if ok]  # a string no row can hold names none
        if not keys:
            return []
        where = " AND ".join(f"{ident(c)} = %s" for c in schema.chunk_key)
        found: list[Key] = []
        cur = conn.cursor()
        try:
            for k in keys:
                cur.execute(_spelled(schema, where, MAX_STORED + 1), list(k))
                rows = cur.fetchall()
                if len(rows) > MAX_STORED:
                    raise ConfigError(f"key {k!r} of {str(schema.table)!r} is stored in more than {MAX_STORED} "
                                      "spellings")
                found.extend(tuple(r) for r in rows)
        finally:
            cur.close()
        # a key whose other columns are no listed key's is none of theirs: not weighed
        others = {tuple(v for i, v in enumerate(k) if i not in text) for k in keys}
        candidates = [k for k in _as_keys(schema, [*found, *_changed_since(profile, opts, facts, schema, at)])
                      if tuple(v for i, v in enumerate(k) if i not in text) in others]
        if not candidates:
            return []
        sorted_keys = order.sort_keys(conn, [*keys, *candidates])
    finally:
        conn.close()
    by_key = dict(zip([tuple(k) for k in [*keys, *candidates]], sorted_keys))
    return joining(keys, candidates, by_key.__getitem__)
