"""Connections to the source server, with errors that name the cause and never the password.

Two drivers: pymysql (planner, metadata, binlog library) and mysqlclient/MySQLdb (the chunk SELECT hot path,
about 6x faster than pymysql here). Every session of the capture (these, connectorx's and the binlog library's)
starts with :data:`SESSION_INIT`: ``time_zone = '+00:00'``, so TIMESTAMP values and bounds round-trip as UTC
whatever the server's zone, and ``sql_mode = ''``, so our SQL and the values it reads mean the same whatever the
server's global mode: not a CHAR padded to its length (PAD_CHAR_TO_FULL_LENGTH), not MariaDB's ORACLE (whose
CONCAT skips a NULL, and whose column types read ``blob(65535)``), not NO_BACKSLASH_ESCAPES or ANSI_QUOTES under
the drivers' quoting; ``sql_select_limit`` at its largest (a global limit cut every SELECT short: the server
checks read too few settings, a chunk too few rows); and ``sql_big_selects`` on (a global ``max_join_size``
refused a large chunk's SELECT). The capture never writes to the source, so no strictness is lost. Each
session reads at REPEATABLE READ (:data:`READ_VIEWS`), with no time limit on a statement, and on MySQL shows a
generated invisible primary key (:data:`OWN_SESSION`).
"""

from __future__ import annotations

import atexit
import functools
import os
import shutil
import socket
import ssl
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import pymysql
import pymysql.cursors

from mysql_cdc.errors import ConnectError, PrivilegeError
from mysql_cdc.profiles import ConnectionProfile
from mysql_cdc.retry import keep_trying

SESSION_INIT = ("SET SESSION time_zone = '+00:00', sql_mode = '', sql_select_limit = 18446744073709551615, "
                "sql_big_selects = 1")
# every reading session at REPEATABLE READ, whatever the server's global level: START TRANSACTION WITH CONSISTENT
# SNAPSHOT opens its read view there only at this level (under READ COMMITTED the view came with the SELECT, after
# the binlog point MariaDB's snapshot watermark and a pinned read record, so a write between them was in the chunk
# and emitted again by the binlog); SERIALIZABLE made the chunks' SELECTs take shared locks on their rows
READ_VIEWS = "SET SESSION TRANSACTION ISOLATION LEVEL REPEATABLE READ"


# the settings of a session of ours that one server has and the other has not (each tried, an unknown variable
# passed over: no version text to parse, which proxies and managed services give in their own forms):
# - no time limit on a statement (MySQL's max_execution_time, MariaDB's max_statement_time): a global one a DBA set
#   against runaway queries stopped a large chunk's SELECT, or verify's checksum of one;
# - MySQL (8.0.30 on): a table made under sql_generate_invisible_primary_key shows its primary key my_row_id in
#   information_schema (a global show_gipk_in_create_table_and_information_schema OFF hid it, while the binlog's
#   rows hold it: the table was planned without its key and its first change stopped the read)
OWN_SESSION = ("SET SESSION max_execution_time = 0", "SET SESSION max_statement_time = 0",
               "SET SESSION show_gipk_in_create_table_and_information_schema = ON")
_UNKNOWN_VARIABLE = 1193


def own_session(conn: Any) -> None:
    """Run :data:`OWN_SESSION` on ``conn`` (pymysql's or mysqlclient's), each statement alone, passing over a
    variable the server does not have."""
    for statement in OWN_SESSION:
        try:
            conn.query(statement)
        except Exception as e:  # the drivers' errors: the server's code first
            if not (e.args and e.args[0] == _UNKNOWN_VARIABLE):
                raise


def _describe(p: ConnectionProfile) -> str:
    return f"{p.user!r}@{p.host}:{p.port}"


def connect_error(p: ConnectionProfile, exc: BaseException) -> ConnectError:
    """Map a driver error at login time to one clear :class:`ConnectError` (no password in it), with its code."""
    error = _connect_error(p, exc)
    error.code = exc.args[0] if exc.args and isinstance(exc.args[0], int) else None
    if isinstance(exc, OSError | socket.timeout) and not isinstance(exc, ssl.SSLError):
        error.code = 2003  # the socket's own error (refused, unreachable, timed out): the server was not reached
    return error


