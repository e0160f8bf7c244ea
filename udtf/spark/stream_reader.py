"""``spark.readStream.format("mysql_cdc")``: snapshot chunks first (a few per micro-batch), then the binlog
forever, with small offsets (the chunk plan and the chunks' watermarks live in ``state_dir``)."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterator
from dataclasses import replace
from typing import Any, TypeVar

import pyarrow as pa
from pyspark.sql.datasource import DataSourceStreamReader, InputPartition

from mysql_cdc.chunks import Chunk, ChunkRecord
from mysql_cdc.connect import connect
from mysql_cdc.ddl import index_only
from mysql_cdc.errors import ConfigError, SchemaChangedError, StateError
from mysql_cdc.ids import TableId
from mysql_cdc.keyrange import KeyRange, listed, range_problem
from mysql_cdc.memory import return_freed_memory
from mysql_cdc.offsets import BinlogOffset
from mysql_cdc.options import CdcOptions
from mysql_cdc.planner.discover import table_matches
from mysql_cdc.planner.plan import (
    check_server_id_claims,
    describe_now,
    describe_tables,
    split_key_range,
    split_schemas,
)
from mysql_cdc.profiles import ConnectionProfile, running
from mysql_cdc.retry import is_transient, keep_trying
from mysql_cdc.schema import RESET, TableSchema
from mysql_cdc.state.store import Round, StateStore, pin_capture
from mysql_cdc.udtf.binlog.catchup import catchup_parts
from mysql_cdc.udtf.binlog.emit import outside_high
from mysql_cdc.udtf.binlog.phase import BinlogPhase, executed_at
from mysql_cdc.udtf.binlog.rules import recorded_rules
from mysql_cdc.udtf.binlog.spellings import held_in_range, spellings
from mysql_cdc.udtf.binlog.startup import ReadFrom, binary_logs, read_from, rules_start, server_end
from mysql_cdc.udtf.binlog.transactions import SchemaChange
from mysql_cdc.udtf.snapshot.reader import ChunkRead, SnapshotReader
from mysql_cdc.udtf.spark.capture import pinned_schema, planned_tables
from mysql_cdc.udtf.spark.chunk_reads import ChunkPartition, Readers, check_recorded, read_chunks, spread_chunks
from mysql_cdc.udtf.spark.chunk_reports import ChunkReports
from mysql_cdc.udtf.spark.compat import admission_control
from mysql_cdc.udtf.spark.follow import SchemaFollower
from mysql_cdc.udtf.spark.output import Output, changes_need_metadata, output_schema, reset_batch
from mysql_cdc.udtf.spark.stream_offsets import (
    BinlogPartition,
    BinlogStreamOffset,
    ResetPartition,
    SnapshotOffset,
    parse_stream_offset,
)
from mysql_cdc.xa import PendingXa

log = logging.getLogger("mysql_cdc")
T = TypeVar("T")


GONE_WHYS = ("dropped", "renamed", "gone after")  # why a table left the capture when no table of its name is left


def leaving_lines(why: dict[TableId, str], at: dict[str, Any], again: bool) -> list[str]:
    """What the stream says of tables leaving the capture at ``at``: one dropped or renamed away is gone
    (captured afresh only if a table is created under its name); the others are snapshotted again.

    >>> why = {TableId("s", "a"): "dropped at b.1:90 by 'DROP TABLE a'", TableId("s", "b"): "truncated at b.1:90"}
    >>> for line in leaving_lines(why, {"file": "b.1", "pos": 120}, again=True):
    ...     print(line)
    mysql_cdc: s.a leave(s) the capture at b.1:120: s.a: dropped at b.1:90 by 'DROP TABLE a'
    mysql_cdc: s.b leave(s) the capture at b.1:120, to be snapshotted again: s.b: truncated at b.1:90
    """
    gone = sorted(why, key=str)
    left = [t for t in gone if not again or why[t].startswith(GONE_WHYS)]
    out = []
    for tables, what in ((left, ""), ([t for t in gone if t not in left], ", to be snapshotted again")):
        if tables:
            out.append(f"mysql_cdc: {', '.join(map(str, tables))} leave(s) the capture at {at['file']}:{at['pos']}"
                       f"{what}: {'; '.join(f'{t}: {why[t]}' for t in tables)}")
    return out


class MysqlCdcStreamReader(DataSourceStreamReader):
    """Snapshot chunks first (a few per micro-batch), then the binlog forever. Offsets are small: the chunk
    plan and the chunks' watermarks live in ``state_dir``; an offset holds a chunk count or a binlog point.

    With option ``tables`` the capture grows: a table that starts to match (created or renamed into the
    patterns while the stream runs, or found at a restart, e.g. after the patterns were widened) is
    snapshotted in a new *round* while the binlog waits at a point ``resume``, and the binlog then continues
    from ``resume`` with the new table's chunks in the emit rule (as the first snapshot's chunks are), so no
    change of it is lost or doubled. Rounds are recorded in ``state_dir`` (``rounds/<n>.json``); a binlog
    offset says how many rounds are done, so a re-run batch reads the same tables.

    Offsets: :class:`SnapshotOffset` and :class:`BinlogStreamOffset` (:mod:`.stream_offsets`). Schema changes
    are followed by a :class:`SchemaFollower` (:mod:`.follow`). What Spark calls differs by version
    (:mod:`.compat`): :func:`stream_reader` makes the flavour this pyspark takes."""

    def __init__(self, profile: ConnectionProfile, opts: CdcOptions, parallelism: int = 1) -> None:
        if not opts.state_dir:
            raise ConfigError("a mysql_cdc stream needs .option('state_dir', <path or URI>): the chunk plan and the "
                              "chunks' watermarks are kept there (offsets stay small)")
        changes_need_metadata(opts, "a mysql_cdc stream")
        check_server_id_claims(profile, opts)
        self.profile = profile
        self.opts = opts
        self.parallelism = parallelism
        self.many = opts.tables is not None
        self.store = StateStore(opts.state_dir)
        if self.many:
            # the first run's tables are round 0; every captured table keeps the schema recorded for it, and
            # tables that match now but are not captured yet are left to a later round (_new_round)
            # a restart finds the capture's tables in its rounds, even if none matches now (all dropped)
            first = self.store.round(0) is None
            at = self._binlog_now() if first and opts.follows_ddl else None
            self.facts, now = describe_tables(profile, opts, allow_none=not first)
            self.store.record_round(0, Round(tuple(sorted((s.table for s in now), key=str)), schema_at=at))
            current = {s.table: s for s in now}
            self.follower = SchemaFollower(profile, self.facts, opts, self.store)
            self.schemas = {t: pinned_schema(opts, current[t]) if t in current else self._recorded_schema(t)
                            for t in self._recorded_tables()}
            if opts.follows_ddl:
                self.follower.ensure_history(self.store.rounds())
        else:
            self.facts, self.schemas = planned_tables(profile, opts)
            self.follower = SchemaFollower(profile, self.facts, opts, self.store)
        # the name its committed offset is kept under (mysql-cdc status)
        self.name = str(next(iter(self.schemas))) if not self.many else f"tables {opts.tables}"
        self._look_for_tables = self.many  # at the start, and after a DDL statement named a table that matches
        self._target: BinlogOffset | None = None
        self._highest: dict[int, BinlogOffset] = {}
        # the transaction boundaries of the range latestOffset just planned, found by its scan: partitions()
        # cuts the range with them instead of scanning it again (a restart's replay scans)
        self._planned: tuple[str, tuple[str, int], list[BinlogOffset], dict[tuple[str, int], Any]] | None = None
        self._rules_done: dict[int, dict[TableId, Any]] = {}
        self._xa_after: tuple[str, tuple[PendingXa, ...]] | None = None  # XA open at the end latestOffset planned
        self._chunk_reports: ChunkReports | None = None
        self._requests_taken = 0  # snapshot requests below this number are taken (or passed over)
        self._outside_of: dict[TableId, frozenset[int]] = {}  # chunks around a key range read again
        self._outside_recorded: set[TableId] = set()  # tables whose such chunks are recorded (checked once a run)
        # checked and described: from here on the capture runs, and its connections (here and in the executors)
        # wait out a lost server, reading the password again (mysql_cdc.retry)
        self.profile = running(profile, opts)
        self.follower.profile = self.profile

    def _keep_trying(self, what: str, fn: Callable[[], T]) -> T:
        """``fn()`` tried again while the server is lost, for ``reconnect_timeout`` seconds: what Spark asks the
        driver (offsets, partitions) is planned from the server and recorded first-wins, so it is the same again."""
        return keep_trying(fn, self.opts.reconnect_timeout, what)

    # -- the captured tables --
    def _binlog_now(self) -> dict[str, Any]:
        """The binlog's end now (the last file's size), read before tables are described: a DDL statement after
        it may not show in their schemas, and is looked for when their snapshot ends."""
        logs = binary_logs(self.profile)
        if not logs:
            raise StateError("the server lists no binary logs: enable log_bin")
        return {"file": logs[-1][0], "pos": logs[-1][1]}

    def _recorded_tables(self) -> list[TableId]:
        return [t for rnd in self.store.rounds() for t in rnd.tables]

    def _recorded_schema(self, table: TableId) -> TableSchema:
        return self.follower.recorded_schema(table)

    def _round(self, index: int) -> Round:
        rnd = self.store.round(index)
        if rnd is None:
            raise self.store.missing(f"round {index}")
        return rnd

    def _round_tables(self, index: int) -> list[TableId]:
        if not self.many:
            return sorted(self.schemas, key=str)
        return sorted(self._round(index).tables, key=str)

    def _captured(self, rounds: int) -> list[TableId]:
        """The tables captured after rounds ``0 .. rounds-1``: those they added, less those they dropped."""
        if not self.many:
            return sorted(self.schemas, key=str)
        out: set[TableId] = set()
        for i in range(rounds):
            rnd = self._round(i)
            out = (out | set(rnd.tables)) - set(rnd.dropped)
        return sorted(out, key=str)

    def _schemas_of(self, tables: list[TableId]) -> dict[TableId, TableSchema]:
        """Schemas of some captured tables. With many tables, as the state_dir has them now: executors hold a
        copy of this reader made at the query's start, and a round may have added a table since (or a table
        dropped and created again has a new schema)."""
        if not self.many and self.opts.schema_changes != "follow":
            return {t: self.schemas[t] for t in tables}
        return {t: self._recorded_schema(t) for t in tables}

    def _chunks(self, index: int, plan_missing: bool = False) -> list[Chunk]:
        """The chunk plans of a round's tables, table after table (the order its batches read them)."""
        tables = self._round_tables(index)
        recorded = {t: self.store.plan(t) for t in tables}
        missing = [t for t, chunks in recorded.items() if chunks is None]
        if missing and not plan_missing:
            raise StateError(f"the chunk plan of {str(missing[0])!r} is missing under {self.store.location!r}; the "
                             "state_dir must stay with the checkpoint")
        if missing:
            ranged = self._ranges_read_in(index)
            whole = [t for t in missing if t not in ranged]
            for p in split_schemas(self.profile, self.opts, list(self._schemas_of(whole).values()),
                                   slots=self.parallelism) if whole else []:
                recorded[p.schema.table] = self.store.record_plan(p.schema.table, p.chunks, p.rows_per_chunk,
                                                                  p.avg_row_bytes)
            for t in missing:
                if t in ranged:
                    recorded[t] = self._plan_range(index, self._schemas_of([t])[t], ranged[t])
        for t in tables:
            if t not in self._outside_recorded and self._outside_of_plan(t):
                self._record_outside(index, t, recorded[t] or [])
        return [c for t in tables for c in recorded[t] or () if not self._outside(t, c.index)]

    def _outside_of_plan(self, table: TableId) -> frozenset[int]:
        """Indexes of the table's planned chunks around a key range read again (recorded, not read)."""
        if table not in self._outside_of:
            self._outside_of[table] = self.store.outside(table)
        return self._outside_of[table]

    def _outside(self, table: TableId, index: int) -> bool:
        return index in self._outside_of_plan(table)

    def _record_outside(self, index: int, table: TableId, chunks: list[Chunk]) -> None:
        """Record the chunks around a key range read again in round ``index``, with no rows, at the watermark of
        the point the range left the capture (``Round.range_high`` of the round before); first-wins, so done
        again after a crash between the plan's record and theirs."""
        before = self.store.round(index - 1) if index > 0 else None
        if before is None or before.range_of(table) is None:
            return  # a plan of an earlier round's range: its chunks were recorded then
        if before.range_high is None:
            raise StateError(f"round {index - 1} under {self.store.location!r} took a key range of {table} out "
                             "without the point it did so: the state_dir was damaged; take a new snapshot")
        at = BinlogOffset.from_dict(before.range_high)
        for i in self._outside_of_plan(table):
            if self.store.chunk_record(table, i) is None:
                self.store.record_chunk(ChunkRecord.of(chunks[i], at, at, 0))
        self._outside_recorded.add(table)

    def _ranges_read_in(self, index: int) -> dict[TableId, KeyRange]:
        """The key ranges round ``index`` reads again: those the round before took out of the capture."""
        before = self.store.round(index - 1) if index > 0 and self.many else None
        return dict(before.ranges) if before is not None else {}

    def _plan_range(self, index: int, schema: TableSchema, key_range: KeyRange) -> list[Chunk]:
        """The plan of a table of which only ``key_range`` is read again in round ``index``: the chunks around it
        are recorded at once, with no rows, at the watermark of the point the range left the capture (where the
        round resumes the binlog; recorded by the round before, ``Round.range_high``: ``emit.outside_high``)."""
        plan, outside = split_key_range(self.profile, self.opts, schema, key_range, slots=self.parallelism)
        chunks = self.store.record_plan(schema.table, plan.chunks, plan.rows_per_chunk, plan.avg_row_bytes,
                                        outside)
        self._outside_of.pop(schema.table, None)
        self._outside_recorded.discard(schema.table)
        log.warning("mysql_cdc: %s: %s is read again (%d chunk(s)); the rows around it stay as they were when it "
                    "left the capture", schema.table, key_range.text(), len(chunks) - len(outside))
        return chunks

    def _added_in(self) -> dict[TableId, int]:
        """The round that last added each table (a table dropped and created again: its later round)."""
        out: dict[TableId, int] = {}
        for i, rnd in enumerate(self.store.rounds() if self.many else []):
            for t in rnd.dropped:
                out.pop(t, None)
            out.update((t, i) for t in rnd.tables)
        return out

    def _rules(self, tables: list[TableId]) -> dict[TableId, Any]:
        """Emit rules of the tables that were snapshotted: every table a later round added, and the first
        round's when the stream started with the snapshot (startup initial; from a startup offset it did not)."""
        added = self._added_in()
        snapped = [t for t in tables if self.opts.startup == "initial" or added.get(t, 0) > 0]
        return recorded_rules(self.store, self._schemas_of(snapped), lambda: connect(self.profile))

    def _rules_of(self, rounds: int) -> dict[TableId, Any]:
        """The emit rules of the tables of finished rounds ``0 .. rounds-1`` (kept: they do not change)."""
        if rounds not in self._rules_done:
            self._rules_done[rounds] = self._rules(self._captured(rounds))
        return self._rules_done[rounds]

    def _recorded_round(self, index: int, begin: ReadFrom) -> Round | None:
        """Round ``index`` if it is recorded (planned from ``begin`` before a crash, so taken again)."""
        rnd = self.store.round(index)
        if rnd is not None and rnd.resume != begin.to_dict():
            raise StateError(f"round {index} under {self.store.location!r} starts at {rnd.resume!r}, not at "
                             f"{begin.to_dict()!r}: the state_dir belongs to another checkpoint")
        return rnd

    def _new_round(self, index: int, begin: ReadFrom) -> list[TableId] | dict[TableId, str] | None:
        """Tables that match now and are not captured yet, recorded as snapshot round ``index`` resuming the
        binlog at ``begin``; ``None`` when there are none. A dict instead: key ranges the round before took out
        that cannot be read alone now (:meth:`_range_trouble`), nothing recorded: those tables are to be reset
        whole first."""
        if not self._look_for_tables:
            return None
        captured = set(self._captured(index))
        at = self._binlog_now() if self.opts.follows_ddl else None
        _, now = describe_tables(self.profile, self.opts, allow_none=True, snapshot=True)
        # looked: not again until a DDL statement asks (cleared only now, so that a lost server, which makes
        # the planning run again, does not make it skip the look)
        self._look_for_tables = False
        trouble = self._range_trouble(index, begin, at, now)
        if trouble:
            self._look_for_tables = True  # again, after the reset
            return trouble
        new = sorted((s.table for s in now if s.table not in captured), key=str)
        if not new:
            return None
        pin_capture(self.opts)
        for s in now:
            if s.table in new:  # nothing of it was read yet: its schema is today's
                self.schemas[s.table] = self.store.record_schema(s, replace=True)
        log.warning("mysql_cdc: %d table(s) start to be captured at %s: %s; they are snapshotted first (round %d)",
                    len(new), begin.to_dict(), ", ".join(map(str, new)), index)
        rnd = self.store.record_round(index, Round(tuple(new), begin.to_dict(), schema_at=at))
        if at is not None:
            self.follower.ensure_history(self.store.rounds())
        return list(rnd.tables)

    def _range_trouble(self, index: int, begin: ReadFrom, at: dict[str, Any] | None, now: list[TableSchema]
                       ) -> dict[TableId, str]:
        """Key ranges the round before ``index`` took out that cannot be read alone now, with why: the table left
        the source (or the patterns), its key is no longer the range's, or a DDL statement changed it after the
        range left at ``begin`` and before it is described (``at``): the rows around the range, as the mirror
        has them, are of its former shape, and the changes of their keys from ``begin`` on would be decoded with
        the new one. Each is reset whole instead."""
        ranged = self._ranges_read_in(index)
        if not ranged:
            return {}
        described = {s.table: s for s in now}
        out: dict[TableId, str] = {}
        for t, r in ranged.items():
            d = described.get(t)
            if d is None:
                out[t] = "it left the source (or the tables captured) before its key range was read again"
            elif tuple(d.chunk_key) != r.key_columns:
                out[t] = f"its key is no longer the range's ({', '.join(r.key_columns)}): {r.text()} is read whole"
            elif (problem := range_problem(d.columns, d.chunk_key, r)) is not None:
                out[t] = f"{problem}: {r.text()} is read whole"
        rest = [t for t in ranged if t not in out]
        if rest and at is not None:
            phase = BinlogPhase(self.profile, self.facts, self.opts, self._schemas_of(rest), {})
            for ch in phase.statements(begin, BinlogOffset(str(at["file"]), int(at["pos"]))):
                if ch.table in rest and not index_only(ch.statement):
                    out.setdefault(ch.table, f"changed at {ch.file}:{ch.pos} by {ch.statement[:200]!r} before its key "
                                             "range was read again")
        for t, why in out.items():
            log.warning("mysql_cdc: %s is snapshotted again whole, not only %s: %s", t, ranged[t].text(), why)
        return out

    def _range_redo(self, rounds: int, begin: ReadFrom, trouble: dict[TableId, str]) -> dict[str, Any]:
        """The batch that resets whole the tables whose key range cannot be read alone (``trouble``), and takes the
        other ranges of the round before out again (their rows are gone already), as round ``rounds``."""
        before = self.store.round(rounds - 1)
        assert before is not None
        keep = {t: r for t, r in before.ranges if t not in trouble}
        why = {t: trouble.get(t, f"{r.text()} read again (a table beside it is reset whole first)")
               for t, r in before.ranges}
        high = BinlogOffset.from_dict(before.range_high) if keep and before.range_high else None
        return self._reset(rounds, begin, begin.to_dict(), why, ranges=keep, range_high=high)

    def _retire(self, index: int, tables: tuple[TableId, ...]) -> None:
        """Dropped tables' plans and chunk records move aside: no batch reads them again (the batch before the
        DROP is committed when the DROP's batch is planned), and a table created later under the name starts
        afresh."""
        for t in tables:
            self.store.retire(t, f"round-{index}")
        self._rules_done.clear()
        self._highest.clear()
        self._outside_of.clear()
        self._outside_recorded.clear()

    def _watch(self, captured: list[TableId]) -> Any:
        known = set(captured)
        patterns, exclude = self.opts.table_patterns, self.opts.exclude_patterns
        return lambda t: t not in known and table_matches(t, patterns, exclude)

    # -- offsets (driver) --
    def initialOffset(self) -> dict[str, Any]:
        return self._keep_trying("planning the stream's start", self._initial_offset)

    def _initial_offset(self) -> dict[str, Any]:
        if self.opts.reads_snapshot:
            n = len(self._chunks(0, plan_missing=True))
            return SnapshotOffset(0, n, 0 if self.many else None).to_dict()
        start = read_from(self.profile, self.facts, self.opts, None)
        return BinlogStreamOffset(start, 1 if self.many else None).to_dict()

    def _stop_at_the_end_now(self) -> None:
        """The run ends at the binlog's end now (``availableNow``, option ``once``)."""
        self._target = self._keep_trying("reading the binlog's end", lambda: server_end(self.profile, self.facts))

    def _step(self, index: int, k: int, n: int, max_rows: int) -> int:
        """The end of the batch of round ``index``'s chunks from ``k``: at most ``max_chunks_per_batch`` chunks,
        and no more than fit ``max_rows`` rows and ``max_bytes_per_batch`` bytes by their planned sizes (one
        chunk at least)."""
        last = min(n, k + (self.opts.max_chunks_per_batch or n))
        max_bytes = self.opts.max_bytes_per_batch
        if not max_rows and not max_bytes:
            return last
        chunks = self._chunks(index)
        sizes: dict[TableId, tuple[int, int] | None] = {}
        rows = size = 0
        for i in range(k, last):
            t = chunks[i].table
            if t not in sizes:
                sizes[t] = self.store.plan_sizes(t)
            est = sizes[t]
            if est is None:
                continue
            rows, size = rows + est[0], size + est[0] * est[1]
            if i > k and ((max_rows and rows > max_rows) or (max_bytes and size > max_bytes)):
                return i
        return last

    def next_offset(self, start: dict[str, Any], max_rows: int) -> dict[str, Any]:
        """Where the micro-batch that starts at ``start`` ends: the next chunks of the snapshot, or the binlog
        up to its end (or the run's), by ``max_rows`` change rows at most (rounded up to whole transactions)."""
        return self._keep_trying("planning the next micro-batch", lambda: self._next_offset(start, max_rows))

    def _next_offset(self, start: dict[str, Any], max_rows: int) -> dict[str, Any]:
        at = parse_stream_offset(start)
        if isinstance(at, SnapshotOffset):
            if at.chunk < at.chunks:
                return replace(at, chunk=self._step(at.index, at.chunk, at.chunks, max_rows)).to_dict()
            if self.opts.startup == "snapshot" and at.index == 0:
                return start
            rounds = at.index + 1
            rules = self._rules(self._round_tables(at.index))
            begin = at.resume if at.resume is not None else rules_start(rules)
            if self.many and self.opts.follows_ddl:
                rnd = self._recorded_round(rounds, begin)
                if rnd is not None and rnd.dropped:  # decided before a crash: the same batch again
                    self._retire(rounds, rnd.dropped)
                    return self._binlog_offset(rnd.end or {}, begin, rounds + 1)
                changed = self.follower.changed_in_snapshot(
                    self._round(at.index), self._schemas_of(self._round_tables(at.index)), begin)
                if changed:
                    return self._reset(rounds, begin, begin.to_dict(), changed)
            highs = [h for rule in rules.values() for h in rule.highs]
            if self._target is not None and highs:
                # a mirror is consistent only past every chunk's high watermark
                highest = max(highs)
                if highest.position_key() > self._target.position_key():
                    self._target = BinlogOffset(highest.file, highest.pos)
        else:
            begin, rounds = at.read_from, at.done
            rnd = self._recorded_round(rounds, begin) if self.many else None
            if rnd is not None and rnd.dropped:  # a DROP planned before a crash: the same batch again
                self._retire(rounds, rnd.dropped)
                return self._binlog_offset(rnd.end or {}, begin, rounds + 1)
            new = (list(rnd.tables) if rnd is not None else self._new_round(rounds, begin)) if self.many else None
            if isinstance(new, dict):
                return self._range_redo(rounds, begin, new)
            if new:
                n = len(self._chunks(rounds, plan_missing=True))
                return SnapshotOffset(self._step(rounds, 0, n, max_rows), n, rounds, begin).to_dict()
            # snapshots asked for on demand, after the look for tables to capture: the batch after a request's reset
            # records the round that snapshots its tables (state/resnapshot.py reads the two rounds so)
            if rnd is None and self.many and (asked := self._asked_again(rounds)):
                self._xa_after = None  # the reset ends where the batch starts: the XA open there are begin's
                ranges, high = self._ranges_at(rounds, begin, asked[2])
                return self._reset(rounds, begin, begin.to_dict(), asked[1], request=asked[0], ranges=ranges,
                                   range_high=high)
        end = self._target or server_end(self.profile, self.facts)
        if end.position_key() > begin.offset.position_key() or begin.auto_position:
            # the batch ends before a DDL of a captured table (a DDL at its start stops the stream here), just
            # after a DDL that names a table to capture, and after max_rows change rows
            captured = self._captured(rounds)
            rules = self._rules_of(rounds) if self.many else {}  # a table's creation before its snapshot is no stop
            phase = BinlogPhase(self.profile, self.facts, self.opts, self._schemas_of(captured), rules)
            follow = self.opts.schema_changes == "follow"
            end = phase.batch_end(begin, end, max_rows, watch=self._watch(captured) if self.many else None,
                                  drops=self.many, follow=follow, max_bytes=self.opts.max_bytes_per_batch)
            self._planned = (json.dumps(begin.to_dict(), sort_keys=True), (end.file, end.pos), phase.seen,
                             phase.seen_xa)
            self._xa_after = (json.dumps(begin.to_dict(), sort_keys=True), phase.pending_xa)
            self._look_for_tables = self._look_for_tables or phase.new_table_seen
            if phase.dropped:  # the batch is a DDL statement of captured tables alone
                point = {"file": end.file, "pos": end.pos}
                if not follow:  # a DROP TABLE (stop mode stops at other DDL): the tables leave the capture
                    first = phase.dropped[0]
                    note = f"dropped at {first.file}:{first.pos} by {first.statement[:200]!r}"
                    return self._reset(rounds, begin, point, {ch.table: note for ch in phase.dropped}, again=False)
                resets = self.follower.follow(phase.dropped, point, self._rules_of(rounds))
                if resets and self.many:
                    return self._reset(rounds, begin, point, resets)
                self._rules_done.clear()  # built with the former schemas
                if not self.many:
                    self._restart_if_changed(phase.dropped[0], resets)
                return self._binlog_offset(point, begin, rounds)
        if end.position_key() <= begin.offset.position_key() and not begin.auto_position:
            if isinstance(at, SnapshotOffset):  # nothing written since the chunks: still, the snapshot is over
                end = begin.offset
            else:
                return start
        return self._binlog_offset({"file": end.file, "pos": end.pos}, begin, rounds)

    def _asked_again(self, rounds: int) -> tuple[int, dict[TableId, str], dict[TableId, KeyRange]] | None:
        """Snapshots asked for while the capture runs (``mysql-cdc resnapshot``, ``verify --repair``:
        ``requests/`` of the state dir) and not taken by a round yet: the highest request's number and why each
        captured table they name is to be snapshotted again (:mod:`mysql_cdc.state.resnapshot`), and the key
        ranges asked for where only a range of a table is (one range per table: the union of those asked of it,
        :meth:`KeyRange.union`; a table also asked whole is read whole). A request whose tables all left the capture
        since is passed over, with a warning."""
        requests = self.store.requests(self._requests_taken)  # one read of a file that is not there, mostly
        if not requests:
            return None
        taken = max((r.request for r in self.store.rounds() if r.request is not None), default=-1)
        first = max(self._requests_taken, taken + 1)
        requests = requests[first - self._requests_taken:]
        self._requests_taken = first
        captured = set(self._captured(rounds))
        why: dict[TableId, str] = {}
        ranges: dict[TableId, KeyRange | None] = {}
        for n, req in enumerate(requests, first):
            asked = [t for t in req.tables if t in captured]
            passed = known = self.store.request_passed(n)
            if passed is None and not asked:
                passed = f"it names no table captured now ({', '.join(map(str, req.tables))})"
            if passed is None and not self.opts.follows_ddl:
                passed = ("the capture runs with schema_changes stop: a table snapshotted again while it runs needs "
                          "schema_changes follow (the sync's default)")
            if passed is not None:  # recorded: after a restart it stays passed over
                if known is None:
                    log.warning("mysql_cdc: snapshot request %d passed over: %s", n, self.store.pass_request(n, passed))
                if not why:
                    self._requests_taken = n + 1
                continue
            for t in asked:
                part = f" ({req.range.text()})" if req.range is not None else ""
                why.setdefault(t, f"snapshotted again{part} on request {n}{f' ({req.why})' if req.why else ''}")
                if t not in ranges:
                    ranges[t] = req.range
                    continue
                was = ranges[t]
                if was is None or req.range is None or was.key_columns != req.range.key_columns:
                    ranges[t] = None  # asked whole, or over other columns (a rename between): read whole
                else:
                    try:
                        ranges[t] = was.union(req.range)
                    except ConfigError as e:  # values of other kinds (the key's type changed between), more
                        # than 64 keys of a string key, or a range of one beside other keys: read whole
                        log.warning("mysql_cdc: %s is snapshotted again whole, not only the keys of requests up to "
                                    "%d: %s", t, n, e)
                        ranges[t] = None
        if not why:
            return None
        return first + len(requests) - 1, why, {t: r for t, r in ranges.items() if r is not None}

    def _ranges_at(self, rounds: int, begin: ReadFrom, asked: dict[TableId, KeyRange]
                   ) -> tuple[dict[TableId, KeyRange], BinlogOffset | None]:
        """The key ranges asked for that can be read alone at ``begin`` (:func:`.emit.outside_high`: the stream
        is past every watermark of the table; the range is over the table's chunk key), and the watermark the
        chunks around them get (with MySQL's GTID watermarks, the executed set at ``begin``:
        :func:`.phase.executed_at`); the others' tables are read again whole, said in a warning."""
        if not asked:
            return {}, None
        rules = self._rules_of(rounds)
        gtids = any(h.kind == "gtid" for t in asked if t in rules for h in rules[t].highs)
        at = executed_at(self.profile, self.facts, self.opts, begin) if gtids else BinlogOffset(
            begin.offset.file, begin.offset.pos)
        out: dict[TableId, KeyRange] = {}
        high: BinlogOffset | None = None
        for t, r in asked.items():
            schema = self._schemas_of([t]).get(t)
            rule = rules.get(t)
            why = outside_high(rule.highs, at) if rule is not None else "its chunks are not recorded"
            if schema is None or tuple(schema.chunk_key) != r.key_columns:
                why = f"its chunk key is not {', '.join(r.key_columns)} now"
            elif (problem := range_problem(schema.columns, schema.chunk_key, r)) is not None:
                why = problem
            if isinstance(why, str):
                log.warning("mysql_cdc: %s is snapshotted again whole, not only %s: %s", t, r.text(), why)
                continue
            assert schema is not None
            # the columns whose literals say UTC as the table is now (a DATETIME made TIMESTAMP since the request)
            r = replace(r, utc=tuple(c for c in r.key_columns if schema.column(c).data_type == "timestamp"))
            if any(schema.column(c).is_text for c in r.key_columns) and (r.keys or r.texts):
                # every spelling of the listed string keys, or every key of the range, that the mirror may hold at
                # begin (udtf/binlog/spellings.py): what its -R row deletes
                try:
                    if begin.auto_position:
                        raise ConfigError("the batch starts at a GTID set, not a binlog position")
                    if r.keys:
                        more = spellings(self.profile, self.opts, self.facts, schema, r.keys, begin.offset)
                        r = KeyRange.of_keys(r.key_columns, [*r.keys, *more], r.utc) if more else r
                    else:
                        held = held_in_range(self.profile, self.opts, self.facts, schema, r.start, r.end,
                                             begin.offset)
                        r = replace(r, held=tuple(held))
                        listed(r.key_columns, held, str)  # its groups counted: too many is an error here
                        # the keys' numbers as a list's: within their lake columns' values (BIGINT UNSIGNED below
                        # 2^53, where delta-rs's file statistics end)
                        if (problem := range_problem(schema.columns, schema.chunk_key, r)) is not None:
                            raise ConfigError(problem)
                except Exception as e:
                    # more than MAX_SPANS keys with their spellings, too many spellings or keys in a range, a range
                    # empty under the collation, a table or column gone or changed since, a binlog value of
                    # another charset: the table read whole is always right; a lost connection is tried again
                    if is_transient(e):
                        raise
                    log.warning("mysql_cdc: %s is snapshotted again whole, not only %s: its keys in the "
                                "source: %s", t, r.text(), e)
                    continue
            out[t], high = r, why
        return out, high

    # -- schema changes followed (option schema_changes follow) --
    def _reset(self, rounds: int, begin: ReadFrom, at: dict[str, Any], why: dict[TableId, str],
               again: bool = True, request: int | None = None,
               ranges: dict[TableId, KeyRange] | None = None, range_high: BinlogOffset | None = None
               ) -> dict[str, Any]:
        """The batch that takes tables out of the capture at ``at`` (recorded as round ``rounds``): dropped, or
        (``again``) to be snapshotted again from there, when the next batch looks for tables to capture (a table
        that still matches is captured afresh: its rows come again as snapshot rows). The batch's rows say so
        (``T`` rows, :class:`ResetPartition`); of a table in ``ranges`` only that key range leaves (``-R``
        row), and the next round reads only it again."""
        gone = sorted(why, key=str)
        note = "; ".join(f"{t}: {why[t]}" for t in gone)
        for line in leaving_lines(why, at, again):
            log.warning("%s", line)
        if again:  # before the round: a crash between the two leaves a history entry the round replays over
            if self.opts.follows_ddl:
                for t in gone:
                    self.follower.record(t, at, RESET, why=why[t])
            self._look_for_tables = True
        rnd = self.store.record_round(rounds, Round((), begin.to_dict(), tuple(gone), note[:4000], at,
                                                    request=request,
                                                    ranges=tuple(sorted((ranges or {}).items(), key=lambda i: str(
                                                        i[0]))),
                                                    range_high=range_high.to_dict() if ranges and range_high
                                                    else None))
        if rnd.request is not None:
            self._requests_taken = max(self._requests_taken, rnd.request + 1)
        self._retire(rounds, rnd.dropped)
        return self._binlog_offset(rnd.end or {}, begin, rounds + 1)

    def _restart_if_changed(self, ch: SchemaChange, resets: dict[TableId, str]) -> None:
        """A single table's stream (option table) after a DDL statement it followed: it goes on when its output
        columns stay as they are; it stops when they change (a Spark stream keeps its schema), and a restart
        continues from the checkpoint with the new columns, recorded here (no new snapshot); it stops for good
        when the table must be snapshotted again."""
        t = next(iter(self.schemas))
        if resets:
            raise SchemaChangedError(
                f"table {str(t)!r} changed at {ch.file}:{ch.pos} ({ch.statement[:200]!r}) so that it must be "
                f"snapshotted again ({resets[t]}); a read of one table cannot do that while it runs: the stream "
                "stops here, changes before this position were delivered. Take a new snapshot (new state_dir and "
                "checkpoint), or capture the table with option tables, which snapshots it again by itself")
        new = self._recorded_schema(t)
        if output_schema(new, self.opts) != output_schema(self.schemas[t], self.opts):
            raise SchemaChangedError(
                f"table {str(t)!r} changed at {ch.file}:{ch.pos} ({ch.statement[:200]!r}): its columns are now "
                f"{list(new.column_names)!r} (were {list(self.schemas[t].column_names)!r}), and a running Spark "
                "stream cannot change its columns: restart the query. It continues from its checkpoint with the "
                "new columns, with no new snapshot and no change lost or doubled")
        self.schemas[t] = new

    def _binlog_offset(self, at: dict[str, Any], begin: ReadFrom, rounds: int) -> dict[str, Any]:
        """The offset of a batch that ends at ``at`` (a GTID set in it: a reset at a GTID start, where the next
        batch starts too), with the XA transactions still open there (the scan of the batch from ``begin``
        found them; ``begin``'s when it made none)."""
        gtids = at.get("gtids")
        scanned = self._xa_after
        xa = scanned[1] if scanned is not None and scanned[0] == json.dumps(begin.to_dict(), sort_keys=True) \
            else begin.xa
        end = ReadFrom(BinlogOffset(str(at["file"]), int(at["pos"]), gtids, "gtid" if gtids is not None else
                                    "position"), gtids is not None, begin.skip_before, tuple(xa))
        return BinlogStreamOffset(end, rounds if self.many else None).to_dict()

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> list[InputPartition]:
        return self._keep_trying("planning a micro-batch's reads", lambda: self._partitions(start, end))

    def _partitions(self, start: dict[str, Any], end: dict[str, Any]) -> list[InputPartition]:
        first, last = parse_stream_offset(start), parse_stream_offset(end)
        if isinstance(last, SnapshotOffset):
            same = isinstance(first, SnapshotOffset) and first.index == last.index
            todo = self._chunks(last.index)[first.chunk if isinstance(first, SnapshotOffset) and same else 0:last.chunk]
            # what the reads need travels with them, and their records come back here (the state dir may be
            # on this machine's disk alone)
            schemas = self._schemas_of(sorted({c.table for c in todo}, key=str))
            check_recorded(self.opts, todo)  # a chunk of another plan: refused before any row is read
            return list(spread_chunks(todo, self.opts.partitions, self.parallelism, schemas=tuple(schemas.values()),
                                      report_to=self._reports().to))
        if start == end:
            return []
        done = first.index + 1 if isinstance(first, SnapshotOffset) else first.done
        if self.many and (last.rounds if last.rounds is not None else done) > done:
            # a DDL statement alone that took tables out of the capture: their T rows, no read (and their chunk
            # records are moved aside)
            rnd = self.store.round(done)
            if rnd is None or not rnd.dropped:
                return []
            return [ResetPartition(tuple((t.database, t.table) for t in rnd.dropped), dict(rnd.end or {}),
                                   tuple((t.database, t.table, r.to_dict()) for t, r in rnd.ranges))]
        if isinstance(first, SnapshotOffset):
            rounds = first.index + 1
            begin = first.resume if first.resume is not None else rules_start(self._rules(self._round_tables(
                first.index)))
            initial = (self.opts.startup == "initial" or first.index > 0) and self._needs_rules(begin, rounds)
        else:
            begin, rounds = first.read_from, first.done
            initial = (self.opts.startup == "initial" or rounds > 1) and self._needs_rules(begin, rounds)
        captured = self._captured(rounds)
        tables = tuple((t.database, t.table) for t in captured)
        stop = last.read_from.offset
        cuts: list[BinlogOffset] = []
        xa_at: dict[tuple[str, int], Any] = {}
        schemas = self._schemas_of(captured)
        parts, min_bytes = catchup_parts(self.opts.binlog_partitions, self.parallelism)
        if parts > 1:  # parallel catch-up: the range cut at transaction boundaries
            phase = BinlogPhase(self.profile, self.facts, self.opts, schemas, {})
            planned = self._planned
            same = planned is not None and planned[:2] == (json.dumps(begin.to_dict(), sort_keys=True),
                                                           (stop.file, stop.pos))
            cuts = phase.cut_points(begin, stop, parts, min_bytes, planned[2] if planned and same else None)
            xa_at = planned[3] if planned and same else phase.seen_xa  # the scan's: the planned one, or cut_points
        # every part is given the XA transactions open where it starts (found by the scan that planned the batch):
        # one of them committed in the part is read where it was prepared, not searched for
        starts = BinlogPhase.part_starts(begin, cuts, xa_at)
        ends = [BinlogOffset(c.file, c.pos) for c in cuts] + [BinlogOffset(stop.file, stop.pos)]
        rules = tuple(self._rules_of(rounds).items()) if initial else ()
        return [BinlogPartition(a, b, initial, tables, self.opts.schema_changes == "follow",
                                tuple(schemas.values()), rules)
                for a, b in zip(starts, ends)]

    def _needs_rules(self, begin: ReadFrom, rounds: int) -> bool:
        """Whether a read from ``begin`` can meet events some chunk already holds. Past the largest high
        watermark's position no chunk holds an event (a GTID in an executed set was written before the
        position read with it), so the executors need not load the chunk records again."""
        if rounds not in self._highest:
            highs = [h for rule in self._rules_of(rounds).values() for h in rule.highs]
            if not highs:
                return False
            self._highest[rounds] = max(highs)
        return begin.auto_position or begin.offset.position_key() < self._highest[rounds].position_key()

    def commit(self, end: dict[str, Any]) -> None:
        self.store.record_offset(self.name, end)

    def _reports(self) -> ChunkReports:
        """Where this driver takes the records of the chunks its executors read (started when first needed, for
        the life of the process that plans the stream)."""
        if self._chunk_reports is None:
            self._chunk_reports = ChunkReports(self.store, self.opts.driver_host)
        return self._chunk_reports

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_chunk_reports": None}  # the driver's server stays with the driver

    # -- data (executors) --
    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return_freed_memory()  # a row of large values is not held by the worker after it went (mysql_cdc.memory)
        if isinstance(partition, ResetPartition):
            yield reset_batch([TableId(db, t) for db, t in partition.tables], partition.at,
                              {TableId(db, t): KeyRange.from_dict(r) for db, t, r in partition.ranges})
            return
        # nothing here reads the state dir: the partition carries what the read needs (docs/DESIGN.md §12)
        if isinstance(partition, ChunkPartition):
            schemas = {s.table: s for s in partition.schemas}
            readers = Readers(self.profile, schemas, self.facts, self.opts)

            def changed(chunk: Chunk, error: BaseException) -> ChunkRead:
                return self._changed_chunk(chunk, error, schemas[chunk.table])

            failed = changed if self.opts.schema_changes == "follow" else None
            yield from read_chunks(readers, partition.chunks, self.opts, Output(schemas, self.opts), failed,
                                   partition.report_to)
            return
        assert isinstance(partition, BinlogPartition)
        schemas = {s.table: s for s in partition.schemas}
        tables = sorted(schemas, key=str)
        rules = dict(partition.rules)
        phase = BinlogPhase(self.profile, self.facts, self.opts, schemas, {t: rules.get(t) for t in tables},
                            followed=partition.followed)
        yield from Output(schemas, self.opts).change_batches(phase.runs(partition.start, partition.end, columns=True),
                                                             self.opts.fetch_size)

    def _changed_chunk(self, chunk: Chunk, error: BaseException, recorded: TableSchema) -> ChunkRead:
        """A chunk whose read failed because a DDL statement changed its table while the snapshot was read (a
        column or the table is gone): recorded with no rows at the binlog's end now, since the statement makes
        the stream snapshot the table again (it lies after the table's recorded schema: see
        :meth:`_changed_in_snapshot` and :meth:`_follow`). A single table's stream stops there with
        :class:`SchemaChangedError` instead. Any other failure is raised. ``recorded``: the table's schema as
        the capture recorded it (the partition's)."""
        now = describe_now(self.profile, self.opts, chunk.table)
        if now is not None and now[0] == recorded:
            raise error
        if not self.many:  # a single table's stream cannot snapshot it again
            raise SchemaChangedError(
                f"table {str(chunk.table)!r} changed while its snapshot was read (chunk {chunk.id!r}: {error}); a "
                "stream of one table cannot snapshot it again: take a new snapshot (new state_dir and checkpoint), "
                "or capture the table with option tables, which does") from error
        log.warning("mysql_cdc: chunk %s could not be read (%s): its table changed while its snapshot was read, "
                    "and is snapshotted again", chunk.id, error)
        end = SnapshotReader(self.profile, recorded, self.facts, self.opts).binlog_end_now()
        return ChunkRead(chunk, end, end, iter(()))


