"""Schema changes followed (option schema_changes, default follow) by the sync job, on real servers into real Delta
tables: every kind of DDL statement during the binlog phase and during the snapshot, with writers running; the
mirror equals the source afterwards, columns and values, including new columns' values in rows written before
the change. Changes that leave stored values alone are followed in place (the schema history says so and the
table is not snapshotted again); the others snapshot that table again."""

from __future__ import annotations

import datetime as dt
import os
import random
import shutil
from typing import Any

import pytest

import mysql_cdc
from mysql_cdc.errors import ConfigError
from mysql_cdc.ids import TableId
from mysql_cdc.large_values import sync_folder
from mysql_cdc.profiles import ConnectionProfile
from mysql_cdc.state.history import schema_at
from mysql_cdc.state.store import StateStore
from mysql_cdc.udtf.sync.mirror import table_path
from tests.conftest import wait_until
from tests.helpers import counted, profile_url
from tests.servers import ServerInfo
from tests.test_streaming import Churn, _checkpoint_state

deltalake = pytest.importorskip("deltalake")  # installed by scripts/setup.sh (extra delta): never skipped in CI

ROWS = 300
# each table gets one kind of change; what the capture must do with it
CHANGES: dict[str, tuple[list[str], str]] = {
    "a_add": (["ALTER TABLE a_add ADD COLUMN n INT", "UPDATE a_add SET n = id * 2 WHERE id % 3 = 0"], "evolve"),
    "b_default": (["ALTER TABLE b_default ADD COLUMN d INT NOT NULL DEFAULT 7"], "reset"),
    "c_drop": (["ALTER TABLE c_drop DROP COLUMN s"], "evolve"),
    "d_rename": (["ALTER TABLE d_rename RENAME COLUMN s TO s2"], "evolve"),
    "e_widen": (["ALTER TABLE e_widen MODIFY s VARCHAR(100), MODIFY w BIGINT"], "evolve"),
    "f_type": (["ALTER TABLE f_type MODIFY w VARCHAR(20)"], "reset"),
    "g_index": (["CREATE INDEX g_w ON g_index (w)", "DROP INDEX g_w ON g_index"], "same"),
    "h_trunc": (["TRUNCATE TABLE h_trunc"], "reset"),
    "i_move": (["RENAME TABLE i_move TO i_moved"], "reset"),
    # statements in quick succession, rows written between them: the stream comes to the first when the table
    # already has the last one's columns; each is followed in place all the same
    "k_chain": (["ALTER TABLE k_chain ADD COLUMN p INT", "UPDATE k_chain SET p = id WHERE id < 50",
                 "ALTER TABLE k_chain RENAME COLUMN s TO s3, ADD INDEX k_p (p)",
                 "UPDATE k_chain SET s3 = 'k' WHERE id < 9", "ALTER TABLE k_chain DROP COLUMN w"], "evolve"),
    # a generated column added, then its expression changed: both rewrite stored values
    "l_gen": (["ALTER TABLE l_gen ADD COLUMN g INT AS (v * 2) STORED",
               "ALTER TABLE l_gen MODIFY g INT AS (v * 3) STORED"], "reset"),
    # two columns swap names in one statement: pairing columns by name would swap their values
    "m_swap": (["ALTER TABLE m_swap RENAME COLUMN s TO w, RENAME COLUMN w TO s"], "reset"),
    # partitions (made before the capture) truncated and dropped: rows gone with no row in the binlog, which the
    # mirror kept for good (followed as statements that change no column)
    "n_part": (["ALTER TABLE n_part TRUNCATE PARTITION p0, p1"], "reset"),
    "n_drop": (["ALTER TABLE n_drop DROP PARTITION p1"], "reset"),
    "j_ghost": ([  # gh-ost / pt-online-schema-change: a shadow table, copied, swapped in by RENAME
        "CREATE TABLE _j_ghost_gho LIKE j_ghost", "ALTER TABLE _j_ghost_gho ADD COLUMN x INT NOT NULL DEFAULT 5",
        "INSERT INTO _j_ghost_gho (id, v, s, w) SELECT id, v, s, w FROM j_ghost",
        "RENAME TABLE j_ghost TO _j_ghost_del, _j_ghost_gho TO j_ghost", "DROP TABLE _j_ghost_del"], "reset"),
}
WRITTEN = ["a_add", "b_default", "c_drop", "d_rename", "e_widen", "f_type", "g_index", "h_trunc", "k_chain"]


