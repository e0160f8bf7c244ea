"""Each batch of a sync into Iceberg once: which batch a mirror table last took, remembered by the writer that
committed it, so that a batch reads the table's commit history only when it must (pure; no Spark).

Iceberg has no idempotent writes. Each commit of the sync carries its query and batch in the snapshot's summary
(``SparkIcebergMirror``), and a batch the table holds already, or a later one, is skipped. Reading that from the
table (its ``snapshots`` metadata table) took about a second a table on 2 local cores (2026-12-01), in every
batch, for every table the batch touched. Only this writer commits batches of its query (the sync's lock), so
what it committed itself it knows:

- a commit that returned: the table holds that batch;
- a commit that failed may have landed all the same (an error after Iceberg's commit, a reply lost): the entry is
  forgotten before the commit starts, and the next batch (Spark's replay of this one) reads the table again;
- an entry not known (the first batch of a run, or after such a failure) is read from the table and remembered.

Worked example: the first batch of a run reads the table (it held batch 6 of this query); batch 7 commits; a
replay of 7 is skipped without reading; batch 8 fails in its commit, so the replay of 8 reads the table again:

>>> held, reads = [6], []
>>> def ask():
...     reads.append(max(held))
...     return max(held)
>>> seen = Applied()
>>> exactly_once(seen, "t", "q", 7, ask, lambda: held.append(7)), reads
(True, [6])
>>> exactly_once(seen, "t", "q", 7, ask, lambda: held.append(7)), reads
(False, [6])
>>> def landed_then_failed():
...     held.append(8)
...     raise OSError("reply lost")
>>> exactly_once(seen, "t", "q", 8, ask, landed_then_failed)
Traceback (most recent call last):
...
OSError: reply lost
>>> exactly_once(seen, "t", "q", 8, ask, lambda: held.append(8)), reads
(False, [6, 8])
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable


class Applied:
    """The last batch each (table, query) holds, as far as this writer knows (``None``: not known: read it)."""

    def __init__(self) -> None:
        self._last: dict[tuple[Hashable, str], int] = {}
        self._lock = threading.Lock()  # a batch's tables commit from threads of their own

    def __reduce__(self) -> tuple[type[Applied], tuple[()]]:
        """A copy elsewhere (the batch function a Spark Connect server runs) starts knowing nothing."""
        return Applied, ()

    def known(self, table: Hashable, app_id: str) -> int | None:
        with self._lock:
            return self._last.get((table, app_id))

    def remember(self, table: Hashable, app_id: str, batch_id: int) -> int:
        with self._lock:
            self._last[(table, app_id)] = batch_id
        return batch_id

    def forget(self, table: Hashable, app_id: str | None = None) -> None:
        """Forget the table's entry of ``app_id`` (of every query: ``None``; the table was written otherwise)."""
        with self._lock:
            for key in [k for k in self._last if k[0] == table and app_id in (None, k[1])]:
                del self._last[key]


def exactly_once(seen: Applied, table: Hashable, app_id: str, batch_id: int, ask: Callable[[], int],
                 commit: Callable[[], None]) -> bool:
    """Run ``commit`` (one commit to ``table`` carrying ``app_id`` and ``batch_id``) unless the table holds this
    batch of this query or a later one (``ask``: the latest it holds, -1 for none, read from the table where
    ``seen`` does not know it); true when it ran."""
    done = seen.known(table, app_id)
    if done is None:
        done = seen.remember(table, app_id, ask())
    if done >= batch_id:
        return False
    seen.forget(table, app_id)  # until the commit returns, it may land or not
    commit()
    seen.remember(table, app_id, batch_id)
    return True
