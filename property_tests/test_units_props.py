"""The typed units of work keep their JSON: a stream offset (Spark's checkpoint holds one per batch), a round
and a schema-history entry (the state dir holds them) are written exactly as earlier versions wrote them, key
for key, so a running capture restarts on new code. Each type: a round trip of random values, and JSON as
earlier versions wrote it read back and written again byte for byte."""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mysql_cdc.chunks import Chunk
from mysql_cdc.ids import TableId
from mysql_cdc.keyrange import KeyRange
from mysql_cdc.offsets import BinlogOffset
from mysql_cdc.schema import ColumnInfo, TableSchema
from mysql_cdc.state.history import HistoryEntry
from mysql_cdc.state.resnapshot import finished_rounds, progress
from mysql_cdc.state.store import PlanRecord, ResnapshotRequest, Round, StateStore
from mysql_cdc.udtf.binlog.startup import ReadFrom
from mysql_cdc.udtf.spark.stream_offsets import BinlogStreamOffset, SnapshotOffset, parse_stream_offset
from mysql_cdc.xa import PendingXa, Xid

names = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), min_size=1, max_size=8)
files = st.integers(1, 999999).map(lambda n: f"binlog.{n:06d}")
gtids = st.sampled_from(["", "3e11fa47-71ca-11e1-9e33-c80aa9429562:1-57",
                         "3e11fa47-71ca-11e1-9e33-c80aa9429562:1-5:9,4e11fa47-71ca-11e1-9e33-c80aa9429562:1"])
xids = st.builds(Xid, st.binary(min_size=1, max_size=64), st.binary(max_size=64), st.integers(0, 2**31))
pending_xa = st.builds(PendingXa, xids, files, st.integers(4, 2**40))
read_froms = st.builds(
    lambda f, p, g, skip, xa: ReadFrom(BinlogOffset(f, p, g, "gtid" if g is not None else "position"),
                                       g is not None, skip, tuple(xa)),
    files, st.integers(4, 2**40), st.none() | gtids, st.none() | st.integers(0, 2**34),
    st.lists(pending_xa, max_size=2, unique_by=lambda p: p.xid))
offsets = st.builds(SnapshotOffset, st.integers(0, 10**6), st.integers(0, 10**6), st.none() | st.integers(0, 99),
                    st.none() | read_froms) | st.builds(BinlogStreamOffset, read_froms,
                                                        st.none() | st.integers(1, 99))
tables = st.builds(TableId, names, names)
points = st.fixed_dictionaries({"file": files, "pos": st.integers(4, 2**40)})
key_ranges = st.builds(lambda cols, a, b: KeyRange(cols, *sorted([a, b])) if a != b else KeyRange(cols, a, None),
                       st.just(("a", "b")), st.tuples(st.integers(-2**63, 2**64), st.integers(-9, 9)),
                       st.tuples(st.integers(-2**63, 2**64), st.integers(-9, 9))) | st.builds(
    KeyRange.of_keys, st.just(("a", "b")),
    st.lists(st.tuples(st.integers(-2**63, 2**64), st.integers(-9, 9)), min_size=1, max_size=5)) | st.builds(
    KeyRange.of_keys, st.just(("d", "p", "at")),  # of dates, DECIMALs and times (a TIMESTAMP's: in UTC)
    st.lists(st.tuples(st.dates(), st.decimals(places=2, allow_nan=False, allow_infinity=False),
                       st.datetimes(max_value=dt.datetime(9999, 12, 31))), min_size=1, max_size=5),
    st.just(("at",)))
rounds = st.builds(lambda t, resume, dropped, note, end, at, request, rs: Round(
    t, resume, dropped, note, end, at, request, tuple((d, r) for d, r in zip(dropped, rs)),
    {"file": "b.1", "pos": 4, "gtids": None, "kind": "position"} if rs and dropped else None),
    st.lists(tables, max_size=3).map(tuple), st.none() | points,
    st.lists(tables, max_size=2, unique=True).map(tuple), st.none() | names, st.none() | points, st.none() | points,
    st.none() | st.integers(0, 10**6), st.lists(key_ranges, max_size=2))
