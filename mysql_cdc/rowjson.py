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
import binascii
import datetime as dt
import decimal
import json
import re
import sys
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from mysql_cdc.errors import SchemaChangedError
from mysql_cdc.large_values import LargeValueError, LargeValues, reference_size

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


def _python_texts(col: pa.Array) -> list[str | None]:
    """JSON texts of a column's values one by one in Python (the reference :func:`encode_column` keeps to)."""
    enc = _encoder(col.type)
    return [None if v is None else _DUMPS(enc(v)) for v in col.to_pylist()]


_DUMPS = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode
# characters a JSON string escapes (RE2 syntax): such a string is written by Python's encoder, the rest as is
_ESCAPED = r'[\x00-\x1f"\\]'


def _quoted(texts: pa.Array, col: pa.Array | None = None) -> pa.Array:
    """``texts`` in double quotes; with ``col`` (the strings themselves), those holding a character JSON escapes
    are written by Python's encoder instead (few in real text)."""
    out = pc.binary_join_element_wise('"', texts, '"', "")
    if col is None or not len(col):
        return out
    escaped = pc.match_substring_regex(col, _ESCAPED)
    if pc.any(escaped).as_py():
        out = pa.array([_DUMPS(v) if e else t for v, t, e in zip(col.to_pylist(), out.to_pylist(),
                                                                  escaped.to_pylist())], pa.string())
    return out


def _value_texts(col: pa.Array) -> pa.Array:
    """One column's values as JSON texts (a string array, nulls null), made on the whole column where Arrow's
    kernels give the text :func:`_python_texts` gives, else by it (binary as base64, a DECIMAL Arrow would
    write with an exponent, a float Arrow writes without a point, other types)."""
    t = col.type
    if pa.types.is_integer(t) or pa.types.is_boolean(t):
        return pc.cast(col, pa.string())
    if pa.types.is_floating(t):
        if pc.any(pc.is_inf(col)).as_py() or pc.any(pc.is_nan(col)).as_py():
            raise ValueError("Out of range float values are not JSON compliant")
        texts = pc.cast(pc.cast(col, pa.float64()), pa.string())
        # Arrow writes 3.0 as 3, -0.0 as -0 and 1e-05 as 0.00001: each reads back as the same double, but an
        # integer text would come back from json as an int (and -0 as 0), so those get Python's text
        plain = pc.invert(pc.match_substring_regex(texts, r"[.eE]"))
        if pc.any(plain).as_py():
            texts = pc.if_else(plain, pa.array(_python_texts(col), pa.string()), texts)
        return texts
    if pa.types.is_decimal(t):
        texts = pc.cast(col, pa.string())
        exp = pc.match_substring(texts, "E")  # Arrow writes 0 at scale 30 as 0E-30: Python's digits for those
        if pc.any(exp).as_py():
            return _quoted(pc.if_else(exp, pa.array([None if v is None else _digits(v) for v in col.to_pylist()],
                                                    pa.string()), texts))
        return _quoted(texts)
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return _quoted(col.cast(pa.string()), col)
    if pa.types.is_date32(t):
        return _quoted(pc.cast(col, pa.string()))
    if pa.types.is_timestamp(t) and t.unit == "us" and t.tz in (None, "UTC", "+00:00"):
        return _quoted(pc.strftime(col, format="%Y-%m-%dT%H:%M:%S" + ("+00:00" if t.tz else "")))
    if pa.types.is_duration(t) and t.unit == "us":
        return pc.cast(pc.cast(col, pa.int64()), pa.string())
    if (pa.types.is_binary(t) or pa.types.is_large_binary(t)) and _has_large(col):
        texts = _base64_texts(col)
        if texts is not None:
            return texts
    return pa.array(_python_texts(col), pa.string())


_LARGE = 1 << 20  # a value this long or longer: a binary column is written and read on Arrow's buffers


def _has_large(col: pa.Array) -> bool:
    """Whether a binary or string column holds a value of :data:`_LARGE` bytes or more (where a value by value
    path in Python objects costs copies of it; for small values it is the faster one)."""
    return bool(len(col)) and col.null_count < len(col) and pc.max(pc.binary_length(col)).as_py() >= _LARGE


def _value_spans(col: pa.Array) -> tuple[np.ndarray, memoryview]:
    """Where each value of a binary or string column is in its data buffer (``n + 1`` offsets), and the buffer."""
    large = pa.types.is_large_binary(col.type) or pa.types.is_large_string(col.type)
    offsets = np.frombuffer(col.buffers()[1], np.int64 if large else np.int32)[col.offset:col.offset + len(col) + 1]
    data = col.buffers()[2]
    return offsets.astype(np.int64), memoryview(b"" if data is None else data)


