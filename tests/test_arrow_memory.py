"""mysql_cdc.memory: the processes that move rows give freed Arrow memory back (a pool that returns it)."""

from __future__ import annotations

import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

_CHILD = """
import gc, os, sys, time, pyarrow as pa
from mysql_cdc.memory import return_freed_memory
from mysql_cdc.rowjson import decode_rows, encode_column
return_freed_memory()


def rss():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")



schema = pa.schema([pa.field("id", pa.int32(), False), ("payload", pa.binary())])
b = pa.record_batch([pa.array([1], pa.int32()), pa.array([b"x" * (128 << 20)])], schema=schema)
start = rss()
out = decode_rows(encode_column(b), schema)
assert out.column("payload")[0].as_py() == b"x" * (128 << 20)
del out, b
gc.collect()
deadline = time.monotonic() + 10
while rss() - start > -(64 << 20) and time.monotonic() < deadline:
    time.sleep(0.05)
print(pa.default_memory_pool().backend_name, (rss() - start) >> 20)
"""


def _child(**env: str) -> tuple[str, int]:
    e = {k: v for k, v in os.environ.items() if k != "ARROW_DEFAULT_MEMORY_POOL"}
    out = subprocess.run([sys.executable, "-c", _CHILD], cwd=ROOT, env={**e, "PYTHONPATH": ROOT, **env},
                         capture_output=True, text=True, timeout=120, check=True).stdout.split()
    return out[0], int(out[1])


def test_a_large_value_decoded_and_freed_leaves_the_process() -> None:
    # the 128 MB value, its JSON text and its bytes again were allocated and freed: the process is below where
    # it started (the value itself was part of it) once they are given back
    backend, grown_mb = _child()
    assert backend in ("jemalloc", "system") and grown_mb <= -64, (backend, grown_mb)


def test_a_pool_the_user_chose_is_kept() -> None:
    backend, _ = _child(ARROW_DEFAULT_MEMORY_POOL="mimalloc")
    assert backend == "mimalloc"
