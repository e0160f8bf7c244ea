"""The sync job (``mysql_cdc.sync``, ``mysql-cdc sync``): a whole database mirrored into Delta tables.

A Structured Streaming query reads the matched tables (the ``mysql_cdc`` stream: snapshot, then binlog) and
``foreachBatch`` applies each micro-batch to one Delta table per source table, at ``<to>/<database>/<table>``:
each table's rows of the batch become one MERGE of their final image per key (:mod:`.merge`), which upserts
and deletes.

Exactly once across crashes: every MERGE commits, in the same Delta commit, a transaction action
``(app id, batch id)`` (Delta's idempotent writes, ``txnAppId`` / ``txnVersion``), where the app id is the
streaming query's id from its checkpoint. Spark runs a micro-batch again after a crash with the same batch id;
a table whose log already holds that batch id (or a later one) for this app id is skipped, so no batch is
applied twice to any table and a half-applied batch is completed.

Delta tables are written with delta-rs (the ``deltalake`` package): Delta's Spark jars (4.4.0, built for Spark
4.2) fail on Spark 4.3 (``NoSuchMethodError: LogicalRDD.<init>`` on the first read). The tables are plain Delta
tables: Spark with Delta, delta-rs, DuckDB, Trino and others read them.
"""

from __future__ import annotations

import json
import logging
import os
import re
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from mysql_cdc.errors import ConfigError, StateError, TableError
from mysql_cdc.ids import TableId
from mysql_cdc.options import CdcOptions
from mysql_cdc.rowjson import decode_rows
from mysql_cdc.rows import (
    COMMIT_COLUMN,
    DATABASE_COLUMN,
    META_COLUMNS,
    OP_COLUMN,
    RESET_OP,
    SEQ_COLUMN,
    TABLE_COLUMN,
    VALUES_COLUMN,
)
from mysql_cdc.schema import TableSchema
from mysql_cdc.state.store import StateStore, capture_options, make_dirs, tighten_umask
from mysql_cdc.udtf.convert import table_arrow_schema
from mysql_cdc.udtf.schema.evolve import evolve_rows, renames_since
from mysql_cdc.udtf.sync.last_image import DELETE_COLUMN, ORDER_COLUMN, final_images

APP_PREFIX = "mysql_cdc.sync:"
# the sync's stream options unless given: micro-batches the driver can hold (each batch is collected there)
CHECKPOINT_EVERY = 100  # Delta versions between two checkpoints of a mirror table's log
_log = logging.getLogger("mysql_cdc.sync")
SYNC_DEFAULTS = {"max_chunks_per_batch": "4", "max_rows_per_batch": "200000"}


def _deltalake() -> Any:
    try:
        import deltalake
    except ImportError as e:
        raise ConfigError(f"the sync job writes Delta tables with the deltalake package, which cannot be imported "
                          f"({e}); install it with: pip install 'pyspark-mysql-cdc[delta]'") from e
    return deltalake


def delta_type(t: pa.DataType) -> pa.DataType:
    """The Delta column type of one of our Arrow types: the same, except TIME (an Arrow duration: Delta has no
    interval type), which the mirror keeps as BIGINT microseconds, signed."""
    return pa.int64() if pa.types.is_duration(t) else t


def delta_schema(schema: TableSchema, opts: CdcOptions) -> pa.Schema:
    """The mirror table of ``schema``: its columns, typed as a read of the table types them (see
    :func:`delta_type`); primary key columns NOT NULL."""
    key = set(schema.primary_key)
    return pa.schema([pa.field(f.name, delta_type(f.type), f.nullable and f.name not in key)
                      for f in table_arrow_schema(schema.columns, opts.tinyint1_as_boolean)])


