"""Verify's regions (udtf/sync/regions.py) place a key alike on both sides: the SQL text of a row's region (a
binary search written as nested CASE, which Spark runs over the mirror) and of the predicates of a set of regions
(the server's and Spark's), run here by SQLite over random keys (NULL too), agree with Python's placement (the
flux keys' and each chunk's), which is the chunk the key lies in, grouped: every chunk lies in one region,
regions are runs of consecutive chunks, at most as many as asked for, and each key lies in exactly the region of
the chunk holding it. Spark's own reading of the text (its DECIMAL literals past BIGINT) is tested by
tests/test_verify.py on real mirrors."""

from __future__ import annotations

import bisect
import sqlite3

from hypothesis import given
from hypothesis import strategies as st

from mysql_cdc.chunks import Chunk
from mysql_cdc.ids import TableId
from mysql_cdc.udtf.sync.regions import Regions, regions

T = TableId("d", "t")
BIG = 2**63 - 1  # SQLite's integers are 64-bit signed; the Python side is tested past them below


def _chunks(cuts: list[int]) -> list[Chunk]:
    bounds: list[tuple[int, ...] | None] = [None, *((c,) for c in cuts), None]
    return [Chunk(T, i, ("id",), a, b) for i, (a, b) in enumerate(zip(bounds, bounds[1:]))]


@given(st.sets(st.integers(-BIG, BIG), min_size=1, max_size=60), st.integers(2, 12),
       st.lists(st.integers(-BIG, BIG) | st.sampled_from([-BIG, BIG, 0]), min_size=1, max_size=80),
       st.data())
def test_a_key_lies_in_the_same_region_in_sql_and_in_python(cuts_set: set[int], most: int, keys: list[int],
                                                            data: st.DataObject) -> None:
    cuts = sorted(cuts_set)
    keys = [*keys, *cuts]  # every chunk's first key too
    chunks = _chunks(cuts)
    r = regions(chunks, most=most)
    assert r is not None and 2 <= len(r) <= most and len(r) <= len(chunks)
    placed = [r.of_chunk(c) for c in chunks]
    assert placed == sorted(placed) and set(placed) == set(range(len(r)))  # runs of consecutive chunks
    col = "`i``d`"  # a name that needs quoting
    db = sqlite3.connect(":memory:")
    db.execute("CREATE TABLE t (`i``d` INTEGER)")
    db.executemany("INSERT INTO t VALUES (?)", [(k,) for k in [*keys, None]])  # a damaged mirror's NULL key
    got = db.execute(f"SELECT `i``d`, {r.spark_region(col)} FROM t").fetchall()
    for k, region in got:
        chunk = len(chunks) - 1 if k is None else bisect.bisect_right(cuts, k)  # the chunk holding k
        assert region == r.of_key(k) == placed[chunk], (k, region, r)
    wanted = data.draw(st.sets(st.integers(0, len(r) - 1)))
    spark = r.spark_where(wanted, col).replace("TRUE", "1").replace("FALSE", "0")
    held = [k for (k,) in db.execute(f"SELECT `i``d` FROM t WHERE {spark}")]
    assert sorted(held, key=str) == sorted((k for k in [*keys, None] if r.of_key(k) in wanted), key=str)
    sql, params = r.source_where(wanted, col)  # the server's: its keys are never NULL
    sql = sql.replace("%s", "?").replace("TRUE", "1").replace("FALSE", "0")
    held = [k for (k,) in db.execute(f"SELECT `i``d` FROM t WHERE {sql}", params) if k is not None]
    assert sorted(held) == sorted(k for k in keys if r.of_key(k) in wanted)


@given(st.lists(st.integers(0, 2**64 - 1), min_size=1, max_size=30, unique=True), st.integers(0, 2**64 - 1))
def test_unsigned_keys_past_a_signed_bigint_are_placed_by_their_chunk(cuts: list[int], key: int) -> None:
    from decimal import Decimal

    cuts.sort()
    r = regions(_chunks(cuts), most=4)
    assert r is not None
    chunk = bisect.bisect_right(cuts, key)
    # the mirror holds a BIGINT UNSIGNED as DECIMAL(20,0): a Decimal lies where its int does
    assert r.of_key(key) == r.of_key(Decimal(key)) == r.of_chunk(_chunks(cuts)[chunk])
    assert str(2**64 - 1) in Regions((2**64 - 1,)).spark_region("c")  # its digits, as Spark reads a DECIMAL


def test_chunks_without_plain_integer_bounds_have_no_regions() -> None:
    from mysql_cdc.chunks import AFTER

    assert regions(_chunks([]), most=4) is None  # one chunk: the totals are its sums
    assert regions([Chunk(T, 0, ("id",), None, (1.5,)), Chunk(T, 1, ("id",), (1.5,), None)]) is None
    assert regions([Chunk(T, 0, ("id",), None, ("a",)), Chunk(T, 1, ("id",), ("a",), None)]) is None
    assert regions([Chunk(T, 0, ("id",), None, (1, AFTER)), Chunk(T, 1, ("id",), (1, AFTER), None)]) is None
    assert regions([Chunk(T, 0, ("id",), None, (True,)), Chunk(T, 1, ("id",), (True,), None)]) is None
    nulls = [Chunk(T, 0, ("id",), None, (5,), nullable=True), Chunk(T, 1, ("id",), (5,), None, nullable=True),
             Chunk(T, 2, ("id",), None, None, nullable=True, nulls=True)]
    assert regions(nulls) is None
    assert regions(_chunks([5]), most=1) is None
