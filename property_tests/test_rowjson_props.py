"""Row images through JSON (the ``__values`` of a multi-table read) come back as the same typed Arrow values,
for every Arrow type a table's columns map to (:func:`mysql_cdc.udtf.convert.table_arrow_schema`), NULLs and
edge values included; and a text written with other columns is refused, not guessed."""

from __future__ import annotations

import datetime as dt
import decimal
import json
import os
import pathlib
from typing import Any
from unittest import mock

import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

from mysql_cdc import rowjson
from mysql_cdc.errors import SchemaChangedError
from mysql_cdc.large_values import LargeValueError
from mysql_cdc.rowjson import _decode_columns, decode_rows, encode_rows, encode_rows_python

UTC = dt.timezone.utc


def _decimal(p: int, s: int) -> st.SearchStrategy[decimal.Decimal]:
    """Every DECIMAL(p,s) value: an integer of up to p digits, scaled (exactly: construction has no context)."""
    return st.integers(-(10**p - 1), 10**p - 1).map(lambda i: decimal.Decimal(f"{i}E-{s}"))


COLUMN_KINDS: dict[str, tuple[pa.DataType, st.SearchStrategy[Any]]] = {
    "int8": (pa.int8(), st.integers(-128, 127)),
    "int16": (pa.int16(), st.integers(-(2**15), 2**15 - 1)),
    "int32": (pa.int32(), st.integers(-(2**31), 2**31 - 1)),
    "int64": (pa.int64(), st.integers(-(2**63), 2**63 - 1)),
    "float32": (pa.float32(), st.floats(width=32, allow_nan=False, allow_infinity=False)),
    "float64": (pa.float64(), st.floats(allow_nan=False, allow_infinity=False)),
    "bool": (pa.bool_(), st.booleans()),
    "string": (pa.string(), st.text()),
    "binary": (pa.binary(), st.binary()),
    "date": (pa.date32(), st.dates()),
    "datetime": (pa.timestamp("us"), st.datetimes()),
    "timestamp": (pa.timestamp("us", tz="UTC"), st.datetimes(timezones=st.just(UTC))),
    "time": (pa.duration("us"), st.timedeltas(min_value=-dt.timedelta(hours=838, minutes=59, seconds=59),
                                              max_value=dt.timedelta(hours=838, minutes=59, seconds=59))),
    "decimal(38,30)": (pa.decimal128(38, 30), _decimal(38, 30)),  # wider DECIMALs are strings
    "decimal(20,0)": (pa.decimal128(20, 0), _decimal(20, 0)),
    "decimal(10,2)": (pa.decimal128(10, 2), _decimal(10, 2)),
}


@st.composite
def batches(draw: st.DrawFn) -> pa.RecordBatch:
    kinds = draw(st.lists(st.sampled_from(sorted(COLUMN_KINDS)), min_size=1, max_size=6))
    n = draw(st.integers(0, 6))
    fields, arrays = [], []
    for i, kind in enumerate(kinds):
        t, values = COLUMN_KINDS[kind]
        col = draw(st.lists(st.none() | values, min_size=n, max_size=n))
        fields.append(pa.field(f"c{i} {kind}", t))
        arrays.append(pa.array(col, type=t))
    return pa.RecordBatch.from_arrays(arrays, schema=pa.schema(fields))


@given(batches())
def test_every_value_comes_back_as_the_same_arrow_value(batch: pa.RecordBatch) -> None:
    texts = encode_rows(batch)
    assert len(texts) == batch.num_rows
    assert decode_rows(texts, batch.schema).equals(batch)
    for f in batch.schema:  # DECIMAL text: plain digits, never an exponent
        if pa.types.is_decimal(f.type):
            assert all("E" not in (json.loads(t)[f.name] or "") for t in texts)


@given(batches())
def test_a_text_of_other_columns_is_refused(batch: pa.RecordBatch) -> None:
    if batch.num_rows == 0:
        return
    texts = encode_rows(batch)
    wider = batch.schema.append(pa.field("added", pa.int32()))
    with pytest.raises(SchemaChangedError, match="another schema"):
        decode_rows(texts, wider)


def _exact(text: str) -> Any:
    """A JSON text's values with every number kept as written would read back (an int apart from a float, -0.0
    apart from 0.0)."""
    return json.loads(text, parse_float=lambda s: ("float", repr(float(s))), parse_int=lambda s: ("int", int(s)))


