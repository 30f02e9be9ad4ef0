"""Running a source's tasks on a ``dask.distributed`` cluster.

The client submits one future per task (tasks carry file names, never pixels) and
consumes them with ``as_completed``: each result is merged into the running `Summary`
and handed to ``on_result`` (the cache writer) in the client as it arrives, so memory
stays flat and the progress bar moves. Workers summarise their own records; records
travel back only when someone in the client wants them.

Failures:

- a worker that dies mid-task: the scheduler reruns its tasks elsewhere. Nothing
  reaches the client twice (one result per key), so nothing is counted twice.
- a task whose workers die ``allowed-failures + 1`` times ends in ``KilledWorker``
  (its own fault, or a neighbour's on the same worker); its files are queued as
  suspects, one task each, run first and one at a time, and a suspect that kills its
  workers while it is the only suspect in flight is recorded as skipped with the reason.
  One split straight to single files, not a bisection: a worker restart costs seconds,
  a one-file task milliseconds.

Connecting to the cluster is `normstats.engine.cluster`.
"""

from __future__ import annotations

import collections
import dataclasses
import logging
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from normstats.engine.cluster import connect, wait_for_threads, warn_about_malloc_trim
from normstats.engine.progress import TASK_PREFIX, ProgressBar
from normstats.errors import NormstatsError, SkipKind
from normstats.maths.records import Skipped, cross_sums_wanted, wants_cross_sums
from normstats.maths.summary import Summary, summarize
from normstats.results.text_report import printable
from normstats.sources.base import Task, TaskResult, cluster_tasks, summary_of

__all__ = ["run_on_cluster", "run_distributed", "StageTimes", "CRASH_REASON"]

log = logging.getLogger("normstats.engine.distributed")

#: Beginning of the reason recorded for a file that killed its worker every time.
CRASH_REASON = "crashed its worker"
OnResult = Callable[[TaskResult], None]


@dataclass
class StageTimes:
    """Where a distributed run spent its time, printed at the end of the run."""

    listing: float | None = None
    connect: float = 0.0
    first_result: float = 0.0
    wall: float = 0.0
    worker_busy: float = 0.0
    client_results: float = 0.0
    threads: int = 0
    tasks: int = 0
    split: int = 0
    crashed: int = 0

    def render(self) -> str:
        """Two lines: the stages' seconds, then tasks, splits and crashed files."""
        listing = "" if self.listing is None else f"listing {self.listing:.2f} s, "
        busy = self.worker_busy / max(1e-9, self.wall * max(1, self.threads))
        return (f"normstats: stages: {listing}connect {self.connect:.2f} s, first result "
                f"{self.first_result:.2f} s, run {self.wall:.2f} s; workers read+decode "
                f"{self.worker_busy:.2f} s over {self.threads} threads ({busy:.0%} busy); "
                f"client merge+callbacks {self.client_results:.2f} s\n"
                f"normstats: {self.tasks} tasks, {self.split} split after worker crashes, "
                f"{self.crashed} files crashed their worker")


@dataclass(frozen=True)
class TaskOutcome:
    """What a worker sends back: the summary, records if asked for, and its time."""

    summary: Summary
    result: TaskResult
    seconds: float
    #: A file that stopped the run (``on_error="fail"``), raised again on the client.
    error: NormstatsError | None = None


def _run_task(task: Task, keep_records: bool, cross: bool = False) -> TaskOutcome:
    """Runs on a worker: read, decode and summarise one task (with the channel cross sums
    when ``cross``: the client's run asked for the covariance)."""
    started = time.perf_counter()
    try:
        with cross_sums_wanted(cross):
            if keep_records:
                result = task.run()
                summary = summarize(result.records, result.skipped)
            else:  # records no one keeps need not be made
                summary = summary_of(task)
                result = TaskResult(None, summary.skipped)
    except NormstatsError as error:
        # Returned, not raised: a raised error makes every worker log a "Compute Failed"
        # block with a traceback, for what is one line about one file.
        return TaskOutcome(Summary(), TaskResult(None, ()), time.perf_counter() - started,
                           error)
    return TaskOutcome(summary, result, time.perf_counter() - started)


