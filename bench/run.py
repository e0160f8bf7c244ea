"""Snapshot benchmark: rows/s and peak memory of this project's readers (the data source, a SQL view over it,
the SQL function) against Spark's JDBC reader with the same partitions and the C client, on TPC-H ``orders``
in a throwaway local server of each kind, one after the other in one run; first, where Spark's own time goes
on our Arrow batches (:mod:`bench.handoff`, no database). A benchmark, not a test: it asserts nothing.

    bash bench/run.sh [--server both|mariadb|mysql] [--scale 1] [--parallelism 2] [--partitions 2,4]

Writes Markdown tables to stdout and to ``bench/results/snapshot-<server>-sf<scale>.md``.
"""

from __future__ import annotations

import argparse
import contextlib
import glob
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import psutil

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from tests.servers import ServerInfo, ServerProcess, mysql_chroot  # noqa: E402

ORDERS_DDL = """CREATE TABLE orders (
  o_orderkey BIGINT NOT NULL PRIMARY KEY, o_custkey BIGINT NOT NULL, o_orderstatus CHAR(1) NOT NULL,
  o_totalprice DECIMAL(15,2) NOT NULL, o_orderdate DATE NOT NULL, o_orderpriority VARCHAR(15) NOT NULL,
  o_clerk VARCHAR(15) NOT NULL, o_shippriority INT NOT NULL, o_comment VARCHAR(79) NOT NULL)"""


class PeakRss:
    """Samples the resident memory of a process tree (the Spark JVM and its Python workers) every 50 ms."""

    def __init__(self, pids: Callable[[], list[int]]) -> None:
        self.pids = pids
        self.peak_total = 0
        self.peak_python = 0
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            total = py = 0
            for pid in self.pids():
                try:
                    p = psutil.Process(pid)
                    procs = [p, *p.children(recursive=True)]
                except psutil.Error:
                    continue
                for q in procs:
                    try:
                        rss = q.memory_info().rss
                        total += rss
                        if "python" in (q.name() or ""):
                            py = max(py, rss)
                    except psutil.Error:
                        pass
            self.peak_total = max(self.peak_total, total)
            self.peak_python = max(self.peak_python, py)
            self._stop.wait(0.05)

    def __enter__(self) -> PeakRss:
        self._t.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._t.join()


def load_orders(info: ServerInfo, scale: float, work: str) -> int:
    out = os.path.join(work, "tpch")
    subprocess.run([os.path.join(os.path.dirname(sys.executable), "tpchgen-cli"), "-s", str(scale),
                    "--tables=orders", f"--output-dir={out}"], check=True)
    path = glob.glob(os.path.join(out, "orders*.tbl"))[0]
    conn = info.connect(root=True, local_infile=True)
    cur = conn.cursor()
    if info.kind == "mysql":
        cur.execute("SET GLOBAL local_infile = 1")
    cur.execute("CREATE DATABASE IF NOT EXISTS tpch")
    cur.execute("USE tpch")
    cur.execute("DROP TABLE IF EXISTS orders")
    cur.execute(ORDERS_DDL)
    cur.execute(f"LOAD DATA LOCAL INFILE '{path}' INTO TABLE orders FIELDS TERMINATED BY '|'")
    cur.execute("ANALYZE TABLE orders")
    cur.fetchall()
    cur.execute("SELECT COUNT(*) FROM orders")
    n = int(cur.fetchone()[0])
    conn.close()
    return n


def c_client(info: ServerInfo) -> list[str]:
    if info.kind == "mariadb":
        return ["mariadb"]
    root = mysql_chroot()
    return ["chroot", root, "mysql"] if os.path.exists(os.path.join(root, "usr/bin/mysql")) \
        else ["mariadb"]


def bench_parser(doc: str | None, scale: float, both: bool = False) -> argparse.ArgumentParser:
    """The options every benchmark takes: --server (with ``both``: both servers, one after the other, the
    default), --scale (TPC-H scale factor), --repeat."""
    ap = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    kinds = ["mariadb", "mysql", "both"] if both else ["mariadb", "mysql"]
    ap.add_argument("--server", choices=kinds, default=kinds[-1] if both else "mariadb")
    ap.add_argument("--scale", type=float, default=scale)
    ap.add_argument("--repeat", type=int, default=2, help="runs per reader; the best is reported")
    return ap


