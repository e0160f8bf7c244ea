"""Whole-database capture benchmark: one stream over 20 tables against 20 single-table streams, on the same
binlog range, in a throwaway local server. A benchmark, not a test: it asserts nothing.

    bash bench/tables.sh [--server mariadb|mysql|both] [--rows 5000] [--tables 20]

Creates ``--tables`` tables of ``--rows`` rows each (an INT key, a number and a short string), snapshots them
with both setups (not measured), then writes the measured range: every row of every table updated once, in
one transaction per 500 rows (two change rows per row). Each setup then follows that range with
``availableNow`` into parquet in one local[2] Spark application: the one stream (``tables``), or the 20
streams (``table``), one after another (20 stream sources started together do not start on 2 cores: each
has a Python process of its own on the driver, and workers time out connecting back). Reported per setup:
change rows delivered, wall time, change rows/s,
bytes the server sent while it ran (``Bytes_sent``: the binlog, which each reader reads whole, and the
driver's scan of each batch's range), binlog connections (``Binlog Dump`` commands in the general log), and
the peak resident memory of the Spark process tree. Writes a Markdown table to stdout and to
``bench/results/tables-<server>.md``.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from typing import Any

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from bench.run import PeakRss, bench_server, write_result  # noqa: E402
from tests.helpers import insert_rows  # noqa: E402
from tests.servers import ServerInfo  # noqa: E402


def _status(conn: Any, name: str) -> int:
    cur = conn.cursor()
    cur.execute("SHOW GLOBAL STATUS LIKE %s", (name,))
    value = int(cur.fetchone()[1])
    cur.close()
    return value


def _dumps(conn: Any) -> int:
    cur = conn.cursor()
    cur.execute("SELECT COUNT(*) FROM mysql.general_log WHERE command_type LIKE 'Binlog Dump%'")
    n = int(cur.fetchone()[0])
    cur.close()
    return n


def _streams(spark: Any, url: str, tables: list[str], many: bool, work: str, name: str) -> int:
    """Run the setup's availableNow queries, one after another (one over every table, or one per table: 20
    stream sources at once do not start on 2 cores, each has a Python process of its own on the driver);
    return how many ran."""
    import mysql_cdc

    mysql_cdc.register(spark, {"src": url})
    targets = [("tables", "bench[.]t.*")] if many else [("table", f"bench.{t}") for t in tables]
    for i, (key, value) in enumerate(targets):
        base = os.path.join(work, name, str(i))
        df = (spark.readStream.format("mysql_cdc").option("source", "src").option(key, value)
              .option("state_dir", os.path.join(base, "state")).load())
        q = (df.writeStream.format("parquet").option("path", os.path.join(base, "out"))
             .option("checkpointLocation", os.path.join(base, "ck")).trigger(availableNow=True).start())
        q.awaitTermination()
        assert q.exception() is None, q.exception()
    return len(targets)


def run(kind: str, rows: int, count: int) -> list[str]:
    with bench_server(kind) as (info, work):
        return measure(info, rows, count, work)


def measure(info: ServerInfo, rows: int, count: int, work: str) -> list[str]:
    from pyspark.sql import SparkSession

    conn = info.connect(root=True)
    conn.autocommit(True)
    cur = conn.cursor()
    cur.execute("CREATE DATABASE bench")
    cur.execute("USE bench")
    tables = [f"t{i:02d}" for i in range(count)]
    for t in tables:
        cur.execute(f"CREATE TABLE {t} (id INT PRIMARY KEY, n BIGINT NOT NULL, s VARCHAR(40) NOT NULL)")
        insert_rows(conn, t, ["id", "n", "s"], [(k, k * 7, f"row {k} of {t}") for k in range(1, rows + 1)])
    url = f"mysql://{info.user}:{info.password}@{info.host}:{info.port}"
    spark = (SparkSession.builder.master("local[2]").appName("mysql-cdc-bench-tables")
             .config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", "2").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    setups = (("one stream, tables", True), (f"{count} streams, table", False))
    try:
        for name, many in setups:  # the snapshots, not measured
            _streams(spark, url, tables, many, work, name)
        for lo in range(1, rows + 1, 500):  # the measured range: every row updated once
            for t in tables:
                cur.execute(f"UPDATE {t} SET n = n + 1 WHERE id BETWEEN %s AND %s", (lo, lo + 499))
        expected = 2 * rows * count
        lines = ["| setup | change rows | seconds | change rows/s | server bytes sent | binlog connections | "
                 "peak RSS (MB) |", "| --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
        for name, many in setups:
            cur.execute("SET GLOBAL general_log = 0")
            cur.execute("TRUNCATE TABLE mysql.general_log")
            cur.execute("SET GLOBAL log_output = 'TABLE'")
            cur.execute("SET GLOBAL general_log = 1")
            sent = _status(conn, "Bytes_sent")
            started = time.monotonic()
            with PeakRss(lambda: [os.getpid()]) as rss:
                queries = _streams(spark, url, tables, many, work, name)
            seconds = time.monotonic() - started
            cur.execute("SET GLOBAL general_log = 0")
            sent = _status(conn, "Bytes_sent") - sent
            dumps = _dumps(conn)
            delivered = sum(spark.read.parquet(os.path.join(work, name, str(i), "out")).where("__op <> 'r'").count()
                            for i in range(queries))
            lines.append(f"| {name} | {delivered:,} (of {expected:,}) | {seconds:.1f} | {delivered / seconds:,.0f} | "
                         f"{sent / 1e6:,.1f} MB | {dumps} | {rss.peak_total / 1e6:,.0f} |")
        return lines
    finally:
        spark.stop()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--server", choices=["mariadb", "mysql", "both"], default="both")
    ap.add_argument("--rows", type=int, default=5000, help="rows per table")
    ap.add_argument("--tables", type=int, default=20)
    args = ap.parse_args()
    kinds = ["mariadb", "mysql"] if args.server == "both" else [args.server]
    out = [f"# Whole-database capture: one stream over {args.tables} tables vs {args.tables} single-table streams",
           "", f"{args.rows:,} rows per table; the measured range updates every row once (two change rows per row). "
           "Spark local[2], availableNow into parquet, both setups in one Spark application.", ""]
    for kind in kinds:
        out += [f"## {kind}", "", *run(kind, args.rows, args.tables), ""]
    write_result("tables-" + args.server, "\n".join(out))


if __name__ == "__main__":
    main()
