"""Schema changes followed: what a DDL statement did to a captured table, judged from the table's schema before
and after it, and how a mirror's rows follow it.

A change is followed *in place* (the stream goes on with the new columns, nothing is read again) only when no
row's stored values changed under it, so that the binlog, which logs no row for an ALTER, still describes
every row:

- columns added that are NULL for every existing row (nullable, ``DEFAULT NULL``, not generated);
- columns dropped (not of the primary key);
- columns renamed (``RENAME COLUMN a TO b``, ``CHANGE a b ...``) with their definition kept;
- columns widened without touching a value: a longer CHAR/VARCHAR/VARBINARY or larger TEXT/BLOB, a wider
  integer of the same signedness, DECIMAL with at least the integer digits and scale it had, a finer fractional
  second, ENUM/SET members appended;
- columns moved (``AFTER``/``FIRST``), and anything that leaves every column as it was (indexes, comments,
  table options, a default for new rows).

Anything else (a default filled into existing rows, a narrower or other type, a changed primary key, a new
generated column, TRUNCATE) rewrote stored values that the binlog does not show: the table is snapshotted
again (*reset*) from the statement on. The rule is :func:`judge`; :func:`evolve_rows` moves a mirror's rows to
the new columns.

Pure: no driver, no pyspark.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

import pyarrow as pa

from mysql_cdc.ddl import added_place, alter_clauses, clause_names, renamed_columns, reuses_names
from mysql_cdc.schema import EVOLVE, RESET, SAME, ChangeKind, ColumnInfo, TableSchema

_INT_ORDER = ("tinyint", "smallint", "mediumint", "int", "bigint")
_TEXT_ORDER = ("tinytext", "text", "mediumtext", "longtext")
_BLOB_ORDER = ("tinyblob", "blob", "mediumblob", "longblob")
_TEMPORAL = ("datetime", "timestamp", "time")


def apply_plain(old: TableSchema, statement: str, now: TableSchema, renamed_after: Mapping[str, str]
                ) -> TableSchema | None:
    """The table's columns just after a :func:`plainly_kept` ALTER statement, from those before it (``old``)
    and today's (``now``, reached from there by later statements that rename ``renamed_after``: today's name to
    the name just after this statement): each clause applied in turn, an added column defined as today (under
    its later name). ``None`` when an added column is gone today (its definition is not known).

    >>> from mysql_cdc.ids import TableId
    >>> c = lambda n, t="int": ColumnInfo(n, t, t, True)
    >>> old = TableSchema(TableId("d", "t"), (ColumnInfo("id", "int", "int", False), c("a"), c("b")), ("id",), ("id",))
    >>> now = TableSchema(old.table, (*old.columns[:1], c("z"), c("x", "bigint")), ("id",), ("id",))
    >>> mid = apply_plain(old, "ALTER TABLE t ADD x BIGINT AFTER id, DROP b, RENAME COLUMN a TO y", now, {"z": "y"})
    >>> [(col.name, col.data_type) for col in mid.columns]
    [('id', 'int'), ('x', 'bigint'), ('y', 'int')]
    """
    clauses = alter_clauses(statement)
    if clauses is None:  # CREATE/DROP INDEX
        return old
    cols = list(old.columns)
    later = {v: k for k, v in renamed_after.items()}  # name just after this statement -> today's name
    key, chunk = list(old.primary_key), list(old.chunk_key)
    for clause in clauses:
        if clause.kind == "add" and clause.column is not None:
            name = clause.column
            today = {col.name: col for col in now.columns}.get(later.get(name, name))
            if today is None or name in [x.name for x in cols]:  # gone today, or ADD IF NOT EXISTS of one there
                return None
            col = replace(today, name=name)
            first, after = added_place(clause)
            names = [x.name for x in cols]
            if first:
                cols.insert(0, col)
            elif after is not None and after in names:
                cols.insert(names.index(after) + 1, col)
            else:
                cols.append(col)
        elif clause.kind == "rename" and clause.plain:
            a, b = clause.column, clause.new_name
            cols = [replace(x, name=b) if x.name == a and b is not None else x for x in cols]
            key, chunk = [b if k == a and b else k for k in key], [b if k == a and b else k for k in chunk]
        elif clause.kind == "drop" and clause.plain:
            cols = [x for x in cols if x.name != clause.column]
    return TableSchema(old.table, tuple(cols), tuple(key), tuple(chunk))


def _length(col: ColumnInfo) -> int | None:
    m = re.match(r"\w+\((\d+)\)", col.column_type)
    return int(m.group(1)) if m else None


def _members(col: ColumnInfo) -> list[str]:
    return re.findall(r"'((?:[^']|'')*)'", col.column_type)


def widened(old: ColumnInfo, new: ColumnInfo) -> bool:
    """Whether ``new`` holds every value of ``old`` unchanged (same name or not): equal definitions, or a wider
    type of the same kind, as the module docstring lists.

    >>> c = ColumnInfo("v", "varchar", "varchar(10)", True, "utf8mb4", "utf8mb4_general_ci")
    >>> widened(c, replace(c, column_type="varchar(50)")), widened(c, replace(c, column_type="varchar(5)"))
    (True, False)
    >>> i = ColumnInfo("n", "int", "int", True)
    >>> widened(i, replace(i, data_type="bigint", column_type="bigint")), widened(i, replace(i, nullable=False))
    (True, False)
    """
    if replace(new, name=old.name) == old:
        return True
    if (old.nullable and not new.nullable) or old.generated or new.generated:
        return False  # NULLs would have become defaults; generated values follow their expression
    if old.data_type in _INT_ORDER and new.data_type in _INT_ORDER:
        return (old.unsigned == new.unsigned and _INT_ORDER.index(new.data_type) >= _INT_ORDER.index(old.data_type)
                and not old.column_type.lower().startswith("tinyint(1)"))
    if old.charset != new.charset:
        return False  # a conversion between character sets can change or lose characters
    if old.data_type == new.data_type and old.data_type in ("varchar", "char", "varbinary"):
        return (_length(new) or 0) >= (_length(old) or 0)
    for order in (_TEXT_ORDER, _BLOB_ORDER):
        if old.data_type in order and new.data_type in order:
            return order.index(new.data_type) >= order.index(old.data_type)
    if old.data_type == "varchar" and new.data_type in _TEXT_ORDER:
        return True
    if old.data_type == new.data_type == "decimal":
        p0, s0, p1, s1 = (old.numeric_precision or 10, old.numeric_scale or 0, new.numeric_precision or 10,
                          new.numeric_scale or 0)
        return s1 >= s0 and p1 - s1 >= p0 - s0 and old.unsigned == new.unsigned
    if old.data_type == new.data_type and old.data_type in _TEMPORAL:
        return (new.datetime_precision or 0) >= (old.datetime_precision or 0)
    if old.data_type == new.data_type and old.data_type in ("enum", "set"):
        a, b = _members(old), _members(new)
        return b[:len(a)] == a
    return False


@dataclass(frozen=True)
class Verdict:
    """What a DDL statement did to a table: ``same`` (nothing a row shows), ``evolve`` (followed in place;
    ``renamed``: new column name to old), or ``reset`` (snapshot the table again; ``why`` says what forced it)."""

    kind: ChangeKind
    why: str = ""
    renamed: Mapping[str, str] = field(default_factory=dict)


def judge(old: TableSchema, new: TableSchema, statement: str | Sequence[str], null_default: Mapping[str, bool]
          ) -> Verdict:
    """The rule: how a change from ``old`` to ``new`` by ``statement`` (or by statements one after another, each
    :func:`plainly_kept`) is followed. ``null_default`` says, for
    each column of ``new``, whether it is NULL in every row the statement did not write (nullable, default
    NULL, not generated).

    >>> from mysql_cdc.ids import TableId
    >>> id_ = ColumnInfo("id", "int", "int", False)
    >>> v = ColumnInfo("v", "varchar", "varchar(10)", True, "utf8mb4", "utf8mb4_bin")
    >>> old = TableSchema(TableId("d", "t"), (id_, v), ("id",), ("id",))
    >>> added = TableSchema(old.table, (id_, v, ColumnInfo("w", "int", "int", True)), ("id",), ("id",))
    >>> judge(old, added, "ALTER TABLE t ADD w INT", {"id": False, "v": True, "w": True}).kind
    'evolve'
    >>> judge(old, added, "ALTER TABLE t ADD w INT DEFAULT 0", {"id": False, "v": True, "w": False}).why
    "column 'w' was added with a value in existing rows (a default or a generated value)"
    >>> moved = TableSchema(old.table, (id_, replace(v, name="x")), ("id",), ("id",))
    >>> judge(old, moved, "ALTER TABLE t RENAME COLUMN v TO x", {}).renamed
    {'x': 'v'}
    >>> judge(old, old, "CREATE INDEX i ON t (v)", {}).kind
    'same'
    >>> judge(old, moved, "ALTER TABLE t COMMENT = 'a rename this rule cannot read'", {"x": True}).kind
    'reset'
    >>> judge(old, moved, "ALTER TABLE IF EXISTS t RENAME COLUMN v TO x", {"x": True}).renamed
    {'x': 'v'}
    """
    if isinstance(statement, str) and reuses_names(statement, old.column_names):
        return Verdict(RESET, "a column name is reused in one statement (a swap, a column dropped and added again "
                              "under its name), so columns cannot be paired by name")
    texts = [statement] if isinstance(statement, str) else list(statement)
    if any(c.generated for c in (*old.columns, *new.columns)) and any(
            re.search(r"\b(?:MODIFY|CHANGE|ALTER\s+COLUMN|AS|GENERATED)\b", q, re.IGNORECASE) for q in texts):
        return Verdict(RESET, "a generated column may have a new expression, which rewrites its stored values")
    if any(re.search(r"\bAUTO_INCREMENT\b(?!\s*=)", q, re.IGNORECASE) for q in texts):
        return Verdict(RESET, "a column became AUTO_INCREMENT, which can renumber stored values")
    if old == new:
        return Verdict(SAME)
    if old.primary_key != new.primary_key and not (
            set(renamed_columns(statement).values()) & set(old.primary_key)):
        return Verdict(RESET, f"the primary key changed from {list(old.primary_key)!r} to {list(new.primary_key)!r}")
    renamed = {n: o for n, o in renamed_columns(statement).items()
               if n in new.column_names and o in old.column_names and n not in old.column_names}
    if isinstance(statement, str):
        # columns both gone and new: only the statement's own clauses may say which is which (a rename its
        # text was not understood to make would otherwise be taken for a drop and an add, its values lost)
        added, dropped, _ = clause_names(statement)
        new_names = [n for n in new.column_names if n not in old.column_names and n not in renamed]
        gone = [o for o in old.column_names if o not in new.column_names and o not in renamed.values()]
        if new_names and gone and (set(new_names) - set(added) or set(gone) - set(dropped)):
            return Verdict(RESET, f"columns {gone!r} are gone and {new_names!r} are new, and the statement was not "
                                  "read as dropping and adding them")
    was = {c.name: c for c in old.columns}
    for c in new.columns:
        source = renamed.get(c.name, c.name)
        if source in was and (c.name in renamed or source not in renamed.values()):
            if not widened(was[source], c):
                return Verdict(RESET, f"column {c.name!r} changed from {was[source].column_type!r} to "
                                      f"{c.column_type!r}, which can change stored values")
        elif not null_default.get(c.name, False):
            return Verdict(RESET, f"column {c.name!r} was added with a value in existing rows (a default or a "
                                  "generated value)")
    if tuple(renamed.get(k, k) for k in new.primary_key) != old.primary_key:
        return Verdict(RESET, f"the primary key changed from {list(old.primary_key)!r} to {list(new.primary_key)!r}")
    if new.chunk_key != tuple(renamed.get(k, k) for k in old.chunk_key) and \
            tuple(renamed.get(k, k) for k in new.chunk_key) != old.chunk_key:
        return Verdict(RESET, f"the chunk key changed from {list(old.chunk_key)!r} to {list(new.chunk_key)!r}")
    return Verdict(EVOLVE, renamed=renamed)


def evolve_rows(rows: pa.Table, want: pa.Schema, renamed: Mapping[str, str]) -> pa.Table:
    """A mirror's rows moved to the columns ``want``: each column from the one of its name (or the name it was
    renamed from), cast to its new type (a widening, exact), or NULL where it is new; dropped columns go.

    >>> rows = pa.table({"id": pa.array([1, 2], pa.int32()), "v": ["a", "b"], "gone": [0, 0]})
    >>> want = pa.schema([("id", pa.int64()), ("x", pa.string()), ("w", pa.int32())])
    >>> evolve_rows(rows, want, {"x": "v"}).to_pylist()
    [{'id': 1, 'x': 'a', 'w': None}, {'id': 2, 'x': 'b', 'w': None}]
    """
    cols = []
    for f in want:
        src = renamed.get(f.name, f.name)
        if src in rows.column_names:
            cols.append(rows.column(src).cast(f.type))
        else:
            cols.append(pa.nulls(rows.num_rows, f.type))
    return pa.Table.from_arrays(cols, schema=want)
