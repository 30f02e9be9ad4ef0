import math

import numpy as np
import pytest

from normstats.maths import _moments, fused
from normstats.maths.image_moments import extrema, integer_sums

# The kernel's own constants (normstats/maths/_moments.c): the 32-bit lanes are flushed
# every SEGMENT_PIXELS pixels, the 16-bit sums widened every SUM_STEPS pairs of periods.
SEGMENT_PIXELS = 65536
SUM_STEPS = 128


@pytest.fixture(params=_moments._variants())
def variant(request):
    """Each kernel variant this CPU runs (AVX-512 with and without VNNI, AVX2, the
    portable loop), made the one `moments` uses for the test."""
    previous = _moments._select(request.param)
    yield request.param
    _moments._select(previous)


def period(channels: int) -> int:
    """The vector kernels' period: lcm(C, 64) bytes, byte i holding channel i % C."""
    return math.lcm(channels, 64)


def oracle(flat: np.ndarray, channels: int) -> list[list[list[int]]]:
    """Sums, squares, minima and maxima of (N, bytes) uint8 rows, in int64 (exact here)."""
    values = flat.reshape(flat.shape[0], -1, channels)
    wide = values.astype(np.int64)
    return [wide.sum(axis=1).tolist(), (wide * wide).sum(axis=1).tolist(),
            values.min(axis=1, initial=255).tolist(), values.max(axis=1, initial=0).tolist()]


def kernel(flat: np.ndarray, channels: int) -> list[list[list[int]]]:
    """The compiled kernel on (N, bytes) rows, as `oracle` gives them."""
    out = fused.outputs(flat.shape[0], channels)
    _moments.moments(flat, flat.shape[0], channels, *out)
    return [a.tolist() for a in out]


def test_the_compiled_kernel_is_built_with_the_install():
    """The kernel is compiled by ``pip install``: a broken build fails here, never skips."""
    from normstats.maths import _moments

    assert fused.available() and callable(_moments.moments)


# The last four: calls past 1 MB of small images, which stream their lines ahead of the
# reads (_stream_ahead.h) up to the last byte, through each kernel's steps (three
# channels, one, a period of five blocks) and the catch-up after a row's tail blocks.
@pytest.mark.parametrize("shape", [(3, 5, 7, 3), (2, 1, 1, 1), (1, 33, 31, 4), (2, 9, 11, 2),
                                   (1, 1100, 1000, 3), (4, 300, 300, 1), (2, 257, 256, 3),
                                   (5, 3, 3, 1), (400, 32, 32, 3), (1500, 28, 28, 1),
                                   (300, 31, 29, 5), (400, 31, 31, 3)])
def test_compiled_kernel_equals_the_numpy_kernels(shape, rng, variant):
    stack = rng.integers(0, 256, size=shape, dtype=np.uint8)
    sums, squares, low, high, _ = fused.uint8_moments(stack)
    expected_sums, expected_squares = integer_sums(stack)
    expected_low, expected_high = extrema(stack)
    assert sums.tolist() == expected_sums.tolist()
    assert squares.tolist() == expected_squares.tolist()
    assert low.tolist() == expected_low.tolist() and high.tolist() == expected_high.tolist()


@pytest.mark.parametrize("channels", [1, 2, 3, 4])
def test_accumulators_never_overflow_at_the_maximum(channels, variant):
    # 6.7 M values of 255 per channel: 102 flushes of the vector kernels' 32-bit lanes;
    # the portable loop's uint32 lanes hold 65,536 blocks of 96 bytes (65,536 · 255² <
    # 2**32) and must be flushed before the 65,537th; this image has 70,000 · C blocks.
    stack = np.full((1, 7000, 960, channels), 255, dtype=np.uint8)
    sums, squares, low, high, _ = fused.uint8_moments(stack)
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
def test_unusual_channel_counts_keep_every_lane_on_its_channel(channels, rng, variant):
    """96 is not a multiple of 5 or 7: the lane count is then the largest multiple of C."""
    stack = rng.integers(0, 256, size=(2, 13, 11, channels), dtype=np.uint8)
    sums, squares, low, high, _ = fused.uint8_moments(stack)
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


