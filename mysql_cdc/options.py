"""Options: parsed once into a validated frozen dataclass; :data:`OPTIONS` is the one table of key, type,
default and meaning (the README's option table is generated from it and checked by a test)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, get_args

from mysql_cdc.errors import ConfigError


@dataclass(frozen=True)
class OptionSpec:
    key: str
    type: type
    default: Any
    meaning: str


OPTIONS: tuple[OptionSpec, ...] = (
    OptionSpec("source", str, None, "name of a connection profile (see Connection profiles)"),
    OptionSpec("host", str, None, "server host, instead of a profile, for a login without a password (data source "
               "options only; a password comes from a profile only)"),
    OptionSpec("port", int, 3306, "server port, with host"),
    OptionSpec("user", str, None, "login user, with host"),
    OptionSpec("ssl_mode", str, None, "TLS, with host: disabled, preferred, required, verify_ca, verify_identity "
               "(a profile has its own)"),
    OptionSpec("ssl_ca", str, None, "CA certificate file (PEM), with host and ssl_mode verify_ca/verify_identity"),
    OptionSpec("tables", str, None, "comma-separated regular expressions matched against 'db.table': the chunk "
               "table's tables; in the data source, streams and mysql_cdc_binlog every matched table, one binlog "
               "reader, each row's values as JSON in __values (mysql_cdc.split types them)"),
    OptionSpec("exclude", str, None, "with tables: comma-separated regular expressions over 'db.table' of tables "
               "not captured"),
    OptionSpec("table", str, None, "one table as 'db.table' (snapshot function, data source); its own columns, "
               "typed, where tables gives every table's rows as JSON in __values"),
    OptionSpec("chunk_size", int, 0, "rows per chunk; 0: about 16 MiB of rows by the table's average row length "
               "(1,024 to 1,000,000 rows; 8,096 without statistics), smaller where that leaves a task slot of the "
               "session idle (a chunk per slot, each of 1 MiB at least)"),
    OptionSpec("chunk_key", str, None,
               "comma-separated columns that split tables without a primary key (they may repeat and be NULL); or "
               "'<table pattern>:<columns>' entries separated by ';', one per table. A table without a primary key "
               "or chunk key is read as one chunk"),
    OptionSpec("split_factor_lower", float, 0.05, "lowest (max-min+1)/rows for evenly sized integer chunks"),
    OptionSpec("split_factor_upper", float, 1000.0, "highest (max-min+1)/rows for evenly sized integer chunks"),
    OptionSpec("server_id_range", str, "900000-900099",
               "replica server ids for binlog readers, 'first-last' (ids of registered replicas are skipped)"),
    OptionSpec("unchecked_server_ids", bool, False,
               "claim replica server ids without checking them against the server's replicas, for a capture user "
               "that may not list them (MariaDB without REPLICATION MASTER ADMIN); keep server_id_range away from "
               "your replicas' ids"),
    OptionSpec("watermark", str, "auto",
               "auto, snapshot (MariaDB), gtid (MySQL with GTIDs) or position (plain; can lose rows)"),
    OptionSpec("state_dir", str, None, "where chunk watermarks are recorded (path or URI); unset: not recorded"),
    OptionSpec("fetch_size", int, 8192, "rows per batch: fetched by the mysqlclient path, handed to Spark, and "
               "the most rows of one binlog transaction a reader holds at once (a larger one is read in pieces)"),
    OptionSpec("partitions", int, 0, "data source: Spark partitions to spread the chunks over; 0: Spark's default "
               "parallelism when register() ran (set it where executors join later), at most one per chunk"),
    OptionSpec("metadata_columns", bool, True,
               "snapshot reads: false returns the table's columns only, as a JDBC read does (faster into Spark); "
               "change reads (streams, mysql_cdc_binlog) refuse false"),
    OptionSpec("connect_timeout", float, 10.0, "seconds to wait for a connection"),
    OptionSpec("reconnect_timeout", float, 600.0,
               "a running read (stream, sync, data source tasks): seconds to keep trying again after the server was "
               "lost (restarted, unreachable, a rotated password) before stopping; 0: stop at the first failure"),
    OptionSpec("read_timeout", float, 120.0,
               "seconds without a byte from the server before a read counts as lost (a frozen server or network) "
               "and is tried again"),
    OptionSpec("tinyint1_as_boolean", bool, False, "map TINYINT(1) to BOOLEAN instead of TINYINT"),
    OptionSpec("startup", str, "initial",
               "binlog start: initial (after the recorded snapshot; streams take it first), snapshot (snapshot "
               "only), latest, earliest, offset (startup_offset), timestamp (startup_timestamp)"),
    OptionSpec("startup_offset", str, None, "with startup offset: 'file:pos', a JSON offset, or a MySQL GTID set"),
    OptionSpec("startup_timestamp", str, None,
               "with startup timestamp: epoch seconds, milliseconds with their unit ('1700000000000ms'), or "
               "ISO-8601; earlier commits are not emitted"),
    OptionSpec("end", str, "latest", "mysql_cdc_binlog (the SQL function and the data source): where a batch read "
               "stops, 'latest' (taken when the read starts) or 'file:pos'"),
    OptionSpec("once", bool, False,
               "streaming: read up to the binlog's end taken when the stream starts, then plan no more batches (what "
               "Trigger.AvailableNow does; on Spark 4.0 and 4.1, where a Python source cannot tell its trigger, "
               "runs that end when caught up set it and stop the query once nothing more comes)"),
    OptionSpec("max_chunks_per_batch", int, 0, "streaming: snapshot chunks per micro-batch; 0: all"),
    OptionSpec("max_rows_per_batch", int, 0,
               "streaming: rows per micro-batch: binlog change rows (rounded up to whole transactions) and snapshot "
               "rows (whole chunks by their planned size, and chunks planned no larger); 0: no limit"),
    OptionSpec("max_bytes_per_batch", int, 0,
               "streaming: bytes per micro-batch: of the binlog's change events (rounded up to whole transactions) "
               "and of snapshot chunks by the table's average row length (chunks planned no larger); 0: no limit"),
    OptionSpec("schema_changes", str, "follow",
               "follow: a DDL statement on a captured table is followed, in place where no stored value changed, "
               "else by snapshotting that table again (a stream of one table stops once to be restarted with new "
               "columns, or for good where it would need a new snapshot); stop: every such statement stops the "
               "stream (see Schema changes)"),
    OptionSpec("binlog_partitions", int, 0,
               "streaming and the mysql_cdc_binlog data source: Spark tasks that read one micro-batch's (or the "
               "read's) binlog range at once, cut at transaction "
               "boundaries (parallel catch-up of a backlog): n, parts of at least 1 MB; 1: one reader; 0: as many "
               "as the session runs tasks at once, parts of at least 16 MB (only a backlog is split)"),
    OptionSpec("driver_host", str, None,
               "streaming: the address executors reach the query's driver at, to hand back the watermarks of the "
               "chunks they read (the state_dir is the driver's); unset: the driver's own addresses, tried in turn"),
    OptionSpec("row_decoder", str, "planned",
               "planned: binlog row images are decoded by a reader compiled per table map (fast); library: by "
               "python-mysql-replication's generic decoder (the same values, several times slower)"),
    OptionSpec("allow_statement_writes", bool, False,
               "let a statement logged as SQL text (a session with binlog_format STATEMENT or MIXED) pass when it "
               "names no captured table; a trigger, view, stored function or cascading foreign key that wrote a "
               "captured table through it is then missing from the output (default: such a statement stops the read)"),
    OptionSpec("before_images", str, "full",
               "reads of many tables (option tables): full, or key: an update's before image (__op -U) holds its "
               "primary key's columns and NULL for the others, all a mirror merges by (a table without a primary "
               "key keeps them whole; the sync's stream sets it: an update of a table of large values then carries "
               "one copy of them, not two). Kept in the state_dir, as tinyint1_as_boolean is"),
    OptionSpec("large_value_dir", str, None,
               "reads of many tables: a folder every executor and the process that applies the rows reach, where a "
               "BLOB or TEXT value of large_value_bytes or more travels as a file (its row's __values names it) "
               "instead of through Spark (docs/DESIGN.md §11); the sync's: it sets it in local mode, reads the "
               "files and empties its folder once a batch is applied (a read of your own with it gets rows that "
               "name files, which mysql_cdc.split(..., large_value_dir=...) reads, and removes them yourself); "
               "unset: every value travels in its row"),
    OptionSpec("large_value_bytes", int, 8 << 20,
               "with large_value_dir: the size from which a value travels as a file"),
    OptionSpec("allow_unlogged_cascades", bool, False,
               "MariaDB: capture tables changed by ON DELETE/UPDATE CASCADE or SET NULL foreign keys, whose "
               "cascaded changes are not in the binlog (a mirror keeps those rows)"),
)
_SPECS = {s.key: s for s in OPTIONS}
# the modes of the options that take one of a few words
Watermark = Literal["auto", "snapshot", "gtid", "position"]
Startup = Literal["initial", "snapshot", "latest", "earliest", "offset", "timestamp"]
SchemaChanges = Literal["follow", "stop"]
RowDecoder = Literal["planned", "library"]
BeforeImages = Literal["full", "key"]
WATERMARKS: tuple[str, ...] = get_args(Watermark)
STARTUP_MODES: tuple[str, ...] = get_args(Startup)
SCHEMA_CHANGES: tuple[str, ...] = get_args(SchemaChanges)
ROW_DECODERS: tuple[str, ...] = get_args(RowDecoder)
BEFORE_IMAGES: tuple[str, ...] = get_args(BeforeImages)
SNAPSHOT_STARTUPS = ("initial", "snapshot")  # the startup modes that read the tables' chunks


@dataclass(frozen=True)
class CdcOptions:
    source: str | None = None
    host: str | None = None
    port: int = 3306
    user: str | None = None
    ssl_mode: str | None = None
    ssl_ca: str | None = None
    tables: str | None = None
    exclude: str | None = None
    table: str | None = None
    chunk_size: int = 0
    chunk_key: str | None = None
    split_factor_lower: float = 0.05
    split_factor_upper: float = 1000.0
    server_id_range: str = "900000-900099"
    unchecked_server_ids: bool = False
    watermark: Watermark = "auto"
    state_dir: str | None = None
    fetch_size: int = 8192
    partitions: int = 0
    metadata_columns: bool = True
    connect_timeout: float = 10.0
    reconnect_timeout: float = 600.0
    read_timeout: float = 120.0
    tinyint1_as_boolean: bool = False
    startup: Startup = "initial"
    startup_offset: str | None = None
    startup_timestamp: str | None = None
    end: str = "latest"
    once: bool = False
    max_chunks_per_batch: int = 0
    max_rows_per_batch: int = 0
    max_bytes_per_batch: int = 0
    schema_changes: SchemaChanges = "follow"
    binlog_partitions: int = 0
    driver_host: str | None = None
    row_decoder: RowDecoder = "planned"
    allow_statement_writes: bool = False
    before_images: BeforeImages = "full"
    large_value_dir: str | None = None
    large_value_bytes: int = 8 << 20
    allow_unlogged_cascades: bool = False

    @property
    def reads_snapshot(self) -> bool:
        """Whether this startup reads the tables' chunks (``initial``, ``snapshot``), not the binlog alone."""
        return self.startup in SNAPSHOT_STARTUPS

    @property
    def follows_ddl(self) -> bool:
        """Whether a capture of many tables follows DDL on its tables (``schema_changes`` follow), snapshotting a
        table again where needed; a single table's stream follows only by a restart (a Spark stream keeps its
        schema) and never snapshots again."""
        return self.tables is not None and self.schema_changes == "follow"

    @property
    def server_ids(self) -> range:
        m = re.fullmatch(r"\s*(\d+)\s*-\s*(\d+)\s*", self.server_id_range)
        if not m or int(m.group(1)) < 1 or int(m.group(2)) < int(m.group(1)) or int(m.group(2)) >= 2**32:
            raise ConfigError(f"bad server_id_range {self.server_id_range!r}; expected 'first-last' "
                              "with 1 <= first <= last < 2^32, e.g. '900000-900099'")
        return range(int(m.group(1)), int(m.group(2)) + 1)

    @property
    def chunk_key_columns(self) -> tuple[str, ...]:
        """The columns of a plain ``chunk_key`` (every table without a primary key); none in the per-table form."""
        if ":" in (self.chunk_key or ""):
            return ()
        return tuple(c.strip() for c in (self.chunk_key or "").split(",") if c.strip())

    @property
    def chunk_key_entries(self) -> tuple[tuple[str, tuple[str, ...]], ...]:
        """``(table pattern, columns)`` of each entry of the per-table form ``'db[.]a:k; db[.]b:x,y'``.

        >>> parse_options({"chunk_key": "shop[.]events:day, seq; shop[.]log:id"}).chunk_key_entries
        (('shop[.]events', ('day', 'seq')), ('shop[.]log', ('id',)))
        """
        if ":" not in (self.chunk_key or ""):
            return ()
        out = []
        for entry in (self.chunk_key or "").split(";"):
            if entry.strip():
                pattern, _, cols = entry.rpartition(":")
                out.append((pattern.strip(), tuple(c.strip() for c in cols.split(",") if c.strip())))
        return tuple(out)

    def chunk_key_of(self, table: str) -> tuple[str, ...]:
        """The chunk key columns given for ``'db.table'``: the first entry whose pattern matches it in the
        per-table form, else the plain columns (empty: none given)."""
        for pattern, cols in self.chunk_key_entries:
            if re.fullmatch(pattern, table):
                return cols
        return self.chunk_key_columns

    @property
    def table_patterns(self) -> tuple[str, ...]:
        return split_patterns(self.tables or "")

    @property
    def exclude_patterns(self) -> tuple[str, ...]:
        return split_patterns(self.exclude or "")