@contextlib.contextmanager
def bench_server(kind: str) -> Iterator[tuple[ServerInfo, str]]:
    """A throwaway server of ``kind`` and a work directory, both gone afterwards; Spark's Python workers run
    this interpreter with the checkout on their path."""
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYTHONPATH"] = ROOT + os.pathsep + os.environ.get("PYTHONPATH", "")
    work = tempfile.mkdtemp(prefix="mysql-cdc-bench-")
    server = ServerProcess(kind, work)
    try:
        yield server.start(), work
    finally:
        server.stop()
        shutil.rmtree(work, ignore_errors=True)


def on_each_server(args: Any, name: str, run: Callable[[ServerInfo, int, Any, str], str]) -> None:
    """``run(info, rows, args, work)`` on a throwaway server of each kind ``--server`` names, TPC-H orders loaded
    at ``--scale``; its sections written together as ``bench/results/<name>-<server>-sf<scale>.md``."""
    kinds = ["mariadb", "mysql"] if args.server == "both" else [args.server]
    sections = []
    for kind in kinds:
        with bench_server(kind) as (info, work):
            n = load_orders(info, args.scale, work)
            sections.append(run(info, n, args, work))
    write_result(f"{name}-{args.server}-sf{args.scale:g}", "\n\n".join(sections))


def write_result(name: str, text: str) -> None:
    """Print a result table and write it to bench/results/<name>.md."""
    print(text)
    os.makedirs(os.path.join(ROOT, "bench", "results"), exist_ok=True)
    out = os.path.join(ROOT, "bench", "results", f"{name}.md")
    with open(out, "w") as f:
        f.write(text + "\n")
    print(f"written to {out}")


def main() -> None:
    ap = bench_parser(__doc__, 1.0, both=True)
    ap.add_argument("--parallelism", type=int, default=2, help="Spark's local[N] cores")
    ap.add_argument("--partitions", default="2,4", help="comma-separated partition counts for both readers")
    args = ap.parse_args()
    kinds = ["mariadb", "mysql"] if args.server == "both" else [args.server]
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYTHONPATH"] = ROOT + os.pathsep + os.environ.get("PYTHONPATH", "")
    sections = []
    for kind in kinds:
        with bench_server(kind) as (info, work):
            t = time.monotonic()
            n = load_orders(info, args.scale, work)
            print(f"loaded {n} rows of TPC-H orders (sf {args.scale}) into {kind} in "
                  f"{time.monotonic() - t:.1f} s", flush=True)
            results = run_all(info, n, args)
        sections.append(result_table(kind, n, args, results))
    # last: the JDBC driver jar is on the classpath only of the JVM the first session launched
    sections.insert(0, handoff_section(args))
    write_result(f"snapshot-{args.server}-sf{args.scale:g}", "\n\n".join(sections))


