"""`compute`: the one library call from data to `DatasetStats`, with every analysis of the
command line.

``normstats compute`` is this call and a printer: each of its flags is an argument here
of the same name (``--sample`` is ``sample=``, ``--by-folder`` is ``by_folder=``,
``--image-key`` is ``image_key=``), and what it prints is the result (``--json`` is
``stats.to_json()``). The exact run is `normstats.engine.compute.compute_stats`; this
module adds, around it, what the result carries beside the constants: a sample's
intervals, exact percentiles, per-folder statistics, outliers, and a throw-away local
cluster to run it all on.
"""

from __future__ import annotations

import logging
import numbers
import os
from collections.abc import Callable
from dataclasses import replace
from typing import Any, Unpack

import numpy as np

from normstats.errors import InvalidOptionError
from normstats.results.stats import DatasetStats
from normstats.sources.base import TaskResult
from normstats.sources.options import ReadArguments, ReadOptions, read_options

log = logging.getLogger("normstats.analyses")

__all__ = ["compute", "check_arguments"]


def compute(data: Any, *, options: ReadOptions | None = None,
            workers: int | None = None, scheduler: Any = None, task_size: int | None = None,
            progress: bool | None = False,
            on_result: Callable[[TaskResult], None] | None = None,
            cache: str | os.PathLike | bool | None = None,
            verify_cache: int | str | None = None,
            sample: int | None = None, seed: int | None = None, precision: float | None = None,
            percentiles: bool = False, by_folder: bool = False, outliers: bool = False,
            mean_image: bool = False, mean_image_std: bool = False,
            covariance: bool = False,
            local_cluster: bool = False, threads_per_worker: int | None = None,
            **read: Unpack[ReadArguments]) -> DatasetStats:
    """Exact per-channel normalization constants of a dataset, in every variant.

    Parameters
    ----------
    data : str, os.PathLike, numpy.ndarray, dask.array.Array, zarr array, dataset or iterable
        A folder of images, a ``.npy`` file, a zarr array (path or object), an array;
        a map-style dataset (``__len__`` and ``__getitem__``: a PyTorch ``Dataset``,
        ``Subset``, ``ConcatDataset``, a list of arrays) read by index in parallel tasks;
        a ``DataLoader`` (its batches split into images, its items read as they are with
        ``batch_size=None``); or any iterable of images, ``(image, label)`` tuples or
        dicts, or of batches of them (``batched``). PIL images are converted to ``mode``;
        arrays and tensors are read by their shape (`normstats.sources.items`). An xarray
        ``DataArray`` gives its layout by its dimension names and its channel names by
        its band coordinate (`normstats.sources.labelled`). A Dask array (or a
        ``DataArray`` backed by one) is reduced as a Dask reduction on its own graph: its
        blocks are reduced where they are (see ``docs/dask.md``); ``scheduler`` then runs
        that graph.
    options : ReadOptions, optional
        How the data is read and reported: ``mode``, ``layout``, ``scale``, ``channels``,
        ``on_error``, ``max_pixels``, ``max_file_bytes``, ``resize``, ``center_crop``,
        ``format``, ``image_key``, ``allow_missing_chunks``, ``batched``,
        ``storage_options`` (credentials and endpoint of a URL's store), ``nodata`` (the
        value of missing measurements, left out band by band; see
        ``docs/multispectral.md``); see `normstats.ReadOptions`.
    **read
        The same options as keyword arguments (``compute(x, mode="L")``); beside
        ``options`` they replace its fields.
    workers : int, optional
        Parallel workers of the local pool or of ``local_cluster`` (default: usable CPUs).
    scheduler : str or distributed.Client, optional
        "sync", "threads" or "processes"; or a ``dask.distributed`` cluster: a client, an
        address (``tcp://host:8786``) or a scheduler file, whose workers decide the
        parallelism. See `normstats.engine.pipeline.run`.
    task_size : int, optional
        Images per task.
    progress : bool, optional
        A progress bar on stderr (None: when stderr is a terminal).
    on_result : callable, optional
        Called with each task's `TaskResult` (records and skipped inputs) in this process.
    cache : str, os.PathLike or bool, optional
        Per-image record cache for folders, on disk or behind a URL (objects keyed by
        their ETag or version id; see ``docs/cache.md``): a directory, True for
        the default location, False for none. None (default) uses one only when
        ``$NORMSTATS_CACHE`` names a directory: a library call never writes to the home
        directory unless asked. ``stats.images_cached`` / ``images_decoded`` tell what
        the cache answered. Sampling and percentiles decode without it.
    verify_cache : int or "all", optional
        Decode this many of the files the cache would answer again (drawn at random), or
        all of them, and name in ``stats.cache_changed`` those whose cached record no
        longer matches; the result uses the fresh records.
    sample : int, optional
        Estimate from this many images drawn uniformly at random: the result holds their
        statistics and ``stats.estimate``, the 95% half-widths (images as clusters of
        pixels; see ``docs/sampling.md``); ``stats.interval(name)`` gives the intervals.
    seed : int, optional
        Seed of the draw (a non-negative integer); without one, a seed is drawn and
        recorded in ``stats.estimate.seed``.
    precision : float, optional
        Double the sample (from ``sample``, default 256) until every half-width is below
        this, in the reported scale.
    percentiles : bool
        Also ``stats.percentiles``: the exact 0.5th and 99.5th percentiles per channel
        (integer images), a robust range for min-max scaling, and the 2nd and 98th that
        rasters are clipped by (``p0.5``, ``p2``, ``p98``, ``p99.5``); nodata left out.
    by_folder : bool
        Also ``stats.by_folder``: exact statistics per immediate sub-folder (classes,
        splits), from the same per-image records.
    outliers : bool
        Also ``stats.outliers``: images with an extreme mean or std, blank images, and
        grayscale images stored as RGB.
    mean_image : bool
        Also ``stats.mean_image``: the per-position mean over images of one size (after
        ``resize`` and ``center_crop``), a float64 (H, W, C) array in the reported scale,
        exact for integer images (see ``docs/mean_image.md``). Every image is decoded:
        the record cache holds no pixels.
    covariance : bool
        Also ``stats.covariance``, ``stats.covariance_ddof1`` and ``stats.correlation``:
        the C×C channel covariance (d×d for vectors, of the rows with every feature
        finite) and correlation in the reported scale, exact for integer images, in the
        same pass; the record cache keeps what it needs (see ``docs/covariance.md``).
        ``stats.pca()`` and ``stats.whitening()`` follow from it.
    mean_image_std : bool
        Also ``stats.mean_image_std``: the per-position population std over images (and
        ``stats.mean_image`` with it).
    local_cluster : bool
        Run on a throw-away ``dask.distributed`` cluster of ``workers`` processes on this
        machine (for trying the cluster path; the default local pool is faster).
    threads_per_worker : int, optional
        Threads per worker process of ``local_cluster`` (default 1).

    Returns
    -------
    DatasetStats
        The constants, and what was asked beside them (``estimate``, ``percentiles``,
        ``by_folder``, ``outliers``, ``mean_image``, ``mean_image_std``).

    Raises
    ------
    NormstatsError
        With a one-line reason: empty dataset, incompatible images, bad option, or (with
        ``on_error="fail"``) the first unreadable file.

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> data = rng.integers(0, 256, (100, 8, 8, 3), dtype=np.uint8)
    >>> stats = compute(data)
    >>> stats.images, stats.channels, round(stats.mean[0], 2)
    (100, ('c0', 'c1', 'c2'), 0.5)
    >>> estimate = compute(data, sample=20, seed=0, channels="R,G,B")
    >>> estimate.images, estimate.estimate.population, estimate.channels
    (20, 100, ('R', 'G', 'B'))
    >>> compute(data, percentiles=True).percentiles["p99.5"][0] * 255
    254.0
    >>> compute(data, mean_image=True).mean_image.shape
    (8, 8, 3)
    """
    options = read_options(options, dict(read))
    check_arguments(sample=sample, seed=seed, precision=precision, percentiles=percentiles,
                    by_folder=by_folder, outliers=outliers, cache=cache,
                    mean_image=mean_image or mean_image_std, covariance=covariance,
                    verify_cache=verify_cache, workers=workers, scheduler=scheduler,
                    local_cluster=local_cluster, threads_per_worker=threads_per_worker,
                    task_size=task_size)
    run = {"workers": workers, "scheduler": scheduler, "task_size": task_size,
           "progress": progress, "on_result": on_result}
    if local_cluster:
        return _on_local_cluster(data, options, run, threads_per_worker, cache=cache,
                                 verify_cache=verify_cache, sample=sample, seed=seed,
                                 precision=precision, percentiles=percentiles,
                                 by_folder=by_folder, outliers=outliers,
                                 mean_image=mean_image, mean_image_std=mean_image_std,
                                 covariance=covariance)
    if sample is not None or precision is not None:
        from normstats.analyses.sampling_run import sample_estimate
        from normstats.sources import open_source

        return sample_estimate(open_source(data, options=options), sample, seed=seed,
                               precision=precision, scale=options.scale,
                               channels=options.channels, **run)
    run["covariance"] = covariance
    pixels = _accumulators(percentiles, mean_image, mean_image_std)
    if not (by_folder or outliers):
        return _exact(data, options, run, pixels, cache, verify_cache)
    from normstats.analyses.record_reports import RecordCollector, with_record_reports

    collector = RecordCollector()
    stats = _exact(data, options, {**run, "on_result": _both(collector, on_result)},
                   pixels, cache, verify_cache)
    return with_record_reports(stats, collector.records(), by_folder, outliers)


