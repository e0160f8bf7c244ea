"""The mirror and the stream on a real Spark standalone cluster whose two workers see nothing of the driver's
disk (:mod:`tests.cluster`): the state dir, the checkpoint and the mirror are the driver's alone, and the
package reaches the executors only as ``register`` ships it. Under writers, with kill -9 of one worker and of
the driver, every table ends equal to its source and no batch is applied twice; by default a stream's binlog
backlog is read by both workers at once, a live stream's small batch by one reader."""

from __future__ import annotations

import collections
import glob
import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from mysql_cdc.profiles import ConnectionProfile
from tests.cluster import StandaloneCluster
from tests.conftest import ROOT, _repo_env, wait_until
from tests.helpers import insert_rows, profile_url
from tests.s3 import S3Server
from tests.servers import ServerInfo
from tests.test_keeps_running import TABLES, Writers, _equal, _make, _source
from tests.test_streaming import _checkpoint_state, _ended, _tail
from tests.test_sync import _txns

pytestmark = pytest.mark.timeout(900)


@pytest.fixture(scope="module")
def hidden(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The driver's own folder: the workers see an empty tmpfs here."""
    folder = tmp_path_factory.mktemp("driver-only")
    (folder / "the-driver-wrote-this").write_text("x")
    return folder


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory, hidden: Path) -> Iterator[StandaloneCluster]:
    c = StandaloneCluster(tmp_path_factory.mktemp("cluster"), hidden)
    try:
        yield c.start()
    finally:
        c.stop()


