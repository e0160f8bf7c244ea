"""Where a sync's mirror goes and what writes it: the format (Delta Lake or Apache Iceberg), the target (a folder
of Delta tables, or a catalog namespace) and the writer (Spark's own Delta Lake or Iceberg, merging on the
executors, or delta-rs in the driver).

Pure rules (no pyspark, no network); the session's facts come from ``udtf/spark/compat.py``.

- A target is a **catalog namespace** when it is dotted identifiers and nothing else (``main.mirror``,
  ``spark_catalog.shop``, ``lake.mirror_{database}``), else a **path** (``/lake``, ``s3a://b/lake``,
  ``./my.lake``). In a namespace, a source table ``db.t`` is the table ``<namespace>.t``, with ``{database}``
  in the namespace replaced by ``db``: one namespace per source database. In a folder it is
  ``<folder>/<db>/<t>`` (``mirror.table_path``).
- Delta: the writer is **Spark's Delta** when the session has Delta's Spark classes (Delta 4.4.0 ships them for
  Spark 4.0, 4.1 and 4.2: :func:`delta_artifact`), else **delta-rs** (any Spark; folders only, written by the
  driver). A namespace without Delta in the session is an error that names the jars.
- Iceberg: always **Spark's Iceberg** into a catalog namespace (an Iceberg table is named by its catalog; Iceberg
  ships a runtime for Spark 4.0 and 4.1: :func:`iceberg_artifact`); a folder, or a session without Iceberg's
  SQL extension, is an error that names the fix.
"""

from __future__ import annotations

import os
import re
from collections.abc import Collection
from dataclasses import dataclass
from typing import Literal

from mysql_cdc.errors import ConfigError
from mysql_cdc.ids import TableId
from mysql_cdc.udtf.sync.lake_types import FORMATS, Format

Writer = Literal["spark", "delta-rs"]
DELTA_VERSION = "4.4.0"  # Delta Lake's release with Spark jars for 4.0, 4.1 and 4.2 (none for 4.3 yet)
_DELTA_SPARKS = ("4.0", "4.1", "4.2")
# Iceberg's Spark runtime per Spark minor: the newest release on Maven Central for it (none for 4.2 or 4.3 yet)
ICEBERG_VERSIONS = {"4.0": "1.11.0", "4.1": "1.12.0"}
# a sync's micro-batch bounds unless given, per writer: see batch_bounds
_BOUNDS: dict[str, dict[str, str]] = {
    "delta-rs": {"max_chunks_per_batch": "4", "max_rows_per_batch": "200000", "max_bytes_per_batch": str(64 << 20)},
    "spark": {"max_chunks_per_batch": "32", "max_rows_per_batch": "1000000", "max_bytes_per_batch": str(256 << 20)},
}
_IDENT = r"(?:[A-Za-z_][A-Za-z0-9_]*|`(?:[^`]|``)+`)"
_NAMESPACE = re.compile(rf"{_IDENT}(?:\.{_IDENT})*")


@dataclass(frozen=True)
class Target:
    """A sync's target: ``kind`` ``path`` (a folder of Delta tables) or ``catalog`` (a namespace)."""

    kind: Literal["path", "catalog"]
    value: str

    def table_name(self, table: TableId) -> str:
        """The catalog table (SQL text, each part quoted) of a source table, for a namespace target.

        >>> parse_target("lake.mirror_{database}").table_name(TableId("shop", "order`s"))
        '`lake`.`mirror_shop`.`order``s`'
        >>> parse_target("main.`my schema`").table_name(TableId("shop", "t"))
        '`main`.`my schema`.`t`'
        """
        assert self.kind == "catalog"
        parts = [_unquote(p).replace("{database}", table.database) for p in _split(self.value)]
        return ".".join(quote(p) for p in [*parts, table.table])

    def catalog(self) -> str:
        """The catalog a namespace target names (its first part), unquoted.

        >>> parse_target("`my.lake`.mirror").catalog()
        'my.lake'
        """
        assert self.kind == "catalog"
        return _unquote(_split(self.value)[0])

    def namespace(self, table: TableId) -> str:
        """The namespace (SQL text) a source table's mirror is in."""
        return self.table_name(table).rpartition(".")[0]


def quote(name: str) -> str:
    """A SQL identifier, quoted and escaped.

    >>> quote("a`b")
    '`a``b`'
    """
    return "`" + name.replace("`", "``") + "`"


def _split(value: str) -> list[str]:
    return re.findall(r"[A-Za-z0-9_{}]+|`(?:[^`]|``)+`", value)


def _unquote(part: str) -> str:
    return part[1:-1].replace("``", "`") if part.startswith("`") else part


