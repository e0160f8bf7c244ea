"""``mysql_cdc_binlog(...)`` from Spark SQL on real servers, classic and Spark Connect: the changes after a
recorded snapshot, typed like it; the startup modes (latest, earliest, offset, timestamp) and a bounded end.
Each case runs on the SQL function and on the ``mysql_cdc_binlog`` data source as a SQL view
(``CREATE TEMPORARY VIEW ... USING mysql_cdc_binlog``), which streams its rows in batches and cuts its range
for ``binlog_partitions`` tasks."""

from __future__ import annotations

import datetime as dt
import re
from typing import Any

import pytest

import mysql_cdc
from mysql_cdc.offsets import binlog_file_key
from mysql_cdc.profiles import ConnectionProfile
from tests.helpers import binlog_end, insert_rows, profile_url, purge_binlogs


def _apply(base: dict[int, Any], rows: list[Any]) -> dict[int, Any]:
    out = dict(base)
    for r in sorted(rows, key=lambda r: (binlog_file_key(r["__file"]), r["__pos"], r["__row"])):
        if r["__op"] in ("-U", "-D"):
            out.pop(r["id"], None)
        else:
            out[r["id"]] = (r["v"], r["s"])
    return out


def _source(root: Any) -> dict[int, Any]:
    cur = root.cursor()
    cur.execute("SELECT id, v, s FROM t")
    out = {int(k): (int(v), s) for k, v, s in cur.fetchall()}
    cur.close()
    return out


SURFACES = pytest.mark.parametrize("surface", ["function", "view"])


def _binlog(spark: Any, db: str, surface: str = "function", **args: Any) -> list[Any]:
    if surface == "function":
        extra = "".join(f", {k} => '{v}'" for k, v in args.items())
        return spark.sql(f"SELECT * FROM mysql_cdc_binlog(source => 'src', table => '{db}.t'{extra})").collect()
    options = "".join(f", {k} '{v}'" for k, v in args.items())
    spark.sql(f"CREATE OR REPLACE TEMPORARY VIEW binlog_changes USING mysql_cdc_binlog "
              f"OPTIONS (source 'src', table '{db}.t'{options})")
    # the function's order: the view's pieces are read in parallel, and their rows come back in that order
    return spark.sql("SELECT * FROM binlog_changes ORDER BY _change_seq").collect()


@SURFACES
def test_binlog_function_after_a_snapshot_rebuilds_the_table(spark: Any, profile: ConnectionProfile, db: str,
                                                             root: Any, tmp_path: Any, surface: str) -> None:
    root.cursor().execute("CREATE TABLE t (id INT PRIMARY KEY, v INT NOT NULL, s VARCHAR(20))")
    insert_rows(root, "t", ["id", "v", "s"], [(k, k, f"s{k}") for k in range(2, 801, 2)])
    mysql_cdc.register(spark, {"src": profile_url(profile)})
    state = str(tmp_path / "state")
    snap = (spark.read.format("mysql_cdc").option("source", "src").option("table", f"{db}.t")
            .option("chunk_size", 100).option("state_dir", state).load().collect())
    base = {r["id"]: (r["v"], r["s"]) for r in snap}
    cur = root.cursor()
    cur.execute("UPDATE t SET v = -1, s = 'moved' WHERE id = 700")
    cur.execute("UPDATE t SET id = 3 WHERE id = 700")  # moves a key from the last chunks to the first
    cur.execute("DELETE FROM t WHERE id BETWEEN 100 AND 120")
    cur.execute("INSERT INTO t VALUES (101, 1, 'new'), (9999, 2, NULL)")
    cur.execute("FLUSH BINARY LOGS")
    cur.execute("UPDATE t SET s = 'é😀' WHERE id = 4")
    rows = _binlog(spark, db, surface, state_dir=state)
    assert _apply(base, rows) == _source(root)
    assert [r["__op"] for r in rows].count("-D") == 11
    first = rows[0]
    assert first["__database"] == db and first["__table"] == "t" and first["__chunk_id"] is None
    assert isinstance(first["_commit_timestamp"], dt.datetime) and first["__pos"] > 0
    # Spark's change vocabulary: the LONG sequence orders the changes as (file number, position, row) does,
    # across the FLUSH above, and no two images share one
    by_position = sorted(rows, key=lambda r: (binlog_file_key(r["__file"]), r["__pos"], r["__row"]))
    assert [r["_change_seq"] for r in by_position] == sorted({r["_change_seq"] for r in rows})
    assert len({r["__file"] for r in rows}) == 2 and min(r["_change_seq"] for r in rows) > 0
    assert {(r["__op"], r["_change_type"]) for r in rows} == {
        ("+I", "insert"), ("-U", "update_preimage"), ("+U", "update_postimage"), ("-D", "delete")}
    # MySQL uuid:n, MariaDB domain-server-seq
    assert re.fullmatch(r"[0-9a-f-]{36}:\d+|\d+-\d+-\d+", first["__gtid"]), first["__gtid"]
    with pytest.raises(Exception, match="no chunk watermarks"):
        _binlog(spark, db, surface, state_dir=str(tmp_path / "empty"))


