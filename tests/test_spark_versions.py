"""What differs between the pyspark versions the package supports (4.0 to 4.3), on the Spark this test process
runs: ``scripts/test.sh`` runs the whole suite on pyspark 4.3 and these tests (marker ``versions``) again under
each other version's interpreter (``.venv-spark-<version>``), on both servers.

What differs is the stream (no admission-control API before 4.2: the source tracks its start itself and bounds
its batches, and a run to the end is stopped when it caught up) and what rides on it: the many-table stream
with a schema change followed, a kill -9 and restart, the sync job. The batch surfaces (data source, SQL
functions, view) and a Spark Connect thin client of this version run too.
"""

from __future__ import annotations

import argparse
import collections
import glob
import hashlib
import json
import os
import random
import re
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pyarrow as pa
import pyspark
import pytest

import mysql_cdc
from mysql_cdc.errors import ConfigError
from mysql_cdc.ids import TableId
from mysql_cdc.profiles import ConnectionProfile
from mysql_cdc.state.store import StateStore
from mysql_cdc.udtf.spark.compat import admission_control
from mysql_cdc.udtf.sync.sinks import delta_artifact, iceberg_artifact, parse_target
from tests.conftest import ROOT, _repo_env, wait_until
from tests.helpers import give_server_profile, insert_rows, profile_url
from tests.servers import ServerInfo
from tests.stream_job import start as start_stream
from tests.test_multi_table import _keys, _norm
from tests.test_streaming import _checkpoint_state, _ended, _kill, _tail
from tests.test_sync import EIGHT_KILLS_TABLES, _txns, check_tables, eight_kills

pytestmark = pytest.mark.versions

TABLES = {"a": "id INT PRIMARY KEY, v INT NOT NULL", "b": "k VARCHAR(12) PRIMARY KEY, v INT NOT NULL",
          "c": "x INT, y INT, v INT NOT NULL, PRIMARY KEY (x, y)"}
KEYS = {"a": ["id"], "b": ["k"], "c": ["x", "y"]}


def _key(t: str, i: int) -> tuple[Any, ...]:
    return {"a": (i,), "b": (f"k{i:05d}",), "c": (i % 7, i)}[t]


def _make(root: Any, rows: int = 300) -> None:
    for t, cols in TABLES.items():
        root.cursor().execute(f"CREATE TABLE {t} ({cols})")
        insert_rows(root, t, [*KEYS[t], "v"], [(*_key(t, i), i) for i in range(rows)])


def _change(root: Any, seed: int) -> None:
    """Updates, deletes, inserts and a key moved, in every table."""
    cur = root.cursor()
    for t in TABLES:
        where = " AND ".join(f"{c} = %s" for c in KEYS[t])
        for i in range(seed, seed + 20):
            cur.execute(f"UPDATE {t} SET v = v + 1 WHERE {where}", _key(t, i))
        cur.execute(f"DELETE FROM {t} WHERE {where}", _key(t, seed + 30))
        cur.execute(f"INSERT IGNORE INTO {t} ({', '.join(KEYS[t])}, v) VALUES "
                    f"({', '.join(['%s'] * (len(KEYS[t]) + 1))})", (*_key(t, 1000 + seed), 7))


def _snapshot_batches(ck: str) -> set[int]:
    """The micro-batches of the checkpoint that read snapshot chunks (their offset ends in the snapshot)."""
    out = set()
    for name in os.listdir(os.path.join(ck, "offsets")):
        if name.isdigit():
            with open(os.path.join(ck, "offsets", name)) as f:
                if json.loads(f.read().strip().splitlines()[-1]).get("phase") == "snapshot":
                    out.add(int(name))
    return out


def _delta_commits(path: str) -> list[tuple[int, str, str]]:
    """(txn version, operation, engine) of each commit of a Delta table that carries a transaction."""
    out = []
    for f in sorted(glob.glob(os.path.join(path, "_delta_log", "*.json"))):
        with open(f) as fh:
            actions = [json.loads(line) for line in fh if line.strip()]
        info = next((a["commitInfo"] for a in actions if "commitInfo" in a), {})
        for a in actions:
            if "txn" in a:
                out.append((int(a["txn"]["version"]), str(info.get("operation")), str(info.get("engineInfo"))))
    return out


def _delta_operations(path: str) -> dict[str, str | None]:
    """Each operation in a Delta table's log, with its mode where it has one (the last commit's)."""
    out = {}
    for f in sorted(glob.glob(os.path.join(path, "_delta_log", "*.json"))):
        with open(f) as fh:
            for line in fh:
                info = json.loads(line).get("commitInfo")
                if info:
                    out[str(info.get("operation"))] = (info.get("operationParameters") or {}).get("mode")
    return out


def _source(info: ServerInfo, db: str, t: str, cols: list[str]) -> collections.Counter[tuple[Any, ...]]:
    conn = info.connect(root=True, database=db)
    cur = conn.cursor()
    cur.execute(f"SELECT {', '.join(cols)} FROM {t}")
    out = collections.Counter(tuple(r) for r in cur.fetchall())
    conn.close()
    return out


def test_this_spark_is_the_one_under_test() -> None:
    import pyspark

    want = os.environ.get("MYSQL_CDC_SPARK_VERSION")
    assert want is None or pyspark.__version__ == want, (pyspark.__version__, want)
    assert admission_control() == (tuple(int(x) for x in pyspark.__version__.split(".")[:2]) >= (4, 2))


def test_the_clis_delta_in_local_mode_rebuilds_a_tables_state_with_as_many_tasks_as_cores() -> None:
    """Delta's 50 tasks made each batch of the kill test below 20 s instead of 8 on 2 cores (its whole run 289 s
    instead of 141); on a cluster Delta's own number stays, and the user's wins."""
    from mysql_cdc.cli import with_lake_jars
    from mysql_cdc.udtf.sync.sinks import SNAPSHOT_PARTITIONS, delta_artifact

    assert delta_artifact(pyspark.__version__), "Delta ships Spark jars for 4.0, 4.1 and 4.2"
    for master, given, want in (("local[2]", [], "2"), ("spark://head:7077", [], None),
                                ("local[2]", [(SNAPSHOT_PARTITIONS, "7")], "7")):
        ns = argparse.Namespace(writer="auto", master=master, conf=list(given))
        with_lake_jars(ns, say=False)
        assert dict(ns.conf).get(SNAPSHOT_PARTITIONS) == want and len(ns.conf) == len(dict(ns.conf)), ns.conf
        assert "DeltaSparkSessionExtension" in dict(ns.conf)["spark.sql.extensions"], ns.conf


def test_the_batch_surfaces_on_this_spark(classic_spark: Any, profile: ConnectionProfile, db: str, root: Any
                                          ) -> None:
    """The data source, the SQL table functions and a view over the data source."""
    _make(root)
    spark = classic_spark
    mysql_cdc.register(spark, {"src": profile_url(profile)})
    df = spark.read.format("mysql_cdc").option("source", "src").option("table", f"{db}.a").option(
        "chunk_size", 50).load()
    assert df.count() == 300 and df.columns[:2] == ["id", "v"]
    got = spark.sql(f"""SELECT count(*) AS n, count(DISTINCT __chunk_id) AS chunks FROM mysql_cdc_snapshot(
        TABLE(SELECT * FROM mysql_cdc_chunks(source => 'src', tables => '{db}[.]b', chunk_size => 100))
        WITH SINGLE PARTITION, source => 'src', table => '{db}.b')""").collect()[0]
    assert (got["n"], got["chunks"]) == (300, 3)
    spark.sql(f"CREATE OR REPLACE TEMPORARY VIEW v_c USING mysql_cdc OPTIONS (source 'src', table '{db}.c')")
    assert spark.sql("SELECT sum(v) AS s FROM v_c").collect()[0]["s"] == sum(range(300))


