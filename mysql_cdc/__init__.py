"""pyspark-mysql-cdc: lock-free, parallel, exactly-once change data capture from MySQL and MariaDB into Spark.

``import mysql_cdc`` is cheap: pyspark and the drivers load only when a function needs them.
"""

from __future__ import annotations

import datetime as dt
import os
import posixpath
from decimal import Decimal
from typing import Any

from mysql_cdc.errors import (
    BinlogError,
    ChunkKeyError,
    ConfigError,
    ConnectError,
    MysqlCdcError,
    NoTableMatchedError,
    PrivilegeError,
    SchemaChangedError,
    ServerSettingError,
    StateError,
    TableError,
    UnsupportedTypeError,
)
from mysql_cdc.options import OPTIONS, CdcOptions, parse_options
from mysql_cdc.profiles import ConnectionProfile

__all__ = [
    "OPTIONS",
    "BinlogError",
    "CdcOptions",
    "ChunkKeyError",
    "ConfigError",
    "ConnectError",
    "ConnectionProfile",
    "MysqlCdcError",
    "NoTableMatchedError",
    "PrivilegeError",
    "SchemaChangedError",
    "ServerSettingError",
    "StateError",
    "TableError",
    "UnsupportedTypeError",
    "once_trigger",
    "parse_options",
    "plan_chunks",
    "register",
    "resnapshot",
    "split",
    "stop_when_caught_up",
    "sync",
    "verify",
]

__version__ = "0.1.0"


def register(spark: Any, profiles: Any = None, *, ship_code: bool | None = None, carry: tuple[str, ...] = ()
             ) -> None:
    """Register the SQL functions and the data source on a classic or Spark Connect session.
    See :func:`mysql_cdc.udtf.spark.register.register`."""
    from mysql_cdc.udtf.spark.register import register as _register

    _register(spark, profiles, ship_code=ship_code, carry=carry)


def once_trigger() -> dict[str, Any]:
    """The keyword arguments of ``DataStreamWriter.trigger`` for a stream read with option ``once``, on this
    Spark: ``availableNow`` (4.2 and later), else back-to-back batches that :func:`stop_when_caught_up` ends::

        q = (spark.readStream.format("mysql_cdc").option("once", True)...load()
             .writeStream.trigger(**mysql_cdc.once_trigger())...start())
        mysql_cdc.stop_when_caught_up(q)
        q.awaitTermination()
    """
    from mysql_cdc.udtf.spark.compat import once_trigger as _once_trigger

    return _once_trigger()


def stop_when_caught_up(query: Any) -> None:
    """Stop ``query`` (a stream read with option ``once`` under :func:`once_trigger`) once it has caught up,
    where Spark does not end it by itself (4.0 and 4.1); nothing where it does. Returns at once: a
    daemon thread watches the query's status."""
    from mysql_cdc.udtf.spark.compat import stop_when_caught_up as _stop

    _stop(query)


def plan_chunks(profile: ConnectionProfile | str, **options: Any) -> list[dict[str, Any]]:
    """The chunk table as Python dicts (the same rows as ``mysql_cdc_chunks``), planned on this machine.

    ``profile`` is a :class:`ConnectionProfile` or a ``mysql://user:password@host:port`` URL; ``options`` are
    the options of the option table (``tables`` at least).
    """
    from mysql_cdc.chunks import CHUNK_COLUMNS, chunk_row
    from mysql_cdc.planner.plan import plan_tables
    from mysql_cdc.profiles import profile_from_url

    prof = profile_from_url(profile) if isinstance(profile, str) else profile
    opts = parse_options(options)
    _, plans = plan_tables(prof, opts, binlog=False)
    names = [name for name, _ in CHUNK_COLUMNS]
    return [dict(zip(names, chunk_row(c))) for p in plans for c in p.chunks]


def split(df: Any, state_dir: str, tables: list[str] | None = None,
          large_value_dir: str | None = None) -> dict[str, Any]:
    """The rows of a read of many tables (option ``tables``: values as JSON in ``__values``) as
    ``{'db.table': DataFrame}``, each typed exactly as a read of that one table (option ``table``) types it,
    with the metadata columns. ``state_dir`` is the read's; ``tables`` picks some (default: all recorded
    there); ``large_value_dir`` is the read's option of that name, if it had one (its files stay: remove them
    once the rows are where they go). See :mod:`mysql_cdc.udtf.spark.frames`."""
    from mysql_cdc.udtf.spark.frames import table_frames

    return table_frames(df, state_dir, tables, large_value_dir)


