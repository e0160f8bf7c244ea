"""A sync that keeps running (real servers, the real CLI in its own process, writers all along): the server
restarted, frozen past the read timeout, and the capture user's password rotated, each while the mirror runs;
then the mirror equals the source, nothing lost or doubled. A server gone for longer than
``--reconnect-timeout`` stops the job with one line."""

from __future__ import annotations

import collections
import contextlib
import functools
import os
import random
import signal
import subprocess
import sys
import threading
from typing import Any

import pymysql
import pytest

from mysql_cdc.ids import TableId
from tests.conftest import ROOT, _repo_env, wait_until
from tests.helpers import counted, insert_rows, statements_alone
from tests.servers import ServerInfo, ServerProcess
from tests.test_streaming import _checkpoint_state, _tail

deltalake = pytest.importorskip("deltalake")  # installed by scripts/setup.sh (extra delta): never skipped in CI

TABLES = {"a": ("id INT", ("id",)), "b": ("k VARCHAR(12)", ("k",)), "c": ("x INT, y INT", ("x", "y"))}
ROT_USER = "cdc_rot"  # a user of this module's own: its password is rotated here, the shared one never


def _key(t: str, i: int) -> tuple[Any, ...]:
    return {"a": (i,), "b": (f"k{i:05d}",), "c": (i % 7, i)}[t]


def _make(root: Any, rows: int = 400) -> None:
    for t, (cols, key) in TABLES.items():
        root.cursor().execute(f"CREATE TABLE {t} ({cols}, v INT NOT NULL, PRIMARY KEY ({', '.join(key)}))")
        insert_rows(root, t, [*key, "v"], [(*_key(t, i), i) for i in range(rows)])
    counted(root, *TABLES)  # tests count its chunks, which follow the row estimate


class Writers:
    """Small transactions on every table until stopped, through server restarts and freezes: a write that fails
    waits and connects again (what it committed is what the source holds; the mirror is compared with that)."""

    def __init__(self, info: ServerInfo, db: str, seed: int) -> None:
        self.info, self.db, self.rng = info, db, random.Random(seed)
        self.stop_event = threading.Event()
        self.commits = 0
        self.thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Writers:
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop_event.set()
        self.thread.join(120)
        assert not self.thread.is_alive()

    def _run(self) -> None:
        conn = None
        while not self.stop_event.is_set():
            try:
                if conn is None:
                    conn = self.info.connect(root=True, database=self.db)
                    conn.autocommit(False)
                cur = conn.cursor()
                t = self.rng.choice(list(TABLES))
                keys = TABLES[t][1]
                k = self.rng.randrange(0, 600)
                where = " AND ".join(f"{c} = %s" for c in keys)
                op = self.rng.random()
                if op < 0.5:
                    cur.execute(f"UPDATE {t} SET v = v + 1 WHERE {where}", _key(t, k))
                elif op < 0.7:
                    cur.execute(f"DELETE FROM {t} WHERE {where}", _key(t, k))
                else:
                    cur.execute(f"INSERT IGNORE INTO {t} ({', '.join(keys)}, v) VALUES "
                                f"({', '.join(['%s'] * (len(keys) + 1))})", (*_key(t, k), k))
                conn.commit()
                self.commits += 1
                self.stop_event.wait(0.01)
            except pymysql.err.MySQLError:
                if conn is not None:
                    with contextlib.suppress(Exception):  # a dead connection
                        conn.close()
                conn = None
                self.stop_event.wait(0.3)


def _source(info: ServerInfo, db: str, t: str) -> collections.Counter[tuple[Any, ...]]:
    conn = info.connect(root=True, database=db)
    cur = conn.cursor()
    cur.execute(f"SELECT {', '.join(TABLES[t][1])}, v FROM {t}")
    out = collections.Counter(tuple(r) for r in cur.fetchall())
    conn.close()
    return out


def _mirror(to: str, db: str, t: str) -> collections.Counter[tuple[Any, ...]]:
    from mysql_cdc.udtf.sync.mirror import table_path

    cols = [*TABLES[t][1], "v"]
    data = deltalake.DeltaTable(table_path(to, TableId(db, t))).to_pyarrow_table(columns=cols)
    return collections.Counter(zip(*(data.column(c).to_pylist() for c in cols)))


def _equal(info: ServerInfo, db: str, to: str) -> bool:
    try:
        return all(_mirror(to, db, t) == _source(info, db, t) for t in TABLES)
    except Exception:  # a table not created yet, a log being written: not equal yet
        return False


