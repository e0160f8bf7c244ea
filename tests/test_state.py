"""Chunk records (no server): the first record of a chunk wins, on a local path and a file: URI (on S3:
tests/test_storage.py)."""

from __future__ import annotations

import os
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mysql_cdc.chunks import Chunk, ChunkRecord
from mysql_cdc.ids import TableId
from mysql_cdc.offsets import BinlogOffset
from mysql_cdc.schema import ColumnInfo, TableSchema
from mysql_cdc.state.store import StateStore, table_file_name


def _rec(index: int, pos: int) -> ChunkRecord:
    chunk = Chunk(TableId("d", "t.x"), index, ("id", "k"), None if index == 0 else (index * 10, "a"), None)
    return ChunkRecord.of(chunk, BinlogOffset("binlog.000002", 4, "u:1-3", "gtid"),
                          BinlogOffset("binlog.000002", pos, "u:1-5", "gtid"), rows=7)


@pytest.mark.parametrize("where", ["local", "file-uri"])
def test_first_record_wins_and_records_round_trip(tmp_path: Any, where: str) -> None:
    location = str(tmp_path / "st") if where == "local" else f"file://{tmp_path}/st"
    store = StateStore(location)
    first = store.record_chunk(_rec(1, 100))
    again = store.record_chunk(_rec(1, 999))  # a retried task records the same chunk with a newer watermark
    assert again.high.pos == 100 == first.high.pos
    store.record_chunk(_rec(0, 50))
    recs = StateStore(location).chunk_records(TableId("d", "t.x"))
    assert [r.index for r in recs] == [0, 1]
    assert recs[1].chunk() == _rec(1, 0).chunk() and recs[1].high.gtids == "u:1-5"
    assert StateStore(location).chunk_records(TableId("d", "other")) == []


def test_tables_whose_names_differ_only_in_where_the_dot_is_keep_their_own_records(tmp_path: Any) -> None:
    """`x.y`.z and x.`y.z` both print as x.y.z once the backticks are gone: each keeps its own plan and
    watermarks (they shared one folder, and one table's binlog read used the other's watermarks)."""
    store = StateStore(str(tmp_path / "st"))
    a, b = TableId("x.y", "z"), TableId("x", "y.z")
    for i, t in enumerate((a, b)):
        chunk = Chunk(t, 0, ("id",), None, None)
        store.record_plan(t, [chunk])
        store.record_chunk(ChunkRecord.of(chunk, BinlogOffset("binlog.000001", 4),
                                          BinlogOffset("binlog.000001", 100 + i), rows=i))
    assert [(r.table, r.high.pos) for r in store.chunk_records(a)] == [(a, 100)]
    assert [(r.table, r.high.pos) for r in store.chunk_records(b)] == [(b, 101)]
    assert store.plan(a) == [Chunk(a, 0, ("id",), None, None)]
    assert store.plan(b) == [Chunk(b, 0, ("id",), None, None)]


names = st.text(st.characters(codec="utf-8", exclude_characters="\x00"), min_size=1, max_size=12)


@given(names, names, names, names)
def test_table_file_names_are_injective(d1: str, t1: str, d2: str, t2: str) -> None:
    a, b = TableId(d1, t1), TableId(d2, t2)
    assert (table_file_name(a) == table_file_name(b)) == (a == b)
    assert "/" not in table_file_name(a) and table_file_name(a) not in (".", "..")


@given(st.text(st.characters(codec="utf-8", exclude_characters="\x00"), min_size=1, max_size=400), st.text(
    st.characters(codec="utf-8", exclude_characters="\x00"), min_size=1, max_size=400))
def test_file_names_stay_within_a_file_systems_limit_and_apart(a: str, b: str) -> None:
    from mysql_cdc.state.store import NAME_MAX, _safe, bounded

    x, y = bounded(_safe(a)), bounded(_safe(b))
    assert len((x + ".json").encode()) <= 255 and "/" not in x
    assert (x == y) == (a == b)
    assert x == _safe(a) or len(_safe(a)) > NAME_MAX  # a name that fit is kept as earlier versions wrote it