def test_a_many_table_stream_runs_to_its_end_in_bounded_batches_and_follows_a_schema_change(
        classic_spark: Any, info: ServerInfo, profile: ConnectionProfile, db: str, root: Any, tmp_path: Any) -> None:
    _make(root)
    args = (profile_url(profile), f"tables={db}[.](a|b|c)", str(tmp_path / "state"), str(tmp_path / "ck"),
            str(tmp_path / "out"))
    q = start_stream(classic_spark, *args, "availableNow", max_chunks=2, chunk_size=100)
    assert q.awaitTermination(300), "the run did not end when caught up"
    assert q.exception() is None, q.exception()
    committed, phase = _checkpoint_state(str(tmp_path / "ck"))
    assert committed >= 5 and phase == "binlog"  # 9 chunks, 2 a batch: bounded on every Spark
    _change(root, 40)
    root.cursor().execute("ALTER TABLE a ADD COLUMN n INT NULL")  # followed in place
    root.cursor().execute("UPDATE a SET n = 5, v = v + 100 WHERE id < 10")
    _change(root, 80)
    q = start_stream(classic_spark, *args, "availableNow", max_chunks=2, chunk_size=100, max_rows_per_batch=30)
    assert q.awaitTermination(300) and q.exception() is None, q.exception()
    assert _checkpoint_state(str(tmp_path / "ck"))[0] >= committed + 3  # the changes in batches of ~30 rows
    frames = mysql_cdc.split(classic_spark.read.parquet(str(tmp_path / "out")), str(tmp_path / "state"))
    for t in TABLES:
        cols = [*KEYS[t], "v", *(["n"] if t == "a" else [])]
        rows = frames[f"{db}.{t}"].select(*cols, "__op", "_change_seq").collect()
        mirror: dict[tuple[Any, ...], tuple[Any, ...]] = {}
        for r in sorted(rows, key=lambda r: r["_change_seq"]):
            key = tuple(r[c] for c in KEYS[t])
            if r["__op"] in ("-U", "-D"):
                mirror.pop(key, None)
            else:
                mirror[key] = tuple(r[c] for c in cols)
        assert collections.Counter(mirror.values()) == _source(info, db, t, cols), t
    assert "evolve" in [e.action for e in StateStore(str(tmp_path / "state")).history(TableId(db, "a"))]


_STARTED: list[subprocess.Popen[bytes]] = []


@pytest.fixture(autouse=True)
def _no_job_left() -> Iterator[None]:
    """A sync a test started and left running (the test failed, or pytest-timeout stopped it) is killed with its
    Spark, so that it does not run on beside the next tests."""
    yield
    while _STARTED:
        p = _STARTED.pop()
        if p.poll() is None:
            _kill(p)


def _sync(args: list[str], profile: ConnectionProfile, log: str) -> subprocess.Popen[bytes]:
    env = _repo_env(True)
    env["MYSQL_CDC_PROFILE_SRC"] = profile_url(profile)
    with open(log, "ab") as f:
        p = subprocess.Popen([sys.executable, "-m", "mysql_cdc", "sync", "--source", "src", *args, "--master",
                              "local[2]", "--conf", "spark.sql.shuffle.partitions=2"], cwd=ROOT, env=env, stdout=f,
                             stderr=subprocess.STDOUT, start_new_session=True)
    _STARTED.append(p)
    return p


