"""Tables without a primary key on real servers (issue 12, item 5): a nullable chunk key (its NULL keys in a
chunk of their own, read with IS NULL), a table with no key at all (one chunk), equal rows kept as many times
as the table holds them; every chunk read at one exact binlog point, so the snapshot plus the emitted changes,
applied as a multiset, equal the table; a chunk read again after a crash equals its first read; a binlog-only
read needs no key; a capture user who may not take the brief read lock is told so before any row is read."""

from __future__ import annotations

import collections
import random
import threading
from typing import Any

import pytest

import mysql_cdc
from mysql_cdc.chunks import Chunk, ChunkRecord
from mysql_cdc.connect import connect
from mysql_cdc.errors import PrivilegeError
from mysql_cdc.offsets import GtidSet, binlog_file_key
from mysql_cdc.options import parse_options
from mysql_cdc.planner.plan import describe_tables, plan_tables
from mysql_cdc.profiles import ConnectionProfile
from mysql_cdc.sql import chunk_where
from mysql_cdc.state.store import StateStore
from mysql_cdc.udtf.binlog.phase import BinlogPhase, Change
from mysql_cdc.udtf.binlog.rules import recorded_rules
from mysql_cdc.udtf.binlog.startup import rules_start
from mysql_cdc.udtf.convert import batch_to_rows
from mysql_cdc.udtf.snapshot.reader import Hooks, SnapshotReader
from tests.conftest import wait_until
from tests.helpers import binlog_end, insert_rows, profile_url, purge_binlogs
from tests.servers import ServerInfo, ServerProcess

Rows = collections.Counter[tuple[Any, ...]]


def _table(root: Any, cur: Any, name: str) -> Rows:
    cur.execute(f"SELECT * FROM {name}")
    return collections.Counter(tuple(r) for r in cur.fetchall())


def _make(root: Any, seed: int) -> None:
    """``nk``: split by the nullable pair (k, s), NULL in either column, keys and whole rows repeated; ``bare``:
    no key at all, equal rows."""
    r = random.Random(seed)
    cur = root.cursor()
    cur.execute("CREATE TABLE nk (k INT NULL, s VARCHAR(8) CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci NULL, "
                "v INT NOT NULL)")
    cur.execute("CREATE TABLE bare (a INT NULL, b VARCHAR(8) NOT NULL)")
    rows = []
    for i in range(600):
        k = None if i % 7 == 0 else r.randrange(40)
        s = None if i % 11 == 0 else r.choice(["a", "A", "b", "é", "E"])
        rows.append((k, s, i % 5))  # (k, s, v) repeats: equal rows
    insert_rows(root, "nk", ["k", "s", "v"], rows)
    insert_rows(root, "bare", ["a", "b"], [(None if i % 9 == 0 else i % 13, "x" if i % 2 else "y")
                                          for i in range(300)])
    cur.close()


def _write(cur: Any, r: random.Random) -> None:
    """One change of either table: equal rows inserted, one of equal rows deleted or updated (LIMIT 1), keys
    moved to and from NULL."""
    t = r.choice(["nk", "bare"])
    op = r.random()
    if t == "nk":
        k = None if r.random() < 0.2 else r.randrange(45)
        s = None if r.random() < 0.2 else r.choice(["a", "A", "b", "é", "E"])
        if op < 0.4:
            cur.execute("INSERT INTO nk VALUES (%s, %s, %s)", (k, s, r.randrange(5)))
        elif op < 0.6:
            cur.execute("DELETE FROM nk WHERE k <=> %s AND s <=> %s LIMIT 1", (k, s))
        else:  # a key moves, maybe to or from NULL
            cur.execute("UPDATE nk SET k = %s, s = %s, v = v + 1 WHERE k <=> %s LIMIT 1",
                        (None if r.random() < 0.3 else r.randrange(45), s, k))
    else:
        a = None if r.random() < 0.2 else r.randrange(14)
        if op < 0.4:
            cur.execute("INSERT INTO bare VALUES (%s, 'x')", (a,))
        elif op < 0.7:
            cur.execute("DELETE FROM bare WHERE a <=> %s LIMIT 1", (a,))
        else:
            cur.execute("UPDATE bare SET b = IF(b = 'x', 'y', 'x') WHERE a <=> %s LIMIT 1", (a,))


