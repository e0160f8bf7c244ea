"""Spark adapters: the chunk-table and snapshot UDTFs and the ``mysql_cdc`` Python data source.

Thin classes over the planner and the snapshot reader. They are built inside :func:`build_*` so that each
registration carries its connection profiles (by value, in the pickled class) and so that a Spark Connect
session gets objects made for it.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceReader, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadLimit, ReadMaxRows, SupportsTriggerAvailableNow
from pyspark.sql.types import (
    BinaryType,
    BooleanType,
    ByteType,
    DataType,
    DateType,
    DayTimeIntervalType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    ShortType,
    StringType,
    StructField,
    StructType,
    TimestampNTZType,
    TimestampType,
)
from pyspark.sql.udtf import AnalyzeArgument, AnalyzeResult

from mysql_cdc.errors import ConfigError, StateError, TableError
from mysql_cdc.options import OPTIONS, CdcOptions, ConnectionProfile, parse_options, resolve_profile
from planner.chunks import CHUNK_COLUMNS, Chunk, TableId, chunk_row, decode_key
from planner.connect import ServerFacts, connect
from planner.plan import describe_table, plan_tables
from planner.schema import TableSchema
from state.offsets import BinlogOffset
from state.store import ChunkRecord, StateStore
from udtf.binlog import BinlogPhase, Change, ReadFrom, parse_end, read_from, recorded_rules, rules_start, server_end
from udtf.convert import batch_to_rows, spark_type, table_arrow_schema
from udtf.snapshot import ChunkRead, SnapshotReader

CHUNK_TABLE_DDL = ", ".join(f"{name} {kind}" for name, kind in CHUNK_COLUMNS)
# Metadata columns of every output row: the op (r for snapshot rows, +I, -U, +U, -D for changes), where it
# comes from, and where it is in the binlog (a snapshot row: its chunk's high watermark). Changes apply in the
# order (__file by numeric suffix, __pos, __row).
META_COLUMNS = (("__op", "STRING"), ("__database", "STRING"), ("__table", "STRING"), ("__chunk_id", "STRING"),
                ("__position", "STRING"), ("__file", "STRING"), ("__pos", "BIGINT"), ("__row", "INT"),
                ("__gtid", "STRING"), ("__commit_ts", "TIMESTAMP"))
_META_NULLABLE = {"__chunk_id", "__position", "__file", "__pos", "__row", "__gtid", "__commit_ts"}
_META_ARROW = {"STRING": pa.string(), "BIGINT": pa.int64(), "INT": pa.int32(), "TIMESTAMP": pa.timestamp("us", "UTC")}
# Options a SQL call may pass: connections come from a profile (a password never comes through SQL text).
SQL_OPTION_KEYS = tuple(o.key for o in OPTIONS if o.key not in ("host", "port", "user", "password", "partitions"))


_SIMPLE: dict[str, DataType] = {
    "TINYINT": ByteType(), "SMALLINT": ShortType(), "INT": IntegerType(), "BIGINT": LongType(),
    "FLOAT": FloatType(), "DOUBLE": DoubleType(), "BOOLEAN": BooleanType(), "STRING": StringType(),
    "BINARY": BinaryType(), "DATE": DateType(), "TIMESTAMP": TimestampType(), "TIMESTAMP_NTZ": TimestampNTZType(),
    "INTERVAL DAY TO SECOND": DayTimeIntervalType(DayTimeIntervalType.DAY, DayTimeIntervalType.SECOND),
}


def spark_data_type(ddl: str) -> DataType:
    """The pyspark type object for a type name of :mod:`udtf.convert` (no session needed, unlike fromDDL)."""
    if ddl.startswith("DECIMAL("):
        p, s = ddl[8:-1].split(",")
        return DecimalType(int(p), int(s))
    return _SIMPLE[ddl]


def output_schema(schema: TableSchema, opts: CdcOptions) -> StructType:
    """The snapshot output: the table's columns typed for Spark, then the metadata columns."""
    names = {c.name for c in schema.columns}
    clash = [m for m, _ in META_COLUMNS if m in names]
    if clash:
        raise TableError(f"table {str(schema.table)!r} has columns named like the metadata columns {clash!r}; "
                         "rename them or read through a view")
    fields = [StructField(c.name, spark_data_type(spark_type(c, opts.tinyint1_as_boolean)), c.nullable)
              for c in schema.columns]
    fields += [StructField(m, spark_data_type(t), m in _META_NULLABLE) for m, t in META_COLUMNS]
    return StructType(fields)


