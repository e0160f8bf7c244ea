"""``mysql-cdc``: the job from a terminal.

    mysql-cdc plan --source shop --tables 'shop[.].*' [--chunk-size 8096]
    mysql-cdc snapshot --source shop --table shop.orders --out /data/orders [--format parquet] [--state-dir D]
    mysql-cdc follow --source shop --table shop.orders --out /data/orders_cdc --checkpoint C --state-dir D [--once]
    mysql-cdc status --state-dir D --table shop.orders

``--source`` names a profile from ``$MYSQL_CDC_PROFILE_<NAME>`` or ``$MYSQL_CDC_PROFILES_FILE``; passwords
never go on the command line (other users could read it in the process list).
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

from mysql_cdc.errors import ConfigError, MysqlCdcError, StateError


def _opts(ns: argparse.Namespace, **extra: Any) -> dict[str, Any]:
    out = {"source": ns.source, **extra}
    return {k: v for k, v in out.items() if v is not None}


def _local_spark(master: str, name: str) -> Any:
    try:
        from pyspark.sql import SparkSession
    except ImportError as e:
        raise ConfigError(f"this command runs Spark locally, but pyspark cannot be imported ({e}); install it "
                          "with: pip install 'pyspark-mysql-cdc[spark]'") from e
    spark = (SparkSession.builder.master(master).appName(name).config("spark.ui.enabled", "false").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def cmd_plan(ns: argparse.Namespace) -> int:
    from mysql_cdc.chunks import encode_key
    from mysql_cdc.options import parse_options, resolve_profile
    from mysql_cdc.planner.plan import plan_tables

    opts = parse_options(_opts(ns, tables=ns.tables, chunk_size=ns.chunk_size, chunk_key=ns.chunk_key))
    facts, plans = plan_tables(resolve_profile(opts), opts)
    print(f"server: {facts.version_text} ({facts.flavor}), watermarks: "
          f"{'snapshot' if facts.flavor == 'mariadb' else 'gtid' if facts.gtid_mode else 'position'}")
    for p in plans:
        print(f"{p.schema.table}: key ({', '.join(p.schema.chunk_key)}), {len(p.chunks)} chunks")
        for c in p.chunks:
            print(f"  {c.id}\t{encode_key(c.start) or '-inf'}\t{encode_key(c.end) or '+inf'}")
    return 0


def cmd_snapshot(ns: argparse.Namespace) -> int:
    import mysql_cdc

    spark = _local_spark(ns.master, "mysql-cdc snapshot")
    mysql_cdc.register(spark)
    reader = spark.read.format("mysql_cdc").option("source", ns.source).option("table", ns.table)
    for key, value in (("chunk_size", ns.chunk_size), ("state_dir", ns.state_dir)):
        if value is not None:
            reader = reader.option(key, value)
    started = time.monotonic()
    df = reader.load()
    df.write.mode("overwrite").format(ns.format).save(ns.out)
    n = spark.read.format(ns.format).load(ns.out).count()
    print(f"{ns.table}: {n} rows written to {ns.out} in {time.monotonic() - started:.1f} s")
    spark.stop()
    return 0


def cmd_follow(ns: argparse.Namespace) -> int:
    """The snapshot, then the binlog, into files (a Structured Streaming query with local Spark)."""
    import mysql_cdc

    spark = _local_spark(ns.master, "mysql-cdc follow")
    mysql_cdc.register(spark)
    reader = (spark.readStream.format("mysql_cdc").option("source", ns.source).option("table", ns.table)
              .option("state_dir", ns.state_dir))
    for key, value in (("chunk_size", ns.chunk_size), ("max_chunks_per_batch", ns.max_chunks_per_batch),
                       ("max_rows_per_batch", ns.max_rows_per_batch)):
        if value is not None:
            reader = reader.option(key, value)
    writer = (reader.load().writeStream.format(ns.format).option("path", ns.out)
              .option("checkpointLocation", ns.checkpoint))
    writer = writer.trigger(availableNow=True) if ns.once else writer.trigger(processingTime=f"{ns.interval} seconds")
    query = writer.start()
    seen = -1

    def report() -> None:
        nonlocal seen
        for p in query.recentProgress:  # every batch since the last report, not only the latest
            if p["batchId"] > seen:
                seen = p["batchId"]
                end = (p["sources"] or [{}])[0].get("endOffset")
                print(f"batch {seen}: {p['numInputRows']} rows, offset {end}", flush=True)

    try:
        while query.isActive:
            query.awaitTermination(1)
            report()
    except KeyboardInterrupt:
        query.stop()
    report()
    if query.exception() is not None:
        print(f"mysql-cdc: the stream stopped: {query.exception()}", file=sys.stderr)
        spark.stop()
        return 1
    spark.stop()
    return 0


def cmd_status(ns: argparse.Namespace) -> int:
    from mysql_cdc.chunks import TableId
    from mysql_cdc.state.store import StateStore

    store, table = StateStore(ns.state_dir), TableId.parse(ns.table)
    if not store.exists():
        raise StateError(f"state directory {ns.state_dir!r} does not exist: give the --state-dir the snapshot or "
                         "stream recorded into")
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


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="mysql-cdc", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    sub = ap.add_subparsers(dest="command", required=True)
    p = sub.add_parser("plan", help="validate the server and print the chunks of the matched tables")
    p.add_argument("--source", required=True)
    p.add_argument("--tables", required=True)
    p.add_argument("--chunk-size", type=int)
    p.add_argument("--chunk-key")
    p.set_defaults(fn=cmd_plan)
    s = sub.add_parser("snapshot", help="read one table in parallel into files with local Spark")
    s.add_argument("--source", required=True)
    s.add_argument("--table", required=True)
    s.add_argument("--out", required=True)
    s.add_argument("--format", default="parquet")
    s.add_argument("--chunk-size", type=int)
    s.add_argument("--state-dir")
    s.add_argument("--master", default="local[*]")
    s.set_defaults(fn=cmd_snapshot)
    f = sub.add_parser("follow", help="snapshot, then follow the binlog, into files (Structured Streaming)")
    f.add_argument("--source", required=True)
    f.add_argument("--table", required=True)
    f.add_argument("--out", required=True)
    f.add_argument("--checkpoint", required=True)
    f.add_argument("--state-dir", required=True)
    f.add_argument("--format", default="parquet")
    f.add_argument("--chunk-size", type=int)
    f.add_argument("--max-chunks-per-batch", type=int)
    f.add_argument("--max-rows-per-batch", type=int)
    f.add_argument("--once", action="store_true", help="stop at the binlog end taken at the start (availableNow)")
    f.add_argument("--interval", type=float, default=1.0, help="seconds between micro-batches")
    f.add_argument("--master", default="local[*]")
    f.set_defaults(fn=cmd_follow)
    st = sub.add_parser("status", help="print the recorded chunk watermarks of a table")
    st.add_argument("--state-dir", required=True)
    st.add_argument("--table", required=True)
    st.set_defaults(fn=cmd_status)
    ns = ap.parse_args(argv)
    try:
        return int(ns.fn(ns))
    except MysqlCdcError as e:
        print(f"mysql-cdc: {type(e).__name__}: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
