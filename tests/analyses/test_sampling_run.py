"""Reading a sample: which tasks read which images, how batches grow, what the result says.

The estimators themselves are checked in ``test_sampling.py``; here every test reads a few
tiny images, so each runs in milliseconds.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from PIL import Image

from normstats.analyses.sampling import choose_images
from normstats.analyses.sampling_run import (
    DEFAULT_START,
    GroupTask,
    SampleSource,
    _one_image_tasks,
    _read,
    sample_estimate,
)
from normstats.errors import EmptyDatasetError, InvalidOptionError
from normstats.maths.records import Skipped, records_from_stack
from normstats.maths.summary import summarize
from normstats.results.stats import DatasetStats
from normstats.sources import open_source
from normstats.sources.arrays import ArraySource, ArrayTask
from normstats.sources.base import TaskResult


def levels(count: int) -> np.ndarray:
    """``count`` 1×2 RGB float images whose values differ image by image."""
    base = np.arange(count, dtype=np.float64)[:, None, None, None]
    return base + np.array([0.0, 0.5])[None, None, :, None] + np.arange(3.0)


def stats_of(data: np.ndarray, rows: np.ndarray, **options: Any) -> DatasetStats:
    return DatasetStats.from_summary(summarize(records_from_stack(data[np.sort(rows)])),
                                     **options)


def test_single_image_tasks_of_an_array_reopen_a_file_only_in_processes(tmp_path: Path) -> None:
    data = levels(5)
    path = str(tmp_path / "x.npy")
    np.save(path, np.moveaxis(data, -1, 1))
    source = ArraySource(path, layout="NCHW", channel_names=("a", "b", "c"))
    assert _one_image_tasks(source, np.array([3, 1])) == [
        ArrayTask(source.array, 3, 4, "NCHW", path, ("a", "b", "c")),
        ArrayTask(source.array, 1, 2, "NCHW", path, ("a", "b", "c"))]
    source.scheduler = "processes"
    assert _one_image_tasks(source, np.array([np.int64(2)])) == [
        ArrayTask(path, 2, 3, "NCHW", path, ("a", "b", "c"))]
    in_memory = ArraySource(data)
    in_memory.scheduler = "processes"
    tasks = _one_image_tasks(in_memory, np.array([4]))
    assert tasks == [ArrayTask(data, 4, 5, "NHWC", "array", None)] and tasks[0].array is data
    assert type(tasks[0].start) is int and type(tasks[0].stop) is int


class Listed:
    """A source of per-image tasks (as a folder is), or of fewer tasks than images."""

    description = "listed things"

    def __init__(self, count: int, per_task: int = 1) -> None:
        self.count, self.per_task, self.asked = count, per_task, []

    def __len__(self) -> int:
        return self.count

    def tasks(self, task_size: int | None = None, workers: int = 1) -> list[Any]:
        self.asked.append(task_size)
        return [f"task {i}" for i in range(0, self.count, self.per_task)]


def test_single_image_tasks_of_other_sources_are_their_one_image_tasks() -> None:
    source = Listed(4)
    assert _one_image_tasks(source, np.array([3, 0])) == ["task 3", "task 0"]
    assert source.asked == [1]
    with pytest.raises(InvalidOptionError) as caught:
        _one_image_tasks(Listed(4, per_task=2), np.array([1]))
    assert str(caught.value) == "cannot sample single images of listed things"


def test_a_group_task_runs_its_tasks_as_one() -> None:
    first = records_from_stack(levels(2), keys=("a", "b"))
    second = records_from_stack(levels(1), keys=("c",))

    class Done:
        def __init__(self, result: TaskResult) -> None:
            self.result = result

        def run(self) -> TaskResult:
            return self.result

    group = GroupTask((Done(TaskResult(first, (Skipped("x", "bad"),))),
                       Done(TaskResult(None, (Skipped("y", "gone"),))),
                       Done(TaskResult(second, ()))))
    result = group.run()
    assert group.size == 3 and result.records.keys == ("a", "b", "c")
    assert [s.path for s in result.skipped] == ["x", "y"]
    empty = GroupTask((Done(TaskResult(None, (Skipped("z", "bad"),))),)).run()
    assert empty.records is None and [s.path for s in empty.skipped] == ["z"]


def test_a_sample_source_groups_its_images_and_delegates_the_rest() -> None:
    source = ArraySource(levels(200), channel_names=("a", "b", "c"))
    sample = SampleSource(source, list(range(0, 200, 2)))
    assert len(sample) == 100 and sample.layout == "NHWC" and sample.kind == "images"
    tasks = sample.tasks(task_size=30)
    assert [t.size for t in tasks] == [30, 30, 30, 10]
    assert [t.start for t in tasks[1].tasks] == list(range(60, 120, 2))
    assert [t.size for t in sample.tasks(workers=2)] == [5] * 20  # ~10 tasks per worker
    assert [t.size for t in SampleSource(source, range(0, 200, 1)).tasks()] == [20] * 10
    big = SampleSource(ArraySource(levels(2000)), np.arange(2000))
    assert [t.size for t in big.tasks()] == [64] * 31 + [16]


def test_a_folder_sample_decodes_only_the_chosen_files(tmp_path: Path) -> None:
    for i in range(6):
        Image.fromarray(np.full((2, 3, 3), 10 * i, np.uint8)).save(tmp_path / f"{i}.png")
    seen: list[str] = []
    source = open_source(tmp_path)
    stats = sample_estimate(source, 3, seed=5, workers=1,
                            on_result=lambda r: seen.extend(r.records.keys))
    chosen = np.sort(np.random.default_rng(5).permutation(6)[:3])
    assert sorted(seen) == sorted(f.path for f in source.walk.files.take(chosen))
    assert stats.images == 3 and len(source) == 6


def test_read_collects_records_and_skipped_and_tells_the_caller(tmp_path: Path) -> None:
    data = levels(6)
    data[[1, 4]] = np.nan
    source = ArraySource(data)
    heard: list[TaskResult] = []
    records, skipped = _read(source, np.array([0, 1, 4, 5]), {"workers": 1,
                                                              "on_result": heard.append})
    assert len(records) == 2 and [s.path for s in skipped] == ["array[1]", "array[4]"]
    assert sum(len(r.skipped) for r in heard) == 2
    none, skipped = _read(source, np.array([1, 4]), {"workers": 1})
    assert none is None and len(skipped) == 2


def test_the_sample_is_the_first_images_of_the_seeded_permutation() -> None:
    data = levels(40)
    stats = sample_estimate(ArraySource(data), 7, seed=11, workers=1, scale=2.0,
                            channels=("x", "y", "z"))
    assert stats == stats_of(data, choose_images(40, 7, np.random.default_rng(11)), scale=2.0,
                             channels=("x", "y", "z"), mode="NHWC",
                             source="array (40, 1, 2, 3) float64")
    assert (stats.scale, stats.channels, stats.kind) == (2.0, ("x", "y", "z"), "images")
    assert stats.source == "array (40, 1, 2, 3) float64"
    estimate = stats.estimate
    assert (estimate.sampled, estimate.population, estimate.seed, estimate.requested) == (
        7, 40, 11, None)


def test_without_a_seed_one_is_drawn_and_recorded() -> None:
    data = levels(30)
    drawn = sample_estimate(ArraySource(data), 5, workers=1)
    seed = drawn.estimate.seed
    assert type(seed) is int and 0 <= seed < 2**32
    again = sample_estimate(ArraySource(data), 5, seed=seed, workers=1)
    assert again == drawn and again.estimate == drawn.estimate


def test_precision_doubles_the_sample_until_strictly_below() -> None:
    data = levels(64)
    first = sample_estimate(ArraySource(data), 4, seed=3, workers=1)
    width = first.estimate.max_half_width
    assert 0 < width < float("inf")
    stopped = sample_estimate(ArraySource(data), 4, seed=3, precision=width * 1.0000001,
                              workers=1)
    assert stopped.estimate.sampled == 4 and stopped == first
    grown = sample_estimate(ArraySource(data), 4, seed=3, precision=width, workers=1)
    assert grown.estimate.sampled > 4
    assert grown.estimate.sampled in (8, 16, 32, 64)
    order = np.random.default_rng(3).permutation(64)
    assert grown == stats_of(data, order[:grown.estimate.sampled], mode="NHWC",
                             source="array (64, 1, 2, 3) float64")


def test_precision_alone_starts_at_256_images() -> None:
    assert DEFAULT_START == 256
    stats = sample_estimate(ArraySource(levels(300)), seed=0, precision=1e9, workers=1)
    assert stats.estimate.sampled == 256 and stats.estimate.requested is None
    small = sample_estimate(ArraySource(levels(20)), seed=0, precision=1e9, workers=1)
    assert small.estimate.sampled == 20 and small.estimate.exact


def test_asking_for_more_than_there_is_reads_everything_and_says_so() -> None:
    data = levels(9)
    stats = sample_estimate(ArraySource(data), 12, seed=1, workers=1)
    assert stats.estimate.requested == 12 and stats.estimate.sampled == 9
    assert stats == stats_of(data, np.arange(9), mode="NHWC",
                             source="array (9, 1, 2, 3) float64")
    assert sample_estimate(ArraySource(data), 9, seed=1, workers=1).estimate.requested is None


def test_a_later_batch_with_no_usable_image_keeps_what_was_read() -> None:
    data = levels(8)
    order = np.random.default_rng(2).permutation(8)
    data[order[2:4]] = np.nan  # the whole second batch
    stats = sample_estimate(ArraySource(data), 2, seed=2, precision=1e-12, workers=1)
    assert stats.estimate.sampled == 6
    assert sorted(s.path for s in stats.skipped) == sorted(f"array[{i}]" for i in order[2:4])


def test_unreadable_images_are_left_out_of_the_population_in_proportion() -> None:
    data = levels(8)
    order = np.random.default_rng(4).permutation(8)
    data[order[0]] = np.nan  # one of the four sampled
    stats = sample_estimate(ArraySource(data), 4, seed=4, workers=1)
    assert stats.images == 3 and stats.estimate.population == 6  # round(8 · 3/4)
    assert [s.path for s in stats.skipped] == [f"array[{order[0]}]"]
    data[order[1:4]] = np.nan
    with pytest.raises(EmptyDatasetError) as caught:
        sample_estimate(ArraySource(data), 4, seed=4, workers=1)
    assert caught.value.path == "array (8, 1, 2, 3) float64"
    assert str(caught.value) == ("array (8, 1, 2, 3) float64: no usable image in the sample "
                                 "(4 skipped)")


def test_the_source_s_own_skipped_inputs_come_first(tmp_path: Path) -> None:
    for i in range(4):
        Image.fromarray(np.full((2, 2, 3), 40 * i, np.uint8)).save(tmp_path / f"{i}.png")
    (tmp_path / "bad.png").write_bytes(b"")
    source = open_source(tmp_path)
    assert [s.path for s in source.skipped] == []
    stats = sample_estimate(source, 5, seed=0, workers=1)
    assert stats.images == 4 and [s.path for s in stats.skipped] == ["bad.png"]
    source.skipped = (Skipped("listed.png", "refused"),)
    stats = sample_estimate(source, 5, seed=0, workers=1)
    assert [s.path for s in stats.skipped] == ["listed.png", "bad.png"]
    assert stats.estimate.population == 4 and stats.mode == "RGB"


def test_refusals_are_one_line() -> None:
    for call, message in (
            (lambda: sample_estimate([np.zeros((2, 2, 3))], 1),
             "sampling needs a dataset with random access (a folder or an array), not a "
             "streamed iterable"),
            (lambda: sample_estimate(ArraySource(levels(3))),
             "give a sample size, a precision, or both"),
            (lambda: sample_estimate(ArraySource(levels(3)), 2, precision=-1.0),
             "precision must be positive, got -1.0")):
        with pytest.raises(InvalidOptionError) as caught:
            call()
        assert str(caught.value) == message


def test_a_folder_sample_is_cut_into_tasks_like_the_folder(tmp_path: Path) -> None:
    for i in range(40):
        Image.fromarray(np.full((1, 1, 3), i, np.uint8)).save(tmp_path / f"{i:02d}.png")
    sample = SampleSource(open_source(tmp_path), np.arange(40))
    assert [len(t.files) for t in sample.tasks(task_size=5)] == [5] * 8
    assert [len(t.files) for t in sample.tasks(workers=3)] == [2] * 20  # ~10 per worker
    assert [len(t.files) for t in sample.tasks()] == [4] * 10
    chosen = SampleSource(open_source(tmp_path), np.array([3, 17, 38]))
    assert [f.path for t in chosen.tasks(task_size=2) for f in t.files] == [
        "03.png", "17.png", "38.png"]


def test_a_sample_of_vectors_is_a_sample_of_vectors() -> None:
    rows = np.arange(80, dtype=np.float64).reshape(40, 2) % 7
    stats = sample_estimate(ArraySource(rows), 10, seed=1, workers=1)
    assert (stats.kind, stats.images, stats.per_image_std) == ("vectors", 10, None)
    chosen = np.sort(np.random.default_rng(1).permutation(40)[:10])
    assert stats.mean == tuple(rows[chosen].mean(axis=0).tolist())
