"""Dataset sources: one module per format behind the protocol of `normstats.sources.base`.

`open_source` picks the source for what the user passed: a folder of images, a
``.npy`` file or zarr array, an in-memory array, or any iterable of images.

The names below load on first use: a command that needs one source module (or only
`normstats.sources.file_list`, as the cache commands do) does not import every reader.
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = ["open_source", "Source", "Task", "TaskResult", "FolderSource", "ArraySource",
           "IterableSource", "MappedSource", "RemoteFolderSource"]

_HOMES = {"open_source": "opening", "Source": "base", "Task": "base", "TaskResult": "base",
          "FolderSource": "folder", "ArraySource": "arrays", "IterableSource": "iterable",
          "MappedSource": "mapped", "RemoteFolderSource": "remote"}


def __getattr__(name: str) -> Any:
    if name not in _HOMES:
        raise AttributeError(f"module 'normstats.sources' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"normstats.sources.{_HOMES[name]}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
