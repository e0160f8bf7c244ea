"""Value conversion MySQL -> Spark: the one place that maps column types and converts values.

Pure logic: no pyspark and no driver (pyarrow is used to describe Arrow types). Both the SELECT path (snapshot
reader) and the binlog path (row images) pass through :func:`value_converter`, so the same stored value gives
the same Spark value whichever way it arrives (contract C4).

Type table (MySQL -> Spark), also rendered into the README by ``python -m mysql_cdc.docs``:
"""

from __future__ import annotations

import datetime as dt
import json
import re
import struct
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import pyarrow as pa

from mysql_cdc.errors import UnsupportedTypeError
from planner.schema import ColumnInfo

UTC = dt.timezone.utc
Converter = Callable[[Any], Any]


@dataclass(frozen=True)
class TypeRule:
    mysql: str
    spark: str
    note: str


TYPE_TABLE: tuple[TypeRule, ...] = (
    TypeRule("TINYINT", "TINYINT", "TINYINT(1) too, unless option tinyint1_as_boolean"),
    TypeRule("TINYINT UNSIGNED", "SMALLINT", ""),
    TypeRule("SMALLINT", "SMALLINT", ""),
    TypeRule("SMALLINT UNSIGNED", "INT", ""),
    TypeRule("MEDIUMINT [UNSIGNED]", "INT", ""),
    TypeRule("INT", "INT", ""),
    TypeRule("INT UNSIGNED", "BIGINT", ""),
    TypeRule("BIGINT", "BIGINT", ""),
    TypeRule("BIGINT UNSIGNED", "DECIMAL(20,0)", "exact up to 2^64-1"),
    TypeRule("DECIMAL(p,s), p <= 38", "DECIMAL(p,s)", ""),
    TypeRule("DECIMAL(p,s), p > 38", "STRING", "exact decimal text; Spark's DECIMAL stops at 38 digits"),
    TypeRule("FLOAT", "FLOAT", ""),
    TypeRule("DOUBLE", "DOUBLE", ""),
    TypeRule("BIT(1)", "BOOLEAN", ""),
    TypeRule("BIT(n), n > 1", "BINARY", "big-endian, ceil(n/8) bytes"),
    TypeRule("DATE", "DATE", "zero date -> NULL"),
    TypeRule("DATETIME(p)", "TIMESTAMP_NTZ", "wall-clock value as stored; zero date -> NULL"),
    TypeRule("TIMESTAMP(p)", "TIMESTAMP", "the instant (UTC), independent of the server's time zone; zero -> NULL"),
    TypeRule("TIME(p)", "INTERVAL DAY TO SECOND", "signed, may exceed 24 hours"),
    TypeRule("YEAR", "SMALLINT", ""),
    TypeRule("CHAR, VARCHAR, *TEXT (non-binary charset)", "STRING", ""),
    TypeRule("ENUM, SET", "STRING", "SET as its comma-separated text"),
    TypeRule("BINARY, VARBINARY, *BLOB, binary-charset strings", "BINARY", ""),
    TypeRule("JSON", "STRING", "JSON text"),
    TypeRule("GEOMETRY and spatial types", "BINARY", "MySQL's internal value: 4-byte SRID + WKB"),
)

_INTS = {
    "tinyint": ("TINYINT", "SMALLINT"),
    "smallint": ("SMALLINT", "INT"),
    "mediumint": ("INT", "INT"),
    "int": ("INT", "BIGINT"),
    "integer": ("INT", "BIGINT"),
    "bigint": ("BIGINT", "DECIMAL(20,0)"),
}
_TEXT = {"char", "varchar", "tinytext", "text", "mediumtext", "longtext"}
_BLOB = {"binary", "varbinary", "tinyblob", "blob", "mediumblob", "longblob"}
_GEO = {"geometry", "point", "linestring", "polygon", "multipoint", "multilinestring", "multipolygon",
        "geometrycollection", "geomcollection"}


def _is_tinyint1(col: ColumnInfo) -> bool:
    return col.data_type == "tinyint" and col.column_type.lower().startswith("tinyint(1)") and not col.unsigned


