"""Secrets reach only the server their profile names, and never in clear text without TLS.

A server that asks for the password in clear text (``mysql_clear_password``) and records every byte it gets
(:mod:`tests.fake_auth_server`) stands for a host a SQL author names, or for a real server's clear-text login
plugin over a plain connection. Every client the project uses (pymysql for planning, mysqlclient for chunk
SELECTs, connectorx for Arrow SELECTs, python-mysql-replication for the binlog) logs in to it, and SQL text,
DataFrame options and Spark Connect try to point a secret at it: it never receives one.
"""

from __future__ import annotations

import os
from typing import Any

import pytest

import mysql_cdc
from mysql_cdc.chunks import Chunk
from mysql_cdc.connect import connect, connect_fast
from mysql_cdc.errors import ConnectError
from mysql_cdc.ids import TableId
from mysql_cdc.offsets import BinlogOffset
from mysql_cdc.profiles import ConnectionProfile
from mysql_cdc.schema import ColumnInfo, TableSchema
from mysql_cdc.udtf.binlog.transactions import read_transactions
from mysql_cdc.udtf.snapshot.fast_select import FastPathUnavailable, fast_select
from tests.fake_auth_server import ClearTextServer, clear_text_server

SECRET = "Sup3r-secret-7x"


def _binlog(p: ConnectionProfile) -> Any:
    return list(read_transactions(p, 900001, BinlogOffset("binlog.000001", 4), {TableId("d", "t")},
                                  flavor="mysql", auto_position=False))


def _arrow(p: ConnectionProfile) -> Any:
    schema = TableSchema(TableId("d", "t"), (ColumnInfo("id", "int", "int", False),), ("id",), ("id",))
    return fast_select(p, schema, Chunk(TableId("d", "t"), 0, ("id",), None, None))


CLIENTS = {"pymysql": connect, "mysqlclient": connect_fast, "binlog": _binlog, "connectorx": _arrow}


# connectorx knows no clear-text plugin and gives up after its pool's 30 s: one case of it is enough
CASES = [(c, i) for c in sorted(CLIENTS) for i in (b"mysql_native_password", b"mysql_clear_password")
         if (c, i) != ("connectorx", b"mysql_clear_password")]


@pytest.mark.parametrize(("client", "initial"), CASES)
def test_no_client_sends_a_password_in_clear_text_without_tls(client: str, initial: bytes) -> None:
    """pymysql and MariaDB Connector/C (under mysqlclient) sent the password to any server that asked for it in
    clear text, over a plain connection; the server here asks at the start, or switches the login to it."""
    with clear_text_server(initial) as srv:
        p = ConnectionProfile("127.0.0.1", srv.port, "cdc", SECRET, connect_timeout=3)
        with pytest.raises((ConnectError, FastPathUnavailable)) as e:
            CLIENTS[client](p)
        assert srv.connections >= 1  # it did log in, and did not give the password
        assert not srv.seen(SECRET)
        if client != "connectorx":  # connectorx knows no clear-text plugin: it fails its own way
            assert "in clear text (mysql_clear_password) over a connection without TLS; it was not sent" in str(
                e.value)
        assert SECRET not in str(e.value)


@pytest.fixture
def fake() -> Any:
    with clear_text_server() as srv:
        yield srv


