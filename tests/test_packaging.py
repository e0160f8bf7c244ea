"""Packaging: one installed top-level package, the import layering of the design card, safe code shipping to
Spark Connect, and nothing written world-writable."""

from __future__ import annotations

import ast
import hashlib
import io
import json
import os
import re
import stat
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import ROOT
from tests.helpers import build_wheel

PKG = Path(ROOT) / "mysql_cdc"

# ---------------------------------------------------------------- layering

# The shared vocabulary at the bottom: every layer may import it; it imports only itself.
VOCABULARY = {"errors", "options", "profiles", "chunks", "schema", "types", "offsets", "keyorder", "sql", "connect",
              "rowjson", "rows", "ids", "ddl", "jsontext", "retry", "xa", "keyrange", "memory", "large_values"}
# The public face: may import anything; nothing imports it.
PUBLIC = {"", "__main__", "cli", "docs", "progress", "failure"}
# udtf/ by role, each folder a layer: the readers (binlog, snapshot, schema, and the value conversion under
# them), then side by side on top the Spark adapters and the sync job
READERS = {"binlog", "snapshot", "schema", "convert"}
# the readers' floors: a reader imports readers of its floor or below (the snapshot reads the binlog for its
# backfill; the binlog knows nothing of snapshots)
FLOOR = {"convert": 0, "binlog": 1, "snapshot": 2, "schema": 2}


def layer_of(module: str) -> str:
    """The layer of a module of the package: vocabulary, public, planner, state, reader, spark or sync, read
    from its folder."""
    parts = module.split(".")
    assert parts[0] == "mysql_cdc", module
    if len(parts) == 1:
        return "public"
    if parts[1] in ("planner", "state"):
        return parts[1]
    if parts[1] == "udtf":
        if len(parts) == 2 or parts[2] in READERS:
            return "reader"
        if parts[2] in ("spark", "sync"):
            return parts[2]
        raise AssertionError(f"module {module!r} is in no folder of udtf/: put it in one of its roles")
    if parts[1] in VOCABULARY:
        return "vocabulary"
    if parts[1] in PUBLIC:
        return "public"
    raise AssertionError(f"module {module!r} is in no layer: add it to VOCABULARY or PUBLIC in this test")


ALLOWED = {
    "vocabulary": {"vocabulary"},
    "planner": {"vocabulary", "planner"},
    "state": {"vocabulary", "state"},
    "reader": {"vocabulary", "reader"},
    "spark": {"vocabulary", "planner", "state", "reader", "spark"},
    "sync": {"vocabulary", "planner", "state", "reader", "sync"},
    "public": {"vocabulary", "planner", "state", "reader", "spark", "sync", "public"},
}


def _floor(module: str) -> int | None:
    parts = module.split(".")
    return FLOOR.get(parts[2]) if len(parts) > 2 and parts[1] == "udtf" else None


