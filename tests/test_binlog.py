"""The binlog phase on real servers (C3): after a snapshot taken while writers change the table, the emitted
changes applied in binlog order on top of the snapshot equal the table, and each change comes out exactly
when its chunk's high watermark does not already include it: never missing, never twice."""

from __future__ import annotations

import contextlib
import functools
import re
import threading
import time
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest

from mysql_cdc.chunks import Chunk
from mysql_cdc.connect import connect
from mysql_cdc.errors import BinlogError, PrivilegeError, SchemaChangedError
from mysql_cdc.ids import TableId
from mysql_cdc.offsets import BinlogOffset, binlog_file_key
from mysql_cdc.options import parse_options
from mysql_cdc.planner.plan import plan_tables
from mysql_cdc.profiles import ConnectionProfile
from mysql_cdc.state.store import ChunkRecord, StateStore
from mysql_cdc.udtf.binlog.columns import ColumnImages
from mysql_cdc.udtf.binlog.phase import BinlogPhase, Change, run_changes
from mysql_cdc.udtf.binlog.rules import recorded_rules
from mysql_cdc.udtf.binlog.server_ids import claimed_server_id
from mysql_cdc.udtf.binlog.startup import ReadFrom, rules_start, server_end
from mysql_cdc.udtf.binlog.transactions import read_transactions
from mysql_cdc.udtf.convert import batch_to_rows
from mysql_cdc.udtf.snapshot.reader import Hooks, SnapshotReader
from tests.conftest import wait_until
from tests.helpers import Write, Writer, binlog_end, counted, insert_rows, statements_alone

Image = tuple[str, int, int]  # op, id, v


class Model:
    """The table as the test changed it, and the row images each write produced."""

    def __init__(self, writer: Writer, rows: dict[int, int]) -> None:
        self.w = writer
        self.rows = rows
        self.images: list[tuple[Write, list[Image]]] = []
        self.n = 0

    def _v(self) -> int:
        self.n += 1
        return 1_000_000 + self.n

    def insert(self, k: int) -> None:
        v = self._v()
        self.w("INSERT INTO t (id, v) VALUES (%s, %s)", k, v)
        self.rows[k] = v
        self.images.append((self.w.writes[-1], [("+I", k, v)]))

    def update(self, k: int, new_k: int | None = None) -> None:
        v, nk = self._v(), k if new_k is None else new_k
        self.w("UPDATE t SET id = %s, v = %s WHERE id = %s", nk, v, k)
        old = self.rows.pop(k)
        self.rows[nk] = v
        self.images.append((self.w.writes[-1], [("-U", k, old), ("+U", nk, v)]))

    def delete(self, k: int) -> None:
        self.w("DELETE FROM t WHERE id = %s", k)
        self.images.append((self.w.writes[-1], [("-D", k, self.rows.pop(k))]))

    def flush_logs(self) -> None:
        self.w("FLUSH BINARY LOGS")


def _owner(chunks: list[Chunk], k: int) -> Chunk:
    return next(c for c in chunks if (c.start is None or (k,) >= c.start) and (c.end is None or (k,) < c.end))


def _snapshot(profile: ConnectionProfile, db: str, store: StateStore, during: dict[int, Any]
              ) -> tuple[list[Chunk], dict[int, int], dict[int, BinlogOffset]]:
    """Read every chunk (running ``during[index]`` right after that chunk's low watermark) and record it."""
    opts = parse_options({"tables": f"{db}\\.t", "chunk_size": 100})
    facts, plans = plan_tables(profile, opts)
    chunks = list(plans[0].chunks)
    assert len(chunks) >= 8
    hooks = Hooks(after_low_watermark=lambda c: during[c.index]() if c.index in during else None)
    reader = SnapshotReader(profile, plans[0].schema, facts, opts, hooks=hooks)
    snap: dict[int, int] = {}
    highs: dict[int, BinlogOffset] = {}
    for c in chunks:
        read = reader.read(c)
        for batch in read.batches:
            for k, v in batch_to_rows(batch):
                snap[k] = v
        store.record_chunk(ChunkRecord.of(c, read.low, read.high, read.rows))
        highs[c.index] = read.high
    return chunks, snap, highs


def _phase(profile: ConnectionProfile, db: str, store: StateStore) -> tuple[BinlogPhase, ReadFrom]:
    opts = parse_options({"tables": f"{db}\\.t", "state_dir": store.location})
    facts, plans = plan_tables(profile, opts)
    table = TableId(db, "t")
    rules = recorded_rules(store, {table: plans[0].schema}, lambda: connect(profile))
    return BinlogPhase(profile, facts, opts, {table: plans[0].schema}, rules), rules_start(rules)


def _apply(rows: dict[int, int], changes: list[Change]) -> dict[int, int]:
    out = dict(rows)
    for ch in sorted(changes, key=lambda c: (binlog_file_key(c.file), c.pos, c.row)):
        k, v = ch.values
        if ch.op in ("-U", "-D"):
            out.pop(k, None)
        else:
            out[k] = v
    return out


def _source(root: Any) -> dict[int, int]:
    cur = root.cursor()
    cur.execute("SELECT id, v FROM t")
    out = {int(k): int(v) for k, v in cur.fetchall()}
    cur.close()
    return out


def _kill_binlog_dump(info: Any) -> None:
    """End the one binlog connection on the server (its dump thread), as a server restart or a network cut would."""
    admin = info.connect(root=True)
    acur = admin.cursor()
    acur.execute("SELECT ID FROM information_schema.PROCESSLIST WHERE COMMAND LIKE 'Binlog Dump%'")
    dumps = [r[0] for r in acur.fetchall()]
    assert len(dumps) == 1
    acur.execute(f"KILL {int(dumps[0])}")
    admin.close()


