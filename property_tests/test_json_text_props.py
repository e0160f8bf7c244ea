"""MySQL's binary JSON read from the binlog is written as the server's own JSON text (C4: a mirror's value must
not depend on whether a row came by SELECT or by binlog). Doubles were written Python's way (``1e+21``,
``8.197252117359e-05``, ``1000000000000000.0``) and DECIMAL, dates, times and binary data inside JSON were
lost or crashed the read: a property compares the binlog's text with ``SELECT``'s on MySQL 9.7 (MariaDB
keeps JSON as text, which both paths read alike)."""

from __future__ import annotations

import json
import math
import re
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mysql_cdc.jsontext import json_double
from mysql_cdc.options import parse_options
from mysql_cdc.planner.plan import plan_tables
from mysql_cdc.udtf.binlog.startup import server_end
from property_tests.test_values_props import EXAMPLES, database_on
from tests.conftest import _server
from tests.servers import ServerProcess
from tests.test_values import read_by_every_path

doubles = st.floats(allow_nan=False, allow_infinity=False) | st.sampled_from(
    [1e15, 1e14, 1e-15, 1e-16, 5e-324, 1.7976931348623157e308, -0.0, 0.1, 1e21, 8.197252117359e-05,
     1000000000029395.5, -2214960063561970.5, 1234567890123456.0, 999999999999999.9, 9.999999999999999e-16])


@given(doubles)
def test_a_json_double_reads_back_as_itself_in_the_servers_layout(x: float) -> None:
    text = json_double(x)
    assert float(text) == x and math.copysign(1, float(text)) == math.copysign(1, x)
    assert re.fullmatch(r"-?(\d+\.\d+|\d(\.\d+)?e-?\d+)", text), text
    # the layout MySQL 9.7 writes (jsontext.json_double; the server test below compares with it): exponent form
    # below 1e-15, and from 1e15 on for whole numbers (a value with digits after the point stays plain)
    t = Decimal(repr(abs(x))).normalize().as_tuple()
    e = len(t.digits) - 1 + int(t.exponent)
    assert ("e" in text) == (e < -15 or (e > 14 and len(t.digits) <= e + 1)) or x == 0
    assert "e+" not in text and not re.search(r"e-?0", text)


# JSON values; opaque ones (DECIMAL, dates, times, binary) are made by SQL functions around them
leaf = (st.none() | st.booleans() | st.integers(-(2**63), 2**64 - 1) | doubles
        | st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=8))
documents = st.recursive(leaf, lambda c: st.lists(c, max_size=4) | st.dictionaries(
    st.text(max_size=5), c, max_size=4), max_leaves=10)
OPAQUE = ["CAST(1.50 AS DECIMAL(5,2))", "CAST(-0.0010 AS DECIMAL(10,4))", "CAST('2020-01-02 03:04:05.5' AS "
          "DATETIME(6))", "CAST('2020-01-02' AS DATE)", "CAST('-838:59:59' AS TIME)", "CAST('10:11:12.25' AS TIME(2))",
          "x'00ff'", "CAST('abc' AS BINARY)", "b'101'", "TIMESTAMP'2021-06-30 23:59:59'"]


@pytest.mark.timeout(600)
def test_binlog_json_is_the_servers_text(tmp_path_factory: pytest.TempPathFactory) -> None:
    server: ServerProcess = _server("mysql", tmp_path_factory)  # MySQL's binary JSON (MariaDB's is text)
    profile, conn, cur = database_on(server, "jprops")
    opts = parse_options({"tables": "jprops\\.t"})

    @settings(max_examples=EXAMPLES, deadline=None, database=None, suppress_health_check=list(HealthCheck))
    @given(docs=st.lists(documents, min_size=1, max_size=8), opaque=st.lists(st.sampled_from(OPAQUE), max_size=4))
    def check(docs: list[Any], opaque: list[str]) -> None:
        cur.execute("DROP TABLE IF EXISTS t")
        cur.execute("CREATE TABLE t (id INT PRIMARY KEY, j JSON)")
        facts, _ = plan_tables(profile, opts)
        start = server_end(profile, facts)
        for i, d in enumerate(docs):
            cur.execute("INSERT INTO t VALUES (%s, CAST(%s AS JSON))", (i, json.dumps(d)))
        if opaque:
            cur.execute(f"INSERT INTO t VALUES (%s, JSON_ARRAY({', '.join(opaque)}))", (len(docs),))
        cur.execute("UPDATE t SET j = JSON_ARRAY(j)")
        end = server_end(profile, facts)
        _, plans = plan_tables(profile, opts)
        paths = read_by_every_path(profile, facts, opts, plans[0], start, end)
        for i in range(len(docs) + bool(opaque)):
            selected = paths["mysqlclient"][i][1]
            for path in ("-U", "+U", "library -U", "library +U", "arrow"):
                got = paths[path][i][1]
                want = selected if path.endswith("+U") or path == "arrow" else selected[1:-1]
                assert got == want, f"via {path}: {got!r}, SELECT gives {want!r}"

    try:
        check()
    finally:
        cur.execute("DROP DATABASE IF EXISTS jprops")
        conn.close()
