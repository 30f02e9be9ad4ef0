"""`compute_stats`: the engine's run from data to exact `DatasetStats` (every image).

`normstats.compute` (`normstats.analyses.compute`) adds the analyses of the command line
(sampling, percentiles, per-folder statistics, outliers, a local cluster) around it.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from normstats.engine.cache.location import resolve_cache_dir
from normstats.engine.source_run import run_source
from normstats.errors import InvalidOptionError
from normstats.results.stats import DatasetStats
from normstats.sources import open_source
from normstats.sources.arrays import ArraySource, detect_layout
from normstats.sources.base import TaskResult
from normstats.sources.labelled import unlabelled
from normstats.sources.opening import image_folder
from normstats.sources.options import ReadOptions
from normstats.sources.zarr_chunks import zarr_read_by

if TYPE_CHECKING:  # the cache's modules load only for a cached run
    from normstats.engine.cache.run import EarlyOpening

__all__ = ["compute_stats", "dask_reduced"]


def compute_stats(data: Any, options: ReadOptions, *, workers: int | None = None,
                  scheduler: Any = None, task_size: int | None = None,
                  progress: bool | None = False,
                  on_result: Callable[[TaskResult], None] | None = None,
                  cache: str | os.PathLike | bool | None = None,
                  verify_cache: int | str | None = None,
                  covariance: bool = False) -> DatasetStats:
    """The exact statistics of every image of ``data``: the engine of `normstats.compute`.

    Parameters
    ----------
    data : str, os.PathLike, numpy.ndarray, dask.array.Array, zarr array, dataset or iterable
        What `normstats.compute` takes. A Dask array (or an xarray ``DataArray`` backed
        by one) is reduced as a Dask reduction on its own graph: its blocks are reduced
        where they are (see ``docs/dask.md``); ``scheduler`` then runs that graph.
    options : ReadOptions
        How the data is read and reported (`normstats.sources.options`).
    workers, scheduler, task_size, progress, on_result, cache, verify_cache, covariance
        As in `normstats.compute`; see `normstats.engine.pipeline.run` and ``docs/cache.md``.

    Returns
    -------
    DatasetStats

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> stats = compute_stats(rng.integers(0, 256, (100, 8, 8, 3), dtype=np.uint8),
    ...                       ReadOptions())
    >>> stats.images, stats.channels, round(stats.mean[0], 2)
    (100, ('c0', 'c1', 'c2'), 0.5)
    """
    data, options, on_dask = dask_reduced(data, options, scheduler)
    layout, scale, channels = options.layout, options.scale, options.channels
    if on_dask and options.nodata is not None:
        raise InvalidOptionError(
            "nodata is left out by the readers of files and numpy arrays, not on a Dask "
            "array's graph: compute the folder (or images() of it, untouched), or a numpy "
            "masked array")
    if on_dask:
        from normstats.engine.dask.lazy import compute_dask_array

        return compute_dask_array(data, layout=layout, scale=scale, channels=channels,
                                  workers=workers, scheduler=scheduler,
                                  allow_missing_chunks=options.allow_missing_chunks,
                                  covariance=covariance)
    with _opening_cache_early(data, options, cache) as early:  # while the folder is walked
        source = open_source(data, options=options)
        return _computed(source, options, early, workers=workers, scheduler=scheduler,
                         task_size=task_size, progress=progress, on_result=on_result,
                         cache=cache, verify_cache=verify_cache, covariance=covariance)


def _opening_cache_early(data: Any, options: ReadOptions,
                         cache: str | os.PathLike | bool | None) -> AbstractContextManager:
    """`normstats.engine.cache.run.opening_early` for a local folder read with a cache
    (its modules load only then), else a context of None."""
    cache_dir = resolve_cache_dir(cache)
    folder = image_folder(data, options) if cache_dir is not None else None
    if folder is None:
        return nullcontext()
    from normstats.engine.cache.run import opening_early

    return opening_early(folder, options.policy, cache_dir)


def _computed(source: Any, options: ReadOptions, early: EarlyOpening | None, *,
              covariance: bool, **run_options: Any) -> DatasetStats:
    """The statistics of an opened ``source`` (`compute_stats` after its opening)."""
    scale, channels = options.scale, options.channels
    if source.kind == "vectors" and isinstance(source, ArraySource):
        from normstats.engine.vectors_run import compute_vectors

        if options.nodata is not None or source.mask is not None:
            raise InvalidOptionError("vectors (N, d) leave NaN out per feature; nodata and "
                                     "masks are for images: set missing values to NaN")
        return compute_vectors(source, fail_on_inf=options.fail_fast, channels=channels,
                               scale=scale, covariance=covariance)
    outcome = run_source(source, early=early, covariance=covariance, **run_options)
    stats = DatasetStats.from_summary(outcome.summary, channels=channels, scale=scale,
                                      mode=source.mode, kind=source.kind,
                                      source=source.description)
    if not outcome.used_cache:
        return stats
    return replace(stats, images_cached=outcome.cached, images_decoded=outcome.decoded,
                   cache_checked=outcome.check.checked, cache_changed=outcome.check.changed)


def dask_reduced(data: Any, options: ReadOptions, scheduler: Any = None
                 ) -> tuple[Any, ReadOptions, bool]:
    """What the engine reads of ``data``, and whether it is a Dask array of images that is
    reduced on its own graph (True) rather than through a source's tasks.

    An xarray ``DataArray`` becomes its array (in its layout); a zarr array with missing
    chunks allowed, the source that fills them; an untouched `normstats.images` array,
    its source (one engine reads it: pipeline, cache, cluster); a Dask array that only
    reads a zarr array (``da.from_zarr(store)``), that zarr array when ``scheduler`` runs
    here (not on a cluster): zarr's own slices of several chunks read it faster than a
    Dask task a chunk, 0.88 of the time on 50,000 32x32x3 images in 25 chunks.

    Examples
    --------
    >>> import numpy as np, dask.array as da
    >>> dask_reduced(da.zeros((2, 4, 4, 3), np.uint8), ReadOptions())[2]
    True
    """
    data, options = unlabelled(data, options)  # an xarray DataArray: its array, its layout
    if options.allow_missing_chunks:
        from normstats.engine.dask.images import allowing_missing_chunks

        data = allowing_missing_chunks(data, options.layout, options.channels)
    # a Dask array, or an xarray Variable over one: never a numpy array, whose .data is a
    # memoryview (one of datetime64 pixels cannot be made: its ValueError is no message)
    if type(data).__module__.startswith("numpy") or not any(
            type(x).__module__.startswith("dask") for x in (data, getattr(data, "data", None))):
        return data, options, False
    from normstats.engine.dask.images import untouched_source
    from normstats.engine.dask.reduce import is_dask_array

    if is_dask_array(data) and untouched_source(data) is not None:
        return untouched_source(data), options, False  # an images() array as made
    if is_dask_array(data) and _runs_here(scheduler) and zarr_read_by(data) is not None:
        return zarr_read_by(data), options, False
    on_dask = is_dask_array(data) and \
        (options.layout or detect_layout(tuple(data.shape))) != "NC"
    return data, options, on_dask


def _runs_here(scheduler: Any) -> bool:
    """True when ``scheduler`` computes in this process (threads, processes, sync, or
    Dask's default with no ``distributed.Client`` made the default)."""
    from normstats.engine.cluster import default_client, is_distributed

    return not is_distributed(scheduler) and (scheduler is not None or
                                              default_client() is None)
