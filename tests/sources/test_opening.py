"""What `normstats.sources.opening.open_source` refuses, and how it says so."""

from __future__ import annotations

import os
from fractions import Fraction

import numpy as np
import pytest
import zarr

import normstats
from normstats.errors import InvalidOptionError, NormstatsError
from normstats.sources import open_source


@pytest.mark.parametrize("data", [b"train.npy", bytearray(b"train.npy")])
def test_bytes_are_refused_naming_the_str_path_they_stand_for(data, tmp_path):
    np.save(tmp_path / "train.npy", np.zeros((2, 4, 4, 3), np.uint8))
    refusal = rf"{type(data).__name__} object: .*os\.fsdecode\(path\)"
    with pytest.raises(NormstatsError, match=refusal):
        open_source(data)
    # the way the message names works: the same file given as a str is read
    assert normstats.compute(os.fsdecode(os.fsencode(tmp_path / "train.npy"))).images == 2


@pytest.mark.parametrize("data", [None, 5, 2.5])
def test_an_object_that_is_no_dataset_is_named_with_what_is_read(data):
    with pytest.raises(NormstatsError, match=f"cannot compute statistics of a "
                                             f"{type(data).__name__}: pass a folder"):
        open_source(data)


def test_a_dict_of_splits_is_refused_naming_its_entries():
    images = np.zeros((2, 4, 4, 3), np.uint8)
    with pytest.raises(InvalidOptionError, match=r"^a dict of the entries 'train', 'test' is "
                                                 r"not a dataset: .* data\['train'\] \(or "
                                                 r"list\(data\.values\(\)\) when"):
        open_source({"train": images, "test": images})
    with pytest.raises(InvalidOptionError, match=r"entries 0, 1 is not a dataset: .* data\[0\]"):
        open_source({0: images[0], 1: images[1]})  # its keys as they are
    with pytest.raises(InvalidOptionError, match="^an empty dict: no images"):
        open_source({})
    many = {f"split{i}": images for i in range(10)}
    with pytest.raises(InvalidOptionError, match="'split7' and 2 more is not"):
        open_source(many)


def test_a_loaded_npz_is_refused_and_its_entry_is_read(tmp_path):
    x = np.arange(2 * 4 * 4 * 3, dtype=np.uint8).reshape(2, 4, 4, 3)
    np.savez(tmp_path / "data.npz", x_train=x, y_train=np.arange(2))
    with np.load(tmp_path / "data.npz") as loaded:
        with pytest.raises(InvalidOptionError, match=r"^a numpy NpzFile of the entries "
                                                     r"'x_train', 'y_train' is not a dataset"):
            open_source(loaded)
        # the entry the message names is what a user then passes: exact, as any array
        pixels = x.reshape(-1, 3).tolist()
        assert normstats.compute(loaded["x_train"]).mean == tuple(
            float(Fraction(sum(p[c] for p in pixels), len(pixels) * 255)) for c in range(3))


def test_a_zarr_group_object_is_refused_naming_its_arrays(tmp_path):
    group = zarr.open_group(tmp_path / "store.zarr", mode="w")
    group.create_array("val", data=np.ones((2, 4, 4, 3), np.uint8))
    group.create_array("train", data=np.ones((2, 4, 4, 3), np.uint8))
    with pytest.raises(InvalidOptionError, match=r"^a zarr Group of the entries 'train', "
                                                 r"'val' is not a dataset"):
        open_source(zarr.open(tmp_path / "store.zarr", mode="r"))


def test_an_image_key_where_each_entry_is_one_image_is_refused(tmp_path):
    """It used to be ignored, reading as if it had picked something: an .npz's first
    array, a folder's files."""
    rng = np.random.default_rng(2)
    pixels = rng.integers(0, 256, (3, 4, 4, 3), dtype=np.uint8)
    np.save(tmp_path / "x.npy", pixels)
    np.savez(tmp_path / "two.npz", x_train=pixels, x_test=pixels[:1])
    (tmp_path / "photos").mkdir()
    from PIL import Image

    Image.fromarray(pixels[0]).save(tmp_path / "photos" / "a.png")
    said = r"^--image-key picks the image of samples that hold several fields \(Parquet and " \
           r"Arrow columns, tar members by extension, dict items\); "
    for path, what in (("x.npy", "an array"), ("two.npz", "npz"),
                       ("photos", "a folder of image files"), ("photos/a.png", "image")):
        with pytest.raises(InvalidOptionError, match=said + rf".*{path} \({what}\) holds one "
                                                          r"image an entry"):
            normstats.compute(str(tmp_path / path), image_key="x_test")
    with pytest.raises(InvalidOptionError, match=r"\(an \.npz array is picked as "
                                                 r"PATH\.npz:NAME\)$"):
        normstats.compute(str(tmp_path / "two.npz"), image_key="x_test")
    assert normstats.compute(f"{tmp_path}/two.npz:x_test").images == 1


def test_a_mode_or_layout_that_contradicts_the_data_is_refused(tmp_path):
    """--mode L on an RGB array and --layout NCHW on a folder of PNGs were ignored: the
    report read as if they had applied. A mode that fits (L on one channel, keep) and a
    layout that fits (NHWC on decoded files) still read."""
    from PIL import Image

    rng = np.random.default_rng(6)
    pixels = rng.integers(0, 256, (3, 4, 4, 3), dtype=np.uint8)
    np.save(tmp_path / "rgb.npy", pixels)
    np.save(tmp_path / "gray.npy", pixels[..., 0])
    (tmp_path / "photos").mkdir()
    Image.fromarray(pixels[0]).save(tmp_path / "photos" / "a.png")
    for mode in ("L", "RGBA"):
        with pytest.raises(InvalidOptionError, match=rf"^--mode {mode} converts decoded image "
                           r"files; .*rgb.npy holds 3-channel arrays, read as stored: convert "
                           r"them first$"):
            normstats.compute(str(tmp_path / "rgb.npy"), mode=mode)
    for layout in ("NCHW", "CHW", "NHW"):
        with pytest.raises(InvalidOptionError, match=rf"^--layout {layout} describes arrays; "
                           r".*photos holds image files, each decoded to height x width x "
                           r"channels$"):
            normstats.compute(str(tmp_path / "photos"), layout=layout, cache=False)
    assert normstats.compute(str(tmp_path / "gray.npy"), mode="L").images == 3
    assert normstats.compute(str(tmp_path / "rgb.npy"), mode="keep").images == 3
    assert normstats.compute(str(tmp_path / "photos"), layout="NHWC", cache=False).images == 1


def test_one_pil_image_is_a_one_image_dataset(rng):
    """As one image file's path is: the same numbers as the image's array, counted as one
    item."""
    from PIL import Image

    pixels = rng.integers(0, 256, (6, 5, 3), dtype=np.uint8)
    stats = normstats.compute(Image.fromarray(pixels), workers=1)
    same = normstats.compute(pixels[None], workers=1)
    assert stats.images == 1 and (stats.mean, stats.std) == (same.mean, same.std)
    assert "(1 item, " in stats.source
