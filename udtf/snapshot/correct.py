"""The snapshot correction ("normalize"): make a chunk's SELECTed rows equal the table at the high watermark.

Pure logic, no driver and no pyspark.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

Row = tuple[Any, ...]


@dataclass(frozen=True)
class RowChange:
    """One row image change from the binlog. ``op`` is ``insert``, ``update`` or ``delete``; ``before`` is
    set for update/delete, ``after`` for insert/update; rows are full images in the table's column order."""

    op: str
    before: Row | None
    after: Row | None


def correct_chunk(rows: Iterable[Row], changes: Iterable[RowChange], identity: Callable[[Row], Hashable],
                  in_chunk: Callable[[Row], bool]) -> list[Row]:
    """Apply the in-window binlog changes, in binlog order, to the rows SELECTed for one chunk.

    Only images whose key lies in the chunk touch it: a delete removes the row, an insert puts the
    after-image, an update removes the before-image and puts the after-image (so an update that moves a key
    out of the chunk removes it, and one that moves a key in adds it). "Put" replaces a row with the same
    identity, which makes replaying a change the SELECT already saw harmless: the result is the table's rows
    in the chunk at the high watermark whenever the SELECT saw the table at some point between the low and the
    high watermark and ``changes`` holds every change between the low watermark and the high watermark.

    Worked example: chunk ``[1, 11)`` keyed by the first column, SELECT gave ``(1,'a') (5,'b') (9,'c')``;
    in the window 5 was updated to 'B', 9 deleted, 12 inserted (outside), and key 2 inserted then moved to 20:

    >>> rows = [(1, "a"), (5, "b"), (9, "c")]
    >>> changes = [RowChange("update", (5, "b"), (5, "B")), RowChange("delete", (9, "c"), None),
    ...            RowChange("insert", None, (12, "x")), RowChange("insert", None, (2, "y")),
    ...            RowChange("update", (2, "y"), (20, "y"))]
    >>> correct_chunk(rows, changes, identity=lambda r: r[0], in_chunk=lambda r: 1 <= r[0] < 11)
    [(1, 'a'), (5, 'B')]
    """
    state: dict[Hashable, Row] = {identity(r): r for r in rows}
    for ch in changes:
        if ch.op in ("update", "delete"):
            if ch.before is None:
                raise ValueError(f"{ch.op} change without a before-image: {ch!r}")
            if in_chunk(ch.before):
                state.pop(identity(ch.before), None)
        if ch.op in ("insert", "update"):
            if ch.after is None:
                raise ValueError(f"{ch.op} change without an after-image: {ch!r}")
            if in_chunk(ch.after):
                state[identity(ch.after)] = ch.after
        elif ch.op != "delete":
            raise ValueError(f"unknown change kind {ch.op!r}; expected insert, update or delete")
    return list(state.values())


def undo_changes(rows: Iterable[Row], changes: Sequence[RowChange], in_chunk: Callable[[Row], bool]) -> list[Row]:
    """The rows of a chunk at an earlier point, from its rows at a later point and the binlog changes between
    the two, undone newest first: an insert removes one row equal to its after-image, a delete puts its
    before-image back, an update does both. Rows are a multiset (a table without a primary key can hold equal
    rows), so the result is exact where :func:`correct_chunk` is not: a chunk of such a table read again after
    a crash is brought back to the point its first read recorded (the binlog phase starts there).

    Worked example: chunk ``[1, 11)``; between the recorded point and the new read, a second ``(1, 'a')`` was
    inserted, ``(5, 'b')`` updated to ``(5, 'B')``, ``(9, 'c')`` deleted and ``(12, 'x')`` (outside) inserted:

    >>> later = [(1, "a"), (1, "a"), (5, "B")]
    >>> changes = [RowChange("insert", None, (1, "a")), RowChange("update", (5, "b"), (5, "B")),
    ...            RowChange("delete", (9, "c"), None), RowChange("insert", None, (12, "x"))]
    >>> sorted(undo_changes(later, changes, in_chunk=lambda r: 1 <= r[0] < 11))
    [(1, 'a'), (5, 'b'), (9, 'c')]
    """
    have: Counter[Row] = Counter(rows)
    for ch in reversed(changes):
        if ch.op not in ("insert", "update", "delete"):
            raise ValueError(f"unknown change kind {ch.op!r}; expected insert, update or delete")
        if ch.after is not None and in_chunk(ch.after):
            if have[ch.after] <= 0:
                raise ValueError(f"undoing {ch.op} of {ch.after!r}: the later rows do not hold it, so they are not "
                                 "the chunk at the later point")
            have[ch.after] -= 1
        if ch.before is not None and in_chunk(ch.before):
            have[ch.before] += 1
    return list(have.elements())