def run_on_cluster(source: Any, scheduler: Any, *, task_size: int | None = None,
                   bar: ProgressBar | None = None) -> Summary:
    """Connect to ``scheduler``, cut ``source`` for the cluster's threads and run it.

    Examples
    --------
    >>> import numpy as np
    >>> from normstats.sources import open_source
    >>> from normstats.engine.cluster import local_cluster
    >>> with local_cluster(1) as client:                       # doctest: +SKIP
    ...     run_on_cluster(open_source(np.zeros((5, 2, 2, 1), np.uint8)), client).images
    5
    """
    times = StageTimes(listing=getattr(source, "walk_seconds", None))
    started = time.perf_counter()
    with connect(scheduler) as client:
        times.threads = wait_for_threads(client)
        if getattr(source, "scheduler", "processes") == "processes" and len(source):
            # only decoding is slowed by it: arrays and empty inputs say nothing
            warn_about_malloc_trim(client)
        times.connect = time.perf_counter() - started
        with cluster_tasks():  # fewer, larger tasks: each costs a round trip
            tasks = source.tasks(task_size, times.threads)
        return run_distributed(client, tasks, None if bar is None else bar.on_result, bar,
                               times)


def run_distributed(client: Any, tasks: Sequence[Task], on_result: OnResult | None = None,
                    progress: ProgressBar | None = None,
                    times: StageTimes | None = None) -> Summary:
    """Run ``tasks`` on the cluster behind ``client`` and merge their exact summaries.

    Parameters
    ----------
    client : distributed.Client
    tasks : sequence of Task
        Picklable tasks (file lists); tasks with a ``files`` field can be split when
        they crash their workers.
    on_result : callable, optional
        Called in this process with each task's `TaskResult` (records included).
    progress : ProgressBar, optional
        Advanced as results arrive; the stage times are printed on its stream at the end.
    times : StageTimes, optional
        Filled in with the run's stage times.

    Returns
    -------
    Summary
        Skipped inputs sorted by path, as a local run lists them.

    Examples
    --------
    >>> import numpy as np
    >>> from normstats.sources import open_source
    >>> tasks = open_source(np.zeros((5, 2, 2, 1), np.uint8)).tasks(2)
    >>> with local_cluster(1) as client:                       # doctest: +SKIP
    ...     run_distributed(client, tasks).images
    5
    """
    times = times or StageTimes(threads=sum(client.nthreads().values()))
    run = _ClusterRun(client, on_result, progress, times)
    try:
        total = run.consume(tasks)
    finally:
        run.cancel()
    times.wall = time.perf_counter() - run.started
    _report(times, progress)
    return dataclasses.replace(total, skipped=tuple(sorted(total.skipped,
                                                           key=lambda s: s.path)))


def _report(times: StageTimes, progress: ProgressBar | None) -> None:
    log.info("%s", times.render())
    if progress is not None and progress.enabled:
        progress.close()
        progress.stream.write(times.render() + "\n")
        progress.enabled = False  # the caller's close() must not add a blank line


def _missing_module(error: BaseException | None) -> str | None:
    """The module whose import failed where a task was unpickled (the scheduler wraps it
    in a RuntimeError), or None for any other failure.

    Examples
    --------
    >>> try:
    ...     try:
    ...         import no_such_module_of_the_user
    ...     except ImportError as cause:
    ...         raise RuntimeError("Error during deserialization of the task graph") from cause
    ... except RuntimeError as error:
    ...     _missing_module(error)
    'no_such_module_of_the_user'
    """
    seen = 0
    while error is not None and seen < 8:  # a chain of causes, never a cycle
        if isinstance(error, ModuleNotFoundError) and error.name:
            return error.name.partition(".")[0]
        error, seen = error.__cause__ or error.__context__, seen + 1
    return None


