"""The sync job on real servers into real Delta tables (delta-rs): a dozen tables of different key kinds mirrored
while writers change them, through the snapshot and the binlog; the job killed with -9 at random points and
started again; afterwards every Delta table equals its source table and no table's log holds a batch twice.
A bad target is one clear error before any data is read."""

from __future__ import annotations

import collections
import datetime as dt
import glob
import json
import os
import random
import re
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from typing import Any

import pyarrow as pa
import pytest

import mysql_cdc
from mysql_cdc.errors import ConfigError
from mysql_cdc.ids import TableId
from mysql_cdc.options import CdcOptions
from mysql_cdc.profiles import ConnectionProfile
from mysql_cdc.state.store import StateStore
from mysql_cdc.udtf.sync import mirror as mirror_mod
from mysql_cdc.udtf.sync.job import query_app_id
from mysql_cdc.udtf.sync.mirror import DeltaMirror, table_path
from tests.conftest import ROOT, _repo_env, wait_until
from tests.helpers import committed_at, give_server_profile, profile_url
from tests.servers import ServerInfo
from tests.test_multi_table import KEYS, NO_KEY, Writers, _keys, _make, _norm, _source
from tests.test_streaming import _checkpoint_state, _ended, _kill, _tail

deltalake = pytest.importorskip("deltalake")  # installed by scripts/setup.sh (extra delta): never skipped in CI

MIRRORED = sorted(t for t in KEYS if t not in NO_KEY)
ODD_NAME = "`tÜ x`"
ODD_DDL = f"CREATE TABLE {ODD_NAME} (`Key Col` INT PRIMARY KEY, `v``q` INT NOT NULL, `select` VARCHAR(10))"


def _delta_rows(to: str, db: str, table: str) -> collections.Counter[tuple[Any, ...]]:
    cols = [*_keys(table), "v"]
    data = deltalake.DeltaTable(table_path(to, TableId(db, table))).to_pyarrow_table(columns=cols)
    return collections.Counter(tuple(_norm(x) for x in row) for row in zip(*(data.column(c).to_pylist()
                                                                              for c in cols)))


def _txns(path: str) -> list[tuple[str, int]]:
    """Every (appId, version) transaction action in a Delta table's log, in commit order."""
    out = []
    for f in sorted(glob.glob(os.path.join(path, "_delta_log", "*.json"))):
        with open(f) as fh:
            for line in fh:
                action = json.loads(line)
                if "txn" in action:
                    out.append((action["txn"]["appId"], int(action["txn"]["version"])))
    return out


def _check_mirror(info: ServerInfo, db: str, to: str, tables: list[str] = MIRRORED) -> int:
    """Every mirrored table equals its source; no batch was committed twice to a table; the batches applied."""
    return check_tables(info, db, tables, lambda t: _delta_rows(to, db, t),
                        lambda t: _txns(table_path(to, TableId(db, t))))


def test_values_of_megabytes_mirror_exactly_through_the_snapshot_and_the_binlog(
        classic_spark: Any, info: ServerInfo, profile: ConnectionProfile, db: str, root: Any, tmp_path: Any) -> None:
    """Values of 1 MiB and more travel on Arrow's buffers through the envelope (rowjson: written and read where
    they are, not as Python objects) and an update's before image holds only its key (``before_images`` key, which
    the sync sets): random bytes (no two alike, nothing to compress) and NULLs come out exact through the snapshot,
    an update of the value, an update of the key, a delete and an insert. Values of ``large_value_bytes`` (here 2
    MiB) and more travel as files instead (``mysql_cdc.large_values``: the sync in local mode puts them under its
    state dir, in a private folder it empties once each batch is applied), a BLOB's and a text's alike."""
    cur = root.cursor()
    cur.execute("CREATE TABLE big (id INT PRIMARY KEY, v INT NOT NULL, payload LONGBLOB, "
                "note MEDIUMTEXT CHARACTER SET utf8mb4)")
    blob = random.Random(7).randbytes
    cur.executemany("INSERT INTO big VALUES (%s, %s, %s, %s)",
                    [(1, 1, blob(3 << 20), "é" * (1 << 19)), (2, 2, None, None), (3, 3, blob((1 << 20) + 1), "x"),
                     (4, 4, b"", "small")])
    to, ck, state = str(tmp_path / "lake"), str(tmp_path / "ck"), str(tmp_path / "state")
    args = dict(to=to, checkpoint=ck, state_dir=state, tables=f"{db}[.]big", source="src",
                profiles={"src": profile_url(profile)}, large_value_bytes=2 << 20)
    files: list[int] = []  # each batch's files of large values

    def sync() -> int:
        files.clear()
        q = mysql_cdc.sync(classic_spark, once=True, on_batch=lambda s: files.append(s.large_values), **args)
        assert q.awaitTermination(600), "the availableNow sync did not end"
        assert q.exception() is None, q.exception()
        folder = os.path.join(state, "large_values")
        assert os.listdir(folder) == [] and os.stat(folder).st_mode & 0o777 == 0o700
        return sum(files)

    def same() -> None:
        cur.execute("SELECT id, v, payload, note FROM big ORDER BY id")
        source = [(r[0], r[1], None if r[2] is None else bytes(r[2]), r[3]) for r in cur.fetchall()]
        data = deltalake.DeltaTable(table_path(to, TableId(db, "big"))).to_pyarrow_table().sort_by("id")
        mirror = list(zip(*(data.column(c).to_pylist() for c in ("id", "v", "payload", "note"))))
        assert [r[:2] for r in mirror] == [r[:2] for r in source]
        assert mirror == source  # (not shown: megabytes)

    assert sync() == 1  # the 3 MiB value
    same()
    # the mirror's files: Snappy, as delta-rs writes by default; min/max statistics for the key and the text
    # (cut to 64 bytes), none for the BLOB (a Parquet writer holds those whole while it writes)
    import pyarrow.parquet as pq
    files = glob.glob(os.path.join(table_path(to, TableId(db, "big")), "*.parquet"))
    assert files
    for f in files:
        meta = pq.ParquetFile(f).metadata
        for g in range(meta.num_row_groups):
            cols = {meta.row_group(g).column(i).path_in_schema: meta.row_group(g).column(i)
                    for i in range(meta.num_columns)}
            assert {c.compression for c in cols.values()} == {"SNAPPY"}, f
            stats = {n: c.statistics is not None and c.statistics.has_min_max for n, c in cols.items()}
            assert stats["id"] and not stats["payload"] and stats["note"], stats
            assert len(cols["note"].statistics.max.encode()) <= 64  # cut, not the 1 MB text whole
    # delta-rs's own pyarrow reader finds rows by a filter on the text column (it reads a string column without
    # statistics as all NULL: a filter on it found nothing)
    found = deltalake.DeltaTable(table_path(to, TableId(db, "big"))).to_pyarrow_table(filters=[("note", "=", "small")])
    assert found.column("id").to_pylist() == [4]
    cur.execute("UPDATE big SET payload = %s WHERE id = 1", (blob(2 << 20),))
    cur.execute("UPDATE big SET id = 30, v = 33 WHERE id = 3")  # the key moves with its large value
    cur.execute("UPDATE big SET v = 44, payload = %s WHERE id = 4", (blob(5 << 20),))
    cur.execute("DELETE FROM big WHERE id = 2")
    cur.execute("INSERT INTO big VALUES (5, 5, %s, NULL)", (blob((3 << 19) + 2),))
    cur.execute("UPDATE big SET note = %s WHERE id = 5", ('"\\\n€ :{"' * (3 << 17),))  # a text of 3.9 MB
    assert sync() == 3  # the 2 MiB and 5 MiB values and the text
    same()
    # a table of large values: the binlog's batches replace their keys' rows (an overwrite by a predicate of
    # the keys, which held a third of a MERGE's memory), in commits that carry the batch's transaction
    history = deltalake.DeltaTable(table_path(to, TableId(db, "big"))).history()
    replaced = [h for h in history if h["operation"] == "WRITE"
                and h["operationParameters"].get("mode") == "Overwrite"]
    assert replaced and not [h for h in history if h["operation"] == "MERGE"], history
    assert all("id IN (" in h["operationParameters"]["predicate"] and "mysql_cdc.batch" in h
               for h in replaced), replaced


