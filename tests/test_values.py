"""Value fidelity (C4), first part: the same stored value gives the same canonical value by SELECT (both read
paths) and by binlog (insert, update before and after image, delete), on a server whose time zone is
America/New_York (TIMESTAMPs on both sides of its DST changes), on MySQL 9.7 and MariaDB 10.11.

Each disagreement found while writing this was a wrong value in the binlog path, fixed in
``udtf.convert.binlog_fixup`` / ``udtf.binlog.transactions``: negative TIME with a fraction, BINARY(n) padding,
empty binary strings as text, an empty SET read as NULL, MySQL's binary JSON (the binlog phase crashed on it).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import re
from collections.abc import Callable, Iterator
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pytest

from mysql_cdc.connect import connect, connect_fast
from mysql_cdc.errors import ChunkKeyError, MysqlCdcError, ServerSettingError, UnsupportedTypeError
from mysql_cdc.options import parse_options
from mysql_cdc.planner.plan import plan_tables
from mysql_cdc.profiles import ConnectionProfile
from mysql_cdc.udtf.binlog.phase import BinlogPhase
from mysql_cdc.udtf.binlog.rowimage import RowDecoders
from mysql_cdc.udtf.binlog.server_ids import claimed_id
from mysql_cdc.udtf.binlog.startup import ReadFrom, server_end
from mysql_cdc.udtf.binlog.transactions import read_transactions
from mysql_cdc.udtf.convert import batch_to_rows
from mysql_cdc.udtf.snapshot.reader import SnapshotReader
from tests.helpers import insert_rows, purge_binlogs
from tests.servers import ServerProcess

UTC = dt.timezone.utc
COLUMNS = [  # name, MySQL type
    ("ti", "TINYINT"), ("tu", "TINYINT UNSIGNED"), ("si", "SMALLINT UNSIGNED"), ("mi", "MEDIUMINT"),
    ("mu", "MEDIUMINT UNSIGNED"), ("i", "INT"), ("iu", "INT UNSIGNED"), ("bi", "BIGINT"),
    ("d", "DECIMAL(30,10)"), ("big", "DECIMAL(65,30)"), ("s", "VARCHAR(20)"),
    ("l", "VARCHAR(20) CHARACTER SET latin1"), ("b", "VARBINARY(8)"), ("bn", "BINARY(3)"), ("dd", "DATE"),
    ("dtm", "DATETIME(6)"), ("dt0", "DATETIME"), ("ts", "TIMESTAMP(3) NULL"), ("f", "FLOAT"), ("g", "DOUBLE"),
    ("e", "ENUM('a','b')"), ("st", "SET('x','y')"), ("y", "YEAR"), ("flag", "TINYINT(1)"), ("tx", "TEXT"),
    ("bl", "BLOB"), ("b1", "BIT(1)"), ("b12", "BIT(12)"), ("b64", "BIT(64)"), ("tm", "TIME(6)"),
    ("tm1", "TIME(1)"), ("tm0", "TIME"), ("j", "JSON"), ("geo", "GEOMETRY"),
]
POINT = b"\x00\x00\x00\x00" + bytes.fromhex("0101000000000000000000f03f0000000000000040")  # SRID 0, POINT(1 2)
# SRID 4326 (EPSG axis order latitude, longitude), POINT(10 20) = latitude 10, longitude 20: MySQL stores x =
# longitude first; the WKB we deliver is that, ST_AsWKB(g, 'axis-order=long-lat')
POINT_4326 = bytes.fromhex("e6100000") + bytes.fromhex("010100000000000000000034400000000000002440")
NAMES = [n for n, _ in COLUMNS]
ROWS: list[tuple[Any, ...]] = [
    (2**64 - 1, -128, 255, 65535, -8388608, 16777215, -(2**31), 2**32 - 1, -(2**63),
     Decimal("-12345678901234567890.0123456789"),
     Decimal("12345678901234567890123456789012345.123456789012345678901234567890"), "é😀'\\", "Ärger", b"\x00\xff'",
     b"ab", dt.date(1000, 1, 1), dt.datetime(9999, 12, 31, 23, 59, 59, 999999), dt.datetime(1969, 7, 20, 20, 17, 40),
     dt.datetime(2021, 3, 14, 7, 30, 0, 123000), 3.4e38, -1.7976931348623157e308, "b", "x,y", 2155, 1, "text é",
     b"\x01\x02", 1, 0xABC, 2**64 - 1, "-838:59:59.000000", "-01:00:00.2", "838:59:59",
     '{"b": [1, 2.5, "é"], "a": null, "c": 1e3, "longer key": {"x": true}}', POINT),
    (1, *([None] * len(COLUMNS))),
    (2, 0, 0, 0, 0, 0, 0, 0, 2**63 - 1, Decimal("0E-10"), Decimal(0), "", "", b"", b"\x00\x00\x00",
     dt.date(1970, 1, 1), dt.datetime(1970, 1, 1), dt.datetime(1970, 1, 1), dt.datetime(2021, 11, 7, 5, 30), 1.1, 0.1,
     "a", "", 1901, 0, "", b"", 0, 0, 0, "12:00:00.5", "00:00:00.1", "00:00:00", "[]", None),
    (3, 5, 5, 5, 5, 5, 5, 5, -1, Decimal("0.0000000001"), Decimal("-0.000000000000000000000000000001"), "x", "y",
     b"z", b"z", dt.date(1999, 12, 31), dt.datetime(2000, 2, 29, 12, 0, 0, 5), dt.datetime(2000, 1, 1),
     dt.datetime(2021, 11, 7, 6, 30), -0.0, 1e-300, "a", "y", 2000, 7, "t", b"b", 1, 1, 1, "-00:00:00.000001",
     "-12:34:56.7", "-01:00:00", '{"k": "\\u00e9", "n": 12345678901234567890, "f": -0.5}', POINT),
]


@pytest.fixture(scope="module", params=["mysql", "mariadb"])
def ny_server(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    srv = ServerProcess(request.param, str(tmp_path_factory.mktemp(f"tz-{request.param}")),
                        time_zone="America/New_York")
    srv.start()
    yield srv
    srv.stop()


def binlog_only_phase(profile: ConnectionProfile, facts: Any, opts: Any, plan: Any) -> BinlogPhase:
    """A binlog reader of one planned table that emits every change (no snapshot to correct)."""
    return BinlogPhase(profile, facts, opts, {plan.schema.table: plan.schema}, {plan.schema.table: None})


def read_by_every_path(profile: ConnectionProfile, facts: Any, opts: Any, plan: Any, start: Any, end: Any,
                       planned: bool = True) -> dict[str, dict[int, tuple[Any, ...]]]:
    """Rows by id as each path gives them: "arrow" and "mysqlclient" (snapshot of every chunk), and the
    binlog's images between ``start`` and ``end`` by kind ("+I", "-U", "+U", "-D"; the last image per id), as
    the planned decoder (udtf.binlog.rowimage) gives them (``planned``: it decoded every rows event; else the
    table's rows were written under another definition, and it left them to the library), and as
    python-mysql-replication's decoder gives them ("library +I", ...)."""
    out: dict[str, dict[int, tuple[Any, ...]]] = {}
    for fast in (True, False):
        rows = out.setdefault("arrow" if fast else "mysqlclient", {})
        reader = SnapshotReader(profile, plan.schema, facts, opts, fast=fast)
        paths: set[str] = set()
        for chunk in plan.chunks:
            read = reader.read(chunk)
            got = [r for batch in read.batches for r in batch_to_rows(batch)]
            rows.update({int(r[0]): r for r in got})
            if got:  # (MariaDB's connectorx gives an empty chunk's result no columns: mysqlclient reads it)
                paths.add(read.path)
        if fast and paths == {"arrow"}:
            out["read by connectorx"] = {}  # every chunk with rows (a failed one is read again by mysqlclient)
    for decoder in ("planned", "library"):
        phase = binlog_only_phase(profile, facts, dataclasses.replace(opts, row_decoder=decoder), plan)
        for ch in phase.changes(ReadFrom(start), end):
            out.setdefault(ch.op if decoder == "planned" else f"library {ch.op}", {})[int(ch.values[0])] = ch.values
        if decoder == "planned":  # every rows event was decoded by the plan of its table map, none by the library
            assert phase.decoders is not None and (phase.decoders.library_events == 0) is planned, \
                f"{phase.decoders.library_events if phase.decoders else 'all'} rows events fell back to the library"
    return out


def columns_match_rows(profile: ConnectionProfile, facts: Any, opts: Any, schema: Any, start: Any, end: Any,
                       ops: list[str] | None = None) -> None:
    """The column reader (Arrow columns of walked events, what the Spark surfaces take) gives the arrays the row
    reader's values make, for each rows event of the range (``ops``: their kinds, if given), with whole and key-only
    before images, each event alone and all at once."""
    from mysql_cdc.types import arrow_type, spark_type
    from mysql_cdc.udtf.binlog.columns import ColumnImages, column_arrays

    types = [arrow_type(spark_type(c)) for c in schema.columns]
    for keep in (None, schema.positions(("id",))):
        decoders = RowDecoders({schema.table: schema}, before_keep=None if keep is None else {schema.table: keep})
        with claimed_id(profile, opts) as sid:
            runs = [run for txn in read_transactions(
                profile, sid, start, {schema.table}, flavor=facts.flavor, auto_position=False, end=end,
                server_version=facts.version, decoders=decoders, runs=True, columns=True) for run in txn.rows]
        assert ops is None or [r.op for r in runs] == ops
        assert all(isinstance(r.images, ColumnImages) for r in runs), [type(r.images) for r in runs]
        for run in runs:
            want = [pa.array(col, type=t) for col, t in zip(zip(*run.images.rows()), types)]  # type: ignore
            got = column_arrays([run.images], types)
            for c, w, g in zip(schema.column_names, want, got):
                assert g.equals(w), f"{run.op} {c}: column reader {g.to_pylist()!r}, row reader {w.to_pylist()!r}"
        # the envelope's key-only before images (Output), cut after the walk
        if keep is None and "update" in [r.op for r in runs]:
            key = frozenset(schema.positions(("id",)))
            images = next(r.images for r in runs if r.op == "update")
            cut = images.cut_before(key)  # type: ignore[attr-defined]
            want_rows = [v if k % 2 else tuple(x if i in key else None for i, x in enumerate(v))
                         for k, v in enumerate(images)]
            assert cut.rows() == want_rows
            assert all(g.equals(pa.array(col, type=t))
                       for g, col, t in zip(column_arrays([cut], types), zip(*want_rows), types))
        # many events read at once give the same as each read alone
        together = column_arrays([r.images for r in runs], types)
        alone = [pa.concat_arrays(a) for a in zip(*(column_arrays([r.images], types) for r in runs))]
        assert all(t.equals(a) for t, a in zip(together, alone))


def capture_every_way(srv: ServerProcess, columns_sql: str, load: Callable[[Any], None], arrow: bool = False,
                      columns: bool = False, then: Callable[[Any], None] | None = None, **options: Any
                      ) -> tuple[tuple[str, ...], dict[int, tuple[Any, ...]]]:
    """Create ``v.t`` (id BIGINT UNSIGNED key, ``columns_sql``, touch INT), run ``load`` (a cursor; session in
    UTC) twice around an UPDATE of touch and a DELETE of everything, then read the rows by both SELECT paths
    and the binlog's +I, -U, +U, -D images, assert that every way gives the same values and Python types (and
    that the "arrow" path was connectorx's or, ``arrow`` false, mysqlclient's), with ``columns`` that the column
    reader gives the row reader's values (:func:`columns_match_rows`), and return the column names and the rows by
    id (mysqlclient path). ``then`` (a cursor) runs after the changes and before the table is described: a DDL
    statement there makes the binlog's rows those of another definition of the table, which the planned decoder
    leaves to the library."""
    info = srv.info
    assert info is not None
    root = info.connect(root=True)
    cur = root.cursor()
    cur.execute("CREATE DATABASE IF NOT EXISTS v")
    root.select_db("v")
    cur.execute("DROP TABLE IF EXISTS t")
    cur.execute(f"CREATE TABLE t (id BIGINT UNSIGNED PRIMARY KEY, {columns_sql}, touch INT NOT NULL DEFAULT 0)")
    cur.execute("SET time_zone = '+00:00'")  # TIMESTAMP literals are UTC instants
    profile = ConnectionProfile(info.host, info.port, info.user, info.password, connect_timeout=5)
    opts = parse_options({"tables": "v\\.t", "chunk_size": 100, **options})
    facts, _ = plan_tables(profile, opts)
    start = server_end(profile, facts)
    load(cur)
    cur.execute("UPDATE t SET touch = 1")
    cur.execute("DELETE FROM t")
    load(cur)
    end = server_end(profile, facts)
    if then is not None:
        then(cur)
    _, plans = plan_tables(profile, opts)
    images = read_by_every_path(profile, facts, opts, plans[0], start, end, planned=then is None)
    if columns:
        columns_match_rows(profile, facts, opts, plans[0].schema, start, end)
    root.close()
    assert arrow == ("read by connectorx" in images), f"the Arrow path {'not ' if arrow else ''}taken"

    names = plans[0].schema.column_names
    touch = names.index("touch")
    wrong = []
    snapshot = images["mysqlclient"]
    assert snapshot, "nothing was loaded"
    for id_, snap in snapshot.items():
        for path in ("arrow", "+I", "-U", "+U", "-D", "library +I", "library -U", "library +U", "library -D"):
            for n, a, b in zip(names, snap, images[path][id_]):
                if n != "touch" and (a != b or type(a) is not type(b)):
                    wrong.append((n, id_, path, a, b))
        assert images["+U"][id_][touch] == 1 and snap[touch] == 0
    assert not wrong, "\n".join(f"{t} id={i} via {p}: SELECT {a!r}, {p} {b!r}" for t, i, p, a, b in wrong)
    return names, snapshot


@pytest.mark.parametrize("tinyint1_as_boolean", [False, True])
def test_snapshot_and_binlog_give_the_same_values(ny_server: ServerProcess, tinyint1_as_boolean: bool) -> None:
    def load(cur: Any) -> None:
        insert_rows(cur.connection, "t", ["id", *NAMES], ROWS)
        cur.execute("SET sql_mode = ''")  # zero dates: NULL by both paths (documented)
        cur.execute("INSERT INTO t (id, dd, dtm, dt0, ts) VALUES (4, '0000-00-00', '0000-00-00 00:00:00', "
                    "'0000-00-00 00:00:00', '0000-00-00 00:00:00')")
        cur.execute("SET sql_mode = DEFAULT")

    cols = ", ".join(f"`{n}` {t}" for n, t in COLUMNS)
    names, rows = capture_every_way(
        ny_server, f"{cols}, gs BIGINT AS (i + 1) STORED, gv VARCHAR(30) AS (CONCAT(s, '|', e)) VIRTUAL", load,
        tinyint1_as_boolean=tinyint1_as_boolean)
    snapshots = {"mysqlclient": rows}

    # and the values are the expected ones, not merely equal on both paths
    top, zero, small = (snapshots["mysqlclient"][k] for k in (2**64 - 1, 2, 3))
    col = {n: i for i, n in enumerate(names)}
    assert top[0] == Decimal(2**64 - 1) and top[col["bi"]] == -(2**63) and top[col["iu"]] == 2**32 - 1
    assert top[col["big"]] == "12345678901234567890123456789012345.123456789012345678901234567890"
    assert top[col["ts"]] == dt.datetime(2021, 3, 14, 7, 30, 0, 123000, tzinfo=UTC)  # just after the spring gap
    # 01:30 local twice on 2021-11-07 (EDT, then EST): two different instants
    assert (zero[col["ts"]], small[col["ts"]]) == (dt.datetime(2021, 11, 7, 5, 30, tzinfo=UTC),
                                                   dt.datetime(2021, 11, 7, 6, 30, tzinfo=UTC))
    assert top[col["tm"]] == -dt.timedelta(hours=838, minutes=59, seconds=59)
    assert top[col["tm1"]] == -dt.timedelta(hours=1, microseconds=200000)
    assert small[col["tm"]] == -dt.timedelta(microseconds=1)
    assert small[col["tm1"]] == -dt.timedelta(hours=12, minutes=34, seconds=56, microseconds=700000)
    assert top[col["bn"]] == b"ab\x00" and small[col["bn"]] == b"z\x00\x00" and zero[col["b"]] == b""
    assert zero[col["st"]] == "" and top[col["st"]] == "x,y"
    assert top[col["b1"]] is True and top[col["b12"]] == b"\x0a\xbc" and top[col["b64"]] == b"\xff" * 8
    assert top[col["dtm"]] == dt.datetime(9999, 12, 31, 23, 59, 59, 999999)
    assert top[col["flag"]] == (True if tinyint1_as_boolean else 1) and small[col["flag"]] == (True if
                                                                                             tinyint1_as_boolean else 7)
    assert top[col["geo"]] == POINT[4:] and top[col["gs"]] == -(2**31) + 1 and top[col["gv"]] == "é😀'\\|b"
    zero_dates = snapshots["mysqlclient"][4]
    assert [zero_dates[col[n]] for n in ("dd", "dtm", "dt0", "ts")] == [None] * 4


@pytest.mark.parametrize("arrow", [True, False])
def test_dates_python_has_not_are_null_by_every_path(ny_server: ServerProcess, arrow: bool) -> None:
    """A year 0 and a day its month lacks (kept under ALLOW_INVALID_DATES) are NULL by connectorx's SELECT (which
    kept a year 0 and panicked on 2024-02-30), mysqlclient's, and the binlog's readers (which stopped the read on
    2024-02-30), as zero dates are; the dates about them are kept."""
    rows = [(1, "0000-05-05", "0000-05-05 10:00:00.5", "0000-12-31 23:59:59"),
            (2, "2024-02-30", "2023-02-29 10:00:00.5", "2024-04-31 00:00:00"),
            (3, "0001-01-01", "2024-02-29 23:59:59.999999", "9999-12-31 23:59:59"),
            (4, "2024-02-00", "2024-00-10 00:00:00", "0000-00-00 00:00:00")]

    def load(cur: Any) -> None:
        cur.execute("SET sql_mode = 'ALLOW_INVALID_DATES'")
        cur.executemany("INSERT INTO t (id, dd, dtm, dt0) VALUES (%s, %s, %s, %s)", rows)
        cur.execute("SET sql_mode = DEFAULT")

    # a TIME column (NULL) takes the table off the Arrow path: then "arrow" is mysqlclient's SELECT too
    _, got = capture_every_way(ny_server, "dd DATE, dtm DATETIME(6), dt0 DATETIME" + ("" if arrow else ", tm TIME"),
                               load, arrow=arrow, chunk_size=1)  # a chunk per row: one panic reads one row again
    kept = (dt.date(1, 1, 1), dt.datetime(2024, 2, 29, 23, 59, 59, 999999), dt.datetime(9999, 12, 31, 23, 59, 59))
    assert {i: got[i][1:4] for i in got} == {1: (None,) * 3, 2: (None,) * 3, 3: kept, 4: (None,) * 3}


# a global sql_mode that would change what our SQL reads, were a session of ours to take it
HOSTILE_SQL_MODE = {"mariadb": "ORACLE,PAD_CHAR_TO_FULL_LENGTH,NO_BACKSLASH_ESCAPES",
                    "mysql": "ANSI,PAD_CHAR_TO_FULL_LENGTH,NO_BACKSLASH_ESCAPES"}


@pytest.mark.parametrize("arrow", [True, False])
def test_the_servers_global_settings_change_no_value(ny_server: ServerProcess, arrow: bool) -> None:
    """Every session of the capture sets its own sql_mode (connect.SESSION_INIT): under a global mode that pads a
    CHAR to its length (a SELECT gave 'ab   ' where the binlog has 'ab'), MariaDB's ORACLE (whose CONCAT skips a
    NULL and whose BLOB reads ``blob(65535)``) or NO_BACKSLASH_ESCAPES and ANSI_QUOTES, every path gives the
    values as stored; and its own sql_select_limit (a global one of 1 cut every SELECT to a row: the planner's
    server checks read 'log_bin is None', a chunk would have lost rows), statement time limit and isolation
    level."""
    assert ny_server.info is not None
    mode = HOSTILE_SQL_MODE[ny_server.kind]
    root = ny_server.info.connect(root=True)
    cur = root.cursor()
    cur.execute("SELECT @@GLOBAL.sql_mode, @@GLOBAL.sql_select_limit")
    before, limit = cur.fetchone()
    rows = [(1, "ab", "it's \\ \"q\"", b"\x00'\\", "x,y"), (2, "", "", b"", ""), (3, None, None, None, None)]

    def load(cur: Any) -> None:
        cur.executemany("INSERT INTO t (id, c, v, b, st) VALUES (%s, %s, %s, %s, %s)", rows)
        # the readers' sessions begin after the load
        cur.execute("SET GLOBAL sql_mode = %s, sql_select_limit = 1", (mode,))
        cur.execute(f"SET GLOBAL {limit_name} = 2")
        cur.execute("SET GLOBAL TRANSACTION ISOLATION LEVEL READ COMMITTED")

    limit_name = "max_statement_time" if ny_server.kind == "mariadb" else "max_execution_time"
    cur.execute(f"SELECT @@GLOBAL.{limit_name}")
    (time_limit,) = cur.fetchone()
    profile = ConnectionProfile(ny_server.info.host, ny_server.info.port, ny_server.info.user,
                                ny_server.info.password, connect_timeout=5)
    try:
        _, got = capture_every_way(ny_server, "c CHAR(5), v VARCHAR(20), b BLOB, st SET('x', 'y')" +
                                   ("" if arrow else ", tm TIME"), load, arrow=arrow)
        # and each driver's session reads without a time limit, at REPEATABLE READ (connect.own_session,
        # READ_VIEWS): a global limit stopped a large chunk's SELECT, READ COMMITTED opened no consistent snapshot
        for conn in (connect(profile), connect_fast(profile)):
            c = conn.cursor()
            c.execute(f"SELECT @@SESSION.{limit_name}, @@SESSION.tx_isolation" if ny_server.kind == "mariadb" else
                      f"SELECT @@SESSION.{limit_name}, @@SESSION.transaction_isolation")
            assert tuple(c.fetchone()) in ((0, "REPEATABLE-READ"), (Decimal(0), "REPEATABLE-READ")), conn
            conn.close()
    finally:
        cur.execute("SET GLOBAL sql_mode = %s, sql_select_limit = %s", (before, limit))
        cur.execute(f"SET GLOBAL {limit_name} = %s", (time_limit,))
        cur.execute("SET GLOBAL TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        root.close()
    assert {i: got[i][1:5] for i in got} == {r[0]: r[1:] for r in rows}


# Every fractional precision, more character sets, MySQL's JSON null literal, ENUM/SET in latin1, a geographic
# GEOMETRY, and MariaDB's INET4/INET6/UUID. name: (type, value in row 1, row 2, row 3)
MORE: dict[str, tuple[str, Any, Any, Any]] = {
    **{f"dt{p}": (f"DATETIME({p})", f"2021-03-14 02:30:00.{'987654'[:p]}", "1000-01-01 00:00:00",
                  f"9999-12-31 23:59:59.{'9' * p}") for p in range(7)},
    # UTC instants: just after the spring gap in New York, and the two 01:30 of the fall change
    **{f"ts{p}": (f"TIMESTAMP({p}) NULL", f"2021-03-14 07:00:00.{'987654'[:p]}",
                  f"2021-11-07 05:30:00.{'5' * p}", f"2021-11-07 06:30:00.{'1'.rjust(p, '0') if p else ''}")
       for p in range(7)},
    **{f"tm{p}": (f"TIME({p})", f"-838:59:59.{'0' * p}", f"-00:00:01.{'123456'[:p]}", f"25:00:00.{'5' * p}")
       for p in range(7)},
    "jn": ("JSON", "null", '"null"', "[null, {}]"),
    "l1": ("VARCHAR(10) CHARACTER SET latin1", "Ä€\x81ÿ", "", "a"),
    "tl": ("TEXT CHARACTER SET latin1", "Ä" * 300, "x", None),
    "u3": ("VARCHAR(10) CHARACTER SET utf8mb3", "é中", "", "a"),
    "u16": ("VARCHAR(10) CHARACTER SET utf16", "é😀", "", "\u00ff\u0100"),
    "u16le": ("VARCHAR(10) CHARACTER SET utf16le", "é😀", "", "a"),
    "ucs": ("VARCHAR(10) CHARACTER SET ucs2", "é中", "", "a"),
    "u32": ("VARCHAR(10) CHARACTER SET utf32", "é😀", "", "a"),
    "gr": ("VARCHAR(10) CHARACTER SET greek", "ʽΩʼ", "", "a"),
    "heb": ("VARCHAR(10) CHARACTER SET hebrew", "‾א", "", "a"),
    "c866": ("VARCHAR(10) CHARACTER SET cp866", "ⁿ²Ж", "", "a"),
    "k8u": ("VARCHAR(10) CHARACTER SET koi8u", "•Ї", "", "a"),
    "cyr": ("VARCHAR(10) CHARACTER SET cp1251", "Жук", "", "a"),
    "gbk": ("VARCHAR(10) CHARACTER SET gbk", "中文", "", "a"),  # no exact decoder: the stored bytes
    "b5": ("VARCHAR(10) CHARACTER SET big5", "中文", "", "a"),
    "cb": ("CHAR(4) CHARACTER SET binary", b"a", b"", b"\x00\xff"),
    "el": ("ENUM('a','Ä','é,''x','b\\\\c','n\\nl\\tt') CHARACTER SET latin1", "Ä", "é,'x", "b\\c"),
    "en": ("ENUM('n\\nl','t\\tt','z\\Z') CHARACTER SET utf8mb4", "n\nl", "t\tt", "z\x1a"),
    "sl": ("SET('é','b','Ä') CHARACTER SET latin1", "é,Ä", "", "b"),
    "e16": ("ENUM('x','é') CHARACTER SET utf16", "é", "x", None),
    "g4326": ("GEOMETRY", POINT_4326, POINT, None),
}
MARIADB_MORE: dict[str, tuple[str, Any, Any, Any]] = {
    "i4": ("INET4", "1.2.3.4", "0.0.0.0", "255.255.255.0"),
    "i6": ("INET6", "::ffff:1.2.3.4", "::", "1:0:0:2::3"),
    # v1 ending in zero bytes (the binlog drops them), nil, v4, v7
    "uu": ("UUID", "123e4567-e89b-12d3-a456-426655440000", "00000000-0000-0000-0000-000000000000",
           "0191d6a2-7c3e-7f3a-8b2c-3d4e5f607100"),
}


def test_precisions_charsets_and_server_specific_types(ny_server: ServerProcess) -> None:
    more = {**MORE, **(MARIADB_MORE if ny_server.kind == "mariadb" else {})}

    def load(cur: Any) -> None:
        insert_rows(cur.connection, "t", ["id", *more], [(i, *(v[i] for v in more.values())) for i in (1, 2, 3)])

    names, rows = capture_every_way(ny_server, ", ".join(f"`{n}` {t[0]}" for n, t in more.items()), load)
    col = {n: i for i, n in enumerate(names)}
    r1, r2, r3 = rows[1], rows[2], rows[3]
    _temporal_values_are_the_stored_ones(col, r1, r2, r3)
    # the JSON null literal is the text 'null' (SQL NULL is None), a JSON string "null" is quoted
    assert (r1[col["jn"]], r2[col["jn"]]) == ("null", '"null"')
    for n, (_, a, b, c) in MORE.items():
        if n.startswith(("dt", "ts", "tm", "jn", "g4326")):
            continue
        want = [v.encode(n) if n in ("gbk",) else v for v in (a, b, c)]
        if n == "b5":
            want = [v.encode("big5") for v in (a, b, c)]
        if n == "cb":
            want = [v.ljust(4, b"\x00") for v in (a, b, c)]
        assert [r1[col[n]], r2[col[n]], r3[col[n]]] == want, n
    assert r1[col["g4326"]] == POINT_4326[4:] and r2[col["g4326"]] == POINT[4:]
    if ny_server.kind == "mariadb":
        for n, (_, a, b, c) in MARIADB_MORE.items():
            assert [r1[col[n]], r2[col[n]], r3[col[n]]] == [a, b, c], n


def _temporal_values_are_the_stored_ones(col: dict[str, int], r1: tuple[Any, ...], r2: tuple[Any, ...],
                                         r3: tuple[Any, ...]) -> None:
    """MORE's DATETIME, TIMESTAMP and TIME columns of precision 0-6 hold rows 1-3's values."""
    for p in range(7):
        frac = int("987654"[:p].ljust(6, "0")) if p else 0
        assert r1[col[f"dt{p}"]] == dt.datetime(2021, 3, 14, 2, 30, 0, frac)
        assert r3[col[f"dt{p}"]] == dt.datetime(9999, 12, 31, 23, 59, 59, int("9" * p + "0" * (6 - p)) if p else 0)
        assert r1[col[f"ts{p}"]] == dt.datetime(2021, 3, 14, 7, 0, 0, frac, tzinfo=UTC)
        assert r2[col[f"ts{p}"]] == dt.datetime(2021, 11, 7, 5, 30, 0, int("5" * p + "0" * (6 - p)) if p else 0,
                                                tzinfo=UTC)
        assert r3[col[f"ts{p}"]] == dt.datetime(2021, 11, 7, 6, 30, 0, 10 ** (6 - p) if p else 0, tzinfo=UTC)
        assert r1[col[f"tm{p}"]] == -dt.timedelta(hours=838, minutes=59, seconds=59)
        assert r2[col[f"tm{p}"]] == -dt.timedelta(seconds=1, microseconds=int("123456"[:p].ljust(6, "0")) if p
                                                  else 0)
        assert r3[col[f"tm{p}"]] == dt.timedelta(hours=25, microseconds=int("5" * p + "0" * (6 - p)) if p else 0)


@pytest.mark.parametrize("ny_server", ["mariadb"], indirect=True)  # MySQL 8 and later keep no old format
def test_temporal_columns_in_mariadbs_old_formats(ny_server: ServerProcess) -> None:
    """A MariaDB table of before 10.1.2 (here one made under ``mysql56_temporal_format=OFF``) keeps DATETIME,
    TIME and TIMESTAMP in the old formats, logged without their precision: each precision 0-6 gives the stored
    values by every path, as the new formats do (python-mysql-replication read MariaDB 5.3's DATETIME(2) as 8
    bytes where it holds 6, and the binlog read stopped on the row; it read a negative TIME(0) as unsigned), the
    column reader of the Spark surfaces too, and a date Python has not is NULL."""
    temporal = {n: v for n, v in MORE.items() if n.startswith(("dt", "ts", "tm"))}
    root = ny_server.info.connect(root=True)  # type: ignore[union-attr]
    cur = root.cursor()

    def load(c: Any) -> None:
        insert_rows(c.connection, "t", ["id", *temporal], [(i, *(v[i] for v in temporal.values())) for i in (1, 2, 3)])
        c.execute("SET sql_mode = 'ALLOW_INVALID_DATES'")
        c.execute("INSERT INTO t (id, dt0, dt2, dt5, dt6) VALUES (4, '2024-02-30 10:00:00', '0000-05-05 10:00:00.5', "
                  "'2023-02-29 00:00:00', '2024-04-31 23:59:59.999999')")
        c.execute("SET sql_mode = DEFAULT")

    cur.execute("SET GLOBAL mysql56_temporal_format = OFF")
    try:
        names, rows = capture_every_way(ny_server, ", ".join(f"`{n}` {t[0]}" for n, t in temporal.items()), load,
                                        columns=True)
        cur.execute("SHOW CREATE TABLE v.t")
        made = cur.fetchone()[1]
    finally:
        cur.execute("SET GLOBAL mysql56_temporal_format = ON")
        root.close()
    assert made.count("/* mariadb-5.3 */") == len(temporal), made  # every column in an old format
    col = {n: i for i, n in enumerate(names)}
    _temporal_values_are_the_stored_ones(col, rows[1], rows[2], rows[3])
    assert [rows[4][col[n]] for n in ("dt0", "dt2", "dt5", "dt6")] == [None] * 4

    # rows of the classic formats read with the schema of after an ALTER TABLE to the new formats at a higher
    # precision (a restarted sync's, whose binlog holds rows from before the statement): left to the library's
    # classic reading, not read as the schema's precision would have them (8 bytes of a DATETIME(0) read as a
    # DATETIME(6) were NULL)
    classic = {n: temporal[n] for n in ("dt0", "tm0", "ts0")}
    root = ny_server.info.connect(root=True)  # type: ignore[union-attr]
    cur = root.cursor()

    def again(c: Any) -> None:
        insert_rows(c.connection, "t", ["id", *classic], [(i, *(v[i] for v in classic.values())) for i in (1, 2, 3)])

    def upgrade(c: Any) -> None:
        c.execute("SET GLOBAL mysql56_temporal_format = ON")
        c.execute("ALTER TABLE t MODIFY dt0 DATETIME(6), MODIFY tm0 TIME(6), MODIFY ts0 TIMESTAMP(6) NULL")

    cur.execute("SET GLOBAL mysql56_temporal_format = OFF")
    try:
        names, rows = capture_every_way(ny_server, ", ".join(f"`{n}` {t[0]}" for n, t in classic.items()), again,
                                        then=upgrade)
    finally:
        cur.execute("SET GLOBAL mysql56_temporal_format = ON")
        root.close()
    col = {n: i for i, n in enumerate(names)}
    assert [rows[1][col[n]] for n in classic] == [dt.datetime(2021, 3, 14, 2, 30), -dt.timedelta(
        hours=838, minutes=59, seconds=59), dt.datetime(2021, 3, 14, 7, tzinfo=UTC)]


@pytest.mark.parametrize("ny_server", ["mariadb"], indirect=True)  # a MariaDB attribute
def test_mariadbs_compressed_columns(ny_server: ServerProcess) -> None:
    """MariaDB's COMPRESSED VARCHAR, VARBINARY, TEXT and BLOB columns are logged as types of their own with their
    values compressed (the binlog read stopped on them: "Unknown MySQL column type: 141"): every path gives the
    stored values, whether the server compressed a value (raw deflate, or zlib's format under
    ``column_compression_zlib_wrap``) or kept it as it was (a short one), in a 1- or 2-byte length; the planned
    reader reads every event (a plain string column after compressed ones kept its own collation)."""
    long_text = "Grüße, 世界 " * 40

    def load(c: Any) -> None:
        rows = [(1, long_text, b"\x00\xff" * 300, "Ärger" * 3, long_text.encode(), "Ä" * 500, long_text * 3, "Öl"),
                (2, "é", b"\x00", "a", b"", "", "x", ""),
                (3, "", b"", "", b"\x01" * 100, None, "", None)]
        names = ["id", "v", "vb", "s", "b", "tx", "mt", "plain"]
        insert_rows(c.connection, "t", names, rows[:2])
        c.execute("SET SESSION column_compression_zlib_wrap = ON")
        insert_rows(c.connection, "t", names, [rows[2], (4, *rows[0][1:])])
        c.execute("SET SESSION column_compression_zlib_wrap = DEFAULT")

    names, rows = capture_every_way(
        ny_server, "v VARCHAR(1000) COMPRESSED, vb VARBINARY(700) COMPRESSED, "
        "s VARCHAR(20) CHARACTER SET latin1 COMPRESSED, b BLOB COMPRESSED, tx TEXT CHARACTER SET latin1 COMPRESSED, "
        "mt MEDIUMTEXT COMPRESSED, plain VARCHAR(20) CHARACTER SET latin1", load, arrow=True, columns=True)
    col = {n: i for i, n in enumerate(names)}
    for i in (1, 4):
        assert [rows[i][col[n]] for n in ("v", "vb", "s", "b", "tx", "mt", "plain")] == [
            long_text, b"\x00\xff" * 300, "Ärger" * 3, long_text.encode(), "Ä" * 500, long_text * 3, "Öl"]
    assert [rows[2][col[n]] for n in ("v", "vb", "s", "b", "tx")] == ["é", b"\x00", "a", b"", ""]
    assert rows[3][col["tx"]] is None and rows[3][col["b"]] == b"\x01" * 100


@pytest.mark.parametrize("ny_server", ["mysql"], indirect=True)  # MySQL 8.0.30's
def test_a_generated_invisible_primary_key_hidden_from_information_schema_is_the_key(ny_server: ServerProcess
                                                                                      ) -> None:
    """A table made under sql_generate_invisible_primary_key has a primary key my_row_id, which
    information_schema hides where show_gipk_in_create_table_and_information_schema is OFF (a global): the
    capture planned such a table without a key, and its first change stopped the read (the binlog's rows hold
    the column). Every session of the capture shows it: the key, and every path, with its values."""
    info = ny_server.info
    assert info is not None
    root = info.connect(root=True)
    cur = root.cursor()
    cur.execute("CREATE DATABASE IF NOT EXISTS gipk")
    cur.execute("DROP TABLE IF EXISTS gipk.t")
    cur.execute("SET SESSION sql_generate_invisible_primary_key = ON")
    cur.execute("CREATE TABLE gipk.t (v VARCHAR(10), w INT)")
    cur.execute("SET GLOBAL show_gipk_in_create_table_and_information_schema = OFF")
    try:
        profile = ConnectionProfile(info.host, info.port, info.user, info.password, connect_timeout=5)
        opts = parse_options({"tables": "gipk\\.t", "chunk_size": 100})
        facts, _ = plan_tables(profile, opts)
        start = server_end(profile, facts)
        cur.executemany("INSERT INTO gipk.t (v, w) VALUES (%s, %s)", [("a", 1), ("b", None)])
        cur.execute("UPDATE gipk.t SET w = 5 WHERE v = 'a'")
        end = server_end(profile, facts)
        _, plans = plan_tables(profile, opts)
        images = read_by_every_path(profile, facts, opts, plans[0], start, end)
    finally:
        cur.execute("SET GLOBAL show_gipk_in_create_table_and_information_schema = ON")
        root.close()
    schema = plans[0].schema
    assert schema.primary_key == ("my_row_id",) and schema.column_names == ("my_row_id", "v", "w")
    assert images["mysqlclient"] == {1: (Decimal(1), "a", 5), 2: (Decimal(2), "b", None)}
    assert images["+U"] == images["library +U"] == {1: (Decimal(1), "a", 5)}
    assert images["+I"] == images["library +I"] == {1: (Decimal(1), "a", 1), 2: (Decimal(2), "b", None)}


def _plan_error(profile: ConnectionProfile, db: str, table: str) -> Exception:
    with pytest.raises(MysqlCdcError) as caught:
        plan_tables(profile, parse_options({"tables": f"{re.escape(db)}\\.{table}"}))
    return caught.value


def test_types_without_a_faithful_mapping_fail_at_planning_with_one_clear_error(
        server: ServerProcess, profile: ConnectionProfile, db: str, root: Any) -> None:
    cur = root.cursor()
    # a key in a character set read as bytes: the server orders it by its collation, we would compare bytes
    cur.execute("CREATE TABLE gbk_key (k VARCHAR(10) CHARACTER SET gbk PRIMARY KEY, v INT)")
    err = _plan_error(profile, db, "gbk_key")
    assert isinstance(err, ChunkKeyError) and "'k'" in str(err) and "'gbk'" in str(err) and "chunk_key" in str(err)
    if server.kind == "mysql":
        cur.execute("CREATE TABLE vec (id INT PRIMARY KEY, emb VECTOR(3))")
        err = _plan_error(profile, db, "vec")
        assert type(err) is UnsupportedTypeError
        assert all(s in str(err) for s in (f"'{db}.vec'", "'emb'", "'vector(3)'", "exclude the table")), err
    else:
        for kind in ("UUID", "INET6", "INET4"):
            cur.execute(f"CREATE TABLE k_{kind} (k {kind} PRIMARY KEY, v INT)")
            err = _plan_error(profile, db, f"k_{kind}")
            assert isinstance(err, ChunkKeyError) and "'k'" in str(err) and kind.lower() in str(err), err


@pytest.mark.parametrize("server", ["mysql"], indirect=True)  # VECTOR is a MySQL 9 type
def test_a_vector_table_that_is_not_captured_does_not_stop_the_binlog(profile: ConnectionProfile, db: str,
                                                                      root: Any) -> None:
    """python-mysql-replication cannot parse a VECTOR column's table map; it must never have to."""
    cur = root.cursor()
    cur.execute("CREATE TABLE vec (id INT PRIMARY KEY, emb VECTOR(2))")
    cur.execute("CREATE TABLE ok (id INT PRIMARY KEY, s VARCHAR(5))")
    opts = parse_options({"tables": f"{re.escape(db)}\\.ok"})
    facts, plans = plan_tables(profile, opts)
    start = server_end(profile, facts)
    cur.execute("INSERT INTO vec VALUES (1, STRING_TO_VECTOR('[1, 2]'))")
    cur.execute("INSERT INTO ok VALUES (1, 'a')")
    cur.execute("UPDATE vec SET emb = STRING_TO_VECTOR('[3, 4]')")
    cur.execute("INSERT INTO ok VALUES (2, 'b')")
    end = server_end(profile, facts)
    got = [(ch.op, ch.values[:2]) for ch in binlog_only_phase(profile, facts, opts, plans[0]).changes(
        ReadFrom(start), end)]
    assert got == [("+I", (1, "a")), ("+I", (2, "b"))]


def test_changes_the_binlog_does_not_hold_in_full_stop_the_read_instead_of_being_misread(
        server: ServerProcess, profile: ConnectionProfile, db: str, root: Any) -> None:
    """Planning checks the global settings, but a session may log MINIMAL row images, partial JSON diffs
    (MySQL) or compressed transactions (MySQL; MariaDB compresses globally only): the binlog then lacks the
    values, or the library cannot decode them and would skip them. Each stops the read with one error naming
    the cause and the fix, instead of NULLs or a silently missing change."""
    cur = root.cursor()
    cur.execute("CREATE TABLE t (id INT PRIMARY KEY, s VARCHAR(5), j JSON, pad TEXT)")
    cur.execute("""INSERT INTO t VALUES (1, 'a', '{"a": 1, "b": "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"}', '')""")
    table = re.escape(db) + r"\.t"
    opts = parse_options({"tables": table})
    compress = "binlog_transaction_compression" if server.kind == "mysql" else "log_bin_compress"
    refused = [(compress, "ON")] + ([("binlog_row_value_options", "PARTIAL_JSON")] if server.kind == "mysql" else [])
    for var, value in refused:
        default = "''" if var == "binlog_row_value_options" else "OFF"
        cur.execute(f"SET GLOBAL {var} = '{value}'")
        try:
            with pytest.raises(ServerSettingError, match=f"{var} is '{value}'"):
                plan_tables(profile, opts)
        finally:
            cur.execute(f"SET GLOBAL {var} = {default}")
    facts, plans = plan_tables(profile, opts)
    phase = binlog_only_phase(profile, facts, opts, plans[0])

    def read_after(*statements: str) -> list[str]:
        start = server_end(profile, facts)
        for sql in statements:
            cur.execute(sql)
        return [ch.op for ch in phase.changes(ReadFrom(start), server_end(profile, facts))]

    assert read_after("UPDATE t SET s = 'b'") == ["-U", "+U"]
    compressed = "compressed transaction or event.*binlog_transaction_compression=OFF.*log_bin_compress=OFF"
    cases = [("SET SESSION binlog_row_image = 'MINIMAL'", table + r" at .*without column\(s\) .*binlog_row_image=FULL",
              "SET SESSION binlog_row_image = 'FULL'"),
             # global only; a backfill or restart may also read files written before it was set
             ("SET GLOBAL binlog_row_metadata = 'MINIMAL'",
              table + " at .*without column metadata.*binlog_row_metadata=FULL",
              "SET GLOBAL binlog_row_metadata = 'FULL'")]
    # a session logging statements: on MariaDB the change was dropped silently, on MySQL the read died raw
    as_text = table + r"' at .*logged as an SQL statement.*binlog_format=ROW in every session"
    cases += [("SET SESSION binlog_format = 'STATEMENT'", as_text, "SET SESSION binlog_format = 'ROW'"),
              ("SET SESSION binlog_format = 'MIXED'", as_text, "SET SESSION binlog_format = 'ROW'")]
    if server.kind == "mysql":
        cases += [("SET SESSION binlog_row_value_options = 'PARTIAL_JSON'",
                   table + r" at .*partial JSON change of column\(s\) \['j'\].*new snapshot",
                   "SET SESSION binlog_row_value_options = ''"),
                  ("SET SESSION binlog_transaction_compression = ON", compressed,
                   "SET SESSION binlog_transaction_compression = OFF")]
    else:
        cases += [("SET GLOBAL log_bin_compress = ON", compressed, "SET GLOBAL log_bin_compress = OFF")]
    for n, (setting, message, reset) in enumerate(cases, start=2):
        try:
            with pytest.raises(ServerSettingError, match=message):
                read_after(setting, f"UPDATE t SET j = JSON_SET(j, '$.a', {n}), pad = REPEAT('p', {1000 + n})")
        finally:
            cur.execute(reset)
        assert read_after(f"UPDATE t SET s = 'c{n}'") == ["-U", "+U"]  # and the next change reads again
    # The events written above cannot be read by anyone: keep them out of the files later tests read. (A MariaDB
    # chunk read whose snapshot position follows a Binlog_checkpoint is corrected from the start of the file the
    # checkpoint names, and an unreadable event anywhere in that file stops it.)
    purge_binlogs(cur)  # a later read from the start must not meet them


def test_statement_format_writes_that_may_reach_a_captured_table_stop_the_read(
        server: ServerProcess, profile: ConnectionProfile, db: str, root: Any) -> None:
    """A session with binlog_format=STATEMENT logs its writes as SQL text, without rows. Only statements that
    named a captured table were caught: one writing it through a trigger on another table, an updatable view, a
    stored function or a versioned comment produced no row and no error. Every statement logged as text that
    may change rows now stops the read with one error; with allow_statement_writes, those naming no captured
    table pass (the user accepts what a trigger, view or function would have written)."""
    cur = root.cursor()
    cur.execute("CREATE TABLE t (id INT PRIMARY KEY, v INT)")
    cur.execute("CREATE TABLE o (id INT PRIMARY KEY)")
    cur.execute("CREATE TABLE plain (id INT PRIMARY KEY)")
    cur.execute("CREATE TRIGGER o_to_t AFTER INSERT ON o FOR EACH ROW INSERT INTO t VALUES (NEW.id + 1000, 0)")
    cur.execute("CREATE VIEW v AS SELECT id, v FROM t WHERE id < 100")
    cur.execute("CREATE FUNCTION put_t(k INT) RETURNS INT DETERMINISTIC MODIFIES SQL DATA "
                "BEGIN INSERT INTO t VALUES (k, 1); RETURN k; END")
    table = re.escape(db) + r"\.t"
    facts, plans = plan_tables(profile, parse_options({"tables": table}))
    strict = binlog_only_phase(profile, facts, parse_options({"tables": table}), plans[0])
    lenient = binlog_only_phase(profile, facts, parse_options({"tables": table, "allow_statement_writes": "true"}),
                                plans[0])

    runs = iter(range(10, 1000))

    def read(phase: BinlogPhase, sql: str) -> list[str]:
        start = server_end(profile, facts)
        cur.execute("SET SESSION binlog_format = 'STATEMENT'")
        try:
            cur.execute(sql.replace("{n}", str(next(runs))))
        finally:
            cur.execute("SET SESSION binlog_format = 'ROW'")
        cur.execute("UPDATE t SET v = v + 1 WHERE id = 1")  # a row change after it: the read must get there
        return [ch.op for ch in phase.changes(ReadFrom(start), server_end(profile, facts))]

    cur.execute("INSERT INTO t VALUES (1, 0)")
    indirect = r"a statement \({}\) at .* was logged as SQL text.*a trigger, an updatable view, a stored function"
    cases = [("INSERT INTO o VALUES ({n})", indirect.format("INSERT"), True),  # the trigger writes t
             ("UPDATE v SET v = {n} WHERE id = 1", indirect.format("UPDATE"), True),  # through the view
             ("SELECT put_t({n})", indirect.format("SELECT"), True),  # the function writes t
             ("INSERT INTO plain VALUES ({n})", indirect.format("INSERT"), True),  # nothing shows it cannot
             ("/*!40000 INSERT INTO t VALUES ({n}, 8) */", rf"a change to '{db}.t' at .*logged as an SQL statement",
              False),  # run by every server since 4.0: it names t
             ("/*M!100100 DELETE FROM t WHERE id > 1 */", rf"a change to '{db}.t' at .*logged as an SQL statement",
              False)]
    for sql, message, passes_when_allowed in cases:
        if server.kind == "mysql" and sql.startswith("/*M!"):
            # MariaDB's comment is a comment to MySQL: nothing runs, nothing to stop for
            assert read(strict, sql) == ["-U", "+U"]
            continue
        with pytest.raises(ServerSettingError, match=message) as e:
            read(strict, sql)
        assert "keep binlog_format=ROW in every session" in str(e.value) and "VALUES" not in str(e.value)
        if passes_when_allowed:
            assert read(lenient, sql) == ["-U", "+U"]
        else:
            with pytest.raises(ServerSettingError, match=message):
                read(lenient, sql)
    # none of these is a write: transaction control and account statements logged as text
    for sql in ("CREATE USER IF NOT EXISTS 'nobody_x'@'%'", "GRANT SELECT ON *.* TO 'nobody_x'@'%'",
                "DROP USER 'nobody_x'@'%'"):
        assert read(strict, sql) == ["-U", "+U"]
    purge_binlogs(cur)  # a later read from the start must not meet them


def test_percent_signs_in_table_and_column_names(profile: ConnectionProfile, db: str, root: Any) -> None:
    """The drivers format a statement executed with parameters with Python's %: a % in a table or column name
    broke planning and the snapshot with a raw placeholder error. Every path reads such a table."""
    cur = root.cursor()
    cur.execute("CREATE TABLE `pct%s` (`k%` INT PRIMARY KEY, `v%s%%` VARCHAR(10), `f` FLOAT)")
    # keys spread far apart: split by queries with parameters (not by even ranges)
    insert_rows(root, "pct%s", ["k%", "v%s%%", "f"], [(i * 5000, f"v{i}%", 0.5) for i in range(1, 301)])
    opts = parse_options({"tables": re.escape(db) + r"\.pct%s", "chunk_size": 50})
    facts, plans = plan_tables(profile, opts)
    start = server_end(profile, facts)
    cur.execute("UPDATE `pct%s` SET `v%s%%` = '100%' WHERE `k%` = 35000")
    assert len(plans[0].chunks) >= 6 and plans[0].schema.chunk_key == ("k%",)
    images = read_by_every_path(profile, facts, opts, plans[0], start, server_end(profile, facts))
    for path in ("arrow", "mysqlclient"):
        assert len(images[path]) == 300 and images[path][35000][:3] == (35000, "100%", 0.5), path
        assert images[path][40000][:3] == (40000, "v8%", 0.5)
    assert images["+U"][35000][:2] == (35000, "100%") and images["-U"][35000][:2] == (35000, "v7%")
