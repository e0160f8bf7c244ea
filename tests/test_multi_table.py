"""Whole-database capture on real servers: one stream (one binlog reader) over a dozen tables of different
key kinds while writers change all of them, with transactions that span tables and keys that move; each
table split out of the envelope and applied in binlog order equals its source table. Also after kill -9 of
a Spark Connect server (the stream's driver) mid-snapshot and mid-binlog (a local driver's kill -9: the sync
job's test, tests/test_sync.py), and for tables created while the stream runs. Value fidelity: a table
split out of a multi-table read equals a single-table read of it, for every type of the type table."""

from __future__ import annotations

import collections
import contextlib
import datetime as dt
import json
import os
import random
import re
import subprocess
import sys
import threading
import uuid
from decimal import Decimal
from typing import Any

import pytest

import mysql_cdc
from mysql_cdc.ids import TableId
from mysql_cdc.offsets import binlog_file_key
from mysql_cdc.profiles import ConnectionProfile
from mysql_cdc.state.store import StateStore
from tests.conftest import ROOT, ConnectServer, _repo_env, wait_until
from tests.helpers import give_server_profile, insert_rows, is_connect, profile_url
from tests.servers import ServerInfo
from tests.stream_job import start as start_stream
from tests.test_streaming import Churn, _checkpoint_state, _remote, _session

BASE = dt.datetime(2024, 2, 28, 23, 59, 0)