def test_zero_dates_in_not_null_columns_mirror_as_null_and_older_mirrors_are_relaxed_in_place(
        classic_spark: Any, info: ServerInfo, profile: ConnectionProfile, db: str, root: Any, tmp_path: Any,
        monkeypatch: Any) -> None:
    """A ``NOT NULL`` DATE, DATETIME or TIMESTAMP column holds zero dates where the SQL mode allows them (a
    mysqldump restore writes them so); they read as NULL (the type table), so a mirror's non-key columns are
    nullable, as Spark's writers make them. A fresh mirror takes them through the snapshot (an append); one made
    before, whose non-key columns kept the source's ``NOT NULL``, is made nullable in place (one metadata commit
    per column, no file rewritten) and takes them through the binlog (its keys' rows replaced). A zero date in a
    key column stops the sync with one error that names it (a mirror merges by key)."""
    cur = root.cursor()
    cur.execute("CREATE TABLE z (id INT PRIMARY KEY, d DATE NOT NULL, dt DATETIME NOT NULL, "
                "ts TIMESTAMP NOT NULL DEFAULT '2000-01-01 00:00:00', v INT NOT NULL)")
    cur.execute("INSERT INTO z VALUES (1, '2024-02-29', '2024-02-29 10:00:00', '2024-02-29 10:00:00', 1)")

    def sync(to: str, ck: str, state: str) -> None:
        q = mysql_cdc.sync(classic_spark, once=True, to=to, checkpoint=ck, state_dir=state, tables=f"{db}[.]z",
                           source="src", profiles={"src": profile_url(profile)})
        assert q.awaitTermination(600), "the availableNow sync did not end"
        assert q.exception() is None, q.exception()

    def mirror(to: str) -> tuple[dict[str, bool], list[tuple[Any, ...]]]:
        t = deltalake.DeltaTable(table_path(to, TableId(db, "z")))
        data = t.to_pyarrow_table().sort_by("id")
        return ({f.name: f.nullable for f in pa.schema(t.schema().to_arrow())},
                list(zip(*(data.column(c).to_pylist() for c in ("id", "d", "dt", "ts", "v")))))

    # a mirror made by the rule before: the source's NOT NULL kept on every column
    rule = mirror_mod.delta_schema
    monkeypatch.setattr(mirror_mod, "delta_schema", lambda s, o: pa.schema(
        [f.with_nullable(s.column(f.name).nullable and f.name not in s.primary_key) for f in rule(s, o)]))
    old = [str(tmp_path / n) for n in ("old", "old-ck", "old-state")]
    older = [str(tmp_path / n) for n in ("older", "older-ck", "older-state")]  # for a delta-rs without the alter
    sync(*old)
    sync(*older)
    assert mirror(old[0])[0] == {"id": False, "d": False, "dt": False, "ts": False, "v": False}
    monkeypatch.undo()
    cur.execute("SET SESSION sql_mode = ''")
    cur.execute("INSERT INTO z VALUES (2, '0000-00-00', '0000-00-00 00:00:00', '0000-00-00 00:00:00', 2)")
    cur.execute("UPDATE z SET d = '0000-00-00', v = 11 WHERE id = 1")
    cur.execute("SET SESSION sql_mode = DEFAULT")
    sync(*old)
    cur.execute("SELECT UNIX_TIMESTAMP(ts) FROM z WHERE id = 1")
    ts = dt.datetime.fromtimestamp(int(cur.fetchone()[0]), dt.timezone.utc)
    nullable, rows = mirror(old[0])
    assert nullable == {"id": False, "d": True, "dt": True, "ts": True, "v": True}
    assert rows == [(1, None, dt.datetime(2024, 2, 29, 10), ts, 11), (2, None, None, None, 2)]
    history = sorted(deltalake.DeltaTable(table_path(old[0], TableId(db, "z"))).history(),
                     key=lambda h: int(h["version"]))
    ops = [(h["operation"], h["operationParameters"].get("mode"), "predicate" in h["operationParameters"])
           for h in history]
    assert [op for op, _, _ in ops].count("CHANGE COLUMN") == 4 and ops[-1] == ("WRITE", "Overwrite", True), ops
    changed = [op for op, _, _ in ops].index("CHANGE COLUMN")
    assert all(p for op, _, p in ops[changed:] if op == "WRITE"), ops  # no rewrite of the table: its keys' rows

    # a fresh mirror: the zero dates come through the snapshot
    new = [str(tmp_path / n) for n in ("new", "new-ck", "new-state")]
    sync(*new)
    assert mirror(new[0]) == (nullable, rows)
    # a delta-rs without alter.drop_column_not_null (older 1.x): the older mirror is rewritten whole instead
    from deltalake.table import TableAlterer
    monkeypatch.delattr(TableAlterer, "drop_column_not_null")
    sync(*older)
    assert mirror(older[0]) == (nullable, rows)
    history = deltalake.DeltaTable(table_path(older[0], TableId(db, "z"))).history()
    assert any(h["operation"] == "WRITE" and h["operationParameters"].get("mode") == "Overwrite"
               and "predicate" not in h["operationParameters"] for h in history), history
    monkeypatch.undo()

    # a zero date in a key column: one error that says so, before the batch is written
    cur.execute("CREATE TABLE zk (d DATE PRIMARY KEY, v INT)")
    cur.execute("SET SESSION sql_mode = ''")
    cur.execute("INSERT INTO zk VALUES ('2024-01-01', 1), ('0000-00-00', 2)")
    cur.execute("SET SESSION sql_mode = DEFAULT")
    q = mysql_cdc.sync(classic_spark, once=True, to=str(tmp_path / "zk"), checkpoint=str(tmp_path / "zk-ck"),
                       state_dir=str(tmp_path / "zk-state"), tables=f"{db}[.]zk", source="src",
                       profiles={"src": profile_url(profile)})
    with pytest.raises(Exception, match=r"key column\(s\) \['d'\] read as NULL: a date Python has not"):
        q.awaitTermination(600)


