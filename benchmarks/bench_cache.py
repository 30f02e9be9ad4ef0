"""Benchmark of the per-image record cache on a folder of PNG images.

Measures a cold run without the cache, a cold run that fills it (medians of
``--repeat``), a re-run answered by it (median of 5), a run after adding 1% new images
(median of ``--repeat``, each from the cache as it was before), and the cost of opening the
cache (locking, loading and verifying the segments,
planning). Prints a markdown table.

    python benchmarks/bench_cache.py --images 10000 --size 128 --workers 2
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
from PIL import Image

import normstats
from normstats.engine.cache.plan import plan
from normstats.engine.cache.store import DatasetCache
from normstats.sources.folder import FolderSource


def write_images(root: Path, start: int, count: int, size: int) -> None:
    """Photo-like PNGs: a colour cast, a gradient and noise, in 10 class folders."""
    ramp = np.linspace(0, 60, size)[None, :, None]
    for i in range(start, start + count):
        rng = np.random.default_rng(i)
        pixels = rng.uniform(40, 160, 3)[None, None, :] + ramp + rng.normal(0, 12, (size, size, 3))
        folder = root / f"class_{i % 10}"
        folder.mkdir(parents=True, exist_ok=True)
        Image.fromarray(np.clip(pixels, 0, 255).astype(np.uint8)).save(folder / f"{i:06d}.png")


def timed(function, repeat: int = 1) -> tuple[float, object]:
    times, result = [], None
    for _ in range(repeat):
        start = time.perf_counter()
        result = function()
        times.append(time.perf_counter() - start)
    return statistics.median(times), result


def fresh_cold_run(root: Path, cache: Path, options: dict) -> normstats.DatasetStats:
    shutil.rmtree(cache, ignore_errors=True)
    return normstats.compute(root, cache=cache, **options)


def open_cost(root: Path, cache: Path) -> float:
    """Walk excluded: open the group, take the lock, load and verify, plan."""
    source = FolderSource(root)
    start = time.perf_counter()
    store = DatasetCache.open(cache, str(root), source.policy)
    store.try_lock(1.0)
    segments, _ = store.load()
    plan(source.walk.files, [s.index for s in segments])
    store.unlock()
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", type=int, default=10_000)
    parser.add_argument("--size", type=int, default=128)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=3, help="Cold runs to take a median of.")
    parser.add_argument("--json", default=None, help="also write the raw timings here")
    parser.add_argument("--keep", default=None, help="Reuse/keep the dataset in this folder.")
    args = parser.parse_args()
    scratch = Path(tempfile.mkdtemp(prefix="normstats-bench-cache-"))
    root = Path(args.keep) if args.keep else scratch / "data"
    if not root.exists():
        write_images(root, 0, args.images, args.size)
    cache = scratch / "cache"
    options = dict(workers=args.workers)
    try:
        # Warm-up: page cache, worker start, compiled kernels, so the first timing is fair.
        normstats.compute(root / "class_0", cache=False, **options)
        t_plain, plain = timed(lambda: normstats.compute(root, cache=False, **options),
                               repeat=args.repeat)
        t_cold, cold = timed(lambda: fresh_cold_run(root, cache, options), repeat=args.repeat)
        t_warm, warm = timed(lambda: normstats.compute(root, cache=cache, **options), repeat=5)
        t_open = statistics.median(open_cost(root, cache) for _ in range(5))
        existing = sum(1 for _ in root.rglob("*.png"))
        before = scratch / "cache-before"
        shutil.copytree(cache, before)
        write_images(root, existing, existing // 100, args.size)

        def added_run() -> normstats.DatasetStats:
            # the cache as it was before the images were added, every round
            shutil.rmtree(cache)
            shutil.copytree(before, cache)
            start = time.perf_counter()
            stats = normstats.compute(root, cache=cache, **options)
            added_times.append(time.perf_counter() - start)
            return stats

        added_times: list[float] = []
        inc = [added_run() for _ in range(args.repeat)][-1]
        t_inc = statistics.median(added_times)
        assert plain == cold == warm and warm.images_decoded == 0
        assert inc.images_decoded == existing // 100
        rows = [
            ("cold, no cache", t_plain, plain.images, ""),
            ("cold, filling the cache", t_cold, cold.images_decoded,
             f"{t_cold / t_plain - 1:+.1%} vs no cache"),
            ("re-run from the cache", t_warm, warm.images_decoded,
             f"{t_cold / t_warm:,.0f}x faster than cold"),
            (f"after adding 1% ({inc.images_decoded}) images", t_inc, inc.images_decoded,
             f"{t_inc / t_cold:.1%} of cold"),
            ("opening the cache (load + verify + plan)", t_open, 0, ""),
        ]
        print(f"{plain.images:,} PNG {args.size}x{args.size} RGB, {args.workers} workers\n")
        print("| run | seconds | decoded | note |\n|---|---:|---:|---|")
        for name, seconds, decoded, note in rows:
            print(f"| {name} | {seconds:.3f} | {decoded:,} | {note} |")
        if args.json:
            Path(args.json).write_text(json.dumps({
                "images": plain.images, "size": args.size, "workers": args.workers,
                "rows": [[name, seconds, decoded] for name, seconds, decoded, _ in rows]}))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
