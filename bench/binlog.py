"""Binlog benchmark: change rows/s of this project's binlog reader against the raw python-mysql-replication
loop on the same events, in a throwaway local server. A benchmark, not a test: it asserts nothing.

    bash bench/binlog.sh [--server mariadb|mysql] [--scale 0.1]

Loads TPC-H ``orders``, then (in the measured binlog range) deletes every row, inserts them again and updates
every row: four change rows per row (a delete, an insert, the before and after image of an update). Then it
reads that range three ways: the library's ``BinLogStreamReader`` loop that only decodes the rows (the floor
any Python reader pays), this project's ``BinlogPhase.changes`` (transactions, emit decision, conversion to
Spark values), and ``mysql_cdc_binlog`` in Spark SQL (local[1]: one binlog stream), counted. Writes a
Markdown table to stdout and to ``bench/results/binlog-<server>-sf<scale>.md``.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from bench.run import PeakRss, bench_parser, bench_server, load_orders, write_result  # noqa: E402
from tests.helpers import binlog_end  # noqa: E402
from tests.servers import ServerInfo  # noqa: E402


def raw_loop(info: ServerInfo, file: str, pos: int, end_file: str, end_pos: int) -> int:
    """The plain library loop: row events of tpch.orders, every row decoded, counted as change rows."""
    from pymysqlreplication import BinLogStreamReader
    from pymysqlreplication.row_event import DeleteRowsEvent, UpdateRowsEvent, WriteRowsEvent

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


def main() -> None:
    args = bench_parser(__doc__, 0.1).parse_args()
    with bench_server(args.server) as (info, work):
        conn = info.connect(root=True)
        cur = conn.cursor()
        n = load_orders(info, args.scale, work)
        # the DDL of the load stays before the range: a read stops at a schema change of its table
        cur.execute("CREATE TABLE tpch.orders_copy AS SELECT * FROM tpch.orders")
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
        changes = 4 * n
        print(f"deleted, re-inserted and updated {n} rows of TPC-H orders (sf {args.scale}) in {args.server}: "
              f"{changes} change "
              f"rows in {start_file}:{start_pos} .. {end_file}:{end_pos}, {time.monotonic() - t:.1f} s",
              flush=True)
        results = run_all(info, (start_file, int(start_pos)), (end_file, int(end_pos)), changes, args.repeat)
    lines = [f"Binlog read of {changes} change rows of TPC-H orders ({n} deletes, {n} inserts, {n} updates), "
             f"{args.server}, best of {args.repeat}; {os.cpu_count()} cores.", "",
             "| reader | seconds | change rows/s | peak RSS (MB) |", "| --- | --- | --- | --- |"]
    for name, secs, rows, rss in results:
        lines.append(f"| {name} | {secs:.2f} | {rows / secs:,.0f} | {rss / 2**20:,.0f} |")
    write_result(f"binlog-{args.server}-sf{args.scale:g}", "\n".join(lines))


def run_all(info: ServerInfo, start: tuple[str, int], end: tuple[str, int], changes: int, repeat: int
            ) -> list[tuple[str, float, int, int]]:
    from pyspark.sql import SparkSession

    import mysql_cdc
    from mysql_cdc.offsets import BinlogOffset
    from mysql_cdc.options import ConnectionProfile, parse_options
    from mysql_cdc.planner.plan import describe_table
    from mysql_cdc.udtf.binlog import BinlogPhase, ReadFrom

    out: list[tuple[str, float, int, int]] = []
    me = os.getpid()

    def timed(name: str, action: Callable[[], int], pids: Callable[[], list[int]]) -> None:
        best = None
        for _ in range(repeat):
            with PeakRss(pids) as mem:
                t = time.monotonic()
                rows = action()
                secs = time.monotonic() - t
            if rows != changes:
                print(f"warning: {name} read {rows} change rows, expected {changes}", flush=True)
            if best is None or secs < best[1]:
                best = (name, secs, rows, mem.peak_total)
        assert best is not None
        out.append(best)
        print(f"{name}: {best[1]:.2f} s", flush=True)

    timed("python-mysql-replication loop (decode rows only)", lambda: raw_loop(info, *start, *end), lambda: [me])
    profile = ConnectionProfile(host=info.host, port=info.port, user=info.user, password=info.password)
    opts = parse_options({"table": "tpch.orders", "startup": "offset", "startup_offset": f"{start[0]}:{start[1]}"})
    facts, schema = describe_table(profile, opts, "tpch.orders")

    def core() -> int:
        phase = BinlogPhase(profile, facts, opts, {schema.table: schema}, {schema.table: None})
        return sum(1 for _ in phase.changes(ReadFrom(BinlogOffset(*start)), BinlogOffset(*end)))

    timed("mysql_cdc BinlogPhase.changes (one process)", core, lambda: [me])
    spark = (SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false")
             .config("spark.driver.memory", "2g").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    jvm_pid = int(spark.sparkContext._jvm.ProcessHandle.current().pid())  # type: ignore[union-attr]
    mysql_cdc.register(spark, {"bench": f"mysql://{info.user}:{info.password}@{info.host}:{info.port}"})
    sql = ("SELECT * FROM mysql_cdc_binlog(source => 'bench', table => 'tpch.orders', startup => 'offset', "
           f"startup_offset => '{start[0]}:{start[1]}', end => '{end[0]}:{end[1]}')")

    def spark_sql() -> int:
        return int(spark.sql(sql).count())

    timed("mysql_cdc_binlog (Spark SQL, local[1], count)", spark_sql, lambda: [jvm_pid])
    spark.stop()
    return out


if __name__ == "__main__":
    main()
