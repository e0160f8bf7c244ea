"""Fixtures: private MySQL 9.7 and MariaDB 10.11 servers, a classic local[2] Spark session and a real Spark
Connect server, and per-test databases. Integration cases take ``server`` (both kinds) and ``spark`` (both
kinds of session)."""

from __future__ import annotations

import contextlib
import itertools
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from mysql_cdc.profiles import ConnectionProfile
from tests.servers import ServerInfo, ServerProcess

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SERVER_KINDS = ("mysql", "mariadb")


def wait_until(cond: Callable[[], Any], timeout: float, what: str, interval: float = 0.05) -> Any:
    """Poll ``cond`` until it returns a truthy value; fail with ``what`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = cond()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(interval)


# ---------------------------------------------------------------- servers

_running: dict[str, ServerProcess] = {}


def _server(kind: str, tmp_path_factory: pytest.TempPathFactory) -> ServerProcess:
    if kind not in _running:
        proc = ServerProcess(kind, str(tmp_path_factory.mktemp(f"srv-{kind}")))
        proc.start()
        _running[kind] = proc
    return _running[kind]


@pytest.fixture(scope="session", autouse=True)
def _stop_servers() -> Iterator[None]:
    yield
    for proc in _running.values():
        proc.stop()


@pytest.fixture(scope="session", params=SERVER_KINDS)
def server(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> ServerProcess:
    return _server(request.param, tmp_path_factory)


@pytest.fixture
def info(server: ServerProcess) -> ServerInfo:
    assert server.info is not None
    return server.info


@pytest.fixture
def profile(info: ServerInfo) -> ConnectionProfile:
    return ConnectionProfile(info.host, info.port, info.user, info.password, connect_timeout=5)


_db_counter = itertools.count()


@pytest.fixture
def db(info: ServerInfo) -> Iterator[str]:
    """A fresh database for one test (dropped afterwards); tables are created as root."""
    name = f"t{os.getpid()}_{next(_db_counter)}"
    conn = info.connect(root=True)
    conn.cursor().execute(f"CREATE DATABASE `{name}`")
    conn.close()
    yield name
    conn = info.connect(root=True)
    conn.cursor().execute(f"DROP DATABASE IF EXISTS `{name}`")
    conn.close()


@pytest.fixture
def root(info: ServerInfo, db: str) -> Iterator[Any]:
    """A root connection (autocommit) with the test database selected."""
    conn = info.connect(root=True, database=db)
    conn.autocommit(True)
    yield conn
    conn.close()


# ---------------------------------------------------------------- spark

# The classes a Spark driver loads, dumped once per venv's pyspark and per JVM into a class data sharing archive
# (JDK 13+), which every driver JVM the tests start then maps instead of loading them again: a session starts in
# about 12 s instead of 20 on this 2-core machine, and the suite starts some hundred. Test infrastructure only:
# nothing of it is in the package; a JVM that cannot use the archive ignores it (-Xshare:auto), silently.
_CLASS_DUMP = """
from pyspark.sql import SparkSession
from pyspark.sql.functions import udtf
spark = SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false").getOrCreate()
spark.range(200000).selectExpr("id % 7 AS k", "id").groupBy("k").count().collect()
spark.createDataFrame([(1, "a")], "a int, b string").rdd.map(lambda r: r).collect()
spark.range(10).mapInArrow(lambda it: it, "id long").collect()

@udtf(returnType="x int")
class Two:
    def eval(self, n: int):
        yield (n,)
        yield (n + 1,)

spark.udtf.register("two", Two)
spark.sql("SELECT * FROM two(1)").collect()
q = spark.readStream.format("rate").load().writeStream.format("memory").queryName("m").trigger(availableNow=True)
q.start().awaitTermination(60)
jvm = spark._jvm
spark.stop()
jvm.java.lang.System.exit(0)  # the archive is written at a JVM's exit, which a killed gateway never reaches
"""


def _class_archive() -> str | None:
    """The archive's path (made now if missing), or ``None`` where it cannot be made: a test never fails for it."""
    try:
        return _make_class_archive()
    except Exception:  # an optimisation: without it every driver starts as before
        return None


