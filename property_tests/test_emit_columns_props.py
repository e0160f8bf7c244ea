"""The emit rule decided for a whole event on its key column (:mod:`udtf.binlog.emit_columns`) against the rule
image by image: the same verdict for every key (NULL keys, keys on chunk bounds, GTID and position watermarks),
and the emitted stretches cover exactly the emitted images, every run of an update's images starting with a
before image."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from mysql_cdc.offsets import BinlogOffset
from mysql_cdc.udtf.binlog.emit import EmitRule
from mysql_cdc.udtf.binlog.emit_columns import emitted, stretches

UUID = "3e11fa47-71ca-11e1-9e33-c80aa9429562"


def _offset(pos: int, gtid: bool) -> BinlogOffset:
    if gtid:
        return BinlogOffset("binlog.000001", pos, f"{UUID}:1-{pos}" if pos else "", "gtid")
    return BinlogOffset("binlog.000001", pos)


@settings(max_examples=1500)
@given(st.lists(st.integers(-2**40, 2**40), max_size=8, unique=True), st.data(), st.booleans(), st.booleans())
def test_the_event_decision_is_the_rule_for_each_key(bounds: list[int], data: st.DataObject, gtid: bool,
                                                     nullable: bool) -> None:
    bounds.sort()
    edges: list[tuple[int, ...] | None] = [None, *((b,) for b in bounds), None]
    ranges = [(edges[i], edges[i + 1]) for i in range(len(edges) - 1)]
    highs = [_offset(data.draw(st.integers(0, 50)), gtid) for _ in ranges]
    nulls = _offset(data.draw(st.integers(0, 50)), gtid) if nullable else None
    rule = EmitRule(ranges, highs, nulls)
    near = st.sampled_from([b + d for b in bounds for d in (-1, 0, 1)]) if bounds else st.integers(-5, 5)
    keys = data.draw(st.lists(st.one_of(near, st.integers(-2**41, 2**41)), max_size=40))
    null = np.array(data.draw(st.lists(st.booleans(), min_size=len(keys), max_size=len(keys))), np.bool_) \
        if nullable else None
    pos = data.draw(st.integers(1, 51))
    event, txn = _offset(pos, False), f"{UUID}:{pos}"
    got = emitted(rule, np.array(keys, np.int64), null, event, txn)
    want = [rule.emit(None if null is not None and null[i] else (k,), event, txn) for i, k in enumerate(keys)]
    assert got.tolist() == want


@settings(max_examples=1500)
@given(st.lists(st.booleans(), max_size=30), st.booleans())
def test_stretches_cover_the_emitted_images(flags: list[bool], update: bool) -> None:
    if update and len(flags) % 2:
        flags = flags[:-1]
    mask = np.array(flags, np.bool_)
    got = stretches(mask, update)
    covered = [k for a, b, _ in got for k in range(a, b)]
    assert covered == [k for k, f in enumerate(flags) if f]  # each once, in order
    for a, b, op in got:
        assert b > a
        if op is not None:
            assert update and b == a + 1 and op == ("+U" if a % 2 else "-U")
        elif update:
            assert a % 2 == 0 and (b - a) % 2 == 0
