"""``spark.readStream.format("mysql_cdc")``: snapshot chunks first (a few per micro-batch), then the binlog
forever, with small offsets (the chunk plan and the chunks' watermarks live in ``state_dir``)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadLimit, ReadMaxRows, SupportsTriggerAvailableNow

from mysql_cdc.chunks import TableId
from mysql_cdc.connect import connect
from mysql_cdc.errors import ConfigError, StateError
from mysql_cdc.offsets import BinlogOffset
from mysql_cdc.options import CdcOptions, ConnectionProfile
from mysql_cdc.planner.plan import plan_tables
from mysql_cdc.state.store import StateStore
from mysql_cdc.udtf.adapter import (
    ChunkPartition,
    arrow_schema_of,
    changes_need_metadata,
    changes_to_batches,
    planned_table,
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
from mysql_cdc.udtf.snapshot import SnapshotReader


@dataclass(frozen=True)
class BinlogPartition(InputPartition):
    """One Spark partition reading the binlog from ``start`` up to ``end``; ``initial``: after the recorded
    chunks (the emit rule applies), else every change of the table."""

    start: dict[str, Any]
    end: dict[str, Any]
    initial: bool


def _phase_of(offset: dict[str, Any]) -> str:
    phase = offset.get("phase")
    if phase not in ("snapshot", "binlog") or offset.get("v") != 1:
        raise StateError(f"offset {offset!r} was not written by this version of mysql_cdc; start the query "
                         "with a new checkpoint")
    return str(phase)


class MysqlCdcStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Snapshot chunks first (a few per micro-batch), then the binlog forever. Offsets are small: the chunk
    plan and the chunks' watermarks live in ``state_dir``; an offset holds a chunk count or a binlog point."""

    def __init__(self, profile: ConnectionProfile, opts: CdcOptions, parallelism: int = 1) -> None:
        if not opts.state_dir:
            raise ConfigError("a mysql_cdc stream needs .option('state_dir', <path or URI>): the chunk plan and the "
                              "chunks' watermarks are kept there (offsets stay small)")
        assert opts.table is not None
        changes_need_metadata(opts, "a mysql_cdc stream")
        self.profile = profile
        self.opts = opts
        self.parallelism = parallelism
        self.facts, self.schema = planned_table(profile, opts)
        self.store = StateStore(opts.state_dir)
        self.table = self.schema.table
        self._target: BinlogOffset | None = None
        self._highest: BinlogOffset | None = None

    # -- offsets (driver) --
    def initialOffset(self) -> dict[str, Any]:
        if self.opts.startup in ("initial", "snapshot"):
            chunks = self.store.plan(self.table)
            if chunks is None:
                _, plans = plan_tables(self.profile, self.opts, [str(self.table)])
                chunks = self.store.record_plan(self.table, plans[0].chunks)
            return {"v": 1, "phase": "snapshot", "chunk": 0, "chunks": len(chunks)}
        start = read_from(self.profile, self.facts, self.opts, None)
        return {"v": 1, "phase": "binlog", **start.to_dict()}

    def prepareForTriggerAvailableNow(self) -> None:
        self._target = server_end(self.profile, self.facts)

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.opts.max_rows_per_batch:
            return ReadMaxRows(self.opts.max_rows_per_batch)
        return ReadAllAvailable()

    def _rules(self) -> dict[TableId, Any]:
        return recorded_rules(self.store, {self.table: self.schema}, lambda: connect(self.profile))

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, Any]:
        if _phase_of(start) == "snapshot":
            k, n = int(start["chunk"]), int(start["chunks"])
            if k < n:
                step = self.opts.max_chunks_per_batch or n
                return {**start, "chunk": min(n, k + step)}
            if self.opts.startup == "snapshot":
                return start
            rules = self._rules()
            begin = rules_start(rules)
            if self._target is not None:
                # a mirror is consistent only past every chunk's high watermark
                highest = max(h for rule in rules.values() for h in rule.highs)
                if highest.position_key() > self._target.position_key():
                    self._target = BinlogOffset(highest.file, highest.pos)
        else:
            begin = ReadFrom.from_dict(start)
        end = self._target or server_end(self.profile, self.facts)
        if end.position_key() > begin.offset.position_key() or begin.auto_position:
            # the batch ends before a DDL of the table (a DDL at its start stops the stream here), and after
            # max_rows change rows
            phase = BinlogPhase(self.profile, self.facts, self.opts, {self.table: self.schema}, {})
            max_rows = limit.max_rows if isinstance(limit, ReadMaxRows) else 0
            end = phase.batch_end(begin, end, max_rows)
        if end.position_key() <= begin.offset.position_key() and not begin.auto_position:
            if _phase_of(start) == "snapshot":  # nothing written since the chunks: still, the snapshot is over
                end = begin.offset
            else:
                return start
        out: dict[str, Any] = {"v": 1, "phase": "binlog", "file": end.file, "pos": end.pos}
        if begin.skip_before is not None:
            out["skip_before"] = begin.skip_before
        return out

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> list[InputPartition]:
        if _phase_of(end) == "snapshot":
            chunks = self.store.plan(self.table)
            if chunks is None:
                raise StateError(f"the chunk plan of {str(self.table)!r} is missing under {self.store.location!r}; "
                                 "the state_dir must stay with the checkpoint")
            todo = chunks[int(start["chunk"]):int(end["chunk"])]
            return list(spread_chunks(todo, self.opts.partitions, self.parallelism))
        if start == end:
            return []
        initial = _phase_of(start) == "snapshot"
        begin = rules_start(self._rules()) if initial else ReadFrom.from_dict(start)
        return [BinlogPartition(begin.to_dict(), {"file": end["file"], "pos": int(end["pos"])},
                                self.opts.startup == "initial" and self._needs_rules(begin))]

    def _needs_rules(self, begin: ReadFrom) -> bool:
        """Whether a read from ``begin`` can meet events some chunk already holds. Past the largest high
        watermark's position no chunk holds an event (a GTID in an executed set was written before the
        position read with it), so the executors need not load the chunk records again."""
        if self._highest is None:
            self._highest = max(h for rule in self._rules().values() for h in rule.highs)
        return begin.auto_position or begin.offset.position_key() < self._highest.position_key()

    def commit(self, end: dict[str, Any]) -> None:
        self.store.record_offset(str(self.table), end)

    # -- data (executors) --
    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        out_schema = arrow_schema_of(self.schema, self.opts)
        if isinstance(partition, ChunkPartition):
            reader = SnapshotReader(self.profile, self.schema, self.facts, self.opts)
            yield from read_chunks(reader, partition.chunks, self.opts, out_schema)
            return
        assert isinstance(partition, BinlogPartition)
        rules = self._rules() if partition.initial else {}
        phase = BinlogPhase(self.profile, self.facts, self.opts, {self.table: self.schema},
                            {self.table: rules.get(self.table)})
        end = BinlogOffset(str(partition.end["file"]), int(partition.end["pos"]))
        yield from changes_to_batches(phase.changes(ReadFrom.from_dict(partition.start), end), self.schema,
                                      self.opts, out_schema, self.opts.fetch_size)
