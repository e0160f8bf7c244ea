"""A table's schema history: which schema decodes its rows from each binlog point on.

A capture of many tables that follows DDL (option ``schema_changes`` follow) records an entry per table at
each point its schema is decided: when a snapshot describes it (``snapshot``), and at each DDL statement on it
that it follows (``same``, ``evolve``: in place) or cannot follow (``reset``: it is snapshotted again). Rows
are decoded with the entry in force at their position (:func:`schema_at`), and a mirror's columns follow the
renames recorded since (:func:`renames_since`). Entries are kept under ``history/<db>.<table>/`` in the state
dir (:meth:`mysql_cdc.state.store.StateStore.record_history`), one JSON file each.

>>> e = HistoryEntry(("binlog.000003", 1200), "evolve", renamed={"total": "amount"}, statement="ALTER TABLE ...")
>>> HistoryEntry.from_dict(e.to_dict()) == e, sorted(e.to_dict())
(True, ['action', 'at', 'renamed', 'schema', 'statement', 'why'])
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, cast

from mysql_cdc.offsets import binlog_file_key
from mysql_cdc.schema import EVOLVE, SNAPSHOT, HistoryAction, TableSchema

Point = tuple[str, int]  # a binlog point: (file, position)


@dataclass(frozen=True)
class HistoryEntry:
    """From binlog point ``at`` on (the end of what made the entry: the snapshot's start, or the DDL statement),
    the table is decoded with ``schema`` (``snapshot``, ``evolve``), unchanged (``same``), or out of the
    capture until it is snapshotted again (``reset``)."""

    at: Point
    action: HistoryAction
    schema: TableSchema | None = None
    renamed: dict[str, str] = field(default_factory=dict)  # evolve: columns renamed, new name to old
    statement: str = ""  # the DDL statement (its first 2,000 characters)
    why: str = ""  # reset: why the table is snapshotted again

    @property
    def key(self) -> tuple[tuple[str, int], int, int]:
        """The entry's binlog order: at one point a snapshot comes after a statement's entry (the table was
        described after the statement)."""
        return binlog_file_key(self.at[0]), self.at[1], int(self.action == SNAPSHOT)

    def to_dict(self) -> dict[str, Any]:
        """The entry as kept in the state dir (``json.dumps(..., sort_keys=True)`` of it)."""
        return {"at": {"file": self.at[0], "pos": int(self.at[1])}, "action": self.action,
                "statement": self.statement[:2000], "why": self.why, "renamed": dict(self.renamed),
                "schema": None if self.schema is None else self.schema.to_dict()}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> HistoryEntry:
        schema = d.get("schema")
        return cls((str(d["at"]["file"]), int(d["at"]["pos"])), cast(HistoryAction, str(d["action"])),
                   None if schema is None else TableSchema.from_dict(schema), dict(d.get("renamed") or {}),
                   str(d.get("statement") or ""), str(d.get("why") or ""))


def schema_at(history: Sequence[HistoryEntry], file: str, pos: int) -> HistoryEntry | None:
    """The history entry in force at binlog point ``file:pos``: the last one at or before it (``None``: none
    is); a row at a later position than an entry's ``at`` was written with its schema.

    >>> h = [HistoryEntry(("b.000002", 4), "snapshot"), HistoryEntry(("b.000010", 900), "same")]
    >>> [schema_at(h, f, p).at for f, p in (("b.000002", 4), ("b.000009", 10**9), ("b.000010", 901))]
    [('b.000002', 4), ('b.000002', 4), ('b.000010', 900)]
    >>> schema_at(h, "b.000001", 120) is None
    True
    """
    out = None
    at = (binlog_file_key(file), int(pos))
    for e in sorted(history, key=lambda e: e.key):
        if e.key[:2] <= at:
            out = e
    return out


def renames_since(history: Sequence[HistoryEntry], start: int) -> dict[str, str]:
    """The columns renamed after entry ``start``: latest name to the name at ``start`` (each later ``evolve``
    entry's ``renamed``, new name to old, composed in order).

    >>> h = [HistoryEntry(("b.1", 4), "snapshot"), HistoryEntry(("b.1", 9), "evolve", renamed={"c": "b"}),
    ...      HistoryEntry(("b.1", 12), "same"), HistoryEntry(("b.1", 20), "evolve", renamed={"d": "c"})]
    >>> renames_since(h, 0), renames_since(h, 1), renames_since(h, 3)
    ({'d': 'b'}, {'d': 'c'}, {})
    """
    now: dict[str, str] = {}  # a renamed column's latest name -> its name at start
    for e in history[start + 1:]:
        if e.action != EVOLVE:
            continue
        for new, old in e.renamed.items():
            now[new] = now.pop(old, old)
    return {n: src for n, src in now.items() if n != src}