def _plan(profile: ConnectionProfile, db: str, **opts: Any) -> tuple[Any, dict[str, Any]]:
    facts, plans = plan_tables(profile, parse_options({"tables": f"{db}[.](nk|bare)", "chunk_key": f"{db}[.]nk:k,s",
                                                       **opts}))
    return facts, {p.schema.table.table: p for p in plans}


def test_nullable_chunk_keys_and_tables_without_a_key_are_chunked_completely(
        profile: ConnectionProfile, db: str, root: Any) -> None:
    """C1 for keys with NULLs: every row lies in exactly one chunk (counted with the chunks' own WHERE), the
    NULL keys in the last chunk; a table without a key is one chunk."""
    _make(root, 1)
    _, plans = _plan(profile, db, chunk_size=40)
    nk, bare = plans["nk"], plans["bare"]
    assert nk.schema.chunk_key == ("k", "s") and nk.schema.nullable_key
    assert len(nk.chunks) >= 5 and nk.chunks[-1].nulls and not any(c.nulls for c in nk.chunks[:-1])
    assert bare.schema.chunk_key == () and [(c.start, c.end, c.nulls) for c in bare.chunks] == [(None, None, False)]
    cur = root.cursor()
    for plan, name in ((nk, "nk"), (bare, "bare")):
        got: Rows = collections.Counter()
        for c in plan.chunks:
            where, params = chunk_where(c)
            cur.execute(f"SELECT * FROM {name} WHERE {where}", params)
            rows = [tuple(r) for r in cur.fetchall()]
            if c.nulls:
                assert rows and all(r[0] is None or r[1] is None for r in rows)
            elif plan is nk:
                assert all(r[0] is not None and r[1] is not None for r in rows)
            got.update(rows)
        assert got == _table(root, cur, name), name
    cur.close()


def _read_all(reader: SnapshotReader, chunks: tuple[Chunk, ...], store: StateStore | None = None) -> Rows:
    out: Rows = collections.Counter()
    for c in chunks:
        read = reader.read(c)
        assert read.low == read.high  # one exact point: nothing corrected
        n = 0
        for b in read.batches:
            rows = batch_to_rows(b)
            n += len(rows)
            out.update(tuple(r) for r in rows)
        if store is not None:
            store.record_chunk(ChunkRecord.of(c, read.low, read.high, n))
    return out


def _applied(snapshot: Rows, changes: list[Change]) -> Rows:
    """The snapshot with the changes applied in binlog order, rows by whole-row identity: -U and -D remove one
    equal row (which must be there), +U and +I add one."""
    m = collections.Counter(snapshot)
    for ch in sorted(changes, key=lambda c: (binlog_file_key(c.file), c.pos, c.row)):
        if ch.op in ("-U", "-D"):
            assert m[ch.values] > 0, f"{ch.op} of a row the mirror does not hold: {ch}"
            m[ch.values] -= 1
        else:
            m[ch.values] += 1
    return +m


def test_snapshot_and_binlog_of_tables_without_a_key_keep_equal_rows_under_writes(
        profile: ConnectionProfile, db: str, root: Any, tmp_path: Any) -> None:
    """Writers change both tables while every chunk is read (right after its point is taken) and afterwards;
    the snapshot plus the changes emitted from the recorded points equal each table as a multiset. A
    correction by whole-row identity would merge equal rows, and a point that is not exact would apply a
    change twice or never."""
    _make(root, 2)
    facts, plans = _plan(profile, db, chunk_size=60)
    store = StateStore(str(tmp_path / "state"))
    r = random.Random(3)
    cur = root.cursor()

    def during(_: Chunk) -> None:
        for _ in range(6):
            _write(cur, r)

    opts = parse_options({"tables": f"{db}[.](nk|bare)", "chunk_key": f"{db}[.]nk:k,s"})
    snaps = {}
    for name, plan in plans.items():
        reader = SnapshotReader(profile, plan.schema, facts, opts, hooks=Hooks(after_low_watermark=during))
        snaps[name] = _read_all(reader, plan.chunks, store)
    for _ in range(150):
        _write(cur, r)
    cur.execute("FLUSH BINARY LOGS")
    for _ in range(50):
        _write(cur, r)
    schemas = {p.schema.table: p.schema for p in plans.values()}
    rules = recorded_rules(store, schemas, lambda: connect(profile))
    phase = BinlogPhase(profile, facts, opts, schemas, rules)
    changes = list(phase.changes(rules_start(rules), None))
    phase.close()
    for name in plans:
        mine = [c for c in changes if c.table.table == name]
        assert mine, name
        assert _applied(snaps[name], mine) == _table(root, cur, name), name
    assert any(None in (k[0], k[1]) for k in snaps["nk"]) and max(snaps["bare"].values()) > 1  # NULLs, equal rows
    cur.close()


