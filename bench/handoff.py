"""Where Spark's own time goes on the batches a Python data source yields, with no database in the way.

The same TPC-H orders rows, made once per Python worker as Arrow record batches (``bench/handoff_rows.py``
caches them in the worker), are handed to Spark by a small Python data source in four shapes: the table's
columns only; with the metadata columns the snapshot adds (values as a real chunk has them); with those
columns all NULL (their count, not their bytes); and in many partitions. Spark reading the same rows from
Parquet, with no Python worker at all, is the floor. Each is written to Spark's ``noop`` sink.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from typing import Any

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _orders_parquet(scale: float, work: str) -> str:
    """TPC-H orders at ``scale`` as one Parquet file, typed as our reader types the MySQL table."""
    import glob

    import pyarrow as pa
    import pyarrow.csv as pcsv
    import pyarrow.parquet as pq

    out = os.path.join(work, "tpch")
    subprocess.run([os.path.join(os.path.dirname(sys.executable), "tpchgen-cli"), "-s", str(scale),
                    "--tables=orders", f"--output-dir={out}"], check=True)
    names = ["o_orderkey", "o_custkey", "o_orderstatus", "o_totalprice", "o_orderdate", "o_orderpriority",
             "o_clerk", "o_shippriority", "o_comment", "_end"]
    t = pcsv.read_csv(glob.glob(os.path.join(out, "orders*.tbl"))[0],
                      read_options=pcsv.ReadOptions(column_names=names),
                      parse_options=pcsv.ParseOptions(delimiter="|")).drop(["_end"])
    t = t.set_column(3, "o_totalprice", t.column(3).cast(pa.decimal128(15, 2)))
    t = t.set_column(7, "o_shippriority", t.column(7).cast(pa.int32()))
    path = os.path.join(work, "orders.parquet")
    pq.write_table(t, path)
    return path


def measure(scale: float, parallelism: int, repeat: int) -> list[tuple[str, float, int]]:
    """(what, best seconds, rows) for each shape; see the module docstring."""
    import pyarrow.parquet as pq
    from pyspark.sql import SparkSession
    from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition
    from pyspark.sql.pandas.types import from_arrow_schema

    work = tempfile.mkdtemp(prefix="mysql-cdc-handoff-")
    spark = None
    try:
        path = _orders_parquet(scale, work)
        rows = pq.read_metadata(path).num_rows
        base = pq.read_schema(path)

        class Part(InputPartition):
            def __init__(self, index: int, count: int) -> None:
                self.index, self.count = index, count

        class Reader(DataSourceReader):
            def __init__(self, options: Any) -> None:
                self.options = options

            def partitions(self) -> list[InputPartition]:
                n = int(self.options.get("parts", "2"))
                return [Part(i, n) for i in range(n)]

            def read(self, partition: Any) -> Any:
                from bench.handoff_rows import batches

                yield from batches(self.options["path"], partition.index, partition.count,
                                   self.options.get("meta", "none"))

        class Source(DataSource):
            @classmethod
            def name(cls) -> str:
                return "handoff_bench"

            def schema(self) -> Any:
                from bench.handoff_rows import schema_with

                return from_arrow_schema(schema_with(base, self.options.get("meta", "none")))

            def reader(self, schema: Any) -> DataSourceReader:
                return Reader(self.options)

        spark = (SparkSession.builder.master(f"local[{parallelism}]").config("spark.ui.enabled", "false")
                 .config("spark.driver.memory", "2g").getOrCreate())
        spark.sparkContext.setLogLevel("ERROR")
        spark.dataSource.register(Source)
        out: list[tuple[str, float, int]] = []

        def best(name: str, df: Any) -> None:
            df.write.format("noop").mode("overwrite").save()  # warm: the workers cache their rows
            secs = min(_timed(lambda: df.write.format("noop").mode("overwrite").save()) for _ in range(repeat))
            out.append((name, secs, rows))
            print(f"hand-off {name}: {secs:.2f} s", flush=True)

        src = spark.read.format("handoff_bench").option("path", path)
        best("Spark reads Parquet (no Python)", spark.read.parquet(path))
        best(f"table columns only, {parallelism} partitions", src.option("parts", parallelism).load())
        best(f"with the metadata columns, {parallelism} partitions",
             src.option("parts", parallelism).option("meta", "values").load())
        best(f"with the metadata columns all NULL, {parallelism} partitions",
             src.option("parts", parallelism).option("meta", "nulls").load())
        for parts in (32, 185):
            best(f"table columns only, {parts} partitions", src.option("parts", parts).load())
        return out
    finally:
        if spark is not None:
            spark.stop()
        shutil.rmtree(work, ignore_errors=True)


def _timed(fn: Any) -> float:
    t = time.monotonic()
    fn()
    return time.monotonic() - t
