"""Snapshot benchmark: rows/s and peak memory of this project's readers against Spark's JDBC reader and the C
client, on TPC-H ``orders`` in a throwaway local server. A benchmark, not a test: it asserts nothing.

    bash bench/run.sh [--server mariadb|mysql] [--scale 1] [--parallelism 2]

Writes a Markdown table to stdout and to ``bench/results/snapshot-<server>-sf<scale>.md``.
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


def bench_parser(doc: str | None, scale: float) -> argparse.ArgumentParser:
    """The options every benchmark takes: --server, --scale (TPC-H scale factor), --repeat."""
    ap = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--server", choices=["mariadb", "mysql"], default="mariadb")
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


def write_result(name: str, text: str) -> None:
    """Print a result table and write it to bench/results/<name>.md."""
    print(text)
    os.makedirs(os.path.join(ROOT, "bench", "results"), exist_ok=True)
    out = os.path.join(ROOT, "bench", "results", f"{name}.md")
    with open(out, "w") as f:
        f.write(text + "\n")
    print(f"written to {out}")


def main() -> None:
    ap = bench_parser(__doc__, 1.0)
    ap.add_argument("--parallelism", type=int, default=2)
    ap.add_argument("--chunk-size", type=int, default=50_000)
    args = ap.parse_args()
    with bench_server(args.server) as (info, work):
        t = time.monotonic()
        n = load_orders(info, args.scale, work)
        print(f"loaded {n} rows of TPC-H orders (sf {args.scale}) into {args.server} in "
              f"{time.monotonic() - t:.1f} s", flush=True)
        results = run_all(info, n, args)
    lines = [f"Snapshot of TPC-H orders, {n} rows, {args.server}, Spark local[{args.parallelism}], "
             f"chunk_size {args.chunk_size}; best of {args.repeat}; {os.cpu_count()} cores.", "",
             "| reader | parallelism | seconds | rows/s | peak RSS, Spark JVM + Python workers (MB) | "
             "peak RSS of one Python worker (MB) |",
             "| --- | --- | --- | --- | --- | --- |"]
    for name, par, secs, total, py in results:
        lines.append(f"| {name} | {par} | {secs:.2f} | {n / secs:,.0f} | {total / 2**20:,.0f} | "
                     f"{py / 2**20:,.0f} |" if total else
                     f"| {name} | {par} | {secs:.2f} | {n / secs:,.0f} | - | - |")
    write_result(f"snapshot-{args.server}-sf{args.scale:g}", "\n".join(lines))


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
    cs = args.chunk_size
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
        print(f"{name}: {best[2]:.2f} s", flush=True)

    ds = (spark.read.format("mysql_cdc").option("source", "bench").option("table", "tpch.orders")
          .option("chunk_size", cs))
    grouped = ds.option("partitions", args.parallelism)
    timed(f"mysql_cdc data source, chunks in {args.parallelism} partitions", args.parallelism,
          lambda: grouped.load().write.format("noop").mode("overwrite").save())
    timed("mysql_cdc data source, one partition per chunk", args.parallelism,
          lambda: ds.option("partitions", 0).load().write.format("noop").mode("overwrite").save())
    sql = (f"SELECT * FROM mysql_cdc_snapshot(TABLE(SELECT /*+ REPARTITION({args.parallelism}) */ * FROM "
           f"mysql_cdc_chunks(source => 'bench', tables => 'tpch[.]orders', chunk_size => {cs})), "
           "source => 'bench', table => 'tpch.orders')")
    timed("mysql_cdc_snapshot (SQL)", args.parallelism,
          lambda: spark.sql(sql).write.format("noop").mode("overwrite").save())
    jdbc = (spark.read.format("jdbc").option("url", f"jdbc:mysql://{info.host}:{info.port}/tpch?permitMysqlScheme")
            .option("driver", "org.mariadb.jdbc.Driver").option("user", info.user)
            .option("password", info.password).option("dbtable", "orders")
            .option("partitionColumn", "o_orderkey").option("lowerBound", 1).option("upperBound", n * 4)
            .option("numPartitions", args.parallelism).option("fetchsize", 10000))
    timed("Spark JDBC (mariadb-java-client)", args.parallelism,
          lambda: jdbc.load().write.format("noop").mode("overwrite").save())
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
