"""The planner's whole job for a set of tables: connect, validate, discover, split."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from mysql_cdc.chunks import Chunk, Key, after
from mysql_cdc.connect import ServerFacts, connect, registered_replica_ids, server_facts, unlisted_replicas
from mysql_cdc.errors import ChunkKeyError, NoTableMatchedError, TableError
from mysql_cdc.ids import TableId
from mysql_cdc.keyorder import KeyOrder, check_chunk_key
from mysql_cdc.keyrange import KeyRange
from mysql_cdc.options import CdcOptions
from mysql_cdc.planner.discover import match_tables, null_defaults, table_schema
from mysql_cdc.planner.splitter import (
    bounded_chunk_rows,
    range_rows,
    split_range,
    split_table,
    table_stats,
)
from mysql_cdc.planner.validate import (
    check_cascades,
    check_lock_privilege,
    check_privileges,
    check_server,
    check_unseen,
)
from mysql_cdc.profiles import ConnectionProfile
from mysql_cdc.schema import TableSchema


@dataclass(frozen=True)
class TablePlan:
    schema: TableSchema
    chunks: tuple[Chunk, ...]
    rows_per_chunk: int = 0  # the rows each chunk was planned to hold (0: not known)
    avg_row_bytes: int = 0  # the server's average row length of the table (0: not known)


def inspect_server(conn: Any) -> ServerFacts:
    """Server facts, validated (version, binlog settings, privileges)."""
    facts = server_facts(conn)
    check_server(facts)
    check_privileges(conn, facts)
    return facts


def check_server_id_claims(profile: ConnectionProfile, opts: CdcOptions,
                           connector: Callable[[ConnectionProfile], Any] = connect) -> None:
    """Before a capture that follows the binlog moves data: its readers can claim server ids that no replica
    uses (the user may list the replicas), or the options say to claim them unchecked."""
    if opts.unchecked_server_ids or opts.startup == "snapshot":
        return
    conn = connector(profile)
    try:
        if registered_replica_ids(conn) is None:
            raise unlisted_replicas(opts.server_ids)
    finally:
        conn.close()


def describe_table(profile: ConnectionProfile, opts: CdcOptions, table: str,
                   connector: Callable[[ConnectionProfile], Any] = connect, binlog: bool = True
                   ) -> tuple[ServerFacts, TableSchema]:
    """The server's facts and the table's schema, checked for capture (``binlog`` False: a snapshot-only read,
    which needs nothing from the binlog: see :func:`describe_tables`)."""
    conn = connector(profile)
    try:
        facts = inspect_server(conn)
        tid = TableId.parse(table)
        schema = table_schema(conn, tid, opts.chunk_key_of(f"{tid.database}.{tid.table}"))
        check_cascades(conn, facts, [schema.table], opts.allow_unlogged_cascades or not binlog)
        if opts.reads_snapshot:
            check_lock_privilege(conn, schema)
        return facts, schema
    finally:
        conn.close()


def describe_tables(profile: ConnectionProfile, opts: CdcOptions, tables: list[str] | None = None,
                    connector: Callable[[ConnectionProfile], Any] = connect, allow_none: bool = False,
                    snapshot: bool = False, binlog: bool = True) -> tuple[ServerFacts, list[TableSchema]]:
    """The server's facts and the schemas of the matched tables (``opts.tables`` patterns less ``opts.exclude``,
    or exact ``tables``), on one connection, checked for capture, without splitting. ``allow_none``: no
    matched table is no error (a running capture looking for new tables). Tables whose chunks will be read
    (``startup`` initial or snapshot, or ``snapshot``: tables joining a running capture) are checked for the
    lock a table without a primary key is read under. A read that follows the binlog (``binlog``) is refused
    tables whose changes the binlog lacks (MariaDB's cascades: :func:`check_cascades`); a snapshot-only read
    selects every row as it is and is not."""
    conn = connector(profile)
    try:
        facts = inspect_server(conn)
        if tables:
            ids = [TableId.parse(t) for t in tables]
        else:
            try:
                ids = match_tables(conn, opts.table_patterns, opts.exclude_patterns)
            except NoTableMatchedError:  # not a table the patterns match but cannot capture: that one stops
                if not allow_none:
                    raise
                ids = []
            if binlog:
                check_unseen(conn, opts.table_patterns, opts.exclude_patterns)
        schemas = []
        for t in ids:
            schema = table_schema(conn, t, opts.chunk_key_of(f"{t.database}.{t.table}"),
                                  allow_pk_override=not tables and len(ids) > 1)
            check_cascades(conn, facts, [t], opts.allow_unlogged_cascades or not binlog)
            check_chunk_key(schema)
            if opts.reads_snapshot or snapshot:
                check_lock_privilege(conn, schema)
            schemas.append(schema)
        if opts.chunk_key and schemas and all(s.primary_key for s in schemas) and not allow_none:
            raise ChunkKeyError(f"chunk_key {opts.chunk_key!r} is for tables without a primary key, and every "
                                "matched table has one: drop the option")
        return facts, schemas
    finally:
        conn.close()


def describe_now(profile: ConnectionProfile, opts: CdcOptions, table: TableId,
                 connector: Callable[[ConnectionProfile], Any] = connect
                 ) -> tuple[TableSchema, dict[str, bool]] | None:
    """A captured table's schema now, and which of its columns are NULL where a row does not write them
    (:func:`planner.discover.null_defaults`); ``None`` when the table is gone (dropped or renamed)."""
    conn = connector(profile)
    try:
        try:
            schema = table_schema(conn, table, opts.chunk_key_of(f"{table.database}.{table.table}"),
                                  allow_pk_override=True)
        except TableError:
            cur = conn.cursor()
            cur.execute("SELECT 1 FROM information_schema.TABLES WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s",
                        (table.database, table.table))
            gone = cur.fetchone() is None
            cur.close()
            if gone:
                return None
            raise
        return schema, null_defaults(conn, table)
    finally:
        conn.close()


def split_schemas(profile: ConnectionProfile, opts: CdcOptions, schemas: list[TableSchema],
                  connector: Callable[[ConnectionProfile], Any] = connect, slots: int = 1) -> list[TablePlan]:
    """Split tables already described (their chunk keys chosen, as :func:`describe_tables` gives them), each
    into chunks enough for ``slots`` tasks at once where it is big enough (:func:`.splitter.spread_rows`)."""
    conn = connector(profile)
    try:
        facts = server_facts(conn)
        plans = []
        for schema in schemas:
            avg, rows = table_stats(conn, schema, facts.flavor)
            size = bounded_chunk_rows(opts, avg, rows, slots)
            chunks = split_table(conn, schema, size, opts.split_factor_lower, opts.split_factor_upper)
            plans.append(TablePlan(schema, tuple(chunks), size, avg))
        return plans
    finally:
        conn.close()


def point_spans(conn: Any, schema: TableSchema, keys: Sequence[Key]) -> list[tuple[Key | None, Key | None]]:
    """A list of keys as spans ``[k, k AFTER)`` in the server's order of the chunk key (its collation's, from the
    server), keys equal under it once (the first given: the SQL text reads the same rows for each). A string its
    column's character set cannot hold names no row and is left out (a statement comparing the column with it
    fails)."""
    order = KeyOrder(schema)
    keys = [k for k, ok in zip(keys, order.fits(conn, keys) if keys else []) if ok]
    sort_keys = order.sort_keys(conn, list(keys)) if keys else []
    seen: dict[Any, Key] = {}
    for sk, k in sorted(zip(sort_keys, keys), key=lambda p: p[0]):
        seen.setdefault(sk, tuple(k))
    return [(k, after(k)) for k in seen.values()]


def split_key_range(profile: ConnectionProfile, opts: CdcOptions, schema: TableSchema, key_range: KeyRange,
                    slots: int = 1) -> tuple[TablePlan, tuple[int, ...]]:
    """A table's plan when only ``key_range`` is read again (:func:`.splitter.split_range`, its spans): the plan,
    and the indexes of its chunks outside the range (around it and in its gaps)."""
    if tuple(schema.chunk_key) != key_range.key_columns or schema.nullable_key:
        raise ChunkKeyError(f"the key range {key_range.text()} of {str(schema.table)!r} is not over its chunk key "
                            f"({', '.join(schema.chunk_key)}) any more: snapshot the whole table again")
    conn = connect(profile)
    try:
        facts = server_facts(conn)
        avg, _ = table_stats(conn, schema, facts.flavor)
        spans = point_spans(conn, schema, key_range.keys) if key_range.keys else key_range.spans()
        rows = sum(range_rows(conn, schema, start, end) for start, end in spans)
        size = bounded_chunk_rows(opts, avg, rows, slots)
        chunks, outside = split_range(conn, schema, spans, size)
        return TablePlan(schema, tuple(chunks), size, avg), outside
    finally:
        conn.close()


def plan_tables(profile: ConnectionProfile, opts: CdcOptions, tables: list[str] | None = None,
                connector: Callable[[ConnectionProfile], Any] = connect, binlog: bool = True, slots: int = 1
                ) -> tuple[ServerFacts, list[TablePlan]]:
    """Validate the server and split every matched table (``opts.tables`` patterns, or exact ``tables``);
    ``binlog`` as :func:`describe_tables` takes it, ``slots`` as :func:`split_schemas`."""
    facts, schemas = describe_tables(profile, opts, tables, connector, binlog=binlog)
    return facts, split_schemas(profile, opts, schemas, connector, slots)
