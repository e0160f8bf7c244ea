"""Change rows made column by column from runs (``udtf/spark/change_columns.py``, what the stream and
``mysql_cdc_binlog`` hand to Spark) equal change rows made row by row (each :class:`Change` of the runs, its
values and :func:`change_meta`), on random runs of random tables of every Arrow type a column maps to: one table
typed (as Arrow columns, and as the tuples of ``mysql_cdc_binlog``), and many tables in the envelope (each row's
JSON as Python's encoder writes it for that row alone)."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mysql_cdc.ids import TableId
from mysql_cdc.options import parse_options
from mysql_cdc.rowjson import encode_rows_python
from mysql_cdc.rows import META_COLUMNS, META_NULLABLE, VALUES_COLUMN
from mysql_cdc.schema import ColumnInfo, TableSchema
from mysql_cdc.types import arrow_type
from mysql_cdc.udtf.binlog.phase import ALTERNATING, ChangeRun, run_changes
from mysql_cdc.udtf.spark.change_columns import meta_arrays
from mysql_cdc.udtf.spark.output import ENVELOPE_ARROW, Output, change_meta, change_rows, changes_to_batches
from property_tests.test_rowjson_props import COLUMN_KINDS, _exact

# MySQL columns whose Arrow type is each kind's, for an Output of real table schemas (the envelope)
MYSQL_KINDS: dict[str, ColumnInfo] = {
    "int8": ColumnInfo("c", "tinyint", "tinyint", True), "int16": ColumnInfo("c", "smallint", "smallint", True),
    "int32": ColumnInfo("c", "int", "int", True), "int64": ColumnInfo("c", "bigint", "bigint", True),
    "float32": ColumnInfo("c", "float", "float", True), "float64": ColumnInfo("c", "double", "double", True),
    "string": ColumnInfo("c", "varchar", "varchar(40)", True, "utf8mb4", "utf8mb4_bin"),
    "binary": ColumnInfo("c", "varbinary", "varbinary(40)", True),
    "date": ColumnInfo("c", "date", "date", True), "datetime": ColumnInfo("c", "datetime", "datetime(6)", True,
                                                                          datetime_precision=6),
    "timestamp": ColumnInfo("c", "timestamp", "timestamp(6)", True, datetime_precision=6),
    "time": ColumnInfo("c", "time", "time(6)", True, datetime_precision=6),
    "decimal(38,30)": ColumnInfo("c", "decimal", "decimal(38,30)", True, numeric_precision=38, numeric_scale=30),
    "decimal(10,2)": ColumnInfo("c", "decimal", "decimal(10,2)", True, numeric_precision=10, numeric_scale=2),
}
OPS = ("+I", "-D", "-U", "+U", ALTERNATING)
# each example draws whole tables and runs of several rows (a fifth of the profile's examples keeps CI's time:
# MYSQL_CDC_HYPOTHESIS_PROFILE=long still runs 20,000)
FEWER = settings(max_examples=max(200, settings().max_examples // 5))
FILES = ("binlog.000001", "binlog.000002", "mysql-bin.000310")


@st.composite
def tables(draw: st.DrawFn, name: str) -> TableSchema:
    kinds = draw(st.lists(st.sampled_from(sorted(MYSQL_KINDS)), min_size=1, max_size=5))
    cols = tuple(ColumnInfo(**{**MYSQL_KINDS[k].__dict__, "name": f"c{i} {k}"}) for i, k in enumerate(kinds))
    return TableSchema(TableId("db", name), cols, (cols[0].name,), (cols[0].name,))


def _kind(col: ColumnInfo) -> str:
    return next(k for k, c in MYSQL_KINDS.items() if c.column_type == col.column_type)


@st.composite
def runs_of(draw: st.DrawFn, schemas: list[TableSchema]) -> list[ChangeRun]:
    out = []
    seq = draw(st.integers(0, 2**40))
    for _ in range(draw(st.integers(0, 6))):
        schema = draw(st.sampled_from(schemas))
        op = draw(st.sampled_from(OPS))
        n = draw(st.integers(1, 4)) * (2 if op == ALTERNATING else 1)
        values = [tuple(draw(st.none() | COLUMN_KINDS[_kind(c)][1]) for c in schema.columns) for _ in range(n)]
        gtid = draw(st.none() | st.sampled_from(["0-1-7", "3E11FA47-71CA-11E1-9E33-C80AA9429562:23"]))
        out.append(ChangeRun(schema.table, op, values, draw(st.sampled_from(FILES)), draw(st.integers(4, 2**32)),
                             draw(st.integers(0, 1000)), gtid, draw(st.integers(0, 2**32)), seq))
        seq += n + draw(st.integers(0, 1000))
    return out


def _row_path(runs: list[ChangeRun], value: Any) -> list[tuple[Any, ...]]:
    """The reference: every change row made alone, as a Python tuple."""
    return [(*value(ch), *change_meta(ch)) for run in runs for ch in run_changes(run)]


def _typed(rows: list[tuple[Any, ...]], schema: pa.Schema) -> pa.Table:
    cols = list(zip(*rows)) if rows else [() for _ in schema]
    return pa.Table.from_arrays([pa.array(list(c), type=f.type) for c, f in zip(cols, schema)], schema=schema)


@FEWER
@given(st.data())
def test_one_tables_change_rows_made_by_column_equal_those_made_by_row(data: st.DataObject) -> None:
    schema = data.draw(tables("t"))
    opts = parse_options({"table": "db.t"})
    out = Output({schema.table: schema}, opts)
    runs = data.draw(runs_of([schema]))
    size = data.draw(st.integers(1, 12))
    arrow = out._arrow[schema.table]
    batches = list(changes_to_batches(iter(runs), arrow, size))
    assert sum(b.num_rows for b in batches) == sum(len(r.values) for r in runs)
    got = pa.Table.from_batches(batches, schema=arrow)
    assert got.equals(_typed(_row_path(runs, lambda ch: ch.values), arrow))


@FEWER
@given(st.data())
def test_change_rows_as_tuples_made_per_run_equal_those_made_by_row(data: st.DataObject) -> None:
    """What mysql_cdc_binlog yields for one table: the metadata made once per run."""
    runs = data.draw(runs_of([data.draw(tables("t"))]))
    assert list(change_rows(iter(runs))) == _row_path(runs, lambda ch: ch.values)


@FEWER
@given(st.data())
def test_many_tables_change_rows_in_the_envelope_equal_those_made_by_row(data: st.DataObject) -> None:
    schemas = [data.draw(tables("a")), data.draw(tables("b")), data.draw(tables("c"))]
    opts = parse_options({"tables": "db.*"})
    out = Output({s.table: s for s in schemas}, opts)
    runs = data.draw(runs_of(schemas))
    size = data.draw(st.integers(1, 12))
    got = pa.Table.from_batches(list(out.change_batches(iter(runs), size)), schema=ENVELOPE_ARROW)

    def text(ch: Any) -> tuple[str]:
        values = out._values[ch.table]
        one = pa.RecordBatch.from_arrays([pa.array([v], type=f.type) for v, f in zip(ch.values, values)],
                                         schema=values)
        return (encode_rows_python(one)[0],)

    want = _typed(_row_path(runs, text), ENVELOPE_ARROW)
    assert got.drop_columns([VALUES_COLUMN]).equals(want.drop_columns([VALUES_COLUMN]))
    # the same values (a float may be written otherwise, as the same double: see rowjson.encode_column)
    assert [_exact(t) for t in got.column(VALUES_COLUMN).to_pylist()] == [
        _exact(t) for t in want.column(VALUES_COLUMN).to_pylist()]


def test_the_metadata_columns_are_the_outputs() -> None:
    """The envelope's metadata columns are META_COLUMNS, in their order and nullability."""
    assert [(f.name, f.type, f.nullable) for f in list(ENVELOPE_ARROW)[1:]] == [
        (m, arrow_type(t), m in META_NULLABLE) for m, t in META_COLUMNS]


def test_a_row_index_past_an_int_is_an_error_not_a_wrapped_number() -> None:
    run = ChangeRun(TableId("db", "t"), "+I", [(1,), (2,)], "binlog.000001", 900, 2**31 - 1, None, 7, 100)
    with pytest.raises(pa.ArrowInvalid):
        meta_arrays([run])
