"""Sections comparing normstats with its peers: uint8 array, JPEG folder, PNG folder."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from pathlib import Path

import array_section
import numpy as np
import peers
from synthetic import DATA, make_jpeg_folder, make_png_folder
from timing import difference, goal, measure, measure_alternated, peer_table

import normstats


def optional(module: str) -> bool:
    try:
        importlib.import_module(module)
        return True
    except ImportError:
        print(f"(peer skipped: {module} is not installed)")
        return False


NUMPY = "numpy float64, blocked matmul (2 threads)"
TORCH = "PyTorch CPU float64, blocked matmul (2 threads)"


def bench_array(quick: bool) -> dict:
    """Photo-like uint8 N×32×32×3 in memory, every statistic including per-image std, with
    the memory-read speed of the same bytes measured in the same run."""
    from concurrent.futures import ThreadPoolExecutor

    n = 10_000 if quick else 50_000
    x = array_section.photo_like(n, 32, np.random.default_rng(0))
    candidates: list[tuple[str, Callable[[], object], int]] = [
        (NUMPY, lambda: peers.numpy_blocked(x), 5),
        ("numpy float64, textbook (whole-array copy, 1 thread)",
         lambda: peers.numpy_float64(x), 3),
        ("dask.array float64", lambda: peers.dask_array(x), 2),
    ]
    if optional("torch"):
        candidates.append((TORCH, lambda: peers.torch_blocked(x), 5))
        candidates.append(("PyTorch CPU float32, textbook (2 threads)",
                           lambda: peers.torch_cpu(x), 3))
    if optional("sklearn"):
        candidates.append(("scikit-learn StandardScaler (pooled only)",
                           lambda: peers.sklearn_scaler(x), 1))
    exact = normstats.compute(x, workers=2)
    memory = "memory read: uint64 sum of the same bytes (2 threads)"
    kernel = "normstats' compiled pass alone, same bytes (2 threads)"
    cached = (f"normstats' compiled pass alone, a batch of {array_section.CACHED_BATCH} "
              "images in each core's cache (2 threads)")
    with ThreadPoolExecutor(2) as pool:  # started first: thread start-up is not memory time
        array_section.memory_read(x, pool)
        # normstats, the memory probe and the compiled pass alone alternate call by call:
        # the shares of memory speed compare figures taken under the same conditions (CPU
        # clock, other work)
        ours_run, memory_run, kernel_run, cached_run = measure_alternated(
            [lambda: normstats.compute(x, workers=2, scale=255),
             lambda: array_section.memory_read(x, pool),
             lambda: array_section.compiled_pass(x, pool),
             lambda: array_section.compiled_pass_in_cache(x, pool)], 15)
    rows = [("normstats (2 threads)", *ours_run[:3], difference(ours_run[3], exact))]
    for name, function, repeats in candidates:
        med, low, high, result = measure(function, repeats)
        rows.append((name, med, low, high, difference(result, exact)))
    rows.append((kernel, *kernel_run[:3], "(the pass alone: no summary)"))
    per_image = n / cached_run[3]  # its batches hold a few images fewer than the array
    rows.append((cached, *(t * per_image for t in cached_run[:3]), "(the pass alone: no summary)"))
    rows.append((memory, *memory_run[:3], "(reads only)"))
    med = memory_run[0]
    medians = {row[0]: row[1] for row in rows}
    ours = medians["normstats (2 threads)"]
    values = {"images": n, "megabytes": x.nbytes / 1e6,
              "images_in_cache": array_section.CACHED_BATCH,
              "std_exponents": array_section.std_exponents(x),
              "speedup_numpy": medians[NUMPY] / ours,
              "speedup_numpy_textbook":
                  medians["numpy float64, textbook (whole-array copy, 1 thread)"] / ours,
              "gb_per_s": x.nbytes / ours / 1e9, "memory_gb_per_s": x.nbytes / med / 1e9}
    values["share_of_memory"] = values["gb_per_s"] / values["memory_gb_per_s"]
    values["kernel_gb_per_s"] = x.nbytes / medians[kernel] / 1e9
    values["cached_kernel_gb_per_s"] = x.nbytes / medians[cached] / 1e9
    values["kernel_share_of_memory"] = med / medians[kernel]
    values["cached_kernel_share_of_memory"] = med / medians[cached]
    values["share_of_kernel"] = medians[kernel] / ours
    # a pass that does its arithmetic and its memory reads one after the other takes the
    # sum of the two times: 1 / (1/A + 1/M) of the memory's speed M, A/(A+M) of it
    values["serial_share_of_memory"] = medians[memory] / (medians[memory] + medians[cached])
    goals = [goal(f"photo-like uint8 array {n:,}×32×32×3, all statistics ≥ 10× the competent "
                  "numpy peer (blocked float64 matmul, 2 threads)",
                  values["speedup_numpy"], ">=", 10, "{:.1f}×"),
             goal("same, ≥ 60% of the memory read speed measured in this run",
                  values["share_of_memory"], ">=", 0.6, "{:.1%}",
                  bound=("its compiled pass alone on batches held in cache (2 threads)",
                         values["cached_kernel_share_of_memory"]))]
    if TORCH in medians:
        values["speedup_torch"] = medians[TORCH] / ours
        values["speedup_torch_textbook"] = \
            medians["PyTorch CPU float32, textbook (2 threads)"] / ours
        goals.append(goal("same, ≥ 10× the competent PyTorch CPU peer (blocked float64 matmul, "
                          "2 threads)", values["speedup_torch"], ">=", 10, "{:.1f}×"))
    return {"title": f"photo-like uint8 array {n:,}×32×32×3, all statistics",
            "tables": {"main": peer_table(rows, n, "normstats (2 threads)")},
            "values": values, "goals": goals}


def compare_on_folder(root: Path, files: list[Path]) -> tuple[list[tuple], dict]:
    """normstats against the folder peers on ``files``, 3 alternated rounds, checked for
    agreement."""
    candidates = [
        ("normstats (2 processes)", lambda: normstats.compute(root, workers=2)),
        ("decode only, Pool(2), normstats' decoder",
         lambda: peers.pool_decode_only_normstats(files)),
        ("decode only, Pool(2), Pillow", lambda: peers.pool_decode_only(files)),
        ("Pool(2) Pillow + numpy float64", lambda: peers.pool_pillow_numpy(files)),
    ]
    if optional("torch"):
        candidates.append(("forum recipe (PIL + torch, 1 process)",
                           lambda: peers.forum_recipe(files)))
    rows = []
    exact = normstats.compute(root, workers=2)
    timings = measure_alternated([function for _, function in candidates], 3)
    for (name, _), (med, low, high, result) in zip(candidates, timings):
        rows.append((name, med, low, high, difference(result, exact)))
    return rows, {row[0]: row[1] for row in rows}


def bench_folder(quick: bool) -> dict:
    """A folder of 256×256 JPEGs: forum recipe, Pool of Pillow, decode-only, normstats."""
    count = 1_000 if quick else 10_000
    files = make_jpeg_folder(count, 256)
    rows, med = compare_on_folder(files[0].parent, files)
    ours = med["normstats (2 processes)"]
    values = {"images": count,
              "speedup_forum": med.get("forum recipe (PIL + torch, 1 process)", 0.0) / ours,
              "share_of_decode": med["decode only, Pool(2), normstats' decoder"] / ours}
    goals = [goal(f"{count:,} JPEGs 256²: ≥ 3× the forum recipe", values["speedup_forum"],
                  ">=", 3, "{:.1f}×"),
             goal("same: ≥ 85% of the speed of decode-only with the same decoder and "
                  "parallelism", values["share_of_decode"], ">=", 0.85, "{:.1%}")]
    return {"title": f"folder of {count:,} photo-like JPEGs 256×256",
            "tables": {"main": peer_table(rows, count, "normstats (2 processes)")},
            "values": values, "goals": goals}


def bench_png(quick: bool) -> dict:
    """A folder of 32×32 PNGs: per-image overhead dominates, so batching matters."""
    count = 4_000 if quick else 20_000
    files = make_png_folder(count, 32)
    rows, med = compare_on_folder(DATA / f"png_32_{count}", files)
    ours = med["normstats (2 processes)"]
    values = {"images": count,
              "speedup_forum": med.get("forum recipe (PIL + torch, 1 process)", 0.0) / ours}
    return {"title": f"folder of {count:,} PNGs 32×32",
            "tables": {"main": peer_table(rows, count, "normstats (2 processes)")},
            "values": values,
            "goals": [goal(f"{count:,} PNGs 32²: ≥ 3× the forum recipe",
                           values["speedup_forum"], ">=", 3, "{:.1f}×")]}
