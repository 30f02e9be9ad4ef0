"""`normstats.images`: every reader as a lazy Dask array of exactly the pixels compute reduces."""

from __future__ import annotations

import importlib
import io
from pathlib import Path

import dask.array as da
import numpy as np
import pytest
import zarr
from oracle import assert_matches_oracle, numbers
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
    x = normstats.images(list(stack), task_size=4, on_error="fail", layout="HWC")
    assert x.chunks[0] == (4, 4, 1)
    np.testing.assert_array_equal(x.compute(scheduler="sync"), stack)
    lazy = normstats.images(list(stack), task_size=4, layout="HWC")  # sizes unknown
    np.testing.assert_array_equal(lazy.compute(scheduler="sync"), stack)


# -- provenance: what an array made by images() carries through Dask operations -----------


def _broken_folder(root: Path, pixels: np.ndarray, broken: tuple[int, ...]) -> Path:
    """A folder of ``pixels`` as PNGs, the images at ``broken`` replaced by bad files."""
    fw.write_folder(root, pixels)
    for i in broken:
        (root / f"{i:04d}.png").write_bytes(b"\x89PNG\r\n\x1a\n truncated")
    return root


def test_slice_rechunk_and_map_blocks_keep_the_skipped_files(tmp_path):
    root = _broken_folder(tmp_path / "pngs", RGB, (7, 11))
    kept = list(np.delete(RGB, (7, 11), axis=0))
    x = normstats.images(root, task_size=5)  # reader tasks: images 0-4, 5-9, 10-11
    direct = normstats.compute(root, workers=1)
    assert [s.path for s in direct.skipped] == ["0007.png", "0011.png"]
    names = direct.channels
    for derived in (x[:], x.rechunk({1: 7, 2: 9, 3: 1}), x.map_blocks(np.copy),
                    x.astype(np.uint16).astype(np.uint8)):
        stats = normstats.compute(derived, channels=names, scheduler="sync")
        assert_matches_oracle(stats, kept, 255)
        assert numbers(stats) == numbers(direct)
    # the skipped files of the reader tasks an array runs: only those
    first, rest = x.blocks[:1], x.blocks[1:]
    assert normstats.compute(first, channels=names).skipped == ()
    assert_matches_oracle(normstats.compute(first), list(RGB[:5]), 255)
    assert normstats.compute(rest, channels=names).skipped == direct.skipped


def test_concatenate_of_two_images_arrays_keeps_both_sources(tmp_path):
    other = fw.images(5, 6, 32, 32, 3)
    a = normstats.images(_broken_folder(tmp_path / "a", RGB, (2,)), task_size=4)
    b = normstats.images(_broken_folder(tmp_path / "b", other, (0, 5)), task_size=4)
    both = da.concatenate([a, b, a])  # a twice: its reader tasks run once, named once
    stats = normstats.compute(both, scheduler="threads", workers=2)
    kept_a = list(np.delete(RGB, 2, axis=0))
    assert_matches_oracle(stats, kept_a + list(other[1:5]) + kept_a, 255)
    assert [s.path for s in stats.skipped] == ["0002.png", "0000.png", "0005.png"]
    assert str(tmp_path / "a") in stats.source and str(tmp_path / "b") in stats.source
    first = normstats.compute(both.blocks[:1], scheduler="sync")  # a's first task; b unread
    assert [s.path for s in first.skipped] == ["0002.png"] and first.images == 3


def test_an_images_array_is_known_by_its_graph_not_by_a_registry(tmp_path):
    root = _broken_folder(tmp_path / "pngs", RGB, (3,))
    first = normstats.images(root, task_size=5)
    for seed in range(70):  # more arrays than any registry of recent arrays kept
        normstats.images(fw.images(seed, 2, 4, 4, 3))
    stats = normstats.compute(first[:], workers=1)
    assert stats.source == normstats.compute(root, workers=1).source  # read by the engine
    assert [s.path for s in stats.skipped] == ["0003.png"]
    lazy = normstats.reduce_lazy(first, channels=stats.channels).compute(scheduler="sync")
    assert numbers(lazy) == numbers(stats)  # the same through the Dask graph
