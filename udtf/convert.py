"""Value conversion MySQL -> Spark: the one place that converts values, by the type catalog of
:mod:`mysql_cdc.types` (which Spark type each column type becomes; rendered into the README by
``python -m mysql_cdc.docs``).

Pure logic: no pyspark and no driver (pyarrow is used to describe Arrow types). Both the SELECT path (snapshot
reader) and the binlog path (row images) pass through :func:`value_converter`, so the same stored value gives
the same Spark value whichever way it arrives (docs/DESIGN.md, contract C4).
"""

from __future__ import annotations

import datetime as dt
import functools
import ipaddress
import json
import re
import struct
import uuid
from collections.abc import Callable
from decimal import Decimal
from typing import Any

import pyarrow as pa

from mysql_cdc.errors import BinlogError, UnsupportedTypeError
from mysql_cdc.jsontext import json_text, plain_json
from mysql_cdc.schema import ColumnInfo
from mysql_cdc.types import (
    GEO_TYPES,
    INT_TYPES,
    MARIADB_TEXT,
    TEXT_TYPES,
    arrow_type,
    held_date,
    spark_type,
    text_decoder,
)

UTC = dt.timezone.utc
Converter = Callable[[Any], Any]


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
    if t in INT_TYPES:
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
    if t in GEO_TYPES:
        return _wkb
    if st == "STRING":
        return _text
    return None


def _wkb(v: Any) -> bytes:
    """MySQL's geometry value is a 4-byte SRID then WKB (coordinates x = longitude first whatever the SRS)."""
    return bytes(v)[4:]


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

_MEMBER_ESCAPES = {"\\": "\\", "0": "\x00", "n": "\n", "r": "\r", "Z": "\x1a", "'": "'"}


def enum_members(column_type: str) -> list[str]:
    r"""The members of an ENUM or SET from information_schema's COLUMN_TYPE, where each is quoted, a quote is
    doubled and backslash, NUL, newline, carriage return and ^Z are backslash-escaped.

    >>> enum_members(r"enum('a','it''s','b\\c','x\ny','')")
    ['a', "it's", 'b\\c', 'x\ny', '']
    """
    body = column_type[column_type.index("(") + 1 : column_type.rindex(")")]
    out: list[str] = []
    i = 0
    while i < len(body):
        if body[i] != "'":
            i += 1
            continue
        buf, j = [], i + 1
        while j < len(body):
            ch = body[j]
            if ch == "'" and body[j + 1 : j + 2] == "'":
                buf.append("'")
                j += 2
            elif ch == "'":
                break
            elif ch == "\\" and j + 1 < len(body):
                nxt = body[j + 1]
                buf.append(_MEMBER_ESCAPES.get(nxt, nxt))
                j += 2
            else:
                buf.append(ch)
                j += 1
        out.append("".join(buf))
        i = j + 1
    return out


"""MySQL's binary JSON null literal as :mod:`udtf.binlog.transactions` has the library decode it (not SQL NULL)."""


def _binlog_json(v: Any) -> Any:
    """MySQL's binlog carries JSON decoded (never as text): it is written as the server's JSON text
    (:func:`json_text`), so a value is the same by SELECT and by binlog; a top-level string is a JSON string.
    (A partial JSON diff never gets here: :mod:`udtf.binlog.transactions` refuses it.)"""
    return json_text(plain_json(v))


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


def _padded(v: Any, width: int) -> bytes:
    """Fixed-size binary values (BINARY(n), INET6, UUID, ...) lose their trailing 0x00 bytes in the binlog; a
    SELECT returns them."""
    return bytes(_as_bytes(v)).ljust(width, b"\x00")


class MemberIndex(int):
    """An ENUM or SET member as the binlog gives it: its position in the column's member list (0-based).
    :mod:`udtf.binlog.transactions` makes the library hand these out instead of member names it decoded as UTF-8
    whatever the column's character set (a name it could not decode became '')."""


def _member_text(col: ColumnInfo) -> Converter:
    """ENUM and SET values by member position, named from the column's definition (what a SELECT prints)."""
    members = enum_members(col.column_type)

    def name(v: Any) -> str:
        if isinstance(v, MemberIndex):
            return members[v]
        if v == "":  # ENUM's error value (stored 0): '' by SELECT too
            return ""
        raise BinlogError(f"column {col.name!r}: the binlog decoder gave {type(v).__name__} {v!r} for an ENUM/SET "
                          "member instead of its position; the decoder adaptation in udtf.binlog.transactions is "
                          "missing")

    def conv(v: Any) -> Any:
        if isinstance(v, set | frozenset):  # SET: members in definition order, comma-separated
            return ",".join(name(m) for m in sorted(v))
        return name(v)

    return conv


def _text_of(col: ColumnInfo, decode: Callable[[bytes], str]) -> Converter:
    def conv(v: Any) -> Any:
        if not isinstance(v, bytes | bytearray):
            return v
        try:
            return decode(bytes(v))
        except UnicodeDecodeError as e:
            raise UnsupportedTypeError(
                f"column {col.name!r}: the binlog holds a value that is not valid {col.charset!r} text (invalid "
                f"bytes at offset {e.start} of {len(v)}); convert the column to utf8mb4 or to a binary type") from e

    return conv


