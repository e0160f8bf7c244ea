"""``mysql-cdc``: the job from a terminal.

    mysql-cdc plan --source shop --tables 'shop[.].*' [--chunk-size 100000]
    mysql-cdc snapshot --source shop --table shop.orders --out /data/orders [--replace] [--state-dir D]
    mysql-cdc follow --source shop --table shop.orders --out /data/orders_cdc --checkpoint C --state-dir D [--once]
    mysql-cdc follow --source shop --tables 'shop[.].*' --out /data/shop_cdc --checkpoint C --state-dir D
    mysql-cdc status --state-dir D [--table shop.orders]
    mysql-cdc sync --source shop --tables 'shop[.].*' --to /lake/shop --checkpoint C --state-dir D [--once]

``--source`` names a profile from ``$MYSQL_CDC_PROFILE_<NAME>`` or ``$MYSQL_CDC_PROFILES_FILE``; passwords
never go on the command line (other users could read it in the process list).
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import time
from typing import Any

from mysql_cdc.errors import ConfigError, MysqlCdcError, StateError
from mysql_cdc.options import SCHEMA_CHANGES
from mysql_cdc.progress import Progress, sync_lines


def _opts(ns: argparse.Namespace, **extra: Any) -> dict[str, Any]:
    out = {"source": ns.source, **extra}
    return {k: v for k, v in out.items() if v is not None}


def _local_spark(master: str, name: str) -> Any:
    try:
        from pyspark.sql import SparkSession
    except ImportError as e:
        raise ConfigError(f"this command runs Spark locally, but pyspark cannot be imported ({e}); install it "
                          "with: pip install 'pyspark-mysql-cdc[spark]'") from e
    spark = (SparkSession.builder.master(master).appName(name).config("spark.ui.enabled", "false")
             .config("spark.ui.showConsoleProgress", "false").getOrCreate())  # our progress, not Spark's
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def cmd_plan(ns: argparse.Namespace) -> int:
    from mysql_cdc.chunks import encode_key
    from mysql_cdc.options import parse_options
    from mysql_cdc.planner.plan import plan_tables
    from mysql_cdc.profiles import resolve_profile

    opts = parse_options(_opts(ns, tables=ns.tables, chunk_size=ns.chunk_size, chunk_key=ns.chunk_key))
    facts, plans = plan_tables(resolve_profile(opts), opts)
    print(f"server: {facts.version_text} ({facts.flavor}), watermarks: "
          f"{'snapshot' if facts.flavor == 'mariadb' else 'gtid' if facts.gtid_mode else 'position'}")
    for p in plans:
        key = f"key ({', '.join(p.schema.chunk_key)})" if p.schema.chunk_key else "no key: one chunk"
        print(f"{p.schema.table}: {key}, {len(p.chunks)} chunks")
        for c in p.chunks:
            if c.nulls:
                print(f"  {c.id}\tkeys with a NULL")
            else:
                print(f"  {c.id}\t{encode_key(c.start) or '-inf'}\t{encode_key(c.end) or '+inf'}")
    return 0


def _check_source(ns: argparse.Namespace) -> None:
    """Profile, server and tables checked before Spark starts: a configuration error is one line."""
    from mysql_cdc.options import parse_options
    from mysql_cdc.planner.plan import describe_table, describe_tables
    from mysql_cdc.profiles import resolve_profile

    tables, exclude = getattr(ns, "tables", None), getattr(ns, "exclude", None)
    opts = parse_options(_opts(ns, table=ns.table, tables=tables, exclude=exclude, chunk_key=ns.chunk_key))
    if opts.tables:
        describe_tables(resolve_profile(opts), opts)
    else:
        describe_table(resolve_profile(opts), opts, ns.table)


def cmd_snapshot(ns: argparse.Namespace) -> int:
    import os
    import threading

    if os.path.lexists(ns.out) and not ns.replace:
        raise ConfigError(f"--out {ns.out!r} exists already; give a new path, or --replace to overwrite it")
    _check_source(ns)
    import mysql_cdc

    spark = _local_spark(ns.master, "mysql-cdc snapshot")
    mysql_cdc.register(spark)
    reader = spark.read.format("mysql_cdc").option("source", ns.source).option("table", ns.table)
    for key, value in (("chunk_size", ns.chunk_size), ("state_dir", ns.state_dir), ("chunk_key", ns.chunk_key)):
        if value is not None:
            reader = reader.option(key, value)
    started = time.monotonic()
    df = reader.load()
    progress, stop = Progress(), threading.Event()

    def watch() -> None:  # tasks of the reading stage: each reads a group of chunks (option partitions)
        tracker = spark.sparkContext.statusTracker()
        while not stop.wait(1.0):
            for sid in tracker.getActiveStageIds():
                info = tracker.getStageInfo(sid)
                if info is not None and info.numTasks:
                    progress.show(f"{ns.table}: tasks {info.numCompletedTasks}/{info.numTasks}, "
                                  f"{time.monotonic() - started:.0f} s")

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        df.write.mode("overwrite" if ns.replace else "errorifexists").format(ns.format).save(ns.out)
    finally:
        stop.set()
        watcher.join(5)
    n = spark.read.format(ns.format).load(ns.out).count()
    seconds = time.monotonic() - started
    progress.show(f"{ns.table}: {n} rows written to {ns.out} in {seconds:.1f} s ({n / max(seconds, 1e-9):,.0f} "
                  "rows/s)", final=True)
    spark.stop()
    return 0


def _binlog_lag(ns: argparse.Namespace, offset: dict[str, Any]) -> str:
    """How far a binlog offset is behind the server's end: ``binlog lag N bytes``, or ``lag unknown``."""
    behind = _binlog_bytes_behind(ns, offset)
    return "lag unknown" if behind is None else f"binlog lag {behind:,} bytes"