@given(batches())
def test_the_columnar_encoder_writes_what_python_writes_value_by_value(batch: pa.RecordBatch) -> None:
    """encode_rows makes its texts column by column with Arrow's kernels; every value reads back as the value
    Python's encoder writes, and every text but a float's is the same text."""
    columnar, python = encode_rows(batch), encode_rows_python(batch)
    assert [_exact(t) for t in columnar] == [_exact(t) for t in python]
    if not any(pa.types.is_floating(f.type) for f in batch.schema):
        assert columnar == python


def test_the_columnar_encoder_escapes_as_json_does() -> None:
    values = ['plain', 'quote " and \\ backslash', "tab\tnew\nline\r\x00\x1f\x7f", "é ü 中 😀", "", None]
    batch = pa.record_batch([pa.array(values)], names=["s"])
    assert encode_rows(batch) == encode_rows_python(batch)
    assert [json.loads(t)["s"] for t in encode_rows(batch)] == values


@given(batches())
def test_the_columnar_decoder_reads_every_text_back_without_python(batch: pa.RecordBatch) -> None:
    """decode_rows reads on whole columns (Arrow's JSON reader) and needs Python's reader for no text ours
    writes."""
    if batch.num_rows == 0:
        return
    assert _decode_columns(pa.array(encode_rows(batch)), batch.schema).equals(batch)


def test_a_text_that_lacks_a_column_is_refused_also_when_it_is_nullable() -> None:
    schema = pa.schema([("a", pa.int32()), ("b", pa.string())])
    with pytest.raises(SchemaChangedError, match="another schema"):
        decode_rows(['{"a":1,"b":"x"}', '{"a":2}'], schema)
    assert decode_rows(['{"a":1,"b":null}'], schema).column(1).to_pylist() == [None]
    quoted = pa.schema([("x", pa.int32()), ('a"x', pa.int32())])  # the key a"x holds the text "x":
    with pytest.raises(SchemaChangedError, match="another schema"):
        decode_rows(['{"a\\"x":5}'], quoted)


@given(batches(), st.integers(0, 6), st.integers(0, 6), st.booleans(), st.sampled_from([0, 1 << 20]))
def test_slices_and_large_binary_encode_and_decode_as_whole_batches_do(batch: pa.RecordBatch, start: int, size: int,
                                                                        large: bool, threshold: int) -> None:
    """A binary column with a value of 1 MiB or more is written and read where its values are in Arrow's buffers
    (rowjson._base64_texts, _unbase64; with ``threshold`` 0 every binary column here is): a slice of a batch (its
    columns at an offset) and LargeBinary columns give Python's texts, and read back; a slice of the texts too
    (one text alone is read where it is)."""
    with mock.patch.object(rowjson, "_LARGE", threshold):
        _slices_round_trip(batch, start, size, large)


def _slices_round_trip(batch: pa.RecordBatch, start: int, size: int, large: bool) -> None:
    if large:
        batch = batch.cast(pa.schema([f.with_type(pa.large_binary()) if pa.types.is_binary(f.type) else f
                                      for f in batch.schema]))
    part = batch.slice(start, size)
    assert encode_rows(part) == encode_rows_python(part) or any(pa.types.is_floating(f.type) for f in part.schema)
    texts = pa.array(encode_rows(batch), pa.string())
    for i in range(batch.num_rows):
        assert decode_rows(texts.slice(i, 1), batch.schema).equals(batch.slice(i, 1))
    assert decode_rows(texts.slice(start, size), batch.schema).equals(batch.slice(start, size))


@given(batches(), st.sampled_from([3, 6, 3 << 20]))
def test_a_batch_with_a_large_value_is_written_in_place_as_python_writes_it(batch: pa.RecordBatch, step: int
                                                                            ) -> None:
    """A batch with a large binary or string value is written into one buffer (rowjson._written_in_place; with
    ``_LARGE`` 0 every binary and string column here is large, base64 in pieces of ``step`` bytes): the same
    texts as Python's, which read back."""
    with mock.patch.object(rowjson, "_LARGE", 0), mock.patch.object(rowjson, "_B64_STEP", step):
        texts = rowjson.encode_column(batch)
        if any(rowjson._is_bytes(f.type) for f in batch.schema) and batch.num_rows:
            assert texts.equals(rowjson._written_in_place(batch))
        assert texts.to_pylist() == encode_rows_python(batch) or any(pa.types.is_floating(f.type)
                                                                      for f in batch.schema)
        assert decode_rows(texts, batch.schema).equals(batch)


