"""Buffers that decoders write into start 16 bytes past a 64-byte boundary, wherever
numpy's allocation falls, and hold exactly the bytes asked for."""

from __future__ import annotations

import numpy as np
import pytest

from normstats.maths.placement import DECODE_BUFFER_OFFSET, decode_buffer
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
