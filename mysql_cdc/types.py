"""The column type catalog: which Spark type each MySQL/MariaDB column type becomes, and which character sets
are decoded exactly. Shared vocabulary: the planner checks columns and chunk keys with it, the readers convert
values by it (``mysql_cdc.udtf.convert``), and the README's type table is rendered from :data:`TYPE_TABLE`.

Pure: no driver, no pyspark, no pyarrow.
"""

from __future__ import annotations

import codecs
import functools
from collections.abc import Callable
from dataclasses import dataclass
from enum import IntEnum
from typing import Any

from mysql_cdc.errors import UnsupportedTypeError
from mysql_cdc.schema import ColumnInfo, TableSchema

# ---- character sets: text arrives from the binlog as stored bytes (see udtf.binlog.transactions) ----

_UNICODE = {"utf8mb4": "utf-8", "utf8mb3": "utf-8", "utf8": "utf-8", "utf16": "utf-16-be", "ucs2": "utf-16-be",
            "utf16le": "utf-16-le", "utf32": "utf-32-be"}
# Single-byte sets: Python's codec plus the bytes where the server maps differently ('?' where the server has
# no character for the byte), found by converting every byte on MySQL 9.7 and MariaDB 10.11 (which agree);
# tests/test_charsets.py checks all 256 of each set on both.
_SINGLE_BYTE: dict[str, tuple[str, dict[int, str]]] = {
    "ascii": ("ascii", {}),
    "latin1": ("cp1252", {b: chr(b) for b in (0x81, 0x8D, 0x8F, 0x90, 0x9D)}),
    "latin2": ("iso8859-2", {}), "latin5": ("iso8859-9", {}), "latin7": ("iso8859-13", {}),
    "greek": ("iso8859-7", {0xA1: "\u02bd", 0xA2: "\u02bc", 0xA4: "?", 0xA5: "?", 0xAA: "?"}),
    "hebrew": ("iso8859-8", {0xAF: "\u203e"}),
    "cp1250": ("cp1250", {}), "cp1251": ("cp1251", {}), "cp1257": ("cp1257", {}),
    "cp1256": ("cp1256", dict.fromkeys((0x8A, 0x8F, 0x98, 0x9A, 0x9F, 0xAA, 0xC0, 0xFF), "?")),
    "cp850": ("cp850", {}), "cp852": ("cp852", {}), "cp866": ("cp866", {0xFC: "\u207f", 0xFD: "\u00b2"}),
    "koi8r": ("koi8-r", {}), "koi8u": ("koi8-u", {0x95: "\u2022"}),
    "macroman": ("mac-roman", {}), "macce": ("mac-latin2", {}),
}
TEXT_CHARSETS = frozenset(_UNICODE) | frozenset(_SINGLE_BYTE)


@functools.cache
def _charmap(charset: str) -> str:
    codec, overrides = _SINGLE_BYTE[charset]
    chars = []
    for b in range(256):
        try:
            chars.append(overrides.get(b) or bytes([b]).decode(codec))
        except UnicodeDecodeError:
            chars.append("?")  # a byte the set leaves undefined: the server converts it to '?' too
    return "".join(chars)


def text_decoder(charset: str | None) -> Callable[[bytes], str] | None:
    """The exact decoder of a MySQL character set, as the server converts it to Unicode, or ``None`` when
    there is none here (the column is then delivered as its stored bytes).

    >>> text_decoder("latin1")(b"\\xc4\\x80\\x81")  # cp1252 except five bytes MySQL maps to C1 controls
    'Ä€\\x81'
    >>> text_decoder("utf16")("é".encode("utf-16-be")), text_decoder("big5")
    ('é', None)
    """
    cs = charset or "utf8mb4"
    if cs in _UNICODE:
        codec = _UNICODE[cs]
        return lambda b: bytes(b).decode(codec)
    if cs in _SINGLE_BYTE:
        table = _charmap(cs)
        return lambda b: codecs.charmap_decode(bytes(b), "strict", table)[0]
    return None


