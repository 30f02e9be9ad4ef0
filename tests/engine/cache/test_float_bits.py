"""Float images: a run answered partly or wholly from the record cache has a cold run's bits.

Each image's float64 record (pixels, mean, residual, M2, min, max) is computed from that
image alone and stored losslessly; records are pooled in exact fixed point, so which
records came from the cache cannot change a bit of the result.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
from PIL import Image

import normstats


def write_float_tiff(path: Path, seed: int) -> None:
    """A 32-bit float grey TIFF far from zero, where careless float pooling loses bits."""
    rng = np.random.default_rng(seed)
    path.parent.mkdir(parents=True, exist_ok=True)
    pixels = (1e4 + rng.normal(0, 1, (7, 9)) * 10.0 ** rng.integers(-6, 3)).astype(np.float32)
    Image.fromarray(pixels, mode="F").save(path)


def test_float_images_are_bit_identical_whatever_the_cache_holds(tmp_path):
    root, cache = tmp_path / "data", tmp_path / "cache"
    for i in range(24):
        write_float_tiff(root / f"part_{i % 3}" / f"img_{i:03d}.tif", seed=i)
    options = dict(workers=1, mode="keep")
    first = normstats.compute(root, cache=cache, **options)
    assert first.images == 24 and first.images_decoded == 24
    warm = normstats.compute(root, cache=cache, **options)
    assert warm.images_decoded == 0
    # change some files and add others: the next run mixes cached and fresh records
    for i in (2, 11):
        path = root / f"part_{i % 3}" / f"img_{i:03d}.tif"
        old = os.stat(path).st_mtime_ns
        write_float_tiff(path, seed=100 + i)
        os.utime(path, ns=(old + 10**9, old + 10**9))
    for i in range(24, 30):
        write_float_tiff(root / f"part_{i % 3}" / f"img_{i:03d}.tif", seed=i)
    mixed = normstats.compute(root, cache=cache, **options)
    assert mixed.images == 30 and mixed.images_decoded == 8
    cold = normstats.compute(root, cache=False, **options)
    assert np.issubdtype(np.asarray(cold.mean).dtype, np.floating)
    assert mixed == cold  # every float compared exactly
    assert {**mixed.to_dict(), "images_cached": 0, "images_decoded": 0} == \
        {**cold.to_dict(), "images_cached": 0, "images_decoded": 0}
    assert first == warm