def test_a_missing_kernel_is_said_by_the_users_process_and_numpy_gives_the_same_answer(
        monkeypatch, caplog, rng):
    """An installation built without a C compiler has no compiled kernel: the process the
    user started says so in one line as it loads the module, its pool workers do not, and
    numpy's passes answer, bit for bit."""
    import builtins
    import logging
    import multiprocessing

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
            fused._say_when_missing()  # what loading the module does
            assert [(r.name, r.getMessage()) for r in caplog.records] == [
                ("normstats.maths.fused", fused.MISSING_NOTICE)]  # said by the user's process
            assert not fused.available()
            got = fused.uint8_moments(stack)
            fused.uint8_moments(stack)
            assert fused.kernel_info().startswith("numpy (no compiled kernel")
            # a worker loads the module too, named by multiprocessing before any import
            monkeypatch.setattr(multiprocessing.current_process(), "name", "SpawnPoolWorker-1")
            fused._say_when_missing()
        assert [r.getMessage() for r in caplog.records] == [fused.MISSING_NOTICE]
        assert fused.exponent_bins() is None
    finally:
        monkeypatch.undo()
        fused._extension.cache_clear()
    assert got[4] is None  # numpy's kernel bins no spreads: the summary computes them
    assert [a.tolist() for a in got[:4]] == [a.tolist() for a in expected[:4]]
    assert fused.available()


def test_the_missing_kernel_notice_says_what_to_install_and_how_to_rebuild():
    notice = fused.MISSING_NOTICE
    assert "a C compiler and the Python headers" in notice
    assert "`apt install build-essential python3-dev`" in notice
    assert "`pip install --force-reinstall --no-deps .`" in notice
    assert "`pip install -e .`" in notice
    assert "pip install normstats" not in notice  # not how this project installs


def test_kernel_info_names_the_variant_this_cpu_runs():
    assert fused.kernel_info() == f"compiled C ({_moments._variants()[0]})"


def test_every_variant_is_listed_best_first_and_selectable():
    names = _moments._variants()
    assert names[-1] == "portable" and len(set(names)) == len(names)
    assert _moments._select("portable") is None  # the automatic choice until then
    try:
        assert _moments._select(names[0]) == "portable"
    finally:
        _moments._select(None)
    with pytest.raises(ValueError, match="no kernel variant"):
        _moments._select("sse9")


@pytest.mark.parametrize("channels", [3, 48, 127])
def test_the_automatic_choice_is_exact_for_short_and_long_rows(channels, rng):
    """Past 16 channels, short rows take the portable loop and long ones a vector
    kernel: the same results either way."""
    for pixels in (1, 10, 100, 2000):
        flat = rng.integers(0, 256, size=(3, pixels * channels), dtype=np.uint8)
        assert kernel(flat, channels) == oracle(flat, channels), pixels


@pytest.mark.parametrize("channels", [1, 2, 3, 4, 5, 6, 7, 8, 12, 100, 127, 128])
def test_a_single_byte_counts_for_the_channel_of_its_offset(channels, variant):
    """Image i is zero but for one byte: every offset of two periods and of the blocks
    and tail after them in turn (one in 37 for the longest periods). A lane read for the
    wrong channel moves that byte."""
    length = 2 * period(channels) + 2 * period(channels) // channels * channels + channels
    offsets = np.arange(length)
    if length > 2048:
        offsets = np.unique(np.concatenate([offsets[::37], offsets[-200:]]))
    flat = np.zeros((len(offsets), length), np.uint8)
    flat[np.arange(len(offsets)), offsets] = 200
    sums, squares, lows, highs = kernel(flat, channels)
    expected = np.zeros((len(offsets), channels), np.int64)
    expected[np.arange(len(offsets)), offsets % channels] = 200
    assert sums == expected.tolist()
    assert squares == (expected * 200).tolist()
    assert highs == expected.tolist()
    assert lows == np.zeros_like(expected).tolist()  # every channel has zeros


@pytest.mark.parametrize("channels", [1, 2, 3, 4, 5, 6, 7, 8, 24, 127])
def test_channels_with_distinct_ranges_keep_their_own_statistics(channels, rng, variant):
    """Channel c spans [8c, 8c + 100]: any two channels mixed in a lane would show."""
    pixels = 3 * SUM_STEPS * period(channels) // channels + 17
    flat = (rng.integers(0, 101, size=(2, pixels, channels))
            + 8 * np.arange(channels) % 156).astype(np.uint8).reshape(2, -1)
    assert kernel(flat, channels) == oracle(flat, channels)


