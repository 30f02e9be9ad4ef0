"""`compute_stats`: the engine's run from data to exact `DatasetStats` (every image).

`normstats.compute` (`normstats.analyses.compute`) adds the analyses of the command line
(sampling, percentiles, per-folder statistics, outliers, a local cluster) around it.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from normstats.engine.source_run import run_source
from normstats.results.stats import DatasetStats
from normstats.sources import open_source
from normstats.sources.arrays import ArraySource, detect_layout
from normstats.sources.base import TaskResult
from normstats.sources.options import ReadOptions

__all__ = ["compute_stats"]


def compute_stats(data: Any, options: ReadOptions, *, workers: int | None = None,
                  scheduler: Any = None, task_size: int | None = None,
                  progress: bool | None = False,
                  on_result: Callable[[TaskResult], None] | None = None,
                  cache: str | os.PathLike | bool | None = None,
                  verify_cache: int | str | None = None) -> DatasetStats:
    """The exact statistics of every image of ``data``: the engine of `normstats.compute`.

    Parameters
    ----------
    data : str, os.PathLike, numpy.ndarray, dask.array.Array, zarr array, dataset or iterable
        What `normstats.compute` takes. A Dask array (or an xarray ``DataArray`` backed
        by one) is reduced as a Dask reduction on its own graph: its blocks are reduced
        where they are (see ``docs/dask.md``); ``scheduler`` then runs that graph.
    options : ReadOptions
        How the data is read and reported (`normstats.sources.options`).
    workers, scheduler, task_size, progress, on_result, cache, verify_cache
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
    layout, scale, channels = options.layout, options.scale, options.channels
    allow_missing_chunks = options.allow_missing_chunks
    if allow_missing_chunks:
        from normstats.engine.dask.images import allowing_missing_chunks

        data = allowing_missing_chunks(data, layout, channels)
    if any(type(x).__module__.startswith("dask") for x in (data, getattr(data, "data", None))):
        from normstats.engine.dask.images import untouched_source
        from normstats.engine.dask.lazy import compute_dask_array
        from normstats.engine.dask.reduce import is_dask_array

        if is_dask_array(getattr(data, "data", None)) and hasattr(data, "dims"):
            data = data.data  # an xarray DataArray backed by Dask
        if is_dask_array(data) and untouched_source(data) is not None:
            data = untouched_source(data)  # an images() array as made: one engine reads it
        elif is_dask_array(data) and (layout or detect_layout(tuple(data.shape))) != "NC":
            return compute_dask_array(data, layout=layout, scale=scale, channels=channels,
                                      workers=workers, scheduler=scheduler,
                                      allow_missing_chunks=allow_missing_chunks)
    source = open_source(data, options=options)
    if source.kind == "vectors" and isinstance(source, ArraySource):
        from normstats.engine.vectors_run import compute_vectors

        return compute_vectors(source, fail_on_inf=options.fail_fast, channels=channels,
                               scale=scale)
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
