"""MariaDB's compressed columns (``VARCHAR(n) COMPRESSED``, ``BLOB COMPRESSED``, ``TEXT COMPRESSED``, since 10.3):
the binlog logs them as types of their own, VARCHAR_COMPRESSED (141: a VARCHAR's metadata, its maximum length in
bytes, the header's one counted, in 2 bytes) and BLOB_COMPRESSED (140: a BLOB's, the size of its length), and a
value as stored: compressed.

A stored value is empty, or a header byte and the rest: high nibble 0, the value follows as it is; high nibble
8, zlib: the header's low 3 bits say how many bytes (big-endian) hold the value's length, its bit 3 that the
stream is raw deflate (``column_compression_zlib_wrap`` OFF, the default) rather than zlib's format.

Worked example: ``'abcabcabc'`` compressed, and a short value stored as it is:

>>> import zlib
>>> z = zlib.compressobj(6, zlib.DEFLATED, -15)
>>> stored = bytes([0x80 | 0x08 | 1, 9]) + z.compress(b"abcabcabc") + z.flush()
>>> inflated(stored), inflated(b"\\x00ab"), inflated(b"")
(b'abcabcabc', b'ab', b'')
"""

from __future__ import annotations

import zlib

from mysql_cdc.errors import BinlogError

BLOB_COMPRESSED = 140
VARCHAR_COMPRESSED = 141
COMPRESSED_TYPES = frozenset({VARCHAR_COMPRESSED, BLOB_COMPRESSED})


def inflated(stored: bytes) -> bytes:
    """The value a compressed column stores as ``stored``. Raises :class:`BinlogError` for a method other than
    none and zlib, or a length other than the header's."""
    if not stored:
        return b""
    head = stored[0]
    if head >> 4 == 0:
        return bytes(stored[1:])
    if head >> 4 != 8:
        raise BinlogError(f"a compressed column's value has method {head >> 4} (header {head:#04x}), which this "
                          "reader does not know (MariaDB has none and zlib, 0 and 8): report it with the server's "
                          "version")
    n = head & 7
    length = int.from_bytes(stored[1:1 + n], "big")
    try:
        out = zlib.decompressobj(-zlib.MAX_WBITS if head & 8 else zlib.MAX_WBITS).decompress(stored[1 + n:])
    except zlib.error as e:
        raise BinlogError(f"a compressed column's value could not be inflated ({e})") from e
    if len(out) != length:
        raise BinlogError(f"a compressed column's value inflated to {len(out)} bytes, its header says {length}")
    return out
