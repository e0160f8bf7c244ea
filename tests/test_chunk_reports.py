"""Chunk records handed from executors back to the stream's driver (:mod:`udtf.spark.chunk_reports`): a real
server on a real socket, into a real state dir."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mysql_cdc.chunks import Chunk, ChunkRecord
from mysql_cdc.errors import StateError
from mysql_cdc.ids import TableId
from mysql_cdc.offsets import BinlogOffset
from mysql_cdc.state.store import StateStore
from mysql_cdc.udtf.spark.chunk_reports import ChunkReports, ReportTo, opened, recorded_highs, report, seal

T = TableId("shop", "orders")
CHUNK = Chunk(T, 3, ("id",), (10,), (20,))


def _rec(high: int) -> ChunkRecord:
    return ChunkRecord.of(CHUNK, BinlogOffset("b.000001", 4), BinlogOffset("b.000001", high), 7)


def test_a_chunk_handed_back_is_recorded_once_and_known_to_later_tasks(tmp_path: Path) -> None:
    store = StateStore(str(tmp_path / "state"))
    reports = ChunkReports(store)
    try:
        assert recorded_highs(reports.to, [CHUNK]) == {}
        assert report(reports.to, _rec(900)).high == BinlogOffset("b.000001", 900)
        # a task run again reads the chunk at a later point: the first record stays, and is what it is told
        assert report(reports.to, _rec(1200)).high == BinlogOffset("b.000001", 900)
        stored = store.chunk_record(T, 3)
        assert stored is not None and stored.high.pos == 900 and stored.rows == 7
        assert recorded_highs(reports.to, [CHUNK, Chunk(T, 4, ("id",), (20,), None)]) == {
            "shop.orders:3": BinlogOffset("b.000001", 900)}
    finally:
        reports.close()


def test_a_message_under_another_key_is_not_answered(tmp_path: Path) -> None:
    store = StateStore(str(tmp_path / "state"))
    reports = ChunkReports(store)
    try:
        forged = ReportTo(reports.to.hosts, reports.to.port, b"f" * 32)
        with pytest.raises(StateError, match="could not answer"):
            report(forged, _rec(900))
        assert store.chunk_record(T, 3) is None
    finally:
        reports.close()


def test_an_unreachable_driver_is_one_error_naming_the_option(tmp_path: Path) -> None:
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(StateError, match="cannot reach the stream's driver .* set option driver_host"):
        report(ReportTo(("127.0.0.1",), port, b"k" * 32), _rec(900))


def test_the_key_is_not_in_the_partitions_repr() -> None:
    assert "kkkk" not in repr(ReportTo(("h",), 1, b"k" * 32))


json_values = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=8),
                           lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner,
                                                                                       max_size=3), max_leaves=8)


@given(st.dictionaries(st.text(max_size=6), json_values, max_size=4), st.data())
def test_a_sealed_request_opens_with_its_key_only_and_a_changed_byte_is_refused(
        request: dict[str, object], data: st.DataObject) -> None:
    key = b"a" * 32
    line = seal(key, request)
    assert opened(key, line) == request
    assert opened(b"b" * 32, line) is None
    i = data.draw(st.integers(0, len(line) - 2))  # the newline aside
    flipped = line[:i] + bytes([line[i] ^ 1]) + line[i + 1:]
    if json.loads(line) != _loads(flipped):  # a flip JSON reads as the same text would be the same request
        assert opened(key, flipped) is None


def _loads(line: bytes) -> object:
    try:
        return json.loads(line)
    except ValueError:
        return None


def test_a_task_of_thousands_of_recorded_chunks_is_told_every_watermark(tmp_path: Path) -> None:
    """A batch that puts 2,000 chunks in one task, run again: the answer (long GTID sets) passes a megabyte."""
    store = StateStore(str(tmp_path / "state"))
    gtids = ",".join(f"{i:08x}-0000-0000-0000-000000000000:1-{i}" for i in range(16))
    chunks = [Chunk(T, i, ("id",), (i,) if i else None, (i + 1,)) for i in range(2000)]
    for c in chunks:
        store.record_chunk(ChunkRecord.of(c, BinlogOffset("b.000001", 4, gtids, "gtid"),
                                          BinlogOffset("b.000001", 900 + c.index, gtids, "gtid"), 1))
    reports = ChunkReports(store)
    try:
        highs = recorded_highs(reports.to, chunks)
    finally:
        reports.close()
    assert len(highs) == 2000 and highs["shop.orders:1999"].pos == 2899 and highs["shop.orders:7"].gtids == gtids
    assert len(json.dumps({k: v.to_dict() for k, v in highs.items()})) > 1 << 20
