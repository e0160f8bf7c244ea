"""Each pure property catches a deliberately broken rule: run against a mutant, the property test must fail.

A property that passes whatever the code does proves nothing; these runs show that the emit, correction,
chunk coverage and offset order properties would each fail on a plausible bug (an off-by-one in the emit
comparison or in the chunk lookup, a correction that forgets deletes, a gap between chunks, file names
compared as text). The server-backed properties are checked the same way by hand: ``property_tests/mutate.py``.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Hashable, Iterable
from typing import Any

import pytest

from mysql_cdc.chunks import Chunk
from mysql_cdc.ids import TableId
from mysql_cdc.offsets import BinlogOffset
from mysql_cdc.udtf.binlog.emit import EmitRule, SortKey
from mysql_cdc.udtf.snapshot.correct import Row, RowChange
from property_tests import test_chunks_props, test_correction_props, test_emit_props, test_offsets_props


def _fails(test: Callable[[], None]) -> None:
    """The property test fails: an assertion, or the model meeting an impossible step (deleting a row the
    mirror does not hold raises KeyError)."""
    with pytest.raises(Exception) as info:
        test()
    # Hypothesis reports several distinct failures as one group
    errors = list(getattr(info.value, "exceptions", [info.value]))
    assert all(isinstance(e, AssertionError | KeyError) for e in errors), errors


def test_emit_property_catches_an_off_by_one(monkeypatch: pytest.MonkeyPatch) -> None:
    def emit_at_or_after(self: EmitRule, key: SortKey, event: BinlogOffset, gtid: str | None = None) -> bool:
        # broken: an event AT the chunk's high watermark is already in the chunk's rows
        return event.position_key() >= self.highs[self.owner(key)].position_key()

    monkeypatch.setattr(EmitRule, "emit", emit_at_or_after)
    _fails(test_emit_props.test_snapshot_plus_emitted_events_equal_the_table)


def test_emit_property_catches_a_chunk_lookup_off_by_one(monkeypatch: pytest.MonkeyPatch) -> None:
    # broken: a key equal to a chunk's first key is judged by the previous chunk's high watermark
    monkeypatch.setattr(EmitRule, "owner", lambda self, key: bisect.bisect_left(self._starts, key))
    _fails(test_emit_props.test_snapshot_plus_emitted_events_equal_the_table)


def test_emit_property_catches_a_rule_that_ignores_the_key(monkeypatch: pytest.MonkeyPatch) -> None:
    def emit_after_lowest(self: EmitRule, key: SortKey, event: BinlogOffset, gtid: str | None = None) -> bool:
        # broken: the seeds' rule without the chunk lookup (after the smallest high watermark = emit)
        return event.position_key() > self.start.position_key()

    monkeypatch.setattr(EmitRule, "emit", emit_after_lowest)
    _fails(test_emit_props.test_snapshot_plus_emitted_events_equal_the_table)


def test_correction_property_catches_a_forgotten_delete(monkeypatch: pytest.MonkeyPatch) -> None:
    def without_deletes(rows: Iterable[Row], changes: Iterable[RowChange], identity: Callable[[Row], Hashable],
                        in_chunk: Callable[[Row], bool]) -> list[Row]:
        state = {identity(r): r for r in rows}
        for ch in changes:
            if ch.op == "update" and ch.before is not None and in_chunk(ch.before):
                state.pop(identity(ch.before), None)
            if ch.after is not None and in_chunk(ch.after):
                state[identity(ch.after)] = ch.after
        return list(state.values())

    monkeypatch.setattr(test_correction_props, "correct_chunk", without_deletes)
    _fails(test_correction_props.test_corrected_chunk_equals_table_at_high_watermark)


def test_coverage_property_catches_a_gap_between_chunks(monkeypatch: pytest.MonkeyPatch) -> None:
    real = test_chunks_props.chunks_from_bounds

    def with_gap(table: TableId, key: tuple[str, ...], bounds: list[tuple[Any, ...]]) -> list[Chunk]:
        chunks = real(table, key, bounds)
        if len(chunks) < 2 or chunks[1].start is None:
            return chunks
        # broken: the second chunk starts one key later than the first one ends
        shifted = (chunks[1].start[0] + 1,)
        return [chunks[0], Chunk(table, 1, key, shifted, chunks[1].end), *chunks[2:]]

    monkeypatch.setattr(test_chunks_props, "chunks_from_bounds", with_gap)
    _fails(test_chunks_props.test_even_bounds_partition_the_key_range)


def test_offset_property_catches_file_names_compared_as_text(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(test_offsets_props, "binlog_file_key", lambda name: (name,))
    _fails(test_offsets_props.test_file_names_compare_by_number_whatever_the_width)