def _make_class_archive() -> str | None:
    import glob
    import hashlib

    import pyspark

    home = os.environ.get("JAVA_HOME")  # the java spark-class runs
    java = subprocess.run([os.path.join(home, "bin", "java") if home else "java", "-version"], capture_output=True,
                          text=True, timeout=60).stderr
    # the driver's class path names pyspark's jars by their folder, and a JVM takes an archive only with the class
    # path it was made with, each jar of the same size and time: the venv's real folder (not its interpreter's,
    # which venvs share) and each jar's size and time are in the key
    jars = os.path.realpath(os.path.join(os.path.dirname(pyspark.__file__), "jars"))
    stats = [f"{n} {st.st_size} {st.st_mtime_ns}" for n in sorted(os.listdir(jars))
             for st in [os.stat(os.path.join(jars, n))]]
    key = hashlib.sha256("\n".join([pyspark.__version__, jars, java, *stats]).encode()).hexdigest()[:16]
    cache = os.environ.get("MYSQL_CDC_CACHE") or os.path.join(os.path.expanduser("~"), ".cache", "pyspark-mysql-cdc")
    folder = os.path.join(cache, "jvm-classes")
    path = os.path.join(folder, f"{pyspark.__version__}-{key}.jsa")
    if os.path.exists(path):
        return path
    os.makedirs(folder, mode=0o700, exist_ok=True)
    for old in glob.glob(os.path.join(folder, "*.jsa")):  # archives of venvs that are gone (each names its jars)
        with contextlib.suppress(OSError):
            with open(old + ".jars", encoding="utf-8") as f:
                gone = not os.path.isdir(f.read().strip())
            if gone:
                os.remove(old)
                os.remove(old + ".jars")
    part = f"{path}.{os.getpid()}.part"
    env = _repo_env(False)
    env["PYSPARK_SUBMIT_ARGS"] = f"--driver-java-options -XX:ArchiveClassesAtExit={part} pyspark-shell"
    with contextlib.suppress(subprocess.SubprocessError, OSError):
        subprocess.run([sys.executable, "-c", _CLASS_DUMP], env=env, capture_output=True, timeout=240)
    if not os.path.exists(part):
        return None
    with open(path + ".jars", "w", encoding="utf-8") as f:
        f.write(jars + "\n")
    os.replace(part, path)
    return path


# The JIT of the JVMs the tests start: C1 alone. A short-lived driver spent about as much CPU compiling with C2 as
# running (a session's start and three small jobs: 25-27 s of JVM CPU, 12 with C1 alone, measured), and the default
# run keeps both cores busy; the tests' jobs are small. C1 alone makes the JVM keep 48 MB for compiled code, not
# 240: a long session (the 4.2 catalog test: Delta's MERGEs, a schema change, many tables) filled it, and the
# driver then failed at random places ("Out of space in CodeCache for method handle intrinsic"), so the default's
# size is asked for. Test infrastructure only: the package sets no JVM option.
JIT_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:ReservedCodeCacheSize=240m"


@pytest.fixture(scope="session", autouse=True)
def _shared_classes() -> Iterator[None]:
    """Every driver JVM started from here on (this process's and its children's) maps the archive and compiles
    with C1 alone (``JIT_OPTIONS``)."""
    path = _class_archive()
    archive = f"-XX:SharedArchiveFile={path} -Xshare:auto -Xlog:cds=off -Xlog:cds+dynamic=off " if path else ""
    if "PYSPARK_SUBMIT_ARGS" not in os.environ:
        os.environ["PYSPARK_SUBMIT_ARGS"] = f"--driver-java-options '{archive}{JIT_OPTIONS}' pyspark-shell"
    yield


