from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from normstats.maths.exact import FIXED_BITS, fixed_sum, fixed_to_float, int64_sum, to_fixed

finite = st.floats(allow_nan=False, allow_infinity=False, min_value=-1e300, max_value=1e300)


@settings(max_examples=60, deadline=None)
@given(hnp.arrays(np.float64, st.tuples(st.integers(0, 40), st.integers(1, 3)), elements=finite))
def test_fixed_sum_is_the_exact_rational_sum(values):
    totals = fixed_sum(values)
    for c in range(values.shape[1]):
        exact = sum((Fraction(v) for v in values[:, c]), Fraction(0))
        assert Fraction(totals[c], 2**FIXED_BITS) == exact


def test_fixed_sum_does_not_depend_on_order_or_grouping(rng):
    values = rng.normal(size=(1000, 3)) * 10.0 ** rng.integers(-200, 200, size=(1000, 1))
    whole = fixed_sum(values)
    parts = [fixed_sum(values[i:i + 7]) for i in range(0, 1000, 7)]
    assert [sum(p[c] for p in parts) for c in range(3)] == whole
    assert fixed_sum(values[::-1]) == whole


def test_subnormals_and_signs_are_exact():
    values = np.array([[5e-324], [-5e-324], [2.5e-310], [1e308]])
    assert Fraction(fixed_sum(values)[0], 2**FIXED_BITS) == sum(Fraction(v) for v in values[:, 0])
    assert int(to_fixed(np.array([5e-324]))[0]) == 2 ** (FIXED_BITS - 1074)


def test_non_finite_values_are_refused():
    with pytest.raises(ValueError, match="finite"):
        fixed_sum(np.array([[np.nan]]))


def test_fixed_to_float_is_correctly_rounded():
    assert fixed_to_float(1 << FIXED_BITS, 3) == 1 / 3


@settings(max_examples=60, deadline=None)
@given(hnp.arrays(np.int64, st.tuples(st.integers(0, 50), st.integers(1, 2))))
def test_int64_sum_never_overflows(values):
    assert int64_sum(values) == [sum(int(v) for v in values[:, c]) for c in range(values.shape[1])]


def _photo_like_stack(rng: np.random.Generator, count: int, size: int = 16) -> np.ndarray:
    """Smooth uint8 (count, size, size, 3) crops with an edge and mild noise: contrast
    varies a hundredfold, so per-image stds spread over many float exponents."""
    ramp = np.linspace(0.0, 1.0, size)
    level = rng.uniform(0, 255, (count, 1, 1, 3))
    slope = rng.normal(0, 1, (count, 1, 1, 3)) * 10.0 ** rng.uniform(-1, 2, (count, 1, 1, 1))
    edge = (ramp[None, :, None, None] > rng.uniform(0, 1, (count, 1, 1, 1))) * rng.normal(
        0, 40, (count, 1, 1, 3))
    noise = rng.normal(0, 1, (count, size, size, 3)) * rng.uniform(0, 3, (count, 1, 1, 1))
    pixels = level + slope * ramp[None, :, None, None] + edge + noise
    return np.clip(np.broadcast_to(pixels, (count, size, size, 3)), 0, 255).astype(np.uint8)


def _photo_like_stds(rng: np.random.Generator, count: int) -> np.ndarray:
    """Per-image std (ddof 0) of `_photo_like_stack` crops, as float64 (N, 3)."""
    size = 16
    stack = _photo_like_stack(rng, count, size)
    sums = stack.reshape(count, -1, 3).astype(np.int64).sum(axis=1)
    squares = (stack.reshape(count, -1, 3).astype(np.int64) ** 2).sum(axis=1)
    n = size * size
    return np.sqrt((n * squares - sums * sums).astype(np.float64) / float(n * n))


def test_fixed_sum_of_photo_like_stds_is_exact_across_many_exponents(rng):
    stds = _photo_like_stds(rng, 3000)
    assert len(np.unique(np.frexp(stds)[1])) >= 8  # the data the exponent loop was slow on
    totals = fixed_sum(stds)
    for c in range(3):
        exact = sum((Fraction(v) for v in stds[:, c]), Fraction(0))
        assert Fraction(totals[c], 2**FIXED_BITS) == exact
        assert fixed_to_float(totals[c], len(stds)) == float(exact / len(stds))


def test_fixed_sum_spans_every_exponent_at_once(rng):
    exponents = np.arange(-1074, 1024)
    values = np.ldexp(rng.uniform(0.5, 1.0, (exponents.size, 2)) * rng.choice([-1, 1], (1, 2)),
                      exponents[:, None])
    values = values[np.isfinite(values).all(axis=1)]
    totals = fixed_sum(values)
    for c in range(2):
        assert Fraction(totals[c], 2**FIXED_BITS) == sum(Fraction(v) for v in values[:, c])


