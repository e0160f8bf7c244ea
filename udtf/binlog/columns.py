"""Rows events decoded column by column into Arrow arrays (issue 32): a read that hands change rows to Spark by
the batch needs no Python value per column per row.

The row reader (:mod:`.rowimage`) makes a Python object of every value, which the Spark surfaces then turn into
Arrow arrays again. Here the compiled walk of a table map's images only notes where each value starts (the
offsets of all images in one flat list, ``-1`` for NULL; the walk reads nothing but lengths); the values are
then read for a whole batch of events at once by NumPy, column by column, straight into Arrow buffers:
integers and floats as the bytes they are (YEAR from its offset), DECIMAL of up to 18 digits and BIGINT
UNSIGNED as their unscaled integers, DATE, DATETIME and TIMESTAMP as days or microseconds, UTF-8 text and
binary strings by their offsets. Any other column (ENUM, SET, BIT, JSON, TIME, spatial, text in another
character set, BINARY(n), a DECIMAL of more than 18 digits, TINYINT(1) as BOOLEAN) is walked, then read value
by value by the row reader's own code for it (:func:`udtf.binlog.rowimage.python_column`). Each gives the
value the row reader gives, zero and invalid temporal values NULL as it makes them
(``property_tests/test_values_props.py`` compares the two on random rows of every type, on both servers). A
batch in which a value is one the row reader refuses or would read otherwise (a DATE of February 31, text that
is not UTF-8) is read again by the row reader, which raises its error.

Worked example: ``(id INT NOT NULL, price DECIMAL(4,2), name VARCHAR(20) utf8mb4)``, two images, the second
with a NULL price. The walk notes ``1, 5, 7`` for the first image (the bitmap is byte 0; ``id`` at 1,
``price`` at 5, 2 bytes; ``name``'s length byte at 7) and so on; the decoding reads 4 bytes at each ``id``
offset as ``<i4``, 2 bytes at each price offset as two digit groups, and the text between each length byte
and its end.

>>> from types import SimpleNamespace as Logged
>>> from mysql_cdc.schema import ColumnInfo, TableSchema
>>> from mysql_cdc.ids import TableId
>>> from mysql_cdc.types import FieldType as F
>>> schema = TableSchema(TableId("d", "t"), (ColumnInfo("id", "int", "int", False),
...     ColumnInfo("price", "decimal", "decimal(4,2)", True, numeric_precision=4, numeric_scale=2),
...     ColumnInfo("name", "varchar", "varchar(20)", True, "utf8mb4", "utf8mb4_bin")), ("id",), ("id",))
>>> logged = [Logged(name="id", type=F.LONG, unsigned=False),
...           Logged(name="price", type=F.NEWDECIMAL, precision=4, decimals=2),
...           Logged(name="name", type=F.VARCHAR, max_length=80, collation_name="utf8mb4_bin")]
>>> plan = column_plan(logged, schema)
>>> one = bytes([0b000]) + (7).to_bytes(4, "little") + bytes([0x80 | 12, 34]) + bytes([3]) + "hé".encode()
>>> two = bytes([0b010]) + (8).to_bytes(4, "little") + bytes([1]) + b"x"
>>> places = plan.walk(one + two, 0, len(one + two))
>>> places  # three offsets per image
[1, 5, 7, 12, -1, 16]
>>> [a.to_pylist() for a in plan.arrays([(one + two, places, False)])]
[[7, 8], [Decimal('12.34'), None], ['hé', 'x']]
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, overload

import numpy as np
import pyarrow as pa

from mysql_cdc.schema import ColumnInfo, TableSchema
from mysql_cdc.types import BLOB_TYPES, TEXT_TYPES, arrow_type, spark_type, unicode_codec
from mysql_cdc.types import FieldType as F

_INT_SIZES = {F.TINY: 1, F.SHORT: 2, F.INT24: 3, F.LONG: 4, F.LONGLONG: 8}
STRINGS: set[int] = {F.STRING, F.VARCHAR, F.VAR_STRING}  # the string types a table map logs
DIG2BYTES = (0, 1, 1, 2, 2, 3, 3, 4, 4, 4)  # bytes of a DECIMAL's leftover digits
_DAYS_IN_MONTH = np.array([0, 31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31], np.int64)
# a rows event larger than this is read by the row reader (which lets the event's bytes go once read): the
# column walk keeps a copy of the images until the batch is made
MAX_EVENT_BYTES = 1 << 20
# a column's values of a batch up to this size are gathered by NumPy (an index per byte), larger ones value by value
GATHER_BYTES = 2 << 20


class Misread(Exception):
    """A value the row reader refuses or reads otherwise (an invalid date, text that is not UTF-8): the batch
    is read again by the row reader."""


@dataclass(frozen=True)
class ColumnSpec:
    """How one column's values are read: ``kind`` (int, year, float, decimal, date, datetime, timestamp, text,
    bytes, or python), ``size`` (bytes of a fixed-size value, or of a string's length), ``signed``,
    ``precision`` and ``scale`` (DECIMAL) or ``fsp`` (fractional digits), and the Arrow type of the column's
    Spark type. A ``python`` column (ENUM, JSON, TIME, ...) is walked by the statements ``skip`` and read value
    by value by ``read`` (the row reader's code for it, given the buffer and the offsets; -1: NULL)."""

    kind: str
    size: int
    arrow: Any
    signed: bool = True
    precision: int = 0
    scale: int = 0
    fsp: int = 0
    skip: tuple[str, ...] = ()
    read: Callable[[bytes, list[int]], list[Any]] | None = field(default=None, compare=False)


def column_spec(tm: Any, col: ColumnInfo, tinyint1_as_boolean: bool) -> ColumnSpec | None:
    """The reading of one column (``tm``: its table-map description, already checked to be ``col``'s by
    :func:`udtf.binlog.rowimage.misfit`), or ``None`` for a column this module does not read."""
    t = tm.type
    st = spark_type(col, tinyint1_as_boolean)
    if t in _INT_SIZES:
        if st == "BOOLEAN":  # TINYINT(1) as BOOLEAN
            return None
        if st.startswith("DECIMAL"):  # BIGINT UNSIGNED: DECIMAL(20,0)
            return ColumnSpec("decimal", 8, arrow_type(st), signed=False, precision=20)
        return ColumnSpec("int", _INT_SIZES[t], arrow_type(st), signed=not tm.unsigned)
    if t == F.YEAR:
        return ColumnSpec("year", 1, arrow_type(st))
    if t in (F.FLOAT, F.DOUBLE):
        return ColumnSpec("float", 4 if t == F.FLOAT else 8, arrow_type(st))
    if t == F.NEWDECIMAL:
        p, s = int(tm.precision), int(tm.decimals)
        return ColumnSpec("decimal", decimal_size(p, s), arrow_type(st), precision=p, scale=s) if p <= 18 else None
    if t == F.DATE and col.data_type == "date":
        return ColumnSpec("date", 3, arrow_type(st))
    if t in (F.DATETIME2, F.TIMESTAMP2):
        kind = "datetime" if t == F.DATETIME2 else "timestamp"
        fsp = int(tm.fsp)
        return ColumnSpec(kind, (5 if t == F.DATETIME2 else 4) + (fsp + 1) // 2, arrow_type(st), fsp=fsp)
    if t in STRINGS or t == F.BLOB:
        size = (2 if tm.max_length > 255 else 1) if t in STRINGS else int(tm.length_size)
        if col.data_type in TEXT_TYPES:
            ok = unicode_codec(col.charset) == "utf-8" and st == "STRING"
            return ColumnSpec("text", size, arrow_type(st)) if ok else None
        if col.data_type in BLOB_TYPES and col.data_type != "binary" and st == "BINARY":
            return ColumnSpec("bytes", size, arrow_type(st))  # not BINARY(n): padded back to n (the row reader)
    return None


def decimal_size(precision: int, scale: int) -> int:
    """Bytes of a DECIMAL(precision, scale) value in MySQL's binary format: 4 per 9 digits, fewer for the rest.

    >>> decimal_size(15, 2), decimal_size(65, 30), decimal_size(2, 2)
    (7, 30, 1)
    """
    whole, part = divmod(precision - scale, 9)
    frac, rest = divmod(scale, 9)
    return DIG2BYTES[part] + 4 * whole + 4 * frac + DIG2BYTES[rest]


def _walk_lines(spec: ColumnSpec) -> list[str]:
    """Statements that move ``p`` past a value."""
    if spec.kind == "python":
        return list(spec.skip)
    if spec.kind not in ("text", "bytes"):
        return [f"p += {spec.size}"]
    length = "b[p]" if spec.size == 1 else " | ".join(f"b[p + {k}] << {8 * k}" if k else "b[p]"
                                                       for k in range(spec.size))
    return [f"p += {spec.size} + ({length})"]


def bitmap_expr(size: int) -> str:
    """The NULL bitmap of ``size`` bytes at ``p`` as an integer (bit i: column i is NULL)."""
    if size <= 3:
        return " | ".join(f"b[p + {k}] << {8 * k}" if k else "b[p]" for k in range(size))
    return f"int.from_bytes(b[p:p + {size}], 'little')"


class ColumnPlan:
    """The column reading of one table map: :meth:`walk` notes where each image's values are, :meth:`arrays`
    reads them for many events at once."""

    def __init__(self, specs: Sequence[ColumnSpec], name: str) -> None:
        self.specs = tuple(specs)
        n = len(specs)
        nb = (n + 7) // 8
        body = ["def walk(b, p, end):", "    out = []", "    extend = out.extend", "    while p < end:",
                f"        n = {bitmap_expr(nb)}", f"        p += {nb}", f"        if not n & {(1 << n) - 1}:"]
        # no NULL in the image (the common case): straight on, fixed sizes added up (MariaDB sets the bitmap's
        # unused high bits, MySQL clears them: only the columns' bits count)
        off = 0
        for i, spec in enumerate(specs):
            body.append(f"            c{i} = p + {off}" if off else f"            c{i} = p")
            if spec.kind in ("text", "bytes"):
                length = " | ".join(f"b[c{i} + {k}] << {8 * k}" if k else f"b[c{i}]" for k in range(spec.size))
                body.append(f"            p = c{i} + {spec.size} + ({length})")
                off = 0
            elif spec.kind == "python":
                if off:
                    body.append(f"            p = c{i}")
                body.extend("            " + line for line in spec.skip)
                off = 0
            else:
                off += spec.size
        if off:
            body.append(f"            p += {off}")
        body.append("        else:")
        for i, spec in enumerate(specs):
            body += [f"            if n & {1 << i}:", f"                c{i} = -1", "            else:",
                     f"                c{i} = p"]
            body.extend("                " + line for line in _walk_lines(spec))
        body.append(f"        extend(({''.join(f'c{i}, ' for i in range(n))}))")
        body += ["    if p != end:", "        raise ValueError(f'the images end at byte {p}, the event at {end}')",
                 "    return out"]
        env: dict[str, Any] = {}
        exec(compile("\n".join(body), f"<column walk of {name}>", "exec"), env)  # integers and fixed names only
        self.walk: Callable[[bytes, int, int], list[int]] = env["walk"]

    def arrays(self, pieces: Sequence[tuple[bytes, list[int], bool]],
               keep: frozenset[int] | None = None) -> list[pa.Array]:
        """The values of ``pieces`` (each an event's image bytes, its walk, and whether it is an update event
        whose before images keep only the columns ``keep``: the others NULL) as one Arrow array per column,
        images in order. Raises :class:`Misread` where the row reader would read a value otherwise."""
        width = len(self.specs)
        bases, at, cut = [], 0, []
        datas: list[bytes] = []
        base_of: dict[int, int] = {}  # parts of one event (ColumnImages.part) share its bytes: joined once
        for data, places, update in pieces:
            if id(data) not in base_of:
                base_of[id(data)] = at
                datas.append(data)
                at += len(data)
            bases.append(base_of[id(data)])
            k = len(places) // width
            cut.append(np.arange(k) % 2 == 0 if update else np.zeros(k, np.bool_))
        joined = b"".join([*datas, bytes(16)])
        buf = np.frombuffer(joined, np.uint8)
        mats = [np.array(places, np.int64).reshape(-1, width) for _, places, _ in pieces]
        pos = (np.concatenate([np.where(m >= 0, m + base, -1) for m, base in zip(mats, bases)]) if mats
               else np.zeros((0, width), np.int64))
        before = np.concatenate(cut) if cut else np.zeros(0, np.bool_)
        out = []
        for i, spec in enumerate(self.specs):
            null = pos[:, i] < 0
            if keep is not None and i not in keep:
                null = null | before
            if spec.kind == "python":
                assert spec.read is not None
                try:
                    out.append(pa.array(spec.read(joined, np.where(null, -1, pos[:, i]).tolist()), type=spec.arrow))
                except (ValueError, IndexError, struct.error, pa.ArrowException) as e:  # the row reader says what
                    raise Misread(str(e)) from e
                continue
            out.append(_read(spec, buf, np.where(null, 0, pos[:, i]), null))
        return out


def column_plan(columns: Sequence[Any], schema: TableSchema, tinyint1_as_boolean: bool = False,
                python: Callable[[int, Any, ColumnInfo], ColumnSpec] | None = None) -> ColumnPlan | None:
    """The column plan of a table map whose columns are ``schema``'s (see :func:`udtf.binlog.rowimage.misfit`):
    a column this module does not read is ``python``'s (the row reader's code, value by value), or, without
    it, the table map has no plan (``None``)."""
    specs = []
    for i, (tm, col) in enumerate(zip(columns, schema.columns)):
        spec = column_spec(tm, col, tinyint1_as_boolean)
        if spec is None:
            if python is None:
                return None
            spec = python(i, tm, col)
        specs.append(spec)
    return ColumnPlan(specs, str(schema.table)) if specs else None


# ---- reading one column of many images ----


def _bytes_at(buf: np.ndarray, at: np.ndarray, size: int) -> np.ndarray:
    """The ``size`` bytes at each offset, as an (images, size) array."""
    return buf[at[:, None] + np.arange(size)]


def _big_endian(raw: np.ndarray) -> np.ndarray:
    """Rows of bytes (at most 8) as unsigned big-endian integers."""
    v = np.zeros(len(raw), np.uint64)
    for k in range(raw.shape[1]):
        v = (v << np.uint64(8)) | raw[:, k].astype(np.uint64)
    return v


def _little_endian(raw: np.ndarray) -> np.ndarray:
    v = np.zeros(len(raw), np.int64)
    for k in range(raw.shape[1]):
        v |= raw[:, k].astype(np.int64) << (8 * k)
    return v


def _validity(null: np.ndarray) -> pa.Buffer | None:
    return pa.py_buffer(np.packbits(~null, bitorder="little")) if null.any() else None


def _days(year: np.ndarray, month: np.ndarray, day: np.ndarray) -> np.ndarray:
    """Days since 1970-01-01 of proleptic Gregorian dates (the civil calendar's count, by whole eras).

    >>> _days(np.array([1970, 2000, 1]), np.array([1, 3, 1]), np.array([1, 1, 1])).tolist()
    [0, 11017, -719162]
    """
    y = year - (month <= 2)
    era = y // 400
    yoe = y - era * 400
    doy = (153 * ((month + 9) % 12) + 2) // 5 + day - 1
    return era * 146097 + yoe * 365 + yoe // 4 - yoe // 100 + doy - 719468


def _valid_date(year: np.ndarray, month: np.ndarray, day: np.ndarray) -> np.ndarray:
    leap = (year % 4 == 0) & ((year % 100 != 0) | (year % 400 == 0))
    dim = _DAYS_IN_MONTH[np.clip(month, 0, 12)] + ((month == 2) & leap)
    return (year >= 1) & (year <= 9999) & (month >= 1) & (month <= 12) & (day >= 1) & (day <= dim)


def _fraction(buf: np.ndarray, at: np.ndarray, fsp: int, null: np.ndarray) -> np.ndarray:
    """Microseconds of a temporal value's fraction at ``at`` (``(fsp + 1) // 2`` bytes, big-endian)."""
    if not fsp:
        return np.zeros(len(at), np.int64)
    nbytes = (fsp + 1) // 2
    us = _big_endian(_bytes_at(buf, at, nbytes)).astype(np.int64)
    if (us[~null] >= 1 << (8 * nbytes - 1)).any():  # a negative fraction: none is written for these types
        raise Misread("a negative fraction")
    if fsp % 2:
        us //= 10
    us = us * 10 ** (6 - fsp)
    if (us[~null] > 999_999).any():  # what Python's datetime refuses: the row reader's error
        raise Misread("a fraction of a second or more")
    return us


def _read(spec: ColumnSpec, buf: np.ndarray, at: np.ndarray, null: np.ndarray) -> pa.Array:
    n = len(at)
    kind = spec.kind
    if kind in ("text", "bytes"):
        lengths = np.where(null, 0, _little_endian(_bytes_at(buf, at, spec.size)))
        offsets = np.zeros(n + 1, np.int64)
        np.cumsum(lengths, out=offsets[1:])
        if offsets[-1] >= 1 << 31:
            raise Misread("a batch of more than 2 GB of text")
        starts = at + spec.size
        if offsets[-1] <= GATHER_BYTES:  # by an index of each byte (3 x 8 bytes per byte while it is made)
            data = buf[np.repeat(starts - offsets[:-1], lengths) + np.arange(offsets[-1])]
        else:  # large values: each one copied whole
            view = buf.data  # a memoryview: slices of it copy nothing
            data = np.frombuffer(b"".join([view[s:s + k] for s, k in zip(starts.tolist(), lengths.tolist())]),
                                 np.uint8)
        arr = pa.Array.from_buffers(pa.string() if kind == "text" else pa.binary(), n, [
            _validity(null), pa.py_buffer(offsets.astype(np.int32)), pa.py_buffer(data)])
        if kind == "text":
            try:
                arr.validate(full=True)
            except pa.ArrowInvalid as e:
                raise Misread("text that is not UTF-8") from e
        return arr if arr.type == spec.arrow else arr.cast(spec.arrow)
    if kind == "int":
        if spec.size == 3:
            v = _little_endian(_bytes_at(buf, at, 3))
            if spec.signed:
                v = (v ^ 0x800000) - 0x800000
        else:
            dtype = np.dtype(f"<{'i' if spec.signed else 'u'}{spec.size}")
            v = np.ascontiguousarray(_bytes_at(buf, at, spec.size)).view(dtype).ravel()
        return pa.array(v, mask=null if null.any() else None).cast(spec.arrow)
    if kind == "float":
        v = np.ascontiguousarray(_bytes_at(buf, at, spec.size)).view(f"<f{spec.size}").ravel()
        return pa.array(v, mask=null if null.any() else None)
    if kind == "decimal" and not spec.signed:  # BIGINT UNSIGNED: the 8 bytes are the unscaled value
        words = np.zeros((n, 2), np.uint64)
        words[:, 0] = np.where(null, 0, np.ascontiguousarray(_bytes_at(buf, at, 8)).view("<u8").ravel())
        return pa.Array.from_buffers(spec.arrow, n, [_validity(null), pa.py_buffer(words)])
    if kind == "decimal":
        return _decimals(spec, buf, at, null)
    if kind == "year":  # the offset from 1900; 0 is YEAR 0000
        v = buf[at].astype(np.int16)
        return pa.array(np.where(v == 0, 0, v + 1900).astype(np.int16), mask=null if null.any() else None)
    if kind == "date":
        v = _little_endian(_bytes_at(buf, at, 3))
        year, month, day = v >> 9 & 0x7FFF, v >> 5 & 15, v & 31
        null = null | ~_valid_date(year, month, day)  # the row reader's NULL: zero parts, year 0, 2024-02-30
        days = np.where(null, 0, _days(year, month, day)).astype(np.int32)
        return pa.Array.from_buffers(pa.date32(), n, [_validity(null), pa.py_buffer(days)])
    if kind == "datetime":
        v = _big_endian(_bytes_at(buf, at, 5)).astype(np.int64)
        ym = v >> 22 & 0x1FFFF
        year, month, day = ym // 13, ym % 13, v >> 17 & 31
        hour, minute, second = v >> 12 & 31, v >> 6 & 63, v & 63
        # what Python's datetime refuses the row reader makes NULL (zero dates among them)
        bad = ~_valid_date(year, month, day) | (hour > 23) | (minute > 59) | (second > 59)
        null = null | bad
        us = _fraction(buf, at + 5, spec.fsp, null)
        micros = (_days(year, month, day) * 86400 + hour * 3600 + minute * 60 + second) * 1_000_000 + us
        return pa.Array.from_buffers(spec.arrow, n, [_validity(null), pa.py_buffer(np.where(null, 0, micros))])
    if kind == "timestamp":
        secs = _big_endian(_bytes_at(buf, at, 4)).astype(np.int64)
        secs = (secs ^ 0x80000000) - 0x80000000
        us = _fraction(buf, at + 4, spec.fsp, null)
        null = null | ((secs == 0) & (us == 0))  # the zero TIMESTAMP
        return pa.Array.from_buffers(spec.arrow, n, [_validity(null),
                                                     pa.py_buffer(np.where(null, 0, secs * 1_000_000 + us))])
    raise AssertionError(kind)  # pragma: no cover - column_spec makes only the kinds above


def _decimals(spec: ColumnSpec, buf: np.ndarray, at: np.ndarray, null: np.ndarray) -> pa.Array:
    """MySQL's binary DECIMAL (see :func:`udtf.binlog.rowimage.decimal_reader`) as Arrow's decimal128: the
    digit groups of each value read as integers, joined into the unscaled value (at most 18 digits: int64)."""
    p, s = spec.precision, spec.scale
    raw = _bytes_at(buf, at, spec.size).copy()
    negative = raw[:, 0] & 0x80 == 0
    raw ^= np.where(negative, 0xFF, 0).astype(np.uint8)[:, None]
    raw[:, 0] &= 0x7F
    whole, part = divmod(p - s, 9)
    frac, rest = divmod(s, 9)
    fields = [(DIG2BYTES[part], part)] + [(4, 9)] * whole + [(4, 9)] * frac + [(DIG2BYTES[rest], rest)]
    value = np.zeros(len(at), np.int64)
    k = 0
    for nbytes, digits in fields:
        if nbytes:
            group = _big_endian(raw[:, k:k + nbytes]).astype(np.int64)
            if (group[~null] >= 10 ** digits).any():
                raise Misread("a DECIMAL digit group out of range")
            value = value * 10 ** digits + group
            k += nbytes
    value = np.where(negative, -value, value)
    words = np.empty((len(at), 2), np.int64)
    words[:, 0] = np.where(null, 0, value)
    words[:, 1] = words[:, 0] >> 63
    return pa.Array.from_buffers(spec.arrow, len(at), [_validity(null), pa.py_buffer(words)])


class ColumnImages(Sequence[tuple[Any, ...]]):
    """A rows event's images as its walk (:meth:`ColumnPlan.walk`) and a copy of its image bytes: what the
    Spark surfaces read into Arrow columns by the batch (:func:`column_arrays`). It is a sequence of row tuples
    too, read by the row reader when something asks for them (the emit rule where it looks at keys). Where
    :meth:`cut_before` cuts the before images, the values it drops are not read (as a row read with the table's
    ``before_keep`` does not read them): a value the row reader would refuse there raises nothing."""

    __slots__ = ("_cut", "_row_reader", "_rows", "_whole", "data", "keep", "places", "plan", "span", "update")

    def __init__(self, plan: ColumnPlan, data: bytes, places: list[int], update: bool,
                 keep: frozenset[int] | None, row_reader: Callable[[bytes, int, int], list[tuple[Any, ...]]],
                 span: tuple[int, int] | None = None) -> None:
        self.plan, self.data, self.places, self.update, self.keep = plan, data, places, update, keep
        self._row_reader = row_reader
        self._rows: list[tuple[Any, ...]] | None = None
        self._cut: frozenset[int] | None = None  # before images cut after the row read (cut_before)
        self.span = span  # the images first..end of the event's, when a part (places are theirs alone)
        self._whole: ColumnImages | None = None  # a part's event, whose row read its parts share

    def cut_before(self, keep: frozenset[int]) -> ColumnImages:
        """The images with each before image cut to the columns ``keep`` (an update event's; others as
        they are), as a row read of them cuts them too."""
        if not self.update or (self.keep is not None and self.keep <= keep):
            return self
        got = ColumnImages(self.plan, self.data, self.places, True, keep if self.keep is None else keep & self.keep,
                           self._row_reader, self.span)
        got._cut = got.keep
        got._whole = self._whole
        return got

    def part(self, first: int, end: int) -> ColumnImages:
        """Images ``first`` up to ``end`` of the event (an update event's from a before image: ``first``
        even), as a walked event of their own: the emitted ones of an event the emit rule cut
        (:mod:`udtf.binlog.emit_columns`)."""
        assert self.span is None and self._cut is None and not (self.update and first % 2)
        width = len(self.plan.specs)
        got = ColumnImages(self.plan, self.data, self.places[first * width:end * width], self.update, self.keep,
                           self._row_reader, (first, end))
        got._whole = self
        return got

    def int_column(self, i: int) -> tuple[np.ndarray, np.ndarray] | None:
        """Column ``i``'s values as a NumPy integer array and where they are NULL, when it is read as Arrow
        integers (``None`` otherwise): the chunk key the emit rule places images by."""
        spec = self.plan.specs[i]
        if spec.kind != "int" or not pa.types.is_integer(spec.arrow):
            return None
        at = np.array(self.places[i::len(self.plan.specs)], np.int64)
        null = at < 0
        values = _read(spec, np.frombuffer(self.data + bytes(16), np.uint8), np.where(null, 0, at), null)
        return values.fill_null(0).to_numpy(), null

    def rows(self) -> list[tuple[Any, ...]]:
        if self._rows is None:
            if self._whole is not None and self.span is not None:  # the event's row read, once for its parts
                rows = self._whole.rows()[self.span[0]:self.span[1]]
            else:
                rows = self._row_reader(self.data, 0, len(self.data))
            cut = self._cut
            if cut is not None:
                rows = [v if k % 2 else tuple(x if i in cut else None for i, x in enumerate(v))
                        for k, v in enumerate(rows)]
            self._rows = rows
        return self._rows

    def __len__(self) -> int:
        return len(self.places) // len(self.plan.specs)

    @overload
    def __getitem__(self, i: int) -> tuple[Any, ...]: ...

    @overload
    def __getitem__(self, i: slice) -> Sequence[tuple[Any, ...]]: ...

    def __getitem__(self, i: int | slice) -> Any:
        return self.rows()[i]

    def __iter__(self) -> Iterator[tuple[Any, ...]]:
        return iter(self.rows())


def column_arrays(parts: Sequence[Sequence[tuple[Any, ...]]], types: Sequence[Any]) -> list[pa.Array]:
    """The images of ``parts`` (each a run's: :class:`ColumnImages` or a list of row tuples), in order, as one
    Arrow array of ``types`` per column: consecutive parts of one column plan read at once, the rest (and a
    batch the plan misreads) from their row tuples.

    >>> column_arrays([[(1, "a")], [(2, None)]], [pa.int32(), pa.string()])[1].to_pylist()
    ['a', None]
    """
    chunks: list[list[pa.Array]] = [[] for _ in types]
    i = 0
    while i < len(parts):
        part = parts[i]
        j = i + 1
        if isinstance(part, ColumnImages):
            # one read for the consecutive events of one plan (inserts, deletes and updates, whose before images
            # are cut to one set of columns or none)
            group, keep = [part], part.keep if part.update else None
            while j < len(parts):
                nxt = parts[j]
                if not isinstance(nxt, ColumnImages) or nxt.plan is not part.plan:
                    break
                if nxt.update and nxt.keep is not None:
                    if keep is not None and keep != nxt.keep:
                        break
                    keep = nxt.keep
                group.append(nxt)
                j += 1
            try:
                arrays = part.plan.arrays([(g.data, g.places, g.update and g.keep is not None) for g in group], keep)
            except Misread:
                arrays = _row_arrays([r for g in group for r in g.rows()], types)
        else:
            while j < len(parts) and not isinstance(parts[j], ColumnImages):
                j += 1
            arrays = _row_arrays([r for p in parts[i:j] for r in p], types)
        for k, (a, t) in enumerate(zip(arrays, types)):
            chunks[k].append(a if a.type == t else a.cast(t))
        i = j
    return [c[0] if len(c) == 1 else pa.concat_arrays(c) if c else pa.array([], t) for c, t in zip(chunks, types)]


def _row_arrays(rows: list[tuple[Any, ...]], types: Sequence[Any]) -> list[pa.Array]:
    if not rows:
        return [pa.array([], type=t) for t in types]
    return [pa.array(col, type=t) for col, t in zip(zip(*rows), types)]
