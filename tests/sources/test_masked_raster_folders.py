"""Folders of masked rasters end to end: GDAL's mask pages and ``.msk`` sidecars left out
band by band, exactly, together with nodata; the same numbers from the same pixels as a
masked array; sidecars never counted as images, and the record cache keyed on them."""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
from PIL import Image
from raster_files import random_raster, write_raster, write_sidecar
from sources.test_raster_folders import assert_oracle, nodata_oracle

import normstats
from normstats.errors import UnreadableInputError

#: How the tiles of a folder are masked: a mask page of 1 or 8 bits, a sidecar of one band
#: or one per band, or a mask page, a sidecar and a nodata tag at once.
HOW = ("page-1-bit", "page-8-bit", "sidecar-1-band", "sidecar-n-bands", "page+sidecar+tag")


def _masked_tiles(rng: np.random.Generator, count: int = 6, bands: int = 5,
                  shape: tuple[int, int] = (12, 13)) -> tuple[list, list, list]:
    """Tiles of uint16 with nodata 0 in places, masks (True: data) of one band and of one
    per band; tile 1's band 2 is hidden by the per-band mask, tile 3 entirely."""
    tiles = [random_raster(rng, (*shape, bands), "uint16", 0) for _ in range(count)]
    whole = [rng.random(shape) < 0.8 for _ in range(count)]
    per_band = [rng.random((*shape, bands)) < 0.7 for _ in range(count)]
    per_band[1][..., 2] = False
    per_band[3][...] = False
    return tiles, whole, per_band


def _write(root: Path, how: str, tiles: list, whole: list, per_band: list) -> list:
    """Write the tiles masked as ``how`` says; the values each keeps, by the oracle's rule."""
    keep = []
    for i, (pixels, one, each) in enumerate(zip(tiles, whole, per_band)):
        page = one if how.startswith("page") else None
        path = write_raster(root / f"{i % 2}" / f"t{i}.tif", pixels, valid=page,
                            mask_bits=8 if how == "page-8-bit" else 1, tiled=i % 2 == 0,
                            planar=i % 3 == 0, compression="deflate",
                            nodata=0 if how.endswith("tag") else None)
        kept = np.ones(pixels.shape, bool) if page is None else np.repeat(
            page[:, :, None], pixels.shape[2], axis=2)
        if how.startswith("sidecar") or how.endswith("tag"):
            beside = one if how == "sidecar-1-band" else each
            write_sidecar(path, beside, bits=1 if i % 2 else 8)
            kept &= beside[:, :, None] if beside.ndim == 2 else beside
        if how.endswith("tag"):
            kept &= pixels != 0
        keep.append(kept)
    return keep


@pytest.mark.parametrize("how", HOW)
def test_masked_values_are_left_out_exactly(tmp_path, rng, how):
    tiles, whole, per_band = _masked_tiles(rng)
    keep = _write(tmp_path / "tiles", how, tiles, whole, per_band)
    stats = normstats.compute(tmp_path / "tiles", mode="keep", cache=False)
    assert_oracle(stats, nodata_oracle(tiles, keep), exact=True)
    assert stats.images == 6 and stats.pixels_per_channel == 6 * 12 * 13
    if how in ("sidecar-n-bands", "page+sidecar+tag"):  # tile 3 hidden, tile 1 in band 2
        assert stats.nodata_images == (1, 1, 2, 1, 1)
    processes = normstats.compute(tmp_path / "tiles", mode="keep", cache=False, workers=2,
                                  task_size=2)
    assert processes == stats


def test_the_same_pixels_as_a_masked_array_give_the_same_numbers(tmp_path, rng):
    tiles, whole, per_band = _masked_tiles(rng)
    keep = _write(tmp_path / "tiles", "page+sidecar+tag", tiles, whole, per_band)
    order = [int(p.stem[1:]) for p in sorted((tmp_path / "tiles").rglob("*.tif"))]
    stack = np.stack([tiles[i] for i in order])
    hidden = ~np.stack([keep[i] for i in order])
    from_files = normstats.compute(tmp_path / "tiles", mode="keep", cache=False)
    for stats in (normstats.compute(np.ma.masked_array(stack, hidden), layout="NHWC", scale=1),
                  normstats.compute(np.ma.masked_array(stack, hidden), layout="NHWC", scale=1,
                                    task_size=2, workers=2)):
        for name in ("mean", "std", "std_ddof1", "per_image_std", "per_image_std_ddof1",
                     "rms_per_image_std", "min", "max", "counts", "nodata_images", "images",
                     "pixels_per_channel", "dtype", "scale"):
            assert getattr(stats, name) == getattr(from_files, name), name


