import importlib
import logging
import re
from fractions import Fraction

import dask.array as da
import numpy as np
import pytest
import zarr
from conftest import random_images
from oracle import integer_mean_std, numbers

import normstats
from normstats import InvalidOptionError, NormstatsError
from normstats.sources.arrays import (
    ArraySource,
    detect_layout,
    split_at_chunks,
    split_staggered,
    stack_records,
)
from normstats.sources.zarr_chunks import missing_chunks


@pytest.fixture
def nhwc(rng) -> np.ndarray:
    return np.stack(random_images(rng, 20, sizes=((6, 5),)))


def test_layouts_give_identical_statistics(nhwc):
    reference = numbers(normstats.compute(nhwc))
    nchw = np.ascontiguousarray(nhwc.transpose(0, 3, 1, 2))
    assert numbers(normstats.compute(nchw)) == reference
    assert numbers(normstats.compute(nhwc.transpose(0, 3, 1, 2))) == reference  # strided view
    gray = nhwc[..., 0]
    assert normstats.compute(gray).mean == (reference["mean"][0],)


def test_detect_layout_rule_and_its_override():
    assert detect_layout((5, 28, 28)) == "NHW"
    assert detect_layout((5, 32, 32, 3)) == "NHWC"
    assert detect_layout((5, 3, 32, 32)) == "NCHW"
    assert detect_layout((5, 7)) == "NC"
    with pytest.raises(InvalidOptionError, match="--layout"):
        detect_layout((5, 8, 8, 8))
    stats = normstats.compute(np.zeros((5, 8, 8, 8), np.uint8), layout="NCHW")
    assert len(stats.channels) == 8
    with pytest.raises(InvalidOptionError, match="needs a 3-d array"):
        normstats.compute(np.zeros((5, 8, 8, 8), np.uint8), layout="NHW")


def test_npy_file_is_memory_mapped_and_matches(tmp_path, nhwc):
    path = tmp_path / "images.npy"
    np.save(path, nhwc)
    source = ArraySource(path)
    assert isinstance(source.array, np.memmap)
    reference = numbers(normstats.compute(nhwc))
    assert numbers(normstats.compute(path)) == reference
    assert numbers(normstats.compute(str(path), scheduler="processes", workers=2,
                                     task_size=3)) == reference


def test_pickled_npy_is_refused_without_running_it(tmp_path):
    path = tmp_path / "objects.npy"
    np.save(path, np.array([{"a": 1}], dtype=object), allow_pickle=True)
    with pytest.raises(NormstatsError, match="objects.npy: not a plain .npy array"):
        normstats.compute(path)


def test_zarr_path_and_zarr_array_match_numpy(tmp_path, nhwc):
    store = tmp_path / "images.zarr"
    array = zarr.create_array(store, shape=nhwc.shape, chunks=(7, 6, 5, 3), dtype=nhwc.dtype)
    array[:] = nhwc
    reference = numbers(normstats.compute(nhwc))
    assert numbers(normstats.compute(store, task_size=4)) == reference
    assert numbers(normstats.compute(zarr.open_array(store, mode="r"))) == reference


def test_a_zarr_group_path_names_its_arrays_and_the_named_path_reads(tmp_path, nhwc):
    group = zarr.open_group(tmp_path / "store.zarr", mode="w")
    group.create_array("val", shape=(1, 2, 2, 3), dtype="uint8")
    group.create_array("train", shape=nhwc.shape, dtype=nhwc.dtype)[:] = nhwc
    with pytest.raises(NormstatsError, match=r"a zarr group, not an array: give the path of "
                                             r"one of its arrays \(train, val\), e\.g\. "
                                             rf"{tmp_path}/store\.zarr/train$"):
        normstats.compute(tmp_path / "store.zarr")
    assert numbers(normstats.compute(tmp_path / "store.zarr" / "train")) == \
        numbers(normstats.compute(nhwc))
    zarr.open_group(tmp_path / "empty.zarr", mode="w")
    with pytest.raises(NormstatsError, match="a zarr group without arrays"):
        normstats.compute(tmp_path / "empty.zarr")


def test_non_finite_float_images_are_skipped_and_named(rng):
    images = rng.normal(size=(4, 3, 3, 1))
    images[2, 1, 1, 0] = np.nan
    stats = normstats.compute(images)
    assert [s.path for s in stats.skipped] == ["array[2]"]
    assert stats.images == 3
    assert stats.mean == normstats.compute(images[[0, 1, 3]]).mean


def test_wide_integers_are_refused_with_advice():
    with pytest.raises(normstats.IncompatibleImagesError, match="float64"):
        normstats.compute(np.zeros((2, 3, 3), np.int32))


