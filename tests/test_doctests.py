"""The worked examples in docstrings (emit rule, correction, value conversion, offsets, chunk SQL) are run,
so an example that stops being true fails the build."""

from __future__ import annotations

import doctest
import importlib

import pytest

MODULES = ["planner.sql", "planner.chunks", "udtf.binlog_events", "udtf.correct", "udtf.convert", "udtf.emit",
           "udtf.snapshot", "state.offsets"]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples_hold(name: str) -> None:
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0, f"{name} has no examples: drop it from MODULES"
    assert result.failed == 0