requests = st.builds(ResnapshotRequest, st.lists(tables, min_size=1, max_size=3).map(tuple), st.text(max_size=30),
                     st.text(max_size=20)) | st.builds(lambda t, why, r: ResnapshotRequest((t,), why, "", r), tables,
                                                       st.text(max_size=30), key_ranges)
schemas = st.builds(lambda t, cols: TableSchema(t, tuple(ColumnInfo(c, "int", "int", False) for c in cols),
                                                (cols[0],), (cols[0],)),
                    tables, st.lists(names, min_size=1, max_size=3, unique=True))
entries = st.builds(HistoryEntry, st.tuples(files, st.integers(0, 2**40)),
                    st.sampled_from(["snapshot", "same", "evolve", "reset"]), st.none() | schemas,
                    st.dictionaries(names, names, max_size=2), st.text(max_size=40), st.text(max_size=20))


@st.composite
def plan_records(draw: Any) -> PlanRecord:
    """A plan of 1-5 chunks over one or two key columns, bounds in order (as a planner makes them)."""
    t = draw(tables)
    cols = draw(st.sampled_from([("id",), ("k", "n")]))
    values = draw(st.sampled_from([st.integers(-2**63, 2**64), st.text(max_size=6)]))  # integer or string keys
    bounds = sorted(set(draw(st.lists(st.tuples(*[values] * len(cols)), max_size=4))))
    ends = [None, *bounds, None]
    nullable = draw(st.booleans())
    chunks = tuple(Chunk(t, i, cols, ends[i], ends[i + 1], nullable, nullable and i == 0) for i in range(len(ends) - 1))
    rows = draw(st.sampled_from([0, 1, 5000]))
    return PlanRecord(t, chunks, rows, draw(st.integers(0, 10**6)) if rows else 0,
                      frozenset(draw(st.lists(st.integers(0, len(chunks) - 1), max_size=3))))


@given(plan_records())
def test_a_plan_record_reads_back_as_itself(rec: PlanRecord) -> None:
    assert PlanRecord.from_dict(rec.table, json.loads(json.dumps(rec.to_dict()))) == rec


@given(offsets)
def test_a_stream_offset_reads_back_as_itself(offset: Any) -> None:
    d = offset.to_dict()
    assert parse_stream_offset(json.loads(json.dumps(d))) == offset
    assert list(d)[:2] == ["v", "phase"] and d["v"] == 1


@given(rounds)
def test_a_round_reads_back_as_itself(rnd: Round) -> None:
    if not rnd.dropped:  # note and end are kept with dropped tables only
        rnd = Round(rnd.tables, rnd.resume, schema_at=rnd.schema_at, request=rnd.request)  # ranges: of dropped
    assert Round.from_dict(json.loads(json.dumps(rnd.to_dict()))) == rnd


@given(requests)
def test_a_snapshot_request_reads_back_as_itself(req: ResnapshotRequest) -> None:
    assert ResnapshotRequest.from_dict(json.loads(json.dumps(req.to_dict()))) == req


@given(st.lists(st.booleans(), min_size=1, max_size=8), st.integers(0, 5), st.integers(0, 12),
       st.sampled_from(["binlog", "snapshot"]))
def test_a_request_is_done_only_once_the_round_after_the_one_that_took_it_is_finished(
        takes: list[bool], index: int, finished: int, phase: str) -> None:
    # rounds that take requests (numbered in order); a request is taken by the first round naming it or a later one
    rounds, n = [], -1
    for take in takes:
        n += take
        rounds.append(Round((), request=n if take else None))
    committed = {"phase": phase, "rounds": finished} if phase == "binlog" else {"phase": phase, "round": finished}
    got = progress(rounds, index, committed)
    taker = next((i for i, r in enumerate(rounds) if r.request is not None and r.request >= index), None)
    if taker is None:
        assert got.state == "waiting" and got.round is None
    else:
        assert got.round == taker
        assert (got.state == "done") == (finished_rounds(committed) >= taker + 2)
    assert got.request == index