def chunk_from_row(row: Any) -> Chunk:
    return Chunk(TableId(row["database"], row["table_name"]), int(row["chunk_index"]), tuple(row["key_columns"]),
                 decode_key(row["chunk_start"]), decode_key(row["chunk_end"]))


def position_text(read: ChunkRead) -> str:
    return json.dumps(read.high.to_dict(), sort_keys=True, separators=(",", ":"))


def meta_values(read: ChunkRead) -> tuple[Any, ...]:
    """The metadata columns' values for every row of a chunk (see :data:`META_COLUMNS`)."""
    c = read.chunk
    return ("r", c.table.database, c.table.table, c.id, position_text(read), read.high.file, read.high.pos, 0,
            None, None)


def change_meta(ch: Change) -> tuple[Any, ...]:
    """The metadata columns' values of a change row."""
    pos: dict[str, Any] = {"file": ch.file, "pos": ch.pos}
    if ch.gtid:
        pos["gtid"] = ch.gtid
    return (ch.op, ch.table.database, ch.table.table, None, json.dumps(pos, separators=(",", ":")), ch.file,
            ch.pos, ch.row, ch.gtid, ch.commit_time())


def record(opts: CdcOptions, read: ChunkRead) -> None:
    if opts.state_dir:
        StateStore(opts.state_dir).record_chunk(ChunkRecord.of(read.chunk, read.low, read.high, read.rows))


def _sql_options(kwargs: Mapping[str, Any]) -> CdcOptions:
    bad = [k for k in kwargs if k.lower() not in SQL_OPTION_KEYS]
    if bad:
        raise ConfigError(f"unknown or forbidden argument(s) {bad!r}; SQL arguments are "
                          f"{', '.join(SQL_OPTION_KEYS)} (credentials come from a connection profile)")
    return parse_options(kwargs)


def _value(arg: Any) -> Any:
    return arg.value if isinstance(arg, AnalyzeArgument) else arg


def build_chunks_udtf(profiles: Mapping[str, ConnectionProfile]) -> type:
    class MysqlCdcChunks:
        """``mysql_cdc_chunks(source => ..., tables => ..., chunk_size => ...)``: one row per chunk."""

        _profiles: ClassVar[dict[str, ConnectionProfile]] = dict(profiles)

        def eval(self, **kwargs: Any) -> Iterator[tuple[Any, ...]]:
            opts = _sql_options(kwargs)
            _, plans = plan_tables(resolve_profile(opts, self._profiles), opts)
            for p in plans:
                for c in p.chunks:
                    yield chunk_row(c)

    return MysqlCdcChunks


@dataclass
class SnapshotAnalyzeResult(AnalyzeResult):
    table_schema: TableSchema | None = None
    facts: ServerFacts | None = None
    options: CdcOptions | None = None


def build_snapshot_udtf(profiles: Mapping[str, ConnectionProfile]) -> type:
    class MysqlCdcSnapshot:
        """``mysql_cdc_snapshot(TABLE(chunks), source => ..., table => ...)``: each chunk's rows as of its high
        watermark, typed like the MySQL table, plus ``__op``, ``__database``, ``__table``, ``__chunk_id`` and
        ``__position`` (the chunk's high watermark as JSON). Chunks are read in the partitions of the TABLE
        argument (spread them with ``/*+ REPARTITION(n) */``)."""

        _profiles: ClassVar[dict[str, ConnectionProfile]] = dict(profiles)

        def __init__(self, analyze_result: SnapshotAnalyzeResult) -> None:
            assert analyze_result.table_schema is not None and analyze_result.options is not None
            self.schema = analyze_result.table_schema
            self.facts = analyze_result.facts
            self.opts = analyze_result.options
            self.reader: SnapshotReader | None = None

        @staticmethod
        def analyze(chunks: AnalyzeArgument, **kwargs: AnalyzeArgument) -> AnalyzeResult:
            if not chunks.isTable:
                raise ConfigError("the first argument of mysql_cdc_snapshot must be TABLE(<chunk table>), e.g. "
                                  "TABLE(SELECT * FROM mysql_cdc_chunks(...))")
            opts = _sql_options({k: _value(v) for k, v in kwargs.items()})
            if not opts.table:
                raise ConfigError("mysql_cdc_snapshot needs table => 'db.table' (the table its chunks belong to)")
            profile = resolve_profile(opts, MysqlCdcSnapshot._profiles)
            facts, schema = describe_table(profile, opts, opts.table)
            # No partitioning requirement: each chunk row is read on its own, in the input's partitions. A
            # required PARTITION BY would add a shuffle of a few bytes that adaptive execution coalesces into
            # one task; `SELECT /*+ REPARTITION(n) */ ...` in the TABLE argument spreads the chunks instead.
            return SnapshotAnalyzeResult(schema=output_schema(schema, opts), table_schema=schema, facts=facts,
                                         options=opts)

        def eval(self, chunks: Any, **kwargs: Any) -> Iterator[tuple[Any, ...]]:
            chunk = chunk_from_row(chunks)
            if chunk.table != self.schema.table:
                raise ConfigError(f"chunk {chunk.id!r} belongs to {str(chunk.table)!r}, but this call reads "
                                  f"table => {str(self.schema.table)!r}; filter the chunk table by table_name")
            if self.reader is None:
                assert self.facts is not None
                self.reader = SnapshotReader(resolve_profile(self.opts, self._profiles), self.schema, self.facts,
                                             self.opts)
            read = self.reader.read(chunk)
            meta = meta_values(read)
            for batch in read.batches:
                for row in batch_to_rows(batch):
                    yield (*row, *meta)
            record(self.opts, read)

    return MysqlCdcSnapshot


