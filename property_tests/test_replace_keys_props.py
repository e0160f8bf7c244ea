"""A batch of a table of large values replaces its keys' rows (udtf/sync/replace_keys.py): the predicate, run by
a real SQL engine (SQLite, whose string literals double ``'`` and treat nothing else as special, as delta-rs's
parser does), holds for exactly the batch's keys among random rows, for integer and string keys (quotes, backslashes,
newlines, spaces at either end, non-ASCII text); keys of several columns, and batches it cannot say exactly or
briefly, merge."""

from __future__ import annotations

import sqlite3

import pyarrow as pa
from hypothesis import given
from hypothesis import strategies as st

from mysql_cdc.udtf.sync.replace_keys import MAX_KEYS, MAX_TEXT, keys_predicate

texts = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=6) | \
    st.sampled_from(["'", "''", "\\", "\\'", " a", "a ", "\n", "é"])
ints = st.integers(-(2**63), 2**63 - 1)


@given(st.sampled_from([ints, texts]).flatmap(lambda kind: st.tuples(
    st.just(1),
    st.lists(st.tuples(kind), min_size=1, max_size=30, unique=True),
    st.lists(st.tuples(kind), min_size=1, max_size=10))))
def test_the_predicate_holds_for_exactly_the_batchs_keys(case: tuple) -> None:
    n, table_keys, batch_keys = case
    cols = [f"k {i}`" for i in range(n)]  # names that need quoting
    batch = pa.table({c: [k[i] for k in batch_keys] for i, c in enumerate(cols)})
    where = keys_predicate(batch, cols, lambda c: "`" + c.replace("`", "``") + "`")
    assert where is not None
    db = sqlite3.connect(":memory:")
    db.execute(f"CREATE TABLE t ({', '.join('`' + c.replace('`', '``') + '`' for c in cols)})")
    rows = sorted(set(table_keys) | set(batch_keys[:1]), key=repr)
    db.executemany(f"INSERT INTO t VALUES ({', '.join('?' * n)})", rows)
    got = set(db.execute(f"SELECT * FROM t WHERE {where}").fetchall())
    assert got == {r for r in rows if r in set(batch_keys)}


def test_batches_it_cannot_say_exactly_merge() -> None:
    assert keys_predicate(pa.table({"k": [1.0]}), ["k"], str) is None  # a float
    assert keys_predicate(pa.table({"k": [b"x"]}), ["k"], str) is None  # bytes
    assert keys_predicate(pa.table({"k": pa.array([1, None])}), ["k"], str) is None  # a NULL
    assert keys_predicate(pa.table({"k": list(range(MAX_KEYS + 1))}), ["k"], str) is None  # too many
    assert keys_predicate(pa.table({"k": ["x" * (MAX_TEXT // 10)] * 11}), ["k"], str) == \
        f"k IN ('{'x' * (MAX_TEXT // 10)}')"  # one key, many rows
    assert keys_predicate(pa.table({"k": [f"{i:03d}" + "x" * (MAX_TEXT // 10) for i in range(11)]}), ["k"],
                          str) is None  # too long a text
    assert keys_predicate(pa.table({"a": [1], "b": ["x"]}), ["a", "b"], str) is None  # several columns
