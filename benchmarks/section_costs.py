"""Sections measuring normstats' own costs: per-image overhead and peak memory."""

from __future__ import annotations

import os
import subprocess
import sys
from multiprocessing import get_context

from synthetic import DATA, make_png_folder
from timing import goal, measure_alternated

import normstats


def _run_task(task) -> object:
    return task.run()


def bench_overhead(quick: bool) -> dict:
    """Per-image cost of statistics, walking and scheduling, for small PNGs."""
    from normstats.sources.decoding.decode import decode_bytes
    from normstats.sources.decoding.policy import DecodePolicy
    from normstats.sources.folder import FolderSource, read_in_batches

    count = 4_000 if quick else 20_000
    make_png_folder(count, 32)
    root = DATA / f"png_32_{count}"
    source = FolderSource(root)
    policy = DecodePolicy("RGB")

    def decode_only() -> None:
        # the files read as the tasks read them (a few dozen at a time), then decoded
        for task in source.tasks(workers=1):
            for batch in read_in_batches(os.path.join(task.root, ""), task.files, policy):
                for path, data in batch:
                    decode_bytes(data, path, policy)

    def tasks_directly() -> None:
        for task in source.tasks(workers=1):
            task.run()

    def listed_tasks_on_bare_pool() -> None:
        # The listing included, as in normstats.compute: the two differ only in what
        # normstats adds around the same tasks (planning, scheduling, merging).
        tasks = FolderSource(root).tasks(workers=2)
        with get_context("fork").Pool(2) as pool:
            pool.map(_run_task, tasks, chunksize=1)

    stages = (
        ("walking the folder (listing, sorting, links)", lambda: FolderSource(root)),
        ("decode only (the tasks' reads, then decode_bytes)", decode_only),
        ("decode + records (the tasks, no scheduler)", tasks_directly),
        ("normstats.compute, 1 worker, in this process",
         lambda: normstats.compute(root, workers=1, scheduler="sync")),
        ("listing + the same tasks on a bare Pool(2)", listed_tasks_on_bare_pool),
        ("normstats.compute, 2 processes", lambda: normstats.compute(root, workers=2)))
    timings = measure_alternated([function for _, function in stages], 5)
    rows = [(name, *timing[:3]) for (name, _), timing in zip(stages, timings)]
    walk, decode, direct, sync, pool, parallel = (row[1] for row in rows)
    values = {"images": count,
              "statistics_us": (direct - decode) / count * 1e6,
              "statistics_share": (direct - decode) / decode,
              "walk_share_sync": walk / sync,
              "scheduling_share_sync": (sync - walk - direct) / sync,
              "walk_share_parallel": walk / parallel,
              "scheduling_over_pool": (parallel - pool) / parallel}
    table = {"columns": [["stage", ""], ["median s", "{:.3f}"], ["spread s", "{:.3f}"],
                         ["µs per image", "{:.0f}"]],
             "rows": [[name, med, [low, high], med / count * 1e6]
                      for name, med, low, high in rows]}
    return {"title": f"per-image overhead, {count:,} PNGs 32×32", "tables": {"main": table},
            "values": values,
            "goals": [goal("scheduling overhead under 5% (planning and scheduling over a bare "
                           "pool of the same tasks)", values["scheduling_over_pool"], "<", 0.05,
                           "{:.1%}")]}


_PEAK_RSS = """
import resource, sys, normstats
normstats.compute(sys.argv[1], workers=2, progress=False)
# VmHWM, not ru_maxrss: Linux carries ru_maxrss over exec from the benchmark's own process
peak = next(int(line.split()[1]) for line in open("/proc/self/status") if line.startswith("VmHWM"))
print(peak, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
"""


def bench_memory(quick: bool) -> dict:
    """Peak resident memory of a whole run, parent and worker processes, by image count."""
    counts = (2_000, 20_000) if quick else (5_000, 50_000)
    rows = []
    for count in counts:
        make_png_folder(count, 32)
        out = subprocess.run([sys.executable, "-c", _PEAK_RSS, str(DATA / f"png_32_{count}")],
                             capture_output=True, text=True, check=True).stdout.split()
        rows.append([count, int(out[0]) / 1024, int(out[1]) / 1024])
    (small, parent_small, worker_small), (large, parent_large, worker_large) = rows
    values = {"small": small, "large": large,
              "parent_growth": parent_large / parent_small - 1,
              "worker_growth": worker_large / worker_small - 1}
    table = {"columns": [["images (32×32 PNG folders)", "{:,}"], ["parent peak MiB", "{:.0f}"],
                         ["largest worker peak MiB", "{:.0f}"]], "rows": rows}
    growth = max(values["parent_growth"], values["worker_growth"])
    return {"title": "peak resident memory by dataset size", "tables": {"main": table},
            "values": values,
            "goals": [goal(f"peak memory of a {large:,}-image run within 10% of a "
                           f"{small:,}-image run (parent and each worker, the larger shown)",
                           growth, "<=", 0.10, "{:+.1%}")]}