def imported_modules(source: str, module: str, is_package: bool) -> Iterator[str]:
    """Every module an import statement anywhere in ``source`` names (relative imports resolved)."""
    package = module if is_package else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            yield from (a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            yield base
            # `from mysql_cdc.udtf import convert` names a submodule
            yield from (f"{base}.{a.name}" for a in node.names if _is_module(f"{base}.{a.name}"))


def _is_module(name: str) -> bool:
    parts = name.split(".")
    if parts[0] != "mysql_cdc":
        return False
    path = PKG.joinpath(*parts[1:])
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def violations(module: str, source: str, is_package: bool = False) -> list[str]:
    """The imports of ``module`` that break the layering, as readable lines."""
    own = layer_of(module)
    out = []
    for name in imported_modules(source, module, is_package):
        top = name.split(".")[0]
        if top in ("planner", "udtf", "state"):
            out.append(f"{module} imports {name!r}: the layers are installed as mysql_cdc.{top}, not {top}")
            continue
        if top != "mysql_cdc" or name in ("mysql_cdc.udtf", "mysql_cdc.planner", "mysql_cdc.state"):
            continue
        target = layer_of(name)
        if target not in ALLOWED[own]:
            out.append(f"{module} ({own}) imports {name} ({target})")
        elif own == target == "reader" and (_floor(name) or 0) > (_floor(module) or 0):
            out.append(f"{module} (reader, floor {_floor(module)}) imports {name} (floor {_floor(name)})")
    return out


def package_modules() -> Iterator[tuple[str, Path, bool]]:
    for dirpath, dirnames, filenames in os.walk(PKG, followlinks=True):
        dirnames[:] = [d for d in dirnames if d != "__pycache__"]
        rel = Path(dirpath).relative_to(PKG)
        prefix = ".".join(["mysql_cdc", *rel.parts])
        for fn in filenames:
            if fn.endswith(".py"):
                if fn == "__init__.py":
                    yield prefix, Path(dirpath) / fn, True
                else:
                    yield f"{prefix}.{fn[:-3]}", Path(dirpath) / fn, False


def test_layers_import_only_downwards() -> None:
    found = list(package_modules())
    names = {m for m, _, _ in found}
    # the three layers are reached through the package (links in a checkout, package-dir in the wheel)
    assert {"mysql_cdc.planner.plan", "mysql_cdc.udtf.binlog.phase", "mysql_cdc.state.store",
            "mysql_cdc.udtf.spark.sql_functions", "mysql_cdc.udtf.spark.batch_source",
            "mysql_cdc.udtf.spark.stream_reader", "mysql_cdc.udtf.sync.job"} <= names
    bad = [v for m, path, pkg in found for v in violations(m, path.read_text(encoding="utf-8"), pkg)]
    assert bad == []


@pytest.mark.parametrize(("module", "source"), [
    ("mysql_cdc.planner.plan", "from mysql_cdc.udtf.convert import value_converter"),  # sideways
    ("mysql_cdc.state.store", "import mysql_cdc.planner.discover"),  # sideways
    ("mysql_cdc.udtf.binlog.phase", "from mysql_cdc.state.store import StateStore"),  # reader -> state
    ("mysql_cdc.udtf.binlog.emit", "def f():\n    from mysql_cdc.udtf.spark.register import register"),  # up
    ("mysql_cdc.udtf.binlog.phase", "from mysql_cdc.udtf.snapshot.reader import SnapshotReader"),  # a floor up
    ("mysql_cdc.udtf.sync.job", "from mysql_cdc.udtf.spark.output import META_COLUMNS"),  # sync -> spark
    ("mysql_cdc.udtf.spark.output", "from mysql_cdc.udtf.sync.job import start_sync"),  # spark -> sync
    ("mysql_cdc.chunks", "from mysql_cdc.planner.splitter import split_table"),  # vocabulary -> layer
    ("mysql_cdc.udtf.spark.output", "from mysql_cdc import cli"),  # public face
    ("mysql_cdc.udtf.snapshot.reader", "from planner.chunks import Chunk"),  # the uninstalled name
    ("mysql_cdc.planner.splitter", "from ..udtf import convert"),  # relative, sideways
])
def test_the_layering_check_catches_a_wrong_import(module: str, source: str) -> None:
    assert violations(module, source) != []


def test_the_layering_check_accepts_the_allowed_directions() -> None:
    assert violations("mysql_cdc.udtf.spark.stream_reader", "from mysql_cdc.state.store import StateStore\n"
                      "from mysql_cdc.planner.plan import plan_tables\n"
                      "from mysql_cdc.udtf.binlog.phase import Change") == []
    assert violations("mysql_cdc.udtf.snapshot.reader", "from mysql_cdc.udtf.binlog.transactions import read_row_"
                      "changes\nfrom mysql_cdc.udtf.convert import value_converter") == []
    assert violations("mysql_cdc.planner.plan", "from .discover import match_tables\n"
                      "from mysql_cdc.chunks import Chunk") == []
    assert layer_of("mysql_cdc.udtf.sync.job") == "sync" and layer_of("mysql_cdc.udtf.binlog") == "reader"


# ---------------------------------------------------------------- the wheel in a fresh environment

@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_wheel(tmp_path_factory.mktemp("wheel"))


def test_wheel_holds_one_top_level_package(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    tops = {n.split("/")[0] for n in names if not n.split("/")[0].endswith(".dist-info")}
    assert tops == {"mysql_cdc"}
    for must in ("mysql_cdc/py.typed", "mysql_cdc/planner/plan.py", "mysql_cdc/udtf/binlog/phase.py",
                 "mysql_cdc/udtf/spark/sql_functions.py", "mysql_cdc/udtf/sync/job.py", "mysql_cdc/state/store.py",
                 "mysql_cdc/types.py"):
        assert must in names
    assert any(".dist-info/" in n and n.endswith("LICENSE") for n in names)  # the license the metadata names
    meta = next(n for n in names if n.endswith(".dist-info/METADATA"))
    text = zipfile.ZipFile(wheel).read(meta).decode()
    requires = [line for line in text.splitlines() if line.startswith("Requires-Dist:")]
    # Spark and the compiled driver are extras: `pip install` needs no compiler and leaves a cluster's pyspark
    assert not [r for r in requires if ("pyspark" in r or "mysqlclient" in r) and "extra ==" not in r]
    assert any("pyspark" in r and 'extra == "spark"' in r for r in requires)


@pytest.mark.parametrize("server", ["mariadb"], indirect=True)  # packaging, not server behaviour
def test_wheel_installs_into_a_fresh_venv_and_its_cli_plans(wheel: Path, tmp_path: Path, info: Any, db: str,
                                                           root: Any) -> None:
    env_dir = tmp_path / "venv"
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "SPARK_HOME")}
    subprocess.run([sys.executable, "-m", "venv", str(env_dir)], check=True, timeout=120, env=env)
    py = env_dir / "bin" / "python"
    site = Path(subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               check=True, capture_output=True, text=True).stdout.strip())
    before = set(os.listdir(site))
    subprocess.run([str(py), "-m", "pip", "install", "-q", str(wheel)], check=True, timeout=900, env=env)
    ours = set(os.listdir(site)) - before
    # what the wheel itself installs: one package and its metadata (the rest are its dependencies)
    record = zipfile.ZipFile(wheel).read(next(n for n in zipfile.ZipFile(wheel).namelist()
                                              if n.endswith(".dist-info/RECORD"))).decode()
    tops = {line.split("/")[0].split(",")[0] for line in record.splitlines() if line}
    assert {t for t in tops if not t.endswith(".dist-info")} == {"mysql_cdc"}
    assert "mysql_cdc" in ours and not {"planner", "udtf", "state"} & ours
    cli = env_dir / "bin" / "mysql-cdc"
    version = subprocess.run([str(cli), "--version"], capture_output=True, text=True, env=env, cwd=str(tmp_path),
                             timeout=60)
    assert version.returncode == 0 and version.stdout.strip() == "mysql-cdc 0.1.0", version
    root.cursor().execute("CREATE TABLE orders (id INT PRIMARY KEY, note VARCHAR(10))")
    root.cursor().execute("INSERT INTO orders VALUES " + ",".join(f"({i}, 'n{i}')" for i in range(1, 301)))
    env["MYSQL_CDC_PROFILE_SHOP"] = f"mysql://{info.user}:{info.password}@{info.host}:{info.port}"
    out = subprocess.run([str(cli), "plan", "--source", "shop", "--tables", f"{db}[.]orders", "--chunk-size", "100"],
                         capture_output=True, text=True, env=env, cwd=str(tmp_path), timeout=120)
    assert out.returncode == 0, out.stderr
    # 300 keys, 100 rows a chunk: evenly by key value with the optimizer's row estimate (302 rows makes a step
    # of 99 keys and a fourth chunk of 3), each chunk's end the next one's start, open at both ends
    head = re.search(rf"^{db}\.orders: key \(id\), (\d+) chunks$", out.stdout, re.M)
    assert head and int(head.group(1)) in (3, 4), out.stdout
    listed = [line.split("\t") for line in out.stdout.splitlines() if line.startswith(f"  {db}.orders:")]
    assert len(listed) == int(head.group(1)), out.stdout
    assert listed[0][1] == "-inf" and listed[-1][2] == "+inf", out.stdout
    assert all(a[2] == b[1] for a, b in zip(listed, listed[1:])), out.stdout
    # the module ran from the fresh environment, not from the checkout
    where = subprocess.run([str(py), "-c", "import mysql_cdc.planner.plan as m; print(m.__file__)"],
                           capture_output=True, text=True, env=env, cwd=str(tmp_path), check=True).stdout
    assert where.startswith(str(site))
    # without pyspark, a command that runs Spark says what to install, in one line
    snap = subprocess.run([str(cli), "snapshot", "--source", "shop", "--table", f"{db}.orders", "--out",
                           str(tmp_path / "out")], capture_output=True, text=True, env=env, cwd=str(tmp_path),
                          timeout=120)
    assert snap.returncode == 2 and "pip install 'pyspark-mysql-cdc[spark]'" in snap.stderr
    assert len(snap.stderr.strip().splitlines()) == 1, snap.stderr