@pytest.fixture
def table(root: Any) -> Iterator[Model]:
    root.cursor().execute("CREATE TABLE t (id INT PRIMARY KEY, v INT NOT NULL)")
    keys = range(2, 2001, 2)  # even keys: odd ones are free for inserts and moved keys
    insert_rows(root, "t", ["id", "v"], [(k, k) for k in keys])
    counted(root, "t")  # the chunks follow the row estimate, which lags behind the insert
    yield Model(Writer(root), {k: k for k in keys})


def test_snapshot_plus_changes_equal_the_table_and_each_change_comes_once(
        profile: ConnectionProfile, db: str, root: Any, table: Model, tmp_path: Any) -> None:
    m = table
    store = StateStore(str(tmp_path / "state"))

    def while_chunk_2_reads() -> None:
        m.update(50)          # chunk 0, read already: its high watermark is before this
        m.update(450)         # chunk 2, being read: after its low watermark
        m.update(1300)        # a chunk read later: already in its rows
        m.update(1880, 61)    # a key moves from a later chunk into chunk 0 (after image emitted, before not)
        m.update(70, 1921)    # and the other way
        m.delete(960)
        m.insert(4001)        # beyond the last key: the open last chunk
        m.flush_logs()        # the backfill and the binlog phase cross a rotation
        m.delete(1640)
        m.insert(1640)        # a deleted key comes back
        # one event of keys in a chunk read already and in chunks read later: cut by the emit rule
        keys = (30, 32, 34, 1500, 1502)
        m.w("UPDATE t SET v = v + 7 WHERE id IN (30, 32, 34, 1500, 1502)")
        m.images.append((m.w.writes[-1], [img for k in keys
                                          for img in (("-U", k, m.rows[k]), ("+U", k, m.rows[k] + 7))]))
        for k in keys:
            m.rows[k] += 7

    def while_chunk_6_reads() -> None:
        m.update(1250)
        m.update(1440, 31)

    chunks, snap, highs = _snapshot(profile, db, store, {2: while_chunk_2_reads, 6: while_chunk_6_reads})
    during = list(m.images)

    # after the snapshot: inserts, updates moving keys between chunks, deletes, re-inserts, a multi-row write
    for k in (10, 666, 1998):
        m.update(k)
    m.update(888, 4003)
    m.delete(20)
    m.insert(20)
    m.flush_logs()
    m.w("UPDATE t SET v = v + 1 WHERE id BETWEEN 1200 AND 1208")
    multi = range(1200, 1209, 2)
    many = [img for k in multi for img in (("-U", k, m.rows[k]), ("+U", k, m.rows[k] + 1))]
    for k in multi:
        m.rows[k] += 1
    m.images.append((m.w.writes[-1], many))

    phase, start = _phase(profile, db, store)
    changes = list(phase.changes(start, None))

    assert _apply(snap, changes) == _source(root) == m.rows
    # exactly once: an image comes out iff the high watermark of the chunk holding its key lacks the write
    expected: Counter[Image] = Counter()
    for write, images in m.images:
        for op, k, v in images:
            if not write.covered_by(highs[_owner(chunks, k).index]):
                expected[(op, k, v)] += 1
    got = Counter((ch.op, ch.values[0], ch.values[1]) for ch in changes)
    assert got == expected
    # the key decided some of the writes during the snapshot: some were left out, some emitted
    during_images = {(op, k, v) for _, imgs in during for op, k, v in imgs}
    assert 0 < len(during_images & set(got)) < len(during_images)
    positions = [(ch.file, ch.pos, ch.row) for ch in changes]
    assert len(positions) == len(set(positions))
    # the same read as runs of walked events (what the Spark surfaces read): the same change rows, the events
    # the snapshot overlaps decided on their key column and cut into their emitted stretches
    phase, start = _phase(profile, db, store)
    runs = list(phase.runs(start, None, columns=True))
    assert [tuple(c) for r in runs for c in run_changes(r)] == [tuple(c) for c in changes]
    assert any(isinstance(r.values, ColumnImages) and r.values.span is not None for r in runs)


def test_reading_up_to_an_end_then_on_from_it_loses_and_repeats_nothing(
        profile: ConnectionProfile, db: str, root: Any, table: Model, tmp_path: Any) -> None:
    m = table
    store = StateStore(str(tmp_path / "state"))
    _, snap, _ = _snapshot(profile, db, store, {})
    phase, start = _phase(profile, db, store)
    ends = []
    for i in range(4):
        m.update(100 + 2 * i)
        m.insert(5001 + 2 * i)
        if i == 1:
            m.flush_logs()
        ends.append(server_end(profile, phase.facts))
    changes: list[Change] = []
    begin = start
    for end in ends:
        part = list(phase.changes(begin, end))
        again = list(phase.changes(begin, end))
        assert part == again  # a range reads the same changes each time (a re-run micro-batch)
        # nothing past the end, also when the end is the first position of a file after a rotation
        assert all(BinlogOffset(c.file, c.pos).position_key() <= end.position_key() for c in part), (end, part)
        changes += part
        begin = ReadFrom(BinlogOffset(end.file, end.pos))
    assert _apply(snap, changes) == _source(root)
    assert len({(c.file, c.pos, c.row) for c in changes}) == len(changes), "a change came out twice"
    assert Counter(ch.values for ch in changes if ch.op == "+I") == Counter((5001 + 2 * i, m.rows[5001 + 2 * i])
                                                                           for i in range(4))


