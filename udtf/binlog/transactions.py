"""Row-image decoding behind one small interface: :func:`read_transactions` yields
:class:`BinlogRow`.

python-mysql-replication frames the events and parses table maps; row images are decoded by a plan made per
table map (:mod:`udtf.binlog.rowimage`) when the caller gives the tables' schemas, else by the library (adapted
below), without touching the correction or emit rules. Each concurrent binlog connection claims its own
replica server id from the configured range with a server-side user lock (``GET_LOCK``), so two readers never
share an id (sharing one makes the server drop the older connection, and events are lost).
"""

from __future__ import annotations

import contextlib
import random
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, NamedTuple

from mysql_cdc.connect import connect, guarded_connect, pymysql_kwargs, registered_replica_ids, unlisted_replicas
from mysql_cdc.errors import BinlogError, ServerSettingError
from mysql_cdc.ids import TableId
from mysql_cdc.offsets import BinlogOffset, GtidSet
from mysql_cdc.options import CdcOptions, ConnectionProfile
from mysql_cdc.udtf.binlog.rowimage import RowDecoders
from mysql_cdc.udtf.convert import JSON_NULL, JsonOpaque, MemberIndex

LOCK_PREFIX = "mysql_cdc.server_id."
ANONYMOUS_GTID_EVENT = 34
_COMPRESSED = ("a compressed transaction or event, which python-mysql-replication cannot decode, so its changes "
               "(of any table) would be lost: set binlog_transaction_compression=OFF (MySQL) / log_bin_compress=OFF "
               "(MariaDB) globally and in every session, then take a new snapshot")
# events the library does not decode that may hold changes: the read stops rather than skip them
UNREADABLE_EVENTS = {
    26: "an incident event (the server lost events it could not log): take a new snapshot",
    40: _COMPRESSED, **dict.fromkeys(range(165, 172), _COMPRESSED),
    42: "a transaction with a tagged GTID (MySQL 8.3+), which this version does not follow: write without GTID "
        "tags",
}
READ_TIMEOUT = 120  # seconds without a byte from the server before a binlog read fails instead of hanging


def canonical_image(image: dict[str, Any] | tuple[Any, ...], convert: Callable[[dict[str, Any]], tuple[Any, ...]]
                    ) -> tuple[Any, ...]:
    """A row image as its canonical tuple: decoded by a table map's plan already, or converted from the library's
    dict by ``convert`` (:func:`udtf.convert.binlog_row_converter`)."""
    return image if isinstance(image, tuple) else convert(image)


class BinlogRow(NamedTuple):
    """One row change as read (a named tuple: made for every row, so made cheaply)."""

    database: str
    table: str
    op: str  # insert | update | delete
    # an image: the canonical row tuple in the schema's column order (decoded by udtf.binlog.rowimage), or the
    # library's dict of column name -> value (see canonical_image)
    before: dict[str, Any] | tuple[Any, ...] | None
    after: dict[str, Any] | tuple[Any, ...] | None
    file: str
    pos: int  # end position of the event that carried the row
    gtid: str | None
    timestamp: int
    start: int = 0  # start position of that event
    ordinal: int = 0  # the row's index in that event


@contextlib.contextmanager
def claimed_server_id(profile: ConnectionProfile, ids: range, prefer: int | None = None, *,
                      unchecked: bool = False) -> Iterator[int]:
    """Hold a replica server id from ``ids`` for the duration of the block (a GET_LOCK per id), never the id of
    a registered replica: a binlog connection with a replica's id makes the server end that replica's. Where the
    capture user may not list the replicas, no id is claimed (:func:`mysql_cdc.connect.unlisted_replicas`),
    unless ``unchecked`` (option ``unchecked_server_ids``) says to claim one without looking."""
    conn = connect(profile)
    start = prefer if prefer is not None else random.randrange(len(ids))
    try:
        replicas = registered_replica_ids(conn)
        if replicas is None and not unchecked:
            raise unlisted_replicas(ids)
        cur = conn.cursor()
        for k in range(len(ids)):
            sid = ids[(start + k) % len(ids)]
            if replicas and sid in replicas:
                continue
            cur.execute("SELECT GET_LOCK(%s, 0)", (LOCK_PREFIX + str(sid),))
            if cur.fetchone()[0] == 1:
                try:
                    yield sid
                finally:
                    with contextlib.suppress(Exception):
                        cur.execute("SELECT RELEASE_LOCK(%s)", (LOCK_PREFIX + str(sid),))
                return
        raise BinlogError(f"all {len(ids)} replica server ids {ids.start}-{ids.stop - 1} are in use by other "
                          "readers or registered replicas; widen server_id_range or run fewer readers at once")
    finally:
        conn.close()


