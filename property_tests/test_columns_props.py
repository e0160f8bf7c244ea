"""The binlog's column reader (udtf/binlog/columns.py) against its row reader (udtf/binlog/rowimage.py) on rows
events built by hand, no server: random tables of every column kind (the ones read by NumPy and those read
value by value), random images with NULLs, MariaDB's set padding bits in the NULL bitmap, valid and invalid
values (zero and impossible dates, out-of-range times and fractions, raw DECIMAL bytes), inserts and updates
with and without key-only before images, several events at once. The arrays must equal those of the row
reader's values, or both must fail (a value the row reader refuses). On real servers:
``test_values_props.py::columns_match_rows``."""

from __future__ import annotations

import functools
import struct
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import pyarrow as pa
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from mysql_cdc.ids import TableId
from mysql_cdc.schema import ColumnInfo, TableSchema
from mysql_cdc.types import FieldType as F
from mysql_cdc.types import arrow_type, spark_type
from mysql_cdc.udtf.binlog.columns import ColumnImages, column_arrays, column_plan
from mysql_cdc.udtf.binlog.rowimage import compile_images, decimal_size, python_column
from mysql_cdc.udtf.convert import MemberIndex

Value = st.SearchStrategy[bytes]
_D2B = (0, 1, 1, 2, 2, 3, 3, 4, 4, 4)


def _decimal_bytes(v: int, p: int, s: int) -> bytes:
    """MySQL's binary DECIMAL of the unscaled value ``v``."""
    digits = str(abs(v)).rjust(p, "0")
    whole, part = divmod(p - s, 9)
    frac, rest = divmod(s, 9)
    fields = [(digits[:part], _D2B[part])] if part else []
    fields += [(digits[part + 9 * k:part + 9 * k + 9], 4) for k in range(whole)]
    fields += [(digits[p - s + 9 * k:p - s + 9 * k + 9], 4) for k in range(frac)]
    fields += [(digits[p - s + 9 * frac:], _D2B[rest])] if rest else []
    raw = bytearray(b"".join(int(f).to_bytes(n, "big") for f, n in fields))
    raw[0] ^= 0x80
    return bytes(x ^ 0xFF for x in raw) if v < 0 else bytes(raw)


def _decimal(p: int, s: int) -> tuple[dict[str, Any], dict[str, Any], Value]:
    valid = st.integers(-(10 ** p) + 1, 10 ** p - 1).map(lambda v: _decimal_bytes(v, p, s))
    return ({"type": F.NEWDECIMAL, "precision": p, "decimals": s},
            {"data_type": "decimal", "column_type": f"decimal({p},{s})", "numeric_precision": p, "numeric_scale": s},
            valid | st.binary(min_size=decimal_size(p, s), max_size=decimal_size(p, s)))


def _int(t: int, size: int, unsigned: bool, name: str) -> tuple[dict[str, Any], dict[str, Any], Value]:
    return ({"type": t, "unsigned": unsigned}, {"data_type": name, "column_type": name + " unsigned" * unsigned},
            st.binary(min_size=size, max_size=size))


def _temporal(t: int, fsp: int) -> tuple[dict[str, Any], dict[str, Any], Value]:
    nb = (fsp + 1) // 2
    if t == F.DATETIME2:
        parts = st.tuples(st.sampled_from([0, 1, 1000, 2024, 9999, 10000]) | st.integers(0, 10100),
                          st.integers(0, 13), st.integers(0, 31), st.integers(0, 31), st.integers(0, 63),
                          st.integers(0, 63))
        head = parts.map(lambda x: ((1 << 39) | ((x[0] * 13 + x[1]) << 22) | (x[2] << 17) | (x[3] << 12)
                                    | (x[4] << 6) | x[5]).to_bytes(5, "big"))
        name = "datetime"
    else:
        head = (st.just(0) | st.integers(0, 2 ** 32 - 1)).map(lambda v: v.to_bytes(4, "big"))
        name = "timestamp"
    fraction = (st.integers(0, 10 ** fsp - 1).map(lambda f: (f * (10 if fsp % 2 else 1)).to_bytes(nb, "big"))
                | st.binary(min_size=nb, max_size=nb)) if nb else st.just(b"")
    return ({"type": t, "fsp": fsp}, {"data_type": name, "column_type": f"{name}({fsp})", "datetime_precision": fsp},
            st.builds(bytes.__add__, head, fraction))


