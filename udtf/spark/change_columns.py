"""Change rows as Arrow columns, made from runs (:class:`udtf.binlog.phase.ChangeRun`: the rows of one rows event)
rather than row by row: the values of a batch's images are read column by column for many rows events at once
(:func:`udtf.binlog.columns.column_arrays`: no Python value per column per row where the events were walked,
else their row tuples transposed once), and the metadata columns are made per run and spread over its images
by index (``take``), their row index and sequence as the run's first plus the image's place in it. No Python
object is made per change row here.

Worked example: two runs, an update of two rows (four images) at sequence 100 and an insert of one row at
sequence 200, give the image-to-run index ``[0, 0, 0, 0, 1]``, places in the run ``[0, 1, 2, 3, 0]``, ops
``-U +U -U +U +I`` (an update run alternates) and sequences ``100 101 102 103 200``.

>>> from mysql_cdc.ids import TableId
>>> from mysql_cdc.udtf.binlog.phase import ALTERNATING, ChangeRun
>>> t = TableId("d", "t")
>>> runs = [ChangeRun(t, ALTERNATING, [(1,), (1,), (2,), (2,)], "b.000001", 900, 0, None, 7, 100),
...         ChangeRun(t, "+I", [(3,)], "b.000001", 990, 4, None, 7, 200)]
>>> meta = meta_arrays(runs)
>>> meta[0].to_pylist(), meta[10].to_pylist(), meta[7].to_pylist()
(['-U', '+U', '-U', '+U', '+I'], [100, 101, 102, 103, 200], [0, 1, 2, 3, 4])
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from mysql_cdc.rows import CHANGE_TYPES
from mysql_cdc.types import arrow_type
from mysql_cdc.udtf.binlog.columns import ColumnImages, column_arrays
from mysql_cdc.udtf.binlog.phase import ALTERNATING, ChangeRun

_OPS = ("+I", "-U", "+U", "-D")
_CODE = {"+I": 0, "-U": 1, "+U": 2, "-D": 3, ALTERNATING: 1}
_OP_TEXTS = pa.array(_OPS, pa.string())
_TYPE_TEXTS = pa.array([CHANGE_TYPES[o] for o in _OPS], pa.string())


def grouped(runs: Iterator[ChangeRun], size: int) -> Iterator[list[ChangeRun]]:
    """Runs in groups of at least ``size`` images (the last one fewer; a run is never cut)."""
    group: list[ChangeRun] = []
    n = 0
    for run in runs:
        group.append(run)
        n += len(run.values)
        if n >= size:
            yield group
            group, n = [], 0
    if group:
        yield group


def key_before_images(run: ChangeRun, key: Sequence[int]) -> ChangeRun:
    """The run with each before image (``-U``) cut to the columns at places ``key`` (the primary key), the
    others ``None`` (option ``before_images`` key): a mirror deletes the before image's key and upserts the
    after image's, and needs nothing else of it. The values are not copied, only the tuples remade.

    >>> from mysql_cdc.ids import TableId
    >>> from mysql_cdc.udtf.binlog.phase import ALTERNATING, ChangeRun
    >>> t = TableId("d", "t")
    >>> key_before_images(ChangeRun(t, ALTERNATING, [(1, "a"), (1, "b"), (2, "c"), (5, "c")], "b.1", 9, 0, None,
    ...                             7, 10), [0]).values
    [(1, None), (1, 'b'), (2, None), (5, 'c')]
    >>> key_before_images(ChangeRun(t, "-U", [(3, "x")], "b.1", 9, 4, None, 7, 14), [0]).values
    [(3, None)]
    >>> key_before_images(ChangeRun(t, "+I", [(4, "y")], "b.1", 99, 0, None, 7, 20), [0]).values
    [(4, 'y')]
    """
    keep = frozenset(key)
    if run.op == ALTERNATING and isinstance(run.values, ColumnImages):
        return run._replace(values=run.values.cut_before(keep))

    def cut(v: tuple[Any, ...]) -> tuple[Any, ...]:
        return tuple(x if i in keep else None for i, x in enumerate(v))

    if run.op == ALTERNATING:
        return run._replace(values=[v if k % 2 else cut(v) for k, v in enumerate(run.values)])
    if run.op == "-U":
        return run._replace(values=[cut(v) for v in run.values])
    return run


def run_columns(runs: Sequence[ChangeRun], schema: pa.Schema) -> list[pa.Array]:
    """The runs' images as one Arrow array per column of ``schema``: a rows event's walked images
    (:class:`ColumnImages`) read column by column, others from their tuples (:func:`column_arrays`)."""
    return column_arrays([r.values for r in runs], [f.type for f in schema])


def _spread(per_run: list[Any], kind: pa.DataType, run_of: pa.Array, n: int) -> pa.Array:
    """A value per run as a value per image."""
    if all(v == per_run[0] for v in per_run):
        return pa.repeat(pa.scalar(per_run[0], kind), n) if per_run[0] is not None else pa.nulls(n, kind)
    return pc.take(pa.array(per_run, kind), run_of)


def meta_arrays(runs: Sequence[ChangeRun]) -> list[pa.Array]:
    """The metadata columns (:data:`mysql_cdc.rows.META_COLUMNS`) of the runs' images."""
    counts = np.fromiter((len(r.values) for r in runs), np.int64, len(runs))
    n = int(counts.sum())
    run_idx = np.repeat(np.arange(len(runs), dtype=np.int64), counts)
    run_of = pa.array(run_idx)
    place = np.arange(n, dtype=np.int64) - (np.cumsum(counts) - counts)[run_idx]
    codes = np.fromiter((_CODE[r.op] for r in runs), np.int64, len(runs))[run_idx]
    alternating = np.fromiter((r.op == ALTERNATING for r in runs), np.bool_, len(runs))[run_idx]
    codes = codes + (alternating & (place % 2 == 1))
    code_arr = pa.array(codes)
    files = {f: json.dumps(f) for f in {r.file for r in runs}}
    positions = [f'{{"file":{files[r.file]},"pos":{r.pos},"gtid":{json.dumps(r.gtid)}}}' if r.gtid else
                 f'{{"file":{files[r.file]},"pos":{r.pos}}}' for r in runs]
    rows = np.fromiter((r.row for r in runs), np.int64, len(runs))[run_idx] + place
    seqs = np.fromiter((r.seq for r in runs), np.int64, len(runs))[run_idx] + place
    secs = _spread([r.timestamp for r in runs], pa.int64(), run_of, n)
    return [pc.take(_OP_TEXTS, code_arr),
            _spread([r.table.database for r in runs], pa.string(), run_of, n),
            _spread([r.table.table for r in runs], pa.string(), run_of, n),
            pa.nulls(n, pa.string()),
            _spread(positions, pa.string(), run_of, n),
            _spread([r.file for r in runs], pa.string(), run_of, n),
            _spread([r.pos for r in runs], pa.int64(), run_of, n),
            pa.array(rows, pa.int32()),  # checked: an index past 2**31 - 1 is an error, never wrapped
            _spread([r.gtid for r in runs], pa.string(), run_of, n),
            pc.take(_TYPE_TEXTS, code_arr),
            pa.array(seqs),
            secs.cast(pa.timestamp("s", "UTC")).cast(arrow_type("TIMESTAMP"))]


def table_places(runs: Sequence[ChangeRun]) -> dict[Any, np.ndarray]:
    """Where each table's images are among the runs' images (a table's places in order)."""
    counts = np.fromiter((len(r.values) for r in runs), np.int64, len(runs))
    tables = list(dict.fromkeys(r.table for r in runs))
    index = {t: i for i, t in enumerate(tables)}
    of_image = np.repeat(np.fromiter((index[r.table] for r in runs), np.int64, len(runs)), counts)
    return {t: np.flatnonzero(of_image == i) for t, i in index.items()}
