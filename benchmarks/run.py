"""Reproduce every figure of benchmarks/README.md: normstats against its peers, same run.

    python benchmarks/run.py [--quick] [--only array,folder,...]

Data is generated deterministically; each measurement is repeated and reported as the
median with its spread (min–max); ratios compare medians measured in this one run, so a
busy machine slows peers and normstats alike.
"""

from __future__ import annotations

import argparse
import importlib
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import array_section  # noqa: E402
import peers  # noqa: E402

import normstats  # noqa: E402

DATA = Path(__file__).resolve().parent / "data"


def measure(function: Callable[[], object], repeats: int) -> tuple[float, float, float, object]:
    """Median, min and max seconds over ``repeats`` calls, and the last result."""
    times, result = [], None
    for _ in range(repeats):
        start = time.perf_counter()
        result = function()
        times.append(time.perf_counter() - start)
    return statistics.median(times), min(times), max(times), result


def print_table(title: str, rows: list[tuple], unit: str, work: float,
                reference: str) -> list[str]:
    """Markdown rows: name, median s, spread, throughput, ratio, agreement with normstats."""
    base = {row[0]: row[1] for row in rows}[reference]
    lines = [f"### {title}", "", f"| tool | median s | spread s | {unit} | "
             f"{reference} speed-up vs tool | max difference from normstats |",
             "|---|---|---|---|---|---|"]
    for name, med, low, high, difference in rows:
        lines.append(f"| {name} | {med:.3f} | {low:.3f}–{high:.3f} | {work / med:,.0f} | "
                     f"{med / base:.1f}× | {difference} |")
    print("\n".join(lines) + "\n", flush=True)
    return lines + [""]


def difference(result: tuple, stats: normstats.DatasetStats) -> str:
    """Largest absolute difference of a peer's (mean, std, per-image std) from normstats."""
    if result is None or result[0] is None:
        return "(computes nothing)"
    pairs = [(result[0], stats.mean), (result[1], stats.std), (result[2], stats.per_image_std)]
    gaps = [np.max(np.abs(np.asarray(a, dtype=np.float64) - np.asarray(b)))
            for a, b in pairs if a is not None]
    return f"{max(gaps):.1e}"


def normstats_triple(stats: normstats.DatasetStats) -> tuple:
    return stats.mean, stats.std, stats.per_image_std


def optional(module: str) -> bool:
    try:
        importlib.import_module(module)
        return True
    except ImportError:
        print(f"(peer skipped: {module} is not installed)")
        return False


def bench_array(quick: bool) -> list[str]:
    """Photo-like uint8 N×32×32×3 in memory, every statistic including per-image std."""
    rows, lines = array_section_rows(quick)
    print("\n".join(lines), flush=True)
    return lines


def array_section_rows(quick: bool) -> tuple[list[dict], list[str]]:
    """The array section as row dicts (tool, median_s, min_s, max_s, gb_per_s, images_per_s,
    speedup, difference) and its markdown; the last row is the memory-read probe."""
    n = 10_000 if quick else 50_000
    x = array_section.photo_like(n, 32, np.random.default_rng(0))
    candidates: list[tuple[str, Callable[[], object], int]] = [
        ("normstats (2 threads)", lambda: normstats.compute(x, workers=2, scale=255), 7),
        ("numpy float64", lambda: peers.numpy_float64(x), 3),
        ("dask.array float64", lambda: peers.dask_array(x), 2),
    ]
    if optional("torch"):
        candidates.append(("PyTorch CPU float32 (2 threads)", lambda: peers.torch_cpu(x), 3))
    if optional("sklearn"):
        candidates.append(("scikit-learn StandardScaler (pooled only)",
                           lambda: peers.sklearn_scaler(x), 1))
    exact = normstats.compute(x, workers=2)

    def compare(result: object) -> str:
        if isinstance(result, normstats.DatasetStats):
            result = normstats_triple(result)
        return difference(result, exact)

    rows = array_section.array_rows(candidates, x, compare)
    title = (f"uint8 photo-like array {n}×32×32×3 ({x.nbytes / 1e6:.0f} MB; per-image stds "
             f"over {array_section.std_exponents(x)} float exponents), all statistics")
    return rows, array_section.markdown(title, rows)


