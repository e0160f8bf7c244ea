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

BLOB_COMPRESSED = 140
VARCHAR_COMPRESSED = 141
COMPRESSED_TYPES = frozenset({VARCHAR_COMPRESSED, BLOB_COMPRESSED})


def inflated(stored: bytes) -> bytes:
    """The value a compressed column stores as ``stored``. Raises ValueError (which the row readers report with
    the event and the table) for a method other than none and zlib, a value cut short, a stream that does not end
    where the header's length does, or one zlib refuses.

    >>> z = zlib.compressobj(6, zlib.DEFLATED, -15)
    >>> whole = bytes([0x89, 9]) + z.compress(b"abcabcabc") + z.flush()
    >>> for bad in (whole[:-1], b"\\x89", bytes([0x89, 8]) + whole[2:], b"\\x50ab"):
    ...     try:
    ...         inflated(bad)
    ...     except ValueError as e:
    ...         print(str(e)[:60])
    a compressed value's stream does not end after its 9 bytes
    a compressed value is cut short: its header says 1 length by
    a compressed value's stream does not end after its 8 bytes
    a compressed value has method 5 (header 0x50), which this re
    """
    if not stored:
        return b""
    head = stored[0]
    if head >> 4 == 0:
        return bytes(stored[1:])
    if head >> 4 != 8:
        raise ValueError(f"a compressed value has method {head >> 4} (header {head:#04x}), which this reader does "
                         "not know (MariaDB's are 0, none, and 8, zlib): report it with the server's version")
    n = head & 7
    if len(stored) < 1 + n:
        raise ValueError(f"a compressed value is cut short: its header says {n} length bytes, {len(stored) - 1} "
                         "follow")
    length = int.from_bytes(stored[1:1 + n], "big")
    d = zlib.decompressobj(-zlib.MAX_WBITS if head & 8 else zlib.MAX_WBITS)
    try:
        out = d.decompress(memoryview(stored)[1 + n:], length + 1)  # at most one byte more than it says
    except zlib.error as e:
        raise ValueError(f"a compressed value could not be inflated ({e})") from e
    if not d.eof or len(out) != length:
        raise ValueError(f"a compressed value's stream does not end after its {length} bytes")
    return out