@given(entries)
def test_a_history_entry_reads_back_as_itself(entry: HistoryEntry) -> None:
    entry = HistoryEntry(entry.at, entry.action, entry.schema, entry.renamed, entry.statement[:2000], entry.why)
    assert HistoryEntry.from_dict(json.loads(json.dumps(entry.to_dict()))) == entry


# offsets as the stream reader wrote them before they were typed (dicts built in place), in Spark's order
EARLIER_OFFSETS = [
    '{"v": 1, "phase": "snapshot", "chunk": 0, "chunks": 7}',
    '{"v": 1, "phase": "snapshot", "chunk": 3, "chunks": 7, "round": 0}',
    '{"v": 1, "phase": "snapshot", "chunk": 2, "chunks": 4, "round": 3, "resume": {"file": "binlog.000004", "pos": '
    '1532}}',
    '{"v": 1, "phase": "snapshot", "chunk": 1, "chunks": 2, "round": 1, "resume": {"file": "binlog.000002", '
    '"pos": 197, '
    '"gtids": "3e11fa47-71ca-11e1-9e33-c80aa9429562:1-57", "skip_before": 1700000000}}',
    '{"v": 1, "phase": "binlog", "file": "binlog.000003", "pos": 4}',
    '{"v": 1, "phase": "binlog", "file": "binlog.000003", "pos": 81920, "rounds": 2}',
    '{"v": 1, "phase": "binlog", "file": "mysql-bin.000012", "pos": 157, "gtids": "3e11fa47-71ca-11e1-9e33-'
    'c80aa9429562:1-9", "skip_before": 1700000000, "rounds": 1}',
    '{"v": 1, "phase": "binlog", "file": "", "pos": 0, "gtids": "0-1-100"}',
]


@pytest.mark.parametrize("text", EARLIER_OFFSETS)
def test_an_earlier_versions_offset_is_read_and_written_again_the_same(text: str) -> None:
    assert json.dumps(parse_stream_offset(json.loads(text)).to_dict()) == text


# state files as earlier versions wrote them (json.dumps(..., sort_keys=True))
EARLIER_ROUNDS = [
    '{"resume": null, "schema_at": {"file": "binlog.000002", "pos": 900}, "tables": [["shop", "a"], ["shop", "b"]]}',
    '{"resume": {"file": "binlog.000003", "pos": 4}, "tables": [["shop", "new t"]]}',
    '{"dropped": [["shop", "a"]], "end": {"file": "binlog.000003", "pos": 1201}, "note": "shop.a: dropped at '
    'binlog.000003:1100 by \'DROP TABLE a\'", "resume": {"file": "binlog.000003", "pos": 600}, "tables": []}',
    '{"dropped": [["shop", "a"]], "end": {"file": "binlog.000001", "pos": 30644}, "note": "shop.a: snapshotted again '
    'on request 0 (mysql-cdc resnapshot)", "request": 0, "resume": {"file": "binlog.000001", "pos": 30644}, '
    '"tables": []}',
]
EARLIER_HISTORY = [
    '{"action": "snapshot", "at": {"file": "binlog.000002", "pos": 900}, "renamed": {}, "schema": {"chunk_key": '
    '["id"], "columns": [{"charset": null, "collation": null, "data_type": "int", "datetime_precision": null, '
    '"generated": false, "name": "id", "column_type": "int", "nullable": false, "numeric_precision": 10, '
    '"numeric_scale": 0}], "database": "shop", "primary_key": ["id"], "table": "a"}, "statement": "", "why": ""}',
    '{"action": "evolve", "at": {"file": "binlog.000003", "pos": 77}, "renamed": {"b": "a"}, "schema": null, '
    '"statement": "ALTER TABLE t RENAME COLUMN a TO b", "why": ""}',
    '{"action": "reset", "at": {"file": "binlog.000004", "pos": 5}, "renamed": {}, "schema": null, "statement": "", '
    '"why": "truncated at binlog.000004:5"}',
]


