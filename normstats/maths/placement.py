"""Where the buffers that decoders write and the kernels then read are placed in memory.

A decoded image is written once and read once, but where its buffer starts decides how
fast the decoder writes it (`decode_buffer`); the mean image's running sums are read and
written for every image, so they start on a cache line (`line_aligned_zeros`).
"""

from __future__ import annotations

import numpy as np

__all__ = ["decode_buffer", "line_aligned_zeros", "DECODE_BUFFER_OFFSET"]

#: Where a buffer that decoders write into starts: 16 bytes past a 64-byte boundary
#: (`decode_buffer`).
DECODE_BUFFER_OFFSET = 16


def decode_buffer(nbytes: int) -> np.ndarray:
    """A fresh uint8 buffer of ``nbytes`` for decoders to write images into, starting
    `DECODE_BUFFER_OFFSET` bytes past a 64-byte boundary.

    libjpeg-turbo's memory manager aligns the rows it converts to RGB on 32 bytes. An
    output at a multiple of 32 bytes puts its stores at the same offsets within 4 KB as
    those loads, which the CPU then holds back as if they might overlap ("4K aliasing").
    numpy's allocations fall at either kind of address, so a run's speed depended on
    where its buffer happened to fall (most in a long-lived process). Measured on a
    2-core Xeon, one process, medians of 5 alternated runs of 2,000 files:
    - 256² JPEGs: 0.68 s with an output 16 past a 32-byte multiple (16, 48, 80 or 1,040
      past a page), 0.74-0.78 s at multiples of 32, 0.72 s wherever numpy's allocation
      fell;
    - 224² JPEGs: 6% faster than the allocation as it fell;
    - 512² JPEGs: 3% faster;
    - 500x375 JPEGs and 256² PNGs: alike either way.

    Examples
    --------
    >>> buffer = decode_buffer(100)
    >>> buffer.size, buffer.ctypes.data % 64
    (100, 16)
    """
    return _bytes_at(np.empty(nbytes + 64, dtype=np.uint8), DECODE_BUFFER_OFFSET, nbytes)


def line_aligned_zeros(shape: tuple[int, ...], dtype: np.dtype | type) -> np.ndarray:
    """Zeros of ``shape`` and ``dtype`` whose first byte starts a 64-byte cache line.

    The mean image adds every image onto uint16 and uint32 running sums, 64 bytes a
    vector store. numpy puts an array of a few hundred KB wherever its allocation falls,
    often 16 bytes past a page, where every such store splits two cache lines. Measured
    on a 2-core Xeon, one process, 2,000 256² JPEGs with the mean image, medians of 5
    alternated runs: 0.730 s with the sums on a line, 0.759 s at 16 bytes past one (and
    as numpy placed them), against 0.671 s without the mean image.

    Examples
    --------
    >>> sums = line_aligned_zeros((4, 5, 3), np.uint16)
    >>> sums.shape, sums.dtype.name, sums.ctypes.data % 64, int(sums.sum())
    ((4, 5, 3), 'uint16', 0, 0)
    """
    dtype = np.dtype(dtype)
    nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    return _bytes_at(np.zeros(nbytes + 64, dtype=np.uint8), 0, nbytes).view(dtype).reshape(shape)


def _bytes_at(raw: np.ndarray, offset: int, nbytes: int) -> np.ndarray:
    """The ``nbytes`` of ``raw`` (64 bytes longer) starting ``offset`` past a 64-byte line."""
    start = (offset - raw.ctypes.data) % 64
    return raw[start:start + nbytes]