def sync(spark: Any, *, to: str, checkpoint: str, state_dir: str, tables: str, source: str | None = None,
         exclude: str | None = None, profiles: Any = None, trigger_seconds: float = 1.0, once: bool = False,
         on_batch: Any = None, format: str = "delta", **options: Any) -> Any:
    """Mirror the matched tables into Delta or Iceberg tables (``format``), exactly once, and keep them
    mirrored: a streaming query (returned, started) that applies each micro-batch with one MERGE per table.
    ``to`` is a catalog namespace (``main.mirror``, ``lake.mirror_{database}``: tables ``<to>.<table>``) where
    the session has the format's Spark classes (then Spark merges on the executors), or, for Delta, a folder
    (``<to>/<database>/<table>``; without Delta in the session written by delta-rs in the driver):
    :mod:`mysql_cdc.udtf.sync.sinks`.

    ``tables`` / ``exclude`` are the data source's patterns, ``checkpoint`` Spark's checkpoint location and
    ``state_dir`` the capture's (keep both with the target). ``once`` stops at the binlog end taken at the start
    (``availableNow``, or on Spark 4.0 and 4.1 option ``once`` and a stop when caught up: :mod:`udtf.spark.compat`),
    else a micro-batch runs every ``trigger_seconds``. Other ``options`` go to the stream
    (``chunk_size``, ``max_chunks_per_batch``, ...). ``on_batch`` is called with each batch's
    :class:`~mysql_cdc.udtf.sync.job.BatchStats` (a classic session: it runs in this process). The target is
    created, or checked, before any data is read. See :mod:`mysql_cdc.udtf.sync.job`.
    """
    from mysql_cdc.large_values import sync_folder
    from mysql_cdc.planner.plan import check_server_id_claims, describe_tables
    from mysql_cdc.profiles import resolve_profile
    from mysql_cdc.state.store import StateStore, tighten_umask
    from mysql_cdc.udtf.spark.compat import check_pyspark, lake_formats, local_mode, once_trigger, stop_when_caught_up
    from mysql_cdc.udtf.spark.register import _is_connect, _profiles
    from mysql_cdc.udtf.sync.job import start_sync
    from mysql_cdc.udtf.sync.mirror import check_tables
    from mysql_cdc.udtf.sync.sinks import (
        check_format,
        choose_writer,
        local_large_values,
        parse_target,
        sync_stream_options,
    )
    from mysql_cdc.udtf.sync.target import check_sync_paths, hold_sync_locks, keep_sync_locks, release_sync_locks

    remote = _is_connect(spark)
    check_pyspark(str(spark.version) if remote else None)  # before anything else: one clear error
    if remote and on_batch is not None:
        raise ConfigError("on_batch runs in the process of the batch function, which a Spark Connect session runs "
                          "in the server: drop it, or use a classic session")
    # every path checked before anything is created; made absolute in a classic session (Spark resolves the
    # checkpoint in the JVM, the batch function in this process: one meaning)
    to, checkpoint, state_dir = check_sync_paths(to, checkpoint, state_dir, remote=remote)
    writer = choose_writer(parse_target(to), lake_formats(spark), check_format(format))  # the format, its writer
    given = {"source": source, "tables": tables, "exclude": exclude, "state_dir": state_dir, **options}
    large = options.get("large_value_dir")
    merged = {**sync_stream_options(writer, None if large is not None else local_large_values(state_dir,
                                                                                                local_mode(spark))),
              **{k: str(v) for k, v in given.items() if v is not None}}
    if large == "":  # asked for none
        del merged["large_value_dir"]
    opts = parse_options(merged)
    if large:  # a folder of this sync's own under the one given, with one meaning for this process and its workers
        if remote and not posixpath.isabs(str(large)):
            raise ConfigError(f"large_value_dir {large!r} is relative: over Spark Connect give the server's "
                              "folder as an absolute path")
        merged["large_value_dir"] = sync_folder(str(large) if remote else os.path.abspath(str(large)), state_dir)
        opts = parse_options(merged)
    registered = _profiles(profiles)
    if remote and opts.source in registered and registered[opts.source].password:
        from mysql_cdc.udtf.spark.batch_source import connect_stream_secret_error

        raise connect_stream_secret_error(opts.source)
    schemas: list[Any] | None = None
    if not remote:  # a Connect client needs no profile and no connection: the server describes the tables
        profile = resolve_profile(opts, registered)
        check_server_id_claims(profile, opts)
        _, current = describe_tables(profile, opts)
        # a table's mirror has the columns the capture recorded (its rows come with them), not a later ALTER's
        store = StateStore(state_dir)
        schemas = [store.schema(s.table) or s for s in current]
        check_tables(schemas)
    # the profile this process resolved goes to executors as the session's file (docs/DESIGN.md §8)
    carry = (opts.source,) if opts.source and not remote and opts.source not in registered else ()
    register(spark, profiles, carry=carry)
    trigger = once_trigger() if once else {"processingTime": f"{trigger_seconds} seconds"}
    if once:
        merged["once"] = "true"
    if remote:  # the server's batch function locks, where it writes
        query = start_sync(spark, opts, schemas, to, checkpoint, merged, trigger, on_batch, remote,
                           lake_formats(spark), format)
        if once:
            stop_when_caught_up(query)
        return query
    tighten_umask()
    locks = hold_sync_locks(state_dir, to)
    try:
        query = start_sync(spark, opts, schemas, to, checkpoint, merged, trigger, on_batch, remote,
                           lake_formats(spark), format)
    except BaseException:
        release_sync_locks(locks)
        raise
    keep_sync_locks(spark, locks, query)
    if once:
        stop_when_caught_up(query)
    return query


