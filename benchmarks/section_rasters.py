"""Multispectral rasters (issue 29): folders of 13-band uint16 GeoTIFF tiles with nodata.

Two datasets, generated once under ``benchmarks/data/``: 20,000 tiles of 64×64 and 2,000
of 256×256, 13 bands of uint16 each (a Sentinel-2 tile's band count), deflate-compressed
with horizontal differencing (GDAL's ``PREDICTOR=2``), pixels a smooth field per band plus
noise, and about 10% nodata (value 0, named by a GDAL_NODATA tag) in rectangular blocks,
as at the edge of a satellite's swath.

Three whole processes each, fresh, alternated round by round:

- ``normstats compute FOLDER --mode keep`` (two worker processes, no cache);
- the decode-only ceiling: a ``Pool(2)`` reading every tile with ``tifffile.imread``
  (`benchmarks/decode_only.py tiff`);
- the torchgeo-style peer (`peers.torchgeo_style`): one process reading each tile, masking
  its nodata and adding float64 sums per band.

The numbers are checked, not assumed: normstats' mean and std against the exact oracle
(Python-int sums of the valid values, one rounding from a Fraction), bit for bit, and the
peer's against the same oracle.
"""

from __future__ import annotations

import json
import math
import statistics
import subprocess
import sys
import time
from fractions import Fraction
from pathlib import Path

import numpy as np
from synthetic import DATA
from timing import goal

HERE = Path(__file__).resolve().parent
BANDS = 13
NODATA = 0


def smooth_tile(rng: np.random.Generator, size: int) -> np.ndarray:
    """(size, size, 13) uint16: per band a level, a bilinear field over a 16-pixel grid,
    noise, and a rectangular block of nodata covering 0–20% of the tile (10% on average)."""
    grid = size // 16 + 2
    coarse = rng.normal(0.0, 1.0, (grid, grid, BANDS))
    position = np.arange(size) / 16
    cell = position.astype(int)
    down, across = (position - cell)[:, None, None], (position - cell)[None, :, None]
    rows = coarse[cell] * (1 - down) + coarse[cell + 1] * down  # bilinear: rows, then columns
    field = rows[:, cell] * (1 - across) + rows[:, cell + 1] * across
    level = rng.uniform(300.0, 4000.0, BANDS)
    pixels = level + 500.0 * field + rng.normal(0.0, 8.0, field.shape)
    tile = np.clip(np.rint(pixels), 1, 65535).astype(np.uint16)
    share = rng.uniform(0.0, 0.2)
    height = max(1, int(size * math.sqrt(share)))
    width = int(share * size * size / height)
    top = 0 if rng.random() < 0.5 else size - height
    left = 0 if rng.random() < 0.5 else size - width
    tile[top:top + height, left:left + width] = NODATA
    return tile


def make_raster_folder(count: int, size: int) -> Path:
    """``count`` GeoTIFF tiles of size² × 13 bands in ``benchmarks/data`` (made once)."""
    import tifffile

    folder = DATA / f"rasters_{size}_{count}"
    if len(list(folder.glob("*.tif"))) == count:
        return folder
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(29)
    for i in range(count):
        tifffile.imwrite(folder / f"{i:06d}.tif", smooth_tile(rng, size),
                         photometric="minisblack", planarconfig="contig",
                         compression="deflate", predictor=True,
                         extratags=[(42113, "s", 0, str(NODATA), False)])
    return folder


def exact_oracle(folder: Path) -> tuple[list[float], list[float]]:
    """Per band, mean and pooled std of the valid values, from Python-int sums of every
    tile and one rounding of the exact fractions (the numbers normstats must give)."""
    import tifffile

    n, total, squares = [0] * BANDS, [0] * BANDS, [0] * BANDS
    for path in sorted(folder.glob("*.tif")):
        pixels = tifffile.imread(path).reshape(-1, BANDS).astype(np.int64)
        valid = pixels != NODATA
        kept = np.where(valid, pixels, 0)
        for c, (count, s, q) in enumerate(zip(valid.sum(axis=0), kept.sum(axis=0),
                                              (kept * kept).sum(axis=0))):
            n[c] += int(count)
            total[c] += int(s)
            squares[c] += int(q)
    means = [float(Fraction(s, k)) for s, k in zip(total, n)]
    stds = [math.sqrt(float(Fraction(k * q - s * s, k * k)))
            for s, q, k in zip(total, squares, n)]
    return means, stds


_PEER = """
import json, sys
sys.path.insert(0, sys.argv[1])
import peers
mean, std, _ = peers.torchgeo_style(sys.argv[2])
print(json.dumps({"mean": list(map(float, mean)), "std": list(map(float, std))}))
"""


def _run(command: list[str]) -> tuple[float, str]:
    start = time.perf_counter()
    out = subprocess.run(command, check=True, capture_output=True, text=True).stdout
    return time.perf_counter() - start, out


