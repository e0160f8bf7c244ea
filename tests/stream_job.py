"""A streaming query the tests run in-process or as a separate driver process (so it can be killed with -9):
``spark.readStream.format("mysql_cdc")`` into a parquet sink with a checkpoint.

As a program: ``python -m tests.stream_job TABLE STATE CHECKPOINT OUT TRIGGER [KEY=VALUE ...]`` (more
source options; TABLE ``tables=<patterns>`` captures many tables), the connection URL in
``$MYSQL_CDC_TEST_SOURCE`` (never on the command line). TRIGGER is ``availableNow`` (run to the end and exit
0) or ``processing`` (micro-batches every 0.5 s until killed).
"""

from __future__ import annotations

import os
import sys
from typing import Any

import mysql_cdc


def start(spark: Any, url: str, table: str, state: str, checkpoint: str, out: str, trigger: str,
          max_chunks: int = 1, **options: Any) -> Any:
    # a Connect client's stream names a profile of the server's (tests.helpers.give_server_profile): its tasks
    # do not see the session's files, where a registered profile keeps its password
    remote = type(spark).__module__.startswith("pyspark.sql.connect")
    mysql_cdc.register(spark, None if remote else {"src": url})
    which = ("tables", table[len("tables="):]) if table.startswith("tables=") else ("table", table)
    reader = (spark.readStream.format("mysql_cdc").option("source", "src").option(*which)
              .option("state_dir", state).option("max_chunks_per_batch", max_chunks))
    if trigger == "availableNow":  # to the end: availableNow, or where Python sources lack it, option once
        reader = reader.option("once", "true")
    for k, v in options.items():
        reader = reader.option(k, v)
    writer = (reader.load().writeStream.format("parquet").option("path", out)
              .option("checkpointLocation", checkpoint))
    writer = writer.trigger(**mysql_cdc.once_trigger()) if trigger == "availableNow" else writer.trigger(
        processingTime="0.5 seconds")
    query = writer.start()
    if trigger == "availableNow":
        mysql_cdc.stop_when_caught_up(query)
    return query


def main(argv: list[str]) -> int:
    table, state, checkpoint, out, trigger = argv[:5]
    options = dict(a.split("=", 1) for a in argv[5:])
    from pyspark.sql import SparkSession

    spark = (SparkSession.builder.master("local[2]").appName("mysql-cdc-stream-job")
             .config("spark.ui.enabled", "false").config("spark.driver.bindAddress", "127.0.0.1")
             .config("spark.driver.host", "127.0.0.1").config("spark.sql.shuffle.partitions", "2")
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    q = start(spark, os.environ["MYSQL_CDC_TEST_SOURCE"], table, state, checkpoint, out, trigger, **options)
    q.awaitTermination()
    if q.exception() is not None:
        print(q.exception(), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