@SURFACES
def test_binlog_function_startup_modes_and_end(spark: Any, profile: ConnectionProfile, db: str, root: Any,
                                               surface: str) -> None:
    cur = root.cursor()
    purge_binlogs(cur)  # 'earliest' reads from here, not through every earlier test's changes
    cur.execute("CREATE TABLE t (id INT PRIMARY KEY, v INT NOT NULL, s VARCHAR(20))")
    cur.execute("INSERT INTO t VALUES (1, 1, 'a'), (2, 2, 'b')")
    mysql_cdc.register(spark, {"src": profile_url(profile)})
    file, pos, _ = binlog_end(root)
    mariadb = "mariadb" in root.get_server_info().lower()
    cur.execute("SELECT @@gtid_binlog_pos" if mariadb else "SELECT @@gtid_executed")
    gtids = str(cur.fetchone()[0]).replace("\n", "")
    cur.execute("SELECT UNIX_TIMESTAMP()")
    now = int(cur.fetchone()[0])
    cur.execute("INSERT INTO t VALUES (3, 3, 'c')")
    cur.execute("UPDATE t SET v = 20 WHERE id = 2")
    mid_file, mid_pos, _ = binlog_end(root)
    cur.execute("DELETE FROM t WHERE id = 1")

    assert _binlog(spark, db, surface, startup="latest") == []
    rows = _binlog(spark, db, surface, startup="offset", startup_offset=f"{file}:{pos}")
    assert [(r["__op"], r["id"]) for r in rows] == [("+I", 3), ("-U", 2), ("+U", 2), ("-D", 1)]
    by_gtid = _binlog(spark, db, surface, startup="offset", startup_offset=gtids)  # every transaction after the set
    assert [(r["__op"], r["id"]) for r in by_gtid] == [("+I", 3), ("-U", 2), ("+U", 2), ("-D", 1)]
    bounded = _binlog(spark, db, surface, startup="offset", startup_offset=f"{file}:{pos}", end=f"{mid_file}:{mid_pos}")
    assert [(r["__op"], r["id"]) for r in bounded] == [("+I", 3), ("-U", 2), ("+U", 2)]
    # from the first binlog file: every change of the table since its creation, so from nothing to the table
    assert _apply({}, _binlog(spark, db, surface, startup="earliest")) == _source(root)
    # from a time: the commits since then (those in the same second as `now` included)
    timed = _binlog(spark, db, surface, startup="timestamp", startup_timestamp=str(now + 3600))
    assert timed == []
    timed = _binlog(spark, db, surface, startup="timestamp", startup_timestamp=str(now))
    assert {("+I", 3), ("-D", 1)} <= {(r["__op"], r["id"]) for r in timed}
    with pytest.raises(Exception, match="startup_offset"):
        _binlog(spark, db, surface, startup="offset")
    # Flink's milliseconds, with their unit; without it a clear error (it was an empty result)
    timed_ms = _binlog(spark, db, surface, startup="timestamp", startup_timestamp=f"{now * 1000}ms")
    assert {(r["__op"], r["id"]) for r in timed_ms} == {(r["__op"], r["id"]) for r in timed}
    with pytest.raises(Exception, match=r"not a time in seconds.*for milliseconds write '\d+ms'"):
        _binlog(spark, db, surface, startup="timestamp", startup_timestamp=str(now * 1000))
    # a file the server does not have, a position past its end: one clear error each (they were empty results)
    with pytest.raises(Exception, match=r"binlog file 'nosuch\.000001', which does not exist \(the server has "):
        _binlog(spark, db, surface, startup="offset", startup_offset="nosuch.000001:4")
    with pytest.raises(Exception, match=rf"position 999999999 is outside '{re.escape(file)}'"):
        _binlog(spark, db, surface, startup="offset", startup_offset=f"{file}:999999999")
    with pytest.raises(Exception, match=r"bad end 'soon'; expected 'latest' or 'file:pos'"):
        _binlog(spark, db, surface, startup="latest", end="soon")
    if surface == "function":
        with pytest.raises(Exception, match=r"binlog_partitions 2 does nothing in mysql_cdc_binlog.*readStream"):
            _binlog(spark, db, surface, startup="latest", binlog_partitions=2)
    else:  # the view cuts its range for that many tasks (at least 1 MiB each: this range is one piece)
        assert [(r["__op"], r["id"]) for r in _binlog(spark, db, surface, startup="offset",
                                                      startup_offset=f"{file}:{pos}", end=f"{mid_file}:{mid_pos}",
                                                      binlog_partitions=2)] == [("+I", 3), ("-U", 2), ("+U", 2)]
    # a position inside an event is told apart from a purged file (server error 1236 for both)
    with pytest.raises(Exception, match=r"a position must be the end of an event") as inside:
        _binlog(spark, db, surface, startup="offset", startup_offset=f"{file}:{pos + 1}")
    assert "purged" not in str(inside.value)
    # a DDL of the table inside the range: the read ends just before it, a read from there stops
    cur.execute("DELETE FROM t WHERE id = 3")
    pre_file, pre_pos, _ = binlog_end(root)
    cur.execute("ALTER TABLE t ADD INDEX iv (v)")
    cur.execute("INSERT INTO t VALUES (6, 6, 'f')")
    before = _binlog(spark, db, surface, startup="offset", startup_offset=f"{mid_file}:{mid_pos}")
    assert [(r["__op"], r["id"]) for r in before] == [("-D", 1), ("-D", 3)]
    with pytest.raises(Exception, match=r"SchemaChangedError: table '[^']+' changed at .*ADD INDEX"):
        _binlog(spark, db, surface, startup="offset", startup_offset=f"{pre_file}:{pre_pos}")


