"""``spark.readStream.format("mysql_cdc")``: snapshot chunks first (a few per micro-batch), then the binlog
forever, with small offsets (the chunk plan and the chunks' watermarks live in ``state_dir``)."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadLimit, ReadMaxRows, SupportsTriggerAvailableNow

from mysql_cdc.chunks import Chunk, TableId
from mysql_cdc.connect import connect
from mysql_cdc.errors import ConfigError, StateError
from mysql_cdc.offsets import BinlogOffset
from mysql_cdc.options import CdcOptions, ConnectionProfile
from mysql_cdc.planner.discover import table_matches
from mysql_cdc.planner.plan import describe_tables, split_schemas
from mysql_cdc.schema import TableSchema
from mysql_cdc.state.store import StateStore
from mysql_cdc.udtf.adapter import (
    ChunkPartition,
    Output,
    Readers,
    changes_need_metadata,
    pin_capture,
    pinned_schema,
    planned_tables,
    read_chunks,
    spread_chunks,
)
from mysql_cdc.udtf.binlog import (
    BinlogPhase,
    ReadFrom,
    read_from,
    recorded_rules,
    rules_start,
    server_end,
)

log = logging.getLogger("mysql_cdc")


@dataclass(frozen=True)
class BinlogPartition(InputPartition):
    """One Spark partition reading the binlog of ``tables`` (``[db, table]`` pairs) from ``start`` up to
    ``end``; ``initial``: some chunk may hold a change of the range (the emit rule applies), else every change
    of the tables is emitted."""

    start: dict[str, Any]
    end: dict[str, Any]
    initial: bool
    tables: tuple[tuple[str, str], ...] = ()


def _phase_of(offset: dict[str, Any]) -> str:
    phase = offset.get("phase")
    if phase not in ("snapshot", "binlog") or offset.get("v") != 1:
        raise StateError(f"offset {offset!r} was not written by this version of mysql_cdc; start the query "
                         "with a new checkpoint")
    return str(phase)


class MysqlCdcStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Snapshot chunks first (a few per micro-batch), then the binlog forever. Offsets are small: the chunk
    plan and the chunks' watermarks live in ``state_dir``; an offset holds a chunk count or a binlog point.

    With option ``tables`` the capture grows: a table that starts to match (created or renamed into the
    patterns while the stream runs, or found at a restart, e.g. after the patterns were widened) is
    snapshotted in a new *round* while the binlog waits at a point ``resume``, and the binlog then continues
    from ``resume`` with the new table's chunks in the emit rule (as the first snapshot's chunks are), so no
    change of it is lost or doubled. Rounds are recorded in ``state_dir`` (``rounds/<n>.json``); a binlog
    offset says how many rounds are done, so a re-run batch reads the same tables.

    Offsets: ``{"phase": "snapshot", "chunk": k, "chunks": n[, "round": r, "resume": {...}]}`` and
    ``{"phase": "binlog", "file": f, "pos": p[, "gtids": ...][, "rounds": r]}``."""

    def __init__(self, profile: ConnectionProfile, opts: CdcOptions, parallelism: int = 1) -> None:
        if not opts.state_dir:
            raise ConfigError("a mysql_cdc stream needs .option('state_dir', <path or URI>): the chunk plan and the "
                              "chunks' watermarks are kept there (offsets stay small)")
        changes_need_metadata(opts, "a mysql_cdc stream")
        self.profile = profile
        self.opts = opts
        self.parallelism = parallelism
        self.many = opts.tables is not None
        self.store = StateStore(opts.state_dir)
        if self.many:
            # the first run's tables are round 0; every captured table keeps the schema recorded for it, and
            # tables that match now but are not captured yet are left to a later round (_new_round)
            # a restart finds the capture's tables in its rounds, even if none matches now (all dropped)
            self.facts, now = describe_tables(profile, opts, allow_none=self.store.round(0) is not None)
            self.store.record_round(0, sorted((s.table for s in now), key=str), None)
            current = {s.table: s for s in now}
            self.schemas = {t: pinned_schema(opts, current[t]) if t in current else self._recorded_schema(t)
                            for t in self._recorded_tables()}
        else:
            self.facts, self.schemas = planned_tables(profile, opts)
        # the name its committed offset is kept under (mysql-cdc status)
        self.name = str(next(iter(self.schemas))) if not self.many else f"tables {opts.tables}"
        self._look_for_tables = self.many  # at the start, and after a DDL statement named a table that matches
        self._target: BinlogOffset | None = None
        self._highest: dict[int, BinlogOffset] = {}
        self._rules_done: dict[int, dict[TableId, Any]] = {}

    # -- the captured tables --
    def _recorded_tables(self) -> list[TableId]:
        out: list[TableId] = []
        i = 0
        while (rec := self.store.round(i)) is not None:
            out += rec["tables"]
            i += 1
        return out

    def _recorded_schema(self, table: TableId) -> TableSchema:
        schema = self.store.schema(table)
        if schema is None:
            raise StateError(f"the schema of {str(table)!r} is missing under {self.store.location!r}; the state_dir "
                             "must stay with the checkpoint")
        return schema

    def _round_tables(self, index: int) -> list[TableId]:
        if not self.many:
            return sorted(self.schemas, key=str)
        rec = self.store.round(index)
        if rec is None:
            raise StateError(f"snapshot round {index} is missing under {self.store.location!r}; the state_dir must "
                             "stay with the checkpoint")
        return sorted(rec["tables"], key=str)

    def _captured(self, rounds: int) -> list[TableId]:
        """The tables captured after rounds ``0 .. rounds-1``: those they added, less those they dropped."""
        if not self.many:
            return sorted(self.schemas, key=str)
        out: set[TableId] = set()
        for i in range(rounds):
            rec = self.store.round(i)
            if rec is None:
                raise StateError(f"round {i} is missing under {self.store.location!r}; the state_dir must stay "
                                 "with the checkpoint")
            out = (out | set(rec["tables"])) - set(rec["dropped"])
        return sorted(out, key=str)

    def _schemas_of(self, tables: list[TableId]) -> dict[TableId, TableSchema]:
        """Schemas of some captured tables. With many tables, as the state_dir has them now: executors hold a
        copy of this reader made at the query's start, and a round may have added a table since (or a table
        dropped and created again has a new schema)."""
        if not self.many:
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
            for p in split_schemas(self.profile, self.opts, list(self._schemas_of(missing).values())):
                recorded[p.schema.table] = self.store.record_plan(p.schema.table, p.chunks)
        return [c for t in tables for c in recorded[t] or ()]

    def _added_in(self) -> dict[TableId, int]:
        """The round that last added each table (a table dropped and created again: its later round)."""
        out: dict[TableId, int] = {}
        i = 0
        while self.many and (rec := self.store.round(i)) is not None:
            for t in rec["dropped"]:
                out.pop(t, None)
            out.update((t, i) for t in rec["tables"])
            i += 1
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

    def _recorded_round(self, index: int, begin: ReadFrom) -> dict[str, Any] | None:
        """Round ``index`` if it is recorded (planned from ``begin`` before a crash, so taken again)."""
        rec = self.store.round(index)
        if rec is not None and rec["resume"] != begin.to_dict():
            raise StateError(f"round {index} under {self.store.location!r} starts at {rec['resume']!r}, not at "
                             f"{begin.to_dict()!r}: the state_dir belongs to another checkpoint")
        return rec

    def _new_round(self, index: int, begin: ReadFrom) -> list[TableId] | None:
        """Tables that match now and are not captured yet, recorded as snapshot round ``index`` resuming the
        binlog at ``begin``; ``None`` when there are none."""
        if not self._look_for_tables:
            return None
        self._look_for_tables = False
        captured = set(self._captured(index))
        _, now = describe_tables(self.profile, self.opts, allow_none=True, snapshot=True)
        new = sorted((s.table for s in now if s.table not in captured), key=str)
        if not new:
            return None
        pin_capture(self.opts)
        for s in now:
            if s.table in new:  # nothing of it was read yet: its schema is today's
                self.schemas[s.table] = self.store.record_schema(s, replace=True)
        log.warning("mysql_cdc: %d table(s) start to be captured at %s: %s; they are snapshotted first (round %d)",
                    len(new), begin.to_dict(), ", ".join(map(str, new)), index)
        return list(self.store.record_round(index, new, begin.to_dict())["tables"])

    def _retire(self, index: int, tables: list[TableId]) -> None:
        """Dropped tables' plans and chunk records move aside: no batch reads them again (the batch before the
        DROP is committed when the DROP's batch is planned), and a table created later under the name starts
        afresh."""
        for t in tables:
            self.store.retire(t, f"round-{index}")
        self._rules_done.clear()
        self._highest.clear()

    def _watch(self, captured: list[TableId]) -> Any:
        known = set(captured)
        patterns, exclude = self.opts.table_patterns, self.opts.exclude_patterns
        return lambda t: t not in known and table_matches(t, patterns, exclude)

    # -- offsets (driver) --
    def initialOffset(self) -> dict[str, Any]:
        extra = {"round": 0} if self.many else {}
        if self.opts.reads_snapshot:
            return {"v": 1, "phase": "snapshot", "chunk": 0, "chunks": len(self._chunks(0, plan_missing=True)),
                    **extra}
        start = read_from(self.profile, self.facts, self.opts, None)
        return {"v": 1, "phase": "binlog", **start.to_dict(), **({"rounds": 1} if self.many else {})}

    def prepareForTriggerAvailableNow(self) -> None:
        self._target = server_end(self.profile, self.facts)

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.opts.max_rows_per_batch:
            return ReadMaxRows(self.opts.max_rows_per_batch)
        return ReadAllAvailable()

    def _step(self, k: int, n: int) -> int:
        return min(n, k + (self.opts.max_chunks_per_batch or n))

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, Any]:
        if _phase_of(start) == "snapshot":
            k, n = int(start["chunk"]), int(start["chunks"])
            if k < n:
                return {**start, "chunk": self._step(k, n)}
            index = int(start.get("round", 0))
            if self.opts.startup == "snapshot" and index == 0:
                return start
            rounds = index + 1
            rules = self._rules(self._round_tables(index))
            begin = ReadFrom.from_dict(start["resume"]) if start.get("resume") else rules_start(rules)
            highs = [h for rule in rules.values() for h in rule.highs]
            if self._target is not None and highs:
                # a mirror is consistent only past every chunk's high watermark
                highest = max(highs)
                if highest.position_key() > self._target.position_key():
                    self._target = BinlogOffset(highest.file, highest.pos)
        else:
            begin = ReadFrom.from_dict(start)
            rounds = int(start.get("rounds", 1))
            rec = self._recorded_round(rounds, begin) if self.many else None
            if rec is not None and rec["dropped"]:  # a DROP planned before a crash: the same batch again
                self._retire(rounds, rec["dropped"])
                return self._binlog_offset(rec["end"], begin, rounds + 1)
            new = (rec["tables"] if rec is not None else self._new_round(rounds, begin)) if self.many else None
            if new:
                n = len(self._chunks(rounds, plan_missing=True))
                return {"v": 1, "phase": "snapshot", "chunk": self._step(0, n), "chunks": n, "round": rounds,
                        "resume": begin.to_dict()}
        end = self._target or server_end(self.profile, self.facts)
        if end.position_key() > begin.offset.position_key() or begin.auto_position:
            # the batch ends before a DDL of a captured table (a DDL at its start stops the stream here), just
            # after a DDL that names a table to capture, and after max_rows change rows
            captured = self._captured(rounds)
            rules = self._rules_of(rounds) if self.many else {}  # a table's creation before its snapshot is no stop
            phase = BinlogPhase(self.profile, self.facts, self.opts, self._schemas_of(captured), rules)
            max_rows = limit.max_rows if isinstance(limit, ReadMaxRows) else 0
            end = phase.batch_end(begin, end, max_rows, watch=self._watch(captured) if self.many else None,
                                  drops=self.many)
            self._look_for_tables = self._look_for_tables or phase.new_table_seen
            if phase.dropped:  # the batch is a DROP TABLE of captured tables: they leave the capture after it
                gone = sorted({ch.table for ch in phase.dropped}, key=str)
                first = phase.dropped[0]
                note = f"dropped at {first.file}:{first.pos} by {first.statement[:200]!r}"
                log.warning("mysql_cdc: %s leave(s) the capture: %s", ", ".join(map(str, gone)), note)
                self.store.record_round(rounds, [], begin.to_dict(), dropped=gone, note=note,
                                        end={"file": end.file, "pos": end.pos})
                rec = self.store.round(rounds)
                assert rec is not None
                self._retire(rounds, rec["dropped"])
                return self._binlog_offset(rec["end"], begin, rounds + 1)
        if end.position_key() <= begin.offset.position_key() and not begin.auto_position:
            if _phase_of(start) == "snapshot":  # nothing written since the chunks: still, the snapshot is over
                end = begin.offset
            else:
                return start
        return self._binlog_offset({"file": end.file, "pos": end.pos}, begin, rounds)

    def _binlog_offset(self, at: dict[str, Any], begin: ReadFrom, rounds: int) -> dict[str, Any]:
        out: dict[str, Any] = {"v": 1, "phase": "binlog", "file": at["file"], "pos": int(at["pos"])}
        if begin.skip_before is not None:
            out["skip_before"] = begin.skip_before
        if self.many:
            out["rounds"] = rounds
        return out

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> list[InputPartition]:
        if _phase_of(end) == "snapshot":
            index = int(end.get("round", 0))
            same = _phase_of(start) == "snapshot" and int(start.get("round", 0)) == index
            todo = self._chunks(index)[int(start["chunk"]) if same else 0:int(end["chunk"])]
            return list(spread_chunks(todo, self.opts.partitions, self.parallelism))
        if start == end:
            return []
        done = int(start.get("round", 0)) + 1 if _phase_of(start) == "snapshot" else int(start.get("rounds", 1))
        if self.many and int(end.get("rounds", done)) > done:
            return []  # a DROP TABLE alone: no row to read (and the dropped tables' records are moved aside)
        if _phase_of(start) == "snapshot":
            index = int(start.get("round", 0))
            rounds = index + 1
            begin = (ReadFrom.from_dict(start["resume"]) if start.get("resume")
                     else rules_start(self._rules(self._round_tables(index))))
            initial = (self.opts.startup == "initial" or index > 0) and self._needs_rules(begin, rounds)
        else:
            begin = ReadFrom.from_dict(start)
            rounds = int(start.get("rounds", 1))
            initial = (self.opts.startup == "initial" or rounds > 1) and self._needs_rules(begin, rounds)
        tables = tuple((t.database, t.table) for t in self._captured(rounds))
        return [BinlogPartition(begin.to_dict(), {"file": end["file"], "pos": int(end["pos"])}, initial, tables)]

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

    # -- data (executors) --
    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        if isinstance(partition, ChunkPartition):
            schemas = self._schemas_of(sorted({c.table for c in partition.chunks}, key=str))
            readers = Readers(self.profile, schemas, self.facts, self.opts)
            yield from read_chunks(readers, partition.chunks, self.opts, Output(schemas, self.opts))
            return
        assert isinstance(partition, BinlogPartition)
        tables = [TableId(db, t) for db, t in partition.tables]
        if not self.many and not tables:
            tables = sorted(self.schemas, key=str)
        schemas = self._schemas_of(tables)
        rules = self._rules(tables) if partition.initial else {}
        phase = BinlogPhase(self.profile, self.facts, self.opts, schemas, {t: rules.get(t) for t in tables})
        end = BinlogOffset(str(partition.end["file"]), int(partition.end["pos"]))
        yield from Output(schemas, self.opts).change_batches(phase.changes(ReadFrom.from_dict(partition.start), end),
                                                             self.opts.fetch_size)
