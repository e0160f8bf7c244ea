"""Where a sync's mirror goes and what writes it: the target (a folder of Delta tables, or a catalog namespace)
and the writer (Spark's own Delta Lake, merging on the executors, or delta-rs in the driver).

Pure rules (no pyspark, no network); the session's facts come from ``udtf/spark/compat.py``.

- A target is a **catalog namespace** when it is dotted identifiers and nothing else (``main.mirror``,
  ``spark_catalog.shop``, ``lake.mirror_{database}``), else a **path** (``/lake``, ``s3a://b/lake``,
  ``./my.lake``). In a namespace, a source table ``db.t`` is the table ``<namespace>.t``, with ``{database}``
  in the namespace replaced by ``db``: one namespace per source database. In a folder it is
  ``<folder>/<db>/<t>`` (``mirror.table_path``).
- The writer is **Spark's Delta** when the session has Delta's Spark classes (Delta 4.4.0 ships them for Spark
  4.0, 4.1 and 4.2: :func:`delta_artifact`), else **delta-rs** (any Spark; folders only, written by the driver).
  A namespace without Delta in the session is an error that names the jars.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from mysql_cdc.errors import ConfigError
from mysql_cdc.ids import TableId

Writer = Literal["spark", "delta-rs"]
DELTA_VERSION = "4.4.0"  # Delta Lake's release with Spark jars for 4.0, 4.1 and 4.2 (none for 4.3 yet)
_DELTA_SPARKS = ("4.0", "4.1", "4.2")
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


def choose_writer(target: Target, delta_in_session: bool) -> Writer:
    """Spark's Delta where the session has it, delta-rs for a folder where it has not.

    >>> choose_writer(parse_target("/lake"), True), choose_writer(parse_target("/lake"), False)
    ('spark', 'delta-rs')
    >>> choose_writer(parse_target("main.mirror"), False)
    Traceback (most recent call last):
    ...
    mysql_cdc.errors.ConfigError: the target 'main.mirror' is a catalog namespace, and this Spark session ...
    """
    if delta_in_session:
        return "spark"
    if target.kind == "catalog":
        raise ConfigError(f"the target {target.value!r} is a catalog namespace, and this Spark session has no Delta "
                          f"Lake: start it with Delta's jars (spark.jars.packages io.delta:delta-spark_<spark "
                          f"4.0|4.1|4.2>_2.13:{DELTA_VERSION}, spark.sql.extensions "
                          "io.delta.sql.DeltaSparkSessionExtension; the CLI does this itself), or give a folder")
    return "delta-rs"