def test_a_chunk_of_a_table_without_a_key_read_again_after_a_crash_equals_its_first_read(
        profile: ConnectionProfile, db: str, root: Any) -> None:
    """A chunk read again (the batch that read it is retried after a crash) holds the rows of the point its
    first read recorded, whichever read's output the sink kept: later changes are undone, not merged."""
    _make(root, 4)
    facts, plans = _plan(profile, db, chunk_size=60)
    opts = parse_options({"tables": f"{db}[.](nk|bare)", "chunk_key": f"{db}[.]nk:k,s"})
    cur = root.cursor()
    r = random.Random(5)
    for name in ("nk", "bare"):
        reader = SnapshotReader(profile, plans[name].schema, facts, opts)
        for c in (plans[name].chunks[0], plans[name].chunks[-1]):
            first = reader.read(c)
            rows = collections.Counter(tuple(x) for b in first.batches for x in batch_to_rows(b))
            for _ in range(80):
                _write(cur, r)
            cur.execute(f"INSERT INTO {name} SELECT * FROM {name} LIMIT 3")  # more equal rows
            again = reader.read(c, as_of=first.high)
            assert again.high == first.high and again.corrected > 0, (name, c.index)
            assert collections.Counter(tuple(x) for b in again.batches for x in batch_to_rows(b)) == rows
            fresh = reader.read(c)
            assert fresh.high != first.high
    cur.close()


def test_without_the_lock_grant_a_table_without_a_key_is_refused_before_reading(
        info: ServerInfo, db: str, root: Any) -> None:
    _make(root, 6)
    user = f"nolock{db[-6:]}"
    cur = root.cursor()
    cur.execute(f"CREATE USER '{user}'@'%' IDENTIFIED BY 'Pw-nolock-1'")
    try:
        cur.execute(f"GRANT SELECT, REPLICATION CLIENT, REPLICATION SLAVE ON *.* TO '{user}'@'%'")
        prof = ConnectionProfile(info.host, info.port, user, "Pw-nolock-1", connect_timeout=5)
        with pytest.raises(PrivilegeError, match=rf"'{db}\.bare' has no primary key.*GRANT LOCK TABLES ON `{db}`"):
            plan_tables(prof, parse_options({"tables": f"{db}[.]bare"}))
        with pytest.raises(PrivilegeError, match="GRANT LOCK TABLES"):  # a snapshot only reads chunks too
            plan_tables(prof, parse_options({"tables": f"{db}[.]bare", "startup": "snapshot"}))
        with pytest.raises(PrivilegeError, match="GRANT LOCK TABLES"):  # tables joining a running stream
            describe_tables(prof, parse_options({"tables": f"{db}[.]bare", "startup": "latest"}), snapshot=True)
        # a read from the binlog only takes no lock
        facts, plans = plan_tables(prof, parse_options({"tables": f"{db}[.]bare", "startup": "latest"}))
        assert plans[0].schema.chunk_key == ()
        # and a chunk read anyway is refused by the reader with the same cause, before any row
        reader = SnapshotReader(prof, plans[0].schema, facts, parse_options({}))
        with pytest.raises(PrivilegeError, match=rf"'{db}\.bare' has no primary key.*GRANT LOCK TABLES"):
            reader.read(plans[0].chunks[0])
    finally:
        cur.execute(f"DROP USER '{user}'@'%'")
        cur.close()


