"""The mean image (issue 28): its cost on top of a plain run over a folder of JPEGs."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from synthetic import make_jpeg_folder
from timing import goal, measure, measure_alternated

import normstats


def float64_running_sum(files: list[Path]) -> np.ndarray:
    """What a script computes by hand: one process, Pillow, a float64 running sum."""
    from PIL import Image

    total = None
    for path in files:
        with Image.open(path) as image:
            pixels = np.asarray(image.convert("RGB"), dtype=np.float64)
        total = pixels if total is None else total + pixels
    return total / len(files) / 255


def bench_mean_image(quick: bool) -> dict:
    """10,000 JPEGs 256²: the plain run against the same run with the mean image (and its
    per-position std), on 2 processes without the record cache (the mean image cannot
    use it), alternated round by round; a hand-written script once, for scale."""
    count = 1_000 if quick else 10_000
    files = make_jpeg_folder(count, 256)
    root = files[0].parent
    candidates = [
        ("normstats, plain run (2 processes)",
         lambda: normstats.compute(root, workers=2, cache=False)),
        ("normstats, mean_image=True",
         lambda: normstats.compute(root, workers=2, cache=False, mean_image=True)),
        ("normstats, mean_image_std=True",
         lambda: normstats.compute(root, workers=2, cache=False, mean_image_std=True)),
    ]
    # the goal is a ratio of normstats runs: 5 alternated rounds; the script once, beside
    timings = measure_alternated([function for _, function in candidates], 5)
    candidates.append(("script: Pillow + float64 running sum, 1 process", None))
    timings.append(measure(lambda: float64_running_sum(files), 1))
    plain = timings[0][0]
    exact = timings[2][3].mean_image
    rows = []
    for (name, _), (med, low, high, result) in zip(candidates, timings):
        image = result if isinstance(result, np.ndarray) else result.mean_image
        gap = "(no mean image)" if image is None else float(np.max(np.abs(image - exact)))
        rows.append([name, med, [low, high], count / med, med / plain, gap])
    values = {"images": count, "mean_image_cost": timings[1][0] / plain - 1,
              "mean_image_std_cost": timings[2][0] / plain - 1}
    return {"title": f"mean image of {count:,} photo-like JPEGs 256×256",
            "tables": {"main": {"columns": [
                ["run", ""], ["median s", "{:.3f}"], ["spread s", "{:.3f}"],
                ["images/s", "{:,.0f}"], ["time ÷ plain run", "{:.2f}×"],
                ["max difference of the mean image from normstats", "{:.1e}"]],
                "rows": rows}},
            "values": values,
            "goals": [goal(f"mean image of {count:,} JPEGs 256²: within 10% of the plain "
                           "run's time", values["mean_image_cost"], "<=", 0.10, "{:+.1%}")]}
