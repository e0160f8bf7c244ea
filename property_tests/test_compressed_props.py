"""MariaDB's compressed column values (udtf/binlog/compressed.py) against zlib, writing them as the server does
(sql/field_comp.cc: a header of the method, the length's bytes and the format, the length big-endian, the stream;
pure, no server; the server's own values are read in tests/test_values.py::test_mariadbs_compressed_columns): every
value reads back as itself, and a value cut short or with a length other than its stream's is refused."""

from __future__ import annotations

import zlib

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from mysql_cdc.udtf.binlog.compressed import inflated


def _stored(value: bytes, raw: bool, level: int) -> bytes:
    n = max(1, (len(value).bit_length() + 7) // 8)
    z = zlib.compressobj(level, zlib.DEFLATED, -zlib.MAX_WBITS if raw else zlib.MAX_WBITS)
    return bytes([0x80 | n | (8 if raw else 0)]) + len(value).to_bytes(n, "big") + z.compress(value) + z.flush()


@given(st.binary(max_size=5000) | st.text(max_size=2000).map(str.encode), st.booleans(), st.integers(1, 9))
@example(b"", True, 6)
@example(b"a" * 70_000, False, 9)  # a length in 3 bytes
def test_a_value_reads_back_and_a_damaged_one_is_refused(value: bytes, raw: bool, level: int) -> None:
    stored = _stored(value, raw, level)
    assert inflated(stored) == value
    assert inflated(b"\x00" + value) == value  # kept as it was
    with pytest.raises(ValueError):
        inflated(stored[:-1])  # the stream cut short
    n = stored[0] & 7
    longer = (len(value) + 1).to_bytes(n + 1, "big")  # a header that says one byte more
    with pytest.raises(ValueError):
        inflated(bytes([(stored[0] & ~7) | (n + 1)]) + longer + stored[1 + n:])
