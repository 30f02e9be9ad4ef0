"""Statistics and pixel accumulators in one pass: the exact histogram, the mean image.

Records hold numbers per image, not pixels, so what needs the pixels themselves is
accumulated while a task decodes: `PixelSource` wraps a source, and its tasks decode
exactly as the plain ones do (the same streaming decode into reused buffers for image
files, the same stack for arrays), hand every image to the accumulators asked for as it
is decoded, and return a `PixelResult`: the task's records plus each accumulator's value.
The pipeline pools the records as usual and hands each result to ``on_result`` in this
process, where the values are merged exactly. The record cache is not used (cached
records hold no pixels), so asking for a histogram or the mean image costs a decode.

Accumulators by name (`PIXEL_ACCUMULATORS`): ``"histogram"`` (`normstats.maths.histogram`),
``"mean_image"`` and ``"mean_image_std"`` (`normstats.maths.mean_image`).
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from normstats.errors import InvalidOptionError
from normstats.maths import fused
from normstats.maths.histogram import Histogram, full_range
from normstats.maths.masked import valid_values
from normstats.maths.mean_image import MeanImageBuilder
from normstats.maths.records import Records, incompatible
from normstats.results.stats import DatasetStats
from normstats.sources.arrays import ArrayTask, usable_rows
from normstats.sources.base import Task, TaskResult
from normstats.sources.decoding.decode import DecodedImage
from normstats.sources.folder import DecodingTask, records_of_images
from normstats.sources.options import ReadOptions

__all__ = ["PixelResult", "PixelSource", "PixelTask", "PIXEL_ACCUMULATORS",
           "compute_with_pixels"]


class Accumulator(Protocol):
    """What a task feeds its pixels to."""

    def add(self, key: str, pixels: np.ndarray) -> None: ...

    def add_stack(self, key: str, stack: np.ndarray) -> None: ...

    def result(self) -> Any: ...


class _HistogramAccumulator:
    """Exact per-channel histogram of every valid pixel a task decodes (nodata and masked
    values are not counted)."""

    takes_valid = True

    def __init__(self) -> None:
        self.value: Histogram | None = None
        # the count of 8- and 16-bit images over their dtype's whole range (C, 2**bits),
        # kept whole so that each image adds onto it in place (`fused.integer_histogram`):
        # a histogram of its own, cut and merged, cost a 32×32 image ~10 µs, counting it ~5
        self.counts: np.ndarray | None = None
        self.counted: np.dtype | None = None  # their dtype

    def add(self, key: str, pixels: np.ndarray, valid: np.ndarray | None = None) -> None:
        channels = pixels.shape[-1]
        if self.counts is None:
            full = full_range(pixels.dtype, channels)
            if full is not None:
                self.counts = np.zeros((channels, full[0]), np.int64)
                self.counted = pixels.dtype
        if self.counts is not None and pixels.dtype == self.counted and \
                len(self.counts) == channels:
            fused.integer_histogram(pixels, self.counts, valid)
            return
        part = Histogram.from_array(pixels, valid)  # another dtype or channel count
        self.value = part if self.value is None else self.value.add_in_place(part)

    add_stack = add

    def result(self) -> Histogram | None:
        if self.counts is not None:
            _, offset = full_range(self.counted, len(self.counts))
            part = Histogram.trimmed(self.counts, str(self.counted), offset)
            self.value = part if self.value is None else self.value.merge(part)
            self.counts = None
        return self.value


#: Accumulator factories by name (``mean_image_std`` also keeps Σx² for the std).
PIXEL_ACCUMULATORS: dict[str, Callable[[], Accumulator]] = {
    "histogram": _HistogramAccumulator,
    "mean_image": lambda: MeanImageBuilder(with_std=False),
    "mean_image_std": lambda: MeanImageBuilder(with_std=True),
}


def _feed(accumulators: dict[str, Accumulator], key: str, pixels: np.ndarray,
          valid: np.ndarray | None, stack: bool = False) -> None:
    """Hand pixels to every accumulator; with ``valid`` (nodata or a mask left out) only
    to those that leave out the invalid values."""
    for name, accumulator in accumulators.items():
        if valid is not None and not getattr(accumulator, "takes_valid", False):
            raise InvalidOptionError(f"{name} does not leave nodata out: compute it without "
                                     "nodata (no --nodata, files without a nodata tag or "
                                     "mask)")
        add = accumulator.add_stack if stack else accumulator.add
        add(key, pixels) if valid is None else add(key, pixels, valid)


def _valid_of(image: DecodedImage) -> np.ndarray | None:
    """The values of a decoded image that count: None unless nodata (or a mask) leaves
    some out of it."""
    if not image.leaves_values_out:
        return None
    return valid_values(image.pixels, image.nodata, image.mask)


@dataclass(frozen=True)
class PixelResult(TaskResult):
    """A task's records and skipped inputs, plus its accumulators' values by name."""

    values: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class PixelTask:
    """A source's task that also feeds the pixels it decodes to accumulators."""

    inner: Task
    wants: tuple[str, ...]

    @property
    def size(self) -> int:
        return self.inner.size

    def run(self) -> PixelResult:
        accumulators = {name: PIXEL_ACCUMULATORS[name]() for name in self.wants}
        if isinstance(self.inner, ArrayTask):
            result = _run_array(self.inner, accumulators)
        elif isinstance(self.inner, DecodingTask):
            result = _run_streaming(self.inner, accumulators)
        else:
            result = _run_decoded(self.inner, accumulators)
        return PixelResult(result.records, result.skipped,
                           {name: a.result() for name, a in accumulators.items()})