class _ClusterRun:
    """The client's side of one run: submit, consume as completed, split crashed tasks."""

    def __init__(self, client: Any, on_result: OnResult | None, progress: ProgressBar | None,
                 times: StageTimes) -> None:
        from distributed import as_completed

        self.client, self.on_result, self.progress, self.times = client, on_result, progress, times
        self.token = uuid.uuid4().hex[:12]  # keys unique per run on a shared cluster
        # Without with_results: as_completed(with_results=True) can wait forever on a future
        # that erred (dask/distributed#7331); results are fetched per future instead.
        self.pending = as_completed(loop=client.loop)
        self.tasks: dict[str, tuple[Task, str]] = {}  # key -> (task, label)
        self.suspects: collections.deque[tuple[Task, str]] = collections.deque()
        self.suspect_label: str | None = None  # the one suspect in flight
        self.started = time.perf_counter()
        self.cross = wants_cross_sums()  # the run's choice, sent with every task

    def submit(self, task: Task, label: str, priority: int = 0) -> None:
        key = f"{TASK_PREFIX}-{self.token}-{label}"
        self.tasks[key] = (task, label)
        self.pending.add(self.client.submit(_run_task, task, self.on_result is not None,
                                            self.cross, key=key, retries=0,
                                            priority=priority))

    def _next_suspect(self) -> None:
        """Run single files of crashed tasks one at a time and first: a worker that dies
        then was killed by that file, not by a neighbour sharing the worker."""
        if self.suspect_label is None and self.suspects:
            task, self.suspect_label = self.suspects.popleft()
            self.submit(task, self.suspect_label, priority=1)

    def consume(self, tasks: Sequence[Task]) -> Summary:
        for index, task in enumerate(tasks):
            self.submit(task, str(index))
        self.times.tasks = len(tasks)
        total = Summary()
        for future in self.pending:
            task, label = self.tasks.pop(future.key)
            alone = label == self.suspect_label
            if alone:
                self.suspect_label = None
            if future.status == "error":
                total = total.merge(self._crashed(task, label, future.exception(), alone))
            else:
                outcome = future.result()
                if outcome.error is not None:
                    raise outcome.error
                self.times.first_result = self.times.first_result or \
                    time.perf_counter() - self.started
                total = total.merge(self._deliver(outcome.summary, outcome.result,
                                                  outcome.seconds))
            self._next_suspect()
        return total

    def _deliver(self, summary: Summary, result: TaskResult, seconds: float) -> Summary:
        started = time.perf_counter()
        self.times.worker_busy += seconds
        if self.on_result is not None:
            self.on_result(result)
        if self.progress is not None:
            self.progress.advance(summary.images + len(summary.skipped))
        self.times.client_results += time.perf_counter() - started
        return summary

    def _crashed(self, task: Task, label: str, error: BaseException, alone: bool) -> Summary:
        """Queue the files of a task whose workers kept dying as suspects, one task each;
        a suspect that kills its workers while it runs alone is skipped."""
        from distributed import KilledWorker

        if not isinstance(error, KilledWorker):
            if (missing := _missing_module(error)) is not None:
                raise NormstatsError(
                    f"the cluster cannot load this run's tasks: no module named {missing!r} "
                    "where they are unpickled (the scheduler or a worker). The dataset's code "
                    "must be importable there: install it in their environment, or, for a "
                    f"module of your own, cloudpickle.register_pickle_by_value({missing}) "
                    "before the run ships it with the tasks") from None
            raise error  # a failure of the task itself (on_error="fail", a bug): stop
        files = getattr(task, "files", None)
        if files is None:
            raise NormstatsError(f"a task killed its worker every time and cannot be split: "
                                 f"{error}")
        if alone:
            return self._skip_crashed(files[0].path, error)
        log.info("normstats: a task of %d files killed its workers; retrying them one by "
                 "one", len(files))
        self.times.split += len(files) > 1
        self.suspects.extend((dataclasses.replace(task, files=files[index:index + 1]),
                              f"{label}.{index}") for index in range(len(files)))
        return Summary()

    def _skip_crashed(self, path: str, error: BaseException) -> Summary:
        attempts = getattr(error, "allowed_failures", 0) + 1
        worker = getattr(getattr(error, "last_worker", None), "address", "?")
        log.warning("normstats: %s killed %d workers (last %s); skipping it", printable(path),
                    attempts, worker)
        self.times.crashed += 1
        skipped = Skipped(path, f"{CRASH_REASON} {attempts} times (the worker process died "
                                "reading or decoding it: a decoder crash or out of memory)",
                          SkipKind.TRANSIENT)  # maybe the machine's fault: tried again
        return self._deliver(Summary(skipped=(skipped,)), TaskResult(None, (skipped,)), 0.0)

    def cancel(self) -> None:
        """Release what is still queued (after an error or Ctrl-C)."""
        futures = list(self.pending.futures)
        if futures:
            self.client.cancel(futures)
