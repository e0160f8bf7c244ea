"""Large values beside the rows: a value too large to travel well through Spark goes into a file of its own.

A read of many tables carries each row's values as JSON text (:mod:`mysql_cdc.rowjson`), which Spark moves from
the reading executor's Python worker through its JVM (an Arrow batch, then rows, then Arrow again) to whoever
applies it; every hop holds another copy of each value, so a row of one 256 MB value took gigabytes of JVM heap
(README, Benchmark (memory)). With option ``large_value_dir`` set, a BLOB or TEXT value of ``large_value_bytes``
or more is written by the reader into that folder, and the row's JSON holds where it is instead of the value:

    {"id": 7, "photo": {"file": "<SHA-256 of the value, hex>", "bytes": 268435456}}

No JSON value of a row is an object otherwise, so the reference is never taken for a value. Whoever decodes the
row (the sync's batch function) reads the file into the column's buffer and checks its length and SHA-256: a file
is named by its content and trusted for nothing else. The folder must be one every executor and the process that
decodes the rows reach (a local folder in local mode, a shared mount on a cluster); the sync empties it once a
batch's rows are in the mirror.

>>> import tempfile
>>> folder = LargeValues(tempfile.mkdtemp(), 4)
>>> ref = folder.put(memoryview(b"abcdef"))
>>> ref["bytes"], ref["file"][:12]
(6, 'bef57ec7f53a')
>>> out = bytearray(6)
>>> folder.read_into(ref, memoryview(out))
>>> bytes(out)
b'abcdef'
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import stat
import uuid
from dataclasses import dataclass
from typing import Any

from mysql_cdc.errors import StateError

_NAME = re.compile(r"[0-9a-f]{64}")
_STEP = 8 << 20  # bytes written or read at a time
_TEMP = re.compile(r"\.[0-9a-f]{64}\.[0-9a-f]{32}\.tmp")


class LargeValueError(StateError):
    """A large value's file is missing, or not the value its row names."""