def claimed_id(profile: ConnectionProfile, opts: CdcOptions) -> contextlib.AbstractContextManager[int]:
    """:func:`claimed_server_id` from the options' range, checked as they say."""
    return claimed_server_id(profile, opts.server_ids, unchecked=opts.unchecked_server_ids)


@dataclass(frozen=True)
class Transaction:
    """The captured rows of one committed transaction, yielded once its commit was read; or, when the reader
    was asked for pieces, a piece of one (``complete`` False: more rows of it follow, and ``end`` is where the
    piece ends, not a boundary)."""

    gtid: str | None
    file: str
    end: int  # binlog position just after the commit: a transaction boundary, where a later read may start
    timestamp: int
    rows: tuple[BinlogRow, ...]
    complete: bool = True


@dataclass(frozen=True)
class SchemaChange:
    """A DDL statement on a captured table, met in the binlog."""

    table: TableId
    statement: str
    file: str
    pos: int
    database: str = ""  # the statement's default database
    gtid: str | None = None  # of its transaction


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


def _unquote(identifier: str) -> str:
    return identifier[1:-1].replace("``", "`") if identifier.startswith("`") else identifier


# a table name as a statement writes it, ``name`` or ``db.name``: quoted, or unquoted (ASCII letters, digits, $
# and _, and any character U+0080 .. U+FFFF)
_IDENT = r"(?:`(?:[^`]|``)+`|[A-Za-z0-9_$\u0080-\uffff]+)"
_NAME = re.compile(rf"({_IDENT})(?:\s*\.\s*({_IDENT}))?")


def named_tables(statement: str, default_db: str) -> list[TableId]:
    """Every name a statement could mean as a table, qualified by ``default_db`` when it is not (a superset:
    column names and keywords come too, which a caller matches against the tables it knows).

    >>> [str(t) for t in named_tables("RENAME TABLE `old` TO shop.`new`", "d")]
    ['d.RENAME', 'd.TABLE', 'd.old', 'd.TO', 'shop.new']
    """
    out: list[TableId] = []
    for m in _NAME.finditer(statement):
        parts = [_unquote(p) for p in m.groups() if p is not None]
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


def replacing_statement(statement: str, default_db: str) -> str | None:
    """What a DDL statement does to the tables it names when it is more than a change of their columns:
    ``dropped``, ``truncated``, ``renamed`` (RENAME TABLE, ALTER TABLE ... RENAME TO) or ``replaced`` (CREATE OR
    REPLACE); ``None`` for other statements (ALTER TABLE of columns, CREATE/DROP INDEX, ...).

    >>> [replacing_statement(q, "d") for q in ("TRUNCATE t",
    ...                                        "RENAME TABLE a TO b", "ALTER TABLE a RENAME COLUMN x TO y",
    ...                                        "DROP INDEX i ON t", "DROP TABLE t", "CREATE INDEX i ON t (c)")]
    ['truncated', 'renamed', None, None, 'dropped', None]
    """
    if _DROP_TABLE.match(statement):
        return "dropped"
    if _TRUNCATE.match(statement):
        return "truncated"
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
        parts = [_unquote(p).lower() for p in m.groups() if p is not None]
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


