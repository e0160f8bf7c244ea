"""The planner on real servers: validation errors (C6), discovery, and chunk coverage per key kind (C1)."""

from __future__ import annotations

import datetime as dt
import random
import re
import socket
import threading
import time
from collections.abc import Iterator
from decimal import Decimal
from typing import Any

import pytest

from mysql_cdc.chunks import Chunk
from mysql_cdc.connect import ServerFacts, connect
from mysql_cdc.errors import ChunkKeyError, ConnectError, PrivilegeError, ServerSettingError, TableError
from mysql_cdc.ids import TableId
from mysql_cdc.options import parse_options
from mysql_cdc.planner.plan import describe_table, describe_tables, plan_tables
from mysql_cdc.planner.validate import check_server
from mysql_cdc.profiles import ConnectionProfile
from mysql_cdc.sql import chunk_where
from tests.helpers import counted, insert_rows
from tests.servers import ServerInfo

rng = random.Random(7)


def _plan(profile: ConnectionProfile, pattern: str, **opts: Any) -> list[Chunk]:
    _, plans = plan_tables(profile, parse_options({"tables": pattern, **opts}))
    assert len(plans) == 1
    return list(plans[0].chunks)


def _keys_per_chunk(root: Any, chunks: list[Chunk], cols: list[str]) -> list[list[tuple[Any, ...]]]:
    out = []
    qcols = ", ".join(f"`{c}`" for c in cols)
    cur = root.cursor()
    for c in chunks:
        where, params = chunk_where(c)
        cur.execute(f"SELECT {qcols} FROM {c.table.quoted()} WHERE {where}", params)
        out.append([tuple(r) for r in cur.fetchall()])
    cur.close()
    return out


def _strings() -> list[str]:
    words = ["apple", "Banana", "cherry", "DATE", "éclair", "Zebra", "zoo", "a", "B", "ß", "Ärger", "über",
             "Ω", "😀x", "space ", "tab\t", "", "0", "10", "9"]
    extra = [f"k{i:03d}{'AbC'[i % 3]}" for i in range(60)]
    return words + extra


KEY_KINDS: dict[str, tuple[str, list[Any]]] = {
    "signed_bigint": ("BIGINT", [-(2**63), -(2**63) + 1, -5, 0, 3, 2**63 - 2, 2**63 - 1,
                                 *rng.sample(range(-(10**6), 10**6), 80)]),
    "unsigned_bigint": ("BIGINT UNSIGNED", [0, 1, 2**63 - 1, 2**63, 2**63 + 1, 2**64 - 2, 2**64 - 1]
                        + [2**63 + rng.randrange(10**12) for _ in range(80)]),
    "dense_int": ("INT", list(range(1, 301))),  # evenly sized chunks
    "decimal": ("DECIMAL(30,10)", sorted({Decimal(rng.randrange(-10**15, 10**15)) / Decimal(10**7)
                                          for _ in range(90)})),
    "varchar_ci": ("VARCHAR(40) CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci", _strings()),
    "varchar_0900": ("VARCHAR(40) CHARACTER SET utf8mb4", _strings()),  # server default collation
    "latin1_ci": ("VARCHAR(40) CHARACTER SET latin1", [s for s in _strings() if s.encode("latin1", "ignore")
                                                       .decode("latin1") == s]),
    "varbinary": ("VARBINARY(16)", [b"", b"\x00", b"\x00\x00", b"\x01", b"\x7f", b"\x80", b"\xff", b"\xff\xff"]
                  + [rng.randbytes(rng.randrange(1, 16)) for _ in range(80)]),
    "datetime": ("DATETIME(6)", [dt.datetime(1000, 1, 1), dt.datetime(1970, 1, 1), dt.datetime(9999, 12, 31, 23, 59,
                                                                                           59, 999999)]
                 + [dt.datetime(2000, 1, 1) + dt.timedelta(microseconds=rng.randrange(10**15)) for _ in range(80)]),
    "date": ("DATE", [dt.date(2020, 1, 1) + dt.timedelta(days=i * 3) for i in range(90)]),
}


@pytest.mark.parametrize("kind", sorted(KEY_KINDS))
def test_chunks_partition_the_key_space(info: ServerInfo, profile: ConnectionProfile, db: str, root: Any,
                                        kind: str) -> None:
    sqltype, values = KEY_KINDS[kind]
    if kind == "varchar_0900" and info.kind == "mariadb":
        sqltype = "VARCHAR(40) CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci"
    cur = root.cursor()
    cur.execute(f"CREATE TABLE t (k {sqltype} NOT NULL PRIMARY KEY, n INT)")
    for v in values:  # the server decides which values collide under its collation
        cur.execute("INSERT IGNORE INTO t VALUES (%s, 1)", (v,))
    counted(root, "t")  # evenly sized chunks follow the row estimate, which lags behind the inserts
    cur.execute("SELECT k FROM t")
    all_keys = sorted(tuple(r) for r in cur.fetchall())
    cur.close()
    assert len(all_keys) > 20
    chunks = _plan(profile, f"{db}\\.t", chunk_size=7)
    assert len(chunks) >= 3
    assert chunks[0].start is None and chunks[-1].end is None
    assert all(a.end == b.start for a, b in zip(chunks, chunks[1:]))
    per_chunk = _keys_per_chunk(root, chunks, ["k"])
    flat = [k for ks in per_chunk for k in ks]
    assert sorted(flat) == all_keys, "every key lies in exactly one chunk"
    if kind == "dense_int":  # 300 dense keys: evenly sized chunks, every inner one spans the same step
        widths = {c.end[0] - c.start[0] for c in chunks[1:-1] if c.start and c.end}
        assert len(widths) == 1 and len(chunks) >= 40
    else:
        assert max(len(ks) for ks in per_chunk) <= 7


