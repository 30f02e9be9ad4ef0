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


@pytest.mark.parametrize("shape", [(400, 32, 32, 3), (1500, 28, 28, 2), (400, 31, 31, 3)])
def test_uint8_cross_sums_of_calls_that_stream_ahead(rng, kernel, shape):
    """Calls past 1 MB of small images stream their lines ahead of the reads
    (_stream_ahead.h) up to the last byte: the sums are the Python int sums, last image
    included."""
    stack = rng.integers(0, 256, shape, dtype=np.uint8)
    expected = python_cross_sums(stack[-3:])
    assert integer_cross_sums(stack)[-3:].tolist() == expected
    assert integer_cross_sums(stack).sum(axis=0).tolist() == \
        np.einsum("nhwc,nhwd->cd", stack.astype(np.int64), stack.astype(np.int64))[
            np.triu_indices(shape[3], 1)].tolist()


# a part is 1.25 MB of images (CROSS_PART_BYTES): 486 of 31x29x3, so (500, 31, 29, 3) is a
# whole part and a short one; a 700x700x3 image is a part alone; 1,600 of 28x28x1 one part
@pytest.mark.parametrize("shape", [(500, 31, 29, 3), (2, 700, 700, 3), (1000, 26, 27, 5),
                                   (1600, 28, 28, 1), (3, 2, 2, 2), (1, 1, 1, 3),
                                   (40, 6, 5, 128)])
def test_the_summary_pass_adds_the_cross_sums_of_each_part_it_reads(rng, kernel, shape):
    """`fused.uint8_summary(stack, cross=True)`: the cross kernel reads each part of the
    stack right after the moments kernel, and adds its sums onto int128 totals: the Python
    int totals over every image, across parts, with every cross kernel and the same
    moments' totals as without the cross sums."""
    from normstats.maths import fused

    stack = rng.integers(0, 256, shape, dtype=np.uint8)
    made = fused.uint8_summary(stack, cross=True)
    assert made is not None
    assert made.cross == tuple(sum(column) for column in zip(*python_cross_sums(stack))) \
        if shape[3] > 1 else made.cross == ()
    plain = fused.uint8_summary(stack)
    assert made.spreads() == plain.spreads() and plain.cross is None
    assert np.array_equal(made.extremes, plain.extremes)


def test_the_summary_pass_refuses_a_cross_kernel_or_totals_it_cannot_use():
    from normstats.maths import _moments, fused

    images, (limbs, totals) = np.zeros((2, 12), np.uint8), fused._spread_buffers(3)
    extremes, pairs = np.empty((2, 3), np.uint8), np.zeros((3, 2), np.uint64)
    with pytest.raises(ValueError, match="cross_totals holds"):
        _moments.summary(images, 2, 3, limbs, totals, extremes, _cross._C_API, pairs[:2])
    with pytest.raises(TypeError, match="need cross_totals"):
        _moments.summary(images, 2, 3, limbs, totals, extremes, _cross._C_API)
    with pytest.raises((TypeError, ValueError)):  # not the cross kernel's capsule
        _moments.summary(images, 2, 3, limbs, totals, extremes, "cross", pairs)
    with pytest.raises(ValueError, match="share memory"):
        _moments.summary(images, 2, 3, limbs, totals, extremes, _cross._C_API,
                         limbs.reshape(-1)[:6].reshape(3, 2))
    assert _moments.summary(images, 2, 3, limbs, totals, extremes, _cross._C_API, pairs)
    assert pairs.tolist() == [[0, 0]] * 3


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


# --- CoMoments and the helpers, called directly --------------------------------------------

def test_merging_co_moments_adds_every_total_and_refuses_other_kinds():
    from normstats.maths.exact import FIXED_BITS

    a = CoMoments.from_integers(np.array([[1, 2], [3, -4]]))
    b = CoMoments.from_integers(np.array([[5, 6], [0, 7], [2, 2]]))
    both = CoMoments.from_integers(np.array([[1, 2], [3, -4], [5, 6], [0, 7], [2, 2]]))
    assert a.merge(b) == both == CoMoments(5, (11, 13), (39, 24, 109), 0)
    floats = CoMoments.from_floats(np.array([[0.5, 1.0], [2.0, 3.0]]))
    assert floats.merge(floats).bits == floats.bits == FIXED_BITS
    assert floats.merge(floats).count == 4
    for other in (floats, CoMoments.from_integers(np.zeros((2, 3), np.int64))):
        with pytest.raises(ValueError) as caught:
            a.merge(other)
        assert str(caught.value) == "cannot merge co-moments of different channels or kinds"


