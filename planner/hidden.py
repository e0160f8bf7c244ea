"""Tables a pattern may match that the capture user cannot see, found before data moves.

The tables a capture takes are those ``information_schema.TABLES`` shows the user. A user granted SELECT on
some tables of a database only does not see the others: a pattern over that database leaves them out without a
word, while their changes pass through the binlog unread. So a capture is refused when its patterns may reach
such a table: a database where the user's SELECT is granted table by table (``SHOW GRANTS``), and a pattern
that names a table of it the user cannot see, or may match names there beyond the granted ones.

A pattern of fixed names (``shop[.](orders|items)``) is checked name by name; any other pattern (``shop[.].*``)
is taken to reach every database its fixed start allows (``shop.``; a pattern starting with ``.*`` reaches all).
Privileges that come through roles are not listed by ``SHOW GRANTS``: a user with roles is not checked.

>>> g = SelectGrants.from_show_grants([
...     "GRANT USAGE ON *.* TO `cdc`@`%`",
...     "GRANT SELECT ON `shop`.`orders` TO `cdc`@`%`", "GRANT SELECT ON `shop`.`items` TO `cdc`@`%`",
...     "GRANT SELECT ON `crm`.* TO `cdc`@`%`"])
>>> visible = [TableId("shop", "orders"), TableId("shop", "items"), TableId("crm", "leads")]
>>> unseen_reach(["shop[.](orders|items)", "crm[.].*"], [], g, visible) is None
True
>>> unseen_reach(["shop[.].*"], [], g, visible)
('shop', 'shop[.].*', None)
>>> unseen_reach(["shop[.](orders|refunds)"], [], g, visible)
('shop', 'shop[.](orders|refunds)', 'shop.refunds')
>>> unseen_reach(["shop[.].*"], ["shop[.].*"], g, visible) is None  # all of it excluded
True
>>> g = SelectGrants.from_show_grants(["GRANT SELECT ON `my shop`.`or ders` TO `cdc`@`%`",
...                                    "GRANT `r1`@`%`,`r2`@`%` TO `cdc`@`%`"])
>>> sorted(g.tables), g.roles
([TableId(database='my shop', table='or ders')], True)
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Sequence
from dataclasses import dataclass

from mysql_cdc.ids import TableId

try:  # the regular expression parser of the standard library (named sre_parse before Python 3.11)
    import re._parser as _sre
except ImportError:  # pragma: no cover - older Pythons
    import sre_parse as _sre

_GRANT = re.compile(r"^GRANT (?P<privs>.+?) ON (?P<on>(?:`(?:[^`]|``)*`|[^\s`])+) TO ", re.IGNORECASE)
_IDENT = r"`((?:[^`]|``)+)`"
_ON_TABLE = re.compile(rf"^{_IDENT}\.{_IDENT}$")
_ON_DB = re.compile(rf"^{_IDENT}\.\*$")
_ROLE = re.compile(r"^GRANT (?!.* ON ).+ TO ", re.IGNORECASE)  # roles granted (one or a list): no ON clause
MAX_NAMES = 1000  # a pattern of fixed names with more than this many is taken as an open one


@dataclass(frozen=True)
class SelectGrants:
    """Where the user may SELECT, from ``SHOW GRANTS``: everywhere (``*.*``), whole databases (LIKE patterns,
    as the server matches a database grant), some tables only; and whether roles add privileges unlisted."""

    everywhere: bool
    databases: tuple[str, ...]
    tables: frozenset[TableId]
    roles: bool

    @classmethod
    def from_show_grants(cls, lines: Sequence[str]) -> SelectGrants:
        everywhere = False
        databases: list[str] = []
        tables: set[TableId] = set()
        for line in lines:
            m = _GRANT.match(line)
            if m is None:
                continue
            privs = m.group("privs").upper()
            if not re.search(r"\b(SELECT|ALL PRIVILEGES|ALL)\b", privs):
                continue
            on = m.group("on")
            if on == "*.*":
                everywhere = True
            elif (db := _ON_DB.match(on)) is not None:
                databases.append(db.group(1).replace("``", "`"))
            elif (tb := _ON_TABLE.match(on)) is not None:
                tables.add(TableId(tb.group(1).replace("``", "`"), tb.group(2).replace("``", "`")))
        roles = any(_ROLE.match(line) for line in lines)
        return cls(everywhere, tuple(databases), frozenset(tables), roles)

    def whole(self, database: str) -> bool:
        """Whether the user may SELECT every table of ``database`` (a grant on ``*.*`` or on it)."""
        return self.everywhere or any(_like(p, database) for p in self.databases)


def _like(pattern: str, name: str) -> bool:
    """A database grant's name as the server matches it (``%`` and ``_`` are wildcards, ``\\_`` a ``_``)."""
    rx = "".join(".*" if ch == "%" else "." if ch == "_" else re.escape(ch)
                 for ch in re.findall(r"\\.|.", pattern, re.S))
    rx = re.sub(r"\\\\(.)", r"\1", rx)
    return re.fullmatch(rx, name, re.S) is not None


