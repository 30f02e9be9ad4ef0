"""Toward internet scale: a million files listed, planned and cached, and ImageNet on paper.

A tree of 1,000,000 tiny PNGs (4×4, 77 bytes: the files cost the walk and the cache what
real files cost them, and decode in microseconds) in 1,000 class folders, and a tree of
its first 100,000 (links to the same folders). Each measurement is a fresh process, so its
peak resident memory (VmHWM) is its own: the listing and plan of each tree (does the cost
per file stay flat from 100,000 to 1,000,000?), and on the million files a cold run that
fills the record cache, the cache's size on disk, and a warm re-run. From the measured
per-file costs and the JPEG folder rows, a projection for ImageNet-1k's training split.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from synthetic import DATA, make_jpeg_folder
from timing import goal

#: ImageNet-1k's training split, and the mean pixels of its JPEGs (about 400×350).
IMAGENET_IMAGES = 1_281_167
IMAGENET_PIXELS = 400 * 350

_LIST = """
import json, sys, time
from normstats.sources import FolderSource
start = time.perf_counter()
source = FolderSource(sys.argv[1])
listed = time.perf_counter()
tasks = source.tasks(workers=2)
planned = time.perf_counter()
peak = next(int(l.split()[1]) for l in open("/proc/self/status") if l.startswith("VmHWM"))
print(json.dumps({"files": len(source), "walk": listed - start, "plan": planned - listed,
                  "tasks": len(tasks), "peak_mb": peak / 1024}))
"""

_RUN = """
import json, sys, time
import normstats
start = time.perf_counter()
stats = normstats.compute(sys.argv[1], cache=sys.argv[2], workers=2, progress=False)
seconds = time.perf_counter() - start
peak = next(int(l.split()[1]) for l in open("/proc/self/status") if l.startswith("VmHWM"))
print(json.dumps({"images": stats.images, "seconds": seconds, "peak_mb": peak / 1024,
                  "cached": stats.images_cached, "decoded": stats.images_decoded}))
"""


def make_tree(count: int) -> Path:
    """``count`` (a multiple of 1,000, at most 1,000,000) tiny PNGs in class folders.

    100,000 distinct images (random 4×4 pixels) repeat every 100,000 files: records as
    varied as real ones, so the cache compresses them no better than it would real data.
    """
    full = DATA / "million_pngs"
    if not (full / "class_0999" / "0999999.png").exists():
        from PIL import Image

        rng = np.random.default_rng(11)
        payloads = []
        for _ in range(100_000):
            buffer = io.BytesIO()
            Image.fromarray(rng.integers(0, 256, (4, 4, 3), dtype=np.uint8)).save(buffer, "PNG")
            payloads.append(buffer.getvalue())
        for folder_index in range(1000):
            folder = full / f"class_{folder_index:04d}"
            folder.mkdir(parents=True, exist_ok=True)
            for i in range(1000):
                index = folder_index * 1000 + i
                (folder / f"{index:07d}.png").write_bytes(payloads[index % len(payloads)])
    if count == 1_000_000:
        return full
    part = DATA / f"million_pngs_first_{count}"
    if not part.exists():
        part.mkdir(parents=True)
        for folder_index in range(count // 1000):  # folder links: the walk follows them
            name = f"class_{folder_index:04d}"
            os.symlink(full / name, part / name)
    return part


_DECODE = """
import json, sys, time
import normstats
normstats.compute(sys.argv[1], workers=2, cache=False)  # warm: the kernel loaded, files cached
start = time.perf_counter()
stats = normstats.compute(sys.argv[1], workers=2, cache=False)
print(json.dumps({"images": stats.images, "seconds": time.perf_counter() - start}))
"""


def _fresh(script: str, *arguments: str) -> dict:
    out = subprocess.run([sys.executable, "-c", script, *arguments], check=True,
                         capture_output=True, text=True)
    return json.loads(out.stdout.splitlines()[-1])


_READ_ALL = """
import os, sys
for folder, _, names in os.walk(sys.argv[1], followlinks=True):
    for name in names:
        with open(os.path.join(folder, name), "rb") as file:
            file.read()
