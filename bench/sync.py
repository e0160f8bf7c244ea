"""Sync benchmark: end-to-end rows/s of the sync job into Delta, snapshot phase and binlog phase, against a dump
of the same table by Spark's JDBC reader into a Delta table (the nightly job users replace), and the change ->
Delta latency at a 1 s trigger under a steady write load, in a throwaway local server. A benchmark, not a test:
it asserts nothing.

    bash bench/sync.sh [--server mariadb|mysql] [--scale 0.1] [--rate 200] [--seconds 30]

Loads TPC-H ``orders``. Snapshot: ``mysql_cdc.sync(once=True)`` from nothing to a Delta table equal to the
source (start of the job to its end, planning and table creation included) against Spark JDBC (same partitions)
collected as Arrow and written by the same Delta writer (delta-rs). Binlog: every row deleted, inserted again and
updated (four change rows per row), then ``sync(once=True)`` applies them (MERGE by key) against the same
re-dump. Latency: a writer updates ``orders`` and inserts a row with its wall-clock time into a small table
``ticks`` ``--rate`` times a second; the sync runs with a 1 s trigger and, after each micro-batch is committed to
Delta, reads which ticks arrived: latency = commit of the micro-batch - write of the tick. Writes a Markdown
table to stdout and to ``bench/results/sync-<server>-sf<scale>.md``.
"""

from __future__ import annotations

import os
import random
import sys
import tempfile
import threading
import time
from typing import Any

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from bench.run import PeakRss, bench_parser, bench_server, load_orders, write_result  # noqa: E402
from tests.servers import ServerInfo  # noqa: E402

JAR = "/usr/share/java/mariadb-java-client.jar"


def main() -> None:
    ap = bench_parser(__doc__, 0.1)
    ap.add_argument("--rate", type=int, default=200, help="writes per second during the latency run")
    ap.add_argument("--seconds", type=float, default=30.0, help="length of the latency run")
    ap.add_argument("--parallelism", type=int, default=2)
    ap.add_argument("--max-rows-per-batch", type=int, help="the sync's option (default: the sync's default)")
    ap.add_argument("--max-chunks-per-batch", type=int, help="the sync's option (default: the sync's default)")
    ap.add_argument("--skip-latency", action="store_true", help="only the timed phases")
    args = ap.parse_args()
    with bench_server(args.server) as (info, work):
        n = load_orders(info, args.scale, work)
        rows = run(info, n, args, work)
    head = (f"Sync into Delta (delta-rs) of TPC-H orders, {n} rows (sf {args.scale:g}), {args.server}, local"
            f"[{args.parallelism}], {os.cpu_count()} cores; best of {args.repeat} for the timed phases.")
    lines = [head, "", "| run | rows | seconds | rows/s | ratio to the JDBC dump | peak RSS (MB) |",
             "| --- | --- | --- | --- | --- | --- |"]
    for name, count, secs, peer, rss in rows["timed"]:
        ratio = f"{peer / secs:.2f}x" if peer else "-"
        lines.append(f"| {name} | {count:,} | {secs:.2f} | {count / secs:,.0f} | {ratio} | {rss / 2**20:,.0f} |")
    lines += ["", "Where a run's time went (seconds, summed over its micro-batches; the rest: planning, starting the "
              "query, Spark's batch planning):", "",
              "| phase | total | micro-batches | collect (the read) | decode | MERGE |",
              "| --- | --- | --- | --- | --- | --- |"]
    for phase, total, b in rows["breakdown"]:
        lines.append(f"| {phase} | {total:.2f} | {b['batches']:.0f} | {b['collect']:.2f} | {b['decode']:.2f} | "
                     f"{b['merge']:.2f} |")
    lat = rows["latency"]
    if lat is not None:
        lines += ["", f"Change -> Delta latency at a 1 s trigger, {args.rate} writes/s for {args.seconds:g} s "
                  f"({lat['ticks']} ticks, {lat['batches']} micro-batches): p50 {lat['p50']:.2f} s, "
                  f"p99 {lat['p99']:.2f} s, max {lat['max']:.2f} s."]
    opts = extra_options(args)
    suffix = "".join(f"-{k.split('_')[1]}{v}" for k, v in sorted(opts.items()))
    write_result(f"sync-{args.server}-sf{args.scale:g}{suffix}", "\n".join(lines))


