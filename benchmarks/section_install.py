"""Install weight, measured: a fresh virtual environment, ``pip install .``, sizes on disk.

The base install (no extras) is what every user downloads; each distribution's size is
the sum of the files its metadata lists (``importlib.metadata``), read inside that
environment. Heavy distributions are listed with what they buy and the benchmark rows
that show it. In the same fresh environment, the first ``normstats compute`` of a JPEG
folder is timed against the later ones: what a user waits for right after installing.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from synthetic import make_jpeg_folder
from timing import goal

ROOT = Path(__file__).resolve().parents[1]

_SIZES = """
import json, os
from importlib import metadata
sizes = {}
for dist in metadata.distributions():
    total = 0
    for file in dist.files or ():
        path = file.locate()
        if os.path.isfile(path):
            total += os.path.getsize(path)
    sizes[dist.metadata["Name"]] = total
print(json.dumps(sizes))
"""

#: What each heavy dependency buys, and where the benchmark README shows it.
BUYS = {
    "imagecodecs": "libpng without Pillow's per-file overhead: the PNG folder rows",
    "numpy": "every reduction",
    "pillow": "every decode the fast paths do not take, and every error message",
    "numcodecs": "zarr's codecs: the record cache",
    "zarr": "the record cache (cache section: warm re-runs)",
    "dask": "Dask arrays in and out, and clusters (dask and distributed sections)",
    "simplejpeg": "libjpeg-turbo without Pillow's overhead: the JPEG folder rows",
}

_SKIP = {"pip", "setuptools", "normstats"}


def fresh_install(venv: Path) -> tuple[Path, float]:
    """A new virtual environment at ``venv`` holding ``pip install .`` of this checkout, no
    extras: what a user installs. Returns its ``bin`` folder and the seconds pip took."""
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    start = time.perf_counter()
    subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q", str(ROOT)],
                   check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return venv / "bin", time.perf_counter() - start


def bench_install(quick: bool) -> dict:
    """The size of a fresh base install of normstats, per distribution."""
    with tempfile.TemporaryDirectory(prefix="normstats-install-") as scratch:
        bin_dir, seconds = fresh_install(Path(scratch) / "venv")
        out = subprocess.run([str(bin_dir / "python"), "-c", _SIZES], check=True,
                             capture_output=True, text=True)
        first, later = _first_and_later_runs(bin_dir / "normstats", 2_000)
    sizes = {name: size for name, size in json.loads(out.stdout).items()
             if name.lower() not in _SKIP}
    total = sum(sizes.values())
    ranked = sorted(sizes.items(), key=lambda item: -item[1])
    rows = [[name, size / 2**20, size / total, BUYS.get(name.lower(), "")]
            for name, size in ranked if size >= 5 * 2**20]
    rest = sum(size for _, size in ranked if size < 5 * 2**20)
    rows.append([f"{sum(1 for _, s in ranked if s < 5 * 2**20)} smaller distributions",
                 rest / 2**20, rest / total, ""])
    values = {"megabytes": total / 2**20, "distributions": len(sizes), "threshold_megabytes": 5,
              "install_seconds": seconds, "first_run": first,
              "later_run": statistics.median(later), "later_runs": len(later),
              "first_vs_later": first / statistics.median(later)}
    table = {"columns": [["distribution", ""], ["MB", "{:.1f}"], ["share", "{:.0%}"],
                         ["what it buys", ""]], "rows": rows}
    return {"title": "install weight", "tables": {"main": table}, "values": values,
            "goals": [goal("first run after a fresh install ≤ 2× a later run (2,000 JPEGs "
                           "256², whole processes)", values["first_vs_later"], "<=", 2,
                           "{:.2f}×")]}


def _first_and_later_runs(script: Path, count: int, later_runs: int = 5
                          ) -> tuple[float, list[float]]:
    """Seconds of the first ``normstats compute`` of a JPEG folder from a fresh install,
    and of ``later_runs`` runs after it."""
    folder = str(make_jpeg_folder(count, 256)[0].parent)
    times = []
    for _ in range(1 + later_runs):
        start = time.perf_counter()
        subprocess.run([str(script), "compute", folder, "--no-cache"], check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        times.append(time.perf_counter() - start)
    return times[0], times[1:]
