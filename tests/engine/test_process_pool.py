"""The pool of forked workers: numpy's BLAS on one thread in each."""

from threadpoolctl import threadpool_info

from normstats.engine.process_pool import process_pool


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
