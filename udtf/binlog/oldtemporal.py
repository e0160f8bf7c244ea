"""DATETIME, TIME and TIMESTAMP in the formats of before MySQL 5.6.4 and MariaDB 10.1.2, as the binlog holds them.

A MariaDB table created on 5.3 to 10.0 and never rebuilt, or created under ``mysql56_temporal_format=OFF``, keeps
its temporal columns in those formats (``SHOW CREATE TABLE`` marks them ``/* mariadb-5.3 */``). Their rows are
logged with the pre-5.6 types (DATETIME 12, TIME 11, TIMESTAMP 7) and no metadata, so the table map does not say
how many bytes a value takes: the column's precision (the schema's ``DATETIME_PRECISION``) does. Precision 0 is the
classic format, little-endian:

- DATETIME: 8 bytes, the number ``YYYYMMDDhhmmss``;
- TIME: 3 bytes, signed, ``±hhmmss``;
- TIMESTAMP: 4 bytes, seconds since the epoch.

A precision ``d`` of 1 to 6 is MariaDB 5.3's, big-endian (python-mysql-replication reads these as the classic
ones: a DATETIME(2) value is 6 bytes where it reads 8, and the rest of the row is misread):

- DATETIME: ``((((year * 13 + month) * 32 + day) * 24 + hour) * 60 + minute) * 60 + second``, in microseconds,
  divided by 10^(6 - d), in 6, 6, 7, 7, 7 or 8 bytes;
- TIME: its signed microseconds divided by 10^(6 - d), plus 3,020,400 seconds (838:59:59 and one second) at that
  scale, in 4, 4, 5, 5, 5 or 6 bytes;
- TIMESTAMP: 4 bytes of seconds, then its microseconds divided by 10^(6 - d) in 1, 1, 2, 2, 3 or 3 bytes.

Worked example: ``'2024-02-29 10:11:12.25'`` in a DATETIME(2) is
(((((2024 * 13 + 2) * 32 + 29) * 24 + 10) * 60 + 11) * 60 + 12) * 100 + 25 in 6 bytes:

>>> v = (((((2024 * 13 + 2) * 32 + 29) * 24 + 10) * 60 + 11) * 60 + 12) * 100 + 25
>>> old_value(DATETIME, v.to_bytes(6, "big"), 2)
datetime.datetime(2024, 2, 29, 10, 11, 12, 250000)
>>> old_value(TIME, (3_020_400 * 10 - 36_002).to_bytes(4, "big"), 1)  # -01:00:00.2
datetime.timedelta(days=-1, seconds=82799, microseconds=800000)
>>> old_value(TIME, (-10_000).to_bytes(3, "little", signed=True), 0), old_value(DATETIME, bytes(8), 0)
(datetime.timedelta(days=-1, seconds=82800), None)
>>> [old_size(t, 2) for t in (DATETIME, TIME, TIMESTAMP)], [old_size(t, 0) for t in (DATETIME, TIME, TIMESTAMP)]
([6, 4, 5], [8, 3, 4])
"""

from __future__ import annotations

import datetime as dt

from mysql_cdc.types import FieldType as F

DATETIME, TIME, TIMESTAMP = F.DATETIME, F.TIME, F.TIMESTAMP
OLD_TYPES = frozenset({DATETIME, TIME, TIMESTAMP})
_SIZES: dict[int, tuple[int, ...]] = {DATETIME: (8, 6, 6, 7, 7, 7, 8), TIME: (3, 4, 4, 5, 5, 5, 6),
                                      TIMESTAMP: (4, 5, 5, 6, 6, 7, 7)}
_TIME_ZERO = 3_020_400  # seconds: 838:59:59 and one, MariaDB's zero point of a TIME(d)
_EPOCH = dt.datetime(1970, 1, 1)


def kept_old(data_type: str, column_type: str) -> int | None:
    """The old type a column of the schema is logged as, where information_schema says it is kept in an old
    format (MariaDB's ``COLUMN_TYPE`` ends ``/* mariadb-5.3 */``, at precision 0 too); ``None`` for a column in
    the new formats (DATETIME2, TIME2, TIMESTAMP2), or not temporal. A table map that logs a column otherwise
    was written under another definition of the table (a row from before a DDL statement): the row readers
    leave it to the library, whose reading is the classic one.

    >>> kept_old("datetime", "datetime(6) /* mariadb-5.3 */") == DATETIME, kept_old("datetime", "datetime(6)")
    (True, None)
    """
    if "mariadb-5.3" not in column_type.lower():
        return None
    return {"datetime": DATETIME, "time": TIME, "timestamp": TIMESTAMP}.get(data_type)


def old_size(t: int, fsp: int) -> int:
    """Bytes of a value of type ``t`` (DATETIME, TIME, TIMESTAMP) of precision ``fsp`` in the old formats."""
    return _SIZES[t][fsp]


def old_value(t: int, raw: bytes, fsp: int) -> dt.datetime | dt.timedelta | None:
    """The value in ``raw`` (:func:`old_size` bytes): a naive datetime (a TIMESTAMP's in UTC), a timedelta, or
    None for a date Python has not (a zero part, year 0, a day its month lacks), as a SELECT gives it."""
    scale = 10 ** (6 - fsp)
    if t == TIME:
        if not fsp:
            v = int.from_bytes(raw, "little", signed=True)
            h, rest = divmod(abs(v), 10_000)
            m, s = divmod(rest, 100)
            return dt.timedelta(hours=h, minutes=m, seconds=s) * (-1 if v < 0 else 1)
        return dt.timedelta(microseconds=(int.from_bytes(raw, "big") - _TIME_ZERO * 10 ** fsp) * scale)
    if t == TIMESTAMP:
        if not fsp:
            return _EPOCH + dt.timedelta(seconds=int.from_bytes(raw, "little"))
        return _EPOCH + dt.timedelta(seconds=int.from_bytes(raw[:4], "big"),
                                     microseconds=int.from_bytes(raw[4:], "big") * scale)
    if not fsp:
        day, clock = divmod(int.from_bytes(raw, "little"), 1_000_000)
        year, month, d = day // 10_000, day // 100 % 100, day % 100
        hour, minute, second, us = clock // 10_000, clock // 100 % 100, clock % 100, 0
    else:
        v, us = divmod(int.from_bytes(raw, "big") * scale, 1_000_000)
        v, second = divmod(v, 60)
        v, minute = divmod(v, 60)
        v, hour = divmod(v, 24)
        v, d = divmod(v, 32)
        year, month = divmod(v, 13)
    try:
        return dt.datetime(year, month, d, hour, minute, second, us)
    except ValueError:
        return None