def _binlog_bytes_behind(ns: argparse.Namespace, offset: dict[str, Any]) -> int | None:
    """How many bytes a binlog offset is behind the server's end (binary log sizes from the server); ``None``
    when the server does not answer."""
    from mysql_cdc.offsets import binlog_file_key
    from mysql_cdc.options import parse_options
    from mysql_cdc.profiles import resolve_profile
    from mysql_cdc.udtf.binlog.startup import binary_logs

    try:
        files = binary_logs(resolve_profile(parse_options(_opts(ns))))
    except Exception:  # ours, or the driver's (a server restarting): progress only
        return None
    at, pos = binlog_file_key(str(offset["file"])), int(offset["pos"])
    behind = sum(size - (pos if binlog_file_key(name) == at else 0) for name, size in files
                 if binlog_file_key(name) >= at)
    return max(behind, 0)


def _end_offset(progress: dict[str, Any] | None) -> tuple[Any, dict[str, Any]]:
    """A micro-batch's progress: the end offset of its source as given, and as a dict."""
    from mysql_cdc.udtf.spark.compat import progress_offset

    raw = (progress["sources"] or [{}])[0].get("endOffset") if progress else None
    return raw, progress_offset(raw)


def _watch(spark: Any, query: Any, report: Any, what: str, finish: Any = None) -> int:
    """Run ``report`` every second until the query ends (Ctrl-C stops it), then once more and ``finish``; stop
    Spark; 1 with the query's error in one line, else 0."""
    try:
        while query.isActive:
            query.awaitTermination(1)
            report()
    except KeyboardInterrupt:
        query.stop()
    except Exception:  # the query ended with an error: said below
        pass
    report()
    if finish is not None:
        finish()
    failure = query.exception()
    spark.stop()
    if failure is not None:
        print(f"mysql-cdc: the {what} stopped: {one_line(failure)}", file=sys.stderr)
        return 1
    return 0


_FLAGS = {
    "allow_statement_writes": "let statements logged as SQL text (sessions with binlog_format STATEMENT or MIXED) "
                              "that name no captured table pass; what a trigger, view or stored function wrote "
                              "through them is then missing (default: they stop the job)",
    "unchecked_server_ids": "claim replica server ids without checking them against the server's replicas (a "
                            "capture user that may not list them: MariaDB without REPLICATION MASTER ADMIN)",
}


def _flags(ns: argparse.Namespace) -> list[tuple[str, Any]]:
    """The options given as flags (true when set)."""
    return [(k, "true") for k in _FLAGS if getattr(ns, k, False)]