@pytest.mark.parametrize("text", EARLIER_ROUNDS)
def test_an_earlier_versions_round_is_read_and_written_again_the_same(text: str, tmp_path: Any) -> None:
    d = json.loads(text)
    assert json.dumps(Round.from_dict(d).to_dict(), sort_keys=True) == json.dumps(d, sort_keys=True)
    store = StateStore(str(tmp_path))
    store.record_round(0, Round.from_dict(d))
    assert (tmp_path / "rounds" / "0.json").read_text() == json.dumps(d, sort_keys=True)


@pytest.mark.parametrize("text", EARLIER_HISTORY)
def test_an_earlier_versions_history_entry_is_read_and_written_again_the_same(text: str, tmp_path: Any) -> None:
    d = json.loads(text)
    store = StateStore(str(tmp_path))
    entry = HistoryEntry.from_dict(d)
    store.record_history(TableId("shop", "a"), entry)
    (written,) = list((tmp_path / "history" / "shop.a").iterdir())
    assert written.read_text() == json.dumps(d, sort_keys=True)
    assert store.history(TableId("shop", "a")) == [entry]


# plans as earlier versions wrote them (plans/<table>.json): without the sizes (before they were recorded), with
# them and NULL-able string keys, with the chunks around a key range read again
EARLIER_PLANS = [
    '{"chunks": [{"index": 0, "key_columns": ["id"], "start": null, "end": "[100]"}, {"index": 1, "key_columns": '
    '["id"], "start": "[100]", "end": null}]}',
    '{"chunks": [{"index": 0, "key_columns": ["k", "n"], "start": null, "end": "[\\"m\\",3]", "nullable": true, '
    '"nulls": true}, {"index": 1, "key_columns": ["k", "n"], "start": "[\\"m\\",3]", "end": null, "nullable": true}], '
    '"rows_per_chunk": 5000, "avg_row_bytes": 87}',
    '{"chunks": [{"index": 0, "key_columns": ["id"], "start": null, "end": "[10]"}, {"index": 1, "key_columns": '
    '["id"], "start": "[10]", "end": "[20]"}, {"index": 2, "key_columns": ["id"], "start": "[20]", "end": "[30]"}, '
    '{"index": 3, "key_columns": ["id"], "start": "[30]", "end": null}], "rows_per_chunk": 10, "avg_row_bytes": 20, '
    '"outside": [0, 3]}',
]


@pytest.mark.parametrize("text", EARLIER_PLANS)
def test_an_earlier_versions_plan_is_read_and_written_again_the_same(text: str, tmp_path: Any) -> None:
    t = TableId("shop", "a")
    (tmp_path / "plans").mkdir()
    (tmp_path / "plans" / "shop.a.json").write_text(text)
    rec = StateStore(str(tmp_path)).plan_record(t)
    assert rec is not None and json.dumps(rec.to_dict()) == text
    store = StateStore(str(tmp_path / "again"))
    store.record_plan(t, rec.chunks, rec.rows_per_chunk, rec.avg_row_bytes, sorted(rec.outside))
    assert (tmp_path / "again" / "plans" / "shop.a.json").read_text() == text
    assert store.plan_record(t) == rec and store.plan(t) == list(rec.chunks) and store.outside(t) == rec.outside
    assert store.plan_sizes(t) == ((rec.rows_per_chunk, rec.avg_row_bytes) if rec.rows_per_chunk else None)
