"""Value fidelity (C4), first part: the same stored value gives the same canonical value by SELECT (both read
paths) and by binlog (insert, update before and after image, delete), on a server whose time zone is
America/New_York (TIMESTAMPs on both sides of its DST changes), on MySQL 9.7 and MariaDB 10.11.

Each disagreement found while writing this was a wrong value in the binlog path, fixed in
``udtf.convert.binlog_fixup`` / ``udtf.binlog_events``: negative TIME with a fraction, BINARY(n) padding,
empty binary strings as text, an empty SET read as NULL, MySQL's binary JSON (the binlog phase crashed on it).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from decimal import Decimal
from typing import Any

import pytest

from mysql_cdc.options import ConnectionProfile, parse_options
from planner.plan import plan_tables
from tests.helpers import insert_rows
from tests.servers import ServerProcess
from udtf.binlog import BinlogPhase, ReadFrom, server_end
from udtf.convert import batch_to_rows
from udtf.snapshot import SnapshotReader

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


def read_by_every_path(profile: ConnectionProfile, facts: Any, opts: Any, plan: Any, start: Any, end: Any
                       ) -> dict[str, dict[int, tuple[Any, ...]]]:
    """Rows by id as each path gives them: "arrow" and "mysqlclient" (snapshot of every chunk), and the
    binlog's images between ``start`` and ``end`` by kind ("+I", "-U", "+U", "-D"; the last image per id)."""
    out: dict[str, dict[int, tuple[Any, ...]]] = {}
    for fast in (True, False):
        rows = out.setdefault("arrow" if fast else "mysqlclient", {})
        for chunk in plan.chunks:
            for batch in SnapshotReader(profile, plan.schema, facts, opts, fast=fast).read(chunk).batches:
                rows.update({int(r[0]): r for r in batch_to_rows(batch)})
    phase = BinlogPhase(profile, facts, opts, {plan.schema.table: plan.schema}, {plan.schema.table: None})
    for ch in phase.changes(ReadFrom(start), end):
        out.setdefault(ch.op, {})[int(ch.values[0])] = ch.values
    return out


@pytest.mark.parametrize("tinyint1_as_boolean", [False, True])
def test_snapshot_and_binlog_give_the_same_values(ny_server: ServerProcess, tinyint1_as_boolean: bool) -> None:
    info = ny_server.info
    assert info is not None
    root = info.connect(root=True)
    cur = root.cursor()
    cur.execute("CREATE DATABASE IF NOT EXISTS v")
    root.select_db("v")
    cur.execute("DROP TABLE IF EXISTS t")
    cols = ", ".join(f"`{n}` {t}" for n, t in COLUMNS)
    cur.execute(f"CREATE TABLE t (id BIGINT UNSIGNED PRIMARY KEY, {cols}, touch INT NOT NULL DEFAULT 0, "
                "gs BIGINT AS (i + 1) STORED, gv VARCHAR(30) AS (CONCAT(s, '|', e)) VIRTUAL)")
    cur.execute("SET time_zone = '+00:00'")  # TIMESTAMP literals below are UTC instants
    profile = ConnectionProfile(info.host, info.port, info.user, info.password, connect_timeout=5)
    opts = parse_options({"tables": "v\\.t", "chunk_size": 100, "tinyint1_as_boolean": tinyint1_as_boolean})
    facts, _ = plan_tables(profile, opts)
    start = server_end(profile, facts)
    def load() -> None:
        insert_rows(root, "t", ["id", *NAMES], ROWS)
        cur.execute("SET sql_mode = ''")  # zero dates: NULL by both paths (documented)
        cur.execute("INSERT INTO t (id, dd, dtm, dt0, ts) VALUES (4, '0000-00-00', '0000-00-00 00:00:00', "
                    "'0000-00-00 00:00:00', '0000-00-00 00:00:00')")
        cur.execute("SET sql_mode = DEFAULT")

    load()
    cur.execute("UPDATE t SET touch = 1")
    cur.execute("DELETE FROM t")
    load()
    end = server_end(profile, facts)
    _, plans = plan_tables(profile, opts)
    schema = plans[0].schema
    images = read_by_every_path(profile, facts, opts, plans[0], start, end)
    snapshots = {"arrow": images["arrow"], "mysqlclient": images["mysqlclient"]}
    root.close()

    names = schema.column_names
    touch = names.index("touch")
    wrong = []
    for id_, snap in snapshots["mysqlclient"].items():
        others = {"arrow": snapshots["arrow"][id_], "+I": images["+I"][id_], "-U": images["-U"][id_],
                  "+U": images["+U"][id_], "-D": images["-D"][id_]}
        for path, row in others.items():
            for n, a, b in zip(names, snap, row):
                if n != "touch" and (a != b or type(a) is not type(b)):
                    wrong.append((dict(COLUMNS).get(n, n), id_, path, a, b))
        assert images["+U"][id_][touch] == 1 and snap[touch] == 0
    assert not wrong, "\n".join(f"{t} id={i} via {p}: SELECT {a!r}, {p} {b!r}" for t, i, p, a, b in wrong)

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
    assert top[col["geo"]] == POINT and top[col["gs"]] == -(2**31) + 1 and top[col["gv"]] == "é😀'\\|b"
    zero_dates = snapshots["mysqlclient"][4]
    assert [zero_dates[col[n]] for n in ("dd", "dtm", "dt0", "ts")] == [None] * 4
