"""Statistics and exact histograms in one pass: sources whose tasks also count pixel values.

`HistogramSource` wraps a folder or array source; its tasks decode as the plain ones
do and return a `HistogramResult`, a `TaskResult` that also carries the task's
`Histogram`. The pipeline pools the records as usual and hands each result to
``on_result`` in this process, where the histograms are merged. The record cache is
not used (cached records hold no pixels), so asking for percentiles costs a decode.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

from normstats.errors import InvalidOptionError
from normstats.maths.histogram import ROBUST_RANGE, Histogram
from normstats.maths.records import records_from_stack
from normstats.results.stats import DatasetStats
from normstats.sources.arrays import ArrayTask, as_nhwc, open_array
from normstats.sources.base import TaskResult
from normstats.sources.folder import FolderTask, records_of_images
from normstats.sources.options import ReadOptions

__all__ = ["HistogramResult", "HistogramSource", "compute_with_histogram", "robust_range"]


@dataclass(frozen=True)
class HistogramResult(TaskResult):
    """A task's records and skipped inputs, plus the histogram of its pixels."""

    histogram: Histogram | None = None


def _merge(total: Histogram | None, part: Histogram | None) -> Histogram | None:
    if part is None:
        return total
    return part if total is None else total.merge(part)


@dataclass(frozen=True)
class FolderHistogramTask:
    """`FolderTask` that also counts the decoded pixel values."""

    inner: FolderTask

    @property
    def size(self) -> int:
        return self.inner.size

    def run(self) -> HistogramResult:
        decoded, skipped = self.inner.decode_all()
        histogram = None
        for _, image in decoded:
            histogram = _merge(histogram, Histogram.from_array(image.pixels))
        return HistogramResult(records_of_images(decoded), skipped, histogram)


@dataclass(frozen=True)
class ArrayHistogramTask:
    """`ArrayTask` that also counts the pixel values of its block."""

    inner: ArrayTask

    @property
    def size(self) -> int:
        return self.inner.size

    def run(self) -> HistogramResult:
        task = self.inner
        array = open_array(task.array) if isinstance(task.array, str) else task.array
        whole = task.layout in ("HWC", "CHW", "HW")
        stack = as_nhwc(array[:] if whole else array[task.start:task.stop], task.layout)
        records = records_from_stack(stack, channel_names=task.channel_names)
        return HistogramResult(records, (), Histogram.from_array(stack))


_WRAPPERS = {FolderTask: FolderHistogramTask, ArrayTask: ArrayHistogramTask}


class HistogramSource:
    """A copy of ``source`` whose tasks also return pixel histograms (folders and arrays).

    Examples
    --------
    >>> import numpy as np
    >>> from normstats.sources import open_source
    >>> type(HistogramSource(open_source(np.zeros((4, 2, 2, 1), np.uint8))).tasks()[0]).__name__
    'ArrayHistogramTask'
    """

    def __init__(self, source: Any) -> None:
        if getattr(source, "kind", "images") != "images" or not hasattr(source, "tasks"):
            raise InvalidOptionError("percentiles are computed for image folders and image "
                                     f"arrays, not for {source.description}")
        self.inner = copy.copy(source)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def __len__(self) -> int:
        return len(self.inner)

    def tasks(self, task_size: int | None = None, workers: int = 1) -> list[Any]:
        tasks = self.inner.tasks(task_size, workers)
        for task in tasks:
            if type(task) not in _WRAPPERS:
                raise InvalidOptionError(f"percentiles are computed for image folders and "
                                         f"arrays, not for {self.inner.description}")
        return [_WRAPPERS[type(task)](task) for task in tasks]


def compute_with_histogram(data: Any, options: ReadOptions | None = None,
                           **run: Any) -> tuple[DatasetStats, Histogram]:
    """`normstats.compute` plus the exact per-channel histogram of the same pixels.

    ``options`` say how ``data`` is read (default: the defaults); ``run`` are the run
    arguments of `compute_stats` (workers, scheduler, task_size, progress, on_result). The
    record cache is not used: cached records hold no pixels.

    Examples
    --------
    >>> import numpy as np
    >>> stats, hist = compute_with_histogram(np.arange(256, dtype=np.uint8).reshape(1, 16, 16, 1))
    >>> stats.images, hist.percentile(50.0)
    (1, (127.5,))
    """
    from normstats.engine.compute import compute_stats
    from normstats.sources import open_source

    options = options or ReadOptions()
    source = HistogramSource(open_source(data, options=options))
    histograms: list[Histogram | None] = [None]
    user_callback = run.pop("on_result", None)

    def collect(result: TaskResult) -> None:
        histograms[0] = _merge(histograms[0], getattr(result, "histogram", None))
        if user_callback is not None:
            user_callback(result)

    # the source decodes with its transforms already: they are not added twice
    opened = options.with_changes(resize=None, center_crop=None)
    stats = compute_stats(source, opened, on_result=collect, cache=False, **run)
    return stats, histograms[0]


def robust_range(stats: DatasetStats, histogram: Histogram,
                 percentiles: tuple[float, float] = ROBUST_RANGE) -> dict[str, tuple[float, ...]]:
    """Per-channel low/high percentiles in the reported scale, for min-max scaling.

    Examples
    --------
    >>> import numpy as np
    >>> s, h = compute_with_histogram(np.arange(201, dtype=np.uint8).reshape(1, 201, 1, 1),
    ...                               ReadOptions(scale=1))
    >>> robust_range(s, h)
    {'p0.5': (1.0,), 'p99.5': (199.0,)}
    """
    return {f"p{q:g}": tuple(v / stats.scale for v in histogram.percentile(q))
            for q in percentiles}
