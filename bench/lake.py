"""Lakehouse sync benchmark: the sync merged by Spark on the executors into Delta Lake and Apache Iceberg, beside
what users run today and the stream under it, on TPC-H ``orders`` in a throwaway local server. A benchmark, not a
test: it asserts nothing (a mirror that is not its source after a phase is printed as a warning).

    bash bench/lake.sh [--server mariadb|mysql|both] [--scale 1] [--changed 150000] [--formats delta,iceberg]

One Spark (pyspark 4.1, ``local[--parallelism]``) with Delta's jars and Iceberg's runtime (a Hadoop catalog
``lake`` in the work folder). Per format: **the nightly dump**, Spark's JDBC reader (``--parallelism``
partitions by key) written into a new table of that format; **the sync's snapshot**, ``mysql_cdc.sync(once=True)``
from nothing to a table equal to the source (planning and table creation included). **The stream alone**:
the same stream (the sync's batch bounds) into Spark's ``noop`` sink, snapshot and binlog. Then ``--changed``
rows are deleted, inserted again and updated (four change rows each: 600,000 by default), and each sync and the
stream alone catch up over the same binlog range, timed. Peak RSS is the Spark JVM (driver and executors: one
process in local mode) with its Python workers; the driver's Python process has its own column. Targets
(issue 31): snapshot >= 0.8x the dump into the same format, binlog phase >= 0.5x the stream alone. Writes a
Markdown table to stdout and to ``bench/results/lake-<server>-sf<scale>.md``.
"""

from __future__ import annotations

import os
import resource
import sys
import time
from collections.abc import Callable
from typing import Any

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from bench.run import PeakRss, bench_parser, on_each_server  # noqa: E402
from tests.servers import ServerInfo  # noqa: E402

JAR = "/usr/share/java/mariadb-java-client.jar"
Row = tuple[str, int, float, str, int, int, str]  # run, rows, seconds, ratio, peak RSS, driver Python peak RSS, where


def main() -> None:
    ap = bench_parser(__doc__, 1.0, both=True)
    ap.add_argument("--changed", type=int, default=150_000, help="rows deleted, inserted again and updated")
    ap.add_argument("--formats", default="delta,iceberg", help="formats to sync into, comma-separated")
    ap.add_argument("--parallelism", type=int, default=2)
    args = ap.parse_args()
    on_each_server(args, "lake", run)


