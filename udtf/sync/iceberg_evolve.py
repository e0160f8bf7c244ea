"""How an Iceberg mirror follows a schema change in place: one schema update (a single Iceberg commit, no data
file rewritten) that takes the table's columns to the capture's new ones, or ``None`` where Iceberg cannot.

Pure rule (no pyspark). Columns are ``(name, Spark type text, nullable)``; ``renamed`` maps a new column name to
the mirror's current name of it (``mirror.mirror_renames``); ``key`` is the new primary key. The update, as
``evolve_rows`` moves a Delta mirror's rows: each wanted column comes from the column of its name (or the one
it was renamed from), its type promoted where it widens; a column no longer wanted is dropped; a new one is
added (NULL in the rows there are); the order is the wanted one; the identifier fields are the key.

What Iceberg cannot do in place, so the table is rewritten instead (:class:`.spark_mirror.SparkIcebergMirror`):
a type change other than Iceberg's promotions (``int`` to ``bigint``, ``float`` to ``double``, a DECIMAL's
precision raised at the same scale), a key column that is new or was nullable (Iceberg makes no optional
column required), and a new or renamed column that takes a name the table has (one update cannot free a name
and reuse it).

>>> have = [("id", "int", False), ("v", "int", True), ("old", "string", True)]
>>> want = [("id", "bigint", False), ("w", "int", True), ("n", "decimal(12,2)", True)]
>>> schema_update(have, want, {"w": "v"}, ["id"])  # doctest: +NORMALIZE_WHITESPACE
SchemaUpdate(renames=(('v', 'w'),), drops=('old',), adds=(('n', 'decimal(12,2)'),), promotions=(('id', 'bigint'),),
             order=('id', 'v', 'n'), identifier=('id',))
>>> schema_update(have, [("id", "string", False)], {}, ["id"]) is None  # int to string: not in place
True
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

Column = tuple[str, str, bool]  # name, Spark type text (simpleString), nullable
_DECIMAL = re.compile(r"decimal\((\d+),(\d+)\)")


@dataclass(frozen=True)
class SchemaUpdate:
    """One Iceberg schema update. Names in ``drops``, ``promotions`` and ``order`` are the table's current ones
    (an added column's own name), as Iceberg's update resolves them; ``identifier`` holds the new names."""

    renames: tuple[tuple[str, str], ...]  # current name, new name
    drops: tuple[str, ...]
    adds: tuple[tuple[str, str], ...]  # name, Spark type text
    promotions: tuple[tuple[str, str], ...]  # current name, new Spark type text
    order: tuple[str, ...]
    identifier: tuple[str, ...]


def promotes(have: str, want: str) -> bool:
    """Whether Iceberg widens a column of type ``have`` to ``want`` in place (or they are the same).

    >>> promotes("int", "bigint"), promotes("decimal(10,2)", "decimal(20,2)"), promotes("bigint", "int")
    (True, True, False)
    >>> promotes("decimal(10,2)", "decimal(20,3)"), promotes("float", "double"), promotes("date", "timestamp")
    (False, True, False)
    """
    if have == want or (have, want) in (("int", "bigint"), ("float", "double")):
        return True
    a, b = _DECIMAL.fullmatch(have), _DECIMAL.fullmatch(want)
    return bool(a and b and a.group(2) == b.group(2) and int(b.group(1)) >= int(a.group(1)))


def schema_update(have: Sequence[Column], want: Sequence[Column], renamed: Mapping[str, str],
                  key: Sequence[str]) -> SchemaUpdate | None:
    """The update taking ``have`` to ``want`` in place, or ``None`` where Iceberg cannot (module docstring)."""
    current = {name: (t, nullable) for name, t, nullable in have}
    renames, adds, promotions, order, used = [], [], [], [], set()
    for name, t, _ in want:
        src = renamed.get(name, name)
        if src in current and src not in used:
            used.add(src)
            old_type, nullable = current[src]
            if not promotes(old_type, t) or (name in key and nullable) or (src != name and name in current):
                return None
            if src != name:
                renames.append((src, name))
            if old_type != t:
                promotions.append((src, t))
            order.append(src)
        else:
            if name in key or name in current:  # a new key column; a name the table still uses
                return None
            adds.append((name, t))
            order.append(name)
    drops = tuple(n for n, _, _ in have if n not in used)
    return SchemaUpdate(tuple(renames), drops, tuple(adds), tuple(promotions), tuple(order), tuple(key))
