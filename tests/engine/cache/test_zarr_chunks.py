"""The cache's one-chunk zarr v3 arrays, written and read without zarr, checked against zarr."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import zarr

from normstats.engine.cache.zarr_chunks import read_array, write_array

ARRAYS = {"sums": np.arange(12, dtype=np.int64).reshape(4, 3) - 5,
          "path_bytes": np.frombuffer(b"a.png\0b/c.png", np.uint8),
          "minimum": np.linspace(-1, 1, 9).reshape(3, 3),
          "zeros": np.zeros((5, 3)),
          "cross_sums": np.zeros((4, 0), np.int64)}  # one channel: no pair of channels


def meta(folder: Path) -> dict:
    return json.loads((folder / "zarr.json").read_text())


@pytest.mark.parametrize("compress", [True, False])
@pytest.mark.parametrize("name", list(ARRAYS))
def test_what_normstats_writes_zarr_reads_and_so_does_normstats(tmp_path, name, compress):
    values = ARRAYS[name]
    write_array(tmp_path / name, values, compress)
    by_zarr = zarr.open_array(tmp_path / name, mode="r")[...]
    ours = read_array(tmp_path / name, meta(tmp_path / name))
    for read in (by_zarr, ours):
        assert read.dtype == values.dtype and read.shape == values.shape
        assert np.array_equal(read, values)


@pytest.mark.parametrize("separator", ["/", "."])
@pytest.mark.parametrize("name", ["sums", "path_bytes", "minimum", "zeros"])
def test_what_zarr_writes_normstats_reads_without_zarr(tmp_path, name, separator):
    """zarr's defaults (zstd level 0, a chunk of all fill values not written at all)."""
    values = ARRAYS[name]
    zarr.create_array(tmp_path / name, data=values, chunks=values.shape,
                      chunk_key_encoding={"name": "default", "separator": separator})
    read = read_array(tmp_path / name, meta(tmp_path / name))
    assert read is not None and read.dtype == values.dtype
    assert np.array_equal(read, values)


def test_a_chunk_of_the_wrong_size_is_refused_not_read(tmp_path):
    write_array(tmp_path / "a", ARRAYS["sums"], compress=False)
    (tmp_path / "a" / "c.0.0").write_bytes(b"\0" * 7)
    with pytest.raises(ValueError, match="a chunk of 7 bytes, not 96"):
        read_array(tmp_path / "a", meta(tmp_path / "a"))
    write_array(tmp_path / "b", ARRAYS["sums"])
    (tmp_path / "b" / "c.0.0").write_bytes(b"not zstd at all")
    with pytest.raises(ValueError):
        read_array(tmp_path / "b", meta(tmp_path / "b"))


def test_a_chunk_claiming_more_than_its_array_is_refused(tmp_path):
    """zstd frames say their size: a chunk decoding to more than the array never allocates
    more than the array."""
    from imagecodecs import zstd_encode

    write_array(tmp_path / "a", ARRAYS["sums"])
    (tmp_path / "a" / "c.0.0").write_bytes(zstd_encode(bytes(1 << 20)))
    with pytest.raises(ValueError):
        read_array(tmp_path / "a", meta(tmp_path / "a"))


def test_a_missing_chunk_reads_as_the_fill_value_as_zarr_reads_it(tmp_path):
    """The segment's digest, checked after reading, decides whether that was right
    (tests/engine/cache/test_store.py: a deleted chunk is decoded again)."""
    write_array(tmp_path / "a", ARRAYS["sums"])
    (tmp_path / "a" / "c.0.0").unlink()
    assert np.array_equal(read_array(tmp_path / "a", meta(tmp_path / "a")), np.zeros((4, 3)))


@pytest.mark.parametrize("change", [
    {"codecs": [{"name": "bytes", "configuration": {"endian": "big"}}]},
    {"codecs": [{"name": "bytes", "configuration": {"endian": "little"}},
                {"name": "gzip", "configuration": {"level": 1}}]},
    {"chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [2, 3]}}},
    {"chunk_key_encoding": {"name": "v2", "configuration": {"separator": "."}}},
    {"fill_value": 7}, {"data_type": "int32"}, {"shape": [4, -3]},
    {"storage_transformers": [{"name": "sharding"}]}])
def test_any_other_layout_is_left_to_zarr(tmp_path, change):
    write_array(tmp_path / "a", ARRAYS["sums"])
    assert read_array(tmp_path / "a", {**meta(tmp_path / "a"), **change}) is None


def test_a_cached_run_never_imports_zarr(tmp_path):
    """zarr's import costs more than a warm run of ten thousand files: neither a run that
    fills the cache nor one that reads it may import it."""
    from PIL import Image

    data = tmp_path / "data"
    data.mkdir()
    for i in range(5):
        Image.new("RGB", (4, 4), (i, 2 * i, 3 * i)).save(data / f"{i}.png")
    code = ("import sys, normstats\n"
            "for _ in range(2):\n"
            "    stats = normstats.compute(sys.argv[1], cache=sys.argv[2], workers=1)\n"
            "print(stats.images_cached, 'zarr' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code, str(data), str(tmp_path / "cache")],
                         capture_output=True, text=True, check=True).stdout.split()
    assert out == ["5", "False"]