def test_a_sidecar_is_never_an_image_and_masks_its_png_under_keep_only(tmp_path, rng):
    root = tmp_path / "pngs"
    root.mkdir()
    pixels = [rng.integers(0, 256, (5, 6), np.uint8) for _ in range(3)]
    for i, grey in enumerate(pixels):
        Image.fromarray(grey).save(root / f"{i}.png")
    plain = {mode: normstats.compute(root, mode=mode, cache=False) for mode in ("L", "keep")}
    valid = rng.random((5, 6)) < 0.5
    write_sidecar(root / "1.png", valid)
    colour = normstats.compute(root, mode="L", cache=False)
    assert colour.images == 3 and colour == plain["L"]  # what a loader sees: no mask
    keep = normstats.compute(root, mode="keep", cache=False)
    assert keep.images == 3 and not keep.skipped
    assert keep.counts == (2 * 30 + int(valid.sum()),)
    values = np.concatenate([pixels[0].ravel(), pixels[1][valid], pixels[2].ravel()])
    assert keep.mean == (float(Fraction(int(values.sum(dtype=np.int64)), values.size * 255)),)
    assert plain["keep"].counts is None
    listed = normstats.compute([str(root / f"{i}.png") for i in range(3)], mode="keep",
                               cache=False)  # a list of files: each one's sidecar looked for
    assert (listed.counts, listed.mean) == (keep.counts, keep.mean)


def test_an_edited_added_or_removed_sidecar_makes_its_image_stale_in_the_cache(tmp_path, rng):
    tiles, whole, per_band = _masked_tiles(rng, count=4)
    root = tmp_path / "tiles"
    _write(root, "sidecar-n-bands", tiles, whole, per_band)
    cache = tmp_path / "cache"
    cold = normstats.compute(root, mode="keep", cache=cache)
    warm = normstats.compute(root, mode="keep", cache=cache)
    assert (cold.images_decoded, warm.images_cached, warm.images_decoded) == (4, 4, 0)
    changes = (lambda: write_sidecar(root / "0" / "t0.tif", ~per_band[0]),  # edited
               lambda: (root / "1" / "t1.tif.msk").unlink(),  # removed
               lambda: write_sidecar(root / "1" / "t1.tif", whole[1], suffix=".MSK"))  # added
    for change in changes:
        change()
        run = normstats.compute(root, mode="keep", cache=cache)
        assert (run.images_decoded, run.images_cached) == (1, 3)
        fresh = normstats.compute(root, mode="keep", cache=False)
        assert (run.mean, run.counts, run.nodata_images) == \
            (fresh.mean, fresh.counts, fresh.nodata_images)


def test_a_mask_that_does_not_fit_skips_its_image_with_the_reason(tmp_path, rng):
    tiles, whole, per_band = _masked_tiles(rng, count=4)
    root = tmp_path / "tiles"
    _write(root, "sidecar-1-band", tiles, whole, per_band)
    write_sidecar(root / "0" / "t2.tif", np.ones((4, 4), bool))
    stats = normstats.compute(root, mode="keep", cache=False)
    assert stats.images == 3
    assert [(s.path, s.reason) for s in stats.skipped] == [(
        "0/t2.tif", "its mask file 0/t2.tif.msk is 4x4 but the image is 13x12; a mask covers "
                    "its image pixel for pixel")]
    with pytest.raises(UnreadableInputError, match="0/t2.tif: its mask file 0/t2.tif.msk is "
                                                   "4x4"):
        normstats.compute(root, mode="keep", cache=False, on_error="fail")


def test_percentiles_are_numpy_s_over_the_unmasked_values(tmp_path, rng):
    tiles, whole, per_band = _masked_tiles(rng)
    keep = _write(tmp_path / "tiles", "page+sidecar+tag", tiles, whole, per_band)
    stats = normstats.compute(tmp_path / "tiles", mode="keep", cache=False, percentiles=True)
    for c in range(5):
        valid = np.concatenate([t[..., c][k[..., c]] for t, k in zip(tiles, keep)])
        for q in (0.5, 2, 98, 99.5):
            assert stats.percentiles[f"p{q:g}"][c] == float(np.percentile(valid, q))
