"""Spark surfaces on real servers, through a classic session and a real Spark Connect server: the chunk table,
the snapshot function, the data source, parallel reads, credentials kept out of plans, errors, logs, state."""

from __future__ import annotations

import contextlib
import datetime as dt
import glob
import io
import json
import os
from decimal import Decimal
from typing import Any

import pytest

import mysql_cdc
from mysql_cdc.profiles import ConnectionProfile
from tests.helpers import counted, insert_rows, is_connect, profile_url
from tests.servers import ServerInfo


def _load_big(root: Any, n: int) -> list[tuple[Any, ...]]:
    cur = root.cursor()
    cur.execute("CREATE TABLE big (id BIGINT PRIMARY KEY, k INT NOT NULL, c VARCHAR(30), price DECIMAL(12,2), "
                "ts DATETIME(3))")
    cur.execute("CREATE TABLE digits (d INT)")
    cur.execute("INSERT INTO digits VALUES (0),(1),(2),(3),(4),(5),(6),(7),(8),(9)")
    # ids with gaps (multiples of 3 plus some) so chunks are uneven; a plain SELECT is the reference
    cur.execute(
        "INSERT INTO big SELECT n * 3 + (n % 2), n % 977, CONCAT('row-', n), (n % 100000) / 100, "
        "TIMESTAMPADD(SECOND, n, '2020-01-01 00:00:00.123') FROM "
        "(SELECT a.d + b.d * 10 + c.d * 100 + e.d * 1000 + f.d * 10000 + g.d * 100000 AS n "
        f"FROM digits a, digits b, digits c, digits e, digits f, digits g) x WHERE n < {n}")
    cur.execute("SELECT id, k, c, price, ts FROM big")
    rows = [tuple(r) for r in cur.fetchall()]
    cur.close()
    assert len(rows) == n
    return rows


def _spark_rows(df: Any) -> list[tuple[Any, ...]]:
    return [tuple(r) for r in df.select("id", "k", "c", "price", "ts").collect()]


@pytest.mark.mysql_by_default  # Spark's side; values on both: tests/test_values.py
def test_parallel_snapshot_equals_plain_select(spark: Any, profile: ConnectionProfile, db: str, root: Any) -> None:
    expected = sorted(_load_big(root, 50_000))  # 200,000 until 2026-12-02: a minute of CI for the same checks
    mysql_cdc.register(spark, {"src": profile_url(profile)})
    reader = spark.read.format("mysql_cdc").option("source", "src").option("table", f"{db}.big")
    ds = reader.option("chunk_size", 2250).load()
    assert sorted(_spark_rows(ds)) == expected
    per_chunk = ds.groupBy("__chunk_id").count().collect()
    assert len(per_chunk) >= 5  # evenly sized key ranges: rows per chunk follow the row estimate
    grouped = reader.option("chunk_size", 2250).option("partitions", 3).load()
    if not is_connect(spark):  # by default as many partitions as Spark runs tasks (local[2])
        assert ds.rdd.getNumPartitions() == min(len(per_chunk), spark.sparkContext.defaultParallelism) == 2
        assert grouped.rdd.getNumPartitions() == 3
    assert sorted(_spark_rows(grouped)) == expected
    sql = spark.sql(f"""
        SELECT * FROM mysql_cdc_snapshot(
            TABLE(SELECT /*+ REPARTITION(3) */ * FROM mysql_cdc_chunks(source => 'src', tables => '{db}[.]big',
                                                                        chunk_size => 5000)),
            source => 'src', table => '{db}.big')""")
    assert sorted(_spark_rows(sql)) == expected
    assert {r["__op"] for r in sql.select("__op").distinct().collect()} == {"r"}



