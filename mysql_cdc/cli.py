"""``mysql-cdc``: the job from a terminal.

    mysql-cdc plan --source shop --tables 'shop[.].*' [--chunk-size 100000]
    mysql-cdc snapshot --source shop --table shop.orders --out /data/orders [--replace] [--state-dir D]
    mysql-cdc follow --source shop --table shop.orders --out /data/orders_cdc --checkpoint C --state-dir D [--once]
    mysql-cdc follow --source shop --tables 'shop[.].*' --out /data/shop_cdc --checkpoint C --state-dir D
    mysql-cdc status --state-dir D [--table shop.orders]
    mysql-cdc sync --source shop --tables 'shop[.].*' --to /lake/shop --checkpoint C --state-dir D [--once]
    mysql-cdc verify --source shop --checkpoint C --state-dir D [--tables 'shop[.]orders']

``--source`` names a profile from ``$MYSQL_CDC_PROFILE_<NAME>`` or ``$MYSQL_CDC_PROFILES_FILE``; passwords
never go on the command line (other users could read it in the process list).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import logging
import os
import re
import subprocess
import sys
import time
from typing import Any

from mysql_cdc.errors import ConfigError, MysqlCdcError, StateError
from mysql_cdc.failure import log_cause, one_line
from mysql_cdc.options import SCHEMA_CHANGES
from mysql_cdc.progress import Progress, sync_lines


def _opts(ns: argparse.Namespace, **extra: Any) -> dict[str, Any]:
    out = {"source": ns.source, **extra}
    return {k: v for k, v in out.items() if v is not None}


def _local_spark(ns: argparse.Namespace, name: str) -> Any:
    """Spark for a command. In local mode the workers run this Python (it has pyarrow and the drivers; the
    ``python3`` on the PATH may not) unless ``PYSPARK_PYTHON`` says otherwise; the driver gets
    ``--driver-memory``; Spark's own output (its start-up warnings, log lines, the Python workers' messages)
    goes to the ``--log`` file, not the terminal, unless ``--debug``."""
    try:
        from pyspark import SparkConf, SparkContext
        from pyspark.java_gateway import launch_gateway
        from pyspark.sql import SparkSession
    except ImportError as e:
        raise ConfigError(f"this command runs Spark locally, but pyspark cannot be imported ({e}); install it "
                          "with: pip install 'pyspark-mysql-cdc[spark]'") from e
    if ns.master.startswith("local"):
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    conf = SparkConf().setMaster(ns.master).setAppName(name).set("spark.ui.showConsoleProgress", "false")
    if ns.master.startswith("local"):  # a cluster's UI stays on: it is where its users look
        conf = conf.set("spark.ui.enabled", "false")
    if ns.driver_memory:
        conf = conf.set("spark.driver.memory", ns.driver_memory)
    for key, value in getattr(ns, "conf", None) or ():
        conf = conf.set(key, value)
    if SparkContext._active_spark_context is not None:  # an embedding process made one already
        return SparkSession.builder.config(conf=conf).getOrCreate()
    popen: dict[str, Any] | None = None
    if not ns.debug:
        ns.log = _log_file(ns.log, name)
        ns.log_from = os.path.getsize(ns.log) if os.path.exists(ns.log) else 0  # this run's part of it
        popen = {"stdout": open(ns.log, "ab"), "stderr": subprocess.STDOUT}  # noqa: SIM115 - the JVM keeps it
    try:
        gateway = launch_gateway(conf, popen_kwargs=popen)
    finally:
        if popen is not None:
            popen["stdout"].close()
    if not ns.debug:
        _noise_to_log(ns.log)
    spark = SparkSession(SparkContext(conf=conf, gateway=gateway))
    spark.sparkContext.setLogLevel("ERROR")
    return spark


_TERMINAL: list[Any] = []  # the terminal's stderr, once Spark's noise goes to its log


def _err() -> Any:
    """Where the CLI's own lines to stderr go: the terminal's, also after :func:`_noise_to_log`."""
    return _TERMINAL[0] if _TERMINAL else sys.stderr


def _noise_to_log(log: str) -> None:
    """What the driver's Python threads print when Spark fails (py4j's callback server and gateway client,
    the accumulator server: a hundred lines of traceback when the JVM dies) goes to the Spark log; the CLI's
    own lines, and the warnings of this package (a lost server tried again), still reach the terminal.

    The log is written through without a buffer of its own: those threads are daemons and may still be writing
    when the interpreter finalizes, and a buffered file's lock held by one of them then aborts the process
    ("could not acquire lock ... at interpreter shutdown"): exit code -6 and a fatal error on the terminal
    after the CLI's one line."""
    if _TERMINAL:
        return
    _TERMINAL.append(sys.stderr)
    raw = open(log, "ab", buffering=0)  # noqa: SIM115 - for the life of the process
    noise = io.TextIOWrapper(raw, encoding="utf-8", errors="replace", line_buffering=True, write_through=True)
    for h in logging.getLogger().handlers:
        if isinstance(h, logging.StreamHandler) and h.stream is sys.stderr:
            h.setStream(noise)
    sys.stderr = noise
    ours = logging.getLogger("mysql_cdc")
    if not ours.handlers:
        handler = logging.StreamHandler(_TERMINAL[0])
        handler.setFormatter(_OneName("mysql-cdc: %(message)s"))
        handler.setLevel(logging.WARNING)
        ours.addHandler(handler)