def _connect_error(p: ConnectionProfile, exc: BaseException) -> ConnectError:
    code = exc.args[0] if exc.args and isinstance(exc.args[0], int) else None
    if code == 1045:
        return ConnectError(f"login refused for {_describe(p)}: wrong user or password (server error 1045); "
                            "check the connection profile's user and password")
    if code == 1049:
        return ConnectError(f"unknown database on {p.host}:{p.port}: {exc.args[1] if len(exc.args) > 1 else ''}")
    text = str(exc.args[1]) if len(exc.args) > 1 else str(exc)
    if code in (2026, 3159, 3889) or isinstance(exc, ssl.SSLError) or "SSL" in text or "TLS" in text \
            or "secure transport" in text or "certificate" in text.lower():
        return ConnectError(f"TLS to {p.host}:{p.port} failed with ssl_mode {p.ssl_mode!r} ({type(exc).__name__} "
                            f"{code}: {text[:200]}); check the profile's ssl_mode and ssl_ca (the CA that signed the "
                            "server's certificate; verify_identity also needs the host to match the certificate)")
    if code in (2003, 2002, 2005, 2013) or isinstance(exc, OSError | socket.timeout):
        return ConnectError(f"cannot reach MySQL at {p.host}:{p.port} within {p.connect_timeout:g} s "
                            f"({type(exc).__name__}: {exc.args[1] if len(exc.args) > 1 else exc}); check host, "
                            "port and that the server is running")
    return ConnectError(f"cannot connect as {_describe(p)}: {type(exc).__name__} {code}")


def tls_context(p: ConnectionProfile) -> ssl.SSLContext | None:
    """The TLS context of a profile's ssl_mode for pymysql (the planner and the binlog stream); ``None`` for
    disabled and preferred (the driver's own choice: TLS when the server offers it)."""
    if p.ssl_mode in ("disabled", "preferred"):
        return None
    try:
        ctx = ssl.create_default_context(cafile=p.ssl_ca)
    except (OSError, ssl.SSLError) as e:
        raise ConnectError(f"cannot read the CA certificate file {p.ssl_ca!r} of the profile for {p.host}:{p.port}: "
                           f"{type(e).__name__}: {e}") from None
    ctx.verify_flags &= ~getattr(ssl, "VERIFY_X509_STRICT", 0)  # servers' own generated certificates lack it
    ctx.check_hostname = p.ssl_mode == "verify_identity"
    ctx.verify_mode = ssl.CERT_NONE if p.ssl_mode == "required" else ssl.CERT_REQUIRED
    return ctx


def clear_text_refused(p: ConnectionProfile) -> ConnectError:
    return ConnectError(
        f"the server at {p.host}:{p.port} asked for the password of user {p.user!r} in clear text "
        "(mysql_clear_password) over a connection without TLS; it was not sent: give the profile ssl_mode "
        "'required' or stronger (and TLS on the server), or log in with a plugin that does not send the password "
        "(caching_sha2_password, mysql_native_password, ed25519)")


class _ClearTextOverTls:
    """pymysql's handler of the ``mysql_clear_password`` plugin (LDAP and PAM logins): the password goes only
    over TLS. pymysql itself would send it over any connection, to any server that asks."""

    def __init__(self, conn: Any) -> None:
        self.conn = conn

    def authenticate(self, pkt: Any) -> Any:
        if not getattr(self.conn, "_secure", False):
            raise clear_text_refused(self.conn._mysql_cdc_profile)
        self.conn.write_packet(self.conn.password + b"\0")
        answer = self.conn._read_packet()
        answer.check_error()
        return answer


class _DialogOverTls(_ClearTextOverTls):
    """MariaDB's ``dialog`` plugin (PAM) asks for the password by a prompt and gets it in clear text: over TLS
    only, as :class:`_ClearTextOverTls`."""

    def prompt(self, echo: bool, prompt: bytes) -> bytes:
        if not getattr(self.conn, "_secure", False):
            raise clear_text_refused(self.conn._mysql_cdc_profile)
        return bytes(self.conn.password)


class _GuardedConnection(pymysql.connections.Connection):
    """A pymysql connection that knows its profile before it logs in (for the clear-text guard's message)."""

    def __init__(self, *args: Any, mysql_cdc_profile: ConnectionProfile, **kw: Any) -> None:
        self._mysql_cdc_profile = mysql_cdc_profile
        super().__init__(*args, **kw)


def pymysql_kwargs(p: ConnectionProfile) -> dict[str, Any]:
    """pymysql's keyword arguments for a profile's login: TLS by its ssl_mode, and the clear-text guard (a
    password in clear text only over TLS). For python-mysql-replication's connection settings too."""
    kw: dict[str, Any] = {"auth_plugin_map": {"mysql_clear_password": _ClearTextOverTls, "dialog": _DialogOverTls},
                          "mysql_cdc_profile": p}
    if p.ssl_mode == "disabled":
        return {**kw, "ssl_disabled": True}
    ctx = tls_context(p)
    return kw if ctx is None else {**kw, "ssl": ctx}


