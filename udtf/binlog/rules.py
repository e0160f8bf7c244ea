"""How each table's emit rule (:mod:`.emit`) is built from its recorded chunks: their key ranges as the server
orders keys (:mod:`mysql_cdc.keyorder`) and their high watermarks."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Protocol

from mysql_cdc.chunks import ChunkRecord
from mysql_cdc.errors import StateError
from mysql_cdc.ids import TableId
from mysql_cdc.keyorder import KeyOrder, key_value
from mysql_cdc.schema import TableSchema
from mysql_cdc.udtf.binlog.emit import EmitRule, SortKey


def chunk_rule(schema: TableSchema, records: list[ChunkRecord], key_order: KeyOrder, conn: Any | None) -> EmitRule:
    """The emit rule of one table from its recorded chunks (sort-key ranges and high watermarks; the chunk of
    NULL keys, when the key is nullable, apart)."""
    nulls = [r for r in records if r.nulls]
    bounds = [r.chunk() for r in records if not r.nulls]
    if bounds and bounds[0].start is not None:
        raise StateError(f"the first recorded chunk ({bounds[0].index}) starts at {bounds[0].start!r}: recorded "
                         "chunks are missing")
    for a, b in zip(bounds, bounds[1:]):
        if a.end is None or a.end != b.start:  # a chunk record missing between them
            raise StateError(f"chunk {a.index} ends at {a.end!r} but chunk {b.index} starts at {b.start!r}: "
                             "recorded chunks are missing")
    ends = [c.end for c in bounds if c.end is not None]
    sks = key_order.sort_keys(conn, [tuple(key_value(v) for v in k) for k in ends]) if ends else []
    it = iter(sks)
    ranges: list[tuple[SortKey | None, SortKey | None]] = []
    prev: SortKey | None = None
    for c in bounds:
        end = next(it) if c.end is not None else None
        ranges.append((prev, end))
        prev = end
    if len(nulls) > 1:
        raise StateError(f"{len(nulls)} chunks of NULL keys are recorded; one is planned")
    if records and records[0].nullable and not nulls:
        raise StateError("the chunk of NULL keys is not recorded")
    return EmitRule(ranges, [r.high for r in records if not r.nulls], nulls[0].high if nulls else None)


class RecordedChunks(Protocol):
    """Where finished chunks are recorded (``mysql_cdc.state.store.StateStore`` is one): the reader needs only
    this, so it does not depend on the state layer."""

    location: str

    def chunk_records(self, table: TableId) -> list[ChunkRecord]: ...


def recorded_rules(store: RecordedChunks, schemas: Mapping[TableId, TableSchema], conn_factory: Callable[[], Any]
                   ) -> dict[TableId, EmitRule]:
    """The emit rule of each table from its recorded chunks."""
    rules: dict[TableId, EmitRule] = {}
    conn = None
    try:
        for t, schema in schemas.items():
            recs = store.chunk_records(t)
            if not recs:
                raise StateError(f"no chunk watermarks of table {str(t)!r} are recorded under {store.location!r}: "
                                 "run the snapshot with this state_dir first, or start with startup => 'latest'")
            ko = KeyOrder(schema)
            if ko.needs_server and conn is None:
                conn = conn_factory()
            try:
                rules[t] = chunk_rule(schema, recs, ko, conn)
            except StateError as e:
                raise StateError(f"table {str(t)!r}: {e} (found {len(recs)} records under {store.location!r}); "
                                 "finish the snapshot first") from e
    finally:
        if conn is not None:
            conn.close()
    return rules