def _make(root: Any, tables: list[str], rows: int = ROWS) -> None:
    cur = root.cursor()
    for t in tables:
        cur.execute(f"CREATE TABLE {t} (id INT PRIMARY KEY, v INT NOT NULL, s VARCHAR(20), w INT)")
        cur.executemany(f"INSERT INTO {t} VALUES (%s, %s, %s, %s)", [(k, k, f"s{k}", k * 10) for k in range(rows)])
    cur.close()
    if tables:  # a table read in more batches than one: its chunks follow the row estimate
        counted(root, *tables)


class KeyWriters(Churn):
    """A thread writing the columns every change keeps (id, v) of some tables: updates, deletes, inserts (the
    thread, its start, stop and error are Churn's)."""

    pause = 0.004

    def __init__(self, info: ServerInfo, db: str, tables: list[str], seed: int) -> None:
        super().__init__(info, db, seed)
        self.tables = tables

    def step(self, cur: Any) -> None:
        t, k, op = self.rng.choice(self.tables), self.rng.randrange(0, ROWS + 100), self.rng.random()
        if op < 0.5:
            cur.execute(f"UPDATE {t} SET v = v + 1 WHERE id = %s", (k,))
        elif op < 0.7:
            cur.execute(f"DELETE FROM {t} WHERE id = %s", (k,))
        else:
            cur.execute(f"INSERT INTO {t} (id, v) VALUES (%s, %s) ON DUPLICATE KEY UPDATE v = v + 1", (k, k))


def _source(info: ServerInfo, db: str, table: str) -> tuple[list[str], list[tuple[Any, ...]]]:
    conn = info.connect(root=True, database=db)
    cur = conn.cursor()
    cur.execute(f"SELECT * FROM {table} ORDER BY id")
    names = [d[0] for d in cur.description]
    rows = [tuple(r) for r in cur.fetchall()]
    conn.close()
    return names, rows


def _mirror(to: str, db: str, table: str) -> tuple[list[str], list[tuple[Any, ...]]]:
    data = deltalake.DeltaTable(table_path(to, TableId(db, table))).to_pyarrow_table()
    rows = sorted(zip(*(data.column(c).to_pylist() for c in data.column_names)), key=lambda r: r[0])
    return list(data.column_names), [tuple(r) for r in rows]


def _check(info: ServerInfo, db: str, to: str, table: str) -> None:
    source, mirror = _source(info, db, table), _mirror(to, db, table)
    assert mirror[0] == source[0], f"{table}: mirror columns {mirror[0]} != source columns {source[0]}"
    if mirror[1] != source[1]:
        lost, extra = set(source[1]) - set(mirror[1]), set(mirror[1]) - set(source[1])
        raise AssertionError(f"{table}: mirror != source: missing {sorted(lost)[:4]} ({len(lost)}), extra "
                             f"{sorted(extra)[:4]} ({len(extra)})")


def _actions(state: str, db: str, table: str) -> list[str]:
    return [e.action for e in StateStore(state).history(TableId(db, table))]


def _sync(spark: Any, args: dict[str, Any]) -> None:
    q = mysql_cdc.sync(spark, once=True, **args)
    assert q.awaitTermination(600), "the availableNow sync did not end"
    assert q.exception() is None, q.exception()