def test_chunk_table_matches_python_api(spark: Any, profile: ConnectionProfile, db: str, root: Any) -> None:
    root.cursor().execute("CREATE TABLE a (id INT PRIMARY KEY, v INT)")
    root.cursor().execute("CREATE TABLE b (name VARCHAR(10) PRIMARY KEY)")
    insert_rows(root, "a", ["id", "v"], [(i, i) for i in range(1, 101)])
    insert_rows(root, "b", ["name"], [(f"n{i:02d}",) for i in range(30)])
    mysql_cdc.register(spark, {"src": profile_url(profile)})
    got = spark.sql(f"SELECT * FROM mysql_cdc_chunks(source => 'src', tables => '{db}[.](a|b)', "
                    "chunk_size => 10) ORDER BY table_name, chunk_index").collect()
    api = mysql_cdc.plan_chunks(profile_url(profile), tables=f"{db}[.](a|b)", chunk_size=10)
    assert [r.asDict() for r in got] == api
    assert {r["table_name"] for r in got} == {"a", "b"}
    assert got[0]["chunk_start"] is None and got[-1]["chunk_end"] is None


def test_typed_output_and_state_records(spark: Any, profile: ConnectionProfile, db: str, root: Any,
                                        tmp_path: Any) -> None:
    root.cursor().execute("CREATE TABLE t (id BIGINT UNSIGNED PRIMARY KEY, d DECIMAL(20,4), s VARCHAR(10), "
                          "b VARBINARY(4), dt DATETIME(6), dd DATE, f DOUBLE, e ENUM('x','y'), ts TIMESTAMP(3) NULL)")
    rows = [(2**64 - 1, Decimal("12345678901234.5678"), "é😀", b"\x00\xff", dt.datetime(2021, 3, 4, 5, 6, 7, 890123),
             dt.date(1969, 12, 31), 1.5, "y", dt.datetime(2020, 6, 1, 12, 0, 0, 123000)),
            (1, None, None, None, None, None, None, None, None)]
    cur = root.cursor()
    cur.execute("SET time_zone = '+00:00'")
    insert_rows(root, "t", ["id", "d", "s", "b", "dt", "dd", "f", "e", "ts"], rows)
    mysql_cdc.register(spark, {"src": profile_url(profile)})
    state = str(tmp_path / "state")
    df = (spark.read.format("mysql_cdc").option("source", "src").option("table", f"{db}.t")
          .option("state_dir", state).load())
    types = dict(df.dtypes)
    assert types["id"] == "decimal(20,0)" and types["d"] == "decimal(20,4)" and types["dt"] == "timestamp_ntz"
    assert types["b"] == "binary" and types["dd"] == "date" and types["ts"] == "timestamp"
    got = {r["id"]: r for r in df.collect()}
    top = got[Decimal(2**64 - 1)]
    assert top["d"] == Decimal("12345678901234.5678") and top["s"] == "é😀" and bytes(top["b"]) == b"\x00\xff"
    assert top["dt"] == dt.datetime(2021, 3, 4, 5, 6, 7, 890123) and top["dd"] == dt.date(1969, 12, 31)
    assert top["e"] == "y"
    assert got[Decimal(1)]["d"] is None
    pos = json.loads(top["__position"])
    assert pos["file"] and pos["pos"] > 0
    records = glob.glob(os.path.join(state, "chunks", f"{db}.t", "*.json"))
    assert len(records) == 1
    rec = _json(records[0])
    assert rec["high"] == pos and rec["rows"] == 2


def test_empty_chunks_are_recorded(spark: Any, profile: ConnectionProfile, db: str, root: Any, tmp_path: Any
                                   ) -> None:
    root.cursor().execute("CREATE TABLE t (id INT PRIMARY KEY)")
    insert_rows(root, "t", ["id"], [(i,) for i in list(range(1, 11)) + list(range(500, 511))])
    counted(root, "t")  # the two plans below must agree: the row estimate settled first
    mysql_cdc.register(spark, {"src": profile_url(profile)})
    state = str(tmp_path / "st")
    # the even split (factor 510/21 < 1000) leaves empty chunks between 11 and 500
    n = spark.sql(f"""SELECT * FROM mysql_cdc_snapshot(TABLE(SELECT * FROM mysql_cdc_chunks(source => 'src',
        tables => '{db}[.]t', chunk_size => 2)), source => 'src', table => '{db}.t', state_dir => '{state}')""").count()
    assert n == 21
    chunks = spark.sql(f"SELECT * FROM mysql_cdc_chunks(source => 'src', tables => '{db}[.]t', chunk_size => 2)")
    n_chunks = chunks.count()
    recs = [_json(p) for p in glob.glob(os.path.join(state, "chunks", f"{db}.t", "*.json"))]
    assert len(recs) == n_chunks and sum(1 for r in recs if r["rows"] == 0) > 0
    assert sum(r["rows"] for r in recs) == 21


