"""The emit rule against a model: snapshot chunks taken at arbitrary high watermarks, plus the events the rule
emits, applied in order, equal the table at the end and at every point after the largest high watermark."""

from __future__ import annotations

from hypothesis import example, given, settings
from hypothesis import strategies as st

from mysql_cdc.offsets import BinlogOffset
from mysql_cdc.udtf.binlog.emit import EmitRule

UUID = "3e11fa47-71ca-11e1-9e33-c80aa9429562"
Event = tuple[int, int | None, int | None, int]  # position, before key, after key, after value


@st.composite
def scenario(draw: st.DrawFn) -> tuple[dict[int, int], list[Event], list[int], list[int]]:
    table = draw(st.dictionaries(st.integers(0, 30), st.integers(0, 9), max_size=12))
    state = dict(table)
    events: list[Event] = []
    for pos in range(1, draw(st.integers(0, 30)) + 1):
        kind = draw(st.sampled_from(["insert", "update", "delete", "move"]))
        free = [k for k in range(31) if k not in state]
        if kind == "insert" and free:
            k = draw(st.sampled_from(free))
            state[k] = draw(st.integers(0, 9))
            events.append((pos, None, k, state[k]))
        elif kind in ("update", "delete", "move") and state:
            k = draw(st.sampled_from(sorted(state)))
            if kind == "delete":
                del state[k]
                events.append((pos, k, None, 0))
            elif kind == "update":
                state[k] = draw(st.integers(0, 9))
                events.append((pos, k, k, state[k]))
            elif free:
                j = draw(st.sampled_from(free))
                state[j] = state.pop(k)
                events.append((pos, k, j, state[j]))
    bounds = sorted(draw(st.sets(st.integers(1, 30), max_size=6)))
    last = events[-1][0] if events else 0
    highs = [draw(st.integers(0, last)) for _ in range(len(bounds) + 1)]  # any order, overlapping
    return table, events, bounds, highs


def _state_at(table: dict[int, int], events: list[Event], upto: int) -> dict[int, int]:
    state = dict(table)
    for pos, before, after, value in events:
        if pos > upto:
            break
        if before is not None:
            del state[before]
        if after is not None:
            state[after] = value
    return state


def _offset(pos: int, gtid: bool) -> BinlogOffset:
    if gtid:
        return BinlogOffset("binlog.000001", pos, f"{UUID}:1-{pos}" if pos else "", "gtid")
    return BinlogOffset("binlog.000001", pos)


@settings(max_examples=1500)
@given(scenario(), st.booleans())
@example(({5: 1}, [(1, 5, 20, 1)], [10], [1, 0]), False)  # a key moves from a chunk read late to one read early
def test_snapshot_plus_emitted_events_equal_the_table(s: tuple[dict[int, int], list[Event], list[int], list[int]],
                                                       gtid: bool) -> None:
    table, events, bounds, highs = s
    edges: list[tuple[int, ...] | None] = [None, *((b,) for b in bounds), None]
    ranges = [(edges[i], edges[i + 1]) for i in range(len(edges) - 1)]
    rule = EmitRule(ranges, [_offset(h, gtid) for h in highs])
    assert rule.start.pos == min(highs)
    mirror: dict[int, int] = {}
    for i, h in enumerate(highs):  # each chunk: the table's rows in its range at its own high watermark
        lo, hi = ranges[i]
        mirror.update({k: v for k, v in _state_at(table, events, h).items()
                       if (lo is None or (k,) >= lo) and (hi is None or (k,) < hi)})
    emitted = 0
    for pos, before, after, value in events:
        at, txn = _offset(pos, False), f"{UUID}:{pos}"
        if pos <= rule.start.pos:  # not read at all: every chunk already reflects it
            assert not any(rule.emit((k,), at, txn) for k in (before, after) if k is not None)
            continue
        if before is not None and rule.emit((before,), at, txn):
            del mirror[before]
            emitted += 1
        if after is not None and rule.emit((after,), at, txn):
            mirror[after] = value
            emitted += 1
        if pos >= max(highs):
            assert mirror == _state_at(table, events, pos)
    assert mirror == _state_at(table, events, events[-1][0] if events else 0)
