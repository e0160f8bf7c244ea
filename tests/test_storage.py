"""State dirs on a cluster's storage (:mod:`mysql_cdc.state.storage`): which locations are served and how, the
state store on a real S3 server (moto's, :mod:`tests.s3`), refusals before anything is written, and the sync and
the data source keeping their state on S3 across runs. (A stream with its state on S3 runs on the isolated
cluster: ``tests/test_cluster.py``.)"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mysql_cdc.chunks import Chunk, ChunkRecord
from mysql_cdc.errors import ConfigError, StateError
from mysql_cdc.ids import TableId
from mysql_cdc.offsets import BinlogOffset
from mysql_cdc.state.storage import list_names, parse_location, read_text
from mysql_cdc.state.store import StateStore
from mysql_cdc.udtf.sync.target import check_sync_paths
from tests.conftest import ROOT, _repo_env
from tests.helpers import profile_url
from tests.s3 import S3Server
from tests.servers import ServerInfo
from tests.test_keeps_running import TABLES, _equal, _make

_PART = st.text(st.sampled_from("abcxyz019-_."), min_size=1, max_size=12).filter(lambda s: s not in (".", ".."))


@given(st.sampled_from(["s3", "s3a", "s3n", "gs", "gcs"]), _PART.filter(lambda s: "." not in s),
       st.lists(_PART, max_size=4))
def test_an_object_store_uri_is_its_bucket_and_key(scheme: str, bucket: str, key: list[str]) -> None:
    loc = parse_location(f"{scheme}://{bucket}/{'/'.join(key)}")
    assert loc.kind == ("s3" if scheme.startswith("s3") else "gcs")
    assert loc.path == "/".join([bucket, *key]) and loc.authority == bucket
    assert loc.join("offsets", "x.json") == "/".join([bucket, *key, "offsets", "x.json"])


@given(st.from_regex(r"[a-z][a-z0-9+.\-]{1,8}", fullmatch=True).filter(
    lambda s: s not in ("s3", "s3a", "s3n", "gs", "gcs", "abfs", "abfss", "hdfs", "viewfs", "file", "dbfs")))
def test_a_scheme_not_served_is_refused_by_name(scheme: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(f"names the scheme '{scheme}', which is not served")):
        parse_location(f"{scheme}://host/state")


@given(st.lists(_PART, min_size=1, max_size=4))
def test_a_local_path_is_local_and_absolute(parts: list[str]) -> None:
    given_path = os.path.join(*parts)
    loc = parse_location(given_path)
    assert loc.local and loc.path == os.path.abspath(given_path)
    assert parse_location("file://" + os.path.abspath(given_path)).path == os.path.abspath(given_path)


def test_stores_by_their_uris() -> None:
    az = parse_location("abfss://cdc@acct.dfs.core.windows.net/state/x")
    assert (az.kind, az.path) == ("azure", "cdc/state/x")
    hd = parse_location("hdfs://nn:8020/user/cdc/state")
    assert (hd.kind, hd.path, hd.authority) == ("hdfs", "/user/cdc/state", "nn:8020")
    assert parse_location("/Volumes/main/cdc/state").local
    for bad, message in (("dbfs:/mnt/state", "mounted on Databricks clusters only"),
                         ("s3:///state", "names no bucket"), ("file://host/x", "a file: URI here is local"),
                         ("", "is empty")):
        with pytest.raises(ConfigError, match=message):
            parse_location(bad)
    for secret in ("s3a://AKIAXX:s3cr3t-Key@lake/state", "hdfs://u:s3cr3t-Key@nn:8020/x", "gs://tok@b/x"):
        with pytest.raises(ConfigError, match="carries credentials in the URI") as e:
            parse_location(secret)
        assert "s3cr3t" not in str(e.value) and "AKIAXX" not in str(e.value) and "tok@" not in str(e.value)


def _rec(table: TableId, index: int, pos: int) -> ChunkRecord:
    chunk = Chunk(table, index, ("id",), None if index == 0 else (index * 10,), None)
    return ChunkRecord.of(chunk, BinlogOffset("binlog.000002", 4), BinlogOffset("binlog.000002", pos), rows=3)


@pytest.fixture
def s3_env(s3: S3Server, monkeypatch: pytest.MonkeyPatch) -> S3Server:
    for k, v in s3.env().items():
        monkeypatch.setenv(k, v)
    return s3


@pytest.mark.parametrize("scheme", ["s3", "s3a"])
def test_the_state_store_on_s3(s3_env: S3Server, scheme: str) -> None:
    """Every kind of record on a real S3 server: first record wins, offsets are replaced, long names kept in
    ``names/``, a dropped table's records moved, all read back by another store of the same URI."""
    prefix = f"unit-{scheme}"
    store = StateStore(f"{scheme}://lake/{prefix}")
    t, long = TableId("d", "t.x"), TableId("d", "é" * 64)
    assert store.record_chunk(_rec(t, 1, 100)).high.pos == 100
    assert store.record_chunk(_rec(t, 1, 999)).high.pos == 100  # a retried task's record: the first stays
    store.record_chunk(_rec(long, 0, 7))
    store.record_plan(t, [_rec(t, 0, 0).chunk(), _rec(t, 1, 0).chunk()])
    store.record_offset("tables d[.].*", {"phase": "binlog", "pos": 1})
    store.record_offset("tables d[.].*", {"phase": "binlog", "pos": 2})
    again = StateStore(f"{scheme}://lake/{prefix}/")
    assert [r.index for r in again.chunk_records(t)] == [1] and again.chunk_records(long)[0].high.pos == 7
    assert again.offsets() == {"tables d[.].*": {"phase": "binlog", "pos": 2}}
    assert again.recorded_tables() == sorted([t, long], key=str)
    again.retire(t, "round-1")
    assert again.chunk_records(t) == [] and again.plan(t) is None
    files = s3_env.files(prefix)
    assert "retired/round-1/chunks/d.t%2Ex/1.json" in files and any(f.startswith("names/") for f in files)
    assert not any(f.startswith(".tmp") or "/.tmp" in f for f in files)


