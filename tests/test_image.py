"""The Spark Connect server image, proven: the Dockerfile's own install script (docker/install.sh) builds a
fresh Debian bookworm root (scripts/image_chroot.sh, cached), the image's entry point (tini + docker/start-connect.sh)
serves from it as the non-root user ``spark``, and a thin client in a separate virtual environment (``pyspark-client``
and this package's wheel, no full pyspark) runs register, a snapshot (data source and SQL), a binlog read and a
streaming query with a checkpoint under ``availableNow`` on a real MySQL 9.7 and MariaDB 10.11.

How the server runs, like a container without an engine: ``unshare --mount --pid`` gives it a private mount
namespace and its own PID namespace (tini is PID 1 there, as in a container); inside it, /proc, a fresh /run, the
per-run data directory (as the image's volume /var/lib/mysql-cdc), a private /tmp and the read-only "secrets"
directory holding the profiles JSON file are mounted, then ``chroot --userspec=185:185`` runs the entry point.
The network is the host's: the server binds 127.0.0.1 on a free port and reaches the test servers on 127.0.0.1.
The mounts vanish with the namespace (even on kill -9); the namespace dies with this process (PDEATHSIG on
unshare, --kill-child). The streaming source's profile exists only in the server's mounted profiles file: the
streaming reader runs in the server's Python, which is why the package is installed in the image. The server
also gets a pre-shared token file (SPARK_CONNECT_AUTHENTICATE_TOKEN_FILE): a client without the token is refused.
The fixture's teardown stops the server as `docker stop` does (SIGTERM to PID 1) and checks the JVM stopped
cleanly, the port closed and no mount leaked.
"""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import json
import os
import re
import secrets
import shutil
import signal
import stat
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import _free_port, wait_until
from tests.helpers import build_wheel

REPO = Path(__file__).resolve().parent.parent
SPARK_UID = 185  # the image's user `spark` (docker/install.sh, USER in the Dockerfile)
# The image's pyspark: the Dockerfile's build argument PYSPARK_VERSION (default 4.3.0, what CI builds; another
# version, e.g. PYSPARK_VERSION=4.0.5 with its own MYSQL_CDC_CACHE, builds and tests that image).
SERVER_VERSION = os.environ.get("PYSPARK_VERSION", "4.3.0")
# The thin client of the server's version. pyspark-client 4.3.x is not on PyPI (2026-11: pyspark 4.3.0 is, the
# newest pyspark-client is 4.2.0); for a 4.3 server pip takes 4.2 until 4.3.x is published.
_MINOR = ".".join(SERVER_VERSION.split(".")[:2])
CLIENT_SPEC = "pyspark-client>=4.2,<4.4" if _MINOR == "4.3" else f"pyspark-client=={_MINOR}.*"
SERVER_DATA = "/var/lib/mysql-cdc"  # the image's working directory and volume, as the server sees it
PROFILES_IN_IMAGE = "/run/secrets/mysql-cdc-profiles.json"
TOKEN_IN_IMAGE = "/run/secrets/connect-token"  # Spark Connect's pre-shared token, read by start-connect.sh
# the JVM's "clean stop" line (Spark's shutdown hook after the SIGTERM that `docker stop` also sends)
CLEAN_STOP = "Successfully stopped SparkContext"

pytestmark = pytest.mark.timeout(1500)  # a cold image build (debootstrap, Java, pyspark) is in the first test


def _cache_dir() -> Path:
    return Path(os.environ.get("MYSQL_CDC_CACHE") or os.path.expanduser("~/.cache/pyspark-mysql-cdc"))


def _wait_until(cond: Callable[[], Any], timeout: float, what: str, interval: float = 0.25) -> Any:
    return wait_until(cond, timeout, what, interval)


def _tail(path: Path, n: int = 4000) -> str:
    try:
        return path.read_text(errors="replace")[-n:]
    except OSError:
        return "(no log)"



def _prerequisites() -> None:
    if os.geteuid() != 0:
        pytest.fail("tests/test_image.py needs root (debootstrap, chroot, mount namespaces), like the MySQL chroot")
    for tool in ("unshare", "chroot", "mount", "flock"):
        if shutil.which(tool) is None:
            pytest.fail(f"tests/test_image.py needs `{tool}` (util-linux / coreutils) on PATH")


# ---------------------------------------------------------------- the wheel, the image root, the client venv