def _key(name: str, k: int) -> tuple[Any, ...]:
    """Key of row ``k`` in table ``name`` (every table's keys come from one integer)."""
    return {
        "t01_int": lambda: (k,),
        "t02_bigu": lambda: (2**63 + k * 1000,),
        "t03_ci": lambda: (f"{'aB'[k % 2]}{k:05d}",),
        "t04_comp": lambda: (k % 7, f"b{k}"),
        "t05_dec": lambda: (Decimal(k) / 4,),
        "t06_dt": lambda: (BASE + dt.timedelta(seconds=k, milliseconds=k % 1000),),
        "t07_bin": lambda: (k.to_bytes(4, "big"),),
        "t08_neg": lambda: (k - 2000,),
        "t09_uuid": lambda: (str(uuid.UUID(int=k * 7919)),),
        "t10_nokey": lambda: (None if k % 5 == 0 else k // 3,),
        "t13_bare": lambda: (k % 50,),
        "t11_empty": lambda: (k,),
        "t12_date": lambda: (dt.date(2000, 1, 1) + dt.timedelta(days=k),),
    }[name]()


KEYS = {  # table: (key columns DDL, key names)
    "t01_int": ("id INT", ("id",)),
    "t02_bigu": ("id BIGINT UNSIGNED", ("id",)),
    "t03_ci": ("k VARCHAR(20) CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci", ("k",)),
    "t04_comp": ("a INT, b VARCHAR(8)", ("a", "b")),
    "t05_dec": ("id DECIMAL(12,2)", ("id",)),
    "t06_dt": ("d DATETIME(3)", ("d",)),
    "t07_bin": ("id VARBINARY(16)", ("id",)),
    "t08_neg": ("id SMALLINT", ("id",)),
    "t09_uuid": ("id CHAR(36)", ("id",)),
    "t10_nokey": ("c INT NULL", ("c",)),  # no primary key: split by chunk_key c, not unique, NULL in a chunk
    "t13_bare": ("a INT NULL", ("a",)),  # no key at all: one chunk; a and v repeat
    "t11_empty": ("id INT", ("id",)),
    "t12_date": ("d DATE", ("d",)),
}
TABLES = sorted(KEYS)
ROWS = 400
NO_KEY = ("t10_nokey", "t13_bare")  # rows identified by all their columns: a multiset
CHUNK_KEY = "{db}[.]t10_nokey:c"  # t13_bare has none: one chunk


def _make(root: Any) -> None:
    cur = root.cursor()
    for t, (cols, key) in KEYS.items():
        pk = "" if t in NO_KEY else f", PRIMARY KEY ({', '.join(key)})"
        cur.execute(f"CREATE TABLE {t} ({cols}, v INT NOT NULL{pk})")
        if t != "t11_empty":
            insert_rows(root, t, [*key, "v"], [(*_key(t, k), k) for k in range(2, 2 * ROWS + 1, 2)])
    cur.close()


class Writers(Churn):
    """A writer thread changing every table until stopped: value updates, keys moved, deletes, inserts, and
    transactions spanning three tables (v set to a mark, a multiple of 10^4 from 10^8, in t01, t03, t04)."""

    pause = 0.003

    def __init__(self, info: ServerInfo, db: str, seed: int) -> None:
        super().__init__(info, db, seed)
        self.spanning = 0

    def step(self, cur: Any) -> None:
        r = self.rng
        t = r.choice(TABLES)
        cols = KEYS[t][1]
        k = r.randrange(1, 2 * ROWS + 200)
        where = " AND ".join(f"{c} <=> %s" for c in cols)
        limit = " LIMIT 1" if t in NO_KEY else ""
        op = r.random()
        if op < 0.3:
            cur.execute(f"UPDATE {t} SET v = v + 1 WHERE {where}{limit}", _key(t, k))
        elif op < 0.45:  # a key moves (into another chunk, often)
            sets = ", ".join(f"{c} = %s" for c in cols)
            cur.execute(f"UPDATE IGNORE {t} SET {sets}, v = v + 7 WHERE {where}{limit}",
                        (*_key(t, r.randrange(1, 2 * ROWS + 200)), *_key(t, k)))
        elif op < 0.6:
            cur.execute(f"DELETE FROM {t} WHERE {where}{limit}", _key(t, k))
        elif op < 0.85:
            marks = ", ".join(["%s"] * (len(cols) + 1))
            cur.execute(f"INSERT IGNORE INTO {t} ({', '.join(cols)}, v) VALUES ({marks})", (*_key(t, k), k))
        else:  # one transaction over three tables
            self.spanning += 1
            mark = 10**8 + self.spanning * 10**4  # other writes move v by 1 or 7: never onto another mark
            cur.execute("BEGIN")
            for tt in ("t01_int", "t03_ci", "t04_comp"):
                w = " AND ".join(f"{c} = %s" for c in KEYS[tt][1])
                cur.execute(f"UPDATE {tt} SET v = %s WHERE {w}", (mark, *_key(tt, 2 * r.randrange(1, ROWS))))
            cur.execute("COMMIT")


def _norm(v: Any) -> Any:
    return bytes(v) if isinstance(v, bytearray) else v


def _keys(table: str) -> tuple[str, ...]:
    return KEYS[table][1] if table in KEYS else ("id",)  # tables the tests add later have an INT id


def _source(info: ServerInfo, db: str, table: str) -> collections.Counter[tuple[Any, ...]]:
    conn = info.connect(root=True, database=db)
    cur = conn.cursor()
    cur.execute(f"SELECT {', '.join(_keys(table))}, v FROM {table}")
    out = collections.Counter(tuple(_norm(x) for x in row) for row in cur.fetchall())
    conn.close()
    return out


def _mirrors(spark: Any, out: str, state: str, tables: list[str], db: str
             ) -> tuple[dict[str, collections.Counter[tuple[Any, ...]]], list[tuple[Any, ...]]]:
    """Each table's rows from the sink's committed output: split out of the envelope, snapshot rows first, then
    changes in binlog order; -U and -D remove one row equal to their image (tables without a key are multisets),
    +U and +I add one. Also every change row as (table, file, pos, row, op, v)."""
    frames = mysql_cdc.split(spark.read.parquet(out), state)
    mirrors: dict[str, collections.Counter[tuple[Any, ...]]] = {}
    every: list[tuple[Any, ...]] = []
    for t in tables:
        cols = list(_keys(t))
        rows = [tuple(_norm(x) for x in r) for r in frames[f"{db}.{t}"].select(
            *cols, "v", "__op", "__file", "__pos", "__row").collect()]
        n = len(cols) + 1
        snap = [r[:n] for r in rows if r[n] == "r"]
        if t not in NO_KEY:
            assert len(snap) == len(set(snap)), f"{t}: a key came twice from the snapshot"
        m: collections.Counter[tuple[Any, ...]] = collections.Counter(snap)
        changes = sorted((r for r in rows if r[n] != "r"),
                         key=lambda r: (binlog_file_key(r[n + 1]), r[n + 2], r[n + 3]))
        for r in changes:
            image = r[:n]
            if t in NO_KEY:  # no key: rows by identity, a multiset
                if r[n] in ("-U", "-D"):
                    assert m[image] > 0, f"{t}: {r[n]} of a row the mirror does not hold: {r}"
                    m[image] -= 1
                    if not m[image]:
                        del m[image]
                else:
                    m[image] += 1
            else:  # by key: -U/-D delete the key, +U/+I upsert it
                for old in [x for x in m if x[:-1] == image[:-1]]:
                    del m[old]
                if r[n] in ("+U", "+I"):
                    m[image] += 1
            every.append((t, r[n + 1], r[n + 2], r[n + 3], r[n], r[n - 1]))
        mirrors[t] = m
    return mirrors, every


def _check(spark: Any, out: str, state: str, info: ServerInfo, db: str, tables: list[str]) -> list[tuple[Any, ...]]:
    mirrors, every = _mirrors(spark, out, state, tables, db)
    for t in tables:
        source = _source(info, db, t)
        if mirrors[t] != source:
            lost, extra = source - mirrors[t], mirrors[t] - source
            raise AssertionError(f"{t}: mirror != source: missing {sorted(lost)[:4]!r} ({sum(lost.values())}), "
                                 f"extra {sorted(extra)[:4]!r} ({sum(extra.values())})")
    places = [e[:4] for e in every]
    assert len(places) == len(set(places)), "a change came out twice"
    return every


def _spanning_in_order(every: list[tuple[Any, ...]]) -> int:
    """The changes of each transaction over three tables come out together, in the order written."""
    by_mark: dict[int, list[tuple[Any, ...]]] = collections.defaultdict(list)
    for t, file, pos, row, op, v in every:
        if op == "+U" and v >= 10**8 and v % 10**4 == 0:
            by_mark[v].append((binlog_file_key(file), pos, row, t))
    whole = 0
    for mark, rows in by_mark.items():
        if len(rows) == 3:
            whole += 1
            assert [r[3] for r in sorted(rows)] == ["t01_int", "t03_ci", "t04_comp"], (mark, rows)
            assert len({r[0] for r in rows}) == 1  # one file: one transaction
    return whole


class BinlogDumps:
    """Counts the binlog connections the server serves (``Binlog Dump`` commands in its general log) while
    the block runs. A dump thread is visible in the process list only while the server sends: a read of a
    finished range is sent in milliseconds, so the log is what counts them."""

    def __init__(self, info: ServerInfo) -> None:
        self.conn = info.connect(root=True)
        self.conn.autocommit(True)
        self.count = 0

    def __enter__(self) -> BinlogDumps:
        cur = self.conn.cursor()
        cur.execute("SET GLOBAL general_log = 0")
        cur.execute("TRUNCATE TABLE mysql.general_log")
        cur.execute("SET GLOBAL log_output = 'TABLE'")
        cur.execute("SET GLOBAL general_log = 1")
        cur.close()
        return self

    def __exit__(self, *exc: Any) -> None:
        cur = self.conn.cursor()
        cur.execute("SET GLOBAL general_log = 0")
        cur.execute("SELECT COUNT(*) FROM mysql.general_log WHERE command_type LIKE 'Binlog Dump%'")
        self.count = int(cur.fetchone()[0])
        cur.execute("TRUNCATE TABLE mysql.general_log")
        cur.close()
        self.conn.close()


@pytest.mark.mysql_by_default  # the batches and one connection; readers: tests/test_binlog.py
# over Spark Connect only with MYSQL_CDC_LONG=1 (CI time): the sync's many-table stream runs over Connect by default
# in tests/test_sync.py and tests/test_schema_changes.py
@pytest.mark.parametrize("session", ["classic", pytest.param("connect", marks=pytest.mark.slow)])
def test_one_stream_mirrors_a_dozen_tables_under_writers_with_one_binlog_connection(
        session: str, request: pytest.FixtureRequest, info: ServerInfo, profile: ConnectionProfile, db: str,
        root: Any, tmp_path: Any) -> None:
    _make(root)
    spark, remote = _session(session, request)
    state, ck, out = str(tmp_path / "state"), str(tmp_path / "ck"), str(tmp_path / "out")
    args = (profile_url(profile), f"tables={db}[.]t.*", state, ck, out)
    opts = {"chunk_size": 200, "chunk_key": CHUNK_KEY.format(db=db)}
    try:
        with Writers(info, db, seed=11) as writers:
            q = start_stream(spark, *args, "availableNow", max_chunks=7, **opts)
            assert q.awaitTermination(600), "the availableNow query did not end"
            assert q.exception() is None, q.exception()
            assert _checkpoint_state(ck)[1] == "binlog"
            # the binlog phase, followed while the writers write: one binlog connection reads the changes of
            # all tables in a micro-batch (and the driver scans the batch's range once for its end)
            before = _checkpoint_state(ck)[0]
            with BinlogDumps(info) as dumps:
                q = start_stream(spark, *args, "processing", max_chunks=7, **opts)
                wait_until(lambda: _checkpoint_state(ck)[0] >= before + 5 or not q.isActive, 300,
                           "five binlog batches")
                assert q.isActive, q.exception()
                q.stop()
            batches = _checkpoint_state(ck)[0] - before
            wait_until(lambda: writers.spanning > 10, 60, "transactions over three tables")
        # per batch: one read of all twelve tables' changes and the driver's scan (a reader per table: 12 or more)
        assert batches >= 5 and 1 <= dumps.count <= 2 * batches + 2, (batches, dumps.count)
        # writes stopped: one more run catches up to the end
        q = start_stream(spark, *args, "availableNow", max_chunks=7, **opts)
        assert q.awaitTermination(300) and q.exception() is None, q.exception()
        every = _check(spark, out, state, info, db, TABLES)
        assert {e[0] for e in every} == set(TABLES), "every table had changes"
        assert _spanning_in_order(every) > 0
    finally:
        if remote is not None:
            remote.stop()


# one server (CI time): a lost Connect server and its restart are Spark's; the stream's recovery from a kill on
# both servers is the sync's eight-kill test and the stream tests here
@pytest.mark.parametrize("server", ["mariadb"], indirect=True)
def test_kill_9_of_the_connect_server_under_a_many_table_stream_loses_nothing(
        classic_spark: Any, info: ServerInfo, profile: ConnectionProfile, db: str, root: Any, tmp_path: Any
        ) -> None:
    """A Spark Connect server (the stream's driver) is killed mid-snapshot and mid-binlog and started again; the
    stream restarted from its checkpoint converges, tables without a key included."""
    _make(root)
    state, ck, out = str(tmp_path / "state"), str(tmp_path / "ck"), str(tmp_path / "out")
    args = (profile_url(profile), f"tables={db}[.]t.*", state, ck, out)
    opts = {"chunk_size": 200, "chunk_key": CHUNK_KEY.format(db=db)}
    srv = ConnectServer(tmp_path / "server", with_repo=True)
    # the stream's profile is the server's (a Connect stream cannot use one its client registered)
    srv.env["MYSQL_CDC_PROFILES_FILE"] = str(tmp_path / "server-profiles.json")
    give_server_profile(srv.env["MYSQL_CDC_PROFILES_FILE"], "src", profile)
    sessions: list[Any] = []

    def session() -> Any:
        spark = _remote(srv.start())
        for old in sessions:  # a client of a killed server would retry its release at exit: end it now
            with contextlib.suppress(Exception):
                old.stop()
        sessions[:] = [spark]
        return spark

    try:
        with Writers(info, db, seed=13):
            start_stream(session(), *args, "processing", max_chunks=4, **opts)
            wait_until(lambda: _checkpoint_state(ck)[0] >= 3, 300, "three committed batches")
            assert _checkpoint_state(ck)[1] == "snapshot"
            srv.kill()  # mid-snapshot
            start_stream(session(), *args, "processing", max_chunks=4, **opts)
            wait_until(lambda: _checkpoint_state(ck)[1] == "binlog", 300, "the binlog phase")
            before = _checkpoint_state(ck)[0]
            wait_until(lambda: _checkpoint_state(ck)[0] >= before + 4, 300, "binlog batches")
            srv.kill()  # mid-binlog, the writers still writing
        q = start_stream(session(), *args, "availableNow", max_chunks=4, **opts)
        assert q.awaitTermination(300) and q.exception() is None, q.exception()
        every = _check(classic_spark, out, state, info, db, TABLES)
        assert {e[0] for e in every} == set(TABLES)
    finally:
        for old in sessions:
            with contextlib.suppress(Exception):
                old.stop()
        srv.stop()


def _added(state: str, kind: str = "tables") -> set[str]:
    """Tables of the rounds after the first (added, or with ``kind`` "dropped" dropped), as recorded."""
    folder = os.path.join(state, "rounds")
    names = [n for n in os.listdir(folder) if n.endswith(".json") and n != "0.json"] if os.path.isdir(folder) else []
    out: set[str] = set()
    for n in names:
        with open(os.path.join(folder, n)) as f:
            out |= {t for _, t in json.load(f).get(kind, [])}
    return out


@pytest.mark.mysql_by_default  # the stream's rounds, not the server
def test_tables_that_start_to_match_are_snapshotted_while_the_binlog_waits_then_followed(
        classic_spark: Any, info: ServerInfo, profile: ConnectionProfile, db: str, root: Any, tmp_path: Any
        ) -> None:
    """A table created while the stream runs, one renamed into the patterns (its rows are not in the binlog),
    and, at a restart, tables a widened pattern adds: each is snapshotted in a round of its own while the
    binlog waits, then followed; writers change them all along. Tables that do not match stay out. A dropped
    table leaves the capture with a record, and the stream goes on."""
    cur = root.cursor()
    for t in ("t01_int", "t04_gone", "x_old", "w01", "other"):
        cur.execute(f"CREATE TABLE {t} (id INT PRIMARY KEY, v INT NOT NULL)")
        insert_rows(root, t, ["id", "v"], [(k, k) for k in range(1, 401)])
    state, ck, out = str(tmp_path / "state"), str(tmp_path / "ck"), str(tmp_path / "out")
    url = profile_url(profile)
    stop = threading.Event()
    writes: list[str] = ["t01_int"]

    def write() -> None:  # updates, inserts and deletes in whatever tables exist by now
        conn = info.connect(root=True, database=db)
        conn.autocommit(True)
        c = conn.cursor()
        rng = random.Random(5)
        while not stop.is_set():
            t, k = rng.choice(writes), rng.randrange(1, 600)
            c.execute(rng.choice([f"UPDATE {t} SET v = v + 1 WHERE id = %s", f"DELETE FROM {t} WHERE id = %s",
                                  f"INSERT IGNORE INTO {t} (id, v) VALUES (%s, 1)"]), (k,))
            stop.wait(0.003)
        conn.close()

    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    try:
        q = start_stream(classic_spark, url, f"tables={db}[.]t.*", state, ck, out, "processing", max_chunks=2,
                         chunk_size=100)
        wait_until(lambda: _checkpoint_state(ck)[1] == "binlog" or not q.isActive, 300, "the binlog phase")
        cur.execute("CREATE TABLE t02_new (id INT PRIMARY KEY, v INT NOT NULL)")
        insert_rows(root, "t02_new", ["id", "v"], [(k, k) for k in range(1, 301)])
        writes.append("t02_new")
        cur.execute("RENAME TABLE x_old TO t03_renamed")
        writes.append("t03_renamed")
        cur.execute("CREATE TABLE other2 (id INT PRIMARY KEY, v INT NOT NULL)")  # does not match
        cur.execute("UPDATE t04_gone SET v = v + 1 WHERE id < 10")
        cur.execute("DROP TABLE t04_gone")
        wait_until(lambda: {"t02_new", "t03_renamed"} <= _added(state) or not q.isActive, 300,
                   "snapshot rounds of the new tables")
        wait_until(lambda: "t04_gone" in _added(state, "dropped") or not q.isActive, 300, "the drop recorded")
        # created again under the name: captured afresh (a new plan, new chunk records)
        cur.execute("CREATE TABLE t04_gone (id INT PRIMARY KEY, v INT NOT NULL)")
        insert_rows(root, "t04_gone", ["id", "v"], [(k, k) for k in range(1000, 1011)])
        before = _checkpoint_state(ck)[0]
        wait_until(lambda: (_checkpoint_state(ck)[1] == "binlog" and _checkpoint_state(ck)[0] >= before + 4)
                   or not q.isActive, 300, "the binlog after the rounds")
        assert q.isActive, q.exception()
        q.stop()
        # restarted with a wider pattern: w01 (there all along) is snapshotted in a round of its own
        writes.append("w01")
        q = start_stream(classic_spark, url, f"tables={db}[.]t.*,{db}[.]w.*", state, ck, out, "processing",
                         max_chunks=2, chunk_size=100)
        wait_until(lambda: "w01" in _added(state) or not q.isActive, 300, "a round for the widened pattern")
        before = _checkpoint_state(ck)[0]
        wait_until(lambda: (_checkpoint_state(ck)[1] == "binlog" and _checkpoint_state(ck)[0] >= before + 4)
                   or not q.isActive, 300, "the binlog after the round")
        assert q.isActive, q.exception()
        q.stop()
    finally:
        stop.set()
        writer.join(30)
    q = start_stream(classic_spark, url, f"tables={db}[.]t.*,{db}[.]w.*", state, ck, out, "availableNow",
                     max_chunks=2, chunk_size=100)
    assert q.awaitTermination(300) and q.exception() is None, q.exception()
    tables = ["t01_int", "t02_new", "t03_renamed", "w01"]
    every = _check(classic_spark, out, state, info, db, tables)
    assert {e[0] for e in every} == set(tables)
    seen = {r["__table"] for r in classic_spark.read.parquet(out).select("__table").distinct().collect()}
    assert seen == set(tables) | {"t04_gone"}, seen  # other and other2 never match
    gone = [(r["__op"], r["v"]) for r in mysql_cdc.split(classic_spark.read.parquet(out), state, [f"{db}.t04_gone"])[
        f"{db}.t04_gone"].where("__op <> 'r'").collect()]
    assert sorted(gone) == sorted([("-U", k) for k in range(1, 10)] + [("+U", k + 1) for k in range(1, 10)])
    again = mysql_cdc.split(classic_spark.read.parquet(out), state, [f"{db}.t04_gone"])[f"{db}.t04_gone"]
    assert sorted(r["id"] for r in again.where("__op = 'r' AND id >= 1000").collect()) == list(range(1000, 1011))
    assert sum(r.rows for r in StateStore(state).chunk_records(TableId(db, "t04_gone"))) == 11


def test_a_table_split_out_of_a_many_table_read_equals_a_read_of_that_table_for_every_type(
        spark: Any, info: ServerInfo, profile: ConnectionProfile, db: str, root: Any, tmp_path: Any) -> None:
    """C4 through the envelope: every type of the type table (tests/test_values.py), snapshot and binlog; the
    snapshot of a table split out of a read of two tables equals the data source's read of the one table, and
    the binlog's change rows equal mysql_cdc_binlog's of the one table over the same range, metadata too.
    Classic sessions read with tinyint1_as_boolean false, Connect sessions with true (split takes it from
    the state_dir)."""
    from tests.test_values import COLUMNS, NAMES, ROWS

    flag = is_connect(spark)
    cur = root.cursor()
    cols = ", ".join(f"`{n}` {t}" for n, t in COLUMNS)
    cur.execute(f"CREATE TABLE vals (id BIGINT UNSIGNED PRIMARY KEY, {cols}, touch INT NOT NULL DEFAULT 0)")
    cur.execute("CREATE TABLE other (id INT PRIMARY KEY, v INT NOT NULL)")
    cur.execute("SET time_zone = '+00:00'")
    insert_rows(root, "vals", ["id", *NAMES], ROWS)
    insert_rows(root, "other", ["id", "v"], [(1, 1), (2, 2)])
    mysql_cdc.register(spark, {"src": profile_url(profile)})
    many, one = str(tmp_path / "many"), str(tmp_path / "one")
    pattern = f"{db}[.](vals|other)"

    def read(**options: Any) -> Any:
        r = spark.read.format("mysql_cdc").option("source", "src").option("tinyint1_as_boolean", flag)
        for k, v in options.items():
            r = r.option(k, v)
        return r.load()

    def rows(df: Any, drop: tuple[str, ...] = ()) -> list[tuple[Any, ...]]:
        return sorted((tuple(r) for r in df.drop(*drop).collect()), key=lambda r: (repr(r[0]), repr(r[-8:])))

    frames = mysql_cdc.split(read(tables=pattern, state_dir=many), many)
    assert set(frames) == {f"{db}.vals", f"{db}.other"}
    split_vals = frames[f"{db}.vals"]
    single = read(table=f"{db}.vals")
    assert split_vals.schema == single.schema
    a, b = rows(split_vals, ("__position", "__pos", "__file")), rows(single, ("__position", "__pos", "__file"))
    assert len(a) == len(ROWS) and a == b
    # the SQL function over a chunk table of both tables gives the same envelope
    by_sql, flag_sql = str(tmp_path / "by_sql"), str(flag).lower()
    chunks = f"SELECT * FROM mysql_cdc_chunks(source => 'src', tables => '{pattern}')"
    via_sql = spark.sql(f"SELECT * FROM mysql_cdc_snapshot(TABLE({chunks}), source => 'src', tables => '{pattern}', "
                        f"tinyint1_as_boolean => {flag_sql}, state_dir => '{by_sql}')")
    assert rows(mysql_cdc.split(via_sql, by_sql)[f"{db}.vals"], ("__position", "__pos", "__file")) == b

    status = root.cursor()
    status.execute("SHOW MASTER STATUS" if info.kind == "mariadb" else "SHOW BINARY LOG STATUS")
    file, pos = status.fetchone()[:2]
    cur.execute("UPDATE vals SET touch = 1")
    cur.execute("DELETE FROM vals WHERE id <> 1")
    insert_rows(root, "vals", ["id", *NAMES], [r for r in ROWS if r[0] != 1])
    cur.execute("UPDATE other SET v = v + 1")
    status.execute("SHOW MASTER STATUS" if info.kind == "mariadb" else "SHOW BINARY LOG STATUS")
    end = "{}:{}".format(*status.fetchone()[:2])
    args = f"source => 'src', startup => 'offset', startup_offset => '{file}:{pos}', end => '{end}', " \
           f"tinyint1_as_boolean => {str(flag).lower()}"
    changes = spark.sql(f"SELECT * FROM mysql_cdc_binlog({args}, tables => '{pattern}', state_dir => '{many}')")
    split_changes = mysql_cdc.split(changes, many, [f"{db}.vals"])[f"{db}.vals"]
    single_changes = spark.sql(f"SELECT * FROM mysql_cdc_binlog({args}, table => '{db}.vals', state_dir => '{one}')")
    assert split_changes.schema == single_changes.schema
    a, b = rows(split_changes), rows(single_changes)
    assert len(a) == 4 * len(ROWS) - 2 and a == b  # -U/+U of each row, -D and +I of all but one
    ops = collections.Counter(r["__op"] for r in split_changes.select("__op").collect())
    assert ops == {"-U": len(ROWS), "+U": len(ROWS), "-D": len(ROWS) - 1, "+I": len(ROWS) - 1}, ops
    # before_images 'key' (a sync's stream sets it): each -U row holds its key and NULL for every other column,
    # every other row is the full read's
    keyed_dir = str(tmp_path / "keyed")  # the option shapes the output: kept in a state_dir of its own
    keyed = spark.sql(f"SELECT * FROM mysql_cdc_binlog({args}, tables => '{pattern}', state_dir => '{keyed_dir}', "
                      "before_images => 'key')")
    full = {(r["__table"], r["_change_seq"]): (r["__op"], json.loads(r["__values"])) for r in changes.collect()}
    cut = {(r["__table"], r["_change_seq"]): (r["__op"], json.loads(r["__values"])) for r in keyed.collect()}
    assert cut.keys() == full.keys()
    befores = 0
    for at, (op, values) in cut.items():
        whole = full[at][1]
        if op == "-U":
            befores += 1
            assert list(values) == list(whole) and values == {n: whole[n] if n == "id" else None for n in whole}, at
        else:
            assert (op, values) == full[at], at
    assert befores == len(ROWS) + 2  # vals' and other's updates
    # split types them as the state_dir says: the non-key columns NULL-able, a -U row's NULL there, the rest as read
    split_keyed = mysql_cdc.split(keyed, keyed_dir, [f"{db}.vals"])[f"{db}.vals"]
    assert [f.nullable for f in split_keyed.schema.fields][:len(NAMES) + 2] == [False] + [True] * (len(NAMES) + 1)
    got = {r["_change_seq"]: r.asDict() for r in split_keyed.collect()}
    whole = {r["_change_seq"]: r.asDict() for r in split_changes.collect()}
    assert got.keys() == whole.keys()
    for seq, row in got.items():
        if row["__op"] == "-U":
            assert row == {**whole[seq], **{n: None for n in [*NAMES, "touch"]}}, seq
        else:
            assert row == whole[seq], seq
    full_again = f"SELECT * FROM mysql_cdc_binlog({args}, tables => '{pattern}', state_dir => '{keyed_dir}')"
    with pytest.raises(Exception, match="before_images"):  # the state_dir keeps the shape it was read with
        spark.sql(full_again).collect()


@pytest.mark.slow  # CI time (80 s): the CLI's follow by default in tests/test_streaming.py, its stream in the sync's
@pytest.mark.parametrize("server", ["mariadb"], indirect=True)  # what the CLI does and prints: one server
def test_cli_follows_tables_and_reports_every_table(classic_spark: Any, info: ServerInfo, profile: ConnectionProfile,
                                                    db: str, root: Any, tmp_path: Any) -> None:
    cur = root.cursor()
    for t in ("t01_int", "t08_neg"):
        cur.execute(f"CREATE TABLE {t} (id INT PRIMARY KEY, v INT NOT NULL)")
        insert_rows(root, t, ["id", "v"], [(k, k) for k in range(1, 301)])
    env = _repo_env(True)
    env["MYSQL_CDC_PROFILE_FOLLOW"] = profile_url(profile)
    out, state = str(tmp_path / "out"), str(tmp_path / "state")
    cmd = [sys.executable, "-m", "mysql_cdc", "follow", "--source", "follow", "--tables", f"{db}[.]t.*",
           "--exclude", f"{db}[.]t08.*", "--out", out, "--checkpoint", str(tmp_path / "ck"), "--state-dir", state,
           "--chunk-size", "100", "--once", "--master", "local[2]"]
    first = subprocess.run(cmd, env=env, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert first.returncode == 0, first.stderr[-3000:]
    assert "batch 0:" in first.stdout and profile.password not in first.stdout + first.stderr
    cur.execute("UPDATE t01_int SET id = 5001 WHERE id = 2")
    cur.execute("DELETE FROM t08_neg WHERE id = 3")  # excluded
    cur.execute("CREATE TABLE t20_new (id INT PRIMARY KEY, v INT NOT NULL)")
    cur.execute("INSERT INTO t20_new VALUES (1, 1), (2, 2)")
    again = subprocess.run(cmd, env=env, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, again.stderr[-3000:]
    # t20_new is found when the second run starts (not while one runs) and snapshotted in a round of its own
    assert "round 1" in again.stdout, again.stdout
    every = _check(classic_spark, out, state, info, db, ["t01_int", "t20_new"])
    assert [e[4] for e in every if e[0] == "t01_int"] == ["-U", "+U"]
    tables = {r["__table"] for r in classic_spark.read.parquet(out).select("__table").distinct().collect()}
    assert tables == {"t01_int", "t20_new"}
    status = subprocess.run([sys.executable, "-m", "mysql_cdc", "status", "--state-dir", state], env=env, cwd=ROOT,
                            capture_output=True, text=True, timeout=60)
    for t, n in (("t01_int", 300), ("t20_new", 2)):  # every planned chunk recorded
        m = re.search(rf"{db}[.]{t}: (\d+)/(\d+) chunks recorded, {n} rows", status.stdout)
        assert m and m.group(1) == m.group(2), status.stdout
    # the record lags a batch (Spark tells a source of a commit when it plans the next batch): round 1 or later
    assert re.search(r"committed stream offset \(tables .*('round': 1|'rounds': 2)", status.stdout), status.stdout
