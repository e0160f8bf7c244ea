"""Parallel catch-up's cut of a binlog range (``udtf.binlog.split_points``), pure: on random files, boundaries
and part counts, every cut is a transaction boundary strictly inside the range, the cuts grow, there are fewer
than the parts asked for, and none is made where the range is too short for two parts of ``min_bytes``."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from mysql_cdc.offsets import BinlogOffset
from mysql_cdc.udtf.binlog.catchup import split_points


@st.composite
def ranges(draw: st.DrawFn) -> tuple[BinlogOffset, BinlogOffset, list[BinlogOffset], dict[str, int]]:
    sizes = {f"binlog.{i:06d}": draw(st.integers(4, 5000)) for i in range(1, draw(st.integers(1, 4)) + 1)}
    files = sorted(sizes)
    points = sorted({(f, p) for f in files for p in draw(st.lists(st.integers(4, sizes[f]), max_size=12))})
    if len(points) < 2:
        points = [(files[0], 4), (files[-1], sizes[files[-1]])]
    i = draw(st.integers(0, len(points) - 2))
    j = draw(st.integers(i + 1, len(points) - 1))
    start, end = BinlogOffset(*points[i]), BinlogOffset(*points[j])
    return start, end, [BinlogOffset(*p) for p in points[i + 1:j + 1]], sizes


@given(ranges(), st.integers(1, 6), st.integers(1, 3000))
def test_cuts_are_boundaries_inside_the_range_in_order(r: tuple[BinlogOffset, BinlogOffset, list[BinlogOffset],
                                                                   dict[str, int]], parts: int, min_bytes: int
                                                        ) -> None:
    start, end, boundaries, sizes = r
    cuts = split_points(start, end, boundaries, sizes, parts, min_bytes)
    keys = [c.position_key() for c in cuts]
    assert set(cuts) <= set(boundaries)
    assert all(start.position_key() < k < end.position_key() for k in keys)
    assert keys == sorted(set(keys))
    assert len(cuts) <= parts - 1

    files = sorted(sizes)

    def at(o: BinlogOffset) -> int:
        return sum(sizes[f] for f in files[:files.index(o.file)]) + o.pos

    if at(end) - at(start) < 2 * min_bytes:
        assert cuts == []
