"""Row images decoded by a plan made once per table map, straight to the canonical values of the columns.

python-mysql-replication decodes a rows event column by column through one generic dispatch per value (a chain
of type tests, a packet read, a bitmap lookup and a dict entry each time); this project then converts the dict
to the canonical row. Here a table map (the binlog's description of a table before its rows events) is
compiled once into a Python function made for exactly its columns: each value is one slice or one
``unpack_from`` at a running offset, the NULL bitmap is read once per image as an integer, and the value goes
straight to its canonical form (text decoded by the column's character set, members named, ...). The library
still frames events and parses table maps.

The plan reproduces the library's decoding of each type exactly, then applies the same conversion
(:func:`udtf.convert.binlog_fixup`, then :func:`udtf.convert.value_converter`), so a row decodes to the same
values either way; ``property_tests/test_values_props.py`` checks that on random rows of every type, on both
servers. Temporal columns in the old formats (a MariaDB table of before 10.1.2) are read as :mod:`.oldtemporal`
says, with the recorded schema's precision. A table map the plan does not cover falls back to the library: a
column whose logged type, character set or precision differs from the table's recorded schema (a row from before
a DDL), and images without every column (binlog_row_image MINIMAL/NOBLOB, refused by the library path).

Worked example: a table map of ``(id INT NOT NULL, name VARCHAR(20) utf8mb4)`` becomes::

    def images(b, p, end):
        out = []
        append = out.append
        while p < end:
            n = b[p]  # the NULL bitmap: 2 columns, 1 byte
            p += 1
            if n & 1:
                v0 = None
            else:
                v0 = u0(b, p)[0]  # INT: struct '<i'
                p += 4
            if n & 2:
                v1 = None
            else:
                ln = b[p]  # VARCHAR(20) in utf8mb4: at most 80 bytes, so a 1-byte length
                p += 1
                v1 = b[p:p + ln].decode('utf-8')
                p += ln
            append((v0, v1, ))
        if p != end:
            raise ValueError(...)
        return out
"""

from __future__ import annotations

import datetime as dt
import functools
import logging
import struct
from collections.abc import Callable, Collection, Mapping, Sequence
from decimal import Decimal
from typing import Any

from mysql_cdc.errors import BinlogError
from mysql_cdc.ids import TableId
from mysql_cdc.jsontext import JSON_NULL
from mysql_cdc.schema import ColumnInfo, TableSchema
from mysql_cdc.types import BLOB_TYPES, GEO_TYPES, MARIADB_TEXT, TEXT_TYPES, arrow_type, spark_type, unicode_codec
from mysql_cdc.types import FieldType as F
from mysql_cdc.udtf.binlog.columns import (
    DIG2BYTES,
    MAX_EVENT_BYTES,
    STRINGS,
    ColumnImages,
    ColumnPlan,
    ColumnSpec,
    bitmap_expr,
    column_plan,
    decimal_size,
)
from mysql_cdc.udtf.binlog.compressed import BLOB_COMPRESSED, COMPRESSED_TYPES, VARCHAR_COMPRESSED, inflated
from mysql_cdc.udtf.binlog.oldtemporal import OLD_TYPES, kept_old, old_size, old_value
from mysql_cdc.udtf.convert import binlog_fixup, value_converter

# what each column type (information_schema DATA_TYPE) is logged as; a type not here is left to the library
_LOGGED: dict[str, set[int]] = {
    "tinyint": {F.TINY}, "smallint": {F.SHORT}, "mediumint": {F.INT24}, "int": {F.LONG}, "integer": {F.LONG},
    "bigint": {F.LONGLONG}, "float": {F.FLOAT}, "double": {F.DOUBLE}, "real": {F.DOUBLE},
    "decimal": {F.NEWDECIMAL}, "numeric": {F.NEWDECIMAL}, "date": {F.DATE},
    # DATETIME, TIME, TIMESTAMP: also in the old formats (a MariaDB table of before 10.1.2: oldtemporal.py)
    "datetime": {F.DATETIME2, F.DATETIME}, "timestamp": {F.TIMESTAMP2, F.TIMESTAMP}, "time": {F.TIME2, F.TIME},
    "year": {F.YEAR}, "bit": {F.BIT}, "enum": {F.ENUM},
    "set": {F.SET}, "json": {F.JSON, F.BLOB},
    # VARCHAR, VARBINARY, TEXT and BLOB: also MariaDB's COMPRESSED columns (compressed.py)
    "char": STRINGS, "varchar": STRINGS | {VARCHAR_COMPRESSED}, "binary": STRINGS,
    "varbinary": STRINGS | {VARCHAR_COMPRESSED},
    **{t: {F.BLOB, BLOB_COMPRESSED} for t in TEXT_TYPES - {"char", "varchar"}},
    **{t: {F.BLOB, BLOB_COMPRESSED} for t in BLOB_TYPES - {"binary", "varbinary"}},
    **{t: {F.GEOMETRY} for t in GEO_TYPES}, **{t: STRINGS for t in MARIADB_TEXT},
}
_INTS = {F.TINY: (1, "b"), F.SHORT: (2, "h"), F.LONG: (4, "i"), F.LONGLONG: (8, "q"), F.FLOAT: (4, "f"),
         F.DOUBLE: (8, "d")}