def spark_type(col: ColumnInfo, tinyint1_as_boolean: bool = False) -> str:
    """The Spark SQL type (DDL text) for a MySQL column."""
    t = col.data_type
    if t in _INTS:
        if tinyint1_as_boolean and _is_tinyint1(col):
            return "BOOLEAN"
        return _INTS[t][1 if col.unsigned else 0]
    if t in ("decimal", "numeric"):
        p, s = col.numeric_precision or 10, col.numeric_scale or 0
        return f"DECIMAL({p},{s})" if p <= 38 else "STRING"
    if t == "float":
        return "FLOAT"
    if t in ("double", "real"):
        return "DOUBLE"
    if t == "bit":
        return "BOOLEAN" if (col.numeric_precision or 1) == 1 else "BINARY"
    if t == "date":
        return "DATE"
    if t == "datetime":
        return "TIMESTAMP_NTZ"
    if t == "timestamp":
        return "TIMESTAMP"
    if t == "time":
        return "INTERVAL DAY TO SECOND"
    if t == "year":
        return "SMALLINT"
    if t in _TEXT:
        return "BINARY" if col.charset == "binary" else "STRING"
    if t in ("enum", "set", "json"):
        return "STRING"
    if t in _BLOB or t in _GEO:
        return "BINARY"
    raise UnsupportedTypeError(
        f"column {col.name!r} has type {col.column_type!r}, which has no Spark mapping; "
        "exclude the table or open an issue with the type")


_ARROW: dict[str, pa.DataType] = {
    "TINYINT": pa.int8(), "SMALLINT": pa.int16(), "INT": pa.int32(), "BIGINT": pa.int64(),
    "FLOAT": pa.float32(), "DOUBLE": pa.float64(), "BOOLEAN": pa.bool_(), "STRING": pa.string(),
    "BINARY": pa.binary(), "DATE": pa.date32(), "TIMESTAMP_NTZ": pa.timestamp("us"),
    "TIMESTAMP": pa.timestamp("us", tz="UTC"), "INTERVAL DAY TO SECOND": pa.duration("us"),
}


def arrow_type(spark: str) -> pa.DataType:
    if spark.startswith("DECIMAL("):
        p, s = spark[8:-1].split(",")
        return pa.decimal128(int(p), int(s))
    return _ARROW[spark]


# ---- values ----

def _bit_bytes(nbits: int) -> Converter:
    width = (nbits + 7) // 8

    def conv(v: Any) -> Any:
        if isinstance(v, int):
            return v.to_bytes(width, "big")
        b = bytes(v)
        return b.rjust(width, b"\x00")[-width:]

    return conv


def _bit_bool(v: Any) -> bool:
    return bool(int.from_bytes(v, "big")) if isinstance(v, bytes | bytearray) else bool(v)


def _to_utc(v: Any) -> Any:
    if isinstance(v, dt.datetime):
        return v.replace(tzinfo=UTC) if v.tzinfo is None else v.astimezone(UTC)
    return v


def _text(v: Any) -> Any:
    return v.decode("utf-8", "surrogateescape") if isinstance(v, bytes | bytearray) else v


def _json_text(v: Any) -> Any:
    if isinstance(v, bytes | bytearray):
        return v.decode("utf-8")
    if isinstance(v, str):
        return v
    return json.dumps(v, ensure_ascii=False)


def _decimal_text(v: Any) -> Any:
    """DECIMAL wider than Spark's as the server prints it: plain notation, all scale digits ('0.000', not '0E-3')."""
    return format(v, "f") if isinstance(v, Decimal) else _text(v)


def _date(v: Any) -> Any:
    if isinstance(v, dt.datetime):
        return v.date()
    return v if isinstance(v, dt.date) else None  # zero / invalid dates arrive as None or text


def _datetime(v: Any) -> Any:
    return v if isinstance(v, dt.datetime) else None


def float32(v: Any) -> float:
    """A FLOAT column's value: the nearest 4-byte float (what the column stores), as a Python float.

    >>> float32(1.1)
    1.100000023841858
    """
    return float(struct.unpack("<f", struct.pack("<f", float(v)))[0])


def value_converter(col: ColumnInfo, tinyint1_as_boolean: bool = False) -> Converter | None:
    """A function from a driver value (SELECT or binlog) to the canonical Python value for the column's Spark
    type, or ``None`` when the driver value is already canonical. NULL never reaches the function."""
    st = spark_type(col, tinyint1_as_boolean)
    t = col.data_type
    if st == "BOOLEAN":
        return _bit_bool if t == "bit" else bool
    if t in _INTS:
        return Decimal if st.startswith("DECIMAL") else None
    if t == "float":
        return float32
    if t in ("decimal", "numeric"):
        return _decimal_text if st == "STRING" else None
    if t == "bit":
        return _bit_bytes(col.numeric_precision or 1)
    if t == "date":
        return _date
    if t == "datetime":
        return _datetime
    if t == "timestamp":
        return _to_utc
    if t == "json":
        return _json_text
    if st == "STRING":
        return _text
    return None