def _image(row: dict[str, Any], prefix: str, where: str) -> dict[str, Any]:
    """A row image from the library's row dict. The library decodes an empty SET as None, like NULL; its
    ``none_sources`` tell them apart (every None-making branch but JSON's records why), and an empty SET
    becomes an empty set here. A column left out of the image (a session that set binlog_row_image to
    MINIMAL or NOBLOB) is an error: reading it as NULL would be a wrong value."""
    values: dict[str, Any] = row[f"{prefix}values"]
    sources = row.get(f"{prefix}none_sources") or {}
    if not sources:
        return values
    missing = [k for k, why in sources.items() if why == "cols bitmap"]
    if missing:
        raise ServerSettingError(
            f"a change to {where} was logged without column(s) "
            f"{', '.join(map(repr, missing))}: the writing session set binlog_row_image to MINIMAL or NOBLOB, so "
            "the binlog does not hold the row; keep binlog_row_image=FULL in every session (revoke the "
            "privilege to set it) and take a new snapshot of the table")
    empty = [k for k, why in sources.items() if why == "empty set"]
    if not empty:
        return values
    return {**values, **{k: frozenset() for k in empty}}


_STRING_TYPES = (15, 253, 254, 252)  # VARCHAR, VAR_STRING, STRING, BLOB: each has a character set in FULL metadata
_ENUM, _SET = 247, 248


def _check_described(columns: list[Any], where: str) -> None:
    """A table map written while binlog_row_metadata was not FULL lacks column names, ENUM/SET members and
    character sets: its rows would decode to wrong values (an ENUM as NULL, text as UTF-8)."""
    lacking = [i for i, c in enumerate(columns) if c.name is None
               or (c.type == _ENUM and c.enum_values is None) or (c.type == _SET and c.set_values is None)
               or (c.type in _STRING_TYPES and c.character_set_name is None)]
    if lacking:
        raise ServerSettingError(
            f"the change to {where} was logged without column metadata (column positions {lacking}): "
            "binlog_row_metadata was not FULL when it was written; keep binlog_row_metadata=FULL and take a new "
            "snapshot of the table")


def _refuse_partial_json(rows: list[dict[str, Any]], where: str) -> None:
    """An update logged with binlog_row_value_options=PARTIAL_JSON carries a diff, not the new JSON value."""
    from pymysqlreplication.json_binary import JsonDiff

    for row in rows:
        diffs = [k for k, v in row["after_values"].items() if isinstance(v, JsonDiff)]
        if diffs:
            raise ServerSettingError(
                f"the update of {where} was logged as a partial JSON change of column(s) {diffs!r} "
                "(binlog_row_value_options=PARTIAL_JSON in the writing session): the binlog does not hold the new "
                "value. SET GLOBAL binlog_row_value_options = '', keep sessions from setting it, and take a new "
                "snapshot of the table")


def _stored_bytes(self: Any, size: int, _column: Any) -> bytes:
    """The library's string reader without its decoding: the value as stored."""
    return bytes(self.packet.read_length_coded_pascal_string(size))


def _member_indexes(self: Any, length: int) -> list[list[MemberIndex]] | None:
    """ENUM/SET member lists of a table map as positions (see :class:`udtf.convert.MemberIndex`)."""
    packet = self.packet
    read_until = packet.read_bytes + length
    if packet.read_bytes >= read_until:
        return None
    out = []
    while packet.read_bytes < read_until:
        count = packet.read_length_coded_binary()
        for _ in range(count):
            packet.read_variable_length_string()
        out.append([MemberIndex(i) for i in range(count)])
    return out


def _json_opaque(data: bytes) -> JsonOpaque | None:
    """An opaque value of binary JSON (its field type, a length, the bytes) as a :class:`JsonOpaque`."""
    from pymysqlreplication.util.bytes import decode_variable_length

    if len(data) < 2:
        return None
    length, n = decode_variable_length(data[1:])
    return JsonOpaque(data[0], bytes(data[1 + n:1 + n + length]))


