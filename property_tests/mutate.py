"""Run the server-backed property tests against a deliberately broken rule; they must fail.

    PYTHONPATH=. .venv/bin/python -m property_tests.mutate MUTANT [pytest args, e.g. -k mariadb]

MUTANT: owner-off-by-one, emit-ignores-key, correction-no-delete or chunk-gap.

Each mutant is patched into the code the tests import, then pytest runs the stateful test and the chunk
coverage test. The exit status is 0 when the tests caught the mutant (they failed) and 1 when they passed
(a property too weak for that bug). The pure properties have the same checks in ``test_mutants.py``, which run
with every test run; these take a few minutes each, so they are run by hand.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Hashable, Iterable
from typing import Any

import pytest


def _owner_off_by_one() -> None:
    import bisect

    from mysql_cdc.udtf.binlog.emit import EmitRule

    # a key equal to a chunk's first key is judged by the previous chunk's high watermark
    EmitRule.owner = lambda self, key: bisect.bisect_left(self._starts, key)  # type: ignore[method-assign]
    EmitRule.decided = lambda self, event, gtid=None: None  # type: ignore[method-assign]


def _emit_ignores_key() -> None:
    from mysql_cdc.udtf.binlog.emit import EmitRule

    EmitRule.decided = lambda self, event, gtid=None: True  # type: ignore[method-assign]


def _correction_no_delete() -> None:
    import mysql_cdc.udtf.snapshot.correct
    import mysql_cdc.udtf.snapshot.reader

    real = mysql_cdc.udtf.snapshot.correct.correct_chunk

    def correct_chunk(rows: Iterable[Any], changes: Iterable[Any], identity: Callable[[Any], Hashable],
                      in_chunk: Callable[[Any], bool]) -> list[Any]:
        return real(rows, [c for c in changes if c.op != "delete"], identity, in_chunk)

    # the rule's module, and the reader that imported it by name: both, or the mutant would not reach the reader
    mysql_cdc.udtf.snapshot.correct.correct_chunk = correct_chunk
    assert mysql_cdc.udtf.snapshot.reader.correct_chunk is real
    mysql_cdc.udtf.snapshot.reader.correct_chunk = correct_chunk


def _chunk_gap() -> None:
    import mysql_cdc.chunks
    import mysql_cdc.planner.splitter

    real = mysql_cdc.chunks.chunks_from_bounds

    def chunks_from_bounds(table: Any, key_columns: Any, bounds: list[Any]) -> list[Any]:
        chunks = real(table, key_columns, bounds)
        if len(chunks) > 2 and isinstance(chunks[1].start[0], int):
            c = chunks[1]
            chunks[1] = mysql_cdc.chunks.Chunk(c.table, c.index, c.key_columns, (c.start[0] + 1,), c.end)
        return chunks

    mysql_cdc.chunks.chunks_from_bounds = chunks_from_bounds
    # the splitter imported it by name: patched there too, or the mutant would not reach the planner
    assert mysql_cdc.planner.splitter.chunks_from_bounds is real
    mysql_cdc.planner.splitter.chunks_from_bounds = chunks_from_bounds


MUTANTS: dict[str, Callable[[], None]] = {
    "owner-off-by-one": _owner_off_by_one,
    "emit-ignores-key": _emit_ignores_key,
    "correction-no-delete": _correction_no_delete,
    "chunk-gap": _chunk_gap,
}


def main(argv: list[str]) -> int:
    if not argv or argv[0] not in MUTANTS:
        print(f"usage: python -m property_tests.mutate {'|'.join(MUTANTS)} [pytest args]", file=sys.stderr)
        return 2
    MUTANTS[argv[0]]()
    os.environ["MYSQL_CDC_HYPOTHESIS_PROFILE"] = "mutate"  # no shrinking: whether it fails is the question
    rc = pytest.main(["-p", "no:cacheprovider", "-q", "-x", "property_tests/test_stateful_server.py",
                      "property_tests/test_chunk_coverage_server.py", *argv[1:]])
    caught = rc == pytest.ExitCode.TESTS_FAILED
    print(f"mutant {argv[0]}: {'caught' if caught else 'NOT caught'}")
    return 0 if caught else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
