"""What a stream does about a DDL statement on a captured table (option ``schema_changes`` follow).

The statement's text is read by :mod:`mysql_cdc.ddl`, what it did to the table is judged by
:func:`udtf.schema.evolve.judge` from the table's schema before and after it, and what is kept is the table's
schema history (:mod:`mysql_cdc.state.history`). The follower decides, on the driver, before any row after the
statement is read: the table goes on with its new schema (recorded first, then its rows are decoded with it),
or it is snapshotted again (reset), and why.
"""

from __future__ import annotations

import logging
from typing import Any

from mysql_cdc.connect import ServerFacts
from mysql_cdc.ddl import (
    UNLOGGED,
    clause_names,
    index_only,
    plainly_kept,
    renamed_columns,
    replacing_statement,
    unlogged_rows,
)
from mysql_cdc.ids import TableId
from mysql_cdc.offsets import BinlogOffset, binlog_file_key
from mysql_cdc.options import CdcOptions
from mysql_cdc.planner.plan import describe_now
from mysql_cdc.profiles import ConnectionProfile
from mysql_cdc.schema import EVOLVE, RESET, SAME, SNAPSHOT, HistoryAction, TableSchema
from mysql_cdc.state.history import HistoryEntry
from mysql_cdc.state.store import Round, StateStore
from mysql_cdc.udtf.binlog.phase import BinlogPhase
from mysql_cdc.udtf.binlog.startup import ReadFrom, server_end
from mysql_cdc.udtf.binlog.transactions import SchemaChange
from mysql_cdc.udtf.schema.evolve import apply_plain, judge

log = logging.getLogger("mysql_cdc")


def point(at: dict[str, Any]) -> tuple[str, int]:
    """A binlog point (``{"file": ..., "pos": ...}``) as a history entry holds it."""
    return str(at["file"]), int(at["pos"])


