"""The old temporal formats (udtf/binlog/oldtemporal.py) against MariaDB's writing of them, written here from its
formulas (sql/field.cc: pack_time, sec_part_shift, the TIME zero point; pure, no server; the server's own bytes
are read in tests/test_values.py::test_temporal_columns_in_mariadbs_old_formats): every value of every
precision reads back as itself, in exactly the bytes :func:`old_size` says."""

from __future__ import annotations

import datetime as dt

from hypothesis import example, given
from hypothesis import strategies as st

from mysql_cdc.udtf.binlog.oldtemporal import DATETIME, TIME, TIMESTAMP, old_size, old_value

fsps = st.integers(0, 6)


def _cut(us: int, fsp: int) -> int:
    """Microseconds kept by a column of precision ``fsp``."""
    return us - us % 10 ** (6 - fsp)


def _datetime_bytes(v: dt.datetime, fsp: int) -> bytes:
    if not fsp:
        n = int(v.strftime("%Y%m%d%H%M%S"))
        return n.to_bytes(8, "little")
    packed = ((((v.year * 13 + v.month) * 32 + v.day) * 24 + v.hour) * 60 + v.minute) * 60 + v.second
    return ((packed * 10 ** 6 + v.microsecond) // 10 ** (6 - fsp)).to_bytes(old_size(DATETIME, fsp), "big")


def _time_bytes(us: int, fsp: int) -> bytes:
    if not fsp:
        whole = abs(us) // 10 ** 6
        h, m, s = whole // 3600, whole // 60 % 60, whole % 60
        return ((h * 10_000 + m * 100 + s) * (-1 if us < 0 else 1)).to_bytes(3, "little", signed=True)
    shifted = abs(us) // 10 ** (6 - fsp) * (-1 if us < 0 else 1)  # C's division: toward zero
    return (shifted + 3_020_400 * 10 ** fsp).to_bytes(old_size(TIME, fsp), "big")


def _timestamp_bytes(seconds: int, us: int, fsp: int) -> bytes:
    if not fsp:
        return seconds.to_bytes(4, "little")
    return seconds.to_bytes(4, "big") + (us // 10 ** (6 - fsp)).to_bytes(old_size(TIMESTAMP, fsp) - 4, "big")


@given(st.datetimes(dt.datetime(1000, 1, 1), dt.datetime(9999, 12, 31, 23, 59, 59, 999999)), fsps)
@example(dt.datetime(9999, 12, 31, 23, 59, 59, 999999), 6)
@example(dt.datetime(2024, 2, 29, 0, 0, 0, 1), 6)
def test_a_datetime_reads_back(v: dt.datetime, fsp: int) -> None:
    want = v.replace(microsecond=_cut(v.microsecond, fsp))
    raw = _datetime_bytes(want, fsp)
    assert len(raw) == old_size(DATETIME, fsp)
    assert old_value(DATETIME, raw, fsp) == want


@given(st.integers(-(838 * 3600 + 59 * 60 + 59) * 10 ** 6, (838 * 3600 + 59 * 60 + 59) * 10 ** 6), fsps)
@example(-1, 6)
@example(-(838 * 3600 + 59 * 60 + 59) * 10 ** 6, 0)
@example(-3_600_200_000, 1)
def test_a_time_reads_back(us: int, fsp: int) -> None:
    kept = abs(us) - abs(us) % 10 ** 6 if not fsp else _cut(abs(us), fsp)
    want = dt.timedelta(microseconds=kept * (-1 if us < 0 else 1))
    assert old_value(TIME, _time_bytes(us, fsp), fsp) == want


@given(st.integers(1, 2**31 - 1), st.integers(0, 999_999), fsps)
@example(2**31 - 1, 999_999, 3)
def test_a_timestamp_reads_back(seconds: int, us: int, fsp: int) -> None:
    kept = _cut(us, fsp) if fsp else 0
    got = old_value(TIMESTAMP, _timestamp_bytes(seconds, us, fsp), fsp)
    assert got == dt.datetime(1970, 1, 1) + dt.timedelta(seconds=seconds, microseconds=kept)


@given(st.integers(0, 9999), st.integers(0, 12), st.integers(0, 31), fsps)
@example(0, 5, 5, 0)
@example(2024, 2, 30, 2)
@example(2024, 0, 10, 6)
def test_a_date_python_has_not_is_none_and_one_it_has_is_itself(year: int, month: int, day: int, fsp: int) -> None:
    if not fsp:  # at 10:10:10
        raw = (year * 10**10 + month * 10**8 + day * 10**6 + 101010).to_bytes(8, "little")
    else:
        packed = ((((year * 13 + month) * 32 + day) * 24 + 10) * 60 + 10) * 60 + 10
        raw = (packed * 10 ** fsp).to_bytes(old_size(DATETIME, fsp), "big")
    try:
        want: dt.datetime | None = dt.datetime(year, month, day, 10, 10, 10)
    except ValueError:  # a zero part, year 0, a day its month lacks: NULL, as a SELECT gives it
        want = None
    assert old_value(DATETIME, raw, fsp) == want
