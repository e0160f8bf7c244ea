"""Private Oracle MySQL 9.7 and MariaDB 10.11 instances for tests: each has its own data dir, a free loopback
port, binlog ROW / FULL row image / FULL row metadata, and (MySQL, by default) GTIDs. Nothing is mocked.

- MySQL runs from the Debian sid chroot built by ``scripts/provision_mysql.sh`` (``chroot <root> mysqld``,
  root = ``$MYSQL_CDC_CACHE`` or ``~/.cache/pyspark-mysql-cdc``, + ``/mysql-sid-chroot``). The instance
  directory is ``<root>/srv/<pid>-<n>`` (data dir, socket, logs; ``/srv/...`` as mysqld sees it) and
  ``stop()`` removes it; directories left by dead test processes are reaped (their mysqld killed) when the
  next one initializes. Needs root (``chroot``).
- MariaDB runs from the host's packages (``scripts/provision_mariadb.sh``); the instance directory is
  ``<base_dir>/mariadb``. The packaged service is never used.
- Instances still running when the interpreter exits are stopped (``atexit``).

Accounts: ``root`` with an empty password, reachable over TCP from 127.0.0.1 (``root@127.0.0.1``), and ``cdc``
(``CDC_PASSWORD``) with SELECT, LOCK TABLES, REPLICATION CLIENT, REPLICATION SLAVE on ``*.*`` (MariaDB shows
REPLICATION CLIENT as BINLOG MONITOR; there it also has REPLICATION MASTER ADMIN, to list the replicas).
Setup runs with ``sql_log_bin=0``: a fresh server's binlog holds only what tests write. On MySQL the accounts
use ``caching_sha2_password``; ``start()`` ends with ``FLUSH PRIVILEGES``, so the first login of each user
takes the server's cold "full authentication" path, as in production.

Driver connect arguments, measured on MySQL 9.7.4 and MariaDB 10.11 (cold cache):

- pymysql 1.2: plain ``host, port, user, password`` works on both (``ServerInfo.connect``). On MySQL it
  negotiates TLS by itself (the server generates its own certificate); with ``ssl_disabled=True`` the full
  authentication uses the RSA exchange instead, which needs ``cryptography``.
- MySQLdb (mysqlclient 2.3, MariaDB Connector/C 3.3): plain ``host, port, user, password`` works on both
  (``ServerInfo.connect_mysqldb`` / ``mysqldb_args``): on MySQL the connector does the RSA exchange without
  TLS. ``ssl_mode="REQUIRED"`` gives TLS. ``ssl={}`` does nothing (an empty dict is ignored).

Semi-synchronous replication without a replica (``enable_semisync``): the next commit waits ``timeout_ms``
between its binlog write and its engine commit (wait point ``AFTER_SYNC``); after that timeout the server
falls back to asynchronous commits, so only ONE commit per ``enable_semisync()`` call is held (call it again
to hold another).

Time zones: ``time_zone`` is an offset (``"+05:30"``), ``"SYSTEM"`` or a named zone; a named zone is loaded
into the server's time zone tables (that one zone only, not binlogged) and made the global zone.

``python tests/servers.py mysql|mariadb`` starts one instance, prints its ServerInfo and waits for Ctrl-C or
SIGTERM, then stops it.
"""

from __future__ import annotations

import atexit
import contextlib
import itertools
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import pymysql
from pymysql.constants import CLIENT

KINDS = ("mysql", "mariadb")
CDC_USER = "cdc"
CDC_PASSWORD = "Cdc-secret-pw-7"  # test-only credentials of throwaway loopback servers
ROOT_USER = "root"
ROOT_PASSWORD = ""
HOST = "127.0.0.1"
_OFFSET_TZ = re.compile(r"^[+-]\d{1,2}:\d{2}$")
# above the replica server-id range binlog readers claim by default (900000-900099)
_server_ids = itertools.count(1_000_000 + (os.getpid() % 100_000) * 100)
_instance_seq = itertools.count(1)
_live: set[ServerProcess] = set()


def cache_dir() -> str:
    return os.environ.get("MYSQL_CDC_CACHE") or os.path.expanduser("~/.cache/pyspark-mysql-cdc")


def mysql_chroot() -> str:
    return os.path.join(cache_dir(), "mysql-sid-chroot")


