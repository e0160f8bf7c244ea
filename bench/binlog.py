"""Binlog benchmark: change rows/s and peak memory of this project's binlog readers beside the C decoder and
the raw python-mysql-replication loop, on the same events, in a throwaway local server of each kind, one after
the other in one run. A benchmark, not a test: it asserts nothing.

    bash bench/binlog.sh [--server both|mariadb|mysql] [--scale 0.1] [--repeat 2] [--readers planned,parallel]

Loads TPC-H ``orders``, then (in the measured binlog range) deletes every row, inserts them again and updates
every row, each in one transaction: four change rows per row (a delete, an insert, the before and after image
of an update), and transactions of ``150,000 x scale / 0.1`` rows (1,000,000 rows at ``--scale 0.67``). Then
it reads that range with:

- the C decoder the server ships (``mariadb-binlog -v`` / ``mysqlbinlog -v``), its text counted by awk: the
  ceiling of any reader;
- the plain library loop (``BinLogStreamReader``, rows decoded to dicts, nothing else): what a Python reader
  built on python-mysql-replication pays at least;
- this project's core reader, ``BinlogPhase.changes`` (transactions, the emit decision, canonical values), with
  the library's decoder (``row_decoder=library``, the reader before issue 15) and with the decoder compiled per
  table map (``row_decoder=planned``, the default);
- ``BinlogPhase.runs`` into Arrow batches: the same change rows by rows event (``ChangeRun``), made into the
  record batches the Spark surfaces hand to Spark (a rows event's images walked, then read column by column
  for a batch of events at once: ``udtf/binlog/columns.py``), in the same process, without Spark;
- the same, the range cut in two at a transaction boundary (``BinlogPhase.split``, as parallel catch-up cuts
  it) and read by two processes at once;
- Flink CDC's MySQL source (``flink-sql-connector-mysql-cdc`` 3.5.0 on Flink 1.20.3, Maven Central's jars,
  ``bench/flink``) in a local Flink of one task, started at the range's first position: its records counted
  (Debezium's typed records, what every Flink CDC job starts from) and the same through its JSON deserializer;
  timed from the first change row to the last (the JVM's and Flink's start left out, as Spark's session start is)
  and, for the records, from the job's submission;
- ``mysql_cdc_binlog`` in Spark SQL (one task, counted), and the same read as the ``mysql_cdc_binlog`` data
  source (what ``CREATE TEMPORARY VIEW ... USING mysql_cdc_binlog`` reads: Arrow batches streamed) with one task
  and with ``binlog_partitions`` 2;
- a stream (``readStream``, ``availableNow``, counted in ``foreachBatch``), which also scans the range once in
  the driver to plan its batch, with one task and with ``binlog_partitions`` 2 (Spark local[2]), and a stream of
  ``tables`` (the many-table envelope the sync reads: each row's values as JSON).

The core readers and the library loop run in a process of their own each (the peak RSS is that process's:
Python keeps what it once allocated), the Spark ones in one local Spark (the peak is the JVM and its Python
workers). Writes a Markdown table to stdout and to ``bench/results/binlog-<server>-sf<scale>.md``.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

import psutil

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from bench.run import PeakRss, bench_parser, bench_server, load_orders, write_result  # noqa: E402
from tests.helpers import binlog_end  # noqa: E402
from tests.servers import ServerInfo, mysql_chroot  # noqa: E402

Range = tuple[str, int, str, int]  # start file, start position, end file, end position
CORE = "mysql_cdc core: BinlogPhase.changes"
READERS = ("c", "raw", "library", "planned", "runs", "parallel", "flink", "spark")
FLINK = os.path.join(ROOT, "bench", "flink")
# Flink 1.20 on Java 17 reflects into these (its Kryo serializers); the flags Flink's own launcher sets
JAVA_OPENS = [f"--add-opens=java.base/{p}=ALL-UNNAMED" for p in (
    "java.lang", "java.lang.reflect", "java.util", "java.util.concurrent", "java.io", "java.net", "java.nio",
    "java.text", "java.time", "sun.nio.ch")]


def raw_loop(info: ServerInfo, rng: Range) -> int:
    """The plain library loop: row events of tpch.orders, every row decoded, counted as change rows."""
    from pymysqlreplication import BinLogStreamReader
    from pymysqlreplication.row_event import DeleteRowsEvent, UpdateRowsEvent, WriteRowsEvent

    file, pos, end_file, end_pos = rng
    stream = BinLogStreamReader(
        connection_settings={"host": info.host, "port": info.port, "user": info.user, "passwd": info.password},
        server_id=4_000_001, blocking=False, resume_stream=True, log_file=file, log_pos=pos,
        only_events=[WriteRowsEvent, UpdateRowsEvent, DeleteRowsEvent], only_schemas=["tpch"],
        only_tables=["orders"], freeze_schema=True, enable_logging=False)
    n = 0
    try:
        for ev in stream:
            n += sum(2 if isinstance(ev, UpdateRowsEvent) else 1 for _ in ev.rows)
            if (stream.log_file, stream.log_pos) >= (end_file, end_pos):
                break
    finally:
        stream.close()
    return n


def core(info: ServerInfo, rng: Range, decoder: str) -> Callable[[], int]:
    """The core read of the range, set up (schema described) and ready to run."""
    from mysql_cdc.offsets import BinlogOffset
    from mysql_cdc.options import parse_options
    from mysql_cdc.planner.plan import describe_table
    from mysql_cdc.profiles import ConnectionProfile
    from mysql_cdc.udtf.binlog.phase import BinlogPhase
    from mysql_cdc.udtf.binlog.startup import ReadFrom

    profile = ConnectionProfile(host=info.host, port=info.port, user=info.user, password=info.password)
    opts = parse_options({"table": "tpch.orders", "startup": "offset", "startup_offset": f"{rng[0]}:{rng[1]}",
                          "row_decoder": "planned" if decoder == "runs" else decoder})
    facts, schema = describe_table(profile, opts, "tpch.orders")
    phase = BinlogPhase(profile, facts, opts, {schema.table: schema}, {schema.table: None})
    start, end = ReadFrom(BinlogOffset(rng[0], rng[1])), BinlogOffset(rng[2], rng[3])
    if decoder == "runs":  # change rows by event into Arrow batches, as the Spark surfaces hand them to Spark
        from mysql_cdc.udtf.spark.output import Output

        output = Output({schema.table: schema}, opts)
        return lambda: sum(b.num_rows for b in output.change_batches(phase.runs(start, end, columns=True),
                                                                       opts.fetch_size))
    return lambda: sum(1 for _ in phase.changes(start, end))


def _child(target: str, info: ServerInfo, rng: Range, ready: Any, out: Any) -> None:
    action: Callable[[], int] = (lambda: raw_loop(info, rng)) if target == "raw" else core(info, rng, target)
    ready.wait()  # every part starts reading at once
    t = time.monotonic()
    rows = action()
    out.put((t, time.monotonic(), rows))


def in_child(target: str, info: ServerInfo, rng: Range, parts: int = 1) -> tuple[float, int, int]:
    """Seconds, change rows and peak RSS (bytes, summed) of one read in fresh processes: one, or one per part
    of the range cut as parallel catch-up cuts it (the seconds then run from the common start to the last
    end; CLOCK_MONOTONIC is one clock for every process)."""
    ranges = cut_range(info, rng, parts) if parts > 1 else [rng]
    ctx = multiprocessing.get_context("spawn")
    out = ctx.Queue()
    ready = ctx.Barrier(len(ranges))
    procs = [ctx.Process(target=_child, args=(target, info, r, ready, out)) for r in ranges]
    for proc in procs:
        proc.start()
    with PeakRss(lambda: [p.pid for p in procs if p.pid]) as mem:
        results = [out.get(timeout=3600) for _ in procs]
        for proc in procs:
            proc.join()
    secs = max(end for _, end, _ in results) - min(start for start, _, _ in results)
    return secs, sum(rows for _, _, rows in results), mem.peak_total


def cut_range(info: ServerInfo, rng: Range, parts: int) -> list[Range]:
    from mysql_cdc.offsets import BinlogOffset
    from mysql_cdc.options import parse_options
    from mysql_cdc.planner.plan import describe_table
    from mysql_cdc.profiles import ConnectionProfile
    from mysql_cdc.udtf.binlog.catchup import GIVEN_MIN_BYTES
    from mysql_cdc.udtf.binlog.phase import BinlogPhase
    from mysql_cdc.udtf.binlog.startup import ReadFrom

    profile = ConnectionProfile(host=info.host, port=info.port, user=info.user, password=info.password)
    opts = parse_options({"table": "tpch.orders"})
    facts, schema = describe_table(profile, opts, "tpch.orders")
    phase = BinlogPhase(profile, facts, opts, {schema.table: schema}, {schema.table: None})
    cuts = phase.cut_points(ReadFrom(BinlogOffset(rng[0], rng[1])), BinlogOffset(rng[2], rng[3]), parts,
                            GIVEN_MIN_BYTES)
    points = [(rng[0], rng[1]), *((c.file, c.pos) for c in cuts), (rng[2], rng[3])]
    return [(a[0], a[1], b[0], b[1]) for a, b in zip(points, points[1:])]


def c_decoder(info: ServerInfo, rng: Range, work: str) -> tuple[float, int, int]:
    """The server's own C decoder reading the range from the server (as a replica would), rows printed as
    text (``-v``) and counted by awk. The password travels in an option file only its owner may read."""
    if info.kind == "mariadb":
        prefix, cnf, cnf_arg = [], os.path.join(work, "client.cnf"), None
        program = "mariadb-binlog"
    else:  # MySQL's own mysqlbinlog, from the server's chroot (MariaDB's cannot read MySQL 9's binlog)
        root = mysql_chroot()
        prefix, cnf, program = ["chroot", root], os.path.join(root, "tmp", f"bench-{os.getpid()}.cnf"), "mysqlbinlog"
        cnf_arg = "/tmp/" + os.path.basename(cnf)
    fd = os.open(cnf, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.write(fd, f"[client]\nuser={info.user}\npassword={info.password}\n".encode())
    os.close(fd)
    try:
        cmd = [*prefix, program, f"--defaults-extra-file={cnf_arg or cnf}", "--read-from-remote-server",
               f"--host={info.host}", f"--port={info.port}", "-v", "--base64-output=DECODE-ROWS",
               f"--start-position={rng[1]}", f"--stop-position={rng[3]}", rng[0]]
        if rng[2] != rng[0]:
            raise SystemExit(f"the range spans {rng[0]} .. {rng[2]}; the C decoder run reads one file")
        t = time.monotonic()
        dec = subprocess.Popen(cmd, stdout=subprocess.PIPE)
        awk = subprocess.Popen(["awk", "/^### (INSERT|DELETE)/ {n++} /^### UPDATE/ {n += 2} END {print n + 0}"],
                               stdin=dec.stdout, stdout=subprocess.PIPE)
        assert dec.stdout is not None
        dec.stdout.close()
        with PeakRss(lambda: [dec.pid]) as mem:
            counted, _ = awk.communicate()
            dec.wait()
        secs = time.monotonic() - t
        if dec.returncode != 0:
            raise SystemExit(f"{program} failed with exit code {dec.returncode}")
        return secs, int(counted.decode().strip()), mem.peak_total
    finally:
        os.unlink(cnf)


def flink_classpath() -> str:
    """The harness built (``bench/flink``: its jars by Maven, its one class by javac) once per checkout."""
    target = os.path.join(FLINK, "target")
    cp_file = os.path.join(target, "classpath.txt")
    classes = os.path.join(target, "classes")
    src = os.path.join(FLINK, "src", "main", "java", "mysqlcdcbench", "FlinkBinlogCount.java")
    built = os.path.join(classes, "mysqlcdcbench", "FlinkBinlogCount.class")
    if not os.path.exists(cp_file) or os.path.getmtime(cp_file) < os.path.getmtime(os.path.join(FLINK, "pom.xml")):
        subprocess.run(["mvn", "-q", "-f", os.path.join(FLINK, "pom.xml"), "dependency:build-classpath",
                        f"-Dmdep.outputFile={cp_file}"], check=True)
    with open(cp_file) as f:
        jars = f.read().strip()
    if not os.path.exists(built) or os.path.getmtime(built) < max(os.path.getmtime(src), os.path.getmtime(cp_file)):
        os.makedirs(classes, exist_ok=True)
        subprocess.run(["javac", "-nowarn", "-d", classes, "-cp", jars, src], check=True)
    return classes + os.pathsep + jars


def flink_reader(info: ServerInfo, rng: Range, changes: int, mode: str) -> tuple[float, float, int, int]:
    """Seconds from the job's submission and from its first change row to the last, change rows, peak RSS of
    one read of the range by Flink CDC (a JVM of its own; the password goes in on standard input)."""
    if rng[2] != rng[0]:
        raise SystemExit(f"the range spans {rng[0]} .. {rng[2]}; the Flink run reads one file")
    cmd = ["java", "-Xmx2g", *JAVA_OPENS, "-cp", flink_classpath(), "mysqlcdcbench.FlinkBinlogCount", info.host,
           str(info.port), info.user, rng[0], str(rng[1]), str(changes), "tpch.orders", mode]
    proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        with PeakRss(lambda: [proc.pid]) as mem:
            out, err = proc.communicate(info.password + "\n", timeout=3600)
    finally:
        if proc.poll() is None:  # timed out or interrupted: no JVM left beside the next reader
            proc.kill()
            proc.wait()
    if proc.returncode != 0:
        causes = [ln.strip() for ln in err.splitlines() if ln.startswith(("Caused by", "the Flink job", "timed out"))]
        raise SystemExit(f"exit code {proc.returncode}; " + (causes[-1] if causes else err.strip()[-300:]))
    got = json.loads(out.strip().splitlines()[-1])
    return float(got["seconds"]), float(got["first_to_last"]), int(got["rows"]), mem.peak_total


def spark_surfaces(info: ServerInfo, rng: Range, repeat: int, work: str
                   ) -> tuple[list[tuple[str, list[tuple[float, int, int]]]], list[str]]:
    from pyspark.sql import SparkSession

    import mysql_cdc

    spark = (SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
             .config("spark.driver.memory", "2g").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    jvm_pid = int(spark.sparkContext._jvm.ProcessHandle.current().pid())  # type: ignore[union-attr]
    mysql_cdc.register(spark, {"bench": f"mysql://{info.user}:{info.password}@{info.host}:{info.port}"})
    sql = ("SELECT * FROM mysql_cdc_binlog(source => 'bench', table => 'tpch.orders', startup => 'offset', "
           f"startup_offset => '{rng[0]}:{rng[1]}', end => '{rng[2]}:{rng[3]}')")

    def view(parts: int) -> int:
        return int(spark.read.format("mysql_cdc_binlog").option("source", "bench").option("table", "tpch.orders")
                   .option("startup", "offset").option("startup_offset", f"{rng[0]}:{rng[1]}")
                   .option("end", f"{rng[2]}:{rng[3]}").option("binlog_partitions", parts).load().count())

    def stream(parts: int, many: bool = False) -> int:
        base = tempfile.mkdtemp(dir=work)
        counts: list[int] = []
        q = (spark.readStream.format("mysql_cdc").option("source", "bench")
             .option("tables" if many else "table", "tpch[.]orders" if many else "tpch.orders")
             .option("startup", "offset").option("startup_offset", f"{rng[0]}:{rng[1]}")
             .option("binlog_partitions", parts)
             .option("state_dir", os.path.join(base, "state")).load().writeStream
             .foreachBatch(lambda df, _: counts.append(df.count()))
             .option("checkpointLocation", os.path.join(base, "ck")).trigger(availableNow=True).start())
        q.awaitTermination(3600)
        # the micro-batches alone (Spark's addBatch: the read and the count), without the query's start and end
        batch_secs.append(sum(p.durationMs.get("addBatch", 0) for p in q.recentProgress) / 1000)
        return sum(counts)

    out = []
    batch_secs: list[float] = []
    cpu_lines: list[str] = []
    for name, action in (("mysql_cdc_binlog (Spark SQL, one task, count)", lambda: int(spark.sql(sql).count())),
                         ("mysql_cdc_binlog data source (the SQL view), one task, count", lambda: view(1)),
                         ("mysql_cdc_binlog data source, binlog_partitions 2 (two tasks)", lambda: view(2)),
                         ("stream (readStream, availableNow, one task, count)", lambda: stream(1)),
                         ("stream, binlog_partitions 2 (parallel catch-up: two tasks)", lambda: stream(2)),
                         ("stream of tables (the many-table envelope: JSON values), one task",
                          lambda: stream(1, True))):
        runs, batches = [], []
        for k in range(repeat):
            batch_secs.clear()
            with PeakRss(lambda: [jvm_pid]) as mem:
                cpu = CpuAccount(jvm_pid)
                t = time.monotonic()
                rows = action()
                runs.append((time.monotonic() - t, rows, mem.peak_total))
                if k == repeat - 1:  # warm: the first run of a surface starts its Python workers
                    cpu_lines.append(f"| {name} | {cpu.line(runs[-1][0], mem.peak_python / 2**20)} |")
            if batch_secs:
                batches.append((batch_secs[0], rows, mem.peak_total))
        out.append((name, runs))
        if batches:
            short = {"stream (": "stream, one task", "stream, ": "stream, two tasks"}.get(name[:8], "stream of tables")
            out.append((f"{short}: its micro-batch alone (Spark's addBatch: no query start and end)", batches))
    spark.stop()
    return out, cpu_lines


class CpuAccount:
    """Where the CPU went while a Spark surface read (the last run of each): the machine's cores busy, the
    database server's processes, the Spark JVM, and its Python processes (workers and planners: the live ones'
    CPU seconds and those of the ones their parents reaped, so a worker that ends mid-run still counts)."""

    def __init__(self, jvm_pid: int) -> None:
        self.jvm = psutil.Process(jvm_pid)
        self.servers = [p for p in psutil.process_iter(["name"]) if p.info["name"] in ("mysqld", "mariadbd")]
        self.machine = self._busy()
        self.start = self._groups()

    @staticmethod
    def _busy() -> float:
        t = psutil.cpu_times()  # user holds guest time already; steal is the hypervisor's, not this machine's work
        return (sum(t) - t.idle - getattr(t, "iowait", 0.0) - getattr(t, "guest", 0.0)
                - getattr(t, "guest_nice", 0.0) - getattr(t, "steal", 0.0))

    def _groups(self) -> tuple[float, float, float]:
        def secs(q: psutil.Process, reaped: bool) -> float:
            try:
                t = q.cpu_times()
            except psutil.Error:
                return 0.0
            return t.user + t.system + (t.children_user + t.children_system if reaped else 0.0)

        def python(q: psutil.Process) -> bool:
            try:
                return "python" in (q.name() or "")
            except psutil.Error:  # ended since it was listed (its time is its parent's now)
                return False

        try:
            kids = self.jvm.children(recursive=True)
            jt = self.jvm.cpu_times()
            jvm, reaped = jt.user + jt.system, jt.children_user + jt.children_system  # the JVM's children: Python
        except psutil.Error:
            kids, jvm, reaped = [], 0.0, 0.0
        return (jvm, reaped + sum(secs(q, True) for q in kids if python(q)),
                sum(secs(q, False) for q in self.servers))

    def line(self, wall: float, worker_mb: float) -> str:
        end = self._groups()
        busy = self._busy() - self.machine
        jvm, workers, server = (b - a for a, b in zip(self.start, end))
        cores = os.cpu_count() or 1
        return (f"{wall:.2f} | {busy / wall / cores:.0%} | {jvm:.1f} | {workers:.1f} | {server:.1f} | "
                f"{busy - jvm - workers - server:.1f} | {worker_mb:,.0f}")


def run_server(kind: str, scale: float, repeat: int, readers: set[str]) -> str:
    with bench_server(kind) as (info, work):
        conn = info.connect(root=True)
        cur = conn.cursor()
        n = load_orders(info, scale, work)
        # the DDL of the load stays before the range: a read stops at a schema change of its table
        cur.execute("CREATE TABLE tpch.orders_copy AS SELECT * FROM tpch.orders")
        cur.execute("SET GLOBAL max_binlog_size = 1073741824")
        cur.execute("FLUSH BINARY LOGS")
        start_file, start_pos, _ = binlog_end(conn)
        t = time.monotonic()
        cur.execute("DELETE FROM tpch.orders")
        conn.commit()
        cur.execute("INSERT INTO tpch.orders SELECT * FROM tpch.orders_copy")
        conn.commit()
        cur.execute("UPDATE tpch.orders SET o_comment = CONCAT('u', o_comment)")
        conn.commit()
        end_file, end_pos, _ = binlog_end(conn)
        conn.close()
        rng = (start_file, int(start_pos), end_file, int(end_pos))
        changes = 4 * n
        print(f"{kind}: deleted, re-inserted and updated {n} rows of TPC-H orders (sf {scale}): {changes} change "
              f"rows in {start_file}:{start_pos} .. {end_file}:{end_pos}, {time.monotonic() - t:.1f} s", flush=True)
        results: list[tuple[str, list[tuple[float, int, int]]]] = []
        if "c" in readers:
            c_name = "C decoder (mariadb-binlog -v)" if kind == "mariadb" else "C decoder (mysqlbinlog -v)"
            results.append((c_name, [c_decoder(info, rng, work) for _ in range(repeat)]))
        for key, target, parts, name in (
                ("raw", "raw", 1, "python-mysql-replication loop (rows decoded to dicts, nothing else)"),
                ("library", "library", 1, f"{CORE}, row_decoder library (before issue 15)"),
                ("planned", "planned", 1, f"{CORE}, row_decoder planned (default)"),
                ("runs", "runs", 1, "mysql_cdc core: BinlogPhase.runs into Arrow batches (what Spark is handed)"),
                ("parallel", "planned", 2, f"{CORE}, planned, the range cut in two, two processes (parallel "
                 "catch-up)")):
            if key in readers:
                results.append((name, [in_child(target, info, rng, parts) for _ in range(repeat)]))
                print(f"{name}: {min(r[0] for r in results[-1][1]):.2f} s", flush=True)
        notes = []
        if "flink" in readers:
            for mode, what in (("records", "its records counted"), ("json", "JsonDebeziumDeserializationSchema")):
                try:
                    runs = [flink_reader(info, rng, changes, mode) for _ in range(repeat)]
                except (subprocess.CalledProcessError, FileNotFoundError) as e:  # mvn, javac or java
                    notes.append(f"Flink CDC's harness (bench/flink) could not be built or started: {e}")
                    print(notes[-1], flush=True)
                    break
                except (SystemExit, subprocess.SubprocessError, ValueError) as e:  # the peer, not ours: say so
                    notes.append(f"Flink CDC 3.5.0 ({what}) did not read the range on {kind}: {e}")
                    print(notes[-1], flush=True)
                    continue
                results.append((f"Flink CDC 3.5.0 MySQL source, one task, {what}: first change row to last",
                                [(first, rows, rss) for _, first, rows, rss in runs]))
                if mode == "records":
                    results.append((f"Flink CDC 3.5.0 MySQL source, one task, {what}: from the job's submission",
                                    [(secs, rows, rss) for secs, _, rows, rss in runs]))
                print(f"{results[-1][0]}: {min(r[0] for r in results[-1][1]):.2f} s", flush=True)
        if "spark" in readers:
            got, cpu_lines = spark_surfaces(info, rng, repeat, work)
            results += got
            notes.append("\n".join([
                f"Where the CPU went in the last run of each Spark surface ({kind}; CPU seconds of the Spark JVM, "
                "its Python processes (workers and the data source's planner), the database server, and the rest "
                "of the machine's busy time), and the largest Python process's peak RSS:", "",
                "| surface | seconds | cores busy | Spark JVM | Python processes | database server | the rest | "
                "largest Python process (MB) |",
                "| --- | --- | --- | --- | --- | --- | --- | --- |", *cpu_lines]))
    return "\n\n".join([table(kind, n, changes, repeat, results), *notes])


def table(kind: str, n: int, changes: int, repeat: int, results: list[tuple[str, list[tuple[float, int, int]]]]
          ) -> str:
    best = {name: min(runs) for name, runs in results}
    core_secs = best.get(f"{CORE}, row_decoder planned (default)", (float("nan"), 0, 0))[0]
    c_secs = next((secs for name, (secs, _, _) in best.items() if name.startswith("C decoder")), float("nan"))
    lines = [f"Binlog read of {changes:,} change rows of TPC-H orders ({n:,} deletes, {n:,} inserts, {n:,} updates, "
             f"one transaction each), {kind}; best of {repeat}; {os.cpu_count()} cores. 'of core': this reader's "
             "rate over the core reader's (planned decoder); 'of C': over the C decoder's.", "",
             "| reader | seconds | change rows/s | of core | of C | peak RSS (MB) |",
             "| --- | --- | --- | --- | --- | --- |"]
    for name, (secs, rows, rss) in best.items():
        note = "" if rows == changes else f" (read {rows:,} rows, expected {changes:,})"
        lines.append(f"| {name}{note} | {secs:.2f} | {rows / secs:,.0f} | {core_secs / secs:.2f} | "
                     f"{c_secs / secs:.2f} | {rss / 2**20:,.0f} |")
    return "\n".join(lines)


def main() -> None:
    ap = bench_parser(__doc__, 0.1, both=True)
    ap.add_argument("--readers", default=",".join(READERS),
                    help=f"comma-separated subset of {','.join(READERS)} (default: all)")
    args = ap.parse_args()
    readers = set(args.readers.split(","))
    if not readers <= set(READERS):
        raise SystemExit(f"unknown readers {sorted(readers - set(READERS))}; choose from {','.join(READERS)}")
    kinds = ["mariadb", "mysql"] if args.server == "both" else [args.server]
    sections = [run_server(kind, args.scale, args.repeat, readers) for kind in kinds]
    suffix = "" if readers == set(READERS) else "-" + "-".join(r for r in READERS if r in readers)
    write_result(f"binlog-{args.server}-sf{args.scale:g}{suffix}", "\n\n".join(sections))


if __name__ == "__main__":
    main()