def test_a_checkpoint_on_s3_is_read_as_a_local_one(s3_env: S3Server, tmp_path: Path) -> None:
    from mysql_cdc.udtf.sync.job import query_app_id

    fs = s3_env.fs()
    for where in (str(tmp_path / "ck"), "s3a://lake/ck"):
        meta = '{"id":"6a1f2a52-3b5e-4a37-9e0f-2d1c3b4a5f60"}\n'
        if where.startswith("s3a"):
            with fs.open_output_stream("lake/ck/metadata") as f:
                f.write(meta.encode())
            fs.create_dir("lake/ck/commits")
            for n in ("0", "1"):
                with fs.open_output_stream(f"lake/ck/commits/{n}") as f:
                    f.write(b"v1\n{}\n")
        else:
            os.makedirs(tmp_path / "ck" / "commits")
            (tmp_path / "ck" / "metadata").write_text(meta)
            for n in ("0", "1"):
                (tmp_path / "ck" / "commits" / n).write_text("v1\n{}\n")
        assert query_app_id(where).endswith("6a1f2a52-3b5e-4a37-9e0f-2d1c3b4a5f60")
        assert list_names(where, "commits") == ["0", "1"] and read_text(where, "offsets", "1") is None
    with pytest.raises(StateError, match=r"cannot read the streaming query's id from 's3a://lake/nothing/metadata'"):
        query_app_id("s3a://lake/nothing")


