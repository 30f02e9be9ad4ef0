"""`compute`: the one library call from data to `DatasetStats`."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from normstats.engine.source_run import run_source
from normstats.errors import InvalidOptionError
from normstats.maths.stats import DatasetStats
from normstats.sources import open_source
from normstats.sources.arrays import ArraySource, detect_layout
from normstats.sources.base import TaskResult
from normstats.sources.decoding.transforms import transformed_source

__all__ = ["compute", "ON_ERROR"]

ON_ERROR = ("skip", "fail")


def compute(data: Any, *, mode: str = "RGB", layout: str | None = None,
            scale: float | None = None, channels: tuple[str, ...] | None = None,
            on_error: str = "skip", max_pixels: int | None = None, workers: int | None = None,
            scheduler: Any = None, task_size: int | None = None, progress: bool | None = False,
            on_result: Callable[[TaskResult], None] | None = None,
            format: str | None = None,
            cache: str | os.PathLike | bool | None = None,
            resize: int | None = None, center_crop: int | None = None,
            image_key: str | None = None,
            verify_cache: int | str | None = None,
            max_file_bytes: int | None = None,
            allow_missing_chunks: bool = False) -> DatasetStats:
    """Exact per-channel normalization constants of a dataset, in every variant.

    Parameters
    ----------
    data : str, os.PathLike, numpy.ndarray, dask.array.Array, zarr array, dataset or iterable
        A folder of images, a ``.npy`` file, a zarr array (path or object), an array;
        a map-style dataset (``__len__`` and ``__getitem__``: a PyTorch ``Dataset``,
        ``Subset``, ``ConcatDataset``, a list of arrays) read by index in parallel tasks;
        a ``DataLoader`` (its batches split into images); or any iterable of images,
        ``(image, label)`` tuples or dicts. PIL images are converted to ``mode``.
        A Dask array (or an xarray ``DataArray`` backed by one) is reduced as a Dask
        reduction on its own graph: its blocks are reduced where they are (see
        ``docs/dask.md``); ``scheduler`` then runs that graph.
    mode : {"RGB", "L", "RGBA", "keep"}
        Decode policy for image files; "RGB" matches torchvision's default loader,
        "keep" keeps native channels and bit depth (16-bit stays 16-bit).
    layout : str, optional
        Array layout ("NHWC", "NCHW", "NHW", "NC", ...); detected when omitted.
    scale : float, optional
        Divisor for the reported values; default the dtype maximum for integer images
        (255, 65535) and 1 for floats and for vector data (raw units, as scikit-learn).
        Vector data (N, d) gets per-feature statistics: NaN is ignored per feature
        (``stats.counts`` says how many values each feature kept) and infinite values
        are skipped and named by row and column (an error with ``on_error="fail"``).
    channels : tuple of str, optional
        Channel names (default R, G, B for decoded colour images; c0, c1, ... for arrays).
    on_error : {"skip", "fail"}
        Skip unreadable files (named in ``stats.skipped``) or stop at the first one.
    max_pixels : int, optional
        Decompression-bomb limit in pixels per image (default: Pillow's, ~89.5 M).
    max_file_bytes : int, optional
        Image files and tar members larger than this are skipped unread, with their
        reason (default ``8 × max_pixels + 64 MiB``: the largest honest file of that
        many pixels; see `normstats.sources.decoding.file_read`).
    workers, scheduler, task_size, progress, on_result
        Parallelism and reporting; see `normstats.engine.pipeline.run`.
    format : str, optional
        Dataset file format ("idx", "cifar10-bin", "tar", "npz", ...); detected from
        content and name when omitted (see `normstats.sources.detect`).
    cache : str, os.PathLike or bool, optional
        Per-image record cache for folders (see ``docs/cache.md``): a directory, True for
        the default location, False for none. None (default) uses one only when
        ``$NORMSTATS_CACHE`` names a directory: a library call never writes to the home
        directory unless asked. ``stats.images_cached`` / ``images_decoded`` tell what
        the cache answered.
    resize, center_crop : int, optional
        Statistics of what the model sees: torchvision's ``Resize(resize)`` (shorter side,
        antialiased bilinear) then ``CenterCrop(center_crop)`` on each decoded image file
        (see `normstats.sources.decoding.transforms`); the cache keys on them.
    image_key : str, optional
        Which key of dict items holds the image (default: the first of ``image``,
        ``img``, ``pixel_values``, ``pixels``, ``x``, ``input`` present).
    verify_cache : int or "all", optional
        Decode this many of the files the cache would answer again (drawn at random), or
        all of them, and name in ``stats.cache_changed`` those whose cached record no
        longer matches (see ``docs/cache.md``); the result uses the fresh records.
    allow_missing_chunks : bool
        A zarr array (path, object, or the source of a ``da.from_zarr`` array) whose store
        lacks chunks is refused by default, naming them: zarr would read them as the fill
        value. True reads them so, and ``stats.source`` says how many images that made
        (see `normstats.sources.zarr_chunks`).

    Returns
    -------
    DatasetStats

    Raises
    ------
    NormstatsError
        With a one-line reason: empty dataset, incompatible images, bad option, or (with
        ``on_error="fail"``) the first unreadable file.

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> stats = compute(rng.integers(0, 256, (100, 8, 8, 3), dtype=np.uint8))
    >>> stats.images, stats.channels, round(stats.mean[0], 2)
    (100, ('c0', 'c1', 'c2'), 0.5)
    """
    if on_error not in ON_ERROR:
        raise InvalidOptionError(f"on_error must be 'skip' or 'fail', got {on_error!r}")
    if allow_missing_chunks:
        from normstats.engine.dask_images import allowing_missing_chunks

        data = allowing_missing_chunks(data, layout, channels)
    if any(type(x).__module__.startswith("dask") for x in (data, getattr(data, "data", None))):
        from normstats.engine.dask_reduce import is_dask_array

        if is_dask_array(getattr(data, "data", None)) and hasattr(data, "dims"):
            data = data.data  # an xarray DataArray backed by Dask
        if is_dask_array(data) and _images_source(data) is not None:
            data = _images_source(data)  # an untouched images() array: one engine reads it
        elif is_dask_array(data) and (layout or detect_layout(tuple(data.shape))) != "NC":
            return compute_dask_array(data, layout=layout, scale=scale, channels=channels,
                                      workers=workers, scheduler=scheduler,
                                      allow_missing_chunks=allow_missing_chunks)
    source = open_source(data, mode=mode, layout=layout, max_pixels=max_pixels,
                         fail_fast=on_error == "fail", channel_names=channels, format=format,
                         image_key=image_key, max_file_bytes=max_file_bytes)
    if source.kind == "vectors" and isinstance(source, ArraySource):
        from normstats.engine.vectors_run import compute_vectors

        return compute_vectors(source, fail_on_inf=on_error == "fail", channels=channels,
                               scale=scale)
    source = transformed_source(source, resize, center_crop)
    outcome = run_source(source, cache=cache, workers=workers, scheduler=scheduler,
                         task_size=task_size, progress=progress, on_result=on_result,
                         verify_cache=verify_cache)
    stats = DatasetStats.from_summary(outcome.summary, channels=channels, scale=scale,
                                      mode=source.mode, kind=source.kind,
                                      source=source.description)
    if not outcome.used_cache:
        return stats
    return replace(stats, images_cached=outcome.cached, images_decoded=outcome.decoded,
                   cache_checked=outcome.check.checked, cache_changed=outcome.check.changed)


def _images_source(x: Any) -> Any:
    from normstats.engine.dask_images import source_of  # only for Dask arrays

    return source_of(x)


def compute_dask_array(x: Any, *, layout: str | None = None, scale: float | None = None,
                       channels: tuple[str, ...] | None = None, workers: int | None = None,
                       scheduler: Any = None, allow_missing_chunks: bool = False) -> DatasetStats:
    """`compute` of a Dask array: the exact reduction over its blocks, on its own graph.

    Examples
    --------
    >>> import numpy as np, dask.array as da
    >>> x = da.from_array(np.zeros((6, 4, 4, 3), np.uint8), chunks=(2, 4, 2, 3))
    >>> compute_dask_array(x, scheduler="sync").images
    6
    """
    from normstats.engine.dask_images import reading_zarr
    from normstats.engine.dask_reduce import as_image_blocks, run_graph, summary_graph

    images, layout = as_image_blocks(x, layout)
    with reading_zarr(x, allow_missing_chunks) as note:
        summary = run_graph(summary_graph(images, "array", channels), scheduler, workers)
    return DatasetStats.from_summary(summary, channels=channels, scale=scale, mode=layout,
                                     kind="vectors" if layout == "NC" else "images",
                                     source=f"dask array {tuple(x.shape)} {x.dtype}"
                                            + (f" ({note})" if note else ""))
