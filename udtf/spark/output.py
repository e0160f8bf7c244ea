"""What the Spark surfaces share: the output schema and its metadata columns, chunk rows, the Arrow hand-off
of chunks and changes, one table's binlog phase, and recording a finished chunk. Each surface has its own thin
file over this: :mod:`.sql_functions` (the SQL table functions), :mod:`.batch_source` (``spark.read``) and
:mod:`.stream_reader` (``spark.readStream``)."""

from __future__ import annotations

import datetime as dt
import functools
import json
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import InputPartition
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

from mysql_cdc.chunks import CHUNK_COLUMNS, Chunk, ChunkRecord, decode_key, encode_key
from mysql_cdc.connect import ServerFacts, connect
from mysql_cdc.errors import ConfigError, StateError, TableError
from mysql_cdc.ids import TableId
from mysql_cdc.offsets import SNAPSHOT_SEQUENCE, BinlogOffset, change_sequence
from mysql_cdc.options import OPTIONS, CdcOptions, ConnectionProfile
from mysql_cdc.planner.plan import describe_table, describe_tables
from mysql_cdc.rowjson import encode_rows
from mysql_cdc.rows import CHANGE_TYPES, META_COLUMNS, META_NULLABLE, RESET_OP, VALUES_COLUMN
from mysql_cdc.schema import TableSchema
from mysql_cdc.state.store import StateStore, pin_capture
from mysql_cdc.types import spark_type
from mysql_cdc.udtf.binlog.phase import (
    BinlogPhase,
    Change,
    ReadFrom,
    read_from,
    recorded_rules,
)
from mysql_cdc.udtf.convert import table_arrow_schema
from mysql_cdc.udtf.snapshot.reader import ChunkRead, SnapshotReader

CHUNK_TABLE_DDL = ", ".join(f"{name} {kind}" for name, kind in CHUNK_COLUMNS)
_META_ARROW = {"STRING": pa.string(), "BIGINT": pa.int64(), "INT": pa.int32(), "TIMESTAMP": pa.timestamp("us", "UTC")}
# Options a SQL call may pass: connections come from a profile (a password never comes through SQL text).
SQL_OPTION_KEYS = tuple(o.key for o in OPTIONS
                        if o.key not in ("host", "port", "user", "password", "ssl_mode", "ssl_ca", "partitions"))


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


def meta_columns(opts: CdcOptions) -> tuple[tuple[str, str], ...]:
    """The metadata columns an output carries: all of them, or none for a snapshot read with
    ``metadata_columns`` false (Spark copies their strings into every row: measured, they double its cost on
    a narrow table; see bench/handoff.py)."""
    return META_COLUMNS if opts.metadata_columns else ()


def changes_need_metadata(opts: CdcOptions, surface: str) -> None:
    """Change rows are useless without their op and position: ``metadata_columns`` false is refused."""
    if not opts.metadata_columns:
        raise ConfigError(f"metadata_columns false is for snapshot reads; {surface} returns change rows, which need "
                          "__op and their binlog position: drop the option")


def output_schema(schema: TableSchema, opts: CdcOptions) -> StructType:
    """The snapshot output: the table's columns typed for Spark, then the metadata columns."""
    names = {c.name for c in schema.columns}
    clash = [m for m, _ in meta_columns(opts) if m in names]
    if clash:
        raise TableError(f"table {str(schema.table)!r} has columns named like the metadata columns {clash!r}; "
                         "rename them or read through a view")
    fields = [StructField(c.name, spark_data_type(spark_type(c, opts.tinyint1_as_boolean)), c.nullable)
              for c in schema.columns]
    fields += [StructField(m, spark_data_type(t), m in META_NULLABLE) for m, t in meta_columns(opts)]
    return StructType(fields)


def chunk_from_row(row: Any) -> Chunk:
    """A chunk-table row as a chunk (a row without ``null_keys``, from before that column, is a key range; the
    reader marks ranges of a nullable key from the table's schema)."""
    fields = row.asDict() if hasattr(row, "asDict") else dict(row)
    return Chunk(TableId(fields["database"], fields["table_name"]), int(fields["chunk_index"]),
                 tuple(fields["key_columns"]), decode_key(fields["chunk_start"]), decode_key(fields["chunk_end"]),
                 bool(fields.get("null_keys")), bool(fields.get("null_keys")))


def position_text(read: ChunkRead) -> str:
    return json.dumps(read.high.to_dict(), sort_keys=True, separators=(",", ":"))


