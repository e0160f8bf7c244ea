"""``udtf/sync/iceberg_evolve.schema_update``: an update it gives, applied as Iceberg applies it, takes the
table's columns to the wanted ones (each from the column ``evolve_rows`` would move into it); where it
gives none, Iceberg could not (a narrowing, a key column new or nullable, a name taken twice). And
``udtf/sync/delta_evolve.delta_alter``: the one Delta statement it gives reaches the same columns."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from mysql_cdc.udtf.sync.delta_evolve import DeltaAlter, delta_alter
from mysql_cdc.udtf.sync.iceberg_evolve import Column, SchemaUpdate, promotes, schema_update

TYPES = ["int", "bigint", "float", "double", "string", "decimal(10,2)", "decimal(20,2)", "decimal(12,3)", "date"]
NAMES = ["a", "b", "c", "d", "e", "f"]


def apply(have: list[Column], u: SchemaUpdate) -> list[tuple[str, str]]:
    """The columns after ``u``, as Iceberg applies an update: by the current names, then renamed."""
    cols = {n: t for n, t, _ in have if n not in u.drops}
    cols.update(dict(u.promotions))
    cols.update(dict(u.adds))
    renamed = dict(u.renames)
    return [(renamed.get(n, n), cols[n]) for n in u.order]


@st.composite
def changes(draw: st.DrawFn) -> tuple[list[Column], list[Column], dict[str, str], list[str]]:
    have_names = draw(st.lists(st.sampled_from(NAMES), min_size=1, max_size=5, unique=True))
    have = [(n, draw(st.sampled_from(TYPES)), draw(st.booleans())) for n in have_names]
    want_names = draw(st.lists(st.sampled_from([*NAMES, "x", "y"]), min_size=1, max_size=6, unique=True))
    want = [(n, draw(st.sampled_from(TYPES)), True) for n in want_names]
    renamed = {n: draw(st.sampled_from(have_names)) for n in want_names if n not in have_names and draw(st.booleans())}
    key = draw(st.lists(st.sampled_from(want_names), max_size=2, unique=True))
    return have, want, renamed, key


@given(changes())
def test_an_update_reaches_the_wanted_columns(case: tuple[list[Column], list[Column], dict[str, str], list[str]]
                                              ) -> None:
    have, want, renamed, key = case
    u = schema_update(have, want, renamed, key)
    current = {n: (t, nullable) for n, t, nullable in have}
    sources = []
    for n, _t, _ in want:
        src = renamed.get(n, n)
        sources.append(src if src in current and src not in sources else None)
    possible = all(
        (src is not None and promotes(current[src][0], t) and not (n in key and current[src][1])
         and (src == n or n not in current))
        or (src is None and n not in key and n not in current)
        for (n, t, _), src in zip(want, sources))
    assert (u is not None) == possible, (have, want, renamed, key, u)
    if u is not None:
        assert apply(have, u) == [(n, t) for n, t, _ in want]
        assert u.order == tuple(s if s is not None else n for (n, _, _), s in zip(want, sources))
        assert u.identifier == tuple(key)
        assert set(u.drops) == {n for n, _, _ in have} - {s for s in sources if s is not None}


def apply_delta(have: list[Column], alter: DeltaAlter) -> list[tuple[str, str]]:
    """The columns after one Delta ``ALTER TABLE``: added at the end, one renamed where it is, some dropped."""
    cols = [(n, t) for n, t, _ in have]
    if alter.kind == "add":
        return cols + list(alter.columns)
    if alter.kind == "rename":
        (old, new), = alter.columns
        return [(new if n == old else n, t) for n, t in cols]
    gone = {n for n, _ in alter.columns}
    return [(n, t) for n, t in cols if n not in gone]


@given(changes())
def test_a_delta_alter_is_one_statement_that_reaches_the_wanted_columns(
        case: tuple[list[Column], list[Column], dict[str, str], list[str]]) -> None:
    """``delta_evolve.delta_alter``: where it gives a statement, that one statement takes the table to the wanted
    columns (names, order and types: no type changes); where it gives none, no single add, rename or drop did."""
    have, want, renamed, key = case
    u = schema_update(have, want, renamed, key)
    alter = delta_alter(u, have)
    wanted = [(n, t) for n, t, _ in want]
    if alter is not None:
        assert u is not None and apply_delta(have, alter) == wanted, (have, want, renamed, alter)
        assert alter.needs_mapping == (alter.kind != "add")
        assert alter.kind != "rename" or len(alter.columns) == 1
    elif u is not None:
        cols = [(n, t) for n, t, _ in have]
        one_add = wanted[:len(cols)] == cols and len(wanted) > len(cols)
        one_drop = len(wanted) < len(cols) and [c for c in cols if c in wanted] == wanted and \
            all(n not in renamed for n, _ in wanted)
        one_rename = len(u.renames) == 1 and not u.adds and not u.drops and not u.promotions and \
            len(wanted) == len(cols)
        assert not (one_add and not u.renames and not u.drops and not u.promotions), (have, want, renamed, u)
        assert not (one_drop and not u.renames and not u.adds and not u.promotions), (have, want, renamed, u)
        assert not (one_rename and list(u.order) == [n for n, _ in cols]), (have, want, renamed, u)