# ---------------------------------------------------------------- an unsupported pyspark

UNSUPPORTED = """
import json, sys
import mysql_cdc
from pyspark.sql import SparkSession

spark = SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false").getOrCreate()
out = {"pyspark": spark.version}
calls = {"register": lambda: mysql_cdc.register(spark),
         "sync": lambda: mysql_cdc.sync(spark, to=sys.argv[1] + "/lake", checkpoint=sys.argv[1] + "/ck",
                                        state_dir=sys.argv[1] + "/state", tables="shop[.].*", source="shop")}
for name, call in calls.items():
    try:
        call()
        out[name] = "accepted"
    except Exception as e:
        out[name] = [type(e).__name__, str(e)]
spark.stop()
print(json.dumps(out))
"""


def test_an_unsupported_pyspark_is_refused_with_one_clear_error(tmp_path: Path) -> None:
    """Under a real pyspark 3.5 (``.venv-spark-3.5.9``, scripts/setup_spark_versions.sh), ``register()`` and
    ``sync()`` name the supported range in one ConfigError, never an ImportError from inside the package, and
    nothing is written."""
    py = Path(os.environ.get("MYSQL_CDC_UNSUPPORTED_PYTHON", str(Path(ROOT) / ".venv-spark-3.5.9/bin/python")))
    assert py.exists(), f"no {py}: run scripts/setup_spark_versions.sh"
    script = tmp_path / "unsupported.py"
    script.write_text(UNSUPPORTED)
    env = {**os.environ, "PYTHONPATH": ROOT, "PYSPARK_PYTHON": str(py)}
    env.pop("SPARK_HOME", None)
    res = subprocess.run([str(py), str(script), str(tmp_path / "work")], capture_output=True, text=True, env=env,
                         cwd=str(tmp_path), timeout=300)
    assert res.returncode == 0, res.stderr[-3000:]
    got = json.loads(res.stdout.strip().splitlines()[-1])
    assert got["pyspark"].startswith("3.5."), got
    for name in ("register", "sync"):
        kind, message = got[name]
        assert kind == "ConfigError", got
        assert f"pyspark {got['pyspark']} is installed" in message and "4.0 to 4.3" in message, message
    assert not (tmp_path / "work").exists()  # refused before any path was made


