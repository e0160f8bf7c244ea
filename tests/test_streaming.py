"""Structured Streaming on real servers: ``readStream.format("mysql_cdc")`` takes the snapshot, then follows
the binlog; writers change the table all along; the parquet sink's output, applied in order, equals the
table. Also after kill -9 of the driver, mid-snapshot and mid-binlog, and a restart from the same checkpoint
(kill -9 of a Spark Connect server: tests/test_multi_table.py, under a stream of thirteen tables)."""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import signal
import subprocess
import sys
import threading
from typing import Any

import pytest

from mysql_cdc.ids import TableId
from mysql_cdc.offsets import binlog_file_key
from mysql_cdc.profiles import ConnectionProfile
from tests.conftest import ROOT, _repo_env, wait_until
from tests.helpers import counted, give_server_profile, insert_rows, profile_url
from tests.servers import ServerInfo
from tests.stream_job import start as start_stream


class Churn:
    """A writer thread changing table ``t`` until stopped: value updates, keys moved between chunks,
    deletes, re-inserts of deleted keys, new keys, multi-row updates, binlog rotations."""

    pause = 0.005  # seconds between two writes

    def __init__(self, info: ServerInfo, db: str, seed: int) -> None:
        self.conn = info.connect(root=True, database=db)
        self.conn.autocommit(True)
        self.rng = random.Random(seed)
        self.stop_event = threading.Event()
        self.ops = 0
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Churn:
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    def stop(self) -> None:
        self.stop_event.set()
        self.thread.join(60)
        assert not self.thread.is_alive()
        if self.error is not None:
            raise self.error

    def _run(self) -> None:
        cur = self.conn.cursor()
        try:
            while not self.stop_event.is_set():
                self.step(cur)
                self.ops += 1
                self.stop_event.wait(self.pause)
        except BaseException as e:  # surfaced by stop()
            self.error = e
        finally:
            cur.close()

    def step(self, cur: Any) -> None:
        r = self.rng
        k = r.randrange(1, 4200)
        op = r.random()
        if op < 0.35:
            cur.execute("UPDATE t SET v = v + 1 WHERE id = %s", (k,))
        elif op < 0.55:
            cur.execute("UPDATE IGNORE t SET id = %s, v = v + 7 WHERE id = %s", (r.randrange(1, 4200), k))
        elif op < 0.7:
            cur.execute("DELETE FROM t WHERE id = %s", (k,))
        elif op < 0.9:
            cur.execute("INSERT IGNORE INTO t (id, v) VALUES (%s, %s)", (k, r.randrange(10**6)))
        elif op < 0.99:
            cur.execute("UPDATE t SET v = v + 3 WHERE id BETWEEN %s AND %s", (k, k + 20))
        else:
            cur.execute("FLUSH BINARY LOGS")


def _make_table(root: Any) -> None:
    root.cursor().execute("CREATE TABLE t (id INT PRIMARY KEY, v INT NOT NULL)")
    insert_rows(root, "t", ["id", "v"], [(k, k) for k in range(2, 4001, 2)])


def _source(info: ServerInfo, db: str) -> dict[int, int]:
    conn = info.connect(root=True, database=db)
    cur = conn.cursor()
    cur.execute("SELECT id, v FROM t")
    out = {int(k): int(v) for k, v in cur.fetchall()}
    conn.close()
    return out


def _mirror(spark: Any, out: str) -> tuple[dict[int, int], list[tuple[Any, ...]]]:
    """Apply the sink's committed output: snapshot rows, then changes in binlog order."""
    rows = [tuple(r) for r in spark.read.parquet(out).select("id", "v", "__op", "__file", "__pos", "__row",
                                                              "__chunk_id").collect()]
    snap = [r for r in rows if r[2] == "r"]
    changes = sorted((r for r in rows if r[2] != "r"), key=lambda r: (binlog_file_key(r[3]), r[4], r[5]))
    mirror: dict[int, int] = {}
    for k, v, *_ in snap:
        assert k not in mirror, f"key {k} came twice from the snapshot"
        mirror[k] = v
    for k, v, op, *_ in changes:
        if op in ("-U", "-D"):
            mirror.pop(k, None)
        else:
            mirror[k] = v
    return mirror, changes