def verify(spark: Any, *, checkpoint: str, state_dir: str, source: str | None = None, tables: str | None = None,
           profiles: Any = None, max_rows_per_second: float = 0.0, recheck_seconds: float = 30.0,
           repair: bool = False, repair_seconds: float = 600.0, **options: Any) -> Any:
    """Compare every table a sync mirrors (or those whose ``db.table`` matches one of the comma-separated regular
    expressions ``tables``) with its source, chunk by chunk, by checksums of buckets of keys at one binlog point,
    while the sync runs or not: a :class:`~mysql_cdc.udtf.sync.verify.VerifyReport` (``.ok``, ``.lines()``,
    ``.to_dict()``). The source is read in one read view, chunk by chunk (at most ``max_rows_per_second``; 0: as
    fast as it goes); only the keys and row hashes of buckets that differ and of keys in flux leave it; the mirror
    is read by Spark. ``checkpoint`` and ``state_dir`` are the sync's. See :mod:`mysql_cdc.udtf.sync.verify`.

    ``repair``: the tables that differ are snapshotted again by the running sync (:func:`resnapshot`), waited
    for up to ``repair_seconds``, and verified again; the report then holds their new checks and what was done
    (``.repair``). A sync that is not running takes the request when it starts (the report says so)."""
    import math
    import time

    from mysql_cdc.connect import connect
    from mysql_cdc.planner.plan import inspect_server as _inspect
    from mysql_cdc.profiles import resolve_profile
    from mysql_cdc.state.store import StateStore, capture_options
    from mysql_cdc.udtf.spark.compat import check_pyspark, lake_formats, session_udf
    from mysql_cdc.udtf.spark.register import _is_connect, _profiles
    from mysql_cdc.udtf.sync.verify import Verifier

    check_pyspark(str(spark.version) if _is_connect(spark) else None)
    if not math.isfinite(max_rows_per_second) or max_rows_per_second < 0:
        raise ConfigError(f"max_rows_per_second must be 0 (no limit) or more, not {max_rows_per_second!r}")
    if not math.isfinite(recheck_seconds) or recheck_seconds < 0:
        raise ConfigError(f"recheck_seconds must be 0 (no second look) or more, not {recheck_seconds!r}")
    if not math.isfinite(repair_seconds) or repair_seconds < 0:
        raise ConfigError(f"repair_seconds must be 0 or more, not {repair_seconds!r}")
    from mysql_cdc.udtf.sync.resnapshot import matching

    store = StateStore(state_dir)
    # the captured tables the patterns match: none is a mistake (one error, before the server is asked), not a
    # clean report of nothing
    chosen = set(matching(store, tables or ".*"))
    opts = parse_options({**{k: str(v) for k, v in options.items()}, "state_dir": state_dir,
                          **({"source": source} if source else {}), "tables": tables or ".*"})
    captured = capture_options(store)
    profile = resolve_profile(opts, _profiles(profiles))
    conn = connect(profile)
    try:
        facts = _inspect(conn)
    finally:
        conn.close()
    verifier = Verifier(spark, profile, opts, facts, store, checkpoint, max_rows_per_second=max_rows_per_second,
                        recheck_seconds=recheck_seconds, tinyint1_as_boolean=captured.tinyint1_as_boolean,
                        lakes=lake_formats(spark), udf=session_udf(spark))
    started = time.monotonic()
    report = _check_tables(verifier, store, checkpoint, profile, opts, lambda t: t in chosen, started)
    if not repair or report.ok:
        return report
    from mysql_cdc.udtf.sync.verify import repair_tables

    return repair_tables(report, store, checkpoint, repair_seconds, started,
                         lambda chosen: _check_tables(verifier, store, checkpoint, profile, opts,
                                                      lambda t: t in chosen, started))


