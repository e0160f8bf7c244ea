"""A key range read again (mysql_cdc/keyrange.py) deletes in the mirror exactly the keys the source reads again:
its SQL text, run by a real SQL engine (SQLite) over random keys, holds for the same keys as the server's row
order (Python's tuple order) says, also for a range with gaps (a list of keys, ranges asked together) and over
columns of bytes, DECIMAL, dates and times (as ISO texts, which order as they do); the union of two ranges holds
exactly the keys of either, a list of keys exactly those keys (at most MAX_SPANS spans: then every key and no
fewer), and a range reads back from its JSON as it was; a list of keys with strings holds exactly those keys,
byte for byte, whatever quotes, backslashes or SQL they hold; so do the keys held in a range over a string key,
also in delta-rs (one IN list a group), and that range reads back from its JSON."""

from __future__ import annotations

import datetime as dt
import itertools
import json
import sqlite3
from decimal import Decimal
from typing import Any

import deltalake
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mysql_cdc.errors import ConfigError
from mysql_cdc.keyrange import MAX_GROUPS, MAX_HELD, MAX_SPANS, KeyRange, listed

ints = st.integers(-50, 50)


@given(st.integers(1, 3).flatmap(lambda n: st.tuples(
    st.just(n), st.none() | st.tuples(*[ints] * n), st.none() | st.tuples(*[ints] * n),
    st.lists(st.tuples(*[ints] * n), min_size=1, max_size=40))))
def test_the_range_predicate_holds_for_exactly_the_keys_in_the_range(case: tuple) -> None:
    n, start, end, keys = case
    if start is not None and end is not None and not start < end:
        start, end = (end, start) if end < start else (start, None)
    cols = tuple(f"c {i}" for i in range(n))  # names that need quoting
    r = KeyRange(cols, start, end)
    db = sqlite3.connect(":memory:")
    db.execute(f"CREATE TABLE t ({', '.join(f'[{c}] INTEGER' for c in cols)})")
    db.executemany(f"INSERT INTO t VALUES ({', '.join('?' * n)})", keys)
    where = r.predicate(lambda c: '"' + c.replace('"', '""') + '"').replace("TRUE", "1")
    got = sorted(db.execute(f"SELECT * FROM t WHERE {where}").fetchall())
    assert got == sorted(k for k in keys if r.contains(k))
    assert got == sorted(k for k in keys if (start is None or k >= start) and (end is None or k < end))


_DAY, _AT = dt.date(2024, 2, 28), dt.datetime(2024, 2, 29, 23, 59, 59, 999_970)
VALUES: dict[str, st.SearchStrategy[Any]] = {  # few values each, so that keys meet, touch and repeat
    "int": ints, "bin": st.binary(max_size=3),
    "date": st.integers(-3, 3).map(lambda d: _DAY + dt.timedelta(days=d)),  # across Feb 29
    "datetime": st.integers(-50, 50).map(lambda u: _AT + dt.timedelta(microseconds=u)),  # across midnight
    "timestamp": st.integers(-50, 50).map(lambda u: _AT + dt.timedelta(microseconds=u)),  # its literals end in Z
    "decimal": st.integers(-120, 120).map(lambda v: Decimal(v).scaleb(-2)),  # DECIMAL(5, 2): -1.20 to 1.20
}
SQLITE = {"int": "INTEGER", "bin": "BLOB", "date": "TEXT", "datetime": "TEXT", "timestamp": "TEXT", "decimal": "REAL"}


def _stored(v: Any, kind: str = "") -> Any:
    """A value as the SQLite table holds it: a date or time as the ISO text the predicate's literals write (a
    TIMESTAMP's with its Z)."""
    if isinstance(v, dt.datetime):
        return v.isoformat(timespec="microseconds") + ("Z" if kind == "timestamp" else "")
    if isinstance(v, dt.date):
        return v.isoformat()
    return float(v) if isinstance(v, Decimal) else v


def _spans(kinds: tuple[str, ...]) -> st.SearchStrategy[list]:
    bound = st.none() | st.tuples(*[VALUES[k] for k in kinds])

    def ordered(pair: tuple) -> tuple:
        a, b = pair
        if a is not None and b is not None and not a < b:
            return (b, a) if b < a else (a, None)
        return a, b
    return st.lists(st.tuples(bound, bound).map(ordered), min_size=1, max_size=6)


def _query(db: sqlite3.Connection, r: KeyRange) -> list:
    where = r.predicate(lambda c: '"' + c.replace('"', '""') + '"').replace("TRUE", "1")
    return sorted(db.execute(f"SELECT * FROM t WHERE {where}").fetchall())