def test_the_exact_covariance_its_ddof_and_its_scale():
    m = CoMoments.from_integers(np.array([[0, 0], [2, 4]]))
    assert m.exact() == [[1, 2], [2, 4]] and m.exact(ddof=1) == [[2, 4], [4, 8]]
    assert m.covariance(scale=2) == ((0.25, 0.5), (0.5, 1.0))
    assert m.covariance(scale=2, ddof=1) == ((0.5, 1.0), (1.0, 2.0))
    one = CoMoments.from_integers(np.array([[3, 5]]))
    assert one.exact() == [[0, 0], [0, 0]]
    for count, ddof in ((1, 1), (2, 2)):
        with pytest.raises(ValueError) as caught:
            CoMoments.from_integers(np.arange(2 * count).reshape(count, 2)).exact(ddof)
        assert str(caught.value) == f"covariance with ddof={ddof} needs more than {ddof} values"


def test_correlations_are_rounded_once_signed_and_clamped_to_one():
    import math

    m = CoMoments.from_integers(np.array([[0, 0], [1, 0], [2, 0], [3, 1]]))
    exact = m.exact()
    assert 0 < exact[0][1] < 1
    expected = math.sqrt(float(exact[0][1] ** 2 / (exact[0][0] * exact[1][1])))
    assert m.correlation() == ((1.0, expected), (expected, 1.0)) and expected == \
        pytest.approx(np.corrcoef([0, 1, 2, 3], [0, 0, 0, 1])[0, 1], rel=1e-15)
    negative = CoMoments.from_integers(np.array([[0, 3], [1, 1], [2, 1], [3, 0]]))
    assert negative.correlation()[0][1] == pytest.approx(
        np.corrcoef([0, 1, 2, 3], [3, 1, 1, 0])[0, 1], rel=1e-15) and \
        negative.correlation()[0][1] < 0
    uncorrelated = CoMoments.from_integers(np.array([[0, 1], [1, 0], [2, 1]]))
    assert math.copysign(1.0, uncorrelated.correlation()[0][1]) == 1.0  # +0.0, not -0.0
    # float columns exactly proportional: the rounded totals put cov² / (var·var) just
    # above 1 (by 4e-16); the correlation is ±1 all the same
    x = np.array([1400.888286262808, -393.70690875944604, -252.68858124780792,
                  -3899.421730054339, 463.330339207019, 547.0956613393338])
    assert CoMoments.from_floats(np.column_stack([x, x * 1.1])).correlation()[0][1] == 1.0
    tiny = np.array([0.0003709468350944102, 0.0006131890778590062, -0.0001521929584082903,
                     -0.001473887948041959, 0.001028854347803183, -0.001934959636609707,
                     -0.00023993667125803605])
    assert CoMoments.from_floats(np.column_stack([tiny, tiny * -0.3])).correlation()[0][1] \
        == -1.0


def test_co_moments_of_moments_with_nodata_counts_are_none():
    from normstats.maths.covariance import co_moments_of
    from normstats.maths.moments import IntegerMoments

    plain = IntegerMoments(2, (2, 4), (4, 16))
    assert co_moments_of(plain, (8,)) == CoMoments(2, (2, 4), (4, 8, 16), 0)
    assert co_moments_of(IntegerMoments(2, (2, 4), (4, 16), counts=(2, 1)), (8,)) is None
    assert co_moments_of(plain, None) is None and co_moments_of(None, (8,)) is None


def test_images_of_2_to_31_pixels_are_refused_before_any_read():
    huge = np.broadcast_to(np.uint8(0), (1, 2**16, 2**15, 1))  # no memory behind it
    with pytest.raises(ValueError) as caught:
        integer_cross_sums(huge)
    assert str(caught.value) == "images of 2**31 pixels or more are not supported"
    assert integer_cross_sums(huge[:, :-1]).shape == (1, 0)


def test_more_channels_than_the_kernel_takes_go_through_numpy(rng):
    stack = rng.integers(0, 256, (2, 3, 2, 129), dtype=np.uint8)
    assert integer_cross_sums(stack).tolist() == python_cross_sums(stack)


