"""Channel cross sums and co-moments: exact against Python ints and fractions for every
dtype, channel count and size (the compiled kernel and numpy's path alike), pooled
bit-identically whatever the partition, and kept in the records only when asked."""

from __future__ import annotations

import functools
from dataclasses import replace
from fractions import Fraction

import numpy as np
import pytest
from oracle import exact_covariance

import normstats
from normstats.maths import _cross
from normstats.maths import covariance as cov
from normstats.maths.covariance import (
    CoMoments,
    float_co_moments,
    integer_cross_sums,
    integer_gram,
    pair_indices,
)
from normstats.maths.records import (
    concat_records,
    cross_sums_wanted,
    impossible_rows,
    records_from_stack,
    wants_cross_sums,
)
from normstats.maths.summary import Summary, summarize
from normstats.maths.uint8_rows import Uint8Rows


def python_cross_sums(stack: np.ndarray) -> list[list[int]]:
    """Σx_c·x_d per image over pairs c < d, with Python ints."""
    n, _, _, c = stack.shape
    rows, cols = pair_indices(c)
    pixels = stack.reshape(n, -1, c).astype(object)
    return [[int((image[:, a] * image[:, b]).sum()) for a, b in zip(rows, cols)]
            for image in pixels]


@pytest.fixture(params=_cross._variants())
def kernel(request):
    """Each compiled kernel this CPU runs for three channels (the others have one)."""
    previous = _cross._select(request.param)
    yield request.param
    _cross._select(previous)


@pytest.mark.parametrize("channels", [1, 2, 3, 4, 5, 7, 13, 100, 128, 130])
@pytest.mark.parametrize("size", [(1, 1), (1, 2), (3, 5), (7, 33), (32, 32), (2, 64), (1, 63)])
def test_uint8_cross_sums_are_the_python_int_sums(rng, kernel, channels, size):
    """Every size cuts the lanes (or steps of 64 pixels) differently: whole blocks, the
    padded or masked rest, one pixel."""
    stack = rng.integers(0, 256, (3, *size, channels), dtype=np.uint8)
    assert integer_cross_sums(stack).tolist() == python_cross_sums(stack)


@pytest.mark.parametrize("dtype", ["uint8", "uint16", "int16", "int8", "bool"])
@pytest.mark.parametrize("channels", [2, 3, 4])
def test_cross_sums_of_every_integer_dtype_through_both_paths(rng, monkeypatch, dtype,
                                                               channels):
    info = np.iinfo(np.uint8 if dtype == "bool" else dtype)
    stack = rng.integers(info.min, int(info.max) + 1, (4, 9, 11, channels)).astype(dtype)
    expected = python_cross_sums(stack)
    assert integer_cross_sums(stack).tolist() == expected
    monkeypatch.setattr(cov, "_kernel", lambda: None)  # an installation without the kernel
    assert integer_cross_sums(stack).tolist() == expected


def test_the_kernel_lanes_do_not_overflow_past_a_flush(kernel):
    """All-255 images longer than 65,536 blocks of 96 bytes (and 16,384 steps of 64 pixels):
    the 32-bit lanes are flushed into int64 before 2**32; every kernel alike."""
    for channels in (3, 4):
        stack = np.full((1, 1460, 1460, channels), 255, np.uint8)
        pairs = channels * (channels - 1) // 2
        assert integer_cross_sums(stack).tolist() == [[1460 * 1460 * 255 * 255] * pairs]


def test_16_bit_sums_beyond_2_to_53_are_exact_in_numpy_blocks(rng):
    """3.24 M bright 16-bit pixels: ~1.3e16 per pair, past float64's exact integers (one
    float64 product over the whole image is tens off), so the products run in blocks."""
    stack = rng.integers(60000, 65536, (1, 1800, 1800, 2)).astype(np.uint16)
    exact = int((stack[0, ..., 0].astype(np.int64) * stack[0, ..., 1].astype(np.int64)).sum())
    assert exact > 2**53 and integer_cross_sums(stack).tolist() == [[exact]]
    full = np.full((1, 1500, 1500, 2), 65535, np.uint16)
    assert integer_cross_sums(full).tolist() == [[1500 * 1500 * 65535 * 65535]]


