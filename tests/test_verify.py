"""Verify (``mysql_cdc.verify``, ``mysql-cdc verify``) on real servers against real mirrors (delta-rs, read by
Spark): a correct mirror verifies clean, every damage is caught and its keys named, and a mirror that a running
sync keeps up to date under writers verifies clean while they write. The canonical text of a double is the
server's own, checked against both servers on random doubles."""

from __future__ import annotations

import dataclasses
import datetime as dt
import hashlib
import json
import os
import subprocess
import sys
import time
from decimal import Context, Decimal
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import mysql_cdc
from mysql_cdc.ids import TableId
from mysql_cdc.profiles import ConnectionProfile
from mysql_cdc.schema import ColumnInfo
from mysql_cdc.state.store import ResnapshotRequest, StateStore
from mysql_cdc.udtf.binlog.startup import binary_logs
from mysql_cdc.udtf.spark.compat import session_udf
from mysql_cdc.udtf.sync import checksum as cs
from mysql_cdc.udtf.sync import verify as verify_mod
from mysql_cdc.udtf.sync.job import batch_end, committed_batches
from mysql_cdc.udtf.sync.mirror import table_path
from tests.conftest import ROOT, _repo_env, wait_until
from tests.helpers import committed_at, counted, insert_rows, profile_url
from tests.servers import ServerInfo
from tests.test_multi_table import KEYS, NO_KEY, Writers, _make
from tests.test_values import COLUMNS, HOSTILE_SQL_MODE, NAMES, POINT, ROWS

deltalake = pytest.importorskip("deltalake")  # installed by scripts/setup.sh (extra delta): never skipped in CI

finite = st.floats(allow_nan=False, allow_infinity=False)
widened = st.floats(width=32, allow_nan=False, allow_infinity=False)  # a FLOAT's value, as the double it widens to


@given(finite)
def test_a_doubles_text_reads_back_to_it_where_the_server_writes_every_digit(x: float) -> None:
    assert float(cs.double_text(x, "mariadb")) == x


@given(st.lists(st.booleans(), min_size=1, max_size=8), st.lists(st.booleans(), max_size=5), st.data())
def test_an_iceberg_snapshot_holds_the_batches_of_its_own_line(old: list[bool], new: list[bool],
                                                                data: st.DataObject) -> None:
    """``held_batch``: snapshots in a line (each marked with its batch or not, as a sync's batches and its
    unmarked schema changes are), then perhaps a ``REPLACE`` that starts a new line; the table's ``main`` at any
    of them (a rollback leaves the later ones off its line): it holds the highest marked batch at or before it
    in its line, and every batch before a new line, and never a batch of another query."""
    snaps = []
    line = [*((i, i - 1 if i else None, m) for i, m in enumerate(old)),
            *((len(old) + j, None if j == 0 else len(old) + j - 1, m) for j, m in enumerate(new))]
    for sid, parent, marked in line:
        snaps.append((sid, parent, sid, "q" if marked else None, sid if marked else None))
    snaps.append((99, None, 99, "other", 99))  # another query's commit: never counted
    current = data.draw(st.integers(0, len(line) - 1))
    want = max((sid for sid, _, marked in line[:current + 1] if marked), default=-1)
    assert verify_mod.held_batch(snaps, current, "q") == want


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(finite | widened | st.sampled_from([1e15, 1e16, 1e-15, 1e-16, 5e-324, 1.7976931348623157e308,
                                                    -2.2250738585072014e-308, 123456789012345678.0]),
                min_size=1, max_size=300, unique=True))
def test_double_text_is_the_servers_own_text_of_every_double(info: ServerInfo, root: Any, xs: list[float]) -> None:
    cur = root.cursor()
    cur.execute("DROP TABLE IF EXISTS dd")
    cur.execute("CREATE TABLE dd (i INT PRIMARY KEY, d DOUBLE)")
    cur.executemany("INSERT INTO dd VALUES (%s, %s)", list(enumerate(xs)))
    cur.execute(f"SELECT i, {cs.source_text(ColumnInfo('d', 'double', 'double', True))} FROM dd", [])
    got = dict(cur.fetchall())
    mine = [cs.double_text(x, info.kind) for x in xs]
    wrong = [(x, got[i], mine[i]) for i, x in enumerate(xs) if got[i] != mine[i]]
    assert not wrong, wrong[:5]


# values of every column of the type table (tests/test_values.py's COLUMNS) that the server takes as they are
# (a DATETIME of whole seconds, a TIMESTAMP(3) of whole milliseconds and in its range, a FLOAT a single's value)
_I = st.integers
_U8, _S24, _U24, _S32, _U32 = _I(0, 255), _I(-(2**23), 2**23 - 1), _I(0, 2**24 - 1), _I(-(2**31), 2**31 - 1), \
    _I(0, 2**32 - 1)
_TEXT = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=20)
_MICROS = 838 * 3600 + 59 * 60 + 59


def _time(unit: int) -> st.SearchStrategy[str]:
    """A TIME's text, in ``unit`` microseconds, within -838:59:59 to 838:59:59."""
    def text(us: int) -> str:
        sign, us = ("-" if us < 0 else ""), abs(us)
        return f"{sign}{us // 3_600_000_000}:{us // 60_000_000 % 60:02}:{us // 1_000_000 % 60:02}.{us % 1_000_000:06}"
    return _I(-_MICROS * 1_000_000 // unit, _MICROS * 1_000_000 // unit).map(lambda n: text(n * unit))


def _decimal(digits: int, scale: int) -> st.SearchStrategy[Decimal]:
    return _I(-(10**digits) + 1, 10**digits - 1).map(lambda n: Decimal(n).scaleb(-scale, Context(prec=digits)))


def _datetime(unit: int, low: dt.datetime, high: dt.datetime) -> st.SearchStrategy[dt.datetime]:
    return st.datetimes(min_value=low, max_value=high).map(
        lambda t: t.replace(microsecond=t.microsecond - t.microsecond % unit))


_json = st.recursive(st.none() | st.booleans() | _I(-(2**63), 2**64 - 1) | _TEXT |
                     st.floats(allow_nan=False, allow_infinity=False),
                     lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_TEXT, inner, max_size=3),
                     max_leaves=6).map(lambda v: json.dumps(v, ensure_ascii=False))