def _text(t: int, length_size: int, name: str, charset: str | None, max_length: int = 0
          ) -> tuple[dict[str, Any], dict[str, Any], Value]:
    collation = f"{charset}_bin" if charset else "binary"
    body = (st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=20).map(str.encode)
            if charset else st.binary(max_size=30))
    body = body | st.binary(max_size=8)  # not always valid UTF-8
    table_map = {"type": t, "collation_name": collation}
    table_map.update({"max_length": max_length} if t != F.BLOB else {"length_size": length_size})
    return (table_map, {"data_type": name, "column_type": name, "charset": charset, "collation": charset and collation},
            body.map(lambda b: len(b).to_bytes(length_size, "little") + b))


COLUMNS: dict[str, tuple[dict[str, Any], dict[str, Any], Value]] = {
    **{f"{'u' if u else 'i'}{8 * size}": _int(t, size, u, name) for t, size, name in (
        (F.TINY, 1, "tinyint"), (F.SHORT, 2, "smallint"), (F.INT24, 3, "mediumint"), (F.LONG, 4, "int"),
        (F.LONGLONG, 8, "bigint")) for u in (False, True)},
    "year": ({"type": F.YEAR}, {"data_type": "year", "column_type": "year"}, st.binary(min_size=1, max_size=1)),
    "float": ({"type": F.FLOAT}, {"data_type": "float", "column_type": "float"},
              st.floats(width=32, allow_nan=False).map(lambda v: struct.pack("<f", v))),
    "double": ({"type": F.DOUBLE}, {"data_type": "double", "column_type": "double"},
               st.floats(allow_nan=False).map(lambda v: struct.pack("<d", v))),
    **{f"dec{p}_{s}": _decimal(p, s) for p, s in ((1, 0), (4, 2), (9, 9), (10, 0), (15, 2), (17, 1), (18, 9),
                                                   (18, 18), (30, 5))},
    "date": ({"type": F.DATE}, {"data_type": "date", "column_type": "date"},
             st.tuples(st.sampled_from([0, 1, 2024, 9999]) | st.integers(0, 32767), st.integers(0, 15),
                       st.integers(0, 31)).map(lambda x: (x[0] * 512 + x[1] * 32 + x[2]).to_bytes(3, "little"))),
    **{f"dt{p}": _temporal(F.DATETIME2, p) for p in range(7)},
    **{f"ts{p}": _temporal(F.TIMESTAMP2, p) for p in range(7)},
    "varchar": _text(F.VARCHAR, 1, "varchar", "utf8mb4", 80),
    "wide": _text(F.VARCHAR, 2, "varchar", "utf8mb4", 1200),
    "mb3": _text(F.VARCHAR, 1, "varchar", "utf8mb3", 30),
    "char": _text(F.STRING, 1, "char", "utf8mb4", 20),
    **{f"text{k}": _text(F.BLOB, k, name, "utf8mb4") for k, name in (
        (1, "tinytext"), (2, "text"), (3, "mediumtext"), (4, "longtext"))},
    **{f"blob{k}": _text(F.BLOB, k, name, None) for k, name in (
        (1, "tinyblob"), (2, "blob"), (3, "mediumblob"), (4, "longblob"))},
    "varbinary": _text(F.VARCHAR, 2, "varbinary", None, 400),
    # read value by value by the row reader's code
    "latin1": _text(F.VARCHAR, 1, "varchar", "latin1", 10),
    "bit": ({"type": F.BIT, "bits": 12}, {"data_type": "bit", "column_type": "bit(12)", "numeric_precision": 12},
            st.binary(min_size=2, max_size=2)),
    "enum": ({"type": F.ENUM, "enum_values": [MemberIndex(i) for i in range(3)], "size": 1},
             {"data_type": "enum", "column_type": "enum('a','b','c')", "charset": "utf8mb4",
              "collation": "utf8mb4_bin"}, st.integers(0, 2).map(lambda i: bytes([i]))),
    "time": ({"type": F.TIME2, "fsp": 3}, {"data_type": "time", "column_type": "time(3)", "datetime_precision": 3},
             st.builds(bytes.__add__, st.integers(0x800000 - 2 ** 20, 0x800000 + 2 ** 20).map(
                 lambda v: v.to_bytes(3, "big")), st.integers(0, 999).map(lambda f: (f * 10).to_bytes(2, "big")))),
    "binary4": ({"type": F.STRING, "max_length": 4, "collation_name": "binary"},
                {"data_type": "binary", "column_type": "binary(4)"},
                st.binary(max_size=4).map(lambda b: bytes([len(b)]) + b)),
}


