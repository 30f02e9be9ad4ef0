"""Every ``Examples`` section of the library and the command line runs and says what it shows.

Docstring examples are the first code a user copies; one that raises or prints something
else is a bug. Each module's examples run in a fresh namespace, as ``doctest`` does.
Only modules that hold examples are collected (a module without one is not a test that
passes), and each collected test asserts that its examples ran.
"""

from __future__ import annotations

import doctest
import importlib
import pkgutil

import pytest

import normstats
import normstats_cli

_FINDER = doctest.DocTestFinder(exclude_empty=True)


def _modules() -> list[str]:
    names = []
    for package in (normstats, normstats_cli):
        names.append(package.__name__)
        names += [m.name for m in pkgutil.walk_packages(package.__path__, package.__name__ + ".")]
    return sorted(names)


def _example_count(name: str) -> int:
    module = importlib.import_module(name)
    return sum(len(test.examples) for test in _FINDER.find(module, name))


_WITH_EXAMPLES = [name for name in _modules() if _example_count(name)]


def test_most_modules_hold_examples():
    """A guard on the collection above: it must not silently shrink to a few modules."""
    assert len(_WITH_EXAMPLES) >= 0.75 * len(_modules()), _WITH_EXAMPLES


@pytest.mark.parametrize("name", _WITH_EXAMPLES)
def test_docstring_examples_run_as_shown(name, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # examples that write files write them here
    module = importlib.import_module(name)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    for test in _FINDER.find(module, name):
        runner.run(test)
    result = runner.summarize(verbose=False)
    assert result.attempted >= 1, f"no example ran in {name}"
    assert result.failed == 0, f"{result.failed} of {result.attempted} examples failed in {name}"