print("{}")
"""


def _size(path: Path) -> int:
    """Bytes the cache keeps: replaced segments waiting in a group's ``trash/`` (left by a
    process killed before deleting them, deleted by the next run) are not counted."""
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file() and
               "trash" not in f.relative_to(path).parts[1:2])


def _warm_against_floor(tree: Path, cache: Path, rounds: int) -> dict[str, list[float]]:
    """``normstats compute TREE --cache CACHE`` (warm) and the walk+stat floor
    (`walk_stat.py`), fresh processes alternated ``rounds`` times, wall seconds."""
    commands = {"warm": [str(Path(sys.executable).with_name("normstats")), "compute",
                         str(tree), "--cache", str(cache)],
                "floor": [sys.executable, str(Path(__file__).with_name("walk_stat.py")),
                          str(tree)]}
    times: dict[str, list[float]] = {name: [] for name in commands}
    for _ in range(rounds):
        for name, command in commands.items():
            start = time.perf_counter()
            subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
            times[name].append(time.perf_counter() - start)
    return times


def bench_scale(quick: bool) -> dict:
    """Listing, planning and caching 10⁵ and 10⁶ files; an ImageNet projection."""
    big = 100_000 if quick else 1_000_000
    small = big // 10
    listings = {n: _fresh(_LIST, str(make_tree(n))) for n in (small, big)}
    runs = {}
    with tempfile.TemporaryDirectory(prefix="normstats-scale-") as scratch:
        for n in (small, big):
            cache = Path(scratch) / f"cache-{n}"
            # the files' pages in the OS cache first, as in every other section: a cold run
            # means no record cache here; a first read from the disk would time the disk
            # (6.8 s instead of ~1.6 s for the 100,000 files on this machine)
            _fresh(_READ_ALL, str(make_tree(n)))
            cold = _fresh(_RUN, str(make_tree(n)), str(cache))
            runs[n] = (cold, _size(cache), _fresh(_RUN, str(make_tree(n)), str(cache)))
            if n == big:
                floor = _warm_against_floor(make_tree(n), cache, 3)
            shutil.rmtree(cache, ignore_errors=True)
    per_file = {n: listings[n]["walk"] / n * 1e6 for n in listings}
    growth = per_file[big] / per_file[small]
    rows = []
    for n in (small, big):
        cold, _, warm = runs[n]
        rows += [[f"list and plan {n:,} files", listings[n]["walk"] + listings[n]["plan"],
                  per_file[n], listings[n]["peak_mb"]],
                 [f"cold run of {n:,} files, filling the record cache", cold["seconds"],
                  cold["seconds"] / n * 1e6, cold["peak_mb"]],
                 [f"warm re-run of {n:,} files, all from the cache", warm["seconds"],
                  warm["seconds"] / n * 1e6, warm["peak_mb"]]]
    cold, cache_bytes, warm = runs[big]
    jpegs = make_jpeg_folder(2_000, 256)
    decode = _fresh(_DECODE, str(jpegs[0].parent))
    per_core = decode["seconds"] * 2 / decode["images"] * IMAGENET_PIXELS / (256 * 256)
    values = {"small": small, "big": big, "walk_growth": growth,
              "walk_us": per_file[big],
              "peak_mb_per_million": listings[big]["peak_mb"] / big * 1e6,
              "cold_peak_growth": (runs[big][0]["peak_mb"] - listings[big]["peak_mb"])
              / max(1e-9, runs[small][0]["peak_mb"] - listings[small]["peak_mb"]) / 10,
              "cache_bytes_per_image": cache_bytes / big, "cache_mb": cache_bytes / 2**20,
              "warm_us": warm["seconds"] / big * 1e6, "cold_us": cold["seconds"] / big * 1e6,
              "cold_peak_mb": cold["peak_mb"],
              "warm_process_s": statistics.median(floor["warm"]),
              "floor_process_s": statistics.median(floor["floor"]),
              "warm_vs_floor": statistics.median(floor["warm"]) / statistics.median(floor["floor"]),
              **_imagenet(per_core, per_file[big], warm["seconds"] / big)}
    rows += [[f"warm re-run of {big:,} files, whole process (normstats compute, median of 3)",
              values["warm_process_s"], values["warm_process_s"] / big * 1e6, float("nan")],
             [f"walk+stat floor of {big:,} files, whole process (walk_stat.py, median of 3)",
              values["floor_process_s"], values["floor_process_s"] / big * 1e6, float("nan")]]
    table = {"columns": [["fresh process", ""], ["seconds", "{:.2f}"],
                         ["µs per file", "{:.1f}"], ["peak MB", "{:,.0f}"]], "rows": rows}
    return {"title": "a million files", "tables": {"main": table}, "values": values,
            "goals": [
                goal(f"cold cached run of {big:,} tiny PNGs: parent peak ≤ 300 MB (measured)",
                     values["cold_peak_mb"], "<=", 300, "{:,.0f} MB"),
                goal(f"warm re-run of {big:,} tiny PNGs ≤ 1.5× the walk+stat floor",
                     values["warm_vs_floor"], "<=", 1.5, "{:.2f}×")]}


def _imagenet(per_core: float, walk_us: float, warm_seconds_per_file: float) -> dict:
    """ImageNet-1k on a cluster from the measured costs: ``per_core`` seconds of a core an
    image (256² JPEGs measured here, scaled by pixels), the listing and the warm re-run of
    the million-file tree."""
    listing = walk_us * 1e-6 * IMAGENET_IMAGES
    return {"imagenet_core_hours": per_core * IMAGENET_IMAGES / 3600,
            "imagenet_listing_s": listing,
            "imagenet_32_workers_min": (listing + per_core * IMAGENET_IMAGES / 32) / 60,
            "imagenet_128_workers_min": (listing + per_core * IMAGENET_IMAGES / 128) / 60,
            "imagenet_warm_min": warm_seconds_per_file * IMAGENET_IMAGES / 60,
            "imagenet_ms_per_image_core": per_core * 1e3}