def make_jpeg_folder(count: int, size: int) -> list[Path]:
    """``count`` photo-like JPEGs (quality 90): a smooth scene plus full-resolution texture.

    The texture matters: a JPEG of a smooth upscaled image decodes ~2x faster than a photo,
    which would flatter every tool's decode-bound figures.
    """
    folder = DATA / f"photo_{size}_{count}"
    files = sorted(folder.glob("*.jpg"))
    if len(files) == count:
        return files
    from PIL import Image

    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(1)
    for i in range(count):
        cast = rng.uniform(40, 215, size=3)
        coarse = rng.normal(0, 30, size=(size // 16, size // 16, 3))
        scene = np.asarray(Image.fromarray(np.clip(cast + coarse, 0, 255).astype(np.uint8))
                           .resize((size, size), Image.BICUBIC), dtype=np.float64)
        texture = rng.normal(0, 12, size=(size, size, 3))
        pixels = np.clip(scene + texture, 0, 255).astype(np.uint8)
        Image.fromarray(pixels).save(folder / f"{i:06d}.jpg", quality=90)
    return sorted(folder.glob("*.jpg"))


def compare_on_folder(title: str, root: Path, files: list[Path]) -> list[str]:
    """normstats against the folder peers on ``files``, 3 runs each, checked for agreement."""
    candidates = [
        ("normstats (2 processes)", lambda: normstats.compute(root, workers=2)),
        ("decode only, Pool(2), normstats' decoder",
         lambda: peers.pool_decode_only_normstats(files)),
    ]
    candidates.append(("decode only, Pool(2) Pillow", lambda: peers.pool_decode_only(files)))
    candidates.append(("Pool(2) Pillow + numpy", lambda: peers.pool_pillow_numpy(files)))
    if optional("torch"):
        candidates.append(("forum recipe (PIL + torch, 1 process)",
                           lambda: peers.forum_recipe(files)))
    rows = []
    exact = normstats.compute(root, workers=2)
    for name, function in candidates:
        med, low, high, result = measure(function, 3)
        if isinstance(result, normstats.DatasetStats):
            result = normstats_triple(result)
        rows.append((name, med, low, high, difference(result, exact)))
    return print_table(title, rows, "images/s", len(files), "normstats (2 processes)")


def bench_folder(quick: bool) -> list[str]:
    """A folder of 256×256 JPEGs: forum recipe, Pool of Pillow, decode-only, normstats."""
    count = 1_000 if quick else 10_000
    files = make_jpeg_folder(count, 256)
    return compare_on_folder(f"folder of {count} JPEGs 256×256, all statistics",
                             files[0].parent, files)


def make_png_folder(count: int, size: int) -> list[Path]:
    """``count`` lossless PNGs of size² in 10 class folders (an ImageFolder layout)."""
    folder = DATA / f"png_{size}_{count}"
    files = sorted(folder.rglob("*.png"))
    if len(files) == count:
        return files
    from PIL import Image

    rng = np.random.default_rng(2)
    for i in range(count):
        sub = folder / f"class_{i % 10}"
        sub.mkdir(parents=True, exist_ok=True)
        pixels = np.clip(rng.uniform(30, 220, 3) + rng.normal(0, 25, (size, size, 3)), 0, 255)
        Image.fromarray(pixels.astype(np.uint8)).save(sub / f"{i:06d}.png")
    return sorted(folder.rglob("*.png"))


def bench_png(quick: bool) -> list[str]:
    """A folder of 32×32 PNGs: per-image overhead dominates, so batching matters."""
    count = 4_000 if quick else 20_000
    files = make_png_folder(count, 32)
    return compare_on_folder(f"folder of {count} PNGs 32×32, all statistics",
                             DATA / f"png_32_{count}", files)


def _run_task(task) -> object:
    return task.run()


def bench_overhead(quick: bool) -> list[str]:
    """Per-image cost of statistics, walking and Dask scheduling, for small PNGs."""
    from multiprocessing import get_context

    from normstats.sources.decode import DecodePolicy, decode_file
    from normstats.sources.folder import FolderSource

    count = 4_000 if quick else 20_000
    files = make_png_folder(count, 32)
    root = DATA / f"png_32_{count}"
    source = FolderSource(root)
    policy = DecodePolicy("RGB")
    tasks = source.tasks(workers=2)

    def decode_only() -> None:
        for path in files:
            decode_file(str(path), policy)

    def tasks_directly() -> None:
        for task in source.tasks(workers=1):
            task.run()

    def tasks_on_bare_pool() -> None:
        with get_context("fork").Pool(2) as pool:
            pool.map(_run_task, tasks, chunksize=1)

    rows = [(name, *measure(function, 5)[:3]) for name, function in (
        ("walking the folder (listing, sorting, links)", lambda: FolderSource(root)),
        ("decode only (loop over decode_file)", decode_only),
        ("decode + records (the tasks, no Dask)", tasks_directly),
        ("normstats.compute, 1 worker, sync scheduler",
         lambda: normstats.compute(root, workers=1, scheduler="sync")),
        ("the same tasks on a bare Pool(2), no Dask", tasks_on_bare_pool),
        ("normstats.compute, 2 processes", lambda: normstats.compute(root, workers=2)))]
    walk, decode, direct, sync, pool, parallel = (row[1] for row in rows)
    lines = [f"### Per-image overhead, {count} PNGs 32×32", "",
             "| stage | median s | spread s | µs per image |", "|---|---|---|---|"]
    lines += [f"| {name} | {med:.3f} | {low:.3f}–{high:.3f} | {med / count * 1e6:.0f} |"
              for name, med, low, high in rows]
    lines += ["", f"statistics add {(direct - decode) / count * 1e6:.1f} µs per image "
                  f"({(direct - decode) / decode:.1%} of decoding); walking is "
                  f"{walk / sync:.1%} of the one-process run and planning, Dask and "
                  f"task summaries {(sync - walk - direct) / sync:.1%}; with 2 processes, "
                  f"walking is {walk / parallel:.1%} and planning plus Dask over a bare "
                  f"pool of the same tasks {(parallel - walk - pool) / parallel:.1%}", ""]
    print("\n".join(lines), flush=True)
    return lines


_PEAK_RSS = """
import resource, sys, normstats
normstats.compute(sys.argv[1], workers=2, progress=False)
# VmHWM, not ru_maxrss: Linux carries ru_maxrss over exec from the benchmark's own process
peak = next(int(line.split()[1]) for line in open("/proc/self/status") if line.startswith("VmHWM"))
print(peak, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
"""


def bench_memory(quick: bool) -> list[str]:
    """Peak resident memory of a whole run, parent and worker processes, by image count."""
    import subprocess

    counts = (2_000, 20_000) if quick else (5_000, 50_000)
    lines = ["### Peak resident memory by dataset size (32×32 PNG folders)", "",
             "| images | parent peak MiB | largest worker peak MiB |", "|---|---|---|"]
    peaks = []
    for count in counts:
        make_png_folder(count, 32)
        out = subprocess.run([sys.executable, "-c", _PEAK_RSS, str(DATA / f"png_32_{count}")],
                             capture_output=True, text=True, check=True).stdout.split()
        parent, worker = int(out[0]) / 1024, int(out[1]) / 1024
        peaks.append(parent)
        lines.append(f"| {count:,} | {parent:.0f} | {worker:.0f} |")
    lines += ["", f"ratio of parent peaks, {counts[1]:,} vs {counts[0]:,} images: "
                  f"{peaks[1] / peaks[0]:.3f}", ""]
    print("\n".join(lines), flush=True)
    return lines


def script_section(script: str, full: tuple[str, ...] = (),
                   quick: tuple[str, ...] = ("--quick",)) -> Callable[[bool], list[str]]:
    """A section run by a benchmark script of its own, with its output passed through."""
    def run_script(is_quick: bool) -> list[str]:
        import subprocess

        command = [sys.executable, str(Path(__file__).resolve().parent / script)]
        output = subprocess.run(command + list(quick if is_quick else full),
                                capture_output=True, text=True, check=True).stdout
        print(output, flush=True)
        return output.splitlines() + [""]
    return run_script


def machine() -> list[str]:
    versions = []
    for module in ("numpy", "dask", "zarr", "PIL", "numba", "simplejpeg", "imagecodecs", "torch",
                   "sklearn"):
        try:
            versions.append(f"{module} {importlib.import_module(module).__version__}")
        except ImportError:
            pass
    memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    line = (f"machine: {os.cpu_count()} cores, {memory:.0f} GiB, Python "
            f"{platform.python_version()}, normstats {normstats.__version__}; "
            + ", ".join(versions))
    print(line + "\n")
    return [line, ""]


SECTIONS = {
    "array": bench_array, "folder": bench_folder, "png": bench_png,
    "overhead": bench_overhead, "memory": bench_memory,
    "normalize": script_section("bench_normalize.py"),
    "cache": script_section("bench_cache.py", ("--images", "10000", "--size", "256"),
                            ("--images", "1000", "--size", "128", "--repeat", "1")),
    "distributed": script_section("bench_distributed.py", (),
                                  ("--images", "500", "--repeats", "2")),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small data, under two minutes")
    parser.add_argument("--only", default=",".join(SECTIONS), help="comma-separated sections")
    parser.add_argument("--out", default=None, help="also write the markdown tables here")
    args = parser.parse_args()
    lines = machine()
    for name in args.only.split(","):
        lines += SECTIONS[name](args.quick)
    if args.out:
        Path(args.out).write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
