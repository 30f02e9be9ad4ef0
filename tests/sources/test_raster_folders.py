"""Folders of rasters end to end: exact statistics with nodata left out band by band (by
the file's tag, ``nodata=``, NaN), the same numbers from the same pixels as an array with a
mask, percentiles, mixed rasters named, and the record cache, `images`, `records` and
``by_folder`` unchanged."""

from __future__ import annotations

import json
import math
from dataclasses import replace
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from raster_files import random_raster, write_raster

import normstats
from normstats.errors import EmptyDatasetError, IncompatibleImagesError
from normstats_cli import main


def nodata_oracle(images: list[np.ndarray], keep: list[np.ndarray]) -> dict[str, list]:
    """Per band, from exact fractions of the valid values: mean, pooled std (each rounded
    once), the per-image std averaged over the images with a valid value, the counts."""
    out: dict[str, list] = {k: [] for k in ("mean", "std", "per_image_std", "counts",
                                            "nodata_images", "min", "max")}
    for c in range(images[0].shape[2]):
        per_image = [[Fraction(v.item()) for v in image[..., c][kept[..., c]]]
                     for image, kept in zip(images, keep)]
        values = [v for image in per_image for v in image]
        n = len(values)
        mean = sum(values) / n
        out["mean"].append(float(mean))
        out["std"].append(math.sqrt(float(sum((v - mean) ** 2 for v in values) / n)))
        stds = [math.sqrt(float(sum((v - sum(image) / len(image)) ** 2 for v in image)
                                / len(image))) for image in per_image if image]
        out["per_image_std"].append(float(sum(Fraction(s) for s in stds) / len(stds)))
        out["counts"].append(n)
        out["nodata_images"].append(len(per_image) - len(stds))
        out["min"].append(float(min(values)))
        out["max"].append(float(max(values)))
    return out


