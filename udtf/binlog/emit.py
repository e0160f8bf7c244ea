"""The emit rule of the binlog phase (pure; no driver and no pyspark).

After the snapshot, every chunk holds its rows as of its own high watermark. Reading the binlog from the
smallest high watermark, a row image must reach the output exactly when the chunk that holds its key did not
already reflect it: when the event lies after that chunk's high watermark. "After" is per server
(docs/DESIGN.md §4): a later binlog position (MariaDB consistent-snapshot and plain position watermarks), or, on MySQL
with GTIDs, a transaction not in the chunk's executed GTID set. An update judges its before-image and its
after-image separately, since a key can move between chunks.

Worked example (the DBLog article's table): chunks ``[1, 101)`` at position 1000, ``[101, 201)`` at 800,
``[201, +inf)`` at 1500. Reading from 800, a change of key 123 at position 1500 is emitted (1500 > 800); a
change of key 50 at 900 is not (the first chunk's rows already include it, 900 <= 1000).

>>> from mysql_cdc.offsets import BinlogOffset as O
>>> rule = EmitRule([(None, (101,)), ((101,), (201,)), ((201,), None)],
...                 [O("b.1", 1000), O("b.1", 800), O("b.1", 1500)])
>>> rule.start.pos, rule.emit((123,), O("b.1", 1500)), rule.emit((50,), O("b.1", 900))
(800, True, False)

A nullable chunk key has one more chunk, of the keys with a NULL, with its own high watermark (``nulls``): a
key ``None`` stands for any key with a NULL. Here that chunk was read at 1200; a change of a row whose key is
NULL at 1100 is in it already, at 1300 it is not. A table without a key has one chunk, open both ways, and its
key is the empty tuple:

>>> rule = EmitRule([(None, (101,)), ((101,), None)], [O("b.1", 1000), O("b.1", 800)], nulls=O("b.1", 1200))
>>> rule.emit(None, O("b.1", 1100)), rule.emit(None, O("b.1", 1300)), rule.emit((5,), O("b.1", 1100))
(False, True, True)
>>> EmitRule([(None, None)], [O("b.1", 700)]).emit((), O("b.1", 701))
True
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from typing import Any

from mysql_cdc.errors import StateError
from mysql_cdc.offsets import BinlogOffset, GtidSet

SortKey = tuple[Any, ...]


class EmitRule:
    """Chunks of one table, as contiguous sort-key ranges in key order, with their high watermarks."""

    def __init__(self, ranges: Sequence[tuple[SortKey | None, SortKey | None]], highs: Sequence[BinlogOffset],
                 nulls: BinlogOffset | None = None) -> None:
        if not ranges or len(ranges) != len(highs):
            raise StateError(f"{len(ranges)} chunk ranges but {len(highs)} high watermarks")
        if ranges[0][0] is not None or ranges[-1][1] is not None or any(
                a[1] != b[0] for a, b in zip(ranges, ranges[1:])):
            raise StateError("chunk ranges must be contiguous, open below and above: recorded chunks are missing")
        self._starts: list[SortKey] = [r[0] for r in ranges[1:] if r[0] is not None]
        if len(self._starts) != len(ranges) - 1:
            raise StateError("only the first chunk may be open below")
        self._nulls = nulls is not None
        self._int_starts: Any = None
        self._highs = [*highs, *([nulls] if nulls is not None else [])]
        highs = self._highs
        self._sets = [GtidSet.parse(h.gtids) if h.kind == "gtid" else None for h in highs]
        kinds = {s is None for s in self._sets}
        if len(kinds) > 1:
            raise StateError("chunks of one table mix GTID and position watermarks; take a new snapshot")
        self._lowest = min(h.position_key() for h in highs)
        self._highest = max(h.position_key() for h in highs)
        sets = [s for s in self._sets if s is not None]
        self._all = self._any = None
        if sets:
            all_, any_ = sets[0], sets[0]
            for s in sets[1:]:
                all_, any_ = all_.intersection(s), any_.union(s)
            self._all, self._any = all_, any_

    @property
    def highs(self) -> tuple[BinlogOffset, ...]:
        return tuple(self._highs)

    @property
    def start(self) -> BinlogOffset:
        """Where the binlog phase starts reading: the smallest high watermark."""
        return min(self._highs)

    def owner(self, key: SortKey | None) -> int:
        """Index of the chunk whose range holds ``key`` (binary search); ``None``: the chunk of NULL keys."""
        if key is None:
            if not self._nulls:
                raise StateError("a key with a NULL, but the table's chunk key was NOT NULL when it was planned: "
                                 "take a new snapshot of the table")
            return len(self._highs) - 1
        return bisect.bisect_right(self._starts, key)

    def decided(self, event: BinlogOffset, gtid: str | None = None) -> bool | None:
        """The emit decision when it is the same for every chunk of the table (no key needed), else None.

        Past every high watermark an event is emitted whatever its key; at or before all of them it is not."""
        if self._any is not None and self._all is not None:
            if gtid is None:
                raise StateError(f"an event at {event.to_dict()!r} has no GTID, but the chunks have GTID watermarks")
            if not self._any.contains_gtid(gtid):
                return True
            if self._all.contains_gtid(gtid):
                return False
            return None
        key = event.position_key()
        if key > self._highest:
            return True
        if key <= self._lowest:
            return False
        return None

    def int_starts(self) -> Any:
        """The chunks' start keys (the first chunk's left out) as a NumPy array of int64 where each is one
        integer that fits (a one-column integer key: :mod:`.emit_columns`), else ``None``."""
        if self._int_starts is None:
            import numpy as np

            fits = all(len(k) == 1 and type(k[0]) is int and -2**63 <= k[0] < 2**63 for k in self._starts)
            self._int_starts = np.array([k[0] for k in self._starts], np.int64) if fits else False
        return None if self._int_starts is False else self._int_starts

    def emit(self, key: SortKey | None, event: BinlogOffset, gtid: str | None = None) -> bool:
        return self.emit_in(self.owner(key), event, gtid)

    def emit_in(self, i: int, event: BinlogOffset, gtid: str | None = None) -> bool:
        """Whether an event is emitted for a key of chunk ``i`` (:meth:`owner`)."""
        high, gset = self._highs[i], self._sets[i]
        if gset is not None:
            if gtid is None:
                raise StateError(f"an event at {event.to_dict()!r} has no GTID, but chunk {i} has a GTID watermark")
            return not gset.contains_gtid(gtid)
        return event.position_key() > high.position_key()


def outside_high(highs: Sequence[BinlogOffset], at: BinlogOffset) -> BinlogOffset | str:
    """The high watermark of the chunks around a key range read again at binlog point ``at`` (the point the
    stream stands at: a position, or with GTIDs the executed set of what it delivered), or why the range cannot
    be read alone there (a string) and the table must be snapshotted again whole.

    The rows around the range stay as the mirror holds them: exact at ``at`` only when the stream is past every
    high watermark of the table's chunks (an event between ``at`` and a later watermark is in that chunk's rows
    already, and would be emitted twice), and the new watermark must be of the chunks' kind (GTID sets or
    positions: one rule does not mix them).

    >>> from mysql_cdc.offsets import BinlogOffset as O
    >>> outside_high([O("b.1", 400), O("b.1", 700)], O("b.1", 900))
    BinlogOffset(file='b.1', pos=900, gtids=None, kind='position')
    >>> outside_high([O("b.1", 400), O("b.1", 950)], O("b.1", 900))
    'the stream at b.1:900 is not past every chunk of the table yet (b.1:950)'
    >>> outside_high([O("b.1", 4, "u:1-5", "gtid")], O("b.1", 900, "u:1-9", "gtid")).gtids
    'u:1-9'
    """
    if not highs:
        return "no chunk of the table is recorded"
    if any((h.kind == "gtid") != (at.kind == "gtid") for h in highs):
        return "its chunks' watermarks and the stream's position are of different kinds (GTID sets, positions)"
    if at.kind == "gtid":
        now = GtidSet.parse(at.gtids)
        late = [h for h in highs if not GtidSet.parse(h.gtids).issubset(now)]
    else:
        late = [h for h in highs if h.position_key() > at.position_key()]
    if late:
        h = max(late, key=lambda o: o.position_key())
        return f"the stream at {at.file}:{at.pos} is not past every chunk of the table yet ({h.file}:{h.pos})"
    return BinlogOffset(at.file, at.pos, at.gtids, "gtid") if at.kind == "gtid" else BinlogOffset(at.file, at.pos)