def guarded_connect(**kw: Any) -> pymysql.connections.Connection:
    """``pymysql.connect`` for keyword arguments made with :func:`pymysql_kwargs` (python-mysql-replication's
    ``db`` given as ``database``, its name now). For a running capture's profile (the binlog library connects
    again through here after a lost connection), tried again as :func:`connect` is, with the password read
    again."""
    if "db" in kw:
        kw["database"] = kw.pop("db")
    p: ConnectionProfile = kw["mysql_cdc_profile"]

    def once() -> pymysql.connections.Connection:
        return _GuardedConnection(**{**kw, "password": p.login_password()} if p.password_from else kw)

    return keep_trying(once, p.reconnect_timeout, f"connecting to {p.host}:{p.port}")


def connect(p: ConnectionProfile, *, dict_cursor: bool = False, autocommit: bool = True, **kw: Any
            ) -> pymysql.connections.Connection:
    """A pymysql connection in UTC. The connect timeout bounds the whole login (a host that accepts the TCP
    connection but never answers fails too); later reads have no timeout unless ``read_timeout`` is given, or
    the profile is a running capture's (:func:`mysql_cdc.profiles.running`: its read timeout, and failed
    logins tried again for its ``reconnect_timeout``, the password read again each time)."""
    timeout = max(1, int(round(p.connect_timeout)))
    read_timeout = kw.pop("read_timeout", None) or p.read_timeout or None

    def once() -> pymysql.connections.Connection:
        try:
            return guarded_connect(
                host=p.host, port=p.port, user=p.user, password=p.login_password(), charset="utf8mb4",
                connect_timeout=timeout, read_timeout=timeout, write_timeout=timeout, autocommit=autocommit,
                cursorclass=pymysql.cursors.DictCursor if dict_cursor else pymysql.cursors.Cursor,
                init_command=SESSION_INIT, **pymysql_kwargs(replace(p, reconnect_timeout=0.0)), **kw)
        except pymysql.err.MySQLError as e:
            raise connect_error(p, e) from None
        except OSError as e:
            raise connect_error(p, e) from None

    conn = keep_trying(once, p.reconnect_timeout, f"connecting to {p.host}:{p.port}")
    conn.query(READ_VIEWS)
    own_session(conn)
    conn._read_timeout = read_timeout
    conn._write_timeout = read_timeout
    return conn


# the login plugins mysqlclient (MariaDB Connector/C) may use: none that sends the password in clear text
# (mysql_clear_password, dialog), which Connector/C would do over any connection; such a login goes to pymysql,
# which sends it over TLS only
_MYSQLDB_PLUGINS = "mysql_native_password,caching_sha2_password,sha256_password,client_ed25519,auth_gssapi_client"
_RESTRICTED_AUTH = 5010  # Connector/C: the server asked for a plugin outside restricted-auth


@functools.cache
def _mysqldb_option_file() -> str:
    """A private option file (a new 0700 folder, the file 0600) that holds Connector/C to :data:`_MYSQLDB_PLUGINS`:
    Connector/C takes ``restricted-auth`` from an option file only."""
    folder = tempfile.mkdtemp(prefix="mysql_cdc_client_")
    atexit.register(shutil.rmtree, folder, True)
    path = os.path.join(folder, "client.cnf")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600)
    with os.fdopen(fd, "w", encoding="ascii") as f:
        f.write(f"[client]\nrestricted-auth={_MYSQLDB_PLUGINS}\n")
    return path


def connect_fast(p: ConnectionProfile) -> Any:
    """A mysqlclient (MySQLdb) connection in UTC, for streaming chunk SELECTs; a pymysql one where mysqlclient
    is not installed (a Spark Connect server that only got the shipped pure-Python code), or where the server
    asks for a login plugin that sends the password in clear text (pymysql sends it over TLS only)."""
    if p.ssl_mode in ("verify_ca", "verify_identity"):
        # certificates are verified by pymysql: MariaDB Connector/C (under mysqlclient) checks the host name too
        # whenever it verifies one, and its handling of ssl_mode was not found to be enforced (below)
        return connect(p)
    try:
        import MySQLdb
    except ImportError:
        return connect(p)

    tls: dict[str, Any] = {"ssl_mode": p.ssl_mode.upper()} if p.ssl_mode in ("disabled", "required") else {}
    # a running capture's reads give up after its read timeout (Connector/C tries a read 3 times: a third of it)
    timeouts = {"read_timeout": max(1, int(p.read_timeout / 3)), "write_timeout": max(1, int(p.read_timeout))} \
        if p.read_timeout else {}

    def once() -> Any:
        try:
            return MySQLdb.connect(host=p.host, port=p.port, user=p.user, password=p.login_password(),
                                   charset="utf8mb4", connect_timeout=max(1, int(round(p.connect_timeout))),
                                   autocommit=True, init_command=SESSION_INIT,
                                   read_default_file=_mysqldb_option_file(), **timeouts, **tls)
        except MySQLdb.MySQLError as e:
            if e.args and e.args[0] == _RESTRICTED_AUTH:
                return None
            raise connect_error(p, e) from None

    conn = keep_trying(once, p.reconnect_timeout, f"connecting to {p.host}:{p.port}")
    if conn is None:
        return connect(p)
    conn.query(READ_VIEWS)
    own_session(conn)
    if p.ssl_mode == "required":
        # MariaDB Connector/C connected in plain text to a server without TLS despite ssl_mode=REQUIRED (measured):
        # the session itself says whether it is encrypted
        cur = conn.cursor()
        cur.execute("SHOW SESSION STATUS LIKE 'Ssl_cipher'")
        row = cur.fetchone()
        cur.close()
        if not row or not row[1]:
            conn.close()
            raise ConnectError(f"TLS to {p.host}:{p.port} failed with ssl_mode 'required': the server accepted a "
                               "connection without TLS (it offers none); enable TLS on the server, or check the "
                               "profile's ssl_mode and ssl_ca")
    return conn


