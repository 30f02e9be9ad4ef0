"""Image files named one by one: a single ``photo.jpg``, or files given as several PATHs.

They are decoded exactly as a folder's files are (`normstats.sources.folder.FolderTask`),
with keys relative to the folder they share, so reports name them as the user does.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Sequence

from normstats.errors import NormstatsError
from normstats.sources.base import Task
from normstats.sources.decoding.policy import IMAGE_EXTENSIONS, DecodePolicy
from normstats.sources.file_list import FileList
from normstats.sources.folder import FolderTask, ListedFiles
from normstats.sources.walk import list_named_files

__all__ = ["ImageFilesSource", "is_image_file"]


def is_image_file(path: str) -> bool:
    """True for an existing path with an image extension that is not a folder.

    A FIFO or a device named ``x.png`` is one too: the listing names it as skipped and
    never opens it (detecting its format would read it, and wait forever on a FIFO).

    Examples
    --------
    >>> is_image_file("no/such/photo.jpg"), is_image_file(__file__)
    (False, False)
    """
    if os.path.splitext(path)[1].lower() not in IMAGE_EXTENSIONS:
        return False
    try:
        return not stat.S_ISDIR(os.stat(path).st_mode)
    except (OSError, ValueError):  # missing, or a link loop: opened alone, and named
        return False


class ImageFilesSource(ListedFiles):
    """The image files ``paths``, listed as a folder's files are (sorted, regular files
    only, each physical file once).

    Examples
    --------
    >>> import tempfile, pathlib
    >>> from PIL import Image
    >>> d = pathlib.Path(tempfile.mkdtemp()); Image.new("RGB", (4, 4)).save(d / "a.png")
    >>> source = ImageFilesSource([str(d / "a.png")])
    >>> len(source), source.description == str(d / "a.png")
    (1, True)
    """

    def __init__(self, paths: Sequence[str], policy: DecodePolicy | None = None,
                 fail_fast: bool = False) -> None:
        if not paths:
            raise NormstatsError("no image files given")
        absolute = [os.path.abspath(p) for p in paths]
        root = os.path.commonpath([os.path.dirname(p) for p in absolute])
        prefix = len(os.path.join(root, ""))  # p[prefix:]: os.path.relpath costs ~30 µs
        self.adopt(root, policy or DecodePolicy(), fail_fast,
                   list_named_files(root, [p[prefix:] for p in absolute]))
        self.description = paths[0] if len(paths) == 1 else f"{len(paths)} image files in {root}"

    def task(self, files: FileList) -> Task:
        return FolderTask(self.root, files, self.policy, self.fail_fast,
                          sidecars=self.walk.sidecars > 0)