# each column of a kind: SQLite compares BLOBs as the server and the lakes do, ISO texts as dates and times
kinds = st.lists(st.sampled_from(sorted(VALUES)), min_size=1, max_size=3).map(tuple)


@given(kinds.flatmap(lambda k: st.tuples(st.just(k), _spans(k), _spans(k), st.lists(
    st.tuples(*[VALUES[c] for c in k]), min_size=1, max_size=60))))
def test_ranges_with_gaps_and_their_union_hold_exactly_their_keys(case: tuple) -> None:
    kind, spans1, spans2, keys = case
    n = len(kind)
    cols = tuple(f"c {i}" for i in range(n))
    utc = [c for c, k in zip(cols, kind) if k == "timestamp"]
    r1, r2 = KeyRange.of_spans(cols, spans1, utc), KeyRange.of_spans(cols, spans2, utc)
    both = r1.union(r2)
    db = sqlite3.connect(":memory:")
    types = ", ".join(f"[{c}] {SQLITE[b]}" for c, b in zip(cols, kind))
    db.execute(f"CREATE TABLE t ({types})")
    db.executemany(f"INSERT INTO t VALUES ({', '.join('?' * n)})", [tuple(map(_stored, k, kind)) for k in keys])

    def in_spans(spans: list, k: tuple) -> bool:
        return any((a is None or k >= a) and (b is None or k < b) for a, b in spans)
    for r, spans in ((r1, spans1), (r2, spans2), (both, spans1 + spans2)):
        assert [k for k in keys if r.contains(k)] == [k for k in keys if in_spans(spans, k)]
        assert _query(db, r) == sorted(tuple(map(_stored, k, kind)) for k in keys if r.contains(k))
        assert KeyRange.from_dict(json.loads(json.dumps(r.to_dict()))) == r
        assert len(r.spans()) == len(r.gaps) + 1 and all(a is None or b is None or a < b for a, b in r.spans())


@given(st.lists(st.binary(max_size=3), min_size=1, max_size=3 * MAX_SPANS), st.lists(st.binary(max_size=4)))
def test_a_list_of_binary_keys_is_exactly_those_keys(keys: list, others: list) -> None:
    r = KeyRange.of_keys(("uuid",), [(k,) for k in keys])
    assert all(r.contains((k,)) for k in keys) and len(r.spans()) <= MAX_SPANS
    if len(set(keys)) <= MAX_SPANS:  # no byte string lies between k and k + 0x00
        assert not any(r.contains((k,)) for k in others if k not in keys)


@given(st.sampled_from(sorted(VALUES)).flatmap(lambda k: st.tuples(
    st.lists(st.tuples(ints, VALUES[k]), min_size=1, max_size=3 * MAX_SPANS), st.lists(st.tuples(ints, VALUES[k])))))
def test_a_list_of_keys_is_read_again_with_no_key_left_out(case: tuple) -> None:
    keys, others = case
    r = KeyRange.of_keys(("x", "y"), keys)  # a key just after another (the next day, microsecond, cent) joins it
    assert all(r.contains(k) for k in keys) and len(r.spans()) <= MAX_SPANS
    if len(set(keys)) <= MAX_SPANS:  # not joined: no other key
        assert not any(r.contains(k) for k in others if k not in keys)


def test_keys_of_two_kinds_in_one_column_are_one_clear_error() -> None:
    """(A key's type changed between two requests: the stream reads the table whole instead.)"""
    import pytest

    from mysql_cdc.errors import ConfigError

    with pytest.raises(ConfigError, match=r"mix values of kinds"):
        KeyRange.of_keys(("id",), [(5,)]).union(KeyRange.of_keys(("id",), [(b"\x11",)]))


texts = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=4) | st.sampled_from(
    ["it's", "a\\b", "é", "abc", "ABC", "'); DROP TABLE t; --", "\x00", " ", ""])


@given(st.lists(st.tuples(texts, ints), min_size=1, max_size=MAX_SPANS), st.lists(st.tuples(texts, ints), max_size=20),
       st.lists(st.tuples(texts, ints), min_size=1, max_size=5))
