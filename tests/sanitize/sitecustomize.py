"""Imports normstats' compiled extensions from another build than the checkout's.

Python imports ``sitecustomize`` at start-up from its path. tests/sanitize/build_and_run.py
puts this folder on ``PYTHONPATH`` and names its build folder in ``$NORMSTATS_SANITIZED``:
every Python process of the run (pytest, and the subprocesses and pool workers of its
tests) then loads ``normstats.maths._moments``, ``normstats.maths._cross``,
``normstats.maths._masked``, ``normstats.sources.decoding._png_chunks`` (every extension) from
``<folder>/<full name><suffix>``, the
sanitized builds, while the ``.so`` files in the checkout stay untouched. Without
``$NORMSTATS_SANITIZED`` this module does nothing.

gcc's UBSan runtime, loaded beside ASan's, ignores ``log_path`` in ``$UBSAN_OPTIONS`` and
prints to stderr, which a test that captures a child's output would hide (and a pool
worker that died is run again): with ``$NORMSTATS_UBSAN_RUNTIME`` and
``$NORMSTATS_UBSAN_REPORTS`` its reports go to files, as ASan's do.
"""

from __future__ import annotations

import ctypes
import importlib.abc
import importlib.machinery
import importlib.util
import os
import sys
from collections.abc import Sequence
from importlib.machinery import ModuleSpec
from types import ModuleType


class BuildFolderExtensions(importlib.abc.MetaPathFinder):
    """Finds an extension module ``a.b._c`` as ``a.b._c<EXT_SUFFIX>`` in one folder."""

    def __init__(self, folder: str) -> None:
        self.folder = folder

    def find_spec(self, name: str, path: Sequence[str] | None = None,
                  target: ModuleType | None = None) -> ModuleSpec | None:
        suffix = importlib.machinery.EXTENSION_SUFFIXES[0]
        file = os.path.join(self.folder, name + suffix)
        if not os.path.isfile(file):
            return None  # any other module: the usual finders
        loader = importlib.machinery.ExtensionFileLoader(name, file)
        return importlib.util.spec_from_file_location(name, file, loader=loader)


def install(folder: str) -> None:
    """Put the build folder's finder first, before the one that reads the checkout."""
    sys.meta_path.insert(0, BuildFolderExtensions(folder))


def report_undefined_behaviour_to(runtime: str, prefix: str) -> None:
    """UBSan's reports into files ``<prefix>.<pid>`` (each process, forked ones too)."""
    ctypes.CDLL(runtime).__sanitizer_set_report_path(prefix.encode())


if os.environ.get("NORMSTATS_SANITIZED"):
    install(os.environ["NORMSTATS_SANITIZED"])
    if os.environ.get("NORMSTATS_UBSAN_RUNTIME"):
        report_undefined_behaviour_to(os.environ["NORMSTATS_UBSAN_RUNTIME"],
                                      os.environ["NORMSTATS_UBSAN_REPORTS"])