VALUES: dict[str, st.SearchStrategy[Any]] = {
    "ti": _I(-128, 127), "tu": _U8, "si": _I(0, 65535), "mi": _S24, "mu": _U24, "i": _S32, "iu": _U32,
    "bi": _I(-(2**63), 2**63 - 1), "d": _decimal(30, 10), "big": _decimal(65, 30), "s": _TEXT,
    "l": st.text(st.characters(codec="cp1252"), max_size=20), "b": st.binary(max_size=8),
    "bn": st.binary(max_size=3), "dd": st.dates(dt.date(1, 1, 1), dt.date(9999, 12, 31)),
    "dtm": _datetime(1, dt.datetime(1, 1, 1), dt.datetime(9999, 12, 31, 23, 59, 59, 999999)),
    "dt0": _datetime(1_000_000, dt.datetime(1, 1, 1), dt.datetime(9999, 12, 31, 23, 59, 59)),
    "ts": _datetime(1000, dt.datetime(1970, 1, 1, 0, 0, 1), dt.datetime(2038, 1, 19, 3, 14, 7)),
    "f": st.floats(width=32, allow_nan=False, allow_infinity=False, allow_subnormal=False),
    "g": st.floats(allow_nan=False, allow_infinity=False), "e": st.sampled_from(["a", "b"]),
    "st": st.sampled_from(["", "x", "y", "x,y"]), "y": st.sampled_from([0, 1901, 2155]) | _I(1901, 2155),
    "flag": _I(-128, 127), "tx": st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=60),
    "bl": st.binary(max_size=60), "b1": _I(0, 1), "b12": _I(0, 4095), "b64": _I(0, 2**64 - 1),
    "tm": _time(1), "tm1": _time(100_000), "tm0": _time(1_000_000), "j": _json, "geo": st.sampled_from([POINT]),
}
assert set(VALUES) == set(NAMES)
_row = st.fixed_dictionaries({n: v | st.none() for n, v in VALUES.items()})  # the simplest: each its least value


def _texts(spark: Any, info: ServerInfo, root: Any, db: str, args: dict[str, Any], cols: list[ColumnInfo]
           ) -> dict[int, tuple[str, str, tuple[Any, ...]]]:
    """Each row's canonical text (as hex) of table ``tr``'s ``cols`` (its columns at the mirror's point) by the
    server's SQL over the source and by Spark's over the mirror (the mirror's Parquet files, as verify reads a
    delta-rs mirror), and its values in the mirror, by id."""
    cur = root.cursor()
    cur.execute(f"SELECT id, {cs.source_key(cols)} FROM tr", [])  # the driver turns %% into %
    source = {int(i): str(h) for i, h in cur.fetchall()}
    mirror = deltalake.DeltaTable(table_path(args["to"], TableId(db, "tr")))
    verify_mod._register(spark, info.kind, session_udf(spark))
    rows = spark.read.schema(verify_mod._spark_schema_of(mirror.schema().to_arrow())).parquet(*mirror.file_uris())
    got = {int(r[0]): (str(r[1]), tuple(r[2:])) for r in rows.selectExpr(
        "CAST(id AS BIGINT)", cs.mirror_key(cols), *(f"`{n}`" for n in NAMES)).collect()}
    assert set(got) == set(source), (sorted(set(source) - set(got))[:5], sorted(set(got) - set(source))[:5])
    # a NOT NULL column's text (no COALESCE; a short string as two parts of the CONCAT_WS) is the same as its
    # text as a NULL-able column's, which is compared with the mirror's above, wherever it is not NULL
    forms = [(f"HEX({cs.source_join([c])})", f"HEX({cs.source_join([dataclasses.replace(c, nullable=False)])})")
             for c in cols]
    cur.execute(f"SELECT {', '.join(e for pair in forms for e in pair)} FROM tr", [])
    compared = 0
    for r in cur.fetchall():
        for k, c in enumerate(cols):
            if r[2 * k] != NULL_HEX:
                assert r[2 * k + 1] == r[2 * k], (c.name, r[2 * k], r[2 * k + 1])
                compared += 1
    assert compared > len(source), compared  # more than the ids: the first example has no NULL at all
    return {i: (source[i], *got[i]) for i in source}


NULL_HEX = cs.NULL_TEXT.encode().hex().upper()


@settings(max_examples=int(os.environ.get("MYSQL_CDC_TEXT_EXAMPLES", "2")), deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                                 HealthCheck.data_too_large])
@given(st.lists(_row, min_size=1, max_size=40), st.lists(_row, min_size=1, max_size=40))
def test_every_value_of_every_type_has_one_text_on_both_sides(
        classic_spark: Any, info: ServerInfo, profile: ConnectionProfile, db: str, root: Any, tmp_path: Any,
        first: list[dict[str, Any]], then: list[dict[str, Any]]) -> None:
    """Random values of every type of the type table, mirrored by the sync (rows of its snapshot, then rows of
    its binlog: inserted, and written over the first ones), have the same canonical text on both sides, row by
    row (what a row's hash is of); and a column's text names one value of the mirror (different values, different
    texts). Where they disagreed, verify would report a correct mirror as differing, or miss a changed value."""
    cur = root.cursor()
    cur.execute("SET time_zone = '+00:00'")  # TIMESTAMP literals are UTC instants
    cur.execute("DROP TABLE IF EXISTS tr")
    cur.execute(f"CREATE TABLE tr (id BIGINT PRIMARY KEY, {', '.join(f'`{n}` {t}' for n, t in COLUMNS)})")
    insert_rows(root, "tr", ["id", *NAMES], [(i, *(r[n] for n in NAMES)) for i, r in enumerate(first)])
    base = tmp_path / f"run{len(os.listdir(tmp_path))}"
    args = _sync(classic_spark, base, db, profile)
    schema = StateStore(args["state_dir"]).schema(TableId(db, "tr"))
    assert schema is not None
    short = [c.data_type in cs.SHORT_TYPES for c in schema.columns]
    assert sum(short) >= 4, short  # the strings' and bytes' texts are read by their lengths
    for phase in ("snapshot", "binlog"):
        if phase == "binlog":  # new rows, and the first rows written over with the later values
            insert_rows(root, "tr", ["id", *NAMES], [(100 + i, *(r[n] for n in NAMES)) for i, r in enumerate(then)])
            for i, r in enumerate(then[:len(first)]):
                cur.execute(f"UPDATE tr SET {', '.join(f'`{n}` = %s' for n in NAMES)} WHERE id = %s",
                            [*(r[n] for n in NAMES), i])
            _sync(classic_spark, base, db, profile)
        texts = _texts(classic_spark, info, root, db, args, list(schema.columns))
        wrong = {i: (a, b) for i, (a, b, _) in texts.items() if a != b}
        assert not wrong, (phase, [(i, _parts(bytes.fromhex(a), short), _parts(bytes.fromhex(b), short))
                                   for i, (a, b) in sorted(wrong.items())[:2]])
    # one text, one value: the texts of a column name one value of the mirror's each (the id's text first); not
    # MySQL's doubles, whose text has at most 22 characters (checksum.MYSQL_WIDTH): -1.7976931348623157e308 and
    # the next double are both -1.797693134862316e308 there
    for k, name in enumerate(NAMES):
        if info.kind == "mysql" and name in ("f", "g"):
            continue
        seen: dict[bytes, Any] = {}
        for text, _, values in texts.values():
            part = _parts(bytes.fromhex(text), short)
            v = values[k]
            assert seen.setdefault(part[k + 1], v) == v, (name, part[k + 1], seen[part[k + 1]], v)


