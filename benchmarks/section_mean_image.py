"""The mean image (issue 28): its cost on top of a plain run over a folder of JPEGs.

What a user waits for is the whole ``normstats compute`` process, so the plain run and the
runs that also write the mean image (``--mean-image``) and its per-position std
(``--mean-image-std``) are timed as fresh processes, alternated round by round. Timed
inside the benchmark's own process instead, the runs fork their workers from a parent
that holds every earlier section's data and imports: the plain run took 2.15 s there in
one full run, 1.73 s in a run of this section alone, and the mean image's share of it
moved with that parent, not with normstats.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path

import numpy as np
from section_processes import race
from synthetic import make_jpeg_folder, make_photo_png_folder
from timing import goal, measure

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
    """10,000 JPEGs 256²: ``normstats compute`` processes, plain and writing the mean image
    (and its per-position std), on 2 processes without the record cache (the mean image
    cannot use it), alternated round by round; a hand-written script once, for scale."""
    count = 1_000 if quick else 10_000
    files = make_jpeg_folder(count, 256)
    root = str(files[0].parent)
    script = str(Path(sys.executable).with_name("normstats"))
    plain = [script, "compute", root, "--no-cache", "--workers", "2"]
    names = ["normstats compute, plain (2 processes)", "normstats compute --mean-image",
             "normstats compute --mean-image-std", "normstats compute --percentiles"]
    scratch = Path(tempfile.mkdtemp(prefix="normstats-mean-image-"))
    try:
        written = [None, scratch / "mean.npy", scratch / "std.npy", None]
        flags = [[], ["--mean-image", str(written[1]), "--overwrite"],
                 ["--mean-image-std", str(written[2]), "--overwrite"], ["--percentiles"]]
        commands = {name: [*plain, *extra] for name, extra in zip(names, flags)}
        # the goal is a ratio of normstats processes: 5 alternated rounds
        times = race(commands, 2 if quick else 5)
        arrays = [None, np.load(written[1]), np.load(written[2]), None]
    finally:
        shutil.rmtree(scratch)
    exact = normstats.compute(root, workers=2, cache=False, mean_image_std=True)
    references = [None, exact.mean_image, exact.mean_image_std, None]
    med = {name: float(np.median(values)) for name, values in times.items()}
    base = med[names[0]]
    rows = []
    for name, array, reference in zip(names, arrays, references):
        gap = "(no mean image)" if array is None else float(np.max(np.abs(array - reference)))
        if name.endswith("--percentiles"):
            gap = "(exact percentiles; tests compare them with numpy's)"
        rows.append([name, med[name], [min(times[name]), max(times[name])], count / med[name],
                     med[name] / base, gap])
    script_time, _, _, by_hand = measure(lambda: float64_running_sum(files), 1)
    rows.append(["script: Pillow + float64 running sum, 1 process (in the benchmark's "
                 "process)", script_time, [script_time, script_time], count / script_time,
                 script_time / base, float(np.max(np.abs(by_hand - exact.mean_image)))])
    values = {"images": count, "mean_image_cost": med[names[1]] / base - 1,
              "mean_image_std_cost": med[names[2]] / base - 1,
              "percentiles_cost": med[names[3]] / base - 1}
    small_rows, small_values = small_images(quick)
    values.update(small_values)
    return {"title": f"mean image and percentiles of {count:,} photo-like JPEGs 256×256 "
                     "(whole processes)",
            "tables": {"main": {"columns": [
                ["run", ""], ["median s", "{:.3f}"], ["spread s", "{:.3f}"],
                ["images/s", "{:,.0f}"], ["time ÷ plain run", "{:.2f}×"],
                ["max difference from normstats' mean image (or std) in this process",
                 "{:.1e}"]],
                "rows": rows},
                "small": {"columns": SMALL_COLUMNS, "rows": small_rows}},
            "values": values,
            "goals": [goal(f"mean image of {count:,} JPEGs 256²: the whole process within 10% "
                           "of the plain run's", values["mean_image_cost"], "<=", 0.10,
                           "{:+.1%}")]}


SMALL_COLUMNS = [["run", ""], ["median s", "{:.3f}"], ["spread s", "{:.3f}"],
                 ["images/s", "{:,.0f}"], ["time ÷ plain run", "{:.2f}×"]]


def small_images(quick: bool) -> tuple[list[list], dict]:
    """20,000 photo-like PNGs 32²: the plain process, and those that also tap every
    decoded image (the mean image, the percentiles' histogram), alternated round by
    round. On images this small a task's per-file work is a large share of the run."""
    count = 2_000 if quick else 20_000
    root = str(make_photo_png_folder(count, 32)[0].parent.parent)
    script = str(Path(sys.executable).with_name("normstats"))
    plain = [script, "compute", root, "--no-cache", "--workers", "2"]
    scratch = Path(tempfile.mkdtemp(prefix="normstats-mean-image-"))
    try:
        commands = {"normstats compute, plain (2 processes)": plain,
                    "normstats compute --mean-image": [*plain, "--mean-image",
                                                       str(scratch / "mean.npy"),
                                                       "--overwrite"],
                    "normstats compute --percentiles": [*plain, "--percentiles"]}
        names = list(commands)
        times = race(commands, 2 if quick else 5)
    finally:
        shutil.rmtree(scratch)
    med = {name: float(np.median(values)) for name, values in times.items()}
    base = med[names[0]]
    rows = [[f"{count:,} PNGs 32²: {name}", med[name],
             [min(times[name]), max(times[name])], count / med[name], med[name] / base]
            for name in names]
    return rows, {"small_images": count,
                  "small_mean_image_cost": med[names[1]] / base - 1,
                  "small_percentiles_cost": med[names[2]] / base - 1}