def parse_target(to: str) -> Target:
    """A sync's ``to``: a catalog namespace (two or more dotted identifiers, ``{database}`` allowed in them) or
    a path.

    >>> parse_target("main.mirror"), parse_target("/lake").kind, parse_target("./my.lake").kind
    (Target(kind='catalog', value='main.mirror'), 'path', 'path')
    >>> parse_target("s3a://bucket/lake").kind, parse_target("lake").kind
    ('path', 'path')
    """
    text = to.strip()
    probe = text.replace("{database}", "x")
    if "." in probe and "/" not in probe and ":" not in probe and _NAMESPACE.fullmatch(probe):
        return Target("catalog", text)
    return Target("path", to)


def check_names(target: Target, tables: list[TableId]) -> None:
    """Two source tables must not share a mirror table (a namespace without ``{database}`` and two databases
    with a table of one name): one error before data moves.

    >>> check_names(parse_target("main.m"), [TableId("a", "t"), TableId("b", "u")])
    >>> check_names(parse_target("main.m"), [TableId("a", "t"), TableId("b", "t")])
    Traceback (most recent call last):
    ...
    mysql_cdc.errors.ConfigError: tables 'a.t' and 'b.t' would both be mirrored as `main`.`m`.`t`: put ...
    """
    if target.kind != "catalog":
        return
    seen: dict[str, TableId] = {}
    for t in tables:
        name = target.table_name(t)
        if name in seen and seen[name] != t:
            raise ConfigError(f"tables {str(seen[name])!r} and {str(t)!r} would both be mirrored as {name}: put "
                              f"{{database}} in the target (e.g. {target.value}_{{database}}), or leave one out")
        seen[name] = t


def delta_artifact(pyspark_version: str) -> str | None:
    """Maven coordinates of Delta's Spark jars for a pyspark version, ``None`` where Delta has none.

    >>> delta_artifact("4.2.1"), delta_artifact("4.3.0")
    ('io.delta:delta-spark_4.2_2.13:4.4.0', None)
    """
    minor = ".".join(pyspark_version.split(".")[:2])
    return f"io.delta:delta-spark_{minor}_2.13:{DELTA_VERSION}" if minor in _DELTA_SPARKS else None


# Delta's setting of how many tasks rebuild a table's state from its log (Delta's default: 50)
SNAPSHOT_PARTITIONS = "spark.databricks.delta.snapshotPartitions"


def delta_snapshot_partitions(master: str, cpus: int) -> int | None:
    """How many tasks Spark's Delta rebuilds a table's state with, for a session of ``master`` on a machine of
    ``cpus`` cores: its local cores in local mode (``None``: Delta's default of 50 on a cluster). A sync's every
    batch rebuilds the state of each table it merges into; 50 tasks on 2 local cores took 12 s a table (pyspark
    4.2, Delta 4.4.0, a table of 300 rows: two tables merged, 20 s a batch), 2 tasks 2 s (8 s a batch).

    >>> delta_snapshot_partitions("local[2]", 8), delta_snapshot_partitions("local[*]", 8)
    (2, 8)
    >>> delta_snapshot_partitions("local", 8), delta_snapshot_partitions("local[4 , 2]", 8)
    (1, 4)
    >>> delta_snapshot_partitions("spark://head:7077", 8), delta_snapshot_partitions("local-cluster[2,1,1024]", 8)
    (None, None)
    """
    m = re.fullmatch(r"local(?:\[\s*(\d+|\*)\s*(?:,\s*\d+\s*)?\])?", master.strip())
    if m is None:
        return None
    cores = m.group(1)
    return 1 if cores is None else max(1, cpus) if cores == "*" else max(1, int(cores))


def iceberg_artifact(pyspark_version: str) -> str | None:
    """Maven coordinates of Iceberg's Spark runtime for a pyspark version, ``None`` where Iceberg has none.

    >>> iceberg_artifact("4.1.4"), iceberg_artifact("4.2.1")
    ('org.apache.iceberg:iceberg-spark-runtime-4.1_2.13:1.12.0', None)
    """
    minor = ".".join(pyspark_version.split(".")[:2])
    version = ICEBERG_VERSIONS.get(minor)
    return f"org.apache.iceberg:iceberg-spark-runtime-{minor}_2.13:{version}" if version else None


def check_format(fmt: str) -> Format:
    """A sync's ``format``, checked.

    >>> check_format("iceberg")
    'iceberg'
    >>> check_format("hudi")
    Traceback (most recent call last):
    ...
    mysql_cdc.errors.ConfigError: format 'hudi' is not one the sync writes: give delta or iceberg
    """
    if fmt not in FORMATS:
        raise ConfigError(f"format {fmt!r} is not one the sync writes: give {' or '.join(FORMATS)}")
    return fmt


