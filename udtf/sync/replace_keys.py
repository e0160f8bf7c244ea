"""Which batches of a delta-rs mirror replace their keys' rows instead of merging them (pure; no Spark, no
delta-rs): those of a table with a one-column key that a predicate can name exactly, small ones (a binlog
batch in the steady state).

A batch's last image per key (:func:`.last_image.final_images`: an upsert, or a delete) goes into a Delta
table in one commit either way, with the same rows after it: a MERGE matched by key (delete / update /
insert), or an overwrite whose predicate holds for exactly the batch's keys and whose data is their upserted
images (delta-rs's ``write_deltalake(mode="overwrite", predicate=...)``: the rows the predicate holds for go,
the data comes). For a table of large values the overwrite holds far less: an update of a 256 MB value took
1,850 MB above the batch by MERGE and 608 MB by the overwrite (deltalake 1.6.6; a file whose rows the
predicate holds for is dropped by its statistics, unread, where MERGE read and joined it). On narrow rows
the two take the same time (a table of 1,000,000 rows in 10 files, batches of 10, 500 and 1,000 keys:
0.19-0.24 s by the overwrite, 0.23-0.26 s by MERGE).

The predicate is SQL text, so only keys whose literals are exact there take it: integers, and strings
(quoted, ``'`` doubled; no other character is special to delta-rs's parser: backslashes, newlines, NUL,
non-ASCII text and spaces at either end were measured to match), at most :data:`MAX_KEYS` of them and
:data:`MAX_TEXT` characters of literals (the predicate is kept in the commit's entry of the log). A key of
several columns merges: its predicate, an ``OR`` of one conjunction per key, took time growing with the square
of the keys (1,000 keys: 15 s against MERGE's 0.02 s on a table of 10,000 rows), where one column's ``IN``
list does not. Other batches merge.

>>> import pyarrow as pa
>>> q = lambda c: f"`{c}`"
>>> keys_predicate(pa.table({"id": [3, 1, 3]}), ("id",), q)
'`id` IN (1, 3)'
>>> keys_predicate(pa.table({"k": ["a'b", "c"]}), ("k",), q)
"`k` IN ('a''b', 'c')"
>>> keys_predicate(pa.table({"id": [1.5]}), ("id",), q) is None  # a float's text need not be its value
True
>>> keys_predicate(pa.table({"id": [3], "k": ["c"]}), ("id", "k"), q) is None  # a key of two columns
True
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import pyarrow as pa

MAX_KEYS = 1000
MAX_TEXT = 64 * 1024


def _literal(v: int | str) -> str:
    return str(v) if isinstance(v, int) else "'" + v.replace("'", "''") + "'"


def keys_predicate(keys: pa.Table, key_columns: Sequence[str], quote: Callable[[str], str]) -> str | None:
    """The predicate that holds for exactly the keys of ``keys`` (its one ``key_columns`` column, a key more than
    once too), or ``None`` where the batch merges: a key of several columns, neither integer nor string, a
    NULL, more than :data:`MAX_KEYS` rows or :data:`MAX_TEXT` characters of literals."""
    if len(key_columns) != 1 or keys.num_rows > MAX_KEYS:
        return None
    col = keys.column(key_columns[0])
    if not (pa.types.is_integer(col.type) or pa.types.is_string(col.type) or pa.types.is_large_string(col.type)) \
            or col.null_count or not keys.num_rows:
        return None
    literals = [_literal(v) for v in sorted(set(col.to_pylist()))]
    if sum(len(x) for x in literals) > MAX_TEXT:
        return None
    return f"{quote(key_columns[0])} IN ({', '.join(literals)})"
