"""Chunk coverage (C1) for random key sets of every supported key kind, against the server's own ordering and
collation: the planner's chunks, read back with their WHERE clauses, hold every key exactly once.

Keys come from Hypothesis (extremes included as explicit choices); the server decides which of them collide
under its collation (``INSERT IGNORE``). Both servers.
"""

from __future__ import annotations

import datetime as dt
import os
from typing import Any

import pymysql
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mysql_cdc.options import parse_options
from mysql_cdc.planner.plan import plan_tables
from mysql_cdc.profiles import ConnectionProfile
from mysql_cdc.sql import chunk_where
from tests.servers import ServerProcess

EXAMPLES = 300 if os.environ.get("MYSQL_CDC_HYPOTHESIS_PROFILE") == "long" else 25
I64 = (-(2**63), 2**63 - 1)
U64 = (0, 2**64 - 1)
text = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=10)
latin1 = st.text(st.characters(min_codepoint=0x20, max_codepoint=0xFF), max_size=10)

KINDS: dict[str, tuple[str, Any]] = {
    "bigint": ("BIGINT", st.one_of(st.sampled_from([*I64, I64[0] + 1, I64[1] - 1, 0, -1]), st.integers(*I64))),
    "bigint_unsigned": ("BIGINT UNSIGNED", st.one_of(st.sampled_from([*U64, 2**63 - 1, 2**63, 2**63 + 1]),
                                                     st.integers(*U64))),
    "decimal": ("DECIMAL(30,10)", st.decimals(min_value=-(10**19) + 1, max_value=10**19 - 1, places=10,
                                              allow_nan=False, allow_infinity=False)),
    "varchar_ci": ("VARCHAR(40) CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci", text),
    "latin1_ci": ("VARCHAR(40) CHARACTER SET latin1", latin1),
    "varbinary": ("VARBINARY(16)", st.binary(max_size=16)),
    "datetime6": ("DATETIME(6)", st.datetimes(min_value=dt.datetime(1000, 1, 1),
                                              max_value=dt.datetime(9999, 12, 31, 23, 59, 59, 999999))),
    "date": ("DATE", st.dates(min_value=dt.date(1000, 1, 1), max_value=dt.date(9999, 12, 31))),
    "int_varchar": ("INT NOT NULL, k2 VARCHAR(8) COLLATE utf8mb4_general_ci",
                    st.tuples(st.integers(-3, 3), st.text("aAbBéÉ ", max_size=3))),
}


def _database(server: ServerProcess, db: str) -> tuple[ConnectionProfile, Any, str]:
    """The server's profile, and a root connection to database ``db`` (created)."""
    info = server.info
    assert info is not None
    conn = info.connect(root=True)
    conn.cursor().execute(f"CREATE DATABASE IF NOT EXISTS `{db}`")
    conn.select_db(db)
    return ConnectionProfile(info.host, info.port, info.user, info.password, connect_timeout=5), conn, db


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_chunks_hold_every_key_exactly_once(server: ServerProcess, kind: str) -> None:
    profile, conn, db = _database(server, f"cov_{kind}")
    sqltype, values = KINDS[kind]
    composite = kind == "int_varchar"

    @settings(max_examples=EXAMPLES, deadline=None, database=None, suppress_health_check=list(HealthCheck))
    @given(keys=st.lists(values, min_size=1, max_size=40), chunk_size=st.integers(1, 7))
    def check(keys: list[Any], chunk_size: int) -> None:
        cur = conn.cursor()
        cur.execute("DROP TABLE IF EXISTS t")
        cols = "k1, k2" if composite else "k"
        if composite:
            cur.execute(f"CREATE TABLE t (k1 {sqltype} NOT NULL, n INT, PRIMARY KEY (k1, k2))")
        else:
            cur.execute(f"CREATE TABLE t (k {sqltype} NOT NULL PRIMARY KEY, n INT)")
        for k in keys:  # the server decides which keys collide under its collation
            cur.execute(f"INSERT IGNORE INTO t ({cols}, n) VALUES ({'%s, %s' if composite else '%s'}, 1)",
                        (*k,) if composite else (k,))
        cur.execute(f"SELECT {cols} FROM t")
        stored = sorted(map(tuple, cur.fetchall()))
        _, plans = plan_tables(profile, parse_options({"tables": f"{db}\\.t", "chunk_size": chunk_size}))
        chunks = plans[0].chunks
        assert chunks[0].start is None and chunks[-1].end is None
        assert all(a.end == b.start for a, b in zip(chunks, chunks[1:]))
        got = []
        for c in chunks:
            where, params = chunk_where(c)
            cur.execute(f"SELECT {cols} FROM t WHERE {where}", params)
            got += [tuple(r) for r in cur.fetchall()]
        cur.close()
        assert sorted(got) == stored, f"chunks {[(c.start, c.end) for c in chunks]}"

    try:
        check()
    finally:
        conn.cursor().execute(f"DROP DATABASE IF EXISTS `{db}`")
        conn.close()



