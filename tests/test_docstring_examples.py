"""Every ``Examples`` section of the library and the command line runs and says what it shows.

Docstring examples are the first code a user copies; one that raises or prints something
else is a bug. Each module's examples run in a fresh namespace, as ``doctest`` does.
"""

from __future__ import annotations

import doctest
import importlib
import pkgutil

import pytest

import normstats
import normstats_cli


def _modules() -> list[str]:
    names = []
    for package in (normstats, normstats_cli):
        names.append(package.__name__)
        names += [m.name for m in pkgutil.walk_packages(package.__path__, package.__name__ + ".")]
    return sorted(names)


@pytest.mark.parametrize("name", _modules())
def test_docstring_examples_run_as_shown(name, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # examples that write files write them here
    module = importlib.import_module(name)
    finder = doctest.DocTestFinder(exclude_empty=True)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    for test in finder.find(module, name):
        runner.run(test)
    result = runner.summarize(verbose=False)
    assert result.failed == 0, f"{result.failed} of {result.attempted} examples failed in {name}"