_EPOCH = dt.datetime(1970, 1, 1)
ImageReader = Callable[[bytes, int, int], list[tuple[Any, ...]]]


def _decimal_lines(v: str, precision: int, scale: int) -> list[str]:
    """Statements that read a DECIMAL(precision, scale) at offset ``p`` of ``b`` into ``v`` (see
    :func:`decimal_reader`); they use the names ``x``, ``fr``, ``ip`` and ``Decimal``."""
    whole = (precision - scale) // 9
    frac, rest = divmod(scale, 9)
    size = decimal_size(precision, scale)
    top = 1 << (8 * size - 1)
    mask = ((1 << (8 * size)) - 1) ^ top
    lines = [f"x = int.from_bytes(b[p:p + {size}], 'big')", f"sign = '' if x & {top} else '-'",
             f"x = x & {mask} if x & {top} else ~x & {mask}", "fr = 0"]
    # the fields from the right: the fraction's leftover digits, its groups of nine, the whole part's groups
    digits = 0
    for bits, n in [(8 * DIG2BYTES[rest], rest)] * bool(rest) + [(32, 9)] * frac:
        lines += [f"fr += (x & {(1 << bits) - 1}) * {10 ** digits}", f"x >>= {bits}"]
        digits += n
    lines.append("ip = 0")
    digits = 0
    for _ in range(whole):
        lines += [f"ip += (x & {(1 << 32) - 1}) * {10 ** digits}", "x >>= 32"]
        digits += 9
    lines.append(f"ip += x * {10 ** digits}")  # the leading field (empty: 0)
    text = f"f'{{sign}}{{ip}}.{{fr:0{scale}d}}'" if scale else "f'{sign}{ip}'"
    return [*lines, f"{v} = Decimal({text})", f"p += {size}"]


def decimal_reader(precision: int, scale: int) -> Callable[[bytes], Decimal]:
    """A reader of MySQL's binary DECIMAL: the sign in the first bit, the digits in groups of nine (4 bytes,
    big-endian) with the leftover digits in fewer bytes, every bit inverted for a negative value. Gives the
    Decimal python-mysql-replication gives (its digits as text, so -0.00 stays -0.00).

    >>> read = decimal_reader(15, 2)  # 4 leading digits in 2 bytes, a group of 9, 2 fraction digits in 1 byte
    >>> read(bytes.fromhex("80000000000c22")), read(bytes.fromhex("7ffffffffff3dd"))
    (Decimal('12.34'), Decimal('-12.34'))
    """
    env: dict[str, Any] = {"Decimal": Decimal}
    body = ["def read(b):", "    p = 0", *("    " + line for line in _decimal_lines("v", precision, scale)),
            "    return v"]
    exec(compile("\n".join(body), f"<DECIMAL({precision},{scale})>", "exec"), env)  # made above of integers only
    read: Callable[[bytes], Decimal] = env["read"]
    return read


def _fraction(raw: bytes, fsp: int) -> int:
    """Microseconds of a temporal value's fractional part (1-3 bytes, big-endian, signed), as the library
    reads it."""
    if not fsp:
        return 0
    us = int.from_bytes(raw, "big", signed=True)
    if fsp % 2:
        us = int(us / 10)
    return us * 10 ** (6 - fsp)


def _fsp_bytes(fsp: int) -> int:
    return (fsp + 1) // 2


def datetime2(raw: bytes, fsp: int) -> dt.datetime | None:
    """DATETIME in the binlog's 5-byte format (sign, year*13+month, day, hour, minute, second), then the
    fraction; None for a value Python cannot hold (zero dates), as the library gives.

    >>> datetime2(bytes.fromhex("99b2a4d2f3") + bytes.fromhex("01e240"), 6)
    datetime.datetime(2024, 2, 18, 13, 11, 51, 123456)
    """
    data = int.from_bytes(raw[:5], "big")
    ym = (data >> 22) & 0x1FFFF
    try:
        t = dt.datetime(int(ym / 13), ym % 13, (data >> 17) & 31, (data >> 12) & 31, (data >> 6) & 63, data & 63)
    except ValueError:
        return None
    us = _fraction(raw[5:], fsp)
    return t.replace(microsecond=us) if us > 0 else t


def timestamp2(raw: bytes, fsp: int) -> dt.datetime:
    """TIMESTAMP: seconds since the epoch (4 bytes, big-endian), then the fraction; a naive UTC datetime."""
    t = _EPOCH + dt.timedelta(seconds=int.from_bytes(raw[:4], "big", signed=True))
    us = _fraction(raw[4:], fsp)
    return t.replace(microsecond=us) if us > 0 else t


