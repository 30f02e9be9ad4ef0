import numpy as np
import pytest

from normstats.maths import fused
from normstats.maths.image_moments import extrema, integer_sums


def test_numba_a_hard_dependency_compiles_the_kernel():
    """numba is a dependency: a broken install fails here (and below) instead of skipping."""
    import numba  # noqa: F401 - the import itself is the check

    assert fused.available()


@pytest.mark.parametrize("shape", [(3, 5, 7, 3), (2, 1, 1, 1), (1, 33, 31, 4), (2, 9, 11, 2),
                                   (1, 1100, 1000, 3)])
def test_compiled_kernel_equals_the_numpy_kernels(shape, rng):
    stack = rng.integers(0, 256, size=shape, dtype=np.uint8)
    sums, squares, low, high = fused.uint8_moments(stack)
    expected_sums, expected_squares = integer_sums(stack)
    expected_low, expected_high = extrema(stack)
    assert sums.tolist() == expected_sums.tolist()
    assert squares.tolist() == expected_squares.tolist()
    assert low.tolist() == expected_low.tolist() and high.tolist() == expected_high.tolist()


def test_lanes_never_overflow_at_the_maximum():
    # 3.3 M values of 255 in one image: int32 lanes must be flushed before 2**31.
    stack = np.full((1, 1100, 1000, 3), 255, dtype=np.uint8)
    _, squares, _, _ = fused.uint8_moments(stack)
    assert squares.tolist() == [[255**2 * 1100 * 1000] * 3]


def test_strided_input_is_handled():
    stack = np.arange(2 * 4 * 6 * 3, dtype=np.uint8).reshape(2, 4, 6, 3)[:, ::2, ::3]
    assert fused.uint8_moments(stack)[0].tolist() == integer_sums(stack)[0].tolist()
