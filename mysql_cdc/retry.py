"""When a failed connection or query is tried again, and for how long: the policy of a running capture.

A capture that runs for months meets servers restarted for an upgrade, failovers, network stalls, connections
killed by an administrator and rotated passwords. Each shows as one of a few driver errors (:data:`TRANSIENT`);
a running capture tries again after a growing pause (:func:`backoff`: 1, 2, 4, ... up to 30 s) until
``reconnect_timeout`` seconds have passed since the first failure in a row, then stops with one
:class:`~mysql_cdc.errors.ConnectionLostError` naming the last cause. Any other error (a missing table, a
privilege, a bad value) is raised at once, and so is everything before a capture runs: a wrong password or
host at the start is a mistake to report, not to wait out.

>>> import itertools
>>> list(itertools.islice(backoff(), 8))
[1.0, 2.0, 4.0, 8.0, 16.0, 30.0, 30.0, 30.0]
>>> clock = iter(range(0, 1000, 7)).__next__  # each try takes 7 s, the server never answers
>>> def fn():
...     raise OSError(2003, "Can't connect")
>>> try:
...     keep_trying(fn, 30, "reading chunk 3", sleep=lambda s: None, clock=clock)
... except ConnectionLostError as e:
...     print(e)
reading chunk 3: the server was not reached again within 30 s (reconnect_timeout); last error: OSError 2003 Can't ...
"""

from __future__ import annotations

import logging
import socket
import ssl
import time
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

from mysql_cdc.errors import ConnectError, ConnectionLostError

T = TypeVar("T")
_log = logging.getLogger("mysql_cdc")

# driver and server error numbers that say the connection, not the request, failed
TRANSIENT = {
    1040: "too many connections",
    1045: "access denied (a rotated password: the profile's password is read again)",
    1053: "server shutdown in progress",
    1152: "aborted connection",
    1158: "network read error", 1159: "network read timeout", 1160: "network write error",
    1161: "network write timeout",
    1317: "query interrupted (KILL QUERY)",
    1927: "connection killed (MariaDB)",
    2002: "cannot connect through the socket", 2003: "cannot connect", 2005: "unknown host (DNS)",
    2006: "server has gone away", 2013: "lost connection during a query",
    2055: "lost connection at reading a packet",
    4031: "disconnected by the server for inactivity",
}


def error_code(exc: BaseException) -> int | None:
    """The error number a driver error (or our :class:`ConnectError`) carries."""
    code = getattr(exc, "code", None)
    if isinstance(code, int):
        return code
    args = getattr(exc, "args", ())
    return args[0] if args and isinstance(args[0], int) and not isinstance(args[0], bool) else None


def is_transient(exc: BaseException) -> bool:
    """Whether ``exc`` says the connection failed (worth trying again) rather than the request.

    >>> import pymysql
    >>> is_transient(pymysql.err.OperationalError(2013, "Lost connection")), is_transient(ConnectionResetError())
    (True, True)
    >>> is_transient(pymysql.err.ProgrammingError(1146, "Table 'd.t' doesn't exist")), is_transient(KeyError(2013))
    (False, False)
    """
    if isinstance(exc, ConnectionLostError):
        return False  # already given up on
    if isinstance(exc, ConnectionError | TimeoutError | socket.timeout | socket.gaierror | ssl.SSLEOFError):
        return True
    if isinstance(exc, KeyError | IndexError | ValueError | TypeError):
        return False
    code = error_code(exc)
    return code in TRANSIENT and (isinstance(exc, ConnectError | OSError) or _driver_error(exc))


def _driver_error(exc: BaseException) -> bool:
    """An error of pymysql or mysqlclient (both follow DB-API: their errors are named so)."""
    return any(k.__module__.split(".")[0] in ("pymysql", "MySQLdb", "_mysql") for k in type(exc).__mro__)


def backoff(first: float = 1.0, most: float = 30.0) -> Iterator[float]:
    """The pauses between tries: doubling from ``first``, at most ``most``."""
    delay = first
    while True:
        yield delay
        delay = min(most, delay * 2)


def describe(exc: BaseException) -> str:
    """An error in one line, for the log and the final message (no password is ever in a driver's message)."""
    code = error_code(exc)
    args: tuple[Any, ...] = tuple(getattr(exc, "args", ()))
    text = str(args[1]) if code is not None and len(args) > 1 else str(exc)
    return f"{type(exc).__name__}{'' if code is None else f' {code}'} {text}".strip()[:300]


def keep_trying(fn: Callable[[], T], within: float, what: str, *, sleep: Callable[[float], None] = time.sleep,
                clock: Callable[[], float] = time.monotonic) -> T:
    """``fn()``, tried again after each transient failure (:func:`is_transient`) with :func:`backoff` pauses,
    until ``within`` seconds passed since the first failure; ``within`` 0: once. ``what`` names the work in
    the log and the final error."""
    if within <= 0:
        return fn()
    started: float | None = None
    pauses = backoff()
    while True:
        try:
            return fn()
        except Exception as e:
            if not is_transient(e):
                raise
            now = clock()
            started = now if started is None else started
            left = within - (now - started)
            if left <= 0:
                raise ConnectionLostError(
                    f"{what}: the server was not reached again within {within:g} s (reconnect_timeout); last error: "
                    f"{describe(e)}", error_code(e)) from e
            pause = min(next(pauses), left)
            _log.warning("mysql_cdc: %s failed (%s); trying again in %.0f s", what, describe(e), pause)
            sleep(pause)
