"""Verify benchmark: ``mysql_cdc.verify`` of a mirror of TPC-H ``orders`` against reading the table through Spark
(the ``mysql_cdc`` data source into Spark's ``noop`` sink) and against a full export and compare (Spark's JDBC
reader of the source and the mirror's files, ``exceptAll`` both ways), in a throwaway local server. A benchmark,
not a test: it asserts nothing (a verify that does not come out clean is printed as a warning).

    bash bench/verify.sh [--server mariadb|mysql|both] [--scale 1] [--parallelism 2]

The mirror is made first by ``mysql_cdc.sync(once=True)`` into a folder (delta-rs, pyspark 4.3: the demo's
writer). Each run is timed once per ``--repeat`` and the best is reported. Target (issue 33): verify <= 0.5x
reading the table through Spark. Then the checksum's parts alone on each side (rows scanned, their texts, the
SHA-256 summed, the buckets; best of ``--repeat`` runs after one that warms): what bounds verify. Last, one row
of the mirror is changed behind the sync's back and verify timed again (its region's sums differ: a second pass
over that region by buckets names the key). Writes Markdown tables to stdout and to
``bench/results/verify-<server>-sf<scale>.md``.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from typing import Any

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from bench.run import PeakRss, bench_parser, on_each_server  # noqa: E402
from tests.servers import ServerInfo  # noqa: E402

JAR = "/usr/share/java/mariadb-java-client.jar"


def main() -> None:
    ap = bench_parser(__doc__, 1.0, both=True)
    ap.add_argument("--parallelism", type=int, default=2)
    args = ap.parse_args()
    on_each_server(args, "verify", run)


def run(info: ServerInfo, n: int, args: Any, work: str) -> str:
    from pyspark.sql import SparkSession

    import mysql_cdc

    spark = (SparkSession.builder.master(f"local[{args.parallelism}]").config("spark.ui.enabled", "false")
             .config("spark.ui.showConsoleProgress", "false").config("spark.driver.memory", "4g")
             .config("spark.jars", JAR).getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    jvm_pid = int(spark.sparkContext._jvm.ProcessHandle.current().pid())  # type: ignore[union-attr]
    url = f"mysql://{info.user}:{info.password}@{info.host}:{info.port}"
    profiles = {"bench": url}
    mysql_cdc.register(spark, profiles)
    d = os.path.join(work, "sync")
    ck, state, to = os.path.join(d, "ck"), os.path.join(d, "state"), os.path.join(d, "lake")
    t0 = time.monotonic()
    q = mysql_cdc.sync(spark, source="bench", profiles=profiles, tables="tpch[.]orders", to=to, checkpoint=ck,
                       state_dir=state, once=True)
    q.awaitTermination()
    if q.exception() is not None:
        raise RuntimeError(str(q.exception()))
    made = time.monotonic() - t0
    reports: list[Any] = []

    def read_through_spark() -> None:
        spark.read.format("mysql_cdc").option("source", "bench").option("table", "tpch.orders").load() \
            .write.format("noop").mode("overwrite").save()

    def verify() -> None:
        reports.append(mysql_cdc.verify(spark, checkpoint=ck, state_dir=state, source="bench", profiles=profiles))

    def export_and_compare() -> None:
        from deltalake import DeltaTable

        jdbc = f"jdbc:mysql://{info.host}:{info.port}/tpch?permitMysqlScheme&allowPublicKeyRetrieval=true"
        src = (spark.read.format("jdbc").option("url", jdbc).option("driver", "org.mariadb.jdbc.Driver")
               .option("user", info.user).option("password", info.password).option("dbtable", "orders")
               .option("partitionColumn", "o_orderkey").option("lowerBound", 1).option("upperBound", n * 4)
               .option("numPartitions", args.parallelism).option("fetchsize", 10000).load())
        mir = spark.read.parquet(*DeltaTable(os.path.join(to, "tpch", "orders")).file_uris())
        src = src.select(*[src[c].cast(t) for c, t in mir.dtypes])
        differ = src.exceptAll(mir).count() + mir.exceptAll(src).count()
        if differ:
            print(f"warning: export and compare found {differ} differing rows")

    def timed(action: Callable[[], None]) -> tuple[float, int]:
        best, peak = float("inf"), 0
        for _ in range(args.repeat):
            with PeakRss(lambda: [jvm_pid]) as mem:
                t = time.monotonic()
                action()
                best = min(best, time.monotonic() - t)
            peak = max(peak, mem.peak_total)
        return best, peak

    read_s, read_mem = timed(read_through_spark)
    verify_s, verify_mem = timed(verify)
    export_s, export_mem = timed(export_and_compare)
    last = reports[-1]
    if not last.ok:
        print("warning: verify did not come out clean:\n" + "\n".join(last.lines()))
    t = last.tables[0]
    parts = profile_parts(spark, url, os.path.join(to, "tpch", "orders"), args.repeat)
    # then one row of the mirror changed behind the sync's back: its region's sums differ, so both sides sum that
    # region again by buckets and the bucket is narrowed down to the key
    from deltalake import DeltaTable

    DeltaTable(os.path.join(to, "tpch", "orders")).update({"o_comment": "'changed'"}, predicate="o_orderkey = 7")
    reports.clear()

    def verify_damaged() -> None:
        reports.append(mysql_cdc.verify(spark, checkpoint=ck, state_dir=state, source="bench", profiles=profiles,
                                        recheck_seconds=0))

    damaged_s, damaged_mem = timed(verify_damaged)
    d = reports[-1].tables[0]
    if d.changed != ("7",):
        print("warning: verify of the damaged mirror did not name key 7 alone:\n" + "\n".join(reports[-1].lines()))
    mb = 1024 * 1024
    lines = [
        f"### {info.kind}: TPC-H orders sf{args.scale:g} ({n:,} rows), pyspark 4.3 local[{args.parallelism}], "
        f"a mirror made by the sync (delta-rs) in {made:.1f} s",
        "",
        "| run | seconds | ratio to reading through Spark | peak RSS (JVM and workers, MB) |",
        "| --- | --- | --- | --- |",
        f"| read the table through Spark (`mysql_cdc` data source, noop sink) | {read_s:.2f} | 1.00x | "
        f"{read_mem // mb:,} |",
        f"| `mysql_cdc.verify` (clean: {t.rows:,} rows, {t.chunks} chunks) | {verify_s:.2f} | "
        f"{verify_s / read_s:.2f}x | {verify_mem // mb:,} |",
        f"| `mysql_cdc.verify` (one row of the mirror changed: named, {d.differing} key differs) | {damaged_s:.2f} | "
        f"{damaged_s / read_s:.2f}x | {damaged_mem // mb:,} |",
        f"| full export and compare (Spark JDBC + the mirror's files, `exceptAll` both ways) | {export_s:.2f} | "
        f"{export_s / read_s:.2f}x | {export_mem // mb:,} |",
        "",
        f"Where verify's time went (its best run): the source's checksums {t.source_seconds:.2f} s (one query per "
        f"chunk, in the server) while the mirror's Spark job took {t.mirror_seconds:.2f} s; the rest "
        f"{t.seconds - max(t.source_seconds, t.mirror_seconds):.2f} s (pinning, the keys in flux, planning); "
        f"{'sums and buckets' if t.by_bucket else 'sums only'}, by {t.regions or 'no'} regions of the key (a "
        f"damaged mirror: then {d.regions_again or 'the whole table'} of them by buckets, {d.source_seconds:.2f} s "
        f"and {d.mirror_seconds:.2f} s in all). "
        f"Verify is {verify_s / export_s:.2f}x the export and compare. Target: verify <= 0.5x reading through Spark.",
        "",
        "What bounds it: each part of the checksum alone over the whole table, one side at a time, warm (seconds, "
        "best of the runs; each row adds its part to the one above it):",
        "",
        "| part | the source server (one query) | Spark over the mirror's files |",
        "| --- | --- | --- |",
        *[f"| {name} | {src:.2f} | {mir:.2f} |" for name, src, mir in parts],
    ]
    spark.stop()
    return "\n".join(lines)


def profile_parts(spark: Any, url: str, mirror: str, repeat: int) -> list[tuple[str, float, float]]:
    """The checksum's parts, each alone on each side: the rows scanned and their canonical texts built (verify's
    queries cut short there), then verify's own sums (``source_buckets`` and ``mirror_buckets`` over the whole
    table in one read view): by totals (its first pass) and per bucket of keys (the second, on a damaged table
    only)."""
    from deltalake import DeltaTable

    from mysql_cdc.chunks import Chunk
    from mysql_cdc.ids import ident, table_ident
    from mysql_cdc.options import parse_options
    from mysql_cdc.planner.plan import describe_table
    from mysql_cdc.profiles import profile_from_url
    from mysql_cdc.udtf.sync import checksum as cs
    from mysql_cdc.udtf.sync.verify import mirror_buckets, open_view, source_buckets

    profile = profile_from_url(url, "bench")
    facts, schema = describe_table(profile, parse_options({}), "tpch.orders", binlog=False)
    cols, key = list(schema.columns), ident(schema.primary_key[0])
    table = table_ident(schema.table)
    whole = [Chunk(schema.table, 0, tuple(schema.chunk_key), None, None)]
    rows = spark.read.parquet(*DeltaTable(mirror).file_uris())

    def best(action: Callable[[], Any]) -> float:
        out = float("inf")
        for _ in range(max(repeat, 1) + 1):  # the first run warms
            t = time.monotonic()
            action()
            out = min(out, time.monotonic() - t)
        return out

    view = open_view(profile, facts)
    try:
        cur = view.conn.cursor()

        def query(q: str) -> Callable[[], Any]:
            # parameters, even none: pymysql turns the texts' %% into % only then (DATE_FORMAT's)
            return lambda: (cur.execute(q, ()), cur.fetchall())
        parts = [
            # a range of the key, as verify's chunks are read (no COUNT(*) fast path)
            ("rows scanned", query(f"SELECT COUNT(*) FROM {table} WHERE {key} >= -2147483648"),
             lambda: rows.write.format("noop").mode("overwrite").save()),
            ("+ their canonical texts", query(f"SELECT SUM(LENGTH({cs.source_join(cols)})) FROM {table}"),
             lambda: rows.selectExpr(f"sum(length({cs.mirror_join(cols)}))").collect()),
            ("+ SHA-256, summed (the first pass)",
             lambda: source_buckets(view, schema, whole, False, 0.0, by_bucket=False),
             lambda: mirror_buckets(rows, schema, False, by_bucket=False)),
            ("+ by bucket of keys (the second pass)", lambda: source_buckets(view, schema, whole, False, 0.0),
             lambda: mirror_buckets(rows, schema, False)),
        ]
        src_times = [best(src) for _, src, _ in parts]
    finally:
        view.conn.rollback()
        view.conn.close()
    return [(name, st, best(mir)) for (name, _, mir), st in zip(parts, src_times)]


if __name__ == "__main__":
    main()
