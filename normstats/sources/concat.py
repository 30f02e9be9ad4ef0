"""Several sources read as one dataset: CIFAR-10's five training batches, a list of shards."""

from __future__ import annotations

from collections.abc import Sequence

from normstats.errors import NormstatsError
from normstats.maths.records import Skipped
from normstats.sources.base import Source, Task

__all__ = ["ConcatSource"]


class ConcatSource:
    """The images of ``parts`` in order, as one source (tasks never span two parts).

    Images that cannot be pooled (different channels or bit depth) are refused by the
    reduction, as for any source.

    Examples
    --------
    >>> import numpy as np
    >>> from normstats.sources.arrays import ArraySource
    >>> a, b = ArraySource(np.zeros((3, 2, 2), np.uint8)), ArraySource(np.ones((2, 2, 2), np.uint8))
    >>> source = ConcatSource([a, b], "two arrays")
    >>> len(source), len(source.tasks(task_size=2))
    (5, 3)
    """

    def __init__(self, parts: Sequence[Source], description: str) -> None:
        if not parts:
            raise NormstatsError("no files to read", path=description)
        self.parts = tuple(parts)
        first = self.parts[0]
        self.description = description
        self.mode, self.kind, self.channel_names = first.mode, first.kind, first.channel_names
        self.scheduler = "processes" if any(p.scheduler == "processes" for p in parts) \
            else "threads"
        self.skipped: tuple[Skipped, ...] = tuple(s for p in self.parts for s in p.skipped)
        self.ignored = sum(p.ignored for p in self.parts)

    def __len__(self) -> int:
        return sum(len(part) for part in self.parts)

    def tasks(self, task_size: int | None = None, workers: int = 1) -> list[Task]:
        return [task for part in self.parts for task in part.tasks(task_size, workers)]
