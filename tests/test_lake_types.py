"""The mirror's column types per lakehouse format (``udtf/sync/lake_types.py``): every value a capture reads is
kept exactly, and comes back as it was read; and which writer a sync gets on this Spark (``udtf/sync/sinks.py``)."""

from __future__ import annotations

import os
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import mysql_cdc
from mysql_cdc.types import TYPE_TABLE
from mysql_cdc.udtf.convert import arrow_type
from mysql_cdc.udtf.sync.lake_types import FORMATS, from_lake, identifier_fields, lake_arrow_type, lake_type, to_lake

# Arrow types of the capture and values of each, extremes included (TIME reaches +-838:59:59.999999)
_MICROS = 838 * 3600 * 10**6 + 59 * 60 * 10**6 + 59 * 10**6 + 999_999
COLUMNS = {
    pa.int8(): st.integers(-128, 127),
    pa.int16(): st.integers(-(2**15), 2**15 - 1),
    pa.int32(): st.integers(-(2**31), 2**31 - 1),
    pa.int64(): st.integers(-(2**63), 2**63 - 1),
    pa.duration("us"): st.integers(-_MICROS, _MICROS),
    pa.string(): st.text(max_size=5),
    pa.binary(): st.binary(max_size=5),
}


@settings(deadline=None)  # its time is the machine's load, not the rule's
@given(st.data(), st.sampled_from(FORMATS))
def test_a_batch_goes_into_each_format_and_back_unchanged(data: st.DataObject, fmt: str) -> None:
    types = data.draw(st.lists(st.sampled_from(sorted(COLUMNS, key=str)), min_size=1, max_size=5))
    n = data.draw(st.integers(0, 6))
    schema = pa.schema([pa.field(f"c{i}", t) for i, t in enumerate(types)])
    arrays = []
    for t in types:
        values = data.draw(st.lists(st.one_of(st.none(), COLUMNS[t]), min_size=n, max_size=n))
        arrays.append(pa.array(values, pa.int64()).cast(t) if pa.types.is_duration(t) else pa.array(values, t))
    batch = pa.RecordBatch.from_arrays(arrays, schema=schema)
    lake = to_lake(batch, fmt)  # type: ignore[arg-type]
    assert [f.type for f in lake.schema] == [lake_arrow_type(t, fmt) for t in types]  # type: ignore[arg-type]
    if fmt == "iceberg":  # Iceberg has no 8- or 16-bit integers and neither format an interval
        assert not any(pa.types.is_int8(f.type) or pa.types.is_int16(f.type) for f in lake.schema)
    assert not any(pa.types.is_duration(f.type) for f in lake.schema)
    assert from_lake(lake, schema).equals(batch)


@pytest.mark.parametrize("fmt", FORMATS)
def test_every_type_of_the_type_table_has_a_lake_type_arrow_agrees_with(fmt: str) -> None:
    """The rule on Spark types (the README's table) and the rule on Arrow types (what is written) agree."""
    for rule in TYPE_TABLE:
        if rule.spark.startswith("("):
            continue
        spark = rule.spark.replace("(p,s)", "(10,2)")
        assert arrow_type(lake_type(spark, fmt)) == lake_arrow_type(arrow_type(spark), fmt), rule  # type: ignore[arg-type]


def test_identifier_fields_are_the_key_unless_iceberg_refuses_one() -> None:
    assert identifier_fields([("a", "INT"), ("b", "STRING")], "iceberg") == ("a", "b")
    assert identifier_fields([("a", "INT"), ("b", "FLOAT")], "iceberg") == ()
    assert identifier_fields([("a", "INT")], "delta") == ()
    with pytest.raises(ValueError, match="unknown format 'parquet'"):
        lake_type("INT", "parquet")  # type: ignore[arg-type]


def test_on_a_spark_without_delta_jars_a_catalog_target_is_refused_with_the_fix(classic_spark: Any,
                                                                              tmp_path: Any) -> None:
    """pyspark 4.3 (the main suite's): Delta ships no Spark jars for it, so the sync writes folders with delta-rs;
    a catalog namespace, or the CLI's ``--writer spark``, is one error that says what to do. Iceberg (no runtime
    for 4.3 either) is refused the same way, and so is an Iceberg mirror in a folder or an unknown format, before
    anything is created."""
    import argparse

    import pyspark

    from mysql_cdc.cli import with_lake_jars
    from mysql_cdc.errors import ConfigError
    from mysql_cdc.udtf.spark.compat import lake_formats
    from mysql_cdc.udtf.sync.sinks import choose_writer, delta_artifact, iceberg_artifact, parse_target

    lakes = lake_formats(classic_spark)
    assert delta_artifact(pyspark.__version__) is None and iceberg_artifact(pyspark.__version__) is None
    assert lakes == ()
    assert choose_writer(parse_target("/lake"), lakes) == "delta-rs"
    with pytest.raises(ConfigError, match="'main.mirror' is a catalog namespace, and this Spark session has no Delta"):
        choose_writer(parse_target("main.mirror"), lakes)
    with pytest.raises(ConfigError, match="this Spark session has no Apache Iceberg: start it with Iceberg's runtime"):
        choose_writer(parse_target("lake.mirror"), lakes, "iceberg")
    with pytest.raises(ConfigError, match="--writer spark needs Delta Lake's jars for pyspark 4.3"):
        with_lake_jars(argparse.Namespace(writer="spark", conf=[]))
    ns = argparse.Namespace(writer="auto", conf=[])
    with_lake_jars(ns)
    assert ns.conf == []  # auto on 4.3: delta-rs, no jars
    iceberg = {"format": "iceberg", "writer": "auto", "to": "lake.m"}
    with pytest.raises(ConfigError, match="the catalog 'lake' of the mirror 'lake.m' is not set"):
        with_lake_jars(argparse.Namespace(**iceberg, conf=[]))
    with pytest.raises(ConfigError, match="Apache Iceberg ships no Spark runtime for pyspark 4.3"):
        with_lake_jars(argparse.Namespace(**iceberg, conf=[("spark.sql.catalog.lake", "x")]))
    given = [("spark.sql.catalog.lake", "x"), ("spark.jars.packages", "o:iceberg-spark-runtime-4.1_2.13:1.12.0")]
    ns = argparse.Namespace(**iceberg, conf=given)
    with_lake_jars(ns)  # a runtime the user gives is theirs to choose: only the SQL extension is added
    assert dict(ns.conf)["spark.jars.packages"] == given[1][1] and "spark.sql.extensions" in dict(ns.conf)
    with pytest.raises(ConfigError, match="an Iceberg mirror goes into a catalog namespace, not the folder '/lake'"):
        with_lake_jars(argparse.Namespace(**{**iceberg, "to": "/lake"}, conf=[]))
    for fmt, to, error in (("iceberg", str(tmp_path / "lake"), "an Iceberg mirror goes into a catalog namespace"),
                           ("hudi", str(tmp_path / "lake"), "format 'hudi' is not one the sync writes")):
        with pytest.raises(ConfigError, match=error):
            mysql_cdc.sync(classic_spark, to=to, checkpoint=str(tmp_path / "ck"), state_dir=str(tmp_path / "st"),
                           tables="d[.]t", source="nowhere", format=fmt)
    assert not os.listdir(tmp_path)  # refused before anything was created
