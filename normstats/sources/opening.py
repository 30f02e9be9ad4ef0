"""`open_source`: the source for whatever the user passed (a path, an array, a dataset).

A folder of images, a ``.npy`` file or zarr array, a dataset file recognised by
`normstats.sources.detect`, a URL, an in-memory array, a map-style dataset or any
iterable of images.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import Any

import numpy as np

from normstats.errors import NormstatsError
from normstats.sources.arrays import ArraySource
from normstats.sources.base import Source
from normstats.sources.decoding.file_read import not_a_dataset_path
from normstats.sources.decoding.policy import policy_of
from normstats.sources.detect import detect_format, open_format
from normstats.sources.folder import FolderSource
from normstats.sources.image_folder import ImageFolderFiles, plain_image_folder
from normstats.sources.iterable import IterableSource, is_data_loader
from normstats.sources.mapped import MappedSource, is_map_style
from normstats.sources.npz import split_member
from normstats.sources.remote import RemoteFolderSource, is_url, local_path

__all__ = ["open_source"]


def open_source(data: Any, *, mode: str = "RGB", layout: str | None = None,
                max_pixels: int | None = None, fail_fast: bool = False,
                channel_names: tuple[str, ...] | None = None,
                format: str | None = None,
                image_key: str | None = None,
                max_file_bytes: int | None = None) -> Source | IterableSource:
    """The source for ``data``: a path (folder, ``.npy``, zarr), an array, a map-style
    dataset (``__len__`` and ``__getitem__``: read by index in parallel tasks), a
    ``DataLoader`` (read batch by batch) or any other iterable of images.

    A URL (``memory://``, ``s3://bucket/train``, ...) names a folder read through fsspec
    (`RemoteFolderSource`); ``file://`` URLs are plain local paths.

    Dataset files (IDX, CIFAR batches, tar shards, ``.npz``) are recognised by content
    and name (`normstats.sources.detect`); ``format`` overrides. A source is returned as is.

    Examples
    --------
    >>> import numpy as np
    >>> type(open_source(np.zeros((2, 4, 4, 3), np.uint8))).__name__
    'ArraySource'
    """
    if hasattr(data, "tasks") and hasattr(data, "scheduler"):
        return data
    if is_url(data):
        data = local_path(data) or data
        if is_url(data):  # fsspec: memory://, s3://, gcs://, ...
            policy = policy_of(mode, max_pixels, max_file_bytes)
            return RemoteFolderSource(data, policy, fail_fast=fail_fast)
    if isinstance(data, str | os.PathLike):
        path = os.fspath(data)
        if not os.path.exists(split_member(path)[0]):
            raise NormstatsError("no such file or folder", path=path)
        if (reason := not_a_dataset_path(split_member(path)[0])) is not None:
            raise NormstatsError(reason, path=path)
        fmt = format or detect_format(path)
        if fmt not in ("folder", "zarr", "npy"):
            return open_format(path, fmt, mode=mode, layout=layout, max_pixels=max_pixels,
                               fail_fast=fail_fast, channel_names=channel_names,
                               max_file_bytes=max_file_bytes)
        if os.path.isdir(path) and not _is_zarr(path):
            policy = policy_of(mode, max_pixels, max_file_bytes)
            return FolderSource(path, policy, fail_fast=fail_fast)
        return ArraySource(path, layout=layout, channel_names=channel_names)
    if isinstance(data, np.ndarray) or _is_array_like(data):
        return ArraySource(data, layout=layout, channel_names=channel_names)
    if is_map_style(data) and not is_data_loader(data):
        if plain_image_folder(data, mode):
            return ImageFolderFiles(data, fail_fast=fail_fast, max_pixels=max_pixels,
                                    max_file_bytes=max_file_bytes)
        return MappedSource(data, mode=mode, layout=layout, image_key=image_key,
                            fail_fast=fail_fast)
    if isinstance(data, Iterable):
        return IterableSource(data, layout=layout, mode=mode, image_key=image_key)
    raise NormstatsError(f"cannot compute statistics of a {type(data).__name__}: pass a folder, "
                         "a .npy or zarr path, an array, a dataset (with __len__ and "
                         "__getitem__) or an iterable of images")


def _is_zarr(path: str) -> bool:
    return os.path.exists(os.path.join(path, "zarr.json")) or \
        os.path.exists(os.path.join(path, ".zarray"))


def _is_array_like(data: Any) -> bool:
    """zarr and dask arrays: shape, dtype and slicing, but not an iterable of images."""
    return all(hasattr(data, name) for name in ("shape", "dtype", "__getitem__")) and \
        not type(data).__module__.startswith("torch")