def test_long_names_are_shortened_kept_whole_and_read_back(tmp_path: Any) -> None:
    """A table of 64 CJK characters in a database of 64 (every part 576 characters once encoded) and a stream
    over a dozen tables: every record is written, every name comes back whole, no file name passes 255 bytes;
    a state dir with the names of earlier versions is read as it is."""
    t = TableId("库" * 64, "表" * 64)
    store = StateStore(str(tmp_path / "s"))
    chunk = Chunk(t, 0, ("id",), None, None)
    store.record_plan(t, [chunk])
    store.record_chunk(ChunkRecord.of(chunk, BinlogOffset("binlog.000001", 4), BinlogOffset("binlog.000001", 9),
                                      rows=1))
    schema = TableSchema(t, (ColumnInfo("id", "int", "int", False),), ("id",), ("id",))
    store.record_schema(schema)
    store.record_mirror(t, "/lake/x")
    stream = "tables " + "|".join(f"shop[.]customer_table_{i}" for i in range(12))
    store.record_offset(stream, {"phase": "binlog", "file": "binlog.000001", "pos": 9})
    again = StateStore(str(tmp_path / "s"))  # a new process reads it all back by name
    assert again.recorded_tables() == [t] and again.recorded_schemas() == [t]
    assert again.plan(t) == [chunk] and [r.high.pos for r in again.chunk_records(t)] == [9]
    assert again.schema(t) == schema and again.mirror(t) == "/lake/x"
    assert again.offsets() == {stream: {"phase": "binlog", "file": "binlog.000001", "pos": 9}}
    assert again.offset(stream) == {"phase": "binlog", "file": "binlog.000001", "pos": 9}
    for folder, _, files in os.walk(tmp_path / "s"):
        for name in [os.path.basename(folder), *files]:
            assert len(name.encode()) <= 255, name
    # names as an earlier version wrote them (250 characters and shorter) are those read now
    old = StateStore(str(tmp_path / "old"))
    name = "x" * 245
    os.makedirs(tmp_path / "old" / "offsets")
    (tmp_path / "old" / "offsets" / f"{name}.json").write_text('{"phase": "binlog", "pos": 4}')
    assert old.offset(name) == {"phase": "binlog", "pos": 4} and old.offsets() == {name: {"phase": "binlog", "pos": 4}}


@given(st.lists(st.integers(0, 10**6), unique=True, max_size=5), st.booleans(), st.booleans())
def test_plans_and_records_of_nullable_and_keyless_tables_round_trip(bounds: list[int], nullable: bool,
                                                                     keyless: bool) -> None:
    """The chunk of NULL keys (and the ranges of a nullable key) keep their flags through the plan and the
    records: the binlog phase judges NULL keys by that chunk's watermark."""
    import tempfile

    from mysql_cdc.chunks import chunks_from_bounds

    t = TableId("d", "t")
    cols: tuple[str, ...] = () if keyless else ("k",)
    chunks = chunks_from_bounds(t, cols, [] if keyless else [(b,) for b in sorted(bounds)], nullable and not keyless)
    with tempfile.TemporaryDirectory() as d:
        store = StateStore(d)
        assert store.record_plan(t, chunks) == chunks
        for c in chunks:
            store.record_chunk(ChunkRecord.of(c, BinlogOffset("binlog.000001", 4), BinlogOffset("binlog.000001", 9),
                                              rows=1))
        recs = store.chunk_records(t)
    assert [r.chunk() for r in recs] == chunks
    assert [ChunkRecord.from_dict(r.to_dict()) for r in recs] == recs
    assert [c.nulls for c in chunks] == [False] * (len(chunks) - 1) + [nullable and not keyless]


def test_status_says_when_a_tables_rows_are_a_key_range_read_again(tmp_path: Any, capsys: Any) -> None:
    """After ``resnapshot --key-from/--key-to`` a table's plan is the range's, with the chunks around it recorded
    with no rows: ``status`` counts the range's rows and says so (it showed them as the table's)."""
    from mysql_cdc.cli import main

    t, at = TableId("d", "t"), BinlogOffset("binlog.000002", 4)
    chunks = [Chunk(t, i, ("id",), None if i == 0 else (i * 10,), None if i == 3 else ((i + 1) * 10,))
              for i in range(4)]
    whole = StateStore(str(tmp_path / "whole"))
    whole.record_plan(t, chunks)
    ranged = StateStore(str(tmp_path / "ranged"))
    ranged.record_plan(t, chunks, outside=[0, 3])
    for store in (whole, ranged):
        for c in chunks:
            store.record_chunk(ChunkRecord.of(c, at, at, 0 if store is ranged and c.index in (0, 3) else 5))
    for name, rows, note in (("whole", 20, False), ("ranged", 10, True)):
        for table_arg in ([], ["--table", "d.t"]):
            assert main(["status", "--state-dir", str(tmp_path / name), *table_arg]) == 0
            first = capsys.readouterr().out.splitlines()[0]
            assert f"chunks recorded, {rows} rows" in first, first
            assert ("a key range read again" in first) == note and ("2 chunk(s) around it" in first) == note, first