def _parts(text: bytes, short: list[bool]) -> list[bytes]:
    """A row's canonical text cut into its columns' texts: a short string's or bytes' is ``<length>|<its bytes>``
    (its length read, then as many bytes, whatever they hold), NULL ``~``; every other column's runs to the next
    ``|``.

    >>> _parts(b"7|2|a||~|x", [False, True, True, False])
    [b'7', b'2|a|', b'~', b'x']
    """
    out, i = [], 0
    for is_short in short:
        j = text.find(b"|", i)
        j = len(text) if j < 0 else j
        if is_short and text[i:j] != b"~":
            j += 1 + int(text[i:j])
        out.append(text[i:j])
        assert j == len(text) or text[j:j + 1] == b"|", (text, i, j)
        i = j + 1
    assert i == len(text) + 1, (text, i)
    return out


def _sync(spark: Any, base: Any, db: str, profile: ConnectionProfile, **extra: Any) -> dict[str, Any]:
    args = dict(to=str(base / "lake"), checkpoint=str(base / "ck"), state_dir=str(base / "state"),
                tables=f"{db}[.].*", source="src", profiles={"src": profile_url(profile)}, **extra)
    q = mysql_cdc.sync(spark, once=True, **{k: v for k, v in args.items()})
    assert q.awaitTermination(600), "the sync did not end"
    assert q.exception() is None, q.exception()
    return args


def _verify(spark: Any, args: dict[str, Any], **kw: Any) -> Any:
    return mysql_cdc.verify(spark, checkpoint=args["checkpoint"], state_dir=args["state_dir"], source="src",
                            profiles=args["profiles"], **kw)


def _committed_phase(checkpoint: str) -> str | None:
    done = committed_batches(checkpoint)
    return batch_end(checkpoint, done).get("phase") if done >= 0 else None


def _by_table(report: Any) -> dict[str, Any]:
    return {t.table.split(".", 1)[1]: t for t in report.tables}


