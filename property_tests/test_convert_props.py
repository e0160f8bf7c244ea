"""Pure properties of the value conversion pieces the binlog path relies on (no server: the server-backed
checks are tests/test_values.py, tests/test_charsets.py and property_tests/test_values_props.py)."""

from __future__ import annotations

import ipaddress

from hypothesis import given
from hypothesis import strategies as st

from mysql_cdc.types import text_decoder
from mysql_cdc.udtf.convert import enum_members, inet6_text

_ESCAPE = {"\\": "\\\\", "\x00": "\\0", "\n": "\\n", "\r": "\\r", "\x1a": "\\Z", "'": "''"}


def _column_type(kind: str, members: list[str]) -> str:
    """How information_schema.COLUMNS.COLUMN_TYPE spells an ENUM/SET (quotes doubled, controls escaped)."""
    return f"{kind}(" + ",".join("'" + "".join(_ESCAPE.get(c, c) for c in m) + "'" for m in members) + ")"


@given(st.sampled_from(["enum", "set"]), st.lists(st.text(min_size=0, max_size=6), min_size=1, max_size=6))
def test_enum_members_read_back_from_the_column_type(kind: str, members: list[str]) -> None:
    assert enum_members(_column_type(kind, members)) == members


@given(st.binary(min_size=16, max_size=16) | st.lists(st.sampled_from([b"\x00\x00", b"\x00\x01", b"\xff\xff"]),
                                                       min_size=8, max_size=8).map(b"".join))
def test_inet6_text_is_the_address_with_its_longest_zero_run_compressed(raw: bytes) -> None:
    text = inet6_text(raw)
    assert ipaddress.IPv6Address(text).packed == raw  # the same address
    assert text.count("::") <= 1
    if "." not in text:
        groups = [int.from_bytes(raw[i:i + 2], "big") for i in range(0, 16, 2)]
        runs = [j - i for i in range(8) for j in range(i, 9) if all(g == 0 for g in groups[i:j])]
        if max(runs) > 0:  # some zero run: exactly the longest is written as '::'
            left, _, right = text.partition("::")
            written = len([g for g in left.split(":") if g]) + len([g for g in right.split(":") if g])
            assert 8 - written == max(runs)


@given(st.text(st.characters(exclude_categories=("Cs",)), max_size=20))
def test_unicode_charsets_decode_what_mysql_stores(s: str) -> None:
    for charset, codec in (("utf8mb4", "utf-8"), ("utf16", "utf-16-be"), ("utf16le", "utf-16-le"),
                           ("utf32", "utf-32-be")):
        decode = text_decoder(charset)
        assert decode is not None and decode(s.encode(codec)) == s
    bmp = "".join(c for c in s if ord(c) <= 0xFFFF)
    ucs2 = text_decoder("ucs2")
    assert ucs2 is not None and ucs2(bmp.encode("utf-16-be")) == bmp