def free_port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        return int(s.getsockname()[1])


def _chroot_ids(root: str, user: str = "mysql") -> tuple[int, int]:
    with open(os.path.join(root, "etc/passwd")) as f:
        for line in f:
            parts = line.split(":")
            if parts[0] == user:
                return int(parts[2]), int(parts[3])
    raise RuntimeError(f"no {user!r} user in {root}/etc/passwd: re-run scripts/provision_mysql.sh")


@dataclass(frozen=True)
class ServerInfo:
    kind: str  # "mysql" or "mariadb"
    host: str
    port: int
    user: str
    password: str = field(repr=False)
    root_user: str = ROOT_USER
    root_password: str = field(default=ROOT_PASSWORD, repr=False)
    datadir: str = ""  # host path
    socket: str = ""  # host path of the Unix socket

    def connect(self, root: bool = False, database: str | None = None,
                **kw: Any) -> pymysql.connections.Connection:
        """A pymysql connection over TCP (autocommit on, utf8mb4 unless ``kw`` says otherwise)."""
        args: dict[str, Any] = {
            "host": self.host, "port": self.port,
            "user": self.root_user if root else self.user,
            "password": self.root_password if root else self.password,
            "database": database, "charset": "utf8mb4", "autocommit": True, "connect_timeout": 10,
        }
        args.update(kw)
        return pymysql.connect(**args)

    def mysqldb_args(self, root: bool = False, database: str | None = None) -> dict[str, Any]:
        """Keyword arguments for ``MySQLdb.connect`` (see the module docstring)."""
        args: dict[str, Any] = {
            "host": self.host, "port": self.port,
            "user": self.root_user if root else self.user,
            "password": self.root_password if root else self.password,
            "charset": "utf8mb4", "connect_timeout": 10,
        }
        if database is not None:
            args["database"] = database
        return args

    def connect_mysqldb(self, root: bool = False, database: str | None = None, **kw: Any) -> Any:
        """A MySQLdb (mysqlclient) connection over TCP, autocommit on."""
        import MySQLdb  # optional dependency, imported only when used

        conn = MySQLdb.connect(**{**self.mysqldb_args(root, database), **kw})
        conn.autocommit(True)
        return conn


