"""Small helpers for integration tests: loading rows, recording where each write landed in the binlog."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mysql_cdc.offsets import BinlogOffset, GtidSet


def profile_url(profile: Any) -> str:
    """A connection profile as the URL ``mysql_cdc.register`` takes."""
    return f"mysql://{profile.user}:{profile.password}@{profile.host}:{profile.port}"


def give_server_profile(profiles_file: str | Path, name: str, profile: Any) -> None:
    """Add profile ``name`` to a Spark Connect server's profiles file (``$MYSQL_CDC_PROFILES_FILE`` in its
    environment), replaced whole (0600): what a stream from a Connect client names."""
    import json

    path = Path(profiles_file)
    data = json.loads(path.read_text()) if path.exists() else {}
    data[name] = {"host": profile.host, "port": profile.port, "user": profile.user, "password": profile.password}
    fd = os.open(path.with_suffix(".tmp"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        json.dump(data, f)
    os.replace(path.with_suffix(".tmp"), path)


def is_connect(spark: Any) -> bool:
    """Whether ``spark`` is a Spark Connect session (else classic)."""
    return type(spark).__module__.startswith("pyspark.sql.connect")


def status_sql(conn: Any) -> str:
    cur = conn.cursor()
    cur.execute("SELECT VERSION()")
    v = str(cur.fetchone()[0])
    cur.close()
    return "SHOW MASTER STATUS" if "mariadb" in v.lower() else "SHOW BINARY LOG STATUS"


def binlog_end(conn: Any) -> tuple[str, int, str]:
    cur = conn.cursor()
    cur.execute(status_sql(conn))
    row = cur.fetchone()
    cur.close()
    gtids = str(row[4]).replace("\n", "") if len(row) > 4 and row[4] is not None else ""
    return str(row[0]), int(row[1]), gtids


def committed_at(checkpoint: str) -> tuple[str, int] | None:
    """The binlog point the sync's last committed batch (its checkpoint ``checkpoint``) ended at; ``None``: no
    batch yet, or a snapshot batch."""
    from mysql_cdc.udtf.sync.job import batch_end, committed_batches

    done = committed_batches(checkpoint)
    end = batch_end(checkpoint, done) if done >= 0 else {}
    return (str(end["file"]), int(end["pos"])) if end.get("phase") == "binlog" else None


def purge_binlogs(cur: Any, timeout: float = 30.0) -> str:
    """Rotate twice (MariaDB's checkpoint then names the newest file) and purge every binlog file before the
    newest, polled (a file MariaDB's checkpoint or a binlog reader still holds is kept a moment): a read from the
    binlog's start (``startup => 'earliest'``) then meets only what follows, not every earlier test's changes nor
    events no read can take. Returns the newest file."""
    from tests.conftest import wait_until

    cur.execute("FLUSH BINARY LOGS")
    cur.execute("FLUSH BINARY LOGS")
    cur.execute("SHOW BINARY LOGS")
    newest = str(cur.fetchall()[-1][0])

    def purged() -> bool:
        cur.execute("PURGE BINARY LOGS TO %s", (newest,))
        cur.execute("SHOW BINARY LOGS")
        return bool(cur.fetchall()[0][0] == newest)

    wait_until(purged, timeout, f"the binlog files before {newest} purged")
    return newest


def insert_rows(conn: Any, table: str, columns: Sequence[str], rows: Sequence[Sequence[Any]], batch: int = 2000
                ) -> None:
    def q(name: str) -> str:  # a statement executed with parameters is %-formatted by the driver
        return "`" + name.replace("`", "``").replace("%", "%%") + "`"

    cols = ", ".join(q(c) for c in columns)
    marks = ", ".join(["%s"] * len(columns))
    cur = conn.cursor()
    for lo in range(0, len(rows), batch):
        cur.executemany(f"INSERT INTO {q(table)} ({cols}) VALUES ({marks})", rows[lo:lo + batch])
    cur.close()


def counted(conn: Any, *tables: str) -> None:
    """Have the server take the statistics of tables just filled again (``ANALYZE``, kept out of the binlog: exact
    for a table of fewer than 20 pages, sampled beyond), for a test whose chunks follow the optimizer's row
    estimate: InnoDB's background recount races an insert and can leave the estimate far below the rows for some
    seconds (MySQL 9.7 estimated 28 rows for 100, once in 200 fresh tables), which plans fewer, larger chunks than
    the test expects."""
    def q(name: str) -> str:
        return ".".join("`" + part.replace("`", "``") + "`" for part in name.split("."))

    cur = conn.cursor()
    cur.execute(f"ANALYZE NO_WRITE_TO_BINLOG TABLE {', '.join(q(t) for t in tables)}")
    failed = [r for r in cur.fetchall() if str(r[2]).lower() == "error"]  # (table, op, msg_type, msg_text)
    cur.close()
    assert not failed, f"ANALYZE failed: {failed}"


@dataclass(frozen=True)
class Write:
    sql: str
    params: tuple[Any, ...]
    file: str
    pos: int
    gtids: str

    def covered_by(self, high: BinlogOffset) -> bool:
        """Whether the high watermark includes this write (GTID membership, or binlog position)."""
        if high.kind == "gtid":
            return GtidSet.parse(self.gtids).issubset(high.gtid_set())
        return (self.file, self.pos) <= (high.file, high.pos)


class Writer:
    """Runs autocommit writes one at a time on an otherwise idle server and records where each ended."""

    def __init__(self, conn: Any) -> None:
        self.conn = conn
        self.writes: list[Write] = []

    def __call__(self, sql: str, *params: Any) -> None:
        cur = self.conn.cursor()
        cur.execute(sql, params)
        cur.close()
        file, pos, gtids = binlog_end(self.conn)
        self.writes.append(Write(sql, params, file, pos, gtids))


def build_wheel(out_dir: str | Path) -> Path:
    """Build this project's wheel into ``out_dir`` from a copy of the checkout's tracked files (a build in
    place leaves ``build/`` and ``*.egg-info`` in the checkout, and an egg-info on PYTHONPATH makes pip think the
    package is installed already)."""
    root = Path(__file__).resolve().parent.parent
    files = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=root,
                           check=True, capture_output=True).stdout.decode().split("\0")
    with tempfile.TemporaryDirectory(prefix="mysql-cdc-src-") as src:
        for rel in filter(None, files):
            path = root / rel
            if not os.path.lexists(path):
                continue
            dest = Path(src) / rel
            dest.parent.mkdir(parents=True, exist_ok=True)
            if path.is_symlink():
                os.symlink(os.readlink(path), dest)
            else:
                shutil.copy2(path, dest)
        env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
        subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(out_dir), src],
                       check=True, cwd=src, env=env, timeout=600)
    (whl,) = Path(out_dir).glob("pyspark_mysql_cdc-*.whl")
    return whl


def statements_alone(info: Any, db: str, *statements: str) -> None:
    """Run ``statements`` as root on a session of their own, closed after (a prepared XA transaction outlives
    it)."""
    conn = info.connect(root=True, database=db)
    conn.autocommit(True)
    with conn.cursor() as c:
        for q in statements:
            c.execute(q)
    conn.close()