def _accumulators(percentiles: bool, mean_image: bool, mean_image_std: bool
                  ) -> tuple[str, ...]:
    """What the pixels themselves are needed for (`normstats.engine.pixel_run`)."""
    wanted = (("histogram", percentiles), ("mean_image_std", mean_image_std),
              ("mean_image", mean_image and not mean_image_std))
    return tuple(name for name, asked in wanted if asked)


def _exact(data: Any, options: ReadOptions, run: dict[str, Any], pixels: tuple[str, ...],
           cache: str | os.PathLike | bool | None,
           verify_cache: int | str | None) -> DatasetStats:
    """Every image read: with accumulators of its pixels, or through the record cache."""
    if not pixels:
        from normstats.engine.compute import compute_stats

        stats = compute_stats(data, options, cache=cache, verify_cache=verify_cache, **run)
        return _covariance_made(_nodata_said(stats, options.nodata), run["covariance"])
    from normstats.engine.pixel_run import compute_with_pixels

    stats, found = compute_with_pixels(data, options, pixels, **run)
    _covariance_made(_nodata_said(stats, options.nodata), run["covariance"])
    changes: dict[str, Any] = {}
    if "histogram" in found:
        from normstats.engine.histogram_run import robust_range

        changes["percentiles"] = robust_range(stats, found["histogram"])
    totals = found.get("mean_image_std", found.get("mean_image"))
    if totals is not None:
        changes["mean_image"], changes["mean_image_std"] = totals.finalize(stats.scale)
    return replace(stats, **changes)


