"""What the record cache costs at the limit (issue 30): filling it, holding it, re-reading it.

Every measurement is a fresh process, alternated round by round with what it is compared
to, so a machine busy for a while slows both alike:

- cold: ``normstats compute FOLDER --workers 2`` without the cache and with a fresh one,
  on photo-like PNGs 16² (decoding is cheap there, so what caching costs shows): the time
  filling the cache adds, and the peak resident memory (VmHWM) of the process that runs
  the pipeline, with the cache against without;
- warm: the same command re-run on its cache (``normstats compute FOLDER --cache C``)
  against `walk_stat.py`, a process that only lists the tree and stats every file, the
  least any tool that keys a cache on each file's size and time can do, alone and after
  importing numpy (and click).

Every process runs in a fresh ``pip install .`` environment (`section_install.fresh_install`),
what a user has: an editable install adds its import hook's start-up to every process,
the floors' too, which would flatter every ratio to them.
"""

from __future__ import annotations

import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from section_install import fresh_install
from synthetic import make_photo_png_folder
from timing import goal

from normstats.engine.cache.run import FLUSH_SECONDS
from normstats.engine.cache.writer import FLUSH_BYTES

HERE = Path(__file__).resolve().parent

#: The command line in a process that says on stderr its own peak resident memory and the
#: modules its run imported (its packages, normstats' modules one by one; only those
#: importable by name: not a Cython extension's runtime, say), from an `atexit` handler:
#: the command ends its process (`normstats_cli.end_process`) as the `normstats` script's
#: does.
_CLI = """
import atexit, sys
before = set(sys.modules)
def report():
    peak = next(int(l.split()[1]) for l in open("/proc/self/status") if l.startswith("VmHWM"))
    print("peak_kb", peak, file=sys.stderr)
    new = [m for m, module in list(sys.modules.items()) if m not in before
           and not m.startswith("_") and getattr(module, "__spec__", None) is not None]
    print("modules", ",".join(sorted(m for m in new
                                     if "." not in m or m.startswith("normstats"))),
          file=sys.stderr)
atexit.register(report)
import normstats_cli
sys.argv = ["normstats", *sys.argv[1:]]
normstats_cli.run()
"""


def _process(command: list[str]) -> tuple[float, float]:
    """Seconds of a fresh process, and its peak resident MB when it says it (else NaN).

    It runs in the system's temporary folder: ``python -c`` puts its working folder first
    on the path, and this checkout's own ``normstats`` folder would shadow the install."""
    start = time.perf_counter()
    done = subprocess.run(command, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                          text=True, cwd=tempfile.gettempdir())
    seconds = time.perf_counter() - start
    peaks = [line.split()[1] for line in done.stderr.splitlines() if line.startswith("peak_kb")]
    return seconds, int(peaks[-1]) / 1024 if peaks else float("nan")


def _cli(bin_dir: Path, *arguments: str) -> list[str]:
    """``normstats ARGUMENTS`` run by the install in ``bin_dir``, saying its peak memory."""
    return [str(bin_dir / "python"), "-c", _CLI, *arguments]


