"""The MERGE rule of the mirror: which image of a micro-batch ends up in the target table, per key.

Pure logic (pyarrow, no pyspark, no network). A micro-batch holds, for one table, snapshot rows and change rows
in any order; applied in ``_change_seq`` order (``r``, ``+I``, ``+U`` as an upsert of the row's key, ``-U``,
``-D`` as a delete of it), they take the table from its state before the batch to its state after. Only each
key's last image matters: the target ends with that image's row if it is an upsert, without the key if it is a
delete. So a batch becomes one MERGE whose source has one row per key.
"""

from __future__ import annotations

from collections.abc import Sequence

import pyarrow as pa
import pyarrow.compute as pc

from mysql_cdc.rows import BEFORE, DELETE, OP_COLUMN, SEQ_COLUMN

DELETE_OPS = (BEFORE, DELETE)
DELETE_COLUMN = "__mysql_cdc_delete"  # the merge source's flag: the key's last image is a delete
ORDER_COLUMN = "__mysql_cdc_order"  # a row's place in the batch, while the rule runs


def final_images(rows: pa.Table, key: Sequence[str]) -> pa.Table:
    """Per key of ``rows`` the image of the greatest ``_change_seq`` (the later row on a tie), with the table's
    columns and :data:`DELETE_COLUMN`, true when that image is a delete. ``rows`` has the table's columns,
    ``__op`` and ``_change_seq``.

    Worked example (key ``id``): the batch updates 1 from a to b (seq 10, 11), deletes 2 (seq 12), moves key 3
    to 4 (seq 13, 14) and brings 5 from the snapshot (seq 0, ``r``):

    >>> t = pa.table({"id": [1, 1, 2, 3, 4, 5], "v": ["a", "b", "x", "c", "c", "e"],
    ...               "__op": ["-U", "+U", "-D", "-U", "+U", "r"], "_change_seq": [10, 11, 12, 13, 14, 0]})
    >>> out = final_images(t, ["id"]).sort_by("id")
    >>> out.to_pydict() == {"id": [1, 2, 3, 4, 5], "v": ["b", "x", "c", "c", "e"],
    ...                     "__mysql_cdc_delete": [False, True, True, False, False]}
    True

    Keys 2 and 3 are deleted from the target, 1, 4 and 5 upserted.
    """
    columns = [c for c in rows.column_names if c not in (OP_COLUMN, SEQ_COLUMN)]
    if rows.num_rows == 0:
        return rows.select(columns).append_column(DELETE_COLUMN, pa.array([], pa.bool_()))
    order = pa.array(range(rows.num_rows), pa.int64())
    ranked = rows.append_column(ORDER_COLUMN, order).sort_by([(SEQ_COLUMN, "ascending"),
                                                               (ORDER_COLUMN, "ascending")])
    # hash aggregation keeps the input order within a group when it runs on one thread: "last" is the latest
    last = ranked.group_by(list(key), use_threads=False).aggregate([(ORDER_COLUMN, "last")])
    indices = last.column(ORDER_COLUMN + "_last")
    picked = rows.take(pc.take(indices, pc.sort_indices(indices)))  # in the batch's order
    deleted = pc.is_in(picked.column(OP_COLUMN), pa.array(DELETE_OPS))
    return picked.select(columns).append_column(DELETE_COLUMN, deleted)


def appends(snapshot_only: bool, primary_key: Sequence[str], chunk_key: Sequence[str], listed: bool = False
            ) -> bool:
    """Whether a batch's rows of one table can be appended to its mirror instead of merged: they are all
    snapshot rows (``r``), the table is chunked by columns of its primary key, and its round does not read a
    list of keys of a string key (``listed``: the mirror deleted each key as written, byte for byte, while the
    source reads the rows equal to it under the collation, which the mirror may hold under other bytes, 'K-100'
    for 'k-100': merged, that row is written over).

    Why that is enough: snapshot rows come in batches of their own (a batch ends at snapshot chunks or at a
    binlog position, never both), a round reads each chunk once, and a table's mirror holds no row when its round
    begins (created for it, or emptied by its reset's ``T`` row, one batch before; one streaming query feeds a
    mirror: ``job.claim_query``). A chunk key made of key columns puts each primary key in one chunk for good
    (the key fixes the chunk key's value), so no key of the batch is in the mirror already or twice in the batch,
    and each key's last image is its one row: the MERGE would insert every row, and an append does the same
    without joining the table. A batch Spark runs again after
    a crash is the same batch, skipped as a MERGE is (the batch's id in the commit). A chunk key of other
    columns can move a row between chunks that two batches read, so such a table is merged.

    >>> appends(True, ("id",), ("id",)), appends(True, ("a", "b"), ("a",)), appends(True, ("id",), ("email",))
    (True, True, False)
    >>> appends(False, ("id",), ("id",)), appends(True, ("code",), ("code",), listed=True)  # merged
    (False, False)
    """
    return snapshot_only and not listed and bool(primary_key) and set(chunk_key) <= set(primary_key)


def merge_fields(fields: Sequence[pa.Field], key: Sequence[str]) -> list[pa.Field]:
    """The fields of a merge's rows: the key's as they are, every other one NULL-able, since a key's images may
    include a ``-U`` row that holds its key alone (option ``before_images`` key, which a sync's stream sets); such
    a row is a delete, so no NULL of it is ever written.

    >>> [(f.name, f.nullable) for f in merge_fields([pa.field("id", pa.int32(), False),
    ...                                               pa.field("v", pa.int32(), False)], ["id"])]
    [('id', False), ('v', True)]
    """
    keys = set(key)
    return [f if f.name in keys else f.with_nullable(True) for f in fields]