def _adapt_library() -> None:
    """Five changes to python-mysql-replication's decoding (process-wide; this package is its only user in
    a Spark worker), so that :mod:`udtf.convert` decodes from the stored bytes with the column's definition:

    - strings (text and binary) come as their stored bytes: the library decodes text with the Python codec
      named like the MySQL character set, which is wrong for utf16/ucs2/utf32 (big-endian in MySQL), latin1
      (five bytes) and others, and missing for some (it then keeps the bytes anyway, after a failed codec
      lookup per value);
    - ENUM and SET members come as positions: the library decodes member names as UTF-8 whatever the column's
      character set and makes a name it cannot decode '';
    - a value in binary JSON that JSON has no type for (DECIMAL, dates and times, binary data) comes as a
      :class:`udtf.convert.JsonOpaque` of its type and bytes: the library made binary data lossy text and a
      TIME a time of day;
    - MySQL's JSON null literal comes as :data:`udtf.convert.JSON_NULL`: the library gives None, and its
      ``none_sources`` cannot tell that from SQL NULL (it reports "null" for any None without a recorded
      reason, and the reasons are kept per event, not per row).
    """
    from pymysqlreplication import json_binary
    from pymysqlreplication.event import QueryEvent
    from pymysqlreplication.exceptions import StatusVariableMismatch
    from pymysqlreplication.packet import BinLogPacketWrapper
    from pymysqlreplication.row_event import RowsEvent, TableMapEvent

    setattr(RowsEvent, "_RowsEvent__read_string", _stored_bytes)  # noqa: B010 (a name-mangled method)
    TableMapEvent._read_type_values = _member_indexes
    json_binary.parse_opaque = _json_opaque
    read_json = BinLogPacketWrapper.read_binary_json
    if getattr(read_json, "_mysql_cdc", False):
        return

    # - a query event's status variables unknown to the library (MySQL 9.7 logs 0x12, the default utf8mb4
    #   collation, with statement-format DML) made it raise; the block's length is in the post-header, so the
    #   rest is skipped (only the schema and the statement are used here).
    advance, read_var = QueryEvent._advance_to_payload, QueryEvent._read_status_vars_value_for_key

    def advance_to_payload(self: Any, known: int) -> Any:
        out = advance(self, known)
        self._mysql_cdc_status_start = self.packet.read_bytes
        return out

    def read_status_var(self: Any, key: int) -> None:
        try:
            read_var(self, key)
        except StatusVariableMismatch:
            start = getattr(self, "_mysql_cdc_status_start", None)
            if start is None:
                raise
            self.packet.advance(start + self.status_vars_length - self.packet.read_bytes)

    QueryEvent._advance_to_payload = advance_to_payload
    QueryEvent._read_status_vars_value_for_key = read_status_var

    def read_binary_json(self: Any, size: int, is_partial: bool) -> Any:
        value = read_json(self, size, is_partial)
        return JSON_NULL if value is None and not is_partial else value

    read_binary_json._mysql_cdc = True  # type: ignore[attr-defined]
    BinLogPacketWrapper.read_binary_json = read_binary_json


def _library_rows(ev: Any, where: str, file: str, pos: int, gtid: str | None, ts: int, ev_start: int
                  ) -> Iterator[BinlogRow]:
    """The rows of a rows event as python-mysql-replication decodes them (images as dicts)."""
    from pymysqlreplication.row_event import UpdateRowsEvent, WriteRowsEvent

    for i, row in enumerate(ev.rows):
        if isinstance(ev, WriteRowsEvent):
            yield BinlogRow(ev.schema, ev.table, "insert", None, _image(row, "", where), file, pos, gtid, ts,
                            ev_start, i)
        elif isinstance(ev, UpdateRowsEvent):
            yield BinlogRow(ev.schema, ev.table, "update", _image(row, "before_", where),
                            _image(row, "after_", where), file, pos, gtid, ts, ev_start, i)
        else:
            yield BinlogRow(ev.schema, ev.table, "delete", _image(row, "", where), None, file, pos, gtid, ts,
                            ev_start, i)


