"""Start-up as a user waits for it: whole processes, timed in alternation.

Every row is a fresh process, started the way a user starts it (the installed
``normstats`` script, ``python -c``), so imports, the walk and the exit are all counted.
The rows are measured in rounds, each round running every command once in turn, so a busy
machine slows them alike; the floor is ``python -c "import numpy"``, the least any numpy
tool can cost.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from synthetic import DATA, make_jpeg_folder
from timing import goal

from normstats.engine import pipeline


def _three_pngs() -> Path:
    import numpy as np
    from PIL import Image

    folder = DATA / "startup_three_png"
    if len(list(folder.glob("*.png"))) != 3:
        folder.mkdir(parents=True, exist_ok=True)
        rng = np.random.default_rng(3)
        for i in range(3):
            Image.fromarray(rng.integers(0, 256, (32, 32, 3), dtype=np.uint8)).save(
                folder / f"{i}.png")
    return folder


def _timed(command: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    subprocess.run(command, env=env, check=True, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL)
    return time.perf_counter() - start


def bench_startup(quick: bool) -> dict:
    """`--help`, `import normstats`, a 3-image compute, and the first run after install."""
    script = str(Path(sys.executable).with_name("normstats"))
    three = str(_three_pngs())
    count = 1_500 if quick else 2_000
    jpegs = str(make_jpeg_folder(count, 256)[0].parent)
    rounds = 3 if quick else 7
    with tempfile.TemporaryDirectory(prefix="normstats-startup-") as scratch:
        cache = str(Path(scratch) / "records")
        env = dict(os.environ)
        commands = {
            "python -c 'import numpy' (the floor)": [sys.executable, "-c", "import numpy"],
            "python -c 'import normstats'": [sys.executable, "-c", "import normstats"],
            "normstats --help": [script, "--help"],
            "normstats compute: 3 PNGs, no cache": [script, "compute", three, "--no-cache"],
            "normstats compute: 3 PNGs, warm record cache": [script, "compute", three,
                                                             "--cache", cache],
            "normstats compute: JPEG folder": [script, "compute", jpegs, "--no-cache"],
        }
        first_run = "normstats compute: JPEG folder, first run (no bytecode cached)"
        for command in commands.values():  # warm the OS file cache and ours
            _timed(command, env)
        times: dict[str, list[float]] = {name: [] for name in [*commands, first_run]}
        for round_ in range(rounds):
            for name, command in commands.items():
                times[name].append(_timed(command, env))
            # Worse than a fresh install, which compiles the bytecode as it installs: every
            # module of every package is compiled again from source.
            fresh = {**env, "PYTHONPYCACHEPREFIX": str(Path(scratch) / f"pyc-{round_}")}
            times[first_run].append(_timed(commands["normstats compute: JPEG folder"], fresh))
    med = {name: statistics.median(values) for name, values in times.items()}
    floor = med["python -c 'import numpy' (the floor)"]
    rows = [[name, med[name], [min(values), max(values)], med[name] / floor]
            for name, values in times.items()]
    later = med["normstats compute: JPEG folder"]
    values = {"floor": floor, "help_ratio": med["normstats --help"] / floor,
              "import_seconds": med["python -c 'import normstats'"],
              "three_ratio": med["normstats compute: 3 PNGs, no cache"] / floor,
              "three_cached_ratio": med["normstats compute: 3 PNGs, warm record cache"] / floor,
              "first_vs_later": med[first_run] / later, "rounds": rounds,
              "jpegs": count,
              "small_run_megabytes": pipeline.SMALL_RUN_BYTES / 2**20}
    table = {"columns": [["whole process", ""], ["median s", "{:.3f}"],
                         ["min–max s", "{:.3f}"], ["× the floor", "{:.1f}×"]], "rows": rows}
    return {"title": "start-up, whole processes", "tables": {"main": table}, "values": values,
            "goals": [
                goal("normstats --help ≤ 1.5× python -c 'import numpy'", values["help_ratio"],
                     "<=", 1.5, "{:.2f}×"),
                goal("normstats compute of 3 small images ≤ 3× that floor",
                     values["three_ratio"], "<=", 3, "{:.2f}×"),
                goal("import normstats ≤ 0.25 s", values["import_seconds"], "<=", 0.25,
                     "{:.3f} s")]}
