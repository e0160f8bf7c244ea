"""The ``mysql_cdc`` Python data source: ``spark.read.format("mysql_cdc")`` (the chunks of a table, or of
every matched table, read in parallel, each exact at its own high watermark) and the entry of
``spark.readStream.format("mysql_cdc")``."""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from typing import ClassVar

import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceReader, DataSourceStreamReader, InputPartition
from pyspark.sql.types import StructType

from mysql_cdc.chunks import Chunk
from mysql_cdc.errors import ConfigError
from mysql_cdc.memory import return_freed_memory
from mysql_cdc.options import CdcOptions, parse_options
from mysql_cdc.planner.plan import plan_tables
from mysql_cdc.profiles import (
    PROFILE_ENV_PREFIX,
    PROFILES_FILE_ENV,
    ConnectionProfile,
    read_password_source,
    resolve_profile,
    session_files_scoped,
)
from mysql_cdc.state.store import StateStore
from mysql_cdc.udtf.spark.capture import pinned_schema, planned_tables
from mysql_cdc.udtf.spark.chunk_reads import ChunkPartition, Readers, read_chunks, spread_chunks
from mysql_cdc.udtf.spark.output import Output
from mysql_cdc.udtf.spark.stream_reader import stream_reader


class MysqlCdcReader(DataSourceReader):
    def __init__(self, profile: ConnectionProfile, opts: CdcOptions, parallelism: int) -> None:
        self.profile = profile
        self.opts = opts
        self.parallelism = parallelism
        self.facts, plans = plan_tables(profile, opts, [opts.table] if opts.table else None, binlog=False,
                                        slots=parallelism)
        # a recorded schema must be today's
        self.schemas = {p.schema.table: pinned_schema(opts, p.schema, snapshot=True) for p in plans}
        self.chunks: tuple[Chunk, ...] = ()
        for p in plans:
            chunks = p.chunks
            if opts.state_dir:  # the plan recorded there, as a stream does: a re-run reads the chunks it recorded
                chunks = tuple(StateStore(opts.state_dir).record_plan(p.schema.table, chunks, p.rows_per_chunk,
                                                                      p.avg_row_bytes))
            self.chunks += chunks

    def partitions(self) -> list[InputPartition]:
        return list(spread_chunks(self.chunks, self.opts.partitions, self.parallelism))

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, ChunkPartition)
        return_freed_memory()  # mysql_cdc.memory
        readers = Readers(self.profile, self.schemas, self.facts, self.opts)
        yield from read_chunks(readers, partition.chunks, self.opts, Output(self.schemas, self.opts))


def check_stream_secret(profile: ConnectionProfile, opts: CdcOptions) -> None:
    """Refuse, before the stream starts, a profile whose password only a Spark Connect session's own files hold:
    Spark 4.x runs a stream without the session's files (its planner sees them or not by version, its
    executors do not), so every read would fail to log in."""
    if profile.session_secret is None:
        return
    if profile.password_from:
        try:
            read_password_source(profile.password_from, profile)
            return  # read where the profile names it, which the server's executors share (its environment)
        except (ConfigError, OSError, ValueError, KeyError, TypeError, AttributeError):
            pass
    try:
        scoped = session_files_scoped(profile.session_secret[0])
        profile.login_password()
    except (ConfigError, ImportError):
        scoped = True
    if scoped:
        raise connect_stream_secret_error(opts.source)


def connect_stream_secret_error(name: str | None) -> ConfigError:
    """The error for a stream (or a sync) from a Spark Connect client that names a profile it registered."""
    return ConfigError(f"profile {name!r} was registered from a Spark Connect client, and a stream's tasks on the "
                       "server do not see that session's files, where its password is: give the server the "
                       f"profile instead (${PROFILES_FILE_ENV} or ${PROFILE_ENV_PREFIX}<NAME> in the server's "
                       "environment; the CLI's image does) and do not register it from the client")


# options a batch read (the snapshot) would ignore: refused instead
STREAM_ONLY_OPTIONS = ("startup", "startup_offset", "startup_timestamp", "end", "max_chunks_per_batch",
                       "max_rows_per_batch", "binlog_partitions", "once")


def build_data_source(profiles: Mapping[str, ConnectionProfile], parallelism: int | None = None) -> type:
    """The data source class, holding the connection profiles and the session's task parallelism (``None``:
    the cores of the machine that plans the read, right for local mode)."""

    class MysqlCdcDataSource(DataSource):
        """``spark.read.format("mysql_cdc").option("source", ...).option("table", "db.table").load()``"""

        _profiles: ClassVar[dict[str, ConnectionProfile]] = dict(profiles)
        _parallelism: ClassVar[int | None] = parallelism

        @classmethod
        def name(cls) -> str:
            return "mysql_cdc"

        def _opts(self) -> tuple[ConnectionProfile, CdcOptions]:
            opts = parse_options(dict(self.options))
            if not opts.table and not opts.tables:
                raise ConfigError("the mysql_cdc data source needs .option('table', 'db.table') (one table, its "
                                  "columns typed) or .option('tables', 'db[.].*') (regular expressions: every "
                                  "matched table, rows as JSON in __values)")
            return resolve_profile(opts, self._profiles), opts

        def schema(self) -> StructType:
            profile, opts = self._opts()
            # the columns only: a stream's reader checks what a binlog read needs when it starts
            _, schemas = planned_tables(profile, opts, binlog=False)
            return Output(schemas, opts).spark_schema()

        def reader(self, schema: StructType) -> DataSourceReader:
            profile, opts = self._opts()
            ignored = sorted({k.lower() for k in self.options} & set(STREAM_ONLY_OPTIONS))
            if ignored:
                raise ConfigError(f"option(s) {', '.join(ignored)} do nothing in a batch read, which reads the "
                                  "snapshot: for changes use spark.readStream.format('mysql_cdc') or the SQL "
                                  "function mysql_cdc_binlog(...), or drop the option(s)")
            return MysqlCdcReader(profile, opts, self._parallelism or os.cpu_count() or 1)

        def streamReader(self, schema: StructType) -> DataSourceStreamReader:
            profile, opts = self._opts()
            check_stream_secret(profile, opts)
            return stream_reader(profile, opts, self._parallelism or os.cpu_count() or 1)

    return MysqlCdcDataSource
