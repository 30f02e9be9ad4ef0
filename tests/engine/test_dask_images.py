"""`normstats.images`: every reader as a lazy Dask array of exactly the pixels compute reduces."""

from __future__ import annotations

import importlib
import io
from pathlib import Path

import dask.array as da
import numpy as np
import pytest
import zarr
from oracle import numbers
from PIL import Image

import normstats
from normstats.errors import IncompatibleImagesError, UnreadableInputError

fw = importlib.import_module("format_writers")

RGB = fw.images(1, 12, 32, 32, 3)
GRAY = fw.images(2, 12, 28, 28, 1)[..., 0]


def _zarr(path: Path) -> str:
    array = zarr.create_array(str(path), shape=RGB.shape, chunks=(5, 32, 32, 3), dtype="uint8")
    array[:] = RGB
    return str(path)


def _url(name: str) -> str:
    import fsspec  # in the test extra: fail, never skip
    fs = fsspec.filesystem("memory")
    for i, pixels in enumerate(RGB):
        buffer = io.BytesIO()
        Image.fromarray(pixels).save(buffer, "PNG")
        fs.pipe(f"/{name}/{i:04d}.png", buffer.getvalue())
    return f"memory://{name}"


BUILDERS = {
    "array": lambda tmp: (RGB, RGB),
    "npy": lambda tmp: (np.save(tmp / "a.npy", RGB) or str(tmp / "a.npy"), RGB),
    "zarr": lambda tmp: (_zarr(tmp / "a.zarr"), RGB),
    "folder": lambda tmp: (str(fw.write_folder(tmp / "pngs", RGB)), RGB),
    "idx.gz": lambda tmp: (str(fw.write_idx(tmp / "t10k-images-idx3-ubyte.gz", GRAY, True)),
                           GRAY[..., None]),
    "cifar10-bin": lambda tmp: (str(fw.write_cifar_bin(tmp / "data_batch_1.bin", RGB)), RGB),
    "cifar-python": lambda tmp: (str(fw.write_cifar_python(tmp / "data_batch_1", RGB)), RGB),
    "tar": lambda tmp: (str(fw.write_tar(tmp / "shard-000000.tar", RGB)), RGB),
    "tar.gz": lambda tmp: (str(fw.write_tar(tmp / "shard-000000.tar.gz", RGB, True)), RGB),
    "npz": lambda tmp: (str(fw.write_npz(tmp / "d.npz", RGB)), RGB),
    "url": lambda tmp: (_url(tmp.name), RGB),
}


@pytest.mark.parametrize("kind", sorted(BUILDERS))
def test_each_reader_gives_the_pixels_compute_reduces(kind, tmp_path):
    data, pixels = BUILDERS[kind](tmp_path)
    x = normstats.images(data, task_size=5)
    assert isinstance(x, da.Array)
    assert x.chunks[1:] == tuple((n,) for n in pixels.shape[1:])
    assert len(x.chunks[0]) == 3  # one chunk per reader task of 5 images
    np.testing.assert_array_equal(x.compute(scheduler="sync"), pixels)
    expected = numbers(normstats.compute(data, workers=1))
    # untouched: read by the engine itself; rechunked: reduced block by block
    assert numbers(normstats.compute(x, workers=1)) == expected
    names = expected["channels"]
    known = not np.isnan(x.chunks[0][0])
    rechunked = x.rechunk((4, 7, 9, 1) if known else {1: 7, 2: 9, 3: 1})
    assert numbers(normstats.compute(rechunked, channels=names, scheduler="sync")) == expected


def test_unreadable_files_give_unknown_chunks_and_are_named(tmp_path):
    root = fw.write_folder(tmp_path / "pngs", RGB)
    (root / "0003.png").write_bytes(b"\x89PNG\r\n\x1a\n truncated")
    x = normstats.images(root, task_size=5)
    assert all(np.isnan(c) for c in x.chunks[0])
    kept = np.delete(RGB, 3, axis=0)
    np.testing.assert_array_equal(x.compute(scheduler="sync"), kept)
    stats = normstats.compute(x, workers=1)
    assert [s.path for s in stats.skipped] == ["0003.png"]
    derived = x.map_blocks(np.copy)  # another graph: reduced block by block
    assert numbers(normstats.compute(derived, channels=stats.channels))["images"] == 11
    failing = normstats.images(root, task_size=5, on_error="fail")
    assert failing.chunks[0] == (5, 5, 2)
    with pytest.raises(UnreadableInputError, match="0003.png"):
        failing.compute(scheduler="sync")


def test_mixed_sizes_name_two_shapes_and_resize_crop_makes_them_uniform(tmp_path):
    root = tmp_path / "mixed"
    root.mkdir()
    for i, size in enumerate([(20, 30), (24, 24), (30, 18)]):
        Image.fromarray(np.full((*size, 3), 40 * i, np.uint8)).save(root / f"{i}.png")
    with pytest.raises(IncompatibleImagesError, match=r"0\.png is 20×30×3 uint8 but "
                                                      r"(1\.png is 24×24×3|2\.png is 30×18×3)"
                                                      r".*resize.*records"):
        normstats.images(root).compute(scheduler="sync")
    x = normstats.images(root, resize=16, center_crop=12)
    assert x.shape[1:] == (12, 12, 3)
    expected = numbers(normstats.compute(root, resize=16, center_crop=12, workers=1))
    assert numbers(normstats.compute(x[:], channels=("R", "G", "B"))) == expected


def test_an_iterable_is_refused_with_a_reason():
    with pytest.raises(normstats.InvalidOptionError, match="iterable"):
        normstats.images(x for x in [np.zeros((2, 2, 3), np.uint8)])


def test_a_map_style_dataset_is_read_by_index_into_chunks(rng):
    stack = rng.integers(0, 256, (9, 4, 5, 3), dtype=np.uint8)
    x = normstats.images(list(stack), task_size=4, on_error="fail")
    assert x.chunks[0] == (4, 4, 1)
    np.testing.assert_array_equal(x.compute(scheduler="sync"), stack)
    lazy = normstats.images(list(stack), task_size=4)  # items may be skipped: sizes unknown
    np.testing.assert_array_equal(lazy.compute(scheduler="sync"), stack)
