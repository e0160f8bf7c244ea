"""``register(spark, ...)``: put the SQL functions and the data source on a classic or Spark Connect session."""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import importlib
import io
import os
import re
import tempfile
import zipfile
from collections.abc import Iterator, Mapping
from typing import Any

from mysql_cdc.errors import ConfigError
from mysql_cdc.options import parse_options
from mysql_cdc.profiles import (
    PASSWORD_ENV_PREFIX,
    PROFILE_ENV_PREFIX,
    ConnectionProfile,
    profile_from_mapping,
    profile_from_url,
    resolve_profile,
    url_holds_password,
)
from mysql_cdc.udtf.spark.compat import check_pyspark

# Our package, and the pure-Python drivers the executors need, shipped to a Connect server for batch queries
# (python-mysql-replication imports `packaging`, which a server with only pyspark[connect] may lack).
SHIPPED_PACKAGES = ("mysql_cdc", "pymysql", "pymysqlreplication", "packaging")
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


def code_zip_bytes() -> bytes:
    """A zip of the shipped packages, byte-for-byte the same for the same code (fixed order and dates).

    From a source checkout ``mysql_cdc/planner``, ``udtf`` and ``state`` are links to the root folders of the
    design card's layout; they are followed, so the zip holds the package as the wheel installs it.
    """
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        for pkg in SHIPPED_PACKAGES:
            mod = importlib.import_module(pkg)
            root = os.path.dirname(mod.__file__ or "")
            for dirpath, dirnames, filenames in os.walk(root, followlinks=True):
                dirnames[:] = sorted(d for d in dirnames if d not in ("__pycache__", "tests"))
                for fn in sorted(filenames):
                    if fn.endswith((".py", ".typed")):
                        full = os.path.join(dirpath, fn)
                        arc = os.path.join(pkg, os.path.relpath(full, root)).replace(os.sep, "/")
                        info = zipfile.ZipInfo(arc, date_time=(2020, 1, 1, 0, 0, 0))
                        info.external_attr = 0o644 << 16
                        with open(full, "rb") as f:
                            z.writestr(info, f.read())
    return buf.getvalue()


@contextlib.contextmanager
def code_zip() -> Iterator[str]:
    """The shipped code as a zip file named by its content hash (Connect refuses a reused name with other bytes),
    written into a new private folder (0700, made by :func:`tempfile.mkdtemp`) and removed afterwards.

    Never a file found under a predictable name: a shared temporary folder is writable by every local user,
    and a zip planted there would run as the Spark job.
    """
    with tempfile.TemporaryDirectory(prefix="mysql_cdc_code_") as folder:
        yield _write_code_zip(folder)


def _write_code_zip(folder: str) -> str:
    """The shipped code written as a new file (0600, never one that exists) in ``folder``, named by its content
    hash; its path."""
    data = code_zip_bytes()
    path = os.path.join(folder, f"mysql_cdc_code_{hashlib.sha256(data).hexdigest()[:16]}.zip")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    return path


_SHIPPED_SESSIONS: set[str] = set()
_KEPT: list[str] = []  # folders of the zips a classic Spark context serves to its executors


def _remove_kept() -> None:
    import shutil

    for folder in _KEPT:
        shutil.rmtree(folder, ignore_errors=True)


def ship_to_executors(sc: Any) -> None:
    """Give a classic session's executors the shipped packages (``addPyFile``, before the functions and the data
    source are made: they carry the Python includes of that moment), unless the master is local: local
    executors are this machine's Python. Once per Spark context; the zip stays, in a private folder, for the
    life of this process (Spark serves it from there to executors that join later)."""
    master = str(sc.master)
    if master.startswith("local") or sc.applicationId in _SHIPPED_SESSIONS:
        return
    folder = tempfile.mkdtemp(prefix="mysql_cdc_code_")
    _keep(folder)
    sc.addPyFile(_write_code_zip(folder))
    _SHIPPED_SESSIONS.add(sc.applicationId)


