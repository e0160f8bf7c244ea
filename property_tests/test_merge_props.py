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