@pytest.mark.parametrize("channels", [1, 2, 3, 4, 5, 6, 7, 8])
def test_every_length_modulo_two_periods(channels, rng, variant):
    """Rows of every pixel count from 1 to past two periods, and as many from a chunk
    on (more for C > 1): the pairs of periods, the whole blocks after them and the scalar
    tail take every share of an image."""
    pixels_per_pair = 2 * period(channels) // channels
    starts = (1, SUM_STEPS * pixels_per_pair + 1)
    for pixels in [s + i for s in starts for i in range(pixels_per_pair + 1)]:
        flat = rng.integers(0, 256, size=(2, pixels * channels), dtype=np.uint8)
        assert kernel(flat, channels) == oracle(flat, channels), pixels


@pytest.mark.parametrize("channels", [1, 2, 3, 4, 5, 6, 7, 8, 48, 127])
def test_all_255_images_at_every_flush_boundary(channels, variant):
    """All-255 rows of every pixel count around one, two and three flushes of the 32-bit
    lanes. A flush takes at most 65,536 pixels of pairs of periods plus the whole blocks
    of under two periods after them; 255² · n < 2**32 only up to n = 66,051, which the
    sweep passes (one count in 13 for the long periods of many channels)."""
    step = 1 if channels <= 8 else 13
    counts = [n for start in (SEGMENT_PIXELS - 300, 2 * SEGMENT_PIXELS - 2, 3 * SEGMENT_PIXELS - 2)
              for n in range(start, start + (800 if start < SEGMENT_PIXELS else 140), step)]
    row = np.full(max(counts) * channels, 255, np.uint8)
    for pixels in counts:
        sums, squares, lows, highs = kernel(row[:pixels * channels].reshape(1, -1), channels)
        assert sums == [[255 * pixels] * channels], pixels
        assert squares == [[255 * 255 * pixels] * channels], pixels
        assert lows == highs == [[255] * channels]


def test_extremes_found_in_every_part_of_an_image(variant):
    """A minimum and a maximum in the pairs of periods, in the blocks after them and in
    the tail, each for a different channel."""
    channels = 3
    pixels = 4 * period(channels) // channels + 64 // channels + 5
    flat = np.full((3, pixels * channels), 100, np.uint8)
    for row, at in enumerate([7, 4 * period(channels) + 10, pixels * channels - 2]):
        flat[row, at] = 3
        flat[row, at - 1] = 250
    assert kernel(flat, channels) == oracle(flat, channels)


#: Below this many pixels (SUM_STEPS pairs of periods of 3 channels: 128x128x3), images
#: of three channels keep every accumulator in registers (RGB_BYTES in _moments.c).
RGB_PIXELS = SUM_STEPS * 2 * period(3) // 3


def test_three_channel_images_around_the_register_bound(rng, variant):
    """All-255 images (the 16-bit sums nearest their limit) and channels of distinct ranges
    at every pixel count from under two periods below the register bound to past a pair
    of periods above it, and a few small images: below the bound, the accumulators stay
    in registers and end by blends; above, the general end. Both exact."""
    counts = [1024, 4096, 333, *range(RGB_PIXELS - 260, RGB_PIXELS + 200)]
    for pixels in counts:
        full = np.full((1, pixels * 3), 255, np.uint8)
        assert kernel(full, 3) == oracle(full, 3), pixels
        flat = (rng.integers(0, 101, size=(2, pixels, 3)) + [0, 60, 150]).astype(np.uint8)
        assert kernel(flat.reshape(2, -1), 3) == oracle(flat.reshape(2, -1), 3), pixels


