"""The ``mysql_cdc_binlog`` Python data source: the SQL function ``mysql_cdc_binlog(...)``'s change rows as a
batch read, in Arrow batches of ``fetch_size`` rows and in parallel over the range's transaction boundaries.

pyspark's Python UDTFs (Arrow-optimized or not, 4.0-4.3) hold every row one ``eval`` yields before they
convert them, so the SQL function holds its whole range in one Python worker (2 GB for 600,000 change rows of
TPC-H orders). The same read as a data source streams: a task holds one batch. In SQL it is a view::

    CREATE TEMPORARY VIEW changes USING mysql_cdc_binlog
      OPTIONS (source 'shop', table 'shop.orders', state_dir '/state/orders');
    SELECT * FROM changes;

and in Python ``spark.read.format("mysql_cdc_binlog").option(...).load()``. It takes the SQL function's
options (``binlog_partitions`` too: the range is cut for that many tasks) and gives its rows: the start from
``startup`` (after the recorded snapshot with ``initial``), the end from ``end`` (the binlog's end when a query
is planned), cut before a DDL statement of a captured table. Each query plans the range again: a view read twice
after new writes reads more."""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import ClassVar

import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition
from pyspark.sql.types import StructType

from mysql_cdc.connect import ServerFacts
from mysql_cdc.errors import ConfigError, SchemaChangedError
from mysql_cdc.ids import TableId
from mysql_cdc.memory import return_freed_memory
from mysql_cdc.offsets import BinlogOffset
from mysql_cdc.options import CdcOptions, parse_options
from mysql_cdc.profiles import ConnectionProfile, resolve_profile
from mysql_cdc.schema import TableSchema
from mysql_cdc.udtf.binlog.catchup import catchup_parts
from mysql_cdc.udtf.binlog.emit import EmitRule
from mysql_cdc.udtf.binlog.phase import BinlogPhase
from mysql_cdc.udtf.binlog.startup import ReadFrom
from mysql_cdc.udtf.spark.capture import binlog_range, planned_tables
from mysql_cdc.udtf.spark.output import SQL_OPTION_KEYS, Output, changes_need_metadata


@dataclass(frozen=True)
class RangePart(InputPartition):
    """One task's piece of the range: from ``start`` up to ``end``. (Pickled within a query only.)"""

    start: ReadFrom
    end: BinlogOffset


def binlog_options(options: Mapping[str, str]) -> CdcOptions:
    """The view's options, checked as the SQL function checks its arguments."""
    bad = sorted(k for k in options if k.lower() not in SQL_OPTION_KEYS)
    if bad:
        raise ConfigError(f"unknown or forbidden option(s) {bad!r} of the mysql_cdc_binlog data source; its options "
                          f"are {', '.join(SQL_OPTION_KEYS)} (credentials come from a connection profile)")
    opts = parse_options(dict(options))
    if not opts.table and not opts.tables:
        raise ConfigError("the mysql_cdc_binlog data source needs option table 'db.table', or tables 'db[.].*' "
                          "(regular expressions over 'db.table')")
    changes_need_metadata(opts, "the mysql_cdc_binlog data source")
    if opts.once:
        raise ConfigError("once does nothing in the mysql_cdc_binlog data source, which ends at option end "
                          "(default: the binlog's end when a query is planned): drop it")
    return opts


class BinlogRangeReader(DataSourceReader):
    """Plans the range on the driver (its start, its end, where it is cut) and reads each piece on an executor.
    What a piece needs of the state dir (the emit rules) travels with the reader, so executors need not see
    the driver's disk."""

    def __init__(self, profile: ConnectionProfile, opts: CdcOptions, facts: ServerFacts,
                 schemas: Mapping[TableId, TableSchema], parallelism: int) -> None:
        self.profile = profile
        self.opts = opts
        self.facts = facts
        self.schemas = dict(schemas)
        phase, start, end = binlog_range(profile, facts, self.schemas, opts)
        self.rules: dict[TableId, EmitRule | None] = dict(phase.rules)
        parts, min_bytes = catchup_parts(opts.binlog_partitions, parallelism)
        cuts = phase.cut_points(start, end, parts, min_bytes, phase.seen)  # the boundaries the scan above passed
        starts = phase.part_starts(start, cuts, phase.seen_xa)
        self.parts = [RangePart(a, b) for a, b in zip(starts, [*cuts, end])]

    def partitions(self) -> list[InputPartition]:
        return list(self.parts)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, RangePart)
        return_freed_memory()  # mysql_cdc.memory
        phase = BinlogPhase(self.profile, self.facts, self.opts, self.schemas, self.rules)
        yield from Output(self.schemas, self.opts).change_batches(
            phase.runs(partition.start, partition.end, columns=True), self.opts.fetch_size)


def build_binlog_source(profiles: Mapping[str, ConnectionProfile], parallelism: int | None = None) -> type:
    """The data source class, holding the connection profiles and the session's task parallelism (``None``:
    the cores of the machine that plans the read)."""

    class MysqlCdcBinlogSource(DataSource):
        """``spark.read.format("mysql_cdc_binlog").option("source", ...).option("table", "db.table").load()``"""

        _profiles: ClassVar[dict[str, ConnectionProfile]] = dict(profiles)
        _parallelism: ClassVar[int | None] = parallelism

        @classmethod
        def name(cls) -> str:
            return "mysql_cdc_binlog"

        def _planned(self) -> tuple[ConnectionProfile, CdcOptions, ServerFacts, dict[TableId, TableSchema]]:
            opts = binlog_options(dict(self.options))
            profile = resolve_profile(opts, self._profiles)
            facts, schemas = planned_tables(profile, opts)
            return profile, opts, facts, schemas

        def schema(self) -> StructType:
            _, opts, _, schemas = self._planned()
            return Output(schemas, opts).spark_schema()

        def reader(self, schema: StructType) -> DataSourceReader:
            profile, opts, facts, schemas = self._planned()
            now = Output(schemas, opts).spark_schema()
            if schema is not None and now != schema:  # a DataFrame loaded before an ALTER, or .schema(...) given
                raise SchemaChangedError(
                    f"the columns Spark asks of mysql_cdc_binlog ({schema.simpleString()!r}) are not its tables' now "
                    f"({now.simpleString()!r}): the tables changed since this DataFrame or view was made (load it or "
                    "create it again, or give it a state_dir, which keeps the columns it was first read with), or "
                    "a schema was given with .schema(...), which this data source does not take (drop it)")
            return BinlogRangeReader(profile, opts, facts, schemas, self._parallelism or os.cpu_count() or 1)

    return MysqlCdcBinlogSource
