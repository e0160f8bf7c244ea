"""The worked examples in docstrings (emit rule, correction, value conversion, offsets, chunk SQL) are run,
so an example that stops being true fails the build."""

from __future__ import annotations

import doctest
import importlib

import pytest

MODULES = ["mysql_cdc.sql", "mysql_cdc.chunks", "mysql_cdc.types", "mysql_cdc.offsets", "mysql_cdc.state.store",
           "mysql_cdc.udtf.binlog", "mysql_cdc.planner.validate", "mysql_cdc.options",
           "mysql_cdc.udtf.binlog_events", "mysql_cdc.registration",
           "mysql_cdc.udtf.correct", "mysql_cdc.udtf.convert", "mysql_cdc.udtf.emit", "mysql_cdc.udtf.snapshot",
           "mysql_cdc.planner.splitter", "mysql_cdc.udtf.adapter", "mysql_cdc.udtf.merge",
           "mysql_cdc.udtf.sync_job", "mysql_cdc.udtf.evolve", "mysql_cdc.udtf.rowimage"]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples_hold(name: str) -> None:
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0, f"{name} has no examples: drop it from MODULES"
    assert result.failed == 0