POINT_KINDS = ("varchar_ci", "latin1_ci", "int_varchar", "varchar_default", "unicode_ci")
# the server's own collation of utf8mb4 (MySQL's NO PAD utf8mb4_0900_ai_ci, MariaDB's utf8mb4_general_ci); and
# utf8mb4_unicode_ci (PAD SPACE, with expansions: 'ß' = 'ss'), in a column as short as the values, which hold
# characters weighing less than a space ('\t', NUL)
KINDS["varchar_default"] = ("VARCHAR(40) CHARACTER SET utf8mb4", st.text("aAbBéÉeE ß-s\t\x00æ", max_size=4))
KINDS["unicode_ci"] = ("VARCHAR(3) CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci",
                       st.text("asSßæe \t\x00", max_size=3))


@pytest.mark.parametrize("kind", POINT_KINDS)
def test_a_list_of_string_keys_is_read_as_the_server_finds_each_and_no_other_key(server: ServerProcess,
                                                                                kind: str) -> None:
    """Keys of a string key asked for one by one (``resnapshot --key``, ``verify --repair``): the plan's chunks
    (each key's ``[k, k AFTER)``, in the server's order, and those around them) hold every row exactly once; the
    keys' chunks hold exactly the rows the server finds equal to a key asked for (under its collation: 'a' = 'A',
    and 'a ' = 'a' where it pads); and the emit rule's sort keys put each row in the chunk the SQL text does."""
    from mysql_cdc.keyorder import KeyOrder
    from mysql_cdc.keyrange import KeyRange
    from mysql_cdc.planner.plan import split_key_range

    profile, conn, db = _database(server, f"pts_{kind}")
    sqltype, values = KINDS[kind]
    composite = kind == "int_varchar"

    @settings(max_examples=EXAMPLES, deadline=None, database=None, suppress_health_check=list(HealthCheck))
    @given(keys=st.lists(values, min_size=1, max_size=30), asked=st.lists(values, min_size=1, max_size=6),
           chunk_size=st.integers(1, 7))
    def check(keys: list[Any], asked: list[Any], chunk_size: int) -> None:
        cur = conn.cursor()
        cur.execute("DROP TABLE IF EXISTS t")
        cols = ("k1", "k2") if composite else ("k",)
        names = ", ".join(cols)
        if composite:
            cur.execute(f"CREATE TABLE t (k1 {sqltype} NOT NULL, n INT, PRIMARY KEY (k1, k2))")
        else:
            cur.execute(f"CREATE TABLE t (k {sqltype} NOT NULL PRIMARY KEY, n INT)")
        listed = [tuple(k) if composite else (k,) for k in asked]
        for k in [*keys, *asked[:1]]:  # the first key asked for is there (in its spelling, or one equal to it)
            cur.execute(f"INSERT IGNORE INTO t ({names}, n) VALUES ({'%s, %s' if composite else '%s'}, 1)",
                        (*k,) if composite else (k,))
        cur.execute(f"SELECT {names} FROM t")
        stored = sorted(map(tuple, cur.fetchall()))
        found_at: set[tuple[Any, ...]] = set()
        for k in listed:  # the rows equal to a key under the collation (none for a string its charset cannot hold)
            try:
                cur.execute(f"SELECT {names} FROM t WHERE " + " AND ".join(f"{c} = %s" for c in cols), k)
            except pymysql.err.OperationalError as e:
                assert e.args[0] in (1267, 3854), e  # Illegal mix of collations, Cannot convert string: the
                continue  # column's charset cannot hold it
            found_at |= set(map(tuple, cur.fetchall()))
        found = sorted(found_at)
        opts = parse_options({"tables": f"{db}\\.t", "chunk_size": chunk_size})
        _, plans = plan_tables(profile, opts)
        schema = plans[0].schema
        plan, outside = split_key_range(profile, opts, schema, KeyRange.of_keys(cols, listed))
        chunks = plan.chunks
        assert chunks[0].start is None and chunks[-1].end is None
        assert all(a.end == b.start for a, b in zip(chunks, chunks[1:]))
        held: list[tuple[tuple[Any, ...], int]] = []
        for c in chunks:
            where, params = chunk_where(c)
            cur.execute(f"SELECT {names} FROM t WHERE {where}", params)
            held += [(tuple(r), c.index) for r in cur.fetchall()]
        cur.close()
        inside = [r for r, i in held if i not in outside]
        assert sorted(r for r, _ in held) == stored, [(c.start, c.end) for c in chunks]  # each row once
        assert sorted(inside) == found, ([(c.start, c.end) for c in chunks], outside)
        # the emit rule's view (keyorder's sort keys, a bound just after a key after it) agrees with the SQL text
        order = KeyOrder(schema)
        bounds = [b for c in chunks for b in (c.start, c.end) if b is not None]
        sks = order.sort_keys(conn, [*stored, *bounds])
        row_sk, bound_sk = dict(zip(stored, sks)), dict(zip(bounds, sks[len(stored):]))
        for r, i in held:
            start, end = chunks[i].start, chunks[i].end
            assert (start is None or row_sk[r] >= bound_sk[start]) and (end is None or row_sk[r] < bound_sk[end])

    try:
        check()
    finally:
        conn.cursor().execute(f"DROP DATABASE IF EXISTS `{db}`")
        conn.close()