def cmd_follow(ns: argparse.Namespace) -> int:
    """The snapshot, then the binlog, into files (a Structured Streaming query with local Spark)."""
    _check_source(ns)
    import mysql_cdc
    from mysql_cdc.udtf.spark.compat import once_trigger, stop_when_caught_up

    spark = _local_spark(ns.master, "mysql-cdc follow")
    mysql_cdc.register(spark)
    reader = spark.readStream.format("mysql_cdc").option("source", ns.source).option("state_dir", ns.state_dir)
    for key, value in (("table", ns.table), ("tables", ns.tables), ("exclude", ns.exclude),
                       ("chunk_size", ns.chunk_size), ("max_chunks_per_batch", ns.max_chunks_per_batch),
                       ("max_rows_per_batch", ns.max_rows_per_batch), ("chunk_key", ns.chunk_key),
                       ("schema_changes", ns.schema_changes), ("binlog_partitions", ns.binlog_partitions),
                       ("once", "true" if ns.once else None), *_flags(ns)):
        if value is not None:
            reader = reader.option(key, value)
    writer = (reader.load().writeStream.format(ns.format).option("path", ns.out)
              .option("checkpointLocation", ns.checkpoint))
    writer = writer.trigger(**once_trigger()) if ns.once else writer.trigger(processingTime=f"{ns.interval} seconds")
    query = writer.start()
    if ns.once:
        stop_when_caught_up(query)
    seen = -1
    progress = Progress()

    def report() -> None:
        nonlocal seen
        for p in query.recentProgress:  # every batch since the last report, not only the latest
            if p["batchId"] > seen:
                seen = p["batchId"]
                raw, end = _end_offset(p)
                rate = p.get("processedRowsPerSecond") or 0.0
                if end.get("phase") == "snapshot":
                    where = f"snapshot chunks {end.get('chunk')}/{end.get('chunks')}"
                    if end.get("round"):
                        where += f" of tables added (round {end['round']})"
                elif end.get("phase") == "binlog":
                    where = f"binlog {end.get('file')}:{end.get('pos')}, {_binlog_lag(ns, end)}"
                else:
                    where = f"offset {raw}"
                progress.show(f"batch {seen}: {p['numInputRows']} rows ({rate:,.0f} rows/s), {where}")

    def end_line() -> None:  # the line rewritten in place ends
        if progress.tty:
            progress.stream.write("\n")

    return _watch(spark, query, report, "stream", end_line)


def cmd_sync(ns: argparse.Namespace) -> int:
    """Mirror the matched tables into Delta tables and keep them mirrored (mysql_cdc.sync with local Spark)."""
    from mysql_cdc.udtf.sync.target import check_sync_paths, hold_sync_locks, keep_sync_locks

    # before Spark starts: a bad path, or another sync on them (it holds locks in both folders), is one line
    to, _, state_dir = check_sync_paths(ns.to, ns.checkpoint, ns.state_dir)
    if os.path.isdir(state_dir) and os.path.isdir(to):
        keep_sync_locks(None, hold_sync_locks(state_dir, to), None)
    _check_source(ns)
    import mysql_cdc

    spark = _local_spark(ns.master, "mysql-cdc sync")
    batches: list[Any] = []
    extra = {k: v for k, v in (("chunk_size", ns.chunk_size), ("max_chunks_per_batch", ns.max_chunks_per_batch),
                               ("max_rows_per_batch", ns.max_rows_per_batch), ("schema_changes", ns.schema_changes),
                               ("binlog_partitions", ns.binlog_partitions), *_flags(ns))
             if v is not None}
    query = mysql_cdc.sync(spark, to=ns.to, checkpoint=ns.checkpoint, state_dir=ns.state_dir, tables=ns.tables,
                           source=ns.source, exclude=ns.exclude, trigger_seconds=ns.interval, once=ns.once,
                           on_batch=batches.append, **extra)
    progress, shown = Progress(), 0

    def report() -> None:
        nonlocal shown
        while shown < len(batches):
            stats = batches[shown]
            shown += 1
            lag_bytes = "lag bytes unknown"
            _, end = _end_offset(query.lastProgress)
            if end.get("phase") == "binlog":
                behind = _binlog_bytes_behind(ns, end)
                lag_bytes = "lag unknown" if behind is None else f"{behind:,} bytes"
            elif end.get("phase") == "snapshot":
                lag_bytes = "in the snapshot"
            try:
                progress.show_block(sync_lines(stats, ns.state_dir, lag_bytes, time.time()))
            except Exception as e:  # progress is best effort: the job goes on
                progress.show(f"batch {stats.batch_id}: no progress ({one_line(e)})")

    return _watch(spark, query, report, "sync")