if admission_control():  # pyspark 4.2+: Spark hands the source its start and a read limit
    from pyspark.sql.streaming.datasource import (
        ReadAllAvailable,
        ReadLimit,
        ReadMaxRows,
        SupportsTriggerAvailableNow,
    )

    class LimitedStreamReader(MysqlCdcStreamReader, SupportsTriggerAvailableNow):
        """The stream where Spark gives each batch's start and a limit (``max_rows_per_batch``)."""

        def prepareForTriggerAvailableNow(self) -> None:
            self._stop_at_the_end_now()

        def getDefaultReadLimit(self) -> ReadLimit:
            if self.opts.max_rows_per_batch:
                return ReadMaxRows(self.opts.max_rows_per_batch)
            return ReadAllAvailable()

        def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, Any]:
            if self.opts.once and self._target is None:
                self._stop_at_the_end_now()
            return self.next_offset(start, limit.max_rows if isinstance(limit, ReadMaxRows) else 0)


class TrackedStreamReader(MysqlCdcStreamReader):
    """The stream where Spark gives no start to ``latestOffset()`` (pyspark 4.0, 4.1): the source keeps where
    the next batch starts. Spark runs a batch from its last end to what ``latestOffset()`` returns, and tells a
    restarted source the latest offset of its checkpoint with ``partitions(latest, latest)``, so the start is
    the last offset returned, planned or told. Batches are bounded by ``max_rows_per_batch`` as with a limit."""

    def __init__(self, profile: ConnectionProfile, opts: CdcOptions, parallelism: int = 1) -> None:
        super().__init__(profile, opts, parallelism)
        self._start: dict[str, Any] | None = None

    def initialOffset(self) -> dict[str, Any]:
        offset = super().initialOffset()
        if self._start is None:
            self._start = offset
        return offset

    def latestOffset(self) -> dict[str, Any]:  # type: ignore[override]  # pyspark 4.0 and 4.1 call it so
        if self._start is None:  # a new query: Spark asks for its initial offset first; else told by now
            self._start = super().initialOffset()
        if self.opts.once and self._target is None:
            self._stop_at_the_end_now()
        self._start = self.next_offset(self._start, self.opts.max_rows_per_batch)
        return self._start

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> list[InputPartition]:
        self._start = end
        return super().partitions(start, end)


def stream_reader(profile: ConnectionProfile, opts: CdcOptions, parallelism: int = 1) -> MysqlCdcStreamReader:
    """The stream reader of this pyspark (:mod:`.compat`)."""
    if admission_control():
        return LimitedStreamReader(profile, opts, parallelism)
    return TrackedStreamReader(profile, opts, parallelism)
