"""The ``array`` section of benchmarks/run.py: an in-memory uint8 stack, all statistics.

The data is photo-like (smooth fields, an edge, mild noise, clipped to 0..255), not
uniform noise: uniform noise gives every image nearly the same std, which flatters any
per-image summary. The run also measures the machine's memory read bandwidth on the same
bytes, so the normstats row can be read against what memory allows.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import numpy as np

GOAL_GB_PER_S = 6.0


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


def measure(function: Callable[[], object], repeats: int) -> tuple[float, float, float, object]:
    """Median, min and max seconds over ``repeats`` calls, and the last result."""
    times, result = [], None
    for _ in range(repeats):
        start = time.perf_counter()
        result = function()
        times.append(time.perf_counter() - start)
    return statistics.median(times), min(times), max(times), result


def array_rows(candidates: list[tuple[str, Callable[[], object], int]], x: np.ndarray,
               compare: Callable[[object], str]) -> list[dict]:
    """One row per candidate (the first is normstats) plus the memory-bandwidth row."""
    rows = []
    for name, function, repeats in candidates:
        med, low, high, result = measure(function, repeats)
        rows.append({"tool": name, "median_s": med, "min_s": low, "max_s": high,
                     "gb_per_s": x.nbytes / med / 1e9, "images_per_s": len(x) / med,
                     "difference": compare(result)})
    with ThreadPoolExecutor(2) as pool:  # started before timing: threads are not memory time
        memory_read(x, pool)
        med, low, high, _ = measure(lambda: memory_read(x, pool), 7)
    rows.append({"tool": "memory read: uint64 sum of the same bytes (2 threads)", "median_s": med,
                 "min_s": low, "max_s": high, "gb_per_s": x.nbytes / med / 1e9,
                 "images_per_s": len(x) / med, "difference": "(reads only)"})
    base = rows[0]["median_s"]
    for row in rows:
        row["speedup"] = row["median_s"] / base
    return rows


def markdown(title: str, rows: list[dict]) -> list[str]:
    """The section's table, and a line on the normstats row against the goal and memory."""
    lines = [f"### {title}", "", "| tool | median s | spread s | GB/s | images/s | "
             f"{rows[0]['tool']} speed-up vs tool | max difference from normstats |",
             "|---|---|---|---|---|---|---|"]
    for row in rows:
        lines.append(f"| {row['tool']} | {row['median_s']:.3f} | {row['min_s']:.3f}–"
                     f"{row['max_s']:.3f} | {row['gb_per_s']:.2f} | {row['images_per_s']:,.0f} | "
                     f"{row['speedup']:.1f}× | {row['difference']} |")
    ours, memory = rows[0]["gb_per_s"], rows[-1]["gb_per_s"]
    verdict = "meets" if ours >= GOAL_GB_PER_S else "misses"
    lines += ["", f"normstats: {ours:.2f} GB/s, {ours / memory:.0%} of the memory read speed "
              f"measured in this run ({memory:.1f} GB/s); {verdict} the {GOAL_GB_PER_S:.0f} GB/s "
              "goal.", ""]
    return lines