class _OneName(logging.Formatter):
    """The CLI's name once before a warning of the package, whose messages name the package themselves.

    >>> rec = logging.LogRecord("mysql_cdc", logging.WARNING, "", 0, "mysql_cdc: lost; trying again", None, None)
    >>> _OneName("mysql-cdc: %(message)s").format(rec)
    'mysql-cdc: lost; trying again'
    """

    def format(self, record: logging.LogRecord) -> str:
        text = super().format(record)
        return "mysql-cdc: " + text[len("mysql-cdc: mysql_cdc: "):] if text.startswith("mysql-cdc: mysql_cdc: ") \
            else text


def _log_file(given: str | None, name: str) -> str:
    """Where Spark's output goes: ``--log``, else a new private file under the temporary directory."""
    if given:
        return os.path.abspath(given)
    import tempfile

    folder = os.path.join(tempfile.gettempdir(), f"mysql-cdc-{os.getuid()}")
    os.makedirs(folder, mode=0o700, exist_ok=True)
    if os.stat(folder).st_uid != os.getuid() or os.stat(folder).st_mode & 0o077:
        folder = tempfile.mkdtemp(prefix="mysql-cdc-")  # not ours, or not private: a new one
    stamp = time.strftime("%Y%m%d-%H%M%S")
    return os.path.join(folder, f"{name.replace(' ', '-')}-{stamp}-{os.getpid()}.log")


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


def cmd_tables(ns: argparse.Namespace) -> int:
    """The tables the patterns match (and those ``--exclude`` leaves out), checked as a capture checks them."""
    from mysql_cdc.connect import connect
    from mysql_cdc.options import parse_options
    from mysql_cdc.planner.discover import data_tables, table_matches
    from mysql_cdc.planner.plan import describe_tables
    from mysql_cdc.profiles import resolve_profile

    opts = parse_options(_opts(ns, tables=ns.tables, exclude=ns.exclude, chunk_key=ns.chunk_key, **dict(_flags(ns))))
    profile = resolve_profile(opts)
    conn = connect(profile)
    try:
        seen = [t for t, _ in data_tables(conn)]
    finally:
        conn.close()
    left_out = [t for t in seen if table_matches(t, opts.table_patterns) and not table_matches(
        t, opts.table_patterns, opts.exclude_patterns)]
    _, schemas = describe_tables(profile, opts)  # the checks a capture makes: one line each on failure
    for schema in schemas:
        key = schema.chunk_key
        kind = "primary key" if key and key == schema.primary_key else "chunk key" if key else "no key: one chunk"
        print(f"{schema.table}\t{kind}{' (' + ', '.join(key) + ')' if key else ''}\t{len(schema.columns)} columns")
    for t in left_out:
        print(f"{t}\texcluded")
    print(f"{len(schemas)} table(s) match, {len(left_out)} excluded", file=_err())
    return 0


def _check_source(ns: argparse.Namespace) -> None:
    """Profile, server and tables checked before Spark starts: a configuration error is one line."""
    from mysql_cdc.options import parse_options
    from mysql_cdc.planner.plan import describe_table, describe_tables
    from mysql_cdc.profiles import resolve_profile

    tables, exclude = getattr(ns, "tables", None), getattr(ns, "exclude", None)
    opts = parse_options(_opts(ns, table=ns.table, tables=tables, exclude=exclude, chunk_key=ns.chunk_key,
                               **dict(_flags(ns))))
    binlog = ns.command != "snapshot"  # a snapshot alone reads every row as it is, whatever the binlog lacks
    if opts.tables:
        describe_tables(resolve_profile(opts), opts, binlog=binlog)
    else:
        describe_table(resolve_profile(opts), opts, ns.table, binlog=binlog)


def cmd_snapshot(ns: argparse.Namespace) -> int:
    import os
    import threading

    if os.path.lexists(ns.out) and not ns.replace:
        raise ConfigError(f"--out {ns.out!r} exists already; give a new path, or --replace to overwrite it")
    _check_source(ns)
    import mysql_cdc

    spark = _local_spark(ns, "mysql-cdc snapshot")
    mysql_cdc.register(spark, carry=(ns.source,) if ns.source else ())
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
        write_output(spark, df, ns.out, ns.format, ns.replace)
    finally:
        stop.set()
        watcher.join(5)
    n = spark.read.format(ns.format).load(ns.out).count()
    seconds = time.monotonic() - started
    progress.show(f"{ns.table}: {n} rows written to {ns.out} in {seconds:.1f} s ({n / max(seconds, 1e-9):,.0f} "
                  "rows/s)", final=True)
    spark.stop()
    return 0


def write_output(spark: Any, df: Any, out: str, fmt: str, replace: bool) -> None:
    """Write ``df`` to ``out``; if the write fails where nothing was, nothing is left there (Spark's committer
    leaves an empty folder, which refused the next run: ``--out ... exists already``). Through Hadoop's
    filesystem, so any path Spark writes is served; an output that was there before is never removed."""
    path = spark._jvm.org.apache.hadoop.fs.Path(out)
    fs = path.getFileSystem(spark._jsc.hadoopConfiguration())
    was_there = fs.exists(path)
    try:
        df.write.mode("overwrite" if replace else "errorifexists").format(fmt).save(out)
    except BaseException:
        if not was_there:
            with contextlib.suppress(Exception):  # the write's own error is the one to show
                fs.delete(path, True)
        raise


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