def test_every_kind_of_ddl_in_the_binlog_phase_is_followed_under_writers(
        classic_spark: Any, info: ServerInfo, profile: ConnectionProfile, db: str, root: Any, tmp_path: Any) -> None:
    _make(root, list(CHANGES))
    for t in ("n_part", "n_drop"):
        root.cursor().execute(f"ALTER TABLE {t} PARTITION BY RANGE (id) (PARTITION p0 VALUES LESS THAN (100), "
                              "PARTITION p1 VALUES LESS THAN (200), PARTITION p2 VALUES LESS THAN MAXVALUE)")
    to, ck, state = str(tmp_path / "lake"), str(tmp_path / "ck"), str(tmp_path / "state")
    args = dict(to=to, checkpoint=ck, state_dir=state, tables=f"{db}[.][a-n]_.*", source="src",
                profiles={"src": profile_url(profile)}, chunk_size=100)
    _sync(classic_spark, args)
    assert _checkpoint_state(ck)[1] == "binlog"
    with KeyWriters(info, db, WRITTEN, seed=31) as w:
        q = mysql_cdc.sync(classic_spark, trigger_seconds=0.3, **args)
        cur = root.cursor()
        for t, (statements, _) in CHANGES.items():
            for sql in statements:
                cur.execute(sql)
            # rows written after the change, with its new columns
            if t == "a_add":
                cur.execute("INSERT INTO a_add (id, v, n) VALUES (1001, 1, 5), (1002, 2, NULL)")
            if t == "d_rename":
                cur.execute("UPDATE d_rename SET s2 = 'renamed' WHERE id < 5")
            if t == "f_type":
                cur.execute("INSERT INTO f_type (id, v, w) VALUES (1001, 1, 'text')")
        wait_until(lambda: w.ops > 300 or not q.isActive, 120, "writes after the changes")
        assert q.isActive, q.exception()
        q.stop()
    _sync(classic_spark, args)
    for t in [*CHANGES, "i_moved"]:
        if t != "i_move":
            _check(info, db, to, t)
    # a table renamed away leaves the capture: its mirror is emptied (the rows live on under the new name)
    assert _mirror(to, db, "i_move")[1] == []
    for t, (_, kind) in CHANGES.items():
        actions = _actions(state, db, t)
        assert actions[0] == "snapshot" and kind in actions, f"{t}: history {actions}, expected {kind!r}"
        if kind != "reset":  # followed in place: never snapshotted again
            assert "reset" not in actions and actions.count("snapshot") == 1, f"{t}: {actions}"
    for t in ("n_part", "n_drop"):  # snapshotted again for its partition statement itself
        whys = [e.why for e in StateStore(state).history(TableId(db, t)) if e.action == "reset"]
        assert len(whys) == 1 and whys[0].startswith("changed rows without logging them"), whys
    # the schema history decodes each point with the columns it had: a_add before and after its ADD COLUMN
    history = StateStore(state).history(TableId(db, "a_add"))
    evolved = next(e for e in history if e.action == "evolve")
    before = schema_at(history, evolved.at[0], evolved.at[1] - 1)
    assert before is not None and before.schema is not None
    assert list(before.schema.column_names) == ["id", "v", "s", "w"]
    after = schema_at(history, *evolved.at)
    assert after is not None and after.schema is not None
    assert list(after.schema.column_names) == ["id", "v", "s", "w", "n"]


@pytest.mark.parametrize("server", ["mariadb"], indirect=True)
def test_schema_changes_stop_stops_at_the_first_ddl_with_a_clear_error(
        classic_spark: Any, info: ServerInfo, profile: ConnectionProfile, db: str, root: Any, tmp_path: Any) -> None:
    _make(root, ["a_add"], 50)
    to, ck, state = str(tmp_path / "lake"), str(tmp_path / "ck"), str(tmp_path / "state")
    args = dict(to=to, checkpoint=ck, state_dir=state, tables=f"{db}[.]a_add", source="src",
                profiles={"src": profile_url(profile)}, schema_changes="stop")
    _sync(classic_spark, args)
    root.cursor().execute("ALTER TABLE a_add ADD COLUMN n INT")
    q = mysql_cdc.sync(classic_spark, once=True, **args)
    with pytest.raises(Exception, match=r"SchemaChangedError: table .*a_add.* changed at .*option schema_changes is "
                                        r"stop"):
        q.awaitTermination(300)
    assert _actions(state, db, "a_add") == []  # no history is kept in stop mode
    with pytest.raises(ConfigError, match="bad schema_changes 'sometimes'; expected one of follow, stop"):
        mysql_cdc.sync(classic_spark, once=True, **{**args, "schema_changes": "sometimes"})