def test_a_reset_of_a_table_without_a_mirror_is_applied_not_called_applied_before(tmp_path: Any) -> None:
    """A reset (a ``T`` row) of a table whose mirror is not there (nothing to delete) counts as applied; a batch
    line said "already applied" of it. A reset the table's log holds is skipped: false."""
    mirror = DeltaMirror(str(tmp_path / "lake"), CdcOptions(), str(tmp_path / "state"))
    gone, kept = TableId("d", "gone"), TableId("d", "kept")
    assert mirror.reset(gone, "app", 1) is True
    deltalake.write_deltalake(table_path(mirror.root, kept), pa.table({"id": [1, 2]}))
    assert (mirror.reset(kept, "app", 1), mirror.reset(kept, "app", 1)) == (True, False)
    assert deltalake.DeltaTable(table_path(mirror.root, kept)).to_pyarrow_table().num_rows == 0


# one server: what the Python API, the Delta tables and the skip of a batch applied do is not server behaviour;
# the kill -9 case below runs on both servers
@pytest.mark.parametrize("server", ["mysql"], indirect=True)
def test_sync_mirrors_a_dozen_tables_into_delta_under_writers(
        classic_spark: Any, info: ServerInfo, profile: ConnectionProfile, db: str, root: Any, tmp_path: Any,
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(mirror_mod, "CHECKPOINT_EVERY", 3)  # the log's checkpoints, written and read, here too
    _make(root)
    # names to quote: a table name with a space and a non-ASCII letter, columns with a space, a backtick, a
    # reserved word and capitals
    root.cursor().execute(ODD_DDL)
    root.cursor().executemany(f"INSERT INTO {ODD_NAME} VALUES (%s, %s, %s)", [(k, k * 3, f"s{k}") for k in range(300)])
    to, ck, state = str(tmp_path / "lake"), str(tmp_path / "ck"), str(tmp_path / "state")
    args = dict(to=to, checkpoint=ck, state_dir=state, tables=f"{db}[.]t.*", exclude=f"{db}[.]t1[03]_.*",
                source="src", profiles={"src": profile_url(profile)}, chunk_size=200, max_chunks_per_batch=5)
    batches: list[Any] = []
    with Writers(info, db, seed=21):
        q = mysql_cdc.sync(classic_spark, once=True, on_batch=batches.append, **args)
        assert q.awaitTermination(600), "the availableNow sync did not end"
        assert q.exception() is None, q.exception()
        assert _checkpoint_state(ck)[1] == "binlog"
        before = _checkpoint_state(ck)[0]
        q = mysql_cdc.sync(classic_spark, trigger_seconds=0.5, on_batch=batches.append, **args)
        wait_until(lambda: _checkpoint_state(ck)[0] >= before + 4 or not q.isActive, 300, "four binlog batches")
        assert q.isActive, q.exception()
        q.stop()
    # a crash between two tables' MERGEs of one batch: the first table has it, the others not; Spark runs the
    # batch again, which skips the first table and applies the rest
    cur = root.cursor()
    for t in ("t01_int", "t03_ci", "t04_comp", "t05_dec"):
        cur.execute(f"UPDATE {t} SET v = v + 1 ORDER BY v LIMIT 5")
    cur.execute(f"UPDATE {ODD_NAME} SET `v``q` = `v``q` + 1, `select` = 'x y' WHERE `Key Col` < 10")
    real_apply, calls = mirror_mod.DeltaMirror.apply, []

    def crash_after_the_first(self: Any, *a: Any, **kw: Any) -> bool:
        if calls:
            raise RuntimeError("the driver dies here")
        calls.append(real_apply(self, *a, **kw))
        return calls[-1]

    monkeypatch.setattr(mirror_mod.DeltaMirror, "apply", crash_after_the_first)
    q = mysql_cdc.sync(classic_spark, once=True, **args)
    with pytest.raises(Exception, match="the driver dies here"):
        q.awaitTermination(300)
    monkeypatch.setattr(mirror_mod.DeltaMirror, "apply", real_apply)
    assert calls == [True]
    again: list[Any] = []
    q = mysql_cdc.sync(classic_spark, once=True, on_batch=again.append, **args)
    assert q.awaitTermination(300) and q.exception() is None, q.exception()
    changed = {str(TableId(db, t)) for t in ("t01_int", "t03_ci", "t04_comp", "t05_dec", "tÜ x")}
    assert len(again[0].skipped) == 1 and changed <= set(again[0].applied) | set(again[0].skipped), again[0]
    assert _check_mirror(info, db, to) > len(MIRRORED)
    odd = deltalake.DeltaTable(table_path(to, TableId(db, ODD_NAME.strip("`")))).to_pyarrow_table()
    c2 = info.connect(root=True, database=db).cursor()
    c2.execute(f"SELECT * FROM {ODD_NAME}")
    assert sorted(zip(*(c.to_pylist() for c in odd.columns))) == sorted(c2.fetchall())
    assert odd.column_names == ["Key Col", "v`q", "select"]
    assert glob.glob(os.path.join(table_path(to, TableId(db, "t01_int")), "_delta_log", "*.checkpoint.parquet"))
    assert any(b.last_commit is not None for b in batches) and sum(b.rows for b in batches) > 0
    # the Delta tables carry the source's types and key: NOT NULL key columns, DECIMAL(20,0) for BIGINT UNSIGNED
    t02 = deltalake.DeltaTable(table_path(to, TableId(db, "t02_bigu"))).schema()
    fields = {f.name: f for f in t02.fields}
    assert str(fields["id"].type) == 'PrimitiveType("decimal(20,0)")' and not fields["id"].nullable
    # the snapshot's batches are appended (new keys: no MERGE joins the table), the binlog's replace their keys'
    # rows (an overwrite by a predicate of the keys: integer and string keys of one column) or merge (a key of
    # two columns, or more keys than a predicate takes)
    for t, binlog in (("t01_int", {"Overwrite"}), ("t03_ci", {"Overwrite"}), ("t04_comp", {"MERGE"})):
        history = sorted(deltalake.DeltaTable(table_path(to, TableId(db, t))).history(),
                         key=lambda h: int(h["version"]))
        kinds = [h["operationParameters"]["mode"] if h["operation"] == "WRITE" else h["operation"] for h in history]
        n = next(i for i, k in enumerate(kinds) if k in ("Overwrite", "MERGE"))  # the binlog's first batch
        assert kinds[0] == "CREATE TABLE" and n > 1 and set(kinds[1:n]) == {"Append"}, kinds
        assert binlog <= set(kinds[n:]) <= {"Overwrite", "MERGE"}, (t, kinds)
        assert all(h["operationParameters"]["predicate"] for h, k in zip(history, kinds) if k == "Overwrite")
    # a batch that Spark runs again is skipped on a table whose log holds it: here a batch deleting every row
    # of t01_int, given as the last batch applied to it, changes nothing; as a new batch it deletes them all
    schema = StateStore(state).schema(TableId(db, "t01_int"))
    assert schema is not None
    mirror = DeltaMirror(to, CdcOptions(), state)
    app_id, last = _txns(table_path(to, TableId(db, "t01_int")))[-1]
    assert app_id == query_app_id(ck)
    keys = [k for k, _ in _delta_rows(to, db, "t01_int")]
    deletes = pa.table({"id": pa.array(keys, pa.int32()), "v": pa.array([0] * len(keys), pa.int32()),
                        "__op": ["-D"] * len(keys), "_change_seq": pa.array(range(1, len(keys) + 1), pa.int64())})
    assert not mirror.apply(schema, deletes, app_id, last)
    assert _delta_rows(to, db, "t01_int") == _source(info, db, "t01_int")
    assert mirror.apply(schema, deletes, app_id, last + 1)
    assert not _delta_rows(to, db, "t01_int")


def _sync_job(args: list[str], profile: ConnectionProfile, log: str) -> subprocess.Popen[bytes]:
    env = _repo_env(True)
    env["MYSQL_CDC_PROFILE_SRC"] = profile_url(profile)
    with open(log, "ab") as f:
        return subprocess.Popen([sys.executable, "-m", "mysql_cdc", "sync", "--source", "src", *args,
                                 "--master", "local[2]"], cwd=ROOT, env=env, stdout=f, stderr=subprocess.STDOUT,
                                start_new_session=True)


# what a table does just before some kills, which the next runs follow (maybe killed while they do): schema
# changes in place (t01_int, twice), a table snapshotted again (t05_dec: a default filled in; t12_date: a TRUNCATE),
# nothing to follow (an index), a table created (mirrored from then on) and one dropped (its mirror stays, empty)
GONE, NEW = "t14_gone", "t15_new"
DDL_AT_KILL: dict[int, tuple[str, ...]] = {
    1: ("TRUNCATE TABLE t12_date",), 2: ("ALTER TABLE t01_int ADD COLUMN extra INT",),
    3: ("ALTER TABLE t05_dec ADD COLUMN d2 INT NOT NULL DEFAULT 3",),
    4: (f"CREATE TABLE {NEW} (id INT PRIMARY KEY, v INT NOT NULL)", f"INSERT INTO {NEW} VALUES (1, 1), (2, 2), (3, 3)"),
    5: ("ALTER TABLE t01_int DROP COLUMN extra",), 6: ("CREATE INDEX t06_v ON t06_dt (v)",),
    7: (f"DROP TABLE {GONE}",)}
EIGHT_KILLS_TABLES = [*MIRRORED, GONE, NEW]  # GONE's mirror must end empty
RESNAPSHOT_AT_KILL, RESNAPSHOT = 5, "t0[2-7]_.*"  # tables snapshotted again on request, killed in the middle
RANGE_AT_KILL, RANGE_TABLE, RANGE = 6, "t08_neg", (-1900, -1750)  # a key range of one more table, asked later
RANGE_KEYS = (-1500, -1100)  # and two keys of it beside the range (which the writers write too)
# and, in the same batch, keys of a CHAR(36) key (under the database's collation of utf8mb4, where a UUID in capitals
# is the same key): each read alone, the two spellings of one key once
STR_TABLE, STR_KEYS = "t09_uuid", (str(uuid.UUID(int=6 * 7919)), str(uuid.UUID(int=6 * 7919)).upper(),
                                   str(uuid.UUID(int=333 * 7919)))  # ...b99a, ...B99A, ...283be3


def _inside_resnapshot(ck: str, state: str) -> bool | None:
    """Whether the sync's last committed batch lies inside the snapshot round that request 0 asked for, with
    chunks of the round on both sides of it (``None``: the request is done)."""
    from mysql_cdc.udtf.sync.job import batch_end, committed_batches

    now = mysql_cdc.resnapshot(state_dir=state, request=0, checkpoint=ck)
    if now.state != "running":
        return None if now.state == "done" else False
    end = batch_end(ck, committed_batches(ck))
    return end.get("phase") == "snapshot" and end.get("round") == (now.round or 0) + 1 and \
        0 < end["chunk"] < end["chunks"]


def _past_chunks(ck: str, state: str, table: TableId) -> bool:
    """Whether the sync's last committed batch ends in the binlog past every chunk watermark of ``table``."""
    from mysql_cdc.offsets import binlog_file_key

    end = committed_at(ck)
    highs = [(binlog_file_key(r.high.file), r.high.pos) for r in StateStore(state).chunk_records(table)]
    return end is not None and bool(highs) and (binlog_file_key(end[0]), end[1]) > max(highs)


def eight_kills(info: ServerInfo, db: str, root: Any, args: list[str], ck: str, log: str,
                start: Callable[[list[str]], subprocess.Popen[bytes]]) -> None:
    """The sync (``start(args)``: the CLI with a target) killed with -9 eight times at random points of the
    snapshot and of the binlog while writers write, DDL_AT_KILL issued before some kills; then one run to the end
    (``--once``). The caller checks the mirror against the source."""
    _make(root)
    cur = root.cursor()
    cur.execute(f"CREATE TABLE {GONE} (id INT PRIMARY KEY, v INT NOT NULL)")
    cur.executemany(f"INSERT INTO {GONE} VALUES (%s, %s)", [(k, k) for k in range(50)])
    rnd = random.Random(7)
    kills, phases = 0, []
    p: subprocess.Popen[bytes] | None = None
    try:
        with Writers(info, db, seed=22):
            while kills < 8:
                p = start(args)
                committed = _checkpoint_state(ck)[0]
                if kills % 2 == 0:
                    # anywhere: starting Spark, planning, reading a batch, between two tables' MERGEs, committing
                    time.sleep(rnd.uniform(1.0, 8.0))
                else:
                    # a random time after a batch of this run committed (progress is sure); from the fifth kill
                    # on, once the binlog is followed
                    wait_until(lambda c=committed, p=p, k=kills: (_checkpoint_state(ck)[0] > c and (
                        k < 5 or _checkpoint_state(ck)[1] == "binlog")) or p.poll() is not None, 300,
                        "a committed batch after the start")
                    time.sleep(rnd.uniform(0.0, 1.0))
                    phases.append(_checkpoint_state(ck)[1])
                if kills == RESNAPSHOT_AT_KILL:  # tables snapshotted again on demand: killed while it runs
                    state = args[args.index("--state-dir") + 1]
                    asked = subprocess.run([sys.executable, "-m", "mysql_cdc", "resnapshot", "--state-dir", state,
                                            "--tables", f"{db}[.]{RESNAPSHOT}"], cwd=ROOT, env=_repo_env(True),
                                           capture_output=True, text=True, timeout=120)
                    assert asked.returncode == 0 and "snapshot request 0 recorded: the sync takes it at its next " \
                        "micro-batch" in asked.stdout, asked.stdout + asked.stderr
                    wait_until(lambda p=p, state=state: _inside_resnapshot(ck, state) is not False or
                               p.poll() is not None, 300, "a committed batch inside the snapshot asked for")
                    assert _inside_resnapshot(ck, state), "the round ran to its end before the kill"
                if kills == RANGE_AT_KILL:  # a key range: asked once the stream is past the table's watermarks
                    state = args[args.index("--state-dir") + 1]
                    wait_until(lambda p=p, state=state: _past_chunks(ck, state, TableId(db, RANGE_TABLE)) or
                               p.poll() is not None, 300, f"the binlog past {RANGE_TABLE}'s chunks")
                    ranged = subprocess.run([sys.executable, "-m", "mysql_cdc", "resnapshot", "--state-dir", state,
                                             "--tables", f"{db}[.]{RANGE_TABLE}", "--key-from", str(RANGE[0]),
                                             "--key-to", str(RANGE[1]), *(f"--key={k}" for k in RANGE_KEYS)],
                                            cwd=ROOT, env=_repo_env(True),
                                            capture_output=True, text=True, timeout=120)
                    assert ranged.returncode == 0 and "snapshot request 1 recorded" in ranged.stdout, \
                        ranged.stdout + ranged.stderr
                    wait_until(lambda p=p, state=state: _past_chunks(ck, state, TableId(db, STR_TABLE)) or
                               p.poll() is not None, 300, f"the binlog past {STR_TABLE}'s chunks")
                    listed = subprocess.run([sys.executable, "-m", "mysql_cdc", "resnapshot", "--state-dir", state,
                                             "--tables", f"{db}[.]{STR_TABLE}", *(f"--key={k}" for k in STR_KEYS)],
                                            cwd=ROOT, env=_repo_env(True), capture_output=True, text=True, timeout=120)
                    assert listed.returncode == 0 and "snapshot request 2 recorded" in listed.stdout, \
                        listed.stdout + listed.stderr
                    wait_until(lambda p=p, state=state: all(mysql_cdc.resnapshot(
                        state_dir=state, request=r).state != "waiting" for r in (1, 2)) or p.poll() is not None, 300,
                        "the key range and the keys taken by the sync")
                assert p.poll() is None, _tail(log)
                for sql in DDL_AT_KILL.get(kills, ()):
                    cur.execute(sql)
                _kill(p)
                kills += 1
        assert "snapshot" in phases and "binlog" in phases, phases
        cur.execute("UPDATE t01_int SET v = v + 1 ORDER BY id LIMIT 3")  # the last run has changes to apply
        cur.execute(f"INSERT INTO {NEW} VALUES (4, 4)")
        with open(log, "ab") as f:
            f.write(b"\n-- the last run\n")
        p = start([*args, "--once"])
        _ended(p, log, 600)
        done = mysql_cdc.resnapshot(state_dir=args[args.index("--state-dir") + 1], request=0, checkpoint=ck)
        assert done.state == "done" and {t.table for t in done.snapshotted} == {
            t for t in EIGHT_KILLS_TABLES if re.fullmatch(RESNAPSHOT, t)}, done
        # the range: read again alone (the chunks around it recorded with no rows, not
        # read); the caller's check of every mirror against its source says it converged
        store = StateStore(args[args.index("--state-dir") + 1])
        ranged_done = mysql_cdc.resnapshot(state_dir=store.location, request=1, checkpoint=ck)
        assert ranged_done.state == "done", ranged_done
        keys = "".join(f", [{k}, {k + 1})" for k in RANGE_KEYS)
        # (the line names every table of the round that took it: the string keys' table too, when the sync took
        # both requests in one batch)
        assert f"{db}.{RANGE_TABLE} (id in [{RANGE[0]}, {RANGE[1]}){keys})" in ranged_done.line() and \
            ranged_done.line().endswith(f" snapshotted again (from round {ranged_done.round})"), ranged_done.line()
        t08 = TableId(db, RANGE_TABLE)
        records = {r.index: r for r in store.chunk_records(t08)}
        outside = store.outside(t08)
        assert len(outside) == 4 and all(records[i].rows == 0 for i in outside), records  # below, two gaps, above
        inside = [records[i] for i in sorted(records) if i not in outside]
        assert (inside[0].start, inside[-3].end) == (f"[{RANGE[0]}]", f"[{RANGE[1]}]"), inside
        assert [(r.start, r.end) for r in inside[-2:]] == [(f"[{k}]", f"[{k + 1}]") for k in RANGE_KEYS], inside
        # the string keys: one chunk of one key each (its end just after it), in the server's order; the two
        # spellings of one key read once, by the first in Python's order (capitals first); nothing else read
        listed_done = mysql_cdc.resnapshot(state_dir=store.location, request=2, checkpoint=ck)
        assert listed_done.state == "done", listed_done
        shown = ", ".join(map(repr, sorted(STR_KEYS)))
        assert f"{db}.{STR_TABLE} (id in {{{shown}}}) snapshotted again" in listed_done.line(), listed_done.line()
        t09 = TableId(db, STR_TABLE)
        records = {r.index: r for r in store.chunk_records(t09)}
        outside = store.outside(t09)
        assert len(outside) == 3 and all(records[i].rows == 0 for i in outside), records  # below, between, above
        inside = [records[i] for i in sorted(records) if i not in outside]
        assert [(r.start, r.end) for r in inside] == [(f'["{k}"]', f'["{k}",{{"after":true}}]')
                                                      for k in (STR_KEYS[1], STR_KEYS[2])], inside
        assert all(r.rows <= 1 for r in inside), inside
    finally:
        if p is not None and p.poll() is None:  # a failed wait leaves no sync running
            _kill(p)


def check_tables(info: ServerInfo, db: str, tables: list[str],
                 rows: Callable[[str], collections.Counter[tuple[Any, ...]]],
                 batches: Callable[[str], list[tuple[str, int]]]) -> int:
    """Every table's mirror (``rows``: key columns and v) equals its source (GONE's, dropped, is empty); no table
    holds a batch twice (``batches``: its (app id, batch) marks in commit order), and their batches are in
    order. Returns how many batch marks the tables hold."""
    applied = 0
    for t in tables:
        source = collections.Counter() if t == GONE else _source(info, db, t)
        mirror = rows(t)
        if source != mirror:
            lost, extra = source - mirror, mirror - source
            raise AssertionError(f"{t}: mirror != source: missing {sorted(lost)[:4]!r} ({sum(lost.values())}), "
                                 f"extra {sorted(extra)[:4]!r} ({sum(extra.values())})")
        marks = batches(t)
        assert len(marks) == len(set(marks)), f"{t}: a batch was applied twice: {marks}"
        assert t != GONE or len(marks) >= 2, f"{t}: not filled, then emptied by its drop: {marks}"
        versions = [v for _, v in marks]
        assert versions == sorted(versions), f"{t}: batches out of order: {marks}"
        applied += len(marks)
    return applied


@pytest.mark.mysql_by_default  # 9 runs of Spark: MariaDB's resumes: test_binlog.py, stateful props
@pytest.mark.timeout(1200)
def test_sync_killed_with_minus_9_eight_times_converges_exactly_once(
        info: ServerInfo, profile: ConnectionProfile, db: str, root: Any, tmp_path: Any) -> None:
    """The CLI's sync into Delta tables written by delta-rs, killed at random points of the snapshot and of the
    binlog (during a MERGE too: a batch's tables are then partly applied) while writers write, tables change
    (in place, snapshotted again, truncated, created, dropped); restarted each time; at the end every Delta
    table equals its source, and no table's log holds one batch twice. (Spark's Delta and Iceberg: the same
    scenario in tests/test_spark_versions.py, opt-in.)"""
    to, ck, state, log = str(tmp_path / "lake"), str(tmp_path / "ck"), str(tmp_path / "state"), str(tmp_path / "l")
    args = ["--tables", f"{db}[.]t.*", "--exclude", f"{db}[.]t1[03]_.*", "--to", to, "--checkpoint", ck,
            "--state-dir", state, "--chunk-size", "200", "--max-chunks-per-batch", "3", "--interval", "0.2"]
    eight_kills(info, db, root, args, ck, log, lambda a: _sync_job(a, profile, log))
    assert _check_mirror(info, db, to, EIGHT_KILLS_TABLES) > len(EIGHT_KILLS_TABLES)
    columns = deltalake.DeltaTable(table_path(to, TableId(db, "t05_dec"))).schema().to_arrow().names
    assert "d2" in columns and "extra" not in deltalake.DeltaTable(
        table_path(to, TableId(db, "t01_int"))).schema().to_arrow().names, columns
    # progress, not on a terminal: plain lines per batch with rows/s and the binlog lag in seconds and bytes
    last = _tail(log).split("-- the last run")[-1]
    assert re.search(r"batch \d+: [\d,]+ rows \([\d,]+ rows/s\) into \d+ tables.*; binlog lag [\d.]+ s, [\d,]+ "
                     r"bytes\n", last), last
    from mysql_cdc.progress import snapshot_progress

    planned = snapshot_progress(state)
    assert len(planned) >= len(MIRRORED) and all(done == total for _, done, total in planned), planned
    assert f"snapshot: done ({len(planned)} tables)" in last and "\x1b" not in last


def test_sync_progress_is_a_block_redrawn_on_a_terminal_and_plain_lines_elsewhere(tmp_path: Any) -> None:
    import io

    from mysql_cdc.progress import Progress

    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    term, plain = Tty(), io.StringIO()
    for stream in (term, plain):
        p = Progress(stream)
        p.show_block(["batch 0: 10 rows", "  shop.a [#---] 1/4 chunks", "  snapshot: 0 tables done"])
        p.show_block(["batch 1: 5 rows", "  snapshot: 1 tables done"])
    # a terminal: the second block moves up over the three lines of the first and clears each line it writes
    assert term.getvalue().count("\x1b[F") == 3 and term.getvalue().endswith("\x1b[2K  snapshot: 1 tables done\n")
    assert plain.getvalue().splitlines() == ["batch 0: 10 rows", "  shop.a [#---] 1/4 chunks",
                                             "  snapshot: 0 tables done", "batch 1: 5 rows",
                                             "  snapshot: 1 tables done"]


@pytest.mark.parametrize("server", ["mariadb"], indirect=True)  # checks of the target and the tables' keys
def test_a_bad_target_is_one_clear_error_before_any_data_is_read(
        classic_spark: Any, info: ServerInfo, profile: ConnectionProfile, db: str, root: Any, tmp_path: Any) -> None:
    _make(root)
    state = str(tmp_path / "state")
    common = dict(checkpoint=str(tmp_path / "ck"), state_dir=state, source="src",
                  profiles={"src": profile_url(profile)}, once=True)
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    with pytest.raises(mysql_cdc.ConfigError, match="cannot be written"):
        mysql_cdc.sync(classic_spark, to=str(blocker / "lake"), tables=f"{db}[.]t01_int", **common)
    with pytest.raises(mysql_cdc.TableError, match=r"no primary key.*exclude"):
        mysql_cdc.sync(classic_spark, to=str(tmp_path / "lake"), tables=f"{db}[.]t1[03]_.*", **common)
    assert not os.path.exists(tmp_path / "lake") and not os.path.exists(state)  # refused: nothing was made
    # targets are checked before anything is created: an empty one (the working directory), a URI (it made
    # ./s3:/b/x, ./dbfs:/mnt/lake), a checkpoint where a database's mirror would go
    for to, message in (("", "to is empty"), ("s3://b/x", "to 's3://b/x' must be a local path: the sync writes its "
                        "Delta tables with delta-rs"), ("dbfs:/mnt/lake", "is on DBFS, which is mounted on Databricks "
                        "clusters only")):
        with pytest.raises(mysql_cdc.ConfigError, match=re.escape(message)):
            mysql_cdc.sync(classic_spark, to=to, tables=f"{db}[.]t01_int", **common)
    assert not os.path.exists("s3:") and not os.path.exists("dbfs:")
    with pytest.raises(mysql_cdc.ConfigError, match=r"checkpoint .* is inside to .* under 'ck', where the mirror of "
                       r"a database named 'ck' would go.*_sync"):
        mysql_cdc.sync(classic_spark, to=str(tmp_path), tables=f"{db}[.]t01_int", **common)
    # an existing Delta table of another shape where a mirror goes
    to = str(tmp_path / "lake2")
    other = table_path(to, TableId(db, "t08_neg"))
    deltalake.DeltaTable.create(other, schema=pa.schema([pa.field("id", pa.int32()), pa.field("w", pa.string())]))
    with pytest.raises(mysql_cdc.TableError, match=r"for .*t08_neg.* was made by something other than this job.*"
                       r"and it has columns .*\('w', 'string'\).* sync into another target"):
        mysql_cdc.sync(classic_spark, to=to, tables=f"{db}[.]t0[18]_.*", **common)
    # nothing was read or created: no query started (no checkpoint), no other mirror table made
    assert not os.path.exists(common["checkpoint"])
    assert not os.path.exists(table_path(to, TableId(db, "t01_int")))
    # a mirror belongs to the capture that made it: another state_dir is refused, a removed table is an error
    lake3 = str(tmp_path / "lake3")
    q = mysql_cdc.sync(classic_spark, to=lake3, tables=f"{db}[.]t01_int", **{**common, "state_dir": state + "3",
                                                                            "checkpoint": str(tmp_path / "ck3")})
    assert q.awaitTermination(300) and q.exception() is None, q.exception()
    with pytest.raises(mysql_cdc.TableError, match=r"t01_int.* was made by the sync '[0-9a-f-]{36}', not by the "
                       r"capture of state_dir"):
        mysql_cdc.sync(classic_spark, to=lake3, tables=f"{db}[.]t01_int", **{**common, "state_dir": state + "4"})
    shutil.rmtree(table_path(lake3, TableId(db, "t01_int")))
    with pytest.raises(mysql_cdc.StateError, match=r"t01_int.* that this capture made at .* is missing"):
        mysql_cdc.sync(classic_spark, to=lake3, tables=f"{db}[.]t01_int", **{**common, "state_dir": state + "3",
                                                                            "checkpoint": str(tmp_path / "ck3")})
    # the CLI says the same in one line, before Spark starts
    env = _repo_env(True)
    env["MYSQL_CDC_PROFILE_SRC"] = profile_url(profile)
    r = subprocess.run([sys.executable, "-m", "mysql_cdc", "sync", "--source", "src", "--tables", f"{db}[.]t01_int",
                        "--to", str(blocker / "lake"), "--checkpoint", str(tmp_path / "ck2"), "--state-dir", state],
                       cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "ConfigError" in r.stderr, r.stderr
    r = subprocess.run([sys.executable, "-m", "mysql_cdc", "sync", "--source", "src", "--tables", f"{db}[.]t01_int",
                        "--to", "", "--checkpoint", str(tmp_path / "ck2"), "--state-dir", state],
                       cwd=str(tmp_path), env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and r.stderr == "mysql-cdc: ConfigError: to is empty: give a directory (an empty one " \
        "would be the working directory)\n", r.stderr


def _modes(folder: str) -> list[tuple[str, int]]:
    """Every folder and file under ``folder`` (itself too) with its permission bits."""
    out = [(folder, os.stat(folder).st_mode & 0o777)]
    for base, dirs, files in os.walk(folder):
        out += [(os.path.join(base, n), os.stat(os.path.join(base, n)).st_mode & 0o777) for n in dirs + files]
    return out


@pytest.mark.parametrize("server", ["mysql"], indirect=True)  # files, names and locks: not server behaviour
def test_one_sync_at_a_time_names_apart_from_our_folders_and_no_writable_files(
        classic_spark: Any, info: ServerInfo, profile: ConnectionProfile, db: str, root: Any, tmp_path: Any) -> None:
    """Two syncs on one state dir or target both ran (the mirror went back in time); a database ``_sync`` with a
    table ``ck`` landed in README's own checkpoint folder and a table ``_delta_log`` gave a raw traceback; under
    ``umask 000`` the mirror's files were world-writable. Now the second sync is refused naming the holder, no
    mirror folder starts with ``_``, and nothing written is group- or world-writable, the state dir private."""
    import fcntl

    admin = info.connect(root=True)
    cur = admin.cursor()
    cur.execute("DROP DATABASE IF EXISTS `_sync`")
    cur.execute("CREATE DATABASE `_sync`")
    try:
        cur.execute("CREATE TABLE `_sync`.ck (id INT PRIMARY KEY, v INT)")
        cur.executemany("INSERT INTO `_sync`.ck VALUES (%s, %s)", [(i, i) for i in range(50)])
        cur.execute(f"CREATE TABLE `{db}`.`_delta_log` (id INT PRIMARY KEY, v INT)")
        cur.executemany(f"INSERT INTO `{db}`.`_delta_log` VALUES (%s, %s)", [(i, -i) for i in range(40)])
        lake = tmp_path / "lake"
        ck, state = lake / "_sync" / "ck", lake / "_sync" / "state"
        common = dict(to=str(lake), checkpoint=str(ck), state_dir=str(state), tables=f"_sync[.]ck,{db}[.]_delta_log",
                      source="src", profiles={"src": profile_url(profile)})
        q = mysql_cdc.sync(classic_spark, trigger_seconds=0.5, **common)
        try:
            wait_until(lambda: _checkpoint_state(str(ck))[0] >= 1 or not q.isActive, 300, "a committed batch")
            assert q.isActive, q.exception()
            with pytest.raises(mysql_cdc.StateError, match="this process runs a sync on .* already"):
                mysql_cdc.sync(classic_spark, trigger_seconds=0.5, **common)
            env = _repo_env(True)
            env["MYSQL_CDC_PROFILE_SRC"] = profile_url(profile)
            cli = [sys.executable, "-m", "mysql_cdc", "sync", "--source", "src", "--tables", common["tables"],
                   "--to", str(lake), "--checkpoint", str(ck), "--state-dir", str(state), "--once",
                   "--master", "local[2]"]
            second = subprocess.run(cli, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
            assert second.returncode == 2 and second.stderr.count("\n") == 1, second.stderr[-3000:]
            assert re.fullmatch(rf"mysql-cdc: StateError: another sync holds '{re.escape(str(state))}/sync.lock' "
                                rf"\(pid {os.getpid()} on .*, since .*Z\): one sync at a time .*\n", second.stderr)
        finally:
            q.stop()

        def free() -> bool:  # the stopped query's locks are given up (another file description can take them)
            with open(state / "sync.lock", "rb") as f:
                try:
                    fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except OSError:
                    return False
                return True

        wait_until(free, 60, "the stopped sync's locks to be released")
        # the CLI under umask 000: what it writes is still not group- or world-writable
        cur.execute("INSERT INTO `_sync`.ck VALUES (100, 100)")
        done = subprocess.run(cli, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300,
                              preexec_fn=lambda: os.umask(0))
        assert done.returncode == 0, done.stderr[-3000:]
        assert table_path(str(lake), TableId("_sync", "ck")) == str(lake / "~5fsync" / "ck")
        assert table_path(str(lake), TableId(db, "_delta_log")) == str(lake / db / "~5fdelta_log")
        got = deltalake.DeltaTable(table_path(str(lake), TableId("_sync", "ck"))).to_pyarrow_table()
        assert sorted(got.column("id").to_pylist()) == [*range(50), 100]
        got = deltalake.DeltaTable(table_path(str(lake), TableId(db, "_delta_log"))).to_pyarrow_table()
        assert sorted(zip(got.column("id").to_pylist(), got.column("v").to_pylist())) == [(i, -i) for i in range(40)]
        assert json.loads((ck / "metadata").read_text())["id"]  # the checkpoint is Spark's alone
        writable = [(p, oct(m)) for p, m in _modes(str(lake)) if m & 0o022]
        assert writable == [], writable[:5]
        private = [(p, oct(m)) for p, m in _modes(str(state)) if m & 0o077]
        assert private == [], private[:5]
        assert glob.glob(str(lake / "~5fsync" / "ck" / "_delta_log" / "*.json"))  # the modes were checked there
    finally:
        cur.execute("DROP DATABASE IF EXISTS `_sync`")
        admin.close()


@pytest.mark.parametrize("server", ["mysql"], indirect=True)  # the session's kind matters here, not the server's
def test_sync_over_spark_connect_mirrors_the_tables(
        request: pytest.FixtureRequest, info: ServerInfo, profile: ConnectionProfile, db: str, root: Any,
        tmp_path: Any) -> None:
    """The same job from a Spark Connect client: the batch function runs in the server's Python (which has the
    package and deltalake), the Delta tables are written there. It names a profile only the server knows: the
    client neither resolves it nor connects to the database. A profile registered from the client is refused
    first, with the fix: a stream's tasks on the server do not see the session's files, where its password
    would be (docs/DESIGN.md §8)."""
    from tests.test_streaming import _session

    _make(root)
    spark, remote = _session("connect", request)
    give_server_profile(request.getfixturevalue("plugin_connect").env["MYSQL_CDC_PROFILES_FILE"], "server_only",
                        profile)
    assert "MYSQL_CDC_PROFILES_FILE" not in os.environ and "MYSQL_CDC_PROFILE_SERVER_ONLY" not in os.environ
    to = str(tmp_path / "lake")
    some = ["t01_int", "t03_ci", "t04_comp", "t06_dt"]
    try:
        with pytest.raises(ConfigError, match="registered from a Spark Connect client.*give the server the profile"):
            mysql_cdc.sync(spark, once=True, to=to, checkpoint=str(tmp_path / "ck"), state_dir=str(tmp_path / "state"),
                           tables=f"{db}[.]t01_int", source="src", profiles={"src": profile_url(profile)})
        assert not os.path.exists(tmp_path / "ck") and not os.path.exists(tmp_path / "state")
        with Writers(info, db, seed=23):
            q = mysql_cdc.sync(spark, once=True, to=to, checkpoint=str(tmp_path / "ck"),
                               state_dir=str(tmp_path / "state"), tables=",".join(f"{db}[.]{t}" for t in some),
                               source="server_only", chunk_size=200)
            assert q.awaitTermination(600), "the availableNow sync did not end"
            assert q.exception() is None, q.exception()
        root.cursor().execute("UPDATE t01_int SET v = v + 1 ORDER BY id LIMIT 5")
        q = mysql_cdc.sync(spark, once=True, to=to, checkpoint=str(tmp_path / "ck"),
                           state_dir=str(tmp_path / "state"), tables=",".join(f"{db}[.]{t}" for t in some),
                           source="server_only", chunk_size=200)
        assert q.awaitTermination(300) and q.exception() is None, q.exception()
        assert _check_mirror(info, db, to, some) >= len(some)
        # verify from the same client: the source read from this process (the client's profile), the mirror by
        # the server's Spark
        report = mysql_cdc.verify(spark, checkpoint=str(tmp_path / "ck"), state_dir=str(tmp_path / "state"),
                                  source="src", profiles={"src": profile_url(profile)}, recheck_seconds=0)
        assert report.ok and sorted(t.table for t in report.tables) == [f"{db}.{t}" for t in some], report.lines()
        assert all(t.rows > 0 for t in report.tables), report.lines()
        mirror = deltalake.DeltaTable(table_path(to, TableId(db, "t01_int")))
        gone = min(mirror.to_pyarrow_table().column("id").to_pylist())
        mirror.delete(f"id = {gone}")  # behind the sync's back
        report = mysql_cdc.verify(spark, checkpoint=str(tmp_path / "ck"), state_dir=str(tmp_path / "state"),
                                  source="src", tables=f"{db}[.]t01_int", profiles={"src": profile_url(profile)},
                                  recheck_seconds=0)
        assert not report.ok and report.tables[0].missing == (str(gone),), report.lines()
    finally:
        if remote is not None:
            remote.stop()
