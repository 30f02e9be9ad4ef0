"""normstats on dask.distributed against itself on one and two workers and the local pool.

    python benchmarks/bench_distributed.py [--images 5000] [--repeats 5]

A decode-bound folder (256×256 JPEGs, generated deterministically by
``benchmarks/run.py``'s ``make_jpeg_folder``) is computed, in interleaved rounds, by

- the local default: a pool of 2 processes (``normstats.compute(root, workers=2)``);
- normstats' local cluster (``--local-cluster``) of 1 single-threaded worker process;
- the same with 2 single-threaded worker processes;
- a plain ``distributed.LocalCluster`` of 2 such workers, which keeps dask's
  ``MALLOC_TRIM_THRESHOLD_=65536`` in its workers (see docs/distributed.md).

Each cluster is started in turn and measured in rounds interleaved with the local runs
(only one cluster is alive at a time: the idle workers of another would take CPU from
it), after one untimed warm-up run each (worker imports, compiled kernel, page cache).
No cache is used.
Every run must give the bit-identical result of the first, or the benchmark stops.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import platform
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from distributed import Client, LocalCluster  # noqa: E402
from synthetic import make_jpeg_folder  # noqa: E402

import normstats  # noqa: E402
from normstats.engine.cluster import local_cluster  # noqa: E402


def numbers(stats: normstats.DatasetStats) -> dict:
    data = stats.to_dict()
    for name in ("source", "images_cached", "images_decoded"):
        data.pop(name, None)
    return data


def timed(function) -> tuple[float, dict]:
    start = time.perf_counter()
    stats = function()
    return time.perf_counter() - start, numbers(stats)


class StageLines(logging.Handler):
    """Keeps the last stage-time report of `normstats.engine.distributed` per configuration."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.last = ""

    def emit(self, record: logging.LogRecord) -> None:
        self.last = record.getMessage()


STAGES = StageLines()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", type=int, default=5_000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--json", default=None, help="also write the raw timings here")
    args = parser.parse_args()
    logger = logging.getLogger("normstats.engine.distributed")
    logger.addHandler(STAGES)
    logger.setLevel(logging.INFO)
    print(f"load average before: {os.getloadavg()}")

    root = make_jpeg_folder(args.images, 256)[0].parent
    print(f"{args.images} JPEGs 256×256 in {root}; {os.cpu_count()} CPUs, "
          f"{platform.python_version()}", flush=True)
    local = {
        "local, 1 process (control: what one core does now)":
            lambda: normstats.compute(root, workers=1, cache=False),
        "local pool, 2 processes": lambda: normstats.compute(root, workers=2, cache=False),
    }
    clusters = {
        "distributed, 1 worker × 1 thread": lambda: local_cluster(1),
        "distributed, 2 workers × 1 thread": lambda: local_cluster(2),
        # a plain LocalCluster keeps dask's MALLOC_TRIM_THRESHOLD_=65536 in its workers
        "distributed, 2 workers, dask's default MALLOC_TRIM_THRESHOLD_": plain_cluster,
    }
    times: dict[str, list[float]] = {}
    reference: list[dict] = []
    for name, start in clusters.items():
        # one cluster alive at a time: idle workers of another would steal CPU
        with start() as client:
            candidates = {**local, name: lambda client=client: normstats.compute(
                root, scheduler=client, cache=False)}
            for key, values in measure(candidates, args.repeats, reference).items():
                times.setdefault(key, []).extend(values)
    report(times, args.images)
    if args.json:
        Path(args.json).write_text(json.dumps({"images": args.images, "times": times}))
    print(f"load average after: {os.getloadavg()}")


@contextlib.contextmanager
def plain_cluster():
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                      dashboard_address="127.0.0.1:0", silence_logs=logging.ERROR) as cluster:
        with Client(cluster, set_as_default=False) as client:
            yield client


def measure(candidates: dict, repeats: int, first: list[dict]) -> dict[str, list[float]]:
    """Interleaved rounds after one warm-up run each; every result must be identical."""
    for function in candidates.values():
        _, result = timed(function)
        if not first:
            first.append(result)
        if result != first[0]:
            raise SystemExit("results differ between schedulers")
    reference = first[0]
    times: dict[str, list[float]] = {name: [] for name in candidates}
    stages: dict[str, str] = {}
    for _ in range(repeats):
        for name, function in candidates.items():
            seconds, result = timed(function)
            if result != reference:
                raise SystemExit(f"{name}: result differs from the first run")
            times[name].append(seconds)
            stages[name] = STAGES.last if name.startswith("distributed") else ""
    for name, line in stages.items():
        if line:
            print(f"{name}, last run:\n{line}")
    return times


def report(times: dict[str, list[float]], images: int) -> None:
    med = {name: statistics.median(values) for name, values in times.items()}
    print("\n| configuration | median s | spread s | images/s |\n|---|---|---|---|")
    for name, values in times.items():
        print(f"| {name} | {med[name]:.2f} | {min(values):.2f}–{max(values):.2f} | "
              f"{images / med[name]:,.0f} |")
    one, two, pool = (med["distributed, 1 worker × 1 thread"],
                      med["distributed, 2 workers × 1 thread"], med["local pool, 2 processes"])
    print(f"\n2 workers ÷ 1 worker, images/s: {one / two:.2f}× (target ≥ 1.7×)")
    print(f"distributed (2 workers) vs local pool (2 processes): {two / pool - 1:+.1%} time "
          f"(target within 15%)")
    control = med["local, 1 process (control: what one core does now)"]
    print(f"control: local 2 processes ÷ 1 process, images/s: {control / pool:.2f}× "
          "(what this machine's free cores allow right now)")
    print("results bit-identical across all runs: yes")


if __name__ == "__main__":
    main()
