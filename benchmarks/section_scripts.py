"""Sections measured by a benchmark script of their own (run as a separate process).

Each script prints its own report and, with ``--json PATH``, writes its raw timings; the
section turns them into rows and goals.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from timing import goal

HERE = Path(__file__).resolve().parent


def run_script(script: str, arguments: list[str]) -> dict:
    """Run ``script`` with ``arguments``, pass its report through, return its raw timings."""
    with tempfile.TemporaryDirectory(prefix="normstats-bench-") as scratch:
        out = Path(scratch) / "raw.json"
        report = subprocess.run([sys.executable, str(HERE / script), *arguments,
                                 "--json", str(out)], capture_output=True, text=True,
                                check=True).stdout
        print(report, flush=True)
        return json.loads(out.read_text())


def spread_rows(times: dict[str, list[float]], work: float) -> list[list]:
    """name, median, [min, max], work per second."""
    return [[name, statistics.median(values), [min(values), max(values)],
             work / statistics.median(values)] for name, values in times.items()]


def bench_normalize(quick: bool) -> dict:
    """Fused uint8 NHWC → float32 NCHW normalization against the torch and numpy idioms."""
    raw = run_script("bench_normalize.py", ["--quick"] if quick else [])
    med = {name: statistics.median(values) for name, values in raw["times"].items()}
    rows = [[name, med[name], [min(values), max(values)], raw["nbytes"] / med[name] / 1e9,
             med.get("torch idiom", float("nan")) / med[name],
             med["numpy two-step"] / med[name]] for name, values in raw["times"].items()]
    ours = med["normstats Normalize"]
    values = {"images": raw["images"], "rounds": raw["rounds"], "megabytes": raw["nbytes"] / 1e6,
              "vs_torch": med.get("torch idiom", float("nan")) / ours,
              "vs_numpy": med["numpy two-step"] / ours}
    table = {"columns": [["method", ""], ["median s", "{:.4f}"], ["min–max s", "{:.4f}"],
                         ["input GB/s", "{:.2f}"], ["torch idiom / this", "{:.2f}×"],
                         ["numpy two-step / this", "{:.2f}×"]], "rows": rows}
    return {"title": "fused input normalization", "tables": {"main": table}, "values": values,
            "goals": [goal("fused normalization ≥ 2× the PyTorch idiom", values["vs_torch"],
                           ">=", 2, "{:.2f}×"),
                      goal("fused normalization ≥ 2× the numpy two-step", values["vs_numpy"],
                           ">=", 2, "{:.2f}×")]}


def bench_cache(quick: bool) -> dict:
    """Per-image record cache: cold run, re-run, +1% images, opening cost."""
    raw = run_script("bench_cache.py", ["--images", "1000", "--size", "128", "--repeat", "1"]
                     if quick else ["--images", "10000", "--size", "256"])
    plain, cold, warm, added, opening = (row[1] for row in raw["rows"])
    values = {"images": raw["images"], "size": raw["size"], "workers": raw["workers"],
              "rerun_speedup": cold / warm, "added_share": added / cold, "opening": opening,
              "filling_cost": cold / plain - 1}
    table = {"columns": [["run", ""], ["seconds", "{:.3f}"], ["decoded", "{:,}"]],
             "rows": raw["rows"]}
    return {"title": "per-image record cache", "tables": {"main": table}, "values": values,
            "goals": [goal("cached re-run ≥ 50× faster than the cold run",
                           values["rerun_speedup"], ">=", 50, "{:.0f}×"),
                      goal("after adding 1% images ≤ 5% of the cold run",
                           values["added_share"], "<=", 0.05, "{:.1%}"),
                      goal("opening the cache < 0.5 s", opening, "<", 0.5, "{:.3f} s")]}


def bench_distributed(quick: bool) -> dict:
    """dask.distributed on 1 and 2 workers against the local pool."""
    raw = run_script("bench_distributed.py", ["--images", "500", "--repeats", "2"]
                     if quick else [])
    med = {name: statistics.median(values) for name, values in raw["times"].items()}
    one, two = med["distributed, 1 worker × 1 thread"], med["distributed, 2 workers × 1 thread"]
    pool = med["local pool, 2 processes"]
    control = med["local, 1 process (control: what one core does now)"]
    values = {"images": raw["images"], "two_vs_one": one / two, "vs_pool": two / pool - 1,
              "control": control / pool}
    table = {"columns": [["configuration", ""], ["median s", "{:.2f}"], ["spread s", "{:.2f}"],
                         ["images/s", "{:,.0f}"]],
             "rows": spread_rows(raw["times"], raw["images"])}
    return {"title": "dask.distributed", "tables": {"main": table}, "values": values,
            "goals": [goal("2 distributed workers ≥ 1.7× one", values["two_vs_one"], ">=", 1.7,
                           "{:.2f}×"),
                      goal("2 distributed workers within 15% of the local pool's time",
                           values["vs_pool"], "<=", 0.15, "{:+.1%}")]}