def row_converter(columns: tuple[ColumnInfo, ...], tinyint1_as_boolean: bool = False
                  ) -> Callable[[tuple[Any, ...]], tuple[Any, ...]]:
    """Convert a whole row (tuple in column order); values that are already canonical pass untouched."""
    convs = [value_converter(c, tinyint1_as_boolean) for c in columns]
    active = [(i, f) for i, f in enumerate(convs) if f is not None]
    if not active:
        return lambda row: row

    def conv(row: tuple[Any, ...]) -> tuple[Any, ...]:
        out = list(row)
        for i, f in active:
            v = out[i]
            if v is not None:
                out[i] = f(v)
        return tuple(out)

    return conv


# ---- binlog row images (python-mysql-replication) -> driver-like values ----

def _set_members(col: ColumnInfo) -> list[str]:
    body = col.column_type[col.column_type.index("(") + 1 : col.column_type.rindex(")")]
    out, buf, i = [], [], 0
    while i < len(body):
        ch = body[i]
        if ch == "'":
            j = i + 1
            while j < len(body):
                if body[j] == "'" and body[j + 1 : j + 2] == "'":
                    buf.append("'")
                    j += 2
                    continue
                if body[j] == "'":
                    break
                buf.append(body[j])
                j += 1
            out.append("".join(buf))
            buf = []
            i = j + 1
        else:
            i += 1
    return out


def _json_plain(v: Any) -> Any:
    """MySQL's binary JSON as the library decodes it (object keys and strings as bytes) in plain Python."""
    if isinstance(v, dict):
        return {_json_plain(k): _json_plain(x) for k, x in v.items()}
    if isinstance(v, list | tuple):
        return [_json_plain(x) for x in v]
    if isinstance(v, bytes | bytearray):
        return v.decode("utf-8")
    return v


def _binlog_json(v: Any) -> Any:
    """MySQL's binlog carries JSON decoded (never as text): a top-level string is a JSON string."""
    return json.dumps(_json_plain(v), ensure_ascii=False)


def negative_time_fix(v: Any) -> Any:
    """python-mysql-replication decodes a negative TIME with a fraction, -(S + f), as -(S + 1 - f): it negates
    the whole seconds and the fraction separately, but the server stores the fraction borrowed from the next
    second. Undo that (measured on MySQL 9.7 and MariaDB 10.11 for TIME(1..6)).

    >>> import datetime as dt
    >>> negative_time_fix(-dt.timedelta(seconds=3600, microseconds=750000))  # decoded from -01:00:00.25
    datetime.timedelta(days=-1, seconds=82799, microseconds=750000)
    >>> negative_time_fix(-dt.timedelta(hours=1)) == -dt.timedelta(hours=1)  # no fraction: right already
    True
    """
    if isinstance(v, dt.timedelta) and v < dt.timedelta(0):
        whole, frac = divmod(-v // dt.timedelta(microseconds=1), 1_000_000)
        if frac:
            return -dt.timedelta(microseconds=(whole + 1) * 1_000_000 - frac)
    return v


_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)


def _zero_timestamp(v: Any) -> Any:
    """The zero TIMESTAMP is 0 seconds in the binlog; a SELECT gives it as the zero date, which reads as NULL.
    No real TIMESTAMP is at 0 (the smallest is one second later), so 0 means the zero value."""
    return None if isinstance(v, dt.datetime) and _to_utc(v) == _EPOCH else v


def _as_bytes(v: Any) -> Any:
    # the library gives an empty binary string as '' (str)
    return v.encode("utf-8", "surrogateescape") if isinstance(v, str) else v


def _fixed_binary(width: int) -> Converter:
    """BINARY(n): the binlog image drops the trailing 0x00 padding a SELECT returns."""
    return lambda v: bytes(_as_bytes(v)).ljust(width, b"\x00")


def binlog_fixup(col: ColumnInfo) -> Converter | None:
    """Bring a decoded binlog value to the form the SELECT path delivers before :func:`value_converter`."""
    t = col.data_type
    if t == "time" and (col.datetime_precision or 0) > 0:
        return negative_time_fix
    if t == "timestamp":
        return _zero_timestamp
    if t == "binary":
        m = re.fullmatch(r"binary\((\d+)\)", col.column_type.strip().lower())
        return _fixed_binary(int(m.group(1))) if m else _as_bytes
    if spark_type(col) == "BINARY" and t not in ("bit", *_GEO):
        return _as_bytes
    if t == "bit":
        return lambda v: int(v, 2) if isinstance(v, str) else v
    if t == "set":
        members = _set_members(col)

        def set_text(v: Any) -> Any:
            if isinstance(v, set | frozenset):
                return ",".join(m for m in members if m in v)
            return v

        return set_text
    if t == "json":
        return _binlog_json
    return None