def _run_array(task: ArrayTask, accumulators: dict[str, Accumulator]) -> TaskResult:
    """Read the block once: its records, and its usable images to the accumulators."""
    stack = task.stack()
    result = task.result_of(stack)
    if task.nodata is not None or task.mask is not None:
        valid = task.valid_values(stack)
        _feed(accumulators, f"{task.name}[{task.start}]", stack,
              np.ones(stack.shape, bool) if valid is None else valid, stack=True)
        return result
    usable = usable_rows(stack)
    rows = np.arange(len(stack)) if usable is None else np.flatnonzero(usable)
    if len(rows):
        kept = stack if usable is None else stack[usable]
        _feed(accumulators, f"{task.name}[{task.start + int(rows[0])}]", kept, None,
              stack=True)
    return result


def _run_streaming(task: DecodingTask, accumulators: dict[str, Accumulator]) -> TaskResult:
    """The plain task's own run (the same reads and decodes into reused buffers), each
    image tapped before the next is decoded."""

    def tap(key: str, pixels: np.ndarray, image: DecodedImage | None) -> None:
        _feed(accumulators, key, pixels, None if image is None else _valid_of(image))

    return task.run(tap)


def _run_decoded(task: Any, accumulators: dict[str, Accumulator]) -> TaskResult:
    """Tasks that decode all their images at once (``decode_all``: remote files, items
    of a map-style dataset)."""
    decoded, skipped = task.decode_all()
    for key, image in decoded:
        _feed(accumulators, key, image.pixels, _valid_of(image))
    return TaskResult(records_of_images(decoded), skipped)


class PixelSource:
    """A copy of ``source`` whose tasks also accumulate pixels (``wants``: names of
    `PIXEL_ACCUMULATORS`).

    Examples
    --------
    >>> import numpy as np
    >>> from normstats.sources import open_source
    >>> source = PixelSource(open_source(np.zeros((4, 2, 2, 1), np.uint8)), ("mean_image",))
    >>> source.tasks(task_size=4)[0].run().values["mean_image"].count
    4
    """

    def __init__(self, source: Any, wants: tuple[str, ...]) -> None:
        names = list(dict.fromkeys(_NAMES[name] for name in wants))
        what = " and ".join(names)
        are = "are" if len(names) > 1 or names[0] == "percentiles" else "is"
        if getattr(source, "kind", "images") == "vectors":  # an array, but of no pixels
            raise InvalidOptionError(f"{what} {are} computed for images, and "
                                     f"{source.description} holds vectors (N, d): compute "
                                     "its per-feature statistics without "
                                     f"{'them' if are == 'are' else 'it'}")
        if getattr(source, "kind", "images") != "images" or not hasattr(source, "tasks"):
            raise InvalidOptionError(f"{what} {are} computed for image folders, files, arrays "
                                     f"and map-style datasets, not for {source.description}")
        self.inner = copy.copy(source)
        self.wants = wants
        self._what = what

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def __len__(self) -> int:
        return len(self.inner)

    def tasks(self, task_size: int | None = None, workers: int = 1) -> list[PixelTask]:
        tasks = self.inner.tasks(task_size, workers)
        for task in tasks:
            if not isinstance(task, ArrayTask | DecodingTask) and \
                    not hasattr(task, "decode_all"):
                raise InvalidOptionError(f"{self._what} cannot be computed for "
                                         f"{self.inner.description}")
        return [PixelTask(task, self.wants) for task in tasks]