def test_numpy_binning_without_the_compiled_kernel_gives_the_same_exact_sums(rng, monkeypatch):
    from normstats.maths import fused

    values = np.concatenate([_photo_like_stds(rng, 500),
                             rng.normal(size=(500, 3)) * 10.0 ** rng.integers(-300, 300, (500, 3)),
                             np.array([[5e-324, -2.5e-310, 0.0]])])
    compiled = fixed_sum(values)
    monkeypatch.setattr(fused, "exponent_bins", lambda: None)
    assert fixed_sum(values) == compiled
    for c in range(3):
        assert Fraction(compiled[c], 2**FIXED_BITS) == sum(Fraction(v) for v in values[:, c])


def test_summary_of_photo_like_images_is_the_exact_sum_of_rounded_per_image_stds(rng):
    import math

    from normstats.maths.records import records_from_stack
    from normstats.maths.summary import summarize

    stack = _photo_like_stack(rng, 2000)
    summary = summarize(records_from_stack(stack))
    pixels = stack.reshape(len(stack), -1, 3).astype(object)
    n = pixels.shape[1]
    for c in range(3):
        std0 = std1 = var0 = Fraction(0)
        for image in pixels[:, :, c]:
            s, q = sum(image), sum(v * v for v in image)
            # Each per-image value is rounded once from its exact rational, as documented.
            var = float(Fraction(n * q - s * s, n * n))
            var0 += Fraction(var)
            std0 += Fraction(math.sqrt(var))
            std1 += Fraction(math.sqrt(float(Fraction(n * q - s * s, n * (n - 1)))))
        assert Fraction(summary.std_sum[c], 2**FIXED_BITS) == std0
        assert Fraction(summary.std_ddof1_sum[c], 2**FIXED_BITS) == std1
        assert Fraction(summary.var_sum[c], 2**FIXED_BITS) == var0
        assert summary.minimum[c] == stack[..., c].min()
        assert summary.maximum[c] == stack[..., c].max()


def test_int64_sum_adds_directly_only_where_no_sum_can_pass_int64():
    """Rows times the largest magnitude below 2**63: summed as they are (the records of
    8-bit images); at 2**63 already, the halves are summed apart, else the total wraps."""
    assert int64_sum(np.array([[-5, 2**61], [3, 2**61], [1, 2**61]])) == [-1, 3 * 2**61]
    assert int64_sum(np.full((2, 1), 2**62, dtype=np.int64)) == [2**63]
    assert int64_sum(np.full((2, 1), -2**62, dtype=np.int64)) == [-2**63]
    assert int64_sum(np.zeros((0, 2), np.int64)) == [0, 0]


def test_to_fixed_is_each_value_times_the_fixed_point_unit_exactly():
    values = [0.1, -2.5, 1e-300, 0.0, 2.2250738585072014e-308, 5e-324, -1.5e300]
    fixed = to_fixed(np.array(values))
    assert fixed.dtype == object and all(type(v) is int for v in fixed)
    assert [Fraction(v, 1 << FIXED_BITS) for v in fixed] == [Fraction(v) for v in values]
    for function in (to_fixed, fixed_sum):
        with pytest.raises(ValueError) as caught:
            function(np.array([1.0, np.inf]))
        assert str(caught.value) == f"{function.__name__} needs finite values"


def test_the_numpy_bins_are_exact_for_the_smallest_normals_and_many_columns(monkeypatch):
    """Without the compiled kernel (numpy's bincount of the pieces): the implicit leading
    bit starts at the smallest normal exponent, and 3-D values sum along their axis."""
    from normstats.maths import fused

    values = np.array([[2.2250738585072014e-308, -0.5], [4.450147717014403e-308, 3.0],
                       [5e-324, 1e300], [-2.2250738585072014e-308, 1e-300]])
    expected = [int(sum(Fraction(float(v)) for v in values[:, c]) * (1 << FIXED_BITS))
                for c in range(2)]
    assert fixed_sum(values) == expected
    monkeypatch.setattr(fused, "exponent_bins", lambda: None)
    assert fixed_sum(values) == expected


def test_int64_sum_of_one_column_of_values():
    """A 1-D array is one column: its exact sum, with or without the 32-bit halves."""
    assert int64_sum(np.array([3, -4, 5], np.int64)) == [4]
    big = np.full(5, 2**62, np.int64)
    assert int64_sum(big) == [5 * 2**62]
    assert int64_sum(np.array([[1, 2], [3, 4]]), axis=1) == [3, 7]
