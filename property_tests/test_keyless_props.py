"""Tables without a primary key against a multiset model (pure; no server): rows are (key, value) with keys that
repeat and may be NULL (None), and equal rows are kept as many times as the table holds them.

- The emit rule with a chunk of NULL keys: chunks read at arbitrary points, plus the events the rule emits
  applied one equal row at a time, equal the table at the end.
- Undoing the changes between two points brings a chunk's rows at the later point back to the earlier one."""

from __future__ import annotations

from collections import Counter

from hypothesis import given, settings
from hypothesis import strategies as st

from mysql_cdc.offsets import BinlogOffset
from mysql_cdc.udtf.binlog.emit import EmitRule
from mysql_cdc.udtf.snapshot.correct import RowChange, undo_changes

Row = tuple[int | None, int]
KEYS = st.one_of(st.none(), st.integers(0, 12))


@st.composite
def history(draw: st.DrawFn) -> tuple[Counter[Row], list[RowChange]]:
    """A multiset table and a serial history of changes (position i + 1 for change i): equal rows inserted,
    one of equal rows deleted or updated, keys moved to and from NULL."""
    table: Counter[Row] = Counter(draw(st.lists(st.tuples(KEYS, st.integers(0, 2)), max_size=14)))
    state = Counter(table)
    changes: list[RowChange] = []
    for _ in range(draw(st.integers(0, 25))):
        kind = draw(st.sampled_from(["insert", "update", "delete"]))
        if kind == "insert" or not state:
            row = draw(st.sampled_from(sorted(state, key=repr))) if state and draw(st.booleans()) else \
                (draw(KEYS), draw(st.integers(0, 2)))  # often a copy of a row the table holds
            state[row] += 1
            changes.append(RowChange("insert", None, row))
            continue
        before = draw(st.sampled_from(sorted(state, key=repr)))
        state[before] -= 1
        state = +state
        if kind == "delete":
            changes.append(RowChange("delete", before, None))
        else:
            after = (draw(KEYS) if draw(st.booleans()) else before[0], draw(st.integers(0, 2)))
            state[after] += 1
            changes.append(RowChange("update", before, after))
    return table, changes


def _at(table: Counter[Row], changes: list[RowChange], upto: int) -> Counter[Row]:
    state = Counter(table)
    for ch in changes[:upto]:
        if ch.before is not None:
            state[ch.before] -= 1
        if ch.after is not None:
            state[ch.after] += 1
    return +state


def _chunks(bounds: list[int]) -> list[tuple[tuple[int, ...] | None, tuple[int, ...] | None]]:
    edges: list[tuple[int, ...] | None] = [None, *((b,) for b in bounds), None]
    return [(edges[i], edges[i + 1]) for i in range(len(edges) - 1)]


def _holds(chunk: tuple[tuple[int, ...] | None, tuple[int, ...] | None] | None, row: Row) -> bool:
    """``None`` is the chunk of NULL keys; a range holds no NULL key."""
    if chunk is None:
        return row[0] is None
    lo, hi = chunk
    return row[0] is not None and (lo is None or (row[0],) >= lo) and (hi is None or (row[0],) < hi)


@settings(max_examples=600)
@given(history(), st.lists(st.integers(1, 12), max_size=4, unique=True), st.data())
def test_snapshot_plus_emitted_events_equal_the_multiset(h: tuple[Counter[Row], list[RowChange]],
                                                         bounds: list[int], data: st.DataObject) -> None:
    table, changes = h
    ranges = _chunks(sorted(bounds))
    highs = [data.draw(st.integers(0, len(changes))) for _ in range(len(ranges) + 1)]  # the last: NULL keys
    rule = EmitRule(ranges, [BinlogOffset("b.1", p) for p in highs[:-1]], nulls=BinlogOffset("b.1", highs[-1]))
    mirror: Counter[Row] = Counter()
    for chunk, high in zip([*ranges, None], highs):
        mirror.update({r: n for r, n in _at(table, changes, high).items() if _holds(chunk, r)})
    for i, ch in enumerate(changes):
        at = BinlogOffset("b.1", i + 1)
        if ch.before is not None and rule.emit(None if ch.before[0] is None else (ch.before[0],), at):
            assert mirror[ch.before] > 0, "a removal of a row the mirror does not hold"
            mirror[ch.before] -= 1
        if ch.after is not None and rule.emit(None if ch.after[0] is None else (ch.after[0],), at):
            mirror[ch.after] += 1
    assert +mirror == _at(table, changes, len(changes))


@settings(max_examples=600)
@given(history(), st.data())
def test_undoing_the_changes_between_two_points_gives_the_earlier_rows(h: tuple[Counter[Row], list[RowChange]],
                                                                       data: st.DataObject) -> None:
    table, changes = h
    first = data.draw(st.integers(0, len(changes)))
    later = data.draw(st.integers(first, len(changes)))
    bounds = sorted(data.draw(st.lists(st.integers(1, 12), max_size=3, unique=True)))
    for chunk in [*_chunks(bounds), None]:
        rows = [r for r, n in _at(table, changes, later).items() if _holds(chunk, r) for _ in range(n)]
        back = undo_changes(rows, changes[first:later], lambda r, c=chunk: _holds(c, r))  # type: ignore[misc]
        assert Counter(back) == Counter({r: n for r, n in _at(table, changes, first).items() if _holds(chunk, r)})
