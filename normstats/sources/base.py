"""The small protocol every source implements, and what its tasks return.

A source knows which images exist and cuts them into tasks; a task is a small,
picklable value whose ``run()`` reads its images and returns their per-image records
(vectorised over images of one shape) plus the inputs it had to skip. Tasks run on any
Dask scheduler: threads, local processes or a distributed cluster.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from normstats.maths.records import Records, Skipped
from normstats.maths.summary import Summary, summarize

__all__ = ["TaskResult", "Task", "summary_of", "Source", "split_evenly", "default_task_size",
           "cluster_tasks"]


@dataclass(frozen=True)
class TaskResult:
    """The records of one task's images, and the inputs it named and skipped."""

    records: Records | None
    skipped: tuple[Skipped, ...] = ()

    @property
    def images(self) -> int:
        return 0 if self.records is None else len(self.records)


@runtime_checkable
class Task(Protocol):
    """A picklable unit of work: ``run()`` returns a `TaskResult`.

    A task may also have ``summary()``: the `Summary` of its images, what
    ``summarize(run().records, run().skipped)`` gives, made without records where it can
    (`summary_of` calls it when no one keeps the records).
    """

    @property
    def size(self) -> int:
        """Number of images (or files) the task covers, for progress and planning."""

    def run(self) -> TaskResult: ...


def summary_of(task: Task) -> Summary:
    """The `Summary` of a task's images when no one keeps their records: the task's own
    ``summary()`` where it has one (array tasks of 8-bit images make it as they read
    them, without records), else its records summarised.

    Examples
    --------
    >>> import numpy as np
    >>> from normstats.sources import open_source
    >>> (task,) = open_source(np.zeros((4, 2, 2, 3), np.uint8)).tasks()
    >>> summary_of(task).images
    4
    """
    own = getattr(task, "summary", None)
    if own is not None:
        return own()
    result = task.run()
    return summarize(result.records, result.skipped)


@runtime_checkable
class Source(Protocol):
    """What a dataset source offers the pipeline.

    Attributes
    ----------
    description : str
        Where the data comes from, for reports (a path, "array (N, H, W, C)").
    mode : str
        Decode policy or layout that produced the pixels.
    kind : str
        "images" or "vectors" (an (N, d) array: per-feature statistics).
    channel_names : tuple of str or None
        Channel names when the source knows them (R, G, B for decoded RGB).
    scheduler : str
        The local scheduler that suits it: "processes" for decoding, "threads"
        for arrays already in memory.
    skipped : tuple of Skipped
        Inputs named and left out while listing (before any task runs).
    ignored : int
        Files that are not images by name and were not considered (README.txt, labels).
    """

    description: str
    mode: str
    kind: str
    channel_names: tuple[str, ...] | None
    scheduler: str
    skipped: tuple[Skipped, ...]
    ignored: int

    def __len__(self) -> int: ...

    def tasks(self, task_size: int | None = None, workers: int = 1) -> list[Task]: ...


def split_evenly(count: int, task_size: int) -> list[tuple[int, int]]:
    """Cut ``range(count)`` into consecutive ``(start, stop)`` runs of at most ``task_size``.

    Examples
    --------
    >>> split_evenly(10, 4)
    [(0, 4), (4, 8), (8, 10)]
    """
    task_size = max(1, int(task_size))
    return [(start, min(start + task_size, count)) for start in range(0, count, task_size)]


#: How tasks are sized where the sources' default decides: (times each source's preferred
#: size, tasks per worker at least). A local pool sends a task in ~0.1 ms: tasks of a
#: preferred size (~4 MB of files), at least ~10 a worker for an even end. A Dask cluster
#: spends ~4 ms a task (a 2-core Xeon: one round trip through the scheduler 7-11 ms on an
#: idle local cluster; 5,000 256² JPEGs in 33 tasks of 150 on 2 workers took 1.10 s, in 8
#: tasks of 625 0.995 s, where the local pool took 0.90 s), so `cluster_tasks` asks for
#: tasks 4 times that size, at least 4 a worker.
_TASK_SHAPE: ContextVar[tuple[int, int]] = ContextVar("normstats_task_shape", default=(1, 10))
#: `_TASK_SHAPE` on a Dask cluster.
CLUSTER_TASK_SHAPE = (4, 4)


@contextmanager
def cluster_tasks() -> Iterator[None]:
    """Within the block, sources cut their default tasks for a Dask cluster: larger (4 times
    their preferred size), at least 4 a worker rather than 10 (see `_TASK_SHAPE`).

    Examples
    --------
    >>> default_task_size(100_000, 2, 500)
    500
    >>> with cluster_tasks():
    ...     default_task_size(100_000, 2, 500), default_task_size(1_000, 2, 500)
    (2000, 125)
    """
    token = _TASK_SHAPE.set(CLUSTER_TASK_SHAPE)
    try:
        yield
    finally:
        _TASK_SHAPE.reset(token)


def default_task_size(count: int, workers: int, preferred: int) -> int:
    """``preferred`` images a task, but at least ~10 tasks per worker when data is small
    (on a Dask cluster, within `cluster_tasks`: 4 times as many images, at least 4 tasks
    per worker).

    Examples
    --------
    >>> default_task_size(100_000, 2, 500), default_task_size(100, 2, 500)
    (500, 5)
    """
    scale, per_worker = _TASK_SHAPE.get()
    enough_tasks = math.ceil(count / max(1, per_worker * workers))
    return max(1, min(preferred * scale, enough_tasks))
