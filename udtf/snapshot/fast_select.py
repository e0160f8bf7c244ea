"""The Arrow-native chunk SELECT (connectorx): rows arrive as Arrow columns without a Python object per value.

connectorx takes no bound parameters, so chunk bounds are inlined as hex / numeric literals
(:func:`mysql_cdc.sql.sql_literal`); it opens its own connection, whose session is prepared by
``pre_execution_query``: ``SET NAMES utf8mb4``, which it does not send itself (a server that ignores the
login's character set would send text in its own), then :data:`~mysql_cdc.connect.SESSION_INIT`. Errors never
carry the connection URL (it holds the password).
"""

from __future__ import annotations

import urllib.parse
from collections.abc import Callable, Sequence

import pyarrow as pa

from mysql_cdc.chunks import Chunk
from mysql_cdc.connect import READ_VIEWS, SESSION_INIT
from mysql_cdc.errors import MysqlCdcError
from mysql_cdc.ids import ident, table_ident
from mysql_cdc.profiles import ConnectionProfile
from mysql_cdc.schema import TableSchema
from mysql_cdc.sql import chunk_where, inline_params
from mysql_cdc.udtf.convert import fast_select_expr


class FastPathUnavailable(MysqlCdcError):
    """The Arrow-native path could not read this chunk; the caller uses the mysqlclient path instead."""


def fast_columns(schema: TableSchema) -> list[str] | None:
    exprs = []
    for c in schema.columns:
        e = fast_select_expr(c, ident(c.name))
        if e is None:
            return None
        exprs.append(f"{e} AS {ident(c.name)}")
    return exprs


def fast_select(profile: ConnectionProfile, schema: TableSchema, chunk: Chunk, *, extra: Sequence[str] = (),
                pre: Sequence[str] = ()) -> pa.Table:
    if profile.ssl_mode in ("required", "verify_ca", "verify_identity"):
        # connectorx is given a URL and cannot be held to a CA file: TLS that must be verified goes the other path
        raise FastPathUnavailable(f"ssl_mode {profile.ssl_mode!r} is read by the mysqlclient path")
    exprs = fast_columns(schema)
    if exprs is None:
        raise FastPathUnavailable(f"table {str(schema.table)!r} has column types the Arrow path does not read")
    where, params = chunk_where(chunk)
    sql = inline_params(f"SELECT {', '.join([*exprs, *extra])} FROM {table_ident(chunk.table)} WHERE {where}", params)
    password = profile.login_password()
    url = (f"mysql://{urllib.parse.quote(profile.user, safe='')}:{urllib.parse.quote(password, safe='')}"
           f"@{profile.host}:{profile.port}")
    try:
        import connectorx as cx
    except ImportError:
        raise FastPathUnavailable("connectorx is not installed here") from None

    def read() -> pa.Table:
        return cx.read_sql(url, sql, return_type="arrow",
                           pre_execution_query=["SET NAMES utf8mb4", SESSION_INIT, READ_VIEWS, *pre])

    try:
        return read() if not profile.read_timeout else _within(read, profile.read_timeout)
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException as e:  # connectorx raises RuntimeError, or a Rust panic (a BaseException)
        text = str(e).replace(password, "***") if password else str(e)
        raise FastPathUnavailable(f"Arrow path failed for chunk {chunk.id!r}: {type(e).__name__}: "
                                  f"{text[:300]}") from None


def _within(read: Callable[[], pa.Table], seconds: float) -> pa.Table:
    """``read()`` in a thread of its own, given up after ``seconds`` (connectorx has no read timeout; a running
    capture's read of a frozen server would wait forever): the chunk is then read by the other path, which has
    one. The thread left behind ends when the server answers or the connection dies."""
    import concurrent.futures

    pool = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="mysql-cdc-arrow")
    try:
        return pool.submit(read).result(timeout=seconds)
    except concurrent.futures.TimeoutError:
        raise TimeoutError(f"no answer within {seconds:g} s (read_timeout)") from None
    finally:
        pool.shutdown(wait=False)