# collations each server has whose orders differ where PAD SPACE meets characters weighing less than a space,
# accents, cases and expansions: one level and several (MariaDB's uca1400 *_as_* and *_cs, thai_520_w2: each
# level padded apart; the Czech ones are MySQL's only collations of several levels under PAD SPACE, and have no
# LEVEL there), NO PAD and binary; with the characters the values are drawn from (in the column's charset)
ORDERS = {
    "mariadb": ("utf8mb4_uca1400_as_cs", "utf8mb4_uca1400_as_ci", "utf8mb4_uca1400_ai_cs", "utf8mb4_thai_520_w2",
                "utf8mb3_uca1400_swedish_as_cs", "utf8mb4_uca1400_ai_ci", "utf8mb4_unicode_520_ci",
                "utf8mb4_general_ci", "utf8mb4_bin", "utf8mb4_nopad_bin", "utf8mb4_uca1400_nopad_as_cs",
                "latin2_czech_cs", "latin1_swedish_ci", "latin1_german2_ci"),
    "mysql": ("utf8mb4_0900_as_cs", "utf8mb4_0900_ai_ci", "utf8mb4_unicode_ci", "utf8mb4_general_ci",
              "utf8mb4_bin", "latin2_czech_cs", "latin1_swedish_ci", "latin1_german2_ci", "latin1_bin"),
}
ORDER_CHARS = {"utf8mb4": "aAbB \t\x00é-ßæ!", "utf8mb3": "aAbB \t\x00éå-ß!", "latin2": "aAcChH \t-!čČ",
               "latin1": "aAeE \t-!äÄßüÿ"}


@pytest.mark.parametrize(("server", "collation"), [(k, c) for k, cs in ORDERS.items() for c in cs],
                         indirect=["server"])
def test_the_sort_keys_compare_strings_as_the_server_does(server: ServerProcess, collation: str) -> None:
    """The emit rule, the snapshot's correction and a list of keys place a string key among chunk bounds by its
    sort key (:class:`mysql_cdc.keyorder.KeyOrder`): for random strings, every two compare by their sort keys
    as the server compares them (``STRCMP`` under the collation)."""
    from mysql_cdc.ids import TableId
    from mysql_cdc.keyorder import KeyOrder
    from mysql_cdc.schema import ColumnInfo, TableSchema

    info = server.info
    assert info is not None
    conn = info.connect(root=True)
    charset = collation.split("_")[0]
    col = ColumnInfo("k", "varchar", "varchar(20)", False, charset, collation)
    value = f"CONVERT(%s USING {charset}) COLLATE {collation}"

    @settings(max_examples=EXAMPLES, deadline=None, database=None, suppress_health_check=list(HealthCheck))
    @given(st.lists(st.text(ORDER_CHARS[charset], max_size=4), min_size=2, max_size=30, unique=True))
    def check(values: list[str]) -> None:
        order = KeyOrder(TableSchema(TableId("d", "t"), (col,), ("k",), ("k",)))  # asks the server afresh
        sks = [sk for (sk,) in order.sort_keys(conn, [(v,) for v in values])]
        pairs = [(i, j) for i in range(len(values)) for j in range(i + 1, len(values))]
        cur = conn.cursor()
        for lo in range(0, len(pairs), 100):
            part = pairs[lo:lo + 100]
            cur.execute("SELECT " + ", ".join(f"STRCMP({value}, {value})" for _ in part),
                        [v for i, j in part for v in (values[i], values[j])])
            for (i, j), server_says in zip(part, cur.fetchone()):
                ours = (sks[i] > sks[j]) - (sks[i] < sks[j])
                assert ours == server_says, (values[i], values[j], collation)
        cur.close()

    try:
        check()
    finally:
        conn.close()