def test_large_strings_are_escaped_in_place_as_json_does() -> None:
    values = ['plain', 'quote " and \\ backslash', "tab\tnew\nline\r\x00\x1f\x7f", "é ü 中 😀", "", None]
    batch = pa.record_batch([pa.array(values), pa.array([b"\x00", None, b"", b"\xff" * 7, b"a", b"bc"])],
                            names=["s", 'b "q"'])
    with mock.patch.object(rowjson, "_LARGE", 0), mock.patch.object(rowjson, "_B64_STEP", 3):
        texts = rowjson._written_in_place(batch)
    assert texts is not None and texts.to_pylist() == encode_rows_python(batch)
    assert [json.loads(t)["s"] for t in texts.to_pylist()] == values


def test_a_base64_text_not_in_fours_is_refused_on_both_paths() -> None:
    """A text the encoder never writes ("AAA": three characters, no padding) is an error on the path of large
    values too, as base64's strict decoder makes it on the other (it would read as an empty value)."""
    schema = pa.schema([("k", pa.int32()), ("b", pa.binary())])
    for threshold in (0, 1 << 20):
        with mock.patch.object(rowjson, "_LARGE", threshold), pytest.raises(ValueError):
            decode_rows(['{"k":2,"b":"AAA"}'], schema)


@given(batches(), st.sampled_from([0, 1, 3, 8]), st.integers(0, 6), st.integers(0, 6), st.booleans(),
       st.sampled_from(["c", 'c :{"x', "c\\"]))
def test_values_set_aside_as_files_come_back_exact(batch: pa.RecordBatch, min_bytes: int, start: int, size: int,
                                                   large: bool, prefix: str) -> None:
    """With a folder for large values (``mysql_cdc.large_values``), every binary or string value of ``min_bytes``
    or more is written into a file and its row names it (an object, where no value is one otherwise); every other
    value stays in its row as before; decoding reads them back exactly, also from a slice of the batch and with
    column names that hold ``:{"`` (the mark a row with a reference is looked for by)."""
    import tempfile

    from mysql_cdc.large_values import LargeValues

    batch = pa.RecordBatch.from_arrays(batch.columns, names=[prefix + n for n in batch.schema.names])
    if large:
        batch = batch.cast(pa.schema([f.with_type(pa.large_binary()) if pa.types.is_binary(f.type) else f
                                      for f in batch.schema]))
    part = batch.slice(start, size)
    with tempfile.TemporaryDirectory() as folder:
        lv = LargeValues(os.path.join(folder, "lv"), min_bytes)
        texts = rowjson.encode_column(part, lv)
        wanted = set()
        for r, text in enumerate(texts.to_pylist()):
            row = json.loads(text)
            for f in part.schema:
                v = part.column(f.name)[r].as_py()
                big = rowjson._is_bytes(f.type) and v is not None and \
                    len(v.encode() if isinstance(v, str) else v) >= min_bytes
                assert isinstance(row[f.name], dict) == big, (f.name, v, row[f.name])
                if big:
                    wanted.add(row[f.name]["file"])
        assert set(os.listdir(lv.folder) if os.path.isdir(lv.folder) else []) == wanted
        assert decode_rows(texts, part.schema, lv).equals(part)
        assert decode_rows(texts.to_pylist(), part.schema, lv).equals(part)
        if wanted:
            with pytest.raises(LargeValueError, match="large_value_dir"):
                decode_rows(texts, part.schema)  # without the folder: one clear error, never a NULL
        assert lv.clear() == len(wanted)