def fixed_names(pattern: str) -> set[str] | None:
    """The names a pattern of fixed names matches (literals, ``[.]``, groups, alternatives), or ``None`` for
    an open one.

    >>> sorted(fixed_names(r"shop[.](orders|items)_v[12]")), fixed_names("shop[.].*")
    (['shop.items_v1', 'shop.items_v2', 'shop.orders_v1', 'shop.orders_v2'], None)
    """
    try:
        return _names(list(_sre.parse(pattern)))
    except (re.error, _Open):
        return None


class _Open(Exception):
    pass


def _names(items: list[tuple[object, object]]) -> set[str]:
    out = {""}
    for op, arg in items:
        name = str(op)
        if name == "LITERAL":
            part = {chr(int(arg))}  # type: ignore[call-overload]
        elif name == "IN" and all(str(o) == "LITERAL" for o, _ in arg):  # type: ignore[attr-defined]
            part = {chr(int(a)) for _, a in arg}  # type: ignore[attr-defined]
        elif name == "SUBPATTERN":
            part = _names(list(arg[-1]))  # type: ignore[index]
        elif name == "BRANCH":
            part = set().union(*(_names(list(b)) for b in arg[1]))  # type: ignore[index]
        elif name == "AT":
            continue
        else:
            raise _Open
        out = {a + b for a, b in itertools.product(out, part)}
        if len(out) > MAX_NAMES:
            raise _Open
    return out


def fixed_start(pattern: str) -> str:
    """The literal text every name the pattern matches starts with.

    >>> fixed_start("shop[.]orders_.*"), fixed_start(".*[.]orders")
    ('shop.orders_', '')
    """
    out = []
    try:
        for op, arg in _sre.parse(pattern):
            if str(op) != "LITERAL":
                break
            out.append(chr(int(arg)))
    except re.error:
        return ""
    return "".join(out)


def unseen_reach(patterns: Sequence[str], exclude: Sequence[str], grants: SelectGrants,
                 visible: Sequence[TableId]) -> tuple[str, str, str | None] | None:
    """The first (database, pattern, name) where ``patterns`` may reach a table the user cannot see (``name``:
    a fixed name the user does not see, ``None``: an open pattern over a database granted table by table), or
    ``None`` when they cannot."""
    if grants.everywhere or grants.roles:
        return None
    seen = {f"{t.database}.{t.table}" for t in visible}
    partial = sorted({t.database for t in grants.tables} - {d for d in {t.database for t in grants.tables}
                                                             if grants.whole(d)})
    for db in partial:
        for p in patterns:
            names = fixed_names(p)
            if names is not None:
                hidden = sorted(n for n in names if n.startswith(db + ".") and n not in seen
                                and not any(re.fullmatch(x, n) for x in exclude))
                if hidden:
                    return db, p, hidden[0]
                continue
            start = fixed_start(p)
            if not ((db + ".").startswith(start) or start.startswith(db + ".")):
                continue
            if any(_whole_database(x, db) for x in exclude):
                continue
            return db, p, None
    return None


def _whole_database(pattern: str, db: str) -> bool:
    """Whether ``pattern`` is ``<db>.`` and then anything (``shop[.].*``): every table of the database."""
    try:
        items = list(_sre.parse(pattern))
    except re.error:
        return False
    n = len(db) + 1
    if len(items) != n + 1 or fixed_start(pattern) != db + ".":
        return False
    op, arg = items[-1]
    return str(op) == "MAX_REPEAT" and arg[0] == 0 and [str(o) for o, _ in arg[2]] == ["ANY"]