def test_ddl_while_the_snapshot_is_read_snapshots_that_table_again(
        classic_spark: Any, info: ServerInfo, profile: ConnectionProfile, db: str, root: Any, tmp_path: Any) -> None:
    """ALTERs land between two snapshot batches: chunks read before them hold rows of the old shape, chunks read
    after of the new (a dropped column makes their SELECT fail). Each changed table is snapshotted again from
    the statement on; the untouched table is not."""
    tables = ["sa_add", "sb_drop", "sc_rename", "sd_same", "se_trunc", "sf_index", "sg_modify", "sh_move"]
    _make(root, tables, 1000)
    to, ck, state = str(tmp_path / "lake"), str(tmp_path / "ck"), str(tmp_path / "state")
    args = dict(to=to, checkpoint=ck, state_dir=state, tables=f"{db}[.]s[a-h]_.*", source="src",
                profiles={"src": profile_url(profile)}, chunk_size=125, max_chunks_per_batch=4)
    done: list[int] = []

    def alter_once(stats: Any) -> None:
        if not done:
            done.append(stats.batch_id)
            cur = info.connect(root=True, database=db).cursor()
            cur.execute("ALTER TABLE sa_add ADD COLUMN n INT")
            cur.execute("ALTER TABLE sb_drop DROP COLUMN s")
            cur.execute("ALTER TABLE sc_rename RENAME COLUMN s TO s2")
            cur.execute("UPDATE sc_rename SET s2 = 'after' WHERE id % 7 = 0")
            cur.execute("TRUNCATE TABLE se_trunc")
            cur.execute("INSERT INTO se_trunc (id, v) VALUES (3, 3)")
            cur.execute("CREATE INDEX sf_v ON sf_index (v)")
            cur.execute("ALTER TABLE sg_modify MODIFY w BIGINT")
            cur.execute("RENAME TABLE sh_move TO sh_moved")

    with KeyWriters(info, db, tables[:6], seed=32):
        q = mysql_cdc.sync(classic_spark, once=True, on_batch=alter_once, **args)
        assert q.awaitTermination(600), "the availableNow sync did not end"
        assert q.exception() is None, q.exception()
    assert done, "no batch ran"
    _sync(classic_spark, args)
    wrong = []  # every table that differs, not the first: which ones differ says where to look
    for t in [*tables[:-1], "sh_moved"]:
        try:
            _check(info, db, to, t)
        except AssertionError as e:
            wrong.append(str(e))
    assert not wrong, "\n".join(wrong)
    assert _mirror(to, db, "sh_move")[1] == []
    for t in ["sa_add", "sb_drop", "sc_rename", "se_trunc", "sg_modify", "sh_move"]:
        assert "reset" in _actions(state, db, t), f"{t}: {_actions(state, db, t)}"
    assert _actions(state, db, "sd_same") == ["snapshot"]
    assert "reset" not in _actions(state, db, "sf_index"), _actions(state, db, "sf_index")  # an index: nothing


