"""Arrays at their edges: zarr stores with missing or damaged chunks, images with no pixels,
vectors with no features, more than 128 uint8 channels, NaN in conditioning, float16/32.

Every case is fed exactly as a user meets it (a path, a zarr array, ``da.from_zarr``, the
command line) and compared with an exact oracle (`tests/oracle.py`) or one error line.
"""

from __future__ import annotations

import json
import shutil
import warnings
from fractions import Fraction
from pathlib import Path

import dask.array as da
import numpy as np
import pytest
import zarr
from click.testing import CliRunner
from oracle import assert_matches_oracle, exact_stats

import normstats
from normstats.errors import NormstatsError, UnreadableInputError
from normstats_cli import main

FILL = 7  # a fill value that is not 0, so the oracle tells fill values from zeros


def _store(path: Path, images: np.ndarray, **options) -> Path:
    """``images`` written to a zarr v3 store at ``path``, 4 images a chunk."""
    array = zarr.create_array(path, shape=images.shape, chunks=(4, *images.shape[1:]),
                              dtype=images.dtype, fill_value=FILL, **options)
    array[:] = images
    return path


@pytest.fixture
def images(rng) -> np.ndarray:
    # values 10..255: no chunk holds only the fill value, so zarr writes every chunk
    return rng.integers(10, 256, (20, 3, 5, 3), dtype=np.uint8)


@pytest.fixture
def holed(tmp_path, images) -> Path:
    """A store of 20 images whose third chunk (images 8-11) was lost."""
    path = _store(tmp_path / "holed.zarr", images)
    (path / "c" / "2" / "0" / "0" / "0").unlink()
    return path


_REFUSAL = ("1 of 5 chunks are missing from the zarr store (c/2/0/0/0; images 8-11): zarr "
            f"would read them as the fill value {FILL}, so 4 of 20 images would be counted as "
            "made of it. Copy the store again if files were lost; if zarr left those chunks "
            "out because they held only the fill value (write_empty_chunks=False), pass "
            "--allow-missing-chunks (allow_missing_chunks=True)")


def test_a_zarr_store_missing_one_chunk_is_refused_naming_it(holed):
    with pytest.raises(UnreadableInputError) as path_error:
        normstats.compute(holed)
    assert str(path_error.value) == f"{holed}: {_REFUSAL}"
    for given in (zarr.open_array(holed, mode="r"), da.from_zarr(str(holed))):
        with pytest.raises(UnreadableInputError) as object_error:
            normstats.compute(given)
        assert str(object_error.value) == f"{holed}: {_REFUSAL}"
    with pytest.raises(UnreadableInputError, match="c/2/0/0/0"):
        normstats.images(holed)


def test_allowed_missing_chunks_give_the_oracle_of_the_fill_values_and_say_so(holed, images):
    filled = images.copy()
    filled[8:12] = FILL
    note = (f"4 of 20 images read as the fill value {FILL} from 1 missing chunk of the zarr "
            "store {}(c/2/0/0/0; images 8-11): allow_missing_chunks")
    stats = normstats.compute(holed, allow_missing_chunks=True)
    assert_matches_oracle(stats, list(filled), 255)
    assert stats.source == f"{holed} ({note.format('')})"
    assert json.loads(stats.to_json())["source"] == stats.source
    assert f"({note.format('')})" in str(stats)
    for given in (zarr.open_array(holed, mode="r"), da.from_zarr(str(holed)),
                  normstats.images(holed, allow_missing_chunks=True)):
        stats = normstats.compute(given, allow_missing_chunks=True)
        assert_matches_oracle(stats, list(filled), 255)
        assert "4 of 20 images read as the fill value 7" in stats.source


def test_a_store_claiming_a_million_images_with_eight_written_is_refused(tmp_path, rng):
    path = tmp_path / "claims.zarr"
    array = zarr.create_array(path, shape=(1_000_000, 2, 2, 1), chunks=(1, 2, 2, 1),
                              dtype="uint8")
    array[:8] = rng.integers(1, 256, (8, 2, 2, 1), dtype=np.uint8)
    with pytest.raises(UnreadableInputError) as error:
        normstats.compute(path)
    assert str(error.value).startswith(
        f"{path}: 999,992 of 1,000,000 chunks are missing from the zarr store (c/8/0/0/0, "
        "c/9/0/0/0, c/10/0/0/0, ...; images 8-999999): zarr would read them as the fill value "
        "0, so 999,992 of 1,000,000 images would be counted as made of it.")