@pytest.mark.mysql_by_default  # Spark's plans and logs
def test_no_password_in_plans_errors_logs_or_state(spark: Any, info: ServerInfo, profile: ConnectionProfile,
                                                   db: str, root: Any, tmp_path: Any,
                                                   caplog: pytest.LogCaptureFixture) -> None:
    root.cursor().execute("CREATE TABLE t (id INT PRIMARY KEY)")
    insert_rows(root, "t", ["id"], [(i,) for i in range(50)])
    secret = profile.password
    assert len(secret) >= 6
    mysql_cdc.register(spark, {"src": profile_url(profile)})
    state = str(tmp_path / "state")
    texts: list[str] = []
    sql = spark.sql(f"""SELECT * FROM mysql_cdc_snapshot(TABLE(SELECT * FROM mysql_cdc_chunks(source => 'src',
        tables => '{db}[.]t', chunk_size => 10)), source => 'src', table => '{db}.t', state_dir => '{state}')""")
    texts.append(_explain(sql))
    assert sql.count() == 50
    # a profile may name where its password is (here a file the server can read), never a query
    pw_file = tmp_path / "pw"
    pw_file.write_text(secret + "\n")
    mysql_cdc.register(spark, {"src": profile_url(profile), "byfile": f"mysql://{profile.user}@{profile.host}:"
                               f"{profile.port}?password-file={pw_file}"})
    ds = spark.read.format("mysql_cdc").option("source", "byfile").option("table", f"{db}.t").load()
    texts.append(_explain(ds))
    assert ds.count() == 50
    for bad in (f"{db}.missing", "nodb.t"):
        with pytest.raises(Exception) as e:
            spark.read.format("mysql_cdc").option("source", "src").option("table", bad).load().count()
        texts.append(str(e.value))
        assert "does not exist" in str(e.value) or "cannot see" in str(e.value)
    # options only a stream or mysql_cdc_binlog reads: refused, not silently ignored by a batch read
    for key, value in (("startup", "latest"), ("end", "binlog.000001:4"), ("max_rows_per_batch", "10"),
                       ("binlog_partitions", "2")):
        with pytest.raises(Exception, match=rf"option\(s\) {key} do nothing in a batch read.*readStream"):
            spark.read.format("mysql_cdc").option("source", "src").option("table", f"{db}.t").option(
                key, value).load().count()
    wrong = ConnectionProfile(profile.host, profile.port, profile.user, "Wrong-" + secret, 5)
    mysql_cdc.register(spark, {"bad": profile_url(wrong)})
    with pytest.raises(Exception) as e:
        spark.sql(f"SELECT * FROM mysql_cdc_chunks(source => 'bad', tables => '{db}[.]t')").collect()
    assert "wrong user or password" in str(e.value)
    texts.append(str(e.value))
    texts += [_text(p) for p in glob.glob(os.path.join(state, "**", "*.json"), recursive=True)]
    texts += [r.getMessage() for r in caplog.records]
    assert len(texts) > 6
    for t in texts:
        assert secret not in t
    with pytest.raises(Exception, match="option 'password' is not taken") as literal:  # refused, not echoed
        (spark.read.format("mysql_cdc").option("host", profile.host).option("port", profile.port)
         .option("user", profile.user).option("password", "Literal-" + secret[::-1]).option("table", f"{db}.t")
         .load().count())
    assert secret[::-1] not in str(literal.value)
    if is_connect(spark):
        logs = glob.glob(os.path.join(os.environ.get("MYSQL_CDC_CONNECT_LOG_DIR", "/nonexistent"), "*"))
        assert logs, "the Connect server's log files should be readable"
        for p in logs:
            assert secret not in _text(p), p
    # the event log (Spark Connect records each statement's text there): it holds the queries, not the secret
    events = os.environ.get("MYSQL_CDC_CONNECT_EVENT_DIR" if is_connect(spark) else "MYSQL_CDC_CLASSIC_EVENT_DIR")
    text = _event_log_text(events or "/nonexistent")
    assert text, "the event log should be written"
    assert f"{db}.t" in text
    assert secret not in text


