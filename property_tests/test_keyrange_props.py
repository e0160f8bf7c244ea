"""A key range read again (mysql_cdc/keyrange.py) deletes in the mirror exactly the keys the source reads again:
its SQL text, run by a real SQL engine (SQLite) over random integer keys, holds for the same keys as the
server's row order (Python's tuple order) says, and the smallest range holding some keys holds all of them."""

from __future__ import annotations

import sqlite3

from hypothesis import given
from hypothesis import strategies as st

from mysql_cdc.keyrange import KeyRange

ints = st.integers(-50, 50)


@given(st.integers(1, 3).flatmap(lambda n: st.tuples(
    st.just(n), st.none() | st.tuples(*[ints] * n), st.none() | st.tuples(*[ints] * n),
    st.lists(st.tuples(*[ints] * n), min_size=1, max_size=40))))
def test_the_range_predicate_holds_for_exactly_the_keys_in_the_range(case: tuple) -> None:
    n, start, end, keys = case
    if start is not None and end is not None and not start < end:
        start, end = (end, start) if end < start else (start, None)
    cols = tuple(f"c {i}" for i in range(n))  # names that need quoting
    r = KeyRange(cols, start, end)
    db = sqlite3.connect(":memory:")
    db.execute(f"CREATE TABLE t ({', '.join(f'[{c}] INTEGER' for c in cols)})")
    db.executemany(f"INSERT INTO t VALUES ({', '.join('?' * n)})", keys)
    where = r.predicate(lambda c: '"' + c.replace('"', '""') + '"').replace("TRUE", "1")
    got = sorted(db.execute(f"SELECT * FROM t WHERE {where}").fetchall())
    assert got == sorted(k for k in keys if r.contains(k))
    assert got == sorted(k for k in keys if (start is None or k >= start) and (end is None or k < end))


@given(st.lists(st.tuples(ints, ints), min_size=1, max_size=20), st.tuples(ints, ints), st.tuples(ints, ints))
def test_the_hull_of_two_ranges_holds_both(keys: list, a: tuple, b: tuple) -> None:
    r1 = KeyRange(("x", "y"), min(a, b), max(a, b)) if a != b else KeyRange(("x", "y"), a)
    r2 = KeyRange(("x", "y"), None, max(keys)) if min(keys) < max(keys) else KeyRange(("x", "y"), min(keys))
    both = r1.hull(r2)
    assert all(both.contains(k) for k in keys if r1.contains(k) or r2.contains(k))
