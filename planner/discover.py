"""Discover the captured tables: match ``db.table`` patterns, read columns, primary keys and chunk keys."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import pymysql

from mysql_cdc.errors import ChunkKeyError, NoTableMatchedError, PrivilegeError, TableError
from mysql_cdc.ids import TableId
from mysql_cdc.schema import ColumnInfo, TableSchema
from mysql_cdc.types import check_columns

SYSTEM_SCHEMAS = ("mysql", "information_schema", "performance_schema", "sys")


def data_tables(conn: Any) -> list[tuple[TableId, str]]:
    """Every table the user can see that holds rows of its own (base tables, and MariaDB's system-versioned
    ones), outside the system schemas, with its TABLE_TYPE in capitals, sorted."""
    cur = conn.cursor()
    cur.execute("SELECT TABLE_SCHEMA, TABLE_NAME, TABLE_TYPE FROM information_schema.TABLES WHERE TABLE_TYPE IN "
                "('BASE TABLE', 'SYSTEM VERSIONED') AND TABLE_SCHEMA NOT IN (%s, %s, %s, %s)", SYSTEM_SCHEMAS)
    rows = sorted((TableId(str(d), str(t)), str(k).upper()) for d, t, k in cur.fetchall())
    cur.close()
    return rows


def match_tables(conn: Any, patterns: Sequence[str], exclude: Sequence[str] = ()) -> list[TableId]:
    """Base tables whose ``db.table`` fully matches one of the regular expressions and none of ``exclude``,
    sorted; a :class:`TableError` if they match a system-versioned one (:func:`versioned_refusal`)."""
    if not patterns:
        raise TableError("no tables given: set tables => 'db.table' (comma-separated regular expressions)")
    rows = data_tables(conn)
    versioned = sorted(t for t, k in rows if k == "SYSTEM VERSIONED" and table_matches(t, patterns, exclude))
    if versioned:
        raise TableError(versioned_refusal(versioned))
    out = sorted(t for t, _ in rows if table_matches(t, patterns, exclude))
    if not out:
        raise NoTableMatchedError(
            f"the table pattern(s) {', '.join(map(repr, patterns))} match no table the capture user can see; "
            "patterns are regular expressions over 'db.table' (e.g. 'shop\\.orders' or 'shop\\..*'), and the "
            "user needs SELECT on the tables")
    return out


def versioned_refusal(tables: Sequence[TableId]) -> str:
    """Why MariaDB's system-versioned tables are not captured, and what to do (they matched silently no pattern
    before 2026-12-02, so a mirror lacked them without a word).

    >>> versioned_refusal([TableId("shop", "prices")])[:60]
    "'shop.prices' is system-versioned (WITH SYSTEM VERSIONING): "
    """
    names = ", ".join(repr(str(t)) for t in tables)
    leave = ",".join(f"{re.escape(t.database)}[.]{re.escape(t.table)}" for t in tables)
    return (f"{names} {'is' if len(tables) == 1 else 'are'} system-versioned (WITH SYSTEM VERSIONING): the binlog "
            "logs a DELETE of such a table as an UPDATE of its rows' hidden end of validity, and an UPDATE with an "
            "INSERT of the row's history, which this capture does not read (its mirror would keep deleted rows); "
            f"leave {'it' if len(tables) == 1 else 'them'} out (add the pattern(s) {leave} to option exclude, "
            "--exclude in the CLI), or drop the versioning (ALTER TABLE ... DROP SYSTEM VERSIONING)")


def table_matches(table: TableId, patterns: Sequence[str], exclude: Sequence[str] = ()) -> bool:
    """Whether ``db.table`` fully matches one of ``patterns`` and none of ``exclude`` (regular expressions).

    >>> t = TableId("shop", "orders_2024")
    >>> table_matches(t, ["shop[.].*"]), table_matches(t, ["shop[.].*"], ["shop[.]orders_.*"])
    (True, False)
    """
    name = f"{table.database}.{table.table}"
    return (any(re.fullmatch(p, name) for p in patterns)
            and not any(re.fullmatch(p, name) for p in exclude))


def table_schema(conn: Any, table: TableId, chunk_key: Sequence[str] = (), allow_pk_override: bool = False
                 ) -> TableSchema:
    """Columns, primary key and chunk key of one table.

    The chunk key is the whole primary key; for a table without one, the configured ``chunk_key`` columns
    (which must exist; they need not be unique, and may be NULL: keys with a NULL form a chunk of their own);
    for a table with neither, no columns: the table is read as one chunk. A ``chunk_key`` given for a table with
    a primary key is an error (it was silently ignored), unless ``allow_pk_override`` (a pattern over many
    tables, where it is meant for those without one). Tables without a primary key are read at exact points
    of the binlog and their rows are identified by all their columns (see ``udtf/snapshot.py``).
    """
    cur = conn.cursor()
    cur.execute("SELECT TABLE_TYPE FROM information_schema.TABLES WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s",
                (table.database, table.table))
    kind = cur.fetchone()
    if kind is not None and str(kind[0]).upper() == "SYSTEM VERSIONED":
        cur.close()
        raise TableError(versioned_refusal([table]))
    if kind is not None and str(kind[0]).upper() != "BASE TABLE":
        cur.close()
        raise TableError(f"{str(table)!r} is a {str(kind[0]).lower()}, not a base table: the binlog logs the changes "
                         "of base tables only, so its changes could never be read after the snapshot; capture the "
                         "base tables it selects from instead")
    cur.execute(
        "SELECT COLUMN_NAME, DATA_TYPE, COLUMN_TYPE, IS_NULLABLE, CHARACTER_SET_NAME, COLLATION_NAME, "
        "NUMERIC_PRECISION, NUMERIC_SCALE, DATETIME_PRECISION, EXTRA "
        "FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s ORDER BY ORDINAL_POSITION",
        (table.database, table.table))
    cols = []
    for name, dtype, ctype, nullable, cs, coll, prec, scale, dprec, extra in cur.fetchall():
        cols.append(ColumnInfo(
            name=str(name), data_type=str(dtype).lower(), column_type=str(ctype),
            nullable=str(nullable).upper() == "YES", charset=cs, collation=coll,
            numeric_precision=None if prec is None else int(prec),
            numeric_scale=None if scale is None else int(scale),
            datetime_precision=None if dprec is None else int(dprec),
            generated="GENERATED" in str(extra or "").upper()))
    if not cols:
        raise TableError(f"table {str(table)!r} does not exist or the capture user cannot see its columns")
    cur.execute(
        "SELECT COLUMN_NAME FROM information_schema.STATISTICS WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s "
        "AND INDEX_NAME = 'PRIMARY' ORDER BY SEQ_IN_INDEX", (table.database, table.table))
    pk = tuple(str(r[0]) for r in cur.fetchall())
    try:
        # every column: with SELECT granted on some columns only, information_schema shows just those, and the
        # capture would silently lack the others
        cur.execute(f"SELECT * FROM {table.quoted()} LIMIT 0")
        cur.fetchall()
    except pymysql.err.MySQLError as e:
        if e.args and e.args[0] in (1142, 1143, 1044):
            what = "every column of" if e.args[0] == 1143 else "from"
            raise PrivilegeError(f"the capture user may not SELECT {what} {str(table)!r} (server error "
                                 f"{e.args[0]}): GRANT SELECT ON {table.quoted()} TO the user") from None
        raise
    finally:
        cur.close()
    by_name = {c.name: c for c in cols}
    if pk:
        key = pk
        if chunk_key and tuple(chunk_key) != pk and not allow_pk_override:
            raise ChunkKeyError(f"table {str(table)!r} has a primary key ({', '.join(pk)}), which splits it; "
                                f"chunk_key {', '.join(chunk_key)!r} is for tables without one: drop the option")
    elif chunk_key:
        key = tuple(chunk_key)
        for k in key:
            if k not in by_name:
                raise ChunkKeyError(f"chunk key column {k!r} is not a column of {str(table)!r}; columns are "
                                    f"{', '.join(by_name)}")
    else:
        key = ()  # no key at all: one chunk, every row
    schema = TableSchema(table=table, columns=tuple(cols), primary_key=pk, chunk_key=key)
    check_columns(schema)
    return schema


def null_defaults(conn: Any, table: TableId) -> dict[str, bool]:
    """For each column of the table: whether a row that does not write it holds NULL there (nullable, default
    NULL, not generated). MySQL shows a NULL default as NULL, MariaDB as the text ``NULL``; an expression default
    (MySQL's ``DEFAULT_GENERATED``, MariaDB's text) or a generated column is not NULL."""
    cur = conn.cursor()
    try:
        cur.execute("SELECT VERSION()")
        mariadb = "mariadb" in str(cur.fetchone()[0]).lower()  # MySQL shows the text default 'NULL' as NULL
        cur.execute("SELECT COLUMN_NAME, IS_NULLABLE, COLUMN_DEFAULT, EXTRA FROM information_schema.COLUMNS "
                    "WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s", (table.database, table.table))
        return {str(name): str(nullable).upper() == "YES" and (default is None or (mariadb and str(default) == "NULL"))
                and "GENERATED" not in str(extra or "").upper()
                for name, nullable, default, extra in cur.fetchall()}
    finally:
        cur.close()

