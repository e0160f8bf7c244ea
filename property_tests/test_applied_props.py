"""Each batch into an Iceberg table once (``udtf.sync.applied``) against a model of the tables' commits (pure; no
Spark): random runs of a sync's batches into two tables, each commit landing or not, failing before or after it
lands, Spark running a batch again (after it failed in the other table, or after it returned), the writer's
memory gone (a process restarted) or carried to another process (pickled, as a Spark Connect server's batch
function is), and a table rewritten beside the batches. Every batch lands in each table exactly once, a batch that
returns is in the table, and a table's history is read only where the writer cannot know it: the first batch of
a run, after a failed commit, after a rewrite."""

from __future__ import annotations

import pickle

from hypothesis import given
from hypothesis import strategies as st

from mysql_cdc.udtf.sync.applied import Applied, exactly_once

TABLES = ("t", "u")
# one batch's commit to one table: it commits; it fails before the commit lands; it lands and then fails (an
# error after Iceberg's commit, a reply lost); or beside the batches: the process dies and a new one starts; the
# writer is pickled to another process; a table is rewritten (a schema change Iceberg cannot make in place);
# Spark runs the last batch that returned again
EVENTS = ("ok", "fail_before", "fail_after", "restart", "pickled", "rewrite", "replay")


@given(st.lists(st.tuples(st.sampled_from(EVENTS), st.sampled_from(TABLES)), min_size=1, max_size=60),
       st.sampled_from(["q1", "q2"]))
def test_each_batch_lands_once_and_the_history_is_read_only_when_not_known(events: list[tuple[str, str]],
                                                                            app_id: str) -> None:
    # batches of this query each table holds already (an earlier run's), and another query's, never counted
    landed = {t: [0, 1] for t in TABLES}
    other = {t: [5, 6, 7] for t in TABLES}
    reads = dict.fromkeys(TABLES, 0)
    seen = Applied()
    batch = dict.fromkeys(TABLES, 2)  # the next batch each table takes
    must_read = dict.fromkeys(TABLES, True)  # the writer cannot know: a new run

    def attempt(table: str, batch_id: int, event: str) -> bool | None:
        """One batch's commit to ``table``: True when it ran, False when skipped, None when it raised."""
        def ask() -> int:
            reads[table] += 1
            assert other[table]  # the other query's batches are in the table, and not this one's
            return max(landed[table], default=-1)

        def commit() -> None:
            if event != "fail_before":
                landed[table].append(batch_id)
            if event in ("fail_before", "fail_after"):
                raise OSError(event)

        try:
            return exactly_once(seen, table, app_id, batch_id, ask, commit)
        except OSError:
            return None

    for event, table in events:
        if event == "restart":
            seen, must_read = Applied(), dict.fromkeys(TABLES, True)
            continue
        if event == "pickled":  # the copy starts knowing nothing
            seen, must_read = pickle.loads(pickle.dumps(seen)), dict.fromkeys(TABLES, True)
            continue
        if event == "rewrite":  # the rows move, the history stays (Iceberg's REPLACE keeps it)
            seen.forget(table)
            must_read[table] = True
            continue
        before, needs = reads[table], must_read[table]
        if event == "replay":  # the last batch that returned, again: skipped
            if batch[table] == 2:
                continue
            assert attempt(table, batch[table] - 1, "ok") is False, (table, events)
            must_read[table] = False
        else:
            held = batch[table] in landed[table]  # an earlier attempt's commit landed and then failed
            ran = attempt(table, batch[table], event)
            if ran is None:
                must_read[table] = True  # Spark runs the batch again
            else:
                assert ran is not held and batch[table] in landed[table], (event, table, events)
                batch[table] += 1
                must_read[table] = False
        assert reads[table] - before == (1 if needs else 0), (event, table, events)
        for t in TABLES:
            assert sorted(set(landed[t])) == sorted(landed[t]), landed  # no batch twice
