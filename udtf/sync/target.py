"""Where a sync writes, checked before anything is created, and held by one sync at a time.

The three paths of a sync (the mirror's target, Spark's checkpoint, the capture's state dir) are local, not
empty, writable, and apart from each other's contents (:func:`check_sync_paths`); a lock on the state dir and
on the target (:class:`SyncLock`) keeps a second sync off them for the life of the first."""

from __future__ import annotations

import os
import re
import time
from typing import Any

from mysql_cdc.errors import ConfigError, StateError
from mysql_cdc.state.store import make_dirs

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
    ``.`` (no mirror table goes there, see :func:`.mirror.table_path`), and ``to`` not inside either. Returns them
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


TARGET_LOCK_NAME = "_mysql_cdc_sync.lock"  # in the target: a name no mirror table takes (see mirror.table_path)


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
