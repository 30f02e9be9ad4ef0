"""Exact histograms: percentiles equal numpy.percentile on the same pixels, bit for bit."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import random_images

from normstats.engine.histogram_run import compute_with_histogram, robust_range
from normstats.errors import IncompatibleImagesError, InvalidOptionError
from normstats.maths.histogram import Histogram, percentile_from_counts

QS = (0.0, 0.5, 1.0, 2.5, 10.0, 33.3, 50.0, 66.7, 97.5, 99.5, 100.0)


def _all_pixels(images: list[np.ndarray]) -> np.ndarray:
    return np.concatenate([img.reshape(-1, img.shape[-1]) for img in images])


@pytest.mark.parametrize("dtype", [np.uint8, np.uint16, np.int16])
def test_percentiles_equal_numpy(rng, dtype):
    for trial in range(20):
        n = int(rng.integers(1, 2000))
        if np.dtype(dtype).itemsize == 1:
            pixels = np.minimum(rng.poisson(rng.uniform(1, 200), (n, 3)), 255).astype(dtype)
        else:
            info = np.iinfo(dtype)
            pixels = rng.integers(info.min, int(info.max) + 1, (n, 3)).astype(dtype)
        hist = Histogram.from_array(pixels)
        for q in (*QS, float(rng.uniform(0, 100))):
            expected = tuple(float(np.percentile(pixels[:, c], q)) for c in range(3))
            assert hist.percentile(q) == expected, (trial, q)


def test_merge_is_exact_and_order_free(rng):
    images = random_images(rng, 9)
    parts = [Histogram.from_array(img) for img in images]
    forward, backward = parts[0], parts[-1]
    for h in parts[1:]:
        forward = forward.merge(h)
    for h in reversed(parts[:-1]):
        backward = backward.merge(h)
    assert np.array_equal(forward.counts, backward.counts)
    assert np.array_equal(forward.counts, Histogram.from_array(_all_pixels(images)).counts)


def test_folder_percentiles_equal_numpy(png_folder):
    root, images = png_folder
    stats, hist = compute_with_histogram(root, workers=1)
    pixels = _all_pixels(images)
    assert hist.total == len(pixels) and stats.images == len(images)
    ranges = robust_range(stats, hist)
    for c in range(3):
        assert ranges["p0.5"][c] == float(np.percentile(pixels[:, c], 0.5)) / 255
        assert ranges["p99.5"][c] == float(np.percentile(pixels[:, c], 99.5)) / 255


def test_array_percentiles_with_threads(rng):
    stack = rng.integers(0, 256, (50, 6, 7, 3), dtype=np.uint8)
    stats, hist = compute_with_histogram(stack, task_size=7, workers=2)
    for c in range(3):
        assert hist.percentile(99.5)[c] == float(np.percentile(stack[..., c], 99.5))
    assert stats.images == 50


def test_errors():
    with pytest.raises(InvalidOptionError, match="integer pixels"):
        Histogram.from_array(np.zeros((2, 2, 1), np.float32))
    with pytest.raises(InvalidOptionError, match=r"\[0, 100\]"):
        percentile_from_counts(np.array([1]), 101)
    a = Histogram.from_array(np.zeros((1, 1, 1), np.uint8))
    b = Histogram.from_array(np.zeros((1, 1, 1), np.uint16))
    with pytest.raises(IncompatibleImagesError):
        a.merge(b)
    with pytest.raises(InvalidOptionError, match="image folders"):
        compute_with_histogram(np.zeros((5, 3), np.uint8))