def time2(raw: bytes, fsp: int) -> dt.timedelta:
    """TIME in the binlog's 3-byte format (sign, hour, minute, second), then the fraction, exactly as the
    library decodes it (a negative value with a fraction is then fixed by
    :func:`udtf.convert.negative_time_fix`).

    >>> time2(bytes.fromhex("80f1e8"), 0)  # 15:07:40
    datetime.timedelta(seconds=54460)
    """
    data = int.from_bytes(raw[:3], "big", signed=True)
    sign = 1 if (data >> 23) & 1 else -1
    if sign == -1:
        data = ~data + 1
    return dt.timedelta(hours=(data >> 12) & 1023, minutes=(data >> 6) & 63, seconds=data & 63,
                        microseconds=_fraction(raw[3:], fsp)) * sign


def date3(raw: bytes) -> dt.date | None:
    """DATE: day, month and year packed in 3 bytes, little-endian; None for a date Python has not (a zero part,
    year 0, or a day its month lacks, which the server keeps under ALLOW_INVALID_DATES), as a SELECT gives it.

    >>> date3((2024 * 512 + 2 * 32 + 18).to_bytes(3, "little")), date3(bytes(3))
    (datetime.date(2024, 2, 18), None)
    >>> date3((2024 * 512 + 2 * 32 + 30).to_bytes(3, "little"))  # 2024-02-30
    """
    v = int.from_bytes(raw, "little")
    try:
        return dt.date((v >> 9) & 0x7FFF, (v >> 5) & 15, v & 31)
    except ValueError:
        return None


def _json(raw: bytes) -> Any:
    from pymysqlreplication.json_binary import parse_json

    if not raw:
        return JSON_NULL
    v = parse_json(raw[0], raw[1:])
    return JSON_NULL if v is None else v


def _set_reader(members: Sequence[Any]) -> Callable[[int], frozenset[Any]]:
    def read(mask: int) -> frozenset[Any]:
        return frozenset(m for i, m in enumerate(members) if mask & (1 << i))

    return read


def _post(col: ColumnInfo, tinyint1_as_boolean: bool) -> Callable[[Any], Any] | None:
    """The conversion the library path applies to a decoded value: the binlog fix-up, then the canonical one."""
    fix, canon = binlog_fixup(col), value_converter(col, tinyint1_as_boolean)
    if fix is None or canon is None:
        return fix or canon

    def both(v: Any) -> Any:
        v = fix(v)
        return None if v is None else canon(v)

    return both


def _same_collation(logged: str | None, recorded: str | None) -> bool:
    """The table map's collation (named by the client library, which says utf8 for utf8mb3) is the column's.

    >>> _same_collation("utf8_general_ci", "utf8mb3_general_ci"), _same_collation("binary", None)
    (True, True)
    >>> _same_collation("latin1_swedish_ci", "utf8mb4_bin")
    False
    """
    logged, recorded = logged or "binary", recorded or "binary"  # binary strings: no collation recorded
    return logged.replace("utf8_", "utf8mb3_", 1) == recorded.replace("utf8_", "utf8mb3_", 1)


def _collated(t: int, col: ColumnInfo) -> bool:
    """Whether a column logged as type ``t`` has its collation in the table map: strings (MariaDB's compressed
    VARCHAR too), and TEXT (a BLOB type: a BLOB's is binary, no collation recorded)."""
    return t in STRINGS or t == VARCHAR_COMPRESSED or (t in (F.BLOB, BLOB_COMPRESSED) and col.data_type in TEXT_TYPES)


def misfit(columns: Sequence[Any], schema: TableSchema) -> str | None:
    """Why a table map (python-mysql-replication's column descriptions) is not logged as ``schema``'s columns
    are, so that its rows are left to the library (a row from before a DDL: a DATETIME, TIME or TIMESTAMP logged
    in an old format where the schema has it in the new one, or the other way round, see
    :func:`.oldtemporal.kept_old`); ``None`` when it is."""
    if len(columns) != len(schema.columns):
        return f"{len(columns)} columns in the table map, {len(schema.columns)} in the schema"
    for tm, col in zip(columns, schema.columns):
        why = None
        if tm.name != col.name:
            why = f"named {tm.name!r} in the table map"
        elif tm.type not in _LOGGED.get(col.data_type, ()):
            why = f"logged as type {tm.type}"
        elif tm.type in OLD_TYPES and kept_old(col.data_type, col.column_type) != tm.type:
            why = f"logged in an old format (type {tm.type}), recorded in the new one"
        elif tm.type in (F.TIME2, F.DATETIME2, F.TIMESTAMP2) and kept_old(col.data_type, col.column_type):
            why = "logged in the new format, recorded in an old one"
        elif tm.type == F.NEWDECIMAL and (tm.precision, tm.decimals) != (col.numeric_precision, col.numeric_scale):
            why = f"logged as DECIMAL({tm.precision},{tm.decimals})"
        elif tm.type in (F.TIME2, F.DATETIME2, F.TIMESTAMP2) and tm.fsp != (col.datetime_precision or 0):
            why = f"logged with fractional precision {tm.fsp}"
        elif tm.type in (F.TINY, F.SHORT, F.INT24, F.LONG, F.LONGLONG) and bool(tm.unsigned) != col.unsigned:
            why = f"logged {'un' if not tm.unsigned else ''}signed"
        elif tm.type in (F.ENUM, F.SET) and (tm.enum_values if tm.type == F.ENUM else tm.set_values) is None:
            why = "logged without its members"
        elif _collated(tm.type, col) and not _same_collation(getattr(tm, "collation_name", None), col.collation):
            why = f"logged with collation {getattr(tm, 'collation_name', None)!r}"
        if why is not None:
            return f"column {col.name!r} ({col.column_type}) is {why}"
    return None