def spread_oracle(pixels: np.ndarray, sums: np.ndarray, squares: np.ndarray) -> list:
    """What numpy computes for the spreads (`IntegerRecords.image_variance`): population
    and sample variance from exact integers each rounded once, then square roots."""
    n = pixels[:, None]
    numerator = (n * squares - sums * sums).astype(np.float64)
    variance = numerator / (n * n).astype(np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        sample = np.sqrt(numerator / (n * (n - 1)).astype(np.float64))[pixels >= 2]
    return [np.sqrt(variance), sample, variance]


def spread_records(rng, count: int, channels: int) -> tuple[np.ndarray, ...]:
    """Pixel counts, sums and squares of integer records: images of one pixel (no sample
    std) to 2**20 of 8-bit values and to 4096 of signed 16-bit ones (negative sums),
    constant ones (variance 0) among them."""
    wide = rng.random(count) < 0.5
    pixels = np.where(wide, rng.choice([1, 2, 3, 1024, 4096], size=count),
                      rng.choice([1, 2, 3, 1024, 50_000, 2**20], size=count))
    values = np.where(wide[:, None], rng.integers(-32768, 32768, size=(count, channels)),
                      rng.integers(0, 256, size=(count, channels)))
    # n values of mean `values` whose squares add `spread` more: n · spread above (Σx)²
    spread = rng.integers(0, np.abs(values) + 1) * (rng.random((count, 1)) < 0.9)
    sums = pixels[:, None] * values
    squares = pixels[:, None] * values * values + spread * (pixels[:, None] > 1)
    return pixels, sums, squares


def test_integer_spreads_are_numpys_values_bit_for_bit(rng):
    """The compiled pass sums each value exactly as numpy computes it, so its fixed-point
    totals are `fixed_sum`'s of numpy's values (the oracle), and the totals of the sums and
    squares are Python's exact integer sums."""
    from normstats.maths.exact import fixed_sum

    pixels, sums, squares = spread_records(rng, 3000, 3)
    assert (sums < 0).any()  # signed 16-bit images among them
    spreads, totals, total_squares = fused.integer_spreads(pixels, sums, squares)
    for index, expected in enumerate(spread_oracle(pixels, sums, squares)):
        assert spreads[index] == fixed_sum(expected), index
    assert totals == [sum(int(v) for v in sums[:, c]) for c in range(3)]
    assert total_squares == [sum(int(v) for v in squares[:, c]) for c in range(3)]


def test_integer_spreads_of_more_channels_than_one_call_takes(rng):
    """Past 128 channels the channels go a group at a time, side by side: every channel's
    totals are those of the oracle."""
    from normstats.maths.exact import fixed_sum

    pixels, sums, squares = spread_records(rng, 40, fused.KERNEL_CHANNELS + 5)
    spreads, totals, _ = fused.integer_spreads(pixels, sums, squares)
    for index, expected in enumerate(spread_oracle(pixels, sums, squares)):
        assert spreads[index] == fixed_sum(expected), index
    assert totals == [sum(int(v) for v in column) for column in sums.T]


def test_integer_spread_totals_of_the_largest_significands_stay_exact():
    """10,000 one-pixel images of variance 2**62 − 2**9 (the largest significand, 2**53 − 1,
    at a high exponent): a bin holds 2,048 of them (near 2**64) before it is folded into
    the total, whose limbs then grow past 32 bits. The totals are exact, the squares'
    past int64 too."""
    from normstats.maths.exact import FIXED_BITS

    count, variance = 10_000, 2**62 - 2**9
    squares = np.full((count, 1), variance, np.int64)
    spreads, totals, total_squares = fused.integer_spreads(
        np.ones(count, np.int64), np.zeros_like(squares), squares)
    assert spreads[2] == [count * variance << FIXED_BITS]
    assert totals == [0] and total_squares == [count * variance]


@pytest.mark.parametrize("pixels, sums, squares", [
    (2**40, 2**20, 2**40),  # n · Σx² past int64
    (2**32, 0, 0),  # n · n past int64
    (0, 0, 0),  # an image of no pixel
    (2, 5, 1),  # (Σx)² > n · Σx²: no variance
])
def test_integer_spreads_leave_to_numpy_what_int64_cannot_hold(pixels, sums, squares):
    """None: numpy's way then computes them (with Python ints) or names the error."""
    assert fused.integer_spreads(np.array([7, pixels]), np.array([[0], [sums]]),
                                 np.array([[0], [squares]])) is None


# 2,049 images pass a fold of the bins (every 2,048); one-pixel images have no sample std,
# two-pixel ones the smallest denominator; 128 channels is the most one call takes;
# 1100x1000 images take the general kernel path.
@pytest.mark.parametrize("shape", [(2049, 4, 4, 3), (7, 1, 1, 1), (3, 2, 3, 128),
                                   (2, 1100, 1000, 3), (40, 5, 3, 2), (3, 1, 2, 4)])
def test_totals_made_by_the_kernel_are_the_summary_pass(shape, rng, variant):
    """`KernelTotals`, made image by image as the kernel reads, are `integer_spreads` of
    its records and the oracle's `fixed_sum` of numpy's values, bit for bit, and the
    extremes of the images; the records' extremes are numpy's, as float64; with every
    kernel variant."""
    from normstats.maths.exact import fixed_sum

    stack = rng.integers(0, 256, size=shape, dtype=np.uint8)
    stack[0] = 7  # a constant image: variance 0
    sums, squares, lows, highs, kernel = fused.uint8_moments(stack)
    pixels = np.full(len(stack), shape[1] * shape[2], np.int64)
    assert kernel is not None and kernel.images == len(stack)
    got = kernel.spreads()
    assert got == fused.integer_spreads(pixels, sums, squares)
    for index, expected in enumerate(spread_oracle(pixels, sums, squares)):
        assert got[0][index] == fixed_sum(expected), index
    assert got[1] == [sum(int(v) for v in column) for column in sums.T]
    assert got[2] == [sum(int(v) for v in column) for column in squares.T]
    per_image = stack.reshape(len(stack), -1, shape[3])
    assert lows.dtype == highs.dtype == np.float64
    assert lows.tolist() == per_image.min(axis=1).tolist()
    assert highs.tolist() == per_image.max(axis=1).tolist()
    assert kernel.minimum == tuple(float(v) for v in stack.min(axis=(0, 1, 2)))
    assert kernel.maximum == tuple(float(v) for v in stack.max(axis=(0, 1, 2)))
    assert kernel.images_ddof1 == (len(stack) if shape[1] * shape[2] >= 2 else 0)


# (400, 31, 31, 3) and (1500, 28, 28, 1) pass 1 MB: the calls that stream ahead
@pytest.mark.parametrize("shape", [(2049, 4, 4, 3), (7, 1, 1, 1), (3, 2, 3, 128),
                                   (2, 1100, 1000, 3), (40, 5, 3, 2), (400, 31, 31, 3),
                                   (1500, 28, 28, 1), (0, 4, 4, 3)])
def test_the_summary_pass_makes_the_totals_of_the_records_pass_without_records(
        shape, rng, variant):
    """`fused.uint8_summary` (each image's sums in one image's cells, zeroed before each
    image, no record written) makes the `KernelTotals` the records pass makes, bit for
    bit, with every kernel variant; they cover no records."""
    stack = rng.integers(0, 256, size=shape, dtype=np.uint8)
    if len(stack):
        stack[0] = 7  # a constant image: variance 0
    sums, _, _, _, expected = fused.uint8_moments(stack)
    got = fused.uint8_summary(stack)
    assert got is not None and expected is not None
    assert (got.images, got.pixels, got.channels) == (expected.images, expected.pixels,
                                                      expected.channels)
    assert got.spreads() == expected.spreads()
    assert np.array_equal(got.extremes, expected.extremes)
    assert got.image_sums is None and not got.covers(np.full(len(stack), got.pixels), sums)


def test_the_summary_pass_leaves_to_numpy_what_int64_cannot_hold():
    """As the records pass: an image of 2**26 values of 255 gives no totals (None)."""
    assert fused.uint8_summary(np.full((1, 8192, 8192, 1), 255, np.uint8)) is None


def test_the_summary_pass_refuses_buffers_of_the_wrong_size_instead_of_overrunning_them():
    limbs, totals = fused._spread_buffers(3)
    extremes = np.empty((2, 3), np.uint8)
    images = np.zeros((2, 12), np.uint8)
    with pytest.raises(ValueError, match="spreads holds"):
        _moments.summary(images, 2, 3, fused._spread_buffers(2)[0], totals, extremes)
    with pytest.raises(ValueError, match="totals holds"):
        _moments.summary(images, 2, 3, limbs, fused._spread_buffers(2)[1], extremes)
    with pytest.raises(ValueError, match="extremes holds"):
        _moments.summary(images, 2, 3, limbs, totals, extremes[:1])
    with pytest.raises(ValueError, match="whole number of pixels"):
        _moments.summary(np.zeros((2, 13), np.uint8), 2, 3, limbs, totals, extremes)
    with pytest.raises(ValueError, match="channels"):
        _moments.summary(images, 2, 200, limbs, totals, extremes)
    with pytest.raises(ValueError):  # outputs sharing memory
        _moments.summary(images, 2, 3, limbs, limbs, extremes)


def test_kernel_spreads_of_the_largest_significands_stay_exact():
    """4,100 images of two pixels, 0 and 181: each variance is 32761 / 4 = 8190.25, whose
    significand is within 0.03% of 2**53, so a bin of 2,049 of them would pass 2**64; the
    bins fold every 2,048 images and the totals stay exact."""
    from fractions import Fraction

    from normstats.maths.exact import FIXED_BITS

    stack = np.zeros((4100, 1, 2, 1), np.uint8)
    stack[:, 0, 1, 0] = 181
    spreads = fused.uint8_moments(stack)[4].spreads()[0]
    assert spreads[2] == [int(4100 * Fraction(32761, 4) * 2**FIXED_BITS)]
    assert spreads[0] == [int(4100 * Fraction(181, 2) * 2**FIXED_BITS)]  # std 90.5


def test_kernel_spreads_leave_to_numpy_what_int64_cannot_hold():
    """An image of 2**26 values of 255: n · Σx² passes int64, so the kernel bins nothing
    (None) and the summary takes numpy's way, exact with Python ints."""
    from normstats.maths.records import records_from_stack
    from normstats.maths.summary import summarize

    stack = np.full((1, 8192, 8192, 1), 255, np.uint8)
    assert fused.uint8_moments(stack)[4] is None
    summary = summarize(records_from_stack(stack))
    assert summary.moments.total == (255 * 2**26,) and summary.var_sum == (0,)


@pytest.fixture(params=[*_moments._variants(), "numpy"])
def running(request, monkeypatch):
    """Each compiled loop of `fused.uint8_running_sums` this CPU runs (one per kernel
    variant), and numpy's passes of an installation without the kernel."""
    if request.param == "numpy":
        monkeypatch.setattr(fused, "_extension", lambda: None)
        yield request.param
        return
    previous = _moments._select(request.param)
    yield request.param
    _moments._select(previous)


def running_oracle(images: np.ndarray, run: np.ndarray,
                   squares: np.ndarray) -> tuple[list[int], list[int]]:
    """``run`` and ``squares`` plus Σx and Σx² of the (count, ...) images per position, in
    Python ints, modulo 2**16 and 2**32 (the sums' documented wrap)."""
    flat = images.reshape(len(images), -1).tolist()
    sums = [(int(r) + sum(column)) % 2**16 for r, column in zip(run.ravel(), zip(*flat))]
    powers = [(int(q) + sum(v * v for v in column)) % 2**32
              for q, column in zip(squares.ravel(), zip(*flat))]
    return sums, powers


# 4,096 positions make a tile of the compiled loop: one position past it, two tiles exactly
# and two and one; vector widths (16, 32 or 64 values) never divide the odd ones.
@pytest.mark.parametrize("shape", [(1, 1, 1), (3, 5, 3), (7, 13, 3), (11, 31, 1), (1, 4097, 1),
                                   (2, 2048, 2), (3, 2731, 1)])
@pytest.mark.parametrize("count", [1, 5])
def test_running_sums_equal_python_integers_at_odd_sizes(shape, count, rng, running):
    """Sums and squares added onto what the runs hold, anywhere in their range: the wrap
    modulo 2**16 and 2**32 is numpy's, so the builder's folds alone keep them exact."""
    images = rng.integers(0, 256, size=(count, *shape), dtype=np.uint8)
    run = rng.integers(0, 2**16, size=shape, dtype=np.uint16)
    squares = rng.integers(0, 2**32, size=shape, dtype=np.uint32)
    expected_sums, expected_squares = running_oracle(images, run, squares)
    alone = run.copy()
    fused.uint8_running_sums(images[0] if count == 1 else images, run, squares)
    fused.uint8_running_sums(images[0] if count == 1 else images, alone, None)
    assert run.ravel().tolist() == alone.ravel().tolist() == expected_sums
    assert squares.ravel().tolist() == expected_squares


def test_running_sums_of_257_images_of_255_fill_the_run_exactly(running):
    """257 · 255 = 65,535: the uint16 run is full, and the 258th image wraps it (which is
    why `MeanImageBuilder` folds every 257 images). Squares: 257 · 255² < 2**32."""
    images = np.full((258, 3, 37, 3), 255, np.uint8)
    run, squares = np.zeros((3, 37, 3), np.uint16), np.zeros((3, 37, 3), np.uint32)
    fused.uint8_running_sums(images[:257], run, squares)
    assert set(run.ravel().tolist()) == {65535}
    assert set(squares.ravel().tolist()) == {257 * 255**2}
    fused.uint8_running_sums(images[257], run, squares)
    assert set(run.ravel().tolist()) == {254}
    assert set(squares.ravel().tolist()) == {258 * 255**2}


def test_running_sums_read_strided_images_and_no_image(rng, running):
    images = rng.integers(0, 256, size=(4, 6, 10, 3), dtype=np.uint8)[:, ::2, ::2]
    run, squares = np.zeros((3, 5, 3), np.uint16), np.zeros((3, 5, 3), np.uint32)
    fused.uint8_running_sums(images, run, squares)
    assert run.ravel().tolist() == running_oracle(images, np.zeros(45), np.zeros(45))[0]
    fused.uint8_running_sums(images[:0], run, squares)
    assert run.ravel().tolist() == running_oracle(images, np.zeros(45), np.zeros(45))[0]
    empty = np.zeros((0, 4, 3), np.uint16)
    fused.uint8_running_sums(np.zeros((3, 0, 4, 3), np.uint8), empty, empty.astype(np.uint32))


def test_the_numpy_kernel_agrees_on_black_images_and_images_without_pixels():
    """Black images have a maximum of 0, and images of no pixel leave the outputs as they
    were (min 255, max 0), in numpy's passes as in the compiled kernel."""
    from normstats.maths import fused as fused_module

    for flat in (np.zeros((2, 12), np.uint8), np.zeros((2, 0), np.uint8)):
        compiled, numpy_passes = fused.outputs(2, 3), fused.outputs(2, 3)
        fused_module._kernel(3)(flat, *compiled)
        fused_module._numpy_kernel(flat, *numpy_passes)
        assert [a.tolist() for a in numpy_passes] == [a.tolist() for a in compiled]
        assert numpy_passes[3].tolist() == [[0, 0, 0]] * 2


@pytest.fixture(params=["compiled", "numpy"])
def counting(request, monkeypatch):
    """The compiled count of `fused.integer_histogram`, and numpy's ``bincount`` per channel
    of an installation without the kernel."""
    if request.param == "numpy":
        monkeypatch.setattr(fused, "_extension", lambda: None)
    return request.param


def histogram_oracle(pixels: np.ndarray, counts: np.ndarray) -> list[list[int]]:
    """``counts`` plus the count of each value per channel, in Python ints."""
    channels = pixels.shape[-1]
    flat = pixels.reshape(-1, channels).tolist()
    return [[int(counts[c, v]) + sum(1 for pixel in flat if pixel[c] == v) for v in range(256)]
            for c in range(channels)]


# four tables take four pixels in turn: pixel counts around multiples of four leave tails
# of 0 to 3; one, three and other channel counts take the unrolled loops, the rest not
@pytest.mark.parametrize("channels", [1, 2, 3, 4, 5, 13])
@pytest.mark.parametrize("pixels", [0, 1, 3, 4, 5, 7, 1001])
def test_uint8_histograms_add_python_counts_onto_the_counts_held(channels, pixels, rng,
                                                                 counting):
    values = rng.integers(0, 256, size=(pixels, channels), dtype=np.uint8)
    values[: pixels // 2] = values[0] if pixels else 0  # runs of one value: one cell
    counts = rng.integers(0, 2**40, size=(channels, 256), dtype=np.int64)
    expected = histogram_oracle(values, counts)
    fused.integer_histogram(values.reshape(1, pixels, 1, channels), counts)
    assert counts.tolist() == expected


def test_uint8_histograms_read_strided_pixels_and_every_value(counting):
    """A view (one channel of two, every other row) counts as its own values; all 256
    values land in their own bins, 255 included."""
    values = np.arange(2 * 512 * 2, dtype=np.int64).astype(np.uint8).reshape(2, 512, 2)
    view = values[::2, :, 1:]
    counts = np.zeros((1, 256), np.int64)
    fused.integer_histogram(view, counts)
    assert counts.tolist() == histogram_oracle(view, np.zeros((1, 256), np.int64))
    assert counts[0, 1::2].tolist() == [4] * 128 and counts[0, ::2].sum() == 0


@pytest.mark.parametrize("dtype", [np.uint8, np.int8, np.uint16, np.int16, np.bool_])
@pytest.mark.parametrize("channels", [1, 3, 13])
@pytest.mark.parametrize("pixels", [0, 5, 1001])
def test_integer_histograms_count_each_valid_value_in_its_own_bin(dtype, channels, pixels,
                                                                  rng, counting):
    """8- and 16-bit values, signed (bin k holds k − 2**(bits − 1)) or not, and bool: each
    value whose ``valid`` is True adds one to its channel's bin, as Python counts it; with
    every value valid, and with a mask broadcast from one value a pixel."""
    info = np.iinfo(np.uint8 if dtype is np.bool_ else dtype)
    values = rng.integers(int(info.min), int(info.max) + 1, size=(pixels, channels))
    values = values.astype(dtype)
    values[: pixels // 3] = values[0] if pixels else 0
    values[pixels // 3: pixels // 2] = info.max if dtype is not np.bool_ else True
    signed = np.dtype(dtype).kind == "i"
    bins = 1 << (8 * np.dtype(dtype).itemsize) if dtype is not np.bool_ else 256
    for valid in (None, rng.random((pixels, channels)) < 0.7, rng.random((pixels, 1)) < 0.5):
        counts = rng.integers(0, 2**40, size=(channels, bins), dtype=np.int64)
        expected = counts.tolist()
        kept = np.ones((pixels, channels), bool) if valid is None else \
            np.broadcast_to(valid, (pixels, channels))
        for pixel, keep in zip(values.astype(np.int64).tolist(), kept.tolist()):
            for c, (value, counted) in enumerate(zip(pixel, keep)):
                if counted:
                    expected[c][value + (bins // 2 if signed else 0)] += 1
        fused.integer_histogram(values.reshape(1, pixels, channels), counts,
                                None if valid is None else valid[None])
        assert counts.tolist() == expected


def test_the_histogram_kernel_refuses_counts_it_would_overrun():
    from normstats.maths import _moments

    counts = np.zeros((3, 256), np.int64)
    with pytest.raises(ValueError, match="counts holds 4096 bytes"):
        _moments.histogram(np.zeros(12, np.uint8), 1, False, 3, counts[:2], None)
    with pytest.raises(ValueError, match="counts holds 6144 bytes"):  # 16-bit: 65536 bins
        _moments.histogram(np.zeros(12, np.uint16), 2, False, 3, counts, None)
    with pytest.raises(ValueError, match="pixels of `channels`"):
        _moments.histogram(np.zeros(13, np.uint8), 1, False, 3, counts, None)
    with pytest.raises(ValueError, match="pixels of `channels`"):  # 7 bytes: no uint16s
        _moments.histogram(np.zeros(7, np.uint8), 2, False, 1, np.zeros((1, 65536), np.int64),
                           None)
    with pytest.raises(ValueError, match="valid holds 11 bytes for 12 values"):
        _moments.histogram(np.zeros(12, np.uint8), 1, False, 3, counts, np.ones(11, np.uint8))
    with pytest.raises(ValueError, match="channels must be"):
        _moments.histogram(np.zeros(12, np.uint8), 1, False, 0, counts, None)
    with pytest.raises(ValueError, match="1 or 2 bytes"):
        _moments.histogram(np.zeros(12, np.uint8), 4, False, 3, counts, None)
    with pytest.raises(ValueError, match="share memory"):
        one = np.zeros((1, 256), np.int64)
        _moments.histogram(one.view(np.uint8), 1, False, 1, one, None)
    with pytest.raises(ValueError, match="valid and counts share memory"):
        one = np.zeros((1, 256), np.int64)
        _moments.histogram(np.zeros(2048, np.uint8), 1, False, 1, one, one.view(np.uint8))
    with pytest.raises(ValueError, match=r"int64 \(3, 256\)"):
        fused.integer_histogram(np.zeros((2, 3), np.uint8), np.zeros((3, 255), np.int64))
    with pytest.raises(ValueError, match="not int32"):
        fused.integer_histogram(np.zeros((2, 3), np.int32), counts)