def table_path(root: str, table: TableId) -> str:
    """``<root>/<database>/<table>``, the names as they are except ``/``, ``\\``, ``%``, ``~``, NUL and a leading
    ``.`` or ``_``, written as ``~`` and their UTF-8 bytes in hex: no name leaves ``root`` or names a hidden
    file, two names never share a path, no ``%`` appears (Delta readers take a path as a URL and would decode
    it), and no folder of a mirror starts with ``_``: those names are the format's (``_delta_log``) and ours
    (``<root>/_sync/...`` for the checkpoint and the state_dir, the lock file).

    >>> table_path("/lake", TableId("shop", "tÜ x")), table_path("/lake", TableId("..", "a/b%~"))
    ('/lake/shop/tÜ x', '/lake/~2e./a~2fb~25~7e')
    >>> table_path("/lake", TableId("_sync", "_delta_log"))
    '/lake/~5fsync/~5fdelta_log'
    """
    def part(name: str) -> str:
        return "".join("".join(f"~{b:02x}" for b in ch.encode()) if ch in "/\\%~\x00" or (i == 0 and ch in "._")
                       else ch for i, ch in enumerate(name))
    return os.path.join(root, part(table.database), part(table.table))


def legacy_table_path(root: str, table: TableId) -> str:
    """Where a mirror made before a leading ``_`` was escaped keeps its table (:func:`table_path` of then).

    >>> legacy_table_path("/lake", TableId("_sync", "ck"))
    '/lake/_sync/ck'
    """
    def part(name: str) -> str:
        return "".join("".join(f"~{b:02x}" for b in ch.encode()) if ch in "/\\%~\x00" or (i == 0 and ch == ".")
                       else ch for i, ch in enumerate(name))
    return os.path.join(root, part(table.database), part(table.table))


_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.\-]*):")


def local_path(what: str, path: str) -> str:
    """A path the sync may write: not empty, and a local path, not a URI (``s3://``, ``dbfs:/``, ...). Nothing
    is created here.

    >>> local_path("to", "/lake")
    '/lake'
    >>> local_path("to", "dbfs:/mnt/lake")
    Traceback (most recent call last):
    ...
    mysql_cdc.errors.ConfigError: to 'dbfs:/mnt/lake' must be a local path: it names the scheme 'dbfs', which ...
    """
    if not path or not path.strip():
        raise ConfigError(f"{what} is empty: give a directory (an empty one would be the working directory)")
    m = _SCHEME.match(path)
    if m and not (os.name == "nt" and len(m.group(1)) == 1):
        raise ConfigError(f"{what} {path!r} must be a local path: it names the scheme {m.group(1)!r}, which the sync "
                          "does not write yet; give a local directory (a mounted volume works)")
    return path


def writable(what: str, path: str) -> None:
    """``path`` is a directory this process may write, or can be made as one: its nearest existing ancestor is a
    writable directory. Nothing is created."""
    path = os.path.abspath(path)
    probe = path
    while not os.path.lexists(probe):
        probe = os.path.dirname(probe)
    if not os.path.isdir(probe) or not os.access(probe, os.W_OK | os.X_OK):
        why = "is not a directory" if not os.path.isdir(probe) else "may not be written by this process"
        raise ConfigError(f"the sync's {what} {path!r} cannot be written ({probe!r} {why}); give a directory this "
                          f"job may create and write")


