"""Where a sync writes, checked before anything is created, and held by one sync at a time.

The three paths of a sync (the mirror's target, Spark's checkpoint, the capture's state dir) are served (the
target local, the others local or on a cluster's store), not empty, writable, and apart from each other's
contents (:func:`check_sync_paths`); a lock on the target and on a local state dir (:class:`SyncLock`) keeps a
second sync off them for the life of the first (an object store takes no lock: one sync per state dir there is
the user's to keep)."""

from __future__ import annotations

import os
import time
from typing import Any

from mysql_cdc.errors import ConfigError, StateError
from mysql_cdc.state.storage import URI_SCHEME, Location, check_reachable, parse_location
from mysql_cdc.state.store import make_dirs


def local_path(what: str, path: str, here: bool = True) -> str:
    """The mirror's target: not empty, and a local path (a mounted volume, ``/Volumes/...`` or, on Databricks,
    ``dbfs:/``) that delta-rs writes path tables in; the path it names. Nothing is created here.

    >>> local_path("to", "/lake")
    '/lake'
    >>> local_path("to", "s3a://b/lake")
    Traceback (most recent call last):
    ...
    mysql_cdc.errors.ConfigError: to 's3a://b/lake' must be a local path: the sync writes its Delta tables with ...
    """
    if not path or not path.strip():
        raise ConfigError(f"{what} is empty: give a directory (an empty one would be the working directory)")
    loc = parse_location(path, what, here)
    if not loc.local:
        raise ConfigError(f"{what} {path!r} must be a local path: the sync writes its Delta tables with delta-rs in "
                          "the driver, on its disk or a mounted volume; keep the state_dir and checkpoint on the "
                          "object store and the target on a volume")
    return path if not URI_SCHEME.match(path) else loc.path


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


def _key(loc: Location) -> str:
    """Where a location is, comparable with another's: its store and path (``/`` separated)."""
    return f"{loc.kind}:{loc.path.rstrip('/') if loc.kind != 'local' else loc.path}"


def _inside(inner: Location, outer: Location) -> bool:
    a, b = _key(inner), _key(outer)
    return a == b or a.startswith(b.rstrip("/") + "/")


def check_sync_paths(to: str, checkpoint: str, state_dir: str, *, remote: bool = False) -> tuple[str, str, str]:
    """The sync's three paths, checked before anything is created: the target local (:func:`local_path`), the
    checkpoint and the state_dir local or on a store :mod:`state.storage` serves (whose bucket is looked at
    once), none empty, local ones writable where they run (absolute from a Spark Connect client, whose server
    resolves them), and apart from each other's contents: the checkpoint and the state_dir may be inside ``to``
    only under a folder whose name starts with ``_`` or ``.`` (no mirror table goes there, see
    :func:`.mirror.table_path`), and ``to`` not inside either; a ``to`` that is a catalog namespace
    (:func:`.sinks.parse_target`) is no folder: the other two only. Returns them absolute (from a client, a URI or
    a namespace: as given)."""
    from mysql_cdc.udtf.sync.sinks import parse_target

    given = {"to": to, "checkpoint": checkpoint, "state_dir": state_dir}
    if parse_target(to).kind == "catalog":  # a namespace: no folder of ours; the other two as before
        given.pop("to")
    else:
        local_path("to", to, here=not remote)
    locs = {what: parse_location(path, what, here=not remote) for what, path in given.items()}
    for what, path in given.items():
        if remote and locs[what].local and not os.path.isabs(path) and not URI_SCHEME.match(path):
            raise ConfigError(f"{what} {path!r} must be absolute: the Spark Connect server resolves it, in its own "
                              "working directory")
    if remote:
        return to, checkpoint, state_dir
    for what in ("checkpoint", "state_dir") if "to" in locs else ():
        root, p = locs["to"], locs[what]
        if _inside(root, p):
            raise ConfigError(f"to {root.path!r} is inside the {what} {p.path!r}: keep the mirror's tables apart from "
                              f"it (e.g. --to /lake and --{what.replace('_', '-')} /lake/_sync/{what})")
        if _inside(p, root):
            first = os.path.relpath(p.path, root.path).split(os.sep)[0]
            if not first.startswith(("_", ".")):
                raise ConfigError(f"the {what} {p.path!r} is inside to {root.path!r} under {first!r}, where the "
                                  f"mirror of a database named {first!r} would go: put it under a folder of to "
                                  f"whose name starts with '_' (e.g. {os.path.join(root.path, '_sync', what)!r}), "
                                  "or outside to")
    if _inside(locs["checkpoint"], locs["state_dir"]) or _inside(locs["state_dir"], locs["checkpoint"]):
        raise ConfigError(f"checkpoint {checkpoint!r} and state_dir {state_dir!r} overlap: give each a folder of its "
                          "own")
    for what, loc in locs.items():
        if loc.local:
            writable(what, loc.path)
        else:
            check_reachable(loc, what.replace("_", " "))
    out = [locs[w].path if locs[w].local else given[w] for w in ("checkpoint", "state_dir")]
    return (locs["to"].path if "to" in locs else to), out[0], out[1]


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
            for tries in range(3, 0, -1):  # sync_holds's look takes a shared lock for an instant
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except OSError:
                    if tries == 1:
                        raise
                    time.sleep(0.2)
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


TARGET_LOCK_NAME = "_mysql_cdc_sync.lock"  # in the target: a name no mirror table takes (see mirror.table_path)


# the locks this process holds for a classic session's syncs, by lock file, with the query that holds them
_HELD: dict[str, tuple[list[SyncLock], Any]] = {}


_LISTENING: set[int] = set()  # sessions whose ended queries give their locks up (see keep_sync_locks)


def hold_sync_locks(state_dir: str, to: str | None) -> list[SyncLock]:
    """Lock the target folder (``None`` or a catalog namespace: none) and a local state_dir for a sync
    (:class:`SyncLock`), or one clear error naming the holder. A lock this process holds for a query that has
    ended is taken over (its end may not have been heard yet)."""
    from mysql_cdc.udtf.sync.sinks import parse_target

    state = parse_location(state_dir)
    folders = [(state.path, LOCK_NAME)] if state.local else []
    if to is not None and parse_target(to).kind == "path":
        folders.append((local_path("to", to), TARGET_LOCK_NAME))
    paths = tuple(os.path.join(os.path.abspath(folder), name) for folder, name in folders)
    for path in paths:
        if path in _HELD:
            held, query = _HELD[path]
            if query is None and [lk.path for lk in held] == list(paths):
                return held  # taken for this sync before it started (the CLI, before Spark starts)
            if query is not None and query.isActive:
                raise StateError(f"this process runs a sync on {state_dir!r} or {to!r} already (query "
                                 f"{query.id}): stop it first")
            release_sync_locks(held)
    locks = [SyncLock(os.path.abspath(folder), name) for folder, name in folders]
    try:
        for lock in locks:
            lock.acquire(private=lock.path.endswith(os.sep + LOCK_NAME))
    except BaseException:
        release_sync_locks(locks)
        raise
    return locks


def sync_holds(state_dir: str) -> bool | None:
    """Whether a sync holds the state dir now (its :class:`SyncLock`, this process's too); ``None`` where it
    cannot be told (a state dir on a store: no lock is taken there)."""
    import fcntl

    state = parse_location(state_dir)
    if not state.local:
        return None
    path = os.path.join(os.path.abspath(state.path), LOCK_NAME)
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except FileNotFoundError:
        return False
    except OSError:  # not ours to read: cannot be told
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except OSError:
        return True
    finally:
        os.close(fd)  # closing releases a lock taken here
    return False


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
