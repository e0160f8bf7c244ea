"""The main job on a built-in default: a throwaway local server with sample tables, a concurrent writer, and a
parallel, lock-free snapshot into local Spark through the SQL functions and the data source.

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
        c = w.cursor()
        while not stop.is_set():
            c.execute("UPDATE orders SET status = 'paid' WHERE id = %s", (random.randint(1, rows),))
            writes[0] += 1

    t = threading.Thread(target=writer, daemon=True)
    t.start()

    from pyspark.sql import SparkSession

    import mysql_cdc

    spark = (SparkSession.builder.master("local[2]").appName("mysql-cdc-demo").config("spark.ui.enabled", "false")
             .config("spark.sql.shuffle.partitions", "4").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    state = os.path.join(tempfile.mkdtemp(prefix="mysql-cdc-state-"))
    mysql_cdc.register(spark, {"demo": f"mysql://{info.user}:{info.password}@{info.host}:{info.port}"})

    print("\n-- the chunk table: SELECT * FROM mysql_cdc_chunks(source => 'demo', tables => 'shop[.].*', ...)")
    chunks = spark.sql("SELECT * FROM mysql_cdc_chunks(source => 'demo', tables => 'shop[.].*', chunk_size => 20000)")
    chunks.show(30, truncate=False)

    print("-- a parallel snapshot through SQL: mysql_cdc_snapshot(TABLE(chunks), ...); each chunk is exact at its "
          "own position while the writer keeps updating")
    started = time.monotonic()
    snap = spark.sql(f"""
        SELECT * FROM mysql_cdc_snapshot(
          TABLE(SELECT /*+ REPARTITION(2) */ * FROM mysql_cdc_chunks(source => 'demo', tables => 'shop[.]orders',
                                                                     chunk_size => 20000)),
          source => 'demo', table => 'shop.orders', state_dir => '{state}')""")
    snap.groupBy("__chunk_id", "__position").count().orderBy("__chunk_id").show(30, truncate=False)
    print(f"   ({time.monotonic() - started:.1f} s)")

    print("-- the same table through the data source: spark.read.format('mysql_cdc')")
    started = time.monotonic()
    df = (spark.read.format("mysql_cdc").option("source", "demo").option("table", "shop.orders")
          .option("chunk_size", 20000).option("partitions", 2).load())
    n = df.count()
    print(f"   {n} rows in {df.rdd.getNumPartitions()} partitions, {time.monotonic() - started:.1f} s")
    df.groupBy("status").count().show()
    stop.set()
    t.join()
    print(f"-- {writes[0]} updates ran concurrently; chunk watermarks recorded under {state}")
    spark.stop()


if __name__ == "__main__":
    main()