def check_sync_paths(to: str, checkpoint: str, state_dir: str, *, remote: bool = False) -> tuple[str, str, str]:
    """The sync's three paths, checked before anything is created: local, not empty, writable where they run
    (absolute from a Spark Connect client, whose server resolves them), and apart from each other's contents:
    the checkpoint and the state_dir may be inside ``to`` only under a folder whose name starts with ``_`` or
    ``.`` (no mirror table goes there, see :func:`table_path`), and ``to`` not inside either. Returns them
    absolute (from a client: as given)."""
    given = {"to": to, "checkpoint": checkpoint, "state_dir": state_dir}
    for what, path in given.items():
        local_path(what, path)
        if remote and not os.path.isabs(path):
            raise ConfigError(f"{what} {path!r} must be absolute: the Spark Connect server resolves it, in its own "
                              "working directory")
    if remote:
        return to, checkpoint, state_dir
    paths = {what: os.path.abspath(path) for what, path in given.items()}
    root = paths["to"]
    for what in ("checkpoint", "state_dir"):
        p = paths[what]
        if p == root or os.path.commonpath([root, p]) == p:
            raise ConfigError(f"to {root!r} is inside the {what} {p!r}: keep the mirror's tables apart from it "
                              f"(e.g. --to /lake and --{what.replace('_', '-')} /lake/_sync/{what})")
        if os.path.commonpath([root, p]) == root:
            first = os.path.relpath(p, root).split(os.sep)[0]
            if not first.startswith(("_", ".")):
                raise ConfigError(f"the {what} {p!r} is inside to {root!r} under {first!r}, where the mirror of a "
                                  f"database named {first!r} would go: put it under a folder of to whose name starts "
                                  f"with '_' (e.g. {os.path.join(root, '_sync', what)!r}), or outside to")
    if os.path.commonpath([paths["checkpoint"], paths["state_dir"]]) in (paths["checkpoint"], paths["state_dir"]):
        raise ConfigError(f"checkpoint {paths['checkpoint']!r} and state_dir {paths['state_dir']!r} overlap: give "
                          "each a folder of its own")
    for what, p in paths.items():
        writable(what, p)
    return paths["to"], paths["checkpoint"], paths["state_dir"]


class SyncLock:
    """An exclusive lock on a folder for the life of a sync: ``flock`` of a file in it, which the OS releases
    when the process ends (a kill -9 leaves no stale lock). The file says who holds it."""

    def __init__(self, folder: str, name: str) -> None:
        self.path = os.path.join(folder, name)
        self._fd: int | None = None

    def acquire(self, private: bool = False) -> None:
        import fcntl
        import socket

        make_dirs(os.path.dirname(self.path), 0o700 if private else 0o755)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0), 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            holder = os.read(fd, 4096).decode("utf-8", "replace").strip() or "a process that wrote nothing yet"
            os.close(fd)
            raise StateError(f"another sync holds {self.path!r} ({holder}): one sync at a time per state_dir and "
                             "per target; stop it first, or give this one its own target, checkpoint and "
                             "state_dir") from None
        os.ftruncate(fd, 0)
        started = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        os.write(fd, f"pid {os.getpid()} on {socket.gethostname()}, since {started}\n".encode())
        self._fd = fd

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing the file releases its flock
            self._fd = None


LOCK_NAME = "sync.lock"  # in the state_dir
TARGET_LOCK_NAME = "_mysql_cdc_sync.lock"  # in the target: a name no mirror table takes (see table_path)
# the locks this process holds for a classic session's syncs, by lock file, with the query that holds them
_HELD: dict[str, tuple[list[SyncLock], Any]] = {}
_LISTENING: set[int] = set()  # sessions whose ended queries give their locks up (see keep_sync_locks)


def hold_sync_locks(state_dir: str, to: str) -> list[SyncLock]:
    """Lock the state_dir and the target for a sync (:class:`SyncLock`), or one clear error naming the holder.
    A lock this process holds for a query that has ended is taken over (its end may not have been heard yet)."""
    paths = (os.path.join(os.path.abspath(state_dir), LOCK_NAME), os.path.join(os.path.abspath(to), TARGET_LOCK_NAME))
    for path in paths:
        if path in _HELD:
            held, query = _HELD[path]
            if query is None and [lk.path for lk in held] == list(paths):
                return held  # taken for this sync before it started (the CLI, before Spark starts)
            if query is not None and query.isActive:
                raise StateError(f"this process runs a sync on {state_dir!r} or {to!r} already (query "
                                 f"{query.id}): stop it first")
            release_sync_locks(held)
    locks = [SyncLock(os.path.abspath(state_dir), LOCK_NAME), SyncLock(os.path.abspath(to), TARGET_LOCK_NAME)]
    try:
        locks[0].acquire(private=True)
        locks[1].acquire()
    except BaseException:
        release_sync_locks(locks)
        raise
    return locks


def release_sync_locks(locks: list[SyncLock]) -> None:
    for lock in locks:
        lock.release()
        _HELD.pop(lock.path, None)


