"""Each batch into an Iceberg table once (``udtf.sync.applied``) against a model of the table's commits (pure; no
Spark): random runs of a sync's batches, each commit landing or not, failing before or after it lands, the
process restarting (the writer's memory gone) and the table rewritten beside the batches. Every batch lands in
the table exactly once, a batch that returns is in the table, and the table's history is read only where the
writer cannot know it: the first batch of a run, after a failed commit, after a rewrite."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from mysql_cdc.udtf.sync.applied import Applied, exactly_once

# what happens to one attempt of a batch: it commits; it fails before the commit lands; it lands and then fails
# (an error after Iceberg's commit, a reply lost); the process dies before it and a new one starts; the table
# is rewritten (a schema change Iceberg cannot make in place) before it
EVENTS = ("ok", "fail_before", "fail_after", "restart", "rewrite")


@given(st.lists(st.sampled_from(EVENTS), min_size=1, max_size=60), st.sampled_from(["q1", "q2"]))
def test_each_batch_lands_once_and_the_history_is_read_only_when_not_known(events: list[str], app_id: str
                                                                            ) -> None:
    landed: list[int] = [0, 1]  # batches of this query the table holds already (an earlier run's)
    reads = 0
    seen = Applied()
    seen.remember("other table", app_id, 99)  # another table's entry: kept by a rewrite of this one
    other_known = True
    batch = 2
    must_read = True  # the writer cannot know: a new run

    def ask() -> int:
        nonlocal reads
        reads += 1
        return max(landed, default=-1)

    for event in events:
        if event == "restart":
            seen, must_read, other_known = Applied(), True, False
            continue
        if event == "rewrite":  # the rows move, the history stays (Iceberg's REPLACE keeps it)
            seen.forget("t")
            must_read = True
            continue
        before, needs = reads, must_read

        def commit(event: str = event, batch: int = batch) -> None:
            if event != "fail_before":
                landed.append(batch)
            if event != "ok":
                raise OSError(event)

        try:
            exactly_once(seen, "t", app_id, batch, ask, commit)
        except OSError:
            must_read = True  # Spark runs the batch again
        else:
            assert batch in landed
            batch += 1
            must_read = False
        assert reads - before == (1 if needs else 0), (event, events)
        assert sorted(set(landed)) == sorted(landed), landed  # no batch twice
        assert seen.known("other table", app_id) == (99 if other_known else None)
