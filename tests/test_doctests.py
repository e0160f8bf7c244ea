"""The worked examples in docstrings (emit rule, correction, value conversion, offsets, chunk SQL) are run,
so an example that stops being true fails the build."""

from __future__ import annotations

import doctest
import importlib

import pytest

from tests.test_packaging import package_modules

# every module of the package whose docstrings hold an example (found, not listed: a new one is run too)
MODULES = sorted(m for m, path, _ in package_modules() if ">>> " in path.read_text(encoding="utf-8"))


def test_the_rules_worked_examples_are_among_them() -> None:
    assert {"mysql_cdc.udtf.binlog.emit", "mysql_cdc.udtf.snapshot.correct", "mysql_cdc.udtf.sync.last_image",
            "mysql_cdc.offsets", "mysql_cdc.chunks", "mysql_cdc.udtf.convert"} <= set(MODULES)


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples_hold(name: str) -> None:
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0, f"{name} has no examples: drop it from MODULES"
    assert result.failed == 0