def result_table(kind: str, n: int, args: Any, results: list[tuple[str, int, float, int, int]]) -> str:
    jdbc = {par: secs for name, par, secs, _, _ in results if name.startswith("Spark JDBC")}
    lines = [f"Snapshot of TPC-H orders, {n} rows, {kind}, Spark local[{args.parallelism}]; best of {args.repeat}; "
             f"{os.cpu_count()} cores. 'vs JDBC': JDBC's seconds over this reader's, same partitions.", "",
             "| reader | partitions | seconds | rows/s | vs JDBC | peak RSS, Spark JVM + Python workers (MB) | "
             "peak RSS of one Python worker (MB) |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    for name, par, secs, total, py in results:
        ratio = f"{jdbc[par] / secs:.2f}x" if par in jdbc else "-"
        mem = f"{total / 2**20:,.0f} | {py / 2**20:,.0f}" if total else "- | -"
        lines.append(f"| {name} | {par} | {secs:.2f} | {n / secs:,.0f} | {ratio} | {mem} |")
    return "\n".join(lines)


def handoff_section(args: Any) -> str:
    """Where Spark's time goes on our batches, without a database: the same Arrow batches of TPC-H orders (made
    in the Python worker) handed to Spark by a Python data source, with and without the metadata columns, and
    in one or many partitions, beside Spark reading the same rows from Parquet (no Python at all)."""
    from bench.handoff import measure

    rows = measure(args.scale, args.parallelism, args.repeat)
    lines = [f"Hand-off to Spark only (no database): {rows[0][2]:,} rows of TPC-H orders as Arrow batches from a "
             f"Python data source, local[{args.parallelism}]; best of {args.repeat}.", "",
             "| what | seconds | rows/s |", "| --- | --- | --- |"]
    lines += [f"| {name} | {secs:.2f} | {n / secs:,.0f} |" for name, secs, n in rows]
    return "\n".join(lines)


def run_all(info: ServerInfo, n: int, args: Any) -> list[tuple[str, int, float, int, int]]:
    from pyspark.sql import SparkSession

    import mysql_cdc

    jar = "/usr/share/java/mariadb-java-client.jar"
    spark = (SparkSession.builder.master(f"local[{args.parallelism}]").config("spark.ui.enabled", "false")
             .config("spark.driver.memory", "2g").config("spark.jars", jar)
             .config("spark.sql.shuffle.partitions", str(args.parallelism)).getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    jvm_pid = int(spark.sparkContext._jvm.ProcessHandle.current().pid())  # type: ignore[union-attr]
    url = f"mysql://{info.user}:{info.password}@{info.host}:{info.port}"
    mysql_cdc.register(spark, {"bench": url})
    out: list[tuple[str, int, float, int, int]] = []

    def timed(name: str, par: int, action: Callable[[], Any]) -> None:
        best = None
        for _ in range(args.repeat):
            with PeakRss(lambda: [jvm_pid]) as mem:
                t = time.monotonic()
                action()
                secs = time.monotonic() - t
            if best is None or secs < best[2]:
                best = (name, par, secs, mem.peak_total, mem.peak_python)
        assert best is not None
        out.append(best)
        print(f"{info.kind} {name}, {par} partitions: {best[2]:.2f} s", flush=True)

    def noop(df: Any) -> None:
        df.write.format("noop").mode("overwrite").save()

    ds = spark.read.format("mysql_cdc").option("source", "bench").option("table", "tpch.orders")
    timed("mysql_cdc data source, defaults", args.parallelism, lambda: noop(ds.load()))
    for par in [int(p) for p in args.partitions.split(",")]:
        timed("mysql_cdc data source", par, lambda p=par: noop(ds.option("partitions", p).load()))
        timed("mysql_cdc data source, metadata_columns false", par,
              lambda p=par: noop(ds.option("partitions", p).option("metadata_columns", "false").load()))
        spark.sql(f"CREATE OR REPLACE TEMPORARY VIEW orders_{par} USING mysql_cdc OPTIONS (source 'bench', "
                  f"table 'tpch.orders', partitions '{par}')")
        timed("SQL: a view USING mysql_cdc", par, lambda p=par: noop(spark.sql(f"SELECT * FROM orders_{p}")))
        sql = (f"SELECT * FROM mysql_cdc_snapshot(TABLE(SELECT /*+ REPARTITION({par}) */ * FROM "
               "mysql_cdc_chunks(source => 'bench', tables => 'tpch[.]orders')), "
               "source => 'bench', table => 'tpch.orders')")
        timed("SQL: mysql_cdc_snapshot(TABLE(...))", par, lambda q=sql: noop(spark.sql(q)))
        jdbc = (spark.read.format("jdbc")
                .option("url", f"jdbc:mysql://{info.host}:{info.port}/tpch?permitMysqlScheme")
                .option("driver", "org.mariadb.jdbc.Driver").option("user", info.user)
                .option("password", info.password).option("dbtable", "orders")
                .option("partitionColumn", "o_orderkey").option("lowerBound", 1).option("upperBound", n * 4)
                .option("numPartitions", par).option("fetchsize", 10000))
        timed("Spark JDBC (mariadb-java-client)", par, lambda r=jdbc: noop(r.load()))
    # the defaults before issue 16: chunks of 8,096 rows, a Spark partition per chunk
    timed("mysql_cdc data source, old defaults: chunk_size 8096, a partition per chunk", 0,
          lambda: noop(ds.option("chunk_size", 8096).option("partitions", 1_000_000).load()))
    spark.stop()
    client = c_client(info)

    def run_client() -> None:
        subprocess.run([*client, "--quick", "-h", info.host, "-P", str(info.port), "-u", info.user,
                        f"-p{info.password}", "-e", "SELECT * FROM tpch.orders"],
                       check=True, stdout=subprocess.DEVNULL)

    best = min(_time(run_client) for _ in range(args.repeat))
    out.append((f"C client ({client[-1]} --quick), one stream", 1, best, 0, 0))
    return out


def _time(fn: Callable[[], None]) -> float:
    t = time.monotonic()
    fn()
    return time.monotonic() - t


if __name__ == "__main__":
    main()