def _explain(df: Any) -> str:
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        df.explain(True)
    text = buf.getvalue()
    assert "== Physical Plan ==" in text
    return text


def _event_log_text(folder: str) -> str:
    """Every event log file under ``folder`` (Spark 4 writes rolling logs as folders of files)."""
    return "".join(_text(p) for p in glob.glob(os.path.join(folder, "**", "*"), recursive=True)
                   if os.path.isfile(p))


def _text(path: str) -> str:
    with open(path, errors="replace") as f:
        return f.read()


def _json(path: str) -> Any:
    return json.loads(_text(path))


_CLUSTER_JOB = """
import sys
from pyspark.sql import SparkSession
import mysql_cdc

events, table = sys.argv[1], sys.argv[2]
spark = (SparkSession.builder.master("local[2]").appName("executor-env-profile")
         .config("spark.ui.enabled", "false").config("spark.driver.bindAddress", "127.0.0.1")
         .config("spark.driver.host", "127.0.0.1")
         .config("spark.eventLog.enabled", "true").config("spark.eventLog.dir", "file://" + events)
         .config("spark.eventLog.compress", "false")
         .config("spark.executorEnv.MYSQL_CDC_PROFILE_EV", sys.stdin.readline().strip())
         .config("spark.executorEnv.MYSQL_CDC_PASSWORD_EV", sys.stdin.readline().strip())
         .getOrCreate())
mysql_cdc.register(spark)
print(spark.read.format("mysql_cdc").option("source", "ev").option("table", table).load().count())
spark.stop()
"""


@pytest.mark.mysql_by_default  # Spark's event log
def test_a_profile_set_the_cluster_way_stays_out_of_the_event_log(classic_spark: Any, info: ServerInfo,
                                                                 profile: ConnectionProfile, db: str, root: Any,
                                                                 tmp_path: Any) -> None:
    """spark.executorEnv.MYSQL_CDC_PROFILE_<NAME> with the password in the URL was written to the event log
    (Spark redacts settings named like passwords, not that one); the password goes in
    spark.executorEnv.MYSQL_CDC_PASSWORD_<NAME>, which Spark redacts, and the URL holds none."""
    import subprocess
    import sys

    from tests.conftest import ROOT, _repo_env

    root.cursor().execute("CREATE TABLE t (id INT PRIMARY KEY)")
    insert_rows(root, "t", ["id"], [(i,) for i in range(7)])
    events = tmp_path / "events"
    events.mkdir()
    job = tmp_path / "job.py"
    job.write_text(_CLUSTER_JOB)
    url = f"mysql://{profile.user}@{profile.host}:{profile.port}"  # no password in it
    out = subprocess.run([sys.executable, str(job), str(events), f"{db}.t"], input=f"{url}\n{profile.password}\n",
                         env=_repo_env(True), cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.strip().splitlines()[-1] == "7"
    text = _event_log_text(str(events))
    assert '"Event":"SparkListenerEnvironmentUpdate"' in text  # plain JSON lines: a secret would be found
    assert "MYSQL_CDC_PASSWORD_EV" in text and url in text  # the settings are logged, the password redacted
    assert profile.password not in text
    # the one-URL form put the password in the event log (5 times): register() refuses it, saying the fix
    whole = f"mysql://{profile.user}:{profile.password}@{profile.host}:{profile.port}"
    refused = subprocess.run([sys.executable, str(job), str(tmp_path), f"{db}.t"], input=f"{whole}\n\n",
                             env=_repo_env(True), cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert refused.returncode != 0
    assert ("'spark.executorEnv.MYSQL_CDC_PROFILE_EV' holds a profile URL with its password" in refused.stderr
            and "'spark.executorEnv.MYSQL_CDC_PASSWORD_EV'" in refused.stderr), refused.stderr[-3000:]
    assert profile.password not in refused.stderr + refused.stdout
