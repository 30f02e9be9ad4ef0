"""The 8-bit statistics kernel alone: GB/s on one core, images in cache.

    python benchmarks/kernel_speed.py [NAME=PATH ...]

Times ``normstats.maths._moments.moments`` on random uint8 images of a few shapes
(N, H, W, C), one call for the N images, for every kernel variant this CPU runs (see
``_moments._variants()``), and for other builds of the extension given as NAME=PATH (a
copy of an older ``_moments*.so``, say). The variants are alternated within each of 15
repeats, so a noisy machine slows them alike; the best and the median repeat are shown.
Set OPENBLAS_NUM_THREADS=1 on a small machine: idle BLAS threads otherwise spin beside it.
"""

from __future__ import annotations

import importlib.util
import statistics
import sys
import time

import numpy as np

SHAPES = [(1, 256, 256, 3), (1, 256, 256, 1), (1, 256, 256, 4),
          (256, 32, 32, 3), (256, 32, 32, 1), (256, 32, 32, 4), (1, 1080, 1920, 3)]
REPEATS = 15


def load(name: str, path: str):
    """Another build of the extension, under a package name of its own."""
    spec = importlib.util.spec_from_file_location(f"{name}._moments", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main(arguments: list[str]) -> None:
    from normstats.maths import _moments

    runs = {}
    for argument in arguments:
        name, path = argument.split("=", 1)
        runs[name] = (load(name, path), None)
    for variant in _moments._variants():
        runs[variant] = (_moments, variant)
    default = _moments._variants()[0]
    rng = np.random.default_rng(0)
    print(f"{'(N, H, W, C)':>20} " + " ".join(f"{k:>11}" for k in runs)
          + "   GB/s, best (median)")
    try:
        for n, h, w, c in SHAPES:
            flat = rng.integers(0, 256, size=(n, h * w * c), dtype=np.uint8)
            outputs = (np.zeros((n, c), np.int64), np.zeros((n, c), np.int64),
                       np.full((n, c), 255, np.uint8), np.zeros((n, c), np.uint8))
            calls = max(1, int(2e7 // flat.nbytes))
            seconds = {k: [] for k in runs}
            for _ in range(REPEATS):
                for key, (module, variant) in runs.items():
                    if variant is not None:
                        module._select(variant)
                    start = time.perf_counter()
                    for _ in range(calls):
                        module.moments(flat, n, c, *outputs)
                    seconds[key].append((time.perf_counter() - start) / calls)
            speeds = [(flat.nbytes / min(s) / 1e9, flat.nbytes / statistics.median(s) / 1e9)
                      for s in seconds.values()]
            cells = [f"{best:4.1f} ({median:4.1f})" for best, median in speeds]
            print(f"{str((n, h, w, c)):>20} " + " ".join(f"{cell:>11}" for cell in cells))
    finally:
        _moments._select(default)


if __name__ == "__main__":
    main(sys.argv[1:])
