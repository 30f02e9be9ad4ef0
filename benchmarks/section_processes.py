"""Whole processes against the decode-only ceiling process (issue 18, item 2).

What a user waits for is the whole ``normstats compute`` process: start-up, the walk,
decoding, the statistics and the exit. Its ceiling is a process that only lists the same
folder and decodes every file with the same decoder and the same two-process pool
(`benchmarks/decode_only.py`). Both run as fresh processes, alternated round by round.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time
from pathlib import Path

from synthetic import make_jpeg_folder, make_photo_png_folder
from timing import goal

HERE = Path(__file__).resolve().parent


def _timed(command: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - start


def race(commands: dict[str, list[str]], rounds: int) -> dict[str, list[float]]:
    """Each command's whole-process times over ``rounds`` rounds, the commands alternated
    round by round after one untimed run each (which warms the file cache)."""
    for command in commands.values():  # warm the file cache
        _timed(command)
    times: dict[str, list[float]] = {name: [] for name in commands}
    for _ in range(rounds):
        for name, command in commands.items():
            times[name].append(_timed(command))
    return times


_PHASES = """
import json, os, sys, time
start = time.perf_counter()
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # as the normstats command sets it
import normstats_cli  # what the normstats command imports before it runs
from normstats.engine.pipeline import run
from normstats.sources import open_source
imported = time.perf_counter()
source = open_source(sys.argv[1])
walked = time.perf_counter()
run(source, workers=2)
done = time.perf_counter()
import resource
own, workers = (resource.getrusage(who) for who in (resource.RUSAGE_SELF,
                                                    resource.RUSAGE_CHILDREN))
print(json.dumps({"imports": imported - start, "walk": walked - imported,
                  "run": done - walked, "cpu_parent": own.ru_utime + own.ru_stime,
                  "cpu_workers": workers.ru_utime + workers.ru_stime}))
