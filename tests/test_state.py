"""Chunk records (no server): the first record of a chunk wins, on a local path and on a pyarrow filesystem URI."""

from __future__ import annotations

from typing import Any

import pytest

from planner.chunks import Chunk, TableId
from state.offsets import BinlogOffset
from state.store import ChunkRecord, StateStore


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


def test_records_on_a_pyarrow_filesystem() -> None:
    store = StateStore("mock:///state")
    store.record_chunk(_rec(3, 10))
    assert store.record_chunk(_rec(3, 20)).high.pos == 10
    assert [r.index for r in store.chunk_records(TableId("d", "t.x"))] == [3]