def test_binlog_only_read_of_a_table_without_a_key(spark: Any, profile: ConnectionProfile, db: str, root: Any
                                                   ) -> None:
    """``mysql_cdc_binlog`` from the first binlog file: every change of a table without any key, equal rows
    included, rebuilds it (no chunk key asked for)."""
    cur = root.cursor()
    purge_binlogs(cur)  # 'earliest' reads from here, not through every earlier test's changes
    cur.execute("CREATE TABLE bare (a INT NULL, b VARCHAR(8) NOT NULL)")
    cur.execute("INSERT INTO bare VALUES (1, 'x'), (1, 'x'), (NULL, 'y'), (2, 'z')")
    cur.execute("DELETE FROM bare WHERE a = 1 LIMIT 1")
    cur.execute("UPDATE bare SET b = 'w' WHERE a IS NULL")
    cur.execute("INSERT INTO bare VALUES (2, 'z')")
    mysql_cdc.register(spark, {"src": profile_url(profile)})
    rows = spark.sql(f"SELECT * FROM mysql_cdc_binlog(source => 'src', table => '{db}.bare', "
                     "startup => 'earliest')").collect()
    m: Rows = collections.Counter()
    for x in sorted(rows, key=lambda x: (binlog_file_key(x["__file"]), x["__pos"], x["__row"])):
        img = (x["a"], x["b"])
        if x["__op"] in ("-U", "-D"):
            assert m[img] > 0
            m[img] -= 1
        else:
            m[img] += 1
    assert +m == _table(root, cur, "bare") == collections.Counter({(1, "x"): 1, (None, "w"): 1, (2, "z"): 2})
    cur.close()


def _insert_bare(info: ServerInfo, db: str) -> None:
    conn = info.connect(root=True, database=db)
    try:
        conn.autocommit(True)
        conn.cursor().execute("INSERT INTO bare VALUES (-1, 'held')")
    finally:
        conn.close()


@pytest.mark.parametrize("watermark", ["auto", "position"])
def test_a_transaction_held_between_binlog_and_commit_is_in_the_point_and_the_rows_alike(
        server: ServerProcess, info: ServerInfo, profile: ConnectionProfile, db: str, root: Any, watermark: str
        ) -> None:
    """A write to a table without a key, in the binlog but not yet committed in the engine (held by
    semi-synchronous replication) while its chunk is read: the read lock waits for it, so the point and the rows
    agree (both hold it). With the LOCK TABLES statement removed, this test fails on both servers and both
    watermark options (checked by hand: the point or the rows then lack the write)."""
    _make(root, 7)
    file0, pos0, _ = binlog_end(root)
    server.enable_semisync(timeout_ms=3000)
    held = threading.Thread(target=_insert_bare, args=(info, db))
    try:
        held.start()
        wait_until(lambda: binlog_end(root)[:2] != (file0, pos0), 10, "the held INSERT to reach the binlog")
        held_end = binlog_end(root)
        cur = root.cursor()
        cur.execute("SELECT COUNT(*) FROM bare WHERE a = -1")
        assert cur.fetchone()[0] == 0, "the held row must not be visible yet"
        cur.close()
        facts, plans = plan_tables(profile, parse_options({"tables": f"{db}[.]bare", "watermark": watermark}))
        read = SnapshotReader(profile, plans[0].schema, facts, parse_options({"watermark": watermark})
                              ).read(plans[0].chunks[0])
        rows = [r for b in read.batches for r in batch_to_rows(b)]
    finally:
        held.join(30)
        server.disable_semisync()
    assert read.low == read.high
    if read.high.kind == "gtid":
        claimed = GtidSet.parse(held_end[2]).issubset(read.high.gtid_set())
    else:
        claimed = (binlog_file_key(held_end[0]), held_end[1]) <= (binlog_file_key(read.high.file), read.high.pos)
    assert claimed and (-1, "held") in rows, (claimed, read.high.to_dict())


