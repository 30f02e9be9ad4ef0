"""Per-image, per-channel moments of a stack of same-shape images, vectorised.

These are the hot loops of normstats. Integer images get exact sums of x and x²:
pixels are copied block by block into a small float scratch buffer and reduced with
a BLAS matrix product against a 0/1 channel-selection matrix. A block is small enough
that every partial sum is an integer below the float's exact range (2**24 for
float32, 2**53 for float64), so the float arithmetic is exact and fast; partial sums
are folded into int64. Float images get a two-pass mean and a corrected sum of squared
deviations in float64, even for float32 input.
"""

from __future__ import annotations

import numpy as np

__all__ = ["integer_sums", "float_moments", "extrema", "MAX_INTEGER_BITS"]

#: Integer images up to this many bits per value are supported exactly (uint16, int16).
MAX_INTEGER_BITS = 16

_ROW_BUFFER_BYTES = 1 << 20  # scratch of ~1 MiB stays in L2 cache


def _exact_block(dtype: np.dtype) -> tuple[type, int]:
    """Float type and pixels per row block whose sums of squares stay exact."""
    info = np.iinfo(dtype) if dtype != np.bool_ else np.iinfo(np.uint8)
    largest_square = max(info.max, -info.min) ** 2
    if largest_square * 256 < 2**24:
        return np.float32, max(1, (2**24 - 1) // largest_square)
    return np.float64, max(1, (2**53 - 1) // largest_square)


def _selection_matrix(pixels: int, channels: int, dtype: type) -> np.ndarray:
    """(pixels*channels, channels) 0/1 matrix summing interleaved channels of a row."""
    select = np.zeros((pixels * channels, channels), dtype=dtype)
    columns = np.arange(pixels * channels)
    select[columns, columns % channels] = 1
    return select


def integer_sums(stack: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Exact per-image, per-channel sums of x and x² of an integer image stack.

    Parameters
    ----------
    stack : numpy.ndarray
        Shape (N, H, W, C), an integer or bool dtype of at most 16 bits.

    Returns
    -------
    sums, sums_of_squares : numpy.ndarray
        int64 arrays of shape (N, C).

    Examples
    --------
    >>> import numpy as np
    >>> x = np.arange(12, dtype=np.uint8).reshape(1, 2, 2, 3)
    >>> s, q = integer_sums(x)
    >>> s.tolist(), q.tolist()
    ([[18, 22, 26]], [[126, 166, 214]])
    """
    n, h, w, c = stack.shape
    if h * w >= 2**31:
        raise ValueError("images of 2**31 pixels or more are not supported")
    float_type, block_pixels = _exact_block(stack.dtype)
    rows = np.ascontiguousarray(stack).reshape(n * h, w * c)
    row_sums = np.zeros((n * h, c), dtype=np.int64)
    row_squares = np.zeros((n * h, c), dtype=np.int64)
    for start in range(0, w, block_pixels):
        width = min(block_pixels, w - start)
        columns = rows[:, start * c:(start + width) * c]
        _accumulate_rows(columns, c, float_type, row_sums, row_squares)
    sums = row_sums.reshape(n, h, c).sum(axis=1)
    squares = row_squares.reshape(n, h, c).sum(axis=1)
    return sums, squares


def _accumulate_rows(columns: np.ndarray, channels: int, float_type: type,
                     row_sums: np.ndarray, row_squares: np.ndarray) -> None:
    """Add exact per-row channel sums of one column block into the int64 totals."""
    n_rows, n_cols = columns.shape
    select = _selection_matrix(n_cols // channels, channels, float_type)
    step = max(1, _ROW_BUFFER_BYTES // (n_cols * np.dtype(float_type).itemsize))
    scratch = np.empty((min(step, n_rows), n_cols), dtype=float_type)
    partial = np.empty((min(step, n_rows), channels), dtype=float_type)
    for r0 in range(0, n_rows, step):
        r1 = min(r0 + step, n_rows)
        block, out = scratch[: r1 - r0], partial[: r1 - r0]
        np.copyto(block, columns[r0:r1], casting="unsafe")
        np.matmul(block, select, out=out)
        row_sums[r0:r1] += out.astype(np.int64)
        np.multiply(block, block, out=block)
        np.matmul(block, select, out=out)
        row_squares[r0:r1] += out.astype(np.int64)


def float_moments(stack: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per-image mean (as a value plus a small residual) and M2 of a float image stack.

    The mean is ``mean + residual`` with ``residual = Σ(x - mean)/n``, so a large
    offset (1e8 + noise) loses nothing to the rounding of the mean; M2 is the corrected
    two-pass sum ``Σ(x - mean)² - n·residual²``, never negative.

    Parameters
    ----------
    stack : numpy.ndarray
        Shape (N, H, W, C), float dtype; accumulated in float64.

    Returns
    -------
    mean, residual, m2 : numpy.ndarray
        float64 arrays of shape (N, C).

    Examples
    --------
    >>> import numpy as np
    >>> x = np.array([1.0, 2.0, 3.0, 4.0]).reshape(1, 2, 2, 1) + 1e8
    >>> mean, residual, m2 = float_moments(x)
    >>> float(mean[0, 0] + residual[0, 0]), float(m2[0, 0])
    (100000002.5, 5.0)
    """
    n, h, w, c = stack.shape
    # (N, C, P) makes the pixel axis contiguous, so numpy sums it pairwise.
    values = np.ascontiguousarray(
        np.asarray(stack, dtype=np.float64).reshape(n, h * w, c).transpose(0, 2, 1))
    count = h * w
    mean = values.sum(axis=2) / count
    deviations = values - mean[:, :, None]
    residual = deviations.sum(axis=2) / count
    m2 = np.einsum("ncp,ncp->nc", deviations, deviations) - count * residual * residual
    return mean, residual, np.maximum(m2, 0.0)


def extrema(stack: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per-image, per-channel minimum and maximum as float64 arrays of shape (N, C).

    Reducing over rows first keeps the contiguous W·C axis for numpy's fast loops;
    reducing a trailing axis of length 3 directly is an order of magnitude slower.

    Examples
    --------
    >>> import numpy as np
    >>> lo, hi = extrema(np.arange(12, dtype=np.uint8).reshape(1, 2, 2, 3))
    >>> lo.tolist(), hi.tolist()
    ([[0.0, 1.0, 2.0]], [[9.0, 10.0, 11.0]])
    """
    n, h, w, c = stack.shape
    rows = stack.reshape(n, h, w * c)
    low = rows.min(axis=1).reshape(n, w, c).min(axis=1)
    high = rows.max(axis=1).reshape(n, w, c).max(axis=1)
    return low.astype(np.float64), high.astype(np.float64)