def choose_writer(target: Target, lakes: Collection[str], fmt: Format = "delta") -> Writer:
    """Who writes a mirror in format ``fmt`` to ``target``, given the formats the Spark session writes
    (``lakes``, from ``udtf/spark/compat.py``): Spark where the session has the format, delta-rs for a Delta
    folder where it has not.

    >>> choose_writer(parse_target("/lake"), ("delta",)), choose_writer(parse_target("/lake"), ())
    ('spark', 'delta-rs')
    >>> choose_writer(parse_target("lake.mirror"), ("iceberg",), "iceberg")
    'spark'
    >>> choose_writer(parse_target("main.mirror"), ())
    Traceback (most recent call last):
    ...
    mysql_cdc.errors.ConfigError: the target 'main.mirror' is a catalog namespace, and this Spark session ...
    >>> choose_writer(parse_target("/lake"), ("iceberg",), "iceberg")
    Traceback (most recent call last):
    ...
    mysql_cdc.errors.ConfigError: an Iceberg mirror goes into a catalog namespace, not the folder '/lake': ...
    """
    if fmt == "iceberg":
        if target.kind != "catalog":
            raise ConfigError(f"an Iceberg mirror goes into a catalog namespace, not the folder {target.value!r}: "
                              "give --to <catalog>.<namespace> (e.g. lake.mirror_{database}), with the catalog "
                              "set in the session (spark.sql.catalog.lake=org.apache.iceberg.spark.SparkCatalog "
                              "and its type=hadoop|rest|glue|hive)")
        if "iceberg" not in lakes:
            raise ConfigError("this Spark session has no Apache Iceberg: start it with Iceberg's runtime "
                              "(spark.jars.packages org.apache.iceberg:iceberg-spark-runtime-<spark 4.0|4.1>_2.13:"
                              f"<{'|'.join(ICEBERG_VERSIONS.values())}>, spark.sql.extensions "
                              "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions; the CLI does this "
                              "itself) and the target's catalog, or use format delta")
        return "spark"
    if "delta" in lakes:
        return "spark"
    if target.kind == "catalog":
        raise ConfigError(f"the target {target.value!r} is a catalog namespace, and this Spark session has no Delta "
                          f"Lake: start it with Delta's jars (spark.jars.packages io.delta:delta-spark_<spark "
                          f"4.0|4.1|4.2>_2.13:{DELTA_VERSION}, spark.sql.extensions "
                          "io.delta.sql.DeltaSparkSessionExtension; the CLI does this itself), or give a folder")
    return "delta-rs"


def batch_bounds(writer: Writer) -> dict[str, str]:
    """The stream options that bound a sync's micro-batches unless the user gives them, by the writer.

    delta-rs collects each batch into the driver's Python: a few hundred MB at most (4 chunks, 200,000 rows,
    64 MiB). Spark's writers hold no row in the driver (the batch stays on the executors, which spill it), and
    each commit costs seconds of fixed work (a MERGE plans, joins and commits), so their batches are bigger:
    measured on TPC-H orders sf 1 (1.5 M rows, Delta, 2 cores, MERGEs), the snapshot took 14 batches and 143 s at
    delta-rs's bounds, 2 batches and 34 s at larger ones. A batch is also what a crash reads again.

    >>> batch_bounds("delta-rs")["max_rows_per_batch"], batch_bounds("spark")["max_rows_per_batch"]
    ('200000', '1000000')
    """
    return dict(_BOUNDS[writer])


def sync_stream_options(writer: Writer, large_value_dir: str | None = None) -> dict[str, str]:
    """The stream options a sync sets unless the user gives them: its batches' bounds (:func:`batch_bounds`),
    ``before_images`` key (a mirror deletes an update's before image by its key and needs none of its other
    values, so an update of a row of large values carries them once, its after image, not twice), and
    ``large_value_dir`` where one is known (:func:`local_large_values`).

    >>> sync_stream_options("delta-rs")["before_images"]
    'key'
    >>> sync_stream_options("delta-rs", "/state/large_values")["large_value_dir"]
    '/state/large_values'
    """
    return {**batch_bounds(writer), "before_images": "key",
            **({"large_value_dir": large_value_dir} if large_value_dir else {})}


def local_large_values(state_dir: str, local_mode: bool) -> str | None:
    """Where a sync's large values travel unless the user says (option ``large_value_dir``): in a classic session
    of local mode (``local_mode``: ``udtf/spark/compat.local_mode``), whose executors are this machine's, the
    folder ``large_values`` of a local state dir; else none (a cluster's executors need a folder the driver
    shares with them: the user names it).

    >>> local_large_values("/lake/state", True), local_large_values("/lake/state", False)
    ('/lake/state/large_values', None)
    >>> local_large_values("s3://bucket/state", True) is None
    True
    """
    from mysql_cdc.state.storage import parse_location

    if not local_mode:
        return None
    where = parse_location(state_dir)
    return os.path.join(where.path, "large_values") if where.local else None