def test_a_long_transaction_on_a_table_without_a_key_is_one_clear_error_after_the_tries(
        profile: ConnectionProfile, info: ServerInfo, db: str, root: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """A transaction that wrote the table and stays open keeps the read lock from being granted: after the
    tries (two of a second here) the read stops with one error naming the table and the cause."""
    from mysql_cdc.errors import TableError
    from mysql_cdc.udtf.snapshot import reader as snapshot

    _make(root, 8)
    facts, plans = _plan(profile, db)
    monkeypatch.setattr(snapshot, "PIN_ATTEMPTS", 2)
    holder = info.connect(root=True, database=db)
    cur = holder.cursor()
    cur.execute("BEGIN")
    cur.execute("INSERT INTO bare VALUES (99, 'open')")
    try:
        reader = SnapshotReader(profile, plans["bare"].schema, facts, parse_options({}))
        with pytest.raises(TableError, match=rf"'{db}\.bare' \(no primary key\) could not be read-locked .* 2 tries"):
            reader.read(plans["bare"].chunks[0])
    finally:
        cur.execute("ROLLBACK")
        holder.close()
    assert sum(_read_all(reader, plans["bare"].chunks).values()) == 300  # granted once the transaction ended


def test_a_repeated_composite_key_next_to_a_null_splits_without_losing_rows(profile: ConnectionProfile, db: str,
                                                                            root: Any) -> None:
    """More equal keys than a chunk holds, then keys whose second column is NULL (sorted first): a boundary
    is never a key with a NULL (those rows are the NULL chunk's), so no row falls between chunks."""
    cur = root.cursor()
    cur.execute("CREATE TABLE rep (a INT NOT NULL, b INT NULL, v INT NOT NULL)")
    rows = [(1, 5, i) for i in range(30)] + [(2, None, i) for i in range(3)] + [(2, 7, 0), (2, 8, 0), (3, 1, 0)]
    insert_rows(root, "rep", ["a", "b", "v"], rows)
    _, plans = plan_tables(profile, parse_options({"tables": f"{db}[.]rep", "chunk_key": "a,b", "chunk_size": 10}))
    chunks = plans[0].chunks
    assert all(v is not None for c in chunks for b in (c.start, c.end) if b for v in b)
    got: Rows = collections.Counter()
    for c in chunks:
        where, params = chunk_where(c)
        cur.execute(f"SELECT * FROM rep WHERE {where}", params)
        got.update(tuple(r) for r in cur.fetchall())
    assert got == collections.Counter(rows)
    cur.close()


def test_a_chunk_without_a_size_bound_is_streamed_never_read_ahead_whole(profile: ConnectionProfile, db: str,
                                                                        root: Any) -> None:
    """Chunks are read one ahead, whole, in a thread; a table without any key is one chunk of every row, and
    the NULL keys' chunk has no bound either: those are read in turn, streamed."""
    from mysql_cdc.udtf.spark.chunk_reads import read_chunks
    from mysql_cdc.udtf.spark.output import Output

    _make(root, 9)
    facts, plans = _plan(profile, db, chunk_size=100)
    opts = parse_options({"tables": f"{db}[.](nk|bare)", "chunk_key": f"{db}[.]nk:k,s"})
    readers = {name: SnapshotReader(profile, p.schema, facts, opts) for name, p in plans.items()}
    where: dict[str, str] = {}

    class Watched:
        def __init__(self, reader: SnapshotReader) -> None:
            self.reader, self.schema = reader, reader.schema

        def read(self, chunk: Chunk, as_of: Any = None) -> Any:
            where[chunk.id] = threading.current_thread().name
            return self.reader.read(chunk, as_of)

    chunks = (*plans["nk"].chunks, *plans["bare"].chunks, plans["nk"].chunks[0])
    schemas = {p.schema.table: p.schema for p in plans.values()}
    rows = sum(b.num_rows for b in read_chunks(lambda t: Watched(readers[t.table]), chunks, opts,  # type: ignore
                                               Output(schemas, opts)))
    cur = root.cursor()
    assert rows == sum(_table(root, cur, n).total() for n in ("nk", "bare")) + len(
        list(_read_all(readers["nk"], (plans["nk"].chunks[0],)).elements()))
    cur.close()
    bounded = [c.id for c in plans["nk"].chunks if not c.nulls][1:]
    assert all(where[c].startswith("mysql-cdc-prefetch") for c in bounded), where
    unbounded = [plans["nk"].chunks[-1].id, plans["bare"].chunks[0].id]
    assert not any(where[c].startswith("mysql-cdc-prefetch") for c in unbounded), where
