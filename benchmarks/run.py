"""Reproduce every figure of benchmarks/README.md: normstats against its peers, same run.

    python benchmarks/run.py [--only array,folder,...]   # measure, save, re-render README
    python benchmarks/run.py --quick [--only ...]        # small data; prints, writes nothing
    python benchmarks/run.py --render                    # re-render README (GOALS), measure nothing
    python benchmarks/run.py --against REV               # rows slower than at commit REV

Data is generated deterministically; each measurement is repeated and reported as the
median with its spread (min–max); ratios compare medians measured in this one run, so a
busy machine slows peers and normstats alike.

Several sections run one after the other, each in a fresh process of its own (this script
with ``--only NAME``): what a section leaves in its process (its data, the libraries it
imported and their threads) could otherwise slow the sections after it. In the last full
run that measured every section in one process, the raster section's one-process peer took
47-52% longer than when the section ran alone minutes later, normstats on 256² tiles 35%
longer and the decode-only ceiling 10-18%: separate processes take that cause out.

A full run saves each section's result into ``benchmarks/results.json`` (merged section by
section: ``--only X`` replaces only X's entry) and renders ``benchmarks/README.md`` from it
and the prose of ``benchmarks/README.template.md`` (see ``render.py``). No figure in the
README is typed by hand.

Adding a section (map-style datasets, dask arrays, parquet, start-up, ...):

1. write ``bench_NAME(quick: bool) -> dict`` in a ``section_*.py`` module, returning
   ``{"title": str, "tables": {"main": table}, "values": {name: number},
   "goals": [timing.goal(...)]}``, a table being ``{"columns": [[name, format], ...],
   "rows": [[cell, ...], ...]}`` (see ``timing.py``);
2. register it in ``SECTIONS`` below (the order is the order of the goals table);
3. put ``{{table:NAME}}`` and any ``{{value:NAME.KEY:FORMAT}}`` in the template, run
   ``python benchmarks/run.py --only NAME`` and commit results.json and README.md.
"""

from __future__ import annotations

import argparse
import datetime
import importlib
import json
import os
import platform
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import render  # noqa: E402
from bench_dask import bench_dask  # noqa: E402
from bench_dask import goals as dask_goals  # noqa: E402
from bench_datasets import bench_datasets  # noqa: E402
from section_cache_costs import bench_cache_costs  # noqa: E402
from section_cache_costs import goals as cache_costs_goals  # noqa: E402
from section_costs import bench_memory, bench_overhead  # noqa: E402
from section_covariance import bench_covariance  # noqa: E402
from section_hf import bench_hf  # noqa: E402
from section_install import bench_install  # noqa: E402
from section_layouts import bench_layouts  # noqa: E402
from section_mean_image import bench_mean_image  # noqa: E402
from section_peers import bench_array, bench_folder, bench_png  # noqa: E402
from section_processes import bench_processes  # noqa: E402
from section_processes import goals as processes_goals  # noqa: E402
from section_rasters import bench_rasters  # noqa: E402
from section_rasters import goals as rasters_goals  # noqa: E402
from section_scale import bench_scale  # noqa: E402
from section_scripts import bench_cache, bench_distributed, bench_normalize  # noqa: E402
from section_startup import bench_startup  # noqa: E402

import normstats  # noqa: E402

SECTIONS: dict[str, Callable[[bool], dict]] = {
    "array": bench_array, "folder": bench_folder, "mean_image": bench_mean_image,
    "covariance": bench_covariance,
    "png": bench_png,
    "overhead": bench_overhead, "memory": bench_memory, "normalize": bench_normalize,
    "cache": bench_cache, "cache_costs": bench_cache_costs, "distributed": bench_distributed,
    "datasets": bench_datasets,
    "dask": bench_dask, "startup": bench_startup, "layouts": bench_layouts,
    "processes": bench_processes, "install": bench_install, "scale": bench_scale,
    "hf": bench_hf, "rasters": bench_rasters,
}
#: Sections whose goals are derived from their measured values by a function of their
#: own: `--render` derives them again, so a goal's wording or measured floor can change
#: without measuring the section again (its figures stay the ones measured).
GOALS: dict[str, Callable[[dict], list[dict]]] = {
    "cache_costs": cache_costs_goals, "dask": dask_goals, "processes": processes_goals,
    "rasters": rasters_goals,
}
PACKAGES = ("numpy", "dask", "distributed", "zarr", "PIL", "simplejpeg", "tifffile",
            "imagecodecs", "torch", "sklearn")


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def machine() -> dict:
    """The machine and software a section ran on, and when, under what load."""
    versions = []
    for module in PACKAGES:
        try:
            versions.append(f"{module} {importlib.import_module(module).__version__}")
        except ImportError:
            pass
    memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    line = (f"{os.cpu_count()} CPUs ({cpu_model()}), {memory:.0f} GiB, Python "
            f"{platform.python_version()}, normstats {normstats.__version__}, "
            + ", ".join(versions))
    now = datetime.datetime.now(datetime.UTC)
    return {"line": line, "date": now.strftime("%Y-%m-%d %H:%M UTC"),
            "load": " ".join(f"{value:.1f}" for value in os.getloadavg()),
            "loop_ms": python_loop_ms()}