def _nodata_said(stats: DatasetStats, nodata: float | None) -> DatasetStats:
    """``stats``, with one line on stderr when the ``nodata`` asked for cannot occur in
    their dtype (out of an integer type's range, a fraction or NaN for integer pixels):
    nothing was left out (`normstats.maths.masked.nodata_applies`), which the report only
    shows by saying nothing, so a mistyped value (-9999 for uint16 rasters) would pass
    unseen."""
    if nodata is not None and stats.counts is None and stats.kind == "images":
        log.warning("normstats: nodata %s cannot occur in %s pixels: nothing was left out, "
                    "every value is counted", format(nodata, "g"), stats.dtype)
    return stats


def _covariance_made(stats: DatasetStats, asked: bool) -> DatasetStats:
    """``stats``, refused when the covariance was asked and not made: never a result
    silently without it."""
    if asked and stats.covariance is None:
        raise InvalidOptionError(
            "the channel covariance cannot be computed for this data here (it is made "
            "for images without nodata and for vectors; with --mean-image of a Dask array, "
            "compute it in a run of its own)")
    return stats


def _both(first: Callable[[TaskResult], None],
          second: Callable[[TaskResult], None] | None) -> Callable[[TaskResult], None]:
    if second is None:
        return first

    def both(result: TaskResult) -> None:
        first(result)
        second(result)
    return both


