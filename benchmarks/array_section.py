"""Data and a memory probe for the ``array`` section (benchmarks/section_peers.py).

The data is photo-like (smooth fields, an edge, mild noise, clipped to 0..255), not
uniform noise: uniform noise gives every image nearly the same std, which flatters any
per-image summary. The run also measures the machine's memory read bandwidth on the same
bytes, so the normstats row can be read against what memory allows.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numpy as np


def _upsample_matrix(size: int, grid: int) -> np.ndarray:
    """(size, grid) bilinear interpolation weights from a coarse grid to ``size`` pixels."""
    position = np.linspace(0, grid - 1, size)
    low = np.minimum(position.astype(int), grid - 2)
    weights = np.zeros((size, grid), np.float32)
    weights[np.arange(size), low] = 1 - (position - low)
    weights[np.arange(size), low + 1] = position - low
    return weights


def photo_like(count: int, size: int, rng: np.random.Generator, chunk: int = 4096) -> np.ndarray:
    """``count`` uint8 (size, size, 3) crops: a tinted level, a smooth field, an edge, noise.

    Contrast varies a hundredfold between images, so per-image stds spread over a dozen
    float exponents as they do on real photos.
    """
    out = np.empty((count, size, size, 3), np.uint8)
    grid, f32 = 5, np.float32
    up = _upsample_matrix(size, grid)
    yy, xx = (np.mgrid[0:size, 0:size].astype(f32) + 0.5) / size - 0.5
    for start in range(0, count, chunk):
        m = min(chunk, count - start)
        level = rng.uniform(20, 235, (m, 1, 1, 1)) + rng.normal(0, 25, (m, 1, 1, 3))
        contrast = rng.uniform(0.5, 50, (m, 1, 1, 1)).astype(f32)
        coarse = contrast * (rng.standard_normal((m, grid, grid, 1), f32)
                             + 0.3 * rng.standard_normal((m, grid, grid, 3), f32))
        field = (up @ (up @ coarse.transpose(0, 3, 1, 2)).swapaxes(-1, -2)).transpose(0, 3, 2, 1)
        angle = rng.uniform(0, 2 * np.pi, (m, 1, 1)).astype(f32)
        side = (np.cos(angle) * xx + np.sin(angle) * yy) > rng.uniform(-0.4, 0.4, (m, 1, 1))
        step = rng.normal(0, 40, (m, 1, 1, 1)) + rng.normal(0, 10, (m, 1, 1, 3))
        noise = (rng.standard_normal((m, size, size, 3), f32)
                 * rng.uniform(0.3, 5, (m, 1, 1, 1)).astype(f32))
        pixels = level.astype(f32) + field + side[..., None] * step.astype(f32) + noise
        out[start:start + m] = np.clip(pixels, 0, 255).astype(np.uint8)
    return out


def std_exponents(x: np.ndarray, sample: int = 5000) -> int:
    """Distinct float exponents of the per-image stds of the first ``sample`` images."""
    head = x[:sample].reshape(min(sample, len(x)), -1, x.shape[-1]).astype(np.float64)
    return len(np.unique(np.frexp(head.std(axis=1))[1]))


def memory_read(x: np.ndarray, pool: ThreadPoolExecutor) -> int:
    """Sum the bytes of ``x`` as uint64 words, one part per pool thread: a memory-read probe."""
    parts = np.array_split(x.reshape(-1).view(np.uint64), pool._max_workers)
    return int(sum(pool.map(lambda part: int(part.sum(dtype=np.uint64)), parts)))


def _compiled(images: np.ndarray, calls: int = 1) -> int:
    """The compiled pass a run's tasks make on (N, H, W, C) uint8 ``images`` when no one
    keeps their records (`normstats.maths.fused.uint8_summary`: Σx, Σx², min and max of
    each image and channel, each image's spreads binned into the summary's totals as it is
    read, no record written), ``calls`` times, into totals made once."""
    from normstats.maths import fused

    n, h, w, c = images.shape
    flat, module = images.reshape(n, h * w * c), fused._extension()
    extremes = np.empty((2, c), np.uint8)
    limbs, totals = fused._spread_buffers(c)
    for _ in range(calls):
        module.summary(flat, n, c, limbs, totals, extremes)
    return n * calls


def compiled_pass(x: np.ndarray, pool: ThreadPoolExecutor) -> int:
    """normstats' compiled records pass alone on the bytes of ``x``, one part per pool
    thread, with none of a run's Python, summary or scheduling around it: what a run of the
    array cannot beat."""
    return sum(pool.map(_compiled, np.array_split(x, pool._max_workers)))


#: Images of a cache-resident batch: 128 32x32x3 images (393 kB) stay in a core's L2.
CACHED_BATCH = 128


def compiled_pass_in_cache(x: np.ndarray, pool: ThreadPoolExecutor) -> int:
    """The same pass on about as many images as ``x`` holds, each thread reducing a batch of
    `CACHED_BATCH` of them again and again, so its bytes come from the core's cache: the
    pass's own speed, whatever memory gives (its arithmetic's bound on this CPU). Returns
    the images reduced."""
    workers = pool._max_workers
    batches = [x[i * CACHED_BATCH:(i + 1) * CACHED_BATCH].copy() for i in range(workers)]
    calls = len(x) // (CACHED_BATCH * workers)
    return sum(pool.map(_compiled, batches, [calls] * workers))