def _column_code(i: int, tm: Any, col: ColumnInfo, fast_text: bool, env: dict[str, Any],
                 tinyint1_as_boolean: bool) -> list[str]:
    """Statements that read column ``i``'s value at offset ``p`` of ``b`` into ``v{i}`` and move ``p``."""
    t = tm.type
    v = f"v{i}"
    post = _post(col, tinyint1_as_boolean)
    lines: list[str]
    if t in _INTS:
        size, code = _INTS[t]
        if t != F.FLOAT and t != F.DOUBLE and tm.unsigned:
            code = code.upper()
        env[f"u{i}"] = struct.Struct("<" + code).unpack_from
        lines = [f"{v} = u{i}(b, p)[0]", f"p += {size}"]
    elif t == F.INT24:
        lines = [f"{v} = int.from_bytes(b[p:p + 3], 'little', signed={not tm.unsigned})", "p += 3"]
    elif t == F.YEAR:
        lines = [f"{v} = b[p] + 1900", "p += 1"]
    elif t == F.NEWDECIMAL:
        env["Decimal"] = Decimal
        lines = _decimal_lines(v, int(tm.precision), int(tm.decimals))
    elif t == F.DATE:
        # date3 inline; a DATE column's converter passes dates and None through unchanged
        env["date"] = dt.date
        lines = ["x = int.from_bytes(b[p:p + 3], 'little')", "p += 3", "try:",
                 f"    {v} = date(x >> 9 & 32767, x >> 5 & 15, x & 31)",
                 "except ValueError:",  # a zero part, year 0, or a day its month lacks (ALLOW_INVALID_DATES)
                 f"    {v} = None"]
        post = None if col.data_type == "date" else post
    elif t in (F.DATETIME2, F.TIMESTAMP2, F.TIME2):
        size = {F.DATETIME2: 5, F.TIMESTAMP2: 4, F.TIME2: 3}[t] + _fsp_bytes(tm.fsp)
        env[f"r{i}"] = {F.DATETIME2: datetime2, F.TIMESTAMP2: timestamp2, F.TIME2: time2}[t]
        lines = [f"{v} = r{i}(b[p:p + {size}], {int(tm.fsp)})", f"p += {size}"]
    elif t in OLD_TYPES:  # the old formats: their size and scale from the column's precision
        fsp = int(col.datetime_precision or 0)
        env["old_value"] = old_value
        lines = [f"{v} = old_value({int(t)}, b[p:p + {old_size(t, fsp)}], {fsp})", f"p += {old_size(t, fsp)}"]
        if t == F.TIME:  # exact already: not the library's negative TIME with a fraction that the fix-up undoes
            post = value_converter(col, tinyint1_as_boolean)
    elif t in STRINGS or t in (F.BLOB, F.GEOMETRY, F.JSON):
        size, length = _length_prefix(tm)
        lines = [f"ln = {length}", f"p += {size}", f"{v} = b[p:p + ln]", "p += ln"]
        if t == F.JSON:
            env["json_value"] = _json
            lines[2] = f"{v} = json_value(b[p:p + ln])"
        codec = unicode_codec(col.charset) if col.data_type in TEXT_TYPES else None
        if fast_text and codec is not None and spark_type(col, tinyint1_as_boolean) == "STRING":
            lines[2] = f"{v} = b[p:p + ln].decode({codec!r})"
            post = None
    elif t in COMPRESSED_TYPES:  # a VARCHAR's length or a BLOB's, then the stored value to inflate
        size, length = _length_prefix(tm)
        env["inflated"] = inflated
        lines = [f"ln = {length}", f"p += {size}", f"{v} = inflated(b[p:p + ln])", "p += ln"]
    elif t == F.ENUM:
        env[f"m{i}"] = list(tm.enum_values)
        index = "b[p]" if tm.size == 1 else "int.from_bytes(b[p:p + 2], 'little')"
        lines = [f"{v} = m{i}[{index}]", f"p += {int(tm.size)}"]
    elif t == F.SET:
        env[f"m{i}"] = _set_reader(list(tm.set_values))
        lines = [f"{v} = m{i}(int.from_bytes(b[p:p + {int(tm.size)}], 'little'))", f"p += {int(tm.size)}"]
    elif t == F.BIT:
        nbytes = (int(tm.bits) + 7) // 8
        lines = [f"{v} = int.from_bytes(b[p:p + {nbytes}], 'big') & {(1 << int(tm.bits)) - 1}", f"p += {nbytes}"]
    else:  # pragma: no cover - misfit admits only the types above
        raise AssertionError(t)
    if post is not None:
        env[f"f{i}"] = post
        lines.append(f"{v} = f{i}({v})")
    return lines


