"""The main job on a built-in default: a throwaway local server with sample tables, a concurrent writer, and the
whole database captured by one stream into local Spark: a parallel, lock-free snapshot, then one binlog reader
for every table; each table split out and checked against its source.

    bash scripts/demo.sh [--server mariadb|mysql] [--rows 200000]
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from tests.servers import ServerProcess  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--server", choices=["mariadb", "mysql"], default="mariadb")
    ap.add_argument("--rows", type=int, default=200_000)
    args = ap.parse_args()
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYTHONPATH"] = ROOT + os.pathsep + os.environ.get("PYTHONPATH", "")
    work = tempfile.mkdtemp(prefix="mysql-cdc-demo-")
    print(f"starting a throwaway {args.server} server in {work} ...", flush=True)
    server = ServerProcess(args.server, work)
    info = server.start()
    try:
        run(info, args.rows)
    finally:
        server.stop()


def run(info, rows: int) -> None:  # type: ignore[no-untyped-def]
    conn = info.connect(root=True)
    cur = conn.cursor()
    cur.execute("CREATE DATABASE shop")
    cur.execute("USE shop")
    cur.execute("CREATE TABLE customers (id INT PRIMARY KEY, name VARCHAR(40) NOT NULL, country CHAR(2))")
    cur.execute("CREATE TABLE orders (id BIGINT PRIMARY KEY, customer_id INT NOT NULL, status VARCHAR(10), "
                "amount DECIMAL(12,2), created DATETIME(3))")
    cur.executemany("INSERT INTO customers VALUES (%s, %s, %s)",
                    [(i, f"customer {i}", random.choice(["DE", "FR", "US", "JP"])) for i in range(1, 1001)])
    batch = []
    for i in range(1, rows + 1):
        batch.append((i, i % 1000 + 1, "new", (i % 10_000) / 100, "2026-01-01 00:00:00.000"))
        if len(batch) == 5000:
            cur.executemany("INSERT INTO orders VALUES (%s, %s, %s, %s, %s)", batch)
            batch = []
    if batch:
        cur.executemany("INSERT INTO orders VALUES (%s, %s, %s, %s, %s)", batch)
    print(f"sample tables: shop.customers (1000 rows), shop.orders ({rows} rows)", flush=True)

    stop = threading.Event()
    writes = [0]

    def writer() -> None:  # keeps writing while the snapshot runs: nothing is locked
        w = info.connect(root=True, database="shop")
        w.autocommit(True)
        c = w.cursor()
        while not stop.is_set():
            c.execute("UPDATE orders SET status = 'paid' WHERE id = %s", (random.randint(1, rows),))
            if writes[0] % 10 == 0:  # a transaction over both tables
                c.execute("BEGIN")
                c.execute("UPDATE customers SET country = 'NL' WHERE id = %s", (random.randint(1, 1000),))
                c.execute("DELETE FROM orders WHERE id = %s", (random.randint(1, rows),))
                c.execute("COMMIT")
            writes[0] += 1

    t = threading.Thread(target=writer, daemon=True)
    t.start()

    from pyspark.sql import SparkSession

    import mysql_cdc

    spark = (SparkSession.builder.master("local[2]").appName("mysql-cdc-demo").config("spark.ui.enabled", "false")
             .config("spark.sql.shuffle.partitions", "4").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    work = tempfile.mkdtemp(prefix="mysql-cdc-demo-")
    state, ck, out = (os.path.join(work, d) for d in ("state", "checkpoint", "changes"))
    mysql_cdc.register(spark, {"demo": f"mysql://{info.user}:{info.password}@{info.host}:{info.port}"})

    print("\n-- the chunk table: SELECT * FROM mysql_cdc_chunks(source => 'demo', tables => 'shop[.].*', ...)")
    spark.sql("SELECT * FROM mysql_cdc_chunks(source => 'demo', tables => 'shop[.].*', chunk_size => 20000)"
              ).show(30, truncate=False)

    print("-- the whole database in one stream: spark.readStream.format('mysql_cdc').option('tables', 'shop[.].*')")
    print("   snapshot chunks read in parallel while the writer keeps writing, then one binlog reader for all tables")
    started = time.monotonic()
    stream = (spark.readStream.format("mysql_cdc").option("source", "demo").option("tables", "shop[.].*")
              .option("state_dir", state).option("chunk_size", 20000).load())
    query = (stream.writeStream.format("parquet").option("path", out).option("checkpointLocation", ck)
             .trigger(availableNow=True).start())
    query.awaitTermination()
    stop.set()
    t.join()
    print(f"   {writes[0]} writes ran concurrently; {time.monotonic() - started:.1f} s")
    # the writer has stopped: one more run from the checkpoint catches up to the binlog's end
    query = (spark.readStream.format("mysql_cdc").option("source", "demo").option("tables", "shop[.].*")
             .option("state_dir", state).load().writeStream.format("parquet").option("path", out)
             .option("checkpointLocation", ck).trigger(availableNow=True).start())
    query.awaitTermination()

    print("-- per table, typed as a read of that table: mysql_cdc.split(df, state_dir)")
    for name, rows in mysql_cdc.split(spark.read.parquet(out), state).items():
        rows.groupBy("__op").count().orderBy("__op").show()
        mirror = _apply(rows.collect(), "id")
        cur.execute(f"SELECT id, {'status' if name.endswith('orders') else 'country'} FROM {name}")
        source = {r[0]: r[1] for r in cur.fetchall()}
        column = "status" if name.endswith("orders") else "country"
        same = {k: v[column] for k, v in mirror.items()} == source
        print(f"   {name}: snapshot plus changes, applied in binlog order, "
              f"{'equal' if same else 'DIFFER FROM'} the {len(source)} rows of the source table")
    print(f"-- chunk watermarks, schemas and offsets under {state}; `python -m mysql_cdc status --state-dir {state}`")
    spark.stop()


def _apply(rows, key: str) -> dict:  # type: ignore[no-untyped-def,type-arg]
    """Snapshot rows, then changes in binlog order: -U/-D delete the key, +I/+U upsert it."""
    from mysql_cdc.offsets import binlog_file_key

    mirror = {r[key]: r.asDict() for r in rows if r["__op"] == "r"}
    for r in sorted((r for r in rows if r["__op"] != "r"),
                    key=lambda r: (binlog_file_key(r["__file"]), r["__pos"], r["__row"])):
        if r["__op"] in ("-U", "-D"):
            mirror.pop(r[key], None)
        else:
            mirror[r[key]] = r.asDict()
    return mirror


if __name__ == "__main__":
    main()