@pytest.mark.parametrize("dtype", ["datetime64[s]", "timedelta64[ms]", "U3", "O", "V4"])
def test_arrays_of_values_that_are_not_numbers_are_one_line(dtype):
    """A datetime64 array reached numpy's `ValueError: cannot include dtype 'M' in a
    buffer` (its memoryview was asked for while looking for a Dask array): a normstats
    bug on the command line. Every non-numeric dtype now names itself."""
    with pytest.raises(NormstatsError, match=re.escape(f"pixel dtype {np.dtype(dtype)} is not "
                                                           "numeric")):
        normstats.compute(np.zeros((2, 3, 3, 3), dtype))


def test_long_double_values_are_refused_rather_than_rounded():
    """float128 pixels and vectors were read through float64, so 1 and 1 + 2**-60 gave std
    0 instead of 2**-61, without a word. Every path (images, masked, nodata, vectors, Dask)
    refuses them, naming the conversion that accepts the rounding."""
    images = np.ones((2, 2, 2, 1), np.longdouble)
    images[1] += np.longdouble(2) ** -60
    assert images[1, 0, 0, 0] != 1  # this platform's long double holds the difference
    vectors = np.ones((4, 2), np.longdouble)
    vectors[0] += np.longdouble(2) ** -60
    for data, options in ((images, {}), (np.ma.masked_array(images, mask=False), {}),
                          (images, {"nodata": 0}), (vectors, {}),
                          (da.from_array(images, chunks=1), {})):
        with pytest.raises(normstats.IncompatibleImagesError, match=r"^float128 \(long double\) "
                           r"values would be rounded to float64: .*x\.astype\(np\.float64\)"):
            normstats.compute(data, **options)
    assert normstats.compute(images.astype(np.float64)).std == (0.0,)  # the rounding, asked


def test_channel_names_are_never_guessed(nhwc):
    assert normstats.compute(nhwc).channels == ("c0", "c1", "c2")
    assert normstats.compute(nhwc, channels=("R", "G", "B")).channels == ("R", "G", "B")


def test_stack_records_of_more_channels_than_the_kernel_takes_are_exact_int_sums(rng):
    stack = rng.integers(0, 256, (3, 2, 5, 260), dtype=np.uint8)
    records = stack_records(stack)
    wide = stack.astype(object)  # Python ints: the oracle
    assert records.sums.tolist() == wide.sum(axis=(1, 2)).tolist()
    assert records.sums_sq.tolist() == (wide * wide).sum(axis=(1, 2)).tolist()
    assert records.minimum.tolist() == stack.min(axis=(1, 2)).tolist()
    assert records.channel_names == tuple(f"c{i}" for i in range(260))
    with pytest.raises(NormstatsError, match="2 channel names for 260 channels"):
        stack_records(stack, channel_names=("a", "b"))


def test_missing_chunks_of_a_grid_split_along_height_count_each_image_once(tmp_path, rng):
    path = tmp_path / "split.zarr"
    array = zarr.create_array(path, shape=(10, 4, 2, 1), chunks=(3, 2, 2, 1), dtype="uint8")
    array[:] = rng.integers(1, 256, (10, 4, 2, 1), dtype=np.uint8)
    for key in ("c/1/1/0/0", "c/2/0/0/0", "c/2/1/0/0"):  # rows 3-5 (half) and 6-8 (all)
        (path / key).unlink()
    holes = missing_chunks(zarr.open_array(path, mode="r"))
    assert (holes.missing, holes.total, holes.images, holes.rows) == (3, 8, 6, 10)
    assert holes.keys == ("c/1/1/0/0", "c/2/0/0/0", "c/2/1/0/0")
    assert holes.ranges == ((3, 9),)


def test_vectors_in_a_zarr_store_with_a_missing_chunk_are_refused_or_counted(tmp_path):
    path = tmp_path / "vectors.zarr"
    array = zarr.create_array(path, shape=(6, 2), chunks=(2, 2), dtype="float64")
    array[:] = np.arange(1.0, 13.0).reshape(6, 2)
    (path / "c" / "1" / "0").unlink()
    with pytest.raises(NormstatsError, match=r"1 of 3 chunks .*\(c/1/0; images 2-3\)"):
        normstats.compute(path)
    stats = normstats.compute(path, allow_missing_chunks=True)
    assert stats.mean == ((1 + 3 + 0 + 0 + 9 + 11) / 6, (2 + 4 + 0 + 0 + 10 + 12) / 6)
    assert "2 of 6 images read as the fill value 0.0" in stats.source


