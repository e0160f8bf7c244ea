"""What a statement's text says: one reader for DDL and for the statements the binlog logs as SQL text.

Pure: no driver. A statement is read as the server runs it (:func:`executed_text`: versioned comments by the
server's version), its leading comments and MariaDB's ``SET STATEMENT ... FOR`` skipped; identifiers are read
with one pattern (quoted in backticks, or bare: ASCII letters, digits, ``$``, ``_`` and any character from
U+0080 to U+FFFF) and unquoted one way (:func:`unquote`). :func:`read_statement` gives a typed
:class:`Statement`; the functions below are its parts, each with a worked example:

- what kind it is: transaction control, account or server administration, DDL, or a write of rows
  (:func:`writes_rows`);
- which tables it names, creates, drops, or replaces (:func:`named_tables`, :func:`created_tables`,
  :func:`dropped_tables`, :func:`replacing_statement`), and which captured ones it may change
  (:func:`ddl_tables`, :func:`statement_dml_tables`);
- an ALTER TABLE's clauses, typed (:func:`alter_clauses`): the columns it adds, drops and renames
  (:func:`clause_names`, :func:`renamed_columns`), and whether it plainly keeps every stored value
  (:func:`plainly_kept`).

What a statement *did* to a table is judged from the table's schema before and after it
(:mod:`mysql_cdc.udtf.schema.evolve`); this module only reads text.

>>> st = read_statement("/*!40000 ALTER TABLE `shop`.t ADD c INT, RENAME COLUMN a TO b */", "shop", "mysql", (9, 7, 0))
>>> st.kind, st.verb, st.renamed, [c.kind for c in st.clauses]
('ddl', 'ALTER', {'b': 'a'}, ['add', 'rename'])
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Literal

from mysql_cdc.errors import ServerSettingError
from mysql_cdc.ids import TableId

# a name as a statement writes it: quoted in backticks (a backtick doubled), or unquoted (ASCII letters, digits,
# $ and _, and any character U+0080 .. U+FFFF); not a capturing group: wrap it in one where it is read
_IDENT = r"(?:`(?:[^`]|``)+`|[A-Za-z0-9_$\u0080-\uffff]+)"


def unquote(identifier: str) -> str:
    """A name as written in a statement, without its backticks.

    >>> unquote("`a``b`"), unquote("plain")
    ('a`b', 'plain')
    """
    return identifier[1:-1].replace("``", "`") if identifier.startswith("`") else identifier


# what may stand before a statement's verb: comments of each kind (/* */, -- and # to the line end) and
# MariaDB's SET STATEMENT var=value[, ...] FOR
_LEAD = r"^(?:\s+|/\*.*?\*/|--[^\n]*(?:\n|$)|#[^\n]*(?:\n|$)|SET\s+STATEMENT\s.*?\sFOR\b)*"


_DDL = re.compile(_LEAD + r"(ALTER|DROP|RENAME|TRUNCATE|CREATE)\b", re.IGNORECASE | re.DOTALL)


# CREATE [TEMPORARY] TABLE (not CREATE OR REPLACE, which drops first): no existing table changes. A captured
# table created inside the read range did not exist before it (its DROP would have stopped the read), so its
# rows from here on have the shape they had at the start position, as every row before a DDL does.
_CREATE_TABLE = re.compile(_LEAD + r"CREATE\s+(?:TEMPORARY\s+)?TABLE\b", re.IGNORECASE | re.DOTALL)


_DML = re.compile(_LEAD + r"(?:WITH\b.*?\b)?(INSERT|REPLACE|UPDATE|DELETE|LOAD\s+(?:DATA|XML))\b",
                  re.IGNORECASE | re.DOTALL)


# the one table an INSERT / REPLACE / LOAD writes (UPDATE and DELETE may write several: every named table counts)
_INSERT_TARGET = re.compile(
    r"(?:INSERT|REPLACE)(?:\s+(?:LOW_PRIORITY|DELAYED|HIGH_PRIORITY|IGNORE))*(?:\s+INTO)?\s+"
    r"|LOAD\s+(?:DATA|XML)\b.*?\bINTO\s+TABLE\s+", re.IGNORECASE | re.DOTALL)


# a table name, ``name`` or ``db.name``


_NAME = re.compile(rf"({_IDENT})(?:\s*\.\s*({_IDENT}))?")


def named_tables(statement: str, default_db: str) -> list[TableId]:
    """Every name a statement could mean as a table, qualified by ``default_db`` when it is not (a superset:
    column names and keywords come too, which a caller matches against the tables it knows).

    >>> [str(t) for t in named_tables("RENAME TABLE `old` TO shop.`new`", "d")]
    ['d.RENAME', 'd.TABLE', 'd.old', 'd.TO', 'shop.new']
    """
    out: list[TableId] = []
    for m in _NAME.finditer(statement):
        parts = [unquote(p) for p in m.groups() if p is not None]
        out.append(TableId(parts[0], parts[1]) if len(parts) == 2 else TableId(default_db or "", parts[0]))
    return out


_RENAMED_TO = re.compile(rf"\bTO\s+({_IDENT}(?:\s*\.\s*{_IDENT})?)", re.IGNORECASE)


_ALTER_RENAME = re.compile(rf"\bRENAME\s+(?:TO\s+|AS\s+)?(?!(?:COLUMN|INDEX|KEY)\b)({_IDENT}(?:\s*\.\s*{_IDENT})?)",
                           re.IGNORECASE)


_CREATE_ANY = re.compile(_LEAD + rf"CREATE\s+(?:OR\s+REPLACE\s+)?(?:TEMPORARY\s+)?TABLE\s+(?:IF\s+NOT\s+EXISTS\s+)?"
                         rf"({_IDENT}(?:\s*\.\s*{_IDENT})?)", re.IGNORECASE | re.DOTALL)


_RENAME_TABLE = re.compile(_LEAD + r"RENAME\s+TABLES?\b", re.IGNORECASE | re.DOTALL)


_ALTER_TABLE = re.compile(_LEAD + r"ALTER\s+(?:ONLINE\s+|IGNORE\s+)*TABLE\b", re.IGNORECASE | re.DOTALL)


def created_tables(statement: str, default_db: str) -> list[TableId]:
    """Tables a DDL statement makes under their name: CREATE [OR REPLACE] TABLE t, RENAME TABLE a TO t[, ...],
    ALTER TABLE a RENAME [TO|AS] t.

    >>> [str(t) for t in created_tables("RENAME TABLE a TO `b`, c TO d.e", "s")]
    ['s.b', 'd.e']
    >>> [str(t) for t in created_tables("ALTER TABLE a RENAME AS b", "s")], created_tables("DROP TABLE t", "s")
    (['s.b'], [])
    >>> created_tables("ALTER TABLE a RENAME COLUMN x TO y", "s")
    []
    """
    if _RENAME_TABLE.match(statement):
        found = [m.group(1) for m in _RENAMED_TO.finditer(statement)]
    elif _ALTER_TABLE.match(statement):
        found = [m.group(1) for m in _ALTER_RENAME.finditer(statement)]
    else:
        m = _CREATE_ANY.match(statement)
        found = [m.group(1)] if m else []
    return [t for f in found for t in named_tables(f, default_db)[:1]]


_DROP_TABLE = re.compile(_LEAD + r"DROP\s+(?:TEMPORARY\s+)?TABLES?\s+(?:IF\s+EXISTS\s+)?", re.IGNORECASE | re.DOTALL)


def dropped_tables(statement: str, default_db: str) -> list[TableId]:
    """Tables a ``DROP TABLE`` statement drops (a superset: every name after the verb).

    >>> [str(t) for t in dropped_tables("DROP TABLE IF EXISTS `a`, d.b /* generated by server */", "s")][:2]
    ['s.a', 'd.b']
    >>> dropped_tables("DROP INDEX i ON t", "s")
    []
    """
    m = _DROP_TABLE.match(statement)
    return named_tables(statement[m.end():], default_db) if m else []


_TRUNCATE = re.compile(_LEAD + r"TRUNCATE\b", re.IGNORECASE | re.DOTALL)


_CREATE_OR_REPLACE = re.compile(_LEAD + r"CREATE\s+OR\s+REPLACE\s+(?:TEMPORARY\s+)?TABLE\b", re.IGNORECASE | re.DOTALL)


# ALTER TABLE clauses that remove or bring rows with no row in the binlog: a partition truncated, dropped,
# exchanged with a table, MariaDB's CONVERT PARTITION ... TO TABLE and CONVERT TABLE ... TO PARTITION, a tablespace
# imported (of the table or of partitions; a discarded one cannot be read until then: its mirror keeps its rows),
# the BLACKHOLE engine (keeps nothing), and MariaDB's ALTER IGNORE adding a unique key (drops the duplicate rows)
_ROWS_UNLOGGED = re.compile(r"\b(?:(?:TRUNCATE|DROP|EXCHANGE)\s+PARTITION|CONVERT\s+(?:PARTITION|TABLE)|"
                            r"IMPORT\s+(?:PARTITION\s+[^,]*?\s+)?TABLESPACE|ENGINE\s*=?\s*BLACKHOLE)\b",
                            re.IGNORECASE | re.DOTALL)
_IGNORE_UNIQUE = re.compile(_LEAD + r"ALTER\s+(?:ONLINE\s+)?IGNORE\s+TABLE\b.*\bADD\s+(?:CONSTRAINT\b.*?)?"
                            r"\b(?:UNIQUE|PRIMARY)\b", re.IGNORECASE | re.DOTALL)
_ALTERED = re.compile(_LEAD + rf"ALTER\s+(?:ONLINE\s+|IGNORE\s+)*TABLE\s+({_IDENT}(?:\s*\.\s*{_IDENT})?)",
                      re.IGNORECASE | re.DOTALL)
_OTHER_TABLE = re.compile(rf"\b(?:WITH|TO|CONVERT)\s+TABLE\s+({_IDENT}(?:\s*\.\s*{_IDENT})?)", re.IGNORECASE)
UNLOGGED = ("changed rows without logging them (a partition truncated, dropped, exchanged or converted, a "
            "tablespace imported, the BLACKHOLE engine, or ALTER IGNORE adding a unique key)")


def unlogged_rows(statement: str, default_db: str) -> list[TableId]:
    """The tables an ALTER TABLE changes the rows of with no row in the binlog (see ``_ROWS_UNLOGGED``): the
    altered one, and the one it exchanges or converts a partition with; none for any other statement. Words in
    quotes (a comment, a default) are no clause.

    >>> [str(t) for t in unlogged_rows("ALTER TABLE logs EXCHANGE PARTITION p0 WITH TABLE `arch`.old", "d")]
    ['d.logs', 'arch.old']
    >>> unlogged_rows("ALTER TABLE logs DROP PARTITION archive", "d")[0].table, unlogged_rows(
    ...     "ALTER TABLE t COMMENT 'we drop partition p0 later', ADD c INT", "d")
    ('logs', [])
    >>> [len(unlogged_rows(q, "d")) for q in ("ALTER IGNORE TABLE t ADD UNIQUE KEY (c)",
    ...     "ALTER TABLE t ENGINE=BLACKHOLE", "ALTER TABLE t DISCARD TABLESPACE",
    ...     "ALTER TABLE t ADD c INT COMMENT 'import', TABLESPACE ts1")]
    [1, 1, 0, 0]
    """
    m = _ALTERED.match(statement)
    if m is None:
        return []
    text = re.sub(r"'(?:[^']|'')*'", "''", statement)
    if not (_ROWS_UNLOGGED.search(text) or _IGNORE_UNIQUE.match(text)):
        return []
    names = [m.group(1), *(o.group(1) for o in _OTHER_TABLE.finditer(text))]
    return [t for n in names for t in named_tables(n, default_db)[-1:]]


def replacing_statement(statement: str, default_db: str) -> str | None:
    """What a DDL statement does to the tables it names when it is more than a change of their columns:
    ``dropped``, ``truncated``, ``renamed`` (RENAME TABLE, ALTER TABLE ... RENAME TO), ``replaced`` (CREATE OR
    REPLACE), or :data:`UNLOGGED` (rows changed without a row in the binlog, :func:`unlogged_rows`: of the
    tables that function names only); ``None`` for other statements (ALTER TABLE of columns, CREATE/DROP INDEX, a
    partition added or reorganized, ...).

    >>> [replacing_statement(q, "d") for q in ("TRUNCATE t",
    ...                                        "RENAME TABLE a TO b", "ALTER TABLE a RENAME COLUMN x TO y",
    ...                                        "DROP INDEX i ON t", "DROP TABLE t", "CREATE INDEX i ON t (c)")]
    ['truncated', 'renamed', None, None, 'dropped', None]
    >>> [replacing_statement(q, "d") == UNLOGGED for q in ("ALTER TABLE t DROP PARTITION p0",
    ...     "alter table t truncate partition p1, p2", "ALTER TABLE t EXCHANGE PARTITION p WITH TABLE u",
    ...     "ALTER TABLE t IMPORT PARTITION p TABLESPACE", "ALTER TABLE t CONVERT PARTITION p TO TABLE u")]
    [True, True, True, True, True]
    >>> replacing_statement("ALTER TABLE t ADD PARTITION (PARTITION p9 VALUES LESS THAN (900))", "d")
    """
    if _DROP_TABLE.match(statement):
        return "dropped"
    if _TRUNCATE.match(statement):
        return "truncated"
    if unlogged_rows(statement, default_db):
        return UNLOGGED
    if _RENAME_TABLE.match(statement) or (_ALTER_TABLE.match(statement) and created_tables(statement, default_db)):
        return "renamed"
    if _CREATE_OR_REPLACE.match(statement):
        return "replaced"
    return None


_INDEX_ONLY = re.compile(_LEAD + r"(?:CREATE\s+(?:OR\s+REPLACE\s+)?(?:ONLINE\s+)?(?:UNIQUE\s+|FULLTEXT\s+|SPATIAL\s+)?"
                         r"INDEX|DROP\s+INDEX)\b", re.IGNORECASE | re.DOTALL)


def index_only(statement: str) -> bool:
    """Whether a statement is ``CREATE [UNIQUE|FULLTEXT|SPATIAL] INDEX`` or ``DROP INDEX``, which change no
    column and no stored value (a primary key is changed by ALTER TABLE only).

    >>> [index_only(q) for q in ("CREATE UNIQUE INDEX i ON t (a)", "drop index i on t", "ALTER TABLE t ADD x INT")]
    [True, True, False]
    """
    return _INDEX_ONLY.match(statement) is not None


def mentioned_tables(statement: str, default_db: str, tables: set[TableId]) -> list[TableId]:
    """Captured tables a statement names (conservatively: a mention of the name is enough).

    >>> mentioned_tables("UPDATE `d`.t SET a = 1", "x", {TableId("d", "t"), TableId("d", "u")})
    [TableId(database='d', table='t')]
    >>> mentioned_tables("ALTER TABLE bestellungen_größe ADD c INT", "d", {TableId("d", "bestellungen_größe")})
    [TableId(database='d', table='bestellungen_größe')]
    """
    names: list[tuple[str | None, str]] = []  # (qualifier or None, name), lower case
    for m in _NAME.finditer(statement):
        parts = [unquote(p).lower() for p in m.groups() if p is not None]
        names.append((parts[0], parts[1]) if len(parts) == 2 else (None, parts[0]))
    hit = []
    for t in sorted(tables, key=str):
        db, name = t.database.lower(), t.table.lower()
        if any(n == name and (q == db if q is not None else db == (default_db or "").lower()) for q, n in names):
            hit.append(t)
    return hit


def ddl_tables(statement: str, default_db: str, tables: set[TableId]) -> list[TableId]:
    """Captured tables a DDL statement may change (by name, conservatively: a mention is enough).

    >>> ddl_tables("ALTER TABLE `t` ADD c INT", "d", {TableId("d", "t"), TableId("d", "u")})
    [TableId(database='d', table='t')]
    >>> ddl_tables("INSERT INTO t VALUES (1)", "d", {TableId("d", "t")})
    []
    >>> ddl_tables("CREATE TABLE t (id INT PRIMARY KEY)", "d", {TableId("d", "t")})
    []
    >>> ddl_tables("CREATE OR REPLACE TABLE t (id INT PRIMARY KEY)", "d", {TableId("d", "t")})
    [TableId(database='d', table='t')]
    """
    if not _DDL.match(statement) or _CREATE_TABLE.match(statement):
        return []
    return mentioned_tables(statement, default_db, tables)


def statement_dml_tables(statement: str, default_db: str, tables: set[TableId]) -> list[TableId]:
    r"""Captured tables a data-changing statement logged as SQL text may change: a session that set
    binlog_format to STATEMENT or MIXED logs its changes that way, without row images, so they cannot be
    delivered (the read stops instead of skipping them).

    >>> statement_dml_tables("insert into t values (1)", "d", {TableId("d", "t")})
    [TableId(database='d', table='t')]
    >>> statement_dml_tables("/* x */ DELETE FROM d.u WHERE id = 1", "z", {TableId("d", "t")})
    []
    >>> statement_dml_tables("ALTER TABLE t ADD c INT", "d", {TableId("d", "t")})
    []
    >>> statement_dml_tables("-- app x\n# y\nSET STATEMENT max_statement_time=1 FOR update t set a = 1", "d",
    ...                      {TableId("d", "t")})
    [TableId(database='d', table='t')]
    >>> statement_dml_tables("INSERT INTO other SELECT * FROM t", "d", {TableId("d", "t")})  # t is only read
    []
    """
    m = _DML.match(statement)
    if not m:
        return []
    if m.group(1).upper() in ("INSERT", "REPLACE") or m.group(1).upper().startswith("LOAD"):
        target = _INSERT_TARGET.search(statement, m.start(1))
        if target is not None:
            name = _NAME.match(statement, target.end())
            if name is not None:
                return mentioned_tables(name.group(0), default_db, tables)
    return mentioned_tables(statement, default_db, tables)


_VERSIONED = re.compile(r"/\*(M?)!(\d{5,6})?(.*?)\*/", re.DOTALL)


def executed_text(statement: str, flavor: str, version: tuple[int, int, int] | None = None) -> str:
    """A statement as the server runs it: a versioned comment ``/*!NNNNN body */`` becomes its body when the
    server's version (major * 10000 + minor * 100 + patch) is at least NNNNN (five digits, or six where six
    follow), or has no number, else nothing; ``/*M!NNNNNN body */`` the same on MariaDB only (a plain comment
    on MySQL). Without ``version`` every versioned comment counts as run. Other comments stay as they are.

    >>> executed_text("/*!40000 ALTER TABLE t DISABLE KEYS */", "mysql", (9, 7, 0))
    ' ALTER TABLE t DISABLE KEYS '
    >>> executed_text("INSERT /*!99999 IGNORE*/ INTO t /* x */ VALUES (1)", "mysql", (9, 7, 0))
    'INSERT  INTO t /* x */ VALUES (1)'
    >>> [executed_text("/*M!100500 DELETE FROM t */", f, (10, 11, 9)) for f in ("mariadb", "mysql")]
    [' DELETE FROM t ', '/*M!100500 DELETE FROM t */']
    """
    if "/*" not in statement:
        return statement
    number = None if version is None else version[0] * 10000 + version[1] * 100 + version[2]

    def run(m: re.Match[str]) -> str:
        if m.group(1) and flavor != "mariadb":
            return m.group(0)
        need = int(m.group(2)) if m.group(2) else 0
        return m.group(3) if number is None or number >= need else ""

    return _VERSIONED.sub(run, statement)


_CONTROL = re.compile(_LEAD + r"(?:$|(?:BEGIN|COMMIT|ROLLBACK|SAVEPOINT|RELEASE|XA|START\s+TRANSACTION)\b)",
                      re.IGNORECASE | re.DOTALL)


# statements that change accounts, plugins or server state, never a table's rows
_ADMIN = re.compile(_LEAD + r"(?:GRANT|REVOKE|FLUSH|ANALYZE|OPTIMIZE|REPAIR|CHECK|CHECKSUM|INSTALL|UNINSTALL|RESET"
                    r"|PURGE|SET\s+(?:PASSWORD|DEFAULT\s+ROLE|ROLE))\b", re.IGNORECASE | re.DOTALL)


def writes_rows(statement: str) -> bool:
    """Whether a statement logged as SQL text (run as :func:`executed_text` gives it) may change rows: anything
    but transaction control, DDL (followed apart, see :func:`ddl_tables`) and statements on accounts, plugins
    and server state. In a session that set binlog_format to STATEMENT or MIXED, a change is logged this way,
    without its rows; so is a stored function's call that changes rows (``SELECT f()``), and a statement whose
    trigger, updatable view or cascading foreign key changes other tables is logged as itself alone.

    >>> [writes_rows(q) for q in ("INSERT INTO o VALUES (1)", "SELECT f(1)", "CALL p()", "COMMIT",
    ...                           "GRANT SELECT ON *.* TO u", "ALTER TABLE t ADD c INT", "/* x */ SAVEPOINT a")]
    [True, True, True, False, False, False, False]
    """
    return not (_CONTROL.match(statement) or _ADMIN.match(statement) or _DDL.match(statement))


_WRITE_VERB = re.compile(_LEAD + r"(?:WITH\b.*?\b)?(INSERT|REPLACE|UPDATE|DELETE|LOAD|CALL|DO|SELECT|\w+)",
                         re.IGNORECASE | re.DOTALL)


def statement_write_error(statement: str, default_db: str, tables: set[TableId], where: str) -> ServerSettingError:
    """The error for a statement logged as SQL text that may change rows (:func:`writes_rows`): it names the
    captured table it writes, or says that no captured table can be shown to be out of its reach. The
    statement's text is not quoted (it may hold data); its verb and tables are."""
    named = statement_dml_tables(statement, default_db, tables)
    fix = ("keep binlog_format=ROW in every session (revoke the privilege to change it: SESSION_VARIABLES_ADMIN / "
           "SYSTEM_VARIABLES_ADMIN / SUPER), then take a new snapshot of the captured tables it may have changed")
    if named:
        return ServerSettingError(
            f"a change to {str(named[0])!r} at {where} was logged as an SQL statement, not as row images (the "
            "writing session set binlog_format to STATEMENT or MIXED), so the binlog does not hold the changed "
            f"rows and they cannot be delivered; {fix}")
    m = _WRITE_VERB.match(statement)
    verb = m.group(1).upper() if m else "statement"
    return ServerSettingError(
        f"a statement ({verb}) at {where} was logged as SQL text, not as row images (the writing session set "
        "binlog_format to STATEMENT or MIXED); it names no captured table, but a trigger, an updatable view, a "
        "stored function or procedure, or a cascading foreign key may have changed captured tables through it "
        f"without a row in the binlog, so the read stops rather than skip it: {fix}; or, if no such statement can "
        "reach a captured table, set allow_statement_writes => true (CLI --allow-statement-writes), which lets "
        "statements that name no captured table pass")