def unicode_codec(charset: str | None) -> str | None:
    """Python's codec of a Unicode character set (MySQL's utf16/utf32 are big-endian), ``None`` for others.

    >>> unicode_codec("utf8mb4"), unicode_codec("utf16"), unicode_codec("latin1")
    ('utf-8', 'utf-16-be', None)
    """
    return _UNICODE.get(charset or "utf8mb4")


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
    TypeRule("DATE", "DATE", "zero date, a zero month or day, year 0, or a day its month lacks "
             "(ALLOW_INVALID_DATES) -> NULL"),
    TypeRule("DATETIME(p)", "TIMESTAMP_NTZ", "wall-clock value as stored; NULL where a DATE is"),
    TypeRule("TIMESTAMP(p)", "TIMESTAMP", "the instant (UTC), independent of the server's time zone; zero -> NULL"),
    TypeRule("TIME(p)", "INTERVAL DAY TO SECOND", "signed, may exceed 24 hours"),
    TypeRule("YEAR", "SMALLINT", "YEAR 0000 is 0"),
    TypeRule("CHAR, VARCHAR, *TEXT", "STRING", "character sets: " + ", ".join(sorted(TEXT_CHARSETS))),
    TypeRule("CHAR, VARCHAR, *TEXT in another character set", "BINARY",
             "the stored bytes (no exact decoder here: big5, gbk, sjis, ujis, ...); cannot be a chunk key"),
    TypeRule("ENUM, SET", "STRING", "SET as its comma-separated text"),
    TypeRule("BINARY, VARBINARY, *BLOB, binary-charset strings", "BINARY", "BINARY(n) with its 0x00 padding"),
    TypeRule("JSON", "STRING", "JSON text as the server prints it, by SELECT and by binlog alike (MySQL's binary "
             "JSON is written out as MySQL writes it: doubles as 1e21 or 0.00008, DECIMAL, dates, times and "
             "base64:typeN: binary values inside it); the JSON literal null is 'null', not NULL"),
    TypeRule("GEOMETRY and spatial types", "BINARY", "WKB, x = longitude for geographic SRSs (as ST_AsWKB(g, "
             "'axis-order=long-lat')); the SRID is dropped"),
    TypeRule("INET4, INET6, UUID (MariaDB)", "STRING", "the server's text form; cannot be a chunk key"),
    TypeRule("VECTOR (MySQL 9)", "(refused)", "UnsupportedTypeError at planning: python-mysql-replication "
             "cannot decode it in the binlog; VECTOR in tables not captured is fine"),
)

INT_TYPES = {
    "tinyint": ("TINYINT", "SMALLINT"),
    "smallint": ("SMALLINT", "INT"),
    "mediumint": ("INT", "INT"),
    "int": ("INT", "BIGINT"),
    "integer": ("INT", "BIGINT"),
    "bigint": ("BIGINT", "DECIMAL(20,0)"),
}
TEXT_TYPES = {"char", "varchar", "tinytext", "text", "mediumtext", "longtext"}
BLOB_TYPES = {"binary", "varbinary", "tinyblob", "blob", "mediumblob", "longblob"}
MARIADB_TEXT = ("inet4", "inet6", "uuid")  # fixed-size binary values that a SELECT gives as text
GEO_TYPES = {"geometry", "point", "linestring", "polygon", "multipoint", "multilinestring", "multipolygon",
        "geometrycollection", "geomcollection"}


def held_date(quoted: str) -> str:
    """The SQL condition under which the capture holds a DATE, DATETIME or TIMESTAMP value as it is; otherwise it
    holds NULL, as Python's ``datetime`` and so the binlog's row reader have no such date: a zero date, a zero
    month or day, a year 0 (``'0000-05-05'``) and a day its month lacks (``'2024-02-30'``, kept by the server under
    ALLOW_INVALID_DATES; connectorx panics on it). A zero month makes ``LAST_DAY`` NULL, and so the condition.

    >>> held_date("`d`")
    "`d` >= '0001-01-01' AND DAYOFMONTH(`d`) BETWEEN 1 AND DAYOFMONTH(LAST_DAY(`d`))"
    """
    return f"{quoted} >= '0001-01-01' AND DAYOFMONTH({quoted}) BETWEEN 1 AND DAYOFMONTH(LAST_DAY({quoted}))"


def is_tinyint1(col: ColumnInfo) -> bool:
    return col.data_type == "tinyint" and col.column_type.lower().startswith("tinyint(1)") and not col.unsigned


def spark_type(col: ColumnInfo, tinyint1_as_boolean: bool = False) -> str:
    """The Spark SQL type (DDL text) for a MySQL column."""
    t = col.data_type
    if t in INT_TYPES:
        if tinyint1_as_boolean and is_tinyint1(col):
            return "BOOLEAN"
        return INT_TYPES[t][1 if col.unsigned else 0]
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
    if t in TEXT_TYPES:
        return "STRING" if text_decoder(col.charset) is not None else "BINARY"
    if t in ("enum", "set", "json", *MARIADB_TEXT):
        return "STRING"
    if t in BLOB_TYPES or t in GEO_TYPES:
        return "BINARY"
    if t == "vector":
        raise UnsupportedTypeError(
            f"column {col.name!r} has type {col.column_type!r}: python-mysql-replication cannot decode VECTOR "
            "columns in the binlog, so changes to this table cannot be read; exclude the table from 'tables' "
            "or store the vector as VARBINARY or JSON")
    raise UnsupportedTypeError(
        f"column {col.name!r} has type {col.column_type!r}, which has no Spark mapping; "
        "exclude the table or open an issue with the type")