def _position(progress: dict[str, Any] | None) -> str:
    """Where a stream's last batch ended, in words."""
    _, end = _end_offset(progress)
    return _offset_words(end)


def _committed_position(checkpoint: str) -> str:
    """Where the last batch a checkpoint (local or on a store) committed ended, in words."""
    from mysql_cdc.udtf.sync.job import batch_end, committed_batches

    done = committed_batches(checkpoint)
    try:
        return _offset_words(batch_end(checkpoint, done) if done >= 0 else {})
    except StateError:  # no offset logged for it: said as no batch
        return _offset_words({})


def _offset_words(end: dict[str, Any]) -> str:
    if end.get("phase") == "binlog":
        return f"binlog {end.get('file')}:{end.get('pos')}"
    if end.get("phase") == "snapshot":
        return f"snapshot chunk {end.get('chunk')} of {end.get('chunks')}"
    return "its start (no batch ran)"


def _watch(ns: argparse.Namespace, spark: Any, query: Any, report: Any, what: str, finish: Any = None) -> int:
    """Run ``report`` every second until the query ends, then once more and ``finish``; stop Spark. 0 when it
    ended; 2 (an error of ours, which names its fix) or 1 (any other) with the error in one line; 130 after
    Ctrl-C, which stops the query cleanly (its last batch committed or not run) and says where it stopped."""
    interrupted = False
    try:
        while query.isActive:
            query.awaitTermination(1)
            report()
    except KeyboardInterrupt:
        interrupted = True
        with contextlib.suppress(KeyboardInterrupt):  # a second Ctrl-C: stop waiting for the stop
            query.stop()
    except Exception:  # the query ended with an error: said below
        pass
    report()
    if finish is not None:
        finish()
    failure = None if interrupted else query.exception()
    at = _position(query.lastProgress)
    spark.stop()
    if interrupted:
        print(f"mysql-cdc: stopped (Ctrl-C) at {at}; the same command goes on from there", file=_err())
        return 130
    if failure is not None:
        text = str(failure)
        if ns.debug:
            print(text, file=_err())
        line, ours = _explain(ns, text)
        print(f"mysql-cdc: the {what} stopped at {at}: {line}{'' if ours else _more(ns)}", file=_err())
        return 2 if ours else 1
    return 0


def _explain(ns: argparse.Namespace, text: str) -> tuple[str, bool]:
    """A failure's one line (:func:`mysql_cdc.failure.one_line`); when it is not ours, the cause in this run's
    part of the Spark log comes first (a JVM that died of its heap leaves the CLI a lost gateway only)."""
    line, ours = one_line(text)
    log = getattr(ns, "log", None)
    if ours or ns.debug or not log or not os.path.exists(log):  # --debug: Spark's output was on the terminal
        return line, ours
    with open(log, "rb") as f:
        f.seek(getattr(ns, "log_from", 0))
        logged = f.read(64 << 20).decode("utf-8", "replace")
    return log_cause(logged) or line, False


def _more(ns: argparse.Namespace) -> str:
    """Where more is said about a failure not of ours."""
    log = getattr(ns, "log", None)
    return f" (the whole trace: --debug{f'; Spark log: {log}' if log else ''})"


_FLAGS = {
    "allow_statement_writes": "let statements logged as SQL text (sessions with binlog_format STATEMENT or MIXED) "
                              "that name no captured table pass; what a trigger, view or stored function wrote "
                              "through them is then missing (default: they stop the job)",
    "unchecked_server_ids": "claim replica server ids without checking them against the server's replicas (a "
                            "capture user that may not list them: MariaDB without REPLICATION MASTER ADMIN)",
    "allow_unlogged_cascades": "capture MariaDB tables whose foreign keys cascade, knowing the cascaded changes are "
                               "not in the binlog (a mirror keeps those rows; default: such a table is refused)",
}


def _flags(ns: argparse.Namespace) -> list[tuple[str, Any]]:
    """The options given as flags (true when set)."""
    return [(k, "true") for k in _FLAGS if getattr(ns, k, False)]


def _stream_options(ns: argparse.Namespace) -> list[tuple[str, Any]]:
    """The stream's options given by :func:`_stream_arguments` (those set)."""
    given = [(k, getattr(ns, k, None)) for k in ("chunk_size", "max_chunks_per_batch", "max_rows_per_batch",
                                                   "max_bytes_per_batch", "schema_changes", "binlog_partitions",
                                                   "reconnect_timeout", "read_timeout", "driver_host")]
    return [(k, v) for k, v in given + _flags(ns) if v is not None]


def cmd_follow(ns: argparse.Namespace) -> int:
    """The snapshot, then the binlog, into files (a Structured Streaming query with local Spark)."""
    _check_source(ns)
    import mysql_cdc
    from mysql_cdc.udtf.spark.compat import once_trigger, stop_when_caught_up

    spark = _local_spark(ns, "mysql-cdc follow")
    mysql_cdc.register(spark, carry=(ns.source,) if ns.source else ())
    reader = spark.readStream.format("mysql_cdc").option("source", ns.source).option("state_dir", ns.state_dir)
    for key, value in (("table", ns.table), ("tables", ns.tables), ("exclude", ns.exclude),
                       ("chunk_key", ns.chunk_key), ("once", "true" if ns.once else None), *_stream_options(ns)):
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

    return _watch(ns, spark, query, report, "stream", end_line)