def compile_images(columns: Sequence[Any], schema: TableSchema, tinyint1_as_boolean: bool = False,
                   fast_text: bool = True, before_keep: Collection[int] | None = None) -> ImageReader | None:
    """The image reader of one table map (``columns``: python-mysql-replication's column descriptions), or
    ``None`` when the table map does not describe ``schema``'s columns (the library decodes those rows). The
    reader takes the event's row data, a start and an end offset, and gives every image in it. With
    ``before_keep`` (column places) it reads an update event's images, whose before images keep only those
    columns' values, the others ``None`` and not read (option ``before_images`` key: a mirror needs an update's
    before image for its key alone; a 256 MB value was read, then dropped).

    >>> from types import SimpleNamespace as Logged
    >>> from mysql_cdc.schema import ColumnInfo
    >>> schema = TableSchema(TableId("d", "t"), (ColumnInfo("id", "int", "int", False), ColumnInfo(
    ...     "name", "varchar", "varchar(20)", True, "utf8mb4", "utf8mb4_bin")), ("id",), ("id",))
    >>> logged = [Logged(name="id", type=F.LONG, unsigned=False),
    ...           Logged(name="name", type=F.VARCHAR, max_length=80, collation_name="utf8mb4_bin")]
    >>> images = compile_images(logged, schema)
    >>> row1 = bytes([0b00]) + (7).to_bytes(4, "little") + bytes([3]) + "hé".encode()  # no NULL; 7, 'hé'
    >>> row2 = bytes([0b10]) + (8).to_bytes(4, "little")  # name is NULL: not in the image
    >>> images(row1 + row2, 0, len(row1 + row2))
    [(7, 'hé'), (8, None)]
    >>> compile_counter(logged, schema)(row1 + row2, 0, len(row1 + row2))  # the same images, counted
    2
    >>> compile_images([Logged(name="id", type=F.LONGLONG, unsigned=False)], schema) is None  # not this table's
    True
    >>> update = row1 + bytes([0b00]) + (7).to_bytes(4, "little") + bytes([1]) + b"x"  # 'hé' -> 'x'
    >>> compile_images(logged, schema, before_keep={0})(update, 0, len(update))
    [(7, None), (7, 'x')]
    """
    if misfit(columns, schema) is not None:
        return None
    n = len(columns)
    env: dict[str, Any] = {}
    body = ["def images(b, p, end):", "    out = []", "    append = out.append", "    while p < end:"]

    def image(keep: Collection[int] | None) -> None:
        body.extend((f"        n = {bitmap_expr((n + 7) // 8)}", f"        p += {(n + 7) // 8}"))
        for i, (tm, col) in enumerate(zip(columns, schema.columns)):
            if keep is not None and i not in keep:
                body.append(f"        v{i} = None")
                body.append(f"        if not n & {1 << i}:")
                body.extend("            " + line for line in _skip_lines(tm, col))
                continue
            body.append(f"        if n & {1 << i}:")
            body.append(f"            v{i} = None")
            body.append("        else:")
            body.extend("            " + line for line in _column_code(i, tm, col, fast_text, env,
                                                                      tinyint1_as_boolean))
        body.append(f"        append(({''.join(f'v{i}, ' for i in range(n))}))")

    if before_keep is not None:  # an update event's images: before, after, before, after, ...
        image(before_keep)
        body.append("        if p >= end:")
        body.append("            raise ValueError(f'an update event ends at byte {p} after a before image')")
    image(None)
    body.append("    if p != end:")
    body.append("        raise ValueError(f'the images end at byte {p}, the event at {end}')")
    body.append("    return out")
    code = compile("\n".join(body), f"<row images of {schema.table}>", "exec")
    exec(code, env)  # source made above from integers and fixed names only
    images: ImageReader = env["images"]
    return images