def _race(commands: dict[str, list[str]], rounds: dict[str, int]
          ) -> tuple[dict[str, list[float]], dict[str, str]]:
    """Fresh processes, alternated round by round (a command runs in the first
    ``rounds[name]`` rounds); the output of each command's last run."""
    for command in commands.values():  # warm the file cache (and check they run)
        _run(command)
    times: dict[str, list[float]] = {name: [] for name in commands}
    outputs: dict[str, str] = {}
    for round_ in range(max(rounds.values())):
        for name, command in commands.items():
            if round_ < rounds[name]:
                seconds, outputs[name] = _run(command)
                times[name].append(seconds)
    return times, outputs


def _gap(values: list[float], exact: list[float]) -> float:
    return max(abs(a - b) / abs(b) for a, b in zip(values, exact))


def _dataset(count: int, size: int, quick: bool) -> tuple[list[list], dict[str, float]]:
    folder = make_raster_folder(count, size)
    script = str(Path(sys.executable).with_name("normstats"))
    names = {"ours": f"normstats compute --mode keep: {count:,} tiles {size}²×13",
             "ceiling": f"decode only (tifffile, Pool(2)): {count:,} tiles {size}²×13",
             "peer": f"torchgeo-style (tifffile + masked float64, 1 process): {count:,} "
                     f"tiles {size}²×13",
             "percentiles": f"normstats compute --mode keep --percentiles: {count:,} tiles "
                            f"{size}²×13"}
    commands = {
        names["ours"]: [script, "compute", str(folder), "--mode", "keep", "--no-cache",
                        "--workers", "2", "--json"],
        names["ceiling"]: [sys.executable, str(HERE / "decode_only.py"), "tiff", str(folder)],
        names["peer"]: [sys.executable, "-c", _PEER, str(HERE), str(folder)],
        names["percentiles"]: [script, "compute", str(folder), "--mode", "keep", "--no-cache",
                               "--workers", "2", "--json", "--percentiles"],
    }
    rounds = {names["ours"]: 2 if quick else 5, names["ceiling"]: 2 if quick else 5,
              names["peer"]: 1 if quick else 2, names["percentiles"]: 1 if quick else 3}
    times, outputs = _race(commands, rounds)
    med = {name: statistics.median(values) for name, values in times.items()}
    means, stds = exact_oracle(folder)
    ours, peer = json.loads(outputs[names["ours"]]), json.loads(outputs[names["peer"]])
    exact = ours["mean"] == means and ours["std"] == stds
    differences = {names["ours"]: "bit-identical to the exact oracle" if exact else
                   f"DIFFERS from the exact oracle by {_gap(ours['mean'], means):.1e}",
                   names["ceiling"]: "(computes nothing)",
                   names["peer"]: f"{max(_gap(peer['mean'], means), _gap(peer['std'], stds)):.1e}"
                                  " relative",
                   names["percentiles"]: "(exact percentiles of the valid values; tests "
                                         "compare them with numpy's)"}
    rows = [[name, med[name], [min(times[name]), max(times[name])], count / med[name],
             med[name] / med[names["ours"]], differences[name]] for name in commands]
    values = {"peer_speedup": med[names["peer"]] / med[names["ours"]],
              "share_of_decode": med[names["ceiling"]] / med[names["ours"]],
              "exact": float(exact), "ours_seconds": med[names["ours"]],
              "percentiles_cost": med[names["percentiles"]] / med[names["ours"]] - 1}
    return rows, values


def bench_rasters(quick: bool) -> dict:
    """13-band uint16 GeoTIFF tiles with nodata: whole processes against the decode-only
    ceiling and the torchgeo-style peer, numbers checked against the exact oracle."""
    small, large = (2_000, 200) if quick else (20_000, 2_000)
    rows_small, small_values = _dataset(small, 64, quick)
    rows_large, large_values = _dataset(large, 256, quick)
    columns = [["whole process", ""], ["median s", "{:.2f}"], ["min–max s", "{:.2f}"],
               ["tiles/s", "{:,.0f}"], ["time vs normstats", "{:.2f}×"],
               ["mean/std against the exact oracle", ""]]
    values = {"small_tiles": small, "large_tiles": large,
              **{f"small_{k}": v for k, v in small_values.items()},
              **{f"large_{k}": v for k, v in large_values.items()}}
    return {"title": "multispectral GeoTIFF tiles with nodata",
            "tables": {"main": {"columns": columns, "rows": rows_small + rows_large}},
            "values": values, "goals": goals(values)}


def goals(values: dict) -> list[dict]:
    """The section's goals, from its measured ``values``. The peer's floor is the
    decode-only process: its time against the peer's (peer/ours over ceiling/ours)."""
    made = []
    for label, size in (("small", 64), ("large", 256)):
        count = values[f"{label}_tiles"]
        made += [
            goal(f"{count:,} GeoTIFF tiles {size}²×13 uint16, 10% nodata: whole process ≥ 10× "
                 "the torchgeo-style peer", values[f"{label}_peer_speedup"], ">=", 10,
                 "{:.1f}×", floor=("the decode-only process against the peer",
                                   values[f"{label}_peer_speedup"]
                                   / values[f"{label}_share_of_decode"])),
            goal("same: ≥ 80% of a decode-only Pool(2) tifffile process",
                 values[f"{label}_share_of_decode"], ">=", 0.8, "{:.1%}"),
            goal("same: mean and std bit-identical to the exact oracle",
                 values[f"{label}_exact"], ">=", 1, "{:.0f}")]
    return made