def _next_file(name: str) -> str:
    base, _, n = name.rpartition(".")
    return f"{base}.{int(n) + 1:0{len(n)}d}"


def test_a_read_the_server_ends_short_of_its_end_reads_on_and_never_returns_short(
        info: Any, profile: ConnectionProfile, db: str, root: Any, table: Model) -> None:
    """A read ends where its range ends, not where the server's stream stopped: the server sends what it has
    made readable and then ends a non-blocking read, and the read returned there, short of an end the server had
    reported (what lay between was never read: a mirror one change behind). Here the end (the next binlog
    file's start, where a catch-up part may end) lies past what the server has written: the read waits for the
    write and the rotation that come a second later and delivers the write; an end that never comes is one
    clear error, not a short read."""
    facts, _ = plan_tables(profile, parse_options({"tables": f"{db}\\.t"}))
    here = server_end(profile, facts)
    tables = {TableId(db, "t")}

    def write_later() -> None:
        time.sleep(1.0)
        conn = info.connect(root=True, database=db)
        conn.cursor().execute("INSERT INTO t (id, v) VALUES (9001, 77)")
        conn.cursor().execute("FLUSH BINARY LOGS")
        conn.close()

    writer = threading.Thread(target=write_later)
    writer.start()
    try:
        with claimed_server_id(profile, range(7201, 7203)) as sid:
            got = [r for txn in read_transactions(profile, sid, here, tables, flavor=facts.flavor, auto_position=False,
                                                  end=BinlogOffset(_next_file(here.file), 4)) for r in txn.rows]
    finally:
        writer.join()
    assert [(r.op, r.after) for r in got] == [("insert", {"id": 9001, "v": 77})], got
    after = server_end(profile, facts)
    never = BinlogOffset(after.file, after.pos + 10_000)
    with claimed_server_id(profile, range(7201, 7203)) as sid, pytest.raises(
            BinlogError, match=rf"binlog ends at {re.escape(after.file)}:\d+, before this read's end "
                               rf".*:{never.pos}, and did not reach it within 2 s"):  # (MariaDB may add a checkpoint)
        list(read_transactions(profile, sid, after, tables, flavor=facts.flavor, auto_position=False, end=never,
                               wait_for_end=2.0))


def test_ddl_on_a_captured_table_stops_with_the_table_and_position(
        profile: ConnectionProfile, db: str, root: Any, table: Model, tmp_path: Any) -> None:
    m = table
    store = StateStore(str(tmp_path / "state"))
    _snapshot(profile, db, store, {})
    phase, start = _phase(profile, db, store)
    m.update(2)
    root.cursor().execute("ALTER TABLE t ADD COLUMN extra INT")
    m.w("UPDATE t SET extra = 5 WHERE id = 2")
    got: list[Change] = []
    with pytest.raises(SchemaChangedError) as e:
        for ch in phase.changes(start, None):
            got.append(ch)
    msg = str(e.value)
    assert f"'{db}.t'" in msg and "ALTER TABLE" in msg and "new snapshot" in msg
    assert [ch.op for ch in got] == ["-U", "+U"] and got[1].values[0] == 2  # the change before the DDL came out


def test_purged_binlog_is_one_clear_error(profile: ConnectionProfile, db: str, root: Any, table: Model,
                                          tmp_path: Any) -> None:
    m = table
    store = StateStore(str(tmp_path / "state"))
    _snapshot(profile, db, store, {})
    phase, start = _phase(profile, db, store)
    m.update(6)
    m.flush_logs()
    m.update(8)
    cur = root.cursor()
    cur.execute("SHOW BINARY LOGS")
    last = cur.fetchall()[-1][0]
    cur.close()

    def purged() -> bool:
        """PURGE BINARY LOGS TO ``last``, until the start's file is gone: a server keeps every file from the one
        a dump thread still reads (a binlog reader an earlier test left behind until its process ends; MariaDB
        purged nothing then, once in a clean-clone run), so such threads are ended first."""
        c = root.cursor()
        try:
            c.execute("PURGE BINARY LOGS TO %s", (last,))
            c.execute("SHOW BINARY LOGS")
            if start.offset.file not in [r[0] for r in c.fetchall()]:
                return True
            c.execute("SELECT ID FROM information_schema.PROCESSLIST WHERE COMMAND LIKE 'Binlog Dump%%'")
            for (pid,) in c.fetchall():
                with contextlib.suppress(Exception):  # gone meanwhile
                    c.execute(f"KILL {int(pid)}")
            return False
        finally:
            c.close()
    wait_until(purged, 60, f"{start.offset.file} purged")
    with pytest.raises(BinlogError) as e:
        list(phase.changes(ReadFrom(BinlogOffset(start.offset.file, start.offset.pos)), None))
    msg = str(e.value)
    assert start.offset.file in msg and "purged" in msg and "new snapshot" in msg


def test_binlog_connection_killed_on_the_server_is_reopened_without_loss(
        profile: ConnectionProfile, info: Any, db: str, root: Any, table: Model, tmp_path: Any) -> None:
    store = StateStore(str(tmp_path / "state"))
    _, snap, _ = _snapshot(profile, db, store, {})
    phase, start = _phase(profile, db, store)
    # captured updates between 1 MB rows of a table that is not captured: the server is still sending (the
    # reader is paused after its first change) when its dump thread is killed
    cur = root.cursor()
    cur.execute("CREATE TABLE pad (id INT AUTO_INCREMENT PRIMARY KEY, b LONGBLOB)")
    for k in range(2, 402, 2):
        cur.execute("UPDATE t SET v = v + 1 WHERE id = %s", (k,))
    for i in range(40):
        cur.execute("INSERT INTO pad (b) VALUES (REPEAT('x', 1048576))")
        for k in range(402 + 40 * i, 442 + 40 * i, 2):
            cur.execute("UPDATE t SET v = v + 1 WHERE id = %s", (k,))
    changes = phase.changes(start, None)
    got = [next(changes)]
    _kill_binlog_dump(info)
    got += list(changes)
    assert _apply(snap, got) == _source(root)
    assert len(got) == 2 * 1000
    assert len({(c.file, c.pos, c.row) for c in got}) == len(got)