def meta_values(read: ChunkRead) -> tuple[Any, ...]:
    """The metadata columns' values for every row of a chunk (see :data:`META_COLUMNS`)."""
    c = read.chunk
    return ("r", c.table.database, c.table.table, c.id, position_text(read), read.high.file, read.high.pos, 0,
            None, "insert", SNAPSHOT_SEQUENCE, None)


def change_meta_columns(changes: Sequence[Change]) -> list[list[Any]]:
    """The metadata columns' values of change rows, column by column (:data:`META_COLUMNS`): made per column,
    the strings and times a transaction's rows share once (a change row's hot path).

    >>> from mysql_cdc.udtf.binlog.phase import Change
    >>> ch = Change(TableId("d", "t"), "+U", (1,), "binlog.000002", 900, 3, "0-1-7", 1700000000, 8589935492)
    >>> [col[0] for col in change_meta_columns([ch])][:9]
    ['+U', 'd', 't', None, '{"file":"binlog.000002","pos":900,"gtid":"0-1-7"}', 'binlog.000002', 900, 3, '0-1-7']
    >>> [col[0] for col in change_meta_columns([ch])][9:]
    ['update_postimage', 8589935492, datetime.datetime(2023, 11, 14, 22, 13, 20, tzinfo=datetime.timezone.utc)]
    """
    files = {f: json.dumps(f) for f in {c.file for c in changes}}
    gtids = {g: json.dumps(g) for g in {c.gtid for c in changes} if g}
    times = {t: dt.datetime.fromtimestamp(t, dt.timezone.utc) for t in {c.timestamp for c in changes}}
    return [[c.op for c in changes], [c.table.database for c in changes], [c.table.table for c in changes],
            [None] * len(changes),
            [f'{{"file":{files[c.file]},"pos":{c.pos},"gtid":{gtids[c.gtid]}}}' if c.gtid else
             f'{{"file":{files[c.file]},"pos":{c.pos}}}' for c in changes],
            [c.file for c in changes], [c.pos for c in changes], [c.row for c in changes],
            [c.gtid for c in changes], [CHANGE_TYPES[c.op] for c in changes], [c.seq for c in changes],
            [times[c.timestamp] for c in changes]]


def change_meta(ch: Change) -> tuple[Any, ...]:
    """The metadata columns' values of a change row."""
    return tuple(col[0] for col in change_meta_columns([ch]))


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


def record(opts: CdcOptions, read: ChunkRead) -> None:
    if opts.state_dir:
        StateStore(opts.state_dir).record_chunk(ChunkRecord.of(read.chunk, read.low, read.high, read.rows))


@dataclass(frozen=True)
class ChunkPartition(InputPartition):
    """One Spark partition: one chunk, or several read one after another (each exact at its own watermark)."""

    chunks: tuple[Chunk, ...]


def spread_chunks(chunks: tuple[Chunk, ...] | list[Chunk], requested: int, parallelism: int
                  ) -> list[ChunkPartition]:
    """The chunks dealt round-robin into ``requested`` Spark partitions, or with ``requested`` 0 into as many as
    Spark runs tasks at once (``parallelism``); never more partitions than chunks, every chunk in exactly one,
    in plan order within each. A Spark task costs about 35 ms of its own (measured, bench/results), so one task
    per chunk made reads of many small chunks several times slower.

    >>> from mysql_cdc.chunks import chunks_from_bounds
    >>> from mysql_cdc.ids import TableId
    >>> cs = chunks_from_bounds(TableId("db", "t"), ("id",), [(10,), (20,), (30,), (40,)])
    >>> [[c.index for c in p.chunks] for p in spread_chunks(cs, 0, 2)]
    [[0, 2, 4], [1, 3]]
    >>> [[c.index for c in p.chunks] for p in spread_chunks(cs[:2], 8, 4)]
    [[0], [1]]
    """
    n = min(requested or max(1, parallelism), len(chunks))
    return [ChunkPartition(tuple(chunks[i::n])) for i in range(n)]


def with_metadata(read: ChunkRead, batch: pa.RecordBatch, out_schema: pa.Schema) -> pa.RecordBatch:
    """The chunk's rows plus the metadata columns (constant per chunk), if ``out_schema`` has them."""
    if len(out_schema) == batch.num_columns:
        return pa.RecordBatch.from_arrays(batch.columns, schema=out_schema)
    n = batch.num_rows
    meta = [pa.repeat(pa.scalar(v, _META_ARROW[t]), n) for v, (_, t) in zip(meta_values(read), META_COLUMNS)]
    return pa.RecordBatch.from_arrays([*batch.columns, *meta], schema=out_schema)