def test_binlog_view_reads_a_long_range_in_pieces(spark: Any, profile: ConnectionProfile, db: str, root: Any
                                                   ) -> None:
    """The view cuts a range of several MiB at transaction boundaries for ``binlog_partitions`` tasks: the rows
    are the SQL function's, each once, and more than one task read them."""
    cur = root.cursor()
    cur.execute("CREATE TABLE t (id INT PRIMARY KEY, v INT NOT NULL, s VARCHAR(2000))")
    mysql_cdc.register(spark, {"src": profile_url(profile)})
    file, pos, _ = binlog_end(root)
    for k in range(40):  # 40 transactions of 100 rows of about 1 KB: about 4 MiB of binlog
        insert_rows(root, "t", ["id", "v", "s"], [(k * 100 + i, i, f"{k}-{i}-" + "x" * 1000) for i in range(100)])
        cur.execute(f"UPDATE t SET v = v + 1 WHERE id BETWEEN {k * 100} AND {k * 100 + 9}")
    end_file, end_pos, _ = binlog_end(root)
    cur.execute("DELETE FROM t WHERE id < 50")  # after the range's end: not read
    rng = {"startup": "offset", "startup_offset": f"{file}:{pos}", "end": f"{end_file}:{end_pos}"}
    whole = _binlog(spark, db, "function", **rng)
    pieces = _binlog(spark, db, "view", binlog_partitions=3, **rng)
    assert len(whole) == 4000 + 40 * 20
    assert pieces == whole  # in _change_seq order: the function's order
    tasks = spark.sql("SELECT count(DISTINCT p) AS n FROM (SELECT spark_partition_id() AS p FROM binlog_changes)"
                      ).collect()[0]["n"]
    assert tasks == 3
    # a DataFrame loaded before an ALTER of its table and read after it (a classic session keeps its analyzed
    # plan; a view, and Spark Connect, plan the read again): one clear error, not batches of other columns
    old = (spark.read.format("mysql_cdc_binlog").option("source", "src").option("table", f"{db}.t")
           .option("startup", "latest").load())
    assert old.columns[:4] == ["id", "v", "s", "__op"]
    cur.execute("ALTER TABLE t ADD COLUMN w INT")
    if "connect" not in type(spark).__module__:
        with pytest.raises(Exception, match="the tables changed since this DataFrame or view was made"):
            old.collect()
    fresh = (spark.read.format("mysql_cdc_binlog").option("source", "src").option("table", f"{db}.t")
             .option("startup", "latest").load())
    assert fresh.columns[:4] == ["id", "v", "s", "w"] and fresh.collect() == []