_RENAME_COLUMN = re.compile(rf"\bRENAME\s+COLUMN\s+({_IDENT})\s+TO\s+({_IDENT})", re.IGNORECASE)


_CHANGE_COLUMN = re.compile(rf"\bCHANGE\s+(?:COLUMN\s+)?(?:IF\s+EXISTS\s+)?({_IDENT})\s+({_IDENT})",
                            re.IGNORECASE)


def renamed_columns(statements: str | Sequence[str]) -> dict[str, str]:
    """Columns ALTER statements rename, new name to old name (over several statements: latest name to the
    name before the first).

    >>> renamed_columns("ALTER TABLE t RENAME COLUMN `a b` TO c, CHANGE COLUMN d e INT NOT NULL")
    {'c': 'a b', 'e': 'd'}
    >>> renamed_columns(["ALTER TABLE t RENAME COLUMN a TO b", "ALTER TABLE t RENAME COLUMN b TO c"])
    {'c': 'a'}
    """
    out: dict[str, str] = {}
    for statement in [statements] if isinstance(statements, str) else statements:
        for m in (*_RENAME_COLUMN.finditer(statement), *_CHANGE_COLUMN.finditer(statement)):
            old, new = unquote(m.group(1)), unquote(m.group(2))
            if old != new:
                out[new] = out.pop(old, old)
    return {n: o for n, o in out.items() if n != o}


