"""Sources to per-image records to one exact `Summary`: the run, however it is scheduled.

A source's tasks run on a local executor (`normstats.engine.local_run`: this process,
threads, or a fork pool of processes), or as futures on a `dask.distributed` cluster
(`normstats.engine.distributed`); a small dataset is read right here, task after task.
Every merge is exact, so the answer is bit-identical for any task size, worker count or
scheduler. Dask is imported only when a cluster is used.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from normstats.engine.progress import ProgressBar
from normstats.errors import AccessError, InvalidOptionError, SkipKind, numbered
from normstats.maths.records import cross_sums_wanted
from normstats.maths.summary import Summary, summarize
from normstats.sources.base import Source, TaskResult
from normstats.sources.iterable import IterableSource

if TYPE_CHECKING:
    from normstats.engine.cache.verify import CacheCheck

__all__ = ["run", "RunOutcome", "default_workers", "is_small", "SMALL_RUN_BYTES"]


@dataclass(frozen=True)
class RunOutcome:
    """A run's exact summary and where its inputs came from (``used_cache`` False: no
    cache was read, ``cached`` and ``decoded`` are 0, ``check`` is None)."""

    summary: Summary
    cached: int = 0
    decoded: int = 0
    used_cache: bool = False
    check: CacheCheck | None = None


def default_workers() -> int:
    """The CPUs this process may use (respects affinity masks and containers)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def run(source: Source | IterableSource, *, workers: int | None = None,
        scheduler: Any = None, task_size: int | None = None, progress: bool | None = None,
        on_result: Callable[[TaskResult], None] | None = None,
        covariance: bool = False) -> Summary:
    """Compute the exact `Summary` of every image of ``source``.

    Parameters
    ----------
    source : Source
        Where the images come from (see `normstats.sources.open_source`).
    workers : int, optional
        Parallel workers for local schedulers (default: the usable CPUs).
    scheduler : str or distributed.Client, optional
        "sync", "threads", "processes"; or a cluster: a `distributed.Client`, a
        scheduler address ("tcp://host:8786") or scheduler JSON file (see
        `normstats.engine.distributed`; ``workers`` is then the cluster's). Default: the
        source's preference ("processes" for folders, "threads" for arrays), "sync"
        with one worker.
    task_size : int, optional
        Images per task; by default sized to the data (and at least ~10 tasks per worker).
    progress : bool, optional
        Draw a progress bar on stderr (default: when stderr is a terminal).
    on_result : callable, optional
        Receives each task's `TaskResult` in this process as it finishes.
    covariance : bool
        The records also hold the channel cross sums, and the summary their totals
        (``Summary.cross``), wherever the tasks run.

    Examples
    --------
    >>> import numpy as np
    >>> from normstats.sources import open_source
    >>> run(open_source(np.zeros((20, 4, 4, 3), np.uint8)), task_size=7).images
    20
    """
    workers = default_workers() if workers is None else int(workers)
    if workers < 1:
        raise InvalidOptionError(f"workers must be at least 1, got {workers}")
    bar = ProgressBar(len(source), enabled=progress, on_result=on_result)
    with cross_sums_wanted(covariance):
        summary = _running(source, scheduler, workers, task_size, bar)
    total = Summary(skipped=tuple(source.skipped)).merge(summary)
    listed = len(source) if hasattr(source, "walk") else None  # files, not shards or rows
    _raise_access_failures(total, listed, source.description)
    return total


def _running(source: Source | IterableSource, scheduler: Any, workers: int,
             task_size: int | None, bar: ProgressBar) -> Summary:
    """The summary of the source's tasks on the scheduler that suits them."""
    if getattr(source, "walk", None) is not None and not len(source):
        bar.close()  # no file to read (a warm run's cache answered them all): no executor
        return Summary()
    from normstats.engine.cluster import is_distributed
    from normstats.engine.local_run import run_in_process, run_local

    try:
        if isinstance(source, IterableSource):
            summary = _run_stream(source, bar)
        elif is_distributed(scheduler):
            from normstats.engine.distributed import run_on_cluster

            summary = run_on_cluster(source, scheduler, task_size=task_size, bar=bar)
        elif scheduler is None and is_small(source):
            summary = run_in_process(source.tasks(task_size, 1), bar)
        else:
            summary = run_local(source.tasks(task_size, workers), workers,
                                scheduler or (source.scheduler if workers > 1 else "sync"), bar)
    finally:
        bar.close()
    return summary


def _raise_access_failures(summary: Summary, listed: int | None, where: str) -> None:
    """Fail a run in which a store refused files it listed (`SkipKind.ACCESS`): the
    statistics of the files it did serve are not the dataset's, and the cause is a
    permission or a credential, not the images. Decided by the kind, after every task ran,
    so the message counts them all."""
    refused = [s for s in summary.skipped if s.kind is SkipKind.ACCESS]
    if not refused:
        return
    first = refused[0]
    files = numbered(len(refused), "listed file") if listed is None else \
        f"{len(refused):,} of {numbered(listed, 'listed file')}"
    raise AccessError(f"{files} could not be read, e.g. {first.path}: {first.reason}", where)


#: A folder of at most this many bytes of image files, or an array of at most this many
#: bytes, is read in the calling process: starting worker processes and importing Dask
#: would cost more than the work.
SMALL_RUN_BYTES = 4 << 20


def is_small(source: Source) -> bool:
    """Whether ``source`` is small enough to read in this process (`SMALL_RUN_BYTES`).

    Examples
    --------
    >>> import numpy as np
    >>> from normstats.sources import open_source
    >>> is_small(open_source(np.zeros((3, 4, 4, 3), np.uint8)))
    True
    """
    walk = getattr(source, "walk", None)
    if walk is not None and getattr(source, "root", "").find("://") < 0:
        if int(walk.files.sizes.sum()) > SMALL_RUN_BYTES:
            return False  # decided without loading Pillow, which a pool run may never need
        from PIL import Image

        # Pillow's limit in this process is the caller's to set: a run allowed more
        # pixels than it goes to the pool, whose workers lift it.
        return source.policy.max_pixels <= (Image.MAX_IMAGE_PIXELS or float("inf"))
    array = getattr(source, "array", None)
    if isinstance(array, np.ndarray) and not isinstance(array, np.memmap):
        return array.nbytes <= SMALL_RUN_BYTES
    return False


def _run_stream(source: IterableSource, bar: ProgressBar) -> Summary:
    total = Summary()
    for result in source.results():
        if bar.on_result is not None:
            bar.on_result(result)
        total = total.merge(summarize(result.records, result.skipped))
        bar.advance(result.images)
    return total