def python_column(i: int, tm: Any, col: ColumnInfo, tinyint1_as_boolean: bool = False) -> ColumnSpec:
    """A column the column reader (:mod:`.columns`) reads value by value, by this module's code for it: its
    walk skips the value, its reader takes the buffer and the values' offsets (-1: NULL).

    >>> from types import SimpleNamespace as Logged
    >>> spec = python_column(0, Logged(type=F.BIT, bits=16), ColumnInfo("f", "bit", "bit(16)", True,
    ...                                                                 numeric_precision=16))
    >>> spec.skip, spec.read(b"ABCD", [0, -1, 2])
    (('p += 2',), [b'AB', None, b'CD'])
    """
    env: dict[str, Any] = {}
    lines = _column_code(i, tm, col, True, env, tinyint1_as_boolean)
    body = ["def read(b, offsets):", "    out = []", "    append = out.append", "    for p in offsets:",
            "        if p < 0:", "            append(None)", "            continue",
            *("        " + line for line in lines), f"        append(v{i})", "    return out"]
    exec(compile("\n".join(body), f"<values of column {col.name!r}>", "exec"), env)  # integers and fixed names
    return ColumnSpec("python", 0, arrow_type(spark_type(col, tinyint1_as_boolean)), skip=tuple(_skip_lines(tm, col)),
                      read=env["read"])


def _length_prefix(tm: Any) -> tuple[int, str]:
    """The bytes of a length-prefixed value's length, and the expression that reads it at ``p``: a VARCHAR's
    (MariaDB's compressed one too) by its maximum length, a BLOB's, JSON's or GEOMETRY's by the table map."""
    size = (2 if tm.max_length > 255 else 1) if tm.type in STRINGS or tm.type == VARCHAR_COMPRESSED \
        else int(tm.length_size)
    return size, "b[p]" if size == 1 else f"int.from_bytes(b[p:p + {size}], 'little')"


def _skip_lines(tm: Any, col: ColumnInfo) -> list[str]:
    """Statements that move ``p`` past a column's value at offset ``p`` without reading it (the sizes
    :func:`_column_code` reads)."""
    t = tm.type
    if t in _INTS:
        return [f"p += {_INTS[t][0]}"]
    fixed = {F.INT24: 3, F.YEAR: 1, F.DATE: 3}
    if t in fixed:
        return [f"p += {fixed[t]}"]
    if t == F.NEWDECIMAL:
        return [f"p += {decimal_size(int(tm.precision), int(tm.decimals))}"]
    if t in (F.DATETIME2, F.TIMESTAMP2, F.TIME2):
        return [f"p += {({F.DATETIME2: 5, F.TIMESTAMP2: 4, F.TIME2: 3}[t] + _fsp_bytes(tm.fsp))}"]
    if t in OLD_TYPES:
        return [f"p += {old_size(t, int(col.datetime_precision or 0))}"]
    if t in STRINGS or t in (F.BLOB, F.GEOMETRY, F.JSON) or t in COMPRESSED_TYPES:
        size, length = _length_prefix(tm)
        return [f"p += {size} + {length}"]
    if t in (F.ENUM, F.SET):
        return [f"p += {int(tm.size)}"]
    if t == F.BIT:
        return [f"p += {(int(tm.bits) + 7) // 8}"]
    raise AssertionError(t)  # pragma: no cover - misfit admits only the types above


def compile_counter(columns: Sequence[Any], schema: TableSchema) -> Callable[[bytes, int, int], int] | None:
    """A counter of the images in a rows event of one table map: it walks the images as :func:`compile_images`'
    reader does (the NULL bitmap, then each value's size), reading no value; ``None`` where that reader would
    be ``None``. What a micro-batch's planning needs: how many change rows a range holds, not what they are
    (worked example: :func:`compile_images`, whose two images it counts)."""
    if misfit(columns, schema) is not None:
        return None
    n = len(columns)
    body = ["def count(b, p, end):", "    k = 0", "    while p < end:",
            f"        n = {bitmap_expr((n + 7) // 8)}", f"        p += {(n + 7) // 8}"]
    for i, (tm, col) in enumerate(zip(columns, schema.columns)):
        body.append(f"        if not n & {1 << i}:")
        body.extend("            " + line for line in _skip_lines(tm, col))
    body += ["        k += 1", "    if p != end:",
             "        raise ValueError(f'the images end at byte {p}, the event at {end}')", "    return k"]
    env: dict[str, Any] = {}
    exec(compile("\n".join(body), f"<image counter of {schema.table}>", "exec"), env)  # integers and names only
    count: Callable[[bytes, int, int], int] = env["count"]
    return count