def test_a_small_claiming_store_allowed_counts_every_claimed_image(tmp_path, rng):
    path = tmp_path / "claims.zarr"
    array = zarr.create_array(path, shape=(1000, 2, 2, 1), chunks=(8, 2, 2, 1), dtype="uint8")
    written = rng.integers(1, 256, (8, 2, 2, 1), dtype=np.uint8)
    array[:8] = written
    stats = normstats.compute(path, allow_missing_chunks=True)
    assert_matches_oracle(stats, list(written) + [np.zeros((2, 2, 1), np.uint8)] * 992, 255)
    assert "992 of 1,000 images read as the fill value 0 from 124 missing chunks" in \
        stats.source


def test_sharded_stores_missing_an_inner_chunk_or_a_shard(tmp_path, images):
    images = images.copy()
    images[4:8] = FILL  # zarr leaves this inner chunk out of its shard (only the fill value)
    path = _store(tmp_path / "sharded.zarr", images, shards=(8, 3, 5, 3))
    with pytest.raises(UnreadableInputError, match=r"1 of 5 chunks .*\(c/0/0/0/0 \(inner chunk "
                                                   r"1,0,0,0\); images 4-7\)"):
        normstats.compute(path)
    assert_matches_oracle(normstats.compute(path, allow_missing_chunks=True), list(images), 255)
    shutil.rmtree(path / "c" / "1")  # the second shard: images 8-15
    with pytest.raises(UnreadableInputError, match=r"3 of 5 chunks .*\(c/0/0/0/0 \(inner chunk "
                                                   r"1,0,0,0\), c/1/0/0/0 \(inner chunk 0,0,0,0"
                                                   r"\), c/1/0/0/0 \(inner chunk 1,0,0,0\); "
                                                   r"images 4-15\)"):
        normstats.compute(path)


def test_a_zarr_v2_store_missing_a_chunk_is_refused_naming_its_key(tmp_path, images):
    path = tmp_path / "v2.zarr"
    array = zarr.create_array(path, shape=images.shape, chunks=(4, 3, 5, 3), dtype="uint8",
                              zarr_format=2)
    array[:] = images
    (path / "1.0.0.0").unlink()
    with pytest.raises(UnreadableInputError, match=r"1 of 5 chunks .*\(1\.0\.0\.0; images 4-7\)"):
        normstats.compute(path)


def test_the_command_line_refuses_holes_and_allow_missing_chunks_reads_them(holed, images):
    refused = CliRunner().invoke(main, ["compute", str(holed), "--no-cache"])
    assert refused.exit_code == 1
    assert refused.output.strip().splitlines() == [f"normstats: error: {holed}: {_REFUSAL}"]
    allowed = CliRunner().invoke(main, ["compute", str(holed), "--allow-missing-chunks",
                                        "--json", "--no-cache"])
    assert allowed.exit_code == 0, allowed.output
    library = normstats.compute(holed, allow_missing_chunks=True)
    assert json.loads(allowed.output) == json.loads(library.to_json())
    assert "--allow-missing-chunks" in CliRunner().invoke(main, ["compute", "--help"]).output


def _damaged(path: Path, images: np.ndarray) -> Path:
    _store(path, images)
    (path / "c" / "1" / "0" / "0" / "0").write_bytes(b"not zstd")
    return path


def test_a_damaged_zstd_chunk_is_one_line_naming_the_store_and_the_chunk(tmp_path, images):
    path = _damaged(tmp_path / "damaged.zarr", images)
    expected = (f"{path}: zarr chunk c/1/0/0/0 cannot be read (RuntimeError: Zstd decompression "
                "error: invalid input data): the store is damaged; copy it again")
    for given in (path, da.from_zarr(str(path))):
        with pytest.raises(UnreadableInputError) as error:
            normstats.compute(given, workers=1)
        assert str(error.value) == expected
    result = CliRunner().invoke(main, ["compute", str(path), "--no-cache"])
    assert result.exit_code == 1
    assert result.output.strip().splitlines() == [f"normstats: error: {expected}"]


