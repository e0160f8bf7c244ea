"""Value fidelity as a property (C4): Hypothesis generates values per column type, writes them, and the value
read by SELECT (both read paths), the binlog's insert and update images (by the planned decoder and by
python-mysql-replication's, which must agree to the repr), and the expected Python value all agree, on both
servers; a micro-batch's planning counts as many images as were written (tests/test_values.py has the
hand-picked extremes and the DST time zone)."""

from __future__ import annotations

import datetime as dt
import ipaddress
import json
import os
import struct
import uuid
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mysql_cdc.options import parse_options
from mysql_cdc.planner.plan import plan_tables
from mysql_cdc.profiles import ConnectionProfile
from mysql_cdc.udtf.binlog.rowimage import RowDecoders
from mysql_cdc.udtf.binlog.server_ids import claimed_id
from mysql_cdc.udtf.binlog.startup import server_end
from mysql_cdc.udtf.binlog.transactions import image_count, read_transactions
from mysql_cdc.udtf.convert import inet6_text
from tests.servers import ServerProcess
from tests.test_values import columns_match_rows, read_by_every_path

UTC = dt.timezone.utc
EXAMPLES = 200 if os.environ.get("MYSQL_CDC_HYPOTHESIS_PROFILE") == "long" else 20


def _f32(v: float) -> float:
    return float(struct.unpack("<f", struct.pack("<f", v))[0])


text = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=12)
# column: (MySQL type, strategy of written values, expected canonical value of a written value)
TYPES: dict[str, tuple[str, Any, Any]] = {
    "i8": ("TINYINT", st.integers(-128, 127), int),
    "u16": ("SMALLINT UNSIGNED", st.integers(0, 65535), int),
    "i24": ("MEDIUMINT", st.integers(-(2**23), 2**23 - 1), int),
    "u32": ("INT UNSIGNED", st.integers(0, 2**32 - 1), int),
    "i64": ("BIGINT", st.integers(-(2**63), 2**63 - 1), int),
    "u64": ("BIGINT UNSIGNED", st.integers(0, 2**64 - 1), Decimal),
    "dec": ("DECIMAL(30,10)", st.decimals(min_value=-(10**19) + 1, max_value=10**19 - 1, places=10,
                                          allow_nan=False, allow_infinity=False), lambda d: d),
    "wide": ("DECIMAL(65,30)", st.decimals(min_value=-(10**34) + 1, max_value=10**34 - 1, places=30,
                                           allow_nan=False, allow_infinity=False), lambda d: format(d, "f")),
    "f": ("FLOAT", st.floats(width=32, allow_nan=False, allow_infinity=False, allow_subnormal=False), _f32),
    "g": ("DOUBLE", st.floats(allow_nan=False, allow_infinity=False, allow_subnormal=False), float),
    "s": ("VARCHAR(20) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin", text, str),
    "vb": ("VARBINARY(16)", st.binary(max_size=16), bytes),
    "bn": ("BINARY(4)", st.binary(max_size=4), lambda b: b.ljust(4, b"\x00")),
    "d": ("DATE", st.dates(dt.date(1000, 1, 1), dt.date(9999, 12, 31)), lambda d: d),
    "dt6": ("DATETIME(6)", st.datetimes(dt.datetime(1000, 1, 1), dt.datetime(9999, 12, 31, 23, 59, 59, 999999)),
            lambda d: d),
    "ts6": ("TIMESTAMP(6) NULL", st.datetimes(dt.datetime(1970, 1, 1, 0, 0, 1), dt.datetime(2038, 1, 19, 3, 14, 7)),
            lambda d: d.replace(tzinfo=UTC)),
    "tm6": ("TIME(6)", st.timedeltas(-dt.timedelta(hours=838, minutes=59, seconds=59),
                                     dt.timedelta(hours=838, minutes=59, seconds=59)), lambda t: t),
    "y": ("YEAR", st.just(0) | st.integers(1901, 2155), int),  # 0: YEAR 0000
    "bit": ("BIT(12)", st.integers(0, 4095), lambda n: n.to_bytes(2, "big")),
    "e": ("ENUM('a','b','é')", st.sampled_from(["a", "b", "é"]), str),
    "set": ("SET('x','y','z')", st.sets(st.sampled_from(["x", "y", "z"])),
            lambda s: ",".join(m for m in "xyz" if m in s)),
    # written as JSON text (the literal null too, which is not SQL NULL); compared parsed
    "j": ("JSON", st.recursive(st.none() | st.booleans() | st.integers(-(2**53), 2**53) | text
                               | st.floats(allow_nan=False, allow_infinity=False),
                               lambda c: st.lists(c, max_size=3) | st.dictionaries(text, c, max_size=3),
                               max_leaves=6).map(lambda v: json.dumps(v, ensure_ascii=False)), json.loads),
    # text in other character sets, within what each can store (the server rejects the rest)
    "l1": ("VARCHAR(12) CHARACTER SET latin1", st.text(st.characters(codec="cp1252") | st.sampled_from(
        "\x81\x8d\x8f\x90\x9d"), max_size=12), str),
    "t16": ("VARCHAR(12) CHARACTER SET utf16", text, str),
    "t32": ("VARCHAR(12) CHARACTER SET utf32", text, str),
    "ucs": ("VARCHAR(8) CHARACTER SET ucs2", st.text(st.characters(max_codepoint=0xFFFF, exclude_categories=(
        "Cs",)), max_size=8), str),
    "cyr": ("VARCHAR(8) CHARACTER SET cp1251", st.text(st.characters(codec="cp1251"), max_size=8), str),
    "el": ("ENUM('a','Ä','é,''x') CHARACTER SET latin1", st.sampled_from(["a", "Ä", "é,'x"]), str),
    "sl": ("SET('Ä','b') CHARACTER SET latin1", st.sets(st.sampled_from(["Ä", "b"])),
           lambda s: ",".join(m for m in ("Ä", "b") if m in s)),
}
# every fractional precision: values already at it (the server would round others)
for _p in range(6):
    _q = 10 ** (6 - _p)
    TYPES[f"dt{_p}"] = (f"DATETIME({_p})", st.datetimes(dt.datetime(1000, 1, 1), dt.datetime(
        9999, 12, 31, 23, 59, 59)).map(lambda d, q=_q: d.replace(microsecond=d.microsecond // q * q)), lambda d: d)
    TYPES[f"ts{_p}"] = (f"TIMESTAMP({_p}) NULL", st.datetimes(dt.datetime(1970, 1, 1, 0, 0, 1), dt.datetime(
        2038, 1, 19, 3, 14, 7)).map(lambda d, q=_q: d.replace(microsecond=d.microsecond // q * q)),
        lambda d: d.replace(tzinfo=UTC))
    TYPES[f"tm{_p}"] = (f"TIME({_p})", st.timedeltas(-dt.timedelta(hours=838, minutes=59, seconds=59),
                        dt.timedelta(hours=838, minutes=59, seconds=59)).map(
        lambda t, q=_q: dt.timedelta(microseconds=t // dt.timedelta(microseconds=1) // q * q)), lambda t: t)
def _rfc_uuid(b: bytes, version: int) -> str:
    raw = bytearray(b)
    raw[6] = (raw[6] & 0x0F) | (version << 4)
    raw[8] = (raw[8] & 0x3F) | 0x80
    return str(uuid.UUID(bytes=bytes(raw)))


# MariaDB's own types: the SELECT gives the server's text form
MARIADB_TYPES: dict[str, tuple[str, Any, Any]] = {
    "i4": ("INET4", st.ip_addresses(v=4).map(str), lambda a: str(ipaddress.IPv4Address(a))),
    "i6": ("INET6", st.ip_addresses(v=6).map(str), lambda a: inet6_text(ipaddress.IPv6Address(a).packed)),
    # any version 0-7 with the RFC variant, and the nil UUID (MariaDB 10.11.19 refuses versions 8-15 with the RFC
    # variant, e.g. '00000000-0000-8000-8000-000000000000': a server rule, not ours)
    "uu": ("UUID", st.builds(_rfc_uuid, st.binary(min_size=16, max_size=16), st.integers(0, 7)) | st.just(
        str(uuid.UUID(int=0))), str),
}


def _param(name: str, v: Any) -> Any:
    if v is None:
        return None
    if isinstance(v, set):
        return ",".join(sorted(v))
    if name.startswith("tm"):  # as the server's text, sign first: pymysql sends timedelta as its own text
        sign = "-" if v < dt.timedelta(0) else ""
        us = abs(v) // dt.timedelta(microseconds=1)
        s, us = divmod(us, 1_000_000)
        return f"{sign}{s // 3600}:{s // 60 % 60:02d}:{s % 60:02d}.{us:06d}"
    return v


def database_on(server: ServerProcess, name: str) -> tuple[ConnectionProfile, Any, Any]:
    """The capture user's profile, and a root connection and cursor in database ``name`` (made if missing)."""
    info = server.info
    assert info is not None
    conn = info.connect(root=True)
    cur = conn.cursor()
    cur.execute(f"CREATE DATABASE IF NOT EXISTS `{name}`")
    conn.select_db(name)
    return ConnectionProfile(info.host, info.port, info.user, info.password, connect_timeout=5), conn, cur


def fresh_table(profile: ConnectionProfile, cur: Any, database: str, cols: str) -> tuple[Any, Any, Any]:
    """Table ``t`` of ``database`` made again with an INT key, ``cols`` and a ``touch`` column to update: the
    options of a read of it, the server's facts and the binlog's end before any row is written."""
    cur.execute("DROP TABLE IF EXISTS t")
    cur.execute(f"CREATE TABLE t (id INT PRIMARY KEY, {cols}, touch INT NOT NULL DEFAULT 0)")
    opts = parse_options({"tables": f"{database}\\.t"})
    facts, _ = plan_tables(profile, opts)
    return opts, facts, server_end(profile, facts)


@pytest.mark.timeout(900)
def test_written_values_read_back_the_same_by_every_path(server: ServerProcess) -> None:
    profile, conn, cur = database_on(server, "vprops")
    cur.execute("SET time_zone = '+00:00'")
    types = {**TYPES, **(MARIADB_TYPES if server.kind == "mariadb" else {})}
    names_ = sorted(types)
    cols = ", ".join(f"`{n}` {types[n][0]}" for n in names_)
    row = st.fixed_dictionaries({n: st.none() | types[n][1] for n in names_})

    @settings(max_examples=EXAMPLES, deadline=None, database=None, suppress_health_check=list(HealthCheck))
    @given(rows=st.lists(row, min_size=1, max_size=5))
    def check(rows: list[dict[str, Any]]) -> None:
        opts, facts, start = fresh_table(profile, cur, "vprops", cols)
        names = ", ".join(f"`{n}`" for n in names_)
        for i, r in enumerate(rows):
            cur.execute(f"INSERT INTO t (id, {names}) VALUES (%s, {', '.join(['%s'] * len(names_))})",
                        (i, *(_param(n, r[n]) for n in names_)))
        cur.execute("UPDATE t SET touch = 1")
        end = server_end(profile, facts)
        _, plans = plan_tables(profile, opts)
        schema = plans[0].schema
        paths = read_by_every_path(profile, facts, opts, plans[0], start, end)
        # a micro-batch's planning counts the images without reading a value: as many as were written
        decoders = RowDecoders({schema.table: schema})
        with claimed_id(profile, opts) as sid:
            counted = sum(image_count(txn.rows) for txn in read_transactions(
                profile, sid, start, {schema.table}, flavor=facts.flavor, auto_position=False, end=end,
                server_version=facts.version, decoders=decoders, count_only=True, runs=True))
        assert counted == 3 * len(rows) and decoders.counted_events > 0
        # option before_images key: an update's before image is read for its key alone, its after image whole
        keyed = RowDecoders({schema.table: schema}, before_keep={schema.table: schema.positions(("id",))})
        with claimed_id(profile, opts) as sid:
            updates = [im for txn in read_transactions(
                profile, sid, start, {schema.table}, flavor=facts.flavor, auto_position=False, end=end,
                server_version=facts.version, decoders=keyed, runs=True)
                for run in txn.rows if run.op == "update" for im in run.images]
        assert keyed.planned_events > 0 and len(updates) == 2 * len(rows)
        for i in range(len(rows)):
            want_before = tuple(v if c == "id" else None for c, v in zip(schema.column_names, paths["-U"][i]))
            assert updates[2 * i] == want_before, updates[2 * i]
            assert repr(updates[2 * i + 1]) == repr(paths["+U"][i])
        # the column reader: the row reader's values, every type (the exotic ones by the row reader's code)
        columns_match_rows(profile, facts, opts, schema, start, end, ["insert"] * len(rows) + ["update"])
        position = {n: i for i, n in enumerate(schema.column_names)}
        for i, r in enumerate(rows):
            for kind in ("+I", "-U", "+U"):  # the planned decoder gives the library's values, to the last digit
                assert repr(paths[kind][i]) == repr(paths[f"library {kind}"][i]), \
                    f"{kind} image: planned {paths[kind][i]!r}, library {paths[f'library {kind}'][i]!r}"
            for n in names_:
                want = None if r[n] is None else types[n][2](r[n])
                for path in ("arrow", "mysqlclient", "+I", "+U", "library +I", "library +U"):
                    got_v = paths[path][i][position[n]]
                    if n == "j" and r[n] is not None:  # the same text by every path, and the written value
                        assert isinstance(got_v, str) and got_v == paths["mysqlclient"][i][position[n]], \
                            f"JSON via {path}: wrote {r[n]!r}, read {got_v!r}"
                        got_v = json.loads(got_v)
                    assert got_v == want and type(got_v) is type(want), \
                        f"{types[n][0]} via {path}: wrote {r[n]!r}, expected {want!r}, read {got_v!r}"

    try:
        check()
    finally:
        cur.execute("DROP DATABASE IF EXISTS vprops")
        conn.close()


# the types the column reader reads (udtf/binlog/columns.py), each with NULLs, zero and odd temporal values
COLUMN_TYPES: dict[str, tuple[str, Any]] = {
    "i8": ("TINYINT", st.integers(-128, 127)),
    "u8": ("TINYINT UNSIGNED", st.integers(0, 255)),
    "i16": ("SMALLINT", st.integers(-(2**15), 2**15 - 1)),
    "u16": ("SMALLINT UNSIGNED", st.integers(0, 65535)),
    "i24": ("MEDIUMINT", st.integers(-(2**23), 2**23 - 1)),
    "u24": ("MEDIUMINT UNSIGNED", st.integers(0, 2**24 - 1)),
    "i32": ("INT", st.integers(-(2**31), 2**31 - 1)),
    "u32": ("INT UNSIGNED", st.integers(0, 2**32 - 1)),
    "i64": ("BIGINT", st.integers(-(2**63), 2**63 - 1)),
    "u64": ("BIGINT UNSIGNED", st.integers(0, 2**64 - 1)),
    "y": ("YEAR", st.just(0) | st.integers(1901, 2155)),
    "f": ("FLOAT", st.floats(width=32, allow_nan=False, allow_infinity=False, allow_subnormal=False)),
    "g": ("DOUBLE", st.floats(allow_nan=False, allow_infinity=False, allow_subnormal=False)),
    **{f"dec{p}_{s}": (f"DECIMAL({p},{s})", st.decimals(min_value=-(10 ** (p - s)) + 1, max_value=10 ** (p - s) - 1,
                                                       places=s, allow_nan=False, allow_infinity=False))
       for p, s in ((1, 0), (4, 2), (9, 9), (10, 0), (15, 2), (17, 1), (18, 0), (18, 9), (18, 18))},
    "s": ("VARCHAR(20) CHARACTER SET utf8mb4", text),
    "c": ("CHAR(5) CHARACTER SET utf8mb4", st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)),
                                                   max_size=5).map(str.rstrip)),
    "wide": ("VARCHAR(300) CHARACTER SET utf8mb4", st.text(max_size=300, alphabet=st.characters(
        codec="utf-8", exclude_categories=("Cs",)))),
    "m3": ("VARCHAR(10) CHARACTER SET utf8mb3", st.text(st.characters(max_codepoint=0xFFFF, exclude_categories=(
        "Cs",)), max_size=10)),
    "ttx": ("TINYTEXT CHARACTER SET utf8mb4", text),
    "tx": ("TEXT CHARACTER SET utf8mb4", text),
    "mtx": ("MEDIUMTEXT CHARACTER SET utf8mb4", text),
    "ltx": ("LONGTEXT CHARACTER SET utf8mb4", text),
    "vb": ("VARBINARY(16)", st.binary(max_size=16)),
    "tbl": ("TINYBLOB", st.binary(max_size=40)),
    "bl": ("BLOB", st.binary(max_size=40)),
    "lbl": ("LONGBLOB", st.binary(max_size=40)),
    "d": ("DATE", st.dates(dt.date(1000, 1, 1), dt.date(9999, 12, 31)).map(str)
          | st.sampled_from(["0000-00-00", "2024-00-10", "2024-02-00", "0000-01-01", "0000-05-05", "2024-02-30"])),
    **{f"dt{p}": (f"DATETIME({p})", st.datetimes(dt.datetime(1000, 1, 1), dt.datetime(9999, 12, 31, 23, 59, 59))
                  .map(lambda d, q=10 ** (6 - p): str(d.replace(microsecond=d.microsecond // q * q)))
                  | st.sampled_from(["0000-00-00 00:00:00", "2024-02-00 10:00:00", "0000-05-05 10:00:00",
                                   "2023-02-29 23:59:59"])) for p in range(7)},
    **{f"ts{p}": (f"TIMESTAMP({p}) NULL", st.datetimes(dt.datetime(1970, 1, 1, 0, 0, 1), dt.datetime(
        2038, 1, 19, 3, 14, 7)).map(lambda d, q=10 ** (6 - p): str(d.replace(microsecond=d.microsecond // q * q)))
        | st.just("0000-00-00 00:00:00")) for p in range(7)},
}


@pytest.mark.timeout(900)
def test_the_column_reader_reads_what_the_row_reader_reads(server: ServerProcess) -> None:
    """:func:`columns_match_rows` on random rows of the types the column reader reads itself (the others are
    read by the row reader's code, value by value: the test above checks them), NULL or not, with zero and odd
    temporal values, inserted, updated and deleted."""
    profile, conn, cur = database_on(server, "cprops")
    # zero dates, zero parts and days their months lack written as they are
    cur.execute("SET time_zone = '+00:00', sql_mode = 'ALLOW_INVALID_DATES'")
    names_ = sorted(COLUMN_TYPES)
    cols = ", ".join(f"`{n}` {COLUMN_TYPES[n][0]}" for n in names_)
    # rows with NULLs, and rows without (the walk's straight path: an image whose NULL bitmap is 0)
    row = (st.fixed_dictionaries({n: st.none() | COLUMN_TYPES[n][1] for n in names_})
           | st.fixed_dictionaries({n: COLUMN_TYPES[n][1] for n in names_}))

    @settings(max_examples=EXAMPLES, deadline=None, database=None, suppress_health_check=list(HealthCheck))
    @given(rows=st.lists(row, min_size=1, max_size=6))
    def check(rows: list[dict[str, Any]]) -> None:
        opts, facts, start = fresh_table(profile, cur, "cprops", cols)
        names = ", ".join(f"`{n}`" for n in names_)
        cur.executemany(f"INSERT INTO t (id, {names}) VALUES (%s, {', '.join(['%s'] * len(names_))})",
                        [(i, *(r[n] for n in names_)) for i, r in enumerate(rows)])
        cur.execute("UPDATE t SET touch = 1")
        cur.execute("DELETE FROM t")
        end = server_end(profile, facts)
        _, plans = plan_tables(profile, opts)
        columns_match_rows(profile, facts, opts, plans[0].schema, start, end, ["insert", "update", "delete"])

    try:
        check()
    finally:
        cur.execute("DROP DATABASE IF EXISTS cprops")
        conn.close()