def binlog_row_converter(columns: tuple[ColumnInfo, ...], tinyint1_as_boolean: bool = False
                         ) -> Callable[[dict[str, Any]], tuple[Any, ...]]:
    """A decoded binlog row image (column name -> value) as a canonical row tuple in column order."""
    names = [c.name for c in columns]
    fix = [(i, f) for i, c in enumerate(columns) if (f := binlog_fixup(c)) is not None]
    canon = row_converter(columns, tinyint1_as_boolean)

    def conv(image: dict[str, Any]) -> tuple[Any, ...]:
        row = [image.get(n) for n in names]
        for i, f in fix:
            if row[i] is not None:
                row[i] = f(row[i])
        return canon(tuple(row))

    return conv


# ---- Arrow: the snapshot hot path hands Arrow batches to Spark ----

def table_arrow_schema(columns: tuple[ColumnInfo, ...], tinyint1_as_boolean: bool = False) -> pa.Schema:
    return pa.schema([pa.field(c.name, arrow_type(spark_type(c, tinyint1_as_boolean)), c.nullable)
                      for c in columns])


def columns_to_batch(cols: list[list[Any]], schema: pa.Schema) -> pa.RecordBatch:
    """Canonical Python values (one list per column) as a record batch of the canonical Arrow schema."""
    return pa.RecordBatch.from_arrays([pa.array(col, type=schema.field(i).type) for i, col in enumerate(cols)],
                                      schema=schema)


def batch_to_rows(batch: pa.RecordBatch) -> list[tuple[Any, ...]]:
    """Back to canonical Python row tuples (decimal -> Decimal, TIMESTAMP -> aware UTC datetime, ...)."""
    return list(zip(*(c.to_pylist() for c in batch.columns)))


# Column types the Arrow-native SELECT path (connectorx) reads exactly; others take the mysqlclient path.
FAST_TYPES = frozenset({"tinyint", "smallint", "mediumint", "int", "integer", "bigint", "decimal", "numeric",
                        "float", "double", "real", "char", "varchar", "tinytext", "text", "mediumtext", "longtext",
                        "binary", "varbinary", "tinyblob", "blob", "mediumblob", "longblob", "date", "datetime",
                        "timestamp", "year", "enum", "set"})


def fast_select_expr(col: ColumnInfo, quoted: str) -> str | None:
    """The SELECT expression for the Arrow-native path, or ``None`` when the column needs the other path.
    DECIMAL travels as text (exact at any precision) and is cast by Arrow."""
    if col.data_type not in FAST_TYPES:
        return None
    if col.data_type in _TEXT and col.charset == "binary":
        return None
    if col.data_type in ("decimal", "numeric"):
        return f"CAST({quoted} AS CHAR)"
    return select_expr(col, quoted)


def select_expr(col: ColumnInfo, quoted: str) -> str:
    """The SELECT expression of a column for the mysqlclient path. FLOAT is printed with about six significant
    digits in a result set (1000001 comes back as 1e+06): widened to DOUBLE in the server, every stored float
    arrives exactly and is narrowed back by :func:`value_converter`."""
    if col.data_type == "float":
        return f"({quoted} + 0E0)"
    return quoted


def arrow_canonical(table: pa.Table, columns: tuple[ColumnInfo, ...], tinyint1_as_boolean: bool = False
                    ) -> pa.Table:
    """Cast the Arrow-native path's columns to the canonical Arrow schema (vectorized, exact)."""
    schema = table_arrow_schema(columns, tinyint1_as_boolean)
    arrays = []
    for i, f in enumerate(schema):
        arr = table.column(i)
        if arr.type != f.type:
            if pa.types.is_timestamp(f.type) and f.type.tz and pa.types.is_timestamp(arr.type) and not arr.type.tz:
                arr = arr.cast(pa.timestamp("us")).cast(f.type)  # naive UTC (session time_zone +00:00)
            else:
                arr = arr.cast(f.type)
        arrays.append(arr)
    return pa.Table.from_arrays(arrays, schema=schema)
