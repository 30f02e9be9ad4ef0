"""Paths a dataset names for itself stay inside the dataset's folder.

A Parquet path column, a shard index or a manifest names files relative to where it
lies. A hostile or careless one can name ``../../home/user/.ssh/id_rsa.png``, ``/etc/x``
or a link inside the folder that leads elsewhere; reading it would mix a file from
outside the dataset into its statistics (and tell its size and pixels to whoever reads
the report). Such a path is refused by its resolved location (symbolic links followed,
``..`` applied), compared as whole path components against the resolved folder.
"""

from __future__ import annotations

import os

__all__ = ["outside_reason"]


def outside_reason(root: str, name: str) -> str | None:
    """Why ``name``, a path a dataset file gives relative to the folder ``root``, leaves
    that folder; None when it (and every symbolic link on its way) stays inside.

    Examples
    --------
    >>> import tempfile, os
    >>> root = tempfile.mkdtemp()
    >>> outside_reason(root, "images/a.png") is None
    True
    >>> outside_reason(root, "/etc/passwd")
    "'/etc/passwd' is an absolute path"
    >>> outside_reason(root, "../x.png").startswith("'../x.png' resolves to ")
    True
    """
    if "\0" in name:
        return f"{name!r} holds a NUL character"
    if os.path.isabs(name):
        return f"{name!r} is an absolute path"
    real_root = os.path.realpath(root)
    real = os.path.realpath(os.path.join(root, name))
    if os.path.commonpath([real_root, real]) != real_root:
        return f"{name!r} resolves to {real}, outside {real_root}"
    return None
