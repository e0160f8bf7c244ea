"""How far a snapshot asked for on demand (a :class:`~mysql_cdc.state.store.ResnapshotRequest`) has come, from the
capture's rounds and the offset of the last micro-batch the sync committed (pure; no server, no Spark).

The stream takes every request still open when it plans a micro-batch in the binlog phase: round ``R`` (its
``request`` is the highest number it took) takes the tables out of the capture at the binlog point the batch
starts at (the batch holds their ``T`` rows: the mirror tables are emptied), and the next batch records round
``R + 1``, which snapshots the tables that still match while the binlog waits at that point. The binlog then
goes on from it with the new chunks' watermarks in the emit rule, as after any round. So request ``n`` is

- ``waiting`` while no round names ``n`` or a later request,
- ``running`` from then until the sync committed a batch past round ``R + 1`` (``rounds`` finished >= R + 2),
- ``done`` after that; a table round ``R + 1`` does not hold left the capture (it no longer matches), and so
  did every table when no round follows ``R`` and a batch of the binlog after ``R``'s point was committed (the
  stream looked for tables to snapshot, which requests wait for, and found none),
- ``passed`` when the stream passed it over (``requests/<n>.passed.json``: none of its tables was captured, or the
  capture does not follow schema changes).

Worked example: requests 0 and 1 were both open when round 3 was recorded (so it took both, ``request=1``),
round 4 snapshots ``a``; a committed binlog offset with ``rounds`` 4 is still inside, 5 is past.

>>> from mysql_cdc.ids import TableId
>>> from mysql_cdc.state.store import Round
>>> a = TableId("s", "a")
>>> rounds = [Round((a,)), Round(()), Round(()), Round((), dropped=(a,), request=1), Round((a,))]
>>> progress(rounds, 0, {"phase": "binlog", "rounds": 4}).state, progress(rounds, 0, {"phase": "snapshot",
...     "round": 4}).state
('running', 'running')
>>> p = progress(rounds, 0, {"phase": "binlog", "rounds": 5})
>>> p.state, p.round, p.snapshotted
('done', 3, (TableId(database='s', table='a'),))
>>> progress(rounds, 2, {"phase": "binlog", "rounds": 5}).state
'waiting'

Round 3 reset ``a`` at ``b.1:90``; no round followed (``a`` was gone by then): done once the binlog went past it.

>>> rounds = rounds[:4]
>>> rounds[3] = Round((), dropped=(a,), end={"file": "b.1", "pos": 90}, request=1)
>>> [progress(rounds, 0, {"phase": "binlog", "rounds": 4, "file": "b.1", "pos": p}).state for p in (90, 120)]
['running', 'done']
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from mysql_cdc.ids import TableId
from mysql_cdc.keyrange import KeyRange
from mysql_cdc.offsets import binlog_file_key
from mysql_cdc.state.store import Round

State = Literal["waiting", "running", "done", "passed"]


@dataclass(frozen=True)
class RequestProgress:
    """Where a request stands: ``round`` (the round that took it), the tables it took out of the capture
    (``reset``) and those the round after snapshots again (``snapshotted``)."""

    state: State
    round: int | None = None
    reset: tuple[TableId, ...] = ()
    snapshotted: tuple[TableId, ...] = ()
    request: int = 0
    why: str = ""  # why it was passed over
    ranges: tuple[tuple[TableId, KeyRange], ...] = ()  # tables of which only a key range was taken out

    def _named(self, tables: tuple[TableId, ...]) -> str:
        """Tables by name, with the key range where only a range of one was taken out.

        >>> a = TableId("s", "a")
        >>> RequestProgress("running", 3, (a,), (a,), 1, ranges=((a, KeyRange(("id",), (5,), (9,))),)).line()
        'request 1: running: s.a (id in [5, 9)) emptied in the mirror by round 3, being snapshotted again'
        """
        ranges = dict(self.ranges)
        return ", ".join(f"{t} ({ranges[t].text()})" if t in ranges else str(t) for t in tables)

    def line(self) -> str:
        """One line for the CLI.

        >>> RequestProgress("running", 3, (TableId("s", "a"),), (TableId("s", "a"),), 1).line()
        'request 1: running: s.a emptied in the mirror by round 3, being snapshotted again'
        """
        names = self._named(self.reset)
        if self.state == "passed":
            return f"request {self.request}: passed over by the sync: {self.why}"
        if self.state == "waiting":
            return f"request {self.request}: waiting for the sync to take it at its next micro-batch"
        if self.state == "running":
            return (f"request {self.request}: running: {names} emptied in the mirror by round {self.round}, being "
                    "snapshotted again")
        gone = f"; {', '.join(map(str, self.gone))} no longer captured" if self.gone else ""
        done = self._named(self.snapshotted) or "no table"
        return f"request {self.request}: done: {done} snapshotted again (from round {self.round}){gone}"

    @property
    def gone(self) -> tuple[TableId, ...]:
        """Tables taken out for the request that no round snapshotted again (they no longer match)."""
        return tuple(t for t in self.reset if t not in self.snapshotted) if self.state == "done" else ()


def finished_rounds(offset: dict[str, Any] | None) -> int:
    """Rounds a committed stream offset of a capture of many tables has finished (``None``: nothing committed).

    >>> finished_rounds({"phase": "snapshot", "round": 2, "chunk": 1, "chunks": 4}), finished_rounds(
    ...     {"phase": "binlog", "rounds": 3}), finished_rounds(None)
    (2, 3, 0)
    """
    if not offset:
        return 0
    if offset.get("phase") == "snapshot":
        return int(offset.get("round") or 0)
    return int(offset.get("rounds") or 1)


def progress(rounds: Sequence[Round], index: int, committed: dict[str, Any] | None) -> RequestProgress:
    """Where request ``index`` stands, given the recorded ``rounds`` and the last committed stream offset."""
    taken = next((i for i, r in enumerate(rounds) if r.request is not None and r.request >= index), None)
    if taken is None:
        return RequestProgress("waiting", request=index)
    reset = rounds[taken].dropped
    # a key range that could not be read alone after all is reset whole by a round of its own first (and the other
    # ranges with it): the round after those snapshots the tables
    j = taken + 1
    while j < len(rounds) and not rounds[j].tables and rounds[j].request is None and set(rounds[j].dropped) & set(
            reset) and rounds[j].end == rounds[taken].end:
        j += 1
    again = rounds[j].tables if j < len(rounds) else ()
    snapshotted = tuple(t for t in reset if t in again)
    finished = finished_rounds(committed)
    done = finished >= j + 1 or (j == len(rounds) == finished and _past(committed, rounds[j - 1].end))
    return RequestProgress("done" if done else "running", taken, reset, snapshotted, index,
                           ranges=rounds[j - 1].ranges)


def _past(offset: dict[str, Any] | None, point: dict[str, Any] | None) -> bool:
    """Whether a committed binlog offset lies past a binlog point."""
    if not offset or offset.get("phase") != "binlog" or not point or "file" not in offset:
        return False
    return (binlog_file_key(str(offset["file"])), int(offset["pos"])) > (binlog_file_key(str(point["file"])),
                                                                          int(point["pos"]))