def _check(spark: Any, out: str, info: ServerInfo, db: str) -> list[tuple[Any, ...]]:
    mirror, changes = _mirror(spark, out)
    source = _source(info, db)
    diff = {k: (mirror.get(k), source.get(k)) for k in set(mirror) | set(source) if mirror.get(k) != source.get(k)}
    if diff:  # what the output holds for a few of the wrong keys, to tell a lost change from a wrong decision
        some = sorted(diff)[:5]
        rows = spark.read.parquet(out).where(spark.read.parquet(out)["id"].isin(some)).collect()
        raise AssertionError(f"mirror != source on {len(diff)} keys; (mirror, source): "
                             f"{[(k, diff[k]) for k in some]}; output rows of those keys: {[tuple(r) for r in rows]}")
    positions = [(c[3], c[4], c[5]) for c in changes]
    assert len(positions) == len(set(positions)), "a change came out twice"
    return changes


def _batch_files(out: str, batch: int) -> list[str]:
    """The files the parquet sink committed for a batch (its log in ``_spark_metadata``): one per Spark task
    that wrote rows."""
    with open(os.path.join(out, "_spark_metadata", str(batch))) as f:
        return [json.loads(line)["path"] for line in f.read().splitlines()[1:] if line.strip()]


def _checkpoint_state(ck: str) -> tuple[int, str | None]:
    """(committed batches, phase of the last planned offset)."""
    commits = [n for n in os.listdir(os.path.join(ck, "commits"))] if os.path.isdir(os.path.join(ck, "commits")) \
        else []
    committed = len([n for n in commits if n.isdigit()])
    offsets_dir = os.path.join(ck, "offsets")
    if not os.path.isdir(offsets_dir):
        return committed, None
    names = sorted((n for n in os.listdir(offsets_dir) if n.isdigit()), key=int)
    if not names:
        return committed, None
    with open(os.path.join(offsets_dir, names[-1])) as f:
        last = f.read().strip().splitlines()[-1]
    return committed, json.loads(last).get("phase")


def _remote(url: str) -> Any:
    from pyspark.sql.connect.session import SparkSession as RemoteSparkSession

    return RemoteSparkSession.builder.remote(url).create()


def _session(kind: str, request: pytest.FixtureRequest) -> tuple[Any, Any]:
    """(session, the remote session to stop afterwards or None): the classic one, or a new Connect session on
    the server that has the plugin installed."""
    if kind == "classic":
        return request.getfixturevalue("classic_spark"), None
    server = request.getfixturevalue("plugin_connect")
    give_server_profile(server.env["MYSQL_CDC_PROFILES_FILE"], "src", request.getfixturevalue("profile"))
    remote = _remote(server.url)
    return remote, remote


@pytest.mark.mysql_by_default  # the stream's side; readers: tests/test_binlog.py
@pytest.mark.parametrize("session", ["classic", "connect"])
def test_stream_snapshot_then_binlog_mirror_equals_source(
        session: str, request: pytest.FixtureRequest, info: ServerInfo, profile: ConnectionProfile, db: str,
        root: Any, tmp_path: Any) -> None:
    _make_table(root)
    spark, remote = _session(session, request)
    try:
        args = (profile_url(profile), f"{db}.t", str(tmp_path / "state"), str(tmp_path / "ck"), str(tmp_path / "out"))
        with Churn(info, db, seed=1) as churn:
            q = start_stream(spark, *args, "availableNow", max_chunks=3, chunk_size=200)
            assert q.awaitTermination(300), "the availableNow query did not end"
            assert q.exception() is None
            wait_until(lambda: churn.ops > 50, 60, "writes during the stream")
        # writes stopped: a backlog (changes between 2 MB of rows of a table not captured), then one more
        # availableNow run from the same checkpoint catches up to the end, its range read by two tasks at once
        cur = root.cursor()
        cur.execute("CREATE TABLE pad (id INT AUTO_INCREMENT PRIMARY KEY, b LONGBLOB)")
        for i in range(8):
            cur.execute("UPDATE t SET v = v + 1 WHERE id BETWEEN %s AND %s", (500 * i, 500 * i + 40))
            cur.execute("INSERT INTO pad (b) VALUES (REPEAT('x', 262144))")
        q = start_stream(spark, *args, "availableNow", max_chunks=3, chunk_size=200, binlog_partitions=2)
        assert q.awaitTermination(300) and q.exception() is None
        changes = _check(spark, str(tmp_path / "out"), info, db)
        assert changes, "no change came from the binlog phase"
        committed, phase = _checkpoint_state(str(tmp_path / "ck"))
        assert phase == "binlog" and committed >= 4  # ten chunks, three per batch, then the binlog
        assert len(_batch_files(str(tmp_path / "out"), committed - 1)) == 2  # the backlog's two parts
    finally:
        if remote is not None:
            remote.stop()