# ---- the Python data source: spark.read.format("mysql_cdc") ----

@dataclass(frozen=True)
class ChunkPartition(InputPartition):
    """One Spark partition: one chunk, or several read one after another (each exact at its own watermark)."""

    chunks: tuple[Chunk, ...]


def with_metadata(read: ChunkRead, batch: pa.RecordBatch, out_schema: pa.Schema) -> pa.RecordBatch:
    """The chunk's rows plus the metadata columns (constant per chunk)."""
    n = batch.num_rows
    meta = [pa.repeat(pa.scalar(v, _META_ARROW[t]), n) for v, (_, t) in zip(meta_values(read), META_COLUMNS)]
    return pa.RecordBatch.from_arrays([*batch.columns, *meta], schema=out_schema)


def arrow_schema_of(schema: TableSchema, opts: CdcOptions) -> pa.Schema:
    fields = list(table_arrow_schema(schema.columns, opts.tinyint1_as_boolean))
    fields += [pa.field(m, _META_ARROW[t], m in _META_NULLABLE) for m, t in META_COLUMNS]
    return pa.schema(fields)


def changes_to_batches(changes: Iterator[Change], schema: TableSchema, opts: CdcOptions, out_schema: pa.Schema,
                       size: int) -> Iterator[pa.RecordBatch]:
    """Change rows as record batches of the output schema, ``size`` rows at a time."""
    buf: list[tuple[Any, ...]] = []

    def flush() -> pa.RecordBatch:
        cols = [list(c) for c in zip(*buf)]
        arrays = [pa.array(col, type=out_schema.field(i).type) for i, col in enumerate(cols)]
        return pa.RecordBatch.from_arrays(arrays, schema=out_schema)

    for ch in changes:
        buf.append((*ch.values, *change_meta(ch)))
        if len(buf) >= size:
            yield flush()
            buf = []
    if buf:
        yield flush()


class MysqlCdcReader(DataSourceReader):
    def __init__(self, profile: ConnectionProfile, opts: CdcOptions) -> None:
        self.profile = profile
        self.opts = opts
        assert opts.table is not None
        self.facts, plans = plan_tables(profile, opts, [opts.table])
        self.schema = plans[0].schema
        self.chunks = plans[0].chunks

    def partitions(self) -> list[InputPartition]:
        n = self.opts.partitions or len(self.chunks)
        groups = [self.chunks[i::n] for i in range(min(n, len(self.chunks)))]
        return [ChunkPartition(tuple(g)) for g in groups]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, ChunkPartition)
        reader = SnapshotReader(self.profile, self.schema, self.facts, self.opts)
        out_schema = arrow_schema_of(self.schema, self.opts)
        for chunk in partition.chunks:
            read = reader.read(chunk)
            for batch in read.batches:
                yield with_metadata(read, batch, out_schema)
            record(self.opts, read)


def build_data_source(profiles: Mapping[str, ConnectionProfile]) -> type:
    class MysqlCdcDataSource(DataSource):
        """``spark.read.format("mysql_cdc").option("source", ...).option("table", "db.table").load()``"""

        _profiles: ClassVar[dict[str, ConnectionProfile]] = dict(profiles)

        @classmethod
        def name(cls) -> str:
            return "mysql_cdc"

        def _opts(self) -> tuple[ConnectionProfile, CdcOptions]:
            opts = parse_options(dict(self.options))
            if not opts.table:
                raise ConfigError("the mysql_cdc data source needs .option('table', 'db.table')")
            return resolve_profile(opts, self._profiles), opts

        def schema(self) -> StructType:
            profile, opts = self._opts()
            _, schema = describe_table(profile, opts, opts.table or "")
            return output_schema(schema, opts)

        def reader(self, schema: StructType) -> DataSourceReader:
            profile, opts = self._opts()
            return MysqlCdcReader(profile, opts)

        def streamReader(self, schema: StructType) -> DataSourceStreamReader:
            profile, opts = self._opts()
            return MysqlCdcStreamReader(profile, opts)

    return MysqlCdcDataSource


