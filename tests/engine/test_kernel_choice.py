"""Runs over few pixels keep numpy's kernels and skip loading the compiled one; pool
workers run numpy's BLAS on one thread."""

import subprocess
import sys
from pathlib import Path

import numpy as np
from PIL import Image

from normstats.engine import kernel_choice
from normstats.sources import FolderSource


def _folder(root: Path, count: int, size: int) -> Path:
    rng = np.random.default_rng(1)
    root.mkdir(parents=True, exist_ok=True)
    for i in range(count):
        Image.fromarray(rng.integers(0, 256, (size, size + 1, 3), dtype=np.uint8)).save(
            root / f"{i:04d}.png")
    return root


def test_the_estimate_reads_headers_and_errs_on_the_large_side(tmp_path, monkeypatch):
    from normstats.maths import fused

    monkeypatch.setattr(fused, "is_loaded", lambda: False)  # as in a fresh process
    source = FolderSource(_folder(tmp_path / "small", 20, 8))
    assert kernel_choice.estimated_pixel_bytes(source) == 20 * 8 * 9 * 3
    assert not kernel_choice.compiled_kernel_pays(source)
    monkeypatch.setattr(kernel_choice, "KERNEL_WORTH_BYTES", 100)
    assert kernel_choice.compiled_kernel_pays(source)
    monkeypatch.setattr(kernel_choice, "KERNEL_WORTH_BYTES", 256 << 20)
    (tmp_path / "small" / "0000.png").write_bytes(b"not an image any more")
    assert kernel_choice.estimated_pixel_bytes(FolderSource(tmp_path / "small")) is None
    assert kernel_choice.compiled_kernel_pays(FolderSource(tmp_path / "small"))


_RUN = """
import json, sys
from normstats.engine import kernel_choice, pipeline
pipeline.SMALL_RUN_BYTES = 0  # a pool run, not the in-process one
if sys.argv[2] == "kernel":
    kernel_choice.KERNEL_WORTH_BYTES = 0
import normstats
stats = normstats.compute(sys.argv[1], workers=2, scheduler="processes", cache=False)
print(json.dumps(stats.to_dict()))
print("numba" in sys.modules)
"""


def test_a_pool_run_over_few_pixels_never_loads_numba_and_answers_the_same(tmp_path):
    folder = _folder(tmp_path / "pngs", 60, 12)
    runs = {}
    for choice in ("numpy", "kernel"):
        out = subprocess.run([sys.executable, "-c", _RUN, str(folder), choice], check=True,
                             capture_output=True, text=True).stdout.splitlines()
        runs[choice] = (out[0], out[1])
    assert runs["numpy"][1] == "False" and runs["kernel"][1] == "True"
    assert runs["numpy"][0] == runs["kernel"][0]  # bit-identical JSON


def test_pool_workers_run_blas_on_one_thread():
    from threadpoolctl import threadpool_info

    from normstats.engine.process_pool import process_pool

    with process_pool(2) as pool:
        infos = [pool.submit(threadpool_info).result() for _ in range(4)]
    blas = [lib for info in infos for lib in info if lib["user_api"] == "blas"]
    assert blas and all(lib["num_threads"] == 1 for lib in blas)