def _top_level_parts(text: str) -> list[str]:
    """``text`` split at the commas outside parentheses, quotes and backticks."""
    parts: list[str] = []
    cur: list[str] = []
    depth, quote = 0, ""
    for ch in text:
        if quote:
            quote = "" if ch == quote else quote
        elif ch in "'\"`":
            quote = ch
        elif ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append("".join(cur))
            cur = []
            continue
        cur.append(ch)
    parts.append("".join(cur))
    return [p.strip() for p in parts if p.strip()]


_ALTER_HEAD = re.compile(rf"^\s*ALTER\s+(?:ONLINE\s+|IGNORE\s+)*TABLE\s+(?:IF\s+EXISTS\s+)?{_IDENT}"
                         rf"(?:\s*\.\s*{_IDENT})?\s+(.*)$", re.IGNORECASE | re.DOTALL)


_PLAIN_CLAUSES = (
    re.compile(r"^(?:ADD|DROP|RENAME)\s+(?:INDEX|KEY)\b|^ADD\s+(?:UNIQUE|FULLTEXT|SPATIAL)\b|^(?:ALGORITHM|LOCK)\b",
               re.IGNORECASE),
    re.compile(rf"^DROP\s+(?:COLUMN\s+)?(?:IF\s+EXISTS\s+)?{_IDENT}$", re.IGNORECASE),
    re.compile(rf"^RENAME\s+COLUMN\s+{_IDENT}\s+TO\s+{_IDENT}$", re.IGNORECASE),
)


