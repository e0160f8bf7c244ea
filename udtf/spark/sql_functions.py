"""The SQL table functions ``mysql_cdc_chunks``, ``mysql_cdc_snapshot`` and ``mysql_cdc_binlog``.

They are built inside :func:`build_*` so that each registration carries its connection profiles (by value, in
the pickled class) and so that a Spark Connect session gets objects made for it."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from pyspark.sql.udtf import AnalyzeArgument, AnalyzeResult

from mysql_cdc.chunks import chunk_row
from mysql_cdc.connect import ServerFacts
from mysql_cdc.errors import ConfigError
from mysql_cdc.ids import TableId
from mysql_cdc.options import CdcOptions, parse_options
from mysql_cdc.planner.plan import plan_tables
from mysql_cdc.profiles import ConnectionProfile, resolve_profile
from mysql_cdc.schema import TableSchema
from mysql_cdc.udtf.convert import batch_to_rows
from mysql_cdc.udtf.spark.capture import binlog_range, planned_tables
from mysql_cdc.udtf.spark.chunk_reads import Readers, check_recorded, chunk_from_row, record
from mysql_cdc.udtf.spark.output import SQL_OPTION_KEYS, Output, change_rows, changes_need_metadata, meta_values


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
            _, plans = plan_tables(resolve_profile(opts, self._profiles), opts, binlog=False)
            for p in plans:
                for c in p.chunks:
                    yield chunk_row(c)

    return MysqlCdcChunks


@dataclass
class SnapshotAnalyzeResult(AnalyzeResult):
    facts: ServerFacts | None = None
    options: CdcOptions | None = None
    schemas: dict[TableId, TableSchema] | None = None


class _Analyzed:
    """A table function whose ``analyze`` described its tables: their schemas, the server's facts, the
    options."""

    def __init__(self, analyze_result: SnapshotAnalyzeResult) -> None:
        assert analyze_result.schemas is not None and analyze_result.options is not None
        self.schemas = analyze_result.schemas
        self.facts = analyze_result.facts
        self.opts = analyze_result.options


def build_snapshot_udtf(profiles: Mapping[str, ConnectionProfile]) -> type:
    class MysqlCdcSnapshot(_Analyzed):
        """``mysql_cdc_snapshot(TABLE(chunks), source => ..., table => ...)``: each chunk's rows as of its high
        watermark, typed like the MySQL table, plus ``__op``, ``__database``, ``__table``, ``__chunk_id`` and
        ``__position`` (the chunk's high watermark as JSON). With ``tables => 'db[.].*'`` instead: chunks of
        every matched table, each row's values as JSON in ``__values``. Chunks are read in the partitions of
        the TABLE argument (spread them with ``/*+ REPARTITION(n) */``)."""

        _profiles: ClassVar[dict[str, ConnectionProfile]] = dict(profiles)

        def __init__(self, analyze_result: SnapshotAnalyzeResult) -> None:
            super().__init__(analyze_result)
            self.readers: Readers | None = None

        @staticmethod
        def analyze(chunks: AnalyzeArgument, **kwargs: AnalyzeArgument) -> AnalyzeResult:
            if not chunks.isTable:
                raise ConfigError("the first argument of mysql_cdc_snapshot must be TABLE(<chunk table>), e.g. "
                                  "TABLE(SELECT * FROM mysql_cdc_chunks(...))")
            opts = _sql_options({k: _value(v) for k, v in kwargs.items()})
            if not opts.table and not opts.tables:
                raise ConfigError("mysql_cdc_snapshot needs table => 'db.table' (the table its chunks belong to), "
                                  "or tables => 'db[.].*' (the patterns the chunk table was planned with)")
            profile = resolve_profile(opts, MysqlCdcSnapshot._profiles)
            facts, schemas = planned_tables(profile, opts, snapshot=True, binlog=False)
            # No partitioning requirement: each chunk row is read on its own, in the input's partitions. A
            # required PARTITION BY would add a shuffle of a few bytes that adaptive execution coalesces into
            # one task; `SELECT /*+ REPARTITION(n) */ ...` in the TABLE argument spreads the chunks instead.
            return SnapshotAnalyzeResult(schema=Output(schemas, opts).spark_schema(), schemas=schemas, facts=facts,
                                         options=opts)

        def eval(self, chunks: Any, **kwargs: Any) -> Iterator[tuple[Any, ...]]:
            chunk = chunk_from_row(chunks)
            if chunk.table not in self.schemas:
                which = f"table => {str(next(iter(self.schemas)))!r}" if self.opts.table else \
                    f"tables => {self.opts.tables!r}"
                raise ConfigError(f"chunk {chunk.id!r} belongs to {str(chunk.table)!r}, which this call does not "
                                  f"read ({which}); filter the chunk table by table_name")
            as_of = check_recorded(self.opts, [chunk]).get(chunk.id)
            if self.readers is None:
                assert self.facts is not None
                self.readers = Readers(resolve_profile(self.opts, self._profiles), self.schemas, self.facts,
                                       self.opts)
            read = self.readers(chunk.table).read(chunk, as_of)
            output = Output(self.schemas, self.opts)
            if output.envelope:
                for batch in read.batches:
                    yield from batch_to_rows(output.chunk_batch(read, batch))
            else:
                meta = meta_values(read) if self.opts.metadata_columns else ()
                for batch in read.batches:
                    for row in batch_to_rows(batch):
                        yield (*row, *meta)
            record(self.opts, read)

    return MysqlCdcSnapshot


def build_binlog_udtf(profiles: Mapping[str, ConnectionProfile]) -> type:
    class MysqlCdcBinlog(_Analyzed):
        """``mysql_cdc_binlog(source => ..., table => ..., state_dir => ...)``: change rows of one table after
        its recorded snapshot (or from ``startup``), up to ``end`` (default: the binlog end when the read
        starts), typed like the snapshot, with the metadata columns. With ``tables => 'db[.].*'`` instead: the
        changes of every matched table, read by one binlog reader, each row's values as JSON in ``__values``."""

        _profiles: ClassVar[dict[str, ConnectionProfile]] = dict(profiles)

        @staticmethod
        def analyze(**kwargs: AnalyzeArgument) -> AnalyzeResult:
            opts = _sql_options({k: _value(v) for k, v in kwargs.items()})
            if not opts.table and not opts.tables:
                raise ConfigError("mysql_cdc_binlog needs table => 'db.table', or tables => 'db[.].*' (regular "
                                  "expressions over 'db.table')")
            changes_need_metadata(opts, "mysql_cdc_binlog")
            if opts.binlog_partitions > 1:
                raise ConfigError(f"binlog_partitions {opts.binlog_partitions!r} does nothing in mysql_cdc_binlog, "
                                  "which reads its range in one Spark task: read a backlog in parallel with "
                                  "spark.readStream.format('mysql_cdc') and option binlog_partitions, or drop it")
            if opts.once:
                raise ConfigError("once does nothing in mysql_cdc_binlog, which ends at option end (default: the "
                                  "binlog's end when the read starts): drop it")
            profile = resolve_profile(opts, MysqlCdcBinlog._profiles)
            facts, schemas = planned_tables(profile, opts)
            return SnapshotAnalyzeResult(schema=Output(schemas, opts).spark_schema(), schemas=schemas, facts=facts,
                                         options=opts)

        def eval(self, **kwargs: Any) -> Iterator[tuple[Any, ...]]:
            assert self.facts is not None
            profile = resolve_profile(self.opts, self._profiles)
            phase, start, end = binlog_range(profile, self.facts, self.schemas, self.opts)
            output = Output(self.schemas, self.opts)
            if not output.envelope:
                yield from change_rows(phase.runs(start, end))
                return
            for batch in output.change_batches(phase.runs(start, end, columns=True), self.opts.fetch_size):
                yield from batch_to_rows(batch)

    return MysqlCdcBinlog