class SchemaFollower:
    """Follows DDL statements on a capture's tables, recording each decision in their schema history."""

    def __init__(self, profile: ConnectionProfile, facts: ServerFacts, opts: CdcOptions, store: StateStore) -> None:
        self.profile = profile
        self.facts = facts
        self.opts = opts
        self.store = store

    def recorded_schema(self, table: TableId) -> TableSchema:
        schema = self.store.schema(table)
        if schema is None:
            raise self.store.missing(f"the schema of {str(table)!r}")
        return schema

    def record(self, table: TableId, at: dict[str, Any], action: HistoryAction, schema: TableSchema | None = None,
               statement: str = "", why: str = "", renamed: dict[str, str] | None = None) -> None:
        """A history entry: from ``at`` on, the table is decoded with ``schema`` (``snapshot``, ``evolve``),
        unchanged (``same``), or out of the capture until it is snapshotted again (``reset``)."""
        self.store.record_history(table, HistoryEntry(point(at), action, schema, dict(renamed or {}), statement[:2000],
                                                      why))

    def ensure_history(self, rounds: list[Round]) -> None:
        """Every table of a recorded round has the round's snapshot entry in its schema history: written after
        the round, so a crash in between, or a state_dir from before schema histories (its entry then sits
        before every binlog point), would leave it out."""
        latest: dict[TableId, Any] = {}
        for rnd in rounds:
            for t in rnd.tables:
                latest[t] = rnd.schema_at
        for t, at in latest.items():
            history = self.store.history(t)
            if any(e.action == SNAPSHOT and (at is None or e.at == point(at)) for e in history):
                continue
            schema = self.store.schema(t)
            if schema is not None and (at is not None or not history):
                self.record(t, at or {"file": "", "pos": 0}, SNAPSHOT, schema=schema)

    def changed_in_snapshot(self, rnd: Round, schemas: dict[TableId, TableSchema], begin: ReadFrom
                            ) -> dict[TableId, str]:
        """Tables of a round (``schemas``) that a DDL statement changed after their schemas were recorded and
        before ``begin``, where the binlog phase starts (their chunks may hold rows of either shape): each is
        snapshotted again."""
        at = rnd.schema_at
        if not at:
            return {}
        since = BinlogOffset(str(at["file"]), int(at["pos"]))
        if since.position_key() >= begin.offset.position_key():
            return {}
        phase = BinlogPhase(self.profile, self.facts, self.opts, schemas, {})
        out: dict[TableId, str] = {}
        for ch in phase.statements(ReadFrom(since), begin.offset):
            if index_only(ch.statement):
                continue
            out.setdefault(ch.table, f"changed at {ch.file}:{ch.pos} by {ch.statement[:200]!r} while its snapshot "
                                     "was read")
        return out

    def follow(self, changes: list[SchemaChange], at: dict[str, Any], rules: dict[TableId, Any]
               ) -> dict[TableId, str]:
        """Follow one DDL statement on captured tables (the batch is the statement alone, ``at`` its end). A
        table whose columns changed so that no stored value did (:func:`udtf.schema.evolve.judge`) goes on with
        its new schema, recorded here before any of its later rows is read; the others are returned, with why,
        to be snapshotted again: a statement that drops, empties, renames or replaces them, one that came while
        their chunks were read, one whose new schema cannot be known (a later DDL already changed the table
        again), and one that rewrote stored values."""
        resets: dict[TableId, str] = {}
        first = changes[0]
        statement = first.statement
        where = f"at {first.file}:{first.pos} by {statement[:200]!r}"
        for ch in changes:
            if ch.table in resets:
                continue
            why = self._follow_table(ch, statement, where, at, rules.get(ch.table))
            if why is not None:
                resets[ch.table] = why
        return resets

    def _follow_table(self, ch: SchemaChange, statement: str, where: str, at: dict[str, Any], rule: Any
                      ) -> str | None:
        """One table's decision (see :meth:`follow`): ``None`` when it goes on, else why it is reset."""
        t = ch.table
        kind = replacing_statement(statement, ch.database)
        if kind == UNLOGGED and t not in unlogged_rows(statement, ch.database):
            kind = None  # a table the statement only mentions: its rows are as they were
        if index_only(statement):  # no column, no stored value changes (also while chunks are read)
            self.record(t, at, SAME, statement=statement)
            return None
        if kind is not None:
            return f"{kind} {where}"
        history = self.store.history(t)
        prior = [e for e in history if e.at == point(at) and e.action in (EVOLVE, SAME)]
        if prior:  # decided before (a restart, or a crash before the batch was planned): kept
            if prior[-1].action == EVOLVE and prior[-1].schema is not None:  # a crash may have come before it
                self.store.record_schema(prior[-1].schema, replace=True)
            return None
        snapshot = [e for e in history if e.action == SNAPSHOT]
        if snapshot and snapshot[-1].key >= (binlog_file_key(str(at["file"])), int(at["pos"]), 0):
            return None  # the statement ran before the table's last snapshot described it: its schema has it
        here = BinlogOffset(str(at["file"]), int(at["pos"]))
        if rule is not None and rule.decided(here, ch.gtid) is not True:
            return f"changed {where} while its snapshot chunks were read"
        old = self.recorded_schema(t)
        now = describe_now(self.profile, self.opts, t)
        if now is None:
            return f"gone after the statement {where}"
        new, nulls = now
        # the schema read now is the statement's only if no later statement changed the table since
        alone = BinlogPhase(self.profile, self.facts, self.opts, {t: old}, {})
        later = [c for c in alone.statements(ReadFrom(here), server_end(self.profile, self.facts))
                 if not index_only(c.statement)]
        if later:
            between = self._between(old, new, nulls, statement, later, alone, here)
            if between is None:
                return (f"changed {where}, and again at {later[0].file}:{later[0].pos} before the stream came to "
                        "it, so its columns in between are not known")
            new, nulls = between
        verdict = judge(old, new, statement, nulls)
        if verdict.kind == RESET:
            return f"{verdict.why} ({where})"
        # the history first: a crash between the two writes finds the decision, and writes the schema again
        self.record(t, at, verdict.kind, schema=new if verdict.kind == EVOLVE else None, statement=statement,
                    renamed=dict(verdict.renamed))
        if verdict.kind == EVOLVE:
            self.store.record_schema(new, replace=True)
            log.warning("mysql_cdc: %s changed %s: followed, its rows go on with columns %s", t, where,
                        list(new.column_names))
        return None

    def _between(self, old: TableSchema, new: TableSchema, nulls: dict[str, bool], statement: str,
                 later: list[SchemaChange], alone: BinlogPhase, here: BinlogOffset
                 ) -> tuple[TableSchema, dict[str, bool]] | None:
        """The table's columns just after ``statement`` when later statements changed it again before the
        stream came to them (today's columns, ``new``, are theirs): when every statement from here on leaves
        stored values alone, they are this statement applied to the recorded ones (an added column defined as
        today, under its later name), checked against the binlog's own column names of the rows written before
        the next statement; ``None`` when they cannot be known."""
        chain = [statement, *(c.statement for c in later)]
        renamed_after = renamed_columns(chain[1:])  # today's name -> the name just after this statement
        added = set(clause_names(statement)[0])
        touched_later = {n for q in chain[1:] for names in clause_names(q)[:2] for n in names}
        mid = apply_plain(old, statement, new, renamed_after) \
            if all(plainly_kept(q) for q in chain) and not added & touched_later else None
        written = None if mid is None else alone.row_columns(ReadFrom(here), BinlogOffset(later[0].file,
                                                                                          later[0].pos))
        if mid is None or (written is not None and written != list(mid.column_names)):
            return None
        today = {v: k for k, v in renamed_after.items()}  # the name just after this statement -> today's
        return mid, {c.name: nulls.get(today.get(c.name, c.name), False) for c in mid.columns}