def imported_modules(bin_dir: Path, *arguments: str) -> str:
    """The modules ``normstats ARGUMENTS`` imports (comma-separated, as `walk_stat.py
    --import` takes them): its packages, and normstats' own modules one by one."""
    done = subprocess.run(_cli(bin_dir, *arguments), check=True, cwd=tempfile.gettempdir(),
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    return next(line.split()[1] for line in done.stderr.splitlines()
                if line.startswith("modules "))


def cold_rounds(bin_dir: Path, folder: Path, scratch: Path, rounds: int
                ) -> dict[str, list[tuple[float, float]]]:
    """A run without the cache and one filling a fresh cache, alternated ``rounds`` times."""
    runs: dict[str, list[tuple[float, float]]] = {"plain": [], "cached": []}
    plain = _cli(bin_dir, "compute", str(folder), "--no-cache", "--workers", "2")
    _process(plain)  # the file system's caches warm
    for round_ in range(rounds):
        cache = scratch / f"cold-{round_}"
        cached = _cli(bin_dir, "compute", str(folder), "--cache", str(cache), "--workers", "2")
        for name in ("plain", "cached") if round_ % 2 == 0 else ("cached", "plain"):
            runs[name].append(_process(plain if name == "plain" else cached))
        if round_ < rounds - 1:
            shutil.rmtree(cache)  # the last one stays: the warm runs read it
    return runs


def warm_rounds(bin_dir: Path, folder: Path, cache: Path, rounds: int) -> dict[str, list[float]]:
    """The warm re-run and the walk+stat floors (the standard library's alone, after
    importing numpy, numpy and click, and every module the warm re-run imports), alternated
    ``rounds`` times (rounded up to a multiple of the commands)."""
    floor = [str(bin_dir / "python"), str(HERE / "walk_stat.py"), str(folder)]
    modules = imported_modules(bin_dir, "compute", str(folder), "--cache", str(cache))
    commands = {"warm": [str(bin_dir / "normstats"), "compute", str(folder), "--cache",
                         str(cache)],
                "floor": floor, "numpy_only_floor": [*floor, "--import", "numpy"],
                "numpy_floor": [*floor, "--import", "numpy,click"],
                "modules_floor": [*floor, "--import", modules]}
    for command in commands.values():  # the file system's caches warm
        _process(command)
    times: dict[str, list[float]] = {name: [] for name in commands}
    names = list(commands)
    rounds = -(-rounds // len(names)) * len(names)  # every command as often in each place
    for round_ in range(rounds):
        # each round starts at the next command: a process run right after another kind
        # (a walk+stat process) measured 10-15 ms slower than in another place of the round
        for name in names[round_ % len(names):] + names[:round_ % len(names)]:
            times[name].append(_process(commands[name])[0])
    return times


def bench_cache_costs(quick: bool) -> dict:
    """Filling the record cache, the memory it takes, and a warm re-run against the floor."""
    big, small = (20_000, 2_000) if quick else (100_000, 10_000)
    rounds = 2 if quick else 9  # cold runs alternated: the fill cost is a few %, run to run
    # noise on two shared cores as much: 9 rounds keep the median steady
    folders = {n: make_photo_png_folder(n, 16)[0].parent.parent for n in (big, small)}
    with tempfile.TemporaryDirectory(prefix="normstats-cache-costs-") as scratch:
        bin_dir, _ = fresh_install(Path(scratch) / "venv")
        cold = cold_rounds(bin_dir, folders[big], Path(scratch), rounds)
        warm = {big: warm_rounds(bin_dir, folders[big], Path(scratch) / f"cold-{rounds - 1}",
                                 rounds + 2)}
        small_cache = Path(scratch) / "small"
        _process(_cli(bin_dir, "compute", str(folders[small]), "--cache", str(small_cache)))
        warm[small] = warm_rounds(bin_dir, folders[small], small_cache, rounds + 4)
    med = {name: statistics.median(s for s, _ in runs) for name, runs in cold.items()}
    peak = {name: statistics.median(p for _, p in runs) for name, runs in cold.items()}
    warm_med = {n: {name: statistics.median(t) for name, t in times.items()}
                for n, times in warm.items()}
    values = {"big": big, "small": small, "rounds": rounds,
              "flush_seconds": FLUSH_SECONDS, "flush_mib": FLUSH_BYTES / 2**20,
              "filling_cost": med["cached"] / med["plain"] - 1,
              "peak_ratio": peak["cached"] / peak["plain"],
              "peak_plain_mb": peak["plain"], "peak_cached_mb": peak["cached"],
              "bytes_per_image": (peak["cached"] - peak["plain"]) * 2**20 / big,
              "warm_ratio_big": warm_med[big]["warm"] / warm_med[big]["floor"],
              "warm_ratio_small": warm_med[small]["warm"] / warm_med[small]["floor"],
              **{f"numpy_only_floor_ratio_{size}": warm_med[n]["numpy_only_floor"]
                 / warm_med[n]["floor"] for size, n in (("big", big), ("small", small))},
              **{f"numpy_floor_ratio_{size}": warm_med[n]["numpy_floor"] / warm_med[n]["floor"]
                 for size, n in (("big", big), ("small", small))},
              **{f"warm_over_numpy_floor_{size}": warm_med[n]["warm"]
                 / warm_med[n]["numpy_floor"] for size, n in (("big", big), ("small", small))},
              **{f"modules_floor_ratio_{size}": warm_med[n]["modules_floor"]
                 / warm_med[n]["floor"] for size, n in (("big", big), ("small", small))},
              **{f"warm_over_modules_floor_{size}": warm_med[n]["warm"]
                 / warm_med[n]["modules_floor"] for size, n in (("big", big), ("small", small))}}
    rows = [[f"cold, no cache: {big:,} PNGs 16²", med["plain"],
             [min(s for s, _ in cold["plain"]), max(s for s, _ in cold["plain"])],
             peak["plain"]],
            [f"cold, filling the cache: {big:,} PNGs 16²", med["cached"],
             [min(s for s, _ in cold["cached"]), max(s for s, _ in cold["cached"])],
             peak["cached"]]]
    for n in (big, small):
        rows += [[f"warm re-run: {n:,} files", warm_med[n]["warm"],
                  [min(warm[n]["warm"]), max(warm[n]["warm"])], float("nan")],
                 [f"walk+stat floor (walk_stat.py): {n:,} files", warm_med[n]["floor"],
                  [min(warm[n]["floor"]), max(warm[n]["floor"])], float("nan")],
                 [f"walk+stat after import numpy: {n:,} files",
                  warm_med[n]["numpy_only_floor"],
                  [min(warm[n]["numpy_only_floor"]), max(warm[n]["numpy_only_floor"])],
                  float("nan")],
                 [f"walk+stat after import numpy, click: {n:,} files",
                  warm_med[n]["numpy_floor"],
                  [min(warm[n]["numpy_floor"]), max(warm[n]["numpy_floor"])], float("nan")],
                 [f"walk+stat after importing every module the warm re-run imports: {n:,} "
                  "files", warm_med[n]["modules_floor"],
                  [min(warm[n]["modules_floor"]), max(warm[n]["modules_floor"])],
                  float("nan")]]
    table = {"columns": [["fresh process (2 workers)", ""], ["median s", "{:.3f}"],
                         ["min–max s", "{:.3f}"], ["peak MB", "{:,.1f}"]], "rows": rows}
    return {"title": "the record cache at the limit", "tables": {"main": table},
            "values": values, "goals": goals(values)}


def goals(values: dict) -> list[dict]:
    """The section's goals, from its measured ``values``."""
    big, small = values["big"], values["small"]
    return [goal(f"filling the record cache: ≤ +10% on a cold run of {big:,} PNGs 16²",
                 values["filling_cost"], "<=", 0.10, "{:+.1%}"),
            goal("peak memory of a cached cold run ≤ 1.3× without the cache",
                 values["peak_ratio"], "<=", 1.3, "{:.2f}×"),
            goal(f"warm re-run of {big:,} files ≤ 1.5× a walk+stat process",
                 values["warm_ratio_big"], "<=", 1.5, "{:.2f}×"),
            goal(f"warm re-run of {small:,} files ≤ 3× a walk+stat process",
                 values["warm_ratio_small"], "<=", 3, "{:.2f}×",
                 floor=("the walk+stat process after import numpy (which the exact sums need)",
                        values["numpy_only_floor_ratio_small"])),
            goal(f"warm re-run of {small:,} files ≤ 1.5× the walk+stat process after "
                 "import numpy, click", values["warm_over_numpy_floor_small"], "<=", 1.5,
                 "{:.2f}×")]


if __name__ == "__main__":  # one section alone, printed (run.py saves and renders)
    print(json.dumps(bench_cache_costs("--quick" in sys.argv), indent=1, ensure_ascii=False))
