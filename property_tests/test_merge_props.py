"""The mirror's MERGE rule against a model: applying each key's final image to a table equals applying every
image of the batch in sequence order (pure; no server)."""

from __future__ import annotations

import random

import pyarrow as pa
from hypothesis import given
from hypothesis import strategies as st

from mysql_cdc.udtf.sync.last_image import DELETE_COLUMN, final_images

# (op, key, value) images in binlog order; snapshot rows (r) carry sequence 0, changes a growing one
images = st.lists(st.tuples(st.sampled_from(["r", "+I", "-U", "+U", "-D"]), st.integers(0, 6), st.integers(0, 99)),
                  max_size=40)
state = st.dictionaries(st.integers(0, 6), st.integers(0, 99), max_size=7)


@given(state, images, st.randoms(use_true_random=False))
def test_final_images_apply_like_every_image_in_order(before: dict[int, int], batch: list[tuple[str, int, int]],
                                                      rnd: random.Random) -> None:
    seqs = [0 if op == "r" else 100 + i for i, (op, _, _) in enumerate(batch)]
    rows_order = list(range(len(batch)))
    rnd.shuffle(rows_order)  # a micro-batch's rows come in any order
    # the model: every image applied in sequence order, ties (snapshot rows) in the batch's order
    expected = dict(before)
    for i in sorted(rows_order, key=lambda i: (seqs[i], rows_order.index(i))):
        op, k, v = batch[i]
        if op in ("-U", "-D"):
            expected.pop(k, None)
        else:
            expected[k] = v
    rows = pa.table({"k": [batch[i][1] for i in rows_order], "v": [batch[i][2] for i in rows_order],
                     "__op": [batch[i][0] for i in rows_order],
                     "_change_seq": pa.array([seqs[i] for i in rows_order], pa.int64())})
    out = final_images(rows, ["k"]).to_pylist()
    assert len({r["k"] for r in out}) == len(out) == len({k for _, k, _ in batch})
    got = dict(before)
    for r in out:
        if r[DELETE_COLUMN]:
            got.pop(r["k"], None)
        else:
            got[r["k"]] = r["v"]
    assert got == expected


@given(images)
def test_before_images_cut_to_their_key_merge_the_same(batch: list[tuple[str, int, int]]) -> None:
    """Option ``before_images`` key (a sync's stream): a ``-U`` image without its other values gives the same
    final images, so the same mirror (:func:`udtf.spark.change_columns.key_before_images`)."""
    seqs = pa.array([0 if op == "r" else 100 + i for i, (op, _, _) in enumerate(batch)], pa.int64())
    ops = [op for op, _, _ in batch]
    keys = [k for _, k, _ in batch]
    full = pa.table({"k": keys, "v": pa.array([v for _, _, v in batch], pa.int64()), "__op": ops,
                     "_change_seq": seqs})
    cut = full.set_column(1, "v", pa.array([None if op == "-U" else v for op, _, v in batch], pa.int64()))
    a, b = final_images(full, ["k"]), final_images(cut, ["k"])
    assert a.column(DELETE_COLUMN).to_pylist() == b.column(DELETE_COLUMN).to_pylist()
    assert a.column("k").to_pylist() == b.column("k").to_pylist()
    kept = [not d for d in a.column(DELETE_COLUMN).to_pylist()]
    assert a.filter(pa.array(kept, pa.bool_())).equals(b.filter(pa.array(kept, pa.bool_())))
