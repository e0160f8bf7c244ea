"""The column types of a mirror table in each lakehouse format: what a Delta or an Iceberg table can hold of every
value a capture reads, exactly.

Pure rules (pyarrow, type names). A capture types each column as the README's type table says (Spark SQL types, Arrow
in between, :mod:`mysql_cdc.types`); a format that lacks one of those types gets the narrowest type of its own
that holds every value, and the value is carried over losslessly:

- TIME (Spark ``INTERVAL DAY TO SECOND``, Arrow ``duration[us]``): neither Delta nor Iceberg stores an interval
  (Iceberg's ``time`` is a time of day, 0 to 24 hours; MySQL's TIME is signed and reaches 838:59:59), so both get
  ``BIGINT`` microseconds, signed (as the delta-rs mirror has always done).
- ``TINYINT`` and ``SMALLINT``: Iceberg's smallest integer is ``int``; Spark's Iceberg writer widens them.
- Every other type is the same in both formats: DECIMAL(20,0) for BIGINT UNSIGNED, STRING for DECIMAL over 38
  digits, BINARY for BIT(n>1), geometry (WKB) and other character sets, STRING for JSON, ``TIMESTAMP_NTZ``
  (Iceberg ``timestamp``) for DATETIME and ``TIMESTAMP`` (Iceberg ``timestamptz``) for TIMESTAMP.

Keys: a mirror's primary key columns are NOT NULL in both formats, and an Iceberg table's identifier fields are
the primary key, except where Iceberg refuses one (FLOAT or DOUBLE columns cannot be identifier fields): then
the table has none, and the sink still merges by the key (:func:`identifier_fields`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import pyarrow as pa

from mysql_cdc.types import BLOB_TYPES, GEO_TYPES

Format = Literal["delta", "iceberg"]
FORMATS: tuple[Format, ...] = ("delta", "iceberg")

_WIDENED: dict[Format, dict[str, str]] = {
    "delta": {"INTERVAL DAY TO SECOND": "BIGINT"},
    "iceberg": {"INTERVAL DAY TO SECOND": "BIGINT", "TINYINT": "INT", "SMALLINT": "INT"},
}
_NOTES = {"INTERVAL DAY TO SECOND": "microseconds, signed"}


def lake_type(spark: str, fmt: Format) -> str:
    """The column type (Spark SQL text) a mirror table in format ``fmt`` gets for a column the capture types
    ``spark``.

    >>> [lake_type(t, "delta") for t in ("TINYINT", "INTERVAL DAY TO SECOND", "DECIMAL(20,0)", "TIMESTAMP_NTZ")]
    ['TINYINT', 'BIGINT', 'DECIMAL(20,0)', 'TIMESTAMP_NTZ']
    >>> [lake_type(t, "iceberg") for t in ("TINYINT", "SMALLINT", "INTERVAL DAY TO SECOND", "STRING")]
    ['INT', 'INT', 'BIGINT', 'STRING']
    """
    if fmt not in _WIDENED:
        raise ValueError(f"unknown format {fmt!r}; expected one of {', '.join(FORMATS)}")
    return _WIDENED[fmt].get(spark, spark)


def lake_type_note(spark: str, fmt: Format) -> str:
    """How a value of ``spark`` is kept in ``fmt`` when its type changes (the README's type table), else ``""``.

    >>> lake_type_note("INTERVAL DAY TO SECOND", "delta"), lake_type_note("INT", "iceberg")
    ('BIGINT: microseconds, signed', '')
    """
    target = lake_type(spark, fmt)
    if target == spark:
        return ""
    return f"{target}: {_NOTES[spark]}" if spark in _NOTES else target


def lake_arrow_type(t: pa.DataType, fmt: Format) -> pa.DataType:
    """The Arrow type a value of Arrow type ``t`` (as the capture reads it) is written with into ``fmt``.

    >>> lake_arrow_type(pa.duration("us"), "delta"), lake_arrow_type(pa.int8(), "iceberg")
    (DataType(int64), DataType(int32))
    >>> lake_arrow_type(pa.int16(), "delta"), lake_arrow_type(pa.decimal128(20, 0), "iceberg")
    (DataType(int16), Decimal128Type(decimal128(20, 0)))
    """
    if pa.types.is_duration(t):
        return pa.int64()
    if fmt == "iceberg" and (pa.types.is_int8(t) or pa.types.is_int16(t)):
        return pa.int32()
    return t


def to_lake(batch: pa.RecordBatch, fmt: Format) -> pa.RecordBatch:
    """``batch`` with every column in its :func:`lake_arrow_type`: durations as their count of microseconds,
    small integers widened. Lossless: :func:`from_lake` gives ``batch`` back.

    >>> b = pa.record_batch({"t": pa.array([-3_020_399_000_000, None], pa.duration("us")),
    ...                      "k": pa.array([-128, 127], pa.int8())})
    >>> to_lake(b, "iceberg").to_pydict()
    {'t': [-3020399000000, None], 'k': [-128, 127]}
    """
    fields = [pa.field(f.name, lake_arrow_type(f.type, fmt), f.nullable, f.metadata) for f in batch.schema]
    if all(f.type == g.type for f, g in zip(fields, batch.schema)):
        return batch
    arrays = [col if col.type == f.type else col.cast(f.type) for col, f in zip(batch.columns, fields)]
    return pa.RecordBatch.from_arrays(arrays, schema=pa.schema(fields, metadata=batch.schema.metadata))


def from_lake(batch: pa.RecordBatch, schema: pa.Schema) -> pa.RecordBatch:
    """A batch read from a mirror table back in the capture's Arrow ``schema`` (the inverse of :func:`to_lake`;
    what a verification compares).

    >>> s = pa.schema([pa.field("t", pa.duration("us")), pa.field("k", pa.int8())])
    >>> back = from_lake(to_lake(pa.record_batch([pa.array([5], pa.duration("us")), pa.array([1], pa.int8())],
    ...                                          schema=s), "iceberg"), s)
    >>> back.schema == s, back.column(0).to_pylist()
    (True, [datetime.timedelta(microseconds=5)])
    """
    arrays = [batch.column(f.name) for f in schema]
    return pa.RecordBatch.from_arrays([a if a.type == f.type else a.cast(f.type) for a, f in zip(arrays, schema)],
                                      schema=schema)


def identifier_fields(key: Sequence[tuple[str, str]], fmt: Format) -> tuple[str, ...]:
    """An Iceberg table's identifier fields for a primary key of ``(column, Spark type)`` pairs: the key's
    columns, or none where Iceberg refuses one of them (FLOAT and DOUBLE cannot be identifier fields). Delta has
    no such property: always none.

    >>> identifier_fields([("id", "BIGINT"), ("day", "DATE")], "iceberg")
    ('id', 'day')
    >>> identifier_fields([("id", "BIGINT"), ("w", "DOUBLE")], "iceberg"), identifier_fields([("id", "INT")], "delta")
    ((), ())
    """
    if fmt != "iceberg" or any(lake_type(t, fmt) in ("FLOAT", "DOUBLE") for _, t in key):
        return ()
    return tuple(name for name, _ in key)


# the BLOB types (the binary types less the sized ones) and geometry: values up to gigabytes, binary in a lake
LARGE_BINARY_TYPES = frozenset(BLOB_TYPES - {"binary", "varbinary"} | GEO_TYPES)


def unindexed_columns(columns: Sequence[tuple[str, str, pa.DataType]], key: Sequence[str]) -> tuple[str, ...]:
    """The columns of a delta-rs mirror table whose Parquet files get no statistics: those that are not in the
    key and whose MySQL type (``data_type``, lower case) is a BLOB or geometry (binary values up to gigabytes),
    or whose type in the lake (the Arrow type of the type table's) is a DECIMAL of more than 15 digits (BIGINT
    UNSIGNED's DECIMAL(20, 0) too; a DECIMAL over 38 digits is a STRING there, and keeps them).

    Why: the Parquet writer keeps a column chunk's smallest and largest value whole while it writes, so a file of
    one 256 MB value held two more copies of it (delta-rs 1.6, Snappy, measured: 1,104 MB above the data with
    statistics, 592 MB without); a binary column's statistics never reach the Delta log, so no reader loses
    any. And delta-rs writes a DECIMAL column's statistics into the Delta log through a double (values
    1234567890123456.1234 and .1236: min = max = 1234567890123456.0, measured with 1.6.6): a reader that skips
    files by them (Spark, Trino, DuckDB) would skip the file holding ``d = ...1234``. Nothing of ours reads
    them: merges, deletes and verify prune files by the key's statistics (a key keeps them: our range deletes
    take BIGINT UNSIGNED bounds below 2^53 only, ``mysql_cdc.keyrange``). TEXT and JSON keep theirs (truncated
    to 64 bytes), though a 256 MB text costs the writer as much: delta-rs's own pyarrow dataset
    (``to_pyarrow_dataset``, ``to_pyarrow_table(filters=...)``) reads a string column without statistics as if
    every value were NULL, and a filter on it would find no row (its DataFusion ``QueryBuilder`` finds them).

    >>> cols = [("id", "int", pa.int32()), ("doc", "json", pa.string()), ("photo", "longblob", pa.binary()),
    ...         ("name", "varchar", pa.string()), ("price", "decimal", pa.decimal128(10, 2)),
    ...         ("total", "decimal", pa.decimal128(30, 4)), ("n", "bigint", pa.decimal128(20, 0)),
    ...         ("huge", "decimal", pa.string())]  # DECIMAL(65,30)
    >>> unindexed_columns(cols, ["id"])
    ('photo', 'total', 'n')
    >>> unindexed_columns([("k", "blob", pa.binary()), ("u", "bigint", pa.decimal128(20, 0))], ["k", "u"])  # keys
    ()
    """
    keyed = set(key)
    return tuple(name for name, data_type, lake in columns if name not in keyed and (
        data_type in LARGE_BINARY_TYPES or (pa.types.is_decimal(lake) and lake.precision > 15)))


def large_value_settings(columns: Sequence[tuple[str, str]], key: Sequence[str]) -> dict[str, str]:
    """Parquet settings for the Delta writes of a table with BLOB or geometry columns outside its key
    (``columns``: name and MySQL type, lower case): Parquet's writer without dictionaries and column statistics
    (the mirror sets them as the table's properties, which Delta hands to the writer's Hadoop configuration of
    every write of it). Otherwise none.

    Why: parquet-mr copies each binary value into a column's dictionary and, once the dictionary is too large,
    into a plain page again, and keeps the chunk's smallest and largest value as copies for its statistics.
    Measured with Spark's Delta (pyspark 4.2, parquet 1.17) on a 256 MB value: its writes ran out of memory in a
    2-3g driver in ``DictionaryValuesWriter.fallBackAllValuesTo`` and ``BinaryStatistics.updateStats``. Delta's
    data skipping keeps its own statistics in its log (from the rows, not from Parquet's footers). (An update's
    MERGE then ran out of memory copying its source into Spark's block store, ``materializeSource``; Delta refuses
    a MERGE without that copy whose source is a persisted batch: left as it is.)

    >>> for k, v in sorted(large_value_settings([("id", "int"), ("photo", "longblob")], ["id"]).items()):
    ...     print(k, v)
    parquet.column.statistics.enabled false
    parquet.enable.dictionary false
    >>> large_value_settings([("id", "int"), ("doc", "longtext")], ["id"])
    {}
    """
    keyed = set(key)
    if not any(t in LARGE_BINARY_TYPES and n not in keyed for n, t in columns):
        return {}
    return {"parquet.enable.dictionary": "false", "parquet.column.statistics.enabled": "false"}