def test_uint64_columns_past_2_to_63_sum_exactly():
    values = np.array([[2**63, 1], [2**64 - 1, 2], [5, 3]], np.uint64)
    m = CoMoments.from_integers(values)
    assert m.total == (2**63 + 2**64 - 1 + 5, 6)
    python = values.astype(object)
    assert m.products == tuple((python.T @ python)[r, c] for r, c in ((0, 0), (0, 1), (1, 1)))
    below = np.array([[2**63 - 1, 1], [3, 2]], np.uint64)
    assert CoMoments.from_integers(below).total == (2**63 + 2, 3)
    empty = CoMoments.from_integers(np.zeros((0, 2), np.int64))
    assert (empty.count, empty.total, empty.products) == (0, (0, 0), (0, 0, 0))


def test_integer_gram_in_blocks_at_every_magnitude():
    def python(values: np.ndarray) -> list[list[int]]:
        exact = values.astype(object)
        return (exact.T @ exact).tolist()

    assert integer_gram(np.zeros((3, 2), np.int8)) == [[0, 0], [0, 0]]
    assert integer_gram(np.zeros((0, 3), np.int64)) == [[0] * 3] * 3
    ones = np.array([[1, -1], [-1, 0], [0, 1]], np.int8)
    assert integer_gram(ones) == python(ones) == [[2, -1], [-1, 2]]
    rows = np.random.default_rng(3).integers(-2**25, 2**25, (40, 3))  # blocks of 7 rows
    assert integer_gram(rows) == python(rows)
    a = 2**26 + 1  # a square past 2**52: one row a block, or two rows pass 2**53
    odd = np.array([[a, a], [a, a + 1]], np.int64)
    assert integer_gram(odd) == python(odd)


def test_float_co_moments_correct_the_mean_s_residual():
    """Seven equal values whose float64 mean rounds off them: every deviation is 0.5,
    the residual too, and the co-moment is exactly 0."""
    x = np.full((1, 7, 1, 2), 3000000000000001.0)
    assert float_co_moments(x).tolist() == [[0.0]]
    m = CoMoments.from_floats(x.reshape(7, 2))
    assert m.exact() == [[0, 0], [0, 0]]
    assert [Fraction(t, 1 << m.bits) for t in m.total] == [7 * Fraction(3000000000000001)] * 2


def test_float32_values_are_moments_of_their_float64_values(rng):
    x = (rng.normal(size=(1, 40, 1, 3)) * 1e-3 + 1e4).astype(np.float32)
    assert float_co_moments(x).tolist() == float_co_moments(x.astype(np.float64)).tolist()
    rows = x.reshape(40, 3)
    assert CoMoments.from_floats(rows) == CoMoments.from_floats(rows.astype(np.float64))
    small = np.array([[0.0, 0.25], [0.5, 0.0]])  # variances below 1 are kept as they are
    assert CoMoments.from_floats(small).covariance() == ((0.0625, -0.03125),
                                                         (-0.03125, 0.015625))


def test_float_cross_totals_are_exact_for_images_of_several_sizes(rng):
    from normstats.maths.covariance import float_cross_totals
    from normstats.maths.exact import FIXED_BITS

    images = [rng.normal(5, 2, (h, w, 3)) for h, w in ((2, 3), (1, 4), (2, 3), (3, 1))]
    records = concat_records([records_from_stack(i[None], cross=True) for i in images])
    totals = float_cross_totals(records.pixels, records.means, records.residuals,
                                records.co_moments)
    expected = [sum(Fraction(float(a)) * Fraction(float(b))
                    for image in images for a, b in zip(image[..., r].ravel().tolist(),
                                                        image[..., c].ravel().tolist()))
                for r, c in zip(*pair_indices(3))]
    assert [Fraction(t, 1 << FIXED_BITS) for t in totals] == pytest.approx(expected, rel=1e-13)
    assert float_cross_totals(records.pixels, records.means[:, :1], records.residuals[:, :1],
                              records.co_moments[:, :0]) == ()


def test_records_hold_cross_sums_as_told_whatever_the_context(rng):
    for dtype in ("uint8", "uint16", "int16"):
        stack = rng.integers(0, 200, (2, 3, 3, 3)).astype(dtype)
        assert records_from_stack(stack, cross=True).cross_sums.tolist() == \
            python_cross_sums(stack)
        with cross_sums_wanted():
            assert records_from_stack(stack, cross=False).cross_sums is None
    floats = rng.normal(size=(2, 3, 3, 3))
    assert records_from_stack(floats).co_moments is None
    assert records_from_stack(floats, cross=True).co_moments.tolist() == \
        float_co_moments(floats).tolist()


def test_a_uint64_column_of_exactly_2_to_63_sums_exactly():
    assert CoMoments.from_integers(np.array([[2**63, 1], [3, 2]], np.uint64)).total == \
        (2**63 + 3, 3)