_NAMES = {"histogram": "percentiles", "mean_image": "the mean image",
          "mean_image_std": "the mean image"}


def compute_with_pixels(data: Any, options: ReadOptions | None, wants: tuple[str, ...],
                        **run: Any) -> tuple[DatasetStats, dict[str, Any]]:
    """`normstats.compute` of ``data`` plus the merged accumulators ``wants`` of the same
    pixels, in one pass.

    ``options`` say how ``data`` is read (default: the defaults); ``run`` are the run
    arguments of `normstats.engine.compute.compute_stats` (workers, scheduler, task_size,
    progress, on_result). The record cache is not used: cached records hold no pixels.
    A Dask array's mean image is a Dask reduction beside its statistics'
    (`normstats.engine.dask.mean_image`); with a histogram, its blocks are read by tasks.

    Examples
    --------
    >>> import numpy as np
    >>> stats, found = compute_with_pixels(np.arange(8, dtype=np.uint8).reshape(2, 2, 2, 1),
    ...                                    None, ("mean_image",))
    >>> stats.images, found["mean_image"].mean().ravel().tolist()
    (2, [2.0, 3.0, 4.0, 5.0])
    """
    from normstats.engine.compute import compute_stats, dask_reduced
    from normstats.sources import open_source

    data, options, on_dask = dask_reduced(data, options or ReadOptions(), run.get("scheduler"))
    if on_dask and "histogram" not in wants:  # the mean image as a Dask reduction too
        from normstats.engine.dask.mean_image import compute_dask_with_mean_image

        (name,) = wants
        stats, totals = compute_dask_with_mean_image(
            data, options, with_std=name == "mean_image_std", workers=run.get("workers"),
            scheduler=run.get("scheduler"))
        return stats, {name: totals}
    source = PixelSource(open_source(data, options=options), wants)
    found: dict[str, Any] = dict.fromkeys(wants)
    user_callback = run.pop("on_result", None)

    # Totals made by a merge here are added into in place (a fresh image's worth of int64
    # totals per task cost the parent as much as a worker's adds); the first task's value
    # is never written into: the caller's ``on_result`` may hold it.
    owned: set[str] = set()
    first: list[Records] = []  # the first task's records, which every later one pools with

    def collect(result: TaskResult) -> None:
        records = result.records
        if records is not None and len(records):
            # images that cannot be pooled are named as the pooled records would name them,
            # before a merge of their pixels' totals says less (histograms of 3 and 1
            # channels, a mean image of another size)
            if not first:
                first.append(records)
            elif records.signature != first[0].signature:
                raise incompatible(first[0], records)
        for name, value in getattr(result, "values", {}).items():
            total = found[name]
            if value is None or total is None:
                found[name] = total if value is None else value
                continue
            found[name] = total.add_in_place(value) if name in owned else total.merge(value)
            owned.add(name)
        if user_callback is not None:
            user_callback(result)

    # the source decodes with its transforms (and fills missing chunks) already: they are
    # not added twice
    opened = options.with_changes(resize=None, center_crop=None, allow_missing_chunks=False)
    stats = compute_stats(source, opened, on_result=collect, cache=False, **run)
    return stats, found