@pytest.mark.parametrize("server", ["mysql"], indirect=True)  # the session's kind matters here, not the server's
def test_schema_changes_are_followed_over_spark_connect(
        request: pytest.FixtureRequest, info: ServerInfo, profile: ConnectionProfile, db: str, root: Any,
        tmp_path: Any) -> None:
    """The same following from a Spark Connect client: the stream's driver side and the batch function run in
    the server, which records the schemas and moves the Delta tables to them. Values of ``large_value_bytes`` and
    more travel as files through the folder the client names (none is set by itself over Connect), emptied by the
    server's batch function."""
    from tests.test_streaming import _session

    tables = ["a_add", "d_rename", "h_trunc", "f_type"]
    _make(root, tables, 100)
    big = random.Random(5).randbytes
    cur = root.cursor()
    cur.execute("CREATE TABLE lv_big (id INT PRIMARY KEY, b LONGBLOB, t LONGTEXT CHARACTER SET utf8mb4)")
    cur.executemany("INSERT INTO lv_big VALUES (%s, %s, %s)", [(1, big(5000), "é" * 1500), (2, big(10), "x")])
    spark, remote = _session("connect", request)
    to, ck, state = str(tmp_path / "lake"), str(tmp_path / "ck"), str(tmp_path / "state")
    folder = str(tmp_path / "large")
    # the server's profile (tests.test_streaming._session gives it): a Connect stream cannot use a client's
    args = dict(to=to, checkpoint=ck, state_dir=state, tables=f"{db}[.]({'|'.join([*tables, 'lv_big'])})",
                source="src", chunk_size=40, large_value_dir=folder, large_value_bytes=2000)
    try:
        _sync(spark, args)
        # the sync's own folder under the one given (made by the reader that wrote a file), emptied
        assert os.listdir(folder) == [sync_folder(folder, state).rsplit("/", 1)[1]], os.listdir(folder)
        assert os.listdir(sync_folder(folder, state)) == []
        assert not os.path.exists(os.path.join(state, "large_values"))  # no folder of its own over Connect
        _check(info, db, to, "lv_big")
        for t in tables:
            for sql in CHANGES[t][0]:
                cur.execute(sql)
        cur.execute("INSERT INTO a_add (id, v, n) VALUES (1001, 1, 5)")
        cur.execute("INSERT INTO h_trunc (id, v) VALUES (7, 7)")
        cur.execute("UPDATE lv_big SET b = %s, t = %s WHERE id = 2", (big(9000), '":{"' * 700))
        shutil.rmtree(folder)  # made again by the reader that writes the next large value
        _sync(spark, args)
        assert os.listdir(sync_folder(folder, state)) == []
        for t in [*tables, "lv_big"]:
            _check(info, db, to, t)
        for t in tables:
            assert CHANGES[t][1] in _actions(state, db, t), (t, _actions(state, db, t))
    finally:
        if remote is not None:
            remote.stop()


@pytest.mark.parametrize("server", ["mariadb"], indirect=True)
def test_split_decodes_each_row_with_the_schema_it_was_written_with(
        classic_spark: Any, info: ServerInfo, profile: ConnectionProfile, db: str, root: Any, tmp_path: Any) -> None:
    """The envelope stream across an ADD COLUMN, a RENAME COLUMN and a TRUNCATE: split types every row with the
    table's latest columns (the renamed column's values carried over, the new column NULL in older rows), and
    the stream says the truncate with a T row."""
    from tests.stream_job import start as start_stream

    _make(root, ["a_add", "h_trunc"], 20)
    state, ck, out = str(tmp_path / "state"), str(tmp_path / "ck"), str(tmp_path / "out")

    def run() -> None:
        q = start_stream(classic_spark, profile_url(profile), f"tables={db}[.](a_add|h_trunc)", state, ck, out,
                         "availableNow", max_chunks=4)
        assert q.awaitTermination(300) and q.exception() is None, q.exception()

    run()
    cur = root.cursor()
    cur.execute("UPDATE a_add SET v = -1 WHERE id = 1")
    cur.execute("ALTER TABLE a_add ADD COLUMN n INT")
    cur.execute("UPDATE a_add SET v = -2, n = 42 WHERE id = 2")
    cur.execute("ALTER TABLE a_add RENAME COLUMN s TO s2")
    cur.execute("UPDATE a_add SET v = -3, s2 = 'x' WHERE id = 3")
    cur.execute("TRUNCATE TABLE h_trunc")
    cur.execute("INSERT INTO h_trunc (id, v) VALUES (5, 5)")
    run()
    envelope = classic_spark.read.parquet(out)
    frames = mysql_cdc.split(envelope, state)
    a = frames[f"{db}.a_add"]
    assert a.columns[:5] == ["id", "v", "s2", "w", "n"]
    changes = sorted((r["id"], r["v"], r["s2"], r["n"]) for r in a.where("__op = '+U'").collect())
    assert changes == [(1, -1, "s1", None), (2, -2, "s2", 42), (3, -3, "x", None)], changes
    assert a.where("__op = 'r'").count() == 20
    resets = [(r["__table"], r["_change_type"]) for r in envelope.where("__op = 'T'").collect()]
    assert resets == [("h_trunc", "truncate")], resets
    h = frames[f"{db}.h_trunc"]
    assert sorted(r["id"] for r in h.where("__op = 'r'").collect()) == sorted([*range(20), 5])  # again after T