def test_a_zarr_store_whose_chunk_folder_is_a_link_is_whole(tmp_path, nhwc):
    real = tmp_path / "real.zarr"
    zarr.create_array(real, shape=nhwc.shape, chunks=(7, 6, 5, 3), dtype=nhwc.dtype)[:] = nhwc
    linked = tmp_path / "linked.zarr"
    linked.mkdir()
    (linked / "zarr.json").write_bytes((real / "zarr.json").read_bytes())
    (linked / "c").symlink_to(real / "c")  # chunks kept elsewhere, as on shared storage
    (real / "c" / "loop").symlink_to(real)  # and a link loop, walked once
    assert numbers(normstats.compute(linked)) == numbers(normstats.compute(nhwc))


@pytest.mark.parametrize("count, workers, task_size", [
    (50_000, 2, 12_500), (50_000, 3, 8_334), (1_000_003, 2, 21_845), (7, 2, 2), (5, 4, 1),
    (3, 2, 1), (1, 2, 1), (100, 1, 25)])
def test_staggered_tasks_cover_every_image_once_and_keep_workers_out_of_step(
        count, workers, task_size):
    """Consecutive and non-empty, covering the array; with several workers and images
    enough, the first ``workers - 1`` tasks grow by 1 / workers of a task and as many at
    the end shrink, so no two workers finish a task at once."""
    tasks = split_staggered(count, workers, task_size)
    sizes = [b - a for a, b in tasks]
    assert tasks[0][0] == 0 and tasks[-1][1] == count and min(sizes) >= 1
    assert all(a[1] == b[0] for a, b in zip(tasks, tasks[1:]))
    if workers > 1 and count >= 4 * workers * task_size:
        steps = [round(workers * size / max(sizes)) for size in sizes]
        assert steps[:workers] == list(range(1, workers + 1))
        assert steps[-workers:] == list(range(workers, 0, -1))
        assert set(steps[workers - 1:1 - workers]) == {workers}


def test_arrays_are_cut_into_staggered_tasks_unless_a_task_size_is_given():
    """One task's worth of images a worker, staggered (the workers summarise apart); at
    most 64 MB a task."""
    source = ArraySource(np.zeros((50_000, 32, 32, 3), np.uint8))
    assert [t.size for t in source.tasks(workers=2)] == [12_500, 25_000, 12_500]
    assert [t.size for t in source.tasks(10_000, workers=2)] == [10_000] * 5
    large = ArraySource(np.zeros((100_000, 32, 32, 3), np.uint8)).tasks(workers=2)
    assert [t.size for t in large] == [10_000, *[20_000] * 4, 10_000]  # 61 MB at most


@pytest.mark.parametrize(("count", "rows", "per_image", "workers"), [
    (50_000, 2_000, 3_072, 2), (10, 3, 1, 2), (7, 10, 1, 4), (1_000, 1, 40_000_000, 2),
    (999, 100, 64, 1)])