_ADD_COLUMN = re.compile(rf"^ADD\s+(?:COLUMN\s+)?(?:IF\s+NOT\s+EXISTS\s+)?(?!(?:INDEX|KEY|UNIQUE|FULLTEXT|SPATIAL|"
                         rf"PRIMARY|CONSTRAINT|FOREIGN|CHECK|PARTITION)\b)({_IDENT})\s+(.*)$",
                         re.IGNORECASE | re.DOTALL)


_FILLING = re.compile(r"\b(?:DEFAULT(?!\s+NULL\b)|NOT\s+NULL|AS|GENERATED|AUTO_INCREMENT|PRIMARY|SERIAL)\b",
                      re.IGNORECASE)


ClauseKind = Literal["add", "drop", "rename", "change", "index", "option", "other"]
_DROP_COLUMN = re.compile(rf"^DROP\s+(?:COLUMN\s+)?(?:IF\s+EXISTS\s+)?(?!(?:INDEX|KEY|PRIMARY|FOREIGN|CONSTRAINT|"
                          rf"CHECK|PARTITION)\b)({_IDENT})", re.IGNORECASE)
_RENAME_CLAUSE = re.compile(_RENAME_COLUMN.pattern.replace("\\b", "^", 1), re.IGNORECASE)
_CHANGE_CLAUSE = re.compile(_CHANGE_COLUMN.pattern.replace("\\b", "^", 1) + r"\s*(.*)$", re.IGNORECASE | re.DOTALL)