def test_server_ids_all_taken_is_a_clear_error(profile: ConnectionProfile, db: str, root: Any, table: Model,
                                               tmp_path: Any) -> None:
    from mysql_cdc.udtf.binlog.server_ids import LOCK_PREFIX, claimed_server_id

    holder = connect(profile)
    cur = holder.cursor()
    cur.execute("SELECT GET_LOCK(%s, 0)", (LOCK_PREFIX + "7001",))
    assert cur.fetchone()[0] == 1
    try:
        with pytest.raises(BinlogError, match=r"server ids 7001-7001 are in use.*widen server_id_range"), \
                claimed_server_id(profile, range(7001, 7002)):
            pass
        # with a wider range the reader takes the free id
        with claimed_server_id(profile, range(7001, 7003)) as sid:
            assert sid == 7002
    finally:
        holder.close()


def _register_replica(info: Any, server_id: int) -> Any:
    """A connection that registers as a replica the way a real one does (COM_REGISTER_SLAVE), kept open."""
    import struct

    from pymysql.constants import COMMAND

    conn = info.connect(root=True)
    host = b"replica-7"
    conn._execute_command(COMMAND.COM_REGISTER_SLAVE, struct.pack("<I", server_id) + bytes([len(host)]) + host
                          + b"\x00\x00" + struct.pack("<HII", 3306, 0, 0))
    conn._read_packet()
    return conn


def test_a_registered_replicas_server_id_is_never_claimed(info: Any, profile: ConnectionProfile, db: str,
                                                          root: Any) -> None:
    """A binlog connection with a replica's server id makes the server end that replica's connection: the
    ids of registered replicas are skipped. A user that may not list them (MariaDB without REPLICATION MASTER
    ADMIN) claims no id, unless told to claim one unchecked: it used to warn and then take a replica's id."""
    from mysql_cdc.connect import registered_replica_ids
    from mysql_cdc.planner.plan import check_server_id_claims
    from mysql_cdc.udtf.binlog.server_ids import claimed_server_id

    cur = root.cursor()
    blind = None
    if info.kind == "mariadb":
        with contextlib.suppress(Exception):
            cur.execute("DROP USER 'blind'@'%'")
        cur.execute("CREATE USER 'blind'@'%' IDENTIFIED BY 'Blind-pw-1'")
        cur.execute("GRANT SELECT, BINLOG MONITOR, REPLICATION SLAVE ON *.* TO 'blind'@'%'")
        blind = ConnectionProfile(profile.host, profile.port, "blind", "Blind-pw-1", 5)
    replica = _register_replica(info, 7101)
    try:
        conn = connect(profile)
        assert 7101 in (registered_replica_ids(conn) or set())
        conn.close()
        for prefer in (0, 1):
            with claimed_server_id(profile, range(7101, 7103), prefer=prefer) as sid:
                assert sid == 7102
        with pytest.raises(BinlogError, match="in use by other readers or registered replicas"), \
                claimed_server_id(profile, range(7101, 7102)):
            pass
        if blind is not None:
            conn = connect(blind)
            assert registered_replica_ids(conn) is None
            conn.close()
            for claim in (lambda: claimed_server_id(blind, range(7101, 7102)).__enter__(),
                          lambda: check_server_id_claims(blind, parse_options({"source": "x"}))):
                with pytest.raises(PrivilegeError, match=r"may not list the server's replicas.*GRANT REPLICATION "
                                   r"MASTER ADMIN.*unchecked_server_ids => true"):
                    claim()
            check_server_id_claims(blind, parse_options({"source": "x", "startup": "snapshot"}))  # no binlog read
            check_server_id_claims(blind, parse_options({"source": "x", "unchecked_server_ids": "true"}))
            with claimed_server_id(blind, range(7101, 7102), unchecked=True) as sid:
                assert sid == 7101  # unchecked, as asked: the replica's id
    finally:
        replica.close()
        if blind is not None:
            cur.execute("DROP USER 'blind'@'%'")
    with claimed_server_id(profile, range(7101, 7102)) as sid:
        assert sid == 7101  # free once the replica is gone


