"""The schema-change rule (``udtf.schema.evolve``) against a model (pure; no server): random ALTER TABLE
statements built from clauses whose effect on stored values is known, applied to a random table. The rule
follows in place exactly when no clause changes a stored value; ``plainly_kept`` recognizes the clauses that
cannot by their text alone; ``apply_plain`` gives the columns after such a statement; ``evolve_rows`` moves a
mirror's rows there."""

from __future__ import annotations

from dataclasses import replace

import pyarrow as pa
from hypothesis import given
from hypothesis import strategies as st

from mysql_cdc.ddl import plainly_kept
from mysql_cdc.ids import TableId
from mysql_cdc.schema import ColumnInfo, TableSchema
from mysql_cdc.udtf.schema.evolve import EVOLVE, RESET, SAME, apply_plain, evolve_rows, judge

ID = ColumnInfo("id", "int", "int", False)
TYPES = {"int": ColumnInfo("", "int", "int", True), "bigint": ColumnInfo("", "bigint", "bigint", True),
         "varchar(10)": ColumnInfo("", "varchar", "varchar(10)", True, "utf8mb4", "utf8mb4_bin"),
         "varchar(40)": ColumnInfo("", "varchar", "varchar(40)", True, "utf8mb4", "utf8mb4_bin")}
WIDER = {"int": "bigint", "varchar(10)": "varchar(40)"}
NARROWER = {"bigint": "int", "varchar(40)": "varchar(10)"}
# clause kinds: (what it does to stored values: True = rewrites some)
KINDS = {"add_null": False, "add_default": True, "drop": False, "rename": False, "widen": False, "narrow": True,
         "retype": True, "index": False, "swap": True}  # swap: pairing by name would swap values


def _col(name: str, kind: str, nullable: bool = True) -> ColumnInfo:
    return replace(TYPES[kind], name=name, nullable=nullable)


@st.composite
def alters(draw: st.DrawFn) -> tuple[TableSchema, TableSchema, str, dict[str, bool], bool, bool]:
    """(old, new, statement, null defaults of new, whether a stored value changed, whether the text alone says
    it cannot have)."""
    n = draw(st.integers(1, 4))
    cols = {f"c{i}": draw(st.sampled_from(sorted(TYPES))) for i in range(n)}
    old = TableSchema(TableId("d", "t"), (ID, *(_col(k, v) for k, v in cols.items())), ("id",), ("id",))
    clauses, changed, plain = [], False, True
    nulls = {"id": False, **dict.fromkeys(cols, True)}
    fresh, touched = 0, set()
    for kind in draw(st.lists(st.sampled_from(sorted(KINDS)), min_size=1, max_size=4)):
        # the clauses of one ALTER name the table's columns as they were before it, each at most once
        names = sorted(c for c in old.column_names[1:] if c in cols and c not in touched)
        fresh += 1
        if kind == "add_null":
            cols[f"n{fresh}"] = "int"
            nulls[f"n{fresh}"] = True
            clauses.append(f"ADD COLUMN n{fresh} INT")
        elif kind == "add_default":
            cols[f"n{fresh}"] = "int"
            nulls[f"n{fresh}"] = False
            clauses.append(f"ADD COLUMN n{fresh} INT NOT NULL DEFAULT 3")
        elif kind == "index":
            clauses.append(f"ADD INDEX i{fresh} (id)")
        elif not names:
            continue
        elif kind == "drop":
            name = draw(st.sampled_from(names))
            touched.add(name)
            del cols[name]
            clauses.append(f"DROP COLUMN {name}")
        elif kind == "swap":
            if len(names) < 2:
                continue
            a, b = draw(st.sampled_from(names)), draw(st.sampled_from(names))
            if a == b:
                continue
            touched |= {a, b}
            cols = {b if k == a else a if k == b else k: v for k, v in cols.items()}
            clauses.append(f"RENAME COLUMN {a} TO {b}, RENAME COLUMN {b} TO {a}")
            plain = False
        elif kind == "rename":
            name = draw(st.sampled_from(names))
            touched.add(name)
            cols = {f"r{fresh}" if k == name else k: v for k, v in cols.items()}  # in place, as MySQL does
            nulls[f"r{fresh}"] = nulls.pop(name)
            clauses.append(f"RENAME COLUMN {name} TO r{fresh}")
        else:
            name = draw(st.sampled_from(names))
            touched.add(name)
            table = WIDER if kind == "widen" else NARROWER if kind == "narrow" else {"int": "varchar(40)"}
            if cols[name] not in table:
                continue
            cols[name] = table[cols[name]]
            clauses.append(f"MODIFY {name} {cols[name].upper()}")
            plain = False  # MODIFY is never plain by its text, widening or not
        changed = changed or KINDS[kind]
        plain = plain and not KINDS[kind]
    if not clauses:
        clauses.append("ADD INDEX i0 (id)")
    new = TableSchema(old.table, (ID, *(_col(k, v, nullable=k not in nulls or nulls[k] or not k.startswith("n"))
                                        for k, v in cols.items())), ("id",), ("id",))
    # a NOT NULL DEFAULT column is not nullable
    new = replace(new, columns=tuple(replace(c, nullable=False) if not nulls.get(c.name, True) else c
                                     for c in new.columns))
    kept = {k: v for k, v in nulls.items() if k in cols or k == "id"}
    return old, new, "ALTER TABLE t " + ", ".join(clauses), kept, changed, plain


@given(alters())
def test_the_rule_follows_in_place_exactly_when_no_stored_value_changed(
        case: tuple[TableSchema, TableSchema, str, dict[str, bool], bool, bool]) -> None:
    old, new, statement, nulls, changed, plain = case
    verdict = judge(old, new, statement, nulls)
    assert (verdict.kind == RESET) == changed, (statement, verdict)
    assert verdict.kind != SAME or old == new
    assert plainly_kept(statement) == plain, statement
    if plain:  # the columns after the statement, from the statement and today's columns (the same here)
        assert apply_plain(old, statement, new, {}) == new, statement
    if verdict.kind == EVOLVE:  # a mirror's rows move over: kept values stay, new columns are NULL
        rows = pa.table({c.name: pa.array(list(range(3)) if "int" in c.column_type else ["a", "b", "c"],
                                          pa.int64() if "int" in c.column_type else pa.string())
                         for c in old.columns})
        want = pa.schema([(c.name, pa.int64() if "int" in c.column_type else pa.string()) for c in new.columns])
        moved = evolve_rows(rows, want, verdict.renamed)
        for c in new.columns:
            src = verdict.renamed.get(c.name, c.name)
            expected = rows.column(src).to_pylist() if src in rows.column_names else [None] * 3
            assert moved.column(c.name).to_pylist() == expected, (statement, c.name)