def arrow_schema_of(schema: TableSchema, opts: CdcOptions) -> pa.Schema:
    fields = list(table_arrow_schema(schema.columns, opts.tinyint1_as_boolean))
    fields += [pa.field(m, _META_ARROW[t], m in META_NULLABLE) for m, t in meta_columns(opts)]
    return pa.schema(fields)


def _typed(rows: list[tuple[Any, ...]], schema: pa.Schema) -> pa.RecordBatch:
    """Rows of canonical values as a record batch of ``schema`` (the one conversion every change row takes)."""
    return _arrays([list(c) for c in zip(*rows)] if rows else [[] for _ in schema], schema)


def _arrays(columns: list[Any], schema: pa.Schema) -> pa.RecordBatch:
    """A record batch of ``schema`` from one list (or Arrow array) per column."""
    return pa.RecordBatch.from_arrays([col if isinstance(col, pa.Array) else pa.array(col, type=schema.field(i).type)
                                       for i, col in enumerate(columns)], schema=schema)


def _meta_arrays(changes: Sequence[Change]) -> list[Any]:
    """:func:`change_meta_columns` with the columns that are cheaper so made as Arrow arrays: a value the whole
    batch shares repeated, the commit time cast from its seconds."""
    cols: list[Any] = change_meta_columns(changes)
    n = len(changes)
    for i in (1, 2, 5, 8):  # __database, __table, __file, __gtid: often one value in a batch
        first = cols[i][0]
        if all(v == first for v in cols[i]):
            cols[i] = pa.repeat(pa.scalar(first, pa.string()), n) if first is not None else pa.nulls(n, pa.string())
    cols[3] = pa.nulls(n, pa.string())
    cols[11] = pa.array([c.timestamp for c in changes], pa.int64()).cast(pa.timestamp("s", "UTC")).cast(
        _META_ARROW["TIMESTAMP"])
    return cols


def changes_to_batches(changes: Iterator[Change], schema: TableSchema, opts: CdcOptions, out_schema: pa.Schema,
                       size: int) -> Iterator[pa.RecordBatch]:
    """Change rows as record batches of the output schema, ``size`` rows at a time."""
    width = len(schema.columns)

    def batch(buf: list[Change]) -> pa.RecordBatch:
        values = [list(c) for c in zip(*(ch.values for ch in buf))] or [[] for _ in range(width)]
        return _arrays([*values, *_meta_arrays(buf)], out_schema)

    buf: list[Change] = []
    for ch in changes:
        buf.append(ch)
        if len(buf) >= size:
            yield batch(buf)
            buf = []
    if buf:
        yield batch(buf)


# ---- many tables in one output: the envelope ----



def envelope_schema() -> StructType:
    """The output of a read of many tables (option ``tables``): each row's values as one JSON object in
    ``__values`` (:mod:`mysql_cdc.rowjson`), then the metadata columns, which say the row's table. A stream has
    one schema while its tables have many; :func:`mysql_cdc.split` types each table's rows again."""
    return StructType([StructField(VALUES_COLUMN, StringType(), False)] +
                      [StructField(m, spark_data_type(t), m in META_NULLABLE) for m, t in META_COLUMNS])


ENVELOPE_ARROW = pa.schema([pa.field(VALUES_COLUMN, pa.string(), False)] +
                           [pa.field(m, _META_ARROW[t], m in META_NULLABLE) for m, t in META_COLUMNS])


