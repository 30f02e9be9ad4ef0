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