def keep_sync_locks(spark: Any, locks: list[SyncLock], query: Any) -> None:
    """Hold ``locks`` for the life of ``query`` (a classic session's): released when the query ends, heard by a
    streaming listener of the session, or taken over by the next sync of this process. Without a session and a
    query: held for a sync about to start in this process (:func:`hold_sync_locks` hands them to it)."""
    for lock in locks:
        _HELD[lock.path] = (locks, query)
    if spark is None or id(spark) in _LISTENING:
        return
    from pyspark.sql.streaming.listener import StreamingQueryListener

    class ReleaseOnEnd(StreamingQueryListener):
        def onQueryStarted(self, event: Any) -> None:
            pass

        def onQueryProgress(self, event: Any) -> None:
            pass

        def onQueryIdle(self, event: Any) -> None:
            pass

        def onQueryTerminated(self, event: Any) -> None:
            for held, q in list(_HELD.values()):
                if str(q.id) == str(event.id):
                    release_sync_locks(held)

    spark.streams.addListener(ReleaseOnEnd())
    _LISTENING.add(id(spark))


_SYNC_ID = re.compile(r"by pyspark-mysql-cdc, sync ([0-9a-f-]{36})$")
# names the batch rows carry beside the table's columns (the metadata columns), and the merge's own
_RESERVED = frozenset([m for m, _ in META_COLUMNS] + [DELETE_COLUMN, ORDER_COLUMN])


def check_tables(schemas: Iterable[TableSchema]) -> None:
    """Every table has a primary key (a mirror merges by key) and no column named like the rows' metadata."""
    schemas = list(schemas)
    keyless = [str(s.table) for s in schemas if not s.primary_key]
    if keyless:
        raise TableError(f"tables {keyless!r} have no primary key, and a mirror merges by key: give them one, "
                         "or leave them out of the sync (option exclude / --exclude)")
    for s in schemas:
        clash = sorted(_RESERVED.intersection(s.column_names))
        if clash:
            raise TableError(f"table {str(s.table)!r} has columns named like the sync's metadata columns {clash!r}; "
                             "rename them, or leave the table out of the sync (option exclude / --exclude)")


def _same_columns(have: pa.Schema, want: pa.Schema) -> str | None:
    """What differs between an existing table's columns and the wanted ones (``None``: nothing)."""
    h = [(f.name, str(f.type)) for f in have]
    w = [(f.name, str(f.type)) for f in want]
    if h == w:
        return None
    return f"it has columns {h!r}, the mirror of the source table needs {w!r}"


@dataclass
class BatchStats:
    """What one micro-batch did (for progress)."""

    batch_id: int
    rows: int = 0
    applied: dict[str, int] = field(default_factory=dict)  # table -> rows merged
    skipped: list[str] = field(default_factory=list)  # tables this batch had already been applied to
    ignored: list[str] = field(default_factory=list)  # tables without a primary key, not mirrored
    seconds: float = 0.0
    # where the batch's time went in this process: collecting it from Spark (which runs the read), decoding the
    # rows, merging them into Delta
    collect_seconds: float = 0.0
    decode_seconds: float = 0.0
    merge_seconds: float = 0.0
    last_commit: float | None = None  # commit time of the latest change applied, seconds since the epoch