def _sync(db: str, info: ServerInfo, password_file: str, tmp_path: Any, *extra: str) -> subprocess.Popen[bytes]:
    env = _repo_env(True)
    env["MYSQL_CDC_PROFILE_SRC"] = f"mysql://{ROT_USER}@{info.host}:{info.port}?password-file={password_file}"
    log = open(tmp_path / "sync.log", "ab")  # noqa: SIM115 - the child keeps it
    try:
        return subprocess.Popen(
            [sys.executable, "-m", "mysql_cdc", "sync", "--source", "src", "--tables", f"{db}[.](a|b|c)",
             "--to", str(tmp_path / "lake"), "--checkpoint", str(tmp_path / "ck"), "--state-dir",
             str(tmp_path / "state"), "--chunk-size", "150", "--interval", "0.5", "--master", "local[2]",
             "--log", str(tmp_path / "spark.log"), *extra],
            cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    finally:
        log.close()


def _user(info: ServerInfo, password: str) -> None:
    conn = info.connect(root=True)
    cur = conn.cursor()
    cur.execute("DROP USER IF EXISTS %s@'%%'", (ROT_USER,))
    cur.execute("CREATE USER %s@'%%' IDENTIFIED BY %s", (ROT_USER, password))
    cur.execute("GRANT SELECT, LOCK TABLES, REPLICATION CLIENT, REPLICATION SLAVE ON *.* TO %s@'%%'", (ROT_USER,))
    if info.kind == "mariadb":
        cur.execute("GRANT REPLICATION MASTER ADMIN ON *.* TO %s@'%%'", (ROT_USER,))
    conn.close()


def _retries(log: str) -> int:
    """How many times the job said it would try again (its warnings: in the job's output, or from Spark's
    Python workers in the Spark log next to it)."""
    n = 0
    for path in (log, os.path.join(os.path.dirname(log), "spark.log")):
        if os.path.exists(path):
            with open(path, errors="replace") as f:
                n += f.read().count("trying again in")
    return n


def _up(server: ServerProcess) -> None:
    """The shared server running again, whatever a test did to it."""
    if server.proc is not None and server.proc.poll() is None:
        os.killpg(server.proc.pid, signal.SIGCONT)
    else:
        server.start()


@pytest.mark.timeout(600)
def test_the_sync_keeps_running_through_a_restart_a_freeze_and_a_rotated_password(
        server: ServerProcess, info: ServerInfo, db: str, root: Any, tmp_path: Any) -> None:
    _make(root)
    _user(info, "first-Pw-1")
    pw = tmp_path / "pw"
    pw.write_text("first-Pw-1\n")
    log = str(tmp_path / "sync.log")
    job = _sync(db, info, str(pw), tmp_path, "--reconnect-timeout", "240", "--read-timeout", "4")
    ck = str(tmp_path / "ck")

    def batches_after(n: int, what: str, more: int = 3) -> int:
        wait_until(lambda: _checkpoint_state(ck)[0] >= n + more or job.poll() is not None, 240, what, 0.2)
        assert job.poll() is None, f"the job stopped ({what}):\n{_tail(log)}"
        return _checkpoint_state(ck)[0]

    try:
        with Writers(info, db, seed=5) as writers:
            wait_until(lambda: _checkpoint_state(ck)[1] == "binlog" or job.poll() is not None, 240,
                       "the binlog phase", 0.2)
            done = batches_after(_checkpoint_state(ck)[0], "binlog batches")
            # a restart: down until the job noticed, then up again on the same port and data
            seen = _retries(log)
            server.stop(keep_data=True)
            wait_until(lambda: _retries(log) > seen, 120, "the job to notice the server is gone", 0.2)
            server.start()
            done = batches_after(done, "batches after the restart")
            # a freeze past the read timeout (SIGSTOP: the port still accepts connections, nothing answers)
            seen = _retries(log)
            assert server.proc is not None
            os.killpg(server.proc.pid, signal.SIGSTOP)
            try:
                wait_until(lambda: _retries(log) > seen, 120, "the job to notice the frozen server", 0.2)
            finally:
                os.killpg(server.proc.pid, signal.SIGCONT)
            done = batches_after(done, "batches after the freeze")
            # the password rotated where the profile reads it, and every connection of the user closed
            pw.write_text("second-Pw-2\n")
            conn = info.connect(root=True)
            cur = conn.cursor()
            cur.execute("ALTER USER %s@'%%' IDENTIFIED BY %s", (ROT_USER, "second-Pw-2"))
            cur.execute("SELECT id FROM information_schema.PROCESSLIST WHERE user = %s", (ROT_USER,))
            for (pid,) in cur.fetchall():
                with contextlib.suppress(pymysql.err.MySQLError):  # ended meanwhile
                    cur.execute(f"KILL {int(pid)}")
            conn.close()
            done = batches_after(done, "batches after the password was rotated")
            assert writers.commits > 0
        # writers stopped: the mirror catches up and equals the source, every row once
        wait_until(lambda: _equal(info, db, str(tmp_path / "lake")) or job.poll() is not None, 240,
                   "the mirror to equal the source", 0.5)
        assert job.poll() is None, _tail(log)
        for t in TABLES:
            assert _mirror(str(tmp_path / "lake"), db, t) == _source(info, db, t), t
    finally:
        if job.poll() is None:
            os.killpg(job.pid, signal.SIGKILL)
            job.wait(60)
        _up(server)


@pytest.mark.mysql_by_default  # the job's deadline, not the server
@pytest.mark.timeout(300)
def test_a_server_gone_longer_than_the_reconnect_timeout_stops_the_job_with_one_line(
        server: ServerProcess, info: ServerInfo, db: str, root: Any, tmp_path: Any) -> None:
    _make(root, rows=50)
    _user(info, "only-Pw-1")
    pw = tmp_path / "pw"
    pw.write_text("only-Pw-1\n")
    ck = str(tmp_path / "ck")
    job = _sync(db, info, str(pw), tmp_path, "--reconnect-timeout", "8")
    try:
        wait_until(lambda: _checkpoint_state(ck)[1] == "binlog" or job.poll() is not None, 240, "the binlog phase")
        server.stop(keep_data=True)
        rc = job.wait(180)
        text = _tail(str(tmp_path / "sync.log"))
        assert rc == 2, text
        last = [line for line in text.splitlines() if line.startswith("mysql-cdc: ")]
        assert last and "ConnectionLostError" in last[-1] and "within 8 s (reconnect_timeout)" in last[-1], text
    finally:
        if job.poll() is None:
            os.killpg(job.pid, signal.SIGKILL)
            job.wait(60)
        _up(server)


def _cli(args: list[str], env_url: str, cwd: Any, timeout: float = 240) -> subprocess.CompletedProcess[str]:
    env = _repo_env(True)
    env.pop("PYSPARK_PYTHON", None)  # the CLI sets the workers' Python itself in local mode
    env["MYSQL_CDC_PROFILE_SRC"] = env_url
    return subprocess.run([sys.executable, "-m", "mysql_cdc", *args], cwd=str(cwd), env=env, capture_output=True,
                          text=True, timeout=timeout)


@pytest.mark.parametrize("server", ["mariadb"], indirect=True)  # Spark's memory, not the server's: one server
def test_too_little_driver_memory_is_one_line_with_the_fix(info: ServerInfo, db: str, root: Any,
                                                           tmp_path: Any) -> None:
    """A driver too small to start, and one a 160 MB value runs out of when it travels in its row
    (``--large-value-dir ''``): one line each, naming --driver-memory. As the sync moves it by default in local
    mode (a file beside its row: ``mysql_cdc.large_values``), the same value mirrors in that driver."""
    _make(root, rows=100)
    url = f"mysql://{info.user}:{info.password}@{info.host}:{info.port}"
    job = ["sync", "--source", "src", "--tables", f"{db}[.](a|b|c)", "--to", str(tmp_path / "lake"),
           "--checkpoint", str(tmp_path / "ck"), "--state-dir", str(tmp_path / "state"), "--master", "local[2]"]
    conn = info.connect(root=True)
    conn.cursor().execute("SET GLOBAL max_allowed_packet = 1073741824")  # a 160 MB value (new sessions see it)
    conn.close()
    big = info.connect(root=True, database=db)
    big.autocommit(True)
    big.cursor().execute("CREATE TABLE big (id INT PRIMARY KEY, payload LONGBLOB NOT NULL)")
    big.cursor().execute("INSERT INTO big VALUES (1, REPEAT('x', 160 << 20))")
    big.close()
    cases = [
        ([*job, "--once", "--driver-memory", "300m"], "the Spark driver has too little memory (300 MiB"),
        # a 160 MB value in a 600 MB driver: its heap runs out in the task, the JVM dies, and the threads of the
        # driver's Python print their tracebacks; the cause is in Spark's log
        ([*job[:3], "--tables", f"{db}[.]big", "--to", str(tmp_path / "lake-big"), "--checkpoint",
          str(tmp_path / "ck-big"), "--state-dir", str(tmp_path / "state-big"), "--master", "local[2]", "--once",
          "--driver-memory", "600m", "--large-value-dir", ""], "the Spark driver ran out of memory"),
    ]
    for args, cause in cases:
        r = _cli(args, url, tmp_path)
        lines = r.stderr.strip().splitlines()
        assert r.returncode in (1, 2) and len(lines) == 1, (args, r.stderr[-3000:])
        assert lines[0].startswith(f"mysql-cdc: {cause}") and "--driver-memory" in lines[0], lines[0]
        assert info.password not in r.stderr and "Traceback" not in r.stdout + r.stderr
    r = _cli([*job[:3], "--tables", f"{db}[.]big", "--to", str(tmp_path / "lake-files"), "--checkpoint",
              str(tmp_path / "ck-files"), "--state-dir", str(tmp_path / "state-files"), "--master", "local[2]",
              "--once", "--driver-memory", "600m"], url, tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    import deltalake

    from mysql_cdc.ids import TableId
    from mysql_cdc.udtf.sync.mirror import table_path

    data = deltalake.DeltaTable(table_path(str(tmp_path / "lake-files"), TableId(db, "big"))).to_pyarrow_table()
    assert data.column("id").to_pylist() == [1]
    assert data.column("payload")[0].as_py() == b"x" * (160 << 20)
    assert os.listdir(tmp_path / "state-files" / "large_values") == []


def test_a_broken_mirror_says_why_in_one_line(info: ServerInfo, db: str, root: Any, tmp_path: Any) -> None:
    """README's mirror broken as a new user breaks it (wrong password, a stopped server, a missing grant, a bad
    table name; too little memory: the test above): one line each on stderr, the cause and the fix, no trace,
    on both servers; then (on MySQL: the CLI's and Spark's behaviour) the whole trace with --debug, the same job
    run to its end, run again with nothing to do, and stopped with Ctrl-C."""
    from tests.conftest import _free_port

    _make(root, rows=100)
    url = f"mysql://{info.user}:{info.password}@{info.host}:{info.port}"
    job = ["sync", "--source", "src", "--tables", f"{db}[.](a|b|c)", "--to", str(tmp_path / "lake"),
           "--checkpoint", str(tmp_path / "ck"), "--state-dir", str(tmp_path / "state"), "--master", "local[2]"]
    conn = info.connect(root=True)
    cur = conn.cursor()
    cur.execute("CREATE USER IF NOT EXISTS 'noslave'@'%' IDENTIFIED BY 'No-slave-1'")
    cur.execute("GRANT SELECT, REPLICATION CLIENT ON *.* TO 'noslave'@'%'")
    try:
        cases = [
            (job, url.replace(info.password, "wrong-Pw-9"), "ConnectError: login refused", "wrong user or password"),
            (job, f"mysql://{info.user}:x@127.0.0.1:{_free_port()}", "ConnectError: cannot reach MySQL",
             "check host, port and that the server is running"),
            (job, f"mysql://noslave:No-slave-1@{info.host}:{info.port}", "PrivilegeError: the capture user lacks "
             "REPLICATION SLAVE", "GRANT REPLICATION SLAVE ON *.* TO the user"),
            ([*job[:3], "--tables", f"{db}[.]nosuch", *job[5:]], url, "NoTableMatchedError: the table pattern(s)",
             "match no table the capture user can see"),
        ]
        for args, env_url, cause, fix in cases:
            r = _cli(args, env_url, tmp_path)
            lines = r.stderr.strip().splitlines()
            assert r.returncode in (1, 2) and len(lines) == 1, (args, r.stderr[-3000:])
            assert lines[0].startswith(f"mysql-cdc: {cause}") and fix in lines[0], lines[0]
            assert info.password not in r.stderr and "Traceback" not in r.stdout + r.stderr
        if info.kind == "mariadb":
            # CI time: what follows is the CLI's and Spark's, the same for both servers; it runs on MySQL
            return
        # --debug: the whole trace
        r = _cli([*cases[3][0], "--debug"], url, tmp_path)
        assert r.returncode != 0 and "Traceback (most recent call last)" in r.stderr
        assert "NoTableMatchedError" in r.stderr
        # the job to its end, then again with nothing to do: where the mirror stands, both times
        for _ in range(2):
            r = _cli([*job, "--once"], url, tmp_path)
            assert r.returncode == 0, r.stderr[-3000:]
            assert r.stdout.strip().splitlines()[-1].startswith("mysql-cdc: the mirror is up to date at binlog "), \
                r.stdout[-2000:]
            assert r.stderr.strip() == "", r.stderr[-3000:]
        # Ctrl-C: the query stops cleanly and the job says where
        env = _repo_env(True)
        env["MYSQL_CDC_PROFILE_SRC"] = url
        p = subprocess.Popen([sys.executable, "-m", "mysql_cdc", *job, "--interval", "0.5"], cwd=str(tmp_path),
                             env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            before = _checkpoint_state(str(tmp_path / "ck"))[0]
            root.cursor().execute("UPDATE a SET v = v + 1 WHERE id < 10")  # something for a batch to carry
            wait_until(lambda: _checkpoint_state(str(tmp_path / "ck"))[0] > before or p.poll() is not None, 120,
                       "a batch of the running job")
            p.send_signal(signal.SIGINT)
            _, err = p.communicate(timeout=120)
        finally:
            if p.poll() is None:
                p.kill()
        assert p.returncode == 130, err[-3000:]
        assert err.strip().splitlines()[-1].startswith("mysql-cdc: stopped (Ctrl-C) at binlog "), err[-3000:]
        for t in TABLES:
            assert _mirror(str(tmp_path / "lake"), db, t) == _source(info, db, t)
    finally:
        cur.execute("DROP USER IF EXISTS 'noslave'@'%'")
        conn.close()


def test_xa_transactions_across_runs_of_the_sync_are_mirrored_at_their_commit(
        classic_spark: Any, info: ServerInfo, db: str, root: Any, tmp_path: Any) -> None:
    """XA transactions prepared before the snapshot, and between two runs of the sync (a restart from the
    checkpoint), committed or rolled back before the next run: the mirror has the committed rows, not the rolled
    back ones; the stream's offset carried the one prepared in its binlog phase and still open."""
    import json

    import mysql_cdc
    from tests.helpers import profile_url

    _make(root, rows=60)

    run = functools.partial(statements_alone, info, db)

    def sync() -> None:
        q = mysql_cdc.sync(classic_spark, to=str(tmp_path / "lake"), checkpoint=str(tmp_path / "ck"),
                           state_dir=str(tmp_path / "state"), tables=f"{db}[.](a|b|c)", source="src",
                           profiles={"src": profile_url(info)}, once=True, chunk_size=20)
        assert q.awaitTermination(300) and q.exception() is None, q.exception()

    try:
        run("XA START 'early'", "UPDATE a SET v = -1 WHERE id < 5", "XA END 'early'", "XA PREPARE 'early'")
        sync()
        run("XA START 'late'", "UPDATE b SET v = -2 WHERE k < 'k00010'", "XA END 'late'", "XA PREPARE 'late'")
        run("XA START 'gone'", "DELETE FROM c WHERE y < 30", "XA END 'gone'", "XA PREPARE 'gone'")
        run("UPDATE a SET v = -3 WHERE id = 40")  # a row no prepared transaction holds
        sync()
        for t in TABLES:  # the prepared rows are no one's yet
            assert _mirror(str(tmp_path / "lake"), db, t) == _source(info, db, t), t
        offsets = sorted((p for p in (tmp_path / "ck" / "offsets").iterdir() if p.name.isdigit()),
                         key=lambda p: int(p.name))
        last = json.loads(offsets[-1].read_text().splitlines()[-1])
        assert sorted(bytes.fromhex(x["gtrid"]) for x in last.get("xa", [])) == [b"gone", b"late"], last
        run("XA COMMIT 'early'", "XA COMMIT 'late'", "XA ROLLBACK 'gone'", "UPDATE a SET v = -9 WHERE id = 50")
        sync()
        for t in TABLES:
            assert _mirror(str(tmp_path / "lake"), db, t) == _source(info, db, t), t
        assert sum(1 for (_, v) in _mirror(str(tmp_path / "lake"), db, "a") if v == -1) == 5
    finally:  # none left prepared (their locks would outlive the test)
        conn = info.connect(root=True)
        with conn.cursor() as c:
            c.execute("XA RECOVER")
            for (fmt, glen, blen, data) in c.fetchall():
                raw = data if isinstance(data, bytes) else data.encode()
                with contextlib.suppress(pymysql.err.MySQLError):
                    c.execute(f"XA ROLLBACK X'{raw[:glen].hex()}', X'{raw[glen:glen + blen].hex()}', {int(fmt)}")
        conn.close()


def _client(tool: str, info: ServerInfo, *args: str, stdin: str | None = None) -> str:
    """A MariaDB client tool (mariadb-dump, mariadb) run as root against the server under test."""
    from tests.servers import ROOT_PASSWORD

    cmd = [tool, "--protocol=TCP", "-h", info.host, "-P", str(info.port), "-u", "root",
           f"--password={ROOT_PASSWORD}", *args]
    r = subprocess.run(cmd, input=stdin, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    return r.stdout


def test_a_mysqldump_restore_into_a_mirrored_database_is_followed(
        classic_spark: Any, info: ServerInfo, db: str, root: Any, tmp_path: Any) -> None:
    """A dump (mariadb-dump: DROP TABLE IF EXISTS, CREATE TABLE, LOCK TABLES, ``/*!40000 ALTER TABLE ... DISABLE
    KEYS */``, INSERTs, ``/*!40101 SET ...*/``) restored into a database the sync mirrors, replacing a mirrored
    table and adding one: the sync goes on, and mirrors both as restored."""
    import mysql_cdc
    from tests.helpers import profile_url

    _make(root, rows=40)
    src = f"{db}_dump"
    root.cursor().execute(f"CREATE DATABASE `{src}`")
    try:
        cur = root.cursor()
        cur.execute(f"CREATE TABLE `{src}`.a (id INT PRIMARY KEY, v INT NOT NULL)")
        cur.execute(f"CREATE TABLE `{src}`.restored (id INT PRIMARY KEY, v INT NOT NULL)")
        other = info.connect(root=True, database=src)
        other.autocommit(True)
        for t, n in (("a", 70), ("restored", 30)):
            insert_rows(other, t, ["id", "v"], [(i, i * 11) for i in range(n)])
        other.close()
        dump = _client("mariadb-dump", info, "--skip-comments", src, "a", "restored")
        assert "/*!40000 ALTER TABLE `a` DISABLE KEYS */" in dump and "LOCK TABLES `a` WRITE" in dump

        def sync() -> None:
            q = mysql_cdc.sync(classic_spark, to=str(tmp_path / "lake"), checkpoint=str(tmp_path / "ck"),
                               state_dir=str(tmp_path / "state"), tables=f"{db}[.].*", source="src",
                               profiles={"src": profile_url(info)}, once=True)
            assert q.awaitTermination(300) and q.exception() is None, q.exception()

        sync()
        _client("mariadb", info, db, stdin=dump)
        sync()
        for t in ("a", "b", "c"):
            assert _mirror(str(tmp_path / "lake"), db, t) == _source(info, db, t), t
        TABLES["restored"] = ("id INT", ("id",))
        try:
            assert _mirror(str(tmp_path / "lake"), db, "restored") == _source(info, db, "restored")
        finally:
            del TABLES["restored"]
        assert len(_source(info, db, "a")) == 70
    finally:
        root.cursor().execute(f"DROP DATABASE `{src}`")


def test_the_threads_still_printing_when_the_cli_exits_do_not_abort_it(tmp_path: Any) -> None:
    """When the JVM dies, py4j's daemon threads print their tracebacks into the Spark log while the CLI exits
    after its one line. A buffered log file aborted the interpreter then in most runs (exit code -6, "Fatal
    Python error: _enter_buffered_busy" on the terminal: CI on 2026-11-30). Ten exits with four such threads
    writing: each ends with its own code and prints nothing."""
    code = ("import sys, threading, time\n"
            "from mysql_cdc.cli import _noise_to_log\n"
            "_noise_to_log(sys.argv[1])\n"
            "def spam():\n"
            "    for _ in range(5000):  # at most 400 MB a run, removed after it\n"
            "        sys.stderr.write('Traceback ' * 2000 + '\\n')\n"
            "for _ in range(4):\n"
            "    threading.Thread(target=spam, daemon=True).start()\n"
            "time.sleep(0.05)\n"
            "sys.exit(3)\n")
    for i in range(10):
        log = tmp_path / f"spark-{i}.log"
        r = subprocess.run([sys.executable, "-c", code, str(log)], env=_repo_env(True), capture_output=True,
                           text=True, timeout=120)
        assert (r.returncode, r.stderr) == (3, ""), r.stderr[:500]
        assert log.stat().st_size > 0
        log.unlink()