def event_rows(ev: Any) -> tuple[bytes, int, int]:
    """The rest of a rows event (its images) as a buffer, a start and an end offset, read past. Where nothing of
    the packet was pushed back (the library's wrapper keeps such bytes apart), the buffer is the packet's own
    bytes (pymysql's), not a copy: an update of a 256 MB value is a 512 MB event, which ``read`` copied whole."""
    wrapper = ev.packet
    size = int(ev.event_size - wrapper.read_bytes)
    inner = getattr(wrapper, "packet", None)
    data, start = getattr(inner, "_data", None), getattr(inner, "_position", None)
    if (getattr(wrapper, "_BinLogPacketWrapper__data_buffer", None) == b"" and isinstance(data, bytes)
            and isinstance(start, int) and start + size <= len(data)):
        wrapper.advance(size)
        return data, start, start + size
    rows = wrapper.read(size)
    return rows, 0, len(rows)


def _let_go(ev: Any, data: bytes) -> None:
    """Once a rows event's images are decoded, its packet's bytes go (nothing reads them again): an update of a
    256 MB value is a 512 MB event, which the event (held until the reader fetches the next one) kept alive
    while its rows were encoded downstream."""
    inner = getattr(ev.packet, "packet", None)
    if inner is not None and getattr(inner, "_data", None) is data:
        inner._data, inner._position = b"", 0


def _row_reader(fast: ImageReader, exact: ImageReader, where: str) -> ImageReader:
    """The row reader of a walked event's images (:class:`ColumnImages`, read as rows when asked)."""
    def read(data: bytes, start: int, end: int) -> list[tuple[Any, ...]]:
        try:
            try:
                return fast(data, start, end)
            except UnicodeDecodeError:
                return exact(data, start, end)  # the converter's error names the column and the fix
        except (ValueError, IndexError, struct.error) as e:
            if isinstance(e, UnicodeDecodeError):
                raise
            raise BinlogError(f"the rows event of {where} could not be decoded ({e}); a binlog this reader "
                              "misreads is a bug: report it with the table's definition") from e

    return read


def _every_column(ev: Any) -> bool:
    """Every image of a rows event holds every column (binlog_row_image FULL): what a compiled plan reads."""
    full = (1 << len(ev.columns)) - 1
    return all(bitmap is None or int.from_bytes(bytes(bitmap), "little") & full == full
               for bitmap in (ev.columns_present_bitmap, getattr(ev, "columns_present_bitmap2", None)))