class DeltaMirror:
    """The Delta tables of one sync: created (or checked) before any data is read, then merged into."""

    def __init__(self, root: str, opts: CdcOptions, state_dir: str) -> None:
        self.given = root  # made absolute where it is used: a Spark Connect server's directory, not the client's
        self.opts = opts
        self.state_dir = state_dir
        self._schemas: dict[TableId, pa.Schema] = {}
        self._paths: dict[TableId, str] = {}

    @property
    def root(self) -> str:
        return os.path.abspath(self.given)

    def path(self, table: TableId) -> str:
        """The table's mirror: at :func:`table_path`, or where a mirror made before a leading ``_`` was escaped
        has it (:func:`legacy_table_path`)."""
        if table not in self._paths:
            p, old = table_path(self.root, table), legacy_table_path(self.root, table)
            if p != old and not os.path.isdir(p) and _deltalake().DeltaTable.is_deltatable(old):
                p = old
            self._paths[table] = p
        return self._paths[table]

    def check_root(self) -> None:
        """The target directory can be made or written: one clear error otherwise. Nothing is created."""
        local_path("to", self.given)
        writable("target", self.root)

    def prepare(self, schemas: Iterable[TableSchema]) -> list[TableId]:
        """Create the mirror table of each schema, or check the existing one: made by this capture (the sync id
        in its description, see :meth:`StateStore.record_sync_id`), with the schema's columns; the tables
        created. A table this capture made and that is gone is an error, not a new empty table (its rows were
        merged already). Every check runs before any table is created, so a bad target changes nothing."""
        dl = _deltalake()
        schemas = list(schemas)
        check_tables(schemas)
        self.check_root()
        store = StateStore(self.state_dir)
        sync_id = store.record_sync_id()
        todo = []
        for s in schemas:
            want = delta_schema(s, self.opts)
            p = self.path(s.table)
            made = store.mirror(s.table)
            if dl.DeltaTable.is_deltatable(p):
                existing = dl.DeltaTable(p)
                owner = _SYNC_ID.search(existing.metadata().description or "")
                diff = _same_columns(pa.schema(existing.schema().to_arrow()), want)
                if owner is None or owner.group(1) != sync_id:
                    by = f"by the sync {owner.group(1)!r}" if owner else "by something other than this job"
                    raise TableError(f"the Delta table {p!r} for {str(s.table)!r} was made {by}, not by the capture "
                                     f"of state_dir {self.state_dir!r} (sync {sync_id!r})"
                                     f"{'' if diff is None else ', and ' + diff}: a mirror merges only into tables "
                                     "it made; sync into another target, or use the checkpoint and state_dir that "
                                     "made this one")
                if diff is not None:  # the source table changed since (a schema change followed): follow it
                    self.evolve(s)
            elif made is not None:
                raise StateError(f"the Delta table of {str(s.table)!r} that this capture made at {made!r} is "
                                 f"missing at {p!r}, and rows were merged into it already: put it back (or give "
                                 "the target it was made in), or start this mirror again (a new target, checkpoint "
                                 "and state_dir)")
            elif os.path.lexists(p) and (not os.path.isdir(p) or os.listdir(p)):
                raise ConfigError(f"{p!r} exists and is not a Delta table; the mirror of {str(s.table)!r} goes "
                                  "there: move it away or sync into another target")
            else:
                todo.append((s, want, p))
            self._schemas[s.table] = want
        tighten_umask()
        for s, want, p in todo:
            make_dirs(p)
            dl.DeltaTable.create(p, schema=want, mode="ignore", name=s.table.table,
                                 description=f"mirror of {s.table} by pyspark-mysql-cdc, sync {sync_id}")
            store.record_mirror(s.table, p)
        return [s.table for s, _, _ in todo]

    def evolve(self, schema: TableSchema) -> bool:
        """Bring the table's mirror to ``schema``'s columns, if it has others: its rows moved to them by the
        capture's schema history (:func:`udtf.schema.evolve.evolve_rows`: columns kept, renamed, widened, dropped, or
        new and NULL), or, when it holds no row (a table reset, to be snapshotted again), just its columns
        replaced. The rewrite is one Delta commit of the whole table. True when it changed the table."""
        want = delta_schema(schema, self.opts)
        if self._schemas.get(schema.table) == want:
            return False
        check_tables([schema])
        dl = _deltalake()
        p = self.path(schema.table)
        table = dl.DeltaTable(p)
        have = pa.schema(table.schema().to_arrow())
        self._schemas[schema.table] = want
        if _same_columns(have, want) is None and [f.nullable for f in have] == [f.nullable for f in want]:
            return False
        dataset = table.to_pyarrow_dataset()
        count = dataset.count_rows()
        data: Any = want.empty_table()
        if count:
            history = StateStore(self.state_dir).history(schema.table)
            renamed = mirror_renames(history, have, lambda d: delta_schema(TableSchema.from_dict(d), self.opts))
            if renamed is None:
                del self._schemas[schema.table]
                raise TableError(f"the Delta table {p!r} of {str(schema.table)!r} has columns "
                                 f"{[f'{f.name} {f.type}' for f in have]!r}, which no schema the capture recorded for "
                                 f"the table had (now {[f'{f.name} {f.type}' for f in want]!r}): start this mirror "
                                 "again (a new target, checkpoint and state_dir)")
            moved = renamed  # a batch of the table's files at a time: memory bounded by a batch, not the table
            data = pa.RecordBatchReader.from_batches(want, (
                out for b in dataset.to_batches()
                for out in evolve_rows(pa.Table.from_batches([b]), want, moved).to_batches()))
        dl.write_deltalake(p, data, mode="overwrite", schema_mode="overwrite",
                           commit_properties=dl.CommitProperties(custom_metadata={"mysql_cdc.evolve": "columns"}))
        _log.warning("mirror of %s: columns now %s (%d rows moved)", schema.table, want.names, count)
        return True

    def reset(self, table: TableId, app_id: str, batch_id: int) -> bool:
        """Delete every row of the table's mirror (its table was dropped, truncated, renamed away or is
        snapshotted again: a ``T`` row), in a commit with the batch's transaction; false when done already."""
        dl = _deltalake()
        p = self.path(table)
        if not dl.DeltaTable.is_deltatable(p):
            return False
        t = dl.DeltaTable(p)
        done = t.transaction_version(app_id)
        if done is not None and int(done) >= batch_id:
            return False
        t.delete(commit_properties=dl.CommitProperties(app_transactions=[dl.Transaction(app_id, batch_id)],
                                                       custom_metadata={"mysql_cdc.batch": str(batch_id)}))
        return True

    def apply(self, schema: TableSchema, rows: pa.Table, app_id: str, batch_id: int) -> bool:
        """Merge one batch's rows of one table (the table's columns, ``__op``, ``_change_seq``); false when the
        table's log already holds this batch (or a later one) of ``app_id``."""
        dl = _deltalake()
        want = delta_schema(schema, self.opts)
        if schema.table not in self._schemas:
            self.prepare([schema])
        self.evolve(schema)
        p = self.path(schema.table)
        table = dl.DeltaTable(p)
        done = table.transaction_version(app_id)
        if done is not None and int(done) >= batch_id:
            return False
        src = final_images(rows, schema.primary_key)
        cols = [src.column(f.name).cast(f.type) if pa.types.is_duration(src.schema.field(f.name).type)
                else src.column(f.name) for f in want]
        src = pa.Table.from_arrays([*cols, src.column(DELETE_COLUMN)],
                                   schema=pa.schema([*want, pa.field(DELETE_COLUMN, pa.bool_(), False)]))

        def q(name: str) -> str:
            return "`" + name.replace("`", "``") + "`"
        on = " AND ".join(f"t.{q(k)} = s.{q(k)}" for k in schema.primary_key)
        sets = {q(f.name): f"s.{q(f.name)}" for f in want}
        flag = f"s.{q(DELETE_COLUMN)}"
        commit = dl.CommitProperties(app_transactions=[dl.Transaction(app_id, batch_id)],
                                     custom_metadata={"mysql_cdc.batch": str(batch_id)})
        (table.merge(src, on, source_alias="s", target_alias="t", commit_properties=commit)
         .when_matched_delete(predicate=flag)
         .when_matched_update(updates=sets, predicate=f"NOT {flag}")
         .when_not_matched_insert(updates=sets, predicate=f"NOT {flag}")
         .execute())
        table.update_incremental()
        if table.version() % CHECKPOINT_EVERY == 0:  # a reader (and the next batch) replays a short log
            table.create_checkpoint()
        return True


