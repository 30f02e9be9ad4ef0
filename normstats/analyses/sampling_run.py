"""Reading a random sample of images from any source, and sampling to a precision.

`sample_estimate` draws a uniform random subset of a dataset's images (seeded
`numpy.random.Generator`), reads only those, and returns their statistics carrying an
`normstats.results.findings.Estimate` (``stats.estimate``). With
``precision`` it doubles the sample until every 95% half-width is below it (or the
whole dataset has been read, when the estimate is exact and the half-widths are 0).
Samples are nested: a larger sample extends the previous one, so no image is read twice.
"""

from __future__ import annotations

import copy
import dataclasses
from dataclasses import dataclass
from typing import Any

import numpy as np

from normstats.analyses.sampling import estimate_from_records, parse_seed
from normstats.engine.pipeline import run
from normstats.errors import EmptyDatasetError, InvalidOptionError
from normstats.maths.records import Records, Skipped, concat_records
from normstats.results.stats import DatasetStats
from normstats.sources.arrays import ArraySource, ArrayTask
from normstats.sources.base import TaskResult, default_task_size, split_evenly
from normstats.sources.folder import FolderSource

__all__ = ["sample_estimate", "SampleSource", "GroupTask", "DEFAULT_START"]

#: First sample size of ``precision`` mode when no ``--sample`` is given.
DEFAULT_START = 256


@dataclass(frozen=True)
class GroupTask:
    """Several one-image tasks run as one (a sample is scattered over the dataset)."""

    tasks: tuple[Any, ...]

    @property
    def size(self) -> int:
        return len(self.tasks)

    def run(self) -> TaskResult:
        results = [task.run() for task in self.tasks]
        parts = [r.records for r in results if r.records is not None]
        skipped = tuple(s for r in results for s in r.skipped)
        return TaskResult(concat_records(parts) if parts else None, skipped)


def _one_image_tasks(source: Any, indices: np.ndarray) -> list[Any]:
    if isinstance(source, ArraySource):
        data = source.path if source.path and source.scheduler == "processes" else source.array
        name = source.path or "array"
        return [ArrayTask(data, int(i), int(i) + 1, source.layout, name, source.channel_names)
                for i in indices]
    tasks = source.tasks(task_size=1)
    if len(tasks) != len(source):
        raise InvalidOptionError(f"cannot sample single images of {source.description}")
    return [tasks[int(i)] for i in indices]


class SampleSource:
    """The images ``indices`` of ``source`` (a folder, array or any per-image source)."""

    def __init__(self, source: Any, indices: np.ndarray) -> None:
        self.inner, self.indices = source, np.asarray(indices)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def __len__(self) -> int:
        return len(self.indices)

    def tasks(self, task_size: int | None = None, workers: int = 1) -> list[Any]:
        if isinstance(self.inner, FolderSource):
            files = self.inner.walk.files.take(self.indices)
            subset = copy.copy(self.inner)
            subset.walk = dataclasses.replace(self.inner.walk, files=files)
            return subset.tasks(task_size, workers)
        singles = _one_image_tasks(self.inner, self.indices)
        size = task_size or default_task_size(len(singles), workers, 64)
        return [GroupTask(tuple(singles[a:b])) for a, b in split_evenly(len(singles), size)]


def _read(source: Any, indices: np.ndarray, options: dict[str, Any]) -> tuple[Records | None,
                                                                           tuple[Skipped, ...]]:
    parts: list[Records] = []
    skipped: list[Skipped] = []

    user = options.get("on_result")

    def collect(result: TaskResult) -> None:
        if result.records is not None:
            parts.append(result.records)
        skipped.extend(result.skipped)
        if user is not None:
            user(result)

    run(SampleSource(source, indices), **{**options, "on_result": collect})
    return (concat_records(parts) if parts else None), tuple(skipped)


def sample_estimate(source: Any, size: int | None = None, *, seed: int | None = None,
                    precision: float | None = None, scale: float | None = None,
                    channels: tuple[str, ...] | None = None,
                    **run_options: Any) -> DatasetStats:
    """Estimate every statistic of ``source`` from a uniform random sample of its images.

    Parameters
    ----------
    source : Source
        An opened source (`normstats.sources.open_source`); not a streamed iterable.
    size : int, optional
        Images to sample (default 256 with ``precision``; required without it).
    seed : int, optional
        Seed of the `numpy.random.Generator`, a non-negative integer (`parse_seed`); the
        same seed draws the same images. Without one a seed is drawn and recorded in the
        estimate (``estimate.seed``).
    precision : float, optional
        Double the sample until every half-width is below this (reported scale).
    scale, channels
        As in `normstats.compute`.
    run_options
        workers, scheduler, task_size, progress, on_result: see
        `normstats.engine.pipeline.run`.

    Returns
    -------
    DatasetStats
        The statistics of the sampled images, with their ``estimate``.

    Examples
    --------
    >>> import numpy as np
    >>> from normstats.sources import open_source
    >>> data = np.random.default_rng(0).integers(0, 256, (500, 4, 4, 3), dtype=np.uint8)
    >>> e = sample_estimate(open_source(data), 100, seed=1, workers=1).estimate
    >>> e.sampled, e.population, e.max_half_width < 0.02
    (100, 500, True)
    """
    if not hasattr(source, "tasks"):
        raise InvalidOptionError("sampling needs a dataset with random access (a folder or "
                                 "an array), not a streamed iterable")
    if size is None and precision is None:
        raise InvalidOptionError("give a sample size, a precision, or both")
    if precision is not None and not precision > 0:
        raise InvalidOptionError(f"precision must be positive, got {precision}")
    seed = parse_seed(seed)
    population = len(source)
    if seed is None:  # drawn here and reported, so any run can be repeated exactly
        seed = int(np.random.SeedSequence().generate_state(1)[0])
    order = np.random.default_rng(seed).permutation(population)
    target = min(int(size or DEFAULT_START), population)
    records, skipped, taken = None, (), 0
    while True:
        new, new_skipped = _read(source, np.sort(order[taken:target]), run_options)
        records = new if records is None else (concat_records([records, new]) if new else records)
        skipped, taken = skipped + new_skipped, target
        stats = _estimate(records, source, population, skipped, seed, scale, channels)
        estimate = stats.estimate
        if precision is None or estimate.max_half_width < precision or taken == population:
            if size is not None and size > population:
                estimate = dataclasses.replace(estimate, requested=size)
            return dataclasses.replace(stats, estimate=estimate)
        target = min(2 * taken, population)


def _estimate(records: Records | None, source: Any, population: int,
              skipped: tuple[Skipped, ...], seed: int | None, scale: float | None,
              channels: tuple[str, ...] | None) -> DatasetStats:
    if records is None:
        raise EmptyDatasetError(f"no usable image in the sample ({len(skipped)} skipped)",
                                path=source.description)
    # unreadable images are left out: scale the sample's share of them to the population
    taken = len(records) + len(skipped)
    usable = max(len(records), round(population * len(records) / taken))
    stats = estimate_from_records(records, usable, seed=seed, scale=scale, channels=channels,
                                  mode=source.mode, kind=source.kind, source=source.description)
    return dataclasses.replace(stats, skipped=tuple(source.skipped) + skipped)
