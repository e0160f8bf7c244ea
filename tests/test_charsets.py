"""Text in the binlog is decoded here, not by the server: each single-byte character set's decoder must give,
for every one of the 256 bytes, what the server's own conversion to Unicode gives (a SELECT's value), on MySQL
9.7 and MariaDB 10.11. Multi-byte sets are either Unicode encodings (exact by definition, and covered through
the binlog by tests/test_values.py) or delivered as bytes."""

from __future__ import annotations

import pytest

from mysql_cdc.types import _SINGLE_BYTE, TEXT_CHARSETS, text_decoder
from tests.servers import ServerProcess


def test_every_byte_of_every_single_byte_charset_decodes_as_the_server_converts_it(server: ServerProcess) -> None:
    info = server.info
    assert info is not None
    conn = info.connect(root=True)
    cur = conn.cursor()
    wrong = []
    for charset in sorted(_SINGLE_BYTE):
        decode = text_decoder(charset)
        assert decode is not None
        exprs = ", ".join(f"CONVERT(UNHEX('{b:02X}') USING {charset})" for b in range(256))
        cur.execute(f"SELECT {exprs}")
        row = cur.fetchone()
        for b, server_text in enumerate(row):
            ours = decode(bytes([b]))
            if ours != server_text:
                wrong.append(f"{charset} 0x{b:02X}: server {server_text!r}, ours {ours!r}")
    conn.close()
    assert not wrong, "\n".join(wrong)


@pytest.mark.parametrize("charset", ["big5", "gbk", "sjis", "ujis", "euckr", "swe7", "armscii8", "binary"])
def test_charsets_without_an_exact_decoder_have_none(charset: str) -> None:
    assert charset not in TEXT_CHARSETS and text_decoder(charset) is None
