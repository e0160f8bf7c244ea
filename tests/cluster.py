"""A Spark standalone cluster for the tests: a master and two workers (one core each), each worker in a mount
namespace of its own where the driver's private folder is an empty tmpfs. That is what executors on other
machines see of a driver's disk: nothing. Each worker has its own HOME and work dir, and no PYTHONPATH: the
package reaches its executors as a classic session ships it (``register``)."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import urllib.request
from pathlib import Path
from typing import Any

from tests.conftest import _free_port, wait_until


class StandaloneCluster:
    MASTER = "org.apache.spark.deploy.master.Master"
    WORKER = "org.apache.spark.deploy.worker.Worker"

    def __init__(self, work: Path, hidden: Path, workers: int = 2) -> None:
        import pyspark

        self.spark_home = os.path.dirname(pyspark.__file__)
        self.work, self.hidden, self.count = work, hidden, workers
        self.port, self.ui = _free_port(), _free_port()
        self.url = f"spark://127.0.0.1:{self.port}"
        self.master: subprocess.Popen[bytes] | None = None
        self.workers: list[subprocess.Popen[bytes] | None] = [None] * workers

    def _env(self, home: Path) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "SPARK_REMOTE",
                                                                "SPARK_CONNECT_MODE_ENABLED")
               and not k.startswith("AWS_")}  # nor a way to the tests' S3 server: only the driver has one
        env.update(SPARK_HOME=self.spark_home, HOME=str(home), SPARK_LOG_DIR=str(home / "logs"),
                   SPARK_LOCAL_IP="127.0.0.1",  # and no REST server, whose fixed port the lanes' masters share
                   SPARK_MASTER_OPTS="-Dspark.master.rest.enabled=false")
        return env

    def _spawn(self, cmd: list[str], home: Path, log: str) -> subprocess.Popen[bytes]:
        os.makedirs(home, exist_ok=True)
        with open(home / log, "ab") as out:
            return subprocess.Popen(cmd, env=self._env(home), cwd=str(home), stdout=out, stderr=subprocess.STDOUT,
                                    start_new_session=True)

    def start(self) -> StandaloneCluster:
        spark_class = os.path.join(self.spark_home, "bin", "spark-class")
        self.master = self._spawn([spark_class, self.MASTER, "--host", "127.0.0.1", "--port", str(self.port),
                                   "--webui-port", str(self.ui)], self.work / "master", "master.out")
        wait_until(lambda: self._master_url() is not None, 120, "the master's start", 0.5)
        self.url = self._master_url() or self.url  # the port it bound, if the asked one was taken meanwhile
        for i in range(self.count):
            self.start_worker(i)
        wait_until(lambda: self.alive_workers() >= self.count, 180, "the cluster's workers", 0.5)
        return self

    def start_worker(self, i: int) -> None:
        home = self.work / f"worker{i}"
        spark_class = os.path.join(self.spark_home, "bin", "spark-class")
        os.makedirs(home / "work", exist_ok=True)
        # the driver's folder hidden under an empty tmpfs, and what the worker sees there noted
        script = ('mount -t tmpfs -o mode=0700 none "$1" && ls -A "$1" > "$2/sees-of-driver.txt" && shift 2 && '
                  'exec "$@"')
        userns = [] if os.geteuid() == 0 else ["-r"]  # not root: a user namespace of its own, where it is
        cmd = ["unshare", *userns, "-m", "--propagation", "private", "sh", "-c", script, "sh", str(self.hidden),
               str(home), spark_class, self.WORKER, self.url, "--host", "127.0.0.1", "--cores", "1",
               "--memory", "1536m", "--work-dir", str(home / "work"), "--webui-port", str(_free_port())]
        self.workers[i] = self._spawn(cmd, home, "worker.out")

    def _master_said(self, pattern: str) -> str | None:
        """The last match of ``pattern``'s group in the master's log: the ports it bound are said there, as the ones
        asked for may have been taken between ``_free_port`` and the master's start (the other lane's processes
        pick ports too), and the master then binds the next one, while the asked port answers another service
        (its HTML, once in a clean-clone run)."""
        log = self.work / "master" / "master.out"
        found = re.findall(pattern, log.read_text(errors="replace")) if log.exists() else []
        return str(found[-1]) if found else None

    def _master_url(self) -> str | None:
        return self._master_said(r"Starting Spark master at (spark://\S+)")

    def _ui_port(self) -> int | None:
        port = self._master_said(r"Bound MasterWebUI to \S+, and started at https?://[^:/\s]+:(\d+)")
        return None if port is None else int(port)

    def state(self) -> dict[str, Any]:
        port = self._ui_port()
        if port is None:
            raise ConnectionError("the master's web UI has not started yet")
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/", timeout=5) as r:
            return dict(json.load(r))

    def alive_workers(self) -> int:
        try:
            return sum(1 for w in self.state().get("workers", []) if w.get("state") == "ALIVE")
        except (OSError, ValueError):  # not up yet, or not the master's JSON yet
            return 0

    def sees(self, i: int) -> str:
        """What worker ``i`` saw in the driver's folder when it started."""
        return (self.work / f"worker{i}" / "sees-of-driver.txt").read_text()

    def executor_logs(self, i: int) -> list[Path]:
        return sorted((self.work / f"worker{i}" / "work").glob("app-*/*/stderr"))

    def kill_worker(self, i: int) -> None:
        """kill -9 of a worker and the executors it started."""
        p = self.workers[i]
        if p is not None and p.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(p.pid, signal.SIGKILL)
            p.wait(30)
        self.workers[i] = None

    def stop(self) -> None:
        for i in range(self.count):
            self.kill_worker(i)
        if self.master is not None and self.master.poll() is None:
            os.killpg(self.master.pid, signal.SIGKILL)
            self.master.wait(30)

