"""Sources to Dask graph to per-image records to one exact `Summary`.

Each source task becomes one Dask task that returns the records of its images; groups
of those are summarised, and a tree reduction merges the summaries. Every merge is
exact, so the answer is bit-identical for any task size, worker count or scheduler.
Local runs use processes for decoding folders (Pillow holds the GIL on small images)
and threads for arrays already in memory; a `dask.distributed` client is accepted
as the scheduler unchanged.
"""

from __future__ import annotations

import contextlib
import gc
import multiprocessing
import os
import signal
import sys
import threading
import time
import warnings
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import Any

import dask
from dask.callbacks import Callback
from dask.delayed import Delayed, delayed

from normstats.engine.cluster import is_distributed
from normstats.engine.progress import TASK_PREFIX, ProgressBar
from normstats.errors import InvalidOptionError, NormstatsError
from normstats.maths import fused
from normstats.maths.summary import Summary, summarize
from normstats.sources.base import Source, Task, TaskResult
from normstats.sources.iterable import IterableSource

__all__ = ["run", "default_workers", "SCHEDULERS"]

SCHEDULERS = ("sync", "threads", "processes")
_FAN_IN = 8
WORKER_DIED = ("a decoding worker process died (a decoder crash, or the system killed it for "
               "lack of memory) and dask.distributed, which would retry its files, is not "
               "installed: pip install 'normstats[distributed]' and run again")


def default_workers() -> int:
    """The CPUs this process may use (respects affinity masks and containers)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def run(source: Source | IterableSource, *, workers: int | None = None,
        scheduler: Any = None, task_size: int | None = None, progress: bool | None = None,
        on_result: Callable[[TaskResult], None] | None = None) -> Summary:
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
    try:
        if isinstance(source, IterableSource):
            summary = _run_stream(source, bar)
        elif is_distributed(scheduler):
            from normstats.engine.distributed import run_on_cluster

            summary = run_on_cluster(source, scheduler, task_size=task_size, bar=bar)
        else:
            summary = _run_graph(source, source.tasks(task_size, workers), workers, scheduler, bar)
    finally:
        bar.close()
    return Summary(skipped=tuple(source.skipped)).merge(summary)


def _run_stream(source: IterableSource, bar: ProgressBar) -> Summary:
    total = Summary()
    for result in source.results():
        if bar.on_result is not None:
            bar.on_result(result)
        total = total.merge(summarize(result.records, result.skipped))
        bar.advance(result.images)
    return total


def _run_graph(source: Source, tasks: Sequence[Task], workers: int, scheduler: Any,
               bar: ProgressBar) -> Summary:
    if not tasks:
        return Summary()
    graph = reduction_graph(tasks, keep_records=bar.on_result is not None)
    scheduler = scheduler or (source.scheduler if workers > 1 else "sync")
    if isinstance(scheduler, str) and scheduler not in SCHEDULERS:
        raise InvalidOptionError(f"unknown scheduler {scheduler!r}; choose one of "
                                 f"{', '.join(SCHEDULERS)} or a Dask scheduler address "
                                 "(tcp://host:8786)")
    options: dict[str, Any] = {"scheduler": scheduler}
    if scheduler in ("threads", "processes"):
        options["num_workers"] = workers
    with bar:
        if scheduler == "processes":
            delivered = _Delivered()
            with process_pool(min(workers, len(tasks))) as pool, delivered:
                try:
                    (summary,) = dask.compute(graph, pool=pool, **options)
                except BrokenProcessPool:
                    summary = None
            if summary is None:
                # The local pool cannot tell which file killed its worker; a local Dask
                # cluster retries each task and isolates a file that kills every worker.
                remaining = [task for index, task in enumerate(tasks)
                             if f"{TASK_PREFIX}-{index}" not in delivered.keys]
                return delivered.summary.merge(
                    _rerun_on_local_cluster(remaining, workers, bar))
        else:
            (summary,) = dask.compute(graph, **options)
    return summary


class _Delivered(Callback):
    """The read tasks a local run finished, and their merged summary, for a rerun."""

    def __init__(self) -> None:
        super().__init__()
        self.keys: set[str] = set()
        self.summary = Summary()

    def _posttask(self, key: Any, result: Any, dsk: Any, state: Any, worker_id: Any) -> None:
        name = str(key[0] if isinstance(key, tuple) else key)
        if name.startswith(TASK_PREFIX):
            self.keys.add(name)
            self.summary = self.summary.merge(as_summary(result))


def _rerun_on_local_cluster(tasks: Sequence[Task], workers: int, bar: ProgressBar) -> Summary:
    """Run the unfinished ``tasks`` on a throw-away local cluster after a local worker died."""
    try:
        from normstats.engine.cluster import local_cluster
        from normstats.engine.distributed import run_distributed
    except ImportError:
        raise NormstatsError(WORKER_DIED) from None
    print("normstats: a decoding worker process died; running again on a local Dask "
          "cluster, which retries its files and skips a file that kills every worker",
          file=sys.stderr)
    # One retry is enough to tell a file that kills every worker from a one-off death.
    with dask.config.set({"distributed.scheduler.allowed-failures": 1}):
        with local_cluster(workers) as client:
            return run_distributed(client, tasks, bar.on_result, bar)


def reduction_graph(tasks: Sequence[Task], keep_records: bool = True) -> Delayed:
    """One read task per source task, summarised in groups, merged by a tree of fan-in 8.

    Without ``keep_records`` a read task returns its `Summary` only, so per-image
    records never travel from the workers to the client and back.
    """
    read = _read if keep_records else _read_summary
    # traverse=False: dask would otherwise unpack every task (a dataclass) field by field
    # looking for nested collections (0.4 s per 4,000 files when files were tuples).
    level = [delayed(read, pure=False)(delayed(task, traverse=False, name=f"normstats-task-{i}"),
                                       dask_key_name=f"{TASK_PREFIX}-{i}")
             for i, task in enumerate(tasks)]
    level = [delayed(_summarize_results)(*level[i:i + _FAN_IN])
             for i in range(0, len(level), _FAN_IN)]
    while len(level) > 1:
        level = [delayed(_merge_summaries)(*level[i:i + _FAN_IN])
                 for i in range(0, len(level), _FAN_IN)]
    return level[0]


def _read(task: Task) -> TaskResult:
    return task.run()


def _read_summary(task: Task) -> Summary:
    return as_summary(task.run())


def as_summary(result: TaskResult | Summary) -> Summary:
    """The `Summary` of a read task's result, whichever form it came back in."""
    if isinstance(result, Summary):
        return result
    return summarize(result.records, result.skipped)


