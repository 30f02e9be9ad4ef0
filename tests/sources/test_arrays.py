import numpy as np
import pytest
import zarr
from conftest import random_images
from oracle import numbers

import normstats
from normstats import InvalidOptionError, NormstatsError
from normstats.sources.arrays import ArraySource, detect_layout


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


def test_channel_names_are_never_guessed(nhwc):
    assert normstats.compute(nhwc).channels == ("c0", "c1", "c2")
    assert normstats.compute(nhwc, channels=("R", "G", "B")).channels == ("R", "G", "B")