@dataclass(frozen=True)
class Clause:
    """One clause of an ALTER TABLE statement, as written; columns named as they were before the statement
    (MySQL and MariaDB resolve every clause against the table before it)."""

    kind: ClauseKind  # a column added, dropped, renamed (RENAME COLUMN), changed (CHANGE a b ...); an index; an
    # ALGORITHM/LOCK option; anything else (MODIFY, a default, a key, table options...)
    text: str
    column: str | None = None  # the column it adds, drops, renames or changes
    new_name: str | None = None  # rename, change: the column's new name
    definition: str = ""  # add, change: the rest of the clause (type, attributes, FIRST / AFTER)
    plain: bool = False  # it leaves every stored value as it was (see plainly_kept)


def alter_clauses(statement: str) -> list[Clause] | None:
    """The clauses of an ALTER TABLE statement (``None`` for another statement).

    >>> [(c.kind, c.column, c.new_name, c.plain) for c in alter_clauses(
    ...     "ALTER TABLE t ADD x INT, DROP y, RENAME COLUMN a TO b, CHANGE c d INT, ADD INDEX i (x), MODIFY e TEXT")]
    [('add', 'x', None, True), ('drop', 'y', None, True), ('rename', 'a', 'b', True), ('change', 'c', 'd', False), \
('index', None, None, True), ('other', None, None, False)]
    """
    m = _ALTER_HEAD.match(statement)
    if m is None:
        return None
    out = []
    for text in _top_level_parts(m.group(m.lastindex or 0)):
        add = _ADD_COLUMN.match(text)
        if add is not None:
            filling = _FILLING.search(re.sub(r"'(?:[^']|'')*'", "''", add.group(2)))
            out.append(Clause("add", text, unquote(add.group(1)), None, add.group(2), filling is None))
        elif _PLAIN_CLAUSES[0].match(text):
            out.append(Clause("option" if re.match(r"^(?:ALGORITHM|LOCK)\b", text, re.IGNORECASE) else "index",
                              text, plain=True))
        elif (drop := _DROP_COLUMN.match(text)) is not None:
            out.append(Clause("drop", text, unquote(drop.group(1)), plain=_PLAIN_CLAUSES[1].match(text) is not None))
        elif (ren := _RENAME_CLAUSE.match(text)) is not None:
            out.append(Clause("rename", text, unquote(ren.group(1)), unquote(ren.group(2)),
                              plain=_PLAIN_CLAUSES[2].match(text) is not None))
        elif (ch := _CHANGE_CLAUSE.match(text)) is not None:
            out.append(Clause("change", text, unquote(ch.group(1)), unquote(ch.group(2)), ch.group(3)))
        else:
            out.append(Clause("other", text))
    return out