def split_patterns(text: str) -> tuple[str, ...]:
    r"""Comma-separated regular expressions, split at the commas between them only: a comma inside a group,
    a class or a repeat count (``{2,4}``), or escaped, belongs to its pattern.

    >>> split_patterns(r"shop[.]orders, shop[.]log_\d{2,4}, crm[.](a|b)")
    ('shop[.]orders', 'shop[.]log_\\d{2,4}', 'crm[.](a|b)')
    >>> split_patterns(r"x[.][,;], y[.]a\,b")
    ('x[.][,;]', 'y[.]a\\,b')
    """
    out: list[str] = []
    part: list[str] = []
    depth, in_class, i = 0, False, 0
    while i < len(text):
        ch = text[i]
        if ch == "\\" and i + 1 < len(text):
            part.append(text[i:i + 2])
            i += 2
            continue
        if in_class:
            in_class = ch != "]" or part[-1:] == ["["] or part[-2:] == ["[", "^"]  # "[]..]", "[^]..]" hold a "]"
        elif ch == "[":
            in_class = True
        elif ch in "({":
            depth += 1
        elif ch in ")}":
            depth = max(0, depth - 1)
        elif ch == "," and depth == 0:
            out.append("".join(part).strip())
            part = []
            i += 1
            continue
        part.append(ch)
        i += 1
    out.append("".join(part).strip())
    return tuple(p for p in out if p)


