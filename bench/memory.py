"""Memory benchmark: the peak resident memory of the sync job (``mysql-cdc sync --once``, a process of its own,
Spark's default 1g driver) on a table of 2.85 M small rows and on a table of large values (64 to 256 MB each,
snapshot and then an UPDATE of the largest), against Spark's JDBC reader of the same table in the same driver
memory (the nightly dump it replaces), in a throwaway local server. A benchmark, not a test: it asserts nothing.

    bash bench/memory.sh [--server mariadb|mysql] [--rows 2850000] [--blobs 64,128,192,256] [--wide-driver-memory 1g]
        [--rows-driver-memory 3g] [--sync-python .venv-spark-4.2.1/bin/python]   # Spark's Delta (pyspark 4.2)

Each run is sampled every 50 ms: the JVM (driver and, in local mode, executors), the job's own Python (which
collects each micro-batch to merge it into Delta) and the largest Spark Python worker. The sync runs twice on the
narrow table: with its defaults (batches bounded by rows and bytes, chunks planned no larger) and with the
bounds off (``--max-rows-per-batch 0 --max-bytes-per-batch 0``: four chunks of about 479,000 rows per batch, as
before the bounds). The large values run twice too: as the sync moves them (files in ``large_value_dir``, the default
in local mode) and in their rows (``--large-value-dir ''``, as before), each in its own driver memory. Writes a
Markdown table to stdout and to ``bench/results/memory-<server>.md``.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import threading
import time
from typing import Any

import psutil

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from bench.run import bench_parser, bench_server, write_result  # noqa: E402
from tests.servers import ServerInfo  # noqa: E402

JAR = "/usr/share/java/mariadb-java-client.jar"


class Peaks:
    """Peak RSS of a process tree by role: the JVM, the root Python (the job), the largest other Python."""

    def __init__(self, root: int) -> None:
        self.root = root
        self.jvm = self.job = self.worker = self.total = 0
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                top = psutil.Process(self.root)
                procs = [top, *top.children(recursive=True)]
            except psutil.Error:
                procs = []
            total = 0
            for p in procs:
                try:
                    rss, name = p.memory_info().rss, p.name()
                except psutil.Error:
                    continue
                total += rss
                if p.pid == self.root:
                    self.job = max(self.job, rss)
                elif "java" in name:
                    self.jvm = max(self.jvm, rss)
                elif "python" in name:
                    self.worker = max(self.worker, rss)
            self.total = max(self.total, total)
            self._stop.wait(0.05)

    def __enter__(self) -> Peaks:
        self._t.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._t.join()


def _mb(n: int) -> str:
    return f"{n / 2**20:,.0f}"


def sync_run(info: ServerInfo, work: str, name: str, tables: str, *extra: str, python: str = sys.executable
             ) -> dict[str, Any]:
    """``mysql-cdc sync --once`` in a process of its own, run by ``python`` (its pyspark: --sync-python); its
    peak memory, time and outcome."""
    env = {**os.environ, "MYSQL_CDC_PROFILE_BENCH": f"mysql://{info.user}:{info.password}@{info.host}:{info.port}"}
    env.pop("PYSPARK_PYTHON", None)
    base = os.path.join(work, name)
    cmd = [python, "-m", "mysql_cdc", "sync", "--source", "bench", "--tables", tables, "--to",
           f"{base}/lake", "--checkpoint", f"{base}/ck", "--state-dir", f"{base}/state", "--once", "--master",
           "local[2]", "--log", f"{base}.spark.log", *extra]
    started = time.monotonic()
    p = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    with Peaks(p.pid) as peaks:
        out, err = p.communicate()
    secs = time.monotonic() - started
    return {"seconds": secs, "jvm": peaks.jvm, "job": peaks.job, "worker": peaks.worker, "total": peaks.total,
            "outcome": outcome(p.returncode, err), "stdout": out}


def jdbc_run(info: ServerInfo, work: str, table: str, memory: str = "1g") -> dict[str, Any]:
    """Spark's JDBC reader of the same table into Parquet, in a process of its own with the same driver memory."""
    script = f"""
import sys
from pyspark.sql import SparkSession
spark = (SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
         .config("spark.driver.memory", {memory!r})
         .config("spark.jars", {JAR!r}).getOrCreate())
url = "jdbc:mysql://{info.host}:{info.port}/mem?permitMysqlScheme"
df = (spark.read.format("jdbc").option("url", url).option("dbtable", {table!r}).option("user", "root")
      .option("password", "").option("driver", "org.mariadb.jdbc.Driver").option("partitionColumn", "id")
      .option("lowerBound", 0).option("upperBound", {10**7}).option("numPartitions", 2).load())
df.write.mode("overwrite").parquet({os.path.join(work, 'jdbc-' + table)!r})
spark.stop()
"""
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable}
    started = time.monotonic()
    p = subprocess.Popen([sys.executable, "-c", script], cwd=work, env=env, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    with Peaks(p.pid) as peaks:
        _, err = p.communicate()
    secs = time.monotonic() - started
    return {"seconds": secs, "jvm": peaks.jvm, "job": peaks.job, "worker": peaks.worker, "total": peaks.total,
            "outcome": outcome(p.returncode, err)}


def outcome(returncode: int, err: str) -> str:
    r"""A run's outcome for a table cell: ``ok``, or the last line it wrote to stderr, whole (the CLI's one line
    of an error names the fix at its end; a cut at 160 characters lost it), its ``|`` escaped.

    >>> outcome(0, "noise"), outcome(137, "")
    ('ok', 'failed')
    >>> print(outcome(1, "Traceback\nmysql-cdc: out of memory | give more"))
    mysql-cdc: out of memory \| give more
    """
    if returncode == 0:
        return "ok"
    return (err.strip().splitlines() or ["failed"])[-1].replace("|", "\\|")


def load(info: ServerInfo, rows: int, blobs: list[int]) -> None:
    conn = info.connect(root=True)
    conn.autocommit(True)
    cur = conn.cursor()
    cur.execute("SET GLOBAL max_allowed_packet = 1073741824")  # a 256 MB value, and its update's 512 MB event
    conn.close()
    conn = info.connect(root=True)
    conn.autocommit(True)
    cur = conn.cursor()
    cur.execute("CREATE DATABASE mem")
    cur.execute("USE mem")
    cur.execute("CREATE TABLE digits (d INT PRIMARY KEY)")
    cur.execute("INSERT INTO digits VALUES " + ", ".join(f"({i})" for i in range(10)))
    cur.execute("CREATE TABLE narrow (id INT PRIMARY KEY, a INT NOT NULL, b SMALLINT NOT NULL, c CHAR(8) NOT NULL)")
    digits = " + ".join(f"{10**i} * d{i}.d" for i in range(7))
    joins = ", ".join(f"digits d{i}" for i in range(7))
    cur.execute(f"INSERT INTO narrow SELECT n, n % 100000, n % 7, 'abcdefgh' FROM (SELECT {digits} AS n FROM "
                f"{joins}) x WHERE n < {rows}")
    cur.execute("ANALYZE TABLE narrow")
    cur.fetchall()
    cur.execute("CREATE TABLE wide (id INT PRIMARY KEY, v INT NOT NULL, payload LONGBLOB NOT NULL)")
    for i, mb in enumerate(blobs, 1):
        cur.execute("INSERT INTO wide VALUES (%s, 0, REPEAT('x', %s))", (i, mb << 20))
    cur.execute("ANALYZE TABLE wide")
    cur.fetchall()
    conn.close()


def main() -> None:
    ap = bench_parser(__doc__, 0)
    ap.add_argument("--rows", type=int, default=2_850_000)
    ap.add_argument("--blobs", default="64,128,192,256", help="sizes in MB of the large values, one row each")
    ap.add_argument("--wide-driver-memory", default="1g", help="--driver-memory of the runs on large values")
    ap.add_argument("--wide-conf", action="append", default=[], metavar="KEY=VALUE",
                    help="a Spark setting of the sync's runs on large values (--conf of the CLI)")
    ap.add_argument("--rows-driver-memory", default="3g",
                    help="--driver-memory of the runs on large values with every value in its row (--large-value-dir "
                         "''), as before large values travelled as files; '' to leave them out")
    ap.add_argument("--runs", default="narrow,wide", help="which tables to run: narrow, wide or both")
    ap.add_argument("--sync-python", default=sys.executable,
                    help="the Python that runs the sync, by its pyspark: this one (4.3: delta-rs in the driver), or "
                         "e.g. .venv-spark-4.2.1/bin/python (Spark's Delta on the executors)")
    args = ap.parse_args()
    spark = subprocess.run([args.sync_python, "-c", "import pyspark; print(pyspark.__version__)"], check=True,
                           capture_output=True, text=True).stdout.strip()
    writer = "delta-rs" if spark.startswith("4.3") else "Spark's Delta"
    blobs = [int(x) for x in args.blobs.split(",")]
    results: list[tuple[str, int, dict[str, Any]]] = []
    with bench_server(args.server) as (info, _):
        work = tempfile.mkdtemp(prefix="mysql-cdc-memory-")
        runs = set(args.runs.split(","))
        conf = [x for c in args.wide_conf for x in ("--conf", c)]
        load(info, args.rows if "narrow" in runs else 10, blobs if "wide" in runs else [1])
        if "narrow" in runs:
            results.append(("Spark JDBC -> Parquet (the nightly dump), narrow", args.rows,
                            jdbc_run(info, work, "narrow")))
            results.append(("sync --once, narrow: defaults (batches bounded)", args.rows,
                            sync_run(info, work, "narrow", "mem[.]narrow", python=args.sync_python)))
            results.append(("sync --once, narrow: bounds off (as before)", args.rows,
                            sync_run(info, work, "narrow-unbounded", "mem[.]narrow", "--max-rows-per-batch", "0",
                                     "--max-bytes-per-batch", "0", python=args.sync_python)))
        if "wide" in runs:
            results.append((f"Spark JDBC -> Parquet, wide ({'/'.join(map(str, blobs))} MB values)", len(blobs),
                            jdbc_run(info, work, "wide", args.wide_driver_memory)))
            results.append((f"sync --once, wide ({'/'.join(map(str, blobs))} MB values): snapshot", len(blobs),
                            sync_run(info, work, "wide", "mem[.]wide", "--driver-memory", args.wide_driver_memory,
                                     *conf, python=args.sync_python)))
            conn = info.connect(root=True, database="mem")
            conn.autocommit(True)
            conn.cursor().execute("UPDATE wide SET v = v + 1 WHERE id = %s", (len(blobs),))
            conn.close()
            results.append((f"sync --once, wide: UPDATE of the {blobs[-1]} MB row (binlog)", 1,
                            sync_run(info, work, "wide", "mem[.]wide", "--driver-memory", args.wide_driver_memory,
                                     *conf, python=args.sync_python)))
            if args.rows_driver_memory:  # the same two runs with every value in its row, as before large_value_dir
                inrow = ["--driver-memory", args.rows_driver_memory, "--large-value-dir", "", *conf]
                results.append(("sync --once, wide, values in their rows: snapshot", len(blobs),
                                sync_run(info, work, "wide-rows", "mem[.]wide", *inrow, python=args.sync_python)))
                conn = info.connect(root=True, database="mem")
                conn.autocommit(True)
                conn.cursor().execute("UPDATE wide SET v = v + 1 WHERE id = %s", (len(blobs),))
                conn.close()
                results.append((f"sync --once, wide, values in their rows: UPDATE of the {blobs[-1]} MB row", 1,
                                sync_run(info, work, "wide-rows", "mem[.]wide", *inrow, python=args.sync_python)))
    inrow_memory = f", {args.rows_driver_memory} with them in their rows" if args.rows_driver_memory else ""
    lines = [f"Peak resident memory (MB) of `mysql-cdc sync --once` (pyspark {spark}, written by {writer}; "
             "local[2]; Spark's default 1g driver, "
             f"{args.wide_driver_memory} for the large values, which travel as files (large_value_dir, the "
             f"default in local mode){inrow_memory}) and of Spark's JDBC reader in the same driver memory, "
             f"{args.server}, {os.cpu_count()} cores.", "",
             "| run | rows | seconds | JVM | the job's Python | largest Python worker | all | outcome |",
             "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for name, rows, r in results:
        lines.append(f"| {name} | {rows:,} | {r['seconds']:.1f} | {_mb(r['jvm'])} | {_mb(r['job'])} | "
                     f"{_mb(r['worker'])} | {_mb(r['total'])} | {r['outcome']} |")
    by = {name: r for name, _, r in results}
    lines.append("")
    if "narrow" in runs:
        ours = by["sync --once, narrow: defaults (batches bounded)"]["total"]
        peer = by["Spark JDBC -> Parquet (the nightly dump), narrow"]["total"]
        lines.append(f"The bounded sync's peak, all processes, is {ours / max(peer, 1):.2f}x the JDBC dump's.")
    if "wide" in runs:
        dump = next(r for name, _, r in results if name.startswith("Spark JDBC -> Parquet, wide"))
        if dump["outcome"] != "ok":
            lines.append(f"Spark's JDBC reader of the large values failed in a {args.wide_driver_memory} driver (its "
                         "peak until then is above): the ratios below are to that peak.")
        for name, _, r in results:
            if name.startswith("sync --once, wide"):
                lines.append(f"{name}: all processes {r['total'] / max(dump['total'], 1):.2f}x the JDBC dump's peak "
                             f"on the same table, the JVM {r['jvm'] / max(dump['jvm'], 1):.2f}x; "
                             f"{r['total'] / (blobs[-1] << 20):.1f}x the largest value.")
    suffix = "" if runs == {"narrow", "wide"} else "-" + "-".join(sorted(runs))
    write_result(f"memory-{args.server}" + ("" if writer == "delta-rs" else f"-pyspark{spark}") + suffix,
                 "\n".join(lines))


if __name__ == "__main__":
    main()