def clause_names(statement: str) -> tuple[list[str], list[str], list[tuple[str, str]]]:
    """The columns an ALTER TABLE statement adds, drops, and renames (old, new: RENAME COLUMN, CHANGE), by its
    clauses (:func:`alter_clauses`).

    >>> clause_names("ALTER TABLE t ADD COLUMN x INT, DROP y, RENAME COLUMN a TO b, CHANGE c d INT, ADD INDEX i (x)")
    (['x'], ['y'], [('a', 'b'), ('c', 'd')])
    """
    clauses = alter_clauses(statement) or []
    return ([c.column for c in clauses if c.kind == "add" and c.column is not None],
            [c.column for c in clauses if c.kind == "drop" and c.column is not None],
            [(c.column, c.new_name) for c in clauses if c.kind in ("rename", "change")
             and c.column is not None and c.new_name is not None])


def reuses_names(statement: str, before: Sequence[str]) -> bool:
    """Whether one ALTER statement gives a column a name that a column had before it (a swap by RENAME, a
    column dropped and added again under its name, renamed onto a dropped one): pairing columns by name across
    it would pair the wrong ones.

    >>> before = ["a", "b"]
    >>> [reuses_names(q, before) for q in ("ALTER TABLE t RENAME COLUMN a TO b, RENAME COLUMN b TO a",
    ...  "ALTER TABLE t DROP a, ADD a BIGINT", "ALTER TABLE t DROP b, RENAME COLUMN a TO b",
    ...  "ALTER TABLE t RENAME COLUMN a TO c, ADD d INT")]
    [True, True, True, False]
    """
    added, dropped, renamed = clause_names(statement)
    gone = set(dropped) | {a for a, b in renamed if a != b}
    new = set(added) | {b for a, b in renamed if a != b}
    return bool(new & (gone | set(before)) - {a for a, b in renamed if a == b})