class ServerProcess:
    """One private server instance. ``start()`` initializes a data dir on first use; after ``kill()`` (a
    crash) or ``stop(keep_data=True)``, ``start()`` restarts on the same data dir and port."""

    def __init__(self, kind: str, base_dir: str, *, gtid: bool = True, time_zone: str | None = None,
                 extra_args: Iterable[str] = ()) -> None:
        if kind not in KINDS:
            raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
        self.kind = kind
        self.base_dir = os.path.abspath(base_dir)
        self.gtid = gtid
        self.time_zone = time_zone
        self.extra_args = list(extra_args)
        self.server_id = next(_server_ids)
        self.port = 0
        self.proc: subprocess.Popen[bytes] | None = None
        self.info: ServerInfo | None = None
        self._tz_loaded = not self._named_zone()
        if kind == "mysql":
            self.chroot: str | None = mysql_chroot()
            name = f"{os.getpid()}-{next(_instance_seq)}"
            self.inner_dir = f"/srv/{name}"  # as mysqld sees it
            self.host_dir = os.path.join(self.chroot, self.inner_dir.lstrip("/"))
        else:
            self.chroot = None
            self.host_dir = self.inner_dir = os.path.join(self.base_dir, "mariadb")
        sock = os.path.join(self.host_dir, "mysqld.sock")
        if len(sock) > 100:  # sun_path limit; only MariaDB can hit it (MySQL's inner path is short)
            sock = os.path.join(tempfile.mkdtemp(prefix="cdc-sock-"), "mysqld.sock")
        self.host_socket = sock
        self.inner_socket = sock if self.chroot is None else f"{self.inner_dir}/mysqld.sock"

    # ------------------------------------------------------------------ lifecycle
    @property
    def datadir(self) -> str:
        return os.path.join(self.host_dir, "data")

    def start(self, timeout: float = 120) -> ServerInfo:
        if self.proc is not None and self.proc.poll() is None:
            raise RuntimeError(f"{self.kind} instance is already running")
        deadline = time.monotonic() + timeout
        fresh = not os.path.isdir(os.path.join(self.datadir, "mysql"))
        if fresh:
            self._initialize(timeout)
        if not self.port:
            self.port = free_port()
        cmd = self._server_cmd()
        log = open(os.path.join(self.host_dir, "stderr.log"), "ab")  # noqa: SIM115 - kept by the child only
        try:
            self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                                         start_new_session=True)
        finally:
            log.close()
        _live.add(self)
        info = ServerInfo(self.kind, HOST, self.port, CDC_USER, CDC_PASSWORD, datadir=self.datadir,
                          socket=self.host_socket)
        try:
            conn = self._wait_ready(deadline)
            with conn:
                if fresh:
                    self._bootstrap(conn)
                if not self._tz_loaded:
                    self._load_time_zone(conn)
            # The contract: TCP logins as root and as the cdc user work. The cdc login fills MySQL's
            # caching_sha2_password cache; flush it so clients meet the server's cold first-login path.
            info.connect().close()
            with info.connect(root=True) as conn, conn.cursor() as cur:
                cur.execute("FLUSH NO_WRITE_TO_BINLOG PRIVILEGES")
        except BaseException:
            self.stop(keep_data=True)
            raise
        self.info = info
        return info

    def _initialize(self, timeout: float) -> None:
        shutil.rmtree(self.host_dir, ignore_errors=True)
        os.makedirs(self.host_dir)
        if self.chroot is not None:
            if not os.path.exists(os.path.join(self.chroot, "usr/sbin/mysqld")):
                raise RuntimeError(f"no MySQL chroot at {self.chroot}: run scripts/provision_mysql.sh")
            _reap_orphans(self.chroot)
            uid, gid = _chroot_ids(self.chroot)
            os.chown(self.host_dir, uid, gid)
            cmd = ["chroot", self.chroot, "/usr/sbin/mysqld", "--no-defaults", "--user=mysql",
                   f"--datadir={self.inner_dir}/data", "--initialize-insecure",
                   "--innodb-redo-log-capacity=64M", f"--log-error={self.inner_dir}/init.log"]
        else:
            if shutil.which("mariadbd") is None and not os.path.exists("/usr/sbin/mariadbd"):
                raise RuntimeError("mariadbd is not installed: run scripts/provision_mariadb.sh")
            cmd = ["mariadb-install-db", "--no-defaults", f"--datadir={self.datadir}", "--user=root",
                   "--auth-root-authentication-method=normal", "--skip-test-db", "--skip-name-resolve"]
        res = subprocess.run(cmd, stdin=subprocess.DEVNULL, capture_output=True, timeout=timeout, check=False)
        if res.returncode != 0:
            out = (res.stdout + res.stderr).decode(errors="replace")[-2000:]
            raise RuntimeError(f"initializing {self.kind} failed ({res.returncode}): {out}{self._log_tail()}")

    def _server_cmd(self) -> list[str]:
        d = self.inner_dir
        common = [
            f"--datadir={d}/data", f"--socket={self.inner_socket}", f"--pid-file={d}/mysqld.pid",
            f"--log-error={d}/error.log", f"--port={self.port}", f"--bind-address={HOST}",
            f"--server-id={self.server_id}", "--log-bin=binlog", "--binlog-format=ROW",
            "--binlog-row-image=FULL", "--binlog-row-metadata=FULL", "--skip-name-resolve",
            "--innodb-buffer-pool-size=128M", "--performance-schema=OFF", "--max-connections=300",
            "--character-set-server=utf8mb4",
        ]
        if self.time_zone and self._tz_loaded:
            common.append(f"--default-time-zone={self.time_zone}")
        if self.chroot is not None:
            cmd = ["chroot", self.chroot, "/usr/sbin/mysqld", "--no-defaults", "--user=mysql", *common,
                   "--secure-file-priv=NULL", "--mysqlx=OFF", "--innodb-redo-log-capacity=64M"]
            # explicit both ways: the compiled-in default of gtid_mode differs between versions
            on = "ON" if self.gtid else "OFF"
            cmd += [f"--gtid-mode={on}", f"--enforce-gtid-consistency={on}"]
        else:
            cmd = ["mariadbd", "--no-defaults", "--user=root", *common, "--secure-file-priv=",
                   "--innodb-log-file-size=48M"]
        return cmd + self.extra_args

    def _wait_ready(self, deadline: float) -> pymysql.connections.Connection:
        """Root connection over the Unix socket once the server accepts connections (polled)."""
        assert self.proc is not None
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.kind} exited with code {self.proc.returncode}: {self._log_tail()}")
            if os.path.exists(self.host_socket):
                try:
                    return pymysql.connect(unix_socket=self.host_socket, user=ROOT_USER,
                                           password=ROOT_PASSWORD, autocommit=True, connect_timeout=5,
                                           client_flag=CLIENT.MULTI_STATEMENTS)
                except pymysql.err.OperationalError:
                    pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"{self.kind} did not accept connections in time: {self._log_tail()}")
            time.sleep(0.05)

    def _bootstrap(self, conn: pymysql.connections.Connection) -> None:
        with conn.cursor() as cur:
            cur.execute("SET SESSION sql_log_bin = 0")
            cur.execute("SELECT user, host FROM mysql.user WHERE user = ''")
            for _user, host in cur.fetchall():
                cur.execute("DROP USER ''@%s", (host,))
            cur.execute("CREATE USER IF NOT EXISTS 'root'@'127.0.0.1' IDENTIFIED BY %s", (ROOT_PASSWORD,))
            cur.execute("GRANT ALL PRIVILEGES ON *.* TO 'root'@'127.0.0.1' WITH GRANT OPTION")
            cur.execute("CREATE USER %s@'%%' IDENTIFIED BY %s", (CDC_USER, CDC_PASSWORD))
            cur.execute("GRANT SELECT, LOCK TABLES, REPLICATION CLIENT, REPLICATION SLAVE ON *.* TO %s@'%%'",
                        (CDC_USER,))
            if self.kind == "mariadb":  # to list the replicas, whose server ids a binlog reader must not take
                cur.execute("GRANT REPLICATION MASTER ADMIN ON *.* TO %s@'%%'", (CDC_USER,))

    def _load_time_zone(self, conn: pymysql.connections.Connection) -> None:
        """Load the one named zone into the time zone tables (not binlogged) and make it the global zone;
        restarts pass it as ``--default-time-zone``."""
        assert self.time_zone is not None
        zone = self.time_zone
        if ".." in zone or zone.startswith("/"):
            raise ValueError(f"bad time zone name {zone!r}")
        if self.chroot is not None:
            cmd = ["chroot", self.chroot, "/usr/bin/mysql_tzinfo_to_sql", f"/usr/share/zoneinfo/{zone}", zone]
        else:
            cmd = ["mariadb-tzinfo-to-sql", f"/usr/share/zoneinfo/{zone}", zone]
        sql = subprocess.run(cmd, capture_output=True, check=True, timeout=60).stdout.decode()
        with conn.cursor() as cur:
            cur.execute("SET SESSION sql_log_bin = 0")
            cur.execute("USE mysql")
            cur.execute(sql)
            while cur.nextset():
                pass
            cur.execute("SET GLOBAL time_zone = %s", (zone,))
        self._tz_loaded = True

    def stop(self, timeout: float = 30, keep_data: bool = False) -> None:
        """Clean shutdown (SIGTERM), SIGKILL after ``timeout`` s; removes the instance directory unless
        ``keep_data``. Idempotent."""
        proc, self.proc = self.proc, None
        if proc is not None and proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(30)
        _live.discard(self)
        if not keep_data:
            shutil.rmtree(self.host_dir, ignore_errors=True)
            if not self.host_socket.startswith(self.host_dir):
                shutil.rmtree(os.path.dirname(self.host_socket), ignore_errors=True)
            self.port = 0
            self._tz_loaded = not self._named_zone()
            self.info = None

    def kill(self) -> None:
        """SIGKILL, as a crash; the data dir stays and ``start()`` restarts on it (crash recovery)."""
        proc, self.proc = self.proc, None
        if proc is not None and proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(30)
        _live.discard(self)

    def _named_zone(self) -> bool:
        tz = self.time_zone
        return tz is not None and not _OFFSET_TZ.match(tz) and tz.upper() != "SYSTEM"

    def _log_tail(self) -> str:
        out = []
        for name in ("init.log", "error.log", "stderr.log"):
            p = os.path.join(self.host_dir, name)
            if os.path.exists(p):
                with open(p, errors="replace") as f:
                    out.append(f"\n--- {name}:\n" + f.read()[-1500:])
        return "".join(out) or " (no log)"

    # ------------------------------------------------------------------ semi-synchronous replication
    def enable_semisync(self, timeout_ms: int) -> None:
        """Hold the NEXT commit ``timeout_ms`` between its binlog write and its engine commit (``AFTER_SYNC``,
        no replica); the server then falls back to asynchronous commits until this is called again."""
        with self._root() as conn, conn.cursor() as cur:
            if self.kind == "mysql":
                if not _semisync_plugin(cur):
                    cur.execute("INSTALL PLUGIN rpl_semi_sync_source SONAME 'semisync_source.so'")
                prefix, no_replica = "rpl_semi_sync_source", "wait_no_replica"
            else:
                prefix, no_replica = "rpl_semi_sync_master", "wait_no_slave"
            cur.execute(f"SET GLOBAL {prefix}_enabled = OFF")  # resets the fallback of an earlier timeout
            cur.execute(f"SET GLOBAL {prefix}_wait_point = 'AFTER_SYNC'")
            cur.execute(f"SET GLOBAL {prefix}_timeout = %s", (int(timeout_ms),))
            cur.execute(f"SET GLOBAL {prefix}_{no_replica} = ON")
            cur.execute(f"SET GLOBAL {prefix}_enabled = ON")

    def disable_semisync(self) -> None:
        var = "rpl_semi_sync_source_enabled" if self.kind == "mysql" else "rpl_semi_sync_master_enabled"
        with self._root() as conn, conn.cursor() as cur:
            if self.kind == "mysql" and not _semisync_plugin(cur):
                return
            cur.execute(f"SET GLOBAL {var} = OFF")

    def _root(self) -> pymysql.connections.Connection:
        if self.info is None:
            raise RuntimeError(f"{self.kind} instance is not running")
        return self.info.connect(root=True)