def test_several_tables_in_one_pass(profile: ConnectionProfile, db: str, root: Any, table: Model, tmp_path: Any
                                    ) -> None:
    m = table
    cur = root.cursor()
    cur.execute("CREATE TABLE u (name VARCHAR(20) COLLATE utf8mb4_general_ci PRIMARY KEY, n INT NOT NULL)")
    insert_rows(root, "u", ["name", "n"], [(f"k{i:04d}", i) for i in range(600)])
    store = StateStore(str(tmp_path / "state"))
    _, snap, _ = _snapshot(profile, db, store, {})
    opts = parse_options({"tables": f"{db}\\.(t|u)", "chunk_size": 100, "state_dir": store.location})
    facts, plans = plan_tables(profile, opts)
    schemas = {p.schema.table: p.schema for p in plans}
    u = TableId(db, "u")
    reader = SnapshotReader(profile, schemas[u], facts, opts,
                            hooks=Hooks(after_low_watermark=lambda c: cur.execute(
                                "UPDATE u SET name = 'K0001X', n = -1 WHERE name = 'k0550'") if c.index == 1 else None))
    snap_u: dict[str, int] = {}
    for c in next(p for p in plans if p.schema.table == u).chunks:
        read = reader.read(c)
        for batch in read.batches:
            snap_u.update(dict(batch_to_rows(batch)))
        store.record_chunk(ChunkRecord.of(c, read.low, read.high, read.rows))
    m.update(2)
    cur.execute("UPDATE u SET n = n + 1 WHERE name = 'K0002'")  # the collation: 'K0002' is the key k0002
    rules = recorded_rules(store, schemas, lambda: connect(profile))
    phase = BinlogPhase(profile, facts, opts, schemas, rules)
    changes = list(phase.changes(rules_start(rules), None))
    assert _apply(snap, [c for c in changes if c.table.table == "t"]) == _source(root)
    mirror = dict(snap_u)
    for ch in sorted((c for c in changes if c.table == u), key=lambda c: (binlog_file_key(c.file), c.pos, c.row)):
        name, n = ch.values
        if ch.op in ("-U", "-D"):
            mirror = {k: v for k, v in mirror.items() if k.lower() != name.lower()}
        else:
            mirror[name] = n
    cur.execute("SELECT name, n FROM u")
    assert mirror == {str(k): int(v) for k, v in cur.fetchall()}
    assert {c.table.table for c in changes} == {"t", "u"}


def test_xa_transactions_are_delivered_at_their_commit_and_dropped_at_their_rollback(
        profile: ConnectionProfile, info: Any, db: str, root: Any, table: Model) -> None:
    """XA PREPARE writes the rows to the binlog; XA COMMIT or XA ROLLBACK comes later in a group of its own
    (another session's, here). The rows come at the commit, where other sessions first see them, after every
    transaction committed in between; none at a rollback (also when larger than fetch_size: never in pieces).
    A read that starts between a prepare and its commit delivers them: given the prepared transactions still
    open at its start (a stream's offset carries them, found by the scan that planned the batch), or looking for
    the prepare in the binlog before it. XA COMMIT ... ONE PHASE is one transaction like any other."""
    opts = parse_options({"tables": f"{db}\\.t"})
    facts, plans = plan_tables(profile, opts)
    t = TableId(db, "t")

    def phase(**more: str) -> BinlogPhase:
        return BinlogPhase(profile, facts, parse_options({"tables": f"{db}\\.t", **more}), {t: plans[0].schema},
                           {t: None})

    run = functools.partial(statements_alone, info, db)

    # the xid used again below, by a transaction before the read: a search must take the prepare of the commit
    run("XA START 'two', 'bq', 7", "UPDATE t SET v = -20 WHERE id = 8", "XA END 'two', 'bq', 7",
        "XA PREPARE 'two', 'bq', 7")
    run("XA COMMIT 'two', 'bq', 7")
    file, pos, _ = binlog_end(root)
    start = ReadFrom(BinlogOffset(file, pos))
    run("XA START 'one'", "UPDATE t SET v = -1 WHERE id = 2", "XA END 'one'", "XA COMMIT 'one' ONE PHASE")
    run("XA START 'two', 'bq', 7", "UPDATE t SET v = -2 WHERE id = 4", "XA END 'two', 'bq', 7",
        "XA PREPARE 'two', 'bq', 7")
    run("UPDATE t SET v = -6 WHERE id = 6")
    mid = BinlogOffset(*binlog_end(root)[:2])
    run("XA COMMIT 'two', 'bq', 7")
    run("XA START 'three'", "UPDATE t SET v = -3 WHERE id <= 40", "XA END 'three'", "XA PREPARE 'three'")
    run("XA ROLLBACK 'three'")
    run("XA START 'four'", "UPDATE t SET v = -4 WHERE id BETWEEN 100 AND 130", "XA END 'four'", "XA PREPARE 'four'")
    run("XA COMMIT 'four'")
    # a backlog after the commits (about 6 MB of another table's rows): a search for a prepare is a binlog read
    # of its own while the read that met the commit still streams, under another server id (the same id made the
    # server end the first read)
    run("CREATE TABLE pad (id INT PRIMARY KEY, s VARCHAR(250) NOT NULL)")
    insert_rows(root, "pad", ["id", "s"], [(k, "p" * 240) for k in range(25_000)])
    end = BinlogOffset(*binlog_end(root)[:2])
    four = [("-U", k, k) for k in range(100, 131, 2)] + [("+U", k, -4) for k in range(100, 131, 2)]
    want = [("-U", 2, 2), ("+U", 2, -1), ("-U", 6, 6), ("+U", 6, -6), ("-U", 4, 4), ("+U", 4, -2)]
    for p in (phase(), phase(fetch_size="4")):
        got = list(p.changes(start, end))
        assert [(c.op, *c.values) for c in got[:6]] == want
        assert sorted((c.op, *c.values) for c in got[6:]) == sorted(four)
        two = [c for c in got if c.values[0] == 4]
        assert all(BinlogOffset(c.file, c.pos).position_key() > mid.position_key() for c in two)  # at the commit
        p.close()
    # a read that ends between the prepare and its commit: nothing of it; the scan that planned it says it is open
    scan = phase()
    assert scan.batch_end(start, mid) == mid
    assert [(x.xid.gtrid, x.xid.bqual, x.xid.format_id) for x in scan.pending_xa] == [(b"two", b"bq", 7)]
    first = [(c.op, *c.values) for c in phase().changes(start, mid)]
    assert first == [("-U", 2, 2), ("+U", 2, -1), ("-U", 6, 6), ("+U", 6, -6)]
    # the next read: given the open transaction, or looking for its prepare before it, the same rows
    for begin in (ReadFrom(mid, xa=scan.pending_xa), ReadFrom(mid)):
        rest = [(c.op, *c.values) for c in phase().changes(begin, end)]
        assert rest[:2] == [("-U", 4, 4), ("+U", 4, -2)] and sorted(rest[2:]) == sorted(four)
    assert phase().batch_end(ReadFrom(mid, xa=scan.pending_xa), end) == end
    cur = root.cursor()
    cur.execute("SELECT id, v FROM t WHERE v < 0 ORDER BY id")
    assert [k for k, _ in cur.fetchall()] == [2, 4, 6, 8, *range(100, 131, 2)]  # three rolled back
    cur.close()


