"""What a stream's micro-batch is: its offsets (kept by Spark in the checkpoint, one JSON per batch) and its
partitions (what each task reads).

An offset is small: the chunk plans and the chunks' watermarks live in ``state_dir``; an offset holds a chunk
count or a binlog point. Its JSON is a contract: a checkpoint written by one version must restart on the next,
so :meth:`to_dict` writes exactly what earlier versions wrote, key for key and in that order.

- :class:`SnapshotOffset` ``{"v": 1, "phase": "snapshot", "chunk": k, "chunks": n[, "round": r][, "resume":
  {...}]}``: the first ``k`` of the round's ``n`` chunks are read; ``round`` in a read of many tables;
  ``resume`` where the binlog goes on after a later round's snapshot (round 0: from its chunks' smallest high
  watermark).
- :class:`BinlogStreamOffset` ``{"v": 1, "phase": "binlog", "file": f, "pos": p[, "gtids": ...][, "skip_before":
  ...][, "rounds": r]}``: the binlog is read up to there (a :class:`ReadFrom`); ``rounds``: how many rounds are
  done, so a re-run batch reads the same tables.

>>> SnapshotOffset(2, 9, 0).to_dict()
{'v': 1, 'phase': 'snapshot', 'chunk': 2, 'chunks': 9, 'round': 0}
>>> parse_stream_offset({"v": 1, "phase": "binlog", "file": "binlog.000003", "pos": 4, "rounds": 2})
BinlogStreamOffset(read_from=ReadFrom(offset=BinlogOffset(file='binlog.000003', pos=4, gtids=None, \
kind='position'), auto_position=False, skip_before=None, xa=()), rounds=2)
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pyspark.sql.datasource import InputPartition

from mysql_cdc.errors import StateError
from mysql_cdc.ids import TableId
from mysql_cdc.offsets import BinlogOffset
from mysql_cdc.schema import TableSchema
from mysql_cdc.udtf.binlog.emit import EmitRule
from mysql_cdc.udtf.binlog.startup import ReadFrom


@dataclass(frozen=True)
class SnapshotOffset:
    """A stream inside a round's snapshot: chunks ``[0, chunk)`` of its ``chunks`` are read."""

    chunk: int
    chunks: int
    round: int | None = None  # a read of many tables: the snapshot round
    resume: ReadFrom | None = None  # where the binlog goes on after this round (a later round's)

    @property
    def index(self) -> int:
        """The round (0 in a read of one table)."""
        return self.round or 0

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"v": 1, "phase": "snapshot", "chunk": self.chunk, "chunks": self.chunks}
        if self.round is not None:
            d["round"] = self.round
        if self.resume is not None:
            d["resume"] = self.resume.to_dict()
        return d


@dataclass(frozen=True)
class BinlogStreamOffset:
    """A stream in its binlog phase, read up to ``read_from`` (where the next batch starts)."""

    read_from: ReadFrom
    rounds: int | None = None  # a read of many tables: the rounds done

    @property
    def done(self) -> int:
        """The rounds done (1 in a read of one table)."""
        return 1 if self.rounds is None else self.rounds

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"v": 1, "phase": "binlog", **self.read_from.to_dict()}
        if self.rounds is not None:
            d["rounds"] = self.rounds
        return d


StreamOffset = SnapshotOffset | BinlogStreamOffset


def parse_stream_offset(d: Mapping[str, Any]) -> StreamOffset:
    """An offset as Spark hands it back (its JSON read); one clear error for one of another version.

    >>> parse_stream_offset({"v": 1, "phase": "snapshot", "chunk": 0, "chunks": 3})
    SnapshotOffset(chunk=0, chunks=3, round=None, resume=None)
    """
    phase = d.get("phase")
    if phase not in ("snapshot", "binlog") or d.get("v") != 1:
        raise StateError(f"offset {dict(d)!r} was not written by this version of mysql_cdc; start the query with a "
                         "new checkpoint")
    if phase == "snapshot":
        resume = d.get("resume")
        return SnapshotOffset(int(d["chunk"]), int(d["chunks"]), None if d.get("round") is None else int(d["round"]),
                              ReadFrom.from_dict(resume) if resume else None)
    rounds = d.get("rounds")
    return BinlogStreamOffset(ReadFrom.from_dict(d), None if rounds is None else int(rounds))


@dataclass(frozen=True)
class BinlogPartition(InputPartition):
    """One Spark partition reading the binlog of ``tables`` (``[db, table]`` pairs) from ``start`` up to
    ``end``; ``initial``: some chunk may hold a change of the range (the emit rule applies), else every change
    of the tables is emitted. It carries what the read needs from the state dir, which may be on the driver's
    disk alone: the tables' schemas and, with ``initial``, their emit rules (built by the driver from the
    chunk records). (Pickled within a query run only: its shape is not a contract.)"""

    start: ReadFrom
    end: BinlogOffset
    initial: bool
    tables: tuple[tuple[str, str], ...] = ()
    followed: bool = False  # the driver followed every DDL of the range (option schema_changes follow)
    schemas: tuple[TableSchema, ...] = ()
    rules: tuple[tuple[TableId, EmitRule], ...] = ()


@dataclass(frozen=True)
class ResetPartition(InputPartition):
    """The rows saying that tables left the capture at ``at`` (dropped, or reset to be snapshotted again):
    one ``T`` row per table, or ``-R`` for a table of which a key range left (``ranges``: ``[db, table, range
    dict]``; see :func:`udtf.spark.output.reset_batch`); nothing is read."""

    tables: tuple[tuple[str, str], ...]
    at: dict[str, Any]
    ranges: tuple[tuple[str, str, dict[str, Any]], ...] = ()