def test_zarr_tasks_are_whole_chunks_covering_every_image_once(count, rows, per_image,
                                                                workers):
    """No task starts or stops inside a chunk (which two tasks would then both decode);
    about 16 MB a task and two tasks a worker where the chunks allow."""
    tasks = split_at_chunks(count, rows, per_image, workers)
    assert tasks[0][0] == 0 and tasks[-1][1] == count
    assert all(a[1] == b[0] for a, b in zip(tasks, tasks[1:]))
    assert all(start % rows == 0 for start, _ in tasks)
    chunks = -(-count // rows)
    assert len(tasks) >= min(chunks, 2 * workers)
    assert all(stop - start <= max(rows, (16 << 20) // per_image) for start, stop in tasks)


def test_a_zarr_array_is_read_in_tasks_of_whole_chunks_or_shards(tmp_path, rng):
    images = rng.integers(0, 256, (50, 4, 4, 3), dtype=np.uint8)
    plain = zarr.create_array(tmp_path / "plain.zarr", shape=images.shape,
                              chunks=(6, 4, 4, 3), dtype="uint8")
    sharded = zarr.create_array(tmp_path / "sharded.zarr", shape=images.shape,
                                chunks=(2, 4, 4, 3), shards=(8, 4, 4, 3), dtype="uint8")
    reference = numbers(normstats.compute(images))
    for array, rows in ((plain, 6), (sharded, 8)):
        array[:] = images
        bounds = [(t.start, t.stop) for t in ArraySource(array).tasks(workers=2)]
        assert all(start % rows == 0 for start, _ in bounds) and bounds[-1][1] == 50
        assert numbers(normstats.compute(array, workers=2)) == reference


def test_a_dask_array_that_only_reads_a_zarr_array_is_read_by_zarr_here(tmp_path, rng):
    """``da.from_zarr(store)`` on a local scheduler: zarr's own reads, no Dask task; any
    operation on it, or a cluster, keeps it a Dask reduction. The same numbers."""
    from dask.callbacks import Callback

    from normstats.engine.compute import dask_reduced
    from normstats.sources.options import ReadOptions

    images = rng.integers(0, 256, (30, 4, 5, 3), dtype=np.uint8)
    store = zarr.create_array(tmp_path / "x.zarr", shape=images.shape, chunks=(7, 4, 5, 3),
                              dtype="uint8")
    store[:] = images
    reference = numbers(normstats.compute(images))
    ran = []
    with Callback(pretask=lambda key, *_: ran.append(key)):
        for lazy in (da.from_zarr(str(tmp_path / "x.zarr")), da.from_array(store)):
            for scheduler in (None, "threads", "sync"):
                assert numbers(normstats.compute(lazy, scheduler=scheduler)) == reference
        assert ran == []
        derived = da.from_zarr(store)[:30:1] + 0
        assert numbers(normstats.compute(derived, scheduler="threads")) == reference
        assert ran != []
    options = ReadOptions()
    assert dask_reduced(da.from_zarr(store), options, "threads")[0] is store
    assert dask_reduced(da.from_zarr(store), options, "tcp://127.0.0.1:8786")[2] is True


def test_dask_arrays_of_unknown_lengths_are_read_where_a_source_cuts_rows(rng):
    """``x[mask]`` has NaN lengths. The percentiles, a sample and vectors cut it by row: they
    used to raise ``ValueError: cannot convert float NaN to integer``."""
    images = rng.integers(0, 256, (30, 4, 5, 3), dtype=np.uint8)
    keep = np.arange(30) % 3 != 0
    lazy = da.from_array(images, chunks=(7, 4, 5, 3))[da.from_array(keep, chunks=7)]
    assert np.isnan(lazy.shape[0])
    got = normstats.compute(lazy, percentiles=True, workers=1)
    assert (list(got.mean), list(got.std)) == integer_mean_std(list(images[keep]), 255)
    assert got.percentiles == normstats.compute(images[keep], percentiles=True).percentiles
    assert "(20, 4, 5, 3)" in got.source
    sampled = normstats.compute(lazy, sample=8, seed=2, workers=1)
    assert numbers(sampled) == numbers(normstats.compute(images[keep], sample=8, seed=2))

    rows = rng.integers(-1000, 1000, (40, 3))  # integer features: exact sums
    vectors = da.from_array(rows, chunks=(9, 3))
    stats = normstats.compute(vectors[vectors[:, 0] > 0], covariance=True)
    positive = rows[rows[:, 0] > 0]
    assert list(stats.mean) == [float(Fraction(int(t), len(positive)))
                                for t in positive.sum(axis=0)]
    assert stats.covariance == normstats.compute(positive, covariance=True).covariance
    floats = da.from_array(rows / 7, chunks=(9, 3))
    assert numbers(normstats.compute(floats[floats[:, 0] > 0])) == \
        numbers(normstats.compute(positive / 7))


def test_torch_images_a_few_pixels_wide_read_as_channels_last_are_named(rng, caplog):
    """(N, 3, H, 4): torch's RGB images 4 pixels wide, which the 4-d rule reads as channels
    last (4 channels of 3-pixel-high images, the report showing only c0..c3). One line says
    how to read them, for (N, 1, H, 4) too; with layout='NCHW' they equal their oracle, and
    the shapes the rule reads without doubt stay quiet."""
    images = rng.integers(0, 256, (5, 8, 4, 3), dtype=np.uint8)
    torch_like = np.ascontiguousarray(images.transpose(0, 3, 1, 2))
    with caplog.at_level(logging.WARNING, logger="normstats.sources"):
        read = normstats.compute(torch_like)
    assert [r.getMessage() for r in caplog.records] == [
        "normstats: an array of shape (5, 3, 8, 4) is read as NHWC (4 channels on the last "
        "axis), the rule for 4-d arrays; for images of 3 channels on axis 1 (N, C, H, W) pass "
        "layout='NCHW' (--layout)"]
    assert len(read.channels) == 4
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="normstats.sources"):
        told = normstats.compute(torch_like, layout="NCHW")
        for quiet in (images, np.zeros((5, 3, 8, 8), np.uint8), images[:, :4]):
            normstats.compute(np.ascontiguousarray(quiet))
        grey = normstats.compute(torch_like[:, :1])  # (5, 1, 8, 4): one line too
    assert [r.getMessage()[-80:] for r in caplog.records] == [
        "the rule for 4-d arrays; for images of 1 channel on axis 1 (N, C, H, W) pass "
        "layout='NCHW' (--layout)"[-80:]]
    assert len(grey.channels) == 4
    assert (list(told.mean), list(told.std)) == integer_mean_std(list(images), 255)


def test_a_3d_array_shaped_like_one_image_is_read_by_the_rule_and_the_line_says_so(
        rng, caplog, tmp_path):
    """``(H, W, 3)`` from Pillow and ``(3, H, W)`` from torch or rasterio are read as grey
    images (N, H, W) by the 3-d rule, which the report shows only by its counts: one line
    on stderr says how to read one image, which then equals its oracle."""
    image = rng.integers(0, 256, (6, 5, 3), dtype=np.uint8)
    planes = np.ascontiguousarray(image.transpose(2, 0, 1))
    expected = integer_mean_std([image], 255)
    for array, layout, words in ((image, "HWC", "6 grey images"),
                                 (planes, "CHW", "3 grey images")):
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="normstats.sources"):
            grey = normstats.compute(array)
        assert [r.getMessage() for r in caplog.records] == [
            f"normstats: an array of shape {array.shape} is read as {words} (N, H, W), the "
            f"rule for 3-d arrays; for one image of 3 channels ({', '.join(layout)}) pass "
            f"layout='{layout}' (--layout)"]
        assert grey.channels == ("L",) and grey.images == array.shape[0]
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="normstats.sources"):
            one = normstats.compute(array, layout=layout)
            normstats.compute(array, layout="NHW")
        assert caplog.records == [] and (list(one.mean), list(one.std)) == expected

    fw = importlib.import_module("format_writers")
    idx = fw.write_idx(tmp_path / "t10k-images-idx3-ubyte", image, False)  # (N, H, W) by format
    with caplog.at_level(logging.WARNING, logger="normstats.sources"):
        for quiet in (rng.integers(0, 256, (5, 28, 28), dtype=np.uint8), planes[:1], str(idx)):
            normstats.compute(quiet)
    assert caplog.records == []


