"""Connections to the source server, with errors that name the cause and never the password.

Two drivers: pymysql (planner, metadata, binlog library) and mysqlclient/MySQLdb (the chunk SELECT hot path,
about 6x faster than pymysql here). Every session runs with ``time_zone = '+00:00'`` so TIMESTAMP values
and bounds round-trip as UTC whatever the server's zone.
"""

from __future__ import annotations

import socket
import ssl
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pymysql
import pymysql.cursors

from mysql_cdc.errors import ConnectError
from mysql_cdc.options import ConnectionProfile

_SESSION_INIT = "SET SESSION time_zone = '+00:00'"


def _describe(p: ConnectionProfile) -> str:
    return f"{p.user!r}@{p.host}:{p.port}"


def connect_error(p: ConnectionProfile, exc: BaseException) -> ConnectError:
    """Map a driver error at login time to one clear :class:`ConnectError` (no password in it)."""
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


def tls_kwargs(p: ConnectionProfile) -> dict[str, Any]:
    """pymysql's keyword arguments for the profile's ssl_mode."""
    if p.ssl_mode == "disabled":
        return {"ssl_disabled": True}
    ctx = tls_context(p)
    return {} if ctx is None else {"ssl": ctx}


def connect(p: ConnectionProfile, *, dict_cursor: bool = False, autocommit: bool = True, **kw: Any
            ) -> pymysql.connections.Connection:
    """A pymysql connection in UTC. The connect timeout bounds the whole login (a host that accepts the TCP
    connection but never answers fails too), later reads have no timeout unless ``read_timeout`` is given."""
    timeout = max(1, int(round(p.connect_timeout)))
    read_timeout = kw.pop("read_timeout", None)
    try:
        conn = pymysql.connect(
            host=p.host, port=p.port, user=p.user, password=p.password, charset="utf8mb4",
            connect_timeout=timeout, read_timeout=timeout, write_timeout=timeout, autocommit=autocommit,
            cursorclass=pymysql.cursors.DictCursor if dict_cursor else pymysql.cursors.Cursor,
            init_command=_SESSION_INIT, **tls_kwargs(p), **kw)
    except pymysql.err.MySQLError as e:
        raise connect_error(p, e) from None
    except OSError as e:
        raise connect_error(p, e) from None
    conn._read_timeout = read_timeout
    conn._write_timeout = None
    return conn


def connect_fast(p: ConnectionProfile) -> Any:
    """A mysqlclient (MySQLdb) connection in UTC, for streaming chunk SELECTs; a pymysql one where mysqlclient
    is not installed (a Spark Connect server that only got the shipped pure-Python code)."""
    if p.ssl_mode in ("verify_ca", "verify_identity"):
        # certificates are verified by pymysql: MariaDB Connector/C (under mysqlclient) checks the host name too
        # whenever it verifies one, and its handling of ssl_mode was not found to be enforced (below)
        return connect(p)
    try:
        import MySQLdb
    except ImportError:
        return connect(p)

    try:
        tls: dict[str, Any] = {"ssl_mode": p.ssl_mode.upper()} if p.ssl_mode in ("disabled", "required") else {}
        conn = MySQLdb.connect(host=p.host, port=p.port, user=p.user, password=p.password, charset="utf8mb4",
                               connect_timeout=max(1, int(round(p.connect_timeout))), autocommit=True,
                               init_command=_SESSION_INIT, **tls)
    except MySQLdb.MySQLError as e:
        raise connect_error(p, e) from None
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
