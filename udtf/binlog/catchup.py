"""Parallel catch-up: where a micro-batch's binlog range is cut so that several readers read it at once, each
part starting at a transaction boundary (the emit rule decides per event, so the parts together give exactly
one reader's changes)."""

from __future__ import annotations

from collections.abc import Mapping

from mysql_cdc.offsets import BinlogOffset, binlog_file_key

BOUNDARY_STEP = 64 << 10  # a cut needs no finer boundaries: a backlog of small transactions keeps few of them
GIVEN_MIN_BYTES = 1 << 20  # option binlog_partitions n: no part shorter than this
AUTO_MIN_BYTES = 16 << 20  # option binlog_partitions 0: a range is cut only where each part has this much


def catchup_parts(requested: int, parallelism: int) -> tuple[int, int]:
    """How many readers a micro-batch's binlog range may be cut for, and the fewest bytes of a part: option
    ``binlog_partitions`` n as given (parts of at least 1 MiB), or with 0 as many as the session runs tasks
    at once (``parallelism``), parts of at least 16 MiB. A binlog reader moves about 10-20 MiB/s of change
    events (bench/results), so a part under that is quicker read by the reader before it than by a task of
    its own; a range of a live stream is seldom that long, a backlog is.

    >>> catchup_parts(0, 8), catchup_parts(0, 1), catchup_parts(1, 8), catchup_parts(3, 8)
    ((8, 16777216), (1, 16777216), (1, 1048576), (3, 1048576))
    """
    if requested >= 1:
        return requested, GIVEN_MIN_BYTES
    return max(1, parallelism), AUTO_MIN_BYTES


def range_bytes(start: BinlogOffset, end: BinlogOffset, sizes: Mapping[str, int]) -> int:
    """Bytes of the binlog from ``start`` to ``end`` (``sizes``: the files' sizes); 0 when a point is in no
    listed file.

    >>> range_bytes(BinlogOffset("b.1", 200), BinlogOffset("b.2", 50), {"b.1": 300, "b.2": 900})
    150
    """
    before = _file_starts(sizes)
    if start.file not in before or end.file not in before:
        return 0
    return max(0, before[end.file] + end.pos - before[start.file] - start.pos)


def _file_starts(sizes: Mapping[str, int]) -> dict[str, int]:
    """Where each binlog file starts, in bytes of the whole log (files in their numeric order)."""
    before: dict[str, int] = {}
    total = 0
    for f in sorted(sizes, key=binlog_file_key):
        before[f] = total
        total += sizes[f]
    return before


def keep_boundary(kept: list[BinlogOffset], boundary: BinlogOffset) -> None:
    """Keep a transaction boundary for :func:`split_points` unless it is within :data:`BOUNDARY_STEP` bytes of
    the last one kept in the same file (memory: a million small transactions keep a few thousand).

    >>> kept: list[BinlogOffset] = []
    >>> for pos in (100, 200, 70_000, 70_100, 140_000):
    ...     keep_boundary(kept, BinlogOffset("binlog.000001", pos))
    >>> keep_boundary(kept, BinlogOffset("binlog.000002", 4))
    >>> [(o.file[-1], o.pos) for o in kept]
    [('1', 100), ('1', 70000), ('1', 140000), ('2', 4)]
    """
    if not kept or kept[-1].file != boundary.file or boundary.pos - kept[-1].pos >= BOUNDARY_STEP:
        kept.append(boundary)


def split_points(start: BinlogOffset, end: BinlogOffset, boundaries: list[BinlogOffset], sizes: Mapping[str, int],
                 parts: int, min_bytes: int) -> list[BinlogOffset]:
    """Transaction boundaries that cut the range ``start`` .. ``end`` into at most ``parts`` pieces of about
    equal bytes, each at least ``min_bytes`` (``sizes``: the binlog files' sizes, to measure a range across
    files). A piece ends at a boundary, so each is read like any range, and the emit rule, which holds per
    event, gives each change in exactly one piece.

    Worked example: a range of 300 bytes in one file with boundaries at 100, 180, 250 and 300, cut in three,
    aims at 100 and 200 bytes from its start and takes the boundary nearest each aim (after the cut before):

    >>> cut = split_points(BinlogOffset("b.1", 0), BinlogOffset("b.1", 300),
    ...                    [BinlogOffset("b.1", p) for p in (100, 180, 250, 300)], {"b.1": 300}, 3, 50)
    >>> [o.pos for o in cut]
    [100, 180]
    >>> split_points(BinlogOffset("b.1", 0), BinlogOffset("b.1", 300), [BinlogOffset("b.1", 300)], {"b.1": 300},
    ...              3, 50)  # one transaction: nothing to cut
    []
    >>> [(o.file, o.pos) for o in split_points(BinlogOffset("b.1", 200), BinlogOffset("b.2", 200),
    ...     [BinlogOffset("b.1", 300), BinlogOffset("b.2", 50), BinlogOffset("b.2", 200)], {"b.1": 300, "b.2": 900},
    ...     2, 50)]  # across a rotation: 100 bytes left in b.1, 200 read of b.2
    [('b.2', 50)]
    """
    before = _file_starts(sizes)

    def at(o: BinlogOffset) -> int | None:
        return None if o.file not in before else before[o.file] + o.pos

    first, last = at(start), at(end)
    if first is None or last is None or last <= first:
        return []
    parts = min(parts, (last - first) // max(1, min_bytes))
    inside = [(g, b) for b in boundaries if (g := at(b)) is not None and first < g < last]
    cut: list[BinlogOffset] = []
    prev = first
    for i in range(1, parts):
        aim = first + (last - first) * i // parts
        found = min(((g, b) for g, b in inside if g > prev), key=lambda gb: abs(gb[0] - aim), default=None)
        if found is not None:
            prev = found[0]
            cut.append(found[1])
    return cut
