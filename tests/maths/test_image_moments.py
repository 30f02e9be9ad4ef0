import numpy as np
import pytest

from normstats.maths.image_moments import extrema, float_moments, integer_sums


def python_sums(stack):
    n, h, w, c = stack.shape
    values = stack.reshape(n, h * w, c).tolist()
    sums = [[sum(int(p[k]) for p in img) for k in range(c)] for img in values]
    squares = [[sum(int(p[k]) ** 2 for p in img) for k in range(c)] for img in values]
    return sums, squares


@pytest.mark.parametrize("dtype", [np.uint8, np.int8, np.uint16, np.int16, np.bool_])
@pytest.mark.parametrize("shape", [(3, 5, 7, 3), (2, 4, 300, 1), (1, 2, 1100, 4), (4, 1, 1, 2)])
def test_integer_sums_are_exact_for_every_supported_dtype(dtype, shape, rng):
    if dtype == np.bool_:
        stack = rng.integers(0, 2, size=shape).astype(bool)
    else:
        info = np.iinfo(dtype)
        stack = rng.integers(info.min, info.max, size=shape, endpoint=True).astype(dtype)
    sums, squares = integer_sums(stack)
    expected_sums, expected_squares = python_sums(stack)
    assert sums.tolist() == expected_sums
    assert squares.tolist() == expected_squares


def test_integer_sums_at_the_dtype_maximum_stay_exact():
    # 300 columns of 255² exceed float32's exact range in one block: blocks must split.
    stack = np.full((2, 3, 300, 3), 255, dtype=np.uint8)
    sums, squares = integer_sums(stack)
    assert sums.tolist() == [[255 * 900] * 3] * 2
    assert squares.tolist() == [[255**2 * 900] * 3] * 2
    stack16 = np.full((1, 64, 64, 1), 65535, dtype=np.uint16)
    assert integer_sums(stack16)[1].tolist() == [[65535**2 * 4096]]


def test_float_moments_handle_a_large_offset(rng):
    noise = rng.normal(size=(2, 16, 16, 1))
    stack = 1e8 + noise
    mean, residual, m2 = float_moments(stack)
    for i in range(2):
        exact = np.float64(np.sum((noise[i] - noise[i].mean()) ** 2))
        assert m2[i, 0] == pytest.approx(exact, rel=1e-7)  # the offset costs 8 digits at most
        assert mean[i, 0] + residual[i, 0] == pytest.approx(stack[i].mean(), rel=1e-15)


def test_float32_input_is_accumulated_in_float64(rng):
    stack = (1e4 + rng.normal(size=(1, 256, 256, 1))).astype(np.float32)
    _, _, m2 = float_moments(stack)
    exact = np.var(stack.astype(np.float64)) * stack.size
    assert m2[0, 0] == pytest.approx(exact, rel=1e-12)


def test_constant_images_have_zero_m2():
    _, residual, m2 = float_moments(np.full((3, 4, 4, 2), 0.1))
    assert (m2 == 0).all() and (residual == 0).all()


def test_extrema_per_image_and_channel(rng):
    stack = rng.integers(0, 256, size=(3, 4, 5, 3)).astype(np.uint8)
    low, high = extrema(stack)
    assert low.tolist() == stack.min(axis=(1, 2)).astype(float).tolist()
    assert high.tolist() == stack.max(axis=(1, 2)).astype(float).tolist()


def test_blocks_keep_float32_and_float64_partial_sums_exact():
    """Rows long enough to fill a block: 8-bit squares stay below 2**24 in float32 blocks
    (int8's -128 included), 16-bit squares below 2**53 in float64 blocks."""
    rng = np.random.default_rng(11)
    cases = [rng.integers(200, 256, (2, 1, 600, 1), dtype=np.uint8),
             np.full((1, 1, 1100, 1), -128, np.int8),
             np.full((1, 1, 4_200_000, 1), 65534, np.uint16)]
    # one odd square among even ones: past the exact range of a block, the float total
    # of a longer block could not be exact (2**14·1039 + 1 > 2**24; ~1.8e16 > 2**53)
    cases[1][0, 0, 5] = 1
    cases[2][0, 0, 7] = 65535
    for stack in cases:
        sums, squares = integer_sums(stack)
        values = stack.reshape(stack.shape[0], -1).astype(np.int64)
        assert sums[:, 0].tolist() == values.sum(axis=1).tolist()
        assert squares[:, 0].tolist() == (values * values).sum(axis=1).tolist()


def test_images_of_2_to_31_pixels_are_refused():
    with pytest.raises(ValueError) as caught:
        integer_sums(np.zeros((1, 2**16, 2**15, 0), np.uint8))  # no pixel value to hold
    assert str(caught.value) == "images of 2**31 pixels or more are not supported"
