"""Exact histograms: percentiles equal numpy.percentile on the same pixels, bit for bit."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import random_images
from oracle import exact_histogram

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
    with pytest.raises(InvalidOptionError, match=r"computed for images, and .* holds vectors"):
        compute_with_histogram(np.zeros((5, 3), np.uint8))


def test_a_histogram_counts_only_the_valid_values_over_their_own_range():
    pixels = np.array([[[3, 7], [5, 7]], [[9, 200], [4, 7]]], np.uint8)  # (2, 2, 2)
    valid = np.array([[[True], [False]], [[True], [True]]])  # (H, W, 1): every band
    h = Histogram.from_array(pixels, valid)
    kept = [[3, 9, 4], [7, 200, 7]]
    assert h.offset == 3 and h.counts.shape == (2, 200 - 3 + 1) and h.dtype == "uint8"
    assert h.counts.dtype == np.int64
    for c in range(2):
        assert h.counts[c].tolist() == np.bincount(np.array(kept[c]) - 3,
                                                   minlength=198).tolist()
    single = Histogram.from_array(np.array([[[42]]], np.uint16))
    assert (single.counts.tolist(), single.offset) == ([[1]], 42)
    none = Histogram.from_array(pixels, np.zeros((2, 2, 1), bool))
    assert (none.counts.tolist(), none.counts.dtype, none.dtype, none.offset) == \
        ([[0], [0]], np.int64, "uint8", 0)
    flags = Histogram.from_array(np.array([[[True, False], [True, True]]]))
    assert (flags.counts.tolist(), flags.offset, flags.dtype) == ([[0, 2], [1, 1]], 0, "bool")


def test_the_histogram_size_limit_is_the_count_of_cells():
    from normstats.maths.histogram import MAX_CELLS

    assert MAX_CELLS == 2**24
    edge = np.zeros((2, 256), np.uint16)
    edge[1] = 65535  # 256 bands of 65,536 values: exactly the limit
    assert Histogram.from_array(edge).counts.shape == (256, 65536)
    wide = np.array([[0], [MAX_CELLS]], np.int32)
    with pytest.raises(InvalidOptionError) as caught:
        Histogram.from_array(wide)
    assert str(caught.value) == ("exact percentiles need a histogram of 1 bands x 16,777,217 "
                                 "values, over the limit of 16,777,216 bins: the values span "
                                 "too wide a range")


def test_merging_histograms_far_from_zero_and_wide_ones():
    high = Histogram.from_array(np.array([[2**23], [2**23 + 9]], np.int32))
    merged = high.merge(Histogram.from_array(np.array([[2**23 + 5]], np.int32)))
    assert merged.offset == 2**23 and merged.counts.tolist() == [[1, 0, 0, 0, 0, 1, 0, 0, 0, 1]]
    wide = Histogram.from_array(np.array([[0], [4999]], np.int16))
    both = wide.merge(Histogram.from_array(np.array([[10]], np.int16)))
    assert both.counts.dtype == np.int64 and both.total == 3 and both.counts.shape == (1, 5000)
    with pytest.raises(IncompatibleImagesError) as caught:
        wide.merge(Histogram.from_array(np.zeros((1, 2), np.int16)))
    assert str(caught.value) == "histograms cannot be merged: int16 x1 and int16 x2"


def test_adding_in_place_only_within_the_own_range():
    base = Histogram.from_array(np.array([[0], [10]], np.uint8))
    same = Histogram.from_array(np.array([[0], [10], [10]], np.uint8))
    assert base.add_in_place(same) is base and base.counts[0, [0, 10]].tolist() == [2, 3]
    inner = Histogram.from_array(np.array([[4]], np.uint8))
    assert base.add_in_place(inner) is base and base.total == 6
    outside = Histogram.from_array(np.array([[11]], np.uint8))
    grown = base.add_in_place(outside)
    assert grown is not base and grown.total == 7 and base.total == 6
    other_kind = Histogram.from_array(np.array([[4]], np.uint16))
    with pytest.raises(IncompatibleImagesError):
        base.add_in_place(other_kind)
    two = Histogram.from_array(np.array([[4, 4]], np.uint8))
    with pytest.raises(IncompatibleImagesError):
        base.add_in_place(two)


def test_a_percentile_of_one_value_and_of_none():
    assert percentile_from_counts(np.array([0, 1]), 50.0) == 1.0
    assert percentile_from_counts(np.array([2, 0, 1]), 100.0) == 2.0
    with pytest.raises(InvalidOptionError) as caught:
        percentile_from_counts(np.array([0, 0]), 50.0)
    assert str(caught.value) == "percentile of an empty histogram"


SMALL_INTEGER_SPANS = [  # (dtype, [low, high)): one value, the whole range, a few values
    *((dtype, span) for dtype in (np.uint8, np.int8, np.uint16, np.int16)
      for span in ((0, 1), (100, 103))),
    (np.uint8, (0, 256)), (np.int8, (-128, 128)), (np.int8, (-40, -38)),
    (np.uint16, (65000, 65536)), (np.int16, (-32768, -32700)), (np.int16, (-300, 300))]


@pytest.mark.parametrize(("dtype", "span"), SMALL_INTEGER_SPANS)
@pytest.mark.parametrize("channels", [1, 3, 4])
def test_a_small_integer_histogram_is_counted_over_the_values_seen(rng, dtype, channels,
                                                                   span):
    """8- and 16-bit images are counted by the compiled kernel over their dtype's whole
    range, then cut to the values seen: the histogram of their (valid) values over their
    own range, as numpy's ``bincount`` of the values gave it."""
    low, high = span
    for pixels in (rng.integers(low, high, size=(9, 11, channels)).astype(dtype),
                   np.zeros((0, 4, channels), dtype)):
        for valid in (None, rng.random((*pixels.shape[:2], 1)) < 0.6):
            h = Histogram.from_array(pixels, valid)
            kept = np.broadcast_to(np.ones((1, 1, 1), bool) if valid is None else valid,
                                   pixels.shape)
            columns = [pixels[..., c][kept[..., c]].astype(int).tolist()
                       for c in range(channels)]
            assert (h.offset, h.counts.tolist(), h.dtype) == \
                exact_histogram(columns, np.dtype(dtype).name)
            assert h.counts.dtype == np.int64

