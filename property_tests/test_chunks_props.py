"""Properties of chunk bounds, ids and key encoding (pure; no server)."""

from __future__ import annotations

import bisect
import datetime as dt
from decimal import Decimal

from hypothesis import example, given
from hypothesis import strategies as st

from mysql_cdc.chunks import chunk_id, chunks_from_bounds, decode_key, encode_key, even_bounds, parse_chunk_id
from mysql_cdc.ids import TableId

ident = st.text(min_size=1, max_size=12).filter(lambda s: "\x00" not in s)


@given(ident, ident, st.integers(min_value=0, max_value=10**9))
@example("my.db", "t:1`x", 3)
def test_chunk_id_round_trip(db: str, table: str, index: int) -> None:
    t = TableId(db, table)
    assert parse_chunk_id(chunk_id(t, index)) == (t, index)
    assert TableId.parse(str(t)) == t


key_values = st.one_of(
    st.integers(min_value=-(2**63), max_value=2**64 - 1),
    st.decimals(allow_nan=False, allow_infinity=False, places=5),
    st.text(max_size=10),
    st.binary(max_size=10),
    st.datetimes(),
    st.dates(),
    st.timedeltas(min_value=dt.timedelta(hours=-838), max_value=dt.timedelta(hours=838)),
    st.floats(allow_nan=False),
    st.booleans(),
)


@given(st.lists(key_values, min_size=1, max_size=4))
def test_key_encoding_round_trip(values: list[object]) -> None:
    key = tuple(values)
    back = decode_key(encode_key(key))
    assert back == key
    assert [type(v) for v in back] == [type(v) for v in key]
    assert decode_key(encode_key(None)) is None


@given(st.integers(min_value=-(2**63), max_value=2**63), st.integers(min_value=0, max_value=10**6),
       st.integers(min_value=1, max_value=10**5), st.integers(min_value=1, max_value=500))
@example(2**63, 2**64 - 1 - 2**63, 1000, 7)  # BIGINT UNSIGNED range above 2^63
def test_even_bounds_partition_the_key_range(lo: int, span: int, rows: int, chunk_size: int) -> None:
    hi = lo + span
    bounds = even_bounds(lo, hi, rows, chunk_size, 0.05, 1000.0)
    factor = (hi - lo + 1) / rows
    if not 0.05 <= factor <= 1000.0:
        assert bounds is None
        return
    assert bounds is not None
    assert all(lo < b <= hi for b in bounds)
    assert bounds == sorted(set(bounds))
    chunks = chunks_from_bounds(TableId("d", "t"), ("id",), [(b,) for b in bounds])
    # every key in [lo, hi] (and beyond both ends) lies in exactly one chunk
    assert chunks[0].start is None and chunks[-1].end is None
    assert all(a.end == b.start for a, b in zip(chunks, chunks[1:]))
    starts = [c.start[0] for c in chunks[1:] if c.start is not None]
    probes = {lo - 1, lo, hi, hi + 1, *bounds[:50], *(b - 1 for b in bounds[-50:])}
    for k in probes:
        owner = chunks[bisect.bisect_right(starts, k)]
        assert (owner.start is None or (k,) >= owner.start) and (owner.end is None or (k,) < owner.end)


def test_even_bounds_worked_example() -> None:
    assert even_bounds(1, 100, 100, 25, 0.05, 1000.0) == [26, 51, 76]
    assert even_bounds(1, 10**9, 10, 5, 0.05, 1000.0) is None
    assert even_bounds(0, 10, 0, 5, 0.05, 1000.0) is None


def test_decimal_keys_keep_scale() -> None:
    key = (Decimal("1.500"),)
    assert str(decode_key(encode_key(key))[0]) == "1.500"