def test_a_dense_run_of_keys_inside_an_even_spread_is_split_again(profile: ConnectionProfile, db: str,
                                                                   root: Any) -> None:
    """The distribution factor chose evenly sized ranges, but 3,000 of the 6,000 keys sit in the first range:
    that chunk held six times chunk_size rows. Ranges the optimizer estimates above 4x chunk_size are split
    again at keys the server finds, so no chunk is far above chunk_size."""
    from mysql_cdc.planner.splitter import approx_rows, even_bounds

    root.cursor().execute("CREATE TABLE skew (id BIGINT PRIMARY KEY, v INT)")
    keys = list(range(1, 3001)) + [10**6 + 1000 * i for i in range(3000)]
    insert_rows(root, "skew", ["id", "v"], [(k, 0) for k in keys])
    root.cursor().execute("ANALYZE TABLE skew")
    schema = plan_tables(profile, parse_options({"tables": f"{db}[.]skew"}))[1][0].schema
    conn = connect(profile)
    try:  # the even path is what the planner takes for these keys
        assert even_bounds(1, max(keys), approx_rows(conn, schema), 500, 0.05, 1000.0) is not None
    finally:
        conn.close()
    chunks = _plan(profile, f"{db}\\.skew", chunk_size=500)
    per_chunk = _keys_per_chunk(root, chunks, ["id"])
    assert sorted(k for ks in per_chunk for (k,) in ks) == keys  # still every key exactly once
    assert max(len(ks) for ks in per_chunk) <= 2 * 500, [len(ks) for ks in per_chunk]
    assert [c.index for c in chunks] == list(range(len(chunks)))


def test_composite_key_chunks(profile: ConnectionProfile, db: str, root: Any) -> None:
    root.cursor().execute("CREATE TABLE t (a INT NOT NULL, b VARCHAR(10) COLLATE utf8mb4_general_ci NOT NULL, "
                          "c INT, PRIMARY KEY (a, b))")
    rows = [(a, b, 0) for a in range(5) for b in ["x", "Y", "z", "A", "b", "é", "F"]]
    insert_rows(root, "t", ["a", "b", "c"], rows)
    chunks = _plan(profile, f"{db}\\.t", chunk_size=4)
    assert chunks[0].key_columns == ("a", "b")
    per_chunk = _keys_per_chunk(root, chunks, ["a", "b"])
    assert sorted(k for ks in per_chunk for k in ks) == sorted((a, b) for a, b, _ in rows)
    assert max(len(ks) for ks in per_chunk) <= 4