def check_columns(schema: TableSchema) -> None:
    """Every column of the table has a Spark type (else one :class:`UnsupportedTypeError` naming the table)."""
    for c in schema.columns:
        try:
            spark_type(c)
        except UnsupportedTypeError as e:
            raise UnsupportedTypeError(f"table {str(schema.table)!r}: {e}") from e

class FieldType(IntEnum):
    """The server's column type codes (``enum_field_types``), as a binlog table map gives each column's type and
    binary JSON an opaque value's: the one table of them (the row decoder, the library's adaptation and JSON's
    opaque values read it)."""

    DECIMAL = 0
    TINY = 1
    SHORT = 2
    LONG = 3
    FLOAT = 4
    DOUBLE = 5
    NULL = 6
    TIMESTAMP = 7
    LONGLONG = 8
    INT24 = 9
    DATE = 10
    TIME = 11
    DATETIME = 12
    YEAR = 13
    NEWDATE = 14
    VARCHAR = 15
    BIT = 16
    TIMESTAMP2 = 17
    DATETIME2 = 18
    TIME2 = 19
    JSON = 245
    NEWDECIMAL = 246
    ENUM = 247
    SET = 248
    TINY_BLOB = 249
    MEDIUM_BLOB = 250
    LONG_BLOB = 251
    BLOB = 252
    VAR_STRING = 253
    STRING = 254
    GEOMETRY = 255


# every Spark type name the type table gives (DECIMAL(p,s) apart): its Arrow type and its pyspark type, made
# from the module passed in (pyarrow, pyspark.sql.types: imported where used, not with the vocabulary)
_TYPE_NAMES: dict[str, tuple[Callable[[Any], Any], Callable[[Any], Any]]] = {
    "TINYINT": (lambda pa: pa.int8(), lambda T: T.ByteType()),
    "SMALLINT": (lambda pa: pa.int16(), lambda T: T.ShortType()),
    "INT": (lambda pa: pa.int32(), lambda T: T.IntegerType()),
    "BIGINT": (lambda pa: pa.int64(), lambda T: T.LongType()),
    "FLOAT": (lambda pa: pa.float32(), lambda T: T.FloatType()),
    "DOUBLE": (lambda pa: pa.float64(), lambda T: T.DoubleType()),
    "BOOLEAN": (lambda pa: pa.bool_(), lambda T: T.BooleanType()),
    "STRING": (lambda pa: pa.string(), lambda T: T.StringType()),
    "BINARY": (lambda pa: pa.binary(), lambda T: T.BinaryType()),
    "DATE": (lambda pa: pa.date32(), lambda T: T.DateType()),
    "TIMESTAMP": (lambda pa: pa.timestamp("us", tz="UTC"), lambda T: T.TimestampType()),
    "TIMESTAMP_NTZ": (lambda pa: pa.timestamp("us"), lambda T: T.TimestampNTZType()),
    "INTERVAL DAY TO SECOND": (lambda pa: pa.duration("us"), lambda T: T.DayTimeIntervalType(
        T.DayTimeIntervalType.DAY, T.DayTimeIntervalType.SECOND)),
}


def _decimal(name: str) -> tuple[int, int] | None:
    if not name.startswith("DECIMAL("):
        return None
    p, s = name[8:-1].split(",")
    return int(p), int(s)


@functools.cache
def arrow_type(name: str) -> Any:
    """The Arrow type of a Spark type name of the type table.

    >>> arrow_type("DECIMAL(20,0)"), arrow_type("TIMESTAMP")
    (Decimal128Type(decimal128(20, 0)), TimestampType(timestamp[us, tz=UTC]))
    """
    import pyarrow as pa

    dec = _decimal(name)
    return pa.decimal128(*dec) if dec else _TYPE_NAMES[name][0](pa)


@functools.cache
def spark_data_type(name: str) -> Any:
    """The pyspark type object of a Spark type name of the type table (no session needed, unlike fromDDL)."""
    from pyspark.sql import types as T

    dec = _decimal(name)
    return T.DecimalType(*dec) if dec else _TYPE_NAMES[name][1](T)