def cmd_status(ns: argparse.Namespace) -> int:
    from mysql_cdc.ids import TableId
    from mysql_cdc.state.store import StateStore

    store = StateStore(ns.state_dir)
    if not store.exists():
        raise StateError(f"state directory {ns.state_dir!r} does not exist: give the --state-dir the snapshot or "
                         "stream recorded into")
    if ns.table is None:  # every table: one line each, then every committed stream offset
        for table in store.recorded_tables():
            recs = store.chunk_records(table)
            planned = store.plan(table)
            print(f"{table}: {len(recs)}/{len(planned) if planned is not None else '?'} chunks recorded, "
                  f"{sum(r.rows for r in recs)} rows")
        for name, offset in sorted(store.offsets().items()):
            print(f"committed stream offset ({name}): {offset}")
        return 0
    table = TableId.parse(ns.table)
    recs = store.chunk_records(table)
    if not recs and store.plan(table) is None:
        known = ", ".join(map(str, store.recorded_tables())) or "none"
        raise StateError(f"nothing is recorded for table {ns.table!r} under {ns.state_dir!r}; tables recorded "
                         f"there: {known}")
    print(f"{ns.table}: {len(recs)} chunks recorded, {sum(r.rows for r in recs)} rows")
    for r in recs:
        print(f"  {r.id}\trows={r.rows}\thigh={r.high.to_dict()}")
    committed = StateStore(ns.state_dir).offset(ns.table)
    print(f"committed stream offset: {committed if committed is not None else 'none'}")
    return 0


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("pyspark-mysql-cdc")
    except PackageNotFoundError:  # a source checkout
        from mysql_cdc import __version__

        return f"{__version__} (source checkout)"


_CHUNK_SIZE = "rows per chunk (default: about 16 MiB of rows, by the table's average row length)"
_MASTER = "Spark master for the local job (default local[*])"


