"""An S3 server for the tests: moto's server mode (``moto_server``, from PyPI), on a free local port, with one
bucket. It speaks S3's REST API as AWS does, so pyarrow's S3 client (what :mod:`mysql_cdc.state.storage` uses)
talks to it unchanged; the tests point that client at it with ``AWS_ENDPOINT_URL``, the variable a user of an
S3-compatible store sets."""

from __future__ import annotations

import os
import subprocess
import sys
import urllib.request
from pathlib import Path
from typing import Any

from tests.conftest import _free_port, wait_until


class S3Server:
    BUCKET = "lake"

    def __init__(self, folder: Path) -> None:
        self.folder, self.port = folder, _free_port()
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self.proc: subprocess.Popen[bytes] | None = None

    def env(self) -> dict[str, str]:
        """What a process needs to reach the store: its endpoint and (moto takes any) credentials."""
        return {"AWS_ENDPOINT_URL": self.endpoint, "AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
                "AWS_REGION": "us-east-1"}

    def _up(self) -> bool:
        try:
            with urllib.request.urlopen(self.endpoint + "/", timeout=2):
                return True
        except OSError:
            return False

    def start(self) -> S3Server:
        server = os.path.join(os.path.dirname(sys.executable), "moto_server")
        os.makedirs(self.folder, exist_ok=True)
        with open(self.folder / "moto.log", "ab") as out:
            self.proc = subprocess.Popen([server, "-H", "127.0.0.1", "-p", str(self.port)], stdout=out,
                                         stderr=subprocess.STDOUT, start_new_session=True)
        wait_until(lambda: self.proc is not None and (self.proc.poll() is not None or self._up()), 60,
                   "moto's S3 server")
        assert self.proc.poll() is None, (self.folder / "moto.log").read_text()
        self.fs(create=True).create_dir(self.BUCKET)
        return self

    def fs(self, create: bool = False) -> Any:
        import pyarrow.fs as pafs

        return pafs.S3FileSystem(endpoint_override=f"127.0.0.1:{self.port}", scheme="http", access_key="testing",
                                 secret_key="testing", region="us-east-1", allow_bucket_creation=create)

    def files(self, prefix: str) -> list[str]:
        """Every object under ``lake/<prefix>``, relative to it."""
        import pyarrow.fs as pafs

        base = f"{self.BUCKET}/{prefix}"
        infos = self.fs().get_file_info(pafs.FileSelector(base, recursive=True, allow_not_found=True))
        return sorted(i.path[len(base) + 1:] for i in infos if i.type == pafs.FileType.File)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