def _tail(log: str) -> str:
    with open(log, errors="replace") as f:
        return f.read()[-3000:]


def _kill(p: subprocess.Popen[bytes]) -> None:
    os.killpg(p.pid, signal.SIGKILL)
    p.wait(60)


def _ended(p: subprocess.Popen[bytes], log: str, seconds: float) -> None:
    """A job that is to end by itself (``--once``) ended within ``seconds`` with status 0; else the test fails
    with its log's tail, and a job still running is killed (a bare ``p.wait`` raised TimeoutExpired without it)."""
    try:
        rc = p.wait(seconds)
    except subprocess.TimeoutExpired:
        _kill(p)
        raise AssertionError(f"the job had not ended after {seconds} s; its log's tail:\n{_tail(log)}") from None
    assert rc == 0, f"the job ended with status {rc}; its log's tail:\n{_tail(log)}"


def test_stream_offsets_move_while_the_table_is_idle_and_max_rows_bounds_a_batch(
        profile: ConnectionProfile, db: str, root: Any, tmp_path: Any) -> None:
    from mysql_cdc.options import parse_options
    from mysql_cdc.udtf.spark.stream_reader import MysqlCdcStreamReader

    root.cursor().execute("CREATE TABLE t (id INT PRIMARY KEY, v INT NOT NULL)")
    root.cursor().execute("CREATE TABLE other (id INT AUTO_INCREMENT PRIMARY KEY, v INT)")
    insert_rows(root, "t", ["id", "v"], [(k, k) for k in range(1, 301)])
    counted(root, "t")
    opts = parse_options({"table": f"{db}.t", "state_dir": str(tmp_path / "state"), "chunk_size": 100})
    reader = MysqlCdcStreamReader(profile, opts)

    def rows(start: dict[str, Any], end: dict[str, Any]) -> int:
        return sum(b.num_rows for p in reader.partitions(start, end) for b in reader.read(p))

    off = reader.initialOffset()
    assert off["phase"] == "snapshot" and off["chunks"] >= 3
    snap_end = reader.next_offset(off, 0)
    assert snap_end["chunk"] == snap_end["chunks"] and rows(off, snap_end) == 300
    first = reader.next_offset(snap_end, 0)
    assert first["phase"] == "binlog"
    assert rows(snap_end, first) == 0
    cur = root.cursor()
    for i in range(3):
        cur.execute("INSERT INTO other (v) VALUES (%s)", (i,))  # only a table that is not captured changes
    idle = reader.next_offset(first, 0)
    assert (binlog_file_key(idle["file"]), idle["pos"]) > (binlog_file_key(first["file"]), first["pos"])
    assert rows(first, idle) == 0
    reader.commit(idle)
    assert reader.store.offset(f"{db}.t") == idle
    for k in range(1, 11):
        cur.execute("UPDATE t SET v = v + 1 WHERE id = %s", (k,))  # two change rows each
    bounded = reader.next_offset(idle, 4)
    assert rows(idle, bounded) == 4
    rest = reader.next_offset(bounded, 0)
    assert rows(bounded, rest) == 16
    assert reader.next_offset(rest, 0) == rest  # nothing new: the same offset


