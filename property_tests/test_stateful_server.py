"""Stateful property test against a real server (MySQL 9.7 with GTIDs and MariaDB 10.11): the whole algorithm,
chunk reads, correction, emit rule, binlog reads and restarts, under interleavings Hypothesis chooses.

Rules: single-row inserts, updates, deletes, key moves between chunks, multi-row updates, FLUSH BINARY LOGS;
read the next chunk with writes injected after its low watermark and before its high watermark (on either
read path); read a chunk while another transaction is held between its binlog write and its engine commit
(semi-synchronous replication, docs/DESIGN.md §4); read the binlog to "latest", by the same reader or by a
new one restarted from the recorded state (chunk records and the committed offset); read the last binlog
range again (a re-run micro-batch must give the same changes).

Checked: every chunk's rows lie in its range and no key comes from two chunks (C1); every emitted image applies
cleanly (a delete finds its row, an insert does not); no change is emitted twice across reads (C3); and
whenever the reader has caught up, the mirror (snapshot rows plus emitted changes in binlog order) equals the
table (C2 + C3). Each run ends by reading what is left and comparing with the table on the server.

Bounded in the default run; ``MYSQL_CDC_HYPOTHESIS_PROFILE=long`` runs many more and longer histories.
"""

from __future__ import annotations

import itertools
import os
import shutil
import tempfile
import threading
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, event, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule, run_state_machine_as_test

from mysql_cdc.chunks import Chunk
from mysql_cdc.connect import connect
from mysql_cdc.ids import TableId
from mysql_cdc.offsets import BinlogOffset, binlog_file_key
from mysql_cdc.options import parse_options
from mysql_cdc.planner.plan import plan_tables
from mysql_cdc.profiles import ConnectionProfile
from mysql_cdc.state.store import ChunkRecord, StateStore
from mysql_cdc.udtf.binlog.phase import BinlogPhase, Change
from mysql_cdc.udtf.binlog.rules import recorded_rules
from mysql_cdc.udtf.binlog.startup import ReadFrom, rules_start, server_end
from mysql_cdc.udtf.convert import batch_to_rows
from mysql_cdc.udtf.snapshot.reader import ChunkRead, Hooks, SnapshotReader
from tests.conftest import wait_until
from tests.servers import ServerProcess

KEYS = list(range(-4, 64))
INITIAL = {k: k for k in range(0, 40, 2)}  # chunk_size 4: about five chunks, the first and last open
PROFILES = {"default": {"max_examples": 10, "stateful_step_count": 40},
            "long": {"max_examples": 100, "stateful_step_count": 80}}
_names = itertools.count()
pytestmark = pytest.mark.timeout(900)

Op = tuple[Any, ...]


