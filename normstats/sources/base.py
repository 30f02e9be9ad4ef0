"""The small protocol every source implements, and what its tasks return.

A source knows which images exist and cuts them into tasks; a task is a small,
picklable value whose ``run()`` reads its images and returns their per-image records
(vectorised over images of one shape) plus the inputs it had to skip. Tasks run on any
Dask scheduler: threads, local processes or a distributed cluster.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from normstats.maths.records import Records, Skipped

__all__ = ["TaskResult", "Task", "Source", "split_evenly"]


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
    """A picklable unit of work: ``run()`` returns a `TaskResult`."""

    @property
    def size(self) -> int:
        """Number of images (or files) the task covers, for progress and planning."""

    def run(self) -> TaskResult: ...


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


def default_task_size(count: int, workers: int, preferred: int) -> int:
    """``preferred`` images a task, but at least ~10 tasks per worker when data is small.

    Examples
    --------
    >>> default_task_size(100_000, 2, 500), default_task_size(100, 2, 500)
    (500, 5)
    """
    enough_tasks = math.ceil(count / max(1, 10 * workers))
    return max(1, min(preferred, enough_tasks))