def test_chunk_keys_of_tables_without_a_primary_key(profile: ConnectionProfile, db: str, root: Any) -> None:
    cur = root.cursor()
    cur.execute("CREATE TABLE nopk (g INT NOT NULL, maybe INT NULL, v VARCHAR(5))")
    insert_rows(root, "nopk", ["g", "maybe", "v"], [(i // 10, i if i % 4 else None, "x") for i in range(100)])
    counted(root, "nopk")
    # no key: one chunk of every row; a nullable key: its NULL keys in a last chunk of their own
    assert [(c.key_columns, c.start, c.end, c.nulls) for c in _plan(profile, f"{db}\\.nopk")] == [
        ((), None, None, False)]
    nullable = _plan(profile, f"{db}\\.nopk", chunk_key="maybe", chunk_size=20)
    assert len(nullable) >= 4 and nullable[-1].nulls and nullable[-1].index == len(nullable) - 1
    assert sorted(k for ks in _keys_per_chunk(root, nullable, ["maybe"]) for k in ks if k[0] is not None) == sorted(
        (i,) for i in range(100) if i % 4)
    assert _keys_per_chunk(root, nullable, ["maybe"])[-1] == [(None,)] * 25
    with pytest.raises(ChunkKeyError, match="'nope' is not a column"):
        _plan(profile, f"{db}\\.nopk", chunk_key="nope")
    with pytest.raises(ChunkKeyError, match="'nope' is not a column"):  # the per-table form
        _plan(profile, f"{db}\\.nopk", chunk_key=f"{db}[.]other:g; {db}[.]nopk:nope")
    # a chunk key for a table that has a primary key was silently ignored: an error now, unless a pattern over
    # several tables matched, where it is meant for those without one
    cur.execute("CREATE TABLE withpk (id INT PRIMARY KEY, g INT NOT NULL)")
    with pytest.raises(ChunkKeyError, match=r"'.*withpk' has a primary key \(id\).*drop the option"):
        plan_tables(profile, parse_options({"chunk_key": "g"}), [f"{db}.withpk"])
    cur.execute("CREATE TABLE withpk2 (id INT PRIMARY KEY, g INT NOT NULL)")
    with pytest.raises(ChunkKeyError, match="every matched table has one"):
        plan_tables(profile, parse_options({"tables": f"{db}[.]withpk.*", "chunk_key": "g"}))
    _, both = plan_tables(profile, parse_options({"tables": f"{db}[.](nopk|withpk)", "chunk_key": "g"}))
    assert [p.schema.chunk_key for p in both] == [("g",), ("id",)]
    chunks = _plan(profile, f"{db}\\.nopk", chunk_key="g", chunk_size=15)
    per_chunk = _keys_per_chunk(root, chunks, ["g", "maybe"])
    assert sorted((k for ks in per_chunk for k in ks), key=repr) == sorted(
        ((i // 10, i if i % 4 else None) for i in range(100)), key=repr)
    # equal keys never straddle two chunks
    groups = [{g for g, _ in ks} for ks in per_chunk]
    assert all(not (a & b) for i, a in enumerate(groups) for b in groups[i + 1:])


@pytest.mark.timeout(120)
def test_a_float_chunk_key_with_repeated_values_is_planned(profile: ConnectionProfile, db: str, root: Any,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """FLOAT keys come through the text protocol rounded (``5.3`` for ``5.300000190734863``): planning read them
    exactly, and the planner's loop stops with one clear error where a key comes back as the one before."""
    from mysql_cdc.planner import splitter

    root.cursor().execute("CREATE TABLE fl (x FLOAT NOT NULL, n INT NOT NULL, KEY (x))")
    values = [5.3] * 40 + [i / 7 for i in range(60)] + [0.1] * 25
    insert_rows(root, "fl", ["x", "n"], [(x, i) for i, x in enumerate(values)])
    chunks = _plan(profile, f"{db}\\.fl", chunk_key="x", chunk_size=10)
    per_chunk = _keys_per_chunk(root, chunks, ["n"])
    assert sorted(n for ks in per_chunk for (n,) in ks) == list(range(len(values)))  # each row in one chunk
    assert len(chunks) >= 5
    cur = root.cursor()
    cur.execute("SELECT x + 0e0 FROM fl WHERE n = 0")
    exact = cur.fetchone()[0]
    assert exact != 5.3 and any(c.start == (exact,) or c.end == (exact,) for c in chunks)
    # the rounded read of before: the loop no longer runs forever
    monkeypatch.setattr(splitter, "exact_key_columns", lambda schema: ", ".join(f"`{c}`" for c in schema.chunk_key))
    with pytest.raises(ChunkKeyError, match=r"made no progress: the server gave the key \((0\.1|5\.3),\) again"):
        _plan(profile, f"{db}\\.fl", chunk_key="x", chunk_size=10)


def test_a_view_is_refused_with_one_clear_error(profile: ConnectionProfile, db: str, root: Any) -> None:
    """A view has no binlog of its own: captured by name (with a chunk key, as a view has no primary key) its
    snapshot read rows and its binlog phase returned nothing, forever. Patterns match base tables only."""
    cur = root.cursor()
    cur.execute("CREATE TABLE base (id INT PRIMARY KEY, v INT NOT NULL)")
    cur.execute("CREATE VIEW v AS SELECT id, v FROM base")
    insert_rows(root, "base", ["id", "v"], [(i, i) for i in range(10)])
    opts = parse_options({"chunk_key": "v"})
    for call in (lambda: describe_table(profile, opts, f"{db}.v"),
                 lambda: plan_tables(profile, opts, [f"{db}.v"])):
        with pytest.raises(TableError, match=rf"'{db}\.v' is a view, not a base table.*capture the base tables"):
            call()
    with pytest.raises(TableError, match="is a view"):  # without a chunk key: not told to add a primary key
        describe_table(profile, parse_options({}), f"{db}.v")
    _, plans = plan_tables(profile, parse_options({"tables": f"{db}[.].*"}))
    assert [str(p.schema.table) for p in plans] == [f"{db}.base"]


@pytest.mark.parametrize("server", ["mariadb"], indirect=True)  # MariaDB's
def test_a_system_versioned_table_is_refused_with_one_clear_error(profile: ConnectionProfile, db: str,
                                                                  root: Any) -> None:
    """A system-versioned table logs a DELETE as an UPDATE and its history as INSERTs, which the capture does not
    read: a pattern that matches one is refused, naming it and the exclude that leaves it out (a pattern over the
    database left it out without a word), as is the table named alone."""
    cur = root.cursor()
    cur.execute("CREATE TABLE plain (id INT PRIMARY KEY)")
    cur.execute("CREATE TABLE prices (id INT PRIMARY KEY, p INT) WITH SYSTEM VERSIONING")
    for tables in (f"{db}[.].*", f"{db}[.]prices"):
        with pytest.raises(TableError, match=rf"'{db}\.prices' is system-versioned .*add the pattern\(s\) "
                                             rf"{re.escape(re.escape(db))}\[\.\]prices to option exclude"):
            plan_tables(profile, parse_options({"tables": tables}))
    # also where no table matching is no error (a running capture's looks for new tables, its restarts)
    with pytest.raises(TableError, match="is system-versioned"):
        describe_tables(profile, parse_options({"tables": f"{db}[.].*"}), allow_none=True)
    with pytest.raises(TableError, match="is system-versioned"):
        describe_table(profile, parse_options({}), f"{db}.prices")
    _, plans = plan_tables(profile, parse_options({"tables": f"{db}[.].*", "exclude": f"{db}[.]prices"}))
    assert [str(p.schema.table) for p in plans] == [f"{db}.plain"]


def test_cascading_foreign_keys_are_refused_where_the_binlog_lacks_their_rows(
        server: Any, profile: ConnectionProfile, db: str, root: Any) -> None:
    """MariaDB 10.11 does not log the child rows an ON DELETE CASCADE / SET NULL changes; MySQL 9.7 does. A
    captured child table on MariaDB is refused (or acknowledged by an option); on MySQL the cascaded deletes
    are read from the binlog like any other."""
    from mysql_cdc.udtf.binlog.phase import BinlogPhase
    from mysql_cdc.udtf.binlog.startup import ReadFrom, server_end

    cur = root.cursor()
    cur.execute("CREATE TABLE parent (id INT PRIMARY KEY)")
    cur.execute("CREATE TABLE child (id INT PRIMARY KEY, p INT, FOREIGN KEY fk_p (p) REFERENCES parent (id) "
                "ON DELETE CASCADE)")
    cur.execute("CREATE TABLE nulled (id INT PRIMARY KEY, p INT, CONSTRAINT keep_p FOREIGN KEY (p) "
                "REFERENCES parent (id) ON DELETE SET NULL)")
    cur.execute("CREATE TABLE plain (id INT PRIMARY KEY, p INT, FOREIGN KEY (p) REFERENCES parent (id))")
    insert_rows(root, "parent", ["id"], [(i,) for i in range(1, 11)])
    insert_rows(root, "child", ["id", "p"], [(i, 1 + i % 10) for i in range(1, 41)])
    insert_rows(root, "nulled", ["id", "p"], [(i, 1 + i % 10) for i in range(1, 21)])
    insert_rows(root, "plain", ["id", "p"], [(1, 5)])
    plan = {"tables": f"{db}[.](child|parent|plain)"}
    if server.kind == "mariadb":
        with pytest.raises(TableError, match=rf"'{db}\.child' has foreign key 'fk_p' to 'parent' with ON DELETE "
                                             r"CASCADE.*not write the rows a cascade changes.*allow_unlogged_cascades"):
            plan_tables(profile, parse_options(plan))
        with pytest.raises(TableError, match=r"'keep_p' to 'parent' with ON DELETE SET NULL"):
            describe_table(profile, parse_options({}), f"{db}.nulled")
        _, plans = plan_tables(profile, parse_options({**plan, "allow_unlogged_cascades": "true"}))
        assert len(plans) == 3
        _, plans = plan_tables(profile, parse_options({"tables": f"{db}[.](parent|plain)"}))  # RESTRICT: fine
        assert len(plans) == 2
        # a snapshot alone reads every row as it is: nothing the binlog lacks matters (the data source's batch
        # read, the chunk table, mysql_cdc.plan_chunks)
        _, plans = plan_tables(profile, parse_options(plan), binlog=False)
        assert len(plans) == 3
        import mysql_cdc

        assert len(mysql_cdc.plan_chunks(profile, tables=f"{db}[.]child")) == 1
        return
    facts, plans = plan_tables(profile, parse_options(plan))
    child = next(p.schema for p in plans if p.schema.table.table == "child")
    phase = BinlogPhase(profile, facts, parse_options({}), {child.table: child}, {child.table: None})
    start = server_end(profile, facts)
    cur.execute("DELETE FROM parent WHERE id IN (1, 2)")
    deleted = [(ch.op, ch.values[0]) for ch in phase.changes(ReadFrom(start), server_end(profile, facts))]
    assert sorted(deleted) == [("-D", i) for i in range(1, 41) if 1 + i % 10 in (1, 2)]


def test_empty_and_one_row_tables_are_one_chunk(profile: ConnectionProfile, db: str, root: Any) -> None:
    cur = root.cursor()
    cur.execute("CREATE TABLE e (id INT PRIMARY KEY)")
    cur.execute("CREATE TABLE o (id VARCHAR(5) PRIMARY KEY)")
    cur.execute("INSERT INTO o VALUES ('x')")
    for t in ("e", "o"):
        chunks = _plan(profile, f"{db}\\.{t}", chunk_size=1)
        assert [(c.start, c.end) for c in chunks] == [(None, None)]


def test_pattern_matching_no_table(profile: ConnectionProfile, db: str, root: Any) -> None:
    root.cursor().execute("CREATE TABLE present (id INT PRIMARY KEY)")
    with pytest.raises(TableError, match="match no table"):
        _plan(profile, f"{db}\\.absent")
    _, plans = plan_tables(profile, parse_options({"tables": f"{db}\\..*"}))
    assert [p.schema.table for p in plans] == [TableId(db, "present")]


def test_wrong_password_is_one_clear_error(profile: ConnectionProfile) -> None:
    bad = ConnectionProfile(profile.host, profile.port, profile.user, "not-the-password-42", 5)
    with pytest.raises(ConnectError, match="wrong user or password") as e:
        _plan(bad, "x\\.y")
    assert "not-the-password-42" not in str(e.value) and e.value.__cause__ is None


@pytest.fixture
def silent_listener() -> Iterator[int]:
    """A TCP port that accepts connections and never answers (a host that hangs)."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(8)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        srv.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(srv.accept()[0])
            except OSError:
                continue

    t = threading.Thread(target=accept, daemon=True)
    t.start()
    yield srv.getsockname()[1]
    stop.set()
    t.join()
    for s in held:
        s.close()
    srv.close()


def test_unreachable_server_fails_within_the_timeout(silent_listener: int) -> None:
    prof = ConnectionProfile("127.0.0.1", silent_listener, "cdc", "pw-123", connect_timeout=2)
    started = time.monotonic()
    with pytest.raises(ConnectError, match="cannot reach MySQL at 127.0.0.1"):
        _plan(prof, "x\\.y")
    assert time.monotonic() - started < 30  # bounded, not hanging (the timeout is 2 s)


def test_closed_port_is_one_clear_error() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(ConnectError, match=f"cannot reach MySQL at 127.0.0.1:{port}"):
        _plan(ConnectionProfile("127.0.0.1", port, "cdc", "pw", 2), "x\\.y")


@pytest.mark.parametrize("variable,bad,good", [
    ("binlog_format", "STATEMENT", "ROW"),
    ("binlog_format", "MIXED", "ROW"),
    ("binlog_row_image", "MINIMAL", "FULL"),
    ("binlog_row_image", "NOBLOB", "FULL"),
    ("binlog_row_metadata", "MINIMAL", "FULL"),
])
def test_bad_binlog_settings_stop_with_one_clear_error(info: ServerInfo, profile: ConnectionProfile, db: str,
                                                       root: Any, variable: str, bad: str, good: str) -> None:
    root.cursor().execute("CREATE TABLE t (id INT PRIMARY KEY)")
    cur = root.cursor()
    cur.execute(f"SET GLOBAL {variable} = %s", (bad,))
    try:
        with pytest.raises(ServerSettingError, match=f"{variable} is '{bad}'.*needs '{good}'"):
            _plan(profile, f"{db}\\.t")
    finally:
        cur.execute(f"SET GLOBAL {variable} = %s", (good,))
    assert _plan(profile, f"{db}\\.t")


def _facts(**over: Any) -> ServerFacts:
    variables = {"log_bin": "ON", "binlog_format": "ROW", "binlog_row_image": "FULL", "binlog_row_metadata": "FULL"}
    flavor = over.pop("flavor", "mysql")
    version = over.pop("version", (8, 4, 0))
    variables.update(over)
    return ServerFacts(flavor, version, ".".join(map(str, version)), variables)


def test_server_checks_without_a_server() -> None:
    check_server(_facts())
    check_server(_facts(flavor="mariadb", version=(10, 5, 0)))
    with pytest.raises(ServerSettingError, match="log_bin is 'OFF'.*log-bin"):
        check_server(_facts(log_bin="OFF"))
    check_server(_facts(binlog_row_value_options="", binlog_transaction_compression="OFF"))
    for var in ("binlog_transaction_compression", "log_bin_compress"):
        with pytest.raises(ServerSettingError, match=f"{var} is 'ON'.*SET GLOBAL {var} = OFF"):
            check_server(_facts(**{var: "ON"}))
    with pytest.raises(ServerSettingError, match="binlog_row_value_options is 'PARTIAL_JSON'.*SET GLOBAL"):
        check_server(_facts(binlog_row_value_options="PARTIAL_JSON"))
    with pytest.raises(ServerSettingError, match="too old: MySQL >= 8.0.0"):
        check_server(_facts(version=(5, 7, 44)))
    with pytest.raises(ServerSettingError, match="too old: MariaDB >= 10.5.0"):
        check_server(_facts(flavor="mariadb", version=(10, 4, 30)))


@pytest.mark.parametrize("grants,message", [
    ("SELECT, REPLICATION SLAVE", "cannot run 'SHOW"),
    ("SELECT, REPLICATION CLIENT", "lacks REPLICATION SLAVE"),
    ("REPLICATION CLIENT, REPLICATION SLAVE", "may not SELECT|no SELECT privilege"),
    # an administration privilege whose name starts like the one needed (it was taken for it; the read then
    # failed raw): MariaDB's REPLICATION SLAVE ADMIN, MySQL's REPLICATION_SLAVE_ADMIN
    ("SELECT, REPLICATION CLIENT, {admin}", "lacks REPLICATION SLAVE"),
    # SELECT on some columns only: information_schema shows just those, and the capture lacked the others
    ("REPLICATION CLIENT, REPLICATION SLAVE + SELECT (id)", "may not SELECT (every column of|from)"),
])
def test_missing_privileges(info: ServerInfo, db: str, root: Any, grants: str, message: str) -> None:
    root.cursor().execute("CREATE TABLE t (id INT PRIMARY KEY, secret INT)")
    user = f"weak{abs(hash(grants)) % 10**6}"
    cur = root.cursor()
    cur.execute(f"CREATE USER '{user}'@'%' IDENTIFIED BY 'Weak-pw-1'")
    grants = grants.format(admin="REPLICATION SLAVE ADMIN" if info.kind == "mariadb" else "REPLICATION_SLAVE_ADMIN")
    try:
        global_grants, _, column_grant = grants.partition(" + ")
        cur.execute(f"GRANT {global_grants} ON *.* TO '{user}'@'%'")
        if column_grant:
            cur.execute(f"GRANT {column_grant} ON `{db}`.t TO '{user}'@'%'")
        if "SELECT" not in grants.split(", ") and not column_grant:
            cur.execute(f"GRANT SHOW VIEW ON `{db}`.* TO '{user}'@'%'")  # sees the table, cannot read it
        prof = ConnectionProfile(info.host, info.port, user, "Weak-pw-1", 5)
        with pytest.raises((PrivilegeError, TableError), match=message):
            _plan(prof, f"{db}\\.t")
    finally:
        cur.execute(f"DROP USER '{user}'@'%'")


def test_tables_the_user_cannot_see_are_refused_before_data_moves(info: ServerInfo, db: str, root: Any) -> None:
    """SELECT granted on two of three tables: a pattern that may match the third (which the user cannot see,
    and whose changes the binlog carries) is refused with the grant to give; one naming the granted tables is
    not; a snapshot alone is not checked (it reads what it matches)."""
    cur = root.cursor()
    for t in ("a", "b", "hidden"):
        cur.execute(f"CREATE TABLE {t} (id INT PRIMARY KEY)")
    user = "partial"
    cur.execute(f"CREATE USER '{user}'@'%' IDENTIFIED BY 'Part-pw-1'")
    try:
        cur.execute(f"GRANT REPLICATION CLIENT, REPLICATION SLAVE ON *.* TO '{user}'@'%'")
        cur.execute(f"GRANT SELECT ON `{db}`.a TO '{user}'@'%'")
        cur.execute(f"GRANT SELECT ON `{db}`.b TO '{user}'@'%'")
        prof = ConnectionProfile(info.host, info.port, user, "Part-pw-1", 5)
        with pytest.raises(PrivilegeError, match=rf"may SELECT only some tables of database '{db}' \(a, b\), and "
                           rf"the pattern '{db}\[\.\]\.\*' may match tables .*GRANT SELECT ON `{db}`\.\* TO"):
            plan_tables(prof, parse_options({"tables": f"{db}[.].*"}))
        with pytest.raises(PrivilegeError, match=rf"names '{db}\.hidden', which the user cannot see"):
            plan_tables(prof, parse_options({"tables": f"{db}[.](a|hidden)"}))
        _, plans = plan_tables(prof, parse_options({"tables": f"{db}[.](a|b)"}))
        assert [str(p.schema.table) for p in plans] == [f"{db}.a", f"{db}.b"]
        _, plans = plan_tables(prof, parse_options({"tables": f"{db}[.].*", "exclude": f"{db}[.].*x"}), binlog=False)
        assert [str(p.schema.table) for p in plans] == [f"{db}.a", f"{db}.b"]
    finally:
        cur.execute(f"DROP USER '{user}'@'%'")


def test_binary_log_off_stops_with_one_clear_error(tmp_path: Any) -> None:
    """A real server started without a binlog (MariaDB: starts in about a second)."""
    from tests.servers import ServerProcess

    proc = ServerProcess("mariadb", str(tmp_path), extra_args=["--skip-log-bin"])
    info = proc.start()
    try:
        conn = info.connect(root=True)
        conn.cursor().execute("CREATE DATABASE d")
        conn.cursor().execute("CREATE TABLE d.t (id INT PRIMARY KEY)")
        conn.close()
        prof = ConnectionProfile(info.host, info.port, info.user, info.password, 5)
        with pytest.raises(ServerSettingError, match="log_bin is 'OFF'.*log-bin"):
            _plan(prof, "d\\.t")
    finally:
        proc.stop()


@pytest.mark.parametrize("sql_mode", ["", "NO_BACKSLASH_ESCAPES,ANSI_QUOTES"])
def test_inlined_literals_mean_what_bound_parameters_mean(info: ServerInfo, sql_mode: str) -> None:
    """The Arrow path inlines chunk bounds as literals: each must read back as the value a bound parameter gives,
    whatever the quotes, backslashes or sql_mode."""
    from mysql_cdc.sql import sql_literal

    values = ["it's", "back\\slash", 'dq"', "", "é😀", "\x00nul", b"\x00'\\\xff", b"", -(2**63), 2**64 - 1,
              Decimal("-12345678901234567890.0000000001"), dt.datetime(1000, 1, 1, 0, 0, 0, 1), dt.date(9999, 12, 31),
              dt.timedelta(hours=-838, minutes=-59, seconds=-59), 1.5e-7]
    conn = info.connect()
    cur = conn.cursor()
    cur.execute("SET SESSION sql_mode = %s", (sql_mode,))
    casts = {dt.datetime: "DATETIME(6)", dt.date: "DATE", dt.timedelta: "TIME(6)"}
    for v in values:
        cast = casts.get(type(v))
        wrap = (lambda e: f"CAST({e} AS {cast})") if cast else (lambda e: e)  # noqa: B023
        cur.execute("SELECT " + wrap(sql_literal(v)))
        inlined = cur.fetchone()[0]
        cur.execute("SELECT " + wrap("%s"), (v,))
        bound = cur.fetchone()[0]
        assert inlined == bound and type(inlined) is type(bound), (v, inlined, bound)
        if cast or isinstance(v, (bytes, Decimal)):
            assert inlined == v
    conn.close()


def test_mysql_without_gtids_falls_back_to_positions_with_a_warning(tmp_path: Any,
                                                                     caplog: pytest.LogCaptureFixture) -> None:
    from mysql_cdc.udtf.snapshot.reader import SnapshotReader
    from tests.servers import ServerProcess

    proc = ServerProcess("mysql", str(tmp_path), gtid=False)
    info = proc.start()
    try:
        conn = info.connect(root=True)
        conn.cursor().execute("CREATE DATABASE d")
        conn.cursor().execute("CREATE TABLE d.t (id INT PRIMARY KEY)")
        conn.cursor().execute("INSERT INTO d.t VALUES (1), (2), (3)")
        conn.close()
        prof = ConnectionProfile(info.host, info.port, info.user, info.password, 5)
        opts = parse_options({"tables": "d\\.t"})
        facts, plans = plan_tables(prof, opts)
        assert not facts.gtid_mode
        with caplog.at_level("WARNING", logger="mysql_cdc"):
            reader = SnapshotReader(prof, plans[0].schema, facts, opts)
        assert reader.strategy == "position"
        assert any("enable gtid_mode=ON" in r.getMessage() for r in caplog.records)
        read = reader.read(plans[0].chunks[0])
        assert read.high.kind == "position" and read.high.gtids in (None, "")
        assert sum(b.num_rows for b in read.batches) == 3
    finally:
        proc.stop()


def test_cli_plan_and_status(info: ServerInfo, profile: ConnectionProfile, db: str, root: Any, tmp_path: Any,
                             capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    from mysql_cdc.chunks import Chunk
    from mysql_cdc.cli import main
    from mysql_cdc.offsets import BinlogOffset
    from mysql_cdc.state.store import ChunkRecord, StateStore

    root.cursor().execute("CREATE TABLE t (id INT PRIMARY KEY)")
    insert_rows(root, "t", ["id"], [(i,) for i in range(1, 31)])
    counted(root, "t")
    monkeypatch.setenv("MYSQL_CDC_PROFILE_CLI_TEST",
                       f"mysql://{profile.user}:{profile.password}@{profile.host}:{profile.port}")
    assert main(["plan", "--source", "cli-test", "--tables", f"{db}[.]t", "--chunk-size", "10"]) == 0
    out = capsys.readouterr().out
    # 30 keys, 10 a chunk, evenly by the optimizer's row estimate (31 rows: a step of 9 keys and a fourth chunk)
    assert re.search(rf"^{db}\.t: key \(id\), [34] chunks$", out, re.M), out
    assert f"{db}.t:2" in out and profile.password not in out
    state = str(tmp_path / "state")
    StateStore(state).record_chunk(ChunkRecord.of(Chunk(TableId(db, "t"), 0, ("id",), None, (11,)),
                                                  BinlogOffset("binlog.000001", 4), BinlogOffset("binlog.000001", 9),
                                                  10))
    assert main(["status", "--state-dir", state, "--table", f"{db}.t"]) == 0
    assert "1 chunks recorded, 10 rows" in capsys.readouterr().out
    # a misspelled table or state directory is an error, not "0 chunks recorded" with exit status 0
    assert main(["status", "--state-dir", state, "--table", f"{db}.tt"]) == 2
    err = capsys.readouterr().err
    assert f"nothing is recorded for table '{db}.tt'" in err and f"tables recorded there: {db}.t" in err
    assert main(["status", "--state-dir", state + "x", "--table", f"{db}.t"]) == 2
    assert f"state directory '{state}x' does not exist" in capsys.readouterr().err
    with pytest.raises(SystemExit) as version:
        main(["--version"])
    assert version.value.code == 0 and "mysql-cdc 0.1.0" in capsys.readouterr().out
    assert main(["plan", "--source", "nowhere", "--tables", "x"]) == 2
    assert "unknown connection profile 'nowhere'" in capsys.readouterr().err


def test_cli_tables_lists_what_patterns_match_with_several_patterns_and_the_checks(
        info: ServerInfo, profile: ConnectionProfile, db: str, root: Any, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """``mysql-cdc tables``: several patterns (``--tables`` again, a comma inside a count), what they match and
    what ``--exclude`` leaves out; MariaDB's cascading child refused in one line naming the flag, which the CLI
    has (``--allow-unlogged-cascades``)."""
    from mysql_cdc.cli import main

    cur = root.cursor()
    for t in ("log_2024", "log_24", "log_x", "orders", "skip_me"):
        cur.execute(f"CREATE TABLE {t} (id INT PRIMARY KEY)")
    cur.execute("CREATE TABLE child (id INT PRIMARY KEY, p INT, FOREIGN KEY (p) REFERENCES orders (id) "
                "ON DELETE CASCADE)")
    monkeypatch.setenv("MYSQL_CDC_PROFILE_CLI_TEST",
                       f"mysql://{profile.user}:{profile.password}@{profile.host}:{profile.port}")
    args = ["tables", "--source", "cli-test", "--tables", rf"{db}[.]log_\d{{2,4}}, {db}[.]orders",
            "--tables", f"{db}[.]skip.*", "--exclude", f"{db}[.]skip_me"]
    assert main(args) == 0
    out = capsys.readouterr()
    assert out.out.splitlines() == [f"{db}.log_2024\tprimary key (id)\t1 columns",
                                    f"{db}.log_24\tprimary key (id)\t1 columns",
                                    f"{db}.orders\tprimary key (id)\t1 columns", f"{db}.skip_me\texcluded"]
    assert "3 table(s) match, 1 excluded" in out.err
    child = ["tables", "--source", "cli-test", "--tables", f"{db}[.]child"]
    if info.kind == "mariadb":
        assert main(child) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and "allow_unlogged_cascades" in err[0], err
        assert main([*child, "--allow-unlogged-cascades"]) == 0
    else:
        assert main(child) == 0
    assert f"{db}.child\tprimary key (id)" in capsys.readouterr().out


def test_row_estimates_of_a_million_and_more_choose_even_chunks(profile: ConnectionProfile, db: str,
                                                                root: Any) -> None:
    """MySQL 9's EXPLAIN tree writes estimates of a million rows and more as ``rows=1.2e+6``: read as 1 row,
    the distribution factor looked huge and a 2 M-row table was split by LIMIT/OFFSET scans, one per chunk
    (0.6 s to plan TPC-H orders instead of 0.04 s), and a crowded range was never split again. 2 M rows keep
    InnoDB's sampled estimate (measured 0.88 M for 1.2 M rows) above a million."""
    from mysql_cdc.planner.splitter import approx_rows, range_rows

    cur = root.cursor()
    cur.execute("CREATE TABLE digits (d INT)")
    cur.execute("INSERT INTO digits VALUES (0),(1),(2),(3),(4),(5),(6),(7),(8),(9)")
    cur.execute("CREATE TABLE big (id INT PRIMARY KEY)")
    cur.execute("INSERT INTO big SELECT 1 + 2 * (a.d + 10 * b.d + 100 * c.d + 1000 * e.d + 10000 * f.d + 100000 * g.d "
                "+ 1000000 * h.d) FROM digits a, digits b, digits c, digits e, digits f, digits g, digits h "
                "WHERE h.d < 2 AND a.d + 10 * b.d + 100 * c.d + 1000 * e.d + 10000 * f.d + 100000 * g.d "
                "+ 1000000 * h.d < 2000000")
    cur.execute("ANALYZE TABLE big")
    cur.fetchall()
    plan = plan_tables(profile, parse_options({"tables": f"{db}[.]big", "chunk_size": 330_000}))[1][0]
    conn = connect(profile)
    try:
        assert approx_rows(conn, plan.schema) > 1_000_000
        assert range_rows(conn, plan.schema, (1,), (2_000_001,)) > 500_000
    finally:
        conn.close()
    # the even path: every inner chunk spans the same width of keys. InnoDB samples: its estimate of these 2 M
    # rows was 2.68 M in one CI run (9 chunks of 330,000 estimated rows), so the count has slack both ways
    widths = {c.end[0] - c.start[0] for c in plan.chunks[1:-1] if c.start and c.end}
    assert len(widths) == 1 and 4 <= len(plan.chunks) <= 12, [(c.start, c.end) for c in plan.chunks]


def test_a_table_the_optimizer_thinks_small_is_still_split(profile: ConnectionProfile, db: str, root: Any) -> None:
    """The even split sizes its ranges by the optimizer's estimate of the table's rows, which lags behind a table
    just filled (MySQL once estimated 28 rows for 100 just inserted). An estimate of 3 rows for 500 made one chunk
    of the whole table; a count of at most chunk_size + 1 rows now checks an estimate of one chunk, and the table
    is split by queries. The estimate is set here as the server's persistent statistics hold it."""
    from mysql_cdc.chunks import even_bounds
    from mysql_cdc.planner.splitter import approx_rows

    cur = root.cursor()
    cur.execute("CREATE TABLE small (id INT PRIMARY KEY, v INT) STATS_PERSISTENT = 1 STATS_AUTO_RECALC = 0")
    insert_rows(root, "small", ["id", "v"], [(k, 0) for k in range(1, 501)])
    cur.execute("ANALYZE TABLE small")
    cur.fetchall()
    # MariaDB reads the statistics again only once its dictionary cache has let the table go (a rename does)
    cur.execute("RENAME TABLE small TO small_")
    cur.execute("RENAME TABLE small_ TO small")
    cur.execute("UPDATE mysql.innodb_table_stats SET n_rows = 3 WHERE database_name = %s AND table_name = 'small'",
                (db,))
    cur.execute("FLUSH TABLE small")
    schema = plan_tables(profile, parse_options({"tables": f"{db}[.]small"}))[1][0].schema
    conn = connect(profile)
    try:
        assert approx_rows(conn, schema) == 3  # the optimizer's estimate, as a lagging count leaves it
        assert even_bounds(1, 500, 3, 50, 0.05, 1000.0) == []  # which made one chunk of the whole table
    finally:
        conn.close()
    chunks = _plan(profile, f"{db}\\.small", chunk_size=50)
    per_chunk = _keys_per_chunk(root, chunks, ["id"])
    assert sorted(k for ks in per_chunk for (k,) in ks) == list(range(1, 501))
    assert len(chunks) >= 9 and max(len(ks) for ks in per_chunk) <= 50, [len(ks) for ks in per_chunk]
