"""How a Delta mirror written by Spark follows a schema change in place: one ``ALTER TABLE`` (one Delta commit,
no data file rewritten), or ``None`` where one statement cannot do it and the table is rewritten instead.

Pure rule (no pyspark). It reads the schema update that :mod:`.iceberg_evolve` computes for the same change
(renames, drops, additions, promotions, the order), and keeps the changes one Delta statement makes:

- columns added, at the end (``ADD COLUMNS``): Delta adds them to the schema, the rows there are read as NULL;
- one column renamed (``RENAME COLUMN``) or columns dropped (``DROP COLUMNS``): these need Delta's column mapping
  (``delta.columnMapping.mode = name``, reader 2 / writer 5), which the table is given first, in a commit of
  its own that changes no column (a kill between the two leaves a schema the capture recorded).

Not in place, so rewritten: a type change (Delta widens types only with its type-widening table feature, which
delta-rs and older readers lack), an added column anywhere but at the end, and a change that needs two of those
statements (``ALTER TABLE t ADD a, DROP b``): two commits would leave, after a kill between them, columns no
recorded schema had. A table with column mapping is written by Spark's Delta alone: delta-rs (1.x) does not write
one, and its writer refuses such a table (:class:`.mirror.DeltaMirror`).

>>> from mysql_cdc.udtf.sync.iceberg_evolve import schema_update
>>> have = [("id", "int", False), ("v", "int", True)]
>>> delta_alter(schema_update(have, [*have, ("n", "string", True)], {}, ["id"]), have)
DeltaAlter(kind='add', columns=(('n', 'string'),))
>>> delta_alter(schema_update(have, [("id", "int", False), ("w", "int", True)], {"w": "v"}, ["id"]), have)
DeltaAlter(kind='rename', columns=(('v', 'w'),))
>>> delta_alter(schema_update(have, [("id", "int", False)], {}, ["id"]), have)
DeltaAlter(kind='drop', columns=(('v', ''),))
>>> delta_alter(schema_update(have, [("id", "bigint", False), ("v", "int", True)], {}, ["id"]), have) is None
True
>>> delta_alter(schema_update(have, [("id", "int", False), ("n", "int", True), ("v", "int", True)], {}, ["id"]),
...             have) is None  # added in the middle
True
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from mysql_cdc.udtf.sync.iceberg_evolve import Column, SchemaUpdate

AlterKind = Literal["add", "rename", "drop"]
COLUMN_MAPPING = {"delta.columnMapping.mode": "name", "delta.minReaderVersion": "2", "delta.minWriterVersion": "5"}


@dataclass(frozen=True)
class DeltaAlter:
    """One ``ALTER TABLE``: ``add`` (name, Spark type text), ``rename`` (current name, new name), ``drop``
    (name, '')."""

    kind: AlterKind
    columns: tuple[tuple[str, str], ...]

    @property
    def needs_mapping(self) -> bool:
        """Whether the statement needs the table's column mapping (renames and drops do)."""
        return self.kind != "add"


def delta_alter(update: SchemaUpdate | None, have: Sequence[Column]) -> DeltaAlter | None:
    """The one statement that makes ``update`` on a table with columns ``have``, or ``None`` (module docstring)."""
    if update is None or update.promotions:
        return None
    names = [n for n, _, _ in have]
    kinds = [k for k, todo in (("add", update.adds), ("rename", update.renames), ("drop", update.drops)) if todo]
    if len(kinds) != 1:
        return None
    if update.adds and list(update.order) == [*names, *(n for n, _ in update.adds)]:
        return DeltaAlter("add", tuple(update.adds))
    if len(update.renames) == 1 and list(update.order) == names:
        return DeltaAlter("rename", tuple(update.renames))
    if update.drops and list(update.order) == [n for n in names if n not in update.drops]:
        return DeltaAlter("drop", tuple((n, "") for n in update.drops))
    return None