def session(args: Any, work: str) -> Any:
    import pyspark
    from pyspark.sql import SparkSession

    from mysql_cdc.udtf.sync.sinks import delta_artifact, iceberg_artifact

    packages = ",".join(a for a in (delta_artifact(pyspark.__version__), iceberg_artifact(pyspark.__version__)) if a)
    spark = (SparkSession.builder.master(f"local[{args.parallelism}]").config("spark.ui.enabled", "false")
             .config("spark.ui.showConsoleProgress", "false").config("spark.driver.memory", "4g")
             .config("spark.jars", JAR).config("spark.jars.packages", packages)
             .config("spark.sql.extensions", "io.delta.sql.DeltaSparkSessionExtension,"
                     "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions")
             .config("spark.sql.catalog.spark_catalog", "org.apache.spark.sql.delta.catalog.DeltaCatalog")
             .config("spark.sql.catalog.lake", "org.apache.iceberg.spark.SparkCatalog")
             .config("spark.sql.catalog.lake.type", "hadoop")
             .config("spark.sql.catalog.lake.warehouse", os.path.join(work, "iceberg")).getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def run(info: ServerInfo, n: int, args: Any, work: str) -> str:
    import mysql_cdc
    from mysql_cdc.udtf.spark.compat import once_trigger, stop_when_caught_up
    from mysql_cdc.udtf.sync.sinks import sync_stream_options

    spark = session(args, work)
    jvm_pid = int(spark.sparkContext._jvm.ProcessHandle.current().pid())  # type: ignore[union-attr]
    url = f"mysql://{info.user}:{info.password}@{info.host}:{info.port}"
    mysql_cdc.register(spark, {"bench": url})
    conn = info.connect(root=True, database="tpch")
    conn.autocommit(True)
    cur = conn.cursor()
    cur.execute("CREATE TABLE orders_copy AS SELECT * FROM orders")
    formats = [f for f in args.formats.split(",") if f]
    rows: list[Row] = []
    spent: dict[str, list[Any]] = {}

    def timed(action: Callable[..., None]) -> tuple[float, int, int]:
        with PeakRss(lambda: [jvm_pid]) as mem:
            t = time.monotonic()
            action()
            secs = time.monotonic() - t
        return secs, mem.peak_total, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024

    def target(fmt: str) -> str:
        return os.path.join(work, "delta-mirror") if fmt == "delta" else "lake.mirror"

    def sync_once(fmt: str) -> None:
        d = os.path.join(work, f"sync-{fmt}")
        stats = spent.setdefault(fmt, [])
        stats.clear()
        q = mysql_cdc.sync(spark, source="bench", profiles={"bench": url}, tables="tpch[.]orders", to=target(fmt),
                           format=fmt,
                           checkpoint=os.path.join(d, "ck"), state_dir=os.path.join(d, "state"), once=True,
                           on_batch=stats.append)
        q.awaitTermination()
        if q.exception() is not None:
            raise RuntimeError(str(q.exception()))

    def stream_alone() -> None:
        d = os.path.join(work, "stream")
        reader = spark.readStream.format("mysql_cdc").option("source", "bench").option("tables", "tpch[.]orders") \
            .option("state_dir", os.path.join(d, "state")).option("once", "true")
        for k, v in sync_stream_options("spark").items():  # the sync's stream options with Spark's writers
            reader = reader.option(k, v)
        q = reader.load().writeStream.format("noop").option("checkpointLocation", os.path.join(d, "ck")) \
            .trigger(**once_trigger()).start()
        stop_when_caught_up(q)
        q.awaitTermination()
        if q.exception() is not None:
            raise RuntimeError(str(q.exception()))

    def where(fmt: str, secs: float) -> str:
        """Where a sync phase's time went, from its batches' stats: the job that reads each batch from the
        source and persists it, the decode and write of its rows (each table's own Spark job), the rest
        (planning the micro-batches, following schemas, Spark's commit log)."""
        read = sum(s.collect_seconds for s in spent[fmt])
        write = sum(s.decode_seconds + s.merge_seconds for s in spent[fmt])
        return (f"{len(spent[fmt])} batches: read and persist {read:.1f} s, decode and write {write:.1f} s, "
                f"the rest {secs - read - write:.1f} s")

    def typed(fmt: str) -> None:
        # the same rows through the snapshot reader, typed (the batch data source): no envelope, no stream, no
        # persist: what the sync's read would cost without them
        df = spark.read.format("mysql_cdc").option("source", "bench").option("table", "tpch.orders").load()
        if fmt == "delta":
            df.write.format("delta").mode("overwrite").save(os.path.join(work, "delta-typed"))
        else:
            df.writeTo("lake.dump.orders_typed").using("iceberg").createOrReplace()

    def dump(fmt: str) -> None:
        # the MariaDB driver on MySQL's caching_sha2_password (a local throwaway server) takes the server's key
        jdbc = f"jdbc:mysql://{info.host}:{info.port}/tpch?permitMysqlScheme&allowPublicKeyRetrieval=true"
        df = (spark.read.format("jdbc").option("url", jdbc)
              .option("driver", "org.mariadb.jdbc.Driver").option("user", info.user).option("password", info.password)
              .option("dbtable", "orders").option("partitionColumn", "o_orderkey").option("lowerBound", 1)
              .option("upperBound", n * 4).option("numPartitions", args.parallelism).option("fetchsize", 10000)
              .load())
        if fmt == "delta":
            df.write.format("delta").mode("overwrite").save(os.path.join(work, "delta-dump"))
        else:
            df.writeTo("lake.dump.orders").using("iceberg").createOrReplace()

    def mirror(fmt: str) -> Any:
        if fmt == "delta":
            return spark.read.format("delta").load(os.path.join(target(fmt), "tpch", "orders"))
        # the stream's batches commit from a session of its own: this one's catalog may hold an older snapshot
        spark.sql(f"REFRESH TABLE {target(fmt)}.orders")
        return spark.table(f"{target(fmt)}.orders")

    def check(fmt: str, phase: str, changed: bool) -> None:
        m = mirror(fmt)
        count = m.count()
        updated = m.filter("o_comment LIKE 'u%'").count() if changed else 0
        if count != n or (changed and updated < args.changed):
            print(f"warning: the {fmt} mirror after the {phase} is not the source ({count} rows, {updated} updated)",
                  flush=True)

    spark.sql("CREATE NAMESPACE IF NOT EXISTS lake.dump")
    dumps: dict[str, float] = {}
    for fmt in formats:
        secs, rss, drv = timed(lambda f=fmt: dump(f))
        dumps[fmt] = secs
        rows.append((f"Spark JDBC -> {fmt} (the nightly dump)", n, secs, "-", rss, drv, ""))
        print(f"dump into {fmt}: {secs:.2f} s", flush=True)
        secs, rss, drv = timed(lambda f=fmt: typed(f))
        rows.append((f"the mysql_cdc data source (typed, no envelope, no stream) -> {fmt}", n, secs,
                     f"{dumps[fmt] / secs:.2f}x the dump", rss, drv, ""))
        print(f"typed read into {fmt}: {secs:.2f} s", flush=True)
        secs, rss, drv = timed(lambda f=fmt: sync_once(f))
        rows.append((f"mysql_cdc.sync -> {fmt}, snapshot phase (plan, create, read, MERGE)", n, secs,
                     f"{dumps[fmt] / secs:.2f}x the dump", rss, drv, where(fmt, secs)))
        print(f"sync into {fmt}, snapshot: {secs:.2f} s ({where(fmt, secs)})", flush=True)
        check(fmt, "snapshot", False)
    secs, rss, drv = timed(stream_alone)
    rows.append(("the stream alone (noop sink), snapshot", n, secs, "-", rss, drv, ""))
    print(f"stream alone, snapshot: {secs:.2f} s", flush=True)

    cur.execute("SELECT o_orderkey FROM orders ORDER BY o_orderkey LIMIT 1 OFFSET %s", (args.changed - 1,))
    bound = int(cur.fetchone()[0])
    cur.execute("DELETE FROM orders WHERE o_orderkey <= %s", (bound,))
    cur.execute("INSERT INTO orders SELECT * FROM orders_copy WHERE o_orderkey <= %s", (bound,))
    cur.execute("UPDATE orders SET o_comment = CONCAT('u', o_comment) WHERE o_orderkey <= %s", (bound,))
    changes = 4 * args.changed
    alone, rss, drv = timed(stream_alone)
    rows.append((f"the stream alone (noop sink), binlog phase ({args.changed:,} rows deleted, inserted, updated)",
                 changes, alone, "-", rss, drv, ""))
    print(f"stream alone, binlog: {alone:.2f} s", flush=True)
    for fmt in formats:
        secs, rss, drv = timed(lambda f=fmt: sync_once(f))
        rows.append((f"mysql_cdc.sync -> {fmt}, binlog phase", changes, secs, f"{alone / secs:.2f}x the stream alone",
                     rss, drv, where(fmt, secs)))
        print(f"sync into {fmt}, binlog: {secs:.2f} s ({where(fmt, secs)})", flush=True)
        check(fmt, "binlog phase", True)
    spark.stop()
    conn.close()
    import pyspark

    head = (f"Sync into Delta and Iceberg merged by Spark (pyspark {pyspark.__version__}), TPC-H orders, {n:,} rows "
            f"(sf {args.scale:g}), {info.kind}, local[{args.parallelism}], {os.cpu_count()} cores; one run each.")
    lines = [head, "", "| run | rows | seconds | rows/s | ratio | peak RSS, Spark (MB) | driver Python, peak so far "
             "(MB) | where the time went |",
             "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for name, count, secs, ratio, rss, drv, note in rows:
        lines.append(f"| {name} | {count:,} | {secs:.2f} | {count / secs:,.0f} | {ratio} | {rss / 2**20:,.0f} | "
                     f"{drv / 2**20:,.0f} | {note} |")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