def resnapshot(*, state_dir: str, tables: str | None = None, request: int | None = None, why: str = "",
               checkpoint: str | None = None, wait_seconds: float = 0.0, key_from: Any = None,
               key_to: Any = None, keys: Any = ()) -> Any:
    """Snapshot tables of a sync again while it runs (or when it next starts): those it captures whose
    ``db.table`` matches one of the comma-separated regular expressions ``tables``. The sync takes the request
    at its next micro-batch: that batch empties their mirror tables, and the next ones fill them from a new
    snapshot while the binlog waits; nothing is lost or doubled (see :mod:`mysql_cdc.udtf.sync.resnapshot`).
    Returns where the request stands (:class:`~mysql_cdc.state.resnapshot.RequestProgress`: ``.request``,
    ``.state``, ``.line()``), after waiting up to ``wait_seconds`` for it to be done (needs the sync's
    ``checkpoint``). With ``request`` instead of ``tables``: where that earlier request stands.

    ``key_from``/``key_to`` (one table, a chunk key of integer, binary, DECIMAL (up to 15 digits), DATE, DATETIME
    or TIMESTAMP columns; values separated by commas: integers, ``0x`` and hex digits, decimal numbers, ISO dates
    and times (a TIMESTAMP's in UTC unless the text names its zone), or a sequence of such Python values, one per
    key column): only the mirror's rows with a key in ``[key_from, key_to)`` are deleted and read again (either
    end may be left open); the rest of the table stays as it is. ``keys`` (one table, the same kind of key): a
    list of keys, each a value, a sequence of them or their text: only those keys are read again (with
    ``key_from``/``key_to``: those and the range's)."""
    import math

    from mysql_cdc.state.store import StateStore
    from mysql_cdc.udtf.sync.resnapshot import ask, key_range, matching, wait, where
    from mysql_cdc.udtf.sync.target import sync_holds

    if (tables is None) == (request is None):
        raise ConfigError("give tables (regular expressions over 'db.table') to snapshot again, or the number of "
                          f"an earlier request to see where it stands: one of the two (tables={tables!r}, "
                          f"request={request!r})")
    if not math.isfinite(wait_seconds) or wait_seconds < 0 or (wait_seconds and checkpoint is None):
        raise ConfigError(f"wait_seconds {wait_seconds!r} must be 0 or more, and waiting needs the sync's checkpoint")
    store = StateStore(state_dir)
    if request is None:
        assert tables is not None
        found = matching(store, tables)
        bounds = None
        keys = ([keys] if isinstance(keys, (int, str, bytes, bytearray, Decimal, dt.date))
                else [] if keys is None else list(keys))
        if key_from is not None or key_to is not None or keys:
            if len(found) != 1:
                raise ConfigError(f"keys and key bounds name a range of one table, but tables {tables!r} matches "
                                  f"{', '.join(map(str, found))}: give a pattern of that table alone")
            bounds = key_range(store, found[0], key_from, key_to, keys)
        request = ask(store, found, why, bounds)
    if not wait_seconds:
        return where(store, checkpoint, request)
    assert checkpoint is not None
    return wait(store, checkpoint, request, wait_seconds, sync_holds(state_dir))


def _check_tables(verifier: Any, store: Any, checkpoint: str, profile: Any, opts: Any, selected: Any,
                  started: float) -> Any:
    """Verify each captured table ``selected`` takes (:func:`verify`)."""
    import time

    from mysql_cdc.planner.plan import describe_now
    from mysql_cdc.state.history import schema_at
    from mysql_cdc.udtf.sync.job import batch_end, captured_schemas, committed_batches
    from mysql_cdc.udtf.sync.verify import TableCheck, VerifyReport, column_drift, nullable_either

    checks: list[TableCheck] = []
    done = committed_batches(checkpoint)
    end = batch_end(checkpoint, done) if done >= 0 else {}
    for schema in captured_schemas(store):
        name = str(schema.table)
        if not selected(schema.table):
            continue
        if not schema.primary_key:
            checks.append(TableCheck(name, not_checked="no primary key: the sync does not mirror it"))
            continue
        if end.get("phase") == "binlog":
            entry = schema_at(store.history(schema.table), str(end["file"]), int(end["pos"]))
            if entry is not None and entry.schema is not None:
                schema = entry.schema
        now = describe_now(profile, opts, schema.table)
        if now is None:
            checks.append(TableCheck(name, not_checked="the table is gone from the source"))
            continue
        drift = column_drift(schema.columns, now[0].columns)
        if drift is not None:
            checks.append(TableCheck(name, not_checked=f"its columns changed since the mirror's point ({drift}): "
                                     "verify again once the sync has followed the change"))
            continue
        checks.append(verifier.check(nullable_either(schema, now[0].columns)))
    return VerifyReport(tuple(checks), time.monotonic() - started)
