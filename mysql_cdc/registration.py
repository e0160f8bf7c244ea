"""``register(spark, ...)``: put the SQL functions and the data source on a classic or Spark Connect session."""

from __future__ import annotations

import hashlib
import importlib
import io
import os
import tempfile
import zipfile
from collections.abc import Mapping
from typing import Any

from mysql_cdc.errors import ConfigError
from mysql_cdc.options import ConnectionProfile, profile_from_mapping, profile_from_url

# Our packages, and the pure-Python drivers the executors need, shipped to a Connect server for batch queries.
SHIPPED_PACKAGES = ("mysql_cdc", "planner", "udtf", "state", "pymysql", "pymysqlreplication")
FUNCTIONS = ("mysql_cdc_chunks", "mysql_cdc_snapshot")


def _is_connect(spark: Any) -> bool:
    try:
        from pyspark.sql.connect.session import SparkSession as ConnectSession
    except ImportError:  # pragma: no cover - connect extras missing
        return False
    return isinstance(spark, ConnectSession)


def _profiles(profiles: Mapping[str, Any] | None) -> dict[str, ConnectionProfile]:
    out: dict[str, ConnectionProfile] = {}
    for name, p in (profiles or {}).items():
        if isinstance(p, ConnectionProfile):
            out[name] = p
        elif isinstance(p, str):
            out[name] = profile_from_url(p, name)
        elif isinstance(p, Mapping):
            out[name] = profile_from_mapping(p, name)
        else:
            raise ConfigError(f"profile {name!r} must be a ConnectionProfile, a mapping or a mysql:// URL, "
                              f"got {type(p).__name__}")
    return out


def code_zip() -> str:
    """A zip of the shipped packages, named by its content hash (Connect refuses a reused name with other bytes)."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        for pkg in SHIPPED_PACKAGES:
            mod = importlib.import_module(pkg)
            root = os.path.dirname(mod.__file__ or "")
            base = os.path.dirname(root)
            for dirpath, dirnames, filenames in os.walk(root):
                dirnames[:] = sorted(d for d in dirnames if d not in ("__pycache__", "tests"))
                for fn in sorted(filenames):
                    if fn.endswith((".py", ".typed")):
                        full = os.path.join(dirpath, fn)
                        info = zipfile.ZipInfo(os.path.relpath(full, base), date_time=(2020, 1, 1, 0, 0, 0))
                        with open(full, "rb") as f:
                            z.writestr(info, f.read())
    data = buf.getvalue()
    digest = hashlib.sha256(data).hexdigest()[:16]
    path = os.path.join(tempfile.gettempdir(), f"mysql_cdc_code_{digest}.zip")
    if not os.path.exists(path):
        tmp = path + f".{os.getpid()}.tmp"
        with open(tmp, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    return path


_SHIPPED_SESSIONS: set[str] = set()


def register(spark: Any, profiles: Mapping[str, Any] | None = None, *, ship_code: bool | None = None) -> None:
    """Register ``mysql_cdc_chunks``, ``mysql_cdc_snapshot`` and the ``mysql_cdc`` data source on ``spark``.

    ``profiles`` maps profile names to connections (a :class:`ConnectionProfile`, a mapping with host, port,
    user, password, or a ``mysql://user:password@host:port`` URL). SQL names a profile, never a password; the
    profiles travel inside the registered (pickled) functions. On a Spark Connect session the project's code
    is shipped to the server as a session artifact unless ``ship_code=False`` (batch queries only; streaming
    needs the package installed in the server's Python).
    """
    from udtf.spark import (
        CHUNK_TABLE_DDL,
        build_binlog_udtf,
        build_chunks_udtf,
        build_data_source,
        build_snapshot_udtf,
    )

    profs = _profiles(profiles)
    remote = _is_connect(spark)
    if remote:
        from pyspark.sql.connect.udtf import _create_py_udtf
    else:
        from pyspark.sql.udtf import _create_py_udtf  # type: ignore[assignment]
    if remote and ship_code is not False:
        sid = str(spark.session_id)
        if sid not in _SHIPPED_SESSIONS:
            spark.addArtifacts(code_zip(), pyfile=True)
            _SHIPPED_SESSIONS.add(sid)
    chunks = _create_py_udtf(build_chunks_udtf(profs), returnType=CHUNK_TABLE_DDL, name="mysql_cdc_chunks",
                             useArrow=True)
    snapshot = _create_py_udtf(build_snapshot_udtf(profs), returnType=None, name="mysql_cdc_snapshot",
                               useArrow=True)
    spark.udtf.register("mysql_cdc_chunks", chunks)
    binlog = _create_py_udtf(build_binlog_udtf(profs), returnType=None, name="mysql_cdc_binlog", useArrow=True)
    spark.udtf.register("mysql_cdc_snapshot", snapshot)
    spark.udtf.register("mysql_cdc_binlog", binlog)
    spark.dataSource.register(build_data_source(profs))
