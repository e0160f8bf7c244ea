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
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition
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

from mysql_cdc.errors import ConfigError, TableError
from mysql_cdc.options import OPTIONS, CdcOptions, ConnectionProfile, parse_options, resolve_profile
from planner.chunks import CHUNK_COLUMNS, Chunk, TableId, chunk_row, decode_key
from planner.connect import ServerFacts
from planner.plan import describe_table, plan_tables
from planner.schema import TableSchema
from state.store import ChunkRecord, StateStore
from udtf.convert import batch_to_rows, spark_type, table_arrow_schema
from udtf.snapshot import ChunkRead, SnapshotReader

CHUNK_TABLE_DDL = ", ".join(f"{name} {kind}" for name, kind in CHUNK_COLUMNS)
META_COLUMNS = (("__op", "STRING"), ("__database", "STRING"), ("__table", "STRING"), ("__chunk_id", "STRING"),
                ("__position", "STRING"))
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
    fields += [StructField(m, spark_data_type(t), m == "__position") for m, t in META_COLUMNS]
    return StructType(fields)


def chunk_from_row(row: Any) -> Chunk:
    return Chunk(TableId(row["database"], row["table_name"]), int(row["chunk_index"]), tuple(row["key_columns"]),
                 decode_key(row["chunk_start"]), decode_key(row["chunk_end"]))


def position_text(read: ChunkRead) -> str:
    return json.dumps(read.high.to_dict(), sort_keys=True, separators=(",", ":"))


def meta_values(read: ChunkRead) -> tuple[str, str, str, str, str]:
    """The metadata columns' values for every row of a chunk: op, database, table, chunk id, position."""
    c = read.chunk
    return ("r", c.table.database, c.table.table, c.id, position_text(read))


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
    arrays = [*batch.columns, *(pa.repeat(pa.scalar(v, pa.string()), n) for v in meta_values(read))]
    return pa.RecordBatch.from_arrays(arrays, schema=out_schema)


def arrow_schema_of(schema: TableSchema, opts: CdcOptions) -> pa.Schema:
    fields = list(table_arrow_schema(schema.columns, opts.tinyint1_as_boolean))
    fields += [pa.field(m, pa.string(), m == "__position") for m, _ in META_COLUMNS]
    return pa.schema(fields)


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

    return MysqlCdcDataSource
