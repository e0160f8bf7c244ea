"""The exception hierarchy: one root, one subclass per kind of cause.

Every message names the bad value (with ``!r``) and says how to fix it. No message ever contains a password.
"""

from __future__ import annotations


class MysqlCdcError(Exception):
    """Root of every error this project raises on purpose."""


class ConfigError(MysqlCdcError, ValueError):
    """An option, profile or argument has a bad value."""


class ConnectError(MysqlCdcError):
    """The server could not be reached or refused the login. ``code``: the driver's error number, if any."""

    def __init__(self, message: str, code: int | None = None) -> None:
        super().__init__(message)
        self.code = code

    def __reduce__(self) -> tuple[type, tuple[str, int | None]]:  # pickled from Spark's workers with its code
        return (type(self), (str(self), self.code))


class ConnectionLostError(ConnectError):
    """A running capture lost the server and could not reach it again within ``reconnect_timeout``."""


class ServerSettingError(MysqlCdcError):
    """The server runs with a setting that change data capture cannot work with."""


class PrivilegeError(MysqlCdcError):
    """The capture user lacks a privilege it needs."""


class TableError(MysqlCdcError):
    """A table pattern matched nothing, or a table cannot be captured as it is defined."""


class NoTableMatchedError(TableError):
    """The table patterns matched no table the capture user can see (a running capture of many tables may be in
    that state: its tables were dropped)."""


class ChunkKeyError(TableError):
    """A table has no usable chunk key (no primary key and no valid configured chunk key)."""


class UnsupportedTypeError(MysqlCdcError):
    """A column type has no faithful Spark representation."""


class BinlogError(MysqlCdcError):
    """The binlog could not be read as needed (purged files, lost connection, unexpected events)."""


class SchemaChangedError(BinlogError):
    """A captured table's definition changed in the binlog; the stream cannot follow it."""


class StateError(MysqlCdcError):
    """Recorded progress is missing, unreadable or inconsistent."""


LOCK_REFUSED = (1044, 1142)  # server errors of a LOCK TABLES the user has no grant for


def lock_refused(table: str, database_quoted: str, code: int) -> PrivilegeError:
    """The error for a table without a primary key that the capture user may not read-lock (server error
    ``code``), at planning or when a chunk is read."""
    return PrivilegeError(
        f"table {table!r} has no primary key: its rows are read at an exact binlog point under a brief LOCK "
        f"TABLES ... READ, which the capture user may not take (server error {code}): GRANT LOCK TABLES ON "
        f"{database_quoted}.* TO the user, add a primary key, or start from the binlog (startup 'latest'), which "
        "needs no lock")