def test_float_co_moments_are_two_pass_at_a_large_offset(rng):
    x = rng.normal(0, 1, (2, 20, 30, 3)) + 1e8
    co = float_co_moments(x)
    rows, cols = pair_indices(3)
    for image, got in zip(x, co):
        values = [[Fraction(float(v)) for v in image[:, :, c].ravel()] for c in range(3)]
        means = [sum(v) / len(v) for v in values]
        for pair, (a, b) in enumerate(zip(rows, cols)):
            exact = sum((p - means[a]) * (q - means[b]) for p, q in zip(values[a], values[b]))
            scale = float(sum((p - means[a]) ** 2 for p in values[a])) ** 0.5 * \
                float(sum((q - means[b]) ** 2 for q in values[b])) ** 0.5
            assert abs(got[pair] - float(exact)) <= 1e-12 * scale


@pytest.mark.parametrize("dtype", ["uint8", "uint16", "int16", "bool"])
def test_pooled_covariance_of_integer_images_is_the_exact_value_rounded_once(rng, dtype):
    info = np.iinfo(np.uint8 if dtype == "bool" else dtype)
    images = [rng.integers(info.min, int(info.max) + 1, (h, w, 3)).astype(dtype)
              for h, w in ((5, 7), (8, 8), (1, 1), (3, 2))]
    stats = normstats.compute(images, covariance=True, scale=1, layout="HWC")
    assert [list(r) for r in stats.covariance] == exact_covariance(images)
    assert [list(r) for r in stats.covariance_ddof1] == exact_covariance(images, ddof=1)


def test_pooled_covariance_of_float_images_at_1e8_is_within_1e_12(rng):
    images = [rng.normal(0, 1, (h, w, 3)) * [1, 2, 0.5] + 1e8 for h, w in ((7, 5), (4, 4))]
    images[1][..., 1] += images[1][..., 0]  # correlated channels
    stats = normstats.compute(images, covariance=True, layout="HWC")
    exact = np.array(exact_covariance(images))
    scale = np.sqrt(np.outer(np.diag(exact), np.diag(exact)))
    assert (np.abs(np.array(stats.covariance) - exact) <= 1e-12 * scale).all()


def test_partitions_pool_to_the_same_bits(rng):
    """Any grouping of images into records and summaries: the same totals, the same bits."""
    for kind in ("uint8", "float64"):
        stack = rng.integers(0, 256, (30, 4, 5, 3)).astype(kind)
        if kind == "float64":
            stack = stack / 7 + 1e6
        whole = summarize(records_from_stack(stack, cross=True))
        for cuts in ([10, 20], [1, 2, 29], list(range(1, 30))):
            parts = [summarize(records_from_stack(p, cross=True)) for p in np.split(stack, cuts)]
            for order in (parts, parts[::-1]):
                merged = functools.reduce(Summary.merge, order)
                assert merged.cross == whole.cross and merged.moments == whole.moments


def test_records_hold_cross_sums_only_when_asked(rng):
    stack = rng.integers(0, 256, (2, 3, 3, 3), dtype=np.uint8)
    assert not wants_cross_sums()
    assert records_from_stack(stack).cross_sums is None
    with cross_sums_wanted():
        assert records_from_stack(stack).cross_sums.tolist() == python_cross_sums(stack)
        assert records_from_stack(stack.astype(float)).co_moments.shape == (2, 3)
        with cross_sums_wanted(False):
            assert records_from_stack(stack).cross_sums is None
    assert summarize(records_from_stack(stack)).cross is None
    mixed = concat_records([records_from_stack(stack, cross=True), records_from_stack(stack)])
    assert mixed.cross_sums is None  # never a covariance of some of the images
    both = concat_records([records_from_stack(stack, cross=True)] * 2)
    assert both.cross_sums.tolist() == python_cross_sums(stack) * 2