def assert_oracle(stats: normstats.DatasetStats, expected: dict[str, list], exact: bool):
    for name in ("counts", "nodata_images", "min", "max"):
        assert list(getattr(stats, name)) == expected[name], name
    if exact:  # integer bands: pooled values bit for bit
        assert list(stats.mean) == expected["mean"] and list(stats.std) == expected["std"]
    else:
        np.testing.assert_allclose(stats.mean, expected["mean"], rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(stats.std, expected["std"], rtol=1e-12)
    np.testing.assert_allclose(stats.per_image_std, expected["per_image_std"],
                               rtol=1e-12 if not exact else 4e-16)


def _folder(root: Path, images: list[np.ndarray], **options) -> Path:
    for i, pixels in enumerate(images):
        write_raster(root / f"{i % 2}" / f"tile{i:02d}.tif", pixels, compression="deflate",
                     tiled=i % 3 == 0, planar=i % 2 == 1, **options)
    return root


def _tiles(rng, dtype: str, bands: int, nodata: float | None, count: int = 7) -> list:
    tiles = [random_raster(rng, (11 + i % 3, 13, bands), dtype, nodata) for i in range(count)]
    blank = nodata if nodata is not None else np.nan
    tiles[2][...] = blank  # an image without one valid pixel
    tiles[4][..., bands - 1] = blank  # and one band of another image
    return tiles


@pytest.mark.parametrize("dtype, nodata", [
    ("uint8", 0), ("uint16", 0), ("int16", -9999), ("uint32", 4_000_000_000),
    ("int32", -1), ("float32", None), ("float64", None), ("float32", -9999.0)])
def test_nodata_by_tag_is_left_out_exactly(tmp_path, rng, dtype, nodata):
    tiles = _tiles(rng, dtype, 13, nodata)
    root = _folder(tmp_path / "tiles", tiles, nodata=nodata)
    stats = normstats.compute(root, mode="keep", cache=False)
    keep = [~np.isnan(t) if nodata is None else (t != nodata) & ~np.isnan(t.astype(float))
            for t in tiles]
    assert_oracle(stats, nodata_oracle(tiles, keep), exact=dtype in ("uint8", "uint16",
                                                                      "int16"))
    assert stats.scale == 1.0 and stats.dtype == dtype and stats.images == 7
    assert stats.nodata_images == (1,) * 12 + (2,)
    assert stats.pixels_per_channel == sum(t.shape[0] * t.shape[1] for t in tiles)


def test_nodata_by_flag_replaces_the_tag_and_reads_untagged_files(tmp_path, rng):
    tiles = _tiles(rng, "int16", 3, -7)
    tagged = _folder(tmp_path / "tagged", tiles, nodata=5)  # a wrong tag: the flag wins
    untagged = _folder(tmp_path / "untagged", tiles)
    expected = nodata_oracle(tiles, [t != -7 for t in tiles])
    for root in (tagged, untagged):
        assert_oracle(normstats.compute(root, mode="keep", nodata=-7, cache=False), expected,
                      exact=True)
    plain = normstats.compute(untagged, mode="keep", cache=False)
    assert plain.counts is None and plain.nodata_images is None  # nothing was left out


def test_the_same_pixels_as_a_masked_array_or_with_nodata_give_the_same_numbers(tmp_path, rng):
    tiles = [random_raster(rng, (9, 10, 13), "uint16", 0) for _ in range(6)]
    tiles[1][...] = 0
    stack = np.stack(tiles)
    from_files = normstats.compute(_folder(tmp_path / "t", tiles, nodata=0), mode="keep",
                                   cache=False)
    arrays = [normstats.compute(np.ma.masked_array(stack, stack == 0), layout="NHWC", scale=1),
              normstats.compute(stack, layout="NHWC", nodata=0, scale=1),
              normstats.compute(np.ma.masked_array(stack, stack == 0), layout="NHWC", scale=1,
                                task_size=2, workers=2)]
    for stats in arrays:
        for name in ("mean", "std", "std_ddof1", "per_image_std", "per_image_std_ddof1",
                     "rms_per_image_std", "min", "max", "counts", "nodata_images", "images",
                     "pixels_per_channel", "dtype", "scale"):
            assert getattr(stats, name) == getattr(from_files, name), name


def test_float_rasters_and_float_arrays_leave_nan_out_alike(tmp_path, rng):
    tiles = [random_raster(rng, (8, 9, 4), "float32") for _ in range(5)]
    from_files = normstats.compute(_folder(tmp_path / "f", tiles), mode="keep", cache=False)
    from_array = normstats.compute(np.stack(tiles), layout="NHWC", nodata="nan")
    assert from_files.mean == from_array.mean and from_files.counts == from_array.counts
    assert from_files.per_image_std == from_array.per_image_std


def test_rasters_that_differ_in_bands_or_dtype_are_named(tmp_path, rng):
    root = tmp_path / "mixed"
    write_raster(root / "a.tif", random_raster(rng, (4, 4, 13), "uint16"))
    write_raster(root / "b.tif", random_raster(rng, (4, 4, 12), "uint16"))
    with pytest.raises(IncompatibleImagesError) as raised:
        normstats.compute(root, mode="keep", cache=False)
    assert str(raised.value) == (
        "images cannot be pooled: a.tif is uint16, 13 bands b1..b13 but b.tif is uint16, 12 "
        "bands b1..b12; rasters are pooled only with rasters of the same band count and "
        "dtype: compute them separately")
    write_raster(root / "b.tif", random_raster(rng, (4, 4, 13), "int16"))
    with pytest.raises(IncompatibleImagesError, match="a.tif is uint16, 13 bands .* but b.tif "
                                                      "is int16, 13 bands"):
        normstats.compute(root, mode="keep", cache=False, workers=2, task_size=1)


def test_an_all_nodata_band_is_an_error_naming_it(tmp_path, rng):
    tiles = [random_raster(rng, (4, 4, 3), "uint16", 0) for _ in range(3)]
    for tile in tiles:
        tile[..., 1] = 0
    with pytest.raises(EmptyDatasetError, match="band b2 has no valid pixel in any of the 3"):
        normstats.compute(_folder(tmp_path / "e", tiles, nodata=0), mode="keep", cache=False)


def test_percentiles_are_numpy_s_over_the_valid_values(tmp_path, rng):
    tiles = _tiles(rng, "int16", 5, -9999)
    stats = normstats.compute(_folder(tmp_path / "p", tiles, nodata=-9999), mode="keep",
                              percentiles=True)
    for c in range(5):
        valid = np.concatenate([t[..., c][t[..., c] != -9999] for t in tiles])
        for q in (0.5, 2, 98, 99.5):
            assert stats.percentiles[f"p{q:g}"][c] == float(np.percentile(valid, q))
    assert stats.counts == normstats.compute(tmp_path / "p", mode="keep", cache=False).counts


def test_channels_name_the_bands(tmp_path, rng):
    root = _folder(tmp_path / "c", [random_raster(rng, (4, 4, 3), "uint16") for _ in range(2)])
    stats = normstats.compute(root, mode="keep", channels="B02,B03,B04", cache=False)
    assert stats.channels == ("B02", "B03", "B04")


def test_the_cache_answers_warm_runs_bit_for_bit(tmp_path, rng):
    tiles = _tiles(rng, "uint16", 13, 0) + _tiles(rng, "uint16", 13, 0)
    root = _folder(tmp_path / "data", tiles, nodata=0)
    cache = tmp_path / "cache"
    cold = normstats.compute(root, mode="keep", cache=cache)
    warm = normstats.compute(root, mode="keep", cache=cache)
    assert (cold.images_decoded, warm.images_cached, warm.images_decoded) == (14, 14, 0)
    assert warm.to_dict() | {"images_cached": 0, "images_decoded": 14} == cold.to_dict()
    assert warm == normstats.compute(root, mode="keep", cache=False)
    other = normstats.compute(root, mode="keep", cache=cache, nodata=7)  # another key
    assert other.images_decoded == 14 and other.counts != cold.counts
    floats = _folder(tmp_path / "floats", _tiles(rng, "float32", 4, None))
    assert normstats.compute(floats, mode="keep", cache=cache) == \
        normstats.compute(floats, mode="keep", cache=cache)


def test_records_images_and_by_folder_apply_unchanged(tmp_path, rng):
    tiles = [random_raster(rng, (12, 10, 13), "uint16", 0) for _ in range(8)]
    tiles[3][..., 5] = 0
    root = _folder(tmp_path / "d", tiles, nodata=0)
    stats = normstats.compute(root, mode="keep", cache=False, by_folder=True)
    for label in ("0", "1"):
        alone = normstats.compute(root / label, mode="keep", cache=False)
        assert stats.by_folder[label] == replace(alone, source=stats.by_folder[label].source)
    records = normstats.records(root, mode="keep", cache=False)
    assert records.raw_units and "valid" in records.arrays
    assert normstats.reduce(records) == stats
    subset = normstats.reduce(records[records.labels == "1"])
    assert replace(subset, source=stats.by_folder["1"].source) == stats.by_folder["1"]
    pixels = normstats.images(root, mode="keep")
    in_order = [tiles[int(key[-6:-4])] for key in sorted(str(p.relative_to(root)) for p in
                                                         root.rglob("*.tif"))]
    np.testing.assert_array_equal(pixels.compute(), np.stack(in_order))
    assert normstats.compute(pixels) == stats  # the untouched array: its files, their nodata


def test_the_command_line_reads_rasters_with_nodata(tmp_path, rng):
    tiles = _tiles(rng, "int16", 3, -9999)
    root = _folder(tmp_path / "cli", tiles)
    run = CliRunner().invoke(main, ["compute", str(root), "--mode", "keep", "--nodata",
                                    "-9999", "--no-cache", "--json"])
    assert run.exit_code == 0, run.output
    data = json.loads(run.stdout)
    expected = nodata_oracle(tiles, [t != -9999 for t in tiles])
    assert data["mean"] == expected["mean"] and data["counts"] == expected["counts"]
    report = CliRunner().invoke(main, ["compute", str(root), "--mode", "keep", "--nodata",
                                       "-9999", "--no-cache"]).output
    assert "scale 1 (raw units: TIFF rasters deeper than 8 bits" in report
    assert "nodata left out band by band" in report and "values" in report
