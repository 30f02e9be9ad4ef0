"""Source tasks as a Dask graph on a local scheduler: one read task per source task,
summarised in groups, merged by a tree of fan-in 8.

Local runs use processes for decoding folders (Pillow holds the GIL on small images) and
threads for arrays already in memory. A worker of the local process pool that dies
(a decoder crash, the kernel's out-of-memory killer) sends the unfinished tasks to a
throw-away local `dask.distributed` cluster, which retries them and isolates a file that
kills every worker.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from concurrent.futures.process import BrokenProcessPool
from typing import Any

import dask
from dask.callbacks import Callback
from dask.delayed import Delayed, delayed

from normstats.engine.process_pool import process_pool
from normstats.engine.progress import TASK_PREFIX, ProgressBar
from normstats.errors import InvalidOptionError, NormstatsError
from normstats.maths.summary import Summary, summarize
from normstats.sources.base import Source, Task, TaskResult

__all__ = ["run_graph", "reduction_graph", "local_scheduler", "as_summary", "SCHEDULERS"]

SCHEDULERS = ("sync", "threads", "processes")
_FAN_IN = 8
WORKER_DIED = ("a decoding worker process died (a decoder crash, or the system killed it for "
               "lack of memory) and dask.distributed, which would retry its files, is not "
               "installed: pip install 'normstats[distributed]' and run again")


def run_graph(source: Source, tasks: Sequence[Task], workers: int, scheduler: Any,
               bar: ProgressBar) -> Summary:
    """Run ``tasks`` as one Dask graph on a local scheduler (``scheduler`` None: the
    source's preference, "sync" with one worker) and merge their summaries."""
    if not tasks:
        return Summary()
    graph = reduction_graph(tasks, keep_records=bar.on_result is not None)
    scheduler = scheduler or (source.scheduler if workers > 1 else "sync")
    if isinstance(scheduler, str) and scheduler not in SCHEDULERS:
        raise InvalidOptionError(f"unknown scheduler {scheduler!r}; choose one of "
                                 f"{', '.join(SCHEDULERS)} or a Dask scheduler address "
                                 "(tcp://host:8786)")
    options: dict[str, Any] = {"scheduler": local_scheduler(scheduler)}
    if scheduler in ("threads", "processes"):
        options["num_workers"] = workers
    with bar.dask_callback():
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
        # distributed first: its config defaults must exist before dask.config.set below,
        # whose exit would otherwise delete the whole "distributed" section it added
        import distributed  # noqa: F401

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


def local_scheduler(name: Any) -> Any:
    """Dask's get function for a local scheduler name; anything else as it is.

    Handing ``dask.compute`` the function instead of its name skips Dask's look for a
    default ``distributed`` client, which imports ``distributed`` (0.3 s of a 1 s run on a
    handful of files) even when no cluster exists.

    Examples
    --------
    >>> local_scheduler("sync").__name__, local_scheduler("tcp://host:8786")
    ('get_sync', 'tcp://host:8786')
    """
    if name == "sync":
        from dask.local import get_sync

        return get_sync
    if name == "threads":
        from dask.threaded import get

        return get
    if name == "processes":
        from dask.multiprocessing import get

        return get
    return name