class Output:
    """How rows leave for Spark: one table's own columns, typed (option ``table``), or many tables' rows in
    the envelope (option ``tables``, :func:`envelope_schema`). Both start from the same typed Arrow values."""

    def __init__(self, schemas: Mapping[TableId, TableSchema], opts: CdcOptions) -> None:
        self.schemas = dict(schemas)
        self.opts = opts
        self.envelope = opts.tables is not None
        if self.envelope and not opts.metadata_columns:
            raise ConfigError("metadata_columns false is for reads of one table (option table): a read of tables "
                              "says each row's table in __database and __table; drop the option")
        self._arrow = {t: arrow_schema_of(s, opts) for t, s in self.schemas.items()}
        self._values = {t: table_arrow_schema(s.columns, opts.tinyint1_as_boolean) for t, s in self.schemas.items()}

    def spark_schema(self) -> StructType:
        if self.envelope:
            return envelope_schema()
        (schema,) = self.schemas.values()
        return output_schema(schema, self.opts)

    def chunk_batch(self, read: ChunkRead, batch: pa.RecordBatch) -> pa.RecordBatch:
        """A batch of a chunk's rows, as the output has them."""
        if not self.envelope:
            return with_metadata(read, batch, self._arrow[read.chunk.table])
        texts = pa.array(encode_rows(batch), pa.string())
        n = batch.num_rows
        meta = [pa.repeat(pa.scalar(v, _META_ARROW[t]), n) for v, (_, t) in zip(meta_values(read), META_COLUMNS)]
        return pa.RecordBatch.from_arrays([texts, *meta], schema=ENVELOPE_ARROW)

    def change_batches(self, changes: Iterator[Change], size: int) -> Iterator[pa.RecordBatch]:
        """Change rows, ``size`` at a time, as the output has them (in binlog order, across tables)."""
        if not self.envelope:
            (table,) = self.schemas
            yield from changes_to_batches(changes, self.schemas[table], self.opts, self._arrow[table], size)
            return
        buf: list[Change] = []
        for ch in changes:
            buf.append(ch)
            if len(buf) >= size:
                yield self._envelope(buf)
                buf = []
        if buf:
            yield self._envelope(buf)

    def _envelope(self, changes: list[Change]) -> pa.RecordBatch:
        by_table: dict[TableId, list[int]] = {}
        for i, ch in enumerate(changes):
            by_table.setdefault(ch.table, []).append(i)
        texts: list[str] = [""] * len(changes)
        for t, idx in by_table.items():  # typed as a single-table read types them, then written as JSON
            for i, text in zip(idx, encode_rows(_typed([changes[i].values for i in idx], self._values[t]))):
                texts[i] = text
        return _arrays([texts, *_meta_arrays(changes)], ENVELOPE_ARROW)


def reset_batch(tables: list[TableId], at: Mapping[str, Any]) -> pa.RecordBatch:
    """The ``T`` rows (:data:`RESET_OP`) of tables that left a capture of many tables at binlog point ``at``."""
    file, pos = str(at["file"]), int(at["pos"])
    where = json.dumps({"file": file, "pos": pos}, separators=(",", ":"))
    rows = [("{}", RESET_OP, t.database, t.table, None, where, file, pos, i, None, CHANGE_TYPES[RESET_OP],
             change_sequence(file, pos, i), None) for i, t in enumerate(tables)]
    return _typed(rows, ENVELOPE_ARROW)


def read_chunks(readers: Callable[[TableId], SnapshotReader], chunks: tuple[Chunk, ...], opts: CdcOptions,
                output: Output, failed: Callable[[Chunk, BaseException], ChunkRead] | None = None
                ) -> Iterator[pa.RecordBatch]:
    """Read chunks one after another (of one table or several: ``readers`` gives each table's reader), each
    exact at its own watermark; record each after its rows were handed on (contract C5). The next chunk is
    read in a thread while this one's batches go to Spark (the drivers release the GIL while they wait on the
    server), so at most two chunks are held at once. ``failed`` gives the read of a chunk whose read raised
    (or raises again): a stream that follows schema changes records a chunk its table's change broke, since
    the table is snapshotted again."""
    recorded = check_recorded(opts, chunks)
    pool = ThreadPoolExecutor(1, thread_name_prefix="mysql-cdc-prefetch")

    def attempt(get: Callable[[], ChunkRead], chunk: Chunk) -> ChunkRead:
        try:
            return get()
        except Exception as e:
            if failed is None:
                raise
            return failed(chunk, e)

    try:
        pending = None
        for i, chunk in enumerate(chunks):
            # a chunk read ahead is held whole; a chunk without a size bound (a table without any key, the rows
            # whose key has a NULL) is streamed when its turn comes instead
            read = attempt(pending.result if pending is not None else
                           functools.partial(_read_one, readers, chunk, recorded.get(chunk.id)), chunk)
            nxt = chunks[i + 1] if i + 1 < len(chunks) else None
            pending = None
            if nxt is not None and not _unbounded(readers(nxt.table), nxt):
                pending = pool.submit(_read_whole, readers(nxt.table), nxt, recorded.get(nxt.id))
            yield from _handed_on(read, opts, output, failed)
    finally:
        # a consumer that stops early (a LIMIT, an error) does not wait for the chunk read ahead: the thread
        # finishes it, closes its connection and drops it (nothing is recorded for it)
        pool.shutdown(wait=False)


def _read_one(readers: Callable[[TableId], SnapshotReader], chunk: Chunk, as_of: BinlogOffset | None) -> ChunkRead:
    return readers(chunk.table).read(chunk, as_of)