@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    _prerequisites()
    return build_wheel(tmp_path_factory.mktemp("image-wheel"))  # from a copy: nothing written into the checkout


@pytest.fixture(scope="module")
def image_root(wheel: Path) -> Iterator[Path]:
    """The image's root filesystem (scripts/image_chroot.sh), held with a shared lock so no other run rebuilds it
    under the server."""
    cache = _cache_dir()
    for _attempt in range(3):
        res = subprocess.run(["bash", str(REPO / "scripts" / "image_chroot.sh"), str(wheel), str(cache)],
                             capture_output=True, text=True, timeout=1800, stdin=subprocess.DEVNULL)
        assert res.returncode == 0, (f"scripts/image_chroot.sh failed ({res.returncode}):\n{res.stdout[-2000:]}\n"
                                     f"{res.stderr[-5000:]}")
        m = re.search(r"image chroot ready: (\S+) (\S+)\s*$", res.stdout)
        assert m, f"unexpected output of scripts/image_chroot.sh: {res.stdout[-1000:]}"
        root, key = Path(m.group(1)), m.group(2)
        lock = open(cache / "image-chroot.lock", "a")  # noqa: SIM115 - held for the module
        fcntl.flock(lock, fcntl.LOCK_SH)
        if (root / ".image-key").read_text().strip() == key:
            break
        lock.close()  # rebuilt by another run in between: build again
    else:
        pytest.fail("the image chroot was rebuilt by another run three times in a row")
    try:
        yield root
    finally:
        lock.close()


def _outside_env() -> dict[str, str]:
    """This process's environment without what points into the checkout or at another Python or Spark (pip
    would take the checkout's egg-info on PYTHONPATH for an installed pyspark-mysql-cdc)."""
    return {k: v for k, v in os.environ.items()
            if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "SPARK_HOME", "SPARK_REMOTE")
            and not k.startswith(("PYSPARK_", "SPARK_CONNECT", "MYSQL_CDC_"))}