@pytest.mark.parametrize("case", ["uint8", "uint8 nodata", "uint8 masked", "uint16",
                                  "float with NaN", "uint8 200 channels"])
def test_an_array_tasks_summary_is_its_records_summary(case):
    """`ArrayTask.summary` (what a run takes when no one keeps the records): straight from
    the pass over 8-bit images where every value counts, else the records summarised;
    either way the summary of the task's records, skipped images included."""
    from normstats.maths.summary import summarize
    from normstats.sources.base import summary_of

    rng = np.random.default_rng(3)
    data = rng.integers(0, 256, (12, 5, 4, 3)).astype(np.uint16 if case == "uint16"
                                                       else np.uint8)
    options = {}
    if case == "uint8 nodata":
        options["nodata"] = 7
    elif case == "uint8 masked":
        data = np.ma.masked_array(data, mask=data > 200)
    elif case == "float with NaN":
        data = data.astype(np.float32)
        data[4, 1, 1, 0] = np.nan
    elif case == "uint8 200 channels":
        data = rng.integers(0, 256, (3, 2, 2, 200)).astype(np.uint8)
        options["layout"] = "NHWC"
    for task in ArraySource(data, **options).tasks(task_size=5):
        result = task.run()
        assert summary_of(task) == task.summary() == summarize(result.records, result.skipped)
    if case == "float with NaN":
        assert [s.path for s in summary_of(ArraySource(data).tasks(task_size=5)[0]).skipped] \
            == ["array[4]"]


def test_a_run_that_keeps_no_record_of_8_bit_images_makes_none(monkeypatch):
    """compute() of a uint8 array (threads or in process) takes the summary pass, no
    records; a caller that asks for the records (on_result) gets them, and the same
    statistics."""
    from normstats.maths import fused

    data = np.random.default_rng(4).integers(0, 256, (400, 8, 8, 3), dtype=np.uint8)
    expected = normstats.compute(data, workers=1)
    real = fused.uint8_moments

    def no_records(stack):
        assert len(stack) == 0, "records made that no one keeps"
        return real(stack)  # records of no image: the summary's signature
    monkeypatch.setattr(fused, "uint8_moments", no_records)
    assert normstats.compute(data, workers=1) == expected
    assert normstats.compute(data, workers=2, task_size=50) == expected
    monkeypatch.setattr(fused, "uint8_moments", real)
    kept = []
    assert normstats.compute(data, workers=2, task_size=50, on_result=kept.append) == expected
    assert sum(len(result.records) for result in kept) == 400
