"""Where verify looks again when a table's sums differ: regions of a key of one integer column (pure: text only,
no driver and no Spark).

The first pass sums each side of a table whole. Where the key is one integer column, and the capture's chunks
split it, both sides can just as well sum it per region: runs of consecutive chunks, at most
:data:`MAX_REGIONS`. The server sums each chunk anyway (one query each) and adds the chunk's sums to its
region's. Spark places each mirror row in its region by the regions' starts: a binary search written as nested
``CASE`` (no join, no shuffle). A damaged table's second pass, by buckets of keys, then reads only the regions
whose sums differ, on both sides, instead of the whole table twice.

The two sides place a row alike because an integer orders the same in the server, in Spark and in Python (a
``BIGINT UNSIGNED``, the mirror's ``DECIMAL(20,0)``, too). String keys do not (the server orders by the
column's collation), nor do chunk bounds of another kind: those tables are summed whole (:func:`regions` gives
``None``).

Worked example: the chunks ``[-inf, 100)``, ``[100, 200)``, ``[200, 300)``, ``[300, +inf)``, two to a region:

>>> from mysql_cdc.chunks import Chunk
>>> from mysql_cdc.ids import TableId
>>> t = TableId("d", "t")
>>> cuts = [None, (100,), (200,), (300,), None]
>>> chunks = [Chunk(t, i, ("id",), a, b) for i, (a, b) in enumerate(zip(cuts, cuts[1:]))]
>>> r = regions(chunks, most=2)
>>> r.starts, [r.of_chunk(c) for c in chunks], r.of_key(199), r.of_key(200), r.of_key(-5)
((200,), [0, 0, 1, 1], 0, 1, 0)
>>> r.spark_region("`id`")
'CASE WHEN `id` < 200 THEN 0 ELSE 1 END'
>>> r.spark_where([1], "`id`"), r.source_where([0], "`id`")
('(`id` >= 200 OR `id` IS NULL)', ('(`id` < %s)', [200]))
>>> regions(chunks, most=3).spark_region("`id`")
'CASE WHEN `id` < 100 THEN 0 ELSE CASE WHEN `id` < 200 THEN 1 ELSE 2 END END'
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from mysql_cdc.chunks import Chunk

# the CASE is 5 deep; measured over 1.5 M rows (pyspark 4.3, local[2]; the job without regions 2.2-3.5 s): 16 and
# 32 regions cost the mirror's job nothing measurable, 64 perhaps 0.8 s, 128 and 256 made it 2.5x as long (4.7-7.0
# s; a method too large to compile, by the look of it)
MAX_REGIONS = 32


@dataclass(frozen=True)
class Regions:
    """Regions of one integer column: region ``i`` holds the keys from ``starts[i - 1]`` (region 0: from below
    every key) up to but not including ``starts[i]`` (the last: above every key). The methods' ``column`` is the
    column quoted for the SQL they write."""

    starts: tuple[int, ...]

    def __len__(self) -> int:
        return len(self.starts) + 1

    def of_key(self, value: object) -> int:
        """The region of a key's value (an ``int``, or the ``Decimal`` the mirror holds a ``BIGINT UNSIGNED``
        in); ``None`` (a damaged mirror's) in the last, as the SQL's ``CASE`` places it."""
        if value is None:
            return len(self.starts)
        return bisect.bisect_right(self.starts, value)  # type: ignore[call-overload]

    def of_chunk(self, chunk: Chunk) -> int:
        """The region a chunk lies in (whole: the regions' starts are chunks' starts)."""
        return 0 if chunk.start is None else self.of_key(chunk.start[0])

    def spark_region(self, column: str) -> str:
        """Spark SQL for a row's region: a binary search over the starts, nested ``CASE`` (the starts are
        Python ints: their digits are the literals)."""
        def search(lo: int, hi: int) -> str:  # regions lo..hi
            if lo == hi:
                return str(lo)
            mid = (lo + hi + 1) // 2  # the first region of the upper half: it starts at starts[mid - 1]
            return (f"CASE WHEN {column} < {int(self.starts[mid - 1])} THEN {search(lo, mid - 1)} "
                    f"ELSE {search(mid, hi)} END")
        return search(0, len(self) - 1)

    def spark_where(self, wanted: Iterable[int], column: str) -> str:
        """Spark SQL that holds for the rows of the regions ``wanted`` (runs of them as one range; the last
        region's with a NULL key too)."""
        return self._where(wanted, column, lambda v: str(int(v)))

    def source_where(self, wanted: Iterable[int], column: str) -> tuple[str, list[int]]:
        """The server's SQL (``%s`` for each bound) that holds for the rows of the regions ``wanted``, and the
        bounds' values."""
        params: list[int] = []

        def bound(v: int) -> str:
            params.append(v)
            return "%s"
        return self._where(wanted, column, bound), params

    def _where(self, wanted: Iterable[int], column: str, bound: Callable[[int], str]) -> str:
        parts: list[str] = []
        for lo, hi in _runs(sorted(set(wanted))):
            bounds = ([f"{column} >= {bound(self.starts[lo - 1])}"] if lo > 0 else []) + (
                [f"{column} < {bound(self.starts[hi])}"] if hi < len(self.starts) else [])
            nulls = f" OR {column} IS NULL" if hi == len(self.starts) and lo > 0 else ""
            parts.append("(" + (" AND ".join(bounds) or "TRUE") + nulls + ")")
        return " OR ".join(parts) or "FALSE"


def _runs(sorted_ids: Sequence[int]) -> list[tuple[int, int]]:
    """Runs of consecutive numbers, first and last of each.

    >>> _runs([0, 1, 2, 5, 7, 8])
    [(0, 2), (5, 5), (7, 8)]
    """
    out: list[tuple[int, int]] = []
    for i in sorted_ids:
        if out and out[-1][1] == i - 1:
            out[-1] = (out[-1][0], i)
        else:
            out.append((i, i))
    return out


def regions(chunks: Sequence[Chunk], most: int = MAX_REGIONS) -> Regions | None:
    """The regions of a table's ``chunks`` (in key order, contiguous), at most ``most`` of them, each of about
    the same number of chunks; ``None`` unless every bound is one plain integer (and there are two chunks or
    more)."""
    if len(chunks) < 2 or most < 2:
        return None
    inner = [c.start for c in chunks[1:]]
    if any(c.nulls or c.nullable for c in chunks) or any(
            k is None or len(k) != 1 or type(k[0]) is not int for k in inner):
        return None
    n = min(most, len(chunks))
    starts = tuple(inner[len(chunks) * i // n - 1][0] for i in range(1, n))  # type: ignore[index]
    return Regions(starts)
