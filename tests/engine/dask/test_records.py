"""`normstats.records` and `normstats.reduce`: subsets reduced exactly without decoding again."""

from __future__ import annotations

import os
from fractions import Fraction

import dask
import dask.array as da
import numpy as np
import pytest
from oracle import assert_matches_oracle, numbers

import normstats


def test_subset_by_label_equals_computing_that_folder(png_folder):
    root, pixels = png_folder
    rec = normstats.records(root, cache=False, workers=1)
    assert len(rec) == 24 and set(rec.labels) == {"cat", "dog"}
    assert list(rec.keys) == sorted(rec.keys)
    for label in ("cat", "dog"):
        subset = normstats.reduce(rec[rec.labels == label])
        direct = normstats.compute(root / label, workers=1)
        assert numbers(subset) == numbers(direct)
        chosen = [p for i, p in enumerate(pixels) if ("cat" if i % 2 else "dog") == label]
        assert_matches_oracle(subset, chosen, 255)
    assert numbers(normstats.reduce(rec)) == numbers(normstats.compute(root, workers=1))


def test_records_come_from_the_cache_without_decoding(png_folder, tmp_path):
    root, _ = png_folder
    cache = tmp_path / "cache"
    first = normstats.records(root, cache=cache, workers=1)
    second = normstats.records(root, cache=cache, workers=1)
    assert (first.decoded, first.cached) == (24, 0)
    assert (second.decoded, second.cached) == (0, 24)
    assert numbers(normstats.reduce(second[::3])) == numbers(normstats.reduce(first[::3]))


def test_records_of_mixed_sizes_and_skipped_files(png_folder):
    root, _ = png_folder  # the images have three different sizes
    (root / "cat" / "broken.png").write_bytes(b"not a png")
    rec = normstats.records(root, cache=False, workers=1)
    assert [s.path for s in rec.skipped] == ["cat/broken.png"]
    assert [s.path for s in rec[rec.labels == "cat"].skipped] == ["cat/broken.png"]
    assert rec[rec.labels == "dog"].skipped == ()
    assert sorted(set(rec.pixels.compute().tolist())) == [6, 35, 64]


def test_records_of_a_dask_array_keep_indices_and_skip_non_finite(rng):
    x = rng.normal(size=(30, 4, 5, 3))
    x[4, 0, 0, 0] = np.nan
    rec = normstats.records(da.from_array(x, chunks=(7, 4, 5, 1)), scheduler="sync")
    assert rec.keys.tolist() == [i for i in range(30) if i != 4]
    assert [s.path for s in rec.skipped] == ["array[4]"]
    even = rec.keys % 2 == 0
    expected = normstats.compute(np.delete(x, 4, axis=0)[even], workers=1)
    assert numbers(normstats.reduce(rec[even])) == \
        {**numbers(expected), "skipped": rec.skipped}


def test_records_of_an_array_source_and_a_dask_mask(rng):
    stack = rng.integers(0, 256, size=(50, 6, 6, 3), dtype=np.uint8)
    rec = normstats.records(stack)
    assert rec.keys.tolist() == list(range(50))
    mask = da.from_array(rec.keys >= 20, chunks=7)
    assert numbers(normstats.reduce(rec[mask])) == numbers(normstats.compute(stack[20:]))
    with pytest.raises(normstats.EmptyDatasetError):
        normstats.reduce(rec[rec.keys > 100])


def test_reduce_lazy_of_two_record_subsets_in_one_graph(png_folder):
    root, pixels = png_folder
    rec = normstats.records(root, cache=False, workers=1)
    labels = ("cat", "dog")
    lazy = [normstats.reduce_lazy(rec[rec.labels == label]) for label in labels]
    for stats, label in zip(dask.compute(*lazy, scheduler="sync"), labels):
        chosen = [p for i, p in enumerate(pixels) if ("cat" if i % 2 else "dog") == label]
        assert_matches_oracle(stats, chosen, 255)
        assert numbers(stats) == numbers(normstats.reduce(rec[rec.labels == label]))


def test_records_of_a_derived_images_array_name_the_skipped_files(png_folder):
    root, _ = png_folder
    (root / "cat" / "broken.png").write_bytes(b"not a png")
    x = normstats.images(root, resize=8, center_crop=8, task_size=5).map_blocks(np.copy)
    rec = normstats.records(x, scheduler="sync")
    assert len(rec) == 24 and [s.path for s in rec.skipped] == [os.path.join("cat", "broken.png")]
    direct = normstats.compute(root, resize=8, center_crop=8, workers=1)
    assert numbers(normstats.reduce(rec, channels=direct.channels)) == numbers(direct)