def _semisync_plugin(cur: Any) -> bool:
    """Whether MySQL's semi-synchronous source plugin is installed (MariaDB has it built in)."""
    cur.execute("SELECT COUNT(*) FROM information_schema.PLUGINS WHERE PLUGIN_NAME = 'rpl_semi_sync_source'")
    row = cur.fetchone()
    return bool(row and row[0])


def start_server(kind: str, base_dir: str, **kw: Any) -> ServerProcess:
    """Create and start one instance; ``kw`` goes to ``ServerProcess`` (``timeout`` to ``start``)."""
    timeout = kw.pop("timeout", 120)
    proc = ServerProcess(kind, base_dir, **kw)
    proc.start(timeout)
    return proc


def _reap_orphans(chroot: str) -> None:
    """Stop and remove MySQL instances in the chroot whose owning process (the pid in the name) is gone."""
    srv = os.path.join(chroot, "srv")
    with contextlib.suppress(FileNotFoundError):
        for name in os.listdir(srv):
            owner = name.split("-", 1)[0]
            if not owner.isdigit() or os.path.exists(f"/proc/{owner}"):
                continue
            path = os.path.join(srv, name)
            with contextlib.suppress(OSError, ValueError):
                with open(os.path.join(path, "mysqld.pid")) as f:
                    pid = int(f.read().strip())
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    if f"/srv/{name}/".encode() in f.read():
                        os.kill(pid, signal.SIGKILL)
            shutil.rmtree(path, ignore_errors=True)


@atexit.register
def _stop_all() -> None:
    for proc in list(_live):
        proc.stop()


def _main(argv: list[str]) -> int:
    if len(argv) != 2 or argv[1] not in KINDS:
        print(f"usage: {argv[0]} mysql|mariadb", file=sys.stderr)
        return 2
    base = tempfile.mkdtemp(prefix=f"cdc-{argv[1]}-")
    t0 = time.monotonic()
    server = start_server(argv[1], base)
    print(f"{server.info} started in {time.monotonic() - t0:.1f} s; Ctrl-C or SIGTERM stops it", flush=True)

    def _term(_signo: int, _frame: object) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, _term)
    try:
        while True:
            signal.pause()
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()
        shutil.rmtree(base, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv))
