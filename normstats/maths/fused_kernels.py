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