# ---- the binlog phase: mysql_cdc_binlog(...) and spark.readStream.format("mysql_cdc") ----

def binlog_phase(profile: ConnectionProfile, facts: ServerFacts, schema: TableSchema, opts: CdcOptions
                 ) -> tuple[BinlogPhase, ReadFrom]:
    """The reader of one table's changes and where it starts, under ``opts.startup``."""
    rules = None
    if opts.startup == "initial":
        if not opts.state_dir:
            raise ConfigError("startup 'initial' reads after the recorded snapshot: set state_dir to where the "
                              "snapshot recorded its chunks, or choose startup latest/earliest/offset/timestamp")
        rules = recorded_rules(StateStore(opts.state_dir), {schema.table: schema}, lambda: connect(profile))
    start = read_from(profile, facts, opts, rules)
    return BinlogPhase(profile, facts, opts, {schema.table: schema}, {schema.table: (rules or {}).get(schema.table)}
                       ), start


def build_binlog_udtf(profiles: Mapping[str, ConnectionProfile]) -> type:
    class MysqlCdcBinlog:
        """``mysql_cdc_binlog(source => ..., table => ..., state_dir => ...)``: change rows of one table after
        its recorded snapshot (or from ``startup``), up to ``end`` (default: the binlog end when the read
        starts), typed like the snapshot, with the metadata columns."""

        _profiles: ClassVar[dict[str, ConnectionProfile]] = dict(profiles)

        def __init__(self, analyze_result: SnapshotAnalyzeResult) -> None:
            assert analyze_result.table_schema is not None and analyze_result.options is not None
            self.schema = analyze_result.table_schema
            self.facts = analyze_result.facts
            self.opts = analyze_result.options

        @staticmethod
        def analyze(**kwargs: AnalyzeArgument) -> AnalyzeResult:
            opts = _sql_options({k: _value(v) for k, v in kwargs.items()})
            if not opts.table:
                raise ConfigError("mysql_cdc_binlog needs table => 'db.table'")
            profile = resolve_profile(opts, MysqlCdcBinlog._profiles)
            facts, schema = describe_table(profile, opts, opts.table)
            return SnapshotAnalyzeResult(schema=output_schema(schema, opts), table_schema=schema, facts=facts,
                                         options=opts)

        def eval(self, **kwargs: Any) -> Iterator[tuple[Any, ...]]:
            assert self.facts is not None
            profile = resolve_profile(self.opts, self._profiles)
            phase, start = binlog_phase(profile, self.facts, self.schema, self.opts)
            end = parse_end(self.opts.end, profile, self.facts)
            for ch in phase.changes(start, end):
                yield (*ch.values, *change_meta(ch))

    return MysqlCdcBinlog


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

    def __init__(self, profile: ConnectionProfile, opts: CdcOptions) -> None:
        if not opts.state_dir:
            raise ConfigError("a mysql_cdc stream needs .option('state_dir', <path or URI>): the chunk plan and the "
                              "chunks' watermarks are kept there (offsets stay small)")
        assert opts.table is not None
        self.profile = profile
        self.opts = opts
        self.facts, self.schema = describe_table(profile, opts, opts.table)
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
        if isinstance(limit, ReadMaxRows) and limit.max_rows > 0:
            phase = BinlogPhase(self.profile, self.facts, self.opts, {self.table: self.schema}, {})
            end = phase.boundary_after_rows(begin, end, limit.max_rows)
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
            n = self.opts.partitions or len(todo)
            return [ChunkPartition(tuple(todo[i::n])) for i in range(min(n, len(todo)))]
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
            for chunk in partition.chunks:
                read = reader.read(chunk)
                for batch in read.batches:
                    yield with_metadata(read, batch, out_schema)
                record(self.opts, read)
            return
        assert isinstance(partition, BinlogPartition)
        rules = self._rules() if partition.initial else {}
        phase = BinlogPhase(self.profile, self.facts, self.opts, {self.table: self.schema},
                            {self.table: rules.get(self.table)})
        end = BinlogOffset(str(partition.end["file"]), int(partition.end["pos"]))
        yield from changes_to_batches(phase.changes(ReadFrom.from_dict(partition.start), end), self.schema,
                                      self.opts, out_schema, self.opts.fetch_size)
