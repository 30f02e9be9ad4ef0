"""Source tasks on this machine: in this process, on threads, or on a fork pool of processes.

A source's run is a flat map and an exact merge: each task reads its images into records
and summarises them where it ran, and the summaries are merged here. That needs no task
graph, so tasks go straight to a `concurrent.futures` executor and their summaries are
merged as they finish, in task order (the merge is exact in any order; task order keeps
the skipped files and the example named by an error the same from run to run). Over the
same fork pool and tasks, Dask's local scheduler cost a folder of 20,000 small PNGs 18%
more than submitting them directly, and importing Dask ~70 ms of every run; Dask stays the
engine of Dask arrays and clusters (`normstats.engine.dask.reduce`,
`normstats.engine.distributed`).

A worker of the local process pool that dies (a decoder crash, the kernel's
out-of-memory killer) sends the unfinished tasks to a throw-away local `dask.distributed`
cluster, which retries them and isolates a file that kills every worker.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator, Sequence
from concurrent.futures import BrokenExecutor, Executor, Future, as_completed
from dataclasses import dataclass

from normstats.engine.progress import ProgressBar
from normstats.engine.task_threads import task_threads
from normstats.errors import InvalidOptionError, NormstatsError
from normstats.maths.records import cross_sums_wanted, wants_cross_sums
from normstats.maths.summary import Summary, summarize
from normstats.sources.base import Task, TaskResult, summary_of

__all__ = ["run_local", "run_in_process", "SCHEDULERS", "WORKER_DIED"]

SCHEDULERS = ("sync", "threads", "processes")
WORKER_DIED = ("a decoding worker process died (a decoder crash, or the system killed it for "
               "lack of memory) and dask.distributed, which would retry its files, is not "
               "installed: pip install 'normstats[distributed]' and run again")


@dataclass(frozen=True)
class _Outcome:
    """What a task sends back: its summary, and its records when the caller wants them."""

    summary: Summary
    result: TaskResult | None


def _run_task(task: Task, keep_records: bool, cross: bool = False) -> _Outcome:
    """Runs where the task runs: read, decode and summarise, so only numbers travel.
    ``cross``: the records hold the channel cross sums (the run asked for the covariance;
    a worker thread or process does not inherit the caller's `cross_sums_wanted`).
    Records no one keeps need not be made (`summary_of`)."""
    with cross_sums_wanted(cross):
        if not keep_records:
            return _Outcome(summary_of(task), None)
        result = task.run()
    return _Outcome(summarize(result.records, result.skipped), result)


def run_local(tasks: Sequence[Task], workers: int, scheduler: str, bar: ProgressBar) -> Summary:
    """Run ``tasks`` on a local ``scheduler`` ("sync", "threads" or "processes") with
    ``workers`` workers, and merge their summaries.

    Examples
    --------
    >>> import numpy as np
    >>> from normstats.sources import open_source
    >>> tasks = open_source(np.zeros((20, 4, 4, 3), np.uint8)).tasks(7)
    >>> run_local(tasks, 2, "threads", ProgressBar(20, enabled=False)).images
    20
    """
    if scheduler not in SCHEDULERS:
        raise InvalidOptionError(f"unknown scheduler {scheduler!r}; choose one of "
                                 f"{', '.join(SCHEDULERS)} or a Dask scheduler address "
                                 "(tcp://host:8786)")
    if scheduler == "sync" or workers == 1 or len(tasks) <= 1:
        return run_in_process(tasks, bar)
    if scheduler == "threads":
        with task_threads(workers) as pool:  # kept from run to run (`task_threads`)
            return _Gathered(pool, tasks, bar).total()
    from normstats.engine.process_pool import process_pool  # a run of few files never forks

    with process_pool(min(workers, len(tasks))) as pool:
        gathered = _Gathered(pool, tasks, bar)
        total = gathered.total()
    if not gathered.lost:
        return total
    # The local pool cannot tell which file killed its worker; a local Dask cluster
    # retries each task and isolates a file that kills every worker.
    remaining = [tasks[index] for index in sorted(gathered.lost)]
    return total.merge(_rerun_on_local_cluster(remaining, workers, bar))


def run_in_process(tasks: Sequence[Task], bar: ProgressBar) -> Summary:
    """The tasks one after the other in this process: no pool, no threads.

    Examples
    --------
    >>> import numpy as np
    >>> from normstats.sources import open_source
    >>> tasks = open_source(np.zeros((5, 2, 2, 1), np.uint8)).tasks(2)
    >>> run_in_process(tasks, ProgressBar(5, enabled=False)).images
    5
    """
    total = Summary()
    keep, cross = bar.on_result is not None, wants_cross_sums()
    for task in tasks:
        total = total.merge(_deliver(_run_task(task, keep, cross), bar))
    return total


def _deliver(outcome: _Outcome, bar: ProgressBar) -> Summary:
    """Hand a finished task to the caller (records) and the bar (counts)."""
    if outcome.result is not None and bar.on_result is not None:
        bar.on_result(outcome.result)
    bar.advance(outcome.summary.images + len(outcome.summary.skipped))
    return outcome.summary


class _Gathered:
    """Every task submitted at once; results delivered as they finish, merged in order.

    A task whose process died is left in ``lost`` (the pool is then broken, and every
    task not yet finished is lost with it); any other error cancels what is queued and
    propagates (``on_error="fail"``, Ctrl-C).
    """

    def __init__(self, pool: Executor, tasks: Sequence[Task], bar: ProgressBar) -> None:
        keep = bar.on_result is not None
        self.bar = bar
        cross = wants_cross_sums()
        self.futures: dict[Future, int] = {pool.submit(_run_task, task, keep, cross): index
                                           for index, task in enumerate(tasks)}
        self.count = len(tasks)
        self.lost: set[int] = set()

    def total(self) -> Summary:
        try:
            return _merge_in_order(self._finished(), self.count)
        except BaseException:
            for future in self.futures:
                future.cancel()
            raise

    def _finished(self) -> Iterator[tuple[int, Summary]]:
        for future in as_completed(self.futures):
            # Forgotten once finished: a future holds its result, and the records of
            # every task of a run (~100 bytes an image) would otherwise live to its end.
            index = self.futures.pop(future)
            try:
                outcome = future.result()
            except BrokenExecutor:  # the pool lost a worker process
                self.lost.add(index)
                continue
            del future
            yield index, _deliver(outcome, self.bar)


def _merge_in_order(finished: Iterator[tuple[int, Summary]], count: int) -> Summary:
    """Merge summaries arriving in any order as if they came in task order."""
    waiting: dict[int, Summary] = {}
    total, following = Summary(), 0
    for index, summary in finished:
        waiting[index] = summary
        while following in waiting:
            total = total.merge(waiting.pop(following))
            following += 1
    for index in sorted(waiting):  # past a lost task: the rest, still in order
        total = total.merge(waiting.pop(index))
    return total


def _rerun_on_local_cluster(tasks: Sequence[Task], workers: int, bar: ProgressBar) -> Summary:
    """Run the unfinished ``tasks`` on a throw-away local cluster after a local worker died."""
    try:
        # distributed first: its config defaults must exist before dask.config.set below,
        # whose exit would otherwise delete the whole "distributed" section it added
        import dask
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
