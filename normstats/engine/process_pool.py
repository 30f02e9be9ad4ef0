"""The local process pool: forked workers that start fast and die with their run.

Workers are forked (on Linux) after the folder walk, so they inherit the listing and the
loaded compiled kernel instead of importing and compiling again; each is tied to its
parent's life (`_worker_start`) so a killed run leaves no orphan decoding on, and none
holding the record cache's lock.
"""

from __future__ import annotations

import contextlib
import gc
import multiprocessing
import os
import signal
import sys
import threading
import time
import warnings
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor

from normstats.engine.task_threads import stop_idle

__all__ = ["process_pool", "one_blas_thread"]


@contextlib.contextmanager
def process_pool(workers: int) -> Iterator[ProcessPoolExecutor]:
    """A pool of forked workers: no re-import per worker, so small runs start fast.

    Each worker dies with this process (`_worker_start`): a SIGKILLed run leaves no
    orphan decoding on, and none holding the record cache's lock.
    """
    method = "fork" if sys.platform.startswith("linux") else "spawn"
    stop_idle()  # no thread of normstats' in the process its workers are forked from
    # Frozen objects are skipped by the workers' garbage collector, so the parent's file
    # list is not copied page by page into every worker. Unfreezing afterwards thaws every
    # frozen object, so when the caller has frozen objects of its own, none are frozen here.
    freeze = gc.get_freeze_count() == 0
    if freeze:
        gc.freeze()
    try:
        with one_blas_thread(), \
                ProcessPoolExecutor(max(1, workers), mp_context=multiprocessing.get_context(method),
                                    initializer=_worker_start, initargs=(os.getpid(),)) as pool:
            yield pool
    finally:
        if freeze:
            gc.unfreeze()


_PR_SET_PDEATHSIG = 1


def _exit_when_orphaned(parent: int, period: float = 1.0) -> None:
    """Poll the parent's pid: when the parent dies its orphans are re-parented, so a
    changed ``getppid()`` means the run is gone and this worker exits at once."""
    while os.getppid() == parent:
        time.sleep(period)
    os._exit(1)


def _worker_start(parent: int) -> None:
    """Tie a pool worker's life to its parent's, and set its process-wide decoding state.

    ``PR_SET_PDEATHSIG`` has the kernel SIGKILL the worker when the parent dies, even by
    SIGKILL (strictly, when the forking thread ends: the pool forks from the thread that
    runs the graph, which outlives the pool); if the parent died before the call, the
    worker already has a new parent and exits at once. The worker is a process of ours,
    so Pillow's own limit is lifted (the policy's is enforced from each header,
    `normstats.sources.decoding.decode`; Pillow itself loads only with a file that needs
    it) and Pillow's UserWarnings about damaged files, which the skip reasons already
    word, are silenced. BLAS comes limited to one thread from the parent
    (`one_blas_thread`).
    """
    if sys.platform.startswith("linux"):
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    else:  # no such call (macOS, BSDs): a thread notices the new parent within a second
        threading.Thread(target=_exit_when_orphaned, args=(parent,), daemon=True,
                         name="normstats-orphan-watch").start()
    if os.getppid() != parent:
        os._exit(1)
    from normstats.sources.decoding.decode import lift_pillow_limit

    lift_pillow_limit()  # no limit, so no DecompressionBombWarning either
    warnings.simplefilter("ignore", UserWarning)


#: How many `one_blas_thread` contexts are open: only the outermost sets and restores.
_blas_limits_open = 0


@contextlib.contextmanager
def one_blas_thread() -> Iterator[None]:
    """numpy's BLAS on one thread while the pool lives, so the workers are forked with one.

    Each worker is one of the run's parallel workers: BLAS (the exact sums of 16-bit and
    float images, and of 8-bit ones without the compiled kernel) must not start threads
    of its own in every worker (two workers with two OpenBLAS threads each ran a folder of
    small PNGs at half the speed of one). Limiting it in each worker instead made OpenBLAS
    start a helper thread there that spun for a while, taking ~10% of a 0.5 s run from the
    decoders; forked with the limit set, a worker runs BLAS inline and starts no thread.
    The caller's own BLAS calls run on one thread until the pool closes, then as before.

    OpenBLAS stops its helper thread when the process forks, and any later change of its
    thread count starts it again, spinning for ~0.1 s as it waits for work: a caller with
    more to do once the pool closes (the record cache's compaction) opens this context
    around that work too. Only the outermost context sets and restores the limit, so the
    helper spins after all of it: it took a core from the compaction of 100,000 PNGs 16²
    (72-75 ms against 45-50).

    Examples
    --------
    >>> with one_blas_thread():
    ...     with one_blas_thread():  # sets nothing: the outer context holds the limit
    ...         pass
    """
    global _blas_limits_open
    if _blas_limits_open:
        yield
        return
    from threadpoolctl import threadpool_limits

    with threadpool_limits(limits=1, user_api="blas"):
        _blas_limits_open += 1
        try:
            yield
        finally:
            _blas_limits_open -= 1
