"""A failure of a ``mysql-cdc`` command in one line: its cause and the fix, whatever carried it (our error, a
Spark error wrapping a Python worker's traceback, a Py4J proxy's, the JVM out of memory).

>>> spark_text = ("StreamingQueryException: [STREAM_FAILED] Query [id = 1] terminated with exception: "
...               "Traceback (most recent call last):\\n  File \\"x.py\\", line 3, in read\\n"
...               "mysql_cdc.errors.ConnectError: login refused for 'cdc'@db:3306: wrong user or password\\n"
...               "\\tat org.apache.spark...")
>>> one_line(spark_text)
("ConnectError: login refused for 'cdc'@db:3306: wrong user or password", True)
>>> one_line("py4j.protocol.Py4JJavaError: An error occurred while calling o52.start.\\n"
...          ": java.lang.OutOfMemoryError: Java heap space\\n\\tat java.base/...")[0][:62]
'the Spark driver ran out of memory (java.lang.OutOfMemoryError'
>>> one_line("py4j.protocol.Py4JJavaError: An error occurred while calling None.JavaSparkContext.\\n"
...          ": java.lang.IllegalArgumentException: System memory 314572800 must be at least 471859200.\\n\\tat x")
('the Spark driver has too little memory (300 MiB, Spark needs 450 MiB at least): give it more with ...', False)
>>> one_line("An exception was raised by the Python Proxy. Return Message: Traceback (most recent call last):\\n"
...          "  File \\"m.py\\", line 9, in apply\\nOSError: Generic LocalFileSystem error: No space left on device")
('OSError: Generic LocalFileSystem error: No space left on device', False)

When the JVM itself died (its heap exhausted in a task, in local mode the driver's), the error the CLI holds
is only the lost gateway; the cause is in Spark's log, which :func:`log_cause` reads:

>>> log_cause("26/11/26 ERROR Executor: Exception in task 0.0\\njava.lang.OutOfMemoryError: Java heap space\\n")[:58]
'the Spark driver ran out of memory (java.lang.OutOfMemoryE'
>>> log_cause("26/11/26 WARN Utils: Your hostname resolves to a loopback address") is None
True
"""

from __future__ import annotations

import re

_OURS = re.compile(r"mysql_cdc\.errors\.(\w+): ([^\n]*)")
_OOM = re.compile(r"(java\.lang\.OutOfMemoryError[^\n]*|\bMemoryError\b[^\n]*|Cannot allocate memory[^\n]*)")
# the last "Name: message" line of a Python traceback inside a text (an exception's own line)
_PY_LAST = re.compile(r"^(?:[A-Za-z_][\w.]*\.)?([A-Z]\w*(?:Error|Exception|Exit|Interrupt)): ([^\n]+)$", re.M)
_JAVA_CAUSE = re.compile(r"^: ((?:java|javax|scala|org)\.[\w.$]+(?:Exception|Error)): ([^\n]+)$", re.M)
_WORKER_DIED = re.compile(r"Python worker exited unexpectedly \(crashed\)[^\n]*|PYTHON_WORKER_CRASHED[^\n]*"
                          r"|worker exited unexpectedly[^\n]*")
_TOO_LITTLE = re.compile(r"System memory (\d+) must be at least (\d+)")
MEMORY_FIX = ("give it more with --driver-memory (e.g. 4g; a table with a 256 MB value ran in the default 1g with "
              "delta-rs and in 4g with Spark's Delta, its values travelling as files, on a machine with about 12-36 "
              "times the value free; on a cluster give --large-value-dir a folder every node mounts), or make "
              "batches smaller (--max-rows-per-batch, --max-chunks-per-batch, --chunk-size)")


def one_line(text: str) -> tuple[str, bool]:
    """The failure in ``text`` as one line, and whether it is ours (an error of :mod:`mysql_cdc.errors`, which
    names its own fix)."""
    ours = _OURS.findall(text)
    if ours:
        name, message = ours[-1]
        return f"{name}: {message.strip()}", True
    low = _TOO_LITTLE.search(text)
    if low is not None:  # Spark refuses to start a driver below its reserved memory
        has, needs = (int(x) // 2**20 for x in low.groups())
        return (f"the Spark driver has too little memory ({has} MiB, Spark needs {needs} MiB at least): give it "
                f"more with --driver-memory (e.g. 4g)"), False
    oom = _OOM.search(text)
    if oom is not None:
        return f"the Spark driver ran out of memory ({oom.group(1).strip()[:120]}): {MEMORY_FIX}", False
    java = _JAVA_CAUSE.findall(text)
    if java:  # a Py4J error: the Java exception under "An error occurred while calling ..."
        name, message = java[0]
        return f"{name.rsplit('.', 1)[-1]}: {message.strip()[:400]}", False
    died = _WORKER_DIED.search(text)
    if died is not None:
        return (f"a Spark Python worker died ({died.group(0).strip()[:160]}), often for lack of memory: "
                f"{MEMORY_FIX}"), False
    last = _PY_LAST.findall(text)
    if last:
        name, message = last[-1]
        return f"{name}: {message.strip()[:400]}", False
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return (lines[0][:400] if lines else "failed"), False


def log_cause(log_text: str) -> str | None:
    """The cause of a failure that Spark's log holds and its error does not (the JVM out of memory, a Python
    worker killed), as one line; ``None`` when the log names none."""
    oom = _OOM.search(log_text)
    if oom is not None:
        return f"the Spark driver ran out of memory ({oom.group(1).strip()[:120]}): {MEMORY_FIX}"
    died = _WORKER_DIED.search(log_text)
    if died is not None:
        return (f"a Spark Python worker died ({died.group(0).strip()[:160]}), often for lack of memory: "
                f"{MEMORY_FIX}")
    return None