def run(info: ServerInfo, n: int, args: Any, work: str) -> dict[str, Any]:
    import deltalake
    from pyspark.sql import SparkSession

    import mysql_cdc
    from mysql_cdc.ids import TableId
    from mysql_cdc.udtf.sync.mirror import table_path

    spark = (SparkSession.builder.master(f"local[{args.parallelism}]").config("spark.ui.enabled", "false")
             .config("spark.ui.showConsoleProgress", "false").config("spark.driver.memory", "4g")
             .config("spark.jars", JAR).getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    jvm_pid = int(spark.sparkContext._jvm.ProcessHandle.current().pid())  # type: ignore[union-attr]
    me = os.getpid()
    url = f"mysql://{info.user}:{info.password}@{info.host}:{info.port}"
    conn = info.connect(root=True, database="tpch")
    conn.autocommit(True)
    cur = conn.cursor()
    cur.execute("CREATE TABLE ticks (id INT PRIMARY KEY, written DOUBLE NOT NULL)")
    cur.execute("CREATE TABLE orders_copy AS SELECT * FROM orders")
    timed: list[tuple[str, int, float, float, int]] = []

    def measure(action: Any) -> tuple[float, int]:
        best: tuple[float, int] | None = None
        for _ in range(args.repeat):
            with PeakRss(lambda: [jvm_pid, me]) as mem:
                t = time.monotonic()
                action()
                secs = time.monotonic() - t
            if best is None or secs < best[0]:
                best = (secs, mem.peak_total)
        assert best is not None
        return best

    def jdbc_dump() -> None:
        df = (spark.read.format("jdbc").option("url", f"jdbc:mysql://{info.host}:{info.port}/tpch?permitMysqlScheme")
              .option("driver", "org.mariadb.jdbc.Driver").option("user", info.user).option("password", info.password)
              .option("dbtable", "orders").option("partitionColumn", "o_orderkey").option("lowerBound", 1)
              .option("upperBound", n * 4).option("numPartitions", args.parallelism).option("fetchsize", 10000)
              .load())
        deltalake.write_deltalake(os.path.join(work, "dump"), df.toArrow(), mode="overwrite")

    dump_secs, dump_rss = measure(jdbc_dump)
    timed.append(("Spark JDBC -> Arrow -> Delta (the nightly dump)", n, dump_secs, 0.0, dump_rss))
    print(f"JDBC dump: {dump_secs:.2f} s", flush=True)

    runs = iter(range(1000))

    spent: list[Any] = []  # BatchStats of the last run

    def sync_once(to: str, ck: str, state: str) -> None:
        spent.clear()
        q = mysql_cdc.sync(spark, source="bench", profiles={"bench": url}, tables="tpch[.](orders|ticks)",
                           to=to, checkpoint=ck, state_dir=state, once=True, on_batch=spent.append,
                           **extra_options(args))
        q.awaitTermination()
        if q.exception() is not None:
            raise RuntimeError(str(q.exception()))

    def fresh() -> tuple[str, str, str]:
        d = os.path.join(work, f"sync{next(runs)}")
        return os.path.join(d, "lake"), os.path.join(d, "ck"), os.path.join(d, "state")

    secs, rss = measure(lambda: sync_once(*fresh()))
    timed.append(("mysql_cdc.sync, snapshot phase (plan, create, read, MERGE)", n, secs, dump_secs, rss))
    breakdown = [("snapshot", secs, breakdown_of(spent))]
    print(f"sync snapshot: {secs:.2f} s", flush=True)

    # the binlog phase: one sync caught up, then 4 n change rows, applied by the next run; repeated as a whole
    best_binlog: tuple[float, int] | None = None
    for _ in range(args.repeat):
        to, ck, state = fresh()
        sync_once(to, ck, state)
        cur.execute("DELETE FROM orders")
        cur.execute("INSERT INTO orders SELECT * FROM orders_copy")
        cur.execute("UPDATE orders SET o_comment = CONCAT('u', o_comment)")
        with PeakRss(lambda: [jvm_pid, me]) as mem:
            t = time.monotonic()
            sync_once(to, ck, state)
            secs = time.monotonic() - t
        if best_binlog is None or secs < best_binlog[0]:
            best_binlog = (secs, mem.peak_total)
            binlog_spent = breakdown_of(spent)
        cur.execute("UPDATE orders SET o_comment = SUBSTRING(o_comment, 2)")  # as loaded, for the next repeat
        got = deltalake.DeltaTable(table_path(to, TableId("tpch", "orders"))).to_pyarrow_table(
            columns=["o_comment"]).column(0)
        if len(got) != n or not all(c.startswith("u") for c in got.to_pylist()[:1000]):
            print("warning: the mirror after the binlog phase is not the source", flush=True)
    assert best_binlog is not None
    timed.append(("mysql_cdc.sync, binlog phase (4 change rows per row: delete, insert, update)", 4 * n,
                  best_binlog[0], dump_secs, best_binlog[1]))
    breakdown.append(("binlog", best_binlog[0], binlog_spent))
    print(f"sync binlog: {best_binlog[0]:.2f} s", flush=True)

    latency = None if args.skip_latency else latency_run(spark, info, url, args, tempfile.mkdtemp(dir=work), n)
    spark.stop()
    conn.close()
    return {"timed": timed, "latency": latency, "breakdown": breakdown}


def extra_options(args: Any) -> dict[str, Any]:
    return {k: v for k, v in (("max_rows_per_batch", args.max_rows_per_batch),
                              ("max_chunks_per_batch", args.max_chunks_per_batch)) if v is not None}


def breakdown_of(stats: list[Any]) -> dict[str, float]:
    """Seconds of a run's micro-batches in the driver's batch function: collecting each batch from Spark (the
    read runs then), decoding its rows, merging into Delta; and how many batches."""
    return {"batches": len(stats), "collect": sum(s.collect_seconds for s in stats),
            "decode": sum(s.decode_seconds for s in stats), "merge": sum(s.merge_seconds for s in stats)}


def latency_run(spark: Any, info: ServerInfo, url: str, args: Any, d: str, n: int) -> dict[str, Any]:
    import deltalake
    import pyarrow as pa
    import pyarrow.compute as pc

    import mysql_cdc
    from mysql_cdc.ids import TableId
    from mysql_cdc.udtf.sync.mirror import table_path

    to = os.path.join(d, "lake")
    ticks_path = table_path(to, TableId("tpch", "ticks"))
    seen: dict[int, float] = {}
    batches = [0]

    def on_batch(stats: Any) -> None:  # runs in the driver right after the batch's MERGEs are committed
        now = time.time()
        batches[0] += 1
        if "tpch.ticks" not in stats.applied:
            return
        t = deltalake.DeltaTable(ticks_path).to_pyarrow_table()
        fresh = t.filter(pc.invert(pc.is_in(t.column("id"), value_set=pa.array(list(seen), pa.int32()))))
        for i, w in zip(fresh.column("id").to_pylist(), fresh.column("written").to_pylist()):
            seen[i] = now - w

    q = mysql_cdc.sync(spark, source="bench", profiles={"bench": url}, tables="tpch[.](orders|ticks)", to=to,
                       checkpoint=os.path.join(d, "ck"), state_dir=os.path.join(d, "state"), trigger_seconds=1.0,
                       on_batch=on_batch)
    # the snapshot first: latency is measured once the binlog is followed
    from tests.conftest import wait_until

    wait_until(lambda: batches[0] >= 1 and q.lastProgress is not None and
               "binlog" in str((q.lastProgress["sources"] or [{}])[0].get("endOffset")), 600, "the binlog phase")
    stop = threading.Event()

    def writer() -> None:
        w = info.connect(root=True, database="tpch")
        w.autocommit(True)
        c = w.cursor()
        i = 0
        t0 = time.monotonic()
        while not stop.is_set():
            i += 1
            c.execute("UPDATE orders SET o_shippriority = o_shippriority + 1 WHERE o_orderkey = %s",
                      (random.randrange(1, 4 * n),))
            c.execute("INSERT INTO ticks VALUES (%s, %s)", (i, time.time()))
            lag = t0 + i / args.rate - time.monotonic()
            if lag > 0:
                time.sleep(lag)
        w.close()

    t = threading.Thread(target=writer, daemon=True)
    started = len(seen)
    t.start()
    time.sleep(args.seconds)
    stop.set()
    t.join()
    wait_until(lambda: len(seen) >= started + 1 and _all_ticks_seen(info, seen), 120, "every tick in Delta")
    q.stop()
    values = sorted(seen.values())
    return {"ticks": len(values), "batches": batches[0], "p50": values[len(values) // 2],
            "p99": values[min(len(values) - 1, int(len(values) * 0.99))], "max": values[-1]}


def _all_ticks_seen(info: ServerInfo, seen: dict[int, float]) -> bool:
    c = info.connect(root=True, database="tpch")
    cur = c.cursor()
    cur.execute("SELECT COUNT(*) FROM ticks")
    total = int(cur.fetchone()[0])
    c.close()
    return len(seen) >= total


if __name__ == "__main__":
    main()
