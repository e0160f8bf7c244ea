"""``spark.readStream.format("mysql_cdc")``: snapshot chunks first (a few per micro-batch), then the binlog
forever, with small offsets (the chunk plan and the chunks' watermarks live in ``state_dir``)."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadLimit, ReadMaxRows, SupportsTriggerAvailableNow

from mysql_cdc.chunks import Chunk
from mysql_cdc.connect import connect
from mysql_cdc.ddl import clause_names, index_only, plainly_kept, renamed_columns, replacing_statement
from mysql_cdc.errors import ConfigError, SchemaChangedError, StateError
from mysql_cdc.ids import TableId
from mysql_cdc.offsets import BinlogOffset
from mysql_cdc.options import CdcOptions, ConnectionProfile
from mysql_cdc.planner.discover import table_matches
from mysql_cdc.planner.plan import check_server_id_claims, describe_now, describe_tables, split_schemas
from mysql_cdc.schema import TableSchema
from mysql_cdc.state.store import StateStore, history_key, pin_capture
from mysql_cdc.udtf.binlog.phase import BinlogPhase
from mysql_cdc.udtf.binlog.rules import recorded_rules
from mysql_cdc.udtf.binlog.startup import ReadFrom, binary_logs, read_from, rules_start, server_end
from mysql_cdc.udtf.binlog.transactions import SchemaChange
from mysql_cdc.udtf.schema.evolve import EVOLVE, RESET, SAME, apply_plain, judge
from mysql_cdc.udtf.snapshot.reader import ChunkRead, SnapshotReader
from mysql_cdc.udtf.spark.capture import pinned_schema, planned_tables
from mysql_cdc.udtf.spark.chunk_reads import ChunkPartition, Readers, read_chunks, spread_chunks
from mysql_cdc.udtf.spark.output import Output, changes_need_metadata, output_schema, reset_batch

log = logging.getLogger("mysql_cdc")


SPLIT_MIN_BYTES = 1 << 20  # parallel catch-up: no part of a micro-batch's binlog range is shorter


@dataclass(frozen=True)
class BinlogPartition(InputPartition):
    """One Spark partition reading the binlog of ``tables`` (``[db, table]`` pairs) from ``start`` up to
    ``end``; ``initial``: some chunk may hold a change of the range (the emit rule applies), else every change
    of the tables is emitted."""

    start: dict[str, Any]
    end: dict[str, Any]
    initial: bool
    tables: tuple[tuple[str, str], ...] = ()
    followed: bool = False  # the driver followed every DDL of the range (option schema_changes follow)


@dataclass(frozen=True)
class ResetPartition(InputPartition):
    """The rows saying that tables left the capture at ``at`` (dropped, or reset to be snapshotted again):
    one ``T`` row per table (see :func:`udtf.spark.output.reset_batch`); nothing is read."""

    tables: tuple[tuple[str, str], ...]
    at: dict[str, Any]


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
            self.store.record_round(0, sorted((s.table for s in now), key=str), None, schema_at=at)
            current = {s.table: s for s in now}
            self.schemas = {t: pinned_schema(opts, current[t]) if t in current else self._recorded_schema(t)
                            for t in self._recorded_tables()}
            if opts.follows_ddl:
                self._ensure_history()
        else:
            self.facts, self.schemas = planned_tables(profile, opts)
        # the name its committed offset is kept under (mysql-cdc status)
        self.name = str(next(iter(self.schemas))) if not self.many else f"tables {opts.tables}"
        self._look_for_tables = self.many  # at the start, and after a DDL statement named a table that matches
        self._target: BinlogOffset | None = None
        self._highest: dict[int, BinlogOffset] = {}
        # the transaction boundaries of the range latestOffset just planned, found by its scan: partitions()
        # cuts the range with them instead of scanning it again (a restart's replay scans)
        self._planned: tuple[str, tuple[str, int], list[BinlogOffset]] | None = None
        self._rules_done: dict[int, dict[TableId, Any]] = {}

    # -- the captured tables --
    def _binlog_now(self) -> dict[str, Any]:
        """The binlog's end now (the last file's size), read before tables are described: a DDL statement after
        it may not show in their schemas, and is looked for when their snapshot ends."""
        logs = binary_logs(self.profile)
        if not logs:
            raise StateError("the server lists no binary logs: enable log_bin")
        return {"file": logs[-1][0], "pos": logs[-1][1]}

    def _history(self, table: TableId, at: dict[str, Any], action: str, schema: TableSchema | None = None,
                 statement: str = "", why: str = "", renamed: dict[str, str] | None = None) -> None:
        """A schema history entry: from ``at`` on, the table is decoded with ``schema`` (``snapshot``,
        ``evolve``), unchanged (``same``), or out of the capture until it is snapshotted again (``reset``)."""
        self.store.record_history(table, {
            "at": {"file": at["file"], "pos": int(at["pos"])}, "action": action, "statement": statement[:2000],
            "why": why, "renamed": renamed or {}, "schema": None if schema is None else schema.to_dict()})

    def _ensure_history(self) -> None:
        """Every table of a recorded round has the round's snapshot entry in its schema history: written after
        the round, so a crash in between, or a state_dir from before schema histories (its entry then sits
        before every binlog point), would leave it out."""
        latest: dict[TableId, Any] = {}
        i = 0
        while (rec := self.store.round(i)) is not None:
            for t in rec["tables"]:
                latest[t] = rec.get("schema_at")
            i += 1
        for t, at in latest.items():
            history = self.store.history(t)
            if any(e["action"] == "snapshot" and (at is None or e["at"] == at) for e in history):
                continue
            schema = self.store.schema(t)
            if schema is not None and (at is not None or not history):
                self._history(t, at or {"file": "", "pos": 0}, "snapshot", schema=schema)

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
        at = self._binlog_now() if self.opts.follows_ddl else None
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
        rec = self.store.record_round(index, new, begin.to_dict(), schema_at=at)
        if at is not None:
            self._ensure_history()
        return list(rec["tables"])

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
            if self.many and self.opts.follows_ddl:
                rec = self._recorded_round(rounds, begin)
                if rec is not None and rec["dropped"]:  # decided before a crash: the same batch again
                    self._retire(rounds, rec["dropped"])
                    return self._binlog_offset(rec["end"], begin, rounds + 1)
                changed = self._changed_in_snapshot(index, begin)
                if changed:
                    return self._reset(rounds, begin, begin.to_dict(), changed)
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
            follow = self.opts.schema_changes == "follow"
            end = phase.batch_end(begin, end, max_rows, watch=self._watch(captured) if self.many else None,
                                  drops=self.many, follow=follow)
            self._planned = (json.dumps(begin.to_dict(), sort_keys=True), (end.file, end.pos), phase.seen)
            self._look_for_tables = self._look_for_tables or phase.new_table_seen
            if phase.dropped:  # the batch is a DDL statement of captured tables alone
                at = {"file": end.file, "pos": end.pos}
                if not follow:  # a DROP TABLE (stop mode stops at other DDL): the tables leave the capture
                    first = phase.dropped[0]
                    note = f"dropped at {first.file}:{first.pos} by {first.statement[:200]!r}"
                    return self._reset(rounds, begin, at, {ch.table: note for ch in phase.dropped}, again=False)
                resets = self._follow(phase.dropped, at, self._rules_of(rounds))
                if resets and self.many:
                    return self._reset(rounds, begin, at, resets)
                self._rules_done.clear()  # built with the former schemas
                if not self.many:
                    self._restart_if_changed(phase.dropped[0], resets)
                return self._binlog_offset(at, begin, rounds)
        if end.position_key() <= begin.offset.position_key() and not begin.auto_position:
            if _phase_of(start) == "snapshot":  # nothing written since the chunks: still, the snapshot is over
                end = begin.offset
            else:
                return start
        return self._binlog_offset({"file": end.file, "pos": end.pos}, begin, rounds)

    # -- schema changes followed (option schema_changes follow) --
    def _reset(self, rounds: int, begin: ReadFrom, at: dict[str, Any], why: dict[TableId, str],
               again: bool = True) -> dict[str, Any]:
        """The batch that takes tables out of the capture at ``at`` (recorded as round ``rounds``): dropped, or
        (``again``) to be snapshotted again from there, when the next batch looks for tables to capture (a table
        that still matches is captured afresh: its rows come again as snapshot rows). The batch's rows say so
        (``T`` rows, :class:`ResetPartition`)."""
        gone = sorted(why, key=str)
        note = "; ".join(f"{t}: {why[t]}" for t in gone)
        log.warning("mysql_cdc: %s leave(s) the capture at %s:%s%s: %s", ", ".join(map(str, gone)), at["file"],
                    at["pos"], ", to be snapshotted again" if again else "", note)
        if again:  # before the round: a crash between the two leaves a history entry the round replays over
            for t in gone:
                self._history(t, at, "reset", why=why[t])
            self._look_for_tables = True
        self.store.record_round(rounds, [], begin.to_dict(), dropped=gone, note=note[:4000], end=at)
        rec = self.store.round(rounds)
        assert rec is not None
        self._retire(rounds, rec["dropped"])
        return self._binlog_offset(rec["end"], begin, rounds + 1)

    def _changed_in_snapshot(self, index: int, begin: ReadFrom) -> dict[TableId, str]:
        """Tables of round ``index`` that a DDL statement changed after their schemas were recorded and before
        ``begin``, where the binlog phase starts (their chunks may hold rows of either shape): each is
        snapshotted again."""
        rec = self.store.round(index)
        at = rec.get("schema_at") if rec is not None else None
        if not at:
            return {}
        since = BinlogOffset(str(at["file"]), int(at["pos"]))
        if since.position_key() >= begin.offset.position_key():
            return {}
        tables = self._round_tables(index)
        phase = BinlogPhase(self.profile, self.facts, self.opts, self._schemas_of(tables), {})
        out: dict[TableId, str] = {}
        for ch in phase.statements(ReadFrom(since), begin.offset):
            if index_only(ch.statement):
                continue
            out.setdefault(ch.table, f"changed at {ch.file}:{ch.pos} by {ch.statement[:200]!r} while its snapshot "
                                     "was read")
        return out

    def _follow(self, changes: list[SchemaChange], at: dict[str, Any], rules: dict[TableId, Any]
                ) -> dict[TableId, str]:
        """Follow one DDL statement on captured tables (the batch is the statement alone, ``at`` its end). A
        table whose columns changed so that no stored value did (:func:`udtf.schema.evolve.judge`) goes on with its new
        schema, recorded here before any of its later rows is read; the others are returned, with why, to be
        snapshotted again: a statement that drops, empties, renames or replaces them, one that came while their
        chunks were read, one whose new schema cannot be known (a later DDL already changed the table again), and
        one that rewrote stored values."""
        resets: dict[TableId, str] = {}
        first = changes[0]
        statement = first.statement
        where = f"at {first.file}:{first.pos} by {statement[:200]!r}"
        point = BinlogOffset(str(at["file"]), int(at["pos"]))
        for ch in changes:
            t = ch.table
            if t in resets:
                continue
            kind = replacing_statement(statement, ch.database)
            rule = rules.get(t)
            if index_only(statement):  # no column, no stored value changes (also while chunks are read)
                self._history(t, at, SAME, statement=statement)
                continue
            if kind is not None:
                resets[t] = f"{kind} {where}"
                continue
            history = self.store.history(t)
            prior = [e for e in history if e["at"] == at and e["action"] in (EVOLVE, SAME)]
            if prior:  # decided before (a restart, or a crash before the batch was planned): kept
                if prior[-1]["action"] == EVOLVE:  # written again: a crash may have come before it was
                    self.store.record_schema(TableSchema.from_dict(prior[-1]["schema"]), replace=True)
                continue
            snapshot = [e for e in history if e["action"] == "snapshot"]
            if snapshot and history_key(snapshot[-1]) >= history_key({"at": at}):
                continue  # the statement ran before the table's last snapshot described it: its schema has it
            if rule is not None and rule.decided(point, ch.gtid) is not True:
                resets[t] = f"changed {where} while its snapshot chunks were read"
                continue
            old = self._recorded_schema(t)
            now = describe_now(self.profile, self.opts, t)
            if now is None:
                resets[t] = f"gone after the statement {where}"
                continue
            new, nulls = now
            # the schema read now is the statement's only if no later statement changed the table since
            alone = BinlogPhase(self.profile, self.facts, self.opts, {t: old}, {})
            later = [c for c in alone.statements(ReadFrom(point), server_end(self.profile, self.facts))
                     if not index_only(c.statement)]
            if later:
                # today's columns are a later statement's: when every statement from here on leaves stored values
                # alone, the columns just after this one are this statement applied to the recorded ones (an
                # added column defined as today, under its later name), checked against the binlog's own column
                # names of the rows written before the next statement
                chain = [statement, *(c.statement for c in later)]
                renamed_after = renamed_columns(chain[1:])  # today's name -> the name just after this statement
                added = set(clause_names(statement)[0])
                touched_later = {n for q in chain[1:] for names in clause_names(q)[:2] for n in names}
                mid = apply_plain(old, statement, new, renamed_after) \
                    if all(plainly_kept(q) for q in chain) and not added & touched_later else None
                written = None if mid is None else alone.row_columns(
                    ReadFrom(point), BinlogOffset(later[0].file, later[0].pos))
                if mid is None or (written is not None and written != list(mid.column_names)):
                    resets[t] = (f"changed {where}, and again at {later[0].file}:{later[0].pos} before the stream "
                                 "came to it, so its columns in between are not known")
                    continue
                today = {v: k for k, v in renamed_after.items()}  # the name just after this statement -> today's
                new, nulls = mid, {c.name: nulls.get(today.get(c.name, c.name), False) for c in mid.columns}
            verdict = judge(old, new, statement, nulls)
            if verdict.kind == RESET:
                resets[t] = f"{verdict.why} ({where})"
                continue
            # the history first: a crash between the two writes finds the decision, and writes the schema again
            self._history(t, at, verdict.kind, schema=new if verdict.kind == EVOLVE else None,
                          statement=statement, renamed=dict(verdict.renamed))
            if verdict.kind == EVOLVE:
                self.store.record_schema(new, replace=True)
                log.warning("mysql_cdc: %s changed %s: followed, its rows go on with columns %s", t, where,
                            list(new.column_names))
        return resets

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
        out: dict[str, Any] = {"v": 1, "phase": "binlog", "file": at["file"], "pos": int(at["pos"])}
        if at.get("gtids") is not None:  # a reset at a GTID start: the next batch starts there too
            out["gtids"] = at["gtids"]
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
            # a DDL statement alone that took tables out of the capture: their T rows, no read (and their chunk
            # records are moved aside)
            rec = self.store.round(done)
            if rec is None or not rec["dropped"]:
                return []
            return [ResetPartition(tuple((t.database, t.table) for t in rec["dropped"]), dict(rec["end"]))]
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
        captured = self._captured(rounds)
        tables = tuple((t.database, t.table) for t in captured)
        stop = BinlogOffset(str(end["file"]), int(end["pos"]))
        cuts: list[BinlogOffset] = []
        if self.opts.binlog_partitions > 1:  # parallel catch-up: the range cut at transaction boundaries
            phase = BinlogPhase(self.profile, self.facts, self.opts, self._schemas_of(captured), {})
            planned = self._planned
            known = planned[2] if planned is not None and planned[:2] == (
                json.dumps(begin.to_dict(), sort_keys=True), (stop.file, stop.pos)) else None
            cuts = phase.cut_points(begin, stop, self.opts.binlog_partitions, SPLIT_MIN_BYTES, known)
        starts = [begin.to_dict(), *(ReadFrom(BinlogOffset(c.file, c.pos), skip_before=begin.skip_before).to_dict()
                                     for c in cuts)]
        ends = [{"file": c.file, "pos": c.pos} for c in cuts] + [{"file": stop.file, "pos": stop.pos}]
        return [BinlogPartition(a, b, initial, tables, self.opts.schema_changes == "follow")
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

    # -- data (executors) --
    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        if isinstance(partition, ResetPartition):
            yield reset_batch([TableId(db, t) for db, t in partition.tables], partition.at)
            return
        if isinstance(partition, ChunkPartition):
            schemas = self._schemas_of(sorted({c.table for c in partition.chunks}, key=str))
            readers = Readers(self.profile, schemas, self.facts, self.opts)
            failed = self._changed_chunk if self.opts.schema_changes == "follow" else None
            yield from read_chunks(readers, partition.chunks, self.opts, Output(schemas, self.opts), failed)
            return
        assert isinstance(partition, BinlogPartition)
        tables = [TableId(db, t) for db, t in partition.tables]
        if not self.many and not tables:
            tables = sorted(self.schemas, key=str)
        schemas = self._schemas_of(tables)
        rules = self._rules(tables) if partition.initial else {}
        phase = BinlogPhase(self.profile, self.facts, self.opts, schemas, {t: rules.get(t) for t in tables},
                            followed=partition.followed)
        end = BinlogOffset(str(partition.end["file"]), int(partition.end["pos"]))
        yield from Output(schemas, self.opts).change_batches(phase.changes(ReadFrom.from_dict(partition.start), end),
                                                             self.opts.fetch_size)

    def _changed_chunk(self, chunk: Chunk, error: BaseException) -> ChunkRead:
        """A chunk whose read failed because a DDL statement changed its table while the snapshot was read (a
        column or the table is gone): recorded with no rows at the binlog's end now, since the statement makes
        the stream snapshot the table again (it lies after the table's recorded schema: see
        :meth:`_changed_in_snapshot` and :meth:`_follow`). A single table's stream stops there with
        :class:`SchemaChangedError` instead. Any other failure is raised."""
        recorded = self._recorded_schema(chunk.table)
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