@pytest.mark.parametrize(("shape", "layout", "reason"), [
    ((3, 0, 4, 3), "NHWC", "shape (3, 0, 4, 3) (NHWC): its height axis (axis 1) has length 0, so "
                           "the images have no pixels; that is not a dataset"),
    ((3, 4, 0), "NHW", "shape (3, 4, 0) (NHW): its width axis (axis 2) has length 0, so the "
                       "images have no pixels; that is not a dataset"),
    ((5, 0), "NC", "shape (5, 0) (NC): its features (axis 1) has length 0, so the vectors have "
                   "no features; that is not a dataset"),
], ids=["images-3x0x4x3", "images-3x4x0", "vectors-5x0"])
def test_arrays_with_a_zero_length_axis_are_one_line(tmp_path, shape, layout, reason):
    array = np.zeros(shape, np.uint8 if len(shape) > 2 else np.float64)
    with pytest.raises(UnreadableInputError) as error:
        normstats.compute(array)
    assert str(error.value) == f"array {shape} {array.dtype}: {reason}"
    with pytest.raises(UnreadableInputError, match="has length 0"):
        normstats.compute(da.from_array(array))
    path = tmp_path / "empty.npy"
    np.save(path, array)
    result = CliRunner().invoke(main, ["compute", str(path), "--no-cache"])
    assert result.exit_code == 1
    assert result.output.strip().splitlines() == [f"normstats: error: {path}: {reason}"]


def test_condition_of_vectors_with_no_feature_or_with_nan_is_one_line(tmp_path, rng):
    np.save(tmp_path / "none.npy", np.zeros((5, 0)))
    x = rng.normal(size=(50, 3))
    x[[2, 9], 1], x[7, 2], x[4, 2] = np.nan, np.nan, np.inf
    np.save(tmp_path / "nan.npy", x)
    expected = {
        "none.npy": "vectors of shape (5, 0) have no features (axis 1 has length 0): there "
                    "is nothing to condition",
        "nan.npy": "3 NaN and 1 infinite in 2 features (feature 1: 2 NaN, feature 2: 1 NaN "
                   "and 1 infinite): the condition number needs every value of every vector; "
                   "drop or impute those rows first (normstats compute leaves NaN out per "
                   "feature)"}
    for name, reason in expected.items():
        result = CliRunner().invoke(main, ["condition", str(tmp_path / name)])
        assert result.exit_code == 1, result.output
        assert result.output.strip().splitlines() == [f"normstats: error: {reason}"]


@pytest.mark.parametrize("channels", [129, 300])
def test_uint8_images_of_more_than_128_channels_are_exact(rng, channels):
    images = rng.integers(0, 256, (4, 3, 2, channels), dtype=np.uint8)
    images[1, :, :, 128] = 255  # the first channel past the compiled kernel's 128
    assert_matches_oracle(normstats.compute(images, layout="NHWC"), list(images), 255)
    blocks = da.from_array(images, chunks=(2, 3, 2, channels))
    assert_matches_oracle(normstats.compute(blocks, layout="NHWC"), list(images), 255)


@pytest.mark.parametrize("dtype", [np.float16, np.float32])
def test_float16_and_float32_arrays_emit_no_warning_and_stay_exact(rng, dtype):
    images = rng.normal(0.5, 0.2, (6, 4, 3, 3)).astype(dtype)
    with_nan = images.copy()
    with_nan[2, 0, 0, 1] = np.nan
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _within_1e_12_of_the_oracle(normstats.compute(images), images)
        stats = normstats.compute(with_nan)
        _within_1e_12_of_the_oracle(stats, np.delete(images, 2, axis=0))
        assert [s.path for s in stats.skipped] == ["array[2]"]
        vectors = normstats.compute(with_nan.reshape(-1, 3))  # NaN left out of feature 1
        assert vectors.counts == (72, 71, 72)
        column = [Fraction(float(v)) for v in np.delete(images.reshape(-1, 3)[:, 1], 2 * 4 * 3)]
        assert vectors.mean[1] == float(sum(column) / len(column))


def _within_1e_12_of_the_oracle(stats: normstats.DatasetStats, images: np.ndarray) -> None:
    """DESIGN §2 for float images: relative error ≤ 1e-12 against the Fraction oracle."""
    expected = exact_stats(list(images))
    for name in ("mean", "std", "std_ddof1", "per_image_std", "min", "max"):
        np.testing.assert_allclose(getattr(stats, name), expected[name], rtol=1e-12, atol=0,
                                   err_msg=name)
    assert stats.images == len(images)


def test_the_hole_check_lists_the_store_and_reads_no_chunk(holed, monkeypatch):
    from zarr.storage import LocalStore

    reads = []
    real_get = LocalStore.get

    async def counting_get(self, key, *args, **kwargs):
        reads.append(key)
        return await real_get(self, key, *args, **kwargs)

    monkeypatch.setattr(LocalStore, "get", counting_get)
    with pytest.raises(NormstatsError, match="missing"):
        normstats.compute(holed)
    assert [key for key in reads if key.startswith("c/")] == []
