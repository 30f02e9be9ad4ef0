"""The pool of forked workers: numpy's BLAS on one thread in each."""

import threadpoolctl
from threadpoolctl import threadpool_info

import normstats.engine.process_pool as process_pool_module
from normstats.engine.process_pool import one_blas_thread, process_pool


def test_pool_workers_run_blas_on_one_thread():
    """Two workers each running BLAS on two threads would share two cores four ways."""
    with process_pool(2) as pool:
        infos = [pool.submit(threadpool_info).result() for _ in range(4)]
    blas = [lib for info in infos for lib in info if lib["user_api"] == "blas"]
    assert blas and all(lib["num_threads"] == 1 for lib in blas)


def _threads_after_a_blas_call() -> int:
    import os

    import numpy as np

    a = np.ones((64, 64), np.float32)
    a @ a  # a BLAS call, as the exact sums of 16-bit images make
    return len(os.listdir("/proc/self/task"))


def test_pool_workers_start_no_blas_thread_and_the_callers_blas_is_restored():
    """Limited inside each worker, OpenBLAS started a helper thread there that spun for a
    while beside the decoder; forked with the limit set, a worker runs BLAS inline."""
    import sys

    def blas_threads() -> list[int]:
        return [lib["num_threads"] for lib in threadpool_info() if lib["user_api"] == "blas"]

    before = blas_threads()
    with process_pool(2) as pool:
        threads = [pool.submit(_threads_after_a_blas_call).result() for _ in range(4)]
    if sys.platform.startswith("linux"):
        # one thread, the worker's own (the orphan watchdog thread runs off Linux only)
        assert threads == [1, 1, 1, 1]
    assert blas_threads() == before


def test_only_the_outermost_blas_limit_sets_and_restores(monkeypatch):
    """OpenBLAS restarts its helper thread (stopped by the pool's fork) at any change of its
    thread count, and the helper then spins ~0.1 s: a pool opened under a caller's limit
    (the record cache's, held through its compaction) changes nothing when it closes."""
    calls = []
    real = threadpoolctl.threadpool_limits

    def counted(*args, **kwargs):
        calls.append(kwargs)
        return real(*args, **kwargs)

    monkeypatch.setattr(threadpoolctl, "threadpool_limits", counted)

    def blas_threads() -> list[int]:
        return [lib["num_threads"] for lib in threadpool_info() if lib["user_api"] == "blas"]

    before = blas_threads()
    with one_blas_thread():
        with process_pool(2) as pool:
            worker = pool.submit(threadpool_info).result()
        assert all(lib["num_threads"] == 1 for lib in worker if lib["user_api"] == "blas")
        assert len(calls) == 1 and blas_threads() == [1] * len(before)
    assert blas_threads() == before and process_pool_module._blas_limits_open == 0
    with process_pool(2):  # alone, the pool sets its own limit
        assert len(calls) == 2 and blas_threads() == [1] * len(before)
    assert blas_threads() == before


_POOL_RUN = """
import json, sys
import normstats
import normstats.engine.pipeline as pipeline

pipeline.SMALL_RUN_BYTES = 0  # the pool, however small the folder
stats = normstats.compute(sys.argv[1], workers=2, task_size=1, cache=False,
                          max_pixels=10**9)
print(json.dumps({"pillow_in_parent": "PIL.Image" in sys.modules, "images": stats.images,
                  "skipped": {s.path: s.reason for s in stats.skipped}}))
"""


def _bmp_header_only(width: int, height: int) -> bytes:
    """A 24-bit BMP whose header claims width x height pixels, with no pixel data."""
    import struct

    row = (width * 3 + 3) // 4 * 4
    info = struct.pack("<IiiHHIIiiII", 40, width, height, 1, 24, 0, row * height, 2835,
                       2835, 0, 0)
    return b"BM" + struct.pack("<IHHI", 54 + row * height, 0, 0, 54) + info


def test_pillow_loads_only_in_the_worker_that_needs_it_with_its_limit_lifted(tmp_path, rng):
    """A pool run's parent never loads Pillow's image module (~10 ms; the fast paths decode
    PNG and JPEG), and a worker that loads it for a file lifts Pillow's own limit as it
    does: a 14,000² BMP allowed by max_pixels reaches the decoder (truncated here) instead
    of stopping at Pillow's limit of this process."""
    import json
    import subprocess
    import sys

    from tests.reliability_helpers import encode, photo

    for i, fmt in enumerate(("PNG", "JPEG", "PNG", "JPEG")):
        (tmp_path / f"{i}.{fmt.lower()}").write_bytes(encode(photo(rng, 12, 10), fmt))
    (tmp_path / "huge.bmp").write_bytes(_bmp_header_only(14_000, 14_000))
    out = subprocess.run([sys.executable, "-c", _POOL_RUN, str(tmp_path)], check=True,
                         capture_output=True, text=True).stdout
    result = json.loads(out)
    assert result["pillow_in_parent"] is False
    assert result["images"] == 4
    assert list(result["skipped"]) == ["huge.bmp"]
    assert "limit of Pillow" not in result["skipped"]["huge.bmp"]
    assert "truncated" in result["skipped"]["huge.bmp"]
