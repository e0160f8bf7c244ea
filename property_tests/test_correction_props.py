"""The correction against a model that replays the same history on a dict (pure; no server)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from mysql_cdc.udtf.snapshot.correct import RowChange, correct_chunk

KEYS = st.integers(min_value=0, max_value=30)


@st.composite
def history(draw: st.DrawFn) -> tuple[dict[int, int], list[RowChange], int, int]:
    """A table at the low watermark, a serial history of changes after it, and a chunk range [lo, hi)."""
    table = draw(st.dictionaries(KEYS, st.integers(0, 9), max_size=15))
    state = dict(table)
    changes = []
    for _ in range(draw(st.integers(0, 25))):
        kind = draw(st.sampled_from(["insert", "update", "delete", "move"]))
        if kind == "insert":
            free = [k for k in range(31) if k not in state]
            if not free:
                continue
            k = draw(st.sampled_from(free))
            v = draw(st.integers(0, 9))
            state[k] = v
            changes.append(RowChange("insert", None, (k, v)))
        elif not state:
            continue
        else:
            k = draw(st.sampled_from(sorted(state)))
            before = (k, state[k])
            if kind == "delete":
                del state[k]
                changes.append(RowChange("delete", before, None))
            elif kind == "update":
                state[k] = draw(st.integers(0, 9))
                changes.append(RowChange("update", before, (k, state[k])))
            else:
                free = [j for j in range(31) if j not in state]
                if not free:
                    continue
                j = draw(st.sampled_from(free))
                del state[k]
                state[j] = before[1]
                changes.append(RowChange("update", before, (j, before[1])))
    lo = draw(st.integers(0, 31))
    hi = draw(st.integers(lo, 32))
    return table, changes, lo, hi


def replay(table: dict[int, int], changes: list[RowChange]) -> dict[int, int]:
    state = dict(table)
    for ch in changes:
        if ch.before is not None:
            del state[ch.before[0]]
        if ch.after is not None:
            state[ch.after[0]] = ch.after[1]
    return state


@settings(max_examples=2000)
@given(history(), st.data())
def test_corrected_chunk_equals_table_at_high_watermark(h: tuple[dict[int, int], list[RowChange], int, int],
                                                         data: st.DataObject) -> None:
    table, changes, lo, hi = h
    # The SELECT saw the table at some point between the low and the high watermark: after a prefix.
    seen = data.draw(st.integers(0, len(changes)), label="changes visible to the SELECT")
    snapshot_state = replay(table, changes[:seen])
    selected = sorted((k, v) for k, v in snapshot_state.items() if lo <= k < hi)
    got = correct_chunk(selected, changes, identity=lambda r: r[0], in_chunk=lambda r: lo <= r[0] < hi)
    final = replay(table, changes)
    assert sorted(got) == sorted((k, v) for k, v in final.items() if lo <= k < hi)


def test_worked_example_from_docstring() -> None:
    rows = [(1, "a"), (5, "b"), (9, "c")]
    changes = [RowChange("update", (5, "b"), (5, "B")), RowChange("delete", (9, "c"), None),
               RowChange("insert", None, (12, "x")), RowChange("insert", None, (2, "y")),
               RowChange("update", (2, "y"), (20, "y"))]
    got = correct_chunk(rows, changes, identity=lambda r: r[0], in_chunk=lambda r: 1 <= r[0] < 11)
    assert got == [(1, "a"), (5, "B")]