class CdcMachine(RuleBasedStateMachine):
    server: ServerProcess  # set on a subclass per server kind

    def __init__(self) -> None:
        super().__init__()
        info = self.server.info
        assert info is not None
        self.info = info
        self.profile = ConnectionProfile(info.host, info.port, info.user, info.password, connect_timeout=5)
        self.db = f"sm{os.getpid()}_{next(_names)}"
        self.root = info.connect(root=True)
        self.root.autocommit(True)
        cur = self.root.cursor()
        cur.execute(f"CREATE DATABASE `{self.db}`")
        self.root.select_db(self.db)
        cur.execute("CREATE TABLE t (id INT PRIMARY KEY, v INT NOT NULL)")
        cur.executemany("INSERT INTO t (id, v) VALUES (%s, %s)", sorted(INITIAL.items()))
        self.model = dict(INITIAL)
        self.state_dir = tempfile.mkdtemp(prefix="cdc-stateful-")
        self.store = StateStore(self.state_dir)
        self.opts = parse_options({"tables": f"{self.db}\\.t", "chunk_size": 4, "state_dir": self.state_dir})
        self.facts, plans = plan_tables(self.profile, self.opts)
        self.schema = plans[0].schema
        self.chunks = list(plans[0].chunks)
        self.table = TableId(self.db, "t")
        self.next_chunk = 0
        self.mirror: dict[int, int] = {}
        self.phase: BinlogPhase | None = None
        self.resume: ReadFrom | None = None
        self.emitted: set[tuple[str, int, int]] = set()
        self.last_range: tuple[ReadFrom, BinlogOffset, list[Change]] | None = None
        self.caught_up = False
        self.held = 0

    # -- writes --
    def _draw_op(self, data: st.DataObject) -> Op:
        free = [k for k in KEYS if k not in self.model]
        keys = sorted(self.model)
        kinds = [k for k, ok in (("insert", free), ("update", keys), ("delete", keys), ("move", keys and free),
                                 ("multi", keys)) if ok]
        kind = data.draw(st.sampled_from(kinds), label="write")
        value = data.draw(st.integers(0, 999), label="value")
        if kind == "insert":
            return ("insert", data.draw(st.sampled_from(free), label="key"), value)
        if kind == "multi":
            return ("multi", data.draw(st.integers(-4, 60), label="from key"))
        k = data.draw(st.sampled_from(keys), label="key")
        if kind == "move":
            return ("move", k, data.draw(st.sampled_from(free), label="to key"))
        return (kind, k, value)

    def _do(self, op: Op) -> None:
        cur = self.root.cursor()
        kind = op[0]
        if kind == "insert":
            cur.execute("INSERT INTO t (id, v) VALUES (%s, %s)", (op[1], op[2]))
            self.model[op[1]] = op[2]
        elif kind == "update":
            cur.execute("UPDATE t SET v = %s WHERE id = %s", (op[2], op[1]))
            self.model[op[1]] = op[2]
        elif kind == "delete":
            cur.execute("DELETE FROM t WHERE id = %s", (op[1],))
            del self.model[op[1]]
        elif kind == "move":
            cur.execute("UPDATE t SET id = %s WHERE id = %s", (op[2], op[1]))
            self.model[op[2]] = self.model.pop(op[1])
        else:
            cur.execute("UPDATE t SET v = v + 1 WHERE id BETWEEN %s AND %s", (op[1], op[1] + 6))
            for k in self.model:
                if op[1] <= k <= op[1] + 6:
                    self.model[k] += 1
        cur.close()
        self.caught_up = False

    def _writes(self, data: st.DataObject, n: int) -> None:
        for _ in range(n):
            self._do(self._draw_op(data))

    @rule(data=st.data())
    def write(self, data: st.DataObject) -> None:
        self._do(self._draw_op(data))

    @rule()
    def flush_logs(self) -> None:
        self.root.cursor().execute("FLUSH BINARY LOGS")

    # -- snapshot --
    def _take(self, chunk: Chunk, read: ChunkRead) -> None:
        rows = [r for batch in read.batches for r in batch_to_rows(batch)]
        self.store.record_chunk(ChunkRecord.of(chunk, read.low, read.high, read.rows))
        for k, v in rows:
            assert (chunk.start is None or (k,) >= chunk.start) and (chunk.end is None or (k,) < chunk.end), \
                f"key {k} outside chunk {chunk.id} [{chunk.start}, {chunk.end})"
            assert k not in self.mirror, f"key {k} came from two chunks"
            self.mirror[k] = v
        self.next_chunk += 1

    @precondition(lambda self: self.next_chunk < len(self.chunks))
    @rule(data=st.data(), after_low=st.integers(0, 3), before_high=st.integers(0, 2), fast=st.booleans())
    def read_chunk(self, data: st.DataObject, after_low: int, before_high: int, fast: bool) -> None:
        chunk = self.chunks[self.next_chunk]
        hooks = Hooks(after_low_watermark=(lambda _: self._writes(data, after_low)) if after_low else None,
                      before_high_watermark=(lambda _: self._writes(data, before_high)) if before_high else None)
        reader = SnapshotReader(self.profile, self.schema, self.facts, self.opts, hooks=hooks, fast=fast)
        self._take(chunk, reader.read(chunk))

    @precondition(lambda self: self.next_chunk < len(self.chunks) and self.held < 1)
    @rule(data=st.data(), fast=st.booleans())
    def read_chunk_while_a_commit_is_held(self, data: st.DataObject, fast: bool) -> None:
        chunk = self.chunks[self.next_chunk]
        free = [k for k in KEYS if k not in self.model]
        inside = [k for k in free if (chunk.start is None or (k,) >= chunk.start)
                  and (chunk.end is None or (k,) < chunk.end)]
        key = data.draw(st.sampled_from(inside or free), label="held key")
        before = server_end(self.profile, self.facts).position_key()
        self.server.enable_semisync(timeout_ms=1500)
        failed: list[BaseException] = []

        def insert() -> None:
            try:
                conn = self.info.connect(root=True, database=self.db)
                conn.cursor().execute("INSERT INTO t (id, v) VALUES (%s, 7777)", (key,))
                conn.close()
            except BaseException as e:  # surfaced below
                failed.append(e)

        held = threading.Thread(target=insert)
        try:
            held.start()
            wait_until(lambda: server_end(self.profile, self.facts).position_key() != before, 10,
                       "the held INSERT to reach the binlog")
            read = SnapshotReader(self.profile, self.schema, self.facts, self.opts, fast=fast).read(chunk)
            self._take(chunk, read)
            event(f"commit held while its chunk was read: {self._visible(key) is None}")
        finally:
            held.join(30)
            self.server.disable_semisync()
        assert not failed, failed
        self.model[key] = 7777
        self.caught_up = False
        self.held += 1

    # -- binlog --
    @precondition(lambda self: self.next_chunk == len(self.chunks))
    @rule(restart=st.booleans())
    def read_binlog_to_latest(self, restart: bool) -> None:
        if restart or self.phase is None:
            # a new reader knows only what was recorded: the chunk records and the committed offset
            if self.phase is not None:
                self.phase.close()
            store = StateStore(self.state_dir)
            rules = recorded_rules(store, {self.table: self.schema}, lambda: connect(self.profile))
            self.phase = BinlogPhase(self.profile, self.facts, self.opts, {self.table: self.schema}, rules)
            committed = store.offset(str(self.table))
            self.resume = ReadFrom.from_dict(committed) if committed is not None else rules_start(rules)
        assert self.resume is not None
        end = server_end(self.profile, self.facts)
        changes = list(self.phase.changes(self.resume, end))
        event(f"binlog read: {'restarted' if restart else 'same reader'}, changes emitted: {bool(changes)}")
        self._apply(changes)
        self.last_range = (self.resume, end, changes)
        self.resume = ReadFrom(BinlogOffset(end.file, end.pos))
        self.store.record_offset(str(self.table), self.resume.to_dict())
        self.caught_up = True

    def _apply(self, changes: list[Change]) -> None:
        for ch in sorted(changes, key=lambda c: (binlog_file_key(c.file), c.pos, c.row)):
            at = (ch.file, ch.pos, ch.row)
            assert at not in self.emitted, f"{ch} was emitted twice"
            self.emitted.add(at)
            k, v = ch.values
            if ch.op in ("-U", "-D"):
                assert self.mirror.get(k) == v, f"{ch}: the mirror holds {self.mirror.get(k)!r} for key {k}"
                del self.mirror[k]
            else:
                assert k not in self.mirror, f"{ch}: the mirror already holds key {k}"
                self.mirror[k] = v

    @precondition(lambda self: self.last_range is not None)
    @rule()
    def read_the_last_range_again(self) -> None:
        assert self.last_range is not None
        start, end, changes = self.last_range
        rules = recorded_rules(StateStore(self.state_dir), {self.table: self.schema}, lambda: connect(self.profile))
        again = BinlogPhase(self.profile, self.facts, self.opts, {self.table: self.schema}, rules)
        assert list(again.changes(start, end)) == changes

    # -- checks --
    @invariant()
    def mirror_equals_the_table_when_caught_up(self) -> None:
        if self.caught_up:
            assert self.mirror == self.model

    def _visible(self, key: int) -> int | None:
        cur = self.root.cursor()
        cur.execute("SELECT v FROM t WHERE id = %s", (key,))
        row = cur.fetchone()
        cur.close()
        return None if row is None else int(row[0])

    def _table(self) -> dict[int, int]:
        cur = self.root.cursor()
        cur.execute("SELECT id, v FROM t")
        rows = {int(k): int(v) for k, v in cur.fetchall()}
        cur.close()
        return rows

    def teardown(self) -> None:
        try:
            while self.next_chunk < len(self.chunks):
                chunk = self.chunks[self.next_chunk]
                self._take(chunk, SnapshotReader(self.profile, self.schema, self.facts, self.opts).read(chunk))
            self.read_binlog_to_latest(restart=True)
            assert self.model == self._table()
            assert self.mirror == self.model
        finally:
            if self.phase is not None:
                self.phase.close()
            self.root.cursor().execute(f"DROP DATABASE IF EXISTS `{self.db}`")
            self.root.close()
            shutil.rmtree(self.state_dir, ignore_errors=True)


def test_mirror_equals_table_under_any_interleaving(server: ServerProcess) -> None:
    machine = type(f"CdcMachine_{server.kind}", (CdcMachine,), {"server": server})
    name = os.environ.get("MYSQL_CDC_HYPOTHESIS_PROFILE", "default")
    # "mutate" (property_tests/mutate.py): the default size, stop at the first failure without shrinking it
    phases = [Phase.generate] if name == "mutate" else list(Phase)
    run_state_machine_as_test(machine, settings=settings(
        deadline=None, suppress_health_check=list(HealthCheck), database=None, phases=phases,
        **PROFILES.get(name, PROFILES["default"])))