def plainly_kept(statement: str) -> bool:
    """Whether a statement, read alone, leaves every stored value as it was: CREATE/DROP INDEX, or ALTER TABLE
    with clauses each of which adds a nullable column without a default, drops or renames a column, or adds,
    drops or renames an index. Used where the schema between two statements cannot be read from the server.

    >>> plainly_kept("ALTER TABLE t ADD COLUMN n INT, ADD INDEX i (n), RENAME COLUMN a TO b, DROP COLUMN c")
    True
    >>> [plainly_kept(q) for q in ("ALTER TABLE t ADD d INT DEFAULT 7", "ALTER TABLE t MODIFY w VARCHAR(5)",
    ...                            "ALTER TABLE t ADD n INT NULL DEFAULT NULL", "CREATE INDEX i ON t (a, b)")]
    [False, False, True, True]
    """
    if re.match(r"^\s*(?:CREATE\s+(?:UNIQUE\s+|FULLTEXT\s+|SPATIAL\s+)?|DROP\s+)INDEX\b", statement, re.IGNORECASE):
        return True
    clauses = alter_clauses(statement)
    return clauses is not None and not reuses_names(statement, ()) and all(c.plain for c in clauses)


_ADD_PLACE = re.compile(rf"\b(?:(FIRST)|AFTER\s+({_IDENT}))\s*$", re.IGNORECASE)