def cmd_sync(ns: argparse.Namespace) -> int:
    """Mirror the matched tables into Delta or Iceberg tables and keep them mirrored (mysql_cdc.sync with local
    Spark)."""
    from mysql_cdc.udtf.sync.target import check_sync_paths, hold_sync_locks, keep_sync_locks

    # before Spark starts: a bad path, or another sync on them (it holds locks in both folders), is one line
    to, _, state_dir = check_sync_paths(ns.to, ns.checkpoint, ns.state_dir)
    if os.path.isdir(to) and (not os.path.isabs(state_dir) or os.path.isdir(state_dir)):  # a URI, or made
        keep_sync_locks(None, hold_sync_locks(state_dir, to), None)
    _check_source(ns)
    import mysql_cdc

    with_lake_jars(ns)
    spark = _local_spark(ns, "mysql-cdc sync")
    batches: list[Any] = []
    extra = dict(_stream_options(ns))
    extra.update((k, v) for k, v in (("large_value_dir", ns.large_value_dir),
                                     ("large_value_bytes", ns.large_value_bytes)) if v is not None)
    query = mysql_cdc.sync(spark, to=ns.to, checkpoint=ns.checkpoint, state_dir=ns.state_dir, tables=ns.tables,
                           source=ns.source, exclude=ns.exclude, trigger_seconds=ns.interval, once=ns.once,
                           on_batch=batches.append, format=ns.format, **extra)
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
                progress.show(f"batch {stats.batch_id}: no progress ({one_line(str(e))[0]})")

    rc = _watch(ns, spark, query, report, "sync")
    if rc == 0 and ns.once:  # also when there was nothing to do and no batch ran
        print(f"mysql-cdc: the mirror is up to date at {_committed_position(ns.checkpoint)}")
    return rc


DIFFERS = 3  # the exit code of a verify that found a difference (or a table it could not check)


def cmd_verify(ns: argparse.Namespace) -> int:
    """Compare a sync's mirror with its source (mysql_cdc.verify with local Spark): a line per table and one in
    all; 0 when every table agrees, :data:`DIFFERS` when one differs or could not be checked."""
    import json

    import mysql_cdc

    _verify_lake_jars(ns)
    spark = _local_spark(ns, "mysql-cdc verify")
    try:
        report = mysql_cdc.verify(spark, checkpoint=ns.checkpoint, state_dir=ns.state_dir, source=ns.source,
                                  tables=ns.tables,
                                  max_rows_per_second=ns.max_rows_per_second, recheck_seconds=ns.recheck_seconds,
                                  repair=ns.repair, repair_seconds=ns.repair_seconds)
    finally:
        spark.stop()
    print(json.dumps(report.to_dict(), sort_keys=True) if ns.json else "\n".join(report.lines()))
    return 0 if report.ok else DIFFERS


def _verify_lake_jars(ns: argparse.Namespace) -> None:
    """Spark settings for verify to read the mirror as the sync wrote it (:func:`with_lake_jars`): with
    ``--format iceberg`` Iceberg's runtime and the catalog of the mirror's tables (``--conf
    spark.sql.catalog.<name>=...``, as for the sync); for Delta, Delta's jars where Delta ships them for this
    pyspark and a mirror table needs them (Spark's Delta reads it at its version: a catalog's table, column
    mapping, deletion vectors), else none (the Parquet files of plain tables are read: no jars to fetch)."""
    from mysql_cdc.state.store import StateStore
    from mysql_cdc.udtf.sync.verify import mirror_place

    store = StateStore(ns.state_dir)
    locations = [loc for loc in (store.mirror(t) for t in store.recorded_schemas()) if loc]
    if ns.format == "iceberg":
        names = [loc for loc in locations if mirror_place(loc)[0]]
        parts = re.findall(r"`((?:[^`]|``)*)`", names[0]) if names else []
        if len(parts) < 3:
            raise ConfigError(f"no mirror table of the state dir {ns.state_dir!r} is in a catalog: --format iceberg "
                              "verifies a sync into Iceberg tables (drop it for Delta)")
        ns.to = ".".join(f"`{p}`" for p in parts[:-1])  # the namespace: its catalog is what with_lake_jars checks
    elif not any(_needs_spark_delta(loc) for loc in locations):
        ns.writer = "delta-rs"  # plain Parquet files: read without Delta's jars
    with_lake_jars(ns, say=False)


def _needs_spark_delta(location: str) -> bool:
    """Whether verify needs Spark's Delta to read a mirror table: one Spark's Delta wrote by name or in a
    catalog, or one whose log delta-rs cannot open here or that uses more than plain Parquet files."""
    from mysql_cdc.udtf.sync.verify import local_path, mirror_place, plain_features

    if location.startswith("delta.`") or mirror_place(location)[0]:
        return True
    try:
        from deltalake import DeltaTable

        return bool(plain_features(DeltaTable(local_path(location))))
    except Exception:  # delta-rs missing, or a log it cannot open: Spark's Delta may
        return True


