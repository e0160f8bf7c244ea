"""What differs between the pyspark versions this package runs on, 4.0 to 4.3: found by looking for the
feature, in this one module, never by version checks spread through the code.

- The streaming admission-control API (``pyspark.sql.streaming.datasource``: ``ReadLimit``,
  ``SupportsTriggerAvailableNow``, ``latestOffset(start, limit)``) exists from 4.2. On 4.0 and 4.1 a Python
  stream source has ``latestOffset()`` without its start, and ``Trigger.AvailableNow`` ends after the one batch
  its first ``latestOffset()`` plans. The stream then tracks its start itself (Spark tells a restarted source
  the latest offset it saw, by ``partitions(latest, latest)``), bounds its batches by its own options, and a
  run that ends when it has caught up (``--once``, ``once=True``) reads with option ``once`` under a
  processing-time trigger and is stopped once the source reports nothing more (:func:`stop_when_caught_up`).
- Everything else the package uses (Python data sources, batch and streaming; Python UDTFs with ``analyze``
  and TABLE arguments; Arrow-optimized UDTFs; ``spark.dataSource.register`` over Spark Connect) is in 4.0.

>>> supported("4.0.5"), supported("4.3.0"), supported("3.5.3"), supported("4.4.0")
(True, True, False, False)
"""

from __future__ import annotations

import ast
import functools
import importlib.util
import json
import logging
import re
import threading
import time
from typing import Any

from mysql_cdc.errors import ConfigError

LOWEST, HIGHEST = (4, 0), (4, 3)  # the pyspark versions (major, minor) this package supports, both included
SUPPORTED = f"{LOWEST[0]}.{LOWEST[1]} to {HIGHEST[0]}.{HIGHEST[1]}"
_log = logging.getLogger("mysql_cdc")


def supported(version: str) -> bool:
    """Whether a pyspark (or Spark) version string is in the supported range."""
    m = re.match(r"(\d+)\.(\d+)", version)
    return m is not None and LOWEST <= (int(m.group(1)), int(m.group(2))) <= HIGHEST


def check_pyspark(server_version: str | None = None) -> str:
    """The installed pyspark's version, if supported (and the Spark server's, from a Connect session); else one
    clear error naming the supported range, never an ImportError from inside the package."""
    try:
        import pyspark
    except ImportError as e:
        raise ConfigError(f"pyspark cannot be imported ({e}); this package runs with pyspark {SUPPORTED}: "
                          "pip install 'pyspark-mysql-cdc[spark]', or beside your cluster's pyspark") from None
    version = str(getattr(pyspark, "__version__", "?"))
    if not supported(version):
        raise ConfigError(f"pyspark {version} is installed, and this package runs with pyspark {SUPPORTED}: install "
                          f"one of those (pip install 'pyspark[connect]>=4.0,<4.4')")
    if server_version is not None and not supported(server_version):
        raise ConfigError(f"the Spark Connect server runs Spark {server_version}, and this package runs with Spark "
                          f"{SUPPORTED}")
    return version


@functools.cache
def admission_control() -> bool:
    """Whether stream sources get their start and a read limit (``latestOffset(start, limit)``, pyspark 4.2+)."""
    try:
        return importlib.util.find_spec("pyspark.sql.streaming.datasource") is not None
    except ImportError:
        return False


def once_trigger() -> dict[str, Any]:
    """The trigger of a run that ends when it has caught up: ``availableNow`` where the source supports it,
    else batches back to back (the run is stopped by :func:`stop_when_caught_up`)."""
    return {"availableNow": True} if admission_control() else {"processingTime": "0 seconds"}


def progress_offset(raw: Any) -> dict[str, Any]:
    """A source offset as a query's progress reports it: JSON, or (Python sources on Spark 4.0) the dict's
    Python text; ``{}`` for none.

    >>> progress_offset('{"v": 1, "pos": 4}'), progress_offset("{'v': 1, 'pos': 4}"), progress_offset(None)
    ({'v': 1, 'pos': 4}, {'v': 1, 'pos': 4}, {})
    """
    if isinstance(raw, dict):
        return raw
    if not isinstance(raw, str) or not raw:
        return {}
    try:
        value = json.loads(raw)
    except ValueError:
        value = ast.literal_eval(raw)
    return value if isinstance(value, dict) else {}


def stop_when_caught_up(query: Any, poll: float = 0.2) -> threading.Thread | None:
    """Where Spark cannot end a stream by itself when it has caught up (no ``availableNow`` for Python sources
    on 4.0 and 4.1), stop ``query`` once its source, read with option ``once``, has nothing more: a trigger
    after a batch found no new data. ``None`` where Spark ends it by itself."""
    if admission_control():
        return None

    def watch() -> None:
        seen = None
        while query.isActive:
            try:
                status, progress = query.status, query.lastProgress
            except Exception:  # the query ended meanwhile, or the session is going
                return
            idle = progress is not None and not status.get("isDataAvailable") and not status.get("isTriggerActive")
            batch = progress.get("batchId") if progress else None
            if idle and seen == batch:  # twice the same batch, idle, and no data since: caught up
                _log.info("mysql_cdc: the stream caught up at batch %s: stopping it (option once)", batch)
                query.stop()
                return
            seen = batch if idle else None
            time.sleep(poll)

    thread = threading.Thread(target=watch, name="mysql_cdc-once", daemon=True)
    thread.start()
    return thread


def delta_in_session(spark: Any) -> bool:
    """Whether the session writes Delta Lake with Spark (its SQL extension configured, or Databricks, where Delta
    is built in): the sync then merges with Spark on the executors (``udtf/sync/sinks.py``)."""
    try:
        extensions = str(spark.conf.get("spark.sql.extensions", "") or "")
        if "DeltaSparkSessionExtension" in extensions:
            return True
        return bool(spark.conf.get("spark.databricks.clusterUsageTags.clusterId", None))
    except Exception:  # a session that answers no settings: not known to have Delta
        return False


def iceberg_in_session(spark: Any) -> bool:
    """Whether the session writes Apache Iceberg with Spark's row-level SQL (Iceberg's SQL extension
    configured, which ``MERGE`` and ``SET IDENTIFIER FIELDS`` need)."""
    try:
        return "IcebergSparkSessionExtensions" in str(spark.conf.get("spark.sql.extensions", "") or "")
    except Exception:  # a session that answers no settings: not known to have Iceberg
        return False


def lake_formats(spark: Any) -> tuple[str, ...]:
    """The lakehouse formats this session writes with Spark (``delta``, ``iceberg``), for
    ``udtf/sync/sinks.choose_writer``."""
    return tuple(f for f, has in (("delta", delta_in_session), ("iceberg", iceberg_in_session)) if has(spark))


def local_mode(spark: Any) -> bool:
    """Whether ``spark`` is a classic session of local mode, whose executors are this process's machine (a
    Spark Connect client cannot tell where its server's executors are: false)."""
    if type(spark).__module__.startswith("pyspark.sql.connect"):
        return False
    return str(spark.sparkContext.master).startswith("local")


def session_udf(spark: Any) -> Any:
    """``pyspark.sql.functions.udf`` for the kind of session ``spark`` is: a classic install also ships Spark
    Connect's client, and its classic ``udf`` fails in a process with no classic session (a Connect client's)."""
    if type(spark).__module__.startswith("pyspark.sql.connect"):
        from pyspark.sql.connect.functions import udf as connect_udf

        return connect_udf
    from pyspark.sql.functions import udf

    return udf