def mirror_renames(history: list[dict[str, Any]], have: pa.Schema, columns_of: Callable[[dict[str, Any]], pa.Schema]
                   ) -> dict[str, str] | None:
    """How a mirror with columns ``have`` reaches the table's latest schema: the columns renamed since, latest
    name to the name in ``have`` (``None``: no recorded schema had those columns). The start is the latest
    history entry with a schema whose mirror columns (``columns_of``) are ``have``; each later ``evolve``
    entry's renames compose with the earlier ones.

    >>> h = [{"action": "snapshot", "schema": ["a", "b"], "renamed": {}},
    ...      {"action": "evolve", "schema": ["a", "c"], "renamed": {"c": "b"}},
    ...      {"action": "evolve", "schema": ["a", "d"], "renamed": {"d": "c"}}]
    >>> cols = lambda d: pa.schema([(n, pa.int32()) for n in d])
    >>> mirror_renames(h, cols(["a", "b"]), cols), mirror_renames(h, cols(["a", "c"]), cols)
    ({'d': 'b'}, {'d': 'c'})
    >>> mirror_renames(h, cols(["x"]), cols) is None
    True
    """
    start = None
    for i, e in enumerate(history):
        if e.get("schema") is not None and e["action"] in ("snapshot", "evolve"):
            mine = columns_of(e["schema"])
            if [(f.name, f.type) for f in mine] == [(f.name, f.type) for f in have]:
                start = i
    if start is None or any(e["action"] == "reset" for e in history[start + 1:]):
        return None
    return renames_since(history, start)


