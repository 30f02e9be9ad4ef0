import numpy as np
import pytest

from normstats.maths import fused
from normstats.maths.image_moments import extrema, integer_sums


def test_numba_a_hard_dependency_compiles_the_kernel():
    """numba is a dependency: a broken install fails here (and below) instead of skipping."""
    import numba  # noqa: F401 - the import itself is the check

    assert fused.available()


@pytest.mark.parametrize("shape", [(3, 5, 7, 3), (2, 1, 1, 1), (1, 33, 31, 4), (2, 9, 11, 2),
                                   (1, 1100, 1000, 3), (4, 300, 300, 1), (2, 257, 256, 3),
                                   (5, 3, 3, 1)])
def test_compiled_kernel_equals_the_numpy_kernels(shape, rng):
    stack = rng.integers(0, 256, size=shape, dtype=np.uint8)
    sums, squares, low, high = fused.uint8_moments(stack)
    expected_sums, expected_squares = integer_sums(stack)
    expected_low, expected_high = extrema(stack)
    assert sums.tolist() == expected_sums.tolist()
    assert squares.tolist() == expected_squares.tolist()
    assert low.tolist() == expected_low.tolist() and high.tolist() == expected_high.tolist()


@pytest.mark.parametrize("channels", [1, 2, 3, 4])
def test_accumulators_never_overflow_at_the_maximum(channels):
    # 1.1 M values of 255 per channel: int32 lanes and the uint32 sums of squares of the
    # grey and RGB kernels (2**32 / 255² ≈ 66,000 pixels) must be flushed in time.
    stack = np.full((1, 1100, 1000, channels), 255, dtype=np.uint8)
    sums, squares, low, high = fused.uint8_moments(stack)
    assert squares.tolist() == [[255**2 * 1100 * 1000] * channels]
    assert sums.tolist() == [[255 * 1100 * 1000] * channels]
    assert low.tolist() == high.tolist() == [[255.0] * channels]


def test_rows_filled_one_image_at_a_time_equal_the_stack(rng):
    stack = rng.integers(0, 256, size=(3, 7, 5, 3), dtype=np.uint8)
    out = fused.outputs(3, 3)
    for row in range(3):
        fused.uint8_moments_into(stack[row], row, *out)
    expected = fused.uint8_moments(stack)
    assert [a.tolist() for a in out[:2]] == [a.tolist() for a in expected[:2]]
    assert out[2].tolist() == expected[2].tolist() and out[3].tolist() == expected[3].tolist()


def test_strided_input_is_handled():
    stack = np.arange(2 * 4 * 6 * 3, dtype=np.uint8).reshape(2, 4, 6, 3)[:, ::2, ::3]
    assert fused.uint8_moments(stack)[0].tolist() == integer_sums(stack)[0].tolist()