def give_session_secrets(spark: Any, remote: bool, profiles: Mapping[str, ConnectionProfile]
                         ) -> dict[str, ConnectionProfile]:
    """The profiles, those with a password given the session as a private file, each naming its copy
    (``session_secret``): a new file (0600 in a new 0700 folder, a random name) that a classic session serves
    with ``addFile`` (kept for the life of this process, as Spark serves it from there) and a Spark Connect client
    uploads as a session file. Spark's file server hands it to the driver's planners and to every executor; a
    pickle of the profile holds none (:meth:`ConnectionProfile.__reduce__`). docs/DESIGN.md §8."""
    import json
    import secrets

    given = {name: p for name, p in profiles.items() if p.password}
    if not given:
        return dict(profiles)
    folder = tempfile.mkdtemp(prefix="mysql_cdc_secrets_")
    file_name = f"mysql_cdc_secrets_{secrets.token_hex(8)}.json"
    path = os.path.join(folder, file_name)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        json.dump({name: p.password for name, p in given.items()}, f)
    if remote:
        try:
            spark.addArtifacts(path, file=True)
        finally:
            import shutil

            shutil.rmtree(folder, ignore_errors=True)
    else:
        _keep(folder)
        spark.sparkContext.addFile(path)
    return {name: dataclasses.replace(p, session_secret=(file_name, name)) if name in given else p
            for name, p in profiles.items()}


def _keep(folder: str) -> None:
    """Remove ``folder`` when this process ends (Spark serves what it holds until then)."""
    import atexit

    _KEPT.append(folder)
    if len(_KEPT) == 1:
        atexit.register(_remove_kept)


def register(spark: Any, profiles: Mapping[str, Any] | None = None, *, ship_code: bool | None = None,
             carry: tuple[str, ...] = ()) -> None:
    """Register ``mysql_cdc_chunks``, ``mysql_cdc_snapshot``, ``mysql_cdc_binlog`` and the ``mysql_cdc`` and
    ``mysql_cdc_binlog`` data sources on ``spark``.

    ``profiles`` maps profile names to connections (a :class:`ConnectionProfile`, a mapping with host, port,
    user, password, or a ``mysql://user:password@host:port`` URL). SQL names a profile, never a password; the
    profiles travel inside the registered functions without their passwords, which go to the session as a
    private file (:func:`give_session_secrets`). The project's code is shipped unless
    ``ship_code=False``: to a Spark Connect server as a session artifact (batch queries only; streaming needs
    the package installed in the server's Python), and to a classic session's executors with ``addPyFile``
    when its master is not local. ``carry`` names profiles of this process's environment (or profiles file)
    registered as if given: the CLI and ``mysql_cdc.sync`` carry the one they use, so that executors on other
    machines get its password as the session's file (:func:`give_session_secrets`).
    """
    remote = _is_connect(spark)
    check_pyspark(str(spark.version) if remote else None)  # one clear error before anything version-bound loads
    from mysql_cdc.udtf.spark.batch_source import build_data_source
    from mysql_cdc.udtf.spark.binlog_source import build_binlog_source
    from mysql_cdc.udtf.spark.output import CHUNK_TABLE_DDL
    from mysql_cdc.udtf.spark.sql_functions import build_binlog_udtf, build_chunks_udtf, build_snapshot_udtf

    profs = _profiles(profiles)
    for name in carry:
        if name not in profs:
            profs[name] = resolve_profile(parse_options({"source": name}))
    check_conf_secrets(_conf_items(spark, remote))
    profs = give_session_secrets(spark, remote, profs)
    if remote:
        from pyspark.sql.connect.udtf import _create_py_udtf
    else:
        from pyspark.sql.udtf import _create_py_udtf  # type: ignore[assignment]
    if remote and ship_code is not False:
        sid = str(spark.session_id)
        if sid not in _SHIPPED_SESSIONS:
            with code_zip() as path:
                spark.addArtifacts(path, pyfile=True)
            _SHIPPED_SESSIONS.add(sid)
    elif not remote and ship_code is not False:
        ship_to_executors(spark.sparkContext)
    chunks = _create_py_udtf(build_chunks_udtf(profs), returnType=CHUNK_TABLE_DDL, name="mysql_cdc_chunks",
                             useArrow=True)
    snapshot = _create_py_udtf(build_snapshot_udtf(profs), returnType=None, name="mysql_cdc_snapshot",
                               useArrow=True)
    spark.udtf.register("mysql_cdc_chunks", chunks)
    binlog = _create_py_udtf(build_binlog_udtf(profs), returnType=None, name="mysql_cdc_binlog", useArrow=True)
    spark.udtf.register("mysql_cdc_snapshot", snapshot)
    spark.udtf.register("mysql_cdc_binlog", binlog)
    parallelism = _parallelism(spark, remote)
    spark.dataSource.register(build_data_source(profs, parallelism))
    spark.dataSource.register(build_binlog_source(profs, parallelism))