def _summarize_results(*results: TaskResult | Summary) -> Summary:
    return _merge_summaries(*(as_summary(r) for r in results))


def _merge_summaries(*summaries: Summary) -> Summary:
    total = summaries[0]
    for summary in summaries[1:]:
        total = total.merge(summary)
    return total


@contextlib.contextmanager
def process_pool(workers: int) -> Iterator[ProcessPoolExecutor]:
    """A pool of forked workers: no re-import per worker, so small runs start fast.

    Each worker dies with this process (`_worker_start`): a SIGKILLed run leaves no
    orphan decoding on, and none holding the record cache's lock.
    """
    fused.available()  # compile the kernel once here, so forked workers inherit it
    method = "fork" if sys.platform.startswith("linux") else "spawn"
    # Frozen objects are skipped by the workers' garbage collector, so the parent's file
    # list is not copied page by page into every worker. Unfreezing afterwards thaws every
    # frozen object, so when the caller has frozen objects of its own, none are frozen here.
    freeze = gc.get_freeze_count() == 0
    if freeze:
        gc.freeze()
    try:
        with ProcessPoolExecutor(max(1, workers), mp_context=multiprocessing.get_context(method),
                                 initializer=_worker_start, initargs=(os.getpid(),)) as pool:
            yield pool
    finally:
        if freeze:
            gc.unfreeze()


_PR_SET_PDEATHSIG = 1


def _exit_when_orphaned(parent: int, period: float = 1.0) -> None:
    """Poll the parent's pid: when the parent dies its orphans are re-parented, so a
    changed ``getppid()`` means the run is gone and this worker exits at once."""
    while os.getppid() == parent:
        time.sleep(period)
    os._exit(1)


def _worker_start(parent: int) -> None:
    """Tie a pool worker's life to its parent's, and set its process-wide decoding state.

    ``PR_SET_PDEATHSIG`` has the kernel SIGKILL the worker when the parent dies, even by
    SIGKILL (strictly, when the forking thread ends: the pool forks from the thread that
    runs the graph, which outlives the pool); if the parent died before the call, the
    worker already has a new parent and exits at once. The worker is a process of ours,
    so Pillow's own limit is lifted (the policy's is enforced from each header,
    `normstats.sources.decoding.decode`) and Pillow's UserWarnings about damaged files,
    which the skip reasons already word, are silenced.
    """
    if sys.platform.startswith("linux"):
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    else:  # no such call (macOS, BSDs): a thread notices the new parent within a second
        threading.Thread(target=_exit_when_orphaned, args=(parent,), daemon=True,
                         name="normstats-orphan-watch").start()
    if os.getppid() != parent:
        os._exit(1)
    from PIL import Image

    Image.MAX_IMAGE_PIXELS = None
    warnings.simplefilter("ignore", UserWarning)
    warnings.simplefilter("ignore", Image.DecompressionBombWarning)