def cmd_resnapshot(ns: argparse.Namespace) -> int:
    """Ask a sync to snapshot tables again (mysql_cdc.resnapshot; no Spark), or say where a request stands; 0 when
    it is done (or, without --wait-seconds, recorded), :data:`DIFFERS` when it is not done in the time given."""
    import mysql_cdc

    if bool(ns.tables) == (ns.request is not None):
        raise ConfigError("give --tables to ask for a snapshot, or --request to see where one stands: one of the two")
    if (ns.key_from is not None or ns.key_to is not None or ns.key) and not ns.tables:
        raise ConfigError("--key-from, --key-to and --key name keys of the table --tables names: give --tables")
    now = mysql_cdc.resnapshot(state_dir=ns.state_dir, tables=ns.tables,
                               request=ns.request, checkpoint=ns.checkpoint, wait_seconds=ns.wait_seconds,
                               why="mysql-cdc resnapshot" if ns.tables else "", key_from=ns.key_from,
                               key_to=ns.key_to, keys=ns.key or ())
    if ns.tables and now.state == "waiting":
        from mysql_cdc.udtf.sync.target import sync_holds

        running = sync_holds(ns.state_dir) is not False
        when = "takes it at its next micro-batch" if running else "takes it when it starts"
        see = "" if ns.checkpoint else f"; see where it stands with --request {now.request} --checkpoint <the sync's>"
        print(f"mysql-cdc: snapshot request {now.request} recorded: the sync {when}{see}")
    else:
        hint = "" if ns.checkpoint or now.state in ("waiting", "passed") else \
            " (give --checkpoint <the sync's> to tell whether it is done)"
        print(f"mysql-cdc: {now.line()}{hint}")
    if now.state == "passed":
        return DIFFERS
    return 0 if now.state == "done" or not ns.wait_seconds else DIFFERS


def with_lake_jars(ns: argparse.Namespace, say: bool = True) -> None:
    """Add the format's Spark jars, SQL extension (and for Delta its catalog) to the sync's Spark settings
    (``--conf``): for Iceberg always (Iceberg has runtimes for Spark 4.0 and 4.1; the target's catalog is the
    user's, checked here), for Delta when ``--writer`` asks for Spark's Delta, or leaves it to us (auto) and Delta
    has jars for this pyspark; in local mode Spark's Delta rebuilds a table's state with as many tasks as cores
    (``delta_snapshot_partitions``). The writer is said in one line on stdout (stderr is for errors) unless not
    ``say`` (verify: its stdout is the report). Settings the user gave win."""
    import pyspark

    from mysql_cdc.udtf.sync.sinks import (
        SNAPSHOT_PARTITIONS,
        delta_artifact,
        delta_snapshot_partitions,
        iceberg_artifact,
        parse_target,
    )

    given = {k for k, _ in ns.conf}
    if getattr(ns, "format", "delta") == "iceberg":
        artifact = iceberg_artifact(pyspark.__version__)
        target = parse_target(ns.to)
        if ns.writer == "delta-rs":
            raise ConfigError("--writer delta-rs writes Delta tables only: drop it for --format iceberg")
        if target.kind != "catalog":
            raise ConfigError(f"an Iceberg mirror goes into a catalog namespace, not the folder {ns.to!r}: give "
                              "--to <catalog>.<namespace>, e.g. --to lake.mirror_{database} with --conf "
                              "spark.sql.catalog.lake=org.apache.iceberg.spark.SparkCatalog --conf "
                              "spark.sql.catalog.lake.type=hadoop --conf spark.sql.catalog.lake.warehouse=/lake")
        catalog = target.catalog()
        if f"spark.sql.catalog.{catalog}" not in given:
            raise ConfigError(f"the catalog {catalog!r} of the mirror {ns.to!r} is not set: give it, e.g. --conf "
                              f"spark.sql.catalog.{catalog}=org.apache.iceberg.spark.SparkCatalog --conf "
                              f"spark.sql.catalog.{catalog}.type=rest|hadoop|glue|hive and its uri= or warehouse=")
        packages = dict(ns.conf).get("spark.jars.packages", "")
        if artifact is None and "iceberg-spark-runtime" not in packages:
            instead = "use --format delta" if say else "verify from pyspark 4.0 or 4.1"
            raise ConfigError(f"Apache Iceberg ships no Spark runtime for pyspark {pyspark.__version__} (it does for "
                              f"4.0 and 4.1): {instead}, or give the runtime with --conf spark.jars.packages=...")
        conf = [("spark.sql.extensions", "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions")]
        ns.conf = [*ns.conf, *((k, v) for k, v in conf if k not in given)]
        if artifact is not None and "iceberg-spark-runtime" not in packages:
            _add_package(ns, artifact)
        if say:
            print(f"mysql-cdc: Iceberg tables written by Spark ({artifact or 'the runtime given'}), merged on the "
                  "executors", flush=True)
        return
    artifact = delta_artifact(pyspark.__version__)
    if ns.writer == "delta-rs" or "spark.sql.extensions" in given:
        return
    if artifact is None:
        if ns.writer == "spark":
            raise ConfigError(f"--writer spark needs Delta Lake's jars for pyspark {pyspark.__version__}, and Delta "
                              "ships none for it (it does for 4.0, 4.1 and 4.2): use --writer delta-rs, or give "
                              "the jars with --conf spark.jars.packages=... --conf spark.sql.extensions=...")
        if say:
            print(f"mysql-cdc: Delta tables written by delta-rs (Delta Lake has no Spark jars for pyspark "
                  f"{pyspark.__version__})", flush=True)
        return
    conf = [("spark.sql.extensions", "io.delta.sql.DeltaSparkSessionExtension"),
            ("spark.sql.catalog.spark_catalog", "org.apache.spark.sql.delta.catalog.DeltaCatalog")]
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    tasks = delta_snapshot_partitions(getattr(ns, "master", "local[*]"), cpus)
    if tasks is not None:  # local mode: a table's state rebuilt by as many tasks as cores, not Delta's 50
        conf.append((SNAPSHOT_PARTITIONS, str(tasks)))
    ns.conf = [*ns.conf, *((k, v) for k, v in conf if k not in given)]
    if "delta-spark" not in dict(ns.conf).get("spark.jars.packages", ""):
        _add_package(ns, artifact)
    if say:
        print(f"mysql-cdc: Delta tables written by Spark ({artifact}), merged on the executors", flush=True)