@st.composite
def events(draw: Callable[..., Any]) -> tuple[list[SimpleNamespace], TableSchema, list[tuple[bytes, bool, bool]]]:
    """A table of random columns and one to three rows events of it: (image bytes, update?, cut to the key?)."""
    names = draw(st.lists(st.sampled_from(sorted(COLUMNS)), min_size=1, max_size=11, unique=True))
    table_map = [SimpleNamespace(name=n, **COLUMNS[n][0]) for n in names]
    schema = TableSchema(TableId("d", "t"), tuple(ColumnInfo(n, nullable=True, **COLUMNS[n][1]) for n in names),
                         (names[0],), (names[0],))
    width = (len(names) + 7) // 8
    padding = ((1 << 8 * width) - 1) ^ ((1 << len(names)) - 1)

    def image() -> bytes:
        nulls = draw(st.lists(st.booleans(), min_size=len(names), max_size=len(names)))
        bits = sum(1 << i for i, null in enumerate(nulls) if null) | (padding if draw(st.booleans()) else 0)
        return bits.to_bytes(width, "little") + b"".join(
            draw(COLUMNS[n][2]) for n, null in zip(names, nulls) if not null)

    out = []
    for _ in range(draw(st.integers(1, 3))):
        update = draw(st.booleans())
        count = draw(st.integers(0, 3)) * (2 if update else 1)
        out.append((b"".join(image() for _ in range(count)), update, update and draw(st.booleans())))
    return table_map, schema, out


@settings(max_examples=400, deadline=None, suppress_health_check=list(HealthCheck))
@given(got=events(), cut=st.booleans())
def test_the_column_reader_reads_the_row_readers_values(got: Any, cut: bool) -> None:
    table_map, schema, evs = got
    plan = column_plan(table_map, schema, False, functools.partial(python_column, tinyint1_as_boolean=False))
    assert plan is not None
    types = [arrow_type(spark_type(c)) for c in schema.columns]
    key = frozenset({0})
    parts = []
    for data, update, keyed in evs:
        reader = compile_images(table_map, schema, before_keep=key if keyed else None)
        assert reader is not None
        images = ColumnImages(plan, data, plan.walk(data, 0, len(data)), update, key if keyed else None, reader)
        parts.append(images.cut_before(key) if cut and update and not keyed else images)
    try:
        want: Any = [pa.array(col, type=t) for col, t in zip(zip(*[r for p in parts for r in p.rows()]), types)]
    except (ValueError, ArithmeticError) as e:  # a value the row reader refuses: so must the column reader
        want = type(e)
    try:
        arrays: Any = column_arrays(parts, types)
    except (ValueError, ArithmeticError) as e:
        arrays = type(e)
    event("refused" if isinstance(want, type) else "read")
    if isinstance(want, type) or isinstance(arrays, type):
        # the one difference: a value the row reader refuses among those cut_before drops is not read
        assert want == arrays or (isinstance(want, type) and not isinstance(arrays, type)
                                  and any(p._cut is not None for p in parts)), (want, arrays)
        return
    if not want:  # no image at all
        assert all(len(a) == 0 for a in arrays)
        return
    for name, w, g in zip(schema.column_names, want, arrays):
        assert g.equals(w), f"{name}: column reader {g.to_pylist()!r}, row reader {w.to_pylist()!r}"