# ---------------------------------------------------------------- code shipping

def test_shipped_code_is_written_privately_and_holds_the_package() -> None:
    from mysql_cdc.udtf.spark.register import code_zip, code_zip_bytes

    data = code_zip_bytes()
    assert data == code_zip_bytes()  # the same bytes for the same code: Connect refuses a reused name otherwise
    with code_zip() as path:
        folder = os.path.dirname(path)
        st_dir, st_file = os.stat(folder), os.lstat(path)
        assert stat.S_IMODE(st_dir.st_mode) == 0o700 and st_dir.st_uid == os.geteuid()
        assert stat.S_ISREG(st_file.st_mode) and stat.S_IMODE(st_file.st_mode) == 0o600
        assert Path(path).read_bytes() == data
        assert os.path.basename(path) == f"mysql_cdc_code_{hashlib.sha256(data).hexdigest()[:16]}.zip"
    assert not os.path.exists(folder)
    names = zipfile.ZipFile(io.BytesIO(data)).namelist()
    assert {n.split("/")[0] for n in names} == {"mysql_cdc", "pymysql", "pymysqlreplication", "packaging"}
    assert "mysql_cdc/planner/plan.py" in names and "mysql_cdc/udtf/spark/stream_reader.py" in names


def _planted_zip(marker: Path) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("mysql_cdc/__init__.py", f"open({str(marker)!r}, 'w').write('pwned')\n")
    return buf.getvalue()