def _add_package(ns: argparse.Namespace, artifact: str) -> None:
    """``artifact`` added to ``spark.jars.packages`` of ``--conf``, beside the packages the user gave there."""
    given = dict(ns.conf).get("spark.jars.packages")
    ns.conf = [(k, v) for k, v in ns.conf if k != "spark.jars.packages"]
    ns.conf.append(("spark.jars.packages", f"{given},{artifact}" if given else artifact))


def _range_note(planned: Any) -> str:
    """What a table's plan (a ``PlanRecord`` or None) of a key range read again (``resnapshot --key-from/--key-to``)
    leaves out of its rows: the chunks around the range are recorded with no rows, so the rows counted are the
    range's alone."""
    around = planned.outside if planned is not None else frozenset()
    if not around:
        return ""
    return (f" (a key range read again: the rows are its own; {len(around)} chunk(s) around it (and in its gaps) are "
            "recorded with no rows, their rows kept in the mirror as they were)")


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
            planned = store.plan_record(table)
            print(f"{table}: {len(recs)}/{len(planned.chunks) if planned is not None else '?'} chunks recorded, "
                  f"{sum(r.rows for r in recs)} rows{_range_note(planned)}")
        for name, offset in sorted(store.offsets().items()):
            print(f"committed stream offset ({name}): {offset}")
        return 0
    table = TableId.parse(ns.table)
    recs = store.chunk_records(table)
    planned = store.plan_record(table)
    if not recs and planned is None:
        known = ", ".join(map(str, store.recorded_tables())) or "none"
        raise StateError(f"nothing is recorded for table {ns.table!r} under {ns.state_dir!r}; tables recorded "
                         f"there: {known}")
    print(f"{ns.table}: {len(recs)} chunks recorded, {sum(r.rows for r in recs)} rows{_range_note(planned)}")
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


def _stream_arguments(p: argparse.ArgumentParser, max_chunks: str, max_rows: str, max_bytes: str) -> None:
    """The arguments of the commands that run a stream (follow, sync); their batch bounds' defaults differ."""
    p.add_argument("--chunk-size", type=int, help=_CHUNK_SIZE)
    p.add_argument("--max-chunks-per-batch", type=int, help=f"snapshot chunks per micro-batch (default {max_chunks})")
    p.add_argument("--max-rows-per-batch", type=int,
                   help=f"change rows per micro-batch: binlog rows rounded up to whole transactions, snapshot rows "
                        f"in whole chunks planned no larger (default {max_rows})")
    p.add_argument("--max-bytes-per-batch", type=int,
                   help=f"bytes per micro-batch: of binlog events, rounded up to whole transactions, and of "
                        f"snapshot chunks by the table's average row length (default {max_bytes})")
    p.add_argument("--schema-changes", choices=SCHEMA_CHANGES,
                   help="follow (default: DDL on a captured table is followed, in place or by snapshotting that "
                        "table again) or stop (the first DDL stops the job)")
    p.add_argument("--binlog-partitions", type=int,
                   help="Spark tasks reading one micro-batch's binlog range at once, cut at transaction boundaries "
                        "(parallel catch-up of a backlog): n, parts of at least 1 MB; default 0: the session's task "
                        "slots, parts of at least 16 MB")
    p.add_argument("--reconnect-timeout", type=float,
                   help="seconds to keep trying again after the server was lost (restarted, unreachable, a rotated "
                        "password) before the job stops (default 600; 0: stop at the first failure)")
    p.add_argument("--read-timeout", type=float,
                   help="seconds without a byte from the server before a read counts as lost, e.g. a frozen "
                        "server (default 120)")
    p.add_argument("--driver-host", help="the address executors reach this driver at, to hand back the chunks' "
                   "watermarks (default: the driver's own addresses, tried in turn)")
    for k, meaning in _FLAGS.items():
        p.add_argument("--" + k.replace("_", "-"), action="store_true", help=meaning)
    p.add_argument("--once", action="store_true", help="stop at the binlog end taken at the start (availableNow)")
    p.add_argument("--interval", type=float, default=1.0, help="seconds between micro-batches (default 1)")
    _spark_arguments(p)