def _coerce(spec: OptionSpec, value: Any) -> Any:
    if value is None:
        return None
    try:
        if spec.type is bool:
            if isinstance(value, bool):
                return value
            text = str(value).strip().lower()
            if text in ("true", "1", "yes", "on"):
                return True
            if text in ("false", "0", "no", "off"):
                return False
            raise ValueError(text)
        if spec.type is int and isinstance(value, float) and not value.is_integer():
            raise ValueError(value)
        return spec.type(value)
    except (TypeError, ValueError):
        raise ConfigError(f"option {spec.key!r} must be a {spec.type.__name__}, got {value!r}") from None


# what a query may say of its connection besides a profile's name: a login without a password (no secret in play)
INLINE_CONNECTION = ("host", "port", "user", "ssl_mode", "ssl_ca")
NO_PASSWORD_OPTION = (
    "option 'password' is not taken: options come with the query (SQL text, .option()), and whoever writes a query "
    "could have a password, or a secret it names (env:, file:), sent to a server of their choosing; name a "
    "connection profile instead (source => '<name>'), set up by whoever runs Spark: mysql_cdc.register(spark, "
    "profiles=...), $MYSQL_CDC_PROFILE_<NAME>, or the file named by $MYSQL_CDC_PROFILES_FILE (a profile reads its "
    "password from an environment variable or a file with password-env / password-file)")