def _cli(cluster: StandaloneCluster, profile: ConnectionProfile, args: list[str], log: Path,
         env_extra: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
    env = _repo_env(True)  # the driver's Python has the package; the workers' has not (tests.cluster)
    env.update(env_extra or {}, MYSQL_CDC_PROFILE_SRC=profile_url(profile))
    with open(log, "ab") as out:
        return subprocess.Popen([sys.executable, "-m", "mysql_cdc", *args, "--master", cluster.url,
                                 "--conf", "spark.executor.memory=1g", "--conf", "spark.task.maxFailures=8"],
                                cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)


def _stop(job: subprocess.Popen[bytes]) -> None:
    if job.poll() is None:
        os.killpg(job.pid, signal.SIGKILL)
        job.wait(60)


def _executor_logs(cluster: StandaloneCluster, i: int, app: str | None = None) -> list[Path]:
    return [p for p in cluster.executor_logs(i) if app is None or p.parent.parent.name == app]


def test_the_workers_see_nothing_of_the_drivers_disk(cluster: StandaloneCluster, hidden: Path) -> None:
    assert os.listdir(hidden)  # the driver's side
    assert [cluster.sees(i) for i in range(cluster.count)] == [""] * cluster.count


@pytest.mark.by_default_on("mariadb")  # where reads run and what they need, not the server (MariaDB: CI's lanes)
def test_a_sync_on_isolated_workers_under_writers_and_kill_9_of_a_worker_and_the_driver(
        cluster: StandaloneCluster, hidden: Path, info: ServerInfo, profile: ConnectionProfile, db: str, root: Any,
        tmp_path: Path) -> None:
    _make(root, rows=900)
    base = hidden / f"sync-{info.kind}-{db}"
    to, ck, state = str(base / "lake"), str(base / "ck"), str(base / "state")
    log = tmp_path / "sync.log"
    args = ["sync", "--source", "src", "--tables", f"{db}[.](a|b|c)", "--to", to, "--checkpoint", ck,
            "--state-dir", state, "--chunk-size", "100", "--max-chunks-per-batch", "4", "--interval", "0.5",
            "--log", str(tmp_path / "spark.log")]
    before = [len(cluster.executor_logs(i)) for i in range(cluster.count)]

    def batches(n: int, job: subprocess.Popen[bytes], what: str) -> None:
        wait_until(lambda: _checkpoint_state(ck)[0] >= n or job.poll() is not None, 300, what, 0.2)
        assert job.poll() is None, f"the sync stopped ({what}):\n{_tail(str(log))}"

    writers = Writers(info, db, seed=30).__enter__()
    try:
        job = _cli(cluster, profile, args, log)
        try:
            batches(3, job, "the snapshot's first batches")
            cluster.kill_worker(1)  # its tasks run again on the other worker
            batches(_checkpoint_state(ck)[0] + 3, job, "batches after a worker was killed")
            cluster.start_worker(1)
            _stop(job)  # kill -9 of the driver, mid-stream
            job = _cli(cluster, profile, args, log)
            wait_until(lambda: cluster.alive_workers() == cluster.count, 120, "the worker back", 0.5)
            batches(_checkpoint_state(ck)[0] + 2, job, "batches after the driver was killed")
            wait_until(lambda: _checkpoint_state(ck)[1] == "binlog" or job.poll() is not None, 300,
                       "the binlog phase, under writers", 0.2)
            batches(_checkpoint_state(ck)[0] + 2, job, "binlog batches")
            assert writers.commits > 50
            writers.__exit__()  # the source holds still: the mirror must come to equal it
            wait_until(lambda: _equal(info, db, to) or job.poll() is not None, 300, "the mirror equal to the source",
                       0.5)
            assert job.poll() is None, _tail(str(log))
        finally:
            _stop(job)
    finally:
        writers.__exit__()
    assert _equal(info, db, to)
    from mysql_cdc.ids import TableId
    from mysql_cdc.udtf.sync.mirror import table_path

    for t in TABLES:  # no micro-batch applied twice to any table
        versions = [v for _, v in _txns(table_path(to, TableId(db, t)))]
        assert versions and len(versions) == len(set(versions)), (t, versions)
    # both workers ran tasks of the sync, and the state dir is on the driver's disk alone
    assert all(len(cluster.executor_logs(i)) > before[i] for i in range(cluster.count))
    assert glob.glob(os.path.join(state, "chunks", "*", "*.json"))


# one server (CI time): what is tested is where the reads run and what they need, not server behaviour; the sync
# on isolated workers above runs on both with MYSQL_CDC_LONG=1
@pytest.mark.slow  # three runs on the cluster and a 40 MB backlog (3 minutes): MYSQL_CDC_LONG=1
@pytest.mark.parametrize("server", ["mysql"], indirect=True)
def test_a_stream_on_isolated_workers_spreads_a_binlog_backlog_over_both_by_default(
        cluster: StandaloneCluster, hidden: Path, classic_spark: Any, s3: S3Server, info: ServerInfo,
        profile: ConnectionProfile, db: str, root: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``binlog_partitions`` left at its default (0: the session's task slots, parts of at least 16 MiB): a
    backlog of 40 MB after a first run is read by two tasks at once; a live stream's small batch by one. The
    state dir is on the S3 server, which only the driver may reach (the workers have no credentials for it):
    a stream's executors need no state dir."""
    _make(root, rows=300)
    cur = root.cursor()
    cur.execute("CREATE TABLE w (id INT PRIMARY KEY, v INT NOT NULL, pad VARCHAR(1200) NOT NULL)")
    insert_rows(root, "w", ["id", "v", "pad"], [(i, i, f"{i:04d}" * 250) for i in range(2000)])
    base = hidden / f"follow-{info.kind}-{db}"
    out = str(tmp_path / "out")  # written by the executors: on storage they share (the test's own folder)
    ck, state = str(base / "ck"), f"s3a://lake/follow-{info.kind}-{db}/state"
    args = ["follow", "--source", "src", "--tables", f"{db}[.](a|b|c|w)", "--out", out, "--checkpoint", ck,
            "--state-dir", state, "--chunk-size", "1000", "--once", "--driver-host", "127.0.0.1",
            "--log", str(tmp_path / "spark.log"),
            "--conf", "spark.sql.streaming.fileSink.log.compactInterval=1000"]  # a log file per batch

    def run() -> int:
        """One run to the binlog's end; the batches it committed."""
        done = _checkpoint_state(ck)[0]
        job = _cli(cluster, profile, args, tmp_path / "follow.log", s3.env())
        _ended(job, str(tmp_path / "follow.log"), 300)
        return _checkpoint_state(ck)[0] - done

    def files_per_batch(first: int) -> list[int]:
        """Files of rows each batch from ``first`` on wrote (one per task that read rows)."""
        out_log = os.path.join(out, "_spark_metadata")
        counts = []
        for name in sorted((n for n in os.listdir(out_log) if n.isdigit() and int(n) >= first), key=int):
            with open(os.path.join(out_log, name)) as f:
                counts.append(sum(1 for line in f if line.startswith("{") and json.loads(line).get("size")))
        return counts

    def binlog_bytes() -> int:
        cur.execute("SHOW BINARY LOGS")
        return sum(int(r[1]) for r in cur.fetchall())

    assert run() > 0
    for t in TABLES:  # a small batch: one reader
        cur.execute(f"UPDATE {t} SET v = v + 1 WHERE v % 3 = 0")
    done = _checkpoint_state(ck)[0]
    assert run() == 1 and files_per_batch(done) == [1]
    start, i = binlog_bytes(), 0
    while binlog_bytes() - start < 40 << 20:  # a backlog: two parts of 16 MiB at least
        cur.execute("UPDATE w SET v = v + 1, pad = REVERSE(pad)")
        cur.execute(f"UPDATE {TABLES_CYCLE[i % 3]} SET v = v + 1")
        cur.execute("DELETE FROM a WHERE id = %s", (i,))
        i += 1
    done = _checkpoint_state(ck)[0]
    assert run() > 0
    assert max(files_per_batch(done)) == 2, files_per_batch(done)
    assert s3.files(f"follow-{info.kind}-{db}/state/offsets") and not os.path.exists(base / "state")
    for k, v in s3.env().items():  # the test reads the schemas the stream recorded there
        monkeypatch.setenv(k, v)
    for t in [*TABLES, "w"]:
        assert _applied(classic_spark, out, state, db, t) == _source_of(info, db, t), t


TABLES_CYCLE = sorted(TABLES)


def _source_of(info: ServerInfo, db: str, t: str) -> collections.Counter[tuple[Any, ...]]:
    return _source(info, db, t) if t in TABLES else _source_w(info, db)


def _source_w(info: ServerInfo, db: str) -> collections.Counter[tuple[Any, ...]]:
    conn = info.connect(root=True, database=db)
    cur = conn.cursor()
    cur.execute("SELECT id, v FROM w")
    out = collections.Counter(tuple(r) for r in cur.fetchall())
    conn.close()
    return out


def _applied(spark: Any, out: str, state: str, db: str, t: str) -> collections.Counter[tuple[Any, ...]]:
    """A table's rows from a stream's output: its snapshot rows, then its changes applied in binlog order."""
    import mysql_cdc
    from mysql_cdc.offsets import binlog_file_key

    keys = list(TABLES[t][1]) if t in TABLES else ["id"]
    rows = mysql_cdc.split(spark.read.parquet(out), state)[f"{db}.{t}"].select(
        *keys, "v", "__op", "__file", "__pos", "__row").collect()
    n = len(keys)
    table: dict[tuple[Any, ...], int] = {}
    snapshot = [r for r in rows if r[n + 1] == "r"]
    assert len({tuple(r[:n]) for r in snapshot}) == len(snapshot), f"{t}: a key came twice from the snapshot"
    for r in snapshot:
        table[tuple(r[:n])] = r[n]
    for r in sorted((r for r in rows if r[n + 1] != "r"), key=lambda r: (binlog_file_key(r[n + 2]), r[n + 3],
                                                                          r[n + 4])):
        if r[n + 1] in ("-U", "-D"):
            table.pop(tuple(r[:n]), None)
        else:
            table[tuple(r[:n])] = r[n]
    return collections.Counter((*k, v) for k, v in table.items())


@pytest.mark.parametrize(("env", "said"), [
    ({"MYSQL_CDC_MASTER": "spark://m:7077"}, "needs MYSQL_CDC_DRIVER_HOST: the address of this server that the "
                                            "cluster's executors reach"),
    ({"MYSQL_CDC_MASTER": "local[2]"}, "is local mode: leave it unset and set MYSQL_CDC_CORES"),
    ({"MYSQL_CDC_DRIVER_HOST": "10.0.0.5"}, "MYSQL_CDC_DRIVER_HOST is for a cluster (MYSQL_CDC_MASTER)"),
    ({"MYSQL_CDC_MASTER": "spark://m:7077", "MYSQL_CDC_DRIVER_HOST": "10.0.0.5", "MYSQL_CDC_UI": "yes"},
     "MYSQL_CDC_UI must be true or false, got 'yes'")])
def test_the_connect_launcher_takes_a_cluster_and_its_driver_host_or_says_what_is_missing(
        env: dict[str, str], said: str) -> None:
    """The image's launcher (docker/start-connect.sh) pinned local mode and spark.driver.host=127.0.0.1, which
    executors on other hosts cannot reach; MYSQL_CDC_MASTER and MYSQL_CDC_DRIVER_HOST place it on a cluster.
    A setting that cannot work stops it with one line before Spark starts (run as an unprivileged user, as the
    image runs it)."""
    script = os.path.join(ROOT, "docker", "start-connect.sh")
    r = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "bash", script],
                       env={"PATH": os.environ["PATH"], **env}, capture_output=True, text=True, timeout=30)
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 64 and len(lines) == 1 and lines[0].startswith("start-connect.sh: "), r.stderr
    assert said in lines[0], lines[0]


SQL_ON_THE_CLUSTER = """
import json, sys
from pyspark.sql import SparkSession
import mysql_cdc

master, db = sys.argv[1:3]
spark = (SparkSession.builder.master(master).config("spark.executor.memory", "1g")
         .config("spark.driver.host", "127.0.0.1").config("spark.driver.bindAddress", "127.0.0.1").getOrCreate())
mysql_cdc.register(spark, {"src": sys.stdin.readline().strip()})
chunks = spark.sql(f"SELECT count(*) AS c FROM mysql_cdc_chunks(source => 'src', tables => '{db}[.]a', "
                   "chunk_size => 100)").collect()[0]["c"]
rows = spark.sql(f"SELECT count(*) AS c FROM mysql_cdc_snapshot(TABLE(SELECT * FROM mysql_cdc_chunks("
                 f"source => 'src', tables => '{db}[.]a', chunk_size => 100)), source => 'src', table => '{db}.a')"
                 ).collect()[0]["c"]
read = spark.read.format("mysql_cdc").option("source", "src").option("table", db + ".a").load().count()
hosts = spark.sparkContext.parallelize(range(8), 8).map(lambda _: __import__("os").environ.get("HOME")).collect()
print(json.dumps({"chunks": chunks, "rows": rows, "read": read, "homes": sorted(set(hosts))}))
spark.stop()
"""


@pytest.mark.mysql_by_default  # where reads run and what they need, not the server
def test_the_sql_functions_and_the_data_source_log_in_on_workers_that_have_no_profile(
        cluster: StandaloneCluster, profile: ConnectionProfile, db: str, root: Any, tmp_path: Path) -> None:
    """A profile registered in the driver: its password reaches the workers (whose environment has no profile)
    as the session's private file, for the SQL functions (resolved on executors) as for the data source; never
    inside what Spark pickles (tests/test_secrets.py). docs/DESIGN.md §8."""
    _make(root, rows=450)
    script = tmp_path / "sql.py"
    script.write_text(SQL_ON_THE_CLUSTER)
    out = subprocess.run([sys.executable, str(script), cluster.url, db], input=profile_url(profile) + "\n",
                         env=_repo_env(True), cwd=str(tmp_path), capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert (got["chunks"], got["rows"], got["read"]) == (5, 450, 450), got
    assert len(got["homes"]) == cluster.count  # both workers ran tasks, each its own HOME
    assert profile.password not in out.stderr
