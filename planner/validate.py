"""Check the server before any row is read: version, binlog settings, privileges (docs/DESIGN.md, contract C6).

Each failure is one :class:`ServerSettingError` or :class:`PrivilegeError` naming the setting, its value and
the fix.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import pymysql

from mysql_cdc.connect import ServerFacts
from mysql_cdc.errors import LOCK_REFUSED, PrivilegeError, ServerSettingError, TableError, lock_refused
from mysql_cdc.ids import TableId, quote_ident
from mysql_cdc.planner.hidden import SelectGrants, unseen_reach
from mysql_cdc.schema import TableSchema

MIN_VERSION = {"mysql": (8, 0, 0), "mariadb": (10, 5, 0)}

_REQUIRED = (
    # variable, required value, fix
    ("log_bin", "ON", "start the server with log-bin (binary logging) enabled"),
    ("binlog_format", "ROW", "set binlog_format=ROW (SET GLOBAL binlog_format='ROW' and in the server config)"),
    ("binlog_row_image", "FULL", "set binlog_row_image=FULL so updates and deletes carry every column"),
    ("binlog_row_metadata", "FULL", "set binlog_row_metadata=FULL so row events carry column names and types"),
)


def check_server(facts: ServerFacts) -> None:
    """Raise on the first setting change data capture cannot work with."""
    low = MIN_VERSION[facts.flavor]
    if facts.version < low:
        name = "MariaDB" if facts.flavor == "mariadb" else "MySQL"
        raise ServerSettingError(
            f"server version {facts.version_text!r} is too old: {name} >= {'.'.join(map(str, low))} is needed "
            "(binlog_row_metadata and exact watermarks); upgrade the server")
    for var, want, fix in _REQUIRED:
        got = facts.variables.get(var)
        if (got or "").upper() not in (want, "1" if want == "ON" else want):
            raise ServerSettingError(f"server setting {var} is {got!r}, but change data capture needs {want!r}: "
                                     f"{fix}")
    for var in ("binlog_transaction_compression", "log_bin_compress"):  # MySQL's, MariaDB's
        if (facts.variables.get(var) or "OFF").upper() in ("ON", "1"):
            raise ServerSettingError(f"server setting {var} is 'ON': compressed binlog events cannot be read "
                                     f"(python-mysql-replication), their changes would be lost; SET GLOBAL {var} "
                                     "= OFF (and in the server config)")
    options = facts.variables.get("binlog_row_value_options") or ""
    if "PARTIAL_JSON" in options.upper():
        raise ServerSettingError(f"server setting binlog_row_value_options is {options!r}: with PARTIAL_JSON an "
                                 "update logs only the changed part of a JSON value, not the new value; SET GLOBAL "
                                 "binlog_row_value_options = '' (and in the server config)")


def _grants(conn: Any) -> list[str]:
    cur = conn.cursor()
    cur.execute("SHOW GRANTS")
    rows = [str(r[0]) for r in cur.fetchall()]
    cur.close()
    return rows


def check_privileges(conn: Any, facts: ServerFacts) -> None:
    """REPLICATION CLIENT (read the binlog position) and REPLICATION SLAVE (read the binlog) are global
    privileges; SELECT is checked per table during discovery, where a missing grant names the table."""
    cur = conn.cursor()
    try:
        cur.execute(facts.status_sql)
        cur.fetchall()
    except pymysql.err.MySQLError as e:
        if e.args and e.args[0] in (1227, 1142, 1044):
            need = "BINLOG MONITOR (REPLICATION CLIENT)" if facts.flavor == "mariadb" else "REPLICATION CLIENT"
            raise PrivilegeError(f"the capture user cannot run {facts.status_sql!r} (server error {e.args[0]}): "
                                 f"GRANT {need} ON *.* TO the user") from None
        raise
    finally:
        cur.close()
    grants = " ".join(_grants(conn)).upper()
    # not MariaDB's REPLICATION SLAVE ADMIN / REPLICA ADMIN, which administer replicas and cannot read the binlog
    if not re.search(r"ALL PRIVILEGES ON \*\.\*|REPLICATION (SLAVE|REPLICA)\b(?!\s+ADMIN)", grants):
        raise PrivilegeError("the capture user lacks REPLICATION SLAVE, needed to read the binlog: "
                             "GRANT REPLICATION SLAVE ON *.* TO the user")
    if not re.search(r"(ALL PRIVILEGES|SELECT)( \([^)]*\))?[ ,A-Z]*ON ", grants):
        raise PrivilegeError("the capture user has no SELECT privilege: GRANT SELECT ON <db>.* TO the user")


def check_unseen(conn: Any, patterns: Sequence[str], exclude: Sequence[str]) -> None:
    """Refuse patterns that may match tables the capture user cannot see (:mod:`planner.hidden`): their changes
    would pass through the binlog unread."""
    grants = SelectGrants.from_show_grants(_grants(conn))
    if grants.everywhere or grants.roles or not grants.tables:
        return
    cur = conn.cursor()
    try:
        cur.execute("SELECT TABLE_SCHEMA, TABLE_NAME FROM information_schema.TABLES")
        visible = [TableId(str(d), str(t)) for d, t in cur.fetchall()]
        cur.execute("SELECT CURRENT_USER()")
        user = str(cur.fetchone()[0])
    finally:
        cur.close()
    found = unseen_reach(patterns, exclude, grants, visible)
    if found is None:
        return
    db, pattern, name = found
    granted = sorted(t.table for t in grants.tables if t.database == db)
    what = (f"names {name!r}, which the user cannot see (or which does not exist)" if name is not None
            else f"may match tables of {db!r} the user cannot see")
    raise PrivilegeError(
        f"user {user!r} may SELECT only some tables of database {db!r} ({', '.join(granted)}), and the pattern "
        f"{pattern!r} {what}: such a table is left out of the capture while its changes pass through the binlog "
        f"unread. GRANT SELECT ON {quote_ident(db)}.* TO the user, or name only the granted tables in the "
        f"pattern (e.g. '{re.escape(db)}[.]({'|'.join(re.escape(t) for t in granted)})')")


def check_lock_privilege(conn: Any, schema: TableSchema) -> None:
    """A table without a primary key is read at exact binlog points under a brief ``LOCK TABLES ... READ``
    (``udtf/snapshot.py``): try the lock now, before any row is read, so a missing grant is one clear error.
    A lock not granted within a second (a transaction holds the table) shows the privilege is there."""
    if schema.primary_key:
        return
    cur = conn.cursor()
    try:
        cur.execute("SELECT @@SESSION.lock_wait_timeout")
        before = int(cur.fetchone()[0])
        cur.execute("SET SESSION lock_wait_timeout = 1")
        try:
            cur.execute(f"LOCK TABLES {schema.table.quoted()} READ")
        except pymysql.err.MySQLError as e:
            code = e.args[0] if e.args else None
            if code in LOCK_REFUSED:
                raise lock_refused(str(schema.table), quote_ident(schema.table.database), code) from None
            if code != 1205:
                raise
        finally:
            cur.execute("UNLOCK TABLES")
            cur.execute(f"SET SESSION lock_wait_timeout = {before}")
    finally:
        cur.close()


def check_cascades(conn: Any, facts: ServerFacts, tables: list[TableId], allowed: bool) -> None:
    """MariaDB does not log the rows a foreign key's ON DELETE / ON UPDATE CASCADE or SET NULL / SET DEFAULT
    changes (measured on 10.11: deleting 10 parents cascaded to 139 child rows, none in the binlog), so a
    captured child table would silently keep rows its source lost. Refused unless ``allowed``; MySQL logs the
    cascaded rows and needs no check."""
    if facts.flavor != "mariadb" or allowed or not tables:
        return
    # information_schema.REFERENTIAL_CONSTRAINTS shows a user with SELECT nothing on MariaDB 10.11: the rules
    # are read from SHOW CREATE TABLE instead
    cur = conn.cursor()
    try:
        found = []
        for t in tables:
            cur.execute(f"SHOW CREATE TABLE {t.quoted()}")
            found += [(t, *fk) for fk in cascading_foreign_keys(str(cur.fetchone()[1]))]
    finally:
        cur.close()
    if found:
        t, name, parent, rules = found[0]
        more = f" (and {len(found) - 1} more)" if len(found) > 1 else ""
        raise TableError(
            f"table {str(t)!r} has foreign key {name!r} to {parent!r} with {rules}{more}: "
            "MariaDB does not write the rows a cascade changes to the binlog, so those changes could never be "
            "delivered and a mirror would keep rows the source no longer has. Change the foreign key to RESTRICT "
            "or NO ACTION (and delete children explicitly), leave the table out, or set "
            "allow_unlogged_cascades => true (the CLI's --allow-unlogged-cascades) to capture it knowing cascaded "
            "changes are missing; a snapshot alone (no binlog read) is not refused")


_FK = re.compile(r"CONSTRAINT `((?:[^`]|``)+)` FOREIGN KEY \(.*?\) REFERENCES ((?:`(?:[^`]|``)+`\.)?`(?:[^`]|``)+`) "
                 r"\(.*?\)(.*)$", re.MULTILINE)
_RULE = re.compile(r"ON (DELETE|UPDATE) (CASCADE|SET NULL|SET DEFAULT)")


def cascading_foreign_keys(create_table: str) -> list[tuple[str, str, str]]:
    r"""(constraint, referenced table, rules) of each foreign key in a ``SHOW CREATE TABLE`` text whose rules
    change the table's rows: CASCADE, SET NULL or SET DEFAULT.

    >>> cascading_foreign_keys("CREATE TABLE `c` (\n  `p` int,\n  CONSTRAINT `fk` FOREIGN KEY (`p`) "
    ...                        "REFERENCES `parent` (`id`) ON DELETE CASCADE\n)")
    [('fk', 'parent', 'ON DELETE CASCADE')]
    >>> cascading_foreign_keys("  CONSTRAINT `x` FOREIGN KEY (`p`) REFERENCES `parent` (`id`)")
    []
    """
    out = []
    for name, parent, tail in _FK.findall(create_table):
        rules = [" ".join(("ON", *m)) for m in _RULE.findall(tail)]
        if rules:
            out.append((name.replace("``", "`"), parent.replace("`.`", ".").strip("`").replace("``", "`"),
                        " ".join(rules)))
    return out