def test_decoded_images_keep_their_cross_sums_small_and_large(rng):
    """Small images wait in the arena and are reduced in batches, large ones at once."""
    images = [rng.integers(0, 256, shape, dtype=np.uint8)
              for shape in ((4, 4, 3), (4, 4, 3), (100, 90, 3), (4, 4, 3), (5, 5, 1))]
    with cross_sums_wanted():
        rows = Uint8Rows(capacity=len(images))
        for i, image in enumerate(images):
            slot = rows.take(image.nbytes).reshape(image.shape)
            slot[:] = image
            rows.add(str(i), slot, ("L",) if image.shape[2] == 1 else ("R", "G", "B"))
        colour, grey = rows.records()
    assert colour.cross_sums.tolist() == [python_cross_sums(images[i][None])[0]
                                          for i in (0, 1, 2, 3)]
    assert grey.cross_sums.shape == (1, 0)
    assert Uint8Rows(capacity=1).records() == []


def test_impossible_cross_sums_are_rejected(rng):
    records = records_from_stack(rng.integers(0, 256, (3, 4, 4, 3), dtype=np.uint8), cross=True)
    assert not impossible_rows(records).any()
    forged = records.cross_sums.copy()
    forged[1, 0] = int(np.sqrt(records.sums_sq[1, 0] * records.sums_sq[1, 1])) + 10
    forged[2, 2] = -1
    assert impossible_rows(replace(records, cross_sums=forged)).tolist() == [False, True, True]
    floats = records_from_stack(rng.normal(size=(2, 4, 4, 2)), cross=True)
    assert not impossible_rows(floats).any()
    assert impossible_rows(replace(floats, co_moments=floats.co_moments * 0 + np.inf)).all()


def test_co_moments_of_vectors_match_numpy_cov(rng):
    x = rng.normal(size=(500, 4)) @ rng.normal(size=(4, 4)) + 1e4
    np.testing.assert_allclose(CoMoments.from_floats(x).covariance(ddof=1),
                               np.cov(x, rowvar=False), rtol=1e-11, atol=1e-9)
    ints = rng.integers(-1000, 1000, (300, 3))
    exact = CoMoments.from_integers(ints).exact(ddof=1)
    centred = ints - ints.mean(axis=0)
    assert exact[0][1] == Fraction(int((ints[:, 0] * ints[:, 1]).sum()) * 300 - int(
        ints[:, 0].sum()) * int(ints[:, 1].sum()), 300 * 299)
    np.testing.assert_allclose(np.array(exact, dtype=float),
                               centred.T @ centred / 299, rtol=1e-13)


def test_integer_gram_is_exact_for_int64_near_2_to_62():
    values = np.array([[2**62 - 1, -(2**62)], [3, 2**40]], np.int64)
    gram = integer_gram(values)
    python = values.astype(object)
    assert gram == (python.T @ python).tolist()
    assert integer_gram(np.array([[7, 5]], np.uint8)) == [[49, 35], [35, 25]]


def test_correlation_is_none_with_a_constant_channel_and_bounded_otherwise(rng):
    x = np.zeros((4, 5, 5, 2), np.uint8)
    x[..., 0] = rng.integers(0, 256, (4, 5, 5))
    assert normstats.compute(x, covariance=True, layout="NHWC").correlation is None
    x[..., 1] = x[..., 0]  # identical channels: correlation exactly 1
    assert normstats.compute(x, covariance=True, layout="NHWC").correlation == \
        ((1.0, 1.0), (1.0, 1.0))
    x[..., 1] = 255 - x[..., 0]
    assert normstats.compute(x, covariance=True, layout="NHWC").correlation == \
        ((1.0, -1.0), (-1.0, 1.0))