def _stream_arguments(p: argparse.ArgumentParser, max_chunks: str, max_rows: str) -> None:
    """The arguments of the commands that run a stream (follow, sync); their batch bounds' defaults differ."""
    p.add_argument("--chunk-size", type=int, help=_CHUNK_SIZE)
    p.add_argument("--max-chunks-per-batch", type=int, help=f"snapshot chunks per micro-batch (default {max_chunks})")
    p.add_argument("--max-rows-per-batch", type=int,
                   help=f"binlog change rows per micro-batch, rounded up to whole transactions (default {max_rows})")
    p.add_argument("--schema-changes", choices=SCHEMA_CHANGES,
                   help="follow (default: DDL on a captured table is followed, in place or by snapshotting that "
                        "table again) or stop (the first DDL stops the job)")
    p.add_argument("--binlog-partitions", type=int,
                   help="Spark tasks reading one micro-batch's binlog range at once, cut at transaction boundaries "
                        "into parts of at least 1 MB: parallel catch-up of a backlog (default 1)")
    for k, meaning in _FLAGS.items():
        p.add_argument("--" + k.replace("_", "-"), action="store_true", help=meaning)
    p.add_argument("--once", action="store_true", help="stop at the binlog end taken at the start (availableNow)")
    p.add_argument("--interval", type=float, default=1.0, help="seconds between micro-batches (default 1)")
    p.add_argument("--master", default="local[*]", help=_MASTER)


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="mysql-cdc", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    sub = ap.add_subparsers(dest="command", required=True)
    src = "connection profile name: $MYSQL_CDC_PROFILE_<NAME> or an entry of $MYSQL_CDC_PROFILES_FILE"
    chunk_size, master = _CHUNK_SIZE, _MASTER
    chunk_key = ("columns that split tables without a primary key (may repeat and be NULL), or '<pattern>:<columns>' "
                 "entries separated by ';'; without one such a table is one chunk")
    p = sub.add_parser("plan", help="validate the server and print the chunks of the matched tables")
    p.add_argument("--source", required=True, help=src)
    p.add_argument("--tables", required=True, help="comma-separated regular expressions over 'db.table'")
    p.add_argument("--chunk-size", type=int, help=chunk_size)
    p.add_argument("--chunk-key", help=chunk_key)
    p.set_defaults(fn=cmd_plan)
    s = sub.add_parser("snapshot", help="read one table in parallel into files with local Spark")
    s.add_argument("--source", required=True, help=src)
    s.add_argument("--table", required=True, help="the table, 'db.table'")
    s.add_argument("--out", required=True, help="output path (refused if it exists, unless --replace)")
    s.add_argument("--replace", action="store_true", help="overwrite an existing --out")
    s.add_argument("--format", default="parquet", help="Spark output format (default parquet)")
    s.add_argument("--chunk-size", type=int, help=chunk_size)
    s.add_argument("--chunk-key", help=chunk_key)
    s.add_argument("--state-dir", help="record each chunk's watermarks here (for a later binlog read)")
    s.add_argument("--master", default="local[*]", help=master)
    s.set_defaults(fn=cmd_snapshot)
    f = sub.add_parser("follow", help="snapshot, then follow the binlog, into files (Structured Streaming)")
    f.add_argument("--source", required=True, help=src)
    which = f.add_mutually_exclusive_group(required=True)
    which.add_argument("--table", help="the table, 'db.table' (its columns, typed)")
    which.add_argument("--tables", help="comma-separated regular expressions over 'db.table': every matched table, "
                       "one binlog reader, rows as JSON in __values (mysql_cdc.split types them)")
    f.add_argument("--exclude", help="with --tables: regular expressions over 'db.table' of tables not captured")
    f.add_argument("--out", required=True, help="output path of the change rows")
    f.add_argument("--checkpoint", required=True, help="Spark checkpoint location (keep it with --state-dir)")
    f.add_argument("--state-dir", required=True, help="chunk plan, watermarks and schema of this capture")
    f.add_argument("--format", default="parquet", help="Spark output format (default parquet)")
    f.add_argument("--chunk-key", help=chunk_key)
    _stream_arguments(f, "all", "no limit")
    f.set_defaults(fn=cmd_follow)
    y = sub.add_parser("sync", help="mirror the matched tables into Delta tables, exactly once, and keep them "
                       "mirrored (the main job)")
    y.add_argument("--source", required=True, help=src)
    y.add_argument("--tables", required=True, help="comma-separated regular expressions over 'db.table'")
    y.add_argument("--exclude", help="regular expressions over 'db.table' of tables not mirrored")
    y.add_argument("--to", required=True, help="directory of the Delta tables: <to>/<database>/<table>")
    y.add_argument("--checkpoint", required=True, help="Spark checkpoint location (keep it with --state-dir)")
    y.add_argument("--state-dir", required=True, help="chunk plan, watermarks and schema of this capture")
    _stream_arguments(y, "4", "200000")
    y.set_defaults(fn=cmd_sync, table=None, chunk_key=None)
    st = sub.add_parser("status", help="print the recorded chunk watermarks of a table, or a summary of every table")
    st.add_argument("--state-dir", required=True, help="the state directory of a snapshot or stream")
    st.add_argument("--table", help="the table, 'db.table' (default: a line for every recorded table)")
    st.set_defaults(fn=cmd_status)
    return ap


def main(argv: list[str] | None = None) -> int:
    from mysql_cdc.state.store import tighten_umask

    ns = build_parser().parse_args(argv)
    tighten_umask()  # what this job writes (and Spark's JVM, which takes the umask from here) is not world-writable
    try:
        return int(ns.fn(ns))
    except MysqlCdcError as e:
        print(f"mysql-cdc: {type(e).__name__}: {e}", file=sys.stderr)
        return 2
    except Exception as e:  # a Spark error carrying one of ours: its one line, not the JVM's traceback
        if _OUR_ERROR.search(str(e)) is None:
            raise
        print(f"mysql-cdc: {one_line(e)}", file=sys.stderr)
        return 2


_OUR_ERROR = re.compile(r"mysql_cdc\.errors\.(\w+): ([^\n]*)")


def one_line(e: BaseException) -> str:
    """The error of ours inside a Spark error's text (the last one named), else the error's first line."""
    found = _OUR_ERROR.findall(str(e))
    if found:
        name, message = found[-1]
        return f"{name}: {message.strip()}"
    text = str(e).strip().splitlines()
    return text[0] if text else type(e).__name__


if __name__ == "__main__":
    sys.exit(main())
