"""The numba source of `normstats.maths.fused` (imported only when numba is installed).

Module-level functions, so numba's on-disk cache can serve them to every later process.
"""

from __future__ import annotations

import numba
import numpy as np

LANES = 96
#: Blocks of LANES values per flush: 255² · 30000 < 2**31 keeps every int32 lane exact.
BLOCKS_PER_FLUSH = 30_000


@numba.njit(nogil=True, cache=True, boundscheck=False, error_model="numpy")
def image_lanes(flat, lane_sum, lane_sq, lane_min, lane_max):  # pragma: no cover - jitted
    """Accumulate one flattened uint8 image into LANES int64 sums, squares, mins, maxes."""
    blocks = flat.shape[0] // LANES
    s32 = np.zeros(LANES, np.int32)
    q32 = np.zeros(LANES, np.int32)
    grid = flat[: blocks * LANES].reshape(blocks, LANES)
    for start in range(0, blocks, BLOCKS_PER_FLUSH):
        for b in range(start, min(blocks, start + BLOCKS_PER_FLUSH)):
            row = grid[b]
            for lane in range(LANES):
                v = row[lane]
                w = np.int32(v)
                s32[lane] += w
                q32[lane] += w * w
                lane_min[lane] = min(lane_min[lane], v)
                lane_max[lane] = max(lane_max[lane], v)
        for lane in range(LANES):
            lane_sum[lane] += s32[lane]
            lane_sq[lane] += q32[lane]
            s32[lane] = 0
            q32[lane] = 0
    for i in range(blocks * LANES, flat.shape[0]):  # the tail, shorter than one block
        lane = i - blocks * LANES
        w = np.int32(flat[i])
        lane_sum[lane] += w
        lane_sq[lane] += w * w
        lane_min[lane] = min(lane_min[lane], flat[i])
        lane_max[lane] = max(lane_max[lane], flat[i])


@numba.njit(nogil=True, cache=True)
def stack_moments(images, sums, squares, lows, highs):  # pragma: no cover - jitted
    """Per-image, per-channel Σx, Σx², min, max of (N, H·W·C) uint8 rows."""
    channels = sums.shape[1]
    lane_sum = np.zeros(LANES, np.int64)
    lane_sq = np.zeros(LANES, np.int64)
    lane_min = np.empty(LANES, np.uint8)
    lane_max = np.empty(LANES, np.uint8)
    for n in range(images.shape[0]):
        lane_sum[:] = 0
        lane_sq[:] = 0
        lane_min[:] = 255
        lane_max[:] = 0
        image_lanes(images[n], lane_sum, lane_sq, lane_min, lane_max)
        # Fold lanes into channels here: a numpy reduction over a trailing axis of
        # length 3 would cost more than the kernel itself.
        for lane in range(LANES):
            c = lane % channels
            sums[n, c] += lane_sum[lane]
            squares[n, c] += lane_sq[lane]
            lows[n, c] = min(lows[n, c], lane_min[lane])
            highs[n, c] = max(highs[n, c], lane_max[lane])


#: Pixels per uint32 flush: 65536 · 255² < 2**32 keeps every uint32 sum of squares exact.
PIXELS_PER_FLUSH = 65_536


@numba.njit(nogil=True, cache=True, boundscheck=False, error_model="numpy")
def rgb_moments(images, sums, squares, lows, highs):  # pragma: no cover - jitted
    """Per-image Σx, Σx², min, max of (N, H·W·3) uint8 rows, three channels at once.

    One scalar accumulator per channel lets LLVM vectorise the stride-3 loads; the
    arithmetic is kept in uint32 by explicit casts (numba would widen it to int64, which
    has no SIMD multiply) and flushed into int64 every `PIXELS_PER_FLUSH` pixels.
    Conditional expressions, not min()/max(), keep the uint8 extremes vectorisable.
    """
    u32 = np.uint32
    pixels = images.shape[1] // 3
    for n in range(images.shape[0]):
        img = images[n]
        a0 = a1 = a2 = np.uint8(255)
        b0 = b1 = b2 = np.uint8(0)
        for start in range(0, pixels, PIXELS_PER_FLUSH):
            s0 = s1 = s2 = q0 = q1 = q2 = u32(0)
            for p in range(start, min(pixels, start + PIXELS_PER_FLUSH)):
                v0 = img[3 * p]
                v1 = img[3 * p + 1]
                v2 = img[3 * p + 2]
                r0 = u32(v0)
                r1 = u32(v1)
                r2 = u32(v2)
                s0 = u32(s0 + r0)
                s1 = u32(s1 + r1)
                s2 = u32(s2 + r2)
                q0 = u32(q0 + u32(r0 * r0))
                q1 = u32(q1 + u32(r1 * r1))
                q2 = u32(q2 + u32(r2 * r2))
                a0 = v0 if v0 < a0 else a0
                a1 = v1 if v1 < a1 else a1
                a2 = v2 if v2 < a2 else a2
                b0 = v0 if v0 > b0 else b0
                b1 = v1 if v1 > b1 else b1
                b2 = v2 if v2 > b2 else b2
            sums[n, 0] += s0
            sums[n, 1] += s1
            sums[n, 2] += s2
            squares[n, 0] += q0
            squares[n, 1] += q1
            squares[n, 2] += q2
        lows[n, 0] = min(lows[n, 0], a0)
        lows[n, 1] = min(lows[n, 1], a1)
        lows[n, 2] = min(lows[n, 2], a2)
        highs[n, 0] = max(highs[n, 0], b0)
        highs[n, 1] = max(highs[n, 1], b1)
        highs[n, 2] = max(highs[n, 2], b2)


@numba.njit(nogil=True, cache=True, boundscheck=False, error_model="numpy")
def grey_moments(images, sums, squares, lows, highs):  # pragma: no cover - jitted
    """Per-image Σx, Σx², min, max of (N, H·W) single-channel uint8 rows (see rgb_moments)."""
    u32 = np.uint32
    pixels = images.shape[1]
    for n in range(images.shape[0]):
        img = images[n]
        low = np.uint8(255)
        high = np.uint8(0)
        for start in range(0, pixels, PIXELS_PER_FLUSH):
            total = u32(0)
            total_sq = u32(0)
            for p in range(start, min(pixels, start + PIXELS_PER_FLUSH)):
                v = img[p]
                r = u32(v)
                total = u32(total + r)
                total_sq = u32(total_sq + u32(r * r))
                low = v if v < low else low
                high = v if v > high else high
            sums[n, 0] += total
            squares[n, 0] += total_sq
        lows[n, 0] = min(lows[n, 0], low)
        highs[n, 0] = max(highs[n, 0], high)


@numba.njit(nogil=True, cache=True, boundscheck=False)
def exponent_bins(bits, low_sums, high_sums):  # pragma: no cover - jitted
    """Add the significands of float64 values (given as their int64 bits, (rows, columns))
    into int64 bins (2048, columns) keyed by biased exponent: low 27 bits and the rest.

    Pieces are below 2**27, so int64 bins stay exact for 2**36 rows.
    """
    for r in range(bits.shape[0]):
        for c in range(bits.shape[1]):
            b = bits[r, c]
            biased = (b >> 52) & 0x7FF
            significand = b & 0xFFFFFFFFFFFFF
            if biased > 0:
                significand |= 1 << 52
            if b < 0:
                significand = -significand
            low_sums[biased, c] += significand & 0x7FFFFFF
            high_sums[biased, c] += significand >> 27
