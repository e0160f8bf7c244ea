"""The emit rule (:mod:`.emit`) decided for a whole rows event at once, on its chunk key's column (pure; NumPy).

An event lies at one binlog point, so the rule's verdict depends only on which chunk holds each image's key:
one verdict per chunk (the event after the chunk's high watermark, or outside its GTID set), then each key
placed among the chunks' start keys by a sorted search. This holds where the key's sort key is its integer
value (:mod:`mysql_cdc.keyorder`: a one-column integer key); other keys go through the rule image by image.

Worked example: chunks ``[-inf, 101)`` at position 1000, ``[101, 201)`` at 800, ``[201, +inf)`` at 1500, and
an event at 900 with keys 50, 150, 150, 300 (an insert of four rows): the first chunk already holds the event
(900 <= 1000), the second does not (900 > 800), the third does (900 <= 1500).

>>> import numpy as np
>>> from mysql_cdc.offsets import BinlogOffset as O
>>> from mysql_cdc.udtf.binlog.emit import EmitRule
>>> rule = EmitRule([(None, (101,)), ((101,), (201,)), ((201,), None)], [O("b.1", 1000), O("b.1", 800), O("b.1", 1500)])
>>> mask = emitted(rule, np.array([50, 150, 150, 300]), None, O("b.1", 900))
>>> mask.tolist()
[False, True, True, False]

The emitted images in stretches of one run each: ``(first, end, op)``. In an update event images alternate
before and after (``-U`` at even places), and a stretch cut at an odd place leaves its odd image a run of its
own, so that every run of both kinds starts with a before image:

>>> stretches(mask, False)
[(1, 3, None)]
>>> stretches(np.array([False, True, True, True, True, False]), True)
[(1, 2, '+U'), (2, 4, None), (4, 5, '-U')]
"""

from __future__ import annotations

import numpy as np

from mysql_cdc.offsets import BinlogOffset
from mysql_cdc.udtf.binlog.emit import EmitRule


def emitted(rule: EmitRule, keys: np.ndarray, null: np.ndarray | None, event: BinlogOffset, gtid: str | None = None
            ) -> np.ndarray:
    """The rule's verdict for each image of one event whose one-column integer chunk key has the values
    ``keys`` (``null``: where the key is NULL, or ``None``), as :meth:`EmitRule.emit` gives it image by image:
    the verdict of each chunk the keys fall in, asked once."""
    starts = rule.int_starts()
    assert starts is not None
    owner = np.searchsorted(starts, keys, side="right")
    if null is not None and null.any():
        owner = np.where(null, rule.owner(None), owner)
    chunks, which = np.unique(owner, return_inverse=True)
    verdicts = np.array([rule.emit_in(int(i), event, gtid) for i in chunks], np.bool_)
    return verdicts[which.reshape(-1)]


def stretches(mask: np.ndarray, update: bool) -> list[tuple[int, int, str | None]]:
    """The emitted images of an event as stretches ``(first, end, op)``: ``op`` None for the event's own op
    (an update's alternating ``-U``/``+U``), else the op of a lone image of an update cut at an odd place."""
    if not len(mask):
        return []
    edges = np.flatnonzero(np.diff(np.concatenate(([0], mask.astype(np.int8), [0]))))
    out: list[tuple[int, int, str | None]] = []
    for a, b in zip(edges[::2].tolist(), edges[1::2].tolist()):
        if update and a % 2:
            out.append((a, a + 1, "+U"))
            a += 1
        if update and (b - a) % 2:
            if b - 1 > a:
                out.append((a, b - 1, None))
            out.append((b - 1, b, "-U"))
        elif b > a:
            out.append((a, b, None))
    return out