def test_a_mirror_verifies_clean_and_each_damage_is_named(
        classic_spark: Any, info: ServerInfo, profile: ConnectionProfile, db: str, root: Any, tmp_path: Any,
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(verify_mod, "_SHOWN", 1000)
    cur = root.cursor()
    cur.execute("SET time_zone = '+00:00'")  # TIMESTAMP literals are UTC instants
    cur.execute(f"CREATE TABLE tv (id BIGINT UNSIGNED PRIMARY KEY, {', '.join(f'`{n}` {t}' for n, t in COLUMNS)})")
    # every type's extreme values (ROWS), then one row per column whose value in that column will be damaged
    insert_rows(root, "tv", ["id", *NAMES], [*ROWS, *[(100 + i, *ROWS[0][1:]) for i in range(len(COLUMNS))]])
    insert_rows(root, "tv", ["id", *NAMES], [(50, *ROWS[2][1:])])  # BIT(1) 0: to be made NULL
    cur.execute("CREATE TABLE k2 (a INT, b VARCHAR(8) COLLATE utf8mb4_general_ci, f DOUBLE, PRIMARY KEY (a, b))")
    cur.executemany("INSERT INTO k2 VALUES (%s, %s, %s)", [(i % 7, f"K{i}", i / 7) for i in range(3000)])
    # a name with a %, ZEROFILL columns (the server pads their text, the capture does not); dates Python has not
    # (year 0; a day its month lacks, kept under ALLOW_INVALID_DATES: NULL in the mirror, the server's text NULL by
    # types.held_date) and a DATETIME's fraction of zeros (trimmed)
    cur.execute("CREATE TABLE `z%s` (id INT PRIMARY KEY, z INT(5) ZEROFILL, d DECIMAL(8,2) ZEROFILL, "
                "u BIGINT UNSIGNED ZEROFILL, dd DATE NOT NULL, dt DATETIME(2))")
    cur.execute("SET @mode = @@SESSION.sql_mode, SESSION sql_mode = 'ALLOW_INVALID_DATES'")
    cur.executemany("INSERT INTO `z%%s` VALUES (%s, %s, %s, %s, %s, %s)",
                    [(1, 42, "3.50", 7, "0000-05-05", "0000-05-05 10:00:00.50"),
                     (2, None, "0.00", 2**64 - 1, "2024-02-29", "2024-02-29 10:00:00.00"),
                     (3, 1, "1.00", 1, "2024-02-30", "2023-02-29 10:00:00.10")])
    cur.execute("SET SESSION sql_mode = @mode")
    args = _sync(classic_spark, tmp_path, db, profile, chunk_size=500)
    # neither Spark's session settings nor the server's global mode change a text of ours (every session of the
    # capture sets its own mode: under MariaDB's ORACLE a BLOB's type read blob(65535), and verify called the
    # table's columns changed since the mirror's point; a CHAR padded to its length would differ)
    classic_spark.conf.set("spark.sql.ansi.enabled", "false")
    cur.execute("SET @global_mode = @@GLOBAL.sql_mode")
    cur.execute("SET GLOBAL sql_mode = %s", (HOSTILE_SQL_MODE[info.kind],))
    try:
        clean = _verify(classic_spark, args)
    finally:
        cur.execute("SET GLOBAL sql_mode = @global_mode")
        classic_spark.conf.unset("spark.sql.ansi.enabled")
    assert clean.ok, clean.lines()
    by = _by_table(clean)
    assert (by["tv"].rows, by["k2"].rows, by["`z%s`"].rows) == (len(ROWS) + len(COLUMNS) + 1, 3000, 3)
    assert by["k2"].chunks >= 6 and by["k2"].in_flux == 0 and ":" in by["k2"].point
    assert not any(t.by_bucket for t in clean.tables)  # the totals agreed: no pass by buckets
    # the damage, written into the mirrors as another writer would (no batch of the sync's)
    path = table_path(args["to"], TableId(db, "tv"))
    have = deltalake.DeltaTable(path).to_pyarrow_table()
    rows = {int(r["id"]): r for r in have.to_pylist()}
    for i, name in enumerate(NAMES):  # a value of each column type changed
        row = rows[100 + i]
        row[name] = next(rows[k][name] for k in (2, 3, 1) if rows[k][name] != row[name])
    del rows[2]  # a row missing
    rows[999] = dict(rows[3], id=Decimal(999))  # a row too many
    rows[998] = dict(rows.pop(1), id=Decimal(998))  # a key changed
    assert rows[50]["b1"] is False
    rows[50]["b1"] = None  # a NULL where the source has 0
    deltalake.write_deltalake(path, pa.Table.from_pylist(list(rows.values()), schema=have.schema), mode="overwrite")
    k2 = table_path(args["to"], TableId(db, "k2"))
    deltalake.DeltaTable(k2).update({"f": "f + 1e-12"}, predicate="a = 3 AND b = 'K10'")
    k2_rows = deltalake.DeltaTable(k2).to_pyarrow_table()
    once = k2_rows.filter(pc.equal(k2_rows["b"], "K12"))
    deltalake.write_deltalake(k2, once, mode="append")  # a key twice
    # the second look at the differing keys does not wait for a batch where no sync runs (none comes)
    found = _by_table(_verify(classic_spark, args, recheck_seconds=120))
    assert found["tv"].recheck == found["k2"].recheck == "no sync", (found["tv"].recheck, found["k2"].recheck)
    assert sorted(found["tv"].changed, key=int) == ["50", *(str(100 + i) for i in range(len(COLUMNS)))]
    assert (found["tv"].missing, found["tv"].extra) == (("1", "2"), ("998", "999"))
    assert found["tv"].differing == len(COLUMNS) + 5 and found["`z%s`"].ok
    assert (found["k2"].changed, found["k2"].missing, found["k2"].extra) == (("(3, 'K10')",), (), ())
    assert found["k2"].twice == ("(5, 'K12')",) and found["k2"].differing == 2
    assert found["tv"].by_bucket and found["k2"].by_bucket and not found["`z%s`"].by_bucket
    # the command: one line per table and in all, exit code 3 when a table differs
    env = _repo_env(True)
    env["MYSQL_CDC_PROFILE_SRC"] = profile_url(profile)
    # (and --repair with no sync running: the request is recorded for the sync's next run; the table still differs)
    run = subprocess.run([sys.executable, "-m", "mysql_cdc", "verify", "--source", "src", "--checkpoint",
                          args["checkpoint"], "--state-dir", args["state_dir"], "--tables", f"{db}[.]k2",
                          "--master", "local[2]", "--recheck-seconds", "0", "--repair"],
                         cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert run.returncode == 3, run.stdout + run.stderr
    lines = run.stdout.splitlines()
    assert lines[0].startswith(f"{db}.k2: DIFFERS: 3,000 rows in ")
    assert "different in the mirror: (3, 'K10')" in lines[1]
    assert lines[-1].startswith("verify: 1 of 1 tables checked, 3,000 rows, 1 differ"), lines
    assert f"repair: {db}.k2 asked to be snapshotted again (request 0): no sync runs on this state dir" in run.stdout
    assert profile.password not in run.stdout + run.stderr
    assert mysql_cdc.resnapshot(state_dir=args["state_dir"], request=0).state == "waiting"
    # and every type's table asked for by the API; the sync's next run takes both requests: all clean
    with pytest.raises(mysql_cdc.ConfigError, match=r"matches no table the sync .* captures .*tv"):
        mysql_cdc.resnapshot(state_dir=args["state_dir"], tables=f"{db}[.]nope")
    with pytest.raises(mysql_cdc.ConfigError, match=r"matches no table the sync .* captures .*tv"):
        _verify(classic_spark, args, tables=f"{db}[.]nope")  # not "0 of 0 tables checked" and a clean exit
    # key bounds: refused, before anything is recorded, where a table's key takes no range or they are not its key
    with pytest.raises(mysql_cdc.ConfigError, match=r"a range over a key with a string column \(\(a, b\) in \[\(1, "
                       r"'2'\), \+inf\)\) is read again alone, not with other keys or ranges of its table"):
        mysql_cdc.resnapshot(state_dir=args["state_dir"], tables=f"{db}[.]k2", key_from="1,2", keys=["4,k11"])
    with pytest.raises(mysql_cdc.ConfigError,  # a DECIMAL(20,0) in a lake (MariaDB's column type: bigint(20) unsigned)
                       match=r"id in \[1, 9007199254740993\) .* its bound 9007199254740993 of id "
                             r"\(bigint(\(20\))? unsigned\) names keys at or above 2\^53, .*; give keys it takes"):
        mysql_cdc.resnapshot(state_dir=args["state_dir"], tables=f"{db}[.]tv", key_from="1", key_to=str(2**53 + 1))
    z = f"{db}[.]`z%s`"
    with pytest.raises(mysql_cdc.ConfigError, match=r"key value 'x' of id \(int(\(11\))?\) is not an integer"):
        mysql_cdc.resnapshot(state_dir=args["state_dir"], tables=z, key_from="x")
    with pytest.raises(mysql_cdc.ConfigError, match=r"key bound '1,2' has 2 values but the key has 1 column"):
        mysql_cdc.resnapshot(state_dir=args["state_dir"], tables=z, key_to="1,2")
    with pytest.raises(mysql_cdc.ConfigError, match=r"its bound 2147483649 of id \(int(\(11\))?\) is outside the "
                       r"values its bounds may take there, -2147483647 to 2147483648"):
        mysql_cdc.resnapshot(state_dir=args["state_dir"], tables=z, key_to=str(2**31 + 1))
    with pytest.raises(mysql_cdc.ConfigError, match=r"keys \[None\] hold None"):
        mysql_cdc.resnapshot(state_dir=args["state_dir"], tables=z, keys=[None])
    with pytest.raises(mysql_cdc.ConfigError, match=r"start \(9,\) is not below its end \(3,\)"):
        mysql_cdc.resnapshot(state_dir=args["state_dir"], tables=z, key_from="9", key_to="3")
    with pytest.raises(mysql_cdc.ConfigError, match=r"keys and key bounds name a range of one table, but tables"):
        mysql_cdc.resnapshot(state_dir=args["state_dir"], tables=f"{db}[.](tv|k2)", key_from="1")
    with pytest.raises(mysql_cdc.ConfigError, match=r"key bound '1,2' has 2 values but the key has 1 column"):
        mysql_cdc.resnapshot(state_dir=args["state_dir"], tables=z, keys=["5", "1,2"])
    with pytest.raises(mysql_cdc.ConfigError, match=r"id in \[5, 6\), \[9007199254740992, 9007199254740993\) .* its "
                       r"bound 9007199254740992 of id .* names keys at or above 2\^53"):
        mysql_cdc.resnapshot(state_dir=args["state_dir"], tables=f"{db}[.]tv", keys=[5, 2**53])
    # tv's key is BIGINT UNSIGNED (its mirror's a DECIMAL(20, 0), whose file statistics delta-rs keeps as
    # doubles, and it holds 2^64 - 1): a range below 2^53 is read again alone, with two keys far from it (the
    # mirror's extra rows 998 and 999: only a range with a gap holds every damaged key and not the rest)
    asked = mysql_cdc.resnapshot(state_dir=args["state_dir"], tables=f"{db}[.]tv", key_from="1", key_to="200",
                                 keys=["999", 998], checkpoint=args["checkpoint"])
    assert (asked.request, asked.state) == (1, "waiting")
    # a request for a table that left the capture after it was asked for: passed over, and said so
    StateStore(args["state_dir"]).record_request(ResnapshotRequest((TableId(db, "left"),), "test"))
    with pytest.raises(mysql_cdc.StateError, match=r"no snapshot request 3 is recorded"):
        mysql_cdc.resnapshot(state_dir=args["state_dir"], request=3)
    with pytest.raises(mysql_cdc.StateError, match=r"checkpoint .*nowhere.* is no Spark checkpoint"):
        mysql_cdc.resnapshot(state_dir=args["state_dir"], request=1, checkpoint=str(tmp_path / "nowhere"))
    # the largest INT as a key: its span's end is no INT value (delta-rs refuses such a literal), so the mirror's
    # delete is written id <= 2147483647
    assert mysql_cdc.resnapshot(state_dir=args["state_dir"], tables=z, keys=[2**31 - 1]).request == 3
    # a key of k2 in a spelling the source does not store ('K11' under utf8mb4_general_ci): the round names the
    # stored one too, which the mirror holds and deletes by its bytes (udtf/binlog/spellings.py)
    assert mysql_cdc.resnapshot(state_dir=args["state_dir"], tables=f"{db}[.]k2", keys=["4,k11"]).request == 4
    _sync(classic_spark, tmp_path, db, profile, chunk_size=500)
    for request, table in ((0, "k2"), (1, "tv")):
        done = mysql_cdc.resnapshot(state_dir=args["state_dir"], request=request, checkpoint=args["checkpoint"])
        assert done.state == "done" and TableId(db, table) in done.snapshotted, done
    ranges = {str(t): r.text() for rnd in StateStore(args["state_dir"]).rounds() for t, r in rnd.ranges}
    # k2's two differing keys of its (INT, VARCHAR) key read again alone: the changed row, and the key the mirror
    # held twice (both copies deleted by its bytes, one row read)
    assert ranges == {f"{db}.tv": "id in [1, 200), [998, 1000)",
                      f"{db}.k2": "(a, b) in {(3, 'K10'), (4, 'K11'), (4, 'k11'), (5, 'K12')}",
                      str(TableId(db, "z%s")): "id in [2147483647, 2147483648)"}, ranges
    for request in (3, 4):
        assert mysql_cdc.resnapshot(state_dir=args["state_dir"], request=request,
                                    checkpoint=args["checkpoint"]).state == "done"
    passed = mysql_cdc.resnapshot(state_dir=args["state_dir"], request=2, checkpoint=args["checkpoint"])
    assert passed.state == "passed" and "names no table captured now" in passed.why, passed
    final = _verify(classic_spark, args, recheck_seconds=0)
    assert final.ok and _by_table(final)["tv"].rows == len(ROWS) + len(COLUMNS) + 1, final.lines()
    assert _by_table(final)["k2"].rows == 3000
    # a schema change the sync has not followed yet, of a column's charset alone (its type text stays
    # varchar(8)): that table is not checked (a text of the server's built as the capture recorded the column
    # would be another charset's bytes), and says what changed; the others are checked
    cur.execute("ALTER TABLE k2 MODIFY b VARCHAR(8) CHARACTER SET latin1 COLLATE latin1_general_ci NOT NULL")
    later = _verify(classic_spark, args, recheck_seconds=0)
    k2 = _by_table(later)["k2"]
    assert "(b: varchar(8) utf8mb4 then, varchar(8) latin1 now): verify again once the sync" in k2.not_checked, k2
    assert not later.ok and _by_table(later)["tv"].ok and _by_table(later)["`z%s`"].ok, later.lines()


def test_a_listed_string_key_names_every_spelling_a_mirror_may_hold(info: ServerInfo, profile: ConnectionProfile,
                                                                     db: str, root: Any) -> None:
    """The spellings of listed string keys a mirror may hold at a binlog point ``P`` (the point their ``-R`` row
    takes them out): stored now under the key's collation, or in a row image of the binlog after ``P``. Without the
    second, a row deleted or re-cased after ``P`` in a spelling the list did not name stayed in the mirror."""
    from mysql_cdc.options import parse_options
    from mysql_cdc.planner.plan import plan_tables
    from mysql_cdc.udtf.binlog.spellings import held_in_range, spellings
    from mysql_cdc.udtf.binlog.startup import server_end

    cur = root.cursor()
    # utf8mb4_general_ci: no case, and PAD SPACE ('abc ' is 'abc') on both servers
    cur.execute("CREATE TABLE sp (code VARCHAR(20) COLLATE utf8mb4_general_ci PRIMARY KEY, v INT)")
    cur.executemany("INSERT INTO sp VALUES (%s, 1)", ["K-100", "abc ", "Q", "x", "other"])
    opts = parse_options({"tables": f"{db}[.]sp"})
    facts, plans = plan_tables(profile, opts)
    at = server_end(profile, facts)  # P
    cur.execute("DELETE FROM sp WHERE code = 'K-100'")  # after P: gone from the source, held by the mirror
    cur.execute("UPDATE sp SET code = 'q' WHERE code = 'Q'")  # re-cased: the mirror holds 'Q'
    cur.execute("UPDATE sp SET v = 2 WHERE code = 'other'")  # another key's change: not one of them
    cur.execute("INSERT INTO sp VALUES ('zzz', 1)")
    listed = [("k-100",), ("ABC",), ("q",), ("x",)]
    got = spellings(profile, opts, facts, plans[0].schema, listed, at)
    assert sorted(got) == [("K-100",), ("Q",), ("abc ",)], got
    # the keys a list names byte for byte (x, q) come back as none; none changed since P: only what is stored
    assert spellings(profile, opts, facts, plans[0].schema, [("x",), ("ABC",)], server_end(profile, facts)) == \
        [("abc ",)]
    # the keys of a range the mirror may hold at P, 'abc' to 'R' as the collation orders it (Python's order puts
    # 'R' first): those stored in it now ('abc ', 'other', 'q'), and those the binlog changed in it since P ('K-100'
    # deleted, 'Q' re-cased; not 'zzz', inserted after it)
    schema = plans[0].schema
    got = held_in_range(profile, opts, facts, schema, ("abc",), ("R",), at)
    assert sorted(got) == [("K-100",), ("Q",), ("abc ",), ("other",), ("q",)], got
    assert sorted(held_in_range(profile, opts, facts, schema, ("q",), None, at)) == [("Q",), ("q",), ("x",), ("zzz",)]
    with pytest.raises(mysql_cdc.ConfigError, match=r"start \('R',\) is not below its end \('abc',\) as the server "
                       r"orders code \(its collation\)"):
        held_in_range(profile, opts, facts, schema, ("R",), ("abc",), at)
    # a key of two columns, its chunk key not unique (a table without a primary key): each stored spelling once,
    # and only where the other column is a listed key's
    cur.execute("CREATE TABLE sp2 (a INT NOT NULL, b VARCHAR(8) COLLATE utf8mb4_general_ci NOT NULL, v INT)")
    cur.executemany("INSERT INTO sp2 VALUES (%s, %s, 1)", [(1, "K"), (1, "K"), (1, "k "), (2, "K"), (1, "j")])
    opts2 = parse_options({"tables": f"{db}[.]sp2", "chunk_key": f"{db}[.]sp2:a,b"})
    _, plans2 = plan_tables(profile, opts2)
    at = server_end(profile, facts)
    cur.execute("UPDATE sp2 SET b = 'J' WHERE b = 'j'")
    got = spellings(profile, opts2, facts, plans2[0].schema, [(1, "k"), (1, "J")], at)
    assert sorted(got) == [(1, "K"), (1, "j"), (1, "k ")], got
    # a range, [(1, 'j'), (1, 'L')) as the collation orders it: each spelling stored in it now, and 'j', which the
    # binlog changed since P (re-cased to 'J')
    got = held_in_range(profile, opts2, facts, plans2[0].schema, (1, "j"), (1, "L"), at)
    assert sorted(got) == [(1, "J"), (1, "K"), (1, "j"), (1, "k ")], got


# CI time: verify beside a running sync (its windows, the recheck, --repair by the sync) is ours, the same on either
# server; the texts and the damage are checked on both by the tests above
@pytest.mark.by_default_on("mariadb")
def test_a_mirror_kept_by_a_running_sync_under_writers_verifies_clean_and_damage_is_still_caught(
        classic_spark: Any, info: ServerInfo, profile: ConnectionProfile, db: str, root: Any, tmp_path: Any) -> None:
    _make(root)
    cur = root.cursor()
    cur.execute("CREATE TABLE still (id INT PRIMARY KEY, v VARCHAR(10))")  # no writer touches it
    cur.executemany("INSERT INTO still VALUES (%s, %s)", [(i, f"v{i}") for i in range(500)])
    counted(root, "still")  # its regions are the plan's chunks, which follow the row estimate
    # and one keyed by a UUID's 16 bytes
    cur.execute("CREATE TABLE still_bin (id BINARY(16) PRIMARY KEY, v INT)")
    uuids = sorted(hashlib.sha256(b"%d" % i).digest()[:16] for i in range(300))
    cur.executemany("INSERT INTO still_bin VALUES (%s, %s)", [(u, i) for i, u in enumerate(uuids)])
    # one keyed by a date, a time and a DECIMAL, and one by a TIMESTAMP (written in UTC)
    cur.execute("CREATE TABLE still_when (day DATE, at DATETIME(6), p DECIMAL(7,2), v INT, PRIMARY KEY (day, at, p))")
    day, at = dt.date(2024, 2, 27), dt.datetime(2024, 2, 29, 23, 59, 59, 999_800)
    when = sorted((day + dt.timedelta(days=i % 5), at + dt.timedelta(microseconds=i), Decimal(i % 7) - Decimal("2.50"))
                  for i in range(300))
    cur.executemany("INSERT INTO still_when VALUES (%s, %s, %s, %s)", [(*k, i) for i, k in enumerate(when)])
    cur.execute("SET time_zone = '+00:00'")
    cur.execute("CREATE TABLE still_ts (at TIMESTAMP(6) PRIMARY KEY, v INT)")
    cur.executemany("INSERT INTO still_ts VALUES (%s, %s)",
                    [(at + dt.timedelta(microseconds=i), i) for i in range(300)])
    # and one keyed by strings under the server's own collation of utf8mb4 (MySQL's NO PAD utf8mb4_0900_ai_ci,
    # MariaDB's PAD SPACE utf8mb4_general_ci): 'k-100' and 'K-100' are one key there
    cur.execute("CREATE TABLE still_str (code VARCHAR(24) CHARACTER SET utf8mb4 PRIMARY KEY, v INT)")
    codes = [f"k-{i:03d}" if i % 3 else f"It's, \\ é {i:03d}" for i in range(300)]
    cur.executemany("INSERT INTO still_str VALUES (%s, %s)", [(c, i) for i, c in enumerate(codes)])
    args = dict(to=str(tmp_path / "lake"), checkpoint=str(tmp_path / "ck"), state_dir=str(tmp_path / "state"),
                tables=f"{db}[.].*", exclude=f"{db}[.]t1[03]_.*", source="src",
                profiles={"src": profile_url(profile)}, chunk_size=200)
    mirrored = sorted([t for t in KEYS if t not in NO_KEY] + ["still", "still_bin", "still_when", "still_ts",
                                                               "still_str"])
    q = None
    try:
        with Writers(info, db, seed=5):
            q = mysql_cdc.sync(classic_spark, trigger_seconds=0.5, **args)
            wait_until(lambda: _committed_phase(args["checkpoint"]) == "binlog" or not q.isActive, 300,
                       "a batch of the binlog phase committed")
            assert q.isActive, q.exception()
            first = _verify(classic_spark, args, recheck_seconds=120)  # ends at the sync's next batch
            assert first.ok, first.lines()
            checked = _by_table(first)
            assert sorted(checked) == mirrored
            assert sum(t.in_flux for t in first.tables) > 0  # the writers were caught in the act, and left out
            # a key of one integer column is summed by regions (its chunks: 500 rows at 200 a chunk), less the keys
            # in flux of each; other keys by the table's totals
            assert checked["still"].regions >= 3 and checked["t01_int"].regions >= 2, first.lines()
            assert not any(checked[t].regions for t in ("still_bin", "still_when", "still_ts", "still_str"))
            # (where the writers write, a key the window missed may take a second pass that the recheck clears)
            assert not any(checked[t].by_bucket for t in ("still", "still_bin", "still_str")), first.lines()
            # a key that differed at the first look waited for the running sync's next batch, not the timeout
            assert {t.recheck for t in first.tables} <= {"", "a batch"}, [(t.table, t.recheck) for t in first.tables]
        # the damage below is another writer's commit to the sync's tables: written while the sync merges into the
        # same table, one of the two commits fails (delta-rs: "a concurrent transaction added new data"), and if it
        # is the sync's, the sync stops. So it is written once the writers stopped and the sync applied all they wrote
        last = binary_logs(profile)[-1]
        wait_until(lambda: committed_at(args["checkpoint"]) == last or not q.isActive, 120, "the sync caught up")
        assert q.isActive, q.exception()
        # a table the writers leave alone and one they write (a row the source never had): found, and only there;
        # --repair: the running sync snapshots both again while the writers write again, and they verify clean
        path = table_path(args["to"], TableId(db, "still"))
        deltalake.DeltaTable(path).delete("id = 7 OR id = 400")
        lost = (uuids[40], uuids[250])
        deltalake.DeltaTable(table_path(args["to"], TableId(db, "still_bin"))).delete(
            " OR ".join(f"id = X'{u.hex()}'" for u in lost))
        gone = (when[40], when[250])
        deltalake.DeltaTable(table_path(args["to"], TableId(db, "still_when"))).delete(
            " OR ".join(f"at = '{k[1].isoformat()}'" for k in gone))
        # two rows of the string key gone from the mirror, and one whose key differs in case alone (a key the
        # source does not hold byte for byte, equal under its collation to one it does)
        strs = deltalake.DeltaTable(table_path(args["to"], TableId(db, "still_str")))
        strs.delete(" OR ".join(f"code = CAST(X'{c.encode().hex()}' AS STRING)" for c in (codes[40], codes[249])))
        strs.update(updates={"code": "'K-100'"}, predicate="code = 'k-100'")
        with pytest.raises(mysql_cdc.ConfigError, match=r"key 5 of .*still_bin.*: its bound 5 of id \(binary\(16\)\) "
                           r"is not bytes: write it as 0x and hex digits"):
            mysql_cdc.resnapshot(state_dir=args["state_dir"], tables=f"{db}[.]still_bin", keys=["5"])
        with pytest.raises(mysql_cdc.ConfigError, match=r"key 0x11ee of .*: id \(binary\(16\)\) holds 16 bytes, not 2: "
                           r"give all of them \(0x11ee0{28} if the rest are zero bytes\)"):  # it would name no row
            mysql_cdc.resnapshot(state_dir=args["state_dir"], tables=f"{db}[.]still_bin", keys=b"\x11\xee")
        with pytest.raises(mysql_cdc.ConfigError, match=r"key value '2024-02-30' of day \(date\) is not a date"):
            mysql_cdc.resnapshot(state_dir=args["state_dir"], tables=f"{db}[.]still_when",
                                 keys=["2024-02-30, 2024-02-29 10:00, 1.5"])
        with pytest.raises(mysql_cdc.ConfigError, match=r"its bound 1.255 of p \(decimal\(7,2\)\) has more decimals "
                           r"than its scale, 2"):  # its key just after would be 1.256, and 1.26 left out
            mysql_cdc.resnapshot(state_dir=args["state_dir"], tables=f"{db}[.]still_when",
                                 keys=["2024-02-29, 2024-02-29 10:00, 1.255"])
        t01 = deltalake.DeltaTable(table_path(args["to"], TableId(db, "t01_int")))
        one = t01.to_pyarrow_table().slice(0, 1)
        deltalake.write_deltalake(t01.table_uri, one.set_column(0, one.schema.field(0),
                                                                pa.array([10**6], one.schema.field(0).type)),
                                  mode="append")
        with Writers(info, db, seed=6):
            second = _verify(classic_spark, args, recheck_seconds=2, repair=True, repair_seconds=300)
            assert second.repair is not None and second.repair.state == "done", second.lines()
            bad = {t.table.split(".", 1)[1]: t for t in second.repair.before}
            assert sorted(bad) == ["still", "still_bin", "still_str", "still_when", "t01_int"], second.lines()
            assert set(bad["still_str"].missing) == {repr(codes[40]), repr(codes[249]), "'k-100'"}, second.lines()
            assert bad["still_str"].extra == ("'K-100'",), second.lines()
            # named in key order, bytes as resnapshot --key takes them
            assert bad["still_bin"].missing == tuple(f"0x{u.hex()}" for u in lost), second.lines()
            assert (bad["still"].missing, bad["t01_int"].extra) == (("7", "400"), ("1000000",)), second.lines()
            # summed again by buckets: only the regions of the keys that differ (7 in the first, 400 in another;
            # 1000000 past every key in the last, and a writer's key the window missed may add one)
            assert bad["still"].regions_again == 2 and bad["still"].regions >= 3, second.lines()
            assert 1 <= bad["t01_int"].regions_again <= bad["t01_int"].regions, second.lines()
            assert bad["still_bin"].by_bucket and not bad["still_bin"].regions, second.lines()
            words = tuple(f"({d.isoformat()}, {a.isoformat(sep=' ')}, {p})" for d, a, p in gone)
            assert bad["still_when"].missing == words, second.lines()  # as resnapshot --key takes them
            # each repaired by its differing keys read again (a key range with a gap), not the whole table nor
            # the smallest range holding them (393 rows more)
            store = StateStore(args["state_dir"])
            taken = {str(t): r.text() for rnd in store.rounds() for t, r in rnd.ranges}  # one round, or two
            assert taken == {f"{db}.still": "id in [7, 8), [400, 401)",
                             f"{db}.still_bin": ", ".join(f"[0x{u.hex()}, 0x{u.hex()}00)" for u in lost).join(
                                 ["id in ", ""]),
                             f"{db}.still_when": "(day, at, p) in " + ", ".join(
                                 f"[({d}, {a.isoformat(sep=' ')}, {p}), ({d}, {a.isoformat(sep=' ')}, "
                                 f"{p + Decimal('0.01')}))" for d, a, p in gone),
                             f"{db}.still_str": "code in {" + ", ".join(
                                 map(repr, sorted([codes[40], codes[249], "k-100", "K-100"]))) + "}",
                             f"{db}.t01_int": "id in [1000000, 1000001)"}, taken
            for t in ("still", "still_bin", "still_when"):
                reads = [r.rows for r in store.chunk_records(TableId(db, t))]
                assert sum(reads) == 2 and len(reads) == 5, (t, reads)
            # each key read alone, 'k-100' and 'K-100' once (one chunk: [k, k] read as the server compares)
            reads = [r.rows for r in store.chunk_records(TableId(db, "still_str"))]
            assert sum(reads) == 3 and len(reads) == 7, reads
            assert _by_table(second)["t01_int"].rows > 0 and _by_table(second)["still"].rows == 500
            assert _by_table(second)["still_bin"].rows == _by_table(second)["still_when"].rows == 300
            assert _by_table(second)["still_str"].rows == 300
            # summed by chunks of about the plan's 200 rows again, not by the range's outside chunks as they are
            # (the gap [8, 400) and [401, +inf) are cut by key value, by the optimizer's estimate of their rows)
            assert _by_table(second)["still"].chunks >= 4, second.lines()
            assert second.ok, second.lines()
            assert q.isActive, q.exception()
        # a TIMESTAMP key read again by keys given with their zone, and one in UTC: those two rows alone
        ts = deltalake.DeltaTable(table_path(args["to"], TableId(db, "still_ts")))
        ts.delete(f"at = '{(at + dt.timedelta(microseconds=40)).isoformat()}Z' OR "
                  f"at = '{(at + dt.timedelta(microseconds=250)).isoformat()}Z'")
        def read_again(table: str, keys: list[str], **bounds: str) -> list[int]:
            """The rows each chunk of ``table`` read once the running sync read ``keys`` (or ``bounds``) of it
            again."""
            asked = mysql_cdc.resnapshot(state_dir=args["state_dir"], tables=f"{db}[.]{table}", keys=keys, **bounds)
            wait_until(lambda: mysql_cdc.resnapshot(state_dir=args["state_dir"], request=asked.request,
                                                    checkpoint=args["checkpoint"]).state == "done"
                       or not q.isActive, 180, f"keys of {table} read again")
            assert q.isActive, q.exception()
            return [r.rows for r in StateStore(args["state_dir"]).chunk_records(TableId(db, table))]

        reads = read_again("still_ts", ["2024-03-01 00:59:59.999840+01:00", "2024-03-01 00:00:00.000050"])
        assert sum(reads) == 2 and len(reads) == 5, reads
        # a row in the mirror alone (a key the source never had), named and mended by verify --repair in a process
        # whose zone is not UTC (Spark gives Python a timestamp in the process's zone: the key would be 5 h off)
        one = ts.to_pyarrow_table().slice(0, 1)
        field = one.schema.field(0)
        deltalake.write_deltalake(ts.table_uri, one.set_column(0, field, pa.array(
            [at + dt.timedelta(microseconds=400)], field.type)), mode="append")
        zone = os.environ.get("TZ")
        os.environ["TZ"] = "America/New_York"
        time.tzset()
        try:
            third = _verify(classic_spark, args, recheck_seconds=2, tables=f"{db}[.]still_ts", repair=True,
                            repair_seconds=300)
        finally:
            if zone is None:
                os.environ.pop("TZ", None)
            else:
                os.environ["TZ"] = zone
            time.tzset()
        assert third.repair is not None and third.repair.state == "done", third.lines()
        (damaged,) = third.repair.before
        assert damaged.extra == ("2024-03-01 00:00:00.000200",), third.lines()
        assert third.ok and _by_table(third)["still_ts"].rows == 300, third.lines()
        taken = [r.text() for rnd in StateStore(args["state_dir"]).rounds() for t, r in rnd.ranges
                 if t == TableId(db, "still_ts")]
        assert taken[-1] == "at in [2024-03-01 00:00:00.000200Z, 2024-03-01 00:00:00.000201Z)", taken
        # a string key given in another case than the mirror and the source hold it ('K-041' for 'k-041'): the
        # mirror deletes 'K-041' (none), the source reads the row 'k-041', which is merged over the mirror's, not
        # appended beside it
        reads = read_again("still_str", ["K-041"])
        assert sum(reads) == 1 and len(reads) == 3, reads
        # a range of the string key as its collation orders it, 'k-030' to 'K-060' (where Python's order of the
        # text, and a lake's, puts the end first), two of its rows gone from the mirror: the mirror deletes the
        # keys the server finds in it, the source reads it again, and the rows around it are left as they are
        deltalake.DeltaTable(table_path(args["to"], TableId(db, "still_str"))).delete(
            " OR ".join(f"code = '{c}'" for c in (codes[35], codes[50])))
        cur.execute("SELECT COUNT(*) FROM still_str WHERE code >= 'k-030' AND code < 'K-060'")
        (inside,) = cur.fetchone()
        assert inside == 20  # k-031 to k-059, less every third
        reads = read_again("still_str", [], key_from="k-030", key_to="K-060")
        assert sum(reads) == inside and len(reads) == 3, reads
        last = [r for rnd in StateStore(args["state_dir"]).rounds() for t, r in rnd.ranges
                if t == TableId(db, "still_str")][-1]
        assert last.text() == "code in ['k-030', 'K-060')" and last.held is not None, last
        assert sorted(last.held) == sorted((c,) for c in codes[30:60] if c.startswith("k-")), last.held
        fourth = _verify(classic_spark, args, recheck_seconds=2, tables=f"{db}[.]still_str")
        assert fourth.ok and _by_table(fourth)["still_str"].rows == 300, fourth.lines()
        codes_now = deltalake.DeltaTable(table_path(args["to"], TableId(db, "still_str"))).to_pyarrow_table(
            columns=["code"]).column("code").to_pylist()
        assert sorted(codes_now) == sorted(codes), [c for c in codes_now if codes_now.count(c) > 1]
    finally:
        if q is not None:
            q.stop()


@pytest.mark.parametrize("server", ["mysql"], indirect=True)  # the stream's rounds decide it, not the server
def test_a_key_range_whose_table_changes_before_it_is_read_is_read_whole_and_converges(
        classic_spark: Any, info: ServerInfo, profile: ConnectionProfile, db: str, root: Any, tmp_path: Any) -> None:
    """A key range taken out of the capture (its mirror rows deleted), then, before the next batch reads it, its
    table changed by a DDL statement: the rows around the range, as the mirror has them, are of the former shape,
    so the table is reset whole by a round of its own (the other range taken with it stays a range) and read
    whole; every mirror ends equal to its source. The DDL runs inside the batch that deleted the range (the
    sync's on_batch), so it always lies between that batch and the next one's look at the tables."""
    cur = root.cursor()
    for t in ("r1", "r2"):
        cur.execute(f"CREATE TABLE {t} (id INT PRIMARY KEY, v INT NOT NULL)")
        insert_rows(root, t, ["id", "v"], [(i, i) for i in range(300)])
    args = _sync(classic_spark, tmp_path, db, profile, chunk_size=100)
    cur.execute("UPDATE r1 SET v = v + 1 WHERE id IN (5, 150, 290)")  # in the binlog: the sync's next run has it
    for t in ("r1", "r2"):
        mysql_cdc.resnapshot(state_dir=args["state_dir"], tables=f"{db}[.]{t}", key_from="100", key_to="200")
    store = StateStore(args["state_dir"])
    changed: list[int] = []

    def on_batch(_: Any) -> None:
        rounds = store.rounds()
        if not changed and rounds and rounds[-1].ranges:  # the batch that deleted the ranges' rows
            changed.append(len(rounds) - 1)
            root.cursor().execute("ALTER TABLE r1 ADD COLUMN w INT NULL")
            root.cursor().execute("UPDATE r1 SET w = id WHERE id < 10")

    q = mysql_cdc.sync(classic_spark, once=True, on_batch=on_batch, **args)
    assert q.awaitTermination(600), "the sync did not end"
    assert q.exception() is None, q.exception()
    taken = changed[0]
    rounds = store.rounds()
    first, redo, snap = rounds[taken], rounds[taken + 1], rounds[taken + 2]
    assert {str(t) for t, _ in first.ranges} == {f"{db}.r1", f"{db}.r2"} and first.request == 1, first
    # r1 reset whole (no range), r2's range taken out again; the round after reads r1 whole, r2's range alone
    assert set(redo.dropped) == {TableId(db, "r1"), TableId(db, "r2")} and redo.request is None, redo
    assert [str(t) for t, _ in redo.ranges] == [f"{db}.r2"] and "ADD COLUMN w" in (redo.note or ""), redo
    assert set(snap.tables) == {TableId(db, "r1"), TableId(db, "r2")}, snap
    reads = {t: sum(r.rows for r in store.chunk_records(TableId(db, t))) for t in ("r1", "r2")}
    assert reads == {"r1": 300, "r2": 100}, reads
    for n in (0, 1):
        done = mysql_cdc.resnapshot(state_dir=args["state_dir"], request=n, checkpoint=args["checkpoint"])
        assert done.state == "done" and {t.table for t in done.snapshotted} == {"r1", "r2"}, done
    final = _verify(classic_spark, args, recheck_seconds=0, tables=f"{db}[.]r[12]")
    assert final.ok and [t.rows for t in final.tables] == [300, 300], final.lines()
    mirror = deltalake.DeltaTable(table_path(args["to"], TableId(db, "r1"))).to_pyarrow_table()
    assert sorted(zip(mirror["id"].to_pylist(), mirror["w"].to_pylist()))[:11] == [
        *((i, i) for i in range(10)), (10, None)]