@pytest.mark.parametrize("data", [np.zeros((2, 3, 3, 3), np.uint8), "train"])
def test_reduce_of_anything_but_records_is_one_line(data):
    """reduce(array) used to raise AttributeError: 'numpy.ndarray' object has no attribute
    'arrays', from inside the reduction."""
    with pytest.raises(normstats.NormstatsError, match=r"^reduce takes records "
                       r"\(normstats.records\), not (ndarray|str); normstats.compute reads any "
                       r"data$"):
        normstats.reduce(data)


def test_records_of_an_array_keep_its_layout_and_vectors_their_raw_units(rng):
    """A numpy array's records were read again by the shape rule: (30, 8, 8, 2) under
    layout="NHWC" was refused asking for that layout, and vectors (30, 2) became one
    channel L of 1×2 images, whose reduce gave one mean of both features."""
    two = rng.integers(0, 256, (30, 8, 8, 2), dtype=np.uint8)
    kept = normstats.records(two, layout="NHWC")
    assert kept.channel_names == ("c0", "c1")
    assert numbers(normstats.reduce(kept)) == numbers(normstats.compute(two, layout="NHWC"))

    rows = rng.integers(-300, 300, (30, 2)).astype(np.int16)
    for data in (rows, da.from_array(rows, chunks=7)):
        reduced = normstats.reduce(normstats.records(data))
        assert reduced.channels == ("c0", "c1") and reduced.scale == 1.0  # raw, as compute
        assert list(reduced.mean) == [float(Fraction(int(t), 30)) for t in rows.sum(axis=0)]
        assert (reduced.mean, reduced.std) == (normstats.compute(rows).mean,
                                               normstats.compute(rows).std)
        # reported as vectors, as compute reports them: the numpy array's records said
        # "30 images, mode NHWC", a per-image std of 0 and a Normalize line
        assert (reduced.kind, reduced.mode, reduced.per_image_std) == ("vectors", "NC", None)
        assert "30 vectors, 2 features" in str(reduced) and "Normalize" not in str(reduced)


def test_records_of_vectors_leave_missing_values_out_per_feature_as_compute_does(rng):
    """A NaN, an infinity or a value too large to square in a row of float vectors is
    left out of its feature alone, and the infinite and too large ones are named as
    compute names them: a row holding one used to be skipped whole, so the reduced
    records gave other means and counts than compute."""
    rows = rng.normal(0, 3, (40, 3))
    rows[[1, 5, 9], 0] = np.nan
    rows[7, 1], rows[12, 2], rows[20, 1] = np.inf, -np.inf, 1e300
    narrow = np.where(np.abs(rows) > 1e30, np.inf, rows).astype(np.float32)  # no overflow
    for data in (rows, narrow):
        stats = normstats.compute(data)
        kept = normstats.records(data)
        reduced = normstats.reduce(kept)
        assert len(kept.keys) == 40 and reduced.counts == stats.counts == (37, 38, 39)
        assert [s.path for s in kept.skipped] == [s.path for s in stats.skipped]
        assert [s.reason for s in kept.skipped] == [s.reason for s in stats.skipped]
        # float rows merged one by one, compute's in blocks: the float contract
        for name in ("mean", "std", "std_ddof1", "min", "max"):
            assert getattr(reduced, name) == pytest.approx(getattr(stats, name), rel=1e-12)
        assert (reduced.kind, reduced.images, reduced.nodata_images) == ("vectors", 40, None)
    finite = rows[np.isfinite(rows[:, 0]), 0]  # feature 0 without its NaNs: exact mean
    assert normstats.reduce(normstats.records(rows)).mean[0] == pytest.approx(
        float(sum(Fraction(v) for v in finite.tolist()) / len(finite)), rel=1e-15)


def test_records_of_wide_integer_vectors_say_compute_reads_them_exactly(rng):
    """int64 vectors were refused as "int64 arrays have no exact statistics here", which
    compute contradicts: it reads them exactly. The refusal now says so, and its advice
    gives records whose reduce is compute's."""
    rows = rng.integers(-2**40, 2**40, (20, 3))
    with pytest.raises(normstats.InvalidOptionError, match=r"records of int64 vectors are not "
                       r"kept .*: normstats.compute\(x\) gives their per-feature statistics "
                       r"exactly; for records, convert them, x.astype\(np.float64\)"):
        normstats.records(rows)
    exact = normstats.compute(rows)
    assert list(exact.mean) == [float(Fraction(int(t), 20)) for t in
                                [sum(int(v) for v in rows[:, j]) for j in range(3)]]
    reduced = normstats.reduce(normstats.records(rows.astype(np.float64)))
    assert reduced.mean == pytest.approx(exact.mean, rel=1e-12)
    assert reduced.counts == exact.counts == (20, 20, 20)