def test_an_xa_transactions_rows_keep_the_change_sequences_of_their_prepare(
        profile: ConnectionProfile, info: Any, db: str, root: Any, table: Model) -> None:
    """An XA transaction's rows come at its commit, numbered where its prepare logged them: every `_change_seq`
    of a read is unique and each key's grow with its changes, so the last image per key by sequence is the
    source's row. (Numbered at the commit, an UPDATE then a DELETE of one key shared a sequence, and 800 images
    took the sequences of the transactions after the commit's one event: a later UPDATE of a key lost to it.)"""
    opts = parse_options({"tables": f"{db}\\.t"})
    facts, plans = plan_tables(profile, opts)
    t = TableId(db, "t")

    run = functools.partial(statements_alone, info, db)

    start = ReadFrom(BinlogOffset(*binlog_end(root)[:2]))
    run("XA START 'five'", "UPDATE t SET v = -5 WHERE id = 10", "DELETE FROM t WHERE id = 10",
        "UPDATE t SET v = -5 WHERE id BETWEEN 200 AND 1000", "XA END 'five'", "XA PREPARE 'five'")
    mid = BinlogOffset(*binlog_end(root)[:2])
    run("UPDATE t SET v = 1 WHERE id = 12")  # between the prepare and the commit
    run("XA COMMIT 'five'")
    run("UPDATE t SET v = 7 WHERE id = 200", "INSERT INTO t VALUES (11, 11)", "UPDATE t SET v = 8 WHERE id = 1000")
    end = BinlogOffset(*binlog_end(root)[:2])
    for more in ({}, {"fetch_size": "4"}):
        phase = BinlogPhase(profile, facts, parse_options({"tables": f"{db}\\.t", **more}),
                            {t: plans[0].schema}, {t: None})
        got = list(phase.changes(start, end))
        assert len(got) == 2 + 1 + 2 * 401 + 2 + 2 + 1 + 2
        # a read that starts after the prepare: given the open transaction, or finding its prepare before it,
        # the same sequences
        assert phase.batch_end(start, mid) == mid
        for begin in (ReadFrom(mid, xa=phase.pending_xa), ReadFrom(mid)):
            assert [(c.op, c.values, c.seq) for c in phase.changes(begin, end)] == [(c.op, c.values, c.seq)
                                                                                   for c in got]
        phase.close()
        assert len({c.seq for c in got}) == len(got)
        per_key: dict[int, list[int]] = {}
        for c in got:  # in the order delivered: each key's changes in the order they happened
            per_key.setdefault(c.values[0], []).append(c.seq)
        assert all(seqs == sorted(seqs) for seqs in per_key.values())
        last = {c.values[0]: c for c in sorted(got, key=lambda c: c.seq)}
        mirror = {k: v for k, v in table.rows.items() if k not in last}
        mirror.update({k: c.values[1] for k, c in last.items() if c.op in ("+I", "+U")})
        assert mirror == _source(root)
        assert 10 not in mirror
        assert (mirror[12], mirror[200], mirror[202], mirror[1000], mirror[11]) == (1, 7, -5, 8, 11)


def test_xa_rows_decided_by_their_keys_keep_the_change_sequences_of_their_prepare(
        profile: ConnectionProfile, info: Any, db: str, root: Any, table: Model, tmp_path: Any) -> None:
    """The same where the emit rule decides by key (the XA transaction commits while a chunk is read, so the
    binlog phase after the snapshot decides its rows chunk by chunk): the emitted images' sequences are unique,
    and the snapshot plus the changes applied in sequence order is the source."""
    store = StateStore(str(tmp_path / "state"))

    run = functools.partial(statements_alone, info, db)

    def while_chunk_2_reads() -> None:  # keys 2..200 are chunk 0's, read already: their images are emitted
        run("XA START 'six'", "UPDATE t SET v = -6 WHERE id = 10", "DELETE FROM t WHERE id = 10",
            "UPDATE t SET v = -6 WHERE id BETWEEN 100 AND 200 OR id BETWEEN 450 AND 470 OR id = 1300",
            "XA END 'six'", "XA PREPARE 'six'")
        run("UPDATE t SET v = 1 WHERE id = 12")
        run("XA COMMIT 'six'")

    _, snap, _ = _snapshot(profile, db, store, {2: while_chunk_2_reads})
    run("UPDATE t SET v = 7 WHERE id = 100")
    phase, start = _phase(profile, db, store)
    got = list(phase.changes(start, None))
    phase.close()
    assert len({c.seq for c in got}) == len(got) and any(c.op == "-D" and c.values[0] == 10 for c in got)
    mirror = dict(snap)
    for c in sorted(got, key=lambda c: c.seq):
        k, v = c.values
        if c.op in ("-U", "-D"):
            mirror.pop(k, None)
        else:
            mirror[k] = v
    assert mirror == _source(root) and mirror[100] == 7 and 10 not in mirror