def test_snapshot_batches_are_bounded_by_rows_and_bytes_too(profile: ConnectionProfile, db: str, root: Any,
                                                             tmp_path: Any) -> None:
    """max_rows_per_batch and max_bytes_per_batch bound the snapshot's micro-batches as they bound the binlog's
    (a sync's 1.9 M-row first batch ran its driver out of memory): chunks are planned no larger, and a batch
    takes as many whole chunks as fit; the binlog's batches end at the transaction that passes the bytes."""
    from mysql_cdc.options import parse_options
    from mysql_cdc.udtf.spark.stream_reader import MysqlCdcStreamReader

    root.cursor().execute("CREATE TABLE t (id INT PRIMARY KEY, v INT NOT NULL, pad VARCHAR(200) NOT NULL)")
    insert_rows(root, "t", ["id", "v", "pad"], [(k, k, "p" * 150) for k in range(1, 3001)])
    root.cursor().execute("ANALYZE TABLE t")
    for bound, key in ((("max_rows_per_batch", "700"),), "rows"), ((("max_bytes_per_batch", str(60_000)),), "bytes"):
        opts = parse_options({"table": f"{db}.t", "state_dir": str(tmp_path / key), "max_chunks_per_batch": "50",
                              **dict(bound)})
        reader = MysqlCdcStreamReader(profile, opts)
        off = reader.initialOffset()
        sizes = reader.store.plan_sizes(TableId(db, "t"))
        assert sizes is not None and sizes[1] > 150
        rows_per_chunk = sizes[0]
        assert rows_per_chunk <= (700 if key == "rows" else 60_000 // sizes[1])
        counts = []
        while off["phase"] == "snapshot" and off["chunk"] < off["chunks"]:
            nxt = reader.next_offset(off, int(dict(bound).get("max_rows_per_batch", 0)))
            counts.append(sum(b.num_rows for p in reader.partitions(off, nxt) for b in reader.read(p)))
            off = nxt
        assert sum(counts) == 3000 and len(counts) >= 3, counts
        # by planned sizes, so within a chunk's spread of the bound (unbounded, one batch would take all 3,000)
        limit = 1.5 * (700 if key == "rows" else 60_000 // sizes[1])
        assert max(counts) <= limit, (key, counts, sizes)
    # the binlog (the last reader's: max_bytes_per_batch 60,000): a batch ends at the transaction that passes it
    first = reader.next_offset(off, 0)
    assert first["phase"] == "binlog"
    cur = root.cursor()
    for k in range(1, 201):  # 200 transactions of about 700 bytes
        cur.execute("UPDATE t SET pad = %s WHERE id = %s", ("q" * 200, k))
    batches, start = [], first
    while (nxt := reader.next_offset(start, 0)) != start:
        batches.append(sum(b.num_rows for p in reader.partitions(start, nxt) for b in reader.read(p)))
        start = nxt
    assert sum(batches) == 400 and len(batches) >= 2 and max(batches) < 400, batches


@pytest.mark.parametrize("server", ["mysql"], indirect=True)  # the CLI's follow: on MariaDB, tests/test_multi_table.py
def test_cli_follow_once_then_again_mirrors_the_table(classic_spark: Any, info: ServerInfo,
                                                      profile: ConnectionProfile, db: str, root: Any,
                                                      tmp_path: Any) -> None:
    _make_table(root)
    env = _repo_env(True)
    env["MYSQL_CDC_PROFILE_FOLLOW"] = profile_url(profile)
    out, state = str(tmp_path / "out"), str(tmp_path / "state")
    cmd = [sys.executable, "-m", "mysql_cdc", "follow", "--source", "follow", "--table", f"{db}.t", "--out", out,
           "--checkpoint", str(tmp_path / "ck"), "--state-dir", state, "--chunk-size", "500", "--once",
           "--master", "local[2]"]
    first = subprocess.run(cmd, env=env, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert first.returncode == 0, first.stderr[-3000:]
    assert "batch 0:" in first.stdout and profile.password not in first.stdout + first.stderr
    cur = root.cursor()
    cur.execute("UPDATE t SET id = 5001 WHERE id = 2")
    cur.execute("DELETE FROM t WHERE id = 400")
    again = subprocess.run(cmd, env=env, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, again.stderr[-3000:]
    changes = _check(classic_spark, out, info, db)
    assert [c[2] for c in changes] == ["-U", "+U", "-D"]
    status = subprocess.run([sys.executable, "-m", "mysql_cdc", "status", "--state-dir", state, "--table",
                             f"{db}.t"], env=env, cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert re.search(r"\d+ chunks recorded, 2000 rows", status.stdout) and "'phase': 'binlog'" in status.stdout


@pytest.mark.parametrize("server", ["mysql"], indirect=True)  # what the CLI prints, not server behaviour: the
# CLI's follow and snapshot are tested on both servers by the cases around this one (on MySQL, whose lane of the
# CI's run ends before MariaDB's since verify under writers runs on MariaDB alone)
def test_cli_progress_one_line_errors_and_existing_output(classic_spark: Any, info: ServerInfo,
                                                          profile: ConnectionProfile, db: str, root: Any,
                                                          tmp_path: Any) -> None:
    """What a person at a terminal sees: progress (chunks done / total, rows/s, binlog lag), ordinary errors
    in one line instead of a Spark traceback, an existing --out refused unless --replace."""
    _make_table(root)
    env = _repo_env(True)
    env["MYSQL_CDC_PROFILE_CLI"] = profile_url(profile)

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "mysql_cdc", *args], env=env, cwd=ROOT, capture_output=True,
                              text=True, timeout=300)

    follow = ["follow", "--source", "cli", "--table", f"{db}.t", "--out", str(tmp_path / "changes"), "--checkpoint",
              str(tmp_path / "ck"), "--state-dir", str(tmp_path / "state"), "--chunk-size", "500",
              "--max-chunks-per-batch", "2", "--once", "--master", "local[2]"]
    first = cli(*follow)
    assert first.returncode == 0, first.stderr[-3000:]
    done = [(int(k), int(n)) for k, n in re.findall(r"snapshot chunks (\d+)/(\d+)", first.stdout)]
    assert len(done) >= 2 and done[0][0] == 2 and done[-1][0] == done[-1][1] >= 4, first.stdout
    assert re.search(r"rows \([\d,]+ rows/s\), binlog \S+:\d+, binlog lag [\d,]+ bytes", first.stdout), first.stdout
    root.cursor().execute("ALTER TABLE t ADD COLUMN c INT")
    stopped = cli(*follow)
    assert stopped.returncode == 2  # an error of ours, with its fix
    assert re.match(r"mysql-cdc: the stream stopped at .+?: SchemaChangedError: table",
                    stopped.stderr.strip().splitlines()[-1]), stopped.stderr[-3000:]
    assert len(stopped.stderr.strip().splitlines()) == 1, stopped.stderr[-3000:]  # Spark's output is in its log
    out = str(tmp_path / "snap")
    snap = ["snapshot", "--source", "cli", "--table", f"{db}.t", "--out", out, "--master", "local[2]"]
    made = cli(*snap)
    assert made.returncode == 0 and re.search(r"2000 rows written to .* rows/s\)", made.stdout), made.stderr[-3000:]
    again = cli(*snap)
    assert again.returncode == 2 and again.stderr.strip() == (
        f"mysql-cdc: ConfigError: --out {out!r} exists already; give a new path, or --replace to overwrite it")
    assert cli(*snap, "--replace").returncode == 0
    missing = cli("snapshot", "--source", "cli", "--table", f"{db}.nosuch", "--out", str(tmp_path / "x"),
                  "--master", "local[2]")
    assert missing.returncode == 2
    assert missing.stderr.strip().splitlines() == [
        f"mysql-cdc: TableError: table '{db}.nosuch' does not exist or the capture user cannot see its columns"]


def test_a_failed_snapshot_write_leaves_no_output_behind(classic_spark: Any, tmp_path: Any) -> None:
    """A task that fails mid-write (here a UDF; on a cluster, a lost executor or a missing package) left an
    empty --out, and the same command then refused it as existing. What was there before is kept."""
    from pyspark.sql.functions import udf

    from mysql_cdc.cli import write_output

    @udf("long")
    def fails_at_7(x: int) -> int:
        if x == 7:
            raise ValueError("a task fails")
        return x

    bad = classic_spark.range(10).select(fails_at_7("id").alias("v"))
    out = str(tmp_path / "out")
    with pytest.raises(Exception, match="a task fails"):
        write_output(classic_spark, bad, out, "parquet", False)
    assert not os.path.exists(out)
    write_output(classic_spark, classic_spark.range(3), out, "parquet", False)
    with pytest.raises(Exception, match="a task fails"):
        write_output(classic_spark, bad, out, "parquet", True)
    assert os.path.isdir(out)  # given with --replace: Spark's to overwrite, ours never to remove


def test_cli_every_option_has_help() -> None:
    from mysql_cdc.cli import build_parser

    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    bare = [f"{name} {'/'.join(a.option_strings)}" for name, p in sub.choices.items() for a in p._actions
            if a.option_strings and not a.help]
    assert bare == []
    assert set(sub.choices) == {"tables", "plan", "snapshot", "follow", "status", "sync", "verify", "resnapshot"}


# each session on one server (the stop is the driver's, the same on both): the CI's time goes to the servers
@pytest.mark.parametrize(("session", "server"), [("classic", "mysql"), ("connect", "mariadb")], indirect=["server"])
@pytest.mark.parametrize("max_rows", [0, 2])
def test_changes_just_before_a_ddl_are_delivered_before_the_stream_stops(
        session: str, max_rows: int, request: pytest.FixtureRequest, info: ServerInfo, profile: ConnectionProfile,
        db: str, root: Any, tmp_path: Any) -> None:
    """Changes committed just before a DDL of the table, in the same micro-batch, were never delivered: the
    driver's boundary scan (with max_rows_per_batch) or the executor's read raised, and Spark dropped the whole
    batch, though the error said they were. A batch now ends at the DDL, and the next one stops the stream with
    the same clear error, also after a restart from the checkpoint."""
    _make_table(root)
    spark, remote = _session(session, request)
    out = str(tmp_path / "out")
    args = (profile_url(profile), f"{db}.t", str(tmp_path / "state"), str(tmp_path / "ck"), out)
    extra: dict[str, Any] = {"schema_changes": "stop", **({"max_rows_per_batch": max_rows} if max_rows else {})}
    try:
        q = start_stream(spark, *args, "availableNow", max_chunks=4, chunk_size=500, **extra)
        assert q.awaitTermination(300) and q.exception() is None
        cur = root.cursor()
        cur.execute("INSERT INTO t VALUES (5001, 1)")
        cur.execute("UPDATE t SET v = -2 WHERE id = 2")
        cur.execute("DELETE FROM t WHERE id = 4")
        cur.execute("ALTER TABLE t ADD COLUMN c INT")
        cur.execute("INSERT INTO t VALUES (5003, 3, 3)")
        errors = []
        for _ in range(2):  # the run that meets the DDL, then a restart from the same checkpoint
            q = start_stream(spark, *args, "availableNow", max_chunks=4, chunk_size=500, **extra)
            try:  # awaitTermination raises the query's exception once it ended with one
                ended = q.awaitTermination(300)
                failure: Any = q.exception()
            except Exception as e:
                ended, failure = True, e
            assert ended, "the availableNow query did not end"
            assert failure is not None, "the stream went past the DDL"
            text = str(failure)
            assert "SchemaChangedError" in text and "ALTER TABLE t ADD COLUMN c INT" in text, text[:3000]
            errors.append(re.search(r"table '[^']+' changed at \S+", text))
        assert errors[0] is not None and errors[1] is not None and errors[0].group(0) == errors[1].group(0)
        rows = [tuple(r) for r in spark.read.parquet(out).where("__op != 'r'").select("__op", "id", "v").collect()]
        assert sorted(rows) == sorted([("+I", 5001, 1), ("-U", 2, 2), ("+U", 2, -2), ("-D", 4, 4)])
        if max_rows == 0:  # a snapshot with this state_dir would read today's columns as the recorded ones: refused
            with pytest.raises(Exception, match="was planned with another schema"):
                (spark.read.format("mysql_cdc").option("source", "src").option("table", f"{db}.t")
                 .option("state_dir", str(tmp_path / "state")).load().count())
    finally:
        if remote is not None:
            remote.stop()


@pytest.mark.parametrize(("session", "server"), [("classic", "mariadb"), ("connect", "mysql")], indirect=["server"])
def test_a_single_table_stream_follows_a_ddl_by_a_restart_without_a_new_snapshot(
        session: str, request: pytest.FixtureRequest, info: ServerInfo, profile: ConnectionProfile, db: str,
        root: Any, tmp_path: Any) -> None:
    """schema_changes follow (the default) on a read of one table: a DDL that changes its output columns stops
    the stream with an error that says to restart; the restart goes on from the checkpoint with the new columns,
    no snapshot again, no change lost or doubled. A DDL that leaves the columns' types (a longer VARCHAR, an
    index) does not stop it; one that rewrites stored values stops it for good with the reason."""
    root.cursor().execute("CREATE TABLE t (id INT PRIMARY KEY, v INT NOT NULL, s VARCHAR(10))")
    insert_rows(root, "t", ["id", "v", "s"], [(k, k, f"s{k}") for k in range(1, 201)])
    spark, remote = _session(session, request)
    out = str(tmp_path / "out")
    args = (profile_url(profile), f"{db}.t", str(tmp_path / "state"), str(tmp_path / "ck"), out)

    def run() -> str | None:
        q = start_stream(spark, *args, "availableNow", max_chunks=4, chunk_size=50)
        try:
            assert q.awaitTermination(300), "the availableNow query did not end"
            failure: Any = q.exception()
        except Exception as e:
            failure = e
        return None if failure is None else str(failure)

    try:
        assert run() is None
        cur = root.cursor()
        cur.execute("UPDATE t SET v = -1 WHERE id = 1")
        cur.execute("ALTER TABLE t MODIFY s VARCHAR(50)")  # the output's columns stay: followed, no stop
        cur.execute("CREATE INDEX t_v ON t (v)")
        cur.execute("UPDATE t SET s = 'longer than ten' WHERE id = 2")
        assert run() is None
        cur.execute("ALTER TABLE t ADD COLUMN c INT")
        cur.execute("UPDATE t SET v = -3, c = 30 WHERE id = 3")
        failure = run()
        assert failure is not None and "SchemaChangedError" in failure and "restart the query" in failure, failure
        assert run() is None  # the restart goes on with the new columns
        cur.execute("ALTER TABLE t ADD COLUMN d INT NOT NULL DEFAULT 4")  # fills stored rows: stops for good
        for _ in range(2):
            failure = run()
            assert failure is not None and "must be snapshotted again" in failure and "added with a value" in \
                failure, failure
        data = spark.read.option("mergeSchema", "true").parquet(out)
        assert data.where("__op = 'r'").count() == 200  # read once: no snapshot again
        if session == "classic":  # a column dropped while the snapshot is read: a clear stop, not an SQL error
            cur.execute("CREATE TABLE u (id INT PRIMARY KEY, v INT NOT NULL, s VARCHAR(10))")
            insert_rows(root, "u", ["id", "v", "s"], [(k, k, "x") for k in range(1, 401)])
            ck2 = str(tmp_path / "ck2")
            q = start_stream(spark, profile_url(profile), f"{db}.u", str(tmp_path / "state2"), ck2,
                             str(tmp_path / "out2"), "processing", max_chunks=1, chunk_size=20)
            wait_until(lambda: _checkpoint_state(ck2)[0] >= 1 or not q.isActive, 120, "a first batch")
            cur.execute("ALTER TABLE u DROP COLUMN s")
            with pytest.raises(Exception, match="changed while its snapshot was read"):
                q.awaitTermination(120)
                raise AssertionError(f"the stream went on: {q.isActive}")
        rows = sorted(tuple(r) for r in data.where("__op = '+U'").select("id", "v", "s", "c").collect())
        assert rows == [(1, -1, "s1", None), (2, 2, "longer than ten", None), (3, -3, "s3", 30)], rows
    finally:
        if remote is not None:
            remote.stop()

