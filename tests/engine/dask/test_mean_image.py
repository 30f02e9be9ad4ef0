"""The mean image of a Dask array as a Dask reduction: any chunking, arrays made by
`normstats.images` and transformed, float images holding NaN."""

from __future__ import annotations

import dask.array as da
import numpy as np
import pytest
from oracle import exact_mean_image
from PIL import Image

import normstats
from normstats.engine.dask.mean_image import lazy_mean_image
from normstats.errors import InvalidOptionError


def test_the_totals_are_exact_for_any_chunking(rng):
    images = rng.integers(0, 65536, (50, 4, 6, 2), dtype=np.uint16)
    exact = images.astype(object).sum(axis=0)
    for chunks in ((50, 4, 6, 2), (3, 4, 6, 2), (7, 1, 5, 1), (1, 2, 2, 2)):
        found = lazy_mean_image(da.from_array(images, chunks=chunks), layout="NHWC",
                                with_std=True)
        totals = found.compute(scheduler="sync")
        assert (totals["n"] == 50).all()
        assert (totals["total"].astype(object) == exact).all()
        squares = totals["low"].astype(object) + totals["high"].astype(object) * 65536
        assert (squares == (images.astype(object) ** 2).sum(axis=0)).all()


def test_a_transformed_images_array_is_reduced_by_dask(tmp_path, rng):
    pixels = rng.integers(0, 256, (20, 5, 4, 3), dtype=np.uint8)
    for i, image in enumerate(pixels):
        Image.fromarray(image).save(tmp_path / f"{i:02d}.png")
    x = normstats.images(tmp_path, task_size=6).map_blocks(lambda block: block[:, ::-1])
    stats = normstats.compute(x, mean_image_std=True, scheduler="sync")
    expected_mean, expected_std = exact_mean_image(pixels[:, ::-1], 255)
    assert np.array_equal(stats.mean_image, expected_mean)
    assert np.array_equal(stats.mean_image_std, expected_std)


def test_images_holding_nan_are_left_out_of_whole_blocks_and_refused_in_split_ones(rng):
    images = rng.normal(0, 1, (30, 3, 4, 3))
    images[[2, 17], 1, 1, 2] = np.nan
    stats = normstats.compute(da.from_array(images, chunks=(8, 3, 4, 3)), mean_image_std=True,
                              scheduler="sync")
    kept = np.delete(images, [2, 17], axis=0)
    assert stats.images == 28
    expected_mean, expected_std = exact_mean_image(kept, 1)
    np.testing.assert_allclose(stats.mean_image, expected_mean, rtol=1e-15, atol=1e-15)
    np.testing.assert_allclose(stats.mean_image_std, expected_std, rtol=1e-14)
    with pytest.raises(InvalidOptionError, match="rechunk it to whole images"):
        normstats.compute(da.from_array(images, chunks=(8, 1, 4, 3)), mean_image=True,
                          scheduler="sync")
