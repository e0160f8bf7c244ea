"""What ``mysql-cdc`` shows while a job runs: a block redrawn in place on a terminal, plain lines elsewhere."""

from __future__ import annotations

import sys
from typing import Any


class Progress:
    """Progress on a terminal (one line rewritten in place) or plain lines when not a terminal."""

    def __init__(self, stream: Any = None) -> None:
        self.stream = stream or sys.stdout
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self._last = ""

    def show_block(self, lines: list[str]) -> None:
        """Several lines: redrawn in place on a terminal (the previous block overwritten), else printed when
        they changed."""
        if self.tty:
            up = self._last.count("\n")
            self.stream.write(("\x1b[F" * up) + "".join("\x1b[2K" + line + "\n" for line in lines))
        else:
            for line in lines:
                if line not in self._last.split("\n"):
                    self.stream.write(line + "\n")
        self.stream.flush()
        self._last = "".join(line + "\n" for line in lines)

    def show(self, line: str, final: bool = False) -> None:
        if self.tty:
            self.stream.write("\r\x1b[2K" + line + ("\n" if final else ""))
        elif line != self._last or final:
            self.stream.write(line + "\n")
        self.stream.flush()
        self._last = line


def _bar(done: int, total: int, width: int = 20) -> str:
    filled = width * done // total if total else width
    return "[" + "#" * filled + "-" * (width - filled) + "]"


def sync_lines(stats: Any, state_dir: str, lag_bytes: str, now: float) -> list[str]:
    """The progress block of one sync batch: rows and rate, binlog lag (seconds since the newest change's commit,
    and bytes), then a bar of chunks done per table still in its snapshot, and how many tables are done."""
    rate = stats.rows / stats.seconds if stats.seconds > 0 else 0.0
    lag = f"{max(now - stats.last_commit, 0.0):.1f} s" if stats.last_commit is not None else "- s"
    head = (f"batch {stats.batch_id}: {stats.rows:,} rows ({rate:,.0f} rows/s) into {len(stats.applied)} tables"
            f"{f', {len(stats.skipped)} already applied' if stats.skipped else ''}"
            f"{f', {len(stats.ignored)} without a primary key left out' if stats.ignored else ''}"
            f"; binlog lag {lag}, {lag_bytes}")
    lines = [head]
    done_tables, planned_tables = 0, 0
    for table, done, total in snapshot_progress(state_dir):
        planned_tables += 1
        if done >= total:
            done_tables += 1
        else:
            lines.append(f"  {table} {_bar(done, total)} {done}/{total} chunks")
    lines.append(f"  snapshot: {done_tables} of {planned_tables} tables done" if done_tables < planned_tables
                 else f"  snapshot: done ({planned_tables} tables)")
    return lines


def snapshot_progress(state_dir: str) -> list[tuple[Any, int, int]]:
    """(table, chunks done, chunks planned) of every table of the capture with a chunk plan: a table counts as
    done when each chunk of its plan is recorded (chunk records of its plan only: a table planned again after a
    reset starts from none)."""
    from mysql_cdc.state.store import StateStore

    store = StateStore(state_dir)
    out = []
    for table in store.recorded_tables():
        planned = store.plan(table)
        if not planned:
            continue
        indexes = {c.index for c in planned}
        done = len({r.index for r in store.chunk_records(table)} & indexes)
        out.append((table, done, len(planned)))
    return out