def _on_local_cluster(data: Any, options: ReadOptions, run: dict[str, Any],
                      threads_per_worker: int | None, **analyses: Any) -> DatasetStats:
    from normstats.engine.cluster import local_cluster
    from normstats.engine.pipeline import default_workers

    workers = run.pop("workers") or default_workers()
    with local_cluster(workers, threads_per_worker or 1) as client:
        return compute(data, options=options, **{**run, "scheduler": client}, **analyses)


def check_arguments(*, sample: int | None = None, seed: int | None = None,
                    precision: float | None = None, percentiles: bool = False,
                    by_folder: bool = False, outliers: bool = False,
                    mean_image: bool = False, covariance: bool = False,
                    cache: str | os.PathLike | bool | None = None,
                    verify_cache: int | str | None = None, workers: int | None = None,
                    scheduler: Any = None, local_cluster: bool = False,
                    threads_per_worker: int | None = None, task_size: int | None = None
                    ) -> None:
    """Refuse arguments of `compute` that contradict each other or are not of their kind
    (a count that is no whole number of at least 1, a flag that is not True or False),
    before any work (the command line calls it first, to report them as mistakes of the
    command line; its own types already refuse the second kind).

    Examples
    --------
    >>> check_arguments(sample=10, percentiles=True)
    Traceback (most recent call last):
    ...
    normstats.errors.InvalidOptionError: --percentiles needs every pixel: not with --sample/...
    """
    for name, count in (("sample", sample), ("task_size", task_size)):
        if count is not None and (isinstance(count, bool) or not isinstance(
                count, numbers.Integral) or count < 1):
            raise InvalidOptionError(f"{name} must be a whole number of at least 1, got "
                                     f"{count!r}")
    for name, flag in (("percentiles", percentiles), ("by_folder", by_folder),
                       ("outliers", outliers), ("covariance", covariance)):
        if not isinstance(flag, bool | np.bool_):
            hint = " (it adds p0.5, p2, p98 and p99.5)" if name == "percentiles" else ""
            raise InvalidOptionError(f"{name} is True or False{hint}, got {flag!r}")
    sampling = sample is not None or precision is not None
    problems = [
        (sampling and percentiles, "--percentiles needs every pixel: not with "
                                   "--sample/--precision"),
        (sampling and (by_folder or outliers), "--by-folder and --outliers need every "
                                               "image's record: not with --sample/--precision"),
        (sampling and mean_image, "--mean-image needs every image: not with "
                                  "--sample/--precision"),
        (sampling and covariance, "--covariance needs every image: not with "
                                  "--sample/--precision"),
        (seed is not None and not sampling, "--seed draws a sample: give --sample or "
                                            "--precision with it"),
        (verify_cache is not None and (sampling or percentiles or mean_image
                                       or cache is False),
         "--verify-cache checks the record cache of a plain compute: not with --sample, "
         "--precision, --percentiles, --mean-image or --no-cache"),
        (threads_per_worker is not None and not local_cluster,
         "--threads-per-worker needs --local-cluster"),
        (local_cluster and scheduler is not None,
         "--local-cluster starts its own scheduler; drop --scheduler"),
    ]
    for wrong, reason in problems:
        if wrong:
            raise InvalidOptionError(reason)
    if workers is not None and scheduler is not None and _names_a_cluster(scheduler):
        raise InvalidOptionError("--workers sizes a local pool or --local-cluster; with "
                                 "--scheduler ADDRESS the cluster's workers decide")


def _names_a_cluster(scheduler: Any) -> bool:
    from normstats.engine.cluster import is_distributed

    return is_distributed(scheduler)