def test_sync_paths_on_stores_are_checked_before_anything_is_written(s3_env: S3Server, tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    to = str(tmp_path / "lake")
    assert check_sync_paths(to, "s3a://lake/s/ck", "s3a://lake/s/state") == (to, "s3a://lake/s/ck",
                                                                           "s3a://lake/s/state")
    for ck, state, message in (
            ("s3a://lake/s/ck", "s3a://lake/s/ck/state", "overlap"),
            ("s3a://lake/s/ck", "s3a://nobucket/state", "names the bucket or container 'nobucket', which does not "
                                                         "exist"),
            ("ftp://h/ck", "s3a://lake/s/state", "names the scheme 'ftp'"),
            ("dbfs:/ck", "s3a://lake/s/state", "mounted on Databricks clusters only")):
        with pytest.raises((ConfigError, StateError), match=message):
            check_sync_paths(to, ck, state)
    with pytest.raises(ConfigError, match=r"to 's3a://lake/x' must be a local path: the sync writes its Delta "):
        check_sync_paths("s3a://lake/x", "s3a://lake/s/ck", "s3a://lake/s/state")
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9")  # nothing listens: one error, not a hang
    with pytest.raises(StateError, match=r"cannot reach the state dir 's3a://lake/s/state'"):
        check_sync_paths(to, str(tmp_path / "ck"), "s3a://lake/s/state")
    assert os.listdir(tmp_path) == []  # nothing made, least of all a folder named like a URI


def _cli(info: ServerInfo, profile: Any, s3: S3Server, cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**_repo_env(True), **s3.env(), "MYSQL_CDC_PROFILE_SRC": profile_url(profile)}
    env["PYTHONPATH"] = ROOT  # the CLI runs from cwd, a folder of its own
    return subprocess.run([sys.executable, "-m", "mysql_cdc", *args, "--master", "local[2]",
                           "--log", str(cwd.parent / "spark.log")], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=600)


@pytest.mark.parametrize("server", ["mysql"], indirect=True)  # where state lives, not server behaviour: one server
def test_the_sync_and_the_data_source_keep_their_state_on_s3(s3: S3Server, info: ServerInfo, profile: Any, db: str,
                                                             root: Any, tmp_path: Path) -> None:
    """``sync --once`` twice with its state_dir on S3 (the second run reads the first's schemas, plans, chunk
    watermarks and rounds back from S3 and goes on from its binlog point), and a snapshot through the data
    source whose executors record their chunks on S3. Nothing of the state is on the local disk."""
    _make(root, rows=300)
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    state = f"s3a://lake/{info.kind}-{db}/state"
    snap = _cli(info, profile, s3, cwd, "snapshot", "--source", "src", "--table", f"{db}.a", "--out",
                str(tmp_path / "snap"), "--format", "parquet", "--chunk-size", "100", "--state-dir",
                f"s3://lake/{info.kind}-{db}/snap")
    assert snap.returncode == 0, snap.stderr
    assert [f for f in s3.files(f"{info.kind}-{db}/snap") if f.startswith("chunks/")] == [
        f"chunks/{db}.a/{i}.json" for i in range(3)]
    sync = ["sync", "--source", "src", "--tables", f"{db}[.](a|b|c)", "--to", str(tmp_path / "lake"),
            "--checkpoint", str(tmp_path / "ck"), "--state-dir", state, "--chunk-size", "100", "--once"]
    first = _cli(info, profile, s3, cwd, *sync)
    assert first.returncode == 0, first.stderr
    assert _equal(info, db, str(tmp_path / "lake"))
    files = s3.files(f"{info.kind}-{db}/state")
    assert {f.split("/")[0] for f in files} >= {"chunks", "plans", "schemas", "rounds", "capture.json"}, files
    cur = root.cursor()
    for t in TABLES:
        cur.execute(f"UPDATE {t} SET v = v + 7 WHERE v % 4 = 1")
        cur.execute(f"DELETE FROM {t} WHERE v % 9 = 2")
    second = _cli(info, profile, s3, cwd, *sync)
    assert second.returncode == 0, second.stderr
    assert "up to date at binlog" in second.stdout, second.stdout
    assert _equal(info, db, str(tmp_path / "lake"))
    assert os.listdir(cwd) == []  # nothing local named like the URI


def test_a_connect_clients_paths_are_the_servers(tmp_path: Path) -> None:
    """From a Spark Connect client the paths are the server's: a dbfs:/ path is not refused for the client's
    own lack of Databricks' mount, a relative one is (the server's working directory is not the client's)."""
    assert check_sync_paths("dbfs:/lake", "dbfs:/_sync/ck", "s3a://lake/state", remote=True) == (
        "dbfs:/lake", "dbfs:/_sync/ck", "s3a://lake/state")
    with pytest.raises(ConfigError, match="mounted on Databricks clusters only"):
        check_sync_paths("dbfs:/lake", str(tmp_path / "ck"), str(tmp_path / "state"))
    with pytest.raises(ConfigError, match="must be absolute: the Spark Connect server resolves it"):
        check_sync_paths("lake", "/srv/ck", "/srv/state", remote=True)


def test_a_state_dir_feeds_the_query_of_one_checkpoint(tmp_path: Path) -> None:
    """The sync's first batch records its query (the checkpoint's id) in the state dir; the same query is taken
    again after a restart, another checkpoint's query is refused naming both and the fix, and the record is the
    documented JSON, private."""
    from mysql_cdc.udtf.sync.job import claim_query, query_app_id

    state = str(tmp_path / "state")
    for ck, query in (("ck", "3f1c"), ("ck2", "9a0e")):
        (tmp_path / ck).mkdir()
        (tmp_path / ck / "metadata").write_text(json.dumps({"id": query}))
    first = query_app_id(str(tmp_path / "ck"))
    assert claim_query(state, first) == first
    assert claim_query(state, first) == first  # a restart from the same checkpoint
    with pytest.raises(StateError) as e:
        claim_query(state, query_app_id(str(tmp_path / "ck2")))
    text = str(e.value)
    assert "mysql_cdc.sync:3f1c" in text and "mysql_cdc.sync:9a0e" in text and "checkpoint back" in text, text
    record = tmp_path / "state" / "sync_query.json"
    assert record.read_text() == '{"query": "mysql_cdc.sync:3f1c"}'
    assert record.stat().st_mode & 0o777 == 0o600
