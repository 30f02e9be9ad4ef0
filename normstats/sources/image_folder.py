"""torchvision's ``ImageFolder`` without transforms, read as the files it lists.

An ``ImageFolder`` (or ``DatasetFolder``) whose loader is torchvision's PIL loader and which
has no ``transform`` returns ``Image.open(path).convert("RGB")`` for each sample: exactly
what normstats' ``RGB`` decode policy gives for the same file (its fast JPEG and PNG paths
are taken only where their pixels are Pillow's). Reading the listed files directly lets
such a dataset run at the folder's speed instead of through one PIL image per item.
Anything else (a transform, another loader, a subclass that overrides ``__getitem__``, a
mode other than RGB) is read item by item (`normstats.sources.mapped`).
"""

from __future__ import annotations

import os
import sys
from typing import Any

from normstats.errors import SkipKind, numbered
from normstats.maths.records import Skipped
from normstats.sources.decoding.file_read import not_regular_reason
from normstats.sources.decoding.policy import policy_of
from normstats.sources.file_list import FileList, stamp_of
from normstats.sources.folder import FolderTask, ListedFiles
from normstats.sources.walk import WalkResult

__all__ = ["ImageFolderFiles", "plain_image_folder"]

_TORCHVISION_FOLDER = "torchvision.datasets.folder"
_PIL_LOADERS = ("default_loader", "pil_loader")


def plain_image_folder(dataset: Any, mode: str) -> bool:
    """True when ``dataset`` is torchvision's ``DatasetFolder`` family with its PIL loader,
    no transforms, its own ``__getitem__``, and ``mode`` is RGB.

    Examples
    --------
    >>> plain_image_folder([1, 2, 3], "RGB")
    False
    """
    base = next((c for c in type(dataset).__mro__ if c.__name__ == "DatasetFolder"
                 and c.__module__ == _TORCHVISION_FOLDER), None)
    if base is None or mode != "RGB" or type(dataset).__getitem__ is not base.__getitem__:
        return False
    loader = getattr(dataset, "loader", None)
    if (getattr(loader, "__module__", None), getattr(loader, "__name__", None)) not in \
            ((_TORCHVISION_FOLDER, name) for name in _PIL_LOADERS):
        return False
    torchvision = sys.modules.get("torchvision")
    if torchvision is not None and getattr(torchvision, "get_image_backend", lambda: "PIL")() \
            != "PIL":
        return False  # accimage decodes differently
    return getattr(dataset, "transform", None) is None and \
        getattr(dataset, "transforms", None) is None


class ImageFolderFiles(ListedFiles):
    """The files of a plain ``ImageFolder``, in its order, decoded under RGB."""

    def __init__(self, dataset: Any, fail_fast: bool = False,
                 max_pixels: int | None = None, max_file_bytes: int | None = None) -> None:
        paths = [os.path.abspath(path) for path, _ in dataset.samples]
        root = os.path.commonpath([os.path.dirname(p) for p in paths]) if paths else "."
        prefix = len(root.rstrip(os.sep)) + 1  # os.path.relpath costs ~15 µs a file
        kept, sizes, mtimes, stamps, skipped = [], [], [], [], []
        for path in paths:
            relative = path[prefix:]
            try:
                info = os.stat(path)
            except OSError as error:
                skipped.append(Skipped(relative, f"cannot stat file: {error.strerror}",
                                       SkipKind.TRANSIENT))
                continue
            if (reason := not_regular_reason(info.st_mode)) is not None:
                skipped.append(Skipped(relative, reason, SkipKind.REFUSED))
                continue
            kept.append(relative)
            sizes.append(info.st_size)
            mtimes.append(info.st_mtime_ns)
            stamps.append(stamp_of(info))
        policy = policy_of("RGB", max_pixels, max_file_bytes)
        walk = WalkResult(FileList.from_columns(kept, sizes, mtimes, stamps), tuple(skipped), 0)
        self.adopt(root, policy, fail_fast, walk)
        self.description = (f"map-style dataset {type(dataset).__name__} "
                            f"({numbered(len(paths), 'item')}, read in worker processes: an "
                            f"ImageFolder without transforms, its files decoded directly under "
                            f"{root})")

    def task(self, files: FileList) -> FolderTask:
        return FolderTask(self.root, files, self.policy, self.fail_fast)