def test_a_transaction_larger_than_fetch_size_is_read_in_pieces_the_same_and_survives_a_reconnect(
        profile: ConnectionProfile, info: Any, db: str, root: Any, table: Model, tmp_path: Any) -> None:
    """A reader holds at most about ``fetch_size`` rows of a transaction (issue 15, memory): a transaction of
    3,000 change rows, read in pieces of 64, gives exactly the changes read whole (values, positions, the row
    index inside the transaction, sequences), also when the server ends the binlog connection in the middle of
    it (the rows already sent in pieces are not sent twice)."""
    store = StateStore(str(tmp_path / "state"))
    _, snap, _ = _snapshot(profile, db, store, {})
    cur = root.cursor()
    # 1 MB rows of a table that is not captured, inside the transaction: the server is still sending it when
    # its dump thread is killed below
    cur.execute("CREATE TABLE pad (id INT AUTO_INCREMENT PRIMARY KEY, b LONGBLOB)")
    cur.execute("BEGIN")
    for k in range(2, 2001, 2):  # 1,000 single-row updates: 2,000 images in 1,000 rows events
        cur.execute("UPDATE t SET v = v + 7 WHERE id = %s", (k,))
        if k % 100 == 0:
            cur.execute("INSERT INTO pad (b) VALUES (REPEAT('x', 1048576))")
    cur.execute("DELETE FROM t WHERE id <= 1000")  # 500 rows in a few rows events
    cur.execute("INSERT INTO t (id, v) SELECT id + 1, v FROM t WHERE id > 1000")  # 500 rows, one statement
    cur.execute("COMMIT")
    cur.execute("UPDATE t SET v = 0 WHERE id = 1002")  # a transaction after it
    whole_phase, start = _phase(profile, db, store)
    whole = list(whole_phase.changes(start, None))
    assert len(whole) == 2000 + 500 + 500 + 2
    assert _apply(snap, whole) == _source(root)

    opts = parse_options({"tables": f"{db}\\.t", "state_dir": store.location, "fetch_size": 64})
    facts, plans = plan_tables(profile, opts)
    t = TableId(db, "t")
    rules = recorded_rules(store, {t: plans[0].schema}, lambda: connect(profile))
    pieces = BinlogPhase(profile, facts, opts, {t: plans[0].schema}, rules)
    assert list(pieces.changes(start, None)) == whole

    # the pieces themselves: none holds more than fetch_size rows plus one rows event's rows (a statement's
    # event holds at most ~8 KB of rows), and the transaction came in many of them
    with claimed_server_id(profile, opts.server_ids) as sid:
        sizes = [(len(txn.rows), txn.complete) for txn in read_transactions(
            profile, sid, start.offset, {t}, flavor=facts.flavor, auto_position=start.auto_position,
            decoders=pieces.decoders, piece=64)]
    assert sum(1 for _, complete in sizes if not complete) >= 10, sizes
    assert max(n for n, _ in sizes) < 64 + 1000, sizes

    # the server ends the connection in the middle of the big transaction: the library reconnects and resends
    changes = BinlogPhase(profile, facts, opts, {t: plans[0].schema}, rules).changes(start, None)
    got = [next(changes) for _ in range(300)]
    _kill_binlog_dump(info)
    got += list(changes)
    assert got == whole


def test_a_range_cut_at_transaction_boundaries_reads_the_same_changes_as_one_reader(
        profile: ConnectionProfile, info: Any, db: str, root: Any, table: Model, tmp_path: Any) -> None:
    """Parallel catch-up (issue 15): a range cut by ``BinlogPhase.split`` and read part by part gives exactly
    the changes one reader gives, in the same order, across a binlog rotation and from the snapshot's start
    (a GTID set with auto-positioning on MySQL); the emit rule holds per event."""
    m = table
    store = StateStore(str(tmp_path / "state"))
    during = {2: lambda: m.update(10), 5: lambda: (m.update(700), m.delete(702))}
    _, snap, _ = _snapshot(profile, db, store, during)
    cur = root.cursor()
    cur.execute("CREATE TABLE pad (id INT AUTO_INCREMENT PRIMARY KEY, b LONGBLOB)")
    for i in range(6):
        for k in range(100 * i + 2, 100 * i + 62, 2):
            m.update(k)
        m.insert(3001 + 2 * i)
        cur.execute("INSERT INTO pad (b) VALUES (REPEAT('x', 262144))")
        if i == 3:
            m.flush_logs()
    phase, start = _phase(profile, db, store)
    end = server_end(profile, phase.facts)
    whole = list(phase.changes(start, end))
    assert _apply(snap, whole) == _source(root)
    cuts = phase.cut_points(start, end, 3, 1)
    assert len(cuts) == 2 and all(start.offset.position_key() < c.position_key() < end.position_key()
                                  for c in cuts) and cuts[0].position_key() < cuts[1].position_key()
    assert set(cuts) <= set(phase.boundaries(start, end))  # each cut is where a transaction ends
    parts = [start, *(ReadFrom(BinlogOffset(c.file, c.pos)) for c in cuts)]
    per_part = [list(phase.changes(a, b)) for a, b in zip(parts, [*cuts, end])]
    assert all(per_part) and [ch for part in per_part for ch in part] == whole
    assert start.auto_position == (info.kind == "mysql")  # the first part starts from a GTID set on MySQL
    assert phase.cut_points(start, end, 3, 10**9) == []  # too short to be worth cutting