def python_loop_ms() -> float:
    """Milliseconds of a pure-Python loop of 10⁶ additions, best of 5: how fast this
    machine ran Python when a section was measured. The same shared machine has run it
    2× slower from one day to the next, so sections measured on different days compare
    only through ratios, and this figure says by how much the day differed."""
    best = float("inf")
    for _ in range(5):
        start, total = time.perf_counter(), 0
        for step in range(1_000_000):
            total += step
        best = min(best, time.perf_counter() - start)
    return best * 1000


def save(measured: dict[str, dict]) -> None:
    """Merge ``measured`` into the results file, section by section, and re-render."""
    results = json.loads(render.RESULTS.read_text()) if render.RESULTS.exists() else {}
    results.update(measured)
    ordered = {name: results[name] for name in SECTIONS if name in results}
    ordered.update({name: value for name, value in results.items() if name not in SECTIONS})
    render.RESULTS.write_text(json.dumps(ordered, indent=1, ensure_ascii=False) + "\n")
    if render.TEMPLATE.exists():
        render.README.write_text(render.render_files(list(SECTIONS)))


def derive_goals(results: dict[str, dict]) -> dict[str, dict]:
    """``results`` with the goals of the `GOALS` sections derived again from their values."""
    for name, derive in GOALS.items():
        if name in results:
            results[name]["goals"] = derive(results[name]["values"])
    return results


def compile_bytecode() -> None:
    """Compile normstats' modules to bytecode, as ``pip install`` does for an install.

    An editable install (the one this script documents) leaves the bytecode to the first
    run, and with ``PYTHONDONTWRITEBYTECODE`` set (some containers set it) every process
    would compile every module again: ~0.1 s that no installed normstats pays. The rows
    of first runs ask for a cold bytecode cache themselves (section_startup.py).
    """
    import compileall

    root = Path(__file__).resolve().parent.parent
    for package in ("normstats", "cli", "data_manifests"):
        compileall.compile_dir(str(root / package), quiet=1)


def _timed_rows(results: dict) -> dict[tuple[str, ...], tuple[float, str]]:
    """Every row that has a time, keyed by section, table and its leading text cells: its
    seconds (the median where the table has one) and the load its section ran under."""
    rows = {}
    for name, section in results.items():
        load = section.get("machine", {}).get("load", "?")
        for table_name, table in section["tables"].items():
            columns = [column[0] for column in table["columns"]]
            timed = [i for i, c in enumerate(columns) if c in ("median s", "seconds")]
            if not timed:
                continue
            for row in table["rows"]:
                label = tuple(str(cell) for cell in row[:timed[0]])
                if isinstance(row[timed[0]], (int, float)):
                    rows[(name, table_name, *label)] = (float(row[timed[0]]), load)
    return rows


def slower_than(revision: str, tolerance: float = 0.05) -> list[str]:
    """The rows of ``results.json`` more than ``tolerance`` slower than at ``revision``
    (a git commit), each with both times and the loads they ran under: the check of "no
    row gets slower by more than 5%". Rows renamed or added since have nothing to compare.
    """
    import subprocess

    old_text = subprocess.run(["git", "show", f"{revision}:benchmarks/results.json"],
                              capture_output=True, text=True, check=True,
                              cwd=render.RESULTS.parent).stdout
    old, new = _timed_rows(json.loads(old_text)), _timed_rows(json.loads(
        render.RESULTS.read_text()))
    lines = []
    for key in sorted(old.keys() & new.keys()):
        (before, old_load), (after, new_load) = old[key], new[key]
        if before > 0 and after > before * (1 + tolerance):
            lines.append(f"{after / before:6.2f}×  {' | '.join(key)}: {before:.4g} s (load "
                         f"{old_load}) → {after:.4g} s (load {new_load})")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true",
                        help="small data; print the results, write nothing")
    parser.add_argument("--only", default=",".join(SECTIONS), help="comma-separated sections")
    parser.add_argument("--render", action="store_true",
                        help="re-render README.md from results.json without measuring (goals "
                             "derived again from the measured values: GOALS)")
    parser.add_argument("--against", metavar="REV",
                        help="list the rows more than 5%% slower than at git commit REV")
    args = parser.parse_args()
    if args.against:
        slower = slower_than(args.against)
        print("\n".join(slower) or f"no row is more than 5% slower than at {args.against}")
        return
    if args.render:
        save(derive_goals(json.loads(render.RESULTS.read_text())))
        return
    names = args.only.split(",")
    unknown = [name for name in names if name not in SECTIONS]
    if unknown:
        parser.error(f"unknown section(s) {', '.join(unknown)}; known: {', '.join(SECTIONS)}")
    compile_bytecode()
    if len(names) > 1:  # each section in a fresh process: none inherits another's state
        import subprocess

        for name in names:
            subprocess.run([sys.executable, str(Path(__file__).resolve()), "--only", name,
                            *(["--quick"] if args.quick else [])], check=True)
        return
    for name in names:
        section = SECTIONS[name](args.quick)
        section["machine"] = machine()
        print(json.dumps({name: section}, indent=1, ensure_ascii=False), flush=True)
        if not args.quick:
            save({name: section})  # saved as it completes: a later failure keeps it


if __name__ == "__main__":
    main()