def read_transactions(profile: ConnectionProfile, server_id: int, start: BinlogOffset, tables: set[TableId], *,
                      flavor: str, auto_position: bool, end: BinlogOffset | None = None,
                      on_schema_change: Callable[[SchemaChange], None] | None = None,
                      skip_before: int | None = None, decode_rows: bool = True,
                      on_ddl: Callable[[str, str], None] | None = None,
                      decoders: RowDecoders | None = None, piece: int = 0,
                      server_version: tuple[int, int, int] | None = None,
                      allow_statement_writes: bool = False) -> Iterator[Transaction]:
    """Committed transactions touching ``tables`` after ``start``, with their captured rows.

    From ``start.file``/``start.pos`` (a transaction boundary), or with ``auto_position`` by GTID
    auto-positioning from ``start.gtids`` (MySQL: every transaction not in that set). Stops at ``end`` (a
    transaction boundary: transactions committed at or before it are read) or, without one, at the end of the
    binlog. Transactions that do not touch ``tables`` are yielded with no rows, so callers see boundaries
    move. A transaction whose boundary is not past the last one yielded is dropped: after a reconnect the
    library may re-send (from the start position, or from the GTID set), and nothing comes out twice.
    ``skip_before`` drops events with a timestamp before it (startup from a timestamp). ``decode_rows=False``
    reads boundaries and DDL only: row events are not decoded (transactions come without rows). ``on_ddl``
    is told every DDL statement (with its default database) before the transaction it makes is yielded. With
    ``decoders``, rows events of tables whose table map matches their schema are decoded by
    :mod:`udtf.binlog.rowimage` (images come as canonical tuples); others by the library (dicts). With ``piece``
    > 0 (and no ``skip_before``), a transaction is yielded in pieces of about that many rows as its rows events
    arrive, so that memory holds a piece, not a whole transaction; its last piece comes at its commit. The binlog
    holds a transaction's rows only once it committed (XA PREPARE excepted, refused as before). A statement logged as
    SQL text that may change rows stops the read (:func:`statement_write_error`), read as the server of
    ``server_version`` runs it (:func:`executed_text`); with ``allow_statement_writes`` only one that names a
    captured table does."""
    from pymysqlreplication import BinLogStreamReader
    from pymysqlreplication.event import (
        GtidEvent,
        MariadbGtidEvent,
        NotImplementedEvent,
        QueryEvent,
        RotateEvent,
        XAPrepareEvent,
        XidEvent,
    )
    from pymysqlreplication.row_event import (
        DeleteRowsEvent,
        PartialUpdateRowsEvent,
        UpdateRowsEvent,
        WriteRowsEvent,
    )

    _adapt_library()

    if end is not None and not auto_position and start.position_key() >= end.position_key():
        return
    settings = {"host": profile.host, "port": profile.port, "user": profile.user, "password": profile.password,
                "charset": "utf8mb4", "connect_timeout": max(1, int(round(profile.connect_timeout))),
                "init_command": "SET SESSION time_zone = '+00:00'", "read_timeout": READ_TIMEOUT,
                **pymysql_kwargs(profile)}
    kw: dict[str, Any] = {}
    if auto_position:
        kw["auto_position"] = start.gtids or ""
    else:
        kw.update(log_file=start.file, log_pos=start.pos, resume_stream=True)
    row_events = (WriteRowsEvent, UpdateRowsEvent, PartialUpdateRowsEvent, DeleteRowsEvent)
    stream = BinLogStreamReader(
        connection_settings=settings, server_id=server_id, blocking=False, pymysql_wrapper=guarded_connect,
        # PartialUpdateRowsEvent: an update logged with partial JSON (refused below, never skipped);
        # NotImplementedEvent: events the library cannot decode, checked for compressed ones below
        only_events=[GtidEvent, MariadbGtidEvent, XidEvent, XAPrepareEvent, QueryEvent, RotateEvent,
                     NotImplementedEvent, *(row_events if decode_rows else ())],
        filter_non_implemented_events=False,
        only_schemas=sorted({t.database for t in tables}), only_tables=sorted({t.table for t in tables}),
        # the library's MariaDB mode starts from a GTID state and ignores file/position
        is_mariadb=flavor == "mariadb" and auto_position, enable_logging=False, freeze_schema=True, **kw)
    wanted = {(t.database, t.table) for t in tables}
    end_key = end.position_key() if end is not None else None
    last = start.position_key() if not auto_position else None
    file = start.file
    gtid: str | None = None
    rows: list[BinlogRow] = []
    ts = 0

    pieces = piece > 0 and skip_before is None
    in_pieces = ""  # the table whose rows of the open transaction went out in pieces first ("": none did)
    sent_upto: tuple[Any, ...] | None = None  # the last rows event whose rows went out in a piece

    ts_set = False  # the open transaction's time was read

    def boundary(pos: int) -> Transaction | None:
        nonlocal rows, gtid, last, in_pieces, ts_set
        key = BinlogOffset(file, pos).position_key()
        txn = None
        if last is None or key > last:
            txn = Transaction(gtid, file, pos, ts, tuple(rows))
            last = key
        rows = []
        gtid = None
        in_pieces = ""
        ts_set = False
        return txn

    described: set[int] = set()  # table ids whose table map was checked for column metadata
    try:
        for ev in stream:
            pos = int(ev.packet.log_pos)
            if isinstance(ev, RotateEvent):
                file = ev.next_binlog
                continue
            if end_key is not None and last is not None and last >= end_key:
                return
            # a transaction starting at or past the end belongs to a later read: after a rotation the end can be
            # the new file's first position while the last boundary seen is still in the old file. Transactions
            # start with a GTID (MySQL without GTIDs: an anonymous one) or a query event (BEGIN, or a DDL
            # statement), never with a row event.
            unknown = isinstance(ev, NotImplementedEvent)
            starts = isinstance(ev, GtidEvent | MariadbGtidEvent | QueryEvent) or (
                unknown and ev.event_type == ANONYMOUS_GTID_EVENT)
            if end_key is not None and starts and \
                    BinlogOffset(file, pos - int(ev.packet.event_size)).position_key() >= end_key:
                return
            if unknown:
                if ev.event_type == ANONYMOUS_GTID_EVENT:  # a transaction begins (MySQL without GTIDs)
                    ts = int(ev.timestamp)
                    ts_set = True
                if ev.event_type in UNREADABLE_EVENTS:
                    raise ServerSettingError(f"the binlog holds an event at {file}:{pos} that cannot be read here: "
                                             f"{UNREADABLE_EVENTS[ev.event_type]}")
                continue  # anonymous GTIDs, heartbeats and other events without rows
            if isinstance(ev, GtidEvent | MariadbGtidEvent):
                rows = []
                gtid = str(ev.gtid)
                ts = int(ev.timestamp)
                ts_set = True
                continue
            if isinstance(ev, XAPrepareEvent) and not ev.one_phase:
                # XA PREPARE: the rows are in the binlog now, but XA COMMIT or XA ROLLBACK of them comes later as a
                # statement of its own, which this reader does not follow: delivering them now could deliver
                # rolled-back rows, dropping them would lose committed ones
                if (rows or in_pieces) and (skip_before is None or ts >= skip_before):
                    which = in_pieces or f"{rows[0].database}.{rows[0].table}"
                    raise BinlogError(
                        f"table {which} was changed by an XA transaction prepared at "
                        f"{file}:{pos} (XA PREPARE); its commit or rollback is logged later, apart from its rows, "
                        "and is not followed here, so its changes can be neither delivered nor skipped safely: "
                        "commit XA transactions on captured tables with XA COMMIT ... ONE PHASE (logged like any "
                        "transaction), and take a new snapshot after this one")
                txn = boundary(pos)
                if txn is not None:
                    yield txn
                continue
            if isinstance(ev, XidEvent | XAPrepareEvent) or (
                    isinstance(ev, QueryEvent) and ev.query.strip().upper() == "COMMIT"):
                if skip_before is not None and ts < skip_before:
                    rows = []
                txn = boundary(pos)
                if txn is not None:
                    yield txn
                continue
            if isinstance(ev, QueryEvent):
                q = ev.query.strip()
                if q.upper() in ("BEGIN", "XA START") or q.upper().startswith("XA "):
                    continue
                db = ev.schema.decode() if isinstance(ev.schema, bytes) else str(ev.schema or "")
                late = skip_before is None or int(ev.timestamp) >= skip_before
                run = executed_text(q, flavor, server_version)
                if late and writes_rows(run) and (
                        not allow_statement_writes or statement_dml_tables(run, db, tables)):
                    raise statement_write_error(run, db, tables, f"{file}:{pos}")
                changed = ddl_tables(q, db, tables)
                if on_ddl is not None and late and _DDL.match(q):
                    on_ddl(q, db)
                if on_schema_change is not None and late:
                    for t in changed:
                        on_schema_change(SchemaChange(t, q, file, pos, db, gtid))
                txn = boundary(pos)  # a DDL statement is a transaction of its own
                if txn is not None:
                    yield txn
                continue
            if (ev.schema, ev.table) not in wanted:
                continue
            if sent_upto is not None and BinlogOffset(file, pos).position_key() <= sent_upto:
                continue  # re-sent after a reconnect: its rows went out in a piece already
            if not ts_set:  # a transaction's time is its first event's: known before its rows, read in pieces
                ts = int(ev.timestamp)
                ts_set = True
            where = f"{ev.schema}.{ev.table} at {file}:{pos}"
            if ev.table_id not in described:
                _check_described(ev.columns, where)
                described.add(ev.table_id)
            if isinstance(ev, PartialUpdateRowsEvent):
                _refuse_partial_json(ev.rows, where)
            ev_start = pos - int(ev.packet.event_size)
            images = None if decoders is None or isinstance(ev, PartialUpdateRowsEvent) else \
                decoders.images(ev, where)
            if images is not None:
                if isinstance(ev, WriteRowsEvent):
                    rows.extend(BinlogRow(ev.schema, ev.table, "insert", None, img, file, pos, gtid, ts, ev_start,
                                          i) for i, img in enumerate(images))
                elif isinstance(ev, UpdateRowsEvent):
                    rows.extend(BinlogRow(ev.schema, ev.table, "update", images[2 * i], images[2 * i + 1], file,
                                          pos, gtid, ts, ev_start, i) for i in range(len(images) // 2))
                else:
                    rows.extend(BinlogRow(ev.schema, ev.table, "delete", img, None, file, pos, gtid, ts, ev_start,
                                          i) for i, img in enumerate(images))
            else:
                rows.extend(_library_rows(ev, where, file, pos, gtid, ts, ev_start))
            if pieces and len(rows) >= piece:
                in_pieces = in_pieces or f"{rows[0].database}.{rows[0].table}"
                yield Transaction(gtid, file, pos, ts, tuple(rows), complete=False)
                rows = []
                sent_upto = BinlogOffset(file, pos).position_key()
    except BinlogError:
        raise
    except Exception as e:
        args = getattr(e, "args", ())
        if args and args[0] == 1236:
            said = str(args[1]) if len(args) > 1 else ""
            if re.search(r"could not find first log file|purged|not find.*binlog|binlog.*not.*found", said, re.I):
                raise BinlogError(f"the server cannot send the binlog from {start.to_dict()!r}: {said!r}; the "
                                  "binlog files this read needs were purged: take a new snapshot (start the stream "
                                  "with a new state_dir and checkpoint)") from None
            raise BinlogError(f"the server cannot send the binlog from {start.to_dict()!r}: {said!r}; a position "
                              "must be the end of an event (see SHOW BINLOG EVENTS), inside the file") from None
        raise
    finally:
        stream.close()


def read_row_changes(profile: ConnectionProfile, server_id: int, start: BinlogOffset, tables: set[TableId],
                     *, flavor: str, use_gtid: bool, done: Callable[[str | None, str, int], bool],
                     decoders: RowDecoders | None = None, server_version: tuple[int, int, int] | None = None,
                     allow_statement_writes: bool = False) -> Iterator[BinlogRow]:
    """Row changes of ``tables`` from ``start`` (exclusive), transaction by transaction, until
    ``done(gtid, file, end)`` says so after a transaction (used by the snapshot backfill)."""
    for txn in read_transactions(profile, server_id, start, tables, flavor=flavor, auto_position=use_gtid,
                                 decoders=decoders, server_version=server_version,
                                 allow_statement_writes=allow_statement_writes):
        yield from txn.rows
        if done(txn.gtid, txn.file, txn.end):
            return


def gtid_window_done(needed: GtidSet) -> Callable[[str | None, str, int], bool]:
    """A ``done`` test for a GTID backfill: true once every transaction of ``needed`` has passed."""
    remaining = needed.count()
    seen: set[str] = set()

    def done(gtid: str | None, file: str, pos: int) -> bool:
        if gtid is not None and gtid not in seen and needed.contains_gtid(gtid):
            seen.add(gtid)
        return len(seen) >= remaining

    return done


def position_window_done(high: BinlogOffset) -> Callable[[str | None, str, int], bool]:
    """A ``done`` test for a position backfill: true once the stream reached the high watermark."""
    target = high.position_key()

    def done(gtid: str | None, file: str, pos: int) -> bool:
        return BinlogOffset(file, pos).position_key() >= target

    return done