def test_a_cut_range_gives_each_part_the_xa_transactions_open_at_its_cut(
        profile: ConnectionProfile, info: Any, db: str, root: Any, table: Model) -> None:
    """An xid prepared before the range, committed in its first part, prepared again and committed in its
    second: the second part delivers the new prepare's rows, given the XA transactions open at its cut (it was
    given those open at the range's start, and delivered the old prepare's rows again, the new ones never)."""
    opts = parse_options({"tables": f"{db}\\.t"})
    facts, plans = plan_tables(profile, opts)
    t = TableId(db, "t")
    phase = BinlogPhase(profile, facts, opts, {t: plans[0].schema}, {t: None})
    run = functools.partial(statements_alone, info, db)
    root.cursor().execute("CREATE TABLE pad (id INT AUTO_INCREMENT PRIMARY KEY, b LONGBLOB)")
    before = ReadFrom(BinlogOffset(*binlog_end(root)[:2]))
    run("XA START 'again'", "UPDATE t SET v = -1 WHERE id = 2", "XA END 'again'", "XA PREPARE 'again'")
    at = BinlogOffset(*binlog_end(root)[:2])
    phase.batch_end(before, at)
    start = ReadFrom(at, xa=phase.pending_xa)  # the prepared transaction open at the start, as a stream has it
    assert [p.xid for p in start.xa] and len(start.xa) == 1
    run("XA COMMIT 'again'")
    run("XA START 'again'", "UPDATE t SET v = -2 WHERE id = 4", "XA END 'again'", "XA PREPARE 'again'")
    for _ in range(8):  # 2 MB of other transactions: the range is cut among them
        run("INSERT INTO pad (b) VALUES (REPEAT('x', 262144))")
    run("XA COMMIT 'again'")
    end = BinlogOffset(*binlog_end(root)[:2])
    whole = [(ch.op, ch.values) for ch in phase.changes(start, end)]
    assert whole == [("-U", (2, 2)), ("+U", (2, -1)), ("-U", (4, 4)), ("+U", (4, -2))]
    assert phase.batch_end(start, end) == end
    cuts = phase.cut_points(start, end, 2, 1, phase.seen)
    assert len(cuts) == 1
    starts = BinlogPhase.part_starts(start, cuts, phase.seen_xa)
    assert [p.xid for p in starts[1].xa] == [p.xid for p in start.xa] and starts[1].xa != start.xa
    parts = [(ch.op, ch.values) for a, b in zip(starts, [*cuts, end]) for ch in phase.changes(a, b)]
    assert parts == whole
    # a stream that has no scan of the batch at hand (a restart) lets cut_points scan: the same sets
    again = phase.cut_points(start, end, 2, 1)
    assert again == cuts and BinlogPhase.part_starts(start, again, phase.seen_xa) == starts


def test_a_read_across_server_restarts_decodes_each_table_by_its_own_map(
        server: Any, info: Any, profile: ConnectionProfile, db: str) -> None:
    """Table ids are a server run's numbers: after a restart the same id can name another table, in the file the
    restarted server begins. Two tables alike in their columns, opened in one order after one restart and in the
    other after the next: each row read across both restarts is given to its own table (the library's frozen
    table maps gave them to each other, silently, and misread tables that differ)."""
    import re

    run = functools.partial(statements_alone, info, db)

    def ids() -> dict[str, set[int]]:  # table -> the ids its table maps had, in the binlog files read
        conn = info.connect(root=True)
        with conn.cursor() as c:
            c.execute("SHOW BINARY LOGS")
            files = [r[0] for r in c.fetchall() if binlog_file_key(r[0]) >= binlog_file_key(start.file)]
            out: dict[str, set[int]] = {}
            for f in files:
                c.execute("SHOW BINLOG EVENTS IN %s", (f,))
                for row in c.fetchall():
                    m = re.search(r"table_id: (\d+) \(`?[^.]+`?\.`?(\w+)`?\)", row[5]) if row[2] == "Table_map" \
                        else None
                    if m and m.group(2) in ("p", "q"):
                        out.setdefault(m.group(2), set()).add(int(m.group(1)))
        conn.close()
        return out

    run("CREATE TABLE p (id INT PRIMARY KEY, v INT NOT NULL)", "CREATE TABLE q (id INT PRIMARY KEY, w INT NOT NULL)",
        "CREATE TABLE r (id INT PRIMARY KEY, s VARCHAR(20) NOT NULL, d DATETIME(6) NOT NULL)")
    try:
        server.stop(keep_data=True)
        server.start()
        conn = info.connect(root=True)
        start = BinlogOffset(*binlog_end(conn)[:2])
        conn.close()
        run("INSERT INTO p VALUES (1, 10)", "INSERT INTO q VALUES (1, 20)", "INSERT INTO r VALUES (1, 'x', NOW(6))")
        server.stop(keep_data=True)
        server.start()
        run("INSERT INTO q VALUES (2, 21)", "INSERT INTO r VALUES (2, 'y', NOW(6))", "INSERT INTO p VALUES (2, 11)")
        conn = info.connect(root=True)
        end = BinlogOffset(*binlog_end(conn)[:2])
        conn.close()
        seen = ids()
        assert seen["p"] & seen["q"], seen  # an id of p before is q's after: what the read must tell apart
        tables = {TableId(db, t) for t in ("p", "q", "r")}
        rows = [(r.table, r.after[0] if isinstance(r.after, tuple) else r.after["id"])
                for txn in read_transactions(profile, 4242, start, tables, flavor=info.kind, auto_position=False,
                                             end=end) for r in txn.rows]
        assert sorted(rows) == [("p", 1), ("p", 2), ("q", 1), ("q", 2), ("r", 1), ("r", 2)], rows
    finally:
        if server.proc is None:
            server.start()