def test_a_large_value_s_file_is_trusted_for_nothing_but_its_content(tmp_path: Any) -> None:
    """A file changed, cut, replaced by a link or gone is one error naming the file and the cause; a reference
    of another shape is refused; clearing leaves files not ours."""
    from mysql_cdc.large_values import LargeValues

    lv = LargeValues(str(tmp_path / "lv"), 4)
    schema = pa.schema([("k", pa.int32()), ("b", pa.binary())])
    batch = pa.record_batch([pa.array([1, 2]), pa.array([b"0123456789", b"xy"])], schema=schema)
    texts = rowjson.encode_column(batch, lv)
    (name,) = os.listdir(lv.folder)
    path = os.path.join(lv.folder, name)
    assert oct(os.stat(lv.folder).st_mode & 0o777) == "0o700" and oct(os.stat(path).st_mode & 0o777) == "0o600"
    original = pathlib.Path(path).read_bytes()
    for bad, cause in ((b"0123456780", "does not hold the value named by its SHA-256"),
                       (b"012345678", "not a large value of 10 bytes")):
        with open(path, "wb") as f:
            f.write(bad)
        with pytest.raises(LargeValueError, match=cause):
            decode_rows(texts, schema, lv)
    os.unlink(path)
    other = tmp_path / "other"
    other.write_bytes(original)
    os.symlink(other, path)
    with pytest.raises(LargeValueError, match="cannot read the large value .*not ours"):
        decode_rows(texts, schema, lv)
    os.unlink(path)
    with pytest.raises(LargeValueError, match="is not in .*every executor"):
        decode_rows(texts, schema, lv)
    forged = texts.to_pylist()
    forged[0] = forged[0].replace(name, "../../etc/passwd")
    with pytest.raises(LargeValueError, match="not written by this library"):
        decode_rows(forged, schema, lv)
    (tmp_path / "lv" / "keep.txt").write_text("not ours")
    (tmp_path / "lv" / ("a" * 64)).mkdir()  # what cannot be removed stays, and fails nothing
    assert lv.clear() == 0 and sorted(os.listdir(lv.folder)) == ["a" * 64, "keep.txt"]


def test_a_reference_lands_in_its_own_column_whatever_the_names_and_values_around_it(tmp_path: Any) -> None:
    """The texts a reference goes into are read as JSON and written again (found by a review: a text search for
    the column's NULL matched across a string value ending in a comma and a column named like the search)."""
    from mysql_cdc.large_values import LargeValues

    lv = LargeValues(str(tmp_path / "lv"), 8)
    batch = pa.record_batch([pa.array(["x,", 'y:{"']), pa.array([5, 6]), pa.array([b"0123456789", b"9876543210"]),
                             pa.array([1.5e-05, -0.0], pa.float32())], names=["s", '":null,"', ",", "f"])
    texts = rowjson.encode_column(batch, lv)
    assert [json.loads(t)[","]["bytes"] for t in texts.to_pylist()] == [10, 10]
    assert decode_rows(texts, batch.schema, lv).equals(batch)


def test_references_the_library_never_writes_are_refused(tmp_path: Any) -> None:
    """An empty value's file is read and checked like any other; a length that is not an integer, and a FIFO
    under a value's name (which would block a read), are refused."""
    import hashlib

    from mysql_cdc.large_values import LargeValues

    lv = LargeValues(str(tmp_path / "lv"), 0)
    schema = pa.schema([("b", pa.binary())])
    texts = rowjson.encode_column(pa.record_batch([pa.array([b""])], schema=schema), lv)
    assert json.loads(texts[0].as_py())["b"] == {"file": hashlib.sha256(b"").hexdigest(), "bytes": 0}
    assert decode_rows(texts, schema, lv).column(0).to_pylist() == [b""]
    assert lv.clear() == 1
    with pytest.raises(LargeValueError, match="is not in"):  # even empty: its file must be there
        decode_rows(texts, schema, lv)
    forged = texts[0].as_py().replace('"bytes":0', '"bytes":false')
    with pytest.raises(LargeValueError, match="not written by this library"):
        decode_rows([forged], schema, lv)
    value = b"0123456789"
    name = hashlib.sha256(value).hexdigest()
    os.mkfifo(os.path.join(lv.folder, name))
    with pytest.raises(LargeValueError, match="not a large value of 10 bytes"):
        decode_rows([json.dumps({"b": {"file": name, "bytes": 10}})], schema, lv)


def test_a_value_whose_file_is_there_is_not_written_again(tmp_path: Any) -> None:
    """The same value in many rows (or a task run again) is written once: its file is kept, not rewritten."""
    from mysql_cdc.large_values import LargeValues

    lv = LargeValues(str(tmp_path / "lv"), 4)
    value = memoryview(b"x" * 1000)
    ref = lv.put(value)
    path = tmp_path / "lv" / ref["file"]
    before = os.stat(path)
    with mock.patch("os.open", side_effect=AssertionError("written again")):
        assert lv.put(value) == ref
    assert os.stat(path).st_ino == before.st_ino and os.stat(path).st_mtime_ns == before.st_mtime_ns
    os.unlink(path)  # gone (emptied after a batch): written again
    assert lv.put(value) == ref and path.read_bytes() == b"x" * 1000
    path.write_bytes(b"x" * 10)  # cut short: written over
    assert lv.put(value) == ref and path.read_bytes() == b"x" * 1000