@pytest.mark.parametrize("server", ["mariadb"], indirect=True)  # MariaDB keeps the old temporal formats
def test_a_restart_across_an_alter_of_old_temporal_columns_reads_both_formats(
        classic_spark: Any, info: ServerInfo, profile: ConnectionProfile, db: str, root: Any, tmp_path: Any) -> None:
    """DATETIME(6) and DATETIME(3) in MariaDB's old format (a table made before 10.1.2) logged without their
    precision, which the readers take from the schema: a sync stopped, rows written, the table rebuilt in the new
    format with d3 widened to DATETIME(6) (``ALTER TABLE ... FORCE``), rows written again, then the sync
    restarted. The rows before the statement are decoded with the schema its history recorded (the old format's,
    with the precision), those after with the new one's, and the mirror equals the source."""
    cur = root.cursor()
    cur.execute("SET GLOBAL mysql56_temporal_format = OFF")
    try:
        cur.execute("CREATE TABLE o_old (id INT PRIMARY KEY, d6 DATETIME(6), d3 DATETIME(3), v INT NOT NULL)")
    finally:
        cur.execute("SET GLOBAL mysql56_temporal_format = ON")
    cur.execute("SHOW CREATE TABLE o_old")
    assert cur.fetchone()[1].count("/* mariadb-5.3 */") == 2  # both columns in the old format

    def rows(ids: range, v: int) -> None:
        cur.executemany("INSERT INTO o_old VALUES (%s, %s, %s, %s)",
                        [(i, f"20{i % 90 + 10}-0{i % 9 + 1}-1{i % 9} 1{i % 10}:2{i % 10}:3{i % 10}.{i:06d}",
                          f"1999-12-31 23:59:5{i % 10}.{i % 1000:03d}", v) for i in ids])

    rows(range(1, 51), 0)
    to, ck, state = str(tmp_path / "lake"), str(tmp_path / "ck"), str(tmp_path / "state")
    args = dict(to=to, checkpoint=ck, state_dir=state, tables=f"{db}[.]o_old", source="src",
                profiles={"src": profile_url(profile)})
    _sync(classic_spark, args)  # the snapshot, then the binlog up to its end: stopped
    rows(range(51, 81), 1)  # logged in the old format, after the checkpoint
    cur.execute("UPDATE o_old SET d6 = '2000-01-01 00:00:00.000001', v = v + 1 WHERE id IN (3, 60)")
    # rebuilt in the new format (mysql56_temporal_format is ON), d3 widened: the rows before the statement, read
    # with the schema of after it, would be taken for the classic format (8 bytes a value, where d3's hold 7)
    cur.execute("ALTER TABLE o_old MODIFY d3 DATETIME(6), FORCE")
    cur.execute("SHOW CREATE TABLE o_old")
    assert "mariadb-5.3" not in cur.fetchone()[1]
    rows(range(81, 101), 2)  # logged in the new format
    cur.execute("UPDATE o_old SET d3 = '2001-02-03 04:05:06.789', v = v + 1 WHERE id IN (4, 70, 90)")
    _sync(classic_spark, args)  # the restart reads across the statement
    _check(info, db, to, "o_old")
    assert _mirror(to, db, "o_old")[1][59][1] == dt.datetime(2000, 1, 1, 0, 0, 0, 1)  # id 60: microseconds kept
    assert _actions(state, db, "o_old") == ["snapshot", "evolve"]  # followed in place, not snapshotted again
