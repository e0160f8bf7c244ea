"""The main job on a built-in default: a throwaway local server with sample tables and a concurrent writer, the
whole database mirrored into Delta tables by the sync job (`mysql-cdc sync`: a parallel, lock-free snapshot,
then one binlog reader for every table, each micro-batch merged exactly once); each Delta table is then checked
against its source table, column by column.

    bash scripts/demo.sh [--server mariadb|mysql] [--rows 200000]
"""

from __future__ import annotations

import argparse
import collections
import os
import random
import subprocess
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
    work = tempfile.mkdtemp(prefix="mysql-cdc-demo-")
    lake, state, ck = (os.path.join(work, d) for d in ("lake", "state", "checkpoint"))
    env = dict(os.environ)
    # the connection goes in the environment: never on a command line, where other users could read it
    env["MYSQL_CDC_PROFILE_DEMO"] = f"mysql://{info.user}:{info.password}@{info.host}:{info.port}"
    sync = [sys.executable, "-m", "mysql_cdc", "sync", "--source", "demo", "--tables", "shop[.].*", "--to", lake,
            "--checkpoint", ck, "--state-dir", state, "--chunk-size", "20000", "--master", "local[2]", "--once"]
    print(f"\n-- the main job: mysql-cdc sync --source demo --tables 'shop[.].*' --to {lake} --checkpoint ... "
          "--state-dir ... --once", flush=True)
    print("   (without --once it keeps the mirror up to date, a micro-batch a second)", flush=True)
    started = time.monotonic()
    subprocess.run(sync, env=env, check=True)
    stop.set()
    t.join()
    print(f"   {writes[0]} writes ran concurrently; {time.monotonic() - started:.1f} s", flush=True)
    print("-- the writer has stopped: the same command again applies what it wrote since", flush=True)
    subprocess.run(sync, env=env, check=True)

    import deltalake

    from mysql_cdc.ids import TableId
    from mysql_cdc.udtf.sync.mirror import table_path

    print("-- each Delta table against its source table, every column")
    ok = True
    for name in ("customers", "orders"):
        path = table_path(lake, TableId("shop", name))
        delta = deltalake.DeltaTable(path)
        data = delta.to_pyarrow_table()
        mirror = sorted(zip(*(c.to_pylist() for c in data.columns)))
        cur.execute(f"SELECT {', '.join(data.column_names)} FROM shop.{name} ORDER BY id")
        source = [tuple(r) for r in cur.fetchall()]
        same = mirror == source
        ok = ok and same
        ops = collections.Counter(h["operation"] for h in delta.history())
        print(f"   shop.{name}: {len(mirror)} rows {'equal' if same else 'DIFFER FROM'} the {len(source)} rows of "
              f"the source; Delta table {path}, version {delta.version()}, {dict(ops)}")
    print(f"-- chunk watermarks, schemas and offsets under {state}; `python -m mysql_cdc status --state-dir {state}`")
    if not ok:
        raise SystemExit("the mirror differs from its source")


if __name__ == "__main__":
    main()