@dataclass(frozen=True)
class LargeValues:
    """The folder large values travel through (``folder``) and the size from which a value goes there
    (``min_bytes``)."""

    folder: str
    min_bytes: int

    def put(self, value: memoryview) -> dict[str, Any]:
        """Write ``value`` into the folder (created, private, where missing) under its SHA-256 and return its
        reference. The file appears whole or not at all: written under a temporary name, then linked to its
        own; one there already (the same value in another row, or another attempt of the task) is kept, and
        not written again (its bytes are checked where it is read)."""
        digest = hashlib.sha256(value).hexdigest()
        os.makedirs(self.folder, mode=0o700, exist_ok=True)
        final = os.path.join(self.folder, digest)
        with contextlib.suppress(OSError):
            there = os.lstat(final)
            if stat.S_ISREG(there.st_mode) and there.st_size == len(value):
                return {"file": digest, "bytes": len(value)}
        temp = os.path.join(self.folder, f".{digest}.{uuid.uuid4().hex}.tmp")
        try:
            fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600)
        except PermissionError as e:
            raise LargeValueError(f"cannot write a large value into {self.folder!r} ({e.strerror}): the folder of "
                                  "option large_value_dir is written by the executors and read and emptied by the "
                                  "driver, which must run as one user") from e
        try:
            with os.fdopen(fd, "wb", buffering=0) as f:
                for at in range(0, len(value), _STEP):
                    f.write(value[at:at + _STEP])
            try:
                os.link(temp, final)
            except FileExistsError:  # a file of another size (cut short): the value written over it
                with contextlib.suppress(OSError):
                    if stat.S_ISREG(os.lstat(final).st_mode):
                        os.replace(temp, final)
            except OSError:  # a file system without hard links: renamed over it (the same bytes)
                os.replace(temp, final)
        finally:
            with contextlib.suppress(OSError):
                os.unlink(temp)
        return {"file": digest, "bytes": len(value)}

    def read_into(self, ref: Any, out: memoryview) -> None:
        """Read the value ``ref`` names into ``out`` (exactly its size), checking its length and SHA-256."""
        size = reference_size(ref)
        name = ref["file"]
        if size != len(out):
            raise LargeValueError(f"a large value of {size} bytes read into {len(out)}")
        path = os.path.join(self.folder, name)
        try:  # not blocking on a FIFO planted under the name (checked below: a regular file only)
            fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
        except FileNotFoundError:
            raise LargeValueError(
                f"a row's large value ({size} bytes) is not in {path!r}: option large_value_dir must be a folder "
                "every executor and the process that applies the rows reach (a shared mount on a cluster), and "
                "only the sync that wrote it may empty it; run the batch again (restart the sync)") from None
        except PermissionError as e:
            raise LargeValueError(f"cannot read the large value {path!r} ({e.strerror}): the folder of option "
                                  "large_value_dir is written by the executors and read by the process that "
                                  "applies the rows, which must run as one user") from e
        except OSError as e:  # a link (O_NOFOLLOW), a folder: not a file of ours
            raise LargeValueError(f"cannot read the large value {path!r} ({e.strerror}): the folder of option "
                                  "large_value_dir holds something not ours under its name") from e
        with os.fdopen(fd, "rb", buffering=0) as f:
            st = os.fstat(f.fileno())
            if not stat.S_ISREG(st.st_mode) or st.st_size != size:
                raise LargeValueError(f"{path!r} is not a large value of {size} bytes (a file of "
                                      f"{st.st_size}): the folder of option large_value_dir holds a file not ours")
            at = 0
            while at < size:
                n = f.readinto(out[at:at + _STEP])
                if not n:
                    raise LargeValueError(f"{path!r} ended after {at} of {size} bytes while it was read")
                at += n
        if hashlib.sha256(out).hexdigest() != name:
            raise LargeValueError(f"{path!r} does not hold the value named by its SHA-256: the folder of option "
                                  "large_value_dir holds a file not ours, or one changed since it was written")

    def clear(self) -> int:
        """Remove the folder's values and the temporary files of writes that did not end (nothing else): once a
        batch is in the mirror none of them is needed. How many files went. What cannot be removed stays (the
        next batch tries again): it is garbage, and the batch is applied."""
        try:
            names = os.listdir(self.folder)
        except FileNotFoundError:
            return 0
        gone = 0
        for name in names:
            if _NAME.fullmatch(name) or _TEMP.fullmatch(name):
                try:
                    os.unlink(os.path.join(self.folder, name))
                    gone += 1
                except OSError:
                    pass
        return gone


def reference_size(ref: Any) -> int:
    """The length of the value a row's reference names, once the reference is seen to be one this library
    writes (``{"file": <SHA-256, hex>, "bytes": <length>}``); else one :class:`LargeValueError`.

    >>> reference_size({"file": "0" * 64, "bytes": 3})
    3
    """
    name, size = (ref.get("file"), ref.get("bytes")) if isinstance(ref, dict) else (None, None)
    if not isinstance(name, str) or not _NAME.fullmatch(name) or type(size) is not int or size < 0 \
            or set(ref) != {"file", "bytes"}:
        raise LargeValueError(f"a row names a large value as {ref!r}, not as {{'file': <SHA-256, hex>, "
                              "'bytes': <length>}: it was not written by this library")
    return size


def sync_folder(given: str, state_dir: str) -> str:
    """The folder of one sync's large values under the folder the user named: one per capture (its state dir),
    so that a sync empties only its own (two syncs given one folder would remove each other's files).

    >>> sync_folder("/mnt/large", "/lake/_sync/state")
    '/mnt/large/sync-cab04a90086b132e'
    """
    return os.path.join(given, "sync-" + hashlib.sha256(state_dir.encode()).hexdigest()[:16])


def large_values(folder: str | None, min_bytes: int) -> LargeValues | None:
    """The :class:`LargeValues` of a read's options (``None``: values stay in their rows).

    >>> large_values(None, 1 << 23) is None, large_values("/tmp/x", 1 << 23).min_bytes
    (True, 8388608)
    """
    return None if not folder else LargeValues(folder, min_bytes)