def parse_options(raw: Mapping[str, Any]) -> CdcOptions:
    """Validate a mapping of option names (case-insensitive) to values into :class:`CdcOptions`."""
    values: dict[str, Any] = {}
    for k, v in raw.items():
        key = k.strip().lower()
        if key == "password":  # never echoed: it may be a literal password
            raise ConfigError(NO_PASSWORD_OPTION)
        spec = _SPECS.get(key)
        if spec is None:
            raise ConfigError(f"unknown option {k!r}; known options: {', '.join(sorted(_SPECS))}")
        coerced = _coerce(spec, v)
        if coerced is not None:
            values[key] = coerced
    opts = CdcOptions(**values)
    inline = [k for k in INLINE_CONNECTION if k in values]
    if opts.source and inline:
        raise ConfigError(f"give either source={opts.source!r} (a connection profile) or the option(s) "
                          f"{', '.join(inline)}, not both: a profile's password goes only to the server the profile "
                          "names, so a query cannot move it to another host, port, user or TLS mode")
    if opts.chunk_size < 0:
        raise ConfigError(f"chunk_size must be >= 1 rows, or 0 to size chunks by bytes, got {opts.chunk_size!r}")
    if opts.partitions < 0:
        raise ConfigError(f"partitions must be >= 0 (0: Spark's parallelism), got {opts.partitions!r}")
    if opts.fetch_size < 1:
        raise ConfigError(f"fetch_size must be >= 1, got {opts.fetch_size!r}")
    if not 0 < opts.split_factor_lower <= opts.split_factor_upper:
        raise ConfigError(f"split factors must satisfy 0 < lower <= upper, got "
                          f"{opts.split_factor_lower!r} and {opts.split_factor_upper!r}")
    if opts.watermark not in WATERMARKS:
        raise ConfigError(f"bad watermark {opts.watermark!r}; expected one of {', '.join(WATERMARKS)}")
    if opts.connect_timeout <= 0:
        raise ConfigError(f"connect_timeout must be > 0 seconds, got {opts.connect_timeout!r}")
    if opts.reconnect_timeout < 0:
        raise ConfigError(f"reconnect_timeout must be >= 0 seconds (0: no second try), got {opts.reconnect_timeout!r}")
    if opts.read_timeout <= 0:
        raise ConfigError(f"read_timeout must be > 0 seconds, got {opts.read_timeout!r}")
    if opts.binlog_partitions < 0:
        raise ConfigError(f"binlog_partitions must be >= 0 (0: by the session's task slots), got "
                          f"{opts.binlog_partitions!r}")
    if opts.row_decoder not in ROW_DECODERS:
        raise ConfigError(f"bad row_decoder {opts.row_decoder!r}; expected one of {', '.join(ROW_DECODERS)}")
    if opts.large_value_bytes < 1:
        raise ConfigError(f"large_value_bytes must be >= 1, got {opts.large_value_bytes!r}")
    if opts.large_value_dir and re.match(r"[A-Za-z][A-Za-z0-9+.-]*:", opts.large_value_dir):
        raise ConfigError(f"large_value_dir {opts.large_value_dir!r} is a URI: give a folder path that every executor "
                          "and the driver mount (e.g. /Volumes/main/cdc/large_values, an NFS or EFS mount)")
    if opts.large_value_dir and opts.tables is None:
        raise ConfigError("large_value_dir is for reads of many tables (option tables), whose __values carry each "
                          "row's values: a read of one table hands Spark its columns; drop the option")
    if opts.before_images not in BEFORE_IMAGES:
        raise ConfigError(f"bad before_images {opts.before_images!r}; expected one of {', '.join(BEFORE_IMAGES)}")
    if opts.before_images == "key" and opts.tables is None:
        raise ConfigError("before_images 'key' is for reads of many tables (option tables), whose __values may hold "
                          "NULL for any column; a read of one table keeps its columns' types and NULL-ability: "
                          "drop the option")
    if opts.schema_changes not in SCHEMA_CHANGES:
        raise ConfigError(f"bad schema_changes {opts.schema_changes!r}; expected one of {', '.join(SCHEMA_CHANGES)}")
    if opts.startup not in STARTUP_MODES:
        raise ConfigError(f"bad startup {opts.startup!r}; expected one of {', '.join(STARTUP_MODES)}")
    if opts.startup == "offset" and not opts.startup_offset:
        raise ConfigError("startup 'offset' needs startup_offset, e.g. 'binlog.000003:4' or a MySQL GTID set")
    if opts.startup == "timestamp" and not opts.startup_timestamp:
        raise ConfigError("startup 'timestamp' needs startup_timestamp, e.g. '2026-11-22T10:00:00+00:00'")
    if opts.max_chunks_per_batch < 0 or opts.max_rows_per_batch < 0 or opts.max_bytes_per_batch < 0:
        raise ConfigError(f"max_chunks_per_batch, max_rows_per_batch and max_bytes_per_batch must be >= 0 (0: no "
                          f"limit), got {opts.max_chunks_per_batch!r}, {opts.max_rows_per_batch!r} and "
                          f"{opts.max_bytes_per_batch!r}")
    opts.server_ids  # noqa: B018 - validates the range
    if opts.table and opts.tables:
        raise ConfigError(f"give table={opts.table!r} (one table, typed columns) or tables={opts.tables!r} (patterns, "
                          "rows as JSON in __values), not both")
    if opts.exclude and not opts.tables:
        raise ConfigError(f"exclude={opts.exclude!r} narrows the tables option's patterns: give tables too")
    for pattern, cols in opts.chunk_key_entries:
        if not pattern or not cols:
            raise ConfigError(f"bad chunk_key entry {pattern + ':' + ','.join(cols)!r} in {opts.chunk_key!r}; "
                              "expected '<table pattern>:<column>[,<column>...]' entries separated by ';'")
    for p in opts.table_patterns + opts.exclude_patterns + tuple(e[0] for e in opts.chunk_key_entries):
        try:
            re.compile(p)
        except re.error as e:
            raise ConfigError(f"bad table pattern {p!r}: {e}; patterns are Python regular expressions "
                              "matched against 'db.table'") from e
    return opts


# ---- connection profiles ----