def added_place(clause: Clause) -> tuple[bool, str | None]:
    """Where an ADD clause puts its column: ``FIRST`` (True, None), ``AFTER c`` (False, 'c'), or last.

    >>> [added_place(c) for c in alter_clauses("ALTER TABLE t ADD a INT FIRST, ADD b INT AFTER `x y`, ADD c INT")]
    [(True, None), (False, 'x y'), (False, None)]
    """
    place = _ADD_PLACE.search(clause.definition)
    if place is None:
        return False, None
    return bool(place.group(1)), None if place.group(1) else unquote(place.group(2))


StatementKind = Literal["control", "admin", "ddl", "write"]


@dataclass(frozen=True)
class Statement:
    """A statement met in the binlog, read as the server ran it (``text``, versioned comments read), in its
    default database. What it is (:attr:`kind`): transaction control, account or server administration, DDL
    (followed by the schema history), or a write of rows logged as SQL text (a session with binlog_format
    STATEMENT or MIXED, or a stored function's call); and what it names."""

    text: str
    default_db: str

    @cached_property
    def kind(self) -> StatementKind:
        if _CONTROL.match(self.text):
            return "control"
        if _DDL.match(self.text):
            return "ddl"
        if _ADMIN.match(self.text):
            return "admin"
        return "write"

    @property
    def verb(self) -> str:
        """Its first word: ALTER, INSERT, ... (after comments and MariaDB's SET STATEMENT ... FOR)."""
        m = _WRITE_VERB.match(self.text)
        return m.group(1).upper() if m else ""

    @cached_property
    def names(self) -> list[TableId]:
        return named_tables(self.text, self.default_db)

    @property
    def created(self) -> list[TableId]:
        return created_tables(self.text, self.default_db)

    @property
    def dropped(self) -> list[TableId]:
        return dropped_tables(self.text, self.default_db)

    @property
    def replacing(self) -> str | None:
        return replacing_statement(self.text, self.default_db)

    @property
    def index_only(self) -> bool:
        return index_only(self.text)

    @cached_property
    def clauses(self) -> list[Clause]:
        return alter_clauses(self.text) or []

    @property
    def renamed(self) -> dict[str, str]:
        return renamed_columns(self.text)

    @property
    def plainly_kept(self) -> bool:
        return plainly_kept(self.text)

    def changes(self, tables: set[TableId]) -> list[TableId]:
        """The captured tables it may change as DDL (:func:`ddl_tables`)."""
        return ddl_tables(self.text, self.default_db, tables)

    def writes(self, tables: set[TableId]) -> list[TableId]:
        """The captured tables it names as a write of rows (:func:`statement_dml_tables`)."""
        return statement_dml_tables(self.text, self.default_db, tables)

    def write_error(self, tables: set[TableId], where: str) -> ServerSettingError:
        """The error that stops a read at this write of rows (:func:`statement_write_error`)."""
        return statement_write_error(self.text, self.default_db, tables, where)


def read_statement(text: str, default_db: str = "", flavor: str = "mysql",
                   version: tuple[int, int, int] | None = None) -> Statement:
    """A statement's text read as the server of ``flavor`` and ``version`` runs it (:func:`executed_text`).

    >>> st = read_statement("INSERT INTO o VALUES (1)", "shop")
    >>> st.kind, st.verb, st.writes({TableId("shop", "o")})
    ('write', 'INSERT', [TableId(database='shop', table='o')])
    >>> read_statement("/*M!100100 DROP TABLE t */", "d", "mysql").kind  # MariaDB's comment: nothing to MySQL
    'control'
    """
    return Statement(executed_text(text, flavor, version), default_db)