@pytest.mark.parametrize("server", ["mysql"], indirect=True)  # the stream's restart on this Spark, not the server's
@pytest.mark.timeout(1500)  # 6-9 minutes on a slow day; its --once runs wait up to 600 s each
def test_the_sync_killed_with_minus_9_converges(info: ServerInfo, profile: ConnectionProfile, db: str, root: Any,
                                               tmp_path: Any) -> None:
    import deltalake

    from mysql_cdc.udtf.sync.mirror import table_path

    _make(root)
    to, ck, state, log = (str(tmp_path / n) for n in ("lake", "ck", "state", "log"))
    args = ["--tables", f"{db}[.](a|b|c)", "--to", to, "--checkpoint", ck, "--state-dir", state, "--chunk-size",
            "100", "--interval", "0.2"]
    # a mirror that delta-rs began (as before this Spark had a Spark writer: an upgrade) is taken over by Spark's
    # Delta, which is killed in its turn: the same tables, the same transactions, no batch applied twice. delta-rs
    # reads a chunk a batch: Spark's writer has snapshot batches left to append.
    p = _sync([*args, "--writer", "delta-rs", "--max-chunks-per-batch", "1"], profile, log)
    wait_until(lambda: _checkpoint_state(ck)[0] >= 1 or p.poll() is not None, 300, "a committed batch")
    assert p.poll() is None, _tail(log)
    _kill(p)
    args += ["--max-chunks-per-batch", "4"]
    p = _sync(args, profile, log)
    wait_until(lambda: _checkpoint_state(ck)[0] >= 3 or p.poll() is not None, 300, "batches by Spark's writer")
    assert p.poll() is None, _tail(log)
    _change(root, 40)
    _kill(p)
    _change(root, 80)
    # followed in place, one ALTER TABLE each: a column added (a), one renamed (b), one dropped (c); the last two
    # with Delta's column mapping, which the table is given first
    cur = root.cursor()
    for sql in ("ALTER TABLE a ADD COLUMN n INT NULL", "UPDATE a SET n = id WHERE id < 10",
                "ALTER TABLE b RENAME COLUMN v TO w", "UPDATE b SET w = w + 5 WHERE k < 'k00010'",
                "ALTER TABLE c DROP COLUMN v", "INSERT INTO c (x, y) VALUES (5000, 1)"):
        cur.execute(sql)
    # and a snapshot of c asked for on demand, which the next run takes while those statements wait in its binlog
    env = _repo_env(True)
    env["MYSQL_CDC_PROFILE_SRC"] = profile_url(profile)
    asked = subprocess.run([sys.executable, "-m", "mysql_cdc", "resnapshot", "--state-dir", state, "--tables",
                            f"{db}[.]c"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert asked.returncode == 0 and "snapshot request 0 recorded" in asked.stdout, asked.stdout + asked.stderr
    start = os.path.getsize(log)
    p = _sync([*args, "--once"], profile, log)
    # 600 s: beside other tests (the MySQL lane's kill tests, as an earlier layout of CI ran it) each batch of
    # Spark's Delta took about a minute, and this run had written two batches when 300 s ran out
    _ended(p, log, 600)
    done = mysql_cdc.resnapshot(state_dir=state, request=0, checkpoint=ck)
    assert done.state == "done" and done.snapshotted == (TableId(db, "c"),), done
    with open(log, encoding="utf-8", errors="replace") as f:
        said = f.read()
    # each batch says how many tables it merged and how many had it already: only the first batch after the
    # kill may be one a table holds (a MERGE that Delta skips answers no row, one that ran a row of counts)
    with open(log, "rb") as f:
        run = f.read()[start:].decode("utf-8", "replace")
    heads = re.findall(r"^batch (\d+): [\d,]+ rows \(.*\) into (\d+) tables(, \d+ already applied)?", run,
                       re.MULTILINE)
    assert len(heads) >= 2 and not any(again for _, _, again in heads[1:]), heads
    assert sum(int(n) for _, n, _ in heads[1:]) > 0, heads
    columns = {"a": ["id", "v", "n"], "b": ["k", "w"], "c": ["x", "y"]}
    for t in TABLES:
        assert f"mirror of {db}.{t}: columns now {columns[t]!r} (in place)" in said, _tail(log)
        ops = _delta_operations(table_path(to, TableId(db, t)))
        assert {"a": "ADD COLUMNS", "b": "RENAME COLUMN", "c": "DROP COLUMNS"}[t] in ops, (t, ops)
        assert not any(op in ("WRITE", "CREATE OR REPLACE TABLE AS SELECT") and mode == "Overwrite"
                       for op, mode in ops.items()), (t, ops)  # no rewrite
        mapping = deltalake.DeltaTable(table_path(to, TableId(db, t))).metadata().configuration.get(
            "delta.columnMapping.mode")
        assert mapping == (None if t == "a" else "name"), (t, mapping)
    for t in TABLES:
        cols = columns[t]
        # read through delta-rs's query engine, which maps the columns (its pyarrow dataset reads a renamed column
        # of a table with column mapping as NULLs: deltalake 1.6.6, the README says so)
        data = pa.table(deltalake.QueryBuilder().register("t", deltalake.DeltaTable(table_path(to, TableId(db, t))))
                        .execute(f"SELECT {', '.join(cols)} FROM t").read_all())
        got = collections.Counter(zip(*(data.column(c).to_pylist() for c in cols)))
        assert got == _source(info, db, t, cols), t
        versions = [v for _, v in _txns(table_path(to, TableId(db, t)))]
        assert versions and len(versions) == len(set(versions)), (t, versions)  # no batch applied twice
    # Spark's writer appends the snapshot's batches (new keys: no MERGE) and merges the binlog's
    snapshot = _snapshot_batches(ck)
    spark_made = [(v, op) for t in TABLES for v, op, engine in _delta_commits(table_path(to, TableId(db, t)))
                  if "Delta-Lake" in engine]  # Spark's Delta (engineInfo "Apache-Spark/... Delta-Lake/...")
    assert any(v in snapshot for v, _ in spark_made), (snapshot, spark_made)
    assert all((op == "WRITE") == (v in snapshot) for v, op in spark_made), (snapshot, spark_made)
    # written by Spark's own Delta, which Delta ships jars for on every Spark this runs on (4.0 to 4.2; 4.3 runs
    # the delta-rs writer's kill test, tests/test_sync.py)
    assert delta_artifact(pyspark.__version__)
    assert "Delta tables written by Spark (io.delta:delta-spark_" in said, _tail(log)
    # delta-rs does not write a table with column mapping: its writer refuses the table before data moves
    from mysql_cdc.errors import TableError
    from mysql_cdc.options import parse_options
    from mysql_cdc.udtf.sync.job import captured_schemas
    from mysql_cdc.udtf.sync.mirror import DeltaMirror

    with pytest.raises(TableError, match="uses column mapping") as refused:
        DeltaMirror(to, parse_options({"state_dir": state}), state).prepare(captured_schemas(StateStore(state)))
    assert f"{db}.b" in str(refused.value) and "Spark's Delta" in str(refused.value)
    if not os.environ.get("MYSQL_CDC_LONG_VERSIONS"):
        # CI time: verify and a key range on Spark's Delta (three minutes more) run with MYSQL_CDC_LONG_VERSIONS=1
        # (or MYSQL_CDC_LONG=1); the default run checks them on delta-rs (tests/test_verify.py, tests/test_sync.py)
        return
    # verify on this Spark, which reads the tables with Spark's Delta at their pinned version (the CLI loads its
    # jars): a and c agree with their source, c with column mapping too; b (column mapping, its column renamed) has
    # one row changed behind the sync's back (not in the binlog), and that one alone is named (a plain Parquet
    # read would see the renamed column as NULLs, and every row differ)
    root.cursor().execute("SET sql_log_bin = 0")
    root.cursor().execute("UPDATE b SET w = w + 1000 WHERE k = 'k00003'")
    root.cursor().execute("SET sql_log_bin = 1")
    run = subprocess.run([sys.executable, "-m", "mysql_cdc", "verify", "--source", "src", "--checkpoint", ck,
                          "--state-dir", state, "--master", "local[2]", "--recheck-seconds", "0", "--json"],
                         cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert run.returncode == 3, run.stdout + run.stderr
    checks = {t["table"].split(".", 1)[1]: t for t in json.loads(run.stdout)["tables"]}
    for t in TABLES:
        assert checks[t]["rows"] == sum(_source(info, db, t, KEYS[t]).values()) > 0, checks[t]
        assert not checks[t]["not_checked"], checks[t]
        assert (checks[t]["changed"], checks[t]["differing"]) == ((["'k00003'"], 1) if t == "b" else ([], 0)), checks[t]
    # a key range of c (its key two integer columns, its table with column mapping) and one key beside it read
    # again on demand: rows changed behind the sync's back inside them are set right (two the source lost, one it
    # gained), one outside stays as the mirror had it; Spark's Delta deletes their rows in the batch's commit
    for sql in ("SET sql_log_bin = 0", "DELETE FROM c WHERE x = 2 AND y = 9", "INSERT INTO c (x, y) VALUES (2, 1000)",
                "DELETE FROM c WHERE x = 4 AND y = 4", "DELETE FROM c WHERE x = 5 AND y = 5", "SET sql_log_bin = 1"):
        cur.execute(sql)
    asked = subprocess.run([sys.executable, "-m", "mysql_cdc", "resnapshot", "--state-dir", state, "--tables",
                            f"{db}[.]c", "--key-from", "2,0", "--key-to", "3,0", "--key", "4,4"], cwd=ROOT, env=env,
                           capture_output=True, text=True, timeout=120)
    assert asked.returncode == 0 and "snapshot request 1 recorded" in asked.stdout, asked.stdout + asked.stderr
    p = _sync([*args, "--once"], profile, log)
    _ended(p, log, 600)
    done = mysql_cdc.resnapshot(state_dir=state, request=1, checkpoint=ck)
    assert done.line() == f"request 1: done: {db}.c ((x, y) in [(2, 0), (3, 0)), [(4, 4), (4, 5))) snapshotted " \
        f"again (from round {done.round})", done.line()
    data = pa.table(deltalake.QueryBuilder().register("t", deltalake.DeltaTable(table_path(to, TableId(db, "c"))))
                    .execute("SELECT x, y FROM t").read_all())
    got = collections.Counter(zip(data.column("x").to_pylist(), data.column("y").to_pylist()))
    assert got == _source(info, db, "c", ["x", "y"]) + collections.Counter([(5, 5)]), got
    assert "DELETE" in _delta_operations(table_path(to, TableId(db, "c")))


# A key range over a (DATE, DECIMAL, DATETIME, TIMESTAMP) key deleted from a lake table by Spark SQL, the
# predicate mysql_cdc.keyrange writes: rows 250 us apart across midnight and across milliseconds (file statistics
# of timestamps are cut to milliseconds), in four files; the keys left are those the range does not contain.
TEMPORAL_RANGE = """
def temporal_range(spark, name, using):
    out = temporal_range_once(spark, name, using)
    # and again with ANSI off (a session's choice; Spark 3's default), where Spark compares a column with text by
    # other rules (an IN list of dates as text: the predicates compare a date or a time by = and <, never IN)
    spark.conf.set("spark.sql.ansi.enabled", "false")
    try:
        lax = temporal_range_once(spark, name + "_lax", using)
    finally:
        spark.conf.unset("spark.sql.ansi.enabled")
    out["lax"] = {"left": lax["left"], "strings_left": lax["strings_left"]}
    return out


def temporal_range_once(spark, name, using):
    import datetime as dt
    from decimal import Decimal
    from mysql_cdc.keyrange import KeyRange
    at0 = dt.datetime(2024, 2, 29, 23, 59, 59, 999_000)
    rows = [(dt.date(2024, 2, 28) + dt.timedelta(days=i // 10), Decimal(i % 3).scaleb(-2),
             at0 + dt.timedelta(microseconds=250 * i), at0 + dt.timedelta(microseconds=250 * i), i) for i in range(40)]
    spark.sql(f"CREATE TABLE {name} (day DATE, p DECIMAL(7,2), at TIMESTAMP_NTZ, z TIMESTAMP, v INT) USING {using}")
    for part in range(4):
        spark.sql(f"INSERT INTO {name} VALUES " + ", ".join(
            f"(DATE'{d}', {p}, TIMESTAMP_NTZ'{a.isoformat(sep=' ')}', CAST('{z.isoformat()}Z' AS TIMESTAMP), {v})"
            for d, p, a, z, v in rows[part * 10:(part + 1) * 10]))
    keys = sorted(r[:4] for r in rows)  # in key order: the spans below are of neighbours in it
    r = KeyRange.of_spans(("day", "p", "at", "z"), [(keys[3], keys[7]), (keys[12], keys[13]), (keys[21], keys[22]),
                                                     (keys[38], None)], utc=("z",))
    spark.sql(f"DELETE FROM {name} WHERE " + r.predicate(lambda c: "`" + c + "`"))
    left = [tuple(x) for x in spark.sql(f"SELECT day, p, at, unix_micros(z) FROM {name}").collect()]
    left = sorted((d, p, a, dt.datetime(1970, 1, 1) + dt.timedelta(microseconds=z)) for d, p, a, z in left)
    # and a list of keys over a (STRING, INT) key, each deleted as written: quotes, a backslash, an accent; 'abc'
    # beside 'ABC' (which a collation may hold equal: the lake keeps its bytes)
    codes = ["it's", "a\\\\b", "é", "abc", "ABC", "x'); DROP TABLE t; --"]
    spark.sql(f"CREATE TABLE {name}_s (code STRING, n INT, v INT) USING {using}")
    spark.createDataFrame([(c, n, 0) for c in codes for n in (1, 2)], "code STRING, n INT, v INT").writeTo(
        f"{name}_s").append()
    s = KeyRange.of_keys(("code", "n"), [("it's", 1), ("a\\\\b", 2), ("é", 1), ("ABC", 2),
                                         ("x'); DROP TABLE t; --", 1)])
    spark.sql(f"DELETE FROM {name}_s WHERE " + s.predicate(lambda c: "`" + c + "`"))
    # and the keys a range over that key held, as the server found them (one IN list of strings per n)
    h = KeyRange(("code", "n"), ("a", 0), ("b", 0), held=(("abc", 1), ("a\\\\b", 1), ("é", 2)))
    spark.sql(f"DELETE FROM {name}_s WHERE " + h.predicate(lambda c: "`" + c + "`"))
    kept = sorted(tuple(x) for x in spark.sql(f"SELECT code, n FROM {name}_s").collect())
    return {"left": [str(k) for k in left], "want": [str(k) for k in keys if not r.contains(k)], "rows": len(keys),
            "strings_left": [list(k) for k in kept],
            "strings_want": [[c, n] for c, n in sorted((c, n) for c in codes for n in (1, 2))
                             if not s.contains((c, n)) and not h.contains((c, n))]}
"""


CATALOG_SYNC = TEMPORAL_RANGE + """
import json, os, sys
from pyspark.sql import SparkSession
import mysql_cdc
from mysql_cdc.udtf.sync.sinks import delta_artifact
import pyspark

db, work, phase = sys.argv[1:4]
spark = (SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
         .config("spark.sql.shuffle.partitions", "2").config("spark.jars.packages", delta_artifact(pyspark.__version__))
         .config("spark.sql.extensions", "io.delta.sql.DeltaSparkSessionExtension")
         .config("spark.sql.catalog.spark_catalog", "org.apache.spark.sql.delta.catalog.DeltaCatalog")
         .config("spark.sql.warehouse.dir", work + "/warehouse").enableHiveSupport().getOrCreate())
files = []  # each batch's files of large values (decoded by Spark's writers on the executors)
args = dict(to="spark_catalog.mirror_{database}", checkpoint=work + "/ck", state_dir=work + "/state",
            tables=db + "[.](a|b|c|lv)", source="src", chunk_size=100, once=True, large_value_bytes=1000,
            on_batch=lambda s: files.append(s.large_values))
clash = None
if phase == "first":  # two tables named alike in one namespace: refused before anything is read or created
    try:
        mysql_cdc.sync(spark, **{**args, "to": "spark_catalog.one", "tables": db + "[.](a|b|c)," + db + "_other[.]a",
                                 "checkpoint": work + "/ck-clash"})
    except Exception as e:
        clash = str(e)
    clash_left = os.path.exists(work + "/ck-clash")
q = mysql_cdc.sync(spark, **args)
ended = q.awaitTermination(300)
out = {"ended": ended, "error": None if q.exception() is None else str(q.exception())[:2000], "tables": {},
       "clash": clash, "clash_left": phase == "first" and clash_left, "files": sum(files),
       "folder": os.listdir(work + "/state/large_values")}
import hashlib
out["lv"] = sorted([r["id"], r["b"] and hashlib.sha256(r["b"]).hexdigest(), r["t"] and hashlib.sha256(
    r["t"].encode()).hexdigest()] for r in spark.table(f"spark_catalog.mirror_{db}.lv").collect())
# the Parquet files' column chunks: (dictionary encoded, has min/max statistics), per table
import glob, pyarrow.parquet as pq


def chunks(table):
    where = spark.sql(f"DESCRIBE DETAIL {table}").collect()[0]["location"].replace("file:", "")
    for f in glob.glob(where + "/*.parquet"):
        meta = pq.ParquetFile(f).metadata
        for g in range(meta.num_row_groups):
            for i in range(meta.num_columns):
                c = meta.row_group(g).column(i)
                yield (any("DICTIONARY" in e for e in c.encodings), c.statistics is not None and
                       c.statistics.has_min_max)


out["parquet"] = {t: sorted(set(chunks(f"spark_catalog.mirror_{db}.{t}"))) for t in ("a", "lv")}
lv_detail = spark.sql(f"DESCRIBE DETAIL spark_catalog.mirror_{db}.lv").collect()[0]
lv_where = lv_detail["location"].replace("file:", "")
out["parquet_props"] = {t: {k: v for k, v in (spark.sql(f"DESCRIBE DETAIL spark_catalog.mirror_{db}.{t}").collect()[0][
    "properties"] or {}).items() if k.startswith("parquet.")} for t in ("a", "lv")}


def described(f):
    meta = pq.ParquetFile(f).metadata
    return [[c.path_in_schema, list(c.encodings), c.statistics is not None and c.statistics.has_min_max]
            for c in (meta.row_group(g).column(i) for g in range(meta.num_row_groups) for i in range(meta.num_columns))]


out["lv_files"] = {os.path.basename(f): described(f) for f in glob.glob(lv_where + "/*.parquet")}
out["lv_history"] = [[r["version"], r["operation"], str(r["operationParameters"])]
                     for r in spark.sql(f"DESCRIBE HISTORY spark_catalog.mirror_{db}.lv").collect()]
for t in ("a", "b", "c"):
    name = f"spark_catalog.mirror_{db}.{t}"
    out["tables"][t] = sorted([list(r) for r in spark.table(name).collect()])
    out.setdefault("types", {})[t] = spark.table(name).dtypes
    detail = spark.sql(f"DESCRIBE DETAIL {name}").collect()[0]
    out.setdefault("owner", {})[t] = (detail["properties"] or {}).get("mysql_cdc.sync")
if phase == "sync":  # verify, from this session: the catalog's tables read by Spark's Delta at their version
    out["verify"] = mysql_cdc.verify(spark, checkpoint=work + "/ck", state_dir=work + "/state", source="src",
                                     recheck_seconds=0).to_dict()
    # the skip of a batch a table holds: a MERGE of a batch the table's log has commits nothing and is said
    # skipped (Delta answers it with no row); the same MERGE as the next batch commits (its answer a row of
    # zeros: the key it deletes is not there) and is said merged
    from mysql_cdc.ids import TableId
    from mysql_cdc.options import parse_options
    from mysql_cdc.udtf.sync.job import query_app_id
    from mysql_cdc.udtf.sync.sinks import parse_target
    from mysql_cdc.udtf.sync.spark_mirror import SparkDeltaMirror
    name = f"spark_catalog.mirror_{db}.a"
    app = query_app_id(work + "/ck")
    log = spark.sql(f"DESCRIBE DETAIL {name}").collect()[0]["location"].replace("file:", "") + "/_delta_log"
    last = max(json.loads(line)["txn"]["version"] for f in sorted(os.listdir(log)) if f.endswith(".json")
               for line in open(os.path.join(log, f)) if '"txn"' in line and app in line)
    mirror = SparkDeltaMirror(spark, parse_target("spark_catalog.mirror_{database}"),
                              parse_options({"state_dir": work + "/state"}), work + "/state")
    spark.sql("SELECT -1 AS id, true AS gone").createOrReplaceTempView("nothing")
    merge = (f"MERGE INTO {name} AS t USING nothing AS s ON t.id = s.id WHEN MATCHED AND s.gone THEN DELETE "
             "WHEN NOT MATCHED AND NOT s.gone THEN INSERT (id, v) VALUES (s.id, 0)")
    version = lambda: spark.sql(f"DESCRIBE HISTORY {name} LIMIT 1").collect()[0]["version"]
    v0 = version()
    out["replay"] = [mirror._exactly_once(spark, TableId(db, "a"), app, last, merge), version() - v0]
    out["next"] = [mirror._exactly_once(spark, TableId(db, "a"), app, last + 1, merge), version() - v0]
    out["temporal"] = temporal_range(spark, f"spark_catalog.default.when_keys_{db}", "delta")
print(json.dumps(out))
"""


@pytest.mark.parametrize("server", ["mariadb"], indirect=True)  # the writer and the catalog matter, not the server
def test_the_sync_into_a_catalog_namespace(info: ServerInfo, profile: ConnectionProfile, db: str, root: Any,
                                           tmp_path: Any) -> None:
    """On a Spark that Delta ships jars for: the mirror as tables of the session catalog (a Hive metastore in the
    test's folder), one namespace per source database (``{database}``), merged by Spark, across two runs with
    changes between them; two source tables that would share a name are refused before data moves. Where Delta
    has no jars (4.3) a catalog target is refused (tests/test_lake_types.py)."""
    assert delta_artifact(pyspark.__version__), "the versions run covers Spark 4.0 to 4.2, which Delta ships jars for"
    _make(root, 150)
    script = tmp_path / "catalog_sync.py"
    script.write_text(CATALOG_SYNC)
    env = _repo_env(True)
    env["MYSQL_CDC_PROFILE_SRC"] = profile_url(profile)

    def run(phase: str) -> dict[str, Any]:
        out = subprocess.run([sys.executable, str(script), db, str(tmp_path), phase], env=env, cwd=str(tmp_path),
                             capture_output=True, text=True, timeout=600)
        assert out.returncode == 0, out.stderr[-3000:]
        return dict(json.loads(out.stdout.strip().splitlines()[-1]))

    # a table of values of 1000 bytes and more (large_value_bytes): they travel as files, which Spark's writers
    # read on the executors
    big = random.Random(3).randbytes
    cur = root.cursor()
    cur.execute("CREATE TABLE lv (id INT PRIMARY KEY, b LONGBLOB, t LONGTEXT CHARACTER SET utf8mb4)")
    cur.executemany("INSERT INTO lv VALUES (%s, %s, %s)", [(1, big(5000), '"\\ :{"€' * 300), (2, big(999), "x"),
                                                          (3, None, None)] + [(i, None, "same") for i in range(10, 40)])

    def lv_source() -> list[list[Any]]:
        cur.execute("SELECT id, b, t FROM lv ORDER BY id")
        return [[i, b and hashlib.sha256(bytes(b)).hexdigest(), t and hashlib.sha256(t.encode()).hexdigest()]
                for i, b, t in cur.fetchall()]

    other = info.connect(root=True)
    try:
        other.cursor().execute(f"CREATE DATABASE `{db}_other`")
        other.cursor().execute(f"CREATE TABLE `{db}_other`.a (id INT PRIMARY KEY, v INT NOT NULL)")
        first = run("first")
    finally:
        other.cursor().execute(f"DROP DATABASE IF EXISTS `{db}_other`")
        other.close()
    assert "would both be mirrored as `spark_catalog`.`one`.`a`" in (first["clash"] or ""), first
    assert first["clash_left"] is False  # nothing of the refused sync was created
    assert first["ended"] and first["error"] is None, first
    assert first["types"]["a"] == [["id", "int"], ["v", "int"]]
    assert first["lv"] == lv_source() and first["files"] == 2 and first["folder"] == [], first
    # a table with a BLOB is written by Spark's Delta without Parquet dictionaries and statistics (each copies a
    # value whole: lake_types.large_value_settings, the table's properties), and only it. Its column chunks have
    # no statistics (an INT's would). Whether they have dictionaries is not asserted: in 4 runs of 7 on
    # 2026-12-01 one write put its TEXT column (30 equal texts) in a dictionary, statistics off all the same,
    # the settings then session settings or table properties alike; cause not found (see the note of that day)
    assert first["parquet_props"] == {"a": {}, "lv": {"parquet.enable.dictionary": "false",  # every write of it
                                                      "parquet.column.statistics.enabled": "false"}}, first
    assert {s for _, s in first["parquet"]["lv"]} == {False} and [False, True] in first["parquet"]["a"], (
        first["parquet"], first["lv_files"], first["lv_history"])
    _change(root, 40)
    cur.execute("UPDATE lv SET b = %s, t = 'short' WHERE id = 2", (big(70_000),))
    cur.execute("INSERT INTO lv VALUES (4, NULL, %s)", ("é" * 600,))
    root.cursor().execute("ALTER TABLE a ADD COLUMN n INT NULL")  # followed: the mirror rewritten with it
    root.cursor().execute("UPDATE a SET n = id WHERE id < 10")
    second = run("sync")
    assert second["ended"] and second["error"] is None, second
    for t in TABLES:
        cols = [*KEYS[t], "v", *(["n"] if t == "a" else [])]
        got = collections.Counter(tuple(r) for r in second["tables"][t])
        assert got == _source(info, db, t, cols), t
    assert second["types"]["a"] == [["id", "int"], ["v", "int"], ["n", "int"]]
    assert second["lv"] == lv_source() and second["files"] == 2 and second["folder"] == [], second
    assert {s for _, s in second["parquet"]["lv"]} == {False}, (second["parquet"], second["lv_files"],
                                                                second["lv_history"])  # the MERGE's files too
    checks = {c["table"].split(".", 1)[1]: c for c in second["verify"]["tables"]}
    for t in TABLES:
        assert checks[t]["rows"] == len(second["tables"][t]) > 0 and not checks[t]["not_checked"], checks[t]
        assert not checks[t]["differing"], checks[t]
    assert second["replay"] == [False, 0] and second["next"] == [True, 1], second
    temporal = second["temporal"]  # Spark's Delta deletes a range over a key of dates, times and a DECIMAL exactly
    assert temporal["left"] == temporal["want"] and 0 < len(temporal["want"]) < temporal["rows"], temporal
    assert temporal["strings_left"] == temporal["strings_want"] and len(temporal["strings_want"]) == 4, temporal
    assert temporal["lax"] == {"left": temporal["want"], "strings_left": temporal["strings_want"]}, temporal
    # the rewrite kept the table's owner (the capture's sync id), which the next run checks
    assert second["owner"] == first["owner"] and len(set(first["owner"].values())) == 1 and first["owner"]["a"]
    history = glob.glob(str(tmp_path / "warehouse" / f"mirror_{db}.db" / "*" / "_delta_log"))
    assert len(history) == 4
    for log in history:
        versions = [v for _, v in _txns(os.path.dirname(log))]
        assert versions and len(versions) == len(set(versions)), (log, versions)


ICEBERG_READ = TEMPORAL_RANGE + """
import json, sys
from pyspark.sql import SparkSession
import pyspark
import mysql_cdc
from mysql_cdc.ids import TableId
from mysql_cdc.options import parse_options
from mysql_cdc.udtf.sync.job import query_app_id
from mysql_cdc.udtf.sync.sinks import iceberg_artifact, parse_target
from mysql_cdc.udtf.sync.spark_mirror import SparkIcebergMirror

db, warehouse, ck, state = sys.argv[1:5]
spark = (SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false")
         .config("spark.jars.packages", iceberg_artifact(pyspark.__version__))
         .config("spark.sql.extensions", "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions")
         .config("spark.sql.catalog.lake", "org.apache.iceberg.spark.SparkCatalog")
         .config("spark.sql.catalog.lake.type", "hadoop").config("spark.sql.catalog.lake.warehouse", warehouse)
         .getOrCreate())
out = {"tables": {}, "types": {}, "marks": {}, "owner": {}}
for t in ("a", "b", "c"):
    name = f"lake.mirror_{db}.{t}"
    out["tables"][t] = [r.asDict() for r in spark.table(name).collect()]
    out["types"][t] = spark.table(name).dtypes
    out["marks"][t] = [[r["app"], r["batch"], r["operation"]] for r in spark.sql(
        f"SELECT summary['mysql_cdc.app'] AS app, summary['mysql_cdc.batch'] AS batch, operation "
        f"FROM {name}.snapshots ORDER BY committed_at").collect()]
    props = {r["key"]: r["value"] for r in spark.sql(f"SHOW TBLPROPERTIES {name}").collect()}
    out["owner"][t] = props.get("mysql_cdc.sync")
# the skip itself: a batch the table holds already is not committed again
app = query_app_id(ck)
last = max(int(b) for a, b, _ in out["marks"]["a"] if a == app)
mirror = SparkIcebergMirror(spark, parse_target("lake.mirror_{database}"), parse_options({"state_dir": state}), state)
out["replayed"] = mirror._exactly_once(spark, TableId(db, "a"), app, last, f"DELETE FROM lake.mirror_{db}.a")
out["rows_after_replay"] = spark.table(f"lake.mirror_{db}.a").count()
main = spark.sql(f"SELECT snapshot_id FROM lake.mirror_{db}.b.refs WHERE name = 'main'").collect()[0][0]
out["b_at_main"] = spark.sql(f"SELECT * FROM lake.mirror_{db}.b VERSION AS OF {main}").columns
# verify, from this session (Iceberg's catalog): clean, then a row deleted behind the sync's back is named
out["verify"] = mysql_cdc.verify(spark, checkpoint=ck, state_dir=state, source="src", recheck_seconds=0).to_dict()
spark.sql(f"DELETE FROM lake.mirror_{db}.a WHERE id = 5")
out["damaged"] = mysql_cdc.verify(spark, checkpoint=ck, state_dir=state, source="src", tables=db + "[.]a",
                                  recheck_seconds=0).to_dict()
# a key range's reset (a -R row): a's rows in [10, 20) deleted in one commit marked with the batch, once
from mysql_cdc.keyrange import KeyRange
a = f"lake.mirror_{db}.a"
ids = lambda: sorted(r[0] for r in spark.table(a).select("id").collect())
before = ids()
gapped = KeyRange.of_spans(("id",), [((10,), (20,)), ((25,), (26,))])  # a range and a key beside it
done = [mirror.reset(TableId(db, "a"), app, last + 1, gapped) for _ in range(2)]
out["range_reset"] = {"done": done, "before": before, "after": ids(), "batch": last + 1, "mark": spark.sql(
    f"SELECT summary['mysql_cdc.batch'] FROM {a}.snapshots ORDER BY committed_at DESC LIMIT 1").collect()[0][0]}
out["temporal"] = temporal_range(spark, f"lake.mirror_{db}.when_keys", "iceberg")
print(json.dumps(out, default=str))
"""


@pytest.mark.parametrize("server", ["mysql"], indirect=True)  # the format's writer matters, not the server
@pytest.mark.timeout(1500)  # its --once run waits up to 600 s
def test_the_sync_into_iceberg_converges_after_a_kill_and_follows_schema_changes_in_place(
        info: ServerInfo, profile: ConnectionProfile, db: str, root: Any, tmp_path: Any) -> None:
    """``mysql-cdc sync --format iceberg`` into a namespace of an Iceberg catalog (Hadoop, in the test's
    folder), killed with -9 while it runs, then run to the end after an added column (in place) and a renamed
    one (in place too), then a name freed and taken again (the table snapshotted again: emptied, its columns
    changed in place, refilled): every table equals its source, no batch is in two snapshots of a table, a batch
    the table has is skipped, the key is the table's identifier fields, the snapshots' batches are appends and the
    tables carry the capture's sync id."""
    from mysql_cdc.udtf.sync.sinks import iceberg_artifact

    assert iceberg_artifact(pyspark.__version__), "Iceberg's runtime exists for Spark 4.0 and 4.1"
    # the CLI adds the runtime beside packages the user gives (a catalog's bundle), and the SQL extension
    from mysql_cdc.cli import with_lake_jars

    ns = argparse.Namespace(format="iceberg", writer="auto", to="lake.m", conf=[
        ("spark.sql.catalog.lake", "org.apache.iceberg.spark.SparkCatalog"),
        ("spark.jars.packages", "org.apache.iceberg:iceberg-aws-bundle:1.12.0")])
    with_lake_jars(ns)
    assert dict(ns.conf)["spark.jars.packages"] == ("org.apache.iceberg:iceberg-aws-bundle:1.12.0,"
                                                    f"{iceberg_artifact(pyspark.__version__)}")
    assert "IcebergSparkSessionExtensions" in dict(ns.conf)["spark.sql.extensions"]
    _make(root)
    warehouse, ck, state, log = (str(tmp_path / n) for n in ("warehouse", "ck", "state", "log"))
    args = ["--tables", f"{db}[.](a|b|c)", "--format", "iceberg", "--to", "lake.mirror_{database}", "--checkpoint",
            ck, "--state-dir", state, "--chunk-size", "100", "--max-chunks-per-batch", "4", "--interval", "0.2",
            "--conf", "spark.sql.catalog.lake=org.apache.iceberg.spark.SparkCatalog",
            "--conf", "spark.sql.catalog.lake.type=hadoop", "--conf", f"spark.sql.catalog.lake.warehouse={warehouse}"]
    p = _sync(args, profile, log)
    wait_until(lambda: _checkpoint_state(ck)[0] >= 2 or p.poll() is not None, 300, "batches into Iceberg")
    assert p.poll() is None, _tail(log)
    _change(root, 40)
    _kill(p)
    root.cursor().execute("ALTER TABLE a ADD COLUMN n INT NULL")
    root.cursor().execute("UPDATE a SET n = id WHERE id < 10")
    _change(root, 80)
    root.cursor().execute("ALTER TABLE b RENAME COLUMN v TO w")
    root.cursor().execute("UPDATE b SET w = w + 5 WHERE k < 'k00010'")
    root.cursor().execute("ALTER TABLE b ADD COLUMN z INT NULL")  # and no row of b after it: no snapshot has z
    # a name freed and taken again in one statement: the capture snapshots the table again (its mirror emptied,
    # given the new columns, refilled)
    root.cursor().execute("ALTER TABLE c RENAME COLUMN v TO w, ADD COLUMN v INT NULL")
    root.cursor().execute("UPDATE c SET v = x WHERE x < 3")
    p = _sync([*args, "--once"], profile, log)
    _ended(p, log, 600)
    with open(log, encoding="utf-8", errors="replace") as f:
        said = f.read()
    assert "Iceberg tables written by Spark (org.apache.iceberg:iceberg-spark-runtime-" in said, _tail(log)
    # both schema changes in place: one Iceberg schema update each, no rows rewritten
    assert f"mirror of {db}.a: columns now ['id', 'v', 'n'] (in place)" in said, _tail(log)
    assert f"mirror of {db}.b: columns now ['k', 'w'] (in place)" in said, _tail(log)
    assert f"mirror of {db}.b: columns now ['k', 'w', 'z'] (in place)" in said, _tail(log)
    assert f"mirror of {db}.c: columns now ['x', 'y', 'w', 'v'] (in place)" in said, _tail(log)
    assert "reset" in [e.action for e in StateStore(state).history(TableId(db, "c"))]
    # `mysql-cdc verify --format iceberg` takes the catalog of the mirror's tables from the state dir and loads
    # Iceberg's runtime as the sync does (its stdout stays the report's); the API's verify runs below
    from mysql_cdc.cli import _verify_lake_jars

    ns = argparse.Namespace(format="iceberg", writer="auto", state_dir=state, conf=[
        ("spark.sql.catalog.lake", "org.apache.iceberg.spark.SparkCatalog")])
    _verify_lake_jars(ns)
    assert parse_target(ns.to).catalog() == "lake", ns.to
    assert "IcebergSparkSessionExtensions" in dict(ns.conf)["spark.sql.extensions"]
    assert dict(ns.conf)["spark.jars.packages"] == iceberg_artifact(pyspark.__version__)
    with pytest.raises(ConfigError, match="catalog 'lake' .* is not set"):
        _verify_lake_jars(argparse.Namespace(format="iceberg", writer="auto", state_dir=state, conf=[]))
    script = tmp_path / "read_iceberg.py"
    script.write_text(ICEBERG_READ)
    env = _repo_env(True)
    env["MYSQL_CDC_PROFILE_SRC"] = profile_url(profile)
    got = subprocess.run([sys.executable, str(script), db, warehouse, ck, state], env=env,
                         cwd=str(tmp_path), capture_output=True, text=True, timeout=600)
    assert got.returncode == 0, got.stderr[-3000:]
    out = json.loads(got.stdout.strip().splitlines()[-1])
    value = {"a": ["v", "n"], "b": ["w"], "c": ["w", "v"]}
    snapshot = _snapshot_batches(ck)
    for t in TABLES:
        cols = [*KEYS[t], *value[t]]
        mirrored = collections.Counter(tuple(r[c] for c in cols) for r in out["tables"][t])
        assert mirrored == _source(info, db, t, cols), t
        marks = [(app, int(batch)) for app, batch, _ in out["marks"][t] if batch is not None]
        assert marks and len(marks) == len(set(marks)), (t, out["marks"][t])  # no batch committed twice
        # the snapshot's batches appended (new keys: no MERGE), the binlog's merged
        ops = {int(batch): op for _, batch, op in out["marks"][t] if batch is not None}
        assert any(b in snapshot for b in ops), (t, snapshot, ops)
        assert all((op == "append") == (b in snapshot) for b, op in ops.items()), (t, snapshot, ops)
    assert out["types"]["a"] == [["id", "int"], ["v", "int"], ["n", "int"]]
    assert out["types"]["b"] == [["k", "string"], ["w", "int"], ["z", "int"]]
    assert out["b_at_main"] == ["k", "w"]  # b's current snapshot is read with its own columns: verify reads b as it is
    assert out["types"]["c"] == [["x", "int"], ["y", "int"], ["w", "int"], ["v", "int"]]
    assert out["replayed"] is False and out["rows_after_replay"] == len(out["tables"]["a"])
    assert len(set(out["owner"].values())) == 1 and out["owner"]["a"]
    # verify reads each Iceberg table at its current snapshot: every one agrees with its source; the row deleted
    # from a's mirror is named
    checks = {c["table"].split(".", 1)[1]: c for c in out["verify"]["tables"]}
    for t in TABLES:
        assert checks[t]["rows"] == len(out["tables"][t]) and not checks[t]["not_checked"], checks[t]
        assert not checks[t]["differing"], checks[t]
    (damaged,) = out["damaged"]["tables"]
    assert damaged["missing"] == ["5"] and damaged["differing"] == 1, damaged
    ranged = out["range_reset"]
    assert [i for i in ranged["before"] if not (10 <= i < 20 or i == 25)] == ranged["after"] != ranged["before"], \
        ranged
    assert ranged["done"] == [True, False] and ranged["mark"] == str(ranged["batch"]), ranged
    temporal = out["temporal"]
    assert temporal["left"] == temporal["want"] and 0 < len(temporal["want"]) < temporal["rows"], temporal
    assert temporal["strings_left"] == temporal["strings_want"] and len(temporal["strings_want"]) == 4, temporal
    assert temporal["lax"] == {"left": temporal["want"], "strings_left": temporal["strings_want"]}, temporal
    for t in TABLES:  # identifier fields = the primary key, in the table's current schema
        metas = sorted(glob.glob(os.path.join(warehouse, f"mirror_{db}", t, "metadata", "v*.metadata.json")),
                       key=lambda f: int(os.path.basename(f)[1:].split(".")[0]))
        with open(metas[-1]) as f:
            meta = json.load(f)
        schema = next(s for s in meta["schemas"] if s["schema-id"] == meta["current-schema-id"])
        ids = {f["id"]: f["name"] for f in schema["fields"]}
        assert [ids[i] for i in schema.get("identifier-field-ids", [])] == KEYS[t], (t, schema)


LAKE_READ = """
import json, pickle, sys
from pyspark.sql import SparkSession
import pyspark
from mysql_cdc.udtf.sync.sinks import iceberg_artifact

db, warehouse, tables, out_path = sys.argv[1], sys.argv[2], json.loads(sys.argv[3]), sys.argv[4]
spark = (SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false")
         .config("spark.jars.packages", iceberg_artifact(pyspark.__version__))
         .config("spark.sql.extensions", "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions")
         .config("spark.sql.catalog.lake", "org.apache.iceberg.spark.SparkCatalog")
         .config("spark.sql.catalog.lake.type", "hadoop").config("spark.sql.catalog.lake.warehouse", warehouse)
         .config("spark.sql.session.timeZone", "UTC").getOrCreate())
out = {}
for t, cols in tables.items():
    name = f"lake.mirror_{db}.{t}"
    snaps = {r["parent_id"]: r for r in spark.sql(
        f"SELECT snapshot_id, parent_id, summary['mysql_cdc.app'] AS app, summary['mysql_cdc.batch'] AS batch "
        f"FROM {name}.snapshots").collect()}
    marks, snap = [], snaps.get(None)
    while snap is not None:  # in commit order: each snapshot's child (committed_at may tie)
        if snap["batch"] is not None:
            marks.append((snap["app"], int(snap["batch"])))
        snap = snaps.get(snap["snapshot_id"])
    out[t] = {"rows": [tuple(r) for r in spark.table(name).select(*cols).collect()], "marks": marks,
              "columns": spark.table(name).columns}
with open(out_path, "wb") as f:
    pickle.dump(out, f)
"""


@pytest.mark.timeout(1800)
@pytest.mark.parametrize("fmt", [f for f, jars in (("delta", delta_artifact), ("iceberg", iceberg_artifact))
                                 if jars(pyspark.__version__)])
def test_eight_kills_of_the_sync_into_each_format_converge_exactly_once(
        fmt: str, info: ServerInfo, profile: ConnectionProfile, db: str, root: Any, tmp_path: Any) -> None:
    """tests/test_sync.py's eight kill -9 of the CLI's sync (snapshot and binlog, writers moving keys, schema
    changes in place and by a new snapshot, a TRUNCATE, a table created and one dropped) into the tables of
    Spark's own Delta (a folder) or Iceberg (a Hadoop catalog's namespace): every table equals its source and
    none holds a batch twice. Opt-in (MYSQL_CDC_LONG_VERSIONS=1: Delta on 4.2, Iceberg on 4.1, both servers)."""
    import pickle

    import deltalake

    from mysql_cdc.udtf.sync.mirror import table_path

    to, ck, state, log, warehouse = (str(tmp_path / n) for n in ("lake", "ck", "state", "log", "warehouse"))
    args = ["--tables", f"{db}[.]t.*", "--exclude", f"{db}[.]t1[03]_.*", "--format", fmt, "--checkpoint", ck,
            "--state-dir", state, "--chunk-size", "200", "--max-chunks-per-batch", "3", "--interval", "0.2"]
    if fmt == "delta":
        args += ["--to", to]
    else:
        args += ["--to", "lake.mirror_{database}",
                 "--conf", "spark.sql.catalog.lake=org.apache.iceberg.spark.SparkCatalog",
                 "--conf", "spark.sql.catalog.lake.type=hadoop",
                 "--conf", f"spark.sql.catalog.lake.warehouse={warehouse}"]
    eight_kills(info, db, root, args, ck, log, lambda a: _sync(a, profile, log))
    with open(log, encoding="utf-8", errors="replace") as text:
        said = text.read()
    writer = {"delta": "Delta tables written by Spark (io.delta:delta-spark_",
              "iceberg": "Iceberg tables written by Spark (org.apache.iceberg:iceberg-spark-runtime-"}[fmt]
    assert writer in said, _tail(log)
    cols = {t: [*_keys(t), "v"] for t in EIGHT_KILLS_TABLES}
    if fmt == "delta":
        def read(t: str) -> dict[str, Any]:
            table = deltalake.DeltaTable(table_path(to, TableId(db, t)))
            # delta-rs's query engine maps the columns of a table with column mapping (its pyarrow path does not)
            data = pa.table(deltalake.QueryBuilder().register("t", table).execute(
                f"SELECT {', '.join(cols[t])} FROM t").read_all())
            return {"rows": list(zip(*(data.column(c).to_pylist() for c in cols[t]))),
                    "marks": _txns(table_path(to, TableId(db, t))), "columns": table.schema().to_arrow().names}
        tables = {t: read(t) for t in EIGHT_KILLS_TABLES}
    else:
        script, out = tmp_path / "read_lake.py", tmp_path / "lake.pickle"
        script.write_text(LAKE_READ)
        got = subprocess.run([sys.executable, str(script), db, warehouse, json.dumps(cols), str(out)],
                             env=_repo_env(True), cwd=str(tmp_path), capture_output=True, text=True, timeout=600)
        assert got.returncode == 0, got.stderr[-3000:]
        with open(out, "rb") as f:
            tables = pickle.load(f)
    applied = check_tables(info, db, EIGHT_KILLS_TABLES,
                           lambda t: collections.Counter(tuple(_norm(x) for x in r) for r in tables[t]["rows"]),
                           lambda t: [(str(a), int(b)) for a, b in tables[t]["marks"]])
    assert applied > len(EIGHT_KILLS_TABLES)
    assert "d2" in tables["t05_dec"]["columns"] and "extra" not in tables["t01_int"]["columns"]
    assert tables["t15_new"]["rows"] and not tables["t14_gone"]["rows"]


THIN_CLIENT = """
import json, sys, time
from pyspark.sql import SparkSession
import mysql_cdc

url, db, out, ck, state = sys.argv[1:6]
spark = SparkSession.builder.remote(url).getOrCreate()
mysql_cdc.register(spark, {"src": sys.stdin.readline().strip()})
n = spark.read.format("mysql_cdc").option("source", "src").option("table", db + ".a").load().count()
chunks = spark.sql("SELECT count(*) AS c FROM mysql_cdc_chunks(source => 'src', tables => '" + db
                   + "[.]b', chunk_size => 100)").collect()[0]["c"]
q = (spark.readStream.format("mysql_cdc").option("source", "server_side").option("tables", db + "[.]c")
     .option("state_dir", state).option("once", "true").option("max_chunks_per_batch", 1).load()
     .writeStream.format("parquet").option("path", out).option("checkpointLocation", ck)
     .trigger(**mysql_cdc.once_trigger()).start())
mysql_cdc.stop_when_caught_up(q)
ended = q.awaitTermination(300)
rows = spark.read.parquet(out).count()
# a mirror of table a (Spark's Delta where the server has Delta's jars, 4.0 to 4.2; else delta-rs, written by the
# server's Python), verified from here with a row changed behind the capture's back (not logged): that key alone
# is named, every other row found equal
lake, vck, vstate, root_port = sys.argv[6:10]
t0 = time.monotonic()
sq = mysql_cdc.sync(spark, once=True, to=lake, checkpoint=vck, state_dir=vstate, tables=db + "[.]a",
                    source="server_side")
synced = sq.awaitTermination(600)
t1 = time.monotonic()
src = {"src": sys.stdin.readline().strip()}
import pymysql
conn = pymysql.connect(host="127.0.0.1", port=int(root_port), user="root", password="", database=db,
                       autocommit=True)
conn.cursor().execute("SET sql_log_bin = 0")
conn.cursor().execute("UPDATE a SET v = v + 1 WHERE id = 7")
conn.close()
damaged = mysql_cdc.verify(spark, checkpoint=vck, state_dir=vstate, source="src", profiles=src)
t2 = time.monotonic()
print(json.dumps({"client": __import__("pyspark").__version__, "server": spark.version, "rows": n,
                  "chunks": chunks, "ended": ended, "streamed": rows, "ok": damaged.ok,
                  "checked": damaged.tables[0].rows, "changed": list(damaged.tables[0].changed),
                  "missing": list(damaged.tables[0].missing), "extra": list(damaged.tables[0].extra),
                  "differing": damaged.tables[0].differing, "twice": list(damaged.tables[0].twice),
                  "synced": synced, "seconds": [round(t1 - t0, 1), round(t2 - t1, 1)]}))
spark.stop()
"""


def test_a_thin_client_of_this_spark(delta_connect: Any, info: ServerInfo, profile: ConnectionProfile, db: str,
                                     root: Any, tmp_path: Any) -> None:
    """Spark Connect from the thin client (``pyspark-client``) of this Spark's version, against a server of it:
    batch reads, a SQL function, a stream to its end (the server has the package, as streaming needs), and a sync
    whose mirror the client verifies (Spark's Delta on 4.0 to 4.2, as Databricks Connect would; no ``deltalake``
    in the client): a row changed behind the capture's back is named, and no other."""
    import pyspark

    _make(root)
    # a stream's profile is the server's: its tasks do not see the client's session files (docs/DESIGN.md §8)
    give_server_profile(delta_connect.env["MYSQL_CDC_PROFILES_FILE"], "server_side", profile)
    client = os.environ.get("MYSQL_CDC_CLIENT_PYTHON", sys.executable)
    script = tmp_path / "client.py"
    script.write_text(THIN_CLIENT)
    env = _repo_env(True)
    env.pop("PYSPARK_PYTHON", None)
    out = subprocess.run([client, str(script), delta_connect.url, db, str(tmp_path / "out"), str(tmp_path / "ck"),
                          str(tmp_path / "state"), str(tmp_path / "lake"), str(tmp_path / "vck"),
                          str(tmp_path / "vstate"), str(info.port)], input=(profile_url(profile) + "\n") * 2,
                         env=env, cwd=str(tmp_path), capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    print("sync and verify from the client (s):", got["seconds"])  # seen with -s
    assert got["server"].split(".")[:2] == pyspark.__version__.split(".")[:2]
    if client != sys.executable:  # the thin client of this version
        assert got["client"].split(".")[:2] == pyspark.__version__.split(".")[:2], got
    assert (got["rows"], got["chunks"], got["ended"], got["streamed"]) == (300, 3, True, 300), got
    assert (got["ok"], got["checked"], got["differing"], got["changed"]) == (False, 300, 1, ["7"]), got
    assert got["synced"] and got["missing"] == got["extra"] == got["twice"] == [], got
    # Spark's Delta wrote the mirror where Delta has jars for this Spark (its log's first commit says which engine)
    from mysql_cdc.udtf.sync.mirror import table_path

    with open(os.path.join(table_path(str(tmp_path / "lake"), TableId(db, "a")), "_delta_log",
                           "00000000000000000000.json"), encoding="utf-8") as log:
        engine = next(json.loads(line)["commitInfo"] for line in log if "commitInfo" in line).get("engineInfo", "")
    assert engine.startswith("Apache-Spark") == (delta_artifact(pyspark.__version__) is not None), engine
