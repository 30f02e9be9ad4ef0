"""Buffers that decoders write into start 16 bytes past a 64-byte boundary, and the mean
image's running sums on a 64-byte boundary, wherever numpy's allocation falls; both hold
exactly the bytes asked for."""

from __future__ import annotations

import numpy as np
import pytest

from normstats.maths.mean_image import MeanImageBuilder
from normstats.maths.placement import DECODE_BUFFER_OFFSET, decode_buffer, line_aligned_zeros
from normstats.maths.uint8_rows import BATCH_IMAGE_BYTES, Uint8Rows
from normstats.sources.decoding.policy import Scratch


@pytest.mark.parametrize("nbytes", [1, 63, 64, 65, 196_608, 150_528, 1 << 20])
def test_a_decode_buffer_starts_off_the_32_byte_multiples_decoders_keep(nbytes):
    # allocations of many sizes before it move where numpy's memory falls
    kept = [np.empty(size, np.uint8) for size in (8, 24, 40, 4_000, 200_000)]
    buffer = decode_buffer(nbytes)
    assert buffer.ctypes.data % 64 == DECODE_BUFFER_OFFSET == 16
    assert buffer.size == nbytes and buffer.dtype == np.uint8 and buffer.flags.writeable
    assert buffer.flags.c_contiguous
    buffer[:] = 7  # its own bytes: writing them leaves every other array alone
    assert all((array.size == 0 or not np.shares_memory(array, buffer)) for array in kept)


def test_large_images_and_the_scratch_are_decoded_into_such_buffers():
    rows, scratch = Uint8Rows(2), Scratch()
    for nbytes in (BATCH_IMAGE_BYTES + 1, 256 * 256 * 3, 512 * 512 * 3):
        assert rows.take(nbytes).ctypes.data % 64 == 16
        assert scratch.take(nbytes).ctypes.data % 64 == 16


@pytest.mark.parametrize("shape", [(1,), (3, 5, 1), (256, 256, 3), (33, 7, 4)])
@pytest.mark.parametrize("dtype", [np.uint16, np.uint32, np.int64])
def test_line_aligned_zeros_are_zeros_on_a_cache_line(shape, dtype):
    kept = [np.empty(size, np.uint8) for size in (8, 24, 40, 200_000)]
    zeros = line_aligned_zeros(shape, dtype)
    assert zeros.ctypes.data % 64 == 0
    assert zeros.shape == shape and zeros.dtype == dtype and zeros.flags.c_contiguous
    assert not zeros.any()
    zeros += 1
    assert all(not np.shares_memory(array, zeros) for array in kept)


def test_the_mean_image_adds_onto_running_sums_on_cache_lines():
    builder = MeanImageBuilder(with_std=True)
    builder.add("a", np.full((256, 256, 3), 7, np.uint8))
    assert builder._run.ctypes.data % 64 == 0 and builder._run_squares.ctypes.data % 64 == 0
    totals = builder.result()
    assert int(totals.total.sum()) == 7 * 256 * 256 * 3 and totals.count == 1