def _repo_env(with_repo: bool) -> dict[str, str]:
    env = dict(os.environ)
    parts = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p and os.path.abspath(p) != ROOT]
    if with_repo:
        parts.insert(0, ROOT)
    if parts:
        env["PYTHONPATH"] = os.pathsep.join(parts)
    else:
        env.pop("PYTHONPATH", None)
    env["PYSPARK_PYTHON"] = sys.executable
    env.pop("SPARK_CONNECT_MODE_ENABLED", None)
    env.pop("SPARK_REMOTE", None)
    return env


@pytest.fixture(scope="session")
def classic_spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    os.environ.update({k: v for k, v in _repo_env(True).items() if k in ("PYTHONPATH", "PYSPARK_PYTHON")})
    os.environ.pop("SPARK_CONNECT_MODE_ENABLED", None)
    from pyspark.sql import SparkSession

    events = tmp_path_factory.mktemp("classic-events")  # the event log: tests check no secret reaches it
    os.environ["MYSQL_CDC_CLASSIC_EVENT_DIR"] = str(events)
    spark = (SparkSession.builder.master("local[2]").appName("mysql-cdc-tests")
             .config("spark.eventLog.enabled", "true").config("spark.eventLog.dir", f"file://{events}")
             .config("spark.eventLog.compress", "false")
             .config("spark.ui.enabled", "false").config("spark.driver.bindAddress", "127.0.0.1")
             .config("spark.driver.host", "127.0.0.1").config("spark.sql.shuffle.partitions", "4")
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    yield spark
    spark.stop()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class ConnectServer:
    """A real Spark Connect server in its own work directory, started as ``start-connect-server.sh`` does it
    (pyspark 4.0 to 4.2 ship ``spark-daemon.sh`` and the server's jar, not that script)."""

    CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"

    def __init__(self, work: Any, with_repo: bool, conf: Sequence[tuple[str, str]] = ()) -> None:
        import pyspark

        self.spark_home = os.path.dirname(pyspark.__file__)
        self.work = work
        self.conf = list(conf)  # more Spark settings (a lakehouse format's jars, extension and catalog)
        self.port = _free_port()
        self.env = _repo_env(with_repo)
        self.env.update(SPARK_HOME=self.spark_home, SPARK_CONNECT_MODE="0", SPARK_LOG_DIR=str(work / "logs"),
                        SPARK_PID_DIR=str(work), SPARK_IDENT_STRING=f"cdc{self.port}",
                        SPARK_CONF_DIR=str(work / "conf"))
        os.makedirs(work / "conf", exist_ok=True)
        self.url = f"sc://127.0.0.1:{self.port}"

    def start(self) -> str:
        cmd = ["bash", self._daemon, "submit", self.CLASS, "1", "--name", "Spark Connect server",
               "--master", "local[2]", "--driver-java-options", JIT_OPTIONS,
               "--conf", "spark.connect.grpc.binding.address=127.0.0.1",
               "--conf", f"spark.connect.grpc.binding.port={self.port}",
               "--conf", "spark.driver.bindAddress=127.0.0.1", "--conf", "spark.driver.host=127.0.0.1",
               "--conf", "spark.ui.enabled=false", "--conf", "spark.sql.shuffle.partitions=4",
               "--conf", "spark.eventLog.enabled=true", "--conf", f"spark.eventLog.dir=file://{self.work}/events",
               "--conf", "spark.eventLog.compress=false", *(a for k, v in self.conf for a in ("--conf", f"{k}={v}"))]
        os.makedirs(self.work / "events", exist_ok=True)
        subprocess.run(cmd, env=self.env, check=True, cwd=str(self.work), capture_output=True)

        def port_open() -> bool:
            with socket.socket() as s:
                s.settimeout(0.5)
                return s.connect_ex(("127.0.0.1", self.port)) == 0

        wait_until(port_open, 120, "the Spark Connect server's port", interval=0.5)
        return self.url

    @property
    def _daemon(self) -> str:
        return os.path.join(self.spark_home, "sbin", "spark-daemon.sh")

    def pids(self) -> list[int]:
        out = []
        for pidfile in self.work.glob("*.pid"):
            with contextlib.suppress(ValueError, OSError):
                out.append(int(pidfile.read_text().strip()))
        return out

    def kill(self) -> None:
        """kill -9 of the server's JVM (and its Python workers with it)."""
        for pid in self.pids():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        for pidfile in self.work.glob("*.pid"):
            pidfile.unlink()

    def stop(self) -> None:
        subprocess.run(["bash", self._daemon, "stop", self.CLASS, "1"], env=self.env, cwd=str(self.work),
                       capture_output=True, timeout=60)
        self.kill()


@pytest.fixture(scope="session")
def connect_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A real Spark Connect server whose Python does NOT have this project on its path: batch queries only
    work if ``register`` ships the code."""
    srv = ConnectServer(tmp_path_factory.mktemp("connect"), with_repo=False)
    try:
        srv.start()
        os.environ["MYSQL_CDC_CONNECT_LOG_DIR"] = str(srv.work / "logs")
        os.environ["MYSQL_CDC_CONNECT_EVENT_DIR"] = str(srv.work / "events")
        yield srv.url
    finally:
        srv.stop()


@pytest.fixture(scope="session")
def plugin_connect(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ConnectServer]:
    """A Spark Connect server with the plugin installed in its Python (streaming needs it: Spark 4.3 streaming
    queries do not see session artifacts)."""
    yield from _plugin_server(tmp_path_factory, "connect-plugin", ())


@pytest.fixture(scope="session")
def delta_connect(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ConnectServer]:
    """:func:`plugin_connect` with Spark's Delta where Delta has jars for this Spark (4.0 to 4.2: Ivy fetches
    them once), as a platform's server has it: a sync through it writes Spark's Delta; elsewhere as
    :func:`plugin_connect` (tests/test_spark_versions.py's thin client)."""
    import pyspark

    from mysql_cdc.udtf.sync.sinks import SNAPSHOT_PARTITIONS, delta_artifact

    jars = delta_artifact(pyspark.__version__)
    # an Ivy folder of this version's own: scripts/test.sh runs 4.0's tests beside 4.1's and 4.2's, whose jars go
    # into Ivy's default folder, and two Ivys fetching one artifact into one folder can spoil it
    ivy = Path.home() / ".cache" / "pyspark-mysql-cdc" / f"ivy-{pyspark.__version__}"
    ivy.mkdir(mode=0o700, parents=True, exist_ok=True)
    delta = [] if jars is None else [
        ("spark.jars.packages", jars), ("spark.jars.ivy", str(ivy)),
        ("spark.sql.extensions", "io.delta.sql.DeltaSparkSessionExtension"),
        ("spark.sql.catalog.spark_catalog", "org.apache.spark.sql.delta.catalog.DeltaCatalog"),
        (SNAPSHOT_PARTITIONS, "2")]
    yield from _plugin_server(tmp_path_factory, "connect-delta", delta)


def _plugin_server(tmp_path_factory: pytest.TempPathFactory, name: str, conf: Sequence[tuple[str, str]]
                   ) -> Iterator[ConnectServer]:
    srv = ConnectServer(tmp_path_factory.mktemp(name), with_repo=True, conf=conf)
    # profiles only this server knows (tests write the file; the server reads it when a query names one)
    srv.env["MYSQL_CDC_PROFILES_FILE"] = str(srv.work / "profiles.json")
    try:
        srv.start()
        yield srv
    finally:
        srv.stop()


@pytest.fixture(scope="session")
def connect_session(connect_server: str) -> Iterator[Any]:
    """One remote session, stopped before its server: a client left open at exit retries its cleanup calls
    against the stopped server and keeps the process from ending."""
    # the Connect client's own builder: pyspark's generic one refuses while a classic session is running
    from pyspark.sql.connect.session import SparkSession as RemoteSparkSession

    session = RemoteSparkSession.builder.remote(connect_server).getOrCreate()
    yield session
    session.stop()


@pytest.fixture(autouse=True)
def _classic_mode_by_default() -> None:
    """pyspark decides between classic and Connect code paths by an environment variable that a Connect
    session sets for the whole process: every test starts in classic mode, the ``spark`` fixture's Connect case
    sets it again. Without this a classic test after a Connect test registers its functions on the wrong path."""
    os.environ.pop("SPARK_CONNECT_MODE_ENABLED", None)


@pytest.fixture(params=["classic", "connect"])
def spark(request: pytest.FixtureRequest) -> Any:
    """The same integration case on a classic local session and on a remote Spark Connect session."""
    if request.param == "classic":
        session = request.getfixturevalue("classic_spark")
        os.environ.pop("SPARK_CONNECT_MODE_ENABLED", None)
        return session
    session = request.getfixturevalue("connect_session")
    os.environ["SPARK_CONNECT_MODE_ENABLED"] = "1"
    return session


@pytest.fixture(scope="session")
def s3(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """An S3 server of the tests' own (:class:`tests.s3.S3Server`), with the bucket ``lake``."""
    from tests.s3 import S3Server

    server = S3Server(tmp_path_factory.mktemp("s3")).start()
    try:
        yield server
    finally:
        server.stop()


# ---------------------------------------------------------------- the default run and the long one

def pytest_configure(config: pytest.Config) -> None:
    # here and not in pyproject.toml, whose every change rebuilds CI's virtual environments (setup.sh's key)
    # no server's name in the marker's: scripts/test.sh picks its lanes with -k, which matches marker names too
    config.addinivalue_line("markers", "by_default_on(kind): the same on either server; on that one alone unless "
                            "MYSQL_CDC_LONG=1 (tests/conftest.py)")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The default run and the long one (``MYSQL_CDC_LONG=1``), as the default run is meant to end within 55
    minutes on 2 cores: a test marked ``mysql_by_default`` (what it checks is Spark's side or ours, the same on either
    server, whose readers are tested on both) runs on MySQL alone, as does the Connect case of a test on the ``spark``
    fixture (its classic case runs on both); one marked ``by_default_on("mariadb")`` on MariaDB alone, its Connect
    case too (heavy cases of the same kind, moved so that the run's two lanes, one per server, end closer together:
    scripts/test.sh); and one marked ``slow`` not at all, unless ``MYSQL_CDC_LONG=1`` or the test is named by its
    node id; the run's summary says how many it left."""
    if os.environ.get("MYSQL_CDC_LONG"):
        return
    named = {a for a in config.args if "::" in a}
    keep: list[pytest.Item] = []
    left: list[pytest.Item] = []
    for item in items:
        callspec = getattr(item, "callspec", None)
        server = callspec.params.get("server") if callspec is not None else None
        # the Connect side of a ``spark`` case: Spark's surface, on MySQL (MariaDB's side is its classic case)
        connect = callspec is not None and callspec.params.get("spark") == "connect"
        pinned = item.get_closest_marker("by_default_on")
        on = pinned.args[0] if pinned is not None else "mysql" if (
            connect or item.get_closest_marker("mysql_by_default") is not None) else None
        long_only = item.get_closest_marker("slow") is not None or (server is not None and on not in (None, server))
        (left if long_only and item.nodeid not in named else keep).append(item)
    if left:
        config.hook.pytest_deselected(items=left)
        items[:] = keep
        config.stash[_LEFT] = len(left)


_LEFT = pytest.StashKey[int]()


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    left = config.stash.get(_LEFT, 0)
    if left:
        terminalreporter.write_line(f"{left} cases left to the long profile (MYSQL_CDC_LONG=1: every case on both "
                                    "servers)")


# ---------------------------------------------------------------- durations

def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """With ``MYSQL_CDC_DURATIONS=<file>``, each test phase's seconds are appended to the file as it ends (pytest's
    own ``--durations`` prints nothing when a run is cut by its time limit; scripts/test.sh prints the slowest)."""
    path = os.environ.get("MYSQL_CDC_DURATIONS")
    if path:
        with open(path, "a", encoding="utf-8") as out:
            out.write(f"{report.duration:.2f}\t{report.when}\t{report.nodeid}\n")