"""


def _phases(command: list[str]) -> dict[str, float]:
    """Where a fresh process's time goes: imports, walk, decoding and reducing as the
    process reports them, and the rest of its wall time (Python's start-up and exit),
    with the CPU time of the process and of its workers; medians of three processes,
    phase by phase."""
    import json

    runs = []
    for _ in range(3):
        started = time.perf_counter()
        out = subprocess.run(command, check=True, capture_output=True, text=True).stdout
        wall = time.perf_counter() - started
        phases = json.loads(out)
        cpu = {name: phases.pop(name) for name in ("cpu_parent", "cpu_workers")}
        runs.append({**phases, "rest": wall - sum(phases.values()), **cpu})
    return {name: statistics.median(run[name] for run in runs) for name in runs[0]}


def bench_processes(quick: bool) -> dict:
    """``normstats compute`` processes against decode-only processes, JPEG and PNG."""
    script = str(Path(sys.executable).with_name("normstats"))
    decode_only = [sys.executable, str(HERE / "decode_only.py")]
    jpegs = 1_000 if quick else 10_000
    pngs = 4_000 if quick else 20_000
    jpeg_folder = str(make_jpeg_folder(jpegs, 256)[0].parent)
    png_folder = str(make_photo_png_folder(pngs, 32)[0].parent.parent)
    rounds = 2 if quick else 5
    names = {
        "jpeg_ours": f"normstats compute: {jpegs:,} JPEGs 256²",
        "jpeg_ceiling": f"decode only (simplejpeg, Pool(2)): {jpegs:,} JPEGs 256²",
        "jpeg_kernel": f"decode, then normstats' kernel only (simplejpeg, Pool(2)): {jpegs:,} "
                       "JPEGs 256²",
        "png_ours": f"normstats compute: {pngs:,} PNGs 32² (57% with an ICC profile)",
        "png_ceiling": f"decode only (libpng, Pool(2)): {pngs:,} PNGs 32²",
    }
    commands = {
        names["jpeg_ours"]: [script, "compute", jpeg_folder, "--no-cache", "--workers", "2"],
        names["jpeg_ceiling"]: [*decode_only, "jpeg", jpeg_folder],
        names["jpeg_kernel"]: [*decode_only, "jpeg+kernel", jpeg_folder],
        names["png_ours"]: [script, "compute", png_folder, "--no-cache", "--workers", "2"],
        names["png_ceiling"]: [*decode_only, "png", png_folder],
    }
    # Each kind at more image counts, both processes: a line of time over images splits
    # what a run costs per image (its slope) from what it costs once (its intercept).
    sizes = (1_000, 2_000) if quick else (1_000, 5_000, 10_000)
    png_sizes = (1_000, 4_000) if quick else (4_000, 20_000)
    line = {n: f"normstats compute: {n:,} JPEGs 256² (for the intercept)" for n in sizes
            if n != jpegs}
    jpeg_line = {n: f"decode only (simplejpeg, Pool(2)): {n:,} JPEGs 256² (for the line)"
                 for n in line}
    png_line = {n: f"normstats compute: {n:,} PNGs 32² (for the line)" for n in png_sizes
                if n != pngs}
    png_ceiling_line = {n: f"decode only (libpng, Pool(2)): {n:,} PNGs 32² (for the line)"
                        for n in png_line}
    for n in line:
        folder = str(make_jpeg_folder(n, 256)[0].parent)
        commands[line[n]] = [script, "compute", folder, "--no-cache", "--workers", "2"]
        commands[jpeg_line[n]] = [*decode_only, "jpeg", folder]
    for n in png_line:
        folder = str(make_photo_png_folder(n, 32)[0].parent.parent)
        commands[png_line[n]] = [script, "compute", folder, "--no-cache", "--workers", "2"]
        commands[png_ceiling_line[n]] = [*decode_only, "png", folder]
    times = race(commands, rounds)
    med = {name: statistics.median(values) for name, values in times.items()}
    intercept, slope = _line({n: med[line.get(n, names["jpeg_ours"])] for n in sizes})
    fits = {"jpeg_ceiling": _line({n: med[jpeg_line.get(n, names["jpeg_ceiling"])]
                                   for n in sizes}),
            "png_ours": _line({n: med[png_line.get(n, names["png_ours"])] for n in png_sizes}),
            "png_ceiling": _line({n: med[png_ceiling_line.get(n, names["png_ceiling"])]
                                  for n in png_sizes})}
    counts = {names["jpeg_ours"]: jpegs, names["jpeg_ceiling"]: jpegs, names["jpeg_kernel"]: jpegs,
              names["png_ours"]: pngs, names["png_ceiling"]: pngs,
              **{name: n for lines in (line, jpeg_line, png_line, png_ceiling_line)
                 for n, name in lines.items()}}
    rows = [[name, med[name], [min(times[name]), max(times[name])], counts[name] / med[name]]
            for name in commands]
    phases = {}
    for kind, folder in (("jpeg", jpeg_folder), ("png", png_folder)):
        phases[f"{kind}_ours"] = _phases([sys.executable, "-c", _PHASES, folder])
        phases[f"{kind}_ceiling"] = _phases([*decode_only, kind, folder, "--phases"])
    values = {"rounds": rounds, "jpegs": jpegs, "pngs": pngs, "intercept": intercept,
              "ms_per_image": slope * 1e3, "intercept_sizes": ", ".join(f"{n:,}" for n in sizes),
              **{f"{who}_{name}": seconds for who, parts in phases.items()
                 for name, seconds in parts.items()},
              "jpeg_share": med[names["jpeg_ceiling"]] / med[names["jpeg_ours"]],
              # decoding and the kernel alone, against decoding alone and against normstats
              "jpeg_kernel_share": med[names["jpeg_ceiling"]] / med[names["jpeg_kernel"]],
              "jpeg_share_of_kernel": med[names["jpeg_kernel"]] / med[names["jpeg_ours"]],
              "png_share": med[names["png_ceiling"]] / med[names["png_ours"]],
              "png_sizes": ", ".join(f"{n:,}" for n in png_sizes),
              **{f"{who}_intercept": fit[0] for who, fit in fits.items()},
              **{f"{who}_ms_per_image": fit[1] * 1e3 for who, fit in fits.items()}}
    # per image: the ceiling's cost over ours (1 = the same rate); once: ours less its
    values.update(jpeg_rate_share=values["jpeg_ceiling_ms_per_image"] / values["ms_per_image"],
                  png_rate_share=values["png_ceiling_ms_per_image"]
                  / values["png_ours_ms_per_image"],
                  jpeg_fixed_gap=intercept - values["jpeg_ceiling_intercept"],
                  png_fixed_gap=values["png_ours_intercept"] - values["png_ceiling_intercept"])
    # the time each parent spends before its workers start (its imports and its listing),
    # normstats' less the ceiling's, against the whole processes' difference
    for kind in ("jpeg", "png"):
        start = {who: values[f"{kind}_{who}_imports"] + values[f"{kind}_{who}_walk"]
                 for who in ("ours", "ceiling")}
        values[f"{kind}_start_gap"] = start["ours"] - start["ceiling"]
        values[f"{kind}_whole_gap"] = med[names[f"{kind}_ours"]] - med[names[f"{kind}_ceiling"]]
    # the fixed cost over the ceiling's that 95% of its whole process leaves room for
    values.update(jpeg_fixed_room=med[names["jpeg_ceiling"]] / 0.95
                  - med[names["jpeg_ceiling"]],
                  png_fixed_room=med[names["png_ceiling"]] / 0.95 - med[names["png_ceiling"]])
    table = {"columns": [["whole process", ""], ["median s", "{:.3f}"],
                         ["min–max s", "{:.3f}"], ["images/s", "{:,.0f}"]], "rows": rows}
    labels = {"imports": "imports", "walk": "listing the folder",
              "run": "decoding (and reducing)", "rest": "Python start-up and exit",
              "cpu_parent": "CPU time of the parent process (s)",
              "cpu_workers": "CPU time of the two workers (s)"}
    where = {"columns": [["phase (medians, s)", ""], ["JPEG: normstats", "{:.3f}"],
                         ["JPEG: ceiling", "{:.3f}"], ["PNG: normstats", "{:.3f}"],
                         ["PNG: ceiling", "{:.3f}"]],
             "rows": [[label] + [values[f"{kind}_{who}_{name}"] for kind in ("jpeg", "png")
                                 for who in ("ours", "ceiling")]
                      for name, label in labels.items()]}
    return {"title": "whole processes against the decode-only ceiling",
            "tables": {"main": table, "phases": where}, "values": values,
            "goals": goals(values)}


def goals(values: dict) -> list[dict]:
    """The section's goals, from its measured ``values``."""
    # The decode-only process that also runs normstats' kernel on each image: what a run
    # of normstats' method costs over decoding, with nothing else of normstats around it.
    kernel = ("decode, then normstats' kernel only",
              values["jpeg_kernel_share"]) if "jpeg_kernel_share" in values else None
    return [goal(f"{values['jpegs']:,} JPEGs 256², whole processes: ≥ 95% of the decode-only "
                 "process", values["jpeg_share"], ">=", 0.95, "{:.1%}", bound=kernel),
            goal(f"{values['pngs']:,} photo-like PNGs 32², whole processes: ≥ 95% of the "
                 "libpng decode-only process", values["png_share"], ">=", 0.95, "{:.1%}"),
            goal(f"fixed cost of a run: intercept of time over images "
                 f"({values['intercept_sizes']} JPEGs) ≤ 0.2 s", values["intercept"], "<=", 0.2,
                 "{:.3f} s", floor=("the decode-only process's own intercept",
                                    values["jpeg_ceiling_intercept"]))]


def _line(seconds: dict[int, float]) -> tuple[float, float]:
    """Least-squares intercept (s) and slope (s an image) of time over image count."""
    counts = list(seconds)
    mean_n = statistics.fmean(counts)
    mean_t = statistics.fmean(seconds.values())
    slope = sum((n - mean_n) * (seconds[n] - mean_t) for n in counts) / \
        sum((n - mean_n) ** 2 for n in counts)
    return mean_t - slope * mean_n, slope