def _python_minor(cmd: list[str]) -> str:
    return subprocess.run([*cmd, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"], check=True,
                          capture_output=True, text=True, timeout=60, env=_outside_env()).stdout.strip()


@pytest.fixture(scope="module")
def client_python(wheel: Path, image_root: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh virtual environment with only the thin client and this package (its runtime dependencies, no
    pyspark: Spark is the package's `spark` extra)."""
    venv = tmp_path_factory.mktemp("image-client") / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300, env=_outside_env())
    py = venv / "bin" / "python"
    res = subprocess.run([str(py), "-m", "pip", "install", "-q", CLIENT_SPEC, "pandas>=2.2,<3", str(wheel)],
                         capture_output=True, text=True, timeout=900, env=_outside_env())
    assert res.returncode == 0, f"installing the thin client failed:\n{res.stderr[-4000:]}"
    server_minor = _python_minor(["chroot", str(image_root), "/opt/mysql-cdc/venv/bin/python"])
    client_minor = _python_minor([str(py)])
    assert client_minor == server_minor, (
        f"the client's Python is {client_minor}, the image's is {server_minor}: Spark refuses Python UDTFs "
        "whose client and worker minor versions differ")
    return py


# ---------------------------------------------------------------- the server, run from the image root

# Runs as PID 1 of a new PID namespace with a private mount namespace: mounts what a container runtime would, then
# becomes the image's entry point (tini + start-connect.sh) as the image's user.
_RUNNER = r"""
set -eu
R=$1 DATA=$2 SECRETS=$3 TMPD=$4; shift 4
mount -t proc -o nosuid,nodev,noexec proc "$R/proc"
mount -t tmpfs -o nosuid,nodev,mode=0755 tmpfs "$R/run"
mkdir "$R/run/secrets"
mount -o bind,ro "$SECRETS" "$R/run/secrets"
mount --bind "$DATA" "$R/var/lib/mysql-cdc"
mount --bind "$TMPD" "$R/tmp"
exec chroot --userspec=185:185 --groups=185 "$R" /usr/bin/tini -- /opt/mysql-cdc/start-connect.sh "$@"
"""


def _die_with_parent() -> None:
    """In the child before exec: SIGKILL when the test process dies (unshare --kill-child then takes the whole PID
    namespace with it), so no server outlives a killed test run."""
    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


class ImageServer:
    def __init__(self, root: Path, work: Path) -> None:
        self.root = root
        self.work = work
        self.port = _free_port()
        # with a token, pyspark's client sends it without TLS only to the host name "localhost"
        self.url = f"sc://localhost:{self.port}"
        self.token = secrets.token_urlsafe(24)
        self.data = work / "data"          # the image's volume /var/lib/mysql-cdc
        self.secrets = work / "secrets"    # mounted read-only at /run/secrets
        self.tmp = work / "tmp"            # the server's private /tmp
        self.log = work / "server.log"
        for d, mode in ((self.data, 0o750), (self.secrets, 0o750), (self.tmp, 0o700)):
            d.mkdir(mode=mode)
            os.chown(d, SPARK_UID, SPARK_UID)
            os.chmod(d, mode)
        self.profiles: dict[str, dict[str, Any]] = {}
        self.write_profiles()
        self._write_secret(os.path.basename(TOKEN_IN_IMAGE), self.token)
        self.proc: subprocess.Popen[bytes] | None = None
        self.stopped_cleanly: bool | None = None

    def write_profiles(self) -> None:
        """The mounted profiles file (replaced whole; the server reads it when a query resolves a profile)."""
        self._write_secret(os.path.basename(PROFILES_IN_IMAGE), json.dumps(self.profiles))

    def _write_secret(self, name: str, text: str) -> None:
        tmp = self.secrets / f".{name}.tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o400)
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.chown(tmp, SPARK_UID, SPARK_UID)
        os.replace(tmp, self.secrets / name)

    def env(self) -> dict[str, str]:
        return {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "LANG": "C.UTF-8",
                "HOME": SERVER_DATA, "MYSQL_CDC_CONNECT_BIND": "127.0.0.1",
                "MYSQL_CDC_CONNECT_PORT": str(self.port), "MYSQL_CDC_CORES": "2",
                "MYSQL_CDC_PROFILES_FILE": PROFILES_IN_IMAGE,
                "SPARK_CONNECT_AUTHENTICATE_TOKEN_FILE": TOKEN_IN_IMAGE}

    def healthy(self) -> bool:
        """The image's HEALTHCHECK script, run in the image root as its user."""
        res = subprocess.run(["chroot", "--userspec=185:185", str(self.root), "/opt/mysql-cdc/healthcheck.sh"],
                             env=self.env(), capture_output=True, timeout=30)
        return res.returncode == 0

    def start(self) -> None:
        assert not self.healthy(), f"something already listens on 127.0.0.1:{self.port}"
        with open(self.log, "wb") as log:
            self.proc = subprocess.Popen(
                ["unshare", "--mount", "--pid", "--fork", "--kill-child", "--propagation", "private",
                 "sh", "-c", _RUNNER, "sh", str(self.root), str(self.data), str(self.secrets), str(self.tmp),
                 "--conf", "spark.sql.shuffle.partitions=2"],
                env=self.env(), stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                start_new_session=True, preexec_fn=_die_with_parent)

    def wait_ready(self) -> None:
        """Until the image's healthcheck passes (the JVM boots while the client venv is being built)."""
        def up() -> bool:
            assert self.proc is not None
            if self.proc.poll() is not None:
                raise AssertionError(f"the image's server exited ({self.proc.returncode}):\n{_tail(self.log)}")
            return self.healthy()

        _wait_until(up, 180, "the image's healthcheck (Spark Connect port open)", interval=0.5)

    def init_pid(self) -> int | None:
        """The host pid of the namespace's PID 1 (tini), the child of unshare."""
        assert self.proc is not None
        with contextlib.suppress(OSError, ValueError):
            for task in os.listdir(f"/proc/{self.proc.pid}/task"):
                kids = Path(f"/proc/{self.proc.pid}/task/{task}/children").read_text().split()
                if kids:
                    return int(kids[0])
        return None

    def namespace_pids(self) -> list[int]:
        init = self.init_pid()
        if init is None:
            return []
        ns = os.readlink(f"/proc/{init}/ns/pid")
        out = []
        for name in os.listdir("/proc"):
            if name.isdigit():
                with contextlib.suppress(OSError):
                    if os.readlink(f"/proc/{name}/ns/pid") == ns:
                        out.append(int(name))
        return out

    def stop(self) -> None:
        """SIGTERM to tini (what `docker stop` does), then wait; SIGKILL of the namespace's PID 1 if it hangs."""
        if self.proc is None:
            return
        init = self.init_pid()
        if init is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(init, signal.SIGTERM)
        try:
            code = self.proc.wait(90)
            self.stopped_cleanly = code == 0 and CLEAN_STOP in _tail(self.log, 20000)
        except subprocess.TimeoutExpired:
            self.stopped_cleanly = False
            init = self.init_pid()
            if init is not None:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(init, signal.SIGKILL)  # takes every process of the namespace with it
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(60)


def _mounts_under(root: Path) -> list[str]:
    prefix = str(root)
    with open("/proc/self/mounts") as f:
        points = [line.split()[1] for line in f]
    return [p for p in points if p == prefix or p.startswith(prefix + "/")]


@pytest.fixture(scope="module")
def image_server(image_root: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ImageServer]:
    """The server, started (the test waits for its healthcheck); stopped as `docker stop` would."""
    srv = ImageServer(image_root, tmp_path_factory.mktemp("image-server"))
    try:
        srv.start()
        yield srv
    finally:
        srv.stop()
    assert not srv.healthy(), "the server's port is still open after the stop"
    assert _mounts_under(image_root) == [], "mounts of the server's namespace leaked into the host"
    assert srv.stopped_cleanly, f"the server did not stop cleanly on SIGTERM:\n{_tail(srv.log)}"


# ---------------------------------------------------------------- the client

# Run by the client venv's Python, in a clean environment (no PYTHONPATH, no Spark): only the public API.
_CLIENT = r'''
import importlib.metadata as md
import json
import os
import sys

from pyspark.sql import SparkSession

import mysql_cdc

phase = sys.argv[1]
env = os.environ
db, base, stream_source = env["CDC_DB"], env["CDC_BASE"], env["CDC_STREAM_SOURCE"]
table = f"{db}.t"
if phase == "no-token":
    # the server wants its pre-shared token (pyspark's client reads it from this variable); without it, no query.
    # os._exit: closing the refused session's channel hangs in grpc (pyspark-client 4.2.0, grpcio 1.85)
    del os.environ["SPARK_CONNECT_AUTHENTICATE_TOKEN"]
    try:
        SparkSession.builder.remote(env["CDC_REMOTE"]).create().range(1).count()
        refused = "no: the query ran"
    except Exception as e:
        refused = type(e).__name__ + ": " + str(e)[:300]
    print("RESULT " + json.dumps({"refused": refused}), flush=True)
    os._exit(0)
spark = SparkSession.builder.remote(env["CDC_REMOTE"]).create()
out = {"client": md.version("pyspark-client"), "server": spark.version, "mysql_cdc": mysql_cdc.__file__}
try:
    out["full_pyspark"] = md.version("pyspark")
except md.PackageNotFoundError:
    out["full_pyspark"] = None

# the client's own profile: registered (its password a private file of the session, never pickled), never in SQL text
mysql_cdc.register(spark, profiles={"src": env["CDC_URL"]})


def pairs(df):
    return sorted([int(r["id"]), int(r["v"])] for r in df.select("id", "v").collect())


def stream():
    # the profile named here exists only in the server's mounted profiles file
    q = (spark.readStream.format("mysql_cdc").option("source", stream_source).option("table", table)
         .option("state_dir", f"{base}/stream-state").option("max_chunks_per_batch", 2)
         .option("chunk_size", 100).option("once", True).load()
         .writeStream.format("parquet").option("path", f"{base}/out")
         .option("checkpointLocation", f"{base}/ck")
         .trigger(**mysql_cdc.once_trigger()).start())
    mysql_cdc.stop_when_caught_up(q)
    finished = q.awaitTermination(300)
    if not finished:
        q.stop()
    err = q.exception()
    return {"finished": bool(finished), "error": None if err is None else str(err)[:3000]}


chunk_table = (f"mysql_cdc_chunks(source => 'src', tables => '{db}[.]t', chunk_size => 100)")
if phase == "snapshot":
    out["chunks"] = spark.sql(f"SELECT count(*) AS n FROM {chunk_table}").first()["n"]
    out["sql_snapshot"] = pairs(spark.sql(
        f"SELECT * FROM mysql_cdc_snapshot(TABLE(SELECT /*+ REPARTITION(2) */ * FROM {chunk_table}), "
        f"source => 'src', table => '{table}', state_dir => '{base}/batch-state')"))
    out["ds_snapshot"] = pairs(spark.read.format("mysql_cdc").option("source", "src").option("table", table)
                               .option("chunk_size", 100).option("partitions", 2).load())
    out["stream"] = stream()
else:
    rows = spark.sql(f"SELECT id, v, __op, __file, __pos, __row FROM mysql_cdc_binlog(source => 'src', "
                     f"table => '{table}', state_dir => '{base}/batch-state')").collect()
    out["binlog"] = [[r["__op"], int(r["id"]), int(r["v"]), r["__file"], int(r["__pos"]), int(r["__row"])]
                     for r in rows]
    out["stream"] = stream()
    out["sink"] = [[int(r["id"]), int(r["v"]), r["__op"], r["__file"], r["__pos"], r["__row"]]
                   for r in spark.read.parquet(f"{base}/out")
                   .select("id", "v", "__op", "__file", "__pos", "__row").collect()]
    # the main job from a thin client: the mirror's Delta tables are written in the server, under its volume;
    # a stream names the server's profile (a client-registered one is refused: docs/DESIGN.md §8)
    q = mysql_cdc.sync(spark, source=stream_source, tables=f"{db}[.]t",
                       to=f"{base}/lake", checkpoint=f"{base}/sync-ck", state_dir=f"{base}/sync-state", once=True)
    finished = q.awaitTermination(300)
    err = q.exception()
    out["sync"] = {"finished": bool(finished), "error": None if err is None else str(err)[:3000]}
spark.stop()
print("RESULT " + json.dumps(out))
'''


def _run_client(py: Path, srv: ImageServer, phase: str, env: dict[str, str], work: Path) -> dict[str, Any]:
    full_env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8", "HOME": str(work),
                "CDC_REMOTE": srv.url, "SPARK_CONNECT_AUTHENTICATE_TOKEN": srv.token, **env}
    script = work / "image_client.py"  # a file: pyspark's Connect import takes `python -c` for a doctest run
    script.write_text(_CLIENT)
    res = subprocess.run([str(py), str(script), phase], env=full_env, cwd=str(work), capture_output=True,
                         text=True, timeout=600, stdin=subprocess.DEVNULL)
    lines = [line for line in res.stdout.splitlines() if line.startswith("RESULT ")]
    assert res.returncode == 0 and lines, (f"client phase {phase!r} failed ({res.returncode}):\n"
                                           f"{res.stderr[-5000:]}\n--- server log:\n{_tail(srv.log)}")
    return dict(json.loads(lines[-1][len("RESULT "):]))


def _binlog_key(file: str, pos: int, row: int) -> tuple[int, str, int, int]:
    m = re.search(r"(\d+)$", file)
    return (int(m.group(1)) if m else -1, file, pos, row)


def _checkpoint(ck: Path) -> tuple[int, str | None]:
    """(committed batches, phase of the last planned offset) of a streaming checkpoint."""
    commits = [p for p in (ck / "commits").iterdir() if p.name.isdigit()] if (ck / "commits").is_dir() else []
    offsets = sorted((p for p in (ck / "offsets").iterdir() if p.name.isdigit()), key=lambda p: int(p.name)) \
        if (ck / "offsets").is_dir() else []
    phase = json.loads(offsets[-1].read_text().strip().splitlines()[-1]).get("phase") if offsets else None
    return len(commits), phase


# ---------------------------------------------------------------- the test

@pytest.mark.parametrize("server", ["mysql"], indirect=True)  # the image and its client, not server behaviour:
# every other integration case runs on both servers with the same drivers (run twice, the image was set up twice)
def test_thin_client_batch_and_streaming_through_the_image(
        image_server: ImageServer, client_python: Path, info: Any, db: str, root: Any,
        tmp_path: Path) -> None:
    srv = image_server
    srv.wait_ready()
    name = f"stream_{info.kind}"  # the streaming source's profile: only in the server's mounted file
    srv.profiles[name] = {"host": info.host, "port": info.port, "user": info.user, "password": info.password}
    srv.write_profiles()
    base_host = srv.data / f"{info.kind}-{db}"
    base_host.mkdir(mode=0o750)
    os.chown(base_host, SPARK_UID, SPARK_UID)
    env = {"CDC_DB": db, "CDC_BASE": f"{SERVER_DATA}/{base_host.name}", "CDC_STREAM_SOURCE": name,
           "CDC_URL": f"mysql://{info.user}:{info.password}@{info.host}:{info.port}"}

    cur = root.cursor()
    cur.execute("CREATE TABLE t (id INT PRIMARY KEY, v INT NOT NULL)")
    initial = [[k, 3 * k] for k in range(2, 601, 2)]
    cur.executemany("INSERT INTO t (id, v) VALUES (%s, %s)", initial)

    # ---- register, snapshot (SQL and data source), stream run 1: the snapshot, then the binlog up to its end
    a = _run_client(client_python, srv, "snapshot", env, tmp_path)
    assert a["full_pyspark"] is None, f"the client venv has pyspark {a['full_pyspark']}, not only the thin client"
    assert a["client"].startswith("4.") and a["server"] == SERVER_VERSION, (a["client"], a["server"])
    assert a["mysql_cdc"].startswith(str(client_python.parent.parent)), a["mysql_cdc"]  # the wheel, not the checkout
    assert a["chunks"] >= 2
    assert a["sql_snapshot"] == initial
    assert a["ds_snapshot"] == initial
    assert a["stream"] == {"finished": True, "error": None}
    committed, phase = _checkpoint(base_host / "ck")
    assert committed >= 2 and phase == "binlog", (committed, phase)  # several chunks, two per micro-batch

    # ---- changes after the snapshot
    cur.execute("UPDATE t SET v = v + 1000 WHERE id IN (2, 4)")
    cur.execute("DELETE FROM t WHERE id = 6")
    cur.execute("INSERT INTO t (id, v) VALUES (5001, 77)")
    cur.close()
    expected_changes = [["-U", 2, 6], ["+U", 2, 1006], ["-U", 4, 12], ["+U", 4, 1012], ["-D", 6, 18],
                        ["+I", 5001, 77]]
    final = {k: v for k, v in initial if k != 6} | {2: 1006, 4: 1012, 5001: 77}

    # ---- the binlog after the recorded batch snapshot; stream run 2 from the same checkpoint
    b = _run_client(client_python, srv, "changes", env, tmp_path)
    binlog = sorted(b["binlog"], key=lambda r: _binlog_key(r[3], r[4], r[5]))
    assert [r[:3] for r in binlog] == expected_changes
    assert b["stream"] == {"finished": True, "error": None}
    sink = b["sink"]
    snap = [r for r in sink if r[2] == "r"]
    changes = sorted((r for r in sink if r[2] != "r"), key=lambda r: _binlog_key(r[3], r[4], r[5]))
    assert sorted([r[0], r[1]] for r in snap) == initial  # each key once, as it was at the snapshot
    assert [[r[2], r[0], r[1]] for r in changes] == expected_changes
    mirror = {r[0]: r[1] for r in snap}
    for k, v, op, *_ in changes:
        if op in ("-U", "-D"):
            mirror.pop(k, None)
        else:
            mirror[k] = v
    assert mirror == final
    assert _checkpoint(base_host / "ck")[1] == "binlog"
    # the sync job, run from the thin client, made the Delta table in the server's volume: equal to the table
    assert b["sync"] == {"finished": True, "error": None}
    import deltalake

    delta = deltalake.DeltaTable(str(base_host / "lake" / db / "t")).to_pyarrow_table()
    assert dict(zip(delta.column("id").to_pylist(), delta.column("v").to_pylist())) == final

    # ---- a client without the server's token gets nothing
    refused = _run_client(client_python, srv, "no-token", env, tmp_path)["refused"]
    assert "UNAUTHENTICATED" in refused or "authenticat" in refused.lower(), refused

    # ---- what the server wrote is not world-writable; no password in any server process's argv or environment,
    # no token in any argv (the server takes it from its environment)
    loose = [str(p) for p in base_host.rglob("*") if not p.is_symlink() and p.lstat().st_mode & stat.S_IWOTH]
    assert loose == []
    password, token = info.password.encode(), srv.token.encode()
    pids = srv.namespace_pids()
    assert len(pids) >= 3, pids  # tini, the shell, the JVM (and Python workers)
    for pid in pids:
        with contextlib.suppress(OSError):
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
            assert password not in cmdline and token not in cmdline, f"a secret in /proc/{pid}/cmdline"
            assert password not in Path(f"/proc/{pid}/environ").read_bytes(), f"password in /proc/{pid}/environ"