def query_app_id(checkpoint: str) -> str:
    """The app id of a sync's Delta transactions: the streaming query's id, which Spark keeps in the
    checkpoint's ``metadata`` file across restarts (a new checkpoint is a new query: its batch ids start again
    at 0 and must not be taken for the old query's)."""
    meta = os.path.join(checkpoint, "metadata")
    try:
        with open(meta, encoding="utf-8") as f:
            return APP_PREFIX + str(json.load(f)["id"])
    except (OSError, ValueError, KeyError) as e:
        raise StateError(f"cannot read the streaming query's id from {meta!r} ({e}); the sync needs a checkpoint "
                         "location on a local file system") from e


class SyncBatches:
    """The ``foreachBatch`` function of a sync: each micro-batch of the envelope stream (option ``tables``)
    split by table, typed again with the schema the capture recorded, and merged into that table's mirror."""

    def __init__(self, mirror: DeltaMirror, state_dir: str, checkpoint: str,
                 on_batch: Callable[[BatchStats], None] | None = None,
                 prepare: list[TableSchema] | None = None) -> None:
        self.mirror = mirror
        self.state_dir = state_dir
        self.checkpoint = checkpoint
        self.on_batch = on_batch
        self._prepare = prepare  # tables to create or check where the batches run, before the first is read
        self._app_id: str | None = None
        self._ignored: set[TableId] = set()
        self._locks: list[SyncLock] = []

    def __call__(self, df: Any, batch_id: int) -> None:
        started = time.monotonic()
        if self._prepare:
            # a Spark Connect server's batch function: it holds the locks, where it writes (for the life of its
            # process, which is the query's)
            tighten_umask()
            self._locks = hold_sync_locks(self.state_dir, self.mirror.root)
            # the columns the capture recorded where it has (the client could not read them): a mirror follows
            # a later ALTER when the stream comes to it, not before
            store = StateStore(self.state_dir)
            self.mirror.prepare([store.schema(s.table) or s for s in self._prepare])
            self._prepare = None
        if self._app_id is None:
            self._app_id = query_app_id(self.checkpoint)
        stats = BatchStats(batch_id)
        data = df.toArrow()
        stats.collect_seconds = time.monotonic() - started
        stats.rows = data.num_rows
        self.follow_schemas()
        if data.num_rows:
            self.apply(data, batch_id, stats)
        stats.seconds = time.monotonic() - started
        if self.on_batch is not None:
            self.on_batch(stats)

    def follow_schemas(self) -> None:
        """Mirrors whose table's schema the capture changed (a DDL statement followed) get its new columns, also
        when the batch has no row of them."""
        store = StateStore(self.state_dir)
        for table in store.recorded_schemas():
            schema = store.schema(table)
            if schema is not None and schema.primary_key and store.mirror(table) is not None:
                self.mirror.evolve(schema)

    def apply(self, data: pa.Table, batch_id: int, stats: BatchStats) -> None:
        assert self._app_id is not None
        store = StateStore(self.state_dir)
        opts = capture_options(store)
        names = pc.binary_join_element_wise(data.column(DATABASE_COLUMN), data.column(TABLE_COLUMN), "\x00")
        for name in pc.unique(names).to_pylist():
            db, tb = name.split("\x00")
            table = TableId(db, tb)
            part = data.filter(pc.equal(names, name))
            if RESET_OP in part.column(OP_COLUMN).to_pylist():
                # the table left the capture (the batch is the statement that took it out, alone): its rows go
                if part.num_rows != 1:
                    raise StateError(f"a batch holds {part.num_rows - 1} rows of {str(table)!r} beside its reset")
                if self.mirror.reset(table, self._app_id, batch_id):
                    stats.applied[str(table)] = 1
                else:
                    stats.skipped.append(str(table))
                continue
            schema = store.schema(table)
            if schema is None:
                raise StateError(f"rows of {str(table)!r} came without a recorded schema under {self.state_dir!r}")
            if not schema.primary_key:
                # a table without a key that started to match while the job ran (at the start such a table is
                # an error): the stream captures it from then on, whatever the patterns say after a restart,
                # and a mirror cannot merge it. Said once per run, counted in every batch.
                if table not in self._ignored:
                    self._ignored.add(table)
                    _log.warning("table %s has no primary key: the sync leaves it out (a mirror merges by key); "
                                 "give it one and start this mirror again to mirror it", table)
                stats.ignored.append(str(table))
                continue
            t0 = time.monotonic()
            typed = decode_rows(part.column(VALUES_COLUMN).to_pylist(),
                                table_arrow_schema(schema.columns, opts.tinyint1_as_boolean))
            rows = pa.Table.from_batches([typed]).append_column(OP_COLUMN, part.column(OP_COLUMN)) \
                .append_column(SEQ_COLUMN, part.column(SEQ_COLUMN))
            t1 = time.monotonic()
            stats.decode_seconds += t1 - t0
            merged = self.mirror.apply(schema, rows, self._app_id, batch_id)
            stats.merge_seconds += time.monotonic() - t1
            if merged:
                stats.applied[str(table)] = part.num_rows
            else:
                stats.skipped.append(str(table))
            ts = pc.max(part.column(COMMIT_COLUMN)).as_py()
            if ts is not None:
                stats.last_commit = max(stats.last_commit or 0.0, ts.timestamp())


def start_sync(spark: Any, opts: CdcOptions, schemas: list[TableSchema], to: str, checkpoint: str,
               reader_options: Mapping[str, str], trigger: Mapping[str, Any],
               on_batch: Callable[[BatchStats], None] | None = None, remote: bool = False) -> Any:
    """Create or check the mirror tables of ``schemas``, then start the streaming query; returns it. From a Spark
    Connect client (``remote``) the batch function runs in the server, whose file system holds the target: the
    tables are created or checked there, before the first batch's rows are read (here, only their keys)."""
    if not opts.state_dir:
        raise ConfigError("the sync job needs a state_dir (the capture's chunk plan, watermarks and schemas)")
    mirror = DeltaMirror(to, opts, opts.state_dir)
    if remote:
        check_tables(schemas)
    else:
        mirror.prepare(schemas)
    reader = spark.readStream.format("mysql_cdc")
    for k, v in reader_options.items():
        reader = reader.option(k, v)
    handler = SyncBatches(mirror, opts.state_dir, checkpoint, on_batch, prepare=schemas if remote else None)
    return (reader.load().writeStream.foreachBatch(handler).option("checkpointLocation", checkpoint)
            .trigger(**trigger).start())
