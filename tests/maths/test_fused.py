import numpy as np
import pytest

from normstats.maths import fused
from normstats.maths.image_moments import extrema, integer_sums


def test_the_compiled_kernel_is_built_with_the_install():
    """The kernel is compiled by ``pip install``: a broken build fails here, never skips."""
    from normstats.maths import _moments

    assert fused.available() and callable(_moments.moments)


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
    # 6.7 M values of 255 per channel: each uint32 lane of squares holds 65,536 blocks of
    # 96 bytes (65,536 · 255² < 2**32) and must be flushed before the 65,537th; this image
    # has 70,000 · C blocks.
    stack = np.full((1, 7000, 960, channels), 255, dtype=np.uint8)
    sums, squares, low, high = fused.uint8_moments(stack)
    assert squares.tolist() == [[255**2 * 7000 * 960] * channels]
    assert sums.tolist() == [[255 * 7000 * 960] * channels]
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


@pytest.mark.parametrize("shape", [(3, 5, 7, 3), (2, 1, 1, 1), (1, 9, 11, 2)])
def test_numpy_fallback_kernel_keeps_the_kernels_contract(shape, rng):
    """Used when the compiled kernel is missing: same accumulate-into-outputs contract."""
    from normstats.maths import fused as fused_module

    stack = rng.integers(0, 256, size=shape, dtype=np.uint8)
    n, c = shape[0], shape[3]
    out = fused.outputs(n, c)
    out[0][:] = 7  # accumulates onto what is there
    fused_module._numpy_kernel(stack.reshape(n, -1), *out)
    sums, squares = integer_sums(stack)
    low, high = extrema(stack)
    assert out[0].tolist() == (sums + 7).tolist() and out[1].tolist() == squares.tolist()
    assert out[2].tolist() == low.tolist() and out[3].tolist() == high.tolist()


@pytest.mark.parametrize("channels", [5, 7, 128])
def test_unusual_channel_counts_keep_every_lane_on_its_channel(channels, rng):
    """96 is not a multiple of 5 or 7: the lane count is then the largest multiple of C."""
    stack = rng.integers(0, 256, size=(2, 13, 11, channels), dtype=np.uint8)
    sums, squares, low, high = fused.uint8_moments(stack)
    expected_sums, expected_squares = integer_sums(stack)
    assert sums.tolist() == expected_sums.tolist()
    assert squares.tolist() == expected_squares.tolist()
    assert low.tolist() == extrema(stack)[0].tolist()


def test_the_kernel_refuses_buffers_of_the_wrong_size_instead_of_overrunning_them():
    from normstats.maths import _moments

    images = np.zeros((2, 12), np.uint8)
    sums, squares, lows, highs = fused.outputs(2, 3)
    with pytest.raises(ValueError, match="sums holds 8 bytes"):
        _moments.moments(images, 2, 3, sums[:1, :1], squares, lows, highs)
    with pytest.raises(ValueError, match="whole number of pixels"):
        _moments.moments(np.zeros((2, 13), np.uint8), 2, 3, sums, squares, lows, highs)
    with pytest.raises(ValueError, match="rows of equal size"):
        _moments.moments(np.zeros(25, np.uint8), 2, 3, sums, squares, lows, highs)
    with pytest.raises(ValueError, match="channels"):
        _moments.moments(images, 2, 0, sums, squares, lows, highs)
    with pytest.raises(TypeError):  # a read-only output
        _moments.moments(images, 2, 3, b"\0" * 48, squares, lows, highs)
    with pytest.raises(ValueError, match="low_sums holds"):
        _moments.exponent_bins(np.zeros((3, 2), np.int64), 2, np.zeros(4, np.int64),
                               np.zeros((2048, 2), np.int64))


def test_a_missing_kernel_is_said_once_and_numpy_gives_the_same_answer(monkeypatch, caplog, rng):
    """A source tree used without ``pip install`` has no compiled kernel: one line says so
    and numpy's passes answer, bit for bit."""
    import builtins
    import logging

    stack = rng.integers(0, 256, size=(3, 9, 7, 3), dtype=np.uint8)
    expected = fused.uint8_moments(stack)
    real_import = builtins.__import__

    def without_kernel(name, globals=None, locals=None, fromlist=(), level=0):
        if fromlist and "_moments" in fromlist:
            raise ImportError("no compiled kernel in this tree")
        return real_import(name, globals, locals, fromlist, level)

    monkeypatch.setattr(builtins, "__import__", without_kernel)
    fused._extension.cache_clear()
    try:
        with caplog.at_level(logging.WARNING, logger="normstats.maths.fused"):
            assert not fused.available()
            got = fused.uint8_moments(stack)
            fused.uint8_moments(stack)
        assert [r.getMessage() for r in caplog.records] == [fused.MISSING_NOTICE]
        assert fused.exponent_bins() is None
    finally:
        monkeypatch.setattr(builtins, "__import__", real_import)
        fused._extension.cache_clear()
    assert [a.tolist() for a in got] == [a.tolist() for a in expected]
    assert fused.available()
