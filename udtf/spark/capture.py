"""What a capture reads, decided on the driver: the tables planned (or the schemas the state dir recorded for
them), and the binlog phase that follows them from their recorded watermarks."""

from __future__ import annotations

import logging
from collections.abc import Mapping

from mysql_cdc.connect import ServerFacts, connect
from mysql_cdc.errors import ConfigError, StateError
from mysql_cdc.ids import TableId
from mysql_cdc.offsets import BinlogOffset
from mysql_cdc.options import CdcOptions
from mysql_cdc.planner.plan import describe_table, describe_tables
from mysql_cdc.profiles import ConnectionProfile
from mysql_cdc.schema import TableSchema
from mysql_cdc.state.store import StateStore, pin_capture
from mysql_cdc.udtf.binlog.phase import BinlogPhase
from mysql_cdc.udtf.binlog.rules import recorded_rules
from mysql_cdc.udtf.binlog.startup import ReadFrom, parse_end, read_from


def binlog_phase(profile: ConnectionProfile, facts: ServerFacts, schemas: Mapping[TableId, TableSchema],
                 opts: CdcOptions) -> tuple[BinlogPhase, ReadFrom]:
    """One reader of the tables' changes (one binlog connection for all of them) and where it starts, under
    ``opts.startup``."""
    rules = None
    if opts.startup == "initial":
        if not opts.state_dir:
            raise ConfigError("startup 'initial' reads after the recorded snapshot: set state_dir to where the "
                              "snapshot recorded its chunks, or choose startup latest/earliest/offset/timestamp")
        rules = recorded_rules(StateStore(opts.state_dir), schemas, lambda: connect(profile))
    start = read_from(profile, facts, opts, rules)
    return BinlogPhase(profile, facts, opts, schemas, {t: (rules or {}).get(t) for t in schemas}), start


def binlog_range(profile: ConnectionProfile, facts: ServerFacts, schemas: Mapping[TableId, TableSchema],
                 opts: CdcOptions) -> tuple[BinlogPhase, ReadFrom, BinlogOffset]:
    """:func:`binlog_phase` and the range a bounded read (``mysql_cdc_binlog``, function or data source) reads:
    from the start ``opts.startup`` gives up to ``opts.end``, or to the boundary just before a DDL statement of a
    captured table inside it (logged; a read that starts at one stops with ``SchemaChangedError``). The scan
    that finds the end leaves the range's boundaries in ``phase.seen`` (see :meth:`BinlogPhase.cut_points`)."""
    phase, start = binlog_phase(profile, facts, schemas, opts)
    requested = parse_end(opts.end, profile, facts)
    end = phase.batch_end(start, requested)
    if end != requested:
        logging.getLogger("mysql_cdc").warning(
            "mysql_cdc_binlog of %s ends at %s:%s, before a DDL statement of a captured table; a read from there "
            "stops with SchemaChangedError", ", ".join(map(str, schemas)), end.file, end.pos)
    return phase, start, end


def planned_table(profile: ConnectionProfile, opts: CdcOptions, *, snapshot: bool = False, binlog: bool = True
                  ) -> tuple[ServerFacts, TableSchema]:
    """The server's facts and the table's schema as this capture planned it: with a ``state_dir``, the schema
    recorded there when the capture first ran (recorded now if there is none), so that a stream restarted
    after a DDL still decodes the changes before the DDL with the columns they were written with, delivers
    them, and stops at the DDL with :class:`SchemaChangedError`; without one, the current schema.

    A ``snapshot`` read selects the table as it is now: a recorded schema that differs from the current one is
    an error (its rows would be read with the wrong columns), naming the fix. ``binlog`` False: a read of the
    snapshot only (:func:`planner.plan.describe_tables`)."""
    assert opts.table is not None
    facts, current = describe_table(profile, opts, opts.table, binlog=binlog)
    return facts, pinned_schema(opts, current, snapshot=snapshot)


def planned_tables(profile: ConnectionProfile, opts: CdcOptions, *, snapshot: bool = False, binlog: bool = True
                   ) -> tuple[ServerFacts, dict[TableId, TableSchema]]:
    """The server's facts and the captured tables' schemas: the ``table`` option's one table
    (:func:`planned_table`), or the tables the ``tables`` patterns match less ``exclude``, each schema pinned in
    ``opts.state_dir`` as :func:`pinned_schema` pins one."""
    if not opts.tables:
        facts, schema = planned_table(profile, opts, snapshot=snapshot, binlog=binlog)
        return facts, {schema.table: schema}
    facts, current = describe_tables(profile, opts, binlog=binlog)
    return facts, {s.table: pinned_schema(opts, s, snapshot=snapshot) for s in current}


# options that shape a capture's output types: kept in its state_dir, so a restart cannot change them midway and
# mysql_cdc.split types the rows as they were read
def pinned_schema(opts: CdcOptions, current: TableSchema, *, snapshot: bool = False) -> TableSchema:
    """The schema recorded in ``opts.state_dir`` (``current`` is recorded if none is), or ``current`` without a
    state_dir; with ``snapshot``, a recorded schema other than ``current`` is an error (see planned_table)."""
    if not opts.state_dir:
        return current
    pin_capture(opts)
    pinned = StateStore(opts.state_dir).record_schema(current)
    if snapshot and pinned != current:
        raise StateError(f"state_dir {opts.state_dir!r} was planned with another schema of {str(current.table)!r} "
                         f"(columns {list(pinned.column_names)!r}, chunk key {list(pinned.chunk_key)!r}; now "
                         f"{list(current.column_names)!r}, {list(current.chunk_key)!r}): a snapshot reads the table "
                         "as it is now, so give it a new state_dir")
    return pinned