@dataclass(frozen=True)
class ServerFacts:
    """What kind of server this is and how it writes its binlog."""

    flavor: str  # "mysql" or "mariadb"
    version: tuple[int, int, int]
    version_text: str
    variables: dict[str, str]

    @property
    def gtid_mode(self) -> bool:
        return self.flavor == "mysql" and self.variables.get("gtid_mode", "OFF").upper() == "ON"

    @property
    def status_sql(self) -> str:
        """The statement that shows the binlog end: renamed in MySQL 8.2."""
        if self.flavor == "mysql" and self.version >= (8, 2, 0):
            return "SHOW BINARY LOG STATUS"
        return "SHOW MASTER STATUS"


FACT_VARIABLES = ("log_bin", "binlog_format", "binlog_row_image", "binlog_row_metadata", "gtid_mode",
                  "server_id", "binlog_checksum", "binlog_row_value_options", "binlog_transaction_compression",
                  "log_bin_compress")


def server_facts(conn: Any) -> ServerFacts:
    cur = conn.cursor()
    cur.execute("SELECT VERSION()")
    text = str(cur.fetchone()[0])
    names = ", ".join(f"'{n}'" for n in FACT_VARIABLES)
    cur.execute(f"SHOW GLOBAL VARIABLES WHERE Variable_name IN ({names})")
    variables = {str(k).lower(): str(v) for k, v in cur.fetchall()}
    cur.close()
    nums = [int(x) for x in text.split("-")[0].split(".")[:3] if x.isdigit()]
    while len(nums) < 3:
        nums.append(0)
    flavor = "mariadb" if "mariadb" in text.lower() else "mysql"
    return ServerFacts(flavor, (nums[0], nums[1], nums[2]), text, variables)


ConnectionFactory = Callable[[ConnectionProfile], Any]


def streaming_cursor(conn: Any) -> Any:
    """An unbuffered cursor (rows stream from the server) for either driver."""
    if isinstance(conn, pymysql.connections.Connection):
        return conn.cursor(pymysql.cursors.SSCursor)
    import MySQLdb.cursors

    return conn.cursor(MySQLdb.cursors.SSCursor)


def registered_replica_ids(conn: Any) -> set[int] | None:
    """Server ids of the replicas registered with the server (a real replica registers when it connects:
    ``SHOW REPLICAS`` on MySQL, ``SHOW REPLICA HOSTS`` on MariaDB, which needs REPLICATION MASTER ADMIN there);
    ``None`` when the user may not list them."""
    cur = conn.cursor()
    try:
        for sql in ("SHOW REPLICAS", "SHOW REPLICA HOSTS"):
            try:
                cur.execute(sql)
            except pymysql.err.MySQLError as e:
                if e.args and e.args[0] == 1064:  # the other server's syntax
                    continue
                if e.args and e.args[0] in (1227, 1045, 1142):
                    return None
                raise
            return {int(r[0]) for r in cur.fetchall()}
        return None
    finally:
        cur.close()


def unlisted_replicas(ids: range) -> PrivilegeError:
    """The error for a capture user that may not list the server's replicas: a binlog reader could take the
    server id of a replica and make the server drop that replica's connection."""
    return PrivilegeError(
        "the capture user may not list the server's replicas (MariaDB: SHOW REPLICA HOSTS needs REPLICATION MASTER "
        "ADMIN), so a binlog reader could take a server id one of them uses and cut it off: GRANT REPLICATION "
        f"MASTER ADMIN ON *.* TO the user, or set unchecked_server_ids => true (CLI --unchecked-server-ids) to "
        f"claim ids from server_id_range {ids.start}-{ids.stop - 1} without looking, kept away from your replicas' "
        "server_id by you")
