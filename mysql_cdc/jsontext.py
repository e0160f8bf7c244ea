"""MySQL's JSON as the server writes it in JSON text, from the binary JSON the binlog carries (decoded by
python-mysql-replication, adapted in :mod:`mysql_cdc.udtf.binlog.library`): so a JSON value is the same text
by SELECT and by binlog (docs/DESIGN.md, contract C4). Pure: no driver."""

from __future__ import annotations

import base64
import json
import math
from decimal import Decimal
from typing import Any, NamedTuple

from mysql_cdc.types import (
    FieldType,
)


class _JsonNull:
    def __repr__(self) -> str:
        return "JSON_NULL"

    def __reduce__(self) -> str:
        return "JSON_NULL"  # pickled by reference: the one instance stays the one instance


JSON_NULL: Any = _JsonNull()


def plain_json(v: Any) -> Any:
    """MySQL's binary JSON as the library decodes it (object keys and strings as bytes) in plain Python."""
    if isinstance(v, JsonOpaque):
        return v
    if isinstance(v, dict):
        return {plain_json(k): plain_json(x) for k, x in v.items()}
    if isinstance(v, list | tuple):
        return [plain_json(x) for x in v]
    if isinstance(v, bytes | bytearray):
        return v.decode("utf-8")
    return None if v is JSON_NULL else v


def json_double(x: float) -> str:
    """A JSON double as MySQL writes it in JSON text: the shortest digits that read back as the same double
    (Python's ``repr`` has them), in plain notation when the decimal exponent is -15 to 14 (``.0`` after a
    whole number) or when digits stand after the point (exponent 15 with 17 digits), else as
    ``<digits>e<exponent>`` without a plus sign or padding (measured on MySQL 9.7, 462 doubles of 1-17 digits
    and exponents -25 to 24).

    >>> [json_double(v) for v in (8.197252117359e-05, 1e21, 1e15, 1e14, 1.0, -0.0, 1e-15, 1e-16, 5e-324)]
    ['0.00008197252117359', '1e21', '1e15', '100000000000000.0', '1.0', '-0.0', '0.000000000000001', '1e-16', '5e-324']
    >>> json_double(1000000000029395.5), json_double(1234567890123456.0), json_double(1.2345678901234568e16)
    ('1000000000029395.5', '1.234567890123456e15', '1.2345678901234568e16')
    """
    if x == 0:
        return "-0.0" if math.copysign(1.0, x) < 0 else "0.0"
    sign = "-" if x < 0 else ""
    t = Decimal(repr(abs(x))).normalize().as_tuple()
    digits = "".join(map(str, t.digits))
    e = len(digits) - 1 + int(t.exponent)
    if e < -15 or (e > 14 and len(digits) <= e + 1):
        return f"{sign}{digits[0]}{'.' + digits[1:] if len(digits) > 1 else ''}e{e}"
    if e >= len(digits) - 1:
        return f"{sign}{digits}{'0' * (e - len(digits) + 1)}.0"
    if e >= 0:
        return f"{sign}{digits[:e + 1]}.{digits[e + 1:]}"
    return f"{sign}0.{'0' * (-e - 1)}{digits}"


class JsonOpaque(NamedTuple):
    """A value in MySQL's binary JSON that JSON itself has no type for (a DECIMAL, a date or time, binary data):
    its MySQL field type and stored bytes, written out by :func:`json_text` as the server writes it.
    (python-mysql-replication decodes binary ones as text, dropping what is not UTF-8, TIME as a time of day,
    and loses which was which.)"""

    field_type: int
    data: bytes


_DECIMAL_TYPES = {FieldType.DECIMAL, FieldType.NEWDECIMAL}


_DATE_TYPES = {FieldType.DATE, FieldType.NEWDATE}


_TIME_TYPES = {FieldType.TIME, FieldType.TIME2}


_DATETIME_TYPES = {FieldType.TIMESTAMP, FieldType.DATETIME, FieldType.TIMESTAMP2, FieldType.DATETIME2}


def opaque_text(o: JsonOpaque) -> str:
    """A :class:`JsonOpaque` as MySQL's JSON text writes it (measured on MySQL 9.7): a DECIMAL as its digits
    with its scale, dates and times as strings (times and datetimes with six fraction digits), anything else
    as ``"base64:type<N>:<base64 of the bytes>"``. Dates and times are MySQL's packed integers: a TIME's
    hours, minutes and seconds above bit 24, microseconds below, negated when negative; a DATETIME's
    ``(year * 13 + month) << 5 | day`` above bit 41.

    >>> packed = lambda v: v.to_bytes(8, "little", signed=True)
    >>> time = -(838 << 12 | 59 << 6 | 59) << 24
    >>> opaque_text(JsonOpaque(15, b"\\x00\\xff")), opaque_text(JsonOpaque(11, packed(time)))
    ('"base64:type15:AP8="', '"-838:59:59.000000"')
    >>> opaque_text(JsonOpaque(12, packed(((2020 * 13 + 1) << 5 | 2) << 41 | (3 << 12 | 4 << 6 | 5) << 24 | 500000)))
    '"2020-01-02 03:04:05.500000"'
    """
    if o.field_type in _DECIMAL_TYPES and len(o.data) > 2:
        from pymysqlreplication.util.bytes import decode_decimal

        return format(Decimal(str(decode_decimal(o.data))), "f")
    if o.field_type in _DATE_TYPES | _TIME_TYPES | _DATETIME_TYPES and len(o.data) >= 8:
        v = int.from_bytes(o.data[:8], "little", signed=True)
        neg, whole, us = v < 0, abs(v) >> 24, abs(v) % (1 << 24)
        hms = whole % (1 << 17) if o.field_type not in _TIME_TYPES else whole
        clock = f"{hms >> 12:02d}:{(hms >> 6) % 64:02d}:" \
                f"{hms % 64:02d}.{us:06d}"
        if o.field_type in _TIME_TYPES:
            return f'"{"-" if neg else ""}{clock}"'
        ymd = whole >> 17
        date = f"{(ymd >> 5) // 13:04d}-{(ymd >> 5) % 13:02d}-{ymd % 32:02d}"
        return f'"{date}"' if o.field_type in _DATE_TYPES else f'"{date} {clock}"'
    return f'"base64:type{o.field_type}:{base64.b64encode(o.data).decode()}"'


def json_text(v: Any) -> str:
    """Plain Python JSON (:func:`plain_json`) as MySQL writes it: ``", "`` and ``": "`` between items, keys in
    the order given, strings escaped as :func:`json.dumps` escapes them (non-ASCII as it is), doubles by
    :func:`json_double`.

    >>> json_text({"a": [1, 2.5e-20, None, True], "é": "x\\n"})
    '{"a": [1, 2.5e-20, null, true], "é": "x\\\\n"}'
    """
    if isinstance(v, float):
        return json_double(v)
    if isinstance(v, JsonOpaque):
        return opaque_text(v)
    if isinstance(v, dict):
        return "{" + ", ".join(f"{json.dumps(k, ensure_ascii=False)}: {json_text(x)}" for k, x in v.items()) + "}"
    if isinstance(v, list):
        return "[" + ", ".join(json_text(x) for x in v) + "]"
    return json.dumps(v, ensure_ascii=False)