def test_a_list_of_string_keys_deletes_exactly_those_keys_byte_for_byte(keys: list, others: list, more: list) -> None:
    """A key with a string column is a list of keys; its SQL text (each string as ``CAST(X'..' AS STRING)``; in
    SQLite ``AS TEXT``, which compares text byte for byte as the lakes do) holds exactly for them, as
    ``contains`` says; it reads back from its JSON, and two lists join into their union."""
    cols = ("code 1", "n")
    r = KeyRange.of_keys(cols, keys)
    assert r.keys and r.start is None and r.end is None and sorted(set(keys)) == list(r.keys)
    db = sqlite3.connect(":memory:")
    db.execute('CREATE TABLE t ("code 1" TEXT, n INTEGER)')
    db.executemany("INSERT INTO t VALUES (?, ?)", [*keys, *others])
    where = r.predicate(lambda c: '"' + c.replace('"', '""') + '"').replace(" AS STRING)", " AS TEXT)")
    got = sorted(db.execute(f"SELECT * FROM t WHERE {where}").fetchall())
    assert got == sorted(k for k in [*keys, *others] if k in set(keys))
    assert all(r.contains(k) == (k in set(keys)) for k in [*keys, *others])
    assert KeyRange.from_dict(json.loads(json.dumps(r.to_dict()))) == r
    if len(set(keys) | set(more)) <= MAX_SPANS:
        assert r.union(KeyRange.of_keys(cols, more)).keys == tuple(sorted(set(keys) | set(more)))


def test_a_string_key_takes_a_range_alone_and_at_most_max_spans_keys() -> None:
    with pytest.raises(ConfigError, match=r"is read again alone, not with other keys or ranges of its table"):
        KeyRange(("code",), ("a",), ("b",)).union(KeyRange.of_keys(("code",), [("c",)]))
    with pytest.raises(ConfigError, match=r"has no gaps"):
        KeyRange(("code",), ("a",), ("z",), ((("b",), ("c",)),))
    with pytest.raises(ConfigError, match=rf"takes at most {MAX_HELD:,}"):
        KeyRange(("code",), ("a",), None, held=tuple((str(i),) for i in range(MAX_HELD + 1)))
    with pytest.raises(ConfigError, match=r"belong to a range over a key with a string column only"):
        KeyRange(("id",), (1,), (5,), held=((2,),))
    with pytest.raises(ConfigError, match=rf"takes at most {MAX_SPANS} at once"):
        KeyRange.of_keys(("code",), [(str(i),) for i in range(MAX_SPANS + 1)])
    with pytest.raises(ConfigError, match=r"a list of keys .* and a range .* cannot be joined"):
        KeyRange.of_keys(("code",), [("a",)]).union(KeyRange(("code",), (5,), (7,)))


_key = st.tuples(texts, st.integers(-3, 3))
_counter = itertools.count()


def _quote(c: str) -> str:
    return "`" + c.replace("`", "``") + "`"


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(_key, max_size=30), st.lists(_key, max_size=30))
def test_the_keys_a_list_names_are_deleted_from_a_delta_table_and_no_other(tmp_path: Any, keys: list[Any],
                                                                          others: list[Any]) -> None:
    rows = sorted(set(keys) | set(others))
    path = str(tmp_path / f"t{next(_counter)}")
    deltalake.write_deltalake(path, pa.table({"code": pa.array([c for c, _ in rows], pa.string()),
                                              "n": pa.array([n for _, n in rows], pa.int64())}))
    deltalake.DeltaTable(path).delete(listed(("code", "n"), keys, _quote))
    left = deltalake.DeltaTable(path).to_pyarrow_table()
    assert sorted(zip(left["code"].to_pylist(), left["n"].to_pylist())) == sorted(set(rows) - set(keys))


@given(st.lists(_key, max_size=20), _key, st.one_of(st.none(), _key))
def test_a_range_over_a_string_key_and_its_keys_held_read_back_as_written(held: list[Any], start: Any,
                                                                          end: Any) -> None:
    r = KeyRange(("code", "n"), start, end, held=tuple(held))
    assert r.texts and KeyRange.from_dict(r.to_dict()) == r
    assert all(r.contains(k) for k in held)
    bare = KeyRange(("code", "n"), start, end)
    assert KeyRange.from_dict(bare.to_dict()) == bare and bare.held is None
    with pytest.raises(ConfigError, match="not known yet"):
        bare.predicate(_quote)


def test_keys_in_more_groups_than_a_delete_takes_are_refused() -> None:
    """Each key its own group (no column's values repeat): one disjunction each, which delta-rs plans in time
    that grows with their square."""
    many = [(f"k{i}", i) for i in range(MAX_GROUPS + 1)]
    with pytest.raises(ConfigError, match=rf"{MAX_GROUPS + 1} keys over code, n make {MAX_GROUPS + 1} groups"):
        listed(("code", "n"), many, _quote)
    assert listed(("code", "n"), many[:MAX_GROUPS], _quote).count(" OR ") == MAX_GROUPS - 1
    # one column's values shared: one group, one IN list, however many keys
    assert " OR " not in listed(("code", "n"), [(f"k{i}", 1) for i in range(5000)], _quote)
