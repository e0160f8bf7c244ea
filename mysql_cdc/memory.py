"""Arrow's memory in our processes: a pool that gives freed memory back to the system.

pyarrow's wheels allocate from mimalloc by default, which keeps the pages of a freed buffer for itself. Where a
buffer is large and lives briefly (a row of 256 MB values: its JSON text, then its bytes, then the Parquet
writer's copy), the process then holds every such buffer it ever had, and a writer that does not allocate from
Arrow's pool (delta-rs, in Rust) cannot reuse them. Measured on pyarrow 26 (one 256 MB value encoded into its
JSON text and decoded again): with mimalloc the process held 1,433 MB after the decode and still 1,177 MB once
everything was freed; with jemalloc or the system's allocator 743 MB and then 145 MB.

So each of our processes that moves rows (the sync's driver and the Spark Python workers that read) switches
Arrow's default pool to jemalloc where pyarrow has it (Linux), else to the system's allocator, once
(:func:`return_freed_memory`). Buffers allocated before the switch are freed to their own pool. The pool is
the process's: Spark reuses its Python workers, so a later task of the same worker (a pandas or Arrow UDF of
the user's) allocates from it too (jemalloc was pyarrow's own default on Linux before mimalloc).
``ARROW_DEFAULT_MEMORY_POOL``, when set, is the user's choice and is left as it is.
"""

from __future__ import annotations

import os

_done = [False]


def returning_backend(supported: list[str]) -> str:
    """The pool to use, of those pyarrow ``supported``: jemalloc, else the system's.

    >>> returning_backend(["mimalloc", "jemalloc", "system"]), returning_backend(["mimalloc", "system"])
    ('jemalloc', 'system')
    """
    return "jemalloc" if "jemalloc" in supported else "system"


def return_freed_memory() -> None:
    """Make Arrow's default memory pool one that returns freed memory (see the module); once per process, and
    never where ``ARROW_DEFAULT_MEMORY_POOL`` chose one."""
    if _done[0]:
        return
    _done[0] = True
    if os.environ.get("ARROW_DEFAULT_MEMORY_POOL"):
        return
    import pyarrow as pa

    backend = returning_backend(pa.supported_memory_backends())
    pa.set_memory_pool(pa.jemalloc_memory_pool() if backend == "jemalloc" else pa.system_memory_pool())
