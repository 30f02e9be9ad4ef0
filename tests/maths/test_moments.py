import statistics
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from normstats.maths.moments import FloatMoments, IntegerMoments


def fraction_variance(values) -> tuple[Fraction, Fraction]:
    exact = [Fraction(v) for v in values]
    mean = sum(exact) / len(exact)
    return mean, sum((v - mean) ** 2 for v in exact) / len(exact)


@settings(max_examples=50, deadline=None)
@given(hnp.arrays(np.uint16, st.tuples(st.integers(1, 60), st.just(2))), st.integers(1, 59))
def test_integer_moments_merge_is_exact_anywhere_it_splits(values, cut):
    cut = min(cut, len(values))
    whole = IntegerMoments.from_array(values)
    if cut < len(values):
        merged = IntegerMoments.from_array(values[:cut]).merge(
            IntegerMoments.from_array(values[cut:]))
        assert merged == whole
    for c in range(2):
        mean, variance = fraction_variance(values[:, c].tolist())
        assert whole.mean()[c] == mean
        assert whole.variance()[c] == variance


def test_integer_finalize_rounds_the_exact_value_once():
    values = np.array([[0], [255], [255]], dtype=np.uint8)
    mean, variance = IntegerMoments.from_array(values).finalize(scale=255)
    assert mean == (float(Fraction(2, 3)),)
    assert variance == (float(Fraction(2, 9)),)


def test_uint16_totals_grow_past_int64_without_overflow():
    # Σx² of 3e9 pixels at 65535 exceeds int64: merging is in Python ints.
    one = IntegerMoments(count=10**9, total=(65535 * 10**9,), total_sq=(65535**2 * 10**9,))
    three = one.merge(one).merge(one)
    assert three.total_sq[0] == 3 * 65535**2 * 10**9 > 2**63
    assert three.variance()[0] == 0


@pytest.mark.parametrize("offset", [0.0, 1e8])
def test_float_moments_adversarial_partitions(offset, rng):
    # The dask reductions test case: [1,2,3]*10 + 1e8, here split into a huge and a tiny part.
    values = np.concatenate([np.tile([1.0, 2.0, 3.0], 10_000), rng.normal(size=7)]) + offset
    huge = FloatMoments.from_array(values[:-3, None])
    tiny = FloatMoments.from_array(values[-3:, None])
    mean, variance = fraction_variance(values.tolist())
    merged = huge.merge(tiny)
    assert merged.finalize()[0][0] == pytest.approx(float(mean), rel=1e-15)
    assert merged.finalize()[1][0] == pytest.approx(float(variance), rel=1e-12)
    assert tiny.merge(huge) == merged


def test_float32_at_1e4_gives_variance_within_1e_9(rng):
    values = (1e4 + rng.normal(size=(200_000, 1))).astype(np.float32)
    exact = statistics.pvariance([Fraction(float(v)) for v in values[:, 0]])
    assert abs(FloatMoments.from_array(values).finalize()[1][0] - float(exact)) < 1e-9


def test_constant_float_data_has_variance_exactly_zero():
    mean, variance = FloatMoments.from_array(np.full((1000, 3), 0.1)).finalize()
    assert variance == (0.0, 0.0, 0.0)
    assert mean == (0.1, 0.1, 0.1)


def test_merging_different_channel_counts_is_refused():
    a = IntegerMoments.from_array(np.zeros((2, 3), np.uint8))
    b = IntegerMoments.from_array(np.zeros((2, 1), np.uint8))
    with pytest.raises(ValueError, match="channels"):
        a.merge(b)


def _fixed(value: int) -> Fraction:
    from normstats.maths.exact import FIXED_BITS

    return Fraction(value, 1 << FIXED_BITS)


def test_float_records_pool_exactly_over_sizes_residuals_and_valid_counts():
    """Σ n·(mean + residual) and Σ (M2 + n·(mean + residual)²) as exact fractions, with
    means whose Veltkamp halves are all non-zero, images of three sizes, and per-channel
    valid counts."""
    pixels = np.array([3, 5, 3, 8])
    means = np.array([[0.1, 1e8 + 0.3], [2.7, -0.7], [1.0 / 3, 5.5], [-4.25, 0.2]])
    residuals = np.array([[1.3e-17, -2.9e-9], [-7.1e-17, 1.1e-17], [3.3e-18, 0.0],
                          [1e-16, -5e-17]])
    m2s = np.array([[0.5, 1.25], [0.0, 3.0], [2.0, 0.75], [9.5, 0.125]])
    found = FloatMoments.from_records(pixels, means, residuals, m2s)
    for c in range(2):
        exact = [Fraction(float(m)) + Fraction(float(r)) for m, r in zip(means[:, c],
                                                                            residuals[:, c])]
        assert _fixed(found.total[c]) == sum(int(n) * m for n, m in zip(pixels, exact))
        assert _fixed(found.total_sq[c]) == sum(Fraction(float(q)) + int(n) * m * m
                                                for n, m, q in zip(pixels, exact, m2s[:, c]))
    assert found.count == 19 and found.counts is None
    valid = np.array([[3, 0], [5, 5], [1, 3], [8, 2]])
    masked = FloatMoments.from_records(pixels, means, residuals, m2s, valid)
    assert masked.count == 19 and masked.counts == (17, 10)
    for c in range(2):
        alone = FloatMoments.from_records(valid[:, c], means[:, c:c + 1],
                                          residuals[:, c:c + 1], m2s[:, c:c + 1])
        assert (masked.total[c], masked.total_sq[c]) == (alone.total[0], alone.total_sq[0])
    assert masked.channel_counts() == (17, 10) and found.channel_counts() == (19, 19)


def test_merged_counts_where_one_side_left_values_out():
    plain = IntegerMoments(4, (8, 12), (20, 40))
    some = IntegerMoments(6, (3, 5), (9, 25), counts=(6, 2))
    assert plain.merge(some).counts == (10, 6) and some.merge(plain).counts == (10, 6)
    assert plain.merge(plain).counts is None
    floats = FloatMoments(4, (0, 0), (0, 0))
    assert floats.merge(FloatMoments(2, (0, 0), (0, 0), counts=(1, 2))).counts == (5, 6)


def test_default_ddof_scale_and_too_few_values():
    m = IntegerMoments.from_array(np.array([[1], [2], [4]], np.uint8))
    assert m.variance() == (Fraction(14, 9),) and m.variance(1) == (Fraction(7, 3),)
    assert m.finalize() == ((7 / 3,), (float(Fraction(14, 9)),))
    f = FloatMoments.from_array(np.array([[1.0], [2.0], [6.0]]))
    assert f.variance() == (Fraction(14, 3),) and f.variance(1) == (Fraction(7),)
    for moments in (IntegerMoments.from_array(np.array([[5]], np.uint8)),
                    FloatMoments.from_array(np.array([[5.0]]))):
        with pytest.raises(ValueError) as caught:
            moments.finalize(ddof=1)
        assert str(caught.value) == "variance with ddof=1 needs more than 1 values"


def test_values_of_any_rank_are_one_stack_of_pixels():
    from normstats.maths.moments import as_pixel_stack

    assert as_pixel_stack(np.float64(3.0)).shape == (1, 1, 1, 1)
    assert as_pixel_stack(np.zeros((4, 5, 2))).shape == (1, 20, 1, 2)
    assert as_pixel_stack(np.zeros((7, 3))).shape == (1, 7, 1, 3)