@pytest.mark.parametrize("server", ["mysql"], indirect=True)
def test_a_zip_planted_under_the_expected_name_is_not_shipped(connect_server: str, info: Any, db: str, root: Any,
                                                              tmp_path: Path) -> None:
    """Any local user can write to the shared temporary folder: a zip placed there under the name the code
    would have must not run as the Spark job."""
    from pyspark.sql.connect.session import SparkSession as RemoteSparkSession

    import mysql_cdc
    from mysql_cdc.udtf.spark.register import code_zip_bytes

    digest = hashlib.sha256(code_zip_bytes()).hexdigest()[:16]
    marker = tmp_path / "planted-code-ran"
    name = f"mysql_cdc_code_{digest}.zip"
    planted = sorted({Path(tempfile.gettempdir()) / name, Path("/tmp") / name})
    for p in planted:
        p.write_bytes(_planted_zip(marker))
    root.cursor().execute("CREATE TABLE t (id INT PRIMARY KEY)")
    root.cursor().execute("INSERT INTO t VALUES (1), (2), (3)")
    os.environ["SPARK_CONNECT_MODE_ENABLED"] = "1"
    session = RemoteSparkSession.builder.remote(connect_server).create()  # a new session: the code is shipped
    try:
        mysql_cdc.register(session, profiles={"p": {"host": info.host, "port": info.port, "user": info.user,
                                                    "password": info.password}})
        n = session.sql(f"SELECT count(*) AS n FROM mysql_cdc_chunks(source => 'p', tables => '{db}[.]t')").first()
        assert n is not None and n["n"] == 1
        rows = session.read.format("mysql_cdc").option("source", "p").option("table", f"{db}.t").load().count()
        assert rows == 3
    finally:
        session.stop()
        for p in planted:
            p.unlink(missing_ok=True)
    assert not marker.exists()


# ---------------------------------------------------------------- nothing world-writable

def test_state_files_are_never_world_writable(tmp_path: Path) -> None:
    from mysql_cdc.chunks import Chunk, ChunkRecord
    from mysql_cdc.ids import TableId
    from mysql_cdc.offsets import BinlogOffset
    from mysql_cdc.state.store import StateStore

    old = os.umask(0)
    try:
        store = StateStore(str(tmp_path / "a" / "b" / "state"))
        table = TableId("db", "t")
        chunk = Chunk(table, 0, ("id",), None, None)
        store.record_plan(table, [chunk])
        store.record_chunk(ChunkRecord.of(chunk, BinlogOffset("binlog.000001", 4), BinlogOffset("binlog.000001", 9), 1))
        store.record_offset("db.t", {"v": 1})
    finally:
        os.umask(old)
    written = [Path(d) / n for d, dirs, files in os.walk(tmp_path / "a") for n in [*dirs, *files]]
    assert len(written) >= 8
    loose = [str(p) for p in written if os.lstat(p).st_mode & stat.S_IWOTH]
    assert loose == []