def inet6_text(b: bytes) -> str:
    """MariaDB's text form of an INET6 value: the longest run of zero groups (even a single one) becomes '::',
    IPv4-mapped and IPv4-compatible addresses end in dotted quads.

    >>> inet6_text(bytes.fromhex("00010000000200000000000000000003"))
    '1:0:2::3'
    >>> inet6_text(bytes(10) + b"\\xff\\xff\\x01\\x02\\x03\\x04")
    '::ffff:1.2.3.4'
    >>> inet6_text(bytes.fromhex("00250000ad0000a500000000690000c7")), inet6_text(bytes(15) + b"\\x01")
    ('25:0:ad00:a5::6900:c7', '::1')
    """
    if b[:10] == bytes(10) and b[10:12] == b"\xff\xff":
        return "::ffff:" + str(ipaddress.IPv4Address(b[12:]))
    if b[:12] == bytes(12) and b[12:14] != bytes(2):
        return "::" + str(ipaddress.IPv4Address(b[12:]))
    words = [format(int.from_bytes(b[i:i + 2], "big"), "x") for i in range(0, 16, 2)]
    best, best_len, i = -1, 0, 0
    while i < 8:
        j = i
        while j < 8 and words[j] == "0":
            j += 1
        if j - i > best_len:
            best, best_len = i, j - i
        i = max(j, i + 1)
    if best < 0:
        return ":".join(words)
    return ":".join(words[:best]) + "::" + ":".join(words[best + best_len:])


_MARIADB_FORMAT: dict[str, Converter] = {
    "inet4": lambda v: str(ipaddress.IPv4Address(_padded(v, 4))),
    "inet6": lambda v: inet6_text(_padded(v, 16)),
    "uuid": lambda v: str(uuid.UUID(bytes=_padded(v, 16))),
}


def binlog_fixup(col: ColumnInfo) -> Converter | None:
    """Bring a decoded binlog value to the form the SELECT path delivers before :func:`value_converter`."""
    t = col.data_type
    if t in TEXT_TYPES and (decode := text_decoder(col.charset)) is not None:
        return _text_of(col, decode)
    if t in ("enum", "set"):
        return _member_text(col)
    if t in MARIADB_TEXT:
        return _MARIADB_FORMAT[t]
    if t == "time" and (col.datetime_precision or 0) > 0:
        return negative_time_fix
    if t == "timestamp":
        return _zero_timestamp
    if t == "binary":
        m = re.fullmatch(r"binary\((\d+)\)", col.column_type.strip().lower())
        return functools.partial(_padded, width=int(m.group(1))) if m else _as_bytes
    if spark_type(col) == "BINARY" and t not in ("bit", *GEO_TYPES):
        return _as_bytes
    if t == "bit":
        return lambda v: int(v, 2) if isinstance(v, str) else v
    if t == "json":
        return _binlog_json
    if t == "year":
        return _zero_year
    return None


def _zero_year(v: Any) -> Any:
    """The binlog stores a YEAR as its offset from 1900 in one byte, and YEAR 0000 as 0, which
    python-mysql-replication decodes as 1900 (a year no YEAR column holds: they hold 1901-2155 and 0000); a
    SELECT gives 0.

    >>> _zero_year(1900), _zero_year(1901)
    (0, 1901)
    """
    return 0 if v == 1900 else v


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
    if col.data_type in TEXT_TYPES and text_decoder(col.charset) is None:
        return None
    if col.data_type in ("decimal", "numeric"):
        return f"CAST({quoted} AS CHAR)"
    return select_expr(col, quoted)


def select_expr(col: ColumnInfo, quoted: str) -> str:
    """The SELECT expression of a column for the mysqlclient path. FLOAT is printed with about six significant
    digits in a result set (1000001 comes back as 1e+06): widened to DOUBLE in the server, every stored float
    arrives exactly and is narrowed back by :func:`value_converter`. Text in a character set without an exact
    decoder here comes as its stored bytes. A date Python has not (:func:`~mysql_cdc.types.held_date`: ``'0000-00-00'``,
    ``'2020-00-15'``, ``'0000-05-05'``, ``'2024-02-30'``) is made NULL by the server, as the binlog reader gives
    it: connectorx panicked on it (a Rust backtrace on stderr), pymysql gave it as text.

    >>> select_expr(ColumnInfo("d", "date", "date", True), "`d`")
    "IF(`d` >= '0001-01-01' AND DAYOFMONTH(`d`) BETWEEN 1 AND DAYOFMONTH(LAST_DAY(`d`)), `d`, NULL)"
    """
    if col.data_type == "float":
        return f"({quoted} + 0E0)"
    if col.data_type in TEXT_TYPES and text_decoder(col.charset) is None:
        return f"CAST({quoted} AS BINARY)"  # delivered as its stored bytes, like the binlog's
    if col.data_type in ("date", "datetime", "timestamp"):
        return f"IF({held_date(quoted)}, {quoted}, NULL)"
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