def _conf_pair(text: str) -> tuple[str, str]:
    """``--conf KEY=VALUE`` as a pair.

    >>> _conf_pair("spark.executor.memory=4g"), _conf_pair("spark.a= b=c ")
    (('spark.executor.memory', '4g'), ('spark.a', ' b=c '))
    """
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise argparse.ArgumentTypeError(f"{text!r} is not KEY=VALUE, e.g. spark.executor.memory=4g")
    return key.strip(), value


def _spark_arguments(p: argparse.ArgumentParser) -> None:
    """The arguments of the commands that run Spark."""
    p.add_argument("--master", default="local[*]", help=_MASTER)
    p.add_argument("--driver-memory", help="memory of the Spark driver, which in local mode runs the tasks too "
                   "(e.g. 4g; Spark's default is 1g)")
    p.add_argument("--log", help="file that Spark's own output goes to (default: a new private file under the "
                   "temporary directory, named when something fails)")
    p.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE", type=_conf_pair,
                   help="a Spark setting (repeatable), e.g. --conf spark.executor.memory=4g, --conf "
                   "spark.jars.packages=...; what spark-submit --conf takes")


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="mysql-cdc", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    sub = ap.add_subparsers(dest="command", required=True)
    src = "connection profile name: $MYSQL_CDC_PROFILE_<NAME> or an entry of $MYSQL_CDC_PROFILES_FILE"
    chunk_size = _CHUNK_SIZE
    chunk_key = ("columns that split tables without a primary key (may repeat and be NULL), or '<pattern>:<columns>' "
                 "entries separated by ';'; without one such a table is one chunk")
    tables = ("regular expressions over 'db.table', comma-separated (a comma inside a group, class or count "
              "belongs to its pattern), or --tables given again")
    t = sub.add_parser("tables", help="list the tables the patterns match, checked as a capture checks them")
    t.add_argument("--source", required=True, help=src)
    t.add_argument("--tables", required=True, action="append", help=tables)
    t.add_argument("--exclude", action="append", help="regular expressions over 'db.table' of tables left out")
    t.add_argument("--chunk-key", help=chunk_key)
    for k, meaning in _FLAGS.items():
        t.add_argument("--" + k.replace("_", "-"), action="store_true", help=meaning)
    t.set_defaults(fn=cmd_tables)
    p = sub.add_parser("plan", help="validate the server and print the chunks of the matched tables")
    p.add_argument("--source", required=True, help=src)
    p.add_argument("--tables", required=True, action="append", help=tables)
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
    _spark_arguments(s)
    s.set_defaults(fn=cmd_snapshot)
    f = sub.add_parser("follow", help="snapshot, then follow the binlog, into files (Structured Streaming)")
    f.add_argument("--source", required=True, help=src)
    which = f.add_mutually_exclusive_group(required=True)
    which.add_argument("--table", help="the table, 'db.table' (its columns, typed)")
    which.add_argument("--tables", action="append", help=tables + ": every matched table, one binlog reader, rows "
                       "as JSON in __values (mysql_cdc.split types them)")
    f.add_argument("--exclude", action="append",
                   help="with --tables: regular expressions over 'db.table' of tables not captured")
    f.add_argument("--out", required=True, help="output path of the change rows")
    f.add_argument("--checkpoint", required=True, help="Spark checkpoint location (keep it with --state-dir)")
    f.add_argument("--state-dir", required=True, help="chunk plan, watermarks and schema of this capture")
    f.add_argument("--format", default="parquet", help="Spark output format (default parquet)")
    f.add_argument("--chunk-key", help=chunk_key)
    _stream_arguments(f, "all", "no limit", "no limit")
    f.set_defaults(fn=cmd_follow)
    y = sub.add_parser("sync", help="mirror the matched tables into Delta or Iceberg tables, exactly once, and keep "
                       "them mirrored (the main job)")
    y.add_argument("--source", required=True, help=src)
    y.add_argument("--tables", required=True, action="append", help=tables)
    y.add_argument("--exclude", action="append", help="regular expressions over 'db.table' of tables not mirrored")
    y.add_argument("--to", required=True, help="where the tables go: a catalog namespace (catalog.schema: "
                   "<to>.<table>; {database} in it is the source database) or, for Delta, a folder "
                   "(<to>/<database>/<table>)")
    y.add_argument("--format", choices=("delta", "iceberg"), default="delta",
                   help="the mirror's table format: Delta Lake, or Apache Iceberg (into a catalog namespace set with "
                   "--conf spark.sql.catalog.<name>=...; Iceberg's runtime for Spark 4.0 and 4.1 is fetched from "
                   "Maven Central)")
    y.add_argument("--writer", choices=("auto", "spark", "delta-rs"), default="auto",
                   help="what writes the Delta tables: Spark's Delta Lake, merging on the executors (auto: where "
                   "Delta has jars for this Spark, 4.0 to 4.2, fetched from Maven Central), or delta-rs in the driver "
                   "(a folder only)")
    y.add_argument("--checkpoint", required=True, help="Spark checkpoint location (keep it with --state-dir)")
    y.add_argument("--state-dir", required=True, help="chunk plan, watermarks and schema of this capture")
    y.add_argument("--large-value-dir", help="a folder every executor and the driver reach where BLOB and TEXT "
                   "values of --large-value-bytes or more travel as files instead of through Spark (default in "
                   "local mode: the state dir's large_values; on a cluster none unless given: a shared mount; '' "
                   "for none); emptied once each batch is applied")
    y.add_argument("--large-value-bytes", type=int, help="the size from which a value travels as a file "
                   "(default 8388608, 8 MiB)")
    _stream_arguments(y, "4", "200000", "64 MiB")
    y.set_defaults(fn=cmd_sync, table=None, chunk_key=None)
    v = sub.add_parser("verify", help="compare a sync's mirror with its source by checksums of its chunks, at one "
                       "binlog point, while the sync runs or not (exit code 3: a table differs)")
    v.add_argument("--source", required=True, help=src)
    v.add_argument("--checkpoint", required=True, help="the sync's Spark checkpoint location")
    v.add_argument("--state-dir", required=True, help="the sync's state directory")
    v.add_argument("--tables", action="append", help="regular expressions over 'db.table' of the mirrored tables "
                   "to compare (default: all)")
    v.add_argument("--max-rows-per-second", type=float, default=0.0,
                   help="read the source no faster than this (default 0: no limit)")
    v.add_argument("--recheck-seconds", type=float, default=30.0,
                   help="how long to wait for the sync before keys that differ are compared once more (0: never)")
    v.add_argument("--repair", action="store_true", help="have the running sync snapshot the tables that differ "
                   "again, wait for it, and verify them again")
    v.add_argument("--repair-seconds", type=float, default=600.0,
                   help="how long --repair waits for the sync's new snapshot (default 600)")
    v.add_argument("--format", choices=("delta", "iceberg"), default="delta",
                   help="the mirror's format, as the sync was given it (Iceberg: give its catalog with --conf as "
                   "for the sync)")
    v.add_argument("--json", action="store_true", help="print the report as one JSON object")
    _spark_arguments(v)
    v.set_defaults(fn=cmd_verify, table=None, chunk_key=None, writer="auto")
    r = sub.add_parser("resnapshot", help="have a sync snapshot tables again while it runs (or when it next "
                       "starts), without stopping it; or say where such a request stands")
    r.add_argument("--state-dir", required=True, help="the sync's state directory")
    r.add_argument("--tables", action="append", help="regular expressions over 'db.table' of the captured tables "
                   "to snapshot again, e.g. 'shop[.]orders'")
    r.add_argument("--key-from", help="read again only the rows with a key from this one on (one table; a key of "
                   "integer, binary, DECIMAL, DATE, DATETIME, TIMESTAMP, CHAR or VARCHAR columns: values separated "
                   "by commas, one per key column, a binary one as 0x and hex digits, a date as 2024-02-29, a time "
                   "as 2024-02-29 10:00:00.25, a TIMESTAMP's in UTC unless it names its zone; compared as the "
                   "server orders the key, a string under its collation)")
    r.add_argument("--key-to", help="... and below this key (excluded); either bound may be left out")
    r.add_argument("--key", action="append", help="read again only this key (one table, as --key-from; give it "
                   "once per key; with --key-from/--key-to, these keys and that range; a key with a CHAR or VARCHAR "
                   "column takes at most 64 keys, or a range, not both: the whole text for a key of one such "
                   "column)")
    r.add_argument("--request", type=int, help="the number of an earlier request: say where it stands")
    r.add_argument("--checkpoint", help="the sync's Spark checkpoint location: to tell when the request is done")
    r.add_argument("--wait-seconds", type=float, default=0.0,
                   help="wait up to this long for the request to be done (needs --checkpoint; exit code 3 when "
                   "it is not done by then)")
    r.set_defaults(fn=cmd_resnapshot)
    st = sub.add_parser("status", help="print the recorded chunk watermarks of a table, or a summary of every table")
    st.add_argument("--state-dir", required=True, help="the state directory of a snapshot or stream")
    st.add_argument("--table", help="the table, 'db.table' (default: a line for every recorded table)")
    st.set_defaults(fn=cmd_status)
    for command in sub.choices.values():
        command.add_argument("--debug", action="store_true",
                             help="show Spark's output and the whole trace of a failure (default: one line)")
    return ap


def main(argv: list[str] | None = None) -> int:
    import traceback

    from mysql_cdc.state.store import tighten_umask

    ns = build_parser().parse_args(argv)
    for name in ("tables", "exclude"):  # given again: one comma-separated list, as the options take it
        if isinstance(getattr(ns, name, None), list):
            setattr(ns, name, ", ".join(getattr(ns, name)))
    tighten_umask()  # what this job writes (and Spark's JVM, which takes the umask from here) is not world-writable
    try:
        return int(ns.fn(ns))
    except KeyboardInterrupt:
        print("mysql-cdc: stopped (Ctrl-C) before any batch ran", file=_err())
        return 130
    except MysqlCdcError as e:
        if ns.debug:
            raise
        print(f"mysql-cdc: {type(e).__name__}: {e}", file=_err())
        return 2
    except Exception as e:  # a Spark or Py4J error: our error inside it, else its cause, in one line
        if ns.debug:
            raise
        line, ours = _explain(ns, "".join(traceback.format_exception(e)))
        print(f"mysql-cdc: {line}{'' if ours else _more(ns)}", file=_err())
        return 2 if ours else 1


if __name__ == "__main__":
    sys.exit(main())