def _validity(col: pa.Array) -> pa.Buffer | None:
    """A column's nulls as a validity bitmap at offset 0 (``None``: no null)."""
    return pc.is_valid(col).buffers()[1] if col.null_count else None


def _base64_texts(col: pa.Array) -> pa.Array | None:
    """A binary column's values as JSON texts (base64 in double quotes, which need no escape), written into one
    buffer value after value from the column's own buffer: a value's only copy on the way is its base64 (a
    256 MB value took four as Python objects). ``None`` where the texts would pass 2 GiB (a string array's
    most): the caller writes them otherwise.

    >>> _base64_texts(pa.array([b"\\x00\\xff", None, b""])).to_pylist()
    ['"AP8="', None, '""']
    """
    offsets, data = _value_spans(col)
    valid = np.asarray(pc.is_valid(col))
    sizes = np.where(valid, 4 * ((np.diff(offsets) + 2) // 3) + 2, 0)
    ends = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    if ends[-1] >= 2**31:
        return None
    out = bytearray(int(ends[-1]))
    at, spans, b64 = ends.tolist(), offsets.tolist(), binascii.b2a_base64
    for i in np.flatnonzero(valid).tolist():
        a, b = at[i], at[i + 1]
        out[a] = out[b - 1] = 34  # "
        out[a + 1:b - 1] = b64(data[spans[i]:spans[i + 1]], newline=False)
    return pa.StringArray.from_buffers(len(col), pa.py_buffer(ends.astype(np.int32)), pa.py_buffer(out),
                                       _validity(col), col.null_count)


def _unbase64(col: pa.Array, t: pa.DataType) -> pa.Array:
    """Base64 texts (a string column read from JSON) as binary values of type ``t``, decoded from the column's
    buffer into one buffer value after value (no Python string of a value; a value's bytes once on the way).

    >>> _unbase64(pa.array(["AP8=", None, ""]), pa.binary()).to_pylist()
    [b'\\x00\\xff', None, b'']
    """
    offsets, data = _value_spans(col)
    valid = np.asarray(pc.is_valid(col))
    lengths = np.diff(offsets)
    if np.any(valid & (lengths % 4 != 0)):  # strict base64 comes in fours (a short one would read as empty)
        bad = int(np.flatnonzero(valid & (lengths % 4 != 0))[0])
        raise binascii.Error(f"a base64 text of {int(lengths[bad])} characters (not a multiple of 4)")
    raw = np.frombuffer(data, np.uint8) if len(data) else np.zeros(1, np.uint8)
    last = np.maximum(offsets[1:] - 1, 0)  # the "=" that end a text: 0, 1 or 2 bytes fewer
    pads = (lengths > 0) * ((raw[last] == 61).astype(np.int64) + ((lengths > 1) & (raw[np.maximum(last - 1, 0)] == 61)))
    sizes = np.where(valid, lengths // 4 * 3 - pads, 0)
    ends = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    large = pa.types.is_large_binary(t)
    if not large and ends[-1] >= 2**31:
        return pa.array([None if v is None else _unb64(v) for v in col.to_pylist()], t)
    filled = np.flatnonzero(sizes).tolist()
    out: Any = None if len(filled) == 1 else bytearray(int(ends[-1]))
    at, spans = ends.tolist(), offsets.tolist()
    for i in filled:
        piece = data[spans[i]:spans[i + 1]]
        value = binascii.a2b_base64(piece, strict_mode=True) if _STRICT else _unb64(bytes(piece).decode("ascii"))
        if len(value) != at[i + 1] - at[i]:
            raise ValueError(f"a base64 text of {spans[i + 1] - spans[i]} characters does not hold "
                             f"{at[i + 1] - at[i]} bytes")
        if out is None:  # the one value that is not empty (those before it are, so it starts at 0): its buffer
            out = value
        else:
            out[at[i]:at[i + 1]] = value
    if out is None:
        out = b""
    return pa.Array.from_buffers(t, len(col), [_validity(col), pa.py_buffer(ends.astype(np.int64 if large else
                                                                                     np.int32)),
                                                pa.py_buffer(out)], col.null_count)


_STRICT = sys.version_info >= (3, 11)  # binascii's strict base64 (b64decode's validate=True, without a copy)


def encode_column(batch: pa.RecordBatch, large: LargeValues | None = None) -> pa.Array:
    """One JSON object per row of ``batch``, keys in column order (see the module's table), as a string array
    made column by column: each column's values become JSON texts on the whole column (:func:`_value_texts`),
    then each row's pieces are joined by Arrow. The texts are :func:`encode_rows`' (floats may be written
    otherwise, as the same double: Arrow writes 1e-05 as 0.00001).

    >>> import decimal
    >>> b = pa.record_batch([pa.array([1, None]), pa.array(['a"b', "c"]),
    ...                      pa.array([decimal.Decimal("0E-3"), None], pa.decimal128(5, 3))], names=["k", "s", "d"])
    >>> encode_column(b).to_pylist()
    ['{"k":1,"s":"a\\\\"b","d":"0.000"}', '{"k":null,"s":"c","d":null}']
    """
    n = batch.num_rows
    if not batch.num_columns:
        return pa.array(["{}"] * n, pa.string())
    if large is not None and n:
        batch, refs = _set_aside(batch, large)
        if refs:
            return _with_refs(encode_column(batch), refs)
    if n and any(_is_bytes(col.type) and _has_large(col) for col in batch.columns):
        whole = _written_in_place(batch)
        if whole is not None:
            return whole
    pieces: list[Any] = []
    for i, (name, col) in enumerate(zip(batch.schema.names, batch.columns)):
        pieces.append(("{" if i == 0 else ",") + _DUMPS(name) + ":")
        pieces.append(pc.fill_null(_value_texts(col), "null"))
    pieces.append("}")
    if n == 0:
        return pa.array([], pa.string())
    return pc.binary_join_element_wise(*pieces, "")


def _set_aside(batch: pa.RecordBatch, large: LargeValues) -> tuple[pa.RecordBatch, dict[int, dict[str, Any]]]:
    """``batch`` with its values of ``large.min_bytes`` or more (binary and string columns) written into
    ``large``'s folder and NULL in their place, and each such row's references (row -> column -> reference)."""
    refs: dict[int, dict[str, Any]] = {}
    columns = list(batch.columns)
    for i, (name, col) in enumerate(zip(batch.schema.names, columns)):
        if not _is_bytes(col.type) or col.null_count == len(col):
            continue
        lengths = pc.binary_length(col)
        if pc.max(lengths).as_py() < large.min_bytes:
            continue
        big = np.asarray(pc.fill_null(pc.greater_equal(lengths, large.min_bytes), False))
        offsets, data = _value_spans(col)
        for r in np.flatnonzero(big).tolist():
            refs.setdefault(r, {})[name] = large.put(data[int(offsets[r]):int(offsets[r + 1])])
        columns[i] = pc.if_else(pa.array(big), pa.nulls(len(col), col.type), col)
    return pa.RecordBatch.from_arrays(columns, schema=batch.schema), refs


def _with_refs(texts: pa.Array, refs: dict[int, dict[str, Any]]) -> pa.Array:
    """Rows' texts with the references of the values set aside where their NULLs are: each such row read as
    JSON and written again (its values the same: a number reads back as the double or integer it was written
    from), the few rows that held a large value."""
    rows = sorted(refs)
    out = []
    for r in rows:
        row = json.loads(texts[r].as_py())
        for name, ref in refs[r].items():
            if row.get(name, 0) is not None:
                raise AssertionError(f"no NULL of column {name!r} in a row's text")
            row[name] = ref
        out.append(_DUMPS(row))
    return _replace_rows(texts, rows, out)


def _replace_rows(texts: pa.Array, rows: list[int], out: list[str]) -> pa.Array:
    """``texts`` with the texts of ``rows`` (ascending) replaced by ``out``."""
    mask = np.zeros(len(texts), bool)
    mask[rows] = True
    return pc.replace_with_mask(texts, pa.array(mask), pa.array(out, texts.type))


_REF = r':\s*\{'  # in a row's text where a value is an object (a large value's reference), and also where a
# string value or a column's name holds ':{': such a row is read as JSON to know


def _take_refs(texts: pa.Array) -> tuple[pa.Array, dict[str, dict[int, Any]]]:
    """Rows' texts with the references of large values replaced by NULL, and the references (column -> row ->
    reference)."""
    maybe = np.flatnonzero(np.asarray(pc.fill_null(pc.match_substring_regex(texts, _REF), False))).tolist()
    refs: dict[str, dict[int, Any]] = {}
    rows, out = [], []
    for r in maybe:
        obj = json.loads(texts[r].as_py())
        named = {k: v for k, v in obj.items() if isinstance(v, dict)} if isinstance(obj, dict) else {}
        if named:
            for k, v in named.items():
                refs.setdefault(k, {})[r] = v
                obj[k] = None
            rows.append(r)
            out.append(_DUMPS(obj))
    return (_replace_rows(texts, rows, out) if rows else texts), refs


def _put_back(col: pa.Array, t: pa.DataType, at: dict[int, Any], large: LargeValues | None, name: str) -> pa.Array:
    """Column ``col`` (type ``t``, NULL where its large values were) with those values read from their files."""
    if large is None:
        raise LargeValueError(f"a row's value of column {name!r} was written into a file (option large_value_dir): "
                              "read the rows with that folder (the sync does)")
    if not _is_bytes(t):
        raise LargeValueError(f"a row names a file for its value of column {name!r}, of type {t}, which holds no "
                              "large values")
    sizes = np.where(np.asarray(pc.is_valid(col)), np.diff(_value_spans(col)[0]), 0)
    for r, ref in at.items():
        sizes[r] = reference_size(ref)
    ends = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    wide = pa.types.is_large_binary(t) or pa.types.is_large_string(t)
    if not wide and ends[-1] >= 2**31:
        raise LargeValueError(f"the values of column {name!r} of one batch pass 2 GiB: make batches smaller "
                              "(max_bytes_per_batch)")
    out = bytearray(int(ends[-1]))  # the one copy of each large value
    view = memoryview(out)
    offsets, data = _value_spans(col)
    data = data.cast("B")  # Arrow's buffers are signed chars
    for r in sorted(set(np.flatnonzero(sizes).tolist()) | set(at)):  # an empty value's file too: it is checked
        if r in at:
            large.read_into(at[r], view[int(ends[r]):int(ends[r + 1])])
        else:
            view[int(ends[r]):int(ends[r + 1])] = data[int(offsets[r]):int(offsets[r + 1])]
    valid = np.asarray(pc.is_valid(col))
    valid[list(at)] = True
    nulls = int(len(valid) - valid.sum())
    return pa.Array.from_buffers(t, len(col), [pa.array(valid).buffers()[1] if nulls else None,
                                               pa.py_buffer(ends.astype(np.int64 if wide else np.int32)),
                                               pa.py_buffer(out)], nulls)


_B64_STEP = 3 << 20  # bytes of a large value base64-encoded (or escaped) at a time; a multiple of 3: base64
# pieces then need no padding
_ESCAPES = {c: json.dumps(chr(c)).encode()[1:-1] for c in [*range(0x20), 0x22, 0x5C]}  # what JSON makes of them
_ESCAPE_EXTRA = np.zeros(256, np.int64)  # bytes an escape adds (every such character is one byte in UTF-8)
for _c, _e in _ESCAPES.items():
    _ESCAPE_EXTRA[_c] = len(_e) - 1
_ESCAPE_RE = re.compile(rb'[\x00-\x1f"\\]')


def _is_bytes(t: pa.DataType) -> bool:
    return pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_string(t) or pa.types.is_large_string(t)


def _escaped_size(value: memoryview) -> int:
    """The length of a UTF-8 text once JSON-escaped (without its quotes), counted a piece at a time."""
    size = len(value)
    for start in range(0, len(value), _B64_STEP):
        size += int(_ESCAPE_EXTRA[np.frombuffer(value[start:start + _B64_STEP], np.uint8)].sum())
    return size


def _written_in_place(batch: pa.RecordBatch) -> pa.Array | None:
    """:func:`encode_column` for a batch with a large value (a binary or string column holding one of
    :data:`_LARGE` bytes or more): the rows' texts are written into one buffer, the large columns' values
    straight into it, base64-encoded (binary) or JSON-escaped (strings) a piece of :data:`_B64_STEP` bytes at a
    time, and the small columns between them as Arrow's join of their texts. A value's text is then its only
    copy: joining whole columns' texts made one more, and base64 of a whole value another (a 256 MB value took
    721 MB above it to encode, 353 MB here, measured). Escaping in bytes is exact: every character JSON escapes
    is one byte in UTF-8, and no other character's bytes are below 0x80. ``None`` where the texts would pass
    2 GiB (a string array's most).

    >>> b = pa.record_batch([pa.array([1, 2]), pa.array([b"\\x00\\xff", None]), pa.array(['a"b', "c"])],
    ...                     names=["k", "b", "s"])
    >>> _written_in_place(b).to_pylist() == encode_rows_python(b)
    True
    """
    n = batch.num_rows
    pieces: list[tuple[str, Any, list[int]]] = []  # (how, what, each row's length), in the text's order
    lengths = np.zeros(n, np.int64)
    small: list[Any] = []  # the pieces of small columns not written yet: joined by Arrow into one

    def add(how: str, what: Any, sizes: np.ndarray) -> None:
        nonlocal lengths
        pieces.append((how, what, sizes.tolist()))
        lengths = lengths + sizes

    def flush() -> None:
        if small:
            texts = pc.binary_join_element_wise(*small, "")  # (the pieces start with a column's name)
            if isinstance(texts, pa.Scalar):  # constants alone
                texts = pa.array([texts.as_py()] * n, pa.string())
            offsets, data = _value_spans(texts)
            add("texts", (offsets.tolist(), data.cast("B")), np.diff(offsets))
            small.clear()

    for i, (name, col) in enumerate(zip(batch.schema.names, batch.columns)):
        small.append(("{" if i == 0 else ",") + _DUMPS(name) + ":")
        t = col.type
        if not (_is_bytes(t) and _has_large(col)):
            small.append(pc.fill_null(_value_texts(col), "null"))
            continue
        flush()
        offsets, data = _value_spans(col)
        valid = np.asarray(pc.is_valid(col))
        data = data.cast("B")
        if pa.types.is_binary(t) or pa.types.is_large_binary(t):
            add("base64", (offsets.tolist(), data, valid.tolist()),
                np.where(valid, 4 * ((np.diff(offsets) + 2) // 3) + 2, 4))
            continue
        sizes = np.where(valid, np.diff(offsets) + 2, 4)
        escaped = np.flatnonzero(np.asarray(pc.fill_null(pc.match_substring_regex(col, _ESCAPED), False))).tolist()
        for r in escaped:
            sizes[r] = _escaped_size(data[offsets[r]:offsets[r + 1]]) + 2
        add("string", (offsets.tolist(), data, valid.tolist(), set(escaped)), sizes)
    small.append("}")
    flush()
    ends = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    if ends[-1] >= 2**31:
        return None
    out = bytearray(int(ends[-1]))
    into = memoryview(out)  # assigned through a view: a bytearray's slice assignment copies its source first
    at = ends[:-1].tolist()  # where each row's next piece goes
    b64 = binascii.b2a_base64

    def escape(m: re.Match[bytes]) -> bytes:
        return _ESCAPES[m.group()[0]]

    for how, what, lens in pieces:
        for r in range(n):
            a, size = at[r], lens[r]
            at[r] = a + size
            if how == "texts":
                into[a:a + size] = what[1][what[0][r]:what[0][r + 1]]
                continue
            offsets, data, valid = what[0], what[1], what[2]
            if not valid[r]:  # a NULL of a large column
                into[a:a + 4] = b"null"
                continue
            out[a] = out[a + size - 1] = 34  # "
            if how == "string" and r not in what[3]:
                into[a + 1:a + size - 1] = data[offsets[r]:offsets[r + 1]]
                continue
            pos = a + 1
            for start in range(offsets[r], offsets[r + 1], _B64_STEP):
                chunk = data[start:min(start + _B64_STEP, offsets[r + 1])]
                piece = b64(chunk, newline=False) if how == "base64" else _ESCAPE_RE.sub(escape, chunk)
                into[pos:pos + len(piece)] = piece
                pos += len(piece)
            if pos != a + size - 1:
                raise AssertionError(f"a large value's text is {pos - a - 1} bytes, not the {size - 2} counted")
    return pa.StringArray.from_buffers(n, pa.py_buffer(ends.astype(np.int32)), pa.py_buffer(out))


def encode_rows(batch: pa.RecordBatch) -> list[str]:
    """One JSON object per row of ``batch``, keys in column order (see the module's table): the texts of
    :func:`encode_column`, as Python strings."""
    return list(encode_column(batch).to_pylist())


def encode_rows_python(batch: pa.RecordBatch) -> list[str]:
    """:func:`encode_rows` made value by value in Python: the reference the columnar encoder is tested against."""
    names = batch.schema.names
    columns = []
    for col in batch.columns:
        enc = _encoder(col.type)
        values = col.to_pylist()
        columns.append(values if enc is _identity else [None if v is None else enc(v) for v in values])
    return [_DUMPS(dict(zip(names, row))) for row in zip(*columns)] if columns else ["{}"] * batch.num_rows


def decode_rows(texts: Sequence[str] | pa.Array, schema: pa.Schema,
                large: LargeValues | None = None) -> pa.RecordBatch:
    """The typed rows again: ``schema`` is the table's Arrow schema (a single-table read's columns). A text
    with other columns than ``schema`` was written with another schema of the table: an error, never a guess.

    Read on whole columns by Arrow's JSON reader (the texts as lines, each column read as its JSON type, then
    cast: DECIMAL digits, dates and times from their text; base64 alone is decoded value by value); a text the
    reader cannot take (a key ``schema`` lacks, a value of another type), or one that lacks a column, is read by
    :func:`decode_rows_python`, which names the cause. Keys are matched by name: a text whose keys are
    ``schema``'s in another order is read (Python's reader refuses it). A value written into a file
    (:mod:`mysql_cdc.large_values`) is read from ``large``'s folder."""
    arr = texts if isinstance(texts, pa.Array) else pa.array(texts, pa.string())
    if len(arr) and not arr.null_count:
        try:  # Arrow's reader refuses an object where a column's value is (a large value's reference)
            return _decode_columns(arr, schema)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, _Missing):
            pass
    if len(arr):
        arr, refs = _take_refs(arr)
        if refs:
            batch = decode_rows(arr, schema)
            for name, at in refs.items():
                if name not in schema.names:
                    raise SchemaChangedError(f"a row image names a large value of column {name!r}, not one of "
                                             f"{schema.names!r}: it was written with another schema of its table")
                i = schema.get_field_index(name)
                batch = batch.set_column(i, schema.field(i), _put_back(batch.column(i), schema.field(i).type, at,
                                                                       large, name))
            return batch
    return decode_rows_python(arr.to_pylist(), schema)


class _Missing(Exception):
    """Internal: a text lacks a column (the JSON reader gives it as null)."""


def _json_type(t: pa.DataType) -> pa.DataType:
    """What a column of type ``t`` is in the JSON text (the module's table)."""
    if pa.types.is_integer(t) or pa.types.is_boolean(t):
        return t
    if pa.types.is_floating(t):
        return pa.float64()
    if pa.types.is_duration(t):
        return pa.int64()
    return pa.string()


def _decode_columns(texts: pa.Array, schema: pa.Schema) -> pa.RecordBatch:
    import pyarrow.json as pj

    # the texts as lines of one buffer (no text holds a raw line break: JSON escapes it)
    if len(texts) == 1 and (pa.types.is_string(texts.type) or pa.types.is_large_string(texts.type)) \
            and texts.buffers()[2] is not None:
        # one text (a row of large values comes alone): read where it is
        (start, end), _ = _value_spans(texts)
        data = texts.buffers()[2].slice(int(start), int(end - start))
    else:
        whole = pa.ListArray.from_arrays(pa.array([0, len(texts)], pa.int32()), texts.cast(pa.large_string()))
        data = pc.binary_join(whole, pa.scalar("\n", pa.large_string()))[0].as_buffer()
        del whole
    table = pj.read_json(pa.BufferReader(data), read_options=pj.ReadOptions(
                             use_threads=False, block_size=min(data.size + 1, 2**31 - 1)),
                         parse_options=pj.ParseOptions(
                             explicit_schema=pa.schema([(f.name, _json_type(f.type)) for f in schema]),
                             unexpected_field_behavior="error"))
    if table.num_rows != len(texts):
        raise _Missing
    arrays = []
    for f in schema:
        col = table.column(f.name).combine_chunks()
        if col.null_count:  # a null read is a JSON null or a missing key: the key must be in its text (after
            # { or , : inside a JSON string, and so inside another key, a quote is always escaped)
            key = "[{,]" + re.escape(_DUMPS(f.name) + ":")
            absent = pc.and_(col.is_null(), pc.invert(pc.match_substring_regex(texts, key)))
            if pc.any(absent).as_py():
                raise _Missing
        t = f.type
        if (pa.types.is_binary(t) or pa.types.is_large_binary(t)) and _has_large(col):
            col = _unbase64(col, t)
        elif pa.types.is_binary(t) or pa.types.is_large_binary(t):
            col = pa.array([None if v is None else _unb64(v) for v in col.to_pylist()], t)
        elif col.type != t:
            col = pc.cast(col, t)
        arrays.append(col)
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


def decode_rows_python(texts: Sequence[str], schema: pa.Schema) -> pa.RecordBatch:
    """:func:`decode_rows` value by value in Python, with a check of every text's columns."""
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