def _unbounded(reader: SnapshotReader, chunk: Chunk) -> bool:
    """A chunk whose size no split bounds: every row of a table without a key, or the NULL keys' chunk."""
    return not reader.schema.chunk_key or chunk.nulls


def _read_whole(reader: SnapshotReader, chunk: Chunk, as_of: BinlogOffset | None) -> ChunkRead:
    """A chunk read to its end (a streamed chunk is collected, and its connection closed)."""
    read = reader.read(chunk, as_of)
    read.batches = iter(list(read.batches))
    return read


def _handed_on(read: ChunkRead, opts: CdcOptions, output: Output,
               failed: Callable[[Chunk, BaseException], ChunkRead] | None = None) -> Iterator[pa.RecordBatch]:
    try:
        for batch in read.batches:
            yield output.chunk_batch(read, batch)
    except Exception as e:  # a streamed chunk failing part way (see read_chunks)
        if failed is None:
            raise
        read = failed(read.chunk, e)
    record(opts, read)


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


def binlog_phase(profile: ConnectionProfile, facts: ServerFacts, schemas: Mapping[TableId, TableSchema],
                 opts: CdcOptions) -> tuple[BinlogPhase, ReadFrom]:
    """One reader of the tables' changes (one binlog connection for all of them) and where it starts, under
    ``opts.startup``."""
    rules = None
    if opts.startup == "initial":
        if not opts.state_dir:
            raise ConfigError("startup 'initial' reads after the recorded snapshot: set state_dir to where the "
                              "snapshot recorded its chunks, or choose startup latest/earliest/offset/timestamp")
        rules = recorded_rules(StateStore(opts.state_dir), schemas, lambda: connect(profile))
    start = read_from(profile, facts, opts, rules)
    return BinlogPhase(profile, facts, opts, schemas, {t: (rules or {}).get(t) for t in schemas}), start


def planned_table(profile: ConnectionProfile, opts: CdcOptions, *, snapshot: bool = False
                  ) -> tuple[ServerFacts, TableSchema]:
    """The server's facts and the table's schema as this capture planned it: with a ``state_dir``, the schema
    recorded there when the capture first ran (recorded now if there is none), so that a stream restarted
    after a DDL still decodes the changes before the DDL with the columns they were written with, delivers
    them, and stops at the DDL with :class:`SchemaChangedError`; without one, the current schema.

    A ``snapshot`` read selects the table as it is now: a recorded schema that differs from the current one is
    an error (its rows would be read with the wrong columns), naming the fix."""
    assert opts.table is not None
    facts, current = describe_table(profile, opts, opts.table)
    return facts, pinned_schema(opts, current, snapshot=snapshot)


def planned_tables(profile: ConnectionProfile, opts: CdcOptions, *, snapshot: bool = False
                   ) -> tuple[ServerFacts, dict[TableId, TableSchema]]:
    """The server's facts and the captured tables' schemas: the ``table`` option's one table
    (:func:`planned_table`), or the tables the ``tables`` patterns match less ``exclude``, each schema pinned in
    ``opts.state_dir`` as :func:`pinned_schema` pins one."""
    if not opts.tables:
        facts, schema = planned_table(profile, opts, snapshot=snapshot)
        return facts, {schema.table: schema}
    facts, current = describe_tables(profile, opts)
    return facts, {s.table: pinned_schema(opts, s, snapshot=snapshot) for s in current}


# options that shape a capture's output types: kept in its state_dir, so a restart cannot change them midway and
# mysql_cdc.split types the rows as they were read
def pinned_schema(opts: CdcOptions, current: TableSchema, *, snapshot: bool = False) -> TableSchema:
    """The schema recorded in ``opts.state_dir`` (``current`` is recorded if none is), or ``current`` without a
    state_dir; with ``snapshot``, a recorded schema other than ``current`` is an error (see planned_table)."""
    if not opts.state_dir:
        return current
    pin_capture(opts)
    pinned = StateStore(opts.state_dir).record_schema(current)
    if snapshot and pinned != current:
        raise StateError(f"state_dir {opts.state_dir!r} was planned with another schema of {str(current.table)!r} "
                         f"(columns {list(pinned.column_names)!r}, chunk key {list(pinned.chunk_key)!r}; now "
                         f"{list(current.column_names)!r}, {list(current.chunk_key)!r}): a snapshot reads the table "
                         "as it is now, so give it a new state_dir")
    return pinned