def test_sql_text_and_options_cannot_send_a_secret_to_a_host_they_name(spark: Any, fake: ClearTextServer,
                                                                       tmp_path: Any) -> None:
    """``CREATE TEMPORARY VIEW ... USING mysql_cdc OPTIONS (host '<any host>', password 'file:...')`` (or
    ``env:``) resolved the reference where the query ran and answered the named server in clear text: on a
    shared SQL endpoint anyone who could run SQL read every secret the Spark processes held. Query options no
    longer carry or name a password, and a profile's connection cannot be moved by them."""
    secret_file = tmp_path / "secret"
    secret_file.write_text(SECRET + "\n")
    os.chmod(secret_file, 0o600)
    mysql_cdc.register(spark, {"shop": f"mysql://cdc:{SECRET}@127.0.0.1:{fake.port}?connect-timeout=3"})
    for ref in (f"file:{secret_file}", "env:MYSQL_CDC_PASSWORD_SHOP", "env:HOME"):
        with pytest.raises(Exception, match="option 'password' is not taken"):
            spark.sql(f"CREATE OR REPLACE TEMPORARY VIEW stolen USING mysql_cdc OPTIONS (host '127.0.0.1', "
                      f"port '{fake.port}', user 'x', password '{ref}', table 'a.b')").collect()
            spark.sql("SELECT * FROM stolen").collect()
        with pytest.raises(Exception, match="option 'password' is not taken"):
            (spark.read.format("mysql_cdc").option("host", "127.0.0.1").option("port", fake.port)
             .option("password", ref).option("table", "a.b").load().collect())
        # the binlog's data source, as its SQL function, takes no connection options at all
        with pytest.raises(Exception, match=r"forbidden option\(s\) \['host', 'password', 'port', 'user'\]") as e:
            spark.sql(f"CREATE OR REPLACE TEMPORARY VIEW stolen USING mysql_cdc_binlog OPTIONS (host '127.0.0.1', "
                      f"port '{fake.port}', user 'x', password '{ref}', table 'a.b')").collect()
        assert ref not in str(e.value)
    # a profile's password goes only to its own host: an option that moves the connection is refused
    for key, value in (("host", "127.0.0.2"), ("port", "1"), ("ssl_mode", "disabled")):
        with pytest.raises(Exception, match=f"source='shop' \\(a connection profile\\) or the option\\(s\\) {key}"):
            spark.read.format("mysql_cdc").option("source", "shop").option(key, value).option(
                "table", "a.b").load().collect()
    assert fake.connections == 0  # nothing above reached the server
    # the profile's own server asks for clear text: refused over a plain connection, from SQL and DataFrames
    with pytest.raises(Exception, match="in clear text .*it was not sent"):
        spark.sql("SELECT * FROM mysql_cdc_chunks(source => 'shop', tables => 'a[.]b')").collect()
    with pytest.raises(Exception, match="in clear text .*it was not sent"):
        spark.read.format("mysql_cdc").option("source", "shop").option("table", "a.b").load().collect()
    assert fake.connections >= 2 and not fake.seen(SECRET)


@pytest.mark.parametrize("server", ["mysql"], indirect=True)  # the planner's objects matter here, not the server
def test_what_spark_pickles_holds_no_password(profile: ConnectionProfile, db: str, root: Any, tmp_path: Any,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """The data source's readers and partitions, batch and stream, as Spark pickles them to send to executors
    (and may log or spill): a profile's name and where its password is read, never the password
    (docs/DESIGN.md §8). The copy an executor unpickles reads the password again where the profile names it."""
    from pyspark import cloudpickle

    from mysql_cdc.udtf.spark.batch_source import build_data_source
    from mysql_cdc.udtf.spark.binlog_source import build_binlog_source

    root.cursor().execute("CREATE TABLE t (id INT PRIMARY KEY, v INT)")
    root.cursor().execute("INSERT INTO t VALUES (1, 1), (2, 2)")
    monkeypatch.setenv("MYSQL_CDC_PROFILE_PICKLED", f"mysql://{profile.user}@{profile.host}:{profile.port}")
    monkeypatch.setenv("MYSQL_CDC_PASSWORD_PICKLED", profile.password)
    cls = build_data_source({}, 2)
    batch = cls({"source": "pickled", "table": f"{db}.t"}).reader(None)
    stream = cls({"source": "pickled", "table": f"{db}.t", "state_dir": str(tmp_path / "state")}).streamReader(None)
    start = stream.initialOffset()
    parts = batch.partitions() + stream.partitions(start, stream.next_offset(start, 0))
    assert parts
    changes = build_binlog_source({}, 2)({"source": "pickled", "table": f"{db}.t", "startup": "earliest"}).reader(None)
    for obj in (batch, stream, changes, *parts, *changes.partitions()):
        data = cloudpickle.dumps(obj)
        assert profile.password.encode() not in data, type(obj).__name__
    copy = cloudpickle.loads(cloudpickle.dumps(batch))
    assert copy.profile.password == "" and copy.profile.login_password() == profile.password
    assert sum(b.num_rows for p in batch.partitions() for b in copy.read(p)) == 2

