"""IDX (MNIST) files: raw and gzip, and every way the header can disagree with the file."""

from __future__ import annotations

import gzip
import importlib
from pathlib import Path

import numpy as np
import pytest

import normstats
from normstats.errors import EmptyDatasetError, NormstatsError
from normstats.sources.idx import open_idx

fw = importlib.import_module("format_writers")

GRAY = fw.images(3, 10, 28, 28, 1)[..., 0]


@pytest.mark.parametrize("compressed", [False, True])
def test_matches_the_array_and_names_the_channel(tmp_path: Path, compressed: bool) -> None:
    name = "train-images-idx3-ubyte" + (".gz" if compressed else "")
    stats = normstats.compute(str(fw.write_idx(tmp_path / name, GRAY, compressed)))
    expected = normstats.compute(GRAY[..., None], channels=("L",))
    assert (stats.mean, stats.std, stats.per_image_std_ddof1) == \
        (expected.mean, expected.std, expected.per_image_std_ddof1)
    assert stats.channels == ("L",) and stats.images == 10 and stats.mode == "IDX"


def test_big_endian_int16_is_read_in_native_order(tmp_path: Path) -> None:
    values = (np.arange(2 * 3 * 4).reshape(2, 3, 4) * 100).astype(">i2")
    (tmp_path / "x.idx3").write_bytes(fw.idx_bytes(values, 0x0B))
    stats = normstats.compute(str(tmp_path / "x.idx3"), format="idx", scale=1)
    assert stats.max == (2300.0,) and stats.dtype == "int16"


def _error(path: Path) -> str:
    with pytest.raises(NormstatsError) as caught:
        open_idx(str(path))
    assert str(path) in str(caught.value) and "\n" not in str(caught.value)
    return str(caught.value)


def test_wrong_magic(tmp_path: Path) -> None:
    path = tmp_path / "train-images-idx3-ubyte"
    path.write_bytes(b"\x00\x01\x08\x03" + bytes(100))
    assert "wrong magic number 00010803" in _error(path)


def test_dimensions_disagree_with_size(tmp_path: Path) -> None:
    path = fw.write_idx(tmp_path / "train-images-idx3-ubyte", GRAY)
    path.write_bytes(path.read_bytes()[:-5])
    message = _error(path)
    assert "10 x 28 x 28" in message and "need 7,856 bytes but the file has 7,851" in message


def test_truncated_gz(tmp_path: Path) -> None:
    path = fw.write_idx(tmp_path / "t10k-images-idx3-ubyte.gz", GRAY, compressed=True)
    path.write_bytes(path.read_bytes()[:-40])
    assert "truncated .gz" in _error(path)


def test_gz_holding_less_or_more_than_the_header_says(tmp_path: Path) -> None:
    short = tmp_path / "short-idx3-ubyte.gz"
    short.write_bytes(gzip.compress(fw.idx_bytes(GRAY)[:-1]))
    assert "7,840 bytes of data but the file holds 7,839" in _error(short)
    long = tmp_path / "long-idx3-ubyte.gz"
    long.write_bytes(gzip.compress(fw.idx_bytes(GRAY) + b"x"))
    assert "holds more" in _error(long)


def test_gz_header_claiming_more_than_deflate_can_hold_is_refused_before_allocating(
        tmp_path: Path) -> None:
    path = tmp_path / "bomb-idx3-ubyte.gz"
    header = bytes([0, 0, 8, 3]) + np.array([60000, 28000, 28000], ">u4").tobytes()
    path.write_bytes(gzip.compress(header + bytes(100)))
    assert "more than a" in _error(path)


def test_label_file_is_not_images(tmp_path: Path) -> None:
    path = tmp_path / "train-labels-idx1-ubyte"
    path.write_bytes(fw.idx_bytes(np.arange(10, dtype=np.uint8)))
    assert "holds labels" in _error(path)


@pytest.mark.parametrize("compressed", [False, True])
@pytest.mark.parametrize("shape", [(2, 0, 4), (2, 4, 0), (3, 0, 0), (2, 3, 0, 3)])
def test_a_zero_image_dimension_is_one_error_naming_the_file(tmp_path: Path, shape: tuple,
                                                            compressed: bool) -> None:
    """Images of no pixels have no statistic: an error naming the file, not a crash."""
    path = tmp_path / ("zero-idx3-ubyte" + (".gz" if compressed else ""))
    data = fw.idx_bytes(np.zeros(shape, np.uint8))
    path.write_bytes(gzip.compress(data) if compressed else data)
    dims = " x ".join(map(str, shape))
    assert _error(path) == f"{path}: IDX dimensions {dims} describe images of no pixels"
    with pytest.raises(NormstatsError, match="describe images of no pixels"):
        normstats.compute(str(path), cache=False)


def test_no_images_at_all_is_an_empty_dataset_naming_the_file(tmp_path: Path) -> None:
    path = fw.write_idx(tmp_path / "none-idx3-ubyte", np.zeros((0, 28, 28), np.uint8))
    with pytest.raises(EmptyDatasetError, match=f"^{path}: no usable image"):
        normstats.compute(str(path), cache=False)
