"""The README's examples run verbatim, and its option and type tables are the ones the code defines."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from typing import Any

import pytest

from mysql_cdc.docs import option_table, type_table
from mysql_cdc.options import ConnectionProfile
from tests.helpers import insert_rows
from tests.servers import ServerInfo

README = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "README.md")


def _readme() -> str:
    with open(README, encoding="utf-8") as f:
        return f.read()


def _block(lang: str, containing: str = "") -> str:
    """The README's first ``lang`` block that contains ``containing``."""
    blocks = [b for b in re.findall(rf"```{lang}\n(.*?)```", _readme(), flags=re.S) if containing in b]
    assert blocks, f"README has no {lang} block with {containing!r}"
    return blocks[0]


def test_readme_tables_are_generated_from_the_code() -> None:
    text = _readme()
    assert option_table() in text
    assert type_table() in text


def test_readme_first_screen_names_the_two_commands() -> None:
    first = "\n".join(_readme().splitlines()[:20])
    assert "bash scripts/demo.sh" in first and "bash scripts/test.sh" in first
    with open(os.path.join(os.path.dirname(README), ".ci", "run")) as f:
        ci = f.read()
    assert "scripts/test.sh" in ci


@pytest.fixture
def shop(info: ServerInfo, profile: ConnectionProfile) -> Iterator[str]:
    conn = info.connect(root=True)
    cur = conn.cursor()
    cur.execute("DROP DATABASE IF EXISTS shop")
    cur.execute("CREATE DATABASE shop")
    cur.execute("CREATE TABLE shop.orders (id INT PRIMARY KEY, amount DECIMAL(10,2))")
    conn.select_db("shop")
    insert_rows(conn, "orders", ["id", "amount"], [(i, i / 4) for i in range(1, 2501)])
    url = f"mysql://{profile.user}:{profile.password}@{profile.host}:{profile.port}"
    os.environ["SHOP_MYSQL_URL"] = url
    yield url
    os.environ.pop("SHOP_MYSQL_URL", None)
    cur.execute("DROP DATABASE shop")
    conn.close()


def test_readme_examples_run_verbatim(spark: Any, shop: str, capsys: pytest.CaptureFixture[str]) -> None:
    scope: dict[str, Any] = {"spark": spark}
    exec(compile(_block("python", 'option("table", "shop.orders")'), "README.md", "exec"), scope)
    assert scope["orders"].count() == 2500
    assert len(scope["chunks"]) == 3
    assert "2500" in capsys.readouterr().out
    statements = [s for s in re.sub(r"--[^\n]*", "", _block("sql")).split(";") if s.strip()]
    assert len(statements) == 4
    spark.sql(statements[0])
    assert spark.sql(statements[1]).collect()[0]["n"] == 2500
    chunk_rows = spark.sql(statements[2]).collect()
    assert [r["chunk_id"] for r in chunk_rows] == ["shop.orders:0", "shop.orders:1", "shop.orders:2"]
    counts = {r["__chunk_id"]: r["n"] for r in spark.sql(statements[3]).collect()}
    assert sum(counts.values()) == 2500 and len(counts) == 3


@pytest.mark.parametrize("session", ["classic", "connect"])
def test_readme_whole_database_example_runs(session: str, request: pytest.FixtureRequest, shop: str, tmp_path: Any,
                                            info: ServerInfo) -> None:
    """The README's first example, with its /data/cdc paths moved under a temporary folder: a stream over the
    database, each micro-batch split per table into typed files (Connect: on a server with the package)."""
    from tests.test_streaming import _session

    spark, remote = _session(session, request)
    conn = info.connect(root=True, database="shop")
    conn.cursor().execute("CREATE TABLE tmp_scratch (id INT PRIMARY KEY)")  # excluded by the example
    conn.cursor().execute("CREATE TABLE customers (id INT PRIMARY KEY, name VARCHAR(20))")
    conn.cursor().execute("INSERT INTO customers VALUES (1, 'a'), (2, 'b')")
    try:
        code = _block("python").replace("/data/cdc", str(tmp_path))
        assert 'option("tables", "shop[.].*")' in code
        exec(compile(code, "README.md", "exec"), {"spark": spark})
        orders = spark.read.parquet(str(tmp_path / "changes" / "shop.orders"))
        assert orders.count() == 2500 and dict(orders.dtypes)["amount"] == "decimal(10,2)"
        assert spark.read.parquet(str(tmp_path / "changes" / "shop.customers")).count() == 2
        assert sorted(os.listdir(tmp_path / "changes")) == ["shop.customers", "shop.orders"]
    finally:
        conn.close()
        if remote is not None:
            remote.stop()