def _conf_items(spark: Any, remote: bool) -> list[tuple[str, str]]:
    """Every setting of the session (and, on a classic session, of its Spark context), as far as it answers."""
    items: list[tuple[str, str]] = []
    with contextlib.suppress(Exception):
        items += list(spark.conf.getAll.items())
    if not remote:
        with contextlib.suppress(Exception):
            items += [(str(k), str(v)) for k, v in spark.sparkContext.getConf().getAll()]
    return items


def check_conf_secrets(items: list[tuple[str, str]]) -> None:
    """Refuse a profile URL with its password in a Spark setting (``spark.executorEnv.MYSQL_CDC_PROFILE_<NAME>``
    and the like): Spark writes its settings to the event log and shows them in its UI, redacting only those
    whose names say PASSWORD, SECRET or TOKEN.

    >>> check_conf_secrets([("spark.executorEnv.MYSQL_CDC_PROFILE_SHOP", "mysql://cdc@db:3306")])
    >>> check_conf_secrets([("spark.executorEnv.MYSQL_CDC_PROFILE_SHOP", "mysql://cdc:pw@db:3306")])
    Traceback (most recent call last):
    ...
    mysql_cdc.errors.ConfigError: the Spark setting 'spark.executorEnv.MYSQL_CDC_PROFILE_SHOP' holds a profile ...
    """
    for key, value in items:
        name = key.rpartition(".")[2]
        if name.startswith(PROFILE_ENV_PREFIX) and url_holds_password(value):
            where = key[: len(key) - len(name)]
            raise ConfigError(
                f"the Spark setting {key!r} holds a profile URL with its password, which Spark writes to its event "
                "log and UI unredacted: take the password out of the URL and set it in "
                f"{where + PASSWORD_ENV_PREFIX + name[len(PROFILE_ENV_PREFIX):]!r} (Spark redacts settings named "
                "like passwords), or name a file with password-file=/path in the URL, or use "
                "$MYSQL_CDC_PROFILES_FILE")


def _parallelism(spark: Any, remote: bool) -> int | None:
    """How many tasks the session runs at once: ``spark.default.parallelism`` if set, else a classic session's
    default parallelism, else a ``local[N]`` master's N; ``None`` when unknown (a Connect session to a cluster,
    ``local[*]``): the data source then uses the cores of the machine that plans the read."""
    try:
        conf = spark.conf.get("spark.default.parallelism", None)
        if conf:
            return max(1, int(conf))
        if not remote:
            return max(1, int(spark.sparkContext.defaultParallelism))
        m = re.fullmatch(r"local\[(\d+)(?:,\s*\d+)?\]", spark.conf.get("spark.master", None) or "")
        return int(m.group(1)) if m and int(m.group(1)) > 0 else None
    except Exception:  # a session that does not answer: the planner's cores
        return None
