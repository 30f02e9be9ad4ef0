"""The channel covariance and the patch covariance (issue 28): their cost, and exactness."""

from __future__ import annotations

from fractions import Fraction

import array_section
import numpy as np
from synthetic import make_jpeg_folder
from timing import goal, measure, measure_alternated

import normstats


def exact_covariance(x: np.ndarray, scale: int) -> tuple[tuple[float, ...], ...]:
    """The population channel covariance of uint8 images, from int64 sums of products over
    chunks of images added as Python ints: an oracle independent of normstats' kernels."""
    c = x.shape[-1]
    total, products, n = [0] * c, [[0] * c for _ in range(c)], 0
    for start in range(0, len(x), 2048):
        pixels = x[start:start + 2048].reshape(-1, c).astype(np.int64)
        n += len(pixels)
        sums, gram = pixels.sum(axis=0), pixels.T @ pixels  # < 2**63 for 2,048 images
        for a in range(c):
            total[a] += int(sums[a])
            for b in range(c):
                products[a][b] += int(gram[a, b])
    return tuple(tuple(float(Fraction(n * products[a][b] - total[a] * total[b], n * n * scale**2))
                       for b in range(c)) for a in range(c))


def materialised_patch_cov(x: np.ndarray, size: int) -> np.ndarray:
    """What a script does: every patch as a float64 row, then numpy.cov."""
    from numpy.lib.stride_tricks import sliding_window_view

    p = sliding_window_view(x, (size, size), axis=(1, 2))
    return np.cov(p.reshape(-1, x.shape[3] * size * size).astype(np.float64) / 255,
                  rowvar=False, ddof=0)


def _folder_rows(count: int) -> tuple[list, dict]:
    files = make_jpeg_folder(count, 256)
    root = files[0].parent
    runs = [("plain run (2 processes, no cache)",
             lambda: normstats.compute(root, workers=2, cache=False)),
            ("covariance=True",
             lambda: normstats.compute(root, workers=2, cache=False, covariance=True))]
    timings = measure_alternated([f for _, f in runs], 5)
    plain = timings[0][0]
    rows = [[f"{count:,} JPEGs 256²: {name}", med, [low, high], count / med, med / plain]
            for (name, _), (med, low, high, _) in zip(runs, timings)]
    return rows, {"folder_cost": timings[1][0] / plain - 1}


def _array_rows(n: int) -> tuple[list, dict]:
    x = array_section.photo_like(n, 32, np.random.default_rng(0))
    runs = [("plain run (2 threads)", lambda: normstats.compute(x, workers=2, scale=255)),
            ("covariance=True",
             lambda: normstats.compute(x, workers=2, scale=255, covariance=True))]
    timings = measure_alternated([f for _, f in runs], 7)
    plain = timings[0][0]
    exact = timings[1][3].covariance == exact_covariance(x, 255)
    numpy_time, _, _, numpy_cov = measure(
        lambda: np.cov(x.reshape(-1, 3).astype(np.float64) / 255, rowvar=False, ddof=0), 1)
    gap = float(np.max(np.abs(np.asarray(timings[1][3].covariance) - numpy_cov)))
    rows = [[f"array {n:,}×32×32×3: {name}", med, [low, high], n / med, med / plain]
            for (name, _), (med, low, high, _) in zip(runs, timings)]
    rows.append([f"array {n:,}×32×32×3: numpy float64 cov of the pixels (once; max "
                 f"difference {gap:.1e})", numpy_time, [numpy_time, numpy_time], n / numpy_time,
                 numpy_time / plain])
    return rows, {"array_cost": timings[1][0] / plain, "array_exact": float(exact)}


def _patch_rows(n: int, subset: int) -> tuple[list, dict]:
    x = array_section.photo_like(n, 32, np.random.default_rng(0))
    ours = measure(lambda: normstats.patch_covariance(x, 3, workers=2), 3)
    theirs = measure(lambda: materialised_patch_cov(x[:subset], 3), 3)
    small = normstats.patch_covariance(x[:subset], 3, workers=2).covariance
    gap = float(np.max(np.abs(small - theirs[3])))
    per_ours, per_theirs = ours[0] / n, theirs[0] / subset
    rows = [[f"3×3 patch covariance of {n:,} images 32×32×3 (normstats, exact)", ours[0],
             list(ours[1:3]), n / ours[0], per_ours / per_theirs],
            [f"numpy: materialised patches + float64 cov, {subset:,} images (max difference "
             f"{gap:.1e})", theirs[0], list(theirs[1:3]), subset / theirs[0], 1.0]]
    return rows, {"patch_ratio": per_ours / per_theirs}


def bench_covariance(quick: bool) -> dict:
    """Covariance on top of the plain runs (a JPEG folder, an in-memory array), alternated
    round by round, and the 3×3 patch covariance against numpy's materialised patches."""
    folder, array = _folder_rows(1_000 if quick else 10_000), \
        _array_rows(5_000 if quick else 50_000)
    patches = _patch_rows(5_000 if quick else 50_000, 500 if quick else 5_000)
    values = {**folder[1], **array[1], **patches[1]}
    table = {"columns": [["run", ""], ["median s", "{:.3f}"], ["spread s", "{:.3f}"],
                         ["images/s", "{:,.0f}"],
                         ["per image ÷ reference (plain run; numpy for patches)", "{:.2f}×"]],
             "rows": folder[0] + array[0] + patches[0]}
    return {"title": "channel covariance and 3×3 patch covariance", "tables": {"main": table},
            "values": values,
            "goals": [
                goal("covariance on 10,000 JPEGs 256²: at most 30% over the plain run",
                     values["folder_cost"], "<=", 0.30, "{:+.1%}"),
                goal("covariance on the 50,000×32×32×3 array: at most 2× the plain run",
                     values["array_cost"], "<=", 2.0, "{:.2f}×"),
                goal("the array's covariance equals the exact (Python-int) value",
                     values["array_exact"], ">=", 1.0, "{:.0f}"),
                goal("3×3 patch covariance of 50,000 images: per image within 3× numpy's "
                     "float64 cov of the materialised patches of 5,000",
                     values["patch_ratio"], "<=", 3.0, "{:.2f}×")]}
