"""Chunk reads on the executors, shared by every Spark surface: the chunks spread over partitions, each read
between its watermarks (:mod:`udtf.snapshot.reader`), its rows handed on, then its watermarks recorded
(docs/DESIGN.md, contract C5: a chunk is recorded only after its rows were handed on)."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import InputPartition

from mysql_cdc.chunks import Chunk, ChunkRecord, decode_key, encode_key
from mysql_cdc.connect import ServerFacts
from mysql_cdc.errors import StateError
from mysql_cdc.ids import TableId
from mysql_cdc.offsets import BinlogOffset
from mysql_cdc.options import CdcOptions
from mysql_cdc.profiles import ConnectionProfile
from mysql_cdc.retry import keep_trying
from mysql_cdc.schema import TableSchema
from mysql_cdc.state.store import StateStore
from mysql_cdc.udtf.snapshot.reader import ChunkRead, SnapshotReader
from mysql_cdc.udtf.spark.chunk_reports import ReportTo, recorded_highs, report
from mysql_cdc.udtf.spark.output import Output


def chunk_from_row(row: Any) -> Chunk:
    """A chunk-table row as a chunk (a row without ``null_keys``, from before that column, is a key range; the
    reader marks ranges of a nullable key from the table's schema)."""
    fields = row.asDict() if hasattr(row, "asDict") else dict(row)
    return Chunk(TableId(fields["database"], fields["table_name"]), int(fields["chunk_index"]),
                 tuple(fields["key_columns"]), decode_key(fields["chunk_start"]), decode_key(fields["chunk_end"]),
                 bool(fields.get("null_keys")), bool(fields.get("null_keys")))


def check_recorded(opts: CdcOptions, chunks: tuple[Chunk, ...] | list[Chunk]) -> dict[str, BinlogOffset]:
    """Refuse, before any row is read, a chunk whose index ``opts.state_dir`` has recorded with other bounds:
    it belongs to another chunk plan (statistics moved the split between two runs), and since the first record
    of an index wins, the binlog phase would apply that plan's watermark to these keys (changes lost or
    doubled). Returns the high watermark recorded for each chunk read before (by chunk id)."""
    if not opts.state_dir:
        return {}
    store = StateStore(opts.state_dir)
    recorded: dict[str, BinlogOffset] = {}
    for c in chunks:
        rec = store.chunk_record(c.table, c.index)
        if rec is not None and (tuple(rec.key_columns), rec.start, rec.end, rec.nulls) != (
                tuple(c.key_columns), encode_key(c.start), encode_key(c.end), c.nulls):
            raise StateError(f"state_dir {opts.state_dir!r} holds chunk {c.id!r} of another chunk plan: read the "
                             "chunks planned there (the data source and streams reuse the recorded plan), or give "
                             "a new state_dir")
        if rec is not None:
            recorded[c.id] = rec.high
    return recorded


def record(opts: CdcOptions, read: ChunkRead, report_to: ReportTo | None = None) -> None:
    """Record a chunk read: handed back to the driver (a stream's, ``report_to``), else written into the state
    dir from here (the batch surfaces: their state dir must be on storage every executor reaches)."""
    rec = ChunkRecord.of(read.chunk, read.low, read.high, read.rows)
    if report_to is not None:
        report(report_to, rec)
    elif opts.state_dir:
        StateStore(opts.state_dir).record_chunk(rec)


@dataclass(frozen=True)
class ChunkPartition(InputPartition):
    """One Spark partition: one chunk, or several read one after another (each exact at its own watermark).

    A stream's partitions carry all their reads need from the state dir, which may be on the driver's disk
    alone: the tables' schemas, and the driver that answers which chunks are recorded and takes their records
    (``report_to``: :mod:`.chunk_reports`; the driver checked the plan: :func:`check_recorded`)."""

    chunks: tuple[Chunk, ...]
    schemas: tuple[TableSchema, ...] = ()
    report_to: ReportTo | None = None


def spread_chunks(chunks: tuple[Chunk, ...] | list[Chunk], requested: int, parallelism: int,
                  **carried: Any) -> list[ChunkPartition]:
    """The chunks dealt round-robin into ``requested`` Spark partitions, or with ``requested`` 0 into as many as
    Spark runs tasks at once (``parallelism``); never more partitions than chunks, every chunk in exactly one,
    in plan order within each (``carried``: the other fields of every partition). A Spark task costs about
    35 ms of its own (measured, bench/results), so one task per chunk made reads of many small chunks several
    times slower.

    >>> from mysql_cdc.chunks import chunks_from_bounds
    >>> from mysql_cdc.ids import TableId
    >>> cs = chunks_from_bounds(TableId("db", "t"), ("id",), [(10,), (20,), (30,), (40,)])
    >>> [[c.index for c in p.chunks] for p in spread_chunks(cs, 0, 2)]
    [[0, 2, 4], [1, 3]]
    >>> [[c.index for c in p.chunks] for p in spread_chunks(cs[:2], 8, 4)]
    [[0], [1]]
    """
    n = min(requested or max(1, parallelism), len(chunks))
    return [ChunkPartition(tuple(chunks[i::n]), **carried) for i in range(n)]


def read_chunks(readers: Callable[[TableId], SnapshotReader], chunks: tuple[Chunk, ...], opts: CdcOptions,
                output: Output, failed: Callable[[Chunk, BaseException], ChunkRead] | None = None,
                report_to: ReportTo | None = None) -> Iterator[pa.RecordBatch]:
    """Read chunks one after another (of one table or several: ``readers`` gives each table's reader), each
    exact at its own watermark; record each after its rows were handed on (C5). The next chunk is
    read in a thread while this one's batches go to Spark (the drivers release the GIL while they wait on the
    server), so at most two chunks are held at once. ``failed`` gives the read of a chunk whose read raised
    (or raises again): a stream that follows schema changes records a chunk its table's change broke, since
    the table is snapshotted again. ``report_to``: a stream's driver, which knows the recorded chunks and
    records these (:class:`ChunkPartition`); else the state dir is read and written from here."""
    recorded = recorded_highs(report_to, chunks) if report_to is not None else check_recorded(opts, chunks)
    pool = ThreadPoolExecutor(1, thread_name_prefix="mysql-cdc-prefetch")

    def read_now(chunk: Chunk) -> ChunkRead:
        # a chunk with a size bound is held whole, so that a lost server fails its read before any of its rows
        # went on (and the read is tried again); one without (a table without any key, the rows whose key has
        # a NULL) is streamed
        reader = readers(chunk.table)
        if _unbounded(reader, chunk):
            return reader.read(chunk, recorded.get(chunk.id))
        return _read_whole(reader, chunk, recorded.get(chunk.id))

    def attempt(ahead: Future[ChunkRead] | None, chunk: Chunk) -> ChunkRead:
        tries = [ahead.result] if ahead is not None else []

        def get() -> ChunkRead:
            return tries.pop()() if tries else read_now(chunk)

        try:
            return keep_trying(get, opts.reconnect_timeout, f"reading chunk {chunk.id}")
        except Exception as e:
            if failed is None:
                raise
            return failed(chunk, e)

    try:
        pending: Future[ChunkRead] | None = None
        for i, chunk in enumerate(chunks):
            # the next chunk is read ahead, whole, while this one's rows go to Spark
            read = attempt(pending, chunk)
            nxt = chunks[i + 1] if i + 1 < len(chunks) else None
            pending = None
            if nxt is not None and not _unbounded(readers(nxt.table), nxt):
                pending = pool.submit(_read_whole, readers(nxt.table), nxt, recorded.get(nxt.id))
            yield from _handed_on(read, opts, output, failed, report_to)
    finally:
        # a consumer that stops early (a LIMIT, an error) does not wait for the chunk read ahead: the thread
        # finishes it, closes its connection and drops it (nothing is recorded for it)
        pool.shutdown(wait=False)


def _unbounded(reader: SnapshotReader, chunk: Chunk) -> bool:
    """A chunk whose size no split bounds: every row of a table without a key, or the NULL keys' chunk."""
    return not reader.schema.chunk_key or chunk.nulls


def _read_whole(reader: SnapshotReader, chunk: Chunk, as_of: BinlogOffset | None) -> ChunkRead:
    """A chunk read to its end (a streamed chunk is collected, and its connection closed)."""
    read = reader.read(chunk, as_of)
    read.batches = iter(list(read.batches))
    return read


def _handed_on(read: ChunkRead, opts: CdcOptions, output: Output,
               failed: Callable[[Chunk, BaseException], ChunkRead] | None = None,
               report_to: ReportTo | None = None) -> Iterator[pa.RecordBatch]:
    try:
        for batch in read.batches:
            yield output.chunk_batch(read, batch)
    except Exception as e:  # a streamed chunk failing part way (see read_chunks)
        if failed is None:
            raise
        read = failed(read.chunk, e)
    record(opts, read, report_to)


class Readers:
    """One snapshot reader per table, made when a chunk of the table is first read (a callable for
    :func:`read_chunks`)."""

    def __init__(self, profile: ConnectionProfile, schemas: Mapping[TableId, TableSchema], facts: ServerFacts,
                 opts: CdcOptions) -> None:
        self.profile, self.schemas, self.facts, self.opts = profile, schemas, facts, opts
        self._made: dict[TableId, SnapshotReader] = {}

    def __call__(self, table: TableId) -> SnapshotReader:
        if table not in self._made:
            self._made[table] = SnapshotReader(self.profile, self.schemas[table], self.facts, self.opts)
        return self._made[table]
