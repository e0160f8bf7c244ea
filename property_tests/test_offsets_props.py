"""GTID sets against a model (Python sets of (source, n)), and the offset order (pure; no server)."""

from __future__ import annotations

import json

from hypothesis import example, given
from hypothesis import strategies as st

from mysql_cdc.offsets import (
    SNAPSHOT_SEQUENCE,
    BinlogOffset,
    GtidSet,
    MariadbGtidPos,
    binlog_file_key,
    change_sequence,
    is_mariadb_gtids,
)

UUIDS = ["3e11fa47-71ca-11e1-9e33-c80aa9429562", "0b1a2c3d-0000-1111-2222-333344445555"]
members = st.sets(st.tuples(st.sampled_from(UUIDS), st.integers(1, 40)), max_size=40)


def to_text(m: set[tuple[str, int]]) -> str:
    return ",".join(f"{u}:{n}" for u, n in sorted(m))


def model(s: GtidSet) -> set[tuple[str, int]]:
    return {(u, n) for u, iv in s.sources for a, b in iv for n in range(a, b + 1)}


@given(members, members)
def test_gtid_set_operations_match_the_model(a: set[tuple[str, int]], b: set[tuple[str, int]]) -> None:
    sa, sb = GtidSet.parse(to_text(a)), GtidSet.parse(to_text(b))
    assert model(sa) == a
    assert model(sa.union(sb)) == a | b
    assert model(sa.difference(sb)) == a - b
    assert sa.issubset(sb) == (a <= b)
    assert GtidSet.parse(str(sa)) == sa
    for u, n in a:
        assert sa.contains_gtid(f"{u}:{n}")
    assert sa.count() == len(a)


files = st.builds(lambda w, n: f"binlog.{n:0{w}d}", st.integers(1, 8), st.integers(0, 10**7))
uuids = st.sampled_from(["3e11fa47-71ca-11e1-9e33-c80aa9429562", "4b1e9f3a-71ca-11e1-9e33-c80aa9429563",
                         "00000000-0000-0000-0000-000000000001"])
mysql_gtids = st.dictionaries(uuids, st.tuples(st.integers(1, 10**6), st.integers(0, 10**3)), min_size=1).map(
    lambda d: ",".join(f"{u}:{a}-{a + n}" if n else f"{u}:{a}" for u, (a, n) in sorted(d.items())))
mariadb_gtids = st.dictionaries(st.integers(0, 2**32 - 1), st.tuples(st.integers(1, 2**32 - 1),
                                                                     st.integers(0, 2**63)), min_size=1).map(
    lambda d: ",".join(f"{dom}-{srv}-{seq}" for dom, (srv, seq) in sorted(d.items())))
offsets = st.builds(BinlogOffset, files, st.integers(0, 2**40), st.one_of(st.none(), mysql_gtids, mariadb_gtids),
                    st.sampled_from(["snapshot", "gtid", "position"]))


@given(offsets, offsets, offsets)
def test_offset_order_is_total_and_transitive(a: BinlogOffset, b: BinlogOffset, c: BinlogOffset) -> None:
    assert (a < b) + (b < a) + (a.sort_key() == b.sort_key()) == 1
    if a <= b and b <= c:
        assert a <= c
    assert BinlogOffset.from_dict(json.loads(json.dumps(a.to_dict()))) == a


@given(st.integers(0, 10**9), st.integers(0, 10**9))
@example(999999, 1000000)
def test_file_names_compare_by_number_whatever_the_width(x: int, y: int) -> None:
    assert (binlog_file_key(f"mysql-bin.{x:06d}") < binlog_file_key(f"mysql-bin.{y}")) == (x < y)


mariadb_gtids = st.lists(st.tuples(st.integers(0, 3), st.integers(1, 3), st.integers(1, 10**6)), max_size=8)


@given(mariadb_gtids, st.tuples(st.integers(0, 4), st.integers(1, 3), st.integers(1, 10**6)))
def test_mariadb_gtid_position_keeps_the_last_seq_per_domain(gtids: list[tuple[int, int, int]],
                                                             probe: tuple[int, int, int]) -> None:
    text = ",".join(f"{d}-{s}-{n}" for d, s, n in gtids)
    pos = MariadbGtidPos.parse(text)
    last: dict[int, int] = {}
    for d, _, n in gtids:
        last[d] = max(last.get(d, 0), n)
    assert {d: n for d, _, n in pos.domains} == last
    assert MariadbGtidPos.parse(str(pos)) == pos
    d, s, n = probe
    assert pos.contains_gtid(f"{d}-{s}-{n}") == (d in last and n <= last[d])
    assert is_mariadb_gtids(text) == bool(gtids)
    assert not is_mariadb_gtids(to_text({(UUIDS[0], 1)}))
    half = MariadbGtidPos.parse(",".join(f"{d}-{s}-{n}" for d, s, n in gtids[: len(gtids) // 2]))
    assert half.union(pos) == pos


# a binlog as files of events, each event (size, images) with at least one byte per image
binlogs = st.lists(st.tuples(st.integers(1, 2**31 - 1),
                             st.lists(st.integers(1, 40).flatmap(
                                 lambda n: st.tuples(st.integers(n + 19, n + 5000), st.just(n))), max_size=8)),
                   min_size=1, max_size=4, unique_by=lambda f: f[0])


@given(binlogs)
@example([(2**31 - 1, [(5000, 40)]), (1, [(20, 1)])])
def test_change_sequence_follows_the_binlog_order_and_is_unique(files: list[tuple[int, list[tuple[int, int]]]]
                                                                 ) -> None:
    seqs = []
    for number, events in sorted(files):
        name = f"binlog.{number:06d}"
        start = 4  # past the file's magic bytes
        for size, images in events:
            seqs += [change_sequence(name, start, i) for i in range(images)]
            start += size
    assert seqs == sorted(set(seqs))  # binlog order, no two alike
    assert all(SNAPSHOT_SEQUENCE < s < 2**63 for s in seqs)
