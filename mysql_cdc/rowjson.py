"""Row images as JSON text that keeps every value exactly: the ``__values`` column of a multi-table read.

A stream has one schema, so a read of many tables carries each row's values as one JSON object (column name
to value) beside the metadata columns. The encoding goes from the row's Arrow values (the same typed arrays a
single-table read hands to Spark) and :func:`decode_rows` builds those arrays again from the text and the
table's Arrow schema, so a table split out of the envelope holds the values a single-table read gives
(docs/DESIGN.md, contract C4). JSON types alone would lose values (DECIMAL digits, bytes, time zones), so some types are
written as text:

============================  ==============================================================
Arrow type (MySQL types)      JSON
============================  ==============================================================
integers, boolean             number, true/false (BIGINT UNSIGNED above 2^63 is a DECIMAL)
float32, float64              number, shortest text that reads back to the same double (a float32
                              value as the double it widens to: 0.1f is 0.10000000149011612)
decimal128 (DECIMAL)          string of the exact digits, "12.50", never an exponent ("0.000")
string                        string
binary (BINARY, BLOB, BIT)    string, base64
date32 (DATE)                 string, "2024-02-29"
timestamp UTC (TIMESTAMP)     string, ISO-8601 with offset, "2024-02-29T10:00:00.250000+00:00"
timestamp (DATETIME)          string, ISO-8601 without offset, "2024-02-29T10:00:00"
duration (TIME)               number, microseconds, -838:59:59 is -3020399000000
NULL                          null
============================  ==============================================================

>>> import pyarrow as pa, decimal, datetime as dt
>>> schema = pa.schema([("id", pa.int64()), ("price", pa.decimal128(10, 2)), ("photo", pa.binary()),
...                     ("at", pa.timestamp("us", tz="UTC")), ("t", pa.duration("us"))])
>>> batch = pa.record_batch([pa.array([7]), pa.array([decimal.Decimal("12.50")], pa.decimal128(10, 2)),
...                          pa.array([b"\\x00\\xff"]), pa.array([dt.datetime(2024, 2, 29, 10, 0, 0, 250000)],
...                          pa.timestamp("us", tz="UTC")), pa.array([dt.timedelta(hours=-1)], pa.duration("us"))],
...                         schema=schema)
>>> texts = encode_rows(batch)
>>> texts[0]
'{"id":7,"price":"12.50","photo":"AP8=","at":"2024-02-29T10:00:00.250000+00:00","t":-3600000000}'
>>> decode_rows(texts, schema).equals(batch)
True
>>> encode_rows(pa.record_batch([pa.array([decimal.Decimal("0E-30")], pa.decimal128(38, 30))], names=["d"]))
['{"d":"0.000000000000000000000000000000"}']
"""

from __future__ import annotations

import base64
import datetime as dt
import decimal
import json
from collections.abc import Callable, Sequence
from typing import Any

import pyarrow as pa

from mysql_cdc.errors import SchemaChangedError

_Codec = Callable[[Any], Any]


def _identity(v: Any) -> Any:
    return v


def _b64(v: bytes) -> str:
    return base64.b64encode(v).decode("ascii")


def _unb64(v: str) -> bytes:
    return base64.b64decode(v, validate=True)


def _iso(v: Any) -> str:
    return str(v.isoformat(timespec="microseconds") if isinstance(v, dt.datetime) else v.isoformat())


def _micros(v: dt.timedelta) -> int:
    return (v.days * 86_400 + v.seconds) * 1_000_000 + v.microseconds


def _digits(v: decimal.Decimal) -> str:
    return format(v, "f")


def _encoder(t: pa.DataType) -> _Codec:
    if pa.types.is_decimal(t):
        return _digits
    if pa.types.is_binary(t) or pa.types.is_large_binary(t):
        return _b64
    if pa.types.is_date(t) or pa.types.is_timestamp(t):
        return _iso
    if pa.types.is_duration(t):
        return _micros
    return _identity


def _decoder(t: pa.DataType) -> _Codec:
    if pa.types.is_decimal(t):
        return decimal.Decimal
    if pa.types.is_binary(t) or pa.types.is_large_binary(t):
        return _unb64
    if pa.types.is_date(t):
        return dt.date.fromisoformat
    if pa.types.is_timestamp(t):
        return dt.datetime.fromisoformat
    if pa.types.is_duration(t):
        return lambda v: dt.timedelta(microseconds=int(v))
    return _identity


def encode_rows(batch: pa.RecordBatch) -> list[str]:
    """One JSON object per row of ``batch``, keys in column order (see the module's table)."""
    names = batch.schema.names
    columns = []
    for col in batch.columns:
        enc = _encoder(col.type)
        values = col.to_pylist()
        columns.append(values if enc is _identity else [None if v is None else enc(v) for v in values])
    dumps = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode
    return [dumps(dict(zip(names, row))) for row in zip(*columns)] if columns else ["{}"] * batch.num_rows


def decode_rows(texts: Sequence[str], schema: pa.Schema) -> pa.RecordBatch:
    """The typed rows again: ``schema`` is the table's Arrow schema (a single-table read's columns). A text
    with other columns than ``schema`` was written with another schema of the table: an error, never a guess."""
    objs = [json.loads(t) for t in texts]
    names = schema.names
    for o in objs:
        if list(o) != names:
            raise SchemaChangedError(f"a row image has columns {list(o)!r}, not the columns {names!r} it is "
                                     "decoded with: it was written with another schema of its table")
    arrays = []
    for f in schema:
        dec = _decoder(f.type)
        values = [o[f.name] for o in objs]
        if dec is not _identity:
            values = [None if v is None else dec(v) for v in values]
        arrays.append(pa.array(values, type=f.type))
    return pa.RecordBatch.from_arrays(arrays, schema=schema)