class RowDecoders:
    """The image readers of the captured tables, one per table map met (compiled on first use): what
    :func:`udtf.binlog.transactions.read_transactions` decodes rows events with when it is given the tables'
    schemas. Images come as canonical row tuples in the schema's column order."""

    def __init__(self, schemas: Mapping[TableId, TableSchema], tinyint1_as_boolean: bool = False,
                 before_keep: Mapping[TableId, Collection[int]] | None = None, planned: bool = True) -> None:
        self.schemas = dict(schemas)
        self.planned = planned  # False (option row_decoder library): every event is the library's
        self.tinyint1_as_boolean = tinyint1_as_boolean
        # per table, the columns an update's before image keeps (option before_images key); others: all
        self.before_keep = dict(before_keep or {})
        self._update_plans: dict[int, tuple[Any, ImageReader | None, ImageReader | None]] = {}
        # table id -> (the table map's column list, its fast reader, its exact reader), both None: the library
        self._plans: dict[int, tuple[Any, ImageReader | None, ImageReader | None]] = {}
        self._counters: dict[int, tuple[Any, Callable[[bytes, int, int], int] | None]] = {}
        self._column_plans: dict[int, tuple[Any, ColumnPlan | None]] = {}
        self._told: dict[int, Any] = {}  # table id -> the table map's columns for_library annotated
        self.planned_events = 0  # rows events decoded here
        self.library_events = 0  # rows events left to the library
        self.counted_events = 0  # rows events whose images were counted, not read (count)

    def _plan(self, ev: Any) -> tuple[ImageReader | None, ImageReader | None]:
        got = self._plans.get(ev.table_id)
        if got is not None and got[0] is ev.columns:
            return got[1], got[2]
        schema = self.schemas.get(TableId(ev.schema, ev.table))
        fast = exact = None
        # not planned (option row_decoder library): every event is the library's, by the user's choice
        why = None if not self.planned else "no schema" if schema is None else misfit(ev.columns, schema)
        if why is not None:
            logging.getLogger("mysql_cdc").info("rows of %s.%s (table map %s) are decoded by python-mysql-"
                                                "replication: %s", ev.schema, ev.table, ev.table_id, why)
        elif self.planned and schema is not None:
            fast = compile_images(ev.columns, schema, self.tinyint1_as_boolean)
            if fast is not None:
                exact = compile_images(ev.columns, schema, self.tinyint1_as_boolean, fast_text=False)
        self._plans[ev.table_id] = (ev.columns, fast, exact)
        return fast, exact

    def for_library(self, ev: Any) -> None:
        """Tell python-mysql-replication, before it decodes ``ev``'s rows, the precision of each column the table
        map logs in an old temporal format (the schema's column of its name, recorded in that format:
        :mod:`.oldtemporal`), which it reads by :func:`udtf.binlog.library.adapt_library`'s reader; any other
        (a row written under another definition of the table) is read in the classic format, precision 0, as
        the library reads it but for a negative TIME, which it read unsigned."""
        if self._told.get(ev.table_id) is ev.columns:
            return
        self._told[ev.table_id] = ev.columns
        schema = self.schemas.get(TableId(ev.schema, ev.table))
        if schema is None:
            return
        by = {c.name: c for c in schema.columns}
        for tm in ev.columns:
            col = by.get(tm.name)
            if tm.type in OLD_TYPES:  # else the classic format: the library's reading but for a negative TIME
                kept = col is not None and kept_old(col.data_type, col.column_type) == tm.type
                tm.mysql_cdc_fsp = int(col.datetime_precision or 0) if col is not None and kept else 0

    def count(self, ev: Any, where: str) -> int | None:
        """How many images a rows event holds (an update's two per row), read without decoding a value; ``None``
        where :meth:`images` would give ``None`` (nothing of the event was read then)."""
        fast, _ = self._plan(ev)
        got = self._counters.get(ev.table_id)
        if got is None or got[0] is not ev.columns:
            schema = self.schemas.get(TableId(ev.schema, ev.table))
            got = (ev.columns, compile_counter(ev.columns, schema) if fast is not None and schema else None)
            self._counters[ev.table_id] = got
        if got[1] is None or not _every_column(ev):
            return None
        self.counted_events += 1
        data, start, end = event_rows(ev)
        try:
            return got[1](data, start, end)
        except (ValueError, IndexError) as e:
            raise BinlogError(f"the rows event of {where} could not be read ({e}); a binlog this reader misreads "
                              "is a bug: report it with the table's definition") from e

    def _update_plan(self, ev: Any) -> tuple[ImageReader | None, ImageReader | None]:
        """The readers of an update event's images whose before images keep only the table's ``before_keep``
        columns (compiled on first use; the readers of :meth:`_plan` where the table keeps them all)."""
        keep = self.before_keep.get(TableId(ev.schema, ev.table))
        fast, exact = self._plan(ev)
        if keep is None or fast is None:
            return fast, exact
        got = self._update_plans.get(ev.table_id)
        if got is None or got[0] is not ev.columns:
            schema = self.schemas[TableId(ev.schema, ev.table)]
            got = (ev.columns, compile_images(ev.columns, schema, self.tinyint1_as_boolean, before_keep=keep),
                   compile_images(ev.columns, schema, self.tinyint1_as_boolean, False, before_keep=keep))
            self._update_plans[ev.table_id] = got
        return got[1], got[2]

    def _column_plan(self, ev: Any) -> ColumnPlan | None:
        got = self._column_plans.get(ev.table_id)
        if got is None or got[0] is not ev.columns:
            schema = self.schemas[TableId(ev.schema, ev.table)]
            got = (ev.columns, column_plan(ev.columns, schema, self.tinyint1_as_boolean, functools.partial(
                python_column, tinyint1_as_boolean=self.tinyint1_as_boolean)))
            self._column_plans[ev.table_id] = got
        return got[1]

    def images(self, ev: Any, where: str, update: bool = False, columns: bool = False
               ) -> Sequence[tuple[Any, ...]] | None:
        """Every image of a rows event (an update's before and after images alternate: ``update``, whose
        before images keep the table's ``before_keep`` columns), or ``None`` when the library must decode the
        event (its table map is not the schema's, or an image lacks columns); in that case nothing of the event
        was read. With ``columns``, where the table map has a column plan (:mod:`.columns`), the images are
        only walked: a :class:`ColumnImages` the Spark surfaces read into Arrow columns."""
        fast, exact = self._update_plan(ev) if update else self._plan(ev)
        if fast is None or exact is None or not _every_column(ev):
            self.library_events += 1
            return None
        self.planned_events += 1
        data, start, end = event_rows(ev)
        plan = self._column_plan(ev) if columns and end - start <= MAX_EVENT_BYTES else None
        if plan is not None:
            images = data[start:end]  # a copy: the packet's bytes go now (see _let_go), the walk's offsets are in it
            _let_go(ev, data)
            try:
                places = plan.walk(images, 0, len(images))
                if update and len(places) // len(plan.specs) % 2:
                    raise ValueError("an update event ends after a before image")
            except (ValueError, IndexError) as e:
                raise BinlogError(f"the rows event of {where} could not be decoded ({e}); a binlog this reader "
                                  "misreads is a bug: report it with the table's definition") from e
            keep = self.before_keep.get(TableId(ev.schema, ev.table)) if update else None
            return ColumnImages(plan, images, places, update, None if keep is None else
                                frozenset(keep), _row_reader(fast, exact, where))
        out = _row_reader(fast, exact, where)(data, start, end)
        _let_go(ev, data)
        return out
